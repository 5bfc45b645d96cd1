//! The bulk-job stage: starts a job ([`start`]) and does its pages
//! ([`run`], on a [`JobStep`] message of the requeue queue), plan → act →
//! commit as [`crate::bulk`] describes. Every write is conditional or
//! idempotent, so a worker may die anywhere: its message is received again
//! and the job goes on from its record, counting each item once.

use std::time::{Duration, Instant};

use chrono::Utc;

use super::requeue::{self, Audit, RequeueError};
use crate::bounds::{all_bounded, JOB_RECEIVE_LIMIT, MAX_STORE_IN_FLIGHT};
use crate::bulk::{
    counts, slots_key, ItemOutcome, Job, JobSpec, JobState, JobStep, PagePlan, ReplayFilter, Slot, Step, TenantSlots,
};
use crate::context::Hookline;
use crate::dead_letter::{DeadLetterQuery, DeadLetterState};
use crate::envelope::LogSafe;
use crate::error::StoreError;
use crate::event_search::{EventQuery, Order};
use crate::ids::{DeadLetterId, EventId};
use crate::message::RequeueMessage;

/// How long one message keeps doing pages before it hands the job on to a
/// new message: well inside the requeue queue's visibility timeout (and a
/// Lambda's timeout), so no other worker takes the same page meanwhile.
pub const MESSAGE_BUDGET: Duration = Duration::from_secs(2);

/// How long a slot taken for a job that is not stored (yet) is kept: the
/// job is created right after its slot is taken, so one missing for longer
/// was never created.
pub const SLOT_GRACE: chrono::Duration = chrono::Duration::seconds(60);

/// Seconds a caller refused for [`AdmitError::TooManyJobs`] is told to
/// wait (`Retry-After`).
pub const RETRY_AFTER_SECS: u64 = 30;

/// Why a job was not admitted ([`admit`]).
#[derive(Debug, thiserror::Error)]
pub enum AdmitError {
    /// The job's tenant already runs `cap` jobs (`JOBS_PER_TENANT`).
    #[error("{} already has {cap} bulk or replay jobs running, the most allowed at once (JOBS_PER_TENANT = {cap}); retry when one has finished (GET /v1/jobs/{{id}})", tenant_name(.tenant.as_ref()))]
    TooManyJobs {
        /// The tenant, if any.
        tenant: Option<crate::ids::TenantId>,
        /// The cap.
        cap: usize,
    },
    /// The filter takes more than `cap` items (`JOB_MAX_ITEMS`).
    #[error("the filter takes more than {cap} items, the most one job may take (JOB_MAX_ITEMS = {cap}); narrow it (a shorter since/until range, a subscription_id, an event_type) and start several jobs")]
    TooLarge {
        /// The cap.
        cap: u64,
    },
    /// A replay of a time range where events are not listed by time
    /// (`EVENT_LISTING` off).
    #[error(transparent)]
    ListingOff(#[from] crate::event_search::ListingOff),
    /// The store failed; nothing was started.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn tenant_name(t: Option<&crate::ids::TenantId>) -> String {
    match t {
        Some(t) => format!("tenant {:?}", t.as_str()),
        None => "jobs without a tenant".to_string(),
    }
}

/// Admits a job before it is started ([`start`]): counts the items it will
/// take (at most `JOB_MAX_ITEMS` + 1 listed, a page of `BULK_PAGE_SIZE`,
/// at least 100, per query of the indexed listing its pages use, so no
/// more is held in memory than a page) into `job.items`, refusing a larger
/// one, then takes one of its tenant's `JOBS_PER_TENANT` slots
/// ([`TenantSlots`]), refusing when all are held by running jobs. Nothing
/// is written when it is refused.
///
/// # Errors
///
/// [`AdmitError`].
pub async fn admit(h: &Hookline, job: &mut Job) -> Result<(), AdmitError> {
    if let JobSpec::Replay(f @ ReplayFilter { event_id: None, .. }) = &job.spec {
        replay_query(f).check_listable(h.config.event_listing)?;
    }
    job.items = Some(count_items(h, job, h.config.job_max_items).await?);
    take_slot(h, job, h.config.jobs_per_tenant).await
}

/// The items `job` would take now, listed with the queries its pages use,
/// up to `cap` ([`AdmitError::TooLarge`] beyond).
async fn count_items(h: &Hookline, job: &Job, cap: u64) -> Result<u64, AdmitError> {
    if let JobSpec::Replay(ReplayFilter { event_id: Some(_), .. }) = &job.spec {
        return Ok(1);
    }
    let mut n = 0u64;
    let mut position: Option<String> = None;
    loop {
        let (items, next) = list(h, &job.spec, position.as_deref(), h.config.bulk_page_size.max(100)).await?;
        n += items.len() as u64;
        if n > cap {
            return Err(AdmitError::TooLarge { cap });
        }
        match next {
            Some(p) => position = Some(p),
            None => return Ok(n),
        }
    }
}

/// Takes a slot of `job`'s tenant for it, on condition of the slots'
/// version; at the cap, frees the slots of jobs no longer running first
/// (at most `cap` reads).
async fn take_slot(h: &Hookline, job: &Job, cap: usize) -> Result<(), AdmitError> {
    let key = slots_key(job.tenant_id.as_ref());
    for _ in 0..8 {
        let now = Utc::now();
        let cur = h.stores.jobs.slots(&key).await?.unwrap_or_default();
        let mut held = cur.jobs.clone();
        if held.len() >= cap {
            let mut live = Vec::with_capacity(held.len());
            for slot in held {
                let running = match h.stores.jobs.get(&slot.job_id).await? {
                    Some(j) => j.state == JobState::Running,
                    None => now - slot.taken_at < SLOT_GRACE,
                };
                if running {
                    live.push(slot);
                }
            }
            held = live;
            if held.len() >= cap {
                return Err(AdmitError::TooManyJobs { tenant: job.tenant_id.clone(), cap });
            }
        }
        held.push(Slot { job_id: job.id.clone(), taken_at: now });
        let next = TenantSlots { jobs: held, version: cur.version + 1 };
        if h.stores.jobs.put_slots(&key, &next, cur.version).await? {
            return Ok(());
        }
    }
    Err(StoreError::other(format!("the running jobs of {} kept changing", tenant_name(job.tenant_id.as_ref()))).into())
}

/// Stores a new job and sends the message of its first page. If the
/// message cannot be sent, the job is marked failed (nothing was done) and
/// the error returned. A job whose id is stored already (one of a derived
/// id, started by another worker at the same time) is not started again.
pub async fn start(h: &Hookline, job: Job) -> Result<Job, StoreError> {
    if !h.stores.jobs.create(&job).await? {
        tracing::info!(job_id = %job.id, "bulk job already started");
        return Ok(job);
    }
    if let Err(e) = send(h, &job.id, 0).await {
        let _ = h.stores.jobs.update(&job.failed_with("could not be started", Utc::now()), job.version).await;
        return Err(e);
    }
    tracing::info!(job_id = %job.id, kind = job.kind().as_str(), actor = %LogSafe(&job.actor), "bulk job started");
    Ok(job)
}

async fn send(h: &Hookline, job_id: &str, page: u64) -> Result<(), StoreError> {
    h.stores.requeues.send_now(&[RequeueMessage::Job { job: JobStep { job_id: job_id.to_string(), page } }]).await
}

/// Does the job's pages from the message's, for up to [`MESSAGE_BUDGET`],
/// then sends the message of the next page. An error leaves the message to
/// be received again.
pub async fn run(h: &Hookline, step: &JobStep) -> Result<(), StoreError> {
    let started = Instant::now();
    let mut page = step.page;
    loop {
        let Some(job) = h.stores.jobs.get(&step.job_id).await? else {
            tracing::warn!(job_id = %LogSafe(&step.job_id), "message of an unknown job dropped");
            return Ok(());
        };
        let (job, plan) = match job.next_step(page) {
            Step::Finished => return Ok(()),
            Step::Resend(p) => return send(h, &job.id, p).await,
            Step::Act(plan) => {
                let plan = plan.clone();
                (job, plan)
            }
            Step::Plan => {
                // Failure injection (tests): planning fails for the jobs of
                // one tenant, which stay running, their message received
                // again after its visibility timeout.
                let tenant = job.tenant_id.as_ref().map_or("", |t| t.as_str());
                if h.failpoints.fails("bulk.plan", tenant) {
                    return Err(StoreError::other(format!("failpoint bulk.plan@{tenant}")));
                }
                if page == 0 {
                    super::operational::replay_job_started(h, &job).await?;
                }
                let (items, next) = plan_page(h, &job).await?;
                let planned = job.planned(items, next, Utc::now());
                if !h.stores.jobs.update(&planned, job.version).await? {
                    continue; // another worker planned it: read its plan
                }
                h.failpoints.hit(&format!("bulk.after_plan.page{page}"));
                let plan = planned.plan.clone().expect("just planned");
                (planned, plan)
            }
        };
        let outcomes = act(h, &job, &plan).await?;
        // Before the commit: a worker that dies after publishing does the
        // page again and publishes under the same id.
        super::operational::page_done(h, &job, &plan, &outcomes).await?;
        let committed = job.committed_counts(counts(&outcomes), Utc::now());
        if !h.stores.jobs.update(&committed, job.version).await? {
            // Another worker committed this page first, and goes on.
            return Ok(());
        }
        h.failpoints.hit(&format!("bulk.after_commit.page{page}"));
        if committed.state != JobState::Running {
            tracing::info!(job_id = %committed.id, matched = committed.matched, done = committed.done, failed = committed.failed, skipped_not_routed = committed.skipped_not_routed, "bulk job completed");
            return Ok(());
        }
        page = committed.page;
        if started.elapsed() >= MESSAGE_BUDGET {
            return send(h, &committed.id, page).await;
        }
    }
}

/// [`run`] for a message received `receive_count` times. One received
/// [`JOB_RECEIVE_LIMIT`] times while the job is still at its page failed,
/// crashed or timed out its worker on every receive before: the job is
/// marked failed ([`Job::stuck`]) rather than left `running` while its
/// message goes on to the dead-letter queue. A message whose page the job
/// has moved past only asks for the current one, as [`run`] does.
pub async fn run_received(h: &Hookline, step: &JobStep, receive_count: u32) -> Result<(), StoreError> {
    if receive_count < JOB_RECEIVE_LIMIT {
        return run(h, step).await;
    }
    loop {
        let Some(job) = h.stores.jobs.get(&step.job_id).await? else { return Ok(()) };
        match job.next_step(step.page) {
            Step::Finished => return Ok(()),
            Step::Resend(_) => return run(h, step).await,
            Step::Plan | Step::Act(_) => {}
        }
        let stuck = job.stuck(receive_count, Utc::now());
        if h.stores.jobs.update(&stuck, job.version).await? {
            tracing::error!(job_id = %job.id, page = job.page, receives = receive_count, "bulk job stopped: its page was never finished");
            return Ok(());
        }
    }
}

/// What listing a page answers: its ids and where the listing goes on.
type Planned = (Vec<String>, Option<String>);

/// Lists the job's next page. A store error is returned (the message is
/// received again).
async fn plan_page(h: &Hookline, job: &Job) -> Result<Planned, StoreError> {
    if let JobSpec::Replay(ReplayFilter { event_id: Some(id), .. }) = &job.spec {
        return Ok((vec![id.to_string()], None));
    }
    list(h, &job.spec, job.position.as_deref(), h.config.bulk_page_size).await
}

/// One page of `size` items of what `spec` takes, from `position`: the
/// open dead letters of its query, or the events of its replay filter
/// (oldest first).
async fn list(h: &Hookline, spec: &JobSpec, position: Option<&str>, size: usize) -> Result<Planned, StoreError> {
    match spec {
        JobSpec::Requeue(q) | JobSpec::Skip(q) => {
            // Only open dead letters are acted on.
            let q = DeadLetterQuery { state: Some(DeadLetterState::Open), ..q.clone() };
            let page = h.stores.dead_letters.page(&q, size, position).await?;
            Ok((page.items.into_iter().map(|d| d.id.into_string()).collect(), page.next))
        }
        JobSpec::Replay(f) => list_events(h, f, position, size).await,
    }
}

/// Acts on every item of the plan (concurrently, up to the store cap), the
/// first half, then the rest (a crash test stops it in between).
async fn act(h: &Hookline, job: &Job, plan: &PagePlan) -> Result<Vec<ItemOutcome>, StoreError> {
    let half = plan.items.len() / 2;
    let mut out = act_on(h, job, &plan.items[..half]).await?;
    h.failpoints.hit(&format!("bulk.half_page.page{}", plan.page));
    out.extend(act_on(h, job, &plan.items[half..]).await?);
    Ok(out)
}

async fn act_on(h: &Hookline, job: &Job, items: &[String]) -> Result<Vec<ItemOutcome>, StoreError> {
    let audit = Audit { actor: job.actor.clone(), reason: job.reason.clone() };
    let audit = &audit;
    let runs = items
        .iter()
        .map(|id| async move {
            let r = match &job.spec {
                JobSpec::Requeue(_) => {
                    requeue::requeue_as(h, &DeadLetterId::new(id.as_str()), audit, Some(&job.id)).await.map(|_| ())
                }
                JobSpec::Skip(_) => requeue::skip_as(h, &DeadLetterId::new(id.as_str()), audit, Some(&job.id)).await,
                JobSpec::Replay(f) => replay_one(h, job, f, id, audit).await,
            };
            match r {
                Ok(()) => Ok(ItemOutcome::Done),
                Err(RequeueError::Store(e)) => Err(e),
                // A replay never crosses the named subscription's routing:
                // the event is passed over and counted apart.
                Err(RequeueError::NotRouted { .. }) => Ok(ItemOutcome::SkippedNotRouted),
                Err(e) => {
                    tracing::info!(job_id = %job.id, item = %LogSafe(id), error = %e, "bulk job item not acted on");
                    Ok(ItemOutcome::Failed)
                }
            }
        })
        .collect();
    // Replays are made one after the other, in the order listed
    // (acceptance order), so their sagas are created in that order.
    let cap = if matches!(job.spec, JobSpec::Replay(_)) { 1 } else { MAX_STORE_IN_FLIGHT };
    all_bounded(runs, cap).await.into_iter().collect()
}

/// A page of a replay filter's events (range or partition), oldest first.
async fn list_events(
    h: &Hookline,
    f: &ReplayFilter,
    position: Option<&str>,
    size: usize,
) -> Result<Planned, StoreError> {
    let page = h.stores.events.search(&replay_query(f), size, position).await?;
    let ids = page.items.into_iter().filter(|e| f.takes(&e.event_type)).map(|e| e.id.into_string()).collect();
    Ok((ids, page.next))
}

/// The search a replay filter's pages read (range or partition), oldest
/// first. One event type given: the search narrows by it; several are
/// checked on the page's items, so an event of another type is neither
/// planned nor counted as matched.
fn replay_query(f: &ReplayFilter) -> EventQuery {
    let event_type = match f.event_types.as_deref() {
        Some([one]) => crate::event_search::TypeFilter::parse(one).ok().flatten(),
        _ => None,
    };
    EventQuery {
        event_type,
        tenant_id: f.tenant_id.clone(),
        partition_key: f.partition_key.clone(),
        received: crate::ports::TimeRange { since: f.since, until: f.until },
        outcome: None,
        order: Order::OldestFirst,
    }
}

/// Replays one event of a replay job: new sagas for the subscriptions that
/// match it now (or the one named, if its routing takes the event: else
/// [`RequeueError::NotRouted`], counted as skipped), keyed by the job's id,
/// so a page done again creates nothing new. An event named by id whose type the
/// filter's `event_types` does not take is left alone; the events of a
/// partition or a range were planned by type already
/// ([`list_events`]), so they are not read again for it.
async fn replay_one(
    h: &Hookline,
    job: &Job,
    f: &ReplayFilter,
    event_id: &str,
    audit: &Audit,
) -> Result<(), RequeueError> {
    let event_id = EventId::new(event_id);
    if f.event_id.is_some() && f.narrows_types() {
        let Some(event) = h.stores.events.get(&event_id).await? else {
            return Err(RequeueError::NotFound(format!("event {event_id}")));
        };
        if !f.takes(&event.event_type) {
            return Ok(());
        }
    }
    requeue::replay(h, &event_id, f.subscription_id.as_ref(), f.confined_to.as_ref(), &job.id, audit).await.map(|_| ())
}
