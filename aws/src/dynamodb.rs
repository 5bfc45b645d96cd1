//! DynamoDB implementations of the store ports, with the semantics of the
//! SQLite ones: every idempotent write is a conditional `PutItem` (`true`
//! where inserted), a saga transition is one conditional `UpdateItem` that
//! reports the current state on conflict without a second read, and every
//! read of one item is strongly consistent. Batches are issued as concurrent
//! conditional requests: `BatchWriteItem` takes no conditions.
//!
//! Item layouts are in [`super::item`] and `infra/README.md`.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem};
use aws_sdk_dynamodb::Client;

use super::item::{self, Attrs};
use chrono::{DateTime, Utc};
use shared::attempt::Attempt;
use shared::bulk::Job;
use shared::dead_letter::{DeadLetter, DeadLetterQuery, DeadLetterState, Position, Resolution};
use shared::error::StoreError;
use shared::event::EventRecord;
use shared::event_search::{EventQuery, EventSummary, Order, Outcome, TypeFilter};
use shared::ids::{DeadLetterId, EventId, SagaId, SubscriptionId};
use shared::limits::{all_bounded, MAX_STORE_IN_FLIGHT};
use shared::ports::{
    AttemptStore, DeadLetterStore, EventStore, JobStore, Page, ReindexPage, SagaStore, StoreResult, SubscriptionFilter,
    SubscriptionPage, SubscriptionStore, Transition, TransitionOutcome, MAX_REINDEX_PAGE,
};
use shared::routing::RouteKey;
use shared::saga::{Saga, SagaState, SagaStatus};
use shared::subscription::Subscription;

/// A `StoreError` for a failed DynamoDB call, with the service's message.
pub(super) fn backend<E, R>(op: &str, table: &str, e: SdkError<E, R>) -> StoreError
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    StoreError::Backend(format!("dynamodb {op} on {table}: {}", DisplayErrorContext(&e)))
}

/// The outcome of a conditional write: `true` if written, `false` if its
/// condition failed (not an error: the idempotent writes expect it).
pub(super) fn written<O, E, R>(op: &str, table: &str, res: Result<O, SdkError<E, R>>) -> StoreResult<bool>
where
    E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + 'static,
    R: std::fmt::Debug,
{
    match res {
        Ok(_) => Ok(true),
        Err(e) if e.as_service_error().and_then(|s| s.code()) == Some("ConditionalCheckFailedException") => Ok(false),
        Err(e) => Err(backend(op, table, e)),
    }
}

pub(super) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(super) fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// `PutItem` unless an item with the same key exists (`key` names the
/// partition key attribute); `true` if written.
async fn put_if_absent(client: &Client, table: &str, key: &str, item: Attrs) -> StoreResult<bool> {
    let res = client
        .put_item()
        .table_name(table)
        .set_item(Some(item.into_sdk()))
        .condition_expression("attribute_not_exists(#k)")
        .expression_attribute_names("#k", key)
        .send()
        .await;
    written("PutItem", table, res)
}

/// [`put_if_absent`] for each item, concurrently up to the store cap
/// (`BatchWriteItem` takes no conditions); `true` where written, in input order.
async fn put_all_if_absent<T: Sync>(
    client: &Client,
    table: &str,
    key: &str,
    items: &[T],
    to_attrs: impl Fn(&T) -> StoreResult<Attrs> + Sync,
) -> StoreResult<Vec<bool>> {
    let to_attrs = &to_attrs;
    let calls = items.iter().map(|x| async move { put_if_absent(client, table, key, to_attrs(x)?).await });
    all(all_bounded(calls.collect(), MAX_STORE_IN_FLIGHT).await)
}

/// Strongly consistent `GetItem` by partition key `id`.
async fn get_by_id(client: &Client, table: &str, id: &str) -> StoreResult<Option<Attrs>> {
    get_item(client, table, HashMap::from([("id".to_string(), s(id))]), true).await
}

/// `GetItem` by full key, strongly consistent or not.
async fn get_item(
    client: &Client,
    table: &str,
    key: HashMap<String, AttributeValue>,
    consistent: bool,
) -> StoreResult<Option<Attrs>> {
    let out = client
        .get_item()
        .table_name(table)
        .set_key(Some(key))
        .consistent_read(consistent)
        .send()
        .await
        .map_err(|e| backend("GetItem", table, e))?;
    Ok(out.item().map(Attrs::from_sdk))
}

/// Every item of a `Query` (all pages), in the order DynamoDB returns them.
async fn query_all(
    client: &Client,
    table: &str,
    index: Option<&str>,
    key_condition: &str,
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
    consistent: bool,
) -> StoreResult<Vec<Attrs>> {
    let mut out = Vec::new();
    let mut start: Option<HashMap<String, AttributeValue>> = None;
    loop {
        let page = client
            .query()
            .table_name(table)
            .set_index_name(index.map(str::to_string))
            .key_condition_expression(key_condition)
            // DynamoDB rejects an empty map ("ExpressionAttributeNames must
            // not be empty"), and the SDK sends one when given one.
            .set_expression_attribute_names((!names.is_empty()).then(|| names.clone()))
            .set_expression_attribute_values((!values.is_empty()).then(|| values.clone()))
            .set_consistent_read(consistent.then_some(true))
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(|e| backend("Query", table, e))?;
        out.extend(page.items().iter().map(Attrs::from_sdk));
        match page.last_evaluated_key() {
            Some(k) if !k.is_empty() => start = Some(k.clone()),
            _ => return Ok(out),
        }
    }
}

/// Collects per-item results in input order, failing if any call failed.
fn all<T>(results: Vec<StoreResult<T>>) -> StoreResult<Vec<T>> {
    results.into_iter().collect()
}

// ------------------------------------------------------------------ events

/// EventsTable: append-only, one conditional `PutItem` per event, never
/// written again; an event with a partition key is numbered in a
/// transaction with its partition's item of the OrderTable
/// ([`super::ordering::DynamoOrder::insert_numbered`]). Delivery outcomes
/// are small items of EventOutcomesTable (`outcomes`), one per event that
/// failed.
#[derive(Clone)]
pub struct DynamoEvents {
    client: Client,
    table: String,
    outcomes: String,
    retention: chrono::Duration,
    order: super::ordering::DynamoOrder,
}

impl DynamoEvents {
    /// The adapter over events `table` and their outcomes in `outcomes`,
    /// numbering partitions in `order`; items expire `retention` after
    /// receipt.
    pub fn new(
        client: Client,
        table: impl Into<String>,
        outcomes: impl Into<String>,
        retention: chrono::Duration,
        order: super::ordering::DynamoOrder,
    ) -> Self {
        DynamoEvents { client, table: table.into(), outcomes: outcomes.into(), retention, order }
    }
}

/// Keys per `BatchGetItem` (DynamoDB's limit).
const BATCH_GET_KEYS: usize = 100;

/// How often a `BatchGetItem`'s unprocessed keys are asked for again
/// (with a doubling pause from 20 ms) before the read fails.
const BATCH_GET_RETRIES: u32 = 8;

#[async_trait]
impl EventStore for DynamoEvents {
    /// Events without a partition key concurrently; those with one in the
    /// order given (a batch's order is its acceptance order).
    async fn insert(&self, events: &[EventRecord]) -> StoreResult<Vec<bool>> {
        let to_attrs = |e: &EventRecord| item::event_to_attrs(e, self.retention);
        let (numbered, plain): (Vec<usize>, Vec<usize>) =
            (0..events.len()).partition(|i| events[*i].partition_key.is_some());
        let plain_events: Vec<&EventRecord> = plain.iter().map(|i| &events[*i]).collect();
        let plain_done = put_all_if_absent(&self.client, &self.table, "id", &plain_events, |e| to_attrs(e)).await?;
        let mut out = vec![false; events.len()];
        for (i, ok) in plain.into_iter().zip(plain_done) {
            out[i] = ok;
        }
        for i in numbered {
            out[i] = self.order.insert_numbered(&self.table, &events[i], to_attrs).await?;
        }
        Ok(out)
    }

    /// An eventually consistent read first (half the read units: events
    /// are immutable and read long after their write, by the delivery of
    /// every job), and a strongly consistent one only when that finds
    /// nothing, so a just-written event is never reported missing.
    async fn get(&self, id: &EventId) -> StoreResult<Option<EventRecord>> {
        let key = || HashMap::from([("id".to_string(), s(id.as_str()))]);
        let found = match get_item(&self.client, &self.table, key(), false).await? {
            Some(a) => Some(a),
            None => get_item(&self.client, &self.table, key(), true).await?,
        };
        found.map(|a| item::event_from_attrs(&a)).transpose()
    }

    /// One index partition at a time: a partition key reads
    /// [`item::EVENTS_BY_PARTITION`], a tenant [`item::EVENTS_BY_TENANT`],
    /// anything else the day buckets of [`item::EVENTS_BY_TIME`] (every
    /// shard of a day queried at once and merged), from the listing's end
    /// of its time range (an open end: now, or the retention); an outcome
    /// filter reads EventOutcomesTable's indexes instead (failed events are
    /// few). The other filters are a `FilterExpression` on projected
    /// attributes. At most [`MAX_SEARCH_QUERIES`] queries per call: a page
    /// may come back short, with a position to go on from.
    ///
    /// A page reads no event: the indexes project each event's `summary`
    /// (about 150 bytes), so a page of 1,000 is about 40 read units
    /// whatever the bodies' size (it was one `GetItem` per event, half a
    /// unit per 4 KB of it: up to 32,000 for 256 KB bodies). Only an event
    /// stored before `summary` existed is read by id. The page's outcomes
    /// are one `BatchGetItem` per 100 events (half a unit per key), unless
    /// the page came from the outcome indexes, which carry them.
    async fn search(&self, query: &EventQuery, limit: usize, after: Option<&str>) -> StoreResult<Page<EventSummary>> {
        let bad = || StoreError::Corrupt(format!("not a position of this listing: {after:?}"));
        let hits = if let Some(p) = query.partition() {
            let after = after.map(|a| a.parse::<u64>().map_err(|_| bad())).transpose()?;
            self.search_partition(query, &item::event_partition_key(&p), limit, after).await?
        } else {
            self.search_by_time(query, limit, after).await?
        };
        // Events stored before `summary` existed: read by id (eventually
        // consistent, half a read unit per 4 KB).
        let old = hits.items.iter().filter(|h| h.summary.is_none()).map(|h| self.get(&h.id));
        let mut old = all(all_bounded(old.collect(), MAX_STORE_IN_FLIGHT).await)?.into_iter();
        let outcomes = match query.outcome {
            // The outcome indexes' entries carry it.
            Some(_) => HashMap::new(),
            None => self.outcomes_of(hits.items.iter().map(|h| &h.id)).await?,
        };
        let items = hits
            .items
            .into_iter()
            .filter_map(|h| {
                let outcome = h.outcome.or_else(|| outcomes.get(h.id.as_str()).copied());
                match h.summary {
                    Some(s) => Some(EventSummary { outcome, ..s }),
                    // Gone since the query (its retention ended): not listed.
                    None => old.next().flatten().map(|e| EventSummary::of(&e, outcome)),
                }
            })
            .collect();
        Ok(Page { items, next: hits.next })
    }

    /// Reads the event (for its time key, type and summary: the outcome
    /// item carries them for the outcome listings), then one conditional
    /// `UpdateItem` of its item of EventOutcomesTable (about 300 bytes: one
    /// write unit, plus one per outcome index it is in), `attribute_not_exists
    /// (outcome) OR outcome < :l`. The event itself is never written.
    async fn mark_outcome(&self, id: &EventId, outcome: Outcome) -> StoreResult<bool> {
        let Some(event) = self.get(id).await? else { return Ok(false) };
        let mut attrs: Vec<_> = item::event_outcome_attrs(&event, self.retention)?.into_sdk().into_iter().collect();
        attrs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut sets = vec!["#oc = :l".to_string()];
        let mut req = self
            .client
            .update_item()
            .table_name(&self.outcomes)
            .key("event_id", s(id.as_str()))
            .condition_expression("attribute_not_exists(#oc) OR #oc < :l")
            .expression_attribute_names("#oc", "outcome")
            .expression_attribute_values(":l", n(outcome.level()));
        for (i, (name, value)) in attrs.into_iter().enumerate() {
            sets.push(format!("#a{i} = :a{i}"));
            req = req
                .expression_attribute_names(format!("#a{i}"), name)
                .expression_attribute_values(format!(":a{i}"), value);
        }
        let res = req.update_expression(format!("SET {}", sets.join(", "))).send().await;
        written("UpdateItem", &self.outcomes, res)
    }
}

/// What an index query found of an event.
type Hit = item::EventHit;

impl DynamoEvents {
    /// The outcomes of events `ids` (those without one are absent): one
    /// eventually consistent `BatchGetItem` of EventOutcomesTable per 100
    /// ids (half a read unit per id), their unprocessed keys asked again.
    async fn outcomes_of(&self, ids: impl Iterator<Item = &EventId>) -> StoreResult<HashMap<String, Outcome>> {
        let mut unique: Vec<&str> = ids.map(EventId::as_str).collect();
        unique.sort_unstable();
        unique.dedup();
        let chunks: Vec<Vec<&str>> = unique.chunks(BATCH_GET_KEYS).map(<[&str]>::to_vec).collect();
        let calls = chunks.into_iter().map(|chunk| self.outcomes_chunk(chunk));
        let found = all(all_bounded(calls.collect(), MAX_STORE_IN_FLIGHT).await)?;
        Ok(found.into_iter().flatten().collect())
    }

    /// One `BatchGetItem` of up to 100 ids, until no key is left unprocessed.
    async fn outcomes_chunk(&self, ids: Vec<&str>) -> StoreResult<Vec<(String, Outcome)>> {
        use aws_sdk_dynamodb::types::KeysAndAttributes;
        let mut keys: Vec<HashMap<String, AttributeValue>> =
            ids.iter().map(|id| HashMap::from([("event_id".to_string(), s(*id))])).collect();
        let mut out = Vec::new();
        let mut pause = std::time::Duration::from_millis(20);
        let mut tries = 0;
        loop {
            if keys.is_empty() {
                return Ok(out);
            }
            if tries > BATCH_GET_RETRIES {
                return Err(StoreError::Backend(format!(
                    "dynamodb BatchGetItem on {}: {} keys still unprocessed",
                    self.outcomes,
                    keys.len()
                )));
            }
            if tries > 0 {
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            let ka = KeysAndAttributes::builder()
                .set_keys(Some(std::mem::take(&mut keys)))
                .projection_expression("#e, #oc")
                .expression_attribute_names("#e", "event_id")
                .expression_attribute_names("#oc", "outcome")
                .consistent_read(false)
                .build()
                .map_err(|e| StoreError::Backend(format!("dynamodb BatchGetItem on {}: {e}", self.outcomes)))?;
            let res = self
                .client
                .batch_get_item()
                .request_items(&self.outcomes, ka)
                .send()
                .await
                .map_err(|e| backend("BatchGetItem", &self.outcomes, e))?;
            for it in res.responses().and_then(|r| r.get(&self.outcomes)).into_iter().flatten() {
                let a = Attrs::from_sdk(it);
                if let Some(o) = a.opt_n::<u64>("outcome")?.and_then(Outcome::from_level) {
                    out.push((a.s("event_id")?.to_string(), o));
                }
            }
            if let Some(left) = res.unprocessed_keys().and_then(|u| u.get(&self.outcomes)) {
                keys = left.keys().to_vec();
            }
            tries += 1;
        }
    }
}

/// Which sharded events index a search without a partition key reads.
#[derive(Debug, Clone, Copy)]
enum Sharded<'a> {
    /// Every event, by day ([`item::EVENTS_BY_TIME`]).
    Days,
    /// One tenant's ([`item::EVENTS_BY_TENANT`]).
    Tenant(&'a str),
    /// The failed ones ([`item::EVENTS_BY_OUTCOME`] of EventOutcomesTable),
    /// or one tenant's failed ones (a filter on `tenant_id`).
    Outcome(Option<&'a str>),
}

impl DynamoEvents {
    /// A search without a partition key: one tenant's index, or every
    /// event's day buckets.
    async fn search_by_time(&self, query: &EventQuery, limit: usize, after: Option<&str>) -> StoreResult<Page<Hit>> {
        let lo = query.received.since.unwrap_or_else(|| Utc::now() - self.retention).timestamp_millis();
        // An open end reaches a minute past now (clocks of other workers).
        let hi = query
            .received
            .until
            .map_or_else(|| (Utc::now() + chrono::Duration::minutes(1)).timestamp_millis(), |u| u.timestamp_millis());
        let range = TimeKeys { lo: item::event_time_bound(lo), hi: item::event_time_bound(hi) };
        // `hi` is exclusive: every key of an event at `hi` sorts after the bound.
        let pos = after.map(str::to_string);
        // Events that failed are few: the outcome index, whole range at
        // once (a tenant's: filtered). A tenant's events: its shards of the
        // tenant index, whole range at once. The others: day by day.
        let mode = match (&query.tenant_id, query.outcome) {
            (t, Some(_)) => Sharded::Outcome(t.as_deref()),
            (Some(t), None) => Sharded::Tenant(t),
            (None, None) => Sharded::Days,
        };
        self.search_time(query, range, limit, pos, mode).await
    }
}

/// How many index entries one `Query` evaluates when a page needs `need`:
/// that many without a filter; with a type or outcome filter at least
/// [`FILTERED_READ`], because DynamoDB applies `Limit` before the filter and
/// a rare type would otherwise take a request per few entries.
fn read_ahead(query: &EventQuery, need: usize) -> usize {
    if query.event_type.is_some() || query.outcome.is_some() {
        need.max(FILTERED_READ)
    } else {
        need
    }
}

/// The fewest entries a filtered `Query` evaluates (entries are about
/// 150 bytes: 500 are about 10 read units, eventually consistent).
const FILTERED_READ: usize = 500;

/// The most `Query` requests one [`EventStore::search`] call makes on
/// DynamoDB (a day of [`item::EVENTS_BY_TIME`] takes one per shard).
pub const MAX_SEARCH_QUERIES: usize = 4 * item::EVENT_SHARDS as usize;

/// A listing's `time_key` range: from `lo` (inclusive) to `hi` (exclusive),
/// both [`item::event_time_bound`]s or keys.
#[derive(Debug, Clone)]
struct TimeKeys {
    lo: String,
    hi: String,
}

/// One query's result: the matches it read, and the key of the last item
/// it evaluated when its partition holds more.
struct Read {
    items: Vec<(String, Hit)>,
    more: Option<String>,
}

impl DynamoEvents {
    /// The `FilterExpression` of the type and outcome filters (and the time
    /// range, on the partition index; the tenant, on the outcome index),
    /// with its names and values.
    fn filters(
        query: &EventQuery,
        time: bool,
        tenant: Option<&str>,
        names: &mut HashMap<String, String>,
        values: &mut HashMap<String, AttributeValue>,
    ) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(t) = tenant {
            parts.push("#tn = :tn".to_string());
            names.insert("#tn".into(), "tenant_id".into());
            values.insert(":tn".into(), s(t));
        }
        match &query.event_type {
            Some(TypeFilter::Exact(t)) => {
                parts.push("#et = :et".to_string());
                values.insert(":et".into(), s(t.as_str()));
            }
            Some(TypeFilter::Prefix(p)) => {
                parts.push("begins_with(#et, :et)".to_string());
                values.insert(":et".into(), s(p.as_str()));
            }
            None => {}
        }
        if query.event_type.is_some() {
            names.insert("#et".into(), "event_type".into());
        }
        if let Some(o) = query.outcome {
            parts.push("#oc >= :oc".to_string());
            names.insert("#oc".into(), "outcome".into());
            values.insert(":oc".into(), n(o.level()));
        }
        if time {
            if let Some(since) = query.received.since {
                parts.push("#tk >= :since".to_string());
                values.insert(":since".into(), s(item::event_time_bound(since.timestamp_millis())));
            }
            if let Some(until) = query.received.until {
                parts.push("#tk < :until".to_string());
                values.insert(":until".into(), s(item::event_time_bound(until.timestamp_millis())));
            }
            if query.received.since.is_some() || query.received.until.is_some() {
                names.insert("#tk".into(), "time_key".into());
            }
        }
        (!parts.is_empty()).then(|| parts.join(" AND "))
    }

    /// One `Query` of index partition `hash` (attribute `hash_name`) with
    /// `time_key` between `lo` and `hi` (inclusive; the caller drops the
    /// key it went on from), up to `limit` evaluated items, in the order.
    async fn query_time(
        &self,
        (table, index): (&str, &str),
        tenant: Option<&str>,
        (hash_name, hash): (&str, &str),
        query: &EventQuery,
        TimeKeys { lo, hi }: &TimeKeys,
        limit: usize,
    ) -> StoreResult<Read> {
        if lo > hi {
            return Ok(Read { items: Vec::new(), more: None });
        }
        let mut names =
            HashMap::from([("#h".to_string(), hash_name.to_string()), ("#k".to_string(), "time_key".to_string())]);
        let mut values =
            HashMap::from([(":h".to_string(), s(hash)), (":lo".to_string(), s(lo)), (":hi".to_string(), s(hi))]);
        let filter = Self::filters(query, false, tenant, &mut names, &mut values);
        let page = self
            .client
            .query()
            .table_name(table)
            .index_name(index)
            .key_condition_expression("#h = :h AND #k BETWEEN :lo AND :hi")
            .set_filter_expression(filter)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .scan_index_forward(query.order == Order::OldestFirst)
            .limit(i32::try_from(limit.max(1)).unwrap_or(i32::MAX))
            .send()
            .await
            .map_err(|e| backend("Query", table, e))?;
        let items = page
            .items()
            .iter()
            .map(|it| {
                let a = Attrs::from_sdk(it);
                Ok((a.s("time_key")?.to_string(), item::event_hit_from_attrs(&a)?))
            })
            .collect::<StoreResult<Vec<_>>>()?;
        let more = match page.last_evaluated_key() {
            Some(k) if !k.is_empty() => Some(Attrs::from_sdk(k).s("time_key")?.to_string()),
            _ => None,
        };
        Ok(Read { items, more })
    }

    /// The range left after position `pos` of a listing in `range`.
    fn rest(range: &TimeKeys, pos: Option<&str>, desc: bool) -> TimeKeys {
        match (pos, desc) {
            (None, _) => TimeKeys { lo: range.lo.clone(), hi: range.hi.clone() },
            (Some(p), true) => TimeKeys { lo: range.lo.clone(), hi: p.to_string().min(range.hi.clone()) },
            (Some(p), false) => TimeKeys { lo: p.to_string().max(range.lo.clone()), hi: range.hi.clone() },
        }
    }

    /// Events by time from a sharded index, every shard queried at once and
    /// merged by `time_key`: the day buckets of [`item::EVENTS_BY_TIME`] one
    /// day at a time, or the shards of a tenant ([`item::EVENTS_BY_TENANT`])
    /// or of the failed events ([`item::EVENTS_BY_OUTCOME`]) over the whole
    /// range.
    async fn search_time(
        &self,
        query: &EventQuery,
        range: TimeKeys,
        limit: usize,
        mut pos: Option<String>,
        mode: Sharded<'_>,
    ) -> StoreResult<Page<Hit>> {
        let desc = query.order == Order::NewestFirst;
        let mut items: Vec<Hit> = Vec::new();
        let mut queries = 0;
        let (index, hash_name, shards) = match mode {
            Sharded::Outcome(_) => {
                ((self.outcomes.as_str(), item::EVENTS_BY_OUTCOME), "outcome_shard", item::OUTCOME_SHARDS)
            }
            Sharded::Tenant(_) => ((self.table.as_str(), item::EVENTS_BY_TENANT), "tenant_shard", item::EVENT_SHARDS),
            Sharded::Days => ((self.table.as_str(), item::EVENTS_BY_TIME), "time_bucket", item::EVENT_SHARDS),
        };
        let tenant = match mode {
            Sharded::Outcome(t) => t,
            _ => None,
        };
        let whole_range = !matches!(mode, Sharded::Days);
        let day_of = |key: &str| -> StoreResult<DateTime<Utc>> {
            let ms: i64 = key
                .get(..15)
                .and_then(|d| d.parse().ok())
                .ok_or_else(|| StoreError::Corrupt(format!("not a position: {key}")))?;
            DateTime::from_timestamp_millis(ms).ok_or_else(|| StoreError::Corrupt(format!("not a position: {key}")))
        };
        while queries + shards as usize <= MAX_SEARCH_QUERIES {
            let r = Self::rest(&range, pos.as_deref(), desc);
            if r.lo >= r.hi {
                return Ok(Page { items, next: None });
            }
            // The day the listing is in: the one of its upper end going
            // back (the end is exclusive), of its lower end going forward.
            let day =
                if desc { day_of(&r.hi)? - chrono::Duration::milliseconds(1) } else { day_of(&r.lo)? }.date_naive();
            let start = day.and_hms_opt(0, 0, 0).expect("midnight").and_utc().timestamp_millis();
            let end = start + 86_400_000;
            // The tenant and outcome indexes are not bucketed by day: the whole range at once.
            let (lo, hi) = if whole_range {
                (r.lo.clone(), r.hi.clone())
            } else {
                (r.lo.clone().max(item::event_time_bound(start)), r.hi.clone().min(item::event_time_bound(end)))
            };
            let need = limit - items.len();
            let day_text = day.format("%Y-%m-%d").to_string();
            let calls = (0..shards).map(|shard| {
                let bucket = match mode {
                    Sharded::Outcome(_) => shard.to_string(),
                    Sharded::Tenant(t) => item::event_tenant_key(t, shard),
                    Sharded::Days => item::event_time_bucket(&day_text, shard),
                };
                let keys = TimeKeys { lo: lo.clone(), hi: hi.clone() };
                async move {
                    let n = read_ahead(query, need + 1);
                    self.query_time(index, tenant, (hash_name, &bucket), query, &keys, n).await
                }
            });
            let reads = all(all_bounded(calls.collect(), MAX_STORE_IN_FLIGHT).await)?;
            queries += reads.len();
            // Complete down to (up to) the furthest key every shard has
            // been read to; beyond it another shard may hold more.
            let edge =
                reads.iter().filter_map(|r| r.more.clone()).reduce(|a, b| if desc { a.max(b) } else { a.min(b) });
            let mut found: Vec<(String, Hit)> = reads
                .into_iter()
                .flat_map(|r| r.items)
                .filter(|(k, _)| *k != hi && Some(k) != pos.as_ref() && *k != r.hi)
                .filter(|(k, _)| edge.as_ref().is_none_or(|e| if desc { k >= e } else { k <= e }))
                .collect();
            found.sort_by(|a, b| if desc { b.0.cmp(&a.0) } else { a.0.cmp(&b.0) });
            for (key, e) in found {
                pos = Some(key);
                items.push(e);
                if items.len() == limit {
                    return Ok(Page { items, next: pos });
                }
            }
            pos = Some(match edge {
                Some(e) => e,
                None if whole_range => return Ok(Page { items, next: None }),
                // The day is done: on to the next one.
                None if desc => item::event_time_bound(start),
                None => item::event_time_bound(end),
            });
        }
        Ok(Page { items, next: pos })
    }

    /// One partition's numbered events, from [`item::EVENTS_BY_PARTITION`],
    /// in number order.
    async fn search_partition(
        &self,
        query: &EventQuery,
        partition: &str,
        limit: usize,
        mut after: Option<u64>,
    ) -> StoreResult<Page<Hit>> {
        let desc = query.order == Order::NewestFirst;
        let mut items = Vec::new();
        // Failed events: EventOutcomesTable's partition index, which carries the outcome.
        let (table, index) = match query.outcome {
            Some(_) => (self.outcomes.as_str(), item::OUTCOMES_BY_PARTITION),
            None => (self.table.as_str(), item::EVENTS_BY_PARTITION),
        };
        for _ in 0..MAX_SEARCH_QUERIES {
            let mut names = HashMap::from([("#p".to_string(), "partition".to_string())]);
            let mut values = HashMap::from([(":p".to_string(), s(partition))]);
            let mut key = "#p = :p".to_string();
            if let Some(a) = after {
                key.push_str(if desc { " AND #seq < :after" } else { " AND #seq > :after" });
                names.insert("#seq".into(), "partition_seq".into());
                values.insert(":after".into(), n(a));
            }
            let filter = Self::filters(query, true, None, &mut names, &mut values);
            let page = self
                .client
                .query()
                .table_name(table)
                .index_name(index)
                .key_condition_expression(key)
                .set_filter_expression(filter)
                .set_expression_attribute_names(Some(names))
                .set_expression_attribute_values(Some(values))
                .scan_index_forward(!desc)
                .limit(i32::try_from(read_ahead(query, limit - items.len())).unwrap_or(i32::MAX))
                .send()
                .await
                .map_err(|e| backend("Query", table, e))?;
            for it in page.items() {
                let a = Attrs::from_sdk(it);
                after = Some(a.n("partition_seq")?);
                items.push(item::event_hit_from_attrs(&a)?);
                if items.len() == limit {
                    // Read ahead of the page: the next starts after this one.
                    return Ok(Page { items, next: after.map(|a| a.to_string()) });
                }
            }
            match page.last_evaluated_key() {
                Some(k) if !k.is_empty() => after = Some(Attrs::from_sdk(k).n("partition_seq")?),
                _ => return Ok(Page { items, next: None }),
            }
        }
        Ok(Page { items, next: after.map(|a| a.to_string()) })
    }
}

// ----------------------------------------------------------- subscriptions

/// SubscriptionsTable: versioned configuration, and its index entries
/// ([`item::index_entries`]) in the same table, filed by GSI
/// [`item::SUBSCRIPTION_INDEX`]: a subscription and the entries that change
/// with it are written in one `TransactWriteItems` (at most 100 actions:
/// [`shared::limits::MAX_SUBSCRIPTION_PATTERNS`]). No call scans the table
/// but the operator's repair after an upgrade ([`SubscriptionStore::reindex_page`]).
#[derive(Clone)]
pub struct DynamoSubscriptions {
    client: Client,
    table: String,
}

/// Is this the id of an index entry rather than of a subscription?
/// Subscription ids never hold `#`; entry ids always do, so a caller naming
/// an entry finds no subscription.
fn is_entry_id(id: &SubscriptionId) -> bool {
    id.as_str().contains('#')
}

/// The condition of a `Put` in a subscription transaction.
enum PutIf {
    /// None (index entries).
    Always,
    /// No item with this id exists (a new subscription).
    Absent,
    /// The stored item has this version (a versioned update).
    Version(u64),
}

/// One `TransactWriteItems` of `actions` (`table` names it in errors):
/// `true` when written, `false` when a condition cancelled it, any other
/// failure an error.
async fn transact_all_or_none(client: &Client, table: &str, actions: Vec<TransactWriteItem>) -> StoreResult<bool> {
    match client.transact_write_items().set_transact_items(Some(actions)).send().await {
        Ok(_) => Ok(true),
        Err(e) => {
            let condition_failed = matches!(
                e.as_service_error(),
                Some(TransactWriteItemsError::TransactionCanceledException(t))
                    if t.cancellation_reasons().iter().any(|r| r.code() == Some("ConditionalCheckFailed"))
            );
            if condition_failed {
                Ok(false)
            } else {
                Err(backend("TransactWriteItems", table, e))
            }
        }
    }
}

/// What a transaction of [`DynamoSubscriptions::transact`] found.
enum Transacted {
    Written,
    /// A condition failed (the subscription changed, exists, or is gone).
    ConditionFailed,
}

impl DynamoSubscriptions {
    /// The adapter over `table`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoSubscriptions { client, table: table.into() }
    }

    /// Items of GSI [`item::SUBSCRIPTION_INDEX`] under `gk`, with `gs`
    /// after `after`, in `gs` order: all of them, or the first `limit`.
    async fn query_index(&self, gk: &str, after: Option<&str>, limit: Option<usize>) -> StoreResult<Vec<Attrs>> {
        let mut out = Vec::new();
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        loop {
            let mut q = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(item::SUBSCRIPTION_INDEX)
                .expression_attribute_values(":k", s(gk))
                .set_exclusive_start_key(start.take());
            q = match after {
                Some(a) => q.key_condition_expression("gk = :k AND gs > :a").expression_attribute_values(":a", s(a)),
                None => q.key_condition_expression("gk = :k"),
            };
            if let Some(l) = limit {
                q = q.limit(i32::try_from(l.saturating_sub(out.len()).max(1)).unwrap_or(i32::MAX));
            }
            let page = q.send().await.map_err(|e| backend("Query", &self.table, e))?;
            out.extend(page.items().iter().map(Attrs::from_sdk));
            if limit.is_some_and(|l| out.len() >= l) {
                out.truncate(limit.unwrap_or(usize::MAX));
                return Ok(out);
            }
            match page.last_evaluated_key() {
                Some(k) if !k.is_empty() => start = Some(k.clone()),
                _ => return Ok(out),
            }
        }
    }

    /// The subscription ids of index items (their `gs`).
    fn ids_of(items: &[Attrs]) -> StoreResult<Vec<SubscriptionId>> {
        items.iter().map(|a| Ok(SubscriptionId::new(a.s("gs")?))).collect()
    }

    /// The stored item of a subscription (strongly consistent), if any.
    async fn item(&self, id: &SubscriptionId) -> StoreResult<Option<Attrs>> {
        if is_entry_id(id) {
            return Ok(None);
        }
        get_by_id(&self.client, &self.table, id.as_str()).await
    }

    /// A `Put` action of a transaction; with `version`, only if the stored
    /// item has that version; with `None`, unconditional.
    fn put_action(&self, attrs: Attrs, condition: PutIf) -> StoreResult<TransactWriteItem> {
        let mut put = Put::builder().table_name(&self.table).set_item(Some(attrs.into_sdk()));
        put = match condition {
            PutIf::Always => put,
            PutIf::Absent => put.condition_expression("attribute_not_exists(id)"),
            PutIf::Version(v) => put
                .condition_expression("#v = :expected")
                .expression_attribute_names("#v", "version")
                .expression_attribute_values(":expected", n(v)),
        };
        let put = put.build().map_err(|e| StoreError::Backend(format!("dynamodb Put on {}: {e}", self.table)))?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// A `Delete` action of a transaction, only of that version if given.
    fn delete_action(&self, id: &str, version: Option<u64>) -> StoreResult<TransactWriteItem> {
        let mut del = Delete::builder().table_name(&self.table).key("id", s(id));
        if let Some(v) = version {
            del = del
                .condition_expression("#v = :expected")
                .expression_attribute_names("#v", "version")
                .expression_attribute_values(":expected", n(v));
        }
        let del = del.build().map_err(|e| StoreError::Backend(format!("dynamodb Delete on {}: {e}", self.table)))?;
        Ok(TransactWriteItem::builder().delete(del).build())
    }

    /// Writes `actions` all or none.
    async fn transact(&self, actions: Vec<TransactWriteItem>) -> StoreResult<Transacted> {
        if actions.len() > 100 {
            return Err(StoreError::Backend(format!(
                "a subscription write of {} actions exceeds DynamoDB's 100 per transaction (at most {} patterns)",
                actions.len(),
                shared::limits::MAX_SUBSCRIPTION_PATTERNS
            )));
        }
        Ok(if transact_all_or_none(&self.client, &self.table, actions).await? {
            Transacted::Written
        } else {
            Transacted::ConditionFailed
        })
    }

    /// The index entries a stored item has: none for an item written before
    /// the index existed (no `gk`), so its next update writes them all.
    fn stored_entries(old: &Attrs, sub: &Subscription) -> StoreResult<Vec<item::IndexEntry>> {
        Ok(if old.opt_s("gk")?.is_some() { item::index_entries(sub) } else { Vec::new() })
    }
}

#[async_trait]
impl SubscriptionStore for DynamoSubscriptions {
    /// One transaction: the subscription (if absent) and its index entries.
    async fn create(&self, sub: &Subscription) -> StoreResult<()> {
        if is_entry_id(&sub.id) {
            return Err(StoreError::Backend(format!("subscription id {} holds '#'", sub.id)));
        }
        let mut actions = vec![self.put_action(item::subscription_to_attrs(sub)?, PutIf::Absent)?];
        for e in item::index_entries(sub) {
            actions.push(self.put_action(item::index_entry_to_attrs(&e, &sub.id), PutIf::Always)?);
        }
        match self.transact(actions).await? {
            Transacted::Written => Ok(()),
            // The SQLite adapter fails the same way (primary key constraint).
            Transacted::ConditionFailed => Err(StoreError::Backend(format!("subscription {} already exists", sub.id))),
        }
    }

    async fn get(&self, id: &SubscriptionId) -> StoreResult<Option<Subscription>> {
        self.item(id).await?.map(|a| item::subscription_from_attrs(&a)).transpose()
    }

    /// Eventually consistent `GetItem`s, concurrently up to the store cap:
    /// half the read units of [`SubscriptionStore::get`]. The callers are
    /// the subscription cache's fills (every container, every TTL) and
    /// listings, which already trust a copy up to the cache TTL old;
    /// routing confirms a subscription it would refuse with `get`
    /// (strongly consistent) first.
    async fn get_many(&self, ids: &[SubscriptionId]) -> StoreResult<Vec<Option<Subscription>>> {
        let calls = ids.iter().map(|id| async move {
            if is_entry_id(id) {
                return Ok(None);
            }
            let key = HashMap::from([("id".to_string(), s(id.as_str()))]);
            get_item(&self.client, &self.table, key, false)
                .await?
                .map(|a| item::subscription_from_attrs(&a))
                .transpose()
        });
        all(all_bounded(calls.collect(), MAX_STORE_IN_FLIGHT).await)
    }

    /// One `Query` of the GSI per key (concurrently, up to the store cap).
    async fn routes(&self, keys: &[RouteKey]) -> StoreResult<Vec<Vec<SubscriptionId>>> {
        let calls = keys
            .iter()
            .map(|k| async move { Self::ids_of(&self.query_index(&item::route_index_key(k), None, None).await?) })
            .collect();
        all(all_bounded(calls, MAX_STORE_IN_FLIGHT).await)
    }

    /// All: the GSI's listing partition (projected with the data). A
    /// tenant: its entries, then the subscriptions. Routes: `limit + 1`
    /// entries after `after` of each key, merged, then the subscriptions.
    async fn page(
        &self,
        filter: &SubscriptionFilter,
        limit: usize,
        after: Option<&SubscriptionId>,
    ) -> StoreResult<SubscriptionPage> {
        let want = limit.saturating_add(1);
        let after = after.map(SubscriptionId::as_str);
        let mut ids: Vec<SubscriptionId> = match filter {
            SubscriptionFilter::All => {
                let items = self.query_index(item::SUBSCRIPTION_LIST_KEY, after, Some(want)).await?;
                let mut subs: Vec<Subscription> =
                    items.iter().map(item::subscription_from_attrs).collect::<StoreResult<_>>()?;
                let next_after = (subs.len() > limit).then(|| {
                    subs.truncate(limit);
                    subs.last().map(|s| s.id.clone())
                });
                return Ok(SubscriptionPage { items: subs, next_after: next_after.flatten() });
            }
            SubscriptionFilter::Tenant(t) => {
                Self::ids_of(&self.query_index(&item::tenant_index_key(t), after, Some(want)).await?)?
            }
            SubscriptionFilter::Routes(keys) => {
                let calls = keys
                    .iter()
                    .map(|k| async move {
                        Self::ids_of(&self.query_index(&item::route_index_key(k), after, Some(want)).await?)
                    })
                    .collect();
                let mut merged = std::collections::BTreeSet::new();
                for ids in all(all_bounded(calls, MAX_STORE_IN_FLIGHT).await)? {
                    merged.extend(ids);
                }
                merged.into_iter().take(want).collect()
            }
        };
        let next_after = (ids.len() > limit).then(|| {
            ids.truncate(limit);
            ids.last().cloned()
        });
        let items = self.get_many(&ids).await?.into_iter().flatten().collect();
        Ok(SubscriptionPage { items, next_after: next_after.flatten() })
    }

    /// Reads the stored subscription (consistently) to know its index
    /// entries. If they stay the same (a state or secret change), one
    /// `PutItem` conditional on `version`; otherwise one transaction of
    /// that put and a put or delete of each entry that changed.
    async fn update(&self, sub: &Subscription, expected_version: u64) -> StoreResult<bool> {
        let Some(old) = self.item(&sub.id).await? else { return Ok(false) };
        if old.n::<u64>("version")? != expected_version {
            return Ok(false);
        }
        let before = Self::stored_entries(&old, &item::subscription_from_attrs(&old)?)?;
        let after = item::index_entries(sub);
        if before == after {
            let res = self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item::subscription_to_attrs(sub)?.into_sdk()))
                .condition_expression("#v = :expected")
                .expression_attribute_names("#v", "version")
                .expression_attribute_values(":expected", n(expected_version))
                .send()
                .await;
            return written("PutItem", &self.table, res);
        }
        let mut actions = vec![self.put_action(item::subscription_to_attrs(sub)?, PutIf::Version(expected_version))?];
        for e in &after {
            if !before.contains(e) {
                actions.push(self.put_action(item::index_entry_to_attrs(e, &sub.id), PutIf::Always)?);
            }
        }
        for e in &before {
            if !after.iter().any(|a| a.id == e.id) {
                actions.push(self.delete_action(&e.id, None)?);
            }
        }
        Ok(matches!(self.transact(actions).await?, Transacted::Written))
    }

    /// One transaction: the subscription (if still the version read) and
    /// its index entries; read again and retried if it changed meanwhile.
    async fn delete(&self, id: &SubscriptionId) -> StoreResult<bool> {
        for _ in 0..5 {
            let Some(old) = self.item(id).await? else { return Ok(false) };
            let version: u64 = old.n("version")?;
            let mut actions = vec![self.delete_action(id.as_str(), Some(version))?];
            for e in Self::stored_entries(&old, &item::subscription_from_attrs(&old)?)? {
                actions.push(self.delete_action(&e.id, None)?);
            }
            if let Transacted::Written = self.transact(actions).await? {
                return Ok(true);
            }
        }
        Err(StoreError::Backend(format!("subscription {id} kept changing while being deleted")))
    }

    /// The table's one `Scan`, on this operator path only (never on a
    /// pipeline path): one page of at most `limit` (≤ 100) items from the
    /// key `after`, filtered to subscription items without `gk` (stored
    /// before the index existed; index entries always have one), projected
    /// to `id`, `version`, `data`. Each found is written by [`Self::update`]
    /// with its version raised by one: it reads the item again
    /// (consistently), finds no stored entries and writes the subscription
    /// and all its entries in one `TransactWriteItems` conditional on the
    /// version read, so a subscription changed meanwhile (which wrote its
    /// entries) is left alone and a concurrent update conditional on the
    /// old version retries on the indexed item. Eventually consistent: a
    /// stale item fails that condition and counts as not reindexed.
    async fn reindex_page(&self, after: Option<&str>, limit: usize) -> StoreResult<ReindexPage> {
        let scan = self
            .client
            .scan()
            .filter_expression("attribute_not_exists(gk) AND attribute_exists(#data)")
            .projection_expression("id, #version, #data")
            .expression_attribute_names("#version", "version")
            .expression_attribute_names("#data", "data");
        let (items, examined, next) = reindex_scan(scan, &self.table, after, limit).await?;
        let found = items
            .iter()
            .map(|a| {
                let version: u64 = a.n("version")?;
                let mut sub = item::subscription_from_attrs(a)?;
                sub.version = version + 1;
                Ok((sub, version))
            })
            .collect::<StoreResult<Vec<(Subscription, u64)>>>()?;
        let calls = found.iter().map(|(sub, version)| self.update(sub, *version)).collect();
        let written = all(all_bounded(calls, MAX_STORE_IN_FLIGHT).await)?;
        Ok(ReindexPage { reindexed: written.iter().filter(|w| **w).count() as u64, examined, next })
    }
}

/// One page of an operator's reindex `Scan` (`scan`, with its filter, of
/// `table`): at most `limit` (≤ [`MAX_REINDEX_PAGE`]) items examined from
/// the key `after`. Answers the items the filter kept, how many were
/// examined, and the key the next page starts from (`None` at the end).
async fn reindex_scan(
    scan: aws_sdk_dynamodb::operation::scan::builders::ScanFluentBuilder,
    table: &str,
    after: Option<&str>,
    limit: usize,
) -> StoreResult<(Vec<Attrs>, u64, Option<String>)> {
    let limit = limit.clamp(1, MAX_REINDEX_PAGE);
    let page = scan
        .table_name(table)
        .limit(i32::try_from(limit).unwrap_or(1))
        .set_exclusive_start_key(after.map(|a| HashMap::from([("id".to_string(), s(a))])))
        .send()
        .await
        .map_err(|e| backend("Scan", table, e))?;
    let next = match page.last_evaluated_key().and_then(|k| k.get("id")) {
        Some(AttributeValue::S(id)) => Some(id.clone()),
        Some(other) => return Err(StoreError::Backend(format!("dynamodb Scan on {table}: a key id of {other:?}"))),
        None => None,
    };
    let examined = u64::try_from(page.scanned_count()).unwrap_or(0);
    Ok((page.items().iter().map(Attrs::from_sdk).collect(), examined, next))
}

// ------------------------------------------------------------------- sagas

/// The full key of a Sagas item.
fn saga_key(event_id: &EventId, id: &SagaId) -> HashMap<String, AttributeValue> {
    HashMap::from([("event_id".to_string(), s(event_id.as_str())), ("id".to_string(), s(id.as_str()))])
}

/// SagasTable, keyed `(event_id, id)`: conditional creates, conditional
/// transitions, an event's sagas by `Query` (no index, so no index writes).
#[derive(Clone)]
pub struct DynamoSagas {
    client: Client,
    table: String,
    retention: chrono::Duration,
}

impl DynamoSagas {
    /// The adapter over `table`; items expire `retention` after creation.
    pub fn new(client: Client, table: impl Into<String>, retention: chrono::Duration) -> Self {
        DynamoSagas { client, table: table.into(), retention }
    }

    /// One transition: a single `UpdateItem` conditional on status and
    /// attempts (and never from a terminal status). On a failed condition
    /// DynamoDB returns the item as it is (`ALL_OLD`), so the conflict's
    /// current state costs no second read; no item means no saga.
    async fn transition_one(&self, t: &Transition) -> StoreResult<TransitionOutcome> {
        let mut set = vec!["#status = :to_status", "attempts = :to_attempts", "updated_at = :at"];
        let mut remove = Vec::new();
        let mut req = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(saga_key(&t.event_id, &t.saga_id)))
            .condition_expression(
                "attribute_exists(id) AND #status = :from_status AND attempts = :from_attempts \
                 AND NOT (#status IN (:completed, :dead_lettered))",
            )
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":to_status", s(t.to.status.as_str()))
            .expression_attribute_values(":to_attempts", n(t.to.attempts))
            .expression_attribute_values(":at", s(item::rfc3339(t.at)))
            .expression_attribute_values(":from_status", s(t.from.status.as_str()))
            .expression_attribute_values(":from_attempts", n(t.from.attempts))
            .expression_attribute_values(":completed", s(SagaStatus::Completed.as_str()))
            .expression_attribute_values(":dead_lettered", s(SagaStatus::DeadLettered.as_str()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        match t.to.next_attempt_at {
            Some(at) => {
                set.push("next_attempt_at = :next");
                req = req.expression_attribute_values(":next", s(item::rfc3339(at)));
            }
            None => remove.push("next_attempt_at"),
        }
        match &t.to.last_error {
            Some(err) => {
                set.push("last_error = :err");
                req = req.expression_attribute_values(":err", s(err));
            }
            None => remove.push("last_error"),
        }
        // The due index holds waiting sagas only: a terminal saga leaves it.
        match shared::saga::due_at(&t.to, t.at) {
            Some(due) => {
                set.push("due_shard = :shard");
                set.push("due_at = :due");
                req = req
                    .expression_attribute_values(":shard", s(item::due_shard(&t.saga_id)))
                    .expression_attribute_values(":due", n(due.timestamp_millis()));
            }
            None => remove.extend(["due_shard", "due_at"]),
        }
        let mut update = format!("SET {}", set.join(", "));
        if !remove.is_empty() {
            update.push_str(&format!(" REMOVE {}", remove.join(", ")));
        }
        match req.update_expression(update).send().await {
            Ok(_) => Ok(TransitionOutcome::Applied),
            Err(e) => {
                let Some(aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(c)) =
                    e.as_service_error()
                else {
                    return Err(backend("UpdateItem", &self.table, e));
                };
                match c.item() {
                    Some(old) if !old.is_empty() => {
                        Ok(TransitionOutcome::Conflict(item::saga_state_from_attrs(&Attrs::from_sdk(old))?))
                    }
                    _ => Ok(TransitionOutcome::Missing),
                }
            }
        }
    }
}

#[async_trait]
impl SagaStore for DynamoSagas {
    async fn create(&self, sagas: &[Saga]) -> StoreResult<Vec<bool>> {
        put_all_if_absent(&self.client, &self.table, "id", sagas, |sg| item::saga_to_attrs(sg, self.retention)).await
    }

    async fn get(&self, event_id: &EventId, id: &SagaId) -> StoreResult<Option<Saga>> {
        get_item(&self.client, &self.table, saga_key(event_id, id), true)
            .await?
            .map(|a| item::saga_from_attrs(&a))
            .transpose()
    }

    async fn transition(&self, transitions: &[Transition]) -> StoreResult<Vec<TransitionOutcome>> {
        all(all_bounded(transitions.iter().map(|t| self.transition_one(t)).collect(), MAX_STORE_IN_FLIGHT).await)
    }

    /// One `Query` of index `by_due` per shard (due before `before`,
    /// oldest first, at most `limit` each), merged and cut to `limit`.
    async fn stalled(&self, before: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Saga>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let page = i32::try_from(limit).unwrap_or(i32::MAX);
        let queries = (0..item::DUE_SHARDS)
            .map(|shard| {
                self.client
                    .query()
                    .table_name(&self.table)
                    .index_name("by_due")
                    .key_condition_expression("due_shard = :s AND due_at < :b")
                    .expression_attribute_values(":s", s(shard.to_string()))
                    .expression_attribute_values(":b", n(before.timestamp_millis()))
                    .limit(page)
                    .send()
            })
            .collect();
        let mut sagas = Vec::new();
        for res in all_bounded(queries, MAX_STORE_IN_FLIGHT).await {
            let out = res.map_err(|e| backend("Query", &self.table, e))?;
            for it in out.items() {
                let a = Attrs::from_sdk(it);
                let due: i64 = a.n("due_at")?;
                sagas.push((due, item::saga_from_attrs(&a)?));
            }
        }
        sagas.sort_by_key(|(due, _)| *due);
        Ok(sagas.into_iter().take(limit).map(|(_, s)| s).collect())
    }

    async fn defer(
        &self,
        event_id: &EventId,
        id: &SagaId,
        expected: &SagaState,
        until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(saga_key(event_id, id)))
            .update_expression("SET due_at = :until")
            .condition_expression("attribute_exists(due_at) AND #status = :status AND attempts = :attempts")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":until", n(until.timestamp_millis()))
            .expression_attribute_values(":status", s(expected.status.as_str()))
            .expression_attribute_values(":attempts", n(expected.attempts))
            .send()
            .await;
        written("UpdateItem", &self.table, res)
    }

    /// One conditional `UpdateItem` of the saga's `redrives`.
    async fn count_redrive(
        &self,
        event_id: &EventId,
        id: &SagaId,
        expected: &SagaState,
        redrives: u32,
    ) -> StoreResult<bool> {
        let current = if redrives == 0 { "attribute_not_exists(redrives)" } else { "redrives = :current" };
        let mut req = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(saga_key(event_id, id)))
            .update_expression("SET redrives = :next")
            .condition_expression(format!("#status = :status AND attempts = :attempts AND {current}"))
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":next", n(redrives + 1))
            .expression_attribute_values(":status", s(expected.status.as_str()))
            .expression_attribute_values(":attempts", n(expected.attempts));
        if redrives > 0 {
            req = req.expression_attribute_values(":current", n(redrives));
        }
        written("UpdateItem", &self.table, req.send().await)
    }

    /// One consistent `Query` of the event's partition. Ordered by creation
    /// time then id, as close as DynamoDB gets to the SQLite adapter's
    /// insertion order.
    async fn list_for_event(&self, event_id: &EventId) -> StoreResult<Vec<Saga>> {
        let items = query_all(
            &self.client,
            &self.table,
            None,
            "event_id = :e",
            HashMap::new(),
            HashMap::from([(":e".to_string(), s(event_id.as_str()))]),
            true,
        )
        .await?;
        let mut sagas: Vec<Saga> = items.iter().map(item::saga_from_attrs).collect::<StoreResult<_>>()?;
        sagas.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id)));
        Ok(sagas)
    }

    /// One consistent `Query` of the event's partition, in saga id (sort
    /// key) order, from after the saga id `after`.
    async fn page_for_event(&self, event_id: &EventId, limit: usize, after: Option<&str>) -> StoreResult<Page<Saga>> {
        let start =
            after.map(|id| HashMap::from([("event_id".to_string(), s(event_id.as_str())), ("id".to_string(), s(id))]));
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("event_id = :e")
            .expression_attribute_values(":e", s(event_id.as_str()))
            .consistent_read(true)
            .limit(i32::try_from(limit.max(1)).unwrap_or(i32::MAX))
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|e| backend("Query", &self.table, e))?;
        let items: Vec<Saga> =
            out.items().iter().map(|i| item::saga_from_attrs(&Attrs::from_sdk(i))).collect::<StoreResult<_>>()?;
        let next = match out.last_evaluated_key() {
            Some(k) if items.len() >= limit => k.get("id").and_then(|v| v.as_s().ok()).cloned(),
            _ => None,
        };
        Ok(Page { items, next })
    }
}

// ---------------------------------------------------------------- attempts

/// AttemptsTable: keyed `(saga_id, attempt)`, one conditional put each.
#[derive(Clone)]
pub struct DynamoAttempts {
    client: Client,
    table: String,
    retention: chrono::Duration,
}

impl DynamoAttempts {
    /// The adapter over `table`; items expire `retention` after the attempt.
    pub fn new(client: Client, table: impl Into<String>, retention: chrono::Duration) -> Self {
        DynamoAttempts { client, table: table.into(), retention }
    }
}

#[async_trait]
impl AttemptStore for DynamoAttempts {
    async fn record(&self, attempts: &[Attempt]) -> StoreResult<Vec<bool>> {
        // With a composite key, attribute_not_exists on the partition key
        // checks the item with this exact (saga_id, attempt).
        put_all_if_absent(&self.client, &self.table, "saga_id", attempts, |a| item::attempt_to_attrs(a, self.retention))
            .await
    }

    async fn list(&self, saga_id: &SagaId) -> StoreResult<Vec<Attempt>> {
        let items = query_all(
            &self.client,
            &self.table,
            None,
            "saga_id = :s",
            HashMap::new(),
            HashMap::from([(":s".to_string(), s(saga_id.as_str()))]),
            true,
        )
        .await?;
        // The sort key `attempt` orders them oldest first already.
        items.iter().map(item::attempt_from_attrs).collect()
    }
}

// ------------------------------------------------------------ dead letters

/// DeadLettersTable: one per dead saga, listed through sharded indexes
/// ([`item::DEAD_LETTER_SHARDS`]) that project only the filter attributes;
/// a page's dead letters are then read by id. Beside them, the shards of
/// the open-dead-letter counter ([`item::dead_letter_count_key`]). Open
/// dead letters are kept until ops resolve them; a resolved one expires
/// `retention` after its resolution (TTL `expires_at`).
#[derive(Clone)]
pub struct DynamoDeadLetters {
    client: Client,
    table: String,
    retention: chrono::Duration,
}

impl DynamoDeadLetters {
    /// The adapter over `table`; resolved dead letters are kept `retention`.
    pub fn new(client: Client, table: impl Into<String>, retention: chrono::Duration) -> Self {
        DynamoDeadLetters { client, table: table.into(), retention }
    }

    /// The `Update` of a transaction that adds `delta` to the open-count
    /// shard of dead letter `id` (creating the shard item at 0 first).
    fn count_action(&self, id: &str, delta: i64) -> StoreResult<TransactWriteItem> {
        let update = aws_sdk_dynamodb::types::Update::builder()
            .table_name(&self.table)
            .key("id", s(item::dead_letter_count_key(item::open_count_shard(id))))
            .update_expression("ADD #n :d")
            .expression_attribute_names("#n", "n")
            .expression_attribute_values(":d", n(delta))
            .build()
            .map_err(|e| StoreError::Backend(format!("dynamodb Update on {}: {e}", self.table)))?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// Writes `actions` all or none; `false` when a condition failed.
    async fn transact(&self, actions: Vec<TransactWriteItem>) -> StoreResult<bool> {
        transact_all_or_none(&self.client, &self.table, actions).await
    }

    /// A `Select: COUNT` query of every shard of `state` in the state index
    /// (all pages): O(dead letters in that state); only the open count,
    /// which is scraped often, has a counter.
    async fn count_by_index(&self, state: DeadLetterState) -> StoreResult<u64> {
        let calls = (0..item::DEAD_LETTER_SHARDS).map(|shard| async move {
            let mut total = 0u64;
            let mut start: Option<HashMap<String, AttributeValue>> = None;
            loop {
                let page = self
                    .client
                    .query()
                    .table_name(&self.table)
                    .index_name(item::DEAD_LETTERS_BY_STATE.name)
                    .key_condition_expression("#h = :h")
                    .expression_attribute_names("#h", item::DEAD_LETTERS_BY_STATE.key)
                    .expression_attribute_values(":h", s(item::dead_letter_shard_key(state.as_str(), shard)))
                    .select(aws_sdk_dynamodb::types::Select::Count)
                    .set_exclusive_start_key(start.take())
                    .send()
                    .await
                    .map_err(|e| backend("Query", &self.table, e))?;
                total += page.count().max(0) as u64;
                match page.last_evaluated_key() {
                    Some(k) if !k.is_empty() => start = Some(k.clone()),
                    _ => return Ok(total),
                }
            }
        });
        Ok(all(all_bounded(calls.collect(), MAX_STORE_IN_FLIGHT).await)?.into_iter().sum())
    }
}

/// The most `Query` calls one page of dead letters makes: the first round
/// queries every shard, the next ones only the shards the merge waits on.
/// A filter that the chosen index does not narrow may find few on each,
/// and the page then ends early with a `next` where the reads stopped.
pub const DEAD_LETTER_QUERIES_PER_PAGE: usize = 4 * item::DEAD_LETTER_SHARDS as usize;

/// The index a dead-letter query reads with the plain value of its
/// partition key (sharded on read), and the filters left for a
/// `FilterExpression` (plain attribute, value; the indexes project them).
/// The most selective filter picks the index: a subscription, a tenant, an
/// event type, a state, else every dead letter.
fn dead_letter_index(q: &DeadLetterQuery) -> (item::DeadLetterIndex, String, Vec<(&'static str, String)>) {
    let mut rest: Vec<(&'static str, String)> = Vec::new();
    let mut chosen: Option<(item::DeadLetterIndex, String)> = None;
    let candidates = [
        (item::DEAD_LETTERS_BY_SUBSCRIPTION, q.subscription_id.as_ref().map(|s| s.to_string())),
        (item::DEAD_LETTERS_BY_TENANT, q.tenant_id.clone()),
        (item::DEAD_LETTERS_BY_TYPE, q.event_type.clone()),
        (item::DEAD_LETTERS_BY_STATE, q.state.map(|s| s.as_str().to_string())),
    ];
    for (index, value) in candidates {
        let Some(v) = value else { continue };
        if chosen.is_none() {
            chosen = Some((index, v));
        } else {
            rest.push((index.plain, v));
        }
    }
    let (index, value) = chosen.unwrap_or((item::DEAD_LETTERS_BY_CREATED, item::DEAD_LETTER_LISTING_ALL.to_string()));
    (index, value, rest)
}

/// Where the reads of one index shard stand during a page.
#[derive(Default)]
struct ShardRead {
    /// Where its next `Query` starts.
    start: Option<HashMap<String, AttributeValue>>,
    /// `created_at` of the last entry it evaluated: every entry newer than
    /// it has been read (entries of the same millisecond may follow).
    last_ms: Option<i64>,
    /// Its key range is read to the end.
    done: bool,
}

#[async_trait]
impl DeadLetterStore for DynamoDeadLetters {
    /// One transaction: the dead letter (if absent) and, when it is open,
    /// +1 on its shard of the open count; a duplicate changes neither.
    async fn put(&self, dl: &DeadLetter) -> StoreResult<bool> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item::dead_letter_to_attrs(dl)?.into_sdk()))
            .condition_expression("attribute_not_exists(id)")
            .build()
            .map_err(|e| StoreError::Backend(format!("dynamodb Put on {}: {e}", self.table)))?;
        let mut actions = vec![TransactWriteItem::builder().put(put).build()];
        if dl.state == DeadLetterState::Open {
            actions.push(self.count_action(dl.id.as_str(), 1)?);
        }
        self.transact(actions).await
    }

    async fn get(&self, id: &DeadLetterId) -> StoreResult<Option<DeadLetter>> {
        if id.as_str().starts_with('#') {
            // A counter shard's id, never a dead letter's.
            return Ok(None);
        }
        get_by_id(&self.client, &self.table, id.as_str()).await?.map(|a| item::dead_letter_from_attrs(&a)).transpose()
    }

    /// Queries of every shard of the index [`dead_letter_index`] picks,
    /// newest first (`ScanIndexForward: false`), the time range and the
    /// position as the key condition on `created_at`, other filters as a
    /// `FilterExpression` on projected attributes, merged by
    /// `(created_at, id)`: an entry is listed once every shard has been
    /// read past its millisecond. At most [`DEAD_LETTER_QUERIES_PER_PAGE`]
    /// queries; then the page's dead letters by id (eventually consistent
    /// `GetItem`s, concurrently), leaving out any that changed since the
    /// index entry so that it no longer matches, or is gone.
    async fn page(&self, q: &DeadLetterQuery, limit: usize, after: Option<&str>) -> StoreResult<Page<DeadLetter>> {
        let (index, value, rest) = dead_letter_index(q);
        let pos = match after {
            None => None,
            Some(a) => Some(Position::parse(a).ok_or_else(|| StoreError::Corrupt(format!("bad position {a}")))?),
        };
        let limit = limit.max(1);
        let mut names = HashMap::from([("#h".to_string(), index.key.to_string())]);
        let mut values = HashMap::new();
        let lo = q.since.map(|t| t.timestamp_millis());
        let hi =
            [q.until.map(|t| t.timestamp_millis() - 1), pos.as_ref().map(|p| p.created_ms)].into_iter().flatten().min();
        let mut key = "#h = :h".to_string();
        match (lo, hi) {
            (Some(a), Some(b)) if a > b => return Ok(Page { items: Vec::new(), next: None }),
            (Some(a), Some(b)) => {
                key.push_str(" AND #c BETWEEN :a AND :b");
                values.insert(":a".to_string(), n(a));
                values.insert(":b".to_string(), n(b));
            }
            (Some(a), None) => {
                key.push_str(" AND #c >= :a");
                values.insert(":a".to_string(), n(a));
            }
            (None, Some(b)) => {
                key.push_str(" AND #c <= :b");
                values.insert(":b".to_string(), n(b));
            }
            (None, None) => {}
        }
        if lo.is_some() || hi.is_some() {
            names.insert("#c".into(), "created_at".into());
        }
        let mut filter = Vec::new();
        for (i, (attr, v)) in rest.iter().enumerate() {
            names.insert(format!("#f{i}"), attr.to_string());
            values.insert(format!(":f{i}"), s(v.clone()));
            filter.push(format!("#f{i} = :f{i}"));
        }
        let filter = (!filter.is_empty()).then(|| filter.join(" AND "));
        let before_pos = |ms: i64, id: &str| pos.as_ref().is_none_or(|p| (ms, id) < (p.created_ms, p.id.as_str()));

        let shards = item::DEAD_LETTER_SHARDS as usize;
        let mut reads: Vec<ShardRead> = (0..shards).map(|_| ShardRead::default()).collect();
        let mut hits: Vec<(i64, String)> = Vec::new();
        // Entries newer than this are complete in every shard (None: all are).
        let threshold = |reads: &[ShardRead]| -> Option<Option<i64>> {
            let open: Vec<Option<i64>> = reads.iter().filter(|r| !r.done).map(|r| r.last_ms).collect();
            if open.iter().any(Option::is_none) {
                return None; // a shard not read yet: nothing is complete
            }
            Some(open.into_iter().flatten().max())
        };
        let listable =
            |hits: &[(i64, String)], t: Option<i64>| hits.iter().filter(|(ms, _)| t.is_none_or(|t| *ms > t)).count();
        // Entries are spread evenly over the shards: about twice a shard's
        // share of the page each (a filter thins them out: a page's worth).
        let per_shard = if filter.is_some() { limit + 1 } else { (limit + 1) * 2 / shards + 2 };
        let per_query = i32::try_from(per_shard.min(1000)).unwrap_or(1000);
        let mut queries = 0;
        loop {
            let t = threshold(&reads);
            if let Some(t) = t {
                if t.is_none() || listable(&hits, t) >= limit {
                    break;
                }
            }
            // The shards the merge waits on: not read yet, or read down to the threshold.
            let wanted: Vec<usize> = (0..shards)
                .filter(|i| {
                    !reads[*i].done && (t.is_none() && reads[*i].last_ms.is_none() || t.flatten() == reads[*i].last_ms)
                })
                .collect();
            if wanted.is_empty() || queries + wanted.len() > DEAD_LETTER_QUERIES_PER_PAGE {
                break;
            }
            queries += wanted.len();
            let calls = wanted.iter().map(|&i| {
                let mut values = values.clone();
                values.insert(":h".to_string(), s(item::dead_letter_shard_key(&value, i as u32)));
                let query = self
                    .client
                    .query()
                    .table_name(&self.table)
                    .index_name(index.name)
                    .key_condition_expression(&key)
                    .set_filter_expression(filter.clone())
                    .set_expression_attribute_names(Some(names.clone()))
                    .set_expression_attribute_values(Some(values))
                    .scan_index_forward(false)
                    .limit(per_query)
                    .set_exclusive_start_key(reads[i].start.clone());
                async move { query.send().await.map_err(|e| backend("Query", &self.table, e)) }
            });
            let pages = all(all_bounded(calls.collect(), MAX_STORE_IN_FLIGHT).await)?;
            for (i, page) in wanted.into_iter().zip(pages) {
                for it in page.items() {
                    let a = Attrs::from_sdk(it);
                    let (ms, id) = (a.n::<i64>("created_at")?, a.s("id")?.to_string());
                    reads[i].last_ms = Some(ms);
                    if before_pos(ms, &id) {
                        hits.push((ms, id));
                    }
                }
                match page.last_evaluated_key() {
                    Some(k) if !k.is_empty() => {
                        reads[i].last_ms = Some(Attrs::from_sdk(k).n("created_at")?);
                        reads[i].start = Some(k.clone());
                    }
                    _ => reads[i].done = true,
                }
            }
        }
        let t = threshold(&reads).flatten();
        let complete = reads.iter().all(|r| r.done);
        hits.sort_by(|a, b| b.cmp(a));
        hits.dedup();
        let mut listed: Vec<(i64, String)> =
            hits.into_iter().filter(|(ms, _)| complete || t.is_some_and(|t| *ms > t)).collect();
        let next = if listed.len() > limit {
            listed.truncate(limit);
            listed.last().map(|(ms, id)| Position { created_ms: *ms, id: DeadLetterId::new(id.as_str()) }.to_text())
        } else if complete {
            None
        } else {
            // Every entry newer than the threshold is listed; go on from it
            // (the greatest id: entries of that millisecond are not listed yet).
            let ms = t.or(hi).unwrap_or(i64::MAX);
            Some(Position { created_ms: ms, id: DeadLetterId::new(char::MAX.to_string()) }.to_text())
        };
        let calls = listed.iter().map(|(_, id)| async move {
            get_item(&self.client, &self.table, HashMap::from([("id".to_string(), s(id.as_str()))]), false).await
        });
        let found = all(all_bounded(calls.collect(), MAX_STORE_IN_FLIGHT).await)?;
        let mut items = Vec::with_capacity(found.len());
        for a in found.into_iter().flatten() {
            let d = item::dead_letter_from_attrs(&a)?;
            if q.matches(&d) {
                items.push(d);
            }
        }
        Ok(Page { items, next })
    }

    /// Open: the sum of the counter's [`item::OPEN_COUNT_SHARDS`] shards
    /// (eventually consistent `GetItem`s, concurrently: O(1) whatever the
    /// number). Other states: [`DynamoDeadLetters::count_by_index`].
    async fn count(&self, state: DeadLetterState) -> StoreResult<u64> {
        if state != DeadLetterState::Open {
            return self.count_by_index(state).await;
        }
        let calls = (0..item::OPEN_COUNT_SHARDS).map(|shard| async move {
            let key = HashMap::from([("id".to_string(), s(item::dead_letter_count_key(shard)))]);
            match get_item(&self.client, &self.table, key, false).await? {
                Some(a) => a.n::<i64>("n"),
                None => Ok(0),
            }
        });
        let total: i64 = all(all_bounded(calls.collect(), MAX_STORE_IN_FLIGHT).await)?.into_iter().sum();
        Ok(total.max(0) as u64)
    }

    /// Reads the dead letter, then rewrites `state`, its index key and
    /// `data` on condition that it is still `open`: while it is open
    /// nothing else writes it, so the data read is the data replaced. A
    /// counted dead letter (one with the listing keys, written since the
    /// counter exists) takes −1 off its open-count shard in the same
    /// transaction; one not counted yet (stored before, not reindexed)
    /// takes nothing, on condition that it is still not counted.
    async fn resolve(&self, id: &DeadLetterId, state: DeadLetterState, resolution: Resolution) -> StoreResult<bool> {
        if id.as_str().starts_with('#') {
            return Ok(false);
        }
        // A reindex may count it between the read and the write: read again.
        for _ in 0..3 {
            let Some(a) = get_by_id(&self.client, &self.table, id.as_str()).await? else { return Ok(false) };
            let mut dl = item::dead_letter_from_attrs(&a)?;
            if dl.state != DeadLetterState::Open {
                return Ok(false);
            }
            let counted = a.opt_s(item::DEAD_LETTER_LISTING)?.is_some();
            dl.state = state;
            dl.resolution = Some(resolution.clone());
            let data = item::dead_letter_to_attrs(&dl)?.s("data")?.to_string();
            let shard = item::dead_letter_shard_key(state.as_str(), item::dead_letter_shard(id.as_str()));
            let update = aws_sdk_dynamodb::types::Update::builder()
                .table_name(&self.table)
                .key("id", s(id.as_str()))
                .update_expression("SET #state = :state, #sk = :sk, #data = :data, expires_at = :expires")
                .condition_expression(if counted {
                    "#state = :open AND attribute_exists(#all)"
                } else {
                    "#state = :open AND attribute_not_exists(#all)"
                })
                .expression_attribute_names("#state", "state")
                .expression_attribute_names("#sk", item::DEAD_LETTERS_BY_STATE.key)
                .expression_attribute_names("#data", "data")
                .expression_attribute_names("#all", item::DEAD_LETTER_LISTING)
                .expression_attribute_values(":state", s(state.as_str()))
                .expression_attribute_values(":sk", s(shard))
                .expression_attribute_values(":data", s(data))
                .expression_attribute_values(":expires", n((chrono::Utc::now() + self.retention).timestamp()))
                .expression_attribute_values(":open", s(DeadLetterState::Open.as_str()))
                .build()
                .map_err(|e| StoreError::Backend(format!("dynamodb Update on {}: {e}", self.table)))?;
            let mut actions = vec![TransactWriteItem::builder().update(update).build()];
            if counted {
                actions.push(self.count_action(id.as_str(), -1)?);
            }
            if self.transact(actions).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The table's one `Scan`, on this operator path only (never on a
    /// pipeline path): one page of at most `limit` (≤ 100) items from the
    /// key `after`, filtered to dead letters without the every-dead-letter
    /// key (every dead letter written since the sharded indexes has it).
    /// Each found gets its listing keys from its own record in one
    /// `UpdateItem` conditional on still having none (with +1 on the open
    /// count in the same transaction when it is open: it was never
    /// counted), so a second run, or two at once, write each once.
    async fn reindex_page(&self, after: Option<&str>, limit: usize) -> StoreResult<ReindexPage> {
        let scan = self
            .client
            .scan()
            .filter_expression("attribute_not_exists(#listing) AND attribute_exists(#data)")
            .expression_attribute_names("#listing", item::DEAD_LETTER_LISTING)
            .expression_attribute_names("#data", "data");
        let (items, examined, next) = reindex_scan(scan, &self.table, after, limit).await?;
        let found = items.iter().map(item::dead_letter_from_attrs).collect::<StoreResult<Vec<_>>>()?;
        let calls = found.iter().map(|d| self.write_listing_keys(d)).collect();
        let written = all(all_bounded(calls, MAX_STORE_IN_FLIGHT).await)?;
        Ok(ReindexPage { reindexed: written.iter().filter(|w| **w).count() as u64, examined, next })
    }
}

impl DynamoDeadLetters {
    /// Adds a dead letter's listing keys to its item if it has none yet
    /// (`#k0`, the first of [`item::dead_letter_listing_keys`], is the
    /// every-dead-letter key), counting it when it is open; `true` if
    /// written.
    async fn write_listing_keys(&self, d: &DeadLetter) -> StoreResult<bool> {
        let keys = item::dead_letter_listing_keys(d);
        let set: Vec<String> = (0..keys.len()).map(|i| format!("#k{i} = :v{i}")).collect();
        let mut update = aws_sdk_dynamodb::types::Update::builder()
            .table_name(&self.table)
            .key("id", s(d.id.as_str()))
            .update_expression(format!("SET {}", set.join(", ")))
            .condition_expression("attribute_exists(id) AND attribute_not_exists(#k0) AND #st = :st")
            .expression_attribute_names("#st", "state")
            .expression_attribute_values(":st", s(d.state.as_str()));
        for (i, (name, value)) in keys.into_iter().enumerate() {
            update = update
                .expression_attribute_names(format!("#k{i}"), name)
                .expression_attribute_values(format!(":v{i}"), s(value));
        }
        let update =
            update.build().map_err(|e| StoreError::Backend(format!("dynamodb Update on {}: {e}", self.table)))?;
        let mut actions = vec![TransactWriteItem::builder().update(update).build()];
        if d.state == DeadLetterState::Open {
            actions.push(self.count_action(d.id.as_str(), 1)?);
        }
        self.transact(actions).await
    }
}

// -------------------------------------------------------------------- jobs

/// JobsTable: one item per bulk job ([`shared::bulk`]), rewritten on
/// condition of its `version`; expires `retention` after its last write.
#[derive(Clone)]
pub struct DynamoJobs {
    client: Client,
    table: String,
    retention: chrono::Duration,
}

impl DynamoJobs {
    /// The adapter over `table`; a job is kept `retention` after its last change.
    pub fn new(client: Client, table: impl Into<String>, retention: chrono::Duration) -> Self {
        DynamoJobs { client, table: table.into(), retention }
    }

    fn attrs(&self, job: &Job) -> StoreResult<Attrs> {
        item::job_to_attrs(job, (job.updated_at + self.retention).timestamp())
    }
}

#[async_trait]
impl JobStore for DynamoJobs {
    async fn create(&self, job: &Job) -> StoreResult<bool> {
        put_if_absent(&self.client, &self.table, "id", self.attrs(job)?).await
    }

    async fn get(&self, id: &str) -> StoreResult<Option<Job>> {
        get_by_id(&self.client, &self.table, id).await?.map(|a| item::job_from_attrs(&a)).transpose()
    }

    /// One `PutItem` on condition that `version` is still the expected one.
    async fn update(&self, job: &Job, expected_version: u64) -> StoreResult<bool> {
        let res = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(self.attrs(job)?.into_sdk()))
            .condition_expression("#v = :v")
            .expression_attribute_names("#v", "version")
            .expression_attribute_values(":v", n(expected_version))
            .send()
            .await;
        written("PutItem", &self.table, res)
    }
}
