//! `POST /v1/replays`: replay one event, one partition (in acceptance
//! order) or a time range of events as a job (answered with
//! [`crate::jobs::JobStarted`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The body of `POST /v1/replays`: exactly one of `event_id`,
/// `partition_key`, or `since` with `until`; a reason.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"since": "2026-11-26T09:00:00Z", "until": "2026-11-26T10:00:00Z", "event_types": ["order.*"], "reason": "consumer lost a deploy's worth of events"}))]
pub struct ReplayRequest {
    /// One event (one the key may see).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    /// The events of one partition, in acceptance order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_key: Option<String>,
    /// The partition's or the range's tenant (not with `event_id`; a
    /// tenant-bound key: its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Events received from then (inclusive; with `until`, within the
    /// event retention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
    /// Events received before then (exclusive; with `since`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
    /// Only to this subscription (and only the events its routing takes);
    /// absent: every subscription matching each event now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_id: Option<String>,
    /// Only events of these types or patterns (`order.*`): 1 to 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_types: Option<Vec<String>>,
    /// Why (required; recorded on every saga it makes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
