//! Verification of a queue or bus destination. A queue or bus cannot answer
//! a challenge, so Hookline sends it a signed verification message
//! (`{"type": "hookline.verification", "subscription_id", "token"}`, as a
//! delivery would travel: an SQS message, or an EventBridge entry of detail
//! type `hookline.verification`) and the subscription stays unverified
//! until its owner, who can read the queue or the bus, confirms with
//! `POST /v1/subscriptions/{id}/verify` and `{"token": "<token>"}`.
//!
//! Only the SHA-256 of the pending token is stored
//! ([`Subscription::verification_token`]); it is never returned or logged.
//! Sending again (a new `POST …/verify` without a token) replaces it. A
//! wrong token changes nothing and leaves a `subscription.verification_failed`
//! audit record; the right one verifies the subscription
//! (`subscription.verified`).

use chrono::Utc;
use sha2::{Digest, Sha256};

use crate::audit::{self, Action, AuditRecord};
use crate::context::Hookline;
use crate::error::StoreError;
use crate::ids::{self, SubscriptionId};
use crate::signing;
use crate::subscription::Subscription;
use crate::transport::Outbound;

/// The prefix of a verification token.
pub const TOKEN_PREFIX: &str = "vtk_";

/// `verification_error` while a queue or bus waits for its owner's token.
pub const AWAITING_TOKEN: &str = "awaiting confirmation: a verification message with a token was sent to the \
     destination; confirm with POST /v1/subscriptions/{id}/verify and {\"token\": \"<token>\"}";

/// The stored form of a token: its SHA-256, hex (a token has 192 random
/// bits, so no salt or stretching is needed).
pub fn token_hash(token: &str) -> String {
    Sha256::digest(token.trim().as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Sends `sub`'s destination a verification message with a new token and
/// stores the token's hash (the subscription unverified until confirmed),
/// or, if the message could not be sent, why (`verification_error`, with a
/// `subscription.verification_failed` audit record by [`audit::SYSTEM`]).
/// Returns the subscription as stored.
pub async fn send_token(h: &Hookline, sub: Subscription) -> Result<Subscription, StoreError> {
    let Ok(to) = crate::destination::parse(&sub.callback_url) else { return Ok(sub) };
    let token = ids::random_token(TOKEN_PREFIX);
    let body = serde_json::to_vec(&serde_json::json!({
        "type": "hookline.verification",
        "subscription_id": sub.id,
        "token": token,
    }))
    .expect("json serializes");
    let msg_id = ids::random_token("msg_verify_");
    let headers = verification_headers(&sub, &msg_id, &body);
    let msg = Outbound { headers: &headers, body: &body, group: sub.id.as_str(), dedup: &msg_id };
    let res = h.transport.send(&to, msg).await;
    let sent = res.is_success();
    let error = match &res.error {
        None if sent => AWAITING_TOKEN.to_string(),
        Some(e) => format!("verification message could not be sent: {e}"),
        None => format!("verification message could not be sent: status {}", res.status.unwrap_or(0)),
    };
    if sent {
        tracing::info!(subscription_id = %sub.id, "verification message sent; awaiting its token");
    } else {
        tracing::warn!(subscription_id = %sub.id, error = %error, "verification message not sent");
    }
    let hash = sent.then(|| token_hash(&token));
    let stored = store_unless_repointed(h, &sub.id, &sub.callback_url, |cur| {
        cur.verified = false;
        cur.verification_error = Some(error.clone());
        cur.verification_token = hash.clone();
    })
    .await?;
    if let (Some((cur, true)), false) = (&stored, sent) {
        let rec = AuditRecord::new(Action::SubscriptionVerificationFailed, audit::SYSTEM)
            .details(serde_json::json!({"error": error}));
        h.audit(rec.subscription(&sub.id).tenant(cur.tenant_id.as_ref())).await;
    }
    Ok(stored.map_or(sub, |(s, _)| s))
}

/// Why a token did not confirm a destination.
#[derive(Debug, thiserror::Error)]
pub enum ConfirmError {
    /// No such subscription.
    #[error("subscription not found")]
    NotFound,
    /// It has no verification message pending (an HTTPS callback, one
    /// already verified, or one whose message could not be sent).
    #[error("no verification token is pending for this subscription (send one with POST …/verify without a token)")]
    NothingPending,
    /// Not the token of the pending message.
    #[error("not the token of the verification message sent to the destination")]
    WrongToken,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Confirms the destination of `id` with `token` on behalf of `actor`:
/// verified if it is the pending token (`subscription.verified`); a wrong
/// one changes nothing but the audit trail (`subscription.verification_failed`).
pub async fn confirm(
    h: &Hookline,
    id: &SubscriptionId,
    token: &str,
    actor: &str,
) -> Result<Subscription, ConfirmError> {
    let sub = h.stores.subscriptions.get(id).await?.ok_or(ConfirmError::NotFound)?;
    let Some(expected) = sub.verification_token.clone() else { return Err(ConfirmError::NothingPending) };
    if !crate::api_key::constant_time_eq(token_hash(token).as_bytes(), expected.as_bytes()) {
        let rec = AuditRecord::new(Action::SubscriptionVerificationFailed, actor)
            .details(serde_json::json!({"error": ConfirmError::WrongToken.to_string()}));
        h.audit(rec.subscription(id).tenant(sub.tenant_id.as_ref())).await;
        return Err(ConfirmError::WrongToken);
    }
    let stored = store_unless_repointed(h, id, &sub.callback_url, |cur| {
        if cur.verification_token.as_deref() == Some(expected.as_str()) {
            cur.verified = true;
            cur.verification_error = None;
            cur.verification_token = None;
        }
    })
    .await?;
    match stored {
        None => Err(ConfirmError::NotFound),
        Some((cur, _)) if !cur.verified => Err(ConfirmError::NothingPending),
        Some((cur, _)) => {
            tracing::info!(subscription_id = %id, "destination confirmed by its token");
            let rec = AuditRecord::new(Action::SubscriptionVerified, actor);
            h.audit(rec.subscription(id).tenant(cur.tenant_id.as_ref())).await;
            Ok(cur)
        }
    }
}

/// Applies `change` to the stored subscription (a versioned update, read
/// again if another writer came first) unless its `callback_url` is no
/// longer `url`: a re-pointed subscription starts its own verification.
/// Returns the subscription as stored and whether `change` was applied;
/// `None` if it no longer exists.
pub(super) async fn store_unless_repointed(
    h: &Hookline,
    subscription_id: &SubscriptionId,
    url: &str,
    change: impl Fn(&mut Subscription),
) -> Result<Option<(Subscription, bool)>, StoreError> {
    for _ in 0..5 {
        let Some(mut cur) = h.stores.subscriptions.get(subscription_id).await? else { return Ok(None) };
        if cur.callback_url != url {
            return Ok(Some((cur, false)));
        }
        let version = cur.version;
        change(&mut cur);
        cur.version += 1;
        cur.updated_at = Utc::now();
        if h.stores.subscriptions.update(&cur, version).await? {
            h.subscription_cache.invalidate().await;
            return Ok(Some((cur, true)));
        }
    }
    Err(StoreError::other("subscription kept changing during verification".into()))
}

/// The signed headers of a verification message `msg_id` with `body`.
pub(super) fn verification_headers(sub: &Subscription, msg_id: &str, body: &[u8]) -> Vec<(&'static str, String)> {
    let now = Utc::now();
    vec![
        ("content-type", "application/json".to_string()),
        ("webhook-id", msg_id.to_string()),
        ("webhook-timestamp", now.timestamp().to_string()),
        ("webhook-signature", signing::signature_header(sub.signing_secrets(now), msg_id, now.timestamp(), body)),
        ("hookline-event-type", "hookline.verification".to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_hash_is_kept_and_it_ignores_surrounding_space() {
        let t = "vtk_0123";
        assert_eq!(token_hash(t), token_hash(" vtk_0123\n"));
        assert_ne!(token_hash(t), token_hash("vtk_0124"));
        assert!(!token_hash(t).contains(t));
        assert_eq!(token_hash(t).len(), 64);
    }
}
