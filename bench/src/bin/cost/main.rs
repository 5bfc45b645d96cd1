//! AWS cost per delivery, measured on the emulator: the Lambda handlers over
//! DynamoDB and SQS in moto, driven as Lambda's event source mappings would
//! (`hookline_tests::aws_pipeline`), with every request of the backend's SDK
//! clients counted and its DynamoDB units computed
//! (`hookline_tests::metering`), plus the invocations and the requests the
//! mappings make on Lambda's behalf. Prints, per scenario, the counts per
//! delivered event and dollars per million deliveries from
//! `infra/prices.json`, next to the targets.
//!
//! Scenarios (1 KiB order-event payloads, deterministic, all deliveries
//! succeed on the first attempt):
//!   A. one subscription, `POST /v1/events` per event;
//!   B. one subscription, `POST /v1/events/batch` with 100 events each;
//!   C. one event per `POST /v1/events` fanned out to 10 subscriptions
//!      (reported per delivery: divided by 10 x events);
//!   D. A's flow (`--events`) with 10,000 more subscriptions that no event
//!      matches (`--unmatched`: half scoped to other tenants with the same
//!      event type, half global to other event types), written before the
//!      run (`--setup-concurrency` requests at once) as the store port's
//!      create writes them, or through it (`--setup store`, too slow on the
//!      emulator at this count: see [`create_unmatched`]): routing finds
//!      candidates through the index, so D should cost what A costs;
//!   G. B's flow (`--batch-events`, `--batch-size`) with the same
//!      `--unmatched` subscriptions as D: batches of 100 with 10,000
//!      stored subscriptions of which one matches should cost what B costs;
//!   E. A's flow (`--events`) to one subscription with `max_in_flight` and
//!      `rate_limit` set (`--max-in-flight`, `--rate-limit`): each delivery
//!      takes a slot and the next start in the HealthTable (`LimitStore`),
//!      so E minus A is what a limit costs per delivery.
//!   O. A's flow (`--events`) with each event in one of `--partitions`
//!      partitions (100; its `partition_key`) to one subscription ordered
//!      by partition (`"ordering": "partition"`): each event is numbered in
//!      a transaction with its partition's counter and each delivery waits
//!      for the one before it, so O minus A is what ordering costs.
//!
//!   F. a backlog waiting for its rate: `--backlog` jobs (300) queued at
//!      once for one subscription with `rate_limit` `--backlog-rate` (1/s),
//!      each delivered once (`hookline_tests::wait_scenarios::rate_limited_backlog`).
//!      Reported as requests per delivered job (SQS requests, DynamoDB
//!      writes, HealthTable writes), which must stay a small constant
//!      however long the line: each job books its own start and comes back
//!      once at it. It runs for `--backlog / --backlog-rate` seconds.
//!
//! `--rate` paces the ingest requests (per second, all producers), so that
//! scenarios whose pipelines run at different speeds on the emulator can be
//! compared at the same event rate.
//!
//! Every scenario also reports the DynamoDB `Scan` requests the meter saw
//! over the whole scenario (set-up included) and which function issued
//! each; with A and D or E in the same run, the differences are printed last.
//!
//! `make bench-cost` (starts and stops the emulator), or with the emulator
//! running and the AWS_* variables set:
//! `cargo run --release -p hookline-bench --bin cost -- --events 500 --batch-events 1000`.

mod payload;
mod scenarios;
mod summary;

use payload::*;
use scenarios::*;
use summary::*;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, Uri};
use hookline_tests::aws_pipeline::AwsPipeline;
use hookline_tests::lambda_driver::{DriverCounts, FunctionCounts, RequestCounts};
use hookline_tests::metering::{function_configs, FunctionConfig, Meter, MeterCounts, Prices};
use hookline_tests::pipeline::Pipeline;
use serde_json::{json, Value};
use shared::ids::new_subscription_id;
use shared::signing::Secret;
use shared::subscription::{SigningKey, Subscription};

// -------------------------------------------------------------------- args

struct Args {
    events: usize,
    batch_events: usize,
    batch_size: usize,
    fanout_events: usize,
    subscriptions: usize,
    concurrency: usize,
    payload_bytes: usize,
    scenarios: String,
    timeout: Duration,
    unmatched: usize,
    setup_concurrency: usize,
    setup_through_store: bool,
    max_in_flight: u32,
    rate_limit: f64,
    /// Ingest requests per second across the producers (0: as fast as they go).
    rate: f64,
    /// Scenario F: jobs queued for the rate-limited subscription.
    backlog: usize,
    /// Scenario F: its `rate_limit`, per second.
    backlog_rate: f64,
    /// `EVENT_LISTING` (`--event-listing false`: no listing entries).
    event_listing: bool,
    /// Scenario O: partition keys the events are spread over.
    partitions: usize,
    /// Events sent and delivered before the counters start (each
    /// scenario's own kind of event): one-time work of warm containers.
    warmup: usize,
}

impl Args {
    /// The pipeline's settings: a deployment's stall margin (1 hour; the
    /// tests' 2 s would make a job that waited longer read its saga), and
    /// the listing as asked.
    fn settings(&self) -> hookline_tests::pipeline::Settings {
        let s = hookline_tests::pipeline::Settings { stall_margin: Some("1h"), ..Default::default() };
        if self.event_listing {
            s
        } else {
            s.event_listing_off()
        }
    }
}

fn args() -> Args {
    let mut a = Args {
        events: 500,
        batch_events: 1000,
        batch_size: 100,
        fanout_events: 500,
        subscriptions: 10,
        concurrency: 4,
        payload_bytes: 1024,
        scenarios: "ABC".into(),
        timeout: Duration::from_secs(900),
        unmatched: 10_000,
        setup_concurrency: 16,
        setup_through_store: false,
        max_in_flight: 4,
        rate_limit: 1000.0,
        rate: 0.0,
        backlog: 300,
        backlog_rate: 1.0,
        event_listing: true,
        partitions: 100,
        warmup: 200,
    };
    let usage = "use --events N (A, D, E) --batch-events N (B) --batch-size N (B) --fanout-events N (C) \
                 --subscriptions N (C) --unmatched N (D, G) --setup-concurrency N (D, G) --setup items|store (D, G) --max-in-flight N (E) --event-listing true|false \
                 --rate-limit PER_S (E) --partitions N (O) --backlog N (F) --backlog-rate PER_S (F) --concurrency N \
                 --rate REQUESTS_PER_S --payload-bytes N --warmup N --scenarios ABCDEFGO --timeout SECS";
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{k} needs a value; {usage}"));
        let n = || v.parse::<usize>().unwrap_or_else(|_| panic!("{k} takes a number; {usage}"));
        match k.as_str() {
            "--events" => a.events = n(),
            "--batch-events" => a.batch_events = n(),
            "--batch-size" => a.batch_size = n(),
            "--fanout-events" => a.fanout_events = n(),
            "--subscriptions" => a.subscriptions = n(),
            "--concurrency" => a.concurrency = n().max(1),
            "--payload-bytes" => a.payload_bytes = n(),
            "--scenarios" => a.scenarios = v.to_ascii_uppercase(),
            "--timeout" => a.timeout = Duration::from_secs(n() as u64),
            "--unmatched" => a.unmatched = n(),
            "--partitions" => a.partitions = n().max(1),
            "--warmup" => a.warmup = n(),
            "--setup-concurrency" => a.setup_concurrency = n().max(1),
            "--setup" => {
                a.setup_through_store = match v.as_str() {
                    "store" => true,
                    "items" => false,
                    _ => panic!("{k} takes items or store; {usage}"),
                }
            }
            "--max-in-flight" => a.max_in_flight = u32::try_from(n()).unwrap_or(u32::MAX),
            "--rate-limit" => a.rate_limit = v.parse().unwrap_or_else(|_| panic!("{k} takes a number; {usage}")),
            "--rate" => a.rate = v.parse().unwrap_or_else(|_| panic!("{k} takes a number; {usage}")),
            "--backlog" => a.backlog = n().max(1),
            "--event-listing" => {
                a.event_listing = match v.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => panic!("{k} takes true or false; {usage}"),
                }
            }
            "--backlog-rate" => a.backlog_rate = v.parse().unwrap_or_else(|_| panic!("{k} takes a number; {usage}")),
            _ => panic!("unknown argument {k}; {usage}"),
        }
    }
    a
}

/// Scenario F: a backlog of `--backlog` jobs waiting for a `rate_limit` of
/// `--backlog-rate`, per delivered job.
async fn backlog(a: &Args) {
    let sdk = hookline_tests::emulator::aws_config().await;
    let meter = Meter::new();
    let p =
        AwsPipeline::start_with_clients("costF", meter.dynamodb_client(&sdk), meter.sqs_client(&sdk), &a.settings())
            .await;
    eprintln!("scenario F: {} jobs queued at once, rate_limit {}/s", a.backlog, a.backlog_rate);
    let t = Instant::now();
    let c = hookline_tests::wait_scenarios::rate_limited_backlog(&p, &meter, a.backlog, a.backlog_rate).await;
    println!();
    println!(
        "== Scenario F: {} jobs queued at once for one subscription with rate_limit {}/s, in {:.1}s ==",
        a.backlog,
        a.backlog_rate,
        t.elapsed().as_secs_f64()
    );
    println!("   delivered jobs: {}", c.delivered);
    println!(
        "   per delivered job: {:.2} SQS requests (sends, non-empty receives, deletes), {:.2} DynamoDB writes, \
         of which {:.2} to the HealthTable; {} failed conditions in all",
        c.sqs_per_job(),
        c.writes_per_job(),
        c.health_writes_per_job(),
        c.condition_failed
    );
    for ((table, op), n) in &c.writes_by_table {
        println!("   {table} {op}: {n}");
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() -> anyhow::Result<()> {
    let a = args();
    anyhow::ensure!(
        std::env::var("AWS_ENDPOINT_URL").is_ok_and(|e| !e.trim().is_empty()),
        "AWS_ENDPOINT_URL is not set: run `make bench-cost`, which starts the emulator"
    );
    let prices = Prices::load()?;
    let functions = function_configs();
    let sample = order_event("A", 0, a.payload_bytes);
    println!(
        "Hookline AWS cost per delivery, measured on the emulator (moto) at {}",
        std::env::var("AWS_ENDPOINT_URL").unwrap()
    );
    println!("Price table infra/prices.json as of {} ({}, USD): {}", prices.as_of, prices.region, prices.basis);
    println!(
        "Functions (template.yaml): {}",
        functions
            .iter()
            .map(|(f, c)| format!("{f} {} MB {}", c.memory_mb, c.architecture))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("Payload: {} bytes per event (order.created, deterministic pseudo-random fields), e.g.:", sample.len());
    println!("  {}", String::from_utf8_lossy(&sample));
    println!(
        "Producers: {} concurrent API clients, {}",
        a.concurrency,
        if a.rate > 0.0 {
            format!("{} ingest requests per second in all", a.rate)
        } else {
            "as fast as they go".into()
        }
    );

    println!(
        "Warm-up: {} events per scenario sent and delivered before the counters start (--warmup; one-time work of warm containers is not a cost per delivery)",
        a.warmup
    );

    let unmatched_how = if a.setup_through_store {
        "created through the store port"
    } else {
        "their items written as the store port's create writes them"
    };
    let (single, batch) = (Ingest::Single, Ingest::Batch(a.batch_size));
    let all = [
        Scenario {
            target: Some(4.00),
            ..Scenario::new(
                'A',
                "single-event ingest (POST /v1/events), 1 subscription, success on the first attempt".into(),
                a.events,
                single,
            )
        },
        Scenario {
            target: Some(2.75),
            ..Scenario::new(
                'B',
                format!("batch ingest (POST /v1/events/batch, {} events per request), 1 subscription", a.batch_size),
                a.batch_events,
                batch,
            )
        },
        Scenario {
            subscriptions: a.subscriptions,
            ..Scenario::new(
                'C',
                format!("fan-out: each event (POST /v1/events) to {} subscriptions, reported per delivery", a.subscriptions),
                a.fanout_events,
                single,
            )
        },
        Scenario {
            target: Some(4.00),
            unmatched: a.unmatched,
            ..Scenario::new(
                'D',
                format!(
                    "as A, with {} more subscriptions no event matches (half other tenants' with the same type, half global \
                     with other types), {unmatched_how}",
                    a.unmatched
                ),
                a.events,
                single,
            )
        },
        Scenario {
            target: Some(2.75),
            unmatched: a.unmatched,
            ..Scenario::new(
                'G',
                format!(
                    "as B (batches of {}), with {} more subscriptions no event matches (as D), {unmatched_how}",
                    a.batch_size, a.unmatched
                ),
                a.batch_events,
                batch,
            )
        },
        Scenario {
            subscription_fields: json!({"max_in_flight": a.max_in_flight, "rate_limit": a.rate_limit}),
            ..Scenario::new(
                'E',
                format!(
                    "as A, the subscription with max_in_flight {} and rate_limit {}/s (enforced across containers: \
                     LimitStore in the HealthTable)",
                    a.max_in_flight, a.rate_limit
                ),
                a.events,
                single,
            )
        },
        Scenario {
            subscription_fields: json!({"ordering": "partition"}),
            partitions: a.partitions,
            ..Scenario::new(
                'O',
                format!(
                    "as A, each event in one of {} partitions (partition_key), the subscription ordered by partition",
                    a.partitions
                ),
                a.events,
                single,
            )
        },
    ];
    let mut summaries: BTreeMap<char, Summary> = BTreeMap::new();
    for s in all.iter().filter(|s| a.scenarios.contains(s.key)) {
        eprintln!("scenario {}: {}", s.key, s.title);
        let m = run(s, &a).await?;
        summaries.insert(s.key, report(s, &m, &prices, &functions));
    }
    if let Some(base) = summaries.get(&'A') {
        if let Some(d) = summaries.get(&'D') {
            compare(('A', base), ('D', d), Some(5.0), &prices);
        }
        if let Some(e) = summaries.get(&'E') {
            compare(('A', base), ('E', e), None, &prices);
        }
        if let Some(o) = summaries.get(&'O') {
            compare(('A', base), ('O', o), None, &prices);
        }
    }
    if let (Some(base), Some(g)) = (summaries.get(&'B'), summaries.get(&'G')) {
        compare(('B', base), ('G', g), Some(5.0), &prices);
    }
    if a.scenarios.contains('F') {
        backlog(&a).await;
    }
    let scans: u64 = summaries.values().map(|s| s.scans).sum();
    println!();
    println!("DynamoDB Scan requests, all scenarios run ({}): {scans}", summaries.keys().collect::<String>());
    println!();
    println!("Notes:");
    println!("- DynamoDB units are computed from the items in each request/response as on-demand bills them (see tests/src/metering.rs); conditional writes that fail are charged; index writes are counted on their own rows.");
    println!("- DynamoDB Streams reads by Lambda are free; the driver reads streams through raw HTTP calls, not the metered SDK client, so they are never in the DynamoDB rows.");
    println!("- SQS counts every request of the functions' SDK client plus the non-empty receives and the deletes of the event source mappings; each request counts once per started 64 KB.");
    println!("- Lambda duration is each handler's wall time in this process against the emulator on this machine (rounded up to 1 ms per invocation), not a measurement on AWS; batch sizes follow the driver's polling, not Lambda's batching windows.");
    println!("- All handlers share one process here (one subscription cache); on Lambda each container has its own, so subscription reads grow with the number of warm containers (per container and 5 s TTL: one index Query per route key used and one GetItem per subscription read, never a Scan).");
    println!("- Scans: every DynamoDB Scan request of the backend's client (the one all handlers and the API share) over the whole scenario, set-up included; the issuing function is named from the call stack (a build without symbols cannot name it). The benchmark's own completion check reads the Sagas table through the emulator's raw API, outside the meter: not the backend's, not billed.");
    println!("- Scenarios D and G write their unmatched subscriptions before the counters are read: the items the store port's create writes (the subscription and its index entries) by BatchWriteItem, or with --setup store through the port (one TransactWriteItems each; slow on the emulator, which copies the table for every action).");
    println!("- Scenario E: each delivery takes one of max_in_flight slots (a conditional PutItem, given back with a conditional DeleteItem) and books its start under rate_limit (one conditional PutItem per batch of the subscription's jobs), HealthTable items; a full subscription defers the job for a growing, jittered wait and a start booked ahead defers it until then (failed conditions are billed).");
    println!("- Scenario F: a batch's jobs of a rate-limited subscription book consecutive starts in one conditional PutItem of its rate item (HealthTable); each job then comes back once, at its own start (SQS delays round up to whole seconds; a start more than 15 minutes ahead is reached in 15-minute hops, a send, receive and delete each, no write).");
    println!("- Not priced: storage, point-in-time recovery, CloudWatch Logs ingestion of the JSON logs and EMF metrics, data transfer, free tiers.");
    Ok(())
}
