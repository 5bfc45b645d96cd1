//! `/v1/keys`: API keys (`hookline serve`) and IAM principal grants (AWS):
//! who may call the API, with which role, for which tenant. A secret is
//! shown once, in the answer that made it ([`KeyWithSecret`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// What a credential may do; each role may do what the one before it may
/// (except `producer`, which only posts events).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Posts events; reads nothing.
    Producer,
    /// Reads everything of its tenant (or all); changes nothing.
    Reader,
    /// A reader who also recovers: requeue, skip, replay, lane skip, verify.
    Operator,
    /// Everything, keys included.
    Admin,
    /// A subscriber's key: pulls its one subscription's events
    /// (`subscription_id`), nothing else.
    Subscriber,
}

/// Whether a key works now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum KeyState {
    /// It authenticates.
    Active,
    /// Past `expires_at`.
    Expired,
    /// Revoked (`DELETE /v1/keys/{key}`).
    Revoked,
}

/// The body of `POST /v1/keys`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "billing-producer", "role": "producer", "tenant_id": "acme", "expires_in_seconds": 7776000}))]
pub struct CreateKey {
    /// A name, unique in its tenant: 1 to 64 letters, digits, `.`, `_`, `-`
    /// (the audit trail records `key:<name>`).
    pub name: String,
    /// What its callers may do (at most the creating key's role).
    pub role: Role,
    /// The one tenant its callers see (a tenant-bound creator: its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Expires this many seconds from now: 1 to 316224000 (ten years);
    /// absent: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 316224000)]
    pub expires_in_seconds: Option<i64>,
    /// AWS only: the IAM user or role ARN this grant is for. Left out, the
    /// key is a secret: on `hookline serve` an API key, on AWS a console key
    /// (it signs in to the console's `/ui/api`, never to the IAM-signed
    /// `/v1` routes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// The one subscription a `subscriber` key pulls (required for that
    /// role, refused for the others); the key takes its tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_id: Option<String>,
}

/// The body of `POST /v1/keys/{key}/rotate` (may be empty).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RotateKey {
    /// How long the old secret keeps working: 0 to 604800 seconds (seven
    /// days; 0 ends it now); absent: the rotation overlap setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 604800)]
    pub overlap_seconds: Option<i64>,
}

/// The query string of `GET /v1/keys`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct KeyListQuery {
    /// The tenant whose keys to list (a tenant-bound key: its own); absent
    /// for an unbound key: the keys bound to no tenant.
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

/// A key as the API shows it: never its secret nor a hash of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Key {
    /// `key_…`.
    #[schema(example = "key_0193a1b2c3d4e5f6a7b8c9d0e1f2a3b4")]
    pub id: String,
    /// Its name.
    #[schema(example = "billing-producer")]
    pub name: String,
    /// What its callers may do.
    pub role: Role,
    /// The one tenant its callers see; `null`: every tenant.
    pub tenant_id: Option<String>,
    /// Whether it works now.
    pub state: KeyState,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Who created it.
    pub created_by: String,
    /// When it stops working; `null`: never.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was revoked; `null`: not revoked.
    pub revoked_at: Option<DateTime<Utc>>,
    /// A principal grant's IAM ARN (AWS); absent for a secret key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// A secret key's first characters, to recognise it (absent for a
    /// principal grant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "hk_3fa9")]
    pub prefix: Option<String>,
    /// Until when the secret a rotation replaced still works; absent when
    /// none does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_secret_until: Option<DateTime<Utc>>,
    /// A subscriber key's subscription; `null` for other roles.
    #[serde(default)]
    pub subscription_id: Option<String>,
}

/// A key just created or rotated, with its secret: shown this once, never
/// again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct KeyWithSecret {
    /// The key.
    #[serde(flatten)]
    pub key: Key,
    /// The secret callers send as `Authorization: Bearer <secret>`; absent
    /// for a principal grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}
