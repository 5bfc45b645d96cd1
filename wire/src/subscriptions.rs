//! `/v1/subscriptions`: who receives which events, where, and how. The
//! bodies of create and patch, the listing's query string, the
//! subscription as the API shows it (with its health and, for an ordered
//! one, its blocked lanes), the answer carrying a new signing secret (shown
//! once), the lane skip and the secret rotation.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::Patch;

/// What body a subscriber receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PayloadFormat {
    /// The producer's envelope exactly as posted (the default).
    #[default]
    Original,
    /// `{"id", "type", "timestamp", "tenant_id", "data": <original envelope>}`.
    Hookline,
    /// The task-event contract's webhook body (`eventId`, `eventType`,
    /// `version`, `occurredAt`, `traceId`, `data`), from an event of any
    /// format. Also read as `contract-webhook`, its spelling before the
    /// wire contract.
    #[serde(alias = "contract-webhook")]
    ContractWebhook,
}

/// Whether deliveries keep their partition's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Ordering {
    /// Deliveries run concurrently (the default).
    #[default]
    None,
    /// Per partition key, in acceptance order.
    Partition,
}

/// What a dead letter does to its partition's lane (ordered subscriptions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnDeadLetter {
    /// The partition goes on with its next event (the default).
    #[default]
    Continue,
    /// The partition waits until the dead letter is requeued and delivered,
    /// or skipped.
    Block,
}

/// A subscription's circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    /// Deliveries go through.
    #[default]
    Closed,
    /// Deliveries wait until `breaker_until`.
    Open,
    /// One probe is in flight until `breaker_until`; the others wait.
    HalfOpen,
}

/// A retry policy as given: exponential backoff (`max_attempts`,
/// `base_delay_ms`, `max_delay_ms`, each defaulted when left out) or an
/// explicit `schedule_ms` (which derives the other three: each may be left
/// out or given as the value it derives, so a policy read back can be sent
/// as it is).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"schedule_ms": [1000, 60000, 3600000]}))]
pub struct RetryPolicyInput {
    /// Attempts in all, the first included (1 to 50; default 6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// The first wait of exponential backoff, ms (default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_delay_ms: Option<u64>,
    /// The longest wait of exponential backoff, ms (default 3600000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_delay_ms: Option<u64>,
    /// Explicit waits, ms: `schedule_ms[n-1]` follows failed attempt `n`
    /// (1 to 50 waits, each 1 ms to 1 day); `null` or absent: exponential
    /// backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_ms: Option<Vec<i64>>,
}

/// A retry policy as stored and shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"max_attempts": 6, "base_delay_ms": 30000, "max_delay_ms": 3600000, "schedule_ms": null}))]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The first wait (doubling each retry), or the schedule's shortest.
    pub base_delay_ms: u64,
    /// The longest wait.
    pub max_delay_ms: u64,
    /// The explicit schedule, or `null` for exponential backoff.
    pub schedule_ms: Option<Vec<u64>>,
}

/// `POST /v1/subscriptions`: a new subscription. Every bad field is
/// reported (`errors`), and nothing is stored then.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"callback_url": "https://example.com/hooks", "event_types": ["order.*"], "tenant_id": "acme"}))]
pub struct CreateSubscription {
    /// Where deliveries go: an HTTPS URL of a public address, or an SQS
    /// queue or EventBridge bus ARN. Absent or `null` only with `pull:
    /// true`: a pull-only subscription, never pushed to, verified at
    /// creation (docs/delivery.md#pull).
    #[serde(default)]
    pub callback_url: Option<String>,
    /// Event type patterns, 1 to 98: exact (`order.created`), prefix
    /// (`order.*`) or every type (`*`); each 1 to 100 characters.
    pub event_types: Vec<String>,
    /// Only this tenant's events; absent: every tenant's (a tenant-bound
    /// key's subscriptions are always its tenant's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Free text for operators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Headers sent with every delivery (at most 20; not Hookline's own,
    /// hop-by-hop or `Content-*` ones). Credential headers (`Authorization`,
    /// `*-Token`, `*-Key`, …) are shown as `[hidden]` afterwards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// The retry policy; absent: the deployment's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_policy: Option<RetryPolicyInput>,
    /// HTTP statuses (100 to 599, not 2xx, at most 20, each once) that
    /// dead-letter a delivery at once instead of retrying it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_on: Option<Vec<i64>>,
    /// The body subscribers receive (default `original`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_format: Option<PayloadFormat>,
    /// With `contract_webhook` only: the paths of `data` delivered (1 to 100
    /// dot-separated paths); absent: all of `data`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_fields: Option<Vec<String>>,
    /// Whether deliveries keep their partition's order (default `none`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering: Option<Ordering>,
    /// What a dead letter does to its lane (default `continue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_dead_letter: Option<OnDeadLetter>,
    /// Most requests open at once, 1 to 1000 (default: the deployment's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<i64>,
    /// Most deliveries per second, 1/3600 to 1000 (default: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<f64>,
    /// Whether it receives events (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
    /// Whether Hookline requeues its open dead letters of an outage when
    /// the outage ends: its circuit breaker closes, or it is enabled again
    /// after Hookline disabled it (default `false`;
    /// docs/operations.md#automatic-requeue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_requeue: Option<bool>,
    /// Require the subscriber's acknowledgement of each delivery within
    /// this many seconds (1 to 86400): a 2xx without one counts as failed
    /// and is retried. Absent: a 2xx is the success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_timeout_secs: Option<i64>,
    /// Let the subscriber also pull what is routed to it (`GET
    /// /v1/subscriptions/{id}/events`; default `false`). Pushes continue,
    /// unless there is no `callback_url`: then it is pull-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull: Option<bool>,
}

/// `PATCH /v1/subscriptions/{subscription}`: each field left out stays as
/// it is, `null` resets it to its default (`callback_url` and
/// `event_types` cannot be reset), a value replaces it. The rules are
/// create's; every bad field is reported, and nothing changes then.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"event_types": ["order.*", "refund.*"], "rate_limit": null}))]
pub struct PatchSubscription {
    /// A new callback URL (verified again before deliveries resume); given
    /// to a pull-only subscription, it makes it a pushed one.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<String>)]
    pub callback_url: Patch<String>,
    /// New event type patterns.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<Vec<String>>)]
    pub event_types: Patch<Vec<String>>,
    /// Another tenant, or `null`: every tenant's events.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<String>)]
    pub tenant_id: Patch<String>,
    /// New free text, or `null`.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<String>)]
    pub description: Patch<String>,
    /// The new set of headers (replaces the stored one), or `null`: none.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub headers: Patch<BTreeMap<String, String>>,
    /// A new retry policy, or `null`: the deployment's default.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<RetryPolicyInput>)]
    pub retry_policy: Patch<RetryPolicyInput>,
    /// New dead-lettering statuses, or `null`: none.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<Vec<i64>>)]
    pub dead_letter_on: Patch<Vec<i64>>,
    /// A new payload format, or `null`: `original`.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<PayloadFormat>)]
    pub payload_format: Patch<PayloadFormat>,
    /// New `data` paths, or `null`: all of `data`.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<Vec<String>>)]
    pub data_fields: Patch<Vec<String>>,
    /// New ordering, or `null`: `none`.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<Ordering>)]
    pub ordering: Patch<Ordering>,
    /// New dead-letter rule, or `null`: `continue`.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<OnDeadLetter>)]
    pub on_dead_letter: Patch<OnDeadLetter>,
    /// New limit, or `null`: the deployment's default.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<i64>)]
    pub max_in_flight: Patch<i64>,
    /// New rate, or `null`: no limit.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<f64>)]
    pub rate_limit: Patch<f64>,
    /// Switch it on or off (`null`: on). Switching on again re-runs the
    /// verification handshake.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<bool>)]
    pub active: Patch<bool>,
    /// Switch automatic requeue on or off (`null`: off).
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<bool>)]
    pub auto_requeue: Patch<bool>,
    /// A new acknowledgement timeout, or `null`: none required.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<i64>)]
    pub ack_timeout_secs: Patch<i64>,
    /// Switch pulling on or off (`null`: off). Events routed while it is
    /// off are not in the pull listing.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<bool>)]
    pub pull: Patch<bool>,
}

/// `GET /v1/subscriptions`: `tenant_id` alone lists that tenant's;
/// `event_type` (with `tenant_id` or not) the subscriptions an event of that
/// type (and tenant) is routed to, whatever their state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListSubscriptions {
    /// Only this tenant's subscriptions (a tenant-bound key: its own only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Only those an event of this type is routed to (1 to 100 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// `next_cursor` of the previous page, with the same filters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Items per page, 1 to 1000 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1, maximum = 1000)]
    #[schema(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// A subscription's delivery health over the last minutes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SubscriptionHealth {
    /// The circuit breaker.
    pub breaker: BreakerState,
    /// Open: when the next probe may go; half-open: when the probe times out.
    pub breaker_until: Option<DateTime<Utc>>,
    /// Failures in a row that count for the breaker.
    pub consecutive_failures: u32,
    /// The last failure's error.
    pub last_error: Option<String>,
    /// When it happened.
    pub last_error_at: Option<DateTime<Utc>>,
    /// The last success recorded.
    pub last_success_at: Option<DateTime<Utc>>,
    /// The window the figures below cover, in minutes.
    pub window_minutes: i64,
    /// Attempts over the window.
    pub attempts: u64,
    /// Share of them that succeeded; `null` without attempts.
    pub success_rate: Option<f64>,
    /// Median latency, ms (upper bound of its histogram bucket).
    pub latency_p50_ms: Option<u64>,
    /// 99th percentile latency, ms (upper bound of its bucket).
    pub latency_p99_ms: Option<u64>,
}

/// A lane of an ordered subscription that waits for an operator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BlockedLane {
    /// The partition key.
    pub partition_key: String,
    /// The partition's tenant; `null` for events without one.
    pub tenant_id: Option<String>,
    /// Since when it waits.
    pub since: DateTime<Utc>,
    /// Why.
    pub reason: String,
}

/// A subscription as the API shows it: never its signing secrets, and
/// credential header values as `[hidden]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Subscription {
    /// `sub_…`.
    #[schema(example = "sub_01JD5ZQ8W1X4S0VQ3M2B7C9E6F")]
    pub id: String,
    /// Where deliveries go; `null` for a pull-only subscription
    /// (`destination` `pull`). Always present.
    #[schema(required = true)]
    pub callback_url: Option<String>,
    /// Event type patterns.
    pub event_types: Vec<String>,
    /// Only this tenant's events; `null`: every tenant's.
    pub tenant_id: Option<String>,
    /// Free text for operators.
    pub description: Option<String>,
    /// Headers sent with every delivery (credential values `[hidden]`).
    pub headers: BTreeMap<String, String>,
    /// The retry policy.
    pub retry_policy: RetryPolicy,
    /// Statuses that dead-letter a delivery at once.
    pub dead_letter_on: Vec<u16>,
    /// The body subscribers receive.
    pub payload_format: PayloadFormat,
    /// The paths of `data` delivered (`contract_webhook`); `null`: all.
    pub data_fields: Option<Vec<String>>,
    /// Whether deliveries keep their partition's order.
    pub ordering: Ordering,
    /// What a dead letter does to its lane.
    pub on_dead_letter: OnDeadLetter,
    /// Most requests open at once; `null`: the deployment's default.
    pub max_in_flight: Option<u32>,
    /// Most deliveries per second; `null`: no limit.
    pub rate_limit: Option<f64>,
    /// Whether it receives events.
    pub active: bool,
    /// Why Hookline switched it off (`gone`: the endpoint answered 410;
    /// `failing`: every delivery failed for the configured time); `null`
    /// while active or when an operator switched it off.
    pub disabled_reason: Option<String>,
    /// When Hookline switched it off.
    pub disabled_at: Option<DateTime<Utc>>,
    /// Whether the callback URL passed the verification handshake (only
    /// active, verified subscriptions receive deliveries).
    pub verified: bool,
    /// Why verification last failed.
    pub verification_error: Option<String>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// Delivery health.
    pub health: SubscriptionHealth,
    /// The oldest blocked lanes of an ordered subscription (up to 10):
    /// only in `GET /v1/subscriptions/{subscription}` of one ordered by
    /// partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_lanes: Option<Vec<BlockedLane>>,
    /// Whether Hookline requeues its open dead letters of an outage when
    /// the outage ends (docs/operations.md#automatic-requeue).
    #[serde(default)]
    pub auto_requeue: bool,
    /// Seconds a 2xx waits for the subscriber's acknowledgement before it
    /// counts as failed; `null`: no acknowledgement required.
    #[serde(default)]
    pub ack_timeout_secs: Option<u32>,
    /// Whether its subscriber may pull what is routed to it.
    #[serde(default)]
    pub pull: bool,
    /// Where deliveries go, as read from `callback_url` (read-only):
    /// `https` (a signed POST), `sqs` (a queue ARN), `eventbridge` (a bus
    /// ARN) or `pull` (no callback: pull-only, nothing is pushed).
    #[serde(default = "https_destination")]
    #[schema(example = "https")]
    pub destination: String,
}

/// The destination of a subscription shown by a server older than the field.
fn https_destination() -> String {
    "https".to_string()
}

/// A subscription with its new signing secret: the answer of create and
/// of `rotate-secret`, the only times the secret is shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SubscriptionWithSecret {
    /// The subscription.
    #[serde(flatten)]
    pub subscription: Subscription,
    /// The current signing secret (`whsec_…`): keep it now, it is not shown
    /// again.
    #[schema(example = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")]
    pub secret: String,
}

/// `POST /v1/subscriptions/{subscription}/rotate-secret`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"overlap_seconds": 3600}))]
pub struct RotateSecret {
    /// How long the old secret keeps signing alongside, 0 to 604800 s
    /// (default: the deployment's, 24 h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap_seconds: Option<i64>,
}

/// `POST /v1/subscriptions/{subscription}/verify`: empty (`{}`) to run the
/// handshake (HTTPS) or send a new verification message (queue or bus);
/// with the `token` from that message to confirm a queue or bus.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"token": "vtk_5f1d0c3e9a7b4e2f8c6d1a0b3e5f7a9c2d4b6e8f0a1c3e5d"}))]
pub struct VerifySubscription {
    /// The token of the verification message the queue or bus received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// `POST /v1/subscriptions/{subscription}/lanes/{partition_key}/skip`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"reason": "the customer re-sent the record"}))]
pub struct SkipLane {
    /// Why (required, one line, at most 1000 characters; it goes in the
    /// audit trail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The partition's tenant, for a subscription of every tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
}

/// What a lane skip passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SkippedKind {
    /// Sequence numbers whose routing was lost (`from_seq` to `to_seq`).
    Gap,
    /// The head saga, which would never leave (`saga_id`).
    Head,
}

/// The answer of a lane skip (also the audit record's details).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"partition_key": "order-42", "tenant_id": "acme", "skipped": "head", "saga_id": "sga_01JD5ZQ8W1X4S0VQ3M2B7C9E6F"}))]
pub struct LaneSkipped {
    /// The partition key.
    pub partition_key: String,
    /// The partition's tenant.
    pub tenant_id: Option<String>,
    /// What was passed.
    pub skipped: SkippedKind,
    /// A gap's first number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_seq: Option<u64>,
    /// A gap's last number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_seq: Option<u64>,
    /// The head's saga.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saga_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One spelling on the wire; the old `contract-webhook` still reads.
    #[test]
    fn payload_formats_are_snake_case_and_the_old_spelling_reads() {
        assert_eq!(serde_json::to_value(PayloadFormat::ContractWebhook).unwrap(), "contract_webhook");
        for s in ["contract_webhook", "contract-webhook"] {
            assert_eq!(serde_json::from_value::<PayloadFormat>(s.into()).unwrap(), PayloadFormat::ContractWebhook);
        }
        assert_eq!(serde_json::to_value(BreakerState::HalfOpen).unwrap(), "half_open");
    }

    /// A patch writes only what it changes; `null` is a reset.
    #[test]
    fn a_patch_body_writes_only_its_fields() {
        let p = PatchSubscription { rate_limit: Patch::Null, active: Patch::Value(false), ..Default::default() };
        assert_eq!(serde_json::to_value(&p).unwrap(), serde_json::json!({"rate_limit": null, "active": false}));
    }
}
