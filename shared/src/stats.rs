//! Delivery statistics, pure: a fixed log-scale latency histogram whose
//! buckets add (so two processes' counts of one minute merge by adding,
//! which DynamoDB's `UpdateItem ADD` and SQLite's upsert both do), the
//! per-(series, minute) tallies a process keeps in memory as the delivery
//! stage records attempt outcomes, and the percentile estimates read back
//! from a histogram.
//!
//! A process writes each series' minute once, when the minute has closed
//! ([`StatsAggregator::take_closed`]): `hookline serve` from a background
//! tick, a Lambda container at the end of an invocation. So the hot path
//! costs no store write; the store sees at most one add per series per
//! minute per process (docs/stats.md has the cost). The writing itself is
//! [`crate::stage::stats`]; the store is [`crate::ports::StatsStore`].
//!
//! Series: one per subscription, one per tenant (subscriptions bound to
//! it), and one for the whole system, so `GET /v1/stats` reads one series
//! and never every subscription's.

use std::collections::HashMap;
use std::sync::Mutex;

use chrono::{DateTime, Duration, DurationRound, Utc};

use crate::ids::SubscriptionId;

/// Upper bounds (inclusive, milliseconds) of the latency histogram's
/// buckets, roughly ×1.5 apart from 1 ms to 60 s; one more bucket holds
/// everything above the last. Fixed forever: stored rows are bucket counts
/// by index, so changing a bound would misread every stored row.
pub const LATENCY_BOUNDS_MS: [u64; 25] = [
    1, 2, 3, 5, 8, 12, 20, 30, 50, 75, 100, 150, 250, 400, 600, 1_000, 1_500, 2_500, 4_000, 6_000, 10_000, 15_000,
    25_000, 40_000, 60_000,
];

/// Number of histogram buckets: the bounded ones and the overflow bucket.
pub const BUCKETS: usize = LATENCY_BOUNDS_MS.len() + 1;

/// Longest range of minute points one read may ask for (1440 points).
pub const MAX_MINUTE_RANGE: Duration = Duration::hours(24);

/// Most (series, minute) tallies a process holds before the next flush;
/// samples of a new series beyond it are dropped (and logged), so memory
/// stays bounded whatever the number of subscriptions.
pub const MAX_OPEN_TALLIES: usize = 50_000;

/// A latency histogram over [`LATENCY_BOUNDS_MS`]: counts that add.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Histogram {
    counts: [u64; BUCKETS],
}

/// A stored histogram that is not [`BUCKETS`] counts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a stored latency histogram has {0} buckets, not {BUCKETS}")]
pub struct BadHistogram(pub usize);

impl Histogram {
    /// The bucket of a latency.
    pub fn bucket_of(ms: u64) -> usize {
        LATENCY_BOUNDS_MS.iter().position(|b| ms <= *b).unwrap_or(LATENCY_BOUNDS_MS.len())
    }

    /// Counts one latency.
    pub fn observe(&mut self, ms: u64) {
        self.counts[Self::bucket_of(ms)] += 1;
    }

    /// Adds another histogram's counts.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts) {
            *a += b;
        }
    }

    /// Latencies counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The counts, bucket by bucket.
    pub fn counts(&self) -> &[u64; BUCKETS] {
        &self.counts
    }

    /// A histogram from stored counts (exactly [`BUCKETS`] of them).
    pub fn from_counts(counts: &[u64]) -> Result<Histogram, BadHistogram> {
        let counts: [u64; BUCKETS] = counts.try_into().map_err(|_| BadHistogram(counts.len()))?;
        Ok(Histogram { counts })
    }

    /// The `q` quantile (0 < q ≤ 1) in milliseconds, estimated by linear
    /// interpolation inside the bucket that holds it (at most one bucket's
    /// width off, about ±25 %); the overflow bucket answers its lower bound.
    /// `None` when nothing was counted.
    pub fn percentile(&self, q: f64) -> Option<f64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut below = 0u64;
        for (i, c) in self.counts.iter().enumerate() {
            if *c > 0 && below + c >= rank {
                let lower = if i == 0 { 0 } else { LATENCY_BOUNDS_MS[i - 1] } as f64;
                let Some(upper) = LATENCY_BOUNDS_MS.get(i) else { return Some(lower) };
                let within = (rank - below) as f64 / *c as f64;
                return Some(lower + (*upper as f64 - lower) * within);
            }
            below += c;
        }
        None
    }
}

/// What happened in one series over one bucket of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    /// Attempts answered 2xx.
    pub succeeded: u64,
    /// Attempts that did not succeed (an error status, a timeout, a refused
    /// connection, a refusal), retried or not.
    pub failed: u64,
    /// Attempts that ended their saga as a dead letter (counted among
    /// `failed` too).
    pub dead_lettered: u64,
    /// Latencies of the attempts that made a request.
    pub latency: Histogram,
}

impl Tally {
    /// Adds another tally.
    pub fn merge(&mut self, other: &Tally) {
        self.succeeded += other.succeeded;
        self.failed += other.failed;
        self.dead_lettered += other.dead_lettered;
        self.latency.merge(&other.latency);
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.succeeded == 0 && self.failed == 0 && self.dead_lettered == 0 && self.latency.count() == 0
    }

    /// Counts one attempt outcome.
    pub fn observe(&mut self, s: &Sample) {
        if s.succeeded {
            self.succeeded += 1;
        } else {
            self.failed += 1;
        }
        if s.dead_lettered {
            self.dead_lettered += 1;
        }
        if let Some(ms) = s.latency_ms {
            self.latency.observe(ms);
        }
    }
}

/// One attempt outcome as the delivery stage reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Answered 2xx.
    pub succeeded: bool,
    /// This attempt ends its saga as a dead letter (by the saga step's rule,
    /// [`crate::saga::decide`]).
    pub dead_lettered: bool,
    /// Latency, when a request was made.
    pub latency_ms: Option<u64>,
}

/// A time series of statistics.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Series {
    /// One subscription's attempts.
    Subscription(SubscriptionId),
    /// The attempts of one tenant's subscriptions.
    Tenant(String),
    /// Every attempt.
    System,
}

impl Series {
    /// The series' key as stored (`sub:<id>`, `tenant:<id>`, `system`).
    pub fn key(&self) -> String {
        match self {
            Series::Subscription(id) => format!("sub:{id}"),
            Series::Tenant(t) => format!("tenant:{t}"),
            Series::System => "system".to_string(),
        }
    }

    /// The series a subscription's attempt adds to: its own, its tenant's
    /// (when it has one), the system's.
    pub fn of_attempt(subscription: &SubscriptionId, tenant: Option<&str>) -> Vec<Series> {
        let mut s = vec![Series::Subscription(subscription.clone())];
        s.extend(tenant.map(|t| Series::Tenant(t.to_string())));
        s.push(Series::System);
        s
    }
}

/// How wide one stored point is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Width {
    /// One minute.
    Minute,
    /// One hour (the roll-up of its minutes, written alongside them).
    Hour,
}

impl Width {
    /// The width as a duration.
    pub fn duration(self) -> Duration {
        match self {
            Width::Minute => Duration::minutes(1),
            Width::Hour => Duration::hours(1),
        }
    }

    /// The start of the bucket holding `t`.
    pub fn start_of(self, t: DateTime<Utc>) -> DateTime<Utc> {
        t.duration_trunc(self.duration()).unwrap_or(t)
    }

    /// Its one-letter tag in stored keys (`m`, `h`).
    pub fn tag(self) -> &'static str {
        match self {
            Width::Minute => "m",
            Width::Hour => "h",
        }
    }
}

/// When a stored point of `width` starting at `at` may be deleted: after the
/// retention has passed over its end.
pub fn expires_at(at: DateTime<Utc>, width: Width, retention: Duration) -> DateTime<Utc> {
    at + width.duration() + retention
}

/// One stored point: a tally and the start of its bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    /// Start of the bucket.
    pub at: DateTime<Utc>,
    /// What it counted.
    pub tally: Tally,
}

/// Why a range cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    /// `since` is not before `until`.
    #[error("since must be before until")]
    Empty,
    /// Minute points over more than [`MAX_MINUTE_RANGE`].
    #[error("minute buckets cover at most 24 hours; use bucket=hour for longer ranges")]
    MinutesTooLong,
    /// Hour points over more than the retention.
    #[error("the range is longer than the retention period ({0} days)")]
    LongerThanRetention(i64),
}

impl RangeError {
    /// The query field the error is about: `until` for an empty range,
    /// `since` (the bound to move) for one too long.
    pub fn field(&self) -> &'static str {
        match self {
            RangeError::Empty => "until",
            RangeError::MinutesTooLong | RangeError::LongerThanRetention(_) => "since",
        }
    }
}

/// Checks a range to read: `since < until`, minute points over at most
/// [`MAX_MINUTE_RANGE`], hour points over at most `retention`.
pub fn check_range(
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    width: Width,
    retention: Duration,
) -> Result<(), RangeError> {
    if since >= until {
        return Err(RangeError::Empty);
    }
    match width {
        Width::Minute if until - since > MAX_MINUTE_RANGE => Err(RangeError::MinutesTooLong),
        Width::Hour if until - since > retention => Err(RangeError::LongerThanRetention(retention.num_days())),
        _ => Ok(()),
    }
}

/// A tally of one series' minute, taken from the aggregator to be stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed {
    /// The series.
    pub series: Series,
    /// Start of the minute.
    pub minute: DateTime<Utc>,
    /// What the process counted in it.
    pub tally: Tally,
}

/// This process's tallies not yet stored, per (series, minute).
#[derive(Debug, Default)]
pub struct StatsAggregator {
    open: Mutex<HashMap<(Series, DateTime<Utc>), Tally>>,
}

impl StatsAggregator {
    /// Counts one attempt outcome of `subscription` (of `tenant`) at `at` in
    /// each of its series. Returns `false` when the sample was dropped
    /// because [`MAX_OPEN_TALLIES`] are open.
    pub fn record(&self, subscription: &SubscriptionId, tenant: Option<&str>, s: &Sample, at: DateTime<Utc>) -> bool {
        let minute = Width::Minute.start_of(at);
        let mut open = self.open.lock().expect("stats aggregator");
        let series = Series::of_attempt(subscription, tenant);
        let new = series.iter().filter(|k| !open.contains_key(&((*k).clone(), minute))).count();
        if open.len() + new > MAX_OPEN_TALLIES {
            return false;
        }
        for k in series {
            open.entry((k, minute)).or_default().observe(s);
        }
        true
    }

    /// Takes the tallies of minutes that closed before `now` (all of them
    /// with `all`: shutdown, the end of a test), oldest first.
    pub fn take_closed(&self, now: DateTime<Utc>, all: bool) -> Vec<Closed> {
        let current = Width::Minute.start_of(now);
        let mut open = self.open.lock().expect("stats aggregator");
        let keys: Vec<(Series, DateTime<Utc>)> = open.keys().filter(|(_, m)| all || *m < current).cloned().collect();
        let mut out: Vec<Closed> = keys
            .into_iter()
            .filter_map(|k| open.remove(&k).map(|tally| Closed { series: k.0, minute: k.1, tally }))
            .collect();
        out.sort_by(|a, b| (a.minute, &a.series).cmp(&(b.minute, &b.series)));
        out
    }

    /// Puts back a tally that could not be stored, to be written with the
    /// next flush (added to whatever was counted since).
    pub fn restore(&self, c: Closed) {
        let mut open = self.open.lock().expect("stats aggregator");
        if open.len() < MAX_OPEN_TALLIES || open.contains_key(&(c.series.clone(), c.minute)) {
            open.entry((c.series, c.minute)).or_default().merge(&c.tally);
        }
    }

    /// Tallies held (series × minutes).
    pub fn open_len(&self) -> usize {
        self.open.lock().expect("stats aggregator").len()
    }
}

/// The total of `points` (percentiles over every latency in them).
pub fn total(points: &[Point]) -> Tally {
    let mut t = Tally::default();
    for p in points {
        t.merge(&p.tally);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn buckets_are_increasing_and_every_latency_has_one() {
        assert!(LATENCY_BOUNDS_MS.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(Histogram::bucket_of(0), 0);
        assert_eq!(Histogram::bucket_of(1), 0);
        assert_eq!(Histogram::bucket_of(2), 1);
        assert_eq!(Histogram::bucket_of(60_000), BUCKETS - 2);
        assert_eq!(Histogram::bucket_of(60_001), BUCKETS - 1);
        assert_eq!(Histogram::bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn percentiles_fall_in_the_bucket_that_holds_them() {
        let mut h = Histogram::default();
        assert_eq!(h.percentile(0.5), None);
        for _ in 0..90 {
            h.observe(40); // bucket (30, 50]
        }
        for _ in 0..10 {
            h.observe(900); // bucket (600, 1000]
        }
        let p50 = h.percentile(0.5).unwrap();
        assert!((30.0..=50.0).contains(&p50), "{p50}");
        let p90 = h.percentile(0.9).unwrap();
        assert!((30.0..=50.0).contains(&p90), "{p90}");
        let p99 = h.percentile(0.99).unwrap();
        assert!((600.0..=1000.0).contains(&p99), "{p99}");
        let mut over = Histogram::default();
        over.observe(120_000);
        assert_eq!(over.percentile(0.99), Some(60_000.0));
    }

    #[test]
    fn histograms_and_tallies_add() {
        let (mut a, mut b) = (Tally::default(), Tally::default());
        a.observe(&Sample { succeeded: true, dead_lettered: false, latency_ms: Some(10) });
        b.observe(&Sample { succeeded: false, dead_lettered: true, latency_ms: Some(10) });
        b.observe(&Sample { succeeded: false, dead_lettered: false, latency_ms: None });
        a.merge(&b);
        assert_eq!((a.succeeded, a.failed, a.dead_lettered, a.latency.count()), (1, 2, 1, 2));
        assert_eq!(a.latency.counts()[Histogram::bucket_of(10)], 2);
        let back = Histogram::from_counts(a.latency.counts()).unwrap();
        assert_eq!(back, a.latency);
        assert_eq!(Histogram::from_counts(&[1, 2]), Err(BadHistogram(2)));
    }

    #[test]
    fn only_closed_minutes_are_taken_and_each_series_once() {
        let agg = StatsAggregator::default();
        let sub = SubscriptionId::new("sub_1");
        let ok = Sample { succeeded: true, dead_lettered: false, latency_ms: Some(5) };
        assert!(agg.record(&sub, Some("acme"), &ok, t("2026-01-01T10:00:10Z")));
        assert!(agg.record(&sub, Some("acme"), &ok, t("2026-01-01T10:00:50Z")));
        assert!(agg.record(&sub, None, &ok, t("2026-01-01T10:01:05Z")));
        assert!(agg.take_closed(t("2026-01-01T10:00:59Z"), false).is_empty(), "the minute is still open");
        let closed = agg.take_closed(t("2026-01-01T10:01:30Z"), false);
        assert_eq!(closed.len(), 3, "subscription, tenant and system for 10:00: {closed:?}");
        assert!(closed.iter().all(|c| c.minute == t("2026-01-01T10:00:00Z") && c.tally.succeeded == 2));
        assert!(agg.take_closed(t("2026-01-01T10:01:30Z"), false).is_empty(), "taken once");
        let rest = agg.take_closed(t("2026-01-01T10:01:30Z"), true);
        assert_eq!(rest.len(), 2, "10:01 has no tenant series: {rest:?}");
        agg.restore(rest[0].clone());
        assert_eq!(agg.open_len(), 1);
    }

    #[test]
    fn ranges_are_checked() {
        let week = Duration::days(7);
        let at = t("2026-01-02T00:00:00Z");
        assert_eq!(check_range(at, at, Width::Minute, week), Err(RangeError::Empty));
        assert_eq!(check_range(at - Duration::hours(24), at, Width::Minute, week), Ok(()));
        assert_eq!(check_range(at - Duration::hours(25), at, Width::Minute, week), Err(RangeError::MinutesTooLong));
        assert_eq!(check_range(at - week, at, Width::Hour, week), Ok(()));
        assert_eq!(
            check_range(at - week - Duration::hours(1), at, Width::Hour, week),
            Err(RangeError::LongerThanRetention(7))
        );
        assert_eq!(Width::Hour.start_of(t("2026-01-01T10:59:59Z")), t("2026-01-01T10:00:00Z"));
        assert_eq!(expires_at(at, Width::Minute, week), at + Duration::minutes(1) + week);
    }
}
