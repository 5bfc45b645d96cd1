//! Who may do what: the roles a credential carries, the actions the API's
//! routes perform, and the tenant a credential may be bound to. Pure: the
//! API resolves each request's [`Caller`] once (from a Hookline key, or an
//! IAM principal on AWS) and checks it here, in one place, before any
//! handler runs.

use crate::ids::TenantId;

/// What a credential may do. Ordered from least to most: each role may do
/// what the one before it may, and more (except [`Role::Producer`], which
/// may only post events).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Posts events; reads nothing.
    Producer,
    /// Reads subscriptions, events, deliveries, dead letters, jobs, the
    /// audit trail and metrics; changes nothing.
    Reader,
    /// A reader who also recovers: requeues and skips dead letters, replays
    /// events, skips a blocked lane, re-runs a verification.
    Operator,
    /// Everything: also creates, changes and deletes subscriptions, rotates
    /// their secrets, manages keys and (without a tenant) rebuilds indexes.
    Admin,
}

impl Role {
    /// Every role, least first.
    pub const ALL: [Role; 4] = [Role::Producer, Role::Reader, Role::Operator, Role::Admin];

    /// The role's name on the wire and in settings.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Producer => "producer",
            Role::Reader => "reader",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    /// The role named `s` (`producer`, `reader`, `operator`, `admin`).
    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Whether this role may perform `action` (tenant aside).
    pub fn allows(self, action: Action) -> bool {
        use Action::*;
        match self {
            Role::Admin => true,
            Role::Operator => matches!(action, Read | ReadMetrics | Recover),
            Role::Reader => matches!(action, Read | ReadMetrics),
            Role::Producer => matches!(action, PostEvents),
        }
    }

    /// Whether a caller with this role may hand out a key with `other`:
    /// never one that may do more than itself.
    pub fn may_grant(self, other: Role) -> bool {
        self == Role::Admin || self == other
    }
}

/// What a route does, as far as access is concerned. Every route of the
/// API names exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// `POST /v1/events`, `POST /v1/events/batch`.
    PostEvents,
    /// Every `GET` of a tenant's resources.
    Read,
    /// `GET /metrics`: the whole system's counters (no tenant-bound
    /// credential may read them).
    ReadMetrics,
    /// Requeue, skip, replay, skip a lane, re-run a verification.
    Recover,
    /// Create, change, delete a subscription; rotate its secret.
    ManageSubscriptions,
    /// Create, list, rotate, revoke keys (within the caller's tenant and
    /// role).
    ManageKeys,
    /// Rebuild an index over every tenant's data: global only.
    Rebuild,
}

impl Action {
    /// Whether a credential bound to a tenant may ever perform this action
    /// (on its own tenant's resources): not for what spans all tenants.
    pub fn open_to_tenants(self) -> bool {
        !matches!(self, Action::ReadMetrics | Action::Rebuild)
    }
}

/// The credential behind one request, once authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Who, as the audit trail records it (`key:<name>`, an IAM ARN).
    pub actor: String,
    /// What it may do.
    pub role: Role,
    /// The one tenant whose resources it sees and acts on; `None`: every
    /// tenant's, and resources without a tenant.
    pub tenant: Option<TenantId>,
}

/// Why a caller may not do something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// The role does not allow the action.
    #[error("a {role} key may not do this (needs {needs})")]
    Role {
        /// The caller's role.
        role: &'static str,
        /// The least role that may.
        needs: &'static str,
    },
    /// The action spans every tenant; the caller is bound to one.
    #[error("a key bound to a tenant may not do this: it acts on every tenant")]
    Global,
}

impl Caller {
    /// Whether this caller may perform `action` at all (before looking at
    /// whose resource it touches).
    ///
    /// # Errors
    ///
    /// [`Denied`] naming the role it needs, or that it spans every tenant.
    pub fn may(&self, action: Action) -> Result<(), Denied> {
        if !self.role.allows(action) {
            let needs = Role::ALL.into_iter().find(|r| r.allows(action)).unwrap_or(Role::Admin);
            return Err(Denied::Role { role: self.role.as_str(), needs: needs.as_str() });
        }
        if self.tenant.is_some() && !action.open_to_tenants() {
            return Err(Denied::Global);
        }
        Ok(())
    }

    /// Whether a resource of `tenant` (`None`: a resource without a tenant)
    /// is this caller's to see: always for an unbound caller; only its own
    /// tenant's for a bound one.
    pub fn sees(&self, tenant: Option<&TenantId>) -> bool {
        match &self.tenant {
            None => true,
            Some(mine) => tenant == Some(mine),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(role: Role, tenant: Option<&str>) -> Caller {
        Caller { actor: "key:t".into(), role, tenant: tenant.map(TenantId::new) }
    }

    #[test]
    fn roles_allow_what_the_table_says() {
        use Action::*;
        let all = [PostEvents, Read, ReadMetrics, Recover, ManageSubscriptions, ManageKeys, Rebuild];
        let table = |r: Role| all.into_iter().filter(|a| r.allows(*a)).collect::<Vec<_>>();
        assert_eq!(table(Role::Producer), vec![PostEvents]);
        assert_eq!(table(Role::Reader), vec![Read, ReadMetrics]);
        assert_eq!(table(Role::Operator), vec![Read, ReadMetrics, Recover]);
        assert_eq!(table(Role::Admin), all.to_vec());
        for r in Role::ALL {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
        assert_eq!(Role::parse("Admin"), None);
    }

    #[test]
    fn a_tenant_bound_caller_sees_only_its_tenant_and_nothing_global() {
        let acme = caller(Role::Admin, Some("acme"));
        assert!(acme.sees(Some(&TenantId::new("acme"))));
        assert!(!acme.sees(Some(&TenantId::new("globex"))));
        assert!(!acme.sees(None), "resources without a tenant are everyone's, not acme's");
        assert_eq!(acme.may(Action::Rebuild), Err(Denied::Global));
        assert_eq!(acme.may(Action::ReadMetrics), Err(Denied::Global));
        assert_eq!(acme.may(Action::ManageSubscriptions), Ok(()));
        let root = caller(Role::Admin, None);
        assert!(root.sees(None) && root.sees(Some(&TenantId::new("globex"))));
        assert_eq!(root.may(Action::Rebuild), Ok(()));
        let producer = caller(Role::Producer, None);
        assert_eq!(producer.may(Action::Read), Err(Denied::Role { role: "producer", needs: "reader" }));
        assert_eq!(
            caller(Role::Operator, None).may(Action::ManageSubscriptions),
            Err(Denied::Role { role: "operator", needs: "admin" })
        );
    }

    #[test]
    fn no_role_grants_more_than_itself() {
        assert!(Role::Admin.may_grant(Role::Operator));
        assert!(Role::Operator.may_grant(Role::Operator));
        assert!(!Role::Operator.may_grant(Role::Admin));
        assert!(!Role::Reader.may_grant(Role::Producer));
    }
}
