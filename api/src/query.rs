//! What the list and bulk endpoints read from a request the same way: the
//! page size, a time range, and the reason every operator action must give.

use chrono::{DateTime, Utc};

use super::{query_param, ApiError, Request};
use shared::ports::TimeRange;

/// Items on a page when the request names no `limit`.
pub const DEFAULT_PAGE: usize = 100;
/// The largest `limit` a list endpoint takes.
pub const MAX_PAGE: usize = 1000;

/// `?limit=` (1 to [`MAX_PAGE`], default [`DEFAULT_PAGE`]); anything else
/// is a `400` naming `limit`.
pub fn limit(req: &Request<'_>) -> Result<usize, ApiError> {
    match query_param(req.query, "limit") {
        None => Ok(DEFAULT_PAGE),
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_PAGE).contains(n))
            .ok_or_else(|| ApiError::invalid("limit", format!("limit must be an integer between 1 and {MAX_PAGE}"))),
    }
}

/// One RFC 3339 instant named `field`; a bad one is a `400` naming it.
pub fn instant(field: &str, value: &str) -> Result<DateTime<Utc>, ApiError> {
    DateTime::parse_from_rfc3339(value.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| ApiError::invalid(field, format!("{field} must be an RFC 3339 time such as 2026-11-26T09:30:00Z")))
}

/// `?since=&until=` of a request, checked by [`check_range`].
pub fn time_range(req: &Request<'_>, retention: chrono::Duration) -> Result<TimeRange, ApiError> {
    let since = query_param(req.query, "since").map(|s| instant("since", &s)).transpose()?;
    let until = query_param(req.query, "until").map(|s| instant("until", &s)).transpose()?;
    check_range(TimeRange { since, until }, retention, Utc::now())
}

/// A time range over records kept for `retention`: `until` before `since`
/// is a `422` naming `until`; a range longer than the retention (with an
/// open end: reaching further back than it) is a `422` naming `since`,
/// because nothing older is kept to find.
pub fn check_range(range: TimeRange, retention: chrono::Duration, now: DateTime<Utc>) -> Result<TimeRange, ApiError> {
    if let (Some(s), Some(u)) = (range.since, range.until) {
        if u < s {
            return Err(ApiError::new(422, "invalid_range", "until must not be before since").on("until"));
        }
    }
    if let Some(s) = range.since {
        let end = range.until.unwrap_or(now).max(s);
        if end - s > retention {
            return Err(ApiError::new(
                422,
                "invalid_range",
                format!(
                    "the range from since is longer than the retention ({} days); nothing older is kept",
                    retention.num_days()
                ),
            )
            .on("since"));
        }
    }
    Ok(range)
}

/// The reason an operator action (requeue, skip, replay, bulk job) must
/// give: present, not blank, at most 1,000 characters; else a `400`
/// naming `reason`.
pub fn reason(given: Option<&str>) -> Result<String, ApiError> {
    match given.map(str::trim) {
        None | Some("") => {
            Err(ApiError::new(400, "reason_required", "a reason is required (it goes in the audit trail)").on("reason"))
        }
        Some(r) if r.chars().count() > 1000 => {
            Err(ApiError::invalid("reason", "reason must be at most 1000 characters"))
        }
        Some(r) => Ok(r.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        instant("t", s).unwrap()
    }

    #[test]
    fn ranges_are_checked_against_order_and_retention() {
        let now = t("2026-11-26T12:00:00Z");
        let days = chrono::Duration::days(7);
        let r = |s: Option<&str>, u: Option<&str>| TimeRange { since: s.map(t), until: u.map(t) };
        assert!(check_range(r(None, None), days, now).is_ok());
        assert!(check_range(r(Some("2026-11-20T12:00:00Z"), None), days, now).is_ok());
        let e = check_range(r(Some("2026-11-25T00:00:00Z"), Some("2026-11-24T00:00:00Z")), days, now).unwrap_err();
        assert_eq!((e.status, e.field.as_deref()), (422, Some("until")));
        let e = check_range(r(Some("2026-11-01T00:00:00Z"), None), days, now).unwrap_err();
        assert_eq!((e.status, e.field.as_deref()), (422, Some("since")));
        let e = check_range(r(Some("2026-10-01T00:00:00Z"), Some("2026-10-20T00:00:00Z")), days, now).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("since"));
    }

    #[test]
    fn a_reason_is_required() {
        assert_eq!(reason(Some(" customer fixed their endpoint ")).unwrap(), "customer fixed their endpoint");
        for bad in [None, Some(""), Some("   ")] {
            let e = reason(bad).unwrap_err();
            assert_eq!((e.status, e.field.as_deref()), (400, Some("reason")));
        }
        assert_eq!(reason(Some(&"x".repeat(1001))).unwrap_err().status, 400);
    }
}
