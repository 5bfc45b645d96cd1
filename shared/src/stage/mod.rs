//! The pipeline's stages, one module each. Each is a function over
//! [`crate::context::Hookline`] that a Lambda handler or `hookline serve`
//! calls; none knows which backend it runs on.
//!
//! `ingest` → Events → `route` → Sagas → `saga` → deliveries queue →
//! `deliver` → Attempts → `saga` … ; `requeue` and `replay` start new sagas;
//! `verify` runs the callback handshake (`verify_token`: the token a queue
//! or bus destination's owner confirms).

pub mod auto_requeue;
pub mod breaker;
pub mod bulk;
pub mod deliver;
pub mod dispatch;
pub mod failing;
pub mod ingest;
pub mod operational;
pub mod ordering;
pub mod reconcile;
pub mod requeue;
pub mod requeue_queue;
pub mod route;
pub mod saga;
pub mod stats;
pub mod subscriptions;
pub mod verify;
pub mod verify_token;
