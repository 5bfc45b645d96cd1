//! The `idempotency_keys` table: the records of idempotency keys
//! ([`shared::idempotency`]), written only by conditional statements.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, OptionalExtension};

use crate::{sql, Db};
use shared::error::StoreError;
use shared::idempotency::IdempotencyRecord;
use shared::ports::{IdempotencyStore, StoreResult};

/// `idempotency_keys`: one row per key's record; times in seconds. Expired
/// rows are deleted by the purge (`expires_at` index) and read as absent
/// until then.
#[derive(Clone)]
pub struct SqliteIdempotency(pub Db);

/// A time as stored (whole seconds).
fn secs(t: DateTime<Utc>) -> i64 {
    t.timestamp()
}

fn time(s: i64) -> Result<DateTime<Utc>, StoreError> {
    DateTime::from_timestamp(s, 0).ok_or_else(|| StoreError::Corrupt(format!("idempotency record time {s}")))
}

#[async_trait]
impl IdempotencyStore for SqliteIdempotency {
    async fn get(&self, id: &str, now: DateTime<Utc>) -> StoreResult<Option<IdempotencyRecord>> {
        let id = id.to_string();
        let row = self
            .0
            .call(move |c, _| {
                c.prepare_cached(
                    "SELECT fingerprint, token, lease_until, response, expires_at FROM idempotency_keys \
                     WHERE id = ?1 AND expires_at > ?2",
                )
                .map_err(sql)?
                .query_row(params![id, secs(now)], |r| {
                    Ok((
                        id.clone(),
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, Option<String>>(3)?,
                        r.get::<_, i64>(4)?,
                    ))
                })
                .optional()
                .map_err(sql)
            })
            .await?;
        row.map(|(id, fingerprint, token, lease, response, expires)| {
            Ok(IdempotencyRecord {
                id,
                fingerprint,
                token,
                lease_until: time(lease)?,
                response,
                expires_at: time(expires)?,
            })
        })
        .transpose()
    }

    /// One upsert whose update applies only over an expired record or an
    /// abandoned claim.
    async fn claim(&self, claim: &IdempotencyRecord, now: DateTime<Utc>) -> StoreResult<bool> {
        let r = claim.clone();
        self.0
            .call(move |c, _| {
                let n = c
                    .prepare_cached(
                        "INSERT INTO idempotency_keys (id, fingerprint, token, lease_until, response, expires_at) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                         ON CONFLICT (id) DO UPDATE SET fingerprint = excluded.fingerprint, token = excluded.token, \
                         lease_until = excluded.lease_until, response = excluded.response, \
                         expires_at = excluded.expires_at \
                         WHERE idempotency_keys.expires_at <= ?7 \
                         OR (idempotency_keys.response IS NULL AND idempotency_keys.lease_until <= ?7)",
                    )
                    .map_err(sql)?
                    .execute(params![
                        r.id,
                        r.fingerprint,
                        r.token,
                        secs(r.lease_until),
                        r.response,
                        secs(r.expires_at),
                        secs(now)
                    ])
                    .map_err(sql)?;
                Ok(n == 1)
            })
            .await
    }

    async fn complete(&self, done: &IdempotencyRecord) -> StoreResult<bool> {
        let r = done.clone();
        self.0
            .call(move |c, _| {
                let n = c
                    .prepare_cached(
                        "UPDATE idempotency_keys SET fingerprint = ?2, lease_until = ?3, response = ?4, \
                         expires_at = ?5 WHERE id = ?1 AND token = ?6",
                    )
                    .map_err(sql)?
                    .execute(params![r.id, r.fingerprint, secs(r.lease_until), r.response, secs(r.expires_at), r.token])
                    .map_err(sql)?;
                Ok(n == 1)
            })
            .await
    }

    async fn release(&self, id: &str, token: &str) -> StoreResult<()> {
        let (id, token) = (id.to_string(), token.to_string());
        self.0
            .call(move |c, _| {
                c.prepare_cached("DELETE FROM idempotency_keys WHERE id = ?1 AND token = ?2 AND response IS NULL")
                    .map_err(sql)?
                    .execute(params![id, token])
                    .map_err(sql)?;
                Ok(())
            })
            .await
    }
}
