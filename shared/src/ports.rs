//! Ports: one narrow trait per store or queue. The stages depend on these
//! only; `sqlite` implements them for `hookline serve`, the AWS adapters for
//! Lambda. Every write that must be idempotent is conditional here, so both
//! backends give the same guarantees.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::attempt::Attempt;
use crate::bounds::{all_bounded, MAX_STORE_IN_FLIGHT};
use crate::bulk::Job;
use crate::dead_letter::{DeadLetter, DeadLetterQuery, DeadLetterState, Resolution};
use crate::error::StoreError;
use crate::event::EventRecord;
use crate::event_search::{EventQuery, EventSummary, Outcome};
use crate::ids::{DeadLetterId, EventId, SagaId, SubscriptionId};
use crate::routing::RouteKey;
use crate::saga::{Saga, SagaState};
use crate::subscription::Subscription;

/// Result alias for port calls.
pub type StoreResult<T> = Result<T, StoreError>;

pub use crate::metrics::QueueDepth;
pub use crate::time_range::TimeRange;

/// One page of a store listing: its items, and where the next page starts
/// (a position only this store understands, which the API wraps in an
/// opaque cursor); `None` on the last page.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Page<T> {
    /// Up to the page's limit.
    pub items: Vec<T>,
    /// Where the next page starts; `None` when there is no more.
    pub next: Option<String>,
}

/// Append-only event log.
#[async_trait]
pub trait EventStore: Send + Sync {
    /// Inserts each event unless one with its id exists; `true` where
    /// inserted. An event with a partition key is stored with the next
    /// number of its partition (`partition_seq`, [`crate::ordering`]),
    /// assigned in the same transaction, so numbers follow acceptance and a
    /// duplicate takes none.
    async fn insert(&self, events: &[EventRecord]) -> StoreResult<Vec<bool>>;
    /// One event by id.
    async fn get(&self, id: &EventId) -> StoreResult<Option<EventRecord>>;
    /// Up to `limit` events matching `query`, in its order, after the
    /// position `after` (from the start when `None`; a position from a
    /// previous [`Page::next`], meaningful only to this store), read through
    /// an index, never a scan of every event. A page may hold fewer than
    /// `limit` items and still have a `next` (a store bounds the reads of
    /// one call); walking `next` to `None` lists every match once, also
    /// while events are being added (those added behind the walk's position
    /// are not listed).
    async fn search(&self, query: &EventQuery, limit: usize, after: Option<&str>) -> StoreResult<Page<EventSummary>>;
    /// Raises the event's delivery outcome to `outcome`: a conditional
    /// write that changes nothing (and writes nothing on SQLite) when it is
    /// already as high, so it is stored once per rise. `false` when nothing
    /// changed (already that high, or no such event).
    async fn mark_outcome(&self, id: &EventId, outcome: Outcome) -> StoreResult<bool>;
}

/// Which subscriptions a page of [`SubscriptionStore::page`] lists.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SubscriptionFilter {
    /// Every subscription.
    #[default]
    All,
    /// Those whose `tenant_id` is this tenant.
    Tenant(crate::ids::TenantId),
    /// Those with an index entry under any of these keys (an event's
    /// [`crate::routing::route_keys`]: the subscriptions in its scope).
    Routes(Vec<RouteKey>),
}

/// One page of subscriptions, in id order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SubscriptionPage {
    /// Up to the page's limit, ordered by id.
    pub items: Vec<Subscription>,
    /// Where the next page starts (after this id); `None` on the last page.
    pub next_after: Option<SubscriptionId>,
}

/// Subscription configuration, with an index by [`RouteKey`] that every
/// write keeps in step with the subscription (in the same transaction), so
/// routing looks up an event's few keys instead of reading every
/// subscription. A subscription has at most
/// [`crate::bounds::MAX_SUBSCRIPTION_PATTERNS`] patterns.
#[async_trait]
pub trait SubscriptionStore: Send + Sync {
    /// Stores a new subscription and its index entries.
    async fn create(&self, sub: &Subscription) -> StoreResult<()>;
    /// One subscription by id.
    async fn get(&self, id: &SubscriptionId) -> StoreResult<Option<Subscription>>;
    /// Several by id, in the order asked (`None` where there is none). May
    /// be eventually consistent (DynamoDB: a write may show up a moment
    /// late), unlike [`SubscriptionStore::get`]: it fills caches that
    /// trust a copy for seconds anyway, and nothing is refused on its word
    /// alone ([`crate::context::SubscriptionCache::confirm`]).
    async fn get_many(&self, ids: &[SubscriptionId]) -> StoreResult<Vec<Option<Subscription>>> {
        all_bounded(ids.iter().map(|id| self.get(id)).collect(), MAX_STORE_IN_FLIGHT).await.into_iter().collect()
    }
    /// For each key, the ids of the subscriptions indexed under it (one list
    /// per key, in the order asked): routing's candidates, found through the
    /// index and never by reading every subscription. May lag a write
    /// briefly where the index is eventually consistent (DynamoDB); callers
    /// check each candidate with [`crate::routing::wants`].
    async fn routes(&self, keys: &[RouteKey]) -> StoreResult<Vec<Vec<SubscriptionId>>>;
    /// Up to `limit` subscriptions of `filter` with ids after `after` (from
    /// the first when `None`), in id order, and where the next page starts.
    async fn page(
        &self,
        filter: &SubscriptionFilter,
        limit: usize,
        after: Option<&SubscriptionId>,
    ) -> StoreResult<SubscriptionPage>;
    /// Replaces a subscription (and its index entries) if its stored version
    /// is still `expected_version`; `false` if it changed meanwhile or is gone.
    async fn update(&self, sub: &Subscription, expected_version: u64) -> StoreResult<bool>;
    /// Deletes one with its index entries; `false` if it did not exist.
    async fn delete(&self, id: &SubscriptionId) -> StoreResult<bool>;
    /// An operator's repair after an upgrade, one page at a time: examines
    /// up to `limit` (1 to [`MAX_REINDEX_PAGE`]) stored items after the
    /// position `after` (from the start when `None`; a position from a
    /// previous [`ReindexPage::next`], opaque, meaningful only to this store)
    /// and writes the index entries of each subscription stored without
    /// them, as an update of it would. Subscriptions stored before the index
    /// existed are otherwise neither routed nor listed. Idempotent and
    /// resumable: a second pass reindexes nothing.
    async fn reindex_page(&self, after: Option<&str>, limit: usize) -> StoreResult<ReindexPage>;
    /// Seals the secrets of subscriptions stored before secrets were sealed
    /// at rest ([`crate::sealed`]), one page at a time: examines up to
    /// `limit` (1 to [`MAX_REINDEX_PAGE`]) subscriptions with ids after
    /// `after`, in id order, through the primary key or listing index (never
    /// a scan), and rewrites each that still holds a secret in clear,
    /// conditional on it being unchanged (its version stays: sealing
    /// changes nothing a reader sees). Idempotent and resumable. Every write
    /// seals anyway, so this only reaches records nobody wrote since.
    async fn reseal_page(&self, after: Option<&SubscriptionId>, limit: usize) -> StoreResult<ResealPage>;
}

/// What one [`SubscriptionStore::reseal_page`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResealPage {
    /// Subscriptions found with a secret in clear and rewritten sealed.
    pub resealed: u64,
    /// Subscriptions looked at.
    pub examined: u64,
    /// The last id examined when there may be more; `None` at the end.
    pub next_after: Option<SubscriptionId>,
}

/// The stored record of the data key: never the key in clear.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WrappedDataKey {
    /// The data key's id (`dk…`), written into every value it seals.
    pub key_id: String,
    /// The key wrapped by the master key (text the
    /// [`crate::data_key::KeyWrapper`] made).
    pub wrapped: String,
    /// Which master key wrapped it
    /// ([`crate::data_key::KeyWrapper::current`] at the time).
    pub wrapped_by: String,
}

/// Where the deployment's wrapped data key is kept
/// ([`crate::data_key`]): one record, created once with a conditional
/// write, replaced only over the record read (a master-key rotation).
/// Never holds the data key in clear.
#[async_trait]
pub trait DataKeyStore: Send + Sync {
    /// The stored record, if one was created.
    async fn load(&self) -> StoreResult<Option<WrappedDataKey>>;
    /// Stores `key` if no record exists; `false` (and nothing written) if
    /// one does.
    async fn create(&self, key: &WrappedDataKey) -> StoreResult<bool>;
    /// Replaces the record by `new` if it is still `old`; `false` (and
    /// nothing written) otherwise.
    async fn replace(&self, old: &WrappedDataKey, new: &WrappedDataKey) -> StoreResult<bool>;
}

/// The most items one [`SubscriptionStore::reindex_page`] (or
/// [`DeadLetterStore::reindex_page`]) examines: on DynamoDB one `Scan`
/// page, and at most one read and one write per item found, so one API
/// call stays well within its timeout.
pub const MAX_REINDEX_PAGE: usize = 100;

/// What one [`SubscriptionStore::reindex_page`] or
/// [`DeadLetterStore::reindex_page`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReindexPage {
    /// Subscriptions or dead letters whose index keys were written.
    pub reindexed: u64,
    /// Stored items looked at (on DynamoDB index entries included).
    pub examined: u64,
    /// Where the next page starts; `None` when every item was examined.
    pub next: Option<String>,
}

/// What a conditional saga transition found.
#[derive(Debug, Clone, PartialEq)]
pub enum TransitionOutcome {
    /// The saga was in the expected state and now has the new one.
    Applied,
    /// The saga was in another state (returned), so nothing changed.
    Conflict(SagaState),
    /// No such saga.
    Missing,
}

/// One conditional saga transition.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    /// The saga's event (part of its key: sagas are stored by event).
    pub event_id: EventId,
    /// The saga.
    pub saga_id: SagaId,
    /// Status and attempt count it must still have.
    pub from: SagaState,
    /// What it becomes.
    pub to: SagaState,
    /// When.
    pub at: DateTime<Utc>,
}

/// Delivery sagas, unique per id (ids derive from `(event, subscription)`).
/// A saga is found by its event and its id: sagas are stored grouped by
/// event, so listing an event's sagas needs no secondary index (on DynamoDB
/// an index entry would cost a write unit per saga).
#[async_trait]
pub trait SagaStore: Send + Sync {
    /// Inserts each saga unless its id exists; `true` where inserted.
    async fn create(&self, sagas: &[Saga]) -> StoreResult<Vec<bool>>;
    /// One saga of `event_id` by id; `None` when there is none, also when
    /// the id belongs to another event.
    async fn get(&self, event_id: &EventId, id: &SagaId) -> StoreResult<Option<Saga>>;
    /// Applies each transition only if the saga's status and attempt count
    /// are still those of `from`. Terminal sagas therefore never change.
    async fn transition(&self, transitions: &[Transition]) -> StoreResult<Vec<TransitionOutcome>>;
    /// Every saga of one event.
    async fn list_for_event(&self, event_id: &EventId) -> StoreResult<Vec<Saga>>;
    /// Up to `limit` sagas of one event after `after` (a previous page's
    /// `next`), in an order that is stable across pages (creation order on
    /// SQLite, saga id order on DynamoDB): an event fanned out to thousands
    /// of subscriptions is read a bounded page at a time.
    async fn page_for_event(&self, event_id: &EventId, limit: usize, after: Option<&str>) -> StoreResult<Page<Saga>>;
    /// Up to `limit` sagas of a pull subscription ([`crate::pull`]) in pull
    /// key order, after the key `after`, through the pull index (only the
    /// sagas routing gave a pull key are in it). May lag a routing briefly
    /// on DynamoDB (a global secondary index).
    async fn page_for_pull(
        &self,
        subscription: &crate::ids::SubscriptionId,
        limit: usize,
        after: Option<&str>,
    ) -> StoreResult<Page<crate::pull::Pulled>>;
    /// Up to `limit` sagas that are not terminal and were due before
    /// `before` (created, retry due, or job sent, and no progress since),
    /// oldest first, found through an index of waiting sagas (never a scan).
    /// Eventually consistent: the caller re-reads a saga before acting.
    async fn stalled(&self, before: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Saga>>;
    /// Moves a waiting saga's due time to `until` if it is still in
    /// `expected` (the reconciler re-drove it and gives it time to
    /// progress); `false` if it changed meanwhile.
    async fn defer(
        &self,
        event_id: &EventId,
        id: &SagaId,
        expected: &SagaState,
        until: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Counts one more re-drive of a saga still in `expected` whose count
    /// is still `redrives` ([`crate::saga::Saga::redrives`]): the reconciler
    /// then sends the job carrying the new count, and every older job of
    /// that attempt is stale. `false` if the saga changed meanwhile.
    async fn count_redrive(
        &self,
        event_id: &EventId,
        id: &SagaId,
        expected: &SagaState,
        redrives: u32,
    ) -> StoreResult<bool>;
}

/// Attempt records, unique per `(saga_id, attempt)`.
#[async_trait]
pub trait AttemptStore: Send + Sync {
    /// Inserts each attempt unless that `(saga, attempt)` exists; `true` where inserted.
    async fn record(&self, attempts: &[Attempt]) -> StoreResult<Vec<bool>>;
    /// [`AttemptStore::record`] for first attempts that succeeded and
    /// complete their saga: the saga step's decision for each (`Pending`, 0
    /// attempts → `Completed`, 1),
    /// made by the delivery from the same rules
    /// ([`crate::attempt::Attempt::completes_its_saga`]). A store may keep the
    /// attempt and that transition in one write, conditional on the saga
    /// being `Pending` with no attempt (DynamoDB: the saga item, one write
    /// unit where the attempt item and the saga step's update took two); the
    /// saga step then gets no record of it, having nothing left to decide.
    /// Where the saga is not in that state (or the store does not do it),
    /// the attempt is recorded as by [`AttemptStore::record`] and the saga
    /// step decides as for any attempt. `true` where the attempt was new.
    async fn record_completing(&self, attempts: &[Attempt]) -> StoreResult<Vec<bool>> {
        self.record(attempts).await
    }
    /// The attempts of saga `saga_id` of event `event_id`, oldest first
    /// (with the one a [`AttemptStore::record_completing`] kept with its saga).
    async fn list(&self, event_id: &EventId, saga_id: &SagaId) -> StoreResult<Vec<Attempt>>;
}

/// Dead letters, one per dead saga.
#[async_trait]
pub trait DeadLetterStore: Send + Sync {
    /// Inserts unless one exists for this saga; `true` if inserted.
    async fn put(&self, dl: &DeadLetter) -> StoreResult<bool>;
    /// One by id.
    async fn get(&self, id: &DeadLetterId) -> StoreResult<Option<DeadLetter>>;
    /// Up to `limit` of those `query` takes, newest first (by `created_at`,
    /// then id descending), after the position `after` (from the newest
    /// when `None`; a [`Page::next`] of an earlier page, opaque: both
    /// backends write a [`crate::dead_letter::Position`]). Found through
    /// indexes: the reads of one page are bounded whatever the table holds,
    /// so a page may hold fewer than `limit` (even none) and still have a
    /// `next` where the store stopped looking. A dead letter created after
    /// a listing began is newer than its position and never shows up on a
    /// later page of it.
    async fn page(&self, query: &DeadLetterQuery, limit: usize, after: Option<&str>) -> StoreResult<Page<DeadLetter>>;
    /// How many are in `state`, without reading them (the `/metrics` gauge of
    /// open dead letters is scraped often).
    async fn count(&self, state: DeadLetterState) -> StoreResult<u64>;
    /// Moves an `open` dead letter to `state` with its audit record; `false`
    /// if it was not open.
    async fn resolve(&self, id: &DeadLetterId, state: DeadLetterState, resolution: Resolution) -> StoreResult<bool>;
    /// Examines up to `limit` (at most [`MAX_REINDEX_PAGE`]) stored dead
    /// letters from the position `after` (from the start when `None`; a
    /// previous [`ReindexPage::next`], opaque) and writes the listing keys
    /// (subscription, event type, tenant, the every-dead-letter key) of
    /// each stored without them, from its own record. Dead letters stored
    /// before those keys existed are otherwise missed by every listing
    /// filter but `state`, and so by bulk requeue and skip. Idempotent and
    /// resumable: a second pass reindexes nothing.
    async fn reindex_page(&self, after: Option<&str>, limit: usize) -> StoreResult<ReindexPage>;
}

/// Bulk jobs ([`crate::bulk`]): one record per job, rewritten only on
/// condition of its version, so of two workers doing the same page one
/// commits it.
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Stores a new job unless one with its id exists; `true` if stored.
    async fn create(&self, job: &Job) -> StoreResult<bool>;
    /// One job by id (strongly consistent).
    async fn get(&self, id: &str) -> StoreResult<Option<Job>>;
    /// Replaces the job if its stored version is still `expected_version`
    /// (`job.version` is the new one); `false` if another write came first.
    async fn update(&self, job: &Job, expected_version: u64) -> StoreResult<bool>;
    /// The running-job slots stored under `key` ([`crate::bulk::slots_key`]),
    /// strongly consistent; `None` if none are stored.
    async fn slots(&self, key: &str) -> StoreResult<Option<crate::bulk::TenantSlots>>;
    /// Stores `slots` under `key` if the stored version is still
    /// `expected_version` (0: none stored yet); `slots.version` is the new
    /// one. `false` if another write came first.
    async fn put_slots(&self, key: &str, slots: &crate::bulk::TenantSlots, expected_version: u64) -> StoreResult<bool>;
}

/// A message taken from a queue, invisible to others until its visibility
/// timeout ends or it is deleted.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// The message body.
    pub body: String,
    /// Handle for delete/visibility calls; stale after the message is received again.
    pub receipt: String,
    /// How many times it has been received, this time included.
    pub receive_count: u32,
}

/// A message to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    /// The body.
    pub body: String,
    /// Invisible for this long after sending.
    pub delay: Duration,
    /// Whose message it is (the subscription of a delivery job): SQS fair
    /// queues take it as `MessageGroupId` and prefer quiet groups when one
    /// builds a backlog; the SQLite queue can pause one group's messages
    /// ([`JobQueue::pause_group`]). `None`: its own group.
    pub group: Option<String>,
}

/// A work queue with SQS semantics: delay, visibility timeout, receive count
/// and a dead-letter queue after too many receives.
#[async_trait]
pub trait JobQueue: Send + Sync {
    /// Sends messages, each visible after its delay.
    async fn send(&self, messages: &[Outgoing]) -> StoreResult<()>;
    /// Takes up to `max` visible messages for `visibility`.
    async fn receive(&self, max: usize, visibility: Duration) -> StoreResult<Vec<Received>>;
    /// Deletes received messages. A receipt from an earlier receive may or
    /// may not delete (SQLite ignores it; SQS may honour it), so callers
    /// delete only what they hold a live lease on.
    async fn delete(&self, receipts: &[String]) -> StoreResult<()>;
    /// Deletes received messages without the caller waiting: a consumer
    /// that has moved on (its outcomes are stored) need not hold a task
    /// for it. A failure is logged; the message then reappears after its
    /// visibility timeout and is found done, as after any lost delete.
    fn delete_detached(self: Arc<Self>, receipts: Vec<String>)
    where
        Self: 'static,
    {
        tokio::spawn(async move {
            if let Err(e) = self.delete(&receipts).await {
                tracing::error!(error = %e, "deleting messages failed; they will be redelivered and deduplicated");
            }
        });
    }
    /// Makes a received message visible again after `delay`.
    async fn change_visibility(&self, receipt: &str, delay: Duration) -> StoreResult<()>;
    /// Message counts.
    async fn depth(&self) -> StoreResult<QueueDepth>;
    /// Keeps every visible or sooner-visible message of `group`, and every
    /// new one sent without a delay of its own, invisible for `delay`,
    /// without receiving it (so its receive count does not grow); answers
    /// how many it newly set aside. Afterwards they come back in order, a
    /// few hundred per receive (the SQLite queue), so pausing the group
    /// again costs only what came back. Lets a consumer set aside a whole
    /// group it cannot take now (a subscription at its in-flight limit)
    /// instead of receiving and returning its messages one by one. A queue
    /// that cannot do this (SQS: its fair queues already put quiet groups
    /// first) pauses nothing and answers 0.
    async fn pause_group(&self, group: &str, delay: Duration) -> StoreResult<u64>;
}

/// A batch of stream records a stream consumer gave up on (the on-failure
/// destination of a DynamoDB stream mapping on AWS; the failed outbox rows
/// of `hookline serve`), resolved back into the records it points at.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GivenUp {
    /// Acknowledges this batch to [`StreamFailures::done`].
    pub receipt: String,
    /// New events that were never routed.
    pub events: Vec<EventRecord>,
    /// New sagas that were never started.
    pub sagas: Vec<Saga>,
    /// Recorded attempts the saga stage never read.
    pub attempts: Vec<Attempt>,
    /// Why some of the batch could not be resolved (records gone from the
    /// stream, or unreadable); such a batch is left for an operator.
    pub unresolved: Option<String>,
    /// The read stopped (its time ran out) before the end of the batch's
    /// range: what was read may be re-driven, but the batch stays for the
    /// next run.
    pub incomplete: bool,
}

/// Stream batches given up on, so the reconciler can re-drive them while
/// the stream still holds them (a DynamoDB stream keeps records 24 hours).
#[async_trait]
pub trait StreamFailures: Send + Sync {
    /// Up to `max` given-up batches, each resolved to its records, reading
    /// no later than `deadline` (a batch cut short is marked incomplete).
    async fn take(&self, max: usize, deadline: tokio::time::Instant) -> StoreResult<Vec<GivenUp>>;
    /// Forgets batches that were re-driven.
    async fn done(&self, receipts: &[String]) -> StoreResult<()>;
}

/// Subscription health ([`crate::health`]): one record per subscription,
/// apart from its configuration, written only when something changed.
#[async_trait]
pub trait HealthStore: Send + Sync {
    /// One subscription's record; `None` when nothing was ever written
    /// (a healthy subscription).
    async fn get(&self, id: &SubscriptionId) -> StoreResult<Option<crate::health::Health>>;
    /// Several records, in the order asked (`None` where none is stored):
    /// a page of `GET /v1/subscriptions` shows each one's health.
    async fn get_many(&self, ids: &[SubscriptionId]) -> StoreResult<Vec<Option<crate::health::Health>>> {
        all_bounded(ids.iter().map(|id| self.get(id)).collect(), MAX_STORE_IN_FLIGHT).await.into_iter().collect()
    }
    /// Stores `next` if the stored record's version is still `expected`
    /// (0: no record yet); `false` if another worker wrote first.
    async fn put(&self, id: &SubscriptionId, next: &crate::health::Health, expected: u64) -> StoreResult<bool>;
}

/// A slot of a subscription's `max_in_flight` held by one request; given
/// back with [`LimitStore::release`], or taken over by another worker once
/// it expires (its worker died).
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    /// The subscription.
    pub subscription_id: SubscriptionId,
    /// Which of its slots (`None`: it has no `max_in_flight`, only a rate).
    pub slot: Option<u32>,
    /// Proves the holder when giving it back.
    pub token: String,
}

/// The longest a job waits for a `max_in_flight` slot before it is tried
/// again.
pub const SLOT_RETRY: Duration = Duration::from_secs(1);

/// What [`LimitStore::admit`] answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Go ahead; give the lease back when the request ended.
    Granted(Lease),
    /// Every slot is held, or the rate limit says not yet: try again then.
    Wait(Duration),
}

/// A subscription's explicit `max_in_flight` and `rate_limit` held across
/// every delivery worker (on AWS, across Lambda containers). Used only for
/// subscriptions that set one, so others pay no write for it.
#[async_trait]
pub trait LimitStore: Send + Sync {
    /// Takes the next start under `interval` (one start per interval, if
    /// set) and one of `max_in_flight` slots (if set), leased for `lease`.
    async fn admit(
        &self,
        sub: &SubscriptionId,
        max_in_flight: Option<u32>,
        interval: Option<Duration>,
        lease: Duration,
    ) -> StoreResult<Admission>;
    /// Gives a slot back (nothing to do for a rate-only lease).
    async fn release(&self, lease: &Lease) -> StoreResult<()>;
    /// Books `count` consecutive starts under `interval` (one write however
    /// many): the first at the subscription's next free start (now, if that
    /// is past, or up to a tenth of the interval, at most 100 ms, ahead),
    /// the others one interval apart, and moves the next free start past
    /// them. Returns how long from now until the first booked start (zero:
    /// start now). Each job waiting for the rate so gets its own start
    /// instead of all of them trying again together.
    async fn book_starts(&self, sub: &SubscriptionId, interval: Duration, count: u32) -> StoreResult<Duration>;
}

/// Ordered delivery's bookkeeping ([`crate::ordering`]): each partition's
/// routed-through mark, and the lanes of ordered subscriptions.
#[async_trait]
pub trait OrderStore: Send + Sync {
    /// Records that event `seq` of `partition` is routed; returns the mark
    /// after it (every event numbered up to it is routed).
    async fn mark_routed(&self, partition: &crate::ordering::Partition, seq: u64) -> StoreResult<u64>;
    /// The partition's routed-through mark (0 before any event was routed).
    async fn routed_through(&self, partition: &crate::ordering::Partition) -> StoreResult<u64>;
    /// Puts a saga in a lane; doing it again changes nothing.
    async fn enqueue(&self, lane: &crate::ordering::Lane, entry: &crate::ordering::LaneEntry) -> StoreResult<()>;
    /// The lane's first entry: the lowest number, then the lowest saga id.
    async fn head(&self, lane: &crate::ordering::Lane) -> StoreResult<Option<crate::ordering::LaneEntry>>;
    /// Takes a saga out of its lane; doing it again changes nothing.
    async fn dequeue(&self, lane: &crate::ordering::Lane, seq: u64, saga_id: &SagaId) -> StoreResult<()>;
    /// Records that a lane is blocked (a dead letter holds it, or a gap),
    /// for `GET /v1/subscriptions/{id}`; a lane already recorded keeps its
    /// first record.
    async fn block(&self, lane: &crate::ordering::Lane, blocked: &crate::ordering::BlockedLane) -> StoreResult<()>;
    /// Forgets that a lane was blocked; nothing if it was not.
    async fn unblock(&self, lane: &crate::ordering::Lane) -> StoreResult<()>;
    /// A subscription's blocked lanes, oldest first, at most `limit`
    /// (through a key, never a scan of the lanes).
    async fn blocked(
        &self,
        subscription_id: &crate::ids::SubscriptionId,
        limit: usize,
    ) -> StoreResult<Vec<crate::ordering::BlockedLane>>;
}

/// The audit trail ([`crate::audit`]): append-only, listed newest first.
#[async_trait]
pub trait AuditStore: Send + Sync {
    /// Appends a record unless one with its id exists (a retried append
    /// writes nothing twice).
    async fn append(&self, rec: &crate::audit::AuditRecord) -> StoreResult<()>;
    /// Up to `limit` records passing `filter`, newest first (by
    /// [`crate::audit::AuditRecord::position`]), older than the position
    /// `after` when given (the last item of the previous page); `next` is
    /// the position of the last item returned when more may follow. A page
    /// may hold fewer than `limit` items with a `next` (a store that reads
    /// a bounded amount per call), never skips one.
    async fn page(
        &self,
        filter: &crate::audit::AuditFilter,
        limit: usize,
        after: Option<&str>,
    ) -> StoreResult<Page<crate::audit::AuditRecord>>;
}

/// API keys and principal grants ([`crate::api_key`]): found by credential
/// in one read (each request), listed by tenant through an index, changed
/// only on condition of their version. Names are unique per tenant and
/// credentials over all keys, both enforced by the store's writes (a
/// unique index, conditional puts), not by a read before.
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Stores a new key with its name and credentials.
    /// `Ok(Err(KeyConflict::Name | Credential))` when another key holds
    /// either; nothing is written then.
    async fn create(&self, key: &crate::api_key::ApiKeyRecord) -> StoreResult<Result<(), crate::api_key::KeyConflict>>;
    /// The key holding the credential `lookup`
    /// ([`crate::api_key::secret_lookup`], [`crate::api_key::principal_lookup`]):
    /// one read, strongly consistent.
    async fn find(&self, lookup: &str) -> StoreResult<Option<crate::api_key::ApiKeyRecord>>;
    /// One key by id (strongly consistent).
    async fn get(&self, id: &crate::ids::ApiKeyId) -> StoreResult<Option<crate::api_key::ApiKeyRecord>>;
    /// Up to `limit` keys of `tenant` (`None`: the keys bound to no tenant),
    /// in id order, after the position `after`, through an index. May lag a
    /// write briefly on DynamoDB (a global secondary index).
    async fn page(
        &self,
        tenant: Option<&crate::ids::TenantId>,
        limit: usize,
        after: Option<&str>,
    ) -> StoreResult<Page<crate::api_key::ApiKeyRecord>>;
    /// Replaces the key if its stored version is still `expected_version`
    /// (name and tenant unchanged; credentials added and dropped as in
    /// `key.credentials`). `Ok(Err(Changed))` when another write came first
    /// or the key is gone, `Ok(Err(Credential))` when a new credential is
    /// another key's.
    async fn update(
        &self,
        key: &crate::api_key::ApiKeyRecord,
        expected_version: u64,
    ) -> StoreResult<Result<(), crate::api_key::KeyConflict>>;
}

/// Idempotency keys' records ([`crate::idempotency`]): one per key in its
/// caller's namespace, claimed, answered and released only by conditional
/// writes, so of two requests racing for one key exactly one claims it.
/// A record past its `expires_at` is absent to every call, even before the
/// store deletes it (SQLite's purge, DynamoDB's TTL, which deletes late).
#[async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// The record `id`, strongly consistent; `None` when none is stored or
    /// it expired at `now`.
    async fn get(&self, id: &str, now: DateTime<Utc>) -> StoreResult<Option<crate::idempotency::IdempotencyRecord>>;
    /// Stores `claim` (in progress, no response) unless a live record holds
    /// its id: written when none is stored, the stored one expired at `now`,
    /// or it has no response and its lease is over at `now` (replacing it).
    /// `true` if written.
    async fn claim(&self, claim: &crate::idempotency::IdempotencyRecord, now: DateTime<Utc>) -> StoreResult<bool>;
    /// Replaces the record with `done` (its response and expiry) if the
    /// stored one is still held by `done.token`; `false` otherwise (the
    /// lease ran out and another request took the key over).
    async fn complete(&self, done: &crate::idempotency::IdempotencyRecord) -> StoreResult<bool>;
    /// Deletes the record `id` if it is still held by `token` and has no
    /// response (an answer that is not kept); otherwise nothing.
    async fn release(&self, id: &str, token: &str) -> StoreResult<()>;
}

/// Delivery statistics ([`crate::stats`]): per series, one point per minute
/// and one per hour (the roll-up of its minutes), each the sum of what
/// every process added to it, kept for the event retention (SQLite's
/// purge, DynamoDB's TTL). Narrow on purpose: add a flushed minute, read a
/// range of one series.
#[async_trait]
pub trait StatsStore: Send + Sync {
    /// Adds `tally` to `series`' point of the minute starting at `minute`
    /// and to the hour holding it (creating either when absent). Adds,
    /// never replaces: two processes' adds of one minute sum up.
    async fn add(
        &self,
        series: &crate::stats::Series,
        minute: DateTime<Utc>,
        tally: &crate::stats::Tally,
    ) -> StoreResult<()>;
    /// The points of `series` of `width` whose bucket starts in
    /// `[since, until)`, oldest first (buckets with nothing counted are
    /// absent). The caller bounds the range ([`crate::stats::check_range`]).
    async fn read(
        &self,
        series: &crate::stats::Series,
        width: crate::stats::Width,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<Vec<crate::stats::Point>>;
}

/// The event types seen at ingest, per tenant and across tenants
/// ([`crate::event_types`]): one small row per (scope, type), written once
/// by a conditional insert when a process first sees the pair, listed in
/// type order for the portal's type picker. No path reads it per event.
#[async_trait]
pub trait EventTypeStore: Send + Sync {
    /// Inserts each row unless its (scope, type) is stored (a stored one
    /// keeps its `first_seen_at`); `true` where it was new.
    async fn record(&self, seen: &[crate::event_types::SeenType]) -> StoreResult<Vec<bool>>;
    /// Up to `limit` types of `scope` in type order, after the type `after`
    /// (a previous page's `next`).
    async fn page(
        &self,
        scope: &crate::event_types::TypeScope,
        limit: usize,
        after: Option<&str>,
    ) -> StoreResult<Page<crate::event_types::SeenType>>;
    /// The catalog's entry of one event type (a registered major version,
    /// [`crate::catalog`]), if registered: one keyed read.
    async fn catalog_get(&self, event_type: &str) -> StoreResult<Option<crate::catalog::CatalogEntry>>;
    /// Stores `entry` under its event type if what is stored is still what
    /// the caller read: nothing when `read` is `None`, an entry last
    /// updated at `read` otherwise. `false` when another writer got there
    /// first (nothing written).
    async fn catalog_put(&self, entry: &crate::catalog::CatalogEntry, read: Option<DateTime<Utc>>)
        -> StoreResult<bool>;
    /// Up to `limit` registered versions in event type order, after the
    /// type `after`.
    async fn catalog_page(&self, limit: usize, after: Option<&str>) -> StoreResult<Page<crate::catalog::CatalogEntry>>;
    /// Every registered version of `name` (its types `name` and
    /// `name.v<N>`, at most [`crate::catalog::MAX_VERSION`]), oldest first.
    async fn catalog_versions(&self, name: &str) -> StoreResult<Vec<crate::catalog::CatalogEntry>>;
}

/// Subscribers' acknowledgements ([`crate::ack`]): the latest one per
/// (subscription, `webhook-id`), replaced by each newer one, kept until its
/// `expires_at` (the event retention after it arrived). Read one delivery
/// at a time (the deliveries listing, the saga step of a subscription that
/// requires acknowledgements); never listed or scanned.
#[async_trait]
pub trait AckStore: Send + Sync {
    /// Stores `ack` as the latest of its (subscription, `webhook-id`),
    /// replacing any stored one.
    async fn put(&self, ack: &crate::ack::Acknowledgement) -> StoreResult<()>;
    /// The latest acknowledgement of `webhook_id` by `subscription`,
    /// strongly consistent; `None` when none is stored or it expired.
    async fn get(
        &self,
        subscription: &crate::ids::SubscriptionId,
        webhook_id: &crate::ids::WebhookId,
    ) -> StoreResult<Option<crate::ack::Acknowledgement>>;
}
