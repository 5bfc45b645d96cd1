//! Portal tokens: the credential of a subscriber portal link
//! (`POST /v1/portal-links`). Pure: minting and checking, nothing stored.
//!
//! A token names one tenant, when it stops working and a random id (so two
//! links minted in the same second differ, and the audit trail can name
//! one), and carries a MAC over those under the deployment's data key
//! ([`Keyring::mac`], purpose `portal-token`): every process and Lambda
//! container of one deployment holds the same data key, so any of them
//! checks a token another minted, and no store is read. The MAC is compared
//! in constant time. A token cannot be revoked one by one: it works until
//! it expires (7 days at most), or until the data key rotates (the old key
//! only opens what it sealed; it does not check MACs).
//!
//! Layout: `hlp1.<expiry, unix seconds>.<id, 16 hex>.<base64url(tenant)>.<base64url(MAC)>`.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Utc};
use rand::RngCore;

use crate::api_key::constant_time_eq;
use crate::envelope::MAX_ID_BYTES;
use crate::ids::TenantId;
use crate::keyring::Keyring;

/// What every portal token starts with (format version 1): how the API
/// tells a portal token from an API key before checking either.
pub const TOKEN_PREFIX: &str = "hlp1.";

/// How long a link works when its creator does not say: one hour.
pub const DEFAULT_LIFETIME_SECONDS: i64 = 3600;

/// The longest a link may work: seven days (it cannot be revoked early).
pub const MAX_LIFETIME_SECONDS: i64 = 7 * 86_400;

/// The longest token there can be (a tenant id of [`MAX_ID_BYTES`]): longer
/// input is refused before any decoding.
pub const MAX_TOKEN_BYTES: usize = TOKEN_PREFIX.len() + 20 + 1 + 16 + 1 + (MAX_ID_BYTES * 4).div_ceil(3) + 1 + 43;

/// The MAC's purpose, so no other MAC of the data key reads as a token's.
const PURPOSE: &str = "portal-token";

/// Why a token does not authenticate. The API says only which of the two
/// (never which part was wrong).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Genuine, but past its expiry.
    #[error("the portal token has expired")]
    Expired,
    /// Not a token this deployment minted: garbled, cut short, edited, too
    /// long, or minted under another data key.
    #[error("the portal token is invalid")]
    Invalid,
}

/// A checked token: what it grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortalGrant {
    /// The one tenant it shows.
    pub tenant: TenantId,
    /// When it stops working.
    pub expires_at: DateTime<Utc>,
    /// Its random id (16 hex digits): the audit trail's name for it.
    pub id: String,
}

impl PortalGrant {
    /// The actor the audit trail records for what its holder does:
    /// `portal:<tenant>:<id>`.
    pub fn actor(&self) -> String {
        format!("portal:{}:{}", self.tenant.as_str(), self.id)
    }
}

/// A new token for `tenant` that works until `expires_at`, and its grant.
pub fn mint(keyring: &Keyring, tenant: &TenantId, expires_at: DateTime<Utc>) -> (String, PortalGrant) {
    let mut raw = [0u8; 8];
    rand::rngs::OsRng.fill_bytes(&mut raw);
    let id: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    let exp = expires_at.timestamp();
    // Whole seconds: the grant says what the token says.
    let expires_at = DateTime::from_timestamp(exp, 0).unwrap_or(expires_at);
    let mac = mac(keyring, &exp.to_string(), &id, tenant.as_str());
    let token =
        format!("{TOKEN_PREFIX}{exp}.{id}.{}.{}", URL_SAFE_NO_PAD.encode(tenant.as_str()), URL_SAFE_NO_PAD.encode(mac));
    (token, PortalGrant { tenant: tenant.clone(), expires_at, id })
}

/// Whether `token` looks like a portal token (its prefix): such a bearer
/// credential is checked here and never as an API key.
pub fn is_token(token: &str) -> bool {
    token.starts_with(TOKEN_PREFIX)
}

/// The grant of `token`, checked against the data key at `now`.
///
/// # Errors
///
/// [`TokenError::Invalid`] for anything this deployment did not mint
/// (checked first: a forged token never learns whether it would have
/// expired), [`TokenError::Expired`] for a genuine one past its expiry.
pub fn verify(keyring: &Keyring, token: &str, now: DateTime<Utc>) -> Result<PortalGrant, TokenError> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(TokenError::Invalid);
    }
    let rest = token.strip_prefix(TOKEN_PREFIX).ok_or(TokenError::Invalid)?;
    let parts: Vec<&str> = rest.split('.').collect();
    let [exp, id, tenant, given] = parts.as_slice() else { return Err(TokenError::Invalid) };
    let digits = |s: &str, n: usize| s.len() <= n && !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(exp, 19) || id.len() != 16 || !id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
        return Err(TokenError::Invalid);
    }
    let tenant = URL_SAFE_NO_PAD.decode(tenant).map_err(|_| TokenError::Invalid)?;
    let tenant = String::from_utf8(tenant).map_err(|_| TokenError::Invalid)?;
    let given = URL_SAFE_NO_PAD.decode(given).map_err(|_| TokenError::Invalid)?;
    let expected = mac(keyring, exp, id, &tenant);
    if !constant_time_eq(&given, &expected) {
        return Err(TokenError::Invalid);
    }
    // Genuine from here on: minted with a valid tenant and expiry.
    let exp: i64 = exp.parse().map_err(|_| TokenError::Invalid)?;
    let expires_at = DateTime::from_timestamp(exp, 0).ok_or(TokenError::Invalid)?;
    if crate::envelope::check_id(&tenant).is_err() || tenant.is_empty() {
        return Err(TokenError::Invalid);
    }
    if now >= expires_at {
        return Err(TokenError::Expired);
    }
    Ok(PortalGrant { tenant: TenantId::new(tenant), expires_at, id: id.to_string() })
}

fn mac(keyring: &Keyring, exp: &str, id: &str, tenant: &str) -> [u8; 32] {
    keyring.mac(&[PURPOSE, exp, id, tenant])
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    fn ring() -> Keyring {
        Keyring::new("k1", [3; 32])
    }

    #[test]
    fn a_minted_token_verifies_in_another_process_of_the_deployment_until_it_expires() {
        let now = Utc::now();
        let acme = TenantId::new("acme/eu ü");
        let (token, grant) = mint(&ring(), &acme, now + Duration::hours(1));
        assert!(is_token(&token) && token.len() <= MAX_TOKEN_BYTES, "{token}");
        let other_process = Keyring::new("k1", [3; 32]);
        assert_eq!(verify(&other_process, &token, now), Ok(grant.clone()));
        assert_eq!(grant.tenant, acme);
        assert!(grant.actor().starts_with("portal:acme/eu ü:"));
        assert_eq!(verify(&ring(), &token, now + Duration::hours(1)), Err(TokenError::Expired));
        let (again, second) = mint(&ring(), &acme, now + Duration::hours(1));
        assert_ne!((again, second.id), (token, grant.id), "a fresh id each time");
    }

    #[test]
    fn forged_edited_and_garbled_tokens_are_invalid_and_never_expired() {
        let now = Utc::now();
        let (token, _) = mint(&ring(), &TenantId::new("acme"), now + Duration::hours(1));
        assert_eq!(verify(&Keyring::new("k1", [4; 32]), &token, now), Err(TokenError::Invalid), "another data key");
        let parts: Vec<&str> = token.split('.').collect();
        let swap_tenant =
            format!("{}.{}.{}.{}.{}", parts[0], parts[1], parts[2], URL_SAFE_NO_PAD.encode("globex"), parts[4]);
        assert_eq!(verify(&ring(), &swap_tenant, now), Err(TokenError::Invalid), "another tenant");
        let later: i64 = parts[1].parse::<i64>().unwrap() + 86_400;
        let extended = format!("{}.{later}.{}.{}.{}", parts[0], parts[2], parts[3], parts[4]);
        assert_eq!(verify(&ring(), &extended, now), Err(TokenError::Invalid), "a later expiry");
        // A forged token that would also have expired says invalid.
        assert_eq!(verify(&ring(), &extended, now + Duration::days(30)), Err(TokenError::Invalid));
        let long = format!("{token}{}", "A".repeat(MAX_TOKEN_BYTES));
        for bad in ["", "hlp1.", "hlp1.1.2.3.4", "hlp1.x.0123456789abcdef.YQ.AA", &token[..token.len() - 1], &long] {
            assert_eq!(verify(&ring(), bad, now), Err(TokenError::Invalid), "{bad:?}");
        }
        assert!(!is_token("secret-admin"));
    }

    #[test]
    fn the_longest_tenant_fits_the_bound() {
        let tenant = TenantId::new("é".repeat(MAX_ID_BYTES / 2));
        let now = Utc::now();
        let (token, _) = mint(&ring(), &tenant, now + Duration::seconds(MAX_LIFETIME_SECONDS));
        assert!(token.len() <= MAX_TOKEN_BYTES, "{} > {MAX_TOKEN_BYTES}", token.len());
        assert_eq!(verify(&ring(), &token, now).map(|g| g.tenant), Ok(tenant));
    }
}
