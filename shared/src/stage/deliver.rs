//! Deliver: POST one job's event to its subscriber, signed, and record the
//! attempt. It never decides a retry or a dead letter; the saga stage reads
//! the attempt and decides. The one saga change it may store is the saga
//! stage's own decision for a first attempt that was delivered and leaves
//! nothing else to do ([`Attempt::completes_its_saga`]): the store
//! may keep the completion in the write that records the attempt
//! ([`crate::ports::AttemptStore::record_completing`]).
//!
//! Two things are not the subscriber's fault and never cost it an attempt:
//! a fault on Hookline's side (out of file descriptors or local ports, the
//! store unreadable, a header Hookline cannot encode) defers the job (it is
//! sent again after [`LOCAL_FAULT_DELAY`], as a new message, so it does not
//! count towards the queue's receive limit); and a subscription this
//! process's cache does not know, or thinks inactive or unverified, is read
//! again from the store before the attempt is refused. A job received
//! [`JOB_RECEIVE_LIMIT`] times (its worker crashed or timed out every time)
//! is recorded as a refused attempt, so its saga dead-letters with a record
//! and a snapshot that ops can requeue.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use chrono::Utc;

use crate::attempt::Attempt;
use crate::bounds::{all_bounded, JOB_RECEIVE_LIMIT, MAX_DELIVERIES_IN_FLIGHT};
use crate::context::Hookline;
use crate::error::StoreError;
use crate::event::EventRecord;
use crate::health::{Gate, Outcome};
use crate::http_client::{PostError, PostResult};
use crate::ids::{self, EventId, SagaId, SubscriptionId};
use crate::message::DeliveryJob;
use crate::metrics::ProducerOutcome;
use crate::ports::Admission;
use crate::retry::{self, BreakerHold};
use crate::saga::{AttemptResult, SagaStatus};
use crate::signing;
use crate::stage::breaker;
use crate::subscription::Subscription;

/// How long a job hit by a local fault waits before it is tried again.
pub const LOCAL_FAULT_DELAY: Duration = Duration::from_secs(10);

/// Why a job is deferred (sent again later, no attempt counted). Each
/// reason says what it means for the job's subscription and for the log;
/// [`DeferReason::LocalFault`] also fixes the delay
/// ([`LOCAL_FAULT_DELAY`], see [`Prepared::local_fault`]). Logged as its
/// [`Display`](std::fmt::Display) text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeferReason {
    /// The job waits for the start it booked under the subscription's
    /// `rate_limit`.
    BookedStart,
    /// The subscription's circuit breaker is open: the reason holds for
    /// every job of the subscription, so a consumer may set its other
    /// queued jobs aside for as long.
    BreakerOpen,
    /// The subscription is at its `max_in_flight`.
    MaxInFlight,
    /// The subscription is at its `rate_limit` (the dispatcher spreads its
    /// jobs over the coming intervals).
    RateLimit,
    /// More jobs were received than this process has delivery slots free.
    NoSlotFree,
    /// A fault on Hookline's side (out of file descriptors or local ports,
    /// the store unreadable, a header it cannot encode), described; logged
    /// as a warning.
    LocalFault(String),
}

impl DeferReason {
    /// Whether the reason holds for every job of the subscription (its
    /// breaker is open), not only this one.
    pub fn whole_subscription(&self) -> bool {
        matches!(self, DeferReason::BreakerOpen)
    }

    /// Whether it is a fault on Hookline's side (logged as a warning).
    pub fn is_local_fault(&self) -> bool {
        matches!(self, DeferReason::LocalFault(_))
    }
}

impl std::fmt::Display for DeferReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DeferReason::BookedStart => "waits for the start it booked under the subscription's rate_limit",
            DeferReason::BreakerOpen => "the subscription's circuit breaker is open",
            DeferReason::MaxInFlight => "the subscription is at its max_in_flight",
            DeferReason::RateLimit => "subscription at its rate_limit",
            DeferReason::NoSlotFree => "no delivery slot free",
            DeferReason::LocalFault(why) => why,
        })
    }
}

/// A delivery job as the queue handed it over.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedJob {
    /// The job.
    pub job: DeliveryJob,
    /// How many times the queue has handed it out, this time included.
    pub receive_count: u32,
}

/// What one job came to before anything is stored.
#[derive(Debug)]
pub enum Prepared {
    /// An attempt to record (delivered, failed, refused).
    Record(Attempt),
    /// A first attempt that was delivered and completes its saga with
    /// nothing else to do (the saga stage's decision for it:
    /// [`Attempt::completes_its_saga`]): recorded with
    /// [`crate::ports::AttemptStore::record_completing`], which may store the
    /// completion in the same write.
    Complete(Attempt),
    /// Not attempted, for a reason that is not the subscriber's fault (a
    /// fault on Hookline's side, a limit): sent again after `delay`, as a
    /// new message, without counting an attempt.
    Defer {
        /// Why: what it means for the subscription, and for the log.
        reason: DeferReason,
        /// When to try again.
        delay: Duration,
        /// The job as it is to be sent again, when that differs from the
        /// job received: with the start it booked under `rate_limit`, or
        /// one more `max_in_flight` wait counted.
        resend: Option<DeliveryJob>,
    },
    /// Not attempted: the job is stale (an ordered saga that already ended
    /// or moved past this attempt: a duplicate message, or one a crash left
    /// behind). Delivering it would put an old event after newer ones.
    Stale,
}

impl Prepared {
    /// A job deferred by a fault on Hookline's side: sent again, unchanged,
    /// after [`LOCAL_FAULT_DELAY`].
    pub fn local_fault(why: String) -> Prepared {
        Prepared::Defer { reason: DeferReason::LocalFault(why), delay: LOCAL_FAULT_DELAY, resend: None }
    }
}

/// Delivers a batch of received jobs concurrently (at most
/// [`MAX_DELIVERIES_IN_FLIGHT`] at once), records their attempts in one
/// write and re-sends deferred jobs. Returns, per job, whether its message
/// is done with (recorded, already recorded, or re-sent) and may be deleted;
/// the others are received again after their visibility timeout.
///
/// Waits cost a job nothing but its own re-send: the breaker and the limits
/// are asked before the event is read, and the batch's jobs of one
/// rate-limited subscription book their starts together (one write), each
/// its own, so jobs waiting for the rate come back one at a time.
pub async fn deliver_received(h: &Hookline, jobs: &[ReceivedJob]) -> Vec<bool> {
    let gated = all_bounded(jobs.iter().map(|r| gate(h, r)).collect(), MAX_DELIVERIES_IN_FLIGHT).await;
    // The starts of each rate-limited subscription's jobs, booked at once.
    let mut booking: Vec<(SubscriptionId, Duration, Vec<usize>)> = Vec::new();
    for (i, g) in gated.iter().enumerate() {
        if let Ok(Gated::Go { sub, book: Some(interval), .. }) = g {
            match booking.iter_mut().find(|(id, _, _)| *id == sub.id) {
                Some((_, _, idx)) => idx.push(i),
                None => booking.push((sub.id.clone(), *interval, vec![i])),
            }
        }
    }
    let mut starts: Vec<Option<Result<Duration, String>>> = vec![None; jobs.len()];
    for (sub, interval, idx) in booking {
        let booked = h.stores.limits.book_starts(&sub, interval, idx.len() as u32).await;
        for (k, i) in idx.into_iter().enumerate() {
            starts[i] = Some(booked.as_ref().map(|first| *first + interval * k as u32).map_err(|e| e.to_string()));
        }
    }
    let work = gated.into_iter().zip(starts).zip(jobs).map(|((g, start), r)| async move {
        match (g?, start) {
            (Gated::Done(p), _) => Ok(p),
            (Gated::Go { .. }, Some(Err(e))) => Err(StoreError::other(e)),
            (Gated::Go { sub, book, .. }, Some(Ok(wait))) => match booked_start(&r.job, book, wait) {
                Some(deferred) => Ok(deferred),
                None => attempt(h, &r.job, sub).await,
            },
            (Gated::Go { sub, .. }, None) => attempt(h, &r.job, sub).await,
        }
    });
    let prepared = all_bounded(work.collect(), MAX_DELIVERIES_IN_FLIGHT).await;
    settle(h, jobs, prepared).await
}

/// What the checks before an attempt came to.
enum Gated {
    /// Nothing to attempt: refused, stale, or deferred.
    Done(Prepared),
    /// Go ahead to the subscription's limits and the attempt.
    Go {
        /// The subscription, as checked (active and verified).
        sub: Subscription,
        /// The time between starts to book one under, when the job has a
        /// `rate_limit` to wait for and no start booked yet.
        book: Option<Duration>,
    },
}

/// A job whose start was just booked `wait` from now: deferred until then
/// (sent again carrying its start, so it books no other), or `None` to go
/// now (the start is due, or due within the clock tolerance).
fn booked_start(job: &DeliveryJob, interval: Option<Duration>, wait: Duration) -> Option<Prepared> {
    let interval = interval?;
    let tolerance = Duration::from_millis(crate::subscription::rate_tolerance(interval).max(0) as u64);
    if wait <= tolerance {
        return None;
    }
    let at = Utc::now() + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX);
    Some(Prepared::Defer {
        reason: DeferReason::BookedStart,
        delay: wait,
        resend: Some(DeliveryJob { start_at: Some(at), ..job.clone() }),
    })
}

/// Stores what a batch of jobs came to: the attempts in one write, the
/// deferred jobs re-sent. `prepared[i]` belongs to `jobs[i]`; a store error
/// in preparing defers the job. Returns, per job, whether its message is
/// done with and may be deleted.
pub async fn settle(h: &Hookline, jobs: &[ReceivedJob], prepared: Vec<Result<Prepared, StoreError>>) -> Vec<bool> {
    let mut done = vec![false; jobs.len()];
    let (mut recorded, mut attempts, mut deferred) = (Vec::new(), Vec::new(), Vec::new());
    let (mut completing_at, mut completing) = (Vec::new(), Vec::new());
    for (i, p) in prepared.into_iter().enumerate() {
        match p {
            Ok(Prepared::Record(a)) => {
                recorded.push(i);
                attempts.push(a);
            }
            Ok(Prepared::Complete(a)) => {
                completing_at.push(i);
                completing.push(a);
            }
            Ok(Prepared::Defer { reason, delay, resend }) => deferred.push((i, reason, delay, resend)),
            Ok(Prepared::Stale) => {
                done[i] = true;
                tracing::info!(saga_id = %jobs[i].job.saga_id, attempt = jobs[i].job.attempt, "stale job of an ordered saga dropped");
            }
            Err(e) => {
                deferred.push((i, DeferReason::LocalFault(format!("store unavailable: {e}")), LOCAL_FAULT_DELAY, None))
            }
        }
    }
    h.failpoints.hit("deliver.before_record");
    let stores = &h.stores.attempts;
    let (plain, completes) = futures_util::future::join(
        async {
            if attempts.is_empty() {
                Ok(Vec::new())
            } else {
                stores.record(&attempts).await
            }
        },
        async {
            if completing.is_empty() {
                Ok(Vec::new())
            } else {
                stores.record_completing(&completing).await
            }
        },
    )
    .await;
    for (at, attempts, result) in [(&recorded, &attempts, plain), (&completing_at, &completing, completes)] {
        match result {
            Ok(inserted) => {
                for ((i, a), new) in at.iter().zip(attempts).zip(inserted) {
                    done[*i] = true;
                    if !new {
                        tracing::info!(saga_id = %a.saga_id, attempt = a.attempt, "attempt already recorded; duplicate job");
                    }
                }
            }
            Err(e) => tracing::error!(error = %e, "delivery: recording attempts failed; jobs will be received again"),
        }
    }
    if !deferred.is_empty() {
        let messages: Vec<(DeliveryJob, Duration)> = deferred
            .iter_mut()
            .map(|(i, _, delay, resend)| (resend.take().unwrap_or_else(|| jobs[*i].job.clone()), *delay))
            .collect();
        match h.stores.deliveries.send(&messages).await {
            Ok(()) => {
                for (i, why, delay, _) in &deferred {
                    done[*i] = true;
                    h.metrics.deliveries_deferred.fetch_add(1, Relaxed);
                    let j = &jobs[*i].job;
                    let delay_ms = delay.as_millis() as u64;
                    if why.is_local_fault() {
                        tracing::warn!(saga_id = %j.saga_id, attempt = j.attempt, reason = %why, delay_ms, "delivery deferred: a fault on Hookline's side; no attempt counted");
                    } else {
                        tracing::debug!(saga_id = %j.saga_id, attempt = j.attempt, reason = %why, delay_ms, "delivery deferred; no attempt counted");
                    }
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "delivery: re-sending deferred jobs failed; they will be received again")
            }
        }
    }
    done
}

/// [`deliver_received`] for a batch as the consumer layer hands it over
/// (`crate::queue::consume`): jobs with their receive counts.
pub async fn deliver_messages(h: &Hookline, jobs: Vec<(DeliveryJob, u32)>) -> Vec<bool> {
    let jobs: Vec<ReceivedJob> =
        jobs.into_iter().map(|(job, receive_count)| ReceivedJob { job, receive_count }).collect();
    deliver_received(h, &jobs).await
}

/// Delivers jobs received once (tests and tools that hold jobs, not
/// messages); fails if any job is not done.
pub async fn deliver_jobs(h: &Hookline, jobs: &[DeliveryJob]) -> Result<(), StoreError> {
    let received: Vec<ReceivedJob> = jobs.iter().map(|j| ReceivedJob { job: j.clone(), receive_count: 1 }).collect();
    let done = deliver_received(h, &received).await;
    match done.iter().filter(|d| !**d).count() {
        0 => Ok(()),
        n => Err(StoreError::other(format!("{n} of {} delivery jobs were not done", jobs.len()))),
    }
}

/// Makes one job's attempt (or refuses it, or defers it for a local fault)
/// without storing anything; [`settle`] stores what it came to.
pub async fn prepare(h: &Hookline, r: &ReceivedJob) -> Result<Prepared, StoreError> {
    match gate(h, r).await? {
        Gated::Done(p) => Ok(p),
        Gated::Go { sub, book } => {
            if let Some(interval) = book {
                let wait = h.stores.limits.book_starts(&sub.id, interval, 1).await?;
                if let Some(deferred) = booked_start(&r.job, book, wait) {
                    return Ok(deferred);
                }
            }
            attempt(h, &r.job, sub).await
        }
    }
}

/// Whether the reconciler may have sent `job`'s attempt again since it was
/// queued: it re-drives a saga that made no progress for its stall margin,
/// which a job held by a breaker, a rate limit or a backlog also looks like.
/// Then only the job with the saga's re-drive count may post
/// ([`DeliveryJob::redrive`]). Jobs queued before `queued_at` was carried
/// are not checked, as before.
pub fn may_be_redriven(job: &DeliveryJob, stall_margin: chrono::Duration, now: chrono::DateTime<Utc>) -> bool {
    job.redrive > 0 || job.queued_at.is_some_and(|q| now - q >= stall_margin)
}

/// The checks before an attempt, none of which reads the event: the
/// receive limit, an ordered saga's place, the subscription, a start the
/// job booked earlier, and the breaker (which defers the job until its
/// probe, or until the saga's last attempt is due, when it ends the job as
/// a `breaker_open` refusal: [`crate::retry::hold_for_breaker`]).
async fn gate(h: &Hookline, r: &ReceivedJob) -> Result<Gated, StoreError> {
    if r.receive_count >= JOB_RECEIVE_LIMIT {
        let error = format!(
            "delivery job received {} times without an attempt being recorded (its worker crashed or timed out each time)",
            r.receive_count
        );
        return Ok(Gated::Done(Prepared::Record(refused(&r.job, &error))));
    }
    // An ordered saga's job goes only while its saga is at this attempt; so
    // does a job that may have been re-driven meanwhile, and only if it is
    // the saga's latest (one read, for these jobs only: the healthy path of
    // an unordered subscription reads no saga).
    if r.job.lane.is_some() || may_be_redriven(&r.job, h.config.reconcile.stall_margin, Utc::now()) {
        let current = h.stores.sagas.get(&r.job.event_id, &r.job.saga_id).await?;
        let current_job = current.is_some_and(|s| {
            matches!(s.state.status, SagaStatus::Pending | SagaStatus::InProgress)
                && crate::saga::in_progress_attempt(&s.state) == r.job.attempt
                && s.redrives == r.job.redrive
        });
        if !current_job {
            return Ok(Gated::Done(Prepared::Stale));
        }
    }
    let job = &r.job;
    let store = h.stores.subscriptions.as_ref();
    let sub = match h.subscription_cache.get(store, &job.subscription_id).await? {
        Some(s) if s.is_routable() => Some(s),
        // Unknown, inactive or unverified here: this container's cache may
        // be behind the one that routed the event. Ask the store.
        _ => h.subscription_cache.confirm(store, &job.subscription_id).await?,
    };
    let sub = match sub {
        None => return Ok(Gated::Done(Prepared::Record(refused(job, "subscription no longer exists")))),
        Some(s) if !s.active => {
            return Ok(Gated::Done(Prepared::Record(refused_counted(h, &s, job, "subscription is inactive"))))
        }
        Some(s) if !s.verified => {
            return Ok(Gated::Done(Prepared::Record(refused_counted(h, &s, job, "subscription is not verified"))))
        }
        Some(s) => s,
    };
    let now = Utc::now();
    let interval = sub.start_interval();
    // A start booked earlier: wait for it (no read, no write).
    if let (Some(at), Some(i)) = (job.start_at, interval) {
        let early = chrono::Duration::milliseconds(crate::subscription::rate_tolerance(i));
        if let Ok(left) = (at - now - early).to_std() {
            if !left.is_zero() {
                return Ok(Gated::Done(Prepared::Defer {
                    reason: DeferReason::BookedStart,
                    delay: (at - now).to_std().unwrap_or(left),
                    resend: None,
                }));
            }
        }
    }
    // The breaker: an open one defers the job (no attempt counted), until
    // its probe or the saga's last scheduled attempt, whichever comes
    // first; past that, the job ends. If the health store cannot be read,
    // the attempt goes ahead: a breaker that cannot be read must not stop
    // deliveries.
    match breaker::admit(h, &sub.id).await {
        Ok(Gate::Wait(probe_in)) => {
            let deadline = job.first_due.map(|f| sub.retry_policy.last_attempt_due(f));
            return Ok(Gated::Done(match retry::hold_for_breaker(probe_in, deadline, now) {
                BreakerHold::Wait(delay) => Prepared::Defer {
                    reason: DeferReason::BreakerOpen,
                    delay,
                    // Whatever it booked is lost to the wait: it books again.
                    resend: (job.start_at.is_some() || job.slot_waits > 0).then(|| DeliveryJob {
                        start_at: None,
                        slot_waits: 0,
                        ..job.clone()
                    }),
                },
                BreakerHold::PastDeadline => {
                    let due = deadline.map(|d| d.to_rfc3339()).unwrap_or_default();
                    let error = format!(
                        "{}: not attempted; the subscription's circuit breaker was still open when the \
                         saga's last scheduled attempt was due ({due})",
                        retry::BREAKER_OPEN
                    );
                    h.metrics.deliveries_rejected.fetch_add(1, Relaxed);
                    tracing::warn!(saga_id = %job.saga_id, subscription_id = %sub.id, attempt = job.attempt, due, "breaker open past the retry schedule: the job ends");
                    Prepared::Record(refused_counted(h, &sub, job, &error))
                }
            }));
        }
        Ok(Gate::Attempt | Gate::Probe) => {}
        Err(e) => tracing::warn!(subscription_id = %sub.id, error = %e, "breaker unreadable; attempting anyway"),
    }
    let book = interval.filter(|_| job.start_at.is_none());
    Ok(Gated::Go { sub, book })
}

/// The attempt record of a job refused without a request.
fn refused(job: &DeliveryJob, error: &str) -> Attempt {
    Attempt {
        saga_id: job.saga_id.clone(),
        attempt: job.attempt,
        event_id: job.event_id.clone(),
        subscription_id: job.subscription_id.clone(),
        status_code: None,
        error: Some(error.to_string()),
        latency_ms: 0,
        at: Utc::now(),
        result: AttemptResult::Rejected { error: error.to_string() },
        lane: job.lane.clone(),
        response_excerpt: None,
    }
}

/// [`refused`], counted in the delivery statistics of `sub` (a failed
/// attempt that ends its saga, without a latency).
fn refused_counted(h: &Hookline, sub: &Subscription, job: &DeliveryJob, error: &str) -> Attempt {
    let a = refused(job, error);
    super::stats::observe(h, sub, job.attempt, &a.result, None, None);
    a
}

/// The event a saga delivers: the stored one, or, once it has expired, the
/// snapshot kept by the dead letter a requeued saga came from.
pub async fn event_of(h: &Hookline, event_id: &EventId, saga_id: &SagaId) -> Result<Option<EventRecord>, StoreError> {
    if let Some(e) = h.stores.events.get(event_id).await? {
        return Ok(Some(e));
    }
    let Some(saga) = h.stores.sagas.get(event_id, saga_id).await? else { return Ok(None) };
    let Some(dead) =
        saga.origin.filter(|o| o.kind == crate::saga::OriginKind::Requeue).and_then(|o| o.previous_saga_id)
    else {
        return Ok(None);
    };
    Ok(h.stores.dead_letters.get(&ids::dead_letter_id(&dead)).await?.and_then(|d| d.event))
}

/// Makes one attempt and describes it; does not store it. Every log line
/// of the attempt carries the saga, event and subscription ids.
async fn attempt(h: &Hookline, job: &DeliveryJob, sub: Subscription) -> Result<Prepared, StoreError> {
    use tracing::Instrument;
    let span = tracing::info_span!(
        "attempt",
        saga_id = %job.saga_id,
        event_id = %job.event_id,
        subscription_id = %job.subscription_id,
        attempt = job.attempt,
        trace_id = tracing::field::Empty,
        producer = tracing::field::Empty,
    );
    attempt_in_span(h, job, sub).instrument(span).await
}

async fn attempt_in_span(h: &Hookline, job: &DeliveryJob, sub: Subscription) -> Result<Prepared, StoreError> {
    // Explicit limits hold across every worker: a slot of max_in_flight,
    // leased for as long as an attempt can take (the start under rate_limit
    // is booked already). Subscriptions without one skip this (no store
    // write).
    let lease = match sub.max_in_flight {
        None => None,
        Some(max) => {
            let lease_for = h.config.http.total_timeout + Duration::from_secs(5);
            match h.stores.limits.admit(&sub.id, Some(max), None, lease_for).await? {
                Admission::Granted(l) => Some(l),
                Admission::Wait(hint) => {
                    // Longer each time, and jittered: the jobs of a full
                    // subscription come back spread out, not together.
                    let delay = crate::bounds::slot_wait(hint, job.slot_waits, lease_for, rand::random());
                    return Ok(Prepared::Defer {
                        reason: DeferReason::MaxInFlight,
                        delay,
                        resend: Some(DeliveryJob { slot_waits: job.slot_waits.saturating_add(1), ..job.clone() }),
                    });
                }
            }
        }
    };
    let event = match event_of(h, &job.event_id, &job.saga_id).await {
        Ok(e) => e,
        Err(e) => {
            release(h, lease.as_ref()).await;
            return Err(e);
        }
    };
    if let Some(t) = event.as_ref().and_then(|e| e.trace_id.as_deref()) {
        tracing::Span::current().record("trace_id", t);
    }
    let Some(event) = event else {
        release(h, lease.as_ref()).await;
        return Ok(Prepared::Record(refused_counted(h, &sub, job, "event is no longer stored")));
    };
    if let Some(p) = event.producer.as_deref() {
        tracing::Span::current().record("producer", tracing::field::display(crate::envelope::LogSafe(p)));
    }
    if sub.is_pull_only() {
        // A replay or requeue of a pull-only subscription: nowhere to push.
        release(h, lease.as_ref()).await;
        let why = "pull-only subscription: nothing is pushed (its subscriber pulls GET /v1/subscriptions/{id}/events)";
        return Ok(Prepared::Record(refused_counted(h, &sub, job, why)));
    }
    let destination = match crate::destination::parse(&sub.callback_url) {
        Ok(d) => d,
        Err(e) => {
            release(h, lease.as_ref()).await;
            return Ok(Prepared::Record(refused_counted(h, &sub, job, &format!("callback_url: {e}"))));
        }
    };
    let (headers, body) = request(&sub, &event, job);
    let headers: Vec<(&str, String)> = headers.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let group = event.partition_key.as_deref().unwrap_or(sub.id.as_str());
    let dedup = format!("{}#{}", job.saga_id, job.attempt);
    let msg = crate::transport::Outbound { headers: &headers, body: &body, group, dedup: &dedup };
    let res = h.transport.send(&destination, msg).await;
    release(h, lease.as_ref()).await;
    if let Some(PostError::Local(why)) = &res.error {
        return Ok(Prepared::local_fault(why.clone()));
    }
    let latency_ms = res.latency.as_millis() as u64;
    h.metrics.observe_latency(latency_ms);
    let result = classify(&res);
    let counter = match &result {
        AttemptResult::Delivered => &h.metrics.deliveries_delivered,
        AttemptResult::Failed { .. } => &h.metrics.deliveries_failed,
        AttemptResult::Gone | AttemptResult::Rejected { .. } => &h.metrics.deliveries_rejected,
    };
    counter.fetch_add(1, Relaxed);
    let by_producer = match &result {
        AttemptResult::Delivered => ProducerOutcome::Delivered,
        AttemptResult::Failed { .. } => ProducerOutcome::Failed,
        AttemptResult::Gone | AttemptResult::Rejected { .. } => ProducerOutcome::Rejected,
    };
    h.metrics.by_producer.count(event.producer.as_deref(), by_producer);
    let error = match &result {
        AttemptResult::Delivered => None,
        AttemptResult::Failed { error, .. } | AttemptResult::Rejected { error } => Some(error.clone()),
        AttemptResult::Gone => Some("HTTP 410 Gone".into()),
    };
    tracing::info!(status = res.status, latency_ms, error = error.as_deref().unwrap_or(""), "delivery attempt");
    let outcome = match &result {
        AttemptResult::Delivered => Outcome::Success,
        AttemptResult::Failed { error, .. } => Outcome::of(res.status, Some(error)),
        AttemptResult::Gone | AttemptResult::Rejected { .. } => Outcome::Other(error.clone().unwrap_or_default()),
    };
    super::stats::observe(h, &sub, job.attempt, &result, res.status, Some(latency_ms));
    if let Some(health) = breaker::observe(h, &sub.id, &outcome, latency_ms).await {
        if outcome != Outcome::Success {
            super::failing::after_attempt(h, &sub.id, &health).await;
        }
    }
    let attempt = Attempt {
        saga_id: job.saga_id.clone(),
        attempt: job.attempt,
        event_id: job.event_id.clone(),
        subscription_id: job.subscription_id.clone(),
        status_code: res.status,
        error,
        latency_ms,
        at: Utc::now(),
        response_excerpt: match result {
            AttemptResult::Delivered => None,
            _ => crate::attempt::excerpt(&res.body),
        },
        result,
        lane: job.lane.clone(),
    };
    Ok(match attempt.completes_its_saga(&sub) {
        true => Prepared::Complete(attempt),
        false => Prepared::Record(attempt),
    })
}

/// Gives a `max_in_flight` slot back, if one was leased.
async fn release(h: &Hookline, lease: Option<&crate::ports::Lease>) {
    if let Some(l) = lease {
        if let Err(e) = h.stores.limits.release(l).await {
            tracing::warn!(error = %e, "releasing a max_in_flight slot failed; its lease runs out by itself");
        }
    }
}

/// The signed request for one attempt: headers and body.
pub fn request(sub: &Subscription, event: &EventRecord, job: &DeliveryJob) -> (Vec<(String, String)>, Vec<u8>) {
    let body = crate::payload::render(sub, event);
    let now = Utc::now();
    let ts = now.timestamp();
    let signature = signing::signature_header(sub.signing_secrets(now), job.webhook_id.as_str(), ts, &body);
    let mut headers: Vec<(String, String)> = [
        ("content-type", "application/json".to_string()),
        ("webhook-id", job.webhook_id.to_string()),
        ("webhook-timestamp", ts.to_string()),
        ("webhook-signature", signature),
        ("hookline-event-type", event.event_type.clone()),
        ("hookline-attempt", job.attempt.to_string()),
    ]
    .into_iter()
    // Stale-event metadata: the partition and the event's number in it
    // (the same on every attempt), so a receiver can drop what is older
    // than what it has.
    .chain(
        event
            .partition_key
            .iter()
            .zip(event.partition_seq)
            .flat_map(|(k, n)| [("hookline-partition-key", k.clone()), ("hookline-sequence", n.to_string())]),
    )
    .chain(event.trace_id.iter().flat_map(|t| {
        [
            ("hookline-trace-id", t.clone()),
            ("traceparent", ids::traceparent(t, &format!("{}#{}", job.saga_id, job.attempt))),
        ]
    }))
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    headers.extend(sub.headers.iter().map(|(k, v)| (k.clone(), v.clone())));
    (headers, body)
}

/// Reads what a POST produced as the saga stage needs it.
pub fn classify(res: &PostResult) -> AttemptResult {
    match (&res.error, res.status) {
        (Some(PostError::ForbiddenAddress(why)), _) => {
            AttemptResult::Rejected { error: format!("callback address refused: {why}") }
        }
        (Some(PostError::Refused(why)), _) => AttemptResult::Rejected { error: format!("message refused: {why}") },
        (Some(PostError::InvalidUrl(why)), _) => {
            AttemptResult::Rejected { error: format!("callback URL invalid: {why}") }
        }
        (Some(e), _) => AttemptResult::Failed { error: e.to_string(), retry_after_ms: None },
        (None, Some(s)) if (200..300).contains(&s) => AttemptResult::Delivered,
        (None, Some(410)) => AttemptResult::Gone,
        (None, Some(s)) => AttemptResult::Failed {
            error: if (300..400).contains(&s) {
                format!("HTTP {s} (redirects are not followed)")
            } else {
                format!("HTTP {s}")
            },
            retry_after_ms: res.retry_after.map(|d| d.as_millis() as u64),
        },
        (None, None) => AttemptResult::Failed { error: "no response".into(), retry_after_ms: None },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> DeliveryJob {
        DeliveryJob::new(
            SagaId::new("sg_1"),
            EventId::new("evt_1"),
            SubscriptionId::new("sub_1"),
            crate::ids::WebhookId::new("msg_1"),
            2,
        )
    }

    #[test]
    fn a_job_is_checked_against_its_saga_once_it_could_have_been_redriven() {
        let margin = chrono::Duration::hours(1);
        let j = job();
        let queued = j.queued_at.expect("a new job carries when it was queued");
        assert!(!may_be_redriven(&j, margin, queued + chrono::Duration::minutes(59)), "younger than the margin");
        assert!(may_be_redriven(&j, margin, queued + margin), "as old as the margin");
        let redriven = DeliveryJob { redrive: 1, ..j.clone() };
        assert!(may_be_redriven(&redriven, margin, queued), "a re-driven job always is");
        let old_format = DeliveryJob { queued_at: None, ..j };
        assert!(!may_be_redriven(&old_format, margin, queued + margin * 10), "jobs queued before: as before");
    }
}
