// A job's progress, followed live (GET /v1/jobs/{id} every half second
// until it is no longer running): matched, done, failed, a progress bar.

import { followJob } from "../api.js";
import { h, fill, badge } from "../dom.js";

/** A box that follows job `id` and returns it when it has finished. */
export function jobProgress(id, title) {
  const bar = h("progress", { max: 1, value: 0, "aria-label": "Progress" });
  const counts = h("p", { class: "job-counts" });
  const state = h("span", { class: "job-state" }, badge("running", "warn"));
  const el = h("section", { class: "card job", role: "status", "aria-live": "polite", "data-job": id },
    h("h2", {}, title, " ", state), h("p", { class: "muted mono small" }, id), bar, counts);
  const done = followJob(id, (job) => {
    const total = job.items ?? job.matched;
    bar.max = Math.max(total, 1);
    bar.value = job.done + job.failed;
    fill(counts, `${job.done} done, ${job.failed} failed of ${job.matched} matched`,
      job.skipped_not_routed ? `, ${job.skipped_not_routed} not routed` : "", job.error ? ` — ${job.error}` : "");
    fill(state, job.state === "running" ? badge("running", "warn") : job.state === "completed" ? badge("completed", "ok") : badge(job.state, "bad"));
    if (job.state !== "running" && !job.matched) bar.value = bar.max;
  }).catch((e) => fill(counts, h("span", { class: "error-text" }, e.message)));
  return { el, done };
}
