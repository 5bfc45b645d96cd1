//! Backup and restore of `hookline serve`'s database while it runs.
//!
//! [`backup`] opens the live database read-only, as a second connection
//! (from another process: `hookline backup`), and writes a copy with
//! `VACUUM INTO`: one read transaction, so the copy is the database as one
//! commit left it (a consistent snapshot), and in WAL mode a reader never
//! blocks the writer, so `hookline serve` keeps accepting events meanwhile.
//! The copy is written to a partial file (mode 0600), checked (`PRAGMA
//! integrity_check`, the schema version, what it holds), synced, and only
//! then given its name, without replacing any file: a file at the backup's
//! name is always a whole, checked copy. `VACUUM INTO` copies rows, not
//! pages, so nothing the database freed (old versions of rows) comes along.
//!
//! Secrets stay sealed: the copy holds signing secrets and header values
//! sealed by the data key, and the data key only wrapped by the master key,
//! which is never in the database (docs/operations.md, "The master key"):
//! the key file (or `HOOKLINE_MASTER_KEY`) is backed up apart.
//!
//! [`restore`] puts a backup in place of a database that no process has
//! open: it refuses one in use (a process holds SQLite's locks on it), and
//! one that exists unless told to replace it, in which case the old
//! database and its write-ahead log are kept aside under a new name (a
//! stale log left beside the restored file would otherwise be replayed
//! into it). The backup is copied and checked before anything is moved.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::schema::MIGRATIONS;
use crate::DATA_KEY_SETTING;

/// What a checked copy holds, read from the copy itself (so it says what
/// was copied, not what the live database holds a moment later).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Size of the copy in bytes.
    pub bytes: u64,
    /// Its schema version (`PRAGMA user_version`: migrations applied).
    pub schema_version: u32,
    /// Events stored.
    pub events: u64,
    /// Subscriptions stored.
    pub subscriptions: u64,
    /// Deliveries not finished (sagas neither completed nor dead-lettered):
    /// what a process started on the copy goes on delivering.
    pub deliveries_pending: u64,
    /// Events accepted but not yet routed (`None` when the layout keeps no
    /// such table: routing state rebuilt at start-up).
    pub events_unrouted: Option<u64>,
    /// Open dead letters.
    pub dead_letters_open: u64,
    /// Whether the copy holds the deployment's wrapped data key (it does
    /// once `hookline serve` has started on the database).
    pub data_key_wrapped: bool,
}

/// What [`backup`] did.
#[derive(Debug, Clone)]
pub struct BackupReport {
    /// The backup file written.
    pub out: PathBuf,
    /// What it holds.
    pub summary: Summary,
    /// How long the read transaction on the live database lasted.
    pub snapshot: Duration,
    /// How long the whole backup took (copy, check, sync).
    pub took: Duration,
}

/// What [`restore`] did.
#[derive(Debug, Clone)]
pub struct RestoreReport {
    /// The database file restored.
    pub db: PathBuf,
    /// What it holds now.
    pub summary: Summary,
    /// Where the database it replaced was moved (with its `-wal` beside it
    /// under the same name), if there was one.
    pub replaced: Option<PathBuf>,
}

/// How a failed backup or restore should be reported (the CLI's exit
/// statuses follow it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// A file that must exist does not.
    NotFound,
    /// A file that must not exist does, or is in use.
    Conflict,
    /// The input is not a usable hookline database.
    Invalid,
    /// Anything else (the file system, SQLite).
    Other,
}

/// Why a backup or restore failed. Names files, never their contents.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The database (or backup) to read does not exist.
    #[error("{} does not exist", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// The backup's name is taken: a backup never overwrites a file.
    #[error("{} already exists: a backup never overwrites a file; name a new one", path.display())]
    OutExists {
        /// The file.
        path: PathBuf,
    },
    /// The database to restore over exists, and replacing it was not asked.
    #[error(
        "{} already exists: pass --replace to restore over it (it is kept, moved aside with its -wal)",
        path.display()
    )]
    DbExists {
        /// The file.
        path: PathBuf,
    },
    /// A process has the database open (SQLite's locks are held on it).
    #[error("{} is in use by process {pid}: stop hookline serve before restoring over it", path.display())]
    InUse {
        /// The file locked.
        path: PathBuf,
        /// The process holding the lock.
        pid: i32,
    },
    /// The file is not a hookline database.
    #[error("{} is not a hookline database: {why}", path.display())]
    NotHookline {
        /// The file.
        path: PathBuf,
        /// What gave it away.
        why: String,
    },
    /// The file was written by a newer hookline.
    #[error("{} has schema version {found}, newer than this hookline's {supported}: use a newer hookline", path.display())]
    Newer {
        /// The file.
        path: PathBuf,
        /// Its version.
        found: u32,
        /// The newest this build knows.
        supported: u32,
    },
    /// The copy failed `PRAGMA integrity_check`.
    #[error("{} failed its integrity check: {problems}", path.display())]
    Damaged {
        /// The file checked.
        path: PathBuf,
        /// The first problems SQLite reported.
        problems: String,
    },
    /// A path that SQLite cannot be given (not UTF-8).
    #[error("{}: the path is not UTF-8", path.display())]
    Path {
        /// The path.
        path: PathBuf,
    },
    /// The file system failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: io::Error,
    },
    /// SQLite failed.
    #[error("{what} {}: {source}", path.display())]
    Sqlite {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: rusqlite::Error,
    },
}

impl BackupError {
    /// Which kind of failure this is.
    pub fn kind(&self) -> FailureKind {
        match self {
            BackupError::Missing { .. } => FailureKind::NotFound,
            BackupError::OutExists { .. } | BackupError::DbExists { .. } | BackupError::InUse { .. } => {
                FailureKind::Conflict
            }
            BackupError::NotHookline { .. }
            | BackupError::Newer { .. }
            | BackupError::Damaged { .. }
            | BackupError::Path { .. } => FailureKind::Invalid,
            BackupError::Io { .. } | BackupError::Sqlite { .. } => FailureKind::Other,
        }
    }
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> BackupError + 'a {
    move |source| BackupError::Io { what, path: path.to_path_buf(), source }
}

fn sql_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(rusqlite::Error) -> BackupError + 'a {
    move |source| match source.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase) => {
            BackupError::NotHookline { path: path.to_path_buf(), why: "not an SQLite database".into() }
        }
        Some(rusqlite::ErrorCode::DatabaseCorrupt) => {
            BackupError::Damaged { path: path.to_path_buf(), problems: source.to_string() }
        }
        _ => BackupError::Sqlite { what, path: path.to_path_buf(), source },
    }
}

/// `path` with `suffix` appended to its file name (`hookline.db` →
/// `hookline.db-wal`).
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Whether anything (a file, a directory, a dangling link) is at `path`.
fn taken(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// A file this module is writing, removed when dropped unless kept.
struct Partial {
    path: PathBuf,
    keep: bool,
}

impl Partial {
    /// Creates `path` empty with mode 0600; fails if anything is there.
    fn create(path: PathBuf) -> Result<(Partial, File), BackupError> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(io_err("creating", &path))?;
        Ok((Partial { path, keep: false }, file))
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.keep {
            // With the side files SQLite may have made beside it.
            for suffix in ["", "-journal", "-wal", "-shm"] {
                let _ = std::fs::remove_file(with_suffix(&self.path, suffix));
            }
        }
    }
}

/// Syncs a file's contents, then its directory (so that its name is on
/// disk too).
fn sync(path: &Path) -> Result<(), BackupError> {
    File::open(path).and_then(|f| f.sync_all()).map_err(io_err("syncing", path))?;
    sync_dir(path)
}

fn sync_dir(path: &Path) -> Result<(), BackupError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir).and_then(|f| f.sync_all()).map_err(io_err("syncing the directory of", path))
}

/// The schema version of an open hookline database; refuses a file that
/// is not one, or one newer than this build.
fn schema_version(c: &Connection, path: &Path) -> Result<u32, BackupError> {
    let version: u32 =
        c.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(sql_err("reading the schema of", path))?;
    let settings: Option<i64> = c
        .query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'settings'", [], |r| r.get(0))
        .optional()
        .map_err(sql_err("reading the schema of", path))?;
    if version == 0 || settings.is_none() {
        return Err(BackupError::NotHookline { path: path.to_path_buf(), why: "no hookline schema in it".into() });
    }
    let supported = MIGRATIONS.len() as u32;
    if version > supported {
        return Err(BackupError::Newer { path: path.to_path_buf(), found: version, supported });
    }
    Ok(version)
}

/// Rows of `table` matching `filter`, or `None` when the table does not
/// exist in this layout.
fn count(c: &Connection, table: &str, filter: &str, path: &Path) -> Result<Option<u64>, BackupError> {
    let exists: Option<i64> = c
        .query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", [table], |r| r.get(0))
        .optional()
        .map_err(sql_err("reading", path))?;
    if exists.is_none() {
        return Ok(None);
    }
    let n: i64 = c
        .query_row(&format!("SELECT COUNT(*) FROM {table} {filter}"), [], |r| r.get(0))
        .map_err(sql_err("counting in", path))?;
    Ok(Some(n as u64))
}

/// Checks a copy this module made (`copy`, reported as `named`): turns it
/// into one self-contained file (rollback-journal mode: no `-wal` needed
/// beside it; `hookline serve` switches it back to WAL when it opens it),
/// runs `PRAGMA integrity_check`, reads its schema version and what it
/// holds.
fn check_copy(copy: &Path, named: &Path) -> Result<Summary, BackupError> {
    let c = Connection::open_with_flags(copy, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(sql_err("opening", named))?;
    let schema_version = schema_version(&c, named)?;
    c.query_row("PRAGMA journal_mode=DELETE", [], |_| Ok(())).map_err(sql_err("checking", named))?;
    let problems: Vec<String> = c
        .prepare("PRAGMA integrity_check(20)")
        .and_then(|mut st| {
            let found = st.query_map([], |r| r.get::<_, String>(0))?.collect();
            found
        })
        .map_err(sql_err("checking", named))?;
    if problems != ["ok"] {
        return Err(BackupError::Damaged { path: named.to_path_buf(), problems: problems.join("; ") });
    }
    let must = |n: Option<u64>| n.unwrap_or(0);
    let summary = Summary {
        bytes: 0,
        schema_version,
        events: must(count(&c, "events", "", named)?),
        subscriptions: must(count(&c, "subscriptions", "", named)?),
        deliveries_pending: must(count(&c, "sagas", "WHERE status NOT IN ('Completed', 'DeadLettered')", named)?),
        events_unrouted: count(&c, "outbox_events", "", named)?,
        dead_letters_open: must(count(&c, "dead_letters", "WHERE state = 'open'", named)?),
        data_key_wrapped: count(&c, "settings", &format!("WHERE key = '{DATA_KEY_SETTING}'"), named)? == Some(1),
    };
    c.close().map_err(|(_, e)| sql_err("closing", named)(e))?;
    let bytes = std::fs::metadata(copy).map_err(io_err("reading", named))?.len();
    Ok(Summary { bytes, ..summary })
}

/// Writes a consistent copy of the database `db` (which `hookline serve`
/// may be running on) to the new file `out`, mode 0600, and checks it.
/// Refuses, writing nothing, when `out` exists, when `db` does not, or
/// when `db` is not a hookline database this build can read.
///
/// # Errors
///
/// [`BackupError`]; on any error no file is left at `out` or beside it.
pub fn backup(db: &Path, out: &Path) -> Result<BackupReport, BackupError> {
    let started = Instant::now();
    if taken(out) {
        return Err(BackupError::OutExists { path: out.to_path_buf() });
    }
    if !db.is_file() {
        return Err(BackupError::Missing { path: db.to_path_buf() });
    }
    let out_abs = std::path::absolute(out).map_err(io_err("resolving", out))?;
    let partial_path = with_suffix(&out_abs, &format!(".partial-{}", std::process::id()));
    let target = partial_path.to_str().ok_or_else(|| BackupError::Path { path: out.to_path_buf() })?.to_string();

    // Read-only: this connection never writes to the live database, and
    // takes no lock that its writer waits on.
    let source = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(sql_err("opening", db))?;
    source.busy_timeout(Duration::from_secs(5)).map_err(sql_err("opening", db))?;
    let version = schema_version(&source, db)?;
    let (partial, file) = Partial::create(partial_path)?;
    drop(file);
    let snapshot_started = Instant::now();
    source.execute("VACUUM INTO ?1", [&target]).map_err(sql_err("copying", db))?;
    let snapshot = snapshot_started.elapsed();
    drop(source);

    let summary = check_copy(&partial.path, out)?;
    if summary.schema_version != version {
        return Err(BackupError::Damaged {
            path: out.to_path_buf(),
            problems: format!("schema version {} in the copy, {version} in the database", summary.schema_version),
        });
    }
    sync(&partial.path)?;
    put_in_place(partial, out)?;
    Ok(BackupReport { out: out.to_path_buf(), summary, snapshot, took: started.elapsed() })
}

/// Gives the finished `partial` the name `out`, refusing to replace a file
/// there (a hard link fails if the name is taken; where the file system
/// has no hard links, a rename after checking the name).
fn put_in_place(mut partial: Partial, out: &Path) -> Result<(), BackupError> {
    match std::fs::hard_link(&partial.path, out) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(BackupError::OutExists { path: out.to_path_buf() });
        }
        Err(_) => {
            if taken(out) {
                return Err(BackupError::OutExists { path: out.to_path_buf() });
            }
            std::fs::rename(&partial.path, out).map_err(io_err("naming", out))?;
            partial.keep = true;
            return sync_dir(out);
        }
    }
    // `partial` is dropped here: its name goes, the file stays as `out`.
    drop(partial);
    sync_dir(out)
}

/// The process holding a POSIX lock on any byte of `path` (SQLite's
/// locks: a process with the database open holds a shared lock on the
/// database file and on its `-shm` file for as long as it has it open in
/// WAL mode), or `None`. Locks of this process are not seen.
fn lock_holder(path: &Path) -> Result<Option<i32>, BackupError> {
    use std::os::fd::AsRawFd;
    let file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("checking who uses", path)(e)),
    };
    // SAFETY: `flock` is plain data (zero is a valid value of every field),
    // and F_GETLK only reads and writes the struct passed by pointer.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = 0;
    lock.l_len = 0;
    // SAFETY: a valid open descriptor and a valid `flock`.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut lock) };
    if r == -1 {
        return Err(io_err("checking who uses", path)(io::Error::last_os_error()));
    }
    Ok((libc::c_int::from(lock.l_type) != libc::F_UNLCK).then_some(lock.l_pid))
}

/// Refuses when a process has the database `db` open.
fn refuse_in_use(db: &Path) -> Result<(), BackupError> {
    for path in [db.to_path_buf(), with_suffix(db, "-shm")] {
        if let Some(pid) = lock_holder(&path)? {
            return Err(BackupError::InUse { path: db.to_path_buf(), pid });
        }
    }
    Ok(())
}

/// Restores the backup `from` to the database path `db`, which no process
/// may have open. When `db` (or a `-wal` of it) exists, `replace` must be
/// set: the old database is then renamed `<db>.replaced-<UTC time>`, its
/// `-wal` beside it under that name, and its `-shm` (an index of the log,
/// rebuilt from it) removed. The backup is copied beside `db` (mode 0600)
/// and checked before anything is moved; `from` is only read.
///
/// # Errors
///
/// [`BackupError`]; nothing is moved or left behind unless the restore
/// succeeds.
pub fn restore(from: &Path, db: &Path, replace: bool) -> Result<RestoreReport, BackupError> {
    if !from.is_file() {
        return Err(BackupError::Missing { path: from.to_path_buf() });
    }
    refuse_in_use(db)?;
    let old: Vec<PathBuf> = ["", "-wal"].iter().map(|s| with_suffix(db, s)).filter(|p| taken(p)).collect();
    if !old.is_empty() && !replace {
        return Err(BackupError::DbExists { path: db.to_path_buf() });
    }
    let (partial, mut file) = Partial::create(with_suffix(db, &format!(".restoring-{}", std::process::id())))?;
    let mut source = File::open(from).map_err(io_err("reading", from))?;
    io::copy(&mut source, &mut file).map_err(io_err("copying", from))?;
    drop(file);
    let summary = check_copy(&partial.path, from)?;
    sync(&partial.path)?;

    // Nothing may hold the database while it is moved.
    refuse_in_use(db)?;
    let replaced = if old.is_empty() {
        None
    } else {
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
        let aside = with_suffix(db, &format!(".replaced-{stamp}"));
        if taken(&aside) {
            return Err(BackupError::OutExists { path: aside });
        }
        for suffix in ["", "-wal"] {
            let now = with_suffix(db, suffix);
            if taken(&now) {
                std::fs::rename(&now, with_suffix(&aside, suffix)).map_err(io_err("moving aside", &now))?;
            }
        }
        Some(aside)
    };
    let shm = with_suffix(db, "-shm");
    match std::fs::remove_file(&shm) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("removing", &shm)(e)),
    }
    let mut partial = partial;
    std::fs::rename(&partial.path, db).map_err(io_err("naming", db))?;
    partial.keep = true;
    sync_dir(db)?;
    Ok(RestoreReport { db: db.to_path_buf(), summary, replaced })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::{sql, Db};

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hookline-backup-{name}-{}-{}", std::process::id(), crate::now_ms()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// The names in a directory, sorted.
    fn names(d: &Path) -> Vec<String> {
        let mut n: Vec<String> =
            std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        n.sort();
        n
    }

    /// A database as `hookline serve` leaves it: a wrapped data key, two
    /// subscriptions, three events (one not routed yet), a saga of each
    /// kind that matters, an open and a requeued dead letter.
    async fn filled(path: &Path) -> Db {
        let db = Db::open(path).unwrap();
        db.call(|c, _| {
            c.execute_batch(&format!(
                "INSERT INTO settings (key, value) VALUES ('{DATA_KEY_SETTING}', '{{\"wrapped\": \"…\"}}');
                 INSERT INTO subscriptions (id, version, data) VALUES ('sub_1', 1, '{{}}'), ('sub_2', 1, '{{}}');
                 INSERT INTO events (id, event_type, received_at, expires_at, data) VALUES
                     ('e1', 't', 1, 9, '{{}}'), ('e2', 't', 2, 9, '{{}}'), ('e3', 't', 3, 9, '{{}}');
                 INSERT INTO outbox_events (key) VALUES ('e3');
                 INSERT INTO sagas (id, event_id, subscription_id, status, attempts, data) VALUES
                     ('s1', 'e1', 'sub_1', 'Completed', 1, '{{}}'), ('s2', 'e1', 'sub_2', 'PendingRetry', 2, '{{}}'),
                     ('s3', 'e2', 'sub_1', 'Pending', 0, '{{}}'), ('s4', 'e2', 'sub_2', 'DeadLettered', 6, '{{}}');
                 INSERT INTO dead_letters (id, state, created_at, data) VALUES
                     ('d1', 'open', 1, '{{}}'), ('d2', 'requeued', 1, '{{}}');"
            ))
            .map_err(sql)
        })
        .await
        .unwrap();
        db
    }

    fn rows(path: &Path, query: &str) -> Vec<String> {
        let c = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        let mut st = c.prepare(query).unwrap();
        let r = st.query_map([], |r| r.get(0)).unwrap().collect::<Result<_, _>>().unwrap();
        r
    }

    #[tokio::test]
    async fn a_backup_is_a_checked_owner_only_copy_of_what_was_committed() {
        let d = dir("copy");
        let path = d.join("hookline.db");
        let _db = filled(&path).await;
        let out = d.join("backup.db");
        let report = backup(&path, &out).unwrap();
        let expected = Summary {
            bytes: std::fs::metadata(&out).unwrap().len(),
            schema_version: MIGRATIONS.len() as u32,
            events: 3,
            subscriptions: 2,
            deliveries_pending: 2,
            events_unrouted: Some(1),
            dead_letters_open: 1,
            data_key_wrapped: true,
        };
        assert_eq!(report.summary, expected);
        assert!(report.summary.bytes > 0 && report.snapshot <= report.took);
        assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(rows(&out, "SELECT id FROM events ORDER BY id"), ["e1", "e2", "e3"]);
        assert_eq!(rows(&out, "PRAGMA journal_mode"), ["delete"], "one file, no -wal needed beside it");
        let left = names(&d);
        assert!(left.iter().all(|n| !n.contains(".partial-") && !n.starts_with("backup.db-")), "{left:?}");
        std::fs::remove_dir_all(d).unwrap();
    }

    #[tokio::test]
    async fn a_backup_refuses_bad_input_and_writes_nothing() {
        let d = dir("refuse");
        let path = d.join("hookline.db");
        let _db = filled(&path).await;
        let taken = d.join("taken.db");
        std::fs::write(&taken, b"something else").unwrap();
        let before = names(&d);
        let e = backup(&path, &taken).unwrap_err();
        assert!(matches!(e, BackupError::OutExists { .. }) && e.kind() == FailureKind::Conflict, "{e}");
        assert_eq!(std::fs::read(&taken).unwrap(), b"something else");

        let e = backup(&d.join("missing.db"), &d.join("out.db")).unwrap_err();
        assert!(matches!(e, BackupError::Missing { .. }) && e.kind() == FailureKind::NotFound, "{e}");
        assert!(e.to_string().ends_with("missing.db does not exist"), "{e}");

        let text = d.join("notes.txt");
        std::fs::write(&text, "not a database at all, just some text that is long enough".repeat(100)).unwrap();
        let e = backup(&text, &d.join("out.db")).unwrap_err();
        assert!(matches!(e, BackupError::NotHookline { .. }), "{e}");
        let other = d.join("other.db");
        Connection::open(&other).unwrap().execute_batch("CREATE TABLE t (a); PRAGMA user_version = 3;").unwrap();
        let e = backup(&other, &d.join("out.db")).unwrap_err();
        assert!(matches!(e, BackupError::NotHookline { .. }) && e.kind() == FailureKind::Invalid, "{e}");
        let newer = d.join("newer.db");
        Connection::open(&newer)
            .unwrap()
            .execute_batch("CREATE TABLE settings (k); PRAGMA user_version = 999;")
            .unwrap();
        let e = backup(&newer, &d.join("out.db")).unwrap_err();
        assert!(matches!(e, BackupError::Newer { found: 999, .. }), "{e}");

        let mut expected = before;
        expected.extend(["newer.db", "notes.txt", "other.db"].map(String::from));
        expected.sort();
        assert_eq!(names(&d), expected, "nothing written but the test's own files");
        std::fs::remove_dir_all(d).unwrap();
    }

    /// Backups taken while the writer commits continuously: each copy holds
    /// whole commits only (every commit writes a pair of rows), and the
    /// writer is never refused (a reader does not block it in WAL mode).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_backup_taken_while_the_writer_commits_holds_whole_commits() {
        let d = dir("live");
        let path = d.join("hookline.db");
        let db = filled(&path).await;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = tokio::spawn({
            let (db, stop) = (db.clone(), stop.clone());
            async move {
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    db.call(move |c, _| {
                        c.execute("INSERT INTO settings (key, value) VALUES (?1, 'x')", [format!("a{n}")])
                            .map_err(sql)?;
                        c.execute("INSERT INTO settings (key, value) VALUES (?1, 'y')", [format!("b{n}")]).map_err(sql)
                    })
                    .await
                    .expect("the writer is never refused");
                    n += 1;
                }
                n
            }
        });
        for i in 0..5 {
            let (p, out) = (path.clone(), d.join(format!("b{i}.db")));
            let r = tokio::task::spawn_blocking(move || backup(&p, &out)).await.unwrap().unwrap();
            let pairs = |prefix: &str| {
                rows(&r.out, &format!("SELECT CAST(COUNT(*) AS TEXT) FROM settings WHERE key LIKE '{prefix}%'"))[0]
                    .clone()
            };
            assert_eq!(pairs("a"), pairs("b"), "backup {i} holds half a commit");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let commits = writer.await.unwrap();
        assert!(commits > 0, "the writer committed");
        std::fs::remove_dir_all(d).unwrap();
    }

    /// A restore over a stopped database whose log still holds commits (a
    /// crash image): refused without `replace`; with it, the old database
    /// and its log are moved aside together (and still open with every
    /// commit), and the restored file holds the backup alone: the old log
    /// is not replayed into it.
    #[tokio::test]
    async fn a_restore_moves_the_old_database_and_its_log_aside() {
        let d = dir("restore");
        let live = d.join("live.db");
        let db = filled(&live).await;
        let saved = d.join("backup.db");
        backup(&live, &saved).unwrap();
        db.call(|c, _| {
            c.execute(
                "INSERT INTO events (id, event_type, received_at, expires_at, data) VALUES ('later', 't', 4, 9, '{}')",
                [],
            )
            .map_err(sql)
        })
        .await
        .unwrap();
        // The files as a crash leaves them: the database and its log.
        let target = d.join("hookline.db");
        for s in ["", "-wal"] {
            std::fs::copy(with_suffix(&live, s), with_suffix(&target, s)).unwrap();
        }
        assert!(std::fs::metadata(with_suffix(&target, "-wal")).unwrap().len() > 0, "the log holds commits");

        let e = restore(&saved, &target, false).unwrap_err();
        assert!(matches!(e, BackupError::DbExists { .. }) && e.kind() == FailureKind::Conflict, "{e}");
        let report = restore(&saved, &target, true).unwrap();
        assert_eq!(report.summary.events, 3);
        let aside = report.replaced.expect("moved aside");
        assert!(aside.to_string_lossy().contains("hookline.db.replaced-"), "{}", aside.display());
        assert!(!with_suffix(&target, "-wal").exists() && !with_suffix(&target, "-shm").exists());
        assert_eq!(rows(&target, "SELECT id FROM events ORDER BY id"), ["e1", "e2", "e3"], "the backup alone");
        assert_eq!(std::fs::metadata(&target).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(with_suffix(&aside, "-wal").exists(), "its log went with it");
        assert_eq!(rows(&aside, "SELECT id FROM events WHERE id = 'later'"), ["later"], "the old one is whole");
        assert!(names(&d).iter().all(|n| !n.contains(".restoring-")));
        // The restored file opens as hookline serve opens it.
        drop(Db::open(&target).unwrap());
        std::fs::remove_dir_all(d).unwrap();
    }

    #[tokio::test]
    async fn a_restore_refuses_a_missing_or_damaged_backup_and_moves_nothing() {
        let d = dir("restore-bad");
        let live = d.join("hookline.db");
        let _db = filled(&live).await;
        let saved = d.join("backup.db");
        backup(&live, &saved).unwrap();
        let target = d.join("target.db");
        std::fs::copy(&saved, &target).unwrap();
        let before = names(&d);

        let e = restore(&d.join("gone.db"), &target, true).unwrap_err();
        assert!(matches!(e, BackupError::Missing { .. }), "{e}");
        let bytes = std::fs::read(&saved).unwrap();
        let cut = d.join("cut.db");
        std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
        let e = restore(&cut, &target, true).unwrap_err();
        assert_eq!(e.kind(), FailureKind::Invalid, "{e}");
        let mut expected = before;
        expected.push("cut.db".into());
        expected.sort();
        assert_eq!(names(&d), expected, "nothing moved, nothing left behind");
        assert_eq!(std::fs::read(&target).unwrap(), bytes, "the target is as it was");
        std::fs::remove_dir_all(d).unwrap();
    }
}
