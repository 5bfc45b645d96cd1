//! Errors shared by the ports: what a store or queue can fail with.

/// A store or queue failed; the operation may be retried.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backend answered with an error (I/O, throttling, SQL).
    #[error("storage backend error: {0}")]
    Backend(String),
    /// A stored record could not be decoded (schema drift or corruption).
    #[error("stored record is corrupt: {0}")]
    Corrupt(String),
    /// The backend is shutting down and takes no more work.
    #[error("storage is shutting down")]
    Closed,
}

impl StoreError {
    /// Wraps any displayable backend error.
    pub fn backend(e: impl std::fmt::Display) -> Self {
        StoreError::Backend(e.to_string())
    }
}

/// A request field that failed validation (a subscription's, a retry
/// policy's, a payload option's): which field, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// The request field at fault.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    /// Names `field` and what is wrong with it.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError { field: field.into(), message: message.into() }
    }
}
