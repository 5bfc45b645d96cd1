//! Retry policy: how long to wait before the next attempt, and how many
//! attempts a delivery gets before it is dead-lettered
//! (docs/delivery.md#retry-schedule): exponential backoff (`base_delay *
//! 2^(n-1)`, 30 s base, at most 1 h, 5 retries by default), or an explicit
//! list of waits (`schedule_ms`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::FieldError;

/// Most waits an explicit schedule (`schedule_ms`) may list.
pub const MAX_SCHEDULE_LEN: usize = 50;

/// The longest single wait, in ms (a day), of either kind of schedule.
pub const MAX_DELAY_MS: u64 = 86_400_000;

/// A subscription's retry schedule: exponential backoff, or, when
/// `schedule_ms` is set, that list of waits. Stored as JSON: members added
/// later take their default when an older subscription is read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (default 6: one plus five
    /// retries). With `schedule_ms`: its length + 1.
    pub max_attempts: u32,
    /// Delay before the first retry; doubles each retry. With
    /// `schedule_ms`: its shortest wait (the floor of a `Retry-After`).
    pub base_delay_ms: u64,
    /// No single delay is longer than this. With `schedule_ms`: its
    /// longest wait (the cap of a `Retry-After`).
    pub max_delay_ms: u64,
    /// An explicit schedule: `schedule_ms[n-1]` is the wait after failed
    /// attempt `n`, followed as written (no doubling, no jitter). `None`:
    /// exponential backoff. Build one with [`RetryPolicy::from_schedule`],
    /// which derives the three members above from it.
    pub schedule_ms: Option<Vec<u64>>,
}

/// A retry schedule that can last longer than events are kept: its last
/// attempts would find the event gone. The API answers it with a `422` naming
/// [`ScheduleTooLong::field`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct ScheduleTooLong {
    /// The refused policy.
    pub policy: RetryPolicy,
    /// Its longest duration ([`RetryPolicy::longest_schedule`]).
    pub longest: Duration,
    /// How long events are kept.
    pub retention: Duration,
}

impl ScheduleTooLong {
    /// The request member to blame: `retry_policy`, or
    /// `retry_policy.schedule_ms` for an explicit schedule.
    pub fn field(&self) -> &'static str {
        if self.policy.schedule_ms.is_some() {
            "retry_policy.schedule_ms"
        } else {
            "retry_policy"
        }
    }
}

impl std::fmt::Display for ScheduleTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (longest, retention) = (human(self.longest), human(self.retention));
        let waits = self.policy.attempts().saturating_sub(1);
        let cap = self.policy.delay_bounds().1.as_millis();
        if self.policy.schedule_ms.is_some() {
            write!(
                f,
                "the schedule can last {longest} ({waits} waits of up to {cap} ms each, the longest wait of schedule_ms: \
                 a Retry-After can stretch every wait to it), longer than the {retention} events are kept; \
                 use fewer or shorter waits"
            )
        } else {
            write!(
                f,
                "the schedule can last {longest} ({waits} waits of up to max_delay_ms = {cap} ms each, \
                 a Retry-After can stretch every wait to it), longer than the {retention} events are kept; \
                 lower max_attempts or max_delay_ms"
            )
        }
    }
}

/// A duration in days and hours for messages (`31 d 0 h`), else in seconds.
fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 86_400 {
        format!("{} d {} h", s / 86_400, s % 86_400 / 3600)
    } else {
        format!("{s} s")
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { max_attempts: 6, base_delay_ms: 30_000, max_delay_ms: 3_600_000, schedule_ms: None }
    }
}

impl RetryPolicy {
    /// The policy of an explicit schedule: `schedule_ms[n-1]` is the wait
    /// after failed attempt `n`; `max_attempts` is its length + 1,
    /// `base_delay_ms` and `max_delay_ms` its shortest and longest waits
    /// (the bounds of a `Retry-After`, as for exponential backoff). Check it
    /// with [`RetryPolicy::validate`].
    pub fn from_schedule(schedule_ms: Vec<u64>) -> Self {
        let d = RetryPolicy::default();
        RetryPolicy {
            max_attempts: u32::try_from(schedule_ms.len()).unwrap_or(u32::MAX).saturating_add(1),
            base_delay_ms: schedule_ms.iter().copied().min().unwrap_or(d.base_delay_ms),
            max_delay_ms: schedule_ms.iter().copied().max().unwrap_or(d.max_delay_ms),
            schedule_ms: Some(schedule_ms),
        }
    }

    /// The explicit schedule, if there is one (an empty list, which
    /// [`Self::validate`] refuses, counts as none).
    fn schedule(&self) -> Option<&[u64]> {
        self.schedule_ms.as_deref().filter(|s| !s.is_empty())
    }

    /// Rejects schedules that make no sense or would keep a delivery alive
    /// for unreasonably long. An explicit schedule must hold 1 to
    /// [`MAX_SCHEDULE_LEN`] waits of 1 to [`MAX_DELAY_MS`] ms, and the other
    /// members must be the ones it derives ([`Self::from_schedule`]).
    pub fn validate(&self) -> Result<(), FieldError> {
        if let Some(s) = &self.schedule_ms {
            check_schedule(s.iter().map(|&ms| i64::try_from(ms).unwrap_or(i64::MAX)))?;
            let derived = RetryPolicy::from_schedule(s.clone());
            return check_derived(Some(self.max_attempts), Some(self.base_delay_ms), Some(self.max_delay_ms), &derived);
        }
        if !(1..=50).contains(&self.max_attempts) {
            return Err(FieldError::new("retry_policy.max_attempts", "must be between 1 and 50"));
        }
        if self.base_delay_ms == 0 || self.base_delay_ms > MAX_DELAY_MS {
            return Err(FieldError::new("retry_policy.base_delay_ms", "must be between 1 and 86400000"));
        }
        if self.max_delay_ms < self.base_delay_ms || self.max_delay_ms > MAX_DELAY_MS {
            return Err(FieldError::new(
                "retry_policy.max_delay_ms",
                "must be at least base_delay_ms and at most 86400000",
            ));
        }
        Ok(())
    }

    /// Attempts in all, the first included: an explicit schedule's length
    /// + 1, else `max_attempts`.
    pub fn attempts(&self) -> u32 {
        match self.schedule() {
            Some(s) => u32::try_from(s.len()).unwrap_or(u32::MAX).saturating_add(1),
            None => self.max_attempts,
        }
    }

    /// The shortest and longest a wait may be: what a `Retry-After` is
    /// clamped to. `[base_delay_ms, max_delay_ms]`, or an explicit
    /// schedule's shortest and longest waits.
    pub fn delay_bounds(&self) -> (Duration, Duration) {
        let (lo, hi) = match self.schedule() {
            Some(s) => (s.iter().copied().min().unwrap_or(0), s.iter().copied().max().unwrap_or(0)),
            None => (self.base_delay_ms, self.max_delay_ms),
        };
        (Duration::from_millis(lo.min(hi)), Duration::from_millis(hi))
    }

    /// The longest the whole schedule can last, from the first attempt to the
    /// last: `attempts - 1` waits, each at its longest, the upper
    /// [`Self::delay_bounds`] (`max_delay_ms`, or the longest wait of an
    /// explicit schedule: the schedule itself stays below it, but a
    /// subscriber's `Retry-After` can stretch any wait up to it). Saturates
    /// instead of overflowing.
    pub fn longest_schedule(&self) -> Duration {
        let waits = u64::from(self.attempts().saturating_sub(1));
        let cap = u64::try_from(self.delay_bounds().1.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(cap.saturating_mul(waits))
    }

    /// Refuses a schedule that can outlast the events it delivers: every
    /// attempt must find its event still stored, so [`Self::longest_schedule`]
    /// may not be longer than the event `retention`.
    ///
    /// # Errors
    ///
    /// [`ScheduleTooLong`] naming both durations.
    pub fn check_fits_retention(&self, retention: chrono::Duration) -> Result<(), ScheduleTooLong> {
        let longest = self.longest_schedule();
        let retention_ms = u64::try_from(retention.num_milliseconds()).unwrap_or(0);
        if longest.as_millis() > u128::from(retention_ms) {
            return Err(ScheduleTooLong {
                policy: self.clone(),
                longest,
                retention: Duration::from_millis(retention_ms),
            });
        }
        Ok(())
    }

    /// Is there an attempt after attempt `attempt` (1-based)?
    pub fn has_retry_after(&self, attempt: u32) -> bool {
        attempt < self.attempts()
    }

    /// The un-jittered wait after failed attempt `attempt` (1-based): an
    /// explicit schedule's entry for it (its last one past its end), else
    /// `base_delay_ms` doubled each retry, at most `max_delay_ms`.
    pub fn nominal_delay(&self, attempt: u32) -> Duration {
        if let Some(s) = self.schedule() {
            let i = usize::try_from(attempt.saturating_sub(1)).unwrap_or(usize::MAX).min(s.len() - 1);
            return Duration::from_millis(s[i]);
        }
        let exp = attempt.saturating_sub(1).min(40);
        let ms = self.base_delay_ms.saturating_mul(1u64 << exp).min(self.max_delay_ms);
        Duration::from_millis(ms)
    }

    /// The wait after failed attempt `attempt`: the subscriber's
    /// `Retry-After` if it sent one, clamped to [`Self::delay_bounds`];
    /// else an explicit schedule's wait exactly; else the nominal delay with
    /// up to 20% subtracted at random (`jitter` in `[0, 1)`), so retries
    /// from one outage spread out.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>, jitter: f64) -> Duration {
        if let Some(ra) = retry_after {
            let (lo, hi) = self.delay_bounds();
            return ra.clamp(lo, hi);
        }
        let nominal = self.nominal_delay(attempt);
        if self.schedule().is_some() {
            return nominal;
        }
        let cut = nominal.as_secs_f64() * 0.2 * jitter.clamp(0.0, 1.0);
        nominal - Duration::from_secs_f64(cut)
    }
}

/// The reason a dead letter starts with when its saga's job was held by
/// an open circuit breaker past the time its last scheduled attempt was
/// due ([`hold_for_breaker`]).
pub const BREAKER_OPEN: &str = "breaker_open";

impl RetryPolicy {
    /// When the last attempt of a saga whose first attempt was due at
    /// `first` would be due by the schedule: `first` plus every nominal
    /// wait ([`Self::nominal_delay`]: no jitter, which only shortens waits,
    /// and no `Retry-After`). A job held by an open breaker is not held past
    /// it ([`hold_for_breaker`]). Saturates at the latest representable time.
    pub fn last_attempt_due(&self, first: DateTime<Utc>) -> DateTime<Utc> {
        let total: Duration = (1..self.attempts()).map(|n| self.nominal_delay(n)).sum();
        chrono::Duration::from_std(total)
            .ok()
            .and_then(|d| first.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }
}

/// What becomes of a job whose subscription's breaker is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerHold {
    /// Defer it this long (no attempt counted): until the probe may go, or
    /// until its deadline if that comes first.
    Wait(Duration),
    /// Its deadline (the time its saga's last attempt was due) has passed
    /// while the breaker held it: it ends as a dead letter with the reason
    /// [`BREAKER_OPEN`], so ops see it when the schedule says they would.
    PastDeadline,
}

/// Decides a job held by an open breaker whose probe may go in `probe_in`:
/// deferred until the earlier of the probe and `deadline` (the saga's
/// [`RetryPolicy::last_attempt_due`]; `None` for jobs that do not carry it:
/// held until the probe, as before), or, once `deadline` is at or before
/// `now`, [`BreakerHold::PastDeadline`]. A breaker never holds a delivery
/// beyond its retry schedule.
pub fn hold_for_breaker(probe_in: Duration, deadline: Option<DateTime<Utc>>, now: DateTime<Utc>) -> BreakerHold {
    let Some(deadline) = deadline else { return BreakerHold::Wait(probe_in) };
    match (deadline - now).to_std() {
        Ok(left) if !left.is_zero() => BreakerHold::Wait(probe_in.min(left)),
        _ => BreakerHold::PastDeadline,
    }
}

/// Checks an explicit schedule as given: 1 to [`MAX_SCHEDULE_LEN`] waits,
/// each 1 to [`MAX_DELAY_MS`] ms. Read as any integers, so that zero and
/// negative waits get this range error, not a type error.
///
/// # Errors
///
/// The first of [`schedule_errors`].
pub fn check_schedule(schedule_ms: impl ExactSizeIterator<Item = i64>) -> Result<Vec<u64>, FieldError> {
    let given: Vec<i64> = schedule_ms.collect();
    match schedule_errors(&given).into_iter().next() {
        Some(e) => Err(e),
        None => Ok(given.into_iter().map(|ms| ms.unsigned_abs()).collect()),
    }
}

/// Every problem of an explicit schedule ([`check_schedule`]'s rules): a
/// [`FieldError`] naming `retry_policy.schedule_ms` for its length, or one
/// per entry at fault (`retry_policy.schedule_ms[2]`); empty when it is
/// good.
pub fn schedule_errors(schedule_ms: &[i64]) -> Vec<FieldError> {
    let n = schedule_ms.len();
    if n == 0 || n > MAX_SCHEDULE_LEN {
        return vec![FieldError::new(
            "retry_policy.schedule_ms",
            format!(
                "must list 1 to {MAX_SCHEDULE_LEN} waits in ms (one per retry), got {n}; \
                 leave it out or null for exponential backoff"
            ),
        )];
    }
    schedule_ms
        .iter()
        .enumerate()
        .filter(|(_, &ms)| !u64::try_from(ms).is_ok_and(|ms| (1..=MAX_DELAY_MS).contains(&ms)))
        .map(|(i, ms)| {
            FieldError::new(
                format!("retry_policy.schedule_ms[{i}]"),
                format!("must be a wait between 1 and {MAX_DELAY_MS} ms, got {ms}"),
            )
        })
        .collect()
}

/// With an explicit schedule, the members it derives ([`RetryPolicy::from_schedule`])
/// may be given only as those values.
fn check_derived(
    max_attempts: Option<u32>,
    base_delay_ms: Option<u64>,
    max_delay_ms: Option<u64>,
    derived: &RetryPolicy,
) -> Result<(), FieldError> {
    let mismatch = |field: &str, what: &str, want: u64, got: u64| {
        FieldError::new(
            format!("retry_policy.{field}"),
            format!("with schedule_ms, {field} is {what}, {want}; leave {field} out or set it to {want}, got {got}"),
        )
    };
    if let Some(m) = max_attempts.filter(|m| *m != derived.max_attempts) {
        let want = derived.max_attempts.into();
        return Err(mismatch("max_attempts", "its length + 1 (the first attempt and one per wait)", want, m.into()));
    }
    if let Some(b) = base_delay_ms.filter(|b| *b != derived.base_delay_ms) {
        return Err(mismatch("base_delay_ms", "its shortest wait", derived.base_delay_ms, b));
    }
    if let Some(c) = max_delay_ms.filter(|c| *c != derived.max_delay_ms) {
        return Err(mismatch("max_delay_ms", "its longest wait", derived.max_delay_ms, c));
    }
    Ok(())
}

/// A `retry_policy` as a request gives it (create, PATCH): every member
/// optional, no other member allowed (a misspelt `schedule_ms` must not
/// silently mean exponential backoff). [`RetryPolicyInput::resolve`]
/// makes it a policy.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryPolicyInput {
    /// Attempts in all.
    #[serde(default)]
    pub max_attempts: Option<u32>,
    /// First wait of exponential backoff.
    #[serde(default)]
    pub base_delay_ms: Option<u64>,
    /// Longest wait of exponential backoff.
    #[serde(default)]
    pub max_delay_ms: Option<u64>,
    /// An explicit schedule; `null` or absent: exponential backoff. Read as
    /// any integers so that zero and negative waits get the range error.
    #[serde(default)]
    pub schedule_ms: Option<Vec<i64>>,
}

impl RetryPolicyInput {
    /// The policy given. Without `schedule_ms`, members left out take
    /// [`RetryPolicy::default`]'s values, and the policy must pass
    /// [`RetryPolicy::validate`]. With it, the schedule must pass
    /// [`check_schedule`], and `max_attempts`, `base_delay_ms` and
    /// `max_delay_ms` are derived from it ([`RetryPolicy::from_schedule`]):
    /// each may be left out, or given as the value it derives (so that a
    /// policy read by GET can be sent back as it is); another value is
    /// refused, naming it.
    ///
    /// # Errors
    ///
    /// A [`FieldError`] naming the member at fault. The retention is not
    /// checked here ([`RetryPolicy::check_fits_retention`]).
    pub fn resolve(self) -> Result<RetryPolicy, FieldError> {
        let Some(schedule) = self.schedule_ms else {
            let d = RetryPolicy::default();
            let p = RetryPolicy {
                max_attempts: self.max_attempts.unwrap_or(d.max_attempts),
                base_delay_ms: self.base_delay_ms.unwrap_or(d.base_delay_ms),
                max_delay_ms: self.max_delay_ms.unwrap_or(d.max_delay_ms),
                schedule_ms: None,
            };
            p.validate()?;
            return Ok(p);
        };
        let policy = RetryPolicy::from_schedule(check_schedule(schedule.into_iter())?);
        check_derived(self.max_attempts, self.base_delay_ms, self.max_delay_ms, &policy)?;
        Ok(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn last_attempt_due_adds_every_nominal_wait() {
        let t0 = DateTime::parse_from_rfc3339("2024-01-01T00:00:00Z").unwrap().with_timezone(&Utc);
        // 30 + 60 + 120 + 240 + 480 s: the default's five waits, no jitter.
        assert_eq!(RetryPolicy::default().last_attempt_due(t0), t0 + chrono::Duration::seconds(930));
        let p = RetryPolicy::from_schedule(vec![1000, 2000, 500]);
        assert_eq!(p.last_attempt_due(t0), t0 + chrono::Duration::milliseconds(3500));
        let once = RetryPolicy { max_attempts: 1, ..RetryPolicy::default() };
        assert_eq!(once.last_attempt_due(t0), t0, "a single attempt is due at once");
        assert_eq!(RetryPolicy::default().last_attempt_due(DateTime::<Utc>::MAX_UTC), DateTime::<Utc>::MAX_UTC);
    }

    #[test]
    fn a_breaker_holds_a_job_until_the_probe_or_its_deadline() {
        let now = DateTime::parse_from_rfc3339("2024-01-01T00:00:00Z").unwrap().with_timezone(&Utc);
        let probe = Duration::from_secs(30);
        let ms = chrono::Duration::milliseconds;
        assert_eq!(hold_for_breaker(probe, None, now), BreakerHold::Wait(probe), "no deadline: the probe");
        assert_eq!(hold_for_breaker(probe, Some(now + ms(60_000)), now), BreakerHold::Wait(probe));
        assert_eq!(hold_for_breaker(probe, Some(now + ms(2_000)), now), BreakerHold::Wait(Duration::from_secs(2)));
        assert_eq!(hold_for_breaker(probe, Some(now), now), BreakerHold::PastDeadline);
        assert_eq!(hold_for_breaker(probe, Some(now - ms(1)), now), BreakerHold::PastDeadline);
        assert_eq!(hold_for_breaker(Duration::ZERO, Some(now - ms(1)), now), BreakerHold::PastDeadline);
    }

    #[test]
    fn default_schedule() {
        let p = RetryPolicy::default();
        let secs: Vec<u64> = (1..=5).map(|n| p.nominal_delay(n).as_secs()).collect();
        assert_eq!(secs, vec![30, 60, 120, 240, 480]);
        assert_eq!(p.nominal_delay(9).as_secs(), 3600, "capped at one hour");
        assert!(p.has_retry_after(5));
        assert!(!p.has_retry_after(6), "5 retries after the first attempt");
    }

    #[test]
    fn retry_after_is_honoured_within_bounds() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay(1, Some(Duration::from_secs(120)), 0.5), Duration::from_secs(120));
        assert_eq!(p.delay(1, Some(Duration::from_secs(1)), 0.5), Duration::from_secs(30));
        assert_eq!(p.delay(1, Some(Duration::from_secs(86_400)), 0.5), Duration::from_secs(3600));
    }

    #[test]
    fn validation_names_the_field() {
        let bad = RetryPolicy { max_attempts: 0, ..Default::default() };
        assert_eq!(bad.validate().unwrap_err().field, "retry_policy.max_attempts");
        let bad = RetryPolicy { base_delay_ms: 10, max_delay_ms: 5, ..Default::default() };
        assert_eq!(bad.validate().unwrap_err().field, "retry_policy.max_delay_ms");
    }

    #[test]
    fn schedule_must_fit_the_retention() {
        let days30 = chrono::Duration::days(30);
        let p = RetryPolicy::default();
        assert_eq!(p.longest_schedule(), Duration::from_secs(5 * 3600));
        assert!(p.check_fits_retention(days30).is_ok());
        // 31 attempts: 30 waits of up to a day, exactly the retention: fits.
        let edge = RetryPolicy { max_attempts: 31, base_delay_ms: 1000, max_delay_ms: 86_400_000, schedule_ms: None };
        assert!(edge.check_fits_retention(days30).is_ok());
        let over = RetryPolicy { max_attempts: 32, ..edge.clone() };
        let e = over.check_fits_retention(days30).unwrap_err();
        assert_eq!(e.longest, Duration::from_secs(31 * 86_400));
        let text = e.to_string();
        assert!(text.contains("31 d 0 h") && text.contains("30 d 0 h"), "{text}");
        // Within validate()'s bounds, the largest schedule is 49 days.
        let max = RetryPolicy { max_attempts: 50, base_delay_ms: 1, max_delay_ms: 86_400_000, schedule_ms: None };
        assert!(max.validate().is_ok());
        assert!(max.check_fits_retention(days30).is_err());
        assert!(max.check_fits_retention(chrono::Duration::days(49)).is_ok());
        // No overflow on absurd values.
        let huge = RetryPolicy { max_attempts: u32::MAX, base_delay_ms: 1, max_delay_ms: u64::MAX, schedule_ms: None };
        assert_eq!(huge.longest_schedule(), Duration::from_millis(u64::MAX));
        assert!(RetryPolicy { max_attempts: 1, ..huge }.check_fits_retention(chrono::Duration::zero()).is_ok());
    }

    /// The task-event contract's ladder: 1 m, 2 m, 5 m, 15 m, 30 m, 60 m.
    const LADDER: [u64; 6] = [60_000, 120_000, 300_000, 900_000, 1_800_000, 3_600_000];

    fn input(v: serde_json::Value) -> Result<RetryPolicy, FieldError> {
        serde_json::from_value::<RetryPolicyInput>(v).expect("well-formed").resolve()
    }

    #[test]
    fn an_explicit_schedule_is_followed_as_written() {
        let p = RetryPolicy::from_schedule(LADDER.to_vec());
        assert_eq!((p.max_attempts, p.base_delay_ms, p.max_delay_ms), (7, 60_000, 3_600_000));
        assert!(p.validate().is_ok());
        assert_eq!(p.attempts(), 7);
        for (n, ms) in (1..).zip(LADDER) {
            assert_eq!(p.nominal_delay(n), Duration::from_millis(ms));
            for j in [0.0, 0.5, 0.999] {
                assert_eq!(p.delay(n, None, j), Duration::from_millis(ms), "no jitter: attempt {n}, jitter {j}");
            }
            assert!(p.has_retry_after(n), "a retry after attempt {n}");
        }
        assert!(!p.has_retry_after(7), "six retries after the first attempt, then a dead letter");
        assert_eq!(p.nominal_delay(0), Duration::from_secs(60));
        assert_eq!(p.nominal_delay(99), Duration::from_secs(3600), "past its end: its last wait");
        // The exponential members do not apply: a schedule shorter than
        // max_attempts ends with it.
        let mixed = RetryPolicy { max_attempts: 40, schedule_ms: Some(vec![5, 10]), ..Default::default() };
        assert_eq!(mixed.attempts(), 3);
        assert!(!mixed.has_retry_after(3));
        assert_eq!(mixed.validate().unwrap_err().field, "retry_policy.max_attempts", "stored members must agree");
    }

    #[test]
    fn retry_after_is_clamped_to_the_schedules_shortest_and_longest_waits() {
        let p = RetryPolicy::from_schedule(LADDER.to_vec());
        assert_eq!(p.delay_bounds(), (Duration::from_secs(60), Duration::from_secs(3600)));
        assert_eq!(p.delay(1, Some(Duration::from_secs(600)), 0.5), Duration::from_secs(600), "stretched");
        assert_eq!(p.delay(5, Some(Duration::from_secs(120)), 0.5), Duration::from_secs(120), "shortened");
        assert_eq!(p.delay(5, Some(Duration::ZERO), 0.5), Duration::from_secs(60), "never below the shortest");
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(86_400)), 0.5),
            Duration::from_secs(3600),
            "nor above the longest"
        );
    }

    #[test]
    fn a_policy_as_given_is_resolved_and_checked() {
        use serde_json::json;
        // Without a schedule: as before, members left out are the defaults.
        assert_eq!(input(json!({})).unwrap(), RetryPolicy::default());
        let p = input(json!({"max_attempts": 3, "schedule_ms": null})).unwrap();
        assert_eq!(p, RetryPolicy { max_attempts: 3, ..Default::default() });
        assert_eq!(input(json!({"max_attempts": 0})).unwrap_err().field, "retry_policy.max_attempts");
        // With one: the other members are derived from it.
        let p = input(json!({"schedule_ms": [50, 100, 200]})).unwrap();
        assert_eq!(p, RetryPolicy::from_schedule(vec![50, 100, 200]));
        assert_eq!((p.max_attempts, p.base_delay_ms, p.max_delay_ms), (4, 50, 200));
        // What GET shows can be sent back as it is.
        let shown = serde_json::to_value(&p).unwrap();
        assert_eq!(
            shown,
            json!({"max_attempts": 4, "base_delay_ms": 50, "max_delay_ms": 200, "schedule_ms": [50, 100, 200]})
        );
        assert_eq!(input(shown).unwrap(), p);
        assert_eq!(input(json!({"schedule_ms": [50, 100, 200], "max_attempts": 4})).unwrap(), p);
        // Anything else is refused, naming the member.
        let refused = [
            (json!({"schedule_ms": []}), "retry_policy.schedule_ms", "1 to 50"),
            (json!({"schedule_ms": vec![1000; 51]}), "retry_policy.schedule_ms", "got 51"),
            (json!({"schedule_ms": [1000, 2000, 0]}), "retry_policy.schedule_ms[2]", "got 0"),
            (json!({"schedule_ms": [-5]}), "retry_policy.schedule_ms[0]", "got -5"),
            (json!({"schedule_ms": [1, 86_400_001]}), "retry_policy.schedule_ms[1]", "between 1 and 86400000"),
            (
                json!({"schedule_ms": [50, 100, 200], "max_attempts": 6}),
                "retry_policy.max_attempts",
                "set it to 4, got 6",
            ),
            (json!({"schedule_ms": [50, 100, 200], "max_attempts": 3}), "retry_policy.max_attempts", "length + 1"),
            (
                json!({"schedule_ms": [50, 100], "base_delay_ms": 30_000}),
                "retry_policy.base_delay_ms",
                "shortest wait, 50",
            ),
            (json!({"schedule_ms": [50, 100], "max_delay_ms": 1000}), "retry_policy.max_delay_ms", "longest wait, 100"),
        ];
        for (given, field, says) in refused {
            let e = input(given.clone()).unwrap_err();
            assert_eq!(e.field, field, "{given}: {e}");
            assert!(e.to_string().contains(says), "{given}: {e}");
        }
        // 50 waits, 51 attempts in all: the longest schedule allowed.
        let p = input(json!({"schedule_ms": vec![1; 50]})).unwrap();
        assert_eq!((p.attempts(), p.validate()), (51, Ok(())));
        // A misspelt member is an error, not exponential backoff.
        assert!(serde_json::from_value::<RetryPolicyInput>(json!({"schedule": [1]})).is_err());
    }

    #[test]
    fn policies_stored_before_schedules_existed_are_read() {
        let p: RetryPolicy =
            serde_json::from_str(r#"{"max_attempts": 3, "base_delay_ms": 1, "max_delay_ms": 2}"#).unwrap();
        assert_eq!(p, RetryPolicy { max_attempts: 3, base_delay_ms: 1, max_delay_ms: 2, schedule_ms: None });
        let s = RetryPolicy::from_schedule(LADDER.to_vec());
        assert_eq!(serde_json::from_str::<RetryPolicy>(&serde_json::to_string(&s).unwrap()).unwrap(), s);
    }

    #[test]
    fn an_explicit_schedule_must_fit_the_retention() {
        let days30 = chrono::Duration::days(30);
        let ladder = RetryPolicy::from_schedule(LADDER.to_vec());
        assert_eq!(ladder.longest_schedule(), Duration::from_secs(6 * 3600), "six waits stretched to an hour");
        assert!(ladder.check_fits_retention(chrono::Duration::hours(6)).is_ok());
        let e = ladder.check_fits_retention(chrono::Duration::hours(5)).unwrap_err();
        assert_eq!(e.field(), "retry_policy.schedule_ms");
        let text = e.to_string();
        assert!(text.contains("6 waits of up to 3600000 ms") && text.contains("schedule_ms"), "{text}");
        // 30 waits of a day: exactly the retention, fits; 31 do not.
        let edge = RetryPolicy::from_schedule(vec![MAX_DELAY_MS; 30]);
        assert!(edge.check_fits_retention(days30).is_ok());
        let e = RetryPolicy::from_schedule(vec![MAX_DELAY_MS; 31]).check_fits_retention(days30).unwrap_err();
        assert_eq!(e.longest, Duration::from_secs(31 * 86_400));
        // One long wait counts for every wait: a Retry-After can stretch
        // each to it (3 waits of up to an hour, 1 h 0 min 2 s as written).
        let one_long = RetryPolicy::from_schedule(vec![1000, 1000, 3_600_000]);
        assert!(one_long.check_fits_retention(chrono::Duration::hours(1)).is_err());
        assert!(one_long.check_fits_retention(chrono::Duration::hours(3)).is_ok());
        assert_eq!(
            RetryPolicy::default().check_fits_retention(chrono::Duration::hours(1)).unwrap_err().field(),
            "retry_policy"
        );
    }

    proptest! {
        #[test]
        fn delay_is_within_jitter_band_and_cap(
            attempt in 1u32..60, base in 1u64..100_000, extra in 0u64..10_000_000, j in 0.0f64..1.0
        ) {
            let p = RetryPolicy { max_attempts: 60, base_delay_ms: base, max_delay_ms: base + extra, schedule_ms: None };
            let d = p.delay(attempt, None, j);
            let n = p.nominal_delay(attempt);
            prop_assert!(d <= n);
            prop_assert!(d.as_secs_f64() >= n.as_secs_f64() * 0.8 - 1e-6);
            prop_assert!(n <= Duration::from_millis(p.max_delay_ms));
        }

        #[test]
        fn a_schedule_is_followed_and_fits_its_own_bound(
            schedule in proptest::collection::vec(1u64..=MAX_DELAY_MS, 1..=MAX_SCHEDULE_LEN), j in 0.0f64..1.0
        ) {
            let p = RetryPolicy::from_schedule(schedule.clone());
            prop_assert!(p.validate().is_ok());
            prop_assert_eq!(p.attempts() as usize, schedule.len() + 1);
            let mut total = Duration::ZERO;
            for (n, ms) in (1u32..).zip(&schedule) {
                prop_assert!(p.has_retry_after(n));
                prop_assert_eq!(p.delay(n, None, j), Duration::from_millis(*ms));
                total += Duration::from_millis(*ms);
            }
            prop_assert!(!p.has_retry_after(p.attempts()));
            prop_assert!(p.longest_schedule() >= total);
        }

        #[test]
        fn delays_never_shrink(attempt in 1u32..59, base in 1u64..100_000, extra in 0u64..10_000_000) {
            let p = RetryPolicy { max_attempts: 60, base_delay_ms: base, max_delay_ms: base + extra, schedule_ms: None };
            prop_assert!(p.nominal_delay(attempt + 1) >= p.nominal_delay(attempt));
        }
    }
}
