//! Producer envelopes: detection, validation and normalization.
//!
//! Hookline accepts every producer format its seed contracts show, exactly as
//! they show it (DESIGN "Producer formats"):
//!
//! | format | shape | seed |
//! | --- | --- | --- |
//! | [`Format::Native`] | `{id?, type, data, tenant_id?, partition_key?, occurred_at?, trace_id?, producer?}` | Hookline's own |
//! | [`Format::ChangeFeed`] | `{id, entity_type, entity_id, change_type, published_at, payload}` | 000 change-feed contract |
//! | [`Format::DomainEvent`] | `{eventId, schemaVersion, eventType, occurredAt, tenantId, producer{service, instanceId}, correlationId, sequence{partitionKey, recordVersion}, payload}` | 001 domain events |
//! | [`Format::Contract`] | `{eventId, eventType, version, occurredAt, traceId, producer, idempotencyKey, riskFlags?, payload}` | 003 event contract v1 |
//!
//! [`normalize`] reduces one envelope to a [`Normalized`] record: the fields
//! Hookline routes and reports on, plus the body to store and deliver. The body
//! is the producer's original bytes, untouched, unless a value sat under a key
//! named as sensitive (DESIGN invariant 7); then only those values are
//! replaced by `"[REDACTED]"` and everything else (key order, whitespace,
//! number spelling) is kept byte for byte.
//!
//! Everything here is pure: no I/O, no clock, no randomness. Every error is an
//! [`EnvelopeError`] whose message names the problem and the field, because it
//! goes straight back to the producer in a `400`.
//!
//! Unknown extra fields are never rejected: the contracts allow backward
//! compatible additions (seed 003 §2.3 and §10).

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Longest event type Hookline accepts, in characters, for every format, so
/// that types fit routing patterns and storage keys.
pub const MAX_EVENT_TYPE_LEN: usize = 100;

/// Longest producer id Hookline accepts, in bytes of UTF-8: the event id
/// (native and change-feed `id`, `eventId`), the tenant (`tenant_id`,
/// `tenantId`, and a subscription's `tenant_id`) and the trace id
/// (`trace_id`, `correlationId`, `traceId`).
///
/// One limit for both backends, chosen to fit the tightest store key with
/// room to spare: the event id is the DynamoDB Events table's partition key
/// (at most 2,048 bytes) and the Sagas table's partition key (`event_id`);
/// every other key (saga, webhook, dead-letter ids, and the stored id of a
/// tenant's event) is a fixed-length hash, so the producer's id is the only
/// unbounded one. 256 bytes is far above real ids (UUIDs are 36, ULIDs 26,
/// W3C trace ids 32) and keeps a log line that names an event short.
pub const MAX_ID_BYTES: usize = 256;

/// The string that replaces the value of a sensitive field in a stored body.
pub const REDACTED: &str = "[REDACTED]";

/// Key names whose values are never stored (DESIGN invariant 7), in their
/// normalized spelling: ASCII lower case with `_` and `-` removed. A key is
/// sensitive when its normalized spelling equals one of these exactly, so
/// `api_key`, `Api-Key` and `APIKEY` are sensitive but `idempotencyKey` and
/// `tokenCount` are not.
pub const SENSITIVE_KEYS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "clientsecret",
    "token",
    "accesstoken",
    "refreshtoken",
    "apikey",
    "authorization",
    "privatekey",
    "creditcard",
    "cardnumber",
    "cvv",
    "ssn",
];

/// The `change_type` values the change-feed contract defines (seed 000 §4).
pub const CHANGE_TYPES: &[&str] = &["created", "updated", "deleted", "merged"];

/// Producer envelope formats.
///
/// Serialized (and parsed by [`FromStr`]) as `native`, `change-feed`,
/// `domain-event` and `contract`, the names `?format=` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Hookline's own envelope: `{id?, type, data, ...}`.
    Native,
    /// The change-feed contract of seed 000 (`entity_type`, `change_type`, ...).
    ChangeFeed,
    /// The domain / integration event envelope of seed 001 (`schemaVersion`, `sequence`, ...).
    DomainEvent,
    /// The event contract v1 of seed 003 (`version`, `traceId`, `idempotencyKey`, ...).
    Contract,
}

impl Format {
    /// Every format, in the order auto-detection and error messages list them.
    pub const ALL: [Format; 4] = [
        Format::Native,
        Format::ChangeFeed,
        Format::DomainEvent,
        Format::Contract,
    ];

    /// The format's wire name: `native`, `change-feed`, `domain-event` or `contract`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Format::Native => "native",
            Format::ChangeFeed => "change-feed",
            Format::DomainEvent => "domain-event",
            Format::Contract => "contract",
        }
    }
}

/// Shows the wire name, so a format reads the same in logs and messages as in `?format=`.
impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses a wire name. Case and surrounding whitespace are ignored and `_`
/// counts as `-` (so `change_feed` and `Change-Feed` work); anything else is
/// [`EnvelopeError::UnknownFormat`] carrying the name as given.
impl FromStr for Format {
    type Err = EnvelopeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase().replace('_', "-");
        Format::ALL
            .into_iter()
            .find(|f| f.as_str() == wanted)
            .ok_or_else(|| EnvelopeError::UnknownFormat(s.to_string()))
    }
}

/// One producer event reduced to the fields Hookline routes and reports on.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalized {
    /// The producer's own id when the envelope has one (native `id` is optional;
    /// every other format requires it). Ids are opaque: any non-blank string.
    pub id: Option<String>,
    /// The routing type: native `type`, `{entity_type}.{change_type}` for the
    /// change feed, `eventType` otherwise.
    pub event_type: String,
    /// The tenant (native `tenant_id`, domain-event `tenantId`).
    pub tenant_id: Option<String>,
    /// The ordering key (native `partition_key`, change-feed
    /// `{entity_type}:{entity_id}`, domain-event `sequence.partitionKey`).
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
}

impl EnvelopeError {
    /// The dotted path of the offending field, for the `field` member of an API
    /// error; `None` when the error is not about one field.
    pub fn field(&self) -> Option<&str> {
        match self {
            EnvelopeError::MissingField { field } | EnvelopeError::InvalidField { field, .. } => {
                Some(field)
            }
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
            EnvelopeError::UnknownFormat(_) => "unknown_format",
            EnvelopeError::Undetectable => "unknown_envelope",
        }
    }

    /// Shorthand for [`EnvelopeError::MissingField`].
    fn missing(field: impl Into<String>) -> Self {
        EnvelopeError::MissingField {
            field: field.into(),
        }
    }

    /// Shorthand for [`EnvelopeError::InvalidField`].
    fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        EnvelopeError::InvalidField {
            field: field.into(),
            reason: reason.into(),
        }
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
        Format::Native => native(obj, default_type, default_producer)?,
        Format::ChangeFeed => change_feed(obj, default_producer)?,
        Format::DomainEvent => domain_event(obj)?,
        Format::Contract => contract(obj)?,
    };
    check_producer_text(&fields, format)?;

    let (body, redacted) = match redact_valid(raw) {
        Some((body, paths)) => (body, paths),
        None => (raw.to_vec(), Vec::new()),
    };

    Ok(Normalized {
        id: fields.id,
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

/// Guesses the format of an envelope from its top-level keys; `None` when no
/// format's distinguishing keys are present.
///
/// In order: `entity_type` and `change_type` → change-feed; `eventId` or
/// `eventType` with any of `schemaVersion`, `sequence`, `tenantId`,
/// `correlationId` → domain-event; `eventId` or `eventType` with any of
/// `idempotencyKey`, `traceId`, `version`, `riskFlags` → contract; `type` or
/// `data` → native. Detection only picks the format; validation then reports
/// what that format is missing (so seed 003's outbound webhook example, which
/// has `traceId` and `version`, is read as a contract envelope and refused for
/// its missing `producer`).
pub fn detect_format(obj: &Map<String, Value>) -> Option<Format> {
    let has = |k: &str| obj.contains_key(k);
    let any = |ks: &[&str]| ks.iter().any(|k| has(k));
    let event_like = any(&["eventId", "eventType"]);
    if has("entity_type") && has("change_type") {
        Some(Format::ChangeFeed)
    } else if event_like && any(&["schemaVersion", "sequence", "tenantId", "correlationId"]) {
        Some(Format::DomainEvent)
    } else if event_like && any(&["idempotencyKey", "traceId", "version", "riskFlags"]) {
        Some(Format::Contract)
    } else if any(&["type", "data"]) {
        Some(Format::Native)
    } else {
        None
    }
}

/// Whether an object key names a sensitive value: its spelling, in ASCII
/// lower case with `_` and `-` removed, is exactly one of [`SENSITIVE_KEYS`].
/// Allocation-free because it runs on every key of every ingested body.
pub fn is_sensitive_key(key: &str) -> bool {
    let mut buf = [0u8; 16];
    let mut n = 0;
    for b in key.bytes() {
        if b == b'_' || b == b'-' {
            continue;
        }
        if n == buf.len() {
            return false;
        }
        buf[n] = b.to_ascii_lowercase();
        n += 1;
    }
    SENSITIVE_KEYS.iter().any(|k| k.as_bytes() == &buf[..n])
}

/// Replaces the value of every sensitive key (see [`is_sensitive_key`]) at any
/// depth of a JSON document with `"[REDACTED]"`, keeping every other byte.
///
/// Returns the body to store and the paths redacted; the body borrows `raw`
/// when nothing was redacted. Values that hold no secret (`null`, `""`, or
/// already `"[REDACTED]"`) are left alone. Duplicate keys are all redacted,
/// not only the one a JSON parser would keep.
///
/// # Errors
///
/// [`EnvelopeError::MalformedJson`] if `raw` is not JSON.
pub fn redact_sensitive(raw: &[u8]) -> Result<(Cow<'_, [u8]>, Vec<String>), EnvelopeError> {
    serde_json::from_slice::<serde::de::IgnoredAny>(raw).map_err(malformed)?;
    Ok(match redact_valid(raw) {
        Some((body, paths)) => (Cow::Owned(body), paths),
        None => (Cow::Borrowed(raw), Vec::new()),
    })
}

// ---------------------------------------------------------------------------
// Per-format validation
// ---------------------------------------------------------------------------

/// The routed fields one format yields, before the body is attached.
#[derive(Debug, Default)]
struct Fields {
    /// See [`Normalized::id`].
    id: Option<String>,
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

/// Native envelope: `type` (or the EventBridge default) and `data` required;
/// `id`, `tenant_id`, `partition_key`, `trace_id`, `producer` optional
/// non-blank strings and `occurred_at` an optional RFC 3339 timestamp (`null`
/// counts as absent for all of them). `data` may be any JSON value, `null`
/// included: only its presence is required.
fn native(
    obj: &Map<String, Value>,
    default_type: Option<&str>,
    default_producer: Option<&str>,
) -> Result<Fields, EnvelopeError> {
    let o = Obj::root(obj);
    let event_type = match o.opt_str("type")? {
        Some(t) => {
            check_native_type("type", t)?;
            t.to_string()
        }
        None => match default_type {
            Some(t) => {
                check_native_type("detail-type", t)?;
                t.to_string()
            }
            None => return Err(EnvelopeError::missing("type")),
        },
    };
    o.required("data")?;
    Ok(Fields {
        id: o.opt_str("id")?.map(str::to_string),
        event_type,
        tenant_id: o.opt_str("tenant_id")?.map(str::to_string),
        partition_key: o.opt_str("partition_key")?.map(str::to_string),
        sequence: None,
        trace_id: o.opt_str("trace_id")?.map(str::to_string),
        producer: o
            .opt_str("producer")?
            .or(default_producer)
            .map(str::to_string),
        occurred_at: o.opt_timestamp("occurred_at")?,
    })
}

/// Change-feed envelope (seed 000 §2): `id, entity_type, entity_id,
/// change_type, published_at, payload`, all required.
///
/// * `entity_type` is one or more of `A-Z a-z 0-9 _ -` (it becomes part of the
///   routing type `{entity_type}.{change_type}`, at most
///   [`MAX_EVENT_TYPE_LEN`] long), `change_type` one of [`CHANGE_TYPES`]
///   (lower case, exactly).
/// * The payload is checked against seed 000 §3, which calls these fields
///   mandatory (必備欄位) for both entity types and the merged snapshot, so
///   subscribers can rely on them: `actor` a non-blank string, `diff` an object,
///   `recorded_at` an RFC 3339 timestamp, and at least one of `before` / `after`
///   present as an object (`null` counts as absent, so a `created` event may
///   send `"before": null`).
fn change_feed(
    obj: &Map<String, Value>,
    default_producer: Option<&str>,
) -> Result<Fields, EnvelopeError> {
    let o = Obj::root(obj);
    o.require_all(&[
        "id",
        "entity_type",
        "entity_id",
        "change_type",
        "published_at",
        "payload",
    ])?;
    let id = o.req_str("id")?;
    let entity_type = o.req_str("entity_type")?;
    if let Some(c) = entity_type
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(EnvelopeError::invalid(
            "entity_type",
            format!(
                "contains {}, which is not allowed; use only letters, digits, `_` and `-` (e.g. UserProfile)",
                show_char(c)
            ),
        ));
    }
    let entity_id = o.req_str("entity_id")?;
    let change_type = o.req_str("change_type")?;
    if !CHANGE_TYPES.contains(&change_type) {
        return Err(EnvelopeError::invalid(
            "change_type",
            format!(
                "must be one of created, updated, deleted, merged; got {}",
                show(change_type)
            ),
        ));
    }
    let published_at = o.req_timestamp("published_at")?;

    let payload = o.req_object("payload")?;
    payload.require_all(&["actor", "diff", "recorded_at"])?;
    payload.req_str("actor")?;
    payload.req_object("diff")?;
    payload.req_timestamp("recorded_at")?;
    let before = payload.opt_object("before")?;
    let after = payload.opt_object("after")?;
    if before.is_none() && after.is_none() {
        return Err(EnvelopeError::missing("payload.after"));
    }

    let event_type = format!("{entity_type}.{change_type}");
    if event_type.len() > MAX_EVENT_TYPE_LEN {
        return Err(EnvelopeError::invalid(
            "entity_type",
            format!(
                "is too long: `{{entity_type}}.{{change_type}}` must be at most {MAX_EVENT_TYPE_LEN} characters"
            ),
        ));
    }
    Ok(Fields {
        id: Some(id.to_string()),
        partition_key: Some(format!("{entity_type}:{entity_id}")),
        event_type,
        tenant_id: None,
        sequence: None,
        trace_id: None,
        producer: default_producer.map(str::to_string),
        occurred_at: Some(published_at),
    })
}

/// Domain-event envelope (seed 001 §1.3): every field required.
/// `schemaVersion` is a positive integer, `eventType` PascalCase
/// (`^[A-Z][A-Za-z0-9]*$`, at most [`MAX_EVENT_TYPE_LEN`]), `occurredAt` RFC
/// 3339, `producer` an object with non-blank `service` and `instanceId`,
/// `sequence` an object with non-blank `partitionKey` and `recordVersion`
/// (opaque: the seed's examples use `"..."`), `payload` an object. Ids
/// (`eventId`, `tenantId`, `correlationId`) are opaque non-blank strings, so
/// the seed's `"uuid"` placeholders pass.
fn domain_event(obj: &Map<String, Value>) -> Result<Fields, EnvelopeError> {
    let o = Obj::root(obj);
    o.require_all(&[
        "eventId",
        "schemaVersion",
        "eventType",
        "occurredAt",
        "tenantId",
        "producer",
        "correlationId",
        "sequence",
        "payload",
    ])?;
    let id = o.req_str("eventId")?;
    o.req_positive_int("schemaVersion")?;
    let event_type = o.req_str("eventType")?;
    check_pascal_type("eventType", event_type)?;
    let occurred_at = o.req_timestamp("occurredAt")?;
    let tenant = o.req_str("tenantId")?;
    let producer = o.req_object("producer")?;
    let service = producer.req_str("service")?;
    producer.req_str("instanceId")?;
    let correlation = o.req_str("correlationId")?;
    let sequence = o.req_object("sequence")?;
    let partition_key = sequence.req_str("partitionKey")?;
    let record_version = sequence.req_str("recordVersion")?;
    o.req_object("payload")?;
    Ok(Fields {
        id: Some(id.to_string()),
        event_type: event_type.to_string(),
        tenant_id: Some(tenant.to_string()),
        partition_key: Some(partition_key.to_string()),
        sequence: Some(record_version.to_string()),
        trace_id: Some(correlation.to_string()),
        producer: Some(service.to_string()),
        occurred_at: Some(occurred_at),
    })
}

/// Contract-v1 envelope (seed 003 §5): `eventId, eventType, version,
/// occurredAt, traceId, producer, idempotencyKey, payload` required,
/// `riskFlags` an optional array of strings (`null` counts as absent).
/// `eventType` is lower-case dotted `domain.action`
/// (`^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$`, at most [`MAX_EVENT_TYPE_LEN`]; seed
/// 003 itself uses `task.step.updated` and `task.succeeded.v2`), `version` a
/// positive integer, `payload` an object.
fn contract(obj: &Map<String, Value>) -> Result<Fields, EnvelopeError> {
    let o = Obj::root(obj);
    o.require_all(&[
        "eventId",
        "eventType",
        "version",
        "occurredAt",
        "traceId",
        "producer",
        "idempotencyKey",
        "payload",
    ])?;
    let id = o.req_str("eventId")?;
    let event_type = o.req_str("eventType")?;
    check_dotted_type("eventType", event_type)?;
    o.req_positive_int("version")?;
    let occurred_at = o.req_timestamp("occurredAt")?;
    let trace = o.req_str("traceId")?;
    let producer = o.req_str("producer")?;
    o.req_str("idempotencyKey")?;
    match obj.get("riskFlags") {
        None | Some(Value::Null) => {}
        Some(Value::Array(flags)) => {
            for (i, flag) in flags.iter().enumerate() {
                if !flag.is_string() {
                    return Err(EnvelopeError::invalid(
                        format!("riskFlags[{i}]"),
                        format!("expected a string, got {}", kind(flag)),
                    ));
                }
            }
        }
        Some(other) => {
            return Err(EnvelopeError::invalid(
                "riskFlags",
                format!("expected an array of strings, got {}", kind(other)),
            ))
        }
    }
    o.req_object("payload")?;
    Ok(Fields {
        id: Some(id.to_string()),
        event_type: event_type.to_string(),
        tenant_id: None,
        partition_key: None,
        sequence: None,
        trace_id: Some(trace.to_string()),
        producer: Some(producer.to_string()),
        occurred_at: Some(occurred_at),
    })
}

// ---------------------------------------------------------------------------
// Producer text rules: ids, header values, log lines
// ---------------------------------------------------------------------------

/// Why a producer-supplied id or header value is refused; the `Display` text
/// is the reason part of an [`EnvelopeError::InvalidField`] (or of a
/// subscription's header error) and never contains a raw control character.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// Longer than the limit.
    #[error("is {len} bytes long; the maximum is {max} bytes")]
    TooLong {
        /// Bytes given (UTF-8).
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A character the value may not hold.
    #[error("contains {shown} at byte {at}; {rule}")]
    Forbidden {
        /// The character, quoted and escaped.
        shown: String,
        /// Its byte offset in the value.
        at: usize,
        /// What the value may hold.
        rule: &'static str,
    },
    /// Leading or trailing space or tab, which HTTP strips from a header value.
    #[error("must not start or end with a space or tab (HTTP strips them from header values)")]
    EdgeWhitespace,
}

/// What an id may hold, for [`TextError::Forbidden`].
const ID_RULE: &str = "ids are printable text (no control, line-separator or bidirectional-formatting characters)";

/// What a header value may hold, for [`TextError::Forbidden`].
const HEADER_RULE: &str =
    "the value is sent in an HTTP header, which takes visible ASCII, space and tab only";

/// Characters that can break or disguise a log line or a terminal: every
/// control character (C0, DEL, C1, so CR, LF and NUL), the Unicode line and
/// paragraph separators, and the bidirectional-formatting characters that
/// reorder how text is displayed.
pub fn is_unprintable(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

/// Checks a producer id (event id, tenant): at most [`MAX_ID_BYTES`] bytes
/// of printable text (see [`is_unprintable`]). Blank ids are refused earlier
/// by the envelope rules. Any other character is allowed (`/`, `%`, `?`,
/// `#`, spaces, non-ASCII): the API's paths take an id percent-encoded.
///
/// # Errors
///
/// [`TextError::TooLong`] or [`TextError::Forbidden`].
pub fn check_id(s: &str) -> Result<(), TextError> {
    if s.len() > MAX_ID_BYTES {
        return Err(TextError::TooLong { len: s.len(), max: MAX_ID_BYTES });
    }
    match s.char_indices().find(|(_, c)| is_unprintable(*c)) {
        Some((at, c)) => Err(TextError::Forbidden { shown: show_char(c), at, rule: ID_RULE }),
        None => Ok(()),
    }
}

/// Checks a value Hookline sends in an HTTP header (a trace id, a
/// subscription's custom header value): visible ASCII (`!` to `~`), with
/// spaces and tabs inside but not at either end (RFC 9110 §5.5
/// `field-value`). Non-ASCII (RFC 9110's obsolete `obs-text`) is refused:
/// receivers cannot read it reliably. No length limit here.
///
/// # Errors
///
/// [`TextError::Forbidden`] or [`TextError::EdgeWhitespace`].
pub fn check_header_value(s: &str) -> Result<(), TextError> {
    let allowed = |c: char| matches!(c, ' '..='~' | '\t');
    if let Some((at, c)) = s.char_indices().find(|(_, c)| !allowed(*c)) {
        return Err(TextError::Forbidden { shown: show_char(c), at, rule: HEADER_RULE });
    }
    if s.starts_with([' ', '\t']) || s.ends_with([' ', '\t']) {
        return Err(TextError::EdgeWhitespace);
    }
    Ok(())
}

/// Checks a trace id: a header value ([`check_header_value`], it is sent as
/// `hookline-trace-id`) of at most [`MAX_ID_BYTES`] bytes.
///
/// # Errors
///
/// As [`check_header_value`], and [`TextError::TooLong`].
pub fn check_trace_id(s: &str) -> Result<(), TextError> {
    if s.len() > MAX_ID_BYTES {
        return Err(TextError::TooLong { len: s.len(), max: MAX_ID_BYTES });
    }
    check_header_value(s)
}

/// A producer- or caller-supplied string made safe to put in a log line with
/// `%` (Display): every [`is_unprintable`] character is written escaped
/// (`\n`, `\u{2028}`, ...), so a CR or LF in a value cannot start a forged
/// line. Other characters are written as they are.
#[derive(Debug, Clone, Copy)]
pub struct LogSafe<'a>(pub &'a str);

impl fmt::Display for LogSafe<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if is_unprintable(c) {
                write!(f, "{}", c.escape_default())?;
            } else {
                fmt::Write::write_char(f, c)?;
            }
        }
        Ok(())
    }
}

/// The envelope field names of the id, tenant and trace id of each format
/// (empty when the format has no such field).
fn text_fields(format: Format) -> (&'static str, &'static str, &'static str) {
    match format {
        Format::Native => ("id", "tenant_id", "trace_id"),
        Format::ChangeFeed => ("id", "", ""),
        Format::DomainEvent => ("eventId", "tenantId", "correlationId"),
        Format::Contract => ("eventId", "", "traceId"),
    }
}

/// The rules every format shares for values that become store keys, log
/// fields and outgoing headers: ids and the tenant by [`check_id`], the trace
/// id by [`check_trace_id`]. (Event types are already limited to
/// `A-Z a-z 0-9 . _ : -` by every format's type rule, so they are valid
/// `hookline-event-type` values.)
fn check_producer_text(fields: &Fields, format: Format) -> Result<(), EnvelopeError> {
    let (id_field, tenant_field, trace_field) = text_fields(format);
    let invalid = |field: &str, e: TextError| EnvelopeError::invalid(field, e.to_string());
    if let Some(id) = &fields.id {
        check_id(id).map_err(|e| invalid(id_field, e))?;
    }
    if let Some(t) = &fields.tenant_id {
        check_id(t).map_err(|e| invalid(tenant_field, e))?;
    }
    if let Some(t) = &fields.trace_id {
        check_trace_id(t).map_err(|e| invalid(trace_field, e))?;
    }
    Ok(())
}

/// The producer's own id inside a stored body of `format` (native and
/// change-feed `id`, else `eventId`), to show next to the stored id: for an
/// event with a tenant they differ (see [`crate::ids::stored_event_id`]).
/// `None` when the body has none (a native envelope without `id`).
pub fn producer_id(body: &[u8], format: Format) -> Option<String> {
    let key = text_fields(format).0;
    let v: Value = serde_json::from_slice(body).ok()?;
    v.get(key)?.as_str().map(str::to_string)
}

// ---------------------------------------------------------------------------
// Event type rules
// ---------------------------------------------------------------------------

/// Native type rule: 1 to [`MAX_EVENT_TYPE_LEN`] characters from
/// `A-Z a-z 0-9 . _ : -`, the characters routing patterns are built from.
fn check_native_type(field: &str, t: &str) -> Result<(), EnvelopeError> {
    check_type_len(field, t)?;
    if let Some(c) = t
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        return Err(EnvelopeError::invalid(
            field,
            format!(
                "contains {}, which is not allowed; use only letters, digits, `.`, `_`, `:` and `-`",
                show_char(c)
            ),
        ));
    }
    Ok(())
}

/// Domain-event type rule (seed 001): PascalCase, `^[A-Z][A-Za-z0-9]*$`.
fn check_pascal_type(field: &str, t: &str) -> Result<(), EnvelopeError> {
    check_type_len(field, t)?;
    let mut chars = t.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && chars.all(|c| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(EnvelopeError::invalid(
            field,
            format!(
                "must be PascalCase (an upper-case letter, then letters and digits, e.g. RecordUpdated); got {}",
                show(t)
            ),
        ))
    }
}

/// Contract-v1 type rule (seed 003 §4.1): lower-case dotted `domain.action`,
/// `^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$`.
fn check_dotted_type(field: &str, t: &str) -> Result<(), EnvelopeError> {
    check_type_len(field, t)?;
    let mut parts = t.split('.');
    let first = parts.next().unwrap_or("");
    let first_ok = first.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && first
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    let rest: Vec<&str> = parts.collect();
    let rest_ok = !rest.is_empty()
        && rest.iter().all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        });
    if first_ok && rest_ok {
        Ok(())
    } else {
        Err(EnvelopeError::invalid(
            field,
            format!(
                "must be lower-case dotted `domain.action` (e.g. task.succeeded); got {}",
                show(t)
            ),
        ))
    }
}

/// Length rule shared by every format: non-empty, at most [`MAX_EVENT_TYPE_LEN`] characters.
fn check_type_len(field: &str, t: &str) -> Result<(), EnvelopeError> {
    if t.is_empty() {
        return Err(EnvelopeError::invalid(field, "must not be empty"));
    }
    let len = t.chars().count();
    if len > MAX_EVENT_TYPE_LEN {
        return Err(EnvelopeError::invalid(
            field,
            format!("is {len} characters long; the maximum is {MAX_EVENT_TYPE_LEN}"),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Field access with path-aware errors
// ---------------------------------------------------------------------------

/// A JSON object together with its dotted path in the envelope, so that every
/// error names the full field (`sequence.partitionKey`, not `partitionKey`).
struct Obj<'a> {
    /// The object's members.
    map: &'a Map<String, Value>,
    /// Its path from the root; empty for the envelope itself.
    path: String,
}

impl<'a> Obj<'a> {
    /// The envelope's top-level object.
    fn root(map: &'a Map<String, Value>) -> Self {
        Obj {
            map,
            path: String::new(),
        }
    }

    /// The dotted path of one member.
    fn path_of(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{}", self.path, key)
        }
    }

    /// The member `key`, or MissingField. `null` counts as present here; the
    /// typed accessors reject it with a precise reason.
    fn required(&self, key: &str) -> Result<&'a Value, EnvelopeError> {
        self.map
            .get(key)
            .ok_or_else(|| EnvelopeError::missing(self.path_of(key)))
    }

    /// Checks that every key is present before any value is validated, so an
    /// envelope read with the wrong format reports what that format is missing
    /// rather than a confusing invalid value.
    fn require_all(&self, keys: &[&str]) -> Result<(), EnvelopeError> {
        keys.iter().try_for_each(|k| self.required(k).map(|_| ()))
    }

    /// A required non-blank string.
    fn req_str(&self, key: &str) -> Result<&'a str, EnvelopeError> {
        let v = self.required(key)?;
        self.as_str(key, v)
    }

    /// An optional non-blank string; absent and `null` give `None`.
    fn opt_str(&self, key: &str) -> Result<Option<&'a str>, EnvelopeError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => self.as_str(key, v).map(Some),
        }
    }

    /// Checks that `v` (the member `key`) is a non-blank string.
    fn as_str(&self, key: &str, v: &'a Value) -> Result<&'a str, EnvelopeError> {
        match v {
            Value::String(s) if s.trim().is_empty() => Err(EnvelopeError::invalid(
                self.path_of(key),
                "must not be empty",
            )),
            Value::String(s) => Ok(s),
            other => Err(EnvelopeError::invalid(
                self.path_of(key),
                format!("expected a string, got {}", kind(other)),
            )),
        }
    }

    /// A required object, returned with its path for nested checks.
    fn req_object(&self, key: &str) -> Result<Obj<'a>, EnvelopeError> {
        let v = self.required(key)?;
        self.as_object(key, v)
    }

    /// An optional object; absent and `null` give `None`.
    fn opt_object(&self, key: &str) -> Result<Option<Obj<'a>>, EnvelopeError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => self.as_object(key, v).map(Some),
        }
    }

    /// Checks that `v` (the member `key`) is an object.
    fn as_object(&self, key: &str, v: &'a Value) -> Result<Obj<'a>, EnvelopeError> {
        match v {
            Value::Object(map) => Ok(Obj {
                map,
                path: self.path_of(key),
            }),
            other => Err(EnvelopeError::invalid(
                self.path_of(key),
                format!("expected an object, got {}", kind(other)),
            )),
        }
    }

    /// A required positive integer (1, 2, ...), e.g. `version`.
    fn req_positive_int(&self, key: &str) -> Result<u64, EnvelopeError> {
        let v = self.required(key)?;
        match v.as_u64() {
            Some(n) if n >= 1 => Ok(n),
            _ => Err(EnvelopeError::invalid(
                self.path_of(key),
                match v {
                    Value::Number(n) => format!("expected a positive integer (1, 2, ...), got {n}"),
                    other => format!("expected a positive integer, got {}", kind(other)),
                },
            )),
        }
    }

    /// A required RFC 3339 timestamp, converted to UTC.
    fn req_timestamp(&self, key: &str) -> Result<DateTime<Utc>, EnvelopeError> {
        let s = self.req_str(key)?;
        parse_timestamp(&self.path_of(key), s)
    }

    /// An optional RFC 3339 timestamp; absent and `null` give `None`.
    fn opt_timestamp(&self, key: &str) -> Result<Option<DateTime<Utc>>, EnvelopeError> {
        match self.opt_str(key)? {
            None => Ok(None),
            Some(s) => parse_timestamp(&self.path_of(key), s).map(Some),
        }
    }
}

/// Parses an RFC 3339 timestamp (`2026-01-10T12:34:56.789Z`, any offset) into UTC.
fn parse_timestamp(field: &str, s: &str) -> Result<DateTime<Utc>, EnvelopeError> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            EnvelopeError::invalid(
                field,
                format!(
                    "expected an RFC 3339 timestamp such as 2026-01-10T12:34:56.789Z, got {} ({e})",
                    show(s)
                ),
            )
        })
}

/// Names the JSON type of a value for "expected X, got Y" reasons.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Quotes a producer value for an error message: backquoted, control
/// characters escaped, cut at 64 characters so a huge value cannot bloat a 400.
pub(crate) fn show(s: &str) -> String {
    const MAX: usize = 64;
    let mut out = String::from("`");
    for (i, c) in s.chars().enumerate() {
        if i == MAX {
            out.push('…');
            break;
        }
        out.extend(c.escape_debug());
    }
    out.push('`');
    out
}

/// Quotes one offending character for an error message.
fn show_char(c: char) -> String {
    match c {
        ' ' => "a space".to_string(),
        c if is_unprintable(c) || c.is_whitespace() => format!("`{}`", c.escape_unicode()),
        c => format!("`{c}`"),
    }
}

/// Turns a serde_json error into [`EnvelopeError::MalformedJson`], keeping its
/// position as numbers and stripping it from the text.
fn malformed(e: serde_json::Error) -> EnvelopeError {
    let (line, column) = (e.line(), e.column());
    let text = e.to_string();
    let suffix = format!(" at line {line} column {column}");
    let message = text.strip_suffix(&suffix).unwrap_or(&text).to_string();
    EnvelopeError::MalformedJson {
        line,
        column,
        message,
    }
}

// ---------------------------------------------------------------------------
// Redaction (byte-preserving)
// ---------------------------------------------------------------------------

/// Redacts a body already known to be JSON: `None` when nothing needed
/// redacting (store the original bytes), else the new body and the paths.
fn redact_valid(raw: &[u8]) -> Option<(Vec<u8>, Vec<String>)> {
    let mut scan = Scanner {
        b: raw,
        pos: 0,
        path: Vec::new(),
        hits: Vec::new(),
    };
    scan.value();
    if scan.hits.is_empty() {
        return None;
    }
    let replacement = format!("\"{REDACTED}\"");
    let mut out = Vec::with_capacity(raw.len());
    let mut last = 0;
    let mut paths = Vec::with_capacity(scan.hits.len());
    for (start, end, path) in scan.hits {
        out.extend_from_slice(&raw[last..start]);
        out.extend_from_slice(replacement.as_bytes());
        last = end;
        paths.push(path);
    }
    out.extend_from_slice(&raw[last..]);
    Some((out, paths))
}

/// One step of a JSON path: an object key or an array index.
enum Seg<'a> {
    /// An object member, decoded (escapes resolved).
    Key(Cow<'a, str>),
    /// An array element, 0-based.
    Index(usize),
}

/// A minimal JSON walker over bytes that serde_json has already accepted. It
/// finds the byte spans of sensitive values so they can be replaced without
/// re-serializing (which would reorder keys and respell numbers). It never
/// panics or loops on any input: every step consumes a byte or stops.
struct Scanner<'a> {
    /// The document.
    b: &'a [u8],
    /// Current byte offset.
    pos: usize,
    /// Path from the root to the current value.
    path: Vec<Seg<'a>>,
    /// Spans `(start, end)` to replace, in document order, with their paths.
    hits: Vec<(usize, usize, String)>,
}

impl<'a> Scanner<'a> {
    /// Skips JSON whitespace.
    fn ws(&mut self) {
        while matches!(self.b.get(self.pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// Walks one value, recording sensitive members inside it.
    fn value(&mut self) {
        self.ws();
        match self.b.get(self.pos) {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => {
                self.string();
            }
            Some(_) => self.scalar(),
            None => {}
        }
    }

    /// Skips one value without looking inside it (the value is being redacted whole).
    fn skip_value(&mut self) {
        self.ws();
        match self.b.get(self.pos) {
            Some(b'"') => {
                self.string();
            }
            Some(b'{' | b'[') => {
                let mut depth = 0usize;
                while let Some(&c) = self.b.get(self.pos) {
                    match c {
                        b'"' => {
                            self.string();
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth = depth.saturating_sub(1);
                            if depth == 0 {
                                self.pos += 1;
                                return;
                            }
                        }
                        _ => {}
                    }
                    self.pos += 1;
                }
            }
            Some(_) => self.scalar(),
            None => {}
        }
    }

    /// Skips a string starting at the opening quote; returns its span, quotes included.
    fn string(&mut self) -> (usize, usize) {
        let start = self.pos;
        self.pos += 1;
        while let Some(&c) = self.b.get(self.pos) {
            match c {
                b'\\' => self.pos += 2,
                b'"' => {
                    self.pos += 1;
                    return (start, self.pos);
                }
                _ => self.pos += 1,
            }
        }
        self.pos = self.b.len();
        (start, self.pos)
    }

    /// Skips a number, `true`, `false` or `null`.
    fn scalar(&mut self) {
        while let Some(&c) = self.b.get(self.pos) {
            if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                break;
            }
            self.pos += 1;
        }
    }

    /// Walks an object, redacting sensitive members and descending into the others.
    fn object(&mut self) {
        self.pos += 1; // `{`
        loop {
            self.ws();
            match self.b.get(self.pos) {
                Some(b'}') => {
                    self.pos += 1;
                    return;
                }
                Some(b',') => {
                    self.pos += 1;
                    continue;
                }
                Some(b'"') => {}
                _ => return,
            }
            let (ks, ke) = self.string();
            let key = decode_key(self.b, ks, ke);
            self.ws();
            if self.b.get(self.pos) == Some(&b':') {
                self.pos += 1;
            }
            self.ws();
            if is_sensitive_key(&key) {
                let start = self.pos;
                self.skip_value();
                let end = self.pos.min(self.b.len());
                if !holds_no_secret(&self.b[start..end]) {
                    self.path.push(Seg::Key(key));
                    let path = render_path(&self.path);
                    self.path.pop();
                    self.hits.push((start, end, path));
                }
            } else {
                self.path.push(Seg::Key(key));
                let before = self.pos;
                self.value();
                self.path.pop();
                if self.pos == before {
                    return;
                }
            }
        }
    }

    /// Walks an array, descending into each element.
    fn array(&mut self) {
        self.pos += 1; // `[`
        let mut index = 0;
        loop {
            self.ws();
            match self.b.get(self.pos) {
                Some(b']') => {
                    self.pos += 1;
                    return;
                }
                Some(b',') => {
                    self.pos += 1;
                    index += 1;
                    continue;
                }
                None => return,
                _ => {}
            }
            self.path.push(Seg::Index(index));
            let before = self.pos;
            self.value();
            self.path.pop();
            if self.pos == before {
                return;
            }
        }
    }
}

/// Decodes an object key from its quoted bytes, borrowing when it has no escapes.
fn decode_key(b: &[u8], start: usize, end: usize) -> Cow<'_, str> {
    let quoted = &b[start..end.min(b.len())];
    let inner = quoted
        .get(1..quoted.len().saturating_sub(1))
        .unwrap_or_default();
    if !inner.contains(&b'\\') {
        if let Ok(s) = std::str::from_utf8(inner) {
            return Cow::Borrowed(s);
        }
    }
    serde_json::from_slice::<String>(quoted)
        .map(Cow::Owned)
        .unwrap_or(Cow::Borrowed(""))
}

/// Whether a sensitive key's raw value carries nothing worth hiding (`null`,
/// `""`, or an earlier redaction), so the body can stay byte-identical.
fn holds_no_secret(raw_value: &[u8]) -> bool {
    raw_value == b"null" || raw_value == b"\"\"" || raw_value == b"\"[REDACTED]\""
}

/// Renders a path like `payload.items[0]["card-number"]`: identifier-like keys
/// dotted, other keys bracketed as JSON strings, indices bracketed.
fn render_path(path: &[Seg<'_>]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
            Seg::Key(k) => {
                let plain = k
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if plain {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                } else {
                    out.push('[');
                    out.push_str(&serde_json::to_string(k.as_ref()).unwrap_or_default());
                    out.push(']');
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// A valid native envelope used as the base of many cases.
    const NATIVE: &str = r#"{"id":"evt_1","type":"order.created","data":{"n":1},"tenant_id":"t1","partition_key":"order:1","occurred_at":"2026-01-10T12:34:56.789Z","trace_id":"tr_1","producer":"shop"}"#;

    /// A valid change-feed envelope (seed 000 §2, compacted).
    const CHANGE_FEED: &str = r#"{"id":"de305d54","entity_type":"UserProfile","entity_id":"9b9a","change_type":"updated","published_at":"2025-10-19T01:23:46Z","payload":{"actor":"user:ops-001","before":{"status":"active"},"after":{"status":"active"},"diff":{},"recorded_at":"2025-10-19T01:23:45Z"}}"#;

    /// A valid domain-event envelope (seed 001 §1.3, compacted).
    const DOMAIN: &str = r#"{"eventId":"uuid","schemaVersion":1,"eventType":"RecordUpdated","occurredAt":"2026-01-10T12:34:56.789Z","tenantId":"uuid","producer":{"service":"core-platform","instanceId":"pod-xyz"},"correlationId":"uuid","sequence":{"partitionKey":"Opportunity:tenantId:recordId","recordVersion":"2026-01-10T12:34:56.789Z"},"payload":{}}"#;

    /// A valid contract-v1 envelope (seed 003 §5, compacted).
    const CONTRACT: &str = r#"{"eventId":"evt_1","eventType":"task.succeeded","version":1,"occurredAt":"2026-02-19T10:00:00Z","traceId":"req_1","producer":"worker-orchestrator","idempotencyKey":"task:1:success","riskFlags":[],"payload":{}}"#;

    /// Parses a fixture into an object so a test can change one field.
    fn obj(s: &str) -> Map<String, Value> {
        serde_json::from_str::<Value>(s)
            .unwrap()
            .as_object()
            .unwrap()
            .clone()
    }

    /// Normalizes an edited fixture.
    fn run(m: &Map<String, Value>, f: Option<Format>) -> Result<Normalized, EnvelopeError> {
        normalize(&serde_json::to_vec(m).unwrap(), f)
    }

    /// Expects an error with the given code and field.
    fn expect_err(
        r: Result<Normalized, EnvelopeError>,
        code: &str,
        field: Option<&str>,
    ) -> EnvelopeError {
        let e = r.expect_err("should be refused");
        assert_eq!(e.code(), code, "{e}");
        assert_eq!(e.field(), field, "{e}");
        e
    }

    /// Format names round-trip through as_str, FromStr, Display and serde.
    #[test]
    fn format_names() {
        for f in Format::ALL {
            assert_eq!(f.as_str().parse::<Format>().unwrap(), f);
            assert_eq!(f.to_string(), f.as_str());
            assert_eq!(
                serde_json::to_string(&f).unwrap(),
                format!("\"{}\"", f.as_str())
            );
        }
        assert_eq!("Change_Feed".parse::<Format>().unwrap(), Format::ChangeFeed);
        assert_eq!(
            " domain-event ".parse::<Format>().unwrap(),
            Format::DomainEvent
        );
        let e = "cloudevents".parse::<Format>().unwrap_err();
        assert_eq!(e, EnvelopeError::UnknownFormat("cloudevents".into()));
        assert_eq!(e.code(), "unknown_format");
        assert!(e.to_string().contains("`cloudevents`"));
        assert!(e.to_string().contains("change-feed"));
    }

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
        assert_eq!(
            n.occurred_at.unwrap().to_rfc3339(),
            "2026-01-10T12:34:56.789+00:00"
        );
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
        assert_eq!(
            (k.tenant_id, k.partition_key, k.sequence),
            (None, None, None)
        );
    }

    /// Only `type` and `data` are required in a native envelope.
    #[test]
    fn native_minimal_and_null_optionals() {
        let n = normalize(br#"{"type":"a","data":null}"#, None).unwrap();
        assert_eq!(n.id, None);
        assert_eq!(n.event_type, "a");
        let n = normalize(
            br#"{"type":"a","data":1,"id":null,"occurred_at":null}"#,
            None,
        )
        .unwrap();
        assert_eq!((n.id, n.occurred_at), (None, None));
        expect_err(
            normalize(br#"{"type":"a"}"#, None),
            "missing_field",
            Some("data"),
        );
        expect_err(
            normalize(br#"{"data":{}}"#, None),
            "missing_field",
            Some("type"),
        );
        expect_err(
            normalize(br#"{"type":"a","data":1,"id":5}"#, None),
            "invalid_field",
            Some("id"),
        );
        expect_err(
            normalize(br#"{"type":"a","data":1,"id":" "}"#, None),
            "invalid_field",
            Some("id"),
        );
    }

    /// Native types: charset and length.
    #[test]
    fn native_type_rules() {
        for ok in ["a", "order.created", "ns:Thing_v2-beta", &"x".repeat(100)] {
            let body = json!({"type": ok, "data": {}}).to_string();
            assert!(normalize(body.as_bytes(), None).is_ok(), "{ok}");
        }
        for bad in ["", "order created", "a/b", "ünïcode", &"x".repeat(101)] {
            let body = json!({"type": bad, "data": {}}).to_string();
            let e = expect_err(
                normalize(body.as_bytes(), None),
                "invalid_field",
                Some("type"),
            );
            assert!(e.to_string().starts_with("invalid field `type`: "), "{e}");
        }
        let e = normalize(br#"{"type":"a b","data":{}}"#, None).unwrap_err();
        assert!(e.to_string().contains("a space"), "{e}");
        let e = normalize(br#"{"type":7,"data":{}}"#, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid field `type`: expected a string, got a number"
        );
    }

    /// Every required field of each format, removed in turn, is named.
    #[test]
    fn each_missing_field_is_named() {
        let cases: [(&str, Format, &[&str]); 3] = [
            (
                CHANGE_FEED,
                Format::ChangeFeed,
                &[
                    "id",
                    "entity_type",
                    "entity_id",
                    "change_type",
                    "published_at",
                    "payload",
                ],
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
                &[
                    "eventId",
                    "eventType",
                    "version",
                    "occurredAt",
                    "traceId",
                    "producer",
                    "idempotencyKey",
                    "payload",
                ],
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

    /// Nested required fields are reported with their dotted path.
    #[test]
    fn nested_missing_fields() {
        for (parent, child) in [
            ("producer", "service"),
            ("producer", "instanceId"),
            ("sequence", "partitionKey"),
            ("sequence", "recordVersion"),
        ] {
            let mut m = obj(DOMAIN);
            m[parent].as_object_mut().unwrap().remove(child);
            let path = format!("{parent}.{child}");
            expect_err(run(&m, None), "missing_field", Some(&path));
        }
        for field in ["actor", "diff", "recorded_at"] {
            let mut m = obj(CHANGE_FEED);
            m["payload"].as_object_mut().unwrap().remove(field);
            let path = format!("payload.{field}");
            expect_err(run(&m, None), "missing_field", Some(&path));
        }
        let mut m = obj(CHANGE_FEED);
        let p = m["payload"].as_object_mut().unwrap();
        p.remove("after");
        p.insert("before".into(), Value::Null);
        let e = expect_err(run(&m, None), "missing_field", Some("payload.after"));
        assert_eq!(e.to_string(), "missing required field `payload.after`");
        // One snapshot is enough (a created event has no `before`).
        let mut m = obj(CHANGE_FEED);
        m["payload"].as_object_mut().unwrap().remove("before");
        assert!(run(&m, None).is_ok());
    }

    /// Wrong JSON types are InvalidField with an "expected ..." reason.
    #[test]
    fn wrong_types() {
        let mut m = obj(DOMAIN);
        m.insert("producer".into(), json!("core-platform"));
        let e = expect_err(run(&m, None), "invalid_field", Some("producer"));
        assert_eq!(
            e.to_string(),
            "invalid field `producer`: expected an object, got a string"
        );

        let mut m = obj(DOMAIN);
        m["sequence"]["recordVersion"] = json!(42);
        expect_err(
            run(&m, None),
            "invalid_field",
            Some("sequence.recordVersion"),
        );

        let mut m = obj(DOMAIN);
        m.insert("tenantId".into(), Value::Null);
        let e = expect_err(run(&m, None), "invalid_field", Some("tenantId"));
        assert!(e.to_string().contains("expected a string, got null"));

        let mut m = obj(CONTRACT);
        m.insert("payload".into(), json!([1]));
        expect_err(run(&m, None), "invalid_field", Some("payload"));

        let mut m = obj(CONTRACT);
        m.insert("riskFlags".into(), json!(["A", 2]));
        expect_err(run(&m, None), "invalid_field", Some("riskFlags[1]"));
        m.insert("riskFlags".into(), json!("A"));
        expect_err(run(&m, None), "invalid_field", Some("riskFlags"));
        m.insert("riskFlags".into(), Value::Null);
        assert!(run(&m, None).is_ok());

        for (field, bad) in [
            ("version", json!(0)),
            ("version", json!(-1)),
            ("version", json!(1.5)),
            ("version", json!("1")),
        ] {
            let mut m = obj(CONTRACT);
            m.insert(field.into(), bad);
            let e = expect_err(run(&m, None), "invalid_field", Some(field));
            assert!(e.to_string().contains("positive integer"), "{e}");
        }
        let mut m = obj(DOMAIN);
        m.insert("schemaVersion".into(), json!(0));
        expect_err(run(&m, None), "invalid_field", Some("schemaVersion"));

        let mut m = obj(CHANGE_FEED);
        m["payload"]["diff"] = json!("roles");
        expect_err(run(&m, None), "invalid_field", Some("payload.diff"));
        let mut m = obj(CHANGE_FEED);
        m["payload"]["after"] = json!([]);
        expect_err(run(&m, None), "invalid_field", Some("payload.after"));
        let mut m = obj(CHANGE_FEED);
        m["payload"]["actor"] = json!("");
        let e = expect_err(run(&m, None), "invalid_field", Some("payload.actor"));
        assert_eq!(
            e.to_string(),
            "invalid field `payload.actor`: must not be empty"
        );
    }

    /// Event types each format refuses.
    #[test]
    fn bad_event_types() {
        for bad in [
            "recordUpdated",
            "Record.Updated",
            "Record_Updated",
            "",
            "RecordUpdated!",
        ] {
            let mut m = obj(DOMAIN);
            m.insert("eventType".into(), json!(bad));
            let e = expect_err(run(&m, None), "invalid_field", Some("eventType"));
            if !bad.is_empty() {
                assert!(e.to_string().contains("PascalCase"), "{e}");
            }
        }
        for ok in [
            "task.created",
            "task.step.updated",
            "task.succeeded.v2",
            "account.delete.requested",
            "a1_b.c_2",
        ] {
            let mut m = obj(CONTRACT);
            m.insert("eventType".into(), json!(ok));
            assert_eq!(run(&m, None).unwrap().event_type, ok);
        }
        for bad in [
            "TaskCreated",
            "task_created",
            "Task.created",
            "task.",
            ".task",
            "task..created",
            "1task.created",
            "task.Created",
            "task-x.created",
        ] {
            let mut m = obj(CONTRACT);
            m.insert("eventType".into(), json!(bad));
            let e = expect_err(run(&m, None), "invalid_field", Some("eventType"));
            assert!(e.to_string().contains("domain.action"), "{e}");
        }
        let mut m = obj(CONTRACT);
        m.insert("eventType".into(), json!(format!("a.{}", "b".repeat(99))));
        expect_err(run(&m, None), "invalid_field", Some("eventType"));

        for bad in ["Updated", "UPDATED", "upserted", ""] {
            let mut m = obj(CHANGE_FEED);
            m.insert("change_type".into(), json!(bad));
            expect_err(run(&m, None), "invalid_field", Some("change_type"));
        }
        for bad in ["User Profile", "User.Profile", "User:Profile"] {
            let mut m = obj(CHANGE_FEED);
            m.insert("entity_type".into(), json!(bad));
            expect_err(run(&m, None), "invalid_field", Some("entity_type"));
        }
        for ct in CHANGE_TYPES {
            let mut m = obj(CHANGE_FEED);
            m.insert("change_type".into(), json!(ct));
            assert_eq!(
                run(&m, None).unwrap().event_type,
                format!("UserProfile.{ct}")
            );
        }
    }

    /// Bad timestamps are InvalidField naming the field and showing the value.
    #[test]
    fn bad_timestamps() {
        let cases: [(&str, &str); 5] = [
            (NATIVE, "occurred_at"),
            (CHANGE_FEED, "published_at"),
            (DOMAIN, "occurredAt"),
            (CONTRACT, "occurredAt"),
            (CHANGE_FEED, "payload.recorded_at"),
        ];
        for (base, field) in cases {
            for bad in [
                "yesterday",
                "2026-01-10",
                "2026-01-10T12:34:56",
                "2026-13-10T12:34:56Z",
                "1736512496",
            ] {
                let mut m = obj(base);
                match field.split_once('.') {
                    Some((p, c)) => m[p][c] = json!(bad),
                    None => {
                        m.insert(field.into(), json!(bad));
                    }
                }
                let e = expect_err(run(&m, None), "invalid_field", Some(field));
                let text = e.to_string();
                assert!(text.contains("RFC 3339"), "{text}");
                assert!(text.contains(&format!("`{bad}`")), "{text}");
            }
        }
        // Offsets are accepted and converted to UTC.
        let mut m = obj(DOMAIN);
        m.insert("occurredAt".into(), json!("2026-01-10T21:34:56.789+09:00"));
        assert_eq!(
            run(&m, None).unwrap().occurred_at.unwrap().to_rfc3339(),
            "2026-01-10T12:34:56.789+00:00"
        );
    }

    /// Ids (and tenants) over MAX_ID_BYTES or holding unprintable characters
    /// are refused in every format, naming the format's field; the limit
    /// itself and ids with `/`, `%`, `?`, `#`, spaces and non-ASCII pass.
    #[test]
    fn producer_ids_have_one_limit_and_charset() {
        let at_limit = "é".repeat(MAX_ID_BYTES / 2);
        let over = format!("{at_limit}x");
        for (base, id_field, tenant_field) in [
            (NATIVE, "id", Some("tenant_id")),
            (CHANGE_FEED, "id", None),
            (DOMAIN, "eventId", Some("tenantId")),
            (CONTRACT, "eventId", None),
        ] {
            let mut m = obj(base);
            m.insert(id_field.into(), json!(at_limit));
            assert_eq!(run(&m, None).unwrap().id.as_deref(), Some(at_limit.as_str()));
            m.insert(id_field.into(), json!("a/b c%d?e#fé"));
            assert!(run(&m, None).is_ok());
            m.insert(id_field.into(), json!(over));
            let e = expect_err(run(&m, None), "invalid_field", Some(id_field));
            assert!(e.to_string().contains("257 bytes long; the maximum is 256"), "{e}");
            for bad in ["a\nb", "a\rb", "a\0b", "a\u{1b}[2J", "a\u{85}b", "a\u{2028}b", "a\u{202e}b"] {
                m.insert(id_field.into(), json!(bad));
                let e = expect_err(run(&m, None), "invalid_field", Some(id_field));
                assert!(!e.to_string().chars().any(is_unprintable), "{e:?}");
            }
            if let Some(tf) = tenant_field {
                let mut m = obj(base);
                m.insert(tf.into(), json!(over));
                expect_err(run(&m, None), "invalid_field", Some(tf));
                m.insert(tf.into(), json!("acme\nINFO forged"));
                expect_err(run(&m, None), "invalid_field", Some(tf));
            }
        }
        // EventBridge ingest uses the same rules.
        expect_err(
            normalize_with_defaults(format!(r#"{{"id":"{over}","data":{{}}}}"#).as_bytes(), None, Some("t"), None),
            "invalid_field",
            Some("id"),
        );
    }

    /// Trace ids become the `hookline-trace-id` header: visible ASCII, inner
    /// spaces and tabs, at most MAX_ID_BYTES.
    #[test]
    fn trace_ids_must_be_header_values() {
        for (base, field) in [(NATIVE, "trace_id"), (DOMAIN, "correlationId"), (CONTRACT, "traceId")] {
            let mut m = obj(base);
            for ok in ["4bf92f3577b34da6a3ce929d0e0e4736", "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1", "a b\tc", "!~"] {
                m.insert(field.into(), json!(ok));
                assert_eq!(run(&m, None).unwrap().trace_id.as_deref(), Some(ok));
            }
            for bad in ["req\n2026-01-01 INFO forged", "a\r\nX-Evil: 1", "a\0", "a\u{7f}", "caf\u{e9}", " a", "a\t"] {
                m.insert(field.into(), json!(bad));
                let e = expect_err(run(&m, None), "invalid_field", Some(field));
                assert!(!e.to_string().chars().any(char::is_control), "{e:?}");
            }
            m.insert(field.into(), json!("t".repeat(MAX_ID_BYTES + 1)));
            expect_err(run(&m, None), "invalid_field", Some(field));
        }
    }

    /// Every event type a format accepts is a valid header value.
    #[test]
    fn accepted_event_types_are_header_values() {
        for t in ["order.created", "a:b_c-d.E9", "RecordUpdated", "task.succeeded.v2"] {
            assert_eq!(check_header_value(t), Ok(()));
        }
        expect_err(normalize(br#"{"type":"a\nINFO forged","data":{}}"#, None), "invalid_field", Some("type"));
    }

    /// LogSafe escapes what could forge or disguise a log line and nothing else.
    #[test]
    fn log_safe_escapes_unprintables() {
        assert_eq!(LogSafe("a\nb\r\0\u{2028}\u{202e}").to_string(), "a\\nb\\r\\u{0}\\u{2028}\\u{202e}");
        assert_eq!(LogSafe("plain id/é %20 \\n").to_string(), "plain id/é %20 \\n");
    }

    /// An unknown `?format=` is quoted with its control characters escaped.
    #[test]
    fn unknown_format_is_escaped() {
        let e = "x\nINFO forged".parse::<Format>().unwrap_err();
        assert!(!e.to_string().contains('\n'), "{e}");
        assert!(e.to_string().contains("`x\\nINFO forged`"), "{e}");
    }

    /// The producer's id is read back from a stored body.
    #[test]
    fn producer_id_from_body() {
        assert_eq!(producer_id(NATIVE.as_bytes(), Format::Native).as_deref(), Some("evt_1"));
        assert_eq!(producer_id(DOMAIN.as_bytes(), Format::DomainEvent).as_deref(), Some("uuid"));
        assert_eq!(producer_id(br#"{"type":"t","data":1}"#, Format::Native), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        /// Whatever the value, an accepted id holds no unprintable character,
        /// an accepted trace id is a valid `http` header value, and LogSafe
        /// output has no control character.
        #[test]
        fn text_rules_hold(s in "\\PC{0,8}[\\x00-\\x20\\x7f\\u{85}\\u{2028}a-z]{0,4}\\PC{0,8}") {
            if check_id(&s).is_ok() {
                prop_assert!(!s.chars().any(is_unprintable));
            }
            if check_trace_id(&s).is_ok() {
                prop_assert!(reqwest::header::HeaderValue::from_str(&s).is_ok());
                prop_assert!(s.is_ascii());
            }
            prop_assert!(!LogSafe(&s).to_string().chars().any(char::is_control));
        }
    }

    /// Malformed JSON reports serde_json's position and a readable message.
    #[test]
    fn malformed_json_position() {
        let body = b"{\n  \"type\": \"a\",\n  \"data\": {\n    \"x\": 1,,\n  }\n}";
        let e = normalize(body, None).unwrap_err();
        match &e {
            EnvelopeError::MalformedJson {
                line,
                column,
                message,
            } => {
                assert_eq!((*line, *column), (4, 12));
                assert!(!message.contains("line"), "{message}");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(
            e.to_string()
                .starts_with("malformed JSON at line 4, column 12: "),
            "{e}"
        );
        assert_eq!(e.code(), "malformed_json");
        assert_eq!(e.field(), None);

        let e = normalize(b"", None).unwrap_err();
        assert!(
            matches!(e, EnvelopeError::MalformedJson { line: 1, .. }),
            "{e:?}"
        );
        let e = normalize(br#"{"type":"a","data":{}} x"#, None).unwrap_err();
        assert_eq!(e.code(), "malformed_json");
        assert!(e.to_string().contains("trailing characters"), "{e}");
        let e = normalize(b"{\"type\":\"\xff\"}", None).unwrap_err();
        assert_eq!(e.code(), "malformed_json");
    }

    /// Non-object JSON is NotAnObject.
    #[test]
    fn non_object_bodies() {
        for body in [
            "[]",
            "[{\"type\":\"a\",\"data\":1}]",
            "\"x\"",
            "1",
            "null",
            "true",
        ] {
            let e = normalize(body.as_bytes(), None).unwrap_err();
            assert_eq!(e, EnvelopeError::NotAnObject, "{body}");
            assert_eq!(e.code(), "not_an_object");
            assert_eq!(e.to_string(), "the event envelope must be a JSON object");
        }
    }

    /// A body with no recognisable keys is Undetectable, and the message lists the formats.
    #[test]
    fn undetectable() {
        for body in [
            "{}",
            r#"{"foo":1}"#,
            r#"{"eventId":"x"}"#,
            r#"{"entity_type":"UserProfile"}"#,
        ] {
            let e = normalize(body.as_bytes(), None).unwrap_err();
            assert_eq!(e, EnvelopeError::Undetectable, "{body}");
            assert_eq!(e.code(), "unknown_envelope");
            let text = e.to_string();
            for f in Format::ALL {
                assert!(text.contains(f.as_str()), "{text}");
            }
        }
    }

    /// An explicit format is obeyed even when the body is another format, and
    /// the error names what the named format is missing.
    #[test]
    fn explicit_format_mismatch() {
        expect_err(
            normalize(CONTRACT.as_bytes(), Some(Format::Native)),
            "missing_field",
            Some("type"),
        );
        expect_err(
            normalize(NATIVE.as_bytes(), Some(Format::ChangeFeed)),
            "missing_field",
            Some("entity_type"),
        );
        expect_err(
            normalize(NATIVE.as_bytes(), Some(Format::DomainEvent)),
            "missing_field",
            Some("eventId"),
        );
        expect_err(
            normalize(DOMAIN.as_bytes(), Some(Format::Contract)),
            "missing_field",
            Some("version"),
        );
        expect_err(
            normalize(CONTRACT.as_bytes(), Some(Format::DomainEvent)),
            "missing_field",
            Some("schemaVersion"),
        );
        expect_err(
            normalize(CHANGE_FEED.as_bytes(), Some(Format::Contract)),
            "missing_field",
            Some("eventId"),
        );
        // And the matching explicit format works.
        assert_eq!(
            normalize(DOMAIN.as_bytes(), Some(Format::DomainEvent))
                .unwrap()
                .format,
            Format::DomainEvent
        );
    }

    /// Detection of partial envelopes picks the format whose keys are present,
    /// so the error is a missing field of that format.
    #[test]
    fn detection_of_partial_envelopes() {
        expect_err(
            normalize(br#"{"eventType":"RecordUpdated","schemaVersion":1}"#, None),
            "missing_field",
            Some("eventId"),
        );
        expect_err(
            normalize(br#"{"eventId":"e","traceId":"t"}"#, None),
            "missing_field",
            Some("eventType"),
        );
        expect_err(
            normalize(br#"{"entity_type":"A","change_type":"created"}"#, None),
            "missing_field",
            Some("id"),
        );
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
        let n = normalize_with_defaults(
            br#"{"data":{"x":1}}"#,
            None,
            Some("order.placed"),
            Some("com.shop"),
        )
        .unwrap();
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
        let n =
            normalize_with_defaults(NATIVE.as_bytes(), None, Some("other"), Some("other")).unwrap();
        assert_eq!(
            (n.event_type.as_str(), n.producer.as_deref()),
            ("order.created", Some("shop"))
        );
        // A bad detail-type is named as such.
        let e = expect_err(
            normalize_with_defaults(br#"{"data":{}}"#, None, Some("Order Placed"), None),
            "invalid_field",
            Some("detail-type"),
        );
        assert!(e.to_string().contains("a space"), "{e}");
        // Empty defaults count as absent.
        expect_err(
            normalize_with_defaults(br#"{"data":{}}"#, None, Some(""), Some("")),
            "missing_field",
            Some("type"),
        );
        let c = normalize_with_defaults(
            CHANGE_FEED.as_bytes(),
            None,
            Some("ignored"),
            Some("user-core"),
        )
        .unwrap();
        assert_eq!(
            (c.event_type.as_str(), c.producer.as_deref()),
            ("UserProfile.updated", Some("user-core"))
        );
        let d = normalize_with_defaults(DOMAIN.as_bytes(), None, Some("ignored"), Some("ignored"))
            .unwrap();
        assert_eq!(
            (d.event_type.as_str(), d.producer.as_deref()),
            ("RecordUpdated", Some("core-platform"))
        );
    }

    /// The sensitive-key test matches exact names after normalization only.
    #[test]
    fn sensitive_key_names() {
        for k in [
            "password",
            "PASSWORD",
            "pass_word",
            "client_secret",
            "Client-Secret",
            "api_key",
            "apiKey",
            "API-KEY",
            "Authorization",
            "access_token",
            "refreshToken",
            "private_key",
            "credit_card",
            "cardNumber",
            "CVV",
            "ssn",
            "token",
            "secret",
            "passwd",
        ] {
            assert!(is_sensitive_key(k), "{k}");
        }
        for k in [
            "idempotencyKey",
            "tokenCount",
            "secretName",
            "passwordHint",
            "key",
            "x-api-key",
            "X_API_KEY_",
            "authorizationUrl",
            "tokens",
            "",
            "ssn2",
            "résumé",
        ] {
            assert!(!is_sensitive_key(k), "{k}");
        }
    }

    /// Redaction replaces only the sensitive values, keeps every other byte, and lists the paths.
    #[test]
    fn redaction() {
        let body = br#"{
  "type": "user.created",
  "idempotencyKey": "k",
  "data": {
    "name": "Ann",
    "password": "hunter2",
    "Api-Key": {"v": "abc", "token": "t"},
    "cards": [{"card_number": 4111111111111111, "cvv": "123"}, {"note": null}],
    "weird.key": {"SSN": "078-05-1120"},
    "token": null,
    "secret": "",
    "tokenCount": 3
  }
}"#;
        let n = normalize(body, None).unwrap();
        assert_eq!(
            n.redacted,
            vec![
                "data.password",
                "data[\"Api-Key\"]",
                "data.cards[0].card_number",
                "data.cards[0].cvv",
                "data[\"weird.key\"].SSN",
            ]
        );
        let expected = String::from_utf8(body.to_vec())
            .unwrap()
            .replace("\"hunter2\"", "\"[REDACTED]\"")
            .replace("{\"v\": \"abc\", \"token\": \"t\"}", "\"[REDACTED]\"")
            .replace("4111111111111111", "\"[REDACTED]\"")
            .replace("\"123\"", "\"[REDACTED]\"")
            .replace("\"078-05-1120\"", "\"[REDACTED]\"");
        assert_eq!(String::from_utf8(n.body.clone()).unwrap(), expected);
        let v: Value = serde_json::from_slice(&n.body).unwrap();
        assert_eq!(v["data"]["password"], REDACTED);
        assert_eq!(v["data"]["tokenCount"], 3);
        assert_eq!(v["idempotencyKey"], "k");
        // Redacting an already-redacted body changes nothing.
        let again = normalize(&n.body, None).unwrap();
        assert_eq!(again.body, n.body);
        assert!(again.redacted.is_empty());
    }

    /// Escaped keys are decoded before matching; duplicate keys are all redacted.
    #[test]
    fn redaction_escapes_and_duplicates() {
        let body = br#"{"type":"a","data":{"pass\u0077ord":"x","token":"first","token":"second"}}"#;
        let n = normalize(body, None).unwrap();
        assert_eq!(
            n.redacted,
            vec!["data.password", "data.token", "data.token"]
        );
        let text = String::from_utf8(n.body).unwrap();
        assert!(
            !text.contains("\"x\"") && !text.contains("first") && !text.contains("second"),
            "{text}"
        );
        let (out, paths) = redact_sensitive(br#"[{"token":"t"}]"#).unwrap();
        assert_eq!(
            (out.as_ref(), paths),
            (
                br#"[{"token":"[REDACTED]"}]"#.as_slice(),
                vec!["[0].token".to_string()]
            )
        );
        let (out, paths) = redact_sensitive(br#"{"a":1}"#).unwrap();
        assert!(matches!(out, Cow::Borrowed(_)) && paths.is_empty());
        assert_eq!(redact_sensitive(b"{").unwrap_err().code(), "malformed_json");
    }

    /// Reference redaction on a parsed value, to check the byte scanner against.
    fn redact_value(v: &mut Value) {
        match v {
            Value::Object(m) => {
                for (k, v) in m.iter_mut() {
                    let harmless =
                        v.is_null() || v.as_str().is_some_and(|s| s.is_empty() || s == REDACTED);
                    if is_sensitive_key(k) {
                        if !harmless {
                            *v = Value::String(REDACTED.into());
                        }
                    } else {
                        redact_value(v);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(redact_value),
            _ => {}
        }
    }

    /// Arbitrary JSON values, with sensitive keys among the candidates.
    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            (-1e9f64..1e9).prop_map(|f| json!(f)),
            "[a-z \\\\\"\u{e9}\u{1F600}]{0,8}".prop_map(Value::String),
        ];
        let key = prop_oneof![
            Just("password".to_string()),
            Just("api_key".to_string()),
            Just("Token".to_string()),
            Just("idempotencyKey".to_string()),
            "[a-zA-Z_. \"\\\\-]{0,6}",
        ];
        leaf.prop_recursive(5, 64, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::vec((key.clone(), inner), 0..5)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
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

        /// Byte redaction agrees with redaction on the parsed value, in compact
        /// and pretty layouts, and leaves bodies without secrets untouched.
        #[test]
        fn redaction_matches_reference(v in arb_json(), pretty in any::<bool>()) {
            let raw = if pretty { serde_json::to_vec_pretty(&v).unwrap() } else { serde_json::to_vec(&v).unwrap() };
            let (out, paths) = redact_sensitive(&raw).unwrap();
            // Compare with the parsed text, not `v`: float parsing may round.
            let v: Value = serde_json::from_slice(&raw).unwrap();
            let mut expected = v.clone();
            redact_value(&mut expected);
            let got: Value = serde_json::from_slice(&out).unwrap();
            prop_assert_eq!(&got, &expected);
            prop_assert_eq!(paths.is_empty(), expected == v);
            if paths.is_empty() {
                prop_assert_eq!(out.as_ref(), raw.as_slice());
            }
        }
    }
}
