//! The change-feed envelope (docs/formats.md#change-feed): `{id,
//! entity_type, entity_id, change_type, published_at, payload}`, routed as
//! `{entity_type}.{change_type}`, with the payload fields the format makes
//! mandatory.

use serde_json::{Map, Value};

use super::fields::{show, show_char, Obj};
use super::{EnvelopeError, Fields, MAX_EVENT_TYPE_LEN};

/// The `change_type` values the change-feed format defines
/// (docs/formats.md#change-feed).
pub const CHANGE_TYPES: &[&str] = &["created", "updated", "deleted", "merged"];

/// Change-feed envelope (docs/formats.md#change-feed): `id, entity_type, entity_id,
/// change_type, published_at, payload`, all required.
///
/// * `entity_type` is one or more of `A-Z a-z 0-9 _ -` (it becomes part of the
///   routing type `{entity_type}.{change_type}`, at most
///   [`MAX_EVENT_TYPE_LEN`] long), `change_type` one of [`CHANGE_TYPES`]
///   (lower case, exactly).
/// * The payload is checked against docs/formats.md#change-feed, which makes
///   these fields mandatory for every entity type and the merged snapshot, so
///   subscribers can rely on them: `actor` a non-blank string, `diff` an object,
///   `recorded_at` an RFC 3339 timestamp, and at least one of `before` / `after`
///   present as an object (`null` counts as absent, so a `created` event may
///   send `"before": null`).
pub(super) fn change_feed(obj: &Map<String, Value>, default_producer: Option<&str>) -> Result<Fields, EnvelopeError> {
    let o = Obj::root(obj);
    o.require_all(&["id", "entity_type", "entity_id", "change_type", "published_at", "payload"])?;
    let id = o.req_str("id")?;
    let entity_type = o.req_str("entity_type")?;
    if let Some(c) = entity_type.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-')) {
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
            format!("must be one of created, updated, deleted, merged; got {}", show(change_type)),
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
            format!("is too long: `{{entity_type}}.{{change_type}}` must be at most {MAX_EVENT_TYPE_LEN} characters"),
        ));
    }
    Ok(Fields {
        id: Some(id.to_string()),
        idempotency_key: None,
        partition_key: Some(format!("{entity_type}:{entity_id}")),
        event_type,
        tenant_id: None,
        sequence: None,
        trace_id: None,
        producer: default_producer.map(str::to_string),
        occurred_at: Some(published_at),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::testkit::{expect_err, obj, run, CHANGE_FEED};
    use serde_json::json;

    /// Nested required fields are reported with their dotted path.
    #[test]
    fn nested_missing_fields() {
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
        let mut m = obj(CHANGE_FEED);
        m["payload"]["diff"] = json!("roles");
        expect_err(run(&m, None), "invalid_type", Some("payload.diff"));
        let mut m = obj(CHANGE_FEED);
        m["payload"]["after"] = json!([]);
        expect_err(run(&m, None), "invalid_type", Some("payload.after"));
        let mut m = obj(CHANGE_FEED);
        m["payload"]["actor"] = json!("");
        let e = expect_err(run(&m, None), "invalid_field", Some("payload.actor"));
        assert_eq!(e.to_string(), "invalid field `payload.actor`: must not be empty");
    }

    /// Event types the change feed refuses (`change_type`, `entity_type`),
    /// and the routing type of every change type.
    #[test]
    fn bad_event_types() {
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
            assert_eq!(run(&m, None).unwrap().event_type, format!("UserProfile.{ct}"));
        }
    }
}
