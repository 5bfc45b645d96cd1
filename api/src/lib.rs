//! The HTTP API as a function from request to response, independent of the
//! server that carries it: `hookline serve` mounts it on axum, the `api` and
//! `ingest` Lambdas feed it API Gateway events. One contract, one
//! implementation, split by resource ([`events`], [`subscriptions`],
//! [`dead_letters`]); every route is a row of one table ([`routes`]), and
//! every request passes one access check and one tenant scoping
//! ([`Api::handle`], [`scope`]) before its handler runs; request bodies are
//! typed ([`body`]) and every refusal is one [`ApiError`]: `{"error":
//! {"code", "message", "field"?}}`.

mod audit;
mod body;
pub mod cursor;
mod dead_letters;
mod error;
mod events;
pub mod fuzzing;
pub mod query;
mod reindex;
mod replays;
pub mod routes;
pub mod scope;
mod subscriptions;

use std::sync::Arc;

use serde::Serialize;

pub use body::{parse, Patch};
pub use error::{ApiError, ApiResult};

use routes::{Call, Found};
use shared::access::{Caller, Role};
use shared::context::Hookline;
use shared::envelope::{show, MAX_ID_BYTES};
use shared::ids::TenantId;

/// One HTTP request, as any server or API Gateway hands it over.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// `GET`, `POST`, …
    pub method: &'a str,
    /// The path without query string, as the client sent it (still
    /// percent-encoded), e.g. `/v1/events/order%2F7`. Each segment is
    /// percent-decoded after the path is split at `/`, so an id holding `/`,
    /// `%`, `?`, `#`, spaces or non-ASCII is reached by encoding it.
    pub path: &'a str,
    /// The raw query string, without `?`.
    pub query: Option<&'a str>,
    /// The `Authorization` header.
    pub authorization: Option<&'a str>,
    /// The `Idempotency-Key` header, as it arrived (checked by the route
    /// that reads it: `POST /v1/events`). Several of them are one value,
    /// joined with `,` (as API Gateway joins repeated headers).
    pub idempotency_key: Option<&'a [u8]>,
    /// The caller's IAM principal (the user or role ARN API Gateway
    /// authorized), on AWS; `None` behind `hookline serve`.
    pub principal: Option<&'a str>,
    /// The `X-Actor` header: the person or system acting through a shared
    /// credential. Recorded only where the API was told to trust it
    /// ([`Api::trusting_actor_header`]); otherwise ignored.
    pub actor_header: Option<&'a str>,
    /// The body.
    pub body: &'a [u8],
}

/// The answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// HTTP status.
    pub status: u16,
    /// Content type of `body`.
    pub content_type: &'static str,
    /// Body bytes.
    pub body: Vec<u8>,
    /// Seconds for a `Retry-After` header (a `429`), if any.
    pub retry_after: Option<u64>,
}

impl Response {
    /// A JSON response.
    pub fn json(status: u16, v: &impl Serialize) -> Self {
        Response {
            status,
            content_type: "application/json",
            body: serde_json::to_vec(v).expect("json serializes"),
            retry_after: None,
        }
    }

    /// An error response in the API's error shape (for servers refusing a
    /// request before it reaches the API, e.g. an oversized body).
    pub fn error(status: u16, code: &str, message: impl Into<String>, field: Option<&str>) -> Self {
        let e = ApiError::new(status, code, message);
        match field {
            Some(f) => e.on(f).into(),
            None => e.into(),
        }
    }

    /// The body parsed as JSON (tests and clients).
    pub fn body_json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// How a new or re-pointed subscription's handshake runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verification {
    /// In a background task; the response says `verified: false` (serve).
    Background,
    /// Before answering (Lambda, where nothing runs after the response).
    Inline,
}

/// One API key of `hookline serve`: its name is the actor the audit trail
/// records for what its callers do.
#[derive(Clone)]
pub struct ApiKey {
    /// Shown in audit records (`key:<name>`); never the secret.
    pub name: String,
    /// The secret callers send as `Authorization: Bearer <secret>`.
    pub secret: String,
    /// What its callers may do.
    pub role: Role,
    /// The one tenant its callers see and act on; `None`: every tenant.
    pub tenant: Option<TenantId>,
}

/// Who authenticates callers.
#[derive(Clone)]
pub enum Auth {
    /// `Authorization: Bearer <key>` checked here (`hookline serve`), against
    /// any of these keys.
    Bearer(Arc<[ApiKey]>),
    /// API Gateway already authorized the caller (IAM); nothing to check here.
    Gateway,
}

/// The API over one [`Hookline`].
#[derive(Clone)]
pub struct Api {
    hookline: Arc<Hookline>,
    auth: Auth,
    verification: Verification,
    trust_actor_header: bool,
}

impl Api {
    /// An API answering requests that carry `Bearer <api_key>` (one key,
    /// named `default`).
    pub fn new(hookline: Arc<Hookline>, api_key: impl Into<String>, verification: Verification) -> Self {
        let key = ApiKey { name: "default".into(), secret: api_key.into(), role: Role::Admin, tenant: None };
        Self::with_keys(hookline, vec![key], verification)
    }

    /// An API answering requests that carry any of these keys; each caller
    /// is known by its key's name.
    pub fn with_keys(hookline: Arc<Hookline>, keys: Vec<ApiKey>, verification: Verification) -> Self {
        Api { hookline, auth: Auth::Bearer(keys.into()), verification, trust_actor_header: false }
    }

    /// An API behind API Gateway, which authorizes callers itself.
    pub fn behind_gateway(hookline: Arc<Hookline>, verification: Verification) -> Self {
        Api { hookline, auth: Auth::Gateway, verification, trust_actor_header: false }
    }

    /// Records the `X-Actor` header as the actor (after the credential's
    /// own name), for deployments where every caller is a trusted system
    /// acting for people (an internal console). Off by default: any caller
    /// could otherwise claim to be anyone.
    pub fn trusting_actor_header(mut self, trust: bool) -> Self {
        self.trust_actor_header = trust;
        self
    }

    /// Who makes an (authorized) request, as the audit trail records it:
    /// `key:<name>` for an API key, the IAM principal's ARN on AWS (or
    /// `iam:unknown` when API Gateway passed none), then ` as <X-Actor>`
    /// when that header is trusted and present.
    pub fn actor(&self, req: &Request<'_>) -> String {
        let base = match &self.auth {
            Auth::Gateway => req.principal.map_or_else(|| "iam:unknown".to_string(), str::to_string),
            Auth::Bearer(_) => self
                .matching_key(req.authorization)
                .map_or_else(|| "key:unknown".to_string(), |k| format!("key:{}", k.name)),
        };
        match req.actor_header.map(str::trim).filter(|a| self.trust_actor_header && !a.is_empty()) {
            Some(a) => format!("{base} as {}", show(a)),
            None => base,
        }
    }

    /// The context behind the API.
    pub fn hookline(&self) -> &Arc<Hookline> {
        &self.hookline
    }

    /// Answers one request. Never panics on input; every refusal names the
    /// problem and writes nothing. Every request passes here, in this
    /// order: the route ([`routes::ROUTES`]), the caller
    /// ([`Api::authenticate`], `401`; except `/healthz`), the route's
    /// [`shared::access::Action`] for its role and tenant binding (`403`
    /// naming what it needs), then each resource the path names, resolved
    /// as the caller's to see ([`Api::visible`], `404`), and only then the
    /// handler, with the [`Caller`].
    pub async fn handle(&self, req: Request<'_>) -> Response {
        let Some(decoded) = path_segments(req.path) else {
            return Response::error(400, "invalid_path", "the path is not valid percent-encoded UTF-8", None);
        };
        let segments: Vec<&str> = decoded.iter().map(String::as_str).collect();
        let found = routes::find(req.method, &segments);
        let no_route =
            || Response::error(404, "not_found", format!("no route for {} {}", req.method, show(req.path)), None);
        // Outside /v1 an unknown path is a 404 before any credential is
        // looked at (as before); under /v1 only a caller learns what exists.
        let open = matches!(&found, Found::Route(r, _) if r.action.is_none());
        if !open && !matches!(&found, Found::Route(..)) && segments.first() != Some(&"v1") {
            return no_route();
        }
        let caller = if open {
            // An open route reads no credential; its handler ignores this.
            Caller { actor: "anonymous".into(), role: shared::access::Role::Producer, tenant: None }
        } else {
            match self.authenticate(&req).await {
                Ok(c) => c,
                Err(e) => return e.into(),
            }
        };
        let (route, params) = match found {
            Found::Route(r, p) => (r, p),
            Found::OtherMethods(methods) => {
                return Response::error(
                    405,
                    "method_not_allowed",
                    format!("{} does not take {} (it takes {})", show(req.path), show(req.method), methods.join(", ")),
                    None,
                )
            }
            Found::Nothing => return no_route(),
        };
        if let Some(action) = route.action {
            if let Err(denied) = caller.may(action) {
                return Response::error(403, "forbidden", denied.to_string(), None);
            }
        }
        // No stored id is empty or longer than MAX_ID_BYTES (producer ids are
        // limited to it, every other id is shorter): such a segment names
        // nothing, and must not reach a store whose keys it cannot fit.
        if params.iter().any(|(_, v)| v.is_empty() || v.len() > MAX_ID_BYTES) {
            return Response::error(404, "not_found", format!("nothing at {} {}", req.method, show(req.path)), None);
        }
        for (name, kind) in route.resources() {
            let id = params.iter().find(|(n, _)| *n == name).map_or("", |(_, v)| v.as_str());
            if let Err(e) = self.visible(&caller, kind, id).await {
                return e.into();
            }
        }
        let call = Call { req, caller, params };
        (route.handler)(self, &call).await.unwrap_or_else(Response::from)
    }

    /// The credential behind `req`: the one place a request's [`Caller`]
    /// comes from (its role and tenant binding).
    ///
    /// # Errors
    ///
    /// `401 unauthorized` when no credential of ours is presented.
    pub async fn authenticate(&self, req: &Request<'_>) -> Result<Caller, ApiError> {
        let unauthorized =
            || ApiError::new(401, "unauthorized", "missing or wrong API key (Authorization: Bearer <key>)");
        match &self.auth {
            // API Gateway authorized an IAM principal.
            Auth::Gateway => Ok(Caller { actor: self.actor(req), role: Role::Admin, tenant: None }),
            Auth::Bearer(_) => {
                let key = self.matching_key(req.authorization).ok_or_else(unauthorized)?;
                Ok(Caller { actor: self.actor(req), role: key.role, tenant: key.tenant.clone() })
            }
        }
    }

    /// The API key an `Authorization` header carries, if it is one of ours.
    fn matching_key(&self, header: Option<&str>) -> Option<&ApiKey> {
        let Auth::Bearer(keys) = &self.auth else { return None };
        let given = header.and_then(|h| h.strip_prefix("Bearer "))?.trim().as_bytes();
        // Every key is compared, so timing tells nothing about which matched.
        keys.iter().fold(None, |found, k| if constant_time_eq(given, k.secret.as_bytes()) { Some(k) } else { found })
    }

    /// `GET /metrics`: the whole system's counters, Prometheus text.
    pub(crate) async fn metrics(&self) -> Response {
        let h = &self.hookline;
        let mut queues = Vec::new();
        if let Ok(d) = h.stores.deliveries.depth().await {
            queues.push(("deliveries", d));
        }
        if let Ok(d) = h.stores.retries.depth().await {
            queues.push(("retries", d));
        }
        let open = h.stores.dead_letters.count(shared::dead_letter::DeadLetterState::Open).await.ok();
        let text = h.metrics.render(&queues, open, &h.health_cache.unhealthy());
        Response { status: 200, content_type: "text/plain; version=0.0.4", body: text.into_bytes(), retry_after: None }
    }
}

/// One query parameter, percent-decoded.
pub fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    query?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then(|| percent_decode(v))
    })
}

/// A query value: `+` is a space, `%XX` a byte; lossy on bad UTF-8.
fn percent_decode(s: &str) -> String {
    String::from_utf8_lossy(&percent_decode_bytes(s, true)).into_owned()
}

/// Decodes `%XX` escapes (a `%` not followed by two hex digits stays as it
/// is); `+` is a space only when `plus_is_space` (query strings, not paths).
fn percent_decode_bytes(s: &str, plus_is_space: bool) -> Vec<u8> {
    let b = s.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' if plus_is_space => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    out
}

/// A raw path's segments, split at `/` (leading and trailing ones ignored)
/// and then each percent-decoded, so `%2F` inside an id stays inside it.
/// `None` when a segment does not decode to UTF-8.
fn path_segments(path: &str) -> Option<Vec<String>> {
    path.trim_matches('/').split('/').map(|seg| String::from_utf8(percent_decode_bytes(seg, false)).ok()).collect()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_params_decode() {
        assert_eq!(query_param(Some("format=change-feed&x=1"), "format").as_deref(), Some("change-feed"));
        assert_eq!(query_param(Some("a=%41b+c"), "a").as_deref(), Some("Ab c"));
        assert_eq!(query_param(Some("a=%4"), "a").as_deref(), Some("%4"));
        assert_eq!(query_param(None, "a"), None);
    }

    #[test]
    fn path_segments_decode_after_splitting() {
        let seg = |p: &str| path_segments(p).unwrap();
        assert_eq!(seg("/v1/events/a%2Fb%20c%25d%3Fe%23f%C3%A9+g"), ["v1", "events", "a/b c%d?e#fé+g"]);
        assert_eq!(seg("/v1/events/e1/deliveries/"), ["v1", "events", "e1", "deliveries"]);
        assert_eq!(seg("/v1/events/100%"), ["v1", "events", "100%"], "a lone % stays");
        assert_eq!(seg("/v1/events/%zz%4"), ["v1", "events", "%zz%4"]);
        assert_eq!(path_segments("/v1/events/%FF"), None, "not UTF-8");
    }

    #[test]
    fn key_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
