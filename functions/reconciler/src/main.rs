//! Reconciler: on a schedule, re-drives stream batches the pipeline gave up
//! on and sagas that stopped progressing, and reports open dead letters.
//! Also seals, a bounded step per run, subscriptions stored in clear before
//! secrets were sealed at rest. Wiring only:
//! `hookline_aws::lambda::reconcile_scheduled` and `reseal_scheduled` decide.

use hookline_aws::lambda::{self, Error};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_logging();
    let (h, backend) = lambda::backend_from_env().await?;
    let backend = &backend;
    lambda::run("reconciler", h, move |h, _schedule: Value| async move {
        let report = lambda::reconcile_scheduled(&h, &h.config.reconcile).await;
        lambda::reseal_scheduled(backend).await;
        Ok(serde_json::to_value(report?)?)
    })
    .await
}
