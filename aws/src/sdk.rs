//! The AWS SDK configuration every part of Hookline that builds AWS clients
//! loads: the Lambda functions, the tests and the benchmarks. (The
//! `hookline` ops commands only sign requests to a deployment; they do that
//! with aws-sigv4 alone and do not build this.)

/// The loader of every AWS SDK configuration Hookline builds (the Lambda
/// functions, the tests and benchmarks): the SDK's defaults
/// (`BehaviorVersion::latest()`, region and credentials from the
/// environment) with an explicit HTTPS client on rustls with the *ring*
/// crypto provider. Callers add what they need (region, endpoint) and
/// `.load()`.
///
/// Why: the SDK's `default-https-client` feature puts rustls on aws-lc-rs,
/// while reqwest (subscriber callbacks, [`shared::http_client`]) uses ring, so
/// each bootstrap linked two crypto libraries. The workspace builds the SDK
/// without that feature, so an SDK configuration loaded any other way has no
/// HTTP client, and its first request fails ("no HTTP client").
///
/// The client is the SDK's default one but for the crypto provider: hyper
/// 1.x, connector settings (timeouts) and sleep from the SDK per client,
/// `HTTP_PROXY`/`HTTPS_PROXY`/`NO_PROXY` honoured as the default client does
/// at the latest behavior version. `Builder::build_https` would ignore
/// them, hence `build_with_connector_fn`, which is how `aws-smithy-runtime`
/// builds its default client (public, though `#[doc(hidden)]` in
/// aws-smithy-http-client 1.5). Nothing is connected and no certificate is
/// loaded here: the connector is built on the first request.
pub fn sdk_config_loader() -> aws_config::ConfigLoader {
    use aws_smithy_http_client::proxy::ProxyConfig;
    use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
    use aws_smithy_http_client::{Builder, ConnectorBuilder};
    let client = Builder::new().build_with_connector_fn(|settings, components| {
        let mut connector = ConnectorBuilder::default().tls_provider(Provider::Rustls(CryptoMode::Ring));
        connector.set_connector_settings(settings.cloned());
        if let Some(components) = components {
            connector.set_sleep_impl(components.sleep_impl());
        }
        connector.set_proxy_config(Some(ProxyConfig::from_env()));
        connector.build()
    });
    aws_config::defaults(aws_config::BehaviorVersion::latest()).http_client(client)
}
