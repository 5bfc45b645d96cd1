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

use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;

use rusqlite::Connection;
use tokio::sync::{oneshot, watch};

use schema::MIGRATIONS;
use shared::error::StoreError;

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

/// One queued call. A group runs its calls first without a savepoint
/// each, and only if one fails is the group rolled back and run again with
/// them (see `writer`), so a call may run twice: `run` keeps the result of
/// its latest run, and `finish` answers the caller with it once the commit
/// is known.
trait Call: Send {
    /// Runs the call (inside a savepoint of its own when `savepoint`),
    /// adding the streams it wrote to `marks` unless it failed; answers
    /// whether it failed.
    fn run(&mut self, conn: &Connection, marks: &mut [bool; 5], savepoint: bool) -> bool;
    /// Answers the caller: the kept result if `commit` succeeded, else the
    /// commit's error.
    fn finish(self: Box<Self>, commit: Result<(), String>);
}

type Op = Box<dyn Call>;

/// A [`Call`] made from the caller's function and how to answer it.
struct Pending<F, R, A> {
    f: F,
    result: Option<Result<R, StoreError>>,
    answer: A,
}

impl<F, R, A> Call for Pending<F, R, A>
where
    F: Fn(&Connection, &mut Marks) -> Result<R, StoreError> + Send,
    R: Send,
    A: FnOnce(Result<R, StoreError>) + Send,
{
    fn run(&mut self, conn: &Connection, marks: &mut [bool; 5], savepoint: bool) -> bool {
        let mut m = Marks(*marks);
        let f = &self.f;
        let r = if savepoint { in_savepoint(conn, |c| f(c, &mut m)) } else { f(conn, &mut m) };
        let failed = r.is_err();
        if !failed {
            *marks = m.0;
        }
        self.result = Some(r);
        failed
    }

    fn finish(self: Box<Self>, commit: Result<(), String>) {
        let Pending { result, answer, .. } = *self;
        answer(match (commit, result) {
            (Ok(()), Some(r)) => r,
            (Ok(()), None) => Err(StoreError::other("the call was not run".into())),
            (Err(e), _) => Err(StoreError::other(e)),
        })
    }
}

tokio::task_local! {
    /// Set while a pipeline stage runs ([`pipeline`]).
    static PIPELINE: ();
}

/// Runs `f` as pipeline work: the commits of its calls (and of nothing
/// else in their group) do not wait for the disk (`synchronous=NORMAL`
/// in WAL mode). Such a commit survives the process crashing at any
/// point, as every commit does; only an operating-system crash or power
/// loss can take it back, and then only together with every commit after
/// it, since the log is recovered as an unbroken prefix and every durable
/// commit syncs the log up to itself. What is taken back is the pipeline's
/// own progress (routing, starting, recording an attempt), which it redoes
/// from the last durable state: at-least-once delivery, as after any crash.
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
    changes: Arc<[watch::Sender<u64>; 5]>,
}

/// Largest number of calls committed together.
const MAX_GROUP: usize = 1024;

/// Longest a lazy call ([`Db::call_lazy`]) waits for a commit to ride in.
pub const LAZY_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// A call on its way to the writer thread.
struct Queued {
    lazy: bool,
    /// Its commit must be on disk before its caller is answered
    /// (`synchronous=FULL`); see [`pipeline`].
    durable: bool,
    op: Op,
}

impl Db {
    /// Opens (creating if needed) the database file, applies migrations and
    /// starts the writer thread.
    pub fn open(path: &Path) -> Result<Db, StoreError> {
        files::restrict_database_files(path).map_err(StoreError::backend)?;
        let conn = Connection::open(path).map_err(StoreError::backend)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA busy_timeout=5000; PRAGMA foreign_keys=OFF;",
        )
        .map_err(StoreError::backend)?;
        // Every statement of the pipeline's paths stays prepared (rusqlite
        // keeps 16 by default, fewer than the paths use, so they were parsed
        // again and again).
        conn.set_prepared_statement_cache_capacity(256);
        migrate(&conn)?;
        // The log is copied into the database by a thread of its own (see
        // `checkpointer`); the writer checkpoints only to start a long log
        // over (see `WRITER_CHECKPOINT_FRAMES`).
        conn.execute_batch(&format!("PRAGMA wal_autocheckpoint={WRITER_CHECKPOINT_FRAMES}"))
            .map_err(StoreError::backend)?;
        let checkpoints = Connection::open(path).map_err(StoreError::backend)?;
        checkpoints.execute_batch("PRAGMA synchronous=FULL;").map_err(StoreError::backend)?;
        let (kick, kicks) = mpsc::sync_channel::<()>(1);
        // Thread names show in `top` and profiles cut to 15 bytes.
        std::thread::Builder::new()
            .name("hookline-ckpt".into())
            .spawn(move || checkpointer(checkpoints, kicks))
            .map_err(StoreError::backend)?;
        let (tx, rx) = mpsc::channel::<Queued>();
        let changes: Arc<[watch::Sender<u64>; 5]> = Arc::new(std::array::from_fn(|_| watch::channel(0u64).0));
        let notify = changes.clone();
        std::thread::Builder::new()
            .name("hookline-sqlite".into())
            .spawn(move || writer(conn, rx, notify, kick))
            .map_err(StoreError::backend)?;
        Ok(Db { ops: tx, changes })
    }

    /// Runs `f` in the next group transaction (a failed call leaves no write) and
    /// returns its result once that transaction is committed. `f` may run
    /// twice (when another call of its group fails, the group is run again;
    /// see `writer`), so it must not act outside the connection; it is
    /// answered from the run that committed.
    pub async fn call<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: Fn(&Connection, &mut Marks) -> Result<R, StoreError> + Send + 'static,
    {
        self.queue(false, f).await
    }

    /// As [`Db::call`], for bookkeeping nothing waits on (acknowledging
    /// outbox rows, deleting finished queue messages): the write waits, up to
    /// [`LAZY_WAIT`], to ride in the commit of a call that something does wait
    /// on, instead of paying for a commit of its own. Lost in a crash, such a
    /// write only makes work be seen again, which every stage tolerates.
    pub async fn call_lazy<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: Fn(&Connection, &mut Marks) -> Result<R, StoreError> + Send + 'static,
    {
        self.queue(true, f).await
    }

    /// As [`Db::call_lazy`] for a write whose caller does not wait even for
    /// that: it is queued, and a failure is logged (naming `what`) instead
    /// of answered. For acknowledgements only: losing one makes work be seen
    /// again, which every stage tolerates.
    pub fn submit_lazy<F>(&self, what: &'static str, f: F) -> Result<(), StoreError>
    where
        F: Fn(&Connection, &mut Marks) -> Result<(), StoreError> + Send + 'static,
    {
        self.enqueue(true, f, move |r| {
            if let Err(e) = r {
                tracing::warn!(error = %e, what, "a bookkeeping write failed; its work will be seen again");
            }
        })
    }

    async fn queue<R, F>(&self, lazy: bool, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: Fn(&Connection, &mut Marks) -> Result<R, StoreError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.enqueue(lazy, f, move |r| {
            let _ = tx.send(r);
        })?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Queues `f` for the writer thread; `answer` gets its result once the
    /// commit that holds it is done (or failed).
    fn enqueue<R, F, A>(&self, lazy: bool, f: F, answer: A) -> Result<(), StoreError>
    where
        R: Send + 'static,
        F: Fn(&Connection, &mut Marks) -> Result<R, StoreError> + Send + 'static,
        A: FnOnce(Result<R, StoreError>) + Send + 'static,
    {
        let op: Op = Box::new(Pending { f, result: None, answer });
        self.ops.send(Queued { lazy, durable: !lazy && !in_pipeline(), op }).map_err(|_| StoreError::Closed)
    }

    /// A receiver that changes after every commit that wrote to `stream`.
    pub fn watch(&self, stream: Stream) -> watch::Receiver<u64> {
        self.changes[stream.index()].subscribe()
    }
}

/// Which streams a call wrote to, so their consumers are woken after commit.
pub struct Marks([bool; 5]);

impl Marks {
    /// Records that this call wrote to `stream`.
    pub fn mark(&mut self, stream: Stream) {
        self.0[stream.index()] = true;
    }
}

/// Runs one statement without parameters through the statement cache (the
/// transaction and savepoint statements run several times per group; parsing
/// them each time showed in profiles).
fn run(conn: &Connection, statement: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(statement)?.execute([]).map(|_| ())
}

fn in_savepoint<R>(conn: &Connection, f: impl FnOnce(&Connection) -> Result<R, StoreError>) -> Result<R, StoreError> {
    run(conn, "SAVEPOINT op").map_err(StoreError::backend)?;
    match f(conn) {
        Ok(r) => {
            run(conn, "RELEASE op").map_err(StoreError::backend)?;
            Ok(r)
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK TO op; RELEASE op");
            Err(e)
        }
    }
}

/// Begins the group's write transaction. Another process may hold the
/// write lock past busy_timeout: wait for it rather than run the group
/// outside a transaction.
fn begin(conn: &Connection) {
    while let Err(e) = run(conn, "BEGIN IMMEDIATE") {
        tracing::warn!(error = %e, "sqlite: cannot begin a write transaction; retrying");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// How long the checkpointer rests after each checkpoint: the log gathers
/// this long's commits, so a page the pipeline rewrites in every commit (a
/// queue's or an outbox's last page, an index root) is copied into the
/// database once per checkpoint instead of once per commit.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Log frames (pages) after which the writer checkpoints itself. SQLite
/// starts the log over only once all of it has been copied, and a
/// checkpoint that ran while the writer committed leaves the newest
/// frames; under steady load (thousands of commits a second) the
/// checkpointer seldom finds the log at rest, so this is how the log is
/// started over: the writer then copies only what came since the
/// checkpointer's last pass (at most [`CHECKPOINT_EVERY`] of commits).
/// 10,000 frames is a 40 MiB log.
const WRITER_CHECKPOINT_FRAMES: u32 = 10_000;

/// Copies the log into the database file off the writer thread, at most
/// every [`CHECKPOINT_EVERY`], after the writer says it committed. A
/// passive checkpoint takes no lock the writer waits on, so commits go on
/// while it copies pages and syncs the file; with the writer doing it
/// (SQLite's default, every 1,000 frames) each commit that crossed the
/// line also paid for the copy and two syncs, a fifth of the writer's CPU
/// in the profile.
fn checkpointer(conn: Connection, kicks: mpsc::Receiver<()>) {
    while kicks.recv().is_ok() {
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::warn!(error = %e, "sqlite: checkpoint failed; the writer checkpoints when the log is full");
        }
        std::thread::sleep(CHECKPOINT_EVERY);
    }
}

fn writer(
    conn: Connection,
    rx: mpsc::Receiver<Queued>,
    changes: Arc<[watch::Sender<u64>; 5]>,
    checkpoint: mpsc::SyncSender<()>,
) {
    // Lazy calls held for the next commit, and when the oldest came.
    let mut held: Vec<Op> = Vec::new();
    let mut held_since = std::time::Instant::now();
    // The connection's `synchronous` setting, changed only between groups.
    let mut synced = true;
    loop {
        let next = if held.is_empty() {
            rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected)
        } else {
            rx.recv_timeout(LAZY_WAIT.saturating_sub(held_since.elapsed()))
        };
        let group = match next {
            Ok(Queued { lazy: true, op, .. }) if held.len() < MAX_GROUP => {
                if held.is_empty() {
                    held_since = std::time::Instant::now();
                }
                held.push(op);
                continue;
            }
            Ok(Queued { op, durable, .. }) => {
                let mut group = std::mem::take(&mut held);
                group.push(op);
                (group, durable)
            }
            Err(mpsc::RecvTimeoutError::Timeout) => (std::mem::take(&mut held), false),
            Err(mpsc::RecvTimeoutError::Disconnected) if !held.is_empty() => (std::mem::take(&mut held), false),
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        };
        let (mut group, mut durable) = group;
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(q) => {
                    durable |= q.durable;
                    group.push(q.op)
                }
                Err(_) => break,
            }
        }
        // A group with nothing durable in it commits without waiting for
        // the disk: the next durable commit (or checkpoint) syncs it too.
        if durable != synced {
            let pragma = if durable { "PRAGMA synchronous=FULL" } else { "PRAGMA synchronous=NORMAL" };
            match run(&conn, pragma) {
                Ok(()) => synced = durable,
                Err(e) => tracing::warn!(error = %e, "sqlite: cannot change synchronous; committing as before"),
            }
        }
        let mut marks = [false; 5];
        begin(&conn);
        // The calls run without a savepoint each: a savepoint's statement
        // journal copies every page a call touches, which cost about a
        // tenth of the pipeline's CPU. Calls seldom fail; when one does, the
        // group is rolled back and run again with a savepoint per call, so
        // that only the failed call's writes are undone. A call alone in
        // its transaction needs neither: its error is its answer, its
        // writes rolled back.
        let failed = group.iter_mut().any(|op| op.run(&conn, &mut marks, false));
        let commit = if !failed {
            run(&conn, "COMMIT").map_err(|e| e.to_string())
        } else if group.len() == 1 {
            let _ = run(&conn, "ROLLBACK");
            Ok(())
        } else {
            let _ = run(&conn, "ROLLBACK");
            marks = [false; 5];
            begin(&conn);
            for op in group.iter_mut() {
                op.run(&conn, &mut marks, true);
            }
            run(&conn, "COMMIT").map_err(|e| e.to_string())
        };
        if commit.is_err() {
            let _ = run(&conn, "ROLLBACK");
            marks = [false; 5];
        } else {
            // Full means a checkpoint is already due.
            let _ = checkpoint.try_send(());
        }
        for op in group {
            op.finish(commit.clone());
        }
        for (i, m) in marks.iter().enumerate() {
            if *m {
                changes[i].send_modify(|v| *v += 1);
            }
        }
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

    /// The `synchronous` setting a call's commit runs under, as the call
    /// sees it (1 NORMAL, 2 FULL).
    async fn sync_level(db: &Db) -> i64 {
        db.call(|c, _| c.query_row("PRAGMA synchronous", [], |r| r.get(0)).map_err(sql)).await.unwrap()
    }

    #[tokio::test]
    async fn only_pipeline_work_commits_without_waiting_for_the_disk() {
        let tmp = TempDb::new("sync");
        let path = &tmp.0;
        let db = Db::open(path).unwrap();
        assert_eq!(sync_level(&db).await, 2, "a call outside the pipeline is durable");
        assert_eq!(pipeline(sync_level(&db)).await, 1, "pipeline work alone is not synced");
        assert_eq!(sync_level(&db).await, 2, "and durable again after it");
        // Queued together with pipeline work, a durable call still commits
        // synced (the pipeline calls sharing its group then do too).
        for _ in 0..20 {
            let pipeline_calls = (0..8).map(|_| {
                tokio::spawn(pipeline({
                    let db = db.clone();
                    async move { sync_level(&db).await }
                }))
            });
            let durable = tokio::spawn({
                let db = db.clone();
                async move { sync_level(&db).await }
            });
            assert_eq!(durable.await.unwrap(), 2);
            for call in futures_util::future::join_all(pipeline_calls).await {
                call.unwrap();
            }
        }
        // A task the pipeline spawns is not pipeline work.
        let spawned = pipeline(async {
            let db = db.clone();
            tokio::spawn(async move { sync_level(&db).await }).await.unwrap()
        })
        .await;
        assert_eq!(spawned, 2);
    }
}
