//! StatsTable: delivery statistics ([`shared::stats`]), one item per
//! (width and series, bucket start), added to with `UpdateItem ADD` so the
//! flushes of one minute by several Lambda containers sum up; read with
//! `Query` over a range of bucket starts.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use chrono::{DateTime, Utc};

use super::{n, query_all, s};
use crate::request::backend;
use shared::error::StoreError;
use shared::ports::{StatsStore, StoreResult};
use shared::stats::{expires_at, Histogram, Point, Series, Tally, Width, BUCKETS};

/// StatsTable: partition key `series` (`m#<series key>` for minute points,
/// `h#<series key>` for hour points), sort key `at` (bucket start, epoch
/// seconds); numbers `s` (succeeded), `f` (failed), `d` (dead-lettered),
/// `l0`..`l25` (latency histogram buckets, only those ever added to), and
/// `expires_at` (epoch seconds, the table's TTL attribute: the bucket's end
/// plus the event retention). TTL deletes late, so reads skip expired items.
#[derive(Clone)]
pub struct DynamoStats {
    client: Client,
    table: String,
    retention: chrono::Duration,
}

impl DynamoStats {
    /// The adapter over `table`, keeping points for `retention`.
    pub fn new(client: Client, table: impl Into<String>, retention: chrono::Duration) -> Self {
        DynamoStats { client, table: table.into(), retention }
    }

    /// The partition key of `series`' points of `width`.
    fn partition(series: &Series, width: Width) -> String {
        format!("{}#{}", width.tag(), series.key())
    }

    /// One `UpdateItem`: `SET` the expiry, `ADD` every count (each clause
    /// once; each attribute in one action only).
    async fn add_one(&self, series: &Series, width: Width, at: DateTime<Utc>, tally: &Tally) -> StoreResult<()> {
        let mut names = HashMap::from([
            ("#exp".to_string(), "expires_at".to_string()),
            ("#s".to_string(), "s".to_string()),
            ("#f".to_string(), "f".to_string()),
            ("#d".to_string(), "d".to_string()),
        ]);
        let mut values = HashMap::from([
            (":exp".to_string(), n(expires_at(at, width, self.retention).timestamp())),
            (":s".to_string(), n(tally.succeeded)),
            (":f".to_string(), n(tally.failed)),
            (":d".to_string(), n(tally.dead_lettered)),
        ]);
        let mut adds = vec!["#s :s".to_string(), "#f :f".to_string(), "#d :d".to_string()];
        for (i, c) in tally.latency.counts().iter().enumerate().filter(|(_, c)| **c > 0) {
            names.insert(format!("#l{i}"), format!("l{i}"));
            values.insert(format!(":l{i}"), n(c));
            adds.push(format!("#l{i} :l{i}"));
        }
        self.client
            .update_item()
            .table_name(&self.table)
            .key("series", s(Self::partition(series, width)))
            .key("at", n(at.timestamp()))
            .update_expression(format!("SET #exp = :exp ADD {}", adds.join(", ")))
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .send()
            .await
            .map_err(|e| backend("UpdateItem", &self.table, e))?;
        Ok(())
    }
}

fn point(a: &crate::item::Attrs) -> Result<Point, StoreError> {
    let at: i64 = a.n("at")?;
    let mut counts = [0u64; BUCKETS];
    for (i, c) in counts.iter_mut().enumerate() {
        *c = a.opt_n(&format!("l{i}"))?.unwrap_or(0);
    }
    Ok(Point {
        at: DateTime::from_timestamp(at, 0).ok_or_else(|| StoreError::Corrupt(format!("stats item at {at}")))?,
        tally: Tally {
            succeeded: a.opt_n("s")?.unwrap_or(0),
            failed: a.opt_n("f")?.unwrap_or(0),
            dead_lettered: a.opt_n("d")?.unwrap_or(0),
            latency: Histogram::from_counts(&counts).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        },
    })
}

#[async_trait]
impl StatsStore for DynamoStats {
    /// Two `UpdateItem ADD`s, concurrently: the minute's item and its
    /// hour's (the roll-up).
    async fn add(&self, series: &Series, minute: DateTime<Utc>, tally: &Tally) -> StoreResult<()> {
        let (m, h) = tokio::join!(
            self.add_one(series, Width::Minute, Width::Minute.start_of(minute), tally),
            self.add_one(series, Width::Hour, Width::Hour.start_of(minute), tally),
        );
        m.and(h)
    }

    /// One `Query` (every page: a day of minutes or the retention's hours
    /// is at most a few hundred KB) of the partition between the bounds;
    /// eventually consistent (a point flushed a moment ago may be missing).
    async fn read(
        &self,
        series: &Series,
        width: Width,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<Vec<Point>> {
        let now = Utc::now().timestamp();
        let items = query_all(
            &self.client,
            &self.table,
            None,
            "#p = :p AND #at BETWEEN :lo AND :hi",
            HashMap::from([("#p".to_string(), "series".to_string()), ("#at".to_string(), "at".to_string())]),
            HashMap::from([
                (":p".to_string(), s(Self::partition(series, width))),
                (":lo".to_string(), n(since.timestamp())),
                (":hi".to_string(), n(until.timestamp() - 1)),
            ]),
            false,
        )
        .await?;
        items
            .iter()
            .filter(|a| a.opt_n::<i64>("expires_at").ok().flatten().is_none_or(|e| e > now))
            .map(point)
            .collect()
    }
}
