//! The end-to-end scenario suite, written once over [`Pipeline`] and run on
//! both backends (`tests/serve_e2e.rs`, `tests/aws_e2e.rs`) with a real HTTP
//! receiver: verification, signed delivery, retries, dead letters, requeue,
//! replay, idempotency, scoping, bad input, and crashes between steps.

use std::time::Duration;

use crate::pipeline::Pipeline;
use crate::{eventually, eventually_every, fixture, Behaviour, Receiver};
use serde_json::{json, Value};
use shared::signing::{self, Secret};

/// A retry schedule scaled down from the default 30 s base
/// (docs/delivery.md#retry-schedule).
fn fast_retry(max_attempts: u32) -> Value {
    json!({"max_attempts": max_attempts, "base_delay_ms": 50, "max_delay_ms": 200})
}

async fn post_raw<P: Pipeline>(s: &P, path: &str, body: &[u8]) -> (u16, Value) {
    s.call("POST", path, Some(body)).await
}

pub async fn verification_handshake_passes_and_fails<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let (ok_id, _) = s.subscribe(json!({"callback_url": r.url("/ok", Behaviour::Ok), "event_types": ["*"]})).await;
    let (status, bad) = s
        .post("/v1/subscriptions", &json!({"callback_url": r.url("/noecho", Behaviour::NoEcho), "event_types": ["*"]}))
        .await;
    assert_eq!(status, 201);
    assert_eq!(bad["verified"], false);
    let bad_id = bad["id"].as_str().unwrap();
    let v = eventually(10, "verification failure recorded", || async {
        let (_, v) = s.get(&format!("/v1/subscriptions/{bad_id}")).await;
        (!v["verification_error"].is_null()).then_some(v)
    })
    .await;
    assert_eq!(v["verified"], false);
    assert!(v["verification_error"].as_str().unwrap().contains("challenge"), "{v}");
    assert!(v.get("secret").is_none(), "secret is only shown at creation");
    // The handshake was signed like any delivery.
    let hs = &r.requests("/ok")[0];
    assert!(hs.is_verification());
    assert!(hs.header("webhook-signature").starts_with("v1,"));

    // Events reach the verified subscription only.
    let (st, ev) = s.post("/v1/events", &json!({"type": "task.created", "data": {"n": 1}})).await;
    assert_eq!(st, 202);
    let d = s.settled_deliveries(ev["event_id"].as_str().unwrap(), 1, 10).await;
    assert_eq!(d[0]["subscription_id"], ok_id.as_str());
    assert!(r.deliveries("/noecho").is_empty());

    // Fixing the receiver and re-running the handshake verifies it.
    r.set("/noecho", Behaviour::Ok);
    let (st, v) = s.post(&format!("/v1/subscriptions/{bad_id}/verify"), &json!({})).await;
    assert_eq!(st, 200);
    assert_eq!(v["verified"], true, "{v}");
}

pub async fn delivers_every_producer_format_signed_and_unchanged<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let (sub_id, secret) =
        s.subscribe(json!({"callback_url": r.url("/all", Behaviour::Ok), "event_types": ["*"]})).await;
    let secret = Secret::parse(&secret).unwrap();
    let bodies: Vec<(Option<&str>, Vec<u8>)> = vec![
        (None, br#"{"type":"task.created","data":{"taskId":"t1"},"tenant_id":"acme"}"#.to_vec()),
        (None, fixture("change_feed_envelope.json")),
        (Some("domain-event"), fixture("domain_event_envelope.json")),
        (None, fixture("contract_task_failed.json")),
        (Some("contract"), fixture("contract_quota_committed.json")),
    ];
    let mut ids = Vec::new();
    for (format, body) in &bodies {
        let path = match format {
            Some(f) => format!("/v1/events?format={f}"),
            None => "/v1/events".into(),
        };
        let (st, v) = post_raw(s, &path, body).await;
        assert_eq!(st, 202, "{v}");
        ids.push(v["event_id"].as_str().unwrap().to_string());
    }
    assert_eq!(ids[1], "de305d54-75b4-431b-adb2-eb6b9e546014", "the producer's id is the event id");
    // A contract envelope is stored under its idempotency key (no tenant here).
    assert_eq!(ids[3], shared::ids::idempotent_event_id(None, "task:tsk_3001:attempt:2:failed").as_str());
    for id in &ids {
        s.settled_deliveries(id, 1, 10).await;
    }
    let got = r.deliveries("/all");
    assert_eq!(got.len(), bodies.len());
    let mut captured = Vec::new();
    for (_, body) in &bodies {
        let d = got.iter().find(|d| d.body == *body).expect("each envelope delivered byte for byte");
        verify_delivery(d, &secret).expect("valid signature");
        assert!(verify_delivery(d, &Secret::generate()).is_err());
        captured.push(json!({
            "secret": secret.expose(),
            "headers": {
                "webhook-id": d.header("webhook-id"),
                "webhook-timestamp": d.header("webhook-timestamp"),
                "webhook-signature": d.header("webhook-signature"),
            },
            "body_b64": base64_encode(&d.body),
        }));
    }
    // The producer's trace id travels to the subscriber.
    let contract = got.iter().find(|d| d.header("hookline-event-type") == "task.failed").unwrap();
    assert_eq!(contract.header("hookline-trace-id"), "req_abcd");
    let saga = contract_saga(s, &ids[3]).await;
    assert_eq!(contract.header("traceparent"), shared::ids::traceparent("req_abcd", &format!("{saga}#1")));
    verify_with_published_library(&captured);

    // Every log line of an attempt names its saga, event, subscription and
    // trace; no log line carries the signing secret.
    let logs = crate::eventually(10, "the attempt's log line", || async {
        let logs = s.logs().await;
        logs.lines().any(|l| l.contains("delivery attempt") && l.contains(&saga)).then_some(logs)
    })
    .await;
    let line = logs.lines().find(|l| l.contains("delivery attempt") && l.contains(&saga)).unwrap();
    for id in [ids[3].as_str(), sub_id.as_str(), "req_abcd"] {
        assert!(line.contains(id), "{id} missing from the attempt's log line: {line}");
    }
    assert!(!logs.contains(secret.expose()), "the signing secret appears in the logs");
    assert!(!logs.contains(secret.expose().trim_start_matches("whsec_")), "the signing key appears in the logs");
}

/// Checks a delivery's Standard Webhooks signature against one secret, now.
fn verify_delivery(d: &crate::Delivery, secret: &Secret) -> Result<(), signing::VerifyError> {
    signing::verify(
        std::slice::from_ref(secret),
        d.header("webhook-id"),
        d.header("webhook-timestamp"),
        d.header("webhook-signature"),
        &d.body,
        chrono::Utc::now().timestamp(),
        300,
    )
}

async fn contract_saga<P: Pipeline>(s: &P, event_id: &str) -> String {
    let (_, d) = s.get(&format!("/v1/events/{event_id}/deliveries")).await;
    d["deliveries"][0]["saga_id"].as_str().unwrap_or_default().to_string()
}

fn base64_encode(b: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in b.chunks(3) {
        let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Runs the published `standardwebhooks` Python package over the captured
/// deliveries (`make test` installs it in the repo's `.venv`).
fn verify_with_published_library(captured: &[Value]) {
    let root = format!("{}/..", env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var("HOOKLINE_TEST_PYTHON").unwrap_or_else(|_| format!("{root}/.venv/bin/python"));
    assert!(
        std::path::Path::new(&python).exists(),
        "{python} is missing: run `make test`, which creates the venv with the standardwebhooks package"
    );
    let file = std::env::temp_dir().join(format!("hookline-sigs-{}.json", std::process::id()));
    std::fs::write(&file, serde_json::to_vec(captured).unwrap()).unwrap();
    let out = std::process::Command::new(python)
        .arg(format!("{root}/tests/python/verify_deliveries.py"))
        .arg(&file)
        .output()
        .expect("run python");
    let _ = std::fs::remove_file(&file);
    assert!(
        out.status.success(),
        "standardwebhooks verification failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub async fn retries_on_500_and_timeout_then_succeeds<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let (_, _) = s
        .subscribe(json!({"callback_url": r.url("/flaky", Behaviour::Ok), "event_types": ["a.*"], "retry_policy": fast_retry(5)}))
        .await;
    let (_, _) = s
        .subscribe(json!({"callback_url": r.url("/slow", Behaviour::Ok), "event_types": ["b.*"], "retry_policy": fast_retry(5)}))
        .await;
    r.set("/flaky", Behaviour::FailFirst(2, 500));
    r.set("/slow", Behaviour::SlowFirst(1, Duration::from_millis(2500)));
    let (_, a) = s.post("/v1/events", &json!({"type": "a.one", "data": {}})).await;
    let (_, b) = s.post("/v1/events", &json!({"type": "b.one", "data": {}})).await;
    let da = s.settled_deliveries(a["event_id"].as_str().unwrap(), 1, 20).await;
    let db = s.settled_deliveries(b["event_id"].as_str().unwrap(), 1, 20).await;
    assert_eq!(da[0]["status"], "Completed");
    let attempts = da[0]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3);
    assert_eq!(attempts[0]["status_code"], 500);
    assert_eq!(attempts[1]["status_code"], 500);
    assert_eq!(attempts[2]["status_code"], 200);
    assert_eq!(db[0]["status"], "Completed");
    let attempts = db[0]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    assert!(attempts[0]["error"].as_str().unwrap().contains("timed out"), "{}", attempts[0]);
    // Every attempt of one event to one subscription carries the same webhook-id.
    let got = r.deliveries("/flaky");
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|d| d.header("webhook-id") == got[0].header("webhook-id")));
    assert_eq!(got.iter().map(|d| d.header("hookline-attempt").to_string()).collect::<Vec<_>>(), ["1", "2", "3"]);
}

pub async fn dead_letter_after_max_attempts_then_requeue_and_replay<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let (sub, _) = s
        .subscribe(
            json!({"callback_url": r.url("/down", Behaviour::Ok), "event_types": ["*"], "retry_policy": fast_retry(3)}),
        )
        .await;
    r.set("/down", Behaviour::Always(503));
    let (_, ev) = s.post("/v1/events", &json!({"type": "x.y", "data": {"k": 1}})).await;
    let id = ev["event_id"].as_str().unwrap();
    let d = s.settled_deliveries(id, 1, 20).await;
    assert_eq!(d[0]["status"], "DeadLettered");
    assert_eq!(d[0]["attempts"].as_array().unwrap().len(), 3);
    let dead_saga = d[0]["saga_id"].as_str().unwrap().to_string();
    // The dead letter is written right after the saga's terminal transition.
    let dls = eventually(10, "the dead letter", || async {
        let (_, v) = s.get("/v1/dead-letters?state=open").await;
        (v["items"].as_array().is_some_and(|a| !a.is_empty())).then_some(v)
    })
    .await;
    let dl = &dls["items"][0];
    assert_eq!(dl["id"], dead_saga.as_str());
    assert_eq!(dl["subscription_id"], sub.as_str());
    assert!(dl["reason"].as_str().unwrap().contains("3 attempts"));
    assert_eq!(dl["saga_snapshot"]["status"], "DeadLettered");

    // The subscriber is fixed; requeue creates a new saga with the same webhook-id.
    r.set("/down", Behaviour::Ok);
    let (st, rq) = s.post(&format!("/v1/dead-letters/{dead_saga}/requeue"), &json!({"reason": "fixed"})).await;
    assert_eq!(st, 202, "{rq}");
    s.settled_deliveries(id, 2, 20).await;
    let (st, rq2) = s.post(&format!("/v1/dead-letters/{dead_saga}/requeue"), &json!({"reason": "again"})).await;
    assert_eq!(st, 409, "a requeued dead letter is not open: {rq2}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let d = s.settled_deliveries(id, 2, 20).await;
    let old = d.iter().find(|x| x["saga_id"] == dead_saga.as_str()).unwrap();
    let new = d.iter().find(|x| x["saga_id"] == rq["saga_id"]).unwrap();
    assert_eq!(old["status"], "DeadLettered", "the dead saga never changes");
    assert_eq!(old["attempts"].as_array().unwrap().len(), 3);
    assert_eq!(new["status"], "Completed");
    assert_eq!(new["origin"]["kind"], "requeue");
    assert_eq!(new["origin"]["actor"], s.actor().as_str(), "the caller, not what the body claims");
    assert_eq!(new["origin"]["previous_saga_id"], dead_saga.as_str());
    let got = r.deliveries("/down");
    assert_eq!(got.len(), 4);
    assert!(got.iter().all(|x| x.header("webhook-id") == got[0].header("webhook-id")));
    let (_, dl) = s.get(&format!("/v1/dead-letters/{dead_saga}")).await;
    assert_eq!(dl["state"], "requeued");
    assert_eq!(dl["resolution"]["reason"], "fixed");

    // Replay delivers again, same webhook-id; a retried replay with the same key adds nothing.
    let body = json!({"reason": "subscriber lost data", "replay_key": "k1"});
    let (st, rp) = s.post(&format!("/v1/events/{id}/replay"), &body).await;
    assert_eq!(st, 202, "{rp}");
    let (_, rp2) = s.post(&format!("/v1/events/{id}/replay"), &body).await;
    assert_eq!(rp["sagas"], rp2["sagas"]);
    s.settled_deliveries(id, 3, 20).await;
    let got = r.deliveries("/down");
    assert_eq!(got.len(), 5);
    assert_eq!(got[4].header("webhook-id"), got[0].header("webhook-id"));
    let m = s.metrics().await;
    assert!(m.contains("hookline_dead_letters_total 1"), "{m}");
    assert!(m.contains("hookline_deliveries_total{outcome=\"failed\"} 3"), "{m}");
}

pub async fn skip_closes_a_dead_letter_with_audit_and_gone_deactivates<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let (sub, _) = s
        .subscribe(
            json!({"callback_url": r.url("/gone", Behaviour::Ok), "event_types": ["*"], "retry_policy": fast_retry(5)}),
        )
        .await;
    r.set("/gone", Behaviour::Always(410));
    let (_, ev) = s.post("/v1/events", &json!({"type": "x", "data": 1})).await;
    let d = s.settled_deliveries(ev["event_id"].as_str().unwrap(), 1, 20).await;
    assert_eq!(d[0]["status"], "DeadLettered");
    assert_eq!(d[0]["attempts"].as_array().unwrap().len(), 1, "410 is not retried");
    // Deactivation follows the saga's terminal transition.
    let v = eventually(10, "410 Gone deactivates the subscription", || async {
        let (_, v) = s.get(&format!("/v1/subscriptions/{sub}")).await;
        (v["active"] == false).then_some(v)
    })
    .await;
    assert_eq!(v["disabled_reason"], "gone", "{v}");
    let disabled = audit_all(s, &format!("subscription_id={sub}&action=subscription.disabled"), 10).await;
    assert_eq!((disabled.len(), disabled[0]["actor"].as_str()), (1, Some("system")), "{disabled:?}");
    let dl = d[0]["saga_id"].as_str().unwrap();
    eventually(10, "the dead letter", || async {
        (s.get(&format!("/v1/dead-letters/{dl}")).await.0 == 200).then_some(())
    })
    .await;
    let (st, _) = s.post(&format!("/v1/dead-letters/{dl}/skip"), &json!({"reason": "customer left"})).await;
    assert_eq!(st, 200);
    let (_, v) = s.get(&format!("/v1/dead-letters/{dl}")).await;
    assert_eq!(v["state"], "skipped");
    assert_eq!(v["resolution"]["reason"], "customer left");
    let (st, v) = s.post(&format!("/v1/dead-letters/{dl}/requeue"), &json!({})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("reason")), "a reason is required: {v}");
    let (st, _) = s.post(&format!("/v1/dead-letters/{dl}/requeue"), &json!({"reason": "try"})).await;
    assert_eq!(st, 409, "a skipped dead letter cannot be requeued");
    let (st, _) = s.post(&format!("/v1/dead-letters/{dl}/skip"), &json!({"reason": "again"})).await;
    assert_eq!(st, 409, "nor skipped again");
    // Inactive subscriptions get nothing.
    let (_, ev) = s.post("/v1/events", &json!({"type": "x", "data": 2})).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, d) = s.get(&format!("/v1/events/{}/deliveries", ev["event_id"].as_str().unwrap())).await;
    assert_eq!(d["deliveries"].as_array().unwrap().len(), 0);
    assert_eq!(r.deliveries("/gone").len(), 1);
}

pub async fn duplicate_events_are_one_event_and_one_delivery<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/d", Behaviour::Ok), "event_types": ["*"]})).await;
    let body = fixture("contract_task_failed.json");
    let (st1, a) = post_raw(s, "/v1/events", &body).await;
    let (st2, b) = post_raw(s, "/v1/events", &body).await;
    assert_eq!((st1, st2), (202, 202));
    assert_eq!(a["duplicate"], false);
    assert_eq!(b["duplicate"], true);
    assert_eq!(a["event_id"], b["event_id"]);
    // In a batch too.
    let batch = format!("[{}, {}]", String::from_utf8_lossy(&body), r#"{"type":"z","data":null}"#);
    let (st, v) = post_raw(s, "/v1/events/batch", batch.as_bytes()).await;
    assert_eq!(st, 202, "{v}");
    assert_eq!(v["results"][0]["duplicate"], true);
    assert_eq!(v["results"][1]["duplicate"], false);
    s.settled_deliveries(a["event_id"].as_str().unwrap(), 1, 10).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let n = r.deliveries("/d").iter().filter(|d| d.header("hookline-event-type") == "task.failed").count();
    assert_eq!(n, 1);
}

/// `GET /v1/events/{id}/deliveries` is paged like every other list: an
/// event fanned out to many subscriptions is read `limit` sagas at a time,
/// following `next_cursor`, each saga once; a bad `limit` or a cursor of
/// another event's listing is a `400` naming it.
pub async fn deliveries_are_paged_with_a_cursor<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    for i in 0..5 {
        s.subscribe(json!({"callback_url": r.url(&format!("/page{i}"), Behaviour::Ok), "event_types": ["paged.*"]}))
            .await;
    }
    let (st, _) = s.post("/v1/events", &json!({"id": "paged-1", "type": "paged.x", "data": 1})).await;
    assert_eq!(st, 202);
    let (st, _) = s.post("/v1/events", &json!({"id": "paged-2", "type": "paged.x", "data": 2})).await;
    assert_eq!(st, 202);
    s.settled_deliveries("paged-1", 5, 30).await;
    let mut seen = Vec::new();
    let mut path = "/v1/events/paged-1/deliveries?limit=2".to_string();
    let mut pages = 0;
    loop {
        let (st, v) = s.get(&path).await;
        assert_eq!(st, 200, "{v}");
        let items = v["deliveries"].as_array().unwrap();
        assert!(items.len() <= 2, "a page holds at most its limit: {v}");
        seen.extend(items.iter().map(|d| d["saga_id"].as_str().unwrap().to_string()));
        pages += 1;
        match v["next_cursor"].as_str() {
            Some(c) => path = format!("/v1/events/paged-1/deliveries?limit=2&cursor={c}"),
            None => break,
        }
        assert!(pages < 10, "the walk ends");
    }
    let mut distinct = seen.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!((seen.len(), distinct.len()), (5, 5), "each saga once: {seen:?}");
    assert!(pages >= 3, "5 sagas at 2 a page: {pages} pages");
    let (st, v) = s.get("/v1/events/paged-1/deliveries?limit=2").await;
    assert_eq!(st, 200);
    let cursor = v["next_cursor"].as_str().unwrap().to_string();
    let (st, v) = s.get(&format!("/v1/events/paged-2/deliveries?cursor={cursor}")).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("cursor")), "another event's cursor: {v}");
    for bad in ["0", "101", "x"] {
        let (st, v) = s.get(&format!("/v1/events/paged-1/deliveries?limit={bad}")).await;
        assert_eq!((st, v["error"]["field"].as_str()), (400, Some("limit")), "limit={bad}: {v}");
    }
}

/// Producer-side idempotency (docs/formats.md#stored-ids-and-deduplication).
/// Two contract envelopes of one tenant with the same `idempotencyKey` and
/// different `eventId`s are one event: the second answers `duplicate` with
/// the first one's id, and the subscriber gets one delivery, the first body.
/// The same key from another tenant is a new event. A native envelope
/// without `id` posted twice with the same `Idempotency-Key` header is one
/// event; without the header, two.
pub async fn idempotency_keys_make_a_retry_a_duplicate<P: Pipeline>(s: &P) {
    const KEY: &str = "task:tsk_3001:attempt:2:failed";
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/idem", Behaviour::Ok), "event_types": ["*"]})).await;
    let contract = |event_id: &str, tenant: &str| {
        json!({"eventId": event_id, "eventType": "task.failed", "version": 1, "occurredAt": "2026-02-19T10:10:00Z",
               "traceId": "req_abcd", "producer": "worker-orchestrator", "idempotencyKey": KEY, "tenantId": tenant,
               "payload": {"taskId": "tsk_3001", "sentAs": event_id}})
    };
    let (st, first) = s.post("/v1/events", &contract("evt_first", "acme")).await;
    assert_eq!((st, &first["duplicate"]), (202, &json!(false)), "{first}");
    let first_id = first["event_id"].as_str().unwrap().to_string();
    assert_eq!(first_id, shared::ids::idempotent_event_id(Some("acme"), KEY).as_str());
    let (st, retry) = s.post("/v1/events", &contract("evt_retry", "acme")).await;
    assert_eq!((st, retry), (202, json!({"event_id": first_id, "duplicate": true})), "another eventId, the same key");
    let (st, other) = s.post("/v1/events", &contract("evt_first", "globex")).await;
    assert_eq!((st, &other["duplicate"]), (202, &json!(false)), "another tenant's key is its own: {other}");
    let other_id = other["event_id"].as_str().unwrap().to_string();
    assert_ne!(other_id, first_id);
    // The first envelope is the event; its eventId stays in the body.
    let (_, ev) = s.get(&format!("/v1/events/{first_id}")).await;
    assert_eq!((ev["tenant_id"].as_str(), ev["producer_id"].as_str()), (Some("acme"), Some("evt_first")), "{ev}");

    let native =
        serde_json::to_vec(&json!({"type": "order.created", "tenant_id": "acme", "data": {"order": 7}})).unwrap();
    let with_key = [("Idempotency-Key", "order-7-created")];
    let (st, n1) = s.call_with_headers("POST", "/v1/events", Some(&native), &with_key).await;
    assert_eq!((st, &n1["duplicate"]), (202, &json!(false)), "{n1}");
    let keyed_id = n1["event_id"].as_str().unwrap().to_string();
    assert_eq!(keyed_id, shared::ids::idempotent_event_id(Some("acme"), "order-7-created").as_str());
    let (st, n2) = s.call_with_headers("POST", "/v1/events", Some(&native), &with_key).await;
    assert_eq!((st, n2), (202, json!({"event_id": keyed_id, "duplicate": true})), "a retry with the same key");
    let (_, p1) = post_raw(s, "/v1/events", &native).await;
    let (_, p2) = post_raw(s, "/v1/events", &native).await;
    assert_eq!((&p1["duplicate"], &p2["duplicate"]), (&json!(false), &json!(false)), "no key: two events");
    assert_ne!(p1["event_id"], p2["event_id"]);

    let events =
        [first_id.as_str(), &other_id, &keyed_id, p1["event_id"].as_str().unwrap(), p2["event_id"].as_str().unwrap()];
    for id in events {
        assert_eq!(s.settled_deliveries(id, 1, 20).await[0]["status"], "Completed", "{id}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = r.deliveries("/idem");
    assert_eq!(got.len(), events.len(), "one delivery per event");
    let sent_as: Vec<Value> = got.iter().map(|d| d.json()["payload"]["sentAs"].clone()).collect();
    assert_eq!(sent_as.iter().filter(|v| **v == "evt_first").count(), 2, "acme's and globex's first envelopes");
    assert!(!sent_as.contains(&json!("evt_retry")), "the duplicate is not delivered");
    let m = s.metrics().await;
    assert!(m.contains("hookline_events_duplicate_total 2\n"), "{m}");
}

pub async fn unverified_inactive_and_other_tenants_get_nothing<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let (acme, _) = s.subscribe(json!({"callback_url": r.url("/acme", Behaviour::Ok), "event_types": ["RecordUpdated"], "tenant_id": "acme"})).await;
    let (all, _) = s
        .subscribe(
            json!({"callback_url": r.url("/all", Behaviour::Ok), "event_types": ["Record*".replace('*', "Updated")]}),
        )
        .await;
    let (off, _) = s.subscribe(json!({"callback_url": r.url("/off", Behaviour::Ok), "event_types": ["*"]})).await;
    let (st, _) = s.call("PATCH", &format!("/v1/subscriptions/{off}"), Some(br#"{"active": false}"#)).await;
    assert_eq!(st, 200);
    let (st, unv) = s
        .post(
            "/v1/subscriptions",
            &json!({"callback_url": r.url("/unverified", Behaviour::NoEcho), "event_types": ["*"]}),
        )
        .await;
    assert_eq!(st, 201);
    let _ = unv;
    let mk = |tenant: &str, id: &str| {
        json!({"eventId": id, "schemaVersion": 1, "eventType": "RecordUpdated", "occurredAt": "2026-01-10T12:34:56.789Z",
               "tenantId": tenant, "producer": {"service": "core", "instanceId": "p1"}, "correlationId": "c1",
               "sequence": {"partitionKey": "Opportunity:t:r", "recordVersion": "1"}, "payload": {}})
    };
    let (st, a) = s.post("/v1/events", &mk("acme", "e-acme")).await;
    assert_eq!(st, 202);
    let (_, g) = s.post("/v1/events", &mk("globex", "e-globex")).await;
    // An event with a tenant is stored under a per-tenant id (shared::ids::stored_event_id).
    let a = s.settled_deliveries(a["event_id"].as_str().unwrap(), 2, 10).await;
    let g = s.settled_deliveries(g["event_id"].as_str().unwrap(), 1, 10).await;
    let subs: Vec<&str> = a.iter().map(|d| d["subscription_id"].as_str().unwrap()).collect();
    assert!(subs.contains(&acme.as_str()) && subs.contains(&all.as_str()));
    assert_eq!(g[0]["subscription_id"], all.as_str());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(r.deliveries("/acme").len(), 1);
    assert_eq!(r.deliveries("/all").len(), 2);
    assert!(r.deliveries("/off").is_empty());
    assert!(r.deliveries("/unverified").is_empty());
}

pub async fn bad_input_gets_a_clear_error_and_writes_nothing<P: Pipeline>(s: &P) {
    let (st, v) = post_raw(s, "/v1/events", b"{\"type\": \"a\",\n \"data\": }").await;
    assert_eq!(st, 400);
    assert_eq!(v["error"]["code"], "malformed_json");
    assert!(v["error"]["message"].as_str().unwrap().contains("line 2"), "{v}");
    let (st, v) = post_raw(s, "/v1/events", br#"{"data": {}}"#).await;
    assert_eq!(st, 400);
    assert_eq!(v["error"]["field"], "type", "{v}");
    let mut no_trace: Value = serde_json::from_slice(&fixture("contract_task_failed.json")).unwrap();
    no_trace.as_object_mut().unwrap().remove("traceId");
    no_trace["eventId"] = json!("never-stored");
    let (st, v) = s.post("/v1/events", &no_trace).await;
    assert_eq!(st, 400);
    assert_eq!(v["error"]["field"], "traceId", "{v}");
    let (st, v) = post_raw(s, "/v1/events?format=xml", br#"{"type":"a","data":1}"#).await;
    assert_eq!(st, 400);
    assert_eq!(v["error"]["code"], "unknown_format");
    let big = format!(r#"{{"type":"a","data":"{}"}}"#, "x".repeat(300 * 1024));
    let (st, v) = post_raw(s, "/v1/events", big.as_bytes()).await;
    assert_eq!(st, 413, "{v}");
    for (url, why) in [
        ("http://example.com/hook", "http to a public host"),
        ("https://10.0.0.7/hook", "private address"),
        ("https://169.254.169.254/latest", "metadata address"),
        ("http://192.168.1.1/", "private address"),
        ("not a url", "garbage"),
    ] {
        let (st, v) = s.post("/v1/subscriptions", &json!({"callback_url": url, "event_types": ["*"]})).await;
        assert_eq!(st, 422, "{why}: {v}");
        assert_eq!(v["error"]["field"], "callback_url");
    }
    let (st, v) = s.post("/v1/subscriptions", &json!({"callback_url": "http://127.0.0.1:9/x"})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("event_types")));
    let (st, v) = s
        .post(
            "/v1/subscriptions",
            &json!({"callback_url": "http://127.0.0.1:9/x", "event_types": ["*"], "retry_policy": {"max_attempts": 0}}),
        )
        .await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("retry_policy.max_attempts")));
    let (st, _) = s.get("/v1/events/never-stored").await;
    assert_eq!(st, 404);
    let (st, _) = s.get("/v1/subscriptions/sub_nope").await;
    assert_eq!(st, 404);
    let (_, subs) = s.get("/v1/subscriptions").await;
    assert_eq!(subs["items"].as_array().unwrap().len(), 0, "rejected subscriptions are not stored");
    let m = s.metrics().await;
    assert!(m.contains("hookline_events_accepted_total 0"), "{m}");
}

pub async fn rotated_secret_keeps_signing_with_the_old_one_during_the_overlap<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let (id, old) = s.subscribe(json!({"callback_url": r.url("/rot", Behaviour::Ok), "event_types": ["*"]})).await;
    let (st, v) = s.post(&format!("/v1/subscriptions/{id}/rotate-secret"), &json!({})).await;
    assert_eq!(st, 200);
    let new = v["secret"].as_str().unwrap().to_string();
    assert_ne!(old, new);
    let (_, ev) = s.post("/v1/events", &json!({"type": "a", "data": 1})).await;
    s.settled_deliveries(ev["event_id"].as_str().unwrap(), 1, 10).await;
    let d = &r.deliveries("/rot")[0];
    for secret in [&old, &new] {
        verify_delivery(d, &Secret::parse(secret).unwrap()).expect("both secrets verify during the overlap");
    }
}

/// Crash at a failpoint between two writes of a stage, restart, and check the
/// event still ends delivered, with one attempt row per attempt.
pub async fn crash_between_steps<P: Pipeline>(
    s: &mut P,
    failpoint: &str,
    expect_receiver_calls: std::ops::RangeInclusive<usize>,
) {
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/c", Behaviour::Ok), "event_types": ["*"]})).await;
    s.crash_at(failpoint).await;
    let (st, v) = s.post("/v1/events", &json!({"id": "crash-1", "type": "t", "data": {}})).await;
    assert_eq!(st, 202, "{v}");
    s.recover().await;
    let d = s.settled_deliveries("crash-1", 1, 30).await;
    assert_eq!(d[0]["status"], "Completed");
    let attempts = d[0]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "one attempt row: {attempts:?}");
    let got = r.deliveries("/c");
    assert!(expect_receiver_calls.contains(&got.len()), "{failpoint}: receiver got {}", got.len());
    assert!(got.iter().all(|x| x.header("webhook-id") == got[0].header("webhook-id")));
}

/// Every stuck state has a way back: the routing of an event is given up
/// after the stream's retries (a flaky store); once the reconciler has
/// routed it, its first attempt fails (HTTP 500) and the retry's delivery
/// job is lost on the way to the queue. The reconciler finds both (the
/// given-up batch, then the retrying saga past its due time) and re-drives
/// them through the normal path. The event is delivered once more, with one
/// saga and two attempt records; other events flow as usual.
/// Start `hookline serve` with `--reconcile-interval 1s --stall-margin 2s`.
pub async fn reconciler_recovers_a_given_up_routing_and_a_lost_job<P: Pipeline>(s: &mut P) {
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/rec", Behaviour::FailFirst(1, 500)), "event_types": ["*"],
                       "retry_policy": fast_retry(3)}))
        .await;
    // Routing fails through every retry (the batch is given up), and the
    // job of the second attempt is lost between the saga step and the queue.
    s.inject_failures(&[
        ("route.store@rec-stuck", 1 + shared::bounds::STREAM_MAX_RETRIES),
        ("saga.lose_job@rec-stuck#2", 1),
    ])
    .await;
    let (st, _) = s.post("/v1/events", &json!({"id": "rec-stuck", "type": "t", "data": 1})).await;
    assert_eq!(st, 202);
    // Give the stream consumer time to retry and give up.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let d = eventually(40, "the stuck event delivered after the reconciler ran", || async {
        s.reconcile().await;
        let (_, v) = s.get("/v1/events/rec-stuck/deliveries").await;
        let d = v["deliveries"].as_array().cloned().unwrap_or_default();
        (d.len() == 1 && d[0]["status"] == "Completed").then_some(d)
    })
    .await;
    assert_eq!(d[0]["attempts"].as_array().unwrap().len(), 2, "one record per attempt: {d:?}");
    // Work that was never stuck is not touched.
    let (st, _) = s.post("/v1/events", &json!({"id": "rec-fine", "type": "t", "data": 2})).await;
    assert_eq!(st, 202);
    s.settled_deliveries("rec-fine", 1, 20).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    s.reconcile().await;
    assert_eq!(r.deliveries("/rec").len(), 3, "a failed attempt, the stuck event once, the other once");
    let metrics = s.metrics().await;
    assert!(metrics.contains("hookline_reconciled_total{kind=\"events_rerouted\"} 1\n"), "{metrics}");
    assert!(!metrics.contains("hookline_reconciled_total{kind=\"sagas_redriven\"} 0\n"), "{metrics}");
}

/// PATCH tells a field left out (kept), `null` (reset) and a value (set)
/// apart; a bad body names the field by its path and changes nothing.
pub async fn patch_keeps_absent_fields_and_resets_null_ones<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let (id, _) = s
        .subscribe(json!({"callback_url": r.url("/patch", Behaviour::Ok), "event_types": ["a.*"],
                          "description": "billing", "headers": {"X-Team": "pay"}}))
        .await;
    let path = format!("/v1/subscriptions/{id}");
    let (st, v) = s.call("PATCH", &path, Some(br#"{"active": false}"#)).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (v["active"].as_bool(), v["description"].as_str(), v["headers"]["X-Team"].as_str()),
        (Some(false), Some("billing"), Some("pay"))
    );
    let (st, v) = s.call("PATCH", &path, Some(br#"{"description": null, "headers": null, "active": null}"#)).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["description"], Value::Null);
    assert_eq!(v["headers"], json!({}));
    assert_eq!(v["active"], true, "null resets to the default");
    assert_eq!(v["event_types"], json!(["a.*"]), "absent: kept");
    for (body, code, field) in [
        (r#"{"event_types": ["b.*", 3]}"#, "invalid_field", "event_types[1]"),
        (r#"{"retry_policy": {"max_attempts": "x"}}"#, "invalid_field", "retry_policy.max_attempts"),
        (r#"{"colour": "red"}"#, "unknown_field", "colour"),
        (r#"{"event_types": null}"#, "invalid_field", "event_types"),
    ] {
        let (st, v) = s.call("PATCH", &path, Some(body.as_bytes())).await;
        assert_eq!(
            (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
            (400, Some(code), Some(field)),
            "{body}: {v}"
        );
    }
    let (_, v) = s.get(&path).await;
    assert_eq!(v["event_types"], json!(["a.*"]), "a refused PATCH changed nothing");
}

/// `GET /v1/subscriptions` is paginated: walking the pages with a small
/// `limit` returns every subscription once; `tenant_id` lists one tenant's;
/// `event_type` (with or without `tenant_id`) lists those an event of that
/// type (and tenant) is in scope of; a cursor Hookline did not issue, or
/// one sent with other filters, and a `limit` out of range are refused
/// naming the parameter.
pub async fn subscriptions_list_is_paginated_and_filtered<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let mut made: Vec<(String, Option<&str>, &str)> = Vec::new();
    for i in 0..12 {
        let tenant = [None, Some("acme"), Some("globex")][i % 3];
        let pattern = ["task.*", "quota.committed"][i % 2];
        let mut body = json!({"callback_url": r.url(&format!("/list{i}"), Behaviour::Ok), "event_types": [pattern]});
        if let Some(t) = tenant {
            body["tenant_id"] = json!(t);
        }
        let (st, v) = s.post("/v1/subscriptions", &body).await;
        assert_eq!(st, 201, "{v}");
        made.push((v["id"].as_str().unwrap().to_string(), tenant, pattern));
    }
    let walk = |query: String, limit: usize| async move {
        let mut ids: Vec<String> = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut path = format!("/v1/subscriptions?limit={limit}{query}");
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={c}"));
            }
            let (st, v) = s.get(&path).await;
            assert_eq!(st, 200, "{path}: {v}");
            let items = v["items"].as_array().unwrap();
            assert!(items.len() <= limit);
            assert!(items.iter().all(|x| x.get("secret").is_none()), "no secret in a list");
            ids.extend(items.iter().map(|x| x["id"].as_str().unwrap().to_string()));
            match v["next_cursor"].as_str() {
                Some(c) => {
                    assert_eq!(items.len(), limit, "only the last page is short");
                    cursor = Some(c.to_string());
                }
                None => return ids,
            }
        }
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let want = |f: &dyn Fn(Option<&str>, &str) -> bool| {
        sorted(made.iter().filter(|(_, t, p)| f(*t, p)).map(|(id, _, _)| id.clone()).collect())
    };
    let all = walk(String::new(), 5).await;
    assert_eq!(all.len(), 12, "every subscription once: {all:?}");
    assert_eq!(all, want(&|_, _| true), "in id order");
    let (_, v) = s.get("/v1/subscriptions").await;
    assert_eq!((v["items"].as_array().unwrap().len(), v["next_cursor"].is_null()), (12, true), "100 by default");
    assert_eq!(walk("&tenant_id=acme".into(), 2).await, want(&|t, _| t == Some("acme")));
    assert_eq!(
        walk("&tenant_id=acme&event_type=task.created".into(), 1).await,
        want(&|t, p| t != Some("globex") && p == "task.*"),
        "an acme task.created event reaches the global and acme task.* subscriptions"
    );
    assert_eq!(
        walk("&event_type=quota.committed".into(), 3).await,
        want(&|t, p| t.is_none() && p == "quota.committed")
    );
    assert!(walk("&event_type=nothing.here".into(), 3).await.is_empty());

    let (_, first) = s.get("/v1/subscriptions?limit=2&tenant_id=acme").await;
    let acme_cursor = first["next_cursor"].as_str().unwrap().to_string();
    let mut flipped = acme_cursor.clone().into_bytes();
    flipped[4] = if flipped[4] == b'A' { b'B' } else { b'A' };
    let flipped = String::from_utf8(flipped).unwrap();
    for (path, field) in [
        ("/v1/subscriptions?cursor=not-a-cursor".to_string(), "cursor"),
        (format!("/v1/subscriptions?cursor={flipped}&tenant_id=acme"), "cursor"),
        (format!("/v1/subscriptions?cursor={acme_cursor}"), "cursor"),
        ("/v1/subscriptions?limit=0".to_string(), "limit"),
        ("/v1/subscriptions?limit=1001".to_string(), "limit"),
        ("/v1/subscriptions?limit=ten".to_string(), "limit"),
        (format!("/v1/subscriptions?event_type={}", "a".repeat(101)), "event_type"),
        ("/v1/subscriptions?tenant_id=".to_string(), "tenant_id"),
    ] {
        let (st, v) = s.get(&path).await;
        assert_eq!((st, v["error"]["field"].as_str()), (400, Some(field)), "{path}: {v}");
    }
    let (st, v) = s.get(&format!("/v1/subscriptions?cursor={acme_cursor}&tenant_id=acme&limit=1000")).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["items"].as_array().unwrap().len(), 2, "the rest of acme's after the first page");
}

/// The circuit breaker, on a pipeline configured with 3 failures to open
/// and a 1 s cool-down: it opens after 3 consecutive 503s, the jobs that
/// come due while it is open wait without consuming attempts, the probe
/// after the cool-down closes it once the endpoint recovers, and every
/// event is then delivered. The subscription shows it all in `health`, and
/// opening and closing are log lines and metrics.
pub async fn breaker_opens_defers_without_attempts_and_closes_after_a_probe<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let (sub, _) = s
        .subscribe(
            json!({"callback_url": r.url("/brk", Behaviour::Ok), "event_types": ["*"], "retry_policy": fast_retry(20)}),
        )
        .await;
    r.set("/brk", Behaviour::Always(503));
    let (_, ev) = s.post("/v1/events", &json!({"type": "b.one", "data": {}})).await;
    let first = ev["event_id"].as_str().unwrap().to_string();
    let health = crate::eventually(20, "the breaker open", || async {
        let (_, v) = s.get(&format!("/v1/subscriptions/{sub}")).await;
        (v["health"]["breaker"] != "closed").then_some(v["health"].clone())
    })
    .await;
    // Open: retries come due every 50-200 ms, yet no request is made until
    // the cool-down ends (1 s, growing to at most 2 s while probes fail).
    let opened_with = r.deliveries("/brk").len();
    assert!((3..=4).contains(&opened_with), "{opened_with} attempts before the breaker held them");
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(r.deliveries("/brk").len() <= opened_with + 1, "at most the probe went out while open");
    assert!(health["consecutive_failures"].as_u64().unwrap() >= 3, "{health}");
    assert!(health["last_error"].as_str().unwrap().contains("503"), "{health}");
    assert!(health["breaker_until"].is_string(), "{health}");
    // The list shows each subscription's health too.
    let (_, list) = s.get("/v1/subscriptions?limit=1000").await;
    let listed = list["items"].as_array().unwrap().iter().find(|i| i["id"] == sub.as_str()).expect("listed").clone();
    assert_ne!(listed["health"]["breaker"], "closed", "{listed}");
    assert!(listed["health"]["consecutive_failures"].as_u64().unwrap() >= 3, "{listed}");
    // And metrics name it while its breaker is not closed.
    let metrics = s.metrics().await;
    let series = format!("hookline_subscription_consecutive_failures{{subscription_id=\"{sub}\"");
    assert!(metrics.lines().any(|l| l.starts_with(&series)), "no {series} in\n{metrics}");
    assert!(
        metrics.lines().any(|l| l.starts_with("hookline_subscriptions_unhealthy{") && !l.ends_with(" 0")),
        "{metrics}"
    );

    r.set("/brk", Behaviour::Ok);
    let mut ids = vec![first.clone()];
    for i in 0..5 {
        let (_, ev) = s.post("/v1/events", &json!({"type": "b.more", "data": {"i": i}})).await;
        ids.push(ev["event_id"].as_str().unwrap().to_string());
    }
    // Generous waits: on the emulator, one slow stretch (another test's
    // large transactions) once held these past 30 s in CI.
    for id in &ids {
        let d = s.settled_deliveries(id, 1, 90).await;
        assert_eq!(d[0]["status"], "Completed", "{id}: {}", d[0]);
    }
    // Every request made is an attempt on record and no attempt was made
    // without a request: deferral consumed none. While open, at most one
    // probe per cool-down went out, so far fewer than the 20 allowed.
    let d = s.settled_deliveries(&first, 1, 5).await;
    let attempts = d[0]["attempts"].as_array().unwrap().len();
    let requests = r.deliveries("/brk").iter().filter(|x| x.header("hookline-event-type") == "b.one").count();
    assert_eq!(attempts, requests, "attempts on record vs requests received for {first}");
    assert!(attempts < 20, "{attempts} attempts: the breaker held the others");
    let (_, v) = s.get(&format!("/v1/subscriptions/{sub}")).await;
    let health = &v["health"];
    assert_eq!(health["breaker"], "closed", "{health}");
    assert_eq!(health["consecutive_failures"], 0, "{health}");
    assert!(health["last_success_at"].is_string(), "{health}");
    assert!(health["attempts"].as_u64().unwrap() >= 6, "{health}");
    let rate = health["success_rate"].as_f64().unwrap();
    assert!(rate > 0.0 && rate < 1.0, "{health}");
    assert!(health["latency_p50_ms"].is_u64() && health["latency_p99_ms"].is_u64(), "{health}");
    let metrics = s.metrics().await;
    assert!(
        metrics.lines().any(|l| l.starts_with("hookline_breakers_opened_total ") && !l.ends_with(" 0")),
        "{metrics}"
    );
    assert!(
        metrics.lines().any(|l| l.starts_with("hookline_breakers_closed_total ") && !l.ends_with(" 0")),
        "{metrics}"
    );
    let logs = s.logs().await;
    let mine: Vec<&str> = logs.lines().filter(|l| l.contains(sub.as_str())).collect();
    assert!(mine.iter().any(|l| l.contains("breaker opened")), "no 'breaker opened' line for {sub}");
    assert!(mine.iter().any(|l| l.contains("breaker closed")), "no 'breaker closed' line for {sub}");
}

/// A subscription whose endpoint hangs (every attempt runs into the 1.5 s
/// delivery timeout of the test pipelines) beside a healthy one, both
/// subscribed to the same 100 events: the healthy deliveries stall at most
/// twice (until the hung subscription's breaker has its 5 failures), each
/// for about one delivery timeout, however many of its jobs are waiting. On Lambda a batch of jobs waits for its slowest, so the
/// bound is one timeout; the hung subscription's breaker then opens and its
/// jobs wait without holding a batch.
pub async fn a_hung_subscription_holds_a_healthy_one_at_most_one_timeout<P: Pipeline>(s: &P) {
    const TIMEOUT: Duration = Duration::from_millis(1500);
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/hang", Behaviour::Ok), "event_types": ["h.*"]})).await;
    s.subscribe(json!({"callback_url": r.url("/fine", Behaviour::Ok), "event_types": ["h.*"]})).await;
    r.set("/hang", Behaviour::SlowFirst(usize::MAX, Duration::from_secs(60)));
    let n = 100;
    let batch: Vec<Value> = (0..n).map(|i| json!({"type": "h.x", "data": {"i": i}})).collect();
    let (st, _) = s.call("POST", "/v1/events/batch", Some(&serde_json::to_vec(&batch).unwrap())).await;
    assert_eq!(st, 202);
    crate::eventually(30, "every healthy delivery", || async { (r.deliveries("/fine").len() >= n).then_some(()) })
        .await;
    // The healthy deliveries stall at most twice, each for at most about
    // one delivery timeout, however slowly the pipeline itself runs on a
    // loaded machine: on Lambda a batch of 10 holding hung jobs waits for
    // them, and the breaker needs 5 failures, which one mixed batch may not
    // hold.
    let mut at: Vec<_> = r.deliveries("/fine").iter().map(|d| d.at).collect();
    at.sort();
    let gaps: Vec<Duration> = at.windows(2).map(|w| w[1] - w[0]).collect();
    let stalls = gaps.iter().filter(|g| **g >= TIMEOUT * 4 / 5).count();
    let longest = gaps.iter().max().copied().unwrap_or_default();
    assert!(stalls <= 2, "{stalls} stalls of a delivery timeout or more between healthy deliveries");
    assert!(longest < TIMEOUT + Duration::from_millis(1500), "a {longest:?} stall between healthy deliveries");
    assert!(r.deliveries("/hang").len() < n, "the hung subscription's breaker held most of its jobs");
}

/// An endpoint that goes down with many requests open (each runs into the
/// test pipelines' 1.5 s delivery timeout, all at about the same moment):
/// every one of those failures is counted in the subscription's health
/// once (`consecutive_failures` is the number of requests made), none is
/// lost to writes of the record that conflict with each other, and no
/// "breaker not updated" line is logged for it.
pub async fn concurrent_failures_are_each_counted_once<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let (sub, _) = s
        .subscribe(json!({"callback_url": r.url("/down", Behaviour::Ok), "event_types": ["c.*"],
                          "retry_policy": {"max_attempts": 1}}))
        .await;
    r.set("/down", Behaviour::SlowFirst(usize::MAX, Duration::from_secs(60)));
    let batch: Vec<Value> = (0..30).map(|i| json!({"type": "c.x", "data": {"i": i}})).collect();
    let (st, _) = s.call("POST", "/v1/events/batch", Some(&serde_json::to_vec(&batch).unwrap())).await;
    assert_eq!(st, 202);
    // Requests made after the breaker opened (a probe) are counted too, so
    // the two figures meet whenever every request made has timed out.
    let (made, health) = crate::eventually(60, "every failed request counted once", || async {
        let made = r.deliveries("/down").len();
        let (_, v) = s.get(&format!("/v1/subscriptions/{sub}")).await;
        let counted = v["health"]["consecutive_failures"].as_u64().unwrap_or(0) as usize;
        (made >= 5 && counted == made).then(|| (made, v["health"].clone()))
    })
    .await;
    // They failed together (30 at once on serve, a batch at once on Lambda).
    assert!(r.max_concurrent("/down") >= 2, "requests to /down never overlapped");
    assert_ne!(health["breaker"], "closed", "{made} failures: {health}");
    assert!(health["last_error"].as_str().unwrap_or("").contains("timed out"), "{health}");
    let logs = s.logs().await;
    let lost: Vec<&str> =
        logs.lines().filter(|l| l.contains(sub.as_str()) && l.contains("breaker not updated")).collect();
    assert!(lost.is_empty(), "{} writes of the breaker gave up:\n{}", lost.len(), lost.join("\n"));
}

/// `payload_format: "contract-webhook"`: the task-event contract's public
/// body, built from the stored event and signed as sent; `data_fields`
/// keeps internal fields of `data` in, and the envelope's internal fields
/// (`producer`, `idempotencyKey`) never leave. `data_fields` with another
/// format is refused and changes nothing.
pub async fn contract_webhook_payload_keeps_internal_fields_in<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let (_, secret) = s
        .subscribe(json!({"callback_url": r.url("/cw", Behaviour::Ok), "event_types": ["task.*"],
                          "payload_format": "contract-webhook", "data_fields": ["taskId", "userId", "errorCode"]}))
        .await;
    let secret = Secret::parse(&secret).unwrap();
    let (all_id, _) = s
        .subscribe(json!({"callback_url": r.url("/cw-all", Behaviour::Ok), "event_types": ["task.*"],
                          "payload_format": "contract-webhook"}))
        .await;
    let contract = json!({
        "eventId": "evt_cw_1", "eventType": "task.failed", "version": 1, "occurredAt": "2026-02-19T10:10:00Z",
        "traceId": "req_cw", "producer": "worker-orchestrator", "idempotencyKey": "task:tsk_cw:2:failed",
        "payload": {"taskId": "tsk_cw", "userId": "u_1", "errorCode": "50001", "errorMessage": "model timeout",
                    "modelNode": "gpu-7", "executionProfile": "FAST", "riskFlags": ["MODEL_LICENSE_REVIEW_PENDING"]}
    });
    let (st, v) = s.post("/v1/events", &contract).await;
    assert_eq!(st, 202, "{v}");
    let contract_id = v["event_id"].as_str().unwrap().to_string();
    let (st, v) =
        s.post("/v1/events", &json!({"id": "n_cw_1", "type": "task.created", "data": {"taskId": "t9"}})).await;
    assert_eq!(st, 202, "{v}");
    let native_id = v["event_id"].as_str().unwrap().to_string();
    s.settled_deliveries(&contract_id, 2, 20).await;
    s.settled_deliveries(&native_id, 2, 20).await;

    let got = r.deliveries("/cw");
    let failed = got.iter().find(|d| d.header("hookline-event-type") == "task.failed").expect("delivered");
    verify_delivery(failed, &secret).expect("the rendered body is what is signed");
    let body: Value = serde_json::from_slice(&failed.body).unwrap();
    assert_eq!(
        body,
        json!({"eventId": "evt_cw_1", "eventType": "task.failed", "version": 1, "occurredAt": "2026-02-19T10:10:00Z",
               "traceId": "req_cw", "executionProfile": "FAST", "riskFlags": ["MODEL_LICENSE_REVIEW_PENDING"],
               "data": {"taskId": "tsk_cw", "userId": "u_1", "errorCode": "50001"}})
    );
    let created = got.iter().find(|d| d.header("hookline-event-type") == "task.created").expect("delivered");
    let body: Value = serde_json::from_slice(&created.body).unwrap();
    assert_eq!((body["eventId"].clone(), body["version"].clone()), (json!("n_cw_1"), json!(1)), "{body}");
    assert_eq!(body["traceId"], native_id.as_str(), "no trace id: the event id stands in: {body}");
    assert_eq!(body["data"], json!({"taskId": "t9"}), "{body}");
    // Without data_fields all of data goes, and still none of the envelope.
    let all = r.deliveries("/cw-all");
    let failed = all.iter().find(|d| d.header("hookline-event-type") == "task.failed").expect("delivered");
    let text = String::from_utf8_lossy(&failed.body).to_string();
    assert!(
        text.contains("modelNode") && !text.contains("idempotencyKey") && !text.contains("worker-orchestrator"),
        "{text}"
    );

    // data_fields belongs to contract-webhook: refused with another format.
    let path = format!("/v1/subscriptions/{all_id}");
    let (st, v) = s.call("PATCH", &path, Some(br#"{"payload_format": "original", "data_fields": ["taskId"]}"#)).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("data_fields")), "{v}");
    let (st, v) = s.call("PATCH", &path, Some(br#"{"data_fields": ["a..b"]}"#)).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("data_fields[0]")), "{v}");
    let (_, v) = s.get(&path).await;
    assert_eq!(
        (v["payload_format"].as_str(), v["data_fields"].clone()),
        (Some("contract-webhook"), Value::Null),
        "unchanged: {v}"
    );
    let (st, v) = s.call("PATCH", &path, Some(br#"{"data_fields": ["taskId"]}"#)).await;
    assert_eq!((st, v["data_fields"].clone()), (200, json!(["taskId"])), "{v}");

    // A body already in the webhook shape (the contract's own example) is
    // an event: accepted, delivered to contract-webhook subscribers as
    // itself (cut by their data_fields).
    let published = json!({"eventId": "evt_webhook_cw", "eventType": "task.succeeded", "version": 1,
        "occurredAt": "2026-02-19T10:12:00Z", "traceId": "req_cw2", "executionProfile": "FAST",
        "riskFlags": ["MODEL_LICENSE_REVIEW_PENDING"], "data": {"taskId": "tsk_3001", "userId": "u_1001", "status": "SUCCEEDED"}});
    let (st, v) = s.post("/v1/events", &published).await;
    assert_eq!((st, v["duplicate"].clone()), (202, json!(false)), "{v}");
    let id = v["event_id"].as_str().unwrap().to_string();
    s.settled_deliveries(&id, 2, 20).await;
    let got = |path: &str| -> Value {
        let d = r
            .deliveries(path)
            .into_iter()
            .find(|d| d.header("hookline-event-type") == "task.succeeded")
            .expect("delivered");
        serde_json::from_slice(&d.body).unwrap()
    };
    assert_eq!(
        got("/cw"),
        json!({"eventId": "evt_webhook_cw", "eventType": "task.succeeded", "version": 1,
        "occurredAt": "2026-02-19T10:12:00Z", "traceId": "req_cw2", "executionProfile": "FAST",
        "riskFlags": ["MODEL_LICENSE_REVIEW_PENDING"], "data": {"taskId": "tsk_3001", "userId": "u_1001"}})
    );
    // /cw-all was patched to data_fields ["taskId"] above.
    assert_eq!(got("/cw-all")["data"], json!({"taskId": "tsk_3001"}));
    let (st, v) = s.post("/v1/events", &published).await;
    assert_eq!(
        (st, v["duplicate"].clone(), v["event_id"].as_str()),
        (202, json!(true), Some(id.as_str())),
        "deduplicated on eventId: {v}"
    );
}

/// Walks `POST /v1/<what>/reindex` (`subscriptions`, `dead-letters`) page
/// after page with `limit`, following `next_cursor` until `null` (each page
/// answered `200`, examining at most `limit`); returns the totals
/// (reindexed, examined) and the number of requests.
pub async fn reindex_all<P: Pipeline>(s: &P, what: &str, limit: u64) -> (u64, u64, usize) {
    let (mut reindexed, mut examined, mut requests) = (0, 0, 0);
    let mut cursor: Option<String> = None;
    loop {
        let (st, v) = s.post(&format!("/v1/{what}/reindex"), &json!({"cursor": cursor, "limit": limit})).await;
        assert_eq!(st, 200, "reindex page {requests}: {v}");
        requests += 1;
        assert!(v["examined"].as_u64().unwrap() <= limit, "{v}");
        reindexed += v["reindexed"].as_u64().unwrap();
        examined += v["examined"].as_u64().unwrap();
        match v["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return (reindexed, examined, requests),
        }
        assert!(requests < 1000, "the cursor moves on");
    }
}

/// The upgrade repairs' API on a deployment whose subscriptions and dead
/// letters are all indexed: paged with an opaque cursor (limit 1: one
/// request per item examined, and the cursor followed), each reindexes
/// nothing and changes nothing; an empty body is one page of 100; a cursor
/// Hookline did not issue for that route (the other route's included), or
/// a limit outside 1-100, is a `400` naming the field. (What they repair:
/// `aws_e2e`'s pre-index items, `cli_ops`'s SQLite rows.)
pub async fn reindex_pages_with_a_cursor_and_refuses_bad_input<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let mut before = Vec::new();
    for i in 0..2 {
        let body = json!({"callback_url": r.url(&format!("/ri{i}"), Behaviour::Ok), "event_types": ["ri.*", "x"]});
        let (st, v) = s.post("/v1/subscriptions", &body).await;
        assert_eq!(st, 201, "{v}");
        before.push(v["id"].as_str().unwrap().to_string());
    }
    // What the API shows of each, its health aside (the API shows no version).
    let shown = || async {
        let mut out = Vec::new();
        for id in &before {
            let (_, mut v) = s.get(&format!("/v1/subscriptions/{id}")).await;
            v.as_object_mut().unwrap().remove("health");
            out.push(v);
        }
        out
    };
    // Verification may still be writing: wait until it is done.
    let settled = eventually(20, "verified", || async {
        let mut all = true;
        for id in &before {
            let (_, v) = s.get(&format!("/v1/subscriptions/{id}")).await;
            all &= v["verified"] == true;
        }
        all.then_some(())
    });
    settled.await;
    let stored = shown().await;
    assert!(stored.iter().all(|v| v["id"].is_string()), "{stored:?}");

    let (reindexed, examined, requests) = reindex_all(s, "subscriptions", 1).await;
    assert_eq!(reindexed, 0, "everything is indexed already");
    assert!(examined >= 2 && requests as u64 >= examined, "one item per request: {examined} in {requests}");
    let (st, v) = s.call("POST", "/v1/subscriptions/reindex", None).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!((v["reindexed"].as_u64(), v["examined"].as_u64()), (Some(0), Some(examined)), "{v}");
    assert!(v["next_cursor"].is_null(), "all in one page of 100: {v}");
    assert_eq!(reindex_all(s, "subscriptions", 100).await, (0, examined, 1));

    let (_, first) = s.post("/v1/subscriptions/reindex", &json!({"limit": 1})).await;
    let issued = first["next_cursor"].as_str().expect("a cursor after one item").to_string();
    let (_, listed) = s.get("/v1/subscriptions?limit=1").await;
    let list_cursor = listed["next_cursor"].as_str().expect("a list cursor").to_string();
    for (body, field) in [
        (json!({"cursor": "not-a-cursor"}), "cursor"),
        (json!({"cursor": ""}), "cursor"),
        (json!({"cursor": list_cursor}), "cursor"),
        (json!({"cursor": format!("{issued}x")}), "cursor"),
        (json!({"limit": 0}), "limit"),
        (json!({"limit": 101}), "limit"),
        (json!({"limit": -1}), "limit"),
        (json!({"limit": "ten"}), "limit"),
        (json!({"cursor": issued, "limit": 1, "from": "start"}), "from"),
    ] {
        let (st, v) = s.post("/v1/subscriptions/reindex", &body).await;
        assert_eq!((st, v["error"]["field"].as_str()), (400, Some(field)), "{body}: {v}");
    }
    let (st, v) = s.post("/v1/subscriptions/reindex", &json!({"cursor": issued, "limit": 1})).await;
    assert_eq!(st, 200, "the issued cursor still reads: {v}");
    assert_eq!(shown().await, stored, "nothing was changed");

    // Dead letters: two, each after its one attempt.
    let dl_sub = failing_subscription(s, &r, "/ri-dead", &["ri.dead"]).await;
    post_many(s, 2, "ri.dead", None).await;
    let query = format!("subscription_id={dl_sub}");
    let dead = wait_dead_letters(s, &query, 2, 60).await;
    let (reindexed, examined, requests) = reindex_all(s, "dead-letters", 1).await;
    assert_eq!(reindexed, 0, "every dead letter is indexed already");
    assert!(examined >= 2 && requests as u64 >= examined, "one item per request: {examined} in {requests}");
    assert_eq!(reindex_all(s, "dead-letters", 100).await, (0, examined, 1));
    let (_, first) = s.post("/v1/dead-letters/reindex", &json!({"limit": 1})).await;
    let dl_issued = first["next_cursor"].as_str().expect("a cursor after one dead letter").to_string();
    for (body, field) in [
        (json!({"cursor": issued}), "cursor"),
        (json!({"cursor": "not-a-cursor"}), "cursor"),
        (json!({"limit": 0}), "limit"),
        (json!({"limit": 101}), "limit"),
        (json!({"cursor": dl_issued, "all": true}), "all"),
    ] {
        let (st, v) = s.post("/v1/dead-letters/reindex", &body).await;
        assert_eq!((st, v["error"]["field"].as_str()), (400, Some(field)), "{body}: {v}");
    }
    let (st, v) = s.post("/v1/subscriptions/reindex", &json!({"cursor": dl_issued})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("cursor")), "a dead-letter cursor: {v}");
    assert_eq!(all_dead_letters(s, &query, 1000).await, dead, "nothing was changed");
}

/// `retry_policy.schedule_ms`: an explicit list of waits instead of
/// exponential backoff. Against a receiver answering 500 always, a schedule
/// of three waits makes exactly four attempts, then a dead letter; the
/// receiver's requests are at least the schedule's waits apart (lower
/// bounds; the upper bounds are loose, only to catch a schedule not used).
pub async fn retry_schedule_is_followed_then_dead_letters<P: Pipeline>(s: &P) {
    const SCHEDULE: [u64; 3] = [200, 400, 800];
    let r = Receiver::start().await;
    let (sub, _) = s
        .subscribe(json!({"callback_url": r.url("/ladder", Behaviour::Ok), "event_types": ["*"],
                          "retry_policy": {"schedule_ms": SCHEDULE}}))
        .await;
    let (_, shown) = s.get(&format!("/v1/subscriptions/{sub}")).await;
    assert_eq!(
        shown["retry_policy"],
        json!({"max_attempts": 4, "base_delay_ms": 200, "max_delay_ms": 800, "schedule_ms": SCHEDULE}),
        "max_attempts, base_delay_ms and max_delay_ms derive from the schedule: {shown}"
    );
    r.set("/ladder", Behaviour::Always(500));
    let (_, ev) = s.post("/v1/events", &json!({"type": "ladder.run", "data": {}})).await;
    let d = s.settled_deliveries(ev["event_id"].as_str().unwrap(), 1, 60).await;
    assert_eq!(d[0]["status"], "DeadLettered", "{d:?}");
    let attempts = d[0]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 4, "the schedule's three waits and the first attempt: {attempts:?}");
    assert!(attempts.iter().all(|a| a["status_code"] == 500), "{attempts:?}");
    let saga = d[0]["saga_id"].as_str().unwrap().to_string();
    let dl = eventually(10, "the dead letter", || async {
        let (st, v) = s.get(&format!("/v1/dead-letters/{saga}")).await;
        (st == 200).then_some(v)
    })
    .await;
    assert!(dl["reason"].as_str().unwrap().contains("gave up after 4 attempts"), "{dl}");

    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = r.deliveries("/ladder");
    assert_eq!(got.len(), 4, "no attempt after the schedule's end");
    let numbers: Vec<&str> = got.iter().map(|d| d.header("hookline-attempt")).collect();
    assert_eq!(numbers, ["1", "2", "3", "4"]);
    for (i, wait) in SCHEDULE.iter().enumerate() {
        let gap = got[i + 1].at.duration_since(got[i].at);
        assert!(gap >= Duration::from_millis(*wait), "gap {i}: {gap:?}, shorter than the scheduled {wait} ms");
        assert!(gap < Duration::from_secs(15), "gap {i}: {gap:?}, far beyond the scheduled {wait} ms");
    }
}

/// `dead_letter_on`: a status the subscription lists dead-letters the
/// delivery at the first such answer (one attempt, recorded with its
/// status; the dead letter says why), while any other failure on the same
/// subscription is still retried; the subscription stays active.
pub async fn dead_letter_on_statuses_end_a_delivery_at_once<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let (sub, _) = s
        .subscribe(json!({"callback_url": r.url("/strict", Behaviour::Ok), "event_types": ["*"],
                          "retry_policy": fast_retry(5), "dead_letter_on": [400, 422]}))
        .await;
    let (_, shown) = s.get(&format!("/v1/subscriptions/{sub}")).await;
    assert_eq!(shown["dead_letter_on"], json!([400, 422]), "{shown}");

    r.set("/strict", Behaviour::Always(422));
    let (_, ev) = s.post("/v1/events", &json!({"type": "strict.bad", "data": {}})).await;
    let d = s.settled_deliveries(ev["event_id"].as_str().unwrap(), 1, 20).await;
    assert_eq!(d[0]["status"], "DeadLettered", "{d:?}");
    let attempts = d[0]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "not retried: {attempts:?}");
    assert_eq!(attempts[0]["status_code"], 422);
    let saga = d[0]["saga_id"].as_str().unwrap().to_string();
    let dl = eventually(10, "the dead letter", || async {
        let (st, v) = s.get(&format!("/v1/dead-letters/{saga}")).await;
        (st == 200).then_some(v)
    })
    .await;
    let reason = dl["reason"].as_str().unwrap();
    assert!(reason.contains("HTTP 422") && reason.contains("dead_letter_on"), "{dl}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(r.deliveries("/strict").len(), 1, "one request only");

    // A status not listed is retried as ever.
    r.set("/strict", Behaviour::FailFirst(1, 500));
    let (_, ev) = s.post("/v1/events", &json!({"type": "strict.flaky", "data": {}})).await;
    let d = s.settled_deliveries(ev["event_id"].as_str().unwrap(), 1, 20).await;
    assert_eq!(d[0]["status"], "Completed", "{d:?}");
    let codes: Vec<&Value> = d[0]["attempts"].as_array().unwrap().iter().map(|a| &a["status_code"]).collect();
    assert_eq!(codes, [&json!(500), &json!(200)]);
    let (_, shown) = s.get(&format!("/v1/subscriptions/{sub}")).await;
    assert_eq!(shown["active"], true, "only 410 deactivates: {shown}");
}

/// The receiver's view of one ordered partition: for each delivery in
/// arrival order, its `hookline-sequence` and whether it succeeded.
fn sequences_by_partition(deliveries: &[crate::Delivery]) -> std::collections::BTreeMap<String, Vec<(u64, bool)>> {
    let mut by: std::collections::BTreeMap<String, Vec<(u64, bool)>> = Default::default();
    for d in deliveries {
        let seq =
            d.header("hookline-sequence").parse::<u64>().unwrap_or_else(|_| panic!("no hookline-sequence: {d:?}"));
        by.entry(d.header("hookline-partition-key").to_string())
            .or_default()
            .push((seq, (200..300).contains(&d.status)));
    }
    by
}

/// Checks one partition's deliveries: numbers 1, 2, 3… each attempted only
/// once the one before succeeded (retries repeat a number, nothing goes
/// ahead or back), `expected` of them delivered, no gap, none twice.
fn assert_in_order(partition: &str, seen: &[(u64, bool)], expected: u64) {
    let mut next = 1;
    for (seq, ok) in seen {
        assert_eq!(
            *seq, next,
            "partition {partition}: number {seq} attempted while {next} was not delivered: {seen:?}"
        );
        if *ok {
            next += 1;
        }
    }
    assert_eq!(next - 1, expected, "partition {partition}: {} of {expected} delivered", next - 1);
}

/// Ordered delivery (`ordering: "partition"`) under random failures:
/// `events` events over 10 partitions, posted in turn, to a receiver that
/// fails 20% of requests. Every partition's deliveries are its events in
/// acceptance order (`hookline-sequence` 1, 2, 3…, the next attempted only
/// after the one before succeeded), none lost, none twice; different
/// partitions proceed side by side.
pub async fn ordered_partitions_deliver_in_sequence_under_random_failures<P: Pipeline>(s: &P, events: usize) {
    let r = Receiver::start().await;
    let (sub, _) = s
        .subscribe(
            json!({"callback_url": r.url("/ord", Behaviour::Ok), "event_types": ["ord.*"], "ordering": "partition",
                          "retry_policy": {"max_attempts": 50, "base_delay_ms": 10, "max_delay_ms": 40}}),
        )
        .await;
    let (_, v) = s.get(&format!("/v1/subscriptions/{sub}")).await;
    assert_eq!((v["ordering"].as_str(), v["on_dead_letter"].as_str()), (Some("partition"), Some("continue")), "{v}");
    r.set("/ord", Behaviour::FailRandomly(0.2, 500));
    let partitions = 10;
    for i in 0..events / partitions {
        for p in 0..partitions {
            let (st, v) = s
                .post(
                    "/v1/events",
                    &json!({"type": "ord.changed", "partition_key": format!("p{p}"), "data": {"p": p, "i": i}}),
                )
                .await;
            assert_eq!(st, 202, "{v}");
        }
    }
    let per = (events / partitions) as u64;
    crate::eventually(600, "every event delivered", || async { (r.successes("/ord").len() >= events).then_some(()) })
        .await;
    let all = r.deliveries("/ord");
    let failed = all.iter().filter(|d| d.status != 200).count();
    assert!(failed > 0, "the receiver failed none of {} requests", all.len());
    let by = sequences_by_partition(&all);
    assert_eq!(by.len(), partitions, "{:?}", by.keys());
    let report: Vec<String> = by
        .iter()
        .map(|(p, seen)| {
            format!("{p}: {} requests, {} delivered", seen.len(), seen.iter().filter(|(_, ok)| *ok).count())
        })
        .collect();
    for (p, seen) in &by {
        assert!(
            std::panic::catch_unwind(|| assert_in_order(p, seen, per)).is_ok(),
            "partition {p} out of order; all partitions: {report:?}"
        );
    }
    // The body is the event posted at that place: acceptance order.
    for d in r.successes("/ord") {
        let seq: u64 = d.header("hookline-sequence").parse().unwrap();
        assert_eq!(d.json()["data"]["i"].as_u64(), Some(seq - 1), "{}", String::from_utf8_lossy(&d.body));
    }
}

/// The id of the open dead letter of subscription `sub`, once there is one.
async fn open_dead_letter_of<P: Pipeline>(s: &P, sub: &str) -> String {
    crate::eventually(30, "the subscription's open dead letter", || async {
        let (_, v) = s.get("/v1/dead-letters?state=open").await;
        v["items"].as_array().and_then(|items| {
            items.iter().find(|d| d["subscription_id"] == sub).map(|d| d["id"].as_str().unwrap().to_string())
        })
    })
    .await
}

/// Behind a dead letter an ordered partition continues or blocks, as its
/// subscription says; requeuing (and delivering) or skipping the dead
/// letter releases a blocked partition, in order. An unordered subscription
/// on the same events is not held by the blocked partition, nor is another
/// partition of the blocking subscription.
pub async fn ordered_partition_blocks_or_continues_behind_a_dead_letter<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let ordered = |path: &str, on_dead_letter: &str| {
        json!({"callback_url": r.url(path, Behaviour::FailMatching("\"poison\":true".into(), 500)), "event_types": ["blk.*"],
               "ordering": "partition", "on_dead_letter": on_dead_letter, "retry_policy": fast_retry(2)})
    };
    let (block, _) = s.subscribe(ordered("/block", "block")).await;
    s.subscribe(ordered("/continue", "continue")).await;
    s.subscribe(json!({"callback_url": r.url("/free", Behaviour::Ok), "event_types": ["blk.*"]})).await;
    let post = |key: &'static str, i: u32, poison: bool| async move {
        let (st, v) = s
            .post("/v1/events", &json!({"type": "blk.x", "partition_key": key, "data": {"i": i, "poison": poison}}))
            .await;
        assert_eq!(st, 202, "{v}");
    };
    post("a", 0, false).await;
    post("a", 1, true).await;
    post("a", 2, false).await;
    post("a", 3, false).await;
    post("b", 0, false).await;
    let numbers = |path: &str| -> Vec<(String, u64)> {
        r.successes(path)
            .iter()
            .map(|d| (d.header("hookline-partition-key").to_string(), d.header("hookline-sequence").parse().unwrap()))
            .collect()
    };
    let pair = |k: &str, n: u64| (k.to_string(), n);
    // continue: the dead letter is passed over.
    crate::eventually(60, "the continuing partition past its dead letter", || async {
        let got = numbers("/continue");
        (got.contains(&pair("a", 4)) && got.contains(&pair("b", 1))).then_some(())
    })
    .await;
    let a: Vec<u64> = numbers("/continue").into_iter().filter(|(k, _)| k == "a").map(|(_, n)| n).collect();
    assert_eq!(a, [1, 3, 4], "continue: 2 dead-lettered, the rest in order");
    // The unordered subscription got every event, and the blocking one its
    // other partition, while partition a is held.
    crate::eventually(30, "the unordered subscription's deliveries", || async {
        (r.successes("/free").len() == 5 && numbers("/block").contains(&pair("b", 1))).then_some(())
    })
    .await;
    // block: 2 dead-lettered, 3 and 4 wait (and are never attempted).
    let dead_letter = open_dead_letter_of(s, &block).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let held: Vec<u64> = r
        .deliveries("/block")
        .iter()
        .filter(|d| d.header("hookline-partition-key") == "a")
        .map(|d| d.header("hookline-sequence").parse().unwrap())
        .collect();
    assert!(held.iter().all(|n| *n <= 2), "block: nothing after the dead letter was attempted: {held:?}");
    // Requeue it with the endpoint fixed: 2, then 3 and 4, in order.
    r.set("/block", Behaviour::Ok);
    let (st, v) = s
        .call("POST", &format!("/v1/dead-letters/{dead_letter}/requeue"), Some(br#"{"reason": "endpoint fixed"}"#))
        .await;
    assert!(st == 200 || st == 202, "{st} {v}");
    crate::eventually(60, "the released partition", || async {
        numbers("/block").contains(&pair("a", 4)).then_some(())
    })
    .await;
    let a: Vec<u64> = numbers("/block").into_iter().filter(|(k, _)| k == "a").map(|(_, n)| n).collect();
    assert_eq!(a, [1, 2, 3, 4], "block: released in order by the requeue");

    // Skip releases too: 5 dies, 6 waits until the dead letter is skipped.
    r.set("/block", Behaviour::FailMatching("\"poison\":true".into(), 500));
    post("a", 4, true).await;
    post("a", 5, false).await;
    let dead_letter = open_dead_letter_of(s, &block).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(!numbers("/block").contains(&pair("a", 6)), "6 waits behind the dead letter");
    let (st, v) =
        s.call("POST", &format!("/v1/dead-letters/{dead_letter}/skip"), Some(br#"{"reason": "not needed"}"#)).await;
    assert_eq!(st, 200, "{v}");
    crate::eventually(60, "the partition after the skip", || async {
        numbers("/block").contains(&pair("a", 6)).then_some(())
    })
    .await;
    let a: Vec<u64> = numbers("/block").into_iter().filter(|(k, _)| k == "a").map(|(_, n)| n).collect();
    assert_eq!(a, [1, 2, 3, 4, 6], "skip: 5 passed over, 6 released");

    // A replay goes through the lane too, under the event's own number and
    // webhook-id.
    let first = r.successes("/block").into_iter().find(|d| d.header("hookline-sequence") == "2").unwrap();
    let event_id = {
        let (_, list) = s.get(&format!("/v1/subscriptions/{block}")).await;
        assert_eq!(list["on_dead_letter"], "block");
        let (_, v) = s.get("/v1/dead-letters?state=requeued").await;
        v["items"].as_array().unwrap().iter().find(|d| d["subscription_id"] == block.as_str()).unwrap()["event_id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    r.set("/block", Behaviour::Ok);
    let (st, v) = s
        .call(
            "POST",
            &format!("/v1/events/{event_id}/replay"),
            Some(format!(r#"{{"reason": "re-sync", "subscription_id": "{block}"}}"#).as_bytes()),
        )
        .await;
    assert!(st == 200 || st == 202, "{st} {v}");
    let again = crate::eventually(30, "the replayed delivery", || async {
        let ok = r.successes("/block");
        (ok.iter().filter(|d| d.header("hookline-sequence") == "2").count() == 2).then(|| ok.last().unwrap().clone())
    })
    .await;
    assert_eq!(again.header("hookline-sequence"), "2");
    assert_eq!(again.header("webhook-id"), first.header("webhook-id"));
}

/// Ordered delivery through crashes, under a `max_in_flight` of 3: for
/// each failpoint, the stage that reaches it next crashes there (`hookline serve` is killed, a Lambda
/// invocation fails and is retried), in the middle of 250 events over 5
/// partitions whose receiver fails 20% of requests. Every partition is
/// still delivered in order, nothing lost; a crash after a POST may repeat
/// that delivery (same number, at least once), never an earlier one or a
/// later one ahead of time.
pub async fn ordered_delivery_survives_crashes_in_the_middle<P: Pipeline>(s: &mut P, failpoints: &[&str]) {
    let r = Receiver::start().await;
    // With a max_in_flight: ordering and the per-subscription limits together.
    s.subscribe(json!({"callback_url": r.url("/oc", Behaviour::Ok), "event_types": ["oc.*"], "ordering": "partition",
                       "max_in_flight": 3, "retry_policy": {"max_attempts": 50, "base_delay_ms": 10, "max_delay_ms": 40}}))
        .await;
    r.set("/oc", Behaviour::FailRandomly(0.2, 500));
    let partitions = 5;
    let mut posted = vec![0u64; partitions];
    async fn post<P: Pipeline>(s: &P, posted: &mut [u64], p: usize) {
        let body = json!({"type": "oc.changed", "partition_key": format!("k{p}"), "data": {"i": posted[p]}});
        posted[p] += 1;
        let (st, v) = s.post("/v1/events", &body).await;
        assert_eq!(st, 202, "{v}");
    }
    for p in 0..partitions * 5 {
        post(s, &mut posted, p % partitions).await;
    }
    let delivered = |posted: Vec<u64>| {
        let r = &r;
        async move {
            let by = sequences_by_partition(&r.successes("/oc"));
            let up_to =
                |p: usize| by.get(&format!("k{p}")).and_then(|seen| seen.iter().map(|(n, _)| *n).max()).unwrap_or(0);
            (0..posted.len()).all(|p| up_to(p) >= posted[p]).then_some(())
        }
    };
    for fp in failpoints {
        // Quiet first, so that the one event posted next is what reaches
        // the failpoint (not a request of the ones before, while the POST
        // is in flight).
        crate::eventually(300, "the events so far delivered", || delivered(posted.clone())).await;
        s.crash_at(fp).await;
        post(s, &mut posted, 0).await;
        s.recover().await;
        for p in 0..partitions * 10 {
            post(s, &mut posted, p % partitions).await;
        }
    }
    let total: u64 = posted.iter().sum();
    let delivered = || {
        let by = sequences_by_partition(&r.successes("/oc"));
        (0..partitions)
            .map(|p| by.get(&format!("k{p}")).and_then(|seen| seen.iter().map(|(n, _)| *n).max()).unwrap_or(0))
            .collect::<Vec<u64>>()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    while delivered().iter().sum::<u64>() < total {
        if std::time::Instant::now() > deadline {
            // Where each partition stopped, and the state of the saga it waits on.
            let mut report = Vec::new();
            for (p, n) in delivered().iter().enumerate() {
                if *n < posted[p] {
                    let (_, list) = s.get("/v1/dead-letters?state=open").await;
                    report.push(format!("k{p}: delivered up to {n} of {}; open dead letters: {list}", posted[p]));
                }
            }
            panic!(
                "not every event delivered after the crashes {failpoints:?}: {report:?}\nlogs:\n{}",
                s.logs()
                    .await
                    .lines()
                    .filter(|l| l.contains("WARN") || l.contains("ERROR"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (p, seen) in sequences_by_partition(&r.deliveries("/oc")) {
        let k: usize = p.trim_start_matches('k').parse().unwrap();
        let mut next = 1;
        for (seq, ok) in &seen {
            assert!(*seq == next || *seq + 1 == next, "partition {p}: number {seq} while {next} was next: {seen:?}");
            if *seq == next && *ok {
                next += 1;
            }
        }
        assert_eq!(next - 1, posted[k], "partition {p}: all delivered");
    }
    assert!(r.max_concurrent("/oc") <= 3, "max_in_flight 3, yet {} at once", r.max_concurrent("/oc"));
}

// ------------------------------------------------- Part A: finding events
// GET /v1/events (issue 11): every filter, empty results, a cursor walk
// while events arrive, bad input, and the outcome filter after a failing
// and a dead-lettered delivery.

/// Every item of `GET /v1/events?<filters>`, following `next_cursor`
/// `limit` at a time; before each page after the first, `between` runs
/// (posting new events while the walk goes on).
async fn walk_events<P: Pipeline, F, Fut>(s: &P, filters: &str, limit: usize, mut between: F) -> Vec<Value>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let path = match &cursor {
            None => format!("/v1/events?{filters}&limit={limit}"),
            Some(c) => format!("/v1/events?{filters}&limit={limit}&cursor={c}"),
        };
        let (st, v) = s.get(&path).await;
        assert_eq!(st, 200, "{path}: {v}");
        let items = v["items"].as_array().unwrap_or_else(|| panic!("{path}: {v}"));
        assert!(items.len() <= limit, "{path}: {} items", items.len());
        out.extend(items.iter().cloned());
        match v["next_cursor"].as_str() {
            Some(c) => {
                cursor = Some(c.to_string());
                between().await;
            }
            None => {
                assert!(v["next_cursor"].is_null(), "{v}");
                return out;
            }
        }
    }
    panic!("{filters}: no last page after 1000 pages");
}

/// The ids of a list of items.
fn ids_of(items: &[Value]) -> Vec<String> {
    items.iter().map(|i| i["id"].as_str().unwrap().to_string()).collect()
}

/// `GET /v1/events?<filters>` in one page (at most 1000), as ids.
async fn find_ids<P: Pipeline>(s: &P, filters: &str) -> Vec<String> {
    ids_of(&walk_events(s, filters, 1000, || async {}).await)
}

fn enc(t: &str) -> String {
    t.replace(':', "%3A").replace('+', "%2B")
}

pub async fn events_are_found_by_every_filter_and_cursor_walks_see_each_once<P: Pipeline>(s: &P) {
    let tag = shared::ids::random_token("").chars().filter(char::is_ascii_alphanumeric).take(10).collect::<String>();
    let tenant = format!("acme-{tag}");
    let since = enc(&(chrono::Utc::now() - chrono::Duration::seconds(2)).to_rfc3339());
    let post = |body: Value| async move {
        let (st, v) = s.post("/v1/events", &body).await;
        assert_eq!(st, 202, "{v}");
        // Apart by at least a millisecond: the listing's order is by time.
        tokio::time::sleep(Duration::from_millis(3)).await;
        v["event_id"].as_str().unwrap().to_string()
    };
    let ty = |t: &str| format!("find{tag}.{t}");
    let a = post(json!({"type": ty("created"), "tenant_id": tenant, "partition_key": "k1", "data": {}})).await;
    let b = post(json!({"type": ty("paid"), "tenant_id": tenant, "partition_key": "k1", "data": {}})).await;
    let c = post(json!({"type": ty("created"), "partition_key": "k1", "data": {}})).await;
    let d = post(json!({"type": ty("created"), "tenant_id": format!("globex-{tag}"), "data": {}})).await;
    let e = post(json!({"type": format!("find{tag}x.created"), "tenant_id": tenant, "data": {}})).await;

    // Each filter, newest first.
    let exact = format!("event_type={}&since={since}", ty("created"));
    assert_eq!(find_ids(s, &exact).await, [d.as_str(), c.as_str(), a.as_str()]);
    let pattern = format!("event_type=find{tag}.*&since={since}");
    assert_eq!(
        find_ids(s, &pattern).await,
        [d.as_str(), c.as_str(), b.as_str(), a.as_str()],
        "find{tag}x.created is not under find{tag}.*"
    );
    assert_eq!(find_ids(s, &format!("tenant_id={tenant}")).await, [e.as_str(), b.as_str(), a.as_str()]);
    assert_eq!(find_ids(s, &format!("tenant_id={tenant}&event_type=find{tag}.*")).await, [b.as_str(), a.as_str()]);
    assert_eq!(
        find_ids(s, &format!("tenant_id={tenant}&partition_key=k1")).await,
        [b.as_str(), a.as_str()],
        "the tenant's partition"
    );
    assert_eq!(
        find_ids(s, &format!("partition_key=k1&event_type={}&since={since}", ty("created"))).await,
        [c.as_str()],
        "without tenant_id: the partition of events without a tenant"
    );
    // An item: the event without its body.
    let (st, v) = s.get(&format!("/v1/events?tenant_id={tenant}&event_type={}", ty("created"))).await;
    assert_eq!(st, 200);
    let item = &v["items"][0];
    assert_eq!(item["id"], a.as_str());
    assert_eq!(item["type"], ty("created").as_str());
    assert_eq!(item["tenant_id"], tenant.as_str());
    assert_eq!(item["partition_key"], "k1");
    assert!(item["sequence"].is_null(), "a native envelope has no producer sequence: {item}");
    assert_eq!(item["format"], "native");
    assert!(item["outcome"].is_null() && item.get("body").is_none() && item.get("data").is_none(), "{item}");
    assert!(item["received_at"].is_string() && item["occurred_at"].is_string(), "{item}");
    assert!(v["next_cursor"].is_null());
    // A time range (since inclusive, until exclusive) around b alone.
    let at = |i: &Value| chrono::DateTime::parse_from_rfc3339(i["received_at"].as_str().unwrap()).unwrap();
    let all = walk_events(s, &format!("tenant_id={tenant}"), 100, || async {}).await;
    let b_at = at(&all[1]);
    let range = format!(
        "tenant_id={tenant}&since={}&until={}",
        enc(&b_at.to_rfc3339()),
        enc(&(b_at + chrono::Duration::milliseconds(1)).to_rfc3339())
    );
    assert_eq!(find_ids(s, &range).await, [b.as_str()]);

    // Nothing matches: an empty page, not an error.
    for filters in [
        format!("tenant_id=nobody-{tag}"),
        format!("event_type=nothing{tag}.*&since={since}"),
        format!("tenant_id={tenant}&partition_key=k2"),
        format!("tenant_id={tenant}&outcome=dead_lettered"),
    ] {
        let (st, v) = s.get(&format!("/v1/events?{filters}")).await;
        assert_eq!((st, &v["items"], &v["next_cursor"]), (200, &json!([]), &Value::Null), "{filters}: {v}");
    }

    // Bad input, each naming its field.
    let cursor = {
        let (_, v) = s.get(&format!("/v1/events?tenant_id={tenant}&limit=1")).await;
        v["next_cursor"].as_str().unwrap().to_string()
    };
    let old = enc(&(chrono::Utc::now() - chrono::Duration::days(400)).to_rfc3339());
    for (query, status, field) in [
        (format!("since={since}&until={}", enc("2000-01-01T00:00:00Z")), 422, "until"),
        (format!("since={old}"), 422, "since"),
        ("since=yesterday".to_string(), 400, "since"),
        ("outcome=lost".to_string(), 400, "outcome"),
        ("limit=0".to_string(), 400, "limit"),
        ("limit=1001".to_string(), 400, "limit"),
        ("cursor=not-a-cursor".to_string(), 400, "cursor"),
        (format!("tenant_id=globex-{tag}&cursor={cursor}"), 400, "cursor"),
        ("event_type=a%20b".to_string(), 400, "event_type"),
        ("event_type=order*".to_string(), 400, "event_type"),
    ] {
        let (st, v) = s.get(&format!("/v1/events?{query}")).await;
        assert_eq!((st, v["error"]["field"].as_str()), (status, Some(field)), "{query}: {v}");
    }

    // A cursor walk while new events arrive returns every event that was
    // there when it started exactly once (newer ones are ahead of it).
    let walk_type = format!("walk{tag}");
    let mut before = Vec::new();
    for i in 0..12 {
        let t = if i % 2 == 0 { format!("{walk_type}.even") } else { format!("{walk_type}.odd") };
        let body = if i % 3 == 0 {
            json!({"type": t, "data": {}})
        } else {
            json!({"type": t, "tenant_id": tenant, "data": {}})
        };
        before.push(post(body).await);
    }
    let posted_during = std::sync::Mutex::new(Vec::new());
    for (filters, limit) in [
        (format!("event_type={walk_type}.*&since={since}"), 5),
        (format!("tenant_id={tenant}&event_type={walk_type}.*"), 2),
        (format!("since={since}"), 3),
    ] {
        let got = ids_of(
            &walk_events(s, &filters, limit, || async {
                let t = format!("{walk_type}.during");
                let body = json!({"type": t, "tenant_id": tenant, "data": {}});
                let (st, v) = s.post("/v1/events", &body).await;
                assert_eq!(st, 202);
                posted_during.lock().unwrap().push(v["event_id"].as_str().unwrap().to_string());
            })
            .await,
        );
        let mut unique = got.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), got.len(), "{filters}: an event listed twice: {got:?}");
        let want: Vec<&String> = if filters.starts_with("tenant_id") {
            before.iter().enumerate().filter(|(i, _)| i % 3 != 0).map(|(_, id)| id).collect()
        } else {
            before.iter().collect()
        };
        for id in want {
            assert_eq!(got.iter().filter(|g| *g == id).count(), 1, "{filters}: {id} not listed once in {got:?}");
        }
        if filters.starts_with("since") {
            for id in [&a, &b, &c, &d, &e] {
                assert!(got.contains(id), "{filters}: {id} missing");
            }
        }
    }
}

pub async fn events_are_found_by_delivery_outcome<P: Pipeline>(s: &P) {
    let tag = shared::ids::random_token("").chars().filter(char::is_ascii_alphanumeric).take(10).collect::<String>();
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/flaky", Behaviour::Ok), "event_types": [format!("flaky{tag}.*")],
        "retry_policy": fast_retry(3)}))
        .await;
    s.subscribe(json!({"callback_url": r.url("/down", Behaviour::Ok), "event_types": [format!("down{tag}.*")],
        "retry_policy": fast_retry(2)}))
        .await;
    s.subscribe(json!({"callback_url": r.url("/fine", Behaviour::Ok), "event_types": [format!("fine{tag}.*")]})).await;
    r.set("/flaky", Behaviour::FailFirst(1, 500));
    r.set("/down", Behaviour::Always(500));
    let tenant = format!("t-{tag}");
    let mut ids = Vec::new();
    for t in ["flaky", "down", "fine"] {
        let (st, v) =
            s.post("/v1/events", &json!({"type": format!("{t}{tag}.x"), "tenant_id": tenant, "data": {}})).await;
        assert_eq!(st, 202, "{v}");
        ids.push(v["event_id"].as_str().unwrap().to_string());
    }
    let (flaky, down, fine) = (&ids[0], &ids[1], &ids[2]);
    assert_eq!(s.settled_deliveries(flaky, 1, 30).await[0]["status"], "Completed");
    assert_eq!(s.settled_deliveries(down, 1, 30).await[0]["status"], "DeadLettered");
    assert_eq!(s.settled_deliveries(fine, 1, 30).await[0]["status"], "Completed");
    let found = |q: String| async move {
        // The dead letter is put after the saga's transition: wait for it.
        eventually(20, &q.clone(), || {
            let q = q.clone();
            async move {
                let (st, v) = s.get(&format!("/v1/events?{q}")).await;
                assert_eq!(st, 200, "{v}");
                Some(v["items"].as_array().unwrap().clone())
            }
        })
        .await
    };
    let want = |items: &[Value], expect: &[(&String, &str)]| {
        let got: Vec<(String, String)> = items
            .iter()
            .map(|i| (i["id"].as_str().unwrap().to_string(), i["outcome"].as_str().unwrap_or("null").to_string()))
            .collect();
        let expect: Vec<(String, String)> = expect.iter().map(|(i, o)| (i.to_string(), o.to_string())).collect();
        got == expect
    };
    let all = found(format!("tenant_id={tenant}")).await;
    assert!(
        want(&all, &[(fine, "null"), (down, "dead_lettered"), (flaky, "failed")]),
        "every event with its outcome: {all:?}"
    );
    let failed = found(format!("tenant_id={tenant}&outcome=failed")).await;
    assert!(want(&failed, &[(down, "dead_lettered"), (flaky, "failed")]), "failed finds dead-lettered too: {failed:?}");
    let dead = found(format!("tenant_id={tenant}&outcome=dead_lettered")).await;
    assert!(want(&dead, &[(down, "dead_lettered")]), "{dead:?}");
    let since = enc(&(chrono::Utc::now() - chrono::Duration::minutes(5)).to_rfc3339());
    let dead = found(format!("outcome=dead_lettered&event_type=down{tag}.*&since={since}")).await;
    assert!(want(&dead, &[(down, "dead_lettered")]), "without a tenant: {dead:?}");
    let failed = found(format!("outcome=failed&since={since}&event_type=flaky{tag}.x")).await;
    assert!(want(&failed, &[(flaky, "failed")]), "{failed:?}");
}

// ===================================================================
// Audit trail, failing endpoints, operational events (issue 11, helper C)
// ===================================================================

/// A query value with `:` and `/` escaped (actors are ARNs).
fn q(v: &str) -> String {
    v.replace('%', "%25").replace(':', "%3A").replace('/', "%2F").replace(' ', "%20").replace('+', "%2B")
}

/// Every record of `GET /v1/audit?<query>`, all pages followed in pages of
/// `limit`; fails if a record comes twice or the order is not newest first.
async fn audit_all<P: Pipeline>(s: &P, query: &str, limit: usize) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..200 {
        let c = cursor.as_deref().map(|c| format!("&cursor={c}")).unwrap_or_default();
        let (st, v) = s.get(&format!("/v1/audit?{query}&limit={limit}{c}")).await;
        assert_eq!(st, 200, "GET /v1/audit?{query}: {v}");
        for r in v["items"].as_array().unwrap() {
            assert!(!out.iter().any(|o| o["id"] == r["id"]), "listed twice: {r}");
            out.push(r.clone());
        }
        match v["next_cursor"].as_str() {
            Some(n) => cursor = Some(n.to_string()),
            None => break,
        }
    }
    let times: Vec<chrono::DateTime<chrono::Utc>> =
        out.iter().map(|r| r["at"].as_str().unwrap().parse().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "newest first: {times:?}");
    out
}

/// The actions of `records`, sorted, to compare as a multiset.
fn actions(records: &[Value]) -> Vec<String> {
    let mut a: Vec<String> = records.iter().map(|r| r["action"].as_str().unwrap().to_string()).collect();
    a.sort();
    a
}

/// Every audited action leaves exactly one record, with the caller as the
/// actor (its API key's name; the IAM principal on AWS) and Hookline's own
/// (breaker flips) as `system`; the body's `actor` is ignored. `GET
/// /v1/audit` filters by action, actor, subscription and time, pages with a
/// cursor that lists every record once, and refuses bad input naming the
/// field. Run with a breaker that opens after 3 failures and cools down
/// for 1 s.
pub async fn audit_records_every_action_once_with_its_actor<P: Pipeline>(s: &P) {
    let me = s.actor();
    let started = chrono::Utc::now() - chrono::Duration::seconds(1);
    let r = Receiver::start().await;
    let (a, _) = s.subscribe(json!({"callback_url": r.url("/aud-a", Behaviour::Ok), "event_types": ["aud.a"]})).await;
    let (st, v) = s.call("PATCH", &format!("/v1/subscriptions/{a}"), Some(br#"{"description": "audited"}"#)).await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = s.post(&format!("/v1/subscriptions/{a}/rotate-secret"), &json!({})).await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = s.post(&format!("/v1/subscriptions/{a}/verify"), &json!({})).await;
    assert_eq!((st, &v["verified"]), (200, &json!(true)), "{v}");

    // A failing endpoint: two dead letters, and the breaker opens.
    let (b, _) = s
        .subscribe(json!({"callback_url": r.url("/aud-b", Behaviour::Ok), "event_types": ["aud.b"], "retry_policy": fast_retry(3)}))
        .await;
    r.set("/aud-b", Behaviour::Always(500));
    let batch = json!([{"id": "aud-e1", "type": "aud.b", "data": 1}, {"id": "aud-e2", "type": "aud.b", "data": 2}]);
    let (st, v) = s.post("/v1/events/batch", &batch).await;
    assert_eq!(st, 202, "{v}");
    // Generous waits: on the emulator, one slow stretch (another test's
    // large transactions) once held these past 60 s in CI.
    let d1 = s.settled_deliveries("aud-e1", 1, 120).await;
    let d2 = s.settled_deliveries("aud-e2", 1, 120).await;
    assert_eq!((d1[0]["status"].as_str(), d2[0]["status"].as_str()), (Some("DeadLettered"), Some("DeadLettered")));
    let (dl1, dl2) = (d1[0]["saga_id"].as_str().unwrap().to_string(), d2[0]["saga_id"].as_str().unwrap().to_string());
    for dl in [&dl1, &dl2] {
        eventually(20, "the dead letter", || async {
            (s.get(&format!("/v1/dead-letters/{dl}")).await.0 == 200).then_some(())
        })
        .await;
    }
    r.set("/aud-b", Behaviour::Ok);
    // Past the breaker's cool-down (at most 2 s here), so the requeued
    // delivery is its probe: a job that meets an open breaker waits at most
    // until its saga's last scheduled attempt, which for a requeue of this
    // fast schedule comes before the probe (it would be a `breaker_open`
    // dead letter; see wait_scenarios).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    // The body's actor is accepted and ignored; a reason is required.
    let (st, v) = s.post(&format!("/v1/dead-letters/{dl1}/requeue"), &json!({"actor": "mallory"})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("reason")), "{v}");
    let (st, v) = s
        .post(&format!("/v1/dead-letters/{dl1}/requeue"), &json!({"reason": "endpoint fixed", "actor": "mallory"}))
        .await;
    assert_eq!(st, 202, "{v}");
    let (st, v) = s.post(&format!("/v1/dead-letters/{dl2}/skip"), &json!({"reason": "not needed"})).await;
    assert_eq!(st, 200, "{v}");
    // The requeued delivery waits out the cool-down, probes, closes the breaker.
    s.settled_deliveries("aud-e1", 2, 60).await;
    let (st, v) = s.post("/v1/events/aud-e1/replay", &json!({"subscription_id": b})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("reason")), "{v}");
    let (st, v) =
        s.post("/v1/events/aud-e1/replay", &json!({"subscription_id": b, "reason": "customer lost data"})).await;
    assert_eq!(st, 202, "{v}");
    s.settled_deliveries("aud-e1", 3, 60).await;
    let (st, _) = s.call("DELETE", &format!("/v1/subscriptions/{a}"), None).await;
    assert_eq!(st, 204);

    // Subscription a: each of its actions once, all by the caller.
    let of_a = eventually(20, "a's records", || async {
        let recs = audit_all(s, &format!("subscription_id={a}"), 100).await;
        (recs.len() >= 6).then_some(recs)
    })
    .await;
    assert_eq!(
        actions(&of_a),
        [
            "subscription.created",
            "subscription.deleted",
            "subscription.secret_rotated",
            "subscription.updated",
            "subscription.verified",
            "subscription.verified"
        ],
        "{of_a:#?}"
    );
    assert!(of_a.iter().all(|r| r["actor"] == me.as_str()), "{of_a:#?}");
    assert!(of_a.iter().all(|r| r["subscription_id"] == a.as_str()));
    let updated = of_a.iter().find(|r| r["action"] == "subscription.updated").unwrap();
    assert_eq!(updated["details"]["changed"], json!(["description"]), "{updated}");
    let rotated = of_a.iter().find(|r| r["action"] == "subscription.secret_rotated").unwrap();
    assert!(!rotated.to_string().contains("whsec_"), "no secret in the trail: {rotated}");

    // Subscription b: the operator's actions by the caller, the breaker's by the system.
    let of_b = eventually(20, "b's records", || async {
        let recs = audit_all(s, &format!("subscription_id={b}"), 2).await;
        (recs.len() >= 7).then_some(recs)
    })
    .await;
    assert_eq!(
        actions(&of_b),
        [
            "breaker.closed",
            "breaker.opened",
            "dead_letter.requeued",
            "dead_letter.skipped",
            "event.replayed",
            "subscription.created",
            "subscription.verified"
        ],
        "{of_b:#?}"
    );
    for rec in &of_b {
        let expected = if rec["action"].as_str().unwrap().starts_with("breaker.") { "system" } else { me.as_str() };
        assert_eq!(rec["actor"], expected, "{rec}");
    }
    let requeued = of_b.iter().find(|r| r["action"] == "dead_letter.requeued").unwrap();
    assert_eq!(
        (requeued["reason"].as_str(), requeued["dead_letter_id"].as_str()),
        (Some("endpoint fixed"), Some(dl1.as_str()))
    );
    assert_eq!(requeued["event_id"], "aud-e1");
    let replayed = of_b.iter().find(|r| r["action"] == "event.replayed").unwrap();
    assert_eq!(
        (replayed["reason"].as_str(), replayed["event_id"].as_str()),
        (Some("customer lost data"), Some("aud-e1"))
    );
    // A count and the one saga, never a list that could outgrow an audit item.
    assert_eq!(replayed["details"]["sagas"], 1, "{replayed}");
    assert!(replayed["details"]["saga_id"].is_string(), "{replayed}");
    let created = of_b.iter().find(|r| r["action"] == "subscription.created").unwrap();
    assert_eq!(created["reason"], Value::Null);

    // Filters, alone and together.
    let by = |query: String| async move { audit_all(s, &query, 3).await };
    let skipped = by(format!("subscription_id={b}&action=dead_letter.skipped")).await;
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0]["dead_letter_id"], dl2.as_str());
    assert_eq!(actions(&by(format!("subscription_id={b}&actor=system")).await), ["breaker.closed", "breaker.opened"]);
    assert_eq!(by(format!("subscription_id={b}&actor={}", q(&me))).await.len(), 5);
    let mine = by(format!("actor={}&since={}", q(&me), q(&started.to_rfc3339()))).await;
    assert!(mine.len() >= 11 && mine.iter().all(|r| r["actor"] == me.as_str()), "{}", mine.len());
    let opened = by(format!("action=breaker.opened&since={}", q(&started.to_rfc3339()))).await;
    assert!(opened.iter().any(|r| r["subscription_id"] == b.as_str()));
    assert!(opened.iter().all(|r| r["action"] == "breaker.opened"));
    let before = by(format!("subscription_id={b}&until={}", q(&started.to_rfc3339()))).await;
    assert!(before.is_empty(), "nothing before the test: {before:?}");
    let (st, v) = s.get("/v1/audit?actor=key%3Anobody").await;
    assert_eq!((st, v["items"].as_array().map(Vec::len), &v["next_cursor"]), (200, Some(0), &Value::Null));

    // Pages of 2 walk a's records exactly once, in the same order as one page.
    let paged = audit_all(s, &format!("subscription_id={a}"), 2).await;
    assert_eq!(paged.iter().map(|r| &r["id"]).collect::<Vec<_>>(), of_a.iter().map(|r| &r["id"]).collect::<Vec<_>>());

    // Bad input names the field.
    for (query, status, field) in [
        ("action=subscription.create", 400, "action"),
        ("limit=0", 400, "limit"),
        ("cursor=not-a-cursor", 400, "cursor"),
        ("since=yesterday", 400, "since"),
        ("since=2026-11-26T10:00:00Z&until=2026-11-25T10:00:00Z", 422, "until"),
        ("since=2000-01-01T00:00:00Z", 422, "since"),
    ] {
        let (st, v) = s.get(&format!("/v1/audit?{query}")).await;
        assert_eq!((st, v["error"]["field"].as_str()), (status, Some(field)), "{query}: {v}");
    }
    let (_, v) = s.get(&format!("/v1/audit?subscription_id={a}&limit=2")).await;
    let c = v["next_cursor"].as_str().expect("a second page");
    let (st, v) = s.get(&format!("/v1/audit?subscription_id={b}&limit=2&cursor={c}")).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("cursor")), "a cursor of other filters: {v}");
}

/// Operational events delivered to `path` of `r`, of `event_type`.
fn ops_events(r: &Receiver, path: &str, event_type: &str) -> Vec<Value> {
    r.deliveries(path).iter().map(|d| d.json()).filter(|v| v["type"] == event_type).collect()
}

/// A subscription whose deliveries have all failed for the configured time
/// (3 s here) is disabled (`disabled_reason`, `disabled_at`, an audit
/// record by `system`), and a subscriber of `hookline.*` receives
/// `hookline.dead_letter.created` and `hookline.subscription.disabled`;
/// re-enabling it (PATCH `active: true`) re-runs verification, publishes
/// `hookline.subscription.enabled`, and starts a new failing run.
pub async fn failing_endpoint_is_disabled_and_operational_events_are_published<P: Pipeline>(s: &P) {
    let me = s.actor();
    let r = Receiver::start().await;
    let (ops, _) =
        s.subscribe(json!({"callback_url": r.url("/ops", Behaviour::Ok), "event_types": ["hookline.*"]})).await;
    // `*` means every producer event: Hookline's own go only to patterns naming them.
    s.subscribe(json!({"callback_url": r.url("/everything", Behaviour::Ok), "event_types": ["*"]})).await;
    // Producers cannot forge an operational event.
    let (st, v) = s.post("/v1/events", &json!({"type": "hookline.subscription.disabled", "data": {}})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("type")), "{v}");
    let (sub, _) = s
        .subscribe(json!({"callback_url": r.url("/down", Behaviour::Ok), "event_types": ["fail.*"], "retry_policy": fast_retry(2)}))
        .await;
    r.set("/down", Behaviour::Always(503));
    let (st, _) = s.post("/v1/events", &json!({"id": "fx-1", "type": "fail.one", "data": 1})).await;
    assert_eq!(st, 202);
    let d = s.settled_deliveries("fx-1", 2, 30).await;
    let d: Vec<&Value> = d.iter().filter(|x| x["subscription_id"] == sub.as_str()).collect();
    assert_eq!(d[0]["status"], "DeadLettered");
    let dead = d[0]["saga_id"].as_str().unwrap().to_string();
    let created = eventually(30, "hookline.dead_letter.created delivered", || async {
        ops_events(&r, "/ops", "hookline.dead_letter.created").into_iter().find(|e| e["data"]["event_id"] == "fx-1")
    })
    .await;
    assert_eq!(created["data"]["subscription_id"], sub.as_str());
    assert_eq!(created["data"]["dead_letter_id"], dead.as_str());
    assert_eq!(created["data"]["event_type"], "fail.one");
    assert_eq!(created["data"]["attempts"], 2);
    assert!(created["data"]["last_error"].as_str().unwrap().contains("503"), "{created}");
    let (_, v) = s.get(&format!("/v1/subscriptions/{sub}")).await;
    assert_eq!((&v["active"], &v["disabled_reason"]), (&json!(true), &Value::Null), "failing for less than 3 s: {v}");

    // Past the failing period, the next failure disables it.
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let (st, _) = s.post("/v1/events", &json!({"id": "fx-2", "type": "fail.two", "data": 2})).await;
    assert_eq!(st, 202);
    let v = eventually(30, "the failing subscription disabled", || async {
        let (_, v) = s.get(&format!("/v1/subscriptions/{sub}")).await;
        (v["active"] == false).then_some(v)
    })
    .await;
    assert_eq!(v["disabled_reason"], "failing", "{v}");
    assert!(v["disabled_at"].is_string(), "{v}");
    let disabled = eventually(30, "hookline.subscription.disabled delivered", || async {
        ops_events(&r, "/ops", "hookline.subscription.disabled")
            .into_iter()
            .find(|e| e["data"]["subscription_id"] == sub.as_str())
    })
    .await;
    assert_eq!(disabled["data"]["reason"], "failing");
    assert!(disabled["data"]["failing_since"].is_string(), "{disabled}");
    assert!(disabled["data"]["last_error"].as_str().unwrap().contains("503"), "{disabled}");
    let recs = audit_all(s, &format!("subscription_id={sub}&action=subscription.disabled"), 10).await;
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0]["actor"], "system");

    // Re-enabled: verified again, announced, and not disabled again at once.
    r.set("/down", Behaviour::Ok);
    let verifications = r.requests("/down").iter().filter(|d| d.is_verification()).count();
    let enabling_at = chrono::Utc::now().to_rfc3339();
    let (st, v) = s.call("PATCH", &format!("/v1/subscriptions/{sub}"), Some(br#"{"active": true}"#)).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!((&v["active"], &v["disabled_reason"], &v["disabled_at"]), (&json!(true), &Value::Null, &Value::Null));
    eventually(20, "re-verified", || async {
        let (_, v) = s.get(&format!("/v1/subscriptions/{sub}")).await;
        (v["verified"] == true).then_some(())
    })
    .await;
    assert_eq!(
        r.requests("/down").iter().filter(|d| d.is_verification()).count(),
        verifications + 1,
        "a new handshake"
    );
    eventually(30, "hookline.subscription.enabled delivered", || async {
        ops_events(&r, "/ops", "hookline.subscription.enabled")
            .into_iter()
            .find(|e| e["data"]["subscription_id"] == sub.as_str())
    })
    .await;
    let recs = eventually(20, "the enable and its verification audited", || async {
        let recs = audit_all(s, &format!("subscription_id={sub}&since={}", q(&enabling_at)), 10).await;
        (recs.iter().filter(|r| r["action"] == "subscription.verified").count() == 1).then_some(recs)
    })
    .await;
    let enabled: Vec<&Value> = recs.iter().filter(|r| r["action"] == "subscription.enabled").collect();
    assert_eq!(enabled.len(), 1, "{recs:?}");
    assert_eq!(enabled[0]["actor"], me.as_str());
    let (st, _) = s.post("/v1/events", &json!({"id": "fx-3", "type": "fail.three", "data": 3})).await;
    assert_eq!(st, 202);
    let d = s.settled_deliveries("fx-3", 2, 30).await;
    assert!(d.iter().all(|x| x["status"] == "Completed"), "{d:?}");
    let (_, v) = s.get(&format!("/v1/subscriptions/{sub}")).await;
    assert_eq!(v["active"], true);
    assert_eq!(ops_events(&r, "/ops", "hookline.subscription.disabled").len(), 1, "disabled once");
    // The ops channel never hears of its own events' dead letters.
    assert!(ops_events(&r, "/ops", "hookline.dead_letter.created")
        .iter()
        .all(|e| !e["data"]["event_type"].as_str().unwrap_or("").starts_with("hookline.")));
    let (_, v) = s.get(&format!("/v1/subscriptions/{ops}")).await;
    assert_eq!(v["active"], true);
    let everything: Vec<Value> = r.deliveries("/everything").iter().map(|d| d.json()).collect();
    assert!(everything.iter().any(|e| e["id"] == "fx-3"), "the `*` subscriber gets producer events");
    assert!(everything.iter().all(|e| !e["type"].as_str().unwrap_or("").starts_with("hookline.")), "{everything:?}");
}

// ---------------------------------------------------------------------------
// Issue 11, part B: dead letters at scale, bulk requeue/skip jobs, replays.

/// Every item of a dead-letter listing at `path` (with its query string),
/// following `next_cursor` page by page (`limit` per page).
pub async fn all_dead_letters<P: Pipeline>(s: &P, query: &str, limit: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10_000 {
        let c = cursor.as_deref().map(|c| format!("&cursor={c}")).unwrap_or_default();
        let (st, v) = s.get(&format!("/v1/dead-letters?limit={limit}&{query}{c}")).await;
        assert_eq!(st, 200, "{query}: {v}");
        out.extend(v["items"].as_array().unwrap().iter().cloned());
        match v["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return out,
        }
    }
    panic!("too many pages")
}

/// Posts `n` events of `event_type` (tenant `tenant` if any) in batches of
/// 100; returns their ids in order.
pub async fn post_many<P: Pipeline>(s: &P, n: usize, event_type: &str, tenant: Option<&str>) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let batch: Vec<Value> = chunk
            .iter()
            .map(|i| match tenant {
                Some(t) => json!({"type": event_type, "tenant_id": t, "data": {"i": i}}),
                None => json!({"type": event_type, "data": {"i": i}}),
            })
            .collect();
        let (st, v) = s.call("POST", "/v1/events/batch", Some(&serde_json::to_vec(&batch).unwrap())).await;
        assert_eq!(st, 202, "{v}");
        ids.extend(v["results"].as_array().unwrap().iter().map(|r| r["event_id"].as_str().unwrap().to_string()));
    }
    ids
}

/// Waits until `query` lists exactly `n` dead letters. Each look lists
/// them all (on AWS, pages of emulator queries over a growing table), so it
/// looks twice a second rather than every 25 ms, leaving the emulator to
/// the pipeline it waits for.
pub async fn wait_dead_letters<P: Pipeline>(s: &P, query: &str, n: usize, secs: u64) -> Vec<Value> {
    let what = format!("{n} dead letters for {query}");
    eventually_every(secs, Duration::from_millis(500), &what, || async {
        let all = all_dead_letters(s, query, 1000).await;
        (all.len() == n).then_some(all)
    })
    .await
}

/// Follows a job until it is no longer running (looking 4 times a second:
/// a bulk job runs for minutes on the emulator, which every look also
/// serves); returns it.
pub async fn finished_job<P: Pipeline>(s: &P, job_id: &str, secs: u64) -> Value {
    eventually_every(secs, Duration::from_millis(250), "the job finished", || async {
        let (st, v) = s.get(&format!("/v1/jobs/{job_id}")).await;
        assert_eq!(st, 200, "{v}");
        (v["state"] != "running").then_some(v)
    })
    .await
}

/// A subscription whose deliveries to `path` fail with 400 (not a breaker
/// failure) and dead-letter at the first attempt.
pub async fn failing_subscription<P: Pipeline>(s: &P, r: &Receiver, path: &str, types: &[&str]) -> String {
    let (id, _) = s
        .subscribe(json!({"callback_url": r.url(path, Behaviour::Ok), "event_types": types,
                          "retry_policy": {"max_attempts": 1, "base_delay_ms": 50, "max_delay_ms": 100}}))
        .await;
    r.set(path, Behaviour::Always(400));
    id
}

/// Lists by every filter (subscription, event type, tenant, state, time
/// range), empty results, a cursor walk that lists each dead letter once
/// while new ones arrive, and bad input (400 naming the field, 422 for an
/// inverted range).
pub async fn dead_letters_are_listed_by_every_filter_and_walked_once<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let a = failing_subscription(s, &r, "/dl-a", &["dlf.a"]).await;
    let b = failing_subscription(s, &r, "/dl-b", &["dlf.b"]).await;
    let before = chrono::Utc::now() - chrono::Duration::seconds(1);
    post_many(s, 12, "dlf.a", Some("acme")).await;
    post_many(s, 5, "dlf.b", None).await;
    let of_a = wait_dead_letters(s, &format!("subscription_id={a}"), 12, 60).await;
    wait_dead_letters(s, &format!("subscription_id={b}"), 5, 60).await;
    assert!(of_a.iter().all(|d| d["subscription_id"] == a.as_str() && d["tenant_id"] == "acme"));
    assert!(of_a.iter().all(|d| d.get("event").is_none()), "lists leave the event snapshot out");
    // Newest first (to the millisecond: the order's unit).
    let times: Vec<String> = of_a.iter().map(|d| d["created_at"].as_str().unwrap().to_string()).collect();
    let ms: Vec<i64> =
        times.iter().map(|t| t.parse::<chrono::DateTime<chrono::Utc>>().unwrap().timestamp_millis()).collect();
    assert!(ms.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    assert_eq!(all_dead_letters(s, "event_type=dlf.b", 3).await.len(), 5);
    assert_eq!(all_dead_letters(s, "tenant_id=acme&event_type=dlf.a", 5).await.len(), 12);
    assert_eq!(all_dead_letters(s, &format!("subscription_id={b}&state=open"), 2).await.len(), 5);
    let since = before.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    assert_eq!(all_dead_letters(s, &format!("subscription_id={a}&since={since}"), 100).await.len(), 12);
    let later = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    assert_eq!(all_dead_letters(s, &format!("subscription_id={a}&since={later}"), 100).await.len(), 0);
    assert_eq!(all_dead_letters(s, &format!("subscription_id={a}&until={since}"), 100).await.len(), 0);
    // Empty results are not errors.
    for q in ["tenant_id=nobody", "event_type=none.such", "subscription_id=sub_none", "state=skipped&event_type=dlf.a"]
    {
        let (st, v) = s.get(&format!("/v1/dead-letters?{q}")).await;
        assert_eq!(st, 200, "{q}: {v}");
        assert_eq!((v["items"].as_array().unwrap().len(), &v["next_cursor"]), (0, &Value::Null), "{q}");
    }
    // A walk by 5 while new dead letters arrive lists the first 12 exactly once.
    let mut seen = Vec::new();
    let (_, first) = s.get(&format!("/v1/dead-letters?subscription_id={a}&limit=5")).await;
    seen.extend(first["items"].as_array().unwrap().iter().map(|d| d["id"].as_str().unwrap().to_string()));
    post_many(s, 4, "dlf.a", Some("acme")).await;
    wait_dead_letters(s, &format!("subscription_id={a}"), 16, 60).await;
    let mut cursor = first["next_cursor"].as_str().map(str::to_string);
    while let Some(c) = cursor {
        let (st, v) = s.get(&format!("/v1/dead-letters?subscription_id={a}&limit=5&cursor={c}")).await;
        assert_eq!(st, 200, "{v}");
        seen.extend(v["items"].as_array().unwrap().iter().map(|d| d["id"].as_str().unwrap().to_string()));
        cursor = v["next_cursor"].as_str().map(str::to_string);
    }
    let mut want: Vec<String> = of_a.iter().map(|d| d["id"].as_str().unwrap().to_string()).collect();
    want.sort();
    seen.sort();
    assert_eq!(seen, want, "each of the first 12 once, none of the 4 that arrived during the walk");
    // Bad input.
    let c = first["next_cursor"].as_str().unwrap();
    for (q, status, field) in [
        (format!("subscription_id={b}&cursor={c}"), 400, "cursor"),
        ("cursor=garbage".to_string(), 400, "cursor"),
        ("state=lost".to_string(), 400, "state"),
        ("limit=0".to_string(), 400, "limit"),
        ("since=yesterday".to_string(), 400, "since"),
        (format!("since={later}&until={since}"), 422, "until"),
    ] {
        let (st, v) = s.get(&format!("/v1/dead-letters?{q}")).await;
        assert_eq!((st, v["error"]["field"].as_str()), (status, Some(field)), "{q}: {v}");
    }
}

/// Bulk skip by filter closes exactly the open dead letters it takes, with
/// the job's reason and actor; bad input is refused (no reason 400, bad
/// filter 400/422, unknown job 404) and starts nothing.
pub async fn bulk_skip_by_filter_and_bad_input<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let a = failing_subscription(s, &r, "/sk-a", &["skp.a", "skp.b"]).await;
    post_many(s, 7, "skp.a", None).await;
    post_many(s, 3, "skp.b", None).await;
    wait_dead_letters(s, &format!("subscription_id={a}"), 10, 60).await;
    for (body, status, field) in [
        (json!({"filter": {"subscription_id": a}}), 400, "reason"),
        (json!({"filter": {"subscription_id": a}, "reason": "  "}), 400, "reason"),
        (json!({"filter": {"state": "open"}, "reason": "x"}), 400, "filter.state"),
        (
            json!({"filter": {"since": "2026-11-26T10:00:00Z", "until": "2026-11-26T09:00:00Z"}, "reason": "x"}),
            422,
            "filter.until",
        ),
        (json!({"filter": {"since": "not a time"}, "reason": "x"}), 400, "filter.since"),
    ] {
        let (st, v) = s.post("/v1/dead-letters/skip", &body).await;
        assert_eq!(st, status, "{body}: {v}");
        if status == 400 && field == "filter.state" {
            assert_eq!(v["error"]["code"], "unknown_field", "{v}");
        } else {
            assert_eq!(v["error"]["field"].as_str(), Some(field), "{body}: {v}");
        }
    }
    let (st, v) = s.get("/v1/jobs/job_none").await;
    assert_eq!(st, 404, "{v}");
    assert_eq!(all_dead_letters(s, &format!("subscription_id={a}&state=open"), 100).await.len(), 10, "nothing ran");

    let (st, v) = s
        .post(
            "/v1/dead-letters/skip",
            &json!({"filter": {"subscription_id": a, "event_type": "skp.a"}, "reason": "obsolete orders"}),
        )
        .await;
    assert_eq!(st, 202, "{v}");
    let job = finished_job(s, v["job_id"].as_str().unwrap(), 60).await;
    assert_eq!(job["state"], "completed", "{job}");
    assert_eq!(
        (job["kind"].as_str(), job["matched"].as_u64(), job["done"].as_u64(), job["failed"].as_u64()),
        (Some("skip"), Some(7), Some(7), Some(0)),
        "{job}"
    );
    assert_eq!(job["reason"], "obsolete orders");
    assert_eq!(job["filter"]["event_type"], "skp.a");
    let skipped = all_dead_letters(s, &format!("subscription_id={a}&state=skipped"), 100).await;
    assert_eq!(skipped.len(), 7);
    assert!(skipped.iter().all(|d| d["event_type"] == "skp.a"
        && d["resolution"]["reason"] == "obsolete orders"
        && d["resolution"]["job_id"] == job["id"]
        && d["resolution"]["actor"] == job["actor"]));
    assert_eq!(all_dead_letters(s, &format!("subscription_id={a}&state=open"), 100).await.len(), 3);
    // One audit record of the job's start, with its actor and reason.
    let (_, audit) = s.get("/v1/audit?action=dead_letters.skip_started&limit=1000").await;
    let mine: Vec<&Value> = audit["items"].as_array().unwrap().iter().filter(|r| r["job_id"] == job["id"]).collect();
    assert_eq!(mine.len(), 1, "{audit}");
    assert_eq!(
        (mine[0]["actor"].as_str(), mine[0]["reason"].as_str()),
        (job["actor"].as_str(), Some("obsolete orders"))
    );
    // A filter that takes nothing completes with nothing done.
    let (_, v) = s.post("/v1/dead-letters/skip", &json!({"filter": {"tenant_id": "nobody"}, "reason": "none"})).await;
    let job = finished_job(s, v["job_id"].as_str().unwrap(), 30).await;
    assert_eq!((job["state"].as_str(), job["matched"].as_u64()), (Some("completed"), Some(0)), "{job}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(r.deliveries("/sk-a").len(), 10, "a skip delivers nothing");
}

/// Bulk requeue of `n` dead letters by filter, the worker killed half way
/// (at `failpoint`, e.g. `bulk.half_page.page5`) and resumed: each dead
/// letter becomes exactly one new saga, delivered once, and the job's
/// counts are exact. Another subscription's dead letters are left open.
pub async fn bulk_requeue_survives_a_crash_half_way<P: Pipeline>(s: &mut P, n: usize, failpoint: &str) {
    let r = Receiver::start().await;
    let a = failing_subscription(s, &r, "/bulk", &["bulk.x"]).await;
    let other = failing_subscription(s, &r, "/bulk-other", &["bulk.y"]).await;
    let ids = post_many(s, n, "bulk.x", None).await;
    post_many(s, 3, "bulk.y", None).await;
    wait_dead_letters(s, &format!("subscription_id={a}&state=open"), n, 600).await;
    wait_dead_letters(s, &format!("subscription_id={other}"), 3, 60).await;
    r.set("/bulk", Behaviour::Ok);
    s.crash_at(failpoint).await;
    let (st, v) = s
        .post("/v1/dead-letters/requeue", &json!({"filter": {"subscription_id": a}, "reason": "endpoint fixed"}))
        .await;
    assert_eq!(st, 202, "{v}");
    let job_id = v["job_id"].as_str().unwrap().to_string();
    assert!(job_id.starts_with("job_"), "{job_id}");
    s.recover().await;
    let job = finished_job(s, &job_id, 600).await;
    assert_eq!(job["state"], "completed", "{job}");
    assert_eq!(
        (job["matched"].as_u64(), job["done"].as_u64(), job["failed"].as_u64()),
        (Some(n as u64), Some(n as u64), Some(0)),
        "{job}"
    );
    assert_eq!(job["kind"], "requeue");
    eventually(600, "every requeued delivery", || async { (r.successes("/bulk").len() >= n).then_some(()) }).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ok = r.successes("/bulk");
    let mut hooks: Vec<String> = ok.iter().map(|d| d.header("webhook-id").to_string()).collect();
    hooks.sort();
    hooks.dedup();
    // Every requeued saga delivered, each under its event's webhook-id (a
    // delivery in flight when the process was killed may arrive twice:
    // at-least-once, the same webhook-id for the subscriber to dedupe).
    assert_eq!(hooks.len(), n, "each dead letter delivered, under its own webhook-id");
    // Each event: its dead saga and exactly one new one.
    for id in &ids {
        let (_, d) = s.get(&format!("/v1/events/{id}/deliveries")).await;
        let d = d["deliveries"].as_array().unwrap();
        assert_eq!(d.len(), 2, "{id}: {d:?}");
        let new = d.iter().find(|x| x["status"] == "Completed").expect("the requeued saga");
        assert_eq!(new["origin"]["kind"], "requeue");
        assert_eq!(new["origin"]["reason"], "endpoint fixed");
    }
    let requeued = all_dead_letters(s, &format!("subscription_id={a}&state=requeued"), 1000).await;
    assert_eq!(requeued.len(), n);
    assert!(requeued.iter().all(|d| d["resolution"]["job_id"] == job_id.as_str()));
    assert_eq!(all_dead_letters(s, &format!("subscription_id={other}&state=open"), 100).await.len(), 3);
    // Requeueing again: nothing is open, nothing happens.
    let (_, v) =
        s.post("/v1/dead-letters/requeue", &json!({"filter": {"subscription_id": a}, "reason": "again"})).await;
    let again = finished_job(s, v["job_id"].as_str().unwrap(), 60).await;
    assert_eq!((again["matched"].as_u64(), again["done"].as_u64()), (Some(0), Some(0)), "{again}");
}

/// `POST /v1/replays` by event id: a job of kind replay whose saga keeps
/// the event's `webhook-id`; bad input is refused (no reason 400, no way
/// to choose events 400, inverted range 422, unknown event 404), and
/// `POST /v1/events/{id}/replay` requires a reason too.
pub async fn replay_job_by_event_id_and_bad_input<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/rp", Behaviour::Ok), "event_types": ["rpl.*"]})).await;
    let (_, ev) = s.post("/v1/events", &json!({"type": "rpl.x", "data": {"k": 1}})).await;
    let id = ev["event_id"].as_str().unwrap().to_string();
    s.settled_deliveries(&id, 1, 30).await;
    let now = chrono::Utc::now();
    let t = |h: i64| (now + chrono::Duration::hours(h)).to_rfc3339();
    for (body, status, field) in [
        (json!({"event_id": id}), 400, Some("reason")),
        (json!({"reason": "x"}), 400, Some("event_id")),
        (json!({"event_id": id, "partition_key": "p", "reason": "x"}), 400, Some("event_id")),
        (json!({"since": t(-1), "reason": "x"}), 400, Some("until")),
        (json!({"since": t(-1), "until": t(-2), "reason": "x"}), 422, Some("until")),
        (json!({"since": t(-24 * 400), "until": t(-1), "reason": "x"}), 422, Some("since")),
        (json!({"event_id": "evt_none", "reason": "x"}), 404, None),
        (json!({"event_id": id, "subscription_id": "sub_none", "reason": "x"}), 404, None),
    ] {
        let (st, v) = s.post("/v1/replays", &body).await;
        assert_eq!((st, v["error"]["field"].as_str()), (status, field), "{body}: {v}");
    }
    let (st, v) = s.post(&format!("/v1/events/{id}/replay"), &json!({})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("reason")), "{v}");

    let (st, v) = s.post("/v1/replays", &json!({"event_id": id, "reason": "subscriber lost data"})).await;
    assert_eq!(st, 202, "{v}");
    let job = finished_job(s, v["job_id"].as_str().unwrap(), 60).await;
    assert_eq!(
        (job["kind"].as_str(), job["state"].as_str(), job["matched"].as_u64(), job["done"].as_u64()),
        (Some("replay"), Some("completed"), Some(1), Some(1)),
        "{job}"
    );
    let d = s.settled_deliveries(&id, 2, 30).await;
    assert!(d.iter().any(|x| x["origin"]["kind"] == "replay" && x["origin"]["reason"] == "subscriber lost data"));
    let got = r.successes("/rp");
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].header("webhook-id"), got[1].header("webhook-id"), "a replay keeps the webhook-id");
}

/// `POST /v1/replays` by partition key delivers exactly that partition's
/// events again, in acceptance order through the ordered subscription's
/// lane, each with its original `webhook-id`; by time range exactly the
/// events received in the range.
pub async fn replay_jobs_by_partition_key_and_by_time_range<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    s.subscribe(
        json!({"callback_url": r.url("/rpk", Behaviour::Ok), "event_types": ["rpk.*"], "ordering": "partition"}),
    )
    .await;
    let mut ids = Vec::new();
    for i in 0..12 {
        let key = if i % 3 == 0 { "other" } else { "mine" };
        let (st, v) = s.post("/v1/events", &json!({"type": "rpk.x", "partition_key": key, "data": {"i": i}})).await;
        assert_eq!(st, 202, "{v}");
        ids.push((key, v["event_id"].as_str().unwrap().to_string()));
    }
    for (_, id) in &ids {
        s.settled_deliveries(id, 1, 60).await;
    }
    let first: Vec<_> = r.successes("/rpk");
    assert_eq!(first.len(), 12);
    let hook_of = |body: &[u8]| {
        first.iter().find(|d| d.body == body).map(|d| d.header("webhook-id").to_string()).expect("an original delivery")
    };
    let (st, v) =
        s.post("/v1/replays", &json!({"partition_key": "mine", "reason": "subscriber restored a backup"})).await;
    assert_eq!(st, 202, "{v}");
    let job = finished_job(s, v["job_id"].as_str().unwrap(), 120).await;
    assert_eq!(
        (job["state"].as_str(), job["matched"].as_u64(), job["done"].as_u64()),
        (Some("completed"), Some(8), Some(8)),
        "{job}"
    );
    if tokio::time::timeout(Duration::from_secs(60), async {
        while r.successes("/rpk").len() < 20 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .is_err()
    {
        let mut states = Vec::new();
        for (k, id) in &ids {
            let (_, d) = s.get(&format!("/v1/events/{id}/deliveries")).await;
            states.push(format!("{k} {id}: {}", d["deliveries"]));
        }
        panic!("the partition was not replayed ({} deliveries): {states:#?}", r.successes("/rpk").len());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let replayed: Vec<_> = r.successes("/rpk").into_iter().skip(12).collect();
    assert_eq!(replayed.len(), 8, "exactly the partition's events");
    let seqs: Vec<u64> = replayed.iter().map(|d| d.header("hookline-sequence").parse().unwrap()).collect();
    assert_eq!(seqs, (1..=8).collect::<Vec<u64>>(), "in acceptance order");
    for d in &replayed {
        assert!(d.json()["data"]["i"].as_u64().unwrap() % 3 != 0, "only partition mine");
        assert_eq!(d.header("webhook-id"), hook_of(&d.body), "the original webhook-id");
    }

    // By time range: exactly the events received inside it.
    let before = chrono::Utc::now();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let inside: Vec<String> = post_many(s, 5, "rpk.t", None).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let after = chrono::Utc::now();
    post_many(s, 3, "rpk.t", None).await;
    eventually(60, "the range's first deliveries", || async { (r.successes("/rpk").len() >= 28).then_some(()) }).await;
    let (st, v) = s
        .post("/v1/replays", &json!({"since": before.to_rfc3339(), "until": after.to_rfc3339(), "event_types": ["rpk.t"], "reason": "range"}))
        .await;
    assert_eq!(st, 202, "{v}");
    let job = finished_job(s, v["job_id"].as_str().unwrap(), 120).await;
    assert_eq!((job["matched"].as_u64(), job["done"].as_u64()), (Some(5), Some(5)), "{job}");
    for id in &inside {
        let d = s.settled_deliveries(id, 2, 60).await;
        assert!(d.iter().any(|x| x["origin"]["kind"] == "replay"), "{id}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(r.successes("/rpk").len(), 33, "12 + 8 + 8 + 5 replayed, nothing else");
}
