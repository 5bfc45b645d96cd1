//! Delivery: the deliveries queue → signed HTTPS POSTs, a batch at a time,
//! attempts recorded, partial batch failures reported. Wiring only:
//! `shared::lambda::deliver_batch` decides.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use shared::lambda::{self, events::sqs::SqsEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_logging();
    let h = lambda::hookline_from_env().await?;
    lambda_runtime::run(service_fn(|e: LambdaEvent<SqsEvent>| {
        let h = h.clone();
        async move {
            let res = lambda::deliver_batch(&h, e.payload).await;
            lambda::flush_metrics(&h, "delivery");
            Ok::<_, Error>(res)
        }
    }))
    .await
}
