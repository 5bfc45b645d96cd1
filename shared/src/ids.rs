//! Identifiers. Saga and webhook ids are derived from what they identify, so
//! that every retry of a write lands on the same key and conditional puts make
//! it idempotent (docs/architecture.md#identifiers: one saga per
//! `(event_id, subscription_id)`).

use sha2::{Digest, Sha256};

fn digest(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p.as_bytes());
    }
    let out = h.finalize();
    out[..13].iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh event id for producers whose envelope carries none (time-ordered).
pub fn new_event_id() -> String {
    format!("evt_{}", uuid::Uuid::now_v7().simple())
}

/// The id an event is stored under, from the producer's id and the event's
/// tenant; `GET /v1/events/{id}`, the sagas and the `webhook-id` all use it.
///
/// Deduplication is per tenant: only a repeat of the same id by the same
/// tenant is a duplicate. So an event without a tenant keeps the producer's
/// id (as before tenants were considered), and an event with a tenant is
/// stored under `tev_` and 32 hex digits of a SHA-256 of (tenant, id):
/// deterministic, so a retry by the same tenant lands on the same key and is
/// a duplicate; different for another tenant; 36 bytes whatever the lengths
/// of the tenant and the id, so it fits every store key; and URL-safe.
pub fn stored_event_id(tenant: Option<&str>, producer_id: &str) -> String {
    match tenant {
        None => producer_id.to_string(),
        Some(t) => format!("tev_{}", &full_hex(&["tenant-event", t, producer_id])[..32]),
    }
}

/// A fresh subscription id.
pub fn new_subscription_id() -> String {
    format!("sub_{}", uuid::Uuid::now_v7().simple())
}

/// The id of the first saga of one event to one subscription: the same pair
/// always gives the same id, so routing twice creates one saga.
pub fn saga_id(event_id: &str, subscription_id: &str) -> String {
    format!("sag_{}", digest(&["route", event_id, subscription_id]))
}

/// The id of the saga a requeue of one dead letter creates: requeueing the
/// same dead letter twice (console redrive, API, CLI) creates one saga.
pub fn requeue_saga_id(dead_letter_id: &str) -> String {
    format!("sag_{}", digest(&["requeue", dead_letter_id]))
}

/// The id of the saga a replay creates, keyed by the caller's replay key so a
/// retried replay request creates nothing new.
pub fn replay_saga_id(event_id: &str, subscription_id: &str, replay_key: &str) -> String {
    format!("sag_{}", digest(&["replay", event_id, subscription_id, replay_key]))
}

/// The Standard Webhooks `webhook-id`: the same for every attempt, requeue and
/// replay of one event to one subscription, so subscribers can dedupe.
pub fn webhook_id(event_id: &str, subscription_id: &str) -> String {
    format!("msg_{}", digest(&["webhook", event_id, subscription_id]))
}

/// A W3C `traceparent` carrying the producer's trace id to the subscriber:
/// the id itself when it is already 32 hex digits, else a stable hash of it,
/// so one producer trace maps to one trace everywhere; the parent id is
/// derived from `span_seed` (the saga and attempt).
pub fn traceparent(trace_id: &str, span_seed: &str) -> String {
    let hex32 = |s: &str| s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit()) && s.bytes().any(|b| b != b'0');
    let trace =
        if hex32(trace_id) { trace_id.to_ascii_lowercase() } else { full_hex(&["trace", trace_id])[..32].to_string() };
    format!("00-{trace}-{}-01", &full_hex(&["span", span_seed])[..16])
}

fn full_hex(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh random token (verification challenges, generated API keys).
pub fn random_token(prefix: &str) -> String {
    use rand::RngCore;
    let mut b = [0u8; 24];
    rand::thread_rng().fill_bytes(&mut b);
    format!("{prefix}{}", b.iter().map(|x| format!("{x:02x}")).collect::<String>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids_are_stable_and_distinct() {
        assert_eq!(saga_id("e1", "s1"), saga_id("e1", "s1"));
        assert_ne!(saga_id("e1", "s1"), saga_id("e1", "s2"));
        // length-prefixing keeps ("ab","c") and ("a","bc") apart
        assert_ne!(saga_id("ab", "c"), saga_id("a", "bc"));
        assert_ne!(saga_id("e1", "s1"), requeue_saga_id("e1"));
        assert_eq!(webhook_id("e", "s"), webhook_id("e", "s"));
        assert!(webhook_id("e", "s").starts_with("msg_"));
        assert_ne!(random_token("x"), random_token("x"));
    }

    #[test]
    fn stored_event_ids_are_per_tenant_and_deterministic() {
        assert_eq!(stored_event_id(None, "e1"), "e1", "no tenant: the producer's id");
        let a = stored_event_id(Some("acme"), "e1");
        assert_eq!(a, stored_event_id(Some("acme"), "e1"), "same pair, same id");
        assert_ne!(a, stored_event_id(Some("globex"), "e1"), "another tenant, another id");
        assert_ne!(a, stored_event_id(Some("acme"), "e2"));
        assert_ne!(a, "e1");
        // Length-prefixed: ("a:b", "c") and ("a", "b:c") differ.
        assert_ne!(stored_event_id(Some("a:b"), "c"), stored_event_id(Some("a"), "b:c"));
        assert!(a.starts_with("tev_") && a.len() == 36, "{a}");
        assert!(a[4..].bytes().all(|b| b.is_ascii_hexdigit()));
        let long = "x".repeat(256);
        assert_eq!(stored_event_id(Some(&long), &long).len(), 36);
    }

    #[test]
    fn traceparent_keeps_w3c_ids_and_hashes_others() {
        let tp = traceparent("4bf92f3577b34da6a3ce929d0e0e4736", "sag_1#1");
        assert!(tp.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"), "{tp}");
        let tp = traceparent("req_abcd", "sag_1#1");
        let parts: Vec<&str> = tp.split('-').collect();
        assert_eq!(parts.len(), 4);
        assert_eq!((parts[0], parts[1].len(), parts[2].len(), parts[3]), ("00", 32, 16, "01"));
        assert_eq!(tp, traceparent("req_abcd", "sag_1#1"), "stable");
        assert_ne!(traceparent("req_abcd", "sag_1#2"), tp, "one parent id per attempt");
    }
}
