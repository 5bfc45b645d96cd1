//! The [`StreamFailures`] port on AWS: the stream mappings' on-failure
//! destination (an SQS queue) holds only pointers to the batches Lambda gave
//! up on (`DDBStreamBatchInfo`: stream, shard, first and last sequence
//! number). The records stay in the table's stream for 24 hours, so this
//! adapter reads them back from the stream (`GetShardIterator` at the first
//! sequence number, `GetRecords` up to the last) and decodes them as the
//! handlers would. A pointer whose records the stream no longer has, or that
//! cannot be read, is reported unresolved and left in the queue for an
//! operator (its alarm stays on).

use async_trait::async_trait;
use aws_sdk_dynamodbstreams::types::{AttributeValue as StreamValue, ShardIteratorType};
use serde::Deserialize;

use super::item::{self, Attr, Attrs};
use super::sqs::SqsQueue;
use crate::ports::{GivenUp, JobQueue, StoreResult, StreamFailures};

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

    /// The records of one pointer, decoded into `g`.
    async fn resolve(&self, info: &BatchInfo, g: &mut GivenUp) -> Result<(), String> {
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
        let mut iterator = it.shard_iterator().map(str::to_string);
        // A bounded read: a batch is at most the mapping's BatchSize (100).
        for _ in 0..20 {
            let Some(current) = iterator.take() else { break };
            let page = self.streams.get_records().shard_iterator(current).limit(1000).send().await.map_err(|e| {
                format!("reading the stream failed: {}", aws_sdk_dynamodbstreams::error::DisplayErrorContext(&e))
            })?;
            let mut past_end = false;
            for r in page.records() {
                let Some(change) = r.dynamodb() else { continue };
                let seq = change.sequence_number().unwrap_or_default();
                if seq_after(seq, &info.end_sequence_number) {
                    past_end = true;
                    break;
                }
                if r.event_name().map(|n| n.as_str()) != Some("INSERT") {
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
            if past_end || page.records().is_empty() {
                break;
            }
            iterator = page.next_shard_iterator().map(str::to_string);
        }
        Ok(())
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
    /// Receives up to `max` pointers (hidden for 5 minutes while they are
    /// re-driven) and resolves each; one that is not a Lambda on-failure
    /// record is reported unresolved.
    async fn take(&self, max: usize) -> StoreResult<Vec<GivenUp>> {
        let received = self.queue.receive(max, std::time::Duration::from_secs(300)).await?;
        let mut out = Vec::with_capacity(received.len());
        for m in received {
            let mut g = GivenUp { receipt: m.receipt.clone(), ..GivenUp::default() };
            match serde_json::from_str::<OnFailure>(&m.body) {
                Err(e) => g.unresolved = Some(format!("not a stream on-failure record: {e}")),
                Ok(f) => {
                    if let Err(why) = self.resolve(&f.batch, &mut g).await {
                        g.unresolved = Some(format!(
                            "shard {} sequence {}..{}: {why}",
                            f.batch.shard_id, f.batch.start_sequence_number, f.batch.end_sequence_number
                        ));
                    }
                }
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
    async fn take(&self, _max: usize) -> StoreResult<Vec<GivenUp>> {
        Err(crate::error::StoreError::Backend("STREAM_FAILURES_QUEUE_URL is not set".into()))
    }

    async fn done(&self, _receipts: &[String]) -> StoreResult<()> {
        Err(crate::error::StoreError::Backend("STREAM_FAILURES_QUEUE_URL is not set".into()))
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
