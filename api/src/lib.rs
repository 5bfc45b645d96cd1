//! The HTTP API, independent of the server that carries it: one axum router
//! ([`http::router`]) serves `hookline serve` and the `api` and `ingest`
//! Lambdas (which convert API Gateway events to HTTP requests). One
//! contract, one implementation, split by resource ([`events`],
//! [`subscriptions`], [`dead_letters`]); every route is a row of one table
//! ([`routes`]), and every request passes one access check and one tenant
//! scoping ([`Api::handle`], [`scope`]) before its handler runs; request bodies are
//! typed ([`body`]) and every refusal is one [`ApiError`]: `{"error":
//! {"code", "message", "field"?}}`.

mod acknowledgements;
mod audit;
mod body;
mod catalog;
pub mod console;
pub mod cursor;
mod dead_letters;
mod error;
mod events;
pub mod fuzzing;
pub mod http;
pub mod idempotency;
mod keys;
pub mod openapi;
mod portal;
mod pull;
pub mod query;
pub mod reference;
mod reindex;
mod replays;
pub mod routes;
pub mod scope;
mod stats;
mod subscriptions;

use std::sync::Arc;

use serde::Serialize;

pub use body::{parse, Patch};
pub use error::{ApiError, ApiResult, ErrorCode};

use routes::{Call, Found};
use shared::access::{Caller, Role};
use shared::api_key::{check_actor_header, constant_time_eq, principal_lookup, secret_lookup};
use shared::context::Hookline;
use shared::context::{KeyCache, KEY_CACHE_TTL};
use shared::envelope::{show, MAX_ID_BYTES};
use shared::ids::TenantId;

/// One HTTP request, as any server or API Gateway hands it over.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// `GET`, `POST`, …
    pub method: &'a str,
    /// The path without query string, as the client sent it (still
    /// percent-encoded), e.g. `/v1/events/order%2F7`: for messages. The
    /// router ([`http::router`]) matched it and decoded its parameters.
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
    /// The `X-Actor` header's bytes: the person or system acting through
    /// a shared credential. Recorded only where the API was told to trust
    /// it ([`Api::trusting_actor_header`]), and then checked
    /// ([`shared::api_key::check_actor_header`]: a bad one is a 400 naming
    /// `X-Actor`, never cut or dropped); otherwise ignored.
    pub actor_header: Option<&'a [u8]>,
    /// The Standard Webhooks headers (`webhook-id`, `webhook-timestamp`,
    /// `webhook-signature`, `""` when absent): read only by the route a
    /// subscriber signs, `POST /v1/subscriptions/{id}/acknowledgements`.
    pub signed: shared::ack::SignedHeaders<'a>,
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
    /// Further response headers (lower-case names), e.g. `retry-after` on
    /// a `429`, `allow` on a `405`; `content-type` is [`Response::content_type`].
    pub headers: Vec<(&'static str, String)>,
}

impl Response {
    /// A JSON response.
    pub fn json(status: u16, v: &impl Serialize) -> Self {
        Response {
            status,
            content_type: "application/json",
            body: serde_json::to_vec(v).expect("json serializes"),
            headers: Vec::new(),
        }
    }

    /// The same response with the header `name` (lower case) set to `value`.
    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.retain(|(n, _)| *n != name);
        self.headers.push((name, value.into()));
        self
    }

    /// The value of the header `name` (lower case), if set.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    /// An error response in the API's error shape (for servers refusing a
    /// request before it reaches the API, e.g. an oversized body).
    pub fn error(code: ErrorCode, message: impl Into<String>, field: Option<&str>) -> Self {
        let e = ApiError::new(code, message);
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
    /// `Authorization: Bearer <key>` checked here (`hookline serve`): one of
    /// these keys (from the environment or a keys file), or a key of the
    /// key store ([`shared::ports::KeyStore`]), found by the keyed hash of
    /// the secret.
    Bearer(Arc<[ApiKey]>),
    /// API Gateway authenticated the caller's IAM signature; the principal
    /// it names gets its role and tenant from a grant in the key store (or
    /// is an admin listed in `ADMIN_PRINCIPALS`); any other is refused.
    Gateway,
}

/// The API over one [`Hookline`].
#[derive(Clone)]
pub struct Api {
    hookline: Arc<Hookline>,
    auth: Auth,
    /// Keys read from the key store, trusted for
    /// [`shared::context::KEY_CACHE_TTL`].
    keys: Arc<KeyCache>,
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
        let keys_cache = Arc::new(KeyCache::new(KEY_CACHE_TTL));
        Api { hookline, auth: Auth::Bearer(keys.into()), keys: keys_cache, verification, trust_actor_header: false }
    }

    /// An API behind API Gateway, which authorizes callers itself.
    pub fn behind_gateway(hookline: Arc<Hookline>, verification: Verification) -> Self {
        let keys = Arc::new(KeyCache::new(KEY_CACHE_TTL));
        Api { hookline, auth: Auth::Gateway, keys, verification, trust_actor_header: false }
    }

    /// Records the `X-Actor` header as the actor (after the credential's
    /// own name), for deployments where every caller is a trusted system
    /// acting for people (an internal console). Off by default: any caller
    /// could otherwise claim to be anyone.
    pub fn trusting_actor_header(mut self, trust: bool) -> Self {
        self.trust_actor_header = trust;
        self
    }

    /// The same API for the console's calls (`/ui/api/…`): authenticated
    /// by `Authorization: Bearer` only (a key of the key store, a static
    /// key of `hookline serve`, a portal token). Behind API Gateway the
    /// console's prefix is the one route without the IAM authorizer: a
    /// browser cannot sign requests, so this API checks every credential
    /// itself and no IAM principal is read.
    pub fn for_console(&self) -> Api {
        let mut api = self.clone();
        if matches!(api.auth, Auth::Gateway) {
            api.auth = Auth::Bearer(Arc::from(Vec::new()));
        }
        api
    }

    /// The context behind the API.
    pub fn hookline(&self) -> &Arc<Hookline> {
        &self.hookline
    }

    /// Answers one request the router ([`http::router`]) matched to `found`
    /// (a route with its decoded path parameters, or none). Never panics on
    /// input; every refusal names the problem and writes nothing. Every
    /// request passes here, in this order: outside `/v1` an unknown path
    /// (`404`) or a wrong method (`405`) is answered before any credential
    /// is read; then the caller ([`Api::authenticate`], `401`; except on an
    /// open route such as `/healthz`), so under `/v1` only a caller learns
    /// which paths exist (`404`, `405` with `Allow`); the route's
    /// [`shared::access::Action`] for its role and tenant binding (`403`
    /// naming what it needs), then each resource the path names, resolved
    /// as the caller's to see ([`Api::visible`], `404`), and only then the
    /// handler, with the [`Caller`].
    pub async fn handle(&self, found: Found, req: Request<'_>) -> Response {
        let open = matches!(&found, Found::Route(r, _) if r.action.is_none());
        let under_v1 = req.path == "/v1" || req.path.starts_with("/v1/");
        if !under_v1 && !matches!(&found, Found::Route(..)) {
            return found.refusal(&req);
        }
        let bearer_only = matches!(&found, Found::Route(r, _) if routes::bearer_only(r.method, r.path));
        let caller = if open {
            // An open route reads no credential; its handler ignores this.
            Caller { actor: "anonymous".into(), role: shared::access::Role::Producer, tenant: None, subscription: None }
        } else {
            // A bearer-only route (pull) reads `Authorization: Bearer`
            // behind API Gateway too, which authorizes nothing there.
            let console;
            let api = if bearer_only {
                console = self.for_console();
                &console
            } else {
                self
            };
            match api.authenticate(&req).await {
                Ok(c) => c,
                Err(e) => return e.into(),
            }
        };
        let (route, params) = match found {
            Found::Route(r, p) => (r, p),
            other => return other.refusal(&req),
        };
        if let Some(action) = route.action {
            if let Err(denied) = caller.may(action) {
                return Response::error(ErrorCode::Forbidden, denied.to_string(), None);
            }
        }
        // No stored id is empty or longer than MAX_ID_BYTES (producer ids are
        // limited to it, every other id is shorter): such a segment names
        // nothing, and must not reach a store whose keys it cannot fit.
        if params.iter().any(|(_, v)| v.is_empty() || v.len() > MAX_ID_BYTES) {
            return Response::error(ErrorCode::NotFound, format!("nothing at {} {}", req.method, show(req.path)), None);
        }
        for (name, kind) in route.resources() {
            let id = params.iter().find(|(n, _)| *n == name).map_or("", |(_, v)| v.as_str());
            if let Err(e) = self.visible(&caller, kind, id).await {
                return e.into();
            }
        }
        let call = Call { req, caller, params };
        idempotency::answer(self, route, &call, (route.handler)(self, &call)).await
    }

    /// The credential behind `req`: the one place a request's [`Caller`]
    /// comes from (its role and tenant binding).
    ///
    /// A portal link's token (`Authorization: Bearer hlp1.…`,
    /// [`shared::portal`]) wherever bearer credentials are read (`hookline
    /// serve`, and the console's `/ui/api` on both backends): checked by
    /// its MAC under the data key, no store read; a [`Role::Portal`] caller
    /// bound to the token's tenant. `401` says only `expired` or `invalid`.
    ///
    /// `hookline serve`: `Authorization: Bearer <secret>`, one of the
    /// static keys (every one compared in constant time) or a key of the
    /// key store, found by the keyed hash of the secret
    /// ([`shared::api_key::secret_lookup`]), so no secret is compared at
    /// all there. Behind API Gateway: the IAM principal it authenticated,
    /// an admin when listed in `ADMIN_PRINCIPALS`, else by its grant in the
    /// key store. A key read from the store is cached for
    /// [`KEY_CACHE_TTL`]: a request whose key is cached reads nothing.
    ///
    /// # Errors
    ///
    /// `401 unauthorized` when no credential of ours is presented, `403
    /// forbidden` for an IAM principal without a grant, `400` naming
    /// `X-Actor` for a bad trusted `X-Actor` header, `503` when the key
    /// store cannot be read.
    pub async fn authenticate(&self, req: &Request<'_>) -> Result<Caller, ApiError> {
        let mut caller = match &self.auth {
            Auth::Gateway => self.principal_caller(req.principal).await?,
            Auth::Bearer(keys) => self.bearer_caller(keys, req.authorization).await?,
        };
        if let Some(a) = self.actor_header(req)? {
            caller.actor = format!("{} as `{a}`", caller.actor);
        }
        Ok(caller)
    }

    /// The trusted `X-Actor` value, checked; `None` when not trusted, absent
    /// or blank.
    fn actor_header(&self, req: &Request<'_>) -> Result<Option<String>, ApiError> {
        let Some(raw) = req.actor_header.filter(|_| self.trust_actor_header) else { return Ok(None) };
        let bad = |m: String| ApiError::invalid("X-Actor", format!("X-Actor {m}"));
        let text = std::str::from_utf8(raw)
            .map_err(|_| bad("must be printable ASCII (spaces allowed) without backticks".to_string()))?;
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        check_actor_header(text).map_err(|e| bad(e.to_string()))?;
        Ok(Some(text.to_string()))
    }

    /// The caller a bearer secret authenticates: a static key's, or a stored
    /// key's that admits it now.
    async fn bearer_caller(&self, keys: &[ApiKey], header: Option<&str>) -> Result<Caller, ApiError> {
        let unauthorized =
            || ApiError::new(ErrorCode::Unauthorized, "missing or wrong API key (Authorization: Bearer <key>)");
        let given = header.and_then(|h| h.strip_prefix("Bearer ")).map(str::trim).filter(|g| !g.is_empty());
        let given = given.ok_or_else(unauthorized)?;
        // A portal token is checked by its MAC alone: no store is read.
        if shared::portal::is_token(given) {
            return match shared::portal::verify(&self.hookline.keyring, given, chrono::Utc::now()) {
                Ok(grant) => Ok(Caller {
                    actor: grant.actor(),
                    role: Role::Portal,
                    tenant: Some(grant.tenant),
                    subscription: None,
                }),
                Err(e) => Err(ApiError::new(ErrorCode::Unauthorized, e.to_string())),
            };
        }
        // Every static key is compared, so timing tells nothing about which matched.
        let fixed = keys.iter().fold(None, |found, k| {
            if constant_time_eq(given.as_bytes(), k.secret.as_bytes()) {
                Some(k)
            } else {
                found
            }
        });
        if let Some(k) = fixed {
            // A static key is bound to no subscription: as a subscriber
            // it pulls nothing.
            return Ok(Caller {
                actor: format!("key:{}", k.name),
                role: k.role,
                tenant: k.tenant.clone(),
                subscription: None,
            });
        }
        let lookup = secret_lookup(&self.hookline.keyring, given);
        let found = self.keys.find(self.hookline.stores.keys.as_ref(), &lookup).await?;
        match found {
            Some(k) if k.principal.is_none() && k.admits(&lookup, chrono::Utc::now()) => Ok(k.caller()),
            _ => Err(unauthorized()),
        }
    }

    /// The caller an IAM principal is: an admin of `ADMIN_PRINCIPALS`, or
    /// what its grant says. An assumed role's session
    /// (`arn:aws:sts::<account>:assumed-role/<role>/<session>`) is also
    /// found by a grant to its role (`arn:aws:iam::<account>:role/<role>`).
    async fn principal_caller(&self, principal: Option<&str>) -> Result<Caller, ApiError> {
        let Some(arn) = principal.filter(|p| !p.is_empty()) else {
            return Err(ApiError::new(ErrorCode::Forbidden, "API Gateway passed no IAM principal for this request"));
        };
        let admins = &self.hookline.config.admin_principals;
        let candidates = principal_candidates(arn);
        if candidates.iter().any(|c| admins.iter().any(|a| a == c)) {
            return Ok(Caller { actor: arn.to_string(), role: Role::Admin, tenant: None, subscription: None });
        }
        let now = chrono::Utc::now();
        for c in &candidates {
            let lookup = principal_lookup(c);
            if let Some(k) = self.keys.find(self.hookline.stores.keys.as_ref(), &lookup).await? {
                if k.admits(&lookup, now) {
                    return Ok(Caller { actor: arn.to_string(), ..k.caller() });
                }
            }
        }
        Err(ApiError::new(ErrorCode::Forbidden,
            format!(
                "the IAM principal {} has no grant: an admin creates one (POST /v1/keys with principal) or lists it in ADMIN_PRINCIPALS",
                show(arn)
            ),
        ))
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
        Response {
            status: 200,
            content_type: "text/plain; version=0.0.4",
            body: text.into_bytes(),
            headers: Vec::new(),
        }
    }
}

/// The ARNs a principal's grant may be stored under: its own, and for an
/// assumed role's session the role's.
fn principal_candidates(arn: &str) -> Vec<String> {
    let mut out = vec![arn.to_string()];
    if let Some(rest) = arn.strip_prefix("arn:") {
        // arn:<partition>:sts::<account>:assumed-role/<role>/<session>
        let parts: Vec<&str> = rest.splitn(5, ':').collect();
        if let [partition, "sts", "", account, resource] = parts.as_slice() {
            if let Some(role) = resource.strip_prefix("assumed-role/").and_then(|r| r.rsplit_once('/')).map(|(r, _)| r)
            {
                out.push(format!("arn:{partition}:iam::{account}:role/{role}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assumed_role_is_also_found_by_its_role() {
        assert_eq!(principal_candidates("arn:aws:iam::1:user/a"), ["arn:aws:iam::1:user/a"]);
        assert_eq!(
            principal_candidates("arn:aws:sts::123:assumed-role/ops/alice"),
            ["arn:aws:sts::123:assumed-role/ops/alice", "arn:aws:iam::123:role/ops"]
        );
        assert_eq!(
            principal_candidates("arn:aws-cn:sts::9:assumed-role/a/b/c"),
            ["arn:aws-cn:sts::9:assumed-role/a/b/c", "arn:aws-cn:iam::9:role/a/b"]
        );
    }
}
