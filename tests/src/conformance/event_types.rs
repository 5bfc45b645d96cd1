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

/// The event catalog's entries: a conditional put inserts once (a second
/// insert of the same type is refused), an update applies only over the
/// version read (a stale one is refused, nothing written); an entry reads
/// back as written; a name's versions are its own (not another type that
/// only looks like one), oldest first; the catalog pages in type order.
pub async fn catalog_entries_are_written_conditionally_and_listed(s: &Stores) {
    use shared::catalog::CatalogEntry;
    let store = &s.event_types;
    let name = format!("cat{}.paid", shared::ids::random_token("").to_ascii_lowercase().replace('-', "_"));
    let at = Utc::now().round_subsecs(3);
    let entry = |name: &str, version: u32, at| CatalogEntry {
        name: name.to_string(),
        version,
        schema: serde_json::json!({"type": "object"}),
        description: Some("paid".into()),
        example: Some(serde_json::json!({})),
        registered_at: at,
        updated_at: at,
    };
    let v1 = entry(&name, 1, at);
    assert!(store.catalog_put(&v1, None).await.unwrap());
    assert!(!store.catalog_put(&v1, None).await.unwrap(), "inserted once");
    assert_eq!(store.catalog_get(&name).await.unwrap(), Some(v1.clone()));
    let later = at + Duration::seconds(5);
    let changed = CatalogEntry { description: Some("changed".into()), updated_at: later, ..v1.clone() };
    assert!(store.catalog_put(&changed, Some(at)).await.unwrap());
    let stale =
        CatalogEntry { description: Some("stale".into()), updated_at: later + Duration::seconds(1), ..v1.clone() };
    assert!(!store.catalog_put(&stale, Some(at)).await.unwrap(), "over a version no longer stored");
    assert_eq!(store.catalog_get(&name).await.unwrap().unwrap().description.as_deref(), Some("changed"));
    assert_eq!(store.catalog_get(&format!("{name}.v7")).await.unwrap(), None);

    for e in [
        entry(&name, 3, at),
        entry(&name, 2, at),
        entry(&format!("{name}.v2x"), 1, at),
        entry(&format!("{name}.validated"), 1, at),
    ] {
        assert!(store.catalog_put(&e, None).await.unwrap());
    }
    let versions: Vec<u32> = store.catalog_versions(&name).await.unwrap().iter().map(|e| e.version).collect();
    assert_eq!(versions, [1, 2, 3], "its own versions only, oldest first");
    assert!(store.catalog_versions(&format!("{name}.none")).await.unwrap().is_empty());

    let mut listed = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = store.catalog_page(2, after.as_deref()).await.unwrap();
        assert!(page.items.len() <= 2);
        listed.extend(page.items.iter().map(|e| e.event_type()).filter(|t| t.starts_with(&name)));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    let mut want = vec![
        name.clone(),
        format!("{name}.v2"),
        format!("{name}.v2x"),
        format!("{name}.v3"),
        format!("{name}.validated"),
    ];
    want.sort();
    assert_eq!(listed, want, "every entry once, in type order");
}
