//! SQLite implementations of the store ports. Records are stored as JSON
//! beside the columns that conditions and lookups need.

use async_trait::async_trait;
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use super::{decode, encode, sql, stored, stored_text, Db, Marks, Stream};
use chrono::{DateTime, Utc};
use shared::attempt::Attempt;
use shared::bulk::Job;
use shared::dead_letter::{DeadLetter, DeadLetterQuery, DeadLetterState, Position, Resolution};
use shared::error::StoreError;
use shared::event::EventRecord;
use shared::event_search::{EventQuery, EventSummary, Order, Outcome, TypeFilter};
use shared::ids::{DeadLetterId, EventId, SagaId, SubscriptionId};
use shared::ports::{
    AttemptStore, DeadLetterStore, EventStore, JobStore, Page, ReindexPage, SagaStore, StoreResult, SubscriptionFilter,
    SubscriptionPage, SubscriptionStore, Transition, TransitionOutcome, MAX_REINDEX_PAGE,
};
use shared::routing::{self, RouteKey};
use shared::saga::{Saga, SagaState};
use shared::subscription::Subscription;

/// Inserts each row unless its key exists and, for each row inserted, its
/// outbox row in the same transaction: SQLite's stream of new records,
/// which the next stage reads (DynamoDB Streams on AWS). Each item is its
/// insert and outbox parameters, made before the call (encoding records
/// is work the writer thread, which every stage waits on, need not do).
/// `true` where inserted.
fn insert_announced(
    c: &Connection,
    marks: &mut Marks,
    stream: Stream,
    insert: &str,
    announce: &str,
    rows: &[(Vec<Value>, Vec<Value>)],
) -> StoreResult<Vec<bool>> {
    let mut ins = c.prepare_cached(insert).map_err(sql)?;
    let mut out = c.prepare_cached(announce).map_err(sql)?;
    let mut res = Vec::with_capacity(rows.len());
    for (row, outbox) in rows {
        let inserted = ins.execute(params_from_iter(row)).map_err(sql)? == 1;
        if inserted {
            out.execute(params_from_iter(outbox)).map_err(sql)?;
            marks.mark(stream);
        }
        res.push(inserted);
    }
    Ok(res)
}

/// An event as [`SqliteEvents::insert`] takes it: encoded already, or, in a
/// partition, to be numbered and encoded in the transaction.
enum ToInsert {
    Encoded((Vec<Value>, Vec<Value>)),
    Numbered(Box<EventRecord>, shared::ordering::Partition),
}

/// An event's row in `events` and its outbox row.
fn event_rows(e: &EventRecord) -> (Vec<Value>, Vec<Value>) {
    let row = vec![
        Value::from(e.id.to_string()),
        Value::from(e.event_type.clone()),
        Value::from(e.received_at.timestamp_millis()),
        Value::from(e.expires_at.timestamp_millis()),
        Value::from(encode(e)),
        Value::from(e.tenant_id.clone()),
        Value::from(e.partition_seq.and(e.partition()).map(|p| p.scope)),
        Value::from(e.partition_seq.and(e.partition_key.clone())),
        Value::from(e.partition_seq.map(|n| n as i64)),
    ];
    (row, vec![Value::from(e.id.to_string())])
}

/// Events table; inserts also append to the `events` outbox stream.
#[derive(Clone)]
pub struct SqliteEvents(pub Db);

#[async_trait]
impl EventStore for SqliteEvents {
    async fn insert(&self, events: &[EventRecord]) -> StoreResult<Vec<bool>> {
        // An event in a partition is numbered (and so encoded) in the
        // transaction; any other is encoded here, off the writer thread.
        let events: Vec<ToInsert> = events
            .iter()
            .map(|e| match e.partition() {
                None => ToInsert::Encoded(event_rows(e)),
                Some(p) => ToInsert::Numbered(Box::new(e.clone()), p),
            })
            .collect();
        self.0
            .call(move |c, marks| {
                let mut exists = c.prepare_cached("SELECT 1 FROM events WHERE id = ?1").map_err(sql)?;
                let mut inserted = Vec::with_capacity(events.len());
                for e in &events {
                    // Numbered in this transaction: a duplicate (looked up
                    // first) or a rolled-back insert takes no number. Events
                    // without a partition need no lookup: the insert's
                    // conflict clause finds a duplicate.
                    let numbered;
                    let rows = match e {
                        ToInsert::Encoded(rows) => rows,
                        ToInsert::Numbered(e, p) => {
                            if exists.query_row([e.id.as_str()], |_| Ok(())).optional().map_err(sql)?.is_some() {
                                inserted.push(false);
                                continue;
                            }
                            let seq = super::ordering::next_seq(c, p)?;
                            numbered = event_rows(&EventRecord { partition_seq: Some(seq), ..(**e).clone() });
                            &numbered
                        }
                    };
                    inserted.extend(insert_announced(
                        c,
                        marks,
                        Stream::Events,
                        "INSERT INTO events (id, event_type, received_at, expires_at, data, tenant_id, part_scope, part_key, part_seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (id) DO NOTHING",
                        "INSERT INTO outbox_events (key) VALUES (?1)",
                        std::slice::from_ref(rows),
                    )?);
                }
                Ok(inserted)
            })
            .await
    }

    async fn get(&self, id: &EventId) -> StoreResult<Option<EventRecord>> {
        let id = id.clone();
        let data: Option<String> =
            self.0.call(move |c, _| stored_text(c, "SELECT data FROM events WHERE id = ?1", [id.as_str()])).await?;
        data.map(|d| decode(&d)).transpose()
    }

    async fn search(&self, query: &EventQuery, limit: usize, after: Option<&str>) -> StoreResult<Page<EventSummary>> {
        let (sql_text, args, by_seq) = search_plan(query, limit, after)?;
        self.0
            .call(move |c, _| {
                let mut st = c.prepare_cached(&sql_text).map_err(sql)?;
                let rows = st
                    .query_map(params_from_iter(&args), |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
                    .map_err(sql)?;
                let mut items = Vec::new();
                for row in rows {
                    let (data, outcome) = row.map_err(sql)?;
                    let e: EventRecord = decode(&data)?;
                    items.push(EventSummary::of(&e, Outcome::from_level(outcome as u64)));
                }
                let next = (items.len() > limit).then(|| {
                    items.truncate(limit);
                    let last = items.last().expect("a full page");
                    match by_seq {
                        true => last.partition_seq.unwrap_or_default().to_string(),
                        false => format!("{}:{}", last.received_at.timestamp_millis(), last.id),
                    }
                });
                Ok(Page { items, next })
            })
            .await
    }

    async fn mark_outcome(&self, id: &EventId, outcome: Outcome) -> StoreResult<bool> {
        let (id, level) = (id.clone(), i64::from(outcome.level()));
        self.0
            .call(move |c, _| {
                let n = c
                    .prepare_cached("UPDATE events SET outcome = ?2 WHERE id = ?1 AND outcome < ?2")
                    .map_err(sql)?
                    .execute(params![id.as_str(), level])
                    .map_err(sql)?;
                Ok(n == 1)
            })
            .await
    }
}

/// The statement of one [`EventStore::search`] page, its parameters, and
/// whether its positions are partition numbers (else `received_at:id`).
/// Each listing reads one index, chosen by its most selective filter: a
/// partition (`events_by_partition`, in number order), a tenant
/// (`events_by_tenant`), an exact type (`events_by_type`), an outcome
/// (`events_by_outcome`, only events that failed), else every event by time
/// (`events_by_received`); the other filters are checked on the rows that
/// index yields, in order, so no listing sorts or reads every event.
pub fn search_plan(query: &EventQuery, limit: usize, after: Option<&str>) -> StoreResult<(String, Vec<Value>, bool)> {
    let desc = query.order == Order::NewestFirst;
    let (cmp, dir) = if desc { ("<", "DESC") } else { (">", "ASC") };
    let mut wh: Vec<String> = Vec::new();
    let mut args: Vec<Value> = Vec::new();
    let mut arg = |wh: &mut Vec<String>, clause: &str, v: Value| {
        args.push(v);
        wh.push(clause.replace('?', &format!("?{}", args.len())));
    };
    let partition = query.partition();
    let exact_type = matches!(query.event_type, Some(TypeFilter::Exact(_)));
    let index = if partition.is_some() {
        "events_by_partition"
    } else if query.tenant_id.is_some() {
        "events_by_tenant"
    } else if exact_type {
        "events_by_type"
    } else if query.outcome.is_some() {
        "events_by_outcome"
    } else {
        "events_by_received"
    };
    if let Some(p) = &partition {
        arg(&mut wh, "part_scope = ?", Value::from(p.scope.clone()));
        arg(&mut wh, "part_key = ?", Value::from(p.key.clone()));
        wh.push("part_seq IS NOT NULL".into());
    } else if let Some(t) = &query.tenant_id {
        arg(&mut wh, "tenant_id = ?", Value::from(t.clone()));
    }
    match &query.event_type {
        Some(TypeFilter::Exact(t)) => arg(&mut wh, "event_type = ?", Value::from(t.clone())),
        Some(TypeFilter::Prefix(p)) => {
            // `order.` .. `order/`: every type that starts with `order.`.
            let mut upper = p.clone();
            upper.pop();
            upper.push('/');
            arg(&mut wh, "event_type > ?", Value::from(p.clone()));
            arg(&mut wh, "event_type < ?", Value::from(upper));
        }
        None => {}
    }
    if let Some(o) = query.outcome {
        wh.push("outcome >= 1".into());
        arg(&mut wh, "outcome >= ?", Value::from(i64::from(o.level())));
    }
    if let Some(s) = query.received.since {
        arg(&mut wh, "received_at >= ?", Value::from(s.timestamp_millis()));
    }
    if let Some(u) = query.received.until {
        arg(&mut wh, "received_at < ?", Value::from(u.timestamp_millis()));
    }
    let bad = || StoreError::Corrupt(format!("not a position of this listing: {after:?}"));
    let order = if partition.is_some() {
        if let Some(a) = after {
            let seq: i64 = a.parse().map_err(|_| bad())?;
            arg(&mut wh, &format!("part_seq {cmp} ?"), Value::from(seq));
        }
        format!("part_seq {dir}")
    } else {
        if let Some(a) = after {
            let (ms, id) = a.split_once(':').ok_or_else(bad)?;
            let ms: i64 = ms.parse().map_err(|_| bad())?;
            args.push(Value::from(ms));
            args.push(Value::from(id.to_string()));
            wh.push(format!("(received_at, id) {cmp} (?{}, ?{})", args.len() - 1, args.len()));
        }
        format!("received_at {dir}, id {dir}")
    };
    let filter = if wh.is_empty() { String::new() } else { format!("WHERE {}", wh.join(" AND ")) };
    let text =
        format!("SELECT data, outcome FROM events INDEXED BY {index} {filter} ORDER BY {order} LIMIT {}", limit + 1);
    Ok((text, args, partition.is_some()))
}

/// Subscriptions table, and its routing index `subscription_routes`
/// (one row per (scope, pattern) of each subscription) written in the same
/// transaction as every subscription write.
#[derive(Clone)]
pub struct SqliteSubscriptions(pub Db);

/// Writes the index rows of `sub` (after its old ones were deleted).
fn index_subscription(c: &Connection, sub: &Subscription) -> StoreResult<()> {
    let mut st = c
        .prepare_cached(
            "INSERT OR IGNORE INTO subscription_routes (scope, pattern, subscription_id) VALUES (?1, ?2, ?3)",
        )
        .map_err(sql)?;
    for k in routing::index_keys(sub) {
        st.execute(params![k.scope.as_text(), k.pattern, sub.id.as_str()]).map_err(sql)?;
    }
    Ok(())
}

fn unindex_subscription(c: &Connection, id: &SubscriptionId) -> StoreResult<()> {
    c.prepare_cached("DELETE FROM subscription_routes WHERE subscription_id = ?1")
        .map_err(sql)?
        .execute([id.as_str()])
        .map_err(sql)?;
    Ok(())
}

/// The stored subscriptions of `ids`, in that order (`None` where missing).
fn subscriptions_by_id(c: &Connection, ids: &[SubscriptionId]) -> StoreResult<Vec<Option<Subscription>>> {
    let mut st = c.prepare_cached("SELECT data FROM subscriptions WHERE id = ?1").map_err(sql)?;
    ids.iter()
        .map(|id| {
            let data: Option<String> = st.query_row([id.as_str()], |r| r.get(0)).optional().map_err(sql)?;
            data.map(|d| decode(&d)).transpose()
        })
        .collect()
}

/// Up to `limit` ids indexed under `key` after `after`, in id order.
fn route_ids(c: &Connection, key: &RouteKey, after: &str, limit: i64) -> StoreResult<Vec<SubscriptionId>> {
    let mut st = c
        .prepare_cached(
            "SELECT subscription_id FROM subscription_routes WHERE scope = ?1 AND pattern = ?2 \
             AND subscription_id > ?3 ORDER BY subscription_id LIMIT ?4",
        )
        .map_err(sql)?;
    let rows = st
        .query_map(params![key.scope.as_text(), key.pattern, after, limit], |r| {
            r.get::<_, String>(0).map(SubscriptionId::new)
        })
        .map_err(sql)?;
    rows.map(|r| r.map_err(sql)).collect()
}

#[async_trait]
impl SubscriptionStore for SqliteSubscriptions {
    async fn create(&self, sub: &Subscription) -> StoreResult<()> {
        let sub = sub.clone();
        self.0
            .call(move |c, _| {
                c.execute(
                    "INSERT INTO subscriptions (id, version, data, tenant_id) VALUES (?1, ?2, ?3, ?4)",
                    params![sub.id.as_str(), sub.version as i64, encode(&sub), sub.tenant_id],
                )
                .map_err(sql)?;
                index_subscription(c, &sub)
            })
            .await
    }

    async fn get(&self, id: &SubscriptionId) -> StoreResult<Option<Subscription>> {
        let id = id.clone();
        self.0.call(move |c, _| Ok(subscriptions_by_id(c, std::slice::from_ref(&id))?.pop().flatten())).await
    }

    /// One call (one trip through the writer) for all of them.
    async fn get_many(&self, ids: &[SubscriptionId]) -> StoreResult<Vec<Option<Subscription>>> {
        let ids = ids.to_vec();
        self.0.call(move |c, _| subscriptions_by_id(c, &ids)).await
    }

    async fn routes(&self, keys: &[RouteKey]) -> StoreResult<Vec<Vec<SubscriptionId>>> {
        let keys = keys.to_vec();
        self.0.call(move |c, _| keys.iter().map(|k| route_ids(c, k, "", -1)).collect()).await
    }

    /// By the primary key (all), the `tenant_id` index (a tenant), or a
    /// merge of the index ranges of each key (routes), reading at most
    /// `limit + 1` ids of each.
    async fn page(
        &self,
        filter: &SubscriptionFilter,
        limit: usize,
        after: Option<&SubscriptionId>,
    ) -> StoreResult<SubscriptionPage> {
        let (filter, after) = (filter.clone(), after.map(|a| a.to_string()).unwrap_or_default());
        let want = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
        self.0
            .call(move |c, _| {
                let mut rows: Vec<Subscription> = match &filter {
                    SubscriptionFilter::All => {
                        let mut st = c
                            .prepare_cached("SELECT data FROM subscriptions WHERE id > ?1 ORDER BY id LIMIT ?2")
                            .map_err(sql)?;
                        let rows = st.query_map(params![after, want], |r| r.get::<_, String>(0)).map_err(sql)?;
                        rows.map(|r| decode(&r.map_err(sql)?)).collect::<StoreResult<_>>()?
                    }
                    SubscriptionFilter::Tenant(t) => {
                        let mut st = c
                            .prepare_cached(
                                "SELECT data FROM subscriptions WHERE tenant_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
                            )
                            .map_err(sql)?;
                        let rows = st.query_map(params![t, after, want], |r| r.get::<_, String>(0)).map_err(sql)?;
                        rows.map(|r| decode(&r.map_err(sql)?)).collect::<StoreResult<_>>()?
                    }
                    SubscriptionFilter::Routes(keys) => {
                        let mut ids = std::collections::BTreeSet::new();
                        for k in keys {
                            ids.extend(route_ids(c, k, &after, want)?);
                        }
                        let ids: Vec<SubscriptionId> = ids.into_iter().take(limit.saturating_add(1)).collect();
                        subscriptions_by_id(c, &ids)?.into_iter().flatten().collect()
                    }
                };
                let next_after = (rows.len() > limit).then(|| {
                    rows.truncate(limit);
                    rows.last().map(|s| s.id.clone())
                });
                Ok(SubscriptionPage { items: rows, next_after: next_after.flatten() })
            })
            .await
    }

    async fn update(&self, sub: &Subscription, expected_version: u64) -> StoreResult<bool> {
        let sub = sub.clone();
        self.0
            .call(move |c, _| {
                let n = c
                    .execute(
                        "UPDATE subscriptions SET version = ?1, data = ?2, tenant_id = ?3 WHERE id = ?4 AND version = ?5",
                        params![sub.version as i64, encode(&sub), sub.tenant_id, sub.id.as_str(), expected_version as i64],
                    )
                    .map_err(sql)?;
                if n == 1 {
                    unindex_subscription(c, &sub.id)?;
                    index_subscription(c, &sub)?;
                }
                Ok(n == 1)
            })
            .await
    }

    async fn delete(&self, id: &SubscriptionId) -> StoreResult<bool> {
        let id = id.clone();
        self.0
            .call(move |c, _| {
                unindex_subscription(c, &id)?;
                Ok(c.execute("DELETE FROM subscriptions WHERE id = ?1", [id.as_str()]).map_err(sql)? == 1)
            })
            .await
    }

    /// Migration 4 indexed every subscription stored before the index
    /// existed, so this normally writes nothing: it re-checks up to `limit`
    /// subscriptions after the id `after`, in id order, and indexes any
    /// without a `subscription_routes` row (every subscription has at least
    /// one pattern, so at least one row).
    async fn reindex_page(&self, after: Option<&str>, limit: usize) -> StoreResult<ReindexPage> {
        let after = after.unwrap_or_default().to_string();
        let limit = limit.clamp(1, MAX_REINDEX_PAGE);
        self.0
            .call(move |c, _| {
                let mut st = c
                    .prepare_cached(
                        "SELECT s.id, s.data, EXISTS (SELECT 1 FROM subscription_routes r WHERE r.subscription_id = s.id) \
                         FROM subscriptions s WHERE s.id > ?1 ORDER BY s.id LIMIT ?2",
                    )
                    .map_err(sql)?;
                let rows = st
                    .query_map(params![after, limit as i64 + 1], |r| {
                        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, bool>(2)?))
                    })
                    .map_err(sql)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(sql)?;
                let next = (rows.len() > limit).then(|| rows[limit - 1].0.clone());
                let mut page = ReindexPage { next, ..ReindexPage::default() };
                for (_, data, indexed) in rows.iter().take(limit) {
                    page.examined += 1;
                    if !indexed {
                        index_subscription(c, &decode::<Subscription>(data)?)?;
                        page.reindexed += 1;
                    }
                }
                Ok(page)
            })
            .await
    }
}

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
                    "INSERT INTO sagas (id, event_id, subscription_id, status, attempts, data, due_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (id) DO NOTHING",
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

    async fn list(&self, saga_id: &SagaId) -> StoreResult<Vec<Attempt>> {
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
                            dl.tenant_id
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
                eq("tenant_id = ?", q.tenant_id.clone());
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
                    let wanted = [Some(dl.subscription_id.to_string()), Some(dl.event_type.clone()), dl.tenant_id.clone()];
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
fn open_count(c: &Connection) -> StoreResult<u64> {
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

/// Jobs table: one row per bulk job, its JSON and version.
#[derive(Clone)]
pub struct SqliteJobs(pub Db);

#[async_trait]
impl JobStore for SqliteJobs {
    async fn create(&self, job: &Job) -> StoreResult<bool> {
        let job = job.clone();
        self.0
            .call(move |c, _| {
                let n = c
                    .prepare_cached(
                        "INSERT INTO jobs (id, version, data) VALUES (?1, ?2, ?3) ON CONFLICT (id) DO NOTHING",
                    )
                    .map_err(sql)?
                    .execute(params![job.id, job.version as i64, encode(&job)])
                    .map_err(sql)?;
                Ok(n == 1)
            })
            .await
    }

    async fn get(&self, id: &str) -> StoreResult<Option<Job>> {
        let id = id.to_string();
        self.0.call(move |c, _| stored(c, "SELECT data FROM jobs WHERE id = ?1", [&id])).await
    }

    async fn update(&self, job: &Job, expected_version: u64) -> StoreResult<bool> {
        let job = job.clone();
        self.0
            .call(move |c, _| {
                let n = c
                    .prepare_cached("UPDATE jobs SET version = ?1, data = ?2 WHERE id = ?3 AND version = ?4")
                    .map_err(sql)?
                    .execute(params![job.version as i64, encode(&job), job.id, expected_version as i64])
                    .map_err(sql)?;
                Ok(n == 1)
            })
            .await
    }
}

/// Process settings (the generated API key) kept with the data.
#[derive(Clone)]
pub struct SqliteSettings(pub Db);

impl SqliteSettings {
    /// The stored value of `key`, or `init()` stored now and returned.
    pub async fn get_or_init(&self, key: &str, init: impl FnOnce() -> String + Send + 'static) -> StoreResult<String> {
        let key = key.to_string();
        // A call may run twice (`Db::call`): the value is made once.
        let init = std::sync::Mutex::new(Some(init));
        let made = std::sync::OnceLock::new();
        self.0
            .call(move |c, _| {
                let v: Option<String> = c
                    .query_row("SELECT value FROM settings WHERE key = ?1", [&key], |r| r.get(0))
                    .optional()
                    .map_err(sql)?;
                if let Some(v) = v {
                    return Ok(v);
                }
                let v = made.get_or_init(|| init.lock().expect("init").take().expect("made once")()).clone();
                c.execute("INSERT INTO settings (key, value) VALUES (?1, ?2)", params![key, v]).map_err(sql)?;
                Ok(v)
            })
            .await
    }

    /// Counts for metrics: open dead letters.
    pub async fn open_dead_letters(&self) -> StoreResult<u64> {
        self.0.call(|c, _| open_count(c)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::event_search::{EventQuery, Order, Outcome, TypeFilter};
    use shared::ports::TimeRange;

    /// Every combination of the search filters, in both orders, from the
    /// start and after a position, reads one index range in its order:
    /// never a scan of the table, never a sort of what it found.
    #[test]
    fn every_event_search_reads_an_index_in_order() {
        let c = Connection::open_in_memory().unwrap();
        super::super::migrate(&c).unwrap();
        let now = Utc::now();
        let mut checked = 0;
        for bits in 0u32..64 {
            let on = |i: u32| bits & (1 << i) != 0;
            let q = EventQuery {
                event_type: on(0).then(|| {
                    if on(5) {
                        TypeFilter::Prefix("order.".into())
                    } else {
                        TypeFilter::Exact("order.created".into())
                    }
                }),
                tenant_id: on(1).then(|| "acme".to_string()),
                partition_key: on(2).then(|| "k1".to_string()),
                received: if on(3) {
                    TimeRange { since: Some(now - chrono::Duration::days(1)), until: Some(now) }
                } else {
                    TimeRange::default()
                },
                outcome: on(4).then_some(Outcome::Failed),
                order: Order::NewestFirst,
            };
            for order in [Order::NewestFirst, Order::OldestFirst] {
                let q = EventQuery { order, ..q.clone() };
                let after = if q.partition_key.is_some() { "7".to_string() } else { "1700000000000:evt_x".to_string() };
                for after in [None, Some(after.as_str())] {
                    let (text, args, _) = search_plan(&q, 10, after).unwrap();
                    let mut st = c.prepare(&format!("EXPLAIN QUERY PLAN {text}")).unwrap();
                    let plan: Vec<String> = st
                        .query_map(params_from_iter(&args), |r| r.get::<_, String>(3))
                        .unwrap()
                        .collect::<Result<_, _>>()
                        .unwrap();
                    let plan = plan.join("; ");
                    assert!(plan.contains("USING INDEX events_by_"), "{q:?} {after:?}: {plan}");
                    assert!(!plan.contains("TEMP B-TREE"), "{q:?} {after:?}: sorts: {plan}");
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 256);
    }
}
