//! `POST /v1/subscriptions/reindex` and `POST /v1/dead-letters/reindex`:
//! one page of a repair after an upgrade, each through its store's
//! `reindex_page`. The request is `{"cursor"?, "limit"?}` (limit 1 to
//! 100, default 100), the answer `{"reindexed", "examined",
//! "next_cursor"}`; the caller repeats with `next_cursor` until it is
//! `null`. Every bad value is refused before anything is read, and a
//! cursor of the other route (or any listing) is refused.

use hookline_wire::reindex::{ReindexAnswer, ReindexRequest};

use super::{cursor, parse, ApiError, Request, Response};
use shared::ports::{ReindexPage, MAX_REINDEX_PAGE};

/// Which table a reindex walks: its cursors are only good for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Walk {
    /// Subscriptions (the routing index).
    Subscriptions,
    /// Dead letters (the listing keys).
    DeadLetters,
}

impl Walk {
    /// The "filters" of its cursors ([`cursor::issue`]).
    fn cursor_kind(self) -> &'static str {
        match self {
            // The name cursors issued before dead letters had a reindex carry.
            Walk::Subscriptions => "reindex",
            Walk::DeadLetters => "reindex-dead-letters",
        }
    }
}

/// Where the page starts (the store's position) and how many items it
/// examines, from the request; refused with the field named.
pub(super) fn page_of(
    req: &Request<'_>,
    walk: Walk,
    key: &cursor::CursorKey,
) -> Result<(Option<String>, usize), ApiError> {
    let body: ReindexRequest = parse(req.body, true)?;
    let limit = match body.limit {
        None => MAX_REINDEX_PAGE,
        Some(n) => usize::try_from(n).ok().filter(|n| (1..=MAX_REINDEX_PAGE).contains(n)).ok_or_else(|| {
            ApiError::invalid("limit", format!("limit must be an integer between 1 and {MAX_REINDEX_PAGE}"))
        })?,
    };
    let after = body
        .cursor
        .map(|c| cursor::read(key, &c, walk.cursor_kind()).map_err(|e| cursor::refused("cursor", &e)))
        .transpose()?;
    Ok((after, limit))
}

/// The answer for what one page did.
pub(super) fn answer(page: ReindexPage, walk: Walk, key: &cursor::CursorKey) -> Response {
    Response::json(
        200,
        &ReindexAnswer {
            reindexed: page.reindexed,
            examined: page.examined,
            next_cursor: page.next.map(|n| cursor::issue(key, &n, walk.cursor_kind())),
        },
    )
}
