//! A job queue with SQS semantics on SQLite: per-message delay, visibility
//! timeout, receive count, and a move to the queue's dead-letter queue once a
//! message has been received `max_receives` times without being deleted
//! (SQS's redrive policy). A receipt names one receive, so a worker whose lease
//! expired cannot delete the message another worker now holds.
//!
//! A group set aside ([`JobQueue::pause_group`]) is parked: its messages
//! are flagged and kept apart in their order, new ones join them, and once
//! the pause is over each receive hands back up to [`RELEASE`] of them,
//! oldest first. Setting a group aside again costs what was handed back or
//! arrived since, never its whole backlog, so a hung subscription with a
//! million jobs queued costs the writer (which everyone shares) little.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::params;

use super::{now_ms, sql, Db, Stream};
use shared::ports::{JobQueue, Outgoing, QueueDepth, Received, StoreResult};

/// One named queue in the database.
#[derive(Clone)]
pub struct SqliteQueue {
    db: Db,
    name: &'static str,
    dlq: Option<(&'static str, u32)>,
    stream: Stream,
}

/// `visible_at` of a parked message: later than any other, so receiving
/// never reaches it; its `parked` flag and `queue_pauses` say when it goes.
const PARKED_AT: i64 = i64::MAX / 2;

/// Parked messages of one group a receive hands back once its pause is
/// over: more than any group's `max_in_flight` and the jobs held behind it
/// take at once; the rest follow on the next receives.
const RELEASE: usize = 256;

/// Groups whose pause is over that one receive releases from.
const RELEASE_GROUPS: i64 = 64;

impl SqliteQueue {
    /// The queue `name`; with `dlq = Some((dlq_name, max_receives))`, a
    /// message received `max_receives` times moves to the queue `dlq_name`.
    /// Sends wake the consumers watching `stream`.
    pub fn new(db: Db, name: &'static str, dlq: Option<(&'static str, u32)>, stream: Stream) -> Self {
        SqliteQueue { db, name, dlq, stream }
    }

    /// When the next message becomes visible, or a paused group's pause
    /// ends, if any (lets a worker sleep exactly until then).
    pub async fn next_visible_at(&self) -> StoreResult<Option<i64>> {
        let name = self.name;
        self.db
            .call(move |c, _| {
                // (The two-argument MIN is NULL when either is: each side
                // falls back on the other.)
                c.prepare_cached(
                    "SELECT MIN(COALESCE(m, p), COALESCE(p, m)) FROM \
                     (SELECT (SELECT MIN(visible_at) FROM queue_messages WHERE queue = ?1 AND visible_at < ?2) AS m, \
                             (SELECT MIN(until) FROM queue_pauses WHERE queue = ?1) AS p)",
                )
                .and_then(|mut st| st.query_row(params![name, PARKED_AT], |r| r.get(0)))
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
                        "UPDATE queue_messages SET queue = ?2, visible_at = ?3, receive_count = 0, parked = NULL WHERE queue = ?1",
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

/// Parks a group's unparked messages due before `?3`. Through the group's
/// index of unparked messages (named: the planner, without statistics,
/// would rather read every message of the queue due before `?3`), so the
/// cost is what the group got since it was last parked.
const PARK_GROUP: &str = "UPDATE queue_messages INDEXED BY queue_messages_group SET parked = 1, visible_at = ?4 \
     WHERE queue = ?1 AND group_key = ?2 AND parked IS NULL AND visible_at < ?3";

/// Hands back the oldest `?4` parked messages of a group, visible at `?3`.
const RELEASE_GROUP: &str = "UPDATE queue_messages SET parked = NULL, visible_at = ?3 WHERE id IN \
     (SELECT id FROM queue_messages INDEXED BY queue_messages_parked \
      WHERE queue = ?1 AND group_key = ?2 AND parked IS NOT NULL ORDER BY id LIMIT ?4)";

/// Releases up to [`RELEASE`] parked messages of each group (at most
/// [`RELEASE_GROUPS`]) whose pause is over; a group with none left is no
/// longer paused.
fn release_due(c: &rusqlite::Connection, queue: &str, now: i64) -> StoreResult<()> {
    let due: Vec<String> = c
        .prepare_cached("SELECT group_key FROM queue_pauses WHERE queue = ?1 AND until <= ?2 ORDER BY until LIMIT ?3")
        .map_err(sql)?
        .query_map(params![queue, now, RELEASE_GROUPS], |r| r.get(0))
        .map_err(sql)?
        .collect::<Result<_, _>>()
        .map_err(sql)?;
    for group in due {
        let n = c
            .prepare_cached(RELEASE_GROUP)
            .map_err(sql)?
            .execute(params![queue, group, now, RELEASE as i64])
            .map_err(sql)?;
        if n < RELEASE {
            c.prepare_cached("DELETE FROM queue_pauses WHERE queue = ?1 AND group_key = ?2")
                .map_err(sql)?
                .execute(params![queue, group])
                .map_err(sql)?;
        }
    }
    Ok(())
}

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
        let messages = messages.to_vec();
        self.db
            .call(move |c, marks| {
                let now = now_ms();
                let any_paused: bool = c
                    .prepare_cached("SELECT EXISTS (SELECT 1 FROM queue_pauses WHERE queue = ?1)")
                    .map_err(sql)?
                    .query_row([name], |r| r.get(0))
                    .map_err(sql)?;
                let mut paused = c
                    .prepare_cached("SELECT EXISTS (SELECT 1 FROM queue_pauses WHERE queue = ?1 AND group_key = ?2)")
                    .map_err(sql)?;
                let mut st = c
                    .prepare_cached(
                        "INSERT INTO queue_messages (queue, body, visible_at, sent_at, group_key, parked) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    )
                    .map_err(sql)?;
                for m in &messages {
                    // New work for a paused group (no delay of its own: a
                    // deferral keeps its delay) is parked behind the rest.
                    let parked = match &m.group {
                        Some(g) if any_paused && m.delay.is_zero() => {
                            paused.query_row(params![name, g], |r| r.get::<_, bool>(0)).map_err(sql)?
                        }
                        _ => false,
                    };
                    let at = if parked { PARKED_AT } else { now + m.delay.as_millis() as i64 };
                    st.execute(params![name, m.body, at, now, m.group, parked.then_some(1)]).map_err(sql)?;
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
                release_due(c, name, now)?;
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
        let max_receives = dlq.map(|(_, max)| max);
        for (id, count) in moved {
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
                    "UPDATE queue_messages SET visible_at = ?1, parked = NULL WHERE id = ?2 AND receive_count = ?3",
                    params![now_ms() + delay.as_millis() as i64, id, count],
                )
                .map_err(sql)?;
                marks.mark(stream);
                Ok(())
            })
            .await
    }

    async fn pause_group(&self, group: &str, delay: Duration) -> StoreResult<u64> {
        let (name, group) = (self.name, group.to_string());
        self.db
            .call(move |c, _| {
                let until = now_ms() + delay.as_millis() as i64;
                c.prepare_cached(
                    "INSERT INTO queue_pauses (queue, group_key, until) VALUES (?1, ?2, ?3) \
                     ON CONFLICT (queue, group_key) DO UPDATE SET until = excluded.until",
                )
                .map_err(sql)?
                .execute(params![name, group, until])
                .map_err(sql)?;
                let n = c
                    .prepare_cached(PARK_GROUP)
                    .map_err(sql)?
                    .execute(params![name, group, until, PARKED_AT])
                    .map_err(sql)?;
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
    use crate::TempDb;

    fn plan(c: &rusqlite::Connection, statement: &str, args: impl rusqlite::Params) -> Vec<String> {
        c.prepare(&format!("EXPLAIN QUERY PLAN {statement}"))
            .unwrap()
            .query_map(args, |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// Parking and releasing a group read only that group's messages.
    #[test]
    fn parking_and_releasing_a_group_read_its_own_indexes() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        super::super::migrate(&c).unwrap();
        assert_eq!(
            plan(&c, PARK_GROUP, params!["deliveries", "sub_1", 5, PARKED_AT]),
            vec!["SEARCH queue_messages USING INDEX queue_messages_group (queue=? AND group_key=?)"]
        );
        let release = plan(&c, RELEASE_GROUP, params!["deliveries", "sub_1", 5, 256]);
        assert!(
            release
                .iter()
                .any(|l| l == "SEARCH queue_messages USING INDEX queue_messages_parked (queue=? AND group_key=?)"),
            "{release:?}"
        );
        assert!(release.iter().all(|l| !l.contains("SCAN") && !l.contains("TEMP B-TREE")), "{release:?}");
    }

    fn bodies(got: &[Received]) -> Vec<String> {
        got.iter().map(|r| r.body.clone()).collect()
    }

    fn job(group: &str, i: usize) -> Outgoing {
        Outgoing { body: format!("{group}-{i}"), delay: Duration::ZERO, group: Some(group.to_string()) }
    }

    fn open(path: &std::path::Path) -> SqliteQueue {
        SqliteQueue::new(Db::open(path).unwrap(), "deliveries", None, Stream::Deliveries)
    }

    /// A paused group's backlog is parked once and what arrives meanwhile
    /// joins it; the pause outlives a restart; once it is over the backlog
    /// comes back oldest first, at most [`RELEASE`] per receive, and
    /// pausing again touches only what came back since.
    #[tokio::test]
    async fn a_paused_group_is_parked_and_handed_back_a_few_at_a_time() {
        let tmp = TempDb::new("park");
        let path = &tmp.0;
        let lease = Duration::from_secs(30);
        let q = open(path);
        assert_eq!(q.next_visible_at().await.unwrap(), None, "nothing queued, nothing paused");
        let later = Outgoing { delay: Duration::from_secs(60), ..job("later", 0) };
        q.send(std::slice::from_ref(&later)).await.unwrap();
        let at = q.next_visible_at().await.unwrap().expect("a delayed message");
        assert!(at > now_ms() + 50_000, "its own time, with no group paused: {at}");
        q.send(&(0..600).map(|i| job("slow", i)).collect::<Vec<_>>()).await.unwrap();
        assert_eq!(q.pause_group("slow", Duration::from_millis(400)).await.unwrap(), 600);
        q.send(&[job("slow", 600), job("quick", 0)]).await.unwrap();
        assert_eq!(bodies(&q.receive(1000, lease).await.unwrap()), vec!["quick-0"]);
        assert_eq!(q.pause_group("slow", Duration::from_millis(400)).await.unwrap(), 0, "already parked");
        let next = q.next_visible_at().await.unwrap().expect("the pause's end");
        assert!(next <= now_ms() + 400, "wakes when the pause ends, not never: {next}");

        // A restart keeps the pause and what it parked.
        drop(q);
        let q = open(path);
        assert!(q.receive(1000, lease).await.unwrap().is_empty(), "still paused");
        tokio::time::sleep(Duration::from_millis(450)).await;
        let first = q.receive(1000, lease).await.unwrap();
        assert_eq!(bodies(&first), (0..RELEASE).map(|i| format!("slow-{i}")).collect::<Vec<_>>());
        // In flight (leased past the pause): not parked again.
        assert_eq!(q.pause_group("slow", Duration::from_millis(100)).await.unwrap(), 0);
        assert!(q.receive(1000, lease).await.unwrap().is_empty(), "paused again");
        tokio::time::sleep(Duration::from_millis(150)).await;
        let second = q.receive(1000, lease).await.unwrap();
        assert_eq!(bodies(&second), (RELEASE..2 * RELEASE).map(|i| format!("slow-{i}")).collect::<Vec<_>>());
        let rest = q.receive(1000, lease).await.unwrap();
        assert_eq!(bodies(&rest), (2 * RELEASE..601).map(|i| format!("slow-{i}")).collect::<Vec<_>>());
        // Nothing parked is left, so the group is no longer paused.
        q.send(&[job("slow", 601)]).await.unwrap();
        assert_eq!(bodies(&q.receive(1000, lease).await.unwrap()), vec!["slow-601"]);
    }
}
