//! Credentials, on both backends (`tests/tests/serve`, `tests/tests/aws`):
//! keys (`hookline serve`) and IAM principal grants (AWS) made through
//! `POST /v1/keys`, listed without secrets, revoked; no caller hands out
//! more than it has; the `X-Actor` header is checked, never cut. What only
//! one backend has is tested in its own suite: a secret's rotation and the
//! keys file (serve: `tests/tests/serve/keys.rs`), an unmapped principal,
//! the bootstrap admins and a revocation reaching another process's cache
//! (AWS: `tests/tests/aws/keys.rs`).

use serde_json::{json, Value};
use shared::access::Role;

use crate::pipeline::{unique_name, Credential, Pipeline};
use crate::{Behaviour, Receiver};

/// POST JSON as `cred`.
async fn post_as(p: &impl Pipeline, cred: &Credential, path: &str, body: &Value) -> (u16, Value) {
    p.call_as(cred, "POST", path, Some(body.to_string().as_bytes()), &[]).await
}

/// The status a backend answers a credential it does not know (or no
/// longer honours): 401 for a key, 403 for an IAM principal.
fn refused(cred: &Credential) -> u16 {
    if cred.principal.is_some() {
        403
    } else {
        401
    }
}

/// A key made through the API works at once, is listed and shown without
/// any secret, and stops working when revoked (at once in the process that
/// revoked it); its creation and revocation are audited, never with the
/// secret.
pub async fn a_key_works_until_revoked_and_is_never_shown_again(p: &mut impl Pipeline) {
    let cred = p.credential(Role::Reader, None).await;
    let (st, v) = p.call_as(&cred, "GET", "/v1/subscriptions", None, &[]).await;
    assert_eq!(st, 200, "a new reader reads: {v}");

    let (st, shown) = p.get(&format!("/v1/keys/{}", cred.id)).await;
    assert_eq!(st, 200, "{shown}");
    assert_eq!((shown["role"].as_str(), shown["state"].as_str()), (Some("reader"), Some("active")), "{shown}");
    assert!(shown.get("secret").is_none(), "{shown}");
    let (st, v) = p.get(&format!("/v1/keys/{}?show=secret", cred.id)).await;
    assert_eq!(
        (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
        (400, Some("unknown_parameter"), Some("show")),
        "{v}"
    );
    let typed: hookline_wire::keys::Key = serde_json::from_value(shown.clone()).expect("a key");
    assert_eq!((typed.role, typed.state), (hookline_wire::keys::Role::Reader, hookline_wire::keys::KeyState::Active));
    let (st, list) = p.get("/v1/keys?limit=1000").await;
    assert_eq!(st, 200, "{list}");
    let page: hookline_wire::Page<hookline_wire::keys::Key> = serde_json::from_value(list.clone()).expect("a page");
    assert!(page.items.iter().any(|k| k.id == cred.id), "{list}");
    let listed = list["items"].as_array().unwrap().iter().find(|k| k["id"] == cred.id.as_str()).cloned();
    let listed = listed.unwrap_or_else(|| panic!("{} listed: {list}", cred.id));
    assert!(listed.get("secret").is_none(), "{listed}");
    if let Some(secret) = &cred.secret {
        assert!(!list.to_string().contains(secret.as_str()), "no listing holds a secret");
        assert_eq!(listed["prefix"].as_str(), secret.get(..8), "the first 8 characters tell keys apart");
    } else {
        assert_eq!(listed["principal"].as_str(), cred.principal.as_deref(), "{listed}");
    }

    let (st, revoked) = p.call("DELETE", &format!("/v1/keys/{}", cred.id), None).await;
    assert_eq!(st, 200, "{revoked}");
    assert_eq!(revoked["state"], "revoked", "{revoked}");
    let (st, v) = p.call_as(&cred, "GET", "/v1/subscriptions", None, &[]).await;
    assert_eq!(st, refused(&cred), "a revoked credential is refused: {v}");
    let (st, again) = p.call("DELETE", &format!("/v1/keys/{}", cred.id), None).await;
    assert_eq!((st, &again["revoked_at"]), (200, &revoked["revoked_at"]), "revoking again changes nothing");

    for action in ["key.created", "key.revoked"] {
        let (st, audit) = p.get(&format!("/v1/audit?action={action}&actor={}", enc(&p.actor()))).await;
        assert_eq!(st, 200, "{audit}");
        let rec = audit["items"].as_array().unwrap().iter().find(|r| r["details"]["key_id"] == cred.id.as_str());
        let rec = rec.unwrap_or_else(|| panic!("{action} of {} audited: {audit}", cred.id));
        assert_eq!(rec["details"]["role"], "reader", "{rec}");
        if let Some(secret) = &cred.secret {
            assert!(!audit.to_string().contains(secret.as_str()), "the audit trail never holds a secret");
        }
    }
    let (st, v) = p.get("/v1/keys/key_nothing").await;
    assert_eq!(st, 404, "{v}");
}

/// Percent-encodes a query value.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// No caller creates a key with more power than itself: a tenant-bound
/// admin only keys of its tenant (another tenant: 403 naming `tenant_id`;
/// none given: its own), sees only its tenant's keys; a non-admin manages
/// no keys. Names are unique per tenant (409 naming `name`), bad fields are
/// refused by name, and nothing is written by a refusal.
pub async fn no_caller_hands_out_more_than_it_has(p: &mut impl Pipeline) {
    let tenant = unique_name("acme");
    let acme = p.credential(Role::Admin, Some(&tenant)).await;
    let name = unique_name("ci");
    let grant = |name: &str, extra: Value| {
        let mut b = json!({"name": name, "role": "producer"});
        if let Some(principal) = &acme.principal {
            // A principal of its own per grant (AWS).
            b["principal"] = json!(format!("{principal}-{name}"));
        }
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    let (st, v) = post_as(p, &acme, "/v1/keys", &grant(&name, json!({"tenant_id": "globex"}))).await;
    assert_eq!((st, v["error"]["field"].as_str()), (403, Some("tenant_id")), "{v}");
    let (st, made) = post_as(p, &acme, "/v1/keys", &grant(&name, json!({}))).await;
    assert_eq!(st, 201, "the refused request wrote nothing, so the name is free: {made}");
    assert_eq!(made["tenant_id"].as_str(), Some(tenant.as_str()), "bound to the caller's tenant: {made}");
    let (st, v) = post_as(p, &acme, "/v1/keys", &grant(&name, json!({}))).await;
    assert_eq!((st, v["error"]["field"].as_str()), (409, Some("name")), "{v}");

    // What cannot be read is a 400, a value breaking a rule a 422.
    for (bad, status, code, field) in [
        (grant("a b", json!({})), 422, "invalid_field", "name"),
        (grant(&"n".repeat(65), json!({})), 422, "invalid_field", "name"),
        (grant("x`y", json!({})), 422, "invalid_field", "name"),
        (grant("ok", json!({"role": "root"})), 400, "invalid_type", "role"),
        (grant("ok", json!({"role": "Admin"})), 400, "invalid_type", "role"),
        (grant("ok", json!({"expires_in_seconds": 0})), 422, "invalid_field", "expires_in_seconds"),
        (grant("ok", json!({"expires_in_seconds": "soon"})), 400, "invalid_type", "expires_in_seconds"),
        (grant("ok", json!({"tenant_id": ""})), 422, "invalid_field", "tenant_id"),
        (grant("ok", json!({"secret": "chosen"})), 400, "unknown_field", "secret"),
        (json!({"role": "producer"}), 400, "missing_field", "name"),
    ] {
        let (st, v) = post_as(p, &acme, "/v1/keys", &bad).await;
        assert_eq!(
            (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
            (status, Some(code), Some(field)),
            "{bad}: {v}"
        );
    }
    // Every bad field of one body is named, and nothing is written.
    let bad = grant("multi", json!({"name": "a b", "expires_in_seconds": 0, "tenant_id": ""}));
    let (st, v) = post_as(p, &acme, "/v1/keys", &bad).await;
    let fields: Vec<&str> = v["error"]["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .filter_map(|i| i["field"].as_str())
        .collect();
    assert_eq!((st, fields), (422, vec!["name", "tenant_id", "expires_in_seconds"]), "{bad}: {v}");
    // A query parameter the listing does not take is refused, not ignored.
    let (st, v) = p.call_as(&acme, "GET", "/v1/keys?tenant=globex", None, &[]).await;
    assert_eq!(
        (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
        (400, Some("unknown_parameter"), Some("tenant")),
        "{v}"
    );

    // A tenant-bound caller sees its tenant's keys only.
    let global = p.credential(Role::Reader, None).await;
    let (st, v) = p.call_as(&acme, "GET", &format!("/v1/keys/{}", global.id), None, &[]).await;
    assert_eq!(st, 404, "another tenant's key (or a global one) is not there for it: {v}");
    let (st, v) = p.call_as(&acme, "DELETE", &format!("/v1/keys/{}", global.id), None, &[]).await;
    assert_eq!(st, 404, "{v}");
    let (st, v) = p.call_as(&acme, "GET", "/v1/keys?tenant_id=globex", None, &[]).await;
    assert_eq!((st, v["error"]["field"].as_str()), (403, Some("tenant_id")), "{v}");
    let (st, v) = p.call_as(&acme, "GET", "/v1/keys", None, &[]).await;
    assert_eq!(st, 200, "{v}");
    let tenants: Vec<&str> = v["items"].as_array().unwrap().iter().filter_map(|k| k["tenant_id"].as_str()).collect();
    assert!(tenants.len() >= 2 && tenants.iter().all(|t| *t == tenant), "only {tenant}'s keys: {v}");
    let (st, v) = p.get(&format!("/v1/keys?tenant_id={tenant}")).await;
    assert_eq!((st, v["items"].as_array().map(Vec::len)), (200, Some(2)), "an unbound admin lists any tenant's: {v}");

    // Only an admin manages keys.
    let operator = p.credential(Role::Operator, None).await;
    let (st, v) = post_as(p, &operator, "/v1/keys", &grant("op-made", json!({"role": "operator"}))).await;
    assert_eq!(st, 403, "{v}");
    let (st, v) = p.call_as(&operator, "GET", "/v1/keys", None, &[]).await;
    assert_eq!(st, 403, "{v}");
}

/// A trusted `X-Actor` is recorded whole after the credential (up to 256
/// printable ASCII characters), and anything else is a 422 naming it that
/// writes nothing: a backtick (which would close the audit trail's quote
/// and forge a chain), control characters, non-ASCII, too long.
pub async fn actor_values_are_checked_not_cut(p: &mut impl Pipeline) {
    let r = Receiver::start().await;
    let body = |path: &str| json!({"callback_url": r.url(path, Behaviour::Ok), "event_types": ["actor.*"]}).to_string();
    let long = format!("{}@example.com", "a".repeat(256 - 12));
    assert_eq!(long.len(), 256);
    let (st, sub) =
        p.call_with_headers("POST", "/v1/subscriptions", Some(body("/ok").as_bytes()), &[("X-Actor", &long)]).await;
    assert_eq!(st, 201, "{sub}");
    let id = sub["id"].as_str().unwrap();
    let (_, v) = p.get(&format!("/v1/audit?subscription_id={id}&action=subscription.created")).await;
    assert_eq!(v["items"][0]["actor"].as_str(), Some(format!("{} as `{long}`", p.actor()).as_str()), "{v}");

    let too_long = format!("b{long}");
    for bad in ["mallory` as `root", "eve\tmallory", "zoë", too_long.as_str()] {
        let (st, v) =
            p.call_with_headers("POST", "/v1/subscriptions", Some(body("/bad").as_bytes()), &[("X-Actor", bad)]).await;
        assert_eq!((st, v["error"]["field"].as_str()), (422, Some("X-Actor")), "{bad:?}: {v}");
    }
    let (_, v) = p.get("/v1/subscriptions?limit=1000").await;
    let bad_url = r.url("/bad", Behaviour::Ok);
    assert!(v["items"].as_array().unwrap().iter().all(|s| s["callback_url"] != bad_url.as_str()), "nothing written");
}

/// The key scenarios on one backend.
#[macro_export]
macro_rules! key_scenario_tests {
    ($backend:ident) => {
        $crate::scenario_tests!($backend, key_scenarios;
            a_key_works_until_revoked_and_is_never_shown_again,
            no_caller_hands_out_more_than_it_has,
            actor_values_are_checked_not_cut; $crate::pipeline::Settings::default().trust_actor_header(),
        );
    };
}
