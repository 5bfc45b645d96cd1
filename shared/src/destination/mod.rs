//! Where a subscription's deliveries go: its `callback_url` read as an
//! HTTPS URL (as before), an SQS queue ARN or an EventBridge bus ARN, like
//! the `Endpoint` of an SNS subscription. Pure: parsing, the limits each
//! kind has, and the request bodies of the AWS calls ([`sqs`],
//! [`eventbridge`]); the signed calls themselves are made by a
//! [`crate::transport::Transport`] the backend installs.
//!
//! An ARN names only a region, an account and a name. The host a request
//! goes to is never taken from the subscription: it is the service's
//! regional endpoint (or the deployment's `AWS_ENDPOINT_URL…` override),
//! so a subscription cannot make Hookline sign a request to a host of its
//! choosing.

pub mod eventbridge;
pub mod sqs;

/// The kind of a destination, as the subscription view shows it
/// (`"destination": "https" | "sqs" | "eventbridge" | "pull"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DestinationKind {
    /// An HTTPS callback (a signed POST).
    Https,
    /// An SQS queue (standard or FIFO): one `SendMessage` per attempt.
    Sqs,
    /// An EventBridge bus: one `PutEvents` entry per attempt.
    EventBridge,
    /// None: a pull-only subscription (`pull: true`, no `callback_url`),
    /// read by its subscriber through `GET /v1/subscriptions/{id}/events`
    /// and never pushed to ([`crate::pull`]).
    Pull,
}

impl DestinationKind {
    /// The name the API shows.
    pub fn as_str(self) -> &'static str {
        match self {
            DestinationKind::Https => "https",
            DestinationKind::Sqs => "sqs",
            DestinationKind::EventBridge => "eventbridge",
            DestinationKind::Pull => "pull",
        }
    }

    /// The kind of a subscription's destination: [`DestinationKind::Pull`]
    /// for a pull-only one (no `callback_url`, `pull` set), else the kind
    /// its `callback_url` reads as (HTTPS when it does not parse: the API
    /// refuses such a URL before it is stored).
    pub fn of(callback_url: &str, pull: bool) -> DestinationKind {
        if pull && callback_url.trim().is_empty() {
            return DestinationKind::Pull;
        }
        parse(callback_url).map_or(DestinationKind::Https, |d| d.kind())
    }
}

/// An SQS queue named by its ARN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqsQueue {
    /// The ARN as given (trimmed).
    pub arn: String,
    /// `aws`, `aws-cn` or `aws-us-gov`.
    pub partition: String,
    /// The queue's region.
    pub region: String,
    /// The owning account (12 digits).
    pub account: String,
    /// The queue name (`.fifo` included for a FIFO queue).
    pub name: String,
}

impl SqsQueue {
    /// Whether it is a FIFO queue (its name ends in `.fifo`).
    pub fn fifo(&self) -> bool {
        self.name.ends_with(".fifo")
    }
}

/// An EventBridge event bus named by its ARN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventBus {
    /// The ARN as given (trimmed); sent as the entry's `EventBusName`.
    pub arn: String,
    /// `aws`, `aws-cn` or `aws-us-gov`.
    pub partition: String,
    /// The bus's region.
    pub region: String,
    /// The owning account (12 digits).
    pub account: String,
    /// The bus name.
    pub name: String,
}

/// Where deliveries go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// An HTTPS callback URL (checked by [`crate::ssrf`] elsewhere).
    Https(String),
    /// An SQS queue.
    Sqs(SqsQueue),
    /// An EventBridge bus.
    EventBridge(EventBus),
}

impl Destination {
    /// Its kind.
    pub fn kind(&self) -> DestinationKind {
        match self {
            Destination::Https(_) => DestinationKind::Https,
            Destination::Sqs(_) => DestinationKind::Sqs,
            Destination::EventBridge(_) => DestinationKind::EventBridge,
        }
    }

    /// The ARN of a queue or bus; `None` for HTTPS.
    pub fn arn(&self) -> Option<&str> {
        match self {
            Destination::Https(_) => None,
            Destination::Sqs(q) => Some(&q.arn),
            Destination::EventBridge(b) => Some(&b.arn),
        }
    }
}

/// Why a `callback_url` is not a destination Hookline can deliver to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DestinationError {
    /// An `arn:` that is not an SQS queue or EventBridge bus ARN.
    #[error(
        "`{0}` is not a destination ARN: expected arn:aws:sqs:<region>:<account>:<queue name> or \
         arn:aws:events:<region>:<account>:event-bus/<bus name>"
    )]
    NotADestination(String),
    /// A part of a queue or bus ARN is malformed.
    #[error("destination ARN: {0}")]
    Malformed(String),
    /// The deployment's allow-list does not hold the ARN: its role could not
    /// send to it.
    #[error("destination `{0}` is not one this deployment may send to (not in its allowed destinations)")]
    NotAllowed(String),
}

/// Reads `callback_url`: an `arn:` is a queue or bus ARN, anything else is
/// an HTTPS URL, left to [`crate::ssrf`] to check as before.
pub fn parse(callback_url: &str) -> Result<Destination, DestinationError> {
    let s = callback_url.trim();
    if !s.starts_with("arn:") {
        return Ok(Destination::Https(s.to_string()));
    }
    let parts: Vec<&str> = s.splitn(6, ':').collect();
    let [_, partition, service, region, account, resource] = parts[..] else {
        return Err(DestinationError::NotADestination(s.to_string()));
    };
    if !matches!(service, "sqs" | "events") {
        return Err(DestinationError::NotADestination(s.to_string()));
    }
    if !matches!(partition, "aws" | "aws-cn" | "aws-us-gov") {
        return Err(DestinationError::Malformed(format!("unknown partition `{partition}`")));
    }
    if !valid_region(region) {
        return Err(DestinationError::Malformed(format!("region `{region}` is not a region name")));
    }
    if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
        return Err(DestinationError::Malformed(format!("account `{account}` is not 12 digits")));
    }
    let (partition, region, account) = (partition.to_string(), region.to_string(), account.to_string());
    if service == "sqs" {
        check_queue_name(resource)?;
        return Ok(Destination::Sqs(SqsQueue {
            arn: s.to_string(),
            partition,
            region,
            account,
            name: resource.into(),
        }));
    }
    let Some(name) = resource.strip_prefix("event-bus/") else {
        return Err(DestinationError::Malformed(format!(
            "`{resource}` is not an event bus (expected event-bus/<name>)"
        )));
    };
    check_bus_name(name)?;
    Ok(Destination::EventBridge(EventBus { arn: s.to_string(), partition, region, account, name: name.into() }))
}

/// A region name as AWS spells them: lowercase letters and digits in
/// hyphen-separated parts (`us-east-1`, `eu-central-2`); it becomes part
/// of an endpoint host name, so nothing else is allowed.
fn valid_region(r: &str) -> bool {
    (4..=32).contains(&r.len())
        && r.split('-').count() >= 3
        && r.split('-').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
}

/// SQS queue names: 1 to 80 characters, alphanumerics, hyphens and
/// underscores; a FIFO queue's ends in `.fifo` (within the 80).
fn check_queue_name(name: &str) -> Result<(), DestinationError> {
    let stem = name.strip_suffix(".fifo").unwrap_or(name);
    if name.is_empty() || name.len() > 80 || stem.is_empty() {
        return Err(DestinationError::Malformed(format!("queue name `{name}` must be 1 to 80 characters")));
    }
    if !stem.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Err(DestinationError::Malformed(format!(
            "queue name `{name}` may hold only letters, digits, `-` and `_` (and end in `.fifo`)"
        )));
    }
    Ok(())
}

/// Event bus names: 1 to 256 characters of letters, digits, `.`, `-`, `_`
/// and `/` (partner buses hold slashes).
fn check_bus_name(name: &str) -> Result<(), DestinationError> {
    if name.is_empty() || name.len() > 256 {
        return Err(DestinationError::Malformed(format!("bus name `{name}` must be 1 to 256 characters")));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'/')) {
        return Err(DestinationError::Malformed(format!(
            "bus name `{name}` may hold only letters, digits, `.`, `-`, `_` and `/`"
        )));
    }
    Ok(())
}

/// Checks `dest` against the deployment's allow-list of queue and bus ARNs
/// (`None`: no list, every queue and bus is allowed; HTTPS is never
/// affected). On AWS the list is the one the delivery role is granted on,
/// so a destination outside it could never be delivered to.
pub fn check_allowed(dest: &Destination, allowed: Option<&[String]>) -> Result<(), DestinationError> {
    match (dest.arn(), allowed) {
        (Some(arn), Some(list)) if !list.iter().any(|a| a == arn) => Err(DestinationError::NotAllowed(arn.into())),
        _ => Ok(()),
    }
}

/// The value of the delivery header `name` (case-insensitive), for the
/// request builders of both kinds.
pub(crate) fn header<'a>(headers: &'a [(&str, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_urls_pass_through_and_arns_are_read() {
        assert_eq!(parse(" https://a.example/x ").unwrap(), Destination::Https("https://a.example/x".into()));
        let q = parse("arn:aws:sqs:eu-west-1:123456789012:orders.fifo").unwrap();
        let Destination::Sqs(q) = q else { panic!("a queue") };
        assert!(q.fifo());
        assert_eq!(
            (q.region.as_str(), q.account.as_str(), q.name.as_str()),
            ("eu-west-1", "123456789012", "orders.fifo")
        );
        assert_eq!(DestinationKind::of("", true), DestinationKind::Pull);
        assert_eq!(DestinationKind::of("https://a.example/x", true), DestinationKind::Https);
        assert_eq!(DestinationKind::of("", false), DestinationKind::Https, "not pulled: never pull-only");
        let b = parse("arn:aws:events:us-east-1:123456789012:event-bus/crm").unwrap();
        assert_eq!(b.kind(), DestinationKind::EventBridge);
        let Destination::EventBridge(b) = b else { panic!("a bus") };
        assert_eq!(b.name, "crm");
    }

    #[test]
    fn malformed_arns_are_refused_saying_what_is_wrong() {
        for (bad, says) in [
            ("arn:aws:sns:us-east-1:123456789012:topic", "not a destination ARN"),
            ("arn:aws:sqs:us-east-1:123456789012", "not a destination ARN"),
            ("arn:aws:sqs:US-EAST-1:123456789012:q", "region"),
            ("arn:aws:sqs:evil.example/x:123456789012:q", "region"),
            ("arn:aws:sqs:us-east-1:1234:q", "12 digits"),
            ("arn:aws:sqs:us-east-1:123456789012:a/b", "queue name"),
            ("arn:aws:sqs:us-east-1:123456789012:.fifo", "queue name"),
            ("arn:aws:events:us-east-1:123456789012:rule/x", "event bus"),
            ("arn:aws:events:us-east-1:123456789012:event-bus/a b", "bus name"),
            ("arn:other:sqs:us-east-1:123456789012:q", "partition"),
        ] {
            let e = parse(bad).expect_err(bad).to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let long = format!("arn:aws:sqs:us-east-1:123456789012:{}", "q".repeat(81));
        assert!(parse(&long).is_err());
    }

    #[test]
    fn the_allow_list_holds_queues_and_buses_not_urls() {
        let q = parse("arn:aws:sqs:us-east-1:123456789012:q").unwrap();
        let list = vec!["arn:aws:sqs:us-east-1:123456789012:other".to_string()];
        assert!(check_allowed(&q, None).is_ok());
        assert!(matches!(check_allowed(&q, Some(&list)), Err(DestinationError::NotAllowed(_))));
        let list = vec![q.arn().unwrap().to_string()];
        assert!(check_allowed(&q, Some(&list)).is_ok());
        assert!(check_allowed(&parse("https://a.example").unwrap(), Some(&[])).is_ok());
    }
}
