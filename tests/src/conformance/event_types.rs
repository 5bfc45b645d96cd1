//! Conformance of [`shared::ports::EventTypeStore`]: a (scope, type) is
//! inserted once (a repeat changes nothing, its first-seen time kept, also
//! when two writers race), listed by scope only, in type order, paged; and
//! a test event's target survives the event store's round trip (routing
//! reads it back).

use chrono::{Duration, SubsecRound, Utc};
use shared::context::Stores;
use shared::event_types::{SeenType, TypeScope};
use shared::ids::{SubscriptionId, TenantId};

/// A tenant unique to this run.
fn tenant(tag: &str) -> TenantId {
    TenantId::new(format!("{tag}-{}", shared::ids::random_token("")))
}

fn row(scope: &TypeScope, t: &str, at: chrono::DateTime<Utc>) -> SeenType {
    SeenType { scope: scope.clone(), event_type: t.to_string(), first_seen_at: at }
}

/// Inserted once per (scope, type); listed per scope in type order over
/// pages, each type once; another scope's rows never show.
pub async fn event_types_are_recorded_once_and_listed_per_scope(s: &Stores) {
    let store = &s.event_types;
    let (a, b) = (TypeScope::Tenant(tenant("a")), TypeScope::Tenant(tenant("b")));
    let at = Utc::now().round_subsecs(3);
    let rows = [row(&a, "order.b", at), row(&a, "order.a", at), row(&a, "order.c", at), row(&b, "order.z", at)];
    assert_eq!(store.record(&rows).await.unwrap(), [true, true, true, true]);
    let later = at + Duration::hours(1);
    assert_eq!(store.record(&[row(&a, "order.a", later), row(&a, "order.d", later)]).await.unwrap(), [false, true]);

    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = store.page(&a, 2, after.as_deref()).await.unwrap();
        assert!(page.items.len() <= 2);
        assert!(page.items.iter().all(|r| r.scope == a), "{:?}", page.items);
        seen.extend(page.items.iter().map(|r| (r.event_type.clone(), r.first_seen_at)));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    let types: Vec<&str> = seen.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, ["order.a", "order.b", "order.c", "order.d"]);
    assert_eq!(seen[0].1, at, "a repeat keeps the first-seen time");
    let page = store.page(&b, 10, None).await.unwrap();
    assert_eq!((page.items.len(), page.items[0].event_type.as_str(), page.next), (1, "order.z", None));
    let none = store.page(&TypeScope::Tenant(tenant("c")), 10, None).await.unwrap();
    assert!(none.items.is_empty() && none.next.is_none());
}

/// Two writers racing to record the same new type: exactly one inserts.
pub async fn event_types_racing_writers_insert_once(s: &Stores) {
    let scope = TypeScope::Tenant(tenant("race"));
    let at = Utc::now().round_subsecs(3);
    let one = [row(&scope, "x.created", at)];
    let two = [row(&scope, "x.created", at + Duration::seconds(1))];
    let (r1, r2) = tokio::join!(s.event_types.record(&one), s.event_types.record(&two));
    let (r1, r2) = (r1.unwrap()[0], r2.unwrap()[0]);
    assert!(r1 ^ r2, "exactly one writer inserts: {r1} {r2}");
    let page = s.event_types.page(&scope, 10, None).await.unwrap();
    assert_eq!(page.items.len(), 1);
}

/// A test event's target is stored with the event and read back.
pub async fn a_test_events_target_round_trips(s: &Stores) {
    let mut e = super::event(&format!("evt_target_{}", shared::ids::random_token("")), "hookline.test");
    e.target = Some(SubscriptionId::new("sub_target_1"));
    assert_eq!(s.events.insert(std::slice::from_ref(&e)).await.unwrap(), [true]);
    let back = s.events.get(&e.id).await.unwrap().expect("stored");
    assert_eq!(back.target, e.target);
    // The store numbers it in its partition; nothing else changes.
    assert_eq!(back, shared::event::EventRecord { partition_seq: back.partition_seq, ..e });
}
