//! What the list and bulk endpoints read from a request the same way: the
//! typed query string ([`typed`]), the page size, a time range, and the
//! reason every operator action must give.

use super::error::ErrorCode;
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;

use super::ApiError;
use shared::ports::TimeRange;

/// The query string read into its wire type `T` (a `hookline_wire` query
/// type: `#[serde(deny_unknown_fields)]`, one field per parameter),
/// percent-decoded once (`application/x-www-form-urlencoded`: `+` is a
/// space). Errors, each naming the parameter: one the route does not take,
/// or one given twice → `400 unknown_parameter`; a value not of its type
/// (`limit=ten`, an unknown enum name) → `400 invalid_type`. Rules on the
/// values (ranges, retention) are the caller's, as `422`s.
pub fn typed<T: DeserializeOwned>(query: Option<&str>) -> Result<T, ApiError> {
    let raw = query.unwrap_or("");
    let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(raw.as_bytes()));
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let text = e.into_inner().to_string();
        let named = |prefix: &str| {
            text.strip_prefix(prefix).and_then(|rest| rest.split_once('`')).map(|(name, _)| name.to_string())
        };
        if let Some(name) = named("unknown field `") {
            let known = text.split_once(", expected ").map(|(_, k)| format!("; it takes {k}")).unwrap_or_default();
            let known = if text.contains("there are no fields") { "; it takes none".to_string() } else { known };
            return ApiError::new(ErrorCode::UnknownParameter, format!("unknown query parameter `{name}`{known}"))
                .on(name);
        }
        if let Some(name) = named("duplicate field `") {
            return ApiError::new(ErrorCode::UnknownParameter, format!("query parameter `{name}` is given twice"))
                .on(name);
        }
        if let Some(name) = named("missing field `") {
            return ApiError::new(ErrorCode::MissingField, format!("missing query parameter `{name}`")).on(name);
        }
        let field = if path.is_empty() || path == "." { "query".to_string() } else { path };
        ApiError::unreadable(field.clone(), format!("query parameter `{field}`: {text}"))
    })
}

/// The query string of a route that takes no parameter (`GET
/// /v1/events/{event}`, `/healthz`, `/metrics`): read with [`typed`], any
/// parameter is a `400 unknown_parameter` naming it.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoQuery {}

/// Refuses any query parameter of a route that takes none (`400
/// unknown_parameter` naming it): a parameter is never ignored.
pub fn none(query: Option<&str>) -> Result<(), ApiError> {
    typed::<NoQuery>(query).map(|NoQuery {}| ())
}

/// Items on a page when the request names no `limit`.
pub const DEFAULT_PAGE: usize = 100;
/// The largest `limit` a list endpoint takes.
pub const MAX_PAGE: usize = 1000;

/// A typed query's `limit` (its type already read): `default` when
/// absent, else 1 to `max`, or a `422` naming `limit`.
pub fn page_limit(given: Option<u32>, default: usize, max: usize) -> Result<usize, ApiError> {
    match given {
        None => Ok(default),
        Some(n) if (1..=max).contains(&(n as usize)) => Ok(n as usize),
        Some(_) => Err(ApiError::invalid("limit", format!("limit must be an integer between 1 and {max}"))),
    }
}

/// One RFC 3339 instant named `field`; one that does not parse is a `400`
/// `invalid_type` naming it.
pub fn instant(field: &str, value: &str) -> Result<DateTime<Utc>, ApiError> {
    DateTime::parse_from_rfc3339(value.trim()).map(|t| t.with_timezone(&Utc)).map_err(|_| {
        ApiError::unreadable(field, format!("{field} must be an RFC 3339 time such as 2026-11-26T09:30:00Z"))
    })
}

/// How far from now a time bound may lie beyond what is kept: clocks
/// disagree, and a client computing `now - retention` sends it a moment
/// later.
pub const TIME_SKEW: chrono::Duration = chrono::Duration::hours(1);

/// A time range over records kept for `retention`: each bound given must
/// lie from `now - retention - TIME_SKEW` to `now + TIME_SKEW` (nothing
/// older is kept and nothing newer exists: year 1 or 9999 is a mistake),
/// else a `422` naming it; `until` before `since` is a `422` naming
/// `until` (checked first).
pub fn check_range(range: TimeRange, retention: chrono::Duration, now: DateTime<Utc>) -> Result<TimeRange, ApiError> {
    if let (Some(s), Some(u)) = (range.since, range.until) {
        if u < s {
            return Err(ApiError::new(ErrorCode::InvalidRange, "until must not be before since").on("until"));
        }
    }
    let (earliest, latest) = (now - retention - TIME_SKEW, now + TIME_SKEW);
    for (field, bound) in [("since", range.since), ("until", range.until)] {
        let Some(t) = bound else { continue };
        if t < earliest || t > latest {
            return Err(ApiError::new(ErrorCode::InvalidRange,
                format!(
                    "{field} must be within the retention: from {} to {} (now - {} days - 1 hour to now + 1 hour); nothing older is kept",
                    earliest.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    latest.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    retention.num_days()
                ),
            )
            .on(field));
        }
    }
    Ok(range)
}

/// The longest `reason`, in characters.
pub const MAX_REASON_CHARS: usize = 1000;

/// The reason an operator action (requeue, skip, replay, bulk job) must
/// give: present, not blank, at most [`MAX_REASON_CHARS`] characters,
/// without control characters (ESC, CR, LF, TAB, NUL, DEL, C1) nor
/// Unicode line separators or bidirectional formatting, which would forge
/// lines or colours in logs and the audit trail; else a `422` naming
/// `reason` (`reason_required` when absent or blank). Whitespace at either end is trimmed.
pub fn reason(given: Option<&str>) -> Result<String, ApiError> {
    match given.map(str::trim) {
        None | Some("") => {
            Err(ApiError::new(ErrorCode::ReasonRequired, "a reason is required (it goes in the audit trail)").on("reason"))
        }
        Some(r) if r.chars().count() > MAX_REASON_CHARS => {
            Err(ApiError::invalid("reason", format!("reason must be at most {MAX_REASON_CHARS} characters")))
        }
        Some(r) if r.chars().any(|c| c.is_control() || is_format_char(c)) => Err(ApiError::invalid(
            "reason",
            "reason must be one line of printable text: no control characters (ESC, CR, LF, tab, …), line separators or bidirectional formatting",
        )),
        Some(r) => Ok(r.to_string()),
    }
}

/// U+2028/2029 (line and paragraph separators) and the bidirectional
/// formatting characters, which reorder or break what a log shows.
fn is_format_char(c: char) -> bool {
    matches!(c, '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
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
        assert!(check_range(r(Some("2026-11-19T11:30:00Z"), Some("2026-11-26T12:30:00Z")), days, now).is_ok(), "skew");
        let e = check_range(r(Some("2026-11-25T00:00:00Z"), Some("2026-11-24T00:00:00Z")), days, now).unwrap_err();
        assert_eq!((e.status(), e.field.as_deref()), (422, Some("until")));
        let e = check_range(r(Some("2026-11-01T00:00:00Z"), None), days, now).unwrap_err();
        assert_eq!((e.status(), e.field.as_deref()), (422, Some("since")));
        let e = check_range(r(Some("2026-10-01T00:00:00Z"), Some("2026-10-20T00:00:00Z")), days, now).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("since"));
        for (s, u, field) in [
            (Some("0001-01-01T00:00:00Z"), Some("0001-01-02T00:00:00Z"), "since"),
            (None, Some("0001-01-02T00:00:00Z"), "until"),
            (Some("2026-11-25T00:00:00Z"), Some("9999-12-31T23:59:59Z"), "until"),
            (Some("9999-01-01T00:00:00Z"), None, "since"),
            (None, Some("2026-11-26T13:00:01Z"), "until"),
            (Some("2026-11-19T10:59:59Z"), None, "since"),
        ] {
            let e = check_range(r(s, u), days, now).unwrap_err();
            assert_eq!((e.status(), e.field.as_deref()), (422, Some(field)), "{s:?} {u:?}: {}", e.message);
            assert!(
                e.message.contains("2026-11-19T11:00:00Z") && e.message.contains("2026-11-26T13:00:00Z"),
                "{}",
                e.message
            );
        }
    }

    #[derive(Debug, serde::Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Q {
        limit: Option<u32>,
        tenant_id: Option<String>,
        state: Option<shared::dead_letter::DeadLetterState>,
    }

    /// Unknown, repeated and mistyped parameters are refused naming the
    /// parameter; values are percent-decoded once.
    #[test]
    fn typed_query_strings_refuse_what_they_do_not_take() {
        let q: Q = typed(Some("limit=5&tenant_id=a%2Fb+c")).unwrap();
        assert_eq!(q, Q { limit: Some(5), tenant_id: Some("a/b c".into()), state: None });
        let q: Q = typed(None).unwrap();
        assert_eq!(q.limit, None);
        let e = typed::<Q>(Some("tenant=acme")).unwrap_err();
        assert_eq!((e.status(), e.code, e.field.as_deref()), (400, ErrorCode::UnknownParameter, Some("tenant")));
        assert!(e.message.contains("tenant_id"), "names what it takes: {}", e.message);
        let e = typed::<Q>(Some("limit=1&limit=2")).unwrap_err();
        assert_eq!((e.code, e.field.as_deref()), (ErrorCode::UnknownParameter, Some("limit")));
        let e = typed::<Q>(Some("limit=ten")).unwrap_err();
        assert_eq!((e.status(), e.code, e.field.as_deref()), (400, ErrorCode::InvalidType, Some("limit")));
        let e = typed::<Q>(Some("state=gone")).unwrap_err();
        assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidType, Some("state")));
    }

    #[test]
    fn a_reason_is_required() {
        assert_eq!(reason(Some(" customer fixed their endpoint ")).unwrap(), "customer fixed their endpoint");
        assert_eq!(reason(Some("café — naïve ✓")).unwrap(), "café — naïve ✓");
        for bad in [None, Some(""), Some("   ")] {
            let e = reason(bad).unwrap_err();
            assert_eq!((e.status(), e.field.as_deref()), (422, Some("reason")));
        }
        assert_eq!(reason(Some(&"x".repeat(1001))).unwrap_err().status(), 422);
        assert!(reason(Some(&"é".repeat(1000))).is_ok(), "characters, not bytes");
        for bad in ["a\u{1b}[31mred", "a\rb", "a\nb", "a\tb", "a\0b", "a\u{7f}", "a\u{85}b", "a\u{2028}b", "a\u{202e}b"]
        {
            let e = reason(Some(bad)).unwrap_err();
            assert_eq!((e.status(), e.field.as_deref()), (422, Some("reason")), "{bad:?}");
            assert!(!e.message.chars().any(char::is_control));
        }
    }
}
