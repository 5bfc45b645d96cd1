//! Bulk jobs (requeue, skip, replay): started by a `202 {"job_id"}`,
//! followed through `GET /v1/jobs/{id}` until they leave `running`, with a
//! progress bar on a terminal.

use std::io::Write;
use std::time::Duration;

use serde_json::Value;

use super::client::{Client, OpsError};
use super::output::Out;

/// How often a running job is polled.
const POLL: Duration = Duration::from_millis(500);

/// Fetches a job.
pub async fn get(client: &Client, id: &str) -> anyhow::Result<Value> {
    client.get(&["v1", "jobs", id], &[]).await
}

/// Polls the job until it is no longer `running`; on a terminal (table
/// output, stderr a terminal) redraws a progress bar on stderr meanwhile.
pub async fn wait(client: &Client, id: &str, out: &Out) -> anyhow::Result<Value> {
    let bar = !out.json() && out.stderr_tty;
    if bar {
        eprintln!("job {id}: following; Ctrl-C stops watching, not the job (hookline jobs show {id} --wait)");
    }
    loop {
        let job = get(client, id).await?;
        if bar {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K{}", progress_line(&job, 30));
            let _ = err.flush();
        }
        if job["state"].as_str() != Some("running") {
            if bar {
                eprintln!();
            }
            return Ok(job);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Prints a job (one JSON document, or a table) with a one-line summary in
/// table mode; a job that ended `failed` is an error (exit 1).
pub fn print(job: &Value, out: &Out) -> anyhow::Result<()> {
    out.object(job, &[])?;
    if !out.json() {
        eprintln!("{}", summary(job));
    }
    let count = |k: &str| job[k].as_u64().unwrap_or(0);
    if job["state"] == "failed" {
        return Err(OpsError::JobFailed {
            id: job["id"].as_str().unwrap_or("?").to_string(),
            error: job["error"].as_str().unwrap_or("no reason given").to_string(),
            done: count("done"),
            failed: count("failed"),
            matched: count("matched"),
        }
        .into());
    }
    Ok(())
}

/// `job job_1 completed: 1000 matched, 998 done, 2 failed`.
pub fn summary(job: &Value) -> String {
    let count = |k: &str| job[k].as_u64().unwrap_or(0);
    format!(
        "job {} {}: {} matched, {} done, {} failed",
        job["id"].as_str().unwrap_or("?"),
        job["state"].as_str().unwrap_or("?"),
        count("matched"),
        count("done"),
        count("failed")
    )
}

/// `[#########-----------]  45%  450/1000 done, 2 failed (running)`:
/// the bar counts done and failed items against those matched so far.
pub fn progress_line(job: &Value, width: usize) -> String {
    let count = |k: &str| job[k].as_u64().unwrap_or(0);
    let (matched, done, failed) = (count("matched"), count("done"), count("failed"));
    let settled = done + failed;
    let filled = (settled.min(matched) * width as u64).checked_div(matched).unwrap_or(0) as usize;
    let pct = (settled.min(matched) * 100).checked_div(matched).unwrap_or(0);
    format!(
        "[{}{}] {pct:>3}%  {settled}/{matched}  ({done} done, {failed} failed, {})",
        "#".repeat(filled),
        "-".repeat(width - filled),
        job["state"].as_str().unwrap_or("?")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_bar_fills_with_settled_items() {
        let job = json!({"id": "job_1", "state": "running", "matched": 1000, "done": 448, "failed": 2});
        assert_eq!(progress_line(&job, 10), "[####------]  45%  450/1000  (448 done, 2 failed, running)");
        let empty = json!({"id": "job_2", "state": "running", "matched": 0, "done": 0, "failed": 0});
        assert_eq!(progress_line(&empty, 4), "[----]   0%  0/0  (0 done, 0 failed, running)");
        let done = json!({"id": "job_1", "state": "completed", "matched": 3, "done": 3, "failed": 0});
        assert_eq!(progress_line(&done, 3), "[###] 100%  3/3  (3 done, 0 failed, completed)");
        assert_eq!(summary(&done), "job job_1 completed: 3 matched, 3 done, 0 failed");
    }
}
