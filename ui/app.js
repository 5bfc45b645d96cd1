// Hookline's console and portal: one page, plain ES modules, no build step.
// It talks only to the public API under /ui/api (the same routes as /v1,
// authenticated by the key or portal token the person signs in with).
// This module signs in, asks the API who the caller is (GET /v1/me) and
// routes the page's fragment (#/...) to one view module each.

import * as api from "./api.js";
import { h, fill, time } from "./dom.js";
import * as overview from "./views/overview.js";
import * as subscriptions from "./views/subscriptions.js";
import * as subscription from "./views/subscription.js";
import * as events from "./views/events.js";
import * as eventView from "./views/event.js";
import * as deadLetters from "./views/dead_letters.js";
import * as deadLetter from "./views/dead_letter.js";
import * as replays from "./views/replays.js";
import * as audit from "./views/audit.js";
import * as portalLinks from "./views/portal_links.js";
import * as eventTypes from "./views/event_types.js";
import { Session } from "./session.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const who = document.getElementById("who");
let session = null;

// Each page: its fragment pattern, its view module, what the caller must
// be allowed (Session.can), and its entry in the main menu, if it has one.
const ROUTES = [
  { re: /^\/$/, view: overview, need: "overview", menu: ["/", "Overview"] },
  { re: /^\/subscriptions$/, view: subscriptions, need: "read", menu: ["/subscriptions", "Subscriptions"] },
  { re: /^\/subscriptions\/new$/, view: subscription, need: "manage_subscriptions" },
  { re: /^\/subscriptions\/([^/]+)$/, view: subscription, need: "read" },
  { re: /^\/events$/, view: events, need: "read", menu: ["/events", "Events"] },
  { re: /^\/events\/([^/]+)$/, view: eventView, need: "read" },
  { re: /^\/dead-letters$/, view: deadLetters, need: "read", menu: ["/dead-letters", "Dead letters"] },
  { re: /^\/dead-letters\/([^/]+)$/, view: deadLetter, need: "read" },
  { re: /^\/replays$/, view: replays, need: "replays", menu: ["/replays", "Replays"] },
  { re: /^\/audit$/, view: audit, need: "audit", menu: ["/audit", "Audit trail"] },
  { re: /^\/portal-links$/, view: portalLinks, need: "manage_keys", menu: ["/portal-links", "Portal links"] },
  { re: /^\/event-types$/, view: eventTypes, need: "read", menu: ["/event-types", "Event types"] },
];
let rendering = 0; // the latest render: an older one finishing late is dropped

/** Navigates to `route` (a fragment path such as "/events/abc"). */
export function navigate(route) {
  if (location.hash === "#" + route) render();
  else location.hash = route;
}

function currentRoute() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, q] = raw.split("?");
  return { path, params: new URLSearchParams(q || "") };
}

async function render() {
  const { path, params } = currentRoute();
  if (path === "/portal" && params.get("token")) {
    // A portal link: sign in with its token, then take it out of the URL
    // (and the history) at once.
    api.signIn(params.get("token"));
    history.replaceState(null, "", location.pathname + "#/subscriptions");
    session = null;
    return render();
  }
  if (!api.credential()) return signInScreen();
  if (!session) {
    try {
      session = await Session.load();
    } catch (e) {
      api.signOut();
      return signInScreen(e.message);
    }
    drawChrome();
  }
  if (path === "/" && !session.can("overview")) return navigate("/subscriptions");
  const route = ROUTES.find((r) => r.re.test(path));
  markCurrent(path);
  if (!route) return fill(main, h("h1", {}, "Not found"), h("p", {}, "No such page."));
  if (!session.can(route.need)) {
    return fill(main, h("h1", {}, "Not allowed"), h("p", {}, "Your credential may not see this page."));
  }
  const args = (path.match(route.re) || []).slice(1).map(decodeURIComponent);
  // The view draws into a box of its own, shown once it is ready (and only
  // if no later navigation started meanwhile).
  const mine = ++rendering;
  const box = h("div", { class: "view" });
  fill(main, h("p", { class: "muted" }, "Loading…"));
  try {
    await route.view.render(box, { session, args, params, navigate, path });
  } catch (e) {
    const title = e.status === 404 ? "Not found" : e.status === 403 ? "Not allowed" : "Something went wrong";
    fill(box, h("h1", {}, title), h("div", { class: "alert", role: "alert" }, e.message));
  }
  if (mine !== rendering) return;
  fill(main, box);
  main.focus({ preventScroll: true });
}

function drawChrome() {
  fill(nav, h("ul", {}, ROUTES.filter((r) => r.menu && session.can(r.need)).map(({ menu: [route, label] }) =>
    h("li", {}, h("a", { href: "#" + route, "data-route": route }, label)))));
  fill(who, h("span", { class: "who-text" }, session.describe(), session.expiresAt ? [" · until ", time(session.expiresAt)] : null),
    h("button", { type: "button", class: "link-button", onclick: () => { api.signOut(); session = null; fill(nav); fill(who); navigate("/"); } }, "Sign out"));
}

function markCurrent(path) {
  for (const a of nav.querySelectorAll("a")) {
    const r = a.dataset.route;
    const on = r === "/" ? path === "/" : path === r || path.startsWith(r + "/");
    if (on) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

function signInScreen(message) {
  rendering++; // a view still loading is not shown over this
  fill(nav);
  fill(who);
  const input = h("input", { id: "key", name: "key", type: "password", autocomplete: "off", required: true, "aria-describedby": "key-hint" });
  const form = h("form", { class: "card signin", onsubmit: (e) => {
    e.preventDefault();
    api.signIn(input.value.trim());
    session = null;
    render();
  } },
  h("h1", {}, "Sign in to Hookline"),
  message ? h("div", { class: "alert", role: "alert" }, message) : null,
  h("div", { class: "field" }, h("label", { for: "key" }, "API key"), input,
    h("p", { class: "hint", id: "key-hint" }, "The key is kept in this tab only (sessionStorage) and sent as a bearer credential to this server's API.")),
  h("button", { type: "submit", class: "primary" }, "Sign in"));
  fill(main, form);
  input.focus();
}

// The skip link moves focus to the content without touching the route.
document.getElementById("skip").addEventListener("click", (e) => {
  e.preventDefault();
  main.focus();
});
window.addEventListener("hashchange", render);
window.addEventListener("hookline:unauthorized", () => {
  api.signOut();
  session = null;
  signInScreen("Your credential is no longer accepted (expired or revoked). Sign in again.");
});
render();
