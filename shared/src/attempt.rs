//! Attempt records: one row per delivery attempt, keyed `(saga_id, attempt)`
//! so a job processed twice is recorded once (docs/architecture.md#invariants,
//! rule 2, and #identifiers: the attempt key is `(saga_id, attempt)`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::{EventId, SagaId, SubscriptionId};
use crate::saga::AttemptResult;

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
        })
    }
}
