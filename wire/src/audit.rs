//! `GET /v1/audit`: the audit trail (who changed what, when and why), its
//! filters and its records.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

/// What was done. Each name is `<resource>.<what happened>`, both parts in
/// snake_case (`dead_letter.requeued`): the one spelling the filter takes
/// and the records show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub enum AuditAction {
    /// A subscription was created.
    #[serde(rename = "subscription.created")]
    SubscriptionCreated,
    /// A subscription was changed.
    #[serde(rename = "subscription.updated")]
    SubscriptionUpdated,
    /// A subscription was deleted.
    #[serde(rename = "subscription.deleted")]
    SubscriptionDeleted,
    /// A subscription's handshake passed.
    #[serde(rename = "subscription.verified")]
    SubscriptionVerified,
    /// A subscription's handshake failed.
    #[serde(rename = "subscription.verification_failed")]
    SubscriptionVerificationFailed,
    /// A subscription's secret was rotated.
    #[serde(rename = "subscription.secret_rotated")]
    SubscriptionSecretRotated,
    /// Hookline disabled a subscription (a 410, or failing too long).
    #[serde(rename = "subscription.disabled")]
    SubscriptionDisabled,
    /// An operator re-enabled a subscription.
    #[serde(rename = "subscription.enabled")]
    SubscriptionEnabled,
    /// One dead letter was requeued.
    #[serde(rename = "dead_letter.requeued")]
    DeadLetterRequeued,
    /// One dead letter was skipped.
    #[serde(rename = "dead_letter.skipped")]
    DeadLetterSkipped,
    /// A bulk requeue job started.
    #[serde(rename = "dead_letters.requeue_started")]
    DeadLettersRequeueStarted,
    /// A bulk skip job started.
    #[serde(rename = "dead_letters.skip_started")]
    DeadLettersSkipStarted,
    /// One event was replayed by id.
    #[serde(rename = "event.replayed")]
    EventReplayed,
    /// A replay job started.
    #[serde(rename = "replay.started")]
    ReplayStarted,
    /// A subscription's breaker opened.
    #[serde(rename = "breaker.opened")]
    BreakerOpened,
    /// A subscription's breaker closed.
    #[serde(rename = "breaker.closed")]
    BreakerClosed,
    /// An operator skipped what held an ordered lane.
    #[serde(rename = "lane.skipped")]
    LaneSkipped,
    /// An API key or principal grant was created.
    #[serde(rename = "key.created")]
    KeyCreated,
    /// An API key's secret was rotated.
    #[serde(rename = "key.rotated")]
    KeyRotated,
    /// An API key or grant was revoked.
    #[serde(rename = "key.revoked")]
    KeyRevoked,
    /// A portal link was created for a tenant.
    #[serde(rename = "portal_link.created")]
    PortalLinkCreated,
    /// A test event was sent to one subscription.
    #[serde(rename = "subscription.test_sent")]
    SubscriptionTestSent,
    /// A version of an event type was registered in the event catalog (or
    /// changed compatibly).
    #[serde(rename = "event_type.registered")]
    EventTypeRegistered,
    /// A subscriber acknowledged a delivery.
    #[serde(rename = "delivery.acknowledged")]
    DeliveryAcknowledged,
}

/// The filters of `GET /v1/audit` (newest first by `at`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Only this action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<AuditAction>,
    /// Only this exact actor (`key:NAME`, an IAM principal ARN, …): 1 to
    /// 1000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(min_length = 1, max_length = 1000)]
    pub actor: Option<String>,
    /// Only records about this subscription.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(min_length = 1, max_length = 256)]
    pub subscription_id: Option<String>,
    /// Only records of this tenant's resources (a tenant-bound key's own
    /// tenant always).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// At or after (within the audit retention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
    /// Before (within the audit retention, not before `since`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
    /// Items per page, 1 to 1000 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// The `next_cursor` of the page before, with the same filters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// One entry of the audit trail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"id": "aud_0193", "at": "2026-11-26T09:30:00Z", "actor": "key:ops",
    "action": "event.replayed", "reason": "customer lost it", "event_id": "evt_1",
    "details": {"replay_key": "rpl_01", "sagas": 1}}))]
pub struct AuditRecord {
    /// `aud_…`, unique.
    pub id: String,
    /// When the action took effect.
    pub at: DateTime<Utc>,
    /// Who: `key:<name>`, an IAM principal ARN, `… as <X-Actor>`, or
    /// `system`.
    pub actor: String,
    /// What.
    pub action: AuditAction,
    /// Why, as the operator said (or Hookline's own reason).
    pub reason: Option<String>,
    /// The subscription concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_id: Option<String>,
    /// The event concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    /// The dead letter concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_id: Option<String>,
    /// The bulk job concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// The tenant whose resource it concerns (absent: a global one's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Anything else kept (the fields a PATCH changed, an error); never a
    /// secret.
    #[serde(default)]
    pub details: Map<String, Value>,
}
