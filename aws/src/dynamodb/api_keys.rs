//! ApiKeysTable: API keys and principal grants ([`shared::api_key`]).

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};
use aws_sdk_dynamodb::Client;

use super::{backend, get_by_id, n, s};
use crate::item::{self, Attrs};
use shared::api_key::{ApiKeyRecord, KeyConflict, MAX_CREDENTIALS};
use shared::error::StoreError;
use shared::ids::{ApiKeyId, TenantId};
use shared::ports::{KeyStore, Page, StoreResult};

/// ApiKeysTable (partition key `id`): per key, its record (`id` = the key id),
/// one item per credential (`lookup#…`, holding a copy of the record, so a
/// request's key is one strongly consistent `GetItem`) and one holding its
/// name within its tenant (`name#…`). A key and its items are written in
/// one `TransactWriteItems`, each conditional, so a duplicate name or
/// credential fails the whole write. Listing queries GSI
/// [`item::KEY_INDEX`]; nothing scans the table.
#[derive(Clone)]
pub struct DynamoApiKeys {
    client: Client,
    table: String,
}

/// What a condition of the transaction refused (by action position), or
/// `None` when the transaction was written.
type Refused = Option<Vec<bool>>;

impl DynamoApiKeys {
    /// The adapter over `table`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoApiKeys { client, table: table.into() }
    }

    fn put(&self, attrs: Attrs, condition: &str, values: &[(&str, AttributeValue)]) -> StoreResult<TransactWriteItem> {
        let mut p = Put::builder().table_name(&self.table).set_item(Some(attrs.into_sdk()));
        if !condition.is_empty() {
            p = p.condition_expression(condition);
        }
        for (k, v) in values {
            p = p.expression_attribute_values(*k, v.clone());
        }
        let p = p.build().map_err(|e| StoreError::other(format!("dynamodb Put on {}: {e}", self.table)))?;
        Ok(TransactWriteItem::builder().put(p).build())
    }

    fn delete(&self, id: &str) -> StoreResult<TransactWriteItem> {
        let d = Delete::builder()
            .table_name(&self.table)
            .key("id", s(id))
            .build()
            .map_err(|e| StoreError::other(format!("dynamodb Delete on {}: {e}", self.table)))?;
        Ok(TransactWriteItem::builder().delete(d).build())
    }

    /// Writes `actions` all or none; on a refused condition, which actions'
    /// conditions failed.
    async fn transact(&self, actions: Vec<TransactWriteItem>) -> StoreResult<Refused> {
        match self.client.transact_write_items().set_transact_items(Some(actions)).send().await {
            Ok(_) => Ok(None),
            Err(e) => match e.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(t))
                    if t.cancellation_reasons().iter().any(|r| r.code() == Some("ConditionalCheckFailed")) =>
                {
                    Ok(Some(
                        t.cancellation_reasons().iter().map(|r| r.code() == Some("ConditionalCheckFailed")).collect(),
                    ))
                }
                _ => Err(backend("TransactWriteItems", &self.table, e)),
            },
        }
    }

    fn lookup_condition(&self, key: &ApiKeyRecord) -> (&'static str, Vec<(&'static str, AttributeValue)>) {
        ("attribute_not_exists(id) OR key_id = :kid", vec![(":kid", s(key.id.as_str()))])
    }
}

#[async_trait]
impl KeyStore for DynamoApiKeys {
    /// One transaction: the key, its name and each credential, each only if
    /// absent.
    async fn create(&self, key: &ApiKeyRecord) -> StoreResult<Result<(), KeyConflict>> {
        if key.credentials.len() > MAX_CREDENTIALS {
            return Err(StoreError::other("a key holds at most two credentials".to_string()));
        }
        let absent = "attribute_not_exists(id)";
        let mut actions = vec![
            self.put(item::api_key_to_attrs(key)?, absent, &[])?,
            self.put(item::api_key_name_to_attrs(key), absent, &[])?,
        ];
        for c in &key.credentials {
            actions.push(self.put(item::api_key_lookup_to_attrs(&c.lookup, key)?, absent, &[])?);
        }
        Ok(match self.transact(actions).await? {
            None => Ok(()),
            Some(refused) if refused.get(1) == Some(&true) => Err(KeyConflict::Name),
            Some(refused) if refused.iter().skip(2).any(|r| *r) => Err(KeyConflict::Credential),
            // The key id itself exists: ids are fresh, so only a retried create.
            Some(_) => Err(KeyConflict::Changed),
        })
    }

    async fn find(&self, lookup: &str) -> StoreResult<Option<ApiKeyRecord>> {
        get_by_id(&self.client, &self.table, &format!("lookup#{lookup}")).await?.map(|a| a.data()).transpose()
    }

    async fn get(&self, id: &ApiKeyId) -> StoreResult<Option<ApiKeyRecord>> {
        // Key ids never hold '#': an id naming a lookup or name item finds nothing.
        if id.as_str().contains('#') {
            return Ok(None);
        }
        get_by_id(&self.client, &self.table, id.as_str()).await?.map(|a| a.data()).transpose()
    }

    async fn page(
        &self,
        tenant: Option<&TenantId>,
        limit: usize,
        after: Option<&str>,
    ) -> StoreResult<Page<ApiKeyRecord>> {
        let mut items: Vec<ApiKeyRecord> = Vec::new();
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        let want = limit + 1;
        loop {
            let mut q = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(item::KEY_INDEX)
                .expression_attribute_values(":s", s(item::key_scope(tenant)))
                .limit(i32::try_from(want - items.len()).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start.take());
            q = match after {
                Some(a) => {
                    q.key_condition_expression("scope = :s AND kid > :a").expression_attribute_values(":a", s(a))
                }
                None => q.key_condition_expression("scope = :s"),
            };
            let page = q.send().await.map_err(|e| backend("Query", &self.table, e))?;
            for it in page.items() {
                items.push(Attrs::from_sdk(it).data()?);
            }
            match page.last_evaluated_key() {
                Some(k) if !k.is_empty() && items.len() < want => start = Some(k.clone()),
                _ => break,
            }
        }
        let more = items.len() > limit;
        items.truncate(limit);
        let next = more.then(|| items.last().map(|k| k.id.as_str().to_string())).flatten();
        Ok(Page { items, next })
    }

    /// Reads the stored key for the credentials it held, then one
    /// transaction: the key on condition of its version, each credential
    /// (new ones only if no other key holds them), the dropped ones deleted.
    async fn update(&self, key: &ApiKeyRecord, expected_version: u64) -> StoreResult<Result<(), KeyConflict>> {
        let Some(old) = self.get(&key.id).await? else { return Ok(Err(KeyConflict::Changed)) };
        let mut actions = vec![self.put(
            item::api_key_to_attrs(key)?,
            "version = :expected",
            &[(":expected", n(expected_version))],
        )?];
        let (cond, values) = self.lookup_condition(key);
        for c in &key.credentials {
            actions.push(self.put(item::api_key_lookup_to_attrs(&c.lookup, key)?, cond, &values)?);
        }
        for c in old.credentials.iter().filter(|o| key.credentials.iter().all(|c| c.lookup != o.lookup)) {
            actions.push(self.delete(&format!("lookup#{}", c.lookup))?);
        }
        Ok(match self.transact(actions).await? {
            None => Ok(()),
            Some(refused) if refused.first() == Some(&true) => Err(KeyConflict::Changed),
            Some(_) => Err(KeyConflict::Credential),
        })
    }
}
