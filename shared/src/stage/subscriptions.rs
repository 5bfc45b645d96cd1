//! Managing subscriptions: the writes an operator makes (create, change,
//! rotate the signing secret, delete), each with what must go with it on
//! both backends: the subscription cache invalidated, the audit record, and
//! for a change, the same change applied again when another writer (a
//! verification finishing, another change) stored a new version meanwhile,
//! and the rules of a change: a new callback URL, or a subscription enabled
//! again, must pass the handshake again before it gets deliveries. The API
//! parses and checks a request, then calls one of these.

use chrono::Utc;

use crate::audit::{Action, AuditRecord};
use crate::context::Hookline;
use crate::error::StoreError;
use crate::ids::SubscriptionId;
use crate::signing::Secret;
use crate::subscription::Subscription;

use super::{failing, ordering};

/// How many times a change or rotation is applied to a newly read version
/// before it gives up ([`ManageError::KeptChanging`]).
pub const UPDATE_TRIES: usize = 5;

/// Why a change to a subscription was not stored.
#[derive(Debug, thiserror::Error)]
pub enum ManageError<E> {
    /// No subscription with this id.
    #[error("subscription not found")]
    NotFound,
    /// Another writer stored a new version on every try.
    #[error("the subscription kept changing meanwhile; retry")]
    KeptChanging,
    /// The change refused the subscription it was applied to.
    #[error("the change was refused")]
    Refused(E),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl<E> ManageError<E> {
    /// The same error with the refusal mapped (the others carry none).
    pub fn map_refused<F>(self, f: impl FnOnce(E) -> F) -> ManageError<F> {
        match self {
            ManageError::NotFound => ManageError::NotFound,
            ManageError::KeptChanging => ManageError::KeptChanging,
            ManageError::Refused(e) => ManageError::Refused(f(e)),
            ManageError::Store(e) => ManageError::Store(e),
        }
    }
}

/// A change as stored.
#[derive(Debug)]
pub struct Changed {
    /// The subscription as stored after the change.
    pub subscription: Subscription,
    /// Its callback URL changed, or it was enabled again: the handshake is
    /// to be run (the caller decides whether inline or in the background).
    pub reverify: bool,
}

/// Stores a new subscription on behalf of `actor` and records it.
pub async fn create(h: &Hookline, sub: &Subscription, actor: &str) -> Result<(), StoreError> {
    h.stores.subscriptions.create(sub).await?;
    h.subscription_cache.invalidate().await;
    tracing::info!(subscription_id = %sub.id, "subscription created");
    h.audit(AuditRecord::new(Action::SubscriptionCreated, actor).subscription(&sub.id).tenant(sub.tenant_id.as_ref()))
        .await;
    Ok(())
}

/// Applies `apply` to the stored subscription `id` and stores it, on behalf
/// of `actor`: again on the new version if another writer stored one
/// meanwhile (so `apply` must be a function of the subscription it is
/// given). Records `subscription.updated` with the names of the fields that
/// changed, or `subscription.enabled` when it enables a disabled one (whose
/// failing run then starts afresh and `hookline.subscription.enabled` is
/// published; with `auto_requeue`, after Hookline disabled it, the dead
/// letters of its outage are requeued: [`super::auto_requeue`]).
pub async fn change<E>(
    h: &Hookline,
    id: &SubscriptionId,
    actor: &str,
    mut apply: impl FnMut(&mut Subscription) -> Result<(), E>,
) -> Result<Changed, ManageError<E>> {
    for _ in 0..UPDATE_TRIES {
        let mut sub = h.stores.subscriptions.get(id).await?.ok_or(ManageError::NotFound)?;
        let before = sub.clone();
        apply(&mut sub).map_err(ManageError::Refused)?;
        let mut reverify = false;
        if sub.callback_url != before.callback_url {
            sub.verified = false;
            sub.verification_error = None;
            reverify = true;
        }
        // Enabled again: the reason it was disabled goes, and the endpoint
        // must pass the handshake again before it gets deliveries.
        let enabling = sub.active && !before.active;
        if enabling {
            sub.disabled_reason = None;
            sub.disabled_at = None;
            sub.verification_error = None;
            // Pull-only: no endpoint to verify, it stays verified.
            sub.verified = sub.is_pull_only();
            reverify |= !sub.is_pull_only();
        }
        sub.version = before.version + 1;
        sub.updated_at = Utc::now();
        // Its health before the re-enable forgets the failing run: when an
        // automatic requeue's outage began.
        let health = if enabling && sub.auto_requeue && before.disabled_reason.is_some() {
            h.stores.health.get(id).await?
        } else {
            None
        };
        if h.stores.subscriptions.update(&sub, before.version).await? {
            h.subscription_cache.invalidate().await;
            let action = if enabling { Action::SubscriptionEnabled } else { Action::SubscriptionUpdated };
            let rec = AuditRecord::new(action, actor)
                .subscription(id)
                .tenant(sub.tenant_id.as_ref())
                .details(serde_json::json!({"changed": changed_fields(&before, &sub)}));
            h.audit(rec).await;
            if enabling {
                if let Err(e) = failing::enabled(h, &sub).await {
                    tracing::warn!(subscription_id = %id, error = %e, "re-enabled subscription: its failing run or event not stored");
                }
                super::auto_requeue::after_re_enabled(h, &before, &sub, health.as_ref()).await;
            }
            return Ok(Changed { subscription: sub, reverify });
        }
    }
    Err(ManageError::KeptChanging)
}

/// Rotates the signing secret of `id` on behalf of `actor`: a new secret
/// signs from now on, the old ones keep signing for `overlap`. Answers the
/// subscription as stored and the new secret (shown once, to the caller).
pub async fn rotate_secret(
    h: &Hookline,
    id: &SubscriptionId,
    actor: &str,
    overlap: chrono::Duration,
) -> Result<(Subscription, Secret), ManageError<std::convert::Infallible>> {
    for _ in 0..UPDATE_TRIES {
        let mut sub = h.stores.subscriptions.get(id).await?.ok_or(ManageError::NotFound)?;
        let version = sub.version;
        let secret = Secret::generate();
        sub.rotate_secret(secret.clone(), Utc::now(), overlap);
        sub.version += 1;
        sub.updated_at = Utc::now();
        if h.stores.subscriptions.update(&sub, version).await? {
            h.subscription_cache.invalidate().await;
            tracing::info!(subscription_id = %id, "signing secret rotated");
            let rec = AuditRecord::new(Action::SubscriptionSecretRotated, actor)
                .subscription(id)
                .tenant(sub.tenant_id.as_ref())
                .details(serde_json::json!({"overlap_seconds": overlap.num_seconds()}));
            h.audit(rec).await;
            return Ok((sub, secret));
        }
    }
    Err(ManageError::KeptChanging)
}

/// Deletes `id` on behalf of `actor`; false if there was none. Its blocked
/// lanes let go, so its waiting sagas end instead of waiting for good (a
/// failure there is left to the reconciler, which finds them).
pub async fn delete(h: &Hookline, id: &SubscriptionId, actor: &str) -> Result<bool, StoreError> {
    // Read first: the record of the deletion carries the tenant.
    let tenant = h.stores.subscriptions.get(id).await?.and_then(|s| s.tenant_id);
    if !h.stores.subscriptions.delete(id).await? {
        return Ok(false);
    }
    h.subscription_cache.invalidate().await;
    h.audit(AuditRecord::new(Action::SubscriptionDeleted, actor).subscription(id).tenant(tenant.as_ref())).await;
    if let Err(e) = ordering::release_deleted(h, id).await {
        tracing::error!(subscription_id = %id, error = %e, "a deleted subscription's blocked lanes were not all let go; the reconciler finds their waiting sagas");
    }
    Ok(true)
}

/// The names (never the values: headers may hold credentials) of the
/// fields a change made different, for the audit record.
fn changed_fields(before: &Subscription, after: &Subscription) -> Vec<String> {
    let (b, a) = (before.to_public_json(), after.to_public_json());
    let (Some(b), Some(a)) = (b.as_object(), a.as_object()) else { return Vec::new() };
    a.iter()
        .filter(|(k, v)| {
            !matches!(k.as_str(), "updated_at" | "verified" | "verification_error") && b.get(*k) != Some(*v)
        })
        .map(|(k, _)| k.clone())
        .collect()
}
