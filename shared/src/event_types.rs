//! Event types seen at ingest: what the portal's type picker offers
//! (`GET /v1/event-types`). Each accepted producer event's type is recorded
//! for its tenant and for the listing across tenants ([`TypeScope`]), at
//! most once per (scope, type) per process ([`SeenTypes`]): the first time
//! a process sees a pair it makes one conditional insert
//! ([`crate::ports::EventTypeStore::record`], from
//! [`crate::stage::ingest`]), and never reads anything per event. Operational (`hookline.…`) and test events are not recorded.
//!
//! Rows are kept for as long as the deployment (one per tenant and type:
//! small), and a failure to record one is logged, never returned: the
//! event is already stored, and the next process to see the type records
//! it.

use std::collections::HashSet;
use std::sync::Mutex;

use chrono::{DateTime, Utc};

use crate::event::EventRecord;
use crate::ids::TenantId;

/// How many (scope, type) pairs one process remembers; past it the memory
/// starts over (a pair seen again is inserted again, conditionally: no
/// change, one write).
pub const MAX_REMEMBERED: usize = 10_000;

/// Whose listing a row belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TypeScope {
    /// The types of one tenant's events.
    Tenant(TenantId),
    /// Every type seen, with a tenant or without (an unbound caller's
    /// listing without `tenant_id`).
    All,
}

impl TypeScope {
    /// As stored (a key): `a`, or `t<bytes>:<tenant>` (self-delimiting, as
    /// [`crate::tenant::Scope::as_text`]).
    pub fn as_text(&self) -> String {
        match self {
            TypeScope::All => "a".to_string(),
            TypeScope::Tenant(t) => format!("t{}:{}", t.as_str().len(), t.as_str()),
        }
    }

    /// The scope of a stored key ([`Self::as_text`]).
    pub fn from_text(s: &str) -> Option<TypeScope> {
        if s == "a" {
            return Some(TypeScope::All);
        }
        let (len, tenant) = s.strip_prefix('t')?.split_once(':')?;
        (len.parse::<usize>().ok()? == tenant.len()).then(|| TypeScope::Tenant(TenantId::new(tenant)))
    }
}

/// One row: a type seen in a scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenType {
    /// Whose listing.
    pub scope: TypeScope,
    /// The type.
    pub event_type: String,
    /// When the process that inserted the row first saw it.
    pub first_seen_at: DateTime<Utc>,
}

/// The rows an event adds: its tenant's and the listing across tenants';
/// none for an operational or test event.
pub fn rows_of(e: &EventRecord, now: DateTime<Utc>) -> Vec<SeenType> {
    if crate::routing::is_operational(&e.event_type) || e.target.is_some() {
        return Vec::new();
    }
    let mut rows = vec![SeenType { scope: TypeScope::All, event_type: e.event_type.clone(), first_seen_at: now }];
    if let Some(t) = &e.tenant_id {
        rows.push(SeenType {
            scope: TypeScope::Tenant(t.clone()),
            event_type: e.event_type.clone(),
            first_seen_at: now,
        });
    }
    rows
}

/// The (scope, type) pairs this process has recorded (or found recorded).
#[derive(Debug, Default)]
pub struct SeenTypes {
    seen: Mutex<HashSet<(TypeScope, String)>>,
}

impl SeenTypes {
    /// Of `rows`, those this process has not recorded yet (each once).
    pub fn unseen(&self, rows: Vec<SeenType>) -> Vec<SeenType> {
        let seen = self.seen.lock().expect("seen types lock");
        let mut out: Vec<SeenType> = Vec::new();
        for r in rows {
            let fresh = !seen.contains(&(r.scope.clone(), r.event_type.clone()))
                && !out.iter().any(|o| o.scope == r.scope && o.event_type == r.event_type);
            if fresh {
                out.push(r);
            }
        }
        out
    }

    /// Remembers `rows` as recorded.
    pub fn remember(&self, rows: &[SeenType]) {
        let mut seen = self.seen.lock().expect("seen types lock");
        if seen.len() + rows.len() > MAX_REMEMBERED {
            seen.clear();
        }
        seen.extend(rows.iter().map(|r| (r.scope.clone(), r.event_type.clone())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(t: &str, tenant: Option<&str>) -> EventRecord {
        let body = match tenant {
            Some(tn) => format!(r#"{{"type":"{t}","tenant_id":"{tn}","data":{{}}}}"#),
            None => format!(r#"{{"type":"{t}","data":{{}}}}"#),
        };
        let n = crate::envelope::normalize(body.as_bytes(), None).unwrap();
        EventRecord::from_normalized(n, Utc::now(), chrono::Duration::days(1))
    }

    #[test]
    fn an_event_adds_its_tenants_row_and_the_all_row_once_per_process() {
        let now = Utc::now();
        let seen = SeenTypes::default();
        let rows = rows_of(&event("order.created", Some("acme")), now);
        let scopes: Vec<_> = rows.iter().map(|r| r.scope.clone()).collect();
        assert_eq!(scopes, [TypeScope::All, TypeScope::Tenant(TenantId::new("acme"))]);
        assert_eq!(rows_of(&event("order.created", None), now).len(), 1);
        let twice = [rows.clone(), rows.clone()].concat();
        assert_eq!(seen.unseen(twice).len(), 2, "a pair once per call");
        seen.remember(&rows);
        assert!(seen.unseen(rows).is_empty(), "then never again in this process");
        let other = rows_of(&event("order.created", Some("globex")), now);
        assert_eq!(seen.unseen(other).len(), 1, "globex's row; the all row is known");
    }

    #[test]
    fn scopes_round_trip_and_cannot_be_confused() {
        for s in [TypeScope::All, TypeScope::Tenant(TenantId::new("a")), TypeScope::Tenant(TenantId::new("t1:x"))] {
            assert_eq!(TypeScope::from_text(&s.as_text()), Some(s));
        }
        assert_eq!(TypeScope::from_text("t3:ab"), None);
        assert_ne!(TypeScope::Tenant(TenantId::new("a")).as_text(), TypeScope::All.as_text());
    }
}
