//! Pull (docs/delivery.md#pull), on both backends (`tests/tests/serve`,
//! `tests/tests/aws`): after a receiver outage, a subscriber pulls from a
//! cursor every event it missed, once, in order, with the body its pushes
//! carried and headers whose signature verifies; another tenant's
//! credential reaches none of it; a subscription without `pull` is refused.

use serde_json::{json, Value};
use shared::signing::{verify, Secret};

use crate::pipeline::{unique_name, Pipeline};
use crate::{eventually, Behaviour, Receiver};

/// Every page of `sub`'s pull with the bearer key `token`, `limit` at a
/// time, from `after`; the events and the last cursor.
async fn pull_all(
    p: &impl Pipeline,
    token: &str,
    sub: &str,
    limit: usize,
    after: Option<String>,
) -> (Vec<Value>, Option<String>) {
    let (mut out, mut cursor) = (Vec::new(), after);
    for _ in 0..100 {
        let c = cursor.as_deref().map(|c| format!("&after={c}")).unwrap_or_default();
        let (st, v) =
            p.call_bearer(token, "GET", &format!("/v1/subscriptions/{sub}/events?limit={limit}{c}"), None).await;
        assert_eq!(st, 200, "{v}");
        let data = v["data"].as_array().cloned().unwrap_or_default();
        cursor = v["next_cursor"].as_str().map(str::to_string).or(cursor);
        if data.is_empty() {
            break;
        }
        out.extend(data);
    }
    (out, cursor)
}

/// A subscriber key of `sub` (created by the pipeline's admin): its secret.
async fn subscriber_key(p: &impl Pipeline, sub: &str, tenant: Option<&str>) -> String {
    let (st, key) =
        p.post("/v1/keys", &json!({"name": unique_name("puller"), "role": "subscriber", "subscription_id": sub})).await;
    assert_eq!(st, 201, "{key}");
    assert_eq!((key["role"].as_str(), key["tenant_id"].as_str()), (Some("subscriber"), tenant), "{key}");
    assert_eq!(key["subscription_id"].as_str(), Some(sub), "{key}");
    key["secret"].as_str().expect("a subscriber key is a secret").to_string()
}

/// The receiver is down while five events are routed (their pushes fail
/// and dead-letter); the subscriber pulls them with its subscriber key from
/// the start, two at a time: each once, in the order they were sent, with
/// the body its pushes carried and a signature by its secret. Pulling again
/// from the last cursor finds nothing until a sixth event, then only it.
/// The key pulls nothing else: another subscription (of its tenant or
/// another's) is a `404`, every other route a `403`; another subscription's
/// key cannot pull this one. A subscription without `pull` is a `409`; a
/// bad limit a `422`, a bad cursor or one of another subscription a `400`. Keys are
/// refused without their subscription or with a tenant of their own.
pub async fn a_pull_after_an_outage_returns_every_missed_event_once_in_order(p: &mut impl Pipeline) {
    let r = Receiver::start().await;
    let tenant = unique_name("pull");
    let body = json!({"callback_url": r.url("/pull", Behaviour::Ok), "event_types": ["pull.*"], "tenant_id": tenant,
                      "pull": true, "retry_policy": {"max_attempts": 2, "base_delay_ms": 50, "max_delay_ms": 100}});
    let (sub, secret) = p.subscribe(body).await;
    let (_, shown) = p.get(&format!("/v1/subscriptions/{sub}")).await;
    assert_eq!(shown["pull"], true, "{shown}");
    let token = subscriber_key(p, &sub, Some(&tenant)).await;
    r.set("/pull", Behaviour::Always(503));
    let mut sent = Vec::new();
    for n in 0..5 {
        let (st, ev) =
            p.post("/v1/events", &json!({"type": "pull.created", "tenant_id": tenant, "data": {"n": n}})).await;
        assert_eq!(st, 202, "{ev}");
        sent.push(ev["event_id"].as_str().unwrap().to_string());
    }
    for id in &sent {
        p.settled_deliveries(id, 1, 30).await;
    }
    let (events, cursor) = eventually(20, "five events in the pull index", || async {
        let (all, cursor) = pull_all(p, &token, &sub, 2, None).await;
        (all.len() >= 5).then_some((all, cursor))
    })
    .await;
    let ids: Vec<&str> = events.iter().map(|e| e["event_id"].as_str().unwrap()).collect();
    assert_eq!(ids, sent.iter().map(String::as_str).collect::<Vec<_>>(), "each once, in order");
    let key = Secret::parse(&secret).unwrap();
    let pushes = r.requests("/pull");
    for e in &events {
        let h = header_of(e);
        assert_signed(e, &key);
        assert_eq!(h("webhook-id"), e["webhook_id"].as_str().unwrap());
        assert_eq!(h("hookline-event-type"), "pull.created");
        let push = pushes.iter().find(|d| d.header("webhook-id") == h("webhook-id")).expect("it was pushed too");
        assert_eq!(push.body, e["body"].as_str().unwrap().as_bytes(), "the same body as its push");
    }
    let (again, _) = pull_all(p, &token, &sub, 2, cursor.clone()).await;
    assert!(again.is_empty(), "caught up: {again:?}");
    let (st, ev) = p.post("/v1/events", &json!({"type": "pull.created", "tenant_id": tenant, "data": {"n": 5}})).await;
    assert_eq!(st, 202, "{ev}");
    let sixth = ev["event_id"].as_str().unwrap().to_string();
    let more = eventually(20, "the sixth event pulled", || async {
        let (more, _) = pull_all(p, &token, &sub, 2, cursor.clone()).await;
        (!more.is_empty()).then_some(more)
    })
    .await;
    assert_eq!(more.iter().map(|e| e["event_id"].as_str().unwrap()).collect::<Vec<_>>(), [sixth.as_str()]);
    let (st, page) = p.call_console(&token, "GET", &format!("/v1/subscriptions/{sub}/events?limit=1"), None).await;
    assert_eq!((st, page["data"].as_array().map(Vec::len)), (200, Some(1)), "the console's copy too: {page}");

    // The key pulls its subscription and nothing else.
    let sibling_body = json!({"callback_url": r.url("/sib", Behaviour::Ok), "event_types": ["pull.*"],
                              "tenant_id": tenant, "pull": true});
    let (sibling, _) = p.subscribe(sibling_body).await;
    let other_body = json!({"callback_url": r.url("/other", Behaviour::Ok), "event_types": ["pull.*"],
                            "tenant_id": unique_name("other"), "pull": true});
    let (other, _) = p.subscribe(other_body).await;
    for s in [&sibling, &other] {
        let (st, v) = p.call_bearer(&token, "GET", &format!("/v1/subscriptions/{s}/events"), None).await;
        assert_eq!(st, 404, "another subscription: {v}");
    }
    let sibling_token = subscriber_key(p, &sibling, Some(&tenant)).await;
    let (st, v) = p.call_bearer(&sibling_token, "GET", &format!("/v1/subscriptions/{sub}/events"), None).await;
    assert_eq!(st, 404, "another subscription's key: {v}");
    assert!(!v.to_string().contains("pull.created"), "{v}");
    let event = json!({"type": "pull.created", "tenant_id": tenant, "data": {}}).to_string();
    for (method, path, body) in [
        ("GET", format!("/v1/subscriptions/{sub}"), None),
        ("GET", "/v1/subscriptions".to_string(), None),
        ("GET", format!("/v1/events/{}/deliveries", sent[0]), None),
        ("POST", "/v1/events".to_string(), Some(event.as_bytes())),
        ("GET", "/v1/keys".to_string(), None),
    ] {
        let (st, v) = p.call_console(&token, method, &path, body).await;
        assert_eq!(st, 403, "{method} {path}: {v}");
    }
    let (st, me) = p.call_console(&token, "GET", "/v1/me", None).await;
    assert_eq!((st, me["role"].as_str()), (200, Some("subscriber")), "{me}");
    assert_eq!(me["permissions"], json!(["identify", "pull"]), "{me}");
    let (st, v) = p.call_bearer("not-a-key", "GET", &format!("/v1/subscriptions/{sub}/events"), None).await;
    assert_eq!(st, 401, "{v}");

    // Refusals.
    let (plain, _) =
        p.subscribe(json!({"callback_url": r.url("/plain", Behaviour::Ok), "event_types": ["pull.*"]})).await;
    let plain_token = subscriber_key(p, &plain, None).await;
    let (st, v) = p.call_bearer(&plain_token, "GET", &format!("/v1/subscriptions/{plain}/events"), None).await;
    assert_eq!((st, v["error"]["code"].as_str()), (409, Some("conflict")), "{v}");
    let (st, v) = p.call_bearer(&token, "GET", &format!("/v1/subscriptions/{sub}/events?limit=0"), None).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("limit")), "{v}");
    let (st, v) = p.call_bearer(&token, "GET", &format!("/v1/subscriptions/{sub}/events?after=nope"), None).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("after")), "{v}");
    // A cursor holds its subscription: it reads no other's listing.
    let path = format!("/v1/subscriptions/{sibling}/events?after={}", cursor.unwrap());
    let (st, v) = p.call_bearer(&sibling_token, "GET", &path, None).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("after")), "{v}");
    for (bad, field) in [
        (json!({"name": unique_name("k"), "role": "subscriber"}), "subscription_id"),
        (json!({"name": unique_name("k"), "role": "reader", "subscription_id": sub}), "subscription_id"),
        (
            json!({"name": unique_name("k"), "role": "subscriber", "subscription_id": sub, "tenant_id": tenant}),
            "tenant_id",
        ),
    ] {
        let (st, v) = p.post("/v1/keys", &bad).await;
        assert_eq!((st, v["error"]["field"].as_str()), (422, Some(field)), "{bad}: {v}");
    }
}

/// A pull-only subscription (`pull: true`, no `callback_url`) is verified
/// as created, shows `destination: pull` and no callback, and nothing is
/// pushed for it: each routed event's delivery is `filed_for_pull`, with no
/// attempt, and its health counts none. Its subscriber key pulls every
/// routed event once, in order, signed by its secret. No callback without
/// `pull`, `ordering: partition` or `ack_timeout_secs` with pull-only, and
/// turning `pull` off without a callback are `422`s naming the field;
/// giving it a callback makes it a pushed subscription, verified again.
pub async fn a_pull_only_subscription_is_never_pushed_and_pulls_every_event(p: &mut impl Pipeline) {
    let r = Receiver::start().await;
    let tenant = unique_name("pullonly");
    let (st, created) =
        p.post("/v1/subscriptions", &json!({"event_types": ["pullonly.*"], "tenant_id": tenant, "pull": true})).await;
    assert_eq!(st, 201, "{created}");
    let shown = &created; // the subscription, flattened, with its secret
    assert_eq!(shown["verified"], true, "verified at creation, no handshake: {created}");
    assert_eq!((shown["callback_url"].clone(), shown["destination"].as_str()), (Value::Null, Some("pull")), "{shown}");
    let sub = shown["id"].as_str().unwrap().to_string();
    let secret = created["secret"].as_str().unwrap().to_string();
    let token = subscriber_key(p, &sub, Some(&tenant)).await;
    let mut sent = Vec::new();
    for n in 0..4 {
        let (st, ev) =
            p.post("/v1/events", &json!({"type": "pullonly.created", "tenant_id": tenant, "data": {"n": n}})).await;
        assert_eq!(st, 202, "{ev}");
        sent.push(ev["event_id"].as_str().unwrap().to_string());
    }
    for id in &sent {
        let d = eventually(30, "the delivery filed for pull", || async {
            let (_, v) = p.get(&format!("/v1/events/{id}/deliveries")).await;
            let d = v["items"].as_array().cloned().unwrap_or_default();
            (d.len() == 1 && d[0]["status"] == "filed_for_pull").then_some(d)
        })
        .await;
        assert_eq!(d[0]["attempts"], json!([]), "no attempt: nothing pushed: {d:?}");
        assert_eq!(d[0]["subscription_id"].as_str(), Some(sub.as_str()));
    }
    let (events, cursor) = eventually(20, "four events in the pull index", || async {
        let (all, cursor) = pull_all(p, &token, &sub, 3, None).await;
        (all.len() >= 4).then_some((all, cursor))
    })
    .await;
    let ids: Vec<&str> = events.iter().map(|e| e["event_id"].as_str().unwrap()).collect();
    assert_eq!(ids, sent.iter().map(String::as_str).collect::<Vec<_>>(), "each once, in order");
    let key = Secret::parse(&secret).unwrap();
    for e in &events {
        let h = header_of(e);
        assert_signed(e, &key);
        assert_eq!(h("hookline-event-type"), "pullonly.created");
    }
    let (again, _) = pull_all(p, &token, &sub, 3, cursor).await;
    assert!(again.is_empty(), "caught up: {again:?}");
    let (st, got) = p.get(&format!("/v1/subscriptions/{sub}")).await;
    assert_eq!(st, 200, "{got}");
    assert_eq!((got["health"]["attempts"].as_u64(), got["health"]["breaker"].as_str()), (Some(0), Some("closed")));
    let (st, v) = p.post(&format!("/v1/subscriptions/{sub}/verify"), &json!({})).await;
    assert_eq!((st, v["verified"].as_bool()), (200, Some(true)), "verifying again needs no endpoint: {v}");

    // Refusals: each names its field, and nothing is stored or changed.
    for (bad, field) in [
        (json!({"event_types": ["pullonly.*"]}), "callback_url"),
        (json!({"event_types": ["pullonly.*"], "callback_url": null, "pull": false}), "callback_url"),
        (json!({"event_types": ["pullonly.*"], "pull": true, "ordering": "partition"}), "ordering"),
        (json!({"event_types": ["pullonly.*"], "pull": true, "ack_timeout_secs": 30}), "ack_timeout_secs"),
    ] {
        let (st, v) = p.post("/v1/subscriptions", &bad).await;
        assert_eq!((st, v["error"]["field"].as_str()), (422, Some(field)), "{bad}: {v}");
    }
    let path = format!("/v1/subscriptions/{sub}");
    for (bad, field) in [(json!({"pull": false}), "callback_url"), (json!({"ordering": "partition"}), "ordering")] {
        let (st, v) = p.call("PATCH", &path, Some(&serde_json::to_vec(&bad).unwrap())).await;
        assert_eq!((st, v["error"]["field"].as_str()), (422, Some(field)), "{bad}: {v}");
    }
    assert!(r.requests("/pullonly").is_empty(), "nothing was pushed anywhere");
    for active in [false, true] {
        let (st, v) = p.call("PATCH", &path, Some(&serde_json::to_vec(&json!({"active": active})).unwrap())).await;
        assert_eq!((st, v["verified"].as_bool()), (200, Some(true)), "disabled and enabled, still verified: {v}");
    }

    // A callback makes it a pushed subscription: verified again, then pushed to.
    let url = r.url("/pullonly", Behaviour::Ok);
    let (st, v) = p.call("PATCH", &path, Some(&serde_json::to_vec(&json!({"callback_url": url})).unwrap())).await;
    assert_eq!((st, v["destination"].as_str(), v["callback_url"].as_str()), (200, Some("https"), Some(url.as_str())));
    eventually(20, "verified again at its callback", || async {
        let (_, s) = p.get(&path).await;
        (s["verified"] == true).then_some(())
    })
    .await;
    let (st, ev) = p.post("/v1/events", &json!({"type": "pullonly.created", "tenant_id": tenant, "data": {}})).await;
    assert_eq!(st, 202, "{ev}");
    let d = p.settled_deliveries(ev["event_id"].as_str().unwrap(), 1, 30).await;
    assert_eq!(d[0]["status"], "completed", "{d:?}");
    let webhook_id = d[0]["webhook_id"].as_str().unwrap_or_default().to_string();
    assert!(r.requests("/pullonly").iter().any(|q| q.header("webhook-id") == webhook_id), "pushed now");
}

/// Every scenario of this suite, listed once for both backends.
#[macro_export]
macro_rules! pull_scenario_tests {
    ($backend:ident) => {
        $crate::scenario_tests!($backend, pull_scenarios;
            a_pull_after_an_outage_returns_every_missed_event_once_in_order,
            a_pull_only_subscription_is_never_pushed_and_pulls_every_event,
        );
    };
}

/// A pulled event's header `n` ("" when absent).
fn header_of(e: &Value) -> impl Fn(&str) -> String + '_ {
    |n: &str| e["headers"][n].as_str().unwrap_or_default().to_string()
}

/// A pulled event's headers sign its body with `key`, as a push's would.
fn assert_signed(e: &Value, key: &Secret) {
    let h = header_of(e);
    let body = e["body"].as_str().expect("a pulled event's body").as_bytes();
    let now = chrono::Utc::now().timestamp();
    verify(
        std::slice::from_ref(key),
        &h("webhook-id"),
        &h("webhook-timestamp"),
        &h("webhook-signature"),
        body,
        now,
        300,
    )
    .unwrap_or_else(|err| panic!("the pulled signature verifies ({err}): {e}"));
}
