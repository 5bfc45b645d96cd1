// Dead letters: filter (subscription, type, tenant, state, time range),
// requeue or skip one, or every open one of the filter in bulk with a
// reason (a job, followed live).

import { get, post, seg } from "../api.js";
import { h, fill, field, values, pager, table, link, badge, time, localToIso, showError, filterBox } from "../dom.js";
import { jobProgress } from "./job.js";

/** A dead letter's state as a badge. */
export function stateBadge(s) {
  return badge(s, { open: "bad", requeued: "ok", skipped: "muted" }[s] || "muted");
}

/** Renders the list into `main`. */
export async function render(main, { session, params }) {
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter dead letters", onsubmit: (e) => { e.preventDefault(); list.start(); } },
    field("Subscription", "subscription_id"),
    field("Event type", "event_type"),
    session.tenantId ? null : field("Tenant", "tenant_id"),
    field("State", "state", { tag: "select", options: [["", "any"], ["open", "open"], ["requeued", "requeued"], ["skipped", "skipped"]] }),
    field("Since", "since", { type: "datetime-local", step: 1 }),
    field("Until", "until", { type: "datetime-local", step: 1 }),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Filter")));
  for (const [k, v] of params) if (form.elements[k]) form.elements[k].value = v;
  const filter = () => {
    const q = values(form);
    q.since = localToIso(q.since);
    q.until = localToIso(q.until);
    return q;
  };
  const canRecover = session.can("recover");
  const list = pager(
    (cursor) => get("/v1/dead-letters", { ...filter(), cursor, limit: 25 }),
    (items) => table("Dead letters", [
      ["Dead letter", (d) => link(`/dead-letters/${encodeURIComponent(d.id)}`, d.id, { class: "mono" })],
      ["Event", (d) => h("div", {}, h("code", {}, d.event_type), h("div", { class: "sub" }, link(`/events/${encodeURIComponent(d.event_id)}`, d.event_id, { class: "mono" })))],
      ["Subscription", (d) => link(`/subscriptions/${encodeURIComponent(d.subscription_id)}`, d.subscription_id, { class: "mono" })],
      ["Reason", (d) => h("span", { class: "error-text" }, d.reason)],
      ["Attempts", (d) => String(d.attempts)],
      ["Created", (d) => time(d.created_at)],
      ["State", (d) => stateBadge(d.state)],
    ], items, "No dead letters match."));
  const jobs = h("div", { class: "jobs" });
  const bulk = canRecover ? bulkForm(filter, jobs, () => list.reload()) : null;
  fill(main, h("h1", {}, "Dead letters"), filterBox(form, [...params].length > 0), bulk, jobs, list.el);
  await list.start();
}

/** Requeue or skip every open dead letter of the filter, with a reason. */
function bulkForm(filter, jobs, refresh) {
  const reason = h("input", { id: "bulk-reason", name: "reason", required: true, placeholder: "e.g. endpoint fixed, ticket #123" });
  const form = h("form", { class: "card bulk", "aria-label": "Requeue or skip in bulk", onsubmit: (e) => e.preventDefault() },
    h("div", { class: "alert", role: "alert", hidden: true }),
    h("h2", {}, "Every open dead letter of the filter"),
    h("div", { class: "field", "data-field": "reason" }, h("label", { for: "bulk-reason" }, "Reason"), reason, h("p", { class: "field-error" })),
    h("div", { class: "actions" },
      h("button", { type: "button", class: "primary", onclick: () => run("requeue") }, "Requeue all"),
      h("button", { type: "button", onclick: () => run("skip") }, "Skip all")));
  async function run(kind) {
    const f = filter();
    delete f.state;
    try {
      const started = await post(`/v1/dead-letters/${kind}`, { filter: f, reason: reason.value.trim() });
      showError(form, null);
      const p = jobProgress(started.job_id, kind === "requeue" ? "Requeue" : "Skip");
      jobs.prepend(p.el);
      await p.done;
      refresh();
    } catch (err) {
      showError(form, err);
    }
  }
  return form;
}

/** Requeue or skip one dead letter with a reason; `done` after. */
export function oneAction(dl, done) {
  const reason = h("input", { id: "one-reason", name: "reason", required: true });
  const form = h("form", { class: "card form", onsubmit: (e) => e.preventDefault() },
    h("div", { class: "alert", role: "alert", hidden: true }),
    h("div", { class: "field", "data-field": "reason" }, h("label", { for: "one-reason" }, "Reason"), reason, h("p", { class: "field-error" })),
    h("div", { class: "actions" },
      h("button", { type: "button", class: "primary", onclick: () => run("requeue") }, "Requeue"),
      h("button", { type: "button", onclick: () => run("skip") }, "Skip")));
  async function run(kind) {
    try {
      await post(`/v1/dead-letters/${seg(dl.id)}/${kind}`, { reason: reason.value.trim() });
      showError(form, null);
      done();
    } catch (err) {
      showError(form, err);
    }
  }
  return form;
}
