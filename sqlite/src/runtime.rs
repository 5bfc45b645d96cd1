//! The loops that run the pipeline in one process (`hookline serve`): one
//! per outbox stream (events → route, sagas → start, attempts → saga step)
//! and per queue (retry timers, requeues, delivery jobs), each calling the
//! same stage function a Lambda handler calls, and the background loops
//! (retention purge, health windows, reconciler, re-verification at
//! start-up). An outbox stream is read as a stream mapping reads: a batch
//! that keeps failing is retried, halved, and its failing row given up to
//! the reconciler.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use shared::context::Hookline;
use shared::error::StoreError;
use shared::ports::{JobQueue, Received};
use shared::queue::{self, Delivered};
use shared::stage::dispatch::{DispatchLimits, Dispatcher};
use shared::stage::reconcile::{self, ReconcileLimits};
use shared::stage::{breaker, requeue_queue, route, saga, stats, verify};
use tokio::sync::watch;

use crate::purge::{PurgePolicy, Purger};
use crate::{pipeline, Backend, Outbox, SqliteQueue, Stream};

/// How hard the loops run: the knobs of `hookline serve` that are not
/// settings of the pipeline itself ([`shared::config`]).
#[derive(Debug, Clone, Copy)]
pub struct RuntimeLimits {
    /// Delivery requests open at once over all subscriptions.
    pub delivery_slots: usize,
    /// Delivery jobs held at once (received, waiting for a slot or a lane).
    pub max_in_flight: usize,
    /// Rows deleted per purge batch.
    pub purge_batch: usize,
    /// How often the retention purge runs.
    pub purge_interval: Duration,
    /// How often the reconciler runs.
    pub reconcile_interval: Duration,
}

/// The running loops; [`Runtime::stop`] ends them.
pub struct Runtime {
    stop_tx: watch::Sender<bool>,
    tasks: tokio::task::JoinSet<()>,
}

impl Runtime {
    /// Starts every loop of the pipeline over `backend`, with the stages'
    /// context `h` (built on `backend.stores`).
    pub fn start(backend: &Backend, h: Arc<Hookline>, limits: RuntimeLimits) -> Runtime {
        let (stop_tx, stop) = watch::channel(false);
        let mut tasks = tokio::task::JoinSet::new();
        let (retention, dead_letter_retention) = (h.config.retention, h.config.dead_letter_retention);
        let (o, hk) = (backend.outbox.clone(), h.clone());
        tasks.spawn(pipeline(outbox_loop(
            "route",
            move |after, max| {
                let o = o.clone();
                async move { o.events(after, max).await }
            },
            move |events| {
                let hk = hk.clone();
                async move { route::route(&hk, &events).await.map(|_| ()) }
            },
            backend.outbox.clone(),
            Stream::Events,
            stop.clone(),
        )));
        let (o, hk) = (backend.outbox.clone(), h.clone());
        tasks.spawn(pipeline(outbox_loop(
            "saga.start",
            move |after, max| {
                let o = o.clone();
                async move { o.sagas(after, max).await }
            },
            move |sagas| {
                let hk = hk.clone();
                async move { saga::start(&hk, &sagas).await }
            },
            backend.outbox.clone(),
            Stream::Sagas,
            stop.clone(),
        )));
        let (o, hk) = (backend.outbox.clone(), h.clone());
        tasks.spawn(pipeline(outbox_loop(
            "saga.attempts",
            move |after, max| {
                let o = o.clone();
                async move { o.attempts(after, max).await }
            },
            move |attempts| {
                let hk = hk.clone();
                async move { saga::on_attempts(&hk, &attempts).await }
            },
            backend.outbox.clone(),
            Stream::Attempts,
            stop.clone(),
        )));
        let hk = h.clone();
        tasks.spawn(pipeline(queue_loop(
            "retries",
            backend.retries.clone(),
            64,
            Duration::from_secs(30),
            move |msgs| {
                let hk = hk.clone();
                async move { on_timers(&hk, msgs).await }
            },
            backend.db.watch(Stream::Control),
            stop.clone(),
        )));
        let hk = h.clone();
        tasks.spawn(pipeline(queue_loop(
            "requeue",
            backend.requeues.clone(),
            16,
            Duration::from_secs(30),
            move |msgs| {
                let hk = hk.clone();
                async move { on_requeues(&hk, msgs).await }
            },
            backend.db.watch(Stream::Control),
            stop.clone(),
        )));
        let dispatch_limits = DispatchLimits {
            slots: limits.delivery_slots.max(1),
            max_in_flight: limits.max_in_flight.max(1),
            max_pause: h.config.http.total_timeout,
        };
        tasks.spawn(pipeline(dispatch_loop(
            h.clone(),
            backend.deliveries.clone(),
            dispatch_limits,
            backend.db.watch(Stream::Deliveries),
            stop.clone(),
        )));
        // Background loops: each takes what it needs and `stop`.
        let purge_policy = PurgePolicy {
            dead_letter_retention,
            batch: limits.purge_batch.max(1),
            // An expired event kept for a saga in flight or an open dead letter
            // is looked at again within the retention, at most 10 minutes.
            rescan_every: retention.to_std().unwrap_or(Duration::MAX).min(Duration::from_secs(600)),
            // Behind when expired events wait longer than a few runs.
            max_lag: (limits.purge_interval * 3).max(Duration::from_secs(30)),
            audit_retention: h.config.audit_retention,
            stats_retention: retention,
        };
        tasks.spawn(pipeline(purge_loop(
            Purger::new(backend.db.clone(), purge_policy),
            h.clone(),
            limits.purge_interval,
            stop.clone(),
        )));
        tasks.spawn(health_loop(h.clone(), stop.clone()));
        tasks.spawn(stats_loop(h.clone(), stop.clone()));
        tasks.spawn(pipeline(reconcile_loop(h.clone(), h.config.reconcile, limits.reconcile_interval, stop.clone())));
        tasks.spawn(reverify_unverified(h.clone()));
        Runtime { stop_tx, tasks }
    }

    /// Stops taking work, and waits at most `grace` for what is in flight
    /// (a delivery being attempted, a batch being handled) to finish.
    pub async fn stop(mut self, grace: Duration) {
        let _ = self.stop_tx.send(true);
        let _ = tokio::time::timeout(grace, async { while self.tasks.join_next().await.is_some() {} }).await;
    }
}

/// Merges the attempt counts of each subscription's health window into the
/// store every [`breaker::FLUSH_EVERY`], and all of them when stopping.
async fn health_loop(h: Arc<Hookline>, mut stop: watch::Receiver<bool>) {
    while wait_or_stop(&mut stop, breaker::FLUSH_EVERY).await {
        breaker::flush_windows(&h, false).await;
    }
    breaker::flush_windows(&h, true).await;
}

/// How often `hookline serve` looks for closed minutes of delivery
/// statistics to store ([`shared::stage::stats::flush`]): each series'
/// minute is still written once, a few seconds after it closed.
pub const STATS_TICK: Duration = Duration::from_secs(5);

/// Stores the delivery statistics of each minute once it closed, and
/// everything counted when stopping.
async fn stats_loop(h: Arc<Hookline>, mut stop: watch::Receiver<bool>) {
    while wait_or_stop(&mut stop, STATS_TICK).await {
        stats::flush(&h, false).await;
    }
    stats::flush(&h, true).await;
}

/// The reconciler ([`shared::stage::reconcile`]): every `every`, re-drives
/// given-up outbox rows and stalled sagas, bounded per run.
async fn reconcile_loop(h: Arc<Hookline>, limits: ReconcileLimits, every: Duration, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => {}
        }
        if *stop.borrow() {
            return;
        }
        // A failed step is logged by the run itself and retried at the next interval.
        reconcile::reconcile(&h, &limits).await;
    }
}

/// The retention purge ([`crate::purge`]): every `every`, deletes
/// what is past its retention in small batches through the writer, until
/// caught up. A debug line per batch; an info line per run that deleted
/// something.
async fn purge_loop(mut purger: Purger, h: Arc<Hookline>, every: Duration, mut stop: watch::Receiver<bool>) {
    while wait_or_stop(&mut stop, every).await {
        let started = std::time::Instant::now();
        let s = stop.clone();
        match purger.run(chrono::Utc::now(), &h.metrics, PURGE_PAUSE, || !*s.borrow()).await {
            Ok(p) if p.deleted() > 0 => tracing::info!(
                events = p.events,
                sagas = p.sagas,
                attempts = p.attempts,
                dead_letters = p.dead_letters,
                other = p.outbox + p.queue_messages,
                kept = p.held,
                ms = started.elapsed().as_millis() as u64,
                "purged rows past their retention"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "purge failed; retrying at the next interval"),
        }
    }
}

/// Pause between two purge batches, so other writes commit in between.
const PURGE_PAUSE: Duration = Duration::from_millis(5);

/// Sleeps `d`; false when asked to stop (at once).
async fn wait_or_stop(stop: &mut watch::Receiver<bool>, d: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = stop.changed() => {}
    }
    !*stop.borrow()
}

/// Waits for the next change on `changes`, at most `max`; false when stopping.
async fn wait(changes: &mut watch::Receiver<u64>, stop: &mut watch::Receiver<bool>, max: Duration) -> bool {
    tokio::select! {
        _ = changes.changed() => {}
        _ = stop.changed() => {}
        _ = tokio::time::sleep(max) => {}
    }
    !*stop.borrow()
}

const OUTBOX_BATCH: usize = 512;
const IDLE: Duration = Duration::from_secs(1);
const BACKOFF: Duration = Duration::from_millis(200);

/// Reads one outbox stream (`stream`) in order and hands each batch to a
/// stage function. Rows are acknowledged (deleted) after the stage succeeded, off
/// the critical path; a restart re-reads whatever was not acknowledged, and
/// the stages are idempotent.
async fn outbox_loop<T, R, RF, H, HF>(
    name: &'static str,
    read: R,
    handle: H,
    outbox: Outbox,
    stream: Stream,
    mut stop: watch::Receiver<bool>,
) where
    R: Fn(i64, usize) -> RF,
    RF: Future<Output = Result<Vec<(i64, T)>, StoreError>>,
    H: Fn(Vec<T>) -> HF,
    HF: Future<Output = Result<(), StoreError>>,
{
    let mut changes = outbox.0.watch(stream);
    let mut after = 0;
    // As a stream mapping does: a batch that keeps failing is retried
    // STREAM_MAX_RETRIES times, then halved, until the failing row is alone;
    // that row is given up (to the reconciler) and the stream goes on.
    let mut limit = OUTBOX_BATCH;
    let mut failures = 0;
    while !*stop.borrow() {
        changes.borrow_and_update();
        let rows = match read(after, limit).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, stage = name, "reading the outbox failed");
                tokio::time::sleep(BACKOFF).await;
                continue;
            }
        };
        if rows.is_empty() {
            wait(&mut changes, &mut stop, IDLE).await;
            continue;
        }
        let (seqs, records): (Vec<i64>, Vec<T>) = rows.into_iter().unzip();
        match handle(records).await {
            Ok(()) => {
                after = *seqs.last().expect("non-empty");
                (limit, failures) = (OUTBOX_BATCH, 0);
                if let Err(e) = outbox.ack(stream, seqs) {
                    tracing::warn!(error = %e, stage = name, "acknowledging the outbox failed; rows will be re-read after a restart");
                }
            }
            // The database was busy: not the batch's failure, so it does
            // not count towards giving rows up; back off and try again.
            Err(e) if e.is_throttled() => {
                tracing::warn!(error = %e, stage = name, "stage throttled; will retry");
                tokio::time::sleep(BACKOFF).await;
            }
            Err(e) => {
                failures += 1;
                tracing::error!(error = %e, stage = name, failures, "stage failed; will retry");
                if failures <= shared::bounds::STREAM_MAX_RETRIES {
                    tokio::time::sleep(BACKOFF).await;
                } else if seqs.len() > 1 {
                    (limit, failures) = (seqs.len() / 2, 0);
                } else {
                    match outbox.give_up(stream, seqs.clone()).await {
                        Ok(()) => {
                            tracing::error!(
                                stage = name,
                                seq = seqs[0],
                                "gave up on an outbox row; the reconciler re-drives it"
                            );
                            after = seqs[0];
                            (limit, failures) = (OUTBOX_BATCH, 0);
                        }
                        Err(e) => {
                            tracing::error!(error = %e, stage = name, "giving up on an outbox row failed; will retry")
                        }
                    }
                }
            }
        }
    }
}

/// How long to sleep before a queue may have something: until its next
/// message becomes visible, at most `IDLE`.
async fn until_next(queue: &SqliteQueue) -> Duration {
    match queue.next_visible_at().await {
        Ok(Some(at)) => {
            Duration::from_millis((at - chrono::Utc::now().timestamp_millis()).clamp(1, IDLE.as_millis() as i64) as u64)
        }
        _ => IDLE,
    }
}

/// Receives batches from one queue and hands them to `handle`, which
/// returns the receipts of the messages it finished (to delete). Others stay
/// and reappear after their visibility timeout, as on SQS. Stops taking
/// messages when asked; a batch in flight is finished first.
async fn queue_loop<H, HF>(
    name: &'static str,
    queue: SqliteQueue,
    batch: usize,
    visibility: Duration,
    handle: H,
    mut changes: watch::Receiver<u64>,
    mut stop: watch::Receiver<bool>,
) where
    H: Fn(Vec<Received>) -> HF,
    HF: Future<Output = Vec<String>>,
{
    while !*stop.borrow() {
        changes.borrow_and_update();
        let Some(msgs) = receive_or_wait(&queue, name, batch, visibility, &mut changes, &mut stop).await else {
            continue;
        };
        let done = handle(msgs).await;
        if let Err(e) = queue.delete(&done).await {
            tracing::error!(error = %e, queue = name, "deleting messages failed; they will be redelivered and deduplicated");
        }
    }
}

/// Up to `max` messages of `queue`; when it has none, waits until the next
/// becomes visible or something is sent (or a short back-off after a
/// failed receive) and answers `None`.
async fn receive_or_wait(
    queue: &SqliteQueue,
    name: &str,
    max: usize,
    visibility: Duration,
    changes: &mut watch::Receiver<u64>,
    stop: &mut watch::Receiver<bool>,
) -> Option<Vec<Received>> {
    match queue.receive(max, visibility).await {
        Ok(m) if !m.is_empty() => Some(m),
        Ok(_) => {
            let d = until_next(queue).await;
            wait(changes, stop, d).await;
            None
        }
        Err(e) => {
            tracing::error!(error = %e, queue = name, "receive failed");
            tokio::time::sleep(BACKOFF).await;
            None
        }
    }
}

/// The receipts of the messages the consumer layer says are done.
fn done_receipts(msgs: Vec<Received>, done: Vec<bool>) -> Vec<String> {
    msgs.into_iter().zip(done).filter(|(_, d)| *d).map(|(m, _)| m.receipt).collect()
}

/// Retry timers → next attempts ([`saga::handle_timer`]).
async fn on_timers(h: &Hookline, msgs: Vec<Received>) -> Vec<String> {
    let batch: Vec<Delivered> = msgs.iter().map(Delivered::from).collect();
    let done = queue::consume_each("retries", &batch, |timer, _| saga::handle_timer(h, timer)).await;
    done_receipts(msgs, done)
}

/// Receives delivery jobs whenever delivery slots are free and hands them
/// to the [`Dispatcher`]; on stop, takes no more and waits for the jobs in
/// hand to be attempted and stored.
async fn dispatch_loop(
    h: Arc<Hookline>,
    queue: SqliteQueue,
    limits: DispatchLimits,
    mut changes: watch::Receiver<u64>,
    mut stop: watch::Receiver<bool>,
) {
    let (dispatcher, settle) = Dispatcher::new(h.clone(), limits);
    let settled = tokio::spawn(pipeline(settle));
    while !*stop.borrow() {
        changes.borrow_and_update();
        let free = tokio::select! {
            n = dispatcher.free_slots(RECEIVE_MAX) => n,
            _ = stop.changed() => continue,
        };
        let visibility = h.config.delivery_visibility;
        let Some(msgs) = receive_or_wait(&queue, "deliveries", free, visibility, &mut changes, &mut stop).await else {
            continue;
        };
        dispatcher.take(msgs).await;
    }
    drop(dispatcher);
    let _ = settled.await;
}

/// The most delivery jobs received at once.
const RECEIVE_MAX: usize = 64;

/// Requeue and replay requests → new sagas.
async fn on_requeues(h: &Hookline, msgs: Vec<Received>) -> Vec<String> {
    let batch: Vec<Delivered> = msgs.iter().map(Delivered::from).collect();
    let done = queue::consume_each("requeue", &batch, |msg, receives| requeue_queue::handle(h, msg, receives)).await;
    done_receipts(msgs, done)
}

/// Subscriptions left unverified by a crash during their handshake get it
/// again at start-up.
async fn reverify_unverified(h: Arc<Hookline>) {
    let filter = shared::ports::SubscriptionFilter::All;
    let mut after = None;
    loop {
        let Ok(page) = h.stores.subscriptions.page(&filter, 1000, after.as_ref()).await else { return };
        for s in page.items.into_iter().filter(|s| s.active && !s.verified && s.verification_error.is_none()) {
            if let Err(e) = verify::verify(&h, &s.id).await {
                tracing::error!(subscription_id = %s.id, error = %e, "re-verification could not be stored");
            }
        }
        match page.next_after {
            Some(next) => after = Some(next),
            None => return,
        }
    }
}
