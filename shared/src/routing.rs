//! Routing: which subscriptions an event goes to. Pure: it reads the event's
//! type and tenant, never its payload (docs/architecture.md#stage-table:
//! the router never reads an event's payload).

use crate::event::EventRecord;
use crate::subscription::Subscription;

/// Does `pattern` (exact, `prefix.*` or `*`) match `event_type`?
pub fn pattern_matches(pattern: &str, event_type: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    match pattern.strip_suffix(".*") {
        Some(prefix) => {
            event_type.len() > prefix.len() + 1
                && event_type.starts_with(prefix)
                && event_type.as_bytes()[prefix.len()] == b'.'
        }
        None => pattern == event_type,
    }
}

/// Does this subscription want this event? Active, verified, and in scope
/// ([`in_scope`]).
pub fn wants(sub: &Subscription, event: &EventRecord) -> bool {
    sub.is_routable() && in_scope(sub, event)
}

/// Is the event in the subscription's scope, whatever its state: a matching
/// pattern, and the same tenant when the subscription is tenant-scoped.
pub fn in_scope(sub: &Subscription, event: &EventRecord) -> bool {
    sub.tenant_id.as_ref().is_none_or(|t| event.tenant_id.as_ref() == Some(t))
        && sub.event_types.iter().any(|p| pattern_matches(p, &event.event_type))
}

/// The subscriptions an event is routed to, in the order given (borrowing
/// the event: routing never copies a body).
pub fn matching<'a>(subs: &'a [Subscription], event: &'a EventRecord) -> impl Iterator<Item = &'a Subscription> + 'a {
    subs.iter().filter(move |s| wants(s, event))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn patterns_match_whole_segments() {
        assert!(pattern_matches("*", "anything"));
        assert!(pattern_matches("task.*", "task.succeeded"));
        assert!(pattern_matches("task.*", "task.step.updated"));
        assert!(!pattern_matches("task.*", "task"));
        assert!(!pattern_matches("task.*", "taskforce.created"));
        assert!(!pattern_matches("task.*", "task."));
        assert!(pattern_matches("RecordUpdated", "RecordUpdated"));
        assert!(!pattern_matches("RecordUpdated", "RecordUpdatedX"));
    }

    proptest! {
        #[test]
        fn exact_pattern_matches_only_itself(a in "[a-z.]{1,12}", b in "[a-z.]{1,12}") {
            prop_assert_eq!(pattern_matches(&a, &b), a == b);
        }

        #[test]
        fn prefix_pattern_matches_its_children(p in "[a-z]{1,6}", rest in "[a-z]{1,6}") {
            let child = format!("{p}.{rest}");
            let pattern = format!("{p}.*");
            prop_assert!(pattern_matches(&pattern, &child));
        }
    }
}
