//! Route: for each new event, one Pending saga per matching subscription.
//! It inserts sagas conditionally and does nothing else: no status changes,
//! no jobs, no payload reads (docs/architecture.md#stage-table).

use chrono::Utc;

use crate::context::Hookline;
use crate::error::StoreError;
use crate::event::EventRecord;
use crate::ids::{self, SubscriptionId};
use crate::routing;
use crate::saga::Saga;

/// Creates the sagas of these events; returns how many were new. Safe to
/// repeat: saga ids derive from `(event, subscription)`.
pub async fn route(h: &Hookline, events: &[EventRecord]) -> Result<usize, StoreError> {
    if events.iter().any(|e| crate::failpoint::fails("route.store", e.id.as_str())) {
        return Err(StoreError::Backend("failpoint route.store: injected store failure".into()));
    }
    let store = h.stores.subscriptions.as_ref();
    let mut subs = h.subscription_cache.all(store).await?;
    // A subscription in scope that this cache thinks inactive or unverified
    // may have been verified or re-activated by another container: ask the
    // store before leaving it out (once per cache fill).
    let doubtful: Vec<SubscriptionId> = subs
        .iter()
        .filter(|s| !s.is_routable() && events.iter().any(|e| routing::in_scope(s, e)))
        .map(|s| s.id.clone())
        .collect();
    let mut changed = false;
    for id in doubtful {
        changed |= h.subscription_cache.confirm(store, &id).await?.is_some_and(|s| s.is_routable());
    }
    if changed {
        subs = h.subscription_cache.all(store).await?;
    }
    let now = Utc::now();
    let sagas: Vec<Saga> = events
        .iter()
        .flat_map(|e| {
            routing::matching(&subs, e)
                .map(|s| Saga::new(ids::saga_id(&e.id, &s.id), &e.id, &s.id, None, now))
                .collect::<Vec<_>>()
        })
        .collect();
    if sagas.is_empty() {
        return Ok(0);
    }
    let created = h.stores.sagas.create(&sagas).await?;
    crate::failpoint::hit("route.after_sagas");
    // The per-saga lines look up each saga's event: only when they are logged.
    if tracing::enabled!(tracing::Level::DEBUG) {
        for (s, new) in sagas.iter().zip(&created) {
            let trace_id = events.iter().find(|e| e.id == s.event_id).and_then(|e| e.trace_id.as_deref()).unwrap_or("");
            tracing::debug!(event_id = %s.event_id, saga_id = %s.id, subscription_id = %s.subscription_id, trace_id, new, "routed");
        }
    }
    Ok(created.into_iter().filter(|c| *c).count())
}
