//! Hookline's shared core: every decision the pipeline makes, written once and
//! used by both backends (the embedded SQLite one and the AWS one).
//!
//! Pure logic lives in the domain modules ([`envelope`], [`subscription`],
//! [`routing`], [`saga`], [`retry`], [`signing`], [`ssrf`]); the stages
//! ([`ingest`], [`router`], [`orchestrator`], [`delivery`]) combine them with
//! the narrow store and queue traits of [`ports`]; adapters implement the
//! ports ([`sqlite`]).

pub mod api;
pub mod attempt;
pub mod audit;
#[cfg(feature = "aws")]
pub mod aws;
pub mod bulk;
pub mod config;
pub mod context;
pub mod dead_letter;
pub mod envelope;
pub mod error;
pub mod event;
pub mod event_search;
pub mod failpoint;
pub mod health;
pub mod http_client;
pub mod ids;
pub mod job;
#[cfg(feature = "aws")]
pub mod lambda;
pub mod limits;
pub mod metrics;
pub mod ordering;
pub mod payload;
pub mod ports;
pub mod queue;
pub mod retention;
pub mod retry;
pub mod routing;
pub mod saga;
#[cfg(feature = "aws-auth")]
pub mod sdk;
pub mod signing;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod ssrf;
pub mod stage;
pub mod subscription;
