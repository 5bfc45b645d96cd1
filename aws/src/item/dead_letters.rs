//! Items of DeadLettersTable: dead letters, their sharded index keys and
//! the open count's shards.

use super::events::MAX_INFLATED;
use super::{encode_json, wrong_type, Attr, Attrs};
use shared::dead_letter::DeadLetter;
use shared::error::StoreError;

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
        (DEAD_LETTERS_BY_TENANT, d.tenant_id.as_ref().map(|t| t.as_str())),
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
