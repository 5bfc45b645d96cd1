//! EventsTable and EventOutcomesTable: appending events, reading them by id,
//! and searching them (sharded time indexes).

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;

use super::{all, backend, get_item, n, put_all_if_absent, s, written};
use crate::item::{self, Attrs};
use chrono::{DateTime, Utc};
use shared::bounds::{all_bounded, MAX_STORE_IN_FLIGHT};
use shared::error::StoreError;
use shared::event::EventRecord;
use shared::event_search::{EventQuery, EventSummary, Order, Outcome, TypeFilter};
use shared::ids::EventId;
use shared::ports::{EventStore, Page, StoreResult};

/// EventsTable: append-only, one conditional `PutItem` per event, never
/// written again; an event with a partition key is numbered in a
/// transaction with its partition's item of the OrderTable
/// ([`crate::ordering::DynamoOrder::insert_numbered`]). Delivery outcomes
/// are small items of EventOutcomesTable (`outcomes`), one per event that
/// failed.
#[derive(Clone)]
pub struct DynamoEvents {
    client: Client,
    table: String,
    outcomes: String,
    retention: chrono::Duration,
    order: crate::ordering::DynamoOrder,
    /// Whether events get entries in the listings by time and by tenant
    /// (`EVENT_LISTING`).
    listing: bool,
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
        order: crate::ordering::DynamoOrder,
    ) -> Self {
        DynamoEvents { client, table: table.into(), outcomes: outcomes.into(), retention, order, listing: true }
    }

    /// The adapter writing events with (`true`, the default) or without
    /// their `by_time` and `tenant_shards` entries (`EVENT_LISTING` off:
    /// two write units less per event, and no listing by time; the shared
    /// stages refuse such a listing before asking this store,
    /// [`shared::event_search::EventQuery::check_listable`]).
    #[must_use]
    pub fn with_listing(self, listing: bool) -> Self {
        DynamoEvents { listing, ..self }
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
        let to_attrs = |e: &EventRecord| -> StoreResult<Attrs> {
            let mut a = item::event_to_attrs(e, self.retention)?;
            if !self.listing {
                item::drop_listing_keys(&mut a);
            }
            Ok(a)
        };
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
                return Err(StoreError::other(format!(
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
                .map_err(|e| StoreError::other(format!("dynamodb BatchGetItem on {}: {e}", self.outcomes)))?;
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
            (t, Some(_)) => Sharded::Outcome(t.as_ref().map(|t| t.as_str())),
            (Some(t), None) => Sharded::Tenant(t.as_str()),
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
