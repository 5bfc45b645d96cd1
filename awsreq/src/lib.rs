//! SigV4-signed AWS calls without the AWS SDK, for the `hookline` binary
//! (ops commands, `hookline serve`) and the Lambda functions alike:
//! [`credentials`] found the way the AWS CLI finds them, the [`sigv4`]
//! signer, and the queue and bus [`transport`] that delivers to SQS queues
//! and EventBridge buses ([`shared::destination`]). One signer for all of
//! them; the default binary gains no AWS SDK crate.

pub mod credentials;
pub mod sigv4;
pub mod transport;
