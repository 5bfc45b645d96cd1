//! JobsTable: bulk jobs ([`shared::bulk`]).

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;

use super::{get_by_id, n, put_if_absent, written};
use crate::item::{self, Attrs};
use shared::bulk::{Job, TenantSlots};
use shared::ports::{JobStore, StoreResult};

/// JobsTable: one item per bulk job ([`shared::bulk`]), rewritten on
/// condition of its `version`; expires `retention` after its last write.
#[derive(Clone)]
pub struct DynamoJobs {
    client: Client,
    table: String,
    retention: chrono::Duration,
}

impl DynamoJobs {
    /// The adapter over `table`; a job is kept `retention` after its last change.
    pub fn new(client: Client, table: impl Into<String>, retention: chrono::Duration) -> Self {
        DynamoJobs { client, table: table.into(), retention }
    }

    fn attrs(&self, job: &Job) -> StoreResult<Attrs> {
        item::job_to_attrs(job, (job.updated_at + self.retention).timestamp())
    }
}

#[async_trait]
impl JobStore for DynamoJobs {
    async fn create(&self, job: &Job) -> StoreResult<bool> {
        put_if_absent(&self.client, &self.table, "id", self.attrs(job)?).await
    }

    async fn get(&self, id: &str) -> StoreResult<Option<Job>> {
        get_by_id(&self.client, &self.table, id).await?.map(|a| item::job_from_attrs(&a)).transpose()
    }

    /// One `PutItem` on condition that `version` is still the expected one.
    async fn update(&self, job: &Job, expected_version: u64) -> StoreResult<bool> {
        let res = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(self.attrs(job)?.into_sdk()))
            .condition_expression("#v = :v")
            .expression_attribute_names("#v", "version")
            .expression_attribute_values(":v", n(expected_version))
            .send()
            .await;
        written("PutItem", &self.table, res)
    }

    /// An item of the table keyed `slots#…` (never a job id), read
    /// strongly consistent.
    async fn slots(&self, key: &str) -> StoreResult<Option<TenantSlots>> {
        get_by_id(&self.client, &self.table, key).await?.map(|a| a.data()).transpose()
    }

    /// One `PutItem`, on condition that the item is absent (version 0) or
    /// its `version` is still the expected one; it expires `retention`
    /// after its last write, like a job.
    async fn put_slots(&self, key: &str, slots: &TenantSlots, expected_version: u64) -> StoreResult<bool> {
        let a = item::slots_to_attrs(key, slots, (chrono::Utc::now() + self.retention).timestamp())?;
        if expected_version == 0 {
            return put_if_absent(&self.client, &self.table, "id", a).await;
        }
        let res = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(a.into_sdk()))
            .condition_expression("#v = :v")
            .expression_attribute_names("#v", "version")
            .expression_attribute_values(":v", n(expected_version))
            .send()
            .await;
        written("PutItem", &self.table, res)
    }
}
