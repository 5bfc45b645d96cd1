// One subscription: its health, settings and statistics, and what may be
// done to it (edit, pause/resume, verify again, rotate the secret, send a
// test event, delete). Also the "new subscription" page, which shows the
// verification handshake as it happens.

import { get, post, patch, del, seg } from "../api.js";
import { h, fill, dl, time, link, badge, showError, json } from "../dom.js";
import { stateBadge, breakerBadge, rate, ms, awaitingToken } from "./subscriptions.js";
import { subscriptionForm } from "./subscription_form.js";
import { panel } from "../chart.js";

/** Renders `#/subscriptions/new` or `#/subscriptions/{id}`. */
export async function render(main, ctx) {
  const [id] = ctx.args;
  if (!id) return renderNew(main, ctx);
  const sub = await get(`/v1/subscriptions/${seg(id)}`);
  return renderOne(main, ctx, sub);
}

function renderNew(main, ctx) {
  const form = subscriptionForm(ctx.session, null, (created) => renderCreated(main, ctx, created), () => ctx.navigate("/subscriptions"));
  fill(main, h("h1", {}, "New subscription"), form);
  form.querySelector("input").focus();
}

/** The secret, shown once, with a copy button. */
function secretBox(secret, what) {
  const code = h("code", { class: "secret", "data-testid": "secret" }, secret);
  return h("div", { class: "card secret-box", role: "status" },
    h("h2", {}, what),
    h("p", {}, "Copy it now: it is shown only this once. Receivers verify each delivery's signature with it."),
    code, " ",
    h("button", { type: "button", onclick: (e) => { navigator.clipboard?.writeText(secret); e.target.textContent = "Copied"; } }, "Copy"));
}

/** After a create: the secret once, and the verification followed live. */
async function renderCreated(main, ctx, created) {
  const status = h("p", { class: "verification", role: "status", "aria-live": "polite" }, badge("verifying", "warn"), " Sending the verification challenge to the endpoint…");
  fill(main, h("h1", {}, "Subscription created"), secretBox(created.secret, "Signing secret"),
    h("section", { class: "card" }, h("h2", {}, "Verification"), status),
    h("p", {}, link(`/subscriptions/${encodeURIComponent(created.id)}`, "Open the subscription", { class: "button" })));
  await followVerification(created.id, status);
}

/** Polls the subscription until it is verified or its verification failed (at most a minute). */
async function followVerification(id, status) {
  const until = Date.now() + 60e3;
  while (Date.now() < until) {
    const s = await get(`/v1/subscriptions/${seg(id)}`);
    if (s.verified && s.destination === "pull") {
      fill(status, badge("verified", "ok"), " Pull only: nothing to verify, nothing is pushed. Its subscriber key pulls GET /v1/subscriptions/{id}/events.");
      return s;
    }
    if (s.verified) {
      fill(status, badge("verified", "ok"), " The endpoint answered the challenge: deliveries start now.");
      return s;
    }
    if (awaitingToken(s)) {
      fill(status, badge("awaiting token", "warn"), " A verification message with a token was sent to the ",
        s.destination === "sqs" ? "queue" : "bus", ". Confirm it on the subscription's page with that token.");
      return s;
    }
    if (s.verification_error) {
      fill(status, badge("verification failed", "bad"), " ", h("span", { class: "error-text" }, s.verification_error));
      return s;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  fill(status, badge("verifying", "warn"), " Still waiting for the endpoint's answer; reload later.");
}

function renderOne(main, ctx, sub) {
  const { session } = ctx;
  const msg = h("div", { class: "alert", role: "alert", hidden: true });
  const extra = h("div", { "aria-live": "polite" });
  const reload = async () => renderOne(main, ctx, await get(`/v1/subscriptions/${seg(sub.id)}`));
  async function act(fn) {
    try {
      showError(main, null);
      await fn();
    } catch (e) {
      showError(main, e);
      msg.focus?.();
    }
  }
  const confirmDelete = h("div", { class: "confirm", hidden: true, role: "group", "aria-label": "Confirm delete" },
    h("p", {}, "Delete this subscription? Deliveries to it stop; this cannot be undone."),
    h("button", { type: "button", class: "danger", onclick: () => act(async () => { await del(`/v1/subscriptions/${seg(sub.id)}`); ctx.navigate("/subscriptions"); }) }, "Yes, delete"),
    h("button", { type: "button", onclick: () => { confirmDelete.hidden = true; } }, "Cancel"));
  const can = (a) => session.can(a);
  const buttons = [
    can("manage_subscriptions") && h("button", { type: "button", onclick: () => {
      fill(extra, subscriptionForm(session, sub, () => reload(), () => fill(extra)));
      extra.querySelector("input").focus();
    } }, "Edit"),
    can("manage_subscriptions") && h("button", { type: "button", onclick: () => act(async () => { await patch(`/v1/subscriptions/${seg(sub.id)}`, { active: !sub.active }); await reload(); }) }, sub.active ? "Pause" : "Resume"),
    can("recover") && h("button", { type: "button", onclick: () => act(async () => {
      await post(`/v1/subscriptions/${seg(sub.id)}/verify`, {});
      const status = h("p", { role: "status" }, badge("verifying", "warn"), " Verifying…");
      fill(extra, h("section", { class: "card" }, h("h2", {}, "Verification"), status));
      await followVerification(sub.id, status);
    }) }, "Verify again"),
    can("manage_subscriptions") && h("button", { type: "button", onclick: () => act(async () => {
      const r = await post(`/v1/subscriptions/${seg(sub.id)}/rotate-secret`, {});
      fill(extra, secretBox(r.secret, "New signing secret"));
    }) }, "Rotate secret"),
    can("manage_subscriptions") && h("button", { type: "button", onclick: () => fill(extra, testForm(sub, act)) }, "Send test event"),
    can("manage_subscriptions") && h("button", { type: "button", class: "danger", onclick: () => { confirmDelete.hidden = false; confirmDelete.querySelector("button").focus(); } }, "Delete"),
  ];
  const hl = sub.health;
  fill(main,
    h("nav", { class: "crumbs", "aria-label": "Breadcrumb" }, link("/subscriptions", "Subscriptions"), " / "),
    h("div", { class: "page-head" }, h("h1", {}, sub.description || sub.id), stateBadge(sub)),
    msg,
    h("div", { class: "toolbar" }, buttons.filter(Boolean)),
    confirmDelete, extra,
    h("div", { class: "grid2" },
      h("section", { class: "card" }, h("h2", {}, "Health"), dl([
        ["Breaker", h("span", {}, breakerBadge(hl), hl.breaker_until ? [" until ", time(hl.breaker_until)] : null)],
        ["Success rate", `${rate(hl.success_rate)} of ${hl.attempts} attempts (last ${hl.window_minutes} min)`],
        ["Latency p50 / p99", `${ms(hl.latency_p50_ms)} / ${ms(hl.latency_p99_ms)}`],
        ["Consecutive failures", String(hl.consecutive_failures)],
        ["Last error", hl.last_error ? h("span", { class: "error-text" }, hl.last_error) : null],
        ["Last error at", time(hl.last_error_at)],
        ["Last success at", time(hl.last_success_at)],
        sub.verification_error && ["Verification", h("span", { class: "error-text" }, sub.verification_error)],
        sub.disabled_reason && ["Disabled", [sub.disabled_reason, " ", time(sub.disabled_at)]],
      ])),
      h("section", { class: "card" }, h("h2", {}, "Settings"), dl([
        ["Id", h("code", {}, sub.id)],
        ["Callback URL", sub.callback_url ? h("code", { class: "wrap" }, sub.callback_url) : "none: pull only, nothing is pushed"],
        ["Destination", sub.destination],
        ["Event types", h("code", {}, sub.event_types.join(", "))],
        ["Tenant", sub.tenant_id],
        ["Ordering", sub.ordering],
        ["Payload format", sub.payload_format],
        ["Retries", `${sub.retry_policy.max_attempts} attempts`],
        ["Dead-letter on", sub.dead_letter_on.join(", ") || null],
        ["Acknowledgement", sub.ack_timeout_secs ? `required within ${sub.ack_timeout_secs} s` : null],
        ["Automatic requeue", sub.auto_requeue ? "on: an outage's dead letters are requeued when it ends" : null],
        ["Pull", sub.destination === "pull" ? "only (GET /v1/subscriptions/{id}/events; verified at creation)" : sub.pull ? "on (GET /v1/subscriptions/{id}/events)" : null],
        ["Headers", Object.keys(sub.headers).length ? json(sub.headers) : null],
        ["Created", time(sub.created_at)],
      ]))),
    awaitingToken(sub) && can("recover") ? tokenForm(sub, act, reload) : null,
    sub.blocked_lanes?.length ? blockedLanes(sub, session.can("recover"), act, reload) : null,
    h("p", {}, link(`/dead-letters?subscription_id=${encodeURIComponent(sub.id)}`, "Dead letters of this subscription")),
    panel((q) => get(`/v1/subscriptions/${seg(sub.id)}/stats`, q), "Statistics of this subscription"));
}

/** A queue or bus owner's confirmation: the token of the verification message. */
function tokenForm(sub, act, reload) {
  const input = h("input", { id: "verify-token", name: "token", autocomplete: "off", placeholder: "vtk_…" });
  return h("section", { class: "card" }, h("h2", {}, "Confirm the destination"),
    h("form", { class: "form", onsubmit: (e) => { e.preventDefault(); act(async () => {
      await post(`/v1/subscriptions/${seg(sub.id)}/verify`, { token: input.value.trim() });
      await reload();
    }); } },
      h("p", {}, "Paste the token of the verification message (type hookline.verification) the ",
        sub.destination === "sqs" ? "queue" : "bus", " received."),
      h("label", { for: "verify-token" }, "Token"), input, " ",
      h("button", { type: "submit" }, "Confirm")));
}

/** The test-event form: one event to this subscription only. */
function testForm(sub, act) {
  const typeInput = h("input", { id: "test-type", name: "event_type", value: "hookline.test" });
  const out = h("div", { role: "status", "aria-live": "polite" });
  const form = h("form", { class: "card form", onsubmit: (e) => { e.preventDefault(); act(async () => {
    const r = await post(`/v1/subscriptions/${seg(sub.id)}/test`, { event_type: typeInput.value.trim() || undefined });
    const id = r.event_id || r.id;
    fill(out, "Sent: ", link(`/events/${encodeURIComponent(id)}`, id), ". Its deliveries show on the event's page.");
  }); } },
  h("h2", {}, "Send a test event"),
  h("p", {}, "One event to this subscription only, signed and retried like any other."),
  h("div", { class: "field", "data-field": "event_type" }, h("label", { for: "test-type" }, "Event type"), typeInput, h("p", { class: "field-error" })),
  h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Send")), out);
  return form;
}

/**
 * The ordered lanes that are held, each with a skip (with a reason) for a
 * caller that may recover: what holds the lane is skipped and the
 * partition goes on. A lane held by a dead letter links to it (the API
 * has it requeued or skipped there, and says so to a lane skip).
 */
function blockedLanes(sub, canSkip, act, reload) {
  return h("section", { class: "card" }, h("h2", {}, "Blocked lanes"),
    h("ul", { class: "lanes" }, sub.blocked_lanes.map((l, i) => {
      const reason = h("input", { id: `lane-reason-${i}`, name: "reason" });
      // A dead letter that holds the lane is requeued or skipped on its own page.
      const held = /dead letter (\S+)/.exec(l.reason);
      return h("li", {}, h("code", {}, l.partition_key), " ", l.reason, " since ", time(l.since),
        held ? [" · ", link(`/dead-letters/${encodeURIComponent(held[1])}`, "open the dead letter that holds it")] : null,
        canSkip ? h("form", { class: "inline-form", onsubmit: (e) => { e.preventDefault(); act(async () => {
          await post(`/v1/subscriptions/${seg(sub.id)}/lanes/${seg(l.partition_key)}/skip`,
            { reason: reason.value.trim() || undefined, tenant_id: l.tenant_id ?? undefined });
          await reload();
        }); } },
        h("label", { for: `lane-reason-${i}` }, "Reason"), reason,
        h("button", { type: "submit" }, "Skip what holds it")) : null);
    })));
}
