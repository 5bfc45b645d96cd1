//! Benchmark of a bulk requeue on `hookline serve`: N dead letters (default
//! 10,000; one subscription whose receiver answers 400, one attempt each),
//! then the receiver is fixed and `POST /v1/dead-letters/requeue` with the
//! subscription as filter. Prints how long the job took to complete (every
//! dead letter requeued: a new saga each) and until every new saga was
//! delivered, from the request.
//!
//! `cargo build --release -p hookline && HOOKLINE_BIN=target/release/hookline
//! cargo run --release -p hookline-bench --bin bulk_requeue -- --dead-letters 10000`
//! (`make bench-bulk-requeue ARGS="…"`).

use std::time::{Duration, Instant};

use hookline_tests::pipeline::Pipeline;
use hookline_tests::server::Server;
use hookline_tests::{Behaviour, Receiver};
use serde_json::{json, Value};

fn dead_letters() -> usize {
    let mut it = std::env::args().skip(1);
    let mut n = 10_000;
    while let Some(k) = it.next() {
        match k.as_str() {
            "--dead-letters" => n = it.next().and_then(|v| v.parse().ok()).expect("--dead-letters N"),
            _ => panic!("unknown argument {k}; use --dead-letters N"),
        }
    }
    n
}

/// How many open dead letters the subscription has (walking the list).
async fn open_count(s: &Server, sub: &str) -> usize {
    let mut n = 0;
    let mut cursor = String::new();
    loop {
        let (_, v) = s.get(&format!("/v1/dead-letters?subscription_id={sub}&state=open&limit=1000{cursor}")).await;
        n += v["items"].as_array().map_or(0, Vec::len);
        match v["next_cursor"].as_str() {
            Some(c) => cursor = format!("&cursor={c}"),
            None => return n,
        }
    }
}

#[tokio::main]
async fn main() {
    let n = dead_letters();
    let r = Receiver::start().await;
    let s = Server::start("bench-bulk-requeue");
    let (sub, _) = s
        .subscribe(json!({"callback_url": r.url("/b", Behaviour::Ok), "event_types": ["bench.*"],
                          "retry_policy": {"max_attempts": 1, "base_delay_ms": 50, "max_delay_ms": 100}}))
        .await;
    r.set("/b", Behaviour::Always(400));
    let t = Instant::now();
    for start in (0..n).step_by(100) {
        let batch: Vec<Value> =
            (start..(start + 100).min(n)).map(|i| json!({"type": "bench.x", "data": {"i": i}})).collect();
        let (st, v) = s.call("POST", "/v1/events/batch", Some(&serde_json::to_vec(&batch).unwrap())).await;
        assert_eq!(st, 202, "{v}");
    }
    while open_count(&s, &sub).await < n {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("{n} dead letters in {:.1} s", t.elapsed().as_secs_f64());
    r.set("/b", Behaviour::Ok);
    let delivered_before = r.successes("/b").len();
    let t = Instant::now();
    let (st, v) =
        s.post("/v1/dead-letters/requeue", &json!({"filter": {"subscription_id": sub}, "reason": "bench"})).await;
    assert_eq!(st, 202, "{v}");
    let job = v["job_id"].as_str().unwrap().to_string();
    let done = loop {
        let (_, j) = s.get(&format!("/v1/jobs/{job}")).await;
        if j["state"] != "running" {
            break j;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let job_secs = t.elapsed().as_secs_f64();
    while r.successes("/b").len() - delivered_before < n {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let all_secs = t.elapsed().as_secs_f64();
    println!(
        "bulk requeue of {n} dead letters: job {} in {job_secs:.1} s ({:.0}/s; matched {}, done {}, failed {}); \
         every new saga delivered {all_secs:.1} s after the request",
        done["state"].as_str().unwrap_or("?"),
        n as f64 / job_secs,
        done["matched"],
        done["done"],
        done["failed"],
    );
}
