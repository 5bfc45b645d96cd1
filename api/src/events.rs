//! `/v1/events`: ingest one envelope or a batch, find events by their
//! filters, read an event and its deliveries, replay it.

use super::error::ErrorCode;
use chrono::Utc;

use super::routes::Call;
use super::scope::tenant_filter;
use super::{cursor, parse, query, Api, ApiError, ApiResult, Request, Response};
use hookline_wire::events as wire;
use hookline_wire::{FieldIssue, Page};
use shared::access::Caller;
use shared::attempt::Attempt;
use shared::audit::{Action, AuditRecord};
use shared::envelope::{self, Format};
use shared::event::EventRecord;
use shared::event_search::{EventQuery, EventSummary, Order, Outcome, TypeFilter};
use shared::ids::{self, EventId, SubscriptionId};
use shared::ports::TimeRange;
use shared::saga::{Origin, OriginKind, Saga, SagaStatus};
use shared::stage::ingest;
use shared::stage::requeue::{self, ReplayRequest};

/// The most sagas (each with up to its policy's attempts, at most 50) one
/// page of `GET /v1/events/{id}/deliveries` holds, also its default: well
/// inside API Gateway's and Lambda's 6 MB response.
pub const MAX_DELIVERIES_PAGE: usize = 100;

/// The longest partition key a search takes (as an index key it must fit
/// DynamoDB's 2,048-byte partition key with the tenant scope).
const MAX_PARTITION_KEY: usize = 1024;

/// A stored format as the wire spells it (`change_feed`).
pub(crate) fn wire_format(f: Format) -> wire::EventFormat {
    match f {
        Format::Native => wire::EventFormat::Native,
        Format::ChangeFeed => wire::EventFormat::ChangeFeed,
        Format::DomainEvent => wire::EventFormat::DomainEvent,
        Format::Contract => wire::EventFormat::Contract,
    }
}

/// The format a request names.
fn stored_format(f: wire::EventFormat) -> Format {
    match f {
        wire::EventFormat::Native => Format::Native,
        wire::EventFormat::ChangeFeed => Format::ChangeFeed,
        wire::EventFormat::DomainEvent => Format::DomainEvent,
        wire::EventFormat::Contract => Format::Contract,
    }
}

/// An outcome as the wire spells it.
fn wire_outcome(o: Outcome) -> wire::EventOutcome {
    match o {
        Outcome::Failed => wire::EventOutcome::Failed,
        Outcome::DeadLettered => wire::EventOutcome::DeadLettered,
    }
}

/// A saga's status as the wire spells it (`dead_lettered`; storage keeps
/// `DeadLettered`).
pub(crate) fn wire_status(s: SagaStatus) -> wire::DeliveryStatus {
    match s {
        SagaStatus::Pending => wire::DeliveryStatus::Pending,
        SagaStatus::Waiting => wire::DeliveryStatus::Waiting,
        SagaStatus::InProgress => wire::DeliveryStatus::InProgress,
        SagaStatus::PendingRetry => wire::DeliveryStatus::PendingRetry,
        SagaStatus::Completed => wire::DeliveryStatus::Completed,
        SagaStatus::DeadLettered => wire::DeliveryStatus::DeadLettered,
    }
}

/// A saga's origin on the wire.
pub(crate) fn wire_origin(o: Origin) -> wire::DeliveryOrigin {
    wire::DeliveryOrigin {
        kind: match o.kind {
            OriginKind::Requeue => wire::OriginKind::Requeue,
            OriginKind::Replay => wire::OriginKind::Replay,
        },
        previous_saga_id: o.previous_saga_id.map(|s| s.into_string()),
        actor: o.actor,
        reason: o.reason,
        at: o.at,
    }
}

/// One attempt on the wire.
fn wire_attempt(a: &Attempt) -> wire::AttemptView {
    wire::AttemptView {
        attempt: a.attempt,
        status_code: a.status_code,
        error: a.error.clone(),
        latency_ms: a.latency_ms,
        at: a.at,
    }
}

/// One saga and its attempts on the wire.
fn delivery_view(s: Saga, attempts: &[Attempt]) -> wire::DeliveryView {
    wire::DeliveryView {
        status: wire_status(s.state.status),
        next_attempt_at: s.state.next_attempt_at,
        last_error: s.state.last_error,
        attempts: attempts.iter().map(wire_attempt).collect(),
        subscription_id: s.subscription_id.into_string(),
        saga_id: s.id.into_string(),
        webhook_id: s.webhook_id.into_string(),
        origin: s.origin.map(wire_origin),
    }
}

/// One found event on the wire.
fn list_item(e: EventSummary) -> wire::EventListItem {
    wire::EventListItem {
        id: e.id.into_string(),
        event_type: e.event_type,
        tenant_id: e.tenant_id.map(|t| t.as_str().to_string()),
        partition_key: e.partition_key,
        sequence: e.sequence,
        received_at: e.received_at,
        occurred_at: e.occurred_at,
        format: wire_format(e.format),
        outcome: e.outcome.map(wire_outcome),
    }
}

/// A stored event with its body, on the wire.
fn event_view(e: EventRecord) -> wire::EventView {
    wire::EventView {
        producer_id: envelope::producer_id(&e.body, e.format),
        body: e.body_json(),
        id: e.id.into_string(),
        event_type: e.event_type,
        tenant_id: e.tenant_id.map(|t| t.as_str().to_string()),
        partition_key: e.partition_key,
        sequence: e.sequence,
        trace_id: e.trace_id,
        producer: e.producer,
        format: wire_format(e.format),
        occurred_at: e.occurred_at,
        received_at: e.received_at,
        expires_at: e.expires_at,
    }
}

/// The filters of `GET /v1/events` ([`wire::EventListQuery`]), each
/// checked: an unknown parameter or a value not of its type is a `400`, a
/// value breaking a rule (a bad pattern, a partition key too long, a time
/// range outside the retention) a `422`, every bad filter reported at once;
/// newest first. A tenant-bound caller's `tenant_id` is forced to its own
/// ([`tenant_filter`]). Also the page size and the cursor as given.
pub fn event_query(
    req: &Request<'_>,
    retention: chrono::Duration,
    caller: &Caller,
) -> Result<(EventQuery, usize, Option<String>), ApiError> {
    let q: wire::EventListQuery = query::typed(req.query)?;
    let mut issues: Vec<FieldIssue> = Vec::new();
    let mut keep = |r: Result<(), ApiError>| {
        if let Err(e) = r {
            issues.extend(e.into_issues());
        }
    };
    let mut event_type = None;
    if let Some(t) = &q.event_type {
        keep(TypeFilter::parse(t.trim()).map(|t| event_type = t).map_err(|e| ApiError::invalid("event_type", e)));
    }
    let mut tenant_id = None;
    keep(super::subscriptions::tenant(q.tenant_id.clone()).map(|t| tenant_id = t));
    if let Some(k) = &q.partition_key {
        if k.is_empty() || k.len() > MAX_PARTITION_KEY || k.chars().any(char::is_control) {
            keep(Err(ApiError::invalid(
                "partition_key",
                format!("partition_key must be 1 to {MAX_PARTITION_KEY} bytes without control characters"),
            )));
        }
    }
    let mut received = TimeRange::default();
    keep(query::check_range(TimeRange { since: q.since, until: q.until }, retention, Utc::now()).map(|r| received = r));
    let mut limit = query::DEFAULT_PAGE;
    keep(query::page_limit(q.limit, query::DEFAULT_PAGE, query::MAX_PAGE).map(|l| limit = l));
    if let Some(e) = ApiError::fields(issues) {
        return Err(e);
    }
    let tenant_id = tenant_filter(caller, tenant_id, "tenant_id")?;
    let query = EventQuery {
        event_type,
        tenant_id,
        partition_key: q.partition_key,
        received,
        outcome: q.outcome.map(|o| match o {
            wire::EventOutcome::Failed => Outcome::Failed,
            wire::EventOutcome::DeadLettered => Outcome::DeadLettered,
        }),
        order: Order::NewestFirst,
    };
    Ok((query, limit, q.cursor))
}

/// The replay body, checked: every bad field reported at once (a missing
/// or bad `reason`, an empty or unprintable `replay_key` or
/// `subscription_id`), each a `422` naming it. The reason, trimmed.
fn check_replay(body: &wire::ReplayEventBody) -> Result<String, ApiError> {
    let mut issues: Vec<FieldIssue> = Vec::new();
    let reason = query::reason(body.reason.as_deref()).map_err(|e| issues.extend(e.into_issues())).ok();
    for (field, value) in [("subscription_id", &body.subscription_id), ("replay_key", &body.replay_key)] {
        let Some(v) = value else { continue };
        let bad = if v.trim().is_empty() {
            Some("must not be empty".to_string())
        } else {
            envelope::check_id(v).err().map(|e| e.to_string())
        };
        if let Some(m) = bad {
            issues.extend(ApiError::invalid(field, format!("{field} {m}")).into_issues());
        }
    }
    match (ApiError::fields(issues), reason) {
        (Some(e), _) => Err(e),
        (None, Some(r)) => Ok(r),
        (None, None) => Err(ApiError::new(ErrorCode::ReasonRequired, "a reason is required").on("reason")),
    }
}

/// The `Idempotency-Key` header of `POST /v1/events`, checked
/// ([`envelope::check_idempotency_key`]); a bad one is a 422 naming it.
fn idempotency_key<'a>(req: &Request<'a>) -> Result<Option<&'a str>, ApiError> {
    req.idempotency_key
        .map(|v| {
            envelope::check_idempotency_key(v).map_err(|e| {
                ApiError::new(ErrorCode::InvalidHeader, format!("invalid header `{IDEMPOTENCY_KEY}`: {e}"))
                    .on(IDEMPOTENCY_KEY)
            })
        })
        .transpose()
}

/// The header's name, as errors spell it.
const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

/// The query string of an ingest request ([`wire::IngestQuery`]): its
/// `?format=`, if any. A name that is no format is `400 unknown_format`
/// (as it always was); any other parameter `400 unknown_parameter`.
fn format(req: &Request<'_>) -> Result<Option<Format>, ApiError> {
    let q: wire::IngestQuery = query::typed(req.query).map_err(|e| {
        if e.code == ErrorCode::InvalidType && e.field.as_deref() == Some("format") {
            let names = Format::ALL.map(|f| wire_format(f)).map(|f| serde_json::to_string(&f).unwrap_or_default());
            ApiError::new(
                ErrorCode::UnknownFormat,
                format!("unknown format; `format` takes one of {}", names.join(", ")),
            )
            .on("format")
        } else {
            e
        }
    })?;
    Ok(q.format.map(stored_format))
}

impl Api {
    /// `POST /v1/events`. A tenant-bound producer posts its tenant's events
    /// only ([`envelope::Normalized::bind_tenant`]: another tenant is a
    /// `403` naming the format's tenant field; none is its tenant).
    pub(super) async fn post_event(&self, c: &Call<'_>) -> ApiResult {
        let req = &c.req;
        let format = format(req)?;
        let key = idempotency_key(req)?;
        let a = ingest::ingest(&self.hookline, req.body, format, key, c.caller.tenant.as_ref()).await?;
        Ok(Response::json(202, &wire::Accepted { event_id: a.event_id.into_string(), duplicate: a.duplicate }))
    }

    /// `POST /v1/events/batch`: each item as [`Api::post_event`] takes it
    /// (an item of another tenant is refused with its own `403`).
    pub(super) async fn post_batch(&self, c: &Call<'_>) -> ApiResult {
        let req = &c.req;
        let format = format(req)?;
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
        let results = ingest::ingest_batch(&self.hookline, req.body, format, c.caller.tenant.as_ref()).await?;
        let accepted = results.iter().filter(|r| r.is_ok()).count();
        let answer = wire::BatchAnswer {
            accepted,
            rejected: results.len() - accepted,
            results: results
                .into_iter()
                .enumerate()
                .map(|(index, r)| match r {
                    Ok(a) => wire::BatchResult::Accepted {
                        index,
                        status: 202,
                        event_id: a.event_id.into_string(),
                        duplicate: a.duplicate,
                    },
                    Err(e) => {
                        let error = ApiError::from(&e);
                        wire::BatchResult::Refused { index, status: error.status(), error: error.body().error }
                    }
                })
                .collect(),
        };
        Ok(Response::json(if answer.rejected == 0 { 202 } else { 207 }, &answer))
    }

    /// `GET /v1/events`: one page of the events matching the filters,
    /// newest first ([`shared::ports::EventStore::search`]).
    pub(super) async fn list_events(&self, c: &Call<'_>) -> ApiResult {
        let (q, limit, given) = event_query(&c.req, self.hookline.config.retention, &c.caller)?;
        let filters = q.fingerprint();
        let after = given
            .map(|c| {
                cursor::read(&self.cursor_key(), &c, &filters).map_err(|e| ApiError::invalid("cursor", e.to_string()))
            })
            .transpose()?;
        let page = self.hookline.stores.events.search(&q, limit, after.as_deref()).await?;
        Ok(Response::json(
            200,
            &Page::new(
                page.items.into_iter().map(list_item).collect(),
                page.next.map(|n| cursor::issue(&self.cursor_key(), &n, &filters)),
            ),
        ))
    }

    /// `GET /v1/events/{id}`: the event with its body. Takes no query
    /// parameter.
    pub(super) async fn get_event(&self, id: &EventId, req: &Request<'_>) -> ApiResult {
        query::typed::<query::NoQuery>(req.query)?;
        let e = self.hookline.stores.events.get(id).await?.ok_or_else(|| ApiError::not_found("event", id))?;
        Ok(Response::json(200, &event_view(e)))
    }

    /// `GET /v1/events/{id}/deliveries`: one page of the event's sagas
    /// (`?limit=` 1 to [`MAX_DELIVERIES_PAGE`], `?cursor=`), each with its
    /// attempts, read concurrently: a fan-out to thousands of subscriptions
    /// is paged, never read whole into one response.
    pub(super) async fn get_deliveries(&self, id: &EventId, req: &Request<'_>) -> ApiResult {
        let stores = &self.hookline.stores;
        let q: wire::DeliveriesQuery = query::typed(req.query)?;
        let limit = query::page_limit(q.limit, MAX_DELIVERIES_PAGE, MAX_DELIVERIES_PAGE)?;
        let filters = format!("deliveries:{id}");
        let after = q
            .cursor
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
        let items = page.items.into_iter().zip(attempts).map(|(s, a)| delivery_view(s, &a)).collect();
        let next_cursor = page.next.map(|n| cursor::issue(&self.cursor_key(), &n, &filters));
        Ok(Response::json(200, &Page::<wire::DeliveryView>::new(items, next_cursor)))
    }

    /// `POST /v1/events/{id}/replay`. A tenant-bound caller replays only
    /// into its tenant's subscriptions: one it names must be its own
    /// (`404` naming `subscription_id`), and without one, the global
    /// subscriptions are left out.
    pub(super) async fn replay(&self, id: &EventId, c: &Call<'_>) -> ApiResult {
        let req = &c.req;
        query::typed::<query::NoQuery>(req.query)?;
        let body: wire::ReplayEventBody = parse(req.body, true)?;
        let reason = check_replay(&body)?;
        let subscription_id = body.subscription_id.map(SubscriptionId::new);
        if let Some(s) = &subscription_id {
            self.visible_subscription(&c.caller, s, "subscription_id").await?;
        }
        let request = ReplayRequest {
            event_id: id.clone(),
            subscription_id,
            confined_to: c.caller.tenant.clone(),
            replay_key: body.replay_key.unwrap_or_else(|| ids::random_token("")),
            actor: c.caller.actor.clone(),
            reason,
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
            &wire::ReplayAnswer {
                event_id: id.as_str().to_string(),
                replay_key: request.replay_key,
                sagas: sagas
                    .into_iter()
                    .map(|(saga_id, subscription_id)| wire::ReplaySaga {
                        saga_id: saga_id.into_string(),
                        subscription_id: subscription_id.into_string(),
                    })
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
        let b: wire::ReplayEventBody = parse(body, true)?;
        check_replay(&b).map(|_| ())
    };
    usize::from(replay().is_ok())
}

/// For the fuzzer ([`crate::fuzzing`]): the query string and
/// `Idempotency-Key` header of the event routes read as their handlers
/// read them before any store call: `?format=` and the key of
/// `POST /v1/events`, the filters of `GET /v1/events` ([`event_query`]),
/// those of the deliveries.
pub(crate) fn fuzz_query(req: &Request<'_>, retention: chrono::Duration) -> usize {
    // A tenant-bound reader: its forced filter is part of what is read.
    let caller = Caller {
        actor: "key:fuzz".into(),
        role: shared::access::Role::Reader,
        tenant: Some(shared::ids::TenantId::new("acme")),
    };
    let query = event_query(req, retention, &caller).is_ok();
    let deliveries = query::typed::<wire::DeliveriesQuery>(req.query)
        .and_then(|q| query::page_limit(q.limit, MAX_DELIVERIES_PAGE, MAX_DELIVERIES_PAGE))
        .is_ok();
    [format(req).is_ok(), idempotency_key(req).is_ok(), query, deliveries].iter().filter(|ok| **ok).count()
}

/// This module's part of the OpenAPI document ([`super::openapi`]): its
/// routes' paths and the wire types they use.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi()]
    struct Part;
    <Part as utoipa::OpenApi>::openapi()
}
