//! The `event_types` table: the event types seen at ingest
//! ([`shared::event_types`]), inserted once per (scope, type) and listed by
//! scope in type order; and the `event_catalog` table: the registered
//! versions of the event catalog ([`shared::catalog`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::params;
use shared::catalog::CatalogEntry;

use crate::{sql, Db};
use shared::error::StoreError;
use shared::event_types::{SeenType, TypeScope};
use shared::ports::{EventTypeStore, Page, StoreResult};

/// `event_types`: one row per (scope, type); the primary key is the
/// listing's index.
#[derive(Clone)]
pub struct SqliteEventTypes(pub Db);

#[async_trait]
impl EventTypeStore for SqliteEventTypes {
    async fn record(&self, seen: &[SeenType]) -> StoreResult<Vec<bool>> {
        let rows: Vec<(String, String, i64)> = seen
            .iter()
            .map(|s| (s.scope.as_text(), s.event_type.clone(), s.first_seen_at.timestamp_millis()))
            .collect();
        self.0
            .call(move |c, _| {
                let mut st = c
                    .prepare_cached(
                        "INSERT OR IGNORE INTO event_types (scope, event_type, first_seen_at) VALUES (?1, ?2, ?3)",
                    )
                    .map_err(sql)?;
                rows.iter().map(|(s, t, at)| st.execute(params![s, t, at]).map(|n| n == 1).map_err(sql)).collect()
            })
            .await
    }

    async fn page(&self, scope: &TypeScope, limit: usize, after: Option<&str>) -> StoreResult<Page<SeenType>> {
        let (text, after) = (scope.as_text(), after.unwrap_or("").to_string());
        let scope = scope.clone();
        let rows: Vec<(String, i64)> = self
            .0
            .call(move |c, _| {
                let mut st = c
                    .prepare_cached(
                        "SELECT event_type, first_seen_at FROM event_types WHERE scope = ?1 AND event_type > ?2 \
                         ORDER BY event_type LIMIT ?3",
                    )
                    .map_err(sql)?;
                let rows = st
                    .query_map(params![text, after, limit as i64 + 1], |r| Ok((r.get(0)?, r.get(1)?)))
                    .map_err(sql)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(sql)
            })
            .await?;
        let mut items = rows
            .into_iter()
            .map(|(event_type, ms)| {
                let first_seen_at = DateTime::from_timestamp_millis(ms)
                    .ok_or_else(|| StoreError::Corrupt(format!("event type first_seen_at {ms}")))?;
                Ok(SeenType { scope: scope.clone(), event_type, first_seen_at })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        let next = (items.len() > limit).then(|| {
            items.truncate(limit);
            items.last().map(|s| s.event_type.clone()).unwrap_or_default()
        });
        Ok(Page { items, next })
    }

    async fn catalog_get(&self, event_type: &str) -> StoreResult<Option<CatalogEntry>> {
        let t = event_type.to_string();
        let data: Option<String> = self
            .0
            .call(move |c, _| {
                let mut st = c.prepare_cached("SELECT data FROM event_catalog WHERE event_type = ?1").map_err(sql)?;
                let mut rows = st.query(params![t]).map_err(sql)?;
                rows.next().map_err(sql)?.map(|r| r.get(0)).transpose().map_err(sql)
            })
            .await?;
        data.map(|d| entry(&d)).transpose()
    }

    async fn catalog_put(&self, e: &CatalogEntry, read: Option<DateTime<Utc>>) -> StoreResult<bool> {
        let data = serde_json::to_string(e).map_err(|x| StoreError::Corrupt(format!("catalog entry: {x}")))?;
        let (t, name, version, at) = (e.event_type(), e.name.clone(), e.version, e.updated_at.timestamp_millis());
        let read = read.map(|r| r.timestamp_millis());
        self.0
            .call(move |c, _| {
                let n = match read {
                    None => c
                        .prepare_cached(
                            "INSERT OR IGNORE INTO event_catalog (event_type, name, version, updated_at, data) \
                             VALUES (?1, ?2, ?3, ?4, ?5)",
                        )
                        .and_then(|mut st| st.execute(params![t, name, version, at, data])),
                    Some(r) => c
                        .prepare_cached(
                            "UPDATE event_catalog SET updated_at = ?2, data = ?3 WHERE event_type = ?1 AND updated_at = ?4",
                        )
                        .and_then(|mut st| st.execute(params![t, at, data, r])),
                };
                n.map(|n| n == 1).map_err(sql)
            })
            .await
    }

    async fn catalog_page(&self, limit: usize, after: Option<&str>) -> StoreResult<Page<CatalogEntry>> {
        let after = after.unwrap_or("").to_string();
        let rows: Vec<String> = self
            .0
            .call(move |c, _| {
                let mut st = c
                    .prepare_cached("SELECT data FROM event_catalog WHERE event_type > ?1 ORDER BY event_type LIMIT ?2")
                    .map_err(sql)?;
                let rows = st.query_map(params![after, limit as i64 + 1], |r| r.get(0)).map_err(sql)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(sql)
            })
            .await?;
        let mut items = rows.iter().map(|d| entry(d)).collect::<StoreResult<Vec<_>>>()?;
        let next = (items.len() > limit).then(|| {
            items.truncate(limit);
            items.last().map(|e| e.event_type()).unwrap_or_default()
        });
        Ok(Page { items, next })
    }

    async fn catalog_versions(&self, name: &str) -> StoreResult<Vec<CatalogEntry>> {
        let name = name.to_string();
        let rows: Vec<String> = self
            .0
            .call(move |c, _| {
                let mut st = c
                    .prepare_cached("SELECT data FROM event_catalog WHERE name = ?1 ORDER BY version LIMIT ?2")
                    .map_err(sql)?;
                let rows = st.query_map(params![name, shared::catalog::MAX_VERSION], |r| r.get(0)).map_err(sql)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(sql)
            })
            .await?;
        rows.iter().map(|d| entry(d)).collect()
    }
}

/// A catalog entry as stored (`data`).
fn entry(data: &str) -> StoreResult<CatalogEntry> {
    serde_json::from_str(data).map_err(|e| StoreError::Corrupt(format!("event_catalog data: {e}")))
}
