// Portal links: an admin hands one tenant's subscribers a signed, expiring
// link to their portal (POST /v1/portal-links). The link is a credential
// until it expires: it is shown here once, to copy and pass on.

import { post } from "../api.js";
import { h, fill, field, showError, time } from "../dom.js";

const EXPIRIES = [["3600", "1 hour"], ["86400", "1 day"], ["604800", "7 days (the longest)"]];

/** Renders the portal-link form into `main`. */
export async function render(main, { session }) {
  const out = h("div", { class: "links" });
  const tenant = session.tenantId
    ? field("Tenant", "tenant_id", { value: session.tenantId, readonly: true })
    : field("Tenant", "tenant_id", { required: true }, "The tenant whose subscriptions, deliveries and dead letters the link shows.");
  const form = h("form", { class: "card form", novalidate: true, onsubmit: submit },
    h("div", { class: "alert", role: "alert", hidden: true }),
    tenant,
    field("Expires after", "expires_in_seconds", { tag: "select", options: EXPIRIES }),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Create link")));
  async function submit(e) {
    e.preventDefault();
    const body = {
      tenant_id: form.elements.tenant_id.value.trim(),
      expires_in_seconds: Number(form.elements.expires_in_seconds.value),
    };
    try {
      const link = await post("/v1/portal-links", body);
      showError(form, null);
      out.prepend(shown(link));
    } catch (err) {
      showError(form, err);
    }
  }
  fill(main, h("h1", {}, "Portal links"),
    h("p", {}, "A portal shows one tenant only its own subscriptions, deliveries and dead letters: its people add and verify endpoints, rotate secrets, send test events and requeue their own dead letters. Whoever holds the link acts as that portal until it expires; it cannot be withdrawn sooner."),
    form, out);
}

/** One new link: the whole URL, to copy (shown this once). */
function shown(link) {
  const url = new URL(link.url, location.href).href;
  const input = h("input", { type: "text", readonly: true, value: url, id: `link-${link.expires_at}`, class: "mono", "data-testid": "portal-url" });
  const copy = h("button", { type: "button", onclick: async () => {
    input.select();
    try { await navigator.clipboard.writeText(url); copy.textContent = "Copied"; } catch { copy.textContent = "Select and copy"; }
  } }, "Copy");
  return h("section", { class: "card" },
    h("h2", {}, `Portal of ${link.tenant_id}`),
    h("p", {}, "Expires ", time(link.expires_at), ". Shown this once: copy it now."),
    h("div", { class: "field" }, h("label", { for: input.id }, "Link"), input),
    h("div", { class: "actions" }, copy, h("a", { href: url, target: "_blank", rel: "noopener noreferrer" }, "Open the portal")));
}
