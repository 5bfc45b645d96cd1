//! Which stored fields are secrets, and how a record holding them is
//! sealed at rest: a subscription's signing secrets (the current one and
//! the rotated-out ones still signing) and its custom header values (an
//! `Authorization` value is a credential to the subscriber's endpoint).
//!
//! The stores call these at their boundary: the domain types stay the
//! clear values in memory, and a store writes and reads the record text
//! these functions make, with the [`Keyring`] it was given. Each value is
//! sealed for a context naming its record (`signing-secret:<id>`,
//! `header:<id>:<name>`), so a sealed value copied onto another
//! subscription does not open there. Records stored before sealing existed
//! still open (their clear values are read as they are) and are sealed on
//! their next write or by [`crate::ports::SubscriptionStore::reseal_page`].

use serde_json::Value;

use crate::error::StoreError;
use crate::ids::SubscriptionId;
use crate::keyring::Keyring;
use crate::subscription::Subscription;

/// The context a subscription's signing secrets are sealed for.
pub fn secret_context(id: &SubscriptionId) -> String {
    format!("signing-secret:{id}")
}

/// The context one of a subscription's custom header values is sealed for
/// (header names compare without case).
pub fn header_context(id: &SubscriptionId, name: &str) -> String {
    format!("header:{id}:{}", name.to_ascii_lowercase())
}

/// A stored subscription opened: the record, and whether it held a secret
/// in clear (stored before sealing existed, to be sealed again).
#[derive(Debug, Clone, PartialEq)]
pub struct Opened {
    /// The subscription with its secrets in clear.
    pub subscription: Subscription,
    /// Whether any secret was stored in clear.
    pub clear: bool,
}

/// Visits every secret string of a subscription's JSON form: each signing
/// key's `secret`, each `headers` value, with the context it is sealed for.
fn each_secret(
    v: &mut Value,
    id: &SubscriptionId,
    mut f: impl FnMut(&mut String, &str) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    if let Some(keys) = v.get_mut("signing_keys").and_then(Value::as_array_mut) {
        let ctx = secret_context(id);
        for k in keys {
            if let Some(Value::String(s)) = k.get_mut("secret") {
                f(s, &ctx)?;
            }
        }
    }
    if let Some(headers) = v.get_mut("headers").and_then(Value::as_object_mut) {
        for (name, value) in headers.iter_mut() {
            if let Value::String(s) = value {
                f(s, &header_context(id, name))?;
            }
        }
    }
    Ok(())
}

/// The stored text (JSON) of `sub` with every secret sealed by `keyring`.
pub fn seal_subscription(sub: &Subscription, keyring: &Keyring) -> String {
    let mut v = serde_json::to_value(sub).expect("subscriptions serialize");
    each_secret(&mut v, &sub.id, |s, ctx| {
        *s = keyring.seal(s.as_bytes(), ctx);
        Ok(())
    })
    .expect("sealing does not fail");
    v.to_string()
}

/// The subscription a stored text holds, its secrets opened with
/// `keyring`; clear secrets (records from before sealing) are read as
/// they are, and reported in [`Opened::clear`].
///
/// # Errors
///
/// [`StoreError::Corrupt`]: not a subscription, or a sealed value that does
/// not open (another data key, tampered with, moved from another record).
/// The error names the subscription, never a value.
pub fn open_subscription(text: &str, keyring: &Keyring) -> Result<Opened, StoreError> {
    let corrupt = |e: &dyn std::fmt::Display| StoreError::Corrupt(e.to_string());
    let mut v: Value = serde_json::from_str(text).map_err(|e| corrupt(&e))?;
    let id = SubscriptionId::new(
        v.get("id").and_then(Value::as_str).ok_or_else(|| corrupt(&"a subscription without an id"))?,
    );
    let mut clear = false;
    each_secret(&mut v, &id, |s, ctx| {
        if !Keyring::is_sealed(s) {
            clear = true;
            return Ok(());
        }
        let opened = keyring.open(s, ctx).map_err(|e| corrupt(&format!("subscription {id}: {e}")))?;
        *s = String::from_utf8(opened)
            .map_err(|_| corrupt(&format!("subscription {id}: a sealed value is not text")))?;
        Ok(())
    })?;
    let subscription = serde_json::from_value(v).map_err(|e| corrupt(&e))?;
    Ok(Opened { subscription, clear })
}

/// Subscriptions [`crate::ports::SubscriptionStore::reseal_page`] examines per call.
pub const RESEAL_PAGE: usize = 100;

/// A bounded pass of [`crate::ports::SubscriptionStore::reseal_page`]: at
/// most `max_pages` pages of [`RESEAL_PAGE`] from `after`, one page in
/// memory at a time. Answers how many were sealed and where to go on
/// (`None`: every subscription was examined).
///
/// # Errors
///
/// The store's, with nothing of the failed page written.
pub async fn reseal_pass(
    store: &dyn crate::ports::SubscriptionStore,
    mut after: Option<SubscriptionId>,
    max_pages: usize,
) -> Result<(u64, Option<SubscriptionId>), StoreError> {
    let mut resealed = 0;
    for _ in 0..max_pages {
        let page = store.reseal_page(after.as_ref(), RESEAL_PAGE).await?;
        resealed += page.resealed;
        after = page.next_after;
        if after.is_none() {
            break;
        }
    }
    Ok((resealed, after))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signing::Secret;
    use crate::subscription::SigningKey;

    fn sub() -> Subscription {
        let mut s = crate::testkit::subscription();
        s.id = SubscriptionId::new("sub_1");
        s.signing_keys = vec![SigningKey { secret: Secret::generate(), expires_at: None }];
        s.rotate_secret(Secret::generate(), chrono::Utc::now(), chrono::Duration::hours(1));
        s.headers.insert("Authorization".into(), "Bearer very-secret-token".into());
        s
    }

    #[test]
    fn no_secret_is_stored_in_clear_and_every_one_opens() {
        let (k, s) = (Keyring::ephemeral(), sub());
        let text = seal_subscription(&s, &k);
        for key in &s.signing_keys {
            assert!(!text.contains(key.secret.expose()), "{text}");
            assert!(!text.contains(&key.secret.expose()["whsec_".len()..]));
        }
        assert!(!text.contains("very-secret-token"));
        assert!(text.contains("Authorization"), "names stay readable");
        let opened = open_subscription(&text, &k).unwrap();
        assert_eq!(opened, Opened { subscription: s, clear: false });
    }

    #[test]
    fn records_from_before_sealing_open_and_say_so() {
        let (k, s) = (Keyring::ephemeral(), sub());
        let clear = serde_json::to_string(&s).unwrap();
        assert_eq!(open_subscription(&clear, &k).unwrap(), Opened { subscription: s, clear: true });
    }

    #[test]
    fn a_sealed_value_moved_to_another_record_or_another_key_does_not_open() {
        let (k, s) = (Keyring::ephemeral(), sub());
        let text = seal_subscription(&s, &k);
        let moved = text.replace("\"id\":\"sub_1\"", "\"id\":\"sub_2\"");
        assert_ne!(moved, text);
        let e = open_subscription(&moved, &k).unwrap_err();
        assert!(matches!(e, StoreError::Corrupt(ref m) if m.contains("sub_2")), "{e}");
        assert!(open_subscription(&text, &Keyring::ephemeral()).is_err());
        assert!(open_subscription("{}", &k).is_err());
    }
}
