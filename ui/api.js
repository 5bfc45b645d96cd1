// The one API client of the console: every request goes to /ui/api/...
// (the public API again, bearer credentials only) with the credential the
// person signed in with, kept in sessionStorage (gone when the tab closes).

const BASE = "/ui/api";
const KEY = "hookline.credential";

/** An answer of the API that was not 2xx, with its message and field errors. */
export class ApiError extends Error {
  constructor(status, body) {
    const e = body && body.error;
    super(e ? e.message : `HTTP ${status}`);
    this.status = status;
    this.code = e ? e.code : "http_" + status;
    this.fields = e ? (e.errors && e.errors.length ? e.errors : e.field ? [{ field: e.field, message: e.message }] : []) : [];
  }
}

/** The credential signed in with (an API key or a portal token), if any. */
export function credential() {
  return sessionStorage.getItem(KEY);
}

/** Keeps `value` as the credential for this tab. */
export function signIn(value) {
  sessionStorage.setItem(KEY, value);
}

/** Forgets the credential. */
export function signOut() {
  sessionStorage.removeItem(KEY);
}

/** A query string of the set values of `params` (arrays repeated). */
export function query(params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === "") continue;
    for (const one of Array.isArray(v) ? v : [v]) q.append(k, one);
  }
  const s = q.toString();
  return s ? "?" + s : "";
}

/** Percent-encodes one path segment (ids may hold `/`). */
export const seg = (id) => encodeURIComponent(id);

/**
 * One request: `path` under /v1 (e.g. "/v1/subscriptions"), JSON in and
 * out. Throws ApiError on a non-2xx answer; a 401 also signs out (the
 * page then shows the sign-in screen).
 */
export async function request(method, path, body, params) {
  const headers = { Accept: "application/json" };
  const cred = credential();
  if (cred) headers.Authorization = "Bearer " + cred;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(BASE + path + query(params), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
    credentials: "omit",
  });
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) {
    const err = new ApiError(res.status, data);
    if (res.status === 401) window.dispatchEvent(new CustomEvent("hookline:unauthorized", { detail: err }));
    throw err;
  }
  return data;
}

export const get = (path, params) => request("GET", path, undefined, params);
export const post = (path, body) => request("POST", path, body ?? {});
export const patch = (path, body) => request("PATCH", path, body);
export const del = (path) => request("DELETE", path);

/** Polls `GET /v1/jobs/{id}` every `ms` until it is no longer running; `each(job)` sees every state. */
export async function followJob(id, each, ms = 500) {
  for (;;) {
    const job = await get(`/v1/jobs/${seg(id)}`);
    each(job);
    if (job.state !== "running") return job;
    await new Promise((r) => setTimeout(r, ms));
  }
}
