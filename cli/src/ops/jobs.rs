//! Bulk jobs (requeue, skip, replay): started by a `202` [`JobStarted`],
//! followed through `GET /v1/jobs/{id}` (a [`Job`]) until they leave
//! `running`, with a progress bar on a terminal.

use std::io::Write;
use std::time::Duration;

use hookline_wire::jobs::{Job, JobStarted, JobState};
use serde_json::Value;

use super::client::{json, read, Client, OpsError};
use super::output::Out;

/// How often a running job is polled.
const POLL: Duration = Duration::from_millis(500);

/// Fetches a job.
pub async fn get(client: &Client, id: &str) -> anyhow::Result<Job> {
    read(client.get(&["v1", "jobs", id], &[]).await?)
}

/// The job a `202` answer started.
pub fn started(answer: Value) -> anyhow::Result<JobStarted> {
    read(answer)
}

/// Polls the job until it is no longer `running`; on a terminal (table
/// output, stderr a terminal) redraws a progress bar on stderr meanwhile.
pub async fn wait(client: &Client, id: &str, out: &Out) -> anyhow::Result<Job> {
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
        if job.state != JobState::Running {
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
pub fn print(job: &Job, out: &Out) -> anyhow::Result<()> {
    out.object(&json(job), &[])?;
    if !out.json() {
        eprintln!("{}", summary(job));
    }
    if job.state == JobState::Failed {
        return Err(OpsError::JobFailed {
            id: job.id.clone(),
            error: job.error.clone().unwrap_or_else(|| "no reason given".to_string()),
            done: job.done,
            failed: job.failed,
            matched: job.matched,
        }
        .into());
    }
    Ok(())
}

/// A state as the API spells it (`running`).
fn state_name(s: JobState) -> String {
    json(&s).as_str().unwrap_or("?").to_string()
}

/// `job job_1 completed: 1000 matched, 998 done, 2 failed`.
pub fn summary(job: &Job) -> String {
    format!(
        "job {} {}: {} matched, {} done, {} failed",
        job.id,
        state_name(job.state),
        job.matched,
        job.done,
        job.failed
    )
}

/// `[#########-----------]  45%  450/1000 done, 2 failed (running)`:
/// the bar counts done and failed items against those matched so far.
pub fn progress_line(job: &Job, width: usize) -> String {
    let (matched, done, failed) = (job.matched, job.done, job.failed);
    let settled = done + failed;
    let filled = (settled.min(matched) * width as u64).checked_div(matched).unwrap_or(0) as usize;
    let pct = (settled.min(matched) * 100).checked_div(matched).unwrap_or(0);
    format!(
        "[{}{}] {pct:>3}%  {settled}/{matched}  ({done} done, {failed} failed, {})",
        "#".repeat(filled),
        "-".repeat(width - filled),
        state_name(job.state)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A job as the API answers it.
    fn job(id: &str, state: &str, matched: u64, done: u64, failed: u64) -> Job {
        read(json!({"id": id, "kind": "requeue", "state": state, "matched": matched, "done": done, "failed": failed,
                    "reason": "r", "actor": "key:ops", "filter": {}, "created_at": "2026-11-26T09:00:00Z",
                    "updated_at": "2026-11-26T09:00:01Z"}))
        .unwrap()
    }

    #[test]
    fn the_bar_fills_with_settled_items() {
        assert_eq!(
            progress_line(&job("job_1", "running", 1000, 448, 2), 10),
            "[####------]  45%  450/1000  (448 done, 2 failed, running)"
        );
        assert_eq!(
            progress_line(&job("job_2", "running", 0, 0, 0), 4),
            "[----]   0%  0/0  (0 done, 0 failed, running)"
        );
        let done = job("job_1", "completed", 3, 3, 0);
        assert_eq!(progress_line(&done, 3), "[###] 100%  3/3  (3 done, 0 failed, completed)");
        assert_eq!(summary(&done), "job job_1 completed: 3 matched, 3 done, 0 failed");
    }

    /// A state this CLI does not know is an error naming the answer, not a
    /// job shown as running forever.
    #[test]
    fn an_unknown_state_is_refused() {
        let e = read::<Job>(json!({"id": "job_1", "kind": "requeue", "state": "Running"})).unwrap_err();
        assert!(format!("{e:#}").contains("Running"), "{e:#}");
    }
}
