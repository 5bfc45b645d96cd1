//! Subscriber acknowledgements (docs/delivery.md#acknowledgements): a
//! subscriber reports what it did with a delivery (`processed`, or `failed`
//! with a reason, optionally its own reference) by calling Hookline with a
//! Standard Webhooks signature made with its subscription's signing secret.
//! What is decided here, without I/O: whether a request's signature is the
//! subscription's ([`authenticate`]), whether its fields are acceptable
//! ([`check`]), and who the audit trail names ([`actor`]). The latest
//! acknowledgement per (subscription, `webhook-id`) is kept by the
//! [`crate::ports::AckStore`] until the event's retention ends.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::FieldError;
use crate::ids::{SubscriptionId, WebhookId};
use crate::signing::{verify, VerifyError};
use crate::subscription::Subscription;

/// How far a request's `webhook-timestamp` may be from Hookline's clock, in
/// seconds, either way (the Standard Webhooks default: 5 minutes).
pub const SIGNATURE_TOLERANCE_SECS: i64 = 300;

/// The longest `reason`, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;

/// The longest `reference`, in bytes.
pub const MAX_REFERENCE_BYTES: usize = 256;

/// The highest `attempt` an acknowledgement may name (no retry schedule
/// has more attempts: [`crate::retry`]'s bound is far below).
pub const MAX_ATTEMPT: u32 = 1000;

/// What the subscriber did with a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AckStatus {
    /// Done with it.
    Processed,
    /// Could not process it; the acknowledgement's `reason` says why.
    Failed,
}

impl AckStatus {
    /// As stored, shown and counted (`processed`, `failed`).
    pub fn as_str(self) -> &'static str {
        match self {
            AckStatus::Processed => "processed",
            AckStatus::Failed => "failed",
        }
    }
}

/// The latest acknowledgement of one delivery (a subscription and a
/// `webhook-id`: every attempt, requeue and replay of one event to one
/// subscription shares it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Acknowledgement {
    /// The subscription that acknowledged (authenticated by its secret).
    pub subscription_id: SubscriptionId,
    /// The delivery's `webhook-id`.
    pub webhook_id: WebhookId,
    /// The attempt acknowledged, when the subscriber named it.
    pub attempt: Option<u32>,
    /// Processed or failed.
    pub status: AckStatus,
    /// Why it failed (always set for [`AckStatus::Failed`]).
    pub reason: Option<String>,
    /// The subscriber's own reference.
    pub reference: Option<String>,
    /// When Hookline received it.
    pub received_at: DateTime<Utc>,
    /// When it may be forgotten: the event retention after it arrived
    /// (DynamoDB TTL, the SQLite purge).
    pub expires_at: DateTime<Utc>,
}

/// What an acknowledgement request says, before it is checked.
#[derive(Debug, Clone, PartialEq)]
pub struct AckFields {
    /// `webhook_id`.
    pub webhook_id: String,
    /// `attempt`.
    pub attempt: Option<u32>,
    /// `status`.
    pub status: AckStatus,
    /// `reason`.
    pub reason: Option<String>,
    /// `reference`.
    pub reference: Option<String>,
}

/// The Standard Webhooks headers of an acknowledgement request, as they
/// arrived (`""` when absent).
#[derive(Debug, Clone, Copy, Default)]
pub struct SignedHeaders<'a> {
    /// `webhook-id`: the request's own message id, chosen by the subscriber.
    pub id: &'a str,
    /// `webhook-timestamp`: unix seconds.
    pub timestamp: &'a str,
    /// `webhook-signature`: `v1,<base64>` (space-separated, several allowed).
    pub signature: &'a str,
}

/// Is this request signed by `sub`'s current secret, or by a rotated-out
/// one still in its overlap, within [`SIGNATURE_TOLERANCE_SECS`] of `now`?
///
/// # Errors
///
/// What [`verify`] refuses: a missing header, a timestamp that is not a
/// number or too far from `now`, no matching signature. Never names a
/// secret.
pub fn authenticate(
    sub: &Subscription,
    headers: SignedHeaders<'_>,
    body: &[u8],
    now: DateTime<Utc>,
) -> Result<(), VerifyError> {
    let secrets: Vec<_> = sub.signing_secrets(now).into_iter().cloned().collect();
    verify(&secrets, headers.id, headers.timestamp, headers.signature, body, now.timestamp(), SIGNATURE_TOLERANCE_SECS)
}

/// Checks an acknowledgement's fields and makes its record, kept until
/// `retention` after `now`.
///
/// # Errors
///
/// A [`FieldError`] naming the first bad field: `webhook_id` not of the
/// form `msg_` and 26 lowercase hex digits, `attempt` outside
/// 1..=[`MAX_ATTEMPT`], `reason` missing for `failed`, blank, or longer
/// than [`MAX_REASON_BYTES`], `reference` blank or longer than
/// [`MAX_REFERENCE_BYTES`], or either holding control characters.
pub fn check(
    subscription_id: &SubscriptionId,
    fields: AckFields,
    now: DateTime<Utc>,
    retention: chrono::Duration,
) -> Result<Acknowledgement, FieldError> {
    if !is_webhook_id(&fields.webhook_id) {
        return Err(FieldError::new(
            "webhook_id",
            "webhook_id must be a delivery's webhook-id header: msg_ and 26 lowercase hex digits",
        ));
    }
    if let Some(a) = fields.attempt {
        if !(1..=MAX_ATTEMPT).contains(&a) {
            return Err(FieldError::new("attempt", format!("attempt must be 1 to {MAX_ATTEMPT}, got {a}")));
        }
    }
    let reason = text("reason", fields.reason, MAX_REASON_BYTES)?;
    if fields.status == AckStatus::Failed && reason.is_none() {
        return Err(FieldError::new("reason", "reason is required when status is failed"));
    }
    let reference = text("reference", fields.reference, MAX_REFERENCE_BYTES)?;
    Ok(Acknowledgement {
        subscription_id: subscription_id.clone(),
        webhook_id: WebhookId::new(fields.webhook_id),
        attempt: fields.attempt,
        status: fields.status,
        reason,
        reference,
        received_at: now,
        expires_at: now + retention,
    })
}

/// Who the audit trail names for an acknowledgement:
/// `subscriber:<subscription id>`.
pub fn actor(subscription_id: &SubscriptionId) -> String {
    format!("subscriber:{subscription_id}")
}

/// The acknowledgement that counts for attempt `attempt` of a delivery
/// sent at `since`, as the saga's state machine sees it: one received at
/// or after `since` (an older one answered an earlier delivery of the same
/// `webhook-id`: a requeue, a replay, an earlier attempt) that names this
/// attempt or none.
pub fn counts_for(ack: Option<&Acknowledgement>, attempt: u32, since: DateTime<Utc>) -> Option<crate::saga::AckSeen> {
    let a = ack.filter(|a| a.received_at >= since && a.attempt.is_none_or(|n| n == attempt))?;
    Some(match a.status {
        AckStatus::Processed => crate::saga::AckSeen::Processed,
        AckStatus::Failed => crate::saga::AckSeen::Failed(a.reason.clone().unwrap_or_default()),
    })
}

/// `msg_` and 26 lowercase hex digits ([`crate::ids::webhook_id`]).
fn is_webhook_id(s: &str) -> bool {
    s.strip_prefix("msg_").is_some_and(|h| h.len() == 26 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// An optional bounded text field: absent stays absent; blank, too long or
/// holding control characters is refused naming `field`.
fn text(field: &str, value: Option<String>, max: usize) -> Result<Option<String>, FieldError> {
    let Some(v) = value else { return Ok(None) };
    if v.trim().is_empty() {
        return Err(FieldError::new(field, format!("{field} must not be blank (leave it out instead)")));
    }
    if v.len() > max {
        return Err(FieldError::new(field, format!("{field} is {} bytes; at most {max}", v.len())));
    }
    if v.chars().any(char::is_control) {
        return Err(FieldError::new(field, format!("{field} must not hold control characters")));
    }
    Ok(Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signing::{sign, Secret};

    const WID: &str = "msg_0123456789abcdef0123456789";

    fn fields(status: AckStatus, reason: Option<&str>) -> AckFields {
        AckFields {
            webhook_id: WID.into(),
            attempt: Some(2),
            status,
            reason: reason.map(Into::into),
            reference: Some("ref-1".into()),
        }
    }

    fn sub() -> SubscriptionId {
        SubscriptionId::new("sub_1")
    }

    #[test]
    fn a_good_acknowledgement_is_kept_for_the_retention() {
        let now = Utc::now();
        let a = check(&sub(), fields(AckStatus::Processed, None), now, chrono::Duration::days(30)).unwrap();
        assert_eq!(a.webhook_id, WID);
        assert_eq!(a.attempt, Some(2));
        assert_eq!(a.expires_at, now + chrono::Duration::days(30));
        assert_eq!(a.reference.as_deref(), Some("ref-1"));
    }

    #[test]
    fn every_bad_field_is_named() {
        let now = Utc::now();
        let ret = chrono::Duration::days(1);
        let field = |f: AckFields| check(&sub(), f, now, ret).unwrap_err().field;
        assert_eq!(field(fields(AckStatus::Failed, None)), "reason");
        assert_eq!(field(fields(AckStatus::Failed, Some("  "))), "reason");
        assert_eq!(field(fields(AckStatus::Failed, Some(&"x".repeat(MAX_REASON_BYTES + 1)))), "reason");
        assert_eq!(field(fields(AckStatus::Failed, Some("a\nb"))), "reason");
        for bad in ["msg_X123456789abcdef0123456789", "sag_0123456789abcdef0123456789", "msg_01", ""] {
            assert_eq!(field(AckFields { webhook_id: bad.into(), ..fields(AckStatus::Processed, None) }), "webhook_id");
        }
        for bad in [0, MAX_ATTEMPT + 1] {
            assert_eq!(field(AckFields { attempt: Some(bad), ..fields(AckStatus::Processed, None) }), "attempt");
        }
        let long = "r".repeat(MAX_REFERENCE_BYTES + 1);
        assert_eq!(field(AckFields { reference: Some(long), ..fields(AckStatus::Processed, None) }), "reference");
        assert!(check(&sub(), fields(AckStatus::Failed, Some("db down")), now, ret).is_ok());
    }

    #[test]
    fn only_an_acknowledgement_since_the_attempt_of_it_counts() {
        use crate::saga::AckSeen;
        let now = Utc::now();
        let a = check(&sub(), fields(AckStatus::Processed, None), now, chrono::Duration::days(1)).unwrap();
        assert_eq!(counts_for(Some(&a), 2, now), Some(AckSeen::Processed));
        assert_eq!(counts_for(Some(&a), 3, now), None, "it names attempt 2");
        assert_eq!(counts_for(Some(&a), 2, now + chrono::Duration::seconds(1)), None, "older than the attempt");
        let any = Acknowledgement { attempt: None, ..a.clone() };
        assert_eq!(counts_for(Some(&any), 7, now), Some(AckSeen::Processed));
        let f = check(&sub(), fields(AckStatus::Failed, Some("disk full")), now, chrono::Duration::days(1)).unwrap();
        assert_eq!(counts_for(Some(&f), 2, now), Some(AckSeen::Failed("disk full".into())));
        assert_eq!(counts_for(None, 2, now), None);
    }

    /// The saga's rows for acknowledgements (docs/architecture.md): a 2xx
    /// waits, `processed` completes, `failed` and a missed deadline are
    /// failed attempts (retried, then dead-lettered), an early check
    /// schedules the next one at a doubled wait, never past the deadline.
    #[test]
    fn a_saga_waits_for_its_acknowledgement() {
        use crate::retry::RetryPolicy;
        use crate::saga::{decide_acked, AckSeen, AttemptResult, Effect, Input, Rules, SagaState, SagaStatus::*};
        use std::time::Duration;
        let now = Utc::now();
        let policy = RetryPolicy { max_attempts: 2, ..RetryPolicy::default() };
        let rules = Rules { policy: &policy, dead_letter_on: &[], ack_timeout: Some(Duration::from_secs(60)) };
        let pending = SagaState { status: Pending, attempts: 0, next_attempt_at: None, last_error: None };
        let ok = Input::Outcome { attempt: 1, result: AttemptResult::Delivered, status: Some(200) };
        let d = decide_acked(&pending, &ok, &rules, now, 0.0).unwrap();
        let deadline = now + chrono::Duration::seconds(60);
        assert_eq!((d.next.status, d.next.attempts, d.next.next_attempt_at), (AwaitingAck, 1, Some(deadline)));
        assert_eq!(d.effects, [Effect::CheckAck { attempt: 1, at: now + chrono::Duration::seconds(1) }]);
        let waiting = d.next;
        let at = |secs: i64| now + chrono::Duration::seconds(secs);
        let check = |ack: Option<AckSeen>, t: i64| {
            decide_acked(&waiting, &Input::AckDue { attempt: 1, ack, since: now }, &rules, at(t), 0.0).unwrap()
        };
        assert_eq!(check(Some(AckSeen::Processed), 5).next.status, Completed);
        let early = check(None, 5);
        assert_eq!(early.next, waiting, "nothing stored");
        assert_eq!(early.effects, [Effect::CheckAck { attempt: 1, at: at(10) }], "waits as long again");
        assert_eq!(check(None, 40).effects, [Effect::CheckAck { attempt: 1, at: deadline }], "never past it");
        let late = check(None, 60);
        assert_eq!(late.next.status, PendingRetry);
        assert_eq!(late.next.last_error.as_deref(), Some("no acknowledgement within 60s"));
        assert!(matches!(late.effects[..], [Effect::ScheduleRetry { attempt: 2, .. }]));
        let refused = check(Some(AckSeen::Failed("ledger closed".into())), 5);
        assert_eq!(refused.next.status, PendingRetry);
        assert!(refused.next.last_error.unwrap().contains("ledger closed"));
        // The last attempt acknowledged failed: a dead letter with the reason.
        let last = SagaState { attempts: 2, ..waiting.clone() };
        let input = Input::AckDue { attempt: 2, ack: Some(AckSeen::Failed("bad row".into())), since: now };
        let d = decide_acked(&last, &input, &rules, at(5), 0.0).unwrap();
        assert_eq!(d.next.status, DeadLettered);
        assert!(matches!(&d.effects[..], [Effect::DeadLetter { reason }] if reason.contains("bad row")));
        // A check of another attempt, or after the setting was removed.
        assert!(decide_acked(&last, &Input::AckDue { attempt: 1, ack: None, since: now }, &rules, at(5), 0.0).is_none());
        let plain = Rules { ack_timeout: None, ..rules };
        let d = decide_acked(&waiting, &Input::AckDue { attempt: 1, ack: None, since: now }, &plain, at(5), 0.0);
        assert_eq!(d.unwrap().next.status, Completed);
        // Without the setting, a 2xx completes as always.
        assert_eq!(decide_acked(&pending, &ok, &plain, now, 0.0).unwrap().next.status, Completed);
        // The reconciler sees a waiting saga as due only at its deadline:
        // live (not stalled) until then.
        assert_eq!(crate::saga::due_at(&waiting, now), Some(deadline));
    }

    #[test]
    fn only_the_subscriptions_secrets_within_the_tolerance_authenticate() {
        let now = Utc::now();
        let secret = Secret::generate();
        let mut s = crate::testkit::subscription();
        s.signing_keys = vec![crate::subscription::SigningKey { secret: secret.clone(), expires_at: None }];
        let body = br#"{"webhook_id":"x"}"#;
        let ts = now.timestamp();
        let sig = sign(&secret, "ack_1", ts, body);
        let h = |ts: &str, sig: &str| (ts.to_string(), sig.to_string());
        let run = |(ts, sig): (String, String), body: &[u8]| {
            authenticate(&s, SignedHeaders { id: "ack_1", timestamp: &ts, signature: &sig }, body, now)
        };
        assert!(run(h(&ts.to_string(), &sig), body).is_ok());
        assert_eq!(run(h(&ts.to_string(), &sig), b"{}"), Err(VerifyError::NoMatchingSignature));
        let other = sign(&Secret::generate(), "ack_1", ts, body);
        assert_eq!(run(h(&ts.to_string(), &other), body), Err(VerifyError::NoMatchingSignature));
        let old = ts - SIGNATURE_TOLERANCE_SECS - 1;
        let old_sig = sign(&secret, "ack_1", old, body);
        assert_eq!(run(h(&old.to_string(), &old_sig), body), Err(VerifyError::TimestampOutOfTolerance));
        assert_eq!(run(h(&ts.to_string(), ""), body), Err(VerifyError::MissingHeader("webhook-signature")));
    }
}
