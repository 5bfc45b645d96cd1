//! Failing endpoints and Hookline's operational events.
//!
//! A subscription is disabled (`active: false`, with `disabled_reason` and
//! `disabled_at`) when its endpoint answers 410 Gone (the saga stage, at
//! once) or when every attempt has failed for
//! [`crate::context::Config::disable_after`] (the delivery stage, decided by
//! [`crate::health::should_disable`]). Each disable leaves an audit record
//! (actor [`audit::SYSTEM`]) and publishes `hookline.subscription.disabled`.
//!
//! Operational events are published into Hookline itself: stored and routed
//! like any event, through the same ingest function the API uses, without a
//! tenant, so any subscription with `event_types: ["hookline.*"]` (an ops
//! channel) receives them. Each has a stable id derived from what it
//! reports, so a stage that retries after a crash stores it once: `hop_`
//! and an HMAC of its cause under a server secret
//! ([`crate::ids::operational_event_id`], `Keyring::mac`), so producers
//! cannot compute it and post an event under it first:
//! - `hookline.subscription.disabled` `{subscription_id, reason, last_error, failing_since}`;
//! - `hookline.subscription.enabled` `{subscription_id}`;
//! - `hookline.dead_letter.created` `{dead_letter_id, subscription_id, event_id, event_type, last_error, attempts}`.
//!
//! A dead letter of a `hookline.*` event publishes nothing: an ops channel
//! that is itself failing must not feed itself events about its failures.

use chrono::{DateTime, Utc};
use serde_json::json;

use crate::audit::{self, AuditRecord};
use crate::context::Hookline;
use crate::dead_letter::DeadLetter;
use crate::error::StoreError;
use crate::health::Health;
use crate::ids::SubscriptionId;
use crate::stage::ingest::{self, IngestError};
use crate::subscription::Subscription;

pub use crate::routing::{is_operational, OPERATIONAL_PREFIX};
/// `hookline.subscription.disabled`.
pub const SUBSCRIPTION_DISABLED: &str = "hookline.subscription.disabled";
/// `hookline.subscription.enabled`.
pub const SUBSCRIPTION_ENABLED: &str = "hookline.subscription.enabled";
/// `hookline.dead_letter.created`.
pub const DEAD_LETTER_CREATED: &str = "hookline.dead_letter.created";

/// `disabled_reason` of a subscription whose endpoint answered 410 Gone.
pub const REASON_GONE: &str = "gone";
/// `disabled_reason` of a subscription whose deliveries all failed for
/// `disable_after`.
pub const REASON_FAILING: &str = "failing";

/// Why a subscription is disabled.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// [`REASON_GONE`] or [`REASON_FAILING`].
    pub reason: &'static str,
    /// The last attempt's error.
    pub last_error: Option<String>,
    /// When the failing run began (`None` for a 410).
    pub failing_since: Option<DateTime<Utc>>,
}

/// The id of the operational event of `event_type` that `cause` (the
/// parts naming what caused it) publishes: keyed with the deployment's
/// secret ([`crate::keyring::Keyring::mac`]), the same for every retry.
pub fn operational_id(h: &Hookline, event_type: &str, cause: &[&str]) -> crate::ids::EventId {
    let mut parts = vec!["operational-event", event_type];
    parts.extend_from_slice(cause);
    crate::ids::operational_event_id(&h.keyring.mac(&parts))
}

/// Publishes one operational event: a native envelope with the id of its
/// `cause` ([`operational_id`]), `type`, `producer: "hookline"` and
/// `data`, through [`ingest::ingest`] (stored and routed like any event).
/// Publishing the same cause again stores nothing.
pub async fn publish(
    h: &Hookline,
    cause: &[&str],
    event_type: &str,
    data: serde_json::Value,
) -> Result<(), StoreError> {
    let id = operational_id(h, event_type, cause);
    let envelope = json!({"id": id, "type": event_type, "producer": "hookline", "data": data});
    let raw = serde_json::to_vec(&envelope).expect("json serializes");
    match ingest::ingest_operational(h, &raw).await {
        Ok(a) => {
            tracing::info!(event_id = %a.event_id, event_type, duplicate = a.duplicate, "operational event published");
            Ok(())
        }
        Err(IngestError::Store(e)) => Err(e),
        // Our own envelope: refused only by a bug, which retrying cannot fix.
        Err(e) => {
            tracing::error!(error = %e, event_type, "operational event refused by ingest");
            Ok(())
        }
    }
}

/// After a delivery attempt wrote `health`: disables the subscription if
/// its failing run has lasted `disable_after` ([`crate::health::should_disable`]).
/// Errors are logged: the attempt is recorded either way, and the next
/// failure checks again.
pub async fn after_attempt(h: &Hookline, sub: &SubscriptionId, health: &Health) {
    if !crate::health::should_disable(health, h.config.disable_after, Utc::now()) {
        return;
    }
    let cause =
        Cause { reason: REASON_FAILING, last_error: health.last_error.clone(), failing_since: health.failing_since };
    if let Err(e) = disable(h, sub, &cause).await {
        tracing::warn!(subscription_id = %sub, error = %e, "failing subscription not disabled; the next failure retries");
    }
}

/// Disables an active subscription for `cause`: one conditional update
/// (`active: false`, `disabled_reason`, `disabled_at`), then its audit
/// record and `hookline.subscription.disabled`. A subscription already
/// disabled for the same reason publishes its event again under the same
/// id (a retry after a crash stores nothing new); an inactive one switched
/// off by an operator is left alone.
pub async fn disable(h: &Hookline, id: &SubscriptionId, cause: &Cause) -> Result<(), StoreError> {
    for _ in 0..5 {
        let Some(mut sub) = h.stores.subscriptions.get(id).await? else { return Ok(()) };
        if !sub.active {
            if let (Some(r), Some(at)) = (sub.disabled_reason.as_deref(), sub.disabled_at) {
                if r == cause.reason {
                    return publish_disabled(h, &sub, cause, at).await;
                }
            }
            return Ok(());
        }
        let version = sub.version;
        let now = Utc::now();
        sub.active = false;
        sub.disabled_reason = Some(cause.reason.to_string());
        sub.disabled_at = Some(now);
        sub.version += 1;
        sub.updated_at = now;
        if h.stores.subscriptions.update(&sub, version).await? {
            h.subscription_cache.invalidate().await;
            tracing::warn!(
                subscription_id = %id,
                reason = cause.reason,
                last_error = cause.last_error.as_deref().unwrap_or(""),
                "subscription disabled"
            );
            let rec = AuditRecord::at(audit::Action::SubscriptionDisabled, audit::SYSTEM, now)
                .subscription(id)
                .tenant(sub.tenant_id.as_ref())
                .reason(describe(cause, h.config.disable_after))
                .details(json!({"disabled_reason": cause.reason, "last_error": cause.last_error, "failing_since": cause.failing_since}));
            h.audit(rec).await;
            return publish_disabled(h, &sub, cause, now).await;
        }
    }
    Err(StoreError::other(format!("subscription {id} kept changing while being disabled")))
}

/// The audit reason of a disable.
fn describe(cause: &Cause, disable_after: chrono::Duration) -> String {
    match cause.reason {
        REASON_GONE => "the endpoint answered 410 Gone".to_string(),
        _ => format!(
            "every delivery failed for at least {} (since {})",
            crate::duration::Display(disable_after),
            cause.failing_since.map_or_else(|| "?".to_string(), |t| t.to_rfc3339())
        ),
    }
}

async fn publish_disabled(
    h: &Hookline,
    sub: &Subscription,
    cause: &Cause,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    let at = at.timestamp_millis().to_string();
    let data = json!({
        "subscription_id": sub.id,
        "reason": cause.reason,
        "last_error": cause.last_error,
        "failing_since": cause.failing_since,
    });
    publish(h, &[sub.id.as_str(), &at], SUBSCRIPTION_DISABLED, data).await
}

/// A subscription an operator re-activated (stored as `sub`, at
/// `sub.updated_at`): its failing run is forgotten, and
/// `hookline.subscription.enabled` is published (id from the subscription
/// and its version). The audit record is the caller's (it knows the actor).
pub async fn enabled(h: &Hookline, sub: &Subscription) -> Result<(), StoreError> {
    crate::stage::breaker::restart_failing_run(h, &sub.id).await?;
    let version = sub.version.to_string();
    publish(h, &[sub.id.as_str(), &version], SUBSCRIPTION_ENABLED, json!({"subscription_id": sub.id})).await
}

/// A dead letter was created (or its effect is run again): publishes
/// `hookline.dead_letter.created` under an id derived from the dead
/// letter, unless the dead event is itself operational.
pub async fn dead_letter_created(h: &Hookline, dl: &DeadLetter) -> Result<(), StoreError> {
    if is_operational(&dl.event_type) {
        return Ok(());
    }
    let data = json!({
        "dead_letter_id": dl.id,
        "subscription_id": dl.subscription_id,
        "event_id": dl.event_id,
        "event_type": dl.event_type,
        "last_error": dl.reason,
        "attempts": dl.attempts,
    });
    publish(h, &[dl.id.as_str()], DEAD_LETTER_CREATED, data).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operational_types_are_told_apart() {
        assert!(is_operational(DEAD_LETTER_CREATED));
        assert!(is_operational(SUBSCRIPTION_DISABLED));
        assert!(!is_operational("order.created"));
        assert!(!is_operational("hooklinex.a"));
    }
}
