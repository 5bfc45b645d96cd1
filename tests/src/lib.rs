//! Test harness for the end-to-end scenarios: a real HTTP receiver on
//! 127.0.0.1 whose behaviour each test scripts, and a real `hookline serve`
//! process that tests can `kill -9` and restart on the same SQLite file.

pub mod receiver;
pub mod server;

pub use receiver::{Behaviour, Delivery, Receiver};
pub use server::Server;

/// Polls `f` every 25 ms until it returns `Some`, or panics after `secs` with `what`.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut f: F) -> T
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
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}
pub mod pipeline;
pub mod scenarios;
