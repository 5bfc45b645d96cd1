//! Hookline's own keys: the data key that seals secrets at rest (signing
//! secrets, and any other key material a store keeps) and the purpose keys
//! derived from it (cursor authentication, the ids of operational events).
//!
//! The data key is never stored in clear. Each backend keeps it wrapped by
//! a master key it does not store beside the data (a key file on `hookline
//! serve`, KMS on AWS) and hands the unwrapped key to [`Keyring::new`] once
//! per process. Rotating the master key re-wraps the data key; nothing
//! sealed with it changes, so rotation needs no downtime and no pass over
//! the stores.
//!
//! Sealing is XChaCha20-Poly1305 with a random 24-byte nonce per value
//! (random nonces are safe at this size for any number of values) and the
//! value's *context* (what it is and whose, e.g. `signing-secret:sub_1`) as
//! associated data, so a sealed value copied onto another record does not
//! open there.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

/// What every sealed value starts with (format version 1), so a store can
/// tell a sealed value from one written before sealing existed.
pub const SEALED_PREFIX: &str = "hks1.";

/// Length of a data key in bytes.
pub const DATA_KEY_BYTES: usize = 32;

/// Why a sealed value did not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// Not in the sealed format (cut short, edited, or never sealed).
    #[error("the stored value is not a sealed secret")]
    Malformed,
    /// Sealed with a data key this keyring does not hold.
    #[error("the stored value was sealed with data key {0:?}, which this process does not hold")]
    UnknownKey(String),
    /// The key is right but the value or its context is not what was sealed
    /// (tampered with, or moved to another record).
    #[error("the stored value does not open with its data key (tampered with, or moved from another record)")]
    Tampered,
}

/// One data key.
struct DataKey {
    id: String,
    key: [u8; DATA_KEY_BYTES],
}

impl Drop for DataKey {
    fn drop(&mut self) {
        for b in &mut self.key {
            // SAFETY: `b` is a valid, aligned, exclusive reference.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
    }
}

/// The data keys of one process: the current one seals and derives; older
/// ones (after a data-key rotation) still open what they sealed.
pub struct Keyring {
    current: DataKey,
    older: Vec<DataKey>,
}

impl std::fmt::Debug for Keyring {
    /// Names the keys, never shows them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring")
            .field("current", &self.current.id)
            .field("older", &self.older.iter().map(|k| k.id.as_str()).collect::<Vec<_>>())
            .finish()
    }
}

impl Keyring {
    /// A keyring whose current data key is `key`, known as `id` (a short
    /// name without `.`, written into every value it seals).
    pub fn new(id: impl Into<String>, key: [u8; DATA_KEY_BYTES]) -> Self {
        let id = id.into();
        debug_assert!(!id.is_empty() && !id.contains('.'), "a data key id is short and has no '.'");
        Keyring { current: DataKey { id, key }, older: Vec::new() }
    }

    /// Adds a data key that opens what it sealed but seals nothing new.
    pub fn with_older(mut self, id: impl Into<String>, key: [u8; DATA_KEY_BYTES]) -> Self {
        self.older.push(DataKey { id: id.into(), key });
        self
    }

    /// A keyring with a fresh random key that nothing else knows: for tests
    /// and for tools that store nothing (what it seals cannot be opened by
    /// any other process).
    pub fn ephemeral() -> Self {
        Keyring::new("ephemeral", random_data_key())
    }

    /// The id of the data key that seals.
    pub fn current_id(&self) -> &str {
        &self.current.id
    }

    /// `plaintext` sealed for `context`: `hks1.<key id>.<base64url(nonce ‖
    /// ciphertext ‖ tag)>`.
    pub fn seal(&self, plaintext: &[u8], context: &str) -> String {
        let mut nonce = [0u8; 24];
        rand::thread_rng().fill_bytes(&mut nonce);
        let cipher = XChaCha20Poly1305::new((&self.current.key).into());
        let sealed = cipher
            .encrypt(XNonce::from_slice(&nonce), Payload { msg: plaintext, aad: context.as_bytes() })
            .expect("sealing into memory cannot fail");
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        format!("{SEALED_PREFIX}{}.{}", self.current.id, URL_SAFE_NO_PAD.encode(bytes))
    }

    /// What [`Self::seal`] sealed for the same `context`.
    ///
    /// # Errors
    ///
    /// [`SealError`]: not sealed, another data key, or tampered with.
    pub fn open(&self, sealed: &str, context: &str) -> Result<Vec<u8>, SealError> {
        let rest = sealed.strip_prefix(SEALED_PREFIX).ok_or(SealError::Malformed)?;
        let (id, body) = rest.split_once('.').ok_or(SealError::Malformed)?;
        let key = std::iter::once(&self.current)
            .chain(&self.older)
            .find(|k| k.id == id)
            .ok_or_else(|| SealError::UnknownKey(id.to_string()))?;
        let bytes = URL_SAFE_NO_PAD.decode(body).map_err(|_| SealError::Malformed)?;
        if bytes.len() < 24 + 16 {
            return Err(SealError::Malformed);
        }
        let (nonce, ciphertext) = bytes.split_at(24);
        XChaCha20Poly1305::new((&key.key).into())
            .decrypt(XNonce::from_slice(nonce), Payload { msg: ciphertext, aad: context.as_bytes() })
            .map_err(|_| SealError::Tampered)
    }

    /// Whether `value` is in the sealed format (says nothing of whether it
    /// opens).
    pub fn is_sealed(value: &str) -> bool {
        value.starts_with(SEALED_PREFIX)
    }

    /// A key for one `purpose` (`"cursor"`, `"operational-event-id"`, …),
    /// derived from the current data key: stable for as long as the data key
    /// is, the same in every process of one deployment, and unrelated to
    /// the key of any other purpose.
    pub fn derive(&self, purpose: &str) -> [u8; 32] {
        self.mac(&["derive", purpose])
    }

    /// HMAC-SHA256 under the current data key of `parts`, each
    /// length-prefixed (so no two lists of parts collide).
    pub fn mac(&self, parts: &[&str]) -> [u8; 32] {
        let mut mac =
            <Hmac<Sha256> as hmac::KeyInit>::new_from_slice(&self.current.key).expect("HMAC accepts any key length");
        for p in parts {
            mac.update(&(p.len() as u64).to_be_bytes());
            mac.update(p.as_bytes());
        }
        mac.finalize().into_bytes().into()
    }
}

/// A fresh random data key.
pub fn random_data_key() -> [u8; DATA_KEY_BYTES] {
    let mut k = [0u8; DATA_KEY_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut k);
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_with_its_key_and_context() {
        let k = Keyring::new("k1", [7; 32]);
        let s = k.seal(b"whsec_abc", "signing-secret:sub_1");
        assert!(Keyring::is_sealed(&s) && s.starts_with("hks1.k1."), "{s}");
        assert!(!s.contains("whsec_abc"));
        assert_eq!(k.open(&s, "signing-secret:sub_1").unwrap(), b"whsec_abc");
        assert_eq!(k.open(&s, "signing-secret:sub_2"), Err(SealError::Tampered), "moved to another record");
        assert_ne!(s, k.seal(b"whsec_abc", "signing-secret:sub_1"), "a fresh nonce every time");
        let other = Keyring::new("k1", [8; 32]);
        assert_eq!(other.open(&s, "signing-secret:sub_1"), Err(SealError::Tampered));
        assert_eq!(Keyring::new("k2", [7; 32]).open(&s, "x"), Err(SealError::UnknownKey("k1".into())));
        let rotated = Keyring::new("k2", [9; 32]).with_older("k1", [7; 32]);
        assert_eq!(rotated.open(&s, "signing-secret:sub_1").unwrap(), b"whsec_abc");
        assert!(rotated.seal(b"x", "c").starts_with("hks1.k2."));
    }

    #[test]
    fn malformed_values_are_refused_not_panicked_on() {
        let k = Keyring::new("k1", [7; 32]);
        for bad in ["", "whsec_abc", "hks1.", "hks1.k1", "hks1.k1.", "hks1.k1.!!!", "hks1.k1.AAAA"] {
            assert!(k.open(bad, "c").is_err(), "{bad:?}");
        }
        let s = k.seal(b"v", "c");
        let mut edited = s.clone().into_bytes();
        let last = edited.len() - 2;
        edited[last] = if edited[last] == b'A' { b'B' } else { b'A' };
        assert!(k.open(std::str::from_utf8(&edited).unwrap(), "c").is_err());
    }

    #[test]
    fn derived_keys_differ_by_purpose_and_key_and_hide_the_key() {
        let k = Keyring::new("k1", [7; 32]);
        assert_eq!(k.derive("cursor"), Keyring::new("k1", [7; 32]).derive("cursor"));
        assert_ne!(k.derive("cursor"), k.derive("operational-event-id"));
        assert_ne!(k.derive("cursor"), Keyring::new("k1", [8; 32]).derive("cursor"));
        assert_ne!(k.mac(&["ab", "c"]), k.mac(&["a", "bc"]));
        assert!(!format!("{k:?}").contains('7'));
    }
}
