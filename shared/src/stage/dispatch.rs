//! Dispatch: how `hookline serve` runs delivery jobs so that no subscriber
//! holds another. Each job runs in its own slot from the moment a slot is
//! free, and its attempt is stored with whatever else finished meanwhile;
//! nothing waits for a batch. A subscription has at most its
//! `max_in_flight` requests open; beyond that its jobs wait in memory (up to
//! as many again, each taking the slot its subscription's previous request
//! frees), and beyond that they are deferred (sent again later, no attempt
//! counted) and the rest of its backlog is paused in the queue for as long
//! as its requests are taking, so a hung endpoint's backlog is not received
//! over and over while healthy subscriptions wait.
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
use crate::job::DeliveryJob;
use crate::ports::Received;
use crate::stage::deliver::{self, Prepared, ReceivedJob};

/// How many jobs of one subscription may wait in memory behind its open
/// requests, as a multiple of its `max_in_flight`.
const HELD_PER_SLOT: usize = 1;
/// The shortest and longest time a subscription at its limit is set aside.
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
#[derive(Default)]
struct Lane {
    /// When each open request started.
    open: Vec<Instant>,
    /// Jobs waiting for one of its requests to end.
    held: VecDeque<Taken>,
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

    /// Requests open over all subscriptions (for tests and metrics).
    pub fn open(&self) -> usize {
        self.limits.slots - self.slots.available_permits()
    }

    /// Takes received messages: starts each job whose subscription has room,
    /// holds or defers the others. An unreadable message is logged and left
    /// to reappear until the queue dead-letters it.
    pub async fn take(&self, messages: Vec<Received>) {
        let mut pause = Vec::new();
        let mut overflow = Vec::new();
        for received in messages {
            let job: DeliveryJob = match serde_json::from_str(&received.body) {
                Ok(j) => j,
                Err(e) => {
                    tracing::error!(queue = "deliveries", error = %e, "unreadable message; left for the dead-letter queue");
                    continue;
                }
            };
            let taken = Taken { job: ReceivedJob { job, receive_count: received.receive_count }, received };
            let sub = taken.job.job.subscription_id.clone();
            let mut lanes = self.lanes.lock().expect("lanes lock");
            let lane = lanes.entry(sub.clone()).or_default();
            if lane.open.len() < self.limits.max_in_flight {
                match self.slots.clone().try_acquire_owned() {
                    Ok(permit) => {
                        lane.open.push(Instant::now());
                        drop(lanes);
                        self.start(taken, permit);
                        continue;
                    }
                    // Every slot is taken (more jobs were received than
                    // slots were free): wait with the lane's held jobs if
                    // it has requests open, else go back to the queue.
                    Err(_) if !lane.open.is_empty() && lane.held.len() < self.held_limit() => {
                        lane.held.push_back(taken)
                    }
                    Err(_) => overflow.push((taken, MIN_PAUSE, "no delivery slot free")),
                }
            } else if lane.held.len() < self.held_limit() {
                lane.held.push_back(taken);
            } else {
                // The subscription's requests are taking long: set its
                // backlog aside for about as long as they have been open.
                let oldest = lane.open.iter().min().map_or(Duration::ZERO, |t| t.elapsed());
                let delay = oldest.clamp(MIN_PAUSE, self.limits.max_pause.max(MIN_PAUSE));
                overflow.push((taken, delay, "subscription at its max_in_flight"));
                if !pause.iter().any(|(s, _)| *s == sub) {
                    pause.push((sub, delay));
                }
            }
        }
        for (taken, delay, reason) in overflow {
            let prepared = Ok(Prepared::Defer { reason: reason.to_string(), delay });
            let _ = self.finished.send(Finished { taken, prepared });
        }
        for (sub, delay) in pause {
            match self.h.stores.deliveries.raw().pause_group(sub.as_str(), delay).await {
                Ok(n) if n > 0 => {
                    tracing::info!(subscription_id = %sub, paused = n, delay_ms = delay.as_millis() as u64, "subscription at its max_in_flight: its queued jobs set aside")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(subscription_id = %sub, error = %e, "pausing a subscription's jobs failed"),
            }
        }
    }

    fn held_limit(&self) -> usize {
        self.limits.max_in_flight * HELD_PER_SLOT
    }

    /// Runs one job in `permit`'s slot; when it ends, the slot goes to the
    /// next job its subscription holds, or back to everyone.
    fn start(&self, taken: Taken, permit: OwnedSemaphorePermit) {
        let d = self.clone();
        tokio::spawn(async move {
            let mut taken = taken;
            loop {
                let prepared = deliver::prepare(&d.h, &taken.job).await;
                let sub = taken.job.job.subscription_id.clone();
                let _ = d.finished.send(Finished { taken, prepared });
                let mut lanes = d.lanes.lock().expect("lanes lock");
                let Some(lane) = lanes.get_mut(&sub) else { break };
                // The oldest request ended (requests of one lane are
                // interchangeable for the limit).
                if let Some(i) = lane.open.iter().enumerate().min_by_key(|(_, t)| **t).map(|(i, _)| i) {
                    lane.open.swap_remove(i);
                }
                match lane.held.pop_front() {
                    Some(next) if lane.open.len() < d.limits.max_in_flight => {
                        lane.open.push(Instant::now());
                        taken = next;
                    }
                    Some(next) => {
                        lane.held.push_front(next);
                        break;
                    }
                    None => {
                        if lane.open.is_empty() {
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
        if let Err(e) = h.stores.deliveries.raw().delete(&receipts).await {
            tracing::error!(error = %e, queue = "deliveries", "deleting messages failed; they will be redelivered and deduplicated");
        }
    }
}
