//! `/v1/events`: ingest one envelope or a batch, find events by their
//! filters, read an event and its deliveries, replay it.

use super::error::{ErrorCode, Issues};
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
/// `DeadLettered`); a pull-only subscription's saga, stored `Completed`
/// with no attempt, is `filed_for_pull`: nothing was pushed.
pub(crate) fn wire_status(s: &shared::saga::SagaState) -> wire::DeliveryStatus {
    if s.is_filed_for_pull() {
        return wire::DeliveryStatus::FiledForPull;
    }
    match s.status {
        SagaStatus::Pending => wire::DeliveryStatus::Pending,
        SagaStatus::Waiting => wire::DeliveryStatus::Waiting,
        SagaStatus::InProgress => wire::DeliveryStatus::InProgress,
        SagaStatus::PendingRetry => wire::DeliveryStatus::PendingRetry,
        SagaStatus::AwaitingAck => wire::DeliveryStatus::AwaitingAck,
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
        response_excerpt: a.response_excerpt.clone(),
    }
}

/// One saga and its attempts on the wire.
fn delivery_view(s: Saga, attempts: &[Attempt], ack: Option<shared::ack::Acknowledgement>) -> wire::DeliveryView {
    wire::DeliveryView {
        acknowledgement: ack.map(ack_view),
        status: wire_status(&s.state),
        next_attempt_at: s.state.next_attempt_at,
        last_error: s.state.last_error,
        attempts: attempts.iter().map(wire_attempt).collect(),
        subscription_id: s.subscription_id.into_string(),
        saga_id: s.id.into_string(),
        webhook_id: s.webhook_id.into_string(),
        origin: s.origin.map(wire_origin),
    }
}

/// An acknowledgement on the wire.
pub(super) fn ack_view(a: shared::ack::Acknowledgement) -> hookline_wire::acknowledgements::Acknowledgement {
    hookline_wire::acknowledgements::Acknowledgement {
        subscription_id: a.subscription_id.into_string(),
        webhook_id: a.webhook_id.into_string(),
        attempt: a.attempt,
        status: match a.status {
            shared::ack::AckStatus::Processed => hookline_wire::acknowledgements::AckStatus::Processed,
            shared::ack::AckStatus::Failed => hookline_wire::acknowledgements::AckStatus::Failed,
        },
        reason: a.reason,
        reference: a.reference,
        received_at: a.received_at,
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
    let mut issues = Issues::default();
    let event_type = q.event_type.as_ref().and_then(|t| {
        issues.take(TypeFilter::parse(t.trim()).map_err(|e| ApiError::invalid("event_type", e))).flatten()
    });
    let tenant_id = issues.take(super::subscriptions::tenant(q.tenant_id.clone())).flatten();
    if let Some(k) = &q.partition_key {
        if k.is_empty() || k.len() > MAX_PARTITION_KEY || k.chars().any(char::is_control) {
            issues.push(ApiError::invalid(
                "partition_key",
                format!("partition_key must be 1 to {MAX_PARTITION_KEY} bytes without control characters"),
            ));
        }
    }
    let received = issues.take(query::check_range(TimeRange { since: q.since, until: q.until }, retention, Utc::now()));
    let limit = issues.take(query::page_limit(q.limit, query::DEFAULT_PAGE, query::MAX_PAGE));
    issues.check()?;
    let (received, limit) = (received.unwrap_or_default(), limit.unwrap_or(query::DEFAULT_PAGE));
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

// The header's check is the one of every route that takes a key.
use super::idempotency::{header as idempotency_key, HEADER as IDEMPOTENCY_KEY};

/// The query string of an ingest request ([`wire::IngestQuery`]): its
/// `?format=`, if any. A name that is no format is `400 unknown_format`
/// (as it always was); any other parameter `400 unknown_parameter`.
fn format(req: &Request<'_>) -> Result<Option<Format>, ApiError> {
    let q: wire::IngestQuery = query::typed(req.query).map_err(|e| {
        if e.code == ErrorCode::InvalidType && e.field.as_deref() == Some("format") {
            let names = Format::ALL.map(wire_format).map(|f| serde_json::to_string(&f).unwrap_or_default());
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
        q.check_listable(self.hookline.config.event_listing)?;
        let filters = q.fingerprint();
        let after = self.page_after("cursor", given.as_deref(), &filters)?;
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
        query::none(req.query)?;
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
        let after = self.page_after("cursor", q.cursor.as_deref(), &filters)?;
        stores.events.get(id).await?.ok_or_else(|| ApiError::not_found("event", id))?;
        let page = stores.sagas.page_for_event(id, limit, after.as_deref()).await?;
        let attempts: Vec<_> = shared::bounds::all_bounded(
            page.items.iter().map(|s| stores.attempts.list(&s.event_id, &s.id)).collect(),
            shared::bounds::MAX_STORE_IN_FLIGHT,
        )
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
        // The latest acknowledgement of each saga's (subscription,
        // webhook-id): one read per saga of the page, like its attempts.
        let acks: Vec<_> = shared::bounds::all_bounded(
            page.items.iter().map(|s| stores.acks.get(&s.subscription_id, &s.webhook_id)).collect(),
            shared::bounds::MAX_STORE_IN_FLIGHT,
        )
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
        let items =
            page.items.into_iter().zip(attempts).zip(acks).map(|((s, a), ack)| delivery_view(s, &a, ack)).collect();
        let next_cursor = page.next.map(|n| cursor::issue(&self.cursor_key(), &n, &filters));
        Ok(Response::json(200, &Page::<wire::DeliveryView>::new(items, next_cursor)))
    }

    /// `POST /v1/events/{id}/replay`. A tenant-bound caller replays only
    /// into its tenant's subscriptions: one it names must be its own
    /// (`404` naming `subscription_id`), and without one, the global
    /// subscriptions are left out.
    pub(super) async fn replay(&self, id: &EventId, c: &Call<'_>) -> ApiResult {
        let req = &c.req;
        query::none(req.query)?;
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
        subscription: None,
    };
    let query = event_query(req, retention, &caller).is_ok();
    let deliveries = query::typed::<wire::DeliveriesQuery>(req.query)
        .and_then(|q| query::page_limit(q.limit, MAX_DELIVERIES_PAGE, MAX_DELIVERIES_PAGE))
        .is_ok();
    [format(req).is_ok(), idempotency_key(req).is_ok(), query, deliveries].iter().filter(|ok| **ok).count()
}

/// The operations of this module as the OpenAPI document describes them
/// (`#[utoipa::path]` on bodiless functions: the handlers themselves take
/// the route table's [`Call`]). Each lists every status and error code its
/// route can answer.
#[allow(dead_code)]
mod spec {
    use hookline_wire::events as wire;
    use hookline_wire::{ErrorBody, Page};

    /// `POST /v1/events`.
    #[utoipa::path(
        post,
        path = "/v1/events",
        operation_id = "post_event",
        tag = "events",
        summary = "Post one event",
        description = "Stores one envelope in any of the four formats (docs/formats.md) and routes it to the matching subscriptions. \
            A second post with the same producer id (or `Idempotency-Key`) answers `duplicate: true` and stores nothing. \
            A tenant-bound producer key posts only its tenant's events.",
        params(
            wire::IngestQuery,
            ("Idempotency-Key" = Option<String>, Header, description = "Deduplication key for an envelope without its own id: 1 to 255 bytes of printable ASCII.")
        ),
        request_body(
            content = wire::Envelope,
            description = "One envelope. Extra fields are allowed in every format.",
            examples(
                ("native" = (summary = "native", value = json!({"id": "evt_1", "type": "order.created", "data": {"n": 1}, "tenant_id": "t1", "partition_key": "order:1"}))),
                ("change_feed" = (summary = "change feed", value = json!({"id": "de305d54", "entity_type": "UserProfile", "entity_id": "9b9a67cf", "change_type": "updated", "published_at": "2025-10-19T01:23:46Z", "payload": {"actor": "user:ops-001", "before": {"status": "active"}, "after": {"status": "active"}, "diff": {}, "recorded_at": "2025-10-19T01:23:45Z"}}))),
                ("domain_event" = (summary = "domain event", value = json!({"eventId": "0b6f3c1e", "schemaVersion": 1, "eventType": "RecordUpdated", "occurredAt": "2026-01-10T12:34:56.789Z", "tenantId": "acme", "producer": {"service": "core-platform", "instanceId": "pod-xyz"}, "correlationId": "c-1", "sequence": {"partitionKey": "Opportunity:acme:r1", "recordVersion": "2026-01-10T12:34:56.789Z"}, "payload": {}}))),
                ("contract" = (summary = "contract v1", value = json!({"eventId": "evt_task_failed_001", "eventType": "task.failed", "version": 1, "occurredAt": "2026-02-19T10:10:00Z", "traceId": "req_abcd", "producer": "worker-orchestrator", "idempotencyKey": "task:tsk_3001:attempt:2:failed", "riskFlags": [], "payload": {"taskId": "tsk_3001"}})))
            )
        ),
        responses(
            (status = 202, description = "Stored (or already stored: `duplicate`).", body = wire::Accepted,
                links(("event" = (operation_id = "get_event", parameters(("event" = "$response.body#/event_id")))),
                      ("deliveries" = (operation_id = "list_deliveries", parameters(("event" = "$response.body#/event_id")))))),
            (status = 400, description = "Could not be parsed: `malformed_json`, `not_an_object`, `missing_field`, `unknown_format` (`?format=`), `unknown_envelope` (no format detected), `unknown_parameter`.", body = ErrorBody,
                example = json!({"error": {"code": "missing_field", "message": "missing required field `type`", "field": "type", "errors": [{"field": "type", "code": "missing_field", "message": "missing required field `type`"}]}})),
            (status = 401, description = "`unauthorized`: no or a wrong credential.", body = ErrorBody),
            (status = 403, description = "`forbidden`: the role may not post events, or the envelope names another tenant than the key's (`field` names the tenant field).", body = ErrorBody),
            (status = 413, description = "`payload_too_large`: over 256 KiB.", body = ErrorBody),
            (status = 422, description = "A value broke a rule: `invalid_field` (naming the field: an event type's pattern, a blank id, a bad timestamp), `invalid_header` (`Idempotency-Key`).", body = ErrorBody,
                example = json!({"error": {"code": "invalid_field", "message": "invalid field `type`: contains a space, which is not allowed", "field": "type", "errors": [{"field": "type", "code": "invalid_field", "message": "invalid field `type`: contains a space, which is not allowed"}]}})),
            (status = 503, description = "`unavailable`: storage is down; nothing was stored.", body = ErrorBody)
        ),
        security(("bearer" = []), ("sigv4" = []))
    )]
    fn post_event() {}

    /// `POST /v1/events/batch`.
    #[utoipa::path(
        post,
        path = "/v1/events/batch",
        operation_id = "post_batch",
        tag = "events",
        summary = "Post up to 100 events",
        description = "Each envelope is validated on its own; the valid ones are stored in one write. `202` when every one was accepted, else `207` with each refusal's error.",
        params(wire::IngestQuery),
        request_body(
            content = Vec<wire::Envelope>,
            description = "A JSON array of 1 to 100 envelopes (each in any format; `?format=` applies to all), 256 KiB in all.",
            example = json!([{"id": "e1", "type": "order.created", "data": {}}, {"data": {}}])
        ),
        responses(
            (status = 202, description = "Every envelope accepted.", body = wire::BatchAnswer),
            (status = 207, description = "Some envelopes refused: each result says which and why.", body = wire::BatchAnswer),
            (status = 400, description = "`invalid_batch` (not an array of 1 to 100), `malformed_json`, `unknown_format`, `unknown_parameter`.", body = ErrorBody,
                example = json!({"error": {"code": "invalid_batch", "message": "a batch must be a JSON array of 1 to 100 envelopes"}})),
            (status = 401, description = "`unauthorized`.", body = ErrorBody),
            (status = 403, description = "`forbidden`: the role may not post events.", body = ErrorBody),
            (status = 413, description = "`payload_too_large`.", body = ErrorBody),
            (status = 422, description = "`invalid_header`: a batch takes no `Idempotency-Key`.", body = ErrorBody),
            (status = 503, description = "`unavailable`.", body = ErrorBody)
        ),
        security(("bearer" = []), ("sigv4" = []))
    )]
    fn post_batch() {}

    /// `GET /v1/events`.
    #[utoipa::path(
        get,
        path = "/v1/events",
        operation_id = "list_events",
        tag = "events",
        summary = "Find events",
        description = "One page of the stored events matching every filter given, newest first (by `received_at`).",
        params(wire::EventListQuery),
        responses(
            (status = 200, description = "One page.", body = Page<wire::EventListItem>,
                example = json!({"items": [{"id": "evt_1", "type": "order.created", "tenant_id": "acme", "partition_key": "order:1", "sequence": "1", "received_at": "2026-11-26T09:30:00Z", "occurred_at": "2026-11-26T09:29:59Z", "format": "native", "outcome": null}], "next_cursor": null})),
            (status = 400, description = "`unknown_parameter` (naming it), `invalid_type` (a time that is not RFC 3339, an unknown `outcome`, a `limit` that is no integer), `invalid_cursor` (a `cursor` not issued for these filters).", body = ErrorBody,
                example = json!({"error": {"code": "unknown_parameter", "message": "unknown query parameter `tenant`", "field": "tenant", "errors": [{"field": "tenant", "code": "unknown_parameter", "message": "unknown query parameter `tenant`"}]}})),
            (status = 401, description = "`unauthorized`.", body = ErrorBody),
            (status = 403, description = "`forbidden`: a tenant-bound key naming another tenant.", body = ErrorBody),
            (status = 409, description = "`listing_off`: neither `partition_key` nor `outcome` given where the deployment does not list events by time or by tenant (`EVENT_LISTING` off).", body = ErrorBody),
            (status = 422, description = "`invalid_field` (`event_type` pattern, `partition_key`, `tenant_id`, `limit` out of range), `invalid_range` (`until` before `since`, a bound outside the retention); every bad filter in `errors`.", body = ErrorBody),
            (status = 503, description = "`unavailable`.", body = ErrorBody)
        ),
        security(("bearer" = []), ("sigv4" = []))
    )]
    fn list_events() {}

    /// `GET /v1/events/{event}`.
    #[utoipa::path(
        get,
        path = "/v1/events/{event}",
        operation_id = "get_event",
        tag = "events",
        summary = "Read an event",
        params(("event" = String, Path, description = "The stored event id (percent-encoded).")),
        responses(
            (status = 200, description = "The event with its body.", body = wire::EventView),
            (status = 400, description = "`unknown_parameter`: the route takes no query parameter; `invalid_path`.", body = ErrorBody),
            (status = 401, description = "`unauthorized`.", body = ErrorBody),
            (status = 403, description = "`forbidden`: the role may not read.", body = ErrorBody),
            (status = 404, description = "`not_found` (or another tenant's).", body = ErrorBody),
            (status = 503, description = "`unavailable`.", body = ErrorBody)
        ),
        security(("bearer" = []), ("sigv4" = []))
    )]
    fn get_event() {}

    /// `GET /v1/events/{event}/deliveries`.
    #[utoipa::path(
        get,
        path = "/v1/events/{event}/deliveries",
        operation_id = "list_deliveries",
        tag = "events",
        summary = "List an event's deliveries",
        description = "One page of the event's deliveries (one per subscription, plus requeued and replayed ones), each with its attempts.",
        params(("event" = String, Path, description = "The stored event id."), wire::DeliveriesQuery),
        responses(
            (status = 200, description = "One page.", body = Page<wire::DeliveryView>,
                example = json!({"items": [{"subscription_id": "sub_1", "saga_id": "sag_1", "webhook_id": "msg_1", "status": "dead_lettered", "next_attempt_at": null, "last_error": "HTTP 500", "origin": null, "attempts": [{"attempt": 1, "status_code": 500, "error": "HTTP 500", "latency_ms": 12, "at": "2026-11-26T09:30:01Z"}]}], "next_cursor": null})),
            (status = 400, description = "`unknown_parameter`, `invalid_type` (`limit` not an integer), `invalid_cursor` (a `cursor` not of this event's deliveries).", body = ErrorBody),
            (status = 401, description = "`unauthorized`.", body = ErrorBody),
            (status = 403, description = "`forbidden`.", body = ErrorBody),
            (status = 404, description = "`not_found`.", body = ErrorBody),
            (status = 422, description = "`invalid_field`: `limit` out of 1 to 100.", body = ErrorBody),
            (status = 503, description = "`unavailable`.", body = ErrorBody)
        ),
        security(("bearer" = []), ("sigv4" = []))
    )]
    fn list_deliveries() {}

    /// `POST /v1/events/{event}/replay`.
    #[utoipa::path(
        post,
        path = "/v1/events/{event}/replay",
        operation_id = "replay_event",
        tag = "events",
        summary = "Replay an event",
        description = "Delivers the event again (new deliveries with the same `webhook-id` per subscription) to one subscription or every one that matches it now. The same `replay_key` replays once.",
        params(("event" = String, Path, description = "The stored event id.")),
        request_body(content = wire::ReplayEventBody, example = json!({"reason": "customer lost it", "subscription_id": "sub_123"})),
        responses(
            (status = 202, description = "The deliveries are queued.", body = wire::ReplayAnswer,
                links(("deliveries" = (operation_id = "list_deliveries", parameters(("event" = "$response.body#/event_id")))))),
            (status = 400, description = "`malformed_json`, `not_an_object`, `unknown_field`, `invalid_type`, `unknown_parameter`.", body = ErrorBody),
            (status = 401, description = "`unauthorized`.", body = ErrorBody),
            (status = 403, description = "`forbidden`: the role may not recover.", body = ErrorBody),
            (status = 404, description = "`not_found`: the event, or the `subscription_id` (or another tenant's).", body = ErrorBody),
            (status = 422, description = "`reason_required`, `invalid_field` (`reason`, `replay_key`, `subscription_id`), `subscription_not_matching`; every bad field in `errors`.", body = ErrorBody,
                example = json!({"error": {"code": "reason_required", "message": "a reason is required (it goes in the audit trail) (and 1 more bad field: see errors)", "field": "reason", "errors": [
                    {"field": "reason", "code": "reason_required", "message": "a reason is required (it goes in the audit trail)"},
                    {"field": "replay_key", "code": "invalid_field", "message": "replay_key must not be empty"}]}})),
            (status = 503, description = "`unavailable`.", body = ErrorBody)
        ),
        security(("bearer" = []), ("sigv4" = []))
    )]
    fn replay_event() {}

    /// This module's part of the document.
    #[derive(utoipa::OpenApi)]
    #[openapi(
        paths(post_event, post_batch, list_events, get_event, list_deliveries, replay_event),
        components(schemas(
            wire::EventFormat,
            wire::Envelope,
            wire::NativeEnvelope,
            wire::ChangeFeedEnvelope,
            wire::ChangeType,
            wire::DomainEventEnvelope,
            wire::DomainEventProducer,
            wire::DomainEventSequence,
            wire::ContractEnvelope,
            wire::Accepted,
            wire::BatchAnswer,
            wire::BatchResult,
            wire::EventOutcome,
            wire::EventListItem,
            wire::EventView,
            wire::DeliveryStatus,
            wire::OriginKind,
            wire::DeliveryOrigin,
            wire::AttemptView,
            wire::DeliveryView,
            wire::ReplayEventBody,
            wire::ReplaySaga,
            wire::ReplayAnswer
        )),
        tags((name = "events", description = "Post events, find them, read their deliveries, replay them."))
    )]
    pub(super) struct Part;
}

/// This module's part of the OpenAPI document ([`super::openapi`]): its
/// routes' paths and the wire types they use.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    <spec::Part as utoipa::OpenApi>::openapi()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route of this module, `/v1/audit`, `/healthz` and `/metrics`
    /// is in the document with the method the route table gives, a
    /// security requirement naming the schemes (none for `/healthz`), and
    /// every error answer in the one error body.
    #[test]
    fn the_document_has_every_route_of_events_audit_and_operations() {
        let mut doc = openapi();
        doc.merge(super::super::audit::openapi());
        let json = serde_json::to_value(&doc).unwrap();
        let mine = |p: &str| p.starts_with("/v1/events") || p == "/v1/audit" || p == "/healthz" || p == "/metrics";
        let routes: Vec<_> = super::super::routes::ROUTES.iter().filter(|r| mine(r.path)).collect();
        assert_eq!(routes.len(), 9);
        for r in routes {
            let op = &json["paths"][r.path][r.method.to_ascii_lowercase()];
            assert!(op.is_object(), "{} {} is not in the document", r.method, r.path);
            let security = op["security"].as_array().unwrap_or_else(|| panic!("{} {}: security", r.method, r.path));
            if r.path == "/healthz" {
                assert!(security.is_empty(), "/healthz is open");
            } else {
                let names: Vec<_> = security.iter().flat_map(|s| s.as_object().unwrap().keys().cloned()).collect();
                assert_eq!(names, ["bearer", "sigv4"], "{} {}", r.method, r.path);
                assert!(op["responses"]["401"].is_object(), "{} {} answers 401", r.method, r.path);
            }
            for (status, resp) in op["responses"].as_object().unwrap() {
                if status.starts_with('4') || status.starts_with('5') {
                    let schema = &resp["content"]["application/json"]["schema"]["$ref"];
                    assert_eq!(schema, "#/components/schemas/ErrorBody", "{} {} {status}", r.method, r.path);
                    let text = resp["description"].as_str().unwrap();
                    assert!(text.contains('`'), "{} {} {status} names its codes: {text}", r.method, r.path);
                }
            }
        }
    }

    /// The enums that reach the wire from these routes are snake_case, and
    /// `?format=` still takes the kebab-case names producers send.
    #[test]
    fn wire_spellings_are_snake_case_and_old_formats_are_read() {
        for f in Format::ALL {
            let name = serde_json::to_value(wire_format(f)).unwrap();
            let name = name.as_str().unwrap().to_string();
            assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{name}");
            let old: wire::IngestQuery = query::typed(Some(&format!("format={}", f.as_str()))).unwrap();
            let new: wire::IngestQuery = query::typed(Some(&format!("format={name}"))).unwrap();
            assert_eq!((old.format.map(stored_format), new.format.map(stored_format)), (Some(f), Some(f)));
        }
        for s in [
            SagaStatus::Pending,
            SagaStatus::Waiting,
            SagaStatus::InProgress,
            SagaStatus::PendingRetry,
            SagaStatus::Completed,
            SagaStatus::DeadLettered,
        ] {
            let state = shared::saga::SagaState { status: s, attempts: 1, next_attempt_at: None, last_error: None };
            let name = serde_json::to_value(wire_status(&state)).unwrap();
            assert!(name.as_str().unwrap().bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{name}");
        }
        let dead = shared::saga::SagaState {
            status: SagaStatus::DeadLettered,
            attempts: 3,
            next_attempt_at: None,
            last_error: None,
        };
        assert_eq!(serde_json::to_value(wire_status(&dead)).unwrap(), "dead_lettered");
        let filed = shared::saga::SagaState::filed_for_pull();
        assert_eq!(serde_json::to_value(wire_status(&filed)).unwrap(), "filed_for_pull", "no push is claimed");
        assert_eq!(serde_json::to_value(wire_outcome(Outcome::DeadLettered)).unwrap(), "dead_lettered");
        let e = format(&Request { query: Some("format=xml"), ..request() }).unwrap_err();
        assert_eq!((e.code, e.field.as_deref()), (ErrorCode::UnknownFormat, Some("format")));
        let e = format(&Request { query: Some("format=native&formt=x"), ..request() }).unwrap_err();
        assert_eq!((e.code, e.field.as_deref()), (ErrorCode::UnknownParameter, Some("formt")));
    }

    /// Every bad field of a replay body is reported, each with its code.
    #[test]
    fn a_replay_body_reports_every_bad_field() {
        let body = |j: serde_json::Value| serde_json::from_value::<wire::ReplayEventBody>(j).unwrap();
        let e = check_replay(&body(serde_json::json!({"replay_key": " ", "subscription_id": "a\u{7}b"}))).unwrap_err();
        let fields: Vec<_> = e.issues.iter().map(|i| (i.field.as_str(), i.code)).collect();
        assert_eq!(
            fields,
            [
                ("reason", ErrorCode::ReasonRequired),
                ("subscription_id", ErrorCode::InvalidField),
                ("replay_key", ErrorCode::InvalidField)
            ]
        );
        assert_eq!(e.status(), 422);
        assert_eq!(check_replay(&body(serde_json::json!({"reason": " why "}))).unwrap(), "why");
    }

    /// Every bad filter of `GET /v1/events` is reported at once.
    #[test]
    fn event_filters_report_every_bad_one() {
        let caller =
            Caller { actor: "key:t".into(), role: shared::access::Role::Reader, tenant: None, subscription: None };
        let req = Request { query: Some("event_type=a%20b&limit=0&partition_key="), ..request() };
        let e = event_query(&req, chrono::Duration::days(7), &caller).unwrap_err();
        let fields: Vec<_> = e.issues.iter().map(|i| i.field.as_str()).collect();
        assert_eq!(fields, ["event_type", "partition_key", "limit"], "{e:?}");
        let req = Request { query: Some("tenant=acme"), ..request() };
        let e = event_query(&req, chrono::Duration::days(7), &caller).unwrap_err();
        assert_eq!((e.status(), e.field.as_deref()), (400, Some("tenant")));
    }

    fn request() -> Request<'static> {
        Request {
            method: "GET",
            path: "/v1/events",
            query: None,
            authorization: None,
            idempotency_key: None,
            principal: None,
            actor_header: None,
            signed: Default::default(),
            body: b"",
        }
    }
}
