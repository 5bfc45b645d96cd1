//! The ordering steps of the router and the saga stage
//! ([`crate::ordering`] decides, the [`crate::ports::OrderStore`] keeps the
//! partitions' marks and the lanes). Unordered subscriptions and events
//! without a partition never come here but for [`routed`].
//!
//! A saga waiting in its lane is woken by a retry timer of attempt 0
//! ([`wake`]): the saga stage's timer handler brings it to [`admit`], which
//! looks at the lane again. Every wake-up may be lost in a crash; the
//! reconciler re-admits Waiting sagas after [`crate::saga::WAITING_RECHECK`].

use std::time::Duration;

use chrono::Utc;

use crate::context::Hookline;
use crate::error::StoreError;
use crate::event::EventRecord;
use crate::ids::{EventId, SagaId};
use crate::job::{DeliveryJob, RetryTimer};
use crate::ordering::{self, Gate, Lane, LaneEntry, LaneRef, OnDeadLetter, Releaser};
use crate::saga::{OriginKind, Saga, SagaStatus};

/// How soon a saga waiting for an earlier event's routing looks again.
pub const ROUTING_RECHECK: Duration = Duration::from_secs(1);

fn lane_of(saga_subscription: &crate::ids::SubscriptionId, l: &LaneRef) -> Lane {
    Lane { subscription_id: saga_subscription.clone(), partition: l.partition.clone() }
}

/// Routing: puts each ordered saga in its lane, before the saga is stored.
pub async fn enqueue(h: &Hookline, sagas: &[Saga]) -> Result<(), StoreError> {
    for s in sagas {
        if let Some(l) = &s.lane {
            let entry = LaneEntry { seq: l.seq, saga_id: s.id.clone(), event_id: s.event_id.clone() };
            h.stores.order.enqueue(&lane_of(&s.subscription_id, l), &entry).await?;
        }
    }
    Ok(())
}

/// Routing done: each numbered event's partition mark moves past it.
pub async fn routed(h: &Hookline, events: &[EventRecord]) -> Result<(), StoreError> {
    for e in events {
        if let (Some(p), Some(seq)) = (e.partition(), e.partition_seq) {
            h.stores.order.mark_routed(&p, seq).await?;
        }
    }
    Ok(())
}

/// Starts an ordered saga if its lane lets it (see [`ordering::gate`]);
/// otherwise marks it Waiting, to be woken when the saga before it leaves
/// the lane (or, waiting for routing, by a timer). The stored saga is what
/// counts: one that is neither Pending nor Waiting is already running or
/// done, and is left alone.
pub async fn admit(h: &Hookline, event_id: &EventId, saga_id: &SagaId, by: Releaser) -> Result<(), StoreError> {
    let Some(mut current) = h.stores.sagas.get(event_id, saga_id).await? else { return Ok(()) };
    let Some(l) = current.lane.clone() else { return super::saga::begin(h, &current, by).await };
    // Running or done; or Pending with a deadline: released from its lane
    // already, its first job sent (`crate::saga::decide`).
    let released = current.state.status == SagaStatus::Pending && current.state.next_attempt_at.is_some();
    if released || !matches!(current.state.status, SagaStatus::Pending | SagaStatus::Waiting) {
        return Ok(());
    }
    let lane = lane_of(&current.subscription_id, &l);
    // A requeued saga takes its dead predecessor's place in the lane.
    if let Some(o) = current.origin.as_ref().filter(|o| o.kind == OriginKind::Requeue) {
        if let Some(prev) = &o.previous_saga_id {
            h.stores.order.dequeue(&lane, l.seq, prev).await?;
        }
    }
    let mut looked_again = false;
    for _ in 0..4 {
        let routed = h.stores.order.routed_through(&lane.partition).await?;
        let head = h.stores.order.head(&lane).await?;
        match ordering::gate(l.seq, &current.id, routed, head.as_ref()) {
            // Its own start, once it has marked itself Waiting, releases as
            // itself.
            Gate::Go => {
                let by = if looked_again { Releaser::Itself } else { by };
                return super::saga::begin(h, &current, by).await;
            }
            Gate::NotInLane => {
                let entry = LaneEntry { seq: l.seq, saga_id: current.id.clone(), event_id: current.event_id.clone() };
                h.stores.order.enqueue(&lane, &entry).await?;
            }
            wait => {
                if current.state.status == SagaStatus::Pending {
                    match super::saga::hold(h, &current).await? {
                        Some(held) => current = held,
                        // Changed under us (started by another worker).
                        None => return Ok(()),
                    }
                }
                if wait == Gate::WaitForRouting {
                    return wake_at(h, &current.event_id, &current.id, ROUTING_RECHECK).await;
                }
                // Its predecessor may have left between the gate and the
                // hold, and woken nobody (this saga was not Waiting yet):
                // look once more.
                if looked_again {
                    return Ok(());
                }
                looked_again = true;
            }
        }
    }
    Ok(())
}

/// A saga ended (`job` is its last job): it leaves its lane if it
/// completed, or was dead-lettered under `on_dead_letter: "continue"`, and
/// the lane's next saga is woken. Under `"block"` a dead-lettered saga stays
/// until it is requeued (its successor takes its place) or skipped
/// ([`skipped`]).
pub async fn ended(h: &Hookline, job: &DeliveryJob, dead_lettered: bool) -> Result<(), StoreError> {
    let Some(l) = &job.lane else { return Ok(()) };
    if dead_lettered && l.on_dead_letter == OnDeadLetter::Block {
        tracing::warn!(saga_id = %job.saga_id, subscription_id = %job.subscription_id, partition_key = %l.partition.key, seq = l.seq, "ordered partition blocked behind a dead letter until it is requeued or skipped");
        return Ok(());
    }
    let lane = lane_of(&job.subscription_id, l);
    h.stores.order.dequeue(&lane, l.seq, &job.saga_id).await?;
    // A crash here: the attempt is handed to the saga stage again, which
    // finds the saga ended and leaves the lane again (both idempotent).
    crate::failpoint::hit("order.after_leave");
    // The saga stage starts the next one itself.
    match h.stores.order.head(&lane).await? {
        // Boxed: starting it runs the saga stage, which is how we got here.
        Some(next) => Box::pin(release(h, &next.event_id, &next.saga_id, Releaser::Predecessor)).await,
        None => Ok(()),
    }
}

/// A dead letter was skipped: its saga leaves the lane it blocked, and the
/// lane's next saga is woken (through the saga stage: whoever skips does
/// not start deliveries).
pub async fn skipped(h: &Hookline, dead_saga: &Saga) -> Result<(), StoreError> {
    let Some(l) = &dead_saga.lane else { return Ok(()) };
    let lane = lane_of(&dead_saga.subscription_id, l);
    h.stores.order.dequeue(&lane, l.seq, &dead_saga.id).await?;
    if let Some(next) = h.stores.order.head(&lane).await? {
        wake_at(h, &next.event_id, &next.saga_id, Duration::ZERO).await?;
    }
    Ok(())
}

/// Sends the wake-up of a waiting saga (a retry timer of attempt 0) after `delay`.
async fn wake_at(h: &Hookline, event_id: &EventId, saga_id: &SagaId, delay: Duration) -> Result<(), StoreError> {
    let due_at = Utc::now() + chrono::Duration::from_std(delay).unwrap_or_default();
    let timer = RetryTimer { event_id: event_id.clone(), saga_id: saga_id.clone(), attempt: 0, due_at };
    h.stores.retries.send(&[(timer, delay)]).await
}

/// A wake-up arrived: a Waiting saga looks at its lane again.
pub async fn woken(h: &Hookline, timer: &RetryTimer) -> Result<(), StoreError> {
    release(h, &timer.event_id, &timer.saga_id, Releaser::Timer).await
}

/// Admits a saga if it is Waiting. A Pending one is left to its own start,
/// which looks at the lane again after marking it Waiting (so exactly one
/// of them starts it); any other is past waiting.
async fn release(h: &Hookline, event_id: &EventId, saga_id: &SagaId, by: Releaser) -> Result<(), StoreError> {
    match h.stores.sagas.get(event_id, saga_id).await? {
        Some(s) if s.state.status == SagaStatus::Waiting => admit(h, event_id, saga_id, by).await,
        _ => Ok(()),
    }
}
