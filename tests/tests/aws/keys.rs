//! AWS only: callers sign with IAM, and API Gateway names their principal;
//! Hookline maps it to a role and a tenant through a grant in ApiKeysTable
//! (`POST /v1/keys` with `principal`), or an admin of `ADMIN_PRINCIPALS`.
//! `hookline serve` has no principals (its keys are secrets: the shared
//! key scenarios, `hookline_tests::key_scenarios`, run on both).

use std::time::{Duration, Instant};

use hookline_api::{Api, Verification};
use hookline_tests::aws_pipeline::{AwsPipeline, TEST_PRINCIPAL};
use hookline_tests::pipeline::{unique_name, Pipeline};
use serde_json::json;
use shared::access::Role;

/// A principal without a grant is refused (403, saying how to grant it) by
/// the API and by ingest (`POST /v1/events`), and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unmapped_principal_is_refused_by_the_api_and_ingest() {
    let p = AwsPipeline::start("unmapped").await;
    let stranger = format!("arn:aws:iam::123456789012:user/{}", unique_name("stranger"));
    let event = br#"{"type": "unmapped.test", "id": "evt-unmapped", "data": {}}"#;
    for (method, path, body) in [
        ("POST", "/v1/events", Some(&event[..])),
        ("GET", "/v1/subscriptions", None),
        ("GET", "/v1/keys", None),
        ("POST", "/v1/keys", Some(&br#"{"name": "me", "role": "admin", "principal": "arn:aws:iam::1:user/me"}"#[..])),
    ] {
        let (st, v) = p.call_as_principal(&stranger, method, path, body, &[]).await;
        assert_eq!(st, 403, "{method} {path}: {v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("no grant") && message.contains("ADMIN_PRINCIPALS"), "{v}");
    }
    let (st, v) = p.get("/v1/events/evt-unmapped").await;
    assert_eq!(st, 404, "the refused event was not stored: {v}");
}

/// A grant gives its principal its role and tenant: a reader reads and
/// manages no keys; a tenant-bound admin granted to a role is that role's
/// sessions too (`assumed-role/<role>/<session>`), sees its tenant's keys
/// only, and its actions are recorded under the session's ARN. A bad
/// principal is refused, naming `principal` (a key without one is a console
/// key: `console.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_gives_its_principal_a_role_and_a_tenant() {
    let p = AwsPipeline::start("granted").await;
    let reader = p.credential(Role::Reader, None).await;
    let (st, v) = p.call_as(&reader, "GET", "/v1/subscriptions", None, &[]).await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = p.call_as(&reader, "GET", "/v1/keys", None, &[]).await;
    assert_eq!(st, 403, "a reader manages no keys: {v}");
    // Through the ingest function too: a reader posts nothing.
    let event = json!({"type": "order.created", "id": unique_name("e"), "data": {}}).to_string();
    let (st, v) = p.call_as(&reader, "POST", "/v1/events", Some(event.as_bytes()), &[]).await;
    assert_eq!((st, v["error"]["code"].as_str()), (403, Some("forbidden")), "a reader posts no events: {v}");
    let producer = p.credential(Role::Producer, Some("acme")).await;
    let (st, v) = p.call_as(&producer, "POST", "/v1/events", Some(event.as_bytes()), &[]).await;
    assert_eq!(st, 202, "a producer posts: {v}");
    let other = json!({"type": "order.created", "id": unique_name("e"), "tenant_id": "globex", "data": {}}).to_string();
    let (st, v) = p.call_as(&producer, "POST", "/v1/events", Some(other.as_bytes()), &[]).await;
    assert_eq!((st, v["error"]["field"].as_str()), (403, Some("tenant_id")), "not for another tenant: {v}");
    let (st, v) = p.call_as(&producer, "GET", "/v1/subscriptions", None, &[]).await;
    assert_eq!(st, 403, "a producer reads nothing: {v}");

    let role_name = unique_name("ops");
    let role_arn = format!("arn:aws:iam::123456789012:role/{role_name}");
    let tenant = unique_name("acme");
    let body = json!({"name": role_name, "role": "admin", "tenant_id": tenant, "principal": role_arn});
    let (st, v) = p.post("/v1/keys", &body).await;
    assert_eq!(st, 201, "{v}");
    assert_eq!((v["principal"].as_str(), v.get("secret")), (Some(role_arn.as_str()), None), "{v}");
    let (st, v) = p.post("/v1/keys", &body).await;
    assert_eq!(st, 409, "one grant per principal (and name): {v}");

    let session = format!("arn:aws:sts::123456789012:assumed-role/{role_name}/alice");
    let made = json!({"name": "ci", "role": "producer", "principal": format!("{role_arn}-ci")}).to_string();
    let (st, v) = p.call_as_principal(&session, "POST", "/v1/keys", Some(made.as_bytes()), &[]).await;
    assert_eq!(st, 201, "the role's session acts with the role's grant: {v}");
    assert_eq!(v["tenant_id"].as_str(), Some(tenant.as_str()), "{v}");
    assert_eq!(v["created_by"].as_str(), Some(session.as_str()), "recorded as the session: {v}");
    let (st, v) = p.call_as_principal(&session, "GET", "/v1/keys", None, &[]).await;
    assert_eq!(st, 200, "{v}");
    assert!(v["items"].as_array().unwrap().iter().all(|k| k["tenant_id"] == tenant.as_str()), "{v}");
    let (st, v) = p.call_as_principal(&session, "GET", &format!("/v1/keys/{}", reader.id), None, &[]).await;
    assert_eq!(st, 404, "a global grant is not the tenant's: {v}");

    let (st, v) = p.post("/v1/keys", &json!({"name": "bad", "role": "reader", "principal": "user/x"})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("principal")), "{v}");
}

/// The bootstrap admins are the `ADMIN_PRINCIPALS` setting (the test
/// pipeline's principal among them): admins without any grant stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bootstrap_admins_come_from_the_setting() {
    let p = AwsPipeline::start("bootstrap").await;
    assert!(p.hookline.config.admin_principals.iter().any(|a| a == TEST_PRINCIPAL));
    assert!(p.hookline.config.admin_principals.iter().any(|a| a == hookline_tests::cli_ops::PRINCIPAL));
    let (st, v) = p.get(&format!("/v1/keys?limit=1000&tenant_id={}", unique_name("none"))).await;
    assert_eq!((st, v["items"].as_array().map(Vec::len)), (200, Some(0)), "no grant stored: {v}");
    let (st, v) = p.get("/v1/keys").await;
    assert_eq!(st, 200, "an admin by the setting alone: {v}");
    // Without the setting, the same principal is a stranger.
    let mut config = p.hookline.config.clone();
    config.admin_principals.clear();
    let bare = std::sync::Arc::new(shared::context::Hookline::new(
        p.hookline.stores.clone(),
        config,
        p.hookline.keyring.clone(),
    ));
    let api = Api::behind_gateway(bare, Verification::Inline);
    let (st, v, _) = p.call_through(&api, TEST_PRINCIPAL, "GET", "/v1/keys", None, &[]).await;
    assert_eq!(st, 403, "{v}");
}

/// A revoked grant stops working at once in the container that revoked it
/// and within the cache's TTL (`shared::context::KEY_CACHE_TTL`, 10 s) in
/// every other: another container's API, which read the grant just before,
/// keeps it no longer than that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_grant_stops_working_within_the_cache_ttl() {
    let p = AwsPipeline::start("revoked").await;
    let cred = p.credential(Role::Reader, None).await;
    let principal = cred.principal.clone().unwrap();
    let other = Api::behind_gateway(p.hookline.clone(), Verification::Inline);
    let (st, v, _) = p.call_through(&other, &principal, "GET", "/v1/subscriptions", None, &[]).await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = p.call("DELETE", &format!("/v1/keys/{}", cred.id), None).await;
    assert_eq!(st, 200, "{v}");
    let revoked_at = Instant::now();
    let (st, v) = p.call_as(&cred, "GET", "/v1/subscriptions", None, &[]).await;
    assert_eq!(st, 403, "refused at once where it was revoked: {v}");
    let (st, _, _) = p.call_through(&other, &principal, "GET", "/v1/subscriptions", None, &[]).await;
    assert_eq!(st, 200, "the other container still trusts what it read");
    loop {
        let (st, _, _) = p.call_through(&other, &principal, "GET", "/v1/subscriptions", None, &[]).await;
        if st == 403 {
            break;
        }
        assert_eq!(st, 200);
        assert!(revoked_at.elapsed() < shared::context::KEY_CACHE_TTL + Duration::from_secs(2), "still admitted");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let took = revoked_at.elapsed();
    assert!(took + Duration::from_secs(1) >= shared::context::KEY_CACHE_TTL / 2, "it was cached: {took:?}");
}

/// What authenticating costs, metered: a principal's first request in a
/// container reads its grant with one strongly consistent `GetItem` of
/// ApiKeysTable (1 read request unit: the item is well under 4 KB); its
/// requests within the cache's TTL read nothing; a bootstrap admin never
/// reads a grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_costs_one_cached_grant_read() {
    let meter = hookline_tests::metering::Meter::new();
    let sdk = hookline_tests::emulator::aws_config().await;
    let p = AwsPipeline::start_with_clients(
        "key-cost",
        meter.dynamodb_client(&sdk),
        meter.sqs_client(&sdk),
        &hookline_tests::pipeline::Settings::default(),
    )
    .await;
    let cred = p.credential(Role::Reader, None).await;
    let grant_reads = |since: &hookline_tests::metering::MeterCounts| {
        let c = meter.snapshot().since(since);
        let u = c.dynamodb.get(&("ApiKeysTable".to_string(), "GetItem".to_string())).cloned().unwrap_or_default();
        (u.requests, u.rru)
    };
    let before = meter.snapshot();
    // A route that reads nothing of ApiKeysTable itself.
    let (st, v) = p.call_as(&cred, "GET", "/v1/subscriptions?limit=1", None, &[]).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(grant_reads(&before), (1, 1.0), "the first request reads the grant once");
    let before = meter.snapshot();
    for _ in 0..5 {
        let (st, _) = p.call_as(&cred, "GET", "/v1/subscriptions?limit=1", None, &[]).await;
        assert_eq!(st, 200);
    }
    assert_eq!(grant_reads(&before).0, 0, "cached: no read");
    let before = meter.snapshot();
    p.get("/v1/subscriptions?limit=1").await;
    assert_eq!(grant_reads(&before).0, 0, "a bootstrap admin reads no grant");
}
