//! The transport port: how one message reaches a [`Destination`]. The
//! delivery stage and the verification both send through it, so every
//! stage feature above it (routing, sagas, retries, dead letters, requeue,
//! replay, ordering, limits, the breaker) holds for every kind.
//!
//! HTTPS is the shared [`HttpClient`]; SQS queues and EventBridge buses
//! are SigV4-signed calls made by the backend's implementation (the same
//! one on both backends, `hookline-awsreq`). This module holds the pure
//! part of those: reading an AWS answer into a [`PostResult`].
//!
//! How AWS answers count (`docs/delivery.md`, "Queue and bus destinations"):
//! - 200 (and, for `PutEvents`, `FailedEntryCount` 0): delivered;
//! - a refusal of the message itself (too large for the queue's own
//!   `MaximumMessageSize`, contents it does not allow): rejected, never
//!   retried ([`PostError::Refused`]);
//! - everything else (throttling, 5xx, access denied, a queue or bus that
//!   does not exist, a failed `PutEvents` entry): a failed attempt, retried
//!   on the subscription's schedule. Throttling is recorded as 429 and a
//!   failed entry as 500 or 400 (never 200), so the breaker and the
//!   statistics read them as they read an endpoint's answers; the automatic
//!   disable handles a destination that stays wrong.

use std::time::Duration;

use async_trait::async_trait;

use crate::destination::Destination;
use crate::http_client::{HttpClient, PostError, PostResult};

/// One message to send: the delivery's headers and body, and for FIFO
/// queues its group and deduplication ids.
#[derive(Debug, Clone, Copy)]
pub struct Outbound<'a> {
    /// The signed delivery headers (`webhook-id`, …, custom headers).
    pub headers: &'a [(&'a str, String)],
    /// The body an HTTPS delivery POSTs.
    pub body: &'a [u8],
    /// A FIFO queue's `MessageGroupId`: the event's partition key, else the
    /// subscription id.
    pub group: &'a str,
    /// A FIFO queue's `MessageDeduplicationId`: the saga and attempt, so a
    /// job sent twice (a crash before its attempt was recorded) is one
    /// message, while the next attempt, a requeue or a replay is not
    /// swallowed as a duplicate.
    pub dedup: &'a str,
}

/// Sends one message to a destination.
#[async_trait]
pub trait Transport: Send + Sync {
    /// Sends `msg` to `to` and says how it went, as an HTTPS POST would.
    async fn send(&self, to: &Destination, msg: Outbound<'_>) -> PostResult;
}

/// HTTPS only: the shared client. A queue or bus destination fails (and is
/// retried) with an error saying that this process has no AWS transport.
#[async_trait]
impl Transport for HttpClient {
    async fn send(&self, to: &Destination, msg: Outbound<'_>) -> PostResult {
        match to {
            Destination::Https(url) => self.post(url, msg.headers, msg.body.to_vec()).await,
            other => PostResult::failed(
                PostError::Other(format!(
                    "no transport for {} destinations in this process (queue and bus delivery not set up)",
                    other.kind().as_str()
                )),
                Duration::ZERO,
            ),
        }
    }
}

/// The AWS error codes that refuse the message itself: retrying it cannot
/// succeed. SQS answers `InvalidParameterValue` for a message larger than
/// the queue's own `MaximumMessageSize`, `InvalidMessageContents` for
/// characters it does not allow; EventBridge refuses an entry it cannot
/// read with `MalformedDetail` or `ValidationException`.
const MESSAGE_REFUSALS: [&str; 4] =
    ["InvalidParameterValue", "InvalidMessageContents", "MalformedDetail", "ValidationException"];

/// The AWS error codes that mean "slow down": recorded as HTTP 429, so the
/// breaker counts them as it counts an endpoint's 429 (SQS and EventBridge
/// answer them with 400).
const THROTTLING: [&str; 5] =
    ["ThrottlingException", "Throttling", "RequestThrottled", "TooManyRequestsException", "KmsThrottled"];

/// The status an attempt records for an AWS error `code` answered with
/// `status`: 429 for throttling; a failed `PutEvents` entry (answered
/// with 200) as 500 when EventBridge failed internally, else 400; any
/// other as answered.
fn recorded_status(code: &str, status: u16) -> u16 {
    if THROTTLING.contains(&code) {
        429
    } else if (200..300).contains(&status) {
        if code == "InternalFailure" {
            500
        } else {
            400
        }
    } else {
        status
    }
}

/// The short code of an AWS JSON error type (`com.amazonaws.sqs#QueueDoesNotExist`
/// → `QueueDoesNotExist`, `AWS.SimpleQueueService.NonExistentQueue` →
/// `NonExistentQueue`).
fn short_code(t: &str) -> &str {
    let t = t.rsplit('#').next().unwrap_or(t);
    let t = t.split(':').next().unwrap_or(t);
    t.rsplit('.').next().unwrap_or(t)
}

/// Reads the answer of an AWS JSON-protocol call (`service` names it in
/// errors: `SQS`, `EventBridge`): `status` and `body` as received.
pub fn aws_answer(service: &str, status: u16, body: &str, latency: Duration) -> PostResult {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or(serde_json::Value::Null);
    let message = |v: &serde_json::Value| {
        v.get("message").or_else(|| v.get("Message")).and_then(|m| m.as_str()).unwrap_or("").to_string()
    };
    let (code, text) = if (200..300).contains(&status) {
        // PutEvents answers 200 with the failed entries counted: a failed
        // attempt all the same, never a success.
        match v.get("FailedEntryCount").and_then(|n| n.as_u64()) {
            Some(n) if n > 0 => {
                let e = v.get("Entries").and_then(|e| e.get(0)).cloned().unwrap_or_default();
                let code = e.get("ErrorCode").and_then(|c| c.as_str()).unwrap_or("unknown").to_string();
                (Some(code), e.get("ErrorMessage").and_then(|c| c.as_str()).unwrap_or("").to_string())
            }
            _ => (None, String::new()),
        }
    } else {
        let code = v.get("__type").and_then(|t| t.as_str()).map(short_code).unwrap_or("").to_string();
        (Some(if code.is_empty() { format!("HTTP {status}") } else { code }), message(&v))
    };
    let Some(code) = code else {
        return PostResult { status: Some(status), body: body.to_string(), retry_after: None, error: None, latency };
    };
    PostResult {
        status: Some(recorded_status(&code, status)),
        body: body.to_string(),
        retry_after: None,
        error: Some(refusal_or_failure(service, &code, &text)),
        latency,
    }
}

fn refusal_or_failure(service: &str, code: &str, message: &str) -> PostError {
    let text = if message.is_empty() { format!("{service} {code}") } else { format!("{service} {code}: {message}") };
    if MESSAGE_REFUSALS.contains(&code) {
        PostError::Refused(text)
    } else {
        PostError::Other(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_answers_are_delivered_failed_or_refused() {
        let ok = aws_answer("SQS", 200, r#"{"MessageId":"m"}"#, Duration::ZERO);
        assert!(ok.is_success());
        let missing = aws_answer(
            "SQS",
            400,
            r#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}"#,
            Duration::ZERO,
        );
        assert_eq!(
            missing.error,
            Some(PostError::Other("SQS QueueDoesNotExist: The specified queue does not exist.".into()))
        );
        let denied = aws_answer("SQS", 403, r#"{"__type":"AccessDenied"}"#, Duration::ZERO);
        assert!(matches!(denied.error, Some(PostError::Other(ref e)) if e == "SQS AccessDenied"));
        let throttled = aws_answer("EventBridge", 400, r#"{"__type":"ThrottlingException"}"#, Duration::ZERO);
        assert!(matches!(throttled.error, Some(PostError::Other(_))));
        assert_eq!(throttled.status, Some(429), "throttling counts for the breaker as a 429");
        let sqs_throttled =
            aws_answer("SQS", 400, r#"{"__type":"com.amazonaws.sqs#RequestThrottled"}"#, Duration::ZERO);
        assert_eq!(sqs_throttled.status, Some(429));
        assert_eq!(missing.status, Some(400), "a missing queue is a client error, as answered");
        let too_long = aws_answer(
            "SQS",
            400,
            r#"{"__type":"com.amazonaws.sqs#InvalidParameterValue","message":"too long"}"#,
            Duration::ZERO,
        );
        assert!(matches!(too_long.error, Some(PostError::Refused(_))));
        let partial = aws_answer(
            "EventBridge",
            200,
            r#"{"FailedEntryCount":1,"Entries":[{"ErrorCode":"InternalFailure","ErrorMessage":"x"}]}"#,
            Duration::ZERO,
        );
        assert_eq!(partial.error, Some(PostError::Other("EventBridge InternalFailure: x".into())));
        assert_eq!(partial.status, Some(500), "a failed entry is never recorded as a 200");
        assert!(!partial.is_success());
        let refused_entry = aws_answer(
            "EventBridge",
            200,
            r#"{"FailedEntryCount":1,"Entries":[{"ErrorCode":"AccessDeniedException"}]}"#,
            Duration::ZERO,
        );
        assert_eq!(refused_entry.status, Some(400));
        let put =
            aws_answer("EventBridge", 200, r#"{"FailedEntryCount":0,"Entries":[{"EventId":"e"}]}"#, Duration::ZERO);
        assert!(put.is_success());
        let html = aws_answer("SQS", 503, "<html>", Duration::ZERO);
        assert_eq!(html.error, Some(PostError::Other("SQS HTTP 503".into())));
    }
}
