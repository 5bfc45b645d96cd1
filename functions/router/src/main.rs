//! Router: the Events table's stream → one Pending saga per matching
//! subscription. Wiring only: `shared::lambda::route_stream` decides.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use shared::lambda::{self, events::dynamodb::Event};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_logging();
    let h = lambda::hookline_from_env().await?;
    lambda_runtime::run(service_fn(|e: LambdaEvent<Event>| {
        let h = h.clone();
        async move {
            let res = lambda::route_stream(&h, e.payload).await;
            lambda::flush_metrics(&h, "router");
            Ok::<_, Error>(res)
        }
    }))
    .await
}
