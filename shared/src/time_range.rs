//! A range of time a listing is limited to (events, dead letters, the audit
//! trail): below the ports and the records they list.

use chrono::{DateTime, Utc};

/// A range of time a listing is limited to; either end may be open.
/// `since` is inclusive, `until` exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeRange {
    /// From this instant on.
    pub since: Option<DateTime<Utc>>,
    /// Before this instant.
    pub until: Option<DateTime<Utc>>,
}

impl TimeRange {
    /// Whether `t` is inside the range.
    pub fn contains(&self, t: DateTime<Utc>) -> bool {
        self.since.is_none_or(|s| t >= s) && self.until.is_none_or(|u| t < u)
    }
}
