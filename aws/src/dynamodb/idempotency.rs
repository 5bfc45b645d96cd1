//! IdempotencyTable: the records of idempotency keys
//! ([`shared::idempotency`]), written only by conditional requests.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use chrono::{DateTime, Utc};

use super::{get_by_id, n, s, written};
use crate::item::Attrs;
use shared::error::StoreError;
use shared::idempotency::IdempotencyRecord;
use shared::ports::{IdempotencyStore, StoreResult};

/// IdempotencyTable: one item per key's record (`id`), with `fingerprint`,
/// `token`, `lease_until` (epoch seconds), the sealed `response` once
/// answered, and `expires_at` (epoch seconds), the table's TTL attribute.
/// TTL deletes expired items late (typically within days), so every read
/// and condition compares `expires_at` with the time itself.
#[derive(Clone)]
pub struct DynamoIdempotency {
    client: Client,
    table: String,
}

impl DynamoIdempotency {
    /// The adapter over `table`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoIdempotency { client, table: table.into() }
    }
}

fn to_attrs(r: &IdempotencyRecord) -> Attrs {
    let mut a = Attrs::new();
    a.put_s("id", &r.id)
        .put_s("fingerprint", &r.fingerprint)
        .put_s("token", &r.token)
        .put_n("lease_until", r.lease_until.timestamp())
        .put_opt_s("response", r.response.clone())
        .put_n("expires_at", r.expires_at.timestamp());
    a
}

fn time(a: &Attrs, name: &str) -> Result<DateTime<Utc>, StoreError> {
    let secs: i64 = a.n(name)?;
    DateTime::from_timestamp(secs, 0).ok_or_else(|| StoreError::Corrupt(format!("attribute `{name}`: {secs}")))
}

fn from_attrs(a: &Attrs) -> Result<IdempotencyRecord, StoreError> {
    Ok(IdempotencyRecord {
        id: a.s("id")?.to_string(),
        fingerprint: a.s("fingerprint")?.to_string(),
        token: a.s("token")?.to_string(),
        lease_until: time(a, "lease_until")?,
        response: a.opt_s("response")?.map(str::to_string),
        expires_at: time(a, "expires_at")?,
    })
}

#[async_trait]
impl IdempotencyStore for DynamoIdempotency {
    /// One strongly consistent `GetItem`; an item past `expires_at` that
    /// TTL has not deleted yet is absent.
    async fn get(&self, id: &str, now: DateTime<Utc>) -> StoreResult<Option<IdempotencyRecord>> {
        let Some(a) = get_by_id(&self.client, &self.table, id).await? else { return Ok(None) };
        let r = from_attrs(&a)?;
        Ok((!r.is_expired(now)).then_some(r))
    }

    /// One `PutItem` on condition that no item holds the id, or that the
    /// one stored expired, or that it has no response and its lease is over.
    async fn claim(&self, claim: &IdempotencyRecord, now: DateTime<Utc>) -> StoreResult<bool> {
        let res = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(to_attrs(claim).into_sdk()))
            .condition_expression(
                "attribute_not_exists(#id) OR #exp <= :now OR (attribute_not_exists(#resp) AND #lease <= :now)",
            )
            .set_expression_attribute_names(Some(HashMap::from([
                ("#id".to_string(), "id".to_string()),
                ("#exp".to_string(), "expires_at".to_string()),
                ("#resp".to_string(), "response".to_string()),
                ("#lease".to_string(), "lease_until".to_string()),
            ])))
            .expression_attribute_values(":now", n(now.timestamp()))
            .send()
            .await;
        written("PutItem", &self.table, res)
    }

    /// One `PutItem` on condition that the stored item's `token` is still
    /// the claim's.
    async fn complete(&self, done: &IdempotencyRecord) -> StoreResult<bool> {
        let res = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(to_attrs(done).into_sdk()))
            .condition_expression("#t = :t")
            .expression_attribute_names("#t", "token")
            .expression_attribute_values(":t", s(&done.token))
            .send()
            .await;
        written("PutItem", &self.table, res)
    }

    /// One `DeleteItem` on condition that the item is still held by `token`
    /// and has no response.
    async fn release(&self, id: &str, token: &str) -> StoreResult<()> {
        let res = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("id", s(id))
            .condition_expression("#t = :t AND attribute_not_exists(#resp)")
            .set_expression_attribute_names(Some(HashMap::from([
                ("#t".to_string(), "token".to_string()),
                ("#resp".to_string(), "response".to_string()),
            ])))
            .expression_attribute_values(":t", s(token))
            .send()
            .await;
        written("DeleteItem", &self.table, res).map(|_| ())
    }
}

/// The port where the function has no IdempotencyTable (only the API
/// function takes idempotency keys): every call fails, naming the missing
/// variable.
pub struct IdempotencyNotConfigured;

impl IdempotencyNotConfigured {
    fn error() -> StoreError {
        StoreError::Backend {
            message: "IDEMPOTENCY_TABLE is not set for this function".into(),
            retryable: false,
            source: None,
        }
    }
}

#[async_trait]
impl IdempotencyStore for IdempotencyNotConfigured {
    async fn get(&self, _: &str, _: DateTime<Utc>) -> StoreResult<Option<IdempotencyRecord>> {
        Err(Self::error())
    }
    async fn claim(&self, _: &IdempotencyRecord, _: DateTime<Utc>) -> StoreResult<bool> {
        Err(Self::error())
    }
    async fn complete(&self, _: &IdempotencyRecord) -> StoreResult<bool> {
        Err(Self::error())
    }
    async fn release(&self, _: &str, _: &str) -> StoreResult<()> {
        Err(Self::error())
    }
}
