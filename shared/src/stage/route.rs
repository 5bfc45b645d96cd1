//! Route: for each new event, one Pending saga per matching subscription
//! (a pull-only subscription's is inserted Completed with no attempt:
//! filed for pull, [`crate::saga::SagaState::filed_for_pull`]).
//! It inserts sagas conditionally and does nothing else: no status changes,
//! no jobs, no payload reads (docs/architecture.md#stage-table).

use std::collections::HashMap;
use std::sync::Arc;

use chrono::Utc;

use crate::bounds::{all_bounded, MAX_STORE_IN_FLIGHT};
use crate::context::Hookline;
use crate::error::StoreError;
use crate::event::EventRecord;
use crate::ids::{self, SubscriptionId};
use crate::routing::{self, RouteKey};
use crate::saga::{Saga, SagaState};
use crate::subscription::Subscription;

/// Creates the sagas of these events; returns how many were new. Safe to
/// repeat: saga ids derive from `(event, subscription)`.
pub async fn route(h: &Hookline, events: &[EventRecord]) -> Result<usize, StoreError> {
    if events.iter().any(|e| h.failpoints.fails("route.store", e.id.as_str())) {
        return Err(StoreError::other("failpoint route.store: injected store failure".into()));
    }
    let store = h.stores.subscriptions.as_ref();
    let cache = &h.subscription_cache;
    // Each event's candidates are indexed under its few route keys: the
    // cost does not depend on how many subscriptions do not match.
    // A test event's one candidate is its subscription (no index read).
    let event_keys: Vec<Vec<RouteKey>> =
        events.iter().map(|e| if e.target.is_some() { Vec::new() } else { routing::route_keys(e) }).collect();
    let mut keys: Vec<RouteKey> = event_keys.iter().flatten().cloned().collect();
    keys.sort();
    keys.dedup();
    let indexed: HashMap<&RouteKey, Arc<[SubscriptionId]>> =
        keys.iter().zip(cache.routes(store, &keys).await?).collect();
    let candidates: Vec<Vec<SubscriptionId>> = event_keys
        .iter()
        .zip(events)
        .map(|(ks, e)| {
            if let Some(target) = &e.target {
                return vec![target.clone()];
            }
            let mut ids: Vec<SubscriptionId> = ks.iter().flat_map(|k| indexed[k].iter().cloned()).collect();
            ids.sort();
            ids.dedup();
            ids
        })
        .collect();
    let mut ids: Vec<SubscriptionId> = candidates.iter().flatten().cloned().collect();
    ids.sort();
    ids.dedup();
    let mut subs: HashMap<SubscriptionId, Option<Arc<Subscription>>> =
        ids.iter().cloned().zip(cache.get_many(store, &ids).await?).collect();
    // A candidate this cache does not know, or thinks inactive or
    // unverified while an event is in its scope, may have been created,
    // verified or re-activated by another container: ask the store before
    // leaving it out (once per subscription per cache TTL).
    let doubtful: Vec<SubscriptionId> = ids
        .iter()
        .filter(|id| match &subs[*id] {
            None => true,
            Some(s) => !s.is_routable() && events.iter().any(|e| routing::in_scope(s, e)),
        })
        .cloned()
        .collect();
    let confirmed =
        all_bounded(doubtful.iter().map(|id| cache.confirm(store, id)).collect(), MAX_STORE_IN_FLIGHT).await;
    for (id, fresh) in doubtful.into_iter().zip(confirmed) {
        subs.insert(id, fresh?.map(Arc::new));
    }
    let now = Utc::now();
    let sagas: Vec<Saga> = events
        .iter()
        .zip(&candidates)
        .flat_map(|(e, ids)| {
            ids.iter()
                .filter_map(|id| subs[id].as_deref())
                .filter(|s| routing::wants(s, e))
                .map(|s| {
                    let saga = Saga {
                        lane: crate::routing::lane_for(s, e),
                        pull_key: crate::pull::pull_key(s, e, now),
                        ..Saga::new(ids::saga_id(&e.id, &s.id), &e.id, &s.id, None, now)
                    };
                    // Pull-only: filed for pull, completed as inserted (no
                    // lane, no job: nothing is pushed).
                    if s.is_pull_only() {
                        Saga { lane: None, state: SagaState::filed_for_pull(), ..saga }
                    } else {
                        saga
                    }
                })
                .collect::<Vec<_>>()
        })
        .collect();
    // Ordered sagas enter their lanes before they exist: a saga never runs
    // outside its lane.
    super::ordering::enqueue(h, &sagas).await?;
    let created = if sagas.is_empty() { Vec::new() } else { h.stores.sagas.create(&sagas).await? };
    h.failpoints.hit("route.after_sagas");
    // Then each partition's mark moves past these events, whether or not
    // any subscription wanted them.
    super::ordering::routed(h, events).await?;
    // The per-saga lines look up each saga's event: only when they are logged.
    if tracing::enabled!(tracing::Level::DEBUG) {
        for (s, new) in sagas.iter().zip(&created) {
            let trace_id = events.iter().find(|e| e.id == s.event_id).and_then(|e| e.trace_id.as_deref()).unwrap_or("");
            tracing::debug!(event_id = %s.event_id, saga_id = %s.id, subscription_id = %s.subscription_id, trace_id, new, "routed");
        }
    }
    Ok(created.into_iter().filter(|c| *c).count())
}
