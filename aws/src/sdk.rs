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
///
/// The connector trusts Amazon's root certificates, compiled in, not the
/// system's store, unless `HOOKLINE_AWS_TRUST_ROOTS=system` (or
/// `SSL_CERT_FILE`/`SSL_CERT_DIR`) asks for it too: loading the system's
/// store was half of a function's init. Why, and why those roots:
/// [`crate::trust`].
pub fn sdk_config_loader() -> aws_config::ConfigLoader {
    use aws_smithy_http_client::proxy::ProxyConfig;
    use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
    use aws_smithy_http_client::{Builder, ConnectorBuilder};
    let tls = crate::trust::Roots::from_env(|k| std::env::var(k).ok()).tls_context();
    let client = Builder::new().build_with_connector_fn(move |settings, components| {
        let mut connector =
            ConnectorBuilder::default().tls_provider(Provider::Rustls(CryptoMode::Ring)).tls_context(tls.clone());
        connector.set_connector_settings(settings.cloned());
        if let Some(components) = components {
            connector.set_sleep_impl(components.sleep_impl());
        }
        connector.set_proxy_config(Some(ProxyConfig::from_env()));
        connector.build()
    });
    aws_config::defaults(aws_config::BehaviorVersion::latest()).http_client(client)
}

/// Error codes with which AWS services say "throttled: slow down and try
/// again" (DynamoDB's provisioned throughput and request limits, SQS's and
/// the SDK's generic throttling codes).
const THROTTLING_CODES: &[&str] = &[
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "ThrottlingException",
    "Throttling",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
];

/// The [`StoreError`](shared::error::StoreError) of a failed SDK call,
/// described by `message` and keeping the SDK's error as its source:
/// throttled when the service said so (a throttling code, or HTTP 429);
/// otherwise retryable unless the service refused the request as such (a
/// 4xx answer: malformed, missing resource, no permission) or the request
/// could not even be built.
pub(crate) fn store_error<E>(
    message: String,
    e: aws_sdk_dynamodb::error::SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>,
) -> shared::error::StoreError
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
    let status = e.raw_response().map(|r| r.status().as_u16());
    if e.code().is_some_and(|c| THROTTLING_CODES.contains(&c)) || status == Some(429) {
        return shared::error::StoreError::throttled(message, e);
    }
    let retryable = match &e {
        SdkError::ServiceError(_) => status.is_none_or(|s| s >= 500),
        SdkError::ConstructionFailure(_) => false,
        _ => true,
    };
    shared::error::StoreError::Backend { message, retryable, source: Some(Box::new(e)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::config::http::HttpResponse;
    use aws_sdk_dynamodb::error::{ErrorMetadata, SdkError};
    use aws_sdk_dynamodb::operation::put_item::PutItemError;

    fn answered(code: &str, status: u16) -> shared::error::StoreError {
        let err = PutItemError::generic(ErrorMetadata::builder().code(code).message("m").build());
        let raw = HttpResponse::new(status.try_into().unwrap(), "".into());
        store_error(format!("dynamodb PutItem on t: {code}"), SdkError::service_error(err, raw))
    }

    #[test]
    fn throttling_is_told_from_refusals_and_keeps_its_source() {
        let t = answered("ProvisionedThroughputExceededException", 400);
        assert!(t.is_throttled() && t.is_retryable());
        assert!(std::error::Error::source(&t).is_some());
        assert!(answered("ThrottlingException", 400).is_throttled());
        let refused = answered("ValidationException", 400);
        assert!(!refused.is_throttled() && !refused.is_retryable());
        let failing = answered("InternalServerError", 500);
        assert!(!failing.is_throttled() && failing.is_retryable());
        assert_eq!(failing.to_string(), "storage backend error: dynamodb PutItem on t: InternalServerError");
    }
}
