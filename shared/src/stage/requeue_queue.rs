//! The consumer of the requeue queue: each message is an operator's
//! requeue or replay ([`super::requeue`]), a step of a bulk job
//! ([`super::bulk`]), a delivery job redriven from the deliveries
//! dead-letter queue, or an automatic requeue ([`crate::recovery`]), which
//! it turns into a bulk job. Above both, so neither imports the other back.

use chrono::Utc;

use crate::audit::{self, Action, AuditRecord};
use crate::bulk::{Job, JobSpec};
use crate::context::Hookline;
use crate::error::StoreError;
use crate::ids;
use crate::message::RequeueMessage;
use crate::recovery::{self, AutoRequeue, Next};

use super::bulk::{self, AdmitError};
use super::requeue::{self, Audit, RequeueError};
use crate::message::ReplayRequest;

/// The requeue stage: one message of the requeue queue, received
/// `receive_count` times.
pub async fn handle(h: &Hookline, msg: RequeueMessage, receive_count: u32) -> Result<(), RequeueError> {
    match msg {
        RequeueMessage::Requeue { requeue: r } => {
            requeue::requeue(h, &r.dead_letter_id, &Audit { actor: r.actor, reason: r.reason }).await.map(|_| ())
        }
        RequeueMessage::Replay { replay: r } => match replay_announced(h, r).await {
            // The API refuses these; one queued before (or whose
            // subscription changed since) is consumed without effect.
            Err(e @ RequeueError::NotRouted { .. }) => {
                tracing::warn!(error = %e, "replay not made: the subscription's routing would not take the event");
                Ok(())
            }
            r => r,
        },
        RequeueMessage::Job { job } => bulk::run_received(h, &job, receive_count).await.map_err(RequeueError::Store),
        RequeueMessage::AutoRequeue { auto_requeue: req } => auto_requeue(h, &req).await.map_err(RequeueError::Store),
        RequeueMessage::DeadJob(job) => {
            let dead_letter_id = ids::dead_letter_id(&job.saga_id);
            if h.stores.dead_letters.get(&dead_letter_id).await?.is_none() {
                // Not a dead saga: SQS moved its job after workers failed it
                // on every receive without a record (e.g. the store was down).
                // The saga goes on where it was: its job goes back.
                if let Some(s) = h.stores.sagas.get(&job.event_id, &job.saga_id).await? {
                    if !s.state.status.is_terminal() {
                        h.stores.deliveries.send_now(std::slice::from_ref(&job)).await?;
                        tracing::warn!(saga_id = %job.saga_id, attempt = job.attempt, "redriven job of a saga that never died; delivering it again");
                    }
                }
                return Ok(());
            }
            let audit =
                Audit { actor: "dlq-redrive".into(), reason: "redriven from the deliveries dead-letter queue".into() };
            match requeue::requeue(h, &dead_letter_id, &audit).await {
                // A skipped dead letter stays skipped: the redrive is consumed.
                Err(RequeueError::AlreadyResolved { .. }) => Ok(()),
                Err(e) => Err(e),
                Ok(saga) => {
                    // The redrive that resolved the dead letter leaves its
                    // audit record, under an id of the dead letter so a
                    // redrive done again records it once.
                    if let Some(o) = saga.origin.as_ref().filter(|o| o.actor == audit.actor) {
                        let tenant =
                            h.stores.dead_letters.get(&dead_letter_id).await.ok().flatten().and_then(|d| d.tenant_id);
                        let rec = AuditRecord::at(Action::DeadLetterRequeued, &o.actor, o.at)
                            .tenant(tenant.as_ref())
                            .with_id(format!("aud_redrive_{dead_letter_id}"))
                            .reason(&o.reason)
                            .dead_letter(&dead_letter_id)
                            .subscription(&saga.subscription_id)
                            .event(&saga.event_id)
                            .details(serde_json::json!({"saga_id": saga.id}));
                        h.audit(rec).await;
                    }
                    Ok(())
                }
            }
        }
    }
}

/// A single replay: its sagas, then `hookline.replay.started` when it made
/// any ([`super::operational`]; once, however often it is done again).
async fn replay_announced(h: &Hookline, r: ReplayRequest) -> Result<(), RequeueError> {
    let audit = Audit { actor: r.actor, reason: r.reason };
    let sagas =
        requeue::replay(h, &r.event_id, r.subscription_id.as_ref(), r.confined_to.as_ref(), &r.replay_key, &audit)
            .await?;
    if !sagas.is_empty() {
        super::operational::replay_started(h, &r.event_id, r.subscription_id.as_ref(), &r.replay_key, audit.by())
            .await?;
    }
    Ok(())
}

/// An automatic requeue ([`super::auto_requeue`] queued it): starts the
/// job of `req` (at most one per
/// outage: its id derives from the subscription and the outage start),
/// waits for the handshake of a re-enabled subscription, or drops a request
/// that no longer applies. A store error is returned (the message is
/// received again).
pub async fn auto_requeue(h: &Hookline, req: &AutoRequeue) -> Result<(), StoreError> {
    let sub = h.stores.subscriptions.get(&req.subscription_id).await?;
    match recovery::decide(req, sub.as_ref()) {
        Next::Drop(why) => {
            tracing::info!(subscription_id = %req.subscription_id, why, "automatic requeue dropped");
            return Ok(());
        }
        Next::WaitForVerification => {
            let again = RequeueMessage::AutoRequeue { auto_requeue: req.waited() };
            return h.stores.requeues.send(&[(again, recovery::VERIFY_WAIT)]).await;
        }
        Next::Start => {}
    }
    let Some(sub) = sub else { return Ok(()) };
    let cause = req.cause();
    let parts: Vec<&str> = cause.iter().map(String::as_str).collect();
    let id = recovery::job_id(&h.keyring.mac(&parts));
    if h.stores.jobs.get(&id).await?.is_some() {
        return Ok(());
    }
    let reason = req.trigger.reason();
    let mut job = Job { id, ..Job::new(JobSpec::Requeue(req.query()), reason, audit::SYSTEM, Utc::now()) };
    job.tenant_id = sub.tenant_id.clone();
    match bulk::admit(h, &mut job).await {
        Ok(()) => {}
        Err(AdmitError::Store(e)) => return Err(e),
        // Only replays of a time range need the listing by time; a requeue
        // lists dead letters.
        Err(e @ AdmitError::ListingOff(_)) => {
            tracing::error!(subscription_id = %sub.id, error = %e, "automatic requeue not started");
            return Ok(());
        }
        Err(e @ AdmitError::TooManyJobs { .. }) => {
            // The tenant's jobs are all taken: asked again when one may
            // have finished.
            tracing::warn!(subscription_id = %sub.id, error = %e, "automatic requeue waits for a job slot");
            let again = RequeueMessage::AutoRequeue { auto_requeue: req.clone() };
            let wait = std::time::Duration::from_secs(bulk::RETRY_AFTER_SECS);
            return h.stores.requeues.send(&[(again, wait)]).await;
        }
        Err(e @ AdmitError::TooLarge { .. }) => {
            tracing::error!(subscription_id = %sub.id, error = %e, "automatic requeue not started: the outage left more dead letters than one job may take; an operator requeues them in parts");
            let rec = AuditRecord::new(Action::DeadLettersRequeueStarted, audit::SYSTEM)
                .with_id(format!("aud_auto_{}", job.id))
                .reason(format!("{reason}: not started: {e}"))
                .subscription(&sub.id)
                .tenant(sub.tenant_id.as_ref())
                .details(serde_json::json!({"filter": job.spec.filter(), "trigger": req.trigger, "started": false}));
            h.audit(rec).await;
            return Ok(());
        }
    }
    if job.items == Some(0) {
        tracing::info!(subscription_id = %sub.id, trigger = ?req.trigger, "automatic requeue: no open dead letters of the outage");
        return Ok(());
    }
    let job = bulk::start(h, job).await?;
    let rec = AuditRecord::new(Action::DeadLettersRequeueStarted, audit::SYSTEM)
        .with_id(format!("aud_auto_{}", job.id))
        .reason(reason)
        .job(&job.id)
        .subscription(&sub.id)
        .tenant(sub.tenant_id.as_ref())
        .details(serde_json::json!({"filter": job.spec.filter(), "trigger": req.trigger, "items": job.items}));
    h.audit(rec).await;
    tracing::info!(subscription_id = %sub.id, job_id = %job.id, items = job.items, trigger = ?req.trigger, "automatic requeue started");
    Ok(())
}
