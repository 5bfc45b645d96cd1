//! Reconciler: on a schedule, re-drives stream batches the pipeline gave up
//! on and sagas that stopped progressing, and reports open dead letters.
//! Wiring only: `hookline_aws::lambda::reconcile_scheduled` decides.

use hookline_aws::lambda::{self, Error};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_logging();
    let h = lambda::hookline_from_env().await?;
    lambda::run("reconciler", h, move |h, _schedule: Value| async move {
        Ok(serde_json::to_value(lambda::reconcile_scheduled(&h, &h.config.reconcile).await?)?)
    })
    .await
}
