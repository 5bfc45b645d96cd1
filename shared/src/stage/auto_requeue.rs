//! Automatic requeue ([`crate::recovery`] decides): the stage that sees an
//! outage end queues a request ([`after_breaker_closed`] in the delivery
//! stage, [`after_re_enabled`] in a subscription change); the requeue
//! stage turns it into a bulk requeue job ([`handle`]), the job
//! `POST /v1/dead-letters/requeue` starts, by [`audit::SYSTEM`], with its
//! audit record. So on AWS only the requeue function writes jobs; the
//! delivery function only sends a message to the requeue queue.
//!
//! The requeued deliveries go through the normal path: the subscription's
//! `rate_limit` and `max_in_flight` hold for them as for any delivery.

use chrono::Utc;

use crate::audit::{self, Action, AuditRecord};
use crate::bulk::{Job, JobSpec};
use crate::context::Hookline;
use crate::error::StoreError;
use crate::health::Health;
use crate::message::RequeueMessage;
use crate::recovery::{self, AutoRequeue, Next, Trigger};
use crate::subscription::Subscription;

use super::bulk::{self, AdmitError};

/// Queues `req` on the requeue queue.
async fn request(h: &Hookline, req: AutoRequeue) -> Result<(), StoreError> {
    tracing::info!(subscription_id = %req.subscription_id, trigger = ?req.trigger, since = %req.since, "automatic requeue requested");
    h.stores.requeues.send_now(&[RequeueMessage::AutoRequeue { auto_requeue: req }]).await
}

/// `sub`'s breaker closed, its record having been `before`: with
/// `auto_requeue`, the dead letters of the outage are to be requeued. A
/// failure is logged (the breaker is closed either way; the dead letters
/// wait for an operator, as without the setting).
pub async fn after_breaker_closed(h: &Hookline, sub: &Subscription, before: &Health) {
    if !sub.auto_requeue {
        return;
    }
    let Some(since) = recovery::breaker_outage_start(before) else { return };
    let req = AutoRequeue {
        subscription_id: sub.id.clone(),
        trigger: Trigger::BreakerClosed,
        since,
        until: Utc::now(),
        waits: 0,
    };
    if let Err(e) = request(h, req).await {
        tracing::error!(subscription_id = %sub.id, error = %e, "automatic requeue not queued: the outage's dead letters wait for an operator");
    }
}

/// `after` was enabled again, having been `before` with `health` (read
/// before the re-enable forgot its failing run): with `auto_requeue`, and
/// if Hookline had disabled it, the dead letters of the outage are to be
/// requeued (once it passed its handshake again). A failure is logged.
pub async fn after_re_enabled(h: &Hookline, before: &Subscription, after: &Subscription, health: Option<&Health>) {
    if !after.auto_requeue {
        return;
    }
    let Some(since) = recovery::disable_outage_start(before, health) else { return };
    let req =
        AutoRequeue { subscription_id: after.id.clone(), trigger: Trigger::ReEnabled, since, until: Utc::now(), waits: 0 };
    if let Err(e) = request(h, req).await {
        tracing::error!(subscription_id = %after.id, error = %e, "automatic requeue not queued: the outage's dead letters wait for an operator");
    }
}

/// The requeue stage's part: starts the job of `req` (at most one per
/// outage: its id derives from the subscription and the outage start),
/// waits for the handshake of a re-enabled subscription, or drops a request
/// that no longer applies. A store error is returned (the message is
/// received again).
pub async fn handle(h: &Hookline, req: &AutoRequeue) -> Result<(), StoreError> {
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
