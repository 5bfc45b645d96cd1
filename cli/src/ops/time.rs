//! `--since` / `--until` values: an RFC 3339 time (`2026-11-26T09:00:00Z`,
//! any offset), a date (`2026-11-26`, midnight UTC), or a duration ago
//! (`90s`, `30m`, `6h`, `2d`, `1w`), sent to the API as RFC 3339 UTC.

use chrono::{DateTime, Duration, NaiveDate, SecondsFormat, Utc};

/// Parses a time flag (clap's value parser): the RFC 3339 UTC text sent to
/// the API, or why it is not a time.
pub fn parse(s: &str) -> Result<String, String> {
    parse_at(s, Utc::now())
}

/// A time [`parse`] gave, as the instant the wire types carry.
pub fn instant(s: &str) -> Result<DateTime<Utc>, super::client::OpsError> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| super::client::OpsError::Usage(format!("`{s}` is not an RFC 3339 time: {e}")))
}

/// [`parse`] with `now` given (tests).
pub fn parse_at(s: &str, now: DateTime<Utc>) -> Result<String, String> {
    let s = s.trim();
    let t = if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        t.with_timezone(&Utc)
    } else if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        d.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc()
    } else if let Some(ago) = duration(s) {
        now - ago
    } else {
        return Err(format!(
            "`{s}` is not a time: give RFC 3339 (2026-11-26T09:00:00Z), a date (2026-11-26) \
             or a duration ago (30m, 6h, 2d)"
        ));
    };
    Ok(t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
}

fn duration(s: &str) -> Option<Duration> {
    let unit = s.chars().last()?;
    let n: i64 = s[..s.len() - unit.len_utf8()].parse().ok().filter(|n| *n >= 0)?;
    match unit {
        's' => Duration::try_seconds(n),
        'm' => Duration::try_minutes(n),
        'h' => Duration::try_hours(n),
        'd' => Duration::try_days(n),
        'w' => Duration::try_weeks(n),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_dates_and_durations_ago() {
        let now = DateTime::parse_from_rfc3339("2026-11-26T12:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(parse_at("2026-11-26T10:00:00+01:00", now).unwrap(), "2026-11-26T09:00:00Z");
        assert_eq!(parse_at("2026-11-26T09:00:00.250Z", now).unwrap(), "2026-11-26T09:00:00.250Z");
        assert_eq!(parse_at("2026-11-25", now).unwrap(), "2026-11-25T00:00:00Z");
        assert_eq!(parse_at("30m", now).unwrap(), "2026-11-26T11:30:00Z");
        assert_eq!(parse_at("2d", now).unwrap(), "2026-11-24T12:00:00Z");
        for bad in ["yesterday", "", "5x", "-3h", "2026-13-01", "h"] {
            assert!(parse_at(bad, now).unwrap_err().contains("not a time"), "{bad}");
        }
    }
}
