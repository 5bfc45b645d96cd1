//! `GET /v1/audit`: the audit trail ([`shared::audit`]), newest first.
//! Filters `action` (one of the actions' names), `actor` (exact),
//! `subscription_id`, `tenant_id`, `since`/`until` (on `at`; checked against the audit
//! retention); `limit`, `cursor` as every list.

use serde::Serialize;

use super::routes::Call;
use super::scope::tenant_filter;
use super::{cursor, query, query_param, Api, ApiError, ApiResult, Response};
use shared::audit::{Action, AuditFilter, AuditRecord};
use shared::ids::SubscriptionId;

/// One page.
#[derive(Serialize)]
struct AuditList {
    items: Vec<AuditRecord>,
    next_cursor: Option<String>,
}

impl Api {
    /// `GET /v1/audit`; a tenant-bound caller lists the records of its
    /// tenant's resources only (`tenant_id` forced to its own).
    pub(super) async fn list_audit(&self, c: &Call<'_>) -> ApiResult {
        let req = &c.req;
        let limit = query::limit(req)?;
        let action = query_param(req.query, "action")
            .map(|a| a.parse::<Action>().map_err(|e| ApiError::invalid("action", e.to_string())))
            .transpose()?;
        let actor = query_param(req.query, "actor");
        if actor.as_deref().is_some_and(|a| a.is_empty() || a.len() > 1000) {
            return Err(ApiError::invalid("actor", "actor must be 1 to 1000 characters"));
        }
        let subscription_id = query_param(req.query, "subscription_id");
        if subscription_id.as_deref().is_some_and(|s| s.is_empty() || s.len() > shared::envelope::MAX_ID_BYTES) {
            return Err(ApiError::invalid("subscription_id", "subscription_id must be a subscription id"));
        }
        let tenant_id = super::subscriptions::tenant(query_param(req.query, "tenant_id"))?;
        let tenant_id = tenant_filter(&c.caller, tenant_id, "tenant_id")?;
        let range = query::time_range(req, self.hookline.config.audit_retention)?;
        let filters = format!(
            "action={}\nactor={}\nsubscription_id={}\ntenant_id={}\nsince={}\nuntil={}",
            action.map_or("", Action::as_str),
            actor.as_deref().unwrap_or(""),
            subscription_id.as_deref().unwrap_or(""),
            tenant_id.as_ref().map_or("", |t| t.as_str()),
            range.since.map(|t| t.timestamp_millis()).unwrap_or_default(),
            range.until.map(|t| t.timestamp_millis()).unwrap_or_default(),
        );
        let after = query_param(req.query, "cursor")
            .map(|c| {
                cursor::read(&self.cursor_key(), &c, &filters).map_err(|e| ApiError::invalid("cursor", e.to_string()))
            })
            .transpose()?;
        let filter =
            AuditFilter { action, actor, subscription_id: subscription_id.map(SubscriptionId::new), tenant_id, range };
        let page = self.hookline.stores.audit.page(&filter, limit, after.as_deref()).await?;
        Ok(Response::json(
            200,
            &AuditList {
                items: page.items,
                next_cursor: page.next.map(|n| cursor::issue(&self.cursor_key(), &n, &filters)),
            },
        ))
    }
}

/// This module's part of the OpenAPI document ([`super::openapi`]): its
/// routes' paths and the wire types they use.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi()]
    struct Part;
    <Part as utoipa::OpenApi>::openapi()
}
