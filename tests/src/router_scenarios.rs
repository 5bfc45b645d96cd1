//! The router (`hookline_api::http`), run on both backends
//! (`tests/tests/serve`, `tests/tests/aws`): a wrong method on a known path
//! is a `405` whose `Allow` names exactly the path's methods, an unknown
//! path a `404`; a path parameter is percent-decoded once, so ids holding
//! `/`, `%`, spaces and non-ASCII round-trip; a path that is not valid
//! percent-encoded UTF-8 is a `400 invalid_path` and reaches nothing.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::input_scenarios::enc;
use crate::pipeline::{Credential, Pipeline};
use crate::{Behaviour, Receiver};

/// The methods an `Allow` header names.
fn methods(allow: Option<&String>) -> BTreeSet<String> {
    allow.map(|a| a.split(',').map(|m| m.trim().to_string()).filter(|m| !m.is_empty()).collect()).unwrap_or_default()
}

fn set(methods: &[&str]) -> BTreeSet<String> {
    methods.iter().map(|m| m.to_string()).collect()
}

/// `PUT /v1/events`, `DELETE /v1/dead-letters/{id}`, `PATCH /v1/keys/{id}`,
/// `POST /healthz`: `405 method_not_allowed` with `Allow` naming exactly
/// the path's methods (`HEAD` with `GET`), and nothing written; a known
/// method on an unknown path is a `404 not_found`. Under `/v1` a caller
/// without a valid credential learns nothing of the path (`401`, or `403`
/// for an IAM principal without a grant); outside `/v1` the `405` comes
/// first.
pub async fn a_wrong_method_is_405_with_allow_naming_the_methods<P: Pipeline>(s: &P) {
    let body = json!({"id": "ev-405", "type": "t", "data": {}}).to_string();
    let dead_letter = format!("/v1/dead-letters/{}", enc("dl/1 %é"));
    let cases: [(&str, &str, &[&str]); 6] = [
        ("PUT", "/v1/events", &["GET", "HEAD", "POST"]),
        ("DELETE", "/v1/events", &["GET", "HEAD", "POST"]),
        ("DELETE", &dead_letter, &["GET", "HEAD"]),
        ("PATCH", "/v1/keys/key_x", &["GET", "HEAD", "DELETE"]),
        ("GET", "/v1/subscriptions/reindex", &["POST"]),
        ("POST", "/healthz", &["GET", "HEAD"]),
    ];
    for (method, path, allowed) in cases {
        let (st, v, headers) = s.call_full(method, path, Some(body.as_bytes()), &[]).await;
        assert_eq!((st, v["error"]["code"].as_str()), (405, Some("method_not_allowed")), "{method} {path}: {v}");
        assert_eq!(methods(headers.get("allow")), set(allowed), "{method} {path}: {headers:?}");
    }
    // Nothing was written by the refused PUT/DELETE of /v1/events.
    assert_eq!(s.get("/v1/events/ev-405").await.0, 404);
    // HEAD is answered as GET, without a body.
    let (st, _, _) = s.call_full("HEAD", "/v1/subscriptions", None, &[]).await;
    assert_eq!(st, 200);

    for path in ["/v1/nothing", "/v1/events/e1/nothing", "/nothing"] {
        let (st, v, headers) = s.call_full("GET", path, None, &[]).await;
        assert_eq!((st, v["error"]["code"].as_str()), (404, Some("not_found")), "GET {path}: {v}");
        assert!(!headers.contains_key("allow"), "GET {path}: {headers:?}");
    }

    // A credential the backend does not know: under /v1 the credential is
    // refused before the path is looked at; /healthz is open.
    let stranger = Credential {
        id: "key_none".into(),
        actor: "nobody".into(),
        secret: Some("not-a-key-of-this-hookline".into()),
        principal: Some("arn:aws:iam::123456789012:user/no-grant-router".into()),
    };
    for path in ["/v1/events", "/v1/nothing"] {
        let (st, v) = s.call_as(&stranger, "PUT", path, None, &[]).await;
        assert!(matches!(st, 401 | 403), "PUT {path} without a valid credential: {st} {v}");
    }
    let (st, v) = s.call_as(&stranger, "POST", "/healthz", None, &[]).await;
    assert_eq!((st, v["error"]["code"].as_str()), (405, Some("method_not_allowed")), "{v}");
}

/// An event id holding `/`, `%`, spaces, `+` and non-ASCII is found with
/// the id percent-encoded in `GET /v1/events/{event}` and
/// `.../deliveries`, decoded exactly once (`%252F` is the id `%2F`, not
/// `/`); an encoded `/` never splits a parameter into two segments
/// (`/v1/subscriptions/reindex%2Fx` is a subscription id, not the reindex
/// route).
pub async fn ids_with_slashes_percents_spaces_and_non_ascii_round_trip<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/rt", Behaviour::Ok), "event_types": ["router.*"]})).await;
    let ids = ["rt/a b%c", "rt ü/ñ 100%", "rt+x/%2F", "%2F"];
    for id in ids {
        let (st, v) = s.post("/v1/events", &json!({"id": id, "type": "router.rt", "data": {"id": id}})).await;
        assert_eq!((st, v["event_id"].as_str()), (202, Some(id)), "{v}");
    }
    for id in ids {
        let path = format!("/v1/events/{}", enc(id));
        let (st, v) = s.get(&path).await;
        assert_eq!((st, v["id"].as_str()), (200, Some(id)), "GET {path}: {v}");
        assert_eq!(v["body"]["data"]["id"], id, "{v}");
        let d = s.settled_deliveries(&enc(id), 1, 30).await;
        assert_eq!(d.len(), 1, "{id}: {d:?}");
    }
    let (st, v) = s.get("/v1/events/%252F").await;
    assert_eq!((st, v["id"].as_str()), (200, Some("%2F")), "{v}");
    // `%2F` in the path is inside the parameter: the event `rt/a b%c`'s
    // deliveries, not a route with more segments.
    let (st, v) = s.get(&format!("/v1/events/{}/deliveries", enc("rt/a b%c"))).await;
    assert_eq!(st, 200, "{v}");
    let (st, v): (u16, Value) = s.get("/v1/subscriptions/reindex%2Fx").await;
    assert_eq!((st, v["error"]["code"].as_str()), (404, Some("not_found")), "{v}");
}

/// `%` not followed by two hex digits, or escapes that decode to invalid
/// UTF-8, are `400 invalid_path` on any route, and write nothing.
pub async fn paths_that_are_not_percent_encoded_utf8_are_400<P: Pipeline>(s: &P) {
    for (method, path) in [
        ("GET", "/v1/events/%FF"),
        ("GET", "/v1/events/%C3"),
        ("GET", "/v1/events/100%"),
        ("GET", "/v1/events/%zz/deliveries"),
        ("POST", "/v1/events/a%4/replay"),
        ("DELETE", "/v1/subscriptions/%E9t%E9"),
    ] {
        let (st, v) = s.call(method, path, Some(br#"{"reason": "r"}"#)).await;
        assert_eq!((st, v["error"]["code"].as_str()), (400, Some("invalid_path")), "{method} {path}: {v}");
    }
}

/// The scenarios of this module, for a backend's test binary.
#[macro_export]
macro_rules! router_scenario_tests {
    ($backend:ident) => {
        $crate::scenario_tests!($backend, router_scenarios;
            a_wrong_method_is_405_with_allow_naming_the_methods,
            ids_with_slashes_percents_spaces_and_non_ascii_round_trip,
            paths_that_are_not_percent_encoded_utf8_are_400,
        );
    };
}
