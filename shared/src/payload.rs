//! What body a subscriber receives: the producer's envelope as posted, or a
//! wrapper built from the stored event ([`PayloadFormat`]). Pure: the
//! delivery stage signs and sends whatever [`render`] returns.
//!
//! The `contract-webhook` body is the task-event contract's public webhook
//! shape, built from an event of any format (docs/delivery.md#payload-formats):
//!
//! | field | from |
//! | --- | --- |
//! | `eventId` | the producer's id (native `id`, `eventId`, change-feed `id`); else Hookline's event id |
//! | `eventType` | the event type Hookline routes on |
//! | `version` | contract `version`, domain-event `schemaVersion`; else `1` |
//! | `occurredAt` | the event's `occurred_at` (RFC 3339, UTC) |
//! | `traceId` | the event's trace id; else Hookline's event id, so it is always there |
//! | `data` | contract, domain-event and change-feed `payload`, native and posted-webhook `data`; only the `data_fields` paths when the subscription lists them |
//! | `executionProfile`, `riskFlags` | the envelope's own, else the same names inside `data`; absent when neither has them |

use serde_json::{Map, Value};

use crate::envelope::Format;
use crate::event::EventRecord;
use crate::subscription::{PayloadFormat, Subscription};

/// The body of a delivery of `event` to `sub`.
pub fn render(sub: &Subscription, event: &EventRecord) -> Vec<u8> {
    match sub.payload_format {
        PayloadFormat::Original => event.body.clone(),
        PayloadFormat::Hookline => to_bytes(&serde_json::json!({
            // The producer's id (a tenant event is stored under a derived id).
            "id": producer_or_event_id(event),
            "type": event.event_type,
            "timestamp": event.occurred_at,
            "tenant_id": event.tenant_id,
            "data": event.body_json(),
        })),
        PayloadFormat::ContractWebhook => to_bytes(&contract_webhook(event, sub.data_fields.as_deref())),
    }
}

fn to_bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("json serializes")
}

fn producer_or_event_id(event: &EventRecord) -> String {
    crate::envelope::producer_id(&event.body, event.format).unwrap_or_else(|| event.id.to_string())
}

/// The task-event contract's webhook body for `event` (mapping in the
/// module docs), `data` cut down to `fields` when given.
pub fn contract_webhook(event: &EventRecord, fields: Option<&[String]>) -> Value {
    let body = event.body_json();
    let data_key = match event.format {
        Format::Native => "data",
        Format::ChangeFeed | Format::DomainEvent => "payload",
        // The internal contract carries `payload`; a posted webhook-shaped
        // body carries `data`.
        Format::Contract => {
            if body.get("payload").is_some() {
                "payload"
            } else {
                "data"
            }
        }
    };
    let data = body.get(data_key).cloned().unwrap_or(Value::Null);
    let version = match event.format {
        Format::Contract => body.get("version").cloned(),
        Format::DomainEvent => body.get("schemaVersion").cloned(),
        _ => None,
    }
    .unwrap_or(Value::from(1));
    let mut out = Map::new();
    out.insert("eventId".into(), Value::from(producer_or_event_id(event)));
    out.insert("eventType".into(), Value::from(event.event_type.clone()));
    out.insert("version".into(), version);
    out.insert(
        "occurredAt".into(),
        Value::from(event.occurred_at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)),
    );
    out.insert("traceId".into(), Value::from(event.trace_id.clone().unwrap_or_else(|| event.id.to_string())));
    for key in ["executionProfile", "riskFlags"] {
        if let Some(v) = body.get(key).or_else(|| data.get(key)).filter(|v| !v.is_null()) {
            out.insert(key.into(), v.clone());
        }
    }
    let data = match fields {
        Some(paths) => pick(&data, paths),
        None => data,
    };
    out.insert("data".into(), data);
    Value::Object(out)
}

/// Only the values at `paths` (dot-separated object keys) of `data`, in
/// their nesting; paths that are not there are left out. Anything but an
/// object gives an empty object: nothing listed can be in it.
fn pick(data: &Value, paths: &[String]) -> Value {
    let mut out = Value::Object(Map::new());
    for path in paths {
        let keys: Vec<&str> = path.split('.').collect();
        let mut found = Some(data);
        for k in &keys {
            found = found.and_then(|v| v.as_object()).and_then(|o| o.get(*k));
        }
        let Some(value) = found else { continue };
        let mut at = &mut out;
        for k in &keys[..keys.len() - 1] {
            let obj = at.as_object_mut().expect("built as objects");
            at = obj.entry(k.to_string()).or_insert_with(|| Value::Object(Map::new()));
        }
        at.as_object_mut().expect("built as objects").insert(keys[keys.len() - 1].to_string(), value.clone());
    }
    out
}

/// Most paths a subscription's `data_fields` may list.
pub const MAX_DATA_FIELDS: usize = 100;

/// Longest path in `data_fields`, in bytes.
pub const MAX_DATA_FIELD_LEN: usize = 200;

/// Checks a subscription's `data_fields`: 1 to [`MAX_DATA_FIELDS`] paths of
/// dot-separated, non-empty object keys (no array indexes), each at most
/// [`MAX_DATA_FIELD_LEN`] bytes, no path listed twice.
///
/// # Errors
///
/// Every problem, each a [`FieldError`](crate::error::FieldError) naming `data_fields` or the entry
/// at fault (`data_fields[2]`).
pub fn validate_data_fields(paths: &[String]) -> Result<(), Vec<crate::error::FieldError>> {
    use crate::error::FieldError;
    if paths.is_empty() || paths.len() > MAX_DATA_FIELDS {
        return Err(vec![FieldError::new(
            "data_fields",
            format!("expected 1 to {MAX_DATA_FIELDS} paths (omit it, or null, to deliver all of data)"),
        )]);
    }
    let mut issues = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let field = format!("data_fields[{i}]");
        if p.is_empty() || p.len() > MAX_DATA_FIELD_LEN {
            issues.push(FieldError::new(field, format!("must be 1 to {MAX_DATA_FIELD_LEN} bytes")));
        } else if p.split('.').any(|k| k.trim().is_empty()) || p.chars().any(char::is_control) {
            issues.push(FieldError::new(
                field,
                format!("'{p}' is not a path of dot-separated keys (e.g. taskId or result.url)"),
            ));
        } else if paths[..i].contains(p) {
            issues.push(FieldError::new(field, format!("'{p}' is listed twice")));
        }
    }
    if issues.is_empty() {
        Ok(())
    } else {
        Err(issues)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{normalize, Format};
    use serde_json::json;

    fn event(body: Value) -> EventRecord {
        let n = normalize(&serde_json::to_vec(&body).unwrap(), None).expect("accepted");
        EventRecord::from_normalized(n, chrono::Utc::now(), chrono::Duration::days(1))
    }

    #[test]
    fn the_contract_maps_payload_version_and_flags() {
        let e = event(json!({
            "eventId": "evt_task_failed_001", "eventType": "task.failed", "version": 2,
            "occurredAt": "2026-02-19T10:10:00Z", "traceId": "req_abcd", "producer": "worker-orchestrator",
            "idempotencyKey": "task:tsk_3001:attempt:2:failed",
            "payload": {"taskId": "tsk_3001", "userId": "u_1001", "executionProfile": "FAST",
                        "riskFlags": ["MODEL_LICENSE_REVIEW_PENDING"], "modelNode": "gpu-7"}
        }));
        assert_eq!(e.format, Format::Contract);
        let w = contract_webhook(&e, Some(&["taskId".to_string(), "userId".to_string()]));
        assert_eq!(
            w,
            json!({
                "eventId": "evt_task_failed_001", "eventType": "task.failed", "version": 2,
                "occurredAt": "2026-02-19T10:10:00Z", "traceId": "req_abcd",
                "executionProfile": "FAST", "riskFlags": ["MODEL_LICENSE_REVIEW_PENDING"],
                "data": {"taskId": "tsk_3001", "userId": "u_1001"}
            })
        );
        // Internal fields of the envelope never appear.
        let text = w.to_string();
        for internal in ["producer", "idempotencyKey", "modelNode", "worker-orchestrator"] {
            assert!(!text.contains(internal), "{internal} leaked: {text}");
        }
    }

    #[test]
    fn every_format_maps_to_the_same_shape() {
        let native = event(json!({"type": "order.paid", "data": {"amount": 3}}));
        let w = contract_webhook(&native, None);
        assert_eq!(w["eventId"], native.id.as_str(), "no producer id: Hookline's");
        assert_eq!(w["traceId"], native.id.as_str(), "no trace id: Hookline's event id");
        assert_eq!((w["version"].clone(), w["data"].clone()), (json!(1), json!({"amount": 3})));
        assert!(w.get("riskFlags").is_none() && w.get("executionProfile").is_none());

        let feed = event(json!({
            "id": "chg_1", "entity_type": "Lead", "entity_id": "42", "change_type": "updated",
            "published_at": "2026-02-19T10:10:00+02:00",
            "payload": {"actor": "u1", "diff": {}, "recorded_at": "2026-02-19T08:10:00Z", "after": {"name": "x"}}
        }));
        let w = contract_webhook(&feed, Some(&["after.name".to_string(), "missing.path".to_string()]));
        assert_eq!(w["eventId"], "chg_1");
        assert_eq!(w["eventType"], "Lead.updated");
        assert_eq!(w["occurredAt"], "2026-02-19T08:10:00Z");
        assert_eq!(w["data"], json!({"after": {"name": "x"}}), "listed paths only, nesting kept");

        let domain = event(json!({
            "eventId": "e-9", "schemaVersion": 3, "eventType": "OpportunityWon", "occurredAt": "2026-02-19T10:10:00Z",
            "tenantId": "t1", "producer": {"service": "crm", "instanceId": "i"}, "correlationId": "c-1",
            "sequence": {"partitionKey": "opp:1", "recordVersion": "7"}, "payload": {"amount": 10}
        }));
        let w = contract_webhook(&domain, None);
        assert_eq!(
            (w["eventId"].clone(), w["version"].clone(), w["traceId"].clone()),
            (json!("e-9"), json!(3), json!("c-1"))
        );
        assert_eq!(w["data"], json!({"amount": 10}));
    }

    #[test]
    fn a_posted_webhook_body_maps_onto_itself() {
        let posted = json!({"eventId": "evt_webhook_001", "eventType": "task.succeeded", "version": 1,
            "occurredAt": "2026-02-19T10:12:00Z", "traceId": "req_abcd", "executionProfile": "FAST",
            "riskFlags": ["MODEL_LICENSE_REVIEW_PENDING"],
            "data": {"taskId": "tsk_3001", "status": "SUCCEEDED"}});
        assert_eq!(contract_webhook(&event(posted.clone()), None), posted);
        let cut = contract_webhook(&event(posted), Some(&["taskId".to_string()]));
        assert_eq!(cut["data"], json!({"taskId": "tsk_3001"}));
    }

    #[test]
    fn picking_fields_from_something_that_is_not_an_object_gives_an_empty_object() {
        assert_eq!(pick(&json!([1, 2]), &["a".to_string()]), json!({}));
        assert_eq!(pick(&json!({"a": {"b": 1}}), &["a.b.c".to_string()]), json!({}));
        assert_eq!(pick(&json!({"a": {"b": 1, "c": 2}}), &["a".to_string()]), json!({"a": {"b": 1, "c": 2}}));
    }

    #[test]
    fn data_fields_that_make_no_sense_are_refused_naming_the_entry() {
        let ok = |v: &[&str]| validate_data_fields(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert!(ok(&["taskId", "result.url"]).is_ok());
        let fields = |v: &[&str]| ok(v).unwrap_err().into_iter().map(|e| e.field).collect::<Vec<_>>();
        assert_eq!(fields(&[]), ["data_fields"]);
        assert_eq!(fields(&["a", ""]), ["data_fields[1]"]);
        assert_eq!(fields(&["a..b"]), ["data_fields[0]"]);
        assert_eq!(fields(&["a", "a"]), ["data_fields[1]"]);
        assert_eq!(
            fields(&["", "b", "b", "c..d"]),
            ["data_fields[0]", "data_fields[2]", "data_fields[3]"],
            "every entry"
        );
        let long = "x".repeat(MAX_DATA_FIELD_LEN + 1);
        assert_eq!(fields(&[long.as_str()]), ["data_fields[0]"]);
        let many: Vec<String> = (0..=MAX_DATA_FIELDS).map(|i| format!("f{i}")).collect();
        assert_eq!(validate_data_fields(&many).unwrap_err()[0].field, "data_fields");
    }
}
