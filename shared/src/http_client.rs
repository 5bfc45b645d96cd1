//! The one HTTP client Hookline uses to call subscribers, for deliveries and
//! for the verification handshake.
//!
//! It is built once per process (or Lambda container) and shared, so
//! connections to each subscriber stay alive and are reused. Every connection
//! goes through the SSRF policy: IP-literal URLs are checked by
//! [`check_callback_url`] before sending, and names are resolved by a
//! [`GuardedResolver`] that only hands out addresses it has checked, so the
//! address that was checked is the one connected to. Redirects are never
//! followed (a `3xx` is reported as a status), proxies from the environment
//! are ignored (a proxy would resolve the name itself, past the policy), and
//! only the first `max_body_bytes` of a response are read.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use reqwest::redirect;

use crate::ssrf::{check_callback_url, AddressPolicy, CallbackUrlError, ForbiddenResolution, GuardedResolver};

/// Idle connections kept per subscriber host; deliveries to one busy host run
/// concurrently, and each concurrent request needs its own HTTP/1.1 connection.
const POOL_MAX_IDLE_PER_HOST: usize = 64;

/// How long an idle pooled connection is kept before it is closed.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Headers that describe the connection or the framing of the body. The
/// client sets them itself; letting a subscription's custom headers override
/// them could desynchronise a pooled keep-alive connection.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-connection",
];

/// Settings of the [`HttpClient`]; the defaults follow the Standard Webhooks
/// recommendations (15 s per request, no redirects).
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Time allowed to open a TCP connection (and resolve the name). Default 5 s.
    pub connect_timeout: Duration,
    /// Time allowed for the whole request: connect, send, status and body.
    /// Default 15 s.
    pub total_timeout: Duration,
    /// Which addresses may be called; [`AddressPolicy::AllowLoopback`] is the
    /// local `--dev` mode. Default [`AddressPolicy::PublicOnly`].
    pub policy: AddressPolicy,
    /// How much of a response body is read and kept (bytes). Default 4096.
    pub max_body_bytes: usize,
    /// The `User-Agent` sent with every request. Default `Hookline/<version>`.
    pub user_agent: String,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            connect_timeout: Duration::from_secs(5),
            total_timeout: Duration::from_secs(15),
            policy: AddressPolicy::PublicOnly,
            max_body_bytes: 4096,
            user_agent: format!("Hookline/{}", env!("CARGO_PKG_VERSION")),
        }
    }
}

/// What one POST produced; never an Err: every failure is described here so
/// the caller can record it.
///
/// Exactly one of `status` and `error` is set: `status` when the subscriber
/// answered with an HTTP status (whatever happened to the body afterwards),
/// `error` when no status was received.
#[derive(Debug, Clone)]
pub struct PostResult {
    /// The HTTP status, if the subscriber answered.
    pub status: Option<u16>,
    /// The start of the response body: at most `max_body_bytes` bytes,
    /// decoded as lossy UTF-8 and cut at a character boundary. Empty when there
    /// was no response.
    pub body: String,
    /// The response's `Retry-After` (delta-seconds or HTTP-date; a date in the
    /// past is zero), for the retry schedule.
    pub retry_after: Option<Duration>,
    /// Why no status was received.
    pub error: Option<PostError>,
    /// Time from the start of the call until the body was read or the request
    /// failed.
    pub latency: Duration,
}

impl PostResult {
    /// Whether the subscriber accepted the webhook (status 200..=299), the
    /// Standard Webhooks definition of a successful delivery.
    pub fn is_success(&self) -> bool {
        self.error.is_none() && matches!(self.status, Some(200..=299))
    }

    /// A result without a status: the request failed (or was never sent)
    /// for `error`, after `latency`.
    pub fn failed(error: PostError, latency: Duration) -> PostResult {
        PostResult { status: None, body: String::new(), retry_after: None, error: Some(error), latency }
    }
}

/// Why a POST got no HTTP status. Messages never include header values
/// (signatures, subscriber credentials) or the request URL's query.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    /// The connect or total timeout expired before a status arrived.
    #[error("timed out")]
    Timeout,
    /// The TCP or TLS connection could not be established (refused, reset,
    /// DNS failure, certificate error, ...).
    #[error("connection failed: {0}")]
    Connect(String),
    /// The address policy refused the callback's address; the request was not
    /// sent. E.g. `127.0.0.1: loopback address` or
    /// `example.com resolves to 10.0.0.1: private address`.
    #[error("forbidden address: {0}")]
    ForbiddenAddress(String),
    /// The callback URL is unusable (unparseable, not https, credentials).
    #[error("invalid URL: {0}")]
    InvalidUrl(String),
    /// A fault on Hookline's side, not the subscriber's: no file
    /// descriptor or local port for the connection, memory or buffers
    /// exhausted, or a header Hookline itself cannot encode. The request
    /// was not (fully) made, so it must not count as the subscriber's attempt.
    #[error("local fault: {0}")]
    Local(String),
    /// Anything else: protocol errors, ...
    #[error("request failed: {0}")]
    Other(String),
    /// The destination can never take this message (too large for a
    /// queue or bus, an attribute it does not allow): the request was not
    /// sent, or was refused for the message itself; retrying cannot help.
    #[error("refused by the destination's limits: {0}")]
    Refused(String),
}

/// OS errors that mean this host ran out of something, not that the
/// subscriber failed: EMFILE, ENFILE, ENOMEM, ENOBUFS, EADDRNOTAVAIL (Linux
/// numbers; Lambda and `hookline serve` run on Linux).
const LOCAL_OS_ERRORS: [i32; 5] = [24, 23, 12, 105, 99];

/// The shared, pooled HTTP client for calls to subscribers. Cheap to clone
/// (clones share the connection pool).
#[derive(Clone)]
pub struct HttpClient {
    inner: reqwest::Client,
    cfg: Arc<ClientConfig>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient").field("cfg", &self.cfg).finish_non_exhaustive()
    }
}

impl HttpClient {
    /// Builds the client. No network access happens here, so it is safe at
    /// Lambda init.
    ///
    /// # Panics
    /// If the TLS backend cannot be initialised, which does not happen with
    /// the bundled rustls and webpki roots; use [`HttpClient::try_new`] to
    /// handle it anyway.
    pub fn new(cfg: ClientConfig) -> Self {
        Self::try_new(cfg).expect("building the HTTP client failed")
    }

    /// Builds the client, returning reqwest's error if it cannot be built.
    pub fn try_new(cfg: ClientConfig) -> Result<Self, reqwest::Error> {
        let inner = reqwest::Client::builder()
            .use_rustls_tls()
            .redirect(redirect::Policy::none())
            .connect_timeout(cfg.connect_timeout)
            .timeout(cfg.total_timeout)
            .pool_max_idle_per_host(POOL_MAX_IDLE_PER_HOST)
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .tcp_nodelay(true)
            .tcp_keepalive(Duration::from_secs(60))
            .user_agent(cfg.user_agent.clone())
            .referer(false)
            .no_proxy()
            .https_only(cfg.policy == AddressPolicy::PublicOnly)
            .dns_resolver(Arc::new(GuardedResolver::new(cfg.policy)))
            .build()?;
        Ok(HttpClient { inner, cfg: Arc::new(cfg) })
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &ClientConfig {
        &self.cfg
    }

    /// POSTs `body` to `url` with `headers` (the caller sets `content-type`
    /// and the `webhook-*` headers) and describes the outcome.
    ///
    /// The URL is checked with [`check_callback_url`] first (IP-literal hosts
    /// never reach the resolver), so a forbidden address is refused without
    /// connecting. Redirects are not followed. Header names that control the
    /// connection (`host`, `content-length`, `transfer-encoding`, ...) are
    /// refused.
    pub async fn post(&self, url: &str, headers: &[(&str, String)], body: impl Into<reqwest::Body>) -> PostResult {
        let start = tokio::time::Instant::now();
        let deadline = start + self.cfg.total_timeout;
        let url = match check_callback_url(url, self.cfg.policy) {
            Ok(url) => url,
            Err(e) => return PostResult::failed(url_error(e), start.elapsed()),
        };
        let header_map = match build_headers(headers) {
            Ok(h) => h,
            Err(e) => return PostResult::failed(e, start.elapsed()),
        };
        let send = self.inner.post(url).headers(header_map).body(body).send();
        let mut response = match tokio::time::timeout_at(deadline, send).await {
            Err(_) => return PostResult::failed(PostError::Timeout, start.elapsed()),
            Ok(Err(e)) => return PostResult::failed(request_error(e), start.elapsed()),
            Ok(Ok(r)) => r,
        };
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, chrono::Utc::now()));
        let body = read_body(&mut response, self.cfg.max_body_bytes, deadline).await;
        PostResult { status: Some(status), body, retry_after, error: None, latency: start.elapsed() }
    }
}

fn url_error(e: CallbackUrlError) -> PostError {
    match e {
        CallbackUrlError::ForbiddenAddress { host, reason } => PostError::ForbiddenAddress(format!("{host}: {reason}")),
        CallbackUrlError::Invalid(why) => PostError::InvalidUrl(why),
        other => PostError::InvalidUrl(other.to_string()),
    }
}

fn build_headers(headers: &[(&str, String)]) -> Result<HeaderMap, PostError> {
    let mut map = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| PostError::Local(format!("invalid header name {:?}", name.escape_debug().to_string())))?;
        if RESERVED_HEADERS.contains(&name.as_str()) {
            return Err(PostError::Local(format!("header {name} is managed by the HTTP client and cannot be set")));
        }
        // The value is never part of the message: it may be a signature or a
        // subscriber's credential.
        let value =
            HeaderValue::from_str(value).map_err(|_| PostError::Local(format!("invalid value for header {name}")))?;
        map.append(name, value);
    }
    Ok(map)
}

/// Maps a reqwest error to a [`PostError`] without the request URL.
fn request_error(e: reqwest::Error) -> PostError {
    if let Some(forbidden) = find_source::<ForbiddenResolution>(&e) {
        return PostError::ForbiddenAddress(forbidden.to_string());
    }
    if e.is_timeout() {
        return PostError::Timeout;
    }
    if let Some(io) =
        find_source::<std::io::Error>(&e).filter(|io| io.raw_os_error().is_some_and(|c| LOCAL_OS_ERRORS.contains(&c)))
    {
        return PostError::Local(io.to_string());
    }
    let is_connect = e.is_connect();
    let is_builder = e.is_builder();
    let msg = describe(&e.without_url());
    if is_connect {
        PostError::Connect(msg)
    } else if is_builder {
        PostError::InvalidUrl(msg)
    } else {
        PostError::Other(msg)
    }
}

fn find_source<'a, T: StdError + 'static>(e: &'a (dyn StdError + 'static)) -> Option<&'a T> {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(found) = err.downcast_ref::<T>() {
            return Some(found);
        }
        cur = err.source();
    }
    None
}

/// The error and its sources joined with `: `, skipping repeats and
/// reqwest's generic wrappers ("error sending request", "client error
/// (Connect)") so the message starts at the useful part, e.g. `tcp connect
/// error: Connection refused (os error 111)`.
fn describe(e: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = Some(e);
    while let Some(err) = cur {
        let part = err.to_string();
        if !parts.iter().any(|p| p.contains(&part)) {
            parts.push(part);
        }
        cur = err.source();
    }
    let useful: Vec<&str> = parts
        .iter()
        .map(String::as_str)
        .filter(|p| *p != "error sending request" && !p.starts_with("client error ("))
        .collect();
    if useful.is_empty() {
        parts.join(": ")
    } else {
        useful.join(": ")
    }
}

/// Reads at most `max` bytes of the body, stopping early (and dropping the
/// connection) rather than downloading a large response. A read error or the
/// deadline ends the body where it is: the status has already arrived.
async fn read_body(response: &mut reqwest::Response, max: usize, deadline: tokio::time::Instant) -> String {
    let mut buf: Vec<u8> = Vec::new();
    while buf.len() < max {
        match tokio::time::timeout_at(deadline, response.chunk()).await {
            Ok(Ok(Some(chunk))) => {
                let take = chunk.len().min(max - buf.len());
                buf.extend_from_slice(&chunk[..take]);
            }
            Ok(Ok(None)) => break,
            Ok(Err(e)) => {
                tracing::debug!(error = %describe(&e.without_url()), "response body read failed");
                break;
            }
            Err(_) => {
                tracing::debug!("response body read timed out");
                break;
            }
        }
    }
    let mut body = String::from_utf8_lossy(&buf).into_owned();
    if body.len() > max {
        // Replacement characters can make the text longer than the bytes.
        let mut cut = max;
        while !body.is_char_boundary(cut) {
            cut -= 1;
        }
        body.truncate(cut);
    }
    body
}

/// Parses a `Retry-After` value: delta-seconds, or an HTTP-date (IMF-fixdate,
/// as RFC 2822 parses it) relative to `now`; a past date gives zero.
/// Unparseable values give `None`.
pub fn parse_retry_after(value: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Absurdly long numbers saturate instead of failing.
        return Some(Duration::from_secs(value.parse::<u64>().unwrap_or(u64::MAX)));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let delta = date.with_timezone(&chrono::Utc) - now;
    Some(delta.to_std().unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn retry_after_forms() {
        let now = chrono::Utc.with_ymd_and_hms(2015, 10, 21, 7, 28, 0).unwrap();
        assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:30:00 GMT", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("99999999999999999999999", now), Some(Duration::from_secs(u64::MAX)));
        assert_eq!(parse_retry_after("-5", now), None);
        assert_eq!(parse_retry_after("1.5", now), None);
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("", now), None);
    }

    #[test]
    fn header_validation_never_leaks_values() {
        let secret = "v1,c2VjcmV0c2lnbmF0dXJl\n".to_string();
        let err = build_headers(&[("webhook-signature", secret)]).unwrap_err();
        assert_eq!(
            err,
            // Hookline's own header: a local fault, never the subscriber's attempt.
            PostError::Local("invalid value for header webhook-signature".into())
        );
        assert!(build_headers(&[("bad header", "x".into())]).is_err());
        assert!(matches!(
            build_headers(&[("Content-Length", "1".into())]),
            Err(PostError::Local(m)) if m.contains("content-length")
        ));
        let ok = build_headers(&[("content-type", "application/json".into()), ("X-Custom", "a".into())]).unwrap();
        assert_eq!(ok.get("x-custom").unwrap(), "a");
    }

    /// Names never reach a connection without the resolver's check: send
    /// straight through the inner client (skipping `check_callback_url`) to a
    /// name that resolves to loopback.
    #[tokio::test]
    async fn resolver_refuses_inside_the_client() {
        let client = HttpClient::new(ClientConfig::default());
        let err = client.inner.post("https://localhost:9/").send().await.unwrap_err();
        match request_error(err) {
            PostError::ForbiddenAddress(msg) => {
                assert!(msg.starts_with("localhost resolves to "), "{msg}");
                assert!(msg.ends_with(": loopback address"), "{msg}");
            }
            other => panic!("expected ForbiddenAddress, got {other:?}"),
        }
    }

    #[test]
    fn defaults() {
        let cfg = ClientConfig::default();
        assert_eq!(cfg.connect_timeout, Duration::from_secs(5));
        assert_eq!(cfg.total_timeout, Duration::from_secs(15));
        assert_eq!(cfg.policy, AddressPolicy::PublicOnly);
        assert_eq!(cfg.max_body_bytes, 4096);
        assert!(cfg.user_agent.starts_with("Hookline/"));
    }
}
