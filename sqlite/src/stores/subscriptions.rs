//! The subscriptions table and its routing index. Each record's secrets
//! (signing secrets, custom header values) are sealed with the data key
//! ([`shared::sealed`]) in the `data` column.

use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};

use crate::{sql, Db};
use shared::ids::SubscriptionId;
use shared::keyring::Keyring;
use shared::ports::{
    ReindexPage, ResealPage, StoreResult, SubscriptionFilter, SubscriptionPage, SubscriptionStore, MAX_REINDEX_PAGE,
};
use shared::routing::{self, RouteKey};
use shared::sealed::{open_subscription, seal_subscription};
use shared::subscription::Subscription;

/// Subscriptions table, and its routing index `subscription_routes`
/// (one row per (scope, pattern) of each subscription) written in the same
/// transaction as every subscription write. Secrets are sealed with the
/// keyring it holds.
#[derive(Clone)]
pub struct SqliteSubscriptions {
    db: Db,
    keyring: Arc<Keyring>,
}

impl SqliteSubscriptions {
    /// The store on `db`, sealing and opening secrets with `keyring`.
    pub fn new(db: Db, keyring: Arc<Keyring>) -> Self {
        SqliteSubscriptions { db, keyring }
    }
}

/// A stored `data` column opened with `keyring`.
fn decode(keyring: &Keyring, data: &str) -> StoreResult<Subscription> {
    Ok(open_subscription(data, keyring)?.subscription)
}

/// Writes the index rows of `sub` (after its old ones were deleted).
fn index_subscription(c: &Connection, sub: &Subscription) -> StoreResult<()> {
    let mut st = c
        .prepare_cached(
            "INSERT OR IGNORE INTO subscription_routes (scope, pattern, subscription_id) VALUES (?1, ?2, ?3)",
        )
        .map_err(sql)?;
    for k in routing::index_keys(sub) {
        st.execute(params![k.scope.as_text(), k.pattern, sub.id.as_str()]).map_err(sql)?;
    }
    Ok(())
}

fn unindex_subscription(c: &Connection, id: &SubscriptionId) -> StoreResult<()> {
    c.prepare_cached("DELETE FROM subscription_routes WHERE subscription_id = ?1")
        .map_err(sql)?
        .execute([id.as_str()])
        .map_err(sql)?;
    Ok(())
}

/// The stored subscriptions of `ids`, in that order (`None` where missing).
fn subscriptions_by_id(c: &Connection, k: &Keyring, ids: &[SubscriptionId]) -> StoreResult<Vec<Option<Subscription>>> {
    let mut st = c.prepare_cached("SELECT data FROM subscriptions WHERE id = ?1").map_err(sql)?;
    ids.iter()
        .map(|id| {
            let data: Option<String> = st.query_row([id.as_str()], |r| r.get(0)).optional().map_err(sql)?;
            data.map(|d| decode(k, &d)).transpose()
        })
        .collect()
}

/// Up to `limit` ids indexed under `key` after `after`, in id order.
fn route_ids(c: &Connection, key: &RouteKey, after: &str, limit: i64) -> StoreResult<Vec<SubscriptionId>> {
    let mut st = c
        .prepare_cached(
            "SELECT subscription_id FROM subscription_routes WHERE scope = ?1 AND pattern = ?2 \
             AND subscription_id > ?3 ORDER BY subscription_id LIMIT ?4",
        )
        .map_err(sql)?;
    let rows = st
        .query_map(params![key.scope.as_text(), key.pattern, after, limit], |r| {
            r.get::<_, String>(0).map(SubscriptionId::new)
        })
        .map_err(sql)?;
    rows.map(|r| r.map_err(sql)).collect()
}

#[async_trait]
impl SubscriptionStore for SqliteSubscriptions {
    async fn create(&self, sub: &Subscription) -> StoreResult<()> {
        let (sub, data) = (sub.clone(), seal_subscription(sub, &self.keyring));
        self.db
            .call(move |c, _| {
                c.execute(
                    "INSERT INTO subscriptions (id, version, data, tenant_id) VALUES (?1, ?2, ?3, ?4)",
                    params![sub.id.as_str(), sub.version as i64, data, sub.tenant_id.as_ref().map(|t| t.as_str())],
                )
                .map_err(sql)?;
                index_subscription(c, &sub)
            })
            .await
    }

    async fn get(&self, id: &SubscriptionId) -> StoreResult<Option<Subscription>> {
        let (id, k) = (id.clone(), self.keyring.clone());
        self.db.call(move |c, _| Ok(subscriptions_by_id(c, &k, std::slice::from_ref(&id))?.pop().flatten())).await
    }

    /// One call (one trip through the writer) for all of them.
    async fn get_many(&self, ids: &[SubscriptionId]) -> StoreResult<Vec<Option<Subscription>>> {
        let (ids, k) = (ids.to_vec(), self.keyring.clone());
        self.db.call(move |c, _| subscriptions_by_id(c, &k, &ids)).await
    }

    async fn routes(&self, keys: &[RouteKey]) -> StoreResult<Vec<Vec<SubscriptionId>>> {
        let keys = keys.to_vec();
        self.db.call(move |c, _| keys.iter().map(|k| route_ids(c, k, "", -1)).collect()).await
    }

    /// By the primary key (all), the `tenant_id` index (a tenant), or a
    /// merge of the index ranges of each key (routes), reading at most
    /// `limit + 1` ids of each.
    async fn page(
        &self,
        filter: &SubscriptionFilter,
        limit: usize,
        after: Option<&SubscriptionId>,
    ) -> StoreResult<SubscriptionPage> {
        let (filter, after) = (filter.clone(), after.map(|a| a.to_string()).unwrap_or_default());
        let want = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
        let k = self.keyring.clone();
        self.db
            .call(move |c, _| {
                let mut rows: Vec<Subscription> = match &filter {
                    SubscriptionFilter::All => {
                        let mut st = c
                            .prepare_cached("SELECT data FROM subscriptions WHERE id > ?1 ORDER BY id LIMIT ?2")
                            .map_err(sql)?;
                        let rows = st.query_map(params![after, want], |r| r.get::<_, String>(0)).map_err(sql)?;
                        rows.map(|r| decode(&k, &r.map_err(sql)?)).collect::<StoreResult<_>>()?
                    }
                    SubscriptionFilter::Tenant(t) => {
                        let mut st = c
                            .prepare_cached(
                                "SELECT data FROM subscriptions WHERE tenant_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
                            )
                            .map_err(sql)?;
                        let rows =
                            st.query_map(params![t.as_str(), after, want], |r| r.get::<_, String>(0)).map_err(sql)?;
                        rows.map(|r| decode(&k, &r.map_err(sql)?)).collect::<StoreResult<_>>()?
                    }
                    SubscriptionFilter::Routes(keys) => {
                        let mut ids = std::collections::BTreeSet::new();
                        for k in keys {
                            ids.extend(route_ids(c, k, &after, want)?);
                        }
                        let ids: Vec<SubscriptionId> = ids.into_iter().take(limit.saturating_add(1)).collect();
                        subscriptions_by_id(c, &k, &ids)?.into_iter().flatten().collect()
                    }
                };
                let next_after = (rows.len() > limit).then(|| {
                    rows.truncate(limit);
                    rows.last().map(|s| s.id.clone())
                });
                Ok(SubscriptionPage { items: rows, next_after: next_after.flatten() })
            })
            .await
    }

    async fn update(&self, sub: &Subscription, expected_version: u64) -> StoreResult<bool> {
        let (sub, data) = (sub.clone(), seal_subscription(sub, &self.keyring));
        self.db
            .call(move |c, _| {
                let n = c
                    .execute(
                        "UPDATE subscriptions SET version = ?1, data = ?2, tenant_id = ?3 WHERE id = ?4 AND version = ?5",
                        params![sub.version as i64, data, sub.tenant_id.as_ref().map(|t| t.as_str()), sub.id.as_str(), expected_version as i64],
                    )
                    .map_err(sql)?;
                if n == 1 {
                    unindex_subscription(c, &sub.id)?;
                    index_subscription(c, &sub)?;
                }
                Ok(n == 1)
            })
            .await
    }

    async fn delete(&self, id: &SubscriptionId) -> StoreResult<bool> {
        let id = id.clone();
        self.db
            .call(move |c, _| {
                unindex_subscription(c, &id)?;
                Ok(c.execute("DELETE FROM subscriptions WHERE id = ?1", [id.as_str()]).map_err(sql)? == 1)
            })
            .await
    }

    /// Migration 4 indexed every subscription stored before the index
    /// existed, so this normally writes nothing: it re-checks up to `limit`
    /// subscriptions after the id `after`, in id order, and indexes any
    /// without a `subscription_routes` row (every subscription has at least
    /// one pattern, so at least one row).
    async fn reindex_page(&self, after: Option<&str>, limit: usize) -> StoreResult<ReindexPage> {
        let after = after.unwrap_or_default().to_string();
        let limit = limit.clamp(1, MAX_REINDEX_PAGE);
        let k = self.keyring.clone();
        self.db
            .call(move |c, _| {
                let mut st = c
                    .prepare_cached(
                        "SELECT s.id, s.data, EXISTS (SELECT 1 FROM subscription_routes r WHERE r.subscription_id = s.id) \
                         FROM subscriptions s WHERE s.id > ?1 ORDER BY s.id LIMIT ?2",
                    )
                    .map_err(sql)?;
                let rows = st
                    .query_map(params![after, limit as i64 + 1], |r| {
                        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, bool>(2)?))
                    })
                    .map_err(sql)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(sql)?;
                let next = (rows.len() > limit).then(|| rows[limit - 1].0.clone());
                let mut page = ReindexPage { next, ..ReindexPage::default() };
                for (_, data, indexed) in rows.iter().take(limit) {
                    page.examined += 1;
                    if !indexed {
                        index_subscription(c, &decode(&k, data)?)?;
                        page.reindexed += 1;
                    }
                }
                Ok(page)
            })
            .await
    }

    /// By the primary key: up to `limit` rows after `after`; each holding a
    /// clear secret is rewritten sealed, conditional on its `data` being
    /// the text read (a write meanwhile sealed it already).
    async fn reseal_page(&self, after: Option<&SubscriptionId>, limit: usize) -> StoreResult<ResealPage> {
        let after = after.map(|a| a.to_string()).unwrap_or_default();
        let limit = limit.clamp(1, MAX_REINDEX_PAGE);
        let rows = self
            .db
            .call(move |c, _| {
                let mut st = c
                    .prepare_cached("SELECT id, data FROM subscriptions WHERE id > ?1 ORDER BY id LIMIT ?2")
                    .map_err(sql)?;
                let rows = st
                    .query_map(params![after, limit as i64], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
                    .map_err(sql)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(sql)
            })
            .await?;
        let mut page = ResealPage {
            examined: rows.len() as u64,
            next_after: (rows.len() == limit).then(|| rows.last().map(|(id, _)| SubscriptionId::new(id))).flatten(),
            ..ResealPage::default()
        };
        let mut rewrites = Vec::new();
        for (id, data) in rows {
            let opened = open_subscription(&data, &self.keyring)?;
            if opened.clear {
                rewrites.push((id, data, seal_subscription(&opened.subscription, &self.keyring)));
            }
        }
        if !rewrites.is_empty() {
            page.resealed = self
                .db
                .call(move |c, _| {
                    let mut st = c
                        .prepare_cached("UPDATE subscriptions SET data = ?1 WHERE id = ?2 AND data = ?3")
                        .map_err(sql)?;
                    let mut n = 0;
                    for (id, old, new) in &rewrites {
                        n += st.execute(params![new, id, old]).map_err(sql)? as u64;
                    }
                    Ok(n)
                })
                .await?;
        }
        Ok(page)
    }
}
