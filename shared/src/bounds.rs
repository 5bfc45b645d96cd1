//! Bounded work per invocation. A Lambda container has 1,024 file
//! descriptors and one network interface, and a router batch of 100 events
//! × 10 subscriptions is 1,000 sagas: issued all at once, those writes would
//! open 1,000 connections. Every fan-out of store writes, queue sends and
//! outbound deliveries goes through [`all_bounded`] with one of these caps.

use std::future::Future;

use futures_util::stream::{self, StreamExt};

/// Most store or queue requests one call has in flight at once (DynamoDB
/// conditional puts and updates, SQS batch sends and deletes).
pub const MAX_STORE_IN_FLIGHT: usize = 32;

/// Most outbound deliveries one batch has in flight at once.
pub const MAX_DELIVERIES_IN_FLIGHT: usize = 64;

/// Receives after which the delivery stage stops trying a job and records
/// it as a dead attempt (so its saga dead-letters with a record and a
/// snapshot, like any other dead saga): a job received this often crashed or
/// timed out its worker every time. Local faults (see
/// [`crate::stage::deliver`]) re-send a job instead, so they never count.
pub const JOB_RECEIVE_LIMIT: u32 = 5;

/// The redrive `maxReceiveCount` of every queue, on both backends (the
/// template's `RedrivePolicy`, SQLite's dead-letter move): one receive more
/// than [`JOB_RECEIVE_LIMIT`], so a delivery job reaches the dead-letter
/// queue only if even its last receive crashed; the reconciler then finds
/// its stalled saga.
pub const QUEUE_MAX_RECEIVES: u32 = JOB_RECEIVE_LIMIT + 1;

/// Retries of a failing stream batch before it is given up to the
/// on-failure destination (the template's `MaximumRetryAttempts`; `hookline
/// serve`'s outbox loops do the same).
pub const STREAM_MAX_RETRIES: u32 = 5;

/// Most event-type patterns one subscription may have. On DynamoDB a
/// subscription is written with its routing index entries (one per pattern,
/// plus one for its tenant) in one `TransactWriteItems` of at most 100
/// actions, so that the index never disagrees with the subscription: the
/// subscription, its tenant entry and 98 pattern entries fill it.
pub const MAX_SUBSCRIPTION_PATTERNS: usize = 98;

/// Most starts per second a subscription's `rate_limit` gets on AWS: each
/// booking is one write of the subscription's rate item, and one DynamoDB
/// item takes at most 1,000 writes a second. The API refuses more
/// ([`crate::subscription::MAX_RATE_LIMIT`]); the delivery stage also books
/// at most one start per millisecond ([`start_interval_on`]), for
/// subscriptions stored before that ceiling.
pub const AWS_MAX_RATE_LIMIT: f64 = crate::subscription::MAX_RATE_LIMIT;

/// The time between two starts the store is asked to keep for a
/// `rate_limit` interval on a backend whose ceiling is `max_rate` starts per
/// second: the subscription's own, or the ceiling's if shorter.
pub fn start_interval_on(interval: std::time::Duration, max_rate: f64) -> std::time::Duration {
    interval.max(std::time::Duration::from_secs_f64(1.0 / max_rate))
}

/// The first start (ms since the epoch) a booking made at `now` gets when
/// the subscription's next free start is `next`: `next`, or `now` when that
/// is past or within the clock tolerance
/// ([`crate::subscription::rate_tolerance`]). Both backends' rate items.
pub fn first_start(now: i64, next: Option<i64>, interval: std::time::Duration) -> i64 {
    match next {
        Some(n) if n > now + crate::subscription::rate_tolerance(interval) => n,
        _ => now,
    }
}

/// The first wait for a `max_in_flight` slot.
pub const MIN_SLOT_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// How long a job that found every `max_in_flight` slot held waits before
/// it is tried again, after `waits` such waits: at least until the soonest
/// lease could end (`hint`), growing twice as long each time up to `cap`
/// (the lease: by then a slot has been given back or taken over), then
/// jittered to between half and all of that (`jitter` in `[0, 1)`), so
/// that the jobs of a full subscription come back spread out instead of
/// together.
pub fn slot_wait(hint: std::time::Duration, waits: u32, cap: std::time::Duration, jitter: f64) -> std::time::Duration {
    let grown = MIN_SLOT_WAIT.saturating_mul(1u32 << waits.min(16)).max(hint).min(cap.max(MIN_SLOT_WAIT));
    grown.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
}

/// Runs the futures with at most `cap` of them in flight, and returns their
/// outputs in input order (as `join_all` would, without its unbounded fan-out).
/// Takes a `Vec` (not any iterator) so that the future it returns is `Send`
/// inside `async_trait` methods whatever closure built the futures.
pub async fn all_bounded<F, T>(futures: Vec<F>, cap: usize) -> Vec<T>
where
    F: Future<Output = T>,
{
    stream::iter(futures).buffered(cap.max(1)).collect().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_booking_starts_at_the_next_free_start_or_now() {
        let i = std::time::Duration::from_millis(200);
        assert_eq!(first_start(1000, None, i), 1000);
        assert_eq!(first_start(1000, Some(500), i), 1000, "past: now");
        assert_eq!(first_start(1000, Some(1015), i), 1000, "within the tolerance (20 ms): now");
        assert_eq!(first_start(1000, Some(1600), i), 1600);
        assert_eq!(start_interval_on(std::time::Duration::from_micros(100), AWS_MAX_RATE_LIMIT).as_millis(), 1);
        assert_eq!(start_interval_on(i, AWS_MAX_RATE_LIMIT), i);
    }

    #[test]
    fn slot_waits_grow_up_to_the_cap_and_are_jittered() {
        use std::time::Duration;
        let cap = Duration::from_secs(20);
        let full: Vec<Duration> = (0..10).map(|w| slot_wait(Duration::ZERO, w, cap, 1.0)).collect();
        assert_eq!(full[0], MIN_SLOT_WAIT);
        assert!(full.windows(2).all(|w| w[1] >= w[0]), "{full:?}");
        assert_eq!(full[9], cap);
        assert_eq!(slot_wait(Duration::from_secs(1), 0, cap, 1.0), Duration::from_secs(1), "at least the hint");
        assert_eq!(slot_wait(Duration::from_secs(1), 0, cap, 0.0), Duration::from_millis(500), "half, at the least");
        assert_eq!(slot_wait(Duration::ZERO, u32::MAX, cap, 1.0), cap);
    }

    #[tokio::test]
    async fn keeps_order_and_the_cap() {
        let now = AtomicUsize::new(0);
        let max = AtomicUsize::new(0);
        let out = all_bounded(
            (0..100)
                .map(|i| {
                    let (now, max) = (&now, &max);
                    async move {
                        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                        max.fetch_max(n, Ordering::SeqCst);
                        tokio::time::sleep(std::time::Duration::from_millis((100 - i) % 7)).await;
                        now.fetch_sub(1, Ordering::SeqCst);
                        i
                    }
                })
                .collect(),
            8,
        )
        .await;
        assert_eq!(out, (0..100).collect::<Vec<_>>());
        assert!(max.load(Ordering::SeqCst) <= 8);
        assert!(max.load(Ordering::SeqCst) > 1, "runs concurrently");
    }
}
