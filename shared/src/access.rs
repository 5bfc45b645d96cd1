//! Who may do what: the roles a credential carries, the actions the API's
//! routes perform, and the tenant a credential may be bound to. Pure: the
//! API resolves each request's [`Caller`] once (from a Hookline key, or an
//! IAM principal on AWS) and checks it here, in one place, before any
//! handler runs.

use crate::ids::TenantId;

/// What a credential may do. The key roles are ordered from least to most:
/// each may do what the one before it may, and more (except
/// [`Role::Producer`], which may only post events). [`Role::Portal`] stands
/// apart: no key holds it; a portal token ([`crate::portal`]) does, always
/// bound to one tenant.
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
    /// A tenant's subscriber portal (a portal link's token): reads its
    /// tenant's resources, manages its subscriptions (test events
    /// included) and recovers its dead letters; posts no events, reads no
    /// metrics, manages no keys and creates no portal links. Never stored
    /// (serde skips it), so no key can be created with it.
    #[serde(skip)]
    Portal,
    /// A subscriber's key, bound to one subscription
    /// ([`Caller::subscription`]): pulls that subscription's events
    /// ([`crate::pull`]) and nothing else.
    Subscriber,
}

impl Role {
    /// Every role a key can hold, least first.
    pub const ALL: [Role; 5] = [Role::Producer, Role::Reader, Role::Operator, Role::Admin, Role::Subscriber];

    /// Every role a caller can have: the key roles, then the portal's (the
    /// columns of the role table).
    pub const EVERY: [Role; 6] =
        [Role::Producer, Role::Reader, Role::Operator, Role::Admin, Role::Portal, Role::Subscriber];

    /// The role's name on the wire and in settings.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Producer => "producer",
            Role::Reader => "reader",
            Role::Operator => "operator",
            Role::Admin => "admin",
            Role::Portal => "portal",
            Role::Subscriber => "subscriber",
        }
    }

    /// The key role named `s` (`producer`, `reader`, `operator`, `admin`;
    /// never `portal`, which no key holds).
    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Whether this role may perform `action` (tenant aside).
    pub fn allows(self, action: Action) -> bool {
        use Action::*;
        match self {
            Role::Admin => true,
            Role::Operator => matches!(action, Identify | Read | ReadMetrics | Recover | Pull),
            Role::Reader => matches!(action, Identify | Read | ReadMetrics | Pull),
            Role::Producer => matches!(action, Identify | PostEvents),
            Role::Portal => matches!(action, Identify | Read | Recover | ManageSubscriptions),
            Role::Subscriber => matches!(action, Identify | Pull),
        }
    }

    /// Whether a caller with this role may hand out a key with `other`:
    /// never one that may do more than itself.
    pub fn may_grant(self, other: Role) -> bool {
        other != Role::Portal && (self == Role::Admin || self == other)
    }
}

/// What a route does, as far as access is concerned. Every route of the
/// API names exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// `GET /v1/me`: who the caller is and what it may do (every role).
    Identify,
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
    /// role); create portal links (`POST /v1/portal-links`).
    ManageKeys,
    /// Rebuild an index over every tenant's data: global only.
    Rebuild,
    /// Register event types in the event catalog (`POST /v1/event-types`),
    /// which is deployment-wide: global only.
    ManageCatalog,
    /// `GET /v1/subscriptions/{id}/events`: pull a subscription's events
    /// (a subscriber key: only its own subscription's).
    Pull,
}

impl Action {
    /// Every action, in the order of this enum.
    pub const ALL: [Action; 10] = [
        Action::Identify,
        Action::PostEvents,
        Action::Read,
        Action::ReadMetrics,
        Action::Recover,
        Action::ManageSubscriptions,
        Action::ManageKeys,
        Action::Rebuild,
        Action::ManageCatalog,
        Action::Pull,
    ];

    /// The action's name on the wire (`GET /v1/me`): snake case.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Identify => "identify",
            Action::PostEvents => "post_events",
            Action::Read => "read",
            Action::ReadMetrics => "read_metrics",
            Action::Recover => "recover",
            Action::ManageSubscriptions => "manage_subscriptions",
            Action::ManageKeys => "manage_keys",
            Action::Rebuild => "rebuild",
            Action::ManageCatalog => "manage_catalog",
            Action::Pull => "pull",
        }
    }

    /// Whether a credential bound to a tenant may ever perform this action
    /// (on its own tenant's resources): not for what spans all tenants.
    pub fn open_to_tenants(self) -> bool {
        !matches!(self, Action::ReadMetrics | Action::Rebuild | Action::ManageCatalog)
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
    /// A subscriber key's one subscription: the only one it may pull;
    /// `None` for every other caller.
    pub subscription: Option<crate::ids::SubscriptionId>,
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
    /// A portal token's holder may not do this (keys, portal links,
    /// metrics, posting events, rebuilds).
    #[error("a portal link may not do this")]
    Portal,
}

impl Caller {
    /// What this caller may do, in [`Action::ALL`]'s order (`GET /v1/me`):
    /// what its role allows and, when bound to a tenant, what is open to
    /// tenants.
    pub fn actions(&self) -> Vec<Action> {
        Action::ALL.into_iter().filter(|a| self.may(*a).is_ok()).collect()
    }
}

impl Caller {
    /// Whether this caller may perform `action` at all (before looking at
    /// whose resource it touches).
    ///
    /// # Errors
    ///
    /// [`Denied`] naming the role it needs, or that it spans every tenant.
    pub fn may(&self, action: Action) -> Result<(), Denied> {
        // A portal caller is bound to its tenant by construction; one that
        // is not (a bug) may do nothing.
        if self.role == Role::Portal && self.tenant.is_none() {
            return Err(Denied::Global);
        }
        if !self.role.allows(action) {
            let needs = Role::ALL.into_iter().find(|r| r.allows(action)).unwrap_or(Role::Admin);
            if self.role == Role::Portal {
                return Err(Denied::Portal);
            }
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
        Caller { actor: "key:t".into(), role, tenant: tenant.map(TenantId::new), subscription: None }
    }

    #[test]
    fn roles_allow_what_the_table_says() {
        use Action::*;
        let all = Action::ALL;
        let table = |r: Role| all.into_iter().filter(|a| r.allows(*a)).collect::<Vec<_>>();
        assert_eq!(table(Role::Producer), vec![Identify, PostEvents]);
        assert_eq!(table(Role::Reader), vec![Identify, Read, ReadMetrics, Pull]);
        assert_eq!(table(Role::Operator), vec![Identify, Read, ReadMetrics, Recover, Pull]);
        assert_eq!(table(Role::Admin), all.to_vec());
        assert_eq!(table(Role::Portal), vec![Identify, Read, Recover, ManageSubscriptions]);
        assert_eq!(table(Role::Subscriber), vec![Identify, Pull], "a subscriber key pulls, and only that");
        for r in Role::ALL {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
        assert_eq!(Role::parse("Admin"), None);
        assert_eq!(Role::parse("portal"), None, "no key holds the portal's role");
        let names: Vec<&str> = all.iter().map(|a| a.as_str()).collect();
        assert_eq!(names.len(), names.iter().collect::<std::collections::HashSet<_>>().len());
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
        assert!(!Role::Admin.may_grant(Role::Portal) && !Role::Portal.may_grant(Role::Portal));
    }

    #[test]
    fn a_portal_caller_acts_within_its_tenant_and_never_on_keys_metrics_or_events() {
        use Action::*;
        let portal = caller(Role::Portal, Some("acme"));
        assert_eq!(portal.actions(), vec![Identify, Read, Recover, ManageSubscriptions]);
        for a in [PostEvents, ReadMetrics, ManageKeys, Rebuild] {
            assert_eq!(portal.may(a), Err(Denied::Portal), "{a:?}");
        }
        assert_eq!(caller(Role::Portal, None).may(Read), Err(Denied::Global), "an unbound portal may do nothing");
        assert!(serde_json::from_str::<Role>("\"portal\"").is_err(), "never read from a store");
        assert_eq!(caller(Role::Reader, Some("acme")).actions(), vec![Identify, Read, Pull]);
    }
}
