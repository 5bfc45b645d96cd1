//! Recovery and subscription management: crashes between two writes of a
//! stage, the reconciler, PATCH and listing of subscriptions, the circuit
//! breaker, a hung or failing subscription's effect on the others, the
//! contract webhook payload, reindexing, retry schedules and
//! dead-letter statuses.

use super::*;

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
    let event = json!({"id": "crash-1", "type": "t", "data": {}});
    let answered = s.post_racing_a_crash("/v1/events", &event).await;
    s.recover().await;
    // A producer that lost its answer posts again: stored once either way.
    let (st, v) = match answered {
        Some(a) => a,
        None => s.post("/v1/events", &event).await,
    };
    assert_eq!(st, 202, "{v}");
    let d = s.settled_deliveries("crash-1", 1, 30).await;
    assert_eq!(d[0]["status"], "completed");
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
        let d = v["items"].as_array().cloned().unwrap_or_default();
        (d.len() == 1 && d[0]["status"] == "completed").then_some(d)
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
    // Could not be parsed: 400; parsed, a value broke a rule: 422.
    for (body, status, code, field) in [
        (r#"{"event_types": ["b.*", 3]}"#, 400, "invalid_type", "event_types[1]"),
        (r#"{"retry_policy": {"max_attempts": "x"}}"#, 400, "invalid_type", "retry_policy.max_attempts"),
        (r#"{"colour": "red"}"#, 400, "unknown_field", "colour"),
        (r#"{"payload_format": "xml"}"#, 400, "invalid_type", "payload_format"),
        (r#"{"event_types": null}"#, 422, "invalid_field", "event_types"),
        (r#"{"event_types": ["b c"]}"#, 422, "invalid_field", "event_types[0]"),
    ] {
        let (st, v) = s.call("PATCH", &path, Some(body.as_bytes())).await;
        assert_eq!(
            (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
            (status, Some(code), Some(field)),
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
    for (path, status, field) in [
        ("/v1/subscriptions?cursor=not-a-cursor".to_string(), 400, "cursor"),
        (format!("/v1/subscriptions?cursor={flipped}&tenant_id=acme"), 400, "cursor"),
        (format!("/v1/subscriptions?cursor={acme_cursor}"), 400, "cursor"),
        ("/v1/subscriptions?limit=0".to_string(), 422, "limit"),
        ("/v1/subscriptions?limit=1001".to_string(), 422, "limit"),
        ("/v1/subscriptions?limit=ten".to_string(), 400, "limit"),
        (format!("/v1/subscriptions?event_type={}", "a".repeat(101)), 422, "event_type"),
        ("/v1/subscriptions?tenant_id=".to_string(), 422, "tenant_id"),
        ("/v1/subscriptions?tenant=acme".to_string(), 400, "tenant"),
    ] {
        let (st, v) = s.get(&path).await;
        assert_eq!((st, v["error"]["field"].as_str()), (status, Some(field)), "{path}: {v}");
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
            // Retries 50-500 ms apart: the breaker opens at the third failure,
            // and the saga's last scheduled attempt is ~9 s out, past several
            // probes (1 s cool-down, then 2 s), so the endpoint coming back
            // after a slow stretch of checks still finds a probe before it.
            json!({"callback_url": r.url("/brk", Behaviour::Ok), "event_types": ["*"],
                   "retry_policy": {"max_attempts": 20, "base_delay_ms": 50, "max_delay_ms": 500}}),
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
    // Open: retries come due every 50-500 ms, yet no request is made until
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
        assert_eq!(d[0]["status"], "completed", "{id}: {}", d[0]);
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
    //
    // A stall is the hung subscription's doing only while one of its
    // requests was open (from its arrival until the delivery timeout cut
    // it off): a pause of a loaded emulator with none open is the machine's,
    // and is reported, not counted. A worker or batch that a hung request
    // holds would make every one of its stalls count.
    let mut at: Vec<_> = r.deliveries("/fine").iter().map(|d| d.at).collect();
    at.sort();
    let hung: Vec<_> = r.deliveries("/hang").iter().map(|d| d.at).collect();
    let open_during =
        |from: std::time::Instant, to: std::time::Instant| hung.iter().any(|h| *h < to && *h + TIMEOUT > from);
    let stalls: Vec<(Duration, bool)> = at
        .windows(2)
        .map(|w| (w[1] - w[0], open_during(w[0], w[1])))
        .filter(|(gap, _)| *gap >= TIMEOUT * 4 / 5)
        .collect();
    let held: Vec<Duration> = stalls.iter().filter(|(_, h)| *h).map(|(g, _)| *g).collect();
    let longest = held.iter().max().copied().unwrap_or_default();
    assert!(
        held.len() <= 2,
        "{} stalls of a delivery timeout or more between healthy deliveries while a hung request was open: \
         {stalls:?} (gap, hung request open)",
        held.len()
    );
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

/// `payload_format: "contract_webhook"` (also read as `contract-webhook`,
/// its spelling before the wire contract): the task-event contract's public
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
                          "payload_format": "contract_webhook"}))
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
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("data_fields")), "{v}");
    let (st, v) = s.call("PATCH", &path, Some(br#"{"data_fields": ["a..b"]}"#)).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("data_fields[0]")), "{v}");
    let (_, v) = s.get(&path).await;
    assert_eq!(
        (v["payload_format"].as_str(), v["data_fields"].clone()),
        (Some("contract_webhook"), Value::Null),
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
    for (body, status, field) in [
        (json!({"cursor": "not-a-cursor"}), 400, "cursor"),
        (json!({"cursor": ""}), 400, "cursor"),
        (json!({"cursor": list_cursor}), 400, "cursor"),
        (json!({"cursor": format!("{issued}x")}), 400, "cursor"),
        (json!({"limit": 0}), 422, "limit"),
        (json!({"limit": 101}), 422, "limit"),
        (json!({"limit": -1}), 422, "limit"),
        (json!({"limit": "ten"}), 400, "limit"),
        (json!({"cursor": issued, "limit": 1, "from": "start"}), 400, "from"),
    ] {
        let (st, v) = s.post("/v1/subscriptions/reindex", &body).await;
        assert_eq!((st, v["error"]["field"].as_str()), (status, Some(field)), "{body}: {v}");
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
    for (body, status, field) in [
        (json!({"cursor": issued}), 400, "cursor"),
        (json!({"cursor": "not-a-cursor"}), 400, "cursor"),
        (json!({"limit": 0}), 422, "limit"),
        (json!({"limit": 101}), 422, "limit"),
        (json!({"cursor": dl_issued, "all": true}), 400, "all"),
    ] {
        let (st, v) = s.post("/v1/dead-letters/reindex", &body).await;
        assert_eq!((st, v["error"]["field"].as_str()), (status, Some(field)), "{body}: {v}");
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
    assert_eq!(d[0]["status"], "dead_lettered", "{d:?}");
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
    assert_eq!(d[0]["status"], "dead_lettered", "{d:?}");
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
    assert_eq!(d[0]["status"], "completed", "{d:?}");
    let codes: Vec<&Value> = d[0]["attempts"].as_array().unwrap().iter().map(|a| &a["status_code"]).collect();
    assert_eq!(codes, [&json!(500), &json!(200)]);
    let (_, shown) = s.get(&format!("/v1/subscriptions/{sub}")).await;
    assert_eq!(shown["active"], true, "only 410 deactivates: {shown}");
}
