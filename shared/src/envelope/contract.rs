//! The event contract v1 envelope (docs/formats.md#contract-v1): `{eventId, eventType,
//! version, occurredAt, traceId, producer, idempotencyKey, tenantId?,
//! riskFlags?, payload}`, and its lower-case dotted event type rule.

use serde_json::{Map, Value};

use super::fields::{check_type_len, show, Obj};
use super::{EnvelopeError, Fields};

/// Contract-v1 envelope (docs/formats.md#contract-v1): `eventId, eventType, version,
/// occurredAt, traceId, producer, idempotencyKey, payload` required,
/// `tenantId` an optional non-blank string and `riskFlags` an optional array
/// of strings (`null` counts as absent for both).
/// The event is deduplicated on `idempotencyKey` per tenant, not on
/// `eventId` ([`crate::ids::idempotent_event_id`]): the contract makes the
/// key the producer's idempotency promise, and a producer that retries a
/// step may mint a new `eventId` for the same key.
/// `eventType` is lower-case dotted `domain.action`
/// (`^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$`, at most [`MAX_EVENT_TYPE_LEN`];
/// `task.step.updated` and `task.succeeded.v2` pass), `version` a
/// positive integer, `payload` an object.
///
/// [`MAX_EVENT_TYPE_LEN`]: super::MAX_EVENT_TYPE_LEN
pub(super) fn contract(obj: &Map<String, Value>) -> Result<Fields, EnvelopeError> {
    if is_webhook_shape(obj) {
        return webhook(obj);
    }
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
    let Head { id, event_type, occurred_at, trace } = head(&o)?;
    let producer = o.req_str("producer")?;
    let idempotency_key = o.req_str("idempotencyKey")?;
    check_risk_flags(obj)?;
    o.req_object("payload")?;
    Ok(Fields {
        id: Some(id.to_string()),
        idempotency_key: Some(idempotency_key.to_string()),
        event_type: event_type.to_string(),
        tenant_id: o.opt_str("tenantId")?.map(str::to_string),
        partition_key: None,
        sequence: None,
        trace_id: Some(trace.to_string()),
        producer: Some(producer.to_string()),
        occurred_at: Some(occurred_at),
    })
}

/// The contract's public webhook body (`{eventId, eventType, version,
/// occurredAt, traceId, data}` with optional `executionProfile` and
/// `riskFlags`: what a `contract-webhook` subscription receives) rather than
/// the internal envelope: `data` in place of `payload`, and neither
/// `producer` nor `idempotencyKey`.
fn is_webhook_shape(obj: &Map<String, Value>) -> bool {
    obj.contains_key("data") && !["payload", "producer", "idempotencyKey"].iter().any(|k| obj.contains_key(*k))
}

/// A posted webhook-shaped body (docs/formats.md#contract-webhook-bodies):
/// an event someone already published in the contract's public shape,
/// relayed into Hookline. It is an event like another: `eventId` is its id
/// (deduplicated per tenant, `tenantId` optional), `eventType`, `version`,
/// `occurredAt` and `traceId` as in the envelope, `data` an object,
/// `executionProfile` an optional string, `riskFlags` an optional array of
/// strings. Delivered as posted; to a `contract-webhook` subscription it
/// maps onto itself.
fn webhook(obj: &Map<String, Value>) -> Result<Fields, EnvelopeError> {
    let o = Obj::root(obj);
    o.require_all(&["eventId", "eventType", "version", "occurredAt", "traceId", "data"])?;
    let Head { id, event_type, occurred_at, trace } = head(&o)?;
    check_risk_flags(obj)?;
    match obj.get("executionProfile") {
        None | Some(Value::Null) | Some(Value::String(_)) => {}
        Some(other) => return Err(EnvelopeError::wrong_type("executionProfile", "a string", other)),
    }
    o.req_object("data")?;
    Ok(Fields {
        id: Some(id.to_string()),
        idempotency_key: None,
        event_type: event_type.to_string(),
        tenant_id: o.opt_str("tenantId")?.map(str::to_string),
        partition_key: None,
        sequence: None,
        trace_id: Some(trace.to_string()),
        producer: None,
        occurred_at: Some(occurred_at),
    })
}

/// The members the envelope and the webhook shape share.
struct Head<'a> {
    id: &'a str,
    event_type: &'a str,
    occurred_at: chrono::DateTime<chrono::Utc>,
    trace: &'a str,
}

/// Reads and checks [`Head`]: `eventId`, `eventType` (dotted), `version`
/// (positive), `occurredAt`, `traceId`.
fn head<'a>(o: &Obj<'a>) -> Result<Head<'a>, EnvelopeError> {
    let id = o.req_str("eventId")?;
    let event_type = o.req_str("eventType")?;
    check_dotted_type("eventType", event_type)?;
    o.req_positive_int("version")?;
    Ok(Head { id, event_type, occurred_at: o.req_timestamp("occurredAt")?, trace: o.req_str("traceId")? })
}

/// `riskFlags`: absent, `null`, or an array of strings.
fn check_risk_flags(obj: &Map<String, Value>) -> Result<(), EnvelopeError> {
    match obj.get("riskFlags") {
        None | Some(Value::Null) => {}
        Some(Value::Array(flags)) => {
            for (i, flag) in flags.iter().enumerate() {
                if !flag.is_string() {
                    return Err(EnvelopeError::wrong_type(format!("riskFlags[{i}]"), "a string", flag));
                }
            }
        }
        Some(other) => return Err(EnvelopeError::wrong_type("riskFlags", "an array of strings", other)),
    }
    Ok(())
}

/// Contract-v1 type rule (docs/formats.md#contract-v1): lower-case dotted `domain.action`,
/// `^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$`.
fn check_dotted_type(field: &str, t: &str) -> Result<(), EnvelopeError> {
    check_type_len(field, t)?;
    let mut parts = t.split('.');
    let first = parts.next().unwrap_or("");
    let first_ok = first.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && first.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    let rest: Vec<&str> = parts.collect();
    let rest_ok = !rest.is_empty()
        && rest
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'));
    if first_ok && rest_ok {
        Ok(())
    } else {
        Err(EnvelopeError::invalid(
            field,
            format!("must be lower-case dotted `domain.action` (e.g. task.succeeded); got {}", show(t)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use crate::envelope::testkit::{expect_err, obj, run, CONTRACT};
    use serde_json::{json, Value};

    /// The public webhook shape, posted, is an event: its eventId the id,
    /// no producer and no idempotency key; its own rules name the field.
    #[test]
    fn a_webhook_shaped_body_is_an_event() {
        let body = json!({"eventId": "evt_webhook_001", "eventType": "task.succeeded", "version": 1,
            "occurredAt": "2026-02-19T10:12:00Z", "traceId": "req_abcd", "executionProfile": "FAST",
            "riskFlags": ["MODEL_LICENSE_REVIEW_PENDING"], "data": {"taskId": "tsk_3001"}});
        let n = run(body.as_object().unwrap(), None).expect("accepted");
        assert_eq!(n.format, crate::envelope::Format::Contract);
        assert_eq!((n.id.as_deref(), n.idempotency_key.as_deref()), (Some("evt_webhook_001"), None));
        assert_eq!((n.trace_id.as_deref(), n.producer.as_deref()), (Some("req_abcd"), None));
        let mut m = body.as_object().unwrap().clone();
        m.insert("data".into(), json!("text"));
        expect_err(run(&m, None), "invalid_type", Some("data"));
        let mut m = body.as_object().unwrap().clone();
        m.insert("executionProfile".into(), json!(3));
        expect_err(run(&m, None), "invalid_type", Some("executionProfile"));
        let mut m = body.as_object().unwrap().clone();
        m.remove("traceId");
        expect_err(run(&m, None), "missing_field", Some("traceId"));
    }

    /// Wrong JSON types are InvalidField with an "expected ..." reason.
    #[test]
    fn wrong_types() {
        let mut m = obj(CONTRACT);
        m.insert("payload".into(), json!([1]));
        expect_err(run(&m, None), "invalid_type", Some("payload"));

        let mut m = obj(CONTRACT);
        m.insert("riskFlags".into(), json!(["A", 2]));
        expect_err(run(&m, None), "invalid_type", Some("riskFlags[1]"));
        m.insert("riskFlags".into(), json!("A"));
        expect_err(run(&m, None), "invalid_type", Some("riskFlags"));
        m.insert("riskFlags".into(), Value::Null);
        assert!(run(&m, None).is_ok());

        // A number that is no positive integer breaks the rule; a string is
        // not a number at all.
        for (field, bad, code) in [
            ("version", json!(0), "invalid_field"),
            ("version", json!(-1), "invalid_field"),
            ("version", json!(1.5), "invalid_field"),
            ("version", json!("1"), "invalid_type"),
        ] {
            let mut m = obj(CONTRACT);
            m.insert(field.into(), bad);
            let e = expect_err(run(&m, None), code, Some(field));
            assert!(e.to_string().contains("positive integer"), "{e}");
        }
    }

    /// The event is deduplicated on `idempotencyKey`, which follows the id
    /// rule and names itself when it breaks it; `tenantId` is optional, and
    /// an envelope carrying it is still detected as a contract.
    #[test]
    fn idempotency_key_and_tenant() {
        let k = run(&obj(CONTRACT), None).unwrap();
        assert_eq!((k.id.as_deref(), k.idempotency_key.as_deref()), (Some("evt_1"), Some("task:1:success")));
        assert_eq!(k.tenant_id, None);

        let mut m = obj(CONTRACT);
        m.insert("tenantId".into(), json!("acme"));
        let k = run(&m, None).unwrap();
        assert_eq!((k.format, k.tenant_id.as_deref()), (crate::envelope::Format::Contract, Some("acme")));
        m.insert("tenantId".into(), Value::Null);
        assert_eq!(run(&m, None).unwrap().tenant_id, None);
        for (bad, text, code) in [
            (json!(" "), "must not be empty", "invalid_field"),
            (json!(7), "expected a string", "invalid_type"),
            (json!("a\nb"), "printable", "invalid_field"),
        ] {
            m.insert("tenantId".into(), bad);
            let e = expect_err(run(&m, None), code, Some("tenantId"));
            assert!(e.to_string().contains(text), "{e}");
        }

        let mut m = obj(CONTRACT);
        for (bad, reason) in [
            (json!(""), "must not be empty"),
            (json!("k\r\nINFO forged"), "printable"),
            (json!("k".repeat(crate::envelope::MAX_ID_BYTES + 1)), "the maximum is 256 bytes"),
        ] {
            m.insert("idempotencyKey".into(), bad);
            let e = expect_err(run(&m, None), "invalid_field", Some("idempotencyKey"));
            assert!(e.to_string().contains(reason), "{e}");
        }
        m.insert("idempotencyKey".into(), json!("ledger:led_001:committed/é #1"));
        assert_eq!(run(&m, None).unwrap().idempotency_key.as_deref(), Some("ledger:led_001:committed/é #1"));
    }

    /// An `Idempotency-Key` from outside never replaces what a contract
    /// envelope carries.
    #[test]
    fn an_outside_key_is_ignored() {
        let k = run(&obj(CONTRACT), None).unwrap().with_idempotency_key(Some("header-key"));
        assert_eq!(k.idempotency_key.as_deref(), Some("task:1:success"));
    }

    /// Event types the contract format accepts and refuses.
    #[test]
    fn bad_event_types() {
        for ok in ["task.created", "task.step.updated", "task.succeeded.v2", "account.delete.requested", "a1_b.c_2"] {
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
    }
}
