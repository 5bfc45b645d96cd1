//! Page cursors of the list endpoints: opaque to clients, issued by
//! Hookline. A cursor holds where the next page starts and a fingerprint of
//! the filters of the request that got it, authenticated with an HMAC-SHA256
//! tag (128 bits) under a server secret (the deployment's purpose key
//! `keyring.derive("cursor")`, [`crate::Api::cursor_key`]), all base64url. A
//! cursor Hookline did not issue (garbage, cut short, edited, re-encoded
//! without the key, or issued by another deployment) is refused before
//! anything is read (the API answers `400 invalid_cursor` naming the
//! field), and so is one
//! sent with other filters.
//!
//! [`issue`] and [`read`] are pure functions of the key and their text, so
//! they can be tested and fuzzed without a store.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

use crate::error::{ApiError, ErrorCode};

/// The layout version written first in every cursor (`c1` was the unkeyed
/// checksum, no longer accepted).
const VERSION: &str = "c2";

/// Bytes of the tag kept at the front of a cursor.
const TAG_BYTES: usize = 16;

/// The key cursors are authenticated with (32 bytes, from the keyring).
pub type CursorKey = [u8; 32];

/// Why a cursor was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    /// Not a cursor Hookline issued: it does not decode, or its tag does
    /// not match under this deployment's key.
    #[error("cursor is not one Hookline issued; pass next_cursor from the previous page exactly as received")]
    NotIssued,
    /// Issued for a listing with other filters.
    #[error(
        "cursor was issued for other filters; repeat the filters of the first page, or start again without a cursor"
    )]
    OtherFilters,
}

fn fingerprint(filters: &str) -> String {
    Sha256::digest(filters.as_bytes())[..8].iter().map(|b| format!("{b:02x}")).collect()
}

fn tag(key: &CursorKey, text: &str) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(b"hookline-cursor\n");
    mac.update(text.as_bytes());
    mac
}

/// A cursor for the page after `after`, of a listing with `filters` (any
/// text naming the filters, the same for every page of one listing),
/// authenticated under `key`.
pub fn issue(key: &CursorKey, after: &str, filters: &str) -> String {
    let text = format!("{VERSION}\n{}\n{after}", fingerprint(filters));
    let mut bytes = tag(key, &text).finalize().into_bytes()[..TAG_BYTES].to_vec();
    bytes.extend_from_slice(text.as_bytes());
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Where the page of a cursor from [`issue`] under `key` starts, if it was
/// issued for these `filters`. The tag is checked (in constant time)
/// before anything else of the cursor is looked at.
///
/// # Errors
///
/// [`CursorError::NotIssued`] or [`CursorError::OtherFilters`].
pub fn read(key: &CursorKey, cursor: &str, filters: &str) -> Result<String, CursorError> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor.trim()).map_err(|_| CursorError::NotIssued)?;
    if bytes.len() <= TAG_BYTES {
        return Err(CursorError::NotIssued);
    }
    let (sum, text) = bytes.split_at(TAG_BYTES);
    let text = std::str::from_utf8(text).map_err(|_| CursorError::NotIssued)?;
    tag(key, text).verify_truncated_left(sum).map_err(|_| CursorError::NotIssued)?;
    let mut parts = text.splitn(3, '\n');
    let (Some(VERSION), Some(print), Some(after)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(CursorError::NotIssued);
    };
    if after.is_empty() {
        return Err(CursorError::NotIssued);
    }
    if print != fingerprint(filters) {
        return Err(CursorError::OtherFilters);
    }
    Ok(after.to_string())
}

impl super::Api {
    /// The key this deployment's cursors are authenticated with: derived
    /// from the data key ([`shared::keyring::Keyring::derive`]), the same
    /// in every process of the deployment.
    pub(super) fn cursor_key(&self) -> CursorKey {
        self.hookline.keyring.derive("cursor")
    }

    /// Where a listing's page starts: `given`, the cursor sent as `field`,
    /// read under this deployment's key for `filters` (`None` when none was
    /// sent).
    ///
    /// # Errors
    ///
    /// 400 `invalid_cursor` naming `field` (see [`refused`]).
    pub(super) fn page_after(
        &self,
        field: &str,
        given: Option<&str>,
        filters: &str,
    ) -> Result<Option<String>, ApiError> {
        given.map(|c| read(&self.cursor_key(), c, filters).map_err(|e| refused(field, &e))).transpose()
    }
}

/// The answer to a cursor [`read`] refused: 400 `invalid_cursor` naming
/// `field`, never a store read.
pub(super) fn refused(field: &str, error: &CursorError) -> ApiError {
    ApiError::new(ErrorCode::InvalidCursor, error.to_string()).on(field)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KEY: CursorKey = [7; 32];

    #[test]
    fn a_cursor_reads_back_only_with_its_filters() {
        let c = issue(&KEY, "sub_0192", "tenant_id=acme");
        assert_eq!(read(&KEY, &c, "tenant_id=acme").as_deref(), Ok("sub_0192"));
        assert_eq!(read(&KEY, &c, "tenant_id=globex"), Err(CursorError::OtherFilters));
        assert!(c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "URL-safe: {c}");
    }

    /// The unkeyed layout of before (`c1`, a plain SHA-256 checksum),
    /// computable by anyone: what a forger would send.
    fn unkeyed(after: &str, filters: &str) -> String {
        let hex = |parts: &[&str]| -> String {
            let mut h = Sha256::new();
            for p in parts {
                h.update(p.as_bytes());
                h.update([0u8]);
            }
            h.finalize()[..8].iter().map(|b| format!("{b:02x}")).collect()
        };
        let fp = hex(&[filters]);
        let sum = hex(&["c1", &fp, after]);
        URL_SAFE_NO_PAD.encode(format!("c1\n{fp}\n{sum}\n{after}"))
    }

    #[test]
    fn cursors_not_issued_are_refused() {
        let c = issue(&KEY, "sub_0192", "");
        let forged_text = format!("{VERSION}\n{}\nsub_1", fingerprint(""));
        let mut zero_tag = vec![0u8; TAG_BYTES];
        zero_tag.extend_from_slice(forged_text.as_bytes());
        for bad in [
            String::new(),
            "x".into(),
            "sub_0192".into(),
            "!!!".into(),
            c[..c.len() - 2].to_string(),
            URL_SAFE_NO_PAD.encode("c1\nab\ncd\nsub_1"),
            unkeyed("sub_0192", ""),
            URL_SAFE_NO_PAD.encode(forged_text.as_bytes()),
            URL_SAFE_NO_PAD.encode(zero_tag),
            issue(&[8; 32], "sub_0192", ""),
        ] {
            assert_eq!(read(&KEY, &bad, ""), Err(CursorError::NotIssued), "{bad}");
        }
    }

    /// Flipping any bit of a cursor's bytes makes it refused.
    #[test]
    fn every_bit_flip_is_refused() {
        let c = issue(&KEY, "evt_0192a1b2c3", "event_type=task.created");
        let bytes = URL_SAFE_NO_PAD.decode(&c).unwrap();
        for i in 0..bytes.len() * 8 {
            let mut b = bytes.clone();
            b[i / 8] ^= 1 << (i % 8);
            let edited = URL_SAFE_NO_PAD.encode(&b);
            assert_eq!(read(&KEY, &edited, "event_type=task.created"), Err(CursorError::NotIssued), "bit {i}");
        }
    }

    proptest! {
        /// Changing any character of a cursor makes it refused (never a
        /// panic, never another valid cursor).
        #[test]
        fn edited_cursors_are_refused(at in 0usize..80, c in "[A-Za-z0-9_-]") {
            let orig = issue(&KEY, "sub_0192a1b2c3", "event_type=task.created");
            let mut cur = orig.clone().into_bytes();
            let at = at % cur.len();
            cur[at] = c.as_bytes()[0];
            let cur = String::from_utf8(cur).unwrap();
            let r = read(&KEY, &cur, "event_type=task.created");
            // Base64 without padding ignores the low bits of the last
            // character: an edit there may decode to the same bytes.
            if URL_SAFE_NO_PAD.decode(&cur).ok() != URL_SAFE_NO_PAD.decode(&orig).ok() {
                prop_assert_eq!(r, Err(CursorError::NotIssued));
            }
        }

        /// Any text at all is refused without a panic.
        #[test]
        fn arbitrary_text_is_refused(s in ".{0,200}") {
            prop_assert!(read(&KEY, &s, "").is_err());
        }
    }
}
