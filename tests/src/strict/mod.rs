//! The strict checker: an SDK interceptor on the AWS backend's DynamoDB and
//! SQS clients that refuses, before it is sent, every request real AWS
//! would reject but the emulator (moto) accepts, and remembers it so the
//! test fails ([`Strict::assert_clean`], run when an
//! [`crate::aws_pipeline::AwsPipeline`] is dropped). Each rule names the AWS
//! documentation page it comes from. It also counts requests in flight, so
//! tests can check a stage's concurrency cap ([`Strict::max_in_flight`]).
//!
//! Queue and bus destinations (`hookline-awsreq`: `SendMessage` and
//! `PutEvents` as signed HTTP calls, not SDK clients) pass no interceptor:
//! what the emulator lets through there (an SQS message over 1 MiB, more
//! than 10 attributes, an attribute name starting with `AWS.` or holding
//! `..`, an EventBridge entry of 256 KB or more) is refused in pure code
//! before any request is made (`shared::destination::sqs::send_message`,
//! `shared::destination::eventbridge::put_events`, unit-tested there) and
//! ends the attempt as rejected.
//!
//! DynamoDB rules (moto enforces reserved words, key types and missing
//! placeholders itself; these are what it lets through):
//! - D1 `ExpressionAttributeNames` / `ExpressionAttributeValues` present but
//!   empty ("ExpressionAttributeNames must not be empty"): API reference,
//!   Query / PutItem / UpdateItem, parameter constraints; Developer Guide,
//!   "Expression attribute names (aliases) in DynamoDB".
//! - D2 a name or value defined but used by no expression of the request
//!   ("Value provided in ExpressionAttributeNames unused in expressions"),
//!   or used but not defined: Developer Guide, "Expression attribute names"
//!   and "Using expression attribute values in DynamoDB".
//! - D3 an expression longer than 4 KB; names and values together over 80 KB:
//!   Developer Guide, "Constraints in Amazon DynamoDB" › Expression parameters.
//! - D4 a partition key value of 0 or over 2,048 bytes, a sort key value of 0
//!   or over 1,024 bytes (tables and indexes): "Constraints" › Partition keys
//!   and sort keys. Also where a request only names a key: a `Query`'s
//!   `ExclusiveStartKey`, and each value its `KeyConditionExpression`
//!   compares with a key attribute (a page's `sort > :after`), which moto
//!   takes at any length.
//! - D5 an item over 400 KB (names plus values): "Constraints" › Items.
//! - D6 `TransactWriteItems` over 100 actions, over 4 MB, or two actions on
//!   one item; `BatchWriteItem` over 25 requests; `BatchGetItem` over 100
//!   keys: "Constraints" › DynamoDB transactions and API-specific constraints.
//! - D7 a `Query`/`Scan` `Limit` under 1: API reference, Query › Limit.
//! - D8 a `Query` of a global secondary index whose `KeyConditionExpression`
//!   names an attribute that is not a key of the index, or whose
//!   `FilterExpression` / `ProjectionExpression` names one the index does
//!   not project, or names a key of the index in its `FilterExpression`
//!   (moto reads the table's item and lets all of these through; DynamoDB
//!   answers ValidationException, or finds nothing): Developer Guide,
//!   "Using Global Secondary Indexes in DynamoDB" › Attribute projections
//!   and "Querying tables" › Filter expressions ("A filter expression
//!   cannot contain partition key or sort key attributes").
//! - D9 a `Query` whose `KeyConditionExpression` names an attribute that is
//!   not a key of the table or index queried, or whose `BETWEEN :a AND :b`
//!   has `:a` greater than `:b` (AWS: ValidationException; moto returns
//!   nothing): API reference, Query › KeyConditionExpression; and a
//!   `Query` whose `FilterExpression` names a key attribute of the
//!   table or index queried ("A filter expression cannot contain partition
//!   key or sort key attributes"): Developer Guide, "Filter expressions for
//!   the Query operation".
//! - D10 a write of a table's TTL attribute that TTL would ignore ([`ttl`]).
//!
//! SQS rules ("Amazon SQS message quotas", "Amazon SQS batch action quotas",
//! API reference of each action):
//! - S1 a batch (`SendMessageBatch`, `DeleteMessageBatch`,
//!   `ChangeMessageVisibilityBatch`) with 0 or over 10 entries, or with
//!   entry ids that repeat or are not 1-80 of `[A-Za-z0-9_-]`.
//! - S2 a message, or a whole batch, over 256 KiB (body plus attribute
//!   names, types and values). Newer accounts allow 1 MiB; Hookline keeps
//!   to the long-standing limit so it runs on every queue.
//! - S3 `DelaySeconds` outside 0-900; `VisibilityTimeout` outside 0-43,200;
//!   `WaitTimeSeconds` outside 0-20; `MaxNumberOfMessages` outside 1-10.
//! - S4 over 10 message attributes, or a name that is over 256 characters,
//!   uses characters other than `[A-Za-z0-9_.-]`, starts with `AWS.` or
//!   `Amazon.` (any case), starts or ends with `.`, or holds `..`; a
//!   `String`/`Number` attribute without a value.
//! - S5 a body with characters outside `#x9 | #xA | #xD | #x20-#xD7FF |
//!   #xE000-#xFFFD | #x10000-#x10FFFF`, or an empty body.
//! - S6 on a FIFO queue (`.fifo`), a message without `MessageGroupId` or
//!   with a per-message `DelaySeconds`.
//!
//! KMS rules (API reference of each action; the emulator's KMS checks
//! neither sizes nor IAM):
//! - K1 `Encrypt` of a `Plaintext` of 0 or over 4,096 bytes; `Decrypt` of a
//!   `CiphertextBlob` of 0 or over 6,144 bytes; `GenerateDataKey` without
//!   exactly one of `NumberOfBytes` (1-1,024) and `KeySpec`.
//! - K2 an `Encrypt`, `Decrypt` or `GenerateDataKey` without `KeyId` (a
//!   `Decrypt` may omit it on AWS, but is then authorized on whatever key
//!   its ciphertext names: Hookline always names the key, and the IAM
//!   rule below could not check it otherwise).
//!
//! IAM (the emulator enforces none): every DynamoDB, DynamoDB Streams and
//! SQS request made while a handler runs as a function of the template
//! ([`crate::iam::as_function`]) must be allowed by that function's role as
//! `template.yaml` writes it ([`crate::iam::Roles`]): the action the request
//! is authorized as, on the table, index, stream or queue it names. Anything
//! else is refused as AWS refuses it (AccessDeniedException) and fails the
//! test. AWS Service Authorization Reference, "Actions, resources, and
//! condition keys for Amazon DynamoDB" and "… for Amazon SQS"; DynamoDB
//! Developer Guide, "Using IAM policy conditions for fine-grained access
//! control". Requests outside any function (a test's own set-up) are not
//! checked.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::config::interceptors::{
    AfterDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use serde_json::{Map, Value};

mod ttl;

use crate::iam::{self, Roles};
use crate::metering::{table_schemas, value_size, TableSchema};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const MAX_ITEM: usize = 400 * 1024;
const MAX_PARTITION_KEY: usize = 2048;
const MAX_SORT_KEY: usize = 1024;
const MAX_EXPRESSION: usize = 4 * 1024;
const MAX_EXPRESSION_PARAMS: usize = 80 * 1024;
const MAX_TRANSACT_ACTIONS: usize = 100;
const MAX_TRANSACT_BYTES: usize = 4 * 1024 * 1024;
const MAX_SQS_MESSAGE: usize = 256 * 1024;
const MAX_SQS_BATCH: usize = 10;

/// What the checker saw: violations and the requests in flight.
#[derive(Default)]
struct State {
    violations: Mutex<Vec<String>>,
    /// Stream iterators seen, by the stream resource they read
    /// (`<Table>/stream`): a `GetRecords` names only its iterator.
    iterators: Mutex<HashMap<String, String>>,
    /// Requests checked against a function's role.
    iam_checked: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

/// The checker for one backend under test.
#[derive(Clone)]
pub struct Strict {
    state: Arc<State>,
    tables: Arc<Vec<TableSchema>>,
    roles: Arc<Roles>,
}

impl Default for Strict {
    fn default() -> Self {
        Strict::new()
    }
}

impl std::fmt::Debug for Strict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Strict")
    }
}

impl Strict {
    /// A checker that knows the key schemas of the template's tables.
    pub fn new() -> Strict {
        Strict { state: Arc::default(), tables: Arc::new(table_schemas()), roles: Arc::new(Roles::from_template()) }
    }

    /// A DynamoDB client on `sdk` with the checker installed.
    pub fn dynamodb_client(&self, sdk: &aws_config::SdkConfig) -> aws_sdk_dynamodb::Client {
        let conf = aws_sdk_dynamodb::config::Builder::from(sdk)
            .interceptor(Checking { service: Service::DynamoDb, strict: self.clone() })
            .build();
        aws_sdk_dynamodb::Client::from_conf(conf)
    }

    /// A DynamoDB Streams client on `sdk` (reads only; counted in flight,
    /// checked against the function's role).
    pub fn streams_client(&self, sdk: &aws_config::SdkConfig) -> aws_sdk_dynamodbstreams::Client {
        let conf = aws_sdk_dynamodbstreams::config::Builder::from(sdk)
            .interceptor(Checking { service: Service::Streams, strict: self.clone() })
            .build();
        aws_sdk_dynamodbstreams::Client::from_conf(conf)
    }

    /// A KMS client on `sdk` with the checker installed.
    pub fn kms_client(&self, sdk: &aws_config::SdkConfig) -> aws_sdk_kms::Client {
        let conf = aws_sdk_kms::config::Builder::from(sdk)
            .interceptor(Checking { service: Service::Kms, strict: self.clone() })
            .build();
        aws_sdk_kms::Client::from_conf(conf)
    }

    /// The rules one KMS request breaks (`op` like `Decrypt`).
    pub fn check_kms(op: &str, req: &Value) -> Vec<String> {
        let mut out = Vec::new();
        // Blobs travel as base64 in the JSON body.
        let bytes = |field: &str| req[field].as_str().map(|b| b.len() / 4 * 3 - b.matches('=').count()).unwrap_or(0);
        match op {
            "Encrypt" => {
                let n = bytes("Plaintext");
                if n == 0 || n > 4096 {
                    out.push(format!("K1 Encrypt of {n} bytes of plaintext (1 to 4,096)"));
                }
            }
            "Decrypt" => {
                let n = bytes("CiphertextBlob");
                if n == 0 || n > 6144 {
                    out.push(format!("K1 Decrypt of a {n}-byte ciphertext (1 to 6,144)"));
                }
            }
            "GenerateDataKey" => {
                let ok = match (req["NumberOfBytes"].as_i64(), req["KeySpec"].is_string()) {
                    (Some(n), false) => (1..=1024).contains(&n),
                    (None, true) => true,
                    _ => false,
                };
                if !ok {
                    out.push("K1 GenerateDataKey needs exactly one of NumberOfBytes (1 to 1,024) and KeySpec".into());
                }
            }
            _ => {}
        }
        if matches!(op, "Encrypt" | "Decrypt" | "GenerateDataKey") && !req["KeyId"].is_string() {
            out.push(format!("K2 {op} without KeyId"));
        }
        out
    }

    /// An SQS client on `sdk` with the checker installed.
    pub fn sqs_client(&self, sdk: &aws_config::SdkConfig) -> aws_sdk_sqs::Client {
        let conf = aws_sdk_sqs::config::Builder::from(sdk)
            .interceptor(Checking { service: Service::Sqs, strict: self.clone() })
            .build();
        aws_sdk_sqs::Client::from_conf(conf)
    }

    /// A backend on fresh tables and queues named `prefix` (created from the
    /// template), its clients under this checker.
    pub async fn backend(&self, tag: &str) -> hookline_aws::AwsBackend {
        let sdk = crate::emulator::aws_config().await;
        let names = crate::emulator::create_resources_with(&sdk, &crate::emulator::fresh_prefix(tag)).await;
        let keyring = self.data_key(&sdk, &names, "ApiFunction").await;
        hookline_aws::AwsBackend::with_clients(
            self.dynamodb_client(&sdk),
            self.sqs_client(&sdk),
            self.streams_client(&sdk),
            names,
            &shared::context::Config::default(),
            keyring,
        )
    }

    /// The deployment's data key as a container of `function` loads it at
    /// cold start ([`hookline_aws::keys::open_data_key`]: KeysTable and
    /// KMS), through clients under this checker, so its requests are
    /// checked against that function's role.
    pub async fn data_key(
        &self,
        sdk: &aws_config::SdkConfig,
        names: &hookline_aws::AwsNames,
        function: &'static str,
    ) -> Arc<shared::keyring::Keyring> {
        let open = hookline_aws::keys::open_data_key(
            self.dynamodb_client(sdk),
            self.kms_client(sdk),
            &names.keys_table,
            &names.kms_key_id,
        );
        Arc::new(iam::as_function(function, open).await.expect("the data key"))
    }

    /// Every violation so far.
    pub fn violations(&self) -> Vec<String> {
        self.state.violations.lock().unwrap().clone()
    }

    /// Panics, listing them, if any request broke a rule.
    pub fn assert_clean(&self) {
        let v = self.violations();
        assert!(v.is_empty(), "{} request(s) that AWS would reject:\n{}", v.len(), v.join("\n"));
    }

    /// How many requests were checked against a function's role so far.
    pub fn iam_checked(&self) -> usize {
        self.state.iam_checked.load(Ordering::SeqCst)
    }

    /// The IAM rule for one request of `service` (`op` like `Query`) made
    /// as `function`: why its role does not allow it, if it does not.
    fn check_iam(&self, function: &str, service: Service, op: &str, req: &Value) -> Vec<String> {
        self.state.iam_checked.fetch_add(1, Ordering::SeqCst);
        let needs = match service {
            Service::DynamoDb => iam::dynamodb_needs(op, req),
            Service::Sqs => vec![iam::sqs_needs(op, req)],
            Service::Kms => iam::kms_needs(op, req),
            Service::Streams => {
                let resource = match op {
                    "ListStreams" => format!("{}/stream/*", iam::logical_id(req["TableName"].as_str().unwrap_or(""))),
                    "GetRecords" => {
                        let it = req["ShardIterator"].as_str().unwrap_or("");
                        self.state
                            .iterators
                            .lock()
                            .unwrap()
                            .get(it)
                            .cloned()
                            .unwrap_or_else(|| "(an iterator of no known stream)".into())
                    }
                    _ => iam::stream_resource(req["StreamArn"].as_str().unwrap_or("")),
                };
                vec![(format!("dynamodb:{op}"), resource)]
            }
        };
        needs.iter().filter_map(|(action, resource)| self.roles.denies(function, action, resource)).collect()
    }

    /// Remembers which stream the iterators in a Streams response read.
    fn note_iterators(&self, op: &str, req: &Value, res: &Value) {
        let stream = match op {
            "GetShardIterator" => iam::stream_resource(req["StreamArn"].as_str().unwrap_or("")),
            "GetRecords" => match self.state.iterators.lock().unwrap().get(req["ShardIterator"].as_str().unwrap_or(""))
            {
                Some(s) => s.clone(),
                None => return,
            },
            _ => return,
        };
        for key in ["ShardIterator", "NextShardIterator"] {
            if let Some(it) = res[key].as_str() {
                self.state.iterators.lock().unwrap().insert(it.to_string(), stream.clone());
            }
        }
    }

    /// Most requests that were in flight at once since the last reset.
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    /// Starts counting [`Strict::max_in_flight`] afresh.
    pub fn reset_max_in_flight(&self) {
        self.state.max_in_flight.store(self.state.in_flight.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    fn schema(&self, table: &str) -> Option<&TableSchema> {
        self.tables.iter().find(|t| table == t.logical_id || table.ends_with(&format!("-{}", t.logical_id)))
    }

    /// The rules one DynamoDB request breaks (`op` like `PutItem`).
    pub fn check_dynamodb(&self, op: &str, req: &Value) -> Vec<String> {
        let mut out = Vec::new();
        let table = req["TableName"].as_str().unwrap_or("");
        match op {
            "PutItem" => {
                expression_params(req, &["ConditionExpression"], &mut out);
                self.item(table, &req["Item"], &mut out);
                ttl::check(self.schema(table), table, req, &mut out);
            }
            "UpdateItem" => {
                expression_params(req, &["UpdateExpression", "ConditionExpression"], &mut out);
                ttl::check(self.schema(table), table, req, &mut out);
                self.key(table, &req["Key"], &mut out);
                let size = obj_size(&req["Key"]) + obj_size(&req["ExpressionAttributeValues"]);
                if size > MAX_ITEM {
                    out.push(format!(
                        "D5 UpdateItem on {table} writes at least {size} bytes, over the 400 KB item limit"
                    ));
                }
            }
            "DeleteItem" => {
                expression_params(req, &["ConditionExpression"], &mut out);
                self.key(table, &req["Key"], &mut out);
            }
            "GetItem" => {
                expression_params(req, &["ProjectionExpression"], &mut out);
                self.key(table, &req["Key"], &mut out);
            }
            "Query" | "Scan" => {
                expression_params(
                    req,
                    &["KeyConditionExpression", "FilterExpression", "ProjectionExpression"],
                    &mut out,
                );
                if req["Limit"].as_i64().is_some_and(|l| l < 1) {
                    out.push(format!("D7 {op} on {table} with Limit {} (must be at least 1)", req["Limit"]));
                }
                if let (Some(index), "Query") = (req["IndexName"].as_str(), op) {
                    self.index_query(table, index, req, &mut out);
                }
                if op == "Query" {
                    self.query_keys(table, req, &mut out);
                    self.key_condition_sizes(table, req, &mut out);
                }
                if req.get("ExclusiveStartKey").is_some_and(Value::is_object) {
                    self.key(table, &req["ExclusiveStartKey"], &mut out);
                }
            }
            "TransactWriteItems" => {
                let actions = req["TransactItems"].as_array().cloned().unwrap_or_default();
                if actions.is_empty() || actions.len() > MAX_TRANSACT_ACTIONS {
                    out.push(format!("D6 TransactWriteItems with {} actions (1 to 100)", actions.len()));
                }
                let mut seen = HashSet::new();
                let mut bytes = 0;
                for a in &actions {
                    let Some((kind, body)) = a.as_object().and_then(|o| o.iter().next()) else { continue };
                    let t = body["TableName"].as_str().unwrap_or("");
                    let exprs: &[&str] = match kind.as_str() {
                        "Update" => &["UpdateExpression", "ConditionExpression"],
                        _ => &["ConditionExpression"],
                    };
                    expression_params(body, exprs, &mut out);
                    ttl::check(self.schema(t), t, body, &mut out);
                    let key = if kind == "Put" {
                        self.item(t, &body["Item"], &mut out);
                        bytes += obj_size(&body["Item"]);
                        self.key_of_item(t, &body["Item"])
                    } else {
                        self.key(t, &body["Key"], &mut out);
                        bytes += obj_size(&body["Key"]) + obj_size(&body["ExpressionAttributeValues"]);
                        body["Key"].to_string()
                    };
                    if !seen.insert(format!("{t}|{key}")) {
                        out.push(format!("D6 TransactWriteItems has two actions on one item of {t}"));
                    }
                }
                if bytes > MAX_TRANSACT_BYTES {
                    out.push(format!("D6 TransactWriteItems of {bytes} bytes, over 4 MB"));
                }
            }
            "BatchWriteItem" => {
                let n: usize = req["RequestItems"]
                    .as_object()
                    .map_or(0, |m| m.values().filter_map(Value::as_array).map(Vec::len).sum());
                if n == 0 || n > 25 {
                    out.push(format!("D6 BatchWriteItem with {n} requests (1 to 25)"));
                }
            }
            "BatchGetItem" => {
                let n: usize = req["RequestItems"]
                    .as_object()
                    .map_or(0, |m| m.values().filter_map(|t| t["Keys"].as_array()).map(Vec::len).sum());
                if n == 0 || n > 100 {
                    out.push(format!("D6 BatchGetItem with {n} keys (1 to 100)"));
                }
            }
            _ => {}
        }
        out
    }

    fn key_of_item(&self, table: &str, item: &Value) -> String {
        let names = self.schema(table).map(|s| s.key.clone()).unwrap_or_default();
        names.iter().map(|n| item[n].to_string()).collect::<Vec<_>>().join("|")
    }

    /// D4 on the key attributes of the table and its indexes present in `item`.
    fn key_sizes(&self, table: &str, item: &Value, out: &mut Vec<String>) {
        let Some(schema) = self.schema(table) else { return };
        let keys = std::iter::once(&schema.key).chain(schema.indexes.iter().map(|i| &i.key));
        for key in keys {
            for (i, name) in key.iter().enumerate() {
                let Some(v) = item.get(name) else { continue };
                let size = value_size(v);
                let (limit, what) = if i == 0 { (MAX_PARTITION_KEY, "partition") } else { (MAX_SORT_KEY, "sort") };
                if size == 0 || size > limit {
                    out.push(format!("D4 {what} key {name} of {table} is {size} bytes (1 to {limit})"));
                }
            }
        }
    }

    fn key(&self, table: &str, key: &Value, out: &mut Vec<String>) {
        self.key_sizes(table, key, out);
    }

    fn item(&self, table: &str, item: &Value, out: &mut Vec<String>) {
        self.key_sizes(table, item, out);
        let size = obj_size(item);
        if size > MAX_ITEM {
            out.push(format!("D5 item of {table} is {size} bytes, over the 400 KB limit"));
        }
    }

    /// The rules one SQS request breaks (`op` like `SendMessageBatch`).
    pub fn check_sqs(op: &str, req: &Value) -> Vec<String> {
        let mut out = Vec::new();
        let url = req["QueueUrl"].as_str().unwrap_or("");
        let fifo = url.ends_with(".fifo");
        match op {
            "SendMessage" => message(req, fifo, "SendMessage", &mut out),
            "SendMessageBatch" => {
                let entries = batch(req, op, &mut out);
                let mut total = 0;
                for e in &entries {
                    message(e, fifo, "SendMessageBatch entry", &mut out);
                    total += message_size(e);
                }
                if total > MAX_SQS_MESSAGE {
                    out.push(format!("S2 SendMessageBatch of {total} bytes, over 256 KiB for the whole batch"));
                }
            }
            "DeleteMessageBatch" => {
                batch(req, op, &mut out);
            }
            "ChangeMessageVisibilityBatch" => {
                for e in batch(req, op, &mut out) {
                    range(&e["VisibilityTimeout"], 0, 43_200, "S3 VisibilityTimeout", &mut out);
                }
            }
            "ChangeMessageVisibility" => range(&req["VisibilityTimeout"], 0, 43_200, "S3 VisibilityTimeout", &mut out),
            "ReceiveMessage" => {
                range(&req["VisibilityTimeout"], 0, 43_200, "S3 VisibilityTimeout", &mut out);
                range(&req["WaitTimeSeconds"], 0, 20, "S3 WaitTimeSeconds", &mut out);
                range(&req["MaxNumberOfMessages"], 1, 10, "S3 MaxNumberOfMessages", &mut out);
            }
            _ => {}
        }
        out
    }
}

/// D1-D3 for one request (or transaction action) and its expressions.
fn expression_params(req: &Value, expressions: &[&str], out: &mut Vec<String>) {
    let exprs: Vec<&str> = expressions.iter().filter_map(|e| req[*e].as_str()).collect();
    for (field, e) in expressions.iter().zip(expressions.iter().map(|e| req[*e].as_str())) {
        if let Some(e) = e {
            if e.len() > MAX_EXPRESSION {
                out.push(format!("D3 {field} is {} bytes, over 4 KB", e.len()));
            }
        }
    }
    let mut params = 0;
    for (field, sigil) in [("ExpressionAttributeNames", '#'), ("ExpressionAttributeValues", ':')] {
        let defined: Option<&Map<String, Value>> = req[field].as_object();
        if req.get(field).is_some_and(|v| !v.is_null()) && defined.is_none_or(Map::is_empty) {
            out.push(format!("D1 {field} is present but empty (DynamoDB: \"{field} must not be empty\")"));
        }
        let used: HashSet<String> = exprs.iter().flat_map(|e| placeholders(e, sigil)).collect();
        for name in defined.into_iter().flatten().map(|(k, v)| {
            params += k.len() + v.to_string().len();
            k
        }) {
            if !used.contains(name) {
                out.push(format!("D2 {field} defines {name}, which no expression uses"));
            }
        }
        for name in &used {
            if !defined.is_some_and(|d| d.contains_key(name)) {
                out.push(format!("D2 an expression uses {name}, which {field} does not define"));
            }
        }
    }
    if params > MAX_EXPRESSION_PARAMS {
        out.push(format!("D3 expression names and values are {params} bytes, over 80 KB"));
    }
}

/// The attribute names an expression reads: its `#name` placeholders as
/// `names` resolves them, and its bare names (not a `:value`, a function or
/// a keyword). Document paths count by their first element.
fn attribute_names(expr: &str, names: &Value) -> Vec<String> {
    const WORDS: &[&str] = &[
        "AND",
        "OR",
        "NOT",
        "BETWEEN",
        "IN",
        "begins_with",
        "attribute_exists",
        "attribute_not_exists",
        "attribute_type",
        "contains",
        "size",
    ];
    let mut out = Vec::new();
    let mut chars = expr.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if !(c.is_ascii_alphanumeric() || c == '_' || c == '#' || c == ':') {
            continue;
        }
        let mut end = i + c.len_utf8();
        while let Some(&(j, d)) = chars.peek() {
            if d.is_ascii_alphanumeric() || d == '_' {
                end = j + d.len_utf8();
                chars.next();
            } else {
                break;
            }
        }
        let word = &expr[i..end];
        // The rest of a document path (`a.b`, `a[0]`) is not another attribute.
        let after_dot = expr[..i].trim_end().ends_with('.') || expr[..i].ends_with(']');
        if after_dot || c == ':' || c.is_ascii_digit() || WORDS.iter().any(|w| w.eq_ignore_ascii_case(word)) {
            continue;
        }
        if c == '#' {
            if let Some(n) = names[word].as_str() {
                out.push(n.to_string());
            }
        } else {
            out.push(word.to_string());
        }
    }
    out
}

/// The `#name` or `:value` placeholders of an expression.
fn placeholders(expr: &str, sigil: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = expr.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c != sigil {
            continue;
        }
        let mut end = i + c.len_utf8();
        while let Some(&(j, d)) = chars.peek() {
            if d.is_ascii_alphanumeric() || d == '_' {
                end = j + d.len_utf8();
                chars.next();
            } else {
                break;
            }
        }
        if end > i + 1 {
            out.push(expr[i..end].to_string());
        }
    }
    out
}

/// Size of an item (attribute names plus values), as DynamoDB counts it.
fn obj_size(v: &Value) -> usize {
    v.as_object().map_or(0, |m| m.iter().map(|(k, v)| k.len() + value_size(v)).sum())
}

fn range(v: &Value, min: i64, max: i64, what: &str, out: &mut Vec<String>) {
    if let Some(n) = v.as_i64() {
        if n < min || n > max {
            out.push(format!("{what} is {n} ({min} to {max})"));
        }
    }
}

/// S1 for a batch request; returns its entries.
fn batch(req: &Value, op: &str, out: &mut Vec<String>) -> Vec<Value> {
    let entries = req["Entries"].as_array().cloned().unwrap_or_default();
    if entries.is_empty() || entries.len() > MAX_SQS_BATCH {
        out.push(format!("S1 {op} with {} entries (1 to 10)", entries.len()));
    }
    let mut ids = HashSet::new();
    for e in &entries {
        let id = e["Id"].as_str().unwrap_or("");
        if id.is_empty() || id.len() > 80 || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            out.push(format!("S1 {op} entry id {id:?} is not 1-80 of [A-Za-z0-9_-]"));
        }
        if !ids.insert(id.to_string()) {
            out.push(format!("S1 {op} repeats the entry id {id:?}"));
        }
    }
    entries
}

fn message_size(m: &Value) -> usize {
    let body = m["MessageBody"].as_str().map_or(0, str::len);
    let attrs: usize = m["MessageAttributes"].as_object().map_or(0, |a| {
        a.iter()
            .map(|(k, v)| {
                k.len()
                    + v["DataType"].as_str().map_or(0, str::len)
                    + v["StringValue"].as_str().map_or(0, str::len)
                    + v["BinaryValue"].as_str().map_or(0, |b| b.len() * 3 / 4)
            })
            .sum()
    });
    body + attrs
}

/// S2-S6 for one message.
fn message(m: &Value, fifo: bool, what: &str, out: &mut Vec<String>) {
    let body = m["MessageBody"].as_str().unwrap_or("");
    if body.is_empty() {
        out.push(format!("S5 {what} has an empty body"));
    }
    if let Some(c) = body
        .chars()
        .find(|c| !matches!(*c as u32, 0x9 | 0xA | 0xD | 0x20..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF))
    {
        out.push(format!("S5 {what} body holds the character U+{:04X}, which SQS does not allow", c as u32));
    }
    let size = message_size(m);
    if size > MAX_SQS_MESSAGE {
        out.push(format!("S2 {what} is {size} bytes, over 256 KiB"));
    }
    range(&m["DelaySeconds"], 0, 900, &format!("S3 {what} DelaySeconds"), out);
    if let Some(attrs) = m["MessageAttributes"].as_object() {
        if attrs.len() > 10 {
            out.push(format!("S4 {what} has {} message attributes (at most 10)", attrs.len()));
        }
        for (name, v) in attrs {
            let lower = name.to_ascii_lowercase();
            let bad_chars = !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
            if name.is_empty()
                || name.len() > 256
                || bad_chars
                || lower.starts_with("aws.")
                || lower.starts_with("amazon.")
                || name.starts_with('.')
                || name.ends_with('.')
                || name.contains("..")
            {
                out.push(format!("S4 {what} message attribute name {name:?} is not allowed"));
            }
            let ty = v["DataType"].as_str().unwrap_or("");
            if ty.is_empty() {
                out.push(format!("S4 {what} message attribute {name} has no DataType"));
            }
            if (ty.starts_with("String") || ty.starts_with("Number"))
                && v["StringValue"].as_str().is_none_or(str::is_empty)
            {
                out.push(format!("S4 {what} message attribute {name} of type {ty} has no value"));
            }
        }
    }
    if fifo {
        if m["MessageGroupId"].as_str().is_none_or(str::is_empty) {
            out.push(format!("S6 {what} to a FIFO queue has no MessageGroupId"));
        }
        if m.get("DelaySeconds").is_some_and(|d| !d.is_null()) {
            out.push(format!("S6 {what} to a FIFO queue sets a per-message DelaySeconds"));
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Service {
    DynamoDb,
    Sqs,
    Streams,
    Kms,
}

/// A Streams request's operation and body, kept for its response.
#[derive(Debug, Clone)]
struct StreamsRequest(String, Value);

impl Storable for StreamsRequest {
    type Storer = StoreReplace<Self>;
}

/// Marks a request counted in flight (from before transmit to after the attempt).
#[derive(Debug, Clone)]
struct Counted;

impl Storable for Counted {
    type Storer = StoreReplace<Self>;
}

#[derive(Debug)]
struct Checking {
    service: Service,
    strict: Strict,
}

impl Intercept for Checking {
    fn name(&self) -> &'static str {
        "HooklineStrictChecker"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let req = context.request();
        let target = req.headers().get("x-amz-target").unwrap_or("");
        let op = target.rsplit('.').next().unwrap_or(target).to_string();
        let body: Value = req.body().bytes().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or(Value::Null);
        let mut found = match self.service {
            Service::DynamoDb => self.strict.check_dynamodb(&op, &body),
            Service::Sqs => Strict::check_sqs(&op, &body),
            Service::Kms => Strict::check_kms(&op, &body),
            Service::Streams => Vec::new(),
        };
        if let Some(function) = iam::current_function() {
            found.extend(self.strict.check_iam(function, self.service, &op, &body));
        }
        if let Service::Streams = self.service {
            cfg.interceptor_state().store_put(StreamsRequest(op.clone(), body));
        }
        if !found.is_empty() {
            let msg = format!("{op}: {}", found.join("; "));
            self.strict.state.violations.lock().unwrap().push(msg.clone());
            // Refused as AWS would refuse it (a ValidationException).
            return Err(format!("strict checker: AWS would reject this request: {msg}").into());
        }
        let now = self.strict.state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.strict.state.max_in_flight.fetch_max(now, Ordering::SeqCst);
        cfg.interceptor_state().store_put(Counted);
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(StreamsRequest(op, req)) = cfg.load::<StreamsRequest>() {
            let res: Value =
                context.response().body().bytes().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or(Value::Null);
            self.strict.note_iterators(op, req, &res);
        }
        Ok(())
    }

    fn read_after_attempt(
        &self,
        _context: &FinalizerInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if cfg.load::<Counted>().is_some() {
            cfg.interceptor_state().unset::<Counted>();
            self.strict.state.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

mod queries;
#[cfg(test)]
mod tests;
