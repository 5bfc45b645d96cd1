//! One conformance suite for the ports of `shared::ports`, run on every
//! backend: `tests/ports_sqlite.rs` (the embedded SQLite backend) and
//! `tests/ports_aws.rs` (DynamoDB and SQS in the emulator). Each case takes a
//! fresh [`Stores`] and checks the guarantees the stages rely on:
//! conditional inserts, conditional saga transitions that never leave a
//! terminal status, versioned subscription updates, dead letters resolved
//! once, and SQS queue semantics.
//!
//! A backend's test file lists no case by hand: it defines a `case!` macro
//! and calls [`for_each_conformance_case!`](crate::for_each_conformance_case),
//! which expands it once per case.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use serde_json::json;
use shared::attempt::Attempt;
use shared::bulk::{Job, JobSpec};
use shared::context::Stores;
use shared::dead_letter::{DeadLetter, DeadLetterQuery, DeadLetterState, Resolution, ResolutionAction};
use shared::envelope::Format;
use shared::event::EventRecord;
use shared::event_search::{EventQuery, EventSummary};
use shared::ids::{DeadLetterId, EventId, SagaId, SubscriptionId, TenantId};
use shared::ports::{JobQueue, Outgoing, Received, SubscriptionFilter, Transition, TransitionOutcome};
use shared::retry::RetryPolicy;
use shared::routing::{RouteKey, Scope};
use shared::saga::{AttemptResult, Origin, Saga, SagaState, SagaStatus};
use shared::signing::Secret;
use shared::subscription::{PayloadFormat, SigningKey, Subscription};

/// Expands `$m!(case)` for every conformance case, so each backend's test
/// file generates one `#[test]` per case and none can be forgotten. A test
/// file may match a case by name in its `case!` macro to mark it ignored,
/// with the reason.
#[macro_export]
macro_rules! for_each_conformance_case {
    ($m:ident) => {
        $m!(events_insert_is_conditional);
        $m!(sagas_create_is_idempotent);
        $m!(sagas_list_for_event);
        $m!(saga_transition_applies_and_stores_the_new_state);
        $m!(saga_transition_conflict_returns_current_state);
        $m!(saga_terminal_status_never_changes);
        $m!(saga_transition_missing);
        $m!(sagas_stalled_and_deferred);
        $m!(saga_transition_batch_keeps_order);
        $m!(attempts_unique_per_saga_and_attempt);
        $m!(subscriptions_versioned_update_and_delete);
        $m!(subscriptions_are_found_by_route_key);
        $m!(subscriptions_page_walks_every_subscription_once);
        $m!(subscriptions_with_the_most_patterns);
        $m!(dead_letters_put_once);
        $m!(dead_letters_resolve_once);
        $m!(dead_letters_list_newest_first);
        $m!(dead_letters_page_by_every_filter);
        $m!(dead_letters_open_count_follows_every_change);
        $m!(dead_letters_page_merges_many_across_shards);
        $m!(jobs_are_created_once_and_updated_on_their_version);
        $m!(queue_send_receive_delete);
        $m!(queue_delete_detached_deletes_without_waiting);
        $m!(queue_receive_respects_max);
        $m!(queue_delay);
        $m!(queue_visibility_timeout_redelivers);
        $m!(queue_stale_receipt_cannot_delete);
        $m!(queue_change_visibility);
        $m!(queue_depth_counts);
        $m!(queue_dead_letters_after_max_receives);
        $m!(health_writes_are_conditional_on_the_version);
        $m!(limits_lease_slots_and_space_starts);
        $m!(partitions_are_numbered_marked_and_laned);
        $m!(events_are_found_by_every_filter);
        $m!(audit_pages_newest_first_with_every_filter);
    };
}

// ----------------------------------------------------------------- records

/// Now, rounded to microseconds (short, readable times in failure output).
fn now() -> DateTime<Utc> {
    Utc::now().round_subsecs(6)
}

/// An event with every optional field set, so a round trip checks them all.
pub fn event(id: &str, event_type: &str) -> EventRecord {
    let at = now();
    EventRecord {
        id: ev(id),
        event_type: event_type.to_string(),
        tenant_id: Some(TenantId::new("tenant-1")),
        partition_key: Some("Opportunity:tenant-1:rec-1".into()),
        sequence: Some("42".into()),
        trace_id: Some("trace-1".into()),
        producer: Some("crm".into()),
        occurred_at: at - chrono::Duration::seconds(5),
        received_at: at,
        expires_at: at + chrono::Duration::days(30),
        format: Format::Native,
        body: format!(r#"{{"id":"{id}","type":"{event_type}","data":{{"n":1,"s":"é\"q"}}}}"#).into_bytes(),
        partition_seq: None,
    }
}

/// A new Pending saga of `event_id` → `subscription_id`.
pub fn saga(id: &str, event_id: &str, subscription_id: &str) -> Saga {
    Saga::new(sg(id), &ev(event_id), &sub(subscription_id), None, now())
}

/// A state with no due time or error.
pub fn state(status: SagaStatus, attempts: u32) -> SagaState {
    SagaState { status, attempts, next_attempt_at: None, last_error: None }
}

/// Attempt `n` of `saga_id`.
pub fn attempt(saga_id: &str, n: u32, result: AttemptResult) -> Attempt {
    Attempt {
        saga_id: sg(saga_id),
        attempt: n,
        event_id: ev("evt_a"),
        subscription_id: sub("sub_a"),
        status_code: Some(500),
        error: Some("HTTP 500".into()),
        latency_ms: 12,
        at: now(),
        result,
        lane: None,
    }
}

/// A subscription at `version`.
pub fn subscription(id: &str, version: u64) -> Subscription {
    let at = now();
    Subscription {
        id: sub(id),
        callback_url: format!("https://example.com/hooks/{id}"),
        event_types: vec!["task.*".into(), "quota.committed".into()],
        tenant_id: Some(TenantId::new("tenant-1")),
        description: Some("conformance".into()),
        headers: BTreeMap::from([("x-team".to_string(), "payments".to_string())]),
        retry_policy: RetryPolicy { max_attempts: 4, base_delay_ms: 100, max_delay_ms: 1000, schedule_ms: None },
        dead_letter_on: vec![],
        payload_format: PayloadFormat::Hookline,
        ordering: Default::default(),
        on_dead_letter: Default::default(),
        data_fields: None,
        max_in_flight: None,
        rate_limit: None,
        active: true,
        verified: true,
        verification_error: None,
        disabled_reason: None,
        disabled_at: None,
        signing_keys: vec![SigningKey { secret: Secret::generate(), expires_at: None }],
        created_at: at,
        updated_at: at,
        version,
    }
}

/// An audit record of `action` by `actor`.
pub fn resolution(action: ResolutionAction, actor: &str, new_saga_id: Option<&str>) -> Resolution {
    Resolution {
        action,
        actor: actor.into(),
        reason: "receiver fixed".into(),
        at: now(),
        new_saga_id: new_saga_id.map(sg),
        job_id: None,
    }
}

/// An open dead letter created at `created_at`.
pub fn dead_letter(id: &str, created_at: DateTime<Utc>) -> DeadLetter {
    DeadLetter {
        id: dl(id),
        event_id: ev("evt_a"),
        subscription_id: sub("sub_a"),
        event_type: "task.failed".into(),
        tenant_id: Some(TenantId::new("tenant-a")),
        reason: "gave up after 3 attempts; last error: HTTP 500".into(),
        attempts: 3,
        saga_snapshot: json!({ "id": id, "status": "DeadLettered" }),
        created_at,
        state: DeadLetterState::Open,
        resolution: None,
        // Round-trips through every backend (DynamoDB keeps it deflated apart).
        event: Some(event(&format!("evt_of_{id}"), "task.failed")),
    }
}

/// Ids from text: the cases name their records by literal ids.
fn ev(id: &str) -> EventId {
    EventId::new(id)
}

fn sg(id: &str) -> SagaId {
    SagaId::new(id)
}

fn sub(id: &str) -> SubscriptionId {
    SubscriptionId::new(id)
}

fn dl(id: &str) -> DeadLetterId {
    DeadLetterId::new(id)
}

fn sorted_by_id(mut sagas: Vec<Saga>) -> Vec<Saga> {
    sagas.sort_by(|a, b| a.id.cmp(&b.id));
    sagas
}

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
    assert_eq!(s.attempts.list(&sg("sg_a")).await.unwrap(), vec![a1, a2, a3]);
    assert_eq!(s.attempts.list(&sg("sg_b")).await.unwrap(), vec![other]);
    assert!(s.attempts.list(&sg("sg_none")).await.unwrap().is_empty());
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
async fn walk(s: &Stores, filter: &SubscriptionFilter, limit: usize) -> Vec<Subscription> {
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

async fn all_subscriptions(s: &Stores) -> Vec<Subscription> {
    walk(s, &SubscriptionFilter::All, 100).await
}

/// The ids indexed under one key.
async fn indexed(s: &Stores, scope: Option<&str>, pattern: &str) -> Vec<SubscriptionId> {
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
async fn walk_dead_letters(s: &Stores, q: &DeadLetterQuery, limit: usize) -> Vec<String> {
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

// ------------------------------------------------------------------ queues

const LONG: Duration = Duration::from_secs(60);
const SHORT: Duration = Duration::from_secs(1);
/// A little more than [`SHORT`], for the visibility to run out.
const PAST_SHORT: Duration = Duration::from_millis(1600);

async fn send(q: &dyn JobQueue, bodies: &[&str]) {
    let msgs: Vec<Outgoing> = bodies.iter().map(|b| out(b, Duration::ZERO, None)).collect();
    q.send(&msgs).await.unwrap();
}

fn out(body: &str, delay: Duration, group: Option<&str>) -> Outgoing {
    Outgoing { body: body.to_string(), delay, group: group.map(str::to_string) }
}

/// Receives until `want` messages came or `secs` passed (emulators and SQS
/// may return fewer than are visible on one short poll).
async fn receive_n(q: &dyn JobQueue, want: usize, visibility: Duration, secs: u64) -> Vec<Received> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    let mut got = Vec::new();
    while got.len() < want && tokio::time::Instant::now() < deadline {
        let batch = q.receive(want - got.len(), visibility).await.unwrap();
        assert!(batch.len() <= want - got.len(), "receive returned more than asked for");
        if batch.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        got.extend(batch);
    }
    got
}

/// One message, received within 5 s; panics with `what` otherwise.
async fn receive_one(q: &dyn JobQueue, visibility: Duration, what: &str) -> Received {
    receive_n(q, 1, visibility, 5).await.pop().unwrap_or_else(|| panic!("no message received within 5 s: {what}"))
}

fn bodies(msgs: &[Received]) -> Vec<String> {
    let mut b: Vec<String> = msgs.iter().map(|m| m.body.clone()).collect();
    b.sort();
    b
}

/// Sent messages are received once each (count 1), stay invisible while
/// held, and are gone once deleted.
pub async fn queue_send_receive_delete(s: &Stores) {
    let q = &**s.deliveries.raw();
    let body = r#"{"saga_id":"sg_1","attempt":1,"note":"ünïcode & <xml>"}"#;
    send(q, &[body, "b", "c"]).await;
    let got = receive_n(q, 3, LONG, 5).await;
    assert_eq!(bodies(&got), vec!["b".to_string(), "c".into(), body.into()]);
    assert!(got.iter().all(|m| m.receive_count == 1), "{got:?}");
    assert!(q.receive(10, LONG).await.unwrap().is_empty(), "held messages must be invisible");
    assert_eq!(q.depth().await.unwrap(), shared::ports::QueueDepth { visible: 0, not_visible: 3, dead: 0 });
    q.delete(&got.iter().map(|m| m.receipt.clone()).collect::<Vec<_>>()).await.unwrap();
    q.delete(&[]).await.unwrap();
    assert_eq!(q.depth().await.unwrap(), shared::ports::QueueDepth::default());
}

/// A detached delete (the caller does not wait for it) deletes what it
/// names and nothing else: the queue is empty of those soon after, and a
/// message it did not name is still there.
pub async fn queue_delete_detached_deletes_without_waiting(s: &Stores) {
    let q = s.deliveries.raw().clone();
    send(&*q, &["gone-1", "gone-2", "kept"]).await;
    let got = receive_n(&*q, 3, SHORT, 5).await;
    assert_eq!(got.len(), 3, "{got:?}");
    let gone: Vec<String> = got.iter().filter(|m| m.body.starts_with("gone")).map(|m| m.receipt.clone()).collect();
    q.clone().delete_detached(gone);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let d = q.depth().await.unwrap();
        if d.visible + d.not_visible == 1 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the detached delete did not happen within 10 s: {d:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(PAST_SHORT).await;
    let left = receive_n(&*q, 1, LONG, 5).await;
    assert_eq!(bodies(&left), vec!["kept".to_string()], "only the named messages are deleted");
    q.delete(&left.iter().map(|m| m.receipt.clone()).collect::<Vec<_>>()).await.unwrap();
}

/// `receive` never returns more than `max`; sends and receives of more than
/// one SQS batch (10) work.
pub async fn queue_receive_respects_max(s: &Stores) {
    let q = &**s.deliveries.raw();
    let names: Vec<String> = (0..25).map(|i| format!("m{i:02}")).collect();
    send(q, &names.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let first = q.receive(12, LONG).await.unwrap();
    assert!(!first.is_empty() && first.len() <= 12, "got {}", first.len());
    let mut all = first;
    all.extend(receive_n(q, 25 - all.len(), LONG, 10).await);
    let mut want = names.clone();
    want.sort();
    assert_eq!(bodies(&all), want);
    q.delete(&all.iter().map(|m| m.receipt.clone()).collect::<Vec<_>>()).await.unwrap();
    assert_eq!(q.depth().await.unwrap(), shared::ports::QueueDepth::default());
}

/// A delayed message is invisible (and counted as not visible) until its
/// delay has passed.
pub async fn queue_delay(s: &Stores) {
    let q = &**s.retries.raw();
    q.send(&[out("later", Duration::from_secs(2), None), out("now", Duration::ZERO, None)]).await.unwrap();
    let got = receive_n(q, 1, LONG, 5).await;
    assert_eq!(bodies(&got), ["now"]);
    assert!(q.receive(10, LONG).await.unwrap().is_empty(), "delayed message received early");
    let d = q.depth().await.unwrap();
    assert_eq!((d.visible, d.not_visible), (0, 2), "{d:?}");
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let later = receive_one(q, LONG, "the delayed message after its delay").await;
    assert_eq!((later.body.as_str(), later.receive_count), ("later", 1));
}

/// A message not deleted before its visibility timeout ends is received
/// again, with its receive count one higher; deleting with the newest
/// receipt removes it.
pub async fn queue_visibility_timeout_redelivers(s: &Stores) {
    let q = &**s.deliveries.raw();
    send(q, &["job"]).await;
    let first = receive_one(q, SHORT, "the message sent").await;
    assert_eq!(first.receive_count, 1);
    assert!(q.receive(1, SHORT).await.unwrap().is_empty());
    tokio::time::sleep(PAST_SHORT).await;
    let second = receive_one(q, SHORT, "the message again after its visibility timeout").await;
    assert_eq!((second.body.as_str(), second.receive_count), ("job", 2));
    q.delete(std::slice::from_ref(&second.receipt)).await.unwrap();
    tokio::time::sleep(PAST_SHORT).await;
    assert!(q.receive(1, SHORT).await.unwrap().is_empty(), "deleted message came back");
    assert_eq!(q.depth().await.unwrap(), shared::ports::QueueDepth::default());
}

/// A worker whose lease ran out cannot delete (or hide) the message another
/// worker now holds: its receipt is stale and ignored.
pub async fn queue_stale_receipt_cannot_delete(s: &Stores) {
    let q = &**s.deliveries.raw();
    send(q, &["job"]).await;
    let first = receive_one(q, SHORT, "the message sent").await;
    tokio::time::sleep(PAST_SHORT).await;
    let second = receive_one(q, SHORT, "the message again after its visibility timeout").await;
    assert_eq!(second.receive_count, 2);
    q.delete(std::slice::from_ref(&first.receipt)).await.unwrap();
    q.change_visibility(&first.receipt, LONG).await.unwrap();
    tokio::time::sleep(PAST_SHORT).await;
    let third = receive_one(q, LONG, "the message, which a stale receipt deleted or hid").await;
    assert_eq!((third.body.as_str(), third.receive_count), ("job", 3));
    q.delete(std::slice::from_ref(&third.receipt)).await.unwrap();
}

/// `change_visibility` makes a held message visible again after the given
/// delay (0: at once); an unknown receipt is ignored.
pub async fn queue_change_visibility(s: &Stores) {
    let q = &**s.deliveries.raw();
    send(q, &["job"]).await;
    let first = receive_one(q, LONG, "the message sent").await;
    q.change_visibility(&first.receipt, Duration::ZERO).await.unwrap();
    let second = receive_one(q, LONG, "the message released with visibility 0").await;
    assert_eq!(second.receive_count, 2);
    q.change_visibility(&second.receipt, SHORT).await.unwrap();
    assert!(q.receive(1, LONG).await.unwrap().is_empty());
    tokio::time::sleep(PAST_SHORT).await;
    let third = receive_one(q, LONG, "the message after its changed visibility ran out").await;
    assert_eq!(third.receive_count, 3);
    q.delete(std::slice::from_ref(&third.receipt)).await.unwrap();
    q.change_visibility(&third.receipt, SHORT).await.unwrap();
}

/// Depth counts visible, held or delayed, and dead messages.
pub async fn queue_depth_counts(s: &Stores) {
    let q = &**s.deliveries.raw();
    assert_eq!(q.depth().await.unwrap(), shared::ports::QueueDepth::default());
    // Grouped, as delivery jobs are (a fair queue's MessageGroupId on SQS).
    q.send(&[out("a", Duration::ZERO, Some("sub_a")), out("b", Duration::ZERO, Some("sub_b")), out("c", LONG, None)])
        .await
        .unwrap();
    assert_eq!(q.depth().await.unwrap(), shared::ports::QueueDepth { visible: 2, not_visible: 1, dead: 0 });
    let got = receive_n(q, 1, LONG, 5).await;
    assert_eq!(got.len(), 1);
    assert_eq!(q.depth().await.unwrap(), shared::ports::QueueDepth { visible: 1, not_visible: 2, dead: 0 });
    // A delay longer than SQS's 900 s is capped (callers re-delay): still held.
    s.retries.raw().send(&[out("far", Duration::from_secs(3600), None)]).await.unwrap();
    assert_eq!(s.retries.depth().await.unwrap(), shared::ports::QueueDepth { visible: 0, not_visible: 1, dead: 0 });
}

/// A message received too many times without being deleted stops being
/// received and lands in the queue's dead-letter queue (`dead_jobs` for the
/// deliveries queue), body intact. The limit differs per backend (the
/// template's maxReceiveCount, SQLite's `DELIVERY_MAX_RECEIVES`); both are
/// at most 10.
pub async fn queue_dead_letters_after_max_receives(s: &Stores) {
    let q = &**s.deliveries.raw();
    send(q, &["poison"]).await;
    let mut counts = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "message neither received nor dead-lettered; counts {counts:?}"
        );
        let got = q.receive(1, Duration::ZERO).await.unwrap();
        if let Some(m) = got.first() {
            counts.push(m.receive_count);
            assert!(counts.len() <= 10, "received more than 10 times: {counts:?}");
            continue;
        }
        let d = q.depth().await.unwrap();
        if d.dead == 1 && d.visible == 0 && d.not_visible == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!counts.is_empty());
    assert_eq!(counts, (1..=counts.len() as u32).collect::<Vec<_>>(), "receive counts must go up by one");
    let dead = receive_one(&**s.dead_jobs.raw(), LONG, "the message in the dead-letter queue").await;
    assert_eq!(dead.body, "poison");
}

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
        e.tenant_id = tenant.map(shared::ids::TenantId::new);
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
        AuditFilter { range: TimeRange { since: None, until: Some(t0) }, ..Default::default() },
    ] {
        let p = s.audit.page(&nothing, 10, None).await.unwrap();
        assert!(p.items.is_empty() && p.next.is_none(), "{nothing:?}: {p:?}");
    }
}
