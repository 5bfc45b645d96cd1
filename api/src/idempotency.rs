//! `Idempotency-Key` on the routes that create something
//! ([`ROUTES`]): the same key and request from the same caller answer the
//! first response again (with `Idempotency-Replayed: true`), another
//! request under the key is a `409 idempotency_conflict`, a request while
//! the first one runs a `409 idempotency_in_progress` with `Retry-After`.
//! Only successes (2xx) are kept; a refusal or failure frees the key.
//! Keys are remembered [`shared::idempotency::KEY_TTL`] (24 h) after the
//! answer. The decisions are [`shared::idempotency`]'s; the records are the
//! [`shared::ports::IdempotencyStore`]'s; this module runs them around a
//! route's handler ([`answer`], called by [`Api::handle`]), so no handler
//! knows about keys.
//!
//! `POST /v1/events` has its own idempotency (the key becomes the event's
//! id, `api/src/events.rs`) and `POST /v1/events/batch` refuses a key; both
//! check the header as [`header`] does. Every other route ignores it
//! ([`IGNORING`] says why for each `POST`).

use std::future::Future;

use chrono::Utc;
use shared::context::Hookline;
use shared::envelope;
use shared::idempotency::{self as idem, Decision, IdempotencyRecord, StoredResponse};

use super::routes::{Call, Route};
use super::{Api, ApiError, ApiResult, ErrorCode, Request, Response};

/// The header's name, as errors spell it.
pub const HEADER: &str = "Idempotency-Key";

/// The routes that take `Idempotency-Key` as this module runs it: every
/// `POST` that creates something (a subscription, an API key, a bulk job,
/// replay sagas) or mints a secret (a rotation answers the new one once).
pub const ROUTES: &[(&str, &str)] = &[
    ("POST", "/v1/subscriptions"),
    ("POST", "/v1/subscriptions/{subscription}/rotate-secret"),
    ("POST", "/v1/events/{event}/replay"),
    ("POST", "/v1/dead-letters/requeue"),
    ("POST", "/v1/dead-letters/skip"),
    ("POST", "/v1/replays"),
    ("POST", "/v1/keys"),
    ("POST", "/v1/keys/{key}/rotate"),
    ("POST", "/v1/portal-links"),
    ("POST", "/v1/subscriptions/{subscription}/test"),
];

/// The other `POST` routes, and why they do not take a key here: a test
/// holds every `POST` of [`super::routes::ROUTES`] to one of the two lists,
/// so a new route is decided, not forgotten.
pub const IGNORING: &[(&str, &str)] = &[
    ("/v1/events", "its own idempotency: the key becomes the event's id"),
    ("/v1/events/batch", "refuses a key: each envelope carries its own id"),
    ("/v1/subscriptions/reindex", "a repair pass; repeating it is harmless"),
    (
        "/v1/subscriptions/{subscription}/verify",
        "a handshake, or a new verification message (the last one's token counts), harmless to repeat; a token \
         confirms once (a repeat is 422 naming it)",
    ),
    ("/v1/subscriptions/{subscription}/lanes/{partition_key}/skip", "a repeat finds the lane unblocked (409)"),
    ("/v1/dead-letters/reindex", "a repair pass; repeating it is harmless"),
    ("/v1/dead-letters/{dead_letter}/requeue", "one saga per dead letter; a repeat finds it resolved (409)"),
    ("/v1/dead-letters/{dead_letter}/skip", "a repeat finds the dead letter resolved (409)"),
    ("/v1/event-types", "idempotent by itself: the same registration again changes nothing (200)"),
    ("/v1/subscriptions/{subscription}/acknowledgements", "the latest acknowledgement replaces the one before"),
];

/// Whether `method pattern` takes a key ([`ROUTES`]).
pub fn takes_key(method: &str, pattern: &str) -> bool {
    ROUTES.iter().any(|(m, p)| *m == method && *p == pattern)
}

/// The request's `Idempotency-Key`, checked by the one rule of every route
/// ([`envelope::check_idempotency_key`]); a bad one is a 422
/// `invalid_header` naming it.
pub(crate) fn header<'a>(req: &Request<'a>) -> Result<Option<&'a str>, ApiError> {
    req.idempotency_key
        .map(|v| {
            envelope::check_idempotency_key(v).map_err(|e| {
                ApiError::new(ErrorCode::InvalidHeader, format!("invalid header `{HEADER}`: {e}")).on(HEADER)
            })
        })
        .transpose()
}

/// How often a request tries to claim a key whose record keeps changing
/// under it (a claim released or expiring while it looked).
const CLAIM_TRIES: usize = 3;

/// Answers `call` of `route` by running `handler`, through its
/// `Idempotency-Key` when the route takes one: replays a kept answer,
/// refuses a conflicting or concurrent request, or claims the key, runs
/// the handler and keeps its answer (a success) or frees the key (any
/// other answer). The caller was authenticated and allowed, and the path's
/// resources resolved, before: a key is looked up only for a request that
/// could run.
pub(crate) async fn answer(
    api: &Api,
    route: &Route,
    call: &Call<'_>,
    handler: impl Future<Output = ApiResult>,
) -> Response {
    let run = async { handler.await.unwrap_or_else(Response::from) };
    if !takes_key(route.method, route.path) {
        return run.await;
    }
    let key = match header(&call.req) {
        Ok(Some(k)) => k,
        Ok(None) => return run.await,
        Err(e) => return e.into(),
    };
    let h = api.hookline();
    let tenant = call.caller.tenant.as_ref().map(|t| t.as_str());
    let id = idem::record_id(&call.caller.actor, tenant, key);
    let params: Vec<(&str, &str)> = call.params.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let fingerprint = idem::fingerprint(route.method, route.path, &params, call.req.query, call.req.body);
    let claim = match claim(h, &id, &fingerprint).await {
        Ok(Claimed::Mine(c)) => c,
        Ok(Claimed::Answered(r)) => return r,
        Err(e) => return e.into(),
    };
    let res = run.await;
    finish(h, &claim, &res).await;
    res
}

/// What claiming a key came to.
enum Claimed {
    /// This request holds the key: run it.
    Mine(IdempotencyRecord),
    /// The key's kept answer, to send again.
    Answered(Response),
}

/// Claims the key's record `id` for the request `fingerprint`, or finds
/// its kept answer.
async fn claim(h: &Hookline, id: &str, fingerprint: &str) -> Result<Claimed, ApiError> {
    let store = &h.stores.idempotency;
    for _ in 0..CLAIM_TRIES {
        let now = Utc::now();
        let record = store.get(id, now).await?;
        match idem::decide(record.as_ref(), fingerprint, now) {
            Decision::Claim => {
                let c = IdempotencyRecord::claim(id, fingerprint, now);
                if store.claim(&c, now).await? {
                    return Ok(Claimed::Mine(c));
                }
            }
            Decision::Replay(sealed) => {
                let kept = idem::open_response(&h.keyring, id, &sealed)?;
                return Ok(Claimed::Answered(replayed(kept)));
            }
            Decision::Conflict => {
                return Err(ApiError::new(
                    ErrorCode::IdempotencyConflict,
                    format!(
                        "this `{HEADER}` was used with another request (method, path or body) in the last 24 \
                         hours; send a new key for a new request"
                    ),
                )
                .on(HEADER))
            }
            Decision::InProgress { retry_after } => return Err(in_progress(retry_after)),
        }
    }
    Err(in_progress(1))
}

/// `409 idempotency_in_progress`, retry after `secs`.
fn in_progress(secs: u64) -> ApiError {
    let mut e = ApiError::new(
        ErrorCode::IdempotencyInProgress,
        format!("a request with this `{HEADER}` is still being answered; retry after {secs} s"),
    )
    .on(HEADER);
    e.retry_after = Some(secs);
    e
}

/// A kept answer, sent again.
fn replayed(kept: StoredResponse) -> Response {
    Response {
        status: kept.status,
        content_type: "application/json",
        body: kept.body.into_bytes(),
        headers: Vec::new(),
    }
    .with_header("idempotency-replayed", "true")
}

/// Keeps `res` under the claim (a success, sealed) or frees the key (any
/// other answer). A store failure here is logged, not answered: the work
/// is done and its answer is the client's; the key then stays claimed
/// until its lease ([`idem::LEASE`]) is over.
async fn finish(h: &Hookline, claim: &IdempotencyRecord, res: &Response) {
    let store = &h.stores.idempotency;
    let kept = String::from_utf8(res.body.clone()).ok().filter(|_| idem::keeps(res.status));
    let outcome = match kept {
        Some(body) => {
            let sealed = idem::seal_response(&h.keyring, &claim.id, &StoredResponse { status: res.status, body });
            store.complete(&claim.done(sealed, Utc::now())).await.map(|done| {
                if !done {
                    tracing::warn!(record = %claim.id, "idempotency key taken over before its answer was kept");
                }
            })
        }
        None => store.release(&claim.id, &claim.token).await,
    };
    if let Err(e) = outcome {
        tracing::error!(error = %e, record = %claim.id, "could not record an idempotency key's answer");
    }
}

/// Adds to the OpenAPI document what [`answer`] does on each of [`ROUTES`]
/// the document has: the optional `Idempotency-Key` header parameter, the
/// `Idempotency-Replayed` header on its successes, and its refusals (`409
/// idempotency_conflict` and `idempotency_in_progress`, `422
/// invalid_header`), added to the route's own `409`/`422` responses or as
/// new ones. Run once the resource modules' paths are merged
/// ([`super::openapi::document`]), so no route's own description repeats it.
pub fn document(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::content::ContentBuilder;
    use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
    use utoipa::openapi::response::ResponseBuilder;
    use utoipa::openapi::{Header, ObjectBuilder, Ref, RefOr, Required, Type};

    let text = || ObjectBuilder::new().schema_type(Type::String);
    for (method, path) in ROUTES {
        let item = doc.paths.paths.get_mut(*path);
        let Some(op) = item.and_then(|i| if *method == "POST" { i.post.as_mut() } else { None }) else { continue };
        let params = op.parameters.get_or_insert_with(Vec::new);
        if !params.iter().any(|p| p.name == HEADER) {
            params.push(
                ParameterBuilder::new()
                    .name(HEADER)
                    .parameter_in(ParameterIn::Header)
                    .required(Required::False)
                    .description(Some(
                        "Makes a retry safe: the same key and request within 24 hours answer the first success \
                         again (with `Idempotency-Replayed: true`) instead of running twice. 1 to 255 printable \
                         ASCII characters. See docs/api.md#idempotency-key.",
                    ))
                    .schema(Some(text().min_length(Some(1)).max_length(Some(255)).examples(["3f6d2c1e-order-7"])))
                    .build(),
            );
        }
        let replayed = Header::builder()
            .schema(text().enum_values(Some(["true"])))
            .description(Some("Present when this is the kept answer of an earlier request with the same key."))
            .build();
        for (status, resp) in op.responses.responses.iter_mut() {
            if let (true, RefOr::T(r)) = (status.starts_with('2'), resp) {
                r.headers.entry("Idempotency-Replayed".into()).or_insert_with(|| replayed.clone());
            }
        }
        for (status, codes) in [
            ("409", [ErrorCode::IdempotencyConflict, ErrorCode::IdempotencyInProgress].as_slice()),
            ("422", [ErrorCode::InvalidHeader].as_slice()),
        ] {
            let said: Vec<String> = codes.iter().map(|c| format!("`{}` ({})", c.as_str(), c.meaning())).collect();
            let said = format!("{HEADER}: {}", said.join("; "));
            let entry = op.responses.responses.entry(status.into()).or_insert_with(|| {
                let body = ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build();
                RefOr::T(ResponseBuilder::new().description("").content("application/json", body).build())
            });
            if let RefOr::T(r) = entry {
                if !r.description.contains(&said) {
                    r.description = [r.description.as_str(), said.as_str()]
                        .into_iter()
                        .filter(|d| !d.is_empty())
                        .collect::<Vec<_>>()
                        .join("\n\n");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route of [`ROUTES`] is a route, and every `POST` route is in
    /// [`ROUTES`] or [`IGNORING`] (not both), so none is left undecided.
    #[test]
    fn every_post_route_is_decided() {
        for (m, p) in ROUTES {
            assert!(super::super::routes::ROUTES.iter().any(|r| r.method == *m && r.path == *p), "{m} {p}");
        }
        for r in super::super::routes::ROUTES.iter().filter(|r| r.method == "POST") {
            let takes = takes_key(r.method, r.path);
            let ignores = IGNORING.iter().any(|(p, _)| *p == r.path);
            assert!(takes != ignores, "POST {} must be in exactly one of ROUTES and IGNORING", r.path);
        }
        for (p, _) in IGNORING {
            assert!(super::super::routes::ROUTES.iter().any(|r| r.method == "POST" && r.path == *p), "POST {p}");
        }
    }

    #[test]
    fn a_bad_key_is_invalid_header_naming_it() {
        let req = |k: &'static [u8]| Request {
            method: "POST",
            path: "/v1/subscriptions",
            query: None,
            authorization: None,
            idempotency_key: Some(k),
            principal: None,
            actor_header: None,
            signed: Default::default(),
            body: b"",
        };
        for bad in [&b""[..], b"a\nb", "zoë".as_bytes(), &[b'k'; 256]] {
            let e = header(&req(bad)).unwrap_err();
            assert_eq!((e.code, e.status(), e.field.as_deref()), (ErrorCode::InvalidHeader, 422, Some(HEADER)));
        }
        assert_eq!(header(&req(b"order-7 retry")).unwrap(), Some("order-7 retry"));
    }

    /// The document says what [`answer`] does, on each route of [`ROUTES`]
    /// it has, once however often it is applied.
    #[test]
    fn the_document_names_the_header_and_its_refusals() {
        use utoipa::openapi::path::{HttpMethod, OperationBuilder, PathItem};
        use utoipa::openapi::response::ResponseBuilder;
        use utoipa::openapi::{OpenApiBuilder, PathsBuilder, RefOr};
        let op = OperationBuilder::new()
            .response("201", ResponseBuilder::new().description("created").build())
            .response("409", ResponseBuilder::new().description("`conflict`: its own").build())
            .build();
        let get = OperationBuilder::new().response("200", ResponseBuilder::new().description("ok").build()).build();
        let mut doc = OpenApiBuilder::new()
            .paths(
                PathsBuilder::new()
                    .path("/v1/subscriptions", PathItem::new(HttpMethod::Post, op.clone()))
                    .path("/v1/events/{event}", PathItem::new(HttpMethod::Get, get)),
            )
            .build();
        document(&mut doc);
        document(&mut doc);
        let post = doc.paths.paths["/v1/subscriptions"].post.clone().unwrap();
        let params = post.parameters.clone().unwrap_or_default();
        assert_eq!(params.iter().filter(|p| p.name == HEADER).count(), 1, "once");
        let description = |status: &str| match &post.responses.responses[status] {
            RefOr::T(r) => r.description.clone(),
            RefOr::Ref(_) => panic!("{status} is a reference"),
        };
        let conflict = description("409");
        assert!(conflict.starts_with("`conflict`: its own"), "the route's own text stays: {conflict}");
        for code in ["idempotency_conflict", "idempotency_in_progress"] {
            assert_eq!(conflict.matches(code).count(), 1, "{code} once: {conflict}");
        }
        assert!(description("422").contains("invalid_header"));
        match &post.responses.responses["201"] {
            RefOr::T(r) => assert!(r.headers.contains_key("Idempotency-Replayed")),
            RefOr::Ref(_) => panic!("201 is a reference"),
        }
        let untouched = doc.paths.paths["/v1/events/{event}"].get.clone().unwrap();
        assert!(untouched.parameters.is_none() && !untouched.responses.responses.contains_key("409"));
    }
}
