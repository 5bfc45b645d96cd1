//! Tenant scoping, in one place: what a tenant-bound caller
//! ([`Caller::tenant`]) may see and act on. The routing layer
//! ([`super::Api::handle`]) resolves every resource a path names through
//! [`Api::visible`] before the handler runs; handlers call the same
//! functions for the ids a body names ([`Api::visible_subscription`],
//! [`Api::visible_event`]) and [`tenant_filter`] for a `tenant_id` they
//! read (a listing's filter, a new subscription's tenant, a replay's).
//!
//! The rules: a bound caller's listings are forced to its tenant (another
//! tenant named is a `403` naming the field); a resource of another tenant,
//! or of none (global), is a `404` with nothing of it in the body (not even
//! the id asked for), exactly as one that does not exist; an unbound caller
//! sees everything.

use super::error::ErrorCode;
use shared::access::Caller;
use shared::ids::{DeadLetterId, EventId, SubscriptionId, TenantId};
use shared::subscription::Subscription;

use super::routes::Resource;
use super::{Api, ApiError};

/// `403 forbidden` naming `field`: it names a tenant the caller is not
/// bound to.
pub fn other_tenant(field: &str) -> ApiError {
    ApiError::new(ErrorCode::Forbidden, format!("`{field}` must name the tenant this key is bound to (or be left out)"))
        .on(field)
}

/// The tenant a request acts within, from the `tenant_id` it names (in
/// `field`): for an unbound caller, what it names; for a bound one, its own
/// tenant, whether named or not.
///
/// # Errors
///
/// `403` naming `field` when a bound caller names another tenant.
pub fn tenant_filter(caller: &Caller, named: Option<TenantId>, field: &str) -> Result<Option<TenantId>, ApiError> {
    match (&caller.tenant, named) {
        (None, named) => Ok(named),
        (Some(mine), Some(t)) if &t != mine => Err(other_tenant(field)),
        (Some(mine), _) => Ok(Some(mine.clone())),
    }
}

/// The `404` for what a tenant-bound caller may not see, or that does not
/// exist: the same answer for both, without the id.
fn hidden(noun: &str) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no such {noun} for this key"))
}

impl Api {
    /// Whether the resource `id` of `kind` exists and is the caller's to
    /// see; every route naming a resource in its path passes here first.
    /// An unbound caller is not checked (the handler finds what is not
    /// there); a bound one reads the resource's tenant (one read, by key),
    /// and a key bound to one subscription sees no other.
    ///
    /// # Errors
    ///
    /// `404` for a missing resource or another tenant's (or a global one).
    pub(super) async fn visible(&self, caller: &Caller, kind: Resource, id: &str) -> Result<(), ApiError> {
        // Tests reach the API's answer to a storage failure (`503
        // unavailable`) through this failpoint (`api.store@<id>`).
        if self.hookline.failpoints.fails("api.store", id) {
            return Err(shared::error::StoreError::Throttled {
                message: format!("failpoint api.store@{id}"),
                source: "injected".into(),
            }
            .into());
        }
        // A key bound to one subscription (a subscriber's) sees that one
        // only: any other is as if it did not exist.
        if let (Some(own), Resource::Subscription) = (&caller.subscription, kind) {
            if own.as_str() != id {
                return Err(hidden(kind.noun()));
            }
        }
        if caller.tenant.is_none() {
            return Ok(());
        }
        let stores = &self.hookline.stores;
        let tenant = match kind {
            Resource::Event => stores.events.get(&EventId::new(id)).await?.map(|e| e.tenant_id),
            Resource::Subscription => stores.subscriptions.get(&SubscriptionId::new(id)).await?.map(|s| s.tenant_id),
            Resource::DeadLetter => stores.dead_letters.get(&DeadLetterId::new(id)).await?.map(|d| d.tenant_id),
            Resource::Job => stores.jobs.get(id).await?.map(|j| j.tenant_id),
            Resource::Key => stores.keys.get(&shared::ids::ApiKeyId::new(id)).await?.map(|k| k.tenant),
        };
        match tenant {
            Some(t) if caller.sees(t.as_ref()) => Ok(()),
            _ => Err(hidden(kind.noun())),
        }
    }

    /// The subscription `id` a body names, if it is the caller's to see
    /// (any, for an unbound caller).
    ///
    /// # Errors
    ///
    /// `404` naming `field` otherwise.
    pub(super) async fn visible_subscription(
        &self,
        caller: &Caller,
        id: &SubscriptionId,
        field: &str,
    ) -> Result<Subscription, ApiError> {
        match self.hookline.stores.subscriptions.get(id).await? {
            Some(s) if caller.sees(s.tenant_id.as_ref()) => Ok(s),
            _ => Err(hidden("subscription").on(field)),
        }
    }

    /// Whether the event `id` a body names is the caller's to see.
    ///
    /// # Errors
    ///
    /// `404` naming `field` for a missing event or another tenant's.
    pub(super) async fn visible_event(&self, caller: &Caller, id: &EventId, field: &str) -> Result<(), ApiError> {
        self.visible(caller, Resource::Event, id.as_str()).await.map_err(|e| e.on(field))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::access::Role;

    #[test]
    fn a_bound_caller_is_held_to_its_tenant() {
        let acme = Caller {
            actor: "key:a".into(),
            role: Role::Admin,
            tenant: Some(TenantId::new("acme")),
            subscription: None,
        };
        let root = Caller { tenant: None, ..acme.clone() };
        let t = |s: &str| Some(TenantId::new(s));
        assert_eq!(tenant_filter(&acme, None, "tenant_id").unwrap(), t("acme"));
        assert_eq!(tenant_filter(&acme, t("acme"), "tenant_id").unwrap(), t("acme"));
        let e = tenant_filter(&acme, t("globex"), "filter.tenant_id").unwrap_err();
        assert_eq!((e.status(), e.field.as_deref()), (403, Some("filter.tenant_id")));
        assert_eq!(tenant_filter(&root, t("globex"), "tenant_id").unwrap(), t("globex"));
        assert_eq!(tenant_filter(&root, None, "tenant_id").unwrap(), None);
    }
}
