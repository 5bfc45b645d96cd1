//! `/v1/dead-letters`: the dead letters (sagas that gave up) with the
//! snapshot operators decide from, their requeue and skip one by one or as
//! a bulk job over a filter (the reindex walk's page is
//! [`crate::reindex`]'s).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// Where operators are with a dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeadLetterState {
    /// Waiting for an operator: requeue it or skip it.
    Open,
    /// Requeued: a new saga delivers the event again.
    Requeued,
    /// Skipped: closed without delivering.
    Skipped,
}

// A saga's status and origin are a delivery's (`GET /v1/events/{event}/deliveries`):
// one schema for both.
pub use crate::events::{DeliveryOrigin as SagaOrigin, DeliveryStatus as SagaStatus};

/// A saga's place in its ordered subscription's partition lane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SagaLane {
    /// The producer's partition key.
    pub partition_key: String,
    /// The event's number in its partition (1, 2, 3… in acceptance order).
    pub seq: u64,
    /// Whether a dead letter blocks the lane (`block`) or lets it go on
    /// (`continue`), as the subscription said when the saga was made.
    pub on_dead_letter: crate::subscriptions::OnDeadLetter,
}

/// The saga as it ended: the attempts it made and the last error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SagaSnapshot {
    /// The saga's id (`sag_…`; also the dead letter's).
    pub id: String,
    /// The event it delivered.
    pub event_id: String,
    /// The subscription it delivered to.
    pub subscription_id: String,
    /// Standard Webhooks `webhook-id`, the same for every saga of this
    /// event and subscription.
    pub webhook_id: String,
    /// Where it was (`dead_lettered`).
    pub status: SagaStatus,
    /// Attempts made.
    pub attempts: u32,
    /// When the next attempt was due (none once dead-lettered).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// The last failure.
    pub last_error: Option<String>,
    /// Set when an operator's requeue or replay made it.
    pub origin: Option<SagaOrigin>,
    /// Its place in an ordered subscription's lane, if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<SagaLane>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Its last transition (when it was dead-lettered).
    pub updated_at: DateTime<Utc>,
}

/// What an operator did with a dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResolutionAction {
    /// Requeued (a new saga).
    Requeue,
    /// Skipped (closed).
    Skip,
}

/// Who resolved a dead letter, when and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Resolution {
    /// Requeue or skip.
    pub action: ResolutionAction,
    /// Who did it (the credential's actor, or `dlq-redrive`).
    pub actor: String,
    /// Their reason.
    pub reason: String,
    /// When.
    pub at: DateTime<Utc>,
    /// The saga a requeue made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_saga_id: Option<String>,
    /// The bulk job that did it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
}

/// The event as a requeue delivers it, kept with the dead letter because
/// dead letters outlive events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeadLetterEvent {
    /// The stored event id.
    pub id: String,
    /// Its type.
    pub event_type: String,
    /// Its tenant, if any.
    pub tenant_id: Option<String>,
    /// The producer's partition key, if any.
    pub partition_key: Option<String>,
    /// The producer's record version in its partition, if any.
    pub sequence: Option<String>,
    /// Hookline's number of the event in its partition, if numbered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_seq: Option<u64>,
    /// The producer's trace id, if any.
    pub trace_id: Option<String>,
    /// The producing service, if named.
    pub producer: Option<String>,
    /// When the producer says it happened.
    pub occurred_at: DateTime<Utc>,
    /// When Hookline accepted it.
    pub received_at: DateTime<Utc>,
    /// Kept at least until then.
    pub expires_at: DateTime<Utc>,
    /// The envelope format it came in.
    pub format: crate::events::EventFormat,
    /// The envelope as posted (sensitive-named fields redacted), as text.
    pub body: String,
}

/// A saga that gave up, with what an operator needs to decide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeadLetter {
    /// Its id: the dead saga's (`sag_…`).
    #[schema(example = "sag_0193a1b2c3d4e5f6a7b8c9d0e1f2a3b4")]
    pub id: String,
    /// The event.
    pub event_id: String,
    /// The subscription.
    pub subscription_id: String,
    /// The event's type.
    #[schema(example = "order.created")]
    pub event_type: String,
    /// The event's tenant (absent: none, or recorded before tenants were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Why the saga gave up.
    #[schema(example = "HTTP 500 after 8 attempts")]
    pub reason: String,
    /// Attempts made.
    pub attempts: u32,
    /// The saga as it ended (absent when the stored snapshot cannot be
    /// read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saga_snapshot: Option<SagaSnapshot>,
    /// When it was dead-lettered.
    pub created_at: DateTime<Utc>,
    /// Where operators are with it.
    pub state: DeadLetterState,
    /// Who resolved it, when and why (`null` while open).
    pub resolution: Option<Resolution>,
    /// The event as a requeue delivers it: in `GET
    /// /v1/dead-letters/{dead_letter}` only, never in a listing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<DeadLetterEvent>,
}

/// The query string of `GET /v1/dead-letters`: every filter given must
/// match.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeadLetterListQuery {
    /// Only this subscription's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_id: Option<String>,
    /// Only of this event type (exact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(example = "order.created")]
    pub event_type: Option<String>,
    /// Only of this tenant's events (a tenant-bound key: its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Only in this state (every state when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<DeadLetterState>,
    /// Only those dead-lettered from then (inclusive; RFC 3339, within
    /// the dead-letter retention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
    /// Only those dead-lettered before then (exclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
    /// Items per page, 1 to 1000 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// The previous page's `next_cursor`, with the same filters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// The body of `POST /v1/dead-letters/{dead_letter}/requeue` and `…/skip`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReasonBody {
    /// Why (required: 1 to 1000 characters of one line; it goes in the
    /// audit trail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "endpoint fixed")]
    pub reason: Option<String>,
    /// Ignored: the actor is who authenticated, never what a body claims
    /// (accepted for clients written before the audit trail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(deprecated, value_type = Option<String>)]
    pub actor: Option<serde_json::Value>,
}

/// Which open dead letters a bulk requeue or skip takes: every field given
/// must match.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeadLetterFilter {
    /// Only this subscription's (one the key may see).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_id: Option<String>,
    /// Only of this event type (exact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// Only of this tenant's events (a tenant-bound key: its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Only those dead-lettered from then (inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
    /// Only those dead-lettered before then (exclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
}

/// The body of `POST /v1/dead-letters/requeue` and `…/skip`: a job over
/// every open dead letter the filter takes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkRequest {
    /// Which open dead letters (absent or `{}`: every one the key sees).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<DeadLetterFilter>,
    /// Why (required; recorded on every item).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "endpoint was down")]
    pub reason: Option<String>,
}

/// A dead letter requeued.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Requeued {
    /// The dead letter.
    pub dead_letter_id: String,
    /// The new saga delivering the event again.
    pub saga_id: String,
}

/// A dead letter skipped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Skipped {
    /// The dead letter.
    pub dead_letter_id: String,
    /// Its state now (`skipped`).
    pub state: DeadLetterState,
}
