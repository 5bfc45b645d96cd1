//! Items of EventsTable and EventOutcomesTable: events (deflated when large),
//! their search attributes and sharded index keys.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{encode_json, ttl, wrong_type, Attr, Attrs};
use shared::error::StoreError;
use shared::event::EventRecord;
use shared::ids::EventId;

/// Records larger than this are stored deflated in `data_z`.
pub const COMPRESS_ABOVE: usize = 640;

/// Largest record `data_z` may inflate to (DynamoDB's item limit is 400 KB).
pub(super) const MAX_INFLATED: usize = 4 * 1024 * 1024;

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
    let json = stored_json(e)?;
    let deflated = (json.len() > COMPRESS_ABOVE).then(|| miniz_oxide::deflate::compress_to_vec(json.as_bytes(), 6));
    match deflated {
        Some(z) if z.len() < json.len() => a.0.insert("data_z".into(), Attr::B(z)),
        _ => a.0.insert("data".into(), Attr::S(json)),
    };
    Ok(a)
}

/// The record as `data` or `data_z` holds it: without `id` (the item's key)
/// and without absent fields, and with its body as the JSON text it is
/// (`body_json`, exactly as posted) rather than escaped into a string
/// (`body`, for a body that is not JSON or has whitespace around it). A
/// 1 KiB order event deflates about 100 bytes smaller so, which keeps its
/// item under 1 KB: one write unit, not two. [`event_from_attrs`] reads it,
/// and the form stored before (every field, the body as text).
fn stored_json(e: &EventRecord) -> Result<String, StoreError> {
    let corrupt = |err: serde_json::Error| StoreError::Corrupt(format!("record does not serialize: {err}"));
    let mut v = serde_json::to_value(e).map_err(corrupt)?;
    let map = v.as_object_mut().ok_or_else(|| StoreError::Corrupt("record is not an object".into()))?;
    map.remove("id");
    map.retain(|_, x| !x.is_null());
    let json_body = std::str::from_utf8(&e.body).ok().filter(|b| {
        serde_json::from_str::<&serde_json::value::RawValue>(b).is_ok_and(|raw| raw.get().len() == b.len())
    });
    let Some(body) = json_body else { return serde_json::to_string(&v).map_err(corrupt) };
    map.remove("body");
    let mut out = serde_json::to_string(&v).map_err(corrupt)?;
    out.pop();
    if out.len() > 1 {
        out.push(',');
    }
    out.push_str("\"body_json\":");
    out.push_str(body);
    out.push('}');
    Ok(out)
}

/// Reads a record stored by [`stored_json`] (the id from the item's key),
/// or in the form before it (with `id`, the body as text).
fn record_from_json(json: &[u8], id: &str) -> Result<EventRecord, StoreError> {
    use serde_json::value::RawValue;
    let corrupt = |err: serde_json::Error| StoreError::Corrupt(format!("stored event record: {err}"));
    let mut fields: std::collections::BTreeMap<String, Box<RawValue>> =
        serde_json::from_slice(json).map_err(corrupt)?;
    if let Some(body) = fields.remove("body_json") {
        let text = serde_json::to_string(body.get()).map_err(corrupt)?;
        fields.insert("body".into(), RawValue::from_string(text).map_err(corrupt)?);
    }
    if !fields.contains_key("id") {
        let id = serde_json::to_string(id).map_err(corrupt)?;
        fields.insert("id".into(), RawValue::from_string(id).map_err(corrupt)?);
    }
    let whole = serde_json::to_string(&fields).map_err(corrupt)?;
    serde_json::from_str(&whole).map_err(corrupt)
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
        .put_opt_s(
            "tenant_shard",
            e.tenant_id.as_ref().map(|t| t.as_str()).map(|t| event_tenant_key(t, event_shard(e.id.as_str()))),
        )
        .put_s("summary", event_summary_attr(e)?);
    if let (Some(seq), Some(p)) = (e.partition_seq, e.partition()) {
        a.put_s("partition", event_partition_key(&p)).put_n("partition_seq", seq);
    }
    Ok(())
}

/// Takes an event item out of the listings by time and by tenant
/// ([`EVENTS_BY_TIME`], [`EVENTS_BY_TENANT`]): without their partition keys
/// it has no entry in either (a sparse index), which saves their two write
/// units (`EVENT_LISTING` off). `time_key` stays: [`EVENTS_BY_PARTITION`]
/// projects it.
pub fn drop_listing_keys(a: &mut Attrs) {
    a.0.remove("time_bucket");
    a.0.remove("tenant_shard");
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
    tenant_id: Option<shared::ids::TenantId>,
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
        .put_opt_s("tenant_id", e.tenant_id.as_ref().map(|t| t.as_str()))
        .put_s("summary", event_summary_attr(e)?)
        .put_n("expires_at", ttl(e.received_at, retention).max(e.expires_at.timestamp()));
    if let (Some(seq), Some(p)) = (e.partition_seq, e.partition()) {
        a.put_s("partition", event_partition_key(&p)).put_n("partition_seq", seq);
    }
    Ok(a)
}

/// Decodes an Events item (`data`, or `data_z` deflated; either form of
/// [`stored_json`]).
pub fn event_from_attrs(a: &Attrs) -> Result<EventRecord, StoreError> {
    let id = a.s("id")?;
    match a.0.get("data_z") {
        Some(Attr::B(z)) => {
            let json = miniz_oxide::inflate::decompress_to_vec_with_limit(z, MAX_INFLATED)
                .map_err(|e| StoreError::Corrupt(format!("attribute `data_z` does not inflate: {e:?}")))?;
            record_from_json(&json, id)
        }
        Some(other) => Err(wrong_type("data_z", "B", other)),
        None => record_from_json(a.s("data")?.as_bytes(), id),
    }
}

/// Decodes the `NewImage` of an Events stream record (the router's input).
pub fn event_from_image(image: &serde_dynamo::Item) -> Result<EventRecord, StoreError> {
    event_from_attrs(&Attrs::from_stream(image))
}
