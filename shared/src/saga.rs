//! The delivery saga of one event to one subscription, and its state machine
//! (docs/architecture.md#saga-state-machine): `Pending → InProgress → (PendingRetry → InProgress)* →
//! Completed | DeadLettered`. [`decide`] is pure; the saga stage applies its
//! decision with a write conditional on the state it decided from, so a
//! decision is applied at most once and terminal sagas never change.
//!
//! One state is implied rather than written: a Pending saga whose first job
//! is queued is in progress with attempt 1. Starting a saga therefore writes
//! nothing (its decision keeps the state and only queues the job), and the
//! first outcome moves it from Pending straight to Completed, PendingRetry or
//! DeadLettered. On AWS that saves one write unit per delivery, a sixth of
//! the cost of a delivered event; everything else is unchanged.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::{EventId, SagaId, SubscriptionId, WebhookId};
use crate::retry::RetryPolicy;

/// Where a saga is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SagaStatus {
    /// Created by routing; its first job is queued or running (attempt 1 is
    /// implied: nothing is written when it starts).
    Pending,
    /// Ordered: waits for the sagas before it in its partition's lane
    /// ([`crate::ordering`]); its leaving predecessor (or the reconciler)
    /// starts it.
    Waiting,
    /// A retry's job (attempt `attempts`) is queued or running.
    InProgress,
    /// Attempt `attempts` failed; the next one waits for its backoff.
    PendingRetry,
    /// Delivered. Terminal.
    Completed,
    /// Gave up; a dead letter holds the snapshot. Terminal.
    DeadLettered,
    /// Attempt `attempts` was answered 2xx, and the subscription requires
    /// an acknowledgement ([`crate::ack`]): waiting for it until
    /// `next_attempt_at` (the deadline), looked for by the saga step at
    /// doubling intervals ([`next_ack_check`]).
    AwaitingAck,
}

impl SagaStatus {
    /// Completed and DeadLettered never change again.
    pub fn is_terminal(self) -> bool {
        matches!(self, SagaStatus::Completed | SagaStatus::DeadLettered)
    }

    /// The name used in storage and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            SagaStatus::Pending => "Pending",
            SagaStatus::Waiting => "Waiting",
            SagaStatus::InProgress => "InProgress",
            SagaStatus::PendingRetry => "PendingRetry",
            SagaStatus::Completed => "Completed",
            SagaStatus::DeadLettered => "DeadLettered",
            SagaStatus::AwaitingAck => "AwaitingAck",
        }
    }

    /// Parses [`SagaStatus::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "Pending" => SagaStatus::Pending,
            "Waiting" => SagaStatus::Waiting,
            "InProgress" => SagaStatus::InProgress,
            "PendingRetry" => SagaStatus::PendingRetry,
            "Completed" => SagaStatus::Completed,
            "DeadLettered" => SagaStatus::DeadLettered,
            "AwaitingAck" => SagaStatus::AwaitingAck,
            _ => return None,
        })
    }
}

/// Why a saga exists when routing did not create it: the audit record of a
/// requeue or replay (who, when, why).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Origin {
    /// Requeue or replay.
    pub kind: OriginKind,
    /// The saga this one follows, if any.
    pub previous_saga_id: Option<SagaId>,
    /// Who asked.
    pub actor: String,
    /// Why they asked.
    pub reason: String,
    /// When they asked.
    pub at: DateTime<Utc>,
}

/// Why a saga that is not an event's first exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OriginKind {
    /// Ops requeued a dead letter (`previous_saga_id` is the dead saga, and
    /// the dead letter's id).
    Requeue,
    /// Ops replayed a stored event.
    Replay,
}

/// The mutable part of a saga: what a transition changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SagaState {
    /// Where it is.
    pub status: SagaStatus,
    /// Attempts dispatched so far (the current attempt's number).
    pub attempts: u32,
    /// When the next attempt is due (PendingRetry only).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// The last failure, for operators.
    pub last_error: Option<String>,
}

/// One saga as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saga {
    /// Derived from what created it (see [`crate::ids`]).
    pub id: SagaId,
    /// The event delivered.
    pub event_id: EventId,
    /// The subscription delivered to.
    pub subscription_id: SubscriptionId,
    /// Standard Webhooks `webhook-id`, the same for every saga of this pair.
    pub webhook_id: WebhookId,
    /// Status and attempt count.
    #[serde(flatten)]
    pub state: SagaState,
    /// Requeue/replay audit; `None` when routing created it.
    pub origin: Option<Origin>,
    /// Its place in its ordered subscription's lane; `None` when the
    /// subscription was unordered at creation or the event has no partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<crate::lane::LaneRef>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last transition.
    pub updated_at: DateTime<Utc>,
    /// How often the reconciler sent this saga's job again for its current
    /// attempt (it stalled, or only looked stalled: held by a breaker or a
    /// rate limit for longer than the stall margin). Only a job carrying
    /// this count is delivered ([`crate::message::DeliveryJob::redrive`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub redrives: u32,
    /// Its place in its subscription's pull listing ([`crate::pull`]):
    /// set by routing for a subscription with `pull`, `None` otherwise (and
    /// for requeued and replayed sagas: a pull lists each event once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_key: Option<String>,
}

impl SagaState {
    /// The state routing inserts a pull-only subscription's saga in
    /// ([`crate::subscription::Subscription::is_pull_only`]): `Completed`
    /// with no attempt. Nothing is pushed, so no job, attempt or retry is
    /// spent on it; the saga is there for the pull index (its `pull_key`)
    /// and as the event's record that it was routed. `attempts: 0` is what
    /// tells it from a push that completed (every push makes an attempt).
    pub fn filed_for_pull() -> SagaState {
        SagaState { status: SagaStatus::Completed, attempts: 0, next_attempt_at: None, last_error: None }
    }

    /// Whether this is [`SagaState::filed_for_pull`]: terminal, never pushed.
    pub fn is_filed_for_pull(&self) -> bool {
        self.status == SagaStatus::Completed && self.attempts == 0
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Saga {
    /// A new Pending saga.
    pub fn new(
        id: SagaId,
        event_id: &EventId,
        subscription_id: &SubscriptionId,
        origin: Option<Origin>,
        now: DateTime<Utc>,
    ) -> Self {
        Saga {
            id,
            event_id: event_id.clone(),
            subscription_id: subscription_id.clone(),
            webhook_id: crate::ids::webhook_id(event_id, subscription_id),
            state: SagaState { status: SagaStatus::Pending, attempts: 0, next_attempt_at: None, last_error: None },
            origin,
            lane: None,
            created_at: now,
            updated_at: now,
            redrives: 0,
            pull_key: None,
        }
    }
}

/// How one attempt ended, as the delivery stage recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AttemptResult {
    /// 2xx.
    Delivered,
    /// Worth retrying: 5xx, 4xx, 3xx, timeout, connection failure.
    Failed {
        /// What went wrong.
        error: String,
        /// The subscriber's `Retry-After`, if it sent one.
        retry_after_ms: Option<u64>,
    },
    /// 410 Gone: the subscriber wants no more; the subscription is deactivated.
    Gone,
    /// Can never succeed as is (refused address, subscription inactive).
    Rejected {
        /// Why.
        error: String,
    },
}

/// What the saga stage is told.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// A saga was created (the saga stream's insert).
    Start,
    /// Attempt `attempt` ended (the attempts stream).
    Outcome {
        /// Which attempt.
        attempt: u32,
        /// How it ended.
        result: AttemptResult,
        /// The HTTP status the subscriber answered, if it answered.
        status: Option<u16>,
    },
    /// The backoff before attempt `attempt` is over (the retry timer).
    RetryDue {
        /// The attempt about to be made.
        attempt: u32,
    },
    /// An AwaitingAck saga's check (its timer): what the subscriber
    /// acknowledged of attempt `attempt` since it was sent, if anything.
    AckDue {
        /// The attempt delivered and awaiting its acknowledgement.
        attempt: u32,
        /// The acknowledgement that counts for it ([`crate::ack::counts_for`]).
        ack: Option<AckSeen>,
        /// When the attempt was sent (the checks' doubling starts there).
        since: DateTime<Utc>,
    },
}

/// An acknowledgement as the state machine sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum AckSeen {
    /// Processed: the delivery is done.
    Processed,
    /// Failed, with the subscriber's reason: a failed attempt.
    Failed(String),
}

/// Something the saga stage must do after a transition is stored. Every
/// effect is idempotent, so it can be redone when a crash interrupted it.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Queue a delivery job for this attempt.
    SendJob {
        /// The attempt number.
        attempt: u32,
    },
    /// Wake the saga when attempt `attempt` is due.
    ScheduleRetry {
        /// The attempt number.
        attempt: u32,
        /// When.
        at: DateTime<Utc>,
    },
    /// Store a dead letter with the saga's snapshot.
    DeadLetter {
        /// Why the saga gave up.
        reason: String,
    },
    /// Mark the subscription inactive (410 Gone).
    DeactivateSubscription,
    /// Look for attempt `attempt`'s acknowledgement at `at` (a timer).
    CheckAck {
        /// The attempt awaiting its acknowledgement.
        attempt: u32,
        /// When.
        at: DateTime<Utc>,
    },
}

/// A transition: the state to store and the effects to run after. When
/// `next` equals the state decided from, nothing is stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The new state.
    pub next: SagaState,
    /// What to do once it is stored.
    pub effects: Vec<Effect>,
}

/// The state machine. `None` means the input changes nothing: the saga is
/// terminal, or the input is stale (an old attempt, a timer not yet due, a
/// duplicate). `policy` and `dead_letter_on` are the subscription's: a
/// failed attempt is retried per `policy` unless the subscriber answered a
/// status in `dead_letter_on` ([`dead_letters_at_once`]). `jitter` in
/// `[0, 1)` spreads retries.
pub fn decide(
    state: &SagaState,
    input: &Input,
    policy: &RetryPolicy,
    dead_letter_on: &[u16],
    now: DateTime<Utc>,
    jitter: f64,
) -> Option<Decision> {
    decide_acked(state, input, &Rules { policy, dead_letter_on, ack_timeout: None }, now, jitter)
}

/// What a saga's subscription says about its deliveries, as [`decide_acked`]
/// reads it.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    /// The retry schedule.
    pub policy: &'a RetryPolicy,
    /// Statuses that dead-letter at once.
    pub dead_letter_on: &'a [u16],
    /// `ack_timeout_secs`: a 2xx waits this long for an acknowledgement;
    /// `None`: a 2xx completes the saga (as without acknowledgements).
    pub ack_timeout: Option<Duration>,
}

/// [`decide`] for a subscription that may require acknowledgements
/// (docs/architecture.md#saga-state-machine): a 2xx moves the saga to
/// AwaitingAck with a deadline `ack_timeout` ahead and a first check; at a
/// check, `processed` completes it, `failed` or no acknowledgement by the
/// deadline is a failed attempt (retried on the schedule, or dead-lettered
/// when none is left), and otherwise the next check is scheduled.
pub fn decide_acked(
    state: &SagaState,
    input: &Input,
    rules: &Rules<'_>,
    now: DateTime<Utc>,
    jitter: f64,
) -> Option<Decision> {
    let (policy, dead_letter_on) = (rules.policy, rules.dead_letter_on);
    use SagaStatus::*;
    if state.status.is_terminal() {
        return None;
    }
    let to =
        |status, attempts, next_attempt_at, last_error| SagaState { status, attempts, next_attempt_at, last_error };
    match (state.status, input) {
        (Pending, Input::Start) => {
            Some(Decision { next: state.clone(), effects: vec![Effect::SendJob { attempt: 1 }] })
        }
        // Released from its lane: Pending again, with its first job.
        // Released from its lane: Pending again, with its first job, and
        // watched by time (`next_attempt_at` as a deadline, see `due_at`)
        // in case the worker that released it dies before sending the job.
        (Waiting, Input::Start) => {
            let watch = now + chrono::Duration::from_std(WAITING_RECHECK).expect("small");
            Some(Decision { next: to(Pending, 0, Some(watch), None), effects: vec![Effect::SendJob { attempt: 1 }] })
        }
        (Pending, Input::Outcome { attempt: 1, result, status })
        | (InProgress, Input::Outcome { result, status, .. })
            if input_attempt(input) == in_progress_attempt(state) =>
        {
            let attempt = &input_attempt(input);
            Some(match result {
                AttemptResult::Delivered if rules.ack_timeout.is_some() => {
                    let wait = rules.ack_timeout.unwrap_or_default();
                    let deadline = now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX);
                    let at = next_ack_check(now, now, deadline);
                    Decision {
                        next: to(AwaitingAck, *attempt, Some(deadline), None),
                        effects: vec![Effect::CheckAck { attempt: *attempt, at }],
                    }
                }
                AttemptResult::Delivered => Decision { next: to(Completed, *attempt, None, None), effects: vec![] },
                AttemptResult::Failed { error, .. } if dead_letters_at_once(*status, dead_letter_on) => {
                    let reason = format!(
                        "subscriber answered HTTP {}, a status in the subscription's dead_letter_on: \
                         dead-lettered at attempt {attempt} without retrying",
                        status.unwrap_or_default()
                    );
                    Decision {
                        next: to(DeadLettered, *attempt, None, Some(error.clone())),
                        effects: vec![Effect::DeadLetter { reason }],
                    }
                }
                AttemptResult::Failed { error, retry_after_ms } => {
                    failed(*attempt, error, *retry_after_ms, policy, now, jitter)
                }
                AttemptResult::Gone => {
                    let error = "subscriber answered 410 Gone; subscription deactivated".to_string();
                    Decision {
                        next: to(DeadLettered, *attempt, None, Some(error.clone())),
                        effects: vec![Effect::DeactivateSubscription, Effect::DeadLetter { reason: error }],
                    }
                }
                AttemptResult::Rejected { error } => Decision {
                    next: to(DeadLettered, *attempt, None, Some(error.clone())),
                    effects: vec![Effect::DeadLetter { reason: error.clone() }],
                },
            })
        }
        (AwaitingAck, Input::AckDue { attempt, ack, since }) if *attempt == state.attempts => {
            let deadline = state.next_attempt_at.unwrap_or(now);
            Some(match ack {
                Some(AckSeen::Processed) => Decision { next: to(Completed, *attempt, None, None), effects: vec![] },
                // No longer required (the subscription changed while it
                // waited): the 2xx it had is the success, as without.
                None if rules.ack_timeout.is_none() => {
                    Decision { next: to(Completed, *attempt, None, None), effects: vec![] }
                }
                Some(AckSeen::Failed(reason)) => {
                    let error = format!("subscriber acknowledged failed: {reason}");
                    failed(*attempt, &error, None, policy, now, jitter)
                }
                None if now >= deadline => {
                    let secs = rules.ack_timeout.unwrap_or_default().as_secs();
                    failed(*attempt, &format!("no acknowledgement within {secs}s"), None, policy, now, jitter)
                }
                None => Decision {
                    next: state.clone(),
                    effects: vec![Effect::CheckAck { attempt: *attempt, at: next_ack_check(*since, now, deadline) }],
                },
            })
        }
        (PendingRetry, Input::RetryDue { attempt }) if *attempt == state.attempts + 1 => {
            if state.next_attempt_at.is_some_and(|due| due > now) {
                return None;
            }
            Some(Decision {
                next: to(InProgress, *attempt, None, state.last_error.clone()),
                effects: vec![Effect::SendJob { attempt: *attempt }],
            })
        }
        _ => None,
    }
}

/// A failed attempt `attempt` (`error`): retried on the schedule while
/// attempts are left, dead-lettered otherwise.
fn failed(
    attempt: u32,
    error: &str,
    retry_after_ms: Option<u64>,
    policy: &RetryPolicy,
    now: DateTime<Utc>,
    jitter: f64,
) -> Decision {
    let to = |status, next_attempt_at, last_error| SagaState { status, attempts: attempt, next_attempt_at, last_error };
    if policy.has_retry_after(attempt) {
        let wait = policy.delay(attempt, retry_after_ms.map(Duration::from_millis), jitter);
        let at = now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX);
        return Decision {
            next: to(SagaStatus::PendingRetry, Some(at), Some(error.to_string())),
            effects: vec![Effect::ScheduleRetry { attempt: attempt + 1, at }],
        };
    }
    let reason = format!("gave up after {attempt} attempts; last error: {error}");
    Decision {
        next: to(SagaStatus::DeadLettered, None, Some(error.to_string())),
        effects: vec![Effect::DeadLetter { reason }],
    }
}

/// When an AwaitingAck saga next looks for its acknowledgement: after as
/// long again as it has waited since `since` (at least
/// [`ACK_CHECK_MIN`]), never after `deadline`. Doubling keeps the checks
/// few (about 17 for a day's timeout) while an early acknowledgement is
/// seen soon.
pub fn next_ack_check(since: DateTime<Utc>, now: DateTime<Utc>, deadline: DateTime<Utc>) -> DateTime<Utc> {
    let min = chrono::Duration::from_std(ACK_CHECK_MIN).expect("small");
    (now + (now - since).max(min)).min(deadline)
}

/// The shortest wait between two checks of an AwaitingAck saga.
pub const ACK_CHECK_MIN: Duration = Duration::from_secs(1);

/// Does a failed attempt answered with `status` end its saga at once? Yes
/// when the subscriber answered a status the subscription lists in
/// `dead_letter_on`; not when it did not answer. Only failed attempts are
/// asked: a 2xx is a delivery, and 410 Gone keeps its own handling (the
/// subscription deactivated, the saga dead-lettered) whether listed or not.
pub fn dead_letters_at_once(status: Option<u16>, dead_letter_on: &[u16]) -> bool {
    status.is_some_and(|s| dead_letter_on.contains(&s))
}

/// When a saga in `state`, last changed at `changed_at`, is next expected
/// to make progress, if it is one the reconciler watches by time: a
/// PendingRetry saga when its retry is due, an InProgress one at once (its
/// retry job was just sent). A Pending saga is not watched by time, so the
/// healthy path (Pending → Completed) writes no index entry: its start and
/// first attempt travel on streams whose given-up batches the reconciler
/// re-drives, and a first job that keeps failing its worker dead-letters at
/// the receive limit. Terminal sagas: never.
pub fn due_at(state: &SagaState, changed_at: DateTime<Utc>) -> Option<DateTime<Utc>> {
    match state.status {
        // Only a saga released from its lane has a deadline while Pending.
        SagaStatus::Pending => state.next_attempt_at,
        SagaStatus::PendingRetry => Some(state.next_attempt_at.unwrap_or(changed_at)),
        SagaStatus::InProgress => Some(changed_at),
        // Live until its deadline: only then may it look stalled.
        SagaStatus::AwaitingAck => Some(state.next_attempt_at.unwrap_or(changed_at)),
        // Its release is a message that a crash can lose: look again later.
        SagaStatus::Waiting => Some(changed_at + chrono::Duration::from_std(WAITING_RECHECK).expect("small")),
        _ => None,
    }
}

/// How long a Waiting saga waits before the reconciler looks at its lane
/// again, in case the release that should have started it was lost.
pub const WAITING_RECHECK: Duration = Duration::from_secs(60);

/// The attempt an input is about (0 for Start).
fn input_attempt(input: &Input) -> u32 {
    match input {
        Input::Start => 0,
        Input::Outcome { attempt, .. } | Input::RetryDue { attempt } | Input::AckDue { attempt, .. } => *attempt,
    }
}

/// The attempt in flight in a non-terminal state: the implied first one of a
/// Pending saga, or the stored one of an InProgress saga.
pub fn in_progress_attempt(state: &SagaState) -> u32 {
    match state.status {
        SagaStatus::Pending => 1,
        _ => state.attempts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn st(status: SagaStatus, attempts: u32) -> SagaState {
        SagaState { status, attempts, next_attempt_at: None, last_error: None }
    }

    fn fail() -> AttemptResult {
        AttemptResult::Failed { error: "HTTP 500".into(), retry_after_ms: None }
    }

    #[test]
    fn a_saga_filed_for_pull_is_final_and_never_pushed() {
        let filed = SagaState::filed_for_pull();
        assert!(filed.status.is_terminal() && filed.is_filed_for_pull());
        let p = RetryPolicy::default();
        for input in [
            Input::Start,
            Input::RetryDue { attempt: 1 },
            Input::Outcome { attempt: 1, result: AttemptResult::Delivered, status: Some(200) },
        ] {
            assert!(decide(&filed, &input, &p, &[], Utc::now(), 0.0).is_none(), "{input:?}: no job, no change");
        }
        assert!(!st(SagaStatus::Completed, 1).is_filed_for_pull(), "a push that completed made an attempt");
        assert!(!st(SagaStatus::Pending, 0).is_filed_for_pull());
    }

    #[test]
    fn happy_path() {
        let p = RetryPolicy::default();
        let now = Utc::now();
        let d = decide(&st(SagaStatus::Pending, 0), &Input::Start, &p, &[], now, 0.0).unwrap();
        assert_eq!(d.next, st(SagaStatus::Pending, 0), "starting writes nothing");
        assert_eq!(d.effects, vec![Effect::SendJob { attempt: 1 }]);
        let d = decide(
            &d.next,
            &Input::Outcome { attempt: 1, result: AttemptResult::Delivered, status: None },
            &p,
            &[],
            now,
            0.0,
        )
        .unwrap();
        assert_eq!(d.next.status, SagaStatus::Completed);
        assert_eq!(d.next.attempts, 1);
    }

    #[test]
    fn retries_then_dead_letter() {
        let p = RetryPolicy { max_attempts: 3, base_delay_ms: 1000, max_delay_ms: 10_000, schedule_ms: None };
        let now = Utc::now();
        let mut s = decide(&st(SagaStatus::Pending, 0), &Input::Start, &p, &[], now, 0.0).unwrap().next;
        for n in 1..=2 {
            let d =
                decide(&s, &Input::Outcome { attempt: n, result: fail(), status: None }, &p, &[], now, 0.0).unwrap();
            assert_eq!(d.next.status, SagaStatus::PendingRetry);
            let due = d.next.next_attempt_at.unwrap();
            assert_eq!(d.effects, vec![Effect::ScheduleRetry { attempt: n + 1, at: due }]);
            assert!(decide(&d.next, &Input::RetryDue { attempt: n + 1 }, &p, &[], now, 0.0).is_none(), "not due yet");
            let d = decide(&d.next, &Input::RetryDue { attempt: n + 1 }, &p, &[], due, 0.0).unwrap();
            assert_eq!(d.next.status, SagaStatus::InProgress);
            assert_eq!(d.next.attempts, n + 1);
            s = d.next;
        }
        let d = decide(&s, &Input::Outcome { attempt: 3, result: fail(), status: None }, &p, &[], now, 0.0).unwrap();
        assert_eq!(d.next.status, SagaStatus::DeadLettered);
        assert!(matches!(&d.effects[..], [Effect::DeadLetter { reason }] if reason.contains("3 attempts")));
    }

    #[test]
    fn gone_deactivates_and_dead_letters() {
        let d = decide(
            &st(SagaStatus::InProgress, 1),
            &Input::Outcome { attempt: 1, result: AttemptResult::Gone, status: None },
            &RetryPolicy::default(),
            &[],
            Utc::now(),
            0.0,
        )
        .unwrap();
        assert_eq!(d.next.status, SagaStatus::DeadLettered);
        assert_eq!(d.effects[0], Effect::DeactivateSubscription);
    }

    #[test]
    fn stale_outcomes_are_ignored() {
        let p = RetryPolicy::default();
        let s = st(SagaStatus::InProgress, 2);
        assert!(decide(
            &s,
            &Input::Outcome { attempt: 1, result: AttemptResult::Delivered, status: None },
            &p,
            &[],
            Utc::now(),
            0.0
        )
        .is_none());
        assert!(decide(&s, &Input::Start, &p, &[], Utc::now(), 0.0).is_none());
        let pending = st(SagaStatus::Pending, 0);
        assert!(decide(
            &pending,
            &Input::Outcome { attempt: 2, result: AttemptResult::Delivered, status: None },
            &p,
            &[],
            Utc::now(),
            0.0
        )
        .is_none());
        let waiting = st(SagaStatus::PendingRetry, 1);
        assert!(decide(
            &waiting,
            &Input::Outcome { attempt: 1, result: AttemptResult::Delivered, status: None },
            &p,
            &[],
            Utc::now(),
            0.0
        )
        .is_none());
    }

    fn answered(status: u16) -> AttemptResult {
        AttemptResult::Failed { error: format!("HTTP {status}"), retry_after_ms: None }
    }

    #[test]
    fn an_explicit_schedule_sets_each_wait_and_the_attempts() {
        let p = RetryPolicy::from_schedule(vec![50, 100, 200]);
        let now = Utc::now();
        let mut s = decide(&st(SagaStatus::Pending, 0), &Input::Start, &p, &[], now, 0.0).unwrap().next;
        for (n, ms) in [(1, 50), (2, 100), (3, 200)] {
            let outcome = Input::Outcome { attempt: n, result: answered(500), status: Some(500) };
            let d = decide(&s, &outcome, &p, &[], now, 0.9).unwrap();
            let at = now + chrono::Duration::milliseconds(ms);
            assert_eq!(d.next.status, SagaStatus::PendingRetry);
            assert_eq!(d.effects, vec![Effect::ScheduleRetry { attempt: n + 1, at }], "exactly the schedule's wait");
            s = decide(&d.next, &Input::RetryDue { attempt: n + 1 }, &p, &[], at, 0.0).unwrap().next;
        }
        let d = decide(&s, &Input::Outcome { attempt: 4, result: answered(500), status: Some(500) }, &p, &[], now, 0.0)
            .unwrap();
        assert_eq!(d.next.status, SagaStatus::DeadLettered);
        assert!(matches!(&d.effects[..], [Effect::DeadLetter { reason }] if reason.contains("4 attempts")));
    }

    #[test]
    fn a_status_in_dead_letter_on_dead_letters_at_the_first_such_answer() {
        let p = RetryPolicy::default();
        let on = [400, 422];
        let now = Utc::now();
        let pending = st(SagaStatus::Pending, 0);
        // At the first attempt.
        let d = decide(
            &pending,
            &Input::Outcome { attempt: 1, result: answered(422), status: Some(422) },
            &p,
            &on,
            now,
            0.0,
        )
        .unwrap();
        assert_eq!(
            d.next,
            SagaState {
                status: SagaStatus::DeadLettered,
                attempts: 1,
                next_attempt_at: None,
                last_error: Some("HTTP 422".into())
            }
        );
        let [Effect::DeadLetter { reason }] = &d.effects[..] else { panic!("{:?}", d.effects) };
        assert!(reason.contains("HTTP 422") && reason.contains("dead_letter_on"), "{reason}");
        // A status not listed, and no answer at all, are retried as before.
        for (result, status) in [(answered(500), Some(500)), (answered(404), Some(404)), (fail(), None)] {
            let d = decide(&pending, &Input::Outcome { attempt: 1, result, status }, &p, &on, now, 0.0).unwrap();
            assert_eq!(d.next.status, SagaStatus::PendingRetry, "{status:?}");
        }
        // On a retry: the first such answer ends it, retries left or not.
        let retrying = st(SagaStatus::InProgress, 3);
        let d = decide(
            &retrying,
            &Input::Outcome { attempt: 3, result: answered(400), status: Some(400) },
            &p,
            &on,
            now,
            0.0,
        )
        .unwrap();
        assert_eq!((d.next.status, d.next.attempts), (SagaStatus::DeadLettered, 3));
        // Without dead_letter_on, a 422 is retried.
        let d = decide(
            &pending,
            &Input::Outcome { attempt: 1, result: answered(422), status: Some(422) },
            &p,
            &[],
            now,
            0.0,
        )
        .unwrap();
        assert_eq!(d.next.status, SagaStatus::PendingRetry);
    }

    #[test]
    fn gone_keeps_deactivating_when_410_is_in_dead_letter_on() {
        let d = decide(
            &st(SagaStatus::Pending, 0),
            &Input::Outcome { attempt: 1, result: AttemptResult::Gone, status: Some(410) },
            &RetryPolicy::default(),
            &[410, 422],
            Utc::now(),
            0.0,
        )
        .unwrap();
        assert_eq!(d.next.status, SagaStatus::DeadLettered);
        assert_eq!(d.effects[0], Effect::DeactivateSubscription);
    }

    #[test]
    fn dead_letters_at_once_only_for_a_listed_answer() {
        assert!(dead_letters_at_once(Some(422), &[400, 422]));
        assert!(!dead_letters_at_once(Some(500), &[400, 422]));
        assert!(!dead_letters_at_once(None, &[400, 422]));
        assert!(!dead_letters_at_once(Some(422), &[]));
    }

    fn any_status() -> impl Strategy<Value = SagaStatus> {
        prop_oneof![
            Just(SagaStatus::Pending),
            Just(SagaStatus::InProgress),
            Just(SagaStatus::PendingRetry),
            Just(SagaStatus::Completed),
            Just(SagaStatus::DeadLettered)
        ]
    }

    fn any_input() -> impl Strategy<Value = Input> {
        let result = prop_oneof![
            Just(AttemptResult::Delivered),
            Just(AttemptResult::Gone),
            (any::<Option<u32>>())
                .prop_map(|ra| AttemptResult::Failed { error: "x".into(), retry_after_ms: ra.map(u64::from) }),
            Just(AttemptResult::Rejected { error: "no".into() }),
        ];
        prop_oneof![
            Just(Input::Start),
            (0u32..12, result, prop_oneof![Just(None), Just(Some(422)), Just(Some(500))])
                .prop_map(|(attempt, result, status)| Input::Outcome { attempt, result, status }),
            (0u32..12).prop_map(|attempt| Input::RetryDue { attempt }),
        ]
    }

    proptest! {
        #[test]
        fn terminal_states_absorb_every_input(
            status in prop_oneof![Just(SagaStatus::Completed), Just(SagaStatus::DeadLettered)],
            attempts in 0u32..12, input in any_input(), j in 0.0f64..1.0, max in 1u32..10
        ) {
            let p = RetryPolicy { max_attempts: max, ..Default::default() };
            prop_assert!(decide(&st(status, attempts), &input, &p, &[], Utc::now(), j).is_none());
        }

        #[test]
        fn attempts_never_decrease_and_stay_within_policy(
            inputs in proptest::collection::vec(any_input(), 0..40), max in 1u32..8, start in any_status()
        ) {
            let p = RetryPolicy { max_attempts: max, base_delay_ms: 1, max_delay_ms: 1, schedule_ms: None };
            let now = Utc::now() + chrono::Duration::days(1);
            let mut s = st(start, 0);
            for i in &inputs {
                if let Some(d) = decide(&s, i, &p, &[422], now, 0.5) {
                    prop_assert!(d.next.attempts >= s.attempts);
                    prop_assert!(d.next.attempts <= max.max(s.attempts));
                    prop_assert!(d.next.status != SagaStatus::Pending || d.next == s, "only Start keeps a saga Pending");
                    s = d.next;
                }
            }
        }

        #[test]
        fn every_failure_sequence_ends_dead_lettered_after_max_attempts(max in 1u32..10) {
            let p = RetryPolicy { max_attempts: max, base_delay_ms: 1, max_delay_ms: 1, schedule_ms: None };
            let later = Utc::now() + chrono::Duration::days(1);
            let mut s = decide(&st(SagaStatus::Pending, 0), &Input::Start, &p, &[], Utc::now(), 0.0).unwrap().next;
            let mut sent = 1;
            loop {
                let d = decide(&s, &Input::Outcome { attempt: in_progress_attempt(&s), result: fail(), status: None }, &p, &[], Utc::now(), 0.0).unwrap();
                if d.next.status == SagaStatus::DeadLettered { break; }
                s = decide(&d.next, &Input::RetryDue { attempt: d.next.attempts + 1 }, &p, &[], later, 0.0).unwrap().next;
                sent += 1;
            }
            prop_assert_eq!(sent, max);
        }

        #[test]
        fn every_failure_sequence_ends_dead_lettered_after_the_schedule(
            schedule in proptest::collection::vec(1u64..1000, 1..12), listed in any::<bool>()
        ) {
            let p = RetryPolicy::from_schedule(schedule.clone());
            // A status not listed never shortens the schedule.
            let on: &[u16] = if listed { &[400, 422] } else { &[] };
            let later = Utc::now() + chrono::Duration::days(1);
            let mut s = decide(&st(SagaStatus::Pending, 0), &Input::Start, &p, on, Utc::now(), 0.0).unwrap().next;
            let mut sent = 1;
            loop {
                let outcome = Input::Outcome { attempt: in_progress_attempt(&s), result: answered(503), status: Some(503) };
                let d = decide(&s, &outcome, &p, on, Utc::now(), 0.0).unwrap();
                if d.next.status == SagaStatus::DeadLettered { break; }
                s = decide(&d.next, &Input::RetryDue { attempt: d.next.attempts + 1 }, &p, on, later, 0.0).unwrap().next;
                sent += 1;
            }
            prop_assert_eq!(sent, schedule.len() + 1);
        }
    }
}
