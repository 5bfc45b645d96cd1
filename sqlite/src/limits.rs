//! [`LimitStore`] on SQLite: one row per held slot (`slot:<n>:<subscription>`)
//! and one per rate-limited subscription (`rate:<subscription>`), checked
//! and written in one transaction on the writer thread.

use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension};

use super::{now_ms, sql, Db};
use shared::ids::SubscriptionId;
use shared::ports::{Admission, Lease, LimitStore, StoreResult};

/// The `subscription_limits` table.
pub struct SqliteLimits(pub Db);

fn slot_key(sub: &SubscriptionId, slot: u32) -> String {
    format!("slot:{slot}:{sub}")
}

fn rate_key(sub: &SubscriptionId) -> String {
    format!("rate:{sub}")
}

/// How long a job waits for a slot: until the soonest lease could end, at
/// most [`shared::ports::SLOT_RETRY`] (a request usually ends long before its lease).
fn slot_wait(ms: i64) -> Duration {
    Duration::from_millis(ms.max(1) as u64).min(shared::ports::SLOT_RETRY)
}

#[async_trait]
impl LimitStore for SqliteLimits {
    async fn admit(
        &self,
        sub: &SubscriptionId,
        max_in_flight: Option<u32>,
        interval: Option<Duration>,
        lease: Duration,
    ) -> StoreResult<Admission> {
        let sub = sub.clone();
        self.0
            .call(move |c, _| {
                let now = now_ms();
                let until = |key: &str| -> Result<Option<i64>, _> {
                    c.prepare_cached("SELECT until FROM subscription_limits WHERE key = ?1")
                        .map_err(sql)?
                        .query_row([key], |r| r.get::<_, i64>(0))
                        .optional()
                        .map_err(sql)
                };
                // A free slot (none held, or its lease ran out), else how
                // long until the first lease ends.
                let mut slot = None;
                if let Some(max) = max_in_flight {
                    let mut soonest = i64::MAX;
                    for k in 0..max {
                        match until(&slot_key(&sub, k))? {
                            Some(u) if u > now => soonest = soonest.min(u),
                            _ => {
                                slot = Some(k);
                                break;
                            }
                        }
                    }
                    if slot.is_none() {
                        return Ok(Admission::Wait(slot_wait(soonest - now)));
                    }
                }
                if let Some(i) = interval {
                    let early = shared::subscription::rate_tolerance(i);
                    if let Some(next) = until(&rate_key(&sub))?.filter(|t| *t > now + early) {
                        return Ok(Admission::Wait(Duration::from_millis((next - now) as u64)));
                    }
                    c.execute(
                        "INSERT INTO subscription_limits (key, token, until) VALUES (?1, '', ?2)
                         ON CONFLICT (key) DO UPDATE SET until = excluded.until",
                        params![rate_key(&sub), now + i.as_millis() as i64],
                    )
                    .map_err(sql)?;
                }
                let token = uuid::Uuid::new_v4().simple().to_string();
                if let Some(k) = slot {
                    c.execute(
                        "INSERT INTO subscription_limits (key, token, until) VALUES (?1, ?2, ?3)
                         ON CONFLICT (key) DO UPDATE SET token = excluded.token, until = excluded.until",
                        params![slot_key(&sub, k), token, now + lease.as_millis() as i64],
                    )
                    .map_err(sql)?;
                }
                Ok(Admission::Granted(Lease { subscription_id: sub.clone(), slot, token }))
            })
            .await
    }

    async fn book_starts(&self, sub: &SubscriptionId, interval: Duration, count: u32) -> StoreResult<Duration> {
        let key = rate_key(sub);
        self.0
            .call(move |c, _| {
                let now = now_ms();
                let next = c
                    .prepare_cached("SELECT until FROM subscription_limits WHERE key = ?1")
                    .map_err(sql)?
                    .query_row([&key], |r| r.get::<_, i64>(0))
                    .optional()
                    .map_err(sql)?;
                let first = shared::bounds::first_start(now, next, interval);
                c.execute(
                    "INSERT INTO subscription_limits (key, token, until) VALUES (?1, '', ?2)
                     ON CONFLICT (key) DO UPDATE SET until = excluded.until",
                    params![key, first + interval.as_millis() as i64 * i64::from(count.max(1))],
                )
                .map_err(sql)?;
                Ok(Duration::from_millis((first - now).max(0) as u64))
            })
            .await
    }

    async fn release(&self, lease: &Lease) -> StoreResult<()> {
        let Some(slot) = lease.slot else { return Ok(()) };
        let (key, token) = (slot_key(&lease.subscription_id, slot), lease.token.clone());
        self.0
            .call(move |c, _| {
                c.execute("DELETE FROM subscription_limits WHERE key = ?1 AND token = ?2", params![key, token])
                    .map_err(sql)?;
                Ok(())
            })
            .await
    }
}
