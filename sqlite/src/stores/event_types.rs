//! The `event_types` table: the event types seen at ingest
//! ([`shared::event_types`]), inserted once per (scope, type) and listed by
//! scope in type order.

use async_trait::async_trait;
use chrono::DateTime;
use rusqlite::params;

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
}
