//! Ordered delivery per partition key (docs/delivery.md#ordering).
//!
//! Every event with a partition key gets, when it is accepted, the next
//! number of its partition (`EventRecord::partition_seq`: 1, 2, 3… per
//! tenant scope and key, written in the same transaction as the event), so
//! "the order Hookline accepted them" is a number, the same on both
//! backends however the router's input is sharded. Deliveries carry it as
//! `hookline-sequence` (with `hookline-partition-key`), for every
//! subscription, so any receiver can drop stale or repeated events.
//!
//! A subscription with `ordering: "partition"` gets a *lane* per partition:
//! routing puts each of its sagas in the lane under the event's number
//! before the saga exists, and a saga may start only when
//! - every event of the partition before it has been routed (the
//!   partition's *routed-through* mark, [`advance`]), so no earlier saga
//!   can still appear in the lane; and
//! - it is the lane's head: every earlier saga of the lane has left it.
//!
//! A saga leaves its lane when it completes, is skipped, or is
//! dead-lettered under `on_dead_letter: "continue"`; under `"block"` a
//! dead-lettered saga holds the lane until it is requeued and delivered, or
//! skipped. Leaving releases the next head ([`gate`] decides; the saga stage
//! acts). Other partitions and unordered subscriptions never wait.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::{EventId, SagaId, SubscriptionId};

pub use crate::lane::{LaneRef, OnDeadLetter, Ordering, Partition};

/// One saga waiting in (or at the head of) a lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneEntry {
    /// The event's number in the partition.
    pub seq: u64,
    /// The saga.
    pub saga_id: SagaId,
    /// Its event (the saga's key on DynamoDB).
    pub event_id: EventId,
}

/// A lane: one ordered subscription's sagas of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    /// The subscription.
    pub subscription_id: SubscriptionId,
    /// The partition.
    pub partition: Partition,
}

/// What an ordered saga may do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// It is the head of its lane and nothing before it is unrouted: start.
    Go,
    /// An earlier event of the partition is not routed yet: look again soon.
    WaitForRouting,
    /// An earlier saga is still in the lane: its leaving releases this one.
    WaitForLane,
    /// The saga is not in its lane (routing crashed before putting it
    /// there, or it was requeued): put it there, then ask again.
    NotInLane,
}

/// Who releases a Waiting saga. Several may try at once; the one whose
/// conditional write lands sends its job. The deadline a released saga
/// carries ([`release_deadline`]) is a function of the releaser, so the
/// same releaser retrying after a crash recognises its own write and sends
/// the job it may not have sent, and another never sends a second one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Releaser {
    /// The saga before it in the lane, as it left.
    Predecessor,
    /// The saga's own start, looking again after it was marked Waiting.
    Itself,
    /// A wake-up timer (waiting for routing, or a skipped dead letter).
    Timer,
    /// The reconciler (a lost wake-up).
    Reconciler,
}

/// The deadline of a saga released by `by` from a wait that began at
/// `waiting_since`: [`crate::saga::WAITING_RECHECK`] later, plus a
/// millisecond per releaser so that two releasers never write the same one.
pub fn release_deadline(waiting_since: DateTime<Utc>, by: Releaser) -> DateTime<Utc> {
    let ms = match by {
        Releaser::Predecessor => 0,
        Releaser::Itself => 1,
        Releaser::Timer => 2,
        Releaser::Reconciler => 3,
    };
    waiting_since
        + chrono::Duration::from_std(crate::saga::WAITING_RECHECK).expect("small")
        + chrono::Duration::milliseconds(ms)
}

/// Whether saga `me` (number `seq`) may start, given the partition's
/// routed-through mark and the lane's head.
pub fn gate(seq: u64, me: &SagaId, routed_through: u64, head: Option<&LaneEntry>) -> Gate {
    if routed_through + 1 < seq {
        return Gate::WaitForRouting;
    }
    match head {
        Some(h) if h.seq == seq && h.saga_id == *me => Gate::Go,
        Some(h) if (h.seq, &h.saga_id) < (seq, me) => Gate::WaitForLane,
        // Empty, or the head is after this saga: it is missing from the lane.
        _ => Gate::NotInLane,
    }
}

/// The routed-through mark after event `seq` was routed: `routed` is the
/// highest number below which every event is routed, `ahead` the numbers
/// routed out of turn (a router shard got ahead of another). Returns the new
/// mark and what stays ahead, sorted.
pub fn advance(routed: u64, ahead: &[u64], seq: u64) -> (u64, Vec<u64>) {
    let mut ahead: Vec<u64> = ahead.iter().copied().filter(|n| *n > routed).collect();
    if seq > routed && !ahead.contains(&seq) {
        ahead.push(seq);
    }
    ahead.sort_unstable();
    let mut routed = routed;
    while ahead.first() == Some(&(routed + 1)) {
        routed += 1;
        ahead.remove(0);
    }
    (routed, ahead)
}

/// Most numbers a partition keeps routed out of turn. Beyond it the router
/// fails the record and its stream retries it after the earlier ones (two
/// shards never drift this far apart for one partition in practice).
pub const MAX_AHEAD: usize = 256;

/// The first wait of a saga whose partition has an earlier event not yet
/// routed (a gap in the routed-through mark).
pub const ROUTING_RECHECK_MIN: Duration = Duration::from_secs(1);

/// The longest wait between two looks at a gap: an event whose routing was
/// lost is looked at every 5 minutes at most, never every second.
pub const ROUTING_RECHECK_MAX: Duration = Duration::from_secs(300);

/// How long a saga that has waited `waited` for an earlier event's routing
/// waits before it looks again: [`ROUTING_RECHECK_MIN`] more than it has
/// waited so far (so the waits double: 1 s, 2 s, 4 s…), at most
/// [`ROUTING_RECHECK_MAX`]. Derived from the saga's own waiting time, so it
/// needs no stored counter and a lost timer costs nothing but one look.
pub fn routing_recheck(waited: Duration) -> Duration {
    (waited + ROUTING_RECHECK_MIN).min(ROUTING_RECHECK_MAX)
}

/// A gap shows as a blocked lane (`GET /v1/subscriptions/{id}`) once a saga
/// has waited this long for it: short gaps (a router shard a moment behind
/// another) are normal and write nothing.
pub const GAP_SHOWN_AFTER: Duration = Duration::from_secs(5);

/// What the saga at the head of a lane, seen by a saga waiting behind it,
/// means for the lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    /// Running, retrying or waiting itself: its end releases the next.
    Live,
    /// Dead-lettered under `on_dead_letter: "block"`: the lane waits for ops
    /// (requeue or skip of the dead letter). Not stalled.
    Blocking,
    /// Its entry is left but nothing will take it out: the saga is no longer
    /// stored (its retention ended), or ended without leaving (a lost
    /// leave), or blocks for a subscription that no longer exists. Taking
    /// it out is safe: the lane's order only waits for live sagas.
    Missing,
}

/// Judges a lane's head from its saga as stored (`None`: not stored), the
/// `on_dead_letter` it carries, and whether its subscription still exists.
pub fn judge_head(
    status: Option<crate::saga::SagaStatus>,
    on_dead_letter: OnDeadLetter,
    subscription_exists: bool,
) -> Head {
    use crate::saga::SagaStatus::*;
    match status {
        None | Some(Completed) => Head::Missing,
        Some(DeadLettered) if on_dead_letter == OnDeadLetter::Block && subscription_exists => Head::Blocking,
        Some(DeadLettered) => Head::Missing,
        Some(Pending | Waiting | InProgress | PendingRetry | AwaitingAck) => Head::Live,
    }
}

/// What is known of the event a gap waits for (number `routed + 1` of the
/// partition), looked up through the events' partition index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GapEvent {
    /// Not stored: its retention ended (a number is only ever taken with
    /// its event's insert), so it can never be routed.
    Missing,
    /// Stored, but its routing was lost (a given-up stream batch whose
    /// records are gone).
    Stored,
}

/// What the reconciler does about a gap that a saga has waited for for
/// `waited`, once it is older than `bound` (the stall margin).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GapAction {
    /// Too young: routing may still come (a stream retries for minutes).
    Wait,
    /// The event can never be routed: move the mark past its number.
    Pass,
    /// The event is stored: route it again (routing is idempotent, so a
    /// late or second routing creates nothing twice).
    Route,
}

/// The reconciler's decision on a gap (docs/delivery.md#ordering).
pub fn gap_action(waited: chrono::Duration, bound: chrono::Duration, event: GapEvent) -> GapAction {
    if waited < bound {
        return GapAction::Wait;
    }
    match event {
        GapEvent::Missing => GapAction::Pass,
        GapEvent::Stored => GapAction::Route,
    }
}

/// What the reconciler makes of a Waiting saga past its due time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaiterState {
    /// Legitimately waiting (behind a live saga or a blocking dead letter):
    /// not stalled, not counted, looked at again later.
    Waiting,
    /// Its lane needs a hand (it is the head and was never woken, the head
    /// is missing, or a gap is old): re-driven and counted.
    Stalled,
}

/// Classifies a Waiting saga from its gate and, when it waits for the
/// lane, its head.
pub fn waiter_state(gate: &Gate, head: Option<Head>) -> WaiterState {
    match (gate, head) {
        (Gate::WaitForLane, Some(Head::Live | Head::Blocking)) => WaiterState::Waiting,
        _ => WaiterState::Stalled,
    }
}

/// A lane shown as blocked: since when, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockedLane {
    /// The partition.
    pub partition: Partition,
    /// When it began to hold the lane.
    pub since: DateTime<Utc>,
    /// What holds it, for operators.
    pub reason: String,
}

/// Most blocked lanes `GET /v1/subscriptions/{id}` shows (the oldest).
pub const BLOCKED_LANES_SHOWN: usize = 10;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_moves_over_every_number_routed_in_turn_and_waits_at_a_gap() {
        assert_eq!(advance(0, &[], 1), (1, vec![]));
        assert_eq!(advance(1, &[], 3), (1, vec![3]), "2 is missing: 3 waits ahead");
        assert_eq!(advance(1, &[3], 4), (1, vec![3, 4]));
        assert_eq!(advance(1, &[3, 4], 2), (4, vec![]), "2 closes the gap: the mark jumps over 3 and 4");
        assert_eq!(advance(4, &[], 4), (4, vec![]), "routing again changes nothing");
        assert_eq!(advance(4, &[], 2), (4, vec![]));
        assert_eq!(advance(1, &[3], 3), (1, vec![3]), "a number is kept once");
    }

    #[test]
    fn a_saga_goes_only_at_the_head_of_its_lane_with_everything_before_it_routed() {
        let me = SagaId::new("sg_b");
        let entry = |seq, id: &str| LaneEntry { seq, saga_id: SagaId::new(id), event_id: EventId::new("e") };
        assert_eq!(gate(3, &me, 2, Some(&entry(3, "sg_b"))), Gate::Go);
        assert_eq!(gate(3, &me, 1, Some(&entry(3, "sg_b"))), Gate::WaitForRouting, "2 may still come");
        assert_eq!(gate(3, &me, 5, Some(&entry(2, "sg_a"))), Gate::WaitForLane);
        assert_eq!(gate(3, &me, 5, Some(&entry(3, "sg_a"))), Gate::WaitForLane, "same number, earlier saga");
        assert_eq!(gate(3, &me, 5, None), Gate::NotInLane);
        assert_eq!(gate(3, &me, 5, Some(&entry(4, "sg_c"))), Gate::NotInLane);
        assert_eq!(gate(1, &me, 0, Some(&entry(1, "sg_b"))), Gate::Go, "the first needs nothing routed");
    }

    #[test]
    fn a_partition_knows_its_tenant() {
        assert_eq!(Partition::of(Some("acme:eu"), "k").tenant(), Some("acme:eu"));
        assert_eq!(Partition::of(None, "k").tenant(), None);
    }

    #[test]
    fn a_gap_is_looked_at_ever_less_often_up_to_five_minutes() {
        let secs = |n| routing_recheck(Duration::from_secs(n)).as_secs();
        assert_eq!(secs(0), 1, "the first look after a second");
        assert_eq!((secs(1), secs(3), secs(7), secs(15)), (2, 4, 8, 16), "each wait twice the one before");
        assert_eq!(secs(3600), 300, "capped");
        // Looks over an hour: about a dozen, not 3,600.
        let (mut t, mut looks) = (0u64, 0);
        while t < 3600 {
            t += secs(t);
            looks += 1;
        }
        assert!(looks < 25, "{looks} looks in an hour");
    }

    #[test]
    fn a_head_that_will_never_leave_is_missing_and_a_blocking_dead_letter_blocks() {
        use crate::saga::SagaStatus::*;
        assert_eq!(judge_head(None, OnDeadLetter::Block, true), Head::Missing, "expired");
        assert_eq!(judge_head(Some(Completed), OnDeadLetter::Block, true), Head::Missing, "ended without leaving");
        assert_eq!(judge_head(Some(DeadLettered), OnDeadLetter::Continue, true), Head::Missing);
        assert_eq!(judge_head(Some(DeadLettered), OnDeadLetter::Block, true), Head::Blocking);
        assert_eq!(
            judge_head(Some(DeadLettered), OnDeadLetter::Block, false),
            Head::Missing,
            "a deleted subscription's lane blocks nothing"
        );
        for s in [Pending, Waiting, InProgress, PendingRetry] {
            assert_eq!(judge_head(Some(s), OnDeadLetter::Block, true), Head::Live, "{s:?}");
        }
    }

    #[test]
    fn an_old_gap_is_passed_when_its_event_is_gone_and_routed_again_when_stored() {
        let (m, h) = (chrono::Duration::minutes, chrono::Duration::hours(1));
        assert_eq!(gap_action(m(5), h, GapEvent::Missing), GapAction::Wait, "young: routing may still come");
        assert_eq!(gap_action(m(61), h, GapEvent::Missing), GapAction::Pass);
        assert_eq!(gap_action(m(61), h, GapEvent::Stored), GapAction::Route);
    }

    #[test]
    fn waiters_behind_a_live_or_blocking_head_are_not_stalled() {
        use WaiterState::*;
        assert_eq!(waiter_state(&Gate::WaitForLane, Some(Head::Live)), Waiting);
        assert_eq!(waiter_state(&Gate::WaitForLane, Some(Head::Blocking)), Waiting);
        assert_eq!(waiter_state(&Gate::WaitForLane, Some(Head::Missing)), Stalled);
        assert_eq!(waiter_state(&Gate::Go, None), Stalled, "at the head, never woken");
        assert_eq!(waiter_state(&Gate::WaitForRouting, None), Stalled);
    }
}
