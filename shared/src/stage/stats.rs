//! Delivery statistics on the delivery path: each attempt outcome is
//! counted in this process's [`crate::stats::StatsAggregator`] (memory
//! only, no store call), and [`flush`] writes the minutes that closed, one
//! add per series per minute ([`crate::ports::StatsStore::add`]).
//! `hookline serve` flushes from a background tick; a Lambda container at
//! the end of each delivery invocation (a minute that closed since).

use chrono::Utc;

use crate::bounds::{all_bounded, MAX_STORE_IN_FLIGHT};
use crate::context::Hookline;
use crate::saga::AttemptResult;
use crate::stats::Sample;
use crate::subscription::Subscription;

/// Counts one attempt of `sub` that ended as `result` (with the
/// subscriber's `status`, after `latency_ms` when a request was made).
/// Whether it ends the saga as a dead letter is decided here by the saga
/// step's own rule ([`crate::saga::decide`]): a refusal or 410 Gone, a
/// status in `dead_letter_on`, or a failure with no retry left.
pub fn observe(
    h: &Hookline,
    sub: &Subscription,
    attempt: u32,
    result: &AttemptResult,
    status: Option<u16>,
    latency_ms: Option<u64>,
) {
    let sample = sample(sub, attempt, result, status, latency_ms);
    let tenant = sub.tenant_id.as_ref().map(|t| t.as_str());
    if !h.stats.record(&sub.id, tenant, &sample, Utc::now()) {
        tracing::warn!(subscription_id = %sub.id, "delivery statistics: too many open series; an attempt is not counted");
    }
}

/// What [`observe`] counts for one attempt of `sub`: whether it
/// succeeded, whether it ends its saga as a dead letter, its latency.
pub fn sample(
    sub: &Subscription,
    attempt: u32,
    result: &AttemptResult,
    status: Option<u16>,
    latency_ms: Option<u64>,
) -> Sample {
    let dead_lettered = match result {
        AttemptResult::Delivered => false,
        AttemptResult::Gone | AttemptResult::Rejected { .. } => true,
        AttemptResult::Failed { .. } => {
            crate::saga::dead_letters_at_once(status, &sub.dead_letter_on) || !sub.retry_policy.has_retry_after(attempt)
        }
    };
    Sample { succeeded: matches!(result, AttemptResult::Delivered), dead_lettered, latency_ms }
}

/// Writes the tallies of the minutes that closed (all of them with `all`:
/// shutdown, the end of a test). A tally that cannot be written is put
/// back and tried again at the next flush. Returns how many were written.
pub async fn flush(h: &Hookline, all: bool) -> usize {
    let closed = h.stats.take_closed(Utc::now(), all);
    let writes = closed.iter().map(|c| h.stores.stats.add(&c.series, c.minute, &c.tally)).collect();
    let results = all_bounded(writes, MAX_STORE_IN_FLIGHT).await;
    let mut written = 0;
    for (c, r) in closed.into_iter().zip(results) {
        match r {
            Ok(()) => written += 1,
            Err(e) => {
                tracing::warn!(series = %c.series.key(), minute = %c.minute, error = %e, "delivery statistics not stored; kept for the next flush");
                h.stats.restore(c);
            }
        }
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failure is counted as a dead letter exactly where the saga step
    /// dead-letters it: its last attempt, a status in `dead_letter_on`, a
    /// refusal or 410 Gone; never a success or a failure with retries left.
    #[test]
    fn dead_letters_are_counted_by_the_saga_steps_rule() {
        let mut sub = crate::testkit::subscription();
        sub.retry_policy = crate::retry::RetryPolicy::from_schedule(vec![10, 10]);
        sub.dead_letter_on = vec![422];
        let last = sub.retry_policy.attempts();
        assert!(last > 1);
        let failed = AttemptResult::Failed { error: "HTTP 500".into(), retry_after_ms: None };
        let s = |attempt, result: &AttemptResult, status| sample(&sub, attempt, result, status, Some(5));
        let ok = Sample { succeeded: true, dead_lettered: false, latency_ms: Some(5) };
        assert_eq!(s(1, &AttemptResult::Delivered, Some(200)), ok);
        assert!(!s(1, &failed, Some(500)).dead_lettered, "retries left");
        assert!(s(last, &failed, Some(500)).dead_lettered, "the last attempt");
        assert!(s(1, &failed, Some(422)).dead_lettered, "a status in dead_letter_on");
        assert!(s(1, &AttemptResult::Gone, Some(410)).dead_lettered);
        assert!(s(1, &AttemptResult::Rejected { error: "refused".into() }, None).dead_lettered);
        assert!(!s(1, &failed, Some(500)).succeeded);
    }
}
