//! `/v1/events`: the envelopes producers post (one, or a batch), the answers
//! to them, the event listing's filters and items, one event, its
//! deliveries and the replay of it.
//!
//! The envelopes are free-form JSON: the server reads them with its own
//! validators (docs/formats.md), which never refuse extra fields. The
//! [`Envelope`] types here describe the four formats for the spec and for
//! clients that build envelopes; a body need not have been built with them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

use crate::error::ErrorDetail;

/// An envelope format (docs/formats.md). Answers spell it in snake_case;
/// `?format=` also takes the older kebab-case names (`change-feed`,
/// `domain-event`) producers already send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventFormat {
    /// Hookline's own envelope: `{id?, type, data, ...}`.
    Native,
    /// The change-data-capture envelope (`entity_type`, `change_type`, ...).
    #[serde(alias = "change-feed")]
    ChangeFeed,
    /// The domain / integration event envelope (`schemaVersion`, `sequence`, ...).
    #[serde(alias = "domain-event")]
    DomainEvent,
    /// The event contract v1 (`version`, `traceId`, `idempotencyKey`, ...).
    Contract,
}

/// Hookline's own envelope (docs/formats.md#native). Extra fields are
/// allowed and delivered as they are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"id": "evt_1", "type": "order.created", "data": {"n": 1}, "tenant_id": "t1",
    "partition_key": "order:1", "occurred_at": "2026-01-10T12:34:56.789Z", "trace_id": "tr_1", "producer": "shop"}))]
pub struct NativeEnvelope {
    /// The producer's id: the stored id and deduplication key (absent: the
    /// `Idempotency-Key` header, else a generated `evt_…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 256)]
    pub id: Option<String>,
    /// The event type: routing, `hookline-event-type`.
    #[serde(rename = "type")]
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,100}$", example = "order.created")]
    pub event_type: String,
    /// Anything, `null` included: delivered as part of the body.
    pub data: Value,
    /// The tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 256)]
    pub tenant_id: Option<String>,
    /// The partition: numbered, sent as `hookline-partition-key`, the unit
    /// of ordered delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 256)]
    pub partition_key: Option<String>,
    /// When it happened (absent: when Hookline received it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurred_at: Option<DateTime<Utc>>,
    /// Trace id, sent as `hookline-trace-id` and `traceparent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 256)]
    pub trace_id: Option<String>,
    /// Who produced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1)]
    pub producer: Option<String>,
}

/// What a change-feed envelope says happened to its entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeType {
    /// It was created.
    Created,
    /// It was updated.
    Updated,
    /// It was deleted.
    Deleted,
    /// It was merged into another.
    Merged,
}

/// The change-data-capture envelope (docs/formats.md#change-feed): the
/// event type is `{entity_type}.{change_type}`, the partition key
/// `{entity_type}:{entity_id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"id": "de305d54-75b4-431b-adb2-eb6b9e546014", "entity_type": "UserProfile",
    "entity_id": "9b9a67cf", "change_type": "updated", "published_at": "2025-10-19T01:23:46Z",
    "payload": {"actor": "user:ops-001", "before": {"status": "active"}, "after": {"status": "active"},
        "diff": {}, "recorded_at": "2025-10-19T01:23:45Z"}}))]
pub struct ChangeFeedEnvelope {
    /// The producer's id: stored id and deduplication key.
    #[schema(min_length = 1, max_length = 256)]
    pub id: String,
    /// The entity's type: letters, digits, `_` and `-`.
    #[schema(pattern = "^[A-Za-z0-9_-]{1,90}$", example = "UserProfile")]
    pub entity_type: String,
    /// The entity's id (with `entity_type`, the partition key).
    #[schema(min_length = 1, max_length = 160)]
    pub entity_id: String,
    /// What happened.
    pub change_type: ChangeType,
    /// When it was published: the event's `occurred_at`.
    pub published_at: DateTime<Utc>,
    /// The change: `actor`, `diff`, `recorded_at`, and `before` and/or
    /// `after` (at least one an object).
    pub payload: Map<String, Value>,
}

/// The producer of a domain event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DomainEventProducer {
    /// The service: the event's `producer`.
    #[schema(min_length = 1)]
    pub service: String,
    /// The instance that sent it.
    #[schema(min_length = 1)]
    pub instance_id: String,
}

/// The place of a domain event in its record's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DomainEventSequence {
    /// The partition key.
    #[schema(min_length = 1, max_length = 256)]
    pub partition_key: String,
    /// The record's version: the event's `sequence`.
    #[schema(min_length = 1)]
    pub record_version: String,
}

/// The domain / integration event envelope
/// (docs/formats.md#domain-event); every field is required.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"eventId": "0b6f3c1e", "schemaVersion": 1, "eventType": "RecordUpdated",
    "occurredAt": "2026-01-10T12:34:56.789Z", "tenantId": "acme",
    "producer": {"service": "core-platform", "instanceId": "pod-xyz"}, "correlationId": "c-1",
    "sequence": {"partitionKey": "Opportunity:acme:r1", "recordVersion": "2026-01-10T12:34:56.789Z"},
    "payload": {}}))]
pub struct DomainEventEnvelope {
    /// The producer's id.
    #[schema(min_length = 1, max_length = 256)]
    pub event_id: String,
    /// A positive integer, checked only.
    #[schema(minimum = 1)]
    pub schema_version: u64,
    /// PascalCase event type.
    #[schema(pattern = "^[A-Z][A-Za-z0-9]{0,99}$", example = "RecordUpdated")]
    pub event_type: String,
    /// When it happened.
    pub occurred_at: DateTime<Utc>,
    /// The tenant.
    #[schema(min_length = 1, max_length = 256)]
    pub tenant_id: String,
    /// Who produced it.
    pub producer: DomainEventProducer,
    /// The trace id.
    #[schema(max_length = 256)]
    pub correlation_id: String,
    /// Partition and record version.
    pub sequence: DomainEventSequence,
    /// Delivered as part of the body.
    pub payload: Map<String, Value>,
}

/// The event contract v1 envelope (docs/formats.md#contract-v1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"eventId": "evt_task_failed_001", "eventType": "task.failed", "version": 1,
    "occurredAt": "2026-02-19T10:10:00Z", "traceId": "req_abcd", "producer": "worker-orchestrator",
    "idempotencyKey": "task:tsk_3001:attempt:2:failed", "riskFlags": [], "payload": {"taskId": "tsk_3001"}}))]
pub struct ContractEnvelope {
    /// The producer's id (kept in the body, shown as `producer_id`).
    #[schema(min_length = 1, max_length = 256)]
    pub event_id: String,
    /// Lower-case dotted `domain.action`.
    #[schema(pattern = "^[a-z][a-z0-9_]*(\\.[a-z0-9_]+)+$", max_length = 100, example = "task.failed")]
    pub event_type: String,
    /// A positive integer, checked only.
    #[schema(minimum = 1)]
    pub version: u64,
    /// When it happened.
    pub occurred_at: DateTime<Utc>,
    /// The trace id.
    #[schema(max_length = 256)]
    pub trace_id: String,
    /// Who produced it.
    #[schema(min_length = 1)]
    pub producer: String,
    /// The deduplication key (with the tenant).
    #[schema(min_length = 1, max_length = 256)]
    pub idempotency_key: String,
    /// The tenant, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 256)]
    pub tenant_id: Option<String>,
    /// Checked only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_flags: Option<Vec<String>>,
    /// Delivered as part of the body.
    pub payload: Map<String, Value>,
}

/// One event as a producer posts it, in any of the four formats (named
/// with `?format=`, or detected from its keys: docs/formats.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum Envelope {
    /// The change-feed envelope.
    ChangeFeed(ChangeFeedEnvelope),
    /// The domain event envelope.
    DomainEvent(DomainEventEnvelope),
    /// The contract v1 envelope.
    Contract(ContractEnvelope),
    /// Hookline's own envelope.
    Native(NativeEnvelope),
}

/// The query string of `POST /v1/events` and `POST /v1/events/batch`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct IngestQuery {
    /// The envelopes' format; absent: detected from each envelope's keys.
    /// An unknown name is `400 unknown_format`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<EventFormat>,
}

/// `202`: the event is stored (or was already: `duplicate`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"event_id": "evt_1", "duplicate": false}))]
pub struct Accepted {
    /// The stored event's id.
    pub event_id: String,
    /// The event was stored before (same id, or same `Idempotency-Key`):
    /// nothing new was stored or routed.
    pub duplicate: bool,
}

/// One envelope of a batch, accepted or refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum BatchResult {
    /// Stored (or a duplicate).
    Accepted {
        /// Its place in the batch, from 0.
        index: usize,
        /// `202`.
        status: u16,
        /// The stored event's id.
        event_id: String,
        /// Stored before: nothing new.
        duplicate: bool,
    },
    /// Refused, with the error it would have had alone.
    Refused {
        /// Its place in the batch, from 0.
        index: usize,
        /// The status it would have had alone.
        status: u16,
        /// Why.
        error: ErrorDetail,
    },
}

/// The answer to a batch: `202` when every envelope was accepted, else `207`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"accepted": 1, "rejected": 1, "results": [
    {"index": 0, "status": 202, "event_id": "e1", "duplicate": false},
    {"index": 1, "status": 400, "error": {"code": "missing_field", "message": "missing required field `type`",
        "field": "type", "errors": [{"field": "type", "code": "missing_field", "message": "missing required field `type`"}]}}]}))]
pub struct BatchAnswer {
    /// Envelopes accepted.
    pub accepted: usize,
    /// Envelopes refused.
    pub rejected: usize,
    /// One result per envelope, in the batch's order.
    pub results: Vec<BatchResult>,
}

/// An event's delivery outcome so far: it only rises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventOutcome {
    /// Some attempt of some delivery failed.
    Failed,
    /// Some delivery was dead-lettered.
    DeadLettered,
}

/// The filters of `GET /v1/events` (newest first by `received_at`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventListQuery {
    /// An event type (`order.created`) or a pattern with a trailing `*`
    /// (`order.*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(example = "order.*")]
    pub event_type: Option<String>,
    /// Only this tenant's events (a tenant-bound key's own tenant always).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Only this partition's events: 1 to 1024 bytes, no control characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(min_length = 1, max_length = 1024)]
    pub partition_key: Option<String>,
    /// Received at or after (within the retention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
    /// Received before (within the retention, not before `since`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
    /// Only events with this outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<EventOutcome>,
    /// Items per page, 1 to 1000 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// The `next_cursor` of the page before, with the same filters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// One item of `GET /v1/events`: the event without its body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventListItem {
    /// The stored id.
    pub id: String,
    /// The event type.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Its tenant.
    pub tenant_id: Option<String>,
    /// Its partition.
    pub partition_key: Option<String>,
    /// Its number in the partition (or the domain event's record version).
    pub sequence: Option<String>,
    /// When Hookline received it.
    pub received_at: DateTime<Utc>,
    /// When it happened.
    pub occurred_at: DateTime<Utc>,
    /// The format it was posted in.
    pub format: EventFormat,
    /// Its delivery outcome so far (`null`: nothing failed).
    pub outcome: Option<EventOutcome>,
}

/// `GET /v1/events/{event}`: a stored event with its body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventView {
    /// The stored id.
    pub id: String,
    /// The id the producer gave it, if any (the envelope's `id`/`eventId`).
    pub producer_id: Option<String>,
    /// The event type.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Its tenant.
    pub tenant_id: Option<String>,
    /// Its partition.
    pub partition_key: Option<String>,
    /// Its number in the partition (or the domain event's record version).
    pub sequence: Option<String>,
    /// Its trace id.
    pub trace_id: Option<String>,
    /// Who produced it.
    pub producer: Option<String>,
    /// The format it was posted in.
    pub format: EventFormat,
    /// When it happened.
    pub occurred_at: DateTime<Utc>,
    /// When Hookline received it.
    pub received_at: DateTime<Utc>,
    /// When it will be forgotten (the retention).
    pub expires_at: DateTime<Utc>,
    /// The envelope as posted (redacted values replaced).
    pub body: Value,
}

/// The query string of `GET /v1/events/{event}/deliveries`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeliveriesQuery {
    /// Deliveries per page, 1 to 100 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    /// The `next_cursor` of the page before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// Where a delivery (a saga) is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// Its first attempt is queued or running.
    Pending,
    /// Ordered: waits for the deliveries before it in its partition.
    Waiting,
    /// A retry is queued or running.
    InProgress,
    /// The last attempt failed; the next waits for its backoff.
    PendingRetry,
    /// Delivered. Final.
    Completed,
    /// Gave up: a dead letter holds it. Final.
    DeadLettered,
    /// Delivered (2xx); waits for the subscriber's acknowledgement (its
    /// subscription has `ack_timeout_secs`) until `next_attempt_at`.
    AwaitingAck,
    /// Its subscription is pull-only: filed for its subscriber to pull
    /// (`GET /v1/subscriptions/{id}/events`), never pushed, no attempt.
    /// Final.
    FiledForPull,
}

/// Why a delivery exists when routing did not create it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OriginKind {
    /// Ops requeued a dead letter.
    Requeue,
    /// Ops replayed the event.
    Replay,
}

/// Who made a requeued or replayed delivery, when and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeliveryOrigin {
    /// Requeue or replay.
    pub kind: OriginKind,
    /// The delivery this one follows (a requeue's dead one), if any.
    pub previous_saga_id: Option<String>,
    /// Who asked.
    pub actor: String,
    /// Why.
    pub reason: String,
    /// When.
    pub at: DateTime<Utc>,
}

/// One attempt of a delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AttemptView {
    /// 1-based attempt number.
    pub attempt: u32,
    /// The subscriber's HTTP status, when it answered.
    pub status_code: Option<u16>,
    /// What went wrong, when something did.
    pub error: Option<String>,
    /// From send to answer (or failure).
    pub latency_ms: u64,
    /// When it ended.
    pub at: DateTime<Utc>,
    /// The start of the subscriber's response body (at most 256 bytes,
    /// lossy UTF-8, control characters replaced) of an attempt that did not
    /// succeed; `null` for a success or an empty body.
    #[serde(default)]
    pub response_excerpt: Option<String>,
}

/// One delivery of an event to one subscription (a saga), with its attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeliveryView {
    /// The subscription.
    pub subscription_id: String,
    /// The delivery's id.
    pub saga_id: String,
    /// The `webhook-id` the subscriber sees (the same for every delivery of
    /// this event to this subscription).
    pub webhook_id: String,
    /// Where it is.
    pub status: DeliveryStatus,
    /// When the next attempt is due (`pending_retry` only).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// The last failure.
    pub last_error: Option<String>,
    /// Who requeued or replayed it (`null`: routing created it).
    pub origin: Option<DeliveryOrigin>,
    /// Its attempts, oldest first.
    pub attempts: Vec<AttemptView>,
    /// The subscriber's latest acknowledgement of it (`null`: none).
    #[serde(default)]
    pub acknowledgement: Option<crate::acknowledgements::Acknowledgement>,
}

/// The body of `POST /v1/events/{event}/replay`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"reason": "customer lost it", "subscription_id": "sub_123"}))]
pub struct ReplayEventBody {
    /// Why: required (absent or blank is `422 reason_required`), 1 to
    /// 1000 characters of one line of printable text; kept in the audit
    /// trail. Its pattern: one line with a character that is not a space,
    /// without control characters, line separators or bidirectional
    /// formatting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 1000, pattern = "^[^\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029\\u200e\\u200f\\u061c\\u202a-\\u202e\\u2066-\\u2069]*[^\\s\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029\\u200e\\u200f\\u061c\\u202a-\\u202e\\u2066-\\u2069][^\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029\\u200e\\u200f\\u061c\\u202a-\\u202e\\u2066-\\u2069]*$")]
    pub reason: Option<String>,
    /// Only to this subscription (default: every subscription that matches
    /// the event now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 256)]
    pub subscription_id: Option<String>,
    /// A key making the replay idempotent: the same key replays once
    /// (default: a fresh one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 256)]
    pub replay_key: Option<String>,
    /// Accepted for old clients and ignored: the actor is who
    /// authenticated.
    #[serde(default, skip_serializing)]
    #[schema(deprecated)]
    pub actor: Option<Value>,
}

/// One delivery a replay started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReplaySaga {
    /// The new delivery's id.
    pub saga_id: String,
    /// Its subscription.
    pub subscription_id: String,
}

/// `202`: the replay's deliveries are queued.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"event_id": "evt_1", "replay_key": "rpl_01", "sagas": [{"saga_id": "sag_1", "subscription_id": "sub_123"}]}))]
pub struct ReplayAnswer {
    /// The event replayed.
    pub event_id: String,
    /// The replay's key (the given one, or the generated one).
    pub replay_key: String,
    /// The deliveries started (none when the key was used before).
    pub sagas: Vec<ReplaySaga>,
}
