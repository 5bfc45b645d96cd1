//! The `acknowledgements` table: subscribers' acknowledgements
//! ([`shared::ack`]), the latest per (subscription, webhook id), read by
//! its primary key; the purge deletes expired rows through
//! `acknowledgements_by_expiry`.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension};

use crate::{decode, encode, sql, Db};
use shared::ack::Acknowledgement;
use shared::ids::{SubscriptionId, WebhookId};
use shared::ports::{AckStore, StoreResult};

/// `acknowledgements`: one row per (subscription, webhook id), the record
/// as JSON.
#[derive(Clone)]
pub struct SqliteAcks(pub Db);

#[async_trait]
impl AckStore for SqliteAcks {
    async fn put(&self, ack: &Acknowledgement) -> StoreResult<()> {
        let row =
            (ack.subscription_id.to_string(), ack.webhook_id.to_string(), encode(ack), ack.expires_at.timestamp());
        self.0
            .call(move |c, _| {
                c.prepare_cached(
                    "INSERT OR REPLACE INTO acknowledgements (subscription_id, webhook_id, data, expires_at) \
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(sql)?
                .execute(params![row.0, row.1, row.2, row.3])
                .map_err(sql)?;
                Ok(())
            })
            .await
    }

    async fn get(&self, subscription: &SubscriptionId, webhook_id: &WebhookId) -> StoreResult<Option<Acknowledgement>> {
        let (s, w, now) = (subscription.to_string(), webhook_id.to_string(), chrono::Utc::now().timestamp());
        let data: Option<String> = self
            .0
            .call(move |c, _| {
                c.prepare_cached(
                    "SELECT data FROM acknowledgements WHERE subscription_id = ?1 AND webhook_id = ?2 \
                     AND expires_at > ?3",
                )
                .map_err(sql)?
                .query_row(params![s, w, now], |r| r.get(0))
                .optional()
                .map_err(sql)
            })
            .await?;
        data.map(|d| decode(&d)).transpose()
    }
}
