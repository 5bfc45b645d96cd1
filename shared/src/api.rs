//! The HTTP API as a function from request to response, independent of the
//! server that carries it: `hookline serve` mounts it on axum, the `api` and
//! `ingest` Lambdas feed it API Gateway events. One contract, one
//! implementation. Errors are `{"error": {"code", "message", "field"?}}`.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::Utc;
use serde_json::{json, Map, Value};

use crate::context::Hookline;
use crate::envelope::{self, check_id, show, EnvelopeError, Format, MAX_ID_BYTES};
use crate::error::StoreError;
use crate::ids;
use crate::retry::RetryPolicy;
use crate::signing::Secret;
use crate::ssrf;
use crate::stage::ingest::{self, IngestError};
use crate::stage::requeue::{self, Audit, RequeueError};
use crate::stage::verify;
use crate::subscription::{check_custom_header, validate_pattern, FieldError, PayloadFormat, SigningKey, Subscription};

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
}

impl Response {
    /// A JSON response.
    pub fn json(status: u16, v: &Value) -> Self {
        Response { status, content_type: "application/json", body: serde_json::to_vec(v).expect("json serializes") }
    }

    /// An error response in the API's error shape.
    pub fn error(status: u16, code: &str, message: impl Into<String>, field: Option<&str>) -> Self {
        let mut e = json!({"code": code, "message": message.into()});
        if let Some(f) = field {
            e["field"] = json!(f);
        }
        Response::json(status, &json!({ "error": e }))
    }

    /// The body parsed as JSON (tests and clients).
    pub fn body_json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
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

/// Who authenticates callers.
#[derive(Clone)]
pub enum Auth {
    /// `Authorization: Bearer <key>` checked here (`hookline serve`).
    Bearer(Arc<str>),
    /// API Gateway already authorized the caller (IAM); nothing to check here.
    Gateway,
}

/// The API over one [`Hookline`].
#[derive(Clone)]
pub struct Api {
    hookline: Arc<Hookline>,
    auth: Auth,
    verification: Verification,
}

type ApiResult = Result<Response, Response>;

fn not_found(what: &str, id: &str) -> Response {
    Response::error(404, "not_found", format!("{what} {} not found", show(id)), None)
}

fn store_error(e: StoreError) -> Response {
    tracing::error!(error = %e, "store error");
    Response::error(503, "unavailable", "storage is unavailable; nothing was written, retry the request", None)
}

fn field_error(e: FieldError) -> Response {
    Response::error(400, "invalid_field", e.to_string(), Some(&e.field))
}

fn envelope_error(e: &EnvelopeError) -> Response {
    Response::error(400, e.code(), e.to_string(), e.field())
}

impl Api {
    /// An API answering requests that carry `Bearer <api_key>`.
    pub fn new(hookline: Arc<Hookline>, api_key: impl Into<Arc<str>>, verification: Verification) -> Self {
        Api { hookline, auth: Auth::Bearer(api_key.into()), verification }
    }

    /// An API behind API Gateway, which authorizes callers itself.
    pub fn behind_gateway(hookline: Arc<Hookline>, verification: Verification) -> Self {
        Api { hookline, auth: Auth::Gateway, verification }
    }

    /// The context behind the API.
    pub fn hookline(&self) -> &Arc<Hookline> {
        &self.hookline
    }

    /// Answers one request. Never panics on input; every refusal names the
    /// problem and writes nothing.
    pub async fn handle(&self, req: Request<'_>) -> Response {
        let Some(decoded) = path_segments(req.path) else {
            return Response::error(400, "invalid_path", "the path is not valid percent-encoded UTF-8", None);
        };
        let segments: Vec<&str> = decoded.iter().map(String::as_str).collect();
        match (req.method, segments.as_slice()) {
            ("GET", ["healthz"]) => return Response::json(200, &json!({"status": "ok"})),
            ("GET", ["metrics"]) => return self.metrics().await,
            (_, ["v1", ..]) => {}
            _ => return Response::error(404, "not_found", format!("no route for {} {}", req.method, show(req.path)), None),
        }
        if !self.authorized(req.authorization) {
            return Response::error(401, "unauthorized", "missing or wrong API key (Authorization: Bearer <key>)", None);
        }
        // No stored id is empty or longer than MAX_ID_BYTES (producer ids are
        // limited to it, every other id is shorter): such a segment names
        // nothing, and must not reach a store whose keys it cannot fit.
        if segments[1..].iter().any(|s| s.is_empty() || s.len() > MAX_ID_BYTES) {
            return Response::error(404, "not_found", format!("nothing at {} {}", req.method, show(req.path)), None);
        }
        let r = match (req.method, &segments[1..]) {
            ("POST", ["events"]) => self.post_event(&req).await,
            ("POST", ["events", "batch"]) => self.post_batch(&req).await,
            ("GET", ["events", id]) => self.get_event(id).await,
            ("GET", ["events", id, "deliveries"]) => self.get_deliveries(id).await,
            ("POST", ["events", id, "replay"]) => self.replay(id, &req).await,
            ("POST", ["subscriptions"]) => self.create_subscription(&req).await,
            ("GET", ["subscriptions"]) => self.list_subscriptions().await,
            ("GET", ["subscriptions", id]) => self.get_subscription(id).await,
            ("PATCH", ["subscriptions", id]) => self.patch_subscription(id, &req).await,
            ("DELETE", ["subscriptions", id]) => self.delete_subscription(id).await,
            ("POST", ["subscriptions", id, "verify"]) => self.verify_now(id).await,
            ("POST", ["subscriptions", id, "rotate-secret"]) => self.rotate_secret(id, &req).await,
            ("GET", ["dead-letters"]) => self.list_dead_letters(&req).await,
            ("GET", ["dead-letters", id]) => self.get_dead_letter(id).await,
            ("POST", ["dead-letters", id, "requeue"]) => self.resolve_dead_letter(id, &req, true).await,
            ("POST", ["dead-letters", id, "skip"]) => self.resolve_dead_letter(id, &req, false).await,
            _ => Err(Response::error(404, "not_found", format!("no route for {} {}", req.method, show(req.path)), None)),
        };
        r.unwrap_or_else(|e| e)
    }

    fn authorized(&self, header: Option<&str>) -> bool {
        match &self.auth {
            Auth::Gateway => true,
            Auth::Bearer(key) => {
                let Some(given) = header.and_then(|h| h.strip_prefix("Bearer ")) else { return false };
                constant_time_eq(given.trim().as_bytes(), key.as_bytes())
            }
        }
    }

    async fn metrics(&self) -> Response {
        let h = &self.hookline;
        let mut queues = Vec::new();
        if let Ok(d) = h.stores.deliveries.depth().await {
            queues.push(("deliveries", d));
        }
        if let Ok(d) = h.stores.retries.depth().await {
            queues.push(("retries", d));
        }
        let open = h.stores.dead_letters.count("open").await.ok();
        let text = h.metrics.render(&queues, open);
        Response { status: 200, content_type: "text/plain; version=0.0.4", body: text.into_bytes() }
    }

    fn format(req: &Request<'_>) -> Result<Option<Format>, Response> {
        match query_param(req.query, "format") {
            None => Ok(None),
            Some(f) => f.parse::<Format>().map(Some).map_err(|e| envelope_error(&e)),
        }
    }

    async fn post_event(&self, req: &Request<'_>) -> ApiResult {
        let format = Self::format(req)?;
        match ingest::ingest(&self.hookline, req.body, format).await {
            Ok(a) => Ok(Response::json(202, &json!({"event_id": a.event_id, "duplicate": a.duplicate}))),
            Err(e) => Err(ingest_error(e)),
        }
    }

    async fn post_batch(&self, req: &Request<'_>) -> ApiResult {
        let format = Self::format(req)?;
        let results = ingest::ingest_batch(&self.hookline, req.body, format).await.map_err(ingest_error)?;
        let items: Vec<Value> = results
            .iter()
            .enumerate()
            .map(|(i, r)| match r {
                Ok(a) => json!({"index": i, "status": 202, "event_id": a.event_id, "duplicate": a.duplicate}),
                Err(e) => {
                    let mut v = envelope_error(e).body_json();
                    v["index"] = json!(i);
                    v["status"] = json!(400);
                    v
                }
            })
            .collect();
        let accepted = results.iter().filter(|r| r.is_ok()).count();
        Ok(Response::json(
            if accepted == results.len() { 202 } else { 207 },
            &json!({"accepted": accepted, "rejected": results.len() - accepted, "results": items}),
        ))
    }

    async fn get_event(&self, id: &str) -> ApiResult {
        let e = self.hookline.stores.events.get(id).await.map_err(store_error)?.ok_or_else(|| not_found("event", id))?;
        Ok(Response::json(
            200,
            &json!({
                "id": e.id, "producer_id": envelope::producer_id(&e.body, e.format),
                "type": e.event_type, "tenant_id": e.tenant_id, "partition_key": e.partition_key,
                "sequence": e.sequence, "trace_id": e.trace_id, "producer": e.producer, "format": e.format,
                "occurred_at": e.occurred_at, "received_at": e.received_at, "expires_at": e.expires_at,
                "body": e.body_json(),
            }),
        ))
    }

    async fn get_deliveries(&self, id: &str) -> ApiResult {
        let h = &self.hookline;
        h.stores.events.get(id).await.map_err(store_error)?.ok_or_else(|| not_found("event", id))?;
        let sagas = h.stores.sagas.list_for_event(id).await.map_err(store_error)?;
        let mut out = Vec::with_capacity(sagas.len());
        for s in sagas {
            let attempts = h.stores.attempts.list(&s.id).await.map_err(store_error)?;
            out.push(json!({
                "subscription_id": s.subscription_id,
                "saga_id": s.id,
                "webhook_id": s.webhook_id,
                "status": s.state.status.as_str(),
                "next_attempt_at": s.state.next_attempt_at,
                "last_error": s.state.last_error,
                "origin": s.origin,
                "attempts": attempts.iter().map(|a| a.to_public_json()).collect::<Vec<_>>(),
            }));
        }
        Ok(Response::json(200, &json!({"event_id": id, "deliveries": out})))
    }

    async fn replay(&self, id: &str, req: &Request<'_>) -> ApiResult {
        let body = json_object(req.body, true)?;
        let audit = audit(&body)?;
        let request = requeue::ReplayRequest {
            event_id: id.to_string(),
            subscription_id: opt_str(&body, "subscription_id")?,
            replay_key: opt_str(&body, "replay_key")?.unwrap_or_else(|| ids::random_token("")),
            actor: audit.actor,
            reason: audit.reason,
        };
        let sagas = requeue::request_replay(&self.hookline, &request).await.map_err(requeue_error)?;
        Ok(Response::json(
            202,
            &json!({"event_id": id, "replay_key": request.replay_key, "sagas": sagas.iter().map(|(saga, sub)| json!({"saga_id": saga, "subscription_id": sub})).collect::<Vec<_>>()}),
        ))
    }

    async fn create_subscription(&self, req: &Request<'_>) -> ApiResult {
        let body = json_object(req.body, false)?;
        check_known(&body, &["callback_url", "event_types", "tenant_id", "description", "headers", "retry_policy", "active", "payload_format"])?;
        let url = opt_str(&body, "callback_url")?.ok_or_else(|| missing("callback_url"))?;
        let url = self.check_url(&url).await?;
        let event_types = event_types(body.get("event_types").ok_or_else(|| missing("event_types"))?)?;
        let now = Utc::now();
        let secret = Secret::generate();
        let sub = Subscription {
            id: ids::new_subscription_id(),
            callback_url: url,
            event_types,
            tenant_id: tenant(&body)?,
            description: opt_str(&body, "description")?,
            headers: headers(body.get("headers"))?,
            retry_policy: retry_policy(body.get("retry_policy"), &self.hookline.config)?,
            payload_format: payload_format(body.get("payload_format"))?,
            active: opt_bool(&body, "active")?.unwrap_or(true),
            verified: false,
            verification_error: None,
            signing_keys: vec![SigningKey { secret: secret.clone(), expires_at: None }],
            created_at: now,
            updated_at: now,
            version: 1,
        };
        self.hookline.stores.subscriptions.create(&sub).await.map_err(store_error)?;
        self.hookline.subscription_cache.invalidate().await;
        tracing::info!(subscription_id = %sub.id, "subscription created");
        let sub = self.start_verification(sub).await;
        let mut v = sub.to_public_json();
        v["secret"] = json!(secret.expose());
        Ok(Response::json(201, &v))
    }

    async fn check_url(&self, url: &str) -> Result<String, Response> {
        let policy = self.hookline.config.address_policy;
        let parsed = ssrf::check_callback_url(url, policy)
            .map_err(|e| Response::error(422, "invalid_callback_url", e.to_string(), Some("callback_url")))?;
        ssrf::check_callback_resolves(&parsed, policy)
            .await
            .map_err(|e| Response::error(422, "invalid_callback_url", e.to_string(), Some("callback_url")))?;
        Ok(url.trim().to_string())
    }

    async fn start_verification(&self, sub: Subscription) -> Subscription {
        match self.verification {
            Verification::Background => {
                let h = self.hookline.clone();
                let id = sub.id.clone();
                tokio::spawn(async move {
                    if let Err(e) = verify::verify(&h, &id).await {
                        tracing::error!(subscription_id = %id, error = %e, "verification could not be stored");
                    }
                });
                sub
            }
            Verification::Inline => match verify::verify(&self.hookline, &sub.id).await {
                Ok(Some(s)) => s,
                _ => sub,
            },
        }
    }

    async fn load_subscription(&self, id: &str) -> Result<Subscription, Response> {
        self.hookline.stores.subscriptions.get(id).await.map_err(store_error)?.ok_or_else(|| not_found("subscription", id))
    }

    async fn list_subscriptions(&self) -> ApiResult {
        let subs = self.hookline.stores.subscriptions.list().await.map_err(store_error)?;
        Ok(Response::json(200, &json!({"subscriptions": subs.iter().map(|s| s.to_public_json()).collect::<Vec<_>>()})))
    }

    async fn get_subscription(&self, id: &str) -> ApiResult {
        Ok(Response::json(200, &self.load_subscription(id).await?.to_public_json()))
    }

    async fn patch_subscription(&self, id: &str, req: &Request<'_>) -> ApiResult {
        let body = json_object(req.body, false)?;
        check_known(&body, &["callback_url", "event_types", "tenant_id", "description", "headers", "retry_policy", "active", "payload_format"])?;
        let new_url = match opt_str(&body, "callback_url")? {
            Some(u) => Some(self.check_url(&u).await?),
            None => None,
        };
        let mut sub = self.load_subscription(id).await?;
        let version = sub.version;
        let mut reverify = false;
        if let Some(u) = new_url {
            if u != sub.callback_url {
                sub.callback_url = u;
                sub.verified = false;
                sub.verification_error = None;
                reverify = true;
            }
        }
        if let Some(v) = body.get("event_types") {
            sub.event_types = event_types(v)?;
        }
        if body.contains_key("tenant_id") {
            sub.tenant_id = tenant(&body)?;
        }
        if body.contains_key("description") {
            sub.description = opt_str(&body, "description")?;
        }
        if body.contains_key("headers") {
            sub.headers = headers(body.get("headers"))?;
        }
        if body.contains_key("retry_policy") {
            sub.retry_policy = retry_policy(body.get("retry_policy"), &self.hookline.config)?;
        }
        if body.contains_key("payload_format") {
            sub.payload_format = payload_format(body.get("payload_format"))?;
        }
        if let Some(a) = opt_bool(&body, "active")? {
            sub.active = a;
        }
        sub.version += 1;
        sub.updated_at = Utc::now();
        if !self.hookline.stores.subscriptions.update(&sub, version).await.map_err(store_error)? {
            return Err(Response::error(409, "conflict", "the subscription changed meanwhile; retry", None));
        }
        self.hookline.subscription_cache.invalidate().await;
        let sub = if reverify { self.start_verification(sub).await } else { sub };
        Ok(Response::json(200, &sub.to_public_json()))
    }

    async fn delete_subscription(&self, id: &str) -> ApiResult {
        if !self.hookline.stores.subscriptions.delete(id).await.map_err(store_error)? {
            return Err(not_found("subscription", id));
        }
        self.hookline.subscription_cache.invalidate().await;
        Ok(Response { status: 204, content_type: "application/json", body: vec![] })
    }

    async fn verify_now(&self, id: &str) -> ApiResult {
        let sub = verify::verify(&self.hookline, id).await.map_err(store_error)?.ok_or_else(|| not_found("subscription", id))?;
        Ok(Response::json(200, &sub.to_public_json()))
    }

    async fn rotate_secret(&self, id: &str, req: &Request<'_>) -> ApiResult {
        let body = json_object(req.body, true)?;
        let overlap = match body.get("overlap_seconds") {
            None | Some(Value::Null) => self.hookline.config.rotation_overlap,
            Some(v) => chrono::Duration::seconds(
                v.as_i64().filter(|n| (0..=7 * 86_400).contains(n)).ok_or_else(|| {
                    field_error(FieldError::new("overlap_seconds", "must be an integer between 0 and 604800"))
                })?,
            ),
        };
        for _ in 0..5 {
            let mut sub = self.load_subscription(id).await?;
            let version = sub.version;
            let secret = Secret::generate();
            sub.rotate_secret(secret.clone(), Utc::now(), overlap);
            sub.version += 1;
            sub.updated_at = Utc::now();
            if self.hookline.stores.subscriptions.update(&sub, version).await.map_err(store_error)? {
                self.hookline.subscription_cache.invalidate().await;
                tracing::info!(subscription_id = %id, "signing secret rotated");
                let mut v = sub.to_public_json();
                v["secret"] = json!(secret.expose());
                return Ok(Response::json(200, &v));
            }
        }
        Err(Response::error(409, "conflict", "the subscription kept changing; retry", None))
    }

    async fn list_dead_letters(&self, req: &Request<'_>) -> ApiResult {
        let state = query_param(req.query, "state");
        if let Some(s) = &state {
            if !["open", "requeued", "skipped"].contains(&s.as_str()) {
                return Err(Response::error(400, "invalid_field", "state must be open, requeued or skipped", Some("state")));
            }
        }
        let limit = match query_param(req.query, "limit") {
            None => 100,
            Some(l) => l.parse::<usize>().ok().filter(|n| (1..=1000).contains(n)).ok_or_else(|| {
                Response::error(400, "invalid_field", "limit must be an integer between 1 and 1000", Some("limit"))
            })?,
        };
        let dls = self.hookline.stores.dead_letters.list(state.as_deref(), limit).await.map_err(store_error)?;
        Ok(Response::json(200, &json!({"dead_letters": dls})))
    }

    async fn get_dead_letter(&self, id: &str) -> ApiResult {
        let dl = self.hookline.stores.dead_letters.get(id).await.map_err(store_error)?.ok_or_else(|| not_found("dead letter", id))?;
        Ok(Response::json(200, &serde_json::to_value(dl).expect("serializes")))
    }

    async fn resolve_dead_letter(&self, id: &str, req: &Request<'_>, requeue: bool) -> ApiResult {
        let body = json_object(req.body, true)?;
        let audit = audit(&body)?;
        if requeue {
            let saga_id = requeue::request_requeue(&self.hookline, id, &audit).await.map_err(requeue_error)?;
            Ok(Response::json(202, &json!({"dead_letter_id": id, "saga_id": saga_id})))
        } else {
            requeue::skip(&self.hookline, id, &audit).await.map_err(requeue_error)?;
            Ok(Response::json(200, &json!({"dead_letter_id": id, "state": "skipped"})))
        }
    }
}

fn ingest_error(e: IngestError) -> Response {
    match e {
        IngestError::Envelope(e) => envelope_error(&e),
        IngestError::TooLarge { .. } => Response::error(413, "payload_too_large", e.to_string(), None),
        IngestError::BadBatch(m) => Response::error(400, "invalid_batch", m, None),
        IngestError::Store(e) => store_error(e),
    }
}

fn requeue_error(e: RequeueError) -> Response {
    match e {
        RequeueError::NotFound(what) => Response::error(404, "not_found", format!("{what} not found"), None),
        RequeueError::AlreadyResolved { .. } => Response::error(409, "conflict", e.to_string(), None),
        RequeueError::Store(e) => store_error(e),
    }
}

fn missing(field: &str) -> Response {
    Response::error(400, "missing_field", format!("missing required field `{field}`"), Some(field))
}

fn json_object(body: &[u8], empty_ok: bool) -> Result<Map<String, Value>, Response> {
    if empty_ok && body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(Response::error(400, "not_an_object", "the request body must be a JSON object", None)),
        Err(e) => Err(Response::error(
            400,
            "malformed_json",
            format!("malformed JSON at line {}, column {}: {e}", e.line(), e.column()),
            None,
        )),
    }
}

fn check_known(body: &Map<String, Value>, known: &[&str]) -> Result<(), Response> {
    match body.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(Response::error(400, "unknown_field", format!("unknown field {}; known fields: {}", show(k), known.join(", ")), Some(k))),
        None => Ok(()),
    }
}

fn opt_str(body: &Map<String, Value>, f: &str) -> Result<Option<String>, Response> {
    match body.get(f) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(field_error(FieldError::new(f, "expected a string"))),
    }
}

fn opt_bool(body: &Map<String, Value>, f: &str) -> Result<Option<bool>, Response> {
    match body.get(f) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(field_error(FieldError::new(f, "expected true or false"))),
    }
}

fn event_types(v: &Value) -> Result<Vec<String>, Response> {
    let arr = v.as_array().filter(|a| !a.is_empty() && a.len() <= 100).ok_or_else(|| {
        field_error(FieldError::new("event_types", "expected a non-empty array of at most 100 patterns"))
    })?;
    arr.iter()
        .enumerate()
        .map(|(i, p)| {
            let p = p.as_str().ok_or_else(|| field_error(FieldError::new(format!("event_types[{i}]"), "expected a string")))?;
            validate_pattern(p).map_err(|m| field_error(FieldError::new(format!("event_types[{i}]"), m)))?;
            Ok(p.to_string())
        })
        .collect()
}

/// A subscription's `tenant_id`: the producer id rule ([`check_id`]), so it
/// can equal an event's tenant.
fn tenant(body: &Map<String, Value>) -> Result<Option<String>, Response> {
    let t = opt_str(body, "tenant_id")?;
    if let Some(t) = &t {
        if t.trim().is_empty() {
            return Err(field_error(FieldError::new("tenant_id", "must not be empty")));
        }
        check_id(t).map_err(|e| field_error(FieldError::new("tenant_id", e.to_string())))?;
    }
    Ok(t)
}

/// Custom headers: at most 20, each sendable ([`check_custom_header`]); a
/// header that could never be sent is a `422` naming it (`headers.<name>`).
fn headers(v: Option<&Value>) -> Result<BTreeMap<String, String>, Response> {
    let Some(v) = v.filter(|v| !v.is_null()) else { return Ok(BTreeMap::new()) };
    let obj = v.as_object().ok_or_else(|| field_error(FieldError::new("headers", "expected an object of header names to values")))?;
    if obj.len() > 20 {
        return Err(field_error(FieldError::new("headers", "at most 20 custom headers")));
    }
    obj.iter()
        .map(|(k, v)| {
            let field = format!("headers.{k}");
            let v = v.as_str().ok_or_else(|| field_error(FieldError::new(field.clone(), "expected a string")))?;
            check_custom_header(k, v).map_err(|e| Response::error(422, "invalid_header", e.to_string(), Some(&field)))?;
            Ok((k.clone(), v.to_string()))
        })
        .collect()
}

/// A retry policy: well-formed ([`RetryPolicy::validate`], `400`), and no
/// longer than the event retention ([`RetryPolicy::check_fits_retention`],
/// `422` naming `retry_policy`). Absent or `null` is the configured default.
fn retry_policy(v: Option<&Value>, config: &crate::context::Config) -> Result<RetryPolicy, Response> {
    let Some(v) = v.filter(|v| !v.is_null()) else { return Ok(config.default_retry_policy) };
    let p: RetryPolicy = serde_json::from_value(v.clone())
        .map_err(|e| field_error(FieldError::new("retry_policy", format!("expected {{max_attempts, base_delay_ms, max_delay_ms}} as integers: {e}"))))?;
    p.validate().map_err(field_error)?;
    p.check_fits_retention(config.retention)
        .map_err(|e| Response::error(422, "retry_schedule_too_long", e.to_string(), Some("retry_policy")))?;
    Ok(p)
}

fn payload_format(v: Option<&Value>) -> Result<PayloadFormat, Response> {
    let Some(v) = v.filter(|v| !v.is_null()) else { return Ok(PayloadFormat::default()) };
    serde_json::from_value(v.clone()).map_err(|_| field_error(FieldError::new("payload_format", "must be \"original\" or \"hookline\"")))
}

fn audit(body: &Map<String, Value>) -> Result<Audit, Response> {
    Ok(Audit {
        actor: opt_str(body, "actor")?.unwrap_or_else(|| "api".into()),
        reason: opt_str(body, "reason")?.unwrap_or_else(|| "no reason given".into()),
    })
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
            b'%' if i + 2 < b.len() => {
                match (hex(b[i + 1]), hex(b[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push(h << 4 | l);
                        i += 3;
                        continue;
                    }
                    _ => out.push(b'%'),
                }
            }
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
