//! The subscriptions' part of the OpenAPI document.

/// This module's part of the OpenAPI document ([`crate::openapi`]): its
/// routes' paths and the wire types they use.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi()]
    struct Part;
    <Part as utoipa::OpenApi>::openapi()
}
