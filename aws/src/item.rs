//! Pure mappings between Hookline's records and DynamoDB items, laid out
//! exactly as `infra/README.md` specifies (the contract between
//! `template.yaml`, the adapters and the stream handlers).
//!
//! The mappings work on a neutral representation, [`Attrs`], so the same code
//! decodes the SDK's `HashMap<String, aws_sdk_dynamodb::types::AttributeValue>`
//! (what `GetItem`/`Query` return) and the stream images Lambda delivers
//! (`serde_dynamo::Item` in `aws_lambda_events::dynamodb::StreamRecord`), or
//! DynamoDB JSON.
//! Nothing here does I/O.

use std::collections::HashMap;
use std::str::FromStr;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use shared::attempt::Attempt;
use shared::dead_letter::DeadLetter;
use shared::error::StoreError;
use shared::event::EventRecord;
use shared::ids::{EventId, SagaId, SubscriptionId, WebhookId};
use shared::saga::{Origin, Saga, SagaState, SagaStatus};
use shared::subscription::Subscription;

/// One attribute value, reduced to the types Hookline's items use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attr {
    /// A string (`S`).
    S(String),
    /// A number (`N`), kept as DynamoDB sends it: decimal text.
    N(String),
    /// A binary (`B`): the compressed `data_z` of large events.
    B(Vec<u8>),
    /// An explicit `NULL`; read like an absent attribute.
    Null,
    /// Any other type (binary, bool, sets, lists, maps), named by its
    /// DynamoDB type tag; Hookline never writes these, so reading one as a
    /// field is a corruption error.
    Other(String),
}

/// One item as attribute name → value: the neutral form every mapping here
/// reads and writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attrs(pub HashMap<String, Attr>);

impl Attrs {
    /// An empty item.
    pub fn new() -> Self {
        Attrs(HashMap::new())
    }

    /// Sets a string attribute.
    pub fn put_s(&mut self, name: &str, value: impl Into<String>) -> &mut Self {
        self.0.insert(name.to_string(), Attr::S(value.into()));
        self
    }

    /// Sets a number attribute.
    pub fn put_n(&mut self, name: &str, value: impl ToString) -> &mut Self {
        self.0.insert(name.to_string(), Attr::N(value.to_string()));
        self
    }

    /// Sets a string attribute if `value` is `Some`; leaves it absent otherwise.
    pub fn put_opt_s(&mut self, name: &str, value: Option<impl Into<String>>) -> &mut Self {
        if let Some(v) = value {
            self.put_s(name, v);
        }
        self
    }

    /// A required string attribute.
    pub fn s(&self, name: &str) -> Result<&str, StoreError> {
        self.opt_s(name)?.ok_or_else(|| missing(name))
    }

    /// An optional string attribute (absent or `NULL` read as `None`).
    pub fn opt_s(&self, name: &str) -> Result<Option<&str>, StoreError> {
        match self.0.get(name) {
            None | Some(Attr::Null) => Ok(None),
            Some(Attr::S(s)) => Ok(Some(s)),
            Some(other) => Err(wrong_type(name, "S", other)),
        }
    }

    /// A required number attribute, parsed as `T`.
    pub fn n<T: FromStr>(&self, name: &str) -> Result<T, StoreError> {
        match self.0.get(name) {
            Some(Attr::N(n)) => {
                n.parse().map_err(|_| StoreError::Corrupt(format!("attribute `{name}` is not a valid number: {n}")))
            }
            None | Some(Attr::Null) => Err(missing(name)),
            Some(other) => Err(wrong_type(name, "N", other)),
        }
    }

    /// An optional number attribute (absent or `NULL` read as `None`).
    pub fn opt_n<T: FromStr>(&self, name: &str) -> Result<Option<T>, StoreError> {
        match self.0.get(name) {
            None | Some(Attr::Null) => Ok(None),
            Some(_) => self.n(name).map(Some),
        }
    }

    /// A required string attribute holding RFC 3339 time.
    pub fn time(&self, name: &str) -> Result<DateTime<Utc>, StoreError> {
        parse_time(name, self.s(name)?)
    }

    /// An optional string attribute holding RFC 3339 time.
    pub fn opt_time(&self, name: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.opt_s(name)?.map(|s| parse_time(name, s)).transpose()
    }

    /// Decodes the JSON string attribute `data` (the record as `serde_json`
    /// writes it).
    pub fn data<T: serde::de::DeserializeOwned>(&self) -> Result<T, StoreError> {
        decode_json("data", self.s("data")?)
    }

    /// The item as the SDK takes it.
    pub fn into_sdk(self) -> HashMap<String, AttributeValue> {
        self.0
            .into_iter()
            .filter_map(|(k, v)| {
                let v = match v {
                    Attr::S(s) => AttributeValue::S(s),
                    Attr::N(n) => AttributeValue::N(n),
                    Attr::B(b) => AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(b)),
                    Attr::Null => AttributeValue::Null(true),
                    // Never produced by the mappings below; not writable back.
                    Attr::Other(_) => return None,
                };
                Some((k, v))
            })
            .collect()
    }

    /// Reads an item the SDK returned.
    pub fn from_sdk(item: &HashMap<String, AttributeValue>) -> Attrs {
        Attrs(
            item.iter()
                .map(|(k, v)| {
                    let a = match v {
                        AttributeValue::S(s) => Attr::S(s.clone()),
                        AttributeValue::N(n) => Attr::N(n.clone()),
                        AttributeValue::Null(_) => Attr::Null,
                        AttributeValue::B(b) => Attr::B(b.clone().into_inner()),
                        AttributeValue::Bool(_) => Attr::Other("BOOL".into()),
                        AttributeValue::L(_) => Attr::Other("L".into()),
                        AttributeValue::M(_) => Attr::Other("M".into()),
                        AttributeValue::Ss(_) => Attr::Other("SS".into()),
                        AttributeValue::Ns(_) => Attr::Other("NS".into()),
                        AttributeValue::Bs(_) => Attr::Other("BS".into()),
                        _ => Attr::Other("unknown".into()),
                    };
                    (k.clone(), a)
                })
                .collect(),
        )
    }

    /// Reads a stream image (`NewImage` of an `aws_lambda_events`
    /// DynamoDB stream record).
    pub fn from_stream(image: &serde_dynamo::Item) -> Attrs {
        Attrs(
            image
                .iter()
                .map(|(k, v)| {
                    use serde_dynamo::AttributeValue as V;
                    let a = match v {
                        V::S(s) => Attr::S(s.clone()),
                        V::N(n) => Attr::N(n.clone()),
                        V::Null(_) => Attr::Null,
                        V::Bool(_) => Attr::Other("BOOL".into()),
                        V::B(b) => Attr::B(b.clone()),
                        V::M(_) => Attr::Other("M".into()),
                        V::L(_) => Attr::Other("L".into()),
                        V::Ss(_) => Attr::Other("SS".into()),
                        V::Ns(_) => Attr::Other("NS".into()),
                        V::Bs(_) => Attr::Other("BS".into()),
                    };
                    (k.clone(), a)
                })
                .collect(),
        )
    }

    /// Reads an item in DynamoDB's JSON form (`{"name": {"S": "..."}, ...}`)
    /// from anything that serializes to it, e.g. a `serde_json::Value` of a
    /// stream record's `NewImage` as AWS sends it.
    pub fn from_json(image: &impl Serialize) -> Result<Attrs, StoreError> {
        let value = serde_json::to_value(image).map_err(|e| StoreError::Corrupt(format!("item image: {e}")))?;
        let serde_json::Value::Object(map) = value else {
            return Err(StoreError::Corrupt("item image is not a map of attributes".into()));
        };
        let mut out = HashMap::with_capacity(map.len());
        for (name, typed) in map {
            let serde_json::Value::Object(typed) = typed else {
                return Err(StoreError::Corrupt(format!("item image attribute `{name}` is not a typed value")));
            };
            let mut entries = typed.into_iter();
            let (Some((tag, v)), None) = (entries.next(), entries.next()) else {
                return Err(StoreError::Corrupt(format!("item image attribute `{name}` must have exactly one type")));
            };
            let attr = match (tag.as_str(), v) {
                ("S", serde_json::Value::String(s)) => Attr::S(s),
                ("N", serde_json::Value::String(n)) => Attr::N(n),
                ("NULL", _) => Attr::Null,
                ("B", serde_json::Value::String(b)) => {
                    use base64::Engine;
                    Attr::B(base64::engine::general_purpose::STANDARD.decode(b).map_err(|e| {
                        StoreError::Corrupt(format!("item image attribute `{name}` is not base64: {e}"))
                    })?)
                }
                (other, _) => Attr::Other(other.to_string()),
            };
            out.insert(name, attr);
        }
        Ok(Attrs(out))
    }
}

fn missing(name: &str) -> StoreError {
    StoreError::Corrupt(format!("item has no attribute `{name}`"))
}

fn wrong_type(name: &str, want: &str, got: &Attr) -> StoreError {
    let got = match got {
        Attr::S(_) => "S",
        Attr::N(_) => "N",
        Attr::B(_) => "B",
        Attr::Null => "NULL",
        Attr::Other(t) => t.as_str(),
    };
    StoreError::Corrupt(format!("attribute `{name}` has type {got}, expected {want}"))
}

fn parse_time(name: &str, s: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt(format!("attribute `{name}` is not RFC 3339 time ({e}): {s}")))
}

fn decode_json<T: serde::de::DeserializeOwned>(name: &str, s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Corrupt(format!("attribute `{name}`: {e}")))
}

fn encode_json<T: Serialize>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Corrupt(format!("record does not serialize: {e}")))
}

/// RFC 3339 in UTC with as many fractional digits as needed, so times read
/// back exactly as written (the same text `serde` writes for `DateTime<Utc>`).
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// The DynamoDB TTL value (epoch seconds) of a record made at `at` and kept
/// for `retention`.
pub fn ttl(at: DateTime<Utc>, retention: chrono::Duration) -> i64 {
    at.checked_add_signed(retention).unwrap_or(DateTime::<Utc>::MAX_UTC).timestamp()
}

// ------------------------------------------------------------------ events

/// Records larger than this are stored deflated in `data_z`.
pub const COMPRESS_ABOVE: usize = 640;

/// Largest record `data_z` may inflate to (DynamoDB's item limit is 400 KB).
const MAX_INFLATED: usize = 4 * 1024 * 1024;

/// The Events item: `id`, `event_type`, `expires_at` (epoch s), and the
/// record as JSON: in `data`, or deflated in `data_z` (binary) when it is
/// larger than [`COMPRESS_ABOVE`] and compresses. DynamoDB bills writes per
/// KB of item, so a 1 KiB JSON event compressed under 1 KB costs one write
/// unit instead of two (the largest single line item of a delivery).
/// `expires_at` is the later of the record's own `expires_at` and
/// `received_at + retention`, so an event is never dropped before either.
pub fn event_to_attrs(e: &EventRecord, retention: chrono::Duration) -> Result<Attrs, StoreError> {
    let mut a = Attrs::new();
    a.put_s("id", e.id.as_str())
        .put_s("event_type", &e.event_type)
        .put_n("expires_at", ttl(e.received_at, retention).max(e.expires_at.timestamp()));
    put_search_attrs(&mut a, e)?;
    let json = encode_json(e)?;
    let deflated = (json.len() > COMPRESS_ABOVE).then(|| miniz_oxide::deflate::compress_to_vec(json.as_bytes(), 6));
    match deflated {
        Some(z) if z.len() < json.len() => a.0.insert("data_z".into(), Attr::B(z)),
        _ => a.0.insert("data".into(), Attr::S(json)),
    };
    Ok(a)
}

/// GSI of EventsTable over every event by time: partition key
/// `time_bucket` (`<UTC day>#<shard>`, [`EVENT_SHARDS`] a day), sort key
/// `time_key` ([`event_time_key`]).
pub const EVENTS_BY_TIME: &str = "by_time";
/// Sparse GSI of EventsTable over one tenant's events by time: partition
/// key `tenant_shard` ([`event_tenant_key`]: one tenant's events spread
/// over [`EVENT_SHARDS`] values, so a busy tenant takes 8,000 index
/// writes a second, not 1,000), sort key `time_key`. A listing queries
/// every shard and merges them.
pub const EVENTS_BY_TENANT: &str = "tenant_shards";

/// The [`EVENTS_BY_TENANT`] partition of tenant `tenant`'s shard `shard`.
pub fn event_tenant_key(tenant: &str, shard: u32) -> String {
    format!("{tenant}#{shard}")
}
/// Sparse GSI of EventsTable over one partition's numbered events:
/// partition key `partition` ([`event_partition_key`]), sort key
/// `partition_seq`.
pub const EVENTS_BY_PARTITION: &str = "by_partition";

/// GSI of EventOutcomesTable over the events that failed: partition key
/// `outcome_shard` ([`outcome_shard`]), sort key `time_key`; projects
/// `event_type`, `outcome`, `summary` and `tenant_id` (a tenant's failed
/// events are a filter on it).
pub const EVENTS_BY_OUTCOME: &str = "by_outcome";

/// Sparse GSI of EventOutcomesTable over one partition's failed numbered
/// events: partition key `partition`, sort key `partition_seq` (as
/// [`EVENTS_BY_PARTITION`] of EventsTable); projects `event_type`,
/// `outcome`, `summary` and `time_key`.
pub const OUTCOMES_BY_PARTITION: &str = "by_partition";

/// Write shards of [`EVENTS_BY_OUTCOME`]: failures come at most at the
/// delivery rate, and a listing of them queries every shard.
pub const OUTCOME_SHARDS: u32 = 4;

/// An event's [`EVENTS_BY_OUTCOME`] partition: a stable hash of its id.
pub fn outcome_shard(id: &str) -> String {
    (event_shard(id) % OUTCOME_SHARDS).to_string()
}

/// Write shards of each day of [`EVENTS_BY_TIME`]: an index partition
/// takes about 1,000 writes a second, so the index takes about 8,000 events
/// a second; a listing queries every shard of a day and merges them.
pub const EVENT_SHARDS: u32 = 8;

/// The `time_key` of an event received at `received_at` (epoch ms, 15
/// digits, so text order is time order) with its id: unique, and the
/// listing's order (received_at, then id).
pub fn event_time_key(received_at: DateTime<Utc>, id: &str) -> String {
    format!("{}#{id}", event_time_bound(received_at.timestamp_millis()))
}

/// The text of epoch ms `ms` as a `time_key` prefix: every key of an event
/// received at `ms` or later sorts after it, every earlier one before it.
pub fn event_time_bound(ms: i64) -> String {
    format!("{:015}", ms.max(0))
}

/// The [`EVENTS_BY_TIME`] partition of day `day` (`YYYY-MM-DD`) and shard.
pub fn event_time_bucket(day: &str, shard: u32) -> String {
    format!("{day}#{shard}")
}

/// An event's write shard: a stable hash of its id.
pub fn event_shard(id: &str) -> u32 {
    id.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b))) % EVENT_SHARDS
}

/// The `partition` of an event's partition (scope, then key; the scope
/// is self-delimiting: [`shared::routing::Scope::as_text`]).
pub fn event_partition_key(p: &shared::ordering::Partition) -> String {
    format!("{}#{}", p.scope, p.key)
}

/// The attributes the event indexes are keyed on: `time_bucket`,
/// `time_key`, and `tenant_shard` (tenant events), `partition`/`partition_seq`
/// (numbered events only), and what a listing shows, `summary`
/// ([`event_summary_attr`], about 100 to 200 bytes), which the indexes
/// project so a listing reads no event. Nothing else is copied out of
/// `data`: every byte on the item is paid on each event's write. The
/// event is never written again: its delivery outcome is an item of
/// EventOutcomesTable ([`event_outcome_attrs`]).
fn put_search_attrs(a: &mut Attrs, e: &EventRecord) -> Result<(), StoreError> {
    let day = e.received_at.format("%Y-%m-%d").to_string();
    a.put_s("time_bucket", event_time_bucket(&day, event_shard(e.id.as_str())))
        .put_s("time_key", event_time_key(e.received_at, e.id.as_str()))
        .put_opt_s("tenant_shard", e.tenant_id.as_deref().map(|t| event_tenant_key(t, event_shard(e.id.as_str()))))
        .put_s("summary", event_summary_attr(e)?);
    if let (Some(seq), Some(p)) = (e.partition_seq, e.partition()) {
        a.put_s("partition", event_partition_key(&p)).put_n("partition_seq", seq);
    }
    Ok(())
}

/// The fields of an [`shared::event_search::EventSummary`] that no other
/// attribute holds, under one-letter names (attribute bytes are billed on
/// every write and every index entry): attribute `summary`, JSON.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
struct SummaryAttr {
    #[serde(rename = "r")]
    received_at: DateTime<Utc>,
    #[serde(rename = "o")]
    occurred_at: DateTime<Utc>,
    #[serde(rename = "f")]
    format: shared::envelope::Format,
    #[serde(rename = "t", default, skip_serializing_if = "Option::is_none")]
    tenant_id: Option<String>,
    #[serde(rename = "k", default, skip_serializing_if = "Option::is_none")]
    partition_key: Option<String>,
    #[serde(rename = "q", default, skip_serializing_if = "Option::is_none")]
    sequence: Option<String>,
    #[serde(rename = "n", default, skip_serializing_if = "Option::is_none")]
    partition_seq: Option<u64>,
}

/// The `summary` attribute of an event (on its Events item and its
/// outcome item): what a listing shows of it besides `id` and `event_type`.
pub fn event_summary_attr(e: &EventRecord) -> Result<String, StoreError> {
    encode_json(&SummaryAttr {
        received_at: e.received_at,
        occurred_at: e.occurred_at,
        format: e.format,
        tenant_id: e.tenant_id.clone(),
        partition_key: e.partition_key.clone(),
        sequence: e.sequence.clone(),
        partition_seq: e.partition_seq,
    })
}

/// What an events index query found of an event: its id, its `time_key`
/// (when the index projects it), its summary (`None` for an event stored
/// before `summary` existed: the listing reads that event), and its
/// outcome when the entry came from EventOutcomesTable.
#[derive(Debug, Clone, PartialEq)]
pub struct EventHit {
    /// The event's id.
    pub id: EventId,
    /// Its `time_key`, if the entry has it.
    pub time_key: Option<String>,
    /// Its summary (outcome not set), if the entry has `summary`.
    pub summary: Option<shared::event_search::EventSummary>,
    /// Its outcome, on entries of EventOutcomesTable's indexes.
    pub outcome: Option<shared::event_search::Outcome>,
}

/// An entry of an index of EventsTable (id in `id`) or of
/// EventOutcomesTable (id in `event_id`, with `outcome`).
pub fn event_hit_from_attrs(a: &Attrs) -> Result<EventHit, StoreError> {
    let id = EventId::new(match a.0.contains_key("event_id") {
        true => a.s("event_id")?,
        false => a.s("id")?,
    });
    let outcome = match a.0.contains_key("event_id") {
        true => a.opt_n::<u64>("outcome")?.and_then(shared::event_search::Outcome::from_level),
        false => None,
    };
    let summary = match a.opt_s("summary")? {
        None => None,
        Some(json) => {
            let s: SummaryAttr =
                serde_json::from_str(json).map_err(|e| StoreError::Corrupt(format!("attribute `summary`: {e}")))?;
            Some(shared::event_search::EventSummary {
                id: id.clone(),
                event_type: a.s("event_type")?.to_string(),
                tenant_id: s.tenant_id,
                partition_key: s.partition_key,
                sequence: s.sequence,
                partition_seq: s.partition_seq,
                received_at: s.received_at,
                occurred_at: s.occurred_at,
                format: s.format,
                outcome: None,
            })
        }
    };
    Ok(EventHit { id, time_key: a.opt_s("time_key")?.map(str::to_string), summary, outcome })
}

/// The attributes of an event's item of EventOutcomesTable besides its key
/// `event_id` and `outcome`: `outcome_shard` and `time_key` (index
/// [`EVENTS_BY_OUTCOME`]), `partition`/`partition_seq` (numbered events:
/// [`OUTCOMES_BY_PARTITION`]), `event_type`, `tenant_id` and `summary` (what
/// the outcome listings filter on and show, so they read no event), and
/// the event's `expires_at` (the item goes with its event). About 300 bytes:
/// one write unit, and one per index it is in.
pub fn event_outcome_attrs(e: &EventRecord, retention: chrono::Duration) -> Result<Attrs, StoreError> {
    let mut a = Attrs::new();
    a.put_s("outcome_shard", outcome_shard(e.id.as_str()))
        .put_s("time_key", event_time_key(e.received_at, e.id.as_str()))
        .put_s("event_type", &e.event_type)
        .put_opt_s("tenant_id", e.tenant_id.as_deref())
        .put_s("summary", event_summary_attr(e)?)
        .put_n("expires_at", ttl(e.received_at, retention).max(e.expires_at.timestamp()));
    if let (Some(seq), Some(p)) = (e.partition_seq, e.partition()) {
        a.put_s("partition", event_partition_key(&p)).put_n("partition_seq", seq);
    }
    Ok(a)
}

/// Decodes an Events item (`data`, or `data_z` deflated).
pub fn event_from_attrs(a: &Attrs) -> Result<EventRecord, StoreError> {
    match a.0.get("data_z") {
        Some(Attr::B(z)) => {
            let json = miniz_oxide::inflate::decompress_to_vec_with_limit(z, MAX_INFLATED)
                .map_err(|e| StoreError::Corrupt(format!("attribute `data_z` does not inflate: {e:?}")))?;
            serde_json::from_slice(&json).map_err(|e| StoreError::Corrupt(format!("attribute `data_z`: {e}")))
        }
        Some(other) => Err(wrong_type("data_z", "B", other)),
        None => a.data(),
    }
}

/// Decodes the `NewImage` of an Events stream record (the router's input).
pub fn event_from_image(image: &serde_dynamo::Item) -> Result<EventRecord, StoreError> {
    event_from_attrs(&Attrs::from_stream(image))
}

// ----------------------------------------------------------- subscriptions

/// The GSI of SubscriptionsTable that lists subscriptions and finds them by
/// route key or tenant: partition key `gk`, sort key `gs` (a subscription
/// id), projection ALL.
pub const SUBSCRIPTION_INDEX: &str = "by_key";

/// The `gk` of every Subscriptions item proper: the API lists them all,
/// in id order, from this one index partition.
pub const SUBSCRIPTION_LIST_KEY: &str = "sub";

/// The Subscriptions item: `id`, `version`, `data`, and its listing entry
/// in GSI [`SUBSCRIPTION_INDEX`]: `gk` = [`SUBSCRIPTION_LIST_KEY`], `gs` = `id`.
pub fn subscription_to_attrs(s: &Subscription) -> Result<Attrs, StoreError> {
    let mut a = Attrs::new();
    a.put_s("id", s.id.as_str())
        .put_n("version", s.version)
        .put_s("data", encode_json(s)?)
        .put_s("gk", SUBSCRIPTION_LIST_KEY)
        .put_s("gs", s.id.as_str());
    Ok(a)
}

/// Decodes a Subscriptions item.
pub fn subscription_from_attrs(a: &Attrs) -> Result<Subscription, StoreError> {
    a.data()
}

/// One index entry of a subscription: a small item of SubscriptionsTable
/// (`id`, `gk`, `gs` = the subscription's id) that GSI
/// [`SUBSCRIPTION_INDEX`] files under `gk`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// The item's id: `<subscription id>#tenant`, or `<subscription
    /// id>#route#<n>` for the n-th of its sorted route keys (subscription ids
    /// never hold `#`, so entries never collide with them).
    pub id: String,
    /// `tenant#<tenant>`, or `route#<key>` ([`shared::routing::RouteKey::encoded`]).
    pub gk: String,
}

/// The `gk` under which the subscriptions indexed under `key` are found.
pub fn route_index_key(key: &shared::routing::RouteKey) -> String {
    format!("route#{}", key.encoded())
}

/// The `gk` under which the subscriptions of tenant `t` are listed.
pub fn tenant_index_key(t: &str) -> String {
    format!("tenant#{t}")
}

/// A subscription's index entries: its tenant entry (when tenant-scoped),
/// then one per route key ([`shared::routing::index_keys`]) in slot order.
/// An update writes only the entries whose `gk` changed, so it takes at
/// most one action per entry slot.
pub fn index_entries(s: &Subscription) -> Vec<IndexEntry> {
    let mut out: Vec<IndexEntry> =
        s.tenant_id.iter().map(|t| IndexEntry { id: format!("{}#tenant", s.id), gk: tenant_index_key(t) }).collect();
    out.extend(
        shared::routing::index_keys(s)
            .iter()
            .enumerate()
            .map(|(i, k)| IndexEntry { id: format!("{}#route#{i}", s.id), gk: route_index_key(k) }),
    );
    out
}

/// The item of one index entry of subscription `sub`.
pub fn index_entry_to_attrs(e: &IndexEntry, sub: &SubscriptionId) -> Attrs {
    let mut a = Attrs::new();
    a.put_s("id", e.id.as_str()).put_s("gk", e.gk.as_str()).put_s("gs", sub.as_str());
    a
}

/// Every item a stored subscription consists of: itself, then its index
/// entries (what one create writes, in one transaction).
pub fn subscription_items(s: &Subscription) -> Result<Vec<Attrs>, StoreError> {
    let mut items = vec![subscription_to_attrs(s)?];
    items.extend(index_entries(s).iter().map(|e| index_entry_to_attrs(e, &s.id)));
    Ok(items)
}

// ------------------------------------------------------------------- sagas

/// The Sagas item: every field is its own attribute (no `data`), so a
/// transition is one conditional `UpdateItem` of the mutable ones. Optional
/// fields are absent when `None`; `origin` is JSON text; times are RFC 3339;
/// `expires_at` is `created_at + retention` in epoch seconds.
pub fn saga_to_attrs(s: &Saga, retention: chrono::Duration) -> Result<Attrs, StoreError> {
    let mut a = Attrs::new();
    a.put_s("id", s.id.as_str())
        .put_s("event_id", s.event_id.as_str())
        .put_s("subscription_id", s.subscription_id.as_str())
        .put_s("webhook_id", s.webhook_id.as_str())
        .put_s("status", s.state.status.as_str())
        .put_n("attempts", s.state.attempts)
        .put_opt_s("next_attempt_at", s.state.next_attempt_at.map(rfc3339))
        .put_opt_s("last_error", s.state.last_error.clone())
        .put_opt_s("origin", s.origin.as_ref().map(encode_json).transpose()?)
        .put_opt_s("lane", s.lane.as_ref().map(encode_json).transpose()?)
        .put_s("created_at", rfc3339(s.created_at))
        .put_s("updated_at", rfc3339(s.updated_at))
        .put_n("expires_at", ttl(s.created_at, retention));
    if s.redrives > 0 {
        a.put_n("redrives", s.redrives);
    }
    if let Some(due) = shared::saga::due_at(&s.state, s.created_at) {
        a.put_s("due_shard", due_shard(&s.id)).put_n("due_at", due.timestamp_millis());
    }
    Ok(a)
}

/// Partitions of the Sagas index `by_due`: waiting sagas spread over this
/// many index keys, so the index takes thousands of writes a second.
pub const DUE_SHARDS: u32 = 16;

/// The `by_due` partition of a saga: a stable hash of its id.
pub fn due_shard(saga_id: &SagaId) -> String {
    let h = saga_id.as_str().bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    (h % DUE_SHARDS).to_string()
}

/// Decodes the mutable part of a Sagas item (what a transition compares).
pub fn saga_state_from_attrs(a: &Attrs) -> Result<SagaState, StoreError> {
    let status = a.s("status")?;
    Ok(SagaState {
        status: SagaStatus::parse(status)
            .ok_or_else(|| StoreError::Corrupt(format!("attribute `status` is not a saga status: {status}")))?,
        attempts: a.n("attempts")?,
        next_attempt_at: a.opt_time("next_attempt_at")?,
        last_error: a.opt_s("last_error")?.map(str::to_string),
    })
}

/// Decodes a Sagas item.
pub fn saga_from_attrs(a: &Attrs) -> Result<Saga, StoreError> {
    Ok(Saga {
        id: SagaId::new(a.s("id")?),
        event_id: EventId::new(a.s("event_id")?),
        subscription_id: SubscriptionId::new(a.s("subscription_id")?),
        webhook_id: WebhookId::new(a.s("webhook_id")?),
        state: saga_state_from_attrs(a)?,
        origin: a.opt_s("origin")?.map(|o| decode_json::<Origin>("origin", o)).transpose()?,
        lane: a.opt_s("lane")?.map(|l| decode_json::<shared::ordering::LaneRef>("lane", l)).transpose()?,
        created_at: a.time("created_at")?,
        updated_at: a.time("updated_at")?,
        redrives: a.opt_n("redrives")?.unwrap_or(0),
    })
}

/// Decodes the `NewImage` of a Sagas stream record (the saga step's input).
pub fn saga_from_image(image: &serde_dynamo::Item) -> Result<Saga, StoreError> {
    saga_from_attrs(&Attrs::from_stream(image))
}

// ---------------------------------------------------------------- attempts

/// The Attempts item: `saga_id`, `attempt`, `event_id`, `subscription_id`,
/// `expires_at` (`at + retention`, epoch s), `data`.
pub fn attempt_to_attrs(x: &Attempt, retention: chrono::Duration) -> Result<Attrs, StoreError> {
    let mut a = Attrs::new();
    a.put_s("saga_id", x.saga_id.as_str())
        .put_n("attempt", x.attempt)
        .put_s("event_id", x.event_id.as_str())
        .put_s("subscription_id", x.subscription_id.as_str())
        .put_n("expires_at", ttl(x.at, retention))
        .put_s("data", encode_json(x)?);
    Ok(a)
}

/// Decodes an Attempts item.
pub fn attempt_from_attrs(a: &Attrs) -> Result<Attempt, StoreError> {
    a.data()
}

/// Decodes the `NewImage` of an Attempts stream record (the saga step's input).
pub fn attempt_from_image(image: &serde_dynamo::Item) -> Result<Attempt, StoreError> {
    attempt_from_attrs(&Attrs::from_stream(image))
}

// ------------------------------------------------------------ dead letters

/// The DeadLetters item: `id`, `state`, `created_at` (epoch ms, the sort key
/// of every listing index), `data` (the record without its event snapshot),
/// the snapshot deflated in `event_z` (an event may be 256 KiB; the item
/// limit is 400 KB), the filter attributes the listing indexes project
/// (`subscription_id`, `event_type`, `tenant_id`) and the sharded index keys
/// ([`dead_letter_listing_keys`]). `expires_at` is set only when the dead
/// letter is resolved (see `DynamoDeadLetters::resolve`): open ones are kept.
pub fn dead_letter_to_attrs(d: &DeadLetter) -> Result<Attrs, StoreError> {
    let mut a = Attrs::new();
    let record = DeadLetter { event: None, ..d.clone() };
    a.put_s("id", d.id.as_str())
        .put_s("state", d.state.as_str())
        .put_n("created_at", d.created_at.timestamp_millis())
        .put_s("data", encode_json(&record)?);
    for (name, value) in dead_letter_listing_keys(d) {
        a.put_s(name, value);
    }
    if let Some(e) = &d.event {
        let json = encode_json(e)?;
        a.0.insert("event_z".into(), Attr::B(miniz_oxide::deflate::compress_to_vec(json.as_bytes(), 6)));
    }
    Ok(a)
}

/// Write shards of every dead-letter listing key: a dead letter's index
/// entries go to `<value>#<shard>` ([`dead_letter_shard`]), so one value
/// (`open`, every dead letter, one subscription whose endpoint is down)
/// takes [`DEAD_LETTER_SHARDS`] × 1,000 index writes a second instead of
/// 1,000, and a listing queries the shards and merges them by
/// `created_at` (`infra/README.md`, "Dead letter listing indexes").
pub const DEAD_LETTER_SHARDS: u32 = 8;

/// A dead letter's write shard: a stable hash of its id (the same for all
/// its index keys and its open-count shard, [`dead_letter_count_key`]).
pub fn dead_letter_shard(id: &str) -> u32 {
    id.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b))) % DEAD_LETTER_SHARDS
}

/// The partition value of shard `shard` of listing value `value`.
pub fn dead_letter_shard_key(value: &str, shard: u32) -> String {
    format!("{value}#{shard}")
}

/// One listing index of DeadLettersTable: its name, its sharded partition
/// key attribute, and the plain attribute that value comes from (the one
/// a `FilterExpression` reads on the other indexes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadLetterIndex {
    /// The GSI's name.
    pub name: &'static str,
    /// Its partition key attribute (`<value>#<shard>`).
    pub key: &'static str,
    /// The attribute holding the plain value.
    pub plain: &'static str,
}

/// Index of the dead letters in one state.
pub const DEAD_LETTERS_BY_STATE: DeadLetterIndex =
    DeadLetterIndex { name: "state_shards", key: "state_shard", plain: "state" };
/// Index of one subscription's dead letters.
pub const DEAD_LETTERS_BY_SUBSCRIPTION: DeadLetterIndex =
    DeadLetterIndex { name: "subscription_shards", key: "subscription_shard", plain: "subscription_id" };
/// Index of one tenant's dead letters.
pub const DEAD_LETTERS_BY_TENANT: DeadLetterIndex =
    DeadLetterIndex { name: "tenant_shards", key: "tenant_shard", plain: "tenant_id" };
/// Index of one event type's dead letters.
pub const DEAD_LETTERS_BY_TYPE: DeadLetterIndex =
    DeadLetterIndex { name: "type_shards", key: "type_shard", plain: "event_type" };
/// Index of every dead letter ([`DEAD_LETTER_LISTING_ALL`]): the listing
/// with no other filter.
pub const DEAD_LETTERS_BY_CREATED: DeadLetterIndex =
    DeadLetterIndex { name: "created_shards", key: DEAD_LETTER_LISTING, plain: DEAD_LETTER_LISTING };

/// The keys of a dead letter's listing indexes (`infra/README.md`), as
/// (attribute, value): the every-dead-letter key ([`DEAD_LETTER_LISTING`])
/// first (every dead letter written since the sharded indexes has it, so
/// its absence marks an item to reindex), then the plain filter attributes
/// and the sharded keys of state, subscription, event type and tenant. A
/// GSI key cannot be an empty string, so an empty one is left out (and the
/// dead letter out of that index).
pub fn dead_letter_listing_keys(d: &DeadLetter) -> Vec<(&'static str, String)> {
    let shard = dead_letter_shard(d.id.as_str());
    let mut keys = vec![(DEAD_LETTER_LISTING, dead_letter_shard_key(DEAD_LETTER_LISTING_ALL, shard))];
    keys.push((DEAD_LETTERS_BY_STATE.key, dead_letter_shard_key(d.state.as_str(), shard)));
    let optional = [
        (DEAD_LETTERS_BY_SUBSCRIPTION, Some(d.subscription_id.as_str())),
        (DEAD_LETTERS_BY_TYPE, Some(d.event_type.as_str())),
        (DEAD_LETTERS_BY_TENANT, d.tenant_id.as_deref()),
    ];
    for (ix, v) in optional {
        let Some(v) = v.filter(|v| !v.is_empty()) else { continue };
        keys.push((ix.plain, v.to_string()));
        keys.push((ix.key, dead_letter_shard_key(v, shard)));
    }
    keys
}

/// The attribute every dead letter holds (`all#<shard>`): the partition
/// key of index `created_shards`, which lists them all newest first when
/// no other filter narrows them. (Items of the unsharded layout had
/// `listing` = `all`; they are reindexed.)
pub const DEAD_LETTER_LISTING: &str = "all_shard";
/// Its value before the shard suffix.
pub const DEAD_LETTER_LISTING_ALL: &str = "all";

/// The id of shard `shard` of the open-dead-letter counter: a small item
/// of DeadLettersTable (`id`, `n`), raised by one in the transaction that
/// creates an open dead letter of that shard and lowered by one in the
/// one that resolves it, so [`shared::ports::DeadLetterStore::count`] of
/// open ones reads [`OPEN_COUNT_SHARDS`] items whatever their number.
/// Dead-letter ids never start with `#`, so it never names one.
pub fn dead_letter_count_key(shard: u32) -> String {
    format!("#open-count#{shard}")
}

/// Shards of the open-dead-letter counter: more than the listing's
/// [`DEAD_LETTER_SHARDS`], because each counter item is written inside a
/// transaction, and DynamoDB cancels a transaction that finds another one
/// in progress on the same item (TransactionConflict) rather than queueing
/// it. A mass dead-lettering at 1,000 a second puts about 16 transactions
/// a second on each of 64 items, not 125 on each of 8; the count still
/// reads a fixed 64 small items.
pub const OPEN_COUNT_SHARDS: u32 = 64;

/// The counter shard of dead letter `id` (a stable hash, like
/// [`dead_letter_shard`], over [`OPEN_COUNT_SHARDS`]).
pub fn open_count_shard(id: &str) -> u32 {
    id.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b))) % OPEN_COUNT_SHARDS
}

/// A Jobs item: `id`, `version`, the job as JSON in `data`, `expires_at`.
pub fn job_to_attrs(j: &shared::bulk::Job, expires_at: i64) -> Result<Attrs, StoreError> {
    let mut a = Attrs::new();
    a.put_s("id", j.id.as_str())
        .put_n("version", j.version)
        .put_s("data", encode_json(j)?)
        .put_n("expires_at", expires_at);
    Ok(a)
}

/// Decodes a Jobs item.
pub fn job_from_attrs(a: &Attrs) -> Result<shared::bulk::Job, StoreError> {
    a.data()
}

/// Decodes a DeadLetters item.
pub fn dead_letter_from_attrs(a: &Attrs) -> Result<DeadLetter, StoreError> {
    let mut d: DeadLetter = a.data()?;
    d.event = match a.0.get("event_z") {
        Some(Attr::B(z)) => {
            let json = miniz_oxide::inflate::decompress_to_vec_with_limit(z, MAX_INFLATED)
                .map_err(|e| StoreError::Corrupt(format!("attribute `event_z` does not inflate: {e:?}")))?;
            Some(serde_json::from_slice(&json).map_err(|e| StoreError::Corrupt(format!("attribute `event_z`: {e}")))?)
        }
        Some(other) => return Err(wrong_type("event_z", "B", other)),
        None => None,
    };
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saga() -> Saga {
        let now = Utc::now();
        let mut s = Saga::new(SagaId::new("sg_1"), &EventId::new("evt_1"), &SubscriptionId::new("sub_1"), None, now);
        s.state.next_attempt_at = Some(now + chrono::Duration::milliseconds(1234));
        s.state.last_error = Some("HTTP 500".into());
        s.origin = Some(Origin {
            kind: shared::saga::OriginKind::Requeue,
            previous_saga_id: Some(SagaId::new("sg_0")),
            actor: "ops".into(),
            reason: "fixed".into(),
            at: now,
        });
        s
    }

    #[test]
    fn a_subscription_is_its_item_and_one_entry_per_tenant_and_pattern() {
        let mut s = shared::testkit::subscription();
        s.tenant_id = Some("acme".into());
        s.event_types = vec!["task.*".into(), "*".into(), "task.*".into()];
        let items = subscription_items(&s).unwrap();
        assert_eq!(subscription_from_attrs(&items[0]).unwrap(), s);
        assert_eq!(items[0].s("gk").unwrap(), SUBSCRIPTION_LIST_KEY);
        let entries: Vec<(&str, &str, &str)> =
            items[1..].iter().map(|a| (a.s("id").unwrap(), a.s("gk").unwrap(), a.s("gs").unwrap())).collect();
        let id = s.id.as_str();
        assert_eq!(
            entries,
            vec![
                (format!("{id}#tenant").as_str(), "tenant#acme", id),
                (format!("{id}#route#0").as_str(), "route#t4:acme#*", id),
                (format!("{id}#route#1").as_str(), "route#t4:acme#task.*", id),
            ]
        );
        assert!(items.len() <= shared::limits::MAX_SUBSCRIPTION_PATTERNS + 2);
    }

    #[test]
    fn saga_round_trips_through_sdk_items() {
        let s = saga();
        let sdk = saga_to_attrs(&s, chrono::Duration::days(30)).unwrap().into_sdk();
        assert!(!sdk.contains_key("data"));
        assert_eq!(sdk["status"], AttributeValue::S("Pending".into()));
        assert_eq!(saga_from_attrs(&Attrs::from_sdk(&sdk)).unwrap(), s);
    }

    #[test]
    fn optional_saga_fields_are_absent_when_none() {
        let s = Saga::new(SagaId::new("sg_1"), &EventId::new("evt_1"), &SubscriptionId::new("sub_1"), None, Utc::now());
        let a = saga_to_attrs(&s, chrono::Duration::days(1)).unwrap();
        for k in ["next_attempt_at", "last_error", "origin"] {
            assert!(!a.0.contains_key(k), "{k}");
        }
        assert_eq!(saga_from_attrs(&a).unwrap(), s);
    }

    #[test]
    fn stream_images_decode_like_sdk_items() {
        let s = saga();
        let a = saga_to_attrs(&s, chrono::Duration::days(30)).unwrap();
        // DynamoDB JSON as a stream record carries it (what serde_dynamo::Item serializes to).
        let image: serde_json::Map<String, serde_json::Value> =
            a.0.iter()
                .map(|(k, v)| {
                    let v = match v {
                        Attr::S(s) => serde_json::json!({ "S": s }),
                        Attr::N(n) => serde_json::json!({ "N": n }),
                        other => panic!("sagas use S and N only, got {other:?}"),
                    };
                    (k.clone(), v)
                })
                .collect();
        assert_eq!(saga_from_attrs(&Attrs::from_json(&image).unwrap()).unwrap(), s);
        let item: serde_dynamo::Item = serde_json::from_value(serde_json::Value::Object(image)).unwrap();
        assert_eq!(saga_from_image(&item).unwrap(), s);
        let bad = serde_json::json!({ "id": { "S": "x", "N": "1" } });
        assert!(matches!(Attrs::from_json(&bad), Err(StoreError::Corrupt(_))));
    }

    #[test]
    fn wrong_types_are_corrupt_not_panics() {
        let mut a = Attrs::new();
        a.put_s("attempts", "three");
        assert!(matches!(a.n::<u32>("attempts"), Err(StoreError::Corrupt(_))));
        a.put_n("data", 1);
        assert!(matches!(a.data::<serde_json::Value>(), Err(StoreError::Corrupt(_))));
    }

    #[test]
    fn ttl_saturates() {
        assert!(ttl(Utc::now(), chrono::Duration::MAX) > 0);
    }

    #[test]
    fn large_events_are_stored_deflated_and_read_back_from_every_form() {
        let body = serde_json::to_vec(&serde_json::json!({
            "type": "order.created",
            "data": {"items": (0..20).map(|i| serde_json::json!({"sku": format!("SKU-{i:04}"), "qty": i, "name": "Blue widget, large"})).collect::<Vec<_>>()}
        }))
        .unwrap();
        let n = shared::envelope::normalize(&body, None).unwrap();
        let e = EventRecord::from_normalized(n, Utc::now(), chrono::Duration::days(30));
        let a = event_to_attrs(&e, chrono::Duration::days(30)).unwrap();
        let Some(Attr::B(z)) = a.0.get("data_z") else { panic!("a {} byte record is deflated", body.len()) };
        assert!(z.len() < body.len() / 2, "{} → {}", body.len(), z.len());
        assert!(!a.0.contains_key("data"));
        assert_eq!(event_from_attrs(&a).unwrap(), e);
        assert_eq!(event_from_attrs(&Attrs::from_sdk(&a.clone().into_sdk())).unwrap(), e);
        use base64::Engine;
        let image = serde_json::json!({
            "id": {"S": e.id}, "event_type": {"S": e.event_type}, "expires_at": {"N": "1"},
            "data_z": {"B": base64::engine::general_purpose::STANDARD.encode(z)},
        });
        let item: serde_dynamo::Item = serde_json::from_value(image.clone()).unwrap();
        assert_eq!(event_from_image(&item).unwrap(), e);
        assert_eq!(event_from_attrs(&Attrs::from_json(&image).unwrap()).unwrap(), e);
        // Small events stay readable JSON.
        let small = EventRecord { body: b"{}".to_vec(), ..e };
        let a = event_to_attrs(&small, chrono::Duration::days(30)).unwrap();
        assert!(matches!(a.0.get("data"), Some(Attr::S(_))));
    }
}
