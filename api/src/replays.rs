//! `POST /v1/replays`: replay one event, one partition (in acceptance
//! order) or a time range of events, as a bulk job of kind replay
//! ([`shared::bulk`]) followed through `GET /v1/jobs/{id}`.

use chrono::Utc;
use hookline_wire::replays::ReplayRequest;
use hookline_wire::ErrorBody;

use super::dead_letters::name_value;
use super::error::Issues;
use super::routes::Call;
use super::scope::tenant_filter;
use super::{parse, query, Api, ApiError, ApiResult};
use shared::bulk::{Job, JobSpec, ReplayFilter};
use shared::ids::{EventId, SubscriptionId, TenantId};
use shared::ports::TimeRange;
use shared::stage::bulk;
use shared::stage::requeue::RequeueError;

/// Checks a body into the job's reason and filter, every bad field
/// reported: exactly one of `event_id`, `partition_key`, or `since` with
/// `until`; `tenant_id` with a partition key or a range (that tenant's
/// events only); a range checked against the event retention; each of
/// `event_types` a pattern; a reason (`422` naming each).
fn filter_of(b: ReplayRequest, retention: chrono::Duration) -> Result<(String, ReplayFilter), ApiError> {
    let mut issues = Issues::default();
    let by_range = b.since.is_some() || b.until.is_some();
    let ways = [b.event_id.is_some(), b.partition_key.is_some(), by_range].iter().filter(|w| **w).count();
    if ways != 1 {
        let field = if ways > 0 && b.event_id.is_none() { "partition_key" } else { "event_id" };
        issues.push(ApiError::invalid(
            field,
            "give exactly one of event_id, partition_key (with tenant_id if any), or since and until",
        ));
    }
    if b.tenant_id.is_some() && b.event_id.is_some() {
        issues.push(ApiError::invalid("tenant_id", "tenant_id goes with partition_key or since and until"));
    }
    let mut range = TimeRange::default();
    if by_range {
        if b.since.is_none() {
            issues.push(ApiError::invalid("since", "since goes with until"));
        }
        if b.until.is_none() {
            issues.push(ApiError::invalid("until", "until goes with since"));
        }
        if b.since.is_some() && b.until.is_some() {
            let r = TimeRange { since: b.since, until: b.until };
            range = issues.take(query::check_range(r, retention, Utc::now())).unwrap_or_default();
        }
    }
    let event_types = match b.event_types {
        None => None,
        Some(types) => {
            if types.is_empty() || types.len() > 100 {
                issues.push(ApiError::invalid("event_types", "event_types must list 1 to 100 types or patterns"));
            }
            for (i, t) in types.iter().enumerate().take(100) {
                if let Err(e) = shared::subscription::validate_pattern(t) {
                    issues.push(ApiError::invalid(format!("event_types[{i}]"), e));
                }
            }
            Some(types)
        }
    };
    let mut named = |field: &str, v: Option<String>| issues.take(v.map(|v| name_value(field, v)).transpose()).flatten();
    let event_id = named("event_id", b.event_id).map(EventId::new);
    let partition_key = named("partition_key", b.partition_key);
    let tenant_id = named("tenant_id", b.tenant_id).map(TenantId::new);
    let subscription_id = named("subscription_id", b.subscription_id).map(SubscriptionId::new);
    let reason = issues.take(query::reason(b.reason.as_deref()));
    issues.check()?;
    let filter = ReplayFilter {
        event_id,
        partition_key,
        tenant_id,
        since: range.since,
        until: range.until,
        subscription_id,
        event_types,
        confined_to: None,
    };
    Ok((reason.unwrap_or_default(), filter))
}

impl Api {
    /// `POST /v1/replays`. A tenant-bound caller replays its tenant's
    /// events only (the event it names must be its own, `404` naming
    /// `event_id`; a partition or a range is of its tenant, `tenant_id`
    /// forced), into its tenant's subscriptions only (one it names must be
    /// its own, `404` naming `subscription_id`; without one, the global
    /// subscriptions are left out). The job is its tenant's.
    pub(super) async fn start_replay(&self, c: &Call<'_>) -> ApiResult {
        let req = &c.req;
        query::none(req.query)?;
        let body: ReplayRequest = parse(req.body, false)?;
        let (reason, mut filter) = filter_of(body, self.hookline.config.retention)?;
        if filter.event_id.is_none() {
            filter.tenant_id = tenant_filter(&c.caller, filter.tenant_id.take(), "tenant_id")?;
        }
        filter.confined_to = c.caller.tenant.clone();
        let stores = &self.hookline.stores;
        let event = match &filter.event_id {
            Some(id) => {
                self.visible_event(&c.caller, id, "event_id").await?;
                Some(stores.events.get(id).await?.ok_or_else(|| ApiError::not_found("event", id))?)
            }
            None => None,
        };
        let mut tenant = filter.tenant_id.clone().or_else(|| event.as_ref().and_then(|e| e.tenant_id.clone()));
        if let Some(id) = &filter.subscription_id {
            let sub = self.visible_subscription(&c.caller, id, "subscription_id").await?;
            tenant = tenant.or_else(|| sub.tenant_id.clone());
            // One event named with a subscription its routing would not
            // take is refused as `POST /v1/events/{id}/replay` refuses it
            // (`422 subscription_not_matching`), and no job is started.
            if let Some(event) = &event {
                shared::routing::check_scope(&sub, event).map_err(|reason| {
                    ApiError::from(RequeueError::NotRouted {
                        subscription: sub.id.clone(),
                        event: event.id.clone(),
                        reason,
                    })
                })?;
            }
        }
        let subscription = filter.subscription_id.clone();
        // The job works for the caller's tenant when it is bound to one,
        // else for the tenant of what it replays (capped per tenant, seen
        // by that tenant's keys).
        let mut job = Job::new(JobSpec::Replay(filter), &reason, &c.caller.actor, Utc::now());
        job.tenant_id = c.caller.tenant.clone().or_else(|| tenant.clone());
        bulk::admit(&self.hookline, &mut job).await?;
        let job = bulk::start(&self.hookline, job).await?;
        self.job_audit(shared::audit::Action::ReplayStarted, &job, subscription.as_ref(), tenant.as_ref()).await;
        Ok(Self::job_started(&job))
    }
}

/// For the fuzzer ([`crate::fuzzing`]): `body` read as the body of
/// `POST /v1/replays` and checked into its filter ([`filter_of`]) as the
/// handler does before any store call, with `retention` for time ranges;
/// whether it was accepted. Never panics.
pub(crate) fn fuzz_bodies(body: &[u8], retention: chrono::Duration) -> usize {
    let replays = || -> Result<(), ApiError> {
        let b: ReplayRequest = parse(body, false)?;
        filter_of(b, retention).map(|_| ())
    };
    usize::from(replays().is_ok())
}

/// `POST /v1/replays`.
#[utoipa::path(
    post,
    path = "/v1/replays",
    tag = "replays",
    summary = "Replay events",
    description = "Starts a job delivering stored events again: one event, one partition (in acceptance order) or \
        the events received in a time range; to one subscription or every one matching each event now; optionally \
        only some types. A tenant-bound key replays its tenant's events into its tenant's subscriptions. Every bad \
        field of the body is reported at once; nothing starts. Follow the job at `GET /v1/jobs/{job}`.",
    request_body(content = ReplayRequest, example = json!({"partition_key": "order-7", "tenant_id": "acme",
        "subscription_id": "sub_1", "reason": "consumer rebuilt its store"})),
    responses(
        (status = 202, description = "The job started.", body = hookline_wire::jobs::JobStarted,
            example = json!({"job_id": "job_0193a1b2c3d4e5f6a7b8c9d0e1f2a3b4", "items": 12})),
        (status = 400, description = super::dead_letters::body_400!(), body = ErrorBody),
        (status = 404, description = "`not_found`: `event_id` or `subscription_id` names nothing the key may see.",
            body = ErrorBody),
        (status = 422, description = "Values broke rules; `errors` names each.\n\n`invalid_field`: not exactly one \
            of `event_id`, `partition_key`, `since` with `until`; `tenant_id` with `event_id`; an empty or overlong \
            id; `event_types` empty, past 100, or a bad pattern (`event_types[i]`); a bad reason.\n\n\
            `reason_required`: no reason, or a blank one.\n\n`invalid_range`: `until` before `since`, or outside the \
            event retention.\n\n`subscription_not_matching`: the named subscription would not receive the named \
            event.\n\n`job_too_large`: more events than one job may take.", body = ErrorBody),
        (status = 409, description = "`listing_off`: a replay of a time range (`since` with `until`) where the \
            deployment does not list events by time (`EVENT_LISTING` off); replay by `event_id` or \
            `partition_key`.", body = ErrorBody),
        (status = 429, description = "`too_many_jobs`: the tenant runs as many jobs as it may; retry after \
            `Retry-After`.", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait."))),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn start_replay() {}

/// This module's part of the OpenAPI document ([`super::openapi`]): its
/// routes' paths and the wire types they use.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(paths(start_replay), components(schemas(ReplayRequest)))]
    struct Part;
    <Part as utoipa::OpenApi>::openapi()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(mut v: serde_json::Value) -> ReplayRequest {
        if v.get("reason").is_none() {
            v["reason"] = serde_json::json!("test");
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn exactly_one_way_to_choose_events() {
        let days = chrono::Duration::days(30);
        let field = |v| filter_of(body(v), days).unwrap_err().field;
        assert_eq!(field(serde_json::json!({})).as_deref(), Some("event_id"));
        assert_eq!(field(serde_json::json!({"event_id": "e", "partition_key": "p"})).as_deref(), Some("event_id"));
        assert_eq!(field(serde_json::json!({"since": "2026-11-26T00:00:00Z"})).as_deref(), Some("until"));
        assert_eq!(field(serde_json::json!({"event_id": "e", "tenant_id": "t"})).as_deref(), Some("tenant_id"));
        let now = Utc::now();
        let inverted =
            serde_json::json!({"since": now.to_rfc3339(), "until": (now - chrono::Duration::hours(1)).to_rfc3339()});
        let e = filter_of(body(inverted), days).unwrap_err();
        assert_eq!((e.status(), e.field.as_deref()), (422, Some("until")));
        let (_, f) = filter_of(body(serde_json::json!({"partition_key": "p", "tenant_id": "t"})), days).unwrap();
        assert_eq!((f.partition_key.as_deref(), f.tenant_id.as_ref().map(|t| t.as_str())), (Some("p"), Some("t")));
    }

    /// A body with several bad fields names each of them, not the first.
    #[test]
    fn every_bad_field_is_reported() {
        let days = chrono::Duration::days(30);
        let b: ReplayRequest = serde_json::from_value(serde_json::json!({
            "event_id": "e", "tenant_id": "t", "event_types": ["ok.*", "bad pattern"], "subscription_id": "",
            "reason": " "
        }))
        .unwrap();
        let e = filter_of(b, days).unwrap_err();
        let fields: Vec<&str> = e.issues.iter().map(|i| i.field.as_str()).collect();
        assert_eq!(fields, ["tenant_id", "event_types[1]", "subscription_id", "reason"], "{e:?}");
        assert_eq!(e.status(), 422);
    }
}
