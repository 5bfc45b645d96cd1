//! The API's one error type: every refusal is `{"error": {"code", "message",
//! "field"?}}` with a status. The stage and store errors convert into it, so
//! handlers use `?`; nothing else builds error bodies.

use serde::Serialize;

use super::Response;
use shared::envelope::{show, EnvelopeError};
use shared::error::StoreError;
use shared::stage::ingest::IngestError;
use shared::stage::requeue::RequeueError;
use shared::subscription::FieldError;

/// A refused request: HTTP status, a stable code, a message for people and,
/// when one field is to blame, its path (`event_types[1]`, `headers.X-Team`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApiError {
    /// HTTP status.
    #[serde(skip)]
    pub status: u16,
    /// Stable, machine-readable code (`invalid_field`, `not_found`, …).
    pub code: String,
    /// What is wrong, for people.
    pub message: String,
    /// The offending field, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// The code of a `422` for a replay naming a subscription whose routing
/// would not take the event (another tenant's, or a type none of its
/// patterns matches); nothing is written.
pub const SUBSCRIPTION_NOT_MATCHING: &str = "subscription_not_matching";

/// What every handler returns.
pub type ApiResult = Result<Response, ApiError>;

impl ApiError {
    /// An error with a status, code and message.
    pub fn new(status: u16, code: &str, message: impl Into<String>) -> Self {
        ApiError { status, code: code.to_string(), message: message.into(), field: None }
    }

    /// The same error, blaming `field`.
    pub fn on(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// 404 for `what` (`event`, `subscription`, …) `id` (any id type).
    pub fn not_found(what: &str, id: impl AsRef<str>) -> Self {
        ApiError::new(404, "not_found", format!("{what} {} not found", show(id.as_ref())))
    }

    /// 400: a field has a wrong value.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::new(400, "invalid_field", message).on(field)
    }

    /// 409: the record changed under the request.
    pub fn conflict(message: &str) -> Self {
        ApiError::new(409, "conflict", message)
    }
}

impl From<ApiError> for Response {
    fn from(e: ApiError) -> Response {
        Response::json(e.status, &serde_json::json!({ "error": e }))
    }
}

impl From<StoreError> for ApiError {
    /// 503, without the backend's message (logged instead): the caller can
    /// only retry.
    fn from(e: StoreError) -> Self {
        tracing::error!(error = %e, "store error");
        ApiError::new(503, "unavailable", "storage is unavailable; nothing was written, retry the request")
    }
}

impl From<FieldError> for ApiError {
    fn from(e: FieldError) -> Self {
        ApiError::invalid(e.field.clone(), e.to_string())
    }
}

impl From<&EnvelopeError> for ApiError {
    fn from(e: &EnvelopeError) -> Self {
        ApiError {
            // A tenant-bound producer's event of another tenant is
            // forbidden, not malformed.
            status: if matches!(e, EnvelopeError::OtherTenant { .. }) { 403 } else { 400 },
            code: e.code().to_string(),
            message: e.to_string(),
            field: e.field().map(str::to_string),
        }
    }
}

impl From<IngestError> for ApiError {
    fn from(e: IngestError) -> Self {
        match e {
            IngestError::Envelope(e) => (&e).into(),
            IngestError::TooLarge { .. } => ApiError::new(413, "payload_too_large", e.to_string()),
            IngestError::BadBatch(m) => ApiError::new(400, "invalid_batch", m),
            IngestError::Store(e) => e.into(),
        }
    }
}

impl From<RequeueError> for ApiError {
    fn from(e: RequeueError) -> Self {
        match e {
            RequeueError::NotFound(what) => ApiError::new(404, "not_found", format!("{what} not found")),
            RequeueError::AlreadyResolved { .. } => ApiError::new(409, "conflict", e.to_string()),
            // The request is well formed, but names a subscription that may
            // not receive this event: a replay never crosses tenants or
            // patterns.
            RequeueError::NotRouted { .. } => {
                ApiError::new(422, SUBSCRIPTION_NOT_MATCHING, e.to_string()).on("subscription_id")
            }
            RequeueError::Store(e) => e.into(),
        }
    }
}
