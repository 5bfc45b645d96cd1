//! The event catalog's routes (docs/formats.md#event-catalog): `POST
//! /v1/event-types` registers a major version of a type, `GET
//! /v1/event-types/{name}` shows a type's versions, and the listing of
//! `GET /v1/event-types` ([`super::portal`]) merges the catalog with the
//! types seen ([`merge`]). The decisions are [`shared::catalog`]'s; the
//! catalog is deployment-wide, so only a caller bound to no tenant
//! registers.

use chrono::Utc;
use hookline_wire::catalog as wire;
use hookline_wire::portal::EventType;
use hookline_wire::ErrorBody;
use serde_json::json;

use super::error::{ErrorCode, Issues};
use super::routes::Call;
use super::{parse, query, Api, ApiError, ApiResult, Response};
use hookline_wire::FieldIssue;
use shared::audit::{Action as Audited, AuditRecord};
use shared::catalog::{self, CatalogEntry, Decision, Registration};
use shared::event_types::SeenType;
use shared::ports::Page;

/// An entry on the wire.
fn version_view(e: CatalogEntry) -> wire::CatalogVersion {
    wire::CatalogVersion {
        event_type: e.event_type(),
        name: e.name,
        version: e.version,
        schema: e.schema,
        description: e.description,
        example: e.example,
        registered_at: e.registered_at,
        updated_at: e.updated_at,
    }
}

/// One page of `GET /v1/event-types`: the types seen in the listing's
/// scope and the catalog's registered types, merged in type order (a type
/// in both is one item), at most `limit`; and the type the next page
/// starts after, when either source has more. Each source was read from
/// the same cursor with the same limit, so the first `limit` of the merge
/// are the first `limit` types of the union.
pub(super) fn merge(
    seen: Page<SeenType>,
    registered: Page<CatalogEntry>,
    tenant: Option<&str>,
    limit: usize,
) -> (Vec<EventType>, Option<String>) {
    // A type as listed before the catalog says anything of it.
    let blank = |event_type: String| EventType {
        event_type,
        tenant_id: tenant.map(str::to_string),
        first_seen_at: None,
        registered: false,
        name: None,
        version: None,
        description: None,
        schema: None,
        example: None,
    };
    let mut by_type: std::collections::BTreeMap<String, EventType> = std::collections::BTreeMap::new();
    for s in seen.items {
        let item = by_type.entry(s.event_type.clone()).or_insert_with(|| blank(s.event_type));
        item.first_seen_at = Some(s.first_seen_at);
    }
    for e in registered.items {
        let t = e.event_type();
        let item = by_type.entry(t.clone()).or_insert_with(|| blank(t));
        item.registered = true;
        item.name = Some(e.name);
        item.version = Some(e.version);
        item.description = e.description;
        item.schema = Some(e.schema);
        item.example = e.example;
    }
    let more = by_type.len() > limit || seen.next.is_some() || registered.next.is_some();
    let items: Vec<EventType> = by_type.into_values().take(limit).collect();
    let next = if more { items.last().map(|t| t.event_type.clone()) } else { None };
    (items, next)
}

impl Api {
    /// `POST /v1/event-types` (`ManageCatalog`: an admin bound to no tenant):
    /// registers a major version of an event type ([`catalog::check_registration`],
    /// [`catalog::decide`]): `201` new, `200` changed compatibly or the
    /// same (idempotent); a breaking change is `422` naming each change on
    /// `schema`; a concurrent registration of the same version `409`.
    /// Audited (`event_type.registered`) when something was written.
    pub(super) async fn register_event_type(&self, c: &Call<'_>) -> ApiResult {
        query::none(c.req.query)?;
        let body: wire::RegisterEventType = parse(c.req.body, false)?;
        let r = Registration {
            name: body.name,
            version: body.version,
            schema: body.schema,
            description: body.description,
            example: body.example,
        };
        let mut issues = Issues::default();
        let parsed = issues.all(ErrorCode::InvalidField, catalog::check_registration(&r));
        issues.check()?;
        let parsed = parsed.expect("checked");
        let event_type = catalog::event_type_of(&r.name, r.version);
        let stored = self.hookline.stores.event_types.catalog_get(&event_type).await?;
        let read = stored.as_ref().map(|e| e.updated_at);
        let decision = catalog::decide(r, &parsed, stored, Utc::now()).map_err(|changes| {
            let (name, version) = catalog::name_and_version(&event_type);
            let message = format!(
                "a breaking change to version {version} of `{name}`; a version may only add optional properties \
                 (register the change as version {}): {}",
                version + 1,
                changes.join("; ")
            );
            let issues = changes
                .into_iter()
                .map(|m| FieldIssue { field: "schema".into(), code: ErrorCode::InvalidField, message: m })
                .collect();
            ApiError { message, ..ApiError::fields(issues).expect("at least one change") }
        })?;
        let (status, entry, outcome) = match decision {
            Decision::Unchanged(e) => return Ok(Response::json(200, &version_view(e))),
            Decision::Create(e) => (201, e, "created"),
            Decision::Update(e) => (200, e, "updated"),
        };
        if !self.hookline.stores.event_types.catalog_put(&entry, read).await? {
            return Err(ApiError::conflict(
                "this version of the event type was registered or changed concurrently; nothing was written, retry",
            ));
        }
        self.hookline.catalog.forget(&event_type);
        let rec = AuditRecord::new(Audited::EventTypeRegistered, c.caller.actor.clone())
            .details(json!({"event_type": event_type, "version": entry.version, "outcome": outcome}));
        self.hookline.audit(rec).await;
        Ok(Response::json(status, &version_view(entry)))
    }

    /// `GET /v1/event-types/{name}` (`Read`): the registered versions of
    /// `name` (its version-1 type), oldest first; `404` when none is.
    pub(super) async fn get_event_type(&self, name: &str, c: &Call<'_>) -> ApiResult {
        query::none(c.req.query)?;
        let (base, _) = catalog::name_and_version(name);
        let versions = self.hookline.stores.event_types.catalog_versions(base).await?;
        if versions.is_empty() {
            return Err(ApiError::not_found("event type", name));
        }
        let t =
            wire::CatalogType { name: base.to_string(), versions: versions.into_iter().map(version_view).collect() };
        Ok(Response::json(200, &t))
    }
}

/// `POST /v1/event-types`.
#[utoipa::path(
    post,
    path = "/v1/event-types",
    tag = "portal",
    summary = "Register an event type",
    description = "Registers a major version of an event type in the deployment-wide event catalog: its JSON \
        Schema (a documented subset; any other keyword is refused by name), a description and an example, which \
        must validate. Version 1 is the type `name`; version N ≥ 2 the type `name.vN`, which `task.*`-style \
        patterns do not match (subscribe with `task.*.v2`, `*.v2` or the exact type). Ingest then refuses an \
        event of the type whose data breaks the schema (`422` naming the JSON path). Registering a version again \
        may only add optional properties (or change the description or example): `200`; the same body is \
        idempotent (`200`, nothing written); any other change is `422` naming each change. Admins bound to no \
        tenant only. Audited (`event_type.registered`).",
    request_body(content = wire::RegisterEventType),
    responses(
        (status = 201, description = "Registered.", body = wire::CatalogVersion),
        (status = 200, description = "Changed compatibly, or already registered as given.", body = wire::CatalogVersion),
        (status = 400, description = super::dead_letters::body_400!(), body = ErrorBody),
        (status = 403, description = "`forbidden`: not an admin, or a key bound to a tenant.", body = ErrorBody),
        (status = 409, description = "`conflict`: the same version was registered or changed concurrently; \
            nothing was written.", body = ErrorBody),
        (status = 422, description = "`invalid_field`: a bad `name` or `version`; `schema.<path>` naming an \
            unsupported or malformed keyword; `example.<path>` breaking the schema; `description` too long; or \
            `schema`, once per breaking change (`property `x` removed`, `` `y` became required``, `type of `z` \
            changed …`).", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn register_event_type() {}

/// `GET /v1/event-types/{name}`.
#[utoipa::path(
    get,
    path = "/v1/event-types/{name}",
    tag = "portal",
    summary = "Get an event type",
    description = "The registered versions of an event type of the catalog (by its name, the type of version \
        1; a versioned type `name.vN` names its name), oldest first, each with its schema, description and \
        example.",
    params(("name" = String, Path, description = "The type's name (`order.created`).")),
    responses(
        (status = 200, description = "The type's versions.", body = wire::CatalogType),
        (status = 400, description = "`unknown_parameter`: a query parameter (the route takes none).", body = ErrorBody),
        (status = 404, description = "`not_found`: no version of the type is registered.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn get_event_type() {}

/// This module's part of the OpenAPI document ([`super::openapi`]).
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(
        paths(register_event_type, get_event_type),
        components(schemas(wire::RegisterEventType, wire::CatalogVersion, wire::CatalogType))
    )]
    struct Part;
    <Part as utoipa::OpenApi>::openapi()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;
    use shared::event_types::TypeScope;

    fn seen(t: &str) -> SeenType {
        SeenType { scope: TypeScope::All, event_type: t.into(), first_seen_at: DateTime::UNIX_EPOCH }
    }

    fn entry(name: &str, version: u32) -> CatalogEntry {
        CatalogEntry {
            name: name.into(),
            version,
            schema: json!({}),
            description: Some("d".into()),
            example: None,
            registered_at: DateTime::UNIX_EPOCH,
            updated_at: DateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn the_listing_merges_seen_and_registered_types_in_type_order() {
        let s = Page { items: vec![seen("a"), seen("c")], next: Some("c".into()) };
        let r = Page { items: vec![entry("b", 1), entry("c", 1)], next: None };
        let (items, next) = merge(s, r, Some("acme"), 2);
        let shown: Vec<(&str, bool, bool)> =
            items.iter().map(|t| (t.event_type.as_str(), t.registered, t.first_seen_at.is_some())).collect();
        assert_eq!(shown, [("a", false, true), ("b", true, false)]);
        assert_eq!(next.as_deref(), Some("b"), "c is next, from both");
        let (items, next) = merge(
            Page { items: vec![seen("c")], next: None },
            Page { items: vec![entry("c", 2)], next: None },
            None,
            5,
        );
        assert_eq!(items.len(), 2, "c and c.v2 are two types");
        assert_eq!(next, None);
        let (items, _) = merge(
            Page { items: vec![seen("c")], next: None },
            Page { items: vec![entry("c", 1)], next: None },
            None,
            5,
        );
        assert_eq!((items.len(), items[0].registered, items[0].first_seen_at.is_some()), (1, true, true));
    }
}
