// The subscriptions list: health at a glance (breaker, success rate,
// p50/p99 latency, last error from each subscription's `health`), filtered
// by tenant and event type, paged by the API's cursor.

import { get } from "../api.js";
import { h, fill, field, values, pager, table, link, badge, time, filterBox } from "../dom.js";

/** A subscription's state as a badge: paused, disabled, verifying, failed verification, active. */
export function stateBadge(s) {
  if (s.disabled_reason) return badge("disabled", "bad");
  if (!s.active) return badge("paused", "muted");
  if (awaitingToken(s)) return badge("awaiting token", "warn");
  if (s.verification_error) return badge("verification failed", "bad");
  if (!s.verified) return badge("verifying", "warn");
  return badge("active", "ok");
}

/** Whether a queue or bus destination waits for its owner's token. */
export function awaitingToken(s) {
  return s.destination !== "https" && s.destination !== "pull" && !s.verified && (s.verification_error || "").startsWith("awaiting confirmation");
}

/** Where deliveries go, when not an HTTPS callback: `sqs`, `eventbridge` or `pull` (pull only). */
export function destinationBadge(s) {
  if (s.destination === "pull") return badge("pull only", "muted");
  return s.destination && s.destination !== "https" ? badge(s.destination, "muted") : null;
}

/** The breaker as a badge. */
export function breakerBadge(hl) {
  const kind = { closed: "ok", open: "bad", half_open: "warn" }[hl.breaker] || "muted";
  return badge(hl.breaker.replace("_", "-"), kind);
}

/** A success rate (0..1 or null) as text. */
export function rate(r) {
  return r == null ? "—" : `${(r * 100).toFixed(r === 1 || r === 0 ? 0 : 1)} %`;
}

/** Milliseconds as text. */
export function ms(v) {
  return v == null ? "—" : `${v} ms`;
}

/** Renders the list into `main`. */
export async function render(main, { session }) {
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter subscriptions", onsubmit: (e) => { e.preventDefault(); list.start(); } },
    session.tenantId ? null : field("Tenant", "tenant_id", { placeholder: "any" }),
    field("Event type", "event_type", { placeholder: "any, e.g. order.created" }),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Filter")));
  const list = pager(
    (cursor) => get("/v1/subscriptions", { ...values(form), cursor, limit: 20 }),
    (items) => table("Subscriptions", [
      ["Subscription", (s) => h("div", {}, link(`/subscriptions/${encodeURIComponent(s.id)}`, s.description || s.id), h("div", { class: "sub muted mono" }, destinationBadge(s), " ", s.callback_url ?? ""))],
      ["Tenant", (s) => s.tenant_id || h("span", { class: "muted" }, "—")],
      ["Types", (s) => h("span", { class: "mono" }, s.event_types.join(", "))],
      ["State", stateBadge],
      ["Breaker", (s) => breakerBadge(s.health)],
      ["Success", (s) => h("span", { title: `${s.health.attempts} attempts in the last ${s.health.window_minutes} min` }, rate(s.health.success_rate))],
      ["p50 / p99", (s) => `${ms(s.health.latency_p50_ms)} / ${ms(s.health.latency_p99_ms)}`],
      ["Last error", (s) => s.health.last_error ? h("div", {}, h("div", { class: "error-text" }, s.health.last_error), h("div", { class: "sub" }, time(s.health.last_error_at))) : h("span", { class: "muted" }, "—")],
    ], items, "No subscriptions match."));
  fill(main,
    h("div", { class: "page-head" }, h("h1", {}, "Subscriptions"),
      session.can("manage_subscriptions") ? link("/subscriptions/new", "New subscription", { class: "button primary" }) : null),
    filterBox(form), list.el);
  await list.start();
}
