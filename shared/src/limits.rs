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
