//! The stage scenarios (`hookline_tests::stages`) on the AWS backend
//! (DynamoDB and SQS in the emulator, under the strict checker), plus what
//! only the Lambda side has: the stream handler's partial-batch answer, and
//! the router's concurrency cap, measured on the SDK clients.

use std::time::Duration;

use hookline_aws::item::{self, Attr};
use hookline_aws::lambda;
use hookline_tests::stages::{self, Rig};
use serde_json::{json, Value};

macro_rules! case {
    ($name:ident) => {
        case!(stages::$name);
    };
    ($module:ident :: $name:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            hookline_tests::$module::$name(&Rig::aws(stringify!($name)).await).await;
        }
    };
}

hookline_tests::for_each_stage_scenario!(case);

hookline_tests::for_each_destination_stage_scenario!(case);

hookline_tests::isolation_tests!(aws);

hookline_tests::idempotency_rig_tests!(aws);

/// A router batch of 100 events × 10 subscriptions creates 1,000 sagas
/// with at most `MAX_STORE_IN_FLIGHT` DynamoDB requests in flight (a Lambda
/// container has 1,024 file descriptors), counted by the strict checker on
/// the SDK client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_batch_of_1000_sagas_keeps_the_store_cap() {
    let rig = Rig::aws("cap").await;
    let h = rig.container(Duration::from_secs(60));
    for i in 0..10 {
        rig.stores
            .subscriptions
            .create(&stages::subscription(&format!("http://127.0.0.1:9/s{i}"), true))
            .await
            .unwrap();
    }
    let events: Vec<_> =
        (0..100).map(|i| hookline_tests::conformance::event(&format!("cap-{i}"), "task.created")).collect();
    // Fill the cache first, so the requests counted are the saga writes.
    let keys = shared::routing::route_keys(&events[0]);
    let ids: Vec<_> = h.subscription_cache.routes(rig.stores.subscriptions.as_ref(), &keys).await.unwrap().concat();
    assert_eq!(ids.len(), 10);
    h.subscription_cache.get_many(rig.stores.subscriptions.as_ref(), &ids).await.unwrap();
    let strict = rig.strict().unwrap();
    strict.reset_max_in_flight();
    let created = shared::stage::route::route(&h, &events).await.unwrap();
    assert_eq!(created, 1000);
    let max = strict.max_in_flight();
    assert!(
        max <= shared::bounds::MAX_STORE_IN_FLIGHT,
        "{max} requests in flight, cap {}",
        shared::bounds::MAX_STORE_IN_FLIGHT
    );
    assert!(max > 1, "the writes still run concurrently ({max})");
}

/// A stream record in DynamoDB JSON, as Lambda hands it over.
fn record(seq: u64, image: Value) -> Value {
    json!({"eventID": format!("e{seq}"), "eventName": "INSERT", "eventVersion": "1.1", "eventSource": "aws:dynamodb",
           "awsRegion": "us-east-1", "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/s",
           "dynamodb": {"ApproximateCreationDateTime": 1.0, "Keys": {"id": image["id"].clone()}, "NewImage": image,
                        "SequenceNumber": seq.to_string(), "SizeBytes": 100, "StreamViewType": "NEW_IMAGE"}})
}

fn image_of(e: &shared::event::EventRecord) -> Value {
    let attrs = item::event_to_attrs(e, chrono::Duration::days(30)).unwrap();
    let map: serde_json::Map<String, Value> = attrs
        .0
        .iter()
        .map(|(k, v)| {
            let v = match v {
                Attr::S(s) => json!({"S": s}),
                Attr::N(n) => json!({"N": n}),
                other => panic!("a small event is stored uncompressed (S and N), got {other:?}"),
            };
            (k.clone(), v)
        })
        .collect();
    Value::Object(map)
}

/// A batch `[good, good, bad, good]`: the router routes the two records
/// before the unreadable one and names it, so Lambda checkpoints past the
/// first two only and retries from the bad one (then bisects and gives it
/// to the on-failure destination, as the pipeline test shows); the record
/// after it is not lost, it is in the retried batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_batch_is_handled_up_to_the_unreadable_record() {
    let rig = Rig::aws("prefix").await;
    let h = rig.container(Duration::from_secs(60));
    rig.stores.subscriptions.create(&stages::subscription("http://127.0.0.1:9/p", true)).await.unwrap();
    let ev = |id: &str| hookline_tests::conformance::event(id, "task.created");
    let (a, b, d) = (ev("batch-a"), ev("batch-b"), ev("batch-d"));
    let bad = json!({"id": {"S": "batch-c"}, "data": {"S": "{not json"}});
    let batch = |records: Vec<Value>| serde_json::from_value(json!({"Records": records})).unwrap();
    let res = lambda::route_stream(
        &h,
        batch(vec![record(1, image_of(&a)), record(2, image_of(&b)), record(3, bad.clone()), record(4, image_of(&d))]),
    )
    .await;
    let failed: Vec<Option<String>> = res.batch_item_failures.iter().map(|f| f.item_identifier.clone()).collect();
    assert_eq!(failed, vec![Some("3".to_string())], "the earliest record not done is named");
    for (e, routed) in [(&a, true), (&b, true), (&d, false)] {
        let sagas = rig.stores.sagas.list_for_event(&e.id).await.unwrap();
        assert_eq!(!sagas.is_empty(), routed, "{}: routed {routed}", e.id);
    }
    // Lambda's retry starts at the bad record: it fails there again, first.
    let res = lambda::route_stream(&h, batch(vec![record(3, bad), record(4, image_of(&d))])).await;
    assert_eq!(res.batch_item_failures.len(), 1);
    assert_eq!(res.batch_item_failures[0].item_identifier.as_deref(), Some("3"));
    // Once it is given up, the rest of the shard goes on.
    let res = lambda::route_stream(&h, batch(vec![record(4, image_of(&d))])).await;
    assert!(res.batch_item_failures.is_empty());
    assert_eq!(rig.stores.sagas.list_for_event(&d.id).await.unwrap().len(), 1);
}

/// A delivery job not done at the deliveries queue's last receive goes to
/// DeliveriesDLQ with nothing recorded (no attempt, no dead letter), so the
/// open-dead-letters alarm cannot see it: the delivery function counts it
/// (`JobsAbandoned`, alarmed by JobsAbandonedAlarm) and logs it. A job not
/// done at an earlier receive, which SQS gives back, is not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_failed_at_its_last_receive_is_counted_abandoned() {
    let rig = Rig::aws("abandoned").await;
    let h = rig.container(Duration::from_secs(5));
    let message = |id: &str, receives: u32| {
        json!({"messageId": id, "receiptHandle": format!("r-{id}"), "body": "{not a job",
               "attributes": {"ApproximateReceiveCount": receives.to_string()}, "messageAttributes": {},
               "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q", "awsRegion": "us-east-1"})
    };
    let last = shared::bounds::QUEUE_MAX_RECEIVES;
    let event: lambda::events::sqs::SqsEvent =
        serde_json::from_value(json!({"Records": [message("early", last - 1), message("last", last)]})).unwrap();
    let res = lambda::deliver_batch(&h, event).await;
    let failed: Vec<_> = res.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
    assert_eq!(failed, ["early", "last"], "both are given back to the queue");
    assert_eq!(h.metrics.jobs_abandoned.load(std::sync::atomic::Ordering::Relaxed), 1, "only the last receive counts");
    let emf: Value = serde_json::from_str(&h.metrics.take_emf("delivery", 1).expect("an EMF line")).unwrap();
    assert_eq!(emf["JobsAbandoned"], 1, "{emf}");
    let text = h.metrics.render(&[], None, &[]);
    assert!(text.contains("hookline_jobs_abandoned_total 1"), "{text}");
}
