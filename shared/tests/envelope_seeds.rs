//! Every JSON example of the seed contracts, as a fixture for
//! `shared::envelope` (DESIGN "Producer formats": each producer format the
//! seeds show must be accepted exactly as they show it).
//!
//! The files under `tests/fixtures/envelopes/` are the seeds' JSON code blocks
//! copied byte for byte: seed 000 (change-feed contract), seed 001 (domain
//! events) and seed 003 (event contract v1). Payload-only examples are wrapped
//! in their seed's envelope here.

use chrono::{DateTime, Utc};
use serde_json::Value;
use shared::envelope::{normalize, EnvelopeError, Format, Normalized};

/// Loads one fixture file by name, at compile time.
macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!("fixtures/envelopes/", $name, ".json"))
    };
}

/// Seed 000 §2 message envelope.
const SEED000_ENVELOPE: &str = fixture!("seed000_envelope");
/// Seed 001 §1.3 common envelope.
const SEED001_ENVELOPE: &str = fixture!("seed001_envelope");
/// Seed 003 §5 EventEnvelope.
const SEED003_ENVELOPE: &str = fixture!("seed003_envelope");
/// Seed 003 §6.3 task.failed example.
const SEED003_TASK_FAILED: &str = fixture!("seed003_task_failed");
/// Seed 003 §6.3 quota.committed example.
const SEED003_QUOTA_COMMITTED: &str = fixture!("seed003_quota_committed");
/// Seed 003 §7.3 outbound webhook example (not a producer envelope).
const SEED003_WEBHOOK: &str = fixture!("seed003_webhook_task_succeeded");

/// Seed 000 §3 and §4 payload examples: (name, entity_type, change_type, payload).
const SEED000_PAYLOADS: &[(&str, &str, &str, &str)] = &[
    (
        "3.1 UserProfile",
        "UserProfile",
        "updated",
        fixture!("seed000_payload_user_profile"),
    ),
    (
        "3.2 NotificationPreference",
        "NotificationPreference",
        "updated",
        fixture!("seed000_payload_notification_preference"),
    ),
    (
        "4 merged snapshot",
        "UserProfile",
        "merged",
        fixture!("seed000_payload_merged_snapshot"),
    ),
];

/// Seed 001 §4.1–4.20 payload examples, keyed by the event type they belong to.
const SEED001_PAYLOADS: &[(&str, &str)] = &[
    ("RecordCreated", fixture!("seed001_payload_RecordCreated")),
    ("RecordUpdated", fixture!("seed001_payload_RecordUpdated")),
    ("RecordDeleted", fixture!("seed001_payload_RecordDeleted")),
    ("OwnerChanged", fixture!("seed001_payload_OwnerChanged")),
    ("StageChanged", fixture!("seed001_payload_StageChanged")),
    ("LeadConverted", fixture!("seed001_payload_LeadConverted")),
    (
        "ApprovalSubmitted",
        fixture!("seed001_payload_ApprovalSubmitted"),
    ),
    (
        "ApprovalDecided",
        fixture!("seed001_payload_ApprovalDecided"),
    ),
    (
        "MetadataChanged",
        fixture!("seed001_payload_MetadataChanged"),
    ),
    (
        "PermissionChanged",
        fixture!("seed001_payload_PermissionChanged"),
    ),
    ("SharingUpdated", fixture!("seed001_payload_SharingUpdated")),
    (
        "RoleHierarchyChanged",
        fixture!("seed001_payload_RoleHierarchyChanged"),
    ),
    (
        "GroupMemberChanged",
        fixture!("seed001_payload_GroupMemberChanged"),
    ),
    (
        "TeamMemberChanged",
        fixture!("seed001_payload_TeamMemberChanged"),
    ),
    (
        "TerritoryAssignmentChanged",
        fixture!("seed001_payload_TerritoryAssignmentChanged"),
    ),
    (
        "SharingConfigChanged",
        fixture!("seed001_payload_SharingConfigChanged"),
    ),
    (
        "AutomationConfigChanged",
        fixture!("seed001_payload_AutomationConfigChanged"),
    ),
    (
        "ApprovalConfigChanged",
        fixture!("seed001_payload_ApprovalConfigChanged"),
    ),
    (
        "SharingRebuildCompleted",
        fixture!("seed001_payload_SharingRebuildCompleted"),
    ),
    (
        "CampaignMemberChanged",
        fixture!("seed001_payload_CampaignMemberChanged"),
    ),
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

/// Seed 000 §2: the change-feed message envelope.
#[test]
fn seed000_envelope() {
    check(
        SEED000_ENVELOPE,
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

/// Seed 000 §3–4: each payload example, in the §2 envelope, is accepted, for
/// its own change type and for every other one.
#[test]
fn seed000_payloads_in_envelope() {
    for (name, entity_type, change_type, payload) in SEED000_PAYLOADS {
        for ct in [*change_type, "created", "updated", "deleted", "merged"] {
            let mut env: Value = serde_json::from_str(SEED000_ENVELOPE).unwrap();
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

/// Seed 001 §1.3: the common domain-event envelope, placeholders and all.
#[test]
fn seed001_envelope() {
    check(
        SEED001_ENVELOPE,
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

/// Seed 001 §4: all twenty payload examples, each spliced as text into the
/// §1.3 envelope under its own event type, are accepted with the body kept.
#[test]
fn seed001_payloads_in_envelope() {
    assert_eq!(SEED001_PAYLOADS.len(), 20);
    assert!(SEED001_ENVELOPE.contains("\"payload\": { }"));
    for (event_type, payload) in SEED001_PAYLOADS {
        let raw = SEED001_ENVELOPE
            .replace(
                "\"payload\": { }",
                &format!("\"payload\": {}", payload.trim_end()),
            )
            .replace("\"RecordUpdated\"", &format!("\"{event_type}\""));
        let n = normalize(raw.as_bytes(), None).unwrap_or_else(|e| panic!("{event_type}: {e}"));
        assert_eq!(n.format, Format::DomainEvent, "{event_type}");
        assert_eq!(n.event_type, *event_type);
        assert_eq!(n.tenant_id.as_deref(), Some("uuid"));
        assert_eq!(
            n.partition_key.as_deref(),
            Some("Opportunity:tenantId:recordId")
        );
        assert_eq!(n.body, raw.as_bytes(), "{event_type}");
        let stored: Value = serde_json::from_slice(&n.body).unwrap();
        let original: Value = serde_json::from_str(payload).unwrap();
        assert_eq!(stored["payload"], original, "{event_type}");
    }
}

/// Seed 001 §4: the `"..."` placeholder of many examples is a valid opaque recordVersion.
#[test]
fn seed001_placeholder_record_version() {
    let raw = SEED001_ENVELOPE.replace(
        "\"recordVersion\": \"2026-01-10T12:34:56.789Z\"",
        "\"recordVersion\": \"...\"",
    );
    assert_ne!(raw, SEED001_ENVELOPE);
    let n = normalize(raw.as_bytes(), None).unwrap();
    assert_eq!(n.sequence.as_deref(), Some("..."));
}

/// Seed 003 §5: the generic EventEnvelope (empty riskFlags and payload).
#[test]
fn seed003_envelope() {
    check(
        SEED003_ENVELOPE,
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

/// Seed 003 §6.3: the task.failed example.
#[test]
fn seed003_task_failed() {
    check(
        SEED003_TASK_FAILED,
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

/// Seed 003 §6.3: the quota.committed example.
#[test]
fn seed003_quota_committed() {
    check(
        SEED003_QUOTA_COMMITTED,
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

/// Seed 003 §4 and §6.1/§7.1: every event type the contract names is accepted
/// (including `task.step.updated` and the `task.succeeded.v2` suffix), and the
/// forbidden spellings of §4.1 that a pattern can tell apart are refused.
#[test]
fn seed003_event_types() {
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
        let raw = SEED003_ENVELOPE.replace("\"task.succeeded\"", &format!("\"{t}\""));
        assert_eq!(normalize(raw.as_bytes(), None).unwrap().event_type, t);
    }
    for t in ["TaskCreated", "task_created"] {
        let raw = SEED003_ENVELOPE.replace("\"task.succeeded\"", &format!("\"{t}\""));
        let e = normalize(raw.as_bytes(), None).unwrap_err();
        assert_eq!(e.field(), Some("eventType"), "{t}");
        assert!(e.to_string().contains("domain.action"), "{e}");
    }
}

/// Seed 003 §7.3: the outbound webhook example is what Hookline *delivers*,
/// not a producer envelope: it has `data` instead of `payload` and no
/// `producer` / `idempotencyKey`. It is refused, naming a missing field.
#[test]
fn seed003_webhook_example_is_refused() {
    for format in [None, Some(Format::Contract)] {
        let e = normalize(SEED003_WEBHOOK.as_bytes(), format).unwrap_err();
        assert_eq!(
            e,
            EnvelopeError::MissingField {
                field: "producer".into()
            }
        );
        assert_eq!(e.code(), "missing_field");
        assert_eq!(e.to_string(), "missing required field `producer`");
    }
    // Supplying each missing field in turn reveals the next one.
    let mut v: Value = serde_json::from_str(SEED003_WEBHOOK).unwrap();
    v["producer"] = Value::from("webhook-dispatcher");
    let e = normalize(&serde_json::to_vec(&v).unwrap(), None).unwrap_err();
    assert_eq!(e.field(), Some("idempotencyKey"));
    v["idempotencyKey"] = Value::from("task:tsk_3001:succeeded");
    let e = normalize(&serde_json::to_vec(&v).unwrap(), None).unwrap_err();
    assert_eq!(e.field(), Some("payload"));
    // With `data` renamed to `payload` it becomes a valid contract envelope.
    let data = v.as_object_mut().unwrap().remove("data").unwrap();
    v["payload"] = data;
    let n = normalize(&serde_json::to_vec(&v).unwrap(), None).unwrap();
    assert_eq!(n.event_type, "task.succeeded");
    assert_eq!(n.id.as_deref(), Some("evt_webhook_001"));
}

/// No seed example carries a sensitive key, so every fixture is stored byte for byte.
#[test]
fn seed_fixtures_need_no_redaction() {
    let mut all = vec![
        SEED000_ENVELOPE,
        SEED001_ENVELOPE,
        SEED003_ENVELOPE,
        SEED003_TASK_FAILED,
        SEED003_QUOTA_COMMITTED,
    ];
    all.extend(SEED000_PAYLOADS.iter().map(|p| p.3));
    all.extend(SEED001_PAYLOADS.iter().map(|p| p.1));
    for raw in all {
        let (body, paths) = shared::envelope::redact_sensitive(raw.as_bytes()).unwrap();
        assert!(paths.is_empty());
        assert_eq!(body.as_ref(), raw.as_bytes());
    }
}
