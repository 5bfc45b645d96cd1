//! Subscriber acknowledgements: `POST
//! /v1/subscriptions/{subscription}/acknowledgements`, a subscriber's
//! report of what it did with a delivery, signed with its subscription's
//! signing secret (Standard Webhooks headers over the request body), and
//! the acknowledgement as the deliveries listing shows it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What the subscriber did with a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AckStatus {
    /// Processed: done with it.
    Processed,
    /// Could not process it (`reason` says why).
    Failed,
}

/// The body of `POST /v1/subscriptions/{subscription}/acknowledgements`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"webhook_id": "msg_0123456789abcdef0123456789", "attempt": 1, "status": "processed", "reference": "order-import-77"}))]
pub struct AcknowledgementBody {
    /// The `webhook-id` of the delivery acknowledged (`msg_…`).
    pub webhook_id: String,
    /// The attempt acknowledged (its `hookline-attempt` header), if known.
    #[serde(default)]
    pub attempt: Option<u32>,
    /// `processed` or `failed`.
    pub status: AckStatus,
    /// Why it failed: required for `failed` (at most 1,024 bytes).
    #[serde(default)]
    pub reason: Option<String>,
    /// The subscriber's own reference for what it did (at most 256 bytes).
    #[serde(default)]
    pub reference: Option<String>,
}

/// An acknowledgement as stored and shown: the latest one for a
/// (subscription, `webhook-id`) pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Acknowledgement {
    /// The subscription that acknowledged.
    pub subscription_id: String,
    /// The delivery's `webhook-id`.
    pub webhook_id: String,
    /// The attempt acknowledged, if the subscriber named it.
    pub attempt: Option<u32>,
    /// `processed` or `failed`.
    pub status: AckStatus,
    /// Why it failed.
    pub reason: Option<String>,
    /// The subscriber's reference.
    pub reference: Option<String>,
    /// When Hookline received it.
    pub received_at: DateTime<Utc>,
}
