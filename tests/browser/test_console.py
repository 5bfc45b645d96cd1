"""The operator's console in a real browser against a real `hookline
serve`: sign in, create a subscription and watch it verify, see posted
events on the timeline with their attempts, bulk requeue dead letters and
follow the job, a reader key sees no button it may not use, keyboard-only
navigation, phone width."""

import json
import os
import re

from playwright.sync_api import expect

from conftest import ADMIN_KEY, READER_KEY, menu, shot, sign_in


def test_sign_in_refuses_a_wrong_key_and_accepts_the_right_one(page, hookline):
    page.goto(hookline.base + "/ui/")
    page.get_by_label("API key").fill("hlk_not_a_key")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text(re.compile("key|credential|auth", re.I))
    shot(page, "sign-in")
    page.get_by_label("API key").fill(ADMIN_KEY)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(page.locator("#who")).to_contain_text("admin")
    # The key is kept for the tab only, never in localStorage or a cookie.
    assert page.evaluate("sessionStorage.getItem('hookline.credential')") == ADMIN_KEY
    assert page.evaluate("localStorage.length") == 0
    assert page.evaluate("document.cookie") == ""


def new_subscription_refused(page, hookline, callback_url):
    """Signs in, opens the new subscription form and submits `callback_url`,
    which the API refuses: its field error shows next to its input."""
    sign_in(page, hookline)
    menu(page, "Subscriptions")
    page.get_by_role("link", name="New subscription").click()
    page.get_by_label("Callback URL").fill(callback_url)
    page.get_by_label("Event types").fill("order.*")
    page.get_by_role("button", name="Create subscription").click()
    error = page.locator('[data-field="callback_url"] .field-error')
    expect(error).not_to_be_empty()
    return error


def test_create_a_subscription_and_watch_it_verify(page, hookline, receiver):
    # A bad URL first: the API's field error shows next to its input.
    new_subscription_refused(page, hookline, "ftp://nowhere")
    expect(page.get_by_label("Callback URL")).to_have_attribute("aria-invalid", "true")
    page.get_by_label("Callback URL").fill(receiver.url("/created"))
    page.get_by_label("Tenant").fill("ui-tenant")
    page.get_by_label("Description").fill("Created in the browser")
    page.get_by_role("button", name="Create subscription").click()
    expect(page.get_by_role("heading", name="Subscription created")).to_be_visible()
    secret = page.get_by_test_id("secret").inner_text()
    assert secret.startswith("whsec_")
    expect(page.locator(".verification")).to_contain_text("verified", timeout=20000)
    shot(page, "subscription-created")
    page.get_by_role("link", name="Open the subscription").click()
    expect(page.get_by_role("heading", name="Created in the browser")).to_be_visible()
    # Pause, resume, and the secret shown once on rotation.
    page.get_by_role("button", name="Pause").click()
    expect(page.get_by_role("button", name="Resume")).to_be_visible()
    page.get_by_role("button", name="Resume").click()
    expect(page.get_by_role("button", name="Pause")).to_be_visible()
    page.get_by_role("button", name="Rotate secret").click()
    new_secret = page.get_by_test_id("secret").inner_text()
    assert new_secret.startswith("whsec_") and new_secret != secret
    # Edit: the description, the acknowledgement timeout and automatic requeue change.
    page.get_by_role("button", name="Edit").click()
    page.get_by_label("Description").fill("Renamed in the browser")
    page.get_by_label("Acknowledgement within (s)").fill("30")
    page.get_by_label("Automatic requeue").select_option("on")
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_role("heading", name="Renamed in the browser")).to_be_visible()
    expect(page.get_by_text("required within 30 s")).to_be_visible()
    expect(page.get_by_text("on: an outage's dead letters are requeued when it ends")).to_be_visible()
    saved = hookline.ok("GET", "/v1/subscriptions/" + page.url.rsplit("/", 1)[-1])
    assert saved["ack_timeout_secs"] == 30 and saved["auto_requeue"] is True, saved
    # Delete asks first.
    page.get_by_role("button", name="Delete").click()
    page.get_by_role("button", name="Yes, delete").click()
    expect(page.get_by_role("heading", name="Subscriptions")).to_be_visible()
    expect(page.get_by_text("Renamed in the browser")).to_have_count(0)


def test_a_pull_only_subscription_needs_no_callback_and_is_verified_at_once(page, hookline):
    sign_in(page, hookline)
    menu(page, "Subscriptions")
    page.get_by_role("link", name="New subscription").click()
    page.get_by_label("Event types").fill("firewalled.*")
    page.get_by_label("Description").fill("Behind a firewall")
    page.get_by_label("Pull", exact=True).select_option("only")
    page.get_by_role("button", name="Create subscription").click()
    expect(page.get_by_role("heading", name="Subscription created")).to_be_visible()
    expect(page.locator(".verification")).to_contain_text("Pull only", timeout=20000)
    page.get_by_role("link", name="Open the subscription").click()
    expect(page.get_by_role("heading", name="Behind a firewall")).to_be_visible()
    expect(page.get_by_text("none: pull only, nothing is pushed")).to_be_visible()
    menu(page, "Subscriptions")
    expect(page.get_by_text("pull only", exact=True).first).to_be_visible()


def test_a_queue_destination_is_confirmed_with_the_token_it_received(page, hookline, sqs):
    # A malformed ARN first: the account must be 12 digits.
    expect(new_subscription_refused(page, hookline, "arn:aws:sqs:us-east-1:1234:orders")).to_contain_text("12 digits")
    arn = "arn:aws:sqs:us-east-1:123456789012:browser-orders"
    page.get_by_label("Callback URL").fill(arn)
    page.get_by_label("Description").fill("Queue destination")
    page.get_by_role("button", name="Create subscription").click()
    expect(page.get_by_role("heading", name="Subscription created")).to_be_visible()
    expect(page.locator(".verification")).to_contain_text("awaiting token", timeout=20000)
    message = hookline.wait("the verification message", lambda: next(
        (m for m in sqs.sent if m["QueueUrl"].endswith("/123456789012/browser-orders")), None))
    token = json.loads(message["MessageBody"])["token"]
    page.get_by_role("link", name="Open the subscription").click()
    expect(page.get_by_role("heading", name="Queue destination")).to_be_visible()
    expect(page.get_by_text("sqs", exact=True)).to_be_visible()
    page.get_by_label("Token").fill("vtk_wrong")
    page.get_by_role("button", name="Confirm").click()
    expect(page.get_by_role("alert")).to_contain_text("token")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Confirm").click()
    expect(page.locator(".page-head")).to_contain_text("active")
    expect(page.get_by_label("Token")).to_have_count(0)
    shot(page, "subscription-queue-confirmed")


def test_posted_events_show_on_the_timeline_with_their_attempts(page, hookline, receiver):
    receiver.status = 200
    sub = hookline.subscription(receiver, "/timeline", event_types=["timeline.*"], tenant_id="ui-tenant",
                                description="Timeline receiver")
    ids = [hookline.ok("POST", "/v1/events", {"type": "timeline.created", "tenant_id": "ui-tenant",
                                             "partition_key": f"t:{n}", "data": {"n": n}})["event_id"] for n in range(3)]
    hookline.wait("deliveries", lambda: all(
        hookline.ok("GET", f"/v1/events/{i}/deliveries")["items"] and
        hookline.ok("GET", f"/v1/events/{i}/deliveries")["items"][0]["status"] == "completed" for i in ids))
    sign_in(page, hookline)
    menu(page, "Events")
    page.get_by_label("Event type").fill("timeline.*")
    page.get_by_role("button", name="Search").click()
    for i in ids:
        expect(page.get_by_role("link", name=i)).to_be_visible()
    shot(page, "events")
    page.get_by_role("link", name=ids[0]).click()
    delivery = page.locator("article.delivery")
    expect(delivery).to_have_count(1)
    expect(delivery).to_contain_text(sub["id"])
    expect(delivery).to_contain_text("delivered")
    expect(delivery.locator(".attempt")).to_contain_text("200")
    expect(delivery.locator(".attempt")).to_contain_text(" ms")
    # Times are in the viewer's zone, UTC on hover.
    assert page.locator("time").first.get_attribute("title").endswith("UTC")
    shot(page, "event-timeline")
    # The subscription's page, and the list with its health.
    if os.environ.get("HOOKLINE_SCREENSHOTS") == "1":
        # Pictures with bars: wait until the minute closed and was flushed.
        hookline.wait("a closed minute of stats", lambda: hookline.ok("GET", f"/v1/subscriptions/{sub['id']}/stats")["points"], timeout=75)
    delivery.get_by_role("link", name=sub["id"]).click()
    expect(page.get_by_role("heading", name="Timeline receiver")).to_be_visible()
    expect(page.get_by_role("heading", name="Health")).to_be_visible()
    page.locator("figure.chart-box").first.wait_for()
    shot(page, "subscription")
    menu(page, "Subscriptions")
    row = page.locator("tbody tr", has_text="Timeline receiver")
    expect(row).to_contain_text("100 %")
    expect(row).to_contain_text("closed")
    shot(page, "subscriptions")


def test_failing_endpoint_dead_letters_then_bulk_requeue_follows_the_job(page, hookline, receiver):
    receiver.status = 200
    sub = hookline.subscription(receiver, "/failing", event_types=["bulk.*"], dead_letter_on=[500],
                                description="Failing receiver")
    receiver.status = 500
    for n in range(4):
        hookline.ok("POST", "/v1/events", {"type": "bulk.failed", "data": {"n": n}, "partition_key": f"b:{n}"})
    open_ones = lambda: hookline.ok("GET", f"/v1/dead-letters?subscription_id={sub['id']}&state=open")["items"]
    hookline.wait("4 dead letters", lambda: len(open_ones()) == 4)
    sign_in(page, hookline)
    menu(page, "Dead letters")
    page.get_by_label("Subscription").fill(sub["id"])
    page.get_by_role("button", name="Filter").click()
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(4)
    expect(rows.first).to_contain_text("HTTP 500")
    shot(page, "dead-letters")
    # Inspect one: the snapshot of its delivery.
    rows.first.get_by_role("link").first.click()
    expect(page.get_by_role("heading", name="Delivery snapshot")).to_be_visible()
    expect(page.get_by_text("HTTP 500").first).to_be_visible()
    shot(page, "dead-letter")
    # The failed attempt on the event's timeline, with what the receiver answered.
    page.get_by_role("link", name=re.compile("^evt_")).first.click()
    attempt = page.locator("article.delivery .attempt")
    expect(attempt).to_contain_text("500")
    attempt.get_by_text("Response body").click()
    expect(attempt.locator("pre.excerpt")).to_contain_text("receiver is down for the test")
    shot(page, "event-failed")
    page.goto(hookline.base + "/ui/#/dead-letters")
    page.get_by_label("Subscription").fill(sub["id"])
    # The endpoint is fixed; requeue them all with a reason.
    receiver.status = 200
    before = len(receiver.received)
    page.get_by_role("button", name="Requeue all").click()
    expect(page.locator('[data-field="reason"] .field-error')).not_to_be_empty()
    page.get_by_label("Reason").fill("endpoint fixed (browser test)")
    page.get_by_role("button", name="Requeue all").click()
    job = page.locator("section.job")
    expect(job).to_contain_text("completed", timeout=30000)
    expect(job).to_contain_text("4 done, 0 failed of 4 matched")
    shot(page, "bulk-requeue")
    hookline.wait("redeliveries", lambda: len(receiver.received) - before >= 4)
    assert not open_ones()
    # The audit trail shows who started it and why.
    menu(page, "Audit trail")
    page.get_by_label("Action", exact=True).select_option("dead_letters.requeue_started")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("tbody tr").first).to_contain_text("endpoint fixed (browser test)")
    shot(page, "audit")
    # The overview's charts draw GET /v1/stats: the summary is the API's total.
    if os.environ.get("HOOKLINE_SCREENSHOTS") == "1":
        # Pictures with bars: wait until the minute closed and was flushed.
        hookline.wait("the failures' minute flushed", lambda: hookline.ok("GET", "/v1/stats")["total"]["failed"] > 0, timeout=75)
    menu(page, "Overview")
    chart = page.get_by_role("img", name=re.compile("^Attempts per minute by outcome"))
    expect(chart).to_have_attribute("aria-label", re.compile(r"\d+ succeeded, \d+ failed"))
    shown = [int(n) for n in re.findall(r"(\d+) (?:succeeded|failed)", chart.get_attribute("aria-label"))]
    total = hookline.ok("GET", "/v1/stats")["total"]  # read after the page: it only grows
    assert shown[0] <= total["succeeded"] and shown[1] <= total["failed"], (shown, total)
    expect(page.get_by_role("img", name=re.compile("^Latency percentiles"))).to_be_visible()
    expect(page.get_by_role("img", name=re.compile("^Failure rate"))).to_be_visible()
    page.get_by_role("button", name="Last week").click()
    expect(page.get_by_role("img", name=re.compile("^Attempts per hour by outcome"))).to_be_visible()
    page.get_by_role("button", name="Last hour").click()
    shot(page, "overview")


def test_replay_by_partition_follows_the_job(page, hookline, receiver):
    receiver.status = 200
    hookline.subscription(receiver, "/replayed", event_types=["replay.*"], description="Replay receiver")
    ids = [hookline.ok("POST", "/v1/events", {"type": "replay.created", "partition_key": "replay:1", "data": {"n": n}})["event_id"]
           for n in range(2)]
    hookline.wait("deliveries", lambda: all(hookline.ok("GET", f"/v1/events/{i}/deliveries")["items"] for i in ids))
    sign_in(page, hookline)
    menu(page, "Replays")
    page.get_by_label("Partition key").fill("replay:1")
    page.get_by_role("button", name="Start replay").click()
    expect(page.locator('[data-field="reason"] .field-error')).not_to_be_empty()
    page.get_by_label("Reason").fill("receiver lost its data (browser test)")
    page.get_by_role("button", name="Start replay").click()
    job = page.locator("section.job")
    expect(job).to_contain_text("completed", timeout=30000)
    expect(job).to_contain_text("2 done, 0 failed of 2 matched")
    shot(page, "replays")
    hookline.wait("replayed deliveries", lambda: all(len(hookline.ok("GET", f"/v1/events/{i}/deliveries")["items"]) == 2 for i in ids))


def test_a_reader_key_sees_no_button_it_may_not_use(page, hookline, receiver):
    receiver.status = 200
    sub = hookline.subscription(receiver, "/reader", event_types=["reader.*"], description="Seen by a reader")
    sign_in(page, hookline, READER_KEY)
    expect(page.locator("#who")).to_contain_text("reader")
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Replays")).to_have_count(0)
    menu(page, "Subscriptions")
    expect(page.get_by_role("link", name="New subscription")).to_have_count(0)
    page.goto(f"{hookline.base}/ui/#/subscriptions/{sub['id']}")
    expect(page.get_by_role("heading", name="Seen by a reader")).to_be_visible()
    for name in ["Edit", "Pause", "Rotate secret", "Delete", "Verify again"]:
        expect(page.get_by_role("button", name=name)).to_have_count(0)
    # And the API refuses it whatever the page sends.
    status = page.evaluate("""async (id) => (await fetch('/ui/api/v1/subscriptions/' + id, {method: 'DELETE',
        headers: {Authorization: 'Bearer ' + sessionStorage.getItem('hookline.credential')}})).status""", sub["id"])
    assert status == 403


def test_keyboard_only_navigation(page, hookline, receiver):
    sign_in(page, hookline)
    page.goto(hookline.base + "/ui/#/")
    page.get_by_role("heading", name="Overview").wait_for()
    # The skip link is the first stop, before the header; it moves focus to the content.
    page.locator(".brand").focus()
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    expect(page.get_by_role("link", name="Skip to content")).to_be_in_viewport()
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    # Tab from the top reaches the main menu; Enter follows a link.
    page.locator(".brand").focus()
    for name, heading in [("Events", "Events"), ("Dead letters", "Dead letters"), ("Subscriptions", "Subscriptions")]:
        for _ in range(15):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.textContent") == name:
                break
        else:
            raise AssertionError(f"Tab never reached {name}")
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
        # A visible focus ring on what has focus.
        page.keyboard.press("Tab")
        outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        assert outline != "none", f"no focus ring on {page.evaluate('document.activeElement.outerHTML')[:80]}"
        page.locator(".brand").focus()
    # A filter form works from the keyboard: type, Enter submits.
    page.get_by_label("Event type").focus()
    page.keyboard.type("nothing.matches")
    page.keyboard.press("Enter")
    expect(page.get_by_text("No subscriptions match.")).to_be_visible()
    # Every input of every main view has a label.
    for route in ["/subscriptions", "/events", "/dead-letters", "/replays", "/audit", "/subscriptions/new"]:
        page.goto(hookline.base + "/ui/#" + route)
        page.locator("form").first.wait_for()
        unlabelled = page.evaluate("""[...document.querySelectorAll('input,select,textarea')]
            .filter(e => e.type !== 'hidden' && !(e.labels && e.labels.length) && !e.getAttribute('aria-label'))
            .map(e => e.name)""")
        assert unlabelled == [], f"{route}: inputs without a label: {unlabelled}"


def test_phone_width(page, hookline, receiver):
    receiver.status = 200
    hookline.subscription(receiver, "/phone", event_types=["phone.*"], description="On a phone")
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, hookline)
    for route, name in [("/", "overview-phone"), ("/subscriptions", "subscriptions-phone"), ("/events", "events-phone"),
                        ("/dead-letters", "dead-letters-phone")]:
        page.goto(hookline.base + "/ui/#" + route)
        page.locator("main h1").wait_for()
        page.wait_for_timeout(300)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{route} scrolls sideways at 390 px ({width} px wide)"
        if route == "/subscriptions":
            expect(page.get_by_text("On a phone")).to_be_visible()
        shot(page, name)


def test_lists_page_through_the_api_cursor(page, hookline):
    batch = [{"type": "paged.created", "tenant_id": "paged", "data": {"n": n}} for n in range(30)]
    answer = hookline.ok("POST", "/v1/events/batch", batch)
    assert answer["accepted"] == 30, answer
    sign_in(page, hookline)
    menu(page, "Events")
    page.get_by_label("Event type").fill("paged.created")
    page.get_by_role("button", name="Search").click()
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(25)
    first = rows.first.get_by_role("link").inner_text()
    previous = page.get_by_role("button", name="Previous")
    expect(previous).to_be_disabled()
    page.get_by_role("button", name="Next").click()
    expect(rows).to_have_count(5)
    expect(page.get_by_role("button", name="Next")).to_be_disabled()
    assert first not in page.locator("tbody").inner_text()
    previous.click()
    expect(rows).to_have_count(25)
    expect(rows.first.get_by_role("link")).to_have_text(first)
    expect(previous).to_be_disabled()


def test_a_blocked_ordered_lane_is_shown_and_freed_through_its_dead_letter(page, hookline, receiver):
    receiver.status = 200
    sub = hookline.subscription(receiver, "/ordered", event_types=["lane.*"], ordering="partition",
                                on_dead_letter="block", dead_letter_on=[500], description="Ordered receiver")
    receiver.status = 500
    first = hookline.ok("POST", "/v1/events", {"type": "lane.created", "partition_key": "lane:1", "data": {"n": 1}})
    blocked = lambda: hookline.ok("GET", f"/v1/subscriptions/{sub['id']}").get("blocked_lanes")
    hookline.wait("the lane to block", blocked)
    receiver.status = 200
    second = hookline.ok("POST", "/v1/events", {"type": "lane.created", "partition_key": "lane:1", "data": {"n": 2}})
    sign_in(page, hookline)
    page.goto(f"{hookline.base}/ui/#/subscriptions/{sub['id']}")
    lanes = page.locator("section", has=page.get_by_role("heading", name="Blocked lanes"))
    expect(lanes).to_contain_text("lane:1")
    # A lane held by a dead letter: the lane skip says to deal with the dead letter...
    lanes.get_by_label("Reason").fill("receiver cannot take this one (browser test)")
    lanes.get_by_role("button", name="Skip what holds it").click()
    expect(page.get_by_role("alert")).to_contain_text("requeue or skip it")
    # ...which the lane links to; skipping it frees the lane.
    lanes.get_by_role("link", name="open the dead letter that holds it").click()
    page.get_by_label("Reason").fill("receiver cannot take this one (browser test)")
    page.get_by_role("button", name="Skip", exact=True).click()
    expect(page.locator(".page-head")).to_contain_text("skipped")
    page.goto(f"{hookline.base}/ui/#/subscriptions/{sub['id']}")
    expect(page.get_by_role("heading", name="Ordered receiver")).to_be_visible()
    expect(page.get_by_role("heading", name="Blocked lanes")).to_have_count(0)
    assert not blocked()
    hookline.wait("the next event of the lane delivered", lambda: any(
        d["status"] == "completed" for d in hookline.ok("GET", f"/v1/events/{second['event_id']}/deliveries")["items"]))
    assert first["event_id"] != second["event_id"]
