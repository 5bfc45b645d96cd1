//! `/v1/dead-letters`: list dead letters by filter (paginated), inspect
//! one, requeue or skip one, or start a bulk job that requeues or skips
//! every open one a filter takes; `/v1/jobs/{id}` follows a job.

use super::error::ErrorCode;
use chrono::Utc;
use hookline_wire::dead_letters as wire;
use hookline_wire::jobs as wire_jobs;
use hookline_wire::{ErrorBody, FieldIssue, Page};

pub(super) use super::error::Issues;

mod view;

use super::reindex::{self, Walk};
use super::routes::Call;
use super::scope::tenant_filter;
use super::{cursor, parse, query, Api, ApiError, ApiResult, Request, Response};
use shared::audit::{Action, AuditRecord};
use shared::bulk::{Job, JobKind, JobSpec};
use shared::dead_letter::{DeadLetter, DeadLetterQuery, DeadLetterState};
use shared::ids::{DeadLetterId, SubscriptionId, TenantId};
use shared::ports::TimeRange;
use shared::stage::bulk;
use shared::stage::requeue::{self, Audit};
use view::{dead_letter_view, job_view, state_of};

/// A filter value that names one thing (an id, a type, a tenant): 1 to
/// 256 characters without control characters; else a `422` naming it.
pub(super) fn name_value(field: &str, v: String) -> Result<String, ApiError> {
    if v.is_empty() || v.chars().count() > 256 || v.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            field,
            format!("{field} must be 1 to 256 characters without control characters"),
        ));
    }
    Ok(v)
}

/// The filters of `GET /v1/dead-letters` checked, every bad one reported
/// (`422` naming each), time ranges against `retention`.
fn list_query(q: wire::DeadLetterListQuery, retention: chrono::Duration) -> Result<DeadLetterQuery, ApiError> {
    let mut issues = Issues::default();
    let mut named = |field: &str, v: Option<String>| issues.take(v.map(|v| name_value(field, v)).transpose()).flatten();
    let subscription_id = named("subscription_id", q.subscription_id).map(SubscriptionId::new);
    let event_type = named("event_type", q.event_type);
    let tenant_id = named("tenant_id", q.tenant_id).map(TenantId::new);
    let range = issues
        .take(query::check_range(TimeRange { since: q.since, until: q.until }, retention, Utc::now()))
        .unwrap_or_default();
    issues.take(query::page_limit(q.limit, query::DEFAULT_PAGE, query::MAX_PAGE));
    issues.check()?;
    Ok(DeadLetterQuery {
        subscription_id,
        event_type,
        tenant_id,
        state: q.state.map(state_of),
        since: range.since,
        until: range.until,
    })
}

/// The body of `POST /v1/dead-letters/requeue|skip` checked into the job's
/// reason and the open dead letters it takes, every bad field reported
/// (the filter's named `filter.…`), time ranges against `retention`.
fn bulk_request(body: &[u8], retention: chrono::Duration) -> Result<(String, DeadLetterQuery), ApiError> {
    let body: wire::BulkRequest = parse(body, false)?;
    let mut issues = Issues::default();
    let f = body.filter.unwrap_or_default();
    let mut named = |field: &str, v: Option<String>| {
        issues.take(v.map(|v| name_value(&format!("filter.{field}"), v)).transpose()).flatten()
    };
    let subscription_id = named("subscription_id", f.subscription_id).map(SubscriptionId::new);
    let event_type = named("event_type", f.event_type);
    let tenant_id = named("tenant_id", f.tenant_id).map(TenantId::new);
    let range = query::check_range(TimeRange { since: f.since, until: f.until }, retention, Utc::now()).map_err(|e| {
        ApiError::fields(
            e.clone()
                .into_issues()
                .into_iter()
                .map(|i| FieldIssue { field: format!("filter.{}", i.field), ..i })
                .collect(),
        )
        .unwrap_or(e)
    });
    let range = issues.take(range).unwrap_or_default();
    let reason = issues.take(query::reason(body.reason.as_deref()));
    issues.check()?;
    let q =
        DeadLetterQuery { subscription_id, event_type, tenant_id, state: None, since: range.since, until: range.until };
    Ok((reason.unwrap_or_default(), q))
}

impl Api {
    /// How long dead letters can be looked for by time: resolved ones are
    /// kept for the dead-letter retention (open ones longer, but a range
    /// is checked against what is kept of every state).
    fn dead_letter_retention(&self) -> chrono::Duration {
        self.hookline.config.dead_letter_retention
    }

    /// `GET /v1/dead-letters`; a tenant-bound caller's `tenant_id` is
    /// forced to its own. Every parameter is typed
    /// ([`wire::DeadLetterListQuery`]): one it does not take is a `400`
    /// naming it, never an unfiltered page.
    pub(super) async fn list_dead_letters(&self, c: &Call<'_>) -> ApiResult {
        let typed: wire::DeadLetterListQuery = query::typed(c.req.query)?;
        let (limit, cursor) =
            (query::page_limit(typed.limit, query::DEFAULT_PAGE, query::MAX_PAGE), typed.cursor.clone());
        let mut q = list_query(typed, self.dead_letter_retention())?;
        let limit = limit?;
        q.tenant_id = tenant_filter(&c.caller, q.tenant_id.take(), "tenant_id")?;
        let filters = q.fingerprint();
        let after = self.page_after("cursor", cursor.as_deref(), &filters)?;
        let page = self.hookline.stores.dead_letters.page(&q, limit, after.as_deref()).await?;
        Ok(Response::json(
            200,
            &Page::new(
                page.items.into_iter().map(|d| dead_letter_view(d, false)).collect(),
                page.next.map(|n| cursor::issue(&self.cursor_key(), &n, &filters)),
            ),
        ))
    }

    /// `GET /v1/dead-letters/{dead_letter}`, with its event snapshot.
    pub(super) async fn get_dead_letter(&self, id: &DeadLetterId, req: &Request<'_>) -> ApiResult {
        query::none(req.query)?;
        let dl =
            self.hookline.stores.dead_letters.get(id).await?.ok_or_else(|| ApiError::not_found("dead letter", id))?;
        Ok(Response::json(200, &dead_letter_view(dl, true)))
    }

    pub(super) async fn resolve_dead_letter(&self, id: &DeadLetterId, c: &Call<'_>, requeue: bool) -> ApiResult {
        let req = &c.req;
        query::none(req.query)?;
        let body: wire::ReasonBody = parse(req.body, true)?;
        let audit = Audit { actor: c.caller.actor.clone(), reason: query::reason(body.reason.as_deref())? };
        let record = |action| AuditRecord::new(action, &audit.actor).reason(&audit.reason).dead_letter(id);
        if requeue {
            let saga_id = requeue::request_requeue(&self.hookline, id, &audit).await?;
            let dl = self.hookline.stores.dead_letters.get(id).await.ok().flatten();
            let rec = with_dead_letter(record(Action::DeadLetterRequeued), dl.as_ref())
                .details(serde_json::json!({"saga_id": saga_id}));
            self.hookline.audit(rec).await;
            Ok(Response::json(202, &wire::Requeued { dead_letter_id: id.to_string(), saga_id: saga_id.to_string() }))
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
            Ok(Response::json(
                200,
                &wire::Skipped { dead_letter_id: id.to_string(), state: wire::DeadLetterState::Skipped },
            ))
        }
    }

    /// `POST /v1/dead-letters/reindex` (`{"cursor"?, "limit"?}`, see
    /// [`super::reindex`]): one page of the repair after an upgrade
    /// ([`shared::ports::DeadLetterStore::reindex_page`]): up to `limit`
    /// stored dead letters examined, the listing keys of those stored
    /// without them written, so the filters and bulk jobs find them.
    pub(super) async fn reindex_dead_letters(&self, req: &Request<'_>) -> ApiResult {
        query::none(req.query)?;
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
        query::none(req.query)?;
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
    pub(super) async fn get_job(&self, id: &str, req: &Request<'_>) -> ApiResult {
        query::none(req.query)?;
        // Only jobs are shown: the job store also keeps each tenant's
        // running-job slots, under `slots#…` keys.
        if !id.starts_with("job_") {
            return Err(ApiError::not_found("job", id));
        }
        let job = self.hookline.stores.jobs.get(id).await?.ok_or_else(|| ApiError::not_found("job", id))?;
        Ok(Response::json(200, &job_view(&job)))
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
        Response::json(202, &wire_jobs::JobStarted { job_id: job.id.clone(), items: job.items })
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
        let b: wire::ReasonBody = parse(body, true)?;
        query::reason(b.reason.as_deref()).map(|_| ())
    };
    usize::from(one().is_ok()) + usize::from(bulk_request(body, retention).is_ok())
}

/// For the fuzzer ([`crate::fuzzing`]): the query string of
/// `GET /v1/dead-letters` read as its handler reads it before the store
/// call (the cursor aside: [`cursor::read`] has its own target).
pub(crate) fn fuzz_query(req: &Request<'_>, retention: chrono::Duration) -> Result<(), ApiError> {
    list_query(query::typed(req.query)?, retention).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::view::{saga_view, state_view};
    use super::*;
    use shared::saga::{Saga, SagaStatus};

    fn fields(e: &ApiError) -> Vec<(&str, ErrorCode)> {
        e.issues.iter().map(|i| (i.field.as_str(), i.code)).collect()
    }

    /// A bulk body's bad filter fields and bad reason are all reported,
    /// each by its path; what cannot be read is one 400.
    #[test]
    fn a_bulk_body_reports_every_bad_field() {
        let days = chrono::Duration::days(7);
        let e = bulk_request(br#"{"filter": {"event_type": "", "tenant_id": "a\u0007"}}"#, days).unwrap_err();
        assert_eq!(
            fields(&e),
            [
                ("filter.event_type", ErrorCode::InvalidField),
                ("filter.tenant_id", ErrorCode::InvalidField),
                ("reason", ErrorCode::ReasonRequired)
            ],
            "{e:?}"
        );
        assert_eq!((e.status(), e.field.as_deref()), (422, Some("filter.event_type")));
        let now = Utc::now();
        let inverted =
            serde_json::json!({"filter": {"since": now, "until": now - chrono::Duration::hours(1)}, "reason": "a\tb"});
        let e = bulk_request(inverted.to_string().as_bytes(), days).unwrap_err();
        assert_eq!(fields(&e), [("filter.until", ErrorCode::InvalidRange), ("reason", ErrorCode::InvalidField)]);
        let e = bulk_request(br#"{"filter": {"state": "open"}, "reason": "x"}"#, days).unwrap_err();
        assert_eq!((e.status(), e.code, e.field.as_deref()), (400, ErrorCode::UnknownField, Some("filter.state")));
        let (reason, q) = bulk_request(br#"{"filter": {"event_type": "a.b"}, "reason": " ok "}"#, days).unwrap();
        assert_eq!((reason.as_str(), q.event_type.as_deref(), q.state), ("ok", Some("a.b"), None));
    }

    /// The listing's query string is typed: an unknown parameter is a 400
    /// naming it, states are snake_case, bad values are all reported.
    #[test]
    fn the_listing_query_is_typed() {
        let days = chrono::Duration::days(7);
        let read = |q: &str| query::typed::<wire::DeadLetterListQuery>(Some(q)).and_then(|t| list_query(t, days));
        let e = read("tenant=acme").unwrap_err();
        assert_eq!((e.status(), e.code, e.field.as_deref()), (400, ErrorCode::UnknownParameter, Some("tenant")));
        for bad in ["state=Open", "state=DeadLettered", "limit=-1"] {
            assert_eq!(read(bad).unwrap_err().code, ErrorCode::InvalidType, "{bad}");
        }
        let q = read("state=requeued&tenant_id=acme").unwrap();
        assert_eq!(
            (q.state, q.tenant_id.as_ref().map(|t| t.as_str())),
            (Some(DeadLetterState::Requeued), Some("acme"))
        );
        let e = read("event_type=&subscription_id=&limit=0").unwrap_err();
        let got: Vec<&str> = e.issues.iter().map(|i| i.field.as_str()).collect();
        assert_eq!(got, ["subscription_id", "event_type", "limit"]);
    }

    /// A route that takes no query parameter refuses any, naming it.
    #[test]
    fn a_route_without_parameters_refuses_any() {
        let read = query::none;
        assert!(read(None).is_ok() && read(Some("")).is_ok());
        let e = read(Some("expand=secret")).unwrap_err();
        assert_eq!((e.status(), e.code, e.field.as_deref()), (400, ErrorCode::UnknownParameter, Some("expand")));
        assert!(e.message.contains("takes none"), "{}", e.message);
    }

    /// Stored spellings are mapped at the edge: a stored saga's
    /// `DeadLettered` is `dead_lettered` on the wire.
    #[test]
    fn stored_spellings_are_snake_case_on_the_wire() {
        let now = Utc::now();
        let saga = Saga {
            state: shared::saga::SagaState {
                status: SagaStatus::DeadLettered,
                attempts: 3,
                next_attempt_at: None,
                last_error: Some("HTTP 500".into()),
            },
            ..Saga::new(
                shared::ids::SagaId::new("sag_1"),
                &shared::ids::EventId::new("e1"),
                &SubscriptionId::new("sub_1"),
                None,
                now,
            )
        };
        let shown = serde_json::to_value(saga_view(serde_json::to_value(&saga).unwrap()).unwrap()).unwrap();
        assert_eq!(shown["status"], "dead_lettered");
        assert_eq!(serde_json::to_value(state_view(DeadLetterState::Open)).unwrap(), "open");
        assert!(saga_view(serde_json::json!({"id": "x", "status": "DeadLettered"})).is_none(), "not a saga");
    }
}

/// The parse errors of a JSON body (400), for the document.
macro_rules! body_400 {
    () => {
        "The body could not be parsed; `field` names the culprit.\n\n`malformed_json`: the body is not JSON.\n\n\
         `not_an_object`: the body is not a JSON object.\n\n`unknown_field`: a field the body does not take.\n\n\
         `invalid_type`: a value of the wrong type (a time that is not RFC 3339, a name that is none of an enum's).\n\n\
         `unknown_parameter`: a query parameter (the route takes none)."
    };
}
pub(super) use body_400;

/// `GET /v1/dead-letters`.
#[utoipa::path(
    get,
    path = "/v1/dead-letters",
    tag = "dead-letters",
    summary = "List dead letters",
    description = "One page of dead letters, newest first, filtered (each filter given must match; a tenant-bound \
        key sees its tenant's only). Items carry no event snapshot (`GET /v1/dead-letters/{dead_letter}` does). A \
        parameter the route does not take (`tenant` for `tenant_id`) is refused, never ignored.",
    params(wire::DeadLetterListQuery),
    responses(
        (status = 200, description = "A page of dead letters.", body = Page<wire::DeadLetter>, example = json!({
            "items": [{"id": "sag_0193a1b2c3d4e5f6a7b8c9d0e1f2a3b4", "event_id": "evt_1", "subscription_id": "sub_1",
                "event_type": "order.created", "tenant_id": "acme", "reason": "HTTP 500 after 8 attempts", "attempts": 8,
                "created_at": "2026-11-26T09:30:00Z", "state": "open", "resolution": null}],
            "next_cursor": null})),
        (status = 400, description = "The query string could not be read; `field` names the parameter.\n\n\
            `unknown_parameter`: a parameter the route does not take, or one given twice.\n\n\
            `invalid_type`: a value not of its type (`limit=ten`, `state=gone`, a time that is not RFC 3339).\n\n\
            `invalid_cursor`: a `cursor` this deployment did not issue for these filters.",
            body = ErrorBody),
        (status = 422, description = "A value broke a rule; `errors` names each.\n\n`invalid_field`: `limit` out \
            of 1 to 1000, an empty or overlong filter value.\n\n`invalid_range`: \
            `until` before `since`, or a bound outside the dead-letter retention.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn list_dead_letters() {}

/// `GET /v1/dead-letters/{dead_letter}`.
#[utoipa::path(
    get,
    path = "/v1/dead-letters/{dead_letter}",
    tag = "dead-letters",
    summary = "Show a dead letter",
    description = "One dead letter with its saga as it ended and the event as a requeue would deliver it.",
    params(("dead_letter" = String, Path, description = "The dead letter's id (the dead saga's, `sag_…`).")),
    responses(
        (status = 200, description = "The dead letter.", body = wire::DeadLetter),
        (status = 400, description = "`unknown_parameter`: a query parameter (the route takes none).", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn get_dead_letter() {}

/// `POST /v1/dead-letters/{dead_letter}/requeue`.
#[utoipa::path(
    post,
    path = "/v1/dead-letters/{dead_letter}/requeue",
    tag = "dead-letters",
    summary = "Requeue a dead letter",
    description = "A new saga delivers the event again (same `webhook-id`); the dead letter becomes `requeued`.",
    params(("dead_letter" = String, Path, description = "The dead letter's id.")),
    request_body(content = wire::ReasonBody, example = json!({"reason": "endpoint fixed"})),
    responses(
        (status = 202, description = "Requeued: the new saga.", body = wire::Requeued,
            example = json!({"dead_letter_id": "sag_0193a1b2c3d4e5f6a7b8c9d0e1f2a3b4", "saga_id": "sag_0193a1b2c3d4e5f6a7b8c9d0e1f2a3b5"})),
        (status = 400, description = body_400!(), body = ErrorBody),
        (status = 409, description = "`conflict`: the dead letter is already requeued or skipped.", body = ErrorBody),
        (status = 422, description = "`reason_required`: no reason, or a blank one.\n\n`invalid_field`: a reason \
            longer than 1000 characters or with control characters.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn requeue_dead_letter() {}

/// `POST /v1/dead-letters/{dead_letter}/skip`.
#[utoipa::path(
    post,
    path = "/v1/dead-letters/{dead_letter}/skip",
    tag = "dead-letters",
    summary = "Skip a dead letter",
    description = "Closes the dead letter without delivering it (an ordered lane it blocked goes on).",
    params(("dead_letter" = String, Path, description = "The dead letter's id.")),
    request_body(content = wire::ReasonBody, example = json!({"reason": "customer deleted the order"})),
    responses(
        (status = 200, description = "Skipped.", body = wire::Skipped,
            example = json!({"dead_letter_id": "sag_0193a1b2c3d4e5f6a7b8c9d0e1f2a3b4", "state": "skipped"})),
        (status = 400, description = body_400!(), body = ErrorBody),
        (status = 409, description = "`conflict`: the dead letter is already requeued or skipped.", body = ErrorBody),
        (status = 422, description = "`reason_required`: no reason, or a blank one.\n\n`invalid_field`: a reason \
            longer than 1000 characters or with control characters.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn skip_dead_letter() {}

/// `POST /v1/dead-letters/requeue`.
#[utoipa::path(
    post,
    path = "/v1/dead-letters/requeue",
    tag = "dead-letters",
    summary = "Requeue open dead letters in bulk",
    description = "Starts a job requeueing every open dead letter the filter takes (a tenant-bound key: of its \
        tenant); follow it at `GET /v1/jobs/{job}`. Every bad field of the body is reported at once; nothing starts.",
    request_body(content = wire::BulkRequest, example = json!({"filter": {"subscription_id": "sub_1", "since": "2026-11-26T00:00:00Z"}, "reason": "endpoint was down"})),
    responses(
        (status = 202, description = "The job started.", body = hookline_wire::jobs::JobStarted,
            example = json!({"job_id": "job_0193a1b2c3d4e5f6a7b8c9d0e1f2a3b4", "items": 42})),
        (status = 400, description = body_400!(), body = ErrorBody),
        (status = 404, description = "`not_found`: `filter.subscription_id` names no subscription the key may see.",
            body = ErrorBody),
        (status = 422, description = "Values broke rules; `errors` names each (`filter.event_type`, `reason`, …).\n\n\
            `reason_required`: no reason, or a blank one.\n\n`invalid_field`: an empty or overlong filter value, a \
            bad reason.\n\n`invalid_range`: `filter.until` before `filter.since`, or outside the retention.\n\n\
            `job_too_large`: the filter takes more dead letters than one job may.", body = ErrorBody),
        (status = 429, description = "`too_many_jobs`: the tenant runs as many jobs as it may; retry after \
            `Retry-After`.", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait."))),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn requeue_dead_letters() {}

/// `POST /v1/dead-letters/skip`.
#[utoipa::path(
    post,
    path = "/v1/dead-letters/skip",
    tag = "dead-letters",
    summary = "Skip open dead letters in bulk",
    description = "Starts a job skipping every open dead letter the filter takes; follow it at \
        `GET /v1/jobs/{job}`. Every bad field of the body is reported at once; nothing starts.",
    request_body(content = wire::BulkRequest, example = json!({"filter": {"event_type": "test.ping"}, "reason": "test traffic"})),
    responses(
        (status = 202, description = "The job started.", body = hookline_wire::jobs::JobStarted,
            example = json!({"job_id": "job_0193a1b2c3d4e5f6a7b8c9d0e1f2a3b4", "items": 3})),
        (status = 400, description = body_400!(), body = ErrorBody),
        (status = 404, description = "`not_found`: `filter.subscription_id` names no subscription the key may see.",
            body = ErrorBody),
        (status = 422, description = "Values broke rules; `errors` names each.\n\n`reason_required`: no reason, or \
            a blank one.\n\n`invalid_field`: an empty or overlong filter value, a bad reason.\n\n`invalid_range`: \
            `filter.until` before `filter.since`, or outside the retention.\n\n`job_too_large`: the filter takes more \
            dead letters than one job may.", body = ErrorBody),
        (status = 429, description = "`too_many_jobs`: the tenant runs as many jobs as it may; retry after \
            `Retry-After`.", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait."))),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn skip_dead_letters() {}

/// `POST /v1/dead-letters/reindex`.
#[utoipa::path(
    post,
    path = "/v1/dead-letters/reindex",
    tag = "dead-letters",
    summary = "Reindex dead letters (one page)",
    description = "After an upgrade: writes the listing keys of up to `limit` stored dead letters that lack them, so \
        the filters and bulk jobs find them. Repeat with `next_cursor` until it is `null`. An admin key bound to no \
        tenant only.",
    request_body(content = hookline_wire::reindex::ReindexRequest, example = json!({"limit": 100})),
    responses(
        (status = 200, description = "What the page did.", body = hookline_wire::reindex::ReindexAnswer,
            example = json!({"reindexed": 3, "examined": 100, "next_cursor": "eyJ2IjoxfQ.c2ln"})),
        (status = 400, description = concat!(body_400!(), "\n\n`invalid_cursor`: a `cursor` not of this walk."),
            body = ErrorBody),
        (status = 422, description = "`invalid_field`: `limit` out of 1 to 100.",
            body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn reindex_dead_letters() {}

/// `GET /v1/jobs/{job}`.
#[utoipa::path(
    get,
    path = "/v1/jobs/{job}",
    tag = "replays",
    summary = "Follow a job",
    description = "A bulk requeue, skip or replay job: its counts, until `state` leaves `running`.",
    params(("job" = String, Path, description = "The job's id (`job_…`).")),
    responses(
        (status = 200, description = "The job.", body = hookline_wire::jobs::Job, example = json!({
            "id": "job_0193a1b2c3d4e5f6a7b8c9d0e1f2a3b4", "kind": "requeue", "state": "completed", "items": 42,
            "matched": 42, "done": 41, "failed": 1, "reason": "endpoint was down", "actor": "key:ops",
            "filter": {"subscription_id": "sub_1"}, "created_at": "2026-11-26T09:30:00Z",
            "updated_at": "2026-11-26T09:30:05Z"})),
        (status = 400, description = "`unknown_parameter`: a query parameter (the route takes none).", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn get_job() {}

/// This module's part of the OpenAPI document ([`super::openapi`]): its
/// routes' paths (and `GET /v1/jobs/{job}`'s) and the wire types they use.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(
        paths(
            list_dead_letters,
            get_dead_letter,
            requeue_dead_letter,
            skip_dead_letter,
            requeue_dead_letters,
            skip_dead_letters,
            reindex_dead_letters,
            get_job
        ),
        components(schemas(
            wire::DeadLetter,
            wire::DeadLetterState,
            wire::SagaSnapshot,
            wire::SagaLane,
            wire::Resolution,
            wire::ResolutionAction,
            wire::DeadLetterEvent,
            wire::ReasonBody,
            wire::DeadLetterFilter,
            wire::BulkRequest,
            wire::Requeued,
            wire::Skipped,
            hookline_wire::reindex::ReindexRequest,
            hookline_wire::reindex::ReindexAnswer,
            hookline_wire::jobs::JobStarted,
            hookline_wire::jobs::Job,
            hookline_wire::jobs::JobKind,
            hookline_wire::jobs::JobState,
            hookline_wire::jobs::JobFilter
        ))
    )]
    struct Part;
    <Part as utoipa::OpenApi>::openapi()
}
