//! Cold-start benchmark of the six Lambda bootstraps (a benchmark command,
//! not a test). Each function binary is started against a minimal local
//! Lambda Runtime API; its init time is spawn → its first
//! `GET /2018-06-01/runtime/invocation/next` (the moment Lambda's INIT phase
//! ends). Targets: init ≤ 20 ms, bootstrap ≤ 8 MB.
//!
//! `cargo build --release -p ingest -p router -p saga -p delivery -p requeue -p api && cargo run --release -p hookline-bench --bin cold_start`
//!
//! Options: `--dir DIR` where the binaries are (default: the directory of
//! this executable, i.e. `target/release`; a cargo-lambda output such as
//! `target/lambda`, laid out `<name>/bootstrap`, works too), `--runs N`
//! (default 20), `--only ingest,api` (a subset), `--timeout-ms T` (default
//! 5000), `--env K=V` (repeatable: set or override a variable of the
//! child, for experiments such as `--env SSL_CERT_DIR=/nonexistent`). Exits non-zero if a binary fails to start or never asks for
//! `/next` within the timeout.
//!
//! The child gets a Lambda-like environment and nothing else (`env_clear`,
//! so no `~/.aws` profile or credentials of the caller leak in): the
//! `AWS_LAMBDA_*` variables `lambda_runtime::Config::from_env` requires,
//! dummy static credentials and region, and dummy table names and queue
//! URLs (nothing is called during init, see `hookline_aws`).
//! `RUST_LOG` is passed through if set. Child output goes to a temp file,
//! shown when a run fails.
//!
//! Timing notes: the first run of each binary may pay for reading it from
//! disk (column `first`); the others run from the page cache. Built for the
//! host here (x86_64); deployment builds arm64 with cargo-lambda, so treat
//! the figures as indicative, not as Lambda's own `Init Duration`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{Method, StatusCode, Uri};
use tokio::sync::oneshot;

const FUNCTIONS: [&str; 6] = ["ingest", "router", "saga", "delivery", "requeue", "api"];
const INIT_TARGET_MS: f64 = 20.0;
const SIZE_TARGET_MB: f64 = 8.0;

struct Args {
    dir: PathBuf,
    runs: usize,
    only: Option<Vec<String>>,
    timeout: Duration,
    extra_env: Vec<(String, String)>,
}

fn args() -> anyhow::Result<Args> {
    let exe_dir =
        std::env::current_exe()?.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("target/release"));
    let mut a = Args { dir: exe_dir, runs: 20, only: None, timeout: Duration::from_secs(5), extra_env: vec![] };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().ok_or_else(|| anyhow::anyhow!("{k} needs a value"));
        match k.as_str() {
            "--dir" => a.dir = PathBuf::from(v()?),
            "--runs" | "-n" => a.runs = v()?.parse()?,
            "--only" => a.only = Some(v()?.split(',').map(str::to_owned).collect()),
            "--timeout-ms" => a.timeout = Duration::from_millis(v()?.parse()?),
            "--env" => {
                let kv = v()?;
                let (k, v) = kv.split_once('=').ok_or_else(|| anyhow::anyhow!("--env K=V, got {kv}"))?;
                a.extra_env.push((k.to_owned(), v.to_owned()));
            }
            _ => anyhow::bail!("unknown argument {k}; use --dir DIR --runs N --only a,b --timeout-ms T --env K=V"),
        }
    }
    anyhow::ensure!(a.runs > 0, "--runs must be at least 1");
    Ok(a)
}

/// What the runtime API saw from the child of the current run.
enum Seen {
    /// First `GET …/invocation/next`.
    Next(Instant),
    /// `POST …/init/error` (the runtime reported a failed init).
    InitError(String),
}

/// The one waiter of the current run; the handler takes it on the first
/// request, so later requests (none expected) signal nothing.
type Slot = Arc<Mutex<Option<oneshot::Sender<Seen>>>>;

async fn runtime_api(slot: Slot) -> anyhow::Result<std::net::SocketAddr> {
    let app = axum::Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
        let slot = slot.clone();
        async move {
            let now = Instant::now();
            let path = uri.path();
            if method == Method::GET && path == "/2018-06-01/runtime/invocation/next" {
                if let Some(tx) = slot.lock().unwrap().take() {
                    let _ = tx.send(Seen::Next(now));
                }
                // Hold the long poll as Lambda does between invocations; the
                // child is killed long before this ends.
                tokio::time::sleep(Duration::from_secs(30)).await;
                (StatusCode::SERVICE_UNAVAILABLE, String::new())
            } else if method == Method::POST && path == "/2018-06-01/runtime/init/error" {
                if let Some(tx) = slot.lock().unwrap().take() {
                    let _ = tx.send(Seen::InitError(String::from_utf8_lossy(&body).into_owned()));
                }
                (StatusCode::ACCEPTED, r#"{"status":"OK"}"#.to_owned())
            } else {
                (StatusCode::NOT_FOUND, format!("cold_start: no route {method} {path}"))
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}

/// The environment of the child: what Lambda sets for a `provided.al2023`
/// function, the template's variables with dummy values, and nothing else.
fn lambda_env(function: &str, api: std::net::SocketAddr) -> Vec<(String, String)> {
    let q = "http://127.0.0.1:1/q";
    let mut env: Vec<(&str, String)> = vec![
        ("AWS_LAMBDA_RUNTIME_API", api.to_string()),
        ("AWS_LAMBDA_FUNCTION_NAME", format!("hookline-{function}")),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256".into()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
        ("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/hookline-{function}")),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "2025/01/01/[$LATEST]0123456789abcdef".into()),
        ("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand".into()),
        ("AWS_EXECUTION_ENV", "AWS_Lambda_provided.al2023".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_DEFAULT_REGION", "us-east-1".into()),
        ("AWS_ACCESS_KEY_ID", "AKIDCOLDSTART".into()),
        ("AWS_SECRET_ACCESS_KEY", "cold-start-dummy-secret".into()),
        ("AWS_SESSION_TOKEN", "cold-start-dummy-token".into()),
        ("LAMBDA_TASK_ROOT", "/var/task".into()),
        ("LAMBDA_RUNTIME_DIR", "/var/runtime".into()),
        ("TZ", ":UTC".into()),
        ("LANG", "en_US.UTF-8".into()),
        ("PATH", "/usr/local/bin:/usr/bin:/bin".into()),
        ("EVENTS_TABLE", "t".into()),
        ("SUBSCRIPTIONS_TABLE", "t".into()),
        ("SAGAS_TABLE", "t".into()),
        ("ATTEMPTS_TABLE", "t".into()),
        ("DEAD_LETTERS_TABLE", "t".into()),
        ("HEALTH_TABLE", "t".into()),
        ("AUDIT_TABLE", "t".into()),
        ("ORDER_TABLE", "t".into()),
        ("DELIVERIES_QUEUE_URL", q.into()),
        ("DELIVERIES_DLQ_URL", q.into()),
        ("RETRIES_QUEUE_URL", q.into()),
        ("RETRIES_DLQ_URL", q.into()),
        ("REQUEUE_QUEUE_URL", q.into()),
        ("REQUEUE_DLQ_URL", q.into()),
        ("INGEST_DLQ_URL", q.into()),
        ("RETENTION_DAYS", "30".into()),
    ];
    if let Ok(v) = std::env::var("RUST_LOG") {
        env.push(("RUST_LOG", v));
    }
    env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// `<dir>/<name>` (cargo's layout) or `<dir>/<name>/bootstrap` (cargo-lambda's).
fn find_binary(dir: &Path, name: &str) -> Option<PathBuf> {
    [dir.join(name), dir.join(name).join("bootstrap")].into_iter().find(|p| p.is_file())
}

/// CPU time (ms) all threads of process `pid` have run so far, from
/// `/proc/<pid>/task/*/schedstat` (ns, Linux only; `None` elsewhere).
fn cpu_ms(pid: u32) -> Option<f64> {
    let mut ns = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        ns += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(ns as f64 / 1e6)
}

/// What one cold start took, in ms.
struct Run {
    /// Spawn → first `GET /next` (wall clock).
    wall: f64,
    /// CPU time the child had used by then (all threads), if known.
    cpu: Option<f64>,
}

/// One cold start: spawn → first `/next`.
async fn one_run(
    bin: &Path,
    env: &[(String, String)],
    slot: &Slot,
    timeout: Duration,
    log: &Path,
) -> Result<Run, String> {
    let (tx, mut rx) = oneshot::channel();
    *slot.lock().unwrap() = Some(tx);
    let out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(bin);
    cmd.env_clear().envs(env.iter().map(|(k, v)| (k, v))).stdin(Stdio::null()).stdout(out).stderr(err);
    if let Some(dir) = bin.parent() {
        cmd.current_dir(dir);
    }

    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("spawn {}: {e}", bin.display()))?;
    let mut poll = tokio::time::interval(Duration::from_millis(2));
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let result = loop {
        tokio::select! {
            biased;
            seen = &mut rx => break match seen {
                // The child now waits on the held /next, so its CPU time is
                // (nearly) that of its init.
                Ok(Seen::Next(at)) => Ok(Run { wall: at.duration_since(start).as_secs_f64() * 1e3, cpu: cpu_ms(child.id()) }),
                Ok(Seen::InitError(body)) => Err(format!("reported an init error: {body}")),
                Err(_) => Err("runtime API went away".to_owned()),
            },
            _ = &mut deadline => break Err(format!("no GET /next within {} ms", timeout.as_millis())),
            _ = poll.tick() => {
                if let Ok(Some(status)) = child.try_wait() {
                    // It may have asked for /next just before exiting.
                    if let Ok(Seen::Next(at)) = rx.try_recv() {
                        break Ok(Run { wall: at.duration_since(start).as_secs_f64() * 1e3, cpu: None });
                    }
                    break Err(format!("exited ({status}) before GET /next"));
                }
            }
        }
    };
    *slot.lock().unwrap() = None;
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// Nearest-rank percentile of sorted `v`.
fn pct(v: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name") || l.starts_with("Model") || l.starts_with("CPU part"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_else(|| "unknown CPU".into());
    let nproc = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{nproc} CPUs ({}), {model}, Linux {}", std::env::consts::ARCH, kernel.trim())
}

/// Whether the ELF file at `p` still has a symbol table (not stripped).
fn has_symtab(p: &Path) -> Option<bool> {
    let b = std::fs::read(p).ok()?;
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        return None; // only 64-bit little-endian ELF
    }
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize;
    let (shoff, shentsize, shnum) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c));
    Some((0..shnum).any(|i| {
        let o = shoff + i * shentsize;
        o + 8 <= b.len() && u32_at(o + 4) == 2 // SHT_SYMTAB
    }))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = args()?;
    let names: Vec<&str> = match &a.only {
        Some(only) => {
            for n in only {
                anyhow::ensure!(FUNCTIONS.contains(&n.as_str()), "unknown function {n}; one of {FUNCTIONS:?}");
            }
            FUNCTIONS.iter().copied().filter(|f| only.iter().any(|n| n == f)).collect()
        }
        None => FUNCTIONS.to_vec(),
    };

    println!("cold start: spawn → first GET /2018-06-01/runtime/invocation/next, {} runs each", a.runs);
    println!("machine:    {}", machine());
    println!(
        "binaries:   {} ({} build for this host; deployment builds arm64 with cargo-lambda)",
        a.dir.display(),
        std::env::consts::ARCH
    );
    if !a.extra_env.is_empty() {
        let kv: Vec<String> = a.extra_env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("extra env:  {}", kv.join(" "));
    }
    println!();

    let slot: Slot = Arc::new(Mutex::new(None));
    let api = runtime_api(slot.clone()).await?;
    let log_dir = std::env::temp_dir();

    println!(
        "{:<10} {:>8} {:>8} {:>5} {:>9} {:>8} {:>8} {:>8} {:>8}  verdict",
        "function", "size MB", "symbols", "runs", "first ms", "p50 ms", "p90 ms", "max ms", "cpu p50"
    );
    let mut failures: HashMap<&str, String> = HashMap::new();
    for name in &names {
        let Some(bin) = find_binary(&a.dir, name) else {
            println!("{name:<10} {:>8}", "missing");
            failures.insert(name, format!("no {0}/{name} nor {0}/{name}/bootstrap", a.dir.display()));
            continue;
        };
        let size_mb = std::fs::metadata(&bin)?.len() as f64 / 1_000_000.0;
        let symbols = match has_symtab(&bin) {
            Some(true) => "yes",
            Some(false) => "stripped",
            None => "?",
        };
        let mut env = lambda_env(name, api);
        for (k, v) in &a.extra_env {
            env.retain(|(e, _)| e != k);
            env.push((k.clone(), v.clone()));
        }
        let log = log_dir.join(format!("cold_start-{}-{name}.log", std::process::id()));
        let mut times = Vec::with_capacity(a.runs);
        let mut cpus = Vec::with_capacity(a.runs);
        for _ in 0..a.runs {
            match one_run(&bin, &env, &slot, a.timeout, &log).await {
                Ok(run) => {
                    times.push(run.wall);
                    cpus.extend(run.cpu);
                }
                Err(e) => {
                    let output = std::fs::read_to_string(&log).unwrap_or_default();
                    let tail: String = output
                        .lines()
                        .rev()
                        .take(20)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect::<Vec<_>>()
                        .join("\n");
                    failures.insert(name, format!("{e}\n--- output ---\n{tail}"));
                    break;
                }
            }
        }
        let _ = std::fs::remove_file(&log);
        if failures.contains_key(name) {
            println!("{name:<10} {size_mb:>8.1} {symbols:>8} {:>5} {:>9}", times.len(), "FAILED");
            continue;
        }
        let first = times[0];
        let mut sorted = times.clone();
        sorted.sort_by(f64::total_cmp);
        let (p50, p90, max) = (pct(&sorted, 50.0), pct(&sorted, 90.0), sorted[sorted.len() - 1]);
        cpus.sort_by(f64::total_cmp);
        let cpu = if cpus.is_empty() { "?".to_owned() } else { format!("{:.1}", pct(&cpus, 50.0)) };
        let verdict = match (p50 <= INIT_TARGET_MS, size_mb <= SIZE_TARGET_MB) {
            (true, true) => "ok".to_owned(),
            (i, s) => [(!i).then_some("init > 20 ms"), (!s).then_some("size > 8 MB")]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(", "),
        };
        println!(
            "{name:<10} {size_mb:>8.1} {symbols:>8} {:>5} {first:>9.1} {p50:>8.1} {p90:>8.1} {max:>8.1} {cpu:>8}  {verdict}",
            times.len()
        );
    }
    println!();
    println!(
        "targets: init p50 ≤ {INIT_TARGET_MS} ms, size ≤ {SIZE_TARGET_MB} MB (MB = 10^6 bytes, the stricter reading)"
    );
    println!("cpu p50: CPU time (all threads) the child had used at its first /next; Lambda gives a");
    println!("         256 MB function a share of one vCPU, so CPU-bound init stretches there");

    if !failures.is_empty() {
        for name in &names {
            if let Some(f) = failures.get(name) {
                eprintln!("\n{name}: {f}");
            }
        }
        std::process::exit(1);
    }
    Ok(())
}
