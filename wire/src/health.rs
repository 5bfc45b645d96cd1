//! The open routes' answers: `GET /healthz`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /healthz`: the process answers (it reads no storage).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"status": "ok"}))]
pub struct Health {
    /// Always `ok`.
    pub status: HealthStatus,
}

/// The only state `/healthz` answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HealthStatus {
    /// Up.
    Ok,
}
