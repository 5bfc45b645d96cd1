//! `/v1/jobs/{job}`: the bulk jobs (requeue, skip, replay) that `POST
//! /v1/dead-letters/requeue|skip` and `POST /v1/replays` start, followed
//! until they leave `running`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What a job does to each item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    /// Requeue each open dead letter of the filter.
    Requeue,
    /// Skip each open dead letter of the filter.
    Skip,
    /// Replay each event of the filter.
    Replay,
}

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Pages are still being done.
    Running,
    /// Every page is done (some items may have failed: see the counts).
    Completed,
    /// The job stopped; `error` says why.
    Failed,
}

/// A job started: follow it at `GET /v1/jobs/{job_id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobStarted {
    /// The job's id (`job_…`).
    #[schema(example = "job_0193a1b2c3d4e5f6a7b8c9d0e1f2a3b4")]
    pub job_id: String,
    /// How many items it was counted to take (`null` when not counted).
    pub items: Option<u64>,
}

/// What a job acts on, as it was asked: requeue and skip jobs take the
/// dead-letter fields (`subscription_id`, `event_type`, `tenant_id`,
/// `since`, `until` of the dead letters' creation), replay jobs the event
/// fields (`event_id`, `partition_key`, `tenant_id`, `since`, `until` of
/// the events' receipt, `subscription_id`, `event_types`, `confined_to`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobFilter {
    /// One event (replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    /// One partition's events, in acceptance order (replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_key: Option<String>,
    /// Only this subscription's dead letters, or replayed to it only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_id: Option<String>,
    /// Only dead letters of this event type (requeue, skip).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// Only events of these types or patterns (replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_types: Option<Vec<String>>,
    /// Only this tenant's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// From then (inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
    /// Before then (exclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
    /// Replayed only to this tenant's subscriptions: the tenant of the key
    /// that started the job, when bound to one (replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confined_to: Option<String>,
}

/// A job as `GET /v1/jobs/{job}` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Job {
    /// `job_…`.
    pub id: String,
    /// What it does.
    pub kind: JobKind,
    /// Where it is.
    pub state: JobState,
    /// How many items it was counted to take when created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<u64>,
    /// The tenant it works for (its job cap, who sees it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Items listed so far.
    pub matched: u64,
    /// Items acted on.
    pub done: u64,
    /// Items that could not be acted on (resolved meanwhile, gone).
    pub failed: u64,
    /// Replay jobs only: events the named subscription's routing would not
    /// take, passed over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_not_routed: Option<u64>,
    /// The operator's reason.
    pub reason: String,
    /// Who started it.
    pub actor: String,
    /// What it acts on.
    pub filter: JobFilter,
    /// When it was started.
    pub created_at: DateTime<Utc>,
    /// Its last change.
    pub updated_at: DateTime<Utc>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
