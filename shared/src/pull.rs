//! Pull (docs/delivery.md#pull): a subscription with `pull: true` can also
//! be read by its subscriber, a page at a time from a cursor, in routing
//! order, with the body and headers a push would carry. Routing gives each
//! of its sagas a pull key ([`pull_key`]); only those sagas are in the
//! pull index (a partial index on SQLite, a sparse GSI on DynamoDB), so no
//! other saga costs anything more. What is decided here, without I/O: the
//! key, and which of a push's headers a pull shows ([`pulled_headers`]).

use chrono::{DateTime, Utc};

use crate::event::EventRecord;
use crate::ids::{EventId, SagaId};
use crate::subscription::Subscription;

/// The most items one pull returns.
pub const MAX_PULL_PAGE: usize = 100;

/// The default page of a pull.
pub const DEFAULT_PULL_PAGE: usize = 50;

/// A routed saga of a pull subscription, as the pull index lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    /// Its place in the listing ([`pull_key`]); the next page starts after
    /// the last one's.
    pub pull_key: String,
    /// The event delivered.
    pub event_id: EventId,
    /// The saga.
    pub saga_id: SagaId,
}

/// The pull key of the saga routing creates for `event` and `sub` at `now`,
/// if `sub` is pulled: routing time (ms), then the event's receipt (ms),
/// then its id, zero-padded so that text order is routing order (events of
/// one routing pass in the order they were received).
pub fn pull_key(sub: &Subscription, event: &EventRecord, now: DateTime<Utc>) -> Option<String> {
    sub.pull.then(|| {
        format!(
            "{:013}.{:013}.{}",
            now.timestamp_millis().max(0),
            event.received_at.timestamp_millis().max(0),
            event.id
        )
    })
}

/// The headers a pulled event shows: a push's
/// ([`crate::stage::deliver::request`]), but for the subscription's custom
/// headers that hold credentials (`Authorization`, `*-Token`, `*-Key`, …:
/// [`crate::subscription::shown_header_value`] hides them), which
/// authenticate Hookline to the subscriber and mean nothing in a pull the
/// subscriber authenticated itself; they are left out, never shown.
pub fn pulled_headers(sub: &Subscription, headers: Vec<(String, String)>) -> Vec<(String, String)> {
    headers
        .into_iter()
        .filter(|(k, v)| !sub.headers.contains_key(k) || crate::subscription::shown_header_value(k, v) == *v)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_pulled_subscriptions_get_keys_that_sort_in_routing_order() {
        let mut sub = crate::testkit::subscription();
        let mut e = crate::testkit::event(None, "a.b");
        let now = Utc::now();
        assert_eq!(pull_key(&sub, &e, now), None);
        sub.pull = true;
        let first = pull_key(&sub, &e, now).unwrap();
        e.received_at += chrono::Duration::milliseconds(1);
        let same_pass = pull_key(&sub, &e, now).unwrap();
        let later = pull_key(&sub, &crate::testkit::event(None, "a.a"), now + chrono::Duration::seconds(1)).unwrap();
        assert!(first < same_pass && same_pass < later, "{first} {same_pass} {later}");
    }

    #[test]
    fn credential_headers_are_left_out_of_a_pull() {
        let mut sub = crate::testkit::subscription();
        sub.headers.insert("authorization".into(), "Bearer s3cret".into());
        sub.headers.insert("x-team".into(), "payments".into());
        let h = vec![
            ("webhook-id".to_string(), "msg_1".to_string()),
            ("authorization".to_string(), "Bearer s3cret".to_string()),
            ("x-team".to_string(), "payments".to_string()),
        ];
        let names: Vec<String> = pulled_headers(&sub, h).into_iter().map(|(k, _)| k).collect();
        assert_eq!(names, ["webhook-id", "x-team"]);
    }
}
