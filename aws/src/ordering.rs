//! Ordered delivery on DynamoDB ([`shared::ordering`]), in the OrderTable
//! (`pk` S, `sk` S; no stream, no index):
//!
//! - a partition item per partition (`pk` = `p#<scope>#<key>`, `sk` = `p`):
//!   `seq` N, the last number given (set by the ingest transaction with the
//!   event's insert, conditional on the number it read); `routed` N and
//!   `ahead` S (JSON numbers) the routed-through mark, with `v` N, the
//!   version the router's conditional `UpdateItem` checks. The two writers
//!   touch different attributes, so neither overwrites the other.
//! - a lane entry per saga of an ordered subscription in a partition
//!   (`pk` = `l#<subscription>#<scope>#<key>`, `sk` = the number padded to
//!   20 digits, `#`, the saga id; `event_id` S): the lane's head is one
//!   `Query` with `Limit` 1.
//! - a blocked lane (`shared::ordering::BlockedLane`) is two items: its
//!   marker in the lane (`pk` = the lane's, `sk` = `~block`, after every
//!   entry; `since` N, ms) and its listing item (`pk` = `b#<subscription>`,
//!   `sk` = since padded to 20 digits, `#`, scope, `#`, key; `scope`,
//!   `partition_key`, `reason` S), so a subscription's oldest blocked lanes
//!   are one `Query` with a `Limit`.
//!
//! The scope (`g` or `t<bytes>:<tenant>`) is self-delimiting, so no
//! partition key, whatever it holds, reads as another partition.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;

use super::item::Attrs;
use crate::request::{backend, n, s};
use shared::error::StoreError;
use shared::event::EventRecord;
use shared::ids::{EventId, SagaId, SubscriptionId};
use shared::ordering::{self, BlockedLane, Lane, LaneEntry, Partition, MAX_AHEAD};
use shared::ports::{OrderStore, StoreResult};

/// Conditional writes tried before giving up on one change (others kept
/// writing the same partition first).
const TRIES: usize = 20;

/// The OrderTable.
#[derive(Clone)]
pub struct DynamoOrder {
    client: Client,
    table: String,
}

fn partition_key(p: &Partition) -> HashMap<String, AttributeValue> {
    HashMap::from([("pk".to_string(), s(format!("p#{}#{}", p.scope, p.key))), ("sk".to_string(), s("p"))])
}

fn lane_pk(lane: &Lane) -> String {
    format!("l#{}#{}#{}", lane.subscription_id, lane.partition.scope, lane.partition.key)
}

fn lane_sk(seq: u64, saga_id: &SagaId) -> String {
    format!("{seq:020}#{saga_id}")
}

/// The sort key of a blocked lane's marker: after every entry of the lane.
const BLOCK_SK: &str = "~block";

fn blocks_pk(subscription_id: &SubscriptionId) -> String {
    format!("b#{subscription_id}")
}

fn blocks_sk(since_ms: i64, p: &Partition) -> String {
    format!("{:020}#{}#{}", since_ms.max(0), p.scope, p.key)
}

/// The partition item's numbers: last given, routed-through, ahead, version.
struct Numbers {
    seq: u64,
    routed: u64,
    ahead: Vec<u64>,
    version: Option<u64>,
}

impl DynamoOrder {
    /// The store on `table` (the OrderTable).
    pub fn new(client: Client, table: &str) -> Self {
        DynamoOrder { client, table: table.to_string() }
    }

    /// The `since` (ms) of a lane's blocked marker, if it has one. A `Query`
    /// (the API's role reads the OrderTable only by `Query`).
    async fn block_marker(&self, lane: &Lane) -> StoreResult<Option<i64>> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#pk = :pk AND #sk = :sk")
            .expression_attribute_names("#pk", "pk")
            .expression_attribute_names("#sk", "sk")
            .expression_attribute_values(":pk", s(lane_pk(lane)))
            .expression_attribute_values(":sk", s(BLOCK_SK))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| backend("Query", &self.table, e))?;
        match out.items().first() {
            Some(item) => Ok(Some(Attrs::from_sdk(item).n("since")?)),
            None => Ok(None),
        }
    }

    async fn delete(&self, pk: String, sk: String) -> StoreResult<()> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .send()
            .await
            .map_err(|e| backend("DeleteItem", &self.table, e))?;
        Ok(())
    }

    async fn numbers(&self, p: &Partition) -> StoreResult<Numbers> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(partition_key(p)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| backend("GetItem", &self.table, e))?;
        let Some(item) = out.item() else { return Ok(Numbers { seq: 0, routed: 0, ahead: vec![], version: None }) };
        let a = Attrs::from_sdk(item);
        let num = |name: &str| -> StoreResult<u64> {
            if a.0.contains_key(name) {
                a.n(name)
            } else {
                Ok(0)
            }
        };
        let ahead = match a.opt_s("ahead")? {
            Some(text) => serde_json::from_str(text)
                .map_err(|e| StoreError::Corrupt(format!("partition {}: ahead: {e}", p.key)))?,
            None => vec![],
        };
        Ok(Numbers {
            seq: num("seq")?,
            routed: num("routed")?,
            ahead,
            version: a.0.contains_key("v").then(|| num("v")).transpose()?,
        })
    }

    /// Inserts `event` (if absent) with the next number of its partition,
    /// in one transaction with the partition item's `seq`, conditional on
    /// the number read: a duplicate takes no number, and two ingests of one
    /// partition never take the same one. `true` if inserted.
    pub async fn insert_numbered(
        &self,
        events_table: &str,
        event: &EventRecord,
        to_attrs: impl Fn(&EventRecord) -> StoreResult<Attrs>,
    ) -> StoreResult<bool> {
        let p = event.partition().expect("a partitioned event");
        for _ in 0..TRIES {
            let current = self.numbers(&p).await?.seq;
            let mut numbered = event.clone();
            numbered.partition_seq = Some(current + 1);
            let put_event = Put::builder()
                .table_name(events_table)
                .set_item(Some(to_attrs(&numbered)?.into_sdk()))
                .condition_expression("attribute_not_exists(#id)")
                .expression_attribute_names("#id", "id")
                .build()
                .map_err(|e| StoreError::other(e.to_string()))?;
            let update = Update::builder()
                .table_name(&self.table)
                .set_key(Some(partition_key(&p)))
                .update_expression("SET #seq = :next")
                .expression_attribute_names("#seq", "seq")
                .expression_attribute_values(":next", n(current + 1));
            let update = if current == 0 {
                update.condition_expression("attribute_not_exists(#seq)")
            } else {
                update.condition_expression("#seq = :current").expression_attribute_values(":current", n(current))
            }
            .build()
            .map_err(|e| StoreError::other(e.to_string()))?;
            let res = self
                .client
                .transact_write_items()
                .transact_items(TransactWriteItem::builder().put(put_event).build())
                .transact_items(TransactWriteItem::builder().update(update).build())
                .send()
                .await;
            match res {
                Ok(_) => return Ok(true),
                Err(e) => {
                    let reasons: Vec<Option<String>> = match e.as_service_error() {
                        Some(TransactWriteItemsError::TransactionCanceledException(t)) => {
                            t.cancellation_reasons().iter().map(|r| r.code().map(str::to_string)).collect()
                        }
                        _ => return Err(backend("TransactWriteItems", events_table, e)),
                    };
                    let failed =
                        |i: usize| reasons.get(i).cloned().flatten().as_deref() == Some("ConditionalCheckFailed");
                    if failed(0) {
                        return Ok(false);
                    }
                    if !failed(1) {
                        // Cancelled for another reason (a conflicting
                        // transaction in flight): try again.
                        tracing::debug!(reasons = ?reasons, "numbering transaction cancelled; retrying");
                    }
                }
            }
        }
        Err(StoreError::other(format!("partition {} kept changing under {TRIES} numbering transactions", p.key)))
    }
}

#[async_trait]
impl OrderStore for DynamoOrder {
    async fn mark_routed(&self, partition: &Partition, seq: u64) -> StoreResult<u64> {
        for _ in 0..TRIES {
            let now = self.numbers(partition).await?;
            let (routed, ahead) = ordering::advance(now.routed, &now.ahead, seq);
            if (routed, &ahead) == (now.routed, &now.ahead) {
                return Ok(routed);
            }
            if ahead.len() > MAX_AHEAD {
                return Err(StoreError::other(format!(
                    "partition {}: {} events routed ahead of number {}; retry once the earlier ones are routed",
                    partition.key,
                    ahead.len(),
                    routed + 1
                )));
            }
            let req = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(partition_key(partition)))
                .update_expression("SET #routed = :routed, #ahead = :ahead, #v = :next")
                .expression_attribute_names("#routed", "routed")
                .expression_attribute_names("#ahead", "ahead")
                .expression_attribute_names("#v", "v")
                .expression_attribute_values(":routed", n(routed))
                .expression_attribute_values(":ahead", s(serde_json::to_string(&ahead).expect("numbers")))
                .expression_attribute_values(":next", n(now.version.unwrap_or(0) + 1));
            let req = match now.version {
                None => req.condition_expression("attribute_not_exists(#v)"),
                Some(v) => req.condition_expression("#v = :v").expression_attribute_values(":v", n(v)),
            };
            if crate::request::written("UpdateItem", &self.table, req.send().await)? {
                return Ok(routed);
            }
        }
        Err(StoreError::other(format!("partition {} kept changing under {TRIES} writes", partition.key)))
    }

    async fn routed_through(&self, partition: &Partition) -> StoreResult<u64> {
        Ok(self.numbers(partition).await?.routed)
    }

    async fn enqueue(&self, lane: &Lane, entry: &LaneEntry) -> StoreResult<()> {
        self.client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(lane_pk(lane)))
            .item("sk", s(lane_sk(entry.seq, &entry.saga_id)))
            .item("event_id", s(entry.event_id.as_str()))
            .send()
            .await
            .map_err(|e| backend("PutItem", &self.table, e))?;
        Ok(())
    }

    async fn head(&self, lane: &Lane) -> StoreResult<Option<LaneEntry>> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#pk = :pk")
            .expression_attribute_names("#pk", "pk")
            .expression_attribute_values(":pk", s(lane_pk(lane)))
            .scan_index_forward(true)
            .consistent_read(true)
            .limit(1)
            .send()
            .await
            .map_err(|e| backend("Query", &self.table, e))?;
        let Some(item) = out.items().first() else { return Ok(None) };
        let a = Attrs::from_sdk(item);
        let sk = a.s("sk")?;
        if sk == BLOCK_SK {
            // Only the blocked marker: no entry.
            return Ok(None);
        }
        let (seq, saga) = sk
            .split_once('#')
            .and_then(|(seq, saga)| Some((seq.parse::<u64>().ok()?, saga)))
            .ok_or_else(|| StoreError::Corrupt(format!("lane entry key {sk}")))?;
        Ok(Some(LaneEntry { seq, saga_id: SagaId::new(saga), event_id: EventId::new(a.s("event_id")?) }))
    }

    async fn dequeue(&self, lane: &Lane, seq: u64, saga_id: &SagaId) -> StoreResult<()> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(lane_pk(lane)))
            .key("sk", s(lane_sk(seq, saga_id)))
            .send()
            .await
            .map_err(|e| backend("DeleteItem", &self.table, e))?;
        Ok(())
    }

    async fn block(&self, lane: &Lane, blocked: &BlockedLane) -> StoreResult<()> {
        if self.block_marker(lane).await?.is_some() {
            return Ok(());
        }
        let since = blocked.since.timestamp_millis();
        let listing = blocks_sk(since, &lane.partition);
        // The listing item first: a crash before the marker leaves a listed
        // lane that `blocked` drops when it finds no marker.
        self.client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(blocks_pk(&lane.subscription_id)))
            .item("sk", s(listing.clone()))
            .item("scope", s(&lane.partition.scope))
            .item("partition_key", s(&lane.partition.key))
            .item("reason", s(&blocked.reason))
            .send()
            .await
            .map_err(|e| backend("PutItem", &self.table, e))?;
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(lane_pk(lane)))
            .item("sk", s(BLOCK_SK))
            .item("since", n(since))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        if !crate::request::written("PutItem", &self.table, put)? {
            // Another writer recorded it first: keep its listing only.
            if self.block_marker(lane).await? != Some(since) {
                self.delete(blocks_pk(&lane.subscription_id), listing).await?;
            }
        }
        Ok(())
    }

    async fn unblock(&self, lane: &Lane) -> StoreResult<()> {
        let Some(since) = self.block_marker(lane).await? else { return Ok(()) };
        self.delete(blocks_pk(&lane.subscription_id), blocks_sk(since, &lane.partition)).await?;
        self.delete(lane_pk(lane), BLOCK_SK.to_string()).await
    }

    async fn blocked(&self, subscription_id: &SubscriptionId, limit: usize) -> StoreResult<Vec<BlockedLane>> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#pk = :pk")
            .expression_attribute_names("#pk", "pk")
            .expression_attribute_values(":pk", s(blocks_pk(subscription_id)))
            .scan_index_forward(true)
            .consistent_read(true)
            .limit(limit.clamp(1, 1000) as i32)
            .send()
            .await
            .map_err(|e| backend("Query", &self.table, e))?;
        let mut found = Vec::new();
        for item in out.items() {
            let a = Attrs::from_sdk(item);
            let sk = a.s("sk")?;
            let since_ms: i64 = sk
                .split_once('#')
                .and_then(|(ms, _)| ms.parse().ok())
                .ok_or_else(|| StoreError::Corrupt(format!("blocked lane key {sk}")))?;
            found.push(BlockedLane {
                partition: Partition { scope: a.s("scope")?.to_string(), key: a.s("partition_key")?.to_string() },
                since: chrono::DateTime::from_timestamp_millis(since_ms).unwrap_or_default(),
                reason: a.s("reason")?.to_string(),
            });
        }
        Ok(found)
    }
}
