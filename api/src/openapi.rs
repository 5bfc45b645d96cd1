//! The OpenAPI 3.1 document of the API, generated from the code: the wire
//! types' schemas (`hookline_wire`) and each resource module's paths (its
//! `openapi()`, `#[utoipa::path]` items next to the handlers), merged here
//! with what every route shares (servers, security schemes, the error
//! body).

use utoipa::openapi::OpenApi;

/// The whole document, as `GET /openapi.json` serves it and
/// docs/openapi.json holds it.
pub fn document() -> OpenApi {
    let mut doc = base();
    for part in [
        super::events::openapi(),
        super::subscriptions::openapi(),
        super::dead_letters::openapi(),
        super::replays::openapi(),
        super::keys::openapi(),
        super::audit::openapi(),
    ] {
        doc.merge(part);
    }
    super::idempotency::document(&mut doc);
    doc
}

/// What every route shares.
fn base() -> OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(
        info(title = "Hookline", description = "Webhook delivery: events in, signed HTTPS callbacks out."),
        components(schemas(
            hookline_wire::ErrorBody,
            hookline_wire::ErrorDetail,
            hookline_wire::FieldIssue,
            hookline_wire::ErrorCode
        ))
    )]
    struct Base;
    <Base as utoipa::OpenApi>::openapi()
}
