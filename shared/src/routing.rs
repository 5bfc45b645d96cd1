//! Routing: which subscriptions an event goes to. Pure: it reads the event's
//! type and tenant, never its payload (docs/architecture.md#stage-table:
//! the router never reads an event's payload).
//!
//! The stores keep an index of subscriptions by [`RouteKey`] (scope and
//! pattern, one entry per pattern of a subscription: [`index_keys`]). An
//! event's candidates are the entries under its few [`route_keys`] (its
//! scopes × the patterns that can match its type), so finding them costs the
//! same whatever the number of subscriptions that do not match; [`wants`]
//! stays the final check.

use crate::envelope::show;
use crate::event::EventRecord;
use crate::lane::LaneRef;
use crate::subscription::Subscription;

pub use crate::tenant::Scope;

/// One key of the routing index: a scope and a pattern exactly as a
/// subscription writes it (`task.succeeded`, `task.*` or `*`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RouteKey {
    /// Whose events.
    pub scope: Scope,
    /// Which types.
    pub pattern: String,
}

impl RouteKey {
    /// The key as one string, `<scope>#<pattern>` ([`Scope::as_text`]): the
    /// DynamoDB index's partition key. Distinct keys give distinct strings.
    pub fn encoded(&self) -> String {
        format!("{}#{}", self.scope.as_text(), self.pattern)
    }
}

/// The index entries of a subscription: its scope with each of its
/// patterns, sorted and without repeats. Whatever its state: routing checks
/// active and verified on the subscription itself ([`wants`]).
pub fn index_keys(sub: &Subscription) -> Vec<RouteKey> {
    let scope = Scope::of(sub.tenant_id.as_ref().map(|t| t.as_str()));
    let mut keys: Vec<RouteKey> =
        sub.event_types.iter().map(|p| RouteKey { scope: scope.clone(), pattern: p.clone() }).collect();
    keys.sort();
    keys.dedup();
    keys
}

/// The patterns that can match `event_type` ([`pattern_matches`]): the type
/// itself, `<prefix>.*` for every prefix that ends before a `.` with
/// something after it, and `*`. For `a.b.c`: `a.b.c`, `a.b.*`, `a.*`, `*`.
/// A versioned type ([`version_of`]) is matched only by patterns that ask
/// for its version: for `a.b.v2`, `a.b.v2`, `a.*.v2` and `*.v2`.
pub fn matching_patterns(event_type: &str) -> Vec<String> {
    if let Some((base, n)) = version_of(event_type) {
        let mut out: Vec<String> =
            unversioned_patterns(base).into_iter().filter(|p| p != base).map(|p| format!("{p}.v{n}")).collect();
        out.push(event_type.to_string());
        out.sort();
        out.dedup();
        return out;
    }
    unversioned_patterns(event_type)
}

/// [`matching_patterns`] of a type read as unversioned.
fn unversioned_patterns(event_type: &str) -> Vec<String> {
    let mut out = vec![event_type.to_string()];
    let b = event_type.as_bytes();
    for (i, _) in b.iter().enumerate().filter(|(i, c)| **c == b'.' && b.len() > i + 1) {
        out.push(format!("{}.*", &event_type[..i]));
    }
    if !is_operational(event_type) {
        out.push("*".to_string());
    }
    out.sort();
    out.dedup();
    out
}

pub use crate::type_version::version_of;

/// The index keys under which the subscriptions an event of this tenant
/// (or none) and type may want are found: global and, with a tenant, that
/// tenant's scope, each with every [`matching_patterns`]. At most
/// 2 × (dots in the type + 2) keys, whatever the number of subscriptions.
pub fn keys_for(tenant_id: Option<&str>, event_type: &str) -> Vec<RouteKey> {
    let patterns = matching_patterns(event_type);
    let mut scopes = vec![Scope::Global];
    scopes.extend(tenant_id.map(|t| Scope::Tenant(t.to_string())));
    scopes
        .into_iter()
        .flat_map(|scope| patterns.iter().map(move |p| RouteKey { scope: scope.clone(), pattern: p.clone() }))
        .collect()
}

/// [`keys_for`] an event's tenant and type: where its candidates are indexed.
pub fn route_keys(event: &EventRecord) -> Vec<RouteKey> {
    keys_for(event.tenant_id.as_ref().map(|t| t.as_str()), &event.event_type)
}

/// The type prefix of Hookline's own operational events
/// (`crate::stage::failing`), which producers may not use.
pub const OPERATIONAL_PREFIX: &str = "hookline.";

/// Whether `event_type` is one of Hookline's operational events. They go
/// only to subscriptions whose patterns name them (`hookline.*`, or an
/// exact type): `*` means every producer event, and a subscriber of `*`
/// does not start receiving Hookline's own events unasked.
pub fn is_operational(event_type: &str) -> bool {
    event_type.starts_with(OPERATIONAL_PREFIX)
}

/// Does `pattern` (exact, `prefix.*` or `*`) match `event_type`? `*`
/// matches every type but the operational ones ([`is_operational`]). A
/// versioned type ([`version_of`]) is matched by itself, or by a wildcard
/// followed by its version (`task.*.v2`, `*.v2`), never by a bare wildcard.
pub fn pattern_matches(pattern: &str, event_type: &str) -> bool {
    if let Some((base, n)) = version_of(event_type) {
        if pattern == event_type {
            return true;
        }
        let wildcard = pattern.strip_suffix(&format!(".v{n}")).filter(|p| *p == "*" || p.ends_with(".*"));
        return wildcard.is_some_and(|p| unversioned_matches(p, base));
    }
    unversioned_matches(pattern, event_type)
}

/// [`pattern_matches`] of a type read as unversioned.
fn unversioned_matches(pattern: &str, event_type: &str) -> bool {
    if pattern == "*" {
        return !is_operational(event_type);
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
/// pattern, and the same tenant when the subscription is tenant-scoped
/// ([`check_scope`], which says why not).
pub fn in_scope(sub: &Subscription, event: &EventRecord) -> bool {
    check_scope(sub, event).is_ok()
}

/// Why an event is outside a subscription's scope ([`check_scope`]): what
/// routing would not have delivered, and so what a replay naming that
/// subscription refuses (a single event) or skips (a partition or a range).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutOfScope {
    /// The subscription is scoped to one tenant and the event belongs to
    /// another, or to none.
    #[error(
        "the subscription is scoped to tenant {} and the event {}",
        show(subscription_tenant.as_str()),
        event_tenant.as_ref().map(|t| t.as_str()).map_or("has no tenant".to_string(), |t| format!("belongs to tenant {}", show(t)))
    )]
    OtherTenant {
        /// The subscription's `tenant_id`.
        subscription_tenant: crate::ids::TenantId,
        /// The event's tenant, if it has one.
        event_tenant: Option<crate::ids::TenantId>,
    },
    /// None of the subscription's `event_types` patterns matches the
    /// event's type.
    #[error("none of the subscription's event_types matches the event's type {}", show(event_type))]
    TypeNotMatched {
        /// The event's type.
        event_type: String,
    },
    /// The event is a test event sent to another subscription
    /// ([`EventRecord::target`]).
    #[error("the event is a test event of another subscription")]
    TestOfAnother,
}

/// The routing decision for one subscription and one event, whatever the
/// subscription's state (active and verified are [`wants`]'s concern): the
/// event is in scope when the subscription has no tenant or the event's
/// tenant is the subscription's, and one of its patterns matches the
/// event's type ([`pattern_matches`]). The one place both routing
/// ([`in_scope`], [`wants`]) and replays to a named subscription decide it,
/// so a replay never delivers what routing would not have. A tenant
/// mismatch is reported before a type mismatch. A test event
/// ([`EventRecord::target`]) is in the scope of its one subscription
/// (tenant rule aside), whatever its patterns, and of no other.
pub fn check_scope(sub: &Subscription, event: &EventRecord) -> Result<(), OutOfScope> {
    if event.target.as_ref().is_some_and(|t| t != &sub.id) {
        return Err(OutOfScope::TestOfAnother);
    }
    if let Some(t) = &sub.tenant_id {
        if event.tenant_id.as_ref() != Some(t) {
            return Err(OutOfScope::OtherTenant {
                subscription_tenant: t.clone(),
                event_tenant: event.tenant_id.clone(),
            });
        }
    }
    if event.target.is_none() && !sub.event_types.iter().any(|p| pattern_matches(p, &event.event_type)) {
        return Err(OutOfScope::TypeNotMatched { event_type: event.event_type.clone() });
    }
    Ok(())
}

/// The subscriptions an event is routed to, in the order given (borrowing
/// the event: routing never copies a body).
pub fn matching<'a>(subs: &'a [Subscription], event: &'a EventRecord) -> impl Iterator<Item = &'a Subscription> + 'a {
    subs.iter().filter(move |s| wants(s, event))
}

/// The lane a new saga of `sub` for `event` takes: one when the
/// subscription is ordered and the event has a partition number.
pub fn lane_for(sub: &Subscription, event: &EventRecord) -> Option<LaneRef> {
    if sub.ordering != crate::lane::Ordering::Partition {
        return None;
    }
    Some(LaneRef { partition: event.partition()?, seq: event.partition_seq?, on_dead_letter: sub.on_dead_letter })
}

#[cfg(test)]
mod operational_tests {
    use super::*;

    /// A test event is in the scope of its target only, whatever the
    /// patterns (its own or another's), and still by the tenant rule.
    #[test]
    fn a_test_event_is_in_its_targets_scope_only() {
        let mut target = crate::testkit::subscription();
        target.event_types = vec!["order.*".into()];
        target.tenant_id = Some(crate::ids::TenantId::new("acme"));
        let mut other = crate::testkit::subscription();
        other.event_types = vec!["hookline.*".into(), "*".into()];
        let mut e = crate::testkit::event(Some("acme"), "hookline.test");
        assert_eq!(check_scope(&target, &e), Err(OutOfScope::TypeNotMatched { event_type: "hookline.test".into() }));
        assert!(check_scope(&other, &e).is_ok(), "a producer event of this type would go to `hookline.*`");
        e.target = Some(target.id.clone());
        assert_eq!(check_scope(&target, &e), Ok(()));
        assert_eq!(check_scope(&other, &e), Err(OutOfScope::TestOfAnother));
        e.tenant_id = Some(crate::ids::TenantId::new("globex"));
        assert!(matches!(check_scope(&target, &e), Err(OutOfScope::OtherTenant { .. })));
    }

    #[test]
    fn operational_events_go_only_to_patterns_that_name_them() {
        let t = "hookline.subscription.disabled";
        assert!(!pattern_matches("*", t));
        assert!(pattern_matches("hookline.*", t));
        assert!(pattern_matches("hookline.subscription.*", t));
        assert!(pattern_matches(t, t));
        assert!(!matching_patterns(t).contains(&"*".to_string()));
        assert!(pattern_matches("*", "order.created"));
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) use crate::testkit::{event, subscription};

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

        /// The patterns listed for a type are exactly those that match it.
        #[test]
        fn matching_patterns_are_the_patterns_that_match(t in "[ab.]{1,7}", p in "[ab.]{0,5}(\\.\\*)?|\\*") {
            prop_assert_eq!(matching_patterns(&t).contains(&p), pattern_matches(&p, &t), "pattern {} type {}", p, t);
        }

        /// The index agrees with the scope rule: a subscription shares a key
        /// with an event's route keys exactly when the event is in its scope.
        #[test]
        fn index_keys_meet_route_keys_exactly_when_in_scope(
            sub_tenant in proptest::option::of("t[12]"),
            patterns in proptest::collection::vec("[ab]{1,2}(\\.[ab]{1,2}){0,2}(\\.\\*)?|\\*", 1..4),
            event_tenant in proptest::option::of("t[12]"),
            event_type in "[ab]{1,2}(\\.[ab]{1,2}){0,3}",
        ) {
            let mut sub = subscription();
            sub.tenant_id = sub_tenant.map(crate::ids::TenantId::new);
            sub.event_types = patterns;
            let mut event = event(None, &event_type);
            event.tenant_id = event_tenant.map(crate::ids::TenantId::new);
            let route = route_keys(&event);
            let meets = index_keys(&sub).iter().any(|k| route.contains(k));
            prop_assert_eq!(meets, in_scope(&sub, &event), "{:?} {:?}", index_keys(&sub), route);
        }
    }

    /// A subscription of `tenant` (or none) to `patterns`.
    fn scoped(tenant: Option<&str>, patterns: &[&str]) -> Subscription {
        let mut sub = subscription();
        sub.tenant_id = tenant.map(crate::ids::TenantId::new);
        sub.event_types = patterns.iter().map(|p| p.to_string()).collect();
        sub
    }

    #[test]
    fn a_tenant_scoped_subscription_takes_only_its_tenants_events() {
        let a = scoped(Some("acme"), &["order.*"]);
        assert_eq!(check_scope(&a, &event(Some("acme"), "order.created")), Ok(()));
        assert_eq!(
            check_scope(&a, &event(Some("globex"), "order.created")),
            Err(OutOfScope::OtherTenant {
                subscription_tenant: crate::ids::TenantId::new("acme"),
                event_tenant: Some(crate::ids::TenantId::new("globex"))
            })
        );
        assert_eq!(
            check_scope(&a, &event(None, "order.created")),
            Err(OutOfScope::OtherTenant { subscription_tenant: crate::ids::TenantId::new("acme"), event_tenant: None }),
            "an event without a tenant is no tenant's"
        );
        // Both wrong: the tenant is named, it is the graver mismatch.
        assert!(matches!(check_scope(&a, &event(Some("globex"), "invoice.paid")), Err(OutOfScope::OtherTenant { .. })));
    }

    #[test]
    fn a_type_no_pattern_matches_is_out_of_scope() {
        let a = scoped(Some("acme"), &["order.*", "invoice.paid"]);
        assert_eq!(check_scope(&a, &event(Some("acme"), "invoice.paid")), Ok(()));
        assert_eq!(
            check_scope(&a, &event(Some("acme"), "invoice.voided")),
            Err(OutOfScope::TypeNotMatched { event_type: "invoice.voided".into() })
        );
        // `*` leaves Hookline's operational events out, as routing does.
        let all = scoped(None, &["*"]);
        assert_eq!(check_scope(&all, &event(Some("globex"), "order.created")), Ok(()), "global: every tenant");
        assert!(matches!(
            check_scope(&all, &event(None, "hookline.subscription.disabled")),
            Err(OutOfScope::TypeNotMatched { .. })
        ));
    }

    #[test]
    fn the_scope_ignores_state_and_wants_adds_it() {
        let mut a = scoped(Some("acme"), &["*"]);
        a.active = false;
        let e = event(Some("acme"), "order.created");
        assert_eq!(check_scope(&a, &e), Ok(()), "a replay may name an inactive subscription");
        assert!(in_scope(&a, &e));
        assert!(!wants(&a, &e));
        assert!(!in_scope(&a, &event(Some("globex"), "order.created")));
    }

    #[test]
    fn out_of_scope_says_why_with_the_names_escaped() {
        let a = scoped(Some("acme"), &["order.*"]);
        let other = check_scope(&a, &event(Some("glo\nbex"), "order.created")).unwrap_err().to_string();
        assert_eq!(other, "the subscription is scoped to tenant `acme` and the event belongs to tenant `glo\\nbex`");
        let none = check_scope(&a, &event(None, "order.created")).unwrap_err().to_string();
        assert_eq!(none, "the subscription is scoped to tenant `acme` and the event has no tenant");
        let ty = check_scope(&a, &event(Some("acme"), "invoice.paid")).unwrap_err().to_string();
        assert_eq!(ty, "none of the subscription's event_types matches the event's type `invoice.paid`");
    }

    #[test]
    fn route_keys_of_a_dotted_type() {
        let keys = keys_for(Some("acme"), "a.b.c");
        let patterns = |s: &Scope| {
            let mut p: Vec<&str> = keys.iter().filter(|k| &k.scope == s).map(|k| k.pattern.as_str()).collect();
            p.sort();
            p
        };
        assert_eq!(keys.len(), 8);
        assert_eq!(patterns(&Scope::Global), ["*", "a.*", "a.b.*", "a.b.c"]);
        assert_eq!(patterns(&Scope::Tenant("acme".into())), ["*", "a.*", "a.b.*", "a.b.c"]);
        assert_eq!(keys_for(None, "RecordUpdated").len(), 2, "an undotted type without a tenant: itself and *");
    }

    #[test]
    fn a_versioned_type_goes_only_to_patterns_that_ask_for_its_version() {
        let t = "task.succeeded.v2";
        assert_eq!(version_of(t), Some(("task.succeeded", 2)));
        for not in ["task.succeeded", "task.v1", "task.v02", "v2", "task.vx", "task.v", ".v2"] {
            assert_eq!(version_of(not), None, "{not}");
        }
        assert!(!pattern_matches("task.*", t), "a bare wildcard never takes a new major version");
        assert!(!pattern_matches("*", t));
        assert!(!pattern_matches("task.succeeded.*", t));
        assert!(pattern_matches("task.*.v2", t));
        assert!(pattern_matches("*.v2", t));
        assert!(pattern_matches(t, t));
        assert!(!pattern_matches("task.*.v3", t));
        assert!(!pattern_matches("order.*.v2", t));
        assert!(!pattern_matches("task.*.v2", "task.succeeded"), "nor does a versioned pattern take version 1");
        assert!(pattern_matches("task.*", "task.succeeded"), "unversioned types route as before");
        assert_eq!(matching_patterns(t), ["*.v2", "task.*.v2", "task.succeeded.v2"]);
        assert_eq!(keys_for(Some("acme"), t).len(), 6, "still a handful of keys");
    }

    proptest! {
        /// For versioned types too, the patterns listed are exactly those
        /// that match.
        #[test]
        fn versioned_patterns_are_the_patterns_that_match(
            t in "[ab]{1,2}(\\.[ab]{1,2}){0,2}\\.v[23]",
            p in "([ab]{1,2}(\\.[ab]{1,2}){0,2}\\.\\*|\\*)(\\.v[23])?|[ab]{1,2}(\\.[ab]{1,2}){0,2}\\.v[23]",
        ) {
            prop_assert_eq!(matching_patterns(&t).contains(&p), pattern_matches(&p, &t), "pattern {} type {}", p, t);
        }
    }

    #[test]
    fn scopes_and_keys_encode_without_ambiguity() {
        let k = |t: Option<&str>, p: &str| RouteKey { scope: Scope::of(t), pattern: p.into() }.encoded();
        assert_eq!(k(None, "task.*"), "g#task.*");
        assert_eq!(k(Some("acme"), "*"), "t4:acme#*");
        assert_ne!(k(Some("a#b"), "c"), k(Some("a"), "b#c"));
        assert_ne!(k(Some("g"), "x"), k(None, "x"));
    }
}
