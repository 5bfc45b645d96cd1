//! The writer thread: the one connection that writes, running every call
//! queued by [`crate::Db`] in order, in one transaction kept open across
//! calls and committed in groups.
//!
//! When each caller is answered depends on what its call is:
//! - An API write (anything outside [`crate::pipeline`] that wrote a row)
//!   is answered after the commit that holds it, synced to the disk: it
//!   commits at once, with everything before it.
//! - Pipeline work is answered as soon as it has run, and committed (not
//!   synced) with the next API write, or at most [`COMMIT_AFTER`] later.
//!   Every later write is in the same transaction or a later one, so a
//!   crash takes back an unbroken tail of the pipeline's progress (at most
//!   that long's worth), which it redoes from the last commit: the work in
//!   flight is done again, as after any crash, and nothing accepted is lost.
//!   At a moderate rate this makes one commit per accepted event out of the
//!   six a pipeline's steps would each take.
//! - A read from outside the pipeline (the API) is answered after the
//!   commit of what it may have seen (not synced): what anyone was shown
//!   survives a crash of the process.
//! - A read from the pipeline is answered once run.
//! - Bookkeeping ([`crate::Db::call_lazy`]) is answered after the commit it
//!   rides in, and never makes one itself sooner.
//!
//! Pipeline work does not even wait for the writer thread when the
//! connection is free: the calling thread runs it itself ([`inline`]),
//! saving the two thread switches a queued call costs (a large part of the
//! CPU a moderate, steady load spends per event). When the connection is
//! busy it is queued like any other call, and so joins the next group.
//!
//! Calls run in groups (whatever queued meanwhile), each group inside a
//! savepoint: a failed call leaves no write, and the group's other calls
//! are run again, each in a savepoint of its own (a savepoint per call
//! copies the pages each touches, which showed in profiles, so only a
//! failed group pays for it). A call may run twice: it is answered from its
//! latest run.

use std::fs::File;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use shared::error::StoreError;
use tokio::sync::watch;

use crate::feed::Feeds;
use crate::Marks;

/// Longest pipeline work waits for a commit: what a crash can take back
/// of the pipeline's progress (and so what it redoes), and how soon
/// another process reading the file sees it.
pub const COMMIT_AFTER: Duration = Duration::from_millis(20);

/// Largest number of calls run as one group, and of calls waiting for a
/// commit before one is made.
const MAX_GROUP: usize = 1024;

/// One queued call: `run` keeps the result of its latest run, and `finish`
/// answers the caller with it (or with the commit's error).
pub(crate) trait Call: Send {
    /// Runs the call (inside a savepoint of its own when `savepoint`),
    /// adding the streams it wrote to `marks` unless it failed; answers
    /// whether it failed.
    fn run(&mut self, conn: &Connection, marks: &mut Marks, savepoint: bool) -> bool;
    /// Answers the caller: the kept result if `commit` succeeded, else the
    /// commit's error.
    fn finish(self: Box<Self>, commit: Result<(), String>);
}

pub(crate) type Op = Box<dyn Call>;

/// A [`Call`] made from the caller's function and how to answer it.
pub(crate) struct Pending<F, R, A> {
    pub f: F,
    pub result: Option<Result<R, StoreError>>,
    pub answer: A,
}

impl<F, R, A> Call for Pending<F, R, A>
where
    F: Fn(&Connection, &mut Marks) -> Result<R, StoreError> + Send,
    R: Send,
    A: FnOnce(Result<R, StoreError>) + Send,
{
    fn run(&mut self, conn: &Connection, marks: &mut Marks, savepoint: bool) -> bool {
        let mut m = Marks::default();
        let f = &self.f;
        let r = if savepoint { in_savepoint(conn, "op", |c| f(c, &mut m)) } else { f(conn, &mut m) };
        let failed = r.is_err();
        if !failed {
            marks.absorb(m);
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

/// What a queued call is, which says when it is answered (see the module's
/// doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Outside the pipeline: a write is answered after a synced commit.
    Durable,
    /// Pipeline work: answered once run.
    Pipeline,
    /// Bookkeeping: answered after the commit it rides in.
    Lazy,
    /// Answered after everything before it is committed.
    Flush,
    /// Wakes the writer thread (a transaction was opened by a caller).
    Nudge,
}

/// A call on its way to the writer thread.
pub(crate) struct Queued {
    pub kind: Kind,
    pub op: Op,
}

/// Runs one statement without parameters through the statement cache (the
/// transaction and savepoint statements run several times per group; parsing
/// them each time showed in profiles).
pub(crate) fn run(conn: &Connection, statement: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(statement)?.execute([]).map(|_| ())
}

fn in_savepoint<R>(
    conn: &Connection,
    name: &str,
    f: impl FnOnce(&Connection) -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    run(conn, &format!("SAVEPOINT {name}")).map_err(StoreError::backend)?;
    match f(conn) {
        Ok(r) => {
            run(conn, &format!("RELEASE {name}")).map_err(StoreError::backend)?;
            Ok(r)
        }
        Err(e) => {
            let _ = conn.execute_batch(&format!("ROLLBACK TO {name}; RELEASE {name}"));
            Err(e)
        }
    }
}

/// Begins the write transaction. Another process may hold the write lock
/// past busy_timeout: wait for it rather than run calls outside a
/// transaction.
fn begin(conn: &Connection) {
    while let Err(e) = run(conn, "BEGIN IMMEDIATE") {
        tracing::warn!(error = %e, "sqlite: cannot begin a write transaction; retrying");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How long the checkpointer rests after each checkpoint: the log gathers
/// this long's commits, so a page the pipeline rewrites in every commit (a
/// queue's or an outbox's last page, an index root) is copied into the
/// database once per checkpoint instead of once per commit.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

/// Log frames (pages) after which the writer checkpoints itself. SQLite
/// starts the log over only once all of it has been copied, and a
/// checkpoint that ran while the writer committed leaves the newest
/// frames; under steady load (thousands of commits a second) the
/// checkpointer seldom finds the log at rest, so this is how the log is
/// started over: the writer then copies only what came since the
/// checkpointer's last pass (at most [`CHECKPOINT_EVERY`] of commits).
/// 10,000 frames is a 40 MiB log.
pub(crate) const WRITER_CHECKPOINT_FRAMES: u32 = 10_000;

/// Copies the log into the database file off the writer thread, at most
/// every [`CHECKPOINT_EVERY`], after the writer says it committed. A
/// passive checkpoint takes no lock the writer waits on, so commits go on
/// while it copies pages and syncs the file; with the writer doing it
/// (SQLite's default, every 1,000 frames) each commit that crossed the
/// line also paid for the copy and two syncs, a fifth of the writer's CPU
/// in the profile.
pub(crate) fn checkpointer(conn: Connection, kicks: mpsc::Receiver<()>) {
    while kicks.recv().is_ok() {
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::warn!(error = %e, "sqlite: checkpoint failed; the writer checkpoints when the log is full");
        }
        std::thread::sleep(CHECKPOINT_EVERY);
    }
}

/// The log file, synced after a commit that holds an API write. The
/// connection commits with `synchronous=NORMAL` (in WAL mode, SQLite syncs
/// the log only at checkpoints) and the writer syncs it itself where
/// `synchronous=FULL` would, after the commit: the setting cannot change
/// inside a transaction, and the writer only knows at the end whether one
/// held an API write.
pub(crate) struct Log {
    path: PathBuf,
    file: Option<File>,
    /// How many times it was synced (for tests).
    pub syncs: Arc<std::sync::atomic::AtomicU64>,
}

impl Log {
    pub(crate) fn new(db: &std::path::Path) -> Log {
        let mut path = db.as_os_str().to_owned();
        path.push("-wal");
        Log { path: PathBuf::from(path), file: None, syncs: Arc::default() }
    }

    fn sync(&mut self) -> std::io::Result<()> {
        if self.file.is_none() {
            self.file = Some(File::open(&self.path)?);
        }
        self.file.as_ref().expect("opened").sync_data()?;
        self.syncs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

/// How one call of a group went.
struct Ran {
    failed: bool,
    wrote: bool,
}

/// Runs a group inside a savepoint (see the module's doc); how each call went.
fn run_group(conn: &Connection, group: &mut [Queued], marks: &mut Marks) -> Vec<Ran> {
    let mut ran = Vec::with_capacity(group.len());
    if let Err(e) = run(conn, "SAVEPOINT grp") {
        tracing::warn!(error = %e, "sqlite: cannot open a savepoint; running each call in its own");
        return run_each(conn, group, marks);
    }
    let mut failed = false;
    for q in group.iter_mut() {
        let before = conn.total_changes();
        let f = q.op.run(conn, marks, false);
        ran.push(Ran { failed: f, wrote: conn.total_changes() != before });
        if f {
            failed = true;
            break;
        }
    }
    if failed {
        let _ = run(conn, "ROLLBACK TO grp");
        *marks = Marks::default();
        ran = run_each(conn, group, marks);
    }
    let _ = run(conn, "RELEASE grp");
    ran
}

fn run_each(conn: &Connection, group: &mut [Queued], marks: &mut Marks) -> Vec<Ran> {
    group
        .iter_mut()
        .map(|q| {
            let before = conn.total_changes();
            let failed = q.op.run(conn, marks, true);
            Ran { failed, wrote: conn.total_changes() != before }
        })
        .collect()
}

/// The connection and its open transaction, shared by the writer thread
/// and callers running pipeline work themselves ([`inline`]).
pub(crate) struct State {
    pub conn: Connection,
    /// When the open transaction began, if one is open.
    open: Option<Instant>,
    /// Each outbox stream's last written row ([`crate::feed`]).
    last: [i64; 5],
    /// The writer thread is waiting for a call with no deadline: a caller
    /// that opens a transaction wakes it, so that it commits in time.
    idle: bool,
}

impl State {
    pub(crate) fn new(conn: Connection, last: [i64; 5]) -> State {
        State { conn, open: None, last, idle: false }
    }

    /// Opens a transaction unless one is open; whether it opened one.
    fn begin(&mut self) -> bool {
        if self.open.is_some() {
            return false;
        }
        begin(&self.conn);
        self.open = Some(Instant::now());
        true
    }
}

/// Locks the state (a caller that panicked holding it left it usable: the
/// open transaction is committed or rolled back as a whole).
pub(crate) fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a call wrote that others must hear of: its streams' consumers are
/// woken and its outbox rows (stamped as written) fed.
fn announce(changes: &[watch::Sender<u64>; 5], feeds: &Feeds, marks: Marks) {
    for (i, m) in marks.streams.iter().enumerate() {
        if *m {
            changes[i].send_modify(|v| *v += 1);
        }
    }
    feeds.offer(marks.fed);
}

/// Runs pipeline work `f` on the calling thread when the connection is free
/// (`None` when it is not: queue it instead), in the open transaction,
/// inside a savepoint (a failure leaves no write). Wakes the writer thread
/// when it opened the transaction, so that it commits it in time.
pub(crate) fn inline<R, F>(
    state: &Mutex<State>,
    changes: &[watch::Sender<u64>; 5],
    feeds: &Feeds,
    nudge: &mpsc::Sender<Queued>,
    f: &F,
) -> Option<Result<R, StoreError>>
where
    F: Fn(&Connection, &mut Marks) -> Result<R, StoreError>,
{
    let mut st = match state.try_lock() {
        Ok(st) => st,
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return None,
    };
    if st.begin() && st.idle {
        st.idle = false;
        let _ = nudge.send(Queued { kind: Kind::Nudge, op: Box::new(Nothing) });
    }
    let mut marks = Marks::default();
    let r = in_savepoint(&st.conn, "grp", |c| f(c, &mut marks));
    if r.is_ok() {
        crate::feed::stamp(&mut marks.fed, &mut st.last);
        drop(st);
        announce(changes, feeds, marks);
    }
    Some(r)
}

/// The call a nudge carries: nothing to run or answer.
struct Nothing;

impl Call for Nothing {
    fn run(&mut self, _: &Connection, _: &mut Marks, _: bool) -> bool {
        false
    }
    fn finish(self: Box<Self>, _: Result<(), String>) {}
}

/// What the writer thread holds.
pub(crate) struct Writer {
    pub state: Arc<Mutex<State>>,
    pub ops: mpsc::Receiver<Queued>,
    pub changes: Arc<[watch::Sender<u64>; 5]>,
    pub checkpoint: mpsc::SyncSender<()>,
    pub feeds: Arc<Feeds>,
    pub log: Log,
}

/// The writer thread's loop (see the module's doc); returns once every
/// [`crate::Db`] is dropped and what they queued is committed.
pub(crate) fn writer(mut w: Writer) {
    // The calls answered at the open transaction's commit, and whether it
    // holds an API write (then it is synced).
    let mut waiting: Vec<Op> = Vec::new();
    let mut durable = false;
    // What the open transaction's API writes wrote, announced once synced.
    let mut heard = Marks::default();
    loop {
        let deadline = {
            let mut st = lock(&w.state);
            st.idle = st.open.is_none();
            st.open.map(|since| COMMIT_AFTER.saturating_sub(since.elapsed()))
        };
        let (first, closing) = match deadline {
            None => match w.ops.recv() {
                Ok(q) => (Some(q), false),
                Err(_) => return,
            },
            Some(d) => match w.ops.recv_timeout(d) {
                Ok(q) => (Some(q), false),
                Err(mpsc::RecvTimeoutError::Timeout) => (None, false),
                Err(mpsc::RecvTimeoutError::Disconnected) => (None, true),
            },
        };
        let mut st = lock(&w.state);
        st.idle = false;
        let mut commit_now = first.is_none();
        if let Some(q) = first {
            let mut group = vec![q];
            while group.len() < MAX_GROUP {
                match w.ops.try_recv() {
                    Ok(q) => group.push(q),
                    Err(_) => break,
                }
            }
            group.retain(|q| q.kind != Kind::Nudge);
            if !group.is_empty() {
                st.begin();
                let mut marks = Marks::default();
                let ran = run_group(&st.conn, &mut group, &mut marks);
                crate::feed::stamp(&mut marks.fed, &mut st.last);
                for (q, r) in group.into_iter().zip(ran) {
                    match q.kind {
                        _ if r.failed => q.op.finish(Ok(())),
                        Kind::Lazy => waiting.push(q.op),
                        Kind::Flush => {
                            commit_now = true;
                            waiting.push(q.op)
                        }
                        Kind::Durable if r.wrote => {
                            (commit_now, durable) = (true, true);
                            waiting.push(q.op)
                        }
                        // A read outside the pipeline (the API) may see the
                        // pipeline's latest work: it is committed first, so
                        // what anyone was shown survives a crash.
                        Kind::Durable => {
                            commit_now = true;
                            waiting.push(q.op)
                        }
                        Kind::Pipeline | Kind::Nudge => q.op.finish(Ok(())),
                    }
                }
                if durable {
                    // An API write is heard of once it is on disk: a stage
                    // never acts on an event before its producer could be
                    // told it was accepted.
                    heard.absorb(marks);
                } else {
                    announce(&w.changes, &w.feeds, marks);
                }
            }
        }
        commit_now |= waiting.len() >= MAX_GROUP || st.open.is_some_and(|s| s.elapsed() >= COMMIT_AFTER);
        if commit_now && st.open.take().is_some() {
            let mut commit = run(&st.conn, "COMMIT").map_err(|e| e.to_string());
            if commit.is_err() {
                tracing::error!(error = ?commit, "sqlite: a commit failed; the pipeline's work since the last one is done again");
                let _ = run(&st.conn, "ROLLBACK");
                // Rows fed since the last commit are gone: every consumer
                // starts over from its table.
                st.last = crate::outbox::last_rows(&st.conn).unwrap_or([0; 5]);
                w.feeds.restart();
            }
            // The sync needs no lock: calls go on meanwhile, in the next
            // transaction.
            drop(st);
            if commit.is_ok() && durable {
                commit = w.log.sync().map_err(|e| format!("syncing the database log failed: {e}"));
            }
            if commit.is_ok() {
                // Full means a checkpoint is already due.
                let _ = w.checkpoint.try_send(());
            }
            let marks = std::mem::take(&mut heard);
            if commit.is_ok() {
                announce(&w.changes, &w.feeds, marks);
            }
            durable = false;
            for op in waiting.drain(..) {
                op.finish(commit.clone());
            }
        } else {
            drop(st);
        }
        if closing && lock(&w.state).open.is_none() {
            return;
        }
    }
}
