//! Automatic requeue ([`crate::recovery`] decides): the stage that sees an
//! outage end queues a request ([`after_breaker_closed`] in the delivery
//! stage, [`after_re_enabled`] in a subscription change); the requeue
//! stage turns it into a bulk requeue job
//! ([`super::requeue_queue::auto_requeue`]), the job
//! `POST /v1/dead-letters/requeue` starts, by [`crate::audit::SYSTEM`], with its
//! audit record. So on AWS only the requeue function writes jobs; the
//! delivery function only sends a message to the requeue queue.
//!
//! The requeued deliveries go through the normal path: the subscription's
//! `rate_limit` and `max_in_flight` hold for them as for any delivery.

use chrono::Utc;

use crate::context::Hookline;
use crate::health::Health;
use crate::message::RequeueMessage;
use crate::recovery::{self, AutoRequeue, Trigger};
use crate::subscription::Subscription;

/// Queues an automatic requeue of `sub`'s dead letters since `since`
/// (the outage's start, if known: else there is nothing to requeue), until
/// now. A failure is logged: the outage is over either way, and its dead
/// letters wait for an operator, as without the setting.
async fn request(h: &Hookline, sub: &Subscription, trigger: Trigger, since: Option<chrono::DateTime<Utc>>) {
    let Some(since) = since.filter(|_| sub.auto_requeue) else { return };
    tracing::info!(subscription_id = %sub.id, ?trigger, %since, "automatic requeue requested");
    let req = AutoRequeue { subscription_id: sub.id.clone(), trigger, since, until: Utc::now(), waits: 0 };
    if let Err(e) = h.stores.requeues.send_now(&[RequeueMessage::AutoRequeue { auto_requeue: req }]).await {
        tracing::error!(subscription_id = %sub.id, error = %e, "automatic requeue not queued: the outage's dead letters wait for an operator");
    }
}

/// `sub`'s breaker closed, its record having been `before`: with
/// `auto_requeue`, the dead letters of the outage are to be requeued.
pub async fn after_breaker_closed(h: &Hookline, sub: &Subscription, before: &Health) {
    request(h, sub, Trigger::BreakerClosed, recovery::breaker_outage_start(before)).await;
}

/// `after` was enabled again, having been `before` with `health` (read
/// before the re-enable forgot its failing run): with `auto_requeue`, and
/// if Hookline had disabled it, the dead letters of the outage are to be
/// requeued (once it passed its handshake again).
pub async fn after_re_enabled(h: &Hookline, before: &Subscription, after: &Subscription, health: Option<&Health>) {
    request(h, after, Trigger::ReEnabled, recovery::disable_outage_start(before, health)).await;
}
