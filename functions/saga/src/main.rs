//! Saga step: the Sagas and Attempts streams and the retry-timer queue →
//! status transitions, delivery jobs, retry timers and dead letters. Wiring
//! only: `shared::lambda::{saga_stream, saga_timers}` decide.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::{to_value, Value};
use shared::lambda::{self, Incoming};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_logging();
    let h = lambda::hookline_from_env().await?;
    lambda_runtime::run(service_fn(|e: LambdaEvent<Value>| {
        let h = h.clone();
        async move {
            let res = match Incoming::parse(e.payload)? {
                Incoming::Stream(ev) => to_value(lambda::saga_stream(&h, ev).await)?,
                Incoming::Sqs(ev) => to_value(lambda::saga_timers(&h, ev).await)?,
                Incoming::Http(_) => return Err(Error::from("the saga function takes stream and SQS events only")),
            };
            lambda::flush_metrics(&h, "saga");
            Ok::<_, Error>(res)
        }
    }))
    .await
}
