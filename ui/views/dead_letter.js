// One dead letter: why it died, the delivery's snapshot when it died, the
// event, and (while open) requeue or skip with a reason.

import { get, seg } from "../api.js";
import { h, fill, dl, time, link, json } from "../dom.js";
import { stateBadge, oneAction } from "./dead_letters.js";
import { statusBadge } from "./event.js";

/** Renders `#/dead-letters/{id}`. */
export async function render(main, ctx) {
  const [id] = ctx.args;
  const d = await get(`/v1/dead-letters/${seg(id)}`);
  const snap = d.saga_snapshot;
  const ev = d.event;
  let body = ev?.body;
  try { body = JSON.parse(ev.body); } catch { /* shown as text */ }
  fill(main,
    h("nav", { class: "crumbs", "aria-label": "Breadcrumb" }, link("/dead-letters", "Dead letters"), " / "),
    h("div", { class: "page-head" }, h("h1", {}, "Dead letter ", h("span", { class: "mono small" }, d.id)), stateBadge(d.state)),
    d.state === "open" && ctx.session.can("recover")
      ? h("section", {}, h("h2", {}, "Recover"), oneAction(d, () => render(main, ctx)))
      : null,
    h("div", { class: "grid2" },
      h("section", { class: "card" }, h("h2", {}, "Why"), dl([
        ["Reason", h("span", { class: "error-text" }, d.reason)],
        ["Attempts", String(d.attempts)],
        ["Event", link(`/events/${encodeURIComponent(d.event_id)}`, d.event_id, { class: "mono" })],
        ["Event type", h("code", {}, d.event_type)],
        ["Subscription", link(`/subscriptions/${encodeURIComponent(d.subscription_id)}`, d.subscription_id, { class: "mono" })],
        ["Tenant", d.tenant_id],
        ["Created", time(d.created_at)],
        d.resolution && ["Resolution", [`${d.resolution.action} by ${d.resolution.actor}: ${d.resolution.reason} `, time(d.resolution.at)]],
      ])),
      snap ? h("section", { class: "card" }, h("h2", {}, "Delivery snapshot"), dl([
        ["Delivery", h("code", {}, snap.id)],
        ["Status", statusBadge(snap.status)],
        ["Attempts", String(snap.attempts)],
        ["Last error", snap.last_error ? h("span", { class: "error-text" }, snap.last_error) : null],
        snap.lane && ["Lane", `${snap.lane.partition_key} #${snap.lane.seq} (${snap.lane.on_dead_letter})`],
        ["Started", time(snap.created_at)],
        ["Updated", time(snap.updated_at)],
      ])) : null),
    ev ? h("section", { class: "card" }, h("h2", {}, "Event"), dl([
      ["Partition key", ev.partition_key], ["Trace id", ev.trace_id], ["Occurred", time(ev.occurred_at)], ["Received", time(ev.received_at)],
    ]), h("details", { open: true }, h("summary", {}, "Body"), json(body))) : null);
}
