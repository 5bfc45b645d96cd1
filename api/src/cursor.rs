//! Page cursors of the list endpoints: opaque to clients, issued by
//! Hookline. A cursor holds where the next page starts and a fingerprint of
//! the filters of the request that got it, with a checksum, all base64url;
//! a cursor Hookline did not issue (garbage, cut short, edited) or one sent
//! with other filters is refused (the API answers `400` naming `cursor`).
//! It is not a secret: one forged on purpose only starts a listing
//! elsewhere, which the caller may list anyway.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};

/// The layout version written first in every cursor.
const VERSION: &str = "c1";

/// Why a cursor was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    /// Not a cursor Hookline issued: it does not decode, or its checksum
    /// does not match.
    #[error("cursor is not one Hookline issued; pass next_cursor from the previous page exactly as received")]
    NotIssued,
    /// Issued for a listing with other filters.
    #[error(
        "cursor was issued for other filters; repeat the filters of the first page, or start again without a cursor"
    )]
    OtherFilters,
}

fn digest_hex(parts: &[&str], bytes: usize) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    h.finalize()[..bytes].iter().map(|b| format!("{b:02x}")).collect()
}

/// A cursor for the page after `after`, of a listing with `filters` (any
/// text naming the filters, the same for every page of one listing).
pub fn issue(after: &str, filters: &str) -> String {
    let fingerprint = digest_hex(&[filters], 8);
    let sum = digest_hex(&[VERSION, &fingerprint, after], 8);
    URL_SAFE_NO_PAD.encode(format!("{VERSION}\n{fingerprint}\n{sum}\n{after}"))
}

/// Where the page of a cursor from [`issue`] starts, if it was issued for
/// these `filters`.
///
/// # Errors
///
/// [`CursorError::NotIssued`] or [`CursorError::OtherFilters`].
pub fn read(cursor: &str, filters: &str) -> Result<String, CursorError> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor.trim()).map_err(|_| CursorError::NotIssued)?;
    let text = String::from_utf8(bytes).map_err(|_| CursorError::NotIssued)?;
    let mut parts = text.splitn(4, '\n');
    let (Some(version), Some(fingerprint), Some(sum), Some(after)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(CursorError::NotIssued);
    };
    if version != VERSION || after.is_empty() || sum != digest_hex(&[version, fingerprint, after], 8) {
        return Err(CursorError::NotIssued);
    }
    if fingerprint != digest_hex(&[filters], 8) {
        return Err(CursorError::OtherFilters);
    }
    Ok(after.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_cursor_reads_back_only_with_its_filters() {
        let c = issue("sub_0192", "tenant_id=acme");
        assert_eq!(read(&c, "tenant_id=acme").as_deref(), Ok("sub_0192"));
        assert_eq!(read(&c, "tenant_id=globex"), Err(CursorError::OtherFilters));
        assert!(c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "URL-safe: {c}");
    }

    #[test]
    fn cursors_not_issued_are_refused() {
        let c = issue("sub_0192", "");
        for bad in ["", "x", "sub_0192", "!!!", &c[..c.len() - 2], &URL_SAFE_NO_PAD.encode("c1\nab\ncd\nsub_1")] {
            assert_eq!(read(bad, ""), Err(CursorError::NotIssued), "{bad}");
        }
    }

    proptest! {
        /// Changing any character of a cursor makes it refused or, at
        /// worst, another valid cursor (never a panic).
        #[test]
        fn edited_cursors_never_panic(at in 0usize..60, c in "[A-Za-z0-9_-]") {
            let mut cur = issue("sub_0192a1b2c3", "event_type=task.created").into_bytes();
            let at = at % cur.len();
            cur[at] = c.as_bytes()[0];
            let _ = read(std::str::from_utf8(&cur).unwrap(), "event_type=task.created");
        }
    }
}
