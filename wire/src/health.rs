//! The answer of `GET /healthz`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The process is up and serving requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"status": "ok"}))]
pub struct Health {
    /// Always `ok` (a process that is not up does not answer).
    pub status: HealthStatus,
}

/// The one state a process that answers is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HealthStatus {
    /// Serving requests.
    Ok,
}
