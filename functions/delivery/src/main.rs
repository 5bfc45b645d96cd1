//! Delivery: the deliveries queue → signed HTTPS POSTs, a batch at a time,
//! attempts recorded, partial batch failures reported. Wiring only:
//! `hookline_aws::lambda::deliver_batch` decides.

use hookline_aws::lambda::{self, events::sqs::SqsEvent, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_logging();
    let h = lambda::hookline_from_env().await?;
    lambda::run("delivery", h, |h, e: SqsEvent| async move { Ok(lambda::deliver_batch(&h, e).await) }).await
}
