//! EventTypesTable: the event types seen at ingest
//! ([`shared::event_types`]), inserted once per (scope, type) by a
//! conditional `PutItem` and listed by scope with `Query`.

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use chrono::DateTime;

use super::{all, query_after, written};
use crate::item::Attrs;
use shared::bounds::{all_bounded, MAX_STORE_IN_FLIGHT};
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

    /// `Query` on `scope`, after the type `after` (a key condition on the
    /// sort key), `Limit` one more than the page so the next page is
    /// known; followed while DynamoDB stops early (its 1 MB per call).
    async fn page(&self, scope: &TypeScope, limit: usize, after: Option<&str>) -> StoreResult<Page<SeenType>> {
        let text = scope.as_text();
        let (found, more) =
            query_after(&self.client, &self.table, None, ("scope", &text), "event_type", after, limit).await?;
        let mut items = Vec::with_capacity(found.len());
        for a in found {
            let ms: i64 = a.n("first_seen_at")?;
            let first_seen_at = DateTime::from_timestamp_millis(ms)
                .ok_or_else(|| StoreError::Corrupt(format!("attribute `first_seen_at`: {ms}")))?;
            items.push(SeenType { scope: scope.clone(), event_type: a.s("event_type")?.to_string(), first_seen_at });
        }
        let next = more.then(|| items.last().map(|t| t.event_type.clone())).flatten();
        Ok(Page { items, next })
    }
}
