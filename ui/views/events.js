// Event search: every filter of GET /v1/events (type, tenant, partition
// key, time range, outcome), newest first, paged by the API's cursor.

import { get } from "../api.js";
import { h, fill, field, values, pager, table, link, badge, time, localToIso, filterBox } from "../dom.js";

/** An event's outcome so far as a badge. */
export function outcomeBadge(o) {
  if (o === "dead_lettered") return badge("dead-lettered", "bad");
  if (o === "failed") return badge("failed attempts", "warn");
  return badge("no failure", "ok");
}

/** Renders the search into `main` (filters may come from the fragment's query). */
export async function render(main, { session, params }) {
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter events", onsubmit: (e) => { e.preventDefault(); list.start(); } },
    field("Event type", "event_type", { placeholder: "order.created or order.*" }),
    session.tenantId ? null : field("Tenant", "tenant_id"),
    field("Partition key", "partition_key"),
    field("Received since", "since", { type: "datetime-local", step: 1 }),
    field("Received until", "until", { type: "datetime-local", step: 1 }),
    field("Outcome", "outcome", { tag: "select", options: [["", "any"], ["failed", "some attempt failed"], ["dead_lettered", "dead-lettered"]] }),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Search")));
  for (const [k, v] of params) if (form.elements[k]) form.elements[k].value = v;
  const query = () => {
    const q = values(form);
    q.since = localToIso(q.since);
    q.until = localToIso(q.until);
    return q;
  };
  const list = pager(
    (cursor) => get("/v1/events", { ...query(), cursor, limit: 25 }),
    (items) => table("Events", [
      ["Event", (e) => link(`/events/${encodeURIComponent(e.id)}`, e.id, { class: "mono" })],
      ["Type", (e) => h("code", {}, e.type ?? e.event_type)],
      ["Tenant", (e) => e.tenant_id || "—"],
      ["Partition", (e) => e.partition_key ? h("code", {}, e.partition_key) : "—"],
      ["Received", (e) => time(e.received_at)],
      ["Outcome", (e) => outcomeBadge(e.outcome)],
    ], items, "No events match."));
  fill(main, h("h1", {}, "Events"), filterBox(form, [...params].length > 0), list.el);
  await list.start();
}
