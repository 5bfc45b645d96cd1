//! The port conformance suite (`hookline_tests::conformance`) on the AWS
//! backend: DynamoDB and SQS in the local emulator (moto server; `make test`
//! starts it and sets `AWS_ENDPOINT_URL`), every case on its own tables and
//! queues created from `template.yaml` under a fresh prefix.

use hookline_tests::emulator;
use shared::aws::AwsBackend;

/// A fresh backend on new tables and queues.
async fn fresh(tag: &str) -> AwsBackend {
    let sdk = emulator::aws_config().await;
    let names = emulator::create_resources_with(&sdk, &emulator::fresh_prefix(tag)).await;
    AwsBackend::new(&sdk, names, chrono::Duration::days(30))
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
            let backend = fresh(stringify!($name)).await;
            hookline_tests::conformance::$name(&backend.stores).await;
        }
    };
}

hookline_tests::for_each_conformance_case!(case);
