//! `hookline serve`: the whole pipeline in one process on SQLite. This is
//! wiring only: settings from flags and the environment, an HTTP listener
//! ([`listener`]: header, body and idle timeouts, a connection cap) in front
//! of [`hookline_api::Api`], and the SQLite backend's loops
//! ([`hookline_sqlite::runtime`]), which call the same stage functions a
//! Lambda handler calls.

mod keys;
mod listener;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::body::Body;
use axum::http::{header, Request, Response};
use axum::response::IntoResponse;
use axum::Router;
use hookline_api::{self as api, Api, Verification};
use hookline_sqlite::runtime::{Runtime, RuntimeLimits};
use hookline_sqlite::Backend;
use hyper::body::Incoming;
use shared::config::{DefaultValue, Kind, Setting, SETTINGS};
use shared::context::{Config, Hookline};
use shared::duration::{parse_std_duration, Display as ShowDuration};
use shared::ssrf::AddressPolicy;

/// Options of `hookline serve`. A flag given twice takes its last value
/// (scripts append overrides).
#[derive(clap::Args)]
#[command(args_override_self = true)]
pub struct ServeArgs {
    /// Address of the HTTP API.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// The SQLite database file (created if missing).
    #[arg(long, default_value = "hookline.db")]
    db: PathBuf,
    /// The master key file: wraps the data key that seals the secrets in
    /// the database; created (mode 0600, one new key) if missing; refused
    /// if other users can read it. One key per line, the current one first.
    /// Not read when `HOOKLINE_MASTER_KEY` holds the keys. Default: the
    /// database's path with `.key` appended.
    #[arg(long, value_name = "FILE", env = "HOOKLINE_KEY_FILE")]
    key_file: Option<PathBuf>,
    /// Refused: a key on the command line shows in the process list (use
    /// `HOOKLINE_API_KEY` or `--api-keys-file`).
    #[arg(long, hide = true, value_name = "SECRET", num_args = 0..=1, action = clap::ArgAction::Append)]
    api_key: Vec<String>,
    /// Named API keys: a JSON array of `{"name", "role", "tenant_id"?,
    /// "secret"}`, readable only by its owner (refused if other users may
    /// read it). Besides `HOOKLINE_API_KEY` (one admin secret, named
    /// `default`) and the keys created with `hookline keys create`.
    /// Without either, an admin key is generated on the first run, shown
    /// once and written to `<db>.admin-key`.
    #[arg(long, value_name = "PATH", env = "HOOKLINE_API_KEYS_FILE")]
    api_keys_file: Option<PathBuf>,
    /// Local development: allow http:// callbacks to loopback addresses.
    #[arg(long)]
    dev: bool,
    /// Threads that run the pipeline's stages, the API and the deliveries'
    /// requests (the database has a writer thread of its own besides).
    /// Default: one fewer than the machine's cores, at least one, so the
    /// writer keeps a core to itself; more threads on a small machine cost
    /// CPU in hand-offs between them without adding throughput (see the
    /// benchmarks in docs/benchmarks.md).
    #[arg(long, value_name = "N", env = "HOOKLINE_WORKERS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub workers: Option<u16>,
    /// Delivery requests open at once over all subscriptions. Each job takes
    /// a slot as soon as one is free, so a slow request holds only its own.
    #[arg(long, default_value_t = 256)]
    delivery_slots: usize,
    /// Delivery requests open at once to one subscription; its further jobs
    /// wait (without counting an attempt) until one of them ends.
    #[arg(long, default_value_t = 64)]
    max_in_flight: usize,
    /// How often the reconciler looks for stuck work: outbox rows the
    /// pipeline gave up on, and sagas that stopped progressing.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_std_duration)]
    reconcile_interval: Duration,
    /// How often the purge looks for rows past their retention.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_std_duration)]
    purge_interval: Duration,
    /// Most expired events the purge deletes in one write transaction (50
    /// hold the writer 1-2 ms; between batches it pauses at least 3 times
    /// as long: about 4,400 events/s on a 2-core VM with a 2.7 GB database).
    /// Once expired events wait longer than 3 purge intervals (at least
    /// 30 s) it takes 4 times larger batches with shorter pauses until it
    /// has caught up. Larger batches catch up faster at a cost to latency.
    #[arg(long, value_name = "N", default_value_t = 50)]
    purge_batch: usize,
    /// Longest time from the first byte of a request to the end of its
    /// header; a client still sending its header is then disconnected.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_std_duration)]
    header_timeout: Duration,
    /// Longest time to receive a request body once the header is in; then
    /// the request gets 408 and the connection is closed.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_std_duration)]
    body_timeout: Duration,
    /// How long a keep-alive connection may wait for its next request.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_std_duration)]
    idle_timeout: Duration,
    /// Most client connections open at once (lowered to fit the open-files
    /// limit: half of what is left after a reserve goes to deliveries). At
    /// the cap, a new connection replaces a waiting one (no request in
    /// progress, unchanged for a second; those that never completed a
    /// request first, oldest first); if there is none, it is refused with
    /// 503.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    max_connections: usize,
    /// Every setting of `shared::config::SETTINGS`, a flag each.
    #[command(flatten)]
    settings: SettingFlags,
}

/// The flags of `shared::config::SETTINGS`, generated from the
/// declaration: one per setting, falling back to its environment variable
/// (clap's `env`), with its help and default. Only the values given (by
/// flag or variable) are kept; the parser applies the declared defaults.
#[derive(Debug, Clone, Default)]
pub struct SettingFlags {
    /// `(setting name, value)` for every setting given.
    given: Vec<(&'static str, String)>,
}

impl SettingFlags {
    /// The settings of `shared::config` this process runs with: its flags
    /// and the variables they fall back to, on top of the declared defaults.
    fn config(&self) -> Result<Config, shared::config::ConfigError> {
        Config::from_lookup(|key| self.given.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone()))
    }
}

/// The flag of one declared setting (its id is the setting's name).
fn setting_arg(s: &'static Setting) -> clap::Arg {
    let default = match s.default {
        DefaultValue::Value(v) => format!(" [default: {v}]"),
        DefaultValue::Derived(d) => format!(" [default: {d}]"),
        DefaultValue::Unset => String::new(),
    };
    let values = match s.kind {
        Kind::Number { min, max } => format!(" ({min} to {max})"),
        _ => String::new(),
    };
    let arg = clap::Arg::new(s.key)
        .long(s.flag.trim_start_matches("--"))
        .env(s.key)
        .help(format!("{}{values}{default}", capitalised(s.help)))
        .action(clap::ArgAction::Set);
    let arg = match s.kind {
        Kind::Number { .. } => arg.value_name("N"),
        Kind::Duration => arg.value_name("DURATION"),
        // `--trust-actor-header` alone turns it on.
        Kind::Switch => arg.value_name("BOOL").num_args(0..=1).require_equals(true).default_missing_value("true"),
        Kind::Principals => arg.value_name("ARNS"),
        Kind::Destinations => arg.value_name("ARNS"),
    };
    match s.older_spelling_of {
        Some(of) => arg.hide(true).conflicts_with(of),
        None => arg,
    }
}

/// A help text with its first letter upper-case, as clap's help reads.
fn capitalised(help: &str) -> String {
    let mut c = help.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

impl clap::FromArgMatches for SettingFlags {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let given = SETTINGS.iter().filter_map(|s| m.get_one::<String>(s.key).map(|v| (s.key, v.clone()))).collect();
        Ok(SettingFlags { given })
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for SettingFlags {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        SETTINGS.iter().fold(cmd, |cmd, s| cmd.arg(setting_arg(s)))
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// The runtime's worker threads for `serve`: `--workers`, or one fewer
/// than the machine's cores (at least one), leaving a core to the
/// database's writer thread.
pub fn worker_threads(args: &ServeArgs) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    args.workers.map_or(default_workers(cores), usize::from)
}

fn default_workers(cores: usize) -> usize {
    cores.saturating_sub(1).max(1)
}

/// Runs until SIGINT/SIGTERM, then stops taking jobs and finishes those in flight.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    init_logging();
    // Every setting through the one parser both backends use; every bad
    // value is reported at once, by its flag and variable.
    let settings = args.settings.config().map_err(|e| {
        let named: Vec<String> =
            e.problems.iter().map(|(key, m)| format!("{} ({key}): {m}", shared::config::flags_of(key))).collect();
        anyhow::anyhow!("invalid settings:\n  {}", named.join("\n  "))
    })?;
    let (retention, dead_letter_retention) = (settings.retention, settings.dead_letter_retention);
    let open_files = raise_open_files_limit();
    let max_connections = connection_cap(args.max_connections, open_files);
    let key_file = args.key_file.clone().unwrap_or_else(|| hookline_sqlite::files::default_key_file(&args.db));
    let master_env = std::env::var(hookline_sqlite::files::MASTER_KEY_ENV).ok();
    let (master, master_source) = hookline_sqlite::files::master_keys(master_env.as_deref(), &key_file)?;
    let opened = Backend::open(&args.db, &master).await;
    drop(master);
    if let (Err(_), hookline_sqlite::files::KeySource::File { path, created: true }) = (&opened, &master_source) {
        // A key made now for a database that already had its data key (the
        // key file was lost or moved): not that database's key, so it goes.
        let _ = std::fs::remove_file(path);
    }
    let backend = opened.with_context(|| format!("opening database {}", args.db.display()))?;
    if !args.api_key.is_empty() {
        anyhow::bail!(keys::NO_KEYS_ON_THE_COMMAND_LINE);
    }
    if std::env::var_os("HOOKLINE_API_KEYS").is_some() {
        anyhow::bail!(keys::NO_KEY_PAIRS);
    }
    if !settings.admin_principals.is_empty() {
        anyhow::bail!(
            "--admin-principals (ADMIN_PRINCIPALS) names IAM principals, which only an AWS deployment has; \
             hookline serve's callers present keys"
        );
    }
    let file = args.api_keys_file.as_deref().map(|p| keys::read_keys_file(p).map(|t| (p, t))).transpose()?;
    let env_key = std::env::var("HOOKLINE_API_KEY").ok();
    let static_keys = keys::static_keys(env_key.as_deref(), file.as_ref().map(|(p, t)| (*p, t.as_str())))?;
    let config = Config {
        address_policy: if args.dev { AddressPolicy::AllowLoopback } else { AddressPolicy::PublicOnly },
        ..settings
    };
    let mut h = Hookline::new(backend.stores.clone(), config, backend.keyring.clone());
    // Queue and bus destinations: SigV4 with the credentials the AWS CLI would find.
    awsreq::transport::install(&mut h);
    // Test builds only (the `failpoints` feature): HOOKLINE_FAILPOINT, read once.
    h.failpoints = shared::failpoint::Failpoints::from_env();
    let h = Arc::new(h);
    let shown_key = if static_keys.is_empty() {
        admin_key(&h, &backend, &args.db).await?
    } else {
        let names: Vec<&str> = static_keys.iter().map(|k| k.name.as_str()).collect();
        format!("{} (HOOKLINE_API_KEY / --api-keys-file), and the key store", names.join(", "))
    };
    let api = Api::with_keys(h.clone(), static_keys, Verification::Background)
        .trusting_actor_header(h.config.trust_actor_header);

    let listener =
        tokio::net::TcpListener::bind(args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    println!("hookline serve");
    println!("  listening on  http://{addr}");
    println!("  console       http://{addr}/ui/  (sign in with an API key)");
    println!("  database      {}", args.db.display());
    println!(
        "  master key    {}",
        match &master_source {
            hookline_sqlite::files::KeySource::Env => format!("from {}", hookline_sqlite::files::MASTER_KEY_ENV),
            hookline_sqlite::files::KeySource::File { path, created: true } =>
                format!("{} (created now: back it up apart from the database)", path.display()),
            hookline_sqlite::files::KeySource::File { path, created: false } => path.display().to_string(),
        }
    );
    println!("  API key       {shown_key}");
    if h.config.trust_actor_header {
        println!("  audit         X-Actor header trusted (recorded after the key's name)");
    }
    println!(
        "  retention     events {}, resolved dead letters {} (purged every {})",
        ShowDuration(retention),
        ShowDuration(dead_letter_retention),
        ShowDuration(chrono::Duration::from_std(args.purge_interval).unwrap_or(chrono::Duration::MAX))
    );
    println!(
        "  connections   at most {max_connections}{}; timeouts: header {}, body {}, idle {}",
        open_files.map(|n| format!(" (open files limit {n})")).unwrap_or_default(),
        ShowStd(args.header_timeout),
        ShowStd(args.body_timeout),
        ShowStd(args.idle_timeout)
    );
    if args.dev {
        println!("  WARNING: --dev allows http:// callbacks to loopback addresses; never use it in production");
        tracing::warn!("dev mode: http:// callbacks to loopback addresses are allowed");
    }

    // Subscriptions stored in clear by an older version: sealed once, in
    // pages, beside the pipeline.
    let (settings_store, subscriptions) = (backend.settings.clone(), backend.stores.subscriptions.clone());
    tokio::spawn(async move {
        match hookline_sqlite::reseal_secrets(&settings_store, subscriptions.as_ref()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(sealed = n, "sealed the secrets of subscriptions stored in clear"),
            Err(e) => tracing::error!(error = %e, "sealing stored secrets failed; retried at the next start"),
        }
    });
    // Master-key rotation without a restart: SIGHUP reads the keys again
    // and re-wraps the data key under the first.
    #[cfg(unix)]
    tokio::spawn(rewrap_on_hangup(
        backend.settings.clone(),
        backend.keyring.clone(),
        key_file.clone(),
        master_env.clone(),
    ));
    let runtime = Runtime::start(
        &backend,
        h.clone(),
        RuntimeLimits {
            delivery_slots: args.delivery_slots,
            max_in_flight: args.max_in_flight,
            purge_batch: args.purge_batch,
            purge_interval: args.purge_interval,
            reconcile_interval: args.reconcile_interval,
        },
    );

    let (max_body, body_timeout) = (h.config.max_body_bytes, args.body_timeout);
    let limits =
        listener::Limits { header_timeout: args.header_timeout, idle_timeout: args.idle_timeout, max_connections };
    let router = api::http::router(api);
    let app = move |req: Request<Incoming>| {
        let router = router.clone();
        async move { handle(&router, req, max_body, body_timeout).await }
    };
    listener::serve(listener, limits, app, shutdown_signal()).await?;
    tracing::info!("shutting down: no new jobs are taken; finishing those in flight");
    runtime.stop(Duration::from_secs(30)).await;
    println!("hookline serve: stopped");
    Ok(())
}

/// Without static keys: the admin key generated on the first run (its id
/// kept in the settings, the key in the key store, hashed). Made now if
/// there is none: its secret written to `<db>.admin-key` (0600) and shown
/// this once; later runs name the file. What the startup banner says.
async fn admin_key(h: &Hookline, backend: &Backend, db: &std::path::Path) -> anyhow::Result<String> {
    use shared::api_key::{display_prefix, generate_secret, secret_lookup, ApiKeyRecord, StoredCredential};
    let path = keys::admin_key_path(db);
    let id = backend.settings.get_or_init("admin_key_id", || shared::ids::new_api_key_id().into_string()).await?;
    let id = shared::ids::ApiKeyId::new(id);
    if h.stores.keys.get(&id).await?.is_some() {
        return Ok(format!("generated on the first run: in {} (admin, named `default`)", path.display()));
    }
    let secret = generate_secret();
    let credential =
        StoredCredential { lookup: secret_lookup(&h.keyring, &secret), prefix: display_prefix(&secret), until: None };
    let mut key =
        ApiKeyRecord::new("default", shared::access::Role::Admin, None, credential, "system", chrono::Utc::now());
    key.id = id;
    // The file first: a key nobody can read back is no use.
    keys::write_private(&path, &secret)?;
    match h.stores.keys.create(&key).await? {
        Ok(()) => {}
        Err(e) => {
            anyhow::bail!("storing the generated admin key: {e} (a key named `default` without a tenant exists?)")
        }
    }
    Ok(format!("{secret}  (admin, generated now and shown once; also in {}, mode 0600)", path.display()))
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HOOKLINE_LOG")
        .unwrap_or_else(|_| "hookline=info,shared=info,warn".into());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .try_init();
}

/// On each SIGHUP: the master keys read again (the key file, or
/// `HOOKLINE_MASTER_KEY` as this process got it) and the data key re-wrapped
/// under the first ([`hookline_sqlite::rewrap_data_key`]); the outcome is
/// logged, and a failure changes nothing (the process keeps its keyring).
#[cfg(unix)]
async fn rewrap_on_hangup(
    settings: hookline_sqlite::SqliteSettings,
    held: Arc<shared::keyring::Keyring>,
    key_file: PathBuf,
    master_env: Option<String>,
) {
    let Ok(mut hangups) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
        tracing::warn!("no SIGHUP handler: rotating the master key needs a restart");
        return;
    };
    while hangups.recv().await.is_some() {
        let master = match hookline_sqlite::files::master_keys(master_env.as_deref(), &key_file) {
            Ok((master, _)) => master,
            Err(e) => {
                tracing::error!(error = %e, "SIGHUP: the master keys could not be read; nothing changed");
                continue;
            }
        };
        match hookline_sqlite::rewrap_data_key(&settings, &held, &master).await {
            Ok(true) => {
                tracing::info!(master_key = %shared::data_key::KeyWrapper::current(&master), "SIGHUP: re-wrapped the data key under the current master key")
            }
            Ok(false) => {
                tracing::info!(master_key = %shared::data_key::KeyWrapper::current(&master), "SIGHUP: the data key was already wrapped by the current master key")
            }
            Err(e) => tracing::error!(error = %e, "SIGHUP: the data key was not re-wrapped; nothing changed"),
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// One request: its body read within the limits (size, time), then the
/// API's router ([`api::http::router`]) answers it.
async fn handle(router: &Router, req: Request<Incoming>, max_body: usize, body_timeout: Duration) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let body = match tokio::time::timeout(body_timeout, axum::body::to_bytes(Body::new(body), max_body + 1)).await {
        Ok(Ok(b)) => b,
        Ok(Err(_)) => {
            return api::Response::error(
                api::ErrorCode::PayloadTooLarge,
                format!("request body exceeds the limit of {max_body} bytes"),
                None,
            )
            .into_response()
        }
        Err(_) => {
            let mut res = api::Response::error(
                api::ErrorCode::RequestTimeout,
                format!("the request body did not arrive within {}", ShowStd(body_timeout)),
                None,
            )
            .into_response();
            res.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
            return res;
        }
    };
    api::http::call(router, Request::from_parts(parts, Body::from(body))).await
}

/// A `std::time::Duration` written as `--header-timeout` takes it.
struct ShowStd(Duration);

impl std::fmt::Display for ShowStd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match chrono::Duration::from_std(self.0) {
            Ok(d) => ShowDuration(d).fmt(f),
            Err(_) => write!(f, "{:?}", self.0),
        }
    }
}

/// File descriptors kept for the database, logs and the runtime before the
/// rest is shared between client connections and deliveries.
const RESERVED_FILES: u64 = 256;

/// Raises the soft limit on open files to the hard limit (many idle client
/// connections must not leave deliveries failing with "Too many open
/// files"); returns the limit now in force, if known.
#[cfg(unix)]
fn raise_open_files_limit() -> Option<u64> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "cannot read the open files limit");
        return None;
    }
    let before = lim.rlim_cur;
    // An unlimited hard limit is not a valid soft one on every system.
    let target = if lim.rlim_max == libc::RLIM_INFINITY { 1 << 20 } else { lim.rlim_max };
    if before != libc::RLIM_INFINITY && before < target {
        let raised = libc::rlimit { rlim_cur: target, rlim_max: lim.rlim_max };
        // SAFETY: setrlimit reads the struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            tracing::info!(from = { before }, to = { target }, "raised the open files limit to the hard limit");
            return Some(target);
        }
        tracing::warn!(error = %std::io::Error::last_os_error(), limit = { before }, "cannot raise the open files limit");
    }
    Some(before)
}

#[cfg(not(unix))]
fn raise_open_files_limit() -> Option<u64> {
    None
}

/// `--max-connections`, lowered when the open files limit cannot hold it
/// with as many descriptors again left for deliveries, after
/// [`RESERVED_FILES`].
fn connection_cap(wanted: usize, open_files: Option<u64>) -> usize {
    let Some(limit) = open_files else { return wanted.max(1) };
    let fits = (limit.saturating_sub(RESERVED_FILES) / 2).max(16) as usize;
    if wanted > fits {
        tracing::warn!(wanted, open_files = limit, cap = fits, "--max-connections lowered to fit the open files limit");
    }
    wanted.min(fits).max(1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_api_key_on_the_command_line_is_refused_with_the_reason() {
        assert!(super::keys::NO_KEYS_ON_THE_COMMAND_LINE.contains("process list"));
        assert!(super::keys::NO_KEYS_ON_THE_COMMAND_LINE.contains("HOOKLINE_API_KEY"));
        assert!(!parse(&["--api-key", "x"]).unwrap().api_key.is_empty(), "parsed, to be refused by run");
    }

    /// `hookline serve` as clap builds it.
    fn serve_command() -> clap::Command {
        <super::ServeArgs as clap::Args>::augment_args(clap::Command::new("serve"))
    }

    fn parse(args: &[&str]) -> Result<super::ServeArgs, clap::Error> {
        let m = serve_command().try_get_matches_from(std::iter::once("serve").chain(args.iter().copied()))?;
        <super::ServeArgs as clap::FromArgMatches>::from_arg_matches(&m)
    }

    /// Every declared setting is a flag of `serve`, falling back to its
    /// variable.
    #[test]
    fn every_setting_is_a_flag() {
        let cmd = serve_command();
        for s in shared::config::SETTINGS {
            let arg = cmd.get_arguments().find(|a| a.get_id() == s.key).unwrap_or_else(|| panic!("{}", s.key));
            assert_eq!(arg.get_long().map(|l| format!("--{l}")).as_deref(), Some(s.flag));
            assert_eq!(arg.get_env().and_then(|e| e.to_str()), Some(s.key));
        }
    }

    #[test]
    fn setting_flags_are_read_through_the_declaration() {
        let c = parse(&["--retention", "12h", "--trust-actor-header", "--bulk-page-size", "7"]).unwrap();
        let c = c.settings.config().unwrap();
        assert_eq!((c.retention, c.trust_actor_header, c.bulk_page_size), (chrono::Duration::hours(12), true, 7));
        let c = parse(&["--retention-days", "3", "--trust-actor-header=false"]).unwrap().settings.config().unwrap();
        assert_eq!((c.retention, c.trust_actor_header), (chrono::Duration::days(3), false));
        // A flag given twice takes its last value.
        let c = parse(&["--stall-margin", "5m", "--stall-margin", "7m"]).unwrap().settings.config().unwrap();
        assert_eq!(c.reconcile.stall_margin, chrono::Duration::minutes(7));
        assert!(parse(&["--retention", "1d", "--retention-days", "1"]).is_err(), "older spelling with the new one");
        let e = parse(&["--max-attempts", "0"]).unwrap().settings.config().unwrap_err();
        assert_eq!(shared::config::flags_of(&e.problems[0].0), "--max-attempts");
    }

    /// `docs/settings.md` lists every flag of `serve` that is not a
    /// declared setting, with its variable and default.
    #[test]
    fn the_docs_list_every_serve_flag() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/settings.md")).unwrap();
        let rows: Vec<Vec<&str>> = doc
            .lines()
            .filter(|l| l.starts_with("| `--"))
            .map(|l| l.trim().trim_matches('|').split(" | ").map(str::trim).collect())
            .collect();
        let cmd = serve_command();
        let mut problems = Vec::new();
        let own = cmd.get_arguments().filter(|a| {
            !a.is_hide_set() && a.get_long().is_some() && shared::config::setting(a.get_id().as_str()).is_none()
        });
        for a in own {
            let flag = format!("`--{}`", a.get_long().unwrap_or_default());
            let env = a.get_env().and_then(|e| e.to_str()).map_or("—".to_string(), |e| format!("`{e}`"));
            let Some(row) = rows.iter().find(|r| r[0] == flag) else {
                problems.push(format!("{flag} is missing"));
                continue;
            };
            if row.get(1) != Some(&env.as_str()) {
                problems.push(format!("{flag}: variable {:?}, want {env}", row.get(1)));
            }
            let defaults: Vec<String> = a.get_default_values().iter().map(|d| d.to_string_lossy().into()).collect();
            if let (true, [d]) = (a.get_action().takes_values(), defaults.as_slice()) {
                if row.get(2) != Some(&format!("`{d}`").as_str()) {
                    problems.push(format!("{flag}: default {:?}, want `{d}`", row.get(2)));
                }
            }
        }
        assert!(problems.is_empty(), "docs/settings.md's `hookline serve` only table:\n{}", problems.join("\n"));
    }

    #[test]
    fn the_writer_thread_keeps_a_core_to_itself() {
        assert_eq!(super::default_workers(1), 1);
        assert_eq!(super::default_workers(2), 1);
        assert_eq!(super::default_workers(8), 7);
    }
}
