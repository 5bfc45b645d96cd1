//! `POST /v1/subscriptions/{subscription}/acknowledgements`: a subscriber
//! reports what it did with a delivery ([`shared::ack`]). No API key: the
//! request is authenticated by a Standard Webhooks signature made with the
//! subscription's signing secret (current, or rotated out and still in its
//! overlap). A request that does not verify is a `401` and writes nothing;
//! a verified one stores the acknowledgement as the delivery's latest,
//! counts it (`hookline_acknowledgements_total`) and audits it (actor
//! `subscriber:<subscription id>`). The route never touches a saga: the
//! saga step reads the acknowledgement when it decides
//! (docs/delivery.md#acknowledgements).

use std::sync::atomic::Ordering::Relaxed;

use serde_json::json;

use hookline_wire::acknowledgements as wire;
use hookline_wire::ErrorBody;
use shared::ack::{self, AckFields, AckStatus};
use shared::audit::{Action as Audited, AuditRecord};
use shared::ids::SubscriptionId;

use super::routes::Call;
use super::{parse, query, Api, ApiError, ApiResult, ErrorCode, Response};

impl Api {
    /// `POST /v1/subscriptions/{id}/acknowledgements`: the signature first
    /// (`401` for an unknown subscription too, so an unauthenticated
    /// caller learns nothing), then the body (`400`/`422` naming the
    /// field), then one write, its count and its audit record.
    pub(super) async fn acknowledge(&self, id: &SubscriptionId, c: &Call<'_>) -> ApiResult {
        let refused = |e: ApiError| {
            self.hookline.metrics.acknowledgements.refused.fetch_add(1, Relaxed);
            e
        };
        query::none(c.req.query).map_err(refused)?;
        let now = chrono::Utc::now();
        let sub = self.hookline.stores.subscriptions.get(id).await?;
        let unauthorized = |why: String| {
            refused(ApiError::new(
                ErrorCode::Unauthorized,
                format!(
                    "acknowledgement not authenticated: {why} (sign the request body with the subscription's \
                     signing secret: webhook-id, webhook-timestamp, webhook-signature)"
                ),
            ))
        };
        let Some(sub) = sub else { return Err(unauthorized("no matching signature".into())) };
        ack::authenticate(&sub, c.req.signed, c.req.body, now).map_err(|e| unauthorized(e.to_string()))?;
        let body: wire::AcknowledgementBody = parse(c.req.body, true).map_err(refused)?;
        let fields = AckFields {
            webhook_id: body.webhook_id,
            attempt: body.attempt,
            status: match body.status {
                wire::AckStatus::Processed => AckStatus::Processed,
                wire::AckStatus::Failed => AckStatus::Failed,
            },
            reason: body.reason,
            reference: body.reference,
        };
        let record = ack::check(id, fields, now, self.hookline.config.retention).map_err(|e| refused(e.into()))?;
        self.hookline.stores.acks.put(&record).await?;
        self.hookline.metrics.acknowledgements.count(record.status);
        let mut rec = AuditRecord::new(Audited::DeliveryAcknowledged, ack::actor(id))
            .subscription(id)
            .tenant(sub.tenant_id.as_ref())
            .details(json!({
                "webhook_id": record.webhook_id,
                "attempt": record.attempt,
                "status": record.status.as_str(),
                "reference": record.reference,
            }));
        if let Some(r) = &record.reason {
            rec = rec.reason(r);
        }
        self.hookline.audit(rec).await;
        Ok(Response::json(200, &super::events::ack_view(record)))
    }
}

/// `POST /v1/subscriptions/{subscription}/acknowledgements`.
#[utoipa::path(
    post,
    path = "/v1/subscriptions/{subscription}/acknowledgements",
    tag = "subscriptions",
    summary = "Acknowledge a delivery (subscribers)",
    description = "A subscriber reports what it did with a delivery: `processed`, or `failed` with a `reason`, \
        optionally its own `reference`. No API key: the request carries a Standard Webhooks signature made with \
        the subscription's signing secret (the current one, or a rotated-out one still in its overlap) over the \
        request body, in the headers `webhook-id` (any id the subscriber chooses for this request), \
        `webhook-timestamp` (unix seconds, within 5 minutes of Hookline's clock) and `webhook-signature` \
        (`v1,<base64 HMAC-SHA256 of \"{webhook-id}.{webhook-timestamp}.{body}\">`). The latest acknowledgement \
        of a `webhook_id` replaces the one before; it is shown with the deliveries (`GET \
        /v1/events/{event}/deliveries`), counted (`hookline_acknowledgements_total`) and audited \
        (`delivery.acknowledged`, actor `subscriber:<subscription id>`). A subscription with `ack_timeout_secs` \
        counts a delivery as done only once it is acknowledged `processed`.",
    params(("subscription" = String, Path, description = "The subscription acknowledging.")),
    request_body(content = wire::AcknowledgementBody),
    responses(
        (status = 200, description = "Stored as the delivery's latest acknowledgement.", body = wire::Acknowledgement,
            example = json!({"subscription_id": "sub_0192e4a0", "webhook_id": "msg_0123456789abcdef0123456789",
                "attempt": 1, "status": "processed", "reason": null, "reference": "order-import-77",
                "received_at": "2026-11-29T03:00:00Z"})),
        (status = 400, description = super::dead_letters::body_400!(), body = ErrorBody),
        (status = 401, description = "`unauthorized`: a signature header missing, a timestamp out of tolerance, \
            or no signature made with the subscription's secret (or no such subscription). Nothing written.",
            body = ErrorBody),
        (status = 422, description = "`invalid_field`: `webhook_id` not a delivery's `msg_…` id; `attempt` out of \
            1 to 1000; `reason` missing for `failed`, blank or over 1024 bytes; `reference` blank or over 256 \
            bytes.", body = ErrorBody),
    ),
    security()
)]
#[allow(dead_code)]
fn acknowledge() {}

/// The paths and schemas of this module, for [`super::openapi`].
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(
        paths(acknowledge),
        components(schemas(wire::AckStatus, wire::AcknowledgementBody, wire::Acknowledgement))
    )]
    struct Part;
    <Part as utoipa::OpenApi>::openapi()
}
