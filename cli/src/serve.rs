//! `hookline serve`: the whole pipeline in one process on SQLite. This is
//! wiring only: an axum server in front of [`shared::api::Api`], and one loop
//! per stage that reads the outbox or a queue and calls the same stage
//! function a Lambda handler calls.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::body::Body;
use axum::http::{header, Request, Response, StatusCode};
use shared::api::{self, Api, Verification};
use shared::attempt::{DeliveryJob, RetryTimer};
use shared::context::{Config, Hookline};
use shared::http_client::ClientConfig;
use shared::error::StoreError;
use shared::sqlite::{Backend, Outbox, SqliteQueue, Stream};
use shared::ssrf::AddressPolicy;
use shared::stage::{deliver, requeue, route, saga, verify};
use shared::ports::{JobQueue, Received};
use tokio::sync::watch;

/// Options of `hookline serve`.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Address of the HTTP API.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// The SQLite database file (created if missing).
    #[arg(long, default_value = "hookline.db")]
    db: PathBuf,
    /// API key; without one, a key is generated on first run and stored.
    #[arg(long, env = "HOOKLINE_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Local development: allow http:// callbacks to loopback addresses.
    #[arg(long)]
    dev: bool,
    /// Delivery loops running at once; each delivers a batch concurrently.
    #[arg(long, default_value_t = 4)]
    delivery_workers: usize,
    /// Jobs each delivery loop takes at a time.
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Days events are kept for replay.
    #[arg(long, default_value_t = 30)]
    retention_days: i64,
    /// Connect timeout of deliveries, in milliseconds.
    #[arg(long, default_value_t = 5_000)]
    connect_timeout_ms: u64,
    /// Total timeout of one delivery attempt, in milliseconds.
    #[arg(long, default_value_t = 15_000)]
    delivery_timeout_ms: u64,
}

/// Runs until SIGINT/SIGTERM, then stops taking jobs and finishes those in flight.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    init_logging();
    let backend = Backend::open(&args.db).with_context(|| format!("opening database {}", args.db.display()))?;
    let (api_key, key_source) = match &args.api_key {
        Some(k) if !k.trim().is_empty() => (k.trim().to_string(), "from HOOKLINE_API_KEY / --api-key"),
        _ => (
            backend.settings.get_or_init("api_key", || shared::ids::random_token("hk_")).await?,
            "stored in the database",
        ),
    };
    let config = Config {
        retention: chrono::Duration::days(args.retention_days.max(1)),
        address_policy: if args.dev { AddressPolicy::AllowLoopback } else { AddressPolicy::PublicOnly },
        http: ClientConfig {
            connect_timeout: Duration::from_millis(args.connect_timeout_ms.max(1)),
            total_timeout: Duration::from_millis(args.delivery_timeout_ms.max(1)),
            ..ClientConfig::default()
        },
        ..Config::default()
    };
    let config = Config {
        // A job stays invisible well past one attempt's timeout, so a live
        // worker never loses it to another.
        delivery_visibility: config.http.total_timeout * 2 + Duration::from_secs(5),
        ..config
    };
    let h = Arc::new(Hookline::new(backend.stores.clone(), config));
    let api = Api::new(h.clone(), api_key.clone(), Verification::Background);

    let listener = tokio::net::TcpListener::bind(args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    println!("hookline serve");
    println!("  listening on  http://{addr}");
    println!("  database      {}", args.db.display());
    println!("  API key       {api_key}  ({key_source})");
    if args.dev {
        println!("  WARNING: --dev allows http:// callbacks to loopback addresses; never use it in production");
        tracing::warn!("dev mode: http:// callbacks to loopback addresses are allowed");
    }

    let (stop_tx, stop) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    let (o, hk) = (backend.outbox.clone(), h.clone());
    tasks.spawn(outbox_loop(
        "route",
        move |after| { let o = o.clone(); async move { o.events(after, OUTBOX_BATCH).await } },
        move |events| { let hk = hk.clone(); async move { route::route(&hk, &events).await.map(|_| ()) } },
        backend.outbox.clone(),
        backend.db.watch(Stream::Events),
        stop.clone(),
    ));
    let (o, hk) = (backend.outbox.clone(), h.clone());
    tasks.spawn(outbox_loop(
        "saga.start",
        move |after| { let o = o.clone(); async move { o.sagas(after, OUTBOX_BATCH).await } },
        move |sagas| { let hk = hk.clone(); async move { saga::start(&hk, &sagas).await } },
        backend.outbox.clone(),
        backend.db.watch(Stream::Sagas),
        stop.clone(),
    ));
    let (o, hk) = (backend.outbox.clone(), h.clone());
    tasks.spawn(outbox_loop(
        "saga.attempts",
        move |after| { let o = o.clone(); async move { o.attempts(after, OUTBOX_BATCH).await } },
        move |attempts| { let hk = hk.clone(); async move { saga::on_attempts(&hk, &attempts).await } },
        backend.outbox.clone(),
        backend.db.watch(Stream::Attempts),
        stop.clone(),
    ));
    let (hk, q) = (h.clone(), backend.retries.clone());
    tasks.spawn(queue_loop(
        "retries",
        backend.retries.clone(),
        64,
        Duration::from_secs(30),
        move |msgs| { let (hk, q) = (hk.clone(), q.clone()); async move { on_timers(&hk, &q, msgs).await } },
        backend.db.watch(Stream::Control),
        stop.clone(),
    ));
    let hk = h.clone();
    tasks.spawn(queue_loop(
        "requeue",
        backend.requeues.clone(),
        16,
        Duration::from_secs(30),
        move |msgs| { let hk = hk.clone(); async move { on_requeues(&hk, msgs).await } },
        backend.db.watch(Stream::Control),
        stop.clone(),
    ));
    for _ in 0..args.delivery_workers.max(1) {
        let hk = h.clone();
        tasks.spawn(queue_loop(
            "deliveries",
            backend.deliveries.clone(),
            args.batch.max(1),
            h.config.delivery_visibility,
            move |msgs| { let hk = hk.clone(); async move { on_jobs(&hk, msgs).await } },
            backend.db.watch(Stream::Deliveries),
            stop.clone(),
        ));
    }
    tokio::spawn(reverify_unverified(h.clone()));

    let max_body = h.config.max_body_bytes;
    let app = axum::Router::new().fallback(move |req: Request<Body>| {
        let api = api.clone();
        async move { handle(&api, req, max_body).await }
    });
    axum::serve(listener, app).with_graceful_shutdown(shutdown_signal()).await?;
    tracing::info!("shutting down: no new jobs are taken; finishing those in flight");
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(30), async { while tasks.join_next().await.is_some() {} }).await;
    println!("hookline serve: stopped");
    Ok(())
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HOOKLINE_LOG").unwrap_or_else(|_| "hookline=info,shared=info,warn".into());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .try_init();
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

async fn handle(api: &Api, req: Request<Body>, max_body: usize) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, max_body + 1).await {
        Ok(b) => b,
        Err(_) => {
            return to_http(api::Response::error(
                413,
                "payload_too_large",
                format!("request body exceeds the limit of {max_body} bytes"),
                None,
            ))
        }
    };
    let auth = parts.headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let res = api
        .handle(api::Request {
            method: parts.method.as_str(),
            path: parts.uri.path(),
            query: parts.uri.query(),
            authorization: auth,
            body: &body,
        })
        .await;
    to_http(res)
}

fn to_http(r: api::Response) -> Response<Body> {
    Response::builder()
        .status(StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, r.content_type)
        .body(Body::from(r.body))
        .expect("valid response")
}

/// Waits for the next change on `changes`, at most `max`; false when stopping.
async fn wait(changes: &mut watch::Receiver<u64>, stop: &mut watch::Receiver<bool>, max: Duration) -> bool {
    tokio::select! {
        _ = changes.changed() => {}
        _ = stop.changed() => {}
        _ = tokio::time::sleep(max) => {}
    }
    !*stop.borrow()
}

const OUTBOX_BATCH: usize = 512;
const IDLE: Duration = Duration::from_secs(1);
const BACKOFF: Duration = Duration::from_millis(200);

/// Reads one outbox stream in order and hands each batch to a stage
/// function. Rows are acknowledged (deleted) after the stage succeeded, off
/// the critical path; a restart re-reads whatever was not acknowledged, and
/// the stages are idempotent.
async fn outbox_loop<T, R, RF, H, HF>(
    name: &'static str,
    read: R,
    handle: H,
    outbox: Outbox,
    mut changes: watch::Receiver<u64>,
    mut stop: watch::Receiver<bool>,
) where
    R: Fn(i64) -> RF,
    RF: Future<Output = Result<Vec<(i64, T)>, StoreError>>,
    H: Fn(Vec<T>) -> HF,
    HF: Future<Output = Result<(), StoreError>>,
{
    let mut after = 0;
    while !*stop.borrow() {
        changes.borrow_and_update();
        let rows = match read(after).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, stage = name, "reading the outbox failed");
                tokio::time::sleep(BACKOFF).await;
                continue;
            }
        };
        if rows.is_empty() {
            wait(&mut changes, &mut stop, IDLE).await;
            continue;
        }
        let (seqs, records): (Vec<i64>, Vec<T>) = rows.into_iter().unzip();
        match handle(records).await {
            Ok(()) => {
                after = *seqs.last().expect("non-empty");
                let outbox = outbox.clone();
                tokio::spawn(async move {
                    if let Err(e) = outbox.ack(seqs).await {
                        tracing::warn!(error = %e, stage = name, "acknowledging the outbox failed; rows will be re-read after a restart");
                    }
                });
            }
            Err(e) => {
                tracing::error!(error = %e, stage = name, "stage failed; will retry");
                tokio::time::sleep(BACKOFF).await;
            }
        }
    }
}

/// How long to sleep before a queue may have something: until its next
/// message becomes visible, at most `IDLE`.
async fn until_next(queue: &SqliteQueue) -> Duration {
    match queue.next_visible_at().await {
        Ok(Some(at)) => Duration::from_millis((at - chrono::Utc::now().timestamp_millis()).clamp(1, IDLE.as_millis() as i64) as u64),
        _ => IDLE,
    }
}

/// Receives batches from one queue and hands them to `handle`, which
/// returns the receipts of the messages it finished (to delete). Others stay
/// and reappear after their visibility timeout, as on SQS. Stops taking
/// messages when asked; a batch in flight is finished first.
async fn queue_loop<H, HF>(
    name: &'static str,
    queue: SqliteQueue,
    batch: usize,
    visibility: Duration,
    handle: H,
    mut changes: watch::Receiver<u64>,
    mut stop: watch::Receiver<bool>,
) where
    H: Fn(Vec<Received>) -> HF,
    HF: Future<Output = Vec<String>>,
{
    while !*stop.borrow() {
        changes.borrow_and_update();
        let msgs = match queue.receive(batch, visibility).await {
            Ok(m) => m,
            Err(e) => {
                tracing::error!(error = %e, queue = name, "receive failed");
                tokio::time::sleep(BACKOFF).await;
                continue;
            }
        };
        if msgs.is_empty() {
            let d = until_next(&queue).await;
            wait(&mut changes, &mut stop, d).await;
            continue;
        }
        let done = handle(msgs).await;
        if let Err(e) = queue.delete(&done).await {
            tracing::error!(error = %e, queue = name, "deleting messages failed; they will be redelivered and deduplicated");
        }
    }
}

/// Retry timers → next attempts (or a later wake-up when not due yet).
async fn on_timers(h: &Hookline, queue: &SqliteQueue, msgs: Vec<Received>) -> Vec<String> {
    let mut done = Vec::new();
    for m in msgs {
        let Ok(timer) = serde_json::from_str::<RetryTimer>(&m.body) else {
            tracing::error!("timers: unreadable message left for the dead-letter queue");
            continue;
        };
        match saga::on_timer(h, &timer).await {
            Ok(saga::TimerOutcome::Done) => done.push(m.receipt),
            Ok(saga::TimerOutcome::NotYet(d)) => {
                let _ = queue.change_visibility(&m.receipt, d).await;
            }
            Err(e) => tracing::error!(error = %e, saga_id = %timer.saga_id, "timers: handling failed; will retry"),
        }
    }
    done
}

/// Delivery jobs → attempts, a batch delivered concurrently.
async fn on_jobs(h: &Hookline, msgs: Vec<Received>) -> Vec<String> {
    let mut jobs = Vec::with_capacity(msgs.len());
    let mut receipts = Vec::with_capacity(msgs.len());
    for m in msgs {
        match serde_json::from_str::<DeliveryJob>(&m.body) {
            Ok(j) => {
                jobs.push(j);
                receipts.push(m.receipt);
            }
            Err(e) => tracing::error!(error = %e, "delivery: unreadable job left for the dead-letter queue"),
        }
    }
    match deliver::deliver_jobs(h, &jobs).await {
        Ok(()) => receipts,
        Err(e) => {
            tracing::error!(error = %e, "delivery: recording attempts failed; jobs will be retried");
            vec![]
        }
    }
}

/// Requeue and replay requests → new sagas.
async fn on_requeues(h: &Hookline, msgs: Vec<Received>) -> Vec<String> {
    let mut done = Vec::new();
    for m in msgs {
        match requeue::handle_message(h, &m.body).await {
            Ok(()) => done.push(m.receipt),
            Err(e) => tracing::error!(error = %e, "requeue: request failed; will retry"),
        }
    }
    done
}

/// Subscriptions left unverified by a crash during their handshake get it
/// again at start-up.
async fn reverify_unverified(h: Arc<Hookline>) {
    let Ok(subs) = h.stores.subscriptions.list().await else { return };
    for s in subs.into_iter().filter(|s| s.active && !s.verified && s.verification_error.is_none()) {
        if let Err(e) = verify::verify(&h, &s.id).await {
            tracing::error!(subscription_id = %s.id, error = %e, "re-verification could not be stored");
        }
    }
}
