//! [`HealthStore`] on DynamoDB: the HealthTable, one item per subscription
//! that ever had a failure (`id`, `version`, the record as JSON in `data`),
//! written with a `PutItem` conditional on the version it replaces.

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;

use shared::error::StoreError;
use shared::health::Health;
use shared::ids::SubscriptionId;
use shared::ports::{HealthStore, StoreResult};

/// The HealthTable.
pub struct DynamoHealth {
    client: Client,
    table: String,
}

impl DynamoHealth {
    /// The store on `table`.
    pub fn new(client: Client, table: &str) -> Self {
        DynamoHealth { client, table: table.to_string() }
    }

    fn error<E>(
        &self,
        op: &str,
        e: aws_sdk_dynamodb::error::SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>,
    ) -> StoreError
    where
        E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + Send + Sync + 'static,
    {
        crate::sdk::store_error(format!("dynamodb {op} on {}: {}", self.table, DisplayErrorContext(&e)), e)
    }
}

#[async_trait]
impl HealthStore for DynamoHealth {
    async fn get(&self, id: &SubscriptionId) -> StoreResult<Option<Health>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("id", AttributeValue::S(id.to_string()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.error("GetItem", e))?;
        let Some(item) = out.item() else { return Ok(None) };
        let data = item
            .get("data")
            .and_then(|v| v.as_s().ok())
            .ok_or_else(|| StoreError::Corrupt(format!("health item {id} has no data")))?;
        serde_json::from_str(data).map(Some).map_err(|e| StoreError::Corrupt(format!("health item {id}: {e}")))
    }

    async fn put(&self, id: &SubscriptionId, next: &Health, expected: u64) -> StoreResult<bool> {
        let data = serde_json::to_string(next).expect("health serializes");
        let req = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("id", AttributeValue::S(id.to_string()))
            .item("version", AttributeValue::N(next.version.to_string()))
            .item("data", AttributeValue::S(data));
        let req = if expected == 0 {
            req.condition_expression("attribute_not_exists(id)")
        } else {
            req.condition_expression("version = :v")
                .expression_attribute_values(":v", AttributeValue::N(expected.to_string()))
        };
        match req.send().await {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().and_then(|s| s.code()) == Some("ConditionalCheckFailedException") => {
                Ok(false)
            }
            Err(e) => Err(self.error("PutItem", e)),
        }
    }
}
