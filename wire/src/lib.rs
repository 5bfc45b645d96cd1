//! The wire contract of Hookline's HTTP API: one type for every request
//! body, query string and response, the one list page ([`Page`]) and the one
//! table of error codes ([`ErrorCode`]), each deriving its OpenAPI schema
//! (`utoipa`), so the published document (`GET /openapi.json`,
//! docs/openapi.json) is generated from the same types the server
//! serializes and the CLI deserializes.
//!
//! Rules every type here keeps:
//! - every enum is spelled `snake_case` on the wire;
//! - every request body and query string refuses unknown fields;
//! - ids are strings (their shapes are documented on the fields);
//! - times are RFC 3339 strings in UTC.
//!
//! This crate holds no logic beyond what a client needs to read the
//! contract: the server's rules live in `hookline-api` and `shared`.

pub mod acknowledgements;
pub mod audit;
pub mod catalog;
pub mod dead_letters;
pub mod error;
pub mod events;
pub mod health;
pub mod jobs;
pub mod keys;
pub mod page;
pub mod patch;
pub mod portal;
pub mod pull;
pub mod reindex;
pub mod replays;
pub mod stats;
pub mod subscriptions;

pub use error::{ErrorBody, ErrorCode, ErrorDetail, FieldIssue};
pub use page::Page;
pub use patch::Patch;
