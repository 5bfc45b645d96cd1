//! Which format an envelope is in: [`Format`], whose wire names are what
//! `?format=` takes, and [`detect_format`], which guesses the format from an
//! envelope's top-level keys when the producer names none.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::EnvelopeError;

/// Producer envelope formats.
///
/// Serialized (and parsed by [`FromStr`]) as `native`, `change-feed`,
/// `domain-event` and `contract`, the names `?format=` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Hookline's own envelope: `{id?, type, data, ...}`.
    Native,
    /// The change-feed envelope (`entity_type`, `change_type`, ...; docs/formats.md#change-feed).
    ChangeFeed,
    /// The domain / integration event envelope (`schemaVersion`, `sequence`, ...; docs/formats.md#domain-event).
    DomainEvent,
    /// The event contract v1 (`version`, `traceId`, `idempotencyKey`, ...; docs/formats.md#contract-v1).
    Contract,
}

impl Format {
    /// Every format, in the order auto-detection and error messages list them.
    pub const ALL: [Format; 4] = [Format::Native, Format::ChangeFeed, Format::DomainEvent, Format::Contract];

    /// The format's wire name: `native`, `change-feed`, `domain-event` or `contract`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Format::Native => "native",
            Format::ChangeFeed => "change-feed",
            Format::DomainEvent => "domain-event",
            Format::Contract => "contract",
        }
    }
}

/// Shows the wire name, so a format reads the same in logs and messages as in `?format=`.
impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses a wire name. Case and surrounding whitespace are ignored and `_`
/// counts as `-` (so `change_feed` and `Change-Feed` work); anything else is
/// [`EnvelopeError::UnknownFormat`] carrying the name as given.
impl FromStr for Format {
    type Err = EnvelopeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase().replace('_', "-");
        Format::ALL
            .into_iter()
            .find(|f| f.as_str() == wanted)
            .ok_or_else(|| EnvelopeError::UnknownFormat(s.to_string()))
    }
}

/// Guesses the format of an envelope from its top-level keys; `None` when no
/// format's distinguishing keys are present.
///
/// In order: `entity_type` and `change_type` → change-feed; `eventId` or
/// `eventType` with any of `schemaVersion`, `sequence`, `correlationId` →
/// domain-event; `eventId` or `eventType` with any of `idempotencyKey`,
/// `traceId`, `version`, `riskFlags` → contract; `eventId` or `eventType`
/// with `tenantId` → domain-event; `type` or `data` → native. (`tenantId`
/// is required in a domain event and optional in a contract envelope, so it
/// decides only when nothing else does.) Detection only picks the format;
/// validation then reports what that format is missing
/// (docs/formats.md#detection-and-the-format-parameter: so an outbound
/// webhook body, which has `traceId` and `version`, is read as a contract
/// envelope and refused for its missing `producer`).
pub fn detect_format(obj: &Map<String, Value>) -> Option<Format> {
    let has = |k: &str| obj.contains_key(k);
    let any = |ks: &[&str]| ks.iter().any(|k| has(k));
    let event_like = any(&["eventId", "eventType"]);
    if has("entity_type") && has("change_type") {
        Some(Format::ChangeFeed)
    } else if event_like && any(&["schemaVersion", "sequence", "correlationId"]) {
        Some(Format::DomainEvent)
    } else if event_like && any(&["idempotencyKey", "traceId", "version", "riskFlags"]) {
        Some(Format::Contract)
    } else if event_like && has("tenantId") {
        Some(Format::DomainEvent)
    } else if any(&["type", "data"]) {
        Some(Format::Native)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::normalize;
    use crate::envelope::testkit::{expect_err, CHANGE_FEED, CONTRACT, DOMAIN, NATIVE};

    /// Format names round-trip through as_str, FromStr, Display and serde.
    #[test]
    fn format_names() {
        for f in Format::ALL {
            assert_eq!(f.as_str().parse::<Format>().unwrap(), f);
            assert_eq!(f.to_string(), f.as_str());
            assert_eq!(serde_json::to_string(&f).unwrap(), format!("\"{}\"", f.as_str()));
        }
        assert_eq!("Change_Feed".parse::<Format>().unwrap(), Format::ChangeFeed);
        assert_eq!(" domain-event ".parse::<Format>().unwrap(), Format::DomainEvent);
        let e = "cloudevents".parse::<Format>().unwrap_err();
        assert_eq!(e, EnvelopeError::UnknownFormat("cloudevents".into()));
        assert_eq!(e.code(), "unknown_format");
        assert!(e.to_string().contains("`cloudevents`"));
        assert!(e.to_string().contains("change-feed"));
    }

    /// An unknown `?format=` is quoted with its control characters escaped.
    #[test]
    fn unknown_format_is_escaped() {
        let e = "x\nINFO forged".parse::<Format>().unwrap_err();
        assert!(!e.to_string().contains('\n'), "{e}");
        assert!(e.to_string().contains("`x\\nINFO forged`"), "{e}");
    }

    /// A body with no recognisable keys is Undetectable, and the message lists the formats.
    #[test]
    fn undetectable() {
        for body in ["{}", r#"{"foo":1}"#, r#"{"eventId":"x"}"#, r#"{"entity_type":"UserProfile"}"#] {
            let e = normalize(body.as_bytes(), None).unwrap_err();
            assert_eq!(e, EnvelopeError::Undetectable, "{body}");
            assert_eq!(e.code(), "unknown_envelope");
            let text = e.to_string();
            for f in Format::ALL {
                assert!(text.contains(f.as_str()), "{text}");
            }
        }
    }

    /// An explicit format is obeyed even when the body is another format, and
    /// the error names what the named format is missing.
    #[test]
    fn explicit_format_mismatch() {
        expect_err(normalize(CONTRACT.as_bytes(), Some(Format::Native)), "missing_field", Some("type"));
        expect_err(normalize(NATIVE.as_bytes(), Some(Format::ChangeFeed)), "missing_field", Some("entity_type"));
        expect_err(normalize(NATIVE.as_bytes(), Some(Format::DomainEvent)), "missing_field", Some("eventId"));
        expect_err(normalize(DOMAIN.as_bytes(), Some(Format::Contract)), "missing_field", Some("version"));
        expect_err(normalize(CONTRACT.as_bytes(), Some(Format::DomainEvent)), "missing_field", Some("schemaVersion"));
        expect_err(normalize(CHANGE_FEED.as_bytes(), Some(Format::Contract)), "missing_field", Some("eventId"));
        // And the matching explicit format works.
        assert_eq!(normalize(DOMAIN.as_bytes(), Some(Format::DomainEvent)).unwrap().format, Format::DomainEvent);
    }

    /// Detection of partial envelopes picks the format whose keys are present,
    /// so the error is a missing field of that format.
    #[test]
    fn detection_of_partial_envelopes() {
        expect_err(
            normalize(br#"{"eventType":"RecordUpdated","schemaVersion":1}"#, None),
            "missing_field",
            Some("eventId"),
        );
        expect_err(normalize(br#"{"eventId":"e","traceId":"t"}"#, None), "missing_field", Some("eventType"));
        // `tenantId` alone says domain event; beside a contract key, contract.
        expect_err(normalize(br#"{"eventId":"e","tenantId":"t"}"#, None), "missing_field", Some("schemaVersion"));
        expect_err(
            normalize(br#"{"eventId":"e","tenantId":"t","idempotencyKey":"k"}"#, None),
            "missing_field",
            Some("eventType"),
        );
        expect_err(normalize(br#"{"entity_type":"A","change_type":"created"}"#, None), "missing_field", Some("id"));
    }
}
