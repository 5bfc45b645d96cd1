//! SigV4 for the ops commands against a deployment (service `execute-api`)
//! and for queue and bus deliveries (`sqs`, `events`,
//! [`crate::transport`]): the URL encoding a signature depends on, and the
//! signing itself.
//!
//! AWS checks a signature against the canonical request it derives from the
//! URL it receives ("Create a canonical request for Signature Version 4"):
//! each query name and value percent-decoded, then encoded again with the
//! RFC 3986 unreserved characters (`A-Za-z0-9-_.~`) left as they are and
//! every other byte as `%XX` (uppercase hex: a space is `%20`, and a `+` is
//! a plus, `%2B`), the pairs sorted by encoded name, then encoded value;
//! each path segment encoded twice (every service but S3). A URL whose query
//! is form-encoded (`+` for a space, as `url`'s `query_pairs_mut` writes it)
//! is read with a plus where the signer saw a space: SignatureDoesNotMatch.
//!
//! So [`request_url`] builds URLs in exactly that encoding, for both
//! backends: the query sent is, byte for byte, the canonical query string
//! the signature covers, and the path holds nothing AWS could read two ways.

use std::time::SystemTime;

use reqwest::Url;

use crate::credentials::Credentials;

/// The service name API Gateway's IAM authorization signs for.
pub const SERVICE: &str = "execute-api";

/// `s` percent-encoded as SigV4's `UriEncode`: the RFC 3986 unreserved
/// characters as they are, every other byte of its UTF-8 as `%XX`
/// (uppercase), a space as `%20` and never `+`.
pub fn encode(s: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.extend(['%', HEX[usize::from(b >> 4)] as char, HEX[usize::from(b & 15)] as char]);
        }
    }
    out
}

/// The canonical query string of `pairs`: each name and value [`encode`]d,
/// sorted by encoded name, then encoded value, as `name=value` joined by
/// `&`. Sent as the URL's query too, so that what is signed is what is sent.
pub fn canonical_query(pairs: &[(&str, &str)]) -> String {
    let mut encoded: Vec<(String, String)> = pairs.iter().map(|(k, v)| (encode(k), encode(v))).collect();
    encoded.sort();
    encoded.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&")
}

/// A path segment that no URL can carry as given.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` cannot be sent as a path segment: URLs read it as a step in the path (`.` here, `..` up)")]
pub struct DotSegment(pub String);

/// `base` with `segments` appended to its path (each [`encode`]d, so an id
/// holding `/` stays one segment) and `query` as its [`canonical_query`]
/// (none when empty). A segment `.` or `..` is refused: the URL would
/// resolve it (percent-encoded too) instead of sending it.
pub fn request_url(base: &Url, segments: &[&str], query: &[(&str, &str)]) -> Result<Url, DotSegment> {
    let mut url = base.clone();
    let mut path = url.path().trim_end_matches('/').to_string();
    for segment in segments {
        if matches!(*segment, "." | "..") {
            return Err(DotSegment(segment.to_string()));
        }
        path.push('/');
        path.push_str(&encode(segment));
    }
    if !segments.is_empty() {
        url.set_path(&path);
    }
    url.set_query(None);
    if !query.is_empty() {
        url.set_query(Some(&canonical_query(query)));
    }
    Ok(url)
}

/// Why a request could not be signed (never holding a key).
#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    /// The region, service or time was refused by the signer.
    #[error("SigV4 signing parameters: {0}")]
    Params(#[from] aws_sigv4::sign::v4::signing_params::BuildError),
    /// The request (method, URL, headers) could not be signed.
    #[error("SigV4 signing: {0}")]
    Request(#[from] aws_sigv4::http_request::SigningError),
}

/// Where and when a request is signed for: the credential scope's region and
/// service, and the signing time (`x-amz-date`).
#[derive(Clone, Copy, Debug)]
pub struct Scope<'a> {
    /// The AWS region of the API.
    pub region: &'a str,
    /// The service signed for ([`SERVICE`] for the deployed API).
    pub service: &'a str,
    /// The signing time.
    pub time: SystemTime,
}

/// The headers that sign one request (`authorization`, `x-amz-date`,
/// `x-amz-security-token` for temporary credentials): over the method, the
/// URL exactly as it will be sent, the given `headers` (sent as well) and
/// the body.
pub fn sign(
    method: &str,
    url: &Url,
    headers: &[(&str, &str)],
    body: &[u8],
    keys: &Credentials,
    scope: &Scope<'_>,
) -> Result<Vec<(String, String)>, SigningError> {
    use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
    let identity: aws_smithy_runtime_api::client::identity::Identity = aws_credential_types::Credentials::new(
        keys.access_key_id.clone(),
        keys.secret_access_key.clone(),
        keys.session_token.clone(),
        None,
        "hookline",
    )
    .into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(scope.region)
        .name(scope.service)
        .time(scope.time)
        .settings(SigningSettings::default())
        .build()?
        .into();
    let signable = SignableRequest::new(method, url.as_str(), headers.iter().copied(), SignableBody::Bytes(body))?;
    let (instructions, _) = sign(signable, &params)?.into_parts();
    Ok(instructions.headers().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, UNIX_EPOCH};

    use hmac::{Hmac, KeyInit, Mac};
    use sha2::{Digest, Sha256};

    use super::*;

    /// A SigV4 implementation of its own, written from AWS's description of
    /// the canonical request, to check the signer against: it reads the URL
    /// as AWS reads the one it receives (the query split, percent-decoded
    /// with `+` a plus, encoded again and sorted; each path segment encoded
    /// once more) and signs the given headers plus `host` and `x-amz-date`.
    mod reference {
        use super::*;

        fn hex(bytes: &[u8]) -> String {
            bytes.iter().map(|b| format!("{b:02x}")).collect()
        }

        fn hmac(key: &[u8], msg: &str) -> Vec<u8> {
            let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
            mac.update(msg.as_bytes());
            mac.finalize().into_bytes().to_vec()
        }

        /// Percent-decoding as a server does it: `%XX` is a byte, and
        /// everything else (a `+` too) is itself.
        fn decode(s: &str) -> String {
            let (bytes, mut out, mut i) = (s.as_bytes(), Vec::new(), 0);
            while i < bytes.len() {
                match (bytes[i], s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())) {
                    (b'%', Some(b)) => {
                        out.push(b);
                        i += 3;
                    }
                    (b, _) => {
                        out.push(b);
                        i += 1;
                    }
                }
            }
            String::from_utf8(out).expect("UTF-8")
        }

        fn uri_encode(s: &str) -> String {
            s.bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
                    _ => format!("%{b:02X}"),
                })
                .collect()
        }

        /// The canonical query string AWS derives from a received raw query.
        pub fn canonical_query(raw: &str) -> String {
            let mut pairs: Vec<(String, String)> = raw
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (uri_encode(&decode(k)), uri_encode(&decode(v)))
                })
                .collect();
            pairs.sort();
            pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&")
        }

        /// The signature (hex) of a request to `url` as received.
        #[allow(clippy::too_many_arguments)]
        pub fn signature(
            method: &str,
            url: &Url,
            headers: &[(&str, &str)],
            body: &[u8],
            keys: &Credentials,
            region: &str,
            service: &str,
            amz_date: &str,
        ) -> String {
            let path: Vec<String> = url.path().split('/').map(uri_encode).collect();
            let host = match url.port() {
                Some(p) => format!("{}:{p}", url.host_str().unwrap()),
                None => url.host_str().unwrap().to_string(),
            };
            let mut all: Vec<(String, String)> =
                headers.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.trim().to_string())).collect();
            all.push(("host".into(), host));
            all.push(("x-amz-date".into(), amz_date.into()));
            if let Some(token) = &keys.session_token {
                all.push(("x-amz-security-token".into(), token.clone()));
            }
            all.sort();
            let canonical_headers: String = all.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
            let signed_headers = all.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(";");
            let canonical_request = [
                method.to_string(),
                path.join("/"),
                canonical_query(url.query().unwrap_or("")),
                canonical_headers,
                signed_headers,
                hex(&Sha256::digest(body)),
            ]
            .join("\n");
            let date = &amz_date[..8];
            let scope = format!("{date}/{region}/{service}/aws4_request");
            let string_to_sign = format!(
                "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
                hex(&Sha256::digest(canonical_request.as_bytes()))
            );
            let mut key = hmac(format!("AWS4{}", keys.secret_access_key).as_bytes(), date);
            for part in [region, service, "aws4_request"] {
                key = hmac(&key, part);
            }
            hex(&hmac(&key, &string_to_sign))
        }
    }

    /// The credentials, time and scope of AWS's SigV4 test suite.
    fn suite_keys(token: Option<&str>) -> Credentials {
        Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: token.map(str::to_string),
            expiration: None,
        }
    }
    const SUITE_TIME: u64 = 1_440_938_160; // 2015-08-30T12:36:00Z
    const SUITE_DATE: &str = "20150830T123600Z";

    fn signature_of(headers: &[(String, String)]) -> String {
        let auth = &headers.iter().find(|(k, _)| k == "authorization").expect("an authorization header").1;
        auth.rsplit_once("Signature=").expect("a signature").1.to_string()
    }

    /// The canonical requests the signer logs (at trace level) while `f` runs.
    fn canonical_requests_of<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
        use tracing_subscriber::layer::SubscriberExt;
        struct Capture(Arc<Mutex<Vec<String>>>);
        struct Visit<'a>(&'a Mutex<Vec<String>>);
        impl tracing::field::Visit for Visit<'_> {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "canonical_request" {
                    self.0.lock().unwrap().push(format!("{value:?}"));
                }
            }
        }
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
            fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
                event.record(&mut Visit(&self.0));
            }
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry().with(Capture(seen.clone()));
        let out = tracing::subscriber::with_default(subscriber, f);
        let seen = seen.lock().unwrap().clone();
        (out, seen)
    }

    #[test]
    fn encode_keeps_only_unreserved_characters() {
        assert_eq!(encode("AZaz09-_.~"), "AZaz09-_.~");
        assert_eq!(encode("a b+c/d=e&f?g%h*i'j"), "a%20b%2Bc%2Fd%3De%26f%3Fg%25h%2Ai%27j");
        assert_eq!(encode("ü✓"), "%C3%BC%E2%9C%93");
        assert_eq!(canonical_query(&[("b", "2"), ("a", "z"), ("a b", "1"), ("a", "y")]), "a=y&a=z&a%20b=1&b=2");
    }

    #[test]
    fn urls_encode_segments_and_the_query_as_sigv4_does() {
        let base = Url::parse("http://h:1/prod/").unwrap();
        let u = request_url(&base, &["v1", "events", "a/b c+"], &[("tenant_id", "t 1&x"), ("limit", "5")]).unwrap();
        assert_eq!(u.as_str(), "http://h:1/prod/v1/events/a%2Fb%20c%2B?limit=5&tenant_id=t%201%26x");
        let bare = Url::parse("http://h:1").unwrap();
        assert_eq!(request_url(&bare, &["v1"], &[]).unwrap().as_str(), "http://h:1/v1");
        assert_eq!(request_url(&bare, &["v1", ".."], &[]), Err(DotSegment("..".into())));
    }

    /// AWS's published test vectors (aws-sig-v4-test-suite: their requests,
    /// credentials, time and signatures), signed through [`request_url`] and
    /// [`sign`], and by the reference implementation.
    #[test]
    fn sigv4_matches_the_aws_test_suite() {
        let unreserved = "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        /// One test of the suite: its name, the request's query, the
        /// session token if any, and the signature AWS published.
        struct Vector<'a> {
            name: &'a str,
            query: &'a [(&'a str, &'a str)],
            token: Option<&'a str>,
            signature: &'a str,
        }
        let cases = [
            Vector {
                name: "get-vanilla-query-unreserved",
                query: &[(unreserved, unreserved)],
                token: None,
                signature: "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197",
            },
            Vector {
                name: "get-vanilla-utf8-query",
                query: &[("\u{1234}", "bar")],
                token: None,
                signature: "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04",
            },
            Vector {
                name: "get-vanilla-query-order-encoded",
                query: &[("Param-3", "Value3"), ("Param", "Value2"), ("\u{1234}", "Value1")],
                token: None,
                signature: "371d3713e185cc334048618a97f809c9ffe339c62934c032af5a0e595648fcac",
            },
            Vector {
                name: "get-vanilla-query-order-key-case",
                query: &[("Param2", "value2"), ("Param1", "value1")],
                token: None,
                signature: "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
            },
            Vector {
                name: "get-vanilla-with-session-token",
                query: &[],
                token: Some("6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"),
                signature: "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8",
            },
        ];
        let base = Url::parse("https://example.amazonaws.com/").unwrap();
        let scope =
            Scope { region: "us-east-1", service: "service", time: UNIX_EPOCH + Duration::from_secs(SUITE_TIME) };
        for Vector { name, query, token, signature: expected } in cases {
            let keys = suite_keys(token);
            let url = request_url(&base, &[], query).unwrap();
            let signed = sign("GET", &url, &[], b"", &keys, &scope).unwrap();
            assert_eq!(signature_of(&signed), expected, "{name}: the signer, on {url}");
            let reference = reference::signature("GET", &url, &[], b"", &keys, "us-east-1", "service", SUITE_DATE);
            assert_eq!(reference, expected, "{name}: the reference implementation, on {url}");
        }
    }

    /// A value with a space, `+`, `/`, `=`, `&` and non-ASCII: the query of
    /// the URL sent is the canonical query the signer signed (`%20`, no
    /// `+`), and the signature is the one an independent implementation
    /// computes from that URL as AWS receives it.
    #[test]
    fn sigv4_signs_the_query_exactly_as_it_is_sent() {
        let value = "order created+paid/eu=1&x ü✓";
        let base = Url::parse("https://abc123.execute-api.eu-west-1.amazonaws.com/prod").unwrap();
        let url = request_url(
            &base,
            &["v1", "events", "ord 1/+"],
            &[("tenant_id", "acme"), ("event_type", value), ("cursor", "a+b="), ("limit", "10")],
        )
        .unwrap();
        let keys = Credentials {
            access_key_id: "AKIDTEST".into(),
            secret_access_key: "secret/with+chars".into(),
            session_token: Some("token".into()),
            expiration: None,
        };
        let scope = Scope { region: "eu-west-1", service: SERVICE, time: UNIX_EPOCH + Duration::from_secs(SUITE_TIME) };
        let headers = [("content-type", "application/json")];
        let (signed, canonical) = canonical_requests_of(|| sign("GET", &url, &headers, b"", &keys, &scope).unwrap());

        let sent = url.query().expect("a query");
        assert_eq!(
            sent,
            "cursor=a%2Bb%3D&event_type=order%20created%2Bpaid%2Feu%3D1%26x%20%C3%BC%E2%9C%93&limit=10&tenant_id=acme"
        );
        assert!(sent.contains("%20") && !sent.contains('+'), "{sent}");
        let canonical = canonical.first().expect("the signer logged its canonical request");
        let lines: Vec<&str> = canonical.lines().collect();
        assert_eq!(lines[1], "/prod/v1/events/ord%25201%252F%252B", "the path, encoded once more");
        assert_eq!(lines[2], sent, "the canonical query string is the query sent");
        assert_eq!(reference::canonical_query(sent), sent, "the query sent is already canonical");

        let expected = reference::signature("GET", &url, &headers, b"", &keys, "eu-west-1", SERVICE, SUITE_DATE);
        assert_eq!(signature_of(&signed), expected);
        let header = |name: &str| signed.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        assert_eq!(header("x-amz-date"), Some(SUITE_DATE));
        assert_eq!(header("x-amz-security-token"), Some("token"));
    }
}
