//! EventTypesTable: the event types seen at ingest
//! ([`shared::event_types`]), inserted once per (scope, type) by a
//! conditional `PutItem` and listed by scope with `Query`; and, in the same
//! table under the scope `c` ([`CATALOG_SCOPE`]), the event catalog's
//! registered versions ([`shared::catalog`]).

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use chrono::DateTime;

use std::collections::HashMap;

use super::{all, get_item, s, written};
use crate::item::Attrs;
use chrono::Utc;
use shared::bounds::{all_bounded, MAX_STORE_IN_FLIGHT};
use shared::catalog::CatalogEntry;
use shared::error::StoreError;
use shared::event_types::{SeenType, TypeScope};
use shared::ports::{EventTypeStore, Page, StoreResult};

/// EventTypesTable: partition key `scope` ([`TypeScope::as_text`], at most
/// a tenant id of 256 bytes and its length: well under the 2048-byte
/// partition key limit), sort key `event_type` (at most 256 bytes by the
/// envelope rules, under the 1024-byte sort key limit), and
/// `first_seen_at` (epoch milliseconds). Items are small and kept.
#[derive(Clone)]
pub struct DynamoEventTypes {
    client: Client,
    table: String,
}

impl DynamoEventTypes {
    /// The adapter over `table`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoEventTypes { client, table: table.into() }
    }

    /// One conditional `PutItem`: written only when no item has its key.
    async fn put(&self, row: &SeenType) -> StoreResult<bool> {
        let mut a = Attrs::new();
        a.put_s("scope", row.scope.as_text())
            .put_s("event_type", &row.event_type)
            .put_n("first_seen_at", row.first_seen_at.timestamp_millis());
        let res = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(a.into_sdk()))
            .condition_expression("attribute_not_exists(#s)")
            .expression_attribute_names("#s", "scope")
            .send()
            .await;
        written("PutItem", &self.table, res)
    }
}

#[async_trait]
impl EventTypeStore for DynamoEventTypes {
    /// One conditional `PutItem` per row (a batch write takes no
    /// condition), at most [`MAX_STORE_IN_FLIGHT`] at a time.
    async fn record(&self, seen: &[SeenType]) -> StoreResult<Vec<bool>> {
        all(all_bounded(seen.iter().map(|r| self.put(r)).collect(), MAX_STORE_IN_FLIGHT).await)
    }

    /// `Query` on `scope`, after the type `after` ([`Self::query_page`]).
    async fn page(&self, scope: &TypeScope, limit: usize, after: Option<&str>) -> StoreResult<Page<SeenType>> {
        let (found, more) = self.query_page(&scope.as_text(), limit, after, None).await?;
        let items = found
            .iter()
            .map(|a| {
                let ms: i64 = a.n("first_seen_at")?;
                let first_seen_at = DateTime::from_timestamp_millis(ms)
                    .ok_or_else(|| StoreError::Corrupt(format!("attribute `first_seen_at`: {ms}")))?;
                Ok(SeenType { scope: scope.clone(), event_type: a.s("event_type")?.to_string(), first_seen_at })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        let next = more.then(|| items.last().map(|t| t.event_type.clone())).flatten();
        Ok(Page { items, next })
    }

    /// One `GetItem` (strongly consistent: a registration reads before it
    /// writes) of the catalog item keyed by the type.
    async fn catalog_get(&self, event_type: &str) -> StoreResult<Option<CatalogEntry>> {
        let key = HashMap::from([("scope".to_string(), s(CATALOG_SCOPE)), ("event_type".to_string(), s(event_type))]);
        get_item(&self.client, &self.table, key, true).await?.map(|a| entry(&a)).transpose()
    }

    /// One `PutItem`, conditional on no item (`read` `None`) or on the
    /// stored `updated_at` being `read`.
    async fn catalog_put(&self, e: &CatalogEntry, read: Option<chrono::DateTime<Utc>>) -> StoreResult<bool> {
        let data = serde_json::to_string(e).map_err(|x| StoreError::Corrupt(format!("catalog entry: {x}")))?;
        let mut a = Attrs::new();
        a.put_s("scope", CATALOG_SCOPE)
            .put_s("event_type", e.event_type())
            .put_s("name", &e.name)
            .put_n("version", e.version)
            .put_n("updated_at", e.updated_at.timestamp_millis())
            .put_s("data", data);
        let put = self.client.put_item().table_name(&self.table).set_item(Some(a.into_sdk()));
        let put = match read {
            None => put.condition_expression("attribute_not_exists(#s)").expression_attribute_names("#s", "scope"),
            Some(r) => put
                .condition_expression("#u = :r")
                .expression_attribute_names("#u", "updated_at")
                .expression_attribute_values(":r", super::n(r.timestamp_millis())),
        };
        written("PutItem", &self.table, put.send().await)
    }

    /// `Query` on the catalog's scope in type order ([`Self::query_page`]).
    async fn catalog_page(&self, limit: usize, after: Option<&str>) -> StoreResult<Page<CatalogEntry>> {
        let (found, more) = self.query_page(CATALOG_SCOPE, limit, after, None).await?;
        let items = found.iter().map(entry).collect::<StoreResult<Vec<_>>>()?;
        let next = more.then(|| items.last().map(|e| e.event_type())).flatten();
        Ok(Page { items, next })
    }

    /// `GetItem` of version 1 (the type `name`) and a `Query` of the sort
    /// key range `name.v0` to `name.v:` (every `name.v<digit>…`), keeping
    /// the versions of `name` ([`shared::routing::version_of`]): at most
    /// [`shared::catalog::MAX_VERSION`] items and the rare types that only
    /// look like versions.
    async fn catalog_versions(&self, name: &str) -> StoreResult<Vec<CatalogEntry>> {
        let mut out: Vec<CatalogEntry> = self.catalog_get(name).await?.into_iter().collect();
        let range = (format!("{name}.v0"), format!("{name}.v:"));
        let mut after: Option<String> = None;
        loop {
            let (found, more) = self
                .query_page(CATALOG_SCOPE, shared::catalog::MAX_VERSION as usize, after.as_deref(), Some(&range))
                .await?;
            for a in &found {
                let t = a.s("event_type")?;
                if shared::routing::version_of(t).is_some_and(|(base, _)| base == name) {
                    out.push(entry(a)?);
                }
            }
            after = found.last().map(|a| a.s("event_type").map(str::to_string)).transpose()?;
            if !more || out.len() >= shared::catalog::MAX_VERSION as usize {
                break;
            }
        }
        out.sort_by_key(|e| e.version);
        Ok(out)
    }
}

/// The scope under which the catalog's items are kept in EventTypesTable
/// (no [`TypeScope`] is written `c`).
pub const CATALOG_SCOPE: &str = "c";

/// A catalog item's entry (its `data`).
fn entry(a: &Attrs) -> StoreResult<CatalogEntry> {
    serde_json::from_str(a.s("data")?).map_err(|e| StoreError::Corrupt(format!("attribute `data`: {e}")))
}

impl DynamoEventTypes {
    /// `Query` on partition `scope` in type order, after the type `after`,
    /// within `range` (inclusive) if given ([`super::query_after`]).
    async fn query_page(
        &self,
        scope: &str,
        limit: usize,
        after: Option<&str>,
        range: Option<&(String, String)>,
    ) -> StoreResult<(Vec<Attrs>, bool)> {
        let within = range.map(|(lo, hi)| (lo.as_str(), hi.as_str()));
        let keys = super::SortKeys { attr: "event_type", after, within };
        super::query_after(&self.client, &self.table, None, ("scope", scope), keys, limit).await
    }
}
