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

/// The role of a caller (`GET /v1/me`): a key's role, or `portal` for a
/// portal link's token (which no key can hold).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CallerRole {
    /// Posts events; reads nothing.
    Producer,
    /// Reads; changes nothing.
    Reader,
    /// Reads and recovers.
    Operator,
    /// Everything.
    Admin,
    /// One tenant's subscriber portal.
    Portal,
    /// A subscriber's key, bound to one subscription.
    Subscriber,
}

/// What a caller may do, as `GET /v1/me` lists it (the access check's
/// actions: each route of the API performs exactly one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// `GET /v1/me`.
    Identify,
    /// `POST /v1/events`, `/v1/events/batch`.
    PostEvents,
    /// Every listing and read of its tenant's (or every) resource.
    Read,
    /// `GET /metrics` (unbound keys only).
    ReadMetrics,
    /// Requeue, skip, replay, lane skip, re-run a verification.
    Recover,
    /// Create, change, pause, delete subscriptions; rotate secrets; send
    /// test events.
    ManageSubscriptions,
    /// Keys and portal links.
    ManageKeys,
    /// Rebuild indexes (unbound keys only).
    Rebuild,
    /// Register event types in the event catalog (unbound admins only).
    ManageCatalog,
    /// Pull a subscription's events (a subscriber key: its own only).
    Pull,
}

/// `GET /v1/me`: who the caller is, so a console shows only what its
/// credential may do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"actor": "portal:acme:9f86d081884c7d65", "role": "portal", "tenant_id": "acme",
    "permissions": ["identify", "read", "recover", "manage_subscriptions"], "expires_at": "2026-11-29T03:00:00Z"}))]
pub struct Me {
    /// As the audit trail records it (`key:<name>`, an IAM ARN,
    /// `portal:<tenant>:<link id>`).
    pub actor: String,
    /// Its role.
    pub role: CallerRole,
    /// The one tenant it sees; `null`: every tenant.
    pub tenant_id: Option<String>,
    /// What it may do.
    pub permissions: Vec<Permission>,
    /// When the credential stops working, for a portal token; `null`
    /// otherwise.
    pub expires_at: Option<DateTime<Utc>>,
}

/// `POST /v1/subscriptions/{subscription}/test` (an empty body is `{}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendTestEvent {
    /// The event's type (default `hookline.test`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// The event's `data` (default `{"test": true}`): any JSON value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub data: Option<serde_json::Value>,
}

/// The answer of `POST /v1/subscriptions/{subscription}/test`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TestEventSent {
    /// The test event's id: follow it at `GET /v1/events/{event}/deliveries`.
    pub event_id: String,
    /// The subscription it goes to (and no other).
    pub subscription_id: String,
    /// Its type.
    pub event_type: String,
}

/// The filters of `GET /v1/event-types`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventTypeQuery {
    /// The tenant whose types to list (a tenant-bound caller: its own,
    /// whether named or not); absent for an unbound caller: the types seen
    /// across every tenant (and events without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Items per page, 1 to 1000 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// The previous page's `next_cursor`, with the same `tenant_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// One event type (`GET /v1/event-types`), in type order: seen at ingest,
/// registered in the event catalog, or both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"event_type": "order.created", "tenant_id": "acme", "first_seen_at": "2026-11-28T09:00:00Z",
    "registered": true, "name": "order.created", "version": 1, "description": "An order was placed.",
    "schema": {"type": "object"}, "example": {}}))]
pub struct EventType {
    /// The type.
    pub event_type: String,
    /// The tenant it was seen for; `null` in the listing across tenants.
    pub tenant_id: Option<String>,
    /// About when it was first seen (by the first process that recorded
    /// it); `null` for a registered type not seen yet.
    pub first_seen_at: Option<DateTime<Utc>>,
    /// Whether the type is registered in the event catalog (the fields
    /// below are then set).
    #[serde(default)]
    pub registered: bool,
    /// The catalog's name of the type (without its `.v<N>`).
    #[serde(default)]
    pub name: Option<String>,
    /// The catalog's major version of the type.
    #[serde(default)]
    pub version: Option<u32>,
    /// What the type means.
    #[serde(default)]
    pub description: Option<String>,
    /// The JSON Schema of the event's data.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub schema: Option<serde_json::Value>,
    /// An example of the data.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub example: Option<serde_json::Value>,
}
