// The overview: the whole system's delivery statistics (or the tenant's,
// for a key bound to one) over the last hour, day or week, and the newest
// open dead letters.

import { get } from "../api.js";
import { h, fill, table, link, time } from "../dom.js";
import { panel } from "../chart.js";

/** Renders the overview into `main`. */
export async function render(main, { session }) {
  const dead = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  fill(main, h("h1", {}, "Overview"),
    panel((q) => get("/v1/stats", q), session.tenantId ? `Deliveries of tenant ${session.tenantId}` : "Deliveries, whole system"),
    h("section", {}, h("div", { class: "section-head" }, h("h2", {}, "Newest open dead letters"), link("/dead-letters?state=open", "All dead letters")), dead));
  try {
    const page = await get("/v1/dead-letters", { state: "open", limit: 5 });
    fill(dead, table("Newest open dead letters", [
      ["Dead letter", (d) => link(`/dead-letters/${encodeURIComponent(d.id)}`, d.id, { class: "mono" })],
      ["Type", (d) => h("code", {}, d.event_type)],
      ["Reason", (d) => h("span", { class: "error-text" }, d.reason)],
      ["Created", (d) => time(d.created_at)],
    ], page.items, "No open dead letters."));
  } catch (e) {
    fill(dead, h("p", { class: "error-text" }, e.message));
  }
}
