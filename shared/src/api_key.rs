//! API keys: the credentials Hookline itself hands out, and (on AWS) the
//! grants that map an IAM principal to a role and a tenant. Pure: the
//! record, how a secret is generated, checked and hashed, and which names
//! and `X-Actor` values are acceptable; the [`crate::ports::KeyStore`] port
//! keeps the records, the API resolves each request's
//! [`crate::access::Caller`] from one.
//!
//! A secret is never stored: only its keyed hash
//! ([`secret_lookup`]: HMAC-SHA256 under the deployment's data key, so a
//! copy of the database alone does not allow guessing an operator-chosen
//! secret offline), under which the record is found in one read. A key
//! being rotated holds two credentials for the overlap: the new one and
//! the old one, which stops working at its `until`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::access::{Caller, Role};
use crate::ids::{ApiKeyId, TenantId};
use crate::keyring::Keyring;

/// How every secret Hookline generates starts.
pub const SECRET_PREFIX: &str = "hlk_";

/// Random bytes in a generated secret (256 bits).
pub const SECRET_BYTES: usize = 32;

/// The longest secret accepted, in bytes.
pub const MAX_SECRET_BYTES: usize = 512;

/// The longest key name, in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// The longest `X-Actor` value, in characters.
pub const MAX_ACTOR_HEADER_CHARS: usize = 256;

/// The longest IAM principal ARN (IAM's own limit).
pub const MAX_PRINCIPAL_CHARS: usize = 2048;

/// The most secrets one key holds at once: the current one and, during a
/// rotation's overlap, the one it replaced.
pub const MAX_CREDENTIALS: usize = 2;

/// Whether two credentials are equal, in time that depends on their
/// length only: a caller comparing a guess learns nothing from how long the
/// answer takes (static keys, portal token MACs).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A fresh secret: [`SECRET_PREFIX`] and 256 random bits as unpadded
/// base64url (43 characters of `A-Z a-z 0-9 - _`), so it is printable,
/// copies as one word and cannot be confused with anything else.
pub fn generate_secret() -> String {
    use base64::Engine;
    use rand::RngCore;
    let mut b = [0u8; SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut b);
    format!("{SECRET_PREFIX}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b))
}

/// Why a secret, name, principal or actor value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// Empty.
    #[error("must not be empty")]
    Empty,
    /// Too long.
    #[error("must be at most {0} characters")]
    TooLong(usize),
    /// A character outside the accepted set.
    #[error("{0}")]
    Character(&'static str),
}

/// Checks an operator-chosen secret: 1 to [`MAX_SECRET_BYTES`] printable
/// ASCII characters (` ` to `~`), not beginning or ending with a space, so
/// it travels unchanged in an `Authorization` header (HTTP drops a value's
/// edge spaces, and takes only ASCII reliably), a file or a variable. Any
/// such secret is taken whole: `=`, `,` or spaces inside it are part of it.
///
/// # Errors
///
/// [`Invalid`] saying why.
pub fn check_secret(secret: &str) -> Result<(), Invalid> {
    if secret.is_empty() {
        return Err(Invalid::Empty);
    }
    if secret.len() > MAX_SECRET_BYTES {
        return Err(Invalid::TooLong(MAX_SECRET_BYTES));
    }
    if !secret.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) {
        return Err(Invalid::Character("must be printable ASCII, without control characters"));
    }
    if secret.starts_with(' ') || secret.ends_with(' ') {
        return Err(Invalid::Character("must not begin or end with a space (a header loses it)"));
    }
    Ok(())
}

/// Checks a key name: 1 to [`MAX_NAME_CHARS`] of `A-Z a-z 0-9 . _ - @`, so
/// the actor `key:<name>` is one word and no name can pose as an actor
/// chain (`key:a as b`) or hide a quote.
///
/// # Errors
///
/// [`Invalid`] saying why.
pub fn check_name(name: &str) -> Result<(), Invalid> {
    if name.is_empty() {
        return Err(Invalid::Empty);
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(Invalid::TooLong(MAX_NAME_CHARS));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || "._-@".contains(c)) {
        return Err(Invalid::Character("may hold only letters, digits and . _ - @"));
    }
    Ok(())
}

/// Checks an IAM principal ARN given for a grant: `arn:` and printable ASCII
/// without spaces, at most [`MAX_PRINCIPAL_CHARS`].
///
/// # Errors
///
/// [`Invalid`] saying why.
pub fn check_principal(arn: &str) -> Result<(), Invalid> {
    if arn.is_empty() {
        return Err(Invalid::Empty);
    }
    if arn.len() > MAX_PRINCIPAL_CHARS {
        return Err(Invalid::TooLong(MAX_PRINCIPAL_CHARS));
    }
    if !arn.starts_with("arn:") || !arn.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Invalid::Character("must be an IAM ARN (arn:…, printable ASCII without spaces)"));
    }
    Ok(())
}

/// Checks an `X-Actor` value (already trimmed): 1 to
/// [`MAX_ACTOR_HEADER_CHARS`] printable ASCII characters, spaces allowed,
/// no backtick (the audit trail quotes the value with backticks, so none
/// inside can end the quote and forge a chain) and no control characters.
/// Refused, never cut: two long names must not become one.
///
/// # Errors
///
/// [`Invalid`] saying why.
pub fn check_actor_header(value: &str) -> Result<(), Invalid> {
    if value.is_empty() {
        return Err(Invalid::Empty);
    }
    if value.chars().count() > MAX_ACTOR_HEADER_CHARS {
        return Err(Invalid::TooLong(MAX_ACTOR_HEADER_CHARS));
    }
    if !value.bytes().all(|b| (b' '..=b'~').contains(&b) && b != b'`') {
        return Err(Invalid::Character("must be printable ASCII (spaces allowed) without backticks"));
    }
    Ok(())
}

/// The key a secret is stored and found under: `s:` and the hex HMAC of
/// (`api-key`, secret) under the data key ([`Keyring::mac`]).
pub fn secret_lookup(keyring: &Keyring, secret: &str) -> String {
    let mac = keyring.mac(&["api-key", secret]);
    format!("s:{}", mac.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// The key a principal grant is stored and found under: `p:` and the ARN.
pub fn principal_lookup(arn: &str) -> String {
    format!("p:{arn}")
}

/// What a listing shows of a secret so people can tell keys apart: the
/// first 8 characters of a generated one (`hlk_` and 4 random
/// characters: 24 of its 256 bits); nothing of an operator-chosen one,
/// which may be short enough for a prefix to matter.
pub fn display_prefix(secret: &str) -> Option<String> {
    secret.starts_with(SECRET_PREFIX).then(|| secret.chars().take(SECRET_PREFIX.len() + 4).collect())
}

/// One credential of a key: what it is found under, and until when it
/// works (set on the old secret of a rotation: the overlap's end).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCredential {
    /// [`secret_lookup`] or [`principal_lookup`]; unique over all keys.
    pub lookup: String,
    /// For display: [`display_prefix`] of a secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// After this it no longer works; `None`: until the key expires or is
    /// revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
}

/// An API key or a principal grant, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeyRecord {
    /// `key_…`.
    pub id: ApiKeyId,
    /// Unique per tenant ([`check_name`]); the audit trail records its
    /// callers as `key:<name>` (a principal grant's callers as their ARN).
    pub name: String,
    /// What its callers may do.
    pub role: Role,
    /// The one tenant its callers see; `None`: every tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<TenantId>,
    /// The IAM principal ARN of a grant (AWS); `None` for a secret key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// 1 or [`MAX_CREDENTIALS`] credentials, current first.
    pub credentials: Vec<StoredCredential>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Who created it (an actor).
    pub created_by: String,
    /// After this no credential of it works; `None`: never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was revoked; nothing of it works since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<DateTime<Utc>>,
    /// Raised by each change; a change is written on condition of it.
    pub version: u64,
    /// A subscriber key's one subscription ([`Role::Subscriber`]); `None`
    /// for every other key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_id: Option<crate::ids::SubscriptionId>,
}

impl ApiKeyRecord {
    /// A new key (version 1) with one credential.
    pub fn new(
        name: impl Into<String>,
        role: Role,
        tenant: Option<TenantId>,
        credential: StoredCredential,
        created_by: impl Into<String>,
        now: DateTime<Utc>,
    ) -> Self {
        ApiKeyRecord {
            id: crate::ids::new_api_key_id(),
            name: name.into(),
            role,
            tenant,
            principal: None,
            credentials: vec![credential],
            created_at: now,
            created_by: created_by.into(),
            expires_at: None,
            revoked_at: None,
            version: 1,
            subscription_id: None,
        }
    }

    /// Whether the credential found under `lookup` lets a caller in at
    /// `now`: the key is neither revoked nor expired and that credential's
    /// overlap (if it is a replaced one) has not ended.
    pub fn admits(&self, lookup: &str, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none()
            && self.expires_at.is_none_or(|t| now < t)
            && self.credentials.iter().any(|c| c.lookup == lookup && c.until.is_none_or(|t| now < t))
    }

    /// The caller this key authenticates: `key:<name>`, or the grant's ARN.
    pub fn caller(&self) -> Caller {
        let actor = self.principal.clone().unwrap_or_else(|| format!("key:{}", self.name));
        Caller { actor, role: self.role, tenant: self.tenant.clone(), subscription: self.subscription_id.clone() }
    }

    /// Its state at `now`: `revoked`, `expired` or `active`.
    pub fn state(&self, now: DateTime<Utc>) -> &'static str {
        if self.revoked_at.is_some() {
            "revoked"
        } else if self.expires_at.is_some_and(|t| now >= t) {
            "expired"
        } else {
            "active"
        }
    }

    /// The record after a rotation to `new` at `now`: the current credential
    /// keeps working until `now + overlap` (none when `overlap` is zero);
    /// a credential still in an earlier overlap is dropped (at most
    /// [`MAX_CREDENTIALS`]).
    pub fn rotated(&self, new: StoredCredential, now: DateTime<Utc>, overlap: chrono::Duration) -> ApiKeyRecord {
        let mut next = self.clone();
        let end = now + overlap;
        let old = self
            .credentials
            .first()
            .filter(|_| overlap > chrono::Duration::zero())
            .map(|c| StoredCredential { until: Some(c.until.map_or(end, |u| u.min(end))), ..c.clone() });
        next.credentials = std::iter::once(new).chain(old).collect();
        next.version += 1;
        next
    }

    /// The record revoked at `now`.
    pub fn revoked(&self, now: DateTime<Utc>) -> ApiKeyRecord {
        let mut next = self.clone();
        next.revoked_at = Some(now);
        next.version += 1;
        next
    }
}

/// Why a key could not be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyConflict {
    /// Another key of the same tenant has the name.
    #[error("a key with this name exists")]
    Name,
    /// Another key has the same secret, or a grant the same principal.
    #[error("this secret or principal is already in use by another key")]
    Credential,
    /// The key changed since it was read (or is gone).
    #[error("the key changed meanwhile; try again")]
    Changed,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_compare_equal_only_when_equal() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }

    #[test]
    fn generated_secrets_are_long_random_and_printable() {
        let a = generate_secret();
        assert!(a.starts_with(SECRET_PREFIX) && a.len() == SECRET_PREFIX.len() + 43, "{a}");
        assert_ne!(a, generate_secret());
        assert_eq!(check_secret(&a), Ok(()));
        assert_eq!(display_prefix(&a).unwrap().len(), 8);
        assert_eq!(display_prefix("sekret-ops"), None, "nothing of a chosen secret");
    }

    #[test]
    fn any_printable_secret_is_taken_whole() {
        assert_eq!(check_secret("abc=="), Ok(()));
        assert_eq!(check_secret("="), Ok(()));
        assert_eq!(check_secret("a,b=c"), Ok(()));
        assert_eq!(check_secret(""), Err(Invalid::Empty));
        assert_eq!(check_secret("two words"), Ok(()));
        assert!(matches!(check_secret(" a"), Err(Invalid::Character(_))));
        assert!(matches!(check_secret("a "), Err(Invalid::Character(_))));
        assert!(matches!(check_secret("a\tb"), Err(Invalid::Character(_))));
        assert!(matches!(check_secret("a\u{7f}"), Err(Invalid::Character(_))));
        assert!(matches!(check_secret("é"), Err(Invalid::Character(_))));
        assert_eq!(check_secret(&"x".repeat(MAX_SECRET_BYTES + 1)), Err(Invalid::TooLong(MAX_SECRET_BYTES)));
    }

    #[test]
    fn names_cannot_pose_as_an_actor_chain() {
        assert_eq!(check_name("ops-1.bot@acme"), Ok(()));
        for bad in ["a b", "a`b", "a as b", "x\n", "é", "a=b", "a:b"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(check_name(&"n".repeat(65)), Err(Invalid::TooLong(MAX_NAME_CHARS)));
    }

    #[test]
    fn actor_values_are_refused_not_cut() {
        assert_eq!(check_actor_header("alice@example.com (on-call)"), Ok(()));
        assert_eq!(check_actor_header(&"a".repeat(MAX_ACTOR_HEADER_CHARS)), Ok(()));
        assert_eq!(check_actor_header(&"a".repeat(MAX_ACTOR_HEADER_CHARS + 1)), Err(Invalid::TooLong(256)));
        for bad in ["a`b", "a\u{1b}[31m", "a\rb", "a\tb", "zoë", ""] {
            assert!(check_actor_header(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn lookups_are_keyed_hashes() {
        let k1 = Keyring::new("k1", [1; 32]);
        let k2 = Keyring::new("k2", [2; 32]);
        assert_eq!(secret_lookup(&k1, "s"), secret_lookup(&k1, "s"));
        assert_ne!(secret_lookup(&k1, "s"), secret_lookup(&k2, "s"), "another data key, another hash");
        assert_ne!(secret_lookup(&k1, "s"), secret_lookup(&k1, "t"));
        assert!(!secret_lookup(&k1, "sekret").contains("sekret"));
        assert_eq!(principal_lookup("arn:aws:iam::1:user/a"), "p:arn:aws:iam::1:user/a");
    }

    fn cred(l: &str) -> StoredCredential {
        StoredCredential { lookup: l.into(), prefix: None, until: None }
    }

    #[test]
    fn rotation_keeps_the_old_secret_for_the_overlap_only() {
        let t0 = Utc::now();
        let k = ApiKeyRecord::new("a", Role::Reader, None, cred("s:1"), "key:root", t0);
        assert!(k.admits("s:1", t0) && !k.admits("s:2", t0));
        let r = k.rotated(cred("s:2"), t0, chrono::Duration::minutes(10));
        assert_eq!(r.version, 2);
        assert!(r.admits("s:2", t0) && r.admits("s:1", t0 + chrono::Duration::minutes(9)));
        assert!(!r.admits("s:1", t0 + chrono::Duration::minutes(10)));
        let r2 = r.rotated(cred("s:3"), t0, chrono::Duration::minutes(10));
        assert_eq!(r2.credentials.len(), MAX_CREDENTIALS, "the oldest is dropped");
        assert!(!r2.admits("s:1", t0));
        let r3 = r2.rotated(cred("s:4"), t0, chrono::Duration::zero());
        assert_eq!(r3.credentials.len(), 1);
        let gone = r3.revoked(t0);
        assert!(!gone.admits("s:4", t0));
        assert_eq!(gone.state(t0), "revoked");
        let mut exp = k.clone();
        exp.expires_at = Some(t0);
        assert!(!exp.admits("s:1", t0));
        assert_eq!(exp.state(t0), "expired");
    }
}
