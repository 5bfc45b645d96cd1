//! `GET /v1/audit`: the audit trail ([`shared::audit`]), newest first.
//! Filters `action` (one of the actions' names), `actor` (exact),
//! `subscription_id`, `tenant_id`, `since`/`until` (on `at`; checked against the audit
//! retention); `limit`, `cursor` as every list.

use chrono::Utc;

use super::error::Issues;
use super::routes::Call;
use super::scope::tenant_filter;
use super::{cursor, query, Api, ApiError, ApiResult, Response};
use hookline_wire::audit as wire;
use hookline_wire::Page;
use shared::audit::{Action, AuditFilter, AuditRecord};
use shared::ids::{SubscriptionId, TenantId};
use shared::ports::TimeRange;

/// An action as the wire names it (the same names: `event.replayed`).
fn wire_action(a: Action) -> wire::AuditAction {
    use wire::AuditAction as W;
    match a {
        Action::SubscriptionCreated => W::SubscriptionCreated,
        Action::SubscriptionUpdated => W::SubscriptionUpdated,
        Action::SubscriptionDeleted => W::SubscriptionDeleted,
        Action::SubscriptionVerified => W::SubscriptionVerified,
        Action::SubscriptionVerificationFailed => W::SubscriptionVerificationFailed,
        Action::SubscriptionSecretRotated => W::SubscriptionSecretRotated,
        Action::SubscriptionDisabled => W::SubscriptionDisabled,
        Action::SubscriptionEnabled => W::SubscriptionEnabled,
        Action::DeadLetterRequeued => W::DeadLetterRequeued,
        Action::DeadLetterSkipped => W::DeadLetterSkipped,
        Action::DeadLettersRequeueStarted => W::DeadLettersRequeueStarted,
        Action::DeadLettersSkipStarted => W::DeadLettersSkipStarted,
        Action::EventReplayed => W::EventReplayed,
        Action::ReplayStarted => W::ReplayStarted,
        Action::BreakerOpened => W::BreakerOpened,
        Action::BreakerClosed => W::BreakerClosed,
        Action::LaneSkipped => W::LaneSkipped,
        Action::KeyCreated => W::KeyCreated,
        Action::KeyRotated => W::KeyRotated,
        Action::KeyRevoked => W::KeyRevoked,
        Action::PortalLinkCreated => W::PortalLinkCreated,
        Action::SubscriptionTestSent => W::SubscriptionTestSent,
        Action::EventTypeRegistered => W::EventTypeRegistered,
        Action::DeliveryAcknowledged => W::DeliveryAcknowledged,
    }
}

/// The stored action a filter names (the inverse of [`wire_action`]).
fn stored_action(a: wire::AuditAction) -> Action {
    Action::ALL.into_iter().find(|s| wire_action(*s) == a).expect("every wire action is a stored one")
}

/// A stored record on the wire.
fn record(r: AuditRecord) -> wire::AuditRecord {
    wire::AuditRecord {
        id: r.id,
        at: r.at,
        actor: r.actor,
        action: wire_action(r.action),
        reason: r.reason,
        subscription_id: r.subscription_id.map(SubscriptionId::into_string),
        event_id: r.event_id.map(|e| e.into_string()),
        dead_letter_id: r.dead_letter_id.map(|d| d.into_string()),
        job_id: r.job_id,
        tenant_id: r.tenant_id.map(|t| t.as_str().to_string()),
        details: match r.details {
            serde_json::Value::Object(m) => m,
            serde_json::Value::Null => serde_json::Map::new(),
            other => serde_json::Map::from_iter([("value".to_string(), other)]),
        },
    }
}

/// The audit listing's filters checked, every bad one reported at once:
/// the page size, the tenant named and the time range.
fn checked(
    q: &wire::AuditQuery,
    retention: chrono::Duration,
) -> Result<(usize, Option<TenantId>, TimeRange), ApiError> {
    let mut issues = Issues::default();
    let limit = issues.take(query::page_limit(q.limit, query::DEFAULT_PAGE, query::MAX_PAGE));
    if q.actor.as_deref().is_some_and(|a| a.is_empty() || a.chars().count() > 1000) {
        issues.push(ApiError::invalid("actor", "actor must be 1 to 1000 characters"));
    }
    if q.subscription_id.as_deref().is_some_and(|s| s.is_empty() || s.len() > shared::envelope::MAX_ID_BYTES) {
        issues.push(ApiError::invalid("subscription_id", "subscription_id must be a subscription id"));
    }
    let tenant_id = issues.take(super::subscriptions::tenant(q.tenant_id.clone())).flatten();
    let range = issues.take(query::check_range(TimeRange { since: q.since, until: q.until }, retention, Utc::now()));
    issues.check()?;
    Ok((limit.unwrap_or(query::DEFAULT_PAGE), tenant_id, range.unwrap_or_default()))
}

/// For the fuzzer ([`crate::fuzzing`]): the query string of `GET
/// /v1/audit` read and checked as its handler does before any store call.
pub(crate) fn fuzz_query(query: Option<&str>, retention: chrono::Duration) -> bool {
    query::typed::<wire::AuditQuery>(query).and_then(|q| checked(&q, retention)).is_ok()
}

impl Api {
    /// `GET /v1/audit` ([`wire::AuditQuery`]); a tenant-bound caller lists
    /// the records of its tenant's resources only (`tenant_id` forced to
    /// its own). Every bad filter is reported at once.
    pub(super) async fn list_audit(&self, c: &Call<'_>) -> ApiResult {
        let q: wire::AuditQuery = query::typed(c.req.query)?;
        let (limit, tenant_id, range) = checked(&q, self.hookline.config.audit_retention)?;
        let tenant_id = tenant_filter(&c.caller, tenant_id, "tenant_id")?;
        let action = q.action.map(stored_action);
        let filters = format!(
            "action={}\nactor={}\nsubscription_id={}\ntenant_id={}\nsince={}\nuntil={}",
            action.map_or("", Action::as_str),
            q.actor.as_deref().unwrap_or(""),
            q.subscription_id.as_deref().unwrap_or(""),
            tenant_id.as_ref().map_or("", |t| t.as_str()),
            range.since.map(|t| t.timestamp_millis()).unwrap_or_default(),
            range.until.map(|t| t.timestamp_millis()).unwrap_or_default(),
        );
        let after = self.page_after("cursor", q.cursor.as_deref(), &filters)?;
        let filter = AuditFilter {
            action,
            actor: q.actor,
            subscription_id: q.subscription_id.map(SubscriptionId::new),
            tenant_id,
            range,
        };
        let page = self.hookline.stores.audit.page(&filter, limit, after.as_deref()).await?;
        Ok(Response::json(
            200,
            &Page::new(
                page.items.into_iter().map(record).collect::<Vec<_>>(),
                page.next.map(|n| cursor::issue(&self.cursor_key(), &n, &filters)),
            ),
        ))
    }
}

/// The operations of this module, and of the two operational routes
/// (`/healthz`, `/metrics`, answered in [`super::routes`]), as the OpenAPI
/// document describes them.
#[allow(dead_code)]
mod spec {
    use hookline_wire::audit as wire;
    use hookline_wire::health::{Health, HealthStatus};
    use hookline_wire::{ErrorBody, Page};

    /// `GET /v1/audit`.
    #[utoipa::path(
        get,
        path = "/v1/audit",
        operation_id = "list_audit",
        tag = "audit",
        summary = "Read the audit trail",
        description = "One page of the audit trail (who changed what, when and why), newest first, matching every filter given. A tenant-bound key sees its tenant's records only.",
        params(wire::AuditQuery),
        responses(
            (status = 200, description = "One page.", body = Page<wire::AuditRecord>,
                example = json!({"items": [{"id": "aud_0193", "at": "2026-11-26T09:30:00Z", "actor": "key:ops", "action": "event.replayed", "reason": "customer lost it", "event_id": "evt_1", "details": {"replay_key": "rpl_01", "sagas": 1}}], "next_cursor": null})),
            (status = 400, description = "`unknown_parameter` (naming it), `invalid_type` (an unknown `action`, a time that is not RFC 3339, a `limit` that is no integer), `invalid_cursor` (a `cursor` not issued for these filters).", body = ErrorBody,
                example = json!({"error": {"code": "unknown_parameter", "message": "unknown query parameter `subscription`", "field": "subscription", "errors": [{"field": "subscription", "code": "unknown_parameter", "message": "unknown query parameter `subscription`"}]}})),
            (status = 401, description = "`unauthorized`.", body = ErrorBody),
            (status = 403, description = "`forbidden`: the role may not read, or a tenant-bound key names another tenant.", body = ErrorBody),
            (status = 422, description = "`invalid_field` (`actor`, `subscription_id`, `tenant_id`, `limit` out of range), `invalid_range` (outside the audit retention, or reversed); every bad filter in `errors`.", body = ErrorBody),
            (status = 503, description = "`unavailable`.", body = ErrorBody)
        ),
        security(("bearer" = []), ("sigv4" = []))
    )]
    fn list_audit() {}

    /// `GET /healthz`.
    #[utoipa::path(
        get,
        path = "/healthz",
        operation_id = "healthz",
        tag = "operations",
        summary = "Liveness",
        description = "Answers while the process runs; reads no storage and needs no credential.",
        responses(
            (status = 200, description = "Up.", body = Health),
            (status = 400, description = "`unknown_parameter`: the route takes no query parameter.", body = ErrorBody)
        )
    )]
    fn healthz() {}

    /// `GET /metrics`.
    #[utoipa::path(
        get,
        path = "/metrics",
        operation_id = "metrics",
        tag = "operations",
        summary = "Prometheus metrics",
        description = "The whole system's counters and gauges in the Prometheus text format (queue depths, open dead letters, unhealthy subscriptions).",
        responses(
            (status = 200, description = "Prometheus text exposition format 0.0.4.", body = String, content_type = "text/plain; version=0.0.4",
                example = "# HELP hookline_deliveries_total Delivery attempts by outcome.\n# TYPE hookline_deliveries_total counter\nhookline_deliveries_total{outcome=\"delivered\"} 42\n"),
            (status = 400, description = "`unknown_parameter`: the route takes no query parameter.", body = ErrorBody),
            (status = 401, description = "`unauthorized`.", body = ErrorBody),
            (status = 403, description = "`forbidden`: the role may not read metrics (a tenant-bound key never may).", body = ErrorBody)
        ),
        security(("bearer" = []), ("sigv4" = []))
    )]
    fn metrics() {}

    /// This module's part of the document.
    #[derive(utoipa::OpenApi)]
    #[openapi(
        paths(list_audit, healthz, metrics),
        components(schemas(wire::AuditAction, wire::AuditRecord, Health, HealthStatus)),
        tags(
            (name = "audit", description = "Who changed what, when and why."),
            (name = "operations", description = "Liveness and metrics.")
        )
    )]
    pub(super) struct Part;
}

/// This module's part of the OpenAPI document ([`super::openapi`]): its
/// routes' paths and the wire types they use, and those of `/healthz` and
/// `/metrics`.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = <spec::Part as utoipa::OpenApi>::openapi();
    // `/healthz` is open: an empty list overrides any document-wide
    // security requirement.
    if let Some(op) = doc.paths.paths.get_mut("/healthz").and_then(|p| p.get.as_mut()) {
        op.security = Some(Vec::new());
    }
    doc
}
