//! Events, sagas, attempts, subscriptions, dead letters and jobs.

use super::*;

// ------------------------------------------------------------------ events

/// Inserting an event whose id exists changes nothing and reports `false`;
/// the stored record reads back exactly as written.
pub async fn events_insert_is_conditional(s: &Stores) {
    let (e1, e2) = (event("evt_1", "task.succeeded"), event("evt_2", "task.failed"));
    assert_eq!(s.events.insert(&[e1.clone(), e2.clone()]).await.unwrap(), vec![true, true]);
    let mut e1_again = event("evt_1", "something.else");
    e1_again.tenant_id = None;
    let e3 = event("evt_3", "quota.committed");
    assert_eq!(s.events.insert(&[e1_again, e3.clone()]).await.unwrap(), vec![false, true]);
    // Stored with the next number of their partition, in acceptance order;
    // the duplicate took none.
    let numbered = |e: &EventRecord, n| Some(EventRecord { partition_seq: Some(n), ..e.clone() });
    assert_eq!(s.events.get(&ev("evt_1")).await.unwrap(), numbered(&e1, 1));
    assert_eq!(s.events.get(&ev("evt_2")).await.unwrap(), numbered(&e2, 2));
    assert_eq!(s.events.get(&ev("evt_3")).await.unwrap(), numbered(&e3, 3));
    assert_eq!(s.events.get(&ev("evt_missing")).await.unwrap(), None);
    // The same id twice in one batch: exactly one is inserted, numbered once.
    let e4 = event("evt_4", "task.succeeded");
    let res = s.events.insert(&[e4.clone(), e4.clone()]).await.unwrap();
    assert_eq!(res.iter().filter(|b| **b).count(), 1, "{res:?}");
    assert_eq!(s.events.insert(&[]).await.unwrap(), Vec::<bool>::new());
    let e5 = event("evt_5", "task.succeeded");
    s.events.insert(std::slice::from_ref(&e5)).await.unwrap();
    assert_eq!(s.events.get(&ev("evt_5")).await.unwrap().unwrap().partition_seq, Some(5), "no gap, no repeat");
    // Another tenant's partition of the same key counts on its own; an
    // event without a partition key gets no number.
    let mut other = event("evt_6", "task.succeeded");
    other.tenant_id = Some(TenantId::new("tenant-2"));
    let mut plain = event("evt_7", "task.succeeded");
    plain.partition_key = None;
    s.events.insert(&[other, plain]).await.unwrap();
    assert_eq!(s.events.get(&ev("evt_6")).await.unwrap().unwrap().partition_seq, Some(1));
    assert_eq!(s.events.get(&ev("evt_7")).await.unwrap().unwrap().partition_seq, None);
}

// ------------------------------------------------------------------- sagas

/// Creating a saga whose id exists changes nothing and reports `false`; a
/// saga is found by its event and id, and only by them.
pub async fn sagas_create_is_idempotent(s: &Stores) {
    let (a, b) = (saga("sg_a", "evt_1", "sub_1"), saga("sg_b", "evt_1", "sub_2"));
    assert_eq!(s.sagas.create(&[a.clone(), b.clone()]).await.unwrap(), vec![true, true]);
    let mut a_again = saga("sg_a", "evt_1", "sub_9");
    a_again.state = state(SagaStatus::InProgress, 3);
    let mut c = saga("sg_c", "evt_2", "sub_1");
    c.origin = Some(Origin {
        kind: shared::saga::OriginKind::Requeue,
        previous_saga_id: Some(sg("sg_a")),
        actor: "ops@example.com".into(),
        reason: "receiver fixed".into(),
        at: now(),
    });
    assert_eq!(s.sagas.create(&[a_again, c.clone()]).await.unwrap(), vec![false, true]);
    assert_eq!(s.sagas.get(&ev("evt_1"), &sg("sg_a")).await.unwrap(), Some(a));
    assert_eq!(s.sagas.get(&ev("evt_1"), &sg("sg_b")).await.unwrap(), Some(b));
    assert_eq!(s.sagas.get(&ev("evt_2"), &sg("sg_c")).await.unwrap(), Some(c));
    assert_eq!(s.sagas.get(&ev("evt_1"), &sg("sg_missing")).await.unwrap(), None);
    assert_eq!(s.sagas.get(&ev("evt_1"), &sg("sg_c")).await.unwrap(), None, "sg_c belongs to evt_2");
}

/// Every saga of an event, and only those.
pub async fn sagas_list_for_event(s: &Stores) {
    let of_a = vec![saga("sg_1", "evt_a", "sub_1"), saga("sg_2", "evt_a", "sub_2"), saga("sg_3", "evt_a", "sub_3")];
    let of_b = saga("sg_4", "evt_b", "sub_1");
    let mut all = of_a.clone();
    all.push(of_b.clone());
    s.sagas.create(&all).await.unwrap();
    assert_eq!(sorted_by_id(s.sagas.list_for_event(&ev("evt_a")).await.unwrap()), of_a);
    assert_eq!(s.sagas.list_for_event(&ev("evt_b")).await.unwrap(), vec![of_b]);
    assert!(s.sagas.list_for_event(&ev("evt_none")).await.unwrap().is_empty());
}

/// An applied transition stores the whole new state (due time and error
/// set and cleared) and `updated_at`, and nothing else.
pub async fn saga_transition_applies_and_stores_the_new_state(s: &Stores) {
    let sg = saga("sg_t", "evt_1", "sub_1");
    s.sagas.create(std::slice::from_ref(&sg)).await.unwrap();
    let t1 = now() + chrono::Duration::seconds(1);
    let start = Transition {
        event_id: sg.event_id.clone(),
        saga_id: sg.id.clone(),
        from: sg.state.clone(),
        to: state(SagaStatus::InProgress, 1),
        at: t1,
    };
    assert_eq!(s.sagas.transition(&[start]).await.unwrap(), vec![TransitionOutcome::Applied]);
    let got = s.sagas.get(&sg.event_id, &sg.id).await.unwrap().unwrap();
    assert_eq!(got, Saga { state: state(SagaStatus::InProgress, 1), updated_at: t1, ..sg.clone() });

    let t2 = t1 + chrono::Duration::seconds(1);
    let retry = SagaState {
        status: SagaStatus::PendingRetry,
        attempts: 1,
        next_attempt_at: Some(t2 + chrono::Duration::milliseconds(30_500)),
        last_error: Some("HTTP 503 \"busy\"".into()),
    };
    let fail = Transition {
        event_id: sg.event_id.clone(),
        saga_id: sg.id.clone(),
        from: state(SagaStatus::InProgress, 1),
        to: retry.clone(),
        at: t2,
    };
    assert_eq!(s.sagas.transition(&[fail]).await.unwrap(), vec![TransitionOutcome::Applied]);
    let got = s.sagas.get(&sg.event_id, &sg.id).await.unwrap().unwrap();
    assert_eq!(got, Saga { state: retry.clone(), updated_at: t2, ..sg.clone() });

    let t3 = t2 + chrono::Duration::seconds(1);
    let again = SagaState {
        status: SagaStatus::InProgress,
        attempts: 2,
        next_attempt_at: None,
        last_error: retry.last_error.clone(),
    };
    let due =
        Transition { event_id: sg.event_id.clone(), saga_id: sg.id.clone(), from: retry, to: again.clone(), at: t3 };
    assert_eq!(s.sagas.transition(&[due]).await.unwrap(), vec![TransitionOutcome::Applied]);
    let got = s.sagas.get(&sg.event_id, &sg.id).await.unwrap().unwrap();
    assert_eq!(got, Saga { state: again, updated_at: t3, ..sg.clone() });
    assert_eq!(s.sagas.list_for_event(&ev("evt_1")).await.unwrap(), vec![got]);
}

/// The reconciler's index: only retrying sagas (InProgress, PendingRetry)
/// are found, once past the given time, oldest first; a Pending or terminal
/// saga never is. `defer` moves a saga's due time only while it is still in
/// the expected state.
pub async fn sagas_stalled_and_deferred(s: &Stores) {
    let t = now();
    let (a, b, c) =
        (saga("sg_st_a", "evt_st", "sub_1"), saga("sg_st_b", "evt_st", "sub_1"), saga("sg_st_c", "evt_st", "sub_1"));
    s.sagas.create(&[a.clone(), b.clone(), c.clone()]).await.unwrap();
    let waiting = |minutes: i64| SagaState {
        status: SagaStatus::PendingRetry,
        attempts: 1,
        next_attempt_at: Some(t - chrono::Duration::minutes(minutes)),
        last_error: Some("HTTP 500".into()),
    };
    let to = |sg: &Saga, st: SagaState| Transition {
        event_id: sg.event_id.clone(),
        saga_id: sg.id.clone(),
        from: sg.state.clone(),
        to: st,
        at: t,
    };
    // a: retry due 60 minutes ago; c: due 90 minutes ago; b stays Pending.
    let outcomes = s.sagas.transition(&[to(&a, waiting(60)), to(&c, waiting(90))]).await.unwrap();
    assert_eq!(outcomes, vec![TransitionOutcome::Applied, TransitionOutcome::Applied]);
    let ids = |v: Vec<Saga>| v.into_iter().map(|s| s.id).collect::<Vec<_>>();
    let before = t - chrono::Duration::minutes(10);
    assert_eq!(
        ids(s.sagas.stalled(before, 10).await.unwrap()),
        vec!["sg_st_c", "sg_st_a"],
        "oldest first, Pending not watched"
    );
    assert_eq!(ids(s.sagas.stalled(before, 1).await.unwrap()), vec!["sg_st_c"], "at most `limit`");
    assert!(s.sagas.stalled(t - chrono::Duration::minutes(120), 10).await.unwrap().is_empty());
    // Deferred: not stalled until the new time; a stale expectation changes nothing.
    assert!(s.sagas.defer(&ev("evt_st"), &sg("sg_st_c"), &waiting(90), t + chrono::Duration::hours(1)).await.unwrap());
    assert!(!s
        .sagas
        .defer(&ev("evt_st"), &sg("sg_st_a"), &state(SagaStatus::InProgress, 2), t + chrono::Duration::hours(1))
        .await
        .unwrap());
    assert_eq!(ids(s.sagas.stalled(before, 10).await.unwrap()), vec!["sg_st_a"]);
    // Terminal: out of the index.
    let done = Transition {
        event_id: a.event_id.clone(),
        saga_id: a.id.clone(),
        from: waiting(60),
        to: SagaState { status: SagaStatus::Completed, attempts: 2, next_attempt_at: None, last_error: None },
        at: t,
    };
    assert_eq!(s.sagas.transition(&[done]).await.unwrap(), vec![TransitionOutcome::Applied]);
    assert!(s.sagas.stalled(before, 10).await.unwrap().is_empty());
    assert!(
        !s.sagas.defer(&ev("evt_st"), &sg("sg_st_a"), &state(SagaStatus::Completed, 2), t).await.unwrap(),
        "terminal sagas are not deferred"
    );
}

/// A transition from a state the saga is no longer in changes nothing and
/// returns the saga's current state (status, attempts, due time, error).
pub async fn saga_transition_conflict_returns_current_state(s: &Stores) {
    let sg = saga("sg_c", "evt_1", "sub_1");
    s.sagas.create(std::slice::from_ref(&sg)).await.unwrap();
    let current = SagaState {
        status: SagaStatus::PendingRetry,
        attempts: 2,
        next_attempt_at: Some(now() + chrono::Duration::seconds(60)),
        last_error: Some("timeout".into()),
    };
    let at = now();
    let t = Transition {
        event_id: sg.event_id.clone(),
        saga_id: sg.id.clone(),
        from: sg.state.clone(),
        to: current.clone(),
        at,
    };
    assert_eq!(s.sagas.transition(&[t]).await.unwrap(), vec![TransitionOutcome::Applied]);
    let stored = s.sagas.get(&sg.event_id, &sg.id).await.unwrap().unwrap();

    // Stale status.
    let stale = Transition {
        event_id: sg.event_id.clone(),
        saga_id: sg.id.clone(),
        from: sg.state.clone(),
        to: state(SagaStatus::InProgress, 1),
        at: now(),
    };
    assert_eq!(s.sagas.transition(&[stale]).await.unwrap(), vec![TransitionOutcome::Conflict(current.clone())]);
    // Same status, other attempt count.
    let stale = Transition {
        event_id: sg.event_id.clone(),
        saga_id: sg.id.clone(),
        from: state(SagaStatus::PendingRetry, 1),
        to: state(SagaStatus::InProgress, 2),
        at: now(),
    };
    assert_eq!(s.sagas.transition(&[stale]).await.unwrap(), vec![TransitionOutcome::Conflict(current.clone())]);
    assert_eq!(s.sagas.get(&sg.event_id, &sg.id).await.unwrap(), Some(stored));
}

/// Completed and DeadLettered sagas never change, even when the transition
/// names their exact state.
pub async fn saga_terminal_status_never_changes(s: &Stores) {
    for (i, terminal) in [SagaStatus::Completed, SagaStatus::DeadLettered].into_iter().enumerate() {
        let sg = saga(&format!("sg_{i}"), "evt_1", "sub_1");
        s.sagas.create(std::slice::from_ref(&sg)).await.unwrap();
        let end = SagaState { status: terminal, attempts: 0, next_attempt_at: None, last_error: Some("done".into()) };
        let t = Transition {
            event_id: sg.event_id.clone(),
            saga_id: sg.id.clone(),
            from: sg.state.clone(),
            to: end.clone(),
            at: now(),
        };
        assert_eq!(s.sagas.transition(&[t]).await.unwrap(), vec![TransitionOutcome::Applied]);
        let stored = s.sagas.get(&sg.event_id, &sg.id).await.unwrap().unwrap();
        for to in [state(SagaStatus::InProgress, 1), state(SagaStatus::Pending, 0), state(terminal, 0)] {
            let t =
                Transition { event_id: sg.event_id.clone(), saga_id: sg.id.clone(), from: end.clone(), to, at: now() };
            assert_eq!(
                s.sagas.transition(&[t]).await.unwrap(),
                vec![TransitionOutcome::Conflict(end.clone())],
                "{terminal:?} changed"
            );
        }
        assert_eq!(s.sagas.get(&sg.event_id, &sg.id).await.unwrap(), Some(stored));
    }
}

/// A transition of a saga that does not exist reports `Missing` and creates
/// nothing.
pub async fn saga_transition_missing(s: &Stores) {
    let t = Transition {
        event_id: ev("evt_1"),
        saga_id: sg("sg_nope"),
        from: state(SagaStatus::Pending, 0),
        to: state(SagaStatus::InProgress, 1),
        at: now(),
    };
    assert_eq!(s.sagas.transition(&[t]).await.unwrap(), vec![TransitionOutcome::Missing]);
    assert_eq!(s.sagas.get(&ev("evt_1"), &sg("sg_nope")).await.unwrap(), None);

    // A saga named under another event is missing there too.
    let sg = saga("sg_here", "evt_1", "sub_1");
    s.sagas.create(std::slice::from_ref(&sg)).await.unwrap();
    let t = Transition {
        event_id: ev("evt_2"),
        saga_id: sg.id.clone(),
        from: sg.state.clone(),
        to: state(SagaStatus::InProgress, 1),
        at: now(),
    };
    assert_eq!(s.sagas.transition(&[t]).await.unwrap(), vec![TransitionOutcome::Missing]);
    assert_eq!(s.sagas.get(&ev("evt_2"), &sg.id).await.unwrap(), None);
    assert_eq!(s.sagas.get(&ev("evt_1"), &sg.id).await.unwrap(), Some(sg), "the saga is unchanged");
}

/// A batch reports one outcome per transition, in order.
pub async fn saga_transition_batch_keeps_order(s: &Stores) {
    let sagas: Vec<Saga> = (0..12).map(|i| saga(&format!("sg_{i:02}"), "evt_1", "sub_1")).collect();
    s.sagas.create(&sagas).await.unwrap();
    let mut batch = Vec::new();
    let mut want = Vec::new();
    for (i, sg) in sagas.iter().enumerate() {
        let from = if i % 3 == 1 { state(SagaStatus::InProgress, 1) } else { sg.state.clone() };
        batch.push(Transition {
            event_id: sg.event_id.clone(),
            saga_id: sg.id.clone(),
            from,
            to: state(SagaStatus::InProgress, 1),
            at: now(),
        });
        want.push(if i % 3 == 1 { TransitionOutcome::Conflict(sg.state.clone()) } else { TransitionOutcome::Applied });
        if i % 4 == 0 {
            batch.push(Transition {
                event_id: ev("evt_1"),
                saga_id: SagaId::new(format!("sg_missing_{i}")),
                from: state(SagaStatus::Pending, 0),
                to: state(SagaStatus::InProgress, 1),
                at: now(),
            });
            want.push(TransitionOutcome::Missing);
        }
    }
    assert_eq!(s.sagas.transition(&batch).await.unwrap(), want);
    assert_eq!(s.sagas.transition(&[]).await.unwrap(), vec![]);
}

// ---------------------------------------------------------------- attempts

/// One record per `(saga, attempt)`; a saga's attempts list oldest first.
pub async fn attempts_unique_per_saga_and_attempt(s: &Stores) {
    let fail = || AttemptResult::Failed { error: "HTTP 500".into(), retry_after_ms: Some(1500) };
    let a1 = attempt("sg_a", 1, fail());
    let a2 = attempt("sg_a", 2, AttemptResult::Rejected { error: "private address".into() });
    assert_eq!(s.attempts.record(&[a2.clone(), a1.clone()]).await.unwrap(), vec![true, true]);
    let a1_again = attempt("sg_a", 1, AttemptResult::Delivered);
    let a3 = attempt("sg_a", 3, AttemptResult::Delivered);
    let other = attempt("sg_b", 1, AttemptResult::Gone);
    assert_eq!(s.attempts.record(&[a1_again, a3.clone(), other.clone()]).await.unwrap(), vec![false, true, true]);
    assert_eq!(s.attempts.list(&ev("evt_a"), &sg("sg_a")).await.unwrap(), vec![a1, a2, a3]);
    assert_eq!(s.attempts.list(&ev("evt_a"), &sg("sg_b")).await.unwrap(), vec![other]);
    assert!(s.attempts.list(&ev("evt_a"), &sg("sg_none")).await.unwrap().is_empty());
}

// ----------------------------------------------------------- subscriptions

/// Create once, list by id, update only from the expected version, delete once.
pub async fn subscriptions_versioned_update_and_delete(s: &Stores) {
    let (a, b) = (subscription("sub_a", 1), subscription("sub_b", 1));
    s.subscriptions.create(&b).await.unwrap();
    s.subscriptions.create(&a).await.unwrap();
    assert!(s.subscriptions.create(&subscription("sub_a", 1)).await.is_err(), "a second create of one id must fail");
    assert_eq!(s.subscriptions.get(&sub("sub_a")).await.unwrap(), Some(a.clone()));
    assert_eq!(all_subscriptions(s).await, vec![a.clone(), b.clone()]);

    let mut a2 = a.clone();
    a2.version = 2;
    a2.active = false;
    a2.callback_url = "https://example.com/v2".into();
    assert!(s.subscriptions.update(&a2, 1).await.unwrap());
    let mut lost = a.clone();
    lost.version = 2;
    lost.description = Some("lost update".into());
    assert!(!s.subscriptions.update(&lost, 1).await.unwrap(), "an update from a stale version must fail");
    assert_eq!(s.subscriptions.get(&sub("sub_a")).await.unwrap(), Some(a2.clone()));
    assert!(!s.subscriptions.update(&subscription("sub_none", 2), 1).await.unwrap());
    assert_eq!(s.subscriptions.get(&sub("sub_none")).await.unwrap(), None);

    assert!(s.subscriptions.delete(&sub("sub_a")).await.unwrap());
    assert!(!s.subscriptions.delete(&sub("sub_a")).await.unwrap());
    assert_eq!(s.subscriptions.get(&sub("sub_a")).await.unwrap(), None);
    assert_eq!(all_subscriptions(s).await, vec![b]);
}

/// Every subscription, walking the pages of `filter` (`limit` each) and
/// checking each page's size and order on the way.
pub(super) async fn walk(s: &Stores, filter: &SubscriptionFilter, limit: usize) -> Vec<Subscription> {
    let mut out: Vec<Subscription> = Vec::new();
    let mut after: Option<SubscriptionId> = None;
    for _ in 0..1000 {
        let page = s.subscriptions.page(filter, limit, after.as_ref()).await.unwrap();
        assert!(page.items.len() <= limit, "a page holds at most its limit");
        if let Some(next) = &page.next_after {
            assert_eq!(page.items.len(), limit, "only the last page is short");
            assert_eq!(Some(next), page.items.last().map(|x| &x.id), "the next page starts after this one");
        }
        out.extend(page.items);
        match page.next_after {
            Some(next) => after = Some(next),
            None => return out,
        }
    }
    panic!("the pages never ended");
}

pub(super) async fn all_subscriptions(s: &Stores) -> Vec<Subscription> {
    walk(s, &SubscriptionFilter::All, 100).await
}

/// The ids indexed under one key.
pub(super) async fn indexed(s: &Stores, scope: Option<&str>, pattern: &str) -> Vec<SubscriptionId> {
    let key = RouteKey { scope: Scope::of(scope), pattern: pattern.into() };
    s.subscriptions.routes(&[key]).await.unwrap().remove(0)
}

/// A subscription is indexed under its scope and each of its patterns,
/// whatever its state; an update moves its entries and a delete removes
/// them, in the same write. An id naming no subscription finds nothing.
pub async fn subscriptions_are_found_by_route_key(s: &Stores) {
    let a = subscription("sub_a", 1); // tenant-1: task.*, quota.committed
    let b = Subscription { tenant_id: None, event_types: vec!["*".into()], ..subscription("sub_b", 1) };
    let c = Subscription {
        tenant_id: Some(TenantId::new("tenant-2")),
        event_types: vec!["task.created".into()],
        ..subscription("sub_c", 1)
    };
    let d = Subscription {
        tenant_id: None,
        event_types: vec!["task.created".into(), "task.created".into()],
        active: false,
        ..subscription("sub_d", 1)
    };
    for x in [&a, &b, &c, &d] {
        s.subscriptions.create(x).await.unwrap();
    }
    let e = event("evt_route", "task.created"); // tenant-1
    let keys = shared::routing::route_keys(&e);
    let found = s.subscriptions.routes(&keys).await.unwrap();
    assert_eq!(found.len(), keys.len(), "one list per key");
    let mut ids: Vec<SubscriptionId> = found.into_iter().flatten().collect();
    ids.sort();
    assert_eq!(ids, vec![sub("sub_a"), sub("sub_b"), sub("sub_d")], "tenant-2's subscription is not a candidate");
    assert_eq!(indexed(s, Some("tenant-1"), "task.*").await, vec![sub("sub_a")]);
    assert_eq!(indexed(s, Some("tenant-1"), "quota.committed").await, vec![sub("sub_a")]);
    assert_eq!(indexed(s, None, "*").await, vec![sub("sub_b")]);
    assert_eq!(indexed(s, None, "task.created").await, vec![sub("sub_d")], "inactive ones are indexed too, once");
    assert_eq!(indexed(s, Some("tenant-2"), "task.created").await, vec![sub("sub_c")]);
    assert!(indexed(s, None, "task.*").await.is_empty(), "a tenant's pattern is not global");

    let a2 = Subscription { tenant_id: None, event_types: vec!["quota.*".into()], version: 2, ..a.clone() };
    assert!(s.subscriptions.update(&a2, 1).await.unwrap());
    assert!(indexed(s, Some("tenant-1"), "task.*").await.is_empty(), "old entries go with the update");
    assert!(indexed(s, Some("tenant-1"), "quota.committed").await.is_empty());
    assert_eq!(indexed(s, None, "quota.*").await, vec![sub("sub_a")]);
    let lost = Subscription { event_types: vec!["lost.*".into()], version: 2, ..a.clone() };
    assert!(!s.subscriptions.update(&lost, 1).await.unwrap());
    assert!(indexed(s, Some("tenant-1"), "lost.*").await.is_empty(), "a refused update indexes nothing");

    assert!(s.subscriptions.delete(&sub("sub_b")).await.unwrap());
    assert!(indexed(s, None, "*").await.is_empty(), "a deleted subscription leaves the index");
    assert!(s.subscriptions.routes(&[]).await.unwrap().is_empty());
    // Ids that are not subscriptions' (DynamoDB keeps index entries beside
    // them under ids like these) name nothing.
    for other in ["sub_a#tenant", "sub_a#route#0", "sub_c#route#0"] {
        assert_eq!(s.subscriptions.get(&sub(other)).await.unwrap(), None, "{other}");
        assert!(!s.subscriptions.delete(&sub(other)).await.unwrap(), "{other}");
        assert!(!s.subscriptions.update(&Subscription { id: sub(other), ..subscription("x", 2) }, 1).await.unwrap());
    }
    assert_eq!(indexed(s, Some("tenant-2"), "task.created").await, vec![sub("sub_c")], "still indexed");
    assert_eq!(
        s.subscriptions.get_many(&[sub("sub_c"), sub("sub_none"), sub("sub_a")]).await.unwrap(),
        vec![Some(c), None, Some(a2)]
    );
}

/// Pages walk every subscription once, in id order, for every filter: all,
/// one tenant's, and those in scope of an event (by route key), also when
/// the count is a multiple of the page size.
pub async fn subscriptions_page_walks_every_subscription_once(s: &Stores) {
    let mut subs = Vec::new();
    for i in 0..25 {
        let tenant = match i % 3 {
            0 => None,
            1 => Some("tenant-1".to_string()),
            _ => Some("tenant-2".to_string()),
        };
        let patterns: Vec<String> = match i % 4 {
            0 => vec!["*".into()],
            1 => vec!["task.*".into(), "task.created".into()],
            2 => vec!["task.created".into()],
            _ => vec!["quota.committed".into()],
        };
        subs.push(Subscription {
            tenant_id: tenant.map(TenantId::new),
            event_types: patterns,
            ..subscription(&format!("sub_p{i:02}"), 1)
        });
    }
    // Created out of order: pages are in id order, not creation order.
    for x in subs.iter().rev() {
        s.subscriptions.create(x).await.unwrap();
    }
    let ids = |v: &[Subscription]| v.iter().map(|x| x.id.clone()).collect::<Vec<_>>();
    for limit in [1, 5, 7, 25, 100] {
        assert_eq!(ids(&walk(s, &SubscriptionFilter::All, limit).await), ids(&subs), "limit {limit}");
    }
    let t1: Vec<Subscription> =
        subs.iter().filter(|x| x.tenant_id.as_ref().map(|t| t.as_str()) == Some("tenant-1")).cloned().collect();
    assert_eq!(walk(s, &SubscriptionFilter::Tenant(TenantId::new("tenant-1")), 3).await, t1);
    assert!(walk(s, &SubscriptionFilter::Tenant(TenantId::new("tenant-9")), 3).await.is_empty());
    let e = event("evt_page", "task.created"); // tenant-1
    let in_scope: Vec<Subscription> = subs.iter().filter(|x| shared::routing::in_scope(x, &e)).cloned().collect();
    assert!(in_scope.len() > 5 && in_scope.len() < 20, "{}", in_scope.len());
    for limit in [2, 4, 100] {
        let got = walk(s, &SubscriptionFilter::Routes(shared::routing::route_keys(&e)), limit).await;
        assert_eq!(ids(&got), ids(&in_scope), "routes, limit {limit}: each once, in id order");
    }
    let after = s.subscriptions.page(&SubscriptionFilter::All, 2, Some(&sub("sub_p10x"))).await.unwrap();
    assert_eq!(ids(&after.items), vec![sub("sub_p11"), sub("sub_p12")], "after an id that is not stored");
}

/// A subscription with the most patterns allowed is created, moved to
/// another tenant with as many other patterns (the largest write: on
/// DynamoDB a transaction of exactly 100 actions) and deleted.
pub async fn subscriptions_with_the_most_patterns(s: &Stores) {
    let max = shared::bounds::MAX_SUBSCRIPTION_PATTERNS;
    let patterns = |p: &str| (0..max).map(|i| format!("{p}{i}.*")).collect::<Vec<_>>();
    let a = Subscription { event_types: patterns("a"), ..subscription("sub_big", 1) };
    s.subscriptions.create(&a).await.unwrap();
    assert_eq!(indexed(s, Some("tenant-1"), &format!("a{}.*", max - 1)).await, vec![sub("sub_big")]);
    let b = Subscription {
        tenant_id: Some(TenantId::new("tenant-2")),
        event_types: patterns("b"),
        version: 2,
        ..a.clone()
    };
    assert!(s.subscriptions.update(&b, 1).await.unwrap());
    assert!(indexed(s, Some("tenant-1"), "a0.*").await.is_empty());
    assert_eq!(indexed(s, Some("tenant-2"), &format!("b{}.*", max - 1)).await, vec![sub("sub_big")]);
    assert_eq!(walk(s, &SubscriptionFilter::Tenant(TenantId::new("tenant-2")), 10).await, vec![b.clone()]);
    assert!(walk(s, &SubscriptionFilter::Tenant(TenantId::new("tenant-1")), 10).await.is_empty());
    assert!(s.subscriptions.delete(&sub("sub_big")).await.unwrap());
    assert!(indexed(s, Some("tenant-2"), "b0.*").await.is_empty());
    assert!(all_subscriptions(s).await.is_empty());
}

// ------------------------------------------------------------ dead letters

/// One dead letter per id: a second put changes nothing.
pub async fn dead_letters_put_once(s: &Stores) {
    let d = dead_letter("sg_dead", now());
    assert!(s.dead_letters.put(&d).await.unwrap());
    let mut again = dead_letter("sg_dead", now());
    again.reason = "other".into();
    assert!(!s.dead_letters.put(&again).await.unwrap());
    assert_eq!(s.dead_letters.get(&dl("sg_dead")).await.unwrap(), Some(d));
    assert_eq!(s.dead_letters.get(&dl("sg_none")).await.unwrap(), None);
}

/// An open dead letter is resolved once, with its audit record.
pub async fn dead_letters_resolve_once(s: &Stores) {
    let d = dead_letter("sg_dead", now());
    s.dead_letters.put(&d).await.unwrap();
    let audit = resolution(ResolutionAction::Requeue, "ops@example.com", Some("sg_new"));
    assert!(s.dead_letters.resolve(&dl("sg_dead"), DeadLetterState::Requeued, audit.clone()).await.unwrap());
    assert!(!s
        .dead_letters
        .resolve(&dl("sg_dead"), DeadLetterState::Skipped, resolution(ResolutionAction::Skip, "late", None))
        .await
        .unwrap());
    let got = s.dead_letters.get(&dl("sg_dead")).await.unwrap().unwrap();
    assert_eq!(got, DeadLetter { state: DeadLetterState::Requeued, resolution: Some(audit), ..d });
    assert!(!s
        .dead_letters
        .resolve(&dl("sg_none"), DeadLetterState::Skipped, resolution(ResolutionAction::Skip, "ops", None))
        .await
        .unwrap());
    assert_eq!(s.dead_letters.get(&dl("sg_none")).await.unwrap(), None);
}

/// Lists are newest first, filtered by state when asked, and limited.
pub async fn dead_letters_list_newest_first(s: &Stores) {
    let t0 = now();
    let at = |secs| t0 + chrono::Duration::seconds(secs);
    let (d1, d2, d3, d4) = (
        dead_letter("sg_1", at(1)),
        dead_letter("sg_2", at(2)),
        dead_letter("sg_3", at(3)),
        dead_letter("sg_4", at(4)),
    );
    for d in [&d2, &d4, &d1, &d3] {
        assert!(s.dead_letters.put(d).await.unwrap());
    }
    assert!(s
        .dead_letters
        .resolve(&dl("sg_3"), DeadLetterState::Skipped, resolution(ResolutionAction::Skip, "ops", None))
        .await
        .unwrap());
    let d3 = s.dead_letters.get(&dl("sg_3")).await.unwrap().unwrap();
    let ids = |v: Vec<DeadLetter>| v.into_iter().map(|d| d.id).collect::<Vec<_>>();

    let list = |state: Option<DeadLetterState>, limit: usize| {
        let q = DeadLetterQuery { state, ..DeadLetterQuery::default() };
        async move { s.dead_letters.page(&q, limit, None).await.unwrap().items }
    };
    assert_eq!(list(Some(DeadLetterState::Open), 10).await, vec![d4.clone(), d2.clone(), d1.clone()]);
    assert_eq!(ids(list(Some(DeadLetterState::Open), 2).await), ["sg_4", "sg_2"]);
    assert_eq!(list(Some(DeadLetterState::Skipped), 10).await, vec![d3.clone()]);
    assert!(list(Some(DeadLetterState::Requeued), 10).await.is_empty());
    assert_eq!(list(None, 10).await, vec![d4, d3, d2, d1]);
    assert_eq!(ids(list(None, 3).await), ["sg_4", "sg_3", "sg_2"]);
    assert_eq!(s.dead_letters.count(DeadLetterState::Open).await.unwrap(), 3);
    assert_eq!(s.dead_letters.count(DeadLetterState::Skipped).await.unwrap(), 1);
    assert_eq!(s.dead_letters.count(DeadLetterState::Requeued).await.unwrap(), 0);
}

/// The open count (the `/metrics` gauge and the reconciler's alarm, read
/// without reading the dead letters) follows every change: +1 per dead
/// letter created open, none for a duplicate put (idempotent create), −1
/// per requeue or skip, none for a second resolve or one of an unknown id.
pub async fn dead_letters_open_count_follows_every_change(s: &Stores) {
    let count = || async { s.dead_letters.count(DeadLetterState::Open).await.unwrap() };
    assert_eq!(count().await, 0);
    for i in 0..12 {
        assert!(s.dead_letters.put(&dead_letter(&format!("sg_c{i}"), now())).await.unwrap());
    }
    assert_eq!(count().await, 12);
    for i in 0..12 {
        assert!(!s.dead_letters.put(&dead_letter(&format!("sg_c{i}"), now())).await.unwrap(), "a duplicate");
    }
    assert_eq!(count().await, 12, "a duplicate put counts nothing");
    let skip = || resolution(ResolutionAction::Skip, "ops", None);
    for i in 0..3 {
        let requeue = resolution(ResolutionAction::Requeue, "ops", Some("sg_new"));
        assert!(s.dead_letters.resolve(&dl(&format!("sg_c{i}")), DeadLetterState::Requeued, requeue).await.unwrap());
    }
    for i in 3..5 {
        assert!(s.dead_letters.resolve(&dl(&format!("sg_c{i}")), DeadLetterState::Skipped, skip()).await.unwrap());
    }
    assert_eq!(count().await, 7);
    assert!(!s.dead_letters.resolve(&dl("sg_c0"), DeadLetterState::Skipped, skip()).await.unwrap());
    assert!(!s.dead_letters.resolve(&dl("sg_none"), DeadLetterState::Skipped, skip()).await.unwrap());
    assert_eq!(count().await, 7, "resolving twice, or nothing, counts nothing");
    assert_eq!(s.dead_letters.count(DeadLetterState::Requeued).await.unwrap(), 3);
    assert_eq!(s.dead_letters.count(DeadLetterState::Skipped).await.unwrap(), 2);
    // A dead letter stored already resolved is not open.
    let done =
        DeadLetter { state: DeadLetterState::Skipped, resolution: Some(skip()), ..dead_letter("sg_cdone", now()) };
    assert!(s.dead_letters.put(&done).await.unwrap());
    assert_eq!(count().await, 7);
    let listed = s
        .dead_letters
        .page(&DeadLetterQuery { state: Some(DeadLetterState::Open), ..Default::default() }, 100, None)
        .await
        .unwrap();
    assert_eq!(listed.items.len() as u64, count().await, "the count is what a listing of open ones finds");
}

/// Many dead letters, several in the same millisecond (on DynamoDB spread
/// over the index shards and merged on read), walked a page at a time with
/// each filter: every one listed once, newest first, ties in one order.
pub async fn dead_letters_page_merges_many_across_shards(s: &Stores) {
    let t0 = now();
    let mut all = Vec::new();
    for i in 0..40 {
        // Four per millisecond.
        let mut d = dead_letter(&format!("sg_m{i:02}"), t0 + chrono::Duration::milliseconds(i / 4));
        d.subscription_id = sub(if i % 3 == 0 { "sub_m0" } else { "sub_m1" });
        all.push(d);
    }
    for d in &all {
        assert!(s.dead_letters.put(d).await.unwrap());
    }
    let q = DeadLetterQuery::default;
    for c in [
        q(),
        DeadLetterQuery { subscription_id: Some(sub("sub_m0")), ..q() },
        DeadLetterQuery { state: Some(DeadLetterState::Open), tenant_id: Some(TenantId::new("tenant-a")), ..q() },
    ] {
        let mut want: Vec<&DeadLetter> = all.iter().filter(|d| c.matches(d)).collect();
        want.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        let want: Vec<String> = want.into_iter().map(|d| d.id.to_string()).collect();
        for limit in [2, 7, 100] {
            let walked = walk_dead_letters(s, &c, limit).await;
            assert_eq!(walked, want, "{c:?} limit {limit}");
        }
    }
}

/// Every page of `q` walked with `limit`, following `next` (at most 50 pages).
pub(super) async fn walk_dead_letters(s: &Stores, q: &DeadLetterQuery, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..50 {
        let page = s.dead_letters.page(q, limit, after.as_deref()).await.unwrap();
        assert!(page.items.len() <= limit);
        out.extend(page.items.into_iter().map(|d| d.id.into_string()));
        match page.next {
            Some(n) => after = Some(n),
            None => return out,
        }
    }
    panic!("more than 50 pages")
}

/// Each filter (subscription, event type, tenant, state, time range, and
/// several together) lists exactly its dead letters, newest first, and a
/// walk page by page lists each once, also when two share a creation time
/// and when a new one arrives during the walk.
pub async fn dead_letters_page_by_every_filter(s: &Stores) {
    let t0 = now();
    let at = |secs: i64| t0 + chrono::Duration::seconds(secs);
    let mk = |id: &str, secs: i64, subscription: &str, event_type: &str, tenant: Option<&str>| DeadLetter {
        subscription_id: sub(subscription),
        event_type: event_type.into(),
        tenant_id: tenant.map(shared::ids::TenantId::new),
        ..dead_letter(id, at(secs))
    };
    let all = [
        mk("sg_p1", 1, "sub_x", "order.created", Some("acme")),
        mk("sg_p2", 2, "sub_y", "order.created", Some("globex")),
        mk("sg_p3", 3, "sub_x", "order.paid", None),
        mk("sg_p4", 4, "sub_x", "order.created", Some("acme")),
        mk("sg_p5", 4, "sub_y", "order.paid", Some("acme")), // the same second as sg_p4
        mk("sg_p6", 6, "sub_x", "order.created", Some("globex")),
    ];
    for d in &all {
        assert!(s.dead_letters.put(d).await.unwrap());
    }
    assert!(s
        .dead_letters
        .resolve(&dl("sg_p4"), DeadLetterState::Requeued, resolution(ResolutionAction::Requeue, "ops", None))
        .await
        .unwrap());
    let q = DeadLetterQuery::default;
    let open = Some(DeadLetterState::Open);
    let cases = [
        q(),
        DeadLetterQuery { subscription_id: Some(sub("sub_x")), ..q() },
        DeadLetterQuery { event_type: Some("order.paid".into()), ..q() },
        DeadLetterQuery { tenant_id: Some(TenantId::new("acme")), ..q() },
        DeadLetterQuery { state: open, ..q() },
        DeadLetterQuery { since: Some(at(2)), until: Some(at(4)), ..q() },
        DeadLetterQuery { since: Some(at(4)), ..q() },
        DeadLetterQuery { until: Some(at(4)), ..q() },
        DeadLetterQuery {
            subscription_id: Some(sub("sub_x")),
            state: open,
            tenant_id: Some(TenantId::new("acme")),
            ..q()
        },
        DeadLetterQuery { event_type: Some("order.created".into()), since: Some(at(2)), ..q() },
        DeadLetterQuery { subscription_id: Some(sub("sub_none")), ..q() },
        DeadLetterQuery { tenant_id: Some(TenantId::new("acme")), until: Some(at(1)), ..q() },
    ];
    for c in &cases {
        // The state of sg_p4 changed: what matches is what is stored.
        let stored: Vec<DeadLetter> = {
            let mut v = Vec::new();
            for d in &all {
                v.push(s.dead_letters.get(&d.id).await.unwrap().unwrap());
            }
            v
        };
        let mut want: Vec<&DeadLetter> = stored.iter().filter(|d| c.matches(d)).collect();
        want.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        let want: Vec<String> = want.into_iter().map(|d| d.id.to_string()).collect();
        let one = s.dead_letters.page(c, 100, None).await.unwrap();
        assert_eq!(one.next, None, "{c:?}");
        let got: Vec<String> = one.items.iter().map(|d| d.id.to_string()).collect();
        // Ties on the creation time may come in either order between backends.
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        assert_eq!(sorted(got.clone()), sorted(want.clone()), "{c:?}");
        for limit in [1, 2, 4] {
            let walked = walk_dead_letters(s, c, limit).await;
            assert_eq!(walked.len(), want.len(), "{c:?} limit {limit}: {walked:?}");
            assert_eq!(sorted(walked), sorted(want.clone()), "{c:?} limit {limit}");
        }
        // Newest first (a tie on the time in either order).
        let times: Vec<_> = one.items.iter().map(|d| d.created_at).collect();
        assert!(times.windows(2).all(|w| w[0] >= w[1]), "{c:?}: {times:?}");
    }
    // Newest first, across a page boundary.
    let first = s.dead_letters.page(&q(), 2, None).await.unwrap();
    assert_eq!(first.items[0].id, dl("sg_p6"));
    // A dead letter created during a walk is newer than its position: the
    // rest of the walk lists what was there, once.
    assert!(s.dead_letters.put(&mk("sg_p7", 7, "sub_x", "order.created", Some("acme"))).await.unwrap());
    let mut rest = Vec::new();
    let mut after = first.next.clone();
    while let Some(a) = after {
        let p = s.dead_letters.page(&q(), 2, Some(&a)).await.unwrap();
        rest.extend(p.items.into_iter().map(|d| d.id.into_string()));
        after = p.next;
    }
    let mut seen: Vec<String> = first.items.iter().map(|d| d.id.to_string()).chain(rest).collect();
    seen.sort();
    assert_eq!(seen, ["sg_p1", "sg_p2", "sg_p3", "sg_p4", "sg_p5", "sg_p6"]);
}

/// A job is stored once; an update applies only on the version read.
pub async fn jobs_are_created_once_and_updated_on_their_version(s: &Stores) {
    let job = Job::new(
        JobSpec::Requeue(DeadLetterQuery { subscription_id: Some(SubscriptionId::new("sub_a")), ..Default::default() }),
        "fixed",
        "key:ops",
        now(),
    );
    assert!(s.jobs.create(&job).await.unwrap());
    assert!(!s.jobs.create(&job).await.unwrap(), "created once");
    assert_eq!(s.jobs.get(&job.id).await.unwrap().as_ref(), Some(&job));
    assert_eq!(s.jobs.get("job_none").await.unwrap(), None);
    let planned = job.planned(vec!["a".into(), "b".into()], Some("pos".into()), now());
    assert!(s.jobs.update(&planned, job.version).await.unwrap());
    let other = job.failed_with("stale writer", now());
    assert!(!s.jobs.update(&other, job.version).await.unwrap(), "the version moved on");
    assert_eq!(s.jobs.get(&job.id).await.unwrap(), Some(planned.clone()));
    let committed = planned.committed(2, 0, now());
    assert!(s.jobs.update(&committed, planned.version).await.unwrap());
    let got = s.jobs.get(&job.id).await.unwrap().unwrap();
    assert_eq!((got.matched, got.done, got.page, got.plan), (2, 2, 1, None));
}

/// [`shared::ports::DataKeyStore`] on an empty store (not in
/// [`for_each_conformance_case!`](crate::for_each_conformance_case): a
/// backend's [`Stores`] come with their data key made already; each
/// backend's `ports.rs` runs this on a store of its own): created once,
/// a second create (a process that lost the race) writes nothing, and a
/// replace applies only over the record read.
pub async fn data_key_store_creates_once_and_replaces_only_what_it_read(store: &dyn shared::ports::DataKeyStore) {
    use shared::ports::WrappedDataKey;
    let rec = |id: &str, by: &str| WrappedDataKey {
        key_id: id.into(),
        wrapped: format!("wrapped-{id}-{by}"),
        wrapped_by: by.into(),
    };
    assert_eq!(store.load().await.unwrap(), None);
    let first = rec("dk1", "mk1");
    assert!(store.create(&first).await.unwrap());
    assert!(!store.create(&rec("dk2", "mk1")).await.unwrap(), "the race's loser writes nothing");
    assert_eq!(store.load().await.unwrap(), Some(first.clone()));
    let rewrapped = rec("dk1", "mk2");
    assert!(!store.replace(&rec("dk1", "mk0"), &rewrapped).await.unwrap(), "not the record read");
    assert_eq!(store.load().await.unwrap(), Some(first.clone()));
    assert!(store.replace(&first, &rewrapped).await.unwrap());
    assert!(!store.replace(&first, &rec("dk1", "mk3")).await.unwrap(), "another process re-wrapped it first");
    assert_eq!(store.load().await.unwrap(), Some(rewrapped));
}

/// A tenant's running-job slots are created once and replaced only on the
/// version read; they live beside the jobs without being one, and a job
/// keeps its tenant and item count.
pub async fn job_slots_are_written_on_their_version(s: &Stores) {
    use shared::bulk::{slots_key, Slot, TenantSlots};
    let tenant = shared::ids::TenantId::new("acme");
    let key = slots_key(Some(&tenant));
    assert_ne!(key, slots_key(None));
    assert_eq!(s.jobs.slots(&key).await.unwrap(), None);
    let one = TenantSlots { jobs: vec![Slot { job_id: "job_1".into(), taken_at: now() }], version: 1 };
    assert!(s.jobs.put_slots(&key, &one, 0).await.unwrap());
    assert!(!s.jobs.put_slots(&key, &one, 0).await.unwrap(), "created once");
    assert_eq!(s.jobs.slots(&key).await.unwrap(), Some(one.clone()));
    let mut two = one.clone();
    two.jobs.push(Slot { job_id: "job_2".into(), taken_at: now() });
    two.version = 2;
    assert!(!s.jobs.put_slots(&key, &two, 5).await.unwrap(), "not on another version");
    assert!(s.jobs.put_slots(&key, &two, 1).await.unwrap());
    assert_eq!(s.jobs.slots(&key).await.unwrap(), Some(two));
    assert_eq!(s.jobs.slots(&slots_key(None)).await.unwrap(), None, "another tenant's slots are apart");
    let mut job = Job::new(JobSpec::Requeue(DeadLetterQuery::default()), "fixed", "key:ops", now());
    job.tenant_id = Some(tenant);
    job.items = Some(42);
    assert!(s.jobs.create(&job).await.unwrap());
    assert_eq!(s.jobs.get(&job.id).await.unwrap(), Some(job));
}
