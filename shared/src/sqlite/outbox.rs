//! The outbox: rows announcing new events, sagas and attempts, written in
//! the same transaction as the row they announce. `hookline serve` reads them
//! in order, hands the records to the stage functions, and deletes them only
//! after the stage succeeded (at-least-once, like a DynamoDB stream).

use rusqlite::params;

use super::{decode, sql, Db, Stream};
use crate::attempt::Attempt;
use crate::event::EventRecord;
use crate::ports::StoreResult;
use crate::saga::Saga;

/// Reader of the outbox streams (one consumer per stream).
#[derive(Clone)]
pub struct Outbox(pub Db);

impl Outbox {
    async fn next<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        stream: Stream,
        join: &'static str,
        after: i64,
        max: usize,
    ) -> StoreResult<Vec<(i64, T)>> {
        let q = format!(
            "SELECT o.seq, t.data FROM outbox o JOIN {join} WHERE o.stream = ?1 AND o.seq > ?3 ORDER BY o.seq LIMIT ?2"
        );
        let name = stream.name();
        self.0
            .call(move |c, _| {
                let mut st = c.prepare_cached(&q).map_err(sql)?;
                let rows = st.query_map(params![name, max as i64, after], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))).map_err(sql)?;
                rows.map(|r| {
                    let (seq, data) = r.map_err(sql)?;
                    Ok((seq, decode(&data)?))
                })
                .collect()
            })
            .await
    }

    /// The oldest unacknowledged new events after sequence number `after`
    /// (0 after a restart: everything not acknowledged is read again).
    pub async fn events(&self, after: i64, max: usize) -> StoreResult<Vec<(i64, EventRecord)>> {
        self.next(Stream::Events, "events t ON t.id = o.key", after, max).await
    }

    /// The oldest unacknowledged new sagas after `after`.
    pub async fn sagas(&self, after: i64, max: usize) -> StoreResult<Vec<(i64, Saga)>> {
        self.next(Stream::Sagas, "sagas t ON t.id = o.key", after, max).await
    }

    /// The oldest unacknowledged attempts after `after`.
    pub async fn attempts(&self, after: i64, max: usize) -> StoreResult<Vec<(i64, Attempt)>> {
        self.next(Stream::Attempts, "attempts t ON t.saga_id = o.key AND t.attempt = o.attempt", after, max).await
    }

    /// Marks outbox rows processed.
    pub async fn ack(&self, seqs: Vec<i64>) -> StoreResult<()> {
        self.0
            .call(move |c, _| {
                let mut st = c.prepare_cached("DELETE FROM outbox WHERE seq = ?1").map_err(sql)?;
                for s in &seqs {
                    st.execute([s]).map_err(sql)?;
                }
                Ok(())
            })
            .await
    }

    /// Rows left in a stream (queue depth for metrics).
    pub async fn pending(&self, stream: Stream) -> StoreResult<u64> {
        let name = stream.name();
        self.0
            .call(move |c, _| c.query_row("SELECT COUNT(*) FROM outbox WHERE stream = ?1", [name], |r| r.get::<_, i64>(0)).map(|n| n as u64).map_err(sql))
            .await
    }
}
