//! Redaction of sensitive values (docs/formats.md#redaction): which keys are
//! sensitive, and a byte-level JSON scanner that replaces their values with
//! `"[REDACTED]"` in place, so the stored body keeps the producer's key
//! order, whitespace and number spelling.

use std::borrow::Cow;

use super::{malformed, EnvelopeError};

/// The string that replaces the value of a sensitive field in a stored body.
pub const REDACTED: &str = "[REDACTED]";

/// Key names whose values are never stored (docs/formats.md#redaction), in their
/// normalized spelling: ASCII lower case with `_` and `-` removed. A key is
/// sensitive when its normalized spelling equals one of these exactly, so
/// `api_key`, `Api-Key` and `APIKEY` are sensitive but `idempotencyKey` and
/// `tokenCount` are not.
pub const SENSITIVE_KEYS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "clientsecret",
    "token",
    "accesstoken",
    "refreshtoken",
    "apikey",
    "authorization",
    "privatekey",
    "creditcard",
    "cardnumber",
    "cvv",
    "ssn",
];

/// Whether an object key names a sensitive value: its spelling, in ASCII
/// lower case with `_` and `-` removed, is exactly one of [`SENSITIVE_KEYS`].
/// Allocation-free because it runs on every key of every ingested body.
pub fn is_sensitive_key(key: &str) -> bool {
    let mut buf = [0u8; 16];
    let mut n = 0;
    for b in key.bytes() {
        if b == b'_' || b == b'-' {
            continue;
        }
        if n == buf.len() {
            return false;
        }
        buf[n] = b.to_ascii_lowercase();
        n += 1;
    }
    SENSITIVE_KEYS.iter().any(|k| k.as_bytes() == &buf[..n])
}

/// Replaces the value of every sensitive key (see [`is_sensitive_key`]) at any
/// depth of a JSON document with `"[REDACTED]"`, keeping every other byte.
///
/// Returns the body to store and the paths redacted; the body borrows `raw`
/// when nothing was redacted. Values that hold no secret (`null`, `""`, or
/// already `"[REDACTED]"`) are left alone. Duplicate keys are all redacted,
/// not only the one a JSON parser would keep.
///
/// # Errors
///
/// [`EnvelopeError::MalformedJson`] if `raw` is not JSON.
pub fn redact_sensitive(raw: &[u8]) -> Result<(Cow<'_, [u8]>, Vec<String>), EnvelopeError> {
    serde_json::from_slice::<serde::de::IgnoredAny>(raw).map_err(malformed)?;
    Ok(match redact_valid(raw) {
        Some((body, paths)) => (Cow::Owned(body), paths),
        None => (Cow::Borrowed(raw), Vec::new()),
    })
}

/// Redacts a body already known to be JSON: `None` when nothing needed
/// redacting (store the original bytes), else the new body and the paths.
pub(super) fn redact_valid(raw: &[u8]) -> Option<(Vec<u8>, Vec<String>)> {
    let mut scan = Scanner { b: raw, pos: 0, path: Vec::new(), hits: Vec::new() };
    scan.value();
    if scan.hits.is_empty() {
        return None;
    }
    let replacement = format!("\"{REDACTED}\"");
    let mut out = Vec::with_capacity(raw.len());
    let mut last = 0;
    let mut paths = Vec::with_capacity(scan.hits.len());
    for (start, end, path) in scan.hits {
        out.extend_from_slice(&raw[last..start]);
        out.extend_from_slice(replacement.as_bytes());
        last = end;
        paths.push(path);
    }
    out.extend_from_slice(&raw[last..]);
    Some((out, paths))
}

/// One step of a JSON path: an object key or an array index.
enum Seg<'a> {
    /// An object member, decoded (escapes resolved).
    Key(Cow<'a, str>),
    /// An array element, 0-based.
    Index(usize),
}

/// A minimal JSON walker over bytes that serde_json has already accepted. It
/// finds the byte spans of sensitive values so they can be replaced without
/// re-serializing (which would reorder keys and respell numbers). It never
/// panics or loops on any input: every step consumes a byte or stops.
struct Scanner<'a> {
    /// The document.
    b: &'a [u8],
    /// Current byte offset.
    pos: usize,
    /// Path from the root to the current value.
    path: Vec<Seg<'a>>,
    /// Spans `(start, end)` to replace, in document order, with their paths.
    hits: Vec<(usize, usize, String)>,
}

impl<'a> Scanner<'a> {
    /// Skips JSON whitespace.
    fn ws(&mut self) {
        while matches!(self.b.get(self.pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// Walks one value, recording sensitive members inside it.
    fn value(&mut self) {
        self.ws();
        match self.b.get(self.pos) {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => {
                self.string();
            }
            Some(_) => self.scalar(),
            None => {}
        }
    }

    /// Skips one value without looking inside it (the value is being redacted whole).
    fn skip_value(&mut self) {
        self.ws();
        match self.b.get(self.pos) {
            Some(b'"') => {
                self.string();
            }
            Some(b'{' | b'[') => {
                let mut depth = 0usize;
                while let Some(&c) = self.b.get(self.pos) {
                    match c {
                        b'"' => {
                            self.string();
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth = depth.saturating_sub(1);
                            if depth == 0 {
                                self.pos += 1;
                                return;
                            }
                        }
                        _ => {}
                    }
                    self.pos += 1;
                }
            }
            Some(_) => self.scalar(),
            None => {}
        }
    }

    /// Skips a string starting at the opening quote; returns its span, quotes included.
    fn string(&mut self) -> (usize, usize) {
        let start = self.pos;
        self.pos += 1;
        while let Some(&c) = self.b.get(self.pos) {
            match c {
                b'\\' => self.pos += 2,
                b'"' => {
                    self.pos += 1;
                    return (start, self.pos);
                }
                _ => self.pos += 1,
            }
        }
        self.pos = self.b.len();
        (start, self.pos)
    }

    /// Skips a number, `true`, `false` or `null`.
    fn scalar(&mut self) {
        while let Some(&c) = self.b.get(self.pos) {
            if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                break;
            }
            self.pos += 1;
        }
    }

    /// Walks an object, redacting sensitive members and descending into the others.
    fn object(&mut self) {
        self.pos += 1; // `{`
        loop {
            self.ws();
            match self.b.get(self.pos) {
                Some(b'}') => {
                    self.pos += 1;
                    return;
                }
                Some(b',') => {
                    self.pos += 1;
                    continue;
                }
                Some(b'"') => {}
                _ => return,
            }
            let (ks, ke) = self.string();
            let key = decode_key(self.b, ks, ke);
            self.ws();
            if self.b.get(self.pos) == Some(&b':') {
                self.pos += 1;
            }
            self.ws();
            if is_sensitive_key(&key) {
                let start = self.pos;
                self.skip_value();
                let end = self.pos.min(self.b.len());
                if !holds_no_secret(&self.b[start..end]) {
                    self.path.push(Seg::Key(key));
                    let path = render_path(&self.path);
                    self.path.pop();
                    self.hits.push((start, end, path));
                }
            } else {
                self.path.push(Seg::Key(key));
                let before = self.pos;
                self.value();
                self.path.pop();
                if self.pos == before {
                    return;
                }
            }
        }
    }

    /// Walks an array, descending into each element.
    fn array(&mut self) {
        self.pos += 1; // `[`
        let mut index = 0;
        loop {
            self.ws();
            match self.b.get(self.pos) {
                Some(b']') => {
                    self.pos += 1;
                    return;
                }
                Some(b',') => {
                    self.pos += 1;
                    index += 1;
                    continue;
                }
                None => return,
                _ => {}
            }
            self.path.push(Seg::Index(index));
            let before = self.pos;
            self.value();
            self.path.pop();
            if self.pos == before {
                return;
            }
        }
    }
}

/// Decodes an object key from its quoted bytes, borrowing when it has no escapes.
fn decode_key(b: &[u8], start: usize, end: usize) -> Cow<'_, str> {
    let quoted = &b[start..end.min(b.len())];
    let inner = quoted.get(1..quoted.len().saturating_sub(1)).unwrap_or_default();
    if !inner.contains(&b'\\') {
        if let Ok(s) = std::str::from_utf8(inner) {
            return Cow::Borrowed(s);
        }
    }
    serde_json::from_slice::<String>(quoted).map(Cow::Owned).unwrap_or(Cow::Borrowed(""))
}

/// Whether a sensitive key's raw value carries nothing worth hiding (`null`,
/// `""`, or an earlier redaction), so the body can stay byte-identical.
fn holds_no_secret(raw_value: &[u8]) -> bool {
    raw_value == b"null" || raw_value == b"\"\"" || raw_value == b"\"[REDACTED]\""
}

/// Renders a path like `payload.items[0]["card-number"]`: identifier-like keys
/// dotted, other keys bracketed as JSON strings, indices bracketed.
fn render_path(path: &[Seg<'_>]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
            Seg::Key(k) => {
                let plain = k.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if plain {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                } else {
                    out.push('[');
                    out.push_str(&serde_json::to_string(k.as_ref()).unwrap_or_default());
                    out.push(']');
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::normalize;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    /// The sensitive-key test matches exact names after normalization only.
    #[test]
    fn sensitive_key_names() {
        for k in [
            "password",
            "PASSWORD",
            "pass_word",
            "client_secret",
            "Client-Secret",
            "api_key",
            "apiKey",
            "API-KEY",
            "Authorization",
            "access_token",
            "refreshToken",
            "private_key",
            "credit_card",
            "cardNumber",
            "CVV",
            "ssn",
            "token",
            "secret",
            "passwd",
        ] {
            assert!(is_sensitive_key(k), "{k}");
        }
        for k in [
            "idempotencyKey",
            "tokenCount",
            "secretName",
            "passwordHint",
            "key",
            "x-api-key",
            "X_API_KEY_",
            "authorizationUrl",
            "tokens",
            "",
            "ssn2",
            "résumé",
        ] {
            assert!(!is_sensitive_key(k), "{k}");
        }
    }

    /// Redaction replaces only the sensitive values, keeps every other byte, and lists the paths.
    #[test]
    fn redaction() {
        let body = br#"{
  "type": "user.created",
  "idempotencyKey": "k",
  "data": {
    "name": "Ann",
    "password": "hunter2",
    "Api-Key": {"v": "abc", "token": "t"},
    "cards": [{"card_number": 4111111111111111, "cvv": "123"}, {"note": null}],
    "weird.key": {"SSN": "078-05-1120"},
    "token": null,
    "secret": "",
    "tokenCount": 3
  }
}"#;
        let n = normalize(body, None).unwrap();
        assert_eq!(
            n.redacted,
            vec![
                "data.password",
                "data[\"Api-Key\"]",
                "data.cards[0].card_number",
                "data.cards[0].cvv",
                "data[\"weird.key\"].SSN",
            ]
        );
        let expected = String::from_utf8(body.to_vec())
            .unwrap()
            .replace("\"hunter2\"", "\"[REDACTED]\"")
            .replace("{\"v\": \"abc\", \"token\": \"t\"}", "\"[REDACTED]\"")
            .replace("4111111111111111", "\"[REDACTED]\"")
            .replace("\"123\"", "\"[REDACTED]\"")
            .replace("\"078-05-1120\"", "\"[REDACTED]\"");
        assert_eq!(String::from_utf8(n.body.clone()).unwrap(), expected);
        let v: Value = serde_json::from_slice(&n.body).unwrap();
        assert_eq!(v["data"]["password"], REDACTED);
        assert_eq!(v["data"]["tokenCount"], 3);
        assert_eq!(v["idempotencyKey"], "k");
        // Redacting an already-redacted body changes nothing.
        let again = normalize(&n.body, None).unwrap();
        assert_eq!(again.body, n.body);
        assert!(again.redacted.is_empty());
    }

    /// Escaped keys are decoded before matching; duplicate keys are all redacted.
    #[test]
    fn redaction_escapes_and_duplicates() {
        let body = br#"{"type":"a","data":{"pass\u0077ord":"x","token":"first","token":"second"}}"#;
        let n = normalize(body, None).unwrap();
        assert_eq!(n.redacted, vec!["data.password", "data.token", "data.token"]);
        let text = String::from_utf8(n.body).unwrap();
        assert!(!text.contains("\"x\"") && !text.contains("first") && !text.contains("second"), "{text}");
        let (out, paths) = redact_sensitive(br#"[{"token":"t"}]"#).unwrap();
        assert_eq!((out.as_ref(), paths), (br#"[{"token":"[REDACTED]"}]"#.as_slice(), vec!["[0].token".to_string()]));
        let (out, paths) = redact_sensitive(br#"{"a":1}"#).unwrap();
        assert!(matches!(out, Cow::Borrowed(_)) && paths.is_empty());
        assert_eq!(redact_sensitive(b"{").unwrap_err().code(), "malformed_json");
    }

    /// Reference redaction on a parsed value, to check the byte scanner against.
    fn redact_value(v: &mut Value) {
        match v {
            Value::Object(m) => {
                for (k, v) in m.iter_mut() {
                    let harmless = v.is_null() || v.as_str().is_some_and(|s| s.is_empty() || s == REDACTED);
                    if is_sensitive_key(k) {
                        if !harmless {
                            *v = Value::String(REDACTED.into());
                        }
                    } else {
                        redact_value(v);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(redact_value),
            _ => {}
        }
    }

    /// Arbitrary JSON values, with sensitive keys among the candidates.
    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            (-1e9f64..1e9).prop_map(|f| json!(f)),
            "[a-z \\\\\"\u{e9}\u{1F600}]{0,8}".prop_map(Value::String),
        ];
        let key = prop_oneof![
            Just("password".to_string()),
            Just("api_key".to_string()),
            Just("Token".to_string()),
            Just("idempotencyKey".to_string()),
            "[a-zA-Z_. \"\\\\-]{0,6}",
        ];
        leaf.prop_recursive(5, 64, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::vec((key.clone(), inner), 0..5)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            // No regression files: this crate is shared and the cases are cheap.
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Byte redaction agrees with redaction on the parsed value, in compact
        /// and pretty layouts, and leaves bodies without secrets untouched.
        #[test]
        fn redaction_matches_reference(v in arb_json(), pretty in any::<bool>()) {
            let raw = if pretty { serde_json::to_vec_pretty(&v).unwrap() } else { serde_json::to_vec(&v).unwrap() };
            let (out, paths) = redact_sensitive(&raw).unwrap();
            // Compare with the parsed text, not `v`: float parsing may round.
            let v: Value = serde_json::from_slice(&raw).unwrap();
            let mut expected = v.clone();
            redact_value(&mut expected);
            let got: Value = serde_json::from_slice(&out).unwrap();
            prop_assert_eq!(&got, &expected);
            prop_assert_eq!(paths.is_empty(), expected == v);
            if paths.is_empty() {
                prop_assert_eq!(out.as_ref(), raw.as_slice());
            }
        }
    }
}
