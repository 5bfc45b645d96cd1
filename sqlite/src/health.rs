//! [`HealthStore`] on SQLite: one row per subscription that ever had a
//! failure, its record as JSON, writes conditional on its version.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension};

use super::{decode, encode, sql, Db};
use shared::health::Health;
use shared::ids::SubscriptionId;
use shared::ports::{HealthStore, StoreResult};

/// The `subscription_health` table.
pub struct SqliteHealth(pub Db);

#[async_trait]
impl HealthStore for SqliteHealth {
    async fn get(&self, id: &SubscriptionId) -> StoreResult<Option<Health>> {
        let id = id.clone();
        self.0
            .call(move |c, _| {
                let data: Option<String> = c
                    .prepare_cached("SELECT data FROM subscription_health WHERE subscription_id = ?1")
                    .map_err(sql)?
                    .query_row([id.as_str()], |r| r.get(0))
                    .optional()
                    .map_err(sql)?;
                data.map(|d| decode(&d)).transpose()
            })
            .await
    }

    /// One trip through the writer for the whole page.
    async fn get_many(&self, ids: &[SubscriptionId]) -> StoreResult<Vec<Option<Health>>> {
        let ids = ids.to_vec();
        self.0
            .call(move |c, _| {
                let mut st =
                    c.prepare_cached("SELECT data FROM subscription_health WHERE subscription_id = ?1").map_err(sql)?;
                ids.iter()
                    .map(|id| {
                        let data: Option<String> = st.query_row([id.as_str()], |r| r.get(0)).optional().map_err(sql)?;
                        data.map(|d| decode(&d)).transpose()
                    })
                    .collect()
            })
            .await
    }

    async fn put(&self, id: &SubscriptionId, next: &Health, expected: u64) -> StoreResult<bool> {
        let (id, version) = (id.clone(), next.version as i64);
        let data = encode(next);
        self.0
            .call(move |c, _| {
                let n = if expected == 0 {
                    c.execute(
                        "INSERT OR IGNORE INTO subscription_health (subscription_id, version, data) VALUES (?1, ?2, ?3)",
                        params![id.as_str(), version, data],
                    )
                } else {
                    c.execute(
                        "UPDATE subscription_health SET version = ?2, data = ?3 WHERE subscription_id = ?1 AND version = ?4",
                        params![id.as_str(), version, data, expected as i64],
                    )
                }
                .map_err(sql)?;
                Ok(n == 1)
            })
            .await
    }
}
