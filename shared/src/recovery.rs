//! Recovery without an operator: the pure decisions of a subscription's
//! automatic requeue (`auto_requeue: true`, docs/operations.md#automatic-requeue).
//!
//! When such a subscription's circuit breaker closes, or when it is
//! enabled again after Hookline disabled it, its open dead letters created
//! since the outage began are requeued by one bulk job
//! ([`crate::bulk::Job`], the job `POST /v1/dead-letters/requeue` starts),
//! with actor [`crate::audit::SYSTEM`]. The stage that sees the trigger
//! (the delivery stage for a breaker, the API for a re-enable) only queues
//! an [`AutoRequeue`] request on the requeue queue; the requeue stage turns
//! it into the job ([`crate::stage::auto_requeue`]), so only the stage
//! that already writes jobs writes them.
//!
//! The filter is bounded: one subscription, open dead letters, created in
//! `[since, until)`, through the dead-letter listing indexes; never all
//! dead letters. The job id derives from (subscription, outage start), so
//! one outage starts at most one job however often its trigger is seen.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::dead_letter::{DeadLetterQuery, DeadLetterState};
use crate::health::Health;
use crate::ids::SubscriptionId;
use crate::subscription::Subscription;

/// How long a request for a re-enabled subscription waits, each time,
/// for the verification handshake it must pass before deliveries resume.
pub const VERIFY_WAIT: Duration = Duration::from_secs(5);

/// How many times a request waits [`VERIFY_WAIT`] (10 minutes in all)
/// before it gives up on a subscription that never passed the handshake.
pub const MAX_VERIFY_WAITS: u32 = 120;

/// What started an automatic requeue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// The subscription's circuit breaker closed (a probe succeeded).
    BreakerClosed,
    /// An operator enabled it again after Hookline disabled it.
    ReEnabled,
}

impl Trigger {
    /// The reason recorded on the job, each dead letter and the audit
    /// record.
    pub fn reason(self) -> &'static str {
        match self {
            Trigger::BreakerClosed => "automatic requeue: breaker closed",
            Trigger::ReEnabled => "automatic requeue: re-enabled",
        }
    }
}

/// The request an automatic requeue is queued as (the requeue queue's
/// `{"auto_requeue": {...}}` message).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutoRequeue {
    /// The subscription.
    pub subscription_id: SubscriptionId,
    /// What started it.
    pub trigger: Trigger,
    /// When the outage began: its dead letters from then on are requeued.
    pub since: DateTime<Utc>,
    /// When it ended (the trigger): dead letters from then on are not.
    pub until: DateTime<Utc>,
    /// How many times it has waited for the subscription's handshake.
    #[serde(default)]
    pub waits: u32,
}

impl AutoRequeue {
    /// The dead letters it requeues: the subscription's open ones created
    /// in `[since, until)`.
    pub fn query(&self) -> DeadLetterQuery {
        DeadLetterQuery {
            subscription_id: Some(self.subscription_id.clone()),
            state: Some(DeadLetterState::Open),
            since: Some(self.since),
            until: Some(self.until),
            ..DeadLetterQuery::default()
        }
    }

    /// The parts its job id is derived from (keyed with the deployment's
    /// secret, [`job_id`]): the subscription and the outage start, so the
    /// same outage makes the same job.
    pub fn cause(&self) -> [String; 3] {
        ["auto-requeue".to_string(), self.subscription_id.to_string(), self.since.timestamp_millis().to_string()]
    }

    /// The same request, waiting once more for the handshake.
    pub fn waited(&self) -> AutoRequeue {
        AutoRequeue { waits: self.waits + 1, ..self.clone() }
    }
}

/// A job id (`job_` and 32 lowercase hex digits, the shape of every job
/// id) from a MAC of the request's [`AutoRequeue::cause`].
pub fn job_id(mac: &[u8; 32]) -> String {
    format!("job_{}", mac[..16].iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// When the outage whose end is a breaker closing began: the start of the
/// failing run before it, else the last failure (a run forgotten by a
/// re-enable meanwhile). `None`: no failure on record, nothing to requeue.
pub fn breaker_outage_start(before: &Health) -> Option<DateTime<Utc>> {
    before.failing_since.or(before.last_error_at)
}

/// When the outage of a subscription Hookline disabled began: the start
/// of its failing run (read before a re-enable forgets it), else when it
/// was disabled (a 410 disables at once). `None` if it was not disabled by
/// Hookline: an operator's switch-off is no outage.
pub fn disable_outage_start(before: &Subscription, health: Option<&Health>) -> Option<DateTime<Utc>> {
    before.disabled_reason.as_ref()?;
    let disabled_at = before.disabled_at?;
    Some(health.and_then(|h| h.failing_since).map_or(disabled_at, |f| f.min(disabled_at)))
}

/// What the requeue stage does with a request now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Start the job.
    Start,
    /// Ask again after [`VERIFY_WAIT`]: the subscription is enabled but
    /// has not passed its handshake yet (requeued deliveries would be
    /// refused as unverified).
    WaitForVerification,
    /// Nothing to do, for this reason (logged).
    Drop(&'static str),
}

/// Decides a request against the subscription as stored now.
pub fn decide(req: &AutoRequeue, sub: Option<&Subscription>) -> Next {
    let Some(sub) = sub else { return Next::Drop("the subscription no longer exists") };
    if !sub.auto_requeue {
        return Next::Drop("the subscription no longer asks for automatic requeue");
    }
    if !sub.active {
        return Next::Drop("the subscription is inactive");
    }
    if sub.verified {
        return Next::Start;
    }
    if sub.verification_error.is_some() {
        return Next::Drop("the subscription failed its verification handshake");
    }
    if req.waits >= MAX_VERIFY_WAITS {
        return Next::Drop("the subscription did not pass its verification handshake in time");
    }
    Next::WaitForVerification
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + s, 0).unwrap()
    }

    fn req() -> AutoRequeue {
        AutoRequeue {
            subscription_id: SubscriptionId::new("sub_a"),
            trigger: Trigger::BreakerClosed,
            since: t(0),
            until: t(60),
            waits: 0,
        }
    }

    fn sub() -> Subscription {
        let mut s = crate::testkit::subscription();
        s.id = SubscriptionId::new("sub_a");
        s.auto_requeue = true;
        s
    }

    #[test]
    fn the_query_is_one_subscriptions_open_dead_letters_of_the_outage() {
        let q = req().query();
        assert_eq!(q.subscription_id.as_ref().map(|s| s.as_str()), Some("sub_a"));
        assert_eq!(q.state, Some(DeadLetterState::Open));
        assert_eq!((q.since, q.until), (Some(t(0)), Some(t(60))));
    }

    #[test]
    fn one_outage_is_one_job_id_whatever_ends_it() {
        let a = req();
        let later = AutoRequeue { until: t(90), waits: 3, trigger: Trigger::ReEnabled, ..req() };
        assert_eq!(a.cause(), later.cause());
        let other = AutoRequeue { since: t(1), ..req() };
        assert_ne!(a.cause(), other.cause());
        let id = job_id(&[0xab; 32]);
        assert_eq!(id, format!("job_{}", "ab".repeat(16)));
    }

    #[test]
    fn a_breaker_outage_starts_with_its_failing_run() {
        let h = Health { failing_since: Some(t(5)), last_error_at: Some(t(50)), ..Health::default() };
        assert_eq!(breaker_outage_start(&h), Some(t(5)));
        let forgotten = Health { failing_since: None, ..h.clone() };
        assert_eq!(breaker_outage_start(&forgotten), Some(t(50)));
        assert_eq!(breaker_outage_start(&Health::default()), None);
    }

    #[test]
    fn a_disable_outage_starts_with_the_failing_run_or_the_disable() {
        let mut s = sub();
        s.disabled_reason = Some("failing".into());
        s.disabled_at = Some(t(100));
        let h = Health { failing_since: Some(t(10)), ..Health::default() };
        assert_eq!(disable_outage_start(&s, Some(&h)), Some(t(10)));
        assert_eq!(disable_outage_start(&s, None), Some(t(100)));
        s.disabled_reason = None;
        assert_eq!(disable_outage_start(&s, Some(&h)), None, "an operator's switch-off is no outage");
    }

    #[test]
    fn a_request_waits_for_the_handshake_then_starts_or_is_dropped() {
        let mut s = sub();
        assert_eq!(decide(&req(), Some(&s)), Next::Start);
        s.verified = false;
        assert_eq!(decide(&req(), Some(&s)), Next::WaitForVerification);
        let tired = AutoRequeue { waits: MAX_VERIFY_WAITS, ..req() };
        assert!(matches!(decide(&tired, Some(&s)), Next::Drop(_)));
        s.verification_error = Some("HTTP 500".into());
        assert!(matches!(decide(&req(), Some(&s)), Next::Drop(_)));
        let mut off = sub();
        off.active = false;
        assert!(matches!(decide(&req(), Some(&off)), Next::Drop(_)));
        off = sub();
        off.auto_requeue = false;
        assert!(matches!(decide(&req(), Some(&off)), Next::Drop(_)));
        assert!(matches!(decide(&req(), None), Next::Drop(_)));
        assert_eq!(req().waited().waits, 1);
    }
}
