//! The subscriber portal and the console's helpers, on both backends
//! (`tests/tests/serve`, `tests/tests/aws`), through the console's copy of
//! the API (`/ui/api/…`, bearer credentials only: on AWS the route without
//! the IAM authorizer): a portal link's token acts for its tenant only,
//! with the portal's permissions (`GET /v1/me`); an expired or forged
//! token is a `401` saying only which; a test event reaches its one
//! subscription through the usual delivery path and no other; the event
//! types seen at ingest are listed per tenant, paged. The isolation suite
//! (`crate::isolation`) runs a portal token against every route.

use serde_json::{json, Value};

use crate::pipeline::{unique_name, Pipeline};
use crate::{eventually, Behaviour, Receiver};

/// A verified subscription of `tenant` delivering to `path`.
async fn subscription(p: &impl Pipeline, r: &Receiver, path: &str, tenant: &str, patterns: &[&str]) -> String {
    let body = json!({"callback_url": r.url(path, Behaviour::Ok), "event_types": patterns, "tenant_id": tenant});
    p.subscribe(body).await.0
}

/// A portal link for `tenant` lasting `seconds`; its token.
async fn portal_token(p: &impl Pipeline, tenant: &str, seconds: i64) -> String {
    let (st, link) = p.post("/v1/portal-links", &json!({"tenant_id": tenant, "expires_in_seconds": seconds})).await;
    assert_eq!(st, 201, "{link}");
    let link: hookline_wire::portal::PortalLink = serde_json::from_value(link).expect("a portal link");
    assert_eq!(link.tenant_id, tenant);
    assert_eq!(link.url, format!("/ui/#/portal?token={}", link.token), "a relative link carrying the token");
    link.token
}

/// A portal link's token is a portal caller of its tenant: `GET /v1/me`
/// says so, its listings hold its tenant's resources only, another
/// tenant's subscription is a `404` whatever it asks, and keys, portal
/// links, metrics and posting events are `403`. Its creation is audited
/// without the token; an expired token and a forged one are `401`, saying
/// only `expired` or `invalid`.
pub async fn a_portal_token_acts_for_its_tenant_only(p: &mut impl Pipeline) {
    let r = Receiver::start().await;
    let (a, b) = (unique_name("portal-a"), unique_name("portal-b"));
    let sub_a = subscription(p, &r, "/a", &a, &["order.*"]).await;
    let sub_b = subscription(p, &r, "/b", &b, &["order.*"]).await;
    let token = portal_token(p, &a, 3600).await;

    let (st, me) = p.call_console(&token, "GET", "/v1/me", None).await;
    assert_eq!(st, 200, "{me}");
    let me: hookline_wire::portal::Me = serde_json::from_value(me).expect("who I am");
    use hookline_wire::portal::{CallerRole, Permission};
    assert_eq!((me.role, me.tenant_id.as_deref()), (CallerRole::Portal, Some(a.as_str())));
    assert_eq!(
        me.permissions,
        [Permission::Identify, Permission::Read, Permission::Recover, Permission::ManageSubscriptions]
    );
    assert!(me.actor.starts_with(&format!("portal:{a}:")) && me.expires_at.is_some(), "{me:?}");
    let (st, admin) = p.call("GET", "/v1/me", None).await;
    assert_eq!((st, admin["role"].as_str(), &admin["tenant_id"]), (200, Some("admin"), &Value::Null), "{admin}");

    let (st, list) = p.call_console(&token, "GET", "/v1/subscriptions?limit=1000", None).await;
    assert_eq!(st, 200, "{list}");
    let ids: Vec<&str> = list["items"].as_array().unwrap().iter().filter_map(|s| s["id"].as_str()).collect();
    assert_eq!(ids, [sub_a.as_str()], "its tenant's subscriptions only");
    for (method, path, body) in [
        ("GET", format!("/v1/subscriptions/{sub_b}"), None),
        ("PATCH", format!("/v1/subscriptions/{sub_b}"), Some(json!({"active": false}))),
        ("DELETE", format!("/v1/subscriptions/{sub_b}"), None),
        ("POST", format!("/v1/subscriptions/{sub_b}/rotate-secret"), Some(json!({}))),
        ("POST", format!("/v1/subscriptions/{sub_b}/test"), Some(json!({}))),
    ] {
        let bytes = body.map(|b| b.to_string().into_bytes());
        let (st, v) = p.call_console(&token, method, &path, bytes.as_deref()).await;
        assert_eq!(st, 404, "{method} {path}: {v}");
        assert!(!v.to_string().contains(&sub_b), "nothing of it shows: {v}");
    }
    let (st, v) = p.call_console(&token, "GET", &format!("/v1/subscriptions?tenant_id={b}"), None).await;
    assert_eq!((st, v["error"]["field"].as_str()), (403, Some("tenant_id")), "{v}");
    let event = json!({"type": "order.created", "tenant_id": a, "data": {}}).to_string();
    for (method, path, body) in [
        ("POST", "/v1/events", Some(event.as_str())),
        ("GET", "/v1/keys", None),
        ("POST", "/v1/portal-links", Some(r#"{"tenant_id":"x"}"#)),
        ("GET", "/metrics", None),
        ("POST", "/v1/subscriptions/reindex", Some("{}")),
    ] {
        let (st, v) = p.call_console(&token, method, path, body.map(str::as_bytes)).await;
        assert_eq!((st, v["error"]["code"].as_str()), (403, Some("forbidden")), "{method} {path}: {v}");
    }
    let (st, v) = p.call_console(&token, "GET", &format!("/v1/subscriptions/{sub_a}"), None).await;
    assert_eq!(st, 200, "its own subscription: {v}");
    let (st, v) =
        p.call_console(&token, "PATCH", &format!("/v1/subscriptions/{sub_a}"), Some(br#"{"active":true}"#)).await;
    assert_eq!(st, 200, "it manages its own subscription: {v}");

    let (st, audit) = p.get(&format!("/v1/audit?action=portal_link.created&tenant_id={a}")).await;
    assert_eq!(st, 200, "{audit}");
    assert_eq!(audit["items"].as_array().map(Vec::len), Some(1), "{audit}");
    assert!(!audit.to_string().contains(&token), "the audit trail never holds the token");

    // Forged: another tenant's name under A's MAC; a cut token; garbage.
    let parts: Vec<&str> = token.split('.').collect();
    let forged = {
        use base64::Engine;
        let other = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&b);
        format!("{}.{}.{}.{other}.{}", parts[0], parts[1], parts[2], parts[4])
    };
    for bad in [forged.as_str(), &token[..token.len() - 2], "hlp1.garbage"] {
        let (st, v) = p.call_console(bad, "GET", "/v1/subscriptions", None).await;
        assert_eq!(st, 401, "{bad}: {v}");
        assert_eq!(v["error"]["message"], "the portal token is invalid", "{v}");
    }
    let short = portal_token(p, &a, 1).await;
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let (st, v) = p.call_console(&short, "GET", "/v1/me", None).await;
    assert_eq!((st, v["error"]["message"].as_str()), (401, Some("the portal token has expired")), "{v}");

    let (st, v) = p.post("/v1/portal-links", &json!({"tenant_id": a, "expires_in_seconds": 604_801})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("expires_in_seconds")), "{v}");
    let bound = p.credential(shared::access::Role::Admin, Some(&a)).await;
    let (st, v) =
        p.call_as(&bound, "POST", "/v1/portal-links", Some(json!({"tenant_id": b}).to_string().as_bytes()), &[]).await;
    assert_eq!(
        (st, v["error"]["field"].as_str()),
        (403, Some("tenant_id")),
        "a tenant's admin links its tenant only: {v}"
    );
    let reader = p.credential(shared::access::Role::Reader, None).await;
    let (st, v) =
        p.call_as(&reader, "POST", "/v1/portal-links", Some(json!({"tenant_id": a}).to_string().as_bytes()), &[]).await;
    assert_eq!(st, 403, "admins only: {v}");
}

/// A test event sent through the portal reaches its one subscription,
/// signed, through the usual sagas (its deliveries show one completed
/// saga), and no other subscription of the tenant, not even one whose
/// patterns name `hookline.*`; it is audited. A paused subscription takes
/// none (`409`, nothing stored); a bad type is `422` naming `event_type`.
pub async fn a_test_event_reaches_its_one_subscription(p: &mut impl Pipeline) {
    let r = Receiver::start().await;
    let a = unique_name("test-a");
    let (target, secret) = p
        .subscribe(json!({"callback_url": r.url("/target", Behaviour::Ok), "event_types": ["order.*"], "tenant_id": a}))
        .await;
    let other = subscription(p, &r, "/other", &a, &["hookline.*", "*"]).await;
    let token = portal_token(p, &a, 600).await;
    let body = json!({"event_type": "order.created", "data": {"id": 7}}).to_string();
    let (st, sent) =
        p.call_console(&token, "POST", &format!("/v1/subscriptions/{target}/test"), Some(body.as_bytes())).await;
    assert_eq!(st, 202, "{sent}");
    let sent: hookline_wire::portal::TestEventSent = serde_json::from_value(sent).expect("sent");
    assert_eq!((sent.subscription_id.as_str(), sent.event_type.as_str()), (target.as_str(), "order.created"));
    let (st, default) = p.call_console(&token, "POST", &format!("/v1/subscriptions/{target}/test"), None).await;
    assert_eq!((st, default["event_type"].as_str()), (202, Some("hookline.test")), "{default}");

    for event in [sent.event_id.as_str(), default["event_id"].as_str().unwrap()] {
        let d = p.settled_deliveries(event, 1, 60).await;
        assert_eq!(d[0]["subscription_id"], target.as_str(), "{d:?}");
        assert_eq!(d[0]["status"], "completed", "{d:?}");
        let (st, v) = p.call_console(&token, "GET", &format!("/v1/events/{event}/deliveries"), None).await;
        assert_eq!((st, v["items"].as_array().map(Vec::len)), (200, Some(1)), "the portal sees it: {v}");
    }
    let got = eventually(30, "two test deliveries", || async {
        let d = r.successes("/target");
        (d.len() >= 2).then_some(d)
    })
    .await;
    assert!(got.iter().all(|d| d.signed_by(&secret)), "signed with the subscription's secret");
    let types: Vec<String> = got.iter().map(|d| d.json()["type"].as_str().unwrap_or("").to_string()).collect();
    assert!(types.contains(&"order.created".to_string()) && types.contains(&"hookline.test".to_string()), "{types:?}");
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(r.successes("/other").is_empty(), "no other subscription receives a test event");
    let (_, d) = p.get(&format!("/v1/events/{}/deliveries", sent.event_id)).await;
    assert!(!d.to_string().contains(&other), "{d}");

    // Replayed by id without naming a subscription, it goes to its target
    // again (routing's rule), and only there.
    let replay = json!({"reason": "check the endpoint again"}).to_string();
    let path = format!("/v1/events/{}/replay", sent.event_id);
    let (st, v) = p.call_console(&token, "POST", &path, Some(replay.as_bytes())).await;
    assert_eq!((st, v["sagas"].as_array().map(Vec::len)), (202, Some(1)), "{v}");
    assert_eq!(v["sagas"][0]["subscription_id"], target.as_str(), "{v}");
    let d = p.settled_deliveries(&sent.event_id, 2, 60).await;
    assert!(d.iter().all(|s| s["subscription_id"] == target.as_str()), "{d:?}");
    let (st, v) = p
        .call_console(
            &token,
            "POST",
            &path,
            Some(json!({"reason": "r", "subscription_id": other}).to_string().as_bytes()),
        )
        .await;
    assert_eq!((st, v["error"]["code"].as_str()), (422, Some("subscription_not_matching")), "{v}");

    let (st, audit) = p.get(&format!("/v1/audit?action=subscription.test_sent&subscription_id={target}")).await;
    assert_eq!((st, audit["items"].as_array().map(Vec::len)), (200, Some(2)), "{audit}");
    assert_eq!(audit["items"][0]["actor"].as_str().map(|a| a.starts_with("portal:")), Some(true), "{audit}");

    let bad = json!({"event_type": "hookline.other"}).to_string();
    let (st, v) =
        p.call_console(&token, "POST", &format!("/v1/subscriptions/{target}/test"), Some(bad.as_bytes())).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("event_type")), "{v}");
    let (st, v) = p.call("PATCH", &format!("/v1/subscriptions/{target}"), Some(br#"{"active":false}"#)).await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = p.call_console(&token, "POST", &format!("/v1/subscriptions/{target}/test"), None).await;
    assert_eq!((st, v["error"]["code"].as_str()), (409, Some("conflict")), "{v}");
}

/// The event types accepted are listed per tenant (a portal token: its
/// own tenant's, another is `403`), across tenants for an unbound key,
/// in type order and paged with cursors; test events add none.
pub async fn event_types_seen_are_listed_per_tenant(p: &mut impl Pipeline) {
    let (a, b) = (unique_name("types-a"), unique_name("types-b"));
    let tag = unique_name("t").replace('-', "_");
    let types_a = [format!("{tag}.b"), format!("{tag}.a"), format!("{tag}.c")];
    for (t, tenant) in types_a.iter().map(|t| (t, &a)).chain([(&format!("{tag}.z"), &b)]) {
        for _ in 0..2 {
            let (st, v) = p.post("/v1/events", &json!({"type": t, "tenant_id": tenant, "data": {}})).await;
            assert_eq!(st, 202, "{v}");
        }
    }
    let (st, v) = p.post("/v1/events", &json!({"type": format!("{tag}.none"), "data": {}})).await;
    assert_eq!(st, 202, "{v}");

    let token = portal_token(p, &a, 600).await;
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let q = match &cursor {
            Some(c) => format!("/v1/event-types?limit=2&cursor={}", crate::input_scenarios::enc(c)),
            None => "/v1/event-types?limit=2".to_string(),
        };
        let (st, page) = p.call_console(&token, "GET", &q, None).await;
        assert_eq!(st, 200, "{q}: {page}");
        let page: hookline_wire::Page<hookline_wire::portal::EventType> = serde_json::from_value(page).expect("a page");
        assert!(page.items.len() <= 2);
        assert!(page.items.iter().all(|t| t.tenant_id.as_deref() == Some(a.as_str())));
        seen.extend(page.items.into_iter().map(|t| t.event_type));
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let mut want = types_a.to_vec();
    want.sort();
    assert_eq!(seen, want, "its tenant's types, each once, in order, over pages");

    let (st, v) = p.call_console(&token, "GET", &format!("/v1/event-types?tenant_id={b}"), None).await;
    assert_eq!((st, v["error"]["field"].as_str()), (403, Some("tenant_id")), "{v}");
    let (st, v) = p.get(&format!("/v1/event-types?tenant_id={b}")).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["items"][0]["event_type"].as_str(), Some(format!("{tag}.z").as_str()), "{v}");
    let (st, all) = p.get("/v1/event-types?limit=1000").await;
    assert_eq!(st, 200, "{all}");
    let all: Vec<&str> = all["items"].as_array().unwrap().iter().filter_map(|t| t["event_type"].as_str()).collect();
    for t in want.iter().map(String::as_str).chain([format!("{tag}.z").as_str(), format!("{tag}.none").as_str()]) {
        assert!(all.contains(&t), "{t} across tenants: {all:?}");
    }
    assert!(!all.contains(&"hookline.test"), "test events add no type");
    let (st, v) = p.get("/v1/event-types?cursor=forged").await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("cursor")), "{v}");
}

/// The portal scenarios on one backend.
#[macro_export]
macro_rules! portal_scenario_tests {
    ($backend:ident) => {
        $crate::scenario_tests!($backend, portal_scenarios;
            a_portal_token_acts_for_its_tenant_only,
            a_test_event_reaches_its_one_subscription,
            event_types_seen_are_listed_per_tenant,
        );
    };
}
