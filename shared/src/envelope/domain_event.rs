//! The domain-event envelope (docs/formats.md#domain-event): `{eventId, schemaVersion,
//! eventType, occurredAt, tenantId, producer{service, instanceId},
//! correlationId, sequence{partitionKey, recordVersion}, payload}`, and its
//! PascalCase event type rule.

use serde_json::{Map, Value};

use super::fields::{check_type_len, show, Obj};
use super::{EnvelopeError, Fields};

/// Domain-event envelope (docs/formats.md#domain-event): every field required.
/// `schemaVersion` is a positive integer, `eventType` PascalCase
/// (`^[A-Z][A-Za-z0-9]*$`, at most [`MAX_EVENT_TYPE_LEN`]), `occurredAt` RFC
/// 3339, `producer` an object with non-blank `service` and `instanceId`,
/// `sequence` an object with non-blank `partitionKey` and `recordVersion`
/// (opaque: producers' examples use `"..."`), `payload` an object. Ids
/// (`eventId`, `tenantId`, `correlationId`) are opaque non-blank strings, so
/// placeholders like `"uuid"` pass.
///
/// [`MAX_EVENT_TYPE_LEN`]: super::MAX_EVENT_TYPE_LEN
pub(super) fn domain_event(obj: &Map<String, Value>) -> Result<Fields, EnvelopeError> {
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
        idempotency_key: None,
        event_type: event_type.to_string(),
        tenant_id: Some(tenant.to_string()),
        partition_key: Some(partition_key.to_string()),
        sequence: Some(record_version.to_string()),
        trace_id: Some(correlation.to_string()),
        producer: Some(service.to_string()),
        occurred_at: Some(occurred_at),
    })
}

/// Domain-event type rule (docs/formats.md#domain-event): PascalCase, `^[A-Z][A-Za-z0-9]*$`.
fn check_pascal_type(field: &str, t: &str) -> Result<(), EnvelopeError> {
    check_type_len(field, t)?;
    let mut chars = t.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_uppercase()) && chars.all(|c| c.is_ascii_alphanumeric());
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

#[cfg(test)]
mod tests {
    use crate::envelope::testkit::{expect_err, obj, run, DOMAIN};
    use serde_json::{json, Value};

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
    }

    /// Wrong JSON types are InvalidField with an "expected ..." reason.
    #[test]
    fn wrong_types() {
        let mut m = obj(DOMAIN);
        m.insert("producer".into(), json!("core-platform"));
        let e = expect_err(run(&m, None), "invalid_type", Some("producer"));
        assert_eq!(e.to_string(), "invalid field `producer`: expected an object, got a string");

        let mut m = obj(DOMAIN);
        m["sequence"]["recordVersion"] = json!(42);
        expect_err(run(&m, None), "invalid_type", Some("sequence.recordVersion"));

        let mut m = obj(DOMAIN);
        m.insert("tenantId".into(), Value::Null);
        let e = expect_err(run(&m, None), "invalid_type", Some("tenantId"));
        assert!(e.to_string().contains("expected a string, got null"));

        let mut m = obj(DOMAIN);
        m.insert("schemaVersion".into(), json!(0));
        expect_err(run(&m, None), "invalid_field", Some("schemaVersion"));
    }

    /// Event types the domain-event format refuses.
    #[test]
    fn bad_event_types() {
        for bad in ["recordUpdated", "Record.Updated", "Record_Updated", "", "RecordUpdated!"] {
            let mut m = obj(DOMAIN);
            m.insert("eventType".into(), json!(bad));
            let e = expect_err(run(&m, None), "invalid_field", Some("eventType"));
            if !bad.is_empty() {
                assert!(e.to_string().contains("PascalCase"), "{e}");
            }
        }
    }
}
