//! Identifiers. Saga and webhook ids are derived from what they identify, so
//! that every retry of a write lands on the same key and conditional puts make
//! it idempotent (docs/architecture.md#identifiers: one saga per
//! `(event_id, subscription_id)`).

//!
//! Every id the pipeline passes around has its own type ([`EventId`],
//! [`SagaId`], [`SubscriptionId`], [`DeadLetterId`], [`WebhookId`],
//! [`TenantId`]), from the API edge to the stores, so handing one where
//! another is expected does not compile. Each is its text and nothing else: it serializes as that string
//! (`#[serde(transparent)]`), is stored as that text, and has no conversion
//! from `&str` or deref to it that would let two ids be swapped silently;
//! [`EventId::new`] and the others wrap text read from the wire, a store or
//! an API path, by name (see [`saga_id`] for what does not compile).

use std::borrow::Borrow;
use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Defines one id newtype over `String` and its impls; see the module docs.
macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Wraps an id's text as read from the wire, a store or an API
            /// path (unchecked: a lookup of an id that names nothing finds
            /// nothing). New ids come from this module's constructors.
            pub fn new(id: impl Into<String>) -> Self {
                $name(id.into())
            }

            /// The id's text, as stored and sent.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id's text, owned.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            /// The id's text, unchanged.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        /// Maps and sets keyed by the id can be looked up by its text (the
        /// id hashes and compares as its text).
        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        /// Compares with text (tests, and ids read back from JSON), never
        /// with another kind of id.
        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        /// As `PartialEq<str>`.
        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    };
}

id_type!(
    /// The id an event is stored under ([`stored_event_id`],
    /// [`idempotent_event_id`], [`new_event_id`]):
    /// its key in the event log, in `GET /v1/events/{id}` and in its sagas.
    EventId
);
id_type!(
    /// A subscription's id (`sub_…`, [`new_subscription_id`]).
    SubscriptionId
);
id_type!(
    /// A delivery saga's id (`sag_…`), derived from what created it:
    /// [`saga_id`], [`requeue_saga_id`], [`replay_saga_id`].
    SagaId
);
id_type!(
    /// A dead letter's id: the id of the saga that died ([`dead_letter_id`],
    /// [`DeadLetterId::saga_id`]), so a saga has at most one dead letter.
    DeadLetterId
);
id_type!(
    /// A tenant's id, as the producer gave it (native `tenant_id`,
    /// domain-event and contract `tenantId`): what scopes an event, a
    /// subscription and a dead letter to one tenant, and what queries and
    /// filters narrow by. Stored and sent as its text, like the other ids.
    TenantId
);
id_type!(
    /// An API key's or principal grant's id (`key_…`, [`new_api_key_id`]):
    /// what `/v1/keys/{id}` names; never the secret.
    ApiKeyId
);
id_type!(
    /// The Standard Webhooks `webhook-id` of a delivery (`msg_…`,
    /// [`webhook_id`]): the same for every saga of one event to one
    /// subscription, so subscribers can dedupe.
    WebhookId
);

/// The id of the dead letter of saga `saga`: the saga's own id (one dead
/// letter per saga).
pub fn dead_letter_id(saga: &SagaId) -> DeadLetterId {
    DeadLetterId(saga.0.clone())
}

impl DeadLetterId {
    /// The id of the saga that died (a dead letter is keyed by it).
    pub fn saga_id(&self) -> SagaId {
        SagaId(self.0.clone())
    }
}

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
pub fn new_event_id() -> EventId {
    EventId(format!("evt_{}", uuid::Uuid::now_v7().simple()))
}

/// The prefixes of the stored event ids Hookline makes itself, each
/// followed by exactly 32 lowercase hex digits: `tev_` (an event with a
/// tenant, [`stored_event_id`]), `idk_` (an idempotency key,
/// [`idempotent_event_id`]), `evt_` (generated, [`new_event_id`]), `hop_`
/// (an operational event, [`operational_event_id`]) and `tnx_` (a
/// tenantless producer id of one of these shapes, [`stored_event_id`]).
pub const RESERVED_EVENT_ID_PREFIXES: &[&str] = &["tev_", "idk_", "evt_", "hop_", "tnx_"];

/// Whether `id` has the shape of a stored id Hookline makes: a
/// [`RESERVED_EVENT_ID_PREFIXES`] prefix and exactly 32 lowercase hex
/// digits. A tenantless producer id of that shape is never stored as is
/// ([`stored_event_id`]), so no producer can occupy such an id.
pub fn has_reserved_shape(id: &str) -> bool {
    id.len() == 36
        && RESERVED_EVENT_ID_PREFIXES.iter().any(|p| id.starts_with(p))
        && id[4..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
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
///
/// The id spaces are disjoint: a tenantless producer id of the shape of an
/// id Hookline makes ([`has_reserved_shape`]: `tev_`, `idk_`, `evt_`,
/// `hop_`, `tnx_` + 32 lowercase hex) is not stored as is but under `tnx_`
/// and 32 hex digits of a SHA-256 of ("tenantless-event", id), itself a
/// reserved shape. So whatever a producer sends, it cannot occupy the
/// stored id of another tenant's event, of an idempotency key, of a
/// generated id or of an operational event (whose ids producers cannot
/// compute: [`operational_event_id`]). Every other tenantless id is kept
/// as is, so events stored before keep their ids.
pub fn stored_event_id(tenant: Option<&str>, producer_id: &str) -> EventId {
    EventId(match tenant {
        None if has_reserved_shape(producer_id) => {
            format!("tnx_{}", &full_hex(&["tenantless-event", producer_id])[..32])
        }
        None => producer_id.to_string(),
        Some(t) => format!("tev_{}", &full_hex(&["tenant-event", t, producer_id])[..32]),
    })
}

/// The id of one of Hookline's operational events (`hookline.…`,
/// [`crate::stage::failing`]): `hop_` and the first 32 hex digits of
/// `mac`, an HMAC under a server secret (`Keyring::mac`) of what caused
/// the event. Deterministic per cause, so a retried emission is a
/// duplicate; not computable by producers, who do not hold the secret; and
/// of a reserved shape, so no producer id is ever stored under it.
pub fn operational_event_id(mac: &[u8; 32]) -> EventId {
    EventId(format!("hop_{}", mac[..16].iter().map(|b| format!("{b:02x}")).collect::<String>()))
}

/// The id an event is stored under when its producer deduplicates on an
/// idempotency key rather than on an event id: a contract envelope's
/// `idempotencyKey`, or the `Idempotency-Key` header of a `POST /v1/events`
/// whose envelope has no id (docs/formats.md#stored-ids-and-deduplication).
///
/// Deduplication is per tenant, as for [`stored_event_id`]: the same key
/// from the same tenant always gives the same id, so a repeat is a
/// duplicate; another tenant, or no tenant, gets another id. Unlike a
/// producer's event id without a tenant, a key is never the id itself: it
/// is always stored under `idk_` and 32 hex digits of a SHA-256 of (tenant,
/// key), so a key equal to some producer's event id (`"evt_1"`) is not a
/// duplicate of that event, and the id is 36 bytes whatever the key's
/// length. "No tenant" and a tenant are hashed under different labels
/// (tenants are never empty, but the label makes it plain).
pub fn idempotent_event_id(tenant: Option<&str>, key: &str) -> EventId {
    let hex = match tenant {
        None => full_hex(&["idempotency-key", key]),
        Some(t) => full_hex(&["tenant-idempotency-key", t, key]),
    };
    EventId(format!("idk_{}", &hex[..32]))
}

/// A fresh API key id (time-ordered, random: it says nothing of the secret).
pub fn new_api_key_id() -> ApiKeyId {
    ApiKeyId(format!("key_{}", uuid::Uuid::now_v7().simple()))
}

/// A fresh subscription id.
pub fn new_subscription_id() -> SubscriptionId {
    SubscriptionId(format!("sub_{}", uuid::Uuid::now_v7().simple()))
}

/// The id of the first saga of one event to one subscription: the same pair
/// always gives the same id, so routing twice creates one saga.
///
/// ```
/// use shared::ids::{saga_id, EventId, SubscriptionId};
/// let id = saga_id(&EventId::new("evt_1"), &SubscriptionId::new("sub_1"));
/// assert_eq!(id.as_str(), "sag_025d55a078d02e1131caa7762e");
/// ```
///
/// The ids have types so that they cannot be swapped: a subscription id
/// where the event id belongs does not compile,
///
/// ```compile_fail
/// use shared::ids::{saga_id, EventId, SubscriptionId};
/// let _ = saga_id(&SubscriptionId::new("sub_1"), &EventId::new("evt_1"));
/// ```
///
/// and neither does text where an id belongs (there is no `From<&str>`):
///
/// ```compile_fail
/// use shared::ids::{saga_id, SubscriptionId};
/// let _ = saga_id("evt_1", &SubscriptionId::new("sub_1"));
/// ```
pub fn saga_id(event_id: &EventId, subscription_id: &SubscriptionId) -> SagaId {
    SagaId(format!("sag_{}", digest(&["route", &event_id.0, &subscription_id.0])))
}

/// The id of the saga a requeue of one dead letter creates: requeueing the
/// same dead letter twice (console redrive, API, CLI) creates one saga.
pub fn requeue_saga_id(dead_letter_id: &DeadLetterId) -> SagaId {
    SagaId(format!("sag_{}", digest(&["requeue", &dead_letter_id.0])))
}

/// The id of the saga a replay creates, keyed by the caller's replay key so a
/// retried replay request creates nothing new.
pub fn replay_saga_id(event_id: &EventId, subscription_id: &SubscriptionId, replay_key: &str) -> SagaId {
    SagaId(format!("sag_{}", digest(&["replay", &event_id.0, &subscription_id.0, replay_key])))
}

/// The Standard Webhooks `webhook-id`: the same for every attempt, requeue and
/// replay of one event to one subscription, so subscribers can dedupe.
pub fn webhook_id(event_id: &EventId, subscription_id: &SubscriptionId) -> WebhookId {
    WebhookId(format!("msg_{}", digest(&["webhook", &event_id.0, &subscription_id.0])))
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

    /// A tenant id is its text on the wire and in stores, as the
    /// `Option<String>` it replaced was.
    #[test]
    fn a_tenant_id_serializes_as_its_text() {
        let t = Some(TenantId::new("acme"));
        assert_eq!(serde_json::to_string(&t).unwrap(), r#""acme""#);
        assert_eq!(serde_json::from_str::<Option<TenantId>>(r#""acme""#).unwrap(), t);
        assert_eq!(serde_json::from_str::<Option<TenantId>>("null").unwrap(), None);
    }

    fn e(id: &str) -> EventId {
        EventId::new(id)
    }

    fn s(id: &str) -> SubscriptionId {
        SubscriptionId::new(id)
    }

    #[test]
    fn derived_ids_are_stable_and_distinct() {
        assert_eq!(saga_id(&e("e1"), &s("s1")), saga_id(&e("e1"), &s("s1")));
        assert_ne!(saga_id(&e("e1"), &s("s1")), saga_id(&e("e1"), &s("s2")));
        // length-prefixing keeps ("ab","c") and ("a","bc") apart
        assert_ne!(saga_id(&e("ab"), &s("c")), saga_id(&e("a"), &s("bc")));
        assert_ne!(saga_id(&e("e1"), &s("s1")), requeue_saga_id(&DeadLetterId::new("e1")));
        assert_eq!(webhook_id(&e("e"), &s("s")), webhook_id(&e("e"), &s("s")));
        assert!(webhook_id(&e("e"), &s("s")).as_str().starts_with("msg_"));
        assert_ne!(random_token("x"), random_token("x"));
    }

    /// The derived ids are stored and sent to subscribers: these values were
    /// computed before the ids had types, and must never change.
    #[test]
    fn derived_ids_are_byte_identical_to_the_stored_ones() {
        assert_eq!(saga_id(&e("evt_1"), &s("sub_1")), "sag_025d55a078d02e1131caa7762e");
        assert_eq!(requeue_saga_id(&DeadLetterId::new("dl_1")), "sag_98d80eed85c869ca2943e19826");
        assert_eq!(replay_saga_id(&e("evt_1"), &s("sub_1"), "key_1"), "sag_5426a12a07a6db83e953a5d297");
        assert_eq!(webhook_id(&e("evt_1"), &s("sub_1")), "msg_e3a106dc72ebef867b6f72375e");
        assert_eq!(stored_event_id(Some("acme"), "e1"), "tev_45c2096ee038506ff8601abf6d4379aa");
        assert_eq!(stored_event_id(None, "e1"), "e1");
    }

    #[test]
    fn ids_serialize_as_their_text() {
        let id = saga_id(&e("evt_1"), &s("sub_1"));
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"sag_025d55a078d02e1131caa7762e\"");
        assert_eq!(serde_json::from_str::<SagaId>("\"sag_x\"").unwrap(), SagaId::new("sag_x"));
        assert_eq!(id.to_string(), id.as_str());
        let dl = dead_letter_id(&id);
        assert_eq!(dl.as_str(), id.as_str(), "a dead letter is keyed by its saga's id");
        assert_eq!(dl.saga_id(), id);
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
        let a = a.as_str();
        assert!(a.starts_with("tev_") && a.len() == 36, "{a}");
        assert!(a[4..].bytes().all(|b| b.is_ascii_hexdigit()));
        let long = "x".repeat(256);
        assert_eq!(stored_event_id(Some(&long), &long).as_str().len(), 36);
    }

    /// A tenantless producer id of the shape of an id Hookline makes is
    /// stored under its own namespace; any other keeps its id.
    #[test]
    fn tenantless_ids_never_occupy_reserved_ids() {
        let victims = [
            stored_event_id(Some("acme"), "e1"),
            idempotent_event_id(Some("acme"), "k1"),
            idempotent_event_id(None, "k1"),
            new_event_id(),
            operational_event_id(&[7; 32]),
        ];
        for v in &victims {
            assert!(has_reserved_shape(v.as_str()), "{v}");
            let stored = stored_event_id(None, v.as_str());
            assert_ne!(&stored, v, "a tenantless post of {v} does not occupy it");
            assert!(stored.as_str().starts_with("tnx_") && has_reserved_shape(stored.as_str()), "{stored}");
            assert_eq!(stored, stored_event_id(None, v.as_str()), "deterministic: a retry is a duplicate");
            // The namespace is reserved too: posting the namespaced id moves it again.
            assert_ne!(stored_event_id(None, stored.as_str()), stored);
        }
        // Ordinary ids keep their text, also ones that merely start with a prefix.
        for plain in ["e1", "evt_1", "evt_webhook_001", "tev_x", "hop_", "TEV_45c2096ee038506ff8601abf6d4379aa"] {
            assert_eq!(stored_event_id(None, plain), plain);
        }
        assert!(!has_reserved_shape("tev_45C2096EE038506FF8601ABF6D4379AA"), "upper case is not Hookline's");
        assert!(!has_reserved_shape("tev_45c2096ee038506ff8601abf6d4379aa0"));
        assert_eq!(operational_event_id(&[0xab; 32]).as_str(), format!("hop_{}", "ab".repeat(16)));
    }

    #[test]
    fn idempotent_event_ids_are_per_tenant_and_deterministic() {
        let k = "task:tsk_3001:attempt:2:failed";
        let a = idempotent_event_id(Some("acme"), k);
        assert_eq!(a, idempotent_event_id(Some("acme"), k), "the same key and tenant always give the same id");
        assert_ne!(a, idempotent_event_id(Some("globex"), k), "another tenant, another id");
        assert_ne!(a, idempotent_event_id(None, k), "no tenant is not a tenant");
        assert_ne!(a, idempotent_event_id(Some("acme"), "task:tsk_3001:attempt:3:failed"));
        assert_eq!(idempotent_event_id(None, k), idempotent_event_id(None, k));
        // Length-prefixed: ("a:b", "c") and ("a", "b:c") differ; so do a
        // tenant and a key that spell the same text without a tenant.
        assert_ne!(idempotent_event_id(Some("a:b"), "c"), idempotent_event_id(Some("a"), "b:c"));
        assert_ne!(idempotent_event_id(Some("a"), "b"), idempotent_event_id(None, "ab"));
        // Never the key itself, and never the id an event id would get.
        assert_ne!(idempotent_event_id(None, k), k);
        assert_ne!(idempotent_event_id(None, "e1"), stored_event_id(None, "e1"));
        assert_ne!(idempotent_event_id(Some("acme"), "e1"), stored_event_id(Some("acme"), "e1"));
        let a = a.as_str();
        assert!(a.starts_with("idk_") && a.len() == 36, "{a}");
        assert!(a[4..].bytes().all(|b| b.is_ascii_hexdigit()));
        let long = "x".repeat(4096);
        assert_eq!(idempotent_event_id(Some(&long), &long).as_str().len(), 36);
        // Stored ids: these values must never change.
        assert_eq!(idempotent_event_id(None, k), "idk_099f7f76e769d66662d9554c869ca8a5");
        assert_eq!(idempotent_event_id(Some("acme"), k), "idk_ba1861eee81e56a5dc086aad40415c83");
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
