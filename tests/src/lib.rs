//! Test harness: a real HTTP receiver on 127.0.0.1 whose behaviour each test
//! scripts; the two backends behind one [`pipeline::Pipeline`] trait (a real
//! `hookline serve` process that tests can `kill -9` and restart, and the
//! Lambda handlers on the AWS emulator driven by [`lambda_driver`]); the
//! scenario suite both run; and the port conformance suite.

pub mod receiver;
pub mod server;

pub use receiver::{Behaviour, Delivery, Receiver};
pub use server::Server;

/// One producer-format example from the `shared` crate's
/// `tests/fixtures/envelopes/` (docs/formats.md#producer-formats).
pub fn fixture(name: &str) -> Vec<u8> {
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root");
    let path = workspace.join("shared").join("tests").join("fixtures").join("envelopes").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Polls `f` every 25 ms until it returns `Some`, or panics after `secs` with `what`.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    eventually_every(secs, std::time::Duration::from_millis(25), what, f).await
}

/// As [`eventually`], polling every `every`: for checks that cost the
/// system under test real work (listing hundreds of records from the
/// emulator), which polled every 25 ms would compete with the pipeline
/// they wait for.
pub async fn eventually_every<T, F, Fut>(secs: u64, every: std::time::Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {secs}s waiting for: {what}");
        }
        tokio::time::sleep(every).await;
    }
}
pub mod aws_pipeline;
pub mod conformance;
pub mod emulator;
pub mod iam;
pub mod input_scenarios;
pub mod lambda_driver;
pub mod lane_scenarios;
pub mod metering;
pub mod pipeline;
pub mod scenarios;
pub mod stages;
pub mod strict;
pub mod tenancy_scenarios;
pub mod wait_scenarios;
