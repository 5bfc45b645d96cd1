//! Retry policy: how long to wait before the next attempt, and how many
//! attempts a delivery gets before it is dead-lettered
//! (docs/delivery.md#retry-schedule: `base_delay * 2^(n-1)`, 30 s base, at
//! most 1 h, 5 retries).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::subscription::FieldError;

/// A subscription's retry schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (default 6: one plus five retries).
    pub max_attempts: u32,
    /// Delay before the first retry; doubles each retry.
    pub base_delay_ms: u64,
    /// No single delay is longer than this.
    pub max_delay_ms: u64,
}

/// A retry schedule that can last longer than events are kept: its last
/// attempts would find the event gone. The API answers it with a `422` naming
/// `retry_policy`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "the schedule can last {} ({} waits of up to max_delay_ms = {} ms each, a Retry-After can stretch every wait to it), \
     longer than the {} events are kept; lower max_attempts or max_delay_ms",
    human(*longest),
    policy.max_attempts.saturating_sub(1),
    policy.max_delay_ms,
    human(*retention)
)]
pub struct ScheduleTooLong {
    /// The refused policy.
    pub policy: RetryPolicy,
    /// Its longest duration ([`RetryPolicy::longest_schedule`]).
    pub longest: Duration,
    /// How long events are kept.
    pub retention: Duration,
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
        RetryPolicy { max_attempts: 6, base_delay_ms: 30_000, max_delay_ms: 3_600_000 }
    }
}

impl RetryPolicy {
    /// Rejects schedules that make no sense or would keep a delivery alive
    /// for unreasonably long.
    pub fn validate(&self) -> Result<(), FieldError> {
        if !(1..=50).contains(&self.max_attempts) {
            return Err(FieldError::new("retry_policy.max_attempts", "must be between 1 and 50"));
        }
        if self.base_delay_ms == 0 || self.base_delay_ms > 86_400_000 {
            return Err(FieldError::new("retry_policy.base_delay_ms", "must be between 1 and 86400000"));
        }
        if self.max_delay_ms < self.base_delay_ms || self.max_delay_ms > 86_400_000 {
            return Err(FieldError::new(
                "retry_policy.max_delay_ms",
                "must be at least base_delay_ms and at most 86400000",
            ));
        }
        Ok(())
    }

    /// The longest the whole schedule can last, from the first attempt to the
    /// last: `max_attempts - 1` waits, each at its longest, `max_delay_ms`
    /// (the doubling schedule stays below it, but a subscriber's
    /// `Retry-After` can stretch any wait up to it). Saturates instead of
    /// overflowing.
    pub fn longest_schedule(&self) -> Duration {
        let waits = u64::from(self.max_attempts.saturating_sub(1));
        Duration::from_millis(self.max_delay_ms.saturating_mul(waits))
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
            return Err(ScheduleTooLong { policy: *self, longest, retention: Duration::from_millis(retention_ms) });
        }
        Ok(())
    }

    /// Is there an attempt after attempt `attempt` (1-based)?
    pub fn has_retry_after(&self, attempt: u32) -> bool {
        attempt < self.max_attempts
    }

    /// The un-jittered wait after failed attempt `attempt` (1-based).
    pub fn nominal_delay(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(1).min(40);
        let ms = self.base_delay_ms.saturating_mul(1u64 << exp).min(self.max_delay_ms);
        Duration::from_millis(ms)
    }

    /// The wait after failed attempt `attempt`: the nominal delay with up to
    /// 20% subtracted at random (`jitter` in `[0, 1)`), so retries from one
    /// outage spread out; or the subscriber's `Retry-After`, clamped to
    /// `[base_delay, max_delay]`.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>, jitter: f64) -> Duration {
        if let Some(ra) = retry_after {
            let lo = Duration::from_millis(self.base_delay_ms);
            let hi = Duration::from_millis(self.max_delay_ms);
            return ra.clamp(lo, hi);
        }
        let nominal = self.nominal_delay(attempt);
        let cut = nominal.as_secs_f64() * 0.2 * jitter.clamp(0.0, 1.0);
        nominal - Duration::from_secs_f64(cut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
        let edge = RetryPolicy { max_attempts: 31, base_delay_ms: 1000, max_delay_ms: 86_400_000 };
        assert!(edge.check_fits_retention(days30).is_ok());
        let over = RetryPolicy { max_attempts: 32, ..edge };
        let e = over.check_fits_retention(days30).unwrap_err();
        assert_eq!(e.longest, Duration::from_secs(31 * 86_400));
        let text = e.to_string();
        assert!(text.contains("31 d 0 h") && text.contains("30 d 0 h"), "{text}");
        // Within validate()'s bounds, the largest schedule is 49 days.
        let max = RetryPolicy { max_attempts: 50, base_delay_ms: 1, max_delay_ms: 86_400_000 };
        assert!(max.validate().is_ok());
        assert!(max.check_fits_retention(days30).is_err());
        assert!(max.check_fits_retention(chrono::Duration::days(49)).is_ok());
        // No overflow on absurd values.
        let huge = RetryPolicy { max_attempts: u32::MAX, base_delay_ms: 1, max_delay_ms: u64::MAX };
        assert_eq!(huge.longest_schedule(), Duration::from_millis(u64::MAX));
        assert!(RetryPolicy { max_attempts: 1, ..huge }.check_fits_retention(chrono::Duration::zero()).is_ok());
    }

    proptest! {
        #[test]
        fn delay_is_within_jitter_band_and_cap(
            attempt in 1u32..60, base in 1u64..100_000, extra in 0u64..10_000_000, j in 0.0f64..1.0
        ) {
            let p = RetryPolicy { max_attempts: 60, base_delay_ms: base, max_delay_ms: base + extra };
            let d = p.delay(attempt, None, j);
            let n = p.nominal_delay(attempt);
            prop_assert!(d <= n);
            prop_assert!(d.as_secs_f64() >= n.as_secs_f64() * 0.8 - 1e-6);
            prop_assert!(n <= Duration::from_millis(p.max_delay_ms));
        }

        #[test]
        fn delays_never_shrink(attempt in 1u32..59, base in 1u64..100_000, extra in 0u64..10_000_000) {
            let p = RetryPolicy { max_attempts: 60, base_delay_ms: base, max_delay_ms: base + extra };
            prop_assert!(p.nominal_delay(attempt + 1) >= p.nominal_delay(attempt));
        }
    }
}
