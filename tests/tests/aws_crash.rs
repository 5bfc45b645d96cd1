//! Crashes on the AWS backend: a handler that panics between two of its
//! writes (a crashed Lambda invocation) loses nothing; the platform retries
//! the batch and the conditional writes keep it idempotent. Failpoints are
//! process-wide, so these run one at a time.

use hookline_tests::aws_pipeline::AwsPipeline;
use hookline_tests::pipeline::Pipeline;
use hookline_tests::{scenarios, Behaviour, Receiver};
use serde_json::json;
use tokio::sync::Mutex;

static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

async fn crash(tag: &str, failpoint: &str, receiver_calls: std::ops::RangeInclusive<usize>) {
    let _g = ONE_AT_A_TIME.lock().await;
    scenarios::crash_between_steps(&mut AwsPipeline::start(tag).await, failpoint, receiver_calls).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn router_crash_after_creating_sagas() {
    crash("route", "route.after_sagas", 1..=1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saga_step_crash_before_sending_the_job() {
    crash("saga", "saga.after_transition", 1..=1).await;
}

/// The worker dies after the POST: the job reappears after its visibility
/// timeout and is delivered once more with the same webhook-id; the attempt
/// is recorded once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivery_crash_after_the_post_before_recording() {
    crash("deliver", "deliver.before_record", 2..=2).await;
}

/// The ingest invocation dies after storing the event: the producer sees a
/// 500 and retries; the retry is a duplicate and the event is delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_crash_after_storing_the_event() {
    let _g = ONE_AT_A_TIME.lock().await;
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
    let _g = ONE_AT_A_TIME.lock().await;
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
    assert!(d.iter().any(|s| s["status"] == "Completed"));
    hookline_tests::eventually(20, "dead letter marked requeued", || async {
        let (_, dl) = p.get(&format!("/v1/dead-letters/{dead}")).await;
        (dl["state"] == "requeued").then_some(())
    })
    .await;
    assert_eq!(r.deliveries("/q").len(), 2, "one failed attempt, one requeued delivery");
}

/// Ordered delivery through a crash between two writes of each handler
/// (router, saga step, delivery, and the saga step leaving a lane).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_delivery_survives_a_crash_of_each_handler() {
    let _g = ONE_AT_A_TIME.lock().await;
    let failpoints = ["route.after_sagas", "saga.after_transition", "deliver.before_record", "order.after_leave"];
    scenarios::ordered_delivery_survives_crashes_in_the_middle(
        &mut AwsPipeline::start("ordered_crash").await,
        &failpoints,
    )
    .await;
}

/// Bulk requeue of 1,000 dead letters: the requeue invocation crashes half
/// way through the fifth page (between two of its writes); the message is
/// received again and the job resumes from its record, counting each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_requeue_of_1000_survives_a_crash_half_way() {
    let _g = ONE_AT_A_TIME.lock().await;
    let mut p = AwsPipeline::start("bulk_requeue").await;
    scenarios::bulk_requeue_survives_a_crash_half_way(&mut p, 1000, "bulk.half_page.page5").await;
}
