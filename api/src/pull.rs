//! `GET /v1/subscriptions/{subscription}/events`: pull
//! (docs/delivery.md#pull). The events routed to a subscription with
//! `pull: true`, in routing order from a cursor, each with the body and
//! headers a push of it would carry (signed now with the subscription's
//! secrets, so the subscriber verifies a pulled event as a pushed one).
//! Reading only: a pull changes no delivery, and the pushes go on.

use hookline_wire::pull as wire;
use hookline_wire::ErrorBody;
use shared::bounds::{all_bounded, MAX_STORE_IN_FLIGHT};
use shared::ids::{self, SubscriptionId};
use shared::message::DeliveryJob;
use shared::pull::{pulled_headers, DEFAULT_PULL_PAGE, MAX_PULL_PAGE};

use super::routes::Call;
use super::{cursor, query, Api, ApiError, ApiResult, ErrorCode, Response};

impl Api {
    /// `GET /v1/subscriptions/{id}/events?after=&limit=`: one read of the
    /// pull index, one read per event (at most [`MAX_PULL_PAGE`]). An event
    /// no longer stored (its retention ended) is skipped. `next_cursor` is
    /// always where to go on from: after the last event returned, or the
    /// cursor given when the page is empty (caught up).
    pub(super) async fn pull(&self, id: &SubscriptionId, c: &Call<'_>) -> ApiResult {
        let q: wire::PullQuery = query::typed(c.req.query)?;
        let limit = query::page_limit(q.limit, DEFAULT_PULL_PAGE, MAX_PULL_PAGE)?;
        let filters = format!("pull:{id}");
        let after = self.page_after("after", q.after.as_deref(), &filters)?;
        let stores = &self.hookline.stores;
        let sub = stores.subscriptions.get(id).await?.ok_or_else(|| ApiError::not_found("subscription", id))?;
        if !sub.pull {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                format!("subscription {id} is not pulled: set \"pull\": true (events routed from then on are listed)"),
            ));
        }
        let page = stores.sagas.page_for_pull(id, limit, after.as_deref()).await?;
        let events: Vec<_> =
            all_bounded(page.items.iter().map(|p| stores.events.get(&p.event_id)).collect(), MAX_STORE_IN_FLIGHT)
                .await
                .into_iter()
                .collect::<Result<_, _>>()?;
        let mut data = Vec::with_capacity(page.items.len());
        for (p, event) in page.items.iter().zip(events) {
            let Some(event) = event else { continue };
            let webhook_id = ids::webhook_id(&event.id, &sub.id);
            let job = DeliveryJob::new(p.saga_id.clone(), event.id.clone(), sub.id.clone(), webhook_id.clone(), 1);
            let (headers, body) = shared::stage::deliver::request(&sub, &event, &job);
            data.push(wire::PulledEvent {
                webhook_id: webhook_id.into_string(),
                event_id: event.id.to_string(),
                headers: pulled_headers(&sub, headers).into_iter().collect(),
                body: String::from_utf8_lossy(&body).into_owned(),
            });
        }
        let next_cursor = match page.items.last() {
            Some(last) => Some(cursor::issue(&self.cursor_key(), &last.pull_key, &filters)),
            None => q.after,
        };
        Ok(Response::json(200, &wire::PullPage { data, next_cursor }))
    }
}

/// `GET /v1/subscriptions/{subscription}/events`.
#[utoipa::path(
    get,
    path = "/v1/subscriptions/{subscription}/events",
    tag = "subscriptions",
    summary = "Pull a subscription's events",
    description = "The events routed to a subscription with `pull: true` (routed since it was set, for the event \
        retention), in routing order, a page at a time: each with its `webhook-id` and the exact body and headers \
        a push would carry, signed now with the subscription's secrets (`hookline-attempt` is 1; custom credential \
        headers are left out). Pushes go on as usual; a pull changes nothing, so an event may be both pushed and \
        pulled: dedupe on `webhook_id`. A pull-only subscription (no `callback_url`) is never pushed: this is \
        how its subscriber reads it. Pass `next_cursor` back as `after`: it is always where to go on from (the \
        one given when nothing new was routed). Events whose retention ended are skipped.",
    params(("subscription" = String, Path, description = "The subscription pulled."), wire::PullQuery),
    responses(
        (status = 200, description = "A page of events, oldest routed first.", body = wire::PullPage),
        (status = 400, description = "`unknown_parameter`, `invalid_type`: a query parameter the route does not \
            take or of the wrong type; `invalid_cursor`: `after` not a cursor of this subscription's pull.",
            body = ErrorBody),
        (status = 404, description = "`not_found`: no such subscription (for this key).", body = ErrorBody),
        (status = 409, description = "`conflict`: the subscription does not have `pull: true`.", body = ErrorBody),
        (status = 422, description = "`invalid_field`: `limit` out of 1 to 100.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[allow(dead_code)]
fn pull() {}

/// The paths and schemas of this module, for [`super::openapi`].
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(paths(pull), components(schemas(wire::PullQuery, wire::PulledEvent, wire::PullPage)))]
    struct Part;
    <Part as utoipa::OpenApi>::openapi()
}
