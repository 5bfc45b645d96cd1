//! Errors shared by the ports: what a store or queue can fail with.

/// Any error a backend reports, kept as the source of a [`StoreError`] so
/// its chain (the SDK's or SQLite's error) can still be inspected.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A store or queue failed. Each kind says whether trying again may help
/// ([`StoreError::is_retryable`]), and a throttled backend says so
/// ([`StoreError::is_throttled`]), so callers that retry can back off
/// rather than give up. Clients never see these messages (the API answers
/// 503 with a fixed text); they are logged.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backend refused the call for now: throttled, over its
    /// provisioned throughput, busy or locked. Trying again after a pause
    /// is expected to succeed.
    #[error("storage backend throttled: {message}")]
    Throttled {
        /// What was refused, and the backend's message.
        message: String,
        /// The backend's error.
        #[source]
        source: BoxError,
    },
    /// The backend failed otherwise (I/O, SQL, a request it refused).
    #[error("storage backend error: {message}")]
    Backend {
        /// What failed, and the backend's message.
        message: String,
        /// Whether trying again may help (a timeout, a lost connection, a
        /// record that kept changing) or not (a request the backend will
        /// always refuse: malformed, a missing table, no permission).
        retryable: bool,
        /// The backend's error, when there is one (not for a condition
        /// Hookline itself detected).
        #[source]
        source: Option<BoxError>,
    },
    /// A stored record could not be decoded (schema drift or corruption).
    #[error("stored record is corrupt: {0}")]
    Corrupt(String),
    /// The backend is shutting down and takes no more work.
    #[error("storage is shutting down")]
    Closed,
}

impl StoreError {
    /// Wraps a backend's error, kept as the source; retryable, as nothing
    /// more is known about it.
    pub fn backend(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        StoreError::Backend { message: e.to_string(), retryable: true, source: Some(Box::new(e)) }
    }

    /// A failure Hookline itself detected, with no backend error beneath
    /// (a record that kept changing, a call that was not run); retryable.
    pub fn other(message: String) -> Self {
        StoreError::Backend { message, retryable: true, source: None }
    }

    /// The backend throttled the call (`message` says which).
    pub fn throttled(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StoreError::Throttled { message: message.into(), source: source.into() }
    }

    /// Whether trying the same call again may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            StoreError::Throttled { .. } => true,
            StoreError::Backend { retryable, .. } => *retryable,
            StoreError::Corrupt(_) | StoreError::Closed => false,
        }
    }

    /// Whether the backend throttled the call (back off, then retry).
    pub fn is_throttled(&self) -> bool {
        matches!(self, StoreError::Throttled { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_say_whether_to_retry_and_keep_their_source() {
        let io = std::io::Error::new(std::io::ErrorKind::TimedOut, "slow disk");
        let e = StoreError::backend(io);
        assert!(e.is_retryable() && !e.is_throttled());
        assert_eq!(e.to_string(), "storage backend error: slow disk");
        assert_eq!(std::error::Error::source(&e).unwrap().to_string(), "slow disk");
        let t = StoreError::throttled("PutItem on t", std::io::Error::other("ProvisionedThroughputExceeded"));
        assert!(t.is_retryable() && t.is_throttled());
        assert!(std::error::Error::source(&t).is_some());
        assert!(!StoreError::Corrupt("x".into()).is_retryable());
        assert!(!StoreError::Closed.is_retryable());
        let refused = StoreError::Backend { message: "no such table".into(), retryable: false, source: None };
        assert!(!refused.is_retryable());
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
