//! Dispatch: how `hookline serve` runs delivery jobs so that no subscriber
//! holds another. Each job runs in its own slot from the moment a slot is
//! free, and its attempt is stored with whatever else finished meanwhile;
//! nothing waits for a batch. A subscription has at most its
//! `max_in_flight` requests open; beyond that its jobs wait in memory (up to
//! as many again, each taking the slot its subscription's previous request
//! frees), and beyond that they are deferred (sent again later, no attempt
//! counted) and the rest of its backlog is set aside in the queue: 100 ms,
//! then twice as long each time none of its requests ended meanwhile, up to
//! the delivery timeout, so a hung endpoint's backlog is not received over
//! and over while healthy subscriptions wait.
//!
//! On Lambda each invocation delivers its batch with
//! [`crate::stage::deliver::deliver_received`]; SQS fair queues (the
//! subscription as `MessageGroupId`) keep one subscription's backlog from
//! delaying the others there.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use crate::context::Hookline;
use crate::error::StoreError;
use crate::ids::SubscriptionId;
use crate::message::DeliveryJob;
use crate::ports::Received;
use crate::stage::deliver::{self, DeferReason, Prepared, ReceivedJob};

/// How many jobs of one subscription may wait in memory behind its open
/// requests, as a multiple of its `max_in_flight`.
const HELD_PER_SLOT: usize = 1;
/// At most this many times its `max_in_flight` of a fast subscription's jobs
/// wait in memory.
const MAX_HELD_PER_SLOT: usize = 64;
/// The first (shortest) time a subscription at its limit is set aside.
const MIN_PAUSE: Duration = Duration::from_millis(100);
/// At most this many finished jobs are stored in one write.
const SETTLE_BATCH: usize = 256;

/// The dispatcher's limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DispatchLimits {
    /// Requests open at once over all subscriptions.
    pub slots: usize,
    /// Requests open at once to one subscription.
    pub max_in_flight: usize,
    /// The longest a subscription at its limit is set aside (the delivery
    /// timeout: by then one of its requests has ended).
    pub max_pause: Duration,
}

/// One received delivery job.
struct Taken {
    received: Received,
    job: ReceivedJob,
}

/// A job whose attempt is made, waiting to be stored.
struct Finished {
    taken: Taken,
    prepared: Result<Prepared, StoreError>,
}

/// What the dispatcher knows about one subscription with work in hand.
struct Lane {
    /// Its `max_in_flight` (or the default) as last read.
    cap: usize,
    /// Time between two starts under its `rate_limit`, if it has one.
    interval: Option<Duration>,
    /// The earliest the next request may start under the rate limit.
    next_start: Instant,
    /// When each open request started.
    open: Vec<Instant>,
    /// Jobs waiting for one of its requests to end.
    held: VecDeque<Taken>,
    /// How long its requests have been taking (a moving average), once one
    /// ended.
    latency: Option<Duration>,
    /// Times its backlog was set aside since one of its requests last
    /// ended: each pause is twice the last, so a hung endpoint's backlog
    /// is set aside for longer and longer (up to the delivery timeout)
    /// instead of every 100 ms.
    pauses: u32,
}

impl Lane {
    fn new(now: Instant) -> Lane {
        Lane {
            cap: 1,
            interval: None,
            next_start: now,
            open: Vec::new(),
            held: VecDeque::new(),
            latency: None,
            pauses: 0,
        }
    }

    /// How many of its jobs may wait in memory: as many as its
    /// `max_in_flight` while its requests are slow or unknown; more for a
    /// fast endpoint, as many as it gets through within a quarter of the
    /// jobs' lease (`lease`), so none waits past its lease; at most
    /// [`MAX_HELD_PER_SLOT`] times its `max_in_flight`.
    fn held_limit(&self, lease: Duration) -> usize {
        let rounds = match self.latency {
            Some(l) if !l.is_zero() => ((lease / 4).as_secs_f64() / l.as_secs_f64()) as usize,
            _ => HELD_PER_SLOT,
        };
        self.cap * rounds.clamp(HELD_PER_SLOT, MAX_HELD_PER_SLOT)
    }

    /// How long to set its backlog aside now, and count the pause.
    fn next_pause(&mut self, max: Duration) -> Duration {
        let d = MIN_PAUSE.saturating_mul(1 << self.pauses.min(16)).min(max.max(MIN_PAUSE));
        self.pauses += 1;
        d
    }

    /// Books a start now if the rate limit allows one; else says how long
    /// until it does.
    fn rate_allows(&mut self, now: Instant) -> Result<(), Duration> {
        match self.interval {
            None => Ok(()),
            Some(_) if now < self.next_start => Err(self.next_start - now),
            Some(i) => {
                self.next_start = self.next_start.max(now) + i;
                Ok(())
            }
        }
    }
}

/// Runs delivery jobs as slots free up; see the module docs.
#[derive(Clone)]
pub struct Dispatcher {
    h: Arc<Hookline>,
    limits: DispatchLimits,
    slots: Arc<Semaphore>,
    lanes: Arc<Mutex<HashMap<SubscriptionId, Lane>>>,
    finished: mpsc::UnboundedSender<Finished>,
}

impl Dispatcher {
    /// A dispatcher over `h`'s deliveries queue, and the task that stores
    /// what its jobs come to (run it until the dispatcher and every job in
    /// flight are gone; it then returns).
    pub fn new(h: Arc<Hookline>, limits: DispatchLimits) -> (Self, impl std::future::Future<Output = ()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let limits =
            DispatchLimits { slots: limits.slots.max(1), max_in_flight: limits.max_in_flight.max(1), ..limits };
        let d = Dispatcher {
            h: h.clone(),
            limits,
            slots: Arc::new(Semaphore::new(limits.slots)),
            lanes: Arc::new(Mutex::new(HashMap::new())),
            finished: tx,
        };
        (d, settle_loop(h, rx))
    }

    /// Waits for at least one free slot and returns how many are free now,
    /// at most `max`: how many jobs to receive next.
    pub async fn free_slots(&self, max: usize) -> usize {
        let first = self.slots.acquire().await.expect("never closed");
        drop(first);
        self.slots.available_permits().clamp(1, max.max(1))
    }

    /// The limits of a subscription as the cache knows it: its own, else
    /// the defaults (a subscription the cache does not know yet gets the
    /// defaults; its job is then checked in full by the delivery).
    async fn limits_of(&self, id: &SubscriptionId) -> (usize, Option<Duration>) {
        let sub = self.h.subscription_cache.get(self.h.stores.subscriptions.as_ref(), id).await.ok().flatten();
        let cap = sub.as_ref().and_then(|s| s.max_in_flight).map_or(self.limits.max_in_flight, |n| n as usize);
        let interval = sub.and_then(|s| s.start_interval());
        (cap.max(1), interval)
    }

    /// Takes received messages: starts each job whose subscription has room,
    /// holds or defers the others. An unreadable message is logged and left
    /// to reappear until the queue dead-letters it.
    pub async fn take(&self, messages: Vec<Received>) {
        let mut taken = Vec::with_capacity(messages.len());
        let mut limits: HashMap<SubscriptionId, (usize, Option<Duration>)> = HashMap::new();
        for received in messages {
            let job: DeliveryJob = match serde_json::from_str(&received.body) {
                Ok(j) => j,
                Err(e) => {
                    tracing::error!(queue = "deliveries", error = %e, "unreadable message; left for the dead-letter queue");
                    continue;
                }
            };
            if !limits.contains_key(&job.subscription_id) {
                let l = self.limits_of(&job.subscription_id).await;
                limits.insert(job.subscription_id.clone(), l);
            }
            taken.push(Taken { job: ReceivedJob { job, receive_count: received.receive_count }, received });
        }
        let mut pause: HashMap<SubscriptionId, Duration> = HashMap::new();
        let mut overflow = Vec::new();
        {
            let now = Instant::now();
            let mut lanes = self.lanes.lock().expect("lanes lock");
            for taken in taken {
                let sub = taken.job.job.subscription_id.clone();
                let lane = lanes.entry(sub.clone()).or_insert_with(|| Lane::new(now));
                (lane.cap, lane.interval) = limits[&sub];
                if lane.open.len() >= lane.cap || !lane.held.is_empty() {
                    if lane.held.len() < lane.held_limit(self.h.config.delivery_visibility) {
                        lane.held.push_back(taken);
                    } else {
                        // More than it can take: set its backlog aside
                        // (one statement, not a receive and a re-send per
                        // job), longer each time none of its requests ended.
                        let delay = match pause.get(&sub) {
                            Some(d) => *d,
                            None => lane.next_pause(self.limits.max_pause),
                        };
                        overflow.push((taken, delay, DeferReason::MaxInFlight));
                        pause.insert(sub, delay);
                    }
                    continue;
                }
                if let Err(wait) = lane.rate_allows(now) {
                    // Spread what waits for the rate limit over the coming
                    // intervals, and keep the rest of its backlog out of the
                    // way until then.
                    let interval = lane.interval.unwrap_or(MIN_PAUSE);
                    let ahead = pause.get(&sub).map_or(wait, |d| *d + interval);
                    overflow.push((taken, ahead, DeferReason::RateLimit));
                    pause.insert(sub, ahead);
                    continue;
                }
                match self.slots.clone().try_acquire_owned() {
                    Ok(permit) => {
                        lane.open.push(now);
                        self.start(taken, permit);
                    }
                    // More jobs were received than slots were free (held
                    // jobs started meanwhile): back to the queue shortly.
                    Err(_) => overflow.push((taken, MIN_PAUSE, DeferReason::NoSlotFree)),
                }
            }
        }
        for (taken, delay, reason) in overflow {
            let prepared = Ok(Prepared::Defer { reason, delay, resend: None });
            let _ = self.finished.send(Finished { taken, prepared });
        }
        for (sub, delay) in pause {
            match self.h.stores.deliveries.raw().pause_group(sub.as_str(), delay).await {
                Ok(n) if n > 0 => {
                    tracing::info!(subscription_id = %sub, paused = n, delay_ms = delay.as_millis() as u64, "subscription at its limit: its queued jobs set aside")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(subscription_id = %sub, error = %e, "pausing a subscription's jobs failed"),
            }
        }
    }

    /// Runs one job in `permit`'s slot; when it ends, the slot goes to the
    /// next job its subscription holds (rate permitting), or back to
    /// everyone.
    fn start(&self, taken: Taken, permit: OwnedSemaphorePermit) {
        let d = self.clone();
        tokio::spawn(async move {
            let mut taken = taken;
            loop {
                let prepared = deliver::prepare(&d.h, &taken.job).await;
                let sub = taken.job.job.subscription_id.clone();
                if let Ok(Prepared::Defer { delay, reason, .. }) = &prepared {
                    // Its breaker is open: its queued jobs wait as long.
                    if reason.whole_subscription() {
                        if let Err(e) = d.h.stores.deliveries.raw().pause_group(sub.as_str(), *delay).await {
                            tracing::warn!(subscription_id = %sub, error = %e, "pausing a subscription's jobs failed");
                        }
                    }
                }
                let _ = d.finished.send(Finished { taken, prepared });
                let mut lanes = d.lanes.lock().expect("lanes lock");
                let Some(lane) = lanes.get_mut(&sub) else { break };
                // The oldest request ended (requests of one lane are
                // interchangeable for the limit).
                if let Some(i) = lane.open.iter().enumerate().min_by_key(|(_, t)| **t).map(|(i, _)| i) {
                    let took = lane.open.swap_remove(i).elapsed();
                    lane.latency = Some(lane.latency.map_or(took, |l| (l * 7 + took) / 8));
                }
                lane.pauses = 0;
                let now = Instant::now();
                let next = if lane.open.len() < lane.cap { lane.held.pop_front() } else { None };
                match next {
                    Some(next) => match lane.rate_allows(now) {
                        Ok(()) => {
                            lane.open.push(now);
                            taken = next;
                        }
                        Err(wait) => {
                            // Nothing of this lane may start for a while:
                            // its held jobs go back to the queue, spread
                            // over the coming intervals (none stays held
                            // with no request open to start it).
                            let interval = lane.interval.unwrap_or(MIN_PAUSE);
                            let waiting: Vec<Taken> = std::iter::once(next).chain(lane.held.drain(..)).collect();
                            if lane.open.is_empty() {
                                lanes.remove(&sub);
                            }
                            drop(lanes);
                            for (k, t) in waiting.into_iter().enumerate() {
                                let prepared = Ok(Prepared::Defer {
                                    reason: DeferReason::RateLimit,
                                    delay: wait + interval * k as u32,
                                    resend: None,
                                });
                                let _ = d.finished.send(Finished { taken: t, prepared });
                            }
                            break;
                        }
                    },
                    None => {
                        if lane.open.is_empty() && lane.held.is_empty() {
                            lanes.remove(&sub);
                        }
                        break;
                    }
                }
            }
            drop(permit);
        });
    }
}

/// Stores finished jobs in batches (whatever finished since the last
/// write) and deletes the messages that are done.
async fn settle_loop(h: Arc<Hookline>, mut rx: mpsc::UnboundedReceiver<Finished>) {
    let mut batch = Vec::with_capacity(SETTLE_BATCH);
    while rx.recv_many(&mut batch, SETTLE_BATCH).await > 0 {
        let (taken, prepared): (Vec<Taken>, Vec<_>) = batch.drain(..).map(|f| (f.taken, f.prepared)).unzip();
        let jobs: Vec<ReceivedJob> = taken.iter().map(|t| t.job.clone()).collect();
        let done = deliver::settle(&h, &jobs, prepared).await;
        let receipts: Vec<String> =
            taken.into_iter().zip(done).filter(|(_, d)| *d).map(|(t, _)| t.received.receipt).collect();
        if receipts.is_empty() {
            continue;
        }
        // Off the loop: the delete rides in a later commit (a lazy write on
        // SQLite), and the next batch need not wait for it.
        h.stores.deliveries.raw().clone().delete_detached(receipts);
    }
}
