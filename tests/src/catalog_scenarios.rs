//! The event catalog on both backends (`tests/tests/serve`,
//! `tests/tests/aws`; docs/formats.md#event-catalog): a registered type's
//! events are checked against its schema at ingest (`422` naming the JSON
//! path, nothing stored; a batch item by item), a new registration of a
//! version may only add optional properties, a strict catalog refuses
//! unregistered types, and a versioned type (`.v2`) reaches only the
//! subscriptions that ask for its version.

use serde_json::{json, Value};

use crate::pipeline::{unique_name, Pipeline};
use crate::{eventually, Behaviour, Receiver};

/// A name unique to this run, of lower-case letters, digits and `_` (a
/// contract `eventType` segment).
fn tag(prefix: &str) -> String {
    unique_name(prefix).to_ascii_lowercase().replace('-', "_")
}

/// A type name unique to this run (`cat_<n>.<suffix>`).
fn type_name(suffix: &str) -> String {
    format!("{}.{suffix}", tag("cat"))
}

/// An order schema: `amount` (a number ≥ 0) required, `note` optional.
fn order_schema() -> Value {
    json!({"type": "object", "required": ["amount"],
        "properties": {"amount": {"type": "number", "minimum": 0}, "note": {"type": "string"}}})
}

/// Registers `name` version `version`; the status and answer.
async fn register(p: &impl Pipeline, name: &str, version: u32, schema: Value, example: Value) -> (u16, Value) {
    let body = json!({"name": name, "version": version, "schema": schema, "description": "An order was placed.",
        "example": example});
    p.post("/v1/event-types", &body).await
}

/// A registered type's events are checked against its schema: a valid one
/// is stored and delivered; an invalid one is `422` naming the JSON path
/// (`data.amount`; the contract format's `payload.amount`), and nothing is
/// stored; in a batch the invalid item alone is refused. A bad
/// registration names its field (an unsupported keyword, an example that
/// breaks the schema) and writes nothing. The catalog lists the type with
/// its description and schema (portal tokens too), shows its versions, and
/// the registration is audited.
pub async fn a_registered_type_checks_its_events(p: &mut impl Pipeline) {
    let t = type_name("order_created");
    let (st, v) = register(p, &t, 1, json!({"properties": {"amount": {"$ref": "#/x"}}}), json!({})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("schema.properties.amount.$ref")), "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("`$ref` is not supported"), "{v}");
    let (st, v) = register(p, &t, 1, order_schema(), json!({"amount": "12"})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("example.amount")), "{v}");
    let (st, v) = p.get(&format!("/v1/event-types/{t}")).await;
    assert_eq!(st, 404, "nothing was registered: {v}");
    let bound = p.credential(shared::access::Role::Admin, Some("acme")).await;
    let body = json!({"name": t, "version": 1, "schema": order_schema()}).to_string();
    let (st, v) = p.call_as(&bound, "POST", "/v1/event-types", Some(body.as_bytes()), &[]).await;
    assert_eq!((st, v["error"]["code"].as_str()), (403, Some("forbidden")), "the catalog is deployment-wide: {v}");

    let (st, v) = register(p, &t, 1, order_schema(), json!({"amount": 12.5})).await;
    assert_eq!((st, v["event_type"].as_str(), v["version"].as_u64()), (201, Some(t.as_str()), Some(1)), "{v}");

    let r = Receiver::start().await;
    let pattern = format!("{}.*", t.split('.').next().unwrap());
    let (sub, _) =
        p.subscribe(json!({"callback_url": r.url("/orders", Behaviour::Ok), "event_types": [pattern]})).await;
    let (st, ok) = p.post("/v1/events", &json!({"id": unique_name("ok"), "type": t, "data": {"amount": 3}})).await;
    assert_eq!(st, 202, "{ok}");
    let d = p.settled_deliveries(ok["event_id"].as_str().unwrap(), 1, 20).await;
    assert_eq!((d[0]["subscription_id"].as_str(), d[0]["status"].as_str()), (Some(sub.as_str()), Some("completed")));

    let bad_id = unique_name("bad");
    let (st, v) = p.post("/v1/events", &json!({"id": bad_id, "type": t, "data": {"amount": "3"}})).await;
    assert_eq!(
        (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
        (422, Some("invalid_field"), Some("data.amount"))
    );
    assert!(v["error"]["message"].as_str().unwrap().contains("expected number, got string"), "{v}");
    let (st, v) = p.post("/v1/events", &json!({"id": unique_name("bad"), "type": t, "data": {"note": 1}})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("data.amount")), "the first violation is named: {v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("data.note: expected string"), "and the others: {v}");
    let (st, v) = p.get(&format!("/v1/events/{bad_id}")).await;
    assert_eq!(st, 404, "nothing stored: {v}");

    let contract = json!({"eventId": unique_name("c"), "eventType": t, "version": 1,
        "occurredAt": "2026-02-19T10:10:00Z", "traceId": "req_1", "producer": "shop",
        "idempotencyKey": unique_name("k"), "payload": {"amount": -1}});
    let (st, v) = p.post("/v1/events", &contract).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("payload.amount")), "{v}");

    let batch = json!([{"type": t, "data": {"amount": 1}}, {"type": t, "data": {}}]);
    let (st, v) = p.post("/v1/events/batch", &batch).await;
    assert_eq!((st, v["accepted"].as_u64(), v["rejected"].as_u64()), (207, Some(1), Some(1)), "{v}");
    assert_eq!(
        (v["results"][1]["status"].as_u64(), v["results"][1]["error"]["field"].as_str()),
        (Some(422), Some("data.amount"))
    );

    let (st, one) = p.get(&format!("/v1/event-types/{t}")).await;
    assert_eq!((st, one["name"].as_str(), one["versions"].as_array().map(Vec::len)), (200, Some(t.as_str()), Some(1)));
    assert_eq!(one["versions"][0]["example"], json!({"amount": 12.5}), "{one}");
    let (st, list) = p.get("/v1/event-types?limit=1000").await;
    assert_eq!(st, 200, "{list}");
    let item = list["items"].as_array().unwrap().iter().find(|i| i["event_type"] == t.as_str()).cloned();
    let item = item.unwrap_or_else(|| panic!("{t} is listed: {list}"));
    assert_eq!(
        (item["registered"].as_bool(), item["description"].as_str()),
        (Some(true), Some("An order was placed."))
    );
    assert_eq!(item["schema"], order_schema());
    assert!(item["first_seen_at"].is_string(), "seen too: {item}");

    let tenant = unique_name("cat-tenant");
    let (st, link) = p.post("/v1/portal-links", &json!({"tenant_id": tenant, "expires_in_seconds": 600})).await;
    assert_eq!(st, 201, "{link}");
    let (st, mine) = p.call_console(link["token"].as_str().unwrap(), "GET", "/v1/event-types", None).await;
    assert_eq!(st, 200, "{mine}");
    let item = mine["items"].as_array().unwrap().iter().find(|i| i["event_type"] == t.as_str()).cloned();
    let item = item.unwrap_or_else(|| panic!("the catalog is in every tenant's listing: {mine}"));
    assert_eq!((item["registered"].as_bool(), &item["first_seen_at"]), (Some(true), &Value::Null), "{item}");

    let (st, audit) = p.get("/v1/audit?action=event_type.registered").await;
    assert_eq!(st, 200, "{audit}");
    let mine: Vec<&Value> =
        audit["items"].as_array().unwrap().iter().filter(|a| a["details"]["event_type"] == t.as_str()).collect();
    assert_eq!(mine.len(), 1, "one record, for the one write: {audit}");
    assert_eq!(mine[0]["details"]["outcome"], "created");
}

/// Registering a version again: the same body changes nothing (`200`, no
/// audit); an added optional property is compatible (`200`); a property
/// removed, made required or retyped is `422` naming each change on
/// `schema`, and the stored schema stays; a breaking change registers as
/// version 2, the type `<name>.v2`, listed with version 1 under the name.
pub async fn a_new_registration_may_only_add_optional_properties(p: &mut impl Pipeline) {
    let t = type_name("task_succeeded");
    let (st, v) = register(p, &t, 1, order_schema(), json!({"amount": 1})).await;
    assert_eq!(st, 201, "{v}");
    let (st, same) = register(p, &t, 1, order_schema(), json!({"amount": 1})).await;
    assert_eq!((st, &same["updated_at"]), (200, &v["updated_at"]), "idempotent: {same}");
    let mut added = order_schema();
    added["properties"]["currency"] = json!({"type": "string", "enum": ["EUR", "USD"]});
    let (st, v) = register(p, &t, 1, added.clone(), json!({"amount": 1})).await;
    assert_eq!((st, &v["schema"]), (200, &added), "{v}");

    let mut broken = added.clone();
    broken["properties"].as_object_mut().unwrap().remove("note");
    broken["required"] = json!(["amount", "currency"]);
    broken["properties"]["amount"]["type"] = json!("integer");
    let (st, v) = register(p, &t, 1, broken.clone(), json!({"amount": 1, "currency": "EUR"})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("schema")), "{v}");
    let changes: Vec<&str> =
        v["error"]["errors"].as_array().unwrap().iter().filter_map(|e| e["message"].as_str()).collect();
    assert_eq!(
        changes,
        ["type of `amount` changed from number to integer", "property `note` removed", "`currency` became required"],
        "{v}"
    );
    assert!(v["error"]["message"].as_str().unwrap().contains("register the change as version 2"), "{v}");
    let (_, one) = p.get(&format!("/v1/event-types/{t}")).await;
    assert_eq!(one["versions"][0]["schema"], added, "unchanged: {one}");

    let (st, v2) = register(p, &t, 2, broken.clone(), json!({"amount": 1, "currency": "EUR"})).await;
    assert_eq!((st, v2["event_type"].as_str()), (201, Some(format!("{t}.v2").as_str())), "{v2}");
    let (st, one) = p.get(&format!("/v1/event-types/{t}.v2")).await;
    assert_eq!(st, 200, "{one}");
    let versions: Vec<u64> = one["versions"].as_array().unwrap().iter().filter_map(|v| v["version"].as_u64()).collect();
    assert_eq!((one["name"].as_str(), versions), (Some(t.as_str()), vec![1, 2]));
    let (st, v) =
        p.post("/v1/events", &json!({"type": format!("{t}.v2"), "data": {"amount": 1.5, "currency": "EUR"}})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("data.amount")), "v2's schema applies to v2: {v}");
    let (st, v) = p.post("/v1/events", &json!({"type": t, "data": {"amount": 1.5}})).await;
    assert_eq!(st, 202, "v1's to v1: {v}");

    let (_, audit) = p.get("/v1/audit?action=event_type.registered").await;
    let outcomes: Vec<&str> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["details"]["event_type"].as_str().is_some_and(|e| e.starts_with(t.as_str())))
        .filter_map(|a| a["details"]["outcome"].as_str())
        .collect();
    assert_eq!(outcomes.len(), 3, "created, updated, created (v2); the idempotent one wrote nothing: {outcomes:?}");
}

/// With `STRICT_CATALOG`, an event of a type not in the catalog is `422`
/// on its type field and not stored; a registered type is accepted.
pub async fn a_strict_catalog_refuses_unregistered_types(p: &mut impl Pipeline) {
    let t = type_name("unknown");
    let id = unique_name("strict");
    let (st, v) = p.post("/v1/events", &json!({"id": id, "type": t, "data": {}})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("type")), "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("not in the event catalog"), "{v}");
    let (st, _) = p.get(&format!("/v1/events/{id}")).await;
    assert_eq!(st, 404, "nothing stored");
    let (st, v) = register(p, &t, 1, json!({"type": "object"}), json!({})).await;
    assert_eq!(st, 201, "{v}");
    let (st, v) = p.post("/v1/events", &json!({"id": id, "type": t, "data": {}})).await;
    assert_eq!(st, 202, "registered now: {v}");
}

/// `task.*` does not receive `task.succeeded.v2`: a wildcard asks for a
/// version (`task.*.v2`, `*.v2`) or the subscription names the exact
/// type; unversioned types route as before; a pattern asking for version
/// 1 is refused (version 1 is the bare type).
pub async fn versioned_types_reach_only_subscriptions_that_ask_for_them(p: &mut impl Pipeline) {
    let prefix = tag("task");
    let (v1, v2) = (format!("{prefix}.succeeded"), format!("{prefix}.succeeded.v2"));
    let r = Receiver::start().await;
    let mut subs = Vec::new();
    for (path, pattern) in [("/bare", format!("{prefix}.*")), ("/v2", format!("{prefix}.*.v2")), ("/exact", v2.clone())]
    {
        let (id, _) = p.subscribe(json!({"callback_url": r.url(path, Behaviour::Ok), "event_types": [pattern]})).await;
        subs.push((path, id));
    }
    let (st, v) = p
        .post(
            "/v1/subscriptions",
            &json!({"callback_url": r.url("/x", Behaviour::Ok),
        "event_types": [format!("{prefix}.*.v1")]}),
        )
        .await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("event_types[0]")), "{v}");

    let (st, a) = p.post("/v1/events", &json!({"type": v1, "data": {}})).await;
    assert_eq!(st, 202, "{a}");
    let (st, b) = p.post("/v1/events", &json!({"type": v2, "data": {}})).await;
    assert_eq!(st, 202, "{b}");
    let to = |d: Vec<Value>| {
        let mut s: Vec<String> = d.iter().filter_map(|x| x["subscription_id"].as_str().map(str::to_string)).collect();
        s.sort();
        s
    };
    let got_v1 = to(p.settled_deliveries(a["event_id"].as_str().unwrap(), 1, 20).await);
    let got_v2 = to(p.settled_deliveries(b["event_id"].as_str().unwrap(), 2, 20).await);
    assert_eq!(got_v1, [subs[0].1.clone()], "the bare wildcard takes the unversioned type only");
    let mut want = vec![subs[1].1.clone(), subs[2].1.clone()];
    want.sort();
    assert_eq!(got_v2, want, "`.*.v2` and the exact type take v2");
    eventually(10, "the deliveries arrive", || async {
        // Events, not requests: at least once may repeat one.
        (r.webhook_ids("/bare").len() == 1 && r.webhook_ids("/v2").len() == 1 && r.webhook_ids("/exact").len() == 1)
            .then_some(())
    })
    .await;
    assert_eq!(r.deliveries("/bare")[0].json()["type"], v1.as_str());
    assert_eq!(r.deliveries("/v2")[0].json()["type"], v2.as_str());
}

/// The catalog scenarios on one backend.
#[macro_export]
macro_rules! catalog_scenario_tests {
    ($backend:ident) => {
        $crate::scenario_tests!($backend, catalog_scenarios;
            a_registered_type_checks_its_events,
            a_new_registration_may_only_add_optional_properties,
            a_strict_catalog_refuses_unregistered_types; $crate::pipeline::Settings::default().strict_catalog(),
            versioned_types_reach_only_subscriptions_that_ask_for_them,
        );
    };
}
