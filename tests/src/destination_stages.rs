//! Queue and bus destinations at the stage level, on both backends
//! (`tests/tests/{serve,aws}/stages.rs`): the delivery stage over a
//! transport that answers as SQS or EventBridge would when they are slow,
//! throttling or partly failing, which the emulator cannot be made to do.
//! Everything above the transport port holds as for an HTTPS callback: the
//! breaker counts AWS throttling, `max_in_flight` holds across containers,
//! a failed `PutEvents` entry is a failed attempt that is retried.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shared::destination::{Destination, DestinationKind};
use shared::health::BreakerState;
use shared::http_client::PostResult;
use shared::saga::{AttemptResult, SagaStatus};
use shared::stage::deliver;
use shared::transport::{aws_answer, Outbound, Transport};

use crate::stages::{feed_attempts, route_and_start, stored_event, subscription, Rig};

/// A transport that answers every message with `answer` (an AWS answer,
/// read by [`aws_answer`] as the real transport reads it) after `delay`,
/// and records what it was sent and how many calls were open at once.
struct Scripted {
    answer: Mutex<(u16, String)>,
    delay: Duration,
    sent: Mutex<Vec<(DestinationKind, Vec<u8>)>>,
    open: AtomicUsize,
    max_open: AtomicUsize,
}

impl Scripted {
    fn new(status: u16, body: &str, delay: Duration) -> Arc<Scripted> {
        Arc::new(Scripted {
            answer: Mutex::new((status, body.to_string())),
            delay,
            sent: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            max_open: AtomicUsize::new(0),
        })
    }

    fn answer_with(&self, status: u16, body: &str) {
        *self.answer.lock().unwrap() = (status, body.to_string());
    }

    fn sent(&self) -> usize {
        self.sent.lock().unwrap().len()
    }
}

#[async_trait::async_trait]
impl Transport for Scripted {
    async fn send(&self, to: &Destination, msg: Outbound<'_>) -> PostResult {
        let now = self.open.fetch_add(1, SeqCst) + 1;
        self.max_open.fetch_max(now, SeqCst);
        self.sent.lock().unwrap().push((to.kind(), msg.body.to_vec()));
        tokio::time::sleep(self.delay).await;
        self.open.fetch_sub(1, SeqCst);
        let (status, body) = self.answer.lock().unwrap().clone();
        let service = if to.kind() == DestinationKind::Sqs { "SQS" } else { "EventBridge" };
        aws_answer(service, status, &body, self.delay)
    }
}

/// A delivery container of `rig` whose transport is `t`, its breaker
/// opening after `failures`.
fn container(rig: &Rig, t: &Arc<Scripted>, failures: u32) -> Arc<shared::context::Hookline> {
    let mut h = Arc::try_unwrap(rig.container_with(Duration::from_secs(5), |c| {
        c.breaker.failure_threshold = failures;
        c.breaker.cool_down = Duration::from_secs(60);
    }))
    .unwrap_or_else(|_| panic!("a new container is not shared yet"));
    h.transport = t.clone();
    Arc::new(h)
}

const QUEUE: &str = "arn:aws:sqs:us-east-1:123456789012:stage-orders";
const BUS: &str = "arn:aws:events:us-east-1:123456789012:event-bus/stage-crm";

/// SQS throttling (HTTP 400 `RequestThrottled`) counts for the breaker as
/// an endpoint's 429: after two, the breaker opens and the next job waits
/// without an attempt; a missing queue (400 `QueueDoesNotExist`) fails the
/// attempt but leaves the breaker alone, as an endpoint's 404 does.
pub async fn queue_throttling_opens_the_breaker_and_a_missing_queue_does_not(rig: &Rig) {
    let t =
        Scripted::new(400, r#"{"__type":"com.amazonaws.sqs#RequestThrottled","message":"slow down"}"#, Duration::ZERO);
    let h = container(rig, &t, 2);
    let mut sub = subscription(QUEUE, true);
    // Retries far off: the held job waits for the breaker's probe, well
    // before its saga's last attempt is due.
    sub.retry_policy = shared::retry::RetryPolicy {
        max_attempts: 3,
        base_delay_ms: 600_000,
        max_delay_ms: 600_000,
        schedule_ms: None,
    };
    rig.stores.subscriptions.create(&sub).await.unwrap();
    let mut sagas = Vec::new();
    for i in 0..3 {
        sagas.extend(route_and_start(&h, &stored_event(rig, &format!("dest-breaker-{i}")).await).await);
    }
    let jobs = rig.take_jobs(3).await;
    for j in &jobs {
        assert_eq!(deliver::deliver_received(&h, std::slice::from_ref(j)).await, vec![true]);
    }
    assert_eq!(t.sent(), 2, "the third job waited for the open breaker: no request");
    let health = rig.stores.health.get(&sub.id).await.unwrap().expect("the breaker's record");
    assert_eq!(health.breaker, BreakerState::Open, "{health:?}");
    let mut attempts = Vec::new();
    for s in &sagas {
        attempts.extend(rig.stores.attempts.list(&s.event_id, &s.id).await.unwrap());
    }
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    for a in &attempts {
        assert_eq!(a.status_code, Some(429), "throttling is recorded as a 429: {a:?}");
        assert!(
            matches!(&a.result, AttemptResult::Failed { error, .. } if error.contains("RequestThrottled")),
            "{a:?}"
        );
    }

    let t = Scripted::new(400, r#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist"}"#, Duration::ZERO);
    let h = container(rig, &t, 2);
    let other = subscription(QUEUE, true);
    rig.stores.subscriptions.create(&other).await.unwrap();
    for i in 0..3 {
        let e = stored_event(rig, &format!("dest-missing-{i}")).await;
        route_and_start(&h, &e).await;
    }
    let mut jobs = Vec::new();
    while jobs.len() < 3 {
        jobs.extend(rig.take_jobs(3).await.into_iter().filter(|j| j.job.subscription_id == other.id));
    }
    for j in &jobs {
        assert_eq!(deliver::deliver_received(&h, std::slice::from_ref(j)).await, vec![true]);
    }
    assert_eq!(t.sent(), 3, "every job was attempted");
    let health = rig.stores.health.get(&other.id).await.unwrap();
    assert!(health.as_ref().is_none_or(|h| h.breaker == BreakerState::Closed), "{health:?}");
}

/// `max_in_flight: 1` on a queue holds over two delivery containers: the
/// transport never has two messages of the subscription open at once.
pub async fn queue_max_in_flight_holds_across_containers(rig: &Rig) {
    let t = Scripted::new(200, r#"{"MessageId":"m"}"#, Duration::from_millis(300));
    let router = rig.container(Duration::from_secs(5));
    let mut sub = subscription(QUEUE, true);
    sub.max_in_flight = Some(1);
    rig.stores.subscriptions.create(&sub).await.unwrap();
    for i in 0..4 {
        route_and_start(&router, &stored_event(rig, &format!("dest-limit-{i}")).await).await;
    }
    let jobs = rig.take_jobs(4).await;
    let (a, b) = (container(rig, &t, 5), container(rig, &t, 5));
    let (da, db) = tokio::join!(deliver::deliver_received(&a, &jobs[..2]), deliver::deliver_received(&b, &jobs[2..]));
    assert!(da.iter().chain(&db).all(|d| *d));
    assert_eq!(t.max_open.load(SeqCst), 1, "one message at a time over both containers");
    assert!(t.sent() < 4, "the jobs that found the slot taken were deferred, not sent");
}

/// A `PutEvents` answered 200 with `FailedEntryCount: 1` is a failed
/// attempt (recorded as 500, never as a success), retried; the next attempt
/// that EventBridge takes completes the saga.
pub async fn a_failed_put_events_entry_is_retried_then_completes(rig: &Rig) {
    let t = Scripted::new(
        200,
        r#"{"FailedEntryCount":1,"Entries":[{"ErrorCode":"InternalFailure","ErrorMessage":"try again"}]}"#,
        Duration::ZERO,
    );
    let h = container(rig, &t, 5);
    let sub = subscription(BUS, true);
    rig.stores.subscriptions.create(&sub).await.unwrap();
    let sagas = route_and_start(&h, &stored_event(rig, "dest-partial-1").await).await;
    let jobs = rig.take_jobs(1).await;
    assert_eq!(deliver::deliver_received(&h, &jobs).await, vec![true]);
    let attempts = rig.stores.attempts.list(&sagas[0].event_id, &sagas[0].id).await.unwrap();
    assert_eq!(attempts[0].status_code, Some(500), "{attempts:?}");
    assert!(matches!(&attempts[0].result, AttemptResult::Failed { error, .. } if error.contains("InternalFailure")));
    feed_attempts(&h, &sagas[0]).await;
    // The retry timer fires (the saga stage queues the next job).
    let timers = crate::eventually(15, "the retry timer", || async {
        let got = rig.stores.retries.raw().receive(10, Duration::from_secs(60)).await.unwrap();
        let receipts: Vec<String> = got.iter().map(|m| m.receipt.clone()).collect();
        rig.stores.retries.raw().delete(&receipts).await.unwrap();
        let timers: Vec<shared::message::RetryTimer> =
            got.iter().map(|m| serde_json::from_str(&m.body).unwrap()).collect();
        (!timers.is_empty()).then_some(timers)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await; // past its due time (the policy waits ≤ 100 ms)
    for timer in &timers {
        assert_eq!(shared::stage::saga::on_timer(&h, timer).await.unwrap(), shared::stage::saga::TimerOutcome::Done);
    }
    t.answer_with(200, r#"{"FailedEntryCount":0,"Entries":[{"EventId":"e1"}]}"#);
    let jobs = rig.take_jobs(1).await;
    assert_eq!(jobs[0].job.attempt, 2);
    assert_eq!(deliver::deliver_received(&h, &jobs).await, vec![true]);
    feed_attempts(&h, &sagas[0]).await;
    let saga = h.stores.sagas.get(&sagas[0].event_id, &sagas[0].id).await.unwrap().unwrap();
    assert_eq!(saga.state.status, SagaStatus::Completed);
    assert_eq!(t.sent(), 2);
    assert!(t.sent.lock().unwrap().iter().all(|(k, _)| *k == DestinationKind::EventBridge));
}

/// Every destination stage scenario, for the backend test files (as
/// `module::name`, beside `for_each_stage_scenario`'s).
#[macro_export]
macro_rules! for_each_destination_stage_scenario {
    ($m:ident) => {
        $m!(destination_stages::queue_throttling_opens_the_breaker_and_a_missing_queue_does_not);
        $m!(destination_stages::queue_max_in_flight_holds_across_containers);
        $m!(destination_stages::a_failed_put_events_entry_is_retried_then_completes);
    };
}
