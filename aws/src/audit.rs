//! [`AuditStore`] on DynamoDB: the AuditTable, one item per record (`id`;
//! `pos` = [`AuditRecord::position`]; `trail`, `action`, `actor`,
//! `subscription_id`, `tenant_id` as the keys of its indexes; the record as JSON in
//! `data`; `expires_at` for TTL, the audit retention after the record).
//!
//! A page is one `Query` (or a few) of the index of its most selective
//! filter, newest first (`ScanIndexForward: false`), `pos` bounded by the
//! time range and the cursor in the key condition; the other filters are a
//! `FilterExpression` on projected attributes. `Limit` applies before the
//! filter, so a page reads on until it is full, at most
//! [`MAX_QUERIES_PER_PAGE`] queries; then it ends early with a cursor at the
//! last item read, and the next page goes on from there. Never a `Scan`.
//!
//! Indexes (all projecting every attribute; cost per record written: one
//! write to the table, and one to each index whose key the record has,
//! so up to 5 for a record about a tenant's subscription, 3 at least):
//! - `by_time` (`trail` = `"audit"`, `pos`): every record. One partition
//!   key for the whole trail: audit records are operator actions and
//!   breaker flips, far below one partition's 1,000 writes a second.
//! - `by_action` (`action`, `pos`), `by_actor` (`actor`, `pos`),
//!   `by_subscription` (`subscription_id`, `pos`; sparse).
//! - `by_tenant` (`tenant_id`, `pos`; sparse): the records of one tenant's
//!   resources, which is all a tenant-bound key lists.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;

use crate::request::{backend, n, s, written};
use shared::audit::{AuditFilter, AuditRecord};
use shared::error::StoreError;
use shared::ports::{AuditStore, Page, StoreResult};

/// Most queries one page makes before it ends early (module docs).
pub const MAX_QUERIES_PER_PAGE: usize = 8;

/// The `trail` value of every record (the partition key of `by_time`).
const TRAIL: &str = "audit";

/// The AuditTable.
pub struct DynamoAudit {
    client: Client,
    table: String,
    retention: chrono::Duration,
}

impl DynamoAudit {
    /// The store on `table`; records expire `retention` after they were written.
    pub fn new(client: Client, table: &str, retention: chrono::Duration) -> Self {
        DynamoAudit { client, table: table.to_string(), retention }
    }
}

#[async_trait]
impl AuditStore for DynamoAudit {
    async fn append(&self, rec: &AuditRecord) -> StoreResult<()> {
        let data = serde_json::to_string(rec).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mut req = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("id", s(&rec.id))
            .item("pos", s(rec.position()))
            .item("trail", s(TRAIL))
            .item("action", s(rec.action.as_str()))
            .item("actor", s(&rec.actor))
            .item("data", s(data))
            .item("expires_at", n((rec.at + self.retention).timestamp()))
            .condition_expression("attribute_not_exists(id)");
        if let Some(sub) = &rec.subscription_id {
            req = req.item("subscription_id", s(sub.as_str()));
        }
        if let Some(t) = &rec.tenant_id {
            req = req.item("tenant_id", s(t.as_str()));
        }
        written("PutItem", &self.table, req.send().await).map(|_| ())
    }

    async fn page(&self, filter: &AuditFilter, limit: usize, after: Option<&str>) -> StoreResult<Page<AuditRecord>> {
        let (lo, hi) = filter.bounds(after);
        if lo > hi || limit == 0 {
            return Ok(Page { items: Vec::new(), next: None });
        }
        // The most selective filter picks the index; the others filter.
        let (index, key_attr, key_value) = if let Some(sub) = &filter.subscription_id {
            ("by_subscription", "subscription_id", sub.as_str().to_string())
        } else if let Some(t) = &filter.tenant_id {
            ("by_tenant", "tenant_id", t.as_str().to_string())
        } else if let Some(actor) = &filter.actor {
            ("by_actor", "actor", actor.clone())
        } else if let Some(action) = filter.action {
            ("by_action", "action", action.as_str().to_string())
        } else {
            ("by_time", "trail", TRAIL.to_string())
        };
        let mut names =
            HashMap::from([("#k".to_string(), key_attr.to_string()), ("#p".to_string(), "pos".to_string())]);
        let mut values =
            HashMap::from([(":k".to_string(), s(key_value)), (":lo".to_string(), s(lo)), (":hi".to_string(), s(hi))]);
        let mut conditions = Vec::new();
        for (attr, value) in [
            ("subscription_id", filter.subscription_id.as_ref().map(|s| s.as_str().to_string())),
            ("tenant_id", filter.tenant_id.as_ref().map(|t| t.as_str().to_string())),
            ("actor", filter.actor.clone()),
            ("action", filter.action.map(|a| a.as_str().to_string())),
        ] {
            if let Some(v) = value.filter(|_| attr != key_attr) {
                names.insert(format!("#{attr}"), attr.to_string());
                values.insert(format!(":{attr}"), s(v));
                conditions.push(format!("#{attr} = :{attr}"));
            }
        }
        let filter_expression = (!conditions.is_empty()).then(|| conditions.join(" AND "));
        let mut items: Vec<AuditRecord> = Vec::new();
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        for _ in 0..MAX_QUERIES_PER_PAGE {
            let want = limit + 1 - items.len();
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(index)
                .key_condition_expression("#k = :k AND #p BETWEEN :lo AND :hi")
                .set_filter_expression(filter_expression.clone())
                .set_expression_attribute_names(Some(names.clone()))
                .set_expression_attribute_values(Some(values.clone()))
                .scan_index_forward(false)
                .limit(i32::try_from(want).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| backend("Query", &self.table, e))?;
            for it in out.items() {
                let data = it
                    .get("data")
                    .and_then(|v| v.as_s().ok())
                    .ok_or_else(|| StoreError::Corrupt("audit item without data".into()))?;
                let rec: AuditRecord = serde_json::from_str(data).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                // BETWEEN is inclusive: the cursor's own record is skipped.
                if after.is_some_and(|a| a == rec.position()) {
                    continue;
                }
                items.push(rec);
            }
            if items.len() > limit {
                items.truncate(limit);
                let next = items.last().map(AuditRecord::position);
                return Ok(Page { items, next });
            }
            match out.last_evaluated_key() {
                Some(k) if !k.is_empty() => start = Some(k.clone()),
                _ => return Ok(Page { items, next: None }),
            }
        }
        // Out of queries for this page: the next goes on after the last item read.
        let next = start.and_then(|k| k.get("pos").and_then(|v| v.as_s().ok()).cloned());
        Ok(Page { items, next })
    }
}
