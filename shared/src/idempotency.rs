//! Idempotent creates: what an `Idempotency-Key` on a creating request
//! means, decided here once for both backends (the store only keeps the
//! records: [`crate::ports::IdempotencyStore`]).
//!
//! A key lives in the namespace of its caller (credential, actor and
//! tenant: [`record_id`]), so another caller's same key is another record.
//! The record remembers the request it was first used with (a
//! [`fingerprint`] of method, route, path parameters, query and body, the
//! body as canonical JSON when it is JSON) and goes through these states:
//!
//! ```text
//!  absent ──claim──► in progress ──2xx answer──► done (the answer, sealed)
//!    ▲                 │  lease over (the first attempt crashed): absent again
//!    └── error answer ─┘  (released: not kept, the client may fix and retry)
//!  done ── KEY_TTL after the answer ──► expired = absent
//! ```
//!
//! [`decide`] maps a record read (or none) and a request's fingerprint to
//! what the API does: run the request ([`Decision::Claim`]), answer the
//! stored response again ([`Decision::Replay`]), refuse another request
//! under a used key ([`Decision::Conflict`]), or ask to retry while the
//! first is still running ([`Decision::InProgress`]).
//!
//! Times in a record are whole seconds (DynamoDB's TTL counts seconds).

use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::StoreError;
use crate::keyring::Keyring;

/// How long a key is remembered after its answer: 24 hours (the
/// convention of payment APIs). Later, the same key is a new request.
pub const KEY_TTL: chrono::Duration = chrono::Duration::hours(24);

/// How long a claimed key is held for a request still running: longer than
/// any API request takes (the Lambda API times out at 30 s), short enough
/// that a crashed first attempt does not lock its key for long. Past it,
/// a retry takes the key over and runs again.
pub const LEASE: chrono::Duration = chrono::Duration::seconds(60);

/// One key's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    /// The record's id: the key in its caller's namespace ([`record_id`]).
    pub id: String,
    /// The request the key was first used with ([`fingerprint`]).
    pub fingerprint: String,
    /// Who holds the claim (random per claim): only the holder completes
    /// or releases it, so a first attempt whose lease ran out cannot
    /// overwrite the answer of the retry that took its key over.
    pub token: String,
    /// Until when a claim without an answer is held (a request running).
    pub lease_until: DateTime<Utc>,
    /// The answer, sealed ([`seal_response`]); `None` while in progress.
    pub response: Option<String>,
    /// When the record is forgotten (treated as absent from then on, even
    /// before a store deletes it).
    pub expires_at: DateTime<Utc>,
}

/// What a key's record says, at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    /// No record, or an expired one.
    Absent,
    /// Claimed by a request still running (its lease not over).
    InProgress,
    /// Claimed, no answer, lease over: the first attempt died.
    Abandoned,
    /// Answered: the response is stored.
    Done,
}

impl IdempotencyRecord {
    /// A new claim of `id` for the request `fingerprint`, at `now`.
    pub fn claim(id: &str, fingerprint: &str, now: DateTime<Utc>) -> Self {
        let now = now.trunc_subsecs(0);
        IdempotencyRecord {
            id: id.to_string(),
            fingerprint: fingerprint.to_string(),
            token: crate::ids::random_token(""),
            lease_until: now + LEASE,
            response: None,
            expires_at: now + KEY_TTL,
        }
    }

    /// The claim answered with the sealed `response` at `now`: kept for
    /// [`KEY_TTL`] from then.
    pub fn done(&self, response: String, now: DateTime<Utc>) -> Self {
        IdempotencyRecord { response: Some(response), expires_at: now.trunc_subsecs(0) + KEY_TTL, ..self.clone() }
    }

    /// Whether it is forgotten at `now`.
    pub fn is_expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at <= now
    }

    /// Its state at `now`.
    pub fn state(&self, now: DateTime<Utc>) -> KeyState {
        match (&self.response, self.is_expired(now)) {
            (_, true) => KeyState::Absent,
            (Some(_), false) => KeyState::Done,
            (None, false) if self.lease_until > now => KeyState::InProgress,
            (None, false) => KeyState::Abandoned,
        }
    }
}

/// What to do with a request carrying a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Claim the key and run the request (no live record, or an abandoned
    /// claim of the same request).
    Claim,
    /// Answer the stored (sealed) response again.
    Replay(String),
    /// The key was used with another request: refuse (409).
    Conflict,
    /// The first request with this key is still running: retry after this
    /// many seconds (at least 1).
    InProgress {
        /// Seconds until its lease is over.
        retry_after: u64,
    },
}

/// What a request with fingerprint `fingerprint` does, given the key's
/// record as read at `now` (`None`: none stored). Another request under a
/// live key is a conflict whatever its state; an expired record is absent.
pub fn decide(record: Option<&IdempotencyRecord>, fingerprint: &str, now: DateTime<Utc>) -> Decision {
    let Some(r) = record.filter(|r| r.state(now) != KeyState::Absent) else { return Decision::Claim };
    if r.fingerprint != fingerprint {
        return Decision::Conflict;
    }
    match (r.state(now), &r.response) {
        (KeyState::Done, Some(sealed)) => Decision::Replay(sealed.clone()),
        (KeyState::InProgress, _) => {
            Decision::InProgress { retry_after: (r.lease_until - now).num_seconds().max(1) as u64 }
        }
        _ => Decision::Claim,
    }
}

/// Whether an answer of `status` is kept for replay: only a success (2xx).
/// A refusal (4xx: a rule broken, a conflict, a rate limit) or a failure
/// (5xx) is not kept, so the client may fix the request, or wait, and send
/// it again under the same key.
pub fn keeps(status: u16) -> bool {
    (200..300).contains(&status)
}

/// The id of a key's record: SHA-256 (hex) of the caller's actor (its
/// credential, and the trusted `X-Actor` when there is one), its tenant
/// and the key, so the same key from another caller or tenant is another
/// record. The key itself is not stored.
pub fn record_id(actor: &str, tenant: Option<&str>, key: &str) -> String {
    let parts = match tenant {
        None => ["idempotency-key", actor, "", key],
        Some(t) => ["tenant-idempotency-key", actor, t, key],
    };
    format!("idem_{}", hex_digest(&parts))
}

/// The request a key stands for: SHA-256 (hex) of the method, the route's
/// pattern, the path's parameters, the query string and the body, the body
/// as canonical JSON (keys sorted, no spaces) when it parses as JSON, so a
/// retry that serializes the same object differently is the same request.
pub fn fingerprint(method: &str, route: &str, params: &[(&str, &str)], query: Option<&str>, body: &[u8]) -> String {
    let canonical = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .map(|v| serde_json::to_vec(&v).expect("a JSON value serializes"));
    let body = canonical.as_deref().unwrap_or(body);
    let mut parts: Vec<&[u8]> = vec![b"idempotent-request", method.as_bytes(), route.as_bytes()];
    for (name, value) in params {
        parts.push(name.as_bytes());
        parts.push(value.as_bytes());
    }
    parts.push(query.unwrap_or("").as_bytes());
    parts.push(body);
    hex_digest(&parts)
}

/// SHA-256 (hex) over length-prefixed parts (no two lists collide).
fn hex_digest<P: AsRef<[u8]>>(parts: &[P]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        let p = p.as_ref();
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// An answer kept for replay: its status and body (every route that takes
/// a key answers JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredResponse {
    /// The HTTP status.
    pub status: u16,
    /// The body (JSON text).
    pub body: String,
}

/// The context a record's answer is sealed for: its id, so a sealed
/// answer copied onto another record does not open there.
pub fn response_context(id: &str) -> String {
    format!("idempotent-response:{id}")
}

/// The answer sealed for the record `id`. Always sealed: an answer may
/// hold a secret (a new subscription's signing secret, a new API key).
pub fn seal_response(keyring: &Keyring, id: &str, response: &StoredResponse) -> String {
    let text = serde_json::to_vec(response).expect("a stored response serializes");
    keyring.seal(&text, &response_context(id))
}

/// The answer [`seal_response`] sealed for `id`.
///
/// # Errors
///
/// [`StoreError::Corrupt`]: it does not open with this keyring and context,
/// or is not a stored response.
pub fn open_response(keyring: &Keyring, id: &str, sealed: &str) -> Result<StoredResponse, StoreError> {
    let text = keyring
        .open(sealed, &response_context(id))
        .map_err(|e| StoreError::Corrupt(format!("idempotent response of {id}: {e}")))?;
    serde_json::from_slice(&text).map_err(|e| StoreError::Corrupt(format!("idempotent response of {id}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    #[test]
    fn a_key_goes_from_absent_to_in_progress_to_done_to_expired() {
        let fp = fingerprint("POST", "/v1/subscriptions", &[], None, br#"{"a":1}"#);
        assert_eq!(decide(None, &fp, at(0)), Decision::Claim, "absent");
        let claim = IdempotencyRecord::claim("idem_1", &fp, at(0));
        assert_eq!(claim.state(at(1)), KeyState::InProgress);
        assert_eq!(decide(Some(&claim), &fp, at(1)), Decision::InProgress { retry_after: 59 });
        assert_eq!(decide(Some(&claim), &fp, at(60)), Decision::Claim, "the lease is over: a crashed first attempt");
        assert_eq!(claim.state(at(60)), KeyState::Abandoned);
        assert_eq!(decide(Some(&claim), "other", at(1)), Decision::Conflict, "another request while in progress");

        let done = claim.done("hks1.x.y".into(), at(5));
        assert_eq!(done.state(at(6)), KeyState::Done);
        assert_eq!(decide(Some(&done), &fp, at(6)), Decision::Replay("hks1.x.y".into()));
        assert_eq!(decide(Some(&done), &fp, at(5 + 86_399)), Decision::Replay("hks1.x.y".into()));
        assert_eq!(decide(Some(&done), "other", at(6)), Decision::Conflict);
        assert_eq!(done.state(at(5 + 86_400)), KeyState::Absent, "24 h after the answer");
        assert_eq!(decide(Some(&done), &fp, at(5 + 86_400)), Decision::Claim, "an expired record is absent");
        assert_eq!(decide(Some(&done), "other", at(5 + 86_400)), Decision::Claim, "and takes any request");
        assert_eq!(done.token, claim.token, "completing keeps the holder");
    }

    #[test]
    fn retry_after_is_at_least_a_second() {
        let claim = IdempotencyRecord::claim("idem_1", "fp", at(0));
        let almost = claim.lease_until - chrono::Duration::milliseconds(10);
        assert_eq!(decide(Some(&claim), "fp", almost), Decision::InProgress { retry_after: 1 });
    }

    #[test]
    fn only_successes_are_kept() {
        for s in [200, 201, 202, 204] {
            assert!(keeps(s), "{s}");
        }
        for s in [400, 401, 403, 404, 409, 422, 429, 500, 503] {
            assert!(!keeps(s), "{s}");
        }
    }

    #[test]
    fn the_fingerprint_is_the_request_and_json_is_canonical() {
        let fp = |m: &str, r: &str, p: &[(&str, &str)], q: Option<&str>, b: &[u8]| fingerprint(m, r, p, q, b);
        let base = fp("POST", "/v1/replays", &[], None, br#"{"a":1,"b":[1,2]}"#);
        assert_eq!(base, fp("POST", "/v1/replays", &[], None, b"{ \"b\": [1, 2],\n \"a\": 1 }"), "same JSON");
        assert_ne!(base, fp("POST", "/v1/replays", &[], None, br#"{"a":2,"b":[1,2]}"#));
        assert_ne!(base, fp("POST", "/v1/keys", &[], None, br#"{"a":1,"b":[1,2]}"#));
        assert_ne!(base, fp("POST", "/v1/replays", &[], Some("x=1"), br#"{"a":1,"b":[1,2]}"#));
        let r = "/v1/events/{event}/replay";
        assert_ne!(fp("POST", r, &[("event", "e1")], None, b"{}"), fp("POST", r, &[("event", "e2")], None, b"{}"));
        assert_eq!(fp("POST", r, &[], None, b"not json"), fp("POST", r, &[], None, b"not json"));
        assert_ne!(fp("POST", r, &[], None, b"not json"), fp("POST", r, &[], None, b"not  json"), "raw bytes");
    }

    #[test]
    fn records_are_per_caller_and_tenant() {
        let id = record_id("key:ci", Some("acme"), "k1");
        assert!(id.starts_with("idem_") && id.len() == 5 + 64, "{id}");
        assert_eq!(id, record_id("key:ci", Some("acme"), "k1"));
        assert_ne!(id, record_id("key:ci", Some("globex"), "k1"), "another tenant");
        assert_ne!(id, record_id("key:other", Some("acme"), "k1"), "another credential");
        assert_ne!(id, record_id("key:ci", None, "k1"), "no tenant");
        assert_ne!(id, record_id("key:ci", Some("acme"), "k2"));
        assert!(!id.contains("k1"), "the key is not stored");
    }

    #[test]
    fn a_stored_answer_is_sealed_for_its_record() {
        let k = Keyring::new("k1", [3; 32]);
        let r = StoredResponse { status: 201, body: r#"{"secret":"whsec_abc"}"#.into() };
        let sealed = seal_response(&k, "idem_1", &r);
        assert!(Keyring::is_sealed(&sealed) && !sealed.contains("whsec_abc"), "{sealed}");
        assert_eq!(open_response(&k, "idem_1", &sealed).unwrap(), r);
        assert!(matches!(open_response(&k, "idem_2", &sealed), Err(StoreError::Corrupt(_))), "another record");
    }
}
