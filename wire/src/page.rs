//! The one list page every `GET` listing answers.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One page of a listing: its items, and the cursor of the next page
/// (`null` on the last). Pass `cursor` back unchanged with the same filters
/// to read on; a cursor is opaque, signed, and valid for that listing only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Page<T> {
    /// The items, in the listing's order.
    pub items: Vec<T>,
    /// The next page's cursor; `null` when this page is the last.
    pub next_cursor: Option<String>,
}

impl<T> Page<T> {
    /// A page of `items`, followed by the page `next_cursor` names.
    pub fn new(items: Vec<T>, next_cursor: Option<String>) -> Self {
        Page { items, next_cursor }
    }
}
