//! Conformance of [`shared::ports::KeyStore`]: keys found by credential,
//! names unique per tenant and credentials over all keys, versioned
//! changes that add and drop credentials, listings per tenant.

use chrono::{SubsecRound, Utc};
use shared::access::Role;
use shared::api_key::{ApiKeyRecord, KeyConflict, StoredCredential};
use shared::context::Stores;
use shared::ids::{ApiKeyId, TenantId};

fn cred(lookup: &str) -> StoredCredential {
    StoredCredential { lookup: lookup.to_string(), prefix: Some("hlk_abcd".into()), until: None }
}

fn key(name: &str, tenant: Option<&str>, lookup: &str) -> ApiKeyRecord {
    ApiKeyRecord::new(
        name,
        Role::Reader,
        tenant.map(TenantId::new),
        cred(lookup),
        "key:root",
        Utc::now().trunc_subsecs(3),
    )
}

/// A lookup unique to this run (the AWS suite shares tables between cases).
fn unique(l: &str) -> String {
    format!("s:{l}-{}", shared::ids::random_token(""))
}

/// Create, find by credential, get by id; duplicates of name (per tenant)
/// and credential refused with nothing written.
pub async fn keys_are_unique_by_name_per_tenant_and_by_credential(s: &Stores) {
    let t = format!("t{}", shared::ids::random_token(""));
    let (l1, l2, l3) = (unique("a"), unique("b"), unique("c"));
    let a = key("ci", Some(&t), &l1);
    assert_eq!(s.keys.create(&a).await.unwrap(), Ok(()));
    assert_eq!(s.keys.find(&l1).await.unwrap().as_ref(), Some(&a));
    assert_eq!(s.keys.get(&a.id).await.unwrap().as_ref(), Some(&a));
    assert_eq!(s.keys.find(&unique("nothing")).await.unwrap(), None);
    assert_eq!(s.keys.get(&ApiKeyId::new("key_none")).await.unwrap(), None);
    assert_eq!(s.keys.get(&ApiKeyId::new(format!("lookup#{l1}"))).await.unwrap(), None, "not a key id");

    let same_name = key("ci", Some(&t), &l2);
    assert_eq!(s.keys.create(&same_name).await.unwrap(), Err(KeyConflict::Name));
    assert_eq!(s.keys.find(&l2).await.unwrap(), None, "nothing of a refused key is written");
    assert_eq!(s.keys.get(&same_name.id).await.unwrap(), None);
    let other_tenant = key("ci", Some(&format!("{t}-2")), &l2);
    assert_eq!(s.keys.create(&other_tenant).await.unwrap(), Ok(()), "names are per tenant");
    let same_secret = key("other", Some(&t), &l1);
    assert_eq!(s.keys.create(&same_secret).await.unwrap(), Err(KeyConflict::Credential));
    assert_eq!(s.keys.get(&same_secret.id).await.unwrap(), None);
    let fresh = key("other", Some(&t), &l3);
    assert_eq!(s.keys.create(&fresh).await.unwrap(), Ok(()), "the refused name is still free");
}

/// Rotation adds a credential and drops the one before; revocation is
/// stored; a stale version or another key's credential is refused.
pub async fn keys_update_on_their_version_adding_and_dropping_credentials(s: &Stores) {
    let (l1, l2, l3, other) = (unique("r1"), unique("r2"), unique("r3"), unique("o"));
    let k = key(&format!("rot{}", shared::ids::random_token("")), None, &l1);
    s.keys.create(&k).await.unwrap().unwrap();
    let holder = key(&format!("holder{}", shared::ids::random_token("")), None, &other);
    s.keys.create(&holder).await.unwrap().unwrap();
    let now = Utc::now().trunc_subsecs(3);
    let r1 = k.rotated(cred(&l2), now, chrono::Duration::minutes(5));
    assert_eq!(s.keys.update(&r1, k.version).await.unwrap(), Ok(()));
    assert_eq!(s.keys.find(&l1).await.unwrap().as_ref(), Some(&r1), "the old credential finds the new record");
    assert_eq!(s.keys.find(&l2).await.unwrap().as_ref(), Some(&r1));
    assert_eq!(s.keys.update(&r1, k.version).await.unwrap(), Err(KeyConflict::Changed), "stale version");

    let taken = r1.rotated(cred(&other), now, chrono::Duration::minutes(5));
    assert_eq!(s.keys.update(&taken, r1.version).await.unwrap(), Err(KeyConflict::Credential));
    assert_eq!(s.keys.find(&other).await.unwrap().as_ref(), Some(&holder), "the other key keeps its credential");
    assert_eq!(s.keys.get(&k.id).await.unwrap().as_ref(), Some(&r1), "nothing written");

    let r2 = r1.rotated(cred(&l3), now, chrono::Duration::minutes(5));
    s.keys.update(&r2, r1.version).await.unwrap().unwrap();
    assert_eq!(s.keys.find(&l1).await.unwrap(), None, "the oldest credential is dropped");
    assert_eq!(s.keys.find(&l2).await.unwrap().as_ref(), Some(&r2));
    let revoked = r2.revoked(now);
    s.keys.update(&revoked, r2.version).await.unwrap().unwrap();
    let found = s.keys.find(&l3).await.unwrap().unwrap();
    assert_eq!(found.revoked_at, Some(now));
    assert!(!found.admits(&l3, now));

    let gone = key("gone", None, &unique("g"));
    assert_eq!(s.keys.update(&gone, 1).await.unwrap(), Err(KeyConflict::Changed), "no such key");
    assert_eq!(s.keys.get(&gone.id).await.unwrap(), None);
}

/// Pages list one tenant's keys (or the unbound ones) once each, in id
/// order, and nothing of another tenant.
pub async fn keys_page_by_tenant(s: &Stores) {
    let t = format!("t{}", shared::ids::random_token(""));
    let mut ids = Vec::new();
    for i in 0..5 {
        let k = key(&format!("k{i}"), Some(&t), &unique("p"));
        s.keys.create(&k).await.unwrap().unwrap();
        ids.push(k.id);
    }
    ids.sort();
    s.keys.create(&key("k0", Some(&format!("{t}-x")), &unique("p"))).await.unwrap().unwrap();
    let tenant = TenantId::new(&t);
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..10 {
        let page = s.keys.page(Some(&tenant), 2, after.as_deref()).await.unwrap();
        assert!(page.items.len() <= 2);
        seen.extend(page.items.into_iter().map(|k| k.id));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(seen, ids, "every key of the tenant once, in id order");
    let unbound = s.keys.page(None, 1000, None).await.unwrap();
    assert!(unbound.items.iter().all(|k| k.tenant.is_none()), "None lists the keys bound to no tenant only");
}
