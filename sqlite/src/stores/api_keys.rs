//! The API keys table ([`shared::api_key`]) and its lookup table: one row
//! per credential, so a request's key is found by its credential's hash in
//! one indexed read.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};

use crate::{decode, encode, sql, stored, Db};
use shared::api_key::{ApiKeyRecord, KeyConflict};
use shared::ids::{ApiKeyId, TenantId};
use shared::ports::{KeyStore, Page, StoreResult};

/// `api_keys`: one row per key (its JSON, version, and the `scope` (tenant,
/// or empty for none) and `name` that are unique together);
/// `api_key_lookups`: one row per credential, naming its key.
#[derive(Clone)]
pub struct SqliteApiKeys(pub Db);

/// A key's tenant as the `scope` column holds it (tenant ids are never empty).
fn scope(tenant: Option<&TenantId>) -> String {
    tenant.map(|t| t.as_str().to_string()).unwrap_or_default()
}

/// Whether a credential of `key` is already another key's.
fn credential_taken(c: &Connection, key: &ApiKeyRecord) -> StoreResult<bool> {
    let mut q = c.prepare_cached("SELECT key_id FROM api_key_lookups WHERE lookup = ?1").map_err(sql)?;
    for cred in &key.credentials {
        let owner: Option<String> = q.query_row([&cred.lookup], |r| r.get(0)).optional().map_err(sql)?;
        if owner.is_some_and(|o| o != key.id.as_str()) {
            return Ok(true);
        }
    }
    Ok(false)
}

#[async_trait]
impl KeyStore for SqliteApiKeys {
    /// Checked and written in one call of the single writer, so nothing
    /// comes between the check and the write; the unique index on (scope,
    /// name) and the lookup key back it up.
    async fn create(&self, key: &ApiKeyRecord) -> StoreResult<Result<(), KeyConflict>> {
        let key = key.clone();
        self.0
            .call(move |c, _| {
                let sc = scope(key.tenant.as_ref());
                let named: Option<String> = c
                    .prepare_cached("SELECT id FROM api_keys WHERE scope = ?1 AND name = ?2")
                    .map_err(sql)?
                    .query_row(params![sc, key.name], |r| r.get(0))
                    .optional()
                    .map_err(sql)?;
                if named.is_some() {
                    return Ok(Err(KeyConflict::Name));
                }
                if credential_taken(c, &key)? {
                    return Ok(Err(KeyConflict::Credential));
                }
                c.prepare_cached("INSERT INTO api_keys (id, scope, name, version, data) VALUES (?1, ?2, ?3, ?4, ?5)")
                    .map_err(sql)?
                    .execute(params![key.id.as_str(), sc, key.name, key.version as i64, encode(&key)])
                    .map_err(sql)?;
                let mut ins =
                    c.prepare_cached("INSERT INTO api_key_lookups (lookup, key_id) VALUES (?1, ?2)").map_err(sql)?;
                for cred in &key.credentials {
                    ins.execute(params![cred.lookup, key.id.as_str()]).map_err(sql)?;
                }
                Ok(Ok(()))
            })
            .await
    }

    async fn find(&self, lookup: &str) -> StoreResult<Option<ApiKeyRecord>> {
        let lookup = lookup.to_string();
        self.0
            .call(move |c, _| {
                stored(
                    c,
                    "SELECT k.data FROM api_key_lookups l JOIN api_keys k ON k.id = l.key_id WHERE l.lookup = ?1",
                    [&lookup],
                )
            })
            .await
    }

    async fn get(&self, id: &ApiKeyId) -> StoreResult<Option<ApiKeyRecord>> {
        let id = id.as_str().to_string();
        self.0.call(move |c, _| stored(c, "SELECT data FROM api_keys WHERE id = ?1", [&id])).await
    }

    async fn page(
        &self,
        tenant: Option<&TenantId>,
        limit: usize,
        after: Option<&str>,
    ) -> StoreResult<Page<ApiKeyRecord>> {
        let (sc, after) = (scope(tenant), after.unwrap_or("").to_string());
        self.0
            .call(move |c, _| {
                let mut q = c
                    .prepare_cached("SELECT data FROM api_keys WHERE scope = ?1 AND id > ?2 ORDER BY id LIMIT ?3")
                    .map_err(sql)?;
                let rows = q
                    .query_map(params![sc, after, limit as i64 + 1], |r| r.get::<_, String>(0))
                    .map_err(sql)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(sql)?;
                let mut items = rows.iter().map(|d| decode::<ApiKeyRecord>(d)).collect::<StoreResult<Vec<_>>>()?;
                let more = items.len() > limit;
                items.truncate(limit);
                let next = more.then(|| items.last().map(|k| k.id.as_str().to_string())).flatten();
                Ok(Page { items, next })
            })
            .await
    }

    async fn update(&self, key: &ApiKeyRecord, expected_version: u64) -> StoreResult<Result<(), KeyConflict>> {
        let key = key.clone();
        self.0
            .call(move |c, _| {
                let stored_version: Option<i64> = c
                    .prepare_cached("SELECT version FROM api_keys WHERE id = ?1")
                    .map_err(sql)?
                    .query_row([key.id.as_str()], |r| r.get(0))
                    .optional()
                    .map_err(sql)?;
                if stored_version != Some(expected_version as i64) {
                    return Ok(Err(KeyConflict::Changed));
                }
                if credential_taken(c, &key)? {
                    return Ok(Err(KeyConflict::Credential));
                }
                c.prepare_cached("UPDATE api_keys SET version = ?1, data = ?2 WHERE id = ?3")
                    .map_err(sql)?
                    .execute(params![key.version as i64, encode(&key), key.id.as_str()])
                    .map_err(sql)?;
                let kept: Vec<&str> = key.credentials.iter().map(|c| c.lookup.as_str()).collect();
                let mut ins = c
                    .prepare_cached(
                        "INSERT INTO api_key_lookups (lookup, key_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                    )
                    .map_err(sql)?;
                for l in &kept {
                    ins.execute(params![l, key.id.as_str()]).map_err(sql)?;
                }
                let old: Vec<String> = c
                    .prepare_cached("SELECT lookup FROM api_key_lookups WHERE key_id = ?1")
                    .map_err(sql)?
                    .query_map([key.id.as_str()], |r| r.get(0))
                    .map_err(sql)?
                    .collect::<Result<_, _>>()
                    .map_err(sql)?;
                let mut del = c.prepare_cached("DELETE FROM api_key_lookups WHERE lookup = ?1").map_err(sql)?;
                for l in old.iter().filter(|l| !kept.contains(&l.as_str())) {
                    del.execute([l]).map_err(sql)?;
                }
                Ok(Ok(()))
            })
            .await
    }
}
