//! Subscriptions: who receives which events, where, and how they are signed.
//! A subscription is configuration only; it never runs pipeline logic.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::envelope::{check_header_value, show, TextError};
use crate::ids::SubscriptionId;
use crate::retry::RetryPolicy;

pub use crate::error::FieldError;
use crate::signing::Secret;

/// How long a rotated-out secret keeps signing, so subscribers can roll over.
pub const DEFAULT_ROTATION_OVERLAP: chrono::Duration = chrono::Duration::hours(24);

/// Most secrets signing a delivery at once: the current one and the two
/// most recently rotated out (each within its overlap). A rotation drops
/// older ones, and a subscription stored with more signs with these three
/// only, so a delivery carries at most three signatures however often the
/// secret is rotated.
pub const MAX_SIGNING_SECRETS: usize = 3;

/// What body a subscriber receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum PayloadFormat {
    /// The producer's envelope exactly as posted (the default).
    #[default]
    Original,
    /// `{"id", "type", "timestamp", "tenant_id", "data": <original envelope>}`.
    Hookline,
    /// The task-event contract's webhook body: `{eventId, eventType,
    /// version, occurredAt, traceId, data}` plus `executionProfile` and
    /// `riskFlags` when the event has them, from an event of any format
    /// ([`crate::payload`]).
    ContractWebhook,
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
    pub id: SubscriptionId,
    /// Where deliveries go (HTTPS, public address; see [`crate::ssrf`]),
    /// or a queue or bus ARN ([`crate::destination`]); empty for a
    /// pull-only subscription ([`Subscription::is_pull_only`]).
    pub callback_url: String,
    /// Patterns: exact (`task.succeeded`), prefix (`task.*`) or all (`*`).
    pub event_types: Vec<String>,
    /// When set, only events of this tenant match.
    pub tenant_id: Option<crate::ids::TenantId>,
    /// Free text for operators.
    pub description: Option<String>,
    /// Extra headers sent with every delivery.
    pub headers: BTreeMap<String, String>,
    /// Retry schedule for this subscription.
    pub retry_policy: RetryPolicy,
    /// HTTP statuses that dead-letter a delivery at once instead of being
    /// retried ([`validate_dead_letter_on`]); empty by default.
    #[serde(default)]
    pub dead_letter_on: Vec<u16>,
    /// What body the subscriber receives.
    pub payload_format: PayloadFormat,
    /// With `contract-webhook`: the only paths of `data` delivered (an
    /// allow-list, so internal fields never leave); `None`: all of `data`.
    #[serde(default)]
    pub data_fields: Option<Vec<String>>,
    /// Whether deliveries keep their partition's order ([`crate::ordering`]).
    #[serde(default)]
    pub ordering: crate::lane::Ordering,
    /// What a dead letter does to its partition (ordered subscriptions).
    #[serde(default)]
    pub on_dead_letter: crate::lane::OnDeadLetter,
    /// Most requests open at once to this subscription; `None`: the
    /// deployment's default ([`DEFAULT_MAX_IN_FLIGHT`] unless configured).
    #[serde(default)]
    pub max_in_flight: Option<u32>,
    /// Most deliveries per second (fractions allowed: 0.5 is one every two
    /// seconds); `None`: no limit.
    #[serde(default)]
    pub rate_limit: Option<f64>,
    /// Soft switch; inactive subscriptions get nothing.
    pub active: bool,
    /// Why Hookline disabled it (`gone`: a 410; `failing`: every delivery
    /// failed for the configured time; [`crate::stage::failing`]); `None`
    /// while active or when an operator switched it off.
    #[serde(default)]
    pub disabled_reason: Option<String>,
    /// When Hookline disabled it.
    #[serde(default)]
    pub disabled_at: Option<DateTime<Utc>>,
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
    /// A queue or bus destination waiting for its owner's confirmation:
    /// the SHA-256 (hex) of the token its verification message carried
    /// ([`crate::stage::verify`]); never the token itself, never shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification_token: Option<String>,
    /// Whether its open dead letters of an outage are requeued by Hookline
    /// when the outage ends: its breaker closes, or it is enabled again
    /// after Hookline disabled it ([`crate::recovery`]). Absent from
    /// subscriptions stored before it existed (false).
    #[serde(default)]
    pub auto_requeue: bool,
    /// Seconds a 2xx delivery waits for the subscriber's acknowledgement
    /// ([`crate::ack`]) before it counts as failed; `None`: a 2xx is the
    /// success (no acknowledgement required). 1 to [`MAX_ACK_TIMEOUT_SECS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_timeout_secs: Option<u32>,
    /// Whether its subscriber may also pull what is routed to it
    /// ([`crate::pull`]): routing then files its sagas in the pull index.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pull: bool,
}

/// The longest `ack_timeout_secs`: a day.
pub const MAX_ACK_TIMEOUT_SECS: u32 = 86_400;

/// Checks `ack_timeout_secs` (1 to [`MAX_ACK_TIMEOUT_SECS`]).
///
/// # Errors
///
/// A [`FieldError`] naming `ack_timeout_secs` out of its range.
pub fn validate_ack_timeout(secs: i64) -> Result<u32, FieldError> {
    u32::try_from(secs).ok().filter(|s| (1..=MAX_ACK_TIMEOUT_SECS).contains(s)).ok_or_else(|| {
        FieldError::new("ack_timeout_secs", format!("must be between 1 and {MAX_ACK_TIMEOUT_SECS}, got {secs}"))
    })
}

impl Subscription {
    /// [`Subscription::ack_timeout_secs`] as a duration: how long a 2xx
    /// waits for the subscriber's acknowledgement (`None`: it does not).
    pub fn ack_timeout(&self) -> Option<std::time::Duration> {
        self.ack_timeout_secs.map(|secs| std::time::Duration::from_secs(u64::from(secs)))
    }

    /// Only active and verified subscriptions get deliveries (docs/architecture.md#invariants, rule 5).
    pub fn is_routable(&self) -> bool {
        self.active && self.verified
    }

    /// Whether it is pull-only: `pull` set and no `callback_url` (stored
    /// empty). Nothing is pushed to it: routing files its sagas for pull,
    /// completed at once ([`crate::saga::SagaState::filed_for_pull`]), and
    /// it needs no verification handshake (docs/delivery.md#pull).
    pub fn is_pull_only(&self) -> bool {
        self.pull && self.callback_url.trim().is_empty()
    }

    /// What a subscription as it would be stored may not combine with
    /// having no callback: no `callback_url` without `pull` (nothing could
    /// reach its subscriber), and, pull-only, no `ordering: partition` (a
    /// pull is in routing order already, and lanes are released by pushes)
    /// nor `ack_timeout_secs` (nothing is pushed to acknowledge). Each a
    /// [`FieldError`] naming its field.
    pub fn destination_issues(&self) -> Vec<FieldError> {
        let mut issues = Vec::new();
        if self.callback_url.trim().is_empty() && !self.pull {
            issues.push(FieldError::new(
                "callback_url",
                "is required: an HTTPS URL, a queue or bus ARN, or none with \"pull\": true for a pull-only subscription",
            ));
        }
        if self.is_pull_only() {
            if self.ordering == crate::lane::Ordering::Partition {
                issues.push(FieldError::new(
                    "ordering",
                    "a pull-only subscription cannot be ordered by partition: a pull lists events in routing order already",
                ));
            }
            if self.ack_timeout_secs.is_some() {
                issues.push(FieldError::new(
                    "ack_timeout_secs",
                    "a pull-only subscription gets no pushes to acknowledge: leave ack_timeout_secs out",
                ));
            }
        }
        issues
    }

    /// The time between two starts under its `rate_limit`, if it has one.
    pub fn start_interval(&self) -> Option<std::time::Duration> {
        self.rate_limit.map(|r| std::time::Duration::from_secs_f64(1.0 / r))
    }

    /// The secrets that sign a delivery made at `now`: the current one
    /// first, then rotated-out ones still in their overlap, at most
    /// [`MAX_SIGNING_SECRETS`] in all.
    pub fn signing_secrets(&self, now: DateTime<Utc>) -> Vec<&Secret> {
        self.signing_keys
            .iter()
            .filter(|k| k.expires_at.is_none_or(|e| e > now))
            .take(MAX_SIGNING_SECRETS)
            .map(|k| &k.secret)
            .collect()
    }

    /// Makes `new` the current secret; the old current one keeps signing until
    /// `now + overlap`. Keys already past their end are dropped, and so are
    /// the oldest beyond [`MAX_SIGNING_SECRETS`] (they would not sign).
    pub fn rotate_secret(&mut self, new: Secret, now: DateTime<Utc>, overlap: chrono::Duration) {
        self.signing_keys.retain(|k| k.expires_at.is_none_or(|e| e > now));
        for k in &mut self.signing_keys {
            if k.expires_at.is_none() {
                k.expires_at = Some(now + overlap);
            }
        }
        self.signing_keys.insert(0, SigningKey { secret: new, expires_at: None });
        self.signing_keys.truncate(MAX_SIGNING_SECRETS);
    }

    /// The public view: everything but the secrets.
    pub fn to_public_json(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "callback_url": self.callback_url,
            "event_types": self.event_types,
            "tenant_id": self.tenant_id,
            "description": self.description,
            "headers": self.headers.iter().map(|(k, v)| (k.clone(), shown_header_value(k, v))).collect::<std::collections::BTreeMap<_, _>>(),
            "retry_policy": self.retry_policy,
            "dead_letter_on": self.dead_letter_on,
            "payload_format": self.payload_format,
            "data_fields": self.data_fields,
            "ordering": self.ordering,
            "on_dead_letter": self.on_dead_letter,
            "max_in_flight": self.max_in_flight,
            "rate_limit": self.rate_limit,
            "active": self.active,
            "disabled_reason": self.disabled_reason,
            "disabled_at": self.disabled_at,
            "verified": self.verified,
            "verification_error": self.verification_error,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "auto_requeue": self.auto_requeue,
        })
    }
}

/// Requests open at once to a subscription that sets no `max_in_flight`:
/// enough for a fast endpoint to take thousands of deliveries a second, few
/// enough that one hung endpoint holds a quarter of `hookline serve`'s 256
/// delivery slots at most.
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 64;

/// The highest `max_in_flight` a subscription may set.
pub const MAX_IN_FLIGHT_CEILING: u32 = 1_000;

/// The lowest `rate_limit`: one delivery an hour.
pub const MIN_RATE_LIMIT: f64 = 1.0 / 3600.0;

/// The highest `rate_limit`, deliveries per second, on both backends: on
/// AWS a subscription's next start is one DynamoDB item, which takes at most
/// 1,000 writes a second, and a subscription moves between backends
/// unchanged, so the API refuses more everywhere rather than hold it lower
/// on one backend without saying so.
pub const MAX_RATE_LIMIT: f64 = 1_000.0;

/// How early a start may come under a rate limit, in ms (a tenth of its
/// interval, at most 100 ms): clocks and schedulers jitter, and a start a
/// few ms early is not worth a round trip through the queue.
pub fn rate_tolerance(interval: std::time::Duration) -> i64 {
    (interval.as_millis() as i64 / 10).min(100)
}

/// Checks a subscription's `max_in_flight`: 1 to [`MAX_IN_FLIGHT_CEILING`].
pub fn validate_max_in_flight(n: u32) -> Result<u32, FieldError> {
    if (1..=MAX_IN_FLIGHT_CEILING).contains(&n) {
        Ok(n)
    } else {
        Err(FieldError::new("max_in_flight", format!("must be between 1 and {MAX_IN_FLIGHT_CEILING}, got {n}")))
    }
}

/// Checks a subscription's `rate_limit` (deliveries per second): from one
/// an hour ([`MIN_RATE_LIMIT`]) to [`MAX_RATE_LIMIT`].
pub fn validate_rate_limit(r: f64) -> Result<f64, FieldError> {
    if r.is_finite() && (MIN_RATE_LIMIT..=MAX_RATE_LIMIT).contains(&r) {
        Ok(r)
    } else {
        Err(FieldError::new(
            "rate_limit",
            format!("must be between {MIN_RATE_LIMIT:.6} (one per hour) and {MAX_RATE_LIMIT} deliveries per second, got {r}"),
        ))
    }
}

/// Most statuses a subscription's `dead_letter_on` may list.
pub const MAX_DEAD_LETTER_ON: usize = 20;

/// Checks a subscription's `dead_letter_on`, the statuses that dead-letter
/// a delivery at once: at most [`MAX_DEAD_LETTER_ON`], each an HTTP status
/// (100 to 599) that is not a 2xx (a 2xx is a delivery), no duplicates.
/// Read as any integers, so that out-of-range values get this error, not a
/// type error. 410 may be listed; it keeps its own handling (the
/// subscription is deactivated too).
///
/// # Errors
///
/// Every problem, each a [`FieldError`] naming `dead_letter_on`, or the
/// entry at fault (`dead_letter_on[1]`).
pub fn validate_dead_letter_on(statuses: &[i64]) -> Result<Vec<u16>, Vec<FieldError>> {
    if statuses.len() > MAX_DEAD_LETTER_ON {
        return Err(vec![FieldError::new(
            "dead_letter_on",
            format!("at most {MAX_DEAD_LETTER_ON} statuses, got {}", statuses.len()),
        )]);
    }
    let mut out: Vec<u16> = Vec::with_capacity(statuses.len());
    let mut issues = Vec::new();
    for (i, &s) in statuses.iter().enumerate() {
        let field = format!("dead_letter_on[{i}]");
        let Some(status) = u16::try_from(s).ok().filter(|s| (100..=599).contains(s)) else {
            issues.push(FieldError::new(&field, format!("must be an HTTP status between 100 and 599, got {s}")));
            continue;
        };
        if (200..300).contains(&status) {
            issues.push(FieldError::new(field, format!("{status} is a success: a 2xx answer is a delivery")));
            continue;
        }
        if let Some(j) = statuses[..i].iter().position(|&o| o == s) {
            issues.push(FieldError::new(field, format!("{status} is listed twice (also dead_letter_on[{j}])")));
            continue;
        }
        out.push(status);
    }
    if issues.is_empty() {
        Ok(out)
    } else {
        Err(issues)
    }
}

/// Checks a subscription's `event_types`: 1 to `max` patterns (the API
/// passes `bounds::MAX_SUBSCRIPTION_PATTERNS`, which this module may not
/// import: `bounds` reads this module's limits), each valid
/// ([`validate_pattern`]).
///
/// # Errors
///
/// Every problem, each a [`FieldError`] naming `event_types` or the
/// pattern at fault (`event_types[1]`).
pub fn validate_event_types(types: &[String], max: usize) -> Result<(), Vec<FieldError>> {
    if types.is_empty() || types.len() > max {
        return Err(vec![FieldError::new(
            "event_types",
            format!("expected a non-empty array of at most {max} patterns"),
        )]);
    }
    let issues: Vec<FieldError> = types
        .iter()
        .enumerate()
        .filter_map(|(i, p)| validate_pattern(p).err().map(|m| FieldError::new(format!("event_types[{i}]"), m)))
        .collect();
    if issues.is_empty() {
        Ok(())
    } else {
        Err(issues)
    }
}

/// Checks an event-type pattern: exact, `prefix.*` or `*`, or a wildcard
/// asking for a major version (`prefix.*.v2`, `*.v2`: versioned types,
/// [`crate::type_version::version_of`]).
pub fn validate_pattern(p: &str) -> Result<(), String> {
    if p == "*" {
        return Ok(());
    }
    if let Some((wildcard, _)) = crate::type_version::version_of(p).filter(|(w, _)| *w == "*" || w.ends_with(".*")) {
        if p.len() > 100 {
            return Err(format!("'{p}' is not a valid event type pattern (1-100 characters)"));
        }
        return if wildcard == "*" { Ok(()) } else { validate_pattern(wildcard) };
    }
    let stem = p.strip_suffix(".*").unwrap_or(p);
    if stem.is_empty() || p.len() > 100 {
        return Err(format!("'{p}' is not a valid event type pattern (1-100 characters)"));
    }
    if let Some(c) = stem.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':'))) {
        return Err(format!("'{p}' contains '{c}'; patterns are an exact type, 'prefix.*' or '*'"));
    }
    Ok(())
}

/// Header names a subscription's custom headers may not use (lower case):
/// the hop-by-hop and connection-level ones (RFC 9110 §7.6.1, §7.8; RFC
/// 9112), which would desynchronise a pooled connection or be dropped by any
/// proxy, and the ones Hookline or its HTTP client set themselves.
pub const RESERVED_HEADERS: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "http2-settings",
    "expect",
    "content-length",
    "host",
    "content-type",
    "user-agent",
    "traceparent",
    // Representation metadata without the `content-` prefix (RFC 9110
    // §8.8, RFC 9530, RFC 3230): they describe the body Hookline sends.
    "digest",
    "repr-digest",
    "want-digest",
    "want-repr-digest",
    "want-content-digest",
    "etag",
    "last-modified",
    "range",
    "accept-ranges",
];

/// Name prefixes of the headers Hookline signs and sets on every delivery
/// (`webhook-`, `hookline-`), and of the representation and content
/// headers (`content-`: `Content-Encoding`, `Content-Type`,
/// `Content-Length`, `Content-Range`, `Content-Language`,
/// `Content-Location`, `Content-Digest`, `Content-MD5`, …, RFC 9110 §8):
/// they describe the body Hookline sends, and a subscription's value would
/// misdescribe it (a `Content-Encoding: gzip` on a plain body).
pub const RESERVED_HEADER_PREFIXES: &[&str] = &["webhook-", "hookline-", "content-"];

/// Name fragments of custom headers whose values are credentials: a
/// header whose name, in ASCII lower case, holds one of them is shown as
/// [`HIDDEN_HEADER_VALUE`] after it is set (`Authorization`, `X-Api-Key`,
/// `X-Team-Token`, `Cookie`, …). Its value is sealed at rest like every
/// header value; it is sent as set.
pub const CREDENTIAL_HEADER_FRAGMENTS: &[&str] =
    &["auth", "token", "secret", "key", "password", "cookie", "signature", "credential", "session"];

/// What the API shows for the value of a credential header
/// ([`CREDENTIAL_HEADER_FRAGMENTS`]), and what it refuses as a new value (a
/// client writing back what it read would otherwise store the mask).
pub const HIDDEN_HEADER_VALUE: &str = "[hidden]";

/// Whether a custom header's value is a credential, never shown after it
/// is set ([`CREDENTIAL_HEADER_FRAGMENTS`]).
pub fn is_credential_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    CREDENTIAL_HEADER_FRAGMENTS.iter().any(|f| lower.contains(f))
}

/// A custom header's value as the API shows it: hidden for a credential
/// header ([`is_credential_header`]), else as set.
pub fn shown_header_value(name: &str, value: &str) -> String {
    if is_credential_header(name) && !value.is_empty() {
        HIDDEN_HEADER_VALUE.to_string()
    } else {
        value.to_string()
    }
}

/// Longest custom header value, in bytes.
pub const MAX_HEADER_VALUE_BYTES: usize = 1024;

/// Why a custom header of a subscription cannot be sent. The API answers it
/// with a `422` whose `field` is `headers.<name>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// A name Hookline or the connection owns ([`RESERVED_HEADERS`],
    /// [`RESERVED_HEADER_PREFIXES`]).
    #[error("header {} is set by Hookline or by the HTTP connection and cannot be set by a subscription", show(.0))]
    Reserved(String),
    /// Not an RFC 9110 token (`!#$%&'*+-.^_`|~`, digits and letters, at least one).
    #[error("{} is not a valid header name: use letters, digits and !#$%&'*+-.^_`|~ (an RFC 9110 token)", show(.0))]
    NotAToken(String),
    /// The value holds something a header cannot carry.
    #[error("the value of header {} {reason}", show(.name))]
    Value {
        /// The header.
        name: String,
        /// What is wrong with the value.
        reason: TextError,
    },
    /// The value is [`HIDDEN_HEADER_VALUE`]: what the API shows in place of
    /// a credential, written back.
    #[error("the value of header {} is {HIDDEN_HEADER_VALUE:?}, which is what Hookline shows in place of a credential: send the real value, or leave the header out of the change", show(.0))]
    Hidden(String),
    /// The value is longer than [`MAX_HEADER_VALUE_BYTES`].
    #[error("the value of header {} is {len} bytes long; the maximum is {MAX_HEADER_VALUE_BYTES}", show(.name))]
    TooLong {
        /// The header.
        name: String,
        /// Its value's length in bytes.
        len: usize,
    },
}

/// Is `b` an RFC 9110 `tchar`?
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Checks a custom header name: an RFC 9110 token that is not reserved.
///
/// # Errors
///
/// [`HeaderError::NotAToken`] or [`HeaderError::Reserved`].
pub fn check_header_name(name: &str) -> Result<(), HeaderError> {
    if name.is_empty() || !name.bytes().all(is_tchar) {
        return Err(HeaderError::NotAToken(name.to_string()));
    }
    let lower = name.to_ascii_lowercase();
    if RESERVED_HEADERS.contains(&lower.as_str()) || RESERVED_HEADER_PREFIXES.iter().any(|p| lower.starts_with(p)) {
        return Err(HeaderError::Reserved(name.to_string()));
    }
    Ok(())
}

/// Checks one custom header: a sendable name ([`check_header_name`]) and a
/// value of at most [`MAX_HEADER_VALUE_BYTES`] that a header can carry
/// ([`check_header_value`]: no CR, LF, NUL or other control character but
/// tab, no non-ASCII, no space or tab at either end). An empty value is
/// allowed.
///
/// # Errors
///
/// Any [`HeaderError`].
pub fn check_custom_header(name: &str, value: &str) -> Result<(), HeaderError> {
    check_header_name(name)?;
    if value.len() > MAX_HEADER_VALUE_BYTES {
        return Err(HeaderError::TooLong { name: name.to_string(), len: value.len() });
    }
    if value == HIDDEN_HEADER_VALUE {
        return Err(HeaderError::Hidden(name.to_string()));
    }
    check_header_value(value).map_err(|reason| HeaderError::Value { name: name.to_string(), reason })
}

/// Headers a subscription may not set, because Hookline or the connection
/// owns them, or that are not valid names; the reason as text. See
/// [`check_header_name`].
pub fn validate_header_name(name: &str) -> Result<(), String> {
    check_header_name(name).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_header_values_are_never_shown_and_their_mask_is_not_a_value() {
        for name in ["Authorization", "X-Api-Key", "X-Team-Token", "Cookie", "X-Hub-Signature", "x-client-secret"] {
            assert!(is_credential_header(name), "{name}");
            assert_eq!(shown_header_value(name, "s3cr3t"), HIDDEN_HEADER_VALUE);
        }
        for name in ["X-Team", "Accept-Language", "X-Request-Source"] {
            assert!(!is_credential_header(name), "{name}");
            assert_eq!(shown_header_value(name, "ops"), "ops");
        }
        assert_eq!(shown_header_value("Authorization", ""), "", "nothing to hide");
        assert_eq!(
            check_custom_header("Authorization", HIDDEN_HEADER_VALUE),
            Err(HeaderError::Hidden("Authorization".into()))
        );
        assert!(check_custom_header("Authorization", "Bearer x").is_ok());
    }

    #[test]
    fn dead_letter_on_lists_distinct_failure_statuses() {
        assert_eq!(validate_dead_letter_on(&[]), Ok(vec![]));
        assert_eq!(validate_dead_letter_on(&[400, 422, 410, 599, 100, 301]), Ok(vec![400, 422, 410, 599, 100, 301]));
        for (given, field, says) in [
            (vec![400, 99], "dead_letter_on[1]", "between 100 and 599, got 99"),
            (vec![600], "dead_letter_on[0]", "got 600"),
            (vec![-422], "dead_letter_on[0]", "got -422"),
            (vec![70_000], "dead_letter_on[0]", "got 70000"),
            (vec![400, 200], "dead_letter_on[1]", "2xx"),
            (vec![400, 422, 400], "dead_letter_on[2]", "also dead_letter_on[0]"),
            ((400..421).collect(), "dead_letter_on", "at most 20"),
        ] {
            let e = validate_dead_letter_on(&given).unwrap_err();
            assert_eq!(e.len(), 1, "{given:?}: {e:?}");
            assert_eq!(e[0].field, field, "{given:?}: {}", e[0]);
            assert!(e[0].message.contains(says), "{given:?}: {}", e[0]);
        }
        let every: Vec<String> =
            validate_dead_letter_on(&[99, 404, 204, 404]).unwrap_err().into_iter().map(|e| e.field).collect();
        assert_eq!(every, ["dead_letter_on[0]", "dead_letter_on[2]", "dead_letter_on[3]"], "every bad entry");
        assert!(validate_dead_letter_on(&(400..420).collect::<Vec<_>>()).is_ok(), "20 is the most");
        // Subscriptions stored before the field existed read as empty.
        let mut v = serde_json::to_value(crate::testkit::subscription()).unwrap();
        v.as_object_mut().unwrap().remove("dead_letter_on");
        let old: Subscription = serde_json::from_value(v).unwrap();
        assert!(old.dead_letter_on.is_empty());
    }

    #[test]
    fn rotations_keep_at_most_three_secrets_signing() {
        let mut sub = crate::testkit::subscription();
        sub.signing_keys = vec![SigningKey { secret: Secret::generate(), expires_at: None }];
        let now = Utc::now();
        let first = sub.signing_keys[0].secret.expose().to_string();
        for i in 0..300 {
            let at = now + chrono::Duration::seconds(i);
            sub.rotate_secret(Secret::generate(), at, chrono::Duration::hours(24));
            assert!(sub.signing_keys.len() <= MAX_SIGNING_SECRETS);
            assert!(sub.signing_secrets(at).len() <= MAX_SIGNING_SECRETS);
        }
        let signing = sub.signing_secrets(now + chrono::Duration::seconds(300));
        assert_eq!(signing.len(), MAX_SIGNING_SECRETS, "current and the two most recent within their overlap");
        assert_eq!(signing[0].expose(), sub.signing_keys[0].secret.expose(), "the current one first");
        assert!(signing.iter().all(|s| s.expose() != first), "the first secret was dropped long ago");
        // One stored with more than the cap (before it existed) signs with three.
        let mut old = sub.clone();
        old.signing_keys = (0..10)
            .map(|i| SigningKey {
                secret: Secret::generate(),
                expires_at: (i > 0).then(|| now + chrono::Duration::hours(1)),
            })
            .collect();
        assert_eq!(old.signing_secrets(now).len(), MAX_SIGNING_SECRETS);
        assert_eq!(old.signing_secrets(now)[0].expose(), old.signing_keys[0].secret.expose());
    }

    #[test]
    fn every_bad_event_type_is_named() {
        let types = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(validate_event_types(&types(&["a", "b.*", "*"]), 98).is_ok());
        let fields: Vec<String> = validate_event_types(&types(&["a", "a b", "ok", ""]), 98)
            .unwrap_err()
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(fields, ["event_types[1]", "event_types[3]"]);
        assert_eq!(validate_event_types(&[], 98).unwrap_err()[0].field, "event_types");
    }

    #[test]
    fn pull_only_needs_pull_and_takes_no_lanes_or_acknowledgements() {
        let mut sub = crate::testkit::subscription();
        assert!(!sub.is_pull_only() && sub.destination_issues().is_empty());
        sub.callback_url = String::new();
        let fields = |s: &Subscription| s.destination_issues().into_iter().map(|e| e.field).collect::<Vec<_>>();
        assert_eq!(fields(&sub), ["callback_url"], "no callback without pull");
        sub.pull = true;
        assert!(sub.is_pull_only() && fields(&sub).is_empty());
        sub.ordering = crate::lane::Ordering::Partition;
        sub.ack_timeout_secs = Some(30);
        assert_eq!(fields(&sub), ["ordering", "ack_timeout_secs"]);
        sub.callback_url = "https://a.example/x".into();
        assert!(!sub.is_pull_only() && fields(&sub).is_empty(), "a pushed one may be ordered");
    }

    #[test]
    fn patterns() {
        assert!(validate_pattern("*").is_ok());
        assert!(validate_pattern("task.*").is_ok());
        assert!(validate_pattern("RecordUpdated").is_ok());
        assert!(validate_pattern("").is_err());
        assert!(validate_pattern(".*").is_err());
        assert!(validate_pattern("task.*.x").is_err());
        assert!(validate_pattern("task.*.v2").is_ok());
        assert!(validate_pattern("*.v12").is_ok());
        assert!(validate_pattern("task.*.v1").is_err(), "version 1 is the bare type");
        assert!(validate_pattern("task.*.*.v2").is_err());
        assert!(validate_pattern("ta sk.*.v2").is_err());
        assert!(validate_pattern("a b").is_err());
    }

    #[test]
    fn headers() {
        assert!(validate_header_name("X-Team").is_ok());
        assert!(validate_header_name("webhook-signature").is_err());
        assert!(validate_header_name("Host").is_err());
        assert!(validate_header_name("bad header").is_err());
    }

    #[test]
    fn custom_headers_must_be_sendable() {
        for ok in ["X-Team", "x_team", "X.Api!#$%&'*+-^_`|~1"] {
            assert_eq!(check_custom_header(ok, "v"), Ok(()), "{ok}");
        }
        for name in [
            "Upgrade",
            "TE",
            "te",
            "Trailer",
            "Keep-Alive",
            "Proxy-Connection",
            "Connection",
            "Transfer-Encoding",
            "Content-Length",
            "Host",
            "Content-Type",
            "webhook-id",
            "Webhook-Signature",
            "hookline-trace-id",
            "HOOKLINE-X",
            "traceparent",
            "Expect",
            "User-Agent",
            "Content-Encoding",
            "content-encoding",
            "Content-Range",
            "Content-Language",
            "Content-Location",
            "Content-Digest",
            "Content-MD5",
            "Digest",
            "Repr-Digest",
            "ETag",
            "Range",
        ] {
            assert!(matches!(check_custom_header(name, "v"), Err(HeaderError::Reserved(_))), "{name}");
        }
        for name in ["", "X Team", "X:Team", ":authority", "X-Tëam", "X\nInjected", "X(1)", "X\"", "X/Y"] {
            let e = check_custom_header(name, "v").unwrap_err();
            assert!(matches!(e, HeaderError::NotAToken(_)), "{name}: {e:?}");
            assert!(!e.to_string().contains(['\n', '\r']), "{e}");
        }
        // Values: tab inside is fine, control characters, non-ASCII and edge whitespace are not.
        assert_eq!(check_custom_header("X-A", "a\tb c"), Ok(()));
        assert_eq!(check_custom_header("X-A", ""), Ok(()));
        for v in ["a\r\nX-Injected: 1", "a\nb", "a\0b", "a\u{7f}", "a\u{1b}[31m", "caf\u{e9}", " a", "a\t"] {
            let e = check_custom_header("X-A", v).unwrap_err();
            assert!(matches!(e, HeaderError::Value { .. }), "{v:?}: {e:?}");
            assert!(!e.to_string().chars().any(char::is_control), "{e}");
        }
        let long = "v".repeat(MAX_HEADER_VALUE_BYTES + 1);
        assert!(matches!(check_custom_header("X-A", &long), Err(HeaderError::TooLong { .. })));
        assert!(check_custom_header("X-A", &long[1..]).is_ok());
    }
}
