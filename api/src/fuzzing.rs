//! Entry points for the fuzzer (the `hookline-fuzz` crate, fuzz/): the
//! request parsers of the API, reached without a store, a network or a
//! runtime. Each reads untrusted bytes the way its routes do and must
//! answer with an [`ApiError`](crate::ApiError) (or accept), never panic, loop or allocate
//! without bound. Not used by the API itself.

use shared::context::Config;

use super::{audit, dead_letters, events, reindex, replays, stats, subscriptions, Request};

/// The request as the fuzzer builds it: `body` and `query` as received.
fn request<'a>(query: Option<&'a str>, body: &'a [u8], idempotency_key: Option<&'a [u8]>) -> Request<'a> {
    Request {
        method: "POST",
        path: "/",
        query,
        authorization: None,
        idempotency_key,
        principal: None,
        actor_header: None,
        signed: Default::default(),
        body,
    }
}

/// `body` read as the body of every route that takes one (subscriptions:
/// create, patch, skip a lane, rotate; dead letters: requeue or skip one,
/// bulk jobs; replay one event; `POST /v1/replays`; both reindex routes),
/// each put through the checks its handler makes before any store or
/// network call, under `config`. The number of routes that accepted it.
pub fn bodies(body: &[u8], config: &Config) -> usize {
    let req = request(None, body, None);
    // Any fixed key: the reindex bodies' cursors are refused unless issued.
    let key: super::cursor::CursorKey = [0x5a; 32];
    subscriptions::fuzz_bodies(body, config)
        + dead_letters::fuzz_bodies(body, config.dead_letter_retention)
        + events::fuzz_bodies(body)
        + replays::fuzz_bodies(body, config.retention)
        + usize::from(reindex::page_of(&req, reindex::Walk::Subscriptions, &key).is_ok())
        + usize::from(reindex::page_of(&req, reindex::Walk::DeadLetters, &key).is_ok())
}

/// `query` (the raw query string, without `?`) read as every list and
/// ingest route reads it before any store call: `?format=`, the filters of
/// `GET /v1/events`, `GET /v1/dead-letters`, `GET /v1/audit` and `GET /v1/stats`, each
/// through its typed query ([`crate::query::typed`]);
/// `idempotency_key` is the `Idempotency-Key` header of `POST /v1/events`.
/// The number of checks that accepted it.
pub fn queries(query: &str, idempotency_key: Option<&[u8]>, config: &Config) -> usize {
    let req = request(Some(query), b"", idempotency_key);
    let mut accepted = events::fuzz_query(&req, config.retention);
    accepted += usize::from(dead_letters::fuzz_query(&req, config.dead_letter_retention).is_ok());
    accepted += usize::from(audit::fuzz_query(req.query, config.audit_retention));
    accepted += usize::from(stats::fuzz_query(req.query, config.retention));
    accepted
}
