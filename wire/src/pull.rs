//! Pull: `GET /v1/subscriptions/{subscription}/events`, the events routed
//! to a subscription with `pull: true`, a page at a time from a cursor, in
//! routing order, each with the body and headers a push would carry.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// The query of `GET /v1/subscriptions/{subscription}/events`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PullQuery {
    /// The `next_cursor` of the previous page, as received; absent: from
    /// the oldest event still kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// Events per page, 1 to 100 (default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// One pulled event: what a push of it would have sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PulledEvent {
    /// Its `webhook-id` (the same as its pushes': dedupe on it).
    pub webhook_id: String,
    /// The stored event's id.
    pub event_id: String,
    /// The request headers a push carries (`webhook-id`,
    /// `webhook-timestamp`, `webhook-signature` made now, `content-type`,
    /// `hookline-*`, custom headers but credential ones), lower case.
    pub headers: BTreeMap<String, String>,
    /// The exact body a push sends (the signature covers it).
    pub body: String,
}

/// A page of pulled events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PullPage {
    /// The events, in routing order.
    pub data: Vec<PulledEvent>,
    /// Pass as `after` for the next page; `null`: nothing more yet (pull
    /// again later with the last cursor received).
    pub next_cursor: Option<String>,
}
