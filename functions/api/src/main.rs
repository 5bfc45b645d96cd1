//! API: the subscription, event-inspection and dead-letter routes of
//! `hookline serve`, same contract, behind API Gateway (IAM authorization).
//! Wiring only: `shared::lambda::http` → `shared::api::Api`.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use shared::api::{Api, Verification};
use shared::lambda::{self, events::apigw::ApiGatewayV2httpRequest};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_logging();
    let h = lambda::hookline_from_env().await?;
    // Nothing runs after a Lambda answers, so the handshake runs before.
    let api = Api::behind_gateway(h.clone(), Verification::Inline);
    lambda_runtime::run(service_fn(|e: LambdaEvent<ApiGatewayV2httpRequest>| {
        let (h, api) = (h.clone(), api.clone());
        async move {
            let res = lambda::http(&api, e.payload).await;
            lambda::flush_metrics(&h, "api");
            Ok::<_, Error>(res)
        }
    }))
    .await
}
