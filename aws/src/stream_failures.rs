//! The [`StreamFailures`] port on AWS: the stream mappings' on-failure
//! destination (an SQS queue) holds only pointers to the batches Lambda gave
//! up on (`DDBStreamBatchInfo`: stream, shard, first and last sequence
//! number). The records stay in the table's stream for 24 hours, so this
//! adapter reads them back from the stream (`GetShardIterator` at the first
//! sequence number, `GetRecords` up to the last) and decodes them as the
//! handlers would. A pointer whose records the stream no longer has, or that
//! cannot be read, is reported unresolved and left in the queue for an
//! operator (its alarm stays on).

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodbstreams::types::{AttributeValue as StreamValue, ShardIteratorType};
use serde::Deserialize;
use tokio::time::Instant;

use super::item::{self, Attr, Attrs};
use super::sqs::SqsQueue;
use shared::ports::{GivenUp, JobQueue, StoreResult, StreamFailures};

/// What Lambda writes to a stream mapping's on-failure destination (the
/// fields Hookline reads), per the Lambda Developer Guide, "Retaining
/// discarded batches for a DynamoDB event source".
#[derive(Debug, Deserialize)]
struct OnFailure {
    #[serde(rename = "DDBStreamBatchInfo")]
    batch: BatchInfo,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BatchInfo {
    shard_id: String,
    start_sequence_number: String,
    end_sequence_number: String,
    stream_arn: String,
}

/// Which table a stream belongs to.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Table {
    Events,
    Sagas,
    Attempts,
}

/// The on-failure queue and the streams it points into.
#[derive(Clone)]
pub struct DynamoStreamFailures {
    queue: SqsQueue,
    streams: aws_sdk_dynamodbstreams::Client,
    events_table: String,
    sagas_table: String,
    attempts_table: String,
}

impl DynamoStreamFailures {
    /// The adapter over the on-failure `queue` for the three tables' streams.
    pub fn new(
        queue: SqsQueue,
        streams: aws_sdk_dynamodbstreams::Client,
        events_table: &str,
        sagas_table: &str,
        attempts_table: &str,
    ) -> Self {
        DynamoStreamFailures {
            queue,
            streams,
            events_table: events_table.to_string(),
            sagas_table: sagas_table.to_string(),
            attempts_table: attempts_table.to_string(),
        }
    }

    /// The table of a stream ARN (`arn:aws:dynamodb:…:table/<name>/stream/<label>`).
    fn table_of(&self, stream_arn: &str) -> Option<Table> {
        let name = stream_arn.split("table/").nth(1)?.split('/').next()?;
        [
            (&self.events_table, Table::Events),
            (&self.sagas_table, Table::Sagas),
            (&self.attempts_table, Table::Attempts),
        ]
        .into_iter()
        .find(|(t, _)| t.as_str() == name)
        .map(|(_, k)| k)
    }

    /// The records of one pointer, decoded into `g`: read until the read
    /// has passed the pointer's end sequence number, or its shard is closed
    /// and drained ([`RangeRead`]). `Ok(false)` if `deadline` came first:
    /// what was read is in `g`, and the pointer must stay for the next run.
    async fn resolve(&self, info: &BatchInfo, g: &mut GivenUp, deadline: Instant) -> Result<bool, String> {
        let table = self
            .table_of(&info.stream_arn)
            .ok_or_else(|| format!("stream {} is not one of Hookline's", info.stream_arn))?;
        let it = self
            .streams
            .get_shard_iterator()
            .stream_arn(&info.stream_arn)
            .shard_id(&info.shard_id)
            .shard_iterator_type(ShardIteratorType::AtSequenceNumber)
            .sequence_number(&info.start_sequence_number)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "the stream no longer has these records (kept 24 hours): {}",
                    aws_sdk_dynamodbstreams::error::DisplayErrorContext(&e)
                )
            })?;
        let mut read = RangeRead::new(&info.end_sequence_number, it.shard_iterator().map(str::to_string));
        let mut empty_pages = 0u32;
        while let Some(current) = read.next_iterator() {
            if Instant::now() >= deadline {
                return Ok(false);
            }
            let page = self.streams.get_records().shard_iterator(current).limit(1000).send().await.map_err(|e| {
                format!("reading the stream failed: {}", aws_sdk_dynamodbstreams::error::DisplayErrorContext(&e))
            })?;
            let records: Vec<(String, bool)> = page
                .records()
                .iter()
                .filter_map(|r| {
                    let change = r.dynamodb()?;
                    let insert = r.event_name().map(|n| n.as_str()) == Some("INSERT");
                    Some((change.sequence_number().unwrap_or_default().to_string(), insert))
                })
                .collect();
            let wanted = read.page(&records, page.next_shard_iterator().map(str::to_string));
            for r in page.records() {
                let Some(change) = r.dynamodb() else { continue };
                let seq = change.sequence_number().unwrap_or_default();
                if !wanted.iter().any(|w| w == seq) {
                    continue;
                }
                let attrs = attrs_of(change.new_image().cloned().unwrap_or_default());
                let decoded = match table {
                    Table::Events => item::event_from_attrs(&attrs).map(|e| g.events.push(e)),
                    Table::Sagas => item::saga_from_attrs(&attrs).map(|s| g.sagas.push(s)),
                    Table::Attempts => item::attempt_from_attrs(&attrs).map(|a| g.attempts.push(a)),
                };
                decoded.map_err(|e| format!("record {seq} cannot be read: {e}"))?;
            }
            // Empty pages occur mid-range (DynamoDB Streams API reference,
            // GetRecords): keep reading, at most 5 reads a second per shard.
            if records.is_empty() {
                empty_pages += 1;
                tokio::time::sleep(Duration::from_millis(200).min(Duration::from_millis(50) * empty_pages)).await;
            } else {
                empty_pages = 0;
            }
        }
        Ok(true)
    }
}

/// Where the read of one pointer's range stands: the pure decision of when
/// a range has been read in full. DynamoDB Streams may answer a page with no
/// records while more follow, and the range holds records the mapping's
/// filter dropped (MODIFY, TTL deletes): a range is read only once a record
/// at or past its end sequence number has been seen, or its shard is closed
/// (no next iterator) and every record up to that was read.
#[derive(Debug)]
pub(crate) struct RangeRead {
    end: String,
    iterator: Option<String>,
    done: bool,
}

impl RangeRead {
    /// A read of the range that ends at `end`, starting at `iterator`.
    pub(crate) fn new(end: &str, iterator: Option<String>) -> RangeRead {
        RangeRead { end: end.to_string(), iterator, done: false }
    }

    /// The iterator to read next; `None` once the range is read.
    pub(crate) fn next_iterator(&mut self) -> Option<String> {
        if self.done {
            return None;
        }
        self.iterator.take()
    }

    /// Takes one page (each record's sequence number and whether it is an
    /// INSERT) and its next iterator; returns the sequence numbers of the
    /// page's INSERTs within the range.
    pub(crate) fn page(&mut self, records: &[(String, bool)], next: Option<String>) -> Vec<String> {
        let mut wanted = Vec::new();
        for (seq, insert) in records {
            if seq_after(seq, &self.end) {
                self.done = true;
                break;
            }
            if *insert {
                wanted.push(seq.clone());
            }
            if *seq == self.end {
                self.done = true;
                break;
            }
        }
        match next {
            // A closed shard's last page: nothing more will ever come.
            None => self.done = true,
            Some(n) => self.iterator = Some(n),
        }
        wanted
    }
}

/// Whether stream sequence number `a` comes after `b` (decimal strings of
/// up to 40 digits: longer is larger, then by digits).
fn seq_after(a: &str, b: &str) -> bool {
    (a.len(), a) > (b.len(), b)
}

/// A stream image as [`Attrs`], the neutral form the item mappings read.
fn attrs_of(image: std::collections::HashMap<String, StreamValue>) -> Attrs {
    Attrs(
        image
            .into_iter()
            .map(|(k, v)| {
                let a = match v {
                    StreamValue::S(s) => Attr::S(s),
                    StreamValue::N(n) => Attr::N(n),
                    StreamValue::B(b) => Attr::B(b.into_inner()),
                    StreamValue::Null(_) => Attr::Null,
                    _ => Attr::Other("other".into()),
                };
                (k, a)
            })
            .collect(),
    )
}

#[async_trait]
impl StreamFailures for DynamoStreamFailures {
    /// Receives up to `max` pointers with a long poll (a short poll may
    /// answer empty while messages wait), hidden for 5 minutes while they
    /// are re-driven, and resolves each; one that is not a Lambda on-failure
    /// record is reported unresolved, one whose read `deadline` cut short
    /// incomplete.
    async fn take(&self, max: usize, deadline: Instant) -> StoreResult<Vec<GivenUp>> {
        let received = self.queue.receive_waiting(max, Duration::from_secs(300), Duration::from_secs(1)).await?;
        let mut out = Vec::with_capacity(received.len());
        for m in received {
            let mut g = GivenUp { receipt: m.receipt.clone(), ..GivenUp::default() };
            match serde_json::from_str::<OnFailure>(&m.body) {
                Err(e) => g.unresolved = Some(format!("not a stream on-failure record: {e}")),
                Ok(f) => match self.resolve(&f.batch, &mut g, deadline).await {
                    Ok(complete) => g.incomplete = !complete,
                    Err(why) => {
                        g.unresolved = Some(format!(
                            "shard {} sequence {}..{}: {why}",
                            f.batch.shard_id, f.batch.start_sequence_number, f.batch.end_sequence_number
                        ))
                    }
                },
            }
            out.push(g);
        }
        Ok(out)
    }

    async fn done(&self, receipts: &[String]) -> StoreResult<()> {
        self.queue.delete(receipts).await
    }
}

/// The port where no on-failure queue is configured (functions other than
/// the reconciler): every call fails, naming the missing setting.
pub struct NotConfigured;

#[async_trait]
impl StreamFailures for NotConfigured {
    async fn take(&self, _max: usize, _deadline: Instant) -> StoreResult<Vec<GivenUp>> {
        Err(shared::error::StoreError::other("STREAM_FAILURES_QUEUE_URL is not set".into()))
    }

    async fn done(&self, _receipts: &[String]) -> StoreResult<()> {
        Err(shared::error::StoreError::other("STREAM_FAILURES_QUEUE_URL is not set".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_compare_as_numbers() {
        assert!(seq_after("1000", "999"));
        assert!(!seq_after("999", "1000"));
        assert!(!seq_after("1000", "1000"));
        assert!(seq_after("800000000003126276363", "800000000003126276362"));
    }

    fn page(read: &mut RangeRead, seqs: &[(&str, bool)], next: Option<&str>) -> Vec<String> {
        let records: Vec<(String, bool)> = seqs.iter().map(|(s, i)| (s.to_string(), *i)).collect();
        read.page(&records, next.map(str::to_string))
    }

    #[test]
    fn a_range_is_read_past_empty_pages_and_filtered_records_to_its_end() {
        let mut read = RangeRead::new("105", Some("it0".into()));
        assert_eq!(read.next_iterator().as_deref(), Some("it0"));
        // An empty page mid-range is not the end.
        assert!(page(&mut read, &[], Some("it1")).is_empty());
        assert_eq!(read.next_iterator().as_deref(), Some("it1"));
        // MODIFY records are skipped, not the end either.
        assert_eq!(page(&mut read, &[("100", true), ("101", false), ("102", true)], Some("it2")), ["100", "102"]);
        assert_eq!(read.next_iterator().as_deref(), Some("it2"));
        assert!(page(&mut read, &[], Some("it3")).is_empty());
        assert_eq!(read.next_iterator().as_deref(), Some("it3"));
        // The end record is taken; what comes after it is not, and the read stops.
        assert_eq!(page(&mut read, &[("104", false), ("105", true), ("106", true)], Some("it4")), ["105"]);
        assert_eq!(read.next_iterator(), None);
    }

    #[test]
    fn a_range_ends_past_its_end_or_at_a_closed_shard() {
        let mut read = RangeRead::new("105", Some("it0".into()));
        read.next_iterator();
        // The end record itself was filtered out of the stream's page: a later one ends it.
        assert_eq!(page(&mut read, &[("103", true), ("107", true)], Some("it1")), ["103"]);
        assert_eq!(read.next_iterator(), None);
        let mut closed = RangeRead::new("105", Some("it0".into()));
        closed.next_iterator();
        assert_eq!(page(&mut closed, &[("103", true)], None), ["103"]);
        assert_eq!(closed.next_iterator(), None, "a closed shard has nothing more");
    }

    #[test]
    fn lambda_on_failure_records_parse() {
        let body = r#"{"requestContext": {"requestId": "r", "functionArn": "arn:aws:lambda:us-east-1:1:function:f",
            "condition": "RetryAttemptsExhausted", "approximateInvokeCount": 6},
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
            "version": "1.0", "timestamp": "2026-11-26T00:00:00.000Z",
            "DDBStreamBatchInfo": {"shardId": "shardId-1", "startSequenceNumber": "100", "endSequenceNumber": "102",
              "approximateArrivalOfFirstRecord": "2026-11-26T00:00:00Z", "approximateArrivalOfLastRecord": "2026-11-26T00:00:00Z",
              "batchSize": 3, "streamArn": "arn:aws:dynamodb:us-east-1:1:table/p-EventsTable/stream/2026"}}"#;
        let f: OnFailure = serde_json::from_str(body).unwrap();
        assert_eq!((f.batch.start_sequence_number.as_str(), f.batch.end_sequence_number.as_str()), ("100", "102"));
    }
}
