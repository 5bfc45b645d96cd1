//! The consumer of the requeue queue: each message is an operator's
//! requeue or replay ([`super::requeue`]), a step of a bulk job
//! ([`super::bulk`]), or a delivery job redriven from the deliveries
//! dead-letter queue. Above both, so neither imports the other back.

use crate::audit::{Action, AuditRecord};
use crate::context::Hookline;
use crate::ids;
use crate::message::RequeueMessage;

use super::bulk;
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
        RequeueMessage::AutoRequeue { auto_requeue } => {
            super::auto_requeue::handle(h, &auto_requeue).await.map_err(RequeueError::Store)
        }
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
        super::operational::replay_started(h, &r.event_id, r.subscription_id.as_ref(), &r.replay_key, &audit).await?;
    }
    Ok(())
}
