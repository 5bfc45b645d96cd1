//! Delivery statistics: `GET /v1/subscriptions/{subscription}/stats` (one
//! subscription) and `GET /v1/stats` (every subscription the caller sees,
//! or one tenant's): attempts by outcome and latency percentiles per
//! minute or per hour, the series behind the console's charts.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// How wide one point of a series is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Bucket {
    /// One minute (kept as long as the hour rows; a range of at most a day).
    #[default]
    Minute,
    /// One hour (the roll-up of its minutes).
    Hour,
}

/// The query of both stats routes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StatsQuery {
    /// Start of the range (inclusive, RFC 3339); default: one hour (minute
    /// buckets) or one week (hour buckets) before `until`.
    pub since: Option<DateTime<Utc>>,
    /// End of the range (exclusive, RFC 3339); default: now.
    pub until: Option<DateTime<Utc>>,
    /// Width of each point; default `minute`.
    pub bucket: Option<Bucket>,
    /// `GET /v1/stats` only: one tenant's subscriptions (a key bound to a
    /// tenant always reads its own).
    pub tenant_id: Option<String>,
}

/// The query of `GET /v1/subscriptions/{subscription}/stats`: the range
/// and width only (the subscription names the series; `tenant_id` is
/// refused as an unknown parameter).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SubscriptionStatsQuery {
    /// Start of the range (inclusive, RFC 3339); default: one hour (minute
    /// buckets) or one week (hour buckets, at most the retention) before
    /// `until`.
    pub since: Option<DateTime<Utc>>,
    /// End of the range (exclusive, RFC 3339); default: now.
    pub until: Option<DateTime<Utc>>,
    /// Width of each point; default `minute`.
    pub bucket: Option<Bucket>,
}

/// One point of a series: what happened in `[at, at + bucket)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StatsPoint {
    /// Start of the bucket.
    pub at: DateTime<Utc>,
    /// Attempts answered 2xx.
    pub succeeded: u64,
    /// Attempts that failed (an error status, a timeout, a refused
    /// connection), whether retried or not.
    pub failed: u64,
    /// Deliveries that became dead letters.
    pub dead_lettered: u64,
    /// Median attempt latency in milliseconds (`null`: no attempt).
    pub p50_ms: Option<f64>,
    /// 90th percentile attempt latency in milliseconds.
    pub p90_ms: Option<f64>,
    /// 99th percentile attempt latency in milliseconds.
    pub p99_ms: Option<f64>,
}

/// A series: one point per bucket of the range with any attempt (buckets
/// without one are left out; a chart draws them as zero).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Stats {
    /// The subscription, for `GET /v1/subscriptions/{subscription}/stats`.
    pub subscription_id: Option<String>,
    /// The tenant the series covers, when one was asked for (or the key is
    /// bound to one).
    pub tenant_id: Option<String>,
    /// Width of each point.
    pub bucket: Bucket,
    /// Start of the range.
    pub since: DateTime<Utc>,
    /// End of the range.
    pub until: DateTime<Utc>,
    /// Totals over the range (percentiles over every attempt in it).
    pub total: StatsPoint,
    /// The points, oldest first.
    pub points: Vec<StatsPoint>,
}
