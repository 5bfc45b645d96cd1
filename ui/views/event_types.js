// Event types: the types seen at ingest merged with the deployment-wide
// event catalog (GET /v1/event-types): a registered type's version,
// description, JSON Schema and example (docs/formats.md#event-catalog).
// Types are registered through the API (POST /v1/event-types); this page
// only reads.

import { get } from "../api.js";
import { h, fill, pager, table, time, json } from "../dom.js";

/** Renders the event types into `main`. */
export async function render(main, { session }) {
  const list = pager(
    (cursor) => get("/v1/event-types", { tenant_id: session.tenantId || undefined, cursor, limit: 25 }),
    (items) => table("Event types", [
      ["Type", (t) => h("code", {}, t.event_type)],
      ["Registered", (t) => (t.registered ? `version ${t.version}` : "no")],
      ["Description", (t) => t.description || "—"],
      ["First seen", (t) => (t.first_seen_at ? time(t.first_seen_at) : "not yet")],
      ["Schema and example", (t) => (t.registered
        ? h("details", {}, h("summary", {}, "Show"), h("h3", {}, "Schema"), json(t.schema),
          t.example === null || t.example === undefined ? null : [h("h3", {}, "Example"), json(t.example)])
        : "—")],
    ], items, "No event types seen or registered yet."));
  fill(main, h("h1", {}, "Event types"),
    h("p", {}, "The types seen so far and those registered in the event catalog. A registered type's events are checked against its schema; a version 2 or later (type.v2) reaches only subscriptions that ask for it (type.*.v2, *.v2 or the exact type)."),
    list.el);
  await list.start();
}
