//! The circuit breaker around each attempt ([`crate::health`] decides;
//! this reads and writes the [`crate::ports::HealthStore`]).
//!
//! Before an attempt, [`admit`] asks the subscription's breaker: a closed
//! one lets it through; an open one defers it (no attempt counted) until
//! its cool-down ends; then one worker claims the probe with a conditional
//! write and the others keep waiting. After it, [`observe`] writes the
//! record only when the outcome changed something (a failure, a success
//! after failures), and counts the attempt in this process's window, which
//! [`flush_windows`] merges into the stored record at most every
//! [`FLUSH_EVERY`] per subscription. The outcomes of one process's
//! concurrent attempts to one subscription are written by one of them,
//! together: when an endpoint goes down with many requests open, their
//! failures are one or two writes, not as many conditional writes that
//! mostly conflict and give up.
//!
//! Each process caches what it read for [`READ_EVERY`], so a breaker
//! opened by one Lambda container holds the others within that delay.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use chrono::Utc;

use crate::audit;
use crate::context::Hookline;
use crate::error::StoreError;
use crate::health::{self, BreakerState, Gate, Health, Outcome, Window};
use crate::ids::SubscriptionId;

/// How often a process merges its attempt counts into a subscription's record.
pub const FLUSH_EVERY: Duration = Duration::from_secs(10);
/// Conditional writes tried before giving up on one change (another
/// worker kept writing first; the next outcome writes again).
const WRITE_TRIES: usize = 3;
/// Most writes one attempt's task makes for the outcomes other attempts
/// queued meanwhile; what is still queued then is written by the next
/// outcome of that subscription.
const MAX_WRITE_ROUNDS: usize = 8;

pub use crate::health::{HealthCache, Unhealthy, READ_EVERY};

/// Whether a job of `sub` may be attempted now. [`Gate::Probe`] means this
/// worker has claimed the probe.
pub async fn admit(h: &Hookline, sub: &SubscriptionId) -> Result<Gate, StoreError> {
    let now = Utc::now();
    let current = match h.health_cache.cached(sub) {
        Some(c) => c,
        None => read(h, sub).await?,
    };
    match health::gate(&current, now) {
        Gate::Probe => {
            let claim = health::claim_probe(&current, &h.config.breaker, now);
            if h.stores.health.put(sub, &claim, current.version).await? {
                tracing::info!(subscription_id = %sub, "breaker half-open: probing the endpoint");
                h.health_cache.remember(sub, claim);
                Ok(Gate::Probe)
            } else {
                // Another worker probes; wait for what it finds.
                let fresh = read(h, sub).await?;
                Ok(match health::gate(&fresh, now) {
                    Gate::Attempt => Gate::Attempt,
                    Gate::Wait(d) => Gate::Wait(d),
                    Gate::Probe => Gate::Wait(Duration::from_secs(1)),
                })
            }
        }
        g => Ok(g),
    }
}

async fn read(h: &Hookline, sub: &SubscriptionId) -> Result<Health, StoreError> {
    let health = h.stores.health.get(sub).await?.unwrap_or_default();
    h.health_cache.remember(sub, health.clone());
    Ok(health)
}

/// Records an attempt's outcome: counts it in the window, and writes the
/// breaker's record when the outcome changed it (a breaker that opened or
/// closed leaves an audit record, by [`audit::SYSTEM`]: the conditional
/// write makes one worker the one that flipped it). While another attempt
/// of this process writes the subscription's record, the outcome is left
/// for it to write with its own ([`health::after_all`]). A failure to
/// write is logged, not returned: the attempt itself is recorded either
/// way. Returns the last record this call wrote, if it wrote one.
pub async fn observe(h: &Hookline, sub: &SubscriptionId, outcome: &Outcome, latency_ms: u64) -> Option<Health> {
    if !h.health_cache.count(sub, outcome, Utc::now(), latency_ms) {
        return None;
    }
    // This task's turn ends when nothing is left queued, or when it is
    // dropped half-way (then the next outcome takes the turn).
    let turn = Turn { h, sub };
    let mut written = None;
    for _ in 0..MAX_WRITE_ROUNDS {
        let (outcomes, cached) = h.health_cache.take_outcomes(sub);
        if outcomes.is_empty() {
            std::mem::forget(turn);
            return written;
        }
        match update(h, sub, cached, |base| health::after_all(base, &outcomes, &h.config.breaker)).await {
            Ok(Some((before, after))) => {
                announce(h, sub, &before, &after);
                if flipped(&before, &after).is_some() {
                    let subscription = cached_subscription(h, sub).await;
                    audit_flip(h, sub, subscription.as_deref(), &before, &after).await;
                    if let (Some(s), Some(audit::Action::BreakerClosed)) = (&subscription, flipped(&before, &after)) {
                        super::auto_requeue::after_breaker_closed(h, s, &before).await;
                    }
                }
                written = Some(after);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(subscription_id = %sub, error = %e, outcomes = outcomes.len(), "breaker not updated")
            }
        }
    }
    drop(turn);
    written
}

/// The turn of one task to write a subscription's queued outcomes
/// ([`observe`]); dropping it ends the turn.
struct Turn<'a> {
    h: &'a Hookline,
    sub: &'a SubscriptionId,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.h.health_cache.end_turn(self.sub);
    }
}

/// What a write did to the breaker, as an audit action: opened (from
/// closed) or closed; `None` for anything else.
fn flipped(before: &Health, after: &Health) -> Option<audit::Action> {
    match (before.breaker, after.breaker) {
        (BreakerState::Closed, BreakerState::Open) => Some(audit::Action::BreakerOpened),
        (BreakerState::HalfOpen | BreakerState::Open, BreakerState::Closed) => Some(audit::Action::BreakerClosed),
        _ => None,
    }
}

/// The subscription, from the cache delivery keeps (`None` if unknown or
/// unreadable).
async fn cached_subscription(
    h: &Hookline,
    sub: &SubscriptionId,
) -> Option<std::sync::Arc<crate::subscription::Subscription>> {
    match h.subscription_cache.get_many(h.stores.subscriptions.as_ref(), std::slice::from_ref(sub)).await {
        Ok(subs) => subs.into_iter().flatten().next(),
        Err(_) => None,
    }
}

/// The audit record of a breaker that opened (from closed) or closed, of
/// the subscription's tenant.
async fn audit_flip(
    h: &Hookline,
    sub: &SubscriptionId,
    subscription: Option<&crate::subscription::Subscription>,
    before: &Health,
    after: &Health,
) {
    let Some(action) = flipped(before, after) else { return };
    let reason = match action {
        audit::Action::BreakerOpened => format!("{} consecutive failures", after.consecutive_failures),
        _ => "a probe succeeded".to_string(),
    };
    let tenant = subscription.and_then(|s| s.tenant_id.clone());
    let rec = audit::AuditRecord::new(action, audit::SYSTEM)
        .subscription(sub)
        .tenant(tenant.as_ref())
        .reason(reason)
        .details(serde_json::json!({"last_error": after.last_error, "cool_down_ms": after.cool_down_ms}));
    h.audit(rec).await;
}

/// Forgets a subscription's failing run (it was re-enabled: the failures
/// before must not disable it again at once). Written only if there is a
/// run to forget.
pub async fn restart_failing_run(h: &Hookline, sub: &SubscriptionId) -> Result<(), StoreError> {
    update(h, sub, None, health::restart_failing_run).await.map(|_| ())
}

/// Applies `change` to a subscription's record and writes the result
/// conditionally on the version it was read at, starting from `first` (a
/// cached copy) when given; if another worker wrote meanwhile, reads and
/// applies again, at most [`WRITE_TRIES`] times. `change` answering `None`
/// writes nothing. Returns the record before and after the write.
async fn update(
    h: &Hookline,
    sub: &SubscriptionId,
    mut first: Option<Health>,
    change: impl Fn(&Health) -> Option<Health>,
) -> Result<Option<(Health, Health)>, StoreError> {
    for _ in 0..WRITE_TRIES {
        let base = match first.take() {
            Some(c) => c,
            None => read(h, sub).await?,
        };
        let Some(next) = change(&base) else { return Ok(None) };
        if h.stores.health.put(sub, &next, base.version).await? {
            h.health_cache.remember(sub, next.clone());
            return Ok(Some((base, next)));
        }
    }
    Err(StoreError::other(format!("health record kept changing under {WRITE_TRIES} writes")))
}

/// Log lines and metrics for a breaker that changed state.
fn announce(h: &Hookline, sub: &SubscriptionId, before: &Health, after: &Health) {
    match (before.breaker, after.breaker) {
        (BreakerState::Closed, BreakerState::Open) => {
            h.metrics.breakers_opened.fetch_add(1, Relaxed);
            tracing::warn!(
                subscription_id = %sub,
                consecutive_failures = after.consecutive_failures,
                cool_down_ms = after.cool_down_ms,
                last_error = after.last_error.as_deref().unwrap_or(""),
                "breaker opened: deliveries to this subscription wait for the cool-down, then one probe"
            );
        }
        (BreakerState::HalfOpen, BreakerState::Open) => {
            tracing::warn!(subscription_id = %sub, cool_down_ms = after.cool_down_ms, "breaker probe failed: open again");
        }
        (BreakerState::HalfOpen | BreakerState::Open, BreakerState::Closed) => {
            h.metrics.breakers_closed.fetch_add(1, Relaxed);
            tracing::info!(subscription_id = %sub, "breaker closed: the probe succeeded");
        }
        _ => {}
    }
}

/// Merges this process's attempt counts into the stored records: those
/// not flushed for [`FLUSH_EVERY`], or all of them with `all` (shutdown,
/// the end of a test). The only health write a healthy subscription
/// causes, at most one per subscription per process per [`FLUSH_EVERY`].
pub async fn flush_windows(h: &Hookline, all: bool) {
    let due: Vec<(SubscriptionId, Window)> = {
        let mut g = h.health_cache.inner.lock().expect("health cache");
        let now = Instant::now();
        g.retain(|_, e| {
            !e.pending.buckets.is_empty()
                || e.writing
                || !e.outcomes.is_empty()
                || e.read_at.elapsed() < READ_EVERY * 12
        });
        g.iter_mut()
            .filter(|(_, e)| !e.pending.buckets.is_empty() && (all || e.flushed_at.elapsed() >= FLUSH_EVERY))
            .map(|(id, e)| {
                e.flushed_at = now;
                (id.clone(), std::mem::take(&mut e.pending))
            })
            .collect()
    };
    for (id, window) in due {
        let merged = update(h, &id, None, |current| {
            let mut next = current.clone();
            next.window.merge(&window, Utc::now());
            next.version = current.version + 1;
            Some(next)
        })
        .await;
        if let Err(e) = merged {
            tracing::warn!(subscription_id = %id, error = %e, "attempt counts of the health window not stored; they are dropped");
        }
    }
}
