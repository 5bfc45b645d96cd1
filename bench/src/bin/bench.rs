//! Benchmark of `hookline serve`: N events of 1 KiB from concurrent producers
//! to one subscription on a local receiver. Prints ingest requests/s,
//! end-to-end deliveries/s and end-to-end latency (producer send → receiver
//! arrival) p50/p99. Every event is fsync'd before its 202, as always.
//!
//! `cargo build --release -p hookline && cargo run --release -p hookline-bench --bin bench -- --events 20000`
//! (`make bench ARGS="--events 20000"`). `--rate R` paces producers at R
//! events/s in all (open loop) instead of sending as fast as they can.
//!
//! `--extra-subscriptions N` first stores N real subscriptions that match no
//! bench event (half tenant-scoped to `bench.*` for other tenants, half
//! global to other types), straight into the database file through the
//! SQLite store port before `hookline serve` starts on it, so routing has to
//! find the one matching subscription among them. It also prints the
//! process's CPU time per delivered event and its peak RSS (`VmHWM`).
//!
//! `--neighbour hang` adds a second subscription to the same events whose
//! endpoint answers after 20 s (so every attempt times out at serve's 15 s);
//! `--neighbour fail` one that always answers 500. The figures are the
//! healthy subscription's; the neighbour's request count is printed too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use hookline_tests::server::TempDir;

#[path = "../process.rs"]
mod process;
#[path = "../serve.rs"]
mod serve;
use process::{cpu_seconds, status_kb};
use serde_json::json;

struct Args {
    events: usize,
    producers: usize,
    rate: Option<f64>,
    bin: Option<String>,
    extra_subscriptions: usize,
    neighbour: Option<String>,
}

fn args() -> Args {
    let mut a = Args { events: 20_000, producers: 8, rate: None, bin: None, extra_subscriptions: 0, neighbour: None };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_default();
        match k.as_str() {
            "--events" => a.events = v.parse().expect("--events N"),
            "--producers" => a.producers = v.parse().expect("--producers N"),
            "--rate" => a.rate = Some(v.parse().expect("--rate events/s")),
            "--bin" => a.bin = Some(v),
            "--extra-subscriptions" => a.extra_subscriptions = v.parse().expect("--extra-subscriptions N"),
            "--neighbour" if v == "hang" || v == "fail" => a.neighbour = Some(v),
            _ => {
                panic!("unknown argument {k} {v}; use --events N --producers N --rate R --bin PATH --extra-subscriptions N --neighbour hang|fail")
            }
        }
    }
    a
}

type Arrivals = Arc<Mutex<HashMap<u64, Instant>>>;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = args();
    let bin = serve::hookline_binary(a.bin.as_deref())?;

    // The receiver: records when each event arrived.
    let origin = Instant::now();
    let arrivals: Arrivals = Arc::new(Mutex::new(HashMap::with_capacity(a.events)));
    let rx = arrivals.clone();
    let neighbour_requests = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (nb, nb_mode) = (neighbour_requests.clone(), a.neighbour.clone());
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
        let (rx, nb, nb_mode) = (rx.clone(), nb.clone(), nb_mode.clone());
        async move {
            let now = Instant::now();
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            if headers.get("hookline-event-type").and_then(|h| h.to_str().ok()) == Some("hookline.verification") {
                return (StatusCode::OK, axum::Json(json!({"challenge": v["challenge"]})));
            }
            if uri.path() == "/neighbour" {
                nb.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if nb_mode.as_deref() == Some("hang") {
                    tokio::time::sleep(Duration::from_secs(20)).await;
                    return (StatusCode::OK, axum::Json(json!({})));
                }
                return (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(json!({})));
            }
            if let Some(seq) = v["data"]["seq"].as_u64() {
                rx.lock().unwrap().entry(seq).or_insert(now);
            }
            (StatusCode::OK, axum::Json(json!({})))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let recv_addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    // hookline serve on a fresh database (holding the extra subscriptions).
    let dir = TempDir::new("bench");
    let db = dir.0.join("bench.db");
    if a.extra_subscriptions > 0 {
        let t0 = Instant::now();
        seed_subscriptions(&db, a.extra_subscriptions).await?;
        // Write the seeded file out now, so its writeback does not compete
        // with the run's fsyncs.
        std::process::Command::new("sync").status()?;
        let size =
            std::fs::metadata(&db)?.len() + std::fs::metadata(db.with_extension("db-wal")).map_or(0, |m| m.len());
        println!(
            "extra subs        {} stored in {:.1} s (database {:.0} MB)",
            a.extra_subscriptions,
            t0.elapsed().as_secs_f64(),
            size as f64 / 1e6
        );
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let key = "bench-key";
    let mut child = std::process::Command::new(&bin)
        .args(["serve", "--dev", "--listen", &format!("127.0.0.1:{port}"), "--db"])
        .arg(&db)
        .env("HOOKLINE_API_KEY", key)
        .env("HOOKLINE_LOG", std::env::var("BENCH_LOG").unwrap_or_else(|_| "warn".into()))
        .stdout(std::process::Stdio::null())
        .spawn()?;
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder().pool_max_idle_per_host(64).tcp_nodelay(true).build()?;
    serve::wait_until_up(&client, &base).await;
    serve::verified_subscription(&client, &base, key, &format!("http://{recv_addr}/hook")).await?;
    if a.neighbour.is_some() {
        serve::verified_subscription(&client, &base, key, &format!("http://{recv_addr}/neighbour")).await?;
    }

    // Start-up work (the re-verification pass reads every subscription)
    // must not count: wait until the process is idle.
    let pid = child.id();
    wait_idle(pid).await;
    let cpu_before = cpu_seconds(pid);

    // Producers.
    let filler = "x".repeat(1024 - 90);
    let sent: Arc<Mutex<HashMap<u64, Instant>>> = Arc::new(Mutex::new(HashMap::with_capacity(a.events)));
    let start = Instant::now();
    let per = a.events / a.producers;
    let interval = a.rate.map(|r| Duration::from_secs_f64(a.producers as f64 / r));
    let mut tasks = Vec::new();
    for p in 0..a.producers {
        let (client, base, sent, filler) = (client.clone(), base.clone(), sent.clone(), filler.clone());
        tasks.push(tokio::spawn(async move {
            let mut tick = interval.map(tokio::time::interval);
            for i in 0..per {
                if let Some(t) = tick.as_mut() {
                    t.tick().await;
                }
                let seq = (p * per + i) as u64;
                let body =
                    format!(r#"{{"id":"bench-{seq}","type":"bench.event","data":{{"seq":{seq},"pad":"{filler}"}}}}"#);
                let t0 = Instant::now();
                sent.lock().unwrap().insert(seq, t0);
                let res =
                    client.post(format!("{base}/v1/events")).bearer_auth(key).body(body).send().await.expect("ingest");
                assert_eq!(res.status().as_u16(), 202);
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let ingest_secs = start.elapsed().as_secs_f64();
    let total = per * a.producers;
    let deadline = Instant::now() + Duration::from_secs(120);
    while arrivals.lock().unwrap().len() < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let arrivals = arrivals.lock().unwrap().clone();
    let sent = sent.lock().unwrap().clone();
    let cpu = cpu_seconds(pid) - cpu_before;
    if std::env::var_os("BENCH_METRICS").is_some() {
        let m = client.get(format!("{base}/metrics")).bearer_auth(key).send().await?.text().await?;
        for l in m.lines().filter(|l| l.starts_with("hookline_deliveries_total") || l.starts_with("hookline_breakers"))
        {
            println!("metric            {l}");
        }
    }
    let peak_rss_kb = status_kb(pid, "VmHWM");
    let _ = child.kill();
    let _ = child.wait();
    anyhow::ensure!(arrivals.len() == total, "only {} of {total} events delivered", arrivals.len());
    let last = arrivals.values().max().unwrap();
    let e2e_secs = last.duration_since(start).as_secs_f64();
    let mut lat: Vec<f64> = arrivals.iter().map(|(s, at)| at.duration_since(sent[s]).as_secs_f64() * 1000.0).collect();
    lat.sort_by(|x, y| x.partial_cmp(y).unwrap());
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    let _ = origin;
    println!(
        "events            {total} x 1 KiB, {} producers{}",
        a.producers,
        a.rate.map(|r| format!(", paced at {r} events/s")).unwrap_or_default()
    );
    println!("ingest            {:.0} requests/s ({ingest_secs:.2} s)", total as f64 / ingest_secs);
    println!(
        "end-to-end        {:.0} deliveries/s ({e2e_secs:.2} s from first send to last arrival)",
        total as f64 / e2e_secs
    );
    println!("latency p50       {:.2} ms", pct(0.50));
    println!("latency p99       {:.2} ms", pct(0.99));
    println!("latency max       {:.2} ms", lat[lat.len() - 1]);
    println!(
        "hookline CPU      {:.3} ms per delivered event ({cpu:.2} s user+system for ingest and pipeline)",
        cpu * 1000.0 / total as f64
    );
    println!("hookline peak RSS {:.1} MB (VmHWM)", peak_rss_kb as f64 / 1024.0);
    if let Some(mode) = &a.neighbour {
        println!(
            "neighbour ({mode})   {} requests to it during the run (the figures above are the healthy subscription's)",
            neighbour_requests.load(std::sync::atomic::Ordering::Relaxed)
        );
    }
    Ok(())
}

/// Stores `n` subscriptions that no bench event matches, through the
/// SQLite store port (so with their routing index rows, exactly as the API
/// would), 1,024 creates in flight (the writer commits them in groups).
/// Even ones are scoped to a tenant (`tenant-<i>`, pattern `bench.*`: the
/// bench events have no tenant); odd ones are global, to other types
/// (`other<i>.*` and `bench.created.v<i>`).
async fn seed_subscriptions(db: &std::path::Path, n: usize) -> anyhow::Result<()> {
    // The key file `hookline serve` reads next to the database, so the
    // server started on it afterwards opens these subscriptions' secrets.
    let key_file = hookline_sqlite::files::default_key_file(db);
    let (master, _) = hookline_sqlite::files::master_keys(None, &key_file)?;
    let backend = hookline_sqlite::Backend::open(db, &master).await?;
    let store = backend.stores.subscriptions.clone();
    let secret = shared::signing::Secret::generate();
    let now = chrono::Utc::now();
    let make = |i: usize| -> anyhow::Result<shared::subscription::Subscription> {
        let (tenant, types) = if i.is_multiple_of(2) {
            (json!(format!("tenant-{i}")), json!(["bench.*"]))
        } else {
            (json!(null), json!([format!("other{i}.*"), format!("bench.created.v{i}")]))
        };
        // From JSON, so fields with defaults can be added to the record freely.
        Ok(serde_json::from_value(json!({
            "id": shared::ids::new_subscription_id(),
            "callback_url": format!("https://example.com/hooks/{i}"),
            "event_types": types,
            "tenant_id": tenant,
            "description": null,
            "headers": {},
            "retry_policy": shared::retry::RetryPolicy::default(),
            "payload_format": "original",
            "active": true,
            "verified": true,
            "verification_error": null,
            "signing_keys": [{"secret": secret.expose(), "expires_at": null}],
            "created_at": now,
            "updated_at": now,
            "version": 1,
        }))?)
    };
    for start in (0..n).step_by(20_000) {
        let subs = (start..n.min(start + 20_000)).map(make).collect::<anyhow::Result<Vec<_>>>()?;
        let calls = subs.iter().map(|s| store.create(s)).collect();
        for r in shared::bounds::all_bounded(calls, 1024).await {
            r?;
        }
    }
    Ok(())
}

/// Waits until `pid` used less than 2 % of a core over half a second (at
/// most 5 minutes).
async fn wait_idle(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut last = cpu_seconds(pid);
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = cpu_seconds(pid);
        if now - last < 0.01 {
            return;
        }
        last = now;
    }
}
