//! The root certificates the AWS SDK's HTTPS connector trusts
//! ([`sdk_config_loader`](crate::sdk_config_loader)): Amazon's own roots,
//! compiled in, instead of the system's store.
//!
//! Why: building the connector (on the SDK's first request, the data key's
//! `GetItem` at every cold start) with the system's store reads and parses
//! every root certificate of the system (`rustls-native-certs`: about 140
//! certificates, 220 KB, on Debian), about 4.5 ms of CPU, half of a
//! function's init (docs/aws.md, "Cold start and bootstrap size"). Five
//! roots parse in a fraction of that.
//!
//! Why these five: every AWS service endpoint the SDK calls for Hookline
//! (DynamoDB, DynamoDB Streams, SQS, KMS; queue and bus destinations go
//! through reqwest, not the SDK) has a certificate of Amazon Trust Services
//! in the commercial partition, and Amazon Trust Services' repository
//! (<https://www.amazontrust.com/repository/>) names the roots its
//! certificates chain to: Amazon Root CA 1 to 4 and, the cross-signing root
//! older clients know, Starfield Services Root Certificate Authority - G2.
//! AWS moved its service endpoints from DigiCert to Amazon Trust Services
//! from 2018 on (the S3 and CloudFront defaults last, finished in 2022: AWS
//! Security blog "How to Prepare for AWS's Move to Its Own Certificate
//! Authority"; AWS Storage blog of 2021, updated June 2022). The PEM file
//! (`amazon_roots.pem`) is Debian's ca-certificates 20230311 copy of the five
//! (Mozilla's store); the test below pins their SHA-256 fingerprints, the
//! ones the repository lists.
//!
//! The escape hatch: [`TRUST_ROOTS_VAR`] set to `system`, or `SSL_CERT_FILE`
//! or `SSL_CERT_DIR` set, adds the system's store (which reads those two
//! variables): for a partition whose endpoints chain elsewhere (the China
//! regions), an endpoint behind a TLS-inspecting proxy, or a VPC endpoint
//! with a private certificate. Subscriber deliveries (reqwest,
//! `shared::http_client`) keep their own roots: this is the AWS SDK's only.

use aws_smithy_http_client::tls::{TlsContext, TrustStore};

/// Amazon Root CA 1, 2, 3, 4 and Starfield Services Root Certificate
/// Authority - G2, PEM, in that order.
const AMAZON_ROOTS_PEM: &[u8] = include_bytes!("amazon_roots.pem");

/// The environment variable that chooses the SDK connector's roots:
/// `amazon` (the default: Amazon's five roots only) or `system` (the
/// system's store as well, as before: `SSL_CERT_FILE`, `SSL_CERT_DIR`, else
/// the platform's certificates).
pub const TRUST_ROOTS_VAR: &str = "HOOKLINE_AWS_TRUST_ROOTS";

/// The roots the SDK's connector trusts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Roots {
    /// Amazon's five roots, compiled in.
    Amazon,
    /// Amazon's five and the system's store.
    AmazonAndSystem,
}

impl Roots {
    /// The roots an environment read through `var` asks for: the system's
    /// store too when [`TRUST_ROOTS_VAR`] is `system`, or when it is unset
    /// and `SSL_CERT_FILE` or `SSL_CERT_DIR` is set (the operator named a
    /// store); Amazon's alone otherwise. An unknown value of
    /// [`TRUST_ROOTS_VAR`] is logged and taken as `system`, the choice that
    /// refuses no endpoint the system trusts.
    pub(crate) fn from_env(var: impl Fn(&str) -> Option<String>) -> Roots {
        match var(TRUST_ROOTS_VAR).as_deref().map(str::trim) {
            Some("amazon") => Roots::Amazon,
            Some("system") => Roots::AmazonAndSystem,
            Some(other) => {
                tracing::warn!("{TRUST_ROOTS_VAR}={other:?} is neither \"amazon\" nor \"system\": using the system's root certificates too");
                Roots::AmazonAndSystem
            }
            None if var("SSL_CERT_FILE").is_some() || var("SSL_CERT_DIR").is_some() => Roots::AmazonAndSystem,
            None => Roots::Amazon,
        }
    }

    /// The connector's TLS context trusting these roots. The PEM is parsed
    /// when a connector is built (aws-smithy-http-client does it), not here;
    /// the system's store is read then too, once per process.
    pub(crate) fn tls_context(self) -> TlsContext {
        let store = TrustStore::empty()
            .with_native_roots(self == Roots::AmazonAndSystem)
            .with_pem_certificate(AMAZON_ROOTS_PEM);
        TlsContext::builder().with_trust_store(store).build().expect("a TLS context without server names builds")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use sha2::{Digest, Sha256};

    /// SHA-256 of each certificate, as <https://www.amazontrust.com/repository/> lists them.
    const FINGERPRINTS: [(&str, &str); 5] = [
        ("Amazon Root CA 1", "8ecde6884f3d87b1125ba31ac3fcb13d7016de7f57cc904fe1cb97c6ae98196e"),
        ("Amazon Root CA 2", "1ba5b2aa8c65401a82960118f80bec4f62304d83cec4713a19c39c011ea46db4"),
        ("Amazon Root CA 3", "18ce6cfe7bf14e60b2e347b8dfe868cb31d02ebb3ada271569f50343b46db3a4"),
        ("Amazon Root CA 4", "e35d28419ed02025cfa69038cd623962458da5c695fbdea3c22b0bfb25897092"),
        ("Starfield Services Root G2", "568d6905a2c88708a4b3025190edcfedb1974a606a13c6e5290fcb2ae63edab5"),
    ];

    fn ders() -> Vec<Vec<u8>> {
        let pem = std::str::from_utf8(AMAZON_ROOTS_PEM).unwrap();
        pem.split("-----BEGIN CERTIFICATE-----")
            .skip(1)
            .map(|block| {
                let body: String =
                    block.split("-----END CERTIFICATE-----").next().unwrap().split_whitespace().collect();
                base64::engine::general_purpose::STANDARD.decode(body).unwrap()
            })
            .collect()
    }

    #[test]
    fn the_embedded_roots_are_amazons_five() {
        let ders = ders();
        assert_eq!(ders.len(), FINGERPRINTS.len());
        for (der, (name, fingerprint)) in ders.iter().zip(FINGERPRINTS) {
            let got: String = Sha256::digest(der).iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(got, fingerprint, "{name}");
        }
    }

    #[test]
    fn a_connector_builds_on_them() {
        // aws-smithy-http-client parses the PEM when it builds the connector
        // and panics on one it cannot parse.
        use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
        let _connector = aws_smithy_http_client::ConnectorBuilder::default()
            .tls_provider(Provider::Rustls(CryptoMode::Ring))
            .tls_context(Roots::Amazon.tls_context())
            .build();
    }

    #[test]
    fn the_system_store_is_opt_in_or_named() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        assert_eq!(Roots::from_env(env(&[])), Roots::Amazon);
        assert_eq!(Roots::from_env(env(&[(TRUST_ROOTS_VAR, "system")])), Roots::AmazonAndSystem);
        assert_eq!(Roots::from_env(env(&[(TRUST_ROOTS_VAR, "amazon")])), Roots::Amazon);
        assert_eq!(Roots::from_env(env(&[(TRUST_ROOTS_VAR, "bogus")])), Roots::AmazonAndSystem);
        assert_eq!(Roots::from_env(env(&[("SSL_CERT_FILE", "/etc/proxy-ca.pem")])), Roots::AmazonAndSystem);
        assert_eq!(Roots::from_env(env(&[("SSL_CERT_DIR", "/etc/ssl/certs")])), Roots::AmazonAndSystem);
        assert_eq!(
            Roots::from_env(env(&[(TRUST_ROOTS_VAR, "amazon"), ("SSL_CERT_FILE", "/etc/proxy-ca.pem")])),
            Roots::Amazon
        );
    }
}
