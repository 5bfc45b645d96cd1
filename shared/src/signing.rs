//! Standard Webhooks signatures (symmetric, `v1`).
//!
//! Every delivery carries `webhook-id`, `webhook-timestamp` and
//! `webhook-signature` headers as defined by the Standard Webhooks
//! specification, so subscribers can verify them with any published Standard
//! Webhooks library. The signed content is `{msg_id}.{timestamp}.{body}`, the
//! MAC is HMAC-SHA256 keyed with the decoded secret, and a signature is
//! serialised as `v1,<base64 of the MAC>`. During a secret rotation a message is
//! signed with several secrets and the signatures are space separated.

use std::fmt;
use std::str::FromStr;

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use rand::RngCore;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The prefix that marks a Standard Webhooks symmetric signing secret.
pub const SECRET_PREFIX: &str = "whsec_";

/// The signature version identifier for HMAC-SHA256 signatures.
pub const SIGNATURE_VERSION: &str = "v1";

/// How far (in seconds) `webhook-timestamp` may be from the verifier's clock
/// before a signature is refused; five minutes, as the specification and its
/// libraries use, to limit replays.
pub const DEFAULT_TOLERANCE_SECS: i64 = 300;

/// Number of random key bytes in a [`Secret::generate`]d secret (256 bits).
pub const GENERATED_KEY_BYTES: usize = 32;

/// Smallest key the specification allows (24 bytes, 192 bits).
pub const MIN_KEY_BYTES: usize = 24;

/// Largest key the specification allows (64 bytes, 512 bits).
pub const MAX_KEY_BYTES: usize = 64;

/// Base64 with the standard alphabet that accepts the key with or without
/// `=` padding, because some producers strip it.
const LENIENT_STANDARD: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A subscription's signing secret, `whsec_` + base64 of the key bytes.
///
/// It is kept in its canonical serialised form (padded standard base64) and as
/// decoded key bytes, so signing does not decode it each time. `Debug` and
/// `Display` never show it; call [`Secret::expose`] deliberately where the
/// secret must leave the process (storage, the one-time API response).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    encoded: String,
    key: Vec<u8>,
}

impl Secret {
    /// Creates a new secret from [`GENERATED_KEY_BYTES`] bytes of the
    /// operating system's CSPRNG, for a new subscription or a rotation.
    pub fn generate() -> Secret {
        let mut key = vec![0u8; GENERATED_KEY_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut key);
        Secret::from_key(key)
    }

    /// Parses a stored or user-supplied `whsec_<base64>` secret.
    ///
    /// Surrounding whitespace is ignored and base64 padding is optional. The
    /// key must be 24 to 64 bytes, the range the specification allows. Errors
    /// never contain the secret itself.
    pub fn parse(s: &str) -> Result<Secret, SigningError> {
        let s = s.trim();
        let b64 = s.strip_prefix(SECRET_PREFIX).ok_or(SigningError::MissingPrefix)?;
        if b64.is_empty() {
            return Err(SigningError::Empty);
        }
        let key = LENIENT_STANDARD.decode(b64).map_err(|_| SigningError::InvalidBase64)?;
        if !(MIN_KEY_BYTES..=MAX_KEY_BYTES).contains(&key.len()) {
            return Err(SigningError::KeyLength(key.len()));
        }
        Ok(Secret::from_key(key))
    }

    /// The full `whsec_…` string, for storage and the one-time API response
    /// that shows it to the subscriber. Never log it.
    pub fn expose(&self) -> &str {
        &self.encoded
    }

    fn from_key(key: Vec<u8>) -> Secret {
        let encoded = format!("{SECRET_PREFIX}{}", STANDARD.encode(&key));
        Secret { encoded, key }
    }

    /// A MAC keyed with this secret and fed `{msg_id}.{timestamp}.{body}`.
    fn mac(&self, msg_id: &str, timestamp: i64, body: &[u8]) -> HmacSha256 {
        // HMAC accepts keys of any length, so this cannot fail.
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("HMAC accepts any key length");
        mac.update(msg_id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(whsec_…redacted)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("whsec_…redacted")
    }
}

impl FromStr for Secret {
    type Err = SigningError;

    /// Same as [`Secret::parse`], so secrets can come from `clap`/env parsing.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Secret::parse(s)
    }
}

/// Why a signing secret could not be parsed. Messages never include the
/// secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SigningError {
    /// The string does not start with `whsec_`.
    #[error("signing secret must start with \"whsec_\"")]
    MissingPrefix,
    /// Nothing follows the `whsec_` prefix.
    #[error("signing secret is empty after the \"whsec_\" prefix")]
    Empty,
    /// What follows the prefix is not standard base64.
    #[error("signing secret is not valid base64 after the \"whsec_\" prefix")]
    InvalidBase64,
    /// The decoded key is shorter than 24 or longer than 64 bytes.
    #[error("signing secret key must be 24 to 64 bytes, got {0}")]
    KeyLength(usize),
}

/// Why a received webhook failed verification.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum VerifyError {
    /// A required header is absent or empty; carries the header name
    /// (`webhook-id`, `webhook-timestamp` or `webhook-signature`).
    #[error("missing header {0}")]
    MissingHeader(&'static str),
    /// `webhook-timestamp` is not an integer number of seconds.
    #[error("webhook-timestamp is not an integer unix timestamp")]
    BadTimestamp,
    /// `webhook-timestamp` is further from now than the tolerance (a replay or
    /// a badly skewed clock).
    #[error("webhook-timestamp is outside the allowed tolerance")]
    TimestampOutOfTolerance,
    /// No `v1` signature in the header matches any of the secrets.
    #[error("no matching signature")]
    NoMatchingSignature,
}

/// Signs one message: `v1,<base64 HMAC-SHA256 of "{msg_id}.{timestamp}.{body}">`.
///
/// `body` must be exactly the bytes that are sent; the signature covers the id
/// and timestamp too so neither can be replayed with another body.
pub fn sign(secret: &Secret, msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    let tag = secret.mac(msg_id, timestamp, body).finalize().into_bytes();
    format!("{SIGNATURE_VERSION},{}", STANDARD.encode(tag))
}

/// The `webhook-signature` header value: one `v1` signature per secret,
/// space separated, so a receiver that knows either the old or the new secret
/// accepts the message while a rotation overlaps.
pub fn signature_header<'a>(
    secrets: impl IntoIterator<Item = &'a Secret>,
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> String {
    let mut header = String::new();
    for secret in secrets {
        if !header.is_empty() {
            header.push(' ');
        }
        header.push_str(&sign(secret, msg_id, timestamp, body));
    }
    header
}

/// Verifies a received webhook the way a Standard Webhooks consumer does.
///
/// The headers are passed as their raw values (`""` for an absent header).
/// The timestamp must be within `tolerance_secs` of `now` in either direction.
/// Every `v1` signature in the space-separated header is tried against every
/// secret (rotation); other versions (e.g. `v1a`) are skipped. MACs are compared
/// in constant time.
pub fn verify(
    secrets: &[Secret],
    msg_id: &str,
    timestamp_header: &str,
    signature_header: &str,
    body: &[u8],
    now: i64,
    tolerance_secs: i64,
) -> Result<(), VerifyError> {
    if msg_id.is_empty() {
        return Err(VerifyError::MissingHeader("webhook-id"));
    }
    let timestamp_header = timestamp_header.trim();
    if timestamp_header.is_empty() {
        return Err(VerifyError::MissingHeader("webhook-timestamp"));
    }
    if signature_header.trim().is_empty() {
        return Err(VerifyError::MissingHeader("webhook-signature"));
    }
    let timestamp: i64 = timestamp_header.parse().map_err(|_| VerifyError::BadTimestamp)?;
    let tolerance = u64::try_from(tolerance_secs).unwrap_or(0);
    if now.abs_diff(timestamp) > tolerance {
        return Err(VerifyError::TimestampOutOfTolerance);
    }

    let candidates: Vec<Vec<u8>> = signature_header
        .split_ascii_whitespace()
        .filter_map(|sig| sig.split_once(','))
        .filter(|(version, _)| *version == SIGNATURE_VERSION)
        .filter_map(|(_, b64)| LENIENT_STANDARD.decode(b64).ok())
        .collect();
    if candidates.is_empty() {
        return Err(VerifyError::NoMatchingSignature);
    }
    for secret in secrets {
        let mac = secret.mac(msg_id, timestamp, body);
        // `verify_slice` compares in constant time (and refuses other lengths).
        if candidates.iter().any(|candidate| mac.clone().verify_slice(candidate).is_ok()) {
            return Ok(());
        }
    }
    Err(VerifyError::NoMatchingSignature)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vector from the Standard Webhooks JavaScript library's "sign function
    /// works" test.
    const JS_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const JS_MSG_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const JS_TS: i64 = 1614265330;
    const JS_BODY: &[u8] = br#"{"test": 2432232314}"#;
    const JS_SIG: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    /// Vector from the Standard Webhooks Rust library's `test_sign`.
    const RS_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    const RS_MSG_ID: &str = "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk";
    const RS_TS: i64 = 1649367553;
    const RS_BODY: &[u8] = br#"{"email":"test@example.com","username":"test_user"}"#;
    const RS_SIG: &str = "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=";

    fn secret(s: &str) -> Secret {
        Secret::parse(s).unwrap()
    }

    #[test]
    fn published_vectors() {
        assert_eq!(sign(&secret(JS_SECRET), JS_MSG_ID, JS_TS, JS_BODY), JS_SIG);
        assert_eq!(sign(&secret(RS_SECRET), RS_MSG_ID, RS_TS, RS_BODY), RS_SIG);
    }

    #[test]
    fn published_vectors_verify() {
        let ts = JS_TS.to_string();
        assert_eq!(verify(&[secret(JS_SECRET)], JS_MSG_ID, &ts, JS_SIG, JS_BODY, JS_TS, 300), Ok(()));
        let ts = RS_TS.to_string();
        assert_eq!(verify(&[secret(RS_SECRET)], RS_MSG_ID, &ts, RS_SIG, RS_BODY, RS_TS + 299, 300), Ok(()));
    }

    #[test]
    fn library_negative_vector() {
        // The Rust library's `test_no_verify`: a well-formed but wrong signature.
        let ts = RS_TS.to_string();
        let bad = "v1,R3PTzyfHASBKHH98a7yexTwaJ4yNIcGhFQc1yuN+BPU=";
        assert_eq!(
            verify(&[secret(RS_SECRET)], RS_MSG_ID, &ts, bad, RS_BODY, RS_TS, 300),
            Err(VerifyError::NoMatchingSignature)
        );
    }

    #[test]
    fn parse_and_expose_round_trip() {
        let s = secret(JS_SECRET);
        assert_eq!(s.expose(), JS_SECRET);
        assert_eq!(Secret::parse(s.expose()).unwrap(), s);
        assert_eq!(JS_SECRET.parse::<Secret>().unwrap(), s);
        // Padding optional; whitespace trimmed; same key either way.
        let padded = Secret::parse("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=").unwrap();
        let unpadded = Secret::parse(" whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n").unwrap();
        assert_eq!(padded, unpadded);
        assert_eq!(unpadded.expose(), "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
    }

    #[test]
    fn parse_errors() {
        assert_eq!(Secret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), Err(SigningError::MissingPrefix));
        assert_eq!(Secret::parse(""), Err(SigningError::MissingPrefix));
        assert_eq!(Secret::parse("whsec_"), Err(SigningError::Empty));
        assert_eq!(Secret::parse("whsec_not*base64!"), Err(SigningError::InvalidBase64));
        assert_eq!(Secret::parse("whsec_AAAA"), Err(SigningError::KeyLength(3)));
        let long = format!("whsec_{}", STANDARD.encode([7u8; 65]));
        assert_eq!(Secret::parse(&long), Err(SigningError::KeyLength(65)));
        // Messages never echo the input.
        let err = Secret::parse("whsec_sup3r$ecret").unwrap_err().to_string();
        assert!(!err.contains("sup3r"), "{err}");
    }

    #[test]
    fn generate_is_random_and_parseable() {
        let a = Secret::generate();
        let b = Secret::generate();
        assert_ne!(a, b);
        assert!(a.expose().starts_with("whsec_"));
        assert_eq!(Secret::parse(a.expose()).unwrap(), a);
        assert_eq!(a.key.len(), GENERATED_KEY_BYTES);
    }

    #[test]
    fn debug_and_display_are_redacted() {
        let s = secret(JS_SECRET);
        assert_eq!(format!("{s:?}"), "Secret(whsec_…redacted)");
        assert_eq!(format!("{s}"), "whsec_…redacted");
        let nested = format!("{:?}", Some(vec![s.clone()]));
        assert!(!nested.contains("MfKQ9r8"), "{nested}");
        assert!(!format!("{s:#?}").contains("MfKQ9r8"));
    }

    #[test]
    fn round_trip_with_generated_secret() {
        let s = Secret::generate();
        let body = b"{\"type\":\"user.created\"}";
        let header = signature_header([&s], "msg_1", 1_700_000_000, body);
        assert_eq!(verify(&[s], "msg_1", "1700000000", &header, body, 1_700_000_000, 300), Ok(()));
    }

    #[test]
    fn binary_body_round_trip() {
        let s = Secret::generate();
        let body = [0u8, 255, 128, b'.', 10];
        let sig = sign(&s, "msg_bin", 5, &body);
        assert_eq!(verify(&[s], "msg_bin", "5", &sig, &body, 5, 300), Ok(()));
    }

    #[test]
    fn rotation_signs_with_every_secret() {
        let old = Secret::generate();
        let new = Secret::generate();
        let body = b"{}";
        let header = signature_header([&new, &old], "msg_r", 100, body);
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], sign(&new, "msg_r", 100, body));
        assert_eq!(parts[1], sign(&old, "msg_r", 100, body));
        // A receiver knowing only one of them accepts.
        assert_eq!(verify(std::slice::from_ref(&old), "msg_r", "100", &header, body, 100, 300), Ok(()));
        assert_eq!(verify(std::slice::from_ref(&new), "msg_r", "100", &header, body, 100, 300), Ok(()));
        // A receiver that has both secrets accepts a single signature.
        let single = sign(&old, "msg_r", 100, body);
        assert_eq!(verify(&[new, old], "msg_r", "100", &single, body, 100, 300), Ok(()));
        assert_eq!(signature_header(std::iter::empty(), "msg_r", 100, body), "");
    }

    #[test]
    fn multi_signature_header_from_js_suite() {
        // The JS suite's "multi sig payload is valid": junk v1/v2 entries around
        // the valid one.
        let ts = JS_TS.to_string();
        let header = format!(
            "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= {JS_SIG} v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
        );
        assert_eq!(verify(&[secret(JS_SECRET)], JS_MSG_ID, &ts, &header, JS_BODY, JS_TS, 300), Ok(()));
        // The same under another version tag must not be accepted.
        let v2 = JS_SIG.replacen("v1,", "v2,", 1);
        assert_eq!(
            verify(&[secret(JS_SECRET)], JS_MSG_ID, &ts, &v2, JS_BODY, JS_TS, 300),
            Err(VerifyError::NoMatchingSignature)
        );
    }

    #[test]
    fn tampering_fails() {
        let s = secret(JS_SECRET);
        let ts = JS_TS.to_string();
        let v = |id: &str, ts: &str, sig: &str, body: &[u8]| {
            verify(std::slice::from_ref(&s), id, ts, sig, body, JS_TS, 300)
        };
        assert_eq!(v(JS_MSG_ID, &ts, JS_SIG, br#"{"test": 2432232315}"#), Err(VerifyError::NoMatchingSignature));
        assert_eq!(v("msg_other", &ts, JS_SIG, JS_BODY), Err(VerifyError::NoMatchingSignature));
        let ts2 = (JS_TS + 1).to_string();
        assert_eq!(v(JS_MSG_ID, &ts2, JS_SIG, JS_BODY), Err(VerifyError::NoMatchingSignature));
        // Wrong secret.
        assert_eq!(
            verify(&[Secret::generate()], JS_MSG_ID, &ts, JS_SIG, JS_BODY, JS_TS, 300),
            Err(VerifyError::NoMatchingSignature)
        );
        // Partial and garbage signatures (JS suite).
        assert_eq!(v(JS_MSG_ID, &ts, &JS_SIG[..8], JS_BODY), Err(VerifyError::NoMatchingSignature));
        assert_eq!(v(JS_MSG_ID, &ts, "v1,", JS_BODY), Err(VerifyError::NoMatchingSignature));
        assert_eq!(v(JS_MSG_ID, &ts, "v1,dawfeoifkpqwoekfpqoekf", JS_BODY), Err(VerifyError::NoMatchingSignature));
        assert_eq!(v(JS_MSG_ID, &ts, "garbage", JS_BODY), Err(VerifyError::NoMatchingSignature));
        // No secrets at all.
        assert_eq!(verify(&[], JS_MSG_ID, &ts, JS_SIG, JS_BODY, JS_TS, 300), Err(VerifyError::NoMatchingSignature));
    }

    #[test]
    fn timestamp_tolerance() {
        let s = secret(JS_SECRET);
        let ts = JS_TS.to_string();
        let at =
            |now: i64| verify(std::slice::from_ref(&s), JS_MSG_ID, &ts, JS_SIG, JS_BODY, now, DEFAULT_TOLERANCE_SECS);
        assert_eq!(at(JS_TS + 300), Ok(()));
        assert_eq!(at(JS_TS - 300), Ok(()));
        assert_eq!(at(JS_TS + 301), Err(VerifyError::TimestampOutOfTolerance));
        assert_eq!(at(JS_TS - 301), Err(VerifyError::TimestampOutOfTolerance));
        // Real clock: the JS vector is from 2021 and is long expired.
        assert_eq!(at(chrono::Utc::now().timestamp()), Err(VerifyError::TimestampOutOfTolerance));
        // Extreme values do not overflow.
        assert_eq!(
            verify(std::slice::from_ref(&s), "m", &i64::MIN.to_string(), JS_SIG, JS_BODY, i64::MAX, 300),
            Err(VerifyError::TimestampOutOfTolerance)
        );
    }

    #[test]
    fn header_errors() {
        let s = [secret(JS_SECRET)];
        let ts = JS_TS.to_string();
        assert_eq!(verify(&s, "", &ts, JS_SIG, JS_BODY, JS_TS, 300), Err(VerifyError::MissingHeader("webhook-id")));
        assert_eq!(
            verify(&s, JS_MSG_ID, "", JS_SIG, JS_BODY, JS_TS, 300),
            Err(VerifyError::MissingHeader("webhook-timestamp"))
        );
        assert_eq!(
            verify(&s, JS_MSG_ID, &ts, " ", JS_BODY, JS_TS, 300),
            Err(VerifyError::MissingHeader("webhook-signature"))
        );
        assert_eq!(verify(&s, JS_MSG_ID, "hello", JS_SIG, JS_BODY, JS_TS, 300), Err(VerifyError::BadTimestamp));
        assert_eq!(verify(&s, JS_MSG_ID, "1614265330.5", JS_SIG, JS_BODY, JS_TS, 300), Err(VerifyError::BadTimestamp));
    }
}
