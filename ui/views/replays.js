// Replays: deliver events again by event id, by partition key or by time
// range, with a reason; the job is followed live.

import { post } from "../api.js";
import { h, fill, field, showError, localToIso } from "../dom.js";
import { jobProgress } from "./job.js";

/** Renders the replay form into `main`. */
export async function render(main, { session }) {
  const jobs = h("div", { class: "jobs" });
  const form = h("form", { class: "card form", novalidate: true, onsubmit: submit },
    h("div", { class: "alert", role: "alert", hidden: true }),
    h("fieldset", {}, h("legend", {}, "Which events"),
      field("Event id", "event_id", {}, "One event; or leave empty and give a partition or a time range."),
      field("Partition key", "partition_key"),
      session.tenantId ? null : field("Tenant", "tenant_id"),
      field("Since", "since", { type: "datetime-local", step: 1 }),
      field("Until", "until", { type: "datetime-local", step: 1 }),
      field("Event types", "event_types", {}, "Comma-separated; empty: every type."),
      field("Only to subscription", "subscription_id", {}, "Empty: every subscription the events match.")),
    field("Reason", "reason", { required: true }),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Start replay")));
  async function submit(e) {
    e.preventDefault();
    const v = (n) => form.elements[n]?.value.trim() || undefined;
    const body = {
      event_id: v("event_id"), partition_key: v("partition_key"), tenant_id: v("tenant_id"),
      since: localToIso(v("since")), until: localToIso(v("until")), subscription_id: v("subscription_id"),
      event_types: v("event_types") ? v("event_types").split(",").map((s) => s.trim()).filter(Boolean) : undefined,
      reason: v("reason") ?? "",
    };
    try {
      const started = await post("/v1/replays", body);
      showError(form, null);
      const p = jobProgress(started.job_id, "Replay");
      jobs.prepend(p.el);
    } catch (err) {
      showError(form, err);
    }
  }
  fill(main, h("h1", {}, "Replays"), h("p", {}, "Delivers past events again (each to the subscriptions it matches, or to one). The events must still be kept."), form, jobs);
}
