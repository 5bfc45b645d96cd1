//! `/v1/subscriptions`: create, read, patch, delete, verify, rotate the
//! signing secret, reindex after an upgrade; an ordered subscription's
//! blocked lanes (shown by `GET`, skipped by ops). Bodies are typed; a PATCH
//! tells absent, `null` and a value apart ([`Patch`]).

use super::error::ErrorCode;
use std::collections::BTreeMap;

use chrono::Utc;
use serde::{Deserialize, Serialize};

use super::reindex::{self, Walk};
use super::routes::Call;
use super::scope::tenant_filter;
use super::{cursor, parse, query_param, Api, ApiError, ApiResult, Patch, Request, Response, Verification};
use shared::audit::{Action, AuditRecord};
use shared::bounds::MAX_SUBSCRIPTION_PATTERNS;
use shared::context::Config;
use shared::envelope::{check_id, MAX_EVENT_TYPE_LEN};
use shared::health::{BreakerState, Health, WindowSummary, WINDOW_MINUTES};
use shared::ids::{self, SubscriptionId, TenantId};
use shared::payload;
use shared::ports::SubscriptionFilter;
use shared::retry::{RetryPolicy, RetryPolicyInput};
use shared::routing;
use shared::signing::Secret;
use shared::ssrf;
use shared::stage::subscriptions::{self as manage, ManageError};
use shared::stage::verify;
use shared::subscription::{
    self, check_custom_header, validate_pattern, FieldError, PayloadFormat, SigningKey, Subscription,
};

/// `POST /v1/subscriptions/{id}/lanes/{partition_key}/skip`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LaneSkipBody {
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    tenant_id: Option<String>,
}

/// One blocked lane as `GET /v1/subscriptions/{id}` shows it.
#[derive(Serialize)]
struct BlockedLaneView {
    partition_key: String,
    tenant_id: Option<String>,
    since: chrono::DateTime<Utc>,
    reason: String,
}

impl BlockedLaneView {
    fn of(b: &shared::ordering::BlockedLane) -> Self {
        BlockedLaneView {
            partition_key: b.partition.key.clone(),
            tenant_id: b.partition.tenant().map(str::to_string),
            since: b.since,
            reason: b.reason.clone(),
        }
    }
}

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
    retry_policy: Option<RetryPolicyInput>,
    #[serde(default)]
    dead_letter_on: Option<Vec<i64>>,
    #[serde(default)]
    payload_format: Option<PayloadFormat>,
    #[serde(default)]
    data_fields: Option<Vec<String>>,
    #[serde(default)]
    ordering: Option<shared::ordering::Ordering>,
    #[serde(default)]
    on_dead_letter: Option<shared::ordering::OnDeadLetter>,
    #[serde(default)]
    max_in_flight: Option<i64>,
    #[serde(default)]
    rate_limit: Option<f64>,
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
    retry_policy: Patch<RetryPolicyInput>,
    #[serde(default)]
    dead_letter_on: Patch<Vec<i64>>,
    #[serde(default)]
    payload_format: Patch<PayloadFormat>,
    #[serde(default)]
    data_fields: Patch<Vec<String>>,
    #[serde(default)]
    ordering: Patch<shared::ordering::Ordering>,
    #[serde(default)]
    on_dead_letter: Patch<shared::ordering::OnDeadLetter>,
    #[serde(default)]
    max_in_flight: Patch<i64>,
    #[serde(default)]
    rate_limit: Patch<f64>,
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

/// A subscription's `health` as `GET /v1/subscriptions/{id}` and each item
/// of `GET /v1/subscriptions` show it.
#[derive(Serialize)]
struct HealthView {
    /// `closed`, `open` or `half_open`.
    breaker: BreakerState,
    /// Open: when the next probe may go; half-open: when the probe times out.
    breaker_until: Option<chrono::DateTime<Utc>>,
    consecutive_failures: u32,
    last_error: Option<String>,
    last_error_at: Option<chrono::DateTime<Utc>>,
    last_success_at: Option<chrono::DateTime<Utc>>,
    /// The window the figures below cover.
    window_minutes: i64,
    #[serde(flatten)]
    window: WindowSummary,
}

impl HealthView {
    fn of(h: &Health, now: chrono::DateTime<Utc>) -> Self {
        HealthView {
            breaker: h.breaker,
            breaker_until: h.until,
            consecutive_failures: h.consecutive_failures,
            last_error: h.last_error.clone(),
            last_error_at: h.last_error_at,
            last_success_at: h.last_success_at,
            window_minutes: WINDOW_MINUTES,
            window: h.window.summary(now),
        }
    }
}

/// A subscription as the API shows it, with its secret only when it was
/// just created or rotated.
fn shown(sub: &Subscription, secret: Option<&Secret>) -> serde_json::Value {
    let mut v = sub.to_public_json();
    if let Some(s) = secret {
        v["secret"] = serde_json::json!(s.expose());
    }
    v
}

/// The API's answer to a change the store did not take.
fn managed(e: ManageError<ApiError>, id: &SubscriptionId) -> ApiError {
    match e {
        ManageError::NotFound => ApiError::not_found("subscription", id),
        ManageError::KeptChanging => ApiError::conflict(&e.to_string()),
        ManageError::Refused(e) => e,
        ManageError::Store(e) => e.into(),
    }
}

/// `data_fields` cuts down the `data` of a `contract-webhook` body; with
/// another payload format it would be silently ignored, so it is refused.
fn payload_fits(sub: &Subscription) -> Result<(), ApiError> {
    if sub.data_fields.is_some() && sub.payload_format != PayloadFormat::ContractWebhook {
        return Err(ApiError::invalid(
            "data_fields",
            "applies only to payload_format \"contract-webhook\"; set that format too, or remove data_fields",
        ));
    }
    Ok(())
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

/// A subscription's `max_in_flight`, read as any integer so that zero and
/// negative values get the range error, not a type error.
fn max_in_flight(n: i64) -> Result<u32, ApiError> {
    subscription::validate_max_in_flight(u32::try_from(n).unwrap_or(0)).map_err(|_| {
        limit_error(FieldError::new(
            "max_in_flight",
            format!("must be between 1 and {}, got {n}", subscription::MAX_IN_FLIGHT_CEILING),
        ))
    })
}

/// A subscription's `rate_limit`, deliveries per second.
fn rate_limit(r: f64) -> Result<f64, ApiError> {
    subscription::validate_rate_limit(r).map_err(limit_error)
}

/// A delivery limit out of its range: `422 invalid_limit` naming the field.
fn limit_error(e: FieldError) -> ApiError {
    ApiError::new(ErrorCode::InvalidLimit, e.to_string()).on(e.field)
}

/// A subscription's `tenant_id`: the producer id rule ([`check_id`]), so it
/// can equal an event's tenant.
pub(super) fn tenant(t: Option<String>) -> Result<Option<TenantId>, ApiError> {
    if let Some(t) = &t {
        if t.trim().is_empty() {
            return Err(FieldError::new("tenant_id", "must not be empty").into());
        }
        check_id(t).map_err(|e| ApiError::invalid("tenant_id", e.to_string()))?;
    }
    Ok(t.map(TenantId::new))
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
            .map_err(|e| ApiError::new(ErrorCode::InvalidHeader, e.to_string()).on(format!("headers.{k}")))?;
    }
    Ok(h)
}

/// A retry policy: well-formed ([`RetryPolicyInput::resolve`]: `400
/// invalid_field` naming the member, as before explicit schedules; with
/// `schedule_ms`, `422 invalid_retry_schedule` naming it, e.g.
/// `retry_policy.schedule_ms[2]`), and no longer than the event retention
/// ([`RetryPolicy::check_fits_retention`], `422 retry_schedule_too_long`
/// naming `retry_policy`, or `retry_policy.schedule_ms`). Absent or `null`
/// is the configured default.
fn retry_policy(p: Option<RetryPolicyInput>, config: &Config) -> Result<RetryPolicy, ApiError> {
    let Some(p) = p else { return Ok(config.default_retry_policy.clone()) };
    let scheduled = p.schedule_ms.is_some();
    let p = p.resolve().map_err(|e| {
        if scheduled {
            ApiError::new(ErrorCode::InvalidRetrySchedule, e.to_string()).on(e.field)
        } else {
            e.into()
        }
    })?;
    p.check_fits_retention(config.retention)
        .map_err(|e| ApiError::new(ErrorCode::RetryScheduleTooLong, e.to_string()).on(e.field()))?;
    Ok(p)
}

/// A subscription's `dead_letter_on` ([`subscription::validate_dead_letter_on`]):
/// `422 invalid_dead_letter_on` naming the field or the entry at fault.
fn dead_letter_on(statuses: &[i64]) -> Result<Vec<u16>, ApiError> {
    subscription::validate_dead_letter_on(statuses)
        .map_err(|e| ApiError::new(ErrorCode::InvalidDeadLetterOn, e.to_string()).on(e.field))
}

impl Api {
    /// `POST /v1/subscriptions`. A tenant-bound caller's subscription is
    /// its tenant's (`tenant_id` absent or its own; another is a `403`): it
    /// cannot create one of every tenant.
    pub(super) async fn create_subscription(&self, c: &Call<'_>) -> ApiResult {
        let req = &c.req;
        let body: CreateBody = parse(req.body, false)?;
        let callback_url = self.check_url(&body.callback_url).await?;
        let now = Utc::now();
        let secret = Secret::generate();
        let sub = Subscription {
            id: ids::new_subscription_id(),
            callback_url,
            event_types: event_types(body.event_types)?,
            tenant_id: tenant_filter(&c.caller, tenant(body.tenant_id)?, "tenant_id")?,
            description: body.description,
            headers: headers(body.headers)?,
            retry_policy: retry_policy(body.retry_policy, &self.hookline.config)?,
            dead_letter_on: dead_letter_on(body.dead_letter_on.as_deref().unwrap_or_default())?,
            payload_format: body.payload_format.unwrap_or_default(),
            data_fields: body.data_fields.map(|f| payload::validate_data_fields(&f).map(|()| f)).transpose()?,
            ordering: body.ordering.unwrap_or_default(),
            on_dead_letter: body.on_dead_letter.unwrap_or_default(),
            max_in_flight: body.max_in_flight.map(max_in_flight).transpose()?,
            rate_limit: body.rate_limit.map(rate_limit).transpose()?,
            active: body.active.unwrap_or(true),
            verified: false,
            verification_error: None,
            disabled_reason: None,
            disabled_at: None,
            signing_keys: vec![SigningKey { secret: secret.clone(), expires_at: None }],
            created_at: now,
            updated_at: now,
            version: 1,
        };
        payload_fits(&sub)?;
        let actor = c.caller.actor.clone();
        manage::create(&self.hookline, &sub, &actor).await?;
        let sub = self.start_verification(sub, &actor).await;
        Ok(Response::json(201, &shown(&sub, Some(&secret))))
    }

    /// A callback URL that passes the address policy, also once resolved
    /// (`422 invalid_callback_url` otherwise).
    async fn check_url(&self, url: &str) -> Result<String, ApiError> {
        let policy = self.hookline.config.address_policy;
        let refused =
            |e: &dyn std::fmt::Display| ApiError::new(ErrorCode::InvalidCallbackUrl, e.to_string()).on("callback_url");
        let parsed = ssrf::check_callback_url(url, policy).map_err(|e| refused(&e))?;
        ssrf::check_callback_resolves(&parsed, policy).await.map_err(|e| refused(&e))?;
        Ok(url.trim().to_string())
    }

    /// Starts the handshake of `sub` on behalf of `actor` (the record of its
    /// outcome names them).
    async fn start_verification(&self, sub: Subscription, actor: &str) -> Subscription {
        match self.verification {
            Verification::Background => {
                let h = self.hookline.clone();
                let id = sub.id.clone();
                let actor = actor.to_string();
                tokio::spawn(async move {
                    if let Err(e) = verify::verify_as(&h, &id, &actor).await {
                        tracing::error!(subscription_id = %id, error = %e, "verification could not be stored");
                    }
                });
                sub
            }
            Verification::Inline => match verify::verify_as(&self.hookline, &sub.id, actor).await {
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
    ///
    /// A tenant-bound caller lists its tenant's subscriptions only (the
    /// filter `tenant_id` is forced to its tenant; another is a `403`), and
    /// with `event_type` only its tenant's, not the global ones.
    pub(super) async fn list_subscriptions(&self, c: &Call<'_>) -> ApiResult {
        let req = &c.req;
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
        let tenant_id = tenant_filter(&c.caller, tenant_id, "tenant_id")?;
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
            tenant_id.as_ref().map(|t| t.as_str()).unwrap_or(""),
            event_type.as_deref().unwrap_or("")
        );
        let after = match query_param(req.query, "cursor") {
            None => None,
            Some(c) => Some(SubscriptionId::new(
                cursor::read(&self.cursor_key(), &c, &filters)
                    .map_err(|e| ApiError::invalid("cursor", e.to_string()))?,
            )),
        };
        let filter = match (tenant_id, event_type) {
            (tenant_id, Some(t)) => SubscriptionFilter::Routes(
                routing::keys_for(tenant_id.as_ref().map(|t| t.as_str()), &t)
                    .into_iter()
                    .filter(|k| c.caller.tenant.is_none() || k.scope != routing::Scope::Global)
                    .collect(),
            ),
            (Some(t), None) => SubscriptionFilter::Tenant(t),
            (None, None) => SubscriptionFilter::All,
        };
        let page = self.hookline.stores.subscriptions.page(&filter, limit, after.as_ref()).await?;
        let ids: Vec<SubscriptionId> = page.items.iter().map(|s| s.id.clone()).collect();
        let healths = self.hookline.stores.health.get_many(&ids).await?;
        Ok(Response::json(
            200,
            &SubscriptionList {
                items: page
                    .items
                    .iter()
                    .zip(healths)
                    .map(|(s, h)| self.with_health(shown(s, None), &s.id, h))
                    .collect(),
                next_cursor: page.next_after.map(|a| cursor::issue(&self.cursor_key(), a.as_str(), &filters)),
            },
        ))
    }

    pub(super) async fn get_subscription(&self, id: &SubscriptionId) -> ApiResult {
        let sub = self.load_subscription(id).await?;
        let mut shown = shown(&sub, None);
        let health = self.hookline.stores.health.get(id).await?;
        if sub.ordering == shared::ordering::Ordering::Partition {
            // The oldest few, through the blocked lanes' own key.
            let blocked = self.hookline.stores.order.blocked(id, shared::ordering::BLOCKED_LANES_SHOWN).await?;
            shown["blocked_lanes"] =
                serde_json::to_value(blocked.iter().map(BlockedLaneView::of).collect::<Vec<_>>()).expect("lanes");
        }
        Ok(Response::json(200, &self.with_health(shown, id, health)))
    }

    /// `POST /v1/subscriptions/{id}/lanes/{partition_key}/skip`
    /// (`{"reason", "tenant_id"?}`): ops skip what holds one ordered lane
    /// ([`shared::stage::ordering::skip_lane`]), audited as `lane.skipped`.
    /// The partition is the subscription's tenant's, or `tenant_id`'s for a
    /// subscription of every tenant.
    pub(super) async fn skip_lane(&self, id: &SubscriptionId, key: &str, c: &Call<'_>) -> ApiResult {
        let req = &c.req;
        let body: LaneSkipBody = parse(req.body, true)?;
        let reason = super::query::reason(body.reason.as_deref())?;
        let sub = self.load_subscription(id).await?;
        if sub.ordering != shared::ordering::Ordering::Partition {
            return Err(ApiError::new(
                ErrorCode::NotOrdered,
                format!("subscription {id} is not ordered: it has no lanes"),
            ));
        }
        let named = match tenant(body.tenant_id)? {
            None => None,
            named => tenant_filter(&c.caller, named, "tenant_id")?,
        };
        let tenant = match (&sub.tenant_id, named) {
            (Some(own), Some(other)) if *own != other => {
                return Err(ApiError::invalid("tenant_id", "the subscription has its own tenant"))
            }
            (own, given) => given.or(own.clone()),
        };
        let partition = shared::ordering::Partition::of(tenant.as_ref().map(TenantId::as_str), key);
        let lane = shared::ordering::Lane { subscription_id: id.clone(), partition };
        use shared::stage::ordering::{LaneSkipError, LaneSkipped};
        let skipped = match shared::stage::ordering::skip_lane(&self.hookline, &lane).await {
            Ok(s) => s,
            Err(LaneSkipError::Store(e)) => return Err(e.into()),
            Err(e @ LaneSkipError::NotBlocked) => return Err(ApiError::new(ErrorCode::LaneNotBlocked, e.to_string())),
            Err(e @ LaneSkipError::DeadLetter(_)) => {
                return Err(ApiError::new(ErrorCode::LaneHeldByDeadLetter, e.to_string()))
            }
        };
        let details = match &skipped {
            LaneSkipped::Gap { from, to } => serde_json::json!({"skipped": "gap", "from_seq": from, "to_seq": to}),
            LaneSkipped::Head { saga_id } => serde_json::json!({"skipped": "head", "saga_id": saga_id}),
        };
        let details = serde_json::json!({"partition_key": key, "tenant_id": tenant})
            .as_object()
            .cloned()
            .into_iter()
            .flatten()
            .chain(details.as_object().cloned().into_iter().flatten())
            .collect::<serde_json::Map<_, _>>();
        tracing::warn!(subscription_id = %id, partition_key = %key, details = %serde_json::Value::Object(details.clone()), "ordered lane skipped by ops");
        let rec = AuditRecord::new(Action::LaneSkipped, c.caller.actor.clone())
            .subscription(id)
            .tenant(sub.tenant_id.as_ref())
            .reason(&reason)
            .details(serde_json::Value::Object(details.clone()));
        self.hookline.audit(rec).await;
        Ok(Response::json(200, &serde_json::Value::Object(details)))
    }

    /// A shown subscription with its `health` (the default, healthy record
    /// when none is stored).
    fn with_health(
        &self,
        mut shown: serde_json::Value,
        id: &SubscriptionId,
        stored: Option<Health>,
    ) -> serde_json::Value {
        let mut health = stored.unwrap_or_default();
        // In `hookline serve` the deliveries run in this process: add the
        // attempts counted since the last flush.
        health.window.merge(&self.hookline.health_cache.pending(id), Utc::now());
        shown["health"] = serde_json::to_value(HealthView::of(&health, Utc::now())).expect("health serializes");
        shown
    }

    /// `PATCH /v1/subscriptions/{id}`. A tenant-bound caller cannot move
    /// the subscription to another tenant or make it global (`403` naming
    /// `tenant_id`).
    pub(super) async fn patch_subscription(&self, id: &SubscriptionId, c: &Call<'_>) -> ApiResult {
        let req = &c.req;
        let body: PatchBody = parse(req.body, false)?;
        // Every value is checked before anything is read or written.
        let new_url = match body.callback_url {
            Patch::Absent => None,
            Patch::Null => return Err(ApiError::invalid("callback_url", "cannot be removed")),
            Patch::Value(u) => Some(self.check_url(&u).await?),
        };
        let event_types = match body.event_types {
            Patch::Absent => None,
            Patch::Null => return Err(ApiError::invalid("event_types", "cannot be removed")),
            Patch::Value(t) => Some(event_types(t)?),
        };
        let tenant_id = match body.tenant_id {
            Patch::Value(t) => {
                Patch::Value(tenant_filter(&c.caller, tenant(Some(t))?, "tenant_id")?.expect("a value stays a value"))
            }
            Patch::Null if c.caller.tenant.is_some() => return Err(super::scope::other_tenant("tenant_id")),
            Patch::Null => Patch::Null,
            Patch::Absent => Patch::Absent,
        };
        let headers = match body.headers {
            Patch::Value(h) => Patch::Value(headers(Some(h))?),
            other => other,
        };
        let retry = match body.retry_policy {
            Patch::Absent => None,
            Patch::Null => Some(retry_policy(None, &self.hookline.config)?),
            Patch::Value(p) => Some(retry_policy(Some(p), &self.hookline.config)?),
        };
        let dead_letters = match body.dead_letter_on {
            Patch::Absent => None,
            Patch::Null => Some(Vec::new()),
            Patch::Value(d) => Some(dead_letter_on(&d)?),
        };
        let max_in_flight = match body.max_in_flight {
            Patch::Value(n) => Patch::Value(max_in_flight(n)?),
            Patch::Null => Patch::Null,
            Patch::Absent => Patch::Absent,
        };
        let rate_limit = match body.rate_limit {
            Patch::Value(r) => Patch::Value(rate_limit(r)?),
            other => other,
        };
        let data_fields = match body.data_fields {
            Patch::Value(f) => Patch::Value(payload::validate_data_fields(&f).map(|()| f)?),
            other => other,
        };
        // Applied to the stored subscription, again to its new version if
        // another writer changed it meanwhile (`manage::change`).
        let actor = c.caller.actor.clone();
        let changed = manage::change(&self.hookline, id, &actor, |sub| {
            if let Some(u) = &new_url {
                sub.callback_url = u.clone();
            }
            if let Some(t) = &event_types {
                sub.event_types = t.clone();
            }
            sub.tenant_id = tenant_id.clone().apply_option(sub.tenant_id.take());
            sub.description = body.description.clone().apply_option(sub.description.take());
            sub.headers = headers.clone().apply(std::mem::take(&mut sub.headers), BTreeMap::new);
            if let Some(p) = &retry {
                sub.retry_policy = p.clone();
            }
            if let Some(d) = &dead_letters {
                sub.dead_letter_on = d.clone();
            }
            sub.payload_format = body.payload_format.clone().apply(sub.payload_format, PayloadFormat::default);
            sub.data_fields = data_fields.clone().apply_option(sub.data_fields.take());
            sub.ordering = body.ordering.clone().apply(sub.ordering, Default::default);
            sub.on_dead_letter = body.on_dead_letter.clone().apply(sub.on_dead_letter, Default::default);
            payload_fits(sub)?;
            sub.max_in_flight = max_in_flight.clone().apply_option(sub.max_in_flight);
            sub.rate_limit = rate_limit.clone().apply_option(sub.rate_limit);
            sub.active = body.active.clone().apply(sub.active, || true);
            Ok(())
        })
        .await
        .map_err(|e| managed(e, id))?;
        let sub = if changed.reverify {
            self.start_verification(changed.subscription, &actor).await
        } else {
            changed.subscription
        };
        Ok(Response::json(200, &shown(&sub, None)))
    }

    pub(super) async fn delete_subscription(&self, id: &SubscriptionId, c: &Call<'_>) -> ApiResult {
        if !manage::delete(&self.hookline, id, &c.caller.actor).await? {
            return Err(ApiError::not_found("subscription", id));
        }
        Ok(Response {
            status: 204,
            content_type: "application/json",
            body: vec![],
            retry_after: None,
            idempotent_replay: false,
        })
    }

    pub(super) async fn verify_now(&self, id: &SubscriptionId, c: &Call<'_>) -> ApiResult {
        let sub = verify::verify_as(&self.hookline, id, &c.caller.actor)
            .await?
            .ok_or_else(|| ApiError::not_found("subscription", id))?;
        Ok(Response::json(200, &shown(&sub, None)))
    }

    pub(super) async fn rotate_secret(&self, id: &SubscriptionId, c: &Call<'_>) -> ApiResult {
        let body: RotateBody = parse(c.req.body, true)?;
        let overlap = match body.overlap_seconds {
            None => self.hookline.config.rotation_overlap,
            Some(n) if (0..=7 * 86_400).contains(&n) => chrono::Duration::seconds(n),
            Some(_) => return Err(ApiError::invalid("overlap_seconds", "must be an integer between 0 and 604800")),
        };
        let (sub, secret) = manage::rotate_secret(&self.hookline, id, &c.caller.actor, overlap)
            .await
            .map_err(|e| managed(e.map_refused(|never| match never {}), id))?;
        Ok(Response::json(200, &shown(&sub, Some(&secret))))
    }

    /// `POST /v1/subscriptions/reindex` (`{"cursor"?, "limit"?}`, see
    /// [`super::reindex`]): one page of the repair after an upgrade
    /// ([`shared::ports::SubscriptionStore::reindex_page`]): up to `limit`
    /// stored items examined, the index entries of those stored without
    /// them written.
    pub(super) async fn reindex_subscriptions(&self, req: &Request<'_>) -> ApiResult {
        let (after, limit) = reindex::page_of(req, Walk::Subscriptions, &self.cursor_key())?;
        let page = self.hookline.stores.subscriptions.reindex_page(after.as_deref(), limit).await?;
        if page.reindexed > 0 {
            self.hookline.subscription_cache.invalidate().await;
        }
        tracing::info!(reindexed = page.reindexed, examined = page.examined, "subscriptions reindexed");
        Ok(reindex::answer(page, Walk::Subscriptions, &self.cursor_key()))
    }
}

/// For the fuzzer ([`crate::fuzzing`]): `body` read as the body of each
/// route here and put through the checks its handler makes before any
/// store or network call (the URL's address policy without resolving it);
/// how many of the bodies were accepted. Never panics, whatever the bytes.
pub(crate) fn fuzz_bodies(body: &[u8], config: &Config) -> usize {
    let create = || -> Result<(), ApiError> {
        let b: CreateBody = parse(body, false)?;
        ssrf::check_callback_url(&b.callback_url, config.address_policy)
            .map_err(|e| ApiError::new(ErrorCode::InvalidCallbackUrl, e.to_string()))?;
        event_types(b.event_types)?;
        tenant(b.tenant_id)?;
        headers(b.headers)?;
        retry_policy(b.retry_policy, config)?;
        dead_letter_on(b.dead_letter_on.as_deref().unwrap_or_default())?;
        b.data_fields.map(|f| payload::validate_data_fields(&f)).transpose()?;
        b.max_in_flight.map(max_in_flight).transpose()?;
        b.rate_limit.map(rate_limit).transpose()?;
        Ok(())
    };
    let patch = || -> Result<(), ApiError> {
        let b: PatchBody = parse(body, false)?;
        if let Patch::Value(u) = &b.callback_url {
            ssrf::check_callback_url(u, config.address_policy)
                .map_err(|e| ApiError::new(ErrorCode::InvalidCallbackUrl, e.to_string()))?;
        }
        if let Patch::Value(t) = b.event_types {
            event_types(t)?;
        }
        if let Patch::Value(t) = b.tenant_id {
            tenant(Some(t))?;
        }
        if let Patch::Value(h) = b.headers {
            headers(Some(h))?;
        }
        if let Patch::Value(p) = b.retry_policy {
            retry_policy(Some(p), config)?;
        }
        if let Patch::Value(d) = b.dead_letter_on {
            dead_letter_on(&d)?;
        }
        if let Patch::Value(f) = b.data_fields {
            payload::validate_data_fields(&f)?;
        }
        if let Patch::Value(n) = b.max_in_flight {
            max_in_flight(n)?;
        }
        if let Patch::Value(r) = b.rate_limit {
            rate_limit(r)?;
        }
        Ok(())
    };
    let skip = || -> Result<(), ApiError> {
        let b: LaneSkipBody = parse(body, true)?;
        super::query::reason(b.reason.as_deref())?;
        tenant(b.tenant_id)?;
        Ok(())
    };
    let rotate = || parse::<RotateBody>(body, true).map(|_| ());
    [create(), patch(), skip(), rotate()].iter().filter(|r| r.is_ok()).count()
}

/// This module's part of the OpenAPI document ([`super::openapi`]): its
/// routes' paths and the wire types they use.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi()]
    struct Part;
    <Part as utoipa::OpenApi>::openapi()
}
