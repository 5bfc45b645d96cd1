//! The embedded backend: every port on one SQLite file (WAL; commits wait
//! for the disk, `synchronous=FULL`, except those holding only pipeline
//! work: see [`pipeline`]). One writer thread owns the connection and commits in
//! groups: every call queued while a commit runs goes into the next
//! transaction (a failed call leaves no write: see `writer`), and each
//! caller is answered only after the commit that holds its write is on
//! disk. A second thread copies the log into the database file
//! (checkpoints; see `checkpointer`), so the writer does not. The outbox
//! tables (one per stream) take the place of DynamoDB
//! Streams, each row written in the same transaction as the record it
//! announces; `queue_messages` takes the place of SQS (a dead-letter queue
//! is just another named queue there, as in SQS).

mod audit;
mod backend;
pub mod backup;
pub mod feed;
pub mod files;
mod health;
mod limits;
mod ordering;
mod outbox;
pub mod purge;
mod queue;
pub mod runtime;
mod schema;
mod stores;
pub mod writer;

use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;

use rusqlite::Connection;
use tokio::sync::{oneshot, watch};

use schema::MIGRATIONS;
use shared::error::StoreError;
use writer::{Kind, Pending, Queued, WRITER_CHECKPOINT_FRAMES};

pub use backend::{reseal_secrets, rewrap_data_key, Backend, OpenError, DELIVERY_MAX_RECEIVES};
pub use outbox::{Outbox, SqliteStreamFailures};
pub use queue::SqliteQueue;
pub use stores::{
    SqliteAttempts, SqliteDeadLetters, SqliteEvents, SqliteJobs, SqliteSagas, SqliteSettings, SqliteSubscriptions,
    DATA_KEY_SETTING,
};

/// The streams the outbox carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    /// New events (the router's input).
    Events,
    /// New sagas (the saga stage's input).
    Sagas,
    /// New attempts (the saga stage's input).
    Attempts,
    /// The delivery queue got (or released) a message.
    Deliveries,
    /// Another queue (retry timers, requeues, dead-letter queues) did; kept
    /// apart so the busy delivery queue does not wake their consumers.
    Control,
}

const STREAMS: [Stream; 5] = [Stream::Events, Stream::Sagas, Stream::Attempts, Stream::Deliveries, Stream::Control];

impl Stream {
    fn index(self) -> usize {
        STREAMS.iter().position(|s| *s == self).expect("listed")
    }

    /// The outbox table of a stream the outbox carries (`None` for the
    /// queue streams, which only wake consumers).
    pub(crate) fn outbox_table(self) -> Option<OutboxTable> {
        let (name, attempt) = match self {
            Stream::Events => ("outbox_events", "NULL"),
            Stream::Sagas => ("outbox_sagas", "NULL"),
            Stream::Attempts => ("outbox_attempts", "attempt"),
            Stream::Deliveries | Stream::Control => return None,
        };
        Some(OutboxTable { name, attempt })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Stream::Events => "events",
            Stream::Sagas => "sagas",
            Stream::Attempts => "attempts",
            Stream::Deliveries => "deliveries",
            Stream::Control => "control",
        }
    }
}

/// A record stream's outbox table: its name, and the column expression
/// that gives a row's attempt number (`NULL` but for attempts).
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutboxTable {
    pub name: &'static str,
    pub attempt: &'static str,
}

tokio::task_local! {
    /// Set while a pipeline stage runs ([`pipeline`]).
    static PIPELINE: ();
}

/// Runs `f` as pipeline work: its calls are answered as soon as they have
/// run, and committed with the next API write or within
/// [`writer::COMMIT_AFTER`], without waiting for the disk. A crash (of the
/// process, or of the machine before the next synced commit) can take
/// such work back, and then only together with every write after it,
/// since the log is recovered as an unbroken prefix and every synced
/// commit syncs the log up to itself. What is taken back is the pipeline's
/// own progress (routing, starting, recording an attempt), which it redoes
/// from the last commit: at-least-once delivery, as after any crash.
/// Accepting an event and every API write never run in it, so they are on
/// disk before they are answered. Calls made from tasks that `f` spawns are
/// durable again (the setting belongs to the task).
pub async fn pipeline<F: std::future::Future>(f: F) -> F::Output {
    PIPELINE.scope((), f).await
}

fn in_pipeline() -> bool {
    PIPELINE.try_with(|_| ()).is_ok()
}

/// A handle on the database: cheap to clone, shared by every adapter.
#[derive(Clone)]
pub struct Db {
    ops: mpsc::Sender<Queued>,
    state: Arc<std::sync::Mutex<writer::State>>,
    changes: Arc<[watch::Sender<u64>; 5]>,
    feeds: Arc<feed::Feeds>,
    /// How many times the writer synced the log (for tests).
    #[cfg_attr(not(test), allow(dead_code))]
    log_syncs: Arc<std::sync::atomic::AtomicU64>,
}

impl Db {
    /// Opens (creating if needed) the database file, applies migrations and
    /// starts the writer thread.
    pub fn open(path: &Path) -> Result<Db, StoreError> {
        files::restrict_database_files(path).map_err(StoreError::backend)?;
        let conn = Connection::open(path).map_err(StoreError::backend)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA busy_timeout=5000; PRAGMA foreign_keys=OFF; PRAGMA temp_store=MEMORY;",
        )
        .map_err(StoreError::backend)?;
        // `temp_store=MEMORY`: the writer runs each group of calls in a
        // savepoint (`writer`), whose journal would otherwise spill to a
        // temporary file past 64 KiB, a write per page; the statements
        // here sort by an index or under a LIMIT, so nothing large is
        // kept in memory for a sort.
        // Every statement of the pipeline's paths stays prepared (rusqlite
        // keeps 16 by default, fewer than the paths use, so they were parsed
        // again and again).
        conn.set_prepared_statement_cache_capacity(256);
        migrate(&conn)?;
        // The log is copied into the database by a thread of its own (see
        // `checkpointer`); the writer checkpoints only to start a long log
        // over (see `WRITER_CHECKPOINT_FRAMES`).
        // The writer syncs the log itself after a commit that holds an API
        // write (`writer::Log`).
        conn.execute_batch(&format!(
            "PRAGMA wal_autocheckpoint={WRITER_CHECKPOINT_FRAMES}; PRAGMA synchronous=NORMAL;"
        ))
        .map_err(StoreError::backend)?;
        let checkpoints = Connection::open(path).map_err(StoreError::backend)?;
        checkpoints.execute_batch("PRAGMA synchronous=FULL;").map_err(StoreError::backend)?;
        let (kick, kicks) = mpsc::sync_channel::<()>(1);
        // Thread names show in `top` and profiles cut to 15 bytes.
        std::thread::Builder::new()
            .name("hookline-ckpt".into())
            .spawn(move || writer::checkpointer(checkpoints, kicks))
            .map_err(StoreError::backend)?;
        let (tx, rx) = mpsc::channel::<Queued>();
        let changes: Arc<[watch::Sender<u64>; 5]> = Arc::new(std::array::from_fn(|_| watch::channel(0u64).0));
        let feeds = Arc::new(feed::Feeds::default());
        let log = writer::Log::new(path);
        let log_syncs = log.syncs.clone();
        let last = outbox::last_rows(&conn)?;
        let state = Arc::new(std::sync::Mutex::new(writer::State::new(conn, last)));
        let w = writer::Writer {
            state: state.clone(),
            ops: rx,
            changes: changes.clone(),
            checkpoint: kick,
            feeds: feeds.clone(),
            log,
        };
        std::thread::Builder::new()
            .name("hookline-sqlite".into())
            .spawn(move || writer::writer(w))
            .map_err(StoreError::backend)?;
        Ok(Db { ops: tx, state, changes, feeds, log_syncs })
    }

    /// Runs `f` on the writer's connection (a failed call leaves no write)
    /// and returns its result: once it is committed and synced when it is
    /// an API write, once it has run when it is pipeline work or a read
    /// (see [`writer`]). `f` may run twice (when another call of its group
    /// fails, the group is run again), so it must not act outside the
    /// connection; it is answered from its latest run.
    pub async fn call<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: Fn(&Connection, &mut Marks) -> Result<R, StoreError> + Send + 'static,
    {
        if !in_pipeline() {
            return self.queue(Kind::Durable, f).await;
        }
        match writer::inline(&self.state, &self.changes, &self.feeds, &self.ops, &f) {
            Some(r) => r,
            None => self.queue(Kind::Pipeline, f).await,
        }
    }

    /// Answers once everything queued before is committed (not synced):
    /// what a process stopping calls last, so that a restart does not redo
    /// the pipeline's latest work.
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.queue(Kind::Flush, |_, _| Ok(())).await
    }

    /// How many times the writer has synced the log (for tests).
    #[cfg(test)]
    pub(crate) fn log_syncs(&self) -> u64 {
        self.log_syncs.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// As [`Db::call`], for bookkeeping nothing waits on (acknowledging
    /// outbox rows, deleting finished queue messages): the write rides in
    /// the next commit, made within [`writer::COMMIT_AFTER`], and is
    /// answered then. Lost in a crash, such a write only makes work be seen
    /// again, which every stage tolerates.
    pub async fn call_lazy<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: Fn(&Connection, &mut Marks) -> Result<R, StoreError> + Send + 'static,
    {
        self.queue(Kind::Lazy, f).await
    }

    /// As [`Db::call_lazy`] for a write whose caller does not wait even for
    /// that: it is queued, and a failure is logged (naming `what`) instead
    /// of answered. For acknowledgements only: losing one makes work be seen
    /// again, which every stage tolerates.
    pub fn submit_lazy<F>(&self, what: &'static str, f: F) -> Result<(), StoreError>
    where
        F: Fn(&Connection, &mut Marks) -> Result<(), StoreError> + Send + 'static,
    {
        self.enqueue(Kind::Lazy, f, move |r| {
            if let Err(e) = r {
                tracing::warn!(error = %e, what, "a bookkeeping write failed; its work will be seen again");
            }
        })
    }

    async fn queue<R, F>(&self, kind: Kind, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: Fn(&Connection, &mut Marks) -> Result<R, StoreError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.enqueue(kind, f, move |r| {
            let _ = tx.send(r);
        })?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Queues `f` for the writer thread; `answer` gets its result when its
    /// `kind` says (see [`writer`]).
    fn enqueue<R, F, A>(&self, kind: Kind, f: F, answer: A) -> Result<(), StoreError>
    where
        R: Send + 'static,
        F: Fn(&Connection, &mut Marks) -> Result<R, StoreError> + Send + 'static,
        A: FnOnce(Result<R, StoreError>) + Send + 'static,
    {
        let op = Box::new(Pending { f, result: None, answer });
        self.ops.send(Queued { kind, op }).map_err(|_| StoreError::Closed)
    }

    /// A receiver that changes after every commit that wrote to `stream`.
    pub fn watch(&self, stream: Stream) -> watch::Receiver<u64> {
        self.changes[stream.index()].subscribe()
    }

    /// The feed of an outbox stream's new rows ([`feed`]), for its one
    /// consumer (a new one replaces the last).
    pub fn feed(&self, stream: Stream) -> feed::FeedReader {
        self.feeds.subscribe(stream)
    }
}

/// Which streams a call wrote to, so their consumers are woken after
/// commit, and the outbox rows it wrote, handed to their consumers then
/// ([`feed`]).
#[derive(Default)]
pub struct Marks {
    pub(crate) streams: [bool; 5],
    pub(crate) fed: Vec<feed::Fed>,
}

impl Marks {
    /// Records that this call wrote to `stream`.
    pub fn mark(&mut self, stream: Stream) {
        self.streams[stream.index()] = true;
    }

    /// Records that this call wrote the outbox row `seq` of `stream`,
    /// announcing the record `data` (as stored).
    pub(crate) fn feed(&mut self, stream: Stream, seq: i64, data: String) {
        self.mark(stream);
        self.fed.push(feed::Fed { stream, seq, prev: 0, data });
    }

    pub(crate) fn absorb(&mut self, other: Marks) {
        for (m, o) in self.streams.iter_mut().zip(other.streams) {
            *m |= o;
        }
        self.fed.extend(other.fed);
    }
}

fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let done: usize = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(StoreError::backend)?;
    if done > MIGRATIONS.len() {
        return Err(StoreError::other(format!(
            "database schema version {done} is newer than this hookline ({}); upgrade hookline",
            MIGRATIONS.len()
        )));
    }
    for (i, m) in MIGRATIONS.iter().enumerate().skip(done) {
        conn.execute_batch(&format!("BEGIN; {m}; PRAGMA user_version = {}; COMMIT;", i + 1))
            .map_err(|e| StoreError::other(format!("migration {} failed: {e}", i + 1)))?;
    }
    Ok(())
}

/// Milliseconds since the epoch, the unit of every stored instant.
pub(crate) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The JSON `data` of the one row `query` (with `params`) finds, decoded;
/// `None` when there is none. Every store's get-by-key reads this way.
pub(crate) fn stored<T: serde::de::DeserializeOwned>(
    c: &rusqlite::Connection,
    query: &str,
    params: impl rusqlite::Params,
) -> Result<Option<T>, StoreError> {
    stored_text(c, query, params)?.map(|d| decode(&d)).transpose()
}

/// The one text column of the row `query` finds, if any, undecoded (for
/// the hot paths that decode it after the call, off the writer thread).
pub(crate) fn stored_text(
    c: &rusqlite::Connection,
    query: &str,
    params: impl rusqlite::Params,
) -> Result<Option<String>, StoreError> {
    use rusqlite::OptionalExtension;
    c.prepare_cached(query).map_err(sql)?.query_row(params, |r| r.get(0)).optional().map_err(sql)
}

/// The record codec: one stored record (a row's JSON `data`) read back
/// into its type; anything unreadable is [`StoreError::Corrupt`], never a
/// panic. Public for the fuzzer (fuzz/), which runs it on arbitrary text.
pub fn decode<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// The record codec: one record as its row stores it (JSON text), which
/// [`decode`] reads back into an equal record.
pub fn encode<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("records serialize")
}

/// The [`StoreError`] of a failed SQLite call, keeping its error: throttled
/// when the database was busy or locked (another connection held it
/// longer than the busy timeout), so callers back off and retry.
pub(crate) fn sql(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            StoreError::throttled(e.to_string(), e)
        }
        _ => StoreError::backend(e),
    }
}

/// A database file for one test, named after it, removed with its log
/// and shared-memory files when dropped.
#[cfg(test)]
pub(crate) struct TempDb(pub std::path::PathBuf);

#[cfg(test)]
impl TempDb {
    pub(crate) fn new(name: &str) -> TempDb {
        TempDb(std::env::temp_dir().join(format!("hookline-{name}-{}-{}.db", std::process::id(), now_ms())))
    }
}

#[cfg(test)]
impl Drop for TempDb {
    fn drop(&mut self) {
        for ext in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{ext}", self.0.display()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_or_locked_database_is_throttled() {
        for code in [rusqlite::ffi::SQLITE_BUSY, rusqlite::ffi::SQLITE_LOCKED] {
            let e = sql(rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None));
            assert!(e.is_throttled() && e.is_retryable(), "{e}");
            assert!(std::error::Error::source(&e).is_some());
        }
        let other = sql(rusqlite::Error::QueryReturnedNoRows);
        assert!(!other.is_throttled());
    }

    /// Found by the fuzzer (fuzz/regressions/record/): numbers in a stored
    /// record (audit details, a saga snapshot, a rate limit) read back one
    /// unit in the last place off, so a record changed each time it was
    /// read and written again. serde_json's `float_roundtrip` parses them
    /// exactly.
    #[test]
    fn stored_numbers_read_back_exactly() {
        for n in ["-6.036272125005622e-13", "-5.872922862934988e+121", "1.3169550236994939e-102", "0.1", "2.5"] {
            let text = format!(
                r#"{{"action":"subscription.verified","actor":"key:default","at":"2026-11-28T18:57:00Z","details":{n},"id":"aud_1","reason":null,"subscription_id":null}}"#
            );
            let rec: shared::audit::AuditRecord = decode(&text).unwrap();
            let again: shared::audit::AuditRecord = decode(&encode(&rec)).unwrap();
            assert_eq!(again, rec, "{n}");
            assert_eq!(rec.details.to_string(), n, "{n} read exactly");
        }
    }

    async fn count(db: &Db) -> i64 {
        db.call(|c, _| c.query_row("SELECT COUNT(*) FROM settings", [], |r| r.get(0)).map_err(sql)).await.unwrap()
    }

    async fn write_then(db: &Db, key: &'static str, fail: bool) -> Result<(), StoreError> {
        db.call(move |c, _| {
            c.execute("INSERT INTO settings (key, value) VALUES (?1, 'v')", [key]).map_err(sql)?;
            if fail {
                return Err(StoreError::other(format!("{key} fails after writing")));
            }
            Ok(())
        })
        .await
    }

    /// Migration 8 fills the search columns of events stored before it:
    /// tenant and partition from the JSON, the outcome from their sagas and
    /// dead letters.
    #[test]
    fn migration_8_fills_in_events_stored_before() {
        let c = Connection::open_in_memory().unwrap();
        for m in &MIGRATIONS[..7] {
            c.execute_batch(m).unwrap();
        }
        c.execute_batch("PRAGMA user_version = 7").unwrap();
        let ev = |id: &str, tenant: Option<&str>, key: Option<&str>, seq: Option<u64>| {
            serde_json::json!({"id": id, "tenant_id": tenant, "partition_key": key, "partition_seq": seq}).to_string()
        };
        for (id, data) in [
            ("e1", ev("e1", Some("acme"), Some("k"), Some(1))),
            ("e2", ev("e2", None, Some("k"), Some(1))),
            ("e3", ev("e3", None, None, None)),
            ("e4", ev("e4", Some("acme"), Some("k"), None)),
        ] {
            c.execute(
                "INSERT INTO events (id, event_type, received_at, expires_at, data) VALUES (?1, 't', 1, 2, ?2)",
                [id, data.as_str()],
            )
            .unwrap();
        }
        c.execute_batch(
            "INSERT INTO sagas (id, event_id, subscription_id, status, attempts, data) VALUES
                 ('s1', 'e1', 'sub', 'Completed', 1, '{}'), ('s2', 'e2', 'sub', 'Completed', 3, '{}'),
                 ('s3', 'e3', 'sub', 'DeadLettered', 2, '{}');
             INSERT INTO dead_letters (id, state, created_at, data) VALUES ('d3', 'open', 1, '{\"event_id\": \"e3\"}');",
        )
        .unwrap();
        migrate(&c).unwrap();
        let mut st =
            c.prepare("SELECT id, tenant_id, part_scope, part_key, part_seq, outcome FROM events ORDER BY id").unwrap();
        type Row = (String, Option<String>, Option<String>, Option<String>, Option<i64>, i64);
        let rows: Vec<Row> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let s = |v: &str| Some(v.to_string());
        assert_eq!(
            rows,
            vec![
                ("e1".into(), s("acme"), s("t4:acme"), s("k"), Some(1), 0),
                ("e2".into(), None, s("g"), s("k"), Some(1), 1),
                ("e3".into(), None, None, None, None, 2),
                ("e4".into(), s("acme"), None, s("k"), None, 0),
            ]
        );
        assert_eq!(
            shared::ordering::Partition::of(Some("acme"), "k").scope,
            "t4:acme",
            "the scope as ordering writes it"
        );
    }

    /// Migration 11 moves each stream's unacknowledged outbox rows to the
    /// stream's own table and the given-up rows to `outbox_failed`, keeping
    /// their sequence numbers; new rows are numbered after them.
    #[test]
    fn migration_11_splits_the_outbox_by_stream_and_keeps_its_order() {
        let c = Connection::open_in_memory().unwrap();
        for m in &MIGRATIONS[..10] {
            c.execute_batch(m).unwrap();
        }
        c.execute_batch(
            "PRAGMA user_version = 10;
             INSERT INTO outbox (seq, stream, key, attempt) VALUES
                 (1, 'events', 'e1', NULL), (2, 'sagas', 's1', NULL), (3, 'attempts', 's1', 1),
                 (4, 'events-failed', 'e2', NULL), (5, 'events', 'e3', NULL), (6, 'attempts-failed', 's2', 2);",
        )
        .unwrap();
        migrate(&c).unwrap();
        let rows = |q: &str| -> Vec<(i64, String, Option<i64>)> {
            c.prepare(q)
                .unwrap()
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        let s = |v: &str| v.to_string();
        assert_eq!(
            rows("SELECT seq, key, NULL FROM outbox_events ORDER BY seq"),
            vec![(1, s("e1"), None), (5, s("e3"), None)]
        );
        assert_eq!(rows("SELECT seq, key, NULL FROM outbox_sagas"), vec![(2, s("s1"), None)]);
        assert_eq!(rows("SELECT seq, key, attempt FROM outbox_attempts"), vec![(3, s("s1"), Some(1))]);
        assert_eq!(
            rows("SELECT seq, stream || ':' || key, attempt FROM outbox_failed ORDER BY seq"),
            vec![(4, s("events-failed:e2"), None), (6, s("attempts-failed:s2"), Some(2))]
        );
        c.execute("INSERT INTO outbox_events (key) VALUES ('e4')", []).unwrap();
        assert_eq!(rows("SELECT seq, key, NULL FROM outbox_events WHERE key = 'e4'"), vec![(6, s("e4"), None)]);
    }

    /// Migration 13 deletes the generated API key earlier versions kept in
    /// clear in `settings`, and leaves the other settings alone.
    #[test]
    fn migration_13_deletes_the_api_key_kept_in_clear() {
        let c = Connection::open_in_memory().unwrap();
        for m in &MIGRATIONS[..12] {
            c.execute_batch(m).unwrap();
        }
        c.execute_batch(
            "PRAGMA user_version = 12;
             INSERT INTO settings (key, value) VALUES ('api_key', 'hk_in_clear'), ('other', 'kept');",
        )
        .unwrap();
        migrate(&c).unwrap();
        let keys: Vec<String> = c
            .prepare("SELECT key FROM settings ORDER BY key")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(keys, ["other"]);
    }

    #[tokio::test]
    async fn a_failed_call_leaves_no_write_alone_or_in_a_group() {
        let tmp = TempDb::new("writer");
        let path = &tmp.0;
        let db = Db::open(path).unwrap();
        // Alone in its transaction: rolled back, its error answered.
        let err = write_then(&db, "alone", true).await.unwrap_err();
        assert!(err.to_string().contains("alone fails"), "{err}");
        assert_eq!(count(&db).await, 0);
        // Queued together (while the writer is held by a slow call, so they
        // form one group): the group is run again with a savepoint per
        // call, so the failed one is undone, the others commit, and each is
        // answered with what it saw in the run that committed (`c` sees
        // `a` and itself, not `b`).
        let hold = db.call(|_, _| {
            std::thread::sleep(std::time::Duration::from_millis(200));
            Ok(())
        });
        let c_sees = async {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            db.call(|c, _| {
                c.execute("INSERT INTO settings (key, value) VALUES ('c', 'v')", []).map_err(sql)?;
                c.query_row("SELECT COUNT(*) FROM settings", [], |r| r.get::<_, i64>(0)).map_err(sql)
            })
            .await
        };
        let db_ = &db;
        let later = |key, fail| async move {
            tokio::time::sleep(std::time::Duration::from_millis(if key == "a" { 10 } else { 30 })).await;
            write_then(db_, key, fail).await
        };
        let (held, a, b, c) = tokio::join!(hold, later("a", false), later("b", true), c_sees);
        assert!(held.is_ok() && a.is_ok() && b.is_err(), "{a:?} {b:?}");
        assert_eq!(c.unwrap(), 2, "c is answered from the run that committed");
        let keys: Vec<String> = db
            .call(|c, _| {
                let mut st = c.prepare("SELECT key FROM settings ORDER BY key").map_err(sql)?;
                let rows = st.query_map([], |r| r.get(0)).map_err(sql)?;
                rows.collect::<Result<_, _>>().map_err(sql)
            })
            .await
            .unwrap();
        assert_eq!(keys, ["a", "c"]);
    }

    /// The log is copied into the database file by the checkpointer
    /// thread soon after a commit, though it holds far fewer frames than
    /// the writer's own threshold (and SQLite's default of 1,000): the
    /// database file grows only when a checkpoint copies pages into it.
    #[tokio::test]
    async fn the_checkpointer_copies_the_log_into_the_database_off_the_writer() {
        let tmp = TempDb::new("ckpt");
        let path = &tmp.0;
        let db = Db::open(path).unwrap();
        let before = std::fs::metadata(path).unwrap().len();
        // About 600 pages of log: under both thresholds.
        db.call(|c, _| {
            let value = "x".repeat(3000);
            for i in 0..600 {
                c.execute("INSERT INTO settings (key, value) VALUES (?1, ?2)", rusqlite::params![i.to_string(), value])
                    .map_err(sql)?;
            }
            Ok(())
        })
        .await
        .unwrap();
        let frames: i64 =
            db.call(|c, _| c.query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0)).map_err(sql)).await.unwrap();
        assert_eq!(frames, i64::from(WRITER_CHECKPOINT_FRAMES), "the writer's own threshold");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let copied = loop {
            let len = std::fs::metadata(path).unwrap().len();
            if len > before + 600 * 3000 || std::time::Instant::now() > deadline {
                break len;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        };
        assert!(
            copied > before + 600 * 3000,
            "the database file is {copied} bytes (was {before}): the log was not copied"
        );
    }

    /// Whether another connection to the file sees the setting `key`: what
    /// is committed.
    fn committed(path: &std::path::Path, key: &str) -> bool {
        let c = Connection::open(path).unwrap();
        c.query_row("SELECT COUNT(*) FROM settings WHERE key = ?1", [key], |r| r.get::<_, i64>(0)).unwrap() == 1
    }

    async fn put(db: &Db, key: &'static str) {
        db.call(move |c, _| c.execute("INSERT INTO settings (key, value) VALUES (?1, 'v')", [key]).map_err(sql))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn api_writes_are_committed_and_synced_before_they_are_answered_and_pipeline_work_soon_after() {
        let tmp = TempDb::new("sync");
        let path = &tmp.0;
        let db = Db::open(path).unwrap();
        let synced = db.log_syncs();
        put(&db, "api").await;
        assert!(committed(path, "api"), "an API write is committed when answered");
        assert_eq!(db.log_syncs(), synced + 1, "and synced");
        // Pipeline work is answered once run, and committed (not synced)
        // within COMMIT_AFTER, or with the next API write.
        pipeline(put(&db, "pipeline")).await;
        let answered = std::time::Instant::now();
        while !committed(path, "pipeline") {
            assert!(answered.elapsed() < writer::COMMIT_AFTER * 50, "pipeline work is committed soon");
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        assert_eq!(db.log_syncs(), synced + 1, "pipeline work alone is not synced");
        pipeline(put(&db, "pipeline-2")).await;
        put(&db, "api-2").await;
        assert!(committed(path, "pipeline-2") && committed(path, "api-2"), "committed with the API write");
        assert_eq!(db.log_syncs(), synced + 2);
        // A read is not a write: nothing to sync; but what it saw is
        // committed before it is answered.
        pipeline(put(&db, "pipeline-read")).await;
        assert_eq!(count(&db).await, 5);
        assert!(committed(path, "pipeline-read"), "an API read answers once what it saw is committed");
        assert_eq!(db.log_syncs(), synced + 2);
        // A flush answers once what came before is committed.
        pipeline(put(&db, "pipeline-3")).await;
        db.flush().await.unwrap();
        assert!(committed(path, "pipeline-3"));
        // A task the pipeline spawns is not pipeline work.
        pipeline(async {
            let db = db.clone();
            tokio::spawn(async move { put(&db, "spawned").await }).await.unwrap()
        })
        .await;
        assert!(committed(path, "spawned"), "a spawned task's write is an API write");
    }
}
