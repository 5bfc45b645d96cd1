//! Plays Lambda's event source mappings against the AWS emulator: reads the
//! DynamoDB streams and SQS queues the template wires to each function, and
//! hands the records to the same handler functions the Lambda binaries run
//! (`hookline_aws::lambda`), as the JSON AWS sends. It honours partial batch
//! failures (stream: retry from the failed record, then the on-failure
//! queue; SQS: failed messages are not deleted and reappear after their
//! visibility timeout, then SQS redrives them to the DLQ), and a handler
//! that panics counts as a crashed invocation: nothing of its batch is
//! acknowledged.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hookline_aws::lambda;
use serde_json::{json, Value};
use shared::context::Hookline;

/// The emulator's raw JSON API (the SDKs speak the same protocol).
#[derive(Clone)]
pub struct Moto {
    endpoint: String,
    client: reqwest::Client,
}

impl Moto {
    /// The emulator at `AWS_ENDPOINT_URL`.
    pub fn from_env() -> Moto {
        let endpoint = std::env::var("AWS_ENDPOINT_URL")
            .expect("AWS_ENDPOINT_URL is not set: run `make test`, which starts the emulator");
        Moto { endpoint, client: reqwest::Client::new() }
    }

    /// The emulator's endpoint.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
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
pub const STREAM_MAX_RETRIES: u32 = shared::bounds::STREAM_MAX_RETRIES;

/// What one function did, as Lambda would bill it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FunctionCounts {
    /// Invocations (crashed ones included: Lambda bills them too).
    pub invocations: u64,
    /// Of which crashed (the handler panicked).
    pub crashed: u64,
    /// Records (messages, stream records, HTTP requests) handed to it.
    pub records: u64,
    /// Wall time of the handlers, summed.
    pub wall: Duration,
    /// Billed duration: each invocation's wall time rounded up to 1 ms, summed.
    pub billed_ms: u64,
    /// CPU time the handlers' own futures took, summed ([`cpu_timed`]):
    /// what a function's memory size slows down, where the rest of the wall
    /// time is waiting on AWS.
    pub cpu: Duration,
}

/// Runs `fut`, returning its output and the CPU time of the threads that
/// polled it, measured around each poll (the thread's CPU clock), so the
/// time it waited is not counted, nor the work of tasks it spawned (the
/// SDK's connections do their HTTP framing in their own).
pub async fn cpu_timed<F: std::future::Future>(fut: F) -> (F::Output, Duration) {
    let mut fut = std::pin::pin!(fut);
    let mut cpu = Duration::ZERO;
    let out = std::future::poll_fn(|cx| {
        let before = thread_cpu();
        let r = fut.as_mut().poll(cx);
        cpu += thread_cpu().saturating_sub(before);
        r
    })
    .await;
    (out, cpu)
}

/// The calling thread's CPU time.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec to write; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Requests of one kind that the driver made on Lambda's behalf.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestCounts {
    /// Requests.
    pub requests: u64,
    /// Payload bytes (request body plus response body, as JSON).
    pub bytes: u64,
    /// Requests as SQS bills them: one per started 64 KB of payload.
    pub billed: u64,
    /// Messages or records they carried.
    pub items: u64,
}

/// Counts of what the driver (Lambda's event source mappings, and API
/// Gateway in `AwsPipeline::call`) did: invocations
/// per function (by the template's logical id, e.g. `DeliveryFunction`) and
/// the requests made on Lambda's behalf. Read by the cost benchmark.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DriverCounts {
    /// Per function.
    pub functions: BTreeMap<String, FunctionCounts>,
    /// SQS requests of the event source mappings, by (function, operation):
    /// `ReceiveMessage` (non-empty), `ReceiveMessage (empty)`,
    /// `DeleteMessageBatch`, `SendMessage` (stream on-failure destination).
    pub sqs: BTreeMap<(String, String), RequestCounts>,
    /// DynamoDB Streams requests of the stream mappings, by (function,
    /// operation): `GetRecords`, `GetRecords (empty)`, `GetShardIterator`,
    /// `DescribeStream`.
    pub streams: BTreeMap<(String, String), RequestCounts>,
    /// API Gateway requests (one per HTTP API call).
    pub api_gateway_requests: u64,
}

/// Shared, thread-safe [`DriverCounts`].
#[derive(Debug, Default)]
pub struct DriverStats(Mutex<DriverCounts>);

/// 64 KB: SQS bills one request per started chunk of this size.
pub const SQS_BILLING_CHUNK: u64 = 64 * 1024;

impl DriverStats {
    /// A copy of the counts so far.
    pub fn snapshot(&self) -> DriverCounts {
        self.0.lock().unwrap().clone()
    }

    /// One invocation of `function` with `records` records that took `wall`,
    /// `cpu` of it on a CPU.
    pub fn record_invocation(&self, function: &str, records: usize, wall: Duration, cpu: Duration, crashed: bool) {
        let mut g = self.0.lock().unwrap();
        let f = g.functions.entry(function.to_string()).or_default();
        f.invocations += 1;
        f.crashed += u64::from(crashed);
        f.records += records as u64;
        f.wall += wall;
        f.billed_ms += (wall.as_nanos().div_ceil(1_000_000) as u64).max(1);
        f.cpu += cpu;
    }

    /// One API Gateway request.
    pub fn record_api_gateway(&self) {
        self.0.lock().unwrap().api_gateway_requests += 1;
    }

    fn record(
        map: &mut BTreeMap<(String, String), RequestCounts>,
        function: &str,
        op: &str,
        bytes: usize,
        items: usize,
    ) {
        let r = map.entry((function.to_string(), op.to_string())).or_default();
        r.requests += 1;
        r.bytes += bytes as u64;
        r.billed += (bytes as u64).div_ceil(SQS_BILLING_CHUNK).max(1);
        r.items += items as u64;
    }

    /// One SQS request made on behalf of `function`.
    pub fn record_sqs(&self, function: &str, op: &str, bytes: usize, items: usize) {
        Self::record(&mut self.0.lock().unwrap().sqs, function, op, bytes, items);
    }

    /// One DynamoDB Streams request made on behalf of `function`.
    pub fn record_stream(&self, function: &str, op: &str, bytes: usize, items: usize) {
        Self::record(&mut self.0.lock().unwrap().streams, function, op, bytes, items);
    }
}

/// Payload size of one raw call: request and response JSON.
fn json_len(req: &Value, res: &Value) -> usize {
    req.to_string().len() + res.to_string().len()
}

type Handler<E, R> = Arc<dyn Fn(Arc<Hookline>, E) -> Pin<Box<dyn Future<Output = R> + Send>> + Send + Sync>;

/// The running driver: one task per event source mapping.
pub struct Driver {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    stats: Arc<DriverStats>,
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
    pub fn start(moto: Moto, h: Arc<Hookline>, src: Sources, rejects: Arc<hookline_aws::sqs::SqsQueue>) -> Driver {
        Self::start_with_stats(moto, h, src, rejects, Arc::new(DriverStats::default()))
    }

    /// [`Driver::start`], counting invocations and requests into `stats`.
    pub fn start_with_stats(
        moto: Moto,
        h: Arc<Hookline>,
        src: Sources,
        rejects: Arc<hookline_aws::sqs::SqsQueue>,
        stats: Arc<DriverStats>,
    ) -> Driver {
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        let route: Handler<lambda::events::dynamodb::Event, _> =
            Arc::new(|h, e| Box::pin(async move { lambda::route_stream(&h, e).await }));
        let saga_stream: Handler<lambda::events::dynamodb::Event, _> =
            Arc::new(|h, e| Box::pin(async move { lambda::saga_stream(&h, e).await }));
        // Each mapping filters as the template says (FilterCriteria).
        let inserts_only = crate::emulator::stream_filter_inserts_only;
        for (arn, handler, only_inserts, function) in [
            (src.events_stream.clone(), route, inserts_only("EventsTable"), "RouterFunction"),
            (src.sagas_stream.clone(), saga_stream.clone(), inserts_only("SagasTable"), "SagaFunction"),
            (src.attempts_stream.clone(), saga_stream, inserts_only("AttemptsTable"), "SagaFunction"),
        ] {
            tasks.push(tokio::spawn(stream_mapping(
                moto.clone(),
                h.clone(),
                arn,
                handler,
                only_inserts,
                src.stream_failures_url.clone(),
                stop.clone(),
                (stats.clone(), function),
            )));
        }
        let rj = rejects.clone();
        let ingest: Handler<lambda::events::sqs::SqsEvent, _> = Arc::new(move |h, e| {
            let rj = rj.clone();
            Box::pin(async move { lambda::ingest_from_bus(&h, &rj, e).await })
        });
        let timers: Handler<lambda::events::sqs::SqsEvent, _> =
            Arc::new(|h, e| Box::pin(async move { lambda::saga_timers(&h, e).await }));
        let deliver: Handler<lambda::events::sqs::SqsEvent, _> =
            Arc::new(|h, e| Box::pin(async move { lambda::deliver_batch(&h, e).await }));
        let requeue: Handler<lambda::events::sqs::SqsEvent, _> =
            Arc::new(|h, e| Box::pin(async move { lambda::requeue_batch(&h, e).await }));
        for (q, handler, function) in [
            (src.ingest_queue.clone(), ingest, "IngestFunction"),
            (src.retries_queue.clone(), timers, "SagaFunction"),
            (src.deliveries_queue.clone(), deliver, "DeliveryFunction"),
            (src.requeue_queue.clone(), requeue, "RequeueFunction"),
        ] {
            tasks.push(tokio::spawn(queue_mapping(
                moto.clone(),
                h.clone(),
                q,
                handler,
                stop.clone(),
                (stats.clone(), function),
            )));
        }
        Driver { stop, tasks, stats }
    }

    /// The counts of invocations and of requests made on Lambda's behalf.
    pub fn stats(&self) -> Arc<DriverStats> {
        self.stats.clone()
    }
}

/// Where a mapping counts: the stats and the function's logical id.
type Counted = (Arc<DriverStats>, &'static str);

/// How soon a mapping polls again after an empty poll; each empty poll in
/// a row doubles the wait, up to [`POLL_IDLE_MAX`], and a poll that finds
/// work starts over. Idle pipelines (most of a test is waiting) so cost
/// the emulator a few requests a second per mapping instead of fifty, and
/// work arriving after a pause is seen within [`POLL_IDLE_MAX`] (Lambda's
/// own stream mappings poll each shard about four times a second).
const POLL: Duration = Duration::from_millis(20);

/// The longest wait between two empty polls of a mapping ([`POLL`]).
const POLL_IDLE_MAX: Duration = Duration::from_millis(160);

/// The wait after an empty poll, `previous` being the last one.
fn backoff(previous: Duration) -> Duration {
    (previous * 2).min(POLL_IDLE_MAX)
}

/// Runs the handler in its own task, as an invocation of `function` (its
/// AWS requests checked against that function's role: [`crate::iam`]), so
/// a panic is a crashed invocation (`None`); with the handler's CPU time
/// ([`cpu_timed`]; zero if it crashed).
async fn invoke<E: Send + 'static, R: Send + 'static>(
    h: &Arc<Hookline>,
    handler: &Handler<E, R>,
    event: E,
    function: &'static str,
) -> (Option<R>, Duration) {
    let fut = cpu_timed(crate::iam::as_function(function, handler(h.clone(), event)));
    match tokio::spawn(fut).await {
        Ok((r, cpu)) => (Some(r), cpu),
        Err(_) => (None, Duration::ZERO),
    }
}

/// [`invoke`], counted as one invocation of `counted.1` with `records` records.
async fn invoke_counted<E: Send + 'static, R: Send + 'static>(
    h: &Arc<Hookline>,
    handler: &Handler<E, R>,
    event: E,
    records: usize,
    counted: &Counted,
) -> Option<R> {
    let started = Instant::now();
    let (r, cpu) = invoke(h, handler, event, counted.1).await;
    counted.0.record_invocation(counted.1, records, started.elapsed(), cpu, r.is_none());
    r
}

#[allow(clippy::too_many_arguments)]
async fn stream_mapping(
    moto: Moto,
    h: Arc<Hookline>,
    arn: String,
    handler: Handler<lambda::events::dynamodb::Event, lambda::events::streams::DynamoDbEventResponse>,
    only_inserts: bool,
    failures_url: String,
    stop: Arc<AtomicBool>,
    counted: Counted,
) {
    let req = json!({"StreamArn": arn});
    let desc = moto.call("dynamodb", "DynamoDBStreams_20120810.DescribeStream", req.clone()).await;
    counted.0.record_stream(counted.1, "DescribeStream", json_len(&req, &desc), 0);
    let shards: Vec<String> = desc["StreamDescription"]["Shards"]
        .as_array()
        .map(|a| a.iter().filter_map(|s| s["ShardId"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let mut iterators: HashMap<String, String> = HashMap::new();
    for shard in &shards {
        let it = moto
            .call(
                "dynamodb",
                "DynamoDBStreams_20120810.GetShardIterator",
                json!({"StreamArn": arn, "ShardId": shard, "ShardIteratorType": "TRIM_HORIZON"}),
            )
            .await;
        counted.0.record_stream(counted.1, "GetShardIterator", 0, 0);
        iterators.insert(shard.clone(), it["ShardIterator"].as_str().unwrap_or_default().to_string());
    }
    let mut retries: HashMap<String, u32> = HashMap::new();
    let mut wait = POLL;
    while !stop.load(Ordering::SeqCst) {
        let mut idle = true;
        for shard in &shards {
            let it = iterators[shard].clone();
            let req = json!({"ShardIterator": it, "Limit": 100});
            let got = moto.call("dynamodb", "DynamoDBStreams_20120810.GetRecords", req.clone()).await;
            let next = got["NextShardIterator"].as_str().unwrap_or(&it).to_string();
            let mut records: Vec<Value> = got["Records"].as_array().cloned().unwrap_or_default();
            let op = if records.is_empty() { "GetRecords (empty)" } else { "GetRecords" };
            counted.0.record_stream(counted.1, op, json_len(&req, &got), records.len());
            if records.is_empty() {
                iterators.insert(shard.clone(), next);
                continue;
            }
            idle = false;
            for r in &mut records {
                r["eventSourceARN"] = json!(arn);
            }
            let seqs: Vec<String> = records
                .iter()
                .map(|r| r["dynamodb"]["SequenceNumber"].as_str().unwrap_or_default().to_string())
                .collect();
            // Lambda event filtering (FilterCriteria: INSERT only) drops the rest.
            let delivered: Vec<Value> =
                records.into_iter().filter(|r| !only_inserts || r["eventName"] == "INSERT").collect();
            let failed_at: Option<String> = if delivered.is_empty() {
                None
            } else {
                let n = delivered.len();
                let event: lambda::events::dynamodb::Event =
                    serde_json::from_value(json!({"Records": delivered})).expect("stream records in Lambda's shape");
                match invoke_counted(&h, &handler, event, n, &counted).await {
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
                        let req = json!({"QueueUrl": failures_url, "MessageBody": on_failure_record(&arn, shard, &seq, counted.1).to_string()});
                        let res = moto.call("sqs", "AmazonSQS.SendMessage", req.clone()).await;
                        counted.0.record_sqs(counted.1, "SendMessage", json_len(&req, &res), 1);
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
                    counted.0.record_stream(counted.1, "GetShardIterator", 0, 0);
                    iterators.insert(shard.clone(), it["ShardIterator"].as_str().unwrap_or_default().to_string());
                }
            }
        }
        if idle {
            tokio::time::sleep(wait).await;
            wait = backoff(wait);
        } else {
            wait = POLL;
        }
    }
}

/// What Lambda sends to a stream mapping's on-failure destination when it
/// gives up on a batch (Lambda Developer Guide, "Retaining discarded
/// batches for a DynamoDB event source"): a pointer, not the records.
pub fn on_failure_record(stream_arn: &str, shard: &str, seq: &str, function: &str) -> Value {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    json!({
        "requestContext": {"requestId": format!("driver-{seq}"), "functionArn": format!("arn:aws:lambda:us-east-1:123456789012:function:{function}"),
                           "condition": "RetryAttemptsExhausted", "approximateInvokeCount": STREAM_MAX_RETRIES + 1},
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "version": "1.0",
        "timestamp": now,
        "DDBStreamBatchInfo": {"shardId": shard, "startSequenceNumber": seq, "endSequenceNumber": seq,
                               "approximateArrivalOfFirstRecord": now, "approximateArrivalOfLastRecord": now,
                               "batchSize": 1, "streamArn": stream_arn},
    })
}

async fn queue_mapping(
    moto: Moto,
    h: Arc<Hookline>,
    (url, arn): (String, String),
    handler: Handler<lambda::events::sqs::SqsEvent, lambda::events::sqs::SqsBatchResponse>,
    stop: Arc<AtomicBool>,
    counted: Counted,
) {
    let mut wait = POLL;
    while !stop.load(Ordering::SeqCst) {
        let req = json!({"QueueUrl": url, "MaxNumberOfMessages": 10, "VisibilityTimeout": TEST_VISIBILITY_SECS,
                         "AttributeNames": ["All"], "MessageAttributeNames": ["All"]});
        let got = moto.call("sqs", "AmazonSQS.ReceiveMessage", req.clone()).await;
        let msgs = got["Messages"].as_array().cloned().unwrap_or_default();
        let op = if msgs.is_empty() { "ReceiveMessage (empty)" } else { "ReceiveMessage" };
        counted.0.record_sqs(counted.1, op, json_len(&req, &got), msgs.len());
        if msgs.is_empty() {
            tokio::time::sleep(wait).await;
            wait = backoff(wait);
            continue;
        }
        wait = POLL;
        let records: Vec<Value> = msgs
            .iter()
            .map(|m| {
                let attrs: serde_json::Map<String, Value> = m["MessageAttributes"]
                    .as_object()
                    .map(|o| {
                        o.iter()
                            .map(|(k, v)| {
                                (k.clone(), json!({"stringValue": v["StringValue"], "dataType": v["DataType"]}))
                            })
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
        let event: lambda::events::sqs::SqsEvent =
            serde_json::from_value(json!({"Records": records})).expect("SQS event in Lambda's shape");
        let failed: Vec<String> = match invoke_counted(&h, &handler, event, msgs.len(), &counted).await {
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
            let n = done.len();
            let req = json!({"QueueUrl": url, "Entries": done});
            let res = moto.call("sqs", "AmazonSQS.DeleteMessageBatch", req.clone()).await;
            counted.0.record_sqs(counted.1, "DeleteMessageBatch", json_len(&req, &res), n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handler's CPU time counts its own work, not the time it waits.
    #[tokio::test]
    async fn cpu_timed_counts_work_not_waiting() {
        let (sum, cpu) = cpu_timed(async {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let mut x: u64 = 1;
            for i in 0..5_000_000u64 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
            x
        })
        .await;
        assert_ne!(sum, 0);
        assert!(cpu > Duration::from_micros(500), "the loop's work is counted: {cpu:?}");
        assert!(cpu < Duration::from_millis(250), "the 500 ms of sleeping is not: {cpu:?}");
    }
}
