//! Reconcile: the way back from every stuck state. Stream records are only
//! pointers that a DynamoDB stream forgets after 24 hours, and a queue can
//! lose a job to its dead-letter queue; this stage (a scheduled function on
//! AWS, a loop in `hookline serve`) finds
//! - stream batches the pipeline gave up on ([`crate::ports::StreamFailures`]):
//!   events never routed, sagas never started, attempts never read; and
//! - sagas that stopped progressing: not terminal and past their due time
//!   by a margin ([`crate::ports::SagaStore::stalled`], an index of waiting
//!   sagas, so nothing is scanned); an ordered saga Waiting behind a live
//!   saga or a blocking dead letter is not stalled (it is waiting: looked at
//!   again later, not counted, outside the run's budget), one whose lane
//!   needs a hand is ([`super::ordering::look`]),
//!
//! and re-drives them through the normal idempotent path: routing creates
//! sagas conditionally, a recorded attempt is fed to the saga stage again,
//! a lost job is sent again (its attempt is a conditional put, so a second
//! attempt record is impossible). Every run is bounded and reports what it
//! found and fixed.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use chrono::Utc;
use serde::Serialize;

use crate::context::Hookline;
use crate::error::StoreError;
use crate::ports::GivenUp;
use crate::saga::{Saga, SagaStatus};
use crate::stage::{route, saga};

use super::ordering::GapHealing;
pub use crate::context::ReconcileLimits;

/// What one run found and did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReconcileReport {
    /// Given-up stream batches read.
    pub batches: usize,
    /// Events of those batches routed again.
    pub events_rerouted: usize,
    /// Sagas of those batches started again.
    pub sagas_restarted: usize,
    /// Attempts of those batches fed to the saga stage again.
    pub attempts_replayed: usize,
    /// Batches that could not be resolved (left for an operator).
    pub unresolved: usize,
    /// Batches whose read the run's budget cut short (left for the next run).
    pub incomplete: usize,
    /// Stalled sagas found.
    pub stalled: usize,
    /// Waiting sagas past their due time that are not stalled (behind a
    /// live saga or a blocking dead letter in their lane): neither counted
    /// as stalled nor re-driven, only looked at again later.
    pub waiting: usize,
    /// Of those, re-driven (the rest had moved on meanwhile).
    pub redriven: usize,
    /// Dead letters awaiting requeue or skip, after the run (the alarm's
    /// metric: it returns to OK when ops have handled them all); `None`
    /// when they could not be counted, so the metric is missing, never 0.
    pub open_dead_letters: Option<u64>,
    /// The steps that failed (`given_up`, `stalled`, `open_dead_letters`),
    /// each with its error: the others still ran and are reported.
    pub failed: Vec<String>,
}

/// One run: given-up batches first, then stalled sagas, then the count of
/// open dead letters. Errors of one item are logged and leave it for the
/// next run; a step that fails as a whole is recorded in
/// [`ReconcileReport::failed`] and the later steps still run, so what was
/// measured is always reported.
pub async fn reconcile(h: &Hookline, limits: &ReconcileLimits) -> ReconcileReport {
    let mut report = ReconcileReport::default();
    if let Err(e) = given_up(h, limits, &mut report).await {
        report.failed.push(format!("given_up: {e}"));
    }
    if let Err(e) = stalled(h, limits, &mut report).await {
        report.failed.push(format!("stalled: {e}"));
    }
    match h.stores.dead_letters.count(crate::dead_letter::DeadLetterState::Open).await {
        Ok(n) => report.open_dead_letters = Some(n),
        Err(e) => report.failed.push(format!("open_dead_letters: {e}")),
    }
    let m = &h.metrics.reconciled;
    m.events_rerouted.fetch_add(report.events_rerouted as u64, Relaxed);
    m.sagas_redriven.fetch_add((report.sagas_restarted + report.attempts_replayed + report.redriven) as u64, Relaxed);
    m.unresolved.fetch_add(report.unresolved as u64, Relaxed);
    if report.batches + report.stalled > 0 {
        tracing::warn!(
            batches = report.batches,
            events_rerouted = report.events_rerouted,
            sagas_restarted = report.sagas_restarted,
            attempts_replayed = report.attempts_replayed,
            unresolved = report.unresolved,
            stalled = report.stalled,
            redriven = report.redriven,
            "reconciler re-drove stuck work"
        );
    }
    for f in &report.failed {
        tracing::error!(step = %f, "reconciler: a step failed; the next run retries it");
    }
    report
}

/// Takes given-up batches until none is left or the budget is spent.
async fn given_up(h: &Hookline, limits: &ReconcileLimits, report: &mut ReconcileReport) -> Result<(), StoreError> {
    let deadline = tokio::time::Instant::now() + limits.budget;
    while tokio::time::Instant::now() < deadline {
        let batches = h.stores.stream_failures.take(limits.max_batches, deadline).await?;
        if batches.is_empty() {
            break;
        }
        if given_up_batches(h, batches, report).await? == 0 {
            // Only batches left for an operator or a later run: a store
            // without visibility timeouts would hand them back at once.
            break;
        }
    }
    Ok(())
}

/// Re-drives `batches`; how many were done with (acknowledged).
async fn given_up_batches(
    h: &Hookline,
    batches: Vec<GivenUp>,
    report: &mut ReconcileReport,
) -> Result<usize, StoreError> {
    let mut done = Vec::new();
    for b in batches {
        report.batches += 1;
        if let Some(why) = &b.unresolved {
            report.unresolved += 1;
            tracing::error!(reason = %why, "reconciler: a given-up stream batch cannot be resolved; left for an operator");
            continue;
        }
        let res = async {
            route::route(h, &b.events).await?;
            saga::start(h, &b.sagas).await?;
            saga::on_attempts(h, &b.attempts).await
        }
        .await;
        match res {
            Ok(()) => {
                report.events_rerouted += b.events.len();
                report.sagas_restarted += b.sagas.len();
                report.attempts_replayed += b.attempts.len();
                if b.incomplete {
                    // Re-driven as far as it was read; the pointer comes
                    // back after its visibility timeout for the rest.
                    report.incomplete += 1;
                } else {
                    done.push(b.receipt);
                }
            }
            Err(e) => tracing::error!(error = %e, "reconciler: re-driving a given-up batch failed; next run retries"),
        }
    }
    if !done.is_empty() {
        h.stores.stream_failures.done(&done).await?;
    }
    Ok(done.len())
}

/// Pages of the stalled index one run reads, at most: waiting sagas
/// (looked at again later, without counting) free their place in the page,
/// so the run reads on for the stalled ones, within this bound.
const MAX_STALLED_PAGES: usize = 10;

/// How much later than a stall margin a saga waiting behind a blocking dead
/// letter is looked at again: a block lasts until ops act, and its lifting
/// wakes the next saga itself (a wake-up lost in a crash is found then).
const BLOCKED_RECHECK_MARGINS: i32 = 6;

async fn stalled(h: &Hookline, limits: &ReconcileLimits, report: &mut ReconcileReport) -> Result<(), StoreError> {
    let now = Utc::now();
    for _ in 0..MAX_STALLED_PAGES {
        let found = h.stores.sagas.stalled(now - limits.stall_margin, limits.max_sagas).await?;
        let (page, mut waiting) = (found.len(), 0);
        let mut stalled = Vec::new();
        for s in found {
            // A Waiting saga is stalled only if its lane needs a hand.
            if s.state.status == SagaStatus::Waiting && s.lane.is_some() {
                match super::ordering::look(h, &s).await {
                    Ok(crate::ordering::WaiterState::Waiting) => {
                        waiting += 1;
                        let later = now + limits.stall_margin * BLOCKED_RECHECK_MARGINS;
                        h.stores.sagas.defer(&s.event_id, &s.id, &s.state, later).await?;
                        continue;
                    }
                    Ok(crate::ordering::WaiterState::Stalled) => {}
                    Err(e) => {
                        tracing::error!(error = %e, saga_id = %s.id, "reconciler: looking at a waiting saga's lane failed; next run retries");
                        continue;
                    }
                }
            }
            if report.stalled < limits.max_sagas {
                report.stalled += 1;
                stalled.push(s);
            }
        }
        report.waiting += waiting;
        redrive_all(h, limits, report, stalled, now).await?;
        if waiting == 0 || page < limits.max_sagas || report.stalled >= limits.max_sagas {
            break;
        }
    }
    Ok(())
}

async fn redrive_all(
    h: &Hookline,
    limits: &ReconcileLimits,
    report: &mut ReconcileReport,
    found: Vec<Saga>,
    now: chrono::DateTime<Utc>,
) -> Result<(), StoreError> {
    for s in found {
        match redrive(h, &s, limits).await {
            Ok(true) => {
                report.redriven += 1;
                // Give the re-driven work a full margin before looking again.
                h.stores.sagas.defer(&s.event_id, &s.id, &s.state, now + limits.stall_margin).await?;
            }
            Ok(false) => {}
            Err(e) => {
                tracing::error!(error = %e, saga_id = %s.id, "reconciler: re-driving a stalled saga failed; next run retries")
            }
        }
    }
    Ok(())
}

/// Re-drives one stalled saga from its current stored state; `false` if it
/// is gone or terminal by now.
async fn redrive(h: &Hookline, found: &Saga, limits: &ReconcileLimits) -> Result<bool, StoreError> {
    let Some(s) = h.stores.sagas.get(&found.event_id, &found.id).await? else { return Ok(false) };
    if s.state.status.is_terminal() || s.state != found.state {
        return Ok(false);
    }
    let in_flight = crate::saga::in_progress_attempt(&s.state);
    match s.state.status {
        SagaStatus::Pending | SagaStatus::InProgress => {
            // The attempt may be recorded and only its stream record lost:
            // then the saga stage reads it again; otherwise the job is sent again.
            let recorded =
                h.stores.attempts.list(&s.event_id, &s.id).await?.into_iter().find(|a| a.attempt == in_flight);
            match recorded {
                Some(a) => saga::on_attempts(h, &[a]).await?,
                // Counted in the saga first: the job it may only look
                // stalled behind (held by a breaker, a rate limit, a
                // backlog) is then stale, and only this one posts.
                None => {
                    if !h.stores.sagas.count_redrive(&s.event_id, &s.id, &s.state, s.redrives).await? {
                        return Ok(false);
                    }
                    let job = crate::message::DeliveryJob { redrive: s.redrives + 1, ..saga::job_of(&s, in_flight) };
                    h.stores.deliveries.send_now(&[job]).await?
                }
            }
        }
        // Its wake-up was lost (or its lane's predecessor ended in a crash):
        // look at its lane again.
        // An old gap is passed or routed again first.
        SagaStatus::Waiting => match super::ordering::heal_gap(h, &s, limits.stall_margin).await? {
            GapHealing::Passed => {}
            GapHealing::Nothing => {
                super::ordering::admit(h, &s.event_id, &s.id, crate::ordering::Releaser::Reconciler).await?
            }
            GapHealing::RouteAgain(e) => {
                super::route::route(h, std::slice::from_ref(&*e)).await?;
                super::ordering::admit(h, &s.event_id, &s.id, crate::ordering::Releaser::Reconciler).await?
            }
        },
        SagaStatus::PendingRetry => {
            // The timer was lost: wake the saga now (it is past due).
            let job = saga::job_of(&s, s.state.attempts);
            let (timer, _) = saga::timer_message(
                &job,
                s.state.attempts + 1,
                s.state.next_attempt_at.unwrap_or(Utc::now()),
                Utc::now(),
            );
            h.stores.retries.send(&[(timer, Duration::ZERO)]).await?
        }
        // Its check was lost: look for the acknowledgement now, counting
        // from when the attempt was sent.
        SagaStatus::AwaitingAck => {
            let n = s.state.attempts;
            let sent = h.stores.attempts.list(&s.event_id, &s.id).await?.into_iter().find(|a| a.attempt == n);
            let since = sent.map_or(s.updated_at, |a| {
                a.at - chrono::Duration::milliseconds(i64::try_from(a.latency_ms).unwrap_or(0))
            });
            let (timer, _) = saga::ack_timer(&saga::job_of(&s, n), n, Utc::now(), since);
            h.stores.retries.send(&[(timer, Duration::ZERO)]).await?
        }
        _ => return Ok(false),
    }
    tracing::warn!(saga_id = %s.id, event_id = %s.event_id, status = s.state.status.as_str(), attempt = in_flight, "reconciler: stalled saga re-driven");
    Ok(true)
}

/// The run's report as one CloudWatch Embedded Metric Format line
/// (namespace `Hookline`, dimension `Function`): the alarm on open dead
/// letters reads `OpenDeadLetters` from it (left out when it could not be
/// counted), the one on failed runs `ReconcileFailedSteps`.
pub fn emf_line(report: &ReconcileReport, function: &str, timestamp_ms: i64) -> String {
    let names = [
        ("ReconcileEventsRerouted", report.events_rerouted as u64),
        ("ReconcileSagasRedriven", (report.sagas_restarted + report.attempts_replayed + report.redriven) as u64),
        ("ReconcileUnresolved", report.unresolved as u64),
        ("ReconcileStalled", report.stalled as u64),
        ("ReconcileWaiting", report.waiting as u64),
        ("ReconcileIncomplete", report.incomplete as u64),
        ("ReconcileFailedSteps", report.failed.len() as u64),
    ];
    let mut doc = serde_json::json!({"Function": function});
    for (n, v) in names {
        doc[n] = serde_json::json!(v);
    }
    // Not counted: missing, so the alarm reads it as breaching, never as 0.
    let open = report.open_dead_letters.map(|n| ("OpenDeadLetters", n));
    if let Some((n, v)) = open {
        doc[n] = serde_json::json!(v);
    }
    let names: Vec<(&str, u64)> = names.into_iter().chain(open).collect();
    let metrics: Vec<serde_json::Value> =
        names.iter().map(|(n, _)| serde_json::json!({"Name": n, "Unit": "Count"})).collect();
    doc["_aws"] = serde_json::json!({
        "Timestamp": timestamp_ms,
        "CloudWatchMetrics": [{"Namespace": "Hookline", "Dimensions": [["Function"]], "Metrics": metrics}],
    });
    doc.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(line: &serde_json::Value) -> Vec<String> {
        line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["Name"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn a_run_that_could_not_count_dead_letters_leaves_the_figure_out_and_says_it_failed() {
        let failed = ReconcileReport {
            batches: 3,
            events_rerouted: 3,
            failed: vec!["open_dead_letters: store unavailable".into()],
            ..ReconcileReport::default()
        };
        let line: serde_json::Value = serde_json::from_str(&emf_line(&failed, "reconciler", 1)).unwrap();
        assert!(line.get("OpenDeadLetters").is_none(), "missing, never 0: {line}");
        assert!(!names(&line).contains(&"OpenDeadLetters".to_string()), "{line}");
        assert_eq!(
            (line["ReconcileFailedSteps"].as_u64(), line["ReconcileEventsRerouted"].as_u64()),
            (Some(1), Some(3))
        );
        let ok = ReconcileReport { open_dead_letters: Some(0), ..ReconcileReport::default() };
        let line: serde_json::Value = serde_json::from_str(&emf_line(&ok, "reconciler", 1)).unwrap();
        assert_eq!((line["OpenDeadLetters"].as_u64(), line["ReconcileFailedSteps"].as_u64()), (Some(0), Some(0)));
        assert!(names(&line).contains(&"OpenDeadLetters".to_string()), "{line}");
    }
}
