//! What only the AWS backend has, so these run on it alone: EventBridge
//! ingest with its DLQ, the stream on-failure queue and the reconciler's
//! draining of it, console redrive of the deliveries DLQ, and the upgrade
//! repairs of items stored before the routing index and the dead letters'
//! listing keys (DynamoDB items; `hookline serve`'s schema migration does
//! the same on SQLite, checked in `tests/tests/serve/cli_ops.rs`). The
//! scenario suite both backends run is `hookline_tests::scenario_suite_tests`.

use std::time::Duration;

use hookline_tests::aws_pipeline::AwsPipeline;
use hookline_tests::pipeline::Pipeline;
use hookline_tests::{eventually, scenarios, Behaviour, Receiver};
use serde_json::{json, Value};

/// Events put on the bus reach subscribers through the template's rule and
/// the ingest queue; AWS's own events (`aws.*` sources) are not taken; a
/// detail that is not a valid envelope goes to the ingest DLQ with the
/// reason, and the rest of its batch is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eventbridge_events_are_ingested_and_bad_ones_go_to_the_ingest_dlq() {
    let p = AwsPipeline::start("bus").await;
    let r = Receiver::start().await;
    p.subscribe(json!({"callback_url": r.url("/bus", Behaviour::Ok), "event_types": ["*"]})).await;
    p.put_bus_event("EC2 Instance State-change Notification", "aws.ec2", r#"{"id": "from-aws", "data": {}}"#).await;
    // A native envelope without a type takes the bus event's detail-type.
    p.put_bus_event("order.created", "shop.orders", r#"{"id": "bus-1", "data": {"order": 7}}"#).await;
    p.put_bus_event("x", "shop", r#"{"eventId": "bad", "eventType": "task.failed"}"#).await;
    p.put_bus_event(
        "task.failed",
        "worker",
        &String::from_utf8(hookline_tests::fixture("contract_task_failed.json")).unwrap(),
    )
    .await;
    let d = p.settled_deliveries("bus-1", 1, 30).await;
    assert_eq!(d[0]["status"], "completed");
    // A contract envelope is stored under its idempotency key.
    let contract = shared::ids::idempotent_event_id(None, "task:tsk_3001:attempt:2:failed");
    p.settled_deliveries(contract.as_str(), 1, 30).await;
    let (_, ev) = p.get("/v1/events/bus-1").await;
    assert_eq!(ev["type"], "order.created");
    assert_eq!(ev["producer"], "shop.orders");
    let rejected = eventually(20, "the bad envelope in the ingest DLQ", || async {
        let m = p.drain("IngestDLQ").await;
        (!m.is_empty()).then_some(m)
    })
    .await;
    assert_eq!(rejected.len(), 1);
    let reason =
        rejected[0]["MessageAttributes"]["hookline-error"]["StringValue"].as_str().unwrap_or_default().to_string();
    assert!(reason.contains("missing required field"), "reason: {reason}");
    let body: serde_json::Value = serde_json::from_str(rejected[0]["Body"].as_str().unwrap()).unwrap();
    assert_eq!(body["detail"]["eventId"], "bad", "the DLQ keeps the bus event as it came: {body}");
    let (st, _) = p.get("/v1/events/bad").await;
    assert_eq!(st, 404, "a rejected envelope is not stored");
    let (st, _) = p.get("/v1/events/from-aws").await;
    assert_eq!(st, 404, "the rule does not take aws.* sources");
}

/// A stream record the router cannot read is retried, then described on the
/// on-failure queue, and the shard goes on with the records after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_stream_record_lands_in_the_on_failure_queue_without_stopping_the_shard() {
    let p = AwsPipeline::start("poison").await;
    let r = Receiver::start().await;
    p.subscribe(json!({"callback_url": r.url("/p", Behaviour::Ok), "event_types": ["*"]})).await;
    p.moto
        .call(
            "dynamodb",
            "DynamoDB_20120810.PutItem",
            json!({"TableName": p.backend.names.events_table, "Item": {"id": {"S": "poison"}, "data": {"S": "{not json"}}}),
        )
        .await;
    let (st, _) = p.post("/v1/events", &json!({"id": "after-poison", "type": "t", "data": 1})).await;
    assert_eq!(st, 202);
    let d = p.settled_deliveries("after-poison", 1, 60).await;
    assert_eq!(d[0]["status"], "completed");
    let url = p.queue_url("StreamFailuresQueue");
    let failures = eventually(30, "the poison record on the on-failure queue", || async {
        // Peek (visibility 0): the message stays for the reconciler.
        let got = p
            .moto
            .call(
                "sqs",
                "AmazonSQS.ReceiveMessage",
                json!({"QueueUrl": url, "MaxNumberOfMessages": 10, "VisibilityTimeout": 0}),
            )
            .await;
        got["Messages"].as_array().filter(|m| !m.is_empty()).cloned()
    })
    .await;
    let body: serde_json::Value = serde_json::from_str(failures[0]["Body"].as_str().unwrap()).unwrap();
    assert_eq!(body["requestContext"]["condition"], "RetryAttemptsExhausted", "Lambda's on-failure record: {body}");
    assert_eq!(body["DDBStreamBatchInfo"]["batchSize"], 1);
    // The reconciler reads the pointer back from the stream, cannot decode
    // the record, and leaves it for an operator (it is not lost or deleted).
    let limits = shared::stage::reconcile::ReconcileLimits::default();
    let report = shared::stage::reconcile::reconcile(&p.hookline, &limits).await;
    assert_eq!((report.batches, report.unresolved, report.events_rerouted), (1, 1, 0), "{report:?}");
}

/// The console path: a dead-lettered saga's job is in the deliveries DLQ;
/// after the subscriber is fixed, "Start DLQ redrive" to the requeue queue
/// creates one new saga, delivered with the same webhook-id; the dead saga
/// stays as it was; a second redrive of the same message, and an API requeue
/// on top, create nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_redrive_of_the_deliveries_dlq_requeues_once() {
    let p = AwsPipeline::start("redrive").await;
    let r = Receiver::start().await;
    p.subscribe(json!({"callback_url": r.url("/down", Behaviour::Ok), "event_types": ["*"],
                       "retry_policy": {"max_attempts": 2, "base_delay_ms": 50, "max_delay_ms": 100}}))
        .await;
    r.set("/down", Behaviour::Always(500));
    p.post("/v1/events", &json!({"id": "rd-1", "type": "t", "data": {}})).await;
    let d = p.settled_deliveries("rd-1", 1, 30).await;
    assert_eq!(d[0]["status"], "dead_lettered");
    let dead = d[0]["saga_id"].as_str().unwrap().to_string();
    r.set("/down", Behaviour::Ok);

    // Keep a copy of the DLQ message to redrive it a second time later.
    let jobs = eventually(20, "the dead job in the deliveries DLQ", || async {
        let m = p.drain("DeliveriesDLQ").await;
        (!m.is_empty()).then_some(m)
    })
    .await;
    assert_eq!(jobs.len(), 1);
    let job_body = jobs[0]["Body"].as_str().unwrap().to_string();
    let requeue_url = p.queue_url("RequeueQueue");
    p.moto.call("sqs", "AmazonSQS.SendMessage", json!({"QueueUrl": requeue_url, "MessageBody": job_body})).await;
    let d = p.settled_deliveries("rd-1", 2, 30).await;
    let new = d.iter().find(|s| s["saga_id"] != dead.as_str()).unwrap().clone();
    assert_eq!(new["status"], "completed");
    assert_eq!(new["origin"]["actor"], "dlq-redrive");
    let old = d.iter().find(|s| s["saga_id"] == dead.as_str()).unwrap();
    assert_eq!(old["status"], "dead_lettered");
    assert_eq!(old["attempts"].as_array().unwrap().len(), 2, "the dead saga is untouched");

    // The same message again, and an API requeue: still one new saga.
    p.moto.call("sqs", "AmazonSQS.SendMessage", json!({"QueueUrl": requeue_url, "MessageBody": job_body})).await;
    let (st, v) = p.post(&format!("/v1/dead-letters/{dead}/requeue"), &json!({"reason": "again"})).await;
    assert_eq!(st, 409, "the dead letter is requeued, no longer open: {v}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, all) = p.get("/v1/events/rd-1/deliveries").await;
    assert_eq!(all["items"].as_array().unwrap().len(), 2);
    let got = r.deliveries("/down");
    assert_eq!(got.len(), 3, "two failed attempts and one redriven delivery");
    assert!(got.iter().all(|x| x.header("webhook-id") == got[0].header("webhook-id")));
    // One audit record for the redrive, however often it was redriven.
    let (_, audit) = p.get("/v1/audit?action=dead_letter.requeued&actor=dlq-redrive").await;
    let mine: Vec<&Value> =
        audit["items"].as_array().unwrap().iter().filter(|a| a["dead_letter_id"] == dead.as_str()).collect();
    assert_eq!(mine.len(), 1, "{audit}");
    assert_eq!(mine[0]["reason"], "redriven from the deliveries dead-letter queue");
}

/// Subscriptions stored before the routing index existed (items of `id`,
/// `version` and `data` only: no `gk`, no index items, as the previous
/// version wrote them) are neither routed to nor listed; the upgrade repair
/// (`POST /v1/subscriptions/reindex`, limit 1 so the cursor is followed)
/// writes their index items, after which they are listed and routed to,
/// with their configuration unchanged; a second run reindexes 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_stored_before_the_index_are_routed_and_listed_after_reindex() {
    let p = AwsPipeline::start("reindex").await;
    let r = Receiver::start().await;
    let table = p.backend.names.subscriptions_table.clone();
    let (control, _) =
        p.subscribe(json!({"callback_url": r.url("/now", Behaviour::Ok), "event_types": ["old.*"]})).await;
    let mut old = Vec::new();
    for (path, types) in [("/old-a", json!(["old.*"])), ("/old-b", json!(["old.thing", "other"]))] {
        let url = r.url(path, Behaviour::Ok);
        let (id, _) = p.subscribe(json!({"callback_url": url, "event_types": types})).await;
        let (_, mut shown) = p.get(&format!("/v1/subscriptions/{id}")).await;
        shown.as_object_mut().unwrap().remove("health");
        // Rewrite it as the version before the index stored it.
        let key = json!({"id": {"S": id}});
        let got = p.moto.call("dynamodb", "DynamoDB_20120810.GetItem", json!({"TableName": table, "Key": key})).await;
        let item = &got["Item"];
        let sub = shared::sealed::open_subscription(item["data"]["S"].as_str().unwrap(), &p.hookline.keyring)
            .unwrap()
            .subscription;
        for e in hookline_aws::item::index_entries(&sub) {
            p.moto
                .call(
                    "dynamodb",
                    "DynamoDB_20120810.DeleteItem",
                    json!({"TableName": table, "Key": {"id": {"S": e.id}}}),
                )
                .await;
        }
        let pre_index = json!({"id": item["id"], "version": item["version"], "data": item["data"]});
        p.moto.call("dynamodb", "DynamoDB_20120810.PutItem", json!({"TableName": table, "Item": pre_index})).await;
        old.push((id, path, shown, item["version"]["N"].as_str().unwrap().parse::<u64>().unwrap()));
    }
    p.hookline.subscription_cache.invalidate().await;
    let listed = |query: &'static str| {
        let p = &p;
        async move {
            let (st, v) = p.get(&format!("/v1/subscriptions{query}")).await;
            assert_eq!(st, 200, "{v}");
            let mut ids: Vec<String> =
                v["items"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap().to_string()).collect();
            ids.sort();
            ids
        }
    };
    assert_eq!(listed("").await, vec![control.clone()], "pre-index subscriptions are not listed");
    assert_eq!(listed("?event_type=old.thing").await, vec![control.clone()]);
    p.post("/v1/events", &json!({"id": "ri-before", "type": "old.thing", "data": {}})).await;
    let d = p.settled_deliveries("ri-before", 1, 30).await;
    assert_eq!(d[0]["subscription_id"], control.as_str(), "routed to the indexed subscription only");

    let (reindexed, examined, requests) = scenarios::reindex_all(&p, "subscriptions", 1).await;
    assert_eq!(reindexed, 2, "both pre-index subscriptions");
    assert!(requests >= 3 && examined >= 3, "paged one item at a time: {examined} in {requests} requests");

    let mut want = vec![control.clone(), old[0].0.clone(), old[1].0.clone()];
    want.sort();
    assert_eq!(listed("").await, want, "listed after the reindex");
    assert_eq!(listed("?event_type=old.thing").await, want);
    for (id, _, shown, version) in &old {
        let (_, mut v) = p.get(&format!("/v1/subscriptions/{id}")).await;
        v.as_object_mut().unwrap().remove("health");
        assert_eq!(&v, shown, "the subscription is as it was");
        let key = json!({"id": {"S": id}});
        let got = p.moto.call("dynamodb", "DynamoDB_20120810.GetItem", json!({"TableName": table, "Key": key})).await;
        let stored = (got["Item"]["version"]["N"].as_str(), got["Item"]["gk"]["S"].as_str());
        assert_eq!(stored, (Some((version + 1).to_string().as_str()), Some("sub")), "written as an update: {got}");
    }
    p.post("/v1/events", &json!({"id": "ri-after", "type": "old.thing", "data": {}})).await;
    let d = p.settled_deliveries("ri-after", 3, 30).await;
    assert!(d.iter().all(|s| s["status"] == "completed"), "{d:?}");
    for (_, path, _, _) in &old {
        assert_eq!(r.deliveries(path).len(), 1, "{path} got the event after the reindex, and only that one");
    }

    assert_eq!(scenarios::reindex_all(&p, "subscriptions", 1).await.0, 0, "a second run reindexes 0");
    let (st, v) = p.post("/v1/subscriptions/reindex", &json!({"cursor": "bm90LWlzc3VlZA"})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("cursor")), "{v}");
}

/// Dead letters stored before their (sharded) listing keys existed (items
/// of `id`, `state`, `created_at` and `data` only, as the version before
/// the listing keys wrote them) are not found by any filter: not by
/// subscription, event type, tenant, state or the unfiltered listing, so a
/// bulk requeue by subscription would miss them. The upgrade repair (`POST /v1/dead-letters/reindex`,
/// limit 1 so the cursor is followed) writes their keys from their own
/// records; then every filter finds them, unchanged, and a bulk requeue by
/// subscription takes them; a second run reindexes 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_stored_before_the_listing_keys_are_found_after_reindex() {
    let p = AwsPipeline::start("dl-reindex").await;
    let r = Receiver::start().await;
    let table = p.backend.names.dead_letters_table.clone();
    let sub = scenarios::failing_subscription(&p, &r, "/old-dead", &["old.dead"]).await;
    scenarios::post_many(&p, 3, "old.dead", Some("acme")).await;
    let by_sub = format!("subscription_id={sub}");
    let before = scenarios::wait_dead_letters(&p, &by_sub, 3, 60).await;
    let dead = dead_letter_ids(&before);
    // Rewrite two as the version before the listing keys stored them.
    for id in &dead[..2] {
        let key = json!({"id": {"S": id}});
        let got = p.moto.call("dynamodb", "DynamoDB_20120810.GetItem", json!({"TableName": table, "Key": key})).await;
        let item = &got["Item"];
        let old =
            json!({"id": item["id"], "state": item["state"], "created_at": item["created_at"], "data": item["data"]});
        p.moto.call("dynamodb", "DynamoDB_20120810.PutItem", json!({"TableName": table, "Item": old})).await;
    }
    let filters = [
        format!("subscription_id={sub}"),
        "event_type=old.dead".to_string(),
        "tenant_id=acme".to_string(),
        "state=open".to_string(),
        String::new(),
    ];
    for f in &filters {
        assert_eq!(found(&p, f, &dead).await, dead[2..].to_vec(), "{f}: the rewritten ones are missed");
    }

    let (reindexed, examined, requests) = scenarios::reindex_all(&p, "dead-letters", 1).await;
    assert_eq!(reindexed, 2, "the two without listing keys");
    assert!(requests >= 3 && examined >= 3, "paged one item at a time: {examined} in {requests} requests");
    for f in &filters {
        assert_eq!(found(&p, f, &dead).await, dead, "{f}: all three after the reindex");
    }
    assert_eq!(scenarios::all_dead_letters(&p, &by_sub, 1000).await, before, "the dead letters are as they were");
    assert_eq!(scenarios::reindex_all(&p, "dead-letters", 1).await.0, 0, "a second run reindexes 0");

    // A bulk requeue by subscription now takes all three.
    r.set("/old-dead", Behaviour::Ok);
    let (st, v) = p
        .post("/v1/dead-letters/requeue", &json!({"filter": {"subscription_id": sub}, "reason": "after the upgrade"}))
        .await;
    assert_eq!(st, 202, "{v}");
    let job = scenarios::finished_job(&p, v["job_id"].as_str().unwrap(), 60).await;
    assert_eq!((job["state"].as_str(), job["done"].as_u64()), (Some("completed"), Some(3)), "{job}");
}

/// The ids of listed dead letters, sorted.
fn dead_letter_ids(items: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = items.iter().map(|d| d["id"].as_str().unwrap().to_string()).collect();
    ids.sort();
    ids
}

/// Which of `among` `GET /v1/dead-letters` with `query` lists, sorted.
async fn found(p: &AwsPipeline, query: &str, among: &[String]) -> Vec<String> {
    let sep = if query.is_empty() { "" } else { "&" };
    let (st, v) = p.get(&format!("/v1/dead-letters?limit=1000{sep}{query}")).await;
    assert_eq!(st, 200, "{v}");
    dead_letter_ids(v["items"].as_array().unwrap()).into_iter().filter(|id| among.contains(id)).collect()
}

/// An hour-long router outage leaves hundreds of given-up batches: a run
/// drains them for its time budget (long polls, ten at a time), not ten
/// per run, so 200 pointers (twenty runs' worth at ten per run) are gone
/// within three runs, each read to its end and re-driven, none left
/// unresolved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_given_up_batches_drain_within_a_few_runs() {
    let p = AwsPipeline::start("drain200").await;
    for i in 0..5 {
        let (st, _) = p.post("/v1/events", &json!({"id": format!("drain-{i}"), "type": "t", "data": i})).await;
        assert_eq!(st, 202);
    }
    // The events stream's INSERT records, as the pointers' ranges.
    let arn = p.backend.names.stream_arns["EventsTable"].clone();
    let desc = p.moto.call("dynamodb", "DynamoDBStreams_20120810.DescribeStream", json!({"StreamArn": arn})).await;
    let shard = desc["StreamDescription"]["Shards"][0]["ShardId"].as_str().unwrap().to_string();
    let it = p
        .moto
        .call(
            "dynamodb",
            "DynamoDBStreams_20120810.GetShardIterator",
            json!({"StreamArn": arn, "ShardId": shard, "ShardIteratorType": "TRIM_HORIZON"}),
        )
        .await;
    let got = p
        .moto
        .call("dynamodb", "DynamoDBStreams_20120810.GetRecords", json!({"ShardIterator": it["ShardIterator"]}))
        .await;
    let seqs: Vec<String> = got["Records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["eventName"] == "INSERT")
        .map(|r| r["dynamodb"]["SequenceNumber"].as_str().unwrap().to_string())
        .collect();
    assert!(seqs.len() >= 5, "{got}");
    let url = p.queue_url("StreamFailuresQueue");
    for chunk in 0..20 {
        let entries: Vec<Value> = (0..10)
            .map(|k| {
                let seq = &seqs[(chunk * 10 + k) % seqs.len()];
                let body = hookline_tests::lambda_driver::on_failure_record(&arn, &shard, seq, "RouterFunction");
                json!({"Id": format!("m{k}"), "MessageBody": body.to_string()})
            })
            .collect();
        p.moto.call("sqs", "AmazonSQS.SendMessageBatch", json!({"QueueUrl": url, "Entries": entries})).await;
    }
    let mut runs = Vec::new();
    for _ in 0..3 {
        let report = hookline_tests::iam::as_function(
            "ReconcilerFunction",
            hookline_aws::lambda::reconcile_scheduled(&p.hookline, &p.hookline.config.reconcile),
        )
        .await
        .expect("the run succeeds");
        let drained = report.batches == 0;
        runs.push(report);
        if drained {
            break;
        }
    }
    let batches: usize = runs.iter().map(|r| r.batches).sum();
    let rerouted: usize = runs.iter().map(|r| r.events_rerouted).sum();
    let left: usize = runs.iter().map(|r| r.unresolved + r.incomplete).sum();
    assert_eq!((batches, rerouted, left), (200, 200, 0), "within 3 runs: {runs:?}");
    let attrs = p
        .moto
        .call(
            "sqs",
            "AmazonSQS.GetQueueAttributes",
            json!({"QueueUrl": url, "AttributeNames": ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]}),
        )
        .await;
    assert_eq!(attrs["Attributes"]["ApproximateNumberOfMessages"], "0", "{attrs}");
    assert_eq!(attrs["Attributes"]["ApproximateNumberOfMessagesNotVisible"], "0", "{attrs}");
}
