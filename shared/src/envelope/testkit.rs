//! Test fixtures shared by the envelope modules' unit tests: one valid
//! envelope per format, as in docs/formats.md, and helpers that edit
//! one field of a fixture and check the error.

use serde_json::{Map, Value};

use super::{normalize, EnvelopeError, Format, Normalized};

/// A valid native envelope used as the base of many cases.
pub(super) const NATIVE: &str = r#"{"id":"evt_1","type":"order.created","data":{"n":1},"tenant_id":"t1","partition_key":"order:1","occurred_at":"2026-01-10T12:34:56.789Z","trace_id":"tr_1","producer":"shop"}"#;

/// A valid change-feed envelope (docs/formats.md#change-feed, compacted).
pub(super) const CHANGE_FEED: &str = r#"{"id":"de305d54","entity_type":"UserProfile","entity_id":"9b9a","change_type":"updated","published_at":"2025-10-19T01:23:46Z","payload":{"actor":"user:ops-001","before":{"status":"active"},"after":{"status":"active"},"diff":{},"recorded_at":"2025-10-19T01:23:45Z"}}"#;

/// A valid domain-event envelope (docs/formats.md#domain-event, compacted).
pub(super) const DOMAIN: &str = r#"{"eventId":"uuid","schemaVersion":1,"eventType":"RecordUpdated","occurredAt":"2026-01-10T12:34:56.789Z","tenantId":"uuid","producer":{"service":"core-platform","instanceId":"pod-xyz"},"correlationId":"uuid","sequence":{"partitionKey":"Opportunity:tenantId:recordId","recordVersion":"2026-01-10T12:34:56.789Z"},"payload":{}}"#;

/// A valid contract-v1 envelope (docs/formats.md#contract-v1, compacted).
pub(super) const CONTRACT: &str = r#"{"eventId":"evt_1","eventType":"task.succeeded","version":1,"occurredAt":"2026-02-19T10:00:00Z","traceId":"req_1","producer":"worker-orchestrator","idempotencyKey":"task:1:success","riskFlags":[],"payload":{}}"#;

/// Parses a fixture into an object so a test can change one field.
pub(super) fn obj(s: &str) -> Map<String, Value> {
    serde_json::from_str::<Value>(s).unwrap().as_object().unwrap().clone()
}

/// Normalizes an edited fixture.
pub(super) fn run(m: &Map<String, Value>, f: Option<Format>) -> Result<Normalized, EnvelopeError> {
    normalize(&serde_json::to_vec(m).unwrap(), f)
}

/// Expects an error with the given code and field.
#[track_caller]
pub(super) fn expect_err(r: Result<Normalized, EnvelopeError>, code: &str, field: Option<&str>) -> EnvelopeError {
    let e = r.expect_err("should be refused");
    assert_eq!(e.code(), code, "{e}");
    assert_eq!(e.field(), field, "{e}");
    e
}
