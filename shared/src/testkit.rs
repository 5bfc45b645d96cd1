//! Fixtures for unit tests of this crate and of the backend crates (the
//! `testkit` feature, dev-dependencies only): a subscription and an event
//! that tests edit field by field, so a field added with a default needs no
//! change in every test.

use crate::event::EventRecord;
use crate::subscription::Subscription;

/// An active, verified global subscription to `*` (unit-test fixture;
/// read from JSON so that fields with defaults may be added freely).
pub fn subscription() -> Subscription {
    let at = chrono::Utc::now();
    serde_json::from_value(serde_json::json!({
        "id": crate::ids::new_subscription_id(),
        "callback_url": "https://example.com/hook",
        "event_types": ["*"],
        "tenant_id": null,
        "description": null,
        "headers": {},
        "retry_policy": crate::retry::RetryPolicy::default(),
        "payload_format": "original",
        "active": true,
        "verified": true,
        "verification_error": null,
        "signing_keys": [],
        "created_at": at,
        "updated_at": at,
        "version": 1,
    }))
    .expect("a subscription")
}

/// An event of this tenant and type (unit-test fixture).
pub fn event(tenant_id: Option<&str>, event_type: &str) -> EventRecord {
    let at = chrono::Utc::now();
    EventRecord {
        id: crate::ids::EventId::new(format!("evt-{event_type}")),
        event_type: event_type.into(),
        tenant_id: tenant_id.map(crate::ids::TenantId::new),
        partition_key: None,
        partition_seq: None,
        sequence: None,
        trace_id: None,
        producer: None,
        occurred_at: at,
        received_at: at,
        expires_at: at,
        format: crate::envelope::Format::Native,
        body: b"{}".to_vec(),
        target: None,
    }
}
