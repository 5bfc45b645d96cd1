//! Verify: the callback handshake. A subscription is unverified until
//! Hookline POSTs a signed `{"type": "hookline.verification", "challenge"}`
//! to its URL and gets a 2xx whose body contains the challenge. Unverified
//! subscriptions receive nothing else.

use chrono::Utc;

use crate::audit;
use crate::context::Hookline;
use crate::error::StoreError;
use crate::ids::{self, SubscriptionId};
use crate::signing;
use crate::subscription::Subscription;

/// Runs the handshake for one subscription and stores the result. Returns
/// the subscription as stored afterwards, or `None` if it does not exist.
/// Hookline's own re-verifications are recorded as by [`audit::SYSTEM`].
pub async fn verify(h: &Hookline, subscription_id: &SubscriptionId) -> Result<Option<Subscription>, StoreError> {
    verify_as(h, subscription_id, audit::SYSTEM).await
}

/// [`verify`] on behalf of `actor` (who created, re-pointed, re-enabled or
/// asked to verify the subscription): the outcome stored leaves an audit
/// record, `subscription.verified` or `subscription.verification_failed`,
/// written after the result is stored.
pub async fn verify_as(
    h: &Hookline,
    subscription_id: &SubscriptionId,
    actor: &str,
) -> Result<Option<Subscription>, StoreError> {
    let Some(sub) = h.stores.subscriptions.get(subscription_id).await? else { return Ok(None) };
    let url = sub.callback_url.clone();
    let outcome = handshake(h, &sub).await;
    match &outcome {
        Ok(()) => tracing::info!(subscription_id = subscription_id.as_str(), "subscription verified"),
        Err(e) => {
            tracing::warn!(subscription_id = subscription_id.as_str(), error = %e, "subscription verification failed")
        }
    }
    // Store the result unless the URL changed meanwhile (that change starts
    // its own handshake).
    for _ in 0..5 {
        let Some(mut cur) = h.stores.subscriptions.get(subscription_id).await? else { return Ok(None) };
        if cur.callback_url != url {
            return Ok(Some(cur));
        }
        let version = cur.version;
        cur.verified = outcome.is_ok();
        cur.verification_error = outcome.clone().err();
        cur.version += 1;
        cur.updated_at = Utc::now();
        if h.stores.subscriptions.update(&cur, version).await? {
            h.subscription_cache.invalidate().await;
            let rec = match &outcome {
                Ok(()) => audit::AuditRecord::new(audit::Action::SubscriptionVerified, actor),
                Err(e) => audit::AuditRecord::new(audit::Action::SubscriptionVerificationFailed, actor)
                    .details(serde_json::json!({"error": e})),
            };
            h.audit(rec.subscription(subscription_id).tenant(cur.tenant_id.as_ref())).await;
            return Ok(Some(cur));
        }
    }
    Err(StoreError::other("subscription kept changing during verification".into()))
}

async fn handshake(h: &Hookline, sub: &Subscription) -> Result<(), String> {
    let challenge = ids::random_token("chl_");
    let body = serde_json::to_vec(&serde_json::json!({"type": "hookline.verification", "challenge": challenge}))
        .expect("json serializes");
    let now = Utc::now();
    let msg_id = ids::random_token("msg_verify_");
    let headers = [
        ("content-type", "application/json".to_string()),
        ("webhook-id", msg_id.clone()),
        ("webhook-timestamp", now.timestamp().to_string()),
        ("webhook-signature", signing::signature_header(sub.signing_secrets(now), &msg_id, now.timestamp(), &body)),
        ("hookline-event-type", "hookline.verification".to_string()),
    ];
    let res = h.client.post(&sub.callback_url, &headers, body).await;
    match (res.error, res.status) {
        (Some(e), _) => Err(format!("verification request failed: {e}")),
        (None, Some(s)) if (200..300).contains(&s) => {
            if res.body.contains(&challenge) {
                Ok(())
            } else {
                Err(format!("callback answered HTTP {s} without echoing the challenge"))
            }
        }
        (None, s) => Err(format!("callback answered HTTP {} to the verification request", s.unwrap_or(0))),
    }
}
