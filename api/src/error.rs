//! The API's one error type: every refusal is `{"error": {"code", "message",
//! "field"?}}` with a status. The stage and store errors convert into it, so
//! handlers use `?`; nothing else builds error bodies.

use super::Response;
use hookline_wire::{ErrorBody, ErrorDetail, FieldIssue};
use shared::envelope::{show, EnvelopeError};
use shared::error::StoreError;
use shared::stage::ingest::IngestError;
use shared::stage::requeue::RequeueError;
use shared::subscription::FieldError;

pub use hookline_wire::ErrorCode;

/// A refused request: a code from the one table ([`ErrorCode`], which
/// fixes the status), a message for people and, when fields are to blame,
/// each of them (`event_types[1]`, `headers.X-Team`, a query parameter).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// Stable, machine-readable code; the status is its.
    pub code: ErrorCode,
    /// What is wrong, for people.
    pub message: String,
    /// The offending field, when there is one (the first of `issues`).
    pub field: Option<String>,
    /// Every bad field, when several are to blame (empty, or one per field
    /// with the first repeating `code`/`message`/`field`).
    pub issues: Vec<FieldIssue>,
    /// Seconds for the `Retry-After` header of the response (a `429`).
    pub retry_after: Option<u64>,
}

/// What every handler returns.
pub type ApiResult = Result<Response, ApiError>;

impl ApiError {
    /// An error with a code (which fixes its status) and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError { code, message: message.into(), field: None, issues: Vec::new(), retry_after: None }
    }

    /// The HTTP status of this error: its code's.
    pub fn status(&self) -> u16 {
        self.code.status()
    }

    /// The same error, blaming `field`.
    pub fn on(mut self, field: impl Into<String>) -> Self {
        let field = field.into();
        self.issues = vec![FieldIssue { field: field.clone(), code: self.code, message: self.message.clone() }];
        self.field = Some(field);
        self
    }

    /// One error for several bad fields: the first's code, message and
    /// field, and every one of them in `errors`. `None` when `issues` is
    /// empty.
    pub fn fields(issues: Vec<FieldIssue>) -> Option<Self> {
        let first = issues.first()?.clone();
        let message = match issues.len() {
            1 => first.message.clone(),
            n => {
                format!("{} (and {} more bad field{}: see errors)", first.message, n - 1, if n > 2 { "s" } else { "" })
            }
        };
        Some(ApiError { code: first.code, message, field: Some(first.field), issues, retry_after: None })
    }

    /// This error's issues: its own, or one for its field.
    pub fn into_issues(self) -> Vec<FieldIssue> {
        match (self.issues.is_empty(), self.field) {
            (false, _) => self.issues,
            (true, Some(field)) => vec![FieldIssue { field, code: self.code, message: self.message }],
            (true, None) => Vec::new(),
        }
    }

    /// 404 for `what` (`event`, `subscription`, …) `id` (any id type).
    pub fn not_found(what: &str, id: impl AsRef<str>) -> Self {
        ApiError::new(ErrorCode::NotFound, format!("{what} {} not found", show(id.as_ref())))
    }

    /// 422 `invalid_field`: a value of `field` was read and breaks a rule.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::new(ErrorCode::InvalidField, message).on(field)
    }

    /// 400 `invalid_type`: a value of `field` could not be read as its type.
    pub fn unreadable(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::new(ErrorCode::InvalidType, message).on(field)
    }

    /// 409: the record changed under the request.
    pub fn conflict(message: &str) -> Self {
        ApiError::new(ErrorCode::Conflict, message)
    }

    /// The wire body: `{"error": {code, message, field?, errors}}`.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message.clone(),
                field: self.field.clone(),
                errors: self.issues.clone(),
            },
        }
    }
}

/// Every bad field of a request, gathered so that all of them are
/// reported at once ([`ApiError::fields`]) rather than the first only.
#[derive(Debug, Default)]
pub struct Issues {
    fields: Vec<FieldIssue>,
    /// An error that names no field (reported before the fields' ones).
    other: Option<ApiError>,
}

impl Issues {
    /// `r`'s value; or `None`, its error kept for [`Issues::check`].
    pub fn take<T>(&mut self, r: Result<T, ApiError>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) if e.field.is_none() && e.issues.is_empty() => {
                self.other.get_or_insert(e);
                None
            }
            Err(e) => {
                self.fields.extend(e.into_issues());
                None
            }
        }
    }

    /// Keeps one more issue.
    pub fn push(&mut self, e: ApiError) {
        self.take::<()>(Err(e));
    }

    /// Keeps a domain check's field error, with `code`.
    pub fn add(&mut self, code: ErrorCode, e: FieldError) {
        self.fields.push(FieldIssue { field: e.field, code, message: e.message });
    }

    /// `r`'s value; or `None`, each of its field errors kept with `code`.
    pub fn all<T>(&mut self, code: ErrorCode, r: Result<T, Vec<FieldError>>) -> Option<T> {
        r.map_err(|es| es.into_iter().for_each(|e| self.add(code, e))).ok()
    }

    /// `Ok` when nothing was wrong; else one error with every bad field.
    pub fn check(self) -> Result<(), ApiError> {
        match (self.other, ApiError::fields(self.fields)) {
            (Some(e), _) | (None, Some(e)) => Err(e),
            (None, None) => Ok(()),
        }
    }
}

impl serde::Serialize for ApiError {
    /// As the error detail (inside a batch answer's item, say).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.body().error.serialize(s)
    }
}

impl From<ApiError> for Response {
    fn from(e: ApiError) -> Response {
        let r = Response::json(e.status(), &e.body());
        match e.retry_after {
            Some(secs) => r.with_header("retry-after", secs.to_string()),
            None => r,
        }
    }
}

impl From<StoreError> for ApiError {
    /// 503, without the backend's message (logged instead): the caller can
    /// only retry.
    fn from(e: StoreError) -> Self {
        tracing::error!(error = %e, "store error");
        ApiError::new(ErrorCode::Unavailable, "storage is unavailable; nothing was written, retry the request")
    }
}

impl From<FieldError> for ApiError {
    fn from(e: FieldError) -> Self {
        ApiError::invalid(e.field.clone(), e.to_string())
    }
}

impl From<&EnvelopeError> for ApiError {
    fn from(e: &EnvelopeError) -> Self {
        let code = match e {
            EnvelopeError::MalformedJson { .. } => ErrorCode::MalformedJson,
            EnvelopeError::NotAnObject => ErrorCode::NotAnObject,
            EnvelopeError::MissingField { .. } => ErrorCode::MissingField,
            EnvelopeError::InvalidField { .. } => ErrorCode::InvalidField,
            EnvelopeError::WrongType { .. } => ErrorCode::InvalidType,
            EnvelopeError::UnknownFormat(_) => ErrorCode::UnknownFormat,
            EnvelopeError::Undetectable => ErrorCode::UnknownEnvelope,
            // A tenant-bound producer's event of another tenant is
            // forbidden, not malformed.
            EnvelopeError::OtherTenant { .. } => ErrorCode::Forbidden,
        };
        let err = ApiError::new(code, e.to_string());
        match e.field() {
            Some(f) => err.on(f),
            None => err,
        }
    }
}

impl From<IngestError> for ApiError {
    fn from(e: IngestError) -> Self {
        match e {
            IngestError::Envelope(e) => (&e).into(),
            IngestError::TooLarge { .. } => ApiError::new(ErrorCode::PayloadTooLarge, e.to_string()),
            IngestError::BadBatch(m) => ApiError::new(ErrorCode::InvalidBatch, m),
            IngestError::Store(e) => e.into(),
        }
    }
}

impl From<shared::stage::bulk::AdmitError> for ApiError {
    /// `429 too_many_jobs` with `Retry-After` at the tenant's cap;
    /// `422 job_too_large` naming `filter` for a job past `JOB_MAX_ITEMS`;
    /// `409 listing_off` for a replay of a range without listings.
    fn from(e: shared::stage::bulk::AdmitError) -> Self {
        use shared::stage::bulk::{AdmitError, RETRY_AFTER_SECS};
        match e {
            AdmitError::TooManyJobs { .. } => {
                ApiError { retry_after: Some(RETRY_AFTER_SECS), ..ApiError::new(ErrorCode::TooManyJobs, e.to_string()) }
            }
            AdmitError::TooLarge { .. } => ApiError::new(ErrorCode::JobTooLarge, e.to_string()).on("filter"),
            AdmitError::ListingOff(off) => off.into(),
            AdmitError::Store(e) => e.into(),
        }
    }
}

impl From<shared::event_search::ListingOff> for ApiError {
    /// `409 listing_off`: the deployment keeps no listing by time.
    fn from(e: shared::event_search::ListingOff) -> Self {
        ApiError::new(ErrorCode::ListingOff, e.to_string())
    }
}

impl From<RequeueError> for ApiError {
    fn from(e: RequeueError) -> Self {
        match e {
            RequeueError::NotFound(what) => ApiError::new(ErrorCode::NotFound, format!("{what} not found")),
            RequeueError::AlreadyResolved { .. } => ApiError::new(ErrorCode::Conflict, e.to_string()),
            // The request is well formed, but names a subscription that may
            // not receive this event: a replay never crosses tenants or
            // patterns.
            RequeueError::NotRouted { .. } => {
                ApiError::new(ErrorCode::SubscriptionNotMatching, e.to_string()).on("subscription_id")
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
        assert_eq!((e.status(), e.code.as_str(), e.retry_after), (429, "too_many_jobs", Some(30)));
        assert!(e.message.contains("\"acme\"") && e.message.contains("JOBS_PER_TENANT = 4"), "{}", e.message);
        let r = Response::from(e);
        assert_eq!((r.status, r.header("retry-after")), (429, Some("30")));
        let e = ApiError::from(AdmitError::TooLarge { cap: 10_000 });
        assert_eq!(
            (e.status(), e.code.as_str(), e.field.as_deref(), e.retry_after),
            (422, "job_too_large", Some("filter"), None)
        );
        assert!(e.message.contains("JOB_MAX_ITEMS = 10000") && e.message.contains("narrow"), "{}", e.message);
        assert_eq!(Response::from(ApiError::invalid("x", "y")).header("retry-after"), None);
    }
}
