// The audit trail: who did what, when and why, with the filters of
// GET /v1/audit (action, actor, subscription, tenant, time range).

import { get } from "../api.js";
import { h, fill, field, values, pager, table, time, localToIso, link, filterBox } from "../dom.js";

const ACTIONS = ["subscription.created", "subscription.updated", "subscription.deleted", "subscription.verified",
  "subscription.verification_failed", "subscription.secret_rotated", "subscription.disabled", "subscription.enabled",
  "dead_letter.requeued", "dead_letter.skipped", "dead_letters.requeue_started", "dead_letters.skip_started",
  "event.replayed", "replay.started", "breaker.opened", "breaker.closed", "lane.skipped", "key.created", "key.rotated", "key.revoked",
  "portal_link.created", "event.test_sent", "event_type.registered"];

/** Renders the audit trail into `main`. */
export async function render(main, { session }) {
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter the audit trail", onsubmit: (e) => { e.preventDefault(); list.start(); } },
    field("Action", "action", { tag: "select", options: [["", "any"], ...ACTIONS.map((a) => [a, a])] }),
    field("Actor", "actor"),
    field("Subscription", "subscription_id"),
    session.tenantId ? null : field("Tenant", "tenant_id"),
    field("Since", "since", { type: "datetime-local", step: 1 }),
    field("Until", "until", { type: "datetime-local", step: 1 }),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Filter")));
  const query = () => { const q = values(form); q.since = localToIso(q.since); q.until = localToIso(q.until); return q; };
  const ref = (r) => [
    r.subscription_id && ["subscription", link(`/subscriptions/${encodeURIComponent(r.subscription_id)}`, r.subscription_id)],
    r.event_id && ["event", link(`/events/${encodeURIComponent(r.event_id)}`, r.event_id)],
    r.dead_letter_id && ["dead letter", link(`/dead-letters/${encodeURIComponent(r.dead_letter_id)}`, r.dead_letter_id)],
    r.job_id && ["job", h("span", {}, r.job_id)],
  ].filter(Boolean).map(([k, v]) => h("div", { class: "mono small" }, k, ": ", v));
  const list = pager(
    (cursor) => get("/v1/audit", { ...query(), cursor, limit: 25 }),
    (items) => table("Audit records", [
      ["When", (r) => time(r.at)],
      ["Actor", (r) => h("code", {}, r.actor)],
      ["Action", (r) => h("code", {}, r.action)],
      ["What", ref],
      ["Tenant", (r) => r.tenant_id || "—"],
      ["Reason", (r) => r.reason || "—"],
    ], items, "No audit records match."));
  fill(main, h("h1", {}, "Audit trail"), filterBox(form), list.el);
  await list.start();
}
