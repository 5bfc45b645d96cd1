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
    /// Seconds for the `Retry-After` header of the response (a `429`).
    #[serde(skip)]
    pub retry_after: Option<u64>,
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
        ApiError { status, code: code.to_string(), message: message.into(), field: None, retry_after: None }
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
        Response { retry_after: e.retry_after, ..Response::json(e.status, &serde_json::json!({ "error": e })) }
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
            retry_after: None,
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

impl From<shared::stage::bulk::AdmitError> for ApiError {
    /// `429 too_many_jobs` with `Retry-After` at the tenant's cap;
    /// `422 job_too_large` naming `filter` for a job past `JOB_MAX_ITEMS`.
    fn from(e: shared::stage::bulk::AdmitError) -> Self {
        use shared::stage::bulk::{AdmitError, RETRY_AFTER_SECS};
        match e {
            AdmitError::TooManyJobs { .. } => {
                ApiError { retry_after: Some(RETRY_AFTER_SECS), ..ApiError::new(429, "too_many_jobs", e.to_string()) }
            }
            AdmitError::TooLarge { .. } => ApiError::new(422, "job_too_large", e.to_string()).on("filter"),
            AdmitError::Store(e) => e.into(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use shared::stage::bulk::AdmitError;

    /// A tenant at its job cap is a 429 whose response carries
    /// `Retry-After` and names the cap; a job past the item cap a 422 naming
    /// `filter`.
    #[test]
    fn refused_jobs_answer_429_with_retry_after_or_422() {
        let e = ApiError::from(AdmitError::TooManyJobs { tenant: Some(shared::ids::TenantId::new("acme")), cap: 4 });
        assert_eq!((e.status, e.code.as_str(), e.retry_after), (429, "too_many_jobs", Some(30)));
        assert!(e.message.contains("\"acme\"") && e.message.contains("JOBS_PER_TENANT = 4"), "{}", e.message);
        let r = Response::from(e);
        assert_eq!((r.status, r.retry_after), (429, Some(30)));
        let e = ApiError::from(AdmitError::TooLarge { cap: 10_000 });
        assert_eq!(
            (e.status, e.code.as_str(), e.field.as_deref(), e.retry_after),
            (422, "job_too_large", Some("filter"), None)
        );
        assert!(e.message.contains("JOB_MAX_ITEMS = 10000") && e.message.contains("narrow"), "{}", e.message);
        assert_eq!(Response::from(ApiError::invalid("x", "y")).retry_after, None);
    }
}
