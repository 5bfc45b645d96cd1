//! Finding stored events without their id (`GET /v1/events`, and the
//! replays that pick events by partition or time): the filters, what they
//! match, the order of a listing, and an event's delivery outcome. Pure:
//! the stores ([`crate::ports::EventStore::search`]) decide how to read
//! them through an index; every backend answers the same listing.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::envelope::Format;
use crate::event::EventRecord;
use crate::ids::EventId;
use crate::ordering::Partition;
use crate::time_range::TimeRange;

/// An event's delivery outcome so far. It only ever rises (none, then
/// failed, then dead-lettered), so a store writes it at most twice per
/// event and never on the healthy path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Some attempt of some saga of it failed.
    Failed,
    /// Some saga of it was dead-lettered.
    DeadLettered,
}

impl Outcome {
    /// The stored level: 1 failed, 2 dead-lettered (0 is none).
    pub fn level(self) -> u8 {
        match self {
            Outcome::Failed => 1,
            Outcome::DeadLettered => 2,
        }
    }

    /// The outcome of a stored level (`None` for 0 or unknown).
    pub fn from_level(level: u64) -> Option<Outcome> {
        match level {
            1 => Some(Outcome::Failed),
            2 => Some(Outcome::DeadLettered),
            _ => None,
        }
    }

    /// As the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Failed => "failed",
            Outcome::DeadLettered => "dead_lettered",
        }
    }
}

impl std::str::FromStr for Outcome {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "failed" => Ok(Outcome::Failed),
            "dead_lettered" => Ok(Outcome::DeadLettered),
            other => Err(format!("outcome must be `failed` or `dead_lettered`, not `{other}`")),
        }
    }
}

/// An event-type filter as subscriptions write patterns: one exact type, or
/// `prefix.*` (every type under `prefix.`, versioned ones included: a
/// search is not routing). `*` is no filter at all; a versioned wildcard
/// (`task.*.v2`) is refused.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TypeFilter {
    /// This type only.
    Exact(String),
    /// Types starting with this prefix, which ends with a `.`
    /// (`order.` for `order.*`).
    Prefix(String),
}

impl TypeFilter {
    /// Reads a pattern (checked as subscription patterns are:
    /// [`crate::subscription::validate_pattern`]); `Ok(None)` for `*`.
    ///
    /// # Errors
    ///
    /// Why the pattern is not one.
    pub fn parse(pattern: &str) -> Result<Option<TypeFilter>, String> {
        crate::subscription::validate_pattern(pattern)?;
        // A wildcard asking for a version (`task.*.v2`) is a routing
        // pattern; a search finds every type under a prefix, versions
        // included (`task.*` finds `task.succeeded.v2`).
        if crate::type_version::version_of(pattern).is_some_and(|(w, _)| w == "*" || w.ends_with(".*")) {
            return Err(format!(
                "'{pattern}' asks for a version, which only subscriptions do; search by the exact type or 'prefix.*'"
            ));
        }
        Ok(match pattern {
            "*" => None,
            p => Some(match p.strip_suffix('*') {
                Some(prefix) => TypeFilter::Prefix(prefix.to_string()),
                None => TypeFilter::Exact(p.to_string()),
            }),
        })
    }

    /// Does it match this type?
    pub fn matches(&self, event_type: &str) -> bool {
        match self {
            TypeFilter::Exact(t) => t == event_type,
            TypeFilter::Prefix(p) => event_type.len() > p.len() && event_type.starts_with(p.as_str()),
        }
    }

    /// The pattern as written (`order.created`, `order.*`).
    pub fn pattern(&self) -> String {
        match self {
            TypeFilter::Exact(t) => t.clone(),
            TypeFilter::Prefix(p) => format!("{p}*"),
        }
    }
}

/// The order of a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Order {
    /// Latest received first (the API): by `received_at` then id,
    /// descending; within a partition, by `partition_seq` descending.
    #[default]
    NewestFirst,
    /// In acceptance order (replays): by `received_at` then id, ascending;
    /// within a partition, by `partition_seq` ascending.
    OldestFirst,
}

/// Which events a search finds. Every field narrows; the default finds all.
/// A partition key selects one partition, which is per tenant: the
/// partition of `tenant_id` (none: the events without a tenant), as
/// ordered delivery numbers them ([`crate::ordering::Partition::of`]).
/// Such a listing is ordered by the partition's numbers, and holds only
/// numbered events.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventQuery {
    /// Type or type pattern.
    pub event_type: Option<TypeFilter>,
    /// Tenant (with a partition key: the partition's tenant scope).
    pub tenant_id: Option<crate::ids::TenantId>,
    /// Partition key (of `tenant_id`'s scope).
    pub partition_key: Option<String>,
    /// `received_at` range.
    pub received: TimeRange,
    /// At least this outcome (`Failed` also finds dead-lettered events).
    pub outcome: Option<Outcome>,
    /// The listing's order.
    pub order: Order,
}

impl EventQuery {
    /// The partition a partition-key query reads.
    pub fn partition(&self) -> Option<Partition> {
        self.partition_key.as_deref().map(|k| Partition::of(self.tenant_id.as_ref().map(|t| t.as_str()), k))
    }

    /// Whether the query reads a listing by time (every event's, or one
    /// tenant's): neither by partition key nor by outcome, which have
    /// listings of their own.
    pub fn lists_by_time(&self) -> bool {
        self.partition_key.is_none() && self.outcome.is_none()
    }

    /// Refuses a query that reads a listing by time when the deployment
    /// keeps none (`EVENT_LISTING` off, `listing` false): its events were
    /// stored without entries in it, so the listing would answer with
    /// nothing, not with the events.
    ///
    /// # Errors
    ///
    /// [`ListingOff`].
    pub fn check_listable(&self, listing: bool) -> Result<(), ListingOff> {
        if listing || !self.lists_by_time() {
            Ok(())
        } else {
            Err(ListingOff)
        }
    }

    /// Does an event (summary) match every filter?
    pub fn matches(&self, e: &EventSummary) -> bool {
        self.event_type.as_ref().is_none_or(|t| t.matches(&e.event_type))
            && match (&self.partition_key, &self.tenant_id) {
                (Some(k), t) => {
                    e.partition_key.as_ref() == Some(k)
                        && e.tenant_id.as_ref() == t.as_ref()
                        && e.partition_seq.is_some()
                }
                (None, Some(t)) => e.tenant_id.as_ref() == Some(t),
                (None, None) => true,
            }
            && self.received.contains(e.received_at)
            && self.outcome.is_none_or(|o| e.outcome.is_some_and(|got| got >= o))
    }

    /// A text naming every filter and the order: what a cursor of this
    /// listing is bound to (`hookline_api::cursor`).
    pub fn fingerprint(&self) -> String {
        let t = |v: Option<DateTime<Utc>>| v.map(|t| t.timestamp_micros().to_string()).unwrap_or_default();
        let order = match self.order {
            Order::NewestFirst => "desc",
            Order::OldestFirst => "asc",
        };
        serde_json::json!([
            self.event_type.as_ref().map(TypeFilter::pattern),
            self.tenant_id,
            self.partition_key,
            t(self.received.since),
            t(self.received.until),
            self.outcome.map(Outcome::as_str),
            order,
        ])
        .to_string()
    }
}

/// A listing by time or by tenant asked of a deployment that keeps none
/// (`EVENT_LISTING` off).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "this deployment does not list events by time or by tenant (EVENT_LISTING is off): \
     find an event by its id, or list by partition_key or by outcome"
)]
pub struct ListingOff;

/// What a listing shows of an event (no body: `GET /v1/events/{id}` has it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventSummary {
    /// The stored id.
    pub id: EventId,
    /// Its type.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Its tenant.
    pub tenant_id: Option<crate::ids::TenantId>,
    /// Its partition key.
    pub partition_key: Option<String>,
    /// The producer's sequence.
    pub sequence: Option<String>,
    /// Hookline's number in its partition.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub partition_seq: Option<u64>,
    /// When Hookline accepted it.
    pub received_at: DateTime<Utc>,
    /// When the producer says it happened.
    pub occurred_at: DateTime<Utc>,
    /// Its envelope format.
    pub format: Format,
    /// Its delivery outcome so far.
    pub outcome: Option<Outcome>,
}

impl EventSummary {
    /// The summary of a stored event with its outcome.
    pub fn of(e: &EventRecord, outcome: Option<Outcome>) -> EventSummary {
        EventSummary {
            id: e.id.clone(),
            event_type: e.event_type.clone(),
            tenant_id: e.tenant_id.clone(),
            partition_key: e.partition_key.clone(),
            sequence: e.sequence.clone(),
            partition_seq: e.partition_seq,
            received_at: e.received_at,
            occurred_at: e.occurred_at,
            format: e.format,
            outcome,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_filters_read_like_subscription_patterns() {
        assert_eq!(TypeFilter::parse("*").unwrap(), None);
        let p = TypeFilter::parse("order.*").unwrap().unwrap();
        assert_eq!(p, TypeFilter::Prefix("order.".into()));
        assert!(p.matches("order.created") && !p.matches("orders.created") && !p.matches("order."));
        assert_eq!(p.pattern(), "order.*");
        let e = TypeFilter::parse("order.created").unwrap().unwrap();
        assert!(e.matches("order.created") && !e.matches("order.created.v2"));
        assert!(TypeFilter::parse("order*").is_err());
        assert!(TypeFilter::parse("a b").is_err());
        assert!(TypeFilter::parse("").is_err());
        assert!(TypeFilter::parse("order.*.v2").unwrap_err().contains("asks for a version"));
        assert!(TypeFilter::parse("order.*").unwrap().unwrap().matches("order.created.v2"), "a search is not routing");
    }

    #[test]
    fn without_the_listing_only_partition_and_outcome_queries_are_listable() {
        let tenant = EventQuery { tenant_id: Some(crate::ids::TenantId::new("acme")), ..Default::default() };
        let typed = EventQuery { event_type: TypeFilter::parse("order.*").unwrap(), ..Default::default() };
        let partition = EventQuery { partition_key: Some("k".into()), ..tenant.clone() };
        let failed = EventQuery { outcome: Some(Outcome::Failed), ..tenant.clone() };
        for q in [&EventQuery::default(), &tenant, &typed, &partition, &failed] {
            assert_eq!(q.check_listable(true), Ok(()), "with the listing everything is: {q:?}");
        }
        for q in [&EventQuery::default(), &tenant, &typed] {
            assert_eq!(q.check_listable(false), Err(ListingOff), "{q:?}");
        }
        for q in [&partition, &failed] {
            assert_eq!(q.check_listable(false), Ok(()), "their own listings: {q:?}");
        }
        assert!(ListingOff.to_string().contains("EVENT_LISTING"), "the message names the setting");
    }

    #[test]
    fn outcomes_rise_and_failed_finds_dead_lettered() {
        assert!(Outcome::Failed < Outcome::DeadLettered);
        assert_eq!("dead_lettered".parse::<Outcome>(), Ok(Outcome::DeadLettered));
        assert!("dead".parse::<Outcome>().is_err());
        let now = Utc::now();
        let mut s = EventSummary {
            id: EventId::new("evt_1"),
            event_type: "order.created".into(),
            tenant_id: Some(crate::ids::TenantId::new("acme")),
            partition_key: Some("o:1".into()),
            sequence: None,
            partition_seq: Some(1),
            received_at: now,
            occurred_at: now,
            format: Format::Native,
            outcome: Some(Outcome::DeadLettered),
        };
        let q = |o| EventQuery { outcome: Some(o), ..Default::default() };
        assert!(q(Outcome::Failed).matches(&s) && q(Outcome::DeadLettered).matches(&s));
        s.outcome = Some(Outcome::Failed);
        assert!(q(Outcome::Failed).matches(&s) && !q(Outcome::DeadLettered).matches(&s));
        let by_key = EventQuery { partition_key: Some("o:1".into()), ..Default::default() };
        assert!(!by_key.matches(&s), "a partition key without tenant is the tenant-less partition");
        let by_key = EventQuery { tenant_id: Some(crate::ids::TenantId::new("acme")), ..by_key };
        assert!(by_key.matches(&s));
        assert_ne!(by_key.fingerprint(), EventQuery { order: Order::OldestFirst, ..by_key.clone() }.fingerprint());
    }
}
