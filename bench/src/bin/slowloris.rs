//! Benchmark of `hookline serve` under slow and idle clients: ingest latency
//! with N hostile connections held open (a third idle, a third sending their
//! header one byte every few seconds, a third sending their body that way;
//! each one the server closes is opened again at once), against the same
//! measurement with none. Every event is also delivered to a local receiver.
//!
//! `cargo build --release -p hookline && cargo run --release -p hookline-bench --bin slowloris -- --connections 2000 --posts 2000`
//! (`make bench-slowloris ARGS="--connections 2000 --posts 2000"`).
//! Options: `--producers N` (4), `--rate R` (posts/s in all, 100: the
//! measurement then spans at least one header timeout of churn; 0 = as fast
//! as they go), `--trickle SECS` (3), `--bin PATH`, `--serve-args "..."`
//! (extra flags of `hookline serve`, e.g. "--max-connections 1000").
//! `SLOWLORIS_VERBOSE=1` prints why each failed post failed.

#[path = "../serve.rs"]
mod serve;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use hookline_tests::server::TempDir;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Args {
    connections: usize,
    posts: usize,
    producers: usize,
    rate: f64,
    trickle: Duration,
    bin: Option<String>,
    serve_args: Vec<String>,
}

fn args() -> Args {
    let mut a = Args {
        connections: 2000,
        posts: 2000,
        producers: 4,
        rate: 100.0,
        trickle: Duration::from_secs(3),
        bin: None,
        serve_args: vec![],
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_default();
        match k.as_str() {
            "--connections" => a.connections = v.parse().expect("--connections N"),
            "--posts" => a.posts = v.parse().expect("--posts N"),
            "--producers" => a.producers = v.parse().expect("--producers N"),
            "--rate" => a.rate = v.parse().expect("--rate posts/s (0: unpaced)"),
            "--trickle" => a.trickle = Duration::from_secs_f64(v.parse().expect("--trickle SECS")),
            "--bin" => a.bin = Some(v),
            "--serve-args" => a.serve_args = v.split_whitespace().map(str::to_string).collect(),
            _ => panic!("unknown argument {k}; use --connections N --posts N --producers N --rate R --trickle SECS --bin PATH --serve-args \"...\""),
        }
    }
    a
}

/// What the hostile clients did.
#[derive(Default)]
struct Attack {
    open: AtomicUsize,
    closed_by_server: AtomicU64,
    refused: AtomicU64,
}

#[derive(Clone, Copy)]
enum Kind {
    Idle,
    SlowHeader,
    SlowBody,
}

/// One hostile client: holds a connection open its way; when the server
/// closes it, opens another.
async fn hostile(
    addr: String,
    kind: Kind,
    trickle: Duration,
    key: String,
    attack: Arc<Attack>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) {
    let header = b"POST /v1/events HTTP/1.1\r\nHost: hookline\r\nX-Padding: ".to_vec();
    let body_head = format!(
        "POST /v1/events HTTP/1.1\r\nHost: hookline\r\nAuthorization: Bearer {key}\r\nContent-Length: 100000\r\n\r\n"
    );
    while !stop.load(Relaxed) {
        let Ok(mut c) = TcpStream::connect(&addr).await else {
            attack.refused.fetch_add(1, Relaxed);
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        attack.open.fetch_add(1, Relaxed);
        let ok = match kind {
            Kind::Idle => true,
            Kind::SlowHeader => c.write_all(&header[..1]).await.is_ok(),
            Kind::SlowBody => c.write_all(body_head.as_bytes()).await.is_ok(),
        };
        let mut sent = 1;
        let mut buf = [0u8; 512];
        if ok {
            loop {
                tokio::select! {
                    r = c.read(&mut buf) => {
                        match r {
                            Ok(0) | Err(_) => break,
                            Ok(_) => {} // a 408/503 before the close
                        }
                    }
                    _ = tokio::time::sleep(trickle) => {
                        if stop.load(Relaxed) { break; }
                        let byte = match kind {
                            Kind::Idle => continue,
                            Kind::SlowHeader => header.get(sent).copied().unwrap_or(b'a'),
                            Kind::SlowBody => b'x',
                        };
                        sent += 1;
                        if c.write_all(&[byte]).await.is_err() { break; }
                    }
                }
            }
        }
        attack.open.fetch_sub(1, Relaxed);
        if !stop.load(Relaxed) {
            attack.closed_by_server.fetch_add(1, Relaxed);
        }
    }
}

fn percentiles(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p = |q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)];
    (p(0.5), p(0.99), v[v.len() - 1])
}

/// `posts` events from `producers` keep-alive clients, paced at `rate`/s in
/// all; returns (latencies in ms, failures).
async fn ingest(base: &str, key: &str, tag: &str, a: &Args) -> (Vec<f64>, usize) {
    let per = a.posts / a.producers;
    let interval = (a.rate > 0.0).then(|| Duration::from_secs_f64(a.producers as f64 / a.rate));
    let mut tasks = Vec::new();
    for p in 0..a.producers {
        let (base, key, tag) = (base.to_string(), key.to_string(), tag.to_string());
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::builder().tcp_nodelay(true).build().unwrap();
            let mut tick = interval.map(tokio::time::interval);
            let (mut lat, mut failed) = (Vec::with_capacity(per), 0);
            for i in 0..per {
                if let Some(t) = tick.as_mut() {
                    t.tick().await;
                }
                let body = json!({"id": format!("{tag}-{p}-{i}"), "type": "bench.slowloris", "data": {"p": p, "i": i}});
                let t0 = Instant::now();
                let res = client.post(format!("{base}/v1/events")).bearer_auth(&key).json(&body).send().await;
                match res {
                    Ok(r) if r.status().as_u16() == 202 => lat.push(t0.elapsed().as_secs_f64() * 1000.0),
                    Ok(r) => {
                        failed += 1;
                        if std::env::var_os("SLOWLORIS_VERBOSE").is_some() {
                            eprintln!("producer {p}: post {i} answered {}", r.status());
                        }
                    }
                    Err(e) => {
                        failed += 1;
                        if std::env::var_os("SLOWLORIS_VERBOSE").is_some() {
                            eprintln!("producer {p}: post {i} failed: {e:?}");
                        }
                    }
                }
            }
            (lat, failed)
        }));
    }
    let (mut lat, mut failed) = (Vec::new(), 0);
    for t in tasks {
        let (l, f) = t.await.unwrap();
        lat.extend(l);
        failed += f;
    }
    (lat, failed)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = args();
    let bin = serve::hookline_binary(a.bin.as_deref())?;

    // The receiver counts deliveries.
    let delivered = Arc::new(AtomicU64::new(0));
    let d = delivered.clone();
    let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
        let d = d.clone();
        async move {
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            if headers.get("hookline-event-type").and_then(|h| h.to_str().ok()) == Some("hookline.verification") {
                return (StatusCode::OK, axum::Json(json!({"challenge": v["challenge"]})));
            }
            d.fetch_add(1, Relaxed);
            (StatusCode::OK, axum::Json(json!({})))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let recv_addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let dir = TempDir::new("slowloris");
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let key = "bench-key";
    let mut child = std::process::Command::new(&bin)
        .args(["serve", "--dev", "--listen", &format!("127.0.0.1:{port}"), "--db"])
        .arg(dir.0.join("bench.db"))
        .args(&a.serve_args)
        .env("HOOKLINE_API_KEY", key)
        .env("HOOKLINE_LOG", std::env::var("HOOKLINE_LOG").unwrap_or_else(|_| "warn".into()))
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let banner = {
        use std::io::{BufRead, BufReader};
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut banner = String::new();
        for l in lines.by_ref() {
            let l = l?;
            if l.trim_start().starts_with("connections") {
                banner = l.trim().to_string();
                break;
            }
        }
        std::thread::spawn(move || for _ in lines {});
        banner
    };
    let base = format!("http://127.0.0.1:{port}");
    let addr = format!("127.0.0.1:{port}");
    let client = reqwest::Client::new();
    serve::wait_until_up(&client, &base).await;
    serve::verified_subscription(&client, &base, key, &format!("http://{recv_addr}/hook")).await?;

    // Baseline: no hostile clients.
    let (base_lat, base_failed) = ingest(&base, key, "quiet", &a).await;

    // The attack: open every hostile connection, then measure again.
    let attack = Arc::new(Attack::default());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut hostiles = Vec::new();
    for i in 0..a.connections {
        let kind = [Kind::Idle, Kind::SlowHeader, Kind::SlowBody][i % 3];
        hostiles.push(tokio::spawn(hostile(
            addr.clone(),
            kind,
            a.trickle,
            key.to_string(),
            attack.clone(),
            stop.clone(),
        )));
        if i % 100 == 99 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let ramp = Instant::now();
    while attack.open.load(Relaxed) < a.connections && ramp.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let open_at_start = attack.open.load(Relaxed);
    let min_open = Arc::new(Mutex::new(usize::MAX));
    let watcher = {
        let (attack, min_open) = (attack.clone(), min_open.clone());
        tokio::spawn(async move {
            loop {
                let n = attack.open.load(Relaxed);
                {
                    let mut m = min_open.lock().unwrap();
                    *m = (*m).min(n);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let started = Instant::now();
    let (lat, failed) = ingest(&base, key, "attacked", &a).await;
    let secs = started.elapsed().as_secs_f64();
    watcher.abort();
    let total = (a.posts / a.producers * a.producers * 2) as u64;
    let deadline = Instant::now() + Duration::from_secs(60);
    while delivered.load(Relaxed) < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Relaxed);
    for h in hostiles {
        h.abort();
    }
    let _ = child.kill();
    let _ = child.wait();

    let (b50, b99, bmax) = percentiles(base_lat.clone());
    let (p50, p99, max) = percentiles(lat.clone());
    let pace = if a.rate > 0.0 { format!("paced at {} posts/s", a.rate) } else { "unpaced".into() };
    println!("hookline serve    {banner}");
    println!(
        "posts             {} per run, {} keep-alive producers, {pace}",
        a.posts / a.producers * a.producers,
        a.producers
    );
    println!("baseline          p50 {b50:.2} ms  p99 {b99:.2} ms  max {bmax:.2} ms  ({} failed)", base_failed);
    println!(
        "hostile clients   {} wanted: {} open at the start, at least {} open throughout the measurement ({:.1} s); \
         a third idle, a third sending the header and a third the body one byte per {:.0} s",
        a.connections,
        open_at_start,
        *min_open.lock().unwrap(),
        secs,
        a.trickle.as_secs_f64()
    );
    println!(
        "                  {} closed by the server (timeouts, replaced at the cap) and reopened; {} connects failed",
        attack.closed_by_server.load(Relaxed),
        attack.refused.load(Relaxed)
    );
    println!("under attack      p50 {p50:.2} ms  p99 {p99:.2} ms  max {max:.2} ms  ({failed} failed)");
    println!("delivered         {} of {total}", delivered.load(Relaxed));
    println!(
        "target            p99 under 50 ms with the hostile clients open: {}",
        if p99 < 50.0 && failed == 0 { "met" } else { "NOT met" }
    );
    Ok(())
}
