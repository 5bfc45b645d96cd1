//! DeadLettersTable: dead letters, their sharded queries and resolutions.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use aws_sdk_dynamodb::Client;

use super::subscriptions::{reindex_scan, transact_all_or_none};
use super::{all, backend, get_by_id, get_item, n, s};
use crate::item::{self, Attrs};
use shared::bounds::{all_bounded, MAX_STORE_IN_FLIGHT};
use shared::dead_letter::{DeadLetter, DeadLetterQuery, DeadLetterState, Position, Resolution};
use shared::error::StoreError;
use shared::ids::DeadLetterId;
use shared::ports::{DeadLetterStore, Page, ReindexPage, StoreResult};

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
            .map_err(|e| StoreError::other(format!("dynamodb Update on {}: {e}", self.table)))?;
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
        (item::DEAD_LETTERS_BY_TENANT, q.tenant_id.as_ref().map(|t| t.as_str().to_string())),
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
            .map_err(|e| StoreError::other(format!("dynamodb Put on {}: {e}", self.table)))?;
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
                .map_err(|e| StoreError::other(format!("dynamodb Update on {}: {e}", self.table)))?;
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
            update.build().map_err(|e| StoreError::other(format!("dynamodb Update on {}: {e}", self.table)))?;
        let mut actions = vec![TransactWriteItem::builder().update(update).build()];
        if d.state == DeadLetterState::Open {
            actions.push(self.count_action(d.id.as_str(), 1)?);
        }
        self.transact(actions).await
    }
}
