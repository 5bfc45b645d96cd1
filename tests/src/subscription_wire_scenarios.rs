//! The subscriptions' wire contract, run on both backends
//! (`tests/tests/serve`, `tests/tests/aws`): every bad field of a create or
//! patch body reported at once (nothing written), the listing's query
//! string refusing a parameter it does not take, and the typed view's
//! snake_case spellings, read back through `hookline_wire`'s types as a
//! client reads them.

use hookline_wire::subscriptions::{
    BreakerState, OnDeadLetter, Ordering, PayloadFormat, Subscription, SubscriptionWithSecret,
};
use hookline_wire::{ErrorBody, ErrorCode, Page};
use serde_json::{json, Value};

use crate::pipeline::Pipeline;
use crate::{Behaviour, Receiver};

/// `v` read as the wire type `T`, or a failure showing it.
fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> T {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("not the wire type ({e}): {v}"))
}

/// The (field, code) pairs of an error body, in order.
fn issues(v: &Value) -> Vec<(String, ErrorCode)> {
    typed::<ErrorBody>(v).error.errors.into_iter().map(|i| (i.field, i.code)).collect()
}

/// A create body with three bad fields (a private callback address, a
/// pattern with a space, `max_in_flight` 0) is one 422 naming all three,
/// each with its code, and stores nothing; a patch with three bad fields
/// likewise changes nothing.
pub async fn every_bad_field_of_a_subscription_body_is_reported<P: Pipeline>(s: &P) {
    let body = json!({"callback_url": "https://10.0.0.7/hook", "event_types": ["ok.*", "a b"], "max_in_flight": 0});
    let (st, v) = s.post("/v1/subscriptions", &body).await;
    assert_eq!(st, 422, "{v}");
    assert_eq!(
        issues(&v),
        [
            ("callback_url".to_string(), ErrorCode::InvalidCallbackUrl),
            ("event_types[1]".to_string(), ErrorCode::InvalidField),
            ("max_in_flight".to_string(), ErrorCode::InvalidLimit),
        ],
        "{v}"
    );
    let e = typed::<ErrorBody>(&v).error;
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidCallbackUrl, Some("callback_url")), "the first: {v}");
    let (st, list) = s.get("/v1/subscriptions").await;
    assert_eq!(st, 200, "{list}");
    assert!(typed::<Page<Subscription>>(&list).items.is_empty(), "nothing was created: {list}");

    let r = Receiver::start().await;
    let (id, _) = s.subscribe(json!({"callback_url": r.url("/wire", Behaviour::Ok), "event_types": ["a.*"]})).await;
    let path = format!("/v1/subscriptions/{id}");
    let patch =
        json!({"event_types": null, "headers": {"Host": "x", "X-Ok": "1"}, "rate_limit": 0, "description": "new"});
    let (st, v) = s.call("PATCH", &path, Some(&serde_json::to_vec(&patch).unwrap())).await;
    assert_eq!(st, 422, "{v}");
    assert_eq!(
        issues(&v),
        [
            ("event_types".to_string(), ErrorCode::InvalidField),
            ("headers.Host".to_string(), ErrorCode::InvalidHeader),
            ("rate_limit".to_string(), ErrorCode::InvalidLimit),
        ],
        "{v}"
    );
    let (_, got) = s.get(&path).await;
    let got: Subscription = typed(&got);
    assert_eq!((got.event_types, got.description, got.rate_limit), (vec!["a.*".to_string()], None, None), "unchanged");
}

/// `GET /v1/subscriptions` refuses a parameter it does not take (a typo for
/// `tenant_id` would otherwise list every tenant's) and one given twice,
/// each a 400 naming it; a value of the wrong type is a 400, one out of
/// range a 422. The routes that take none refuse any.
pub async fn the_subscription_listing_refuses_unknown_parameters<P: Pipeline>(s: &P) {
    for (query, status, code, field) in [
        ("tenant=acme", 400, ErrorCode::UnknownParameter, "tenant"),
        ("limit=1&limit=2", 400, ErrorCode::UnknownParameter, "limit"),
        ("tenant_id=acme&evnt_type=a", 400, ErrorCode::UnknownParameter, "evnt_type"),
        ("limit=ten", 400, ErrorCode::InvalidType, "limit"),
        ("limit=0", 422, ErrorCode::InvalidField, "limit"),
    ] {
        let (st, v) = s.get(&format!("/v1/subscriptions?{query}")).await;
        assert_eq!(st, status, "{query}: {v}");
        let e = typed::<ErrorBody>(&v).error;
        assert_eq!((e.code, e.field.as_deref()), (code, Some(field)), "{query}: {v}");
    }
    let (st, v) = s.get("/v1/subscriptions?tenant_id=acme&limit=5").await;
    assert_eq!(st, 200, "{v}");
    typed::<Page<Subscription>>(&v);
    // The routes that take no parameters refuse one too: a create with one
    // stores nothing.
    let r = Receiver::start().await;
    let body = json!({"callback_url": r.url("/q", Behaviour::Ok), "event_types": ["q.*"]});
    let (st, v) = s.post("/v1/subscriptions?dry_run=true", &body).await;
    assert_eq!((st, typed::<ErrorBody>(&v).error.field.as_deref()), (400, Some("dry_run")), "{v}");
    let (_, list) = s.get("/v1/subscriptions").await;
    assert!(typed::<Page<Subscription>>(&list).items.is_empty(), "nothing was created: {list}");
    let (st, v) = s.post("/v1/subscriptions", &body).await;
    assert_eq!(st, 201, "{v}");
    let id = typed::<SubscriptionWithSecret>(&v).subscription.id;
    for (method, path) in
        [("GET", format!("/v1/subscriptions/{id}?verbose=1")), ("POST", format!("/v1/subscriptions/{id}/verify?now=1"))]
    {
        let body: Option<&[u8]> = (method == "POST").then_some(b"{}");
        let (st, v) = s.call(method, &path, body).await;
        let e = typed::<ErrorBody>(&v).error;
        assert_eq!((st, e.code), (400, ErrorCode::UnknownParameter), "{path}: {v}");
    }
}

/// The view spells every enum one way, snake_case (`contract_webhook`,
/// `partition`, `block`, `closed`), whether the body used that spelling or
/// the old `contract-webhook`; every answer reads as its wire type (the
/// secret only in create's and rotate's).
pub async fn the_subscription_view_is_typed_and_snake_case<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    for (i, given) in ["contract_webhook", "contract-webhook"].into_iter().enumerate() {
        let body = json!({"callback_url": r.url(&format!("/snake{i}"), Behaviour::Ok), "event_types": ["task.*"],
                          "payload_format": given, "data_fields": ["taskId"], "ordering": "partition",
                          "on_dead_letter": "block"});
        let (st, v) = s.post("/v1/subscriptions", &body).await;
        assert_eq!(st, 201, "{v}");
        assert_eq!(v["payload_format"], "contract_webhook", "{given}: {v}");
        let created: SubscriptionWithSecret = typed(&v);
        assert!(created.secret.starts_with("whsec_"), "{v}");
        let (st, v) = s.get(&format!("/v1/subscriptions/{}", created.subscription.id)).await;
        assert_eq!(st, 200, "{v}");
        assert!(v.get("secret").is_none() && !v.to_string().contains(&created.secret), "no secret after creation: {v}");
        assert_eq!(
            (&v["payload_format"], &v["ordering"], &v["on_dead_letter"], &v["health"]["breaker"]),
            (&json!("contract_webhook"), &json!("partition"), &json!("block"), &json!("closed")),
            "{v}"
        );
        let shown: Subscription = typed(&v);
        assert_eq!(
            (shown.payload_format, shown.ordering, shown.on_dead_letter, shown.health.breaker),
            (PayloadFormat::ContractWebhook, Ordering::Partition, OnDeadLetter::Block, BreakerState::Closed)
        );
        assert_eq!(shown.blocked_lanes, Some(vec![]), "an ordered subscription shows its blocked lanes: {v}");
    }
    let (_, v) = s.get("/v1/subscriptions").await;
    let page: Page<Subscription> = typed(&v);
    assert_eq!(page.items.len(), 2, "{v}");
    assert!(page.items.iter().all(|s| s.payload_format == PayloadFormat::ContractWebhook && s.blocked_lanes.is_none()));
    let id = &page.items[0].id;
    let (st, v) = s.post(&format!("/v1/subscriptions/{id}/rotate-secret"), &json!({})).await;
    assert_eq!(st, 200, "{v}");
    assert!(typed::<SubscriptionWithSecret>(&v).secret.starts_with("whsec_"), "{v}");
    let (st, v) = s
        .call(
            "PATCH",
            &format!("/v1/subscriptions/{id}"),
            Some(br#"{"payload_format": "hookline", "data_fields": null}"#),
        )
        .await;
    assert_eq!((st, &v["payload_format"]), (200, &json!("hookline")), "{v}");
    assert_eq!(typed::<Subscription>(&v).data_fields, None);
    let (st, v) = s.call("PATCH", &format!("/v1/subscriptions/{id}"), Some(br#"{"payload_format": "Hookline"}"#)).await;
    assert_eq!((st, typed::<ErrorBody>(&v).error.code), (400, ErrorCode::InvalidType), "one spelling: {v}");
}

/// Every scenario here, listed once: each backend's test binary runs them
/// all (`hookline_tests::subscription_wire_scenario_tests!(aws)`, `(serve)`).
#[macro_export]
macro_rules! subscription_wire_scenario_tests {
    ($backend:ident) => {
        $crate::scenario_tests!($backend, subscription_wire_scenarios;
            every_bad_field_of_a_subscription_body_is_reported,
            the_subscription_listing_refuses_unknown_parameters,
            the_subscription_view_is_typed_and_snake_case,
        );
    };
}
