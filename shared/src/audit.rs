//! The audit trail: who changed what, when and why. Every subscription
//! change, verification, secret rotation, requeue, skip, replay, breaker
//! flip and automatic disable leaves one [`AuditRecord`], appended through
//! the [`crate::ports::AuditStore`] port and listed newest first by
//! `GET /v1/audit`.
//!
//! A record is written **after** the action it describes took effect, and a
//! failure to write it is logged, never returned
//! ([`crate::context::Hookline::audit`]): the trail
//! must not say something happened that did not, and an audit store that is
//! down must not stop operators from acting (or undo what they did). The
//! price is that a crash between the action and its record loses the
//! record; the action's own log line (with the same ids) remains.
//!
//! Records have their own retention ([`crate::context::Config::audit_retention`],
//! one year by default): `hookline serve` purges older ones, DynamoDB
//! expires them by TTL.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::{DeadLetterId, EventId, SubscriptionId, TenantId};
use crate::time_range::TimeRange;

/// The longest actor kept, in characters (an IAM ARN is at most 2,048
/// bytes; an `X-Actor` header is cut here).
pub const MAX_ACTOR_CHARS: usize = 512;

/// The actor of what Hookline does by itself (breaker flips, automatic
/// disables).
pub const SYSTEM: &str = "system";

/// What was done. One spelling everywhere: the API, the stores and the
/// filters all use [`Action::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Action {
    /// `subscription.created`.
    #[serde(rename = "subscription.created")]
    SubscriptionCreated,
    /// `subscription.updated`.
    #[serde(rename = "subscription.updated")]
    SubscriptionUpdated,
    /// `subscription.deleted`.
    #[serde(rename = "subscription.deleted")]
    SubscriptionDeleted,
    /// `subscription.verified`: the handshake passed.
    #[serde(rename = "subscription.verified")]
    SubscriptionVerified,
    /// `subscription.verification_failed`.
    #[serde(rename = "subscription.verification_failed")]
    SubscriptionVerificationFailed,
    /// `subscription.secret_rotated`.
    #[serde(rename = "subscription.secret_rotated")]
    SubscriptionSecretRotated,
    /// `subscription.disabled`: by Hookline (a 410, or failing too long).
    #[serde(rename = "subscription.disabled")]
    SubscriptionDisabled,
    /// `subscription.enabled`: re-activated by an operator.
    #[serde(rename = "subscription.enabled")]
    SubscriptionEnabled,
    /// `dead_letter.requeued`: one dead letter.
    #[serde(rename = "dead_letter.requeued")]
    DeadLetterRequeued,
    /// `dead_letter.skipped`: one dead letter.
    #[serde(rename = "dead_letter.skipped")]
    DeadLetterSkipped,
    /// `dead_letters.requeue_started`: a bulk requeue job.
    #[serde(rename = "dead_letters.requeue_started")]
    DeadLettersRequeueStarted,
    /// `dead_letters.skip_started`: a bulk skip job.
    #[serde(rename = "dead_letters.skip_started")]
    DeadLettersSkipStarted,
    /// `event.replayed`: one event replayed by id.
    #[serde(rename = "event.replayed")]
    EventReplayed,
    /// `replay.started`: a replay job.
    #[serde(rename = "replay.started")]
    ReplayStarted,
    /// `breaker.opened`.
    #[serde(rename = "breaker.opened")]
    BreakerOpened,
    /// `breaker.closed`.
    #[serde(rename = "breaker.closed")]
    BreakerClosed,
    /// `lane.skipped`: ops skipped what held an ordered lane (a gap, or a
    /// head that would never leave).
    #[serde(rename = "lane.skipped")]
    LaneSkipped,
    /// `key.created`: an API key or principal grant (never its secret).
    #[serde(rename = "key.created")]
    KeyCreated,
    /// `key.rotated`: a new secret, the old one kept for the overlap.
    #[serde(rename = "key.rotated")]
    KeyRotated,
    /// `key.revoked`.
    #[serde(rename = "key.revoked")]
    KeyRevoked,
    /// `portal_link.created`: a portal link for one tenant (never its token).
    #[serde(rename = "portal_link.created")]
    PortalLinkCreated,
    /// `subscription.test_sent`: a test event sent to one subscription.
    #[serde(rename = "subscription.test_sent")]
    SubscriptionTestSent,
    /// `event_type.registered`: a version of an event type registered in
    /// the event catalog, or changed compatibly ([`crate::catalog`]).
    #[serde(rename = "event_type.registered")]
    EventTypeRegistered,
    /// `delivery.acknowledged`: a subscriber acknowledged a delivery
    /// (actor `subscriber:<subscription id>`).
    #[serde(rename = "delivery.acknowledged")]
    DeliveryAcknowledged,
}

impl Action {
    /// Every action, in the order the docs list them.
    pub const ALL: [Action; 24] = [
        Action::SubscriptionCreated,
        Action::SubscriptionUpdated,
        Action::SubscriptionDeleted,
        Action::SubscriptionVerified,
        Action::SubscriptionVerificationFailed,
        Action::SubscriptionSecretRotated,
        Action::SubscriptionDisabled,
        Action::SubscriptionEnabled,
        Action::DeadLetterRequeued,
        Action::DeadLetterSkipped,
        Action::DeadLettersRequeueStarted,
        Action::DeadLettersSkipStarted,
        Action::EventReplayed,
        Action::ReplayStarted,
        Action::BreakerOpened,
        Action::BreakerClosed,
        Action::LaneSkipped,
        Action::KeyCreated,
        Action::KeyRotated,
        Action::KeyRevoked,
        Action::PortalLinkCreated,
        Action::SubscriptionTestSent,
        Action::EventTypeRegistered,
        Action::DeliveryAcknowledged,
    ];

    /// The one spelling (`subscription.created`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::SubscriptionCreated => "subscription.created",
            Action::SubscriptionUpdated => "subscription.updated",
            Action::SubscriptionDeleted => "subscription.deleted",
            Action::SubscriptionVerified => "subscription.verified",
            Action::SubscriptionVerificationFailed => "subscription.verification_failed",
            Action::SubscriptionSecretRotated => "subscription.secret_rotated",
            Action::SubscriptionDisabled => "subscription.disabled",
            Action::SubscriptionEnabled => "subscription.enabled",
            Action::DeadLetterRequeued => "dead_letter.requeued",
            Action::DeadLetterSkipped => "dead_letter.skipped",
            Action::DeadLettersRequeueStarted => "dead_letters.requeue_started",
            Action::DeadLettersSkipStarted => "dead_letters.skip_started",
            Action::EventReplayed => "event.replayed",
            Action::ReplayStarted => "replay.started",
            Action::BreakerOpened => "breaker.opened",
            Action::BreakerClosed => "breaker.closed",
            Action::LaneSkipped => "lane.skipped",
            Action::KeyCreated => "key.created",
            Action::KeyRotated => "key.rotated",
            Action::KeyRevoked => "key.revoked",
            Action::PortalLinkCreated => "portal_link.created",
            Action::SubscriptionTestSent => "subscription.test_sent",
            Action::EventTypeRegistered => "event_type.registered",
            Action::DeliveryAcknowledged => "delivery.acknowledged",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An action name that is none of [`Action::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown audit action {0:?}; one of: {list}", list = Action::ALL.map(Action::as_str).join(", "))]
pub struct UnknownAction(pub String);

impl FromStr for Action {
    type Err = UnknownAction;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Action::ALL.into_iter().find(|a| a.as_str() == s).ok_or_else(|| UnknownAction(s.to_string()))
    }
}

/// One entry of the audit trail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// `aud_…`, unique.
    pub id: String,
    /// When the action took effect.
    pub at: DateTime<Utc>,
    /// Who: `key:<name>`, an IAM principal ARN, `… as <X-Actor>`, or
    /// [`SYSTEM`].
    pub actor: String,
    /// What.
    pub action: Action,
    /// Why, as the operator said (required for requeues, skips and
    /// replays); for Hookline's own actions, its reason.
    pub reason: Option<String>,
    /// The subscription concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_id: Option<SubscriptionId>,
    /// The event concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<EventId>,
    /// The dead letter concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_id: Option<DeadLetterId>,
    /// The bulk job concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// The tenant whose resource it concerns (the subscription's, the
    /// event's, the dead letter's; a job's starter's): only that tenant's
    /// keys, and unbound ones, see the record. `None`: a global resource's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<TenantId>,
    /// Anything else worth keeping (the fields a PATCH changed, an error);
    /// a JSON object, never a secret.
    #[serde(default = "empty_object")]
    pub details: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::json!({})
}

impl AuditRecord {
    /// A record of `action` by `actor`, now, with a fresh id.
    pub fn new(action: Action, actor: impl Into<String>) -> Self {
        Self::at(action, actor, Utc::now())
    }

    /// A record of `action` by `actor` at `at`, with a fresh id. The actor
    /// is cut to [`MAX_ACTOR_CHARS`] (it is an index key on DynamoDB).
    pub fn at(action: Action, actor: impl Into<String>, at: DateTime<Utc>) -> Self {
        let mut actor: String = actor.into();
        if let Some((cut, _)) = actor.char_indices().nth(MAX_ACTOR_CHARS) {
            actor.truncate(cut);
        }
        AuditRecord {
            id: format!("aud_{}", uuid::Uuid::now_v7().simple()),
            at,
            actor,
            action,
            reason: None,
            subscription_id: None,
            event_id: None,
            dead_letter_id: None,
            job_id: None,
            tenant_id: None,
            details: empty_object(),
        }
    }

    /// The same record under a stable id, for an action a retried stage
    /// may record again (the append is conditional on the id, so it is
    /// stored once).
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// With a reason.
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// About this subscription.
    pub fn subscription(mut self, id: &SubscriptionId) -> Self {
        self.subscription_id = Some(id.clone());
        self
    }

    /// About this event.
    pub fn event(mut self, id: &EventId) -> Self {
        self.event_id = Some(id.clone());
        self
    }

    /// About this dead letter.
    pub fn dead_letter(mut self, id: &DeadLetterId) -> Self {
        self.dead_letter_id = Some(id.clone());
        self
    }

    /// Of this tenant's resource (`None` leaves it without one).
    pub fn tenant(mut self, tenant: Option<&TenantId>) -> Self {
        self.tenant_id = tenant.cloned();
        self
    }

    /// About this bulk job.
    pub fn job(mut self, id: impl Into<String>) -> Self {
        self.job_id = Some(id.into());
        self
    }

    /// With these details (a JSON object).
    pub fn details(mut self, details: serde_json::Value) -> Self {
        self.details = details;
        self
    }

    /// With the members of `more` (a JSON object) added to its details.
    pub fn details_merge(mut self, more: serde_json::Value) -> Self {
        if let (Some(d), serde_json::Value::Object(m)) = (self.details.as_object_mut(), more) {
            d.extend(m);
        }
        self
    }

    /// The record's place in newest-first order, as both stores key it:
    /// the time in ms, zero-padded to 16 digits, `#`, the id. Text order is
    /// time order; the id breaks ties.
    pub fn position(&self) -> String {
        position_of(self.at.timestamp_millis(), &self.id)
    }
}

/// The sort key of a record at `at_ms` with `id` ([`AuditRecord::position`]).
pub fn position_of(at_ms: i64, id: &str) -> String {
    format!("{}#{id}", time_key(at_ms))
}

/// An instant as the leading part of a position: ms, 16 digits. Every
/// position at `ms` sorts at or after it, every earlier one before it.
pub fn time_key(ms: i64) -> String {
    format!("{:016}", ms.max(0))
}

/// Which records a page of [`crate::ports::AuditStore::page`] lists; every
/// filter given must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuditFilter {
    /// Only this action.
    pub action: Option<Action>,
    /// Only this exact actor.
    pub actor: Option<String>,
    /// Only records about this subscription.
    pub subscription_id: Option<SubscriptionId>,
    /// Only records of this tenant's resources (a tenant-bound caller's
    /// listing always has it).
    pub tenant_id: Option<TenantId>,
    /// Only records whose `at` is in the range.
    pub range: TimeRange,
}

impl AuditFilter {
    /// Whether `r` passes every filter.
    pub fn matches(&self, r: &AuditRecord) -> bool {
        self.action.is_none_or(|a| a == r.action)
            && self.actor.as_deref().is_none_or(|a| a == r.actor)
            && self.subscription_id.as_ref().is_none_or(|s| Some(s) == r.subscription_id.as_ref())
            && self.tenant_id.as_ref().is_none_or(|t| Some(t) == r.tenant_id.as_ref())
            && self.range.contains(r.at)
    }

    /// The positions a page may cover: from `lo` (inclusive) to `hi`
    /// (exclusive), narrowed by a cursor's position `after` (the last item
    /// of the previous page: the next page holds older records only).
    pub fn bounds(&self, after: Option<&str>) -> (String, String) {
        let lo = self.range.since.map_or_else(|| "0".to_string(), |s| time_key(s.timestamp_millis()));
        let mut hi = self.range.until.map_or_else(|| "9".to_string(), |u| time_key(u.timestamp_millis()));
        if let Some(a) = after {
            if a < hi.as_str() {
                hi = a.to_string();
            }
        }
        (lo, hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_have_one_spelling() {
        for a in Action::ALL {
            assert_eq!(a.as_str().parse::<Action>(), Ok(a));
            assert_eq!(serde_json::to_value(a).unwrap(), serde_json::json!(a.as_str()));
        }
        let e = "subscription.create".parse::<Action>().unwrap_err();
        assert!(e.to_string().contains("subscription.created"), "{e}");
    }

    #[test]
    fn positions_sort_by_time_then_id() {
        let t = |ms| DateTime::from_timestamp_millis(ms).unwrap();
        let mut a = AuditRecord::at(Action::BreakerOpened, SYSTEM, t(9_000));
        a.id = "aud_b".into();
        let mut b = AuditRecord::at(Action::BreakerOpened, SYSTEM, t(10_000));
        b.id = "aud_a".into();
        assert!(a.position() < b.position());
        let f =
            AuditFilter { range: TimeRange { since: Some(t(9_000)), until: Some(t(10_000)) }, ..Default::default() };
        let (lo, hi) = f.bounds(None);
        assert!(lo <= a.position() && a.position() < hi, "since is inclusive");
        assert!(b.position() >= hi, "until is exclusive");
        let (_, hi) = f.bounds(Some(&a.position()));
        assert_eq!(hi, a.position(), "a cursor narrows the upper bound");
    }

    #[test]
    fn filters_all_hold() {
        let sub = SubscriptionId::new("sub_1");
        let r = AuditRecord::new(Action::SubscriptionUpdated, "key:ops").subscription(&sub);
        assert!(AuditFilter::default().matches(&r));
        assert!(AuditFilter {
            action: Some(Action::SubscriptionUpdated),
            actor: Some("key:ops".into()),
            subscription_id: Some(sub.clone()),
            ..Default::default()
        }
        .matches(&r));
        assert!(!AuditFilter { actor: Some("key:other".into()), ..Default::default() }.matches(&r));
        assert!(!AuditFilter { subscription_id: Some(SubscriptionId::new("sub_2")), ..Default::default() }.matches(&r));
    }
}
