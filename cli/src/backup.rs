//! `hookline backup` and `hookline restore`: a consistent copy of a
//! `hookline serve` database taken while it runs, and putting one back
//! (`hookline_sqlite::backup` does the work; this prints what it did).
//! Like the ops commands, they print for people on a terminal and JSON
//! otherwise (`--output`), and their exit status tells what went wrong.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use hookline_sqlite::backup::{BackupError, FailureKind, Summary};
use serde_json::{json, Value};

use crate::ops::client::exit;

/// The help's examples and exit statuses.
const BACKUP_HELP: &str = "The copy holds the data key only wrapped by the master key, which is not in it: \
     back up the key file (<db>.key) or HOOKLINE_MASTER_KEY apart (docs/operations.md, \"Backup and restore\").\n\n\
     Examples:\n  hookline backup --db hookline.db --out /backups/hookline-$(date -u +%Y%m%dT%H%M%SZ).db\n\n\
     Exit status: 0 ok, 1 other failure, 2 invalid input (not a hookline database, a newer schema, damaged), \
     3 not found (no such database), 4 conflict (the output file exists).";

const RESTORE_HELP: &str = "Stop hookline serve first; start it again on the restored file with the same master \
     key (key file or HOOKLINE_MASTER_KEY). It re-sends every delivery that was not finished when the backup was \
     taken; events accepted after the backup are not in it.\n\n\
     Examples:\n  hookline restore --from /backups/hookline-20261129T080000Z.db --db hookline.db --replace\n\n\
     Exit status: 0 ok, 1 other failure, 2 invalid input (not a hookline database, a newer schema, damaged), \
     3 not found (no such backup), 4 conflict (the database is in use, or exists without --replace).";

/// `--output`, as the ops commands take it.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One JSON document.
    Json,
    /// Lines for people.
    Table,
}

/// `hookline backup`.
#[derive(clap::Args, Debug)]
#[command(after_help = BACKUP_HELP)]
pub struct BackupArgs {
    /// The database of `hookline serve` (it may be running).
    #[arg(long, default_value = "hookline.db")]
    db: PathBuf,
    /// The backup file to create (mode 0600); never overwritten.
    #[arg(long)]
    out: PathBuf,
    /// Output format [default: table when stdout is a terminal, else json].
    #[arg(long, short = 'o', value_enum, env = "HOOKLINE_OUTPUT")]
    output: Option<Format>,
}

/// `hookline restore`.
#[derive(clap::Args, Debug)]
#[command(after_help = RESTORE_HELP)]
pub struct RestoreArgs {
    /// The backup file (made by `hookline backup`); only read.
    #[arg(long)]
    from: PathBuf,
    /// The database path to restore to; no process may have it open.
    #[arg(long, default_value = "hookline.db")]
    db: PathBuf,
    /// Restore over an existing database, keeping it (with its -wal) as
    /// `<db>.replaced-<UTC time>`.
    #[arg(long)]
    replace: bool,
    /// Output format [default: table when stdout is a terminal, else json].
    #[arg(long, short = 'o', value_enum, env = "HOOKLINE_OUTPUT")]
    output: Option<Format>,
}

fn json_output(f: Option<Format>) -> bool {
    f.unwrap_or(if std::io::stdout().is_terminal() { Format::Table } else { Format::Json }) == Format::Json
}

/// The exit status of a failure.
fn failed(e: &BackupError) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(match e.kind() {
        FailureKind::NotFound => exit::NOT_FOUND,
        FailureKind::Conflict => exit::CONFLICT,
        FailureKind::Invalid => exit::INVALID,
        FailureKind::Other => exit::OTHER,
    })
}

/// What a copy holds, as JSON fields.
fn summary_json(s: &Summary) -> Value {
    json!({
        "bytes": s.bytes,
        "schema_version": s.schema_version,
        "integrity": "ok",
        "events": s.events,
        "subscriptions": s.subscriptions,
        "deliveries_pending": s.deliveries_pending,
        "events_unrouted": s.events_unrouted,
        "dead_letters_open": s.dead_letters_open,
        "data_key": if s.data_key_wrapped { "wrapped" } else { "none" },
    })
}

/// What a copy holds, as lines for people.
fn summary_lines(s: &Summary) -> String {
    let unrouted = s.events_unrouted.map(|n| format!(", {n} events not yet routed")).unwrap_or_default();
    format!(
        "  size          {} (schema {}, integrity ok)\n  \
         events        {}\n  \
         subscriptions {}\n  \
         pending       {} deliveries not finished{unrouted}\n  \
         dead letters  {} open\n",
        size(s.bytes),
        s.schema_version,
        s.events,
        s.subscriptions,
        s.deliveries_pending,
        s.dead_letters_open,
    )
}

fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} bytes"),
    }
}

fn print(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// The key file `hookline serve` uses for `db` when none is named.
fn key_file(db: &Path) -> String {
    hookline_sqlite::files::default_key_file(db).display().to_string()
}

/// Runs `hookline backup`.
pub fn run_backup(a: BackupArgs) -> ExitCode {
    let r = match hookline_sqlite::backup::backup(&a.db, &a.out) {
        Ok(r) => r,
        Err(e) => return failed(&e),
    };
    if json_output(a.output) {
        let mut v = summary_json(&r.summary);
        v["backup"] = json!(r.out.display().to_string());
        v["database"] = json!(a.db.display().to_string());
        v["snapshot_ms"] = json!(r.snapshot.as_millis() as u64);
        v["took_ms"] = json!(r.took.as_millis() as u64);
        print(&format!("{}\n", serde_json::to_string_pretty(&v).expect("json serializes")));
    } else {
        print(&format!(
            "hookline backup: done\n  from          {}\n  to            {} (0600)\n{}  \
             took          {} ms (the database was read in one snapshot of {} ms; serve went on meanwhile)\n  \
             secrets       sealed; the master key is not in the copy: back up {} (or HOOKLINE_MASTER_KEY) apart\n",
            a.db.display(),
            r.out.display(),
            summary_lines(&r.summary),
            r.took.as_millis(),
            r.snapshot.as_millis(),
            key_file(&a.db),
        ));
    }
    ExitCode::SUCCESS
}

/// Runs `hookline restore`.
pub fn run_restore(a: RestoreArgs) -> ExitCode {
    let r = match hookline_sqlite::backup::restore(&a.from, &a.db, a.replace) {
        Ok(r) => r,
        Err(e) => return failed(&e),
    };
    let replaced = r.replaced.as_ref().map(|p| p.display().to_string());
    if json_output(a.output) {
        let mut v = summary_json(&r.summary);
        v["database"] = json!(r.db.display().to_string());
        v["from"] = json!(a.from.display().to_string());
        v["replaced"] = json!(replaced);
        print(&format!("{}\n", serde_json::to_string_pretty(&v).expect("json serializes")));
    } else {
        let moved =
            replaced.map(|p| format!("  replaced      the old database kept as {p} (with its -wal, if it had one)\n"));
        print(&format!(
            "hookline restore: done\n  from          {}\n  to            {} (0600)\n{}{}  \
             next          hookline serve --db {} with the master key of the backed-up database ({} by default)\n",
            a.from.display(),
            r.db.display(),
            summary_lines(&r.summary),
            moved.unwrap_or_default(),
            r.db.display(),
            key_file(&r.db),
        ));
    }
    ExitCode::SUCCESS
}
