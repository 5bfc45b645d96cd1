//! Plays Lambda's event source mappings against the AWS emulator: reads the
//! DynamoDB streams and SQS queues the template wires to each function, and
//! hands the records to the same handler functions the Lambda binaries run
//! (`shared::lambda`), as the JSON AWS sends. It honours partial batch
//! failures (stream: retry from the failed record, then the on-failure
//! queue; SQS: failed messages are not deleted and reappear after their
//! visibility timeout, then SQS redrives them to the DLQ), and a handler
//! that panics counts as a crashed invocation: nothing of its batch is
//! acknowledged.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use shared::context::Hookline;
use shared::lambda;

/// The emulator's raw JSON API (the SDKs speak the same protocol).
#[derive(Clone)]
pub struct Moto {
    endpoint: String,
    client: reqwest::Client,
}

impl Moto {
    /// The emulator at `AWS_ENDPOINT_URL`.
    pub fn from_env() -> Moto {
        let endpoint = std::env::var("AWS_ENDPOINT_URL").expect("AWS_ENDPOINT_URL is not set: run `make test`, which starts the emulator");
        Moto { endpoint, client: reqwest::Client::new() }
    }

    /// One call: `target` like `DynamoDBStreams_20120810.GetRecords` or `AmazonSQS.ReceiveMessage`.
    pub async fn call(&self, service: &str, target: &str, body: Value) -> Value {
        let res = self
            .client
            .post(&self.endpoint)
            .header("x-amz-target", target)
            .header("content-type", "application/x-amz-json-1.0")
            .header(
                "authorization",
                format!("AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0"),
            )
            .json(&body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("emulator call {target}: {e}"));
        let status = res.status();
        let v: Value = res.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "emulator call {target} failed: {status} {v}");
        v
    }
}

/// Which sources feed which handler (from the template's event sources).
#[derive(Debug, Clone)]
pub struct Sources {
    /// Events table stream ARN (router).
    pub events_stream: String,
    /// Sagas table stream ARN (saga step, inserts only).
    pub sagas_stream: String,
    /// Attempts table stream ARN (saga step).
    pub attempts_stream: String,
    /// (URL, ARN) of the ingest queue (ingest, from EventBridge).
    pub ingest_queue: (String, String),
    /// (URL, ARN) of the retry-timer queue (saga step).
    pub retries_queue: (String, String),
    /// (URL, ARN) of the deliveries queue (delivery).
    pub deliveries_queue: (String, String),
    /// (URL, ARN) of the requeue queue (requeue).
    pub requeue_queue: (String, String),
    /// URL of the stream on-failure destination.
    pub stream_failures_url: String,
}

/// How long a received message stays invisible in tests (Lambda uses the
/// queue's own timeout; tests shorten it so a crashed job reappears soon).
pub const TEST_VISIBILITY_SECS: u64 = 4;
/// MaximumRetryAttempts of the stream mappings in the template.
pub const STREAM_MAX_RETRIES: u32 = 5;

type Handler<E, R> = Arc<dyn Fn(Arc<Hookline>, E) -> Pin<Box<dyn Future<Output = R> + Send>> + Send + Sync>;

/// The running driver: one task per event source mapping.
pub struct Driver {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Driver {
    /// Starts polling every source and invoking the handlers.
    pub fn start(moto: Moto, h: Arc<Hookline>, src: Sources, rejects: Arc<shared::aws::sqs::SqsQueue>) -> Driver {
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        let route: Handler<lambda::events::dynamodb::Event, _> =
            Arc::new(|h, e| Box::pin(async move { lambda::route_stream(&h, e).await }));
        let saga_stream: Handler<lambda::events::dynamodb::Event, _> =
            Arc::new(|h, e| Box::pin(async move { lambda::saga_stream(&h, e).await }));
        for (arn, handler, only_inserts) in [
            (src.events_stream.clone(), route, false),
            (src.sagas_stream.clone(), saga_stream.clone(), true),
            (src.attempts_stream.clone(), saga_stream, false),
        ] {
            tasks.push(tokio::spawn(stream_mapping(
                moto.clone(),
                h.clone(),
                arn,
                handler,
                only_inserts,
                src.stream_failures_url.clone(),
                stop.clone(),
            )));
        }
        let rj = rejects.clone();
        let ingest: Handler<lambda::events::sqs::SqsEvent, _> = Arc::new(move |h, e| {
            let rj = rj.clone();
            Box::pin(async move { lambda::ingest_from_bus(&h, &rj, e).await })
        });
        let timers: Handler<lambda::events::sqs::SqsEvent, _> = Arc::new(|h, e| Box::pin(async move { lambda::saga_timers(&h, e).await }));
        let deliver: Handler<lambda::events::sqs::SqsEvent, _> = Arc::new(|h, e| Box::pin(async move { lambda::deliver_batch(&h, e).await }));
        let requeue: Handler<lambda::events::sqs::SqsEvent, _> = Arc::new(|h, e| Box::pin(async move { lambda::requeue_batch(&h, e).await }));
        for (q, handler) in [
            (src.ingest_queue.clone(), ingest),
            (src.retries_queue.clone(), timers),
            (src.deliveries_queue.clone(), deliver),
            (src.requeue_queue.clone(), requeue),
        ] {
            tasks.push(tokio::spawn(queue_mapping(moto.clone(), h.clone(), q, handler, stop.clone())));
        }
        Driver { stop, tasks }
    }
}

const POLL: Duration = Duration::from_millis(20);

/// Runs the handler in its own task so a panic is a crashed invocation.
async fn invoke<E: Send + 'static, R: Send + 'static>(h: &Arc<Hookline>, handler: &Handler<E, R>, event: E) -> Option<R> {
    let fut = handler(h.clone(), event);
    match tokio::spawn(fut).await {
        Ok(r) => Some(r),
        Err(e) if e.is_panic() => None,
        Err(_) => None,
    }
}

async fn stream_mapping(
    moto: Moto,
    h: Arc<Hookline>,
    arn: String,
    handler: Handler<lambda::events::dynamodb::Event, lambda::events::streams::DynamoDbEventResponse>,
    only_inserts: bool,
    failures_url: String,
    stop: Arc<AtomicBool>,
) {
    let desc = moto.call("dynamodb", "DynamoDBStreams_20120810.DescribeStream", json!({"StreamArn": arn})).await;
    let shards: Vec<String> = desc["StreamDescription"]["Shards"]
        .as_array()
        .map(|a| a.iter().filter_map(|s| s["ShardId"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let mut iterators: HashMap<String, String> = HashMap::new();
    for shard in &shards {
        let it = moto
            .call("dynamodb", "DynamoDBStreams_20120810.GetShardIterator", json!({"StreamArn": arn, "ShardId": shard, "ShardIteratorType": "TRIM_HORIZON"}))
            .await;
        iterators.insert(shard.clone(), it["ShardIterator"].as_str().unwrap_or_default().to_string());
    }
    let mut retries: HashMap<String, u32> = HashMap::new();
    while !stop.load(Ordering::SeqCst) {
        let mut idle = true;
        for shard in &shards {
            let it = iterators[shard].clone();
            let got = moto.call("dynamodb", "DynamoDBStreams_20120810.GetRecords", json!({"ShardIterator": it, "Limit": 100})).await;
            let next = got["NextShardIterator"].as_str().unwrap_or(&it).to_string();
            let mut records: Vec<Value> = got["Records"].as_array().cloned().unwrap_or_default();
            if records.is_empty() {
                iterators.insert(shard.clone(), next);
                continue;
            }
            idle = false;
            for r in &mut records {
                r["eventSourceARN"] = json!(arn);
            }
            let seqs: Vec<String> =
                records.iter().map(|r| r["dynamodb"]["SequenceNumber"].as_str().unwrap_or_default().to_string()).collect();
            // Lambda event filtering (FilterCriteria: INSERT only) drops the rest.
            let delivered: Vec<Value> = records.into_iter().filter(|r| !only_inserts || r["eventName"] == "INSERT").collect();
            let failed_at: Option<String> = if delivered.is_empty() {
                None
            } else {
                let event: lambda::events::dynamodb::Event =
                    serde_json::from_value(json!({"Records": delivered})).expect("stream records in Lambda's shape");
                match invoke(&h, &handler, event).await {
                    Some(resp) => resp.batch_item_failures.first().and_then(|f| f.item_identifier.clone()),
                    None => Some(seqs[0].clone()),
                }
            };
            match failed_at {
                None => {
                    iterators.insert(shard.clone(), next);
                }
                Some(seq) => {
                    let n = retries.entry(seq.clone()).or_insert(0);
                    *n += 1;
                    let kind = if *n > STREAM_MAX_RETRIES {
                        // Give up on this record: its description goes to the
                        // on-failure destination and the shard moves on.
                        moto.call(
                            "sqs",
                            "AmazonSQS.SendMessage",
                            json!({"QueueUrl": failures_url, "MessageBody": json!({"streamArn": arn, "shardId": shard, "sequenceNumber": seq, "condition": "RetryAttemptsExhausted"}).to_string()}),
                        )
                        .await;
                        "AFTER_SEQUENCE_NUMBER"
                    } else {
                        "AT_SEQUENCE_NUMBER"
                    };
                    let it = moto
                        .call(
                            "dynamodb",
                            "DynamoDBStreams_20120810.GetShardIterator",
                            json!({"StreamArn": arn, "ShardId": shard, "ShardIteratorType": kind, "SequenceNumber": seq}),
                        )
                        .await;
                    iterators.insert(shard.clone(), it["ShardIterator"].as_str().unwrap_or_default().to_string());
                }
            }
        }
        if idle {
            tokio::time::sleep(POLL).await;
        }
    }
}

async fn queue_mapping(
    moto: Moto,
    h: Arc<Hookline>,
    (url, arn): (String, String),
    handler: Handler<lambda::events::sqs::SqsEvent, lambda::events::sqs::SqsBatchResponse>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::SeqCst) {
        let got = moto
            .call(
                "sqs",
                "AmazonSQS.ReceiveMessage",
                json!({"QueueUrl": url, "MaxNumberOfMessages": 10, "VisibilityTimeout": TEST_VISIBILITY_SECS,
                       "AttributeNames": ["All"], "MessageAttributeNames": ["All"]}),
            )
            .await;
        let msgs = got["Messages"].as_array().cloned().unwrap_or_default();
        if msgs.is_empty() {
            tokio::time::sleep(POLL).await;
            continue;
        }
        let records: Vec<Value> = msgs
            .iter()
            .map(|m| {
                let attrs: serde_json::Map<String, Value> = m["MessageAttributes"]
                    .as_object()
                    .map(|o| {
                        o.iter()
                            .map(|(k, v)| (k.clone(), json!({"stringValue": v["StringValue"], "dataType": v["DataType"]})))
                            .collect()
                    })
                    .unwrap_or_default();
                json!({
                    "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                    "md5OfBody": m["MD5OfBody"], "attributes": m["Attributes"], "messageAttributes": attrs,
                    "eventSource": "aws:sqs", "eventSourceARN": arn, "awsRegion": "us-east-1",
                })
            })
            .collect();
        let event: lambda::events::sqs::SqsEvent = serde_json::from_value(json!({"Records": records})).expect("SQS event in Lambda's shape");
        let failed: Vec<String> = match invoke(&h, &handler, event).await {
            Some(resp) => resp.batch_item_failures.into_iter().map(|f| f.item_identifier).collect(),
            None => msgs.iter().filter_map(|m| m["MessageId"].as_str().map(str::to_string)).collect(),
        };
        let done: Vec<Value> = msgs
            .iter()
            .filter(|m| !failed.iter().any(|f| Some(f.as_str()) == m["MessageId"].as_str()))
            .enumerate()
            .map(|(i, m)| json!({"Id": format!("m{i}"), "ReceiptHandle": m["ReceiptHandle"]}))
            .collect();
        if !done.is_empty() {
            moto.call("sqs", "AmazonSQS.DeleteMessageBatch", json!({"QueueUrl": url, "Entries": done})).await;
        }
    }
}
