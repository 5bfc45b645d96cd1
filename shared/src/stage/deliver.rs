//! Deliver: POST one job's event to its subscriber, signed, and record the
//! attempt. It never changes a saga and never decides a retry or a dead
//! letter; the saga stage reads the attempt and decides.

use std::sync::atomic::Ordering::Relaxed;

use chrono::Utc;
use crate::limits::{all_bounded, MAX_DELIVERIES_IN_FLIGHT};

use crate::attempt::{Attempt, DeliveryJob};
use crate::context::Hookline;
use crate::error::StoreError;
use crate::event::EventRecord;
use crate::http_client::{PostError, PostResult};
use crate::saga::AttemptResult;
use crate::signing;
use crate::subscription::{PayloadFormat, Subscription};

/// Delivers a batch of jobs concurrently and records every attempt in one
/// write. On `Ok` each job's attempt is recorded (or already was, when the
/// job was a duplicate), so the caller may delete the messages.
pub async fn deliver_jobs(h: &Hookline, jobs: &[DeliveryJob]) -> Result<(), StoreError> {
    let attempts: Vec<Attempt> = all_bounded(jobs.iter().map(|j| attempt(h, j)).collect(), MAX_DELIVERIES_IN_FLIGHT)
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    crate::failpoint::hit("deliver.before_record");
    let inserted = h.stores.attempts.record(&attempts).await?;
    for (a, new) in attempts.iter().zip(inserted) {
        if !new {
            tracing::info!(saga_id = %a.saga_id, attempt = a.attempt, "attempt already recorded; duplicate job");
        }
    }
    Ok(())
}

/// Makes one attempt and describes it; does not store it. Every log line
/// of the attempt carries the saga, event and subscription ids.
pub async fn attempt(h: &Hookline, job: &DeliveryJob) -> Result<Attempt, StoreError> {
    use tracing::Instrument;
    let span = tracing::info_span!(
        "attempt",
        saga_id = %job.saga_id,
        event_id = %job.event_id,
        subscription_id = %job.subscription_id,
        attempt = job.attempt,
        trace_id = tracing::field::Empty,
    );
    attempt_in_span(h, job).instrument(span).await
}

async fn attempt_in_span(h: &Hookline, job: &DeliveryJob) -> Result<Attempt, StoreError> {
    let sub = h.subscription_cache.get(h.stores.subscriptions.as_ref(), &job.subscription_id).await?;
    let event = h.stores.events.get(&job.event_id).await?;
    if let Some(t) = event.as_ref().and_then(|e| e.trace_id.as_deref()) {
        tracing::Span::current().record("trace_id", t);
    }
    let refused = |error: &str| Attempt {
        saga_id: job.saga_id.clone(),
        attempt: job.attempt,
        event_id: job.event_id.clone(),
        subscription_id: job.subscription_id.clone(),
        status_code: None,
        error: Some(error.to_string()),
        latency_ms: 0,
        at: Utc::now(),
        result: AttemptResult::Rejected { error: error.to_string() },
    };
    let (sub, event) = match (sub, event) {
        (None, _) => return Ok(refused("subscription no longer exists")),
        (_, None) => return Ok(refused("event is no longer stored")),
        (Some(s), _) if !s.active => return Ok(refused("subscription is inactive")),
        (Some(s), _) if !s.verified => return Ok(refused("subscription is not verified")),
        (Some(s), Some(e)) => (s, e),
    };
    let (headers, body) = request(&sub, &event, job);
    let headers: Vec<(&str, String)> = headers.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let res = h.client.post(&sub.callback_url, &headers, body).await;
    let latency_ms = res.latency.as_millis() as u64;
    h.metrics.observe_latency(latency_ms);
    let result = classify(&res);
    let counter = match &result {
        AttemptResult::Delivered => &h.metrics.deliveries_delivered,
        AttemptResult::Failed { .. } => &h.metrics.deliveries_failed,
        AttemptResult::Gone | AttemptResult::Rejected { .. } => &h.metrics.deliveries_rejected,
    };
    counter.fetch_add(1, Relaxed);
    let error = match &result {
        AttemptResult::Delivered => None,
        AttemptResult::Failed { error, .. } | AttemptResult::Rejected { error } => Some(error.clone()),
        AttemptResult::Gone => Some("HTTP 410 Gone".into()),
    };
    tracing::info!(
        status = res.status, latency_ms, error = error.as_deref().unwrap_or(""), "delivery attempt"
    );
    Ok(Attempt {
        saga_id: job.saga_id.clone(),
        attempt: job.attempt,
        event_id: job.event_id.clone(),
        subscription_id: job.subscription_id.clone(),
        status_code: res.status,
        error,
        latency_ms,
        at: Utc::now(),
        result,
    })
}

/// The signed request for one attempt: headers and body.
pub fn request(sub: &Subscription, event: &EventRecord, job: &DeliveryJob) -> (Vec<(String, String)>, Vec<u8>) {
    let body = match sub.payload_format {
        PayloadFormat::Original => event.body.clone(),
        PayloadFormat::Hookline => serde_json::to_vec(&serde_json::json!({
            "id": event.id,
            "type": event.event_type,
            "timestamp": event.occurred_at,
            "tenant_id": event.tenant_id,
            "data": event.body_json(),
        }))
        .expect("json serializes"),
    };
    let now = Utc::now();
    let ts = now.timestamp();
    let signature = signing::signature_header(sub.signing_secrets(now), &job.webhook_id, ts, &body);
    let mut headers: Vec<(String, String)> = [
        ("content-type", "application/json".to_string()),
        ("webhook-id", job.webhook_id.clone()),
        ("webhook-timestamp", ts.to_string()),
        ("webhook-signature", signature),
        ("hookline-event-type", event.event_type.clone()),
        ("hookline-attempt", job.attempt.to_string()),
    ]
    .into_iter()
    .chain(event.trace_id.iter().flat_map(|t| {
        [
            ("hookline-trace-id", t.clone()),
            ("traceparent", crate::ids::traceparent(t, &format!("{}#{}", job.saga_id, job.attempt))),
        ]
    }))
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    headers.extend(sub.headers.iter().map(|(k, v)| (k.clone(), v.clone())));
    (headers, body)
}

/// Reads what a POST produced as the saga stage needs it.
pub fn classify(res: &PostResult) -> AttemptResult {
    match (&res.error, res.status) {
        (Some(PostError::ForbiddenAddress(why)), _) => {
            AttemptResult::Rejected { error: format!("callback address refused: {why}") }
        }
        (Some(PostError::InvalidUrl(why)), _) => AttemptResult::Rejected { error: format!("callback URL invalid: {why}") },
        (Some(e), _) => AttemptResult::Failed { error: e.to_string(), retry_after_ms: None },
        (None, Some(s)) if (200..300).contains(&s) => AttemptResult::Delivered,
        (None, Some(410)) => AttemptResult::Gone,
        (None, Some(s)) => AttemptResult::Failed {
            error: if (300..400).contains(&s) { format!("HTTP {s} (redirects are not followed)") } else { format!("HTTP {s}") },
            retry_after_ms: res.retry_after.map(|d| d.as_millis() as u64),
        },
        (None, None) => AttemptResult::Failed { error: "no response".into(), retry_after_ms: None },
    }
}
