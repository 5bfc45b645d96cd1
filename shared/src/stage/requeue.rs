//! Requeue, skip and replay: the ways an operator restarts or closes a
//! delivery. Each creates a new saga linked to the old one with an audit
//! record; the old saga, terminal, never changes. Saga ids derive from the
//! dead letter (or the replay key), so repeating a request, or a console
//! redrive plus an API requeue, creates one saga.
//!
//! The API only checks a request and puts it on the requeue queue
//! ([`request_requeue`], [`request_replay`]); the queue's consumer
//! ([`super::requeue_queue::handle`]) creates the sagas, also for jobs an
//! operator redrives from the deliveries dead-letter queue.

use chrono::Utc;

use crate::dead_letter::{DeadLetter, DeadLetterState, Resolution, ResolutionAction};
pub use crate::message::ReplayRequest;
use crate::message::{RequeueMessage, RequeueRequest};

use crate::context::Hookline;
use crate::envelope::LogSafe;
use crate::error::StoreError;
use crate::ids::{self, DeadLetterId, EventId, SagaId, SubscriptionId, TenantId};
use crate::routing;
use crate::saga::{Origin, OriginKind, Saga};

/// Why a requeue, skip or replay was refused.
#[derive(Debug, thiserror::Error)]
pub enum RequeueError {
    /// No such dead letter or event.
    #[error("{0} not found")]
    NotFound(String),
    /// The dead letter was already skipped (or requeued, for skip).
    #[error("dead letter {id} is already {state}")]
    AlreadyResolved {
        /// The dead letter.
        id: DeadLetterId,
        /// What happened to it.
        state: DeadLetterState,
    },
    /// A replay named a subscription whose routing would not have taken the
    /// event (another tenant's, or a type none of its patterns matches,
    /// [`routing::check_scope`]): a replay never delivers what routing would
    /// not have, so nothing is created for it.
    #[error("routing would not deliver event {} to subscription {subscription}: {reason}", crate::envelope::show(event.as_str()))]
    NotRouted {
        /// The subscription named.
        subscription: SubscriptionId,
        /// The event.
        event: EventId,
        /// Why routing would not have delivered it there.
        reason: routing::OutOfScope,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Who asks and why: the audit record.
#[derive(Debug, Clone)]
pub struct Audit {
    /// The operator (API key owner, CLI user, `console-redrive`).
    pub actor: String,
    /// Their reason.
    pub reason: String,
}

impl Audit {
    /// Borrowed, as the operational events name it.
    pub fn by(&self) -> super::operational::By<'_> {
        super::operational::By { actor: &self.actor, reason: &self.reason }
    }
}

async fn load_dead_letter(h: &Hookline, id: &DeadLetterId) -> Result<DeadLetter, RequeueError> {
    h.stores.dead_letters.get(id).await?.ok_or_else(|| RequeueError::NotFound(format!("dead letter {id}")))
}

/// Checks a requeue request and queues it; returns the id the new saga will
/// have (the same for every requeue of this dead letter).
pub async fn request_requeue(
    h: &Hookline,
    dead_letter_id: &DeadLetterId,
    audit: &Audit,
) -> Result<SagaId, RequeueError> {
    let dl = load_dead_letter(h, dead_letter_id).await?;
    if dl.state != DeadLetterState::Open {
        return Err(RequeueError::AlreadyResolved { id: dl.id, state: dl.state });
    }
    let msg = RequeueMessage::Requeue {
        requeue: RequeueRequest {
            dead_letter_id: dl.id.clone(),
            actor: audit.actor.clone(),
            reason: audit.reason.clone(),
        },
    };
    h.stores.requeues.send_now(&[msg]).await?;
    Ok(ids::requeue_saga_id(&dl.id))
}

/// Checks a replay request and queues it; returns `(saga id, subscription id)`
/// of the sagas it will create. A named subscription whose routing would not
/// take the event is [`RequeueError::NotRouted`] and nothing is queued.
pub async fn request_replay(h: &Hookline, req: &ReplayRequest) -> Result<Vec<(SagaId, SubscriptionId)>, RequeueError> {
    let event = h
        .stores
        .events
        .get(&req.event_id)
        .await?
        .ok_or_else(|| RequeueError::NotFound(format!("event {}", req.event_id)))?;
    let targets = replay_targets(h, &event, req.subscription_id.as_ref(), req.confined_to.as_ref()).await?;
    let msg = RequeueMessage::Replay { replay: req.clone() };
    h.stores.requeues.send_now(&[msg]).await?;
    Ok(targets.into_iter().map(|s| (ids::replay_saga_id(&req.event_id, &s.id, &req.replay_key), s.id)).collect())
}

async fn replay_targets(
    h: &Hookline,
    event: &crate::event::EventRecord,
    only: Option<&SubscriptionId>,
    confined_to: Option<&TenantId>,
) -> Result<Vec<crate::subscription::Subscription>, RequeueError> {
    let store = h.stores.subscriptions.as_ref();
    let confined = |s: &crate::subscription::Subscription| confined_to.is_none_or(|t| s.tenant_id.as_ref() == Some(t));
    Ok(match only {
        Some(id) => {
            let s = store.get(id).await?.ok_or_else(|| RequeueError::NotFound(format!("subscription {id}")))?;
            // Whatever its state (an inactive one dead-letters at delivery),
            // but only what its routing would have delivered.
            routing::check_scope(&s, event).map_err(|reason| RequeueError::NotRouted {
                subscription: s.id.clone(),
                event: event.id.clone(),
                reason,
            })?;
            if !confined(&s) {
                return Err(RequeueError::NotFound(format!("subscription {id}")));
            }
            vec![s]
        }
        None => {
            // The subscriptions that match it now, found through the index;
            // a test event's one candidate is its target (routing's rule).
            let mut ids: Vec<SubscriptionId> = match &event.target {
                Some(target) => vec![target.clone()],
                None => store.routes(&routing::route_keys(event)).await?.into_iter().flatten().collect(),
            };
            ids.sort();
            ids.dedup();
            let subs: Vec<_> = store.get_many(&ids).await?.into_iter().flatten().collect();
            routing::matching(&subs, event).filter(|s| confined(s)).cloned().collect()
        }
    })
}

/// Requeues a dead letter: a new Pending saga for the same event and
/// subscription (same `webhook-id`). Idempotent: requeueing it again returns
/// the saga the first requeue created.
///
/// Publishes `hookline.dead_letter.requeued` ([`super::operational`]),
/// once however often it is repeated.
pub async fn requeue(h: &Hookline, dead_letter_id: &DeadLetterId, audit: &Audit) -> Result<Saga, RequeueError> {
    let saga = requeue_as(h, dead_letter_id, audit, None).await?;
    super::operational::resolved_one(h, true, dead_letter_id, &saga.subscription_id, audit.by()).await?;
    Ok(saga)
}

/// [`requeue`] on behalf of bulk job `job_id` (recorded on the resolution):
/// a dead letter requeued by someone else meanwhile is
/// [`RequeueError::AlreadyResolved`]; one this job requeued before (a page
/// done again) gives its saga again.
pub async fn requeue_as(
    h: &Hookline,
    dead_letter_id: &DeadLetterId,
    audit: &Audit,
    job_id: Option<&str>,
) -> Result<Saga, RequeueError> {
    let mut dl = load_dead_letter(h, dead_letter_id).await?;
    let new_id = ids::requeue_saga_id(&dl.id);
    // The dead letter is resolved first: of concurrent requeues (a redrive
    // and an API call), the one whose conditional resolve wins writes the
    // audit record, and the new saga carries that same record.
    if dl.state == DeadLetterState::Open {
        let resolution = Resolution {
            action: ResolutionAction::Requeue,
            actor: audit.actor.clone(),
            reason: audit.reason.clone(),
            at: Utc::now(),
            new_saga_id: Some(new_id.clone()),
            job_id: job_id.map(str::to_string),
        };
        h.stores.dead_letters.resolve(&dl.id, DeadLetterState::Requeued, resolution).await?;
        dl = load_dead_letter(h, dead_letter_id).await?;
    }
    let by_other_job = job_id.is_some() && dl.resolution.as_ref().and_then(|r| r.job_id.as_deref()) != job_id;
    if dl.state != DeadLetterState::Requeued || by_other_job {
        return Err(RequeueError::AlreadyResolved { id: dl.id, state: dl.state });
    }
    h.failpoints.hit("requeue.after_resolve");
    if let Some(s) = h.stores.sagas.get(&dl.event_id, &new_id).await? {
        return Ok(s);
    }
    // The new saga carries the audit record that won (see above).
    let (actor, reason, at) = match &dl.resolution {
        Some(r) => (r.actor.clone(), r.reason.clone(), r.at),
        None => (audit.actor.clone(), audit.reason.clone(), Utc::now()),
    };
    let origin = Origin { kind: OriginKind::Requeue, previous_saga_id: Some(dl.id.saga_id()), actor, reason, at };
    // It takes the dead saga's place in its lane, if it had one.
    let lane = serde_json::from_value::<Saga>(dl.saga_snapshot.clone()).ok().and_then(|s| s.lane);
    let saga = Saga { lane, ..Saga::new(new_id.clone(), &dl.event_id, &dl.subscription_id, Some(origin), Utc::now()) };
    h.stores.sagas.create(std::slice::from_ref(&saga)).await?;
    tracing::info!(dead_letter_id = %dl.id, saga_id = %new_id, actor = %LogSafe(saga.origin.as_ref().map_or("", |o| o.actor.as_str())), "dead letter requeued");
    Ok(h.stores.sagas.get(&dl.event_id, &new_id).await?.unwrap_or(saga))
}

/// Closes a dead letter without delivering it, with the audit record, and
/// publishes `hookline.dead_letter.skipped` ([`super::operational`]).
pub async fn skip(h: &Hookline, dead_letter_id: &DeadLetterId, audit: &Audit) -> Result<(), RequeueError> {
    skip_as(h, dead_letter_id, audit, None).await?;
    let dl = load_dead_letter(h, dead_letter_id).await?;
    super::operational::resolved_one(h, false, dead_letter_id, &dl.subscription_id, audit.by()).await?;
    Ok(())
}

/// [`skip`] on behalf of bulk job `job_id` (recorded on the resolution): a
/// dead letter resolved by someone else meanwhile is
/// [`RequeueError::AlreadyResolved`]; one this job skipped before (a page
/// done again) is skipped still.
pub async fn skip_as(
    h: &Hookline,
    dead_letter_id: &DeadLetterId,
    audit: &Audit,
    job_id: Option<&str>,
) -> Result<(), RequeueError> {
    let dl = load_dead_letter(h, dead_letter_id).await?;
    let resolution = Resolution {
        action: ResolutionAction::Skip,
        actor: audit.actor.clone(),
        reason: audit.reason.clone(),
        at: Utc::now(),
        new_saga_id: None,
        job_id: job_id.map(str::to_string),
    };
    if !h.stores.dead_letters.resolve(&dl.id, DeadLetterState::Skipped, resolution).await? {
        let cur = h.stores.dead_letters.get(&dl.id).await?;
        let state = cur.as_ref().map_or(dl.state, |d| d.state);
        let job_of = cur.as_ref().and_then(|d| d.resolution.as_ref()).and_then(|r| r.job_id.as_deref());
        if state != DeadLetterState::Skipped || (job_id.is_some() && job_of != job_id) {
            return Err(RequeueError::AlreadyResolved { id: dl.id, state });
        }
    }
    // A dead letter that blocked its partition's lane lets it go on (again
    // on a repeated skip: the first may have crashed before this).
    if let Ok(dead) = serde_json::from_value::<Saga>(dl.saga_snapshot.clone()) {
        if dead.lane.as_ref().is_some_and(|l| l.on_dead_letter == crate::ordering::OnDeadLetter::Block) {
            super::ordering::skipped(h, &dead).await?;
        }
    }
    Ok(())
}

/// Replays a stored event: a new saga per subscription (the one given, or
/// every subscription that matches now). `replay_key` makes a retried replay
/// request create nothing new. A subscription given whose routing would not
/// take the event (another tenant's, or no matching pattern) is
/// [`RequeueError::NotRouted`], and nothing is created. `confined_to`: only
/// subscriptions of that tenant (a replay asked by a tenant-bound key).
pub async fn replay(
    h: &Hookline,
    event_id: &EventId,
    subscription_id: Option<&SubscriptionId>,
    confined_to: Option<&TenantId>,
    replay_key: &str,
    audit: &Audit,
) -> Result<Vec<Saga>, RequeueError> {
    let event =
        h.stores.events.get(event_id).await?.ok_or_else(|| RequeueError::NotFound(format!("event {event_id}")))?;
    let targets = replay_targets(h, &event, subscription_id, confined_to).await?;
    let now = Utc::now();
    let sagas: Vec<Saga> = targets
        .iter()
        .map(|target| {
            let sub = &target.id;
            let previous = ids::saga_id(event_id, sub);
            let origin = Origin {
                kind: OriginKind::Replay,
                previous_saga_id: Some(previous),
                actor: audit.actor.clone(),
                reason: audit.reason.clone(),
                at: now,
            };
            // An ordered subscription's replay goes through the lane, at
            // the event's place in its partition.
            Saga {
                lane: crate::routing::lane_for(target, &event),
                ..Saga::new(ids::replay_saga_id(event_id, sub, replay_key), event_id, sub, Some(origin), now)
            }
        })
        .collect();
    if !sagas.is_empty() {
        // In its lane before it is stored, as routing does: replays of a
        // partition's events, made one after the other, then wait in the
        // lane in their order (a saga not yet in the lane could otherwise
        // start ahead of an earlier one).
        super::ordering::enqueue(h, &sagas).await?;
        h.stores.sagas.create(&sagas).await?;
    }
    tracing::info!(event_id = %LogSafe(event_id.as_str()), sagas = sagas.len(), actor = %LogSafe(&audit.actor), reason = %LogSafe(&audit.reason), "event replayed");
    Ok(sagas)
}
