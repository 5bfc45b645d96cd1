//! Requeue, skip and replay: the ways an operator restarts or closes a
//! delivery. Each creates a new saga linked to the old one with an audit
//! record; the old saga, terminal, never changes. Saga ids derive from the
//! dead letter (or the replay key), so repeating a request, or a console
//! redrive plus an API requeue, creates one saga.

use chrono::Utc;

use crate::context::Hookline;
use crate::error::StoreError;
use crate::ids;
use crate::routing;
use crate::saga::{Origin, Saga};

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
        id: String,
        /// What happened to it.
        state: String,
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

/// Requeues a dead letter: a new Pending saga for the same event and
/// subscription (same `webhook-id`). Idempotent: requeueing it again returns
/// the saga the first requeue created.
pub async fn requeue(h: &Hookline, dead_letter_id: &str, audit: &Audit) -> Result<Saga, RequeueError> {
    let dl = h
        .stores
        .dead_letters
        .get(dead_letter_id)
        .await?
        .ok_or_else(|| RequeueError::NotFound(format!("dead letter {dead_letter_id}")))?;
    let new_id = ids::requeue_saga_id(&dl.id);
    if dl.state == "skipped" {
        return Err(RequeueError::AlreadyResolved { id: dl.id, state: dl.state });
    }
    if dl.state == "requeued" {
        if let Some(s) = h.stores.sagas.get(&new_id).await? {
            return Ok(s);
        }
    }
    let now = Utc::now();
    let origin = Origin {
        kind: "requeue".into(),
        previous_saga_id: Some(dl.id.clone()),
        actor: audit.actor.clone(),
        reason: audit.reason.clone(),
        at: now,
    };
    let saga = Saga::new(new_id.clone(), &dl.event_id, &dl.subscription_id, Some(origin), now);
    h.stores.sagas.create(std::slice::from_ref(&saga)).await?;
    crate::failpoint::hit("requeue.after_saga");
    let resolution = serde_json::json!({"action": "requeue", "actor": audit.actor, "reason": audit.reason, "at": now, "new_saga_id": new_id});
    h.stores.dead_letters.resolve(&dl.id, "requeued", resolution).await?;
    tracing::info!(dead_letter_id = %dl.id, saga_id = %new_id, actor = %audit.actor, "dead letter requeued");
    Ok(h.stores.sagas.get(&new_id).await?.unwrap_or(saga))
}

/// Closes a dead letter without delivering it, with the audit record.
pub async fn skip(h: &Hookline, dead_letter_id: &str, audit: &Audit) -> Result<(), RequeueError> {
    let dl = h
        .stores
        .dead_letters
        .get(dead_letter_id)
        .await?
        .ok_or_else(|| RequeueError::NotFound(format!("dead letter {dead_letter_id}")))?;
    let resolution = serde_json::json!({"action": "skip", "actor": audit.actor, "reason": audit.reason, "at": Utc::now()});
    if !h.stores.dead_letters.resolve(&dl.id, "skipped", resolution).await? {
        let cur = h.stores.dead_letters.get(&dl.id).await?.map(|d| d.state).unwrap_or_default();
        if cur != "skipped" {
            return Err(RequeueError::AlreadyResolved { id: dl.id, state: cur });
        }
    }
    Ok(())
}

/// Replays a stored event: a new saga per subscription (the one given, or
/// every subscription that matches now). `replay_key` makes a retried replay
/// request create nothing new.
pub async fn replay(
    h: &Hookline,
    event_id: &str,
    subscription_id: Option<&str>,
    replay_key: &str,
    audit: &Audit,
) -> Result<Vec<Saga>, RequeueError> {
    let event = h.stores.events.get(event_id).await?.ok_or_else(|| RequeueError::NotFound(format!("event {event_id}")))?;
    let subs = h.stores.subscriptions.list().await?;
    let targets: Vec<_> = match subscription_id {
        Some(id) => {
            let s = subs.iter().find(|s| s.id == id).ok_or_else(|| RequeueError::NotFound(format!("subscription {id}")))?;
            vec![s]
        }
        None => routing::matching(&subs, &event).collect(),
    };
    let now = Utc::now();
    let sagas: Vec<Saga> = targets
        .iter()
        .map(|s| {
            let previous = ids::saga_id(event_id, &s.id);
            let origin = Origin {
                kind: "replay".into(),
                previous_saga_id: Some(previous),
                actor: audit.actor.clone(),
                reason: audit.reason.clone(),
                at: now,
            };
            Saga::new(ids::replay_saga_id(event_id, &s.id, replay_key), event_id, &s.id, Some(origin), now)
        })
        .collect();
    if !sagas.is_empty() {
        h.stores.sagas.create(&sagas).await?;
    }
    tracing::info!(event_id, sagas = sagas.len(), actor = %audit.actor, "event replayed");
    Ok(sagas)
}
