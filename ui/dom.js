// Small DOM helpers shared by every view: an element builder, times in the
// viewer's zone (UTC in the title), a cursor pager, error display and a
// few form helpers. Nothing here talks to the API.

/**
 * Builds an element: h("button", {class: "x", onclick: f}, "text", child).
 * Attributes starting with "on" become listeners; null/false are skipped;
 * children may be strings, nodes, arrays or null.
 */
export function h(tag, attrs = {}, ...children) {
  const el = tag === "svg" || SVG_TAGS.has(tag)
    ? document.createElementNS("http://www.w3.org/2000/svg", tag)
    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "value" && "value" in el) el.value = v;
    else if (k === "checked") el.checked = !!v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

const SVG_TAGS = new Set(["g", "rect", "line", "path", "text", "polyline", "circle", "title", "desc"]);

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Replaces the children of `el`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A time in the viewer's zone, with the UTC time on hover. */
export function time(iso) {
  if (!iso) return h("span", { class: "muted" }, "—");
  const d = new Date(iso);
  return h("time", { datetime: iso, title: d.toISOString().replace(".000Z", "Z") + " UTC" },
    d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" }));
}

/** A `datetime-local` input value (viewer's zone) as RFC 3339 UTC, or undefined. */
export function localToIso(value) {
  if (!value) return undefined;
  const d = new Date(value);
  return isNaN(d) ? value : d.toISOString();
}

/** A small coloured label (`kind` picks the colour: ok, warn, bad, muted). */
export function badge(text, kind = "muted") {
  return h("span", { class: `badge badge-${kind}` }, text);
}

/** A labelled input; `name` is also the API field its errors name. */
export function field(label, name, attrs = {}, hint) {
  const id = `f-${name}-${++fieldSeq}`;
  const input = attrs.tag === "select"
    ? h("select", { id, name, ...omit(attrs, "tag", "options") },
      (attrs.options || []).map(([v, t]) => h("option", { value: v }, t)))
    : attrs.tag === "textarea"
      ? h("textarea", { id, name, ...omit(attrs, "tag") })
      : h("input", { id, name, type: "text", ...attrs });
  const err = h("p", { class: "field-error", id: `${id}-error`, "aria-live": "polite" });
  input.setAttribute("aria-describedby", `${id}-error`);
  return h("div", { class: "field", "data-field": name },
    h("label", { for: id }, label), input, hint ? h("p", { class: "hint" }, hint) : null, err);
}
let fieldSeq = 0;

function omit(o, ...keys) {
  const r = { ...o };
  for (const k of keys) delete r[k];
  return r;
}

/** The form's values by name (empty strings dropped, checkboxes as booleans). */
export function values(form) {
  const out = {};
  for (const el of form.elements) {
    if (!el.name) continue;
    if (el.type === "checkbox") out[el.name] = el.checked;
    else if (el.value.trim() !== "") out[el.name] = el.value.trim();
  }
  return out;
}

/**
 * Shows an API error: the message in the form's (or page's) alert, and
 * each field error next to the input of that name (`headers.X` next to
 * `headers`, `event_types[2]` next to `event_types`).
 */
export function showError(container, err) {
  for (const p of container.querySelectorAll(".field-error")) p.textContent = "";
  for (const f of container.querySelectorAll("[aria-invalid]")) f.removeAttribute("aria-invalid");
  let alert = container.querySelector(".alert");
  if (!alert) {
    alert = h("div", { class: "alert", role: "alert" });
    container.prepend(alert);
  }
  alert.textContent = err ? err.message : "";
  alert.hidden = !err;
  if (!err) return;
  for (const fe of err.fields || []) {
    const name = fe.field.split(/[.[]/)[0];
    const box = container.querySelector(`[data-field="${CSS.escape(name)}"]`);
    if (!box) continue;
    box.querySelector(".field-error").textContent = fe.message;
    box.querySelector("input,select,textarea")?.setAttribute("aria-invalid", "true");
  }
}

/**
 * A pager over an API listing: `load(cursor)` returns a page
 * ({items, next_cursor}); "Previous" walks back a stack of the cursors
 * seen, "Next" follows next_cursor. Only one page is ever held.
 */
export function pager(load, render) {
  const stack = [];
  let current = null;
  let next = null;
  const prev = h("button", { type: "button", disabled: true, onclick: () => show(stack.pop()) }, "Previous");
  const nextBtn = h("button", { type: "button", disabled: true, onclick: () => { stack.push(current); show(next); } }, "Next");
  const body = h("div", { class: "page-body", "aria-live": "polite" });
  async function show(cursor) {
    try {
      const page = await load(cursor || undefined);
      current = cursor || null;
      next = page.next_cursor || null;
      fill(body, render(page.items));
    } catch (e) {
      next = null;
      fill(body, h("div", { class: "alert", role: "alert" }, e.message));
    }
    prev.disabled = stack.length === 0;
    nextBtn.disabled = !next;
  }
  const el = h("div", { class: "paged" }, body, h("nav", { class: "pager", "aria-label": "Pages" }, prev, nextBtn));
  return {
    el,
    /** Loads the first page (after a filter changed). */
    start() { stack.length = 0; return show(null); },
    /** Loads the page shown again. */
    reload() { return show(current); },
  };
}

/** A definition list of [term, value] pairs (values may be nodes). */
export function dl(pairs) {
  return h("dl", { class: "kv" }, pairs.filter(Boolean).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v ?? "—")]));
}

/** A table: columns are [header, (row) => cell]. */
export function table(caption, columns, rows, empty = "Nothing here.") {
  if (!rows.length) return h("p", { class: "empty" }, empty);
  return h("div", { class: "table-wrap" }, h("table", {},
    h("caption", { class: "sr-only" }, caption),
    h("thead", {}, h("tr", {}, columns.map(([t]) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, columns.map(([t, f]) => h("td", { "data-label": t }, f(r))))))));
}

/** A link to a route of the page (`#/...`). */
export function link(route, text, attrs = {}) {
  return h("a", { href: `#${route}`, ...attrs }, text);
}

/** Pretty JSON in a scrollable block. */
export function json(value) {
  return h("pre", { class: "json", tabindex: "0" }, JSON.stringify(value, null, 2));
}

/** A filter form in a disclosure: open on a wide screen (or when `open`), closed on a phone. */
export function filterBox(form, open = false) {
  return h("details", { class: "filter-box", open: open || window.matchMedia("(min-width: 641px)").matches },
    h("summary", {}, "Filters"), form);
}
