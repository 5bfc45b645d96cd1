//! Hookline's core: every decision the pipeline makes, written once and used
//! by both backends. Pure logic lives in the domain modules ([`envelope`],
//! [`subscription`], [`routing`], [`saga`], [`retry`], [`signing`],
//! [`ssrf`]); the stages ([`stage`]) combine them with the narrow store and
//! queue traits of [`ports`]. This crate has no storage or cloud dependency:
//! the adapters live in `hookline-sqlite` and `hookline-aws`, the HTTP API in
//! `hookline-api`, and a wrong-way import does not compile.

pub mod access;
pub mod ack;
pub mod api_key;
#[cfg(test)]
mod architecture_tests;
pub mod attempt;
pub mod audit;
pub mod bounds;
pub mod bulk;
pub mod catalog;
pub mod config;
pub mod context;
pub mod data_key;
pub mod dead_letter;
pub mod destination;
pub mod duration;
pub mod envelope;
pub mod error;
pub mod event;
pub mod event_search;
pub mod event_types;
pub mod failpoint;
pub mod health;
pub mod http_client;
pub mod idempotency;
pub mod ids;
pub mod keyring;
pub mod lane;
pub mod message;
pub mod metrics;
pub mod ordering;
pub mod payload;
pub mod portal;
pub mod ports;
pub mod pull;
pub mod queue;
pub mod recovery;
pub mod retry;
pub mod routing;
pub mod saga;
pub mod sealed;
pub mod signing;
pub mod ssrf;
pub mod stage;
pub mod stats;
pub mod subscription;
pub mod tenant;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
pub mod time_range;
pub mod transport;
pub mod type_version;
