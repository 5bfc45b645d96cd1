//! The one error shape and the one table of error codes.
//!
//! Every refusal is `{"error": {"code", "message", "field"?, "errors"}}`
//! with the status its code has in [`ErrorCode`]'s table: each code's
//! status is written there once, and nowhere else. The rule the table
//! follows:
//!
//! - **400**: the request could not be parsed: malformed JSON, a body that
//!   is not an object, a missing required field, an unknown field or query
//!   parameter, a value of the wrong type (a string where a number goes, a
//!   time that is not RFC 3339, a name that is not one of an enum's);
//! - **422**: it was parsed, and a value broke a rule: out of range, too
//!   long, a bad pattern, a time range outside the retention, a reason
//!   missing or with control characters;
//! - 401/403/404/405/409/413/429/503 as HTTP means them.
//!
//! A body with several bad fields reports each of them in `errors`; `code`,
//! `message` and `field` repeat the first.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Declares [`ErrorCode`] from one table: variant, wire name, status and
/// what it means.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident = $name:literal, $status:literal, $meaning:literal;)*) => {
        /// Every error code the API answers, with its HTTP status (the
        /// module docs give the rule). Clients match on the code; the
        /// message is for people and may change.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum ErrorCode {
            $($(#[$doc])* $variant,)*
        }

        impl ErrorCode {
            /// Every code, in the table's order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The HTTP status this code is always answered with.
            pub const fn status(self) -> u16 {
                match self { $(ErrorCode::$variant => $status,)* }
            }

            /// The code as it is on the wire (`invalid_field`).
            pub const fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $name,)* }
            }

            /// What the code means, for the API reference.
            pub const fn meaning(self) -> &'static str {
                match self { $(ErrorCode::$variant => $meaning,)* }
            }
        }
    };
}

error_codes! {
    /// The body is not JSON.
    MalformedJson = "malformed_json", 400, "The body is not valid JSON; the message gives the line and column.";
    /// The body is JSON but not an object.
    NotAnObject = "not_an_object", 400, "The body must be a JSON object.";
    /// A required field is absent.
    MissingField = "missing_field", 400, "A required field is absent; `field` names it.";
    /// A field the type does not have.
    UnknownField = "unknown_field", 400, "The body has a field the request type does not have; `field` names it.";
    /// A value of the wrong type.
    InvalidType = "invalid_type", 400, "A value could not be read as its type (a string for a number, a time that is not RFC 3339, a name that is not one of the enum's); `field` names it.";
    /// A query parameter the route does not take.
    UnknownParameter = "unknown_parameter", 400, "The query string has a parameter the route does not take (or one given twice); `field` names it.";
    /// A path that is not valid percent-encoded UTF-8.
    InvalidPath = "invalid_path", 400, "The path is not valid percent-encoded UTF-8.";
    /// An envelope format name that is not one.
    UnknownFormat = "unknown_format", 400, "The envelope format named (`?format=` or `format`) is not one Hookline reads.";
    /// An event body that matches no envelope format.
    UnknownEnvelope = "unknown_envelope", 400, "The event matches no envelope format; name one with `?format=`.";
    /// A batch that is not a list of envelopes.
    InvalidBatch = "invalid_batch", 400, "A batch must be a JSON array of 1 to 100 envelopes.";
    /// A page cursor this deployment did not issue for these filters.
    InvalidCursor = "invalid_cursor", 400, "The cursor was not issued by this deployment for this request's filters (garbage, cut short, edited, forged, or from other filters); `field` names it. Start again without it.";
    /// No credential, or a wrong one.
    Unauthorized = "unauthorized", 401, "No credential, or one Hookline does not know (Authorization: Bearer <key>, or an IAM signature on AWS).";
    /// The credential may not do this.
    Forbidden = "forbidden", 403, "The credential's role or tenant does not allow this; the message names what is needed.";
    /// Nothing there (or nothing the caller may see).
    NotFound = "not_found", 404, "No such resource, or one the credential may not see (another tenant's is answered the same).";
    /// A known path with another method.
    MethodNotAllowed = "method_not_allowed", 405, "The path exists with other methods; the `Allow` header lists them.";
    /// The request body took too long.
    RequestTimeout = "request_timeout", 408, "The request body did not arrive in time (`hookline serve`'s listener).";
    /// The record changed or is in a state that refuses this.
    Conflict = "conflict", 409, "The resource changed under the request, or its state refuses it (already resolved, already exists).";
    /// A lane skip on a lane that is not blocked.
    LaneNotBlocked = "lane_not_blocked", 409, "The partition's lane is not blocked: there is nothing to skip.";
    /// A lane skip while a dead letter holds the lane.
    LaneHeldByDeadLetter = "lane_held_by_dead_letter", 409, "A dead letter holds the lane: requeue or skip the dead letter instead.";
    /// A lane operation on a subscription without lanes.
    NotOrdered = "not_ordered", 409, "The subscription is not ordered by partition: it has no lanes.";
    /// A listing by time or tenant where the deployment keeps none.
    ListingOff = "listing_off", 409, "This deployment does not list events by time or by tenant (`EVENT_LISTING` off, template parameter `EventListing`): `GET /v1/events` needs `partition_key` or `outcome`, and a replay an `event_id` or a `partition_key`. Find an event by its id.";
    /// An `Idempotency-Key` reused with another request.
    IdempotencyConflict = "idempotency_conflict", 409, "The Idempotency-Key was used before with another request (method, path or body); use a new key.";
    /// An `Idempotency-Key` whose first request is still running.
    IdempotencyInProgress = "idempotency_in_progress", 409, "A request with this Idempotency-Key is still being answered; retry after Retry-After.";
    /// The body is too large.
    PayloadTooLarge = "payload_too_large", 413, "The body (or one envelope) is larger than the limit the message names.";
    /// A value broke a rule.
    InvalidField = "invalid_field", 422, "A value was read but breaks a rule (range, length, pattern, allowed characters); `field` names it.";
    /// A header value broke a rule.
    InvalidHeader = "invalid_header", 422, "A request header's value breaks its rule (Idempotency-Key, X-Actor); `field` names the header.";
    /// An operator action without a reason.
    ReasonRequired = "reason_required", 422, "Requeue, skip, replay and bulk jobs need a non-blank `reason` (it goes in the audit trail).";
    /// A time range that is reversed or outside the retention.
    InvalidRange = "invalid_range", 422, "`until` is before `since`, or a bound lies outside the retention.";
    /// A subscription's rate limit out of range.
    InvalidLimit = "invalid_limit", 422, "A subscription's rate or concurrency limit is out of range.";
    /// A callback URL that is not a public HTTPS URL.
    InvalidCallbackUrl = "invalid_callback_url", 422, "The callback URL is not an allowed public HTTPS URL (SSRF rules).";
    /// A retry schedule that is not a list of delays.
    InvalidRetrySchedule = "invalid_retry_schedule", 422, "`retry_policy.schedule_ms` must be 1 to 50 waits of 1 to 86,400,000 ms, without `max_attempts` or `max_delay_ms` beside it.";
    /// A retry schedule that outlives the retention.
    RetryScheduleTooLong = "retry_schedule_too_long", 422, "The retry schedule's total is longer than events are kept.";
    /// A dead-letter rule that is not one.
    InvalidDeadLetterOn = "invalid_dead_letter_on", 422, "`dead_letter_on` names a status or class Hookline does not know.";
    /// A bulk job over too many items.
    JobTooLarge = "job_too_large", 422, "The job's filter matches more items than one job may take; narrow it.";
    /// A replay to a subscription that would not receive the event.
    SubscriptionNotMatching = "subscription_not_matching", 422, "The subscription would not receive this event (another tenant's, or no pattern matches its type).";
    /// The tenant has too many jobs running.
    TooManyJobs = "too_many_jobs", 429, "The tenant has as many bulk jobs running as it may; retry after Retry-After.";
    /// Storage is unavailable.
    Unavailable = "unavailable", 503, "Storage is unavailable; nothing was written; retry the request.";
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One bad field of a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FieldIssue {
    /// The field's path in the body (`event_types[1]`, `headers.X-Team`),
    /// the query parameter or the header.
    pub field: String,
    /// What is wrong with it.
    pub code: ErrorCode,
    /// What is wrong, for people.
    pub message: String,
}

/// The error inside every refusal's body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable code; its status is fixed ([`ErrorCode`]).
    pub code: ErrorCode,
    /// What is wrong, for people.
    pub message: String,
    /// The offending field, when one is to blame (the first of `errors`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Every bad field of the request, when fields are to blame; empty
    /// otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldIssue>,
}

/// The body of every error response: `{"error": {…}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire name serde writes is the one the table gives, and the
    /// status follows the module's rule.
    #[test]
    fn codes_serialize_as_their_names_and_follow_the_status_rule() {
        for &c in ErrorCode::ALL {
            assert_eq!(serde_json::to_value(c).unwrap(), serde_json::json!(c.as_str()));
            let back: ErrorCode = serde_json::from_value(serde_json::json!(c.as_str())).unwrap();
            assert_eq!(back, c);
            assert!(c.as_str().bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{c} is snake_case");
            assert!(!c.meaning().is_empty());
        }
        assert_eq!(ErrorCode::InvalidType.status(), 400, "could not be parsed");
        assert_eq!(ErrorCode::InvalidField.status(), 422, "a value broke a rule");
    }
}
