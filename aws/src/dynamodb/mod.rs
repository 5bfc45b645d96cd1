//! DynamoDB implementations of the store ports, with the semantics of the
//! SQLite ones: every idempotent write is a conditional `PutItem` (`true`
//! where inserted), a saga transition is one conditional `UpdateItem` that
//! reports the current state on conflict without a second read, and every
//! read of one item is strongly consistent. Batches are issued as concurrent
//! conditional requests: `BatchWriteItem` takes no conditions.
//!
//! Item layouts are in [`super::item`] and `infra/README.md`.

mod acks;
mod api_keys;
mod dead_letters;
mod event_types;
mod events;
mod idempotency;
mod jobs;
mod sagas;
mod stats;
mod subscriptions;

pub use acks::DynamoAcks;
pub use api_keys::DynamoApiKeys;
pub use dead_letters::{DynamoDeadLetters, DEAD_LETTER_QUERIES_PER_PAGE};
pub use event_types::DynamoEventTypes;
pub use events::{DynamoEvents, MAX_SEARCH_QUERIES};
pub use idempotency::{DynamoIdempotency, IdempotencyNotConfigured};
pub use jobs::DynamoJobs;
pub use sagas::{DynamoAttempts, DynamoSagas};
pub use stats::DynamoStats;
pub use subscriptions::DynamoSubscriptions;

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;

use super::item::Attrs;
pub(crate) use crate::request::{backend, n, s, written};
use shared::bounds::{all_bounded, MAX_STORE_IN_FLIGHT};
use shared::ports::StoreResult;

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

/// Which sort keys of a partition [`query_after`] reads: those of the
/// string attribute `attr` after `after`, and, with `within`, only those
/// between its bounds (inclusive).
#[derive(Debug, Clone, Copy)]
struct SortKeys<'a> {
    /// The sort key attribute.
    attr: &'a str,
    /// Only sort keys after this one (the previous page's last).
    after: Option<&'a str>,
    /// Only sort keys between these bounds, inclusive.
    within: Option<(&'a str, &'a str)>,
}

/// Up to `limit` items of one partition (`hash` = (attribute, value)) of
/// `table` or its `index`, in sort key order, of the sort keys `keys`
/// selects, and whether more follow: a `Query` asking one more than the
/// page, followed while DynamoDB stops early (its 1 MB per call).
async fn query_after(
    client: &Client,
    table: &str,
    index: Option<&str>,
    hash: (&str, &str),
    keys: SortKeys<'_>,
    limit: usize,
) -> StoreResult<(Vec<Attrs>, bool)> {
    // Within bounds, the lower one moves past `after`; past the upper
    // one nothing is left (and DynamoDB refuses a `BETWEEN` whose bounds
    // are out of order). A range starts after `after` through the bounds,
    // never a second sort key condition.
    let within = match keys.within {
        Some((lo, hi)) => {
            let lo = keys.after.filter(|a| *a >= lo).map_or(lo.to_string(), |a| format!("{a}\u{0}"));
            if lo.as_str() > hi {
                return Ok((Vec::new(), false));
            }
            Some((lo, hi))
        }
        None => None,
    };
    let want = limit + 1;
    let mut items: Vec<Attrs> = Vec::new();
    let mut start = None;
    loop {
        let mut q = client
            .query()
            .table_name(table)
            .set_index_name(index.map(str::to_string))
            .expression_attribute_names("#h", hash.0)
            .expression_attribute_values(":h", s(hash.1))
            .limit(i32::try_from(want - items.len()).unwrap_or(i32::MAX))
            .set_exclusive_start_key(start.take());
        // `#r` only where the condition uses it (AWS refuses a name no
        // expression uses).
        q = match (keys.after, &within) {
            (_, Some((lo, hi))) => q
                .key_condition_expression("#h = :h AND #r BETWEEN :lo AND :hi")
                .expression_attribute_names("#r", keys.attr)
                .expression_attribute_values(":lo", s(lo))
                .expression_attribute_values(":hi", s(*hi)),
            (Some(a), None) => q
                .key_condition_expression("#h = :h AND #r > :a")
                .expression_attribute_names("#r", keys.attr)
                .expression_attribute_values(":a", s(a)),
            (None, None) => q.key_condition_expression("#h = :h"),
        };
        let page = q.send().await.map_err(|e| backend("Query", table, e))?;
        items.extend(page.items().iter().map(Attrs::from_sdk));
        match page.last_evaluated_key() {
            Some(k) if !k.is_empty() && items.len() < want => start = Some(k.clone()),
            _ => break,
        }
    }
    let more = items.len() > limit;
    items.truncate(limit);
    Ok((items, more))
}

/// Collects per-item results in input order, failing if any call failed.
fn all<T>(results: Vec<StoreResult<T>>) -> StoreResult<Vec<T>> {
    results.into_iter().collect()
}
