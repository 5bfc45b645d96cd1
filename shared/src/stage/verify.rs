//! Verify: the callback handshake. A subscription is unverified until
//! Hookline POSTs a signed `{"type": "hookline.verification", "challenge"}`
//! to its URL and gets a 2xx whose body is the answer to the challenge
//! ([`answers_challenge`]): exactly `{"challenge": "<challenge>"}`, or the
//! bare challenge. Unverified subscriptions receive nothing else.
//!
//! A queue or bus cannot answer: it is verified by a token instead
//! ([`super::verify_token`]).
//!
//! The answer differs from anything in the request, so an endpoint that
//! echoes the request back (its body, its headers, or both) does not
//! verify: the request body always has a `type` member beside the
//! challenge, so it is never exactly the answer; no header carries the
//! challenge. Only a receiver that reads the challenge and answers it
//! passes.

use super::verify_token::{store_unless_repointed, verification_headers};
use crate::audit;
use crate::context::Hookline;
use crate::error::StoreError;
use crate::ids::{self, SubscriptionId};
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
    if sub.is_pull_only() {
        return verified_pull_only(h, sub, actor).await;
    }
    if let Ok(to) = crate::destination::parse(&url).map(|d| d.kind()) {
        if to != crate::destination::DestinationKind::Https {
            return super::verify_token::send_token(h, sub).await.map(Some);
        }
    }
    let outcome = handshake(h, &sub).await;
    match &outcome {
        Ok(()) => tracing::info!(subscription_id = subscription_id.as_str(), "subscription verified"),
        Err(e) => {
            tracing::warn!(subscription_id = subscription_id.as_str(), error = %e, "subscription verification failed")
        }
    }
    // Store the result unless the URL changed meanwhile (that change starts
    // its own handshake).
    let stored = store_unless_repointed(h, subscription_id, &url, |cur| {
        cur.verified = outcome.is_ok();
        cur.verification_error = outcome.clone().err();
        cur.verification_token = None;
    })
    .await?;
    if let Some((cur, true)) = &stored {
        let rec = match &outcome {
            Ok(()) => audit::AuditRecord::new(audit::Action::SubscriptionVerified, actor),
            Err(e) => audit::AuditRecord::new(audit::Action::SubscriptionVerificationFailed, actor)
                .details(serde_json::json!({"error": e})),
        };
        h.audit(rec.subscription(subscription_id).tenant(cur.tenant_id.as_ref())).await;
    }
    Ok(stored.map(|(s, _)| s))
}

/// A pull-only subscription has no endpoint to verify: only a key scoped to
/// it can read what is routed to it, and an admin or tenant admin created
/// it. It is stored verified (audited as `subscription.verified` when that
/// changed anything), unless it got a callback meanwhile.
async fn verified_pull_only(h: &Hookline, sub: Subscription, actor: &str) -> Result<Option<Subscription>, StoreError> {
    if sub.verified && sub.verification_error.is_none() {
        return Ok(Some(sub));
    }
    let stored = store_unless_repointed(h, &sub.id, &sub.callback_url, |cur| {
        cur.verified = true;
        cur.verification_error = None;
        cur.verification_token = None;
    })
    .await?;
    if let Some((cur, true)) = &stored {
        let rec = audit::AuditRecord::new(audit::Action::SubscriptionVerified, actor)
            .details(serde_json::json!({"pull_only": true}));
        h.audit(rec.subscription(&sub.id).tenant(cur.tenant_id.as_ref())).await;
    }
    Ok(stored.map(|(s, _)| s))
}

async fn handshake(h: &Hookline, sub: &Subscription) -> Result<(), String> {
    let challenge = ids::random_token("chl_");
    let body = serde_json::to_vec(&serde_json::json!({"type": "hookline.verification", "challenge": challenge}))
        .expect("json serializes");
    let msg_id = ids::random_token("msg_verify_");
    let headers = verification_headers(sub, &msg_id, &body);
    let to = crate::destination::Destination::Https(sub.callback_url.clone());
    let msg = crate::transport::Outbound { headers: &headers, body: &body, group: sub.id.as_str(), dedup: &msg_id };
    let res = h.transport.send(&to, msg).await;
    match (res.error, res.status) {
        (Some(e), _) => Err(format!("verification request failed: {e}")),
        (None, Some(s)) if (200..300).contains(&s) => {
            if answers_challenge(&res.body, &challenge) {
                Ok(())
            } else {
                Err(format!(
                    "callback answered HTTP {s} without answering the challenge: the body must be exactly {{\"challenge\": \"<the challenge>\"}}"
                ))
            }
        }
        (None, s) => Err(format!("callback answered HTTP {} to the verification request", s.unwrap_or(0))),
    }
}

/// Whether a verification response body answers `challenge`: after
/// trimming whitespace, a JSON object whose only member is `"challenge"`
/// with exactly that string, or the challenge alone. The request
/// (`{"type": "hookline.verification", "challenge": …}` and headers
/// without the challenge) is neither, so echoing it back does not answer.
pub fn answers_challenge(body: &str, challenge: &str) -> bool {
    let body = body.trim();
    if body == challenge {
        return true;
    }
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(serde_json::Value::Object(m)) => {
            m.len() == 1 && m.get("challenge").and_then(|c| c.as_str()) == Some(challenge)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::answers_challenge;

    #[test]
    fn only_the_answer_verifies_never_an_echo() {
        let c = "chl_0123456789abcdef";
        for ok in [
            format!(r#"{{"challenge": "{c}"}}"#),
            format!(r#"{{"challenge":"{c}"}}"#),
            format!("  {{ \"challenge\" : \"{c}\" }}\n"),
            c.to_string(),
            format!("{c}\n"),
        ] {
            assert!(answers_challenge(&ok, c), "{ok}");
        }
        let request = format!(r#"{{"type": "hookline.verification", "challenge": "{c}"}}"#);
        for bad in [
            request.clone(),
            format!(r#"{{"challenge": "{c}", "type": "hookline.verification"}}"#),
            format!(r#"{{"body": {request}, "headers": {{"webhook-id": "msg_verify_1"}}}}"#),
            format!(r#"{{"challenge": "{c}x"}}"#),
            format!(r#"{{"challenge": ["{c}"]}}"#),
            format!(r#"["{c}"]"#),
            format!("challenge={c}"),
            format!("ok {c}"),
            r#"{"challenge": "chl_other"}"#.to_string(),
            String::new(),
        ] {
            assert!(!answers_challenge(&bad, c), "{bad}");
        }
    }
}
