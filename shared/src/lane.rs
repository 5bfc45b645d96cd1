//! The names of ordered delivery's lanes ([`crate::ordering`] has the
//! rules): whether a subscription is ordered, what a dead letter does to
//! its lane, a partition, and a saga's place in its lane. Events, sagas and
//! subscriptions carry these, so they sit below all three.

use serde::{Deserialize, Serialize};

use crate::tenant::Scope;

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
    /// The tenant scope as routing writes it ([`Scope::as_text`]).
    pub scope: String,
    /// The producer's partition key.
    pub key: String,
}

impl Partition {
    /// The partition of an event with this tenant and partition key.
    pub fn of(tenant_id: Option<&str>, key: &str) -> Partition {
        Partition { scope: Scope::of(tenant_id).as_text(), key: key.to_string() }
    }

    /// The tenant of the partition's scope (`None` for events without one):
    /// the inverse of [`Partition::of`].
    pub fn tenant(&self) -> Option<&str> {
        let rest = self.scope.strip_prefix('t')?;
        let (len, tenant) = rest.split_once(':')?;
        (len.parse::<usize>().ok()? == tenant.len()).then_some(tenant)
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
