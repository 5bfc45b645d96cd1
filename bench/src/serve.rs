//! The first steps every benchmark takes with a `hookline serve` it
//! started: wait until it answers, then make the one subscription the
//! benchmark delivers to and wait until it is verified
//! (`#[path]`-included: the benchmark crate has no library).

use std::time::Duration;

use serde_json::json;

/// Waits (up to 10 s) until `base` answers `GET /healthz`.
pub async fn wait_until_up(client: &reqwest::Client, base: &str) {
    for _ in 0..400 {
        if client.get(format!("{base}/healthz")).send().await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Makes a subscription of `bench.*` events to `callback_url` with API key
/// `key`, waits until it is verified, and answers its id.
///
/// # Errors
///
/// A request failed or its answer was not JSON.
pub async fn verified_subscription(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    callback_url: &str,
) -> anyhow::Result<String> {
    let sub: serde_json::Value = client
        .post(format!("{base}/v1/subscriptions"))
        .bearer_auth(key)
        .json(&json!({"callback_url": callback_url, "event_types": ["bench.*"]}))
        .send()
        .await?
        .json()
        .await?;
    let id = sub["id"].as_str().ok_or_else(|| anyhow::anyhow!("no subscription created: {sub}"))?.to_string();
    loop {
        let s: serde_json::Value =
            client.get(format!("{base}/v1/subscriptions/{id}")).bearer_auth(key).send().await?.json().await?;
        if s["verified"] == true {
            return Ok(id);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The `hookline` binary a benchmark runs: `given` (its `--bin`), else the
/// one built beside the benchmark (`cargo build --release -p hookline`).
///
/// # Errors
///
/// There is no such file; the message says how to build it.
pub fn hookline_binary(given: Option<&str>) -> anyhow::Result<String> {
    let bin = match given {
        Some(b) => b.to_string(),
        None => std::env::current_exe()?.with_file_name("hookline").display().to_string(),
    };
    anyhow::ensure!(std::path::Path::new(&bin).exists(), "{bin} missing: cargo build --release -p hookline");
    Ok(bin)
}
