//! The ordering steps of the router and the saga stage
//! ([`crate::ordering`] decides, the [`crate::ports::OrderStore`] keeps the
//! partitions' marks and the lanes). Unordered subscriptions and events
//! without a partition never come here but for [`routed`].
//!
//! A saga waiting in its lane is woken by a retry timer of attempt 0
//! ([`woken`]): the saga stage's timer handler brings it to [`admit`], which
//! looks at the lane again. Every wake-up may be lost in a crash; the
//! reconciler re-admits Waiting sagas after [`crate::saga::WAITING_RECHECK`].
//!
//! Lanes heal (docs/delivery.md#lanes-that-cannot-wedge): a head that will
//! never leave (its saga expired, or ended without leaving, or blocks for a
//! deleted subscription) is taken out by the first saga that looks at the
//! lane ([`admit`]); a saga waiting for an earlier event's routing looks
//! again with a doubling wait ([`ordering::routing_recheck`]), and the
//! reconciler passes or routes an old gap ([`heal_gap`]); ops can skip what
//! holds a lane ([`skip_lane`]), and deleting a subscription lets its
//! blocked lanes go ([`release_deleted`]).

use std::time::Duration;

use chrono::Utc;

use crate::context::Hookline;
use crate::error::StoreError;
use crate::event::EventRecord;
use crate::ids::{EventId, SagaId, SubscriptionId};
use crate::message::{DeliveryJob, RetryTimer};
use crate::ordering::{
    self, BlockedLane, GapAction, GapEvent, Gate, Head, Lane, LaneEntry, LaneRef, OnDeadLetter, Releaser,
};
use crate::saga::{OriginKind, Saga, SagaStatus};

/// Heads taken out by one look at a lane (each a saga that will never
/// leave): bounded, the rest wait for the next look.
const MAX_HEALS: usize = 16;

/// Does the subscription still exist? The cache first; a subscription it
/// does not know is read from the store (nothing is decided on a cache's
/// word alone).
pub async fn subscription_exists(h: &Hookline, id: &SubscriptionId) -> Result<bool, StoreError> {
    if h.subscription_cache.get(h.stores.subscriptions.as_ref(), id).await?.is_some() {
        return Ok(true);
    }
    Ok(h.stores.subscriptions.get(id).await?.is_some())
}

/// What a lane's head means to a saga behind it ([`ordering::judge_head`]).
pub async fn judge(h: &Hookline, head: &LaneEntry, subscription_exists: bool) -> Result<Head, StoreError> {
    let saga = h.stores.sagas.get(&head.event_id, &head.saga_id).await?;
    let on_dead_letter = saga.as_ref().and_then(|s| s.lane.as_ref()).map(|l| l.on_dead_letter).unwrap_or_default();
    Ok(ordering::judge_head(saga.map(|s| s.state.status), on_dead_letter, subscription_exists))
}

/// Takes a head that will never leave out of its lane, and wakes the next
/// saga if it is not `me` (nobody else would: its predecessor is gone).
async fn take_out(h: &Hookline, lane: &Lane, head: &LaneEntry, me: Option<&SagaId>) -> Result<(), StoreError> {
    tracing::info!(subscription_id = %lane.subscription_id, partition_key = %lane.partition.key, seq = head.seq, saga_id = %head.saga_id, "ordered lane: its head will never leave (expired, ended, or its subscription deleted); taken out");
    h.stores.order.dequeue(lane, head.seq, &head.saga_id).await?;
    h.stores.order.unblock(lane).await?;
    if let Some(next) = h.stores.order.head(lane).await? {
        if Some(&next.saga_id) != me {
            wake_at(h, &next.event_id, &next.saga_id, Duration::ZERO).await?;
        }
    }
    Ok(())
}

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
    match h.stores.sagas.get(event_id, saga_id).await? {
        Some(current) => admit_read(h, current, by).await,
        None => Ok(()),
    }
}

/// [`admit`] of a saga as just read from the store (`current`): the caller
/// that has read it to decide whether to admit it does not read it twice.
async fn admit_read(h: &Hookline, mut current: Saga, by: Releaser) -> Result<(), StoreError> {
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
            h.stores.order.unblock(&lane).await?;
        }
    }
    // A deleted subscription keeps no order: the saga goes, and its
    // delivery is refused and dead-lettered ("subscription no longer
    // exists"), which lets the next one go in turn.
    if !subscription_exists(h, &current.subscription_id).await? {
        return super::saga::begin(h, &current, by).await;
    }
    let mut looked_again = false;
    let mut heals = 0;
    // The head judged alive on the first look: the second look (after the
    // hold) does not read its saga again. Should it end without leaving in
    // between, the reconciler's recheck of Waiting sagas takes it out.
    let mut alive: Option<LaneEntry> = None;
    for _ in 0..4 + MAX_HEALS {
        let routed = h.stores.order.routed_through(&lane.partition).await?;
        let head = h.stores.order.head(&lane).await?;
        match ordering::gate(l.seq, &current.id, routed, head.as_ref()) {
            // Its own start, once it has marked itself Waiting, releases as
            // itself.
            Gate::Go => {
                let by = if looked_again { Releaser::Itself } else { by };
                if current.state.status == SagaStatus::Waiting && waited(&current) >= ordering::GAP_SHOWN_AFTER {
                    // It may have shown its lane as blocked (a gap).
                    h.stores.order.unblock(&lane).await?;
                }
                return super::saga::begin(h, &current, by).await;
            }
            Gate::WaitForLane if heals < MAX_HEALS => {
                let first = head.expect("waiting for the lane: it has a head");
                if alive.as_ref() != Some(&first) {
                    if judge(h, &first, true).await? == Head::Missing {
                        heals += 1;
                        take_out(h, &lane, &first, Some(&current.id)).await?;
                        continue;
                    }
                    alive = Some(first);
                }
                if let Some(done) = wait(h, &mut current, Gate::WaitForLane, &mut looked_again, &lane, routed).await? {
                    return Ok(done);
                }
            }
            Gate::NotInLane => {
                let entry = LaneEntry { seq: l.seq, saga_id: current.id.clone(), event_id: current.event_id.clone() };
                h.stores.order.enqueue(&lane, &entry).await?;
            }
            gate => {
                if let Some(done) = wait(h, &mut current, gate, &mut looked_again, &lane, routed).await? {
                    return Ok(done);
                }
            }
        }
    }
    Ok(())
}

/// How long a Waiting saga has waited (since it was marked Waiting).
fn waited(s: &Saga) -> Duration {
    (Utc::now() - s.updated_at).to_std().unwrap_or_default()
}

/// A saga that may not start yet waits: marked Waiting if it was Pending;
/// waiting for routing, it looks again after [`ordering::routing_recheck`]
/// (and shows its lane as blocked once the gap is older than
/// [`ordering::GAP_SHOWN_AFTER`]). `Some(())` when [`admit`] is done,
/// `None` to look at the lane once more.
async fn wait(
    h: &Hookline,
    current: &mut Saga,
    gate: Gate,
    looked_again: &mut bool,
    lane: &Lane,
    routed: u64,
) -> Result<Option<()>, StoreError> {
    if current.state.status == SagaStatus::Pending {
        match super::saga::hold(h, current).await? {
            Some(held) => *current = held,
            // Changed under us (started by another worker).
            None => return Ok(Some(())),
        }
    }
    if gate == Gate::WaitForRouting {
        let waited = waited(current);
        let next = ordering::routing_recheck(waited);
        tracing::info!(saga_id = %current.id, subscription_id = %current.subscription_id, partition_key = %lane.partition.key, missing_seq = routed + 1, waited_ms = waited.as_millis() as u64, next_look_ms = next.as_millis() as u64, "ordered saga waits for an earlier event of its partition to be routed");
        if waited >= ordering::GAP_SHOWN_AFTER {
            let blocked = BlockedLane {
                partition: lane.partition.clone(),
                since: current.updated_at,
                reason: format!("event {} of the partition is not routed", routed + 1),
            };
            h.stores.order.block(lane, &blocked).await?;
        }
        return wake_at(h, &current.event_id, &current.id, next).await.map(Some);
    }
    // Its predecessor may have left between the gate and the hold, and
    // woken nobody (this saga was not Waiting yet): look once more.
    if *looked_again {
        return Ok(Some(()));
    }
    *looked_again = true;
    Ok(None)
}

/// A saga ended (`job` is its last job): it leaves its lane if it
/// completed, or was dead-lettered under `on_dead_letter: "continue"`, and
/// the lane's next saga is woken. Under `"block"` a dead-lettered saga stays
/// until it is requeued (its successor takes its place) or skipped
/// ([`skipped`]).
pub async fn ended(h: &Hookline, job: &DeliveryJob, dead_lettered: bool) -> Result<(), StoreError> {
    let Some(l) = &job.lane else { return Ok(()) };
    let lane = lane_of(&job.subscription_id, l);
    // A deleted subscription's lane blocks nothing: its waiting sagas go on
    // to end (refused) instead of waiting for good.
    if dead_lettered && l.on_dead_letter == OnDeadLetter::Block && subscription_exists(h, &job.subscription_id).await? {
        tracing::warn!(saga_id = %job.saga_id, subscription_id = %job.subscription_id, partition_key = %l.partition.key, seq = l.seq, "ordered partition blocked behind a dead letter until it is requeued or skipped");
        let blocked = BlockedLane {
            partition: l.partition.clone(),
            since: Utc::now(),
            reason: format!(
                "dead letter {} (event {} of the partition)",
                crate::ids::dead_letter_id(&job.saga_id),
                l.seq
            ),
        };
        return h.stores.order.block(&lane, &blocked).await;
    }
    h.stores.order.dequeue(&lane, l.seq, &job.saga_id).await?;
    // A crash here: the attempt is handed to the saga stage again, which
    // finds the saga ended and leaves the lane again (both idempotent).
    h.failpoints.hit("order.after_leave");
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
    h.stores.order.unblock(&lane).await?;
    if let Some(next) = h.stores.order.head(&lane).await? {
        wake_at(h, &next.event_id, &next.saga_id, Duration::ZERO).await?;
    }
    Ok(())
}

/// Sends the wake-up of a waiting saga (a retry timer of attempt 0) after `delay`.
async fn wake_at(h: &Hookline, event_id: &EventId, saga_id: &SagaId, delay: Duration) -> Result<(), StoreError> {
    let due_at = Utc::now() + chrono::Duration::from_std(delay).unwrap_or_default();
    let timer =
        RetryTimer { event_id: event_id.clone(), saga_id: saga_id.clone(), attempt: 0, due_at, ack_since: None };
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
        Some(s) if s.state.status == SagaStatus::Waiting => admit_read(h, s, by).await,
        _ => Ok(()),
    }
}

/// How the reconciler sees a Waiting saga past its due time.
pub async fn look(h: &Hookline, s: &Saga) -> Result<ordering::WaiterState, StoreError> {
    let Some(l) = &s.lane else { return Ok(ordering::WaiterState::Stalled) };
    let lane = lane_of(&s.subscription_id, l);
    let routed = h.stores.order.routed_through(&lane.partition).await?;
    let head = h.stores.order.head(&lane).await?;
    let gate = ordering::gate(l.seq, &s.id, routed, head.as_ref());
    let judged = match (&gate, &head) {
        (Gate::WaitForLane, Some(first)) => {
            Some(judge(h, first, subscription_exists(h, &s.subscription_id).await?).await?)
        }
        _ => None,
    };
    Ok(ordering::waiter_state(&gate, judged))
}

/// Events of a partition read, at most, looking for a gap's event.
const GAP_SEARCH_LIMIT: usize = 1000;

/// What [`heal_gap`] found, and what is left to the caller.
#[derive(Debug)]
pub enum GapHealing {
    /// No gap to heal, or not yet: the saga looks at its lane as usual.
    Nothing,
    /// The gap's number was passed (its event expired) and the saga looked again.
    Passed,
    /// The event at the gap was never routed: the caller routes it
    /// (`stage::route`, above this module), then admits the saga again.
    RouteAgain(Box<EventRecord>),
}

/// The reconciler's hand with a gap that `s` has waited for for longer
/// than `bound` ([`ordering::gap_action`]): the event at the gap is looked
/// up through the events' partition index; not stored (expired), the mark
/// passes its number and `s` looks again; stored, it is handed back to be
/// routed again ([`GapHealing::RouteAgain`]).
pub async fn heal_gap(h: &Hookline, s: &Saga, bound: chrono::Duration) -> Result<GapHealing, StoreError> {
    let Some(l) = &s.lane else { return Ok(GapHealing::Nothing) };
    let routed = h.stores.order.routed_through(&l.partition).await?;
    if routed + 1 >= l.seq {
        return Ok(GapHealing::Nothing);
    }
    let missing = routed + 1;
    let Some(event) = gap_event(h, &l.partition, missing).await? else {
        tracing::warn!(partition_key = %l.partition.key, seq = missing, "ordered lane: cannot tell whether the event at a gap is stored; skip the lane if it is lost (POST /v1/subscriptions/{{id}}/lanes/{{key}}/skip)");
        return Ok(GapHealing::Nothing);
    };
    let waited = Utc::now() - s.updated_at;
    match (
        ordering::gap_action(waited, bound, if event.is_some() { GapEvent::Stored } else { GapEvent::Missing }),
        event,
    ) {
        (GapAction::Wait, _) => return Ok(GapHealing::Nothing),
        (GapAction::Pass, _) => {
            tracing::warn!(partition_key = %l.partition.key, seq = missing, "ordered lane: the event at a gap is no longer stored (retention ended); its number is passed");
            h.stores.order.mark_routed(&l.partition, missing).await?;
        }
        (GapAction::Route, Some(e)) => {
            tracing::warn!(partition_key = %l.partition.key, seq = missing, event_id = %e.id, "ordered lane: the event at a gap was never routed; routing it again");
            return Ok(GapHealing::RouteAgain(Box::new(e)));
        }
        (GapAction::Route, None) => return Ok(GapHealing::Nothing),
    }
    admit(h, &s.event_id, &s.id, Releaser::Reconciler).await?;
    Ok(GapHealing::Passed)
}

/// The event numbered `seq` in `partition`: `Some(None)` if it is provably
/// not stored (the partition's stored numbers pass it without it), `None`
/// if the search limit ran out first.
async fn gap_event(
    h: &Hookline,
    partition: &ordering::Partition,
    seq: u64,
) -> Result<Option<Option<EventRecord>>, StoreError> {
    let tenant = partition.tenant().map(crate::ids::TenantId::new);
    let query = crate::event_search::EventQuery {
        tenant_id: tenant,
        partition_key: Some(partition.key.clone()),
        order: crate::event_search::Order::OldestFirst,
        ..Default::default()
    };
    let (mut after, mut read) = (None, 0);
    while read < GAP_SEARCH_LIMIT {
        let page = h.stores.events.search(&query, 100, after.as_deref()).await?;
        read += page.items.len().max(1);
        for e in &page.items {
            match e.partition_seq {
                Some(n) if n == seq => return Ok(Some(h.stores.events.get(&e.id).await?)),
                Some(n) if n > seq => return Ok(Some(None)),
                _ => {}
            }
        }
        match page.next {
            Some(n) => after = Some(n),
            None => return Ok(Some(None)),
        }
    }
    Ok(None)
}

/// What an ops skip of a lane did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaneSkipped {
    /// The partition's numbers `from..=to` were passed as routed (their
    /// events' routing was lost); the lane's head looks again.
    Gap {
        /// First number passed.
        from: u64,
        /// Last number passed.
        to: u64,
    },
    /// The head's entry, whose saga will never leave, was taken out.
    Head {
        /// The saga taken out.
        saga_id: SagaId,
    },
}

/// Why a lane could not be skipped.
#[derive(Debug, thiserror::Error)]
pub enum LaneSkipError {
    /// Nothing holds the lane: it is empty, or its head is live.
    #[error("the lane is not blocked: nothing to skip")]
    NotBlocked,
    /// A dead letter holds it (`on_dead_letter: "block"`): that is skipped
    /// or requeued as a dead letter, with its own audit record.
    #[error("dead letter {0} holds the lane: requeue or skip it")]
    DeadLetter(crate::ids::DeadLetterId),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Gaps passed by one skip, at most (a larger run of lost numbers takes
/// several skips).
const MAX_SKIPPED_NUMBERS: u64 = 1000;

/// Ops skip what holds a lane (docs/operations.md#ordered-lanes): a gap
/// (numbers never routed) is passed, or a head that will never leave is
/// taken out; the lane's next saga looks again.
pub async fn skip_lane(h: &Hookline, lane: &Lane) -> Result<LaneSkipped, LaneSkipError> {
    let head = h.stores.order.head(lane).await?.ok_or(LaneSkipError::NotBlocked)?;
    let routed = h.stores.order.routed_through(&lane.partition).await?;
    if routed + 1 < head.seq {
        let to = (head.seq - 1).min(routed + MAX_SKIPPED_NUMBERS);
        for n in routed + 1..=to {
            h.stores.order.mark_routed(&lane.partition, n).await?;
        }
        h.stores.order.unblock(lane).await?;
        wake_at(h, &head.event_id, &head.saga_id, Duration::ZERO).await?;
        return Ok(LaneSkipped::Gap { from: routed + 1, to });
    }
    match judge(h, &head, true).await? {
        Head::Live => Err(LaneSkipError::NotBlocked),
        Head::Blocking => Err(LaneSkipError::DeadLetter(crate::ids::dead_letter_id(&head.saga_id))),
        Head::Missing => {
            take_out(h, lane, &head, None).await?;
            Ok(LaneSkipped::Head { saga_id: head.saga_id })
        }
    }
}

/// Blocked lanes let go per call of [`release_deleted`], at most.
const MAX_RELEASED_LANES: usize = 1000;

/// A subscription was deleted: each of its blocked lanes lets its head go
/// (a blocking dead letter blocks nothing any more), so its waiting sagas
/// end, refused ("subscription no longer exists"), instead of waiting for
/// good. Lanes not blocked end by themselves (their live head ends, refused,
/// and lets the next go); any left over are found by the reconciler.
/// Returns the lanes let go.
pub async fn release_deleted(h: &Hookline, subscription_id: &SubscriptionId) -> Result<usize, StoreError> {
    let mut released = 0;
    while released < MAX_RELEASED_LANES {
        let blocked = h.stores.order.blocked(subscription_id, 100).await?;
        if blocked.is_empty() {
            break;
        }
        for b in blocked {
            let lane = Lane { subscription_id: subscription_id.clone(), partition: b.partition };
            match h.stores.order.head(&lane).await? {
                Some(head) if judge(h, &head, false).await? == Head::Missing => take_out(h, &lane, &head, None).await?,
                Some(head) => wake_at(h, &head.event_id, &head.saga_id, Duration::ZERO).await?,
                None => {}
            }
            h.stores.order.unblock(&lane).await?;
            released += 1;
        }
    }
    Ok(released)
}
