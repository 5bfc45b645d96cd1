//! `hookline keys` and `hookline portal-link`: the credentials the CLI
//! hands out, on both backends.

use super::{borrow, hookline, listed, OpsTarget};

/// `hookline keys`: create (the secret printed once; on AWS a grant for a
/// principal), list and show without secrets, rotate (a secret key; a
/// grant has none: 409), revoke; bad input exit 2, a duplicate 4, an
/// unknown id 3.
pub async fn ops_keys<P: OpsTarget>(p: &mut P) {
    let owned = p.ops_env().await;
    let env = borrow(&owned);
    let aws = P::OPS_ACTOR.starts_with("arn:");
    let tenant = crate::pipeline::unique_name("acme");
    let name = crate::pipeline::unique_name("ci");
    let principal = format!("arn:aws:iam::123456789012:user/{name}");
    let mut create = vec!["keys", "create", "--name", &name, "--role", "producer", "--tenant", &tenant];
    if aws {
        create.extend(["--principal", &principal]);
    }
    let made = hookline(&create, &env);
    made.ok();
    let key = made.json();
    let id = key["id"].as_str().expect("an id").to_string();
    assert_eq!((key["role"].as_str(), key["tenant_id"].as_str()), (Some("producer"), Some(tenant.as_str())), "{key}");
    let secret = key["secret"].as_str().map(str::to_string);
    assert_eq!(secret.is_some(), !aws, "a secret on serve, none for a grant: {key}");

    let again = hookline(&create, &env);
    assert_eq!(again.code, 4, "a duplicate name: {}", again.err);
    let bad = hookline(&["keys", "create", "--name", "x", "--role", "root"], &env);
    assert_eq!(bad.code, 2, "{}", bad.err);
    assert!(bad.err.contains("role"), "{}", bad.err);

    let listed = listed(&["keys", "list", "--tenant", &tenant], &env, 1).await;
    assert_eq!(listed[0]["id"], id.as_str(), "{listed:?}");
    assert!(listed[0].get("secret").is_none(), "{listed:?}");
    let shown = hookline(&["keys", "show", &id], &env);
    shown.ok();
    assert!(shown.json().get("secret").is_none(), "{}", shown.out);
    if let Some(s) = &secret {
        assert!(!shown.out.contains(s.as_str()), "never shown again");
    }
    assert_eq!(hookline(&["keys", "show", "key_nothing"], &env).code, 3);

    let rotated = hookline(&["keys", "rotate", &id, "--overlap-seconds", "0"], &env);
    if aws {
        assert_eq!(rotated.code, 4, "a grant has no secret to rotate: {}", rotated.err);
    } else {
        rotated.ok();
        let new = rotated.json()["secret"].as_str().expect("a new secret").to_string();
        assert_ne!(Some(&new), secret.as_ref());
    }
    let revoked = hookline(&["keys", "revoke", &id], &env);
    revoked.ok();
    assert_eq!(revoked.json()["state"], "revoked", "{}", revoked.out);
}

/// `hookline portal-link`: the whole link (the API's base joined to the
/// relative `url`), its tenant and expiry; a bad expiry is exit 2 naming
/// it. On `hookline serve` the token is a credential the CLI can use: its
/// tenant's subscriptions only.
pub async fn ops_portal_link<P: OpsTarget>(p: &mut P) {
    let owned = p.ops_env().await;
    let env = borrow(&owned);
    let base = owned.iter().find(|(k, _)| *k == "HOOKLINE_URL").map(|(_, v)| v.trim_end_matches('/').to_string());
    let base = base.expect("HOOKLINE_URL");
    let tenant = crate::pipeline::unique_name("portal");
    let run = hookline(&["portal-link", "--tenant", &tenant, "--expires-in-seconds", "86400"], &env);
    run.ok();
    let link = run.json();
    let url = link["url"].as_str().expect("a url").to_string();
    let token = link["token"].as_str().expect("a token").to_string();
    assert_eq!(url, format!("{base}/ui/#/portal?token={token}"), "{link}");
    assert_eq!(link["tenant_id"], tenant.as_str(), "{link}");
    let expires: chrono::DateTime<chrono::Utc> = link["expires_at"].as_str().unwrap().parse().unwrap();
    let left = expires - chrono::Utc::now();
    assert!(left > chrono::Duration::hours(23) && left <= chrono::Duration::hours(24), "{link}");

    let bad = hookline(&["portal-link", "--tenant", &tenant, "--expires-in-seconds", "0"], &env);
    assert_eq!(bad.code, 2, "{}", bad.err);
    assert!(bad.err.contains("expires_in_seconds"), "{}", bad.err);

    if !P::OPS_ACTOR.starts_with("arn:") {
        let mut as_portal = owned.clone();
        as_portal.push(("HOOKLINE_API_KEY", token));
        let seen = hookline(&["subscriptions", "list", "--tenant", "someone-else"], &borrow(&as_portal));
        assert_eq!(seen.code, 1, "another tenant is 403 to the portal: {}", seen.err);
        assert!(seen.err.contains("403"), "{}", seen.err);
        let own = listed(&["subscriptions", "list"], &borrow(&as_portal), 0).await;
        assert!(own.is_empty(), "a new tenant has no subscriptions: {own:?}");
    }
}
