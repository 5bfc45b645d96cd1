// Hand-rolled SVG charts of a delivery-stats series (GET /v1/stats,
// GET /v1/subscriptions/{id}/stats): attempts per bucket by outcome
// (stacked bars), latency percentiles (lines) and the failure rate (bars).
// Buckets the API leaves out (no attempt) are drawn as zero. Each chart
// has a title and a text summary for screen readers, and a tooltip per
// bucket.

import { h } from "./dom.js";

const W = 560;
const H = 220;
const PAD = { l: 64, r: 12, t: 12, b: 28 };
const STEP = { minute: 60e3, hour: 3600e3 };

/** Every bucket of the range, with the API's points where it has one. */
export function buckets(stats) {
  const step = STEP[stats.bucket] || STEP.minute;
  const start = Math.floor(new Date(stats.since).getTime() / step) * step;
  const end = new Date(stats.until).getTime();
  const byAt = new Map(stats.points.map((p) => [Math.floor(new Date(p.at).getTime() / step) * step, p]));
  const out = [];
  for (let t = start; t < end; t += step) {
    out.push(byAt.get(t) || { at: new Date(t).toISOString(), succeeded: 0, failed: 0, dead_lettered: 0, p50_ms: null, p90_ms: null, p99_ms: null });
  }
  return { step, start, end, points: out };
}

function frame(title, summary, max, unit, series) {
  const iw = W - PAD.l - PAD.r;
  const ih = H - PAD.t - PAD.b;
  const y = (v) => PAD.t + ih - (max ? (v / max) * ih : 0);
  const grid = [0, 0.5, 1].map((f) => {
    const v = max * f;
    return h("g", { class: "grid" },
      h("line", { x1: PAD.l, x2: W - PAD.r, y1: y(v), y2: y(v) }),
      h("text", { x: PAD.l - 6, y: y(v) + 4, "text-anchor": "end" }, fmt(v) + unit));
  });
  return { iw, ih, y, svg: (...body) => h("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${title}: ${summary}` },
    h("title", {}, title), h("desc", {}, summary), grid, body, series) };
}

function fmt(v) {
  if (v >= 1000) return (v / 1000).toFixed(v >= 10000 ? 0 : 1) + "k";
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}

function niceMax(v) {
  if (v <= 1) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/** A top for a count axis whose middle line is a whole number too. */
function niceCount(v) {
  if (v <= 10) return Math.max(2, Math.ceil(v / 2) * 2);
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function xAxis(b, iw) {
  const ticks = 4;
  const span = b.end - b.start;
  const opts = span > 2 * 86400e3 ? { weekday: "short", day: "numeric" } : { hour: "2-digit", minute: "2-digit" };
  const fmtT = (t) => new Date(t).toLocaleString(undefined, opts);
  return h("g", { class: "axis" }, Array.from({ length: ticks + 1 }, (_, i) => {
    const t = b.start + (span * i) / ticks;
    return h("text", { x: PAD.l + (iw * i) / ticks, y: H - 8, "text-anchor": i === 0 ? "start" : i === ticks ? "end" : "middle" }, fmtT(t));
  }));
}

function legend(items) {
  return h("ul", { class: "legend" }, items.map(([cls, label]) => h("li", {}, h("span", { class: `swatch ${cls}`, "aria-hidden": "true" }), label)));
}

/**
 * Attempts per bucket, stacked by outcome: succeeded, failed and retried,
 * failed for good (dead-lettered). The API's `failed` counts every failed
 * attempt, the dead-lettering ones included.
 */
export function outcomes(stats) {
  const b = buckets(stats);
  const parts = (p) => [p.succeeded, Math.max(p.failed - p.dead_lettered, 0), p.dead_lettered];
  const max = niceCount(Math.max(0, ...b.points.map((p) => p.succeeded + p.failed)));
  const t = stats.total;
  const summary = `${t.succeeded} succeeded, ${t.failed} failed (${t.dead_lettered} of them dead-lettered) in the range`;
  const f = frame(`Attempts per ${stats.bucket} by outcome`, summary, max, "", null);
  const bw = f.iw / b.points.length;
  const bars = b.points.map((p, i) => {
    let top = 0;
    const x = PAD.l + i * bw;
    const rects = parts(p).map((v, j) => {
      if (!v) return null;
      const y0 = f.y(top + v);
      const hgt = f.y(top) - y0;
      top += v;
      return h("rect", { class: `bar ${["ok", "warn", "bad"][j]}`, x: x + bw * 0.1, width: Math.max(bw * 0.8, 0.5), y: y0, height: hgt });
    });
    return h("g", {}, h("title", {}, `${new Date(p.at).toLocaleString()}: ${p.succeeded} succeeded, ${p.failed} failed, ${p.dead_lettered} dead-lettered`), rects);
  });
  return h("figure", { class: "chart-box" }, h("figcaption", {}, "Attempts by outcome"),
    f.svg(bars, xAxis(b, f.iw)), legend([["ok", "succeeded"], ["warn", "failed, retried"], ["bad", "failed, dead-lettered"]]));
}

/** Latency percentiles (p50, p90, p99) per bucket, in milliseconds. */
export function latency(stats) {
  const b = buckets(stats);
  const keys = [["p50_ms", "l50", "p50"], ["p90_ms", "l90", "p90"], ["p99_ms", "l99", "p99"]];
  const max = niceMax(Math.max(0, ...b.points.flatMap((p) => keys.map(([k]) => p[k] || 0))));
  const t = stats.total;
  const summary = t.p50_ms == null ? "no attempts in the range" : `over the range p50 ${fmt(t.p50_ms)} ms, p90 ${fmt(t.p90_ms)} ms, p99 ${fmt(t.p99_ms)} ms`;
  const f = frame("Latency percentiles", summary, max, " ms", null);
  const bw = f.iw / b.points.length;
  const lines = keys.map(([k, cls]) => {
    // One polyline per run of buckets with a value (a gap breaks the line).
    const runs = [];
    let run = [];
    b.points.forEach((p, i) => {
      if (p[k] == null) { if (run.length) runs.push(run); run = []; return; }
      run.push(`${(PAD.l + (i + 0.5) * bw).toFixed(1)},${f.y(p[k]).toFixed(1)}`);
    });
    if (run.length) runs.push(run);
    return runs.map((r) => r.length === 1
      ? h("circle", { class: `dot ${cls}`, cx: r[0].split(",")[0], cy: r[0].split(",")[1], r: 2.5 })
      : h("polyline", { class: `line ${cls}`, points: r.join(" ") }));
  });
  return h("figure", { class: "chart-box" }, h("figcaption", {}, "Latency percentiles"),
    f.svg(lines, xAxis(b, f.iw)), legend(keys.map(([, cls, label]) => [cls, label])));
}

/** The share of attempts that failed per bucket (the API's `failed`, dead-lettering ones included, over all). */
export function failures(stats) {
  const b = buckets(stats);
  const rate = (p) => { const n = p.succeeded + p.failed; return n ? ((p.failed) / n) * 100 : 0; };
  const t = stats.total;
  const tn = t.succeeded + t.failed;
  const summary = tn ? `${((t.failed / tn) * 100).toFixed(1)} % of ${tn} attempts failed; ${t.dead_lettered} dead letters` : "no attempts in the range";
  const f = frame("Failure rate", summary, 100, " %", null);
  const bw = f.iw / b.points.length;
  const bars = b.points.map((p, i) => {
    const r = rate(p);
    if (!r) return null;
    return h("rect", { class: "bar bad", x: PAD.l + i * bw + bw * 0.1, width: Math.max(bw * 0.8, 0.5), y: f.y(r), height: f.y(0) - f.y(r) },
      h("title", {}, `${new Date(p.at).toLocaleString()}: ${r.toFixed(1)} % failed (${p.failed} of ${p.succeeded + p.failed})`));
  });
  return h("figure", { class: "chart-box" }, h("figcaption", {}, "Failures"), f.svg(bars, xAxis(b, f.iw)), legend([["bad", "failed attempts, % of attempts"]]));
}

/** The ranges the charts offer: [label, bucket, milliseconds back]. */
export const RANGES = [["Last hour", "minute", 3600e3], ["Last day", "hour", 86400e3], ["Last week", "hour", 7 * 86400e3]];

/** Query parameters for range `i` of RANGES, ending now (rounded up to the bucket). */
export function rangeQuery(i) {
  const [, bucket, back] = RANGES[i];
  const step = STEP[bucket];
  const until = Math.ceil(Date.now() / step) * step;
  return { bucket, since: new Date(until - back).toISOString(), until: new Date(until).toISOString() };
}

/** A range picker and the three charts, redrawn by `load(query)` → Stats. */
export function panel(load, title = "Delivery statistics") {
  const charts = h("div", { class: "charts", "aria-live": "polite" });
  const buttons = RANGES.map(([label], i) => h("button", { type: "button", "aria-pressed": String(i === 0), onclick: () => show(i) }, label));
  let shown = 0; // the latest range asked for: an older answer arriving late is dropped
  async function show(i) {
    const mine = ++shown;
    buttons.forEach((b, j) => b.setAttribute("aria-pressed", String(i === j)));
    let content;
    try {
      const stats = await load(rangeQuery(i));
      content = [outcomes(stats), latency(stats), failures(stats)];
    } catch (e) {
      content = [h("p", { class: "muted" }, `Statistics unavailable: ${e.message}`)];
    }
    if (mine === shown) charts.replaceChildren(...content);
  }
  show(0);
  return h("section", { class: "stats", "aria-label": title }, h("div", { class: "section-head" }, h("h2", {}, title), h("div", { class: "segmented", role: "group", "aria-label": "Range" }, buttons)), charts);
}
