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
