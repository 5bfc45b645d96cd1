//! The operational events of requeues, skips and replays, published into
//! Hookline like `hookline.dead_letter.created` ([`super::failing::publish`]:
//! stored and routed like any event, under an id derived from their cause,
//! so a stage that does its work again publishes each once):
//!
//! - `hookline.dead_letter.requeued` and `hookline.dead_letter.skipped`:
//!   one event per request (a single requeue or skip: one dead letter), or
//!   per page of a bulk job (its dead letters acted on, at most
//!   `BULK_PAGE_SIZE`): a job of 10,000 dead letters publishes one event
//!   per page (100 at the default page size), each naming the dead letters
//!   it moved, so a monitor learns what moved without an event per item.
//!   Body: `{dead_letter_ids, count, job_id, subscription_id, actor, reason}`
//!   (`job_id` null for a single request; `subscription_id` the dead
//!   letter's, or the one a job's filter names, else null).
//! - `hookline.replay.started`: one per replay job (when its first page is
//!   planned) or single replay (when its sagas are created). Body:
//!   `{job_id, event_id, subscription_id, filter, actor, reason}`.
//!
//! A failure to publish is returned: the stage's message is received
//! again, and the work it does again is idempotent.

use serde_json::json;

use super::failing::publish;
use crate::bulk::{ItemOutcome, Job, JobSpec, PagePlan};
use crate::context::Hookline;
use crate::error::StoreError;
use crate::ids::{DeadLetterId, EventId, SubscriptionId};

/// `hookline.dead_letter.requeued`.
pub const DEAD_LETTER_REQUEUED: &str = "hookline.dead_letter.requeued";
/// `hookline.dead_letter.skipped`.
pub const DEAD_LETTER_SKIPPED: &str = "hookline.dead_letter.skipped";
/// `hookline.replay.started`.
pub const REPLAY_STARTED: &str = "hookline.replay.started";

/// The body of a requeued or skipped event.
fn moved(ids: &[&str], job_id: Option<&str>, subscription: Option<&SubscriptionId>, by: By<'_>) -> serde_json::Value {
    json!({
        "dead_letter_ids": ids,
        "count": ids.len(),
        "job_id": job_id,
        "subscription_id": subscription,
        "actor": by.actor,
        "reason": by.reason,
    })
}

/// Who asked, and why (the request's audit).
#[derive(Debug, Clone, Copy)]
pub struct By<'a> {
    /// The actor.
    pub actor: &'a str,
    /// Their reason.
    pub reason: &'a str,
}

/// One dead letter requeued (`requeue`) or skipped by a single request.
pub async fn resolved_one(
    h: &Hookline,
    requeue: bool,
    dead_letter: &DeadLetterId,
    subscription: &SubscriptionId,
    by: By<'_>,
) -> Result<(), StoreError> {
    let event_type = if requeue { DEAD_LETTER_REQUEUED } else { DEAD_LETTER_SKIPPED };
    let data = moved(&[dead_letter.as_str()], None, Some(subscription), by);
    publish(h, &[dead_letter.as_str()], event_type, data).await
}

/// A page of a requeue or skip job acted on: one event naming the dead
/// letters it moved (none moved, none published). Replay pages publish
/// nothing ([`replay_job_started`] is their event).
pub async fn page_done(h: &Hookline, job: &Job, plan: &PagePlan, outcomes: &[ItemOutcome]) -> Result<(), StoreError> {
    let (event_type, query) = match &job.spec {
        JobSpec::Requeue(q) => (DEAD_LETTER_REQUEUED, q),
        JobSpec::Skip(q) => (DEAD_LETTER_SKIPPED, q),
        JobSpec::Replay(_) => return Ok(()),
    };
    let ids: Vec<&str> =
        plan.items.iter().zip(outcomes).filter(|(_, o)| **o == ItemOutcome::Done).map(|(id, _)| id.as_str()).collect();
    if ids.is_empty() {
        return Ok(());
    }
    let by = By { actor: &job.actor, reason: &job.reason };
    let data = moved(&ids, Some(&job.id), query.subscription_id.as_ref(), by);
    let page = plan.page.to_string();
    publish(h, &[job.id.as_str(), &page], event_type, data).await
}

/// A replay job starts (its first page).
pub async fn replay_job_started(h: &Hookline, job: &Job) -> Result<(), StoreError> {
    let JobSpec::Replay(f) = &job.spec else { return Ok(()) };
    let data = json!({
        "job_id": job.id,
        "event_id": f.event_id,
        "subscription_id": f.subscription_id,
        "filter": job.spec.filter(),
        "actor": job.actor,
        "reason": job.reason,
    });
    publish(h, &[job.id.as_str()], REPLAY_STARTED, data).await
}

/// A single replay (`POST /v1/events/{id}/replay`) made its sagas.
pub async fn replay_started(
    h: &Hookline,
    event: &EventId,
    subscription: Option<&SubscriptionId>,
    replay_key: &str,
    by: By<'_>,
) -> Result<(), StoreError> {
    let data = json!({
        "job_id": null,
        "event_id": event,
        "subscription_id": subscription,
        "filter": null,
        "actor": by.actor,
        "reason": by.reason,
    });
    publish(h, &[event.as_str(), replay_key], REPLAY_STARTED, data).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_new_types_are_operational() {
        for t in [DEAD_LETTER_REQUEUED, DEAD_LETTER_SKIPPED, REPLAY_STARTED] {
            assert!(crate::routing::is_operational(t), "{t}");
        }
    }

    #[test]
    fn a_moved_body_names_every_dead_letter_and_counts_them() {
        let by = By { actor: "system", reason: "automatic requeue: breaker closed" };
        let v = moved(&["dl_a", "dl_b"], Some("job_x"), Some(&SubscriptionId::new("sub_a")), by);
        assert_eq!(v["dead_letter_ids"], json!(["dl_a", "dl_b"]));
        assert_eq!((v["count"].as_u64(), v["job_id"].as_str()), (Some(2), Some("job_x")));
        assert_eq!((v["subscription_id"].as_str(), v["actor"].as_str()), (Some("sub_a"), Some("system")));
    }
}
