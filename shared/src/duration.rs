//! Durations written with a unit: `30d`, `12h`, `5m`, `90s`, `500ms`. One
//! parser for every place a retention or a timeout is configured
//! (`hookline serve --retention 30d`, the listener timeouts, the Lambda
//! functions' `RETENTION`), so they all accept the same spellings and refuse
//! the same mistakes with the same message.

use std::fmt;

/// Why a duration was refused. The message says what was wrong and what is
/// accepted; callers prefix the name of the flag or variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Nothing was given.
    #[error("empty duration: write a whole number and a unit, e.g. 30d, 12h, 5m or 90s")]
    Empty,
    /// A bare number: ambiguous (days? seconds?), so refused.
    #[error("{0:?} has no unit: write e.g. {0}d for days (units: ms, s, m, h, d)")]
    MissingUnit(String),
    /// The unit is none of `ms`, `s`, `m`, `h`, `d`.
    #[error("{value:?} has an unknown unit {unit:?} (units: ms, s, m, h, d)")]
    UnknownUnit {
        /// What was given.
        value: String,
        /// The unit part of it.
        unit: String,
    },
    /// The number part is not a whole number.
    #[error("{0:?} is not a whole number followed by a unit (e.g. 30d, 5m)")]
    BadNumber(String),
    /// Zero (or less): a retention or timeout of nothing is a mistake.
    #[error("{0:?} must be more than zero")]
    Zero(String),
    /// Larger than a duration can hold.
    #[error("{0:?} is too large")]
    TooLarge(String),
    /// A retention longer than [`MAX_RETENTION_DAYS`].
    #[error("{0:?} is longer than the longest retention, 36500d")]
    TooLong(String),
}

/// Parses a duration with a unit: a whole number followed by `ms`, `s`,
/// `m` (minutes), `h` or `d`, e.g. `30d` or `5m`; blanks around it are
/// ignored. A bare number is refused: `--retention 30` could mean days or
/// seconds, and guessing wrong deletes data.
pub fn parse_duration(input: &str) -> Result<chrono::Duration, DurationError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = (&s[..split], s[split..].trim());
    if number.is_empty() {
        return Err(DurationError::BadNumber(s.to_string()));
    }
    let n: i64 = number.parse().map_err(|_| DurationError::TooLarge(s.to_string()))?;
    if unit.is_empty() {
        return Err(DurationError::MissingUnit(s.to_string()));
    }
    let ms_per: i64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ if unit.starts_with(|c: char| c.is_ascii_digit() || c == '.' || c == ',') => {
            return Err(DurationError::BadNumber(s.to_string()))
        }
        _ => return Err(DurationError::UnknownUnit { value: s.to_string(), unit: unit.to_string() }),
    };
    if n == 0 {
        return Err(DurationError::Zero(s.to_string()));
    }
    n.checked_mul(ms_per)
        .and_then(chrono::Duration::try_milliseconds)
        .ok_or_else(|| DurationError::TooLarge(s.to_string()))
}

/// The longest retention accepted: 100 years (36,500 days). Longer ones
/// would overflow the expiry instants stamped on records.
pub const MAX_RETENTION_DAYS: i64 = 36_500;

/// [`parse_duration`] for a retention: also refuses more than
/// [`MAX_RETENTION_DAYS`].
pub fn parse_retention(input: &str) -> Result<chrono::Duration, DurationError> {
    let d = parse_duration(input)?;
    if d > chrono::Duration::days(MAX_RETENTION_DAYS) {
        return Err(DurationError::TooLong(input.trim().to_string()));
    }
    Ok(d)
}

/// [`parse_duration`] as a `std::time::Duration` (timeouts).
pub fn parse_std_duration(input: &str) -> Result<std::time::Duration, DurationError> {
    let d = parse_duration(input)?;
    d.to_std().map_err(|_| DurationError::TooLarge(input.trim().to_string()))
}

/// A duration written back in the largest unit that expresses it exactly
/// (`30d`, `90s`, `1500ms`), for start-up banners and log lines.
pub struct Display(pub chrono::Duration);

impl fmt::Display for Display {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.num_milliseconds();
        for (unit, per) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
            if ms != 0 && ms % per == 0 {
                return write!(f, "{}{unit}", ms / per);
            }
        }
        write!(f, "{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_every_unit() {
        assert_eq!(parse_duration("30d").unwrap(), chrono::Duration::days(30));
        assert_eq!(parse_duration("12h").unwrap(), chrono::Duration::hours(12));
        assert_eq!(parse_duration(" 5m ").unwrap(), chrono::Duration::minutes(5));
        assert_eq!(parse_duration("90s").unwrap(), chrono::Duration::seconds(90));
        assert_eq!(parse_duration("250ms").unwrap(), chrono::Duration::milliseconds(250));
        assert_eq!(parse_duration("2 s").unwrap(), chrono::Duration::seconds(2));
        assert_eq!(parse_std_duration("10s").unwrap(), std::time::Duration::from_secs(10));
    }

    #[test]
    fn refuses_mistakes_with_a_clear_reason() {
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert_eq!(parse_duration("30"), Err(DurationError::MissingUnit("30".into())));
        assert!(parse_duration("30").unwrap_err().to_string().contains("30d"));
        assert!(matches!(parse_duration("3w"), Err(DurationError::UnknownUnit { .. })));
        assert!(matches!(parse_duration("d"), Err(DurationError::BadNumber(_))));
        assert!(matches!(parse_duration("-5m"), Err(DurationError::BadNumber(_))));
        assert!(matches!(parse_duration("1.5h"), Err(DurationError::BadNumber(_))));
        assert_eq!(parse_duration("0s"), Err(DurationError::Zero("0s".into())));
        assert!(matches!(parse_duration("99999999999999999999d"), Err(DurationError::TooLarge(_))));
        assert!(matches!(parse_duration("9999999999999d"), Err(DurationError::TooLarge(_))));
        assert_eq!(parse_retention("36500d").unwrap(), chrono::Duration::days(36_500));
        assert!(matches!(parse_retention("36501d"), Err(DurationError::TooLong(_))));
    }

    #[test]
    fn displays_in_the_largest_exact_unit() {
        assert_eq!(Display(chrono::Duration::days(30)).to_string(), "30d");
        assert_eq!(Display(chrono::Duration::minutes(90)).to_string(), "90m");
        assert_eq!(Display(chrono::Duration::seconds(2)).to_string(), "2s");
        assert_eq!(Display(chrono::Duration::milliseconds(1500)).to_string(), "1500ms");
    }
}
