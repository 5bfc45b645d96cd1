//! Waits (an open breaker, `rate_limit`, `max_in_flight`) on both backends:
//! a breaker never holds a delivery beyond its retry schedule, and on AWS a
//! backlog waiting for its subscription's rate costs a constant number of
//! requests per delivered job, counted by the metering interceptor
//! ([`crate::metering`]), not timed.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::aws_pipeline::AwsPipeline;
use crate::lambda_driver::DriverCounts;
use crate::metering::{Meter, MeterCounts};
use crate::pipeline::Pipeline;
use crate::{Behaviour, Receiver};

/// The retry schedule of the breaker scenario: three attempts, the last due
/// 2 s after the first (1 s + 1 s, an explicit schedule has no jitter).
const SCHEDULE_MS: [u64; 2] = [1000, 1000];

/// A subscription whose endpoint is down, with a breaker that opens after 3
/// failures and a cool-down (60 s, set by the caller) far longer than its
/// retry schedule (2 s): an event posted while the breaker is open is never
/// sent, and dead-letters with the reason `breaker_open` when its last
/// scheduled attempt is due (not before, and not when the probe comes), as
/// an open dead letter ops can requeue. Before, it waited for the probe.
pub async fn breaker_open_dead_letters_at_the_last_scheduled_attempt<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let (sub, _) = s
        .subscribe(json!({"callback_url": r.url("/down", Behaviour::Ok), "event_types": ["w.*"],
                          "retry_policy": {"schedule_ms": SCHEDULE_MS}}))
        .await;
    r.set("/down", Behaviour::Always(503));
    for i in 0..3 {
        let (st, _) = s.post("/v1/events", &json!({"type": "w.fail", "data": {"i": i}})).await;
        assert_eq!(st, 202);
    }
    crate::eventually(30, "the breaker open", || async {
        let (_, v) = s.get(&format!("/v1/subscriptions/{sub}")).await;
        (v["health"]["breaker"] == "open").then_some(())
    })
    .await;
    let before = chrono::Utc::now();
    let (st, ev) = s.post("/v1/events", &json!({"type": "w.held", "data": {}})).await;
    assert_eq!(st, 202, "{ev}");
    let held = ev["event_id"].as_str().unwrap().to_string();
    let dl = crate::eventually(25, "the held event's dead letter", || async {
        let (_, v) = s.get(&format!("/v1/dead-letters?subscription_id={sub}&limit=100")).await;
        v["items"].as_array().into_iter().flatten().find(|d| d["event_id"] == held.as_str()).cloned()
    })
    .await;
    let reason = dl["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with(shared::retry::BREAKER_OPEN), "reason {reason:?}: {dl}");
    assert_eq!(dl["state"], "open", "ops can requeue it: {dl}");
    // Not before its last attempt was due (2 s after it was created).
    let created: chrono::DateTime<chrono::Utc> = dl["created_at"].as_str().unwrap().parse().unwrap();
    let schedule = chrono::Duration::milliseconds(SCHEDULE_MS.iter().sum::<u64>() as i64);
    assert!(created >= before + schedule - chrono::Duration::milliseconds(50), "dead-lettered early: {dl}");
    // Never sent: the breaker held it all along.
    let sent = r.deliveries("/down").iter().filter(|d| d.header("hookline-event-type") == "w.held").count();
    assert_eq!(sent, 0, "requests for the held event");
    let d = s.settled_deliveries(&held, 1, 10).await;
    assert_eq!(d[0]["status"], "dead_lettered", "{}", d[0]);
}

/// A retry held by an open breaker for longer than the reconciler's stall
/// margin (2 s in the tests) looks stalled: the reconciler sends its job
/// again, counting the re-drive in the saga. When the endpoint recovers,
/// only the job with the saga's count posts; the job it was held as is
/// dropped unsent. Each event gets one request per attempt: its first
/// (failed) and one retry. Before, both jobs of the retry posted.
pub async fn a_retry_held_past_the_stall_margin_posts_once<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let (sub, _) = s
        .subscribe(json!({"callback_url": r.url("/held", Behaviour::Ok), "event_types": ["h.*"],
                          "retry_policy": {"schedule_ms": [300, 600_000]}}))
        .await;
    r.set("/held", Behaviour::Always(503));
    let mut ids = Vec::new();
    for i in 0..3 {
        let (st, v) = s.post("/v1/events", &json!({"type": "h.x", "data": {"i": i}})).await;
        assert_eq!(st, 202, "{v}");
        ids.push(v["event_id"].as_str().unwrap().to_string());
    }
    crate::eventually(30, "the breaker open", || async {
        let (_, v) = s.get(&format!("/v1/subscriptions/{sub}")).await;
        (v["health"]["breaker"] == "open").then_some(())
    })
    .await;
    // Back already, but the breaker holds the retries (due 300 ms later)
    // until its probe, 10 s on; past the stall margin the reconciler
    // re-drives them. (Back before the probe: a probe that failed would put
    // the next retry 10 minutes off.)
    r.set("/held", Behaviour::Ok);
    tokio::time::sleep(Duration::from_millis(3000)).await;
    s.reconcile().await;
    s.reconcile().await;
    for id in &ids {
        let d = s.settled_deliveries(id, 1, 60).await;
        assert_eq!(d[0]["status"], "completed", "{}", d[0]);
    }
    // Time for a second job of any retry to post, were there one.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let got = r.deliveries("/held");
    for id in &ids {
        let webhook = s.get(&format!("/v1/events/{id}/deliveries")).await.1["items"][0]["webhook_id"]
            .as_str()
            .unwrap()
            .to_string();
        let n = got.iter().filter(|d| d.header("webhook-id") == webhook).count();
        assert_eq!(n, 2, "{id}: one request per attempt (the failed first and one retry), got {n}");
    }
}

/// What a wait scenario cost, per delivered job.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitCosts {
    /// Jobs delivered (requests the receiver got).
    pub delivered: usize,
    /// SQS requests: every request of the functions' SDK client (sends),
    /// plus the event source mappings' non-empty receives and their deletes.
    pub sqs_requests: u64,
    /// DynamoDB write requests (`PutItem`, `UpdateItem`, `DeleteItem`,
    /// `BatchWriteItem`, `TransactWriteItems`), failed conditions included.
    pub dynamodb_writes: u64,
    /// Of which to the HealthTable (breaker, limit slots, rate bookings).
    pub health_writes: u64,
    /// Conditional writes whose condition failed (billed all the same).
    pub condition_failed: u64,
    /// DynamoDB write requests by (table, operation).
    pub writes_by_table: BTreeMap<(String, String), u64>,
}

impl WaitCosts {
    /// SQS requests per delivered job.
    pub fn sqs_per_job(&self) -> f64 {
        self.sqs_requests as f64 / self.delivered.max(1) as f64
    }

    /// DynamoDB writes per delivered job.
    pub fn writes_per_job(&self) -> f64 {
        self.dynamodb_writes as f64 / self.delivered.max(1) as f64
    }

    /// HealthTable writes per delivered job.
    pub fn health_writes_per_job(&self) -> f64 {
        self.health_writes as f64 / self.delivered.max(1) as f64
    }
}

const WRITES: [&str; 5] = ["PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"];

/// The costs between two snapshots of the meter and the driver.
fn costs(delivered: usize, m: &MeterCounts, d: &DriverCounts, d0: &DriverCounts) -> WaitCosts {
    let mut c = WaitCosts {
        delivered,
        sqs_requests: 0,
        dynamodb_writes: 0,
        health_writes: 0,
        condition_failed: 0,
        writes_by_table: BTreeMap::new(),
    };
    for ((service, op, resource), r) in &m.requests {
        match service.as_str() {
            "SQS" => c.sqs_requests += r.requests,
            "DynamoDB" if WRITES.contains(&op.as_str()) => {
                c.dynamodb_writes += r.requests;
                if resource == "HealthTable" {
                    c.health_writes += r.requests;
                }
                *c.writes_by_table.entry((resource.clone(), op.clone())).or_default() += r.requests;
            }
            _ => {}
        }
    }
    c.condition_failed = m.dynamodb.values().map(|u| u.condition_failed).sum();
    for (k, r) in &d.sqs {
        if k.1 == "ReceiveMessage (empty)" {
            continue; // idle polling: Lambda's, whatever the load
        }
        c.sqs_requests += r.requests - d0.sqs.get(k).map_or(0, |b| b.requests);
    }
    c
}

/// `jobs` events to one subscription with `rate_limit` `rate` (posted in
/// batches of up to 100, so the jobs queue at once and wait for the rate),
/// on the AWS pipeline `p` whose clients carry `meter`: every job is
/// delivered once, and what it cost is returned. Set-up (the subscription
/// and its verification) is not counted.
pub async fn rate_limited_backlog(p: &AwsPipeline, meter: &Meter, jobs: usize, rate: f64) -> WaitCosts {
    let r = Receiver::start().await;
    let (_sub, _) = p
        .subscribe(json!({"callback_url": r.url("/rated", Behaviour::Ok), "event_types": ["rated.*"],
                          "rate_limit": rate}))
        .await;
    let m0 = meter.snapshot();
    let d0 = p.stats().snapshot();
    let mut ids = Vec::with_capacity(jobs);
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(100) {
        let batch: Vec<Value> = chunk.iter().map(|i| json!({"type": "rated.x", "data": {"i": i}})).collect();
        let (st, v) = p.call("POST", "/v1/events/batch", Some(&serde_json::to_vec(&batch).unwrap())).await;
        assert_eq!(st, 202, "{v}");
        ids.extend(v["results"].as_array().unwrap().iter().map(|r| r["event_id"].as_str().unwrap().to_string()));
    }
    let secs = 60 + (jobs as f64 / rate) as u64;
    crate::eventually_every(secs, Duration::from_millis(200), "every rate-limited job delivered", || async {
        (r.deliveries("/rated").len() >= jobs).then_some(())
    })
    .await;
    for id in &ids {
        let d = p.settled_deliveries(id, 1, 30).await;
        assert_eq!(d[0]["status"], "completed", "{id}: {}", d[0]);
    }
    let delivered = r.deliveries("/rated").len();
    assert_eq!(delivered, jobs, "each job delivered once");
    costs(delivered, &meter.snapshot().since(&m0), &p.stats().snapshot(), &d0)
}

/// The wait scenarios that run on both backends, listed once
/// (`hookline_tests::wait_scenario_tests!(aws)`, `(serve)`). The
/// rate-limited backlog's cost ([`rate_limited_backlog`]) is counted in
/// AWS requests, so it runs on the AWS backend only (tests/tests/aws).
#[macro_export]
macro_rules! wait_scenario_tests {
    ($backend:ident) => {
        $crate::scenario_tests!($backend, wait_scenarios;
            breaker_open_dead_letters_at_the_last_scheduled_attempt;
                $crate::pipeline::Settings::default().breaker(3, 60_000, 60_000),
            a_retry_held_past_the_stall_margin_posts_once;
                $crate::pipeline::Settings::default().breaker(3, 10_000, 10_000).fast_reconcile(),
        );
    };
}
