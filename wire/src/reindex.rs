//! `POST /v1/subscriptions/reindex` and `POST /v1/dead-letters/reindex`:
//! one page of the repair after an upgrade (the index entries of items
//! stored before them); the caller repeats with `next_cursor` until it is
//! `null`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One page of a reindex.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"limit": 100}))]
pub struct ReindexRequest {
    /// `next_cursor` of the previous page (of the same route); absent:
    /// from the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Stored items examined, 1 to 100 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
}

/// What one page of a reindex did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"reindexed": 3, "examined": 100, "next_cursor": "eyJ..."}))]
pub struct ReindexAnswer {
    /// Items whose index entries were written (they were missing).
    pub reindexed: u64,
    /// Items examined.
    pub examined: u64,
    /// The next page's cursor; `null` when the walk is done.
    pub next_cursor: Option<String>,
}
