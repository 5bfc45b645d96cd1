//! Bounded storage for `hookline serve`: what is past its retention is
//! deleted in small batches, off the hot path. Each batch is one call through
//! the group-commit writer ([`Db::call`]), so it holds the writer for a few
//! milliseconds at most and ingest and deliveries commit between batches;
//! SQLite reuses the freed pages, so the file stops growing once the purge
//! keeps pace with ingest (it does not shrink: no VACUUM).
//!
//! What is deleted:
//! - an event whose `expires_at` (stamped at ingest: received + retention)
//!   has passed, with its sagas and their attempts, **unless** one of its
//!   sagas is still in flight (not `Completed` or `DeadLettered`) or has an
//!   open dead letter. Those are kept: an in-flight saga would otherwise
//!   deliver "event is no longer stored" and leave orphan rows, and an open
//!   dead letter is work for an operator whose requeue needs the event. They
//!   are looked at again on a later pass ([`PurgePolicy::rescan_every`]) and
//!   go once the saga ends or the dead letter is requeued or skipped;
//! - a dead letter that was requeued or skipped, once it is older (counted
//!   from when its saga was dead-lettered) than the dead-letter retention;
//!   open ones are never deleted;
//! - messages in the dead-letter queues older than the dead-letter
//!   retention (SQS's message retention period);
//! - outbox rows whose record is gone (left when a stage had not yet
//!   acknowledged a record the purge deleted);
//! - audit records older than the audit retention ([`shared::audit`]);
//! - delivery statistics' rows whose bucket ended longer ago than the
//!   event retention ([`shared::stats`]);
//! - idempotency keys' records past their expiry
//!   ([`shared::idempotency::KEY_TTL`] after the answer; the store reads an
//!   expired one as absent until then).

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension};

use super::{sql, Db, Stream};
use shared::error::StoreError;
use shared::ids::{self, EventId, SagaId};
use shared::metrics::Metrics;
use shared::saga::SagaStatus;

/// The dead-letter queues of the embedded backend ([`super::Backend::open`]).
const DEAD_LETTER_QUEUES: [&str; 3] = ["deliveries-dlq", "retries-dlq", "requeue-dlq"];

/// Between two batches the purge sleeps at least this many times as long
/// as the last batch held the writer (at most a quarter of the writer's
/// time), unless it is behind.
const PAUSE_FACTOR: u32 = 3;

/// When behind ([`PurgePolicy::max_lag`]), batches are this many times
/// larger and the pause only as long as the batch (half the writer's time),
/// until it has caught up.
const BEHIND_FACTOR: usize = 4;

/// Oldest outbox rows per stream the orphan sweep checks in one run.
const ORPHAN_SWEEP: usize = 256;

/// What the purge keeps and how much it does at a time.
#[derive(Debug, Clone)]
pub struct PurgePolicy {
    /// Resolved dead letters, and dead-letter-queue messages, are deleted
    /// this long after they were created.
    pub dead_letter_retention: chrono::Duration,
    /// Most expired events examined in one batch (one write transaction);
    /// the same bound applies to dead letters and queue messages.
    pub batch: usize,
    /// How often the purge goes back over expired events it kept (a saga in
    /// flight, an open dead letter) to see whether they may go now.
    pub rescan_every: Duration,
    /// When the oldest expired event not yet examined expired longer ago
    /// than this, the purge is behind (ingest outpaces it, or it restarted
    /// on a backlog) and works harder: larger batches, shorter pauses, so
    /// storage stays bounded whatever the ingest rate.
    pub max_lag: Duration,
    /// Audit records are deleted this long after they were written.
    pub audit_retention: chrono::Duration,
    /// Delivery statistics' rows are deleted this long after their bucket
    /// ended (the event retention).
    pub stats_retention: chrono::Duration,
}

impl Default for PurgePolicy {
    fn default() -> Self {
        PurgePolicy {
            dead_letter_retention: chrono::Duration::days(60),
            batch: 50,
            rescan_every: Duration::from_secs(600),
            max_lag: Duration::from_secs(30),
            audit_retention: chrono::Duration::days(365),
            stats_retention: chrono::Duration::days(30),
        }
    }
}

/// Rows deleted (and expired events kept) by one batch or one run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Purged {
    /// Events past their retention.
    pub events: u64,
    /// Their sagas.
    pub sagas: u64,
    /// Their sagas' attempts.
    pub attempts: u64,
    /// Resolved dead letters past the dead-letter retention.
    pub dead_letters: u64,
    /// Outbox rows whose record was gone.
    pub outbox: u64,
    /// Dead-letter-queue messages past the dead-letter retention.
    pub queue_messages: u64,
    /// Audit records past the audit retention.
    pub audit: u64,
    /// Idempotency keys' records past their expiry ([`shared::idempotency::KEY_TTL`]).
    pub idempotency_keys: u64,
    /// Delivery statistics' rows past the retention.
    pub stats: u64,
    /// Subscribers' acknowledgements past their expiry.
    pub acknowledgements: u64,
    /// Expired events examined but kept (a saga in flight or an open dead letter).
    pub held: u64,
}

impl Purged {
    /// Rows deleted, all tables together.
    pub fn deleted(&self) -> u64 {
        self.events
            + self.sagas
            + self.attempts
            + self.dead_letters
            + self.outbox
            + self.queue_messages
            + self.audit
            + self.idempotency_keys
            + self.stats
            + self.acknowledgements
    }

    fn add(&mut self, o: &Purged) {
        self.events += o.events;
        self.sagas += o.sagas;
        self.attempts += o.attempts;
        self.dead_letters += o.dead_letters;
        self.outbox += o.outbox;
        self.queue_messages += o.queue_messages;
        self.audit += o.audit;
        self.idempotency_keys += o.idempotency_keys;
        self.stats += o.stats;
        self.acknowledgements += o.acknowledgements;
        self.held += o.held;
    }

    /// Adds these counts to the process metrics (`hookline_purged_total`).
    pub fn record(&self, m: &Metrics) {
        m.purged.events.fetch_add(self.events, Relaxed);
        m.purged.sagas.fetch_add(self.sagas, Relaxed);
        m.purged.attempts.fetch_add(self.attempts, Relaxed);
        m.purged.dead_letters.fetch_add(self.dead_letters, Relaxed);
        m.purged.other.fetch_add(
            self.outbox + self.queue_messages + self.audit + self.idempotency_keys + self.stats + self.acknowledgements,
            Relaxed,
        );
    }
}

/// What one batch did.
#[derive(Debug, Clone, Copy)]
pub struct Batch {
    /// Rows deleted and events kept.
    pub purged: Purged,
    /// A full batch: more may be due right away.
    pub more: bool,
    /// How long the batch held the writer (its statements; the commit it
    /// shares with other calls is not included).
    pub writer_time: Duration,
    /// How long ago the oldest expired event it examined expired: how far
    /// behind the purge is.
    pub lag: Duration,
}

/// The purge of one database. Keeps, in memory, its place among expired
/// events it had to keep, so a batch does not examine them again; the place
/// is forgotten at start-up and every [`PurgePolicy::rescan_every`].
pub struct Purger {
    db: Db,
    policy: PurgePolicy,
    /// `(expires_at, rowid)` of the last expired event examined.
    cursor: Option<(i64, i64)>,
    /// Events kept behind the cursor since it was last reset.
    held_behind: u64,
    last_rescan: Instant,
    /// The last batch found the purge behind ([`PurgePolicy::max_lag`]).
    behind: bool,
}

impl Purger {
    /// A purge of `db` with `policy`.
    pub fn new(db: Db, policy: PurgePolicy) -> Purger {
        Purger { db, policy, cursor: None, held_behind: 0, last_rescan: Instant::now(), behind: false }
    }

    /// One batch at `now`: up to `batch` expired events (each deleted with
    /// its sagas and attempts, or kept), up to `batch` resolved dead letters
    /// of each state and dead-letter-queue messages of each queue past the
    /// dead-letter retention (four times as many while behind). One write
    /// transaction.
    pub async fn batch(&mut self, now: DateTime<Utc>) -> Result<Batch, StoreError> {
        let now_ms = now.timestamp_millis();
        let dl_cutoff =
            now.checked_sub_signed(self.policy.dead_letter_retention).map_or(i64::MIN, |t| t.timestamp_millis());
        let audit_cutoff =
            now.checked_sub_signed(self.policy.audit_retention).map_or(i64::MIN, |t| t.timestamp_millis());
        // A row goes once its bucket (an hour at most) ended a retention ago.
        let stats_cutoff = now
            .checked_sub_signed(self.policy.stats_retention + chrono::Duration::hours(1))
            .map_or(i64::MIN, |t| t.timestamp());
        let size = if self.behind { self.policy.batch.saturating_mul(BEHIND_FACTOR) } else { self.policy.batch };
        let (limit, cursor) = (size.max(1), self.cursor);
        let (Examined { purged, last, oldest, full: more }, writer_time) = self
            .db
            .call(move |c, _| {
                let t0 = Instant::now();
                let mut e = expired_events(c, now_ms, cursor, limit)?;
                let (dead_letters, dl_more) = resolved_dead_letters(c, dl_cutoff, limit)?;
                let (messages, q_more) = dead_queue_messages(c, dl_cutoff, limit)?;
                let (audit, a_more) = old_audit_records(c, audit_cutoff, limit)?;
                let (keys, k_more) = expired_idempotency_keys(c, now_ms / 1000, limit)?;
                let (stats, s_more) = old_stats(c, stats_cutoff, limit)?;
                let (acks, ack_more) = expired_acknowledgements(c, now_ms / 1000, limit)?;
                e.purged.acknowledgements = acks;
                e.purged.stats = stats;
                e.purged.dead_letters = dead_letters;
                e.purged.queue_messages = messages;
                e.purged.audit = audit;
                e.purged.idempotency_keys = keys;
                e.full |= dl_more || q_more || a_more || k_more || s_more || ack_more;
                Ok((e, t0.elapsed()))
            })
            .await?;
        if last.is_some() {
            self.cursor = last;
        }
        self.held_behind += purged.held;
        let lag = oldest.map_or(Duration::ZERO, |at| Duration::from_millis(now_ms.saturating_sub(at).max(0) as u64));
        self.behind = lag > self.policy.max_lag;
        Ok(Batch { purged, more, writer_time, lag })
    }

    /// Deletes outbox rows whose record is gone, among the oldest
    /// `ORPHAN_SWEEP` rows of each stream (where rows left by purged
    /// records sit). Bounded work whatever the backlog.
    pub async fn sweep_orphans(&self) -> Result<u64, StoreError> {
        self.db
            .call(|c, _| {
                let mut n = 0;
                for (stream, exists) in [
                    (Stream::Events, "SELECT 1 FROM events WHERE id = ?1"),
                    (Stream::Sagas, "SELECT 1 FROM sagas WHERE id = ?1"),
                    (Stream::Attempts, "SELECT 1 FROM attempts WHERE saga_id = ?1 AND attempt = ?2"),
                ] {
                    let super::OutboxTable { name: table, attempt } = super::outbox::table(stream);
                    let rows: Vec<(i64, String, Option<i64>)> = c
                        .prepare_cached(&format!("SELECT seq, key, {attempt} FROM {table} ORDER BY seq LIMIT ?1"))
                        .map_err(sql)?
                        .query_map(params![ORPHAN_SWEEP as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                        .map_err(sql)?
                        .collect::<Result<_, _>>()
                        .map_err(sql)?;
                    let mut check = c.prepare_cached(exists).map_err(sql)?;
                    let mut del = c.prepare_cached(&format!("DELETE FROM {table} WHERE seq = ?1")).map_err(sql)?;
                    for (seq, key, attempt) in rows {
                        let found = if stream == Stream::Attempts {
                            check.query_row(params![key, attempt], |_| Ok(())).optional()
                        } else {
                            check.query_row(params![key], |_| Ok(())).optional()
                        }
                        .map_err(sql)?;
                        if found.is_none() {
                            n += del.execute([seq]).map_err(sql)? as u64;
                        }
                    }
                }
                Ok(n)
            })
            .await
    }

    /// One run at `now`: the orphan sweep, then batches until nothing more
    /// is due or `keep_going` says stop. Between batches it sleeps at least
    /// `pause` and `PAUSE_FACTOR` times as long as the batch held the
    /// writer, so other writes commit in between and the purge takes at most
    /// a quarter of the writer's time; while behind, see
    /// [`PurgePolicy::max_lag`]. Each batch is counted in `metrics` and
    /// logged at debug level; returns the run's totals.
    pub async fn run(
        &mut self,
        now: DateTime<Utc>,
        metrics: &Metrics,
        pause: Duration,
        keep_going: impl Fn() -> bool,
    ) -> Result<Purged, StoreError> {
        if self.held_behind == 0 || self.last_rescan.elapsed() >= self.policy.rescan_every {
            self.cursor = None;
            self.held_behind = 0;
            self.last_rescan = Instant::now();
        }
        let mut total = Purged { outbox: self.sweep_orphans().await?, ..Purged::default() };
        total.record(metrics);
        loop {
            let b = self.batch(now).await?;
            b.purged.record(metrics);
            total.add(&b.purged);
            tracing::debug!(
                events = b.purged.events,
                sagas = b.purged.sagas,
                attempts = b.purged.attempts,
                dead_letters = b.purged.dead_letters,
                queue_messages = b.purged.queue_messages,
                kept = b.purged.held,
                writer_ms = b.writer_time.as_secs_f64() * 1000.0,
                lag_s = b.lag.as_secs_f64(),
                behind = self.behind,
                "purge batch"
            );
            if !b.more || !keep_going() {
                break;
            }
            let factor = if self.behind { 1 } else { PAUSE_FACTOR };
            tokio::time::sleep(pause.max(b.writer_time * factor)).await;
        }
        Ok(total)
    }
}

/// Where a purge pass is in `events_by_expiry`: `(expires_at, rowid)`.
type ExpiryCursor = (i64, i64);

/// What one batch found among expired events.
struct Examined {
    purged: Purged,
    /// The last event examined (the next batch starts after it).
    last: Option<ExpiryCursor>,
    /// When the first event examined expired (ms).
    oldest: Option<i64>,
    /// As many as the batch allows: more may be due.
    full: bool,
}

/// Up to `limit` expired events after `cursor`, each deleted with its sagas
/// and attempts unless kept. Returns the counts, the last event examined,
/// and whether the batch was full.
fn expired_events(
    c: &Connection,
    now_ms: i64,
    cursor: Option<ExpiryCursor>,
    limit: usize,
) -> Result<Examined, StoreError> {
    let (after_exp, after_row) = cursor.unwrap_or((i64::MIN, i64::MIN));
    // A range on events_by_expiry (expires_at, rowid) starting at the cursor.
    let rows: Vec<(i64, EventId, i64)> = c
        .prepare_cached(
            "SELECT rowid, id, expires_at FROM events INDEXED BY events_by_expiry \
             WHERE expires_at <= ?1 AND expires_at >= ?2 AND NOT (expires_at = ?2 AND rowid <= ?3) \
             ORDER BY expires_at, rowid LIMIT ?4",
        )
        .map_err(sql)?
        .query_map(params![now_ms, after_exp, after_row, limit as i64], |r| {
            Ok((r.get(0)?, EventId::new(r.get::<_, String>(1)?), r.get(2)?))
        })
        .map_err(sql)?
        .collect::<Result<_, _>>()
        .map_err(sql)?;
    let mut sagas_of = c.prepare_cached("SELECT id, status FROM sagas WHERE event_id = ?1").map_err(sql)?;
    let mut open_dl = c.prepare_cached("SELECT 1 FROM dead_letters WHERE id = ?1 AND state = 'open'").map_err(sql)?;
    let mut del_attempts = c.prepare_cached("DELETE FROM attempts WHERE saga_id = ?1").map_err(sql)?;
    let mut del_sagas = c.prepare_cached("DELETE FROM sagas WHERE event_id = ?1").map_err(sql)?;
    let mut del_event = c.prepare_cached("DELETE FROM events WHERE rowid = ?1").map_err(sql)?;
    let mut p = Purged::default();
    for (rowid, id, _) in &rows {
        let sagas: Vec<(SagaId, String)> = sagas_of
            .query_map([id.as_str()], |r| Ok((SagaId::new(r.get::<_, String>(0)?), r.get(1)?)))
            .map_err(sql)?
            .collect::<Result<_, _>>()
            .map_err(sql)?;
        let mut keep = false;
        for (saga_id, status) in &sagas {
            keep = if status == SagaStatus::Completed.as_str() {
                false
            } else if status == SagaStatus::DeadLettered.as_str() {
                open_dl
                    .query_row([ids::dead_letter_id(saga_id).as_str()], |_| Ok(()))
                    .optional()
                    .map_err(sql)?
                    .is_some()
            } else {
                true
            };
            if keep {
                break;
            }
        }
        if keep {
            p.held += 1;
            continue;
        }
        for (saga_id, _) in &sagas {
            p.attempts += del_attempts.execute([saga_id.as_str()]).map_err(sql)? as u64;
        }
        p.sagas += del_sagas.execute([id.as_str()]).map_err(sql)? as u64;
        p.events += del_event.execute([rowid]).map_err(sql)? as u64;
    }
    Ok(Examined {
        purged: p,
        last: rows.last().map(|(rowid, _, exp)| (*exp, *rowid)),
        oldest: rows.first().map(|(_, _, exp)| *exp),
        full: rows.len() == limit,
    })
}

/// Up to `limit` requeued and `limit` skipped dead letters created before
/// `cutoff_ms`; whether either was a full batch.
fn resolved_dead_letters(c: &Connection, cutoff_ms: i64, limit: usize) -> Result<(u64, bool), StoreError> {
    let mut st = c
        .prepare_cached(
            "DELETE FROM dead_letters WHERE rowid IN \
             (SELECT rowid FROM dead_letters WHERE state = ?1 AND created_at < ?2 ORDER BY created_at LIMIT ?3)",
        )
        .map_err(sql)?;
    let (mut n, mut more) = (0, false);
    for state in [shared::dead_letter::DeadLetterState::Requeued, shared::dead_letter::DeadLetterState::Skipped] {
        let k = st.execute(params![state.as_str(), cutoff_ms, limit as i64]).map_err(sql)?;
        n += k as u64;
        more |= k == limit;
    }
    Ok((n, more))
}

/// Up to `limit` messages of each dead-letter queue that arrived there
/// before `cutoff_ms`; whether any was a full batch.
fn dead_queue_messages(c: &Connection, cutoff_ms: i64, limit: usize) -> Result<(u64, bool), StoreError> {
    let mut st = c
        .prepare_cached(
            "DELETE FROM queue_messages WHERE id IN \
             (SELECT id FROM queue_messages WHERE queue = ?1 AND visible_at < ?2 ORDER BY visible_at LIMIT ?3)",
        )
        .map_err(sql)?;
    let (mut n, mut more) = (0, false);
    for q in DEAD_LETTER_QUEUES {
        let k = st.execute(params![q, cutoff_ms, limit as i64]).map_err(sql)?;
        n += k as u64;
        more |= k == limit;
    }
    Ok((n, more))
}

/// Up to `limit` audit records written before `cutoff_ms` (a range of
/// `audit_by_pos`: a position starts with its time); whether the batch was full.
fn old_audit_records(c: &Connection, cutoff_ms: i64, limit: usize) -> Result<(u64, bool), StoreError> {
    let n = c
        .prepare_cached("DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE pos < ?1 ORDER BY pos LIMIT ?2)")
        .map_err(sql)?
        .execute(params![shared::audit::time_key(cutoff_ms), limit as i64])
        .map_err(sql)?;
    Ok((n as u64, n == limit))
}

/// Up to `limit` delivery statistics' rows whose bucket started before
/// `cutoff_s` (seconds; a range of `delivery_stats_by_at`); whether the
/// batch was full.
fn old_stats(c: &Connection, cutoff_s: i64, limit: usize) -> Result<(u64, bool), StoreError> {
    let n = c
        .prepare_cached(
            "DELETE FROM delivery_stats WHERE (series, width, at) IN \
             (SELECT series, width, at FROM delivery_stats WHERE at < ?1 ORDER BY at LIMIT ?2)",
        )
        .map_err(sql)?
        .execute(params![cutoff_s, limit as i64])
        .map_err(sql)?;
    Ok((n as u64, n == limit))
}

/// Up to `limit` idempotency keys' records expired at `now_s` (seconds; a
/// range of `idempotency_keys_by_expiry`); whether the batch was full.
fn expired_idempotency_keys(c: &Connection, now_s: i64, limit: usize) -> Result<(u64, bool), StoreError> {
    let n = c
        .prepare_cached(
            "DELETE FROM idempotency_keys WHERE id IN \
             (SELECT id FROM idempotency_keys WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)",
        )
        .map_err(sql)?
        .execute(params![now_s, limit as i64])
        .map_err(sql)?;
    Ok((n as u64, n == limit))
}

/// Up to `limit` acknowledgements expired at `now_s` (seconds; a range of
/// `acknowledgements_by_expiry`); whether the batch was full.
fn expired_acknowledgements(c: &Connection, now_s: i64, limit: usize) -> Result<(u64, bool), StoreError> {
    let n = c
        .prepare_cached(
            "DELETE FROM acknowledgements WHERE (subscription_id, webhook_id) IN \
             (SELECT subscription_id, webhook_id FROM acknowledgements WHERE expires_at <= ?1 \
             ORDER BY expires_at LIMIT ?2)",
        )
        .map_err(sql)?
        .execute(params![now_s, limit as i64])
        .map_err(sql)?;
    Ok((n as u64, n == limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh database file, removed on drop.
    struct TempDb(std::path::PathBuf, Db);

    impl TempDb {
        fn new(tag: &str) -> TempDb {
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
            let path = std::env::temp_dir().join(format!("hookline-purge-{tag}-{}-{nanos}.db", std::process::id()));
            let db = Db::open(&path).unwrap();
            TempDb(path, db)
        }
    }

    impl Drop for TempDb {
        fn drop(&mut self) {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
            }
        }
    }

    /// An event expiring at `expires_ms` with one saga per `(status,
    /// dead letter state)`, each with two attempts.
    async fn event(db: &Db, id: &str, expires_ms: i64, sagas: &[(&str, Option<&str>)]) {
        let (id, sagas): (String, Vec<(String, Option<String>)>) =
            (id.into(), sagas.iter().map(|(s, d)| (s.to_string(), d.map(str::to_string))).collect());
        db.call(move |c, _| {
            c.execute("INSERT INTO events (id, event_type, received_at, expires_at, data) VALUES (?1, 't', 0, ?2, '{}')", params![id, expires_ms]).map_err(sql)?;
            for (i, (status, dl)) in sagas.iter().enumerate() {
                let saga = format!("{id}-s{i}");
                c.execute("INSERT INTO sagas (id, event_id, subscription_id, status, attempts, data) VALUES (?1, ?2, 'sub', ?3, 2, '{}')", params![saga, id, status]).map_err(sql)?;
                for a in 1..=2 {
                    c.execute("INSERT INTO attempts VALUES (?1, ?2, '{}')", params![saga, a]).map_err(sql)?;
                }
                if let Some(state) = dl {
                    c.execute("INSERT INTO dead_letters (id, state, created_at, data) VALUES (?1, ?2, ?3, '{}')", params![saga, state, expires_ms])
                        .map_err(sql)?;
                }
            }
            Ok(())
        })
        .await
        .unwrap();
    }

    async fn count(db: &Db, sql_text: &'static str) -> i64 {
        db.call(move |c, _| c.query_row(sql_text, [], |r| r.get(0)).map_err(sql)).await.unwrap()
    }

    fn policy(batch: usize) -> PurgePolicy {
        PurgePolicy { dead_letter_retention: chrono::Duration::days(1), batch, ..PurgePolicy::default() }
    }

    #[tokio::test]
    async fn expired_events_go_with_their_sagas_and_attempts_unless_in_flight_or_openly_dead_lettered() {
        let t = TempDb::new("hold");
        let now = Utc::now();
        let past = now.timestamp_millis() - 1_000;
        event(&t.1, "done", past, &[("Completed", None), ("DeadLettered", Some("skipped"))]).await;
        event(&t.1, "retrying", past, &[("Completed", None), ("PendingRetry", None)]).await;
        event(&t.1, "open-dl", past, &[("DeadLettered", Some("open"))]).await;
        event(&t.1, "unrouted-or-no-match", past, &[]).await;
        event(&t.1, "fresh", now.timestamp_millis() + 60_000, &[("Completed", None)]).await;
        let mut p = Purger::new(t.1.clone(), policy(100));
        let total = p.run(now, &Metrics::default(), Duration::ZERO, || true).await.unwrap();
        assert_eq!((total.events, total.sagas, total.attempts, total.held), (2, 2, 4, 2));
        let left: String =
            t.1.call(|c, _| {
                c.query_row("SELECT group_concat(id, ',') FROM (SELECT id FROM events ORDER BY id)", [], |r| r.get(0))
                    .map_err(sql)
            })
            .await
            .unwrap();
        assert_eq!(left, "fresh,open-dl,retrying");
        assert_eq!(count(&t.1, "SELECT COUNT(*) FROM sagas").await, 4);
        assert_eq!(count(&t.1, "SELECT COUNT(*) FROM attempts").await, 8);
        // Dead letters have their own retention: the skipped one is still here.
        assert_eq!(count(&t.1, "SELECT COUNT(*) FROM dead_letters").await, 2);
    }

    #[tokio::test]
    async fn expired_idempotency_keys_go_and_live_ones_stay() {
        use shared::idempotency::IdempotencyRecord;
        use shared::ports::IdempotencyStore;
        let t = TempDb::new("idem");
        let store = super::super::stores::SqliteIdempotency(t.1.clone());
        let now = Utc::now();
        let old = IdempotencyRecord::claim("idem_old", "fp", now - chrono::Duration::hours(25));
        let live = IdempotencyRecord::claim("idem_live", "fp", now);
        for r in [&old, &live] {
            assert!(store.claim(r, r.lease_until - shared::idempotency::LEASE).await.unwrap());
        }
        let mut p = Purger::new(t.1.clone(), policy(100));
        let total = p.run(now, &Metrics::default(), Duration::ZERO, || true).await.unwrap();
        assert_eq!(total.idempotency_keys, 1);
        assert_eq!(count(&t.1, "SELECT COUNT(*) FROM idempotency_keys WHERE id = 'idem_live'").await, 1);
        assert_eq!(count(&t.1, "SELECT COUNT(*) FROM idempotency_keys").await, 1);
    }

    #[tokio::test]
    async fn delivery_statistics_go_after_the_retention() {
        use shared::ports::StatsStore;
        use shared::stats::{Series, Tally};
        let t = TempDb::new("stats");
        let store = super::super::stores::SqliteStats(t.1.clone());
        let now = Utc::now();
        let one = Tally { succeeded: 1, ..Tally::default() };
        // 30 days is the default stats retention: one series' minute (and
        // hour) from 32 days ago goes, one from 28 days ago stays.
        store.add(&Series::System, now - chrono::Duration::days(32), &one).await.unwrap();
        store.add(&Series::System, now - chrono::Duration::days(28), &one).await.unwrap();
        assert_eq!(count(&t.1, "SELECT COUNT(*) FROM delivery_stats").await, 4);
        let mut p = Purger::new(t.1.clone(), policy(100));
        let total = p.run(now, &Metrics::default(), Duration::ZERO, || true).await.unwrap();
        assert_eq!(total.stats, 2, "the old minute and its hour");
        assert_eq!(count(&t.1, "SELECT COUNT(*) FROM delivery_stats").await, 2);
    }

    #[tokio::test]
    async fn audit_records_go_after_their_own_retention() {
        use shared::ports::AuditStore;
        let t = TempDb::new("audit");
        let now = Utc::now();
        let store = super::super::audit::SqliteAudit(t.1.clone());
        for days in [400, 366, 10] {
            let rec = shared::audit::AuditRecord::at(
                shared::audit::Action::BreakerOpened,
                shared::audit::SYSTEM,
                now - chrono::Duration::days(days),
            );
            store.append(&rec).await.unwrap();
        }
        let mut p = Purger::new(t.1.clone(), policy(100));
        let total = p.run(now, &Metrics::default(), Duration::ZERO, || true).await.unwrap();
        assert_eq!(total.audit, 2);
        assert_eq!(count(&t.1, "SELECT COUNT(*) FROM audit").await, 1);
    }

    #[tokio::test]
    async fn kept_events_are_not_examined_again_in_the_same_pass() {
        let t = TempDb::new("cursor");
        let now = Utc::now();
        let past = now.timestamp_millis() - 1_000;
        for i in 0..5 {
            event(&t.1, &format!("a-kept-{i}"), past - 10, &[("InProgress", None)]).await;
        }
        for i in 0..5 {
            event(&t.1, &format!("b-done-{i}"), past, &[("Completed", None)]).await;
        }
        let mut p = Purger::new(t.1.clone(), policy(5));
        let first = p.batch(now).await.unwrap();
        assert_eq!((first.purged.held, first.purged.events, first.more), (5, 0, true));
        let second = p.batch(now).await.unwrap();
        assert_eq!((second.purged.held, second.purged.events), (0, 5));
    }

    #[tokio::test]
    async fn a_purge_that_falls_behind_takes_larger_batches_until_it_catches_up() {
        let t = TempDb::new("behind");
        let now = Utc::now();
        let long_ago = now.timestamp_millis() - 120_000;
        for i in 0..60 {
            event(&t.1, &format!("old-{i:03}"), long_ago + i, &[("Completed", None)]).await;
        }
        for i in 0..30 {
            event(&t.1, &format!("new-{i:03}"), now.timestamp_millis() - 1_000 + i, &[("Completed", None)]).await;
        }
        let mut p = Purger::new(t.1.clone(), policy(5));
        let b = p.batch(now).await.unwrap();
        assert_eq!(b.purged.events, 5, "the configured batch first");
        assert!(b.lag >= Duration::from_secs(119), "{:?}", b.lag);
        let b = p.batch(now).await.unwrap();
        assert_eq!(b.purged.events, 20, "four times larger while behind");
        let mut sizes = vec![];
        loop {
            let b = p.batch(now).await.unwrap();
            sizes.push(b.purged.events);
            if !b.more {
                break;
            }
        }
        assert_eq!(sizes.iter().sum::<u64>(), 65);
        assert_eq!(*sizes.last().unwrap(), 0);
        assert!(sizes.contains(&5), "back to the configured batch once caught up: {sizes:?}");
    }
}
