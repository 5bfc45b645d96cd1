//! Process metrics: counters and an attempt-latency histogram, rendered in
//! the Prometheus text format by `/metrics`.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use crate::health::BreakerState;

/// Most per-subscription series `/metrics` shows (the unhealthy ones with
/// the most failures in a row).
pub const UNHEALTHY_SERIES: usize = 100;

/// Upper bounds (ms) of the attempt-latency histogram buckets.
const BUCKETS_MS: [u64; 12] = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 5000, 15000];

/// Counters since the process started.
#[derive(Default)]
pub struct Metrics {
    /// Events accepted (new, not duplicates).
    pub events_accepted: AtomicU64,
    /// Duplicate events acknowledged without storing.
    pub events_duplicate: AtomicU64,
    /// Requests rejected for bad input.
    pub events_rejected: AtomicU64,
    /// Attempts that got a 2xx.
    pub deliveries_delivered: AtomicU64,
    /// Attempts that failed and may be retried.
    pub deliveries_failed: AtomicU64,
    /// Attempts refused or answered 410.
    pub deliveries_rejected: AtomicU64,
    /// Jobs deferred by a fault on Hookline's side, a limit or an open
    /// breaker (no attempt counted).
    pub deliveries_deferred: AtomicU64,
    /// Delivery jobs given up at their queue's last receive with nothing
    /// recorded (no attempt, no dead letter): on their way to the
    /// deliveries DLQ, found only by this count (its alarm) and a redrive.
    pub jobs_abandoned: AtomicU64,
    /// Circuit breakers opened (a subscription's deliveries now wait).
    pub breakers_opened: AtomicU64,
    /// Circuit breakers closed again by a successful probe.
    pub breakers_closed: AtomicU64,
    /// Retries scheduled.
    pub retries_scheduled: AtomicU64,
    /// Sagas dead-lettered.
    pub dead_letters: AtomicU64,
    /// Rows deleted by the retention purge of `hookline serve`
    /// (`hookline_sqlite::purge`), by table: storage stays bounded only if
    /// these keep pace with ingest.
    pub purged: PurgedCounters,
    /// What the reconciler ([`crate::stage::reconcile`]) re-drove.
    pub reconciled: ReconcileCounters,
    /// Subscribers' acknowledgements received ([`crate::ack`]), by status.
    pub acknowledgements: AckCounters,
    latency_buckets: [AtomicU64; BUCKETS_MS.len()],
    latency_count: AtomicU64,
    latency_sum_ms: AtomicU64,
    /// What the last EMF line reported, and latencies since (Lambda only).
    emf: Mutex<EmfState>,
    /// Attempts by the event's producer and outcome, for the first
    /// [`PRODUCER_SERIES`] producers this process saw.
    pub by_producer: ProducerCounters,
}

/// How many producers [`ProducerCounters`] names (per process, the first
/// seen); attempts of any other are counted under [`OTHER_PRODUCER`], so
/// `/metrics` has at most `3 × (PRODUCER_SERIES + 2)` such series whatever
/// producers send.
pub const PRODUCER_SERIES: usize = 50;

/// The longest producer name a series shows (longer ones are cut, on a
/// character boundary).
pub const PRODUCER_LABEL_CHARS: usize = 64;

/// The series of events without a producer.
pub const NO_PRODUCER: &str = "(none)";

/// The series of producers past the first [`PRODUCER_SERIES`].
pub const OTHER_PRODUCER: &str = "(other)";

/// The outcomes [`ProducerCounters`] counts, in its counters' order.
const PRODUCER_OUTCOMES: [&str; 3] = ["delivered", "failed", "rejected"];

/// Delivery attempts by producer (`EventRecord::producer`) and outcome,
/// bounded: one lock and one map lookup per attempt.
#[derive(Default)]
pub struct ProducerCounters {
    counts: Mutex<std::collections::HashMap<String, [u64; 3]>>,
}

/// How an attempt ended, as [`ProducerCounters`] counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProducerOutcome {
    /// 2xx.
    Delivered,
    /// Failed, may be retried.
    Failed,
    /// Refused or 410: not retried.
    Rejected,
}

impl ProducerCounters {
    /// Counts one attempt of an event of `producer`.
    pub fn count(&self, producer: Option<&str>, outcome: ProducerOutcome) {
        let name = match producer {
            None => NO_PRODUCER,
            Some(p) => match p.char_indices().nth(PRODUCER_LABEL_CHARS) {
                Some((cut, _)) => &p[..cut],
                None => p,
            },
        };
        let i = outcome as usize;
        let mut g = self.counts.lock().expect("producer counters");
        if let Some(c) = g.get_mut(name) {
            c[i] += 1;
            return;
        }
        let named = g.len() - usize::from(g.contains_key(NO_PRODUCER)) - usize::from(g.contains_key(OTHER_PRODUCER));
        let key = if named < PRODUCER_SERIES || name == NO_PRODUCER { name } else { OTHER_PRODUCER };
        g.entry(key.to_string()).or_default()[i] += 1;
    }

    /// The counters, by producer name (sorted).
    pub fn snapshot(&self) -> Vec<(String, [u64; 3])> {
        let mut v: Vec<_> =
            self.counts.lock().expect("producer counters").iter().map(|(k, c)| (k.clone(), *c)).collect();
        v.sort();
        v
    }
}

/// A Prometheus label value: backslash, double quote and newline escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Acknowledgements received since the process started, by status
/// (`hookline_acknowledgements_total{status}`).
#[derive(Default)]
pub struct AckCounters {
    /// `processed`.
    pub processed: AtomicU64,
    /// `failed`.
    pub failed: AtomicU64,
    /// Refused: a wrong or missing signature (`401`) or a bad field (`422`).
    pub refused: AtomicU64,
}

impl AckCounters {
    /// Counts one stored acknowledgement of `status`.
    pub fn count(&self, status: crate::ack::AckStatus) {
        match status {
            crate::ack::AckStatus::Processed => &self.processed,
            crate::ack::AckStatus::Failed => &self.failed,
        }
        .fetch_add(1, Relaxed);
    }
}

/// Rows the retention purge deleted since the process started, by table.
#[derive(Default)]
pub struct PurgedCounters {
    /// Events past their retention.
    pub events: AtomicU64,
    /// Their sagas.
    pub sagas: AtomicU64,
    /// Their sagas' attempts.
    pub attempts: AtomicU64,
    /// Resolved dead letters past the dead-letter retention.
    pub dead_letters: AtomicU64,
    /// Outbox rows left behind by purged records, and dead-letter-queue
    /// messages past the dead-letter retention.
    pub other: AtomicU64,
}

/// Stuck work the reconciler found and re-drove since the process started.
#[derive(Default)]
pub struct ReconcileCounters {
    /// Events of given-up stream batches routed again.
    pub events_rerouted: AtomicU64,
    /// Sagas started, attempts replayed, or stalled sagas re-driven.
    pub sagas_redriven: AtomicU64,
    /// Given-up batches that could not be resolved (ops must look).
    pub unresolved: AtomicU64,
}

#[derive(Default)]
struct EmfState {
    reported: [u64; 10],
    latencies: Vec<u64>,
}

/// Most latency samples one EMF line carries.
const EMF_MAX_SAMPLES: usize = 100;

impl Metrics {
    /// Records one attempt's latency.
    pub fn observe_latency(&self, ms: u64) {
        for (i, b) in BUCKETS_MS.iter().enumerate() {
            if ms <= *b {
                self.latency_buckets[i].fetch_add(1, Relaxed);
            }
        }
        self.latency_count.fetch_add(1, Relaxed);
        self.latency_sum_ms.fetch_add(ms, Relaxed);
        let mut emf = self.emf.lock().expect("metrics lock");
        if emf.latencies.len() < EMF_MAX_SAMPLES {
            emf.latencies.push(ms);
        }
    }

    /// What happened since the last call, as one CloudWatch Embedded Metric
    /// Format line (namespace `Hookline`, dimension `Function`); `None` when
    /// nothing happened. Lambda functions print it after each invocation.
    pub fn take_emf(&self, function: &str, timestamp_ms: i64) -> Option<String> {
        let names = [
            "EventsAccepted",
            "Delivered",
            "DeliveryFailed",
            "DeliveryRejected",
            "Retries",
            "DeadLetters",
            "EventsRejected",
            "BreakersOpened",
            "BreakersClosed",
            "JobsAbandoned",
        ];
        let now = [
            &self.events_accepted,
            &self.deliveries_delivered,
            &self.deliveries_failed,
            &self.deliveries_rejected,
            &self.retries_scheduled,
            &self.dead_letters,
            &self.events_rejected,
            &self.breakers_opened,
            &self.breakers_closed,
            &self.jobs_abandoned,
        ]
        .map(|c| c.load(Relaxed));
        let mut emf = self.emf.lock().expect("metrics lock");
        let delta: Vec<u64> = now.iter().zip(emf.reported).map(|(n, r)| n - r).collect();
        let latencies = std::mem::take(&mut emf.latencies);
        emf.reported = now;
        if delta.iter().all(|d| *d == 0) && latencies.is_empty() {
            return None;
        }
        let mut metrics: Vec<serde_json::Value> =
            names.iter().map(|n| serde_json::json!({"Name": n, "Unit": "Count"})).collect();
        let mut doc = serde_json::json!({"Function": function});
        for (n, d) in names.iter().zip(&delta) {
            doc[*n] = serde_json::json!(d);
        }
        if !latencies.is_empty() {
            metrics.push(serde_json::json!({"Name": "AttemptLatency", "Unit": "Milliseconds"}));
            doc["AttemptLatency"] = serde_json::json!(latencies);
        }
        doc["_aws"] = serde_json::json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{"Namespace": "Hookline", "Dimensions": [["Function"]], "Metrics": metrics}],
        });
        Some(doc.to_string())
    }

    /// The Prometheus text exposition, with queue depths, open dead letters
    /// and the subscriptions whose breaker is not closed (from
    /// [`crate::stage::breaker::HealthCache::unhealthy`]) read by the caller.
    pub fn render(
        &self,
        queues: &[(&str, QueueDepth)],
        open_dead_letters: Option<u64>,
        unhealthy: &[crate::health::Unhealthy],
    ) -> String {
        let mut out = String::new();
        let mut counter = |name: &str, help: &str, v: &AtomicU64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}", v.load(Relaxed));
        };
        counter("hookline_events_accepted_total", "Events accepted and stored.", &self.events_accepted);
        counter("hookline_events_duplicate_total", "Events acknowledged as duplicates.", &self.events_duplicate);
        counter("hookline_events_rejected_total", "Event requests rejected for bad input.", &self.events_rejected);
        counter(
            "hookline_retries_scheduled_total",
            "Retries scheduled after failed attempts.",
            &self.retries_scheduled,
        );
        counter("hookline_dead_letters_total", "Sagas dead-lettered.", &self.dead_letters);
        counter("hookline_breakers_opened_total", "Subscription circuit breakers opened.", &self.breakers_opened);
        counter(
            "hookline_breakers_closed_total",
            "Subscription circuit breakers closed by a successful probe.",
            &self.breakers_closed,
        );
        let _ = writeln!(
            out,
            "# HELP hookline_deliveries_total Delivery attempts by outcome.\n# TYPE hookline_deliveries_total counter"
        );
        for (outcome, v) in [
            ("delivered", &self.deliveries_delivered),
            ("failed", &self.deliveries_failed),
            ("rejected", &self.deliveries_rejected),
            ("deferred", &self.deliveries_deferred),
        ] {
            let _ = writeln!(out, "hookline_deliveries_total{{outcome=\"{outcome}\"}} {}", v.load(Relaxed));
        }
        let _ = writeln!(
            out,
            "# HELP hookline_deliveries_by_producer_total Delivery attempts by the event's producer (the first {PRODUCER_SERIES} seen by this process; the others as {OTHER_PRODUCER}) and outcome.\n# TYPE hookline_deliveries_by_producer_total counter"
        );
        for (producer, counts) in self.by_producer.snapshot() {
            for (outcome, n) in PRODUCER_OUTCOMES.iter().zip(counts) {
                let _ = writeln!(
                    out,
                    "hookline_deliveries_by_producer_total{{producer=\"{}\",outcome=\"{outcome}\"}} {n}",
                    label(&producer)
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP hookline_jobs_abandoned_total Delivery jobs given up at their last receive with nothing recorded (moved to the deliveries dead-letter queue).\n# TYPE hookline_jobs_abandoned_total counter\nhookline_jobs_abandoned_total {}",
            self.jobs_abandoned.load(Relaxed)
        );
        let _ = writeln!(out, "# HELP hookline_purged_total Rows deleted by the retention purge, by table.\n# TYPE hookline_purged_total counter");
        for (table, v) in [
            ("events", &self.purged.events),
            ("sagas", &self.purged.sagas),
            ("attempts", &self.purged.attempts),
            ("dead_letters", &self.purged.dead_letters),
            ("other", &self.purged.other),
        ] {
            let _ = writeln!(out, "hookline_purged_total{{table=\"{table}\"}} {}", v.load(Relaxed));
        }
        let _ = writeln!(out, "# HELP hookline_acknowledgements_total Subscribers' acknowledgements received, by status (refused: bad signature or field).\n# TYPE hookline_acknowledgements_total counter");
        for (status, v) in [
            ("processed", &self.acknowledgements.processed),
            ("failed", &self.acknowledgements.failed),
            ("refused", &self.acknowledgements.refused),
        ] {
            let _ = writeln!(out, "hookline_acknowledgements_total{{status=\"{status}\"}} {}", v.load(Relaxed));
        }
        let _ = writeln!(out, "# HELP hookline_reconciled_total Stuck work the reconciler re-drove, by kind.\n# TYPE hookline_reconciled_total counter");
        for (kind, v) in [
            ("events_rerouted", &self.reconciled.events_rerouted),
            ("sagas_redriven", &self.reconciled.sagas_redriven),
            ("unresolved", &self.reconciled.unresolved),
        ] {
            let _ = writeln!(out, "hookline_reconciled_total{{kind=\"{kind}\"}} {}", v.load(Relaxed));
        }
        let _ = writeln!(
            out,
            "# HELP hookline_attempt_latency_ms Delivery attempt latency.\n# TYPE hookline_attempt_latency_ms histogram"
        );
        for (i, b) in BUCKETS_MS.iter().enumerate() {
            let _ = writeln!(
                out,
                "hookline_attempt_latency_ms_bucket{{le=\"{b}\"}} {}",
                self.latency_buckets[i].load(Relaxed)
            );
        }
        let count = self.latency_count.load(Relaxed);
        let _ = writeln!(out, "hookline_attempt_latency_ms_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "hookline_attempt_latency_ms_sum {}", self.latency_sum_ms.load(Relaxed));
        let _ = writeln!(out, "hookline_attempt_latency_ms_count {count}");
        let _ = writeln!(
            out,
            "# HELP hookline_queue_depth Messages per queue and state.\n# TYPE hookline_queue_depth gauge"
        );
        for (q, d) in queues {
            for (state, v) in [("visible", d.visible), ("not_visible", d.not_visible), ("dead", d.dead)] {
                let _ = writeln!(out, "hookline_queue_depth{{queue=\"{q}\",state=\"{state}\"}} {v}");
            }
        }
        let _ = writeln!(out, "# HELP hookline_subscriptions_unhealthy Subscriptions whose circuit breaker is open or half-open (as this process last read them).\n# TYPE hookline_subscriptions_unhealthy gauge");
        for state in [BreakerState::Open, BreakerState::HalfOpen] {
            let n = unhealthy.iter().filter(|u| u.breaker == state).count();
            let _ = writeln!(out, "hookline_subscriptions_unhealthy{{breaker=\"{}\"}} {n}", state.as_str());
        }
        // One series per unhealthy subscription, the worst first, at most
        // UNHEALTHY_SERIES of them: a million healthy subscriptions add none.
        let _ = writeln!(out, "# HELP hookline_subscription_consecutive_failures Failures in a row of a subscription whose breaker is not closed (the {UNHEALTHY_SERIES} with the most).\n# TYPE hookline_subscription_consecutive_failures gauge");
        for u in unhealthy.iter().take(UNHEALTHY_SERIES) {
            let _ = writeln!(
                out,
                "hookline_subscription_consecutive_failures{{subscription_id=\"{}\",breaker=\"{}\"}} {}",
                u.subscription_id,
                u.breaker.as_str(),
                u.consecutive_failures
            );
        }
        if let Some(n) = open_dead_letters {
            let _ = writeln!(out, "# HELP hookline_dead_letters_open Dead letters awaiting requeue or skip.\n# TYPE hookline_dead_letters_open gauge\nhookline_dead_letters_open {n}");
        }
        out
    }
}

/// How many messages a queue holds, for metrics and alarms.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct QueueDepth {
    /// Ready to receive.
    pub visible: u64,
    /// Received and not yet deleted, or delayed.
    pub not_visible: u64,
    /// In the queue's dead-letter queue.
    pub dead: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative() {
        let m = Metrics::default();
        m.observe_latency(3);
        m.observe_latency(700);
        let unhealthy = [crate::health::Unhealthy {
            subscription_id: crate::ids::SubscriptionId::new("sub_down"),
            breaker: BreakerState::Open,
            consecutive_failures: 7,
        }];
        let text = m.render(&[("deliveries", QueueDepth { visible: 2, not_visible: 1, dead: 0 })], Some(4), &unhealthy);
        assert!(text.contains("hookline_attempt_latency_ms_bucket{le=\"5\"} 1"));
        assert!(text.contains("hookline_attempt_latency_ms_bucket{le=\"1000\"} 2"));
        assert!(text.contains("hookline_attempt_latency_ms_count 2"));
        assert!(text.contains("hookline_queue_depth{queue=\"deliveries\",state=\"visible\"} 2"));
        assert!(text.contains("hookline_dead_letters_open 4"));
        assert!(text.contains("hookline_purged_total{table=\"events\"} 0"));
        assert!(text.contains("hookline_subscriptions_unhealthy{breaker=\"open\"} 1"));
        assert!(text.contains("hookline_subscriptions_unhealthy{breaker=\"half_open\"} 0"));
        assert!(text
            .contains("hookline_subscription_consecutive_failures{subscription_id=\"sub_down\",breaker=\"open\"} 7"));
    }

    #[test]
    fn producers_are_counted_by_name_up_to_the_bound_then_as_other() {
        let m = Metrics::default();
        m.by_producer.count(Some("billing"), ProducerOutcome::Delivered);
        m.by_producer.count(Some("billing"), ProducerOutcome::Failed);
        m.by_producer.count(None, ProducerOutcome::Rejected);
        m.by_producer.count(Some("a\"b\nc\\"), ProducerOutcome::Delivered);
        for i in 0..PRODUCER_SERIES + 10 {
            m.by_producer.count(Some(&format!("p{i:03}")), ProducerOutcome::Delivered);
        }
        let long = "x".repeat(PRODUCER_LABEL_CHARS + 5);
        m.by_producer.count(Some(&long), ProducerOutcome::Delivered);
        let snap = m.by_producer.snapshot();
        assert_eq!(snap.len(), PRODUCER_SERIES + 2, "named, (none), and (other)");
        let text = m.render(&[], None, &[]);
        assert!(text.contains("hookline_deliveries_by_producer_total{producer=\"billing\",outcome=\"delivered\"} 1\n"));
        assert!(text.contains("hookline_deliveries_by_producer_total{producer=\"billing\",outcome=\"failed\"} 1\n"));
        assert!(text.contains("hookline_deliveries_by_producer_total{producer=\"(none)\",outcome=\"rejected\"} 1\n"));
        assert!(text.contains("producer=\"a\\\"b\\nc\\\\\""), "escaped: {text}");
        // billing and the escaped one, then p000..p047 are named; p048..p059
        // and the long one are other.
        let other = snap.iter().find(|(p, _)| p == OTHER_PRODUCER).expect("other");
        assert_eq!(other.1, [13, 0, 0]);
        assert!(text.contains("producer=\"p047\"") && !text.contains("producer=\"p048\""), "{text}");
        assert!(!text.contains(&long), "a long name is cut or counted as other");
        // Known producers keep counting by name past the bound.
        m.by_producer.count(Some("billing"), ProducerOutcome::Delivered);
        assert!(m.render(&[], None, &[]).contains("producer=\"billing\",outcome=\"delivered\"} 2\n"));
    }

    #[test]
    fn emf_reports_deltas_once() {
        let m = Metrics::default();
        assert!(m.take_emf("delivery", 1).is_none());
        m.deliveries_delivered.fetch_add(2, Relaxed);
        m.observe_latency(7);
        let line: serde_json::Value = serde_json::from_str(&m.take_emf("delivery", 5).unwrap()).unwrap();
        assert_eq!(line["Delivered"], 2);
        assert_eq!(line["AttemptLatency"], serde_json::json!([7]));
        assert_eq!(line["_aws"]["CloudWatchMetrics"][0]["Namespace"], "Hookline");
        assert_eq!(line["_aws"]["Timestamp"], 5);
        assert!(m.take_emf("delivery", 6).is_none(), "reported once");
        m.deliveries_delivered.fetch_add(1, Relaxed);
        let line: serde_json::Value = serde_json::from_str(&m.take_emf("delivery", 7).unwrap()).unwrap();
        assert_eq!(line["Delivered"], 1);
    }
}
