//! `/v1/subscriptions`: create, read, patch, delete, verify, rotate the
//! signing secret. Bodies are typed; a PATCH tells absent, `null` and a
//! value apart ([`Patch`]).

use std::collections::BTreeMap;

use chrono::Utc;
use serde::{Deserialize, Serialize};

use super::{cursor, parse, query_param, Api, ApiError, ApiResult, Patch, Request, Response, Verification};
use crate::context::Config;
use crate::envelope::{check_id, MAX_EVENT_TYPE_LEN};
use crate::ids::{self, SubscriptionId};
use crate::limits::MAX_SUBSCRIPTION_PATTERNS;
use crate::ports::SubscriptionFilter;
use crate::retry::RetryPolicy;
use crate::routing;
use crate::signing::Secret;
use crate::ssrf;
use crate::stage::verify;
use crate::subscription::{check_custom_header, validate_pattern, FieldError, PayloadFormat, SigningKey, Subscription};

/// `POST /v1/subscriptions`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    callback_url: String,
    event_types: Vec<String>,
    #[serde(default)]
    tenant_id: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    retry_policy: Option<RetryPolicy>,
    #[serde(default)]
    payload_format: Option<PayloadFormat>,
    #[serde(default)]
    active: Option<bool>,
}

/// `PATCH /v1/subscriptions/{id}`: `null` resets a field to its default.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchBody {
    #[serde(default)]
    callback_url: Patch<String>,
    #[serde(default)]
    event_types: Patch<Vec<String>>,
    #[serde(default)]
    tenant_id: Patch<String>,
    #[serde(default)]
    description: Patch<String>,
    #[serde(default)]
    headers: Patch<BTreeMap<String, String>>,
    #[serde(default)]
    retry_policy: Patch<RetryPolicy>,
    #[serde(default)]
    payload_format: Patch<PayloadFormat>,
    #[serde(default)]
    active: Patch<bool>,
}

/// `POST /v1/subscriptions/{id}/rotate-secret`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RotateBody {
    #[serde(default)]
    overlap_seconds: Option<i64>,
}

/// `GET /v1/subscriptions`: one page, and the cursor of the next (`null`
/// on the last page).
#[derive(Serialize)]
struct SubscriptionList {
    items: Vec<serde_json::Value>,
    next_cursor: Option<String>,
}

/// Subscriptions per page unless `limit` says otherwise, and the most it may say.
const DEFAULT_PAGE: usize = 100;
const MAX_PAGE: usize = 1000;

/// A subscription as the API shows it, with its secret only when it was
/// just created or rotated.
fn shown(sub: &Subscription, secret: Option<&Secret>) -> serde_json::Value {
    let mut v = sub.to_public_json();
    if let Some(s) = secret {
        v["secret"] = serde_json::json!(s.expose());
    }
    v
}

/// Event type patterns: 1 to [`MAX_SUBSCRIPTION_PATTERNS`] (98), each valid.
fn event_types(types: Vec<String>) -> Result<Vec<String>, ApiError> {
    if types.is_empty() || types.len() > MAX_SUBSCRIPTION_PATTERNS {
        return Err(ApiError::invalid(
            "event_types",
            format!("expected a non-empty array of at most {MAX_SUBSCRIPTION_PATTERNS} patterns"),
        ));
    }
    for (i, p) in types.iter().enumerate() {
        validate_pattern(p).map_err(|m| ApiError::invalid(format!("event_types[{i}]"), m))?;
    }
    Ok(types)
}

/// A subscription's `tenant_id`: the producer id rule ([`check_id`]), so it
/// can equal an event's tenant.
fn tenant(t: Option<String>) -> Result<Option<String>, ApiError> {
    if let Some(t) = &t {
        if t.trim().is_empty() {
            return Err(FieldError::new("tenant_id", "must not be empty").into());
        }
        check_id(t).map_err(|e| ApiError::invalid("tenant_id", e.to_string()))?;
    }
    Ok(t)
}

/// Custom headers: at most 20, each sendable ([`check_custom_header`]); a
/// header that could never be sent is a `422` naming it (`headers.<name>`).
fn headers(h: Option<BTreeMap<String, String>>) -> Result<BTreeMap<String, String>, ApiError> {
    let h = h.unwrap_or_default();
    if h.len() > 20 {
        return Err(ApiError::invalid("headers", "at most 20 custom headers"));
    }
    for (k, v) in &h {
        check_custom_header(k, v)
            .map_err(|e| ApiError::new(422, "invalid_header", e.to_string()).on(format!("headers.{k}")))?;
    }
    Ok(h)
}

/// A retry policy: well-formed ([`RetryPolicy::validate`], `400`), and no
/// longer than the event retention ([`RetryPolicy::check_fits_retention`],
/// `422` naming `retry_policy`). Absent or `null` is the configured default.
fn retry_policy(p: Option<RetryPolicy>, config: &Config) -> Result<RetryPolicy, ApiError> {
    let Some(p) = p else { return Ok(config.default_retry_policy) };
    p.validate()?;
    p.check_fits_retention(config.retention)
        .map_err(|e| ApiError::new(422, "retry_schedule_too_long", e.to_string()).on("retry_policy"))?;
    Ok(p)
}

impl Api {
    pub(super) async fn create_subscription(&self, req: &Request<'_>) -> ApiResult {
        let body: CreateBody = parse(req.body, false)?;
        let callback_url = self.check_url(&body.callback_url).await?;
        let now = Utc::now();
        let secret = Secret::generate();
        let sub = Subscription {
            id: ids::new_subscription_id(),
            callback_url,
            event_types: event_types(body.event_types)?,
            tenant_id: tenant(body.tenant_id)?,
            description: body.description,
            headers: headers(body.headers)?,
            retry_policy: retry_policy(body.retry_policy, &self.hookline.config)?,
            payload_format: body.payload_format.unwrap_or_default(),
            active: body.active.unwrap_or(true),
            verified: false,
            verification_error: None,
            signing_keys: vec![SigningKey { secret: secret.clone(), expires_at: None }],
            created_at: now,
            updated_at: now,
            version: 1,
        };
        self.hookline.stores.subscriptions.create(&sub).await?;
        self.hookline.subscription_cache.invalidate().await;
        tracing::info!(subscription_id = %sub.id, "subscription created");
        let sub = self.start_verification(sub).await;
        Ok(Response::json(201, &shown(&sub, Some(&secret))))
    }

    /// A callback URL that passes the address policy, also once resolved
    /// (`422 invalid_callback_url` otherwise).
    async fn check_url(&self, url: &str) -> Result<String, ApiError> {
        let policy = self.hookline.config.address_policy;
        let refused =
            |e: &dyn std::fmt::Display| ApiError::new(422, "invalid_callback_url", e.to_string()).on("callback_url");
        let parsed = ssrf::check_callback_url(url, policy).map_err(|e| refused(&e))?;
        ssrf::check_callback_resolves(&parsed, policy).await.map_err(|e| refused(&e))?;
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

    async fn load_subscription(&self, id: &SubscriptionId) -> Result<Subscription, ApiError> {
        self.hookline.stores.subscriptions.get(id).await?.ok_or_else(|| ApiError::not_found("subscription", id))
    }

    /// One page in id order. `tenant_id` alone: that tenant's
    /// subscriptions. `event_type` (with `tenant_id` or without): the
    /// subscriptions an event of that type (and tenant) is in scope of, by
    /// the routing index (global ones and the tenant's, whatever their
    /// state). `limit` 1 to 1000 (100); `cursor` from the previous page.
    pub(super) async fn list_subscriptions(&self, req: &Request<'_>) -> ApiResult {
        let limit = match query_param(req.query, "limit") {
            None => DEFAULT_PAGE,
            Some(l) => l.parse::<usize>().ok().filter(|n| (1..=MAX_PAGE).contains(n)).ok_or_else(|| {
                ApiError::invalid("limit", format!("limit must be an integer between 1 and {MAX_PAGE}"))
            })?,
        };
        let tenant_id = match query_param(req.query, "tenant_id") {
            None => None,
            Some(t) => tenant(Some(t))?,
        };
        let event_type = query_param(req.query, "event_type");
        if let Some(t) = &event_type {
            if t.is_empty() || t.len() > MAX_EVENT_TYPE_LEN || t.chars().any(char::is_control) {
                return Err(ApiError::invalid(
                    "event_type",
                    format!("event_type must be an event type of 1 to {MAX_EVENT_TYPE_LEN} characters"),
                ));
            }
        }
        let filters = format!(
            "tenant_id={}\nevent_type={}",
            tenant_id.as_deref().unwrap_or(""),
            event_type.as_deref().unwrap_or("")
        );
        let after = match query_param(req.query, "cursor") {
            None => None,
            Some(c) => Some(SubscriptionId::new(
                cursor::read(&c, &filters).map_err(|e| ApiError::invalid("cursor", e.to_string()))?,
            )),
        };
        let filter = match (tenant_id, event_type) {
            (tenant_id, Some(t)) => SubscriptionFilter::Routes(routing::keys_for(tenant_id.as_deref(), &t)),
            (Some(t), None) => SubscriptionFilter::Tenant(t),
            (None, None) => SubscriptionFilter::All,
        };
        let page = self.hookline.stores.subscriptions.page(&filter, limit, after.as_ref()).await?;
        Ok(Response::json(
            200,
            &SubscriptionList {
                items: page.items.iter().map(|s| shown(s, None)).collect(),
                next_cursor: page.next_after.map(|a| cursor::issue(a.as_str(), &filters)),
            },
        ))
    }

    pub(super) async fn get_subscription(&self, id: &SubscriptionId) -> ApiResult {
        Ok(Response::json(200, &shown(&self.load_subscription(id).await?, None)))
    }

    pub(super) async fn patch_subscription(&self, id: &SubscriptionId, req: &Request<'_>) -> ApiResult {
        let body: PatchBody = parse(req.body, false)?;
        let new_url = match body.callback_url {
            Patch::Absent => None,
            Patch::Null => return Err(ApiError::invalid("callback_url", "cannot be removed")),
            Patch::Value(u) => Some(self.check_url(&u).await?),
        };
        let mut sub = self.load_subscription(id).await?;
        let version = sub.version;
        let mut reverify = false;
        if let Some(u) = new_url.filter(|u| *u != sub.callback_url) {
            sub.callback_url = u;
            sub.verified = false;
            sub.verification_error = None;
            reverify = true;
        }
        sub.event_types = match body.event_types {
            Patch::Absent => sub.event_types,
            Patch::Null => return Err(ApiError::invalid("event_types", "cannot be removed")),
            Patch::Value(t) => event_types(t)?,
        };
        sub.tenant_id = match body.tenant_id {
            Patch::Absent => sub.tenant_id,
            Patch::Null => None,
            Patch::Value(t) => tenant(Some(t))?,
        };
        sub.description = match body.description {
            Patch::Absent => sub.description,
            Patch::Null => None,
            Patch::Value(d) => Some(d),
        };
        sub.headers = match body.headers {
            Patch::Absent => sub.headers,
            Patch::Null => BTreeMap::new(),
            Patch::Value(h) => headers(Some(h))?,
        };
        sub.retry_policy = match body.retry_policy {
            Patch::Absent => sub.retry_policy,
            Patch::Null => retry_policy(None, &self.hookline.config)?,
            Patch::Value(p) => retry_policy(Some(p), &self.hookline.config)?,
        };
        sub.payload_format = body.payload_format.apply(sub.payload_format, PayloadFormat::default);
        sub.active = body.active.apply(sub.active, || true);
        sub.version += 1;
        sub.updated_at = Utc::now();
        if !self.hookline.stores.subscriptions.update(&sub, version).await? {
            return Err(ApiError::conflict("the subscription changed meanwhile; retry"));
        }
        self.hookline.subscription_cache.invalidate().await;
        let sub = if reverify { self.start_verification(sub).await } else { sub };
        Ok(Response::json(200, &shown(&sub, None)))
    }

    pub(super) async fn delete_subscription(&self, id: &SubscriptionId) -> ApiResult {
        if !self.hookline.stores.subscriptions.delete(id).await? {
            return Err(ApiError::not_found("subscription", id));
        }
        self.hookline.subscription_cache.invalidate().await;
        Ok(Response { status: 204, content_type: "application/json", body: vec![] })
    }

    pub(super) async fn verify_now(&self, id: &SubscriptionId) -> ApiResult {
        let sub = verify::verify(&self.hookline, id).await?.ok_or_else(|| ApiError::not_found("subscription", id))?;
        Ok(Response::json(200, &shown(&sub, None)))
    }

    pub(super) async fn rotate_secret(&self, id: &SubscriptionId, req: &Request<'_>) -> ApiResult {
        let body: RotateBody = parse(req.body, true)?;
        let overlap = match body.overlap_seconds {
            None => self.hookline.config.rotation_overlap,
            Some(n) if (0..=7 * 86_400).contains(&n) => chrono::Duration::seconds(n),
            Some(_) => return Err(ApiError::invalid("overlap_seconds", "must be an integer between 0 and 604800")),
        };
        for _ in 0..5 {
            let mut sub = self.load_subscription(id).await?;
            let version = sub.version;
            let secret = Secret::generate();
            sub.rotate_secret(secret.clone(), Utc::now(), overlap);
            sub.version += 1;
            sub.updated_at = Utc::now();
            if self.hookline.stores.subscriptions.update(&sub, version).await? {
                self.hookline.subscription_cache.invalidate().await;
                tracing::info!(subscription_id = %id, "signing secret rotated");
                return Ok(Response::json(200, &shown(&sub, Some(&secret))));
            }
        }
        Err(ApiError::conflict("the subscription kept changing; retry"))
    }
}
