//! Recovery without an operator (issue 27, part D): automatic requeue
//! after a breaker closes or a re-enable, the operational events of
//! requeues, skips and replays, and the producer in metrics and logs.

use super::audit::audit_all;
use super::bulk::{all_dead_letters, finished_job, wait_dead_letters};
use super::*;

/// Operational events delivered to `path` of `r`, of `event_type`.
fn ops_of(r: &Receiver, path: &str, event_type: &str) -> Vec<Value> {
    r.deliveries(path).iter().map(|d| d.json()).filter(|v| v["type"] == event_type).collect()
}

/// A subscription of `hookline.dead_letter.requeued` on `/ops` of `r`.
async fn ops_channel<P: Pipeline>(s: &P, r: &Receiver) {
    s.subscribe(
        json!({"callback_url": r.url("/ops", Behaviour::Ok), "event_types": ["hookline.dead_letter.requeued"]}),
    )
    .await;
}

/// Dead-letters at the first failure: a breaker failure (503) or not.
fn once() -> Value {
    json!({"max_attempts": 1, "base_delay_ms": 50, "max_delay_ms": 100})
}

/// Posts one event of `event_type` with id `id`.
async fn post_one<P: Pipeline>(s: &P, id: &str, event_type: &str) {
    let (st, v) = s.post("/v1/events", &json!({"id": id, "type": event_type, "data": {"id": id}})).await;
    assert_eq!(st, 202, "{v}");
}

/// The subscription's successful deliveries of event `id` (a requeued saga
/// delivers under the same `webhook-id`, the event's id).
fn delivered(r: &Receiver, path: &str, id: &str) -> usize {
    r.deliveries(path).iter().filter(|d| d.status == 200 && d.json()["id"] == id).count()
}

/// The only `dead_letters.requeue_started` record of `sub`, once written.
async fn auto_job_record<P: Pipeline>(s: &P, sub: &str) -> Value {
    let query = format!("subscription_id={sub}&action=dead_letters.requeue_started");
    let recs = eventually(60, "the automatic requeue audited", || async {
        let recs = audit_all(s, &query, 10).await;
        (!recs.is_empty()).then_some(recs)
    })
    .await;
    assert_eq!(recs.len(), 1, "one job per outage: {recs:?}");
    recs[0].clone()
}

/// A subscription with `auto_requeue` whose endpoint fails (503) until its
/// breaker opens (3 failures here) and its deliveries dead-letter; the
/// endpoint recovers, a probe closes the breaker, and its open dead letters
/// of the outage are requeued by one bulk job of `system` (audited, with
/// `hookline.dead_letter.requeued` naming the job) and delivered. A
/// subscription without the setting, through the same outage, keeps its
/// dead letters open. The requeued deliveries keep the subscription's
/// `max_in_flight` (1).
pub async fn auto_requeue_after_the_breaker_closes<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    ops_channel(s, &r).await;
    let (auto, _) = s
        .subscribe(json!({"callback_url": r.url("/auto", Behaviour::Ok), "event_types": ["arb.*"],
                          "retry_policy": once(), "auto_requeue": true, "max_in_flight": 1}))
        .await;
    let (manual, _) = s
        .subscribe(json!({"callback_url": r.url("/manual", Behaviour::Ok), "event_types": ["arb.*"],
                          "retry_policy": once()}))
        .await;
    let (_, v) = s.get(&format!("/v1/subscriptions/{auto}")).await;
    assert_eq!(v["auto_requeue"], true, "{v}");
    let (_, v) = s.get(&format!("/v1/subscriptions/{manual}")).await;
    assert_eq!(v["auto_requeue"], false, "{v}");
    r.set("/auto", Behaviour::Always(503));
    r.set("/manual", Behaviour::Always(503));
    let ids: Vec<String> = (0..4).map(|i| format!("arb-{i}")).collect();
    for id in &ids {
        post_one(s, id, "arb.down").await;
    }
    wait_dead_letters(s, &format!("subscription_id={auto}&state=open"), 4, 60).await;
    wait_dead_letters(s, &format!("subscription_id={manual}&state=open"), 4, 60).await;
    let (_, v) = s.get(&format!("/v1/subscriptions/{auto}")).await;
    assert_ne!(v["health"]["breaker"], "closed", "{v}");
    // Nothing is requeued while the outage lasts.
    assert!(r.deliveries("/auto").iter().all(|d| d.status == 503));

    r.set("/auto", Behaviour::Ok);
    r.set("/manual", Behaviour::Ok);
    // Events after the cool-down: one is the probe that closes the breaker
    // (one that comes while it is still open dead-letters, and is requeued
    // with the others).
    let mut n = 0;
    let auto_id = auto.as_str();
    eventually(60, "the breaker closed", || {
        n += 1;
        let id = format!("arb-probe-{n}");
        async move {
            post_one(s, &id, "arb.probe").await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            let (_, v) = s.get(&format!("/v1/subscriptions/{auto_id}")).await;
            (v["health"]["breaker"] == "closed").then_some(())
        }
    })
    .await;
    // Every event of the outage is delivered, once, by its requeued saga.
    for id in &ids {
        eventually(60, &format!("{id} delivered after the automatic requeue"), || async {
            (delivered(&r, "/auto", id) == 1).then_some(())
        })
        .await;
    }
    let rec = auto_job_record(s, &auto).await;
    assert_eq!(rec["actor"], "system", "{rec}");
    assert_eq!(rec["reason"], "automatic requeue: breaker closed", "{rec}");
    let job_id = rec["job_id"].as_str().expect("the record names the job").to_string();
    let job = finished_job(s, &job_id, 60).await;
    assert_eq!(
        (&job["state"], &job["kind"], &job["actor"]),
        (&json!("completed"), &json!("requeue"), &json!("system"))
    );
    assert_eq!(job["filter"]["subscription_id"], auto.as_str(), "{job}");
    assert!(job["done"].as_u64().unwrap() >= 4, "{job}");
    assert_eq!(job["failed"], 0, "{job}");
    wait_dead_letters(s, &format!("subscription_id={auto}&state=open"), 0, 60).await;
    let requeued = all_dead_letters(s, &format!("subscription_id={auto}&state=requeued"), 100).await;
    assert!(requeued.len() >= 4, "{requeued:?}");
    // The monitor hears of it: one event per page of the job.
    let heard = eventually(60, "hookline.dead_letter.requeued delivered", || async {
        ops_of(&r, "/ops", "hookline.dead_letter.requeued").into_iter().find(|e| e["data"]["job_id"] == job_id.as_str())
    })
    .await;
    assert_eq!(heard["data"]["subscription_id"], auto.as_str(), "{heard}");
    assert_eq!(heard["data"]["actor"], "system", "{heard}");
    let named = heard["data"]["dead_letter_ids"].as_array().unwrap();
    assert_eq!(heard["data"]["count"].as_u64(), Some(named.len() as u64), "{heard}");
    for d in &requeued {
        assert!(named.contains(&d["id"]), "{} not in {heard}", d["id"]);
    }
    // The requeued deliveries went the normal way: within its limit.
    assert_eq!(r.max_concurrent("/auto"), 1, "max_in_flight held");
    // The subscription without the setting: its dead letters still wait.
    let open = all_dead_letters(s, &format!("subscription_id={manual}&state=open"), 100).await;
    assert!(open.len() >= 4, "{open:?}");
    assert!(audit_all(s, &format!("subscription_id={manual}&action=dead_letters.requeue_started"), 10)
        .await
        .is_empty());
    for id in &ids {
        assert_eq!(delivered(&r, "/manual", id), 0, "{id} was not requeued for {manual}");
    }
}

/// A subscription with `auto_requeue` that Hookline disabled (every
/// delivery failed for 3 s) is enabled again by PATCH: once it has passed
/// its handshake again, its open dead letters of the outage are requeued
/// (reason `automatic requeue: re-enabled`, actor `system`) and delivered.
pub async fn auto_requeue_after_re_enabling<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    ops_channel(s, &r).await;
    let (sub, _) = s
        .subscribe(json!({"callback_url": r.url("/down", Behaviour::Ok), "event_types": ["are.*"],
                          "retry_policy": once(), "auto_requeue": true}))
        .await;
    r.set("/down", Behaviour::Always(503));
    post_one(s, "are-1", "are.one").await;
    wait_dead_letters(s, &format!("subscription_id={sub}&state=open"), 1, 60).await;
    tokio::time::sleep(Duration::from_millis(3200)).await;
    post_one(s, "are-2", "are.two").await;
    eventually(60, "the failing subscription disabled", || async {
        let (_, v) = s.get(&format!("/v1/subscriptions/{sub}")).await;
        (v["active"] == false && v["disabled_reason"] == "failing").then_some(())
    })
    .await;
    wait_dead_letters(s, &format!("subscription_id={sub}&state=open"), 2, 60).await;

    r.set("/down", Behaviour::Ok);
    let (st, v) = s.call("PATCH", &format!("/v1/subscriptions/{sub}"), Some(br#"{"active": true}"#)).await;
    assert_eq!(st, 200, "{v}");
    for id in ["are-1", "are-2"] {
        eventually(60, &format!("{id} delivered after the re-enable"), || async {
            (delivered(&r, "/down", id) == 1).then_some(())
        })
        .await;
    }
    let rec = auto_job_record(s, &sub).await;
    assert_eq!((&rec["actor"], &rec["reason"]), (&json!("system"), &json!("automatic requeue: re-enabled")), "{rec}");
    let job_id = rec["job_id"].as_str().unwrap().to_string();
    let job = finished_job(s, &job_id, 60).await;
    assert_eq!((&job["state"], &job["done"]), (&json!("completed"), &json!(2)), "{job}");
    wait_dead_letters(s, &format!("subscription_id={sub}&state=open"), 0, 60).await;
    eventually(60, "hookline.dead_letter.requeued of the job delivered", || async {
        ops_of(&r, "/ops", "hookline.dead_letter.requeued").into_iter().find(|e| e["data"]["job_id"] == job_id.as_str())
    })
    .await;
    // Each dead letter's resolution names the job and `system`.
    let requeued = all_dead_letters(s, &format!("subscription_id={sub}&state=requeued"), 100).await;
    assert_eq!(requeued.len(), 2, "{requeued:?}");
    for d in &requeued {
        let (_, v) = s.get(&format!("/v1/dead-letters/{}", d["id"].as_str().unwrap())).await;
        assert_eq!(v["resolution"]["actor"], "system", "{v}");
        assert_eq!(v["resolution"]["job_id"], job_id.as_str(), "{v}");
    }
}

/// A single skip, a single requeue, a bulk skip, a single replay and a
/// replay job each publish their operational event, with who and why: a
/// single request names its one dead letter (no job), a bulk job each page's.
pub async fn requeues_skips_and_replays_publish_operational_events<P: Pipeline>(s: &P) {
    let me = s.actor();
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/ops", Behaviour::Ok),
                       "event_types": ["hookline.dead_letter.skipped", "hookline.dead_letter.requeued", "hookline.replay.started"]}))
        .await;
    let (sub, _) = s
        .subscribe(
            json!({"callback_url": r.url("/fails", Behaviour::Ok), "event_types": ["opx.*"], "retry_policy": once()}),
        )
        .await;
    r.set("/fails", Behaviour::Always(400));
    for id in ["opx-1", "opx-2", "opx-3"] {
        post_one(s, id, "opx.thing").await;
    }
    let dls = wait_dead_letters(s, &format!("subscription_id={sub}&state=open"), 3, 60).await;
    let dl = |event: &str| {
        dls.iter().find(|d| d["event_id"] == event).map(|d| d["id"].as_str().unwrap().to_string()).expect("dead letter")
    };
    let (one, two, three) = (dl("opx-1"), dl("opx-2"), dl("opx-3"));

    let (st, v) = s.post(&format!("/v1/dead-letters/{one}/skip"), &json!({"reason": "not needed"})).await;
    assert_eq!(st, 200, "{v}");
    let skipped = eventually(60, "hookline.dead_letter.skipped of a single skip", || async {
        ops_of(&r, "/ops", "hookline.dead_letter.skipped").into_iter().find(|e| e["data"]["job_id"].is_null())
    })
    .await;
    assert_eq!(skipped["data"]["dead_letter_ids"], json!([one]), "{skipped}");
    assert_eq!((&skipped["data"]["count"], &skipped["data"]["subscription_id"]), (&json!(1), &json!(sub)), "{skipped}");
    assert_eq!((&skipped["data"]["actor"], &skipped["data"]["reason"]), (&json!(me), &json!("not needed")));

    r.set("/fails", Behaviour::Ok);
    let (st, v) = s.post(&format!("/v1/dead-letters/{two}/requeue"), &json!({"reason": "endpoint fixed"})).await;
    assert_eq!(st, 202, "{v}");
    let requeued = eventually(60, "hookline.dead_letter.requeued of a single requeue", || async {
        ops_of(&r, "/ops", "hookline.dead_letter.requeued")
            .into_iter()
            .find(|e| e["data"]["dead_letter_ids"] == json!([two]))
    })
    .await;
    assert_eq!((&requeued["data"]["job_id"], &requeued["data"]["reason"]), (&Value::Null, &json!("endpoint fixed")));

    let (st, v) =
        s.post("/v1/dead-letters/skip", &json!({"filter": {"subscription_id": sub}, "reason": "stale"})).await;
    assert_eq!(st, 202, "{v}");
    let job_id = v["job_id"].as_str().unwrap().to_string();
    finished_job(s, &job_id, 60).await;
    let bulk = eventually(60, "hookline.dead_letter.skipped of the bulk job", || async {
        ops_of(&r, "/ops", "hookline.dead_letter.skipped").into_iter().find(|e| e["data"]["job_id"] == job_id.as_str())
    })
    .await;
    assert_eq!(bulk["data"]["dead_letter_ids"], json!([three]), "{bulk}");
    assert_eq!((&bulk["data"]["subscription_id"], &bulk["data"]["reason"]), (&json!(sub), &json!("stale")));

    let (st, v) = s.post("/v1/events/opx-1/replay", &json!({"subscription_id": sub, "reason": "lost"})).await;
    assert_eq!(st, 202, "{v}");
    let single = eventually(60, "hookline.replay.started of a single replay", || async {
        ops_of(&r, "/ops", "hookline.replay.started").into_iter().find(|e| e["data"]["job_id"].is_null())
    })
    .await;
    assert_eq!((&single["data"]["event_id"], &single["data"]["subscription_id"]), (&json!("opx-1"), &json!(sub)));
    let (st, v) = s.post("/v1/replays", &json!({"event_id": "opx-3", "reason": "audit asked"})).await;
    assert_eq!(st, 202, "{v}");
    let replay_job = v["job_id"].as_str().unwrap().to_string();
    let started = eventually(60, "hookline.replay.started of a replay job", || async {
        ops_of(&r, "/ops", "hookline.replay.started").into_iter().find(|e| e["data"]["job_id"] == replay_job.as_str())
    })
    .await;
    assert_eq!((&started["data"]["event_id"], &started["data"]["reason"]), (&json!("opx-3"), &json!("audit asked")));
    assert_eq!(started["data"]["filter"]["event_id"], "opx-3", "{started}");
    finished_job(s, &replay_job, 60).await;
    // Each once, however the stages ran.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(ops_of(&r, "/ops", "hookline.replay.started").len(), 2);
    let skips = ops_of(&r, "/ops", "hookline.dead_letter.skipped");
    let ids: std::collections::BTreeSet<String> = skips.iter().map(|e| e["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(ids.len(), 2, "{skips:?}");
}

/// Delivery metrics and the attempt's log line name the event's producer.
pub async fn metrics_and_logs_name_the_producer<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/p", Behaviour::Ok), "event_types": ["prd.*"]})).await;
    let (st, v) =
        s.post("/v1/events", &json!({"id": "prd-1", "type": "prd.made", "producer": "billing-svc", "data": {}})).await;
    assert_eq!(st, 202, "{v}");
    let d = s.settled_deliveries("prd-1", 1, 60).await;
    assert_eq!(d[0]["status"], "completed", "{d:?}");
    let metrics = s.metrics().await;
    let series = "hookline_deliveries_by_producer_total{producer=\"billing-svc\",outcome=\"delivered\"} ";
    assert!(metrics.lines().any(|l| l.starts_with(series) && !l.ends_with(" 0")), "no {series} in\n{metrics}");
    let logs = s.logs().await;
    assert!(
        logs.lines().any(|l| l.contains("delivery attempt") && l.contains("prd-1") && l.contains("billing-svc")),
        "no attempt line naming the producer"
    );
}
