//! Subscriber acknowledgements (docs/delivery.md#acknowledgements), on both
//! backends (`tests/tests/serve`, `tests/tests/aws`): a subscriber signs
//! `POST /v1/subscriptions/{id}/acknowledgements` with its subscription's
//! secret; a good signature is stored, shown with the deliveries, audited
//! and counted; a bad one is a `401` and writes nothing.

use serde_json::{json, Value};
use shared::signing::{sign, Secret};

use crate::pipeline::{unique_name, Pipeline};
use crate::{eventually, Behaviour, Receiver};

/// The acknowledgement `body` signed with `secret` (message id `msg_id`,
/// timestamp `at`): its headers.
pub fn ack_headers(secret: &str, msg_id: &str, at: i64, body: &[u8]) -> Vec<(String, String)> {
    let secret = Secret::parse(secret).expect("a whsec_ secret");
    vec![
        ("webhook-id".into(), msg_id.into()),
        ("webhook-timestamp".into(), at.to_string()),
        ("webhook-signature".into(), sign(&secret, msg_id, at, body)),
    ]
}

/// Posts `body` to `sub`'s acknowledgements with `headers`.
pub async fn post_ack(p: &impl Pipeline, sub: &str, body: &Value, headers: &[(String, String)]) -> (u16, Value) {
    let bytes = body.to_string().into_bytes();
    let h: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    p.call_with_headers("POST", &format!("/v1/subscriptions/{sub}/acknowledgements"), Some(&bytes), &h).await
}

/// `body` acknowledged by `sub` with its `secret`, signed now.
pub async fn acknowledge(p: &impl Pipeline, sub: &str, secret: &str, body: &Value) -> (u16, Value) {
    let bytes = body.to_string().into_bytes();
    let now = chrono::Utc::now().timestamp();
    post_ack(p, sub, body, &ack_headers(secret, &format!("ack_{}", unique_name("m")), now, &bytes)).await
}

/// The value of `hookline_acknowledgements_total{status}` in `/metrics`.
async fn ack_count(p: &impl Pipeline, status: &str) -> u64 {
    let text = p.metrics().await;
    let key = format!("hookline_acknowledgements_total{{status=\"{status}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(key.as_str())).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// The delivery of `event` (one saga), once settled.
async fn delivery(p: &impl Pipeline, event: &str) -> Value {
    p.settled_deliveries(event, 1, 20).await.remove(0)
}

/// A good signature: `200`, the acknowledgement shown with the delivery
/// (status, attempt, reference), an audit record with actor
/// `subscriber:<id>`, and the metric. Bad signatures (another secret, a
/// changed body, an old timestamp, a missing header) and an unknown
/// subscription: `401`, nothing shown, counted as refused; a bad field:
/// `422` naming it, nothing written. A later acknowledgement replaces the
/// earlier one; a rotated-out secret in its overlap still authenticates.
pub async fn an_acknowledgement_is_authenticated_by_the_subscriptions_secret(p: &mut impl Pipeline) {
    let r = Receiver::start().await;
    let body = json!({"callback_url": r.url("/ack", Behaviour::Ok), "event_types": ["ack.*"]});
    let (sub, secret) = p.subscribe(body).await;
    let (st, ev) = p.post("/v1/events", &json!({"type": "ack.created", "data": {"n": 1}})).await;
    assert_eq!(st, 202, "{ev}");
    let event = ev["event_id"].as_str().unwrap().to_string();
    let d = delivery(p, &event).await;
    assert_eq!(d["acknowledgement"], Value::Null, "not acknowledged yet: {d}");
    let webhook_id = d["webhook_id"].as_str().unwrap().to_string();
    let refused_before = ack_count(p, "refused").await;

    let ack = json!({"webhook_id": webhook_id, "attempt": 1, "status": "processed", "reference": "import-7"});
    let bytes = ack.to_string().into_bytes();
    let now = chrono::Utc::now().timestamp();
    let other = Secret::generate();
    let changed = json!({"webhook_id": webhook_id, "status": "processed"}).to_string();
    for (what, headers) in [
        ("another secret", ack_headers(other.expose(), "ack_x", now, &bytes)),
        ("another body", ack_headers(&secret, "ack_x", now, changed.as_bytes())),
        ("an old timestamp", ack_headers(&secret, "ack_x", now - 301, &bytes)),
        ("no signature", ack_headers(&secret, "ack_x", now, &bytes)[..2].to_vec()),
        ("nothing", Vec::new()),
    ] {
        let (st, v) = post_ack(p, &sub, &ack, &headers).await;
        assert_eq!(st, 401, "{what}: {v}");
        assert_eq!(v["error"]["code"], "unauthorized", "{what}: {v}");
        assert!(!v.to_string().contains(secret.as_str()), "the secret never shows: {v}");
    }
    let unknown = "sub_0192e4a0-0000-7000-8000-000000000000";
    let (st, v) = post_ack(p, unknown, &ack, &ack_headers(&secret, "ack_x", now, &bytes)).await;
    assert_eq!(st, 401, "an unknown subscription is told apart from nothing: {v}");
    for (bad, field) in [
        (json!({"webhook_id": webhook_id, "status": "failed"}), "reason"),
        (json!({"webhook_id": "msg_nope", "status": "processed"}), "webhook_id"),
        (json!({"webhook_id": webhook_id, "status": "processed", "attempt": 0}), "attempt"),
        (json!({"webhook_id": webhook_id, "status": "processed", "reference": "x".repeat(257)}), "reference"),
    ] {
        let (st, v) = acknowledge(p, &sub, &secret, &bad).await;
        assert_eq!((st, v["error"]["field"].as_str()), (422, Some(field)), "{bad}: {v}");
    }
    let (st, v) = acknowledge(p, &sub, &secret, &json!({"webhook_id": webhook_id, "status": "done"})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("status")), "an unknown status: {v}");
    assert!(ack_count(p, "refused").await >= refused_before + 10, "every refusal counted");
    let d = delivery(p, &event).await;
    assert_eq!(d["acknowledgement"], Value::Null, "nothing written by a refused acknowledgement: {d}");
    let (_, audit) = p.get(&format!("/v1/audit?action=delivery.acknowledged&subscription_id={sub}")).await;
    assert_eq!(audit["items"].as_array().map(Vec::len), Some(0), "{audit}");

    let processed_before = ack_count(p, "processed").await;
    let (st, v) = acknowledge(p, &sub, &secret, &ack).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!((v["status"].as_str(), v["reference"].as_str()), (Some("processed"), Some("import-7")), "{v}");
    let d = delivery(p, &event).await;
    let shown = &d["acknowledgement"];
    assert_eq!(shown["status"], "processed", "{d}");
    assert_eq!((shown["attempt"].as_u64(), shown["reference"].as_str()), (Some(1), Some("import-7")), "{d}");
    assert_eq!(shown["webhook_id"].as_str(), Some(webhook_id.as_str()));
    assert!(ack_count(p, "processed").await > processed_before, "counted");
    let audit = eventually(10, "the acknowledgement audited", || async {
        let (_, v) = p.get(&format!("/v1/audit?action=delivery.acknowledged&subscription_id={sub}")).await;
        v["items"].as_array().filter(|i| i.len() == 1).map(|i| i[0].clone())
    })
    .await;
    assert_eq!(audit["actor"].as_str(), Some(format!("subscriber:{sub}").as_str()), "{audit}");
    assert_eq!(audit["details"]["webhook_id"].as_str(), Some(webhook_id.as_str()), "{audit}");

    // A rotated-out secret still authenticates during its overlap; the
    // later acknowledgement replaces the earlier one.
    let (st, rotated) = p.post(&format!("/v1/subscriptions/{sub}/rotate-secret"), &json!({})).await;
    assert_eq!(st, 200, "{rotated}");
    let failed = json!({"webhook_id": webhook_id, "status": "failed", "reason": "ledger closed"});
    let (st, v) = acknowledge(p, &sub, &secret, &failed).await;
    assert_eq!(st, 200, "the old secret in its overlap: {v}");
    let d = delivery(p, &event).await;
    assert_eq!(
        (d["acknowledgement"]["status"].as_str(), d["acknowledgement"]["reason"].as_str()),
        (Some("failed"), Some("ledger closed")),
        "{d}"
    );
    assert_eq!(d["acknowledgement"]["reference"], Value::Null, "replaced, not merged: {d}");
}

/// The deliveries of `event` once the one saga is in `status`.
async fn delivery_in(p: &impl Pipeline, event: &str, status: &str, attempts: usize, secs: u64) -> Value {
    let path = format!("/v1/events/{event}/deliveries");
    eventually(secs, &format!("{event}: {status} after {attempts} attempts"), || async {
        let (_, v) = p.get(&path).await;
        let d = v["items"].as_array()?.first()?.clone();
        (d["status"] == status && d["attempts"].as_array()?.len() == attempts).then_some(d)
    })
    .await
}

/// With `ack_timeout_secs`, a 2xx waits (`awaiting_ack`): unacknowledged
/// past the timeout it counts as failed and is retried (not before the
/// timeout) with the same `webhook-id`; acknowledged `processed`, the
/// retry completes.
pub async fn an_unacknowledged_delivery_is_retried_and_completes_once_acknowledged(p: &mut impl Pipeline) {
    let r = Receiver::start().await;
    let body = json!({"callback_url": r.url("/req", Behaviour::Ok), "event_types": ["req.*"], "ack_timeout_secs": 3,
                      "retry_policy": {"max_attempts": 3, "base_delay_ms": 50, "max_delay_ms": 200}});
    let (sub, secret) = p.subscribe(body).await;
    let (_, shown) = p.get(&format!("/v1/subscriptions/{sub}")).await;
    assert_eq!(shown["ack_timeout_secs"], 3, "{shown}");
    let (st, ev) = p.post("/v1/events", &json!({"type": "req.created", "data": {"n": 1}})).await;
    assert_eq!(st, 202, "{ev}");
    let event = ev["event_id"].as_str().unwrap().to_string();
    let first = delivery_in(p, &event, "awaiting_ack", 1, 20).await;
    assert!(first["next_attempt_at"].is_string(), "the deadline is shown: {first}");
    let second = delivery_in(p, &event, "awaiting_ack", 2, 30).await;
    let at = |d: &Value, i: usize| d["attempts"][i]["at"].as_str().unwrap().parse::<chrono::DateTime<chrono::Utc>>();
    let waited = at(&second, 1).unwrap() - at(&second, 0).unwrap();
    assert!(waited >= chrono::Duration::seconds(3), "retried only once the 3 s passed: {second}");
    let webhook_id = second["webhook_id"].as_str().unwrap();
    let (st, v) = acknowledge(p, &sub, &secret, &json!({"webhook_id": webhook_id, "status": "processed"})).await;
    assert_eq!(st, 200, "{v}");
    let done = delivery_in(p, &event, "completed", 2, 20).await;
    assert_eq!(done["acknowledgement"]["status"], "processed", "{done}");
    let posted = r.deliveries("/req");
    assert_eq!(posted.len(), 2, "one retry");
    assert!(posted.iter().all(|d| d.header("webhook-id") == webhook_id), "the same webhook-id");
}

/// A `failed` acknowledgement is a failed attempt: retried on the
/// schedule, and dead-lettered with the subscriber's reason when no
/// attempt is left. An acknowledgement of the earlier attempt does not
/// count for the next one.
pub async fn a_failed_acknowledgement_is_retried_then_dead_lettered(p: &mut impl Pipeline) {
    let r = Receiver::start().await;
    let body = json!({"callback_url": r.url("/nak", Behaviour::Ok), "event_types": ["nak.*"], "ack_timeout_secs": 30,
                      "retry_policy": {"max_attempts": 2, "base_delay_ms": 50, "max_delay_ms": 200}});
    let (sub, secret) = p.subscribe(body).await;
    let (st, ev) = p.post("/v1/events", &json!({"type": "nak.created", "data": {"n": 1}})).await;
    assert_eq!(st, 202, "{ev}");
    let event = ev["event_id"].as_str().unwrap().to_string();
    let first = delivery_in(p, &event, "awaiting_ack", 1, 20).await;
    let webhook_id = first["webhook_id"].as_str().unwrap().to_string();
    let nak = |attempt: u32, reason: &str| json!({"webhook_id": webhook_id, "attempt": attempt, "status": "failed", "reason": reason});
    let (st, v) = acknowledge(p, &sub, &secret, &nak(1, "ledger closed")).await;
    assert_eq!(st, 200, "{v}");
    delivery_in(p, &event, "awaiting_ack", 2, 30).await;
    let (st, v) = acknowledge(p, &sub, &secret, &nak(2, "still closed")).await;
    assert_eq!(st, 200, "{v}");
    let dead = delivery_in(p, &event, "dead_lettered", 2, 20).await;
    assert_eq!(dead["last_error"], "subscriber acknowledged failed: still closed", "{dead}");
    // The dead letter is the transition's effect, written after the saga.
    let path = format!("/v1/dead-letters/{}", dead["saga_id"].as_str().unwrap());
    let dl = eventually(10, "the dead letter written", || async {
        let (st, dl) = p.get(&path).await;
        (st == 200).then_some(dl)
    })
    .await;
    let reason = dl["reason"].as_str().unwrap_or_default().to_string();
    assert!(reason.contains("still closed") && reason.contains("gave up after 2 attempts"), "{dl}");
    assert_eq!(r.deliveries("/nak").len(), 2);
}

/// Every scenario of this suite, listed once for both backends.
#[macro_export]
macro_rules! ack_scenario_tests {
    ($backend:ident) => {
        $crate::scenario_tests!($backend, ack_scenarios;
            an_acknowledgement_is_authenticated_by_the_subscriptions_secret,
            an_unacknowledged_delivery_is_retried_and_completes_once_acknowledged,
            a_failed_acknowledgement_is_retried_then_dead_lettered,
        );
    };
}
