//! The subscriber portal: `POST /v1/portal-links` hands out a signed,
//! expiring link that shows one tenant its own subscriptions, deliveries
//! and dead letters in the console (`/ui`), and nothing else.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `POST /v1/portal-links`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreatePortalLink {
    /// The tenant the link shows (a key bound to a tenant may only name
    /// its own).
    pub tenant_id: String,
    /// How long the link works, in seconds (default 3600, at most 7 days).
    pub expires_in_seconds: Option<i64>,
}

/// A portal link. Its token is a credential: whoever holds it acts as the
/// tenant's portal until it expires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PortalLink {
    /// The tenant it shows.
    pub tenant_id: String,
    /// The link to open (`/ui/#/portal?token=…` under the API's base).
    pub url: String,
    /// The token alone (`Authorization: Bearer <token>`).
    pub token: String,
    /// When it stops working.
    pub expires_at: DateTime<Utc>,
}
