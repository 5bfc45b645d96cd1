//! Delivery: the verification handshake, signed delivery of every producer
//! format, retries, dead letters with requeue, replay and skip, duplicates
//! and idempotency keys, paging of deliveries, scoping, bad input, and
//! secret rotation.

use super::*;

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
pub(super) fn verify_delivery(d: &crate::Delivery, secret: &Secret) -> Result<(), signing::VerifyError> {
    d.verify(secret)
}

async fn contract_saga<P: Pipeline>(s: &P, event_id: &str) -> String {
    let (_, d) = s.get(&format!("/v1/events/{event_id}/deliveries")).await;
    d["items"][0]["saga_id"].as_str().unwrap_or_default().to_string()
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
    assert_eq!(da[0]["status"], "completed");
    let attempts = da[0]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3);
    assert_eq!(attempts[0]["status_code"], 500);
    assert_eq!(attempts[1]["status_code"], 500);
    assert_eq!(attempts[2]["status_code"], 200);
    assert_eq!(db[0]["status"], "completed");
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
    assert_eq!(d[0]["status"], "dead_lettered");
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
    assert_eq!(dl["saga_snapshot"]["status"], "dead_lettered");

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
    assert_eq!(old["status"], "dead_lettered", "the dead saga never changes");
    assert_eq!(old["attempts"].as_array().unwrap().len(), 3);
    assert_eq!(new["status"], "completed");
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
    assert_eq!(d[0]["status"], "dead_lettered");
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
    assert_eq!(
        (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
        (422, Some("reason_required"), Some("reason")),
        "a reason is required: {v}"
    );
    let (st, _) = s.post(&format!("/v1/dead-letters/{dl}/requeue"), &json!({"reason": "try"})).await;
    assert_eq!(st, 409, "a skipped dead letter cannot be requeued");
    let (st, _) = s.post(&format!("/v1/dead-letters/{dl}/skip"), &json!({"reason": "again"})).await;
    assert_eq!(st, 409, "nor skipped again");
    // Inactive subscriptions get nothing.
    let (_, ev) = s.post("/v1/events", &json!({"type": "x", "data": 2})).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, d) = s.get(&format!("/v1/events/{}/deliveries", ev["event_id"].as_str().unwrap())).await;
    assert_eq!(d["items"].as_array().unwrap().len(), 0);
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
        let items = v["items"].as_array().unwrap();
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
    for (bad, status) in [("0", 422), ("101", 422), ("x", 400)] {
        let (st, v) = s.get(&format!("/v1/events/paged-1/deliveries?limit={bad}")).await;
        assert_eq!((st, v["error"]["field"].as_str()), (status, Some("limit")), "limit={bad}: {v}");
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
        assert_eq!(s.settled_deliveries(id, 1, 20).await[0]["status"], "completed", "{id}");
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
    // Which events each endpoint got (at-least-once: on a loaded emulator a
    // job can outlive its visibility timeout and come again, under the same
    // webhook-id).
    assert_eq!(r.webhook_ids("/acme").len(), 1);
    assert_eq!(r.webhook_ids("/all").len(), 2);
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
    assert_eq!(
        (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
        (400, Some("missing_field"), Some("event_types"))
    );
    let (st, v) = s
        .post(
            "/v1/subscriptions",
            &json!({"callback_url": "http://127.0.0.1:9/x", "event_types": ["*"], "retry_policy": {"max_attempts": 0}}),
        )
        .await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("retry_policy.max_attempts")), "{v}");
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
