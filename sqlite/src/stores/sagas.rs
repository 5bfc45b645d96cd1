//! The sagas table with its conditional transitions, and the attempts table.

use async_trait::async_trait;
use rusqlite::types::Value;
use rusqlite::{params, OptionalExtension};

use super::insert_announced;
use crate::{decode, encode, sql, stored, Db, Stream};
use chrono::{DateTime, Utc};
use shared::attempt::Attempt;
use shared::error::StoreError;
use shared::ids::{EventId, SagaId, SubscriptionId};
use shared::ports::{AttemptStore, Page, SagaStore, StoreResult, Transition, TransitionOutcome};
use shared::pull::Pulled;
use shared::saga::{Saga, SagaState};

/// Sagas table; inserts also append to the `sagas` outbox stream.
#[derive(Clone)]
pub struct SqliteSagas(pub Db);

#[async_trait]
impl SagaStore for SqliteSagas {
    async fn create(&self, sagas: &[Saga]) -> StoreResult<Vec<bool>> {
        let rows: Vec<(Vec<Value>, Vec<Value>)> = sagas
            .iter()
            .map(|s| {
                let row = vec![
                    Value::from(s.id.to_string()),
                    Value::from(s.event_id.to_string()),
                    Value::from(s.subscription_id.to_string()),
                    Value::from(s.state.status.as_str().to_string()),
                    Value::from(s.state.attempts),
                    Value::from(encode(s)),
                    due_ms(&s.state, s.created_at),
                    Value::from(s.pull_key.clone()),
                ];
                (row, vec![Value::from(s.id.to_string())])
            })
            .collect();
        self.0
            .call(move |c, marks| {
                insert_announced(
                    c,
                    marks,
                    Stream::Sagas,
                    "INSERT INTO sagas (id, event_id, subscription_id, status, attempts, data, due_at, pull_key) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (id) DO NOTHING",
                    "INSERT INTO outbox_sagas (key) VALUES (?1)",
                    &rows,
                )
            })
            .await
    }

    async fn get(&self, event_id: &EventId, id: &SagaId) -> StoreResult<Option<Saga>> {
        let (event_id, id) = (event_id.clone(), id.clone());
        self.0
            .call(move |c, _| {
                stored(
                    c,
                    "SELECT data FROM sagas WHERE id = ?1 AND event_id = ?2",
                    params![id.as_str(), event_id.as_str()],
                )
            })
            .await
    }

    async fn transition(&self, transitions: &[Transition]) -> StoreResult<Vec<TransitionOutcome>> {
        let transitions = transitions.to_vec();
        self.0
            .call(move |c, _| {
                let mut sel = c.prepare_cached("SELECT data FROM sagas WHERE id = ?1 AND event_id = ?2").map_err(sql)?;
                let mut upd = c
                    .prepare_cached("UPDATE sagas SET status = ?1, attempts = ?2, data = ?3, due_at = ?7 WHERE id = ?4 AND status = ?5 AND attempts = ?6")
                    .map_err(sql)?;
                let mut res = Vec::with_capacity(transitions.len());
                for t in &transitions {
                    let data: Option<String> = sel.query_row(params![t.saga_id.as_str(), t.event_id.as_str()], |r| r.get(0)).optional().map_err(sql)?;
                    let Some(data) = data else {
                        res.push(TransitionOutcome::Missing);
                        continue;
                    };
                    let mut saga: Saga = decode(&data)?;
                    if !same(&saga.state, &t.from) {
                        res.push(TransitionOutcome::Conflict(saga.state));
                        continue;
                    }
                    saga.state = t.to.clone();
                    saga.updated_at = t.at;
                    upd.execute(params![
                        t.to.status.as_str(),
                        t.to.attempts,
                        encode(&saga),
                        t.saga_id.as_str(),
                        t.from.status.as_str(),
                        t.from.attempts,
                        due_ms(&t.to, t.at)
                    ])
                    .map_err(sql)?;
                    res.push(TransitionOutcome::Applied);
                }
                Ok(res)
            })
            .await
    }

    async fn list_for_event(&self, event_id: &EventId) -> StoreResult<Vec<Saga>> {
        let id = event_id.clone();
        self.0
            .call(move |c, _| {
                let mut st =
                    c.prepare_cached("SELECT data FROM sagas WHERE event_id = ?1 ORDER BY rowid").map_err(sql)?;
                let rows = st.query_map([id.as_str()], |r| r.get::<_, String>(0)).map_err(sql)?;
                rows.map(|r| decode(&r.map_err(sql)?)).collect()
            })
            .await
    }

    /// In creation order (rowid, which the `sagas_by_event` index keeps
    /// after the event id), from after the rowid `after`.
    async fn page_for_event(&self, event_id: &EventId, limit: usize, after: Option<&str>) -> StoreResult<Page<Saga>> {
        let id = event_id.clone();
        let after: i64 = match after {
            None => 0,
            Some(a) => {
                a.parse().map_err(|_| StoreError::Corrupt(format!("saga page cursor {a:?} is not a row number")))?
            }
        };
        self.0
            .call(move |c, _| {
                let mut st = c
                    .prepare_cached(
                        "SELECT rowid, data FROM sagas WHERE event_id = ?1 AND rowid > ?2 ORDER BY rowid LIMIT ?3",
                    )
                    .map_err(sql)?;
                let rows: Vec<(i64, String)> = st
                    .query_map(params![id.as_str(), after, limit as i64], |r| Ok((r.get(0)?, r.get(1)?)))
                    .map_err(sql)?
                    .collect::<Result<_, _>>()
                    .map_err(sql)?;
                let next = (rows.len() >= limit).then(|| rows.last().map(|(r, _)| r.to_string())).flatten();
                let items = rows.iter().map(|(_, d)| decode(d)).collect::<StoreResult<_>>()?;
                Ok(Page { items, next })
            })
            .await
    }

    async fn page_for_pull(
        &self,
        subscription: &SubscriptionId,
        limit: usize,
        after: Option<&str>,
    ) -> StoreResult<Page<Pulled>> {
        let (sub, after) = (subscription.to_string(), after.unwrap_or("").to_string());
        self.0
            .call(move |c, _| {
                let mut st = c
                    .prepare_cached(
                        "SELECT pull_key, event_id, id FROM sagas WHERE subscription_id = ?1 AND pull_key IS NOT NULL \
                         AND pull_key > ?2 ORDER BY pull_key LIMIT ?3",
                    )
                    .map_err(sql)?;
                let mut items: Vec<Pulled> = st
                    .query_map(params![sub, after, limit as i64 + 1], |r| {
                        Ok(Pulled {
                            pull_key: r.get(0)?,
                            event_id: EventId::new(r.get::<_, String>(1)?),
                            saga_id: SagaId::new(r.get::<_, String>(2)?),
                        })
                    })
                    .map_err(sql)?
                    .collect::<Result<_, _>>()
                    .map_err(sql)?;
                let next = (items.len() > limit).then(|| {
                    items.truncate(limit);
                    items.last().map(|p| p.pull_key.clone()).unwrap_or_default()
                });
                Ok(Page { items, next })
            })
            .await
    }

    async fn stalled(&self, before: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Saga>> {
        self.0
            .call(move |c, _| {
                let mut st = c
                    .prepare_cached(
                        "SELECT data FROM sagas WHERE due_at IS NOT NULL AND due_at < ?1 ORDER BY due_at LIMIT ?2",
                    )
                    .map_err(sql)?;
                let rows = st
                    .query_map(params![before.timestamp_millis(), limit as i64], |r| r.get::<_, String>(0))
                    .map_err(sql)?;
                rows.map(|r| decode(&r.map_err(sql)?)).collect()
            })
            .await
    }

    async fn defer(
        &self,
        event_id: &EventId,
        id: &SagaId,
        expected: &SagaState,
        until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let (event_id, id, expected) = (event_id.clone(), id.clone(), expected.clone());
        self.0
            .call(move |c, _| {
                let n = c
                    .prepare_cached(
                        "UPDATE sagas SET due_at = ?1 WHERE id = ?2 AND event_id = ?3 AND status = ?4 AND attempts = ?5 AND due_at IS NOT NULL",
                    )
                    .map_err(sql)?
                    .execute(params![until.timestamp_millis(), id.as_str(), event_id.as_str(), expected.status.as_str(), expected.attempts])
                    .map_err(sql)?;
                Ok(n == 1)
            })
            .await
    }

    async fn count_redrive(
        &self,
        event_id: &EventId,
        id: &SagaId,
        expected: &SagaState,
        redrives: u32,
    ) -> StoreResult<bool> {
        let (event_id, id, expected) = (event_id.clone(), id.clone(), expected.clone());
        self.0
            .call(move |c, _| {
                let data: Option<String> = c
                    .prepare_cached("SELECT data FROM sagas WHERE id = ?1 AND event_id = ?2")
                    .map_err(sql)?
                    .query_row(params![id.as_str(), event_id.as_str()], |r| r.get(0))
                    .optional()
                    .map_err(sql)?;
                let Some(data) = data else { return Ok(false) };
                let mut saga: Saga = decode(&data)?;
                if !same(&saga.state, &expected) || saga.redrives != redrives {
                    return Ok(false);
                }
                saga.redrives = redrives + 1;
                let n = c
                    .prepare_cached("UPDATE sagas SET data = ?1 WHERE id = ?2 AND status = ?3 AND attempts = ?4")
                    .map_err(sql)?
                    .execute(params![encode(&saga), id.as_str(), expected.status.as_str(), expected.attempts])
                    .map_err(sql)?;
                Ok(n == 1)
            })
            .await
    }
}

/// The `due_at` column of a saga in `state` changed at `at`: milliseconds,
/// NULL once terminal (so the partial index holds only waiting sagas).
fn due_ms(state: &SagaState, at: DateTime<Utc>) -> Value {
    match shared::saga::due_at(state, at) {
        Some(t) => Value::from(t.timestamp_millis()),
        None => Value::Null,
    }
}

/// The condition of every saga transition: still the same status and attempt
/// count, and not terminal (terminal sagas never change).
fn same(stored: &SagaState, expected: &SagaState) -> bool {
    stored.status == expected.status && stored.attempts == expected.attempts && !stored.status.is_terminal()
}

/// Attempts table; inserts also append to the `attempts` outbox stream.
#[derive(Clone)]
pub struct SqliteAttempts(pub Db);

#[async_trait]
impl AttemptStore for SqliteAttempts {
    async fn record(&self, attempts: &[Attempt]) -> StoreResult<Vec<bool>> {
        let rows: Vec<(Vec<Value>, Vec<Value>)> = attempts
            .iter()
            .map(|a| {
                let key = [Value::from(a.saga_id.to_string()), Value::from(a.attempt)];
                let mut row = key.to_vec();
                row.push(Value::from(encode(a)));
                (row, key.to_vec())
            })
            .collect();
        self.0
            .call(move |c, marks| {
                insert_announced(
                    c,
                    marks,
                    Stream::Attempts,
                    "INSERT INTO attempts (saga_id, attempt, data) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                    "INSERT INTO outbox_attempts (key, attempt) VALUES (?1, ?2)",
                    &rows,
                )
            })
            .await
    }

    async fn list(&self, _event_id: &EventId, saga_id: &SagaId) -> StoreResult<Vec<Attempt>> {
        let id = saga_id.clone();
        self.0
            .call(move |c, _| {
                let mut st =
                    c.prepare_cached("SELECT data FROM attempts WHERE saga_id = ?1 ORDER BY attempt").map_err(sql)?;
                let rows = st.query_map([id.as_str()], |r| r.get::<_, String>(0)).map_err(sql)?;
                rows.map(|r| decode(&r.map_err(sql)?)).collect()
            })
            .await
    }
}
