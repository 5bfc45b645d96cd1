//! Input checks only the AWS backend has: EventBridge ingest, whose
//! refusals (bad ids, bad partition keys) go to the ingest DLQ with a
//! `hookline-error` reason. The input scenarios both backends run are in
//! `hookline_tests::input_scenario_tests`.

use std::time::Duration;

use hookline_tests::aws_pipeline::AwsPipeline;
use hookline_tests::input_scenarios::{assert_no_forged_line, FORGED};
use hookline_tests::pipeline::Pipeline;
use hookline_tests::{eventually, Behaviour, Receiver};
use serde_json::json;
use shared::envelope::{MAX_ID_BYTES, MAX_PARTITION_KEY_BYTES};
use shared::ids::{idempotent_event_id, stored_event_id};

/// EventBridge ingest applies the same rules: an id over the limit (and one
/// over DynamoDB's key limit) and a trace id that is not a header value go to
/// the ingest DLQ with a `hookline-error` reason naming the field (escaped,
/// never a store error retried forever); the same id from two tenants is two
/// events, each delivered to its tenant; a repeat by one tenant is a duplicate.
/// So is a contract envelope with the same tenant and `idempotencyKey` as
/// one before it, even under another `eventId`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eventbridge_ingest_refuses_bad_ids_to_the_dlq_and_dedupes_per_tenant() {
    let p = AwsPipeline::start("bus_input").await;
    let r = Receiver::start().await;
    p.subscribe(json!({"callback_url": r.url("/acme", Behaviour::Ok), "event_types": ["*"], "tenant_id": "acme"}))
        .await;
    p.subscribe(json!({"callback_url": r.url("/globex", Behaviour::Ok), "event_types": ["*"], "tenant_id": "globex"}))
        .await;
    let over = "x".repeat(MAX_ID_BYTES + 1);
    let huge = "h".repeat(3000);
    let put = |detail: serde_json::Value| {
        let p = &p;
        async move { p.put_bus_event("order.created", "shop", &detail.to_string()).await }
    };
    put(json!({"id": over, "data": {}})).await;
    put(json!({"id": huge, "data": {}})).await;
    put(json!({"id": "bus-trace", "trace_id": format!("req\n{FORGED} level=ERROR"), "data": {}})).await;
    let acme = json!({"id": "bus-t", "tenant_id": "acme", "data": {"who": "acme"}});
    put(acme.clone()).await;
    put(json!({"id": "bus-t", "tenant_id": "globex", "data": {"who": "globex"}})).await;
    let contract = |event_id: &str, tenant: &str| {
        json!({"eventId": event_id, "eventType": "task.failed", "version": 1, "occurredAt": "2026-02-19T10:10:00Z",
               "traceId": "req_1", "producer": "worker", "idempotencyKey": "task:1:failed", "tenantId": tenant,
               "payload": {"who": tenant, "sentAs": event_id}})
    };
    put(contract("bus-c1", "acme")).await;
    put(contract("bus-c1", "globex")).await;

    for id in [
        stored_event_id(Some("acme"), "bus-t"),
        stored_event_id(Some("globex"), "bus-t"),
        idempotent_event_id(Some("acme"), "task:1:failed"),
        idempotent_event_id(Some("globex"), "task:1:failed"),
    ] {
        assert_eq!(p.settled_deliveries(id.as_str(), 1, 30).await[0]["status"], "completed");
    }
    put(acme).await;
    put(contract("bus-c2", "acme")).await;

    let rejected = std::sync::Mutex::new(Vec::new());
    eventually(30, "three refusals in the ingest DLQ", || async {
        let got = p.drain("IngestDLQ").await;
        let mut all = rejected.lock().unwrap();
        all.extend(got);
        (all.len() >= 3).then_some(())
    })
    .await;
    let rejected = rejected.into_inner().unwrap();
    let mut reasons: Vec<String> = rejected
        .iter()
        .map(|m| m["MessageAttributes"]["hookline-error"]["StringValue"].as_str().unwrap_or_default().to_string())
        .collect();
    reasons.sort();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    for r in &reasons {
        assert!(!r.chars().any(char::is_control), "the reason carries a raw control character: {r:?}");
    }
    assert!(reasons[0].starts_with("invalid field `id`: is 257 bytes long"), "{reasons:?}");
    assert!(reasons[1].starts_with("invalid field `id`: is 3000 bytes long"), "{reasons:?}");
    assert!(reasons[2].starts_with("invalid field `trace_id`"), "{reasons:?}");
    assert_eq!(p.get("/v1/events/bus-trace").await.0, 404);

    tokio::time::sleep(Duration::from_secs(2)).await;
    // The repeats by acme are duplicates: no second event, no second saga.
    // Counted by event (`webhook-id`): at least once, a job may arrive twice.
    assert_eq!(
        (r.webhook_ids("/acme").len(), r.webhook_ids("/globex").len()),
        (2, 2),
        "two events each, the repeats none more"
    );
    for id in [stored_event_id(Some("acme"), "bus-t"), idempotent_event_id(Some("acme"), "task:1:failed")] {
        let (_, d) = p.get(&format!("/v1/events/{id}/deliveries")).await;
        assert_eq!(d["items"].as_array().map(Vec::len), Some(1), "the repeat of {id} started no saga: {d}");
    }
    let (acme_got, globex_got) = (r.deliveries("/acme"), r.deliveries("/globex"));
    for (got, tenant) in [(&acme_got, "acme"), (&globex_got, "globex")] {
        let bodies: Vec<serde_json::Value> = got.iter().map(|d| d.json()).collect();
        assert!(bodies.iter().any(|b| b["data"]["who"] == tenant), "{bodies:?}");
        assert!(bodies.iter().any(|b| b["payload"] == json!({"who": tenant, "sentAs": "bus-c1"})), "{bodies:?}");
    }
    assert_no_forged_line(&p).await;
}

/// EventBridge ingest applies the partition key rule too: a key over the
/// limit (and one over DynamoDB's key limit, which without the rule failed
/// every write and reached the DLQ with no reason) or with a control
/// character goes to the ingest DLQ with a `hookline-error` reason naming the
/// producer's field, in each format, and does not hold up the rest of its
/// batch: a key at the limit is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eventbridge_ingest_refuses_bad_partition_keys_to_the_dlq() {
    let p = AwsPipeline::start("bus_partition").await;
    let over = "k".repeat(MAX_PARTITION_KEY_BYTES + 1);
    let huge = "h".repeat(3000);
    let put = |detail: serde_json::Value| {
        let p = &p;
        async move { p.put_bus_event("order.created", "shop", &detail.to_string()).await }
    };
    put(json!({"id": "bus-pk-over", "partition_key": over, "data": {}})).await;
    put(json!({"id": "bus-pk-huge", "partition_key": huge, "data": {}})).await;
    put(json!({"eventId": "bus-pk-d", "schemaVersion": 1, "eventType": "RecordUpdated",
               "occurredAt": "2026-01-10T12:34:56.789Z", "tenantId": "acme",
               "producer": {"service": "core", "instanceId": "p1"}, "correlationId": "c1",
               "sequence": {"partitionKey": format!("k\n{FORGED} level=ERROR"), "recordVersion": "1"}, "payload": {}}))
    .await;
    put(json!({"id": "bus-pk-c", "entity_type": "Order", "entity_id": huge, "change_type": "created",
               "published_at": "2026-01-10T12:34:56Z",
               "payload": {"actor": "u:1", "after": {}, "diff": {}, "recorded_at": "2026-01-10T12:34:56Z"}}))
    .await;
    let at_limit = "k".repeat(MAX_PARTITION_KEY_BYTES);
    put(json!({"id": "bus-pk-ok", "partition_key": at_limit, "data": {}})).await;

    let rejected = std::sync::Mutex::new(Vec::new());
    eventually(30, "four refusals in the ingest DLQ", || async {
        let got = p.drain("IngestDLQ").await;
        let mut all = rejected.lock().unwrap();
        all.extend(got);
        (all.len() >= 4).then_some(())
    })
    .await;
    let mut reasons: Vec<String> = rejected
        .into_inner()
        .unwrap()
        .iter()
        .map(|m| m["MessageAttributes"]["hookline-error"]["StringValue"].as_str().unwrap_or_default().to_string())
        .collect();
    reasons.sort();
    assert_eq!(reasons.len(), 4, "{reasons:?}");
    for r in &reasons {
        assert!(!r.chars().any(char::is_control), "the reason carries a raw control character: {r:?}");
    }
    let max = format!("the maximum is {MAX_PARTITION_KEY_BYTES} bytes");
    assert!(
        reasons[0].starts_with("invalid field `entity_id`: is 3000 bytes long") && reasons[0].contains(&max),
        "{reasons:?}"
    );
    assert!(reasons[1].starts_with("invalid field `partition_key`: is 257 bytes long"), "{reasons:?}");
    assert!(reasons[2].starts_with("invalid field `partition_key`: is 3000 bytes long"), "{reasons:?}");
    assert!(reasons[3].starts_with("invalid field `sequence.partitionKey`: contains `\\u{a}`"), "{reasons:?}");

    let (st, v) = eventually(30, "the event at the limit stored", || async {
        let got = p.get("/v1/events/bus-pk-ok").await;
        (got.0 == 200).then_some(got)
    })
    .await;
    assert_eq!((st, v["partition_key"].as_str()), (200, Some(at_limit.as_str())), "{v}");
    for id in ["bus-pk-over", "bus-pk-huge", "bus-pk-c"] {
        assert_eq!(p.get(&format!("/v1/events/{id}")).await.0, 404, "{id} was not stored");
    }
    assert_no_forged_line(&p).await;
}
