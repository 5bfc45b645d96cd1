//! The port conformance suite (`hookline_tests::conformance`) on the AWS
//! backend: DynamoDB and SQS in the local emulator (moto server; `make test`
//! starts it and sets `AWS_ENDPOINT_URL`), every case on its own tables and
//! queues created from `template.yaml` under a fresh prefix.

use hookline_tests::strict::Strict;
use shared::aws::AwsBackend;

/// A fresh backend on new tables and queues, its clients under the strict
/// checker (a request AWS would reject fails the case).
async fn fresh(tag: &str) -> (AwsBackend, Strict) {
    let strict = Strict::new();
    (strict.backend(tag).await, strict)
}

macro_rules! case {
    // Not a case on SQS: it documents that a delete with an old receipt
    // handle "will succeed, but the message might not be deleted" (moto does
    // delete it), so the guarantee is SQLite's alone and the port promises
    // nothing about it. On AWS a lease never runs out under a live worker
    // (the queue's visibility timeout is 6x the function timeout).
    (queue_stale_receipt_cannot_delete) => {};
    ($name:ident) => {
        #[tokio::test]
        async fn $name() {
            let (backend, strict) = fresh(stringify!($name)).await;
            hookline_tests::conformance::$name(&backend.stores).await;
            strict.assert_clean();
        }
    };
}

hookline_tests::for_each_conformance_case!(case);

/// Route-cache fills (`SubscriptionStore::get_many`, every container every
/// cache TTL) read subscriptions eventually consistent: half a read unit
/// each instead of one. Only `get`, the confirmation routing asks for
/// before it leaves a candidate out, is strongly consistent.
#[tokio::test]
async fn subscription_fills_read_eventually_consistent() {
    use shared::ports::SubscriptionStore;
    let sdk = hookline_tests::emulator::aws_config().await;
    let prefix = hookline_tests::emulator::fresh_prefix("sub_fills");
    let names = hookline_tests::emulator::create_resources_with(&sdk, &prefix).await;
    let meter = hookline_tests::metering::Meter::new();
    let store = shared::aws::DynamoSubscriptions::new(meter.dynamodb_client(&sdk), names.subscriptions_table.clone());
    let subs: Vec<_> = (0..4).map(|i| hookline_tests::conformance::subscription(&format!("sub_f{i}"), 1)).collect();
    for s in &subs {
        store.create(s).await.unwrap();
    }
    let ids: Vec<_> = subs.iter().map(|s| s.id.clone()).collect();
    let units = |before: &hookline_tests::metering::MeterCounts| {
        let used = meter.snapshot().since(before);
        let u = &used.dynamodb[&("SubscriptionsTable".to_string(), "GetItem".to_string())];
        (u.requests, u.rru)
    };
    let before = meter.snapshot();
    assert_eq!(store.get_many(&ids).await.unwrap().into_iter().flatten().collect::<Vec<_>>(), subs);
    assert_eq!(units(&before), (4, 2.0), "4 eventually consistent reads of under 4 KB: half a unit each");
    let before = meter.snapshot();
    assert_eq!(store.get(&ids[0]).await.unwrap().as_ref(), Some(&subs[0]));
    assert_eq!(units(&before), (1, 1.0), "the confirmation is strongly consistent");
}
