//! Health and limits, partitions, the event search and the audit trail.

use super::*;

// ------------------------------------------------------ health and limits

/// A health record is written only over the version it was read at (0:
/// none yet), so two workers never overwrite each other's change.
pub async fn health_writes_are_conditional_on_the_version(s: &Stores) {
    let id = SubscriptionId::new("sub_health");
    assert_eq!(s.health.get(&id).await.unwrap(), None);
    let first = shared::health::Health { consecutive_failures: 1, version: 1, ..Default::default() };
    assert!(s.health.put(&id, &first, 0).await.unwrap());
    assert!(!s.health.put(&id, &first, 0).await.unwrap(), "a second first write loses");
    let second = shared::health::Health { consecutive_failures: 2, version: 2, ..first.clone() };
    assert!(!s.health.put(&id, &second, 7).await.unwrap(), "a stale version loses");
    assert!(s.health.put(&id, &second, 1).await.unwrap());
    assert_eq!(s.health.get(&id).await.unwrap(), Some(second));
}

/// `max_in_flight` slots are leased (a third request waits while two are
/// held; a released or expired slot is free again) and starts under a rate
/// limit are spaced by its interval.
pub async fn limits_lease_slots_and_space_starts(s: &Stores) {
    use shared::ports::Admission;
    let id = SubscriptionId::new("sub_limits");
    let lease = Duration::from_secs(30);
    let granted = |a: Admission| match a {
        Admission::Granted(l) => l,
        Admission::Wait(d) => panic!("expected a slot, told to wait {d:?}"),
    };
    let a = granted(s.limits.admit(&id, Some(2), None, lease).await.unwrap());
    let b = granted(s.limits.admit(&id, Some(2), None, lease).await.unwrap());
    assert_ne!(a.slot, b.slot);
    match s.limits.admit(&id, Some(2), None, lease).await.unwrap() {
        Admission::Wait(d) => assert!(d > Duration::ZERO && d <= lease, "{d:?}"),
        Admission::Granted(l) => panic!("a third slot of two: {l:?}"),
    }
    s.limits.release(&a).await.unwrap();
    let c = granted(s.limits.admit(&id, Some(2), None, lease).await.unwrap());
    assert_eq!(c.slot, a.slot, "the released slot");
    s.limits.release(&a).await.unwrap(); // a stale lease gives back nothing
    assert!(matches!(s.limits.admit(&id, Some(2), None, lease).await.unwrap(), Admission::Wait(_)));
    // A lease that ran out is taken over.
    let short = SubscriptionId::new("sub_limits_short");
    granted(s.limits.admit(&short, Some(1), None, Duration::from_millis(300)).await.unwrap());
    tokio::time::sleep(Duration::from_millis(400)).await;
    granted(s.limits.admit(&short, Some(1), None, lease).await.unwrap());
    // One start per second.
    let rated = SubscriptionId::new("sub_limits_rate");
    let second = Some(Duration::from_secs(1));
    let r = granted(s.limits.admit(&rated, None, second, lease).await.unwrap());
    assert_eq!(r.slot, None);
    match s.limits.admit(&rated, None, second, lease).await.unwrap() {
        Admission::Wait(d) => assert!(d > Duration::from_millis(500) && d <= Duration::from_secs(1), "{d:?}"),
        Admission::Granted(_) => panic!("two starts within a second"),
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    granted(s.limits.admit(&rated, None, second, lease).await.unwrap());
}

/// Ordered delivery's store: a partition's routed-through mark moves only
/// over numbers routed without a gap; a lane's head is its lowest number
/// (then saga id); enqueue and dequeue are idempotent; lanes of other
/// subscriptions and partitions are apart.
pub async fn partitions_are_numbered_marked_and_laned(s: &Stores) {
    use shared::ordering::{Lane, LaneEntry, Partition};
    let p = Partition::of(Some("tenant-1"), "Opportunity:1");
    assert_eq!(s.order.routed_through(&p).await.unwrap(), 0);
    assert_eq!(s.order.mark_routed(&p, 2).await.unwrap(), 0, "1 is not routed yet");
    assert_eq!(s.order.mark_routed(&p, 3).await.unwrap(), 0);
    assert_eq!(s.order.mark_routed(&p, 1).await.unwrap(), 3, "1 closes the gap");
    assert_eq!(s.order.mark_routed(&p, 2).await.unwrap(), 3, "again: nothing changes");
    assert_eq!(s.order.routed_through(&p).await.unwrap(), 3);
    assert_eq!(s.order.routed_through(&Partition::of(None, "Opportunity:1")).await.unwrap(), 0, "another scope");

    let lane = Lane { subscription_id: sub("sub_ordered"), partition: p.clone() };
    let other = Lane { subscription_id: sub("sub_other"), partition: p.clone() };
    let entry = |seq, id: &str| LaneEntry { seq, saga_id: sg(id), event_id: ev(&format!("evt_{seq}")) };
    assert_eq!(s.order.head(&lane).await.unwrap(), None);
    for e in [entry(12, "sg_c"), entry(3, "sg_b"), entry(3, "sg_a"), entry(12, "sg_c")] {
        s.order.enqueue(&lane, &e).await.unwrap();
    }
    s.order.enqueue(&other, &entry(1, "sg_z")).await.unwrap();
    assert_eq!(s.order.head(&lane).await.unwrap(), Some(entry(3, "sg_a")), "lowest number, then saga id");
    s.order.dequeue(&lane, 3, &sg("sg_a")).await.unwrap();
    s.order.dequeue(&lane, 3, &sg("sg_a")).await.unwrap();
    assert_eq!(s.order.head(&lane).await.unwrap(), Some(entry(3, "sg_b")));
    s.order.dequeue(&lane, 3, &sg("sg_b")).await.unwrap();
    assert_eq!(s.order.head(&lane).await.unwrap(), Some(entry(12, "sg_c")), "12 sorts after 3 (numbers, not text)");
    s.order.dequeue(&lane, 12, &sg("sg_c")).await.unwrap();
    assert_eq!(s.order.head(&lane).await.unwrap(), None);
    assert_eq!(s.order.head(&other).await.unwrap(), Some(entry(1, "sg_z")));
}

// ------------------------------------------------------- events search (A)

/// Every page of `q` from the start, `limit` at a time, each page checked
/// to hold at most `limit` (a page may be short and still have a next).
async fn search_all(s: &Stores, q: &EventQuery, limit: usize) -> Vec<EventSummary> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..500 {
        let page = s.events.search(q, limit, after.as_deref()).await.unwrap();
        assert!(page.items.len() <= limit, "{q:?}: {} items on a page of {limit}", page.items.len());
        out.extend(page.items);
        match page.next {
            Some(n) => after = Some(n),
            None => return out,
        }
    }
    panic!("{q:?}: no last page after 500");
}

/// `search` finds exactly the events each filter names (type exact and
/// pattern, tenant, partition, time range, outcome, and together), in both
/// orders (within a partition by its numbers), page by page with any limit;
/// a filter that matches nothing finds nothing. `mark_outcome` only rises
/// and answers `true` once per rise.
pub async fn events_are_found_by_every_filter(s: &Stores) {
    use shared::event_search::{EventQuery, Order, Outcome, TypeFilter};
    use shared::ports::TimeRange;
    let base = (Utc::now() - chrono::Duration::hours(1)).trunc_subsecs(3);
    let at = |secs: i64| base + chrono::Duration::seconds(secs);
    let mk = |id: &str, ty: &str, tenant: Option<&str>, key: Option<&str>, t: DateTime<Utc>| {
        let mut e = event(id, ty);
        e.tenant_id = tenant.map(TenantId::new);
        e.partition_key = key.map(str::to_string);
        e.received_at = t;
        e.occurred_at = t - chrono::Duration::seconds(1);
        e
    };
    let events = vec![
        mk("evt_s0", "order.created", None, None, base - chrono::Duration::days(2)),
        mk("evt_s1", "order.created", Some("acme"), Some("o:1"), at(1)),
        mk("evt_s2", "order.paid", Some("acme"), Some("o:1"), at(2)),
        mk("evt_s3", "order.created", Some("globex"), Some("o:1"), at(3)),
        mk("evt_s4", "invoice.sent", None, Some("o:1"), at(4)),
        mk("evt_s6", "invoice.sent", None, None, at(5)),
        mk("evt_s5", "order.created", None, None, at(5)),
        mk("evt_s7", "orders.other", Some("acme"), None, at(6)),
        mk("evt_s8", "order.created", Some("acme"), Some("o:1"), at(7)),
    ];
    for e in &events {
        assert_eq!(s.events.insert(std::slice::from_ref(e)).await.unwrap(), vec![true]);
    }
    // Outcomes rise, once per rise.
    assert!(s.events.mark_outcome(&ev("evt_s2"), Outcome::Failed).await.unwrap());
    assert!(!s.events.mark_outcome(&ev("evt_s2"), Outcome::Failed).await.unwrap(), "already failed");
    assert!(s.events.mark_outcome(&ev("evt_s3"), Outcome::DeadLettered).await.unwrap());
    assert!(!s.events.mark_outcome(&ev("evt_s3"), Outcome::Failed).await.unwrap(), "never falls");
    assert!(s.events.mark_outcome(&ev("evt_s5"), Outcome::Failed).await.unwrap());
    assert!(s.events.mark_outcome(&ev("evt_s5"), Outcome::DeadLettered).await.unwrap(), "rises again");
    assert!(!s.events.mark_outcome(&ev("evt_missing"), Outcome::Failed).await.unwrap(), "no such event");
    let outcome = |id: &str| match id {
        "evt_s2" => Some(Outcome::Failed),
        "evt_s3" | "evt_s5" => Some(Outcome::DeadLettered),
        _ => None,
    };
    let mut stored = Vec::new();
    for e in &events {
        let got = s.events.get(&e.id).await.unwrap().expect("stored");
        stored.push(EventSummary::of(&got, outcome(got.id.as_str())));
    }
    assert_eq!(stored[1].partition_seq, Some(1));
    assert_eq!(stored[8].partition_seq, Some(3), "acme's o:1: s1, s2, s8");

    let ty = |p: &str| TypeFilter::parse(p).unwrap();
    let range = |since: Option<i64>, until: Option<i64>| TimeRange { since: since.map(at), until: until.map(at) };
    let q = EventQuery::default();
    let queries: Vec<(EventQuery, &[&str])> = vec![
        (q.clone(), &["evt_s8", "evt_s7", "evt_s6", "evt_s5", "evt_s4", "evt_s3", "evt_s2", "evt_s1", "evt_s0"]),
        (
            EventQuery { received: range(Some(-10), None), ..q.clone() },
            &["evt_s8", "evt_s7", "evt_s6", "evt_s5", "evt_s4", "evt_s3", "evt_s2", "evt_s1"],
        ),
        (
            EventQuery { event_type: ty("order.created"), ..q.clone() },
            &["evt_s8", "evt_s5", "evt_s3", "evt_s1", "evt_s0"],
        ),
        (
            EventQuery { event_type: ty("order.*"), ..q.clone() },
            &["evt_s8", "evt_s5", "evt_s3", "evt_s2", "evt_s1", "evt_s0"],
        ),
        (
            EventQuery { event_type: ty("*"), received: range(Some(4), Some(6)), ..q.clone() },
            &["evt_s6", "evt_s5", "evt_s4"],
        ),
        (EventQuery { tenant_id: Some(TenantId::new("acme")), ..q.clone() }, &["evt_s8", "evt_s7", "evt_s2", "evt_s1"]),
        (
            EventQuery {
                tenant_id: Some(TenantId::new("acme")),
                event_type: ty("order.*"),
                received: range(Some(2), None),
                ..q.clone()
            },
            &["evt_s8", "evt_s2"],
        ),
        (
            EventQuery { tenant_id: Some(TenantId::new("acme")), partition_key: Some("o:1".into()), ..q.clone() },
            &["evt_s8", "evt_s2", "evt_s1"],
        ),
        (EventQuery { partition_key: Some("o:1".into()), ..q.clone() }, &["evt_s4"]),
        (
            EventQuery {
                tenant_id: Some(TenantId::new("acme")),
                partition_key: Some("o:1".into()),
                received: range(Some(2), Some(7)),
                ..q.clone()
            },
            &["evt_s2"],
        ),
        (
            EventQuery {
                tenant_id: Some(TenantId::new("acme")),
                partition_key: Some("o:1".into()),
                event_type: ty("order.created"),
                ..q.clone()
            },
            &["evt_s8", "evt_s1"],
        ),
        (EventQuery { outcome: Some(Outcome::Failed), ..q.clone() }, &["evt_s5", "evt_s3", "evt_s2"]),
        (EventQuery { outcome: Some(Outcome::DeadLettered), ..q.clone() }, &["evt_s5", "evt_s3"]),
        (
            EventQuery { outcome: Some(Outcome::Failed), tenant_id: Some(TenantId::new("acme")), ..q.clone() },
            &["evt_s2"],
        ),
        (
            EventQuery { outcome: Some(Outcome::DeadLettered), event_type: ty("order.created"), ..q.clone() },
            &["evt_s5", "evt_s3"],
        ),
        (EventQuery { tenant_id: Some(TenantId::new("nobody")), ..q.clone() }, &[]),
        (EventQuery { event_type: ty("nothing.here"), ..q.clone() }, &[]),
        (EventQuery { tenant_id: Some(TenantId::new("acme")), partition_key: Some("o:2".into()), ..q.clone() }, &[]),
        (EventQuery { received: range(Some(100), Some(200)), ..q.clone() }, &[]),
    ];
    for (query, newest_first) in queries {
        for order in [Order::NewestFirst, Order::OldestFirst] {
            let query = EventQuery { order, ..query.clone() };
            let mut want: Vec<&str> = newest_first.to_vec();
            if order == Order::OldestFirst {
                want.reverse();
            }
            for limit in [1, 2, 100] {
                let got = search_all(s, &query, limit).await;
                let ids: Vec<&str> = got.iter().map(|e| e.id.as_str()).collect();
                assert_eq!(ids, want, "{query:?} limit {limit}");
                for e in &got {
                    let expected = stored.iter().find(|x| x.id == e.id).unwrap();
                    assert_eq!(e, expected, "the summary reads back as stored");
                    assert!(query.matches(e));
                }
            }
        }
    }
}

// ------------------------------------------------------------ audit trail (helper C)

/// Every page of an audit listing, followed through `next` (a page may be
/// short and still have a next one); fails on a page that repeats a record.
async fn audit_walk(s: &Stores, filter: &shared::audit::AuditFilter, limit: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..1000 {
        let page = s.audit.page(filter, limit, after.as_deref()).await.unwrap();
        assert!(page.items.len() <= limit, "a page holds at most its limit");
        for r in &page.items {
            assert!(!out.contains(&r.id), "{} listed twice ({filter:?})", r.id);
            out.push(r.id.clone());
        }
        match page.next {
            Some(n) => after = Some(n),
            None => return out,
        }
    }
    panic!("the walk did not end");
}

/// The audit store appends once per id and lists newest first, by every
/// filter alone and together, each page continuing exactly where the last
/// ended; a filter that matches nothing is an empty page, not an error.
pub async fn audit_pages_newest_first_with_every_filter(s: &Stores) {
    use shared::audit::{Action, AuditFilter, AuditRecord};
    use shared::ports::TimeRange;
    let t0 = DateTime::from_timestamp_millis(Utc::now().timestamp_millis() - 3_600_000).unwrap();
    let actions = [Action::SubscriptionUpdated, Action::BreakerOpened, Action::DeadLetterSkipped];
    let mut all = Vec::new();
    for i in 0..25i64 {
        // Two records share each even second: the id breaks the tie.
        let at = t0 + chrono::Duration::seconds(i / 2 * 2);
        let mut r = AuditRecord::at(actions[i as usize % 3], if i % 2 == 0 { "key:a" } else { "key:b" }, at)
            .reason(format!("reason {i}"))
            .details(json!({"i": i}));
        if i % 4 != 0 {
            r = r.subscription(&sub(&format!("sub_{}", i % 2)));
        }
        if i % 5 == 0 {
            r = r.dead_letter(&DeadLetterId::new(format!("dl_{i}"))).event(&ev(&format!("ev_{i}"))).job("job_1");
        }
        // Records of two tenants' resources, and of none (global).
        if i % 3 != 0 {
            r = r.tenant(Some(&shared::ids::TenantId::new(format!("tenant-{}", (i / 3) % 2 + 1))));
        }
        s.audit.append(&r).await.unwrap();
        all.push(r);
    }
    s.audit.append(&all[0]).await.unwrap();
    all.sort_by_key(|r| std::cmp::Reverse(r.position()));
    let expect = |f: &AuditFilter| all.iter().filter(|r| f.matches(r)).map(|r| r.id.clone()).collect::<Vec<_>>();

    let everything = AuditFilter::default();
    let first = s.audit.page(&everything, 25, None).await.unwrap();
    assert_eq!(first.items.len(), 25, "appending an id again stores nothing");
    let stored = all.iter().find(|r| r.id == first.items[24].id).unwrap();
    assert_eq!(&first.items[24], stored, "a record reads back as written");
    let sub0 = Some(sub("sub_0"));
    let mid = t0 + chrono::Duration::seconds(10);
    let filters = [
        everything.clone(),
        AuditFilter { action: Some(Action::BreakerOpened), ..Default::default() },
        AuditFilter { actor: Some("key:b".into()), ..Default::default() },
        AuditFilter { subscription_id: sub0.clone(), ..Default::default() },
        AuditFilter { action: Some(Action::SubscriptionUpdated), actor: Some("key:a".into()), ..Default::default() },
        AuditFilter {
            action: Some(Action::DeadLetterSkipped),
            actor: Some("key:a".into()),
            subscription_id: sub0.clone(),
            ..Default::default()
        },
        AuditFilter { range: TimeRange { since: Some(mid), until: None }, ..Default::default() },
        AuditFilter { range: TimeRange { since: None, until: Some(mid) }, ..Default::default() },
        AuditFilter {
            actor: Some("key:b".into()),
            range: TimeRange { since: Some(t0 + chrono::Duration::seconds(4)), until: Some(mid) },
            ..Default::default()
        },
        // A tenant-bound caller's listings: its tenant always, alone and
        // with every other filter.
        AuditFilter { tenant_id: Some(shared::ids::TenantId::new("tenant-1")), ..Default::default() },
        AuditFilter {
            tenant_id: Some(shared::ids::TenantId::new("tenant-2")),
            actor: Some("key:a".into()),
            ..Default::default()
        },
        AuditFilter {
            tenant_id: Some(shared::ids::TenantId::new("tenant-1")),
            subscription_id: sub0.clone(),
            range: TimeRange { since: Some(t0 + chrono::Duration::seconds(2)), until: None },
            ..Default::default()
        },
        AuditFilter {
            tenant_id: Some(shared::ids::TenantId::new("tenant-2")),
            action: Some(Action::BreakerOpened),
            ..Default::default()
        },
    ];
    for f in &filters {
        let want = expect(f);
        assert!(!want.is_empty(), "{f:?} matches something");
        for limit in [1, 3, 100] {
            assert_eq!(audit_walk(s, f, limit).await, want, "{f:?}, pages of {limit}");
        }
    }
    for nothing in [
        AuditFilter { actor: Some("key:nobody".into()), ..Default::default() },
        AuditFilter { subscription_id: Some(sub("sub_none")), ..Default::default() },
        AuditFilter { tenant_id: Some(shared::ids::TenantId::new("tenant-none")), ..Default::default() },
        AuditFilter { range: TimeRange { since: None, until: Some(t0) }, ..Default::default() },
    ] {
        let p = s.audit.page(&nothing, 10, None).await.unwrap();
        assert!(p.items.is_empty() && p.next.is_none(), "{nothing:?}: {p:?}");
    }
}
