//! Reconciler benchmark: how fast `hookline serve`'s reconciler (the same
//! `shared::stage::reconcile` the scheduled Lambda function runs) finds and
//! re-drives stuck work, run by run, on a real SQLite file.
//!
//! Setup: `--sagas N` retrying sagas whose retry timer was lost (due an
//! hour ago) and `--given-up M` events whose routing was
//! given up (outbox rows moved to the failed stream). Then runs of at most
//! `--batch` sagas and 10 given-up batches each, until a run finds nothing.
//!
//! ```sh
//! cargo run --release -p hookline-bench --bin reconcile -- --sagas 10000 --given-up 200 --batch 100
//! ```

use std::time::{Duration, Instant};

use chrono::Utc;
use hookline_tests::server::TempDir;
use hookline_tests::stages::subscription;
use shared::context::{Config, Hookline};
use shared::ids::{EventId, SagaId};
use shared::ports::Transition;
use shared::saga::{Saga, SagaState, SagaStatus};
use shared::stage::reconcile::{reconcile, ReconcileLimits};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (sagas, given_up, batch) = (arg("--sagas", 10_000), arg("--given-up", 200), arg("--batch", 100));
    let dir = TempDir::new("reconcile-bench");
    let backend = hookline_sqlite::Backend::open(&dir.0.join("hookline.db"))?;
    let stores = backend.stores.clone();
    let sub = subscription("http://127.0.0.1:9/bench", true);
    stores.subscriptions.create(&sub).await?;
    let h =
        Hookline::new(stores.clone(), Config::default(), std::sync::Arc::new(shared::keyring::Keyring::ephemeral()));

    // Retrying sagas whose retry timer was lost: due an hour ago.
    let hour_ago = Utc::now() - chrono::Duration::hours(1);
    let setup = Instant::now();
    for chunk in (0..sagas).collect::<Vec<_>>().chunks(1000) {
        let events: Vec<_> =
            chunk.iter().map(|i| hookline_tests::conformance::event(&format!("lost-{i}"), "task.created")).collect();
        stores.events.insert(&events).await?;
        let s: Vec<Saga> = chunk
            .iter()
            .map(|i| {
                Saga::new(
                    SagaId::new(format!("sag_lost_{i}")),
                    &EventId::new(format!("lost-{i}")),
                    &sub.id,
                    None,
                    hour_ago,
                )
            })
            .collect();
        stores.sagas.create(&s).await?;
        let waiting = SagaState {
            status: SagaStatus::PendingRetry,
            attempts: 1,
            next_attempt_at: Some(hour_ago),
            last_error: Some("HTTP 503".into()),
        };
        let transitions: Vec<Transition> = s
            .iter()
            .map(|sg| Transition {
                event_id: sg.event_id.clone(),
                saga_id: sg.id.clone(),
                from: sg.state.clone(),
                to: waiting.clone(),
                at: hour_ago,
            })
            .collect();
        stores.sagas.transition(&transitions).await?;
    }
    // Events whose routing was given up.
    let events: Vec<_> =
        (0..given_up).map(|i| hookline_tests::conformance::event(&format!("unrouted-{i}"), "task.created")).collect();
    stores.events.insert(&events).await?;
    let rows = backend.outbox.events(0, sagas + given_up).await?;
    let seqs: Vec<i64> = rows.iter().filter(|(_, e)| e.id.as_str().starts_with("unrouted-")).map(|(s, _)| *s).collect();
    backend.outbox.give_up(hookline_sqlite::Stream::Events, seqs).await?;
    println!("setup: {sagas} stalled sagas, {given_up} given-up events in {:.1} s", setup.elapsed().as_secs_f64());

    let limits =
        ReconcileLimits { max_sagas: batch, stall_margin: chrono::Duration::minutes(10), ..ReconcileLimits::default() };
    let (mut runs, mut times) = (0, Vec::new());
    let (mut redriven, mut rerouted) = (0, 0);
    let started = Instant::now();
    loop {
        let t = Instant::now();
        let r = reconcile(&h, &limits).await;
        if !r.failed.is_empty() {
            anyhow::bail!("a reconciler run failed: {:?}", r.failed);
        }
        times.push(t.elapsed());
        runs += 1;
        redriven += r.redriven;
        rerouted += r.events_rerouted;
        if r.stalled == 0 && r.batches == 0 {
            break;
        }
    }
    let total = started.elapsed();
    times.sort();
    let pct = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
    let depth = stores.deliveries.depth().await?;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("runs: {runs} (the last found nothing), {:.2} s in all", total.as_secs_f64());
    let timers = stores.retries.depth().await?;
    println!(
        "re-driven sagas: {redriven}; re-routed events: {rerouted}; retry timers queued: {}; delivery jobs queued: {}",
        timers.visible + timers.not_visible,
        depth.visible + depth.not_visible
    );
    println!(
        "per run (≤ {batch} sagas, ≤ 10 batches): p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms; {:.0} sagas/s",
        ms(pct(0.5)),
        ms(pct(0.9)),
        ms(*times.last().unwrap()),
        redriven as f64 / total.as_secs_f64()
    );
    Ok(())
}
