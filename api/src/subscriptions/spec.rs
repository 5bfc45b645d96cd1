//! The subscriptions' part of the OpenAPI document: one `#[utoipa::path]`
//! per route of `routes::ROUTES` under `/v1/subscriptions`, with every
//! status and error code its handler can answer. The functions below are
//! declarations for the document only (the handlers are `Api`'s methods,
//! which the route table dispatches): nothing calls them.
#![allow(dead_code)]

use hookline_wire::reindex::{ReindexAnswer, ReindexRequest};
use hookline_wire::subscriptions::{
    BlockedLane, BreakerState, CreateSubscription, LaneSkipped, ListSubscriptions, OnDeadLetter, Ordering,
    PatchSubscription, PayloadFormat, RetryPolicy, RetryPolicyInput, RotateSecret, SkipLane, SkippedKind, Subscription,
    SubscriptionHealth, SubscriptionWithSecret, VerifySubscription,
};
use hookline_wire::{ErrorBody, Page};

/// The tag of every route here.
const TAG: &str = "subscriptions";

#[utoipa::path(
    post, path = "/v1/subscriptions", tag = TAG,
    description = "Creates a subscription and starts its verification handshake; the answer carries its signing secret, shown only this once. With `pull: true` and no `callback_url` it is pull-only: verified at once (no endpoint to verify), never pushed to, read through `GET /v1/subscriptions/{id}/events`. Every bad field is reported in `errors`, and nothing is stored then.",
    request_body = CreateSubscription,
    responses(
        (status = 201, description = "Created; `secret` is shown only now.", body = SubscriptionWithSecret),
        (status = 400, description = "Could not be parsed: `unknown_parameter` (the route takes no query parameters), `malformed_json`, `not_an_object`, `missing_field`, `unknown_field`, `invalid_type` (e.g. an unknown `payload_format`).", body = ErrorBody),
        (status = 401, description = "`unauthorized`.", body = ErrorBody),
        (status = 403, description = "`forbidden`: the key may not manage subscriptions, or names another tenant than its own.", body = ErrorBody),
        (status = 422, description = "Each bad field in `errors`: `invalid_callback_url`, `invalid_field` (event types, tenant, data fields, header count; no `callback_url` without `pull: true`; `ordering: partition` or `ack_timeout_secs` on a pull-only subscription), `invalid_header`, `invalid_limit`, `invalid_retry_schedule`, `retry_schedule_too_long`, `invalid_dead_letter_on`.", body = ErrorBody,
            example = json!({"error": {"code": "invalid_callback_url", "message": "callback_url must use https (and 2 more bad fields: see errors)", "field": "callback_url", "errors": [
                {"field": "callback_url", "code": "invalid_callback_url", "message": "callback_url must use https"},
                {"field": "event_types[0]", "code": "invalid_field", "message": "'a b' contains ' '; patterns are an exact type, 'prefix.*' or '*'"},
                {"field": "max_in_flight", "code": "invalid_limit", "message": "max_in_flight: must be between 1 and 1000, got 0"}]}})),
        (status = 503, description = "`unavailable`: nothing was written; retry.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
fn create() {}

#[utoipa::path(
    post, path = "/v1/subscriptions/reindex", tag = TAG,
    description = "One page of the repair after an upgrade: writes the routing index entries of subscriptions stored before them. Repeat with `next_cursor` until it is `null`.",
    request_body(content = ReindexRequest, description = "May be empty (`{}`)."),
    responses(
        (status = 200, description = "What the page did.", body = ReindexAnswer),
        (status = 400, description = "`unknown_parameter` (the route takes no query parameters), `malformed_json`, `not_an_object`, `unknown_field`, `invalid_type`, `invalid_cursor` (a `cursor` not issued by this route).", body = ErrorBody),
        (status = 401, description = "`unauthorized`.", body = ErrorBody),
        (status = 403, description = "`forbidden`: the key may not rebuild indexes.", body = ErrorBody),
        (status = 422, description = "`invalid_field`: `limit` out of 1 to 100.", body = ErrorBody),
        (status = 503, description = "`unavailable`.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
fn reindex() {}

#[utoipa::path(
    get, path = "/v1/subscriptions", tag = TAG,
    description = "One page of subscriptions in id order: all, one tenant's, or those an event type (and tenant) is routed to. A tenant-bound key sees its tenant's only.",
    params(ListSubscriptions),
    responses(
        (status = 200, description = "One page.", body = Page<Subscription>),
        (status = 400, description = "`unknown_parameter` (a parameter the route does not take, or one given twice), `invalid_type` (`limit` not an integer), `invalid_cursor` (a `cursor` not issued for these filters).", body = ErrorBody,
            example = json!({"error": {"code": "unknown_parameter", "message": "unknown query parameter `tenant`; it takes `tenant_id`, `event_type`, `cursor`, `limit`", "field": "tenant", "errors": [
                {"field": "tenant", "code": "unknown_parameter", "message": "unknown query parameter `tenant`; it takes `tenant_id`, `event_type`, `cursor`, `limit`"}]}})),
        (status = 401, description = "`unauthorized`.", body = ErrorBody),
        (status = 403, description = "`forbidden`: `tenant_id` names another tenant than the key's.", body = ErrorBody),
        (status = 422, description = "`invalid_field`, each bad parameter in `errors`: `limit` out of 1 to 1000, a bad `tenant_id` or `event_type`.", body = ErrorBody),
        (status = 503, description = "`unavailable`.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
fn list() {}

#[utoipa::path(
    get, path = "/v1/subscriptions/{subscription}", tag = TAG,
    description = "One subscription with its health and, when ordered by partition, its oldest blocked lanes.",
    params(("subscription" = String, Path, description = "The subscription's id (`sub_…`).")),
    responses(
        (status = 200, description = "The subscription.", body = Subscription),
        (status = 400, description = "`unknown_parameter`: the route takes no query parameters.", body = ErrorBody),
        (status = 401, description = "`unauthorized`.", body = ErrorBody),
        (status = 404, description = "`not_found` (also another tenant's).", body = ErrorBody),
        (status = 503, description = "`unavailable`.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
fn get() {}

#[utoipa::path(
    patch, path = "/v1/subscriptions/{subscription}", tag = TAG,
    description = "Changes the fields given: a field left out stays, `null` resets it to its default, a value replaces it. A new callback URL, or switching it on again, re-runs the verification handshake. Every bad field is reported, and nothing changes then.",
    params(("subscription" = String, Path, description = "The subscription's id.")),
    request_body = PatchSubscription,
    responses(
        (status = 200, description = "The subscription as changed.", body = Subscription),
        (status = 400, description = "`unknown_parameter` (the route takes no query parameters), `malformed_json`, `not_an_object`, `unknown_field`, `invalid_type`.", body = ErrorBody),
        (status = 401, description = "`unauthorized`.", body = ErrorBody),
        (status = 403, description = "`forbidden`: the key may not manage subscriptions, or would move it to another tenant or make it global.", body = ErrorBody),
        (status = 404, description = "`not_found`.", body = ErrorBody),
        (status = 409, description = "`conflict`: it kept changing under the request; retry.", body = ErrorBody),
        (status = 422, description = "Each bad field in `errors`: as for create, and `invalid_field` for a `null` `callback_url` or `event_types` (they cannot be removed), for `pull: false` on a pull-only subscription without a `callback_url`, and for `ordering: partition` or `ack_timeout_secs` on a pull-only one or `data_fields` without the `contract_webhook` format.", body = ErrorBody),
        (status = 503, description = "`unavailable`.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
fn patch() {}

#[utoipa::path(
    delete, path = "/v1/subscriptions/{subscription}", tag = TAG,
    description = "Deletes the subscription; nothing more is delivered to it.",
    params(("subscription" = String, Path, description = "The subscription's id.")),
    responses(
        (status = 204, description = "Deleted."),
        (status = 400, description = "`unknown_parameter`: the route takes no query parameters.", body = ErrorBody),
        (status = 401, description = "`unauthorized`.", body = ErrorBody),
        (status = 403, description = "`forbidden`: the key may not manage subscriptions.", body = ErrorBody),
        (status = 404, description = "`not_found`.", body = ErrorBody),
        (status = 503, description = "`unavailable`.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
fn delete() {}

#[utoipa::path(
    post, path = "/v1/subscriptions/{subscription}/verify", tag = TAG,
    description = "Runs the verification handshake with the callback URL now; the answer says whether it passed (`verified`, `verification_error`). A queue or bus destination gets a verification message with a token instead (`verification_error` says it awaits confirmation); its owner confirms with `{\"token\"}`.",
    params(("subscription" = String, Path, description = "The subscription's id.")),
    request_body(content = VerifySubscription, description = "May be empty (`{}`); `token` confirms a queue or bus destination."),
    responses(
        (status = 200, description = "The subscription after the handshake, the message sent, or the token confirmed.", body = Subscription),
        (status = 400, description = "`unknown_parameter` (the route takes no query parameters), `malformed_json`, `not_an_object`, `unknown_field`, `invalid_type`.", body = ErrorBody),
        (status = 422, description = "`invalid_field` naming `token`: not the token of the pending verification message, or none is pending; nothing changes.", body = ErrorBody),
        (status = 401, description = "`unauthorized`.", body = ErrorBody),
        (status = 403, description = "`forbidden`: the key may not recover.", body = ErrorBody),
        (status = 404, description = "`not_found`.", body = ErrorBody),
        (status = 503, description = "`unavailable`.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
fn verify() {}

#[utoipa::path(
    post, path = "/v1/subscriptions/{subscription}/rotate-secret", tag = TAG,
    description = "Makes a new signing secret current; the old one keeps signing alongside for the overlap. The answer carries the new secret, shown only this once.",
    params(("subscription" = String, Path, description = "The subscription's id.")),
    request_body(content = RotateSecret, description = "May be empty (`{}`)."),
    responses(
        (status = 200, description = "The subscription with its new `secret`.", body = SubscriptionWithSecret),
        (status = 400, description = "`unknown_parameter` (the route takes no query parameters), `malformed_json`, `not_an_object`, `unknown_field`, `invalid_type`.", body = ErrorBody),
        (status = 401, description = "`unauthorized`.", body = ErrorBody),
        (status = 403, description = "`forbidden`: the key may not manage subscriptions.", body = ErrorBody),
        (status = 404, description = "`not_found`.", body = ErrorBody),
        (status = 409, description = "`conflict`: it kept changing under the request; retry.", body = ErrorBody),
        (status = 422, description = "`invalid_field`: `overlap_seconds` out of 0 to 604800.", body = ErrorBody),
        (status = 503, description = "`unavailable`.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
fn rotate_secret() {}

#[utoipa::path(
    post, path = "/v1/subscriptions/{subscription}/lanes/{partition_key}/skip", tag = TAG,
    description = "Skips what holds one blocked lane of an ordered subscription (a gap in its numbers, or a head saga that will never leave), audited as `lane.skipped`.",
    params(
        ("subscription" = String, Path, description = "The subscription's id."),
        ("partition_key" = String, Path, description = "The partition key (percent-encoded)."),
    ),
    request_body = SkipLane,
    responses(
        (status = 200, description = "What was skipped.", body = LaneSkipped),
        (status = 400, description = "`unknown_parameter` (the route takes no query parameters), `malformed_json`, `not_an_object`, `unknown_field`, `invalid_type`.", body = ErrorBody),
        (status = 401, description = "`unauthorized`.", body = ErrorBody),
        (status = 403, description = "`forbidden`: the key may not recover, or names another tenant.", body = ErrorBody),
        (status = 404, description = "`not_found`.", body = ErrorBody),
        (status = 409, description = "`not_ordered` (no lanes), `lane_not_blocked`, `lane_held_by_dead_letter` (requeue or skip the dead letter).", body = ErrorBody),
        (status = 422, description = "`reason_required`; `invalid_field`: `reason` too long or not one line, a bad `tenant_id`, or one given for a subscription with its own tenant.", body = ErrorBody),
        (status = 503, description = "`unavailable`.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
fn skip_lane() {}

/// `POST /v1/subscriptions/{subscription}/test`.
#[utoipa::path(
    post,
    path = "/v1/subscriptions/{subscription}/test",
    tag = "subscriptions",
    summary = "Send a test event",
    description = "Stores one event of `event_type` (default `hookline.test`) with `data` (default \
        `{\"test\": true}`) in the subscription's tenant and delivers it to this subscription only (no other \
        receives it, whatever its patterns), signed and retried like any event. Follow it at \
        `GET /v1/events/{event}/deliveries`. Audited (`subscription.test_sent`).",
    params(("subscription" = String, Path, description = "The subscription's id (`sub_…`).")),
    request_body(content = hookline_wire::portal::SendTestEvent, example = json!({"event_type": "order.created", "data": {"id": 7}})),
    responses(
        (status = 202, description = "Stored; its delivery follows.", body = hookline_wire::portal::TestEventSent,
            example = json!({"event_id": "evt_0193a1b2c3d4e5f6a7b8c9d0e1f2a3b4", "subscription_id": "sub_1",
                "event_type": "order.created"})),
        (status = 400, description = "Could not be parsed: `unknown_parameter` (the route takes no query parameters), `malformed_json`, `not_an_object`, `unknown_field`, `invalid_type`.", body = ErrorBody),
        (status = 409, description = "`conflict`: the subscription is paused or not verified.", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: the event would be larger than the body limit.",
            body = ErrorBody),
        (status = 422, description = "`invalid_field`: `event_type` not a valid type, or a reserved `hookline.` \
            type other than `hookline.test`.", body = ErrorBody),
    ),
    security(("bearer" = []), ("sigv4" = []))
)]
#[allow(dead_code)]
fn send_test_event() {}

/// This module's part of the OpenAPI document ([`crate::openapi`]): its
/// routes' paths and the wire types they use.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(
        paths(create, reindex, list, get, patch, delete, verify, rotate_secret, skip_lane, send_test_event),
        components(schemas(
            CreateSubscription,
            PatchSubscription,
            RetryPolicyInput,
            RetryPolicy,
            PayloadFormat,
            Ordering,
            OnDeadLetter,
            BreakerState,
            Subscription,
            SubscriptionHealth,
            BlockedLane,
            SubscriptionWithSecret,
            RotateSecret,
            SkipLane,
            VerifySubscription,
            SkippedKind,
            LaneSkipped,
            ReindexRequest,
            ReindexAnswer,
            Page<Subscription>,
            hookline_wire::portal::SendTestEvent,
            hookline_wire::portal::TestEventSent,
        )),
        tags((name = "subscriptions", description = "Who receives which events, where, and how they are signed."))
    )]
    struct Part;
    <Part as utoipa::OpenApi>::openapi()
}

#[cfg(test)]
mod tests {
    /// Every subscriptions route of the route table is in the document
    /// with its method, and nothing else under `/v1/subscriptions`.
    #[test]
    fn every_route_is_documented() {
        let doc = serde_json::to_value(super::openapi()).unwrap();
        let paths = doc["paths"].as_object().unwrap();
        let mut documented: Vec<(String, String)> = paths
            .iter()
            .flat_map(|(p, ops)| ops.as_object().unwrap().keys().map(move |m| (m.to_uppercase(), p.clone())))
            .collect();
        documented.sort();
        let mut routed: Vec<(String, String)> = crate::routes::ROUTES
            .iter()
            // The stats route is documented with `GET /v1/stats` (crate::stats),
            // acknowledgements and pull in their own modules.
            .filter(|r| {
                r.path.starts_with("/v1/subscriptions")
                    && !r.path.ends_with("/stats")
                    && !r.path.ends_with("/acknowledgements")
                    && !r.path.ends_with("/events")
            })
            .map(|r| (r.method.to_string(), r.path.to_string()))
            .collect();
        routed.sort();
        assert_eq!(documented, routed);
        let create = &doc["paths"]["/v1/subscriptions"]["post"];
        assert!(create["responses"]["422"].is_object() && create["responses"]["201"].is_object(), "{create}");
        assert_eq!(doc["components"]["schemas"]["PayloadFormat"]["enum"][2], "contract_webhook");
    }
}
