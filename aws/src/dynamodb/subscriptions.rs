//! SubscriptionsTable: subscriptions with their route-index entries, written
//! in transactions, and the reindex scan. Each item's secrets are sealed
//! with the data key ([`shared::sealed`]).

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};
use aws_sdk_dynamodb::Client;

use super::{all, backend, get_by_id, get_item, n, s, written};
use crate::item::{self, Attrs};
use shared::bounds::{all_bounded, MAX_STORE_IN_FLIGHT};
use shared::error::StoreError;
use shared::ids::SubscriptionId;
use shared::keyring::Keyring;
use shared::ports::{
    ReindexPage, ResealPage, StoreResult, SubscriptionFilter, SubscriptionPage, SubscriptionStore, MAX_REINDEX_PAGE,
};
use shared::routing::RouteKey;
use shared::subscription::Subscription;

/// SubscriptionsTable: versioned configuration, and its index entries
/// ([`item::index_entries`]) in the same table, filed by GSI
/// [`item::SUBSCRIPTION_INDEX`]: a subscription and the entries that change
/// with it are written in one `TransactWriteItems` (at most 100 actions:
/// [`shared::bounds::MAX_SUBSCRIPTION_PATTERNS`]). No call scans the table
/// but the operator's repair after an upgrade ([`SubscriptionStore::reindex_page`]).
#[derive(Clone)]
pub struct DynamoSubscriptions {
    client: Client,
    table: String,
    keyring: Arc<Keyring>,
}

/// Is this the id of an index entry rather than of a subscription?
/// Subscription ids never hold `#`; entry ids always do, so a caller naming
/// an entry finds no subscription.
fn is_entry_id(id: &SubscriptionId) -> bool {
    id.as_str().contains('#')
}

/// The condition of a `Put` in a subscription transaction.
enum PutIf {
    /// None (index entries).
    Always,
    /// No item with this id exists (a new subscription).
    Absent,
    /// The stored item has this version (a versioned update).
    Version(u64),
}

/// One `TransactWriteItems` of `actions` (`table` names it in errors):
/// `true` when written, `false` when a condition cancelled it, any other
/// failure an error.
pub(super) async fn transact_all_or_none(
    client: &Client,
    table: &str,
    actions: Vec<TransactWriteItem>,
) -> StoreResult<bool> {
    match client.transact_write_items().set_transact_items(Some(actions)).send().await {
        Ok(_) => Ok(true),
        Err(e) => {
            let condition_failed = matches!(
                e.as_service_error(),
                Some(TransactWriteItemsError::TransactionCanceledException(t))
                    if t.cancellation_reasons().iter().any(|r| r.code() == Some("ConditionalCheckFailed"))
            );
            if condition_failed {
                Ok(false)
            } else {
                Err(backend("TransactWriteItems", table, e))
            }
        }
    }
}

/// What a transaction of [`DynamoSubscriptions::transact`] found.
enum Transacted {
    Written,
    /// A condition failed (the subscription changed, exists, or is gone).
    ConditionFailed,
}

impl DynamoSubscriptions {
    /// The adapter over `table`, sealing and opening secrets with `keyring`.
    pub fn new(client: Client, table: impl Into<String>, keyring: Arc<Keyring>) -> Self {
        DynamoSubscriptions { client, table: table.into(), keyring }
    }

    /// A stored item as its subscription.
    fn decode(&self, a: &Attrs) -> StoreResult<Subscription> {
        item::subscription_from_attrs(a, &self.keyring)
    }

    /// A subscription as its stored item (secrets sealed).
    fn encode(&self, sub: &Subscription) -> StoreResult<Attrs> {
        item::subscription_to_attrs(sub, &self.keyring)
    }

    /// Items of GSI [`item::SUBSCRIPTION_INDEX`] under `gk`, with `gs`
    /// after `after`, in `gs` order: all of them, or the first `limit`.
    async fn query_index(&self, gk: &str, after: Option<&str>, limit: Option<usize>) -> StoreResult<Vec<Attrs>> {
        let mut out = Vec::new();
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        loop {
            let mut q = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(item::SUBSCRIPTION_INDEX)
                .expression_attribute_values(":k", s(gk))
                .set_exclusive_start_key(start.take());
            q = match after {
                Some(a) => q.key_condition_expression("gk = :k AND gs > :a").expression_attribute_values(":a", s(a)),
                None => q.key_condition_expression("gk = :k"),
            };
            if let Some(l) = limit {
                q = q.limit(i32::try_from(l.saturating_sub(out.len()).max(1)).unwrap_or(i32::MAX));
            }
            let page = q.send().await.map_err(|e| backend("Query", &self.table, e))?;
            out.extend(page.items().iter().map(Attrs::from_sdk));
            if limit.is_some_and(|l| out.len() >= l) {
                out.truncate(limit.unwrap_or(usize::MAX));
                return Ok(out);
            }
            match page.last_evaluated_key() {
                Some(k) if !k.is_empty() => start = Some(k.clone()),
                _ => return Ok(out),
            }
        }
    }

    /// The subscription ids of index items (their `gs`).
    fn ids_of(items: &[Attrs]) -> StoreResult<Vec<SubscriptionId>> {
        items.iter().map(|a| Ok(SubscriptionId::new(a.s("gs")?))).collect()
    }

    /// The stored item of a subscription (strongly consistent), if any.
    async fn item(&self, id: &SubscriptionId) -> StoreResult<Option<Attrs>> {
        if is_entry_id(id) {
            return Ok(None);
        }
        get_by_id(&self.client, &self.table, id.as_str()).await
    }

    /// A `Put` action of a transaction; with `version`, only if the stored
    /// item has that version; with `None`, unconditional.
    fn put_action(&self, attrs: Attrs, condition: PutIf) -> StoreResult<TransactWriteItem> {
        let mut put = Put::builder().table_name(&self.table).set_item(Some(attrs.into_sdk()));
        put = match condition {
            PutIf::Always => put,
            PutIf::Absent => put.condition_expression("attribute_not_exists(id)"),
            PutIf::Version(v) => put
                .condition_expression("#v = :expected")
                .expression_attribute_names("#v", "version")
                .expression_attribute_values(":expected", n(v)),
        };
        let put = put.build().map_err(|e| StoreError::other(format!("dynamodb Put on {}: {e}", self.table)))?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// A `Delete` action of a transaction, only of that version if given.
    fn delete_action(&self, id: &str, version: Option<u64>) -> StoreResult<TransactWriteItem> {
        let mut del = Delete::builder().table_name(&self.table).key("id", s(id));
        if let Some(v) = version {
            del = del
                .condition_expression("#v = :expected")
                .expression_attribute_names("#v", "version")
                .expression_attribute_values(":expected", n(v));
        }
        let del = del.build().map_err(|e| StoreError::other(format!("dynamodb Delete on {}: {e}", self.table)))?;
        Ok(TransactWriteItem::builder().delete(del).build())
    }

    /// Writes `actions` all or none.
    async fn transact(&self, actions: Vec<TransactWriteItem>) -> StoreResult<Transacted> {
        if actions.len() > 100 {
            return Err(StoreError::other(format!(
                "a subscription write of {} actions exceeds DynamoDB's 100 per transaction (at most {} patterns)",
                actions.len(),
                shared::bounds::MAX_SUBSCRIPTION_PATTERNS
            )));
        }
        Ok(if transact_all_or_none(&self.client, &self.table, actions).await? {
            Transacted::Written
        } else {
            Transacted::ConditionFailed
        })
    }

    /// The index entries a stored item has: none for an item written before
    /// the index existed (no `gk`), so its next update writes them all.
    fn stored_entries(old: &Attrs, sub: &Subscription) -> StoreResult<Vec<item::IndexEntry>> {
        Ok(if old.opt_s("gk")?.is_some() { item::index_entries(sub) } else { Vec::new() })
    }
}

#[async_trait]
impl SubscriptionStore for DynamoSubscriptions {
    /// One transaction: the subscription (if absent) and its index entries.
    async fn create(&self, sub: &Subscription) -> StoreResult<()> {
        if is_entry_id(&sub.id) {
            return Err(StoreError::other(format!("subscription id {} holds '#'", sub.id)));
        }
        let mut actions = vec![self.put_action(self.encode(sub)?, PutIf::Absent)?];
        for e in item::index_entries(sub) {
            actions.push(self.put_action(item::index_entry_to_attrs(&e, &sub.id), PutIf::Always)?);
        }
        match self.transact(actions).await? {
            Transacted::Written => Ok(()),
            // The SQLite adapter fails the same way (primary key constraint).
            Transacted::ConditionFailed => Err(StoreError::other(format!("subscription {} already exists", sub.id))),
        }
    }

    async fn get(&self, id: &SubscriptionId) -> StoreResult<Option<Subscription>> {
        self.item(id).await?.map(|a| self.decode(&a)).transpose()
    }

    /// Eventually consistent `GetItem`s, concurrently up to the store cap:
    /// half the read units of [`SubscriptionStore::get`]. The callers are
    /// the subscription cache's fills (every container, every TTL) and
    /// listings, which already trust a copy up to the cache TTL old;
    /// routing confirms a subscription it would refuse with `get`
    /// (strongly consistent) first.
    async fn get_many(&self, ids: &[SubscriptionId]) -> StoreResult<Vec<Option<Subscription>>> {
        let calls = ids.iter().map(|id| async move {
            if is_entry_id(id) {
                return Ok(None);
            }
            let key = HashMap::from([("id".to_string(), s(id.as_str()))]);
            get_item(&self.client, &self.table, key, false).await?.map(|a| self.decode(&a)).transpose()
        });
        all(all_bounded(calls.collect(), MAX_STORE_IN_FLIGHT).await)
    }

    /// One `Query` of the GSI per key (concurrently, up to the store cap).
    async fn routes(&self, keys: &[RouteKey]) -> StoreResult<Vec<Vec<SubscriptionId>>> {
        let calls = keys
            .iter()
            .map(|k| async move { Self::ids_of(&self.query_index(&item::route_index_key(k), None, None).await?) })
            .collect();
        all(all_bounded(calls, MAX_STORE_IN_FLIGHT).await)
    }

    /// All: the GSI's listing partition (projected with the data). A
    /// tenant: its entries, then the subscriptions. Routes: `limit + 1`
    /// entries after `after` of each key, merged, then the subscriptions.
    async fn page(
        &self,
        filter: &SubscriptionFilter,
        limit: usize,
        after: Option<&SubscriptionId>,
    ) -> StoreResult<SubscriptionPage> {
        let want = limit.saturating_add(1);
        let after = after.map(SubscriptionId::as_str);
        let mut ids: Vec<SubscriptionId> = match filter {
            SubscriptionFilter::All => {
                let items = self.query_index(item::SUBSCRIPTION_LIST_KEY, after, Some(want)).await?;
                let mut subs: Vec<Subscription> = items.iter().map(|a| self.decode(a)).collect::<StoreResult<_>>()?;
                let next_after = (subs.len() > limit).then(|| {
                    subs.truncate(limit);
                    subs.last().map(|s| s.id.clone())
                });
                return Ok(SubscriptionPage { items: subs, next_after: next_after.flatten() });
            }
            SubscriptionFilter::Tenant(t) => {
                Self::ids_of(&self.query_index(&item::tenant_index_key(t.as_str()), after, Some(want)).await?)?
            }
            SubscriptionFilter::Routes(keys) => {
                let calls = keys
                    .iter()
                    .map(|k| async move {
                        Self::ids_of(&self.query_index(&item::route_index_key(k), after, Some(want)).await?)
                    })
                    .collect();
                let mut merged = std::collections::BTreeSet::new();
                for ids in all(all_bounded(calls, MAX_STORE_IN_FLIGHT).await)? {
                    merged.extend(ids);
                }
                merged.into_iter().take(want).collect()
            }
        };
        let next_after = (ids.len() > limit).then(|| {
            ids.truncate(limit);
            ids.last().cloned()
        });
        let items = self.get_many(&ids).await?.into_iter().flatten().collect();
        Ok(SubscriptionPage { items, next_after: next_after.flatten() })
    }

    /// Reads the stored subscription (consistently) to know its index
    /// entries. If they stay the same (a state or secret change), one
    /// `PutItem` conditional on `version`; otherwise one transaction of
    /// that put and a put or delete of each entry that changed.
    async fn update(&self, sub: &Subscription, expected_version: u64) -> StoreResult<bool> {
        let Some(old) = self.item(&sub.id).await? else { return Ok(false) };
        if old.n::<u64>("version")? != expected_version {
            return Ok(false);
        }
        let before = Self::stored_entries(&old, &self.decode(&old)?)?;
        let after = item::index_entries(sub);
        if before == after {
            let res = self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(self.encode(sub)?.into_sdk()))
                .condition_expression("#v = :expected")
                .expression_attribute_names("#v", "version")
                .expression_attribute_values(":expected", n(expected_version))
                .send()
                .await;
            return written("PutItem", &self.table, res);
        }
        let mut actions = vec![self.put_action(self.encode(sub)?, PutIf::Version(expected_version))?];
        for e in &after {
            if !before.contains(e) {
                actions.push(self.put_action(item::index_entry_to_attrs(e, &sub.id), PutIf::Always)?);
            }
        }
        for e in &before {
            if !after.iter().any(|a| a.id == e.id) {
                actions.push(self.delete_action(&e.id, None)?);
            }
        }
        Ok(matches!(self.transact(actions).await?, Transacted::Written))
    }

    /// One transaction: the subscription (if still the version read) and
    /// its index entries; read again and retried if it changed meanwhile.
    async fn delete(&self, id: &SubscriptionId) -> StoreResult<bool> {
        for _ in 0..5 {
            let Some(old) = self.item(id).await? else { return Ok(false) };
            let version: u64 = old.n("version")?;
            let mut actions = vec![self.delete_action(id.as_str(), Some(version))?];
            for e in Self::stored_entries(&old, &self.decode(&old)?)? {
                actions.push(self.delete_action(&e.id, None)?);
            }
            if let Transacted::Written = self.transact(actions).await? {
                return Ok(true);
            }
        }
        Err(StoreError::other(format!("subscription {id} kept changing while being deleted")))
    }

    /// The table's one `Scan`, on this operator path only (never on a
    /// pipeline path): one page of at most `limit` (≤ 100) items from the
    /// key `after`, filtered to subscription items without `gk` (stored
    /// before the index existed; index entries always have one), projected
    /// to `id`, `version`, `data`. Each found is written by [`Self::update`]
    /// with its version raised by one: it reads the item again
    /// (consistently), finds no stored entries and writes the subscription
    /// and all its entries in one `TransactWriteItems` conditional on the
    /// version read, so a subscription changed meanwhile (which wrote its
    /// entries) is left alone and a concurrent update conditional on the
    /// old version retries on the indexed item. Eventually consistent: a
    /// stale item fails that condition and counts as not reindexed.
    async fn reindex_page(&self, after: Option<&str>, limit: usize) -> StoreResult<ReindexPage> {
        let scan = self
            .client
            .scan()
            .filter_expression("attribute_not_exists(gk) AND attribute_exists(#data)")
            .projection_expression("id, #version, #data")
            .expression_attribute_names("#version", "version")
            .expression_attribute_names("#data", "data");
        let (items, examined, next) = reindex_scan(scan, &self.table, after, limit).await?;
        let found = items
            .iter()
            .map(|a| {
                let version: u64 = a.n("version")?;
                let mut sub = self.decode(a)?;
                sub.version = version + 1;
                Ok((sub, version))
            })
            .collect::<StoreResult<Vec<(Subscription, u64)>>>()?;
        let calls = found.iter().map(|(sub, version)| self.update(sub, *version)).collect();
        let written = all(all_bounded(calls, MAX_STORE_IN_FLIGHT).await)?;
        Ok(ReindexPage { reindexed: written.iter().filter(|w| **w).count() as u64, examined, next })
    }

    /// One `Query` of the listing partition of GSI
    /// [`item::SUBSCRIPTION_INDEX`] (projected with the data, never a
    /// `Scan`); each item holding a clear secret is put again sealed,
    /// conditional on its `version` being the one read (every write raises
    /// it, so a subscription written meanwhile, already sealed, is left
    /// alone).
    async fn reseal_page(&self, after: Option<&SubscriptionId>, limit: usize) -> StoreResult<ResealPage> {
        let limit = limit.clamp(1, MAX_REINDEX_PAGE);
        let items =
            self.query_index(item::SUBSCRIPTION_LIST_KEY, after.map(SubscriptionId::as_str), Some(limit)).await?;
        let mut page = ResealPage {
            examined: items.len() as u64,
            next_after: if items.len() == limit {
                items.last().map(|a| a.s("id")).transpose()?.map(SubscriptionId::new)
            } else {
                None
            },
            ..ResealPage::default()
        };
        let mut rewrites = Vec::new();
        for a in &items {
            let opened = item::opened_subscription(a, &self.keyring)?;
            if opened.clear {
                rewrites.push((a.n::<u64>("version")?, opened.subscription));
            }
        }
        let calls = rewrites
            .iter()
            .map(|(version, sub)| async move {
                let res = self
                    .client
                    .put_item()
                    .table_name(&self.table)
                    .set_item(Some(self.encode(sub)?.into_sdk()))
                    .condition_expression("#v = :expected")
                    .expression_attribute_names("#v", "version")
                    .expression_attribute_values(":expected", n(*version))
                    .send()
                    .await;
                written("PutItem", &self.table, res)
            })
            .collect();
        page.resealed = all(all_bounded(calls, MAX_STORE_IN_FLIGHT).await)?.iter().filter(|w| **w).count() as u64;
        Ok(page)
    }
}

/// One page of an operator's reindex `Scan` (`scan`, with its filter, of
/// `table`): at most `limit` (≤ [`MAX_REINDEX_PAGE`]) items examined from
/// the key `after`. Answers the items the filter kept, how many were
/// examined, and the key the next page starts from (`None` at the end).
pub(super) async fn reindex_scan(
    scan: aws_sdk_dynamodb::operation::scan::builders::ScanFluentBuilder,
    table: &str,
    after: Option<&str>,
    limit: usize,
) -> StoreResult<(Vec<Attrs>, u64, Option<String>)> {
    let limit = limit.clamp(1, MAX_REINDEX_PAGE);
    let page = scan
        .table_name(table)
        .limit(i32::try_from(limit).unwrap_or(1))
        .set_exclusive_start_key(after.map(|a| HashMap::from([("id".to_string(), s(a))])))
        .send()
        .await
        .map_err(|e| backend("Scan", table, e))?;
    let next = match page.last_evaluated_key().and_then(|k| k.get("id")) {
        Some(AttributeValue::S(id)) => Some(id.clone()),
        Some(other) => return Err(StoreError::other(format!("dynamodb Scan on {table}: a key id of {other:?}"))),
        None => None,
    };
    let examined = u64::try_from(page.scanned_count()).unwrap_or(0);
    Ok((page.items().iter().map(Attrs::from_sdk).collect(), examined, next))
}
