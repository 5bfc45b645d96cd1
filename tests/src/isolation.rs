//! Tenant isolation and roles, route by route (issue 24), on both backends
//! (`tests/tests/serve/stages.rs`, `tests/tests/aws/stages.rs`): the API
//! in-process (through [`hookline_api::http::router`]) over the real stores of a
//! [`Rig`] (a SQLite file; the emulator under the strict checker).
//!
//! The routes come from the API's own table ([`routes::ROUTES`]), not a
//! list kept here: each route gets its attacks from [`attacks`], which
//! fails the test for a route it has no case for, so a route added later
//! cannot go unchecked. An admin of no tenant creates tenant B's
//! subscription (with a custom header and its callback URL), event, dead
//! letter, job and audit records; keys of tenant A, of every role, then
//! try every route against them, and so does a portal token of tenant A
//! (through the console's `/ui/api`; expired and forged ones are `401` on
//! every route). Each answer must be a `403` or a `404`
//! (or, for a listing A may make, hold nothing of B), never carry anything
//! of B (ids, URL, header value, tenant name, event body), and nothing may
//! be written: B's records unchanged, no audit record or queued message
//! from A.

use std::time::Duration;

use hookline_api::routes::{self, Route};
use hookline_api::{Api, ApiKey, Response, Verification};
use serde_json::{json, Value};
use shared::access::{Action, Role};
use shared::audit::AuditFilter;
use shared::dead_letter::{DeadLetter, DeadLetterState};
use shared::ids::{DeadLetterId, EventId, SubscriptionId, TenantId};

use crate::stages::Rig;

/// Tenant B, whose resources A goes after.
const B: &str = "tenant-b-7c1";
/// Tenant A, the attacker's.
const A: &str = "tenant-a-3f9";
/// What marks B's subscription: in its callback URL and a header value.
const B_URL_MARK: &str = "b-hook-5d2";
const B_HEADER: &str = "b-header-secret-91e";
/// In B's event: its producer id and a value of its body.
const B_PRODUCER_ID: &str = "b-evt-producer-4a7";
const B_BODY: &str = "b-body-marker-0c3";
/// The name of B's key.
const B_KEY_NAME: &str = "b-key-name-6e8";

/// The secret of the key of `role` bound to `tenant` (`None`: unbound).
fn secret(role: Role, tenant: Option<&str>) -> String {
    format!("secret-{}-{}", role.as_str(), tenant.unwrap_or("all"))
}

fn keys() -> Vec<ApiKey> {
    let mut keys = Vec::new();
    for tenant in [None, Some(A), Some(B)] {
        for role in Role::ALL {
            keys.push(ApiKey {
                name: format!("{}-{}", role.as_str(), tenant.unwrap_or("all")),
                secret: secret(role, tenant),
                role,
                tenant: tenant.map(TenantId::new),
            });
        }
    }
    keys
}

/// One call of the API, through its router ([`hookline_api::http::router`]).
async fn call(api: &Api, key: &str, method: &str, path: &str, query: Option<&str>, body: &[u8]) -> Response {
    let uri = match query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    };
    let req = axum::http::Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {key}"))
        .body(axum::body::Body::from(body.to_vec()))
        .expect("a request");
    let res = hookline_api::http::call(&hookline_api::http::router(api.clone()), req).await;
    let status = res.status().as_u16();
    let body = axum::body::to_bytes(res.into_body(), usize::MAX).await.expect("the body").to_vec();
    Response { status, content_type: "application/json", body, headers: Vec::new() }
}

/// B's resources, as the admin created them.
struct OfB {
    subscription: SubscriptionId,
    event: EventId,
    dead_letter: DeadLetterId,
    job: String,
    /// A key bound to B (its id).
    key: String,
}

impl OfB {
    /// Every string of B that must never reach A.
    fn marks(&self) -> Vec<String> {
        vec![
            B.to_string(),
            B_URL_MARK.to_string(),
            B_HEADER.to_string(),
            B_PRODUCER_ID.to_string(),
            B_BODY.to_string(),
            self.subscription.to_string(),
            self.event.to_string(),
            self.dead_letter.to_string(),
            self.job.clone(),
            self.key.clone(),
            B_KEY_NAME.to_string(),
        ]
    }
}

/// What an attack must come to.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// `403` or `404`.
    Refused,
    /// A batch: refused whole (`403`), or each item refused with `403`.
    BatchRefused,
    /// A listing of A's own: any answer but a server error, holding nothing
    /// of B.
    Clean,
    /// A route a subscriber signs with its subscription's secret: `401`
    /// whatever key is presented (a key is no signature).
    Unsigned,
}

/// One attack: a request of A's against B.
struct Attack {
    path: String,
    query: Option<String>,
    body: Vec<u8>,
    expect: Expect,
}

fn attack(path: String, query: Option<&str>, body: Value, expect: Expect) -> Attack {
    let body = if body.is_null() { Vec::new() } else { serde_json::to_vec(&body).unwrap() };
    Attack { path, query: query.map(str::to_string), body, expect }
}

/// The attack `atk` sent by `who` to `path` and its answer `res`, described
/// for assertion messages, once checked to hold none of B's `marks`.
fn leaks_nothing(who: &str, method: &str, path: &str, atk: &Attack, res: &Response, marks: &[String]) -> String {
    let body = String::from_utf8_lossy(&res.body);
    let what = format!(
        "{who}: {method} {path}?{} {} -> {} {body}",
        atk.query.as_deref().unwrap_or(""),
        String::from_utf8_lossy(&atk.body),
        res.status,
    );
    for m in marks {
        assert!(!body.contains(m.as_str()), "B's {m:?} in the answer to {what}");
    }
    what
}

/// The path of `route` with its parameters filled with B's resources.
fn path_of(route: &Route, b: &OfB) -> String {
    let segments: Vec<String> = route
        .segments()
        .map(|s| match s {
            "{event}" => b.event.to_string(),
            "{subscription}" => b.subscription.to_string(),
            "{dead_letter}" => b.dead_letter.to_string(),
            "{job}" => b.job.clone(),
            "{key}" => b.key.clone(),
            "{partition_key}" => "p1".to_string(),
            "{name}" => "order.created".to_string(),
            s if s.starts_with('{') => panic!("{} {}: no value for the parameter {s}", route.method, route.path),
            s => s.to_string(),
        })
        .collect();
    format!("/{}", segments.join("/"))
}

/// A domain-event or contract fixture naming `tenant`.
fn fixture_of(name: &str, tenant: &str) -> Value {
    let mut v: Value = serde_json::from_slice(&crate::fixture(name)).unwrap();
    v["tenantId"] = json!(tenant);
    v["eventId"] = json!(B_PRODUCER_ID);
    v
}

/// The attacks on one route: every route of the table must have some.
fn attacks(route: &Route, b: &OfB, a_event: &EventId) -> Vec<Attack> {
    use Expect::*;
    let path = path_of(route, b);
    let reason = json!({"reason": "attack"});
    let now = chrono::Utc::now();
    let range = |extra: Value| {
        let mut v =
            json!({"since": (now - chrono::Duration::hours(1)).to_rfc3339(), "until": now.to_rfc3339(), "reason": "r"});
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        v
    };
    let native_b = json!({"type": "order.created", "data": {"m": B_BODY}, "id": B_PRODUCER_ID, "tenant_id": B});
    match (route.method, route.path) {
        // The open routes: the same for every caller, nothing of any tenant.
        ("GET", "/healthz") | ("GET", "/openapi.json") | ("GET", "/docs") => {
            vec![attack(path, None, Value::Null, Clean)]
        }
        ("GET", "/metrics") => vec![attack(path, None, Value::Null, Refused)],
        ("POST", "/v1/events") => vec![
            attack(path.clone(), None, native_b, Refused),
            attack(path.clone(), None, fixture_of("domain_event_envelope.json", B), Refused),
            attack(path, None, fixture_of("contract_envelope.json", B), Refused),
        ],
        ("POST", "/v1/events/batch") => vec![attack(path, None, json!([native_b]), BatchRefused)],
        ("GET", "/v1/events") => vec![
            attack(path.clone(), Some(&format!("tenant_id={B}")), Value::Null, Refused),
            attack(path, None, Value::Null, Clean),
        ],
        ("GET", "/v1/events/{event}") | ("GET", "/v1/events/{event}/deliveries") => {
            vec![attack(path, None, Value::Null, Refused)]
        }
        ("POST", "/v1/events/{event}/replay") => vec![
            attack(path, None, reason.clone(), Refused),
            // A's own event, into B's subscription.
            attack(
                format!("/v1/events/{}/replay", urlencoding(a_event.as_str())),
                None,
                json!({"reason": "r", "subscription_id": b.subscription}),
                Refused,
            ),
        ],
        ("POST", "/v1/subscriptions") => vec![attack(
            path,
            None,
            json!({"callback_url": "http://127.0.0.1:9/a", "event_types": ["*"], "tenant_id": B}),
            Refused,
        )],
        ("POST", "/v1/subscriptions/reindex") | ("POST", "/v1/dead-letters/reindex") => {
            vec![attack(path, None, json!({}), Refused)]
        }
        ("GET", "/v1/subscriptions") => vec![
            attack(path.clone(), Some(&format!("tenant_id={B}")), Value::Null, Refused),
            attack(path.clone(), Some(&format!("tenant_id={B}&event_type=order.created")), Value::Null, Refused),
            attack(path.clone(), Some("event_type=order.created"), Value::Null, Clean),
            attack(path, None, Value::Null, Clean),
        ],
        ("GET", "/v1/subscriptions/{subscription}")
        | ("POST", "/v1/subscriptions/{subscription}/verify")
        | ("DELETE", "/v1/subscriptions/{subscription}") => vec![attack(path, None, Value::Null, Refused)],
        ("PATCH", "/v1/subscriptions/{subscription}") => {
            vec![attack(path, None, json!({"description": "taken", "tenant_id": A}), Refused)]
        }
        ("POST", "/v1/subscriptions/{subscription}/rotate-secret") => vec![attack(path, None, json!({}), Refused)],
        ("GET", "/v1/subscriptions/{subscription}/stats") => vec![attack(path, None, Value::Null, Refused)],
        ("GET", "/v1/stats") => vec![
            attack(path.clone(), Some(&format!("tenant_id={B}")), Value::Null, Refused),
            attack(path, None, Value::Null, Clean),
        ],
        ("POST", "/v1/subscriptions/{subscription}/lanes/{partition_key}/skip") => {
            vec![attack(path, None, reason.clone(), Refused)]
        }
        ("GET", "/v1/dead-letters") => vec![
            attack(path.clone(), Some(&format!("tenant_id={B}")), Value::Null, Refused),
            attack(path.clone(), Some(&format!("subscription_id={}", b.subscription)), Value::Null, Clean),
            attack(path, None, Value::Null, Clean),
        ],
        ("POST", "/v1/dead-letters/requeue") | ("POST", "/v1/dead-letters/skip") => vec![
            attack(path.clone(), None, json!({"reason": "r", "filter": {"tenant_id": B}}), Refused),
            attack(path, None, json!({"reason": "r", "filter": {"subscription_id": b.subscription}}), Refused),
        ],
        ("GET", "/v1/dead-letters/{dead_letter}") => vec![attack(path, None, Value::Null, Refused)],
        ("POST", "/v1/dead-letters/{dead_letter}/requeue") | ("POST", "/v1/dead-letters/{dead_letter}/skip") => {
            vec![attack(path, None, reason.clone(), Refused)]
        }
        ("POST", "/v1/replays") => vec![
            attack(path.clone(), None, json!({"event_id": b.event, "reason": "r"}), Refused),
            attack(path.clone(), None, json!({"partition_key": "p1", "tenant_id": B, "reason": "r"}), Refused),
            attack(path.clone(), None, range(json!({"tenant_id": B})), Refused),
            attack(path, None, range(json!({"subscription_id": b.subscription})), Refused),
        ],
        ("GET", "/v1/jobs/{job}") => vec![attack(path, None, Value::Null, Refused)],
        ("GET", "/v1/audit") => vec![
            attack(path.clone(), Some(&format!("tenant_id={B}")), Value::Null, Refused),
            attack(path.clone(), Some(&format!("subscription_id={}", b.subscription)), Value::Null, Clean),
            attack(path, None, Value::Null, Clean),
        ],
        ("POST", "/v1/keys") => {
            vec![attack(path, None, json!({"name": "taken", "role": "reader", "tenant_id": B}), Refused)]
        }
        ("GET", "/v1/keys") => vec![
            attack(path.clone(), Some(&format!("tenant_id={B}")), Value::Null, Refused),
            attack(path, None, Value::Null, Clean),
        ],
        ("GET", "/v1/keys/{key}") | ("DELETE", "/v1/keys/{key}") => vec![attack(path, None, Value::Null, Refused)],
        ("POST", "/v1/keys/{key}/rotate") => vec![attack(path, None, json!({}), Refused)],
        ("POST", "/v1/portal-links") => vec![attack(path, None, json!({"tenant_id": B}), Refused)],
        ("GET", "/v1/me") => vec![attack(path, None, Value::Null, Clean)],
        ("GET", "/v1/event-types") => vec![
            attack(path.clone(), Some(&format!("tenant_id={B}")), Value::Null, Refused),
            attack(path, None, Value::Null, Clean),
        ],
        // The catalog is deployment-wide: a bound key may read it (nothing
        // of B is in it) and may not change it.
        ("POST", "/v1/event-types") => vec![attack(
            path,
            None,
            json!({"name": "order.created", "version": 1, "schema": {"type": "object"}, "description": "taken"}),
            Refused,
        )],
        ("GET", "/v1/event-types/{name}") => vec![attack(path, None, Value::Null, Clean)],
        // Acknowledging B's deliveries takes B's signing secret: no key does.
        ("POST", "/v1/subscriptions/{subscription}/acknowledgements") => vec![attack(
            path,
            None,
            json!({"webhook_id": "msg_0123456789abcdef0123456789", "status": "processed"}),
            Unsigned,
        )],
        ("GET", "/v1/subscriptions/{subscription}/events") => vec![
            attack(path.clone(), None, Value::Null, Refused),
            attack(path, Some("limit=100"), Value::Null, Refused),
        ],
        ("POST", "/v1/subscriptions/{subscription}/test") => vec![
            attack(path.clone(), None, Value::Null, Refused),
            attack(path, None, json!({"event_type": "order.created", "data": {"m": "x"}}), Refused),
        ],
        (m, p) => panic!("no isolation case for {m} {p}: add its attacks to tests/src/isolation.rs"),
    }
}

/// A path segment, percent-encoded.
fn urlencoding(s: &str) -> String {
    s.bytes()
        .map(|c| {
            if c.is_ascii_alphanumeric() || b"-_.~".contains(&c) {
                (c as char).to_string()
            } else {
                format!("%{c:02X}")
            }
        })
        .collect()
}

/// What B's records are, to compare after A's calls.
async fn snapshot(rig: &Rig, b: &OfB) -> String {
    let s = &rig.stores;
    let sub = s.subscriptions.get(&b.subscription).await.unwrap();
    let event = s.events.get(&b.event).await.unwrap();
    let dl = s.dead_letters.get(&b.dead_letter).await.unwrap();
    let job = s.jobs.get(&b.job).await.unwrap();
    let sagas = s.sagas.page_for_event(&b.event, 100, None).await.unwrap().items.len();
    let key = s.keys.get(&shared::ids::ApiKeyId::new(&b.key)).await.unwrap();
    format!("{sub:?}\n{event:?}\n{dl:?}\n{job:?}\n{key:?}\nsagas={sagas}")
}

/// Takes every message on the requeue queue (replays, requeues, job pages).
async fn drain_requeues(rig: &Rig) -> Vec<String> {
    let mut bodies = Vec::new();
    loop {
        let got = rig.stores.requeues.raw().receive(10, Duration::from_secs(300)).await.unwrap();
        if got.is_empty() {
            return bodies;
        }
        let receipts: Vec<String> = got.iter().map(|m| m.receipt.clone()).collect();
        bodies.extend(got.into_iter().map(|m| m.body));
        rig.stores.requeues.raw().delete(&receipts).await.unwrap();
    }
}

/// Creates B's resources as an admin of no tenant; answers them and an
/// event of A's.
async fn setup(rig: &Rig, api: &Api) -> (OfB, EventId) {
    let root = secret(Role::Admin, None);
    let created = call(
        api,
        &root,
        "POST",
        "/v1/subscriptions",
        None,
        &serde_json::to_vec(&json!({
            "callback_url": format!("http://127.0.0.1:9/{B_URL_MARK}"),
            "event_types": ["*"],
            "tenant_id": B,
            "headers": {"X-Team-Token": B_HEADER},
            "ordering": "partition",
        }))
        .unwrap(),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body_json());
    let subscription = SubscriptionId::new(created.body_json()["id"].as_str().unwrap());
    let posted = |body: Value| {
        let body = serde_json::to_vec(&body).unwrap();
        let root = root.clone();
        async move { call(api, &root, "POST", "/v1/events", None, &body).await }
    };
    let b_event = posted(json!({"type": "order.created", "id": B_PRODUCER_ID, "tenant_id": B, "partition_key": "p1", "data": {"m": B_BODY}})).await;
    assert_eq!(b_event.status, 202, "{}", b_event.body_json());
    let event = EventId::new(b_event.body_json()["event_id"].as_str().unwrap());
    let a_event = posted(json!({"type": "order.created", "id": "a-evt-1", "tenant_id": A, "data": {}})).await;
    assert_eq!(a_event.status, 202, "{}", a_event.body_json());
    let a_event = EventId::new(a_event.body_json()["event_id"].as_str().unwrap());
    let dl = DeadLetter {
        subscription_id: subscription.clone(),
        event_id: event.clone(),
        tenant_id: Some(TenantId::new(B)),
        event: rig.stores.events.get(&event).await.unwrap(),
        ..crate::conformance::dead_letter("dl_b_1", chrono::Utc::now())
    };
    assert!(rig.stores.dead_letters.put(&dl).await.unwrap());
    // B's own operator starts a replay job: the job is B's.
    let job = call(
        api,
        &secret(Role::Operator, Some(B)),
        "POST",
        "/v1/replays",
        None,
        &serde_json::to_vec(&json!({"event_id": event, "reason": "b's replay"})).unwrap(),
    )
    .await;
    assert_eq!(job.status, 202, "{}", job.body_json());
    let job = job.body_json()["job_id"].as_str().unwrap().to_string();
    let key = call(
        api,
        &root,
        "POST",
        "/v1/keys",
        None,
        &serde_json::to_vec(&json!({"name": B_KEY_NAME, "role": "operator", "tenant_id": B})).unwrap(),
    )
    .await;
    assert_eq!(key.status, 201, "{}", key.body_json());
    let key = key.body_json()["id"].as_str().unwrap().to_string();
    (OfB { subscription, event, dead_letter: dl.id, job, key }, a_event)
}

/// The route-by-route isolation test; answers (routes, cases) walked.
pub async fn no_tenant_reaches_another_on_any_route(rig: &Rig) -> (usize, usize) {
    let api = Api::with_keys(rig.container(Duration::from_secs(0)), keys(), Verification::Inline);
    let (b, a_event) = setup(rig, &api).await;
    // What the setup queued is not A's.
    drain_requeues(rig).await;
    let before = snapshot(rig, &b).await;
    let marks = b.marks();
    let mut cases = 0;
    for route in routes::ROUTES {
        for atk in attacks(route, &b, &a_event) {
            for role in Role::ALL {
                let key = secret(role, Some(A));
                let res = call(&api, &key, route.method, &atk.path, atk.query.as_deref(), &atk.body).await;
                cases += 1;
                let what = leaks_nothing(&format!("{role:?} of A"), route.method, &atk.path, &atk, &res, &marks);
                match atk.expect {
                    Expect::Refused => assert!(matches!(res.status, 403 | 404), "{what}"),
                    Expect::BatchRefused => {
                        let v = res.body_json();
                        let items_refused = res.status == 207
                            && v["accepted"] == 0
                            && v["results"].as_array().unwrap().iter().all(|r| r["status"] == 403);
                        assert!(res.status == 403 || items_refused, "{what}");
                    }
                    Expect::Clean => assert!(res.status < 500 && res.status != 401, "{what}"),
                    Expect::Unsigned => assert_eq!(res.status, 401, "{what}"),
                }
                // A tenant-bound key reaches nothing global at all.
                if route.action.is_some_and(|a| !a.open_to_tenants()) {
                    assert_eq!(res.status, 403, "{what}");
                }
            }
        }
    }
    // A's portal token, through the console's copy of the API (`/ui/api`):
    // the same attacks, the same answers; and what the portal role may not
    // do (keys, portal links, metrics, events, rebuilds) is a 403.
    let (token, grant) = shared::portal::mint(
        &api.hookline().keyring,
        &TenantId::new(A),
        chrono::Utc::now() + chrono::Duration::hours(1),
    );
    for route in routes::ROUTES {
        for atk in attacks(route, &b, &a_event) {
            let path = format!("/ui/api{}", atk.path);
            let res = call(&api, &token, route.method, &path, atk.query.as_deref(), &atk.body).await;
            cases += 1;
            let what = leaks_nothing("A's portal", route.method, &path, &atk, &res, &marks);
            match atk.expect {
                Expect::Refused | Expect::BatchRefused => assert!(matches!(res.status, 403 | 404), "{what}"),
                Expect::Clean => assert!(res.status < 500 && res.status != 401, "{what}"),
                Expect::Unsigned => assert_eq!(res.status, 401, "{what}"),
            }
            if route.action.is_some_and(|a| !Role::Portal.allows(a)) {
                assert_eq!(res.status, 403, "{what}");
            }
        }
    }
    // Forged and expired portal tokens are a 401 on every route that reads
    // a credential, whatever it names.
    let (expired, _) = shared::portal::mint(
        &api.hookline().keyring,
        &TenantId::new(A),
        chrono::Utc::now() - chrono::Duration::seconds(1),
    );
    let forged = shared::portal::mint(
        &shared::keyring::Keyring::ephemeral(),
        &TenantId::new(A),
        chrono::Utc::now() + chrono::Duration::hours(1),
    )
    .0;
    for route in routes::ROUTES.iter().filter(|r| r.action.is_some()) {
        let path = format!("/ui/api{}", path_of(route, &b));
        for (bad, why) in [(&expired, "expired"), (&forged, "invalid")] {
            let res = call(&api, bad, route.method, &path, None, b"{}").await;
            let v = res.body_json();
            assert_eq!(
                (res.status, v["error"]["message"].as_str()),
                (
                    401,
                    Some(
                        format!("the portal token {}", if why == "expired" { "has expired" } else { "is invalid" })
                            .as_str()
                    )
                ),
                "{why} token: {} {path}: {v}",
                route.method
            );
            cases += 1;
        }
    }
    let page = rig
        .stores
        .audit
        .page(&AuditFilter { actor: Some(grant.actor()), ..AuditFilter::default() }, 10, None)
        .await
        .unwrap();
    assert!(page.items.is_empty(), "A's portal left audit records: {:?}", page.items);

    // Nothing written: B's records as they were, no audit record by A's
    // keys, nothing queued.
    assert_eq!(snapshot(rig, &b).await, before, "B's records changed");
    for role in Role::ALL {
        let actor = format!("key:{}-{A}", role.as_str());
        let page = rig
            .stores
            .audit
            .page(&AuditFilter { actor: Some(actor.clone()), ..AuditFilter::default() }, 10, None)
            .await
            .unwrap();
        assert!(page.items.is_empty(), "{actor} left audit records: {:?}", page.items);
    }
    assert_eq!(drain_requeues(rig).await, Vec::<String>::new(), "A's calls queued work");
    assert_eq!(
        rig.stores.dead_letters.get(&b.dead_letter).await.unwrap().map(|d| d.state),
        Some(DeadLetterState::Open)
    );

    // B's own keys see what A could not: the same routes are there.
    let b_reader = secret(Role::Reader, Some(B));
    for path in [
        format!("/v1/subscriptions/{}", b.subscription),
        format!("/v1/events/{}", urlencoding(b.event.as_str())),
        format!("/v1/dead-letters/{}", b.dead_letter),
        format!("/v1/jobs/{}", b.job),
    ] {
        let res = call(&api, &b_reader, "GET", &path, None, b"").await;
        assert_eq!(res.status, 200, "B's reader: GET {path}: {}", res.body_json());
    }
    let audit = call(&api, &b_reader, "GET", "/v1/audit", None, b"").await;
    let records = audit.body_json()["items"].as_array().cloned().unwrap_or_default();
    assert!(
        records.iter().any(|r| r["action"] == "subscription.created") && records.iter().all(|r| r["tenant_id"] == B),
        "B's reader sees B's audit records only: {records:?}"
    );
    (routes::ROUTES.len(), cases)
}

/// Role checks, from the table: on every route, each role that may not
/// perform the route's action gets a `403` naming the role it needs (keys
/// of no tenant, against B's resources, which stay unchanged); a reader
/// writes nothing, a producer reads nothing, an operator does not manage
/// subscriptions. Answers the number of refusals checked.
pub async fn no_role_does_more_than_it_may(rig: &Rig) -> usize {
    let api = Api::with_keys(rig.container(Duration::from_secs(0)), keys(), Verification::Inline);
    let (b, _) = setup(rig, &api).await;
    drain_requeues(rig).await;
    let before = snapshot(rig, &b).await;
    let mut checked = 0;
    for route in routes::ROUTES {
        let Some(action) = route.action else { continue };
        let path = path_of(route, &b);
        for role in Role::ALL.into_iter().filter(|r| !r.allows(action)) {
            let res = call(&api, &secret(role, None), route.method, &path, None, b"{\"reason\": \"r\"}").await;
            let what = format!("{role:?}: {} {path} -> {} {}", route.method, res.status, res.body_json());
            assert_eq!(res.status, 403, "{what}");
            let message = res.body_json()["error"]["message"].as_str().unwrap_or("").to_string();
            assert!(message.contains("needs"), "the refusal names the role needed: {what}");
            checked += 1;
        }
        // The three rules the issue names, read off the table.
        let reader_writes = !matches!(action, Action::Read | Action::ReadMetrics | Action::Identify | Action::Pull);
        assert_eq!(!Role::Reader.allows(action), reader_writes, "{} {}", route.method, route.path);
        assert_eq!(Role::Producer.allows(action), matches!(action, Action::PostEvents | Action::Identify));
        if action == Action::ManageSubscriptions {
            assert!(!Role::Operator.allows(action));
        }
    }
    assert_eq!(snapshot(rig, &b).await, before, "B's records changed");
    assert_eq!(drain_requeues(rig).await, Vec::<String>::new(), "a refused call queued work");
    checked
}

/// What a tenant-bound key may do, it does within its tenant: a
/// subscription it creates is its tenant's; an event it posts without a
/// tenant (native, or change feed, which has none) is its tenant's; a
/// replay of its event goes to its tenant's subscriptions, not to the
/// global ones that match; its listings hold its tenant's only; its audit
/// records carry its tenant.
pub async fn a_tenant_key_acts_within_its_tenant(rig: &Rig) {
    let api = Api::with_keys(rig.container(Duration::from_secs(0)), keys(), Verification::Inline);
    let post = |key: String, path: &'static str, body: Value| {
        let api = &api;
        async move { call(api, &key, "POST", path, None, &serde_json::to_vec(&body).unwrap()).await }
    };
    let get = |key: String, path: String, query: Option<&'static str>| {
        let api = &api;
        async move { call(api, &key, "GET", &path, query, b"").await }
    };
    let sub = |url: &str| json!({"callback_url": format!("http://127.0.0.1:9/{url}"), "event_types": ["*"]});
    // A global subscription, by an admin of no tenant; one of A's, by A's admin.
    let global = post(secret(Role::Admin, None), "/v1/subscriptions", sub("global")).await;
    assert_eq!(global.status, 201, "{}", global.body_json());
    let global = global.body_json()["id"].as_str().unwrap().to_string();
    let own = post(secret(Role::Admin, Some(A)), "/v1/subscriptions", sub("a")).await;
    assert_eq!((own.status, own.body_json()["tenant_id"].as_str()), (201, Some(A)), "{}", own.body_json());
    let own = own.body_json()["id"].as_str().unwrap().to_string();
    // Both routable (their callbacks do not answer the handshake here).
    for id in [&global, &own] {
        let mut s = rig.stores.subscriptions.get(&SubscriptionId::new(id.as_str())).await.unwrap().unwrap();
        let version = s.version;
        (s.verified, s.version) = (true, version + 1);
        assert!(rig.stores.subscriptions.update(&s, version).await.unwrap());
    }

    // Events without a tenant become A's.
    let producer = secret(Role::Producer, Some(A));
    let native = post(producer.clone(), "/v1/events", json!({"type": "order.created", "id": "a-1", "data": {}})).await;
    assert_eq!(native.status, 202, "{}", native.body_json());
    let native = native.body_json()["event_id"].as_str().unwrap().to_string();
    assert_eq!(native, shared::ids::stored_event_id(Some(A), "a-1").as_str(), "stored as A's event");
    let feed: Value = serde_json::from_slice(&crate::fixture("change_feed_envelope.json")).unwrap();
    let feed = post(producer.clone(), "/v1/events", feed).await;
    assert_eq!(feed.status, 202, "{}", feed.body_json());
    let reader = secret(Role::Reader, Some(A));
    for id in [&native, feed.body_json()["event_id"].as_str().unwrap()] {
        let e = get(reader.clone(), format!("/v1/events/{}", urlencoding(id)), None).await;
        assert_eq!((e.status, e.body_json()["tenant_id"].as_str()), (200, Some(A)), "{}", e.body_json());
    }
    // Its own tenant named explicitly is fine too.
    let named = post(
        producer.clone(),
        "/v1/events/batch",
        json!([{"type": "order.created", "id": "a-2", "tenant_id": A, "data": {}}]),
    )
    .await;
    assert_eq!(named.status, 202, "{}", named.body_json());

    // Another tenant in an envelope: 403 naming the format's own field; in a
    // batch, that item alone.
    let refused =
        post(producer.clone(), "/v1/events", json!({"type": "order.created", "tenant_id": B, "data": {}})).await;
    assert_eq!((refused.status, refused.body_json()["error"]["field"].as_str()), (403, Some("tenant_id")));
    let refused = post(producer.clone(), "/v1/events", fixture_of("domain_event_envelope.json", B)).await;
    assert_eq!((refused.status, refused.body_json()["error"]["field"].as_str()), (403, Some("tenantId")));
    let mixed = post(
        producer.clone(),
        "/v1/events/batch",
        json!([{"type": "order.created", "id": "a-3", "data": {}}, {"type": "order.created", "id": "b-3", "tenant_id": B, "data": {}}]),
    )
    .await;
    let mixed = mixed.body_json();
    assert_eq!((mixed["accepted"].as_u64(), mixed["results"][1]["status"].as_u64()), (Some(1), Some(403)), "{mixed}");
    assert_eq!(mixed["results"][1]["error"]["field"], "tenant_id", "{mixed}");
    // A's admin cannot move its subscription to another tenant, nor make it global.
    for body in [json!({"tenant_id": B}), json!({"tenant_id": null})] {
        let patched = call(
            &api,
            &secret(Role::Admin, Some(A)),
            "PATCH",
            &format!("/v1/subscriptions/{own}"),
            None,
            &serde_json::to_vec(&body).unwrap(),
        )
        .await;
        assert_eq!(
            (patched.status, patched.body_json()["error"]["field"].as_str()),
            (403, Some("tenant_id")),
            "{body}"
        );
    }
    // A replay by time range is of A's events: the job's filter says so.
    let now = chrono::Utc::now();
    let job = post(
        secret(Role::Operator, Some(A)),
        "/v1/replays",
        json!({"since": (now - chrono::Duration::hours(1)).to_rfc3339(), "until": now.to_rfc3339(), "reason": "r"}),
    )
    .await;
    assert_eq!(job.status, 202, "{}", job.body_json());
    let job = get(reader.clone(), format!("/v1/jobs/{}", job.body_json()["job_id"].as_str().unwrap()), None).await;
    assert_eq!((job.status, job.body_json()["filter"]["tenant_id"].as_str()), (200, Some(A)), "{}", job.body_json());

    // A replay of A's event reaches A's subscription, not the global one.
    let replayed = call(
        &api,
        &secret(Role::Operator, Some(A)),
        "POST",
        &format!("/v1/events/{}/replay", urlencoding(&native)),
        None,
        br#"{"reason": "redo"}"#,
    )
    .await;
    assert_eq!(replayed.status, 202, "{}", replayed.body_json());
    let targets: Vec<String> = replayed.body_json()["sagas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["subscription_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(targets, vec![own.clone()], "only A's subscription (the global one {global} matches too)");
    // The same replay by a key of no tenant reaches both.
    let unbound = call(
        &api,
        &secret(Role::Operator, None),
        "POST",
        &format!("/v1/events/{}/replay", urlencoding(&native)),
        None,
        br#"{"reason": "redo"}"#,
    )
    .await;
    assert_eq!(unbound.body_json()["sagas"].as_array().map(Vec::len), Some(2), "{}", unbound.body_json());

    // Listings: A's only, the global subscription left out.
    let listed = get(reader.clone(), "/v1/subscriptions".into(), Some("event_type=order.created")).await;
    let listed = listed.body_json();
    let ids: Vec<&str> = listed["items"].as_array().unwrap().iter().filter_map(|s| s["id"].as_str()).collect();
    assert_eq!(ids, vec![own.as_str()], "{listed}");
    let listed = get(reader.clone(), "/v1/subscriptions".into(), None).await;
    assert_eq!(listed.body_json()["items"].as_array().map(Vec::len), Some(1), "{}", listed.body_json());
    // The audit trail: A's subscription's creation and the replay, of A.
    let audit = get(reader, "/v1/audit".into(), None).await;
    let records = audit.body_json()["items"].as_array().cloned().unwrap_or_default();
    let actions: Vec<&str> = records.iter().map(|r| r["action"].as_str().unwrap_or("")).collect();
    assert!(actions.contains(&"subscription.created") && actions.contains(&"event.replayed"), "{records:?}");
    assert!(records.iter().all(|r| r["tenant_id"] == A), "{records:?}");
}

/// Both tests, for each backend's test binary: `isolation_tests!(sqlite)`
/// or `isolation_tests!(aws)`.
#[macro_export]
macro_rules! isolation_tests {
    (@rig sqlite, $tag:expr) => {
        hookline_tests::stages::Rig::sqlite($tag).await
    };
    (@rig aws, $tag:expr) => {
        hookline_tests::stages::Rig::aws($tag).await
    };
    ($backend:ident) => {
        /// Tenant A's keys, of every role, against B's resources on every
        /// route (`hookline_tests::isolation`).
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn no_tenant_reaches_another_on_any_route() {
            let rig = hookline_tests::isolation_tests!(@rig $backend, "isolation");
            let (routes, cases) = hookline_tests::isolation::no_tenant_reaches_another_on_any_route(&rig).await;
            println!("isolation: {routes} routes, {cases} cases");
        }

        /// A tenant-bound key works within its tenant.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_tenant_key_acts_within_its_tenant() {
            let rig = hookline_tests::isolation_tests!(@rig $backend, "own-tenant");
            hookline_tests::isolation::a_tenant_key_acts_within_its_tenant(&rig).await;
        }

        /// Each role refused what it may not do, on every route.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn no_role_does_more_than_it_may() {
            let rig = hookline_tests::isolation_tests!(@rig $backend, "roles");
            let checked = hookline_tests::isolation::no_role_does_more_than_it_may(&rig).await;
            println!("roles: {checked} refusals checked");
        }
    };
}
