//! The outbox: rows announcing new events, sagas and attempts (one table per
//! stream), written in the same transaction as the row they announce.
//! `hookline serve` reads them in order, hands the records to the stage
//! functions, and deletes them only after the stage succeeded
//! (at-least-once, like a DynamoDB stream).

use rusqlite::params;

use super::{decode, sql, Db, OutboxTable, Stream};
use rusqlite::OptionalExtension;
use shared::attempt::Attempt;
use shared::event::EventRecord;
use shared::ports::{GivenUp, StoreResult, StreamFailures};
use shared::saga::Saga;

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
            "SELECT o.seq, t.data FROM {} o JOIN {join} WHERE o.seq > ?2 ORDER BY o.seq LIMIT ?1",
            table(stream).name
        );
        let rows: Vec<(i64, String)> = self
            .0
            .call(move |c, _| {
                let mut st = c.prepare_cached(&q).map_err(sql)?;
                let rows = st
                    .query_map(params![max as i64, after], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
                    .map_err(sql)?;
                rows.collect::<Result<_, _>>().map_err(sql)
            })
            .await?;
        // Decoded here, off the writer thread.
        rows.into_iter().map(|(seq, data)| Ok((seq, decode(&data)?))).collect()
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

    /// Marks rows of `stream` processed, in a later commit, without waiting
    /// for it ([`Db::submit_lazy`]): a row whose acknowledgement is lost is
    /// read again after a restart, and the stages are idempotent.
    pub fn ack(&self, stream: Stream, seqs: Vec<i64>) -> StoreResult<()> {
        let table = table(stream).name;
        self.0.submit_lazy("outbox acknowledgement", move |c, _| delete_rows(c, table, &seqs))
    }

    /// Gives up on rows of `stream` the stage failed on too often (`hookline
    /// serve`'s counterpart of a stream mapping's on-failure destination):
    /// they move to `outbox_failed` as the stream's `-failed` twin, where
    /// [`SqliteStreamFailures`] hands them to the reconciler, and the stream
    /// goes on without them.
    pub async fn give_up(&self, stream: Stream, seqs: Vec<i64>) -> StoreResult<()> {
        let OutboxTable { name: table, attempt } = table(stream);
        let failed = format!("{}-failed", stream.name());
        let (copy, delete) = (
            format!("INSERT INTO outbox_failed (stream, key, attempt) SELECT ?2, key, {attempt} FROM {table} WHERE seq = ?1"),
            format!("DELETE FROM {table} WHERE seq = ?1"),
        );
        self.0
            .call(move |c, _| {
                let mut copy = c.prepare_cached(&copy).map_err(sql)?;
                let mut delete = c.prepare_cached(&delete).map_err(sql)?;
                for s in &seqs {
                    copy.execute(params![s, failed]).map_err(sql)?;
                    delete.execute([s]).map_err(sql)?;
                }
                Ok(())
            })
            .await
    }

    /// Rows left in a stream (queue depth for metrics).
    pub async fn pending(&self, stream: Stream) -> StoreResult<u64> {
        let q = format!("SELECT COUNT(*) FROM {}", table(stream).name);
        self.0.call(move |c, _| c.query_row(&q, [], |r| r.get::<_, i64>(0)).map(|n| n as u64).map_err(sql)).await
    }
}

/// The outbox table of `stream`; only the three record streams have one.
pub(super) fn table(stream: Stream) -> OutboxTable {
    stream.outbox_table().expect("an outbox stream (events, sagas or attempts)")
}

/// Deletes these rows of one outbox table.
fn delete_rows(c: &rusqlite::Connection, table: &str, seqs: &[i64]) -> StoreResult<()> {
    let mut st = c.prepare_cached(&format!("DELETE FROM {table} WHERE seq = ?1")).map_err(sql)?;
    for s in seqs {
        st.execute([s]).map_err(sql)?;
    }
    Ok(())
}

/// The outbox rows `hookline serve` gave up on ([`Outbox::give_up`]), as
/// the [`StreamFailures`] port: each row is one batch, resolved to the
/// record it announces.
#[derive(Clone)]
pub struct SqliteStreamFailures(pub Db);

#[async_trait::async_trait]
impl StreamFailures for SqliteStreamFailures {
    /// Rows are read whole at once: nothing is cut short by `_deadline`.
    async fn take(&self, max: usize, _deadline: tokio::time::Instant) -> StoreResult<Vec<GivenUp>> {
        self.0
            .call(move |c, _| {
                let mut st = c
                    .prepare_cached("SELECT seq, stream, key, attempt FROM outbox_failed ORDER BY seq LIMIT ?1")
                    .map_err(sql)?;
                let rows: Vec<(i64, String, String, Option<i64>)> = st
                    .query_map([max as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                    .map_err(sql)?
                    .collect::<Result<_, _>>()
                    .map_err(sql)?;
                let mut out = Vec::with_capacity(rows.len());
                for (seq, stream, key, attempt) in rows {
                    let mut g = GivenUp { receipt: seq.to_string(), ..GivenUp::default() };
                    let data: Option<String> = match stream.as_str() {
                        "events-failed" => c.query_row("SELECT data FROM events WHERE id = ?1", [&key], |r| r.get(0)),
                        "sagas-failed" => c.query_row("SELECT data FROM sagas WHERE id = ?1", [&key], |r| r.get(0)),
                        _ => c.query_row(
                            "SELECT data FROM attempts WHERE saga_id = ?1 AND attempt = ?2",
                            params![key, attempt.unwrap_or(0)],
                            |r| r.get(0),
                        ),
                    }
                    .optional()
                    .map_err(sql)?;
                    match (stream.as_str(), data) {
                        (_, None) => g.unresolved = Some(format!("{stream} row {seq}: {key} is no longer stored")),
                        ("events-failed", Some(d)) => g.events.push(decode(&d)?),
                        ("sagas-failed", Some(d)) => g.sagas.push(decode(&d)?),
                        (_, Some(d)) => g.attempts.push(decode(&d)?),
                    }
                    out.push(g);
                }
                Ok(out)
            })
            .await
    }

    async fn done(&self, receipts: &[String]) -> StoreResult<()> {
        let seqs: Vec<i64> = receipts.iter().filter_map(|r| r.parse().ok()).collect();
        self.0.call_lazy(move |c, _| delete_rows(c, "outbox_failed", &seqs)).await
    }
}
