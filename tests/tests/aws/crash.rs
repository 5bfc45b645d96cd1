//! Crashes only the AWS backend can have: an invocation that panics
//! between two of its writes fails alone (the caller sees API Gateway's
//! 500, or the platform retries the message), while the rest of the
//! pipeline goes on. On `hookline serve` a crash is the whole process,
//! checked by `kill9_during_ingest_loses_no_accepted_event`
//! (tests/tests/serve/e2e.rs). Each test arms its own pipeline's failpoints
//! (`Hookline::failpoints`), so they run side by side. The crashes both
//! backends share are in `hookline_tests::scenario_suite_tests`.

use hookline_tests::aws_pipeline::AwsPipeline;
use hookline_tests::pipeline::Pipeline;
use hookline_tests::{Behaviour, Receiver};
use serde_json::json;

/// The ingest invocation dies after storing the event: the producer sees a
/// 500 and retries; the retry is a duplicate and the event is delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_crash_after_storing_the_event() {
    let mut p = AwsPipeline::start("ingest").await;
    let r = Receiver::start().await;
    p.subscribe(json!({"callback_url": r.url("/i", Behaviour::Ok), "event_types": ["*"]})).await;
    p.crash_at("ingest.after_insert").await;
    let body = json!({"id": "ing-1", "type": "t", "data": {}});
    let (st, _) = p.post("/v1/events", &body).await;
    assert_eq!(st, 500, "the crashed invocation answers 500");
    let (st, v) = p.post("/v1/events", &body).await;
    assert_eq!(st, 202);
    assert_eq!(v["duplicate"], true, "the first try was stored before the crash");
    let d = p.settled_deliveries("ing-1", 1, 30).await;
    assert_eq!(d[0]["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(r.deliveries("/i").len(), 1);
}

/// The requeue invocation dies after resolving the dead letter, before the
/// new saga exists: the message is retried and creates the one new saga.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_crash_after_resolving_the_dead_letter() {
    let mut p = AwsPipeline::start("requeue").await;
    let r = Receiver::start().await;
    p.subscribe(json!({"callback_url": r.url("/q", Behaviour::Ok), "event_types": ["*"],
                       "retry_policy": {"max_attempts": 1, "base_delay_ms": 50, "max_delay_ms": 100}}))
        .await;
    r.set("/q", Behaviour::Always(500));
    p.post("/v1/events", &json!({"id": "rq-1", "type": "t", "data": {}})).await;
    let d = p.settled_deliveries("rq-1", 1, 30).await;
    let dead = d[0]["saga_id"].as_str().unwrap().to_string();
    r.set("/q", Behaviour::Ok);
    hookline_tests::eventually(10, "the dead letter", || async {
        (p.get(&format!("/v1/dead-letters/{dead}")).await.0 == 200).then_some(())
    })
    .await;
    p.crash_at("requeue.after_resolve").await;
    let (st, _) = p.post(&format!("/v1/dead-letters/{dead}/requeue"), &json!({"reason": "fixed"})).await;
    assert_eq!(st, 202);
    p.recover().await;
    let d = p.settled_deliveries("rq-1", 2, 30).await;
    assert!(d.iter().any(|s| s["status"] == "completed"));
    hookline_tests::eventually(20, "dead letter marked requeued", || async {
        let (_, dl) = p.get(&format!("/v1/dead-letters/{dead}")).await;
        (dl["state"] == "requeued").then_some(())
    })
    .await;
    assert_eq!(r.deliveries("/q").len(), 2, "one failed attempt, one requeued delivery");
}
