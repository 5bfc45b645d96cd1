//! Benchmark of bounded storage in `hookline serve`: N events of 1 KiB at a
//! steady rate to one subscription on a local receiver, with `--retention`
//! short enough that the purge runs during the run. Every `--sample`
//! seconds it prints the database file size (and its -wal), SQLite's page
//! and free-page counts (read-only, beside the running process), deliveries
//! per second and end-to-end p99 in that window, and the rows purged so far.
//! At the end: whether the file stopped growing once the purge started
//! (flat within 10% from the first sample after the retention to the end)
//! and deliveries/s before and while purging.
//!
//! `cargo build --release -p hookline && cargo run --release -p hookline-bench --bin retention -- --events 1000000 --rate 3000 --retention 5m`
//! (`make bench-retention ARGS="…"`). `--retention none` runs without
//! purging (serve's default retention, 30 days), the comparison run.
//! Options: `--producers N` (8), `--sample SECS` (30), `--bin PATH`,
//! `--serve-args "..."` (extra flags of `hookline serve`). serve logs at
//! `HOOKLINE_LOG` (default warn; `warn,hookline_sqlite::purge=debug` shows
//! each purge batch and how long it held the writer).

#[path = "../serve.rs"]
mod serve;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use hookline_tests::server::TempDir;
use serde_json::json;

struct Args {
    events: usize,
    rate: f64,
    retention: Option<String>,
    producers: usize,
    sample: Duration,
    bin: Option<String>,
    serve_args: Vec<String>,
}

fn args() -> Args {
    let mut a = Args {
        events: 1_000_000,
        rate: 3000.0,
        retention: Some("5m".into()),
        producers: 8,
        sample: Duration::from_secs(30),
        bin: None,
        serve_args: vec![],
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_default();
        match k.as_str() {
            "--events" => a.events = v.parse().expect("--events N"),
            "--rate" => a.rate = v.parse().expect("--rate events/s"),
            "--retention" => a.retention = (v != "none").then_some(v),
            "--producers" => a.producers = v.parse().expect("--producers N"),
            "--sample" => a.sample = Duration::from_secs_f64(v.parse().expect("--sample SECS")),
            "--bin" => a.bin = Some(v),
            "--serve-args" => a.serve_args = v.split_whitespace().map(str::to_string).collect(),
            _ => panic!("unknown argument {k}; use --events N --rate R --retention D|none --producers N --sample SECS --bin PATH --serve-args \"...\""),
        }
    }
    a
}

/// Deliveries seen by the receiver since the last sample: count and
/// end-to-end latencies (µs), read from the send time in each event.
#[derive(Default)]
struct Window {
    latencies: Vec<u64>,
}

/// One printed sample.
struct Sample {
    at: f64,
    bytes: u64,
    per_sec: f64,
    /// Events stored (accepted, not yet purged).
    live: u64,
}

fn file_len(p: &std::path::Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// (page_count, freelist_count, page_size), read-only.
fn pages(db: &std::path::Path) -> Option<(i64, i64, i64)> {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
    c.busy_timeout(Duration::from_secs(2)).ok()?;
    let q = |sql: &str| c.query_row(sql, [], |r| r.get::<_, i64>(0)).ok();
    Some((q("PRAGMA page_count")?, q("PRAGMA freelist_count")?, q("PRAGMA page_size")?))
}

async fn purged_events(client: &reqwest::Client, base: &str, key: &str) -> u64 {
    let Ok(r) = client.get(format!("{base}/metrics")).bearer_auth(key).send().await else { return 0 };
    let text = r.text().await.unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("hookline_purged_total{table=\"events\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = args();
    let bin = serve::hookline_binary(a.bin.as_deref())?;
    let retention_secs = match &a.retention {
        Some(r) => Some(
            shared::duration::parse_duration(r).map_err(|e| anyhow::anyhow!("--retention: {e}"))?.num_milliseconds()
                as f64
                / 1000.0,
        ),
        None => None,
    };

    // The receiver: deliveries and their end-to-end latency.
    let origin = Instant::now();
    let delivered = Arc::new(AtomicU64::new(0));
    let window = Arc::new(Mutex::new(Window::default()));
    let (d, w) = (delivered.clone(), window.clone());
    let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
        let (d, w) = (d.clone(), w.clone());
        async move {
            let now = origin.elapsed().as_micros() as u64;
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            if headers.get("hookline-event-type").and_then(|h| h.to_str().ok()) == Some("hookline.verification") {
                return (StatusCode::OK, axum::Json(json!({"challenge": v["challenge"]})));
            }
            if headers.get("hookline-attempt").and_then(|h| h.to_str().ok()) == Some("1") {
                d.fetch_add(1, Relaxed);
                if let Some(t) = v["data"]["t"].as_u64() {
                    w.lock().unwrap().latencies.push(now.saturating_sub(t));
                }
            }
            (StatusCode::OK, axum::Json(json!({})))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let recv_addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    // hookline serve on a fresh database.
    let dir = TempDir::new("retention-bench");
    let db = dir.0.join("bench.db");
    let wal = dir.0.join("bench.db-wal");
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let key = "bench-key";
    let mut cmd = std::process::Command::new(&bin);
    cmd.args(["serve", "--dev", "--listen", &format!("127.0.0.1:{port}"), "--db"]).arg(&db);
    if let Some(r) = &a.retention {
        cmd.args(["--retention", r]);
    }
    let mut child = cmd
        .args(&a.serve_args)
        .env("HOOKLINE_API_KEY", key)
        .env("HOOKLINE_LOG", std::env::var("HOOKLINE_LOG").unwrap_or_else(|_| "warn".into()))
        .stdout(std::process::Stdio::null())
        .spawn()?;
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder().pool_max_idle_per_host(64).tcp_nodelay(true).build()?;
    serve::wait_until_up(&client, &base).await;
    serve::verified_subscription(&client, &base, key, &format!("http://{recv_addr}/hook")).await?;

    // Producers, paced.
    let sent = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let per = a.events / a.producers;
    let total = (per * a.producers) as u64;
    let interval = Duration::from_secs_f64(a.producers as f64 / a.rate);
    let filler = "x".repeat(1024 - 110);
    let start = Instant::now();
    let mut producers = Vec::new();
    for p in 0..a.producers {
        let (client, base, sent, failed, filler) =
            (client.clone(), base.clone(), sent.clone(), failed.clone(), filler.clone());
        producers.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            for i in 0..per {
                tick.tick().await;
                let seq = p * per + i;
                let t = origin.elapsed().as_micros() as u64;
                let body = format!(
                    r#"{{"id":"ret-{seq}","type":"bench.retention","data":{{"seq":{seq},"t":{t},"pad":"{filler}"}}}}"#
                );
                match client.post(format!("{base}/v1/events")).bearer_auth(key).body(body).send().await {
                    Ok(r) if r.status().as_u16() == 202 => {
                        sent.fetch_add(1, Relaxed);
                    }
                    _ => {
                        failed.fetch_add(1, Relaxed);
                    }
                }
            }
        }));
    }

    println!(
        "{} events x 1 KiB at {}/s, {} producers, retention {}",
        total,
        a.rate,
        a.producers,
        a.retention.as_deref().unwrap_or("none (30d default: nothing is purged)")
    );
    println!(
        "{:>6} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9} {:>8} {:>10} {:>9} {:>8}",
        "t (s)",
        "sent",
        "delivered",
        "deliv/s",
        "p99 ms",
        "db MiB",
        "wal MiB",
        "total MiB",
        "free pg",
        "purged ev",
        "live ev",
        "KiB/live"
    );
    let mut samples: Vec<Sample> = Vec::new();
    let mut last_delivered = 0;
    let mut last_at = start.elapsed().as_secs_f64();
    let deadline_after_ingest = Duration::from_secs(120);
    let mut ingest_done: Option<Instant> = None;
    loop {
        let next = start + a.sample * (samples.len() as u32 + 1);
        let finished = loop {
            let done = delivered.load(Relaxed) >= total && sent.load(Relaxed) + failed.load(Relaxed) >= total;
            if done || Instant::now() >= next {
                break done;
            }
            if ingest_done.is_none() && sent.load(Relaxed) + failed.load(Relaxed) >= total {
                ingest_done = Some(Instant::now());
            }
            if ingest_done.is_some_and(|t| t.elapsed() > deadline_after_ingest) {
                break true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let at = start.elapsed().as_secs_f64();
        let d = delivered.load(Relaxed);
        let per_sec = (d - last_delivered) as f64 / (at - last_at).max(1e-9);
        let mut lat = std::mem::take(&mut window.lock().unwrap().latencies);
        lat.sort_unstable();
        let p99 = lat
            .get(((lat.len() as f64 * 0.99) as usize).min(lat.len().saturating_sub(1)))
            .map_or(0.0, |v| *v as f64 / 1000.0);
        let (db_len, wal_len) = (file_len(&db), file_len(&wal));
        let free = pages(&db).map(|(_, f, _)| f).unwrap_or(-1);
        let purged = purged_events(&client, &base, key).await;
        let live = sent.load(Relaxed).saturating_sub(purged);
        let per_live = (db_len + wal_len) as f64 / 1024.0 / live.max(1) as f64;
        println!(
            "{at:>6.0} {:>9} {d:>9} {per_sec:>9.0} {p99:>8.2} {:>9.1} {:>9.1} {:>9.1} {free:>8} {purged:>10} {live:>9} {per_live:>8.2}",
            sent.load(Relaxed),
            mib(db_len),
            mib(wal_len),
            mib(db_len + wal_len)
        );
        samples.push(Sample { at, bytes: db_len + wal_len, per_sec, live });
        last_delivered = d;
        last_at = at;
        if finished {
            break;
        }
    }
    for p in producers {
        p.await?;
    }
    let _ = child.kill();
    let _ = child.wait();

    let secs = start.elapsed().as_secs_f64();
    println!();
    println!(
        "delivered {} of {total} ({} failed posts) in {secs:.0} s: {:.0} deliveries/s",
        delivered.load(Relaxed),
        failed.load(Relaxed),
        delivered.load(Relaxed) as f64 / last_at.max(1e-9)
    );
    // Full windows only (the last one may be partial).
    let full: Vec<&Sample> = samples.iter().filter(|s| s.per_sec > 0.0).collect();
    let avg = |xs: &[&Sample]| xs.iter().map(|s| s.per_sec).sum::<f64>() / xs.len().max(1) as f64;
    // The file can grow until the first events are purged: retention plus
    // one purge interval (5 s by default), then one sample.
    let split = retention_secs.unwrap_or(300.0) + 5.0 + a.sample.as_secs_f64();
    let (before, after): (Vec<&Sample>, Vec<&Sample>) =
        full.iter().take(full.len().saturating_sub(1)).partition(|s| s.at < split);
    println!(
        "deliveries/s       before t={split:.0} s: {:.0}; from then on (purging, if a retention is set): {:.0} ({} windows)",
        avg(&before),
        avg(&after),
        after.len()
    );
    if retention_secs.is_some() {
        let from: Vec<&Sample> = samples.iter().filter(|s| s.at >= split).collect();
        match from.first() {
            Some(first) => {
                let max = from.iter().map(|s| s.bytes).max().unwrap_or(0);
                let end = samples.last().map_or(0, |s| s.bytes);
                let growth = (max as f64 / first.bytes.max(1) as f64 - 1.0) * 100.0;
                println!(
                    "file size          at t={:.0} s: {:.1} MiB; largest after: {:.1} MiB; at the end: {:.1} MiB; growth after the retention {growth:+.1}% (target: within 10%): {}",
                    first.at,
                    mib(first.bytes),
                    mib(max),
                    mib(end),
                    if growth <= 10.0 { "flat" } else { "STILL GROWING" }
                );
            }
            None => {
                println!("file size          the run ended before t={split:.0} s: run more events to see the plateau")
            }
        }
        // The file holds the events within the retention: at a steady rate
        // its size is flat; when the rate varies (a loaded machine), the size
        // per stored event shows whether freed pages are reused.
        if let (Some(first), Some(last)) = (from.first(), from.last()) {
            let per = |s: &Sample| s.bytes as f64 / 1024.0 / s.live.max(1) as f64;
            let change = (per(last) / per(first) - 1.0) * 100.0;
            println!(
                "size per event     stored: {:.2} KiB at t={:.0} s ({} events), {:.2} KiB at the end ({} events): {change:+.1}%",
                per(first),
                first.at,
                first.live,
                per(last),
                last.live
            );
        }
    }
    Ok(())
}
