//! `AttemptStore::record_completing`: a first attempt that completes its
//! saga, which a store may keep in the write that completes the saga
//! (DynamoDB) or record as any attempt for the saga step to decide (SQLite).

use super::*;

/// A delivered first attempt to a saga's subscription, at `at`.
fn delivered(saga_id: &str, event_id: &str, at: DateTime<Utc>) -> Attempt {
    Attempt {
        event_id: ev(event_id),
        status_code: Some(200),
        error: None,
        at,
        ..attempt(saga_id, 1, AttemptResult::Delivered)
    }
}

/// Recorded once per `(saga, attempt)` like any attempt, listed once with
/// the saga's other attempts; the saga is then `Completed` with one attempt
/// once the saga step's transition for it has run, whether the store had
/// kept the completion with the attempt (the transition then finds it
/// stored) or not (the transition stores it). A saga in any other state, or
/// none, gets the attempt recorded as by `record`, for the saga step to
/// decide.
pub async fn attempts_record_completing_first_success(s: &Stores) {
    let done = saga("sg_done", "evt_c", "sub_1");
    let mut retrying = saga("sg_retry", "evt_c", "sub_2");
    retrying.state = SagaState { next_attempt_at: Some(now()), ..state(SagaStatus::PendingRetry, 1) };
    assert_eq!(s.sagas.create(&[done.clone(), retrying.clone()]).await.unwrap(), vec![true, true]);

    let first = delivered("sg_done", "evt_c", now());
    assert_eq!(s.attempts.record_completing(std::slice::from_ref(&first)).await.unwrap(), vec![true]);
    let again = delivered("sg_done", "evt_c", now() + chrono::Duration::seconds(1));
    assert_eq!(s.attempts.record_completing(&[again]).await.unwrap(), vec![false], "a duplicate job's");
    let failed_again = Attempt {
        status_code: Some(503),
        result: AttemptResult::Failed { error: "HTTP 503".into(), retry_after_ms: None },
        ..first.clone()
    };
    assert_eq!(s.attempts.record(&[failed_again]).await.unwrap(), vec![false], "a duplicate job's failure");
    assert_eq!(s.attempts.list(&ev("evt_c"), &sg("sg_done")).await.unwrap(), vec![first.clone()]);
    // The saga step's transition for the attempt (on_attempts: from Pending
    // with no attempt): stored now, or found stored with the attempt.
    let t = Transition {
        event_id: ev("evt_c"),
        saga_id: sg("sg_done"),
        from: state(SagaStatus::Pending, 0),
        to: state(SagaStatus::Completed, 1),
        at: first.at,
    };
    let outcome = s.sagas.transition(&[t]).await.unwrap();
    assert!(
        outcome == vec![TransitionOutcome::Applied]
            || outcome == vec![TransitionOutcome::Conflict(state(SagaStatus::Completed, 1))],
        "{outcome:?}"
    );
    let stored = s.sagas.get(&ev("evt_c"), &sg("sg_done")).await.unwrap().expect("the saga");
    assert_eq!(stored.state, state(SagaStatus::Completed, 1));
    assert_eq!((&stored.id, &stored.webhook_id, stored.created_at), (&done.id, &done.webhook_id, done.created_at));

    // Not Pending with no attempt: recorded as any attempt, the saga untouched.
    let late = delivered("sg_retry", "evt_c", now());
    assert_eq!(s.attempts.record_completing(std::slice::from_ref(&late)).await.unwrap(), vec![true]);
    assert_eq!(s.attempts.record(std::slice::from_ref(&late)).await.unwrap(), vec![false], "one per (saga, attempt)");
    assert_eq!(s.attempts.list(&ev("evt_c"), &sg("sg_retry")).await.unwrap(), vec![late]);
    assert_eq!(s.sagas.get(&ev("evt_c"), &sg("sg_retry")).await.unwrap().map(|g| g.state), Some(retrying.state));

    // No such saga: recorded as any attempt.
    let orphan = delivered("sg_gone", "evt_c", now());
    assert_eq!(s.attempts.record_completing(std::slice::from_ref(&orphan)).await.unwrap(), vec![true]);
    assert_eq!(s.attempts.list(&ev("evt_c"), &sg("sg_gone")).await.unwrap(), vec![orphan]);
    assert_eq!(s.sagas.get(&ev("evt_c"), &sg("sg_gone")).await.unwrap(), None);
}
