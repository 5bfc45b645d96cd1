//! A job queue with SQS semantics on SQLite: per-message delay, visibility
//! timeout, receive count, and a move to the queue's dead-letter queue once a
//! message has been received `max_receives` times without being deleted
//! (SQS's redrive policy). A receipt names one receive, so a worker whose lease
//! expired cannot delete the message another worker now holds.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::params;

use super::{now_ms, sql, Db, Stream};
use crate::ports::{JobQueue, Outgoing, QueueDepth, Received, StoreResult};

/// One named queue in the database.
#[derive(Clone)]
pub struct SqliteQueue {
    db: Db,
    name: &'static str,
    dlq: Option<(&'static str, u32)>,
    stream: Stream,
    /// Groups set aside ([`JobQueue::pause_group`]) and until when (ms):
    /// a message sent to one meanwhile without a delay of its own is
    /// invisible until then too, so a paused subscription's new jobs are not
    /// received just to be put back.
    paused: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, i64>>>,
}

impl SqliteQueue {
    /// The queue `name`; with `dlq = Some((dlq_name, max_receives))`, a
    /// message received `max_receives` times moves to the queue `dlq_name`.
    /// Sends wake the consumers watching `stream`.
    pub fn new(db: Db, name: &'static str, dlq: Option<(&'static str, u32)>, stream: Stream) -> Self {
        SqliteQueue { db, name, dlq, stream, paused: Default::default() }
    }

    /// When the next message becomes visible, if any (lets a worker sleep
    /// exactly until then).
    pub async fn next_visible_at(&self) -> StoreResult<Option<i64>> {
        let name = self.name;
        self.db
            .call(move |c, _| {
                c.prepare_cached("SELECT MIN(visible_at) FROM queue_messages WHERE queue = ?1")
                    .and_then(|mut st| st.query_row([name], |r| r.get(0)))
                    .map_err(sql)
            })
            .await
    }

    /// Moves every message of this queue to `to`, as SQS's "start DLQ
    /// redrive" (StartMessageMoveTask) does; returns how many moved.
    pub async fn move_all_to(&self, to: &SqliteQueue) -> StoreResult<usize> {
        let (from, to, stream) = (self.name, to.name, to.stream);
        self.db
            .call(move |c, marks| {
                let n = c
                    .execute(
                        "UPDATE queue_messages SET queue = ?2, visible_at = ?3, receive_count = 0 WHERE queue = ?1",
                        params![from, to, now_ms()],
                    )
                    .map_err(sql)?;
                if n > 0 {
                    marks.mark(stream);
                }
                Ok(n)
            })
            .await
    }
}

/// Sets a group's messages aside until `?3`. Through the group's index
/// (named: the planner, without statistics, would rather read every
/// message of the queue due before `?3`), so the cost is the group's
/// backlog, not the queue's.
const PAUSE_GROUP: &str = "UPDATE queue_messages INDEXED BY queue_messages_group SET visible_at = ?3 \
     WHERE queue = ?1 AND group_key = ?2 AND visible_at < ?3";

fn receipt(id: i64, count: u32) -> String {
    format!("{id}:{count}")
}

fn parse_receipt(r: &str) -> Option<(i64, u32)> {
    let (id, count) = r.split_once(':')?;
    Some((id.parse().ok()?, count.parse().ok()?))
}

#[async_trait]
impl JobQueue for SqliteQueue {
    async fn send(&self, messages: &[Outgoing]) -> StoreResult<()> {
        let (name, stream) = (self.name, self.stream);
        let mut messages = messages.to_vec();
        {
            let mut paused = self.paused.lock().expect("paused groups");
            if !paused.is_empty() {
                let now = now_ms();
                paused.retain(|_, until| *until > now);
                // Only new work (no delay of its own): a message sent back with
                // its own delay (a deferral) keeps it.
                for m in messages.iter_mut().filter(|m| m.delay.is_zero()) {
                    if let Some(until) = m.group.as_ref().and_then(|g| paused.get(g)) {
                        let wait = Duration::from_millis((until - now).max(0) as u64);
                        m.delay = m.delay.max(wait);
                    }
                }
            }
        }
        self.db
            .call(move |c, marks| {
                let now = now_ms();
                let mut st = c
                    .prepare_cached(
                        "INSERT INTO queue_messages (queue, body, visible_at, sent_at, group_key) VALUES (?1, ?2, ?3, ?4, ?5)",
                    )
                    .map_err(sql)?;
                for m in &messages {
                    st.execute(params![name, m.body, now + m.delay.as_millis() as i64, now, m.group]).map_err(sql)?;
                }
                marks.mark(stream);
                Ok(())
            })
            .await
    }

    async fn receive(&self, max: usize, visibility: Duration) -> StoreResult<Vec<Received>> {
        let (name, dlq) = (self.name, self.dlq);
        let (out, moved) = self
            .db
            .call(move |c, _| {
                let now = now_ms();
                let mut sel = c
                    .prepare_cached(
                        "SELECT id, body, receive_count FROM queue_messages WHERE queue = ?1 AND visible_at <= ?2 ORDER BY visible_at, id LIMIT ?3",
                    )
                    .map_err(sql)?;
                let rows: Vec<(i64, String, u32)> = sel
                    .query_map(params![name, now, max as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                    .map_err(sql)?
                    .collect::<Result<_, _>>()
                    .map_err(sql)?;
                let mut out = Vec::with_capacity(rows.len());
                let mut moved = Vec::new();
                for (id, body, count) in rows {
                    if let Some((dlq, _)) = dlq.filter(|(_, max)| count >= *max) {
                        c.execute(
                            "UPDATE queue_messages SET queue = ?2, visible_at = ?3, receive_count = 0 WHERE id = ?1",
                            params![id, dlq, now],
                        )
                        .map_err(sql)?;
                        moved.push((id, count));
                        continue;
                    }
                    c.prepare_cached("UPDATE queue_messages SET visible_at = ?1, receive_count = ?2 WHERE id = ?3")
                        .map_err(sql)?
                        .execute(params![now + visibility.as_millis() as i64, count + 1, id])
                        .map_err(sql)?;
                    out.push(Received { body, receipt: receipt(id, count + 1), receive_count: count + 1 });
                }
                Ok((out, moved))
            })
            .await?;
        // Logged once committed (the call may run twice: `Db::call`).
        for (id, count) in moved {
            let max_receives = dlq.map(|(_, max)| max);
            tracing::warn!(
                queue = name,
                message_id = id,
                receives = count,
                max_receives,
                "message moved to the dead-letter queue"
            );
        }
        Ok(out)
    }

    async fn delete(&self, receipts: &[String]) -> StoreResult<()> {
        let ids = parse_receipts(receipts);
        // Lazily (`Db::call_lazy`): a finished message that is not deleted
        // yet stays invisible, and after a crash is delivered again (as SQS
        // may).
        self.db.call_lazy(move |c, _| delete_messages(c, &ids)).await
    }

    fn delete_detached(self: Arc<Self>, receipts: Vec<String>) {
        let ids = parse_receipts(&receipts);
        if let Err(e) = self.db.submit_lazy("queue message delete", move |c, _| delete_messages(c, &ids)) {
            tracing::error!(error = %e, queue = self.name, "deleting messages failed; they will be redelivered and deduplicated");
        }
    }

    async fn change_visibility(&self, receipt: &str, delay: Duration) -> StoreResult<()> {
        let Some((id, count)) = parse_receipt(receipt) else { return Ok(()) };
        let stream = self.stream;
        self.db
            .call(move |c, marks| {
                c.execute(
                    "UPDATE queue_messages SET visible_at = ?1 WHERE id = ?2 AND receive_count = ?3",
                    params![now_ms() + delay.as_millis() as i64, id, count],
                )
                .map_err(sql)?;
                marks.mark(stream);
                Ok(())
            })
            .await
    }

    async fn pause_group(&self, group: &str, delay: Duration) -> StoreResult<u64> {
        self.paused.lock().expect("paused groups").insert(group.to_string(), now_ms() + delay.as_millis() as i64);
        let (name, group) = (self.name, group.to_string());
        self.db
            .call(move |c, _| {
                let until = now_ms() + delay.as_millis() as i64;
                let n =
                    c.prepare_cached(PAUSE_GROUP).map_err(sql)?.execute(params![name, group, until]).map_err(sql)?;
                Ok(n as u64)
            })
            .await
    }

    async fn depth(&self) -> StoreResult<QueueDepth> {
        let (name, dlq) = (self.name, self.dlq.map(|(d, _)| d));
        self.db
            .call(move |c, _| {
                let now = now_ms();
                let (visible, not_visible): (i64, i64) = c
                    .query_row(
                        "SELECT COALESCE(SUM(visible_at <= ?2), 0), COALESCE(SUM(visible_at > ?2), 0) FROM queue_messages WHERE queue = ?1",
                        params![name, now],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .map_err(sql)?;
                let dead: i64 = match dlq {
                    Some(d) => c.query_row("SELECT COUNT(*) FROM queue_messages WHERE queue = ?1", [d], |r| r.get(0)).map_err(sql)?,
                    None => 0,
                };
                Ok(QueueDepth { visible: visible as u64, not_visible: not_visible as u64, dead: dead as u64 })
            })
            .await
    }
}

/// The (message id, receive count) of each receipt this queue issued.
fn parse_receipts(receipts: &[String]) -> Vec<(i64, u32)> {
    receipts.iter().filter_map(|r| parse_receipt(r)).collect()
}

/// Deletes each message still at the receive its receipt was issued for.
fn delete_messages(c: &rusqlite::Connection, ids: &[(i64, u32)]) -> StoreResult<()> {
    let mut st = c.prepare_cached("DELETE FROM queue_messages WHERE id = ?1 AND receive_count = ?2").map_err(sql)?;
    for (id, count) in ids {
        st.execute(params![id, count]).map_err(sql)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Setting a group aside reads only that group's messages.
    #[test]
    fn pausing_a_group_reads_the_group_index() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        super::super::migrate(&c).unwrap();
        let plan: Vec<String> = c
            .prepare(&format!("EXPLAIN QUERY PLAN {PAUSE_GROUP}"))
            .unwrap()
            .query_map(params!["deliveries", "sub_1", 5], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(plan, vec!["SEARCH queue_messages USING INDEX queue_messages_group (queue=? AND group_key=?)"]);
    }
}
