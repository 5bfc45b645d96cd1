//! Queue messages: what the delivery and retry-timer queues carry. Each is
//! everything its consumer needs to find the rest by key, so no message
//! holds a payload.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::{DeadLetterId, EventId, SagaId, SubscriptionId, WebhookId};

/// Messages on the delivery queue: everything a delivery needs to find its
/// event and subscription.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryJob {
    /// The saga.
    pub saga_id: SagaId,
    /// Its event.
    pub event_id: EventId,
    /// Its subscription.
    pub subscription_id: SubscriptionId,
    /// The `webhook-id` header.
    pub webhook_id: WebhookId,
    /// Which attempt this job is.
    pub attempt: u32,
    /// The saga's place in its ordered subscription's lane, carried along
    /// so the saga stage can release the lane without reading the saga.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<crate::ordering::LaneRef>,
    /// When the saga's first attempt was due (its creation): with the
    /// subscription's retry policy it gives the time the last attempt is
    /// due, past which an open breaker no longer holds the job
    /// ([`crate::retry::hold_for_breaker`]). `None` in jobs queued before
    /// it was carried: held until the probe, as then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_due: Option<DateTime<Utc>>,
    /// The start this job booked under its subscription's `rate_limit`
    /// ([`crate::ports::LimitStore::book_starts`]): it is not attempted
    /// before, and from then on it needs no other booking, so jobs waiting
    /// for the rate come back one at a time instead of all together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<DateTime<Utc>>,
    /// How often it waited for a `max_in_flight` slot: each wait is longer
    /// (and jittered), so a full subscription's jobs spread out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub slot_waits: u32,
    /// When the saga stage (or the reconciler) queued this job for its
    /// attempt; kept as the job is deferred and re-sent. A job older than
    /// the reconciler's stall margin may have been re-driven meanwhile, so
    /// the delivery reads its saga before posting ([`Self::redrive`]).
    /// `None` in jobs queued before it was carried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_at: Option<DateTime<Utc>>,
    /// Which re-drive of its saga's attempt this job is (0: the saga
    /// stage's own job; the reconciler counts each job it sends again in
    /// the saga, [`crate::saga::Saga::redrives`]). A job whose count is not
    /// its saga's is stale and dropped unsent: one POST per attempt, however
    /// long its wait (an open breaker, a rate limit, a backlog).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub redrive: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl DeliveryJob {
    /// The job of `attempt` of a saga, with nothing booked yet.
    pub fn new(
        saga_id: SagaId,
        event_id: EventId,
        subscription_id: SubscriptionId,
        webhook_id: WebhookId,
        attempt: u32,
    ) -> DeliveryJob {
        DeliveryJob {
            saga_id,
            event_id,
            subscription_id,
            webhook_id,
            attempt,
            lane: None,
            first_due: None,
            start_at: None,
            slot_waits: 0,
            queued_at: Some(Utc::now()),
            redrive: 0,
        }
    }
}

/// Messages on the retry-timer queue: wake the saga when its backoff ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryTimer {
    /// The saga's event (with the id, the saga's key).
    pub event_id: EventId,
    /// The saga.
    pub saga_id: SagaId,
    /// The attempt that is due; 0: not an attempt, the wake-up of an
    /// ordered saga waiting in its lane (`crate::stage::ordering`).
    pub attempt: u32,
    /// When it is due.
    pub due_at: DateTime<Utc>,
    /// The check of an AwaitingAck saga (`attempt` is then the attempt
    /// delivered, not the next one): when that attempt was sent, the
    /// earliest an acknowledgement of it may have arrived
    /// ([`crate::ack::counts_for`]). `None` for every other timer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_since: Option<DateTime<Utc>>,
}

/// A requeue asked for through the API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequeueRequest {
    /// The dead letter (the dead saga's id).
    pub dead_letter_id: DeadLetterId,
    /// Who asked.
    pub actor: String,
    /// Why.
    pub reason: String,
}

/// A replay asked for through the API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayRequest {
    /// The stored event.
    pub event_id: EventId,
    /// Only this subscription; every matching one when absent.
    pub subscription_id: Option<SubscriptionId>,
    /// Only subscriptions of this tenant (none global): the tenant of the
    /// key that asked, when it is bound to one ([`crate::access::Caller`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confined_to: Option<crate::ids::TenantId>,
    /// Makes a repeated request create nothing new.
    pub replay_key: String,
    /// Who asked.
    pub actor: String,
    /// Why.
    pub reason: String,
}

/// What the requeue queue carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequeueMessage {
    /// `{"requeue": {...}}` from the API.
    Requeue {
        /// The request.
        requeue: RequeueRequest,
    },
    /// `{"replay": {...}}` from the API.
    Replay {
        /// The request.
        replay: ReplayRequest,
    },
    /// `{"job": {...}}`: do the next page of a bulk job ([`crate::bulk`]).
    Job {
        /// The job and its page.
        job: crate::bulk::JobStep,
    },
    /// A dead saga's job, redriven from the deliveries dead-letter queue.
    DeadJob(DeliveryJob),
    /// `{"auto_requeue": {...}}`: a subscription's automatic requeue,
    /// turned into a bulk job by the requeue stage ([`crate::recovery`]).
    AutoRequeue {
        /// The request.
        auto_requeue: crate::recovery::AutoRequeue,
    },
}

/// A delivery job's group is its subscription: SQS fair queues keep one
/// subscriber's backlog from delaying the others, and `hookline serve`
/// pauses the jobs of a subscription that is at its in-flight limit.
impl crate::queue::Message for DeliveryJob {
    fn group(&self) -> Option<&str> {
        Some(self.subscription_id.as_str())
    }
}

impl crate::queue::Message for RetryTimer {}

impl crate::queue::Message for RequeueMessage {}
