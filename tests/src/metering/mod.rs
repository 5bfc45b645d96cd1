//! Metering for the cost benchmark (`bench/src/bin/cost/`): an SDK interceptor
//! on the backend's DynamoDB and SQS clients that counts every request
//! (per attempt, retries included) and computes the DynamoDB on-demand
//! read and write units each one consumes, the way DynamoDB bills them;
//! the template's function memory sizes; and the dated price table
//! `infra/prices.json`.
//!
//! What the event source mappings do on Lambda's behalf (SQS receives and
//! deletes, stream reads) and the invocations are counted by
//! [`crate::lambda_driver::DriverStats`]; the driver reads streams and
//! queues through raw HTTP calls, not these clients, so they never show up
//! here.
//!
//! DynamoDB units (on demand, standard table class):
//! - item size = sum over attributes of (name length + value size): S is
//!   its UTF-8 bytes, N about one byte per two significant digits plus one,
//!   B its bytes, BOOL and NULL one, sets the sum of their elements, M and
//!   L 3 bytes plus 1 byte per element plus the nested sizes;
//! - `PutItem`, `UpdateItem`, `DeleteItem`: ceil(size / 1 KB) write units,
//!   where size is the larger of the item before and after the write (for
//!   `DeleteItem` the deleted item); a write whose condition fails still
//!   consumes ceil(size of the existing item / 1 KB), at least 1. Item sizes
//!   are tracked by table and key from the writes this meter saw; an
//!   `UpdateItem` is applied to the tracked item (`SET a = :v`, `REMOVE`,
//!   `ADD`, `DELETE`, `if_not_exists`; other forms are estimated from the
//!   values they use);
//! - `TransactWriteItems`: each action at twice its single-item units
//!   (prepare and commit), a `ConditionCheck` as a write of the item it
//!   checks, every action of a cancelled transaction as a write whose
//!   condition failed; the index entries of its items at the standard
//!   units (DynamoDB propagates them after the commit, as for any write);
//! - global secondary indexes: a write that puts an item into an index, or
//!   changes a projected attribute of an item in it, costs ceil(index entry
//!   size / 1 KB) more write units (two writes when the index key changes);
//! - `GetItem`: ceil(returned size / 4 KB), at least 1, read units, halved
//!   unless `ConsistentRead`; `Query` and `Scan`: ceil(sum of the returned
//!   item sizes / 4 KB), at least 1, halved unless `ConsistentRead` (always
//!   halved on an index).
//!
//! SQS: every request is billed once per started 64 KB of payload (request
//! plus response body, a slight over-estimate).
//!
//! Every DynamoDB `Scan` is also listed with the function that issued it
//! ([`MeterCounts::scans`]), named from the call stack at the request (the
//! handler entry point of `hookline_aws::lambda` it runs under); a build without
//! symbols (the release profile strips them) cannot name it and says so.

mod template;
mod units;

pub use template::*;
pub use units::*;

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::config::interceptors::{BeforeTransmitInterceptorContextRef, FinalizerInterceptorContextRef};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use serde_json::{Map, Value};
use serde_yaml::Value as Yaml;

use crate::lambda_driver::SQS_BILLING_CHUNK;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

// ------------------------------------------------------------------- meter

#[derive(Default)]
struct State {
    counts: MeterCounts,
    /// Billing images of the items written through the meter, by (table name, key).
    items: HashMap<(String, String), Image>,
}

/// Counts the requests of the clients it is installed on (see
/// [`Meter::dynamodb_client`], [`Meter::sqs_client`]).
#[derive(Clone)]
pub struct Meter {
    state: Arc<Mutex<State>>,
    tables: Arc<Vec<TableSchema>>,
}

impl std::fmt::Debug for Meter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Meter")
    }
}

impl Meter {
    /// A meter for the tables of the template.
    pub fn new() -> Meter {
        Meter { state: Arc::default(), tables: Arc::new(table_schemas()) }
    }

    /// A DynamoDB client on `sdk` with this meter installed.
    pub fn dynamodb_client(&self, sdk: &aws_config::SdkConfig) -> aws_sdk_dynamodb::Client {
        let conf = aws_sdk_dynamodb::config::Builder::from(sdk)
            .interceptor(Metering { service: "DynamoDB", meter: self.clone() })
            .build();
        aws_sdk_dynamodb::Client::from_conf(conf)
    }

    /// An SQS client on `sdk` with this meter installed.
    pub fn sqs_client(&self, sdk: &aws_config::SdkConfig) -> aws_sdk_sqs::Client {
        let conf = aws_sdk_sqs::config::Builder::from(sdk)
            .interceptor(Metering { service: "SQS", meter: self.clone() })
            .build();
        aws_sdk_sqs::Client::from_conf(conf)
    }

    /// A copy of the counts so far.
    pub fn snapshot(&self) -> MeterCounts {
        self.state.lock().unwrap().counts.clone()
    }

    fn schema(&self, table_name: &str) -> Option<&TableSchema> {
        self.tables.iter().find(|t| table_name == t.logical_id || table_name.ends_with(&format!("-{}", t.logical_id)))
    }

    /// Counts one request/response pair (`status` None: no response).
    fn record(&self, service: &str, target: &str, req: &[u8], status: Option<u16>, res: &[u8]) {
        let op = target.rsplit('.').next().unwrap_or(target).to_string();
        // Named before the lock (reading the call stack is slow); Scans are rare.
        let scan = (service == "DynamoDB" && op == "Scan").then(|| {
            let table = serde_json::from_slice::<Value>(req).ok().and_then(|r| r["TableName"].as_str().map(logical_id));
            (table.unwrap_or_else(|| "-".into()), scan_origin())
        });
        let mut st = self.state.lock().unwrap();
        if let Some(k) = scan {
            *st.counts.scans.entry(k).or_default() += 1;
        }
        let Some(status) = status else {
            st.counts.no_response += 1;
            return;
        };
        let bytes = (req.len() + res.len()) as u64;
        let req: Value = serde_json::from_slice(req).unwrap_or(Value::Null);
        let res_json: Value = serde_json::from_slice(res).unwrap_or(Value::Null);
        let resource = req["TableName"]
            .as_str()
            .or_else(|| req["QueueUrl"].as_str())
            .map(logical_id)
            .or_else(|| transaction_tables(&req))
            .unwrap_or_else(|| "-".into());
        let r = st.counts.requests.entry((service.to_string(), op.clone(), resource)).or_default();
        r.requests += 1;
        r.errors += u64::from(status >= 300);
        r.bytes += bytes;
        r.billed += bytes.div_ceil(SQS_BILLING_CHUNK).max(1);
        if service == "DynamoDB" {
            let condition_failed = status == 400
                && res_json["__type"].as_str().is_some_and(|t| {
                    t.ends_with("ConditionalCheckFailedException") || t.ends_with("TransactionCanceledException")
                });
            if status < 300 || condition_failed {
                self.dynamodb_units(&mut st, &op, &req, &res_json, condition_failed);
            }
        }
    }

    fn key_of(&self, table: &str, item: &Map<String, Value>) -> String {
        let names: Vec<String> = match self.schema(table) {
            Some(s) => s.key.clone(),
            None => {
                let mut k: Vec<String> = item.keys().cloned().collect();
                k.sort();
                k
            }
        };
        names
            .iter()
            .map(|n| format!("{n}={}", item.get(n).map(Value::to_string).unwrap_or_default()))
            .collect::<Vec<_>>()
            .join("|")
    }

    fn add_units(st: &mut State, table: &str, op: &str, bytes: usize, wru: f64, rru: f64, condition_failed: bool) {
        let u = st.counts.dynamodb.entry((logical_id(table), op.to_string())).or_default();
        u.requests += 1;
        u.bytes += bytes as u64;
        u.wru += wru;
        u.rru += rru;
        u.condition_failed += u64::from(condition_failed);
    }

    /// Index writes of a change from `old` to `new` in `table`.
    fn index_writes(&self, st: &mut State, table: &str, op: &str, old: Option<&Image>, new: Option<&Image>) {
        let Some(schema) = self.schema(table) else { return };
        for idx in &schema.indexes {
            let in_old = old.filter(|o| o.has_all(&idx.key));
            let in_new = new.filter(|n| n.has_all(&idx.key));
            let size = |i: &Image| i.projected_size(schema, idx);
            let units = match (in_old, in_new) {
                (None, None) => 0.0,
                (None, Some(n)) => wru(size(n)),
                (Some(o), None) => wru(size(o)),
                (Some(o), Some(n)) => {
                    let key_changed = idx.key.iter().any(|k| o.0.get(k).map(|a| a.hash) != n.0.get(k).map(|a| a.hash));
                    let projected = |i: &Image| {
                        let mut v: Vec<(String, u64)> =
                            i.0.iter()
                                .filter(|(name, _)| match &idx.projection {
                                    Projection::All => true,
                                    Projection::KeysOnly => schema.key.contains(name) || idx.key.contains(name),
                                    Projection::Include(x) => {
                                        schema.key.contains(name) || idx.key.contains(name) || x.contains(name)
                                    }
                                })
                                .map(|(name, a)| (name.clone(), a.hash))
                                .collect();
                        v.sort();
                        v
                    };
                    if key_changed {
                        wru(size(o)) + wru(size(n))
                    } else if projected(o) != projected(n) {
                        wru(size(n))
                    } else {
                        0.0
                    }
                }
            };
            if units > 0.0 {
                let name = format!("{}[{}]", schema.logical_id, idx.name);
                let u = st.counts.dynamodb.entry((name, op.to_string())).or_default();
                u.wru += units;
                u.bytes += in_new.or(in_old).map_or(0, size) as u64;
            }
        }
    }

    /// The units of one write (`kind`: `Put`, `Update` or `Delete`) of
    /// `body` (a request, or a transaction's action) to `table`, counted
    /// under `op`, at `factor` times the standard units (2 in a
    /// transaction). A write whose condition failed is billed on the item it
    /// found and changes nothing.
    #[allow(clippy::too_many_arguments)]
    fn write_units(
        &self,
        st: &mut State,
        table: &str,
        op: &str,
        kind: &str,
        body: &Value,
        res: &Value,
        condition_failed: bool,
        factor: f64,
    ) {
        let empty = Map::new();
        let key_attrs = if kind == "Put" { &body["Item"] } else { &body["Key"] };
        let key = (table.to_string(), self.key_of(table, key_attrs.as_object().unwrap_or(&empty)));
        let old = st.items.get(&key).cloned();
        if condition_failed {
            // The existing item's size; ALL_OLD on failure returns it when
            // the meter had not seen it written.
            let size = old
                .as_ref()
                .map(Image::size)
                .or_else(|| res["Item"].as_object().or(res["Attributes"].as_object()).map(|i| Image::of(i).size()))
                .unwrap_or(0);
            Self::add_units(st, table, op, size, factor * wru(size), 0.0, true);
            return;
        }
        let new = match kind {
            "Put" => Some(Image::of(body["Item"].as_object().unwrap_or(&empty))),
            "Update" => {
                let mut new = match (&old, res["Attributes"].as_object()) {
                    (Some(o), _) => o.clone(),
                    // Unknown before: estimate from what the response returned, or the key.
                    (None, Some(a)) => Image::of(a),
                    (None, None) => Image::of(key_attrs.as_object().unwrap_or(&empty)),
                };
                apply_update(
                    &mut new,
                    body["UpdateExpression"].as_str().unwrap_or(""),
                    body["ExpressionAttributeNames"].as_object().unwrap_or(&empty),
                    body["ExpressionAttributeValues"].as_object().unwrap_or(&empty),
                );
                Some(new)
            }
            _ => None,
        };
        let size = match &new {
            Some(n) => n.size().max(old.as_ref().map_or(0, Image::size)),
            None => old
                .as_ref()
                .map(Image::size)
                .or_else(|| res["Attributes"].as_object().map(|a| Image::of(a).size()))
                .unwrap_or(0),
        };
        Self::add_units(st, table, op, size, factor * wru(size), 0.0, false);
        self.index_writes(st, table, op, old.as_ref(), new.as_ref());
        match new {
            Some(n) => st.items.insert(key, n),
            None => st.items.remove(&key),
        };
    }

    fn dynamodb_units(&self, st: &mut State, op: &str, req: &Value, res: &Value, condition_failed: bool) {
        let table = req["TableName"].as_str().unwrap_or("").to_string();
        let empty = Map::new();
        let consistent = req["ConsistentRead"].as_bool().unwrap_or(false) && req["IndexName"].is_null();
        match op {
            "PutItem" | "UpdateItem" | "DeleteItem" => {
                let kind = op.trim_end_matches("Item");
                self.write_units(st, &table, op, kind, req, res, condition_failed, 1.0);
            }
            "TransactWriteItems" => {
                // Each action is billed as its single-item form at twice the
                // units (prepare and commit), a ConditionCheck as a write of
                // the item it checks; a cancelled transaction as its actions
                // failing their conditions. Index entries are propagated
                // after the commit: standard units.
                let cancelled = condition_failed;
                for action in req["TransactItems"].as_array().into_iter().flatten() {
                    let Some((kind, body)) = ["Put", "Update", "Delete", "ConditionCheck"]
                        .iter()
                        .find_map(|k| action.get(*k).map(|b| (*k, b)))
                    else {
                        continue;
                    };
                    let table = body["TableName"].as_str().unwrap_or("").to_string();
                    if kind == "ConditionCheck" {
                        let k = body["Key"].as_object().unwrap_or(&empty);
                        let size = st.items.get(&(table.clone(), self.key_of(&table, k))).map_or(0, Image::size);
                        Self::add_units(st, &table, op, size, 2.0 * wru(size), 0.0, cancelled);
                    } else {
                        self.write_units(st, &table, op, kind, body, &Value::Null, cancelled, 2.0);
                    }
                }
            }
            "GetItem" => {
                // Billed on the whole item, whatever a ProjectionExpression
                // returns: the size the meter saw written, when it did.
                let k = req["Key"].as_object().unwrap_or(&empty);
                let tracked = st.items.get(&(table.clone(), self.key_of(&table, k))).map(Image::size);
                let returned = res["Item"].as_object().map(|i| Image::of(i).size());
                let size = match (returned, tracked) {
                    (Some(r), Some(t)) => r.max(t),
                    (Some(r), None) => r,
                    (None, _) => 0,
                };
                Self::add_units(st, &table, op, size, 0.0, rru(size, consistent), false);
            }
            "BatchGetItem" => {
                // Each key is a GetItem of its own: its whole item (the size
                // the meter saw written, else what came back) rounded up to
                // 4 KB, at least one unit even when absent, halved unless
                // ConsistentRead; unprocessed keys are not read.
                for (name, ka) in req["RequestItems"].as_object().unwrap_or(&empty) {
                    let consistent = ka["ConsistentRead"].as_bool().unwrap_or(false);
                    let returned: Vec<&Map<String, Value>> =
                        res["Responses"][name].as_array().into_iter().flatten().filter_map(Value::as_object).collect();
                    let unprocessed: Vec<String> = res["UnprocessedKeys"][name]["Keys"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_object)
                        .map(|k| self.key_of(name, k))
                        .collect();
                    let (mut bytes, mut units) = (0usize, 0.0);
                    for k in ka["Keys"].as_array().into_iter().flatten().filter_map(Value::as_object) {
                        let key = self.key_of(name, k);
                        if unprocessed.contains(&key) {
                            continue;
                        }
                        let got = returned.iter().find(|i| self.key_of(name, i) == key).map(|i| Image::of(i).size());
                        let tracked = st.items.get(&(name.clone(), key)).map(Image::size);
                        let size = match (got, tracked) {
                            (Some(r), Some(t)) => r.max(t),
                            (Some(r), None) => r,
                            (None, _) => 0,
                        };
                        bytes += size;
                        units += rru(size, consistent);
                    }
                    Self::add_units(st, name, op, bytes, 0.0, units, false);
                }
            }
            "Query" | "Scan" => {
                let size: usize = res["Items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_object)
                    .map(|i| Image::of(i).size())
                    .sum();
                let name = match req["IndexName"].as_str() {
                    Some(ix) => format!("{}[{ix}]", logical_id(&table)),
                    None => table.clone(),
                };
                Self::add_units(st, &name, op, size, 0.0, rru(size, consistent), false);
            }
            other => *st.counts.unmetered.entry(other.to_string()).or_default() += 1,
        }
    }
}

/// The tables a transaction's actions name, joined by `+`.
fn transaction_tables(req: &Value) -> Option<String> {
    let tables: Vec<String> = req["TransactItems"]
        .as_array()?
        .iter()
        .filter_map(|a| a.as_object()?.values().find_map(|b| b["TableName"].as_str()).map(logical_id))
        .collect();
    (!tables.is_empty()).then(|| tables.join("+"))
}

impl Default for Meter {
    fn default() -> Self {
        Meter::new()
    }
}

/// The request of the current attempt, kept from before transmit (when the
/// request is still there) to after the attempt (when the response is).
#[derive(Debug, Clone)]
struct Sent {
    target: String,
    body: Vec<u8>,
}

impl Storable for Sent {
    type Storer = StoreReplace<Self>;
}

#[derive(Debug)]
struct Metering {
    service: &'static str,
    meter: Meter,
}

impl Intercept for Metering {
    fn name(&self) -> &'static str {
        "HooklineCostMeter"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let req = context.request();
        let target = req.headers().get("x-amz-target").unwrap_or("").to_string();
        let body = req.body().bytes().map(<[u8]>::to_vec).unwrap_or_default();
        cfg.interceptor_state().store_put(Sent { target, body });
        Ok(())
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(sent) = cfg.load::<Sent>().cloned() else { return Ok(()) };
        cfg.interceptor_state().unset::<Sent>();
        let status = context.response().map(|r| r.status().as_u16());
        let body = context.response().and_then(|r| r.body().bytes()).unwrap_or(&[]);
        self.meter.record(self.service, &sent.target, &sent.body, status, body);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes_follow_dynamodb_rules() {
        assert_eq!(value_size(&json!({"S": "héllo"})), 6);
        assert_eq!(number_size("1767225601"), 6);
        assert_eq!(number_size("1767225600"), 5);
        assert_eq!(number_size("0"), 2);
        assert_eq!(number_size("-12.50"), 3);
        assert_eq!(value_size(&json!({"B": "AAAA"})), 3);
        assert_eq!(value_size(&json!({"BOOL": true})), 1);
        assert_eq!(wru(1024), 1.0);
        assert_eq!(wru(1025), 2.0);
        assert_eq!(rru(0, false), 0.5);
        assert_eq!(rru(4097, true), 2.0);
    }

    #[test]
    fn updates_apply_set_and_remove() {
        let mut img = Image::of(
            json!({"id": {"S": "a"}, "status": {"S": "Pending"}, "last_error": {"S": "x"}}).as_object().unwrap(),
        );
        apply_update(
            &mut img,
            "SET #status = :s, attempts = :n REMOVE last_error",
            json!({"#status": "status"}).as_object().unwrap(),
            json!({":s": {"S": "Completed"}, ":n": {"N": "1"}}).as_object().unwrap(),
        );
        assert_eq!(img.0["status"].size, "status".len() + "Completed".len());
        assert_eq!(img.0["attempts"].size, "attempts".len() + 2);
        assert!(!img.0.contains_key("last_error"));
    }
}
