//! Subscriptions: who receives which events, where, and how they are signed.
//! A subscription is configuration only; it never runs pipeline logic.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::retry::RetryPolicy;
use crate::signing::Secret;

/// How long a rotated-out secret keeps signing, so subscribers can roll over.
pub const DEFAULT_ROTATION_OVERLAP: chrono::Duration = chrono::Duration::hours(24);

/// What body a subscriber receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum PayloadFormat {
    /// The producer's envelope exactly as posted (the default).
    #[default]
    Original,
    /// `{"id", "type", "timestamp", "tenant_id", "data": <original envelope>}`.
    Hookline,
}

/// One signing secret and, once rotated out, when it stops signing.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct SigningKey {
    /// The `whsec_` secret. Never logged, never returned after creation.
    #[serde(with = "secret_text")]
    pub secret: Secret,
    /// `None` for the current secret; the end of the overlap for old ones.
    pub expires_at: Option<DateTime<Utc>>,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey").field("expires_at", &self.expires_at).finish_non_exhaustive()
    }
}

mod secret_text {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::signing::Secret;

    pub fn serialize<S: Serializer>(s: &Secret, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(s.expose())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Secret, D::Error> {
        Secret::parse(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// A subscription as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subscription {
    /// `sub_…`.
    pub id: String,
    /// Where deliveries go (HTTPS, public address; see [`crate::ssrf`]).
    pub callback_url: String,
    /// Patterns: exact (`task.succeeded`), prefix (`task.*`) or all (`*`).
    pub event_types: Vec<String>,
    /// When set, only events of this tenant match.
    pub tenant_id: Option<String>,
    /// Free text for operators.
    pub description: Option<String>,
    /// Extra headers sent with every delivery.
    pub headers: BTreeMap<String, String>,
    /// Retry schedule for this subscription.
    pub retry_policy: RetryPolicy,
    /// What body the subscriber receives.
    pub payload_format: PayloadFormat,
    /// Soft switch; inactive subscriptions get nothing.
    pub active: bool,
    /// Set once the verification handshake succeeded for `callback_url`.
    pub verified: bool,
    /// Why verification last failed, if it did.
    pub verification_error: Option<String>,
    /// Current secret first, then rotated-out ones still in their overlap.
    pub signing_keys: Vec<SigningKey>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// Bumped on every change; updates are conditional on it.
    pub version: u64,
}

impl Subscription {
    /// Only active and verified subscriptions get deliveries (seed 004, rule 3).
    pub fn is_routable(&self) -> bool {
        self.active && self.verified
    }

    /// The secrets that sign a delivery made at `now`.
    pub fn signing_secrets(&self, now: DateTime<Utc>) -> Vec<&Secret> {
        self.signing_keys
            .iter()
            .filter(|k| k.expires_at.map_or(true, |e| e > now))
            .map(|k| &k.secret)
            .collect()
    }

    /// Makes `new` the current secret; the old current one keeps signing until
    /// `now + overlap`. Keys already past their end are dropped.
    pub fn rotate_secret(&mut self, new: Secret, now: DateTime<Utc>, overlap: chrono::Duration) {
        self.signing_keys.retain(|k| k.expires_at.map_or(true, |e| e > now));
        for k in &mut self.signing_keys {
            if k.expires_at.is_none() {
                k.expires_at = Some(now + overlap);
            }
        }
        self.signing_keys.insert(0, SigningKey { secret: new, expires_at: None });
    }

    /// The public view: everything but the secrets.
    pub fn to_public_json(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "callback_url": self.callback_url,
            "event_types": self.event_types,
            "tenant_id": self.tenant_id,
            "description": self.description,
            "headers": self.headers,
            "retry_policy": self.retry_policy,
            "payload_format": self.payload_format,
            "active": self.active,
            "verified": self.verified,
            "verification_error": self.verification_error,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        })
    }
}

/// A subscription field that failed validation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// The request field at fault.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    /// Names `field` and what is wrong with it.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError { field: field.into(), message: message.into() }
    }
}

/// Checks an event-type pattern: exact, `prefix.*` or `*`.
pub fn validate_pattern(p: &str) -> Result<(), String> {
    if p == "*" {
        return Ok(());
    }
    let stem = p.strip_suffix(".*").unwrap_or(p);
    if stem.is_empty() || p.len() > 100 {
        return Err(format!("'{p}' is not a valid event type pattern (1-100 characters)"));
    }
    if let Some(c) = stem.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':'))) {
        return Err(format!(
            "'{p}' contains '{c}'; patterns are an exact type, 'prefix.*' or '*'"
        ));
    }
    Ok(())
}

/// Headers a subscription may not set, because Hookline owns them.
pub fn validate_header_name(name: &str) -> Result<(), String> {
    let lower = name.to_ascii_lowercase();
    let reserved = ["host", "content-length", "content-type", "transfer-encoding", "connection", "user-agent"];
    if lower.starts_with("webhook-") || lower.starts_with("hookline-") || reserved.contains(&lower.as_str()) {
        return Err(format!("header '{name}' is set by Hookline and cannot be overridden"));
    }
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Err(format!("'{name}' is not a valid header name"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(validate_pattern("*").is_ok());
        assert!(validate_pattern("task.*").is_ok());
        assert!(validate_pattern("RecordUpdated").is_ok());
        assert!(validate_pattern("").is_err());
        assert!(validate_pattern(".*").is_err());
        assert!(validate_pattern("task.*.x").is_err());
        assert!(validate_pattern("a b").is_err());
    }

    #[test]
    fn headers() {
        assert!(validate_header_name("X-Team").is_ok());
        assert!(validate_header_name("webhook-signature").is_err());
        assert!(validate_header_name("Host").is_err());
        assert!(validate_header_name("bad header").is_err());
    }
}
