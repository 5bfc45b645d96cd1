//! The OpenAPI 3.1 document of the API, generated from the code: the wire
//! types' schemas (`hookline_wire`) and each resource module's paths (its
//! `openapi()`, `#[utoipa::path]` items next to the handlers), merged here
//! with what every route shares (servers, security schemes, the error
//! body, the error-code table), then finished by what `#[utoipa::path]`
//! cannot say ([`finish`]): one stable `operationId` per route (the names
//! a generated client's functions take), each operation's security, the
//! error responses every route shares (401, 403, 404, 503, …), and the
//! links between operations (a created subscription's `id` → its
//! `GET`/`PATCH`/`DELETE`) that clients and stateful fuzzers follow.
//!
//! Served at `GET /openapi.json` ([`json`]) and rendered as the reference
//! page `GET /docs` ([`super::reference`]); docs/openapi.json is the
//! checked-in copy (a test below fails when it differs; regenerate it with
//! `HOOKLINE_UPDATE_OPENAPI=1 cargo test -p hookline-api --lib openapi` or
//! `make openapi`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use hookline_wire::{ErrorBody, ErrorCode, ErrorDetail};
use utoipa::openapi::extensions::ExtensionsBuilder;
use utoipa::openapi::link::Link;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{ContentBuilder, OpenApi, RefOr, Response, ResponseBuilder};

use super::routes::ROUTES;

/// The security scheme of `hookline serve`: `Authorization: Bearer <key>`.
pub const BEARER: &str = "bearer";
/// The security scheme behind API Gateway: an IAM SigV4 signature.
pub const SIGV4: &str = "sigv4";

/// The whole document, as `GET /openapi.json` serves it and
/// docs/openapi.json holds it.
pub fn document() -> OpenApi {
    let mut doc = base();
    for part in [
        super::events::openapi(),
        super::subscriptions::openapi(),
        super::dead_letters::openapi(),
        super::replays::openapi(),
        super::keys::openapi(),
        super::audit::openapi(),
        super::stats::openapi(),
        super::portal::openapi(),
        super::catalog::openapi(),
        super::acknowledgements::openapi(),
        super::pull::openapi(),
    ] {
        doc.merge(part);
    }
    super::idempotency::document(&mut doc);
    finish(&mut doc);
    doc
}

/// docs/openapi.json, embedded: the document as [`document`] builds it
/// (the test `the_checked_in_openapi_is_the_generated_one` fails when they
/// differ). What the server answers from, so that no binary links the
/// builder code of every schema ([`document`] is for the tests and `make
/// openapi`): 1.1 MB of the api and ingest bootstraps otherwise (x86_64).
const CHECKED_IN: &[u8] = include_bytes!("../../docs/openapi.json");

/// The document as a JSON value, parsed once per process from the
/// checked-in copy (equal to [`document`]'s).
pub fn value() -> &'static serde_json::Value {
    static VALUE: OnceLock<serde_json::Value> = OnceLock::new();
    VALUE.get_or_init(|| serde_json::from_slice(CHECKED_IN).expect("docs/openapi.json is JSON"))
}

/// The document as compact JSON, built once per process: the body of
/// `GET /openapi.json`.
pub fn json() -> &'static [u8] {
    static JSON: OnceLock<Vec<u8>> = OnceLock::new();
    JSON.get_or_init(|| serde_json::to_vec(value()).expect("the document serializes"))
}

impl crate::Api {
    /// The answer of `GET /openapi.json` (a method, as every handler is,
    /// so the route table needs no path to this module).
    pub(crate) fn openapi_json(&self) -> crate::Response {
        // The fields besides the body as every JSON answer has them.
        crate::Response { body: json().to_vec(), ..crate::Response::json(200, &()) }
    }
}

/// The document pretty-printed, as docs/openapi.json holds it.
pub fn pretty() -> String {
    let mut s = serde_json::to_string_pretty(&document()).expect("the document serializes");
    s.push('\n');
    s
}

/// The route table of docs/api.md, rendered from the document (a test
/// checks the doc holds it; `make openapi` rewrites it): each operation's
/// method, path, summary, and the reference page's anchor for it.
pub fn route_table() -> String {
    let doc = serde_json::to_value(document()).expect("the document serializes");
    let mut out = String::from("| route | what | operation |\n| --- | --- | --- |\n");
    for (method, path) in operations(&document()) {
        let op = &doc["paths"][&path][method.to_lowercase()];
        let summary = op["summary"].as_str().unwrap_or("").replace('|', "\\|").replace('\n', " ");
        let id = op["operationId"].as_str().unwrap_or("");
        out.push_str(&format!("| `{method} {path}` | {summary} | `{id}` |\n"));
    }
    out
}

/// Where docs/api.md's generated route table starts and ends.
pub const ROUTE_TABLE_MARKERS: (&str, &str) =
    ("<!-- routes: generated from the OpenAPI document by `make openapi` -->\n", "<!-- /routes -->\n");

/// The health answer (`GET /healthz`).
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "meta",
    summary = "Liveness",
    description = "Answers while the process serves requests; open to anyone (no credential is read).",
    responses((status = 200, description = "The process is up.", body = hookline_wire::health::Health,
        example = json!({"status": "ok"})))
)]
#[allow(dead_code)]
fn healthz() {}

/// `GET /metrics`.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "meta",
    summary = "Prometheus metrics",
    description = "Prometheus text exposition (events, deliveries by outcome, attempt latency, queue depth, dead \
        letters, breakers, unhealthy subscriptions). For a key with the reader role or more, bound to no tenant (the \
        counters span every tenant).",
    responses((status = 200, description = "The metrics.", content_type = "text/plain; version=0.0.4", body = String,
        example = json!("# TYPE hookline_events_total counter\nhookline_events_total 42\n")))
)]
#[allow(dead_code)]
fn metrics() {}

/// `GET /openapi.json`.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "meta",
    summary = "This document",
    description = "The OpenAPI 3.1 document of the API, generated from the code (docs/openapi.json is a copy). Open \
        to anyone: it holds nothing secret.",
    responses((status = 200, description = "The document.", body = Object, content_type = "application/json"))
)]
#[allow(dead_code)]
fn openapi_json() {}

/// `GET /docs`.
#[utoipa::path(
    get,
    path = "/docs",
    tag = "meta",
    summary = "The API reference",
    description = "This document rendered as one HTML page (routes, parameters, bodies, responses, error codes, \
        schemas, examples); it works offline: no script, no external asset. Open to anyone.",
    responses((status = 200, description = "The page.", body = String, content_type = "text/html; charset=utf-8"))
)]
#[allow(dead_code)]
fn reference() {}

/// What every route shares.
fn base() -> OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(
        info(title = "Hookline", license(name = "see the repository")),
        servers(
            (url = "http://127.0.0.1:8080", description = "`hookline serve` (its default `--listen`)"),
            (url = "https://{api_id}.execute-api.{region}.amazonaws.com", description = "A deployment of template.yaml (API Gateway, SigV4)",
                variables(("api_id" = (default = "abcdef1234", description = "The HttpApi's id (the stack output ApiUrl)")),
                          ("region" = (default = "us-east-1", description = "The stack's region"))))
        ),
        paths(healthz, metrics, openapi_json, reference),
        components(schemas(ErrorBody, ErrorDetail, hookline_wire::FieldIssue, ErrorCode, hookline_wire::health::Health)),
        tags(
            (name = "events", description = "Producing events and following their deliveries."),
            (name = "subscriptions", description = "Where events go: callback URL, patterns, retries, secrets."),
            (name = "dead-letters", description = "Deliveries that ran out of retries: inspect, requeue, skip, in bulk."),
            (name = "replays", description = "Delivering stored events again; bulk and replay jobs."),
            (name = "keys", description = "API keys (`hookline serve`) and principal grants (AWS)."),
            (name = "audit", description = "The audit trail of every change."),
            (name = "stats", description = "Delivery statistics behind the console's charts."),
            (name = "portal", description = "The subscriber portal and the console: portal links, the caller, event types seen, test events."),
            (name = "meta", description = "Health, metrics and this document.")
        )
    )]
    struct Base;
    let mut doc = <Base as utoipa::OpenApi>::openapi();
    doc.info.description = Some(description());
    doc.info.license = None;
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        BEARER,
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .bearer_format("hlk_…")
                .description(Some(
                    "`hookline serve`: an API key (`HOOKLINE_API_KEY`, `--api-keys-file`, or one made with \
                     `POST /v1/keys`), sent as `Authorization: Bearer <secret>`. Its role and tenant decide what it \
                     may do.",
                ))
                .build(),
        ),
    );
    let mut sigv4 = ApiKeyValue::with_description(
        "Authorization",
        "A deployment on AWS: API Gateway checks an AWS Signature Version 4 (IAM, service `execute-api`); the \
         principal it names needs a grant (`ADMIN_PRINCIPALS`, or `POST /v1/keys` with `principal`).",
    );
    sigv4.extensions = Some(ExtensionsBuilder::new().add("x-amazon-apigateway-authtype", "awsSigv4").build());
    components.add_security_scheme(SIGV4, SecurityScheme::ApiKey(ApiKey::Header(sigv4)));
    components.responses.insert("MethodNotAllowed".into(), RefOr::T(error_response(&[ErrorCode::MethodNotAllowed])));
    doc
}

/// The document's description: what it covers, the status rule and the
/// table of every error code ([`ErrorCode::ALL`]) with its status and
/// meaning.
fn description() -> String {
    let mut d = String::from(
        "Webhook delivery: producers post events, Hookline routes them to subscriptions and delivers signed HTTPS \
         callbacks with retries, dead letters, requeue and replay. The same API is served by `hookline serve` \
         (authenticated with `Authorization: Bearer <key>`) and by a deployment on AWS behind API Gateway (signed \
         with SigV4).\n\n\
         Every refusal is `{\"error\": {\"code\", \"message\", \"field\"?, \"errors\"}}` (`ErrorBody`): clients \
         match on `code`, whose status never changes; `errors` lists every bad field of a request, `field` repeats \
         the first. The rule: **400** when the request could not be parsed (malformed JSON, a body that is not an \
         object, a missing required field, an unknown field or query parameter, a value of the wrong type, an enum \
         name that is not one); **422** when it was parsed and a value broke a rule (out of range, too long, a bad \
         pattern, a time outside the retention); 401/403/404/405/409/413/429/503 as HTTP means them. A refused \
         request writes nothing. A known path with another method is `405` with `Allow` listing its methods.\n\n\
         Lists are pages `{\"items\", \"next_cursor\"}`: pass `cursor` back unchanged with the same filters.\n\n\
         ## Error codes\n\n| code | status | meaning |\n| --- | --- | --- |\n",
    );
    for c in ErrorCode::ALL {
        d.push_str(&format!("| `{}` | {} | {} |\n", c.as_str(), c.status(), c.meaning().replace('|', "\\|")));
    }
    d
}

/// Each route's `operationId`: the name a generated client gives its
/// function, kept stable here whatever the handler is called. A test
/// checks every route has one.
pub const OPERATION_IDS: &[(&str, &str, &str)] = &[
    ("GET", "/healthz", "health"),
    ("GET", "/metrics", "metrics"),
    ("GET", "/openapi.json", "openapi"),
    ("GET", "/docs", "reference"),
    ("POST", "/v1/events", "post_event"),
    ("POST", "/v1/events/batch", "post_event_batch"),
    ("GET", "/v1/events", "list_events"),
    ("GET", "/v1/events/{event}", "get_event"),
    ("GET", "/v1/events/{event}/deliveries", "list_deliveries"),
    ("POST", "/v1/events/{event}/replay", "replay_event"),
    ("POST", "/v1/subscriptions", "create_subscription"),
    ("POST", "/v1/subscriptions/reindex", "reindex_subscriptions"),
    ("GET", "/v1/subscriptions", "list_subscriptions"),
    ("GET", "/v1/subscriptions/{subscription}", "get_subscription"),
    ("PATCH", "/v1/subscriptions/{subscription}", "update_subscription"),
    ("DELETE", "/v1/subscriptions/{subscription}", "delete_subscription"),
    ("POST", "/v1/subscriptions/{subscription}/verify", "verify_subscription"),
    ("POST", "/v1/subscriptions/{subscription}/rotate-secret", "rotate_subscription_secret"),
    ("POST", "/v1/subscriptions/{subscription}/lanes/{partition_key}/skip", "skip_lane"),
    ("GET", "/v1/dead-letters", "list_dead_letters"),
    ("POST", "/v1/dead-letters/requeue", "requeue_dead_letters"),
    ("POST", "/v1/dead-letters/skip", "skip_dead_letters"),
    ("POST", "/v1/dead-letters/reindex", "reindex_dead_letters"),
    ("GET", "/v1/dead-letters/{dead_letter}", "get_dead_letter"),
    ("POST", "/v1/dead-letters/{dead_letter}/requeue", "requeue_dead_letter"),
    ("POST", "/v1/dead-letters/{dead_letter}/skip", "skip_dead_letter"),
    ("POST", "/v1/replays", "start_replay"),
    ("GET", "/v1/jobs/{job}", "get_job"),
    ("GET", "/v1/audit", "list_audit"),
    ("POST", "/v1/keys", "create_key"),
    ("GET", "/v1/keys", "list_keys"),
    ("GET", "/v1/keys/{key}", "get_key"),
    ("DELETE", "/v1/keys/{key}", "revoke_key"),
    ("POST", "/v1/keys/{key}/rotate", "rotate_key"),
    ("GET", "/v1/subscriptions/{subscription}/stats", "subscription_stats"),
    ("GET", "/v1/stats", "system_stats"),
    ("POST", "/v1/portal-links", "create_portal_link"),
    ("GET", "/v1/me", "me"),
    ("GET", "/v1/event-types", "list_event_types"),
    ("POST", "/v1/event-types", "register_event_type"),
    ("GET", "/v1/event-types/{name}", "get_event_type"),
    ("POST", "/v1/subscriptions/{subscription}/test", "send_test_event"),
    ("POST", "/v1/subscriptions/{subscription}/acknowledgements", "acknowledge_delivery"),
    ("GET", "/v1/subscriptions/{subscription}/events", "pull_events"),
];

/// One link of the document: from an operation's success response, a
/// value of its body (a JSON pointer) fills a parameter of another
/// operation.
pub struct LinkSpec {
    /// The operation answering (method, path).
    pub from: (&'static str, &'static str),
    /// Its success status the link hangs on.
    pub status: &'static str,
    /// The operation the link leads to (method, path).
    pub to: (&'static str, &'static str),
    /// The target's path parameter.
    pub param: &'static str,
    /// Where its value is in the response body (`/id`, `/items/0/id`).
    pub pointer: &'static str,
}

/// Shorthand for a [`LinkSpec`].
const fn link(
    from: (&'static str, &'static str),
    status: &'static str,
    to: (&'static str, &'static str),
    param: &'static str,
    pointer: &'static str,
) -> LinkSpec {
    LinkSpec { from, status, to, param, pointer }
}

const SUBS: (&str, &str) = ("POST", "/v1/subscriptions");
const SUB: &str = "/v1/subscriptions/{subscription}";
const EVENT: &str = "/v1/events/{event}";
const DEAD: &str = "/v1/dead-letters/{dead_letter}";
const JOB: (&str, &str) = ("GET", "/v1/jobs/{job}");
const KEY: &str = "/v1/keys/{key}";

/// The links between operations (the stateful walk a client or a fuzzer
/// follows: create, then read, change, delete what was created).
pub const LINKS: &[LinkSpec] = &[
    link(SUBS, "201", ("GET", SUB), "subscription", "/id"),
    link(SUBS, "201", ("PATCH", SUB), "subscription", "/id"),
    link(SUBS, "201", ("DELETE", SUB), "subscription", "/id"),
    link(SUBS, "201", ("POST", "/v1/subscriptions/{subscription}/verify"), "subscription", "/id"),
    link(SUBS, "201", ("POST", "/v1/subscriptions/{subscription}/rotate-secret"), "subscription", "/id"),
    link(("GET", "/v1/subscriptions"), "200", ("GET", SUB), "subscription", "/items/0/id"),
    link(("POST", "/v1/events"), "202", ("GET", EVENT), "event", "/event_id"),
    link(("POST", "/v1/events"), "202", ("GET", "/v1/events/{event}/deliveries"), "event", "/event_id"),
    link(("POST", "/v1/events"), "202", ("POST", "/v1/events/{event}/replay"), "event", "/event_id"),
    link(("GET", "/v1/events"), "200", ("GET", EVENT), "event", "/items/0/id"),
    link(("GET", "/v1/dead-letters"), "200", ("GET", DEAD), "dead_letter", "/items/0/id"),
    link(
        ("GET", "/v1/dead-letters"),
        "200",
        ("POST", "/v1/dead-letters/{dead_letter}/requeue"),
        "dead_letter",
        "/items/0/id",
    ),
    link(
        ("GET", "/v1/dead-letters"),
        "200",
        ("POST", "/v1/dead-letters/{dead_letter}/skip"),
        "dead_letter",
        "/items/0/id",
    ),
    link(("POST", "/v1/dead-letters/requeue"), "202", JOB, "job", "/job_id"),
    link(("POST", "/v1/dead-letters/skip"), "202", JOB, "job", "/job_id"),
    link(("POST", "/v1/replays"), "202", JOB, "job", "/job_id"),
    link(("POST", "/v1/keys"), "201", ("GET", KEY), "key", "/id"),
    link(("POST", "/v1/keys"), "201", ("DELETE", KEY), "key", "/id"),
    link(("POST", "/v1/keys"), "201", ("POST", "/v1/keys/{key}/rotate"), "key", "/id"),
    link(("GET", "/v1/keys"), "200", ("GET", KEY), "key", "/items/0/id"),
];

/// Whether the route (method, path) is open: no credential ([`ROUTES`]
/// rows without an action).
pub fn is_open(method: &str, path: &str) -> bool {
    ROUTES.iter().any(|r| r.method == method && r.path == path && r.action.is_none())
}

/// The operation at (method, path), if the document has it.
pub fn operation_mut<'a>(doc: &'a mut OpenApi, method: &str, path: &str) -> Option<&'a mut Operation> {
    let item = doc.paths.paths.get_mut(path)?;
    slot(item, method).as_mut()
}

/// The operation slot of a path item for a method.
fn slot<'a>(item: &'a mut PathItem, method: &str) -> &'a mut Option<Operation> {
    match method {
        "GET" => &mut item.get,
        "POST" => &mut item.post,
        "PATCH" => &mut item.patch,
        "DELETE" => &mut item.delete,
        "PUT" => &mut item.put,
        "HEAD" => &mut item.head,
        "OPTIONS" => &mut item.options,
        _ => &mut item.trace,
    }
}

/// Every (method, path) the document has, in path order.
pub fn operations(doc: &OpenApi) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (path, item) in &doc.paths.paths {
        for (m, op) in [
            ("GET", &item.get),
            ("POST", &item.post),
            ("PATCH", &item.patch),
            ("DELETE", &item.delete),
            ("PUT", &item.put),
            ("HEAD", &item.head),
            ("OPTIONS", &item.options),
            ("TRACE", &item.trace),
        ] {
            if op.is_some() {
                out.push((m, path.clone()));
            }
        }
    }
    out
}

/// A response refusing with `codes` (all of one status): the error body,
/// the codes and their meanings, an example of the first.
fn error_response(codes: &[ErrorCode]) -> Response {
    let example = ErrorBody {
        error: ErrorDetail { code: codes[0], message: codes[0].meaning().to_string(), field: None, errors: Vec::new() },
    };
    ResponseBuilder::new()
        .description(codes_text(codes))
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name("ErrorBody"))))
                .example(Some(serde_json::to_value(example).expect("serializes")))
                .build(),
        )
        .build()
}

/// Codes as a response description lists them: one line each, the code in
/// backticks (what the tests look for) and its meaning.
fn codes_text(codes: &[ErrorCode]) -> String {
    codes.iter().map(|c| format!("`{}`: {}", c.as_str(), c.meaning())).collect::<Vec<_>>().join("\n\n")
}

/// Adds `code` to the operation's response of its status: a new error
/// response, or a line in the existing one's description.
fn add_error(op: &mut Operation, code: ErrorCode) {
    let status = code.status().to_string();
    match op.responses.responses.get_mut(&status) {
        None => {
            op.responses.responses.insert(status, RefOr::T(error_response(&[code])));
        }
        Some(RefOr::T(r)) => {
            if !r.description.contains(&format!("`{}`", code.as_str())) {
                r.description.push_str("\n\n");
                r.description.push_str(&codes_text(&[code]));
            }
        }
        Some(RefOr::Ref(_)) => {}
    }
}

/// What `#[utoipa::path]` cannot say, applied to whatever operations the
/// document holds (so it applies to each once its module adds it).
fn finish(doc: &mut OpenApi) {
    let secured = vec![
        SecurityRequirement::new(BEARER, Vec::<String>::new()),
        SecurityRequirement::new(SIGV4, Vec::<String>::new()),
    ];
    for (method, path) in operations(doc) {
        let open = is_open(method, &path);
        let op = operation_mut(doc, method, &path).expect("listed");
        if let Some((_, _, id)) = OPERATION_IDS.iter().find(|(m, p, _)| *m == method && *p == path) {
            op.operation_id = Some((*id).to_string());
        }
        op.security = Some(match (open, super::routes::bearer_only(method, &path)) {
            (true, _) => Vec::new(),
            // Behind API Gateway too: no IAM authorizer on it.
            (false, true) => vec![SecurityRequirement::new(BEARER, Vec::<String>::new())],
            (false, false) => secured.clone(),
        });
        if open {
            continue;
        }
        add_error(op, ErrorCode::Unauthorized);
        add_error(op, ErrorCode::Forbidden);
        if path.contains('{') {
            add_error(op, ErrorCode::NotFound);
            add_error(op, ErrorCode::InvalidPath);
        }
        if op.request_body.is_some() {
            add_error(op, ErrorCode::PayloadTooLarge);
            add_error(op, ErrorCode::RequestTimeout);
        }
        add_error(op, ErrorCode::Unavailable);
    }
    // utoipa (5.5) writes a link's `operationId` as `operation_id`, which
    // OpenAPI does not know: every link of the document says it as an
    // extension field of the right name instead.
    for (method, path) in operations(doc) {
        let op = operation_mut(doc, method, &path).expect("listed");
        for response in op.responses.responses.values_mut() {
            let RefOr::T(response) = response else { continue };
            for link in response.links.values_mut() {
                if let RefOr::T(link) = link {
                    spell_link(link);
                }
            }
        }
    }
    let ids: BTreeMap<(&str, &str), &str> = OPERATION_IDS.iter().map(|(m, p, id)| ((*m, *p), *id)).collect();
    for l in LINKS {
        if operation_mut(doc, l.to.0, l.to.1).is_none() {
            continue;
        }
        let Some(op) = operation_mut(doc, l.from.0, l.from.1) else { continue };
        let Some(RefOr::T(response)) = op.responses.responses.get_mut(l.status) else { continue };
        let target_id = ids[&l.to];
        // A link the operation's module already gives is kept as it is.
        if response.links.values().any(|k| matches!(k, RefOr::T(k) if link_target(k) == Some(target_id))) {
            continue;
        }
        let mut target = Link::default();
        target.operation_id = target_id.to_string();
        target.parameters.insert(l.param.to_string(), format!("$response.body#{}", l.pointer).into());
        target.description = format!("The `{}` of {} {}", l.param, l.to.0, l.to.1);
        spell_link(&mut target);
        response.links.insert(target_id.to_string(), RefOr::T(target));
    }
}

/// Moves a link's `operation_id`/`operation_ref` to the fields OpenAPI
/// names `operationId`/`operationRef` (see [`finish`]).
fn spell_link(link: &mut Link) {
    let extensions = link.extensions.get_or_insert_with(Default::default);
    for (name, value) in [
        ("operationId", std::mem::take(&mut link.operation_id)),
        ("operationRef", std::mem::take(&mut link.operation_ref)),
    ] {
        if !value.is_empty() {
            extensions.insert(name.to_string(), value.into());
        }
    }
}

/// The operation a link leads to, by id.
fn link_target(link: &Link) -> Option<&str> {
    link.extensions.as_ref()?.get("operationId")?.as_str()
}

#[cfg(test)]
mod tests;
