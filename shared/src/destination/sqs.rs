//! SQS destinations: the `SendMessage` request (JSON protocol,
//! `X-Amz-Target: AmazonSQS.SendMessage`) of one attempt, and the queue's
//! limits, checked when a subscription is saved and again per message.
//!
//! The message body is exactly the body an HTTPS delivery would POST (the
//! subscription's payload format applies, and a Standard Webhooks signature
//! still verifies over it); the delivery headers travel as `String`
//! message attributes of the same names.
//!
//! Limits (Amazon SQS Developer Guide, "Amazon SQS message quotas"; the API
//! reference of `SendMessage` and `MessageAttributeValue`):
//! - a message, body and attributes (name, type and value of each) together,
//!   is at most 1 MiB (1,048,576 bytes) since August 2025 (256 KiB before;
//!   a queue's own `MaximumMessageSize` may be lower: SQS then answers
//!   `InvalidParameterValue`, which ends the attempt as rejected too);
//! - at most 10 message attributes; a name is 1 to 256 characters of
//!   letters, digits, `_`, `-` and `.`, neither starting nor ending with
//!   `.`, without `..`, and not starting with `AWS.` or `Amazon.` in any case;
//! - FIFO: `MessageGroupId` and `MessageDeduplicationId` are 1 to 128
//!   characters of letters, digits and punctuation.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::SqsQueue;

/// The largest message SQS accepts: body and attributes together.
pub const MAX_MESSAGE_BYTES: usize = 1_048_576;

/// The most message attributes one message may carry.
pub const MAX_ATTRIBUTES: usize = 10;

/// The delivery headers Hookline itself may send as attributes, at most:
/// `webhook-id`, `webhook-timestamp`, `webhook-signature`,
/// `hookline-event-type`, `hookline-attempt`, and for some events
/// `hookline-partition-key`, `hookline-sequence`, `hookline-trace-id` and
/// `traceparent`. A subscription's own `headers` get what is left, so that
/// no event can carry too many.
pub const OWN_ATTRIBUTES: usize = 9;

/// The delivery header that is not sent as an attribute (SQS has no
/// content type; the body is always JSON text).
const NOT_AN_ATTRIBUTE: &str = "content-type";

/// Whether `name` may name an SQS message attribute.
pub fn valid_attribute_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    (1..=256).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        && !name.starts_with('.')
        && !name.ends_with('.')
        && !name.contains("..")
        && !lower.starts_with("aws.")
        && !lower.starts_with("amazon.")
}

/// Checks a subscription's custom `headers` for an SQS destination: each
/// name a valid attribute name, and few enough that every delivery fits in
/// [`MAX_ATTRIBUTES`] beside Hookline's own [`OWN_ATTRIBUTES`]. The error
/// says which rule, for a `422` naming `headers`.
pub fn check_headers(headers: &BTreeMap<String, String>) -> Result<(), String> {
    if let Some(bad) = headers.keys().find(|k| !valid_attribute_name(k)) {
        return Err(format!(
            "`{bad}` cannot name an SQS message attribute (letters, digits, `_`, `-`, `.`; no leading, \
             trailing or double `.`; not starting with AWS. or Amazon.)"
        ));
    }
    let room = MAX_ATTRIBUTES - OWN_ATTRIBUTES;
    if headers.len() > room {
        return Err(format!(
            "an SQS message carries at most {MAX_ATTRIBUTES} attributes and Hookline's own headers take up to \
             {OWN_ATTRIBUTES}: at most {room} custom header(s), not {}",
            headers.len()
        ));
    }
    Ok(())
}

/// Why a message cannot be sent to the queue at all (never worth a retry).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SqsRefusal {
    /// Body and attributes are larger than [`MAX_MESSAGE_BYTES`].
    #[error("message of {0} bytes (body and attributes) is larger than SQS's limit of {MAX_MESSAGE_BYTES} bytes")]
    TooLarge(usize),
    /// More attributes than [`MAX_ATTRIBUTES`].
    #[error("message would carry {0} attributes; SQS allows at most {MAX_ATTRIBUTES}")]
    TooManyAttributes(usize),
    /// A header name that cannot name an attribute.
    #[error("header `{0}` cannot name an SQS message attribute")]
    AttributeName(String),
    /// The body is not UTF-8 text.
    #[error("the body is not UTF-8 text, which an SQS message body must be")]
    NotText,
}

/// A FIFO identifier (`MessageGroupId`, `MessageDeduplicationId`): `raw`
/// itself when it is 1 to 128 characters of letters, digits and
/// punctuation; otherwise a hex digest of it (the same input always gives
/// the same id, so a partition stays one group).
pub fn fifo_id(raw: &str) -> String {
    if (1..=128).contains(&raw.len()) && raw.bytes().all(|b| b.is_ascii_graphic()) {
        return raw.to_string();
    }
    let d = Sha256::digest(raw.as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The JSON body of the `SendMessage` call delivering `body` with
/// `headers` to `queue` at `queue_url` (the endpoint's URL of the queue).
/// For a FIFO queue `group` is the `MessageGroupId` (the event's partition,
/// else the subscription) and `dedup` the `MessageDeduplicationId`.
pub fn send_message(
    queue: &SqsQueue,
    queue_url: &str,
    headers: &[(&str, String)],
    body: &[u8],
    group: &str,
    dedup: &str,
) -> Result<serde_json::Value, SqsRefusal> {
    let text = std::str::from_utf8(body).map_err(|_| SqsRefusal::NotText)?;
    let mut attributes = serde_json::Map::new();
    let mut size = text.len();
    for (name, value) in headers.iter().filter(|(k, _)| !k.eq_ignore_ascii_case(NOT_AN_ATTRIBUTE)) {
        if !valid_attribute_name(name) {
            return Err(SqsRefusal::AttributeName(name.to_string()));
        }
        size += name.len() + "String".len() + value.len();
        attributes.insert(name.to_string(), serde_json::json!({"DataType": "String", "StringValue": value}));
    }
    if attributes.len() > MAX_ATTRIBUTES {
        return Err(SqsRefusal::TooManyAttributes(attributes.len()));
    }
    if size > MAX_MESSAGE_BYTES {
        return Err(SqsRefusal::TooLarge(size));
    }
    let mut req = serde_json::json!({
        "QueueUrl": queue_url,
        "MessageBody": text,
        "MessageAttributes": attributes,
    });
    if queue.fifo() {
        req["MessageGroupId"] = fifo_id(group).into();
        req["MessageDeduplicationId"] = fifo_id(dedup).into();
    }
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::destination::{parse, Destination};

    fn queue(name: &str) -> SqsQueue {
        match parse(&format!("arn:aws:sqs:us-east-1:123456789012:{name}")).unwrap() {
            Destination::Sqs(q) => q,
            _ => unreachable!(),
        }
    }

    fn headers() -> Vec<(&'static str, String)> {
        vec![("content-type", "application/json".into()), ("webhook-id", "msg_1".into()), ("x-team", "a".into())]
    }

    #[test]
    fn the_body_is_sent_as_is_and_headers_as_string_attributes() {
        let r = send_message(&queue("q"), "https://sqs/q", &headers(), br#"{"a":1}"#, "g", "d").unwrap();
        assert_eq!(r["MessageBody"], r#"{"a":1}"#);
        assert_eq!(r["MessageAttributes"]["webhook-id"]["StringValue"], "msg_1");
        assert_eq!(r["MessageAttributes"]["webhook-id"]["DataType"], "String");
        assert!(r["MessageAttributes"].get("content-type").is_none(), "no content type attribute");
        assert!(r.get("MessageGroupId").is_none(), "a standard queue has no group");
        let f = send_message(&queue("q.fifo"), "https://sqs/q.fifo", &headers(), b"{}", "pk 1", "sg_1#2").unwrap();
        assert_eq!(f["MessageGroupId"], fifo_id("pk 1"));
        assert_eq!(f["MessageDeduplicationId"], "sg_1#2");
        assert_ne!(fifo_id("pk 1"), "pk 1", "a space is not allowed in a group id");
    }

    #[test]
    fn limits_refuse_the_message() {
        let big = vec![b'a'; MAX_MESSAGE_BYTES];
        assert!(matches!(send_message(&queue("q"), "u", &headers(), &big, "g", "d"), Err(SqsRefusal::TooLarge(_))));
        let just = vec![b'a'; MAX_MESSAGE_BYTES - "webhook-idStringmsg_1x-teamStringa".len()];
        assert!(send_message(&queue("q"), "u", &headers(), &just, "g", "d").is_ok(), "exactly the limit fits");
        let many: Vec<(&str, String)> = ["a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "a10", "a11"]
            .iter()
            .map(|k| (*k, "v".into()))
            .collect();
        assert!(matches!(
            send_message(&queue("q"), "u", &many, b"{}", "g", "d"),
            Err(SqsRefusal::TooManyAttributes(11))
        ));
        assert!(matches!(
            send_message(&queue("q"), "u", &[("AWS.x", "v".into())], b"{}", "g", "d"),
            Err(SqsRefusal::AttributeName(_))
        ));
        assert!(matches!(send_message(&queue("q"), "u", &[], &[0xff, 0xfe], "g", "d"), Err(SqsRefusal::NotText)));
    }

    #[test]
    fn custom_headers_are_checked_for_room_and_names() {
        let one: BTreeMap<String, String> = [("x-team".to_string(), "a".to_string())].into();
        assert!(check_headers(&one).is_ok());
        let two: BTreeMap<String, String> =
            [("x-a".to_string(), "a".to_string()), ("x-b".to_string(), "b".to_string())].into();
        assert!(check_headers(&two).unwrap_err().contains("at most 1"));
        for bad in ["amazon.x", "AWS.y", ".a", "a.", "a..b", "a b", ""] {
            let h: BTreeMap<String, String> = [(bad.to_string(), "v".to_string())].into();
            assert!(check_headers(&h).is_err(), "{bad}");
        }
    }
}
