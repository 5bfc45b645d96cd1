//! Tenancy: whose events a subscription, a partition or an index entry
//! belongs to. Below routing and ordering, which both key by it.

/// Whose events a subscription's patterns apply to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// Every event, with a tenant or without (a subscription without `tenant_id`).
    Global,
    /// The events of one tenant (a subscription with `tenant_id`).
    Tenant(String),
}

impl Scope {
    /// The scope of a subscription with this `tenant_id`.
    pub fn of(tenant_id: Option<&str>) -> Scope {
        tenant_id.map_or(Scope::Global, |t| Scope::Tenant(t.to_string()))
    }

    /// The scope as stored in an index: `g`, or `t<bytes>:<tenant>` (the
    /// tenant's length makes it self-delimiting, so no tenant id, whatever it
    /// holds, can be read as another scope and pattern).
    pub fn as_text(&self) -> String {
        match self {
            Scope::Global => "g".to_string(),
            Scope::Tenant(t) => format!("t{}:{t}", t.len()),
        }
    }
}
