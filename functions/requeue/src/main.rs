//! Requeue: the requeue queue (API requeues and replays, console redrives of
//! the deliveries DLQ) → new sagas linked to the dead ones. Wiring only:
//! `shared::lambda::requeue_batch` decides.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use shared::lambda::{self, events::sqs::SqsEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_logging();
    let h = lambda::hookline_from_env().await?;
    lambda_runtime::run(service_fn(|e: LambdaEvent<SqsEvent>| {
        let h = h.clone();
        async move {
            let res = lambda::requeue_batch(&h, e.payload).await;
            lambda::flush_metrics(&h, "requeue");
            Ok::<_, Error>(res)
        }
    }))
    .await
}
