//! The API as one axum [`Router`], built from the route table
//! ([`routes::ROUTES`]): the same router serves `hookline serve` (its accept
//! loop reads the body within its limits, then hands the request here) and
//! the `api` and `ingest` Lambdas (which turn an API Gateway event into an
//! HTTP request and back, `hookline_aws::lambda::http`).
//!
//! The router matches the path (matchit: a literal segment wins over a
//! parameter), answers a wrong method on a known path with `405
//! method_not_allowed` and `Allow` naming the path's methods, an unknown
//! path with `404 not_found`, and percent-decodes each path parameter once
//! (axum's [`Path`]): an id holding `/` is reached as `%2F`. A `%` not
//! followed by two hex digits, or a parameter that decodes to invalid
//! UTF-8, is `400 invalid_path`. Everything after the match (credentials,
//! the route's access check, the tenant scoping, the handler) is
//! [`Api::handle`]'s, in the order it documents.

use std::future::Future;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{MethodFilter, MethodRouter};
use axum::Router;
use tower::ServiceExt;

use crate::console;
use crate::routes::{self, Found, Route, ROUTES};
use crate::{Api, ErrorCode, Request, Response};

/// The IAM principal API Gateway authenticated (its
/// `requestContext.authorizer.iam.userArn`), put on the request as an
/// extension by the Lambda side; `hookline serve` has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal(pub String);

/// The router of the whole API over `api`: every row of [`ROUTES`], the
/// `405` of a known path's other methods, the `404` of any other path; and
/// the console ([`console`]): its files under `/ui`, and the same table
/// again under `/ui/api`, authenticated by bearer credentials only
/// ([`Api::for_console`]).
pub fn router(api: Api) -> Router {
    let console = table_router(api.for_console(), ROUTES);
    let assets = axum::routing::get(|Path(path): Path<String>| async move { console::asset(&path) });
    Router::new()
        .route(console::UI_PATH, axum::routing::get(|| async { console::asset("") }))
        .route("/ui/", axum::routing::get(|| async { console::asset("") }))
        .route("/ui/{*path}", assets)
        .nest_service(console::UI_API_PATH, console)
        .fallback_service(table_router(api, ROUTES))
}

/// The router of `routes` only, rows of [`ROUTES`] (such as
/// [`routes::INGEST_ROUTES`]), over `api`: as [`router`] answers them; any
/// other path is `404 not_found`, and there is no console. A binary that
/// builds no [`router`] links only these routes' handlers.
pub fn router_of(api: Api, routes: &'static [Route]) -> Router {
    table_router(api, routes)
}

/// Answers one request through `router` (a tower service call).
pub async fn call(router: &Router, req: axum::http::Request<Body>) -> axum::response::Response {
    match ServiceExt::<axum::http::Request<Body>>::oneshot(router.clone(), req).await {
        Ok(res) => res,
        Err(never) => match never {},
    }
}

/// What the router hands a matched (or unmatched) request to: [`Api`],
/// or in the unit tests a stand-in that shows what arrived.
pub(crate) trait Answer: Clone + Send + Sync + 'static {
    /// The most body bytes read; a longer body is `413 payload_too_large`.
    fn max_body(&self) -> usize;
    /// The answer to `req`, which the router found to be `found`.
    fn answer(&self, found: Found, req: Request<'_>) -> impl Future<Output = Response> + Send;
}

impl Answer for Api {
    fn max_body(&self) -> usize {
        // As `hookline serve` reads it: one byte over the limit reaches the
        // ingest check, which names the limit.
        self.hookline.config.max_body_bytes.saturating_add(1)
    }

    fn answer(&self, found: Found, req: Request<'_>) -> impl Future<Output = Response> + Send {
        self.handle(found, req)
    }
}

/// What a request reached in the table, before its parameters are read.
#[derive(Clone, Copy)]
enum Target {
    /// This row.
    Route(&'static Route),
    /// The pattern `path` of the table `routes`, with a method it does not
    /// take.
    OtherMethod(&'static [Route], &'static str),
    /// No pattern.
    Nothing,
}

/// The table `routes` (all of [`ROUTES`], or some) over any [`Answer`].
pub(crate) fn table_router<A: Answer>(answer: A, routes: &'static [Route]) -> Router {
    let mut paths: Vec<&'static str> = Vec::new();
    for r in routes {
        if !paths.contains(&r.path) {
            paths.push(r.path);
        }
    }
    let mut router = Router::new();
    for path in paths {
        let mut methods = MethodRouter::new();
        for route in routes.iter().filter(|r| r.path == path) {
            let method = Method::from_bytes(route.method.as_bytes()).expect("a route's method is a method");
            let filter = MethodFilter::try_from(method).expect("a route's method is one axum routes");
            methods = methods.on(filter, move |State(a): State<A>, req: axum::http::Request<Body>| {
                dispatch(a, Target::Route(route), req)
            });
        }
        methods = methods.fallback(move |State(a): State<A>, req: axum::http::Request<Body>| {
            dispatch(a, Target::OtherMethod(routes, path), req)
        });
        router = router.route(path, methods);
    }
    let inner = router
        .fallback(|State(a): State<A>, req: axum::http::Request<Body>| dispatch(a, Target::Nothing, req))
        .with_state(answer);
    // axum puts `Allow` on whatever a path's fallback answers; only a 405
    // keeps it (under /v1 a caller without a credential gets a 401 and
    // learns nothing of the path).
    let inner = ServiceExt::<axum::http::Request<Body>>::map_response(inner, |mut res: axum::response::Response| {
        if res.status() != StatusCode::METHOD_NOT_ALLOWED {
            res.headers_mut().remove(header::ALLOW);
        }
        res
    });
    Router::new().fallback_service(inner)
}

/// One request, from the table's match to the answer.
async fn dispatch<A: Answer>(a: A, target: Target, req: axum::http::Request<Body>) -> Response {
    let (mut parts, body) = req.into_parts();
    if !escapes_are_valid(parts.uri.path()) {
        return invalid_path("a `%` in the path is not followed by two hex digits");
    }
    let found = match target {
        Target::Route(route) => match params(route, &mut parts).await {
            Ok(params) => Found::Route(route, params),
            Err(res) => return res,
        },
        Target::OtherMethod(table, path) => Found::OtherMethods(routes::allowed_in(table, path)),
        Target::Nothing => Found::Nothing,
    };
    let max = a.max_body();
    let Ok(body) = axum::body::to_bytes(body, max).await else {
        return Response::error(
            ErrorCode::PayloadTooLarge,
            format!("request body exceeds the limit of {} bytes", max.saturating_sub(1)),
            None,
        );
    };
    answer(&a, found, &parts, &body).await
}

/// The request as [`Api::handle`] reads it, answered.
async fn answer<A: Answer>(a: &A, found: Found, parts: &Parts, body: &Bytes) -> Response {
    let idempotency_key = joined(&parts.headers, "idempotency-key");
    let req = Request {
        method: parts.method.as_str(),
        path: parts.uri.path(),
        query: parts.uri.query(),
        authorization: parts.headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()),
        idempotency_key: idempotency_key.as_deref(),
        principal: parts.extensions.get::<Principal>().map(|p| p.0.as_str()),
        actor_header: parts.headers.get("x-actor").map(HeaderValue::as_bytes),
        signed: shared::ack::SignedHeaders {
            id: text_header(&parts.headers, "webhook-id"),
            timestamp: text_header(&parts.headers, "webhook-timestamp"),
            signature: text_header(&parts.headers, "webhook-signature"),
        },
        body,
    };
    a.answer(found, req).await
}

/// The header `name` as text (`""` when absent or not visible ASCII).
fn text_header<'h>(headers: &'h axum::http::HeaderMap, name: &str) -> &'h str {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// The route's parameters, percent-decoded by axum's [`Path`], named as
/// its pattern names them.
async fn params(route: &'static Route, parts: &mut Parts) -> Result<Vec<(&'static str, String)>, Response> {
    if route.params().next().is_none() {
        return Ok(Vec::new());
    }
    let Path(mut values) = Path::<Vec<(String, String)>>::from_request_parts(parts, &())
        .await
        .map_err(|_| invalid_path("a path segment does not decode to UTF-8"))?;
    Ok(route
        .params()
        .map(|name| {
            let at = values.iter().position(|(n, _)| n == name);
            (name, at.map(|i| values.swap_remove(i).1).unwrap_or_default())
        })
        .collect())
}

fn invalid_path(why: &str) -> Response {
    Response::error(ErrorCode::InvalidPath, format!("the path is not valid percent-encoded UTF-8: {why}"), None)
}

/// Whether every `%` of `path` starts an escape (`%` and two hex digits,
/// RFC 3986).
fn escapes_are_valid(path: &str) -> bool {
    let b = path.as_bytes();
    b.iter()
        .enumerate()
        .filter(|(_, c)| **c == b'%')
        .all(|(i, _)| b.len() > i + 2 && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit())
}

/// A header's value; a header given several times is one value joined
/// with `,`, as API Gateway hands it to the Lambda API.
fn joined<'a>(headers: &'a HeaderMap, name: &str) -> Option<std::borrow::Cow<'a, [u8]>> {
    let mut values = headers.get_all(name).iter().map(HeaderValue::as_bytes);
    let first = values.next()?;
    Some(match values.next() {
        None => first.into(),
        Some(second) => [first, second].into_iter().chain(values).collect::<Vec<_>>().join(&b',').into(),
    })
}

impl IntoResponse for Response {
    fn into_response(self) -> axum::response::Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut res = (status, self.body).into_response();
        let headers = res.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(self.content_type));
        for (name, value) in self.headers {
            let name = HeaderName::from_bytes(name.as_bytes());
            let value = HeaderValue::from_str(&value);
            debug_assert!(name.is_ok() && value.is_ok(), "a response header of the API is a valid header");
            if let (Ok(name), Ok(value)) = (name, value) {
                headers.append(name, value);
            }
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers with what reached it: the route's pattern (or the refusal
    /// the API would give), its parameters and the request's fields.
    #[derive(Clone)]
    struct Echo;

    impl Answer for Echo {
        fn max_body(&self) -> usize {
            16
        }

        async fn answer(&self, found: Found, req: Request<'_>) -> Response {
            let (route, params) = match found {
                Found::Route(r, p) => (r, p),
                other => return other.refusal(&req),
            };
            Response::json(
                200,
                &serde_json::json!({
                    "route": format!("{} {}", route.method, route.path),
                    "params": params,
                    "method": req.method,
                    "query": req.query,
                    "idempotency_key": req.idempotency_key.map(|k| String::from_utf8_lossy(k).into_owned()),
                    "principal": req.principal,
                    "body": String::from_utf8_lossy(req.body),
                }),
            )
        }
    }

    async fn send(method: &str, uri: &str, headers: &[(&str, &str)]) -> (u16, HeaderMap, serde_json::Value) {
        let mut req = axum::http::Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut req = req.body(Body::from("hi")).unwrap();
        req.extensions_mut().insert(Principal("arn:aws:iam::1:user/u".into()));
        let res = call(&table_router(Echo, ROUTES), req).await;
        let (parts, body) = res.into_parts();
        let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        (parts.status.as_u16(), parts.headers, serde_json::from_slice(&body).unwrap_or_default())
    }

    #[tokio::test]
    async fn literal_segments_win_and_parameters_are_named_and_decoded_once() {
        let (st, _, v) = send("POST", "/v1/subscriptions/reindex", &[]).await;
        assert_eq!((st, v["route"].as_str()), (200, Some("POST /v1/subscriptions/reindex")));
        let (_, _, v) = send("POST", "/v1/dead-letters/requeue", &[]).await;
        assert_eq!(v["route"], "POST /v1/dead-letters/requeue");
        let (_, _, v) = send("POST", "/v1/subscriptions/s1/lanes/p%2F1%20%25%C3%A9+x/skip?a=b", &[]).await;
        assert_eq!(v["route"], "POST /v1/subscriptions/{subscription}/lanes/{partition_key}/skip");
        assert_eq!(v["params"], serde_json::json!([["subscription", "s1"], ["partition_key", "p/1 %é+x"]]));
        assert_eq!((v["query"].as_str(), v["body"].as_str()), (Some("a=b"), Some("hi")));
        assert_eq!(v["principal"], "arn:aws:iam::1:user/u");
        // `%252F` is the id `%2F`: one decoding, not two.
        let (_, _, v) = send("GET", "/v1/events/%252F", &[]).await;
        assert_eq!(v["params"], serde_json::json!([["event", "%2F"]]));
        let (_, _, v) = send("GET", "/v1/events/e1/deliveries", &[]).await;
        assert_eq!(v["route"], "GET /v1/events/{event}/deliveries");
    }

    #[tokio::test]
    async fn a_wrong_method_is_405_with_allow_and_an_unknown_path_404() {
        let (st, h, v) = send("PUT", "/v1/events", &[]).await;
        assert_eq!((st, v["error"]["code"].as_str()), (405, Some("method_not_allowed")), "{v}");
        assert_eq!(h["allow"], "POST, GET, HEAD");
        let (st, h, _) = send("DELETE", "/v1/dead-letters/d%2F1", &[]).await;
        assert_eq!((st, h["allow"].to_str().unwrap()), (405, "GET, HEAD"));
        let (st, h, _) = send("POST", "/healthz", &[]).await;
        assert_eq!((st, h["allow"].to_str().unwrap()), (405, "GET, HEAD"));
        // HEAD is answered as GET.
        let (st, _, _) = send("HEAD", "/v1/events/e1", &[]).await;
        assert_eq!(st, 200);
        for path in ["/v1/nothing", "/nothing", "/v1/events/e1/nothing", "/v1/events/"] {
            let (st, h, v) = send("GET", path, &[]).await;
            assert_eq!((st, v["error"]["code"].as_str()), (404, Some("not_found")), "{path}: {v}");
            assert!(h.get("allow").is_none(), "{path}");
        }
    }

    #[tokio::test]
    async fn bad_escapes_and_non_utf8_are_400_invalid_path() {
        for path in ["/v1/events/%FF", "/v1/events/100%", "/v1/events/%zz", "/v1/events/a%4", "/v1/nothing/%"] {
            let (st, _, v) = send("GET", path, &[]).await;
            assert_eq!((st, v["error"]["code"].as_str()), (400, Some("invalid_path")), "{path}: {v}");
        }
    }

    #[tokio::test]
    async fn repeated_idempotency_keys_are_one_value_and_long_bodies_413() {
        let (_, _, v) =
            send("POST", "/v1/events", &[("idempotency-key", "a"), ("Idempotency-Key", "b"), ("idempotency-key", "c")])
                .await;
        assert_eq!(v["idempotency_key"], "a,b,c");
        let req = axum::http::Request::builder().method("POST").uri("/v1/events").body(Body::from("x".repeat(17)));
        let res = call(&table_router(Echo, ROUTES), req.unwrap()).await;
        assert_eq!(res.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }

    /// The ingest function's table: its two rows, as the whole table
    /// answers them (the same rows: the same handlers and actions);
    /// another method on their path is 405 naming the method this table
    /// takes, any other path 404.
    #[tokio::test]
    async fn the_ingest_table_is_its_rows_of_the_whole_one() {
        assert_eq!(routes::INGEST_ROUTES.len(), 2);
        for r in routes::INGEST_ROUTES {
            let whole = ROUTES.iter().find(|w| (w.method, w.path) == (r.method, r.path)).expect("a row of ROUTES");
            assert!(std::ptr::fn_addr_eq(whole.handler, r.handler) && whole.action == r.action, "{}", r.path);
        }
        let ingest = |method: &str, uri: &str| {
            let req = axum::http::Request::builder().method(method).uri(uri).body(Body::from("hi")).unwrap();
            async move {
                let res = call(&table_router(Echo, routes::INGEST_ROUTES), req).await;
                let (parts, body) = res.into_parts();
                let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
                (parts.status.as_u16(), parts.headers, serde_json::from_slice::<serde_json::Value>(&body).unwrap())
            }
        };
        let (st, _, v) = ingest("POST", "/v1/events").await;
        assert_eq!((st, v["route"].as_str()), (200, Some("POST /v1/events")));
        let (st, _, v) = ingest("POST", "/v1/events/batch").await;
        assert_eq!((st, v["route"].as_str()), (200, Some("POST /v1/events/batch")));
        let (st, h, _) = ingest("GET", "/v1/events").await;
        assert_eq!((st, h["allow"].to_str().unwrap()), (405, "POST"));
        for path in ["/healthz", "/v1/subscriptions", "/v1/events/e1"] {
            let (st, _, v) = ingest("GET", path).await;
            assert_eq!((st, v["error"]["code"].as_str()), (404, Some("not_found")), "{path}: {v}");
        }
    }

    /// Every row of the table is reached by its own method and pattern.
    #[tokio::test]
    async fn every_route_is_reached() {
        for r in ROUTES {
            let path = r.path.replace('{', "x-").replace('}', "");
            let (st, _, v) = send(r.method, &path, &[]).await;
            assert_eq!((st, v["route"].as_str()), (200, Some(format!("{} {}", r.method, r.path).as_str())), "{v}");
        }
    }

    #[test]
    fn api_responses_carry_their_headers() {
        let r = Response::error(ErrorCode::TooManyJobs, "later", None).with_header("retry-after", "30");
        let res = r.into_response();
        assert_eq!(res.status(), 429);
        assert_eq!(res.headers()["retry-after"], "30");
        assert_eq!(res.headers()["content-type"], "application/json");
    }
}
