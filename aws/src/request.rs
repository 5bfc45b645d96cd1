//! What every DynamoDB request of the adapters shares: attribute values,
//! a failed call as a [`StoreError`] (throttling and retryability kept), and
//! the outcome of a conditional write. Below every store module, so the
//! stores and the order table import it without importing each other.

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::types::AttributeValue;
use shared::error::StoreError;
use shared::ports::StoreResult;

/// A `StoreError` for a failed DynamoDB call, with the service's message.
pub(crate) fn backend<E>(op: &str, table: &str, e: SdkError<E, HttpResponse>) -> StoreError
where
    E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + Send + Sync + 'static,
{
    crate::sdk::store_error(format!("dynamodb {op} on {table}: {}", DisplayErrorContext(&e)), e)
}

/// The outcome of a conditional write: `true` if written, `false` if its
/// condition failed (not an error: the idempotent writes expect it).
pub(crate) fn written<O, E>(op: &str, table: &str, res: Result<O, SdkError<E, HttpResponse>>) -> StoreResult<bool>
where
    E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + Send + Sync + 'static,
{
    match res {
        Ok(_) => Ok(true),
        Err(e) if e.as_service_error().and_then(|s| s.code()) == Some("ConditionalCheckFailedException") => Ok(false),
        Err(e) => Err(backend(op, table, e)),
    }
}

/// A string attribute.
pub(crate) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

/// A number attribute.
pub(crate) fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}
