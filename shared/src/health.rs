//! Subscription health and its circuit breaker: pure decisions over a
//! [`Health`] record, which the delivery stage reads before an attempt and
//! writes after one when something changed.
//!
//! The breaker counts consecutive failures that say the endpoint itself is
//! in trouble (timeouts, connection errors, 5xx, 408 and 429). After
//! [`BreakerPolicy::failure_threshold`] of them it opens: jobs of that
//! subscription are deferred, without an attempt counted, until the
//! cool-down ends. Then one job is let through as a probe (the record moves
//! to half-open, so other workers keep waiting); its success closes the
//! breaker, its failure opens it again for twice the cool-down, up to
//! [`BreakerPolicy::max_cool_down`]. A healthy delivery to a closed breaker
//! with no failures behind it changes nothing, so it writes nothing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::SubscriptionId;

/// When a breaker opens and how long it stays open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// Consecutive failures that open the breaker.
    pub failure_threshold: u32,
    /// The first cool-down; doubled after each failed probe.
    pub cool_down: Duration,
    /// The longest cool-down.
    pub max_cool_down: Duration,
    /// How long a probe may take before another worker may probe (a probe
    /// whose worker died must not hold the breaker half-open for ever).
    pub probe_timeout: Duration,
}

impl Default for BreakerPolicy {
    /// 5 consecutive failures; 30 s cool-down doubling to 30 min; a probe
    /// may take 60 s.
    fn default() -> Self {
        BreakerPolicy {
            failure_threshold: 5,
            cool_down: Duration::from_secs(30),
            max_cool_down: Duration::from_secs(30 * 60),
            probe_timeout: Duration::from_secs(60),
        }
    }
}

/// A breaker's state, as the API shows it (`"closed"`, `"open"`, `"half_open"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    /// Deliveries go through.
    #[default]
    Closed,
    /// Deliveries wait until `Health::until`.
    Open,
    /// One probe is in flight until `Health::until`; the others wait.
    HalfOpen,
}

impl BreakerState {
    /// The name the API and metrics use (`closed`, `open`, `half_open`).
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

/// A subscription's delivery health, stored apart from its configuration
/// (a breaker flip does not change the subscription's version).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Health {
    /// The breaker.
    pub breaker: BreakerState,
    /// Open: when the cool-down ends. Half-open: when the probe times out.
    pub until: Option<DateTime<Utc>>,
    /// The cool-down in force (ms); doubles after a failed probe.
    pub cool_down_ms: u64,
    /// Failures in a row that count for the breaker.
    pub consecutive_failures: u32,
    /// The last failure's error.
    pub last_error: Option<String>,
    /// When it happened.
    pub last_error_at: Option<DateTime<Utc>>,
    /// The last success written (a success to a healthy breaker is not
    /// written; see the module docs).
    pub last_success_at: Option<DateTime<Utc>>,
    /// Attempts over the last minutes, merged from every delivery worker.
    #[serde(default)]
    pub window: Window,
    /// When the current run of failed attempts began (the first failure
    /// after the last success); `None` once an attempt succeeds. A run that
    /// lasts [`crate::context::Config::disable_after`] disables the
    /// subscription ([`should_disable`]).
    #[serde(default)]
    pub failing_since: Option<DateTime<Utc>>,
    /// Bumped on every write; writes are conditional on it.
    pub version: u64,
}

/// How many one-minute buckets a [`Window`] keeps.
pub const WINDOW_MINUTES: i64 = 5;

/// Upper bounds (ms) of the latency histogram's buckets, roughly ×1.5 apart
/// from 1 ms to the longest delivery timeout; the last is open-ended.
const LATENCY_BOUNDS_MS: [u64; 24] = [
    1,
    2,
    3,
    5,
    8,
    12,
    18,
    27,
    40,
    60,
    90,
    135,
    200,
    300,
    450,
    700,
    1_000,
    1_500,
    2_300,
    3_500,
    5_000,
    8_000,
    15_000,
    u64::MAX,
];

/// One minute of attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Bucket {
    /// Minutes since the Unix epoch.
    pub minute: i64,
    /// Attempts that succeeded.
    pub ok: u64,
    /// Attempts that failed.
    pub failed: u64,
    /// Attempts per latency bucket (the bounds of `LATENCY_BOUNDS_MS`).
    pub latency: Vec<u64>,
}

/// Recent attempts of one subscription, for its `health` (success rate and
/// latency percentiles); at most [`WINDOW_MINUTES`] buckets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Window {
    /// Oldest first.
    pub buckets: Vec<Bucket>,
}

impl Window {
    /// Counts one attempt made at `at`.
    pub fn add(&mut self, at: DateTime<Utc>, ok: bool, latency_ms: u64) {
        let minute = at.timestamp().div_euclid(60);
        let b = match self.buckets.iter_mut().position(|b| b.minute == minute) {
            Some(i) => &mut self.buckets[i],
            None => {
                self.buckets.push(Bucket { minute, latency: vec![0; LATENCY_BOUNDS_MS.len()], ..Bucket::default() });
                self.buckets.sort_by_key(|b| b.minute);
                let i = self.buckets.iter().position(|b| b.minute == minute).expect("just pushed");
                &mut self.buckets[i]
            }
        };
        if ok {
            b.ok += 1;
        } else {
            b.failed += 1;
        }
        let slot = LATENCY_BOUNDS_MS.iter().position(|bound| latency_ms <= *bound).expect("last bound is open");
        b.latency.resize(LATENCY_BOUNDS_MS.len(), 0);
        b.latency[slot] += 1;
        self.trim(at);
    }

    /// Adds another worker's counts into this one.
    pub fn merge(&mut self, other: &Window, now: DateTime<Utc>) {
        for o in &other.buckets {
            match self.buckets.iter_mut().find(|b| b.minute == o.minute) {
                Some(b) => {
                    b.ok += o.ok;
                    b.failed += o.failed;
                    b.latency.resize(LATENCY_BOUNDS_MS.len(), 0);
                    for (x, y) in b.latency.iter_mut().zip(&o.latency) {
                        *x += y;
                    }
                }
                None => self.buckets.push(o.clone()),
            }
        }
        self.buckets.sort_by_key(|b| b.minute);
        self.trim(now);
    }

    fn trim(&mut self, now: DateTime<Utc>) {
        let oldest = now.timestamp().div_euclid(60) - WINDOW_MINUTES + 1;
        self.buckets.retain(|b| b.minute >= oldest);
    }

    /// Attempts counted, and the share that succeeded, over the window at `now`.
    pub fn summary(&self, now: DateTime<Utc>) -> WindowSummary {
        let mut w = self.clone();
        w.trim(now);
        let (ok, failed) = w.buckets.iter().fold((0, 0), |(o, f), b| (o + b.ok, f + b.failed));
        let mut hist = vec![0u64; LATENCY_BOUNDS_MS.len()];
        for b in &w.buckets {
            for (x, y) in hist.iter_mut().zip(&b.latency) {
                *x += y;
            }
        }
        let total: u64 = hist.iter().sum();
        let quantile = |q: f64| {
            let rank = ((total as f64) * q).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (i, n) in hist.iter().enumerate() {
                seen += n;
                if seen >= rank {
                    // The last bucket is open-ended: report the one before's bound.
                    return Some(LATENCY_BOUNDS_MS[i].min(LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.len() - 2]));
                }
            }
            None
        };
        WindowSummary {
            attempts: ok + failed,
            success_rate: (ok + failed > 0).then(|| ok as f64 / (ok + failed) as f64),
            latency_p50_ms: if total > 0 { quantile(0.5) } else { None },
            latency_p99_ms: if total > 0 { quantile(0.99) } else { None },
        }
    }
}

/// A [`Window`] as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowSummary {
    /// Attempts over the window.
    pub attempts: u64,
    /// Share of them that succeeded; `None` without attempts.
    pub success_rate: Option<f64>,
    /// Median latency (upper bound of its histogram bucket), ms.
    pub latency_p50_ms: Option<u64>,
    /// 99th percentile latency (upper bound of its bucket), ms.
    pub latency_p99_ms: Option<u64>,
}

/// What the breaker says about a job due now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Attempt it.
    Attempt,
    /// Attempt it as the probe: first claim the probe ([`claim_probe`]).
    Probe,
    /// Wait this long; no attempt is counted.
    Wait(Duration),
}

/// How one attempt ended, as the breaker sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// 2xx.
    Success,
    /// The endpoint is in trouble: timeout, connection error, 5xx, 408, 429.
    Trouble(String),
    /// Any other failure (a 4xx, a refused address): the endpoint answered,
    /// so it leaves the breaker alone.
    Other(String),
}

impl Outcome {
    /// Reads an attempt's HTTP status (or its absence, with the error).
    pub fn of(status: Option<u16>, error: Option<&str>) -> Outcome {
        match (status, error) {
            (Some(s), _) if (200..300).contains(&s) => Outcome::Success,
            (Some(s), e) if s >= 500 || s == 408 || s == 429 => {
                Outcome::Trouble(e.map_or_else(|| format!("HTTP {s}"), str::to_string))
            }
            (Some(s), e) => Outcome::Other(e.map_or_else(|| format!("HTTP {s}"), str::to_string)),
            (None, e) => Outcome::Trouble(e.unwrap_or("no response").to_string()),
        }
    }
}

/// Whether a job of a subscription in `h` may be attempted at `now`.
pub fn gate(h: &Health, now: DateTime<Utc>) -> Gate {
    let left = |until: Option<DateTime<Utc>>| until.and_then(|u| (u - now).to_std().ok()).filter(|d| !d.is_zero());
    match h.breaker {
        BreakerState::Closed => Gate::Attempt,
        BreakerState::Open | BreakerState::HalfOpen => match left(h.until) {
            Some(d) => Gate::Wait(d),
            None => Gate::Probe,
        },
    }
}

/// The record that claims the probe (write it conditionally on `h.version`;
/// whoever loses the race waits).
pub fn claim_probe(h: &Health, policy: &BreakerPolicy, now: DateTime<Utc>) -> Health {
    Health {
        breaker: BreakerState::HalfOpen,
        until: Some(now + chrono::Duration::from_std(policy.probe_timeout).unwrap_or_default()),
        version: h.version + 1,
        ..h.clone()
    }
}

/// What an attempt's outcome makes of `h`; `None` when nothing changes (a
/// success with a closed breaker and no failures behind it), so the
/// healthy path writes nothing.
pub fn after(h: &Health, outcome: &Outcome, policy: &BreakerPolicy, now: DateTime<Utc>) -> Option<Health> {
    let mut next = h.clone();
    match outcome {
        Outcome::Success => {
            if h.breaker == BreakerState::Closed && h.consecutive_failures == 0 && h.failing_since.is_none() {
                return None;
            }
            next.failing_since = None;
            next.breaker = BreakerState::Closed;
            next.until = None;
            next.cool_down_ms = 0;
            next.consecutive_failures = 0;
            next.last_success_at = Some(now);
        }
        Outcome::Other(e) => {
            next.last_error = Some(e.clone());
            next.last_error_at = Some(now);
            next.failing_since = h.failing_since.or(Some(now));
        }
        Outcome::Trouble(e) => {
            next.failing_since = h.failing_since.or(Some(now));
            next.consecutive_failures = h.consecutive_failures.saturating_add(1);
            next.last_error = Some(e.clone());
            next.last_error_at = Some(now);
            let cool = match h.breaker {
                // A failed probe: open again, twice as long.
                BreakerState::HalfOpen => Some(
                    Duration::from_millis(h.cool_down_ms.max(policy.cool_down.as_millis() as u64))
                        .saturating_mul(2)
                        .min(policy.max_cool_down),
                ),
                // A request started before it opened: counted, the
                // cool-down stands.
                BreakerState::Open => None,
                BreakerState::Closed if next.consecutive_failures >= policy.failure_threshold => Some(policy.cool_down),
                BreakerState::Closed => None,
            };
            if let Some(cool) = cool {
                next.breaker = BreakerState::Open;
                next.cool_down_ms = cool.as_millis() as u64;
                next.until = Some(now + chrono::Duration::from_std(cool).unwrap_or_default());
            }
        }
    }
    next.version = h.version + 1;
    Some(next)
}

/// [`after`] for several outcomes in the order they ended, as one change:
/// the record after all of them (one version later), or `None` if none
/// changed anything. One process writes the outcomes of its concurrent
/// attempts to one subscription this way, in one write instead of one
/// each, which would only conflict with each other.
pub fn after_all(h: &Health, outcomes: &[(Outcome, DateTime<Utc>)], policy: &BreakerPolicy) -> Option<Health> {
    let mut next: Option<Health> = None;
    for (outcome, at) in outcomes {
        if let Some(n) = after(next.as_ref().unwrap_or(h), outcome, policy, *at) {
            next = Some(n);
        }
    }
    next.map(|n| Health { version: h.version + 1, ..n })
}

/// Whether a subscription whose health is `h` after a failed attempt at
/// `now` must be disabled: every attempt since `failing_since` failed, and
/// that run has lasted at least `disable_after`. The delivery stage acts on
/// it ([`crate::stage::failing`]); a success ends the run, and re-enabling
/// the subscription starts a new one ([`restart_failing_run`]).
pub fn should_disable(h: &Health, disable_after: chrono::Duration, now: DateTime<Utc>) -> bool {
    h.failing_since.is_some_and(|since| now - since >= disable_after)
}

/// The record of a re-enabled subscription: its failing run forgotten (so
/// the failures before it was disabled do not disable it again at once);
/// `None` when there is no run to forget.
pub fn restart_failing_run(h: &Health) -> Option<Health> {
    h.failing_since.map(|_| Health { failing_since: None, version: h.version + 1, ..h.clone() })
}

/// How long a process trusts a health record it read.
pub const READ_EVERY: Duration = Duration::from_secs(5);

/// A subscription whose breaker is not closed, as metrics show it.
#[derive(Debug, Clone, PartialEq)]
pub struct Unhealthy {
    /// The subscription.
    pub subscription_id: SubscriptionId,
    /// `open` or `half_open`.
    pub breaker: BreakerState,
    /// Failures in a row.
    pub consecutive_failures: u32,
}

/// What one process knows about subscriptions' health.
#[derive(Default)]
pub struct HealthCache {
    pub(crate) inner: Mutex<HashMap<SubscriptionId, Entry>>,
}

pub(crate) struct Entry {
    /// The record as last read or written; default when none is stored.
    pub(crate) health: Health,
    pub(crate) read_at: Instant,
    /// Attempts counted here and not yet merged into the store.
    pub(crate) pending: Window,
    pub(crate) flushed_at: Instant,
    /// Outcomes waiting to be written, in the order they ended.
    pub(crate) outcomes: Vec<(Outcome, DateTime<Utc>)>,
    /// A task of this process is writing this subscription's outcomes.
    pub(crate) writing: bool,
}

impl Entry {
    fn new(read_at: Instant) -> Entry {
        Entry {
            health: Health::default(),
            read_at,
            pending: Window::default(),
            flushed_at: Instant::now(),
            outcomes: Vec::new(),
            writing: false,
        }
    }
}

impl HealthCache {
    pub(crate) fn cached(&self, id: &SubscriptionId) -> Option<Health> {
        let g = self.inner.lock().expect("health cache");
        g.get(id).filter(|e| e.read_at.elapsed() < READ_EVERY).map(|e| e.health.clone())
    }

    pub(crate) fn remember(&self, id: &SubscriptionId, health: Health) {
        let mut g = self.inner.lock().expect("health cache");
        let now = Instant::now();
        let e = g.entry(id.clone()).or_insert_with(|| Entry::new(now));
        e.health = health;
        e.read_at = now;
    }

    /// Counts an attempt in the window and queues its outcome for the
    /// record; true if the caller is to write it (no other task of this
    /// process is writing this subscription's record: it takes the turn).
    pub(crate) fn count(&self, id: &SubscriptionId, outcome: &Outcome, at: DateTime<Utc>, latency_ms: u64) -> bool {
        let mut g = self.inner.lock().expect("health cache");
        // Not read yet: the next admit reads the store.
        let e = g.entry(id.clone()).or_insert_with(|| Entry::new(Instant::now() - READ_EVERY));
        e.pending.add(at, *outcome == Outcome::Success, latency_ms);
        e.outcomes.push((outcome.clone(), at));
        !std::mem::replace(&mut e.writing, true)
    }

    /// The outcomes queued for the turn's holder to write, with the record
    /// as cached; none ends the turn.
    pub(crate) fn take_outcomes(&self, id: &SubscriptionId) -> (Vec<(Outcome, DateTime<Utc>)>, Option<Health>) {
        let mut g = self.inner.lock().expect("health cache");
        let Some(e) = g.get_mut(id) else { return (Vec::new(), None) };
        let taken = std::mem::take(&mut e.outcomes);
        if taken.is_empty() {
            e.writing = false;
        }
        let cached = (e.read_at.elapsed() < READ_EVERY).then(|| e.health.clone());
        (taken, cached)
    }

    pub(crate) fn end_turn(&self, id: &SubscriptionId) {
        if let Some(e) = self.inner.lock().expect("health cache").get_mut(id) {
            e.writing = false;
        }
    }

    /// The subscriptions whose breaker this process last read as open or
    /// half-open, the most consecutive failures first (for metrics).
    pub fn unhealthy(&self) -> Vec<Unhealthy> {
        let g = self.inner.lock().expect("health cache");
        let mut out: Vec<Unhealthy> = g
            .iter()
            .filter(|(_, e)| e.health.breaker != BreakerState::Closed)
            .map(|(id, e)| Unhealthy {
                subscription_id: id.clone(),
                breaker: e.health.breaker,
                consecutive_failures: e.health.consecutive_failures,
            })
            .collect();
        out.sort_by(|a, b| {
            b.consecutive_failures.cmp(&a.consecutive_failures).then(a.subscription_id.cmp(&b.subscription_id))
        });
        out
    }

    /// Attempts this process counted for `id` and has not stored yet (the
    /// API of `hookline serve` adds them to what the store holds).
    pub fn pending(&self, id: &SubscriptionId) -> Window {
        self.inner.lock().expect("health cache").get(id).map(|e| e.pending.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_run_starts_at_the_first_failure_and_ends_at_a_success() {
        let p = policy();
        let day = chrono::Duration::days(1);
        let mut h = after(&Health::default(), &Outcome::Trouble("timed out".into()), &p, t(0)).unwrap();
        assert_eq!(h.failing_since, Some(t(0)));
        h = after(&h, &Outcome::Other("HTTP 404".into()), &p, t(100)).unwrap();
        assert_eq!(h.failing_since, Some(t(0)), "a later failure keeps the start");
        assert!(!should_disable(&h, day, t(100)));
        assert!(should_disable(&h, day, t(86_400)));
        let ok = after(&h, &Outcome::Success, &p, t(200)).unwrap();
        assert_eq!(ok.failing_since, None);
        assert!(!should_disable(&ok, day, t(86_400 * 9)));
        // Only a 4xx run (breaker untouched) is still written on success.
        let only_4xx = after(&Health::default(), &Outcome::Other("HTTP 400".into()), &p, t(0)).unwrap();
        assert_eq!(after(&only_4xx, &Outcome::Success, &p, t(1)).unwrap().failing_since, None);
        let fresh = restart_failing_run(&h).unwrap();
        assert_eq!((fresh.failing_since, fresh.version), (None, h.version + 1));
        assert_eq!(restart_failing_run(&fresh), None);
    }

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    fn policy() -> BreakerPolicy {
        BreakerPolicy { failure_threshold: 3, cool_down: Duration::from_secs(10), ..BreakerPolicy::default() }
    }

    #[test]
    fn outcomes_applied_together_are_the_outcomes_applied_one_by_one_in_one_version() {
        let p = policy();
        let start = Health { version: 7, ..Health::default() };
        let outcomes: Vec<(Outcome, DateTime<Utc>)> = vec![
            (Outcome::Trouble("timed out".into()), t(0)),
            (Outcome::Other("HTTP 404".into()), t(1)),
            (Outcome::Trouble("HTTP 503".into()), t(2)),
            (Outcome::Trouble("HTTP 502".into()), t(3)),
            (Outcome::Trouble("HTTP 500".into()), t(4)),
        ];
        let mut one_by_one = start.clone();
        for (o, at) in &outcomes {
            one_by_one = after(&one_by_one, o, &p, *at).unwrap_or(one_by_one);
        }
        let together = after_all(&start, &outcomes, &p).unwrap();
        assert_eq!(together.version, 8, "one write: one version later");
        assert_eq!(Health { version: 8, ..one_by_one }, together);
        // Opened at the third failure (t(3)): the later one counts, the cool-down stands.
        assert_eq!((together.breaker, together.consecutive_failures), (BreakerState::Open, 4));
        assert_eq!(together.until, Some(t(13)));
        // Successes of a healthy subscription change nothing.
        let healthy = [(Outcome::Success, t(0)), (Outcome::Success, t(1))];
        assert_eq!(after_all(&start, &healthy, &p), None);
        assert_eq!(after_all(&start, &[], &p), None);
    }

    #[test]
    fn a_healthy_success_writes_nothing() {
        assert_eq!(after(&Health::default(), &Outcome::Success, &policy(), t(0)), None);
        assert_eq!(gate(&Health::default(), t(0)), Gate::Attempt);
    }

    #[test]
    fn the_breaker_opens_after_the_threshold_probes_after_the_cool_down_and_closes_on_success() {
        let p = policy();
        let mut h = Health::default();
        for i in 0..2 {
            h = after(&h, &Outcome::Trouble("timed out".into()), &p, t(i)).unwrap();
            assert_eq!(h.breaker, BreakerState::Closed);
        }
        h = after(&h, &Outcome::Trouble("HTTP 503".into()), &p, t(2)).unwrap();
        assert_eq!((h.breaker, h.until, h.consecutive_failures), (BreakerState::Open, Some(t(12)), 3));
        assert_eq!(gate(&h, t(5)), Gate::Wait(Duration::from_secs(7)));
        assert_eq!(gate(&h, t(12)), Gate::Probe);
        let probing = claim_probe(&h, &p, t(12));
        assert_eq!(probing.breaker, BreakerState::HalfOpen);
        assert!(matches!(gate(&probing, t(13)), Gate::Wait(_)), "one probe at a time");
        // The probe fails: open again for twice as long.
        let h2 = after(&probing, &Outcome::Trouble("timed out".into()), &p, t(20)).unwrap();
        assert_eq!((h2.breaker, h2.until), (BreakerState::Open, Some(t(40))));
        // The next probe succeeds: closed, counters reset.
        let closed = after(&claim_probe(&h2, &p, t(40)), &Outcome::Success, &p, t(41)).unwrap();
        assert_eq!((closed.breaker, closed.consecutive_failures, closed.until), (BreakerState::Closed, 0, None));
        assert_eq!(closed.last_success_at, Some(t(41)));
        assert_eq!(closed.last_error.as_deref(), Some("timed out"), "the last error stays on record");
    }

    #[test]
    fn failures_of_requests_started_before_it_opened_do_not_stretch_the_cool_down() {
        let p = policy();
        let open =
            Health { breaker: BreakerState::Open, until: Some(t(10)), cool_down_ms: 10_000, ..Health::default() };
        let h = after(&open, &Outcome::Trouble("timed out".into()), &p, t(1)).unwrap();
        assert_eq!((h.breaker, h.until, h.cool_down_ms), (BreakerState::Open, Some(t(10)), 10_000));
        assert_eq!(h.consecutive_failures, 1);
    }

    #[test]
    fn the_cool_down_stops_growing_at_its_maximum() {
        let p = BreakerPolicy { max_cool_down: Duration::from_secs(25), ..policy() };
        let mut h = Health { breaker: BreakerState::HalfOpen, cool_down_ms: 20_000, ..Health::default() };
        h = after(&h, &Outcome::Trouble("x".into()), &p, t(0)).unwrap();
        assert_eq!(h.cool_down_ms, 25_000);
    }

    #[test]
    fn client_errors_leave_the_breaker_alone_and_a_dead_probe_is_retried() {
        let p = policy();
        let h = after(&Health::default(), &Outcome::Other("HTTP 404".into()), &p, t(0)).unwrap();
        assert_eq!((h.breaker, h.consecutive_failures), (BreakerState::Closed, 0));
        let stuck = Health { breaker: BreakerState::HalfOpen, until: Some(t(60)), ..Health::default() };
        assert_eq!(gate(&stuck, t(61)), Gate::Probe);
    }

    #[test]
    fn the_window_keeps_five_minutes_and_merges_workers() {
        let mut a = Window::default();
        for i in 0..98 {
            a.add(t(i), true, 10);
        }
        a.add(t(100), false, 4_000);
        let mut b = Window::default();
        b.add(t(101), true, 10);
        a.merge(&b, t(101));
        let s = a.summary(t(110));
        assert_eq!(s.attempts, 100);
        assert_eq!(s.success_rate, Some(0.99));
        assert_eq!((s.latency_p50_ms, s.latency_p99_ms), (Some(12), Some(12)));
        assert_eq!(a.summary(t(110 + 10 * 60)).attempts, 0, "older than the window");
        assert_eq!(Window::default().summary(t(0)).success_rate, None);
    }

    #[test]
    fn outcomes_are_read_from_the_status() {
        assert_eq!(Outcome::of(Some(204), None), Outcome::Success);
        assert!(matches!(Outcome::of(Some(503), None), Outcome::Trouble(_)));
        assert!(matches!(Outcome::of(Some(429), None), Outcome::Trouble(_)));
        assert!(matches!(Outcome::of(None, Some("timed out")), Outcome::Trouble(_)));
        assert!(matches!(Outcome::of(Some(400), None), Outcome::Other(_)));
    }
}
