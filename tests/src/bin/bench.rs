//! Benchmark of `hookline serve`: N events of 1 KiB from concurrent producers
//! to one subscription on a local receiver. Prints ingest requests/s,
//! end-to-end deliveries/s and end-to-end latency (producer send → receiver
//! arrival) p50/p99. Every event is fsync'd before its 202, as always.
//!
//! `cargo build --release -p hookline && cargo run --release -p hookline-tests --bin bench -- --events 20000`
//! (`make bench ARGS="--events 20000"`). `--rate R` paces producers at R
//! events/s in all (open loop) instead of sending as fast as they can.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use hookline_tests::server::TempDir;
use serde_json::json;

struct Args {
    events: usize,
    producers: usize,
    rate: Option<f64>,
    bin: Option<String>,
}

fn args() -> Args {
    let mut a = Args { events: 20_000, producers: 8, rate: None, bin: None };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_default();
        match k.as_str() {
            "--events" => a.events = v.parse().expect("--events N"),
            "--producers" => a.producers = v.parse().expect("--producers N"),
            "--rate" => a.rate = Some(v.parse().expect("--rate events/s")),
            "--bin" => a.bin = Some(v),
            _ => panic!("unknown argument {k}; use --events N --producers N --rate R --bin PATH"),
        }
    }
    a
}

type Arrivals = Arc<Mutex<HashMap<u64, Instant>>>;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = args();
    let bin = a.bin.clone().unwrap_or_else(|| {
        let exe = std::env::current_exe().unwrap();
        exe.with_file_name("hookline").display().to_string()
    });
    anyhow::ensure!(std::path::Path::new(&bin).exists(), "{bin} missing: cargo build --release -p hookline");

    // The receiver: records when each event arrived.
    let origin = Instant::now();
    let arrivals: Arrivals = Arc::new(Mutex::new(HashMap::with_capacity(a.events)));
    let rx = arrivals.clone();
    let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
        let rx = rx.clone();
        async move {
            let now = Instant::now();
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            if headers.get("hookline-event-type").and_then(|h| h.to_str().ok()) == Some("hookline.verification") {
                return (StatusCode::OK, axum::Json(json!({"challenge": v["challenge"]})));
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

    // hookline serve on a fresh database.
    let dir = TempDir::new("bench");
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let key = "bench-key";
    let mut child = std::process::Command::new(&bin)
        .args(["serve", "--dev", "--listen", &format!("127.0.0.1:{port}"), "--db"])
        .arg(dir.0.join("bench.db"))
        .env("HOOKLINE_API_KEY", key)
        .env("HOOKLINE_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()?;
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder().pool_max_idle_per_host(64).tcp_nodelay(true).build()?;
    for _ in 0..200 {
        if client.get(format!("{base}/healthz")).send().await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let sub: serde_json::Value = client
        .post(format!("{base}/v1/subscriptions"))
        .bearer_auth(key)
        .json(&json!({"callback_url": format!("http://{recv_addr}/hook"), "event_types": ["bench.*"]}))
        .send()
        .await?
        .json()
        .await?;
    let sub_id = sub["id"].as_str().expect("subscription created").to_string();
    loop {
        let s: serde_json::Value =
            client.get(format!("{base}/v1/subscriptions/{sub_id}")).bearer_auth(key).send().await?.json().await?;
        if s["verified"] == true {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

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
    Ok(())
}
