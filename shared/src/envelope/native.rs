//! The native envelope, Hookline's own `{id?, type, data, ...}`, and its
//! event type rule. Over EventBridge the bus's `detail-type` and `source` may
//! stand in for `type` and `producer`.

use serde_json::{Map, Value};

use super::fields::{check_type_len, show_char, Obj};
use super::{EnvelopeError, Fields};

/// Native envelope: `type` (or the EventBridge default) and `data` required;
/// `id`, `tenant_id`, `partition_key`, `trace_id`, `producer` optional
/// non-blank strings and `occurred_at` an optional RFC 3339 timestamp (`null`
/// counts as absent for all of them). `data` may be any JSON value, `null`
/// included: only its presence is required.
pub(super) fn native(
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
        idempotency_key: None,
        event_type,
        tenant_id: o.opt_str("tenant_id")?.map(str::to_string),
        partition_key: o.opt_str("partition_key")?.map(str::to_string),
        sequence: None,
        trace_id: o.opt_str("trace_id")?.map(str::to_string),
        producer: o.opt_str("producer")?.or(default_producer).map(str::to_string),
        occurred_at: o.opt_timestamp("occurred_at")?,
    })
}

/// Native type rule: 1 to [`MAX_EVENT_TYPE_LEN`] characters from
/// `A-Z a-z 0-9 . _ : -`, the characters routing patterns are built from.
///
/// [`MAX_EVENT_TYPE_LEN`]: super::MAX_EVENT_TYPE_LEN
fn check_native_type(field: &str, t: &str) -> Result<(), EnvelopeError> {
    check_type_len(field, t)?;
    if let Some(c) = t.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))) {
        return Err(EnvelopeError::invalid(
            field,
            format!("contains {}, which is not allowed; use only letters, digits, `.`, `_`, `:` and `-`", show_char(c)),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::envelope::normalize;
    use crate::envelope::testkit::expect_err;
    use serde_json::json;

    /// Only `type` and `data` are required in a native envelope.
    #[test]
    fn native_minimal_and_null_optionals() {
        let n = normalize(br#"{"type":"a","data":null}"#, None).unwrap();
        assert_eq!(n.id, None);
        assert_eq!(n.event_type, "a");
        let n = normalize(br#"{"type":"a","data":1,"id":null,"occurred_at":null}"#, None).unwrap();
        assert_eq!((n.id, n.occurred_at), (None, None));
        expect_err(normalize(br#"{"type":"a"}"#, None), "missing_field", Some("data"));
        expect_err(normalize(br#"{"data":{}}"#, None), "missing_field", Some("type"));
        expect_err(normalize(br#"{"type":"a","data":1,"id":5}"#, None), "invalid_type", Some("id"));
        expect_err(normalize(br#"{"type":"a","data":1,"id":" "}"#, None), "invalid_field", Some("id"));
    }

    /// The `Idempotency-Key` header counts only for an envelope without `id`:
    /// an envelope's own id wins and the key is ignored.
    #[test]
    fn an_outside_key_applies_only_without_an_id() {
        let n = normalize(br#"{"type":"a","data":1}"#, None).unwrap();
        assert_eq!(n.idempotency_key, None, "a native envelope carries no key itself");
        assert_eq!(n.clone().with_idempotency_key(Some("k1")).idempotency_key.as_deref(), Some("k1"));
        assert_eq!(n.with_idempotency_key(None).idempotency_key, None);
        let n = normalize(br#"{"id":"e1","type":"a","data":1}"#, None).unwrap().with_idempotency_key(Some("k1"));
        assert_eq!((n.id.as_deref(), n.idempotency_key), (Some("e1"), None));
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
            let e = expect_err(normalize(body.as_bytes(), None), "invalid_field", Some("type"));
            assert!(e.to_string().starts_with("invalid field `type`: "), "{e}");
        }
        let e = normalize(br#"{"type":"a b","data":{}}"#, None).unwrap_err();
        assert!(e.to_string().contains("a space"), "{e}");
        let e = normalize(br#"{"type":7,"data":{}}"#, None).unwrap_err();
        assert_eq!(e.to_string(), "invalid field `type`: expected a string, got a number");
    }
}
