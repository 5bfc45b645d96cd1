//! Producer envelopes: detection, validation and normalization.
//!
//! Hookline accepts every producer format documented in docs/formats.md,
//! exactly as producers send it (docs/formats.md#producer-formats):
//!
//! | format | shape | documented in |
//! | --- | --- | --- |
//! | [`Format::Native`] | `{id?, type, data, tenant_id?, partition_key?, occurred_at?, trace_id?, producer?}` | docs/formats.md#native |
//! | [`Format::ChangeFeed`] | `{id, entity_type, entity_id, change_type, published_at, payload}` | docs/formats.md#change-feed |
//! | [`Format::DomainEvent`] | `{eventId, schemaVersion, eventType, occurredAt, tenantId, producer{service, instanceId}, correlationId, sequence{partitionKey, recordVersion}, payload}` | docs/formats.md#domain-event |
//! | [`Format::Contract`] | `{eventId, eventType, version, occurredAt, traceId, producer, idempotencyKey, tenantId?, riskFlags?, payload}` | docs/formats.md#contract-v1 |
//!
//! [`normalize`] reduces one envelope to a [`Normalized`] record: the fields
//! Hookline routes and reports on, plus the body to store and deliver. The body
//! is the producer's original bytes, untouched, unless a value sat under a key
//! named as sensitive (docs/formats.md#redaction); then only those values are
//! replaced by `"[REDACTED]"` and everything else (key order, whitespace,
//! number spelling) is kept byte for byte.
//!
//! Everything here is pure: no I/O, no clock, no randomness. Every error is an
//! [`EnvelopeError`] whose message names the problem and the field, because it
//! goes straight back to the producer in a `400`.
//!
//! Unknown extra fields are never rejected in any format, so producers may add
//! optional fields without breaking ingest
//! (docs/formats.md#detection-and-the-format-parameter).
//!
//! This module holds the entry points ([`normalize`],
//! [`normalize_with_defaults`]) and what they return ([`Normalized`],
//! [`EnvelopeError`]); the rest is split by concern and re-exported here, so
//! callers name everything as `envelope::X`:
//!
//! * `detect`: [`Format`], the names `?format=` takes, and [`detect_format`].
//! * `native`, `change_feed`, `domain_event`, `contract`: one file per
//!   format, each with its own rules and their tests.
//! * `fields`: reading fields with errors that name their path, and the id,
//!   header-value and log-text rules every format shares ([`check_id`],
//!   [`check_trace_id`], [`check_partition_key`], [`LogSafe`], ...).
//! * `redact`: the byte-preserving redaction of sensitive values.

mod change_feed;
mod contract;
mod detect;
mod domain_event;
mod fields;
mod native;
mod redact;
#[cfg(test)]
mod testkit;

use chrono::{DateTime, Utc};
use serde_json::Value;

use fields::check_producer_text;
use redact::redact_valid;

pub use change_feed::CHANGE_TYPES;
pub use detect::{detect_format, Format};
pub use fields::show;
pub use fields::{
    check_header_value, check_id, check_idempotency_key, check_partition_key, check_trace_id, is_unprintable,
    producer_id, LogSafe, TextError, MAX_IDEMPOTENCY_KEY_BYTES, MAX_ID_BYTES, MAX_PARTITION_KEY_BYTES,
};
pub use redact::{is_sensitive_key, redact_sensitive, REDACTED, SENSITIVE_KEYS};

/// Longest event type Hookline accepts, in characters, for every format, so
/// that types fit routing patterns and storage keys.
pub const MAX_EVENT_TYPE_LEN: usize = 100;

/// One producer event reduced to the fields Hookline routes and reports on.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalized {
    /// The producer's own id when the envelope has one (native `id` is optional;
    /// every other format requires it). Ids are opaque: any non-blank string.
    pub id: Option<String>,
    /// The key the event is deduplicated on instead of `id`, when there is
    /// one: contract `idempotencyKey`, or the `Idempotency-Key` header of
    /// `POST /v1/events` for an envelope without `id`
    /// ([`Normalized::with_idempotency_key`]). The event is then stored under
    /// [`crate::ids::idempotent_event_id`] of (tenant, key).
    pub idempotency_key: Option<String>,
    /// The routing type: native `type`, `{entity_type}.{change_type}` for the
    /// change feed, `eventType` otherwise.
    pub event_type: String,
    /// The tenant (native `tenant_id`, domain-event and contract `tenantId`).
    pub tenant_id: Option<String>,
    /// The ordering key (native `partition_key`, change-feed
    /// `{entity_type}:{entity_id}`, domain-event `sequence.partitionKey`):
    /// at most [`MAX_PARTITION_KEY_BYTES`] of printable text
    /// ([`check_partition_key`]), as it becomes store keys and a header.
    pub partition_key: Option<String>,
    /// The producer's position within the partition (domain-event
    /// `sequence.recordVersion`), an opaque string.
    pub sequence: Option<String>,
    /// The request-tracing id (native `trace_id`, domain-event
    /// `correlationId`, contract `traceId`).
    pub trace_id: Option<String>,
    /// The producing service (native `producer`, domain-event
    /// `producer.service`, contract `producer`; else the EventBridge source).
    pub producer: Option<String>,
    /// When the event happened, per the producer (`occurred_at`,
    /// `published_at` or `occurredAt`).
    pub occurred_at: Option<DateTime<Utc>>,
    /// The format the envelope was read as.
    pub format: Format,
    /// The bytes to store and deliver: the original bytes unchanged, unless
    /// redaction happened.
    pub body: Vec<u8>,
    /// Paths of the values that were redacted, e.g. `payload.user.password`
    /// or `data.cards[0]["card-number"]`; empty normally.
    pub redacted: Vec<String>,
}

/// Why an envelope was refused. The `Display` text is meant for the producer
/// (it is returned in a `400`), names the field and says what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// The body is not JSON. `line` and `column` come from the JSON parser
    /// (1-based line; column 0 means "before the first character", e.g. an
    /// empty body); `message` is the parser's description without the
    /// position, which the `Display` text adds.
    #[error("malformed JSON at line {line}, column {column}: {message}")]
    MalformedJson {
        /// Line of the first error, 1-based.
        line: usize,
        /// Column of the first error, 1-based (0 at the very start).
        column: usize,
        /// What the parser expected or found, e.g. "expected `,` or `}`".
        message: String,
    },
    /// The body is JSON but not an object (an array, a string, ...).
    #[error("the event envelope must be a JSON object")]
    NotAnObject,
    /// A field the format requires is absent; `field` is its dotted path.
    #[error("missing required field `{field}`")]
    MissingField {
        /// Dotted path of the missing field, e.g. `sequence.partitionKey`.
        field: String,
    },
    /// A field is present but has the wrong type or an unacceptable value.
    #[error("invalid field `{field}`: {reason}")]
    InvalidField {
        /// Dotted path of the field, e.g. `occurredAt` or `riskFlags[1]`.
        field: String,
        /// What is wrong with it, e.g. "expected a string, got a number".
        reason: String,
    },
    /// A field is present but not of its type (a number where a string
    /// goes, `null` for a required string): the envelope could not be read
    /// as its format (`400 invalid_type`), where [`EnvelopeError::InvalidField`]
    /// is a value of the right type breaking a rule (`422`).
    #[error("invalid field `{field}`: {reason}")]
    WrongType {
        /// Dotted path of the field, e.g. `producer` or `riskFlags[1]`.
        field: String,
        /// What was expected and found, e.g. "expected a string, got a number".
        reason: String,
    },
    /// `?format=` named a format Hookline does not know.
    /// The name is shown quoted with control characters escaped: it comes
    /// from the request's query string.
    #[error(
        "unknown envelope format {}; accepted formats: native, change-feed, domain-event, contract",
        show(.0)
    )]
    UnknownFormat(String),
    /// No format was named and the keys of the body match none.
    #[error(
        "cannot tell the envelope format; accepted formats: \
         native {{type, data, id?, ...}}, \
         change-feed {{id, entity_type, entity_id, change_type, published_at, payload}}, \
         domain-event {{eventId, schemaVersion, eventType, occurredAt, tenantId, producer, correlationId, sequence, payload}}, \
         contract {{eventId, eventType, version, occurredAt, traceId, producer, idempotencyKey, payload}}; \
         or name the format explicitly"
    )]
    Undetectable,
    /// The envelope names a tenant other than the one the producer's key is
    /// bound to ([`Normalized::bind_tenant`]); `field` is the format's tenant
    /// field (`tenant_id`, `tenantId`).
    #[error("`{field}` names another tenant than the one this key is bound to")]
    OtherTenant {
        /// The format's tenant field.
        field: String,
    },
}

impl EnvelopeError {
    /// The dotted path of the offending field, for the `field` member of an API
    /// error; `None` when the error is not about one field.
    pub fn field(&self) -> Option<&str> {
        match self {
            EnvelopeError::MissingField { field }
            | EnvelopeError::InvalidField { field, .. }
            | EnvelopeError::WrongType { field, .. }
            | EnvelopeError::OtherTenant { field } => Some(field),
            _ => None,
        }
    }

    /// A stable machine-readable code for API errors and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            EnvelopeError::MalformedJson { .. } => "malformed_json",
            EnvelopeError::NotAnObject => "not_an_object",
            EnvelopeError::MissingField { .. } => "missing_field",
            EnvelopeError::InvalidField { .. } => "invalid_field",
            EnvelopeError::WrongType { .. } => "invalid_type",
            EnvelopeError::UnknownFormat(_) => "unknown_format",
            EnvelopeError::Undetectable => "unknown_envelope",
            EnvelopeError::OtherTenant { .. } => "forbidden",
        }
    }

    /// Shorthand for [`EnvelopeError::MissingField`].
    fn missing(field: impl Into<String>) -> Self {
        EnvelopeError::MissingField { field: field.into() }
    }

    /// Shorthand for [`EnvelopeError::WrongType`]: `field` is not
    /// `expected`, it is `found`.
    fn wrong_type(field: impl Into<String>, expected: &str, found: &Value) -> Self {
        EnvelopeError::WrongType {
            field: field.into(),
            reason: format!("expected {expected}, got {}", fields::kind(found)),
        }
    }

    /// Shorthand for [`EnvelopeError::InvalidField`].
    fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        EnvelopeError::InvalidField { field: field.into(), reason: reason.into() }
    }
}

/// Detects (when `format` is None) and validates one envelope.
///
/// Equivalent to [`normalize_with_defaults`] without defaults: a native
/// envelope must carry its own `type`.
///
/// # Errors
///
/// [`EnvelopeError::MalformedJson`] if `raw` is not JSON,
/// [`EnvelopeError::NotAnObject`] if it is not an object,
/// [`EnvelopeError::Undetectable`] if no format is named and none matches, and
/// [`EnvelopeError::MissingField`] / [`EnvelopeError::InvalidField`] when the
/// envelope breaks its format's rules.
pub fn normalize(raw: &[u8], format: Option<Format>) -> Result<Normalized, EnvelopeError> {
    normalize_with_defaults(raw, format, None, None)
}

/// For events arriving via an EventBridge bus: `detail` is the envelope;
/// detail-type and source fill the type and producer where the envelope has
/// none. (Native envelopes may then omit `type`.)
///
/// * `default_type` (the EventBridge `detail-type`) is used only by a native
///   envelope without `type`; it must obey the native type rules, and a bad one
///   is reported as an invalid `detail-type`. With a default type, a body whose
///   keys match no format is read as native (so it still needs `data`).
/// * `default_producer` (the EventBridge `source`) fills `producer` for native
///   envelopes without one and for change-feed envelopes (which have none).
///
/// Empty defaults count as absent.
///
/// # Errors
///
/// As [`normalize`]; a bad `default_type` is an invalid `detail-type`.
pub fn normalize_with_defaults(
    raw: &[u8],
    format: Option<Format>,
    default_type: Option<&str>,
    default_producer: Option<&str>,
) -> Result<Normalized, EnvelopeError> {
    let default_type = default_type.filter(|s| !s.is_empty());
    let default_producer = default_producer.filter(|s| !s.is_empty());

    let value: Value = serde_json::from_slice(raw).map_err(malformed)?;
    let obj = value.as_object().ok_or(EnvelopeError::NotAnObject)?;

    let format = match format {
        Some(f) => f,
        None => match detect_format(obj) {
            Some(f) => f,
            None if default_type.is_some() => Format::Native,
            None => return Err(EnvelopeError::Undetectable),
        },
    };

    let fields = match format {
        Format::Native => native::native(obj, default_type, default_producer)?,
        Format::ChangeFeed => change_feed::change_feed(obj, default_producer)?,
        Format::DomainEvent => domain_event::domain_event(obj)?,
        Format::Contract => contract::contract(obj)?,
    };
    check_producer_text(&fields, format)?;

    let (body, redacted) = match redact_valid(raw) {
        Some((body, paths)) => (body, paths),
        None => (raw.to_vec(), Vec::new()),
    };

    Ok(Normalized {
        id: fields.id,
        idempotency_key: fields.idempotency_key,
        event_type: fields.event_type,
        tenant_id: fields.tenant_id,
        partition_key: fields.partition_key,
        sequence: fields.sequence,
        trace_id: fields.trace_id,
        producer: fields.producer,
        occurred_at: fields.occurred_at,
        format,
        body,
        redacted,
    })
}

impl Normalized {
    /// Takes an idempotency key from outside the envelope: the
    /// `Idempotency-Key` header of `POST /v1/events`
    /// (docs/formats.md#stored-ids-and-deduplication). Only an envelope
    /// without an id of its own (a native envelope without `id`) takes it,
    /// so that a producer's retry of such a post is a duplicate instead of a
    /// second event. An envelope with an id (every other format requires
    /// one) keeps deduplicating on what it carries, its id or its
    /// `idempotencyKey`, and the key is ignored. `None` changes nothing.
    pub fn with_idempotency_key(mut self, key: Option<&str>) -> Self {
        if self.id.is_none() && self.idempotency_key.is_none() {
            self.idempotency_key = key.map(str::to_string);
        }
        self
    }

    /// The event as a producer bound to `tenant` may post it (`None`: an
    /// unbound producer, anything goes): an envelope naming another tenant
    /// is refused ([`EnvelopeError::OtherTenant`], naming the format's tenant
    /// field); one naming none gets `tenant` (its stored id and routing are
    /// then those of `tenant`'s event, as if it had named it; a change-feed
    /// envelope, which has no tenant field, always does).
    ///
    /// # Errors
    ///
    /// [`EnvelopeError::OtherTenant`] for another tenant.
    pub fn bind_tenant(mut self, tenant: Option<&crate::ids::TenantId>) -> Result<Self, EnvelopeError> {
        let Some(tenant) = tenant else { return Ok(self) };
        match &self.tenant_id {
            Some(t) if t != tenant.as_str() => {
                Err(EnvelopeError::OtherTenant { field: fields::tenant_field(self.format).to_string() })
            }
            Some(_) => Ok(self),
            None => {
                self.tenant_id = Some(tenant.as_str().to_string());
                Ok(self)
            }
        }
    }
}

/// The routed fields one format yields, before the body is attached.
#[derive(Debug, Default)]
struct Fields {
    /// See [`Normalized::id`].
    id: Option<String>,
    /// See [`Normalized::idempotency_key`].
    idempotency_key: Option<String>,
    /// See [`Normalized::event_type`].
    event_type: String,
    /// See [`Normalized::tenant_id`].
    tenant_id: Option<String>,
    /// See [`Normalized::partition_key`].
    partition_key: Option<String>,
    /// See [`Normalized::sequence`].
    sequence: Option<String>,
    /// See [`Normalized::trace_id`].
    trace_id: Option<String>,
    /// See [`Normalized::producer`].
    producer: Option<String>,
    /// See [`Normalized::occurred_at`].
    occurred_at: Option<DateTime<Utc>>,
}

/// Turns a serde_json error into [`EnvelopeError::MalformedJson`], keeping its
/// position as numbers and stripping it from the text.
fn malformed(e: serde_json::Error) -> EnvelopeError {
    let (line, column) = (e.line(), e.column());
    let text = e.to_string();
    let suffix = format!(" at line {line} column {column}");
    let message = text.strip_suffix(&suffix).unwrap_or(&text).to_string();
    EnvelopeError::MalformedJson { line, column, message }
}

#[cfg(test)]
mod tests {
    use super::testkit::{expect_err, obj, run, CHANGE_FEED, CONTRACT, DOMAIN, NATIVE};
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// Each valid example is detected and mapped field by field.
    #[test]
    fn detects_and_maps_each_format() {
        let n = normalize(NATIVE.as_bytes(), None).unwrap();
        assert_eq!(n.format, Format::Native);
        assert_eq!(n.id.as_deref(), Some("evt_1"));
        assert_eq!(n.event_type, "order.created");
        assert_eq!(n.tenant_id.as_deref(), Some("t1"));
        assert_eq!(n.partition_key.as_deref(), Some("order:1"));
        assert_eq!(n.trace_id.as_deref(), Some("tr_1"));
        assert_eq!(n.producer.as_deref(), Some("shop"));
        assert_eq!(n.sequence, None);
        assert_eq!(n.occurred_at.unwrap().to_rfc3339(), "2026-01-10T12:34:56.789+00:00");
        assert_eq!(n.body, NATIVE.as_bytes());
        assert!(n.redacted.is_empty());

        let c = normalize(CHANGE_FEED.as_bytes(), None).unwrap();
        assert_eq!(c.format, Format::ChangeFeed);
        assert_eq!(c.event_type, "UserProfile.updated");
        assert_eq!(c.partition_key.as_deref(), Some("UserProfile:9b9a"));
        assert_eq!((c.tenant_id, c.trace_id, c.producer), (None, None, None));

        let d = normalize(DOMAIN.as_bytes(), None).unwrap();
        assert_eq!(d.format, Format::DomainEvent);
        assert_eq!(d.sequence.as_deref(), Some("2026-01-10T12:34:56.789Z"));
        assert_eq!(d.producer.as_deref(), Some("core-platform"));

        let k = normalize(CONTRACT.as_bytes(), None).unwrap();
        assert_eq!(k.format, Format::Contract);
        assert_eq!(k.trace_id.as_deref(), Some("req_1"));
        assert_eq!((k.tenant_id, k.partition_key, k.sequence), (None, None, None));
    }

    /// Every required field of each format, removed in turn, is named.
    #[test]
    fn each_missing_field_is_named() {
        let cases: [(&str, Format, &[&str]); 3] = [
            (
                CHANGE_FEED,
                Format::ChangeFeed,
                &["id", "entity_type", "entity_id", "change_type", "published_at", "payload"],
            ),
            (
                DOMAIN,
                Format::DomainEvent,
                &[
                    "eventId",
                    "schemaVersion",
                    "eventType",
                    "occurredAt",
                    "tenantId",
                    "producer",
                    "correlationId",
                    "sequence",
                    "payload",
                ],
            ),
            (
                CONTRACT,
                Format::Contract,
                &["eventId", "eventType", "version", "occurredAt", "traceId", "producer", "idempotencyKey", "payload"],
            ),
        ];
        for (base, format, fields) in cases {
            for field in fields {
                let mut m = obj(base);
                m.remove(*field);
                let e = expect_err(run(&m, Some(format)), "missing_field", Some(field));
                assert_eq!(e.to_string(), format!("missing required field `{field}`"));
            }
        }
        let mut m = obj(NATIVE);
        m.remove("type");
        expect_err(run(&m, Some(Format::Native)), "missing_field", Some("type"));
        let mut m = obj(NATIVE);
        m.remove("data");
        expect_err(run(&m, None), "missing_field", Some("data"));
    }

    /// Malformed JSON reports serde_json's position and a readable message.
    #[test]
    fn malformed_json_position() {
        let body = b"{\n  \"type\": \"a\",\n  \"data\": {\n    \"x\": 1,,\n  }\n}";
        let e = normalize(body, None).unwrap_err();
        match &e {
            EnvelopeError::MalformedJson { line, column, message } => {
                assert_eq!((*line, *column), (4, 12));
                assert!(!message.contains("line"), "{message}");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(e.to_string().starts_with("malformed JSON at line 4, column 12: "), "{e}");
        assert_eq!(e.code(), "malformed_json");
        assert_eq!(e.field(), None);

        let e = normalize(b"", None).unwrap_err();
        assert!(matches!(e, EnvelopeError::MalformedJson { line: 1, .. }), "{e:?}");
        let e = normalize(br#"{"type":"a","data":{}} x"#, None).unwrap_err();
        assert_eq!(e.code(), "malformed_json");
        assert!(e.to_string().contains("trailing characters"), "{e}");
        let e = normalize(b"{\"type\":\"\xff\"}", None).unwrap_err();
        assert_eq!(e.code(), "malformed_json");
    }

    /// Non-object JSON is NotAnObject.
    #[test]
    fn non_object_bodies() {
        for body in ["[]", "[{\"type\":\"a\",\"data\":1}]", "\"x\"", "1", "null", "true"] {
            let e = normalize(body.as_bytes(), None).unwrap_err();
            assert_eq!(e, EnvelopeError::NotAnObject, "{body}");
            assert_eq!(e.code(), "not_an_object");
            assert_eq!(e.to_string(), "the event envelope must be a JSON object");
        }
    }

    /// Unknown extra fields are accepted in every format.
    #[test]
    fn extra_fields_allowed() {
        for base in [NATIVE, CHANGE_FEED, DOMAIN, CONTRACT] {
            let mut m = obj(base);
            m.insert("futureField".into(), json!({"x": [1, 2]}));
            assert!(run(&m, None).is_ok());
        }
    }

    /// EventBridge defaults fill a native type and producer, and a change-feed producer.
    #[test]
    fn eventbridge_defaults() {
        let n = normalize_with_defaults(br#"{"data":{"x":1}}"#, None, Some("order.placed"), Some("com.shop")).unwrap();
        assert_eq!(
            (n.format, n.event_type.as_str(), n.producer.as_deref()),
            (Format::Native, "order.placed", Some("com.shop"))
        );
        // A body with no known keys is read as native when a default type exists.
        expect_err(
            normalize_with_defaults(br#"{"x":1}"#, None, Some("order.placed"), None),
            "missing_field",
            Some("data"),
        );
        // The envelope's own values win.
        let n = normalize_with_defaults(NATIVE.as_bytes(), None, Some("other"), Some("other")).unwrap();
        assert_eq!((n.event_type.as_str(), n.producer.as_deref()), ("order.created", Some("shop")));
        // A bad detail-type is named as such.
        let e = expect_err(
            normalize_with_defaults(br#"{"data":{}}"#, None, Some("Order Placed"), None),
            "invalid_field",
            Some("detail-type"),
        );
        assert!(e.to_string().contains("a space"), "{e}");
        // Empty defaults count as absent.
        expect_err(normalize_with_defaults(br#"{"data":{}}"#, None, Some(""), Some("")), "missing_field", Some("type"));
        let c = normalize_with_defaults(CHANGE_FEED.as_bytes(), None, Some("ignored"), Some("user-core")).unwrap();
        assert_eq!((c.event_type.as_str(), c.producer.as_deref()), ("UserProfile.updated", Some("user-core")));
        let d = normalize_with_defaults(DOMAIN.as_bytes(), None, Some("ignored"), Some("ignored")).unwrap();
        assert_eq!((d.event_type.as_str(), d.producer.as_deref()), ("RecordUpdated", Some("core-platform")));
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            // No regression files: this crate is shared and the cases are cheap.
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// normalize never panics, whatever the bytes or the format.
        #[test]
        fn normalize_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512), f in 0usize..5) {
            let format = Format::ALL.get(f).copied();
            let _ = normalize(&bytes, format);
            let _ = normalize_with_defaults(&bytes, format, Some("t"), Some("p"));
            let _ = redact_sensitive(&bytes);
        }

        /// normalize never panics on JSON-looking text either (more of it parses).
        #[test]
        fn normalize_never_panics_on_jsonish(s in "[{}\\[\\]\",:a-zA-Z0-9 \\\\._-]{0,200}") {
            let _ = normalize(s.as_bytes(), None);
            let _ = redact_sensitive(s.as_bytes());
        }
    }
}
