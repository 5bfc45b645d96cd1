//! API: the subscription, event-inspection and dead-letter routes of
//! `hookline serve`, same contract, behind API Gateway (IAM authorization).
//! Wiring only: `hookline_aws::lambda::http_via` → the router of
//! `hookline_api::Api` (`hookline_api::http::router`).

use hookline_api::{Api, Verification};
use hookline_aws::lambda::{self, events::apigw::ApiGatewayV2httpRequest, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init_logging();
    let h = lambda::hookline_from_env().await?;
    // Nothing runs after a Lambda answers, so the handshake runs before.
    // The caller is the IAM principal API Gateway authorized; an `X-Actor`
    // header is recorded after it only with the setting TRUST_ACTOR_HEADER
    // (every principal allowed to call is a trusted system acting for
    // people), read with every other setting (`shared::config`).
    let trust = h.config.trust_actor_header;
    let api = Api::behind_gateway(h.clone(), Verification::Inline).trusting_actor_header(trust);
    let router = hookline_api::http::router(api);
    lambda::run("api", h, move |_, e: ApiGatewayV2httpRequest| {
        let router = router.clone();
        async move { Ok(lambda::http_via(&router, e).await) }
    })
    .await
}
