//! `/v1/events`: ingest one envelope or a batch, read an event and its
//! deliveries, replay it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{parse, query_param, Api, ApiError, ApiResult, Request, Response};
use crate::envelope::{self, Format};
use crate::ids::{self, EventId, SagaId, SubscriptionId, WebhookId};
use crate::saga::Origin;
use crate::stage::ingest;
use crate::stage::requeue::{self, ReplayRequest};

/// `202` for one accepted envelope.
#[derive(Serialize)]
struct Accepted {
    event_id: EventId,
    duplicate: bool,
}

/// One item of a batch answer: accepted, or refused with the error.
#[derive(Serialize)]
#[serde(untagged)]
enum BatchItem {
    Accepted { index: usize, status: u16, event_id: EventId, duplicate: bool },
    Refused { index: usize, status: u16, error: ApiError },
}

/// The batch answer (`202`, or `207` when some items were refused).
#[derive(Serialize)]
struct BatchAnswer {
    accepted: usize,
    rejected: usize,
    results: Vec<BatchItem>,
}

/// A stored event as the API shows it.
#[derive(Serialize)]
struct EventView {
    id: EventId,
    producer_id: Option<String>,
    #[serde(rename = "type")]
    event_type: String,
    tenant_id: Option<String>,
    partition_key: Option<String>,
    sequence: Option<String>,
    trace_id: Option<String>,
    producer: Option<String>,
    format: Format,
    occurred_at: DateTime<Utc>,
    received_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
    body: serde_json::Value,
}

/// One saga of an event, with its attempts.
#[derive(Serialize)]
struct DeliveryView {
    subscription_id: SubscriptionId,
    saga_id: SagaId,
    webhook_id: WebhookId,
    status: &'static str,
    next_attempt_at: Option<DateTime<Utc>>,
    last_error: Option<String>,
    origin: Option<Origin>,
    attempts: Vec<serde_json::Value>,
}

#[derive(Serialize)]
struct Deliveries<'a> {
    event_id: &'a EventId,
    deliveries: Vec<DeliveryView>,
}

/// `POST /v1/events/{id}/replay`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplayBody {
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    subscription_id: Option<SubscriptionId>,
    #[serde(default)]
    replay_key: Option<String>,
}

#[derive(Serialize)]
struct ReplaySaga {
    saga_id: SagaId,
    subscription_id: SubscriptionId,
}

#[derive(Serialize)]
struct ReplayAnswer<'a> {
    event_id: &'a EventId,
    replay_key: String,
    sagas: Vec<ReplaySaga>,
}

/// The `Idempotency-Key` header of `POST /v1/events`, checked
/// ([`envelope::check_idempotency_key`]); a bad one is a 400 naming it.
fn idempotency_key<'a>(req: &Request<'a>) -> Result<Option<&'a str>, ApiError> {
    req.idempotency_key
        .map(|v| {
            envelope::check_idempotency_key(v).map_err(|e| {
                ApiError::new(400, "invalid_header", format!("invalid header `{IDEMPOTENCY_KEY}`: {e}"))
                    .on(IDEMPOTENCY_KEY)
            })
        })
        .transpose()
}

/// The header's name, as errors spell it.
const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

/// The `?format=` of an ingest request, if any.
fn format(req: &Request<'_>) -> Result<Option<Format>, ApiError> {
    match query_param(req.query, "format") {
        None => Ok(None),
        Some(f) => f.parse::<Format>().map(Some).map_err(|e| ApiError::from(&e)),
    }
}

impl Api {
    pub(super) async fn post_event(&self, req: &Request<'_>) -> ApiResult {
        let key = idempotency_key(req)?;
        let a = ingest::ingest(&self.hookline, req.body, format(req)?, key).await?;
        Ok(Response::json(202, &Accepted { event_id: a.event_id, duplicate: a.duplicate }))
    }

    pub(super) async fn post_batch(&self, req: &Request<'_>) -> ApiResult {
        // One key cannot stand for many events, and ignoring it would let a
        // producer believe its retries of id-less items are safe.
        if req.idempotency_key.is_some() {
            return Err(ApiError::new(
                400,
                "invalid_header",
                format!(
                    "`{IDEMPOTENCY_KEY}` is not taken by a batch; give each envelope its own id \
                     (or post it alone to /v1/events with the header)"
                ),
            )
            .on(IDEMPOTENCY_KEY));
        }
        let results = ingest::ingest_batch(&self.hookline, req.body, format(req)?).await?;
        let accepted = results.iter().filter(|r| r.is_ok()).count();
        let answer = BatchAnswer {
            accepted,
            rejected: results.len() - accepted,
            results: results
                .into_iter()
                .enumerate()
                .map(|(index, r)| match r {
                    Ok(a) => BatchItem::Accepted { index, status: 202, event_id: a.event_id, duplicate: a.duplicate },
                    Err(e) => BatchItem::Refused { index, status: 400, error: ApiError::from(&e) },
                })
                .collect(),
        };
        Ok(Response::json(if answer.rejected == 0 { 202 } else { 207 }, &answer))
    }

    pub(super) async fn get_event(&self, id: &EventId) -> ApiResult {
        let e = self.hookline.stores.events.get(id).await?.ok_or_else(|| ApiError::not_found("event", id))?;
        Ok(Response::json(
            200,
            &EventView {
                producer_id: envelope::producer_id(&e.body, e.format),
                body: e.body_json(),
                id: e.id,
                event_type: e.event_type,
                tenant_id: e.tenant_id,
                partition_key: e.partition_key,
                sequence: e.sequence,
                trace_id: e.trace_id,
                producer: e.producer,
                format: e.format,
                occurred_at: e.occurred_at,
                received_at: e.received_at,
                expires_at: e.expires_at,
            },
        ))
    }

    pub(super) async fn get_deliveries(&self, id: &EventId) -> ApiResult {
        let stores = &self.hookline.stores;
        stores.events.get(id).await?.ok_or_else(|| ApiError::not_found("event", id))?;
        let sagas = stores.sagas.list_for_event(id).await?;
        let mut deliveries = Vec::with_capacity(sagas.len());
        for s in sagas {
            let attempts = stores.attempts.list(&s.id).await?;
            deliveries.push(DeliveryView {
                status: s.state.status.as_str(),
                next_attempt_at: s.state.next_attempt_at,
                last_error: s.state.last_error,
                attempts: attempts.iter().map(|a| a.to_public_json()).collect(),
                subscription_id: s.subscription_id,
                saga_id: s.id,
                webhook_id: s.webhook_id,
                origin: s.origin,
            });
        }
        Ok(Response::json(200, &Deliveries { event_id: id, deliveries }))
    }

    pub(super) async fn replay(&self, id: &EventId, req: &Request<'_>) -> ApiResult {
        let body: ReplayBody = parse(req.body, true)?;
        let request = ReplayRequest {
            event_id: id.clone(),
            subscription_id: body.subscription_id,
            replay_key: body.replay_key.unwrap_or_else(|| ids::random_token("")),
            actor: self.actor(req),
            reason: super::query::reason(body.reason.as_deref())?,
        };
        let sagas = requeue::request_replay(&self.hookline, &request).await?;
        Ok(Response::json(
            202,
            &ReplayAnswer {
                event_id: id,
                replay_key: request.replay_key,
                sagas: sagas
                    .into_iter()
                    .map(|(saga_id, subscription_id)| ReplaySaga { saga_id, subscription_id })
                    .collect(),
            },
        ))
    }
}
