// One event's timeline: the event, then every subscription's delivery (its
// saga) with each attempt's status code, latency, error and response
// excerpt, and the retry to come. Operators may replay it from here.

import { get, post, seg } from "../api.js";
import { h, fill, dl, time, link, badge, json, pager, showError } from "../dom.js";

const STATUS = {
  pending: ["pending", "muted"], waiting: ["waiting for its partition", "muted"], in_progress: ["retrying", "warn"],
  pending_retry: ["retry scheduled", "warn"], completed: ["delivered", "ok"], dead_lettered: ["dead-lettered", "bad"],
  awaiting_ack: ["awaiting acknowledgement", "warn"], filed_for_pull: ["filed for pull (never pushed)", "muted"],
};

/** A delivery's status as a badge. */
export function statusBadge(s) {
  const [t, k] = STATUS[s] || [s, "muted"];
  return badge(t, k);
}

/** The subscriber's acknowledgement of a delivery, in one line. */
function ackText(a) {
  const of = a.attempt ? ` (attempt ${a.attempt})` : "";
  const why = a.reason ? `: ${a.reason}` : "";
  const ref = a.reference ? ` · ref ${a.reference}` : "";
  return h("span", {}, badge(a.status, a.status === "processed" ? "ok" : "bad"), ` ${of}${why}${ref} · `, time(a.received_at));
}

/** One delivery (saga) as a card with its attempts. */
export function deliveryCard(d) {
  return h("article", { class: "card delivery", "data-saga": d.saga_id },
    h("header", { class: "delivery-head" },
      h("h3", {}, "Subscription ", link(`/subscriptions/${encodeURIComponent(d.subscription_id)}`, d.subscription_id, { class: "mono" })),
      statusBadge(d.status)),
    dl([
      ["Delivery", h("code", {}, d.saga_id)],
      ["Webhook id", h("code", {}, d.webhook_id)],
      d.origin && ["Origin", `${d.origin.kind} by ${d.origin.actor}: ${d.origin.reason}`],
      d.next_attempt_at && ["Next attempt", time(d.next_attempt_at)],
      d.last_error && ["Last error", h("span", { class: "error-text" }, d.last_error)],
      d.acknowledgement && ["Acknowledged", ackText(d.acknowledgement)],
    ]),
    h("ol", { class: "attempts", "aria-label": "Attempts" }, d.attempts.map((a) => h("li", { class: "attempt" },
      h("div", { class: "attempt-head" },
        h("strong", {}, `Attempt ${a.attempt}`), " ",
        a.status_code ? badge(String(a.status_code), a.status_code < 300 ? "ok" : "bad") : badge("no answer", "bad"), " ",
        h("span", { class: "muted" }, `${a.latency_ms} ms`), " · ", time(a.at)),
      a.error ? h("p", { class: "error-text" }, a.error) : null,
      a.response_excerpt ? h("details", {}, h("summary", {}, "Response body (first 256 bytes)"), h("pre", { class: "excerpt" }, a.response_excerpt)) : null))),
    d.next_attempt_at ? h("p", { class: "muted" }, d.status === "awaiting_ack" ? "Acknowledgement due by " : "Retry to come at ", time(d.next_attempt_at)) : null);
}

/** Renders `#/events/{id}`. */
export async function render(main, { session, args }) {
  const [id] = args;
  const ev = await get(`/v1/events/${seg(id)}`);
  const deliveries = pager(
    (cursor) => get(`/v1/events/${seg(id)}/deliveries`, { cursor, limit: 20 }),
    (items) => items.length ? items.map(deliveryCard) : h("p", { class: "empty" }, "No deliveries: no subscription matched this event (yet)."));
  const extra = h("div", { "aria-live": "polite" });
  fill(main,
    h("nav", { class: "crumbs", "aria-label": "Breadcrumb" }, link("/events", "Events"), " / "),
    h("div", { class: "page-head" }, h("h1", {}, h("code", {}, ev.type ?? ev.event_type), " ", h("span", { class: "muted mono small" }, ev.id)),
      h("div", { class: "toolbar" },
        h("button", { type: "button", onclick: () => deliveries.reload() }, "Refresh"),
        session.can("recover") ? h("button", { type: "button", onclick: () => fill(extra, replayForm(ev)) }, "Replay") : null)),
    extra,
    h("section", { class: "card" }, h("h2", {}, "Event"), dl([
      ["Tenant", ev.tenant_id], ["Partition key", ev.partition_key], ["Sequence", ev.sequence],
      ["Trace id", ev.trace_id], ["Producer", ev.producer], ["Format", ev.format],
      ["Occurred", time(ev.occurred_at)], ["Received", time(ev.received_at)], ["Kept until", time(ev.expires_at)],
    ]), h("details", {}, h("summary", {}, "Body"), json(ev.body))),
    h("section", {}, h("h2", {}, "Deliveries"), deliveries.el));
  await deliveries.start();
}

function replayForm(ev) {
  const reason = h("input", { id: "replay-reason", name: "reason", required: true });
  const out = h("div", { role: "status" });
  const form = h("form", { class: "card form", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const r = await post(`/v1/events/${seg(ev.id)}/replay`, { reason: reason.value });
      showError(form, null);
      fill(out, `Replayed to ${r.sagas.length} subscription(s). Refresh to see the new deliveries.`);
    } catch (err) { showError(form, err); }
  } },
  h("div", { class: "alert", role: "alert", hidden: true }),
  h("h2", {}, "Replay this event"),
  h("div", { class: "field", "data-field": "reason" }, h("label", { for: "replay-reason" }, "Reason"), reason, h("p", { class: "field-error" })),
  h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Replay")), out);
  return form;
}
