//! Saga step: the Sagas and Attempts streams and the retry-timer queue →
//! status transitions, delivery jobs, retry timers and dead letters. Wiring
//! only: `hookline_aws::lambda::{saga_stream, saga_timers}` decide.

use hookline_aws::lambda::{self, Error, Incoming};
use serde_json::{to_value, Value};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_logging();
    let h = lambda::hookline_from_env().await?;
    lambda::run("saga", h, |h, e: Value| async move {
        Ok(match Incoming::parse(e)? {
            Incoming::Stream(ev) => to_value(lambda::saga_stream(&h, ev).await)?,
            Incoming::Sqs(ev) => to_value(lambda::saga_timers(&h, ev).await)?,
            Incoming::Http(_) => return Err(Error::from("the saga function takes stream and SQS events only")),
        })
    })
    .await
}
