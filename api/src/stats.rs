//! `GET /v1/subscriptions/{subscription}/stats` and `GET /v1/stats`:
//! delivery statistics ([`shared::stats`]) per minute or per hour. The
//! subscription route reads that subscription's series (the route table
//! resolved it as the caller's); `/v1/stats` reads one tenant's series (a
//! tenant-bound caller always its own) or the whole system's, one series
//! either way: never every subscription's.

use chrono::{DateTime, Utc};

use super::error::Issues;
use super::routes::Call;
use super::scope::tenant_filter;
use super::{query, Api, ApiError, ApiResult, Response};
use hookline_wire::stats as wire;
use hookline_wire::ErrorCode;
use shared::stats::{check_range, total, Point, Series, Tally, Width};

/// A checked range: bucket start of `since`, `until`, the width.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Range {
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    width: Width,
}

/// The range asked for, with its defaults (until now; an hour back for
/// minute points, a week, or the retention when shorter, for hour points),
/// `since` moved back to the start of its bucket.
///
/// # Errors
///
/// `422 invalid_range` naming `until` (not after `since`) or `since` (the
/// range is longer than a day of minutes or the retention of hours).
fn checked_range(
    since: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
    bucket: Option<wire::Bucket>,
    retention: chrono::Duration,
    now: DateTime<Utc>,
) -> Result<Range, ApiError> {
    let width = match bucket.unwrap_or_default() {
        wire::Bucket::Minute => Width::Minute,
        wire::Bucket::Hour => Width::Hour,
    };
    let until = until.unwrap_or(now);
    let span = match width {
        Width::Minute => chrono::Duration::hours(1),
        Width::Hour => chrono::Duration::days(7).min(retention),
    };
    let since = since.unwrap_or(until - span);
    check_range(since, until, width, retention)
        .map_err(|e| ApiError::new(ErrorCode::InvalidRange, e.to_string()).on(e.field()))?;
    Ok(Range { since: width.start_of(since), until, width })
}

/// A percentile rounded to a tenth of a millisecond.
fn ms(v: Option<f64>) -> Option<f64> {
    v.map(|v| (v * 10.0).round() / 10.0)
}

/// One point on the wire.
fn wire_point(at: DateTime<Utc>, t: &Tally) -> wire::StatsPoint {
    wire::StatsPoint {
        at,
        succeeded: t.succeeded,
        failed: t.failed,
        dead_lettered: t.dead_lettered,
        p50_ms: ms(t.latency.percentile(0.5)),
        p90_ms: ms(t.latency.percentile(0.9)),
        p99_ms: ms(t.latency.percentile(0.99)),
    }
}

/// The series' points of the range on the wire, with their total.
fn stats(points: &[Point], r: Range, subscription_id: Option<String>, tenant_id: Option<String>) -> wire::Stats {
    wire::Stats {
        subscription_id,
        tenant_id,
        bucket: match r.width {
            Width::Minute => wire::Bucket::Minute,
            Width::Hour => wire::Bucket::Hour,
        },
        since: r.since,
        until: r.until,
        total: wire_point(r.since, &total(points)),
        points: points.iter().map(|p| wire_point(p.at, &p.tally)).collect(),
    }
}

/// For the fuzzer ([`crate::fuzzing`]): the query string of `GET
/// /v1/stats` read and checked as its handler does before any store call.
pub(crate) fn fuzz_query(query: Option<&str>, retention: chrono::Duration) -> bool {
    query::typed::<wire::StatsQuery>(query)
        .and_then(|q| checked_range(q.since, q.until, q.bucket, retention, Utc::now()))
        .is_ok()
}

impl Api {
    /// `GET /v1/subscriptions/{subscription}/stats`
    /// ([`wire::SubscriptionStatsQuery`]): the subscription's series.
    pub(super) async fn subscription_stats(&self, sub: shared::ids::SubscriptionId, c: &Call<'_>) -> ApiResult {
        let q: wire::SubscriptionStatsQuery = query::typed(c.req.query)?;
        let r = checked_range(q.since, q.until, q.bucket, self.hookline.config.retention, Utc::now())?;
        let points =
            self.hookline.stores.stats.read(&Series::Subscription(sub.clone()), r.width, r.since, r.until).await?;
        let tenant = c.caller.tenant.as_ref().map(|t| t.as_str().to_string());
        Ok(Response::json(200, &stats(&points, r, Some(sub.into_string()), tenant)))
    }

    /// `GET /v1/stats` ([`wire::StatsQuery`]): one tenant's series (named,
    /// or the caller's when it is bound to one) or the whole system's.
    /// Every bad parameter is reported at once.
    pub(super) async fn system_stats(&self, c: &Call<'_>) -> ApiResult {
        let q: wire::StatsQuery = query::typed(c.req.query)?;
        let mut issues = Issues::default();
        let tenant = issues.take(super::subscriptions::tenant(q.tenant_id.clone())).flatten();
        let r = issues.take(checked_range(q.since, q.until, q.bucket, self.hookline.config.retention, Utc::now()));
        issues.check()?;
        let r = r.expect("checked");
        let tenant = tenant_filter(&c.caller, tenant, "tenant_id")?;
        let series = match &tenant {
            Some(t) => Series::Tenant(t.as_str().to_string()),
            None => Series::System,
        };
        let points = self.hookline.stores.stats.read(&series, r.width, r.since, r.until).await?;
        Ok(Response::json(200, &stats(&points, r, None, tenant.map(|t| t.as_str().to_string()))))
    }
}

/// The two routes as the OpenAPI document describes them.
#[allow(dead_code)]
mod spec {
    use hookline_wire::stats as wire;
    use hookline_wire::ErrorBody;

    /// `GET /v1/subscriptions/{subscription}/stats`.
    #[utoipa::path(
        get,
        path = "/v1/subscriptions/{subscription}/stats",
        operation_id = "subscription_stats",
        tag = "stats",
        summary = "A subscription's delivery statistics",
        description = "Attempts by outcome and latency percentiles of one subscription, per minute (a range of at most 24 hours) or per hour (at most the retention), oldest first; buckets without an attempt are left out. A minute is counted once it closed (a few seconds after on `hookline serve`; at the delivery function's next invocation after it on AWS).",
        params(
            ("subscription" = String, Path, description = "The subscription's id."),
            wire::SubscriptionStatsQuery
        ),
        responses(
            (status = 200, description = "The series.", body = wire::Stats,
                example = json!({"subscription_id": "sub_01", "tenant_id": null, "bucket": "minute", "since": "2026-11-26T09:00:00Z", "until": "2026-11-26T10:00:00Z",
                    "total": {"at": "2026-11-26T09:00:00Z", "succeeded": 118, "failed": 3, "dead_lettered": 1, "p50_ms": 41.2, "p90_ms": 88.0, "p99_ms": 240.5},
                    "points": [{"at": "2026-11-26T09:14:00Z", "succeeded": 118, "failed": 3, "dead_lettered": 1, "p50_ms": 41.2, "p90_ms": 88.0, "p99_ms": 240.5}]})),
            (status = 400, description = "`unknown_parameter` (naming it: `tenant_id` is `/v1/stats`' only), `invalid_type` (a time that is not RFC 3339, an unknown `bucket`).", body = ErrorBody),
            (status = 401, description = "`unauthorized`.", body = ErrorBody),
            (status = 403, description = "`forbidden`: the role may not read.", body = ErrorBody),
            (status = 404, description = "`not_found`: no such subscription for this key.", body = ErrorBody),
            (status = 422, description = "`invalid_range`: `until` not after `since` (naming `until`), or a range over 24 hours of minutes or over the retention of hours (naming `since`).", body = ErrorBody,
                example = json!({"error": {"code": "invalid_range", "message": "minute buckets cover at most 24 hours; use bucket=hour for longer ranges", "field": "since", "errors": [{"field": "since", "code": "invalid_range", "message": "minute buckets cover at most 24 hours; use bucket=hour for longer ranges"}]}})),
            (status = 503, description = "`unavailable`.", body = ErrorBody)
        ),
        security(("bearer" = []), ("sigv4" = []))
    )]
    fn subscription_stats() {}

    /// `GET /v1/stats`.
    #[utoipa::path(
        get,
        path = "/v1/stats",
        operation_id = "system_stats",
        tag = "stats",
        summary = "Delivery statistics of the whole system or one tenant",
        description = "Attempts by outcome and latency percentiles of every subscription (or of one tenant's: `tenant_id`; a tenant-bound key always reads its own), per minute (at most 24 hours) or per hour (at most the retention), oldest first. One stored series is read, never each subscription's.",
        params(wire::StatsQuery),
        responses(
            (status = 200, description = "The series.", body = wire::Stats,
                example = json!({"subscription_id": null, "tenant_id": "acme", "bucket": "hour", "since": "2026-11-19T10:00:00Z", "until": "2026-11-26T10:00:00Z",
                    "total": {"at": "2026-11-19T10:00:00Z", "succeeded": 5120, "failed": 12, "dead_lettered": 2, "p50_ms": 38.5, "p90_ms": 95.0, "p99_ms": 410.0},
                    "points": [{"at": "2026-11-26T09:00:00Z", "succeeded": 5120, "failed": 12, "dead_lettered": 2, "p50_ms": 38.5, "p90_ms": 95.0, "p99_ms": 410.0}]})),
            (status = 400, description = "`unknown_parameter` (naming it), `invalid_type` (a time that is not RFC 3339, an unknown `bucket`).", body = ErrorBody),
            (status = 401, description = "`unauthorized`.", body = ErrorBody),
            (status = 403, description = "`forbidden`: the role may not read, or a tenant-bound key names another tenant.", body = ErrorBody),
            (status = 422, description = "`invalid_range` (`until` not after `since`; a range over 24 hours of minutes or over the retention of hours), `invalid_field` (`tenant_id`); every bad parameter in `errors`.", body = ErrorBody),
            (status = 503, description = "`unavailable`.", body = ErrorBody)
        ),
        security(("bearer" = []), ("sigv4" = []))
    )]
    fn system_stats() {}

    /// This module's part of the document.
    #[derive(utoipa::OpenApi)]
    #[openapi(
        paths(subscription_stats, system_stats),
        components(schemas(wire::Bucket, wire::Stats, wire::StatsPoint)),
        tags((name = "stats", description = "Delivery statistics behind the console's charts."))
    )]
    pub(super) struct Part;
}

/// This module's part of the OpenAPI document ([`super::openapi`]).
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    <spec::Part as utoipa::OpenApi>::openapi()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn ranges_default_align_and_name_the_bad_field() {
        let now = t("2026-11-26T10:00:30Z");
        let week = chrono::Duration::days(7);
        let r = checked_range(None, None, None, week, now).unwrap();
        assert_eq!((r.since, r.until, r.width), (t("2026-11-26T09:00:00Z"), now, Width::Minute));
        let r = checked_range(None, None, Some(wire::Bucket::Hour), chrono::Duration::days(3), now).unwrap();
        assert_eq!(r.since, t("2026-11-23T10:00:00Z"), "a week, or the retention when shorter");
        let e = checked_range(Some(now), Some(now), None, week, now).unwrap_err();
        assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidRange, Some("until")));
        let e = checked_range(Some(now - chrono::Duration::hours(25)), None, None, week, now).unwrap_err();
        assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidRange, Some("since")));
        let e = checked_range(Some(now - chrono::Duration::days(8)), None, Some(wire::Bucket::Hour), week, now)
            .unwrap_err();
        assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidRange, Some("since")));
    }

    #[test]
    fn points_carry_percentiles_and_the_total_adds_them() {
        let mut a = Tally { succeeded: 2, ..Tally::default() };
        a.latency.observe(40);
        a.latency.observe(45);
        let b = Tally { failed: 1, dead_lettered: 1, ..Tally::default() };
        let points =
            [Point { at: t("2026-11-26T09:01:00Z"), tally: a }, Point { at: t("2026-11-26T09:02:00Z"), tally: b }];
        let r = Range { since: t("2026-11-26T09:00:00Z"), until: t("2026-11-26T10:00:00Z"), width: Width::Minute };
        let s = stats(&points, r, Some("sub_1".into()), None);
        assert_eq!((s.total.succeeded, s.total.failed, s.total.dead_lettered), (2, 1, 1));
        assert!(s.total.p50_ms.is_some_and(|p| (30.0..=50.0).contains(&p)));
        assert_eq!(s.points[1].p99_ms, None, "no latency counted");
        assert_eq!(s.points.len(), 2);
    }
}
