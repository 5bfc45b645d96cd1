//! Router: the Events table's stream → one Pending saga per matching
//! subscription. Wiring only: `hookline_aws::lambda::route_stream` decides.

use hookline_aws::lambda::{self, events::dynamodb::Event, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_logging();
    let h = lambda::hookline_from_env().await?;
    lambda::run("router", h, |h, e: Event| async move { Ok(lambda::route_stream(&h, e).await) }).await
}
