//! The stored event: one accepted producer envelope, normalized for routing
//! and kept unchanged for delivery and replay.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::envelope::{Format, Normalized};
use crate::ids::EventId;

/// One accepted event. Events are append-only: nothing updates or deletes one
/// before its retention ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// The stored id: the producer's id for an event without a tenant
    /// (namespaced when it has the shape of an id Hookline makes), a
    /// hash of (tenant, producer id) for one with a tenant (see
    /// [`crate::ids::stored_event_id`]); a hash of (tenant, idempotency key)
    /// when the event has one ([`crate::ids::idempotent_event_id`]);
    /// generated when the envelope has neither.
    pub id: EventId,
    /// The event type subscriptions match against.
    pub event_type: String,
    /// Tenant scope; tenant-scoped subscriptions only see their tenant's events.
    pub tenant_id: Option<crate::ids::TenantId>,
    /// Ordering key of the producer (e.g. `Opportunity:tenant:record`).
    pub partition_key: Option<String>,
    /// The producer's record version within its partition.
    pub sequence: Option<String>,
    /// Hookline's number of this event in its partition (1, 2, 3… in the
    /// order accepted; [`crate::ordering`]), assigned by the event store
    /// when it is inserted. `None` without a partition key, and for events
    /// stored before numbering existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_seq: Option<u64>,
    /// The producer's trace/correlation id, carried to subscribers and logs.
    pub trace_id: Option<String>,
    /// The producing service.
    pub producer: Option<String>,
    /// When the producer says it happened (else when Hookline received it).
    pub occurred_at: DateTime<Utc>,
    /// When Hookline accepted it.
    pub received_at: DateTime<Utc>,
    /// Kept at least until this instant, so it can be replayed.
    pub expires_at: DateTime<Utc>,
    /// Which producer envelope it came in.
    pub format: Format,
    /// The envelope as posted (sensitive-named fields redacted), delivered as is.
    #[serde(with = "body_text")]
    pub body: Vec<u8>,
    /// A test event's one subscription (`POST
    /// /v1/subscriptions/{id}/test`): routing sends it there and nowhere
    /// else, whatever the subscription's patterns, and no replay or
    /// requeue takes it to another ([`crate::routing::check_scope`]).
    /// `None` for every producer's event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<crate::ids::SubscriptionId>,
}

impl EventRecord {
    /// Builds the record for an envelope accepted now, with its retention,
    /// under its stored id (per tenant: from the idempotency key when there
    /// is one, else from the producer's id).
    pub fn from_normalized(n: Normalized, now: DateTime<Utc>, retention: chrono::Duration) -> Self {
        let tenant = n.tenant_id.as_deref();
        EventRecord {
            id: match (&n.idempotency_key, &n.id) {
                (Some(key), _) => crate::ids::idempotent_event_id(tenant, key),
                (None, Some(id)) => crate::ids::stored_event_id(tenant, id),
                (None, None) => crate::ids::new_event_id(),
            },
            event_type: n.event_type,
            tenant_id: n.tenant_id.map(crate::ids::TenantId::new),
            partition_key: n.partition_key,
            sequence: n.sequence,
            partition_seq: None,
            trace_id: n.trace_id,
            producer: n.producer,
            occurred_at: n.occurred_at.unwrap_or(now),
            received_at: now,
            expires_at: now + retention,
            format: n.format,
            body: n.body,
            target: None,
        }
    }

    /// The partition it belongs to, if it has a partition key.
    pub fn partition(&self) -> Option<crate::lane::Partition> {
        self.partition_key
            .as_deref()
            .map(|k| crate::lane::Partition::of(self.tenant_id.as_ref().map(|t| t.as_str()), k))
    }

    /// The body as JSON (it was validated as JSON when accepted).
    pub fn body_json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// Stores the body as a JSON string so a record serializes to readable JSON.
mod body_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&String::from_utf8_lossy(b))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        Ok(String::deserialize(d)?.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(body: &str) -> EventRecord {
        let n = crate::envelope::normalize(body.as_bytes(), None).unwrap();
        EventRecord::from_normalized(n, Utc::now(), chrono::Duration::days(30))
    }

    #[test]
    fn stored_id_is_per_tenant_and_the_body_is_untouched() {
        let plain = r#"{"id":"e1","type":"t","data":{}}"#;
        assert_eq!(record(plain).id, "e1");
        let acme = r#"{"id":"e1","type":"t","tenant_id":"acme","data":{}}"#;
        let globex = r#"{"id":"e1","type":"t","tenant_id":"globex","data":{}}"#;
        let a = record(acme);
        assert_eq!(a.id, crate::ids::stored_event_id(Some("acme"), "e1"));
        assert_eq!(a.id, record(acme).id, "a retry by the same tenant has the same id");
        assert_ne!(a.id, record(globex).id);
        assert_eq!(a.body, acme.as_bytes(), "the producer's body is stored as posted");
        assert!(record(r#"{"type":"t","tenant_id":"acme","data":{}}"#).id.as_str().starts_with("evt_"));
    }

    #[test]
    fn an_idempotency_key_decides_the_stored_id() {
        use crate::ids::idempotent_event_id;
        let contract = |id: &str, tenant: Option<&str>| {
            let mut v = serde_json::json!({"eventId": id, "eventType": "task.failed", "version": 1,
                "occurredAt": "2026-02-19T10:10:00Z", "traceId": "req_1", "producer": "w",
                "idempotencyKey": "task:1:failed", "payload": {}});
            if let Some(t) = tenant {
                v["tenantId"] = t.into();
            }
            record(&v.to_string())
        };
        let a = contract("evt_a", Some("acme"));
        assert_eq!(a.id, idempotent_event_id(Some("acme"), "task:1:failed"));
        assert_eq!(a.id, contract("evt_b", Some("acme")).id, "another eventId, the same key: the same event");
        assert_ne!(a.id, contract("evt_a", Some("globex")).id, "another tenant, another event");
        assert_eq!(contract("evt_a", None).id, idempotent_event_id(None, "task:1:failed"));
        assert_eq!(a.tenant_id.as_ref().map(|t| t.as_str()), Some("acme"));

        // A native envelope without id takes the header's key; with an id, the id wins.
        let native = |body: &str, key: Option<&str>| {
            let n = crate::envelope::normalize(body.as_bytes(), None).unwrap().with_idempotency_key(key);
            EventRecord::from_normalized(n, Utc::now(), chrono::Duration::days(30)).id
        };
        let no_id = r#"{"type":"t","tenant_id":"acme","data":{}}"#;
        assert_eq!(native(no_id, Some("k1")), idempotent_event_id(Some("acme"), "k1"));
        assert_eq!(native(no_id, Some("k1")), native(no_id, Some("k1")));
        assert_ne!(native(no_id, None), native(no_id, None), "without a key every post is new");
        let with_id = r#"{"id":"e1","type":"t","tenant_id":"acme","data":{}}"#;
        assert_eq!(native(with_id, Some("k1")), crate::ids::stored_event_id(Some("acme"), "e1"));
    }
}
