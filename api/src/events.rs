//! `/v1/events`: ingest one envelope or a batch, find events by their
//! filters, read an event and its deliveries, replay it.

use super::error::ErrorCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::routes::Call;
use super::scope::tenant_filter;
use super::{cursor, parse, query, query_param, Api, ApiError, ApiResult, Request, Response};
use shared::access::Caller;
use shared::audit::{Action, AuditRecord};
use shared::envelope::{self, Format};
use shared::event_search::{EventQuery, EventSummary, Order, Outcome, TypeFilter};
use shared::ids::{self, EventId, SagaId, SubscriptionId, TenantId, WebhookId};
use shared::saga::Origin;
use shared::stage::ingest;
use shared::stage::requeue::{self, ReplayRequest};

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
    tenant_id: Option<TenantId>,
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
    /// The next page's cursor; `null` on the last page.
    next_cursor: Option<String>,
}

/// The most sagas (each with up to its policy's attempts, at most 50) one
/// page of `GET /v1/events/{id}/deliveries` holds, also its default: well
/// inside API Gateway's and Lambda's 6 MB response.
pub const MAX_DELIVERIES_PAGE: usize = 100;

/// A page of `GET /v1/events`.
#[derive(Serialize)]
struct EventList {
    items: Vec<EventItem>,
    next_cursor: Option<String>,
}

/// One item of `GET /v1/events`: the event without its body.
#[derive(Serialize)]
struct EventItem {
    id: EventId,
    #[serde(rename = "type")]
    event_type: String,
    tenant_id: Option<TenantId>,
    partition_key: Option<String>,
    sequence: Option<String>,
    received_at: DateTime<Utc>,
    occurred_at: DateTime<Utc>,
    format: Format,
    outcome: Option<Outcome>,
}

impl From<EventSummary> for EventItem {
    fn from(e: EventSummary) -> Self {
        EventItem {
            id: e.id,
            event_type: e.event_type,
            tenant_id: e.tenant_id,
            partition_key: e.partition_key,
            sequence: e.sequence,
            received_at: e.received_at,
            occurred_at: e.occurred_at,
            format: e.format,
            outcome: e.outcome,
        }
    }
}

/// The longest partition key a search takes (as an index key it must fit
/// DynamoDB's 2,048-byte partition key with the tenant scope).
const MAX_PARTITION_KEY: usize = 1024;

/// The filters of `GET /v1/events`, each checked (a bad one is a `400`, an
/// impossible time range a `422`, naming it); newest first.
/// A tenant-bound caller's `tenant_id` is forced to its own
/// ([`tenant_filter`]).
pub fn event_query(req: &Request<'_>, retention: chrono::Duration, caller: &Caller) -> Result<EventQuery, ApiError> {
    let event_type = match query_param(req.query, "event_type") {
        None => None,
        Some(t) => TypeFilter::parse(t.trim()).map_err(|e| ApiError::invalid("event_type", e))?,
    };
    let tenant_id = super::subscriptions::tenant(query_param(req.query, "tenant_id"))?;
    let tenant_id = tenant_filter(caller, tenant_id, "tenant_id")?;
    let partition_key = query_param(req.query, "partition_key");
    if let Some(k) = &partition_key {
        if k.is_empty() || k.len() > MAX_PARTITION_KEY || k.chars().any(char::is_control) {
            return Err(ApiError::invalid(
                "partition_key",
                format!("partition_key must be 1 to {MAX_PARTITION_KEY} bytes without control characters"),
            ));
        }
    }
    let outcome = query_param(req.query, "outcome")
        .map(|o| o.parse::<Outcome>().map_err(|e| ApiError::invalid("outcome", e)))
        .transpose()?;
    Ok(EventQuery {
        event_type,
        tenant_id,
        partition_key,
        received: query::time_range(req, retention)?,
        outcome,
        order: Order::NewestFirst,
    })
}

/// `POST /v1/events/{id}/replay`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplayBody {
    #[serde(default)]
    reason: Option<String>,
    /// Accepted for old clients and ignored: the actor is who
    /// authenticated ([`Caller::actor`](shared::access::Caller::actor)).
    #[serde(default)]
    #[allow(dead_code)]
    actor: Option<serde::de::IgnoredAny>,
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

// The header's check is the one of every route that takes a key.
use super::idempotency::{header as idempotency_key, HEADER as IDEMPOTENCY_KEY};

/// The `?format=` of an ingest request, if any.
fn format(req: &Request<'_>) -> Result<Option<Format>, ApiError> {
    match query_param(req.query, "format") {
        None => Ok(None),
        Some(f) => f.parse::<Format>().map(Some).map_err(|e| ApiError::from(&e)),
    }
}

impl Api {
    /// `POST /v1/events`. A tenant-bound producer posts its tenant's events
    /// only ([`envelope::Normalized::bind_tenant`]: another tenant is a
    /// `403` naming the format's tenant field; none is its tenant).
    pub(super) async fn post_event(&self, c: &Call<'_>) -> ApiResult {
        let req = &c.req;
        let key = idempotency_key(req)?;
        let a = ingest::ingest(&self.hookline, req.body, format(req)?, key, c.caller.tenant.as_ref()).await?;
        Ok(Response::json(202, &Accepted { event_id: a.event_id, duplicate: a.duplicate }))
    }

    /// `POST /v1/events/batch`: each item as [`Api::post_event`] takes it
    /// (an item of another tenant is refused with its own `403`).
    pub(super) async fn post_batch(&self, c: &Call<'_>) -> ApiResult {
        let req = &c.req;
        // One key cannot stand for many events, and ignoring it would let a
        // producer believe its retries of id-less items are safe.
        if req.idempotency_key.is_some() {
            return Err(ApiError::new(
                ErrorCode::InvalidHeader,
                format!(
                    "`{IDEMPOTENCY_KEY}` is not taken by a batch; give each envelope its own id \
                     (or post it alone to /v1/events with the header)"
                ),
            )
            .on(IDEMPOTENCY_KEY));
        }
        let results = ingest::ingest_batch(&self.hookline, req.body, format(req)?, c.caller.tenant.as_ref()).await?;
        let accepted = results.iter().filter(|r| r.is_ok()).count();
        let answer = BatchAnswer {
            accepted,
            rejected: results.len() - accepted,
            results: results
                .into_iter()
                .enumerate()
                .map(|(index, r)| match r {
                    Ok(a) => BatchItem::Accepted { index, status: 202, event_id: a.event_id, duplicate: a.duplicate },
                    Err(e) => {
                        let error = ApiError::from(&e);
                        BatchItem::Refused { index, status: error.status(), error }
                    }
                })
                .collect(),
        };
        Ok(Response::json(if answer.rejected == 0 { 202 } else { 207 }, &answer))
    }

    /// `GET /v1/events`: one page of the events matching the filters,
    /// newest first ([`shared::ports::EventStore::search`]).
    pub(super) async fn list_events(&self, c: &Call<'_>) -> ApiResult {
        let req = &c.req;
        let q = event_query(req, self.hookline.config.retention, &c.caller)?;
        let limit = query::limit(req)?;
        let filters = q.fingerprint();
        let after = query_param(req.query, "cursor")
            .map(|c| {
                cursor::read(&self.cursor_key(), &c, &filters).map_err(|e| ApiError::invalid("cursor", e.to_string()))
            })
            .transpose()?;
        let page = self.hookline.stores.events.search(&q, limit, after.as_deref()).await?;
        Ok(Response::json(
            200,
            &EventList {
                items: page.items.into_iter().map(EventItem::from).collect(),
                next_cursor: page.next.map(|n| cursor::issue(&self.cursor_key(), &n, &filters)),
            },
        ))
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

    /// `GET /v1/events/{id}/deliveries`: one page of the event's sagas
    /// (`?limit=` 1 to [`MAX_DELIVERIES_PAGE`], `?cursor=`), each with its
    /// attempts, read concurrently: a fan-out to thousands of subscriptions
    /// is paged, never read whole into one response.
    pub(super) async fn get_deliveries(&self, id: &EventId, req: &Request<'_>) -> ApiResult {
        let stores = &self.hookline.stores;
        let limit = match query_param(req.query, "limit") {
            None => MAX_DELIVERIES_PAGE,
            Some(l) => l.parse::<usize>().ok().filter(|n| (1..=MAX_DELIVERIES_PAGE).contains(n)).ok_or_else(|| {
                ApiError::invalid("limit", format!("limit must be an integer between 1 and {MAX_DELIVERIES_PAGE}"))
            })?,
        };
        let filters = format!("deliveries:{id}");
        let after = query_param(req.query, "cursor")
            .map(|c| {
                cursor::read(&self.cursor_key(), &c, &filters).map_err(|e| ApiError::invalid("cursor", e.to_string()))
            })
            .transpose()?;
        stores.events.get(id).await?.ok_or_else(|| ApiError::not_found("event", id))?;
        let page = stores.sagas.page_for_event(id, limit, after.as_deref()).await?;
        let attempts: Vec<_> = shared::bounds::all_bounded(
            page.items.iter().map(|s| stores.attempts.list(&s.id)).collect(),
            shared::bounds::MAX_STORE_IN_FLIGHT,
        )
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
        let deliveries = page
            .items
            .into_iter()
            .zip(attempts)
            .map(|(s, attempts)| DeliveryView {
                status: s.state.status.as_str(),
                next_attempt_at: s.state.next_attempt_at,
                last_error: s.state.last_error,
                attempts: attempts.iter().map(|a| a.to_public_json()).collect(),
                subscription_id: s.subscription_id,
                saga_id: s.id,
                webhook_id: s.webhook_id,
                origin: s.origin,
            })
            .collect();
        let next_cursor = page.next.map(|n| cursor::issue(&self.cursor_key(), &n, &filters));
        Ok(Response::json(200, &Deliveries { event_id: id, deliveries, next_cursor }))
    }

    /// `POST /v1/events/{id}/replay`. A tenant-bound caller replays only
    /// into its tenant's subscriptions: one it names must be its own
    /// (`404` naming `subscription_id`), and without one, the global
    /// subscriptions are left out.
    pub(super) async fn replay(&self, id: &EventId, c: &Call<'_>) -> ApiResult {
        let req = &c.req;
        let body: ReplayBody = parse(req.body, true)?;
        if let Some(s) = &body.subscription_id {
            self.visible_subscription(&c.caller, s, "subscription_id").await?;
        }
        let request = ReplayRequest {
            event_id: id.clone(),
            subscription_id: body.subscription_id,
            confined_to: c.caller.tenant.clone(),
            replay_key: body.replay_key.unwrap_or_else(|| ids::random_token("")),
            actor: c.caller.actor.clone(),
            reason: super::query::reason(body.reason.as_deref())?,
        };
        let sagas = requeue::request_replay(&self.hookline, &request).await?;
        // Recorded once the replay is queued: a count, not the list of
        // sagas, so a replay to thousands of subscriptions still fits one
        // audit item (400 KB on DynamoDB); a replay to one subscription
        // names its saga.
        let mut details = serde_json::json!({"replay_key": request.replay_key, "sagas": sagas.len()});
        if let ([(saga_id, _)], Some(_)) = (sagas.as_slice(), &request.subscription_id) {
            details["saga_id"] = serde_json::json!(saga_id);
        }
        let tenant = self.hookline.stores.events.get(id).await.ok().flatten().and_then(|e| e.tenant_id);
        let mut rec = AuditRecord::new(Action::EventReplayed, &request.actor)
            .reason(&request.reason)
            .event(id)
            .tenant(tenant.as_ref().or(c.caller.tenant.as_ref()))
            .details(details);
        if let Some(s) = &request.subscription_id {
            rec = rec.subscription(s);
        }
        self.hookline.audit(rec).await;
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

/// For the fuzzer ([`crate::fuzzing`]): `body` read as the body of
/// `POST /v1/events/{id}/replay` and checked as its handler does before
/// any store call; whether it was accepted. Never panics.
pub(crate) fn fuzz_bodies(body: &[u8]) -> usize {
    let replay = || -> Result<(), ApiError> {
        let b: ReplayBody = parse(body, true)?;
        query::reason(b.reason.as_deref()).map(|_| ())
    };
    usize::from(replay().is_ok())
}

/// For the fuzzer ([`crate::fuzzing`]): the query string and
/// `Idempotency-Key` header of the event routes read as their handlers
/// read them before any store call: `?format=` and the key of
/// `POST /v1/events`, the filters of `GET /v1/events` ([`event_query`]).
pub(crate) fn fuzz_query(req: &Request<'_>, retention: chrono::Duration) -> usize {
    // A tenant-bound reader: its forced filter is part of what is read.
    let caller = Caller {
        actor: "key:fuzz".into(),
        role: shared::access::Role::Reader,
        tenant: Some(shared::ids::TenantId::new("acme")),
    };
    let query = event_query(req, retention, &caller).is_ok();
    [format(req).is_ok(), idempotency_key(req).is_ok(), query, query::limit(req).is_ok()]
        .iter()
        .filter(|ok| **ok)
        .count()
}

/// This module's part of the OpenAPI document ([`super::openapi`]): its
/// routes' paths and the wire types they use.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi()]
    struct Part;
    <Part as utoipa::OpenApi>::openapi()
}
