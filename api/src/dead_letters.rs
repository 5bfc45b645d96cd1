//! `/v1/dead-letters`: list dead letters by filter (paginated), inspect
//! one, requeue or skip one, or start a bulk job that requeues or skips
//! every open one a filter takes; `/v1/jobs/{id}` follows a job.

use super::error::ErrorCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::reindex::{self, Walk};
use super::routes::Call;
use super::scope::tenant_filter;
use super::{cursor, parse, query, query_param, Api, ApiError, ApiResult, Request, Response};
use shared::audit::{Action, AuditRecord};
use shared::bulk::{Job, JobFilter, JobKind, JobSpec, JobState};
use shared::dead_letter::{DeadLetter, DeadLetterQuery, DeadLetterState};
use shared::ids::{DeadLetterId, SagaId, SubscriptionId, TenantId};
use shared::ports::TimeRange;
use shared::stage::bulk;
use shared::stage::requeue::{self, Audit};

/// `POST /v1/dead-letters/{id}/requeue` and `…/skip`: why (required). An
/// `actor` member is still accepted, for clients written before the audit
/// trail, and ignored: the actor is who authenticated ([`Caller::actor`](shared::access::Caller::actor)),
/// never what a body claims.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReasonBody {
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    actor: Option<serde::de::IgnoredAny>,
}

/// `POST /v1/dead-letters/requeue` and `…/skip`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BulkBody {
    #[serde(default)]
    filter: Option<BulkFilter>,
    #[serde(default)]
    reason: Option<String>,
}

/// The filter of a bulk job (only open dead letters are acted on, so no
/// state).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct BulkFilter {
    #[serde(default)]
    subscription_id: Option<String>,
    #[serde(default)]
    event_type: Option<String>,
    #[serde(default)]
    tenant_id: Option<String>,
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    until: Option<String>,
}

/// A page of dead letters, each as `GET /v1/dead-letters/{id}` shows it
/// but without the event snapshot `event` (a body may be large; a page of
/// them could exceed what one response carries).
#[derive(Serialize)]
struct DeadLetterPage {
    items: Vec<DeadLetter>,
    next_cursor: Option<String>,
}

#[derive(Serialize)]
struct Requeued<'a> {
    dead_letter_id: &'a DeadLetterId,
    saga_id: SagaId,
}

#[derive(Serialize)]
struct Skipped<'a> {
    dead_letter_id: &'a DeadLetterId,
    state: DeadLetterState,
}

/// A job started: its id and how many items it was counted to take.
#[derive(Serialize)]
struct Started<'a> {
    job_id: &'a str,
    items: Option<u64>,
}

/// A job as `GET /v1/jobs/{id}` shows it.
#[derive(Serialize)]
struct JobView<'a> {
    id: &'a str,
    kind: JobKind,
    state: JobState,
    /// How many items it was counted to take when created.
    #[serde(skip_serializing_if = "Option::is_none")]
    items: Option<u64>,
    /// The tenant whose job cap it counts against.
    #[serde(skip_serializing_if = "Option::is_none")]
    tenant_id: Option<&'a TenantId>,
    matched: u64,
    done: u64,
    failed: u64,
    /// Replay jobs only: events the named subscription's routing would not
    /// take, passed over.
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped_not_routed: Option<u64>,
    reason: &'a str,
    actor: &'a str,
    filter: JobFilter<'a>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

impl<'a> From<&'a Job> for JobView<'a> {
    fn from(j: &'a Job) -> Self {
        JobView {
            id: &j.id,
            kind: j.kind(),
            state: j.state,
            items: j.items,
            tenant_id: j.tenant_id.as_ref(),
            matched: j.matched,
            done: j.done,
            failed: j.failed,
            skipped_not_routed: (j.kind() == JobKind::Replay).then_some(j.skipped_not_routed),
            reason: &j.reason,
            actor: &j.actor,
            filter: j.spec.filter(),
            created_at: j.created_at,
            updated_at: j.updated_at,
            error: j.error.as_deref(),
        }
    }
}

/// A filter value that names one thing (an id, a type, a tenant): 1 to
/// 256 characters without control characters; else a `400` naming it.
pub(super) fn name_value(field: &str, v: String) -> Result<String, ApiError> {
    if v.is_empty() || v.chars().count() > 256 || v.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            field,
            format!("{field} must be 1 to 256 characters without control characters"),
        ));
    }
    Ok(v)
}

/// The filters of `GET /v1/dead-letters`, each checked (a bad one is a
/// `400`, an impossible time range a `422`, naming it), time ranges against
/// `retention`.
fn list_query(req: &Request<'_>, retention: chrono::Duration) -> Result<DeadLetterQuery, ApiError> {
    let param = |name: &str| query_param(req.query, name).map(|v| name_value(name, v)).transpose();
    let state = match query_param(req.query, "state") {
        None => None,
        Some(s) => Some(s.parse::<DeadLetterState>().map_err(|e| ApiError::invalid("state", format!("state {e}")))?),
    };
    let TimeRange { since, until } = query::time_range(req, retention)?;
    Ok(DeadLetterQuery {
        subscription_id: param("subscription_id")?.map(SubscriptionId::new),
        event_type: param("event_type")?,
        tenant_id: param("tenant_id")?.map(TenantId::new),
        state,
        since,
        until,
    })
}

/// The body of `POST /v1/dead-letters/requeue|skip` checked into the job's
/// reason and the open dead letters it takes (fields named `filter.…`),
/// time ranges against `retention`.
fn bulk_request(body: &[u8], retention: chrono::Duration) -> Result<(String, DeadLetterQuery), ApiError> {
    let body: BulkBody = parse(body, false)?;
    let reason = query::reason(body.reason.as_deref())?;
    let f = body.filter.unwrap_or_default();
    let at = |field: &str, v: Option<String>| v.map(|v| query::instant(&format!("filter.{field}"), &v)).transpose();
    let range = TimeRange { since: at("since", f.since)?, until: at("until", f.until)? };
    let range = query::check_range(range, retention, Utc::now())
        .map_err(|e| ApiError { field: e.field.map(|f| format!("filter.{f}")), ..e })?;
    let named = |field: &str, v: Option<String>| v.map(|v| name_value(&format!("filter.{field}"), v)).transpose();
    let q = DeadLetterQuery {
        subscription_id: named("subscription_id", f.subscription_id)?.map(SubscriptionId::new),
        event_type: named("event_type", f.event_type)?,
        tenant_id: named("tenant_id", f.tenant_id)?.map(TenantId::new),
        state: None,
        since: range.since,
        until: range.until,
    };
    Ok((reason, q))
}

impl Api {
    /// How long dead letters can be looked for by time: resolved ones are
    /// kept for the dead-letter retention (open ones longer, but a range
    /// is checked against what is kept of every state).
    fn dead_letter_retention(&self) -> chrono::Duration {
        self.hookline.config.dead_letter_retention
    }

    /// `GET /v1/dead-letters`; a tenant-bound caller's `tenant_id` is
    /// forced to its own.
    pub(super) async fn list_dead_letters(&self, c: &Call<'_>) -> ApiResult {
        let req = &c.req;
        let mut q = list_query(req, self.dead_letter_retention())?;
        q.tenant_id = tenant_filter(&c.caller, q.tenant_id.take(), "tenant_id")?;
        let limit = query::limit(req)?;
        let filters = q.fingerprint();
        let after = query_param(req.query, "cursor")
            .map(|c| {
                cursor::read(&self.cursor_key(), &c, &filters).map_err(|e| ApiError::invalid("cursor", e.to_string()))
            })
            .transpose()?;
        let page = self.hookline.stores.dead_letters.page(&q, limit, after.as_deref()).await?;
        Ok(Response::json(
            200,
            &DeadLetterPage {
                items: page.items.into_iter().map(|d| DeadLetter { event: None, ..d }).collect(),
                next_cursor: page.next.map(|n| cursor::issue(&self.cursor_key(), &n, &filters)),
            },
        ))
    }

    pub(super) async fn get_dead_letter(&self, id: &DeadLetterId) -> ApiResult {
        let dl =
            self.hookline.stores.dead_letters.get(id).await?.ok_or_else(|| ApiError::not_found("dead letter", id))?;
        Ok(Response::json(200, &dl))
    }

    pub(super) async fn resolve_dead_letter(&self, id: &DeadLetterId, c: &Call<'_>, requeue: bool) -> ApiResult {
        let req = &c.req;
        let body: ReasonBody = parse(req.body, true)?;
        let audit = Audit { actor: c.caller.actor.clone(), reason: query::reason(body.reason.as_deref())? };
        let record = |action| AuditRecord::new(action, &audit.actor).reason(&audit.reason).dead_letter(id);
        if requeue {
            let saga_id = requeue::request_requeue(&self.hookline, id, &audit).await?;
            let dl = self.hookline.stores.dead_letters.get(id).await.ok().flatten();
            let rec = with_dead_letter(record(Action::DeadLetterRequeued), dl.as_ref())
                .details(serde_json::json!({"saga_id": saga_id}));
            self.hookline.audit(rec).await;
            Ok(Response::json(202, &Requeued { dead_letter_id: id, saga_id }))
        } else {
            let dl = self
                .hookline
                .stores
                .dead_letters
                .get(id)
                .await?
                .ok_or_else(|| ApiError::not_found("dead letter", id))?;
            if dl.state != DeadLetterState::Open {
                return Err(ApiError::new(ErrorCode::Conflict, format!("dead letter {id} is already {}", dl.state)));
            }
            requeue::skip(&self.hookline, id, &audit).await?;
            let dl = self.hookline.stores.dead_letters.get(id).await.ok().flatten();
            self.hookline.audit(with_dead_letter(record(Action::DeadLetterSkipped), dl.as_ref())).await;
            Ok(Response::json(200, &Skipped { dead_letter_id: id, state: DeadLetterState::Skipped }))
        }
    }

    /// `POST /v1/dead-letters/reindex` (`{"cursor"?, "limit"?}`, see
    /// [`super::reindex`]): one page of the repair after an upgrade
    /// ([`shared::ports::DeadLetterStore::reindex_page`]): up to `limit`
    /// stored dead letters examined, the listing keys of those stored
    /// without them written, so the filters and bulk jobs find them.
    pub(super) async fn reindex_dead_letters(&self, req: &Request<'_>) -> ApiResult {
        let (after, limit) = reindex::page_of(req, Walk::DeadLetters, &self.cursor_key())?;
        let page = self.hookline.stores.dead_letters.reindex_page(after.as_deref(), limit).await?;
        tracing::info!(reindexed = page.reindexed, examined = page.examined, "dead letters reindexed");
        Ok(reindex::answer(page, Walk::DeadLetters, &self.cursor_key()))
    }

    /// `POST /v1/dead-letters/requeue|skip`: a bulk job over the open dead
    /// letters of the filter. A tenant-bound caller's filter is forced to
    /// its tenant (`filter.tenant_id`), and a subscription it names must be
    /// its own (`404` naming `filter.subscription_id`).
    pub(super) async fn bulk_dead_letters(&self, c: &Call<'_>, kind: JobKind) -> ApiResult {
        let req = &c.req;
        let (reason, mut q) = bulk_request(req.body, self.dead_letter_retention())?;
        q.tenant_id = tenant_filter(&c.caller, q.tenant_id.take(), "filter.tenant_id")?;
        let subscription = q.subscription_id.clone();
        // A subscription the filter names must be the caller's to see.
        let named = match &subscription {
            Some(id) => Some(self.visible_subscription(&c.caller, id, "filter.subscription_id").await?),
            None => None,
        };
        // The job's tenant: the caller's when bound, else the filter's, else
        // the named subscription's.
        let tenant = q.tenant_id.clone().or_else(|| named.and_then(|s| s.tenant_id));
        let spec = JobSpec::dead_letters(kind, q).expect("the routes ask for requeue or skip");
        let mut job = Job::new(spec, &reason, &c.caller.actor, Utc::now());
        job.tenant_id = c.caller.tenant.clone().or_else(|| tenant.clone());
        bulk::admit(&self.hookline, &mut job).await?;
        let job = bulk::start(&self.hookline, job).await?;
        let action =
            if kind == JobKind::Skip { Action::DeadLettersSkipStarted } else { Action::DeadLettersRequeueStarted };
        self.job_audit(action, &job, subscription.as_ref(), tenant.as_ref()).await;
        Ok(Self::job_started(&job))
    }

    /// `GET /v1/jobs/{id}`.
    pub(super) async fn get_job(&self, id: &str) -> ApiResult {
        // Only jobs are shown: the job store also keeps each tenant's
        // running-job slots, under `slots#…` keys.
        if !id.starts_with("job_") {
            return Err(ApiError::not_found("job", id));
        }
        let job = self.hookline.stores.jobs.get(id).await?.ok_or_else(|| ApiError::not_found("job", id))?;
        Ok(Response::json(200, &JobView::from(&job)))
    }

    /// The one audit record of a job's start: its actor, reason, id and
    /// filter (and subscription, when the filter names one), of the
    /// tenant that started it or else the one its filter names.
    pub(super) async fn job_audit(
        &self,
        action: Action,
        job: &Job,
        subscription: Option<&SubscriptionId>,
        tenant: Option<&TenantId>,
    ) {
        let mut rec = AuditRecord::new(action, &job.actor)
            .reason(&job.reason)
            .job(&job.id)
            .tenant(job.tenant_id.as_ref().or(tenant))
            .details(serde_json::json!({"filter": job.spec.filter()}));
        if let Some(s) = subscription {
            rec = rec.subscription(s);
        }
        self.hookline.audit(rec).await;
    }

    /// A bulk job started: `202 {"job_id", "items"}`.
    pub(super) fn job_started(job: &Job) -> Response {
        Response::json(202, &Started { job_id: &job.id, items: job.items })
    }
}

/// A dead letter's record with its subscription and event ids.
fn with_dead_letter(rec: AuditRecord, dl: Option<&DeadLetter>) -> AuditRecord {
    match dl {
        Some(d) => rec.subscription(&d.subscription_id).event(&d.event_id).tenant(d.tenant_id.as_ref()),
        None => rec,
    }
}

/// For the fuzzer ([`crate::fuzzing`]): `body` read as the body of each
/// route here (requeue or skip one, a bulk job) and put through the checks
/// its handler makes before any store call, with `retention` for time
/// ranges; how many of the bodies were accepted. Never panics.
pub(crate) fn fuzz_bodies(body: &[u8], retention: chrono::Duration) -> usize {
    let one = || -> Result<(), ApiError> {
        let b: ReasonBody = parse(body, true)?;
        query::reason(b.reason.as_deref()).map(|_| ())
    };
    usize::from(one().is_ok()) + usize::from(bulk_request(body, retention).is_ok())
}

/// For the fuzzer ([`crate::fuzzing`]): the query string of
/// `GET /v1/dead-letters` read as its handler reads it before the store
/// call (the cursor aside: [`cursor::read`] has its own target).
pub(crate) fn fuzz_query(req: &Request<'_>, retention: chrono::Duration) -> Result<(), ApiError> {
    list_query(req, retention)?;
    query::limit(req).map(|_| ())
}

/// This module's part of the OpenAPI document ([`super::openapi`]): its
/// routes' paths and the wire types they use.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi()]
    struct Part;
    <Part as utoipa::OpenApi>::openapi()
}
