//! Attempt records: one row per delivery attempt, keyed `(saga_id, attempt)`
//! so a job processed twice is recorded once (docs/architecture.md#invariants,
//! rule 2, and #identifiers: the attempt key is `(saga_id, attempt)`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::{EventId, SagaId, SubscriptionId};
use crate::saga::{decide_acked, AttemptResult, Input, Rules, SagaState, SagaStatus};
use crate::subscription::Subscription;

/// One delivery attempt as recorded by the delivery stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// The saga attempted.
    pub saga_id: SagaId,
    /// 1-based attempt number within the saga.
    pub attempt: u32,
    /// The event (for reporting without a join).
    pub event_id: EventId,
    /// The subscription (for reporting without a join).
    pub subscription_id: SubscriptionId,
    /// HTTP status, when the subscriber answered.
    pub status_code: Option<u16>,
    /// What went wrong, when something did.
    pub error: Option<String>,
    /// Time from send to answer (or failure).
    pub latency_ms: u64,
    /// When the attempt ended.
    pub at: DateTime<Utc>,
    /// How it ended, as the saga stage reads it.
    pub result: AttemptResult,
    /// The job's lane ([`crate::message::DeliveryJob::lane`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<crate::ordering::LaneRef>,
    /// The start of the subscriber's response body ([`excerpt`]), kept only
    /// for attempts that did not succeed (a success stores none, so the
    /// happy path writes nothing more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_excerpt: Option<String>,
}

/// Most bytes of a response body an attempt keeps ([`excerpt`]).
pub const EXCERPT_BYTES: usize = 256;

/// What an attempt keeps of a response body: at most [`EXCERPT_BYTES`]
/// bytes of its text (already decoded as lossy UTF-8), cut at a character
/// boundary, with line breaks and tabs as spaces and every other control
/// character as U+FFFD, so the excerpt is safe to show and log. `None`
/// for an empty body.
pub fn excerpt(body: &str) -> Option<String> {
    let mut out = String::new();
    for c in body.chars() {
        let c = match c {
            '\n' | '\r' | '\t' => ' ',
            c if c.is_control() => '\u{FFFD}',
            c => c,
        };
        if out.len() + c.len_utf8() > EXCERPT_BYTES {
            break;
        }
        out.push(c);
    }
    (!out.is_empty()).then_some(out)
}

impl Attempt {
    /// The API view of one attempt.
    pub fn to_public_json(&self) -> serde_json::Value {
        serde_json::json!({
            "attempt": self.attempt,
            "status_code": self.status_code,
            "error": self.error,
            "latency_ms": self.latency_ms,
            "at": self.at,
            "response_excerpt": self.response_excerpt,
        })
    }
}

impl Attempt {
    /// Whether this attempt, to subscription `sub`, completes its saga with
    /// nothing else to do: the saga stage's decision for it
    /// ([`crate::saga::decide_acked`] from `Pending` with no attempt, the
    /// state a first attempt runs in, with the subscription's rules) is
    /// `Completed` with no effect. True only for a first attempt that was
    /// delivered, to a subscription that awaits no acknowledgement, outside
    /// an ordered lane (whose end lets the next saga go: an effect). The
    /// delivery stage asks it so the store may keep the attempt and the
    /// completion in one write
    /// ([`crate::ports::AttemptStore::record_completing`]); the rules are the
    /// saga stage's, so both decide alike.
    pub fn completes_its_saga(&self, sub: &Subscription) -> bool {
        if self.attempt != 1 || self.lane.is_some() {
            return false;
        }
        let from = SagaState { status: SagaStatus::Pending, attempts: 0, next_attempt_at: None, last_error: None };
        let input = Input::Outcome { attempt: 1, result: self.result.clone(), status: self.status_code };
        let rules =
            Rules { policy: &sub.retry_policy, dead_letter_on: &sub.dead_letter_on, ack_timeout: sub.ack_timeout() };
        decide_acked(&from, &input, &rules, self.at, 0.0)
            .is_some_and(|d| d.next.status == SagaStatus::Completed && d.effects.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_excerpt_is_short_printable_and_cut_at_a_character() {
        assert_eq!(excerpt(""), None);
        assert_eq!(excerpt("{\"error\":\n\t\"down\"}\u{7}").as_deref(), Some("{\"error\":  \"down\"}\u{FFFD}"));
        let long = "é".repeat(200); // 400 bytes
        let e = excerpt(&long).unwrap();
        assert_eq!(e.len(), 256);
        assert!(e.chars().all(|c| c == 'é'));
        let odd = format!("a{}", "é".repeat(200));
        assert_eq!(excerpt(&odd).unwrap().len(), 255, "a two-byte character is not cut");
    }
}
