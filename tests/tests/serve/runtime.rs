//! `hookline serve`'s loops without the process: the SQLite backend's
//! [`Runtime`] started in this test, as `cli/src/serve.rs` wires it (the
//! outbox, queue, dispatch, purge, health and reconcile loops on one
//! database), so the backend's behaviour is testable in-process. The rest
//! of this suite drives the real binary.

use std::sync::Arc;
use std::time::Duration;

use hookline_sqlite::runtime::{Runtime, RuntimeLimits};
use hookline_sqlite::Backend;
use hookline_tests::server::TempDir;
use hookline_tests::{eventually, Behaviour, Receiver};
use shared::context::{Config, Hookline};
use shared::ssrf::AddressPolicy;

/// Opens a database, starts its runtime and hands an accepted event to
/// it: the runtime routes, starts and delivers it (signed with the
/// subscription's secret) with no other process, and stops within its
/// grace; a second runtime on the same file completes the saga (if the
/// first stopped before recording it) and sends nothing again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_delivers_in_process_and_stops() {
    let dir = TempDir::new("runtime-in-process");
    let db = dir.0.join("hookline.db");
    let master = shared::data_key::MasterKeys::generate();
    let limits = || RuntimeLimits {
        delivery_slots: 4,
        max_in_flight: 16,
        purge_batch: 100,
        purge_interval: Duration::from_secs(3600),
        reconcile_interval: Duration::from_secs(3600),
    };
    let open = || async {
        let backend = Backend::open(&db, &master).await.expect("open the database");
        let config = Config { address_policy: AddressPolicy::AllowLoopback, ..Config::default() };
        let h = Arc::new(Hookline::new(backend.stores.clone(), config, backend.keyring.clone()));
        (backend, h)
    };
    let r = Receiver::start().await;
    let (backend, h) = open().await;
    let sub = hookline_tests::stages::subscription(&r.url("/in-process", Behaviour::Ok), true);
    let secret = sub.signing_keys[0].secret.expose().to_string();
    shared::stage::subscriptions::create(&h, &sub, "test").await.expect("store the subscription");
    let runtime = Runtime::start(&backend, h.clone(), limits());
    let raw = br#"{"id": "in-process-1", "type": "runtime.tested", "data": {"n": 1}}"#;
    let accepted = shared::stage::ingest::ingest(&h, raw, None, None, None).await.expect("accepted");
    assert!(!accepted.duplicate);
    let got = eventually(20, "the delivery", || async { r.deliveries("/in-process").first().cloned() }).await;
    assert!(got.signed_by(&secret), "signed with the subscription's secret");
    assert_eq!(got.json()["data"]["n"], 1);
    let stopping = std::time::Instant::now();
    runtime.stop(Duration::from_secs(10)).await;
    assert!(stopping.elapsed() < Duration::from_secs(10), "stopped within its grace");
    drop((backend, h));

    // Another runtime on the same file: nothing left to send.
    let (backend, h) = open().await;
    let runtime = Runtime::start(&backend, h.clone(), limits());
    // The attempt's outcome may have been recorded after the first stop:
    // the outbox carries it into this runtime's saga loop.
    eventually(20, "the saga completed", || async {
        let sagas = h.stores.sagas.list_for_event(&accepted.event_id).await.expect("read the sagas");
        (sagas.len() == 1 && sagas[0].state.status == shared::saga::SagaStatus::Completed).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(r.deliveries("/in-process").len(), 1, "nothing sent again");
    runtime.stop(Duration::from_secs(10)).await;
}
