//! The Standard Webhooks test vectors through the public API, as a subscriber
//! using any Standard Webhooks library would check them.

use shared::signing::{self, Secret, VerifyError, DEFAULT_TOLERANCE_SECS};

/// (secret, msg_id, timestamp, payload, expected signature) from the
/// standard-webhooks libraries' test suites (JavaScript "sign function works",
/// Rust `test_sign`).
const VECTORS: &[(&str, &str, i64, &str, &str)] = &[
    (
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        1614265330,
        r#"{"test": 2432232314}"#,
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    ),
    (
        "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
        "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
        1649367553,
        r#"{"email":"test@example.com","username":"test_user"}"#,
        "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=",
    ),
];

#[test]
fn vectors_sign_and_verify() {
    for (secret, id, ts, payload, expected) in VECTORS {
        let secret = Secret::parse(secret).unwrap();
        assert_eq!(signing::sign(&secret, id, *ts, payload.as_bytes()), *expected);
        let header = signing::signature_header([&secret], id, *ts, payload.as_bytes());
        assert_eq!(header, *expected);
        assert_eq!(
            signing::verify(
                std::slice::from_ref(&secret),
                id,
                &ts.to_string(),
                expected,
                payload.as_bytes(),
                *ts,
                DEFAULT_TOLERANCE_SECS
            ),
            Ok(())
        );
        assert_eq!(
            signing::verify(
                &[secret],
                id,
                &ts.to_string(),
                expected,
                payload.as_bytes(),
                *ts + DEFAULT_TOLERANCE_SECS + 1,
                DEFAULT_TOLERANCE_SECS
            ),
            Err(VerifyError::TimestampOutOfTolerance)
        );
    }
}

#[test]
fn rotation_header_carries_both_vectors() {
    // Signing one message with both vector secrets yields both signatures.
    let (s1, id, ts, payload, sig1) = VECTORS[0];
    let s2 = Secret::parse(VECTORS[1].0).unwrap();
    let s1 = Secret::parse(s1).unwrap();
    let header = signing::signature_header([&s1, &s2], id, ts, payload.as_bytes());
    let (first, second) = header.split_once(' ').unwrap();
    assert_eq!(first, sig1);
    assert_eq!(second, signing::sign(&s2, id, ts, payload.as_bytes()));
    for s in [s1, s2] {
        let ok = signing::verify(&[s], id, &ts.to_string(), &header, payload.as_bytes(), ts, 300);
        assert_eq!(ok, Ok(()));
    }
}
