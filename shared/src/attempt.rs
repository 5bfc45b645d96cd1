//! Attempt records: one row per delivery attempt, keyed `(saga_id, attempt)`
//! so a job processed twice is recorded once (seed 004: `unique(saga_id,
//! attempt)`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::saga::AttemptResult;

/// One delivery attempt as recorded by the delivery stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// The saga attempted.
    pub saga_id: String,
    /// 1-based attempt number within the saga.
    pub attempt: u32,
    /// The event (for reporting without a join).
    pub event_id: String,
    /// The subscription (for reporting without a join).
    pub subscription_id: String,
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

/// A saga that gave up, with the snapshot ops need to decide what to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// The dead saga's id (one dead letter per saga).
    pub id: String,
    /// The event.
    pub event_id: String,
    /// The subscription.
    pub subscription_id: String,
    /// The event type, for listing.
    pub event_type: String,
    /// Why the saga gave up.
    pub reason: String,
    /// Attempts made.
    pub attempts: u32,
    /// The saga as it ended.
    pub saga_snapshot: serde_json::Value,
    /// When it was dead-lettered.
    pub created_at: DateTime<Utc>,
    /// `open`, `requeued` or `skipped`.
    pub state: String,
    /// Who resolved it, when and why (requeue or skip audit).
    pub resolution: Option<serde_json::Value>,
    /// The event as it would be delivered (envelope and the fields its
    /// headers come from), so a requeue still works after the event itself
    /// has expired: dead letters are kept longer than events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<crate::event::EventRecord>,
}

/// Messages on the delivery queue: everything a delivery needs to find its
/// event and subscription.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryJob {
    /// The saga.
    pub saga_id: String,
    /// Its event.
    pub event_id: String,
    /// Its subscription.
    pub subscription_id: String,
    /// The `webhook-id` header.
    pub webhook_id: String,
    /// Which attempt this job is.
    pub attempt: u32,
}

/// Messages on the retry-timer queue: wake the saga when its backoff ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryTimer {
    /// The saga's event (with the id, the saga's key).
    pub event_id: String,
    /// The saga.
    pub saga_id: String,
    /// The attempt that is due.
    pub attempt: u32,
    /// When it is due.
    pub due_at: DateTime<Utc>,
}
