//! The event catalog (docs/formats.md#event-catalog): event types
//! registered with a JSON Schema per major version, a description and an
//! example. Deployment-wide: a type means one thing whichever tenant sends
//! it, so only an admin key bound to no tenant registers one; everyone who
//! may read lists it (portal tokens too).
//!
//! Version 1 of `name` is the type `name`; version N ≥ 2 is the type
//! `name.vN` ([`event_type_of`]), which routing treats as versioned
//! ([`crate::type_version::version_of`]). Pure decisions here: what a
//! registration may be ([`check_registration`]), what re-registering does
//! ([`decide`], [`compat`]), what an event of a registered type must hold
//! ([`check_event`], [`schema`]); the per-process cache ingest reads
//! through ([`CatalogCache`]). Stored by [`crate::ports::EventTypeStore`].

pub mod compat;
pub mod schema;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::envelope::{EnvelopeError, Format};
use crate::error::FieldError;
use schema::Schema;

/// The highest major version.
pub const MAX_VERSION: u32 = 999;

/// The longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 2_000;

/// The largest schema or example, as compact JSON, in bytes: a catalog
/// entry stays one small store item (DynamoDB's limit is 400 KB).
pub const MAX_DOCUMENT_BYTES: usize = 64 * 1024;

/// How long ingest trusts what it read of the catalog (a registered type's
/// schema, or that a type is not registered): a change made through
/// another process is enforced within this; the process that makes it
/// forgets its copy at once.
pub const CACHE_TTL: Duration = Duration::from_secs(30);

/// How many types one process remembers; past it the cache starts over.
pub const CACHE_ENTRIES: usize = 10_000;

/// One registered major version of a type.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CatalogEntry {
    /// The type's name (the type of version 1).
    pub name: String,
    /// The major version, 1 to [`MAX_VERSION`].
    pub version: u32,
    /// The JSON Schema of the event's data (the subset of [`schema`]).
    pub schema: Value,
    /// What the type means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// An example of the data, valid against the schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<Value>,
    /// When this version was first registered.
    pub registered_at: DateTime<Utc>,
    /// When it last changed (an added optional property, a new description).
    pub updated_at: DateTime<Utc>,
}

impl CatalogEntry {
    /// The event type of this version ([`event_type_of`]).
    pub fn event_type(&self) -> String {
        event_type_of(&self.name, self.version)
    }

    /// The schema, parsed (it was checked when registered).
    ///
    /// # Errors
    ///
    /// A stored schema that no longer parses (a corrupt item).
    pub fn parsed(&self) -> Result<Schema, schema::SchemaError> {
        Schema::parse(&self.schema, "schema")
    }
}

/// The type of version `version` of `name`: `name`, or `name.v<N>` from 2.
pub fn event_type_of(name: &str, version: u32) -> String {
    if version <= 1 {
        name.to_string()
    } else {
        format!("{name}.v{version}")
    }
}

/// The (name, version) of an event type: `task.succeeded.v2` is version 2
/// of `task.succeeded`; anything else is version 1 of itself.
pub fn name_and_version(event_type: &str) -> (&str, u32) {
    match crate::type_version::version_of(event_type) {
        Some((base, n)) => (base, n),
        None => (event_type, 1),
    }
}

/// A registration as asked (`POST /v1/event-types`).
#[derive(Debug, Clone, PartialEq)]
pub struct Registration {
    /// `name`.
    pub name: String,
    /// `version`.
    pub version: u32,
    /// `schema`.
    pub schema: Value,
    /// `description`.
    pub description: Option<String>,
    /// `example`.
    pub example: Option<Value>,
}

/// Checks a registration: a name that is a producer's event type (1 to 100
/// characters of `A-Z a-z 0-9 . _ : -`, not `hookline.…`, not itself
/// ending in `.v<N>`, short enough for its versioned type), a version of 1
/// to [`MAX_VERSION`], a schema of the supported subset, a bounded
/// description, and an example valid against the schema.
///
/// # Errors
///
/// Every problem, each naming its field (`schema.properties.a.$ref`,
/// `example.amount`).
pub fn check_registration(r: &Registration) -> Result<Schema, Vec<FieldError>> {
    let mut issues = Vec::new();
    let full = event_type_of(&r.name, r.version);
    if let Err(m) = check_name(&r.name, &full) {
        issues.push(FieldError::new("name", m));
    }
    if r.version == 0 || r.version > MAX_VERSION {
        issues.push(FieldError::new("version", format!("expected a major version from 1 to {MAX_VERSION}")));
    }
    if r.description.as_ref().is_some_and(|d| d.chars().count() > MAX_DESCRIPTION_CHARS || d.trim().is_empty()) {
        issues.push(FieldError::new("description", format!("expected 1 to {MAX_DESCRIPTION_CHARS} characters")));
    }
    for (field, doc) in [("schema", Some(&r.schema)), ("example", r.example.as_ref())] {
        if doc.is_some_and(|d| d.to_string().len() > MAX_DOCUMENT_BYTES) {
            issues.push(FieldError::new(field, format!("larger than {MAX_DOCUMENT_BYTES} bytes as JSON")));
        }
    }
    let parsed = match Schema::parse(&r.schema, "schema") {
        Ok(s) => Some(s),
        Err(e) => {
            issues.push(FieldError::new(e.path, e.message));
            None
        }
    };
    if let (Some(s), Some(ex)) = (&parsed, &r.example) {
        issues.extend(s.validate(ex, "example").into_iter().map(|v| FieldError::new(v.path, v.message)));
    }
    match parsed {
        Some(s) if issues.is_empty() => Ok(s),
        _ => Err(issues),
    }
}

fn check_name(name: &str, full: &str) -> Result<(), String> {
    let ok_chars = |s: &str| s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
    if name.is_empty() || !ok_chars(name) || name.starts_with('.') || name.ends_with('.') || name.contains("..") {
        return Err("expected an event type: letters, digits and `. _ : -`, dot-separated segments".into());
    }
    if crate::routing::is_operational(name) {
        return Err(format!("types starting with `{}` are Hookline's own", crate::routing::OPERATIONAL_PREFIX));
    }
    if crate::type_version::version_of(name).is_some() || name.ends_with(".v1") {
        return Err("the name must not end in a version segment (`.v<N>`): give the version in `version`".into());
    }
    if full.chars().count() > crate::envelope::MAX_EVENT_TYPE_LEN {
        return Err(format!(
            "the versioned type `{full}` would be longer than {} characters",
            crate::envelope::MAX_EVENT_TYPE_LEN
        ));
    }
    Ok(())
}

/// What registering does when a version is already registered.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Nothing registered: store it (`201`).
    Create(CatalogEntry),
    /// A compatible change (optional properties added, or a new
    /// description or example): store it (`200`).
    Update(CatalogEntry),
    /// The same schema, description and example: nothing to do (`200`).
    Unchanged(CatalogEntry),
}

/// Decides a checked registration (`new` is its parsed schema) against
/// what is stored for its (name, version).
///
/// # Errors
///
/// The breaking changes ([`compat::breaking_changes`]), each naming where:
/// the schema of a version may only gain optional properties.
pub fn decide(
    r: Registration,
    new: &Schema,
    stored: Option<CatalogEntry>,
    now: DateTime<Utc>,
) -> Result<Decision, Vec<String>> {
    let Some(old) = stored else {
        return Ok(Decision::Create(CatalogEntry {
            name: r.name,
            version: r.version,
            schema: r.schema,
            description: r.description,
            example: r.example,
            registered_at: now,
            updated_at: now,
        }));
    };
    if old.schema == r.schema && old.description == r.description && old.example == r.example {
        return Ok(Decision::Unchanged(old));
    }
    let changes = match old.parsed() {
        Ok(o) => compat::breaking_changes(&o, new),
        Err(e) => vec![format!("the stored schema cannot be read ({e}); register a new version")],
    };
    if !changes.is_empty() {
        return Err(changes);
    }
    Ok(Decision::Update(CatalogEntry {
        schema: r.schema,
        description: r.description,
        example: r.example,
        updated_at: now,
        ..old
    }))
}

/// The envelope member a format's event data is in: native `data`; the
/// change feed's, domain event's and contract's `payload`.
pub fn data_field(format: Format) -> &'static str {
    match format {
        Format::Native => "data",
        Format::ChangeFeed | Format::DomainEvent | Format::Contract => "payload",
    }
}

/// Checks an event's data against its type's schema: the member
/// [`data_field`] of the envelope `raw` (as the producer sent it, before
/// redaction), or, for a type not in the catalog, whether the catalog is
/// strict.
///
/// # Errors
///
/// `invalid_field` naming the first violation's JSON path (`data.amount`)
/// with the others in its reason; on `type` for an unregistered type of a
/// strict catalog.
pub fn check_event(
    entry: Option<&Compiled>,
    strict: bool,
    event_type: &str,
    format: Format,
    raw: &[u8],
) -> Result<(), EnvelopeError> {
    let Some(c) = entry else {
        if strict {
            return Err(EnvelopeError::InvalidField {
                field: type_field(format).to_string(),
                reason: format!("event type `{event_type}` is not in the event catalog, and the catalog is strict"),
            });
        }
        return Ok(());
    };
    let field = data_field(format);
    let envelope: Value = serde_json::from_slice(raw).unwrap_or(Value::Null);
    let data = envelope.get(field).unwrap_or(&Value::Null);
    let violations = c.schema.validate(data, field);
    let Some(first) = violations.first() else { return Ok(()) };
    let more: Vec<String> = violations[1..].iter().map(|v| v.to_string()).collect();
    let mut reason = format!("{} (schema of `{event_type}`)", first.message);
    if !more.is_empty() {
        reason.push_str(&format!("; also {}", more.join("; ")));
    }
    Err(EnvelopeError::InvalidField { field: first.path.clone(), reason })
}

/// The envelope member a format's event type is in.
pub fn type_field(format: Format) -> &'static str {
    match format {
        Format::Native => "type",
        Format::ChangeFeed => "entity_type",
        Format::DomainEvent | Format::Contract => "eventType",
    }
}

/// A registered version as ingest checks it: the parsed schema.
#[derive(Debug)]
pub struct Compiled {
    /// The parsed schema.
    pub schema: Schema,
}

/// What one process knows of the catalog: per event type, its compiled
/// schema or that it is not registered, each for [`CACHE_TTL`]; at most
/// [`CACHE_ENTRIES`] types. Ingest reads the store only for a type it does
/// not know (one read per type per TTL per process), never per event.
#[derive(Debug, Default)]
pub struct CatalogCache {
    known: Mutex<HashMap<String, Known>>,
}

/// What the store said of one type, and when it was read.
type Known = (Instant, Option<Arc<Compiled>>);

impl CatalogCache {
    /// What is known of `event_type`, if fresh: `Some(None)` = not registered.
    pub fn get(&self, event_type: &str, now: Instant) -> Option<Option<Arc<Compiled>>> {
        let known = self.known.lock().expect("catalog cache lock");
        known.get(event_type).filter(|(at, _)| now.duration_since(*at) < CACHE_TTL).map(|(_, c)| c.clone())
    }

    /// Remembers what the store said of `event_type` (read at `at`).
    pub fn put(&self, event_type: &str, entry: Option<Arc<Compiled>>, at: Instant) {
        let mut known = self.known.lock().expect("catalog cache lock");
        if known.len() >= CACHE_ENTRIES && !known.contains_key(event_type) {
            known.clear();
        }
        known.insert(event_type.to_string(), (at, entry));
    }

    /// Forgets `event_type` (this process just registered it).
    pub fn forget(&self, event_type: &str) {
        self.known.lock().expect("catalog cache lock").remove(event_type);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reg(name: &str, version: u32, schema: Value, example: Option<Value>) -> Registration {
        Registration { name: name.into(), version, schema, description: Some("d".into()), example }
    }

    fn fields(e: Vec<FieldError>) -> Vec<String> {
        e.into_iter().map(|f| f.field).collect()
    }

    #[test]
    fn versions_are_types() {
        assert_eq!(event_type_of("task.succeeded", 1), "task.succeeded");
        assert_eq!(event_type_of("task.succeeded", 2), "task.succeeded.v2");
        assert_eq!(name_and_version("task.succeeded.v2"), ("task.succeeded", 2));
        assert_eq!(name_and_version("task.succeeded"), ("task.succeeded", 1));
        assert_eq!(name_and_version("task.v1"), ("task.v1", 1));
    }

    #[test]
    fn a_registration_is_checked_field_by_field() {
        let s = json!({"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}});
        assert!(check_registration(&reg("order.created", 1, s.clone(), Some(json!({"n": 1})))).is_ok());
        let e = check_registration(&reg("order.created", 1, s.clone(), Some(json!({"n": "1"})))).unwrap_err();
        assert_eq!(fields(e), ["example.n"]);
        for bad in ["hookline.x", "a.v2", "a.v1", "a b", "", ".a", "a..b"] {
            let e = check_registration(&reg(bad, 1, s.clone(), None)).unwrap_err();
            assert_eq!(fields(e), ["name"], "{bad}");
        }
        let e = check_registration(&reg(&"a".repeat(98), 2, json!({"pattern": "x"}), None)).unwrap_err();
        assert_eq!(fields(e), ["name", "schema.pattern"]);
        let e = check_registration(&reg("a", 0, json!({}), None)).unwrap_err();
        assert_eq!(fields(e), ["version"]);
    }

    #[test]
    fn re_registering_is_idempotent_compatible_or_refused() {
        let now = Utc::now();
        let v1 = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let parse = |v: &Value| Schema::parse(v, "schema").unwrap();
        let Ok(Decision::Create(stored)) = decide(reg("a", 1, v1.clone(), None), &parse(&v1), None, now) else {
            panic!("a first registration is created")
        };
        let same = decide(reg("a", 1, v1.clone(), None), &parse(&v1), Some(stored.clone()), now);
        assert_eq!(same, Ok(Decision::Unchanged(stored.clone())));
        let mut added = v1.clone();
        added["properties"]["m"] = json!({"type": "string"});
        let later = now + chrono::Duration::seconds(1);
        match decide(reg("a", 1, added.clone(), None), &parse(&added), Some(stored.clone()), later) {
            Ok(Decision::Update(e)) => assert_eq!((e.registered_at, e.updated_at, e.schema), (now, later, added)),
            other => panic!("{other:?}"),
        }
        let mut broken = v1.clone();
        broken["required"] = json!(["n"]);
        assert_eq!(
            decide(reg("a", 1, broken.clone(), None), &parse(&broken), Some(stored), now),
            Err(vec!["`n` became required".to_string()])
        );
    }

    #[test]
    fn an_event_is_checked_against_its_schema_at_the_formats_data_member() {
        let c = Compiled {
            schema: Schema::parse(&json!({"type": "object", "properties": {"amount": {"type": "number"}}}), "s")
                .unwrap(),
        };
        let ok = br#"{"type":"order.created","data":{"amount":1}}"#;
        assert!(check_event(Some(&c), false, "order.created", Format::Native, ok).is_ok());
        let bad = br#"{"type":"order.created","data":{"amount":"1"}}"#;
        let e = check_event(Some(&c), false, "order.created", Format::Native, bad).unwrap_err();
        assert_eq!(e.field(), Some("data.amount"));
        assert_eq!(
            e.to_string(),
            "invalid field `data.amount`: expected number, got string (schema of `order.created`)"
        );
        let contract = br#"{"eventType":"task.failed","payload":{"amount":true}}"#;
        let e = check_event(Some(&c), false, "task.failed", Format::Contract, contract).unwrap_err();
        assert_eq!(e.field(), Some("payload.amount"));
        assert!(check_event(None, false, "x", Format::Native, ok).is_ok(), "unregistered: as today");
        let e = check_event(None, true, "x", Format::Native, ok).unwrap_err();
        assert_eq!(e.field(), Some("type"), "a strict catalog refuses it on the type");
    }

    #[test]
    fn the_cache_holds_for_its_ttl_and_forgets_on_write() {
        let cache = CatalogCache::default();
        let t0 = Instant::now();
        assert!(cache.get("a", t0).is_none());
        cache.put("a", None, t0);
        assert!(matches!(cache.get("a", t0), Some(None)));
        assert!(cache.get("a", t0 + CACHE_TTL).is_none(), "stale after the TTL");
        cache.forget("a");
        assert!(cache.get("a", t0).is_none());
    }
}
