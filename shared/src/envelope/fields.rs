//! What every format shares: reading fields so that each error names the
//! field's full path ([`Obj`]), timestamps, the event type length limit, and
//! the rules for producer text that becomes a store key, a log field or an
//! HTTP header (ids, tenants, trace ids, partition keys), with the quoting
//! used in error messages.

use std::fmt;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::{EnvelopeError, Fields, Format, MAX_EVENT_TYPE_LEN};

/// Longest producer id Hookline accepts, in bytes of UTF-8: the event id
/// (native and change-feed `id`, `eventId`), the contract's
/// `idempotencyKey`, the tenant (`tenant_id`, `tenantId`, and a
/// subscription's `tenant_id`) and the trace id (`trace_id`,
/// `correlationId`, `traceId`).
///
/// One limit for both backends, chosen to fit the tightest store key with
/// room to spare: the event id is the DynamoDB Events table's partition key
/// (at most 2,048 bytes) and the Sagas table's partition key (`event_id`);
/// every other key (saga, webhook, dead-letter ids, and the stored id of a
/// tenant's event) is a fixed-length hash, so the producer's id is the only
/// unbounded one. 256 bytes is far above real ids (UUIDs are 36, ULIDs 26,
/// W3C trace ids 32) and keeps a log line that names an event short.
pub const MAX_ID_BYTES: usize = 256;

/// Longest partition key Hookline accepts, in bytes of UTF-8: native
/// `partition_key`, domain-event `sequence.partitionKey`, and the change
/// feed's `{entity_type}:{entity_id}` as a whole.
///
/// The same limit as ids ([`MAX_ID_BYTES`]), because a partition key ends up
/// in the same places:
///
/// - store keys, behind the tenant scope (`g`, or `t<bytes>:<tenant>`, up to
///   261 bytes with a [`MAX_ID_BYTES`] tenant): the EventsTable index
///   `by_partition` (`<scope>#<key>`) and the OrderTable's partition item
///   (`p#<scope>#<key>`) and lane entries
///   (`l#<subscription id>#<scope>#<key>`, 301 bytes before the key), all
///   DynamoDB partition keys (at most 2,048 bytes). Unchecked, a key of
///   about 2 KB failed every write of its event: a `503` on every retry, a
///   bus event in the ingest DLQ with no reason. At 256 bytes the longest
///   such key is 557 bytes, under even the 1,024-byte sort key limit;
/// - the `hookline-partition-key` header of every delivery, and log lines;
///   hence printable text, as ids ([`check_partition_key`]);
/// - the API's filters that find a partition again: `GET
///   /v1/events?partition_key=` and `POST /v1/replays` (at most 256
///   characters), so every stored partition can be listed and replayed.
///
/// Real keys are far shorter (`order:1`, `Opportunity:acme:r1`, an entity
/// type and a UUID); Kinesis caps its partition keys at 256 characters too.
pub const MAX_PARTITION_KEY_BYTES: usize = MAX_ID_BYTES;

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
    /// Nothing at all.
    #[error("must not be empty")]
    Empty,
}

/// What an id may hold, for [`TextError::Forbidden`].
const ID_RULE: &str = "ids are printable text (no control, line-separator or bidirectional-formatting characters)";

/// What a partition key may hold, for [`TextError::Forbidden`].
const PARTITION_KEY_RULE: &str = "a partition key is printable text (no control, line-separator or bidirectional-formatting characters): it is sent in the hookline-partition-key header";

/// What a header value may hold, for [`TextError::Forbidden`].
const HEADER_RULE: &str = "the value is sent in an HTTP header, which takes visible ASCII, space and tab only";

/// Longest `Idempotency-Key` header value `POST /v1/events` takes, in bytes.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 255;

/// What an `Idempotency-Key` header may hold, for [`TextError::Forbidden`].
const IDEMPOTENCY_KEY_RULE: &str = "an idempotency key is printable ASCII (space to `~`)";

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
    check_printable(s, MAX_ID_BYTES, ID_RULE)
}

/// Checks a partition key (native `partition_key`, domain-event
/// `sequence.partitionKey`, the change feed's `{entity_type}:{entity_id}`):
/// at most [`MAX_PARTITION_KEY_BYTES`] bytes of printable text (see
/// [`is_unprintable`]), the rule of ids. Both halves matter: an over-long key
/// cannot be stored as a DynamoDB key, and a control character makes the
/// `hookline-partition-key` header of every delivery invalid, so the job
/// would be deferred until the event expired, holding up its ordered lane.
/// (Every printable key is a valid `http` header value: [`is_unprintable`]
/// covers all that `HeaderValue` refuses.) Blank keys are refused earlier by
/// the envelope rules.
///
/// # Errors
///
/// [`TextError::TooLong`] or [`TextError::Forbidden`].
pub fn check_partition_key(s: &str) -> Result<(), TextError> {
    check_printable(s, MAX_PARTITION_KEY_BYTES, PARTITION_KEY_RULE)
}

/// At most `max` bytes with no [`is_unprintable`] character; `rule` says
/// what the value may hold in the error.
fn check_printable(s: &str, max: usize, rule: &'static str) -> Result<(), TextError> {
    if s.len() > max {
        return Err(TextError::TooLong { len: s.len(), max });
    }
    match s.char_indices().find(|(_, c)| is_unprintable(*c)) {
        Some((at, c)) => Err(TextError::Forbidden { shown: show_char(c), at, rule }),
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

/// Checks the `Idempotency-Key` header of `POST /v1/events` as it arrived
/// (bytes: a header need not be UTF-8) and returns it as text: 1 to
/// [`MAX_IDEMPOTENCY_KEY_BYTES`] bytes of printable ASCII (space to `~`; no
/// tab, no control character, nothing over 127).
///
/// # Errors
///
/// [`TextError::Empty`], [`TextError::TooLong`] or [`TextError::Forbidden`].
pub fn check_idempotency_key(value: &[u8]) -> Result<&str, TextError> {
    if value.is_empty() {
        return Err(TextError::Empty);
    }
    if value.len() > MAX_IDEMPOTENCY_KEY_BYTES {
        return Err(TextError::TooLong { len: value.len(), max: MAX_IDEMPOTENCY_KEY_BYTES });
    }
    if let Some(at) = value.iter().position(|b| !matches!(b, b' '..=b'~')) {
        let b = value[at];
        let shown = if b.is_ascii() { show_char(b as char) } else { format!("the byte 0x{b:02X}") };
        return Err(TextError::Forbidden { shown, at, rule: IDEMPOTENCY_KEY_RULE });
    }
    // All ASCII, so UTF-8.
    Ok(std::str::from_utf8(value).expect("ASCII is UTF-8"))
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
        Format::Contract => ("eventId", "tenantId", "traceId"),
    }
}

/// The envelope field a format's tenant comes from (`tenant_id` for the
/// change feed too, which has none: the field it would be).
pub(super) fn tenant_field(format: Format) -> &'static str {
    match text_fields(format).1 {
        "" => "tenant_id",
        f => f,
    }
}

/// The envelope field a format's partition key comes from, named when the
/// key is refused: the producer's own field. The change feed's key is
/// `{entity_type}:{entity_id}`, and only `entity_id` can make it too long or
/// hold a control character (`entity_type` is letters, digits, `_` and `-`,
/// and at most 100 characters as part of the event type).
fn partition_key_field(format: Format) -> &'static str {
    match format {
        Format::Native => "partition_key",
        Format::ChangeFeed => "entity_id",
        Format::DomainEvent => "sequence.partitionKey",
        // The contract format has no partition key: never named.
        Format::Contract => "partitionKey",
    }
}

/// The error for a refused partition key `key`, naming the producer's field
/// ([`partition_key_field`]). For the change feed, the reason speaks of
/// `entity_id` (its byte offset, its length) and says that the limit is on
/// the `{entity_type}:{entity_id}` it makes.
fn partition_key_error(format: Format, key: &str, e: TextError) -> EnvelopeError {
    let field = partition_key_field(format);
    if format != Format::ChangeFeed {
        return EnvelopeError::invalid(field, e.to_string());
    }
    // `entity_type` holds no `:`, so the entity id starts after the first.
    let start = key.find(':').map_or(0, |i| i + 1);
    let reason = match e {
        TextError::TooLong { len, max } => format!(
            "is {} bytes long; the partition key `{{entity_type}}:{{entity_id}}` it makes is {len} bytes long, and the maximum is {max} bytes",
            len - start
        ),
        TextError::Forbidden { shown, at, rule } => {
            TextError::Forbidden { shown, at: at.saturating_sub(start), rule }.to_string()
        }
        other => other.to_string(),
    };
    EnvelopeError::invalid(field, reason)
}

/// The rules every format shares for values that become store keys, log
/// fields and outgoing headers: ids, the contract's `idempotencyKey` (it
/// plays the id's part: the event is deduplicated on it) and the tenant by
/// [`check_id`], the trace id by [`check_trace_id`], the partition key by
/// [`check_partition_key`]. Checked here, once for every format and every
/// way in (`POST /v1/events`, each item of a batch, EventBridge), so that
/// nothing that could never be stored or sent is accepted. (Event types are
/// already limited to `A-Z a-z 0-9 . _ : -` by every format's type rule, so
/// they are valid `hookline-event-type` values.)
pub(super) fn check_producer_text(fields: &Fields, format: Format) -> Result<(), EnvelopeError> {
    let (id_field, tenant_field, trace_field) = text_fields(format);
    let invalid = |field: &str, e: TextError| EnvelopeError::invalid(field, e.to_string());
    if let Some(id) = &fields.id {
        check_id(id).map_err(|e| invalid(id_field, e))?;
    }
    // Only the contract format carries an idempotency key.
    if let Some(key) = &fields.idempotency_key {
        check_id(key).map_err(|e| invalid("idempotencyKey", e))?;
    }
    if let Some(t) = &fields.tenant_id {
        check_id(t).map_err(|e| invalid(tenant_field, e))?;
    }
    if let Some(t) = &fields.trace_id {
        check_trace_id(t).map_err(|e| invalid(trace_field, e))?;
    }
    if let Some(k) = &fields.partition_key {
        check_partition_key(k).map_err(|e| partition_key_error(format, k, e))?;
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
// Event type length
// ---------------------------------------------------------------------------

/// Length rule shared by every format: non-empty, at most [`MAX_EVENT_TYPE_LEN`] characters.
pub(super) fn check_type_len(field: &str, t: &str) -> Result<(), EnvelopeError> {
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
pub(super) struct Obj<'a> {
    /// The object's members.
    map: &'a Map<String, Value>,
    /// Its path from the root; empty for the envelope itself.
    path: String,
}

impl<'a> Obj<'a> {
    /// The envelope's top-level object.
    pub(super) fn root(map: &'a Map<String, Value>) -> Self {
        Obj { map, path: String::new() }
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
    pub(super) fn required(&self, key: &str) -> Result<&'a Value, EnvelopeError> {
        self.map.get(key).ok_or_else(|| EnvelopeError::missing(self.path_of(key)))
    }

    /// Checks that every key is present before any value is validated, so an
    /// envelope read with the wrong format reports what that format is missing
    /// rather than a confusing invalid value.
    pub(super) fn require_all(&self, keys: &[&str]) -> Result<(), EnvelopeError> {
        keys.iter().try_for_each(|k| self.required(k).map(|_| ()))
    }

    /// A required non-blank string.
    pub(super) fn req_str(&self, key: &str) -> Result<&'a str, EnvelopeError> {
        let v = self.required(key)?;
        self.as_str(key, v)
    }

    /// An optional non-blank string; absent and `null` give `None`.
    pub(super) fn opt_str(&self, key: &str) -> Result<Option<&'a str>, EnvelopeError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => self.as_str(key, v).map(Some),
        }
    }

    /// Checks that `v` (the member `key`) is a non-blank string.
    fn as_str(&self, key: &str, v: &'a Value) -> Result<&'a str, EnvelopeError> {
        match v {
            Value::String(s) if s.trim().is_empty() => {
                Err(EnvelopeError::invalid(self.path_of(key), "must not be empty"))
            }
            Value::String(s) => Ok(s),
            other => Err(EnvelopeError::wrong_type(self.path_of(key), "a string", other)),
        }
    }

    /// A required object, returned with its path for nested checks.
    pub(super) fn req_object(&self, key: &str) -> Result<Obj<'a>, EnvelopeError> {
        let v = self.required(key)?;
        self.as_object(key, v)
    }

    /// An optional object; absent and `null` give `None`.
    pub(super) fn opt_object(&self, key: &str) -> Result<Option<Obj<'a>>, EnvelopeError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => self.as_object(key, v).map(Some),
        }
    }

    /// Checks that `v` (the member `key`) is an object.
    fn as_object(&self, key: &str, v: &'a Value) -> Result<Obj<'a>, EnvelopeError> {
        match v {
            Value::Object(map) => Ok(Obj { map, path: self.path_of(key) }),
            other => Err(EnvelopeError::wrong_type(self.path_of(key), "an object", other)),
        }
    }

    /// A required positive integer (1, 2, ...), e.g. `version`.
    pub(super) fn req_positive_int(&self, key: &str) -> Result<u64, EnvelopeError> {
        let v = self.required(key)?;
        match v.as_u64() {
            Some(n) if n >= 1 => Ok(n),
            _ => match v {
                Value::Number(n) => Err(EnvelopeError::invalid(
                    self.path_of(key),
                    format!("expected a positive integer (1, 2, ...), got {n}"),
                )),
                other => Err(EnvelopeError::wrong_type(self.path_of(key), "a positive integer", other)),
            },
        }
    }

    /// A required RFC 3339 timestamp, converted to UTC.
    pub(super) fn req_timestamp(&self, key: &str) -> Result<DateTime<Utc>, EnvelopeError> {
        let s = self.req_str(key)?;
        parse_timestamp(&self.path_of(key), s)
    }

    /// An optional RFC 3339 timestamp; absent and `null` give `None`.
    pub(super) fn opt_timestamp(&self, key: &str) -> Result<Option<DateTime<Utc>>, EnvelopeError> {
        match self.opt_str(key)? {
            None => Ok(None),
            Some(s) => parse_timestamp(&self.path_of(key), s).map(Some),
        }
    }
}

/// Parses an RFC 3339 timestamp (`2026-01-10T12:34:56.789Z`, any offset) into UTC.
fn parse_timestamp(field: &str, s: &str) -> Result<DateTime<Utc>, EnvelopeError> {
    DateTime::parse_from_rfc3339(s).map(|t| t.with_timezone(&Utc)).map_err(|e| {
        EnvelopeError::invalid(
            field,
            format!("expected an RFC 3339 timestamp such as 2026-01-10T12:34:56.789Z, got {} ({e})", show(s)),
        )
    })
}
/// Names the JSON type of a value for "expected X, got Y" reasons.
pub(super) fn kind(v: &Value) -> &'static str {
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
pub fn show(s: &str) -> String {
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
pub(super) fn show_char(c: char) -> String {
    match c {
        ' ' => "a space".to_string(),
        c if is_unprintable(c) || c.is_whitespace() => format!("`{}`", c.escape_unicode()),
        c => format!("`{c}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::testkit::{expect_err, obj, run, CHANGE_FEED, CONTRACT, DOMAIN, NATIVE};
    use crate::envelope::{normalize, normalize_with_defaults};
    use proptest::prelude::*;
    use serde_json::json;

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
            for bad in ["yesterday", "2026-01-10", "2026-01-10T12:34:56", "2026-13-10T12:34:56Z", "1736512496"] {
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
        assert_eq!(run(&m, None).unwrap().occurred_at.unwrap().to_rfc3339(), "2026-01-10T12:34:56.789+00:00");
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

    /// The partition key check itself: up to MAX_PARTITION_KEY_BYTES bytes
    /// (not characters) of printable text, any other character allowed.
    #[test]
    fn partition_key_rule() {
        let at_limit = "é".repeat(MAX_PARTITION_KEY_BYTES / 2);
        for ok in ["order:1", "Opportunity:acme:r1", "a/b c%d?e#f", at_limit.as_str()] {
            assert_eq!(check_partition_key(ok), Ok(()), "{ok}");
        }
        assert_eq!(
            check_partition_key(&format!("{at_limit}x")),
            Err(TextError::TooLong { len: MAX_PARTITION_KEY_BYTES + 1, max: MAX_PARTITION_KEY_BYTES })
        );
        for (bad, at) in [("a\nb", 1), ("\0", 0), ("ab\t", 2), ("é\u{7f}", 2), ("a\u{85}", 1), ("k\u{2028}", 1)] {
            let e = check_partition_key(bad).unwrap_err();
            assert!(matches!(&e, TextError::Forbidden { at: a, .. } if *a == at), "{bad:?}: {e:?}");
            let text = e.to_string();
            assert!(text.contains("hookline-partition-key") && !text.chars().any(char::is_control), "{text:?}");
        }
    }

    /// Partition keys over the limit or holding unprintable characters are
    /// refused in every format that has one, naming the producer's field;
    /// keys at the limit pass. The change feed's limit is on
    /// `{entity_type}:{entity_id}`, reported on `entity_id` with its own
    /// length and offsets.
    #[test]
    fn partition_keys_have_the_id_limit_and_charset() {
        let at_limit = "k".repeat(MAX_PARTITION_KEY_BYTES);
        let over = format!("{at_limit}é");
        let with_key = |base: &str, key: &str| {
            let mut m = obj(base);
            if base == DOMAIN {
                m["sequence"]["partitionKey"] = json!(key);
            } else {
                m.insert("partition_key".into(), json!(key));
            }
            m
        };
        for (base, field) in [(NATIVE, "partition_key"), (DOMAIN, "sequence.partitionKey")] {
            assert_eq!(
                run(&with_key(base, &at_limit), None).unwrap().partition_key.as_deref(),
                Some(at_limit.as_str())
            );
            let e = expect_err(run(&with_key(base, &over), None), "invalid_field", Some(field));
            assert_eq!(
                e.to_string(),
                format!("invalid field `{field}`: is 258 bytes long; the maximum is {MAX_PARTITION_KEY_BYTES} bytes")
            );
            for bad in ["a\nINFO forged", "a\r\nX-Injected: 1", "a\0", "a\tb", "a\u{7f}", "a\u{2028}", "a\u{202e}b"] {
                let e = expect_err(run(&with_key(base, bad), None), "invalid_field", Some(field));
                let text = e.to_string();
                assert!(text.contains("at byte 1") && !text.chars().any(char::is_control), "{text:?}");
            }
        }

        // Change feed: `UserProfile:` is 12 bytes, so the entity id may be 244.
        let entity = |id: &str| {
            let mut m = obj(CHANGE_FEED);
            m.insert("entity_id".into(), json!(id));
            m
        };
        let fits = "e".repeat(MAX_PARTITION_KEY_BYTES - "UserProfile:".len());
        let key = run(&entity(&fits), None).unwrap().partition_key.unwrap();
        assert_eq!(key.len(), MAX_PARTITION_KEY_BYTES);
        let e = expect_err(run(&entity(&format!("{fits}e")), None), "invalid_field", Some("entity_id"));
        assert_eq!(
            e.to_string(),
            "invalid field `entity_id`: is 245 bytes long; the partition key `{entity_type}:{entity_id}` it makes \
             is 257 bytes long, and the maximum is 256 bytes"
        );
        let e = expect_err(run(&entity("9b\r\nX: 1"), None), "invalid_field", Some("entity_id"));
        assert!(e.to_string().contains("`\\u{d}` at byte 2"), "{e}");

        // No partition key, nothing to check; EventBridge ingest uses the same rules.
        assert_eq!(run(&obj(CONTRACT), None).unwrap().partition_key, None);
        expect_err(
            normalize_with_defaults(
                format!(r#"{{"partition_key":"{over}","data":{{}}}}"#).as_bytes(),
                None,
                Some("t"),
                None,
            ),
            "invalid_field",
            Some("partition_key"),
        );
    }

    /// Trace ids become the `hookline-trace-id` header: visible ASCII, inner
    /// spaces and tabs, at most MAX_ID_BYTES.
    #[test]
    fn trace_ids_must_be_header_values() {
        for (base, field) in [(NATIVE, "trace_id"), (DOMAIN, "correlationId"), (CONTRACT, "traceId")] {
            let mut m = obj(base);
            for ok in [
                "4bf92f3577b34da6a3ce929d0e0e4736",
                "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1",
                "a b\tc",
                "!~",
            ] {
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

    /// The `Idempotency-Key` header: 1 to 255 bytes of printable ASCII.
    #[test]
    fn idempotency_key_header_rule() {
        for ok in ["k", "task:tsk_3001:attempt:2:failed", "a b~!", &"x".repeat(MAX_IDEMPOTENCY_KEY_BYTES)] {
            assert_eq!(check_idempotency_key(ok.as_bytes()), Ok(ok), "{ok}");
        }
        assert_eq!(check_idempotency_key(b""), Err(TextError::Empty));
        assert_eq!(
            check_idempotency_key("x".repeat(256).as_bytes()),
            Err(TextError::TooLong { len: 256, max: MAX_IDEMPOTENCY_KEY_BYTES })
        );
        for (bad, at, shown) in [
            (&b"a\tb"[..], 1, "`\\u{9}`"),
            (b"ab\x7f", 2, "`\\u{7f}`"),
            (b"\x00", 0, "`\\u{0}`"),
            ("café".as_bytes(), 3, "the byte 0xC3"),
            (b"k\xff", 1, "the byte 0xFF"),
        ] {
            let e = check_idempotency_key(bad).unwrap_err();
            assert!(matches!(&e, TextError::Forbidden { at: a, .. } if *a == at), "{e:?}");
            let text = e.to_string();
            assert!(text.contains(shown) && text.contains("printable ASCII"), "{text}");
            assert!(!text.chars().any(char::is_control), "{text:?}");
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
        /// an accepted trace id and an accepted partition key are valid `http`
        /// header values, and LogSafe output has no control character.
        #[test]
        fn text_rules_hold(s in "\\PC{0,8}[\\x00-\\x20\\x7f\\u{85}\\u{2028}a-z]{0,4}\\PC{0,8}") {
            if check_id(&s).is_ok() {
                prop_assert!(!s.chars().any(is_unprintable));
            }
            if check_trace_id(&s).is_ok() {
                prop_assert!(reqwest::header::HeaderValue::from_str(&s).is_ok());
                prop_assert!(s.is_ascii());
            }
            if check_partition_key(&s).is_ok() {
                prop_assert!(reqwest::header::HeaderValue::from_str(&s).is_ok());
            }
            prop_assert!(!LogSafe(&s).to_string().chars().any(char::is_control));
        }
    }
}
