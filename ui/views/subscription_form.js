// The form that creates or edits a subscription. It sends only what the
// person changed (a header shown as "[hidden]" is never written back), and
// shows each field error the API names next to its input.

import { get, post, patch, ApiError } from "../api.js";
import { h, field, showError } from "../dom.js";

/** Headers as editable text, one "Name: value" a line. */
const headersText = (hs) => Object.entries(hs || {}).map(([k, v]) => `${k}: ${v}`).join("\n");

function readForm(form, tenantBound) {
  const v = (n) => form.elements[n]?.value.trim() ?? "";
  // Pull only: no callback (null, left out of a create); a callback given
  // makes it pushed again.
  const mode = v("pull");
  const body = {
    callback_url: v("callback_url") || (mode === "only" ? null : ""),
    pull: mode !== "off",
    event_types: v("event_types").split(",").map((s) => s.trim()).filter(Boolean),
    description: v("description") || null,
    dead_letter_on: v("dead_letter_on") ? v("dead_letter_on").split(",").map((s) => Number(s.trim())) : [],
    ordering: v("ordering"),
    payload_format: v("payload_format"),
    ack_timeout_secs: v("ack_timeout_secs") ? Number(v("ack_timeout_secs")) : null,
    auto_requeue: v("auto_requeue") === "on",
  };
  if (!tenantBound) body.tenant_id = v("tenant_id") || null;
  if (v("retry_policy")) body.retry_policy = { max_attempts: Number(v("retry_policy")) };
  const headers = {};
  for (const line of v("headers").split("\n")) {
    const i = line.indexOf(":");
    if (line.trim() && i > 0) headers[line.slice(0, i).trim()] = line.slice(i + 1).trim();
    else if (line.trim()) throw new ApiError(422, { error: { message: `Header line "${line}" is not "Name: value"`, field: "headers", errors: [] } });
  }
  body.headers = headers;
  return body;
}

/**
 * The form. `sub`: the subscription to edit (none: a new one). `done(s)`
 * is called with the API's answer (the new subscription with its secret,
 * or the changed one).
 */
export function subscriptionForm(session, sub, done, cancel) {
  const tenantBound = !!session.tenantId;
  const typesHint = h("div", { class: "type-picker", "aria-live": "polite" });
  const form = h("form", { class: "card form", novalidate: true, onsubmit: submit },
    h("div", { class: "alert", role: "alert", hidden: true }),
    field("Callback URL", "callback_url", { value: sub?.callback_url ?? "", placeholder: "https://example.com/webhooks" }, "An HTTPS URL, an SQS queue ARN (arn:aws:sqs:…) or an EventBridge bus ARN (arn:aws:events:…:event-bus/…). Leave empty for pull only."),
    field("Pull", "pull", { tag: "select", options: [["off", "no: pushed only"], ["on", "also pulled (pushes go on)"], ["only", "pull only: no callback, nothing pushed"]] }, "Pull only is for a consumer behind a firewall: verified at once, its subscriber key pulls GET /v1/subscriptions/{id}/events."),
    field("Event types", "event_types", { required: true, value: sub ? sub.event_types.join(", ") : "", placeholder: "order.*, invoice.paid" }, "Comma-separated; * matches any suffix (order.*) or everything (*)."),
    typesHint,
    tenantBound ? null : field("Tenant", "tenant_id", { value: sub?.tenant_id ?? "" }, "Leave empty for a subscription of no tenant."),
    field("Description", "description", { value: sub?.description ?? "" }),
    field("Dead-letter at once on status", "dead_letter_on", { value: sub ? sub.dead_letter_on.join(", ") : "", placeholder: "e.g. 400, 404" }),
    field("Attempts at most", "retry_policy", { type: "number", min: 1, value: sub?.retry_policy.max_attempts ?? "" }, "Default 6 (exponential backoff)."),
    field("Ordering", "ordering", { tag: "select", options: [["none", "none (concurrent)"], ["partition", "per partition key"]] }),
    field("Payload format", "payload_format", { tag: "select", options: [["original", "original envelope"], ["hookline", "hookline"], ["contract_webhook", "contract webhook"]] }),
    field("Acknowledgement within (s)", "ack_timeout_secs", { type: "number", min: 1, max: 86400, value: sub?.ack_timeout_secs ?? "" }, "Leave empty: a 2xx is the success. Set: a 2xx waits this long for the subscriber's signed acknowledgement, else it is retried."),
    field("Automatic requeue", "auto_requeue", { tag: "select", options: [["off", "off: dead letters wait for a person"], ["on", "on: requeue an outage's dead letters when it ends"]] }, "When the circuit breaker closes, or the subscription is enabled again after Hookline disabled it."),
    field("Headers", "headers", { tag: "textarea", rows: 3, placeholder: "X-Team: payments" }, "One \"Name: value\" a line. Credential headers show as [hidden] and keep their value unless changed."),
    h("div", { class: "actions" },
      h("button", { type: "submit", class: "primary" }, sub ? "Save changes" : "Create subscription"),
      cancel ? h("button", { type: "button", onclick: cancel }, "Cancel") : null));
  form.elements.pull.value = sub?.destination === "pull" ? "only" : sub?.pull ? "on" : "off";
  form.elements.ordering.value = sub?.ordering ?? "none";
  form.elements.auto_requeue.value = sub?.auto_requeue ? "on" : "off";
  form.elements.payload_format.value = sub?.payload_format ?? "original";
  form.elements.headers.value = headersText(sub?.headers);
  const initial = sub ? readForm(form, tenantBound) : null;
  pickTypes(session, form, typesHint);

  async function submit(e) {
    e.preventDefault();
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      let body = readForm(form, tenantBound);
      let answer;
      if (sub) {
        // Only what changed.
        body = Object.fromEntries(Object.entries(body).filter(([k, v]) => JSON.stringify(v) !== JSON.stringify(initial[k])));
        answer = await patch(`/v1/subscriptions/${encodeURIComponent(sub.id)}`, body);
      } else {
        for (const k of Object.keys(body)) if (body[k] === null || (Array.isArray(body[k]) && !body[k].length && k !== "event_types") || (k === "headers" && !Object.keys(body[k]).length)) delete body[k];
        answer = await post("/v1/subscriptions", body);
      }
      showError(form, null);
      done(answer);
    } catch (err) {
      showError(form, err);
      form.querySelector("[aria-invalid]")?.focus();
    } finally {
      button.disabled = false;
    }
  }
  return form;
}

/** Offers the event types seen for the tenant and the catalog's (GET /v1/event-types) as toggles, with their descriptions. */
async function pickTypes(session, form, box) {
  let page;
  try {
    page = await get("/v1/event-types", { tenant_id: session.tenantId || form.elements.tenant_id?.value || undefined, limit: 50 });
  } catch {
    return; // the server has no list of seen types: the text field alone
  }
  const names = [...new Set((page.items || []).map((t) => (typeof t === "string" ? t : t.event_type || t.type || t.name)).filter(Boolean))];
  if (!names.length) return;
  // A registered type's description (the event catalog), as the chip's title.
  const about = new Map((page.items || []).filter((t) => t && t.description).map((t) => [t.event_type, t.description]));
  const input = form.elements.event_types;
  const current = () => input.value.split(",").map((s) => s.trim()).filter(Boolean);
  box.replaceChildren(h("fieldset", { class: "chips" }, h("legend", {}, "Types seen or registered"),
    names.map((n) => {
      const id = `type-${n.replace(/[^a-z0-9]/gi, "_")}`;
      const cb = h("input", { type: "checkbox", id, checked: current().includes(n), onchange: () => {
        const set = current().filter((x) => x !== n);
        if (cb.checked) set.push(n);
        input.value = set.join(", ");
      } });
      const label = about.has(n) ? h("label", { for: id, title: about.get(n) }, n, h("span", { class: "small" }, ` — ${about.get(n)}`)) : h("label", { for: id }, n);
      return h("span", { class: "chip" }, cb, label);
    })));
}
