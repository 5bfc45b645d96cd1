//! `/v1/keys`: API keys (`hookline serve`) and principal grants (AWS),
//! managed through the API ([`shared::api_key`]). Every route is the action
//! [`shared::access::Action::ManageKeys`], checked by the route table before
//! these handlers run. A caller never hands out more
//! than it has: a role it may grant ([`shared::access::Role::may_grant`])
//! and, when bound to a tenant, only keys of that tenant; it sees, rotates
//! and revokes only keys it could have created. A secret is shown once, in
//! the answer that created it; listings show its first characters only
//! (of a generated one).

use super::error::ErrorCode;
use chrono::{DateTime, Utc};
use hookline_wire::keys as wire;
use hookline_wire::{ErrorBody, Page};
use serde_json::json;

use super::error::Issues;
use super::scope::tenant_filter;
use super::{cursor, parse, query, Api, ApiError, ApiResult, Auth, Request, Response};
use shared::access::{Caller, Role};
use shared::api_key::{
    check_name, check_principal, display_prefix, generate_secret, principal_lookup, secret_lookup, ApiKeyRecord,
    KeyConflict, StoredCredential,
};
use shared::audit::{Action as Audited, AuditRecord};
use shared::ids::{ApiKeyId, TenantId};

/// The longest `expires_in_seconds`: ten years.
const MAX_EXPIRES_IN_SECONDS: i64 = 10 * 366 * 86_400;

/// The longest `overlap_seconds` of a rotation: seven days.
const MAX_OVERLAP_SECONDS: i64 = 7 * 86_400;

/// The wire spelling of a role.
fn role_view(r: Role) -> wire::Role {
    match r {
        Role::Producer => wire::Role::Producer,
        Role::Reader => wire::Role::Reader,
        Role::Operator => wire::Role::Operator,
        Role::Admin => wire::Role::Admin,
        // No key holds the portal's role (it is never stored: serde skips
        // it, and no wire role names it); a reader is what it would show.
        Role::Portal => wire::Role::Reader,
        Role::Subscriber => wire::Role::Subscriber,
    }
}

/// The role a wire role names.
fn role_of(r: wire::Role) -> Role {
    match r {
        wire::Role::Producer => Role::Producer,
        wire::Role::Reader => Role::Reader,
        wire::Role::Operator => Role::Operator,
        wire::Role::Admin => Role::Admin,
        wire::Role::Subscriber => Role::Subscriber,
    }
}

/// A key as the API shows it: never a secret or its hash.
fn shown(k: &ApiKeyRecord, now: DateTime<Utc>) -> wire::Key {
    let secret_key = k.principal.is_none();
    wire::Key {
        id: k.id.to_string(),
        name: k.name.clone(),
        role: role_view(k.role),
        tenant_id: k.tenant.as_ref().map(ToString::to_string),
        state: match k.state(now) {
            "revoked" => wire::KeyState::Revoked,
            "expired" => wire::KeyState::Expired,
            _ => wire::KeyState::Active,
        },
        created_at: k.created_at,
        created_by: k.created_by.clone(),
        expires_at: k.expires_at,
        revoked_at: k.revoked_at,
        principal: k.principal.clone(),
        prefix: k.credentials.first().and_then(|c| c.prefix.clone()).filter(|_| secret_key),
        // The secret a rotation replaced, while it still works.
        previous_secret_until: k
            .credentials
            .iter()
            .skip(1)
            .find_map(|c| c.until.filter(|u| now < *u))
            .filter(|_| secret_key),
        subscription_id: k.subscription_id.as_ref().map(ToString::to_string),
    }
}

/// A key just created or rotated, with its secret (shown this once).
fn with_secret(k: &ApiKeyRecord, secret: Option<String>, now: DateTime<Utc>) -> wire::KeyWithSecret {
    wire::KeyWithSecret { key: shown(k, now), secret }
}

/// The 403 of a caller asking for more than it has, naming `field`.
fn beyond(field: &str, message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::Forbidden, message).on(field)
}

impl Api {
    /// The stored key `id` if this caller may see it: of its tenant (when
    /// bound), and of a role it may grant; otherwise 404, as if absent.
    async fn key_of(&self, caller: &Caller, id: &str) -> Result<ApiKeyRecord, ApiError> {
        let k = self.hookline.stores.keys.get(&ApiKeyId::new(id)).await?;
        k.filter(|k| caller.sees(k.tenant.as_ref()) && caller.role.may_grant(k.role))
            .ok_or_else(|| ApiError::not_found("key", id))
    }

    /// `POST /v1/keys` (`ManageKeys`): `{name, role, tenant_id?,
    /// expires_in_seconds?, principal?}` → 201 with the key and, for a
    /// secret key, its secret (shown this once). A secret key on `hookline
    /// serve`; behind API Gateway a principal grant, or (no `principal`) a
    /// console key: a secret that signs in to the console (`/ui/api`), since
    /// a browser cannot sign requests with IAM.
    pub(super) async fn create_key(&self, caller: &Caller, req: &Request<'_>) -> ApiResult {
        query::none(req.query)?;
        let body: wire::CreateKey = parse(req.body, false)?;
        let behind_gateway = matches!(self.auth, Auth::Gateway);
        let now = Utc::now();
        // Every bad field is reported (422 each), before what the caller
        // may not do (403).
        let mut issues = Issues::default();
        issues.take(check_name(&body.name).map_err(|e| ApiError::invalid("name", format!("name {e}"))));
        let named_tenant = body.tenant_id.is_some();
        let tenant = issues.take(super::subscriptions::tenant(body.tenant_id)).flatten();
        let expires_at = match body.expires_in_seconds {
            None => None,
            Some(n) if (1..=MAX_EXPIRES_IN_SECONDS).contains(&n) => Some(now + chrono::Duration::seconds(n)),
            Some(_) => {
                issues.push(ApiError::invalid(
                    "expires_in_seconds",
                    format!("expires_in_seconds must be an integer between 1 and {MAX_EXPIRES_IN_SECONDS}"),
                ));
                None
            }
        };
        match (&body.principal, behind_gateway) {
            (Some(_), false) => issues.push(ApiError::invalid(
                "principal",
                "principal grants are for AWS deployments (IAM); hookline serve's keys are secrets: leave principal out",
            )),
            (Some(p), true) => {
                issues.take(check_principal(p).map_err(|e| ApiError::invalid("principal", format!("principal {e}"))));
            }
            // Behind API Gateway a key without a principal is a console
            // key: a secret for the console's `/ui/api` (the one route
            // without the IAM authorizer); the signed `/v1` routes never
            // read it.
            (None, _) => {}
        }
        let role = role_of(body.role);
        match (role, &body.subscription_id) {
            (Role::Subscriber, None) => issues.push(ApiError::invalid(
                "subscription_id",
                "a subscriber key is bound to one subscription: name it in subscription_id",
            )),
            (Role::Subscriber, Some(_)) if named_tenant => issues.push(ApiError::invalid(
                "tenant_id",
                "a subscriber key takes its subscription's tenant: leave tenant_id out",
            )),
            (Role::Subscriber, Some(_)) => {}
            (_, Some(_)) => issues.push(ApiError::invalid(
                "subscription_id",
                "only a subscriber key is bound to a subscription: leave subscription_id out",
            )),
            (_, None) => {}
        }
        issues.check()?;
        if !caller.role.may_grant(role) {
            return Err(beyond(
                "role",
                format!("a {} key may not create a {} key", caller.role.as_str(), role.as_str()),
            ));
        }
        // A subscriber key is of its subscription's tenant, which must be
        // the caller's to see (404 naming it otherwise); any other bound
        // caller's keys are of its tenant (another: 403 naming it).
        let (tenant, subscription_id) = match &body.subscription_id {
            Some(id) => {
                let id = shared::ids::SubscriptionId::new(id.clone());
                let sub = self.visible_subscription(caller, &id, "subscription_id").await?;
                (sub.tenant_id, Some(id))
            }
            None => (tenant_filter(caller, tenant, "tenant_id")?, None),
        };
        let (credential, principal, secret) = match body.principal {
            Some(p) => (StoredCredential { lookup: principal_lookup(&p), prefix: None, until: None }, Some(p), None),
            None => {
                let s = generate_secret();
                let c = StoredCredential {
                    lookup: secret_lookup(&self.hookline.keyring, &s),
                    prefix: display_prefix(&s),
                    until: None,
                };
                (c, None, Some(s))
            }
        };
        let mut key = ApiKeyRecord::new(body.name, role, tenant, credential, caller.actor.clone(), now);
        key.expires_at = expires_at;
        key.principal = principal;
        key.subscription_id = subscription_id;
        match self.hookline.stores.keys.create(&key).await? {
            Ok(()) => {}
            Err(KeyConflict::Name) => {
                return Err(ApiError::new(ErrorCode::Conflict, "a key with this name exists in this tenant").on("name"))
            }
            Err(KeyConflict::Credential) => {
                return Err(ApiError::new(ErrorCode::Conflict, "this principal already has a grant").on("principal"))
            }
            Err(KeyConflict::Changed) => return Err(ApiError::conflict("the key could not be stored; try again")),
        }
        self.audit_key(Audited::KeyCreated, caller, &key).await;
        Ok(Response::json(201, &with_secret(&key, secret, now)))
    }

    /// `GET /v1/keys` (`ManageKeys`): one page of the keys of `tenant_id`
    /// (a bound caller: its own tenant; an unbound one: the tenant asked
    /// for, or without it the keys bound to no tenant), in id order.
    pub(super) async fn list_keys(&self, caller: &Caller, req: &Request<'_>) -> ApiResult {
        let q: wire::KeyListQuery = query::typed(req.query)?;
        let limit = query::page_limit(q.limit, query::DEFAULT_PAGE, query::MAX_PAGE)?;
        let tenant = tenant_filter(caller, q.tenant_id.map(TenantId::new), "tenant_id")?;
        let filters = format!("keys\ntenant={}", tenant.as_ref().map_or("", |t| t.as_str()));
        let after = self.page_after("cursor", q.cursor.as_deref(), &filters)?;
        let page = self.hookline.stores.keys.page(tenant.as_ref(), limit, after.as_deref()).await?;
        let now = Utc::now();
        // Keys of roles the caller may not grant are not its to see.
        let items: Vec<_> =
            page.items.iter().filter(|k| caller.role.may_grant(k.role)).map(|k| shown(k, now)).collect();
        Ok(Response::json(200, &Page::new(items, page.next.map(|n| cursor::issue(&self.cursor_key(), &n, &filters)))))
    }

    /// `GET /v1/keys/{id}` (`ManageKeys`).
    pub(super) async fn get_key(&self, caller: &Caller, id: &str, req: &Request<'_>) -> ApiResult {
        query::none(req.query)?;
        let k = self.key_of(caller, id).await?;
        Ok(Response::json(200, &shown(&k, Utc::now())))
    }

    /// `DELETE /v1/keys/{id}` (`ManageKeys`): revoked at once in this
    /// process, within [`shared::context::KEY_CACHE_TTL`] in every other.
    /// Revoking a revoked key changes nothing.
    pub(super) async fn revoke_key(&self, caller: &Caller, id: &str, req: &Request<'_>) -> ApiResult {
        query::none(req.query)?;
        let k = self.key_of(caller, id).await?;
        let now = Utc::now();
        if k.revoked_at.is_some() {
            return Ok(Response::json(200, &shown(&k, now)));
        }
        let revoked = k.revoked(now);
        self.changed(&k, &revoked).await?;
        self.audit_key(Audited::KeyRevoked, caller, &revoked).await;
        Ok(Response::json(200, &shown(&revoked, now)))
    }

    /// `POST /v1/keys/{id}/rotate` (`ManageKeys`, `{overlap_seconds?}`): a
    /// new secret, shown once; the old one keeps working for the overlap
    /// (default: the subscriptions' rotation overlap; 0 ends it now).
    pub(super) async fn rotate_key(&self, caller: &Caller, id: &str, req: &Request<'_>) -> ApiResult {
        query::none(req.query)?;
        let body: wire::RotateKey = parse(req.body, true)?;
        let overlap = match body.overlap_seconds {
            None => self.hookline.config.rotation_overlap,
            Some(n) if (0..=MAX_OVERLAP_SECONDS).contains(&n) => chrono::Duration::seconds(n),
            Some(_) => {
                return Err(ApiError::invalid(
                    "overlap_seconds",
                    format!("overlap_seconds must be an integer between 0 and {MAX_OVERLAP_SECONDS}"),
                ))
            }
        };
        let k = self.key_of(caller, id).await?;
        if k.principal.is_some() {
            return Err(ApiError::new(ErrorCode::Conflict, "a principal grant has no secret to rotate"));
        }
        if k.revoked_at.is_some() {
            return Err(ApiError::new(ErrorCode::Conflict, "the key is revoked"));
        }
        let now = Utc::now();
        let secret = generate_secret();
        let new = StoredCredential {
            lookup: secret_lookup(&self.hookline.keyring, &secret),
            prefix: display_prefix(&secret),
            until: None,
        };
        let rotated = k.rotated(new, now, overlap);
        self.changed(&k, &rotated).await?;
        self.audit_key(Audited::KeyRotated, caller, &rotated).await;
        Ok(Response::json(200, &with_secret(&rotated, Some(secret), now)))
    }

    /// Stores `next` on condition of `before`'s version and forgets the key
    /// in this process's cache.
    async fn changed(&self, before: &ApiKeyRecord, next: &ApiKeyRecord) -> Result<(), ApiError> {
        match self.hookline.stores.keys.update(next, before.version).await? {
            Ok(()) => {
                self.keys.forget(before);
                Ok(())
            }
            Err(KeyConflict::Changed) => Err(ApiError::conflict("the key changed meanwhile; read it and try again")),
            Err(KeyConflict::Credential | KeyConflict::Name) => {
                Err(ApiError::conflict("the new secret collided with another key's; try again"))
            }
        }
    }

    async fn audit_key(&self, action: Audited, caller: &Caller, k: &ApiKeyRecord) {
        let rec = AuditRecord::new(action, caller.actor.clone()).details(json!({
            "key_id": k.id,
            "name": k.name,
            "role": k.role,
            "tenant_id": k.tenant,
            "principal": k.principal,
        }));
        self.hookline.audit(rec).await;
    }
}

/// `POST /v1/keys`.
#[utoipa::path(
    post,
    path = "/v1/keys",
    tag = "keys",
    summary = "Create a key",
    description = "A secret key (its secret is in this answer only, never again) or, on AWS, a grant to an IAM \
        principal. On AWS a secret key is a console key: it signs in to the console (`/ui/api`), never to the \
        IAM-signed `/v1` routes. A key may create keys of its own role (an admin: any) and, when bound to a \
        tenant, of its tenant only. Every bad field of the body is reported at once; nothing is written.",
    request_body(content = wire::CreateKey),
    responses(
        (status = 201, description = "Created; `secret` is shown this once.", body = wire::KeyWithSecret,
            example = json!({"id": "key_0193a1b2c3d4e5f6a7b8c9d0e1f2a3b4", "name": "billing-producer", "role": "producer",
                "tenant_id": "acme", "state": "active", "created_at": "2026-11-26T09:30:00Z", "created_by": "key:admin",
                "expires_at": "2027-02-24T09:30:00Z", "revoked_at": null, "prefix": "hk_3fa9",
                "secret": "hk_3fa9c0ffee…"})),
        (status = 400, description = "The body could not be parsed; `field` names the culprit.\n\n`malformed_json`: \
            the body is not JSON.\n\n`not_an_object`: the body is not a JSON object.\n\n`missing_field`: `name` or \
            `role` is absent.\n\n`unknown_field`: a field the body does not take.\n\n`invalid_type`: a value of \
            the wrong type (a role that is none of `producer`, `reader`, `operator`, `admin`).\n\n\
            `unknown_parameter`: a query parameter (the route takes none).", body = ErrorBody),
        (status = 403, description = "`forbidden`: a role above the caller's, or another tenant than the caller's \
            (`field` names which).", body = ErrorBody),
        (status = 409, description = "`conflict`: a key with this name exists in the tenant, or the principal \
            already has a grant.", body = ErrorBody),
        (status = 422, description = "Values broke rules; `errors` names each.\n\n`invalid_field`: a bad `name`, \
            `tenant_id` or `principal`, `expires_in_seconds` out of range, a principal on `hookline serve`.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn create_key() {}

/// `GET /v1/keys`.
#[utoipa::path(
    get,
    path = "/v1/keys",
    tag = "keys",
    summary = "List keys",
    description = "One page of the keys of a tenant (a bound key: its own; an unbound one: `tenant_id`, or without \
        it the keys bound to no tenant), in id order; keys of roles the caller may not grant are left out. Never a \
        secret.",
    params(wire::KeyListQuery),
    responses(
        (status = 200, description = "A page of keys.", body = Page<wire::Key>, example = json!({
            "items": [{"id": "key_0193a1b2c3d4e5f6a7b8c9d0e1f2a3b4", "name": "billing-producer", "role": "producer",
                "tenant_id": "acme", "state": "active", "created_at": "2026-11-26T09:30:00Z", "created_by": "key:admin",
                "expires_at": null, "revoked_at": null, "prefix": "hk_3fa9"}],
            "next_cursor": null})),
        (status = 400, description = "The query string could not be read; `field` names the parameter.\n\n\
            `unknown_parameter`: a parameter the route does not take, or one given twice.\n\n`invalid_type`: \
            `limit` not an integer.\n\n`invalid_cursor`: a cursor of another listing.", body = ErrorBody),
        (status = 422, description = "`invalid_field`: `limit` out of 1 to 1000.",
            body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn list_keys() {}

/// `GET /v1/keys/{key}`.
#[utoipa::path(
    get,
    path = "/v1/keys/{key}",
    tag = "keys",
    summary = "Show a key",
    description = "One key (never its secret).",
    params(("key" = String, Path, description = "The key's id (`key_…`).")),
    responses(
        (status = 200, description = "The key.", body = wire::Key),
        (status = 400, description = "`unknown_parameter`: a query parameter (the route takes none).", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn get_key() {}

/// `DELETE /v1/keys/{key}`.
#[utoipa::path(
    delete,
    path = "/v1/keys/{key}",
    tag = "keys",
    summary = "Revoke a key",
    description = "Revoked at once in this process, within a minute in every other. Revoking a revoked key changes \
        nothing.",
    params(("key" = String, Path, description = "The key's id.")),
    responses(
        (status = 200, description = "The key, revoked.", body = wire::Key),
        (status = 400, description = "`unknown_parameter`: a query parameter (the route takes none).", body = ErrorBody),
        (status = 409, description = "`conflict`: the key changed meanwhile; read it and try again.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn revoke_key() {}

/// `POST /v1/keys/{key}/rotate`.
#[utoipa::path(
    post,
    path = "/v1/keys/{key}/rotate",
    tag = "keys",
    summary = "Rotate a key's secret",
    description = "A new secret, in this answer only; the old one keeps working for `overlap_seconds`.",
    params(("key" = String, Path, description = "The key's id.")),
    request_body(content = wire::RotateKey, example = json!({"overlap_seconds": 3600})),
    responses(
        (status = 200, description = "Rotated; `secret` is shown this once.", body = wire::KeyWithSecret),
        (status = 400, description = super::dead_letters::body_400!(), body = ErrorBody),
        (status = 409, description = "`conflict`: a principal grant (no secret), a revoked key, or a key changed \
            meanwhile.", body = ErrorBody),
        (status = 422, description = "`invalid_field`: `overlap_seconds` out of 0 to 604800.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn rotate_key() {}

/// This module's part of the OpenAPI document ([`super::openapi`]): its
/// routes' paths and the wire types they use.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(
        paths(create_key, list_keys, get_key, revoke_key, rotate_key),
        components(schemas(
            wire::Role,
            wire::KeyState,
            wire::CreateKey,
            wire::RotateKey,
            wire::Key,
            wire::KeyWithSecret
        ))
    )]
    struct Part;
    <Part as utoipa::OpenApi>::openapi()
}
