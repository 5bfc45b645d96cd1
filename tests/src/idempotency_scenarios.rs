//! `Idempotency-Key` on the creating routes, on both backends
//! (`tests/tests/serve`, `tests/tests/aws`): a retry with the same key and
//! request answers the first response (`Idempotency-Replayed: true`) and
//! creates nothing more; another request under the key is a 409 naming
//! the header; another tenant's credential has its own keys; a bad key is
//! a 422 naming the header; a refused request frees its key.

use serde_json::{json, Value};
use shared::access::Role;

use crate::pipeline::{unique_name, Pipeline};
use crate::{Behaviour, Receiver};

const HEADER: &str = "Idempotency-Key";

/// POST `body` (bytes as given) with `Idempotency-Key: key`, as the
/// pipeline's own credential: status, body, response headers.
async fn post_keyed(
    p: &impl Pipeline,
    path: &str,
    body: &[u8],
    key: &str,
) -> (u16, Value, std::collections::HashMap<String, String>) {
    p.call_full("POST", path, Some(body), &[(HEADER, key)]).await
}

/// Subscriptions whose callback is `url`.
async fn subscriptions_to(p: &impl Pipeline, url: &str) -> Vec<Value> {
    let (st, v) = p.get("/v1/subscriptions?limit=1000").await;
    assert_eq!(st, 200, "{v}");
    v["items"].as_array().unwrap().iter().filter(|s| s["callback_url"] == url).cloned().collect()
}

/// A retried `POST /v1/subscriptions` creates one subscription and answers
/// the same id and secret (the retry's JSON spelled differently is the
/// same request); another body under the key is a 409 naming the header
/// and writes nothing; the same key from another tenant's credential
/// creates that tenant's own; a bad key is a 422 naming the header; a
/// refused request does not use up its key.
pub async fn a_retried_subscription_create_answers_the_first_response(p: &mut impl Pipeline) {
    let r = Receiver::start().await;
    let url = r.url("/idem-sub", Behaviour::Ok);
    let key = unique_name("create-sub");
    let body = json!({"callback_url": url, "event_types": ["idem.*"], "description": "first"});
    let (st, first, headers) = post_keyed(p, "/v1/subscriptions", body.to_string().as_bytes(), &key).await;
    assert_eq!(st, 201, "{first}");
    assert_eq!(headers.get("idempotency-replayed"), None, "{headers:?}");
    let secret = first["secret"].as_str().expect("the create answers the secret").to_string();

    let respelled = format!(
        "{{\n  \"description\": \"first\",\n  \"event_types\": [\"idem.*\"],\n  \"callback_url\": {}\n}}",
        json!(url)
    );
    let (st, again, headers) = post_keyed(p, "/v1/subscriptions", respelled.as_bytes(), &key).await;
    assert_eq!((st, &again), (201, &first), "the first answer again, secret included");
    assert_eq!(again["secret"].as_str(), Some(secret.as_str()));
    assert_eq!(headers.get("idempotency-replayed").map(String::as_str), Some("true"), "{headers:?}");
    assert_eq!(subscriptions_to(p, &url).await.len(), 1, "one subscription");

    let other = json!({"callback_url": url, "event_types": ["idem.*"], "description": "second"});
    let (st, v, _) = post_keyed(p, "/v1/subscriptions", other.to_string().as_bytes(), &key).await;
    assert_eq!(
        (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
        (409, Some("idempotency_conflict"), Some(HEADER)),
        "{v}"
    );
    assert_eq!(subscriptions_to(p, &url).await.len(), 1, "nothing written");

    let tenant = unique_name("idem-t");
    let cred = p.credential(Role::Admin, Some(&tenant)).await;
    let (st, theirs) =
        p.call_as(&cred, "POST", "/v1/subscriptions", Some(body.to_string().as_bytes()), &[(HEADER, &key)]).await;
    assert_eq!(st, 201, "another tenant's key is its own: {theirs}");
    assert_ne!(theirs["id"], first["id"], "{theirs}");
    assert_ne!(theirs["secret"], first["secret"]);
    assert_eq!(theirs["tenant_id"].as_str(), Some(tenant.as_str()), "{theirs}");
    let (st, theirs_again) =
        p.call_as(&cred, "POST", "/v1/subscriptions", Some(body.to_string().as_bytes()), &[(HEADER, &key)]).await;
    assert_eq!((st, &theirs_again), (201, &theirs), "and is replayed to it");
    assert_eq!(subscriptions_to(p, &url).await.len(), 2, "one per tenant");

    let bad_url = r.url("/idem-bad-key", Behaviour::Ok);
    let long = "k".repeat(256);
    for bad in ["eve\tmallory", "zoë", long.as_str()] {
        let b = json!({"callback_url": bad_url, "event_types": ["idem.*"]});
        let (st, v, _) = post_keyed(p, "/v1/subscriptions", b.to_string().as_bytes(), bad).await;
        assert_eq!(
            (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
            (422, Some("invalid_header"), Some(HEADER)),
            "{bad:?}: {v}"
        );
    }
    assert!(subscriptions_to(p, &bad_url).await.is_empty(), "a bad key writes nothing");

    let fixed_url = r.url("/idem-fixed", Behaviour::Ok);
    let key = unique_name("refused");
    let refused = json!({"callback_url": fixed_url, "event_types": []});
    let (st, v, _) = post_keyed(p, "/v1/subscriptions", refused.to_string().as_bytes(), &key).await;
    assert_eq!(st, 422, "{v}");
    let fixed = json!({"callback_url": fixed_url, "event_types": ["idem.*"]});
    let (st, v, headers) = post_keyed(p, "/v1/subscriptions", fixed.to_string().as_bytes(), &key).await;
    assert_eq!(st, 201, "a refused request is not kept: the fixed one runs under its key: {v}");
    assert_eq!(headers.get("idempotency-replayed"), None);
}

/// A retried bulk job (`POST /v1/dead-letters/requeue`), replay job
/// (`POST /v1/replays`) and event replay (`POST /v1/events/{event}/replay`)
/// answer their first job or sagas, and queue nothing more: the event is
/// delivered once more, not twice. The same key on another route is a 409.
pub async fn retried_jobs_and_replays_answer_the_first_response(p: &mut impl Pipeline) {
    let r = Receiver::start().await;
    let (sub, _) =
        p.subscribe(json!({"callback_url": r.url("/idem-jobs", Behaviour::Ok), "event_types": ["idemjob.*"]})).await;
    let (st, posted) = p.post("/v1/events", &json!({"type": "idemjob.created", "data": {"n": 1}})).await;
    assert_eq!(st, 202, "{posted}");
    let event = posted["event_id"].as_str().unwrap().to_string();
    p.settled_deliveries(&event, 1, 60).await;

    let key = unique_name("event-replay");
    let path = format!("/v1/events/{event}/replay");
    let body = json!({"reason": "idempotency scenario"}).to_string();
    let (st, first, _) = post_keyed(p, &path, body.as_bytes(), &key).await;
    assert_eq!(st, 202, "{first}");
    assert_eq!(first["sagas"].as_array().map(Vec::len), Some(1), "{first}");
    let (st, again, headers) = post_keyed(p, &path, body.as_bytes(), &key).await;
    assert_eq!((st, &again), (202, &first), "same replay key and sagas");
    assert_eq!(headers.get("idempotency-replayed").map(String::as_str), Some("true"), "{headers:?}");

    for (route, body) in [
        ("/v1/replays", json!({"event_id": event, "subscription_id": sub, "reason": "idempotency scenario"})),
        ("/v1/dead-letters/requeue", json!({"filter": {"subscription_id": sub}, "reason": "idempotency scenario"})),
    ] {
        let key = unique_name("job");
        let body = body.to_string();
        let (st, first, _) = post_keyed(p, route, body.as_bytes(), &key).await;
        assert_eq!(st, 202, "{route}: {first}");
        let job = first["job_id"].as_str().unwrap_or_else(|| panic!("{route}: {first}")).to_string();
        let (st, again, headers) = post_keyed(p, route, body.as_bytes(), &key).await;
        assert_eq!((st, again["job_id"].as_str()), (202, Some(job.as_str())), "{route}: one job: {again}");
        assert_eq!(again, first);
        assert_eq!(headers.get("idempotency-replayed").map(String::as_str), Some("true"), "{route}");
        let (st, v, _) = post_keyed(p, "/v1/dead-letters/skip", body.as_bytes(), &key).await;
        assert_eq!((st, v["error"]["code"].as_str()), (409, Some("idempotency_conflict")), "another route: {v}");
    }

    // The event replay and the replay job each delivered it once more: 3
    // sagas, and no fourth from a retry.
    let deliveries = p.settled_deliveries(&event, 3, 90).await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let (_, v) = p.get(&format!("/v1/events/{event}/deliveries")).await;
    assert_eq!(v["items"].as_array().map(Vec::len), Some(deliveries.len()), "nothing more: {v}");
}

/// One `POST /v1/keys` through the API in-process, with `key`.
async fn create_key(api: &hookline_api::Api, key: &str, body: &Value) -> hookline_api::Response {
    in_process(api, "POST", "/v1/keys", Some(key), body.to_string().into_bytes()).await
}

/// One call of the API in-process, through its router, as the admin; the
/// answer with the headers these tests read (`retry-after`,
/// `idempotency-replayed`).
async fn in_process(
    api: &hookline_api::Api,
    method: &str,
    uri: &str,
    key: Option<&str>,
    body: Vec<u8>,
) -> hookline_api::Response {
    let mut req = axum::http::Request::builder().method(method).uri(uri).header("authorization", "Bearer admin-secret");
    if let Some(k) = key {
        req = req.header("idempotency-key", k);
    }
    let req = req.body(axum::body::Body::from(body)).expect("a request");
    let res = hookline_api::http::call(&hookline_api::http::router(api.clone()), req).await;
    let status = res.status().as_u16();
    let mut out =
        hookline_api::Response { status, content_type: "application/json", body: Vec::new(), headers: Vec::new() };
    for name in ["retry-after", "idempotency-replayed"] {
        if let Some(v) = res.headers().get(name).and_then(|v| v.to_str().ok()) {
            out = out.with_header(name, v);
        }
    }
    out.body = axum::body::to_bytes(res.into_body(), usize::MAX).await.expect("the body").to_vec();
    out
}

/// The API in-process over a [`crate::stages::Rig`]'s real stores: a key
/// whose first request is still running answers `409
/// idempotency_in_progress` with `Retry-After` and runs nothing (another
/// request under it is `409 idempotency_conflict`); a key whose first
/// request died (its lease over) is taken over and runs; the kept answer,
/// which holds a new secret, is stored sealed, never in clear.
pub async fn a_running_first_request_holds_its_key_until_its_lease_is_over(rig: &crate::stages::Rig) {
    use shared::idempotency::{self as idem, IdempotencyRecord};
    let api = hookline_api::Api::new(
        rig.container(std::time::Duration::ZERO),
        "admin-secret",
        hookline_api::Verification::Inline,
    );
    let store = &rig.stores.idempotency;
    let name = unique_name("idem-key");
    let body = json!({"name": name, "role": "reader"});
    let key = unique_name("running");
    let id = idem::record_id("key:default", None, &key);
    let fingerprint = idem::fingerprint("POST", "/v1/keys", &[], None, body.to_string().as_bytes());
    let now = chrono::Utc::now();
    assert!(store.claim(&IdempotencyRecord::claim(&id, &fingerprint, now), now).await.unwrap(), "a first request runs");

    let res = create_key(&api, &key, &body).await;
    let v = res.body_json();
    assert_eq!(
        (res.status, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
        (409, Some("idempotency_in_progress"), Some(HEADER)),
        "{v}"
    );
    let retry_after = res.header("retry-after").and_then(|s| s.parse::<u64>().ok());
    assert!(matches!(retry_after, Some(s) if (1..=60).contains(&s)), "Retry-After: {retry_after:?}");
    let other = json!({"name": name, "role": "admin"});
    let res = create_key(&api, &key, &other).await;
    assert_eq!((res.status, res.body_json()["error"]["code"].as_str()), (409, Some("idempotency_conflict")));
    let (st, keys) = {
        let r = in_process(&api, "GET", "/v1/keys?limit=1000", None, Vec::new()).await;
        (r.status, r.body_json())
    };
    assert_eq!(st, 200, "{keys}");
    assert!(!keys.to_string().contains(&name), "nothing ran: {keys}");

    // A first request that died a lease ago: the retry takes the key over.
    let key = unique_name("abandoned");
    let id = idem::record_id("key:default", None, &key);
    let then = now - idem::LEASE - chrono::Duration::seconds(1);
    assert!(store.claim(&IdempotencyRecord::claim(&id, &fingerprint, then), then).await.unwrap());
    let res = create_key(&api, &key, &body).await;
    let created = res.body_json();
    assert_eq!((res.status, res.header("idempotency-replayed")), (201, None), "{created}");
    let secret = created["secret"].as_str().expect("a new key's secret").to_string();
    let again = create_key(&api, &key, &body).await;
    assert_eq!(
        (again.status, again.header("idempotency-replayed"), again.body_json()),
        (201, Some("true"), created.clone())
    );

    let record = store.get(&id, chrono::Utc::now()).await.unwrap().expect("the answer is kept");
    let sealed = record.response.expect("answered");
    assert!(shared::keyring::Keyring::is_sealed(&sealed) && !sealed.contains(&secret), "sealed at rest: {sealed}");
    assert_eq!(idem::open_response(&rig.keyring, &id, &sealed).unwrap().status, 201);
}

/// The in-process idempotency cases on one backend's rig (`sqlite` or `aws`).
#[macro_export]
macro_rules! idempotency_rig_tests {
    ($backend:ident) => {
        /// A running first request holds its key; a dead one's is taken over
        /// (`hookline_tests::idempotency_scenarios`).
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_running_first_request_holds_its_key_until_its_lease_is_over() {
            let rig = hookline_tests::isolation_tests!(@rig $backend, "idem-lease");
            hookline_tests::idempotency_scenarios::a_running_first_request_holds_its_key_until_its_lease_is_over(&rig)
                .await;
        }
    };
}

/// The idempotency scenarios on one backend.
#[macro_export]
macro_rules! idempotency_scenario_tests {
    ($backend:ident) => {
        $crate::scenario_tests!($backend, idempotency_scenarios;
            a_retried_subscription_create_answers_the_first_response,
            retried_jobs_and_replays_answer_the_first_response,
        );
    };
}
