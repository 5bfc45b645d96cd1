//! [`OrderStore`] on SQLite: `partitions` (each partition's last number
//! and routed-through mark) and `lanes` (one row per saga of an ordered
//! subscription waiting in, or at the head of, its partition's lane), and
//! `lane_blocks` (the lanes shown as blocked, per subscription by age).

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};

use super::{sql, Db};
use shared::ids::{EventId, SagaId, SubscriptionId};
use shared::ordering::{self, BlockedLane, Lane, LaneEntry, Partition};
use shared::ports::{OrderStore, StoreResult};

/// The ordering tables.
pub struct SqliteOrder(pub Db);

/// The next number of `partition`, taken in the caller's transaction (the
/// event insert's, so a rolled-back insert takes none).
pub(super) fn next_seq(c: &Connection, partition: &Partition) -> StoreResult<u64> {
    let n: i64 = c
        .prepare_cached(
            "INSERT INTO partitions (scope, partition_key, seq) VALUES (?1, ?2, 1)
             ON CONFLICT (scope, partition_key) DO UPDATE SET seq = seq + 1 RETURNING seq",
        )
        .map_err(sql)?
        .query_row(params![partition.scope, partition.key], |r| r.get(0))
        .map_err(sql)?;
    Ok(n as u64)
}

fn mark(c: &Connection, p: &Partition) -> StoreResult<(u64, Vec<u64>)> {
    let row: Option<(i64, String)> = c
        .prepare_cached("SELECT routed, ahead FROM partitions WHERE scope = ?1 AND partition_key = ?2")
        .map_err(sql)?
        .query_row(params![p.scope, p.key], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(sql)?;
    Ok(match row {
        Some((routed, ahead)) => (routed as u64, serde_json::from_str(&ahead).unwrap_or_default()),
        None => (0, Vec::new()),
    })
}

#[async_trait]
impl OrderStore for SqliteOrder {
    async fn mark_routed(&self, partition: &Partition, seq: u64) -> StoreResult<u64> {
        let p = partition.clone();
        self.0
            .call(move |c, _| {
                let (routed, ahead) = mark(c, &p)?;
                let (routed, ahead) = ordering::advance(routed, &ahead, seq);
                c.prepare_cached(
                    "INSERT INTO partitions (scope, partition_key, seq, routed, ahead) VALUES (?1, ?2, ?3, ?3, ?4)
                     ON CONFLICT (scope, partition_key) DO UPDATE SET routed = ?3, ahead = ?4",
                )
                .map_err(sql)?
                .execute(params![p.scope, p.key, routed as i64, serde_json::to_string(&ahead).expect("numbers")])
                .map_err(sql)?;
                Ok(routed)
            })
            .await
    }

    async fn routed_through(&self, partition: &Partition) -> StoreResult<u64> {
        let p = partition.clone();
        self.0.call(move |c, _| Ok(mark(c, &p)?.0)).await
    }

    async fn enqueue(&self, lane: &Lane, entry: &LaneEntry) -> StoreResult<()> {
        let (lane, entry) = (lane.clone(), entry.clone());
        self.0
            .call(move |c, _| {
                c.prepare_cached(
                    "INSERT OR IGNORE INTO lanes (subscription_id, scope, partition_key, seq, saga_id, event_id)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(sql)?
                .execute(params![
                    lane.subscription_id.as_str(),
                    lane.partition.scope,
                    lane.partition.key,
                    entry.seq as i64,
                    entry.saga_id.as_str(),
                    entry.event_id.as_str()
                ])
                .map_err(sql)?;
                Ok(())
            })
            .await
    }

    async fn head(&self, lane: &Lane) -> StoreResult<Option<LaneEntry>> {
        let lane = lane.clone();
        self.0
            .call(move |c, _| {
                c.prepare_cached(
                    "SELECT seq, saga_id, event_id FROM lanes WHERE subscription_id = ?1 AND scope = ?2
                     AND partition_key = ?3 ORDER BY seq, saga_id LIMIT 1",
                )
                .map_err(sql)?
                .query_row(params![lane.subscription_id.as_str(), lane.partition.scope, lane.partition.key], |r| {
                    Ok(LaneEntry {
                        seq: r.get::<_, i64>(0)? as u64,
                        saga_id: SagaId::new(r.get::<_, String>(1)?),
                        event_id: EventId::new(r.get::<_, String>(2)?),
                    })
                })
                .optional()
                .map_err(sql)
            })
            .await
    }

    async fn dequeue(&self, lane: &Lane, seq: u64, saga_id: &SagaId) -> StoreResult<()> {
        let (lane, saga_id) = (lane.clone(), saga_id.clone());
        self.0
            .call(move |c, _| {
                c.prepare_cached(
                    "DELETE FROM lanes WHERE subscription_id = ?1 AND scope = ?2 AND partition_key = ?3
                     AND seq = ?4 AND saga_id = ?5",
                )
                .map_err(sql)?
                .execute(params![
                    lane.subscription_id.as_str(),
                    lane.partition.scope,
                    lane.partition.key,
                    seq as i64,
                    saga_id.as_str()
                ])
                .map_err(sql)?;
                Ok(())
            })
            .await
    }

    async fn block(&self, lane: &Lane, blocked: &BlockedLane) -> StoreResult<()> {
        let (lane, b) = (lane.clone(), blocked.clone());
        self.0
            .call(move |c, _| {
                c.prepare_cached(
                    "INSERT OR IGNORE INTO lane_blocks (subscription_id, scope, partition_key, since, reason)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(sql)?
                .execute(params![
                    lane.subscription_id.as_str(),
                    lane.partition.scope,
                    lane.partition.key,
                    b.since.timestamp_millis(),
                    b.reason
                ])
                .map_err(sql)?;
                Ok(())
            })
            .await
    }

    async fn unblock(&self, lane: &Lane) -> StoreResult<()> {
        let lane = lane.clone();
        self.0
            .call(move |c, _| {
                c.prepare_cached(
                    "DELETE FROM lane_blocks WHERE subscription_id = ?1 AND scope = ?2 AND partition_key = ?3",
                )
                .map_err(sql)?
                .execute(params![lane.subscription_id.as_str(), lane.partition.scope, lane.partition.key])
                .map_err(sql)?;
                Ok(())
            })
            .await
    }

    async fn blocked(&self, subscription_id: &SubscriptionId, limit: usize) -> StoreResult<Vec<BlockedLane>> {
        let id = subscription_id.clone();
        self.0
            .call(move |c, _| {
                let mut st = c
                    .prepare_cached(
                        "SELECT scope, partition_key, since, reason FROM lane_blocks WHERE subscription_id = ?1
                         ORDER BY since LIMIT ?2",
                    )
                    .map_err(sql)?;
                let rows = st
                    .query_map(params![id.as_str(), limit as i64], |r| {
                        Ok(BlockedLane {
                            partition: Partition { scope: r.get(0)?, key: r.get(1)? },
                            since: chrono::DateTime::from_timestamp_millis(r.get(2)?).unwrap_or_default(),
                            reason: r.get(3)?,
                        })
                    })
                    .map_err(sql)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(sql)
            })
            .await
    }
}
