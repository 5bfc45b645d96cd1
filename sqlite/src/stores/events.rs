//! The events table: appending events (with their outbox rows and partition
//! numbers), reading them, and searching them along one index each.

use async_trait::async_trait;
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, OptionalExtension};

use super::{event_rows, insert_announced, ToInsert};
use crate::{decode, sql, stored_text, Db, Stream};
use shared::error::StoreError;
use shared::event::EventRecord;
use shared::event_search::{EventQuery, EventSummary, Order, Outcome, TypeFilter};
use shared::ids::EventId;
use shared::ports::{EventStore, Page, StoreResult};

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
                            let seq = crate::ordering::next_seq(c, p)?;
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
        arg(&mut wh, "tenant_id = ?", Value::from(t.as_str().to_string()));
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

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use rusqlite::Connection;
    use shared::event_search::{EventQuery, Order, Outcome, TypeFilter};
    use shared::ports::TimeRange;

    /// Every combination of the search filters, in both orders, from the
    /// start and after a position, reads one index range in its order:
    /// never a scan of the table, never a sort of what it found.
    #[test]
    fn every_event_search_reads_an_index_in_order() {
        let c = Connection::open_in_memory().unwrap();
        crate::migrate(&c).unwrap();
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
                tenant_id: on(1).then(|| shared::ids::TenantId::new("acme")),
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
