//! The subscriber portal and the console's helpers: `POST /v1/portal-links`
//! (a signed, expiring link for one tenant, [`shared::portal`]), `GET
//! /v1/me` (who the caller is and what it may do), `GET /v1/event-types`
//! (the types seen at ingest, [`shared::event_types`]) and `POST
//! /v1/subscriptions/{subscription}/test` (one test event to one
//! subscription). The access check and tenant scoping ran before these
//! handlers (the route table's action, [`super::scope`]).

use chrono::{Duration, Utc};
use hookline_wire::portal as wire;
use hookline_wire::{ErrorBody, Page};
use serde_json::json;

use super::error::{ErrorCode, Issues};
use super::routes::Call;
use super::scope::tenant_filter;
use super::{cursor, parse, query, Api, ApiError, ApiResult, Response};
use shared::access::{Action, Caller, Role};
use shared::audit::{Action as Audited, AuditRecord};
use shared::event_types::TypeScope;
use shared::ids::{SubscriptionId, TenantId};
use shared::portal::{self, DEFAULT_LIFETIME_SECONDS, MAX_LIFETIME_SECONDS};
use shared::stage::ingest::{ingest_test, TEST_EVENT_TYPE};

/// Where a portal link points, relative to the API's own base (the link is
/// relative: the API cannot know the name its callers reach it by behind a
/// proxy or API Gateway; a client joins it to the base it called).
pub const PORTAL_PATH: &str = "/ui/#/portal?token=";

/// The wire spelling of a caller's role.
fn role_view(r: Role) -> wire::CallerRole {
    match r {
        Role::Producer => wire::CallerRole::Producer,
        Role::Reader => wire::CallerRole::Reader,
        Role::Operator => wire::CallerRole::Operator,
        Role::Admin => wire::CallerRole::Admin,
        Role::Portal => wire::CallerRole::Portal,
        Role::Subscriber => wire::CallerRole::Subscriber,
    }
}

/// The wire spelling of an action.
fn permission(a: Action) -> wire::Permission {
    use wire::Permission as P;
    match a {
        Action::Identify => P::Identify,
        Action::PostEvents => P::PostEvents,
        Action::Read => P::Read,
        Action::ReadMetrics => P::ReadMetrics,
        Action::Recover => P::Recover,
        Action::ManageSubscriptions => P::ManageSubscriptions,
        Action::ManageKeys => P::ManageKeys,
        Action::Rebuild => P::Rebuild,
        Action::ManageCatalog => P::ManageCatalog,
        Action::Pull => P::Pull,
    }
}

/// The body of `POST /v1/portal-links` checked, every bad field reported:
/// the tenant and the lifetime.
fn link_body(b: wire::CreatePortalLink) -> Result<(TenantId, Duration), ApiError> {
    let mut issues = Issues::default();
    let tenant = issues.take(
        shared::envelope::check_id(&b.tenant_id)
            .map_err(|e| ApiError::invalid("tenant_id", format!("tenant_id {e}")))
            .and_then(|()| {
                if b.tenant_id.trim().is_empty() {
                    Err(ApiError::invalid("tenant_id", "tenant_id must not be blank"))
                } else {
                    Ok(TenantId::new(&b.tenant_id))
                }
            }),
    );
    let seconds = b.expires_in_seconds.unwrap_or(DEFAULT_LIFETIME_SECONDS);
    if !(1..=MAX_LIFETIME_SECONDS).contains(&seconds) {
        issues.push(ApiError::invalid(
            "expires_in_seconds",
            format!("expires_in_seconds must be an integer between 1 and {MAX_LIFETIME_SECONDS} (7 days)"),
        ));
    }
    issues.check()?;
    Ok((tenant.expect("checked"), Duration::seconds(seconds)))
}

impl Api {
    /// `POST /v1/portal-links` (`ManageKeys`): a token for one tenant (a
    /// tenant-bound caller: its own, another is `403` naming `tenant_id`),
    /// valid for `expires_in_seconds` (default one hour, at most 7 days),
    /// and the relative link that opens the portal with it. Audited
    /// (`portal_link.created`, with the link's id, never its token).
    pub(super) async fn create_portal_link(&self, c: &Call<'_>) -> ApiResult {
        query::none(c.req.query)?;
        let body: wire::CreatePortalLink = parse(c.req.body, false)?;
        let (tenant, lifetime) = link_body(body)?;
        let tenant = tenant_filter(&c.caller, Some(tenant), "tenant_id")?.expect("a tenant was named");
        let (token, grant) = portal::mint(&self.hookline.keyring, &tenant, Utc::now() + lifetime);
        let mut rec = AuditRecord::new(Audited::PortalLinkCreated, c.caller.actor.clone())
            .details(json!({"link_id": grant.id, "expires_at": grant.expires_at}));
        rec.tenant_id = Some(tenant.clone());
        self.hookline.audit(rec).await;
        let link = wire::PortalLink {
            tenant_id: tenant.as_str().to_string(),
            url: format!("{PORTAL_PATH}{token}"),
            token,
            expires_at: grant.expires_at,
        };
        Ok(Response::json(201, &link))
    }

    /// `GET /v1/me` (`Identify`, every role): the caller's actor, role,
    /// tenant and permissions; a portal token's expiry.
    pub(super) async fn me(&self, c: &Call<'_>) -> ApiResult {
        query::none(c.req.query)?;
        let caller: &Caller = &c.caller;
        let expires_at = match caller.role {
            Role::Portal => c
                .req
                .authorization
                .and_then(|h| h.strip_prefix("Bearer "))
                .and_then(|t| portal::verify(&self.hookline.keyring, t.trim(), Utc::now()).ok())
                .map(|g| g.expires_at),
            _ => None,
        };
        let me = wire::Me {
            actor: caller.actor.clone(),
            role: role_view(caller.role),
            tenant_id: caller.tenant.as_ref().map(|t| t.as_str().to_string()),
            permissions: caller.actions().into_iter().map(permission).collect(),
            expires_at,
        };
        Ok(Response::json(200, &me))
    }

    /// `GET /v1/event-types` (`Read`): one page of the types seen at
    /// ingest for `tenant_id` (a bound caller: its own tenant, whether
    /// named or not), or for an unbound caller without it the types seen
    /// across every tenant, merged with the (deployment-wide) event
    /// catalog's registered types ([`super::catalog::merge`]); in type
    /// order, paged with the API's cursors.
    pub(super) async fn list_event_types(&self, c: &Call<'_>) -> ApiResult {
        let q: wire::EventTypeQuery = query::typed(c.req.query)?;
        let limit = query::page_limit(q.limit, query::DEFAULT_PAGE, query::MAX_PAGE)?;
        let named = q.tenant_id.map(|t| super::dead_letters::name_value("tenant_id", t)).transpose()?;
        let scope = match tenant_filter(&c.caller, named.map(TenantId::new), "tenant_id")? {
            Some(t) => TypeScope::Tenant(t),
            None => TypeScope::All,
        };
        let filters = format!("event-types\nscope={}", scope.as_text());
        let after = self.page_after("cursor", q.cursor.as_deref(), &filters)?;
        let seen = self.hookline.stores.event_types.page(&scope, limit, after.as_deref()).await?;
        let registered = self.hookline.stores.event_types.catalog_page(limit, after.as_deref()).await?;
        let tenant = match &scope {
            TypeScope::Tenant(t) => Some(t.as_str()),
            TypeScope::All => None,
        };
        let (items, next) = super::catalog::merge(seen, registered, tenant, limit);
        Ok(Response::json(200, &Page::new(items, next.map(|n| cursor::issue(&self.cursor_key(), &n, &filters)))))
    }

    /// `POST /v1/subscriptions/{subscription}/test` (`ManageSubscriptions`):
    /// stores one test event (type `event_type`, default `hookline.test`;
    /// `data`, default `{"test": true}`) for this subscription only, which
    /// routing sends to it alone through the usual sagas, signing and
    /// retries ([`shared::stage::ingest::ingest_test`]). A paused or
    /// unverified subscription would never receive it: `409`, nothing
    /// stored. Audited (`subscription.test_sent`).
    pub(super) async fn send_test_event(&self, id: &SubscriptionId, c: &Call<'_>) -> ApiResult {
        query::none(c.req.query)?;
        let body: wire::SendTestEvent = parse(c.req.body, true)?;
        let sub = self.visible_subscription(&c.caller, id, "subscription").await?;
        if !sub.is_routable() {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                "the subscription receives no events until it is active and verified; nothing was sent",
            ));
        }
        let event_type = body.event_type.unwrap_or_else(|| TEST_EVENT_TYPE.to_string());
        let data = body.data.unwrap_or_else(|| json!({"test": true}));
        let accepted = ingest_test(&self.hookline, &sub, &event_type, data).await.map_err(|e| {
            // The envelope's fields as this body names them.
            let mut e = ApiError::from(e);
            let rename = |f: &str| match f {
                "type" => "event_type".to_string(),
                other => other.to_string(),
            };
            e.field = e.field.as_deref().map(rename);
            for i in &mut e.issues {
                i.field = rename(&i.field);
            }
            e
        })?;
        let mut rec = AuditRecord::new(Audited::SubscriptionTestSent, c.caller.actor.clone())
            .subscription(&sub.id)
            .details(json!({"event_type": event_type}));
        rec.event_id = Some(accepted.event_id.clone());
        rec.tenant_id = sub.tenant_id.clone();
        self.hookline.audit(rec).await;
        let sent = wire::TestEventSent {
            event_id: accepted.event_id.as_str().to_string(),
            subscription_id: sub.id.as_str().to_string(),
            event_type,
        };
        Ok(Response::json(202, &sent))
    }
}

/// `POST /v1/portal-links`.
#[utoipa::path(
    post,
    path = "/v1/portal-links",
    tag = "portal",
    summary = "Create a portal link",
    description = "A signed link that opens the console's portal for one tenant: its subscriptions, deliveries and \
        dead letters, nothing else. Its token is a credential (`Authorization: Bearer <token>`) with the `portal` \
        role, bound to the tenant, until `expires_at` (default one hour, at most 7 days); it cannot be revoked \
        earlier except by rotating the deployment's data key. `url` is relative to the API's base. A key bound to \
        a tenant creates links for its tenant only. Admins only. Audited (`portal_link.created`, never the token).",
    request_body(content = wire::CreatePortalLink, example = json!({"tenant_id": "acme", "expires_in_seconds": 3600})),
    responses(
        (status = 201, description = "Created; the token is shown this once.", body = wire::PortalLink,
            example = json!({"tenant_id": "acme", "url": "/ui/#/portal?token=hlp1.1764385200.9f86d081884c7d65.YWNtZQ.3q2-7w",
                "token": "hlp1.1764385200.9f86d081884c7d65.YWNtZQ.3q2-7w", "expires_at": "2026-11-29T03:00:00Z"})),
        (status = 400, description = super::dead_letters::body_400!(), body = ErrorBody),
        (status = 403, description = "`forbidden`: not an admin, or `tenant_id` names another tenant than the \
            key's.", body = ErrorBody),
        (status = 422, description = "`invalid_field`: `tenant_id` empty, blank, too long or with control \
            characters; `expires_in_seconds` out of 1 to 604800.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn create_portal_link() {}

/// `GET /v1/me`.
#[utoipa::path(
    get,
    path = "/v1/me",
    tag = "portal",
    summary = "Who am I",
    description = "The caller as the API sees it: its actor (as audited), role (`portal` for a portal link's \
        token), tenant, and the permissions it has, so a console shows only what the credential may do. Every \
        role may call it.",
    responses(
        (status = 200, description = "The caller.", body = wire::Me),
        (status = 400, description = "`unknown_parameter`: a query parameter (the route takes none).", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn me() {}

/// `GET /v1/event-types`.
#[utoipa::path(
    get,
    path = "/v1/event-types",
    tag = "portal",
    summary = "List event types",
    description = "One page of the event types accepted so far, in type order: of `tenant_id` (a tenant-bound \
        key or portal token: its own tenant, whether named or not), or without it, for an unbound key, across \
        every tenant. Recorded at ingest once per tenant and type (test and operational events are not). Merged \
        with the event catalog (deployment-wide, so in every tenant's listing): a registered type is \
        `registered: true` with its name, version, description, schema and example, and `first_seen_at` null \
        until it is seen. For choosing a subscription's `event_types`.",
    params(wire::EventTypeQuery),
    responses(
        (status = 200, description = "A page of types.", body = Page<wire::EventType>, example = json!({
            "items": [{"event_type": "order.created", "tenant_id": "acme", "first_seen_at": "2026-11-28T09:00:00Z"}],
            "next_cursor": null})),
        (status = 400, description = "The query string could not be read; `field` names the parameter.\n\n\
            `unknown_parameter`: a parameter the route does not take, or one given twice.\n\n`invalid_type`: \
            `limit` not an integer.\n\n`invalid_cursor`: a cursor of another listing.", body = ErrorBody),
        (status = 403, description = "`forbidden`: `tenant_id` names another tenant than the key's.", body = ErrorBody),
        (status = 422, description = "`invalid_field`: `limit` out of 1 to 1000, a bad `tenant_id`.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn list_event_types() {}

/// This module's part of the OpenAPI document ([`super::openapi`]): its
/// routes' paths and the wire types they use.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(
        paths(create_portal_link, me, list_event_types),
        components(schemas(
            wire::CreatePortalLink,
            wire::PortalLink,
            wire::CallerRole,
            wire::Permission,
            wire::Me,
            wire::EventType
        ))
    )]
    struct Part;
    <Part as utoipa::OpenApi>::openapi()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(v: serde_json::Value) -> wire::CreatePortalLink {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_link_body_reports_every_bad_field_and_defaults_to_an_hour() {
        let (t, d) = link_body(body(json!({"tenant_id": "acme"}))).unwrap();
        assert_eq!((t.as_str(), d), ("acme", Duration::hours(1)));
        assert_eq!(
            link_body(body(json!({"tenant_id": "a", "expires_in_seconds": 604800}))).unwrap().1,
            Duration::days(7)
        );
        let e = link_body(body(json!({"tenant_id": " ", "expires_in_seconds": 604801}))).unwrap_err();
        let fields: Vec<&str> = e.issues.iter().map(|i| i.field.as_str()).collect();
        assert_eq!((e.status(), fields), (422, vec!["tenant_id", "expires_in_seconds"]));
        let e = link_body(body(json!({"tenant_id": "a\u{0007}", "expires_in_seconds": 0}))).unwrap_err();
        assert_eq!(e.issues.len(), 2, "{e:?}");
    }

    #[test]
    fn every_role_and_action_has_its_wire_name() {
        for r in Role::EVERY {
            assert_eq!(serde_json::to_value(role_view(r)).unwrap(), r.as_str());
        }
        for a in Action::ALL {
            assert_eq!(serde_json::to_value(permission(a)).unwrap(), a.as_str());
        }
    }
}
