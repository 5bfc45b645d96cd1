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
