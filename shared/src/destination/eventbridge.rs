//! EventBridge destinations: the `PutEvents` request (JSON protocol,
//! `X-Amz-Target: AWSEvents.PutEvents`) of one attempt, one entry, and its
//! limits.
//!
//! The entry:
//! - `Source`: [`SOURCE`] (`hookline`; a source may not start with `aws.`);
//! - `DetailType`: the event type (EventBridge takes up to 128 characters;
//!   an event type has at most 100, `MAX_EVENT_TYPE_LEN`);
//! - `Detail`: a JSON object `{"webhook": {<the delivery headers>},
//!   "payload": <the body an HTTPS delivery would POST, as JSON>}`:
//!   `webhook["webhook-id"]` is the same on every attempt, requeue and replay,
//!   so consumers dedupe on it; the signature headers are carried too, but
//!   EventBridge re-serializes `Detail`, so the exact bytes they sign are not
//!   promised (a bus is authenticated by its resource policy instead);
//! - `Time`: the delivery time; `TraceHeader` for a traced event (its
//!   `traceparent` in X-Ray's form);
//! - `EventBusName`: the bus ARN.
//!
//! Limits (EventBridge API reference, `PutEvents`; user guide, "Calculating
//! PutEvents event entry size"): an entry is less than 256 KB, counted as
//! 14 bytes for `Time` plus the UTF-8 bytes of `Source`, `DetailType`,
//! `Detail` and each resource; `Detail` must be a JSON object.

use super::{header, EventBus};

/// The `Source` of every entry Hookline puts.
pub const SOURCE: &str = "hookline";

/// The largest entry EventBridge accepts, counted as [`entry_size`] does.
pub const MAX_ENTRY_BYTES: usize = 262_144;

/// The delivery header that is not carried in `Detail.webhook`.
const LEFT_OUT: &str = "content-type";

/// Why an entry cannot be put at all (never worth a retry).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BusRefusal {
    /// The entry is larger than [`MAX_ENTRY_BYTES`].
    #[error("event entry of {0} bytes is larger than EventBridge's limit of {MAX_ENTRY_BYTES} bytes")]
    TooLarge(usize),
    /// The body is not JSON, so it cannot be a member of `Detail`.
    #[error("the body is not JSON, which an EventBridge entry's Detail must hold")]
    NotJson,
}

/// The size EventBridge counts for an entry: 14 bytes for `Time`, and the
/// UTF-8 bytes of `Source`, `DetailType` and `Detail`.
pub fn entry_size(detail_type: &str, detail: &str) -> usize {
    14 + SOURCE.len() + detail_type.len() + detail.len()
}

/// X-Ray's trace header for a W3C `traceparent`
/// (`00-<32 hex>-<16 hex>-<flags>` → `Root=1-<8 hex>-<24 hex>;Parent=<16 hex>;Sampled=<0|1>`);
/// `None` for anything else.
pub fn xray_trace_header(traceparent: &str) -> Option<String> {
    let parts: Vec<&str> = traceparent.split('-').collect();
    let [_, trace, parent, flags] = parts[..] else { return None };
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(trace, 32) || !hex(parent, 16) || !hex(flags, 2) {
        return None;
    }
    let sampled = u8::from_str_radix(flags, 16).ok()? & 1;
    Some(format!("Root=1-{}-{};Parent={parent};Sampled={sampled}", &trace[..8], &trace[8..]))
}

/// The JSON body of the `PutEvents` call delivering `body` with `headers`
/// to `bus` at `time` (seconds since the epoch).
pub fn put_events(
    bus: &EventBus,
    headers: &[(&str, String)],
    body: &[u8],
    time: i64,
) -> Result<serde_json::Value, BusRefusal> {
    let payload: serde_json::Value = serde_json::from_slice(body).map_err(|_| BusRefusal::NotJson)?;
    let webhook: serde_json::Map<String, serde_json::Value> = headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case(LEFT_OUT))
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.clone())))
        .collect();
    let detail = serde_json::json!({"webhook": webhook, "payload": payload}).to_string();
    let detail_type = header(headers, "hookline-event-type").unwrap_or("hookline.event").to_string();
    let size = entry_size(&detail_type, &detail);
    if size >= MAX_ENTRY_BYTES {
        return Err(BusRefusal::TooLarge(size));
    }
    let mut entry = serde_json::json!({
        "Source": SOURCE,
        "DetailType": detail_type,
        "Detail": detail,
        "EventBusName": bus.arn,
        "Time": time,
    });
    if let Some(t) = header(headers, "traceparent").and_then(xray_trace_header) {
        entry["TraceHeader"] = t.into();
    }
    Ok(serde_json::json!({"Entries": [entry]}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::destination::{parse, Destination};

    fn bus() -> EventBus {
        match parse("arn:aws:events:us-east-1:123456789012:event-bus/crm").unwrap() {
            Destination::EventBridge(b) => b,
            _ => unreachable!(),
        }
    }

    #[test]
    fn one_entry_with_the_payload_and_the_webhook_headers() {
        let headers = vec![
            ("content-type", "application/json".to_string()),
            ("webhook-id", "msg_1".to_string()),
            ("hookline-event-type", "task.done".to_string()),
            ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_string()),
        ];
        let r = put_events(&bus(), &headers, br#"{"a":1}"#, 1_700_000_000).unwrap();
        let e = &r["Entries"][0];
        assert_eq!(e["Source"], "hookline");
        assert_eq!(e["DetailType"], "task.done");
        assert_eq!(e["EventBusName"], bus().arn);
        assert_eq!(e["TraceHeader"], "Root=1-0af76519-16cd43dd8448eb211c80319c;Parent=b7ad6b7169203331;Sampled=1");
        let detail: serde_json::Value = serde_json::from_str(e["Detail"].as_str().unwrap()).unwrap();
        assert_eq!(detail["payload"], serde_json::json!({"a": 1}));
        assert_eq!(detail["webhook"]["webhook-id"], "msg_1");
        assert!(detail["webhook"].get("content-type").is_none());
    }

    #[test]
    fn too_large_or_not_json_is_refused() {
        let big = format!("\"{}\"", "a".repeat(MAX_ENTRY_BYTES));
        assert!(matches!(put_events(&bus(), &[], big.as_bytes(), 0), Err(BusRefusal::TooLarge(_))));
        assert_eq!(put_events(&bus(), &[], b"not json", 0), Err(BusRefusal::NotJson));
        assert_eq!(xray_trace_header("garbage"), None);
    }
}
