//! The dead letters table and its open count.

use async_trait::async_trait;
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use crate::{decode, encode, sql, stored, Db};
use shared::dead_letter::{DeadLetter, DeadLetterQuery, DeadLetterState, Position, Resolution};
use shared::error::StoreError;
use shared::ids::DeadLetterId;
use shared::ports::{DeadLetterStore, Page, ReindexPage, StoreResult, MAX_REINDEX_PAGE};

/// Dead letters table.
#[derive(Clone)]
pub struct SqliteDeadLetters(pub Db);

#[async_trait]
impl DeadLetterStore for SqliteDeadLetters {
    async fn put(&self, dl: &DeadLetter) -> StoreResult<bool> {
        let dl = dl.clone();
        self.0
            .call(move |c, _| {
                let n = c
                    .execute(
                        "INSERT INTO dead_letters (id, state, created_at, data, subscription_id, event_type, tenant_id) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (id) DO NOTHING",
                        params![
                            dl.id.as_str(),
                            dl.state.as_str(),
                            dl.created_at.timestamp_millis(),
                            encode(&dl),
                            dl.subscription_id.as_str(),
                            dl.event_type,
                            dl.tenant_id.as_ref().map(|t| t.as_str())
                        ],
                    )
                    .map_err(sql)?;
                if n == 1 && dl.state == DeadLetterState::Open {
                    count_open(c, 1)?;
                }
                Ok(n == 1)
            })
            .await
    }

    async fn get(&self, id: &DeadLetterId) -> StoreResult<Option<DeadLetter>> {
        let id = id.clone();
        self.0.call(move |c, _| stored(c, "SELECT data FROM dead_letters WHERE id = ?1", [id.as_str()])).await
    }

    /// One statement: the equality filters and the keyset bound, ordered
    /// by `(created_at, id)` descending, which every index of the table
    /// ends with (the planner takes the index of one equality filter, or
    /// `dead_letters_by_created`, and walks it backwards from the bound).
    async fn page(&self, query: &DeadLetterQuery, limit: usize, after: Option<&str>) -> StoreResult<Page<DeadLetter>> {
        let q = query.clone();
        let after = match after {
            None => None,
            Some(a) => Some(Position::parse(a).ok_or_else(|| StoreError::Corrupt(format!("bad position {a}")))?),
        };
        let want = limit.saturating_add(1);
        self.0
            .call(move |c, _| {
                // Only the filters given are in the statement, so the
                // planner sees plain equalities and a range it can take an
                // index for (`?x IS NULL OR col = ?x` would defeat it).
                let mut conds: Vec<&str> = Vec::new();
                let mut args: Vec<Value> = Vec::new();
                let mut eq = |cond: &'static str, v: Option<String>| {
                    if let Some(v) = v {
                        conds.push(cond);
                        args.push(Value::from(v));
                    }
                };
                eq("subscription_id = ?", q.subscription_id.as_ref().map(|s| s.as_str().to_string()));
                eq("event_type = ?", q.event_type.clone());
                eq("tenant_id = ?", q.tenant_id.as_ref().map(|t| t.as_str().to_string()));
                eq("state = ?", q.state.map(|s| s.as_str().to_string()));
                if let Some(t) = q.since {
                    conds.push("created_at >= ?");
                    args.push(Value::from(t.timestamp_millis()));
                }
                if let Some(t) = q.until {
                    conds.push("created_at < ?");
                    args.push(Value::from(t.timestamp_millis()));
                }
                if let Some(p) = &after {
                    conds.push("(created_at, id) < (?, ?)");
                    args.push(Value::from(p.created_ms));
                    args.push(Value::from(p.id.as_str().to_string()));
                }
                args.push(Value::from(want as i64));
                let filter = if conds.is_empty() { String::new() } else { format!("WHERE {}", conds.join(" AND ")) };
                let mut st = c
                    .prepare_cached(&format!(
                        "SELECT data FROM dead_letters {filter} ORDER BY created_at DESC, id DESC LIMIT ?"
                    ))
                    .map_err(sql)?;
                let rows = st.query_map(params_from_iter(&args), |r| r.get::<_, String>(0)).map_err(sql)?;
                let mut items: Vec<DeadLetter> = rows.map(|r| decode(&r.map_err(sql)?)).collect::<StoreResult<_>>()?;
                let next = (items.len() > limit).then(|| {
                    items.truncate(limit);
                    items.last().map(|d| Position::after(d).to_text())
                });
                Ok(Page { items, next: next.flatten() })
            })
            .await
    }

    /// Open: the counter row (one read whatever their number). Others: a
    /// COUNT over the state index, O(their number).
    async fn count(&self, state: DeadLetterState) -> StoreResult<u64> {
        if state == DeadLetterState::Open {
            return self.0.call(|c, _| open_count(c)).await;
        }
        let state = state.as_str();
        self.0
            .call(move |c, _| {
                c.prepare_cached("SELECT COUNT(*) FROM dead_letters WHERE state = ?1")
                    .map_err(sql)?
                    .query_row([state], |r| r.get::<_, i64>(0))
                    .map(|n| n as u64)
                    .map_err(sql)
            })
            .await
    }

    async fn resolve(&self, id: &DeadLetterId, state: DeadLetterState, resolution: Resolution) -> StoreResult<bool> {
        let id = id.clone();
        self.0
            .call(move |c, _| {
                let data: Option<String> = c
                    .query_row(
                        "SELECT data FROM dead_letters WHERE id = ?1 AND state = ?2",
                        params![id.as_str(), DeadLetterState::Open.as_str()],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(sql)?;
                let Some(data) = data else { return Ok(false) };
                let mut dl: DeadLetter = decode(&data)?;
                dl.state = state;
                dl.resolution = Some(resolution.clone());
                c.execute(
                    "UPDATE dead_letters SET state = ?1, data = ?2 WHERE id = ?3",
                    params![state.as_str(), encode(&dl), id.as_str()],
                )
                .map_err(sql)?;
                if state != DeadLetterState::Open {
                    count_open(c, -1)?;
                }
                Ok(true)
            })
            .await
    }

    /// Dead letters after the id `after`, in id order; any whose listing
    /// columns are not those of its record (a row the schema migration
    /// could not fill) gets them from the record. Normally none: the
    /// migration that added the columns filled them.
    async fn reindex_page(&self, after: Option<&str>, limit: usize) -> StoreResult<ReindexPage> {
        let after = after.unwrap_or_default().to_string();
        let limit = limit.clamp(1, MAX_REINDEX_PAGE);
        self.0
            .call(move |c, _| {
                let rows = c
                    .prepare_cached(
                        "SELECT id, data, subscription_id, event_type, tenant_id FROM dead_letters WHERE id > ?1 ORDER BY id LIMIT ?2",
                    )
                    .map_err(sql)?
                    .query_map(params![after, limit as i64 + 1], |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            [r.get::<_, Option<String>>(2)?, r.get::<_, Option<String>>(3)?, r.get::<_, Option<String>>(4)?],
                        ))
                    })
                    .map_err(sql)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(sql)?;
                let next = (rows.len() > limit).then(|| rows[limit - 1].0.clone());
                let mut page = ReindexPage { next, ..ReindexPage::default() };
                for (id, data, stored) in rows.iter().take(limit) {
                    page.examined += 1;
                    let dl: DeadLetter = decode(data)?;
                    let wanted = [Some(dl.subscription_id.to_string()), Some(dl.event_type.clone()), dl.tenant_id.as_ref().map(|t| t.as_str().to_string())];
                    if *stored != wanted {
                        c.execute(
                            "UPDATE dead_letters SET subscription_id = ?1, event_type = ?2, tenant_id = ?3 WHERE id = ?4",
                            params![wanted[0], wanted[1], wanted[2], id],
                        )
                        .map_err(sql)?;
                        page.reindexed += 1;
                    }
                }
                Ok(page)
            })
            .await
    }
}

/// The `settings` row holding the number of open dead letters, kept by
/// every put and resolve in its own savepoint (so it changes with the dead
/// letter or not at all). A database from before it has no row: the first
/// [`open_count`] counts them once and writes it.
const OPEN_COUNT_KEY: &str = "dead_letters.open_count";

/// Adds `delta` to the open-dead-letter count, if it is kept yet.
fn count_open(c: &Connection, delta: i64) -> StoreResult<()> {
    c.prepare_cached("UPDATE settings SET value = CAST(value AS INTEGER) + ?1 WHERE key = ?2")
        .map_err(sql)?
        .execute(params![delta, OPEN_COUNT_KEY])
        .map_err(sql)?;
    Ok(())
}

/// The open-dead-letter count: one row read (the first time on a database
/// from before the count was kept, one COUNT of the open ones, written).
pub(super) fn open_count(c: &Connection) -> StoreResult<u64> {
    let kept: Option<i64> = c
        .prepare_cached("SELECT CAST(value AS INTEGER) FROM settings WHERE key = ?1")
        .map_err(sql)?
        .query_row([OPEN_COUNT_KEY], |r| r.get(0))
        .optional()
        .map_err(sql)?;
    let n = match kept {
        Some(n) => n,
        None => {
            let n: i64 =
                c.query_row("SELECT COUNT(*) FROM dead_letters WHERE state = 'open'", [], |r| r.get(0)).map_err(sql)?;
            c.execute("INSERT INTO settings (key, value) VALUES (?1, ?2)", params![OPEN_COUNT_KEY, n.to_string()])
                .map_err(sql)?;
            n
        }
    };
    Ok(n.max(0) as u64)
}
