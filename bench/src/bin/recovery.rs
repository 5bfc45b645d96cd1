//! Benchmark of `hookline serve`'s start-up recovery: N accepted but
//! undelivered events on disk (default 1,000,000 of 1 KiB), as a process
//! killed right after accepting them leaves them, then `hookline serve`
//! started on that file. Prints how long until it accepts an event again
//! (a `POST /v1/events` answered 202, from the spawn), how long until the
//! whole backlog is delivered, every event's deliveries (none lost, and how
//! many arrived twice), the process's CPU time and peak RSS, and the size
//! of the database.
//!
//! The backlog is written through the same path an accepted event takes
//! (`shared::stage::ingest::ingest` on the SQLite backend, each call
//! answered once its commit is on disk), in this process, with the
//! pipeline not running: what is on disk is exactly what `kill -9` right
//! after the 202s leaves. The subscription (one, verified, to a local
//! receiver) is made first through a `hookline serve` that is then stopped.
//!
//! `cargo build --release -p hookline && cargo run --release -p hookline-bench --bin recovery -- --events 1000000`
//! (`make bench-recovery ARGS="--events 1000000"`; `--bin PATH` for another
//! build, `--dir PATH` to keep the database somewhere with room: about
//! 3 GB per million events).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use serde_json::json;

#[path = "../process.rs"]
mod process;
#[path = "../serve.rs"]
mod serve;
use process::{cpu_seconds, status_kb};

struct Args {
    events: usize,
    bin: Option<String>,
    dir: Option<PathBuf>,
}

fn args() -> Args {
    let mut a = Args { events: 1_000_000, bin: None, dir: None };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_default();
        match k.as_str() {
            "--events" => a.events = v.parse().expect("--events N"),
            "--bin" => a.bin = Some(v),
            "--dir" => a.dir = Some(PathBuf::from(v)),
            _ => panic!("unknown argument {k} {v}; use --events N --bin PATH --dir PATH"),
        }
    }
    a
}

/// Deliveries per event sequence number, as the receiver counted them.
type Counts = Arc<Mutex<HashMap<u64, u32>>>;

const KEY: &str = "bench-key";

fn spawn_serve(bin: &str, db: &Path, port: u16) -> std::io::Result<std::process::Child> {
    std::process::Command::new(bin)
        .args(["serve", "--dev", "--listen", &format!("127.0.0.1:{port}"), "--db"])
        .arg(db)
        .env("HOOKLINE_API_KEY", KEY)
        .env("HOOKLINE_LOG", std::env::var("BENCH_LOG").unwrap_or_else(|_| "warn".into()))
        .stdout(std::process::Stdio::null())
        .spawn()
}

/// Polls `POST /v1/events` with `body` until it is answered 202.
async fn accepted(client: &reqwest::Client, base: &str, body: &str) -> anyhow::Result<()> {
    for _ in 0..120_000 {
        if let Ok(r) = client.post(format!("{base}/v1/events")).bearer_auth(KEY).body(body.to_string()).send().await {
            anyhow::ensure!(r.status().as_u16() == 202, "ingest answered {}", r.status());
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    anyhow::bail!("hookline serve never accepted an event")
}

fn event(seq: u64, filler: &str) -> String {
    format!(r#"{{"id":"rec-{seq}","type":"bench.event","data":{{"seq":{seq},"pad":"{filler}"}}}}"#)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = args();
    let bin = serve::hookline_binary(a.bin.as_deref())?;

    // The receiver: counts each event's deliveries.
    let counts: Counts = Arc::new(Mutex::new(HashMap::with_capacity(a.events + 1)));
    let rx = counts.clone();
    let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
        let rx = rx.clone();
        async move {
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            if headers.get("hookline-event-type").and_then(|h| h.to_str().ok()) == Some("hookline.verification") {
                return (StatusCode::OK, axum::Json(json!({"challenge": v["challenge"]})));
            }
            if let Some(seq) = v["data"]["seq"].as_u64() {
                *rx.lock().unwrap().entry(seq).or_insert(0) += 1;
            }
            (StatusCode::OK, axum::Json(json!({})))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let recv_addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let temp = hookline_tests::server::TempDir::new("bench-recovery");
    let dir = a.dir.clone().unwrap_or_else(|| temp.0.clone());
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("recovery.db");
    anyhow::ensure!(!db.exists(), "{} exists: give an empty --dir", db.display());
    let client = reqwest::Client::builder().pool_max_idle_per_host(64).tcp_nodelay(true).build()?;

    // 1. The subscription, through a serve that is then stopped.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let base = format!("http://127.0.0.1:{port}");
    let mut first = spawn_serve(&bin, &db, port)?;
    serve::wait_until_up(&client, &base).await;
    serve::verified_subscription(&client, &base, KEY, &format!("http://{recv_addr}/hook")).await?;
    std::process::Command::new("kill").arg("-TERM").arg(first.id().to_string()).status()?;
    first.wait()?;

    // 2. The backlog: accepted, not routed (the pipeline is not running).
    let t0 = Instant::now();
    {
        let key_file = hookline_sqlite::files::default_key_file(&db);
        let (master, _) = hookline_sqlite::files::master_keys(None, &key_file)?;
        let backend = hookline_sqlite::Backend::open(&db, &master).await?;
        let h = Arc::new(shared::context::Hookline::new(
            backend.stores.clone(),
            shared::context::Config::default(),
            backend.keyring.clone(),
        ));
        let filler = Arc::new("x".repeat(1024 - 90));
        let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let n = a.events as u64;
        let mut tasks = Vec::new();
        for _ in 0..256 {
            let (h, filler, next) = (h.clone(), filler.clone(), next.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    let seq = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if seq >= n {
                        return;
                    }
                    let raw = event(seq, &filler);
                    let got = shared::stage::ingest::ingest(&h, raw.as_bytes(), None, None, None).await;
                    assert!(got.is_ok_and(|a| !a.duplicate), "event {seq} accepted");
                }
            }));
        }
        for t in tasks {
            t.await?;
        }
    }
    std::process::Command::new("sync").status()?;
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let on_disk = size(&db) + size(&db.with_extension("db-wal"));
    println!(
        "backlog           {} events accepted in {:.1} s ({:.0}/s), database {:.2} GB",
        a.events,
        t0.elapsed().as_secs_f64(),
        a.events as f64 / t0.elapsed().as_secs_f64(),
        on_disk as f64 / 1e9
    );

    // 3. hookline serve on it: accepting again, then the backlog delivered.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let base = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    let mut child = spawn_serve(&bin, &db, port)?;
    let pid = child.id();
    let filler = "x".repeat(1024 - 90);
    let marker = a.events as u64;
    accepted(&client, &base, &event(marker, &filler)).await?;
    let accepting = started.elapsed();
    println!("accepting again   {:.3} s after the spawn (a POST /v1/events answered 202)", accepting.as_secs_f64());
    let total = a.events + 1;
    let mut last_report = Instant::now();
    loop {
        let got = counts.lock().unwrap().len();
        if got >= total {
            break;
        }
        if last_report.elapsed() > Duration::from_secs(10) {
            println!(
                "  {:>6.0} s        {got} of {total} delivered ({:.0}/s so far)",
                started.elapsed().as_secs_f64(),
                got as f64 / started.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(3600), "the backlog was not delivered within an hour");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let drained = started.elapsed();
    // Late duplicates would arrive right after: give them a moment.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (unique, again) = {
        let c = counts.lock().unwrap();
        (c.len(), c.values().map(|n| u64::from(n.saturating_sub(1))).sum::<u64>())
    };
    let cpu = cpu_seconds(pid);
    let rss_mb = status_kb(pid, "VmHWM") as f64 / 1024.0;
    println!(
        "backlog delivered {:.1} s after the spawn ({:.0} deliveries/s), {unique} of {total} events, {again} delivered more than once",
        drained.as_secs_f64(),
        total as f64 / drained.as_secs_f64()
    );
    println!(
        "process           {cpu:.1} CPU s ({:.3} ms per delivery), peak RSS {rss_mb:.0} MB",
        cpu * 1000.0 / total as f64
    );
    std::process::Command::new("kill").arg("-TERM").arg(pid.to_string()).status()?;
    child.wait()?;
    anyhow::ensure!(unique == total, "{} events were not delivered", total - unique);
    Ok(())
}
