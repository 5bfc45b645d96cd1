//! Ingest: `POST /v1/events` and `/v1/events/batch` through API Gateway, and
//! EventBridge events through the ingest queue → the Events table. Wiring
//! only: `hookline_aws::lambda::{http_via, ingest_from_bus}` decide.

use std::sync::Arc;

use hookline_api::{Api, Verification};
use hookline_aws::lambda::{self, Error, Incoming};
use serde_json::{to_value, Value};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_logging();
    let (h, backend) = lambda::backend_from_env().await?;
    // Its two routes only: the API's other handlers stay out of the binary.
    let api = Api::behind_gateway(h.clone(), Verification::Inline);
    let router = hookline_api::http::router_of(api, hookline_api::routes::INGEST_ROUTES);
    let rejects = Arc::new(backend.ingest_dlq.ok_or("INGEST_DLQ_URL is not set")?);
    lambda::run("ingest", h, move |h, e: Value| {
        let (router, rejects) = (router.clone(), rejects.clone());
        async move {
            Ok(match Incoming::parse(e)? {
                Incoming::Http(req) => to_value(lambda::http_via(&router, *req).await)?,
                Incoming::Sqs(ev) => to_value(lambda::ingest_from_bus(&h, &rejects, ev).await)?,
                Incoming::Stream(_) => return Err(Error::from("the ingest function takes HTTP and SQS events only")),
            })
        }
    })
    .await
}
