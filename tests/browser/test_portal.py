"""The subscriber portal in a real browser: a portal link for tenant A
shows A's subscriptions, events and dead letters and lets its holder add
and verify an endpoint, pick event types seen, rotate a secret, send a
test event and requeue its own dead letters; nothing of tenant B can be
seen or acted on, neither through the page nor through requests written by
hand in the page (`fetch` with the portal token against B's ids)."""

import json

import pytest
from playwright.sync_api import expect

from conftest import menu, shot, sign_in

A, B = "portal-tenant-a", "portal-tenant-b"


@pytest.fixture(scope="module")
def tenants(hookline, receiver):
    """For each tenant: a delivering subscription, a failing one, events
    delivered to both, so each has deliveries and an open dead letter."""
    receiver.status = 200
    out = {}
    for t in (A, B):
        ok = hookline.subscription(receiver, f"/{t}/ok", event_types=["shop.*"], tenant_id=t, description=f"{t} orders")
        failing = hookline.subscription(receiver, f"/{t}/failing", event_types=["shop.refund"], tenant_id=t,
                                        dead_letter_on=[500], description=f"{t} refunds")
        out[t] = {"ok": ok, "failing": failing, "events": []}
    receiver.status = 500
    for t in (A, B):
        for kind in ("shop.order", "shop.refund"):
            out[t]["events"].append(hookline.ok("POST", "/v1/events", {"type": kind, "tenant_id": t, "data": {"t": t}})["event_id"])
    for t in (A, B):
        sub = out[t]["failing"]["id"]
        dls = hookline.wait(f"{t}'s dead letter", lambda: hookline.ok("GET", f"/v1/dead-letters?subscription_id={sub}&state=open")["items"])
        out[t]["dead_letter"] = dls[0]["id"]
    receiver.status = 200
    return out


def open_portal(page, hookline, tenant, through_console=False):
    """Opens tenant's portal in `page`: with a link an admin made in the
    console (its Portal links page), or through the API."""
    if through_console:
        sign_in(page, hookline)
        menu(page, "Portal links")
        page.get_by_label("Tenant").fill(tenant)
        page.get_by_label("Expires after").select_option("3600")
        page.get_by_role("button", name="Create link").click()
        url = page.get_by_label("Link").input_value()
        shot(page, "portal-link")
        link = None
    else:
        link = hookline.ok("POST", "/v1/portal-links", {"tenant_id": tenant, "expires_in_seconds": 900})
        url = link["url"] if link["url"].startswith("http") else hookline.base + link["url"]
    assert url.startswith(hookline.base + "/ui/#/portal?token="), url
    page.goto(url)
    expect(page.locator("#who")).to_contain_text(f"Portal of {tenant}")
    # The token left the address bar (and the history entry) at once.
    assert "token" not in page.url
    return link


def test_the_portal_shows_its_tenant_only_and_refuses_the_other_tenant(page, hookline, tenants):
    open_portal(page, hookline, A, through_console=True)
    nav = page.get_by_role("navigation", name="Main")
    for hidden in ["Overview", "Replays", "Audit trail"]:
        expect(nav.get_by_role("link", name=hidden, exact=True)).to_have_count(0)
    expect(page.get_by_role("heading", name="Subscriptions")).to_be_visible()
    expect(page.get_by_text(f"{A} orders")).to_be_visible()
    expect(page.get_by_text(f"{B} orders")).to_have_count(0)
    # The tenant filter is not offered: the token sees one tenant.
    expect(page.get_by_label("Tenant")).to_have_count(0)
    shot(page, "portal")
    menu(page, "Events")
    for e in tenants[A]["events"]:
        expect(page.get_by_role("link", name=e)).to_be_visible()
    for e in tenants[B]["events"]:
        expect(page.get_by_role("link", name=e)).to_have_count(0)
    menu(page, "Dead letters")
    expect(page.get_by_role("link", name=tenants[A]["dead_letter"])).to_be_visible()
    expect(page.get_by_role("link", name=tenants[B]["dead_letter"])).to_have_count(0)
    # B's pages, opened by address, show the API's refusal and nothing of B.
    for route in [f"/subscriptions/{tenants[B]['ok']['id']}", f"/events/{tenants[B]['events'][0]}",
                  f"/dead-letters/{tenants[B]['dead_letter']}"]:
        page.goto(f"{hookline.base}/ui/#{route}")
        expect(page.get_by_role("alert")).to_be_visible()
        expect(page.locator("main")).not_to_contain_text(B)
    # Requests written by hand with the portal token: every one refused.
    b = tenants[B]
    attempts = [
        ("GET", f"/v1/subscriptions/{b['ok']['id']}", None),
        ("PATCH", f"/v1/subscriptions/{b['ok']['id']}", {"active": False}),
        ("DELETE", f"/v1/subscriptions/{b['ok']['id']}", None),
        ("POST", f"/v1/subscriptions/{b['ok']['id']}/rotate-secret", {}),
        ("POST", f"/v1/subscriptions/{b['ok']['id']}/verify", {}),
        ("POST", f"/v1/subscriptions/{b['ok']['id']}/test", {}),
        ("GET", f"/v1/events/{b['events'][0]}", None),
        ("GET", f"/v1/events/{b['events'][0]}/deliveries", None),
        ("GET", f"/v1/dead-letters/{b['dead_letter']}", None),
        ("POST", f"/v1/dead-letters/{b['dead_letter']}/requeue", {"reason": "not mine"}),
        ("POST", f"/v1/dead-letters/{b['dead_letter']}/skip", {"reason": "not mine"}),
        ("GET", f"/v1/subscriptions?tenant_id={B}", None),
        ("GET", f"/v1/events?tenant_id={B}", None),
        ("GET", f"/v1/dead-letters?tenant_id={B}", None),
        ("POST", "/v1/dead-letters/requeue", {"filter": {"tenant_id": B}, "reason": "not mine"}),
        ("POST", "/v1/subscriptions", {"callback_url": "http://127.0.0.1:9/x", "event_types": ["*"], "tenant_id": B}),
        ("POST", "/v1/keys", {"name": "mine", "role": "admin"}),
        ("POST", "/v1/portal-links", {"tenant_id": B}),
        ("POST", "/v1/portal-links", {"tenant_id": A}),
        ("POST", "/v1/events", {"type": "shop.order", "data": {}}),
        ("GET", "/metrics", None),
    ]
    answers = page.evaluate("""async (attempts) => {
        const token = sessionStorage.getItem('hookline.credential');
        const out = [];
        for (const [method, path, body] of attempts) {
            const r = await fetch('/ui/api' + path, {method, headers: {Authorization: 'Bearer ' + token,
                'Content-Type': 'application/json'}, body: body === null ? undefined : JSON.stringify(body)});
            out.push([method, path, r.status, await r.text()]);
        }
        return out;
    }""", attempts)
    for method, path, status, body in answers:
        assert status in (403, 404), f"{method} {path} → {status} {body[:200]}"
        assert '"items"' not in body and b["ok"]["callback_url"] not in body, f"{method} {path} leaked: {body[:200]}"
    # B is untouched.
    assert hookline.ok("GET", f"/v1/subscriptions/{b['ok']['id']}")["active"] is True
    assert hookline.ok("GET", f"/v1/dead-letters/{b['dead_letter']}")["state"] == "open"


def test_the_portal_adds_verifies_rotates_tests_and_requeues_its_own(page, hookline, receiver, tenants):
    receiver.status = 200
    open_portal(page, hookline, A)
    page.get_by_role("link", name="New subscription").click()
    # The types seen for the tenant are offered.
    picker = page.get_by_role("group", name="Types seen")
    expect(picker.get_by_label("shop.order")).to_be_visible()
    expect(page.get_by_label("Tenant")).to_have_count(0)
    page.get_by_label("Callback URL").fill(receiver.url(f"/{A}/portal"))
    picker.get_by_label("shop.order").check()
    expect(page.get_by_label("Event types")).to_have_value("shop.order")
    page.get_by_label("Description").fill("Added in the portal")
    page.get_by_role("button", name="Create subscription").click()
    expect(page.locator(".verification")).to_contain_text("verified", timeout=20000)
    page.get_by_role("link", name="Open the subscription").click()
    expect(page.get_by_role("heading", name="Added in the portal")).to_be_visible()
    sub_id = page.url.rsplit("/", 1)[1]
    assert hookline.ok("GET", f"/v1/subscriptions/{sub_id}")["tenant_id"] == A
    page.get_by_role("button", name="Rotate secret").click()
    assert page.get_by_test_id("secret").inner_text().startswith("whsec_")
    before = len(receiver.received)
    page.get_by_role("button", name="Send test event").click()
    page.get_by_role("button", name="Send", exact=True).click()
    sent = page.get_by_role("status").filter(has_text="Sent:")
    expect(sent).to_be_visible()
    sent.get_by_role("link").click()
    delivery = page.locator("article.delivery")
    for _ in range(40):
        if "delivered" in (delivery.first.inner_text() if delivery.count() else ""):
            break
        page.wait_for_timeout(250)
        page.get_by_role("button", name="Refresh").click()
    expect(delivery).to_have_count(1)
    expect(delivery).to_contain_text(sub_id)
    expect(delivery).to_contain_text("delivered")
    got = [p for p, _ in receiver.received[before:]]
    assert got == [f"/{A}/portal"], f"the test event went to {got}"
    # Its own dead letter: requeued with a reason.
    page.goto(f"{hookline.base}/ui/#/dead-letters/{tenants[A]['dead_letter']}")
    page.get_by_label("Reason").fill("fixed on our side (portal)")
    page.get_by_role("button", name="Requeue").click()
    expect(page.locator(".page-head")).to_contain_text("requeued")
    shot(page, "portal-dead-letter")


def test_a_forged_portal_token_is_refused(page, hookline):
    page.goto(hookline.base + "/ui/#/portal?token=hlp_forged.not-a-token")
    expect(page.get_by_label("API key")).to_be_visible()
    expect(page.get_by_role("alert")).to_be_visible()
    assert "token" not in page.url
    assert page.evaluate("sessionStorage.getItem('hookline.credential')") is None
