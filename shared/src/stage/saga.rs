//! The saga stage: the only place saga status changes. It reads the saga and
//! attempt streams and the retry timers, asks [`crate::saga::decide`] what to
//! do, stores the transition conditionally, then runs its effects (jobs,
//! timers, dead letters). Effects are idempotent and are run again when a
//! redelivered input finds its transition already stored, so a crash between
//! the transition and its effects loses nothing.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::attempt::Attempt;
use crate::context::Hookline;
use crate::dead_letter::{DeadLetter, DeadLetterState};
use crate::error::StoreError;
use crate::event_search::Outcome;
use crate::ids::{SubscriptionId, WebhookId};
use crate::message::{DeliveryJob, RetryTimer};
use crate::ports::{Transition, TransitionOutcome};
use crate::retry::RetryPolicy;
use crate::saga::{decide_acked, Effect, Input, Rules, Saga, SagaState, SagaStatus};

/// One input for one saga, with the state the input implies the saga is in,
/// and what its subscription says about failures (the defaults where they
/// cannot matter: a start, a retry timer; or when it is gone).
struct Step {
    job: DeliveryJob,
    from: SagaState,
    input: Input,
    policy: RetryPolicy,
    dead_letter_on: Vec<u16>,
    /// A saga released from its lane: the deadline its Pending state
    /// carries (`crate::ordering::release_deadline`), the same whenever the
    /// same releaser retries, so a retry after a crash redoes the job.
    release_deadline: Option<DateTime<Utc>>,
    /// The subscription's `ack_timeout_secs` ([`crate::ack`]), where it
    /// matters (an attempt's outcome, an acknowledgement check).
    ack_timeout: Option<Duration>,
    /// When the attempt awaiting its acknowledgement was sent: carried by
    /// its checks' timers.
    ack_since: Option<DateTime<Utc>>,
}

/// New sagas (the saga stream's inserts): each gets its first job. The
/// input is always read as the insert it was, whatever the saga's state now;
/// but an ordered saga first asks its lane ([`super::ordering::admit`]),
/// and one inserted terminal (a pull-only subscription's, filed for pull:
/// [`crate::saga::SagaState::filed_for_pull`]) gets nothing.
pub async fn start(h: &Hookline, sagas: &[Saga]) -> Result<(), StoreError> {
    let (ordered, plain): (Vec<&Saga>, Vec<&Saga>) =
        sagas.iter().filter(|s| !s.state.status.is_terminal()).partition(|s| s.lane.is_some());
    for s in ordered {
        super::ordering::admit(h, &s.event_id, &s.id, crate::ordering::Releaser::Itself).await?;
    }
    let inserted = SagaState { status: SagaStatus::Pending, attempts: 0, next_attempt_at: None, last_error: None };
    run(h, plain.into_iter().map(|s| start_step(s, inserted.clone(), None)).collect()).await
}

/// The start of saga `s` from state `from` (and, released from its lane,
/// the deadline it then carries).
fn start_step(s: &Saga, from: SagaState, release_deadline: Option<DateTime<Utc>>) -> Step {
    Step {
        job: job_of(s, 0),
        from,
        input: Input::Start,
        policy: RetryPolicy::default(),
        dead_letter_on: Vec::new(),
        release_deadline,
        ack_timeout: None,
        ack_since: None,
    }
}

/// Starts one saga from its stored state: an ordered saga at the head of
/// its lane (Pending: its first job; Waiting: Pending again, with the
/// deadline `by` gives it, then its first job). Nothing happens if the
/// state changed meanwhile.
pub(crate) async fn begin(h: &Hookline, s: &Saga, by: crate::ordering::Releaser) -> Result<(), StoreError> {
    let deadline = (s.state.status == SagaStatus::Waiting).then(|| crate::ordering::release_deadline(s.updated_at, by));
    run(h, vec![start_step(s, s.state.clone(), deadline)]).await
}

/// Marks a Pending saga Waiting (its lane holds it); the saga as stored
/// after, or `None` if it was no longer Pending.
pub(crate) async fn hold(h: &Hookline, s: &Saga) -> Result<Option<Saga>, StoreError> {
    let to = SagaState { status: SagaStatus::Waiting, attempts: 0, next_attempt_at: None, last_error: None };
    let now = Utc::now();
    let t = Transition {
        event_id: s.event_id.clone(),
        saga_id: s.id.clone(),
        from: s.state.clone(),
        to: to.clone(),
        at: now,
    };
    Ok(match h.stores.sagas.transition(&[t]).await?.pop() {
        Some(TransitionOutcome::Applied) => Some(Saga { state: to, updated_at: now, ..s.clone() }),
        _ => None,
    })
}

/// Recorded attempts (the attempts stream): complete, retry or dead-letter.
pub async fn on_attempts(h: &Hookline, attempts: &[Attempt]) -> Result<(), StoreError> {
    let mut ids: Vec<crate::ids::SubscriptionId> = attempts.iter().map(|a| a.subscription_id.clone()).collect();
    ids.sort();
    ids.dedup();
    let found = h.subscription_cache.get_many(h.stores.subscriptions.as_ref(), &ids).await?;
    let subs: std::collections::HashMap<_, _> = ids.iter().zip(found).filter_map(|(id, s)| Some((id, s?))).collect();
    let steps = attempts
        .iter()
        .map(|a| Step {
            job: DeliveryJob {
                lane: a.lane.clone(),
                ..DeliveryJob::new(
                    a.saga_id.clone(),
                    a.event_id.clone(),
                    a.subscription_id.clone(),
                    crate::ids::webhook_id(&a.event_id, &a.subscription_id),
                    a.attempt,
                )
            },
            // The first attempt runs while the saga is still Pending (see
            // crate::saga); later ones from InProgress.
            from: if a.attempt == 1 {
                SagaState { status: SagaStatus::Pending, attempts: 0, next_attempt_at: None, last_error: None }
            } else {
                SagaState {
                    status: SagaStatus::InProgress,
                    attempts: a.attempt,
                    next_attempt_at: None,
                    last_error: None,
                }
            },
            input: Input::Outcome { attempt: a.attempt, result: a.result.clone(), status: a.status_code },
            policy: subs.get(&a.subscription_id).map(|s| s.retry_policy.clone()).unwrap_or_default(),
            dead_letter_on: subs.get(&a.subscription_id).map(|s| s.dead_letter_on.clone()).unwrap_or_default(),
            release_deadline: None,
            ack_timeout: subs.get(&a.subscription_id).and_then(|s| s.ack_timeout()),
            ack_since: Some(a.at - chrono::Duration::milliseconds(i64::try_from(a.latency_ms).unwrap_or(0))),
        })
        .collect();
    run(h, steps).await
}

/// What a retry timer asks of its caller.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TimerOutcome {
    /// Handled (the next attempt is queued, or the timer was stale).
    Done,
    /// Not due yet: deliver the timer again after this long.
    NotYet(Duration),
}

/// A retry timer fired: queue the next attempt if it is due. Attempt 0 is
/// the wake-up of an ordered saga waiting in its lane.
pub async fn on_timer(h: &Hookline, timer: &RetryTimer) -> Result<TimerOutcome, StoreError> {
    let now = Utc::now();
    if timer.attempt == 0 {
        super::ordering::woken(h, timer).await?;
        return Ok(TimerOutcome::Done);
    }
    if timer.due_at > now {
        return Ok(TimerOutcome::NotYet((timer.due_at - now).to_std().unwrap_or_default()));
    }
    // The timer carries only the saga's key; the job needs the rest.
    let Some(saga) = h.stores.sagas.get(&timer.event_id, &timer.saga_id).await? else {
        // Never a silent drop: the saga expired (or was lost) while it
        // waited, so the delivery ends as a dead letter that says so.
        // Subscription and webhook id unknown: the saga held them.
        let job = DeliveryJob::new(
            timer.saga_id.clone(),
            timer.event_id.clone(),
            SubscriptionId::new(""),
            WebhookId::new(""),
            timer.attempt,
        );
        let reason =
            format!("retry timer for attempt {} found its saga no longer stored (retention ended?)", timer.attempt);
        dead_letter(h, &job, &reason).await?;
        return Ok(TimerOutcome::Done);
    };
    if saga.state.status == SagaStatus::AwaitingAck && timer.attempt == saga.state.attempts {
        run(h, vec![ack_step(h, &saga, timer).await?]).await?;
        return Ok(TimerOutcome::Done);
    }
    let step = Step {
        job: job_of(&saga, timer.attempt),
        from: SagaState {
            status: SagaStatus::PendingRetry,
            attempts: timer.attempt - 1,
            next_attempt_at: Some(timer.due_at),
            last_error: None,
        },
        input: Input::RetryDue { attempt: timer.attempt },
        policy: RetryPolicy::default(),
        dead_letter_on: Vec::new(),
        release_deadline: None,
        ack_timeout: None,
        ack_since: None,
    };
    run(h, vec![step]).await?;
    Ok(TimerOutcome::Done)
}

/// The check of an AwaitingAck saga: its subscription's rules (read
/// through the cache) and the acknowledgement that counts for its attempt
/// (one read of the [`crate::ports::AckStore`]). The attempt's send time
/// comes with the timer; a timer without it (sent before it was carried)
/// counts acknowledgements from the saga's last transition, so one that
/// arrived before then is missed and the attempt is retried: never a
/// delivery lost.
async fn ack_step(h: &Hookline, saga: &Saga, timer: &RetryTimer) -> Result<Step, StoreError> {
    let sub = h
        .subscription_cache
        .get_many(h.stores.subscriptions.as_ref(), std::slice::from_ref(&saga.subscription_id))
        .await?;
    let sub = sub.into_iter().next().flatten();
    let since = timer.ack_since.unwrap_or(saga.updated_at);
    let ack = h.stores.acks.get(&saga.subscription_id, &saga.webhook_id).await?;
    Ok(Step {
        job: job_of(saga, saga.state.attempts),
        from: saga.state.clone(),
        input: Input::AckDue {
            attempt: saga.state.attempts,
            ack: crate::ack::counts_for(ack.as_ref(), saga.state.attempts, since),
            since,
        },
        policy: sub.as_ref().map(|s| s.retry_policy.clone()).unwrap_or_default(),
        dead_letter_on: Vec::new(),
        release_deadline: None,
        ack_timeout: sub.as_ref().and_then(|s| s.ack_timeout()),
        ack_since: Some(since),
    })
}

/// The check timer of an AwaitingAck saga's attempt `attempt` at `at`,
/// counting acknowledgements from `since` (the reconciler's re-drive of a
/// lost one too).
pub fn ack_timer(job: &DeliveryJob, attempt: u32, at: DateTime<Utc>, since: DateTime<Utc>) -> (RetryTimer, Duration) {
    let (timer, delay) = timer_message(job, attempt, at, Utc::now());
    (RetryTimer { ack_since: Some(since), ..timer }, delay)
}

/// The delivery job of attempt `attempt` of saga `s`. It carries the
/// saga's creation as the time its first attempt was due, from which the
/// delivery stage knows when the last one is due (an open breaker holds
/// the job no longer: [`crate::retry::hold_for_breaker`]). Not for an
/// ordered saga: its first attempt is due when its lane releases it, which
/// the saga does not keep, so its jobs wait for the probe.
pub fn job_of(s: &Saga, attempt: u32) -> DeliveryJob {
    DeliveryJob {
        lane: s.lane.clone(),
        first_due: s.lane.is_none().then_some(s.created_at),
        ..DeliveryJob::new(s.id.clone(), s.event_id.clone(), s.subscription_id.clone(), s.webhook_id.clone(), attempt)
    }
}

async fn run(h: &Hookline, steps: Vec<Step>) -> Result<(), StoreError> {
    let now = Utc::now();
    let mut planned = Vec::new();
    for step in steps {
        let jitter: f64 = rand::random();
        let rules = Rules { policy: &step.policy, dead_letter_on: &step.dead_letter_on, ack_timeout: step.ack_timeout };
        if let Some(mut d) = decide_acked(&step.from, &step.input, &rules, now, jitter) {
            if let (Some(deadline), SagaStatus::Pending) = (step.release_deadline, d.next.status) {
                d.next.next_attempt_at = Some(deadline);
            }
            planned.push((step, d));
        }
    }
    if planned.is_empty() {
        return Ok(());
    }
    // Decisions that keep the state (starting a saga) store nothing.
    let transitions: Vec<Transition> = planned
        .iter()
        .filter(|(s, d)| d.next != s.from)
        .map(|(s, d)| Transition {
            event_id: s.job.event_id.clone(),
            saga_id: s.job.saga_id.clone(),
            from: s.from.clone(),
            to: d.next.clone(),
            at: now,
        })
        .collect();
    let mut stored = h.stores.sagas.transition(&transitions).await?.into_iter();
    h.failpoints.hit("saga.after_transition");
    let outcomes: Vec<TransitionOutcome> = planned
        .iter()
        .map(|(s, d)| {
            if d.next == s.from {
                TransitionOutcome::Applied
            } else {
                stored.next().expect("one outcome per transition")
            }
        })
        .collect();
    let mut jobs = Vec::new();
    let mut timers = Vec::new();
    let mut dead_jobs = Vec::new();
    let mut ended = Vec::new();
    for ((step, decision), outcome) in planned.into_iter().zip(outcomes) {
        let effects = match outcome {
            TransitionOutcome::Applied => decision.effects,
            // Already stored by an earlier run that crashed before its effects:
            // redo them, with the stored retry time.
            // A release from Waiting is redone only by the releaser that
            // stored it (its deadline says who): another one that got there
            // first sent the job itself.
            TransitionOutcome::Conflict(cur)
                if cur.status == decision.next.status
                    && cur.attempts == decision.next.attempts
                    && (step.from.status != SagaStatus::Waiting
                        || cur.next_attempt_at == decision.next.next_attempt_at) =>
            {
                decision
                    .effects
                    .into_iter()
                    .map(|e| match (e, cur.next_attempt_at) {
                        (Effect::ScheduleRetry { attempt, .. }, Some(at)) => Effect::ScheduleRetry { attempt, at },
                        (e, _) => e,
                    })
                    .collect()
            }
            TransitionOutcome::Conflict(_) | TransitionOutcome::Missing => continue,
        };
        if decision.next.status.is_terminal() && step.job.lane.is_some() {
            ended.push((step.job.clone(), decision.next.status == SagaStatus::DeadLettered));
        }
        for effect in effects {
            match effect {
                // Failure injection: a job lost on the way (the reconciler's test).
                Effect::SendJob { attempt }
                    if h.failpoints.fails("saga.lose_job", &format!("{}#{attempt}", step.job.event_id)) => {}
                Effect::SendJob { attempt } => jobs.push(DeliveryJob { attempt, ..step.job.clone() }),
                Effect::ScheduleRetry { attempt, at } => {
                    // The first failure of a saga marks its event as failed
                    // (once: a later failure finds it marked already; the
                    // first-try success writes nothing).
                    if attempt == 2 && matches!(step.input, Input::Outcome { .. } | Input::AckDue { .. }) {
                        h.stores.events.mark_outcome(&step.job.event_id, Outcome::Failed).await?;
                    }
                    h.metrics.retries_scheduled.fetch_add(1, Relaxed);
                    timers.push(timer_message(&step.job, attempt, at, now));
                }
                Effect::DeadLetter { reason } => {
                    dead_letter(h, &step.job, &reason).await?;
                    dead_jobs.push(step.job.clone());
                }
                Effect::DeactivateSubscription => deactivate(h, &step.job.subscription_id).await?,
                Effect::CheckAck { attempt, at } => {
                    timers.push(ack_timer(&step.job, attempt, at, step.ack_since.unwrap_or(now)))
                }
            }
        }
    }
    h.stores.retries.send(&timers).await?;
    h.stores.deliveries.send_now(&jobs).await?;
    // The dead saga's job also goes to the deliveries dead-letter queue, so
    // ops can redrive it (to the requeue queue) from the console.
    h.stores.dead_jobs.send_now(&dead_jobs).await?;
    // Ordered sagas that ended let their lane's next one go.
    for (job, dead) in ended {
        super::ordering::ended(h, &job, dead).await?;
    }
    Ok(())
}

/// The timer of attempt `attempt` of a job's saga, and its delay from `now`
/// until `at` (at most [`MAX_TIMER_DELAY`]: a later timer is sent again
/// when it fires early, see [`handle_timer`]).
pub fn timer_message(job: &DeliveryJob, attempt: u32, at: DateTime<Utc>, now: DateTime<Utc>) -> (RetryTimer, Duration) {
    let timer = RetryTimer {
        event_id: job.event_id.clone(),
        saga_id: job.saga_id.clone(),
        attempt,
        due_at: at,
        ack_since: None,
    };
    (timer, (at - now).to_std().unwrap_or_default().min(MAX_TIMER_DELAY))
}

/// The longest delay one timer message waits (SQS allows 15 minutes).
pub const MAX_TIMER_DELAY: Duration = Duration::from_secs(900);

/// A retry timer fired, on either backend: the next attempt is queued if it
/// is due; a timer that fired early is sent again for the time left.
pub async fn handle_timer(h: &Hookline, timer: RetryTimer) -> Result<(), StoreError> {
    match on_timer(h, &timer).await? {
        TimerOutcome::Done => Ok(()),
        TimerOutcome::NotYet(left) => h.stores.retries.send(&[(timer, left.min(MAX_TIMER_DELAY))]).await,
    }
}

async fn dead_letter(h: &Hookline, job: &DeliveryJob, reason: &str) -> Result<(), StoreError> {
    let saga = h.stores.sagas.get(&job.event_id, &job.saga_id).await?;
    let event = crate::stage::deliver::event_of(h, &job.event_id, &job.saga_id).await?;
    let subscription_id = saga.as_ref().map_or(job.subscription_id.clone(), |s| s.subscription_id.clone());
    let event_type = event.as_ref().map(|e| e.event_type.clone()).unwrap_or_default();
    let trace_id = event.as_ref().and_then(|e| e.trace_id.clone()).unwrap_or_default();
    let dl = DeadLetter {
        id: crate::ids::dead_letter_id(&job.saga_id),
        event_id: job.event_id.clone(),
        subscription_id,
        event_type,
        tenant_id: event.as_ref().and_then(|e| e.tenant_id.clone()),
        reason: reason.to_string(),
        attempts: saga.as_ref().map_or(job.attempt, |s| s.state.attempts),
        saga_snapshot: serde_json::to_value(&saga).unwrap_or_default(),
        created_at: Utc::now(),
        state: DeadLetterState::Open,
        resolution: None,
        event,
    };
    // Before the dead letter's insert, so a crash in between is redone
    // with it (the mark is conditional: the redo writes nothing).
    h.stores.events.mark_outcome(&job.event_id, Outcome::DeadLettered).await?;
    let inserted = h.stores.dead_letters.put(&dl).await?;
    let stored = match inserted {
        true => dl,
        // Already stored (this effect is run again): announce the stored one.
        false => h.stores.dead_letters.get(&dl.id).await?.unwrap_or(dl),
    };
    if inserted {
        h.metrics.dead_letters.fetch_add(1, Relaxed);
        tracing::warn!(saga_id = %job.saga_id, event_id = %job.event_id, subscription_id = %job.subscription_id, trace_id, reason, "saga dead-lettered");
    }
    // Published each time the effect runs, under the dead letter's id: a
    // retry after a crash stores it once.
    super::failing::dead_letter_created(h, &stored).await
}

/// A 410 Gone: the subscription is disabled at once, with its audit record
/// and `hookline.subscription.disabled` ([`super::failing::disable`]).
async fn deactivate(h: &Hookline, subscription_id: &SubscriptionId) -> Result<(), StoreError> {
    let cause = super::failing::Cause {
        reason: super::failing::REASON_GONE,
        last_error: Some("HTTP 410 Gone".into()),
        failing_since: None,
    };
    super::failing::disable(h, subscription_id, &cause).await
}
