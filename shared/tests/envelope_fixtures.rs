//! Every JSON example the producer formats were built from, as a fixture for
//! `shared::envelope` (docs/formats.md#producer-formats: each producer format
//! must be accepted exactly as producers send it).
//!
//! The files under `tests/fixtures/envelopes/` are those examples byte for
//! byte: `change_feed_*` (docs/formats.md#change-feed), `domain_event_*`
//! (docs/formats.md#domain-event) and `contract_*` (docs/formats.md#contract-v1).
//! Payload-only examples are wrapped in their format's envelope here.

use chrono::{DateTime, Utc};
use serde_json::Value;
use shared::envelope::{normalize, EnvelopeError, Format, Normalized};

/// Loads one fixture file by name, at compile time.
macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!("fixtures/envelopes/", $name, ".json"))
    };
}

/// The change-feed message envelope (docs/formats.md#change-feed).
const CHANGE_FEED_ENVELOPE: &str = fixture!("change_feed_envelope");
/// The common domain-event envelope (docs/formats.md#domain-event).
const DOMAIN_EVENT_ENVELOPE: &str = fixture!("domain_event_envelope");
/// The generic contract-v1 envelope (docs/formats.md#contract-v1).
const CONTRACT_ENVELOPE: &str = fixture!("contract_envelope");
/// The contract-v1 task.failed example.
const CONTRACT_TASK_FAILED: &str = fixture!("contract_task_failed");
/// The contract-v1 quota.committed example.
const CONTRACT_QUOTA_COMMITTED: &str = fixture!("contract_quota_committed");
/// An outbound webhook body (what Hookline delivers; not a producer envelope:
/// docs/formats.md#detection-and-the-format-parameter).
const OUTBOUND_WEBHOOK: &str = fixture!("contract_webhook_task_succeeded");

/// Change-feed payload examples (two entity types and a merged snapshot):
/// (name, entity_type, change_type, payload).
const CHANGE_FEED_PAYLOADS: &[(&str, &str, &str, &str)] = &[
    ("3.1 UserProfile", "UserProfile", "updated", fixture!("change_feed_payload_user_profile")),
    (
        "3.2 NotificationPreference",
        "NotificationPreference",
        "updated",
        fixture!("change_feed_payload_notification_preference"),
    ),
    ("4 merged snapshot", "UserProfile", "merged", fixture!("change_feed_payload_merged_snapshot")),
];

/// The twenty domain-event payload examples, keyed by the event type they belong to.
const DOMAIN_EVENT_PAYLOADS: &[(&str, &str)] = &[
    ("RecordCreated", fixture!("domain_event_payload_RecordCreated")),
    ("RecordUpdated", fixture!("domain_event_payload_RecordUpdated")),
    ("RecordDeleted", fixture!("domain_event_payload_RecordDeleted")),
    ("OwnerChanged", fixture!("domain_event_payload_OwnerChanged")),
    ("StageChanged", fixture!("domain_event_payload_StageChanged")),
    ("LeadConverted", fixture!("domain_event_payload_LeadConverted")),
    ("ApprovalSubmitted", fixture!("domain_event_payload_ApprovalSubmitted")),
    ("ApprovalDecided", fixture!("domain_event_payload_ApprovalDecided")),
    ("MetadataChanged", fixture!("domain_event_payload_MetadataChanged")),
    ("PermissionChanged", fixture!("domain_event_payload_PermissionChanged")),
    ("SharingUpdated", fixture!("domain_event_payload_SharingUpdated")),
    ("RoleHierarchyChanged", fixture!("domain_event_payload_RoleHierarchyChanged")),
    ("GroupMemberChanged", fixture!("domain_event_payload_GroupMemberChanged")),
    ("TeamMemberChanged", fixture!("domain_event_payload_TeamMemberChanged")),
    ("TerritoryAssignmentChanged", fixture!("domain_event_payload_TerritoryAssignmentChanged")),
    ("SharingConfigChanged", fixture!("domain_event_payload_SharingConfigChanged")),
    ("AutomationConfigChanged", fixture!("domain_event_payload_AutomationConfigChanged")),
    ("ApprovalConfigChanged", fixture!("domain_event_payload_ApprovalConfigChanged")),
    ("SharingRebuildCompleted", fixture!("domain_event_payload_SharingRebuildCompleted")),
    ("CampaignMemberChanged", fixture!("domain_event_payload_CampaignMemberChanged")),
];

/// The routed fields a fixture must normalize to.
struct Expected {
    /// Expected `Normalized::id`.
    id: &'static str,
    /// Expected `Normalized::event_type`.
    event_type: &'static str,
    /// Expected `Normalized::tenant_id`.
    tenant: Option<&'static str>,
    /// Expected `Normalized::partition_key`.
    partition_key: Option<&'static str>,
    /// Expected `Normalized::sequence`.
    sequence: Option<&'static str>,
    /// Expected `Normalized::trace_id`.
    trace: Option<&'static str>,
    /// Expected `Normalized::producer`.
    producer: Option<&'static str>,
    /// Expected `Normalized::occurred_at`, RFC 3339.
    occurred_at: &'static str,
    /// Expected `Normalized::format`.
    format: Format,
}

/// Parses an RFC 3339 literal of a test expectation.
fn ts(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// Normalizes a fixture both auto-detected and with its format named, and
/// checks every routed field, the untouched body and the absence of redaction.
fn check(raw: &str, want: Expected) -> Normalized {
    let n = normalize(raw.as_bytes(), None).unwrap_or_else(|e| panic!("refused: {e}"));
    let named = normalize(raw.as_bytes(), Some(want.format)).unwrap();
    assert_eq!(n, named, "auto-detection and the named format disagree");
    assert_eq!(n.format, want.format);
    assert_eq!(n.id.as_deref(), Some(want.id));
    assert_eq!(n.event_type, want.event_type);
    assert_eq!(n.tenant_id.as_deref(), want.tenant);
    assert_eq!(n.partition_key.as_deref(), want.partition_key);
    assert_eq!(n.sequence.as_deref(), want.sequence);
    assert_eq!(n.trace_id.as_deref(), want.trace);
    assert_eq!(n.producer.as_deref(), want.producer);
    assert_eq!(n.occurred_at, Some(ts(want.occurred_at)));
    assert_eq!(n.body, raw.as_bytes(), "the original bytes must be kept");
    assert!(n.redacted.is_empty(), "nothing to redact: {:?}", n.redacted);
    n
}

/// The change-feed message envelope (docs/formats.md#change-feed).
#[test]
fn change_feed_envelope() {
    check(
        CHANGE_FEED_ENVELOPE,
        Expected {
            id: "de305d54-75b4-431b-adb2-eb6b9e546014",
            event_type: "UserProfile.updated",
            tenant: None,
            partition_key: Some("UserProfile:9b9a67cf-5036-4d53-8064-1472e6a54f3a"),
            sequence: None,
            trace: None,
            producer: None,
            occurred_at: "2025-10-19T01:23:46Z",
            format: Format::ChangeFeed,
        },
    );
}

/// Each change-feed payload example, in the change-feed envelope, is accepted,
/// for its own change type and for every other one.
#[test]
fn change_feed_payloads_in_envelope() {
    for (name, entity_type, change_type, payload) in CHANGE_FEED_PAYLOADS {
        for ct in [*change_type, "created", "updated", "deleted", "merged"] {
            let mut env: Value = serde_json::from_str(CHANGE_FEED_ENVELOPE).unwrap();
            env["entity_type"] = Value::from(*entity_type);
            env["change_type"] = Value::from(ct);
            env["payload"] = serde_json::from_str(payload).unwrap();
            let raw = serde_json::to_vec_pretty(&env).unwrap();
            let n = normalize(&raw, None).unwrap_or_else(|e| panic!("{name} ({ct}): {e}"));
            assert_eq!(n.format, Format::ChangeFeed, "{name}");
            assert_eq!(n.event_type, format!("{entity_type}.{ct}"), "{name}");
            assert_eq!(
                n.partition_key.as_deref(),
                Some(format!("{entity_type}:9b9a67cf-5036-4d53-8064-1472e6a54f3a").as_str())
            );
            assert_eq!(n.body, raw, "{name}");
        }
    }
}

/// The common domain-event envelope (docs/formats.md#domain-event), placeholders and all.
#[test]
fn domain_event_envelope() {
    check(
        DOMAIN_EVENT_ENVELOPE,
        Expected {
            id: "uuid",
            event_type: "RecordUpdated",
            tenant: Some("uuid"),
            partition_key: Some("Opportunity:tenantId:recordId"),
            sequence: Some("2026-01-10T12:34:56.789Z"),
            trace: Some("uuid"),
            producer: Some("core-platform"),
            occurred_at: "2026-01-10T12:34:56.789Z",
            format: Format::DomainEvent,
        },
    );
}

/// All twenty domain-event payload examples, each spliced as text into the
/// common envelope under its own event type, are accepted with the body kept.
#[test]
fn domain_event_payloads_in_envelope() {
    assert_eq!(DOMAIN_EVENT_PAYLOADS.len(), 20);
    assert!(DOMAIN_EVENT_ENVELOPE.contains("\"payload\": { }"));
    for (event_type, payload) in DOMAIN_EVENT_PAYLOADS {
        let raw = DOMAIN_EVENT_ENVELOPE
            .replace("\"payload\": { }", &format!("\"payload\": {}", payload.trim_end()))
            .replace("\"RecordUpdated\"", &format!("\"{event_type}\""));
        let n = normalize(raw.as_bytes(), None).unwrap_or_else(|e| panic!("{event_type}: {e}"));
        assert_eq!(n.format, Format::DomainEvent, "{event_type}");
        assert_eq!(n.event_type, *event_type);
        assert_eq!(n.tenant_id.as_deref(), Some("uuid"));
        assert_eq!(n.partition_key.as_deref(), Some("Opportunity:tenantId:recordId"));
        assert_eq!(n.body, raw.as_bytes(), "{event_type}");
        let stored: Value = serde_json::from_slice(&n.body).unwrap();
        let original: Value = serde_json::from_str(payload).unwrap();
        assert_eq!(stored["payload"], original, "{event_type}");
    }
}

/// The `"..."` placeholder of many domain-event examples is a valid opaque recordVersion.
#[test]
fn domain_event_placeholder_record_version() {
    let raw =
        DOMAIN_EVENT_ENVELOPE.replace("\"recordVersion\": \"2026-01-10T12:34:56.789Z\"", "\"recordVersion\": \"...\"");
    assert_ne!(raw, DOMAIN_EVENT_ENVELOPE);
    let n = normalize(raw.as_bytes(), None).unwrap();
    assert_eq!(n.sequence.as_deref(), Some("..."));
}

/// The generic contract-v1 envelope (empty riskFlags and payload).
#[test]
fn contract_envelope() {
    check(
        CONTRACT_ENVELOPE,
        Expected {
            id: "evt_01HXX...",
            event_type: "task.succeeded",
            tenant: None,
            partition_key: None,
            sequence: None,
            trace: Some("req_7f8a..."),
            producer: Some("worker-orchestrator"),
            occurred_at: "2026-02-19T10:00:00Z",
            format: Format::Contract,
        },
    );
}

/// The contract-v1 task.failed example.
#[test]
fn contract_task_failed() {
    check(
        CONTRACT_TASK_FAILED,
        Expected {
            id: "evt_task_failed_001",
            event_type: "task.failed",
            tenant: None,
            partition_key: None,
            sequence: None,
            trace: Some("req_abcd"),
            producer: Some("worker-orchestrator"),
            occurred_at: "2026-02-19T10:10:00Z",
            format: Format::Contract,
        },
    );
}

/// The contract-v1 quota.committed example.
#[test]
fn contract_quota_committed() {
    check(
        CONTRACT_QUOTA_COMMITTED,
        Expected {
            id: "evt_quota_committed_001",
            event_type: "quota.committed",
            tenant: None,
            partition_key: None,
            sequence: None,
            trace: Some("req_abcd"),
            producer: Some("quota-service"),
            occurred_at: "2026-02-19T10:11:00Z",
            format: Format::Contract,
        },
    );
}

/// Every event type the contract-v1 producers use is accepted (including
/// `task.step.updated` and the `task.succeeded.v2` suffix), and spellings that
/// break the `domain.action` rule (docs/formats.md#contract-v1) are refused.
#[test]
fn contract_event_types() {
    let ok = [
        "task.created",
        "task.step.updated",
        "task.succeeded",
        "task.failed",
        "task.canceled",
        "subscription.activated",
        "quota.held",
        "quota.committed",
        "quota.released",
        "account.delete.requested",
        "subscription.expiring",
        "account.delete.completed",
        "task.succeeded.v2",
    ];
    for t in ok {
        let raw = CONTRACT_ENVELOPE.replace("\"task.succeeded\"", &format!("\"{t}\""));
        assert_eq!(normalize(raw.as_bytes(), None).unwrap().event_type, t);
    }
    for t in ["TaskCreated", "task_created"] {
        let raw = CONTRACT_ENVELOPE.replace("\"task.succeeded\"", &format!("\"{t}\""));
        let e = normalize(raw.as_bytes(), None).unwrap_err();
        assert_eq!(e.field(), Some("eventType"), "{t}");
        assert!(e.to_string().contains("domain.action"), "{e}");
    }
}

/// The outbound webhook example is what a `contract-webhook` subscription
/// receives; posted, it is an event too (docs/formats.md#contract-webhook-bodies):
/// the contract format, `eventId` its id, no producer and no idempotency
/// key. Half of each shape is refused, naming what is missing.
#[test]
fn outbound_webhook_example_is_accepted_as_a_relayed_event() {
    for format in [None, Some(Format::Contract)] {
        let n = normalize(OUTBOUND_WEBHOOK.as_bytes(), format).unwrap();
        assert_eq!(n.format, Format::Contract);
        assert_eq!((n.id.as_deref(), n.idempotency_key.as_deref()), (Some("evt_webhook_001"), None));
        assert_eq!(
            (n.event_type.as_str(), n.trace_id.as_deref(), n.producer.as_deref()),
            ("task.succeeded", Some("req_abcd"), None)
        );
    }
    // With a producer it is the internal envelope, which needs the rest.
    let mut v: Value = serde_json::from_str(OUTBOUND_WEBHOOK).unwrap();
    v["producer"] = Value::from("webhook-dispatcher");
    let e = normalize(&serde_json::to_vec(&v).unwrap(), None).unwrap_err();
    assert_eq!(e.field(), Some("idempotencyKey"));
    v["idempotencyKey"] = Value::from("task:tsk_3001:succeeded");
    let e = normalize(&serde_json::to_vec(&v).unwrap(), None).unwrap_err();
    assert_eq!(e.field(), Some("payload"));
    let data = v.as_object_mut().unwrap().remove("data").unwrap();
    v["payload"] = data;
    let n = normalize(&serde_json::to_vec(&v).unwrap(), None).unwrap();
    assert_eq!(n.idempotency_key.as_deref(), Some("task:tsk_3001:succeeded"));
    // The webhook shape without its trace id names it.
    let mut w: Value = serde_json::from_str(OUTBOUND_WEBHOOK).unwrap();
    w.as_object_mut().unwrap().remove("traceId");
    let e = normalize(&serde_json::to_vec(&w).unwrap(), None).unwrap_err();
    assert_eq!(e, EnvelopeError::MissingField { field: "traceId".into() });
}

/// No fixture carries a sensitive key (docs/formats.md#redaction), so every
/// fixture is stored byte for byte.
#[test]
fn fixtures_need_no_redaction() {
    let mut all = vec![
        CHANGE_FEED_ENVELOPE,
        DOMAIN_EVENT_ENVELOPE,
        CONTRACT_ENVELOPE,
        CONTRACT_TASK_FAILED,
        CONTRACT_QUOTA_COMMITTED,
    ];
    all.extend(CHANGE_FEED_PAYLOADS.iter().map(|p| p.3));
    all.extend(DOMAIN_EVENT_PAYLOADS.iter().map(|p| p.1));
    for raw in all {
        let (body, paths) = shared::envelope::redact_sensitive(raw.as_bytes()).unwrap();
        assert!(paths.is_empty());
        assert_eq!(body.as_ref(), raw.as_bytes());
    }
}
