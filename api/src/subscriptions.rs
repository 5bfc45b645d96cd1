//! `/v1/subscriptions`: create, read, patch, delete, verify, rotate the
//! signing secret, reindex after an upgrade; an ordered subscription's
//! blocked lanes (shown by `GET`, skipped by ops). Bodies, the listing's
//! query and every answer are `hookline_wire::subscriptions` types; a
//! create or patch reports every bad field ([`checks`]), and writes nothing
//! then. Stored records become wire types in [`view`].

mod checks;
mod spec;
mod view;

use super::error::ErrorCode;

use chrono::Utc;
use hookline_wire::subscriptions::{
    self as wire, CreateSubscription, LaneSkipped, ListSubscriptions, PatchSubscription, RotateSecret, SkipLane,
    SkippedKind, SubscriptionWithSecret,
};
use hookline_wire::Page;

use super::reindex::{self, Walk};
use super::routes::Call;
use super::scope::tenant_filter;
use super::{cursor, parse, query, Api, ApiError, ApiResult, Patch, Request, Response, Verification};
use checks::Issues;
use shared::audit::{Action, AuditRecord};
use shared::context::Config;
use shared::envelope::{check_id, MAX_EVENT_TYPE_LEN};
use shared::health::Health;
use shared::ids::{self, SubscriptionId, TenantId};
use shared::ports::SubscriptionFilter;
use shared::routing;
use shared::signing::Secret;
use shared::ssrf;
use shared::stage::subscriptions::{self as manage, ManageError};
use shared::stage::verify;
use shared::subscription::{FieldError, PayloadFormat, SigningKey, Subscription};

pub(crate) use spec::openapi;
pub(crate) use view::on_dead_letter;

/// The API's answer to a change the store did not take.
fn managed(e: ManageError<ApiError>, id: &SubscriptionId) -> ApiError {
    match e {
        ManageError::NotFound => ApiError::not_found("subscription", id),
        ManageError::KeptChanging => ApiError::conflict(&e.to_string()),
        ManageError::Refused(e) => e,
        ManageError::Store(e) => e.into(),
    }
}

/// A subscription's `tenant_id`: the producer id rule ([`check_id`]), so it
/// can equal an event's tenant (`422 invalid_field` naming `tenant_id`).
pub(super) fn tenant(t: Option<String>) -> Result<Option<TenantId>, ApiError> {
    if let Some(t) = &t {
        if t.trim().is_empty() {
            return Err(FieldError::new("tenant_id", "must not be empty").into());
        }
        check_id(t).map_err(|e| ApiError::invalid("tenant_id", e.to_string()))?;
    }
    Ok(t.map(TenantId::new))
}

/// A callback URL that passes the address policy without resolving it
/// (`422 invalid_callback_url` naming `callback_url` otherwise).
fn url_shape(url: &str, config: &Config) -> Result<(), ApiError> {
    if checks::destination_arn(url, config)?.is_some() {
        return Ok(());
    }
    ssrf::check_callback_url(url, config.address_policy).map(drop).map_err(|e| url_refused(&e))
}

/// `422 invalid_callback_url` naming `callback_url`, saying why.
fn url_refused(e: &dyn std::fmt::Display) -> ApiError {
    ApiError::new(ErrorCode::InvalidCallbackUrl, e.to_string()).on("callback_url")
}

impl Api {
    /// `POST /v1/subscriptions`. A tenant-bound caller's subscription is
    /// its tenant's (`tenant_id` absent or its own; another is a `403`): it
    /// cannot create one of every tenant. Every bad field is reported, and
    /// nothing is stored then.
    pub(super) async fn create_subscription(&self, c: &Call<'_>) -> ApiResult {
        query::none(c.req.query)?;
        let body: CreateSubscription = parse(c.req.body, false)?;
        let mut v = Issues::default();
        // No callback: pull-only, with `pull: true` (checked below, with
        // what pull-only cannot combine with).
        let callback_url = match &body.callback_url {
            Some(url) => v.take(self.check_url(url).await),
            None => Some(String::new()),
        };
        let f = checks::create(&body, &self.hookline.config, &mut v);
        if let Some(url) = &callback_url {
            v.take(checks::destination_headers(url, &f.headers));
        }
        let callback_given = callback_url.as_ref().is_none_or(|u| !u.is_empty());
        let now = Utc::now();
        let secret = Secret::generate();
        let sub = Subscription {
            id: ids::new_subscription_id(),
            callback_url: callback_url.unwrap_or_default(),
            event_types: f.event_types,
            tenant_id: tenant_filter(&c.caller, f.tenant_id, "tenant_id")?,
            description: body.description,
            headers: f.headers,
            retry_policy: f.retry_policy.unwrap_or_else(|| self.hookline.config.default_retry_policy.clone()),
            dead_letter_on: f.dead_letter_on,
            payload_format: f.payload_format,
            data_fields: f.data_fields,
            ordering: f.ordering,
            on_dead_letter: f.on_dead_letter,
            max_in_flight: f.max_in_flight,
            rate_limit: f.rate_limit,
            active: body.active.unwrap_or(true),
            verified: false,
            verification_error: None,
            disabled_reason: None,
            disabled_at: None,
            signing_keys: vec![SigningKey { secret: secret.clone(), expires_at: None }],
            created_at: now,
            updated_at: now,
            version: 1,
            auto_requeue: body.auto_requeue.unwrap_or(false),
            ack_timeout_secs: f.ack_timeout_secs,
            pull: body.pull.unwrap_or(false),
            verification_token: None,
        };
        // A bad URL is reported once, by its own check.
        for e in sub.destination_issues() {
            if !(callback_given && e.field == "callback_url") {
                v.push(e.into());
            }
        }
        v.check()?;
        // Pull-only: no endpoint to verify, verified as created.
        let sub = Subscription { verified: sub.is_pull_only(), ..sub };
        let actor = c.caller.actor.clone();
        manage::create(&self.hookline, &sub, &actor).await?;
        let sub = if sub.is_pull_only() { sub } else { self.start_verification(sub, &actor).await };
        let shown = self.shown(&sub, None);
        Ok(Response::json(201, &SubscriptionWithSecret { subscription: shown, secret: secret.expose().to_string() }))
    }

    /// A callback URL that passes the address policy, also once resolved
    /// (`422 invalid_callback_url` otherwise).
    async fn check_url(&self, url: &str) -> Result<String, ApiError> {
        if let Some(arn) = checks::destination_arn(url, &self.hookline.config)? {
            return Ok(arn);
        }
        let policy = self.hookline.config.address_policy;
        let parsed = ssrf::check_callback_url(url, policy).map_err(|e| url_refused(&e))?;
        ssrf::check_callback_resolves(&parsed, policy).await.map_err(|e| url_refused(&e))?;
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
    /// Every bad parameter is reported.
    ///
    /// A tenant-bound caller lists its tenant's subscriptions only (the
    /// filter `tenant_id` is forced to its tenant; another is a `403`), and
    /// with `event_type` only its tenant's, not the global ones.
    pub(super) async fn list_subscriptions(&self, c: &Call<'_>) -> ApiResult {
        let q: ListSubscriptions = query::typed(c.req.query)?;
        let mut v = Issues::default();
        // Read as an `i64` so that a negative limit is out of range (422), not
        // unreadable; out of `u32` is out of range too.
        let given = q.limit.map(|n| u32::try_from(n).unwrap_or(0));
        let limit = v.take(query::page_limit(given, query::DEFAULT_PAGE, query::MAX_PAGE));
        let tenant_id = v.take(tenant(q.tenant_id)).flatten();
        let event_type = q.event_type;
        if let Some(t) = &event_type {
            if t.is_empty() || t.len() > MAX_EVENT_TYPE_LEN || t.chars().any(char::is_control) {
                v.push(ApiError::invalid(
                    "event_type",
                    format!("event_type must be an event type of 1 to {MAX_EVENT_TYPE_LEN} characters"),
                ));
            }
        }
        v.check()?;
        let limit = limit.unwrap_or(query::DEFAULT_PAGE);
        let tenant_id = tenant_filter(&c.caller, tenant_id, "tenant_id")?;
        let filters = format!(
            "tenant_id={}\nevent_type={}",
            tenant_id.as_ref().map(|t| t.as_str()).unwrap_or(""),
            event_type.as_deref().unwrap_or("")
        );
        let after = self.page_after("cursor", q.cursor.as_deref(), &filters)?.map(SubscriptionId::new);
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
        let items = page.items.iter().zip(healths).map(|(s, h)| self.shown(s, h)).collect();
        let next = page.next_after.map(|a| cursor::issue(&self.cursor_key(), a.as_str(), &filters));
        Ok(Response::json(200, &Page::new(items, next)))
    }

    /// `GET /v1/subscriptions/{id}`: with its health and, ordered by
    /// partition, its oldest blocked lanes.
    pub(super) async fn get_subscription(&self, id: &SubscriptionId, c: &Call<'_>) -> ApiResult {
        query::none(c.req.query)?;
        let sub = self.load_subscription(id).await?;
        let health = self.hookline.stores.health.get(id).await?;
        let mut shown = self.shown(&sub, health);
        if sub.ordering == shared::ordering::Ordering::Partition {
            // The oldest few, through the blocked lanes' own key.
            let blocked = self.hookline.stores.order.blocked(id, shared::ordering::BLOCKED_LANES_SHOWN).await?;
            shown.blocked_lanes = Some(blocked.iter().map(view::blocked_lane).collect());
        }
        Ok(Response::json(200, &shown))
    }

    /// `POST /v1/subscriptions/{id}/lanes/{partition_key}/skip`
    /// (`{"reason", "tenant_id"?}`): ops skip what holds one ordered lane
    /// ([`shared::stage::ordering::skip_lane`]), audited as `lane.skipped`.
    /// The partition is the subscription's tenant's, or `tenant_id`'s for a
    /// subscription of every tenant.
    pub(super) async fn skip_lane(&self, id: &SubscriptionId, key: &str, c: &Call<'_>) -> ApiResult {
        let req = &c.req;
        query::none(req.query)?;
        let body: SkipLane = parse(req.body, true)?;
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
        use shared::stage::ordering::{LaneSkipError, LaneSkipped as LaneSkipped_};
        let skipped = match shared::stage::ordering::skip_lane(&self.hookline, &lane).await {
            Ok(s) => s,
            Err(LaneSkipError::Store(e)) => return Err(e.into()),
            Err(e @ LaneSkipError::NotBlocked) => return Err(ApiError::new(ErrorCode::LaneNotBlocked, e.to_string())),
            Err(e @ LaneSkipError::DeadLetter(_)) => {
                return Err(ApiError::new(ErrorCode::LaneHeldByDeadLetter, e.to_string()))
            }
        };
        let answer = LaneSkipped {
            partition_key: key.to_string(),
            tenant_id: tenant.as_ref().map(|t| t.as_str().to_string()),
            skipped: match skipped {
                LaneSkipped_::Gap { .. } => SkippedKind::Gap,
                LaneSkipped_::Head { .. } => SkippedKind::Head,
            },
            from_seq: match skipped {
                LaneSkipped_::Gap { from, .. } => Some(from),
                LaneSkipped_::Head { .. } => None,
            },
            to_seq: match skipped {
                LaneSkipped_::Gap { to, .. } => Some(to),
                LaneSkipped_::Head { .. } => None,
            },
            saga_id: match &skipped {
                LaneSkipped_::Head { saga_id } => Some(saga_id.to_string()),
                LaneSkipped_::Gap { .. } => None,
            },
        };
        let details = serde_json::to_value(&answer).expect("a lane skip serializes");
        tracing::warn!(subscription_id = %id, partition_key = %key, details = %details, "ordered lane skipped by ops");
        let rec = AuditRecord::new(Action::LaneSkipped, c.caller.actor.clone())
            .subscription(id)
            .tenant(sub.tenant_id.as_ref())
            .reason(&reason)
            .details(details);
        self.hookline.audit(rec).await;
        Ok(Response::json(200, &answer))
    }

    /// A stored subscription as the API shows it, with its `health` (the
    /// default, healthy record when none is stored).
    fn shown(&self, sub: &Subscription, stored: Option<Health>) -> wire::Subscription {
        let mut health = stored.unwrap_or_default();
        // In `hookline serve` the deliveries run in this process: add the
        // attempts counted since the last flush.
        let now = Utc::now();
        health.window.merge(&self.hookline.health_cache.pending(&sub.id), now);
        view::subscription(sub, view::health(&health, now))
    }

    /// [`Api::shown`] with the stored health read.
    async fn shown_now(&self, sub: &Subscription) -> Result<wire::Subscription, ApiError> {
        let health = self.hookline.stores.health.get(&sub.id).await?;
        Ok(self.shown(sub, health))
    }

    /// `PATCH /v1/subscriptions/{id}`. A tenant-bound caller cannot move
    /// the subscription to another tenant or make it global (`403` naming
    /// `tenant_id`). Every bad field is reported, and nothing changes then.
    pub(super) async fn patch_subscription(&self, id: &SubscriptionId, c: &Call<'_>) -> ApiResult {
        query::none(c.req.query)?;
        let body: PatchSubscription = parse(c.req.body, false)?;
        // Every value is checked before anything is read or written.
        let mut v = Issues::default();
        let new_url = match &body.callback_url {
            Patch::Value(u) => v.take(self.check_url(u).await),
            _ => None,
        };
        let ch = checks::patch(&body, &self.hookline.config, &mut v);
        v.check()?;
        let tenant_id = match ch.tenant_id {
            Patch::Value(t) => {
                Patch::Value(tenant_filter(&c.caller, Some(t), "tenant_id")?.expect("a value stays a value"))
            }
            Patch::Null if c.caller.tenant.is_some() => return Err(super::scope::other_tenant("tenant_id")),
            other => other,
        };
        // Applied to the stored subscription, again to its new version if
        // another writer changed it meanwhile (`manage::change`).
        let actor = c.caller.actor.clone();
        let changed = manage::change(&self.hookline, id, &actor, |sub| {
            if let Some(u) = &new_url {
                sub.callback_url = u.clone();
            }
            if let Some(t) = &ch.event_types {
                sub.event_types = t.clone();
            }
            sub.tenant_id = tenant_id.clone().apply_option(sub.tenant_id.take());
            sub.description = body.description.clone().apply_option(sub.description.take());
            sub.headers = ch.headers.clone().apply(std::mem::take(&mut sub.headers), Default::default);
            if let Some(p) = &ch.retry_policy {
                sub.retry_policy = p.clone();
            }
            if let Some(d) = &ch.dead_letter_on {
                sub.dead_letter_on = d.clone();
            }
            sub.payload_format = ch.payload_format.clone().apply(sub.payload_format, PayloadFormat::default);
            sub.data_fields = ch.data_fields.clone().apply_option(sub.data_fields.take());
            sub.ordering = ch.ordering.clone().apply(sub.ordering, Default::default);
            sub.on_dead_letter = ch.on_dead_letter.clone().apply(sub.on_dead_letter, Default::default);
            if sub.data_fields.is_some() && sub.payload_format != PayloadFormat::ContractWebhook {
                return Err(checks::data_fields_need_contract());
            }
            sub.max_in_flight = ch.max_in_flight.clone().apply_option(sub.max_in_flight);
            sub.rate_limit = ch.rate_limit.clone().apply_option(sub.rate_limit);
            sub.ack_timeout_secs = ch.ack_timeout_secs.clone().apply_option(sub.ack_timeout_secs);
            sub.pull = body.pull.clone().apply(sub.pull, || false);
            sub.active = body.active.clone().apply(sub.active, || true);
            sub.auto_requeue = body.auto_requeue.clone().apply(sub.auto_requeue, || false);
            checks::destination_headers(&sub.callback_url, &sub.headers)?;
            checks::pull_only(sub)
        })
        .await
        .map_err(|e| managed(e, id))?;
        let sub = if changed.reverify {
            self.start_verification(changed.subscription, &actor).await
        } else {
            changed.subscription
        };
        Ok(Response::json(200, &self.shown_now(&sub).await?))
    }

    pub(super) async fn delete_subscription(&self, id: &SubscriptionId, c: &Call<'_>) -> ApiResult {
        query::none(c.req.query)?;
        if !manage::delete(&self.hookline, id, &c.caller.actor).await? {
            return Err(ApiError::not_found("subscription", id));
        }
        Ok(Response { status: 204, content_type: "application/json", body: vec![], headers: Vec::new() })
    }

    /// `POST /v1/subscriptions/{id}/verify`: the handshake (HTTPS) or a new
    /// verification message (queue or bus); with `{"token"}`, a queue or
    /// bus owner's confirmation (`422 invalid_field` naming `token` when it
    /// is not the pending one: nothing changes, the attempt is audited).
    pub(super) async fn verify_now(&self, id: &SubscriptionId, c: &Call<'_>) -> ApiResult {
        query::none(c.req.query)?;
        let body: wire::VerifySubscription = parse(c.req.body, true)?;
        if let Some(token) = body.token {
            use shared::stage::verify_token::{confirm, ConfirmError};
            let sub = confirm(&self.hookline, id, &token, &c.caller.actor).await.map_err(|e| match e {
                ConfirmError::NotFound => ApiError::not_found("subscription", id),
                ConfirmError::Store(e) => e.into(),
                e @ (ConfirmError::NothingPending | ConfirmError::WrongToken) => {
                    ApiError::invalid("token", e.to_string())
                }
            })?;
            return Ok(Response::json(200, &self.shown_now(&sub).await?));
        }
        let sub = verify::verify_as(&self.hookline, id, &c.caller.actor)
            .await?
            .ok_or_else(|| ApiError::not_found("subscription", id))?;
        Ok(Response::json(200, &self.shown_now(&sub).await?))
    }

    pub(super) async fn rotate_secret(&self, id: &SubscriptionId, c: &Call<'_>) -> ApiResult {
        query::none(c.req.query)?;
        let body: RotateSecret = parse(c.req.body, true)?;
        let overlap = match body.overlap_seconds {
            None => self.hookline.config.rotation_overlap,
            Some(n) if (0..=7 * 86_400).contains(&n) => chrono::Duration::seconds(n),
            Some(_) => return Err(ApiError::invalid("overlap_seconds", "must be an integer between 0 and 604800")),
        };
        let (sub, secret) = manage::rotate_secret(&self.hookline, id, &c.caller.actor, overlap)
            .await
            .map_err(|e| managed(e.map_refused(|never| match never {}), id))?;
        let shown = self.shown_now(&sub).await?;
        Ok(Response::json(200, &SubscriptionWithSecret { subscription: shown, secret: secret.expose().to_string() }))
    }

    /// `POST /v1/subscriptions/reindex` (`{"cursor"?, "limit"?}`, see
    /// [`super::reindex`]): one page of the repair after an upgrade
    /// ([`shared::ports::SubscriptionStore::reindex_page`]): up to `limit`
    /// stored items examined, the index entries of those stored without
    /// them written.
    pub(super) async fn reindex_subscriptions(&self, req: &Request<'_>) -> ApiResult {
        query::none(req.query)?;
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
        let b: CreateSubscription = parse(body, false)?;
        let mut v = Issues::default();
        if let Some(url) = &b.callback_url {
            v.take(url_shape(url, config));
        }
        checks::create(&b, config, &mut v);
        v.check()
    };
    let patch = || -> Result<(), ApiError> {
        let b: PatchSubscription = parse(body, false)?;
        let mut v = Issues::default();
        if let Patch::Value(u) = &b.callback_url {
            v.take(url_shape(u, config));
        }
        checks::patch(&b, config, &mut v);
        v.check()
    };
    let skip = || -> Result<(), ApiError> {
        let b: SkipLane = parse(body, true)?;
        super::query::reason(b.reason.as_deref())?;
        tenant(b.tenant_id)?;
        Ok(())
    };
    let rotate = || parse::<RotateSecret>(body, true).map(|_| ());
    [create(), patch(), skip(), rotate()].iter().filter(|r| r.is_ok()).count()
}
