//! The `delivery_stats` table: delivery statistics ([`shared::stats`]), one
//! row per (series, width, bucket start), added to by upserts in the
//! writer's transaction; the purge deletes rows past the retention.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, OptionalExtension};

use crate::{sql, Db};
use shared::error::StoreError;
use shared::ports::{StatsStore, StoreResult};
use shared::stats::{Histogram, Point, Series, Tally, Width};

/// `delivery_stats`: `series` ([`Series::key`]), `width` (`m`/`h`), `at`
/// (bucket start, epoch seconds), the counts, and the latency histogram as
/// its bucket counts joined by commas.
#[derive(Clone)]
pub struct SqliteStats(pub Db);

fn histogram_text(h: &Histogram) -> String {
    h.counts().iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

fn histogram_of(text: &str) -> Result<Histogram, StoreError> {
    let counts = text
        .split(',')
        .map(|c| c.parse::<u64>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| StoreError::Corrupt(format!("delivery_stats latency: {e}")))?;
    Histogram::from_counts(&counts).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn time(s: i64) -> Result<DateTime<Utc>, StoreError> {
    DateTime::from_timestamp(s, 0).ok_or_else(|| StoreError::Corrupt(format!("delivery_stats time {s}")))
}

#[async_trait]
impl StatsStore for SqliteStats {
    /// The minute row and its hour row, each read and written back with the
    /// tally added, in one transaction of the single writer (so adds of
    /// one row never interleave).
    async fn add(&self, series: &Series, minute: DateTime<Utc>, tally: &Tally) -> StoreResult<()> {
        let key = series.key();
        let tally = *tally;
        let buckets = [(Width::Minute, Width::Minute.start_of(minute)), (Width::Hour, Width::Hour.start_of(minute))];
        self.0
            .call(move |c, _| {
                for (width, at) in buckets {
                    let stored = c
                        .prepare_cached(
                            "SELECT succeeded, failed, dead_lettered, latency FROM delivery_stats \
                             WHERE series = ?1 AND width = ?2 AND at = ?3",
                        )
                        .map_err(sql)?
                        .query_row(params![key, width.tag(), at.timestamp()], |r| {
                            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?, r.get::<_, String>(3)?))
                        })
                        .optional()
                        .map_err(sql)?;
                    let mut sum = tally;
                    if let Some((s, f, d, l)) = stored {
                        sum.merge(&Tally {
                            succeeded: s as u64,
                            failed: f as u64,
                            dead_lettered: d as u64,
                            latency: histogram_of(&l)?,
                        });
                    }
                    c.prepare_cached(
                        "INSERT INTO delivery_stats (series, width, at, succeeded, failed, dead_lettered, latency) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
                         ON CONFLICT (series, width, at) DO UPDATE SET succeeded = excluded.succeeded, \
                         failed = excluded.failed, dead_lettered = excluded.dead_lettered, latency = excluded.latency",
                    )
                    .map_err(sql)?
                    .execute(params![
                        key,
                        width.tag(),
                        at.timestamp(),
                        sum.succeeded as i64,
                        sum.failed as i64,
                        sum.dead_lettered as i64,
                        histogram_text(&sum.latency)
                    ])
                    .map_err(sql)?;
                }
                Ok(())
            })
            .await
    }

    async fn read(
        &self,
        series: &Series,
        width: Width,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<Vec<Point>> {
        let key = series.key();
        let rows = self
            .0
            .call(move |c, _| {
                let mut st = c
                    .prepare_cached(
                        "SELECT at, succeeded, failed, dead_lettered, latency FROM delivery_stats \
                         WHERE series = ?1 AND width = ?2 AND at >= ?3 AND at < ?4 ORDER BY at",
                    )
                    .map_err(sql)?;
                let rows = st
                    .query_map(params![key, width.tag(), since.timestamp(), until.timestamp()], |r| {
                        Ok((
                            r.get::<_, i64>(0)?,
                            r.get::<_, i64>(1)?,
                            r.get::<_, i64>(2)?,
                            r.get::<_, i64>(3)?,
                            r.get::<_, String>(4)?,
                        ))
                    })
                    .map_err(sql)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(sql)?;
                Ok(rows)
            })
            .await?;
        rows.into_iter()
            .map(|(at, s, f, d, l)| {
                Ok(Point {
                    at: time(at)?,
                    tally: Tally {
                        succeeded: s as u64,
                        failed: f as u64,
                        dead_lettered: d as u64,
                        latency: histogram_of(&l)?,
                    },
                })
            })
            .collect()
    }
}
