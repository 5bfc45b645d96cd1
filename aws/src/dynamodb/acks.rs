//! AcknowledgementsTable: subscribers' acknowledgements ([`shared::ack`]),
//! the latest per (subscription, webhook id): one `PutItem` replaces it,
//! one strongly consistent `GetItem` reads it, TTL forgets it.

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;

use super::{backend, s, written};
use crate::item::Attrs;
use shared::ack::Acknowledgement;
use shared::ids::{SubscriptionId, WebhookId};
use shared::ports::{AckStore, StoreResult};

/// AcknowledgementsTable: partition key `subscription_id`, sort key
/// `webhook_id`, the record as JSON in `data` (a reason of at most 1 KB
/// and a reference of 256 bytes: well under the 400 KB item limit), and
/// `expires_at` (epoch seconds), the table's TTL attribute. TTL deletes
/// late, so a read compares `expires_at` with the time itself.
#[derive(Clone)]
pub struct DynamoAcks {
    client: Client,
    table: String,
}

impl DynamoAcks {
    /// The adapter over `table`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoAcks { client, table: table.into() }
    }
}

#[async_trait]
impl AckStore for DynamoAcks {
    /// One unconditional `PutItem`: the latest acknowledgement replaces the
    /// one stored.
    async fn put(&self, ack: &Acknowledgement) -> StoreResult<()> {
        let mut a = Attrs::new();
        a.put_s("subscription_id", ack.subscription_id.as_str())
            .put_s("webhook_id", ack.webhook_id.as_str())
            .put_s("data", serde_json::to_string(ack).expect("records serialize"))
            .put_n("expires_at", ack.expires_at.timestamp());
        let res = self.client.put_item().table_name(&self.table).set_item(Some(a.into_sdk())).send().await;
        written("PutItem", &self.table, res).map(|_| ())
    }

    /// One strongly consistent `GetItem`; an item past `expires_at` that
    /// TTL has not deleted yet is absent.
    async fn get(&self, subscription: &SubscriptionId, webhook_id: &WebhookId) -> StoreResult<Option<Acknowledgement>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("subscription_id", s(subscription.as_str()))
            .key("webhook_id", s(webhook_id.as_str()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| backend("GetItem", &self.table, e))?;
        let Some(item) = out.item() else { return Ok(None) };
        let a = Attrs::from_sdk(item);
        let ack: Acknowledgement = a.data()?;
        Ok((ack.expires_at > chrono::Utc::now()).then_some(ack))
    }
}
