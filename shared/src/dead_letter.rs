//! Dead letters: one per saga that gave up, with the snapshots ops need to
//! decide (the saga as it ended, the event as it would be delivered), and
//! the audit record of what ops did with it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::{DeadLetterId, EventId, SagaId, SubscriptionId};

/// Where ops are with a dead letter. Open ones raise the alarm; the others
/// carry their [`Resolution`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeadLetterState {
    /// Waiting for ops.
    Open,
    /// A new saga was created for it.
    Requeued,
    /// Closed without delivering.
    Skipped,
}

impl DeadLetterState {
    /// Every state, in the order ops meet them.
    pub const ALL: [DeadLetterState; 3] = [DeadLetterState::Open, DeadLetterState::Requeued, DeadLetterState::Skipped];

    /// The one spelling, in the API, the stores and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            DeadLetterState::Open => "open",
            DeadLetterState::Requeued => "requeued",
            DeadLetterState::Skipped => "skipped",
        }
    }
}

impl std::fmt::Display for DeadLetterState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for DeadLetterState {
    type Err = String;

    /// Parses the spelling of [`DeadLetterState::as_str`].
    fn from_str(s: &str) -> Result<Self, String> {
        DeadLetterState::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| "must be open, requeued or skipped".to_string())
    }
}

/// What ops did with a dead letter, as recorded: the audit trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResolutionAction {
    /// Requeued: a new saga.
    Requeue,
    /// Skipped: closed.
    Skip,
}

/// Who resolved a dead letter, when, why, and (for a requeue) the new saga.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resolution {
    /// What was done.
    pub action: ResolutionAction,
    /// Who did it (API caller, CLI user, `dlq-redrive`).
    pub actor: String,
    /// Their reason.
    pub reason: String,
    /// When.
    pub at: DateTime<Utc>,
    /// The saga a requeue created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_saga_id: Option<SagaId>,
    /// The bulk job that did it ([`crate::bulk`]), if one did: a page of
    /// the job done again recognises its own work by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
}

/// A saga that gave up, with the snapshot ops need to decide what to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// The dead saga's id (one dead letter per saga, see
    /// [`crate::ids::dead_letter_id`]).
    pub id: DeadLetterId,
    /// The event.
    pub event_id: EventId,
    /// The subscription.
    pub subscription_id: SubscriptionId,
    /// The event type, for listing.
    pub event_type: String,
    /// The event's tenant, for listing (`None`: a tenant-less event, or a
    /// dead letter stored before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<crate::ids::TenantId>,
    /// Why the saga gave up.
    pub reason: String,
    /// Attempts made.
    pub attempts: u32,
    /// The saga as it ended.
    pub saga_snapshot: serde_json::Value,
    /// When it was dead-lettered.
    pub created_at: DateTime<Utc>,
    /// Where ops are with it.
    pub state: DeadLetterState,
    /// Who resolved it, when and why (requeue or skip audit).
    pub resolution: Option<Resolution>,
    /// The event as it would be delivered (envelope and the fields its
    /// headers come from), so a requeue still works after the event itself
    /// has expired: dead letters are kept longer than events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<crate::event::EventRecord>,
}

/// Which dead letters a listing or a bulk job takes: every field that is
/// set must match. `GET /v1/dead-letters` and the bulk requeue and skip
/// jobs read the same filters.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeadLetterQuery {
    /// Only this subscription's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_id: Option<SubscriptionId>,
    /// Only of this event type (exact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// Only of this tenant's events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<crate::ids::TenantId>,
    /// Only those in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<DeadLetterState>,
    /// Only those created from `since` (inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
    /// Only those created before `until` (exclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
}

impl DeadLetterQuery {
    /// The creation-time range of the query.
    pub fn created(&self) -> crate::time_range::TimeRange {
        crate::time_range::TimeRange { since: self.since, until: self.until }
    }

    /// Whether `dl` is one the query takes.
    pub fn matches(&self, dl: &DeadLetter) -> bool {
        self.subscription_id.as_ref().is_none_or(|s| *s == dl.subscription_id)
            && self.event_type.as_ref().is_none_or(|t| *t == dl.event_type)
            && self.tenant_id.as_ref().is_none_or(|t| Some(t) == dl.tenant_id.as_ref())
            && self.state.is_none_or(|s| s == dl.state)
            && self.created().contains(dl.created_at)
    }

    /// The filters as one text, the same for every page of a listing (the
    /// fingerprint of its cursors).
    pub fn fingerprint(&self) -> String {
        serde_json::to_string(self).expect("a query serializes")
    }
}

/// Where a newest-first listing of dead letters stands: after the one
/// created at `created_ms` with id `id` (ties on the time are broken by id,
/// descending). Both backends page by it, as the text `<ms>:<id>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// Creation time of the last one listed, in milliseconds.
    pub created_ms: i64,
    /// Its id.
    pub id: DeadLetterId,
}

impl Position {
    /// The position after `dl`.
    pub fn after(dl: &DeadLetter) -> Position {
        Position { created_ms: dl.created_at.timestamp_millis(), id: dl.id.clone() }
    }

    /// Reads the text of [`Position::to_text`]; `None` if it is not one.
    pub fn parse(s: &str) -> Option<Position> {
        let (ms, id) = s.split_once(':')?;
        (!id.is_empty()).then_some(())?;
        Some(Position { created_ms: ms.parse().ok()?, id: DeadLetterId::new(id) })
    }

    /// `<ms>:<id>`.
    pub fn to_text(&self) -> String {
        format!("{}:{}", self.created_ms, self.id)
    }
}
