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

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::{EventId, SagaId, SubscriptionId};

/// Whether a subscription's deliveries keep the order of their partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Ordering {
    /// Deliveries run concurrently (the default).
    #[default]
    None,
    /// Per partition key, in acceptance order: the next event of a
    /// partition is not attempted before the one before it left its lane.
    Partition,
}

/// What a dead letter does to its partition's lane (ordered subscriptions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum OnDeadLetter {
    /// The partition goes on with its next event (the default).
    #[default]
    Continue,
    /// The partition waits until the dead letter is requeued and delivered,
    /// or skipped.
    Block,
}

/// One partition: the events of one tenant scope with one partition key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Partition {
    /// The tenant scope as routing writes it ([`crate::routing::Scope::as_text`]).
    pub scope: String,
    /// The producer's partition key.
    pub key: String,
}

impl Partition {
    /// The partition of an event with this tenant and partition key.
    pub fn of(tenant_id: Option<&str>, key: &str) -> Partition {
        Partition { scope: crate::routing::Scope::of(tenant_id).as_text(), key: key.to_string() }
    }
}

/// A saga's place in its ordered subscription's lane, stored on the saga.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneRef {
    /// The partition.
    pub partition: Partition,
    /// The event's number in it.
    pub seq: u64,
    /// The subscription's `on_dead_letter` when the saga was created.
    pub on_dead_letter: OnDeadLetter,
}

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

/// The lane a new saga of `sub` for `event` takes: one when the
/// subscription is ordered and the event has a partition number.
pub fn lane_for(sub: &crate::subscription::Subscription, event: &crate::event::EventRecord) -> Option<LaneRef> {
    if sub.ordering != Ordering::Partition {
        return None;
    }
    Some(LaneRef { partition: event.partition()?, seq: event.partition_seq?, on_dead_letter: sub.on_dead_letter })
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
}
