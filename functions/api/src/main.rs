//! API: the subscription, event-inspection and dead-letter routes of
//! `hookline serve`, same contract, behind API Gateway (IAM authorization).
//! Wiring only: `shared::lambda::http` → `shared::api::Api`.

use shared::api::{Api, Verification};
use shared::lambda::{self, events::apigw::ApiGatewayV2httpRequest, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_logging();
    let h = lambda::hookline_from_env().await?;
    // Nothing runs after a Lambda answers, so the handshake runs before.
    let api = Api::behind_gateway(h.clone(), Verification::Inline);
    lambda::run("api", h, move |_, e: ApiGatewayV2httpRequest| {
        let api = api.clone();
        async move { Ok(lambda::http(&api, e).await) }
    })
    .await
}
