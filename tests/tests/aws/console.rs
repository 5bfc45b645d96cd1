//! The console on AWS: the api function serves its files (`GET /ui`, `ANY
//! /ui/{proxy+}`, the routes without the IAM authorizer) from the assets
//! embedded in the binary, and the API again under `/ui/api`, where a
//! bearer credential (a portal token) is the caller and no IAM principal
//! is read; on the signed `/v1` routes a portal token is not a credential.

use hookline_tests::aws_pipeline::AwsPipeline;
use hookline_tests::pipeline::{unique_name, Pipeline};
use serde_json::{json, Value};

/// `GET /ui`, `/ui/`, `/ui/app.js` and `/ui/style.css` through API
/// Gateway events to the api handler answer the embedded files with their
/// content types; an unknown asset is a 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_function_serves_the_console_files() {
    let p = AwsPipeline::start("console-files").await;
    let index = include_str!("../../../ui/index.html");
    for path in ["/ui", "/ui/"] {
        let (st, ctype, body) = p.gateway_console("GET", path, None, None).await;
        assert_eq!(st, 200, "{path}: {body}");
        assert!(ctype.starts_with("text/html"), "{path}: {ctype}");
        assert_eq!(body, index, "{path}: the embedded index.html");
    }
    let (st, ctype, body) = p.gateway_console("GET", "/ui/app.js", None, None).await;
    assert_eq!((st, body.as_str()), (200, include_str!("../../../ui/app.js")));
    assert!(ctype.contains("javascript"), "{ctype}");
    let (st, ctype, _) = p.gateway_console("GET", "/ui/style.css", None, None).await;
    assert!(st == 200 && ctype.starts_with("text/css"), "{st} {ctype}");
    let (st, _, _) = p.gateway_console("GET", "/ui/no-such-file.js", None, None).await;
    assert_eq!(st, 404);
}

/// A portal token works through the api function under `/ui/api` (the
/// route without IAM), as its tenant's portal; without a credential there
/// the answer is `401`; on the IAM routes the token is no credential (the
/// principal API Gateway passes on is, and one without a grant is `403`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_portal_token_works_through_the_console_route_only() {
    let p = AwsPipeline::start("console-portal").await;
    let tenant = unique_name("console");
    let (st, link) = p.post("/v1/portal-links", &json!({"tenant_id": tenant})).await;
    assert_eq!(st, 201, "{link}");
    let token = link["token"].as_str().unwrap().to_string();
    let (st, me) = p.call_console(&token, "GET", "/v1/me", None).await;
    assert_eq!(
        (st, me["role"].as_str(), me["tenant_id"].as_str()),
        (200, Some("portal"), Some(tenant.as_str())),
        "{me}"
    );
    let (st, list) = p.call_console(&token, "GET", "/v1/subscriptions", None).await;
    assert_eq!((st, list["items"].as_array().map(Vec::len)), (200, Some(0)), "{list}");

    let (st, _, body) = p.gateway_console("GET", "/ui/api/v1/subscriptions", None, None).await;
    assert_eq!(st, 401, "no credential on the console route: {body}");
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    assert_eq!(v["error"]["code"], "unauthorized", "{v}");

    let stranger = format!("arn:aws:iam::123456789012:user/{}", unique_name("stranger"));
    let bearer = format!("Bearer {token}");
    let (st, v) = p.call_as_principal(&stranger, "GET", "/v1/me", None, &[("authorization", &bearer)]).await;
    assert_eq!(st, 403, "the IAM routes read the principal, never a bearer token: {v}");
}

/// An operator signs in to the console on AWS with a console key: a secret
/// key an IAM admin creates (`POST /v1/keys` without `principal`). It is
/// the caller under `/ui/api` with its role and tenant (a tenant-bound
/// reader reads its tenant and changes nothing), and no credential at all
/// on the IAM-signed `/v1` routes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_signs_in_to_the_console_with_a_console_key() {
    let p = AwsPipeline::start("console-key").await;
    let tenant = unique_name("ops");
    let (st, key) =
        p.post("/v1/keys", &json!({"name": unique_name("console"), "role": "reader", "tenant_id": tenant})).await;
    assert_eq!((st, key.get("principal")), (201, None), "{key}");
    let secret = key["secret"].as_str().expect("a console key's secret, shown once").to_string();
    let (st, me) = p.call_console(&secret, "GET", "/v1/me", None).await;
    assert_eq!(
        (st, me["role"].as_str(), me["tenant_id"].as_str()),
        (200, Some("reader"), Some(tenant.as_str())),
        "{me}"
    );
    let (st, list) = p.call_console(&secret, "GET", "/v1/subscriptions", None).await;
    assert_eq!(st, 200, "{list}");
    let body = json!({"callback_url": "https://example.com/hook", "event_types": ["x"]}).to_string();
    let (st, v) = p.call_console(&secret, "POST", "/v1/subscriptions", Some(body.as_bytes())).await;
    assert_eq!((st, v["error"]["code"].as_str()), (403, Some("forbidden")), "a reader changes nothing: {v}");
    let (st, v) = p.call_console(&format!("{secret}x"), "GET", "/v1/me", None).await;
    assert_eq!(st, 401, "a wrong secret: {v}");

    let stranger = format!("arn:aws:iam::123456789012:user/{}", unique_name("stranger"));
    let bearer = format!("Bearer {secret}");
    let (st, v) = p.call_as_principal(&stranger, "GET", "/v1/me", None, &[("authorization", &bearer)]).await;
    assert_eq!(st, 403, "the IAM routes never read a console key: {v}");
}
