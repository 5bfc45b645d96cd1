//! Requeue: the requeue queue (API requeues and replays, console redrives of
//! the deliveries DLQ) → new sagas linked to the dead ones. Wiring only:
//! `hookline_aws::lambda::requeue_batch` decides.

use hookline_aws::lambda::{self, events::sqs::SqsEvent, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_logging();
    let h = lambda::hookline_from_env().await?;
    lambda::run("requeue", h, |h, e: SqsEvent| async move { Ok(lambda::requeue_batch(&h, e).await) }).await
}
