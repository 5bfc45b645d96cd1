//! The route table: every route of the API as data (method, path pattern,
//! the [`Action`] it performs, its handler), walked by [`Api::handle`] and
//! by the tests that must cover every route (the isolation suite, the
//! role × route table of docs/api.md). Adding a route is adding a row here;
//! the access check and the tenant scoping then apply to it without a line
//! in its handler.
//!
//! A pattern's `{…}` segments are parameters. Those named after a resource
//! kind ([`Resource`]: `{event}`, `{subscription}`, `{dead_letter}`, `{job}`)
//! are ids the routing layer resolves before the handler runs: for a
//! tenant-bound caller, a resource of another tenant (or without one) is a
//! `404`, as if it did not exist ([`super::scope`]). Other parameters
//! (`{partition_key}`) are plain values.

use std::future::Future;
use std::pin::Pin;

use shared::access::{Action, Caller};
use shared::bulk::JobKind;
use shared::ids::{DeadLetterId, EventId, SubscriptionId};

use super::{Api, ApiResult, Request};

/// What a handler returns: its answer, later.
pub type Answer<'a> = Pin<Box<dyn Future<Output = ApiResult> + Send + 'a>>;

/// A route's handler: runs once the caller was authenticated, allowed the
/// route's action, and the resources the path names were resolved as its
/// to see.
pub type Handler = for<'a> fn(&'a Api, &'a Call<'a>) -> Answer<'a>;

/// A kind of resource a path parameter can name, resolved (and scoped to
/// the caller's tenant) before the handler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// `{event}`: a stored event.
    Event,
    /// `{subscription}`: a subscription.
    Subscription,
    /// `{dead_letter}`: a dead letter.
    DeadLetter,
    /// `{job}`: a bulk or replay job.
    Job,
    /// `{key}`: an API key or principal grant.
    Key,
}

impl Resource {
    /// The kind a parameter name stands for, if it names a resource.
    pub fn of_param(name: &str) -> Option<Resource> {
        match name {
            "event" => Some(Resource::Event),
            "subscription" => Some(Resource::Subscription),
            "dead_letter" => Some(Resource::DeadLetter),
            "job" => Some(Resource::Job),
            "key" => Some(Resource::Key),
            _ => None,
        }
    }

    /// As errors name it (`event e1 not found`).
    pub fn noun(self) -> &'static str {
        match self {
            Resource::Event => "event",
            Resource::Subscription => "subscription",
            Resource::DeadLetter => "dead letter",
            Resource::Job => "job",
            Resource::Key => "key",
        }
    }
}

/// One route of the API.
#[derive(Clone, Copy)]
pub struct Route {
    /// `GET`, `POST`, `PATCH`, `DELETE`.
    pub method: &'static str,
    /// The path pattern, e.g. `/v1/events/{event}/replay` (module docs).
    pub path: &'static str,
    /// What it does, as far as access goes; `None`: open to anyone
    /// (`/healthz`, and the API's contract: `/openapi.json`, `/docs`).
    pub action: Option<Action>,
    /// What answers it.
    pub handler: Handler,
}

impl Route {
    /// The pattern's segments.
    pub fn segments(&self) -> impl Iterator<Item = &'static str> {
        self.path.trim_matches('/').split('/')
    }

    /// The names of its parameters, in path order.
    pub fn params(&self) -> impl Iterator<Item = &'static str> {
        self.segments().filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
    }

    /// The resources its path names, with their parameter names.
    pub fn resources(&self) -> impl Iterator<Item = (&'static str, Resource)> {
        self.params().filter_map(|p| Resource::of_param(p).map(|r| (p, r)))
    }
}

/// One request on its way to a handler: the request, who makes it, and the
/// path's parameters (resources already resolved as the caller's).
pub struct Call<'a> {
    /// The request.
    pub req: Request<'a>,
    /// Who makes it.
    pub caller: Caller,
    /// The path's parameters, by name.
    pub params: Vec<(&'static str, String)>,
}

impl Call<'_> {
    /// The parameter `name` (the route's pattern has it).
    pub fn param(&self, name: &str) -> &str {
        self.params.iter().find(|(n, _)| *n == name).map_or("", |(_, v)| v.as_str())
    }

    /// `{event}`.
    fn event(&self) -> EventId {
        EventId::new(self.param("event"))
    }

    /// `{subscription}`.
    fn subscription(&self) -> SubscriptionId {
        SubscriptionId::new(self.param("subscription"))
    }

    /// `{dead_letter}`.
    fn dead_letter(&self) -> DeadLetterId {
        DeadLetterId::new(self.param("dead_letter"))
    }
}

/// Shorthand for a row.
const fn route(method: &'static str, path: &'static str, action: Option<Action>, handler: Handler) -> Route {
    Route { method, path, action, handler }
}

use Action::*;

/// Every route of the API, in the router's pattern syntax
/// ([`super::http::router`]: matchit's). A path matching several patterns
/// takes the one with a literal segment where the others have a parameter
/// (`/v1/subscriptions/reindex`, not `/v1/subscriptions/{subscription}`),
/// whatever their order here.
pub static ROUTES: &[Route] = TABLE;

/// The routes the ingest function serves (API Gateway sends it `POST
/// /v1/events` and `POST /v1/events/batch`, template.yaml), rows of
/// [`ROUTES`] picked at compile time: a binary whose router holds only
/// these ([`super::http::router_of`]) links these rows' handlers, not every
/// handler of the API, as one holding [`ROUTES`] does (a table of function
/// pointers keeps them all).
pub static INGEST_ROUTES: &[Route] = &[row("POST", "/v1/events"), row("POST", "/v1/events/batch")];

/// The row `method path` of [`TABLE`], at compile time (a missing one fails
/// the build).
const fn row(method: &str, path: &str) -> Route {
    let mut i = 0;
    while i < TABLE.len() {
        if same(TABLE[i].method, method) && same(TABLE[i].path, path) {
            return TABLE[i];
        }
        i += 1;
    }
    panic!("no such route in the table");
}

/// `a == b`, in a `const fn`.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The rows of [`ROUTES`], as a constant, so that [`row`] can pick some at
/// compile time without the others reaching the binary.
const TABLE: &[Route] = &[
    route("GET", "/healthz", None, |_, c| {
        Box::pin(async {
            super::query::none(c.req.query)?;
            let ok = hookline_wire::health::Health { status: hookline_wire::health::HealthStatus::Ok };
            Ok(super::Response::json(200, &ok))
        })
    }),
    route("GET", "/metrics", Some(ReadMetrics), |api, c| {
        Box::pin(async {
            super::query::none(c.req.query)?;
            Ok(api.metrics().await)
        })
    }),
    route("GET", "/openapi.json", None, |api, c| {
        Box::pin(async {
            super::query::none(c.req.query)?;
            Ok(api.openapi_json())
        })
    }),
    route("GET", "/docs", None, |api, c| {
        Box::pin(async {
            super::query::none(c.req.query)?;
            Ok(api.reference_page())
        })
    }),
    route("POST", "/v1/events", Some(PostEvents), |api, c| Box::pin(api.post_event(c))),
    route("POST", "/v1/events/batch", Some(PostEvents), |api, c| Box::pin(api.post_batch(c))),
    route("GET", "/v1/events", Some(Read), |api, c| Box::pin(api.list_events(c))),
    route("GET", "/v1/events/{event}", Some(Read), |api, c| {
        Box::pin(async { api.get_event(&c.event(), &c.req).await })
    }),
    route("GET", "/v1/events/{event}/deliveries", Some(Read), |api, c| {
        Box::pin(async { api.get_deliveries(&c.event(), &c.req).await })
    }),
    route("POST", "/v1/events/{event}/replay", Some(Recover), |api, c| {
        Box::pin(async { api.replay(&c.event(), c).await })
    }),
    route("POST", "/v1/subscriptions", Some(ManageSubscriptions), |api, c| Box::pin(api.create_subscription(c))),
    route("POST", "/v1/subscriptions/reindex", Some(Rebuild), |api, c| Box::pin(api.reindex_subscriptions(&c.req))),
    route("GET", "/v1/subscriptions", Some(Read), |api, c| Box::pin(api.list_subscriptions(c))),
    route("GET", "/v1/subscriptions/{subscription}", Some(Read), |api, c| {
        Box::pin(async { api.get_subscription(&c.subscription(), c).await })
    }),
    route("PATCH", "/v1/subscriptions/{subscription}", Some(ManageSubscriptions), |api, c| {
        Box::pin(async { api.patch_subscription(&c.subscription(), c).await })
    }),
    route("DELETE", "/v1/subscriptions/{subscription}", Some(ManageSubscriptions), |api, c| {
        Box::pin(async { api.delete_subscription(&c.subscription(), c).await })
    }),
    route("POST", "/v1/subscriptions/{subscription}/verify", Some(Recover), |api, c| {
        Box::pin(async { api.verify_now(&c.subscription(), c).await })
    }),
    route("POST", "/v1/subscriptions/{subscription}/rotate-secret", Some(ManageSubscriptions), |api, c| {
        Box::pin(async { api.rotate_secret(&c.subscription(), c).await })
    }),
    route("GET", "/v1/subscriptions/{subscription}/stats", Some(Read), |api, c| {
        Box::pin(async { api.subscription_stats(c.subscription(), c).await })
    }),
    route("POST", "/v1/subscriptions/{subscription}/lanes/{partition_key}/skip", Some(Recover), |api, c| {
        Box::pin(async { api.skip_lane(&c.subscription(), c.param("partition_key"), c).await })
    }),
    route("GET", "/v1/dead-letters", Some(Read), |api, c| Box::pin(api.list_dead_letters(c))),
    route("POST", "/v1/dead-letters/requeue", Some(Recover), |api, c| {
        Box::pin(api.bulk_dead_letters(c, JobKind::Requeue))
    }),
    route("POST", "/v1/dead-letters/skip", Some(Recover), |api, c| Box::pin(api.bulk_dead_letters(c, JobKind::Skip))),
    route("POST", "/v1/dead-letters/reindex", Some(Rebuild), |api, c| Box::pin(api.reindex_dead_letters(&c.req))),
    route("GET", "/v1/dead-letters/{dead_letter}", Some(Read), |api, c| {
        Box::pin(async { api.get_dead_letter(&c.dead_letter(), &c.req).await })
    }),
    route("POST", "/v1/dead-letters/{dead_letter}/requeue", Some(Recover), |api, c| {
        Box::pin(async { api.resolve_dead_letter(&c.dead_letter(), c, true).await })
    }),
    route("POST", "/v1/dead-letters/{dead_letter}/skip", Some(Recover), |api, c| {
        Box::pin(async { api.resolve_dead_letter(&c.dead_letter(), c, false).await })
    }),
    route("POST", "/v1/replays", Some(Recover), |api, c| Box::pin(api.start_replay(c))),
    route("GET", "/v1/jobs/{job}", Some(Read), |api, c| Box::pin(api.get_job(c.param("job"), &c.req))),
    route("GET", "/v1/audit", Some(Read), |api, c| Box::pin(api.list_audit(c))),
    route("GET", "/v1/stats", Some(Read), |api, c| Box::pin(api.system_stats(c))),
    route("POST", "/v1/keys", Some(ManageKeys), |api, c| Box::pin(async { api.create_key(&c.caller, &c.req).await })),
    route("GET", "/v1/keys", Some(ManageKeys), |api, c| Box::pin(async { api.list_keys(&c.caller, &c.req).await })),
    route("GET", "/v1/keys/{key}", Some(ManageKeys), |api, c| {
        Box::pin(async { api.get_key(&c.caller, c.param("key"), &c.req).await })
    }),
    route("DELETE", "/v1/keys/{key}", Some(ManageKeys), |api, c| {
        Box::pin(async { api.revoke_key(&c.caller, c.param("key"), &c.req).await })
    }),
    route("POST", "/v1/keys/{key}/rotate", Some(ManageKeys), |api, c| {
        Box::pin(async { api.rotate_key(&c.caller, c.param("key"), &c.req).await })
    }),
    route("POST", "/v1/portal-links", Some(ManageKeys), |api, c| Box::pin(api.create_portal_link(c))),
    route("GET", "/v1/me", Some(Identify), |api, c| Box::pin(api.me(c))),
    route("GET", "/v1/event-types", Some(Read), |api, c| Box::pin(api.list_event_types(c))),
    route("POST", "/v1/event-types", Some(ManageCatalog), |api, c| Box::pin(api.register_event_type(c))),
    route("GET", "/v1/event-types/{name}", Some(Read), |api, c| {
        Box::pin(async { api.get_event_type(c.param("name"), c).await })
    }),
    route("POST", "/v1/subscriptions/{subscription}/test", Some(ManageSubscriptions), |api, c| {
        Box::pin(async { api.send_test_event(&c.subscription(), c).await })
    }),
    // Open: a subscriber signs it with its subscription's secret, checked
    // by the handler (api/src/acknowledgements.rs).
    route("POST", "/v1/subscriptions/{subscription}/acknowledgements", None, |api, c| {
        Box::pin(async { api.acknowledge(&c.subscription(), c).await })
    }),
    route("GET", "/v1/subscriptions/{subscription}/events", Some(Pull), |api, c| {
        Box::pin(async { api.pull(&c.subscription(), c).await })
    }),
];

/// The routes authenticated by `Authorization: Bearer` only, on every
/// backend: a subscriber key pulls without signing with SigV4, so behind
/// API Gateway these routes have no IAM authorizer and the API checks the
/// key itself (as on the console's `/ui/api`, [`super::Api::for_console`]).
pub const BEARER_ONLY: &[(&str, &str)] = &[("GET", "/v1/subscriptions/{subscription}/events")];

/// Whether (method, pattern) is one of [`BEARER_ONLY`].
pub fn bearer_only(method: &str, path: &str) -> bool {
    BEARER_ONLY.iter().any(|(m, p)| *m == method && *p == path)
}

/// What the router ([`super::http::router`]) found for a request's path
/// and method.
pub enum Found {
    /// This route, with the path's parameters (percent-decoded), by name.
    Route(&'static Route, Vec<(&'static str, String)>),
    /// The path is a route's, but not with this method: the methods it
    /// takes ([`allowed`]).
    OtherMethods(Vec<&'static str>),
    /// No route has this path.
    Nothing,
}

impl Found {
    /// The answer to a request that found no route: `405
    /// method_not_allowed` with `Allow` naming the path's methods, or `404
    /// not_found`.
    pub fn refusal(&self, req: &Request<'_>) -> super::Response {
        use super::{ErrorCode, Response};
        use shared::envelope::show;
        match self {
            Found::OtherMethods(methods) => Response::error(
                ErrorCode::MethodNotAllowed,
                format!("{} does not take {} (it takes {})", show(req.path), show(req.method), methods.join(", ")),
                None,
            )
            .with_header("allow", methods.join(", ")),
            _ => Response::error(ErrorCode::NotFound, format!("no route for {} {}", req.method, show(req.path)), None),
        }
    }
}

/// The methods the route pattern `path` takes, in table order; `HEAD`
/// after `GET` (a `HEAD` request is answered as its `GET`, without the
/// body).
pub fn allowed(path: &str) -> Vec<&'static str> {
    allowed_in(ROUTES, path)
}

/// [`allowed`] in the table `routes`.
pub fn allowed_in(routes: &'static [Route], path: &str) -> Vec<&'static str> {
    let mut methods = Vec::new();
    for r in routes.iter().filter(|r| r.path == path) {
        methods.push(r.method);
        if r.method == "GET" {
            methods.push("HEAD");
        }
    }
    methods
}

/// The role × route table of docs/api.md, rendered from [`ROUTES`] (a
/// test checks the doc holds it): for each route, its action, which roles
/// may call it, and what a tenant-bound key may do with it.
pub fn role_table() -> String {
    let roles = shared::access::Role::EVERY;
    let names: Vec<&str> = roles.iter().map(|r| r.as_str()).collect();
    let mut out = format!("| route | action | {} | tenant-bound key |\n", names.join(" | "));
    out.push_str(&format!("| --- | --- |{} --- |\n", " --- |".repeat(roles.len())));
    for r in ROUTES {
        let cells: Vec<&str> = shared::access::Role::EVERY
            .into_iter()
            .map(|role| match r.action {
                None => "open",
                Some(a) if role.allows(a) => "yes",
                Some(_) => "403",
            })
            .collect();
        let (action, tenant) = match r.action {
            None => ("none".to_string(), "open"),
            Some(a) if !a.open_to_tenants() => (format!("{a:?}"), "403 (every tenant's)"),
            Some(a) => (format!("{a:?}"), "its tenant's only"),
        };
        out.push_str(&format!("| `{} {}` | {action} | {} | {tenant} |\n", r.method, r.path, cells.join(" | ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/api.md holds the role × route table as [`role_table`] renders
    /// it, so the doc cannot drift from the routes.
    #[test]
    fn the_doc_holds_the_role_table() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md")).expect("docs/api.md");
        let table = role_table();
        assert!(doc.contains(&table), "docs/api.md#roles-and-tenants is out of date; it must hold:\n{table}");
    }

    #[test]
    fn every_route_is_one_method_and_pattern_and_only_health_the_contract_and_acknowledgements_are_open() {
        for (i, a) in ROUTES.iter().enumerate() {
            for b in &ROUTES[i + 1..] {
                assert!((a.method, a.path) != (b.method, b.path), "{} {} twice", a.method, a.path);
            }
            let open = (["/healthz", "/openapi.json", "/docs"].contains(&a.path) && a.method == "GET")
                || (a.method, a.path) == ("POST", "/v1/subscriptions/{subscription}/acknowledgements");
            assert_eq!(a.action.is_none(), open, "{} {}", a.method, a.path);
            for p in a.params() {
                assert!(
                    Resource::of_param(p).is_some() || ["partition_key", "name"].contains(&p),
                    "unknown parameter {p}"
                );
            }
        }
    }
}
