//! SagasTable and AttemptsTable: sagas with their conditional transitions,
//! and delivery attempts.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;

use super::{all, backend, get_item, n, put_all_if_absent, query_all, s, written};
use crate::item::{self, Attrs};
use chrono::{DateTime, Utc};
use shared::attempt::Attempt;
use shared::bounds::{all_bounded, MAX_STORE_IN_FLIGHT};
use shared::ids::{EventId, SagaId, SubscriptionId};
use shared::ports::{AttemptStore, Page, SagaStore, StoreResult, Transition, TransitionOutcome};
use shared::pull::Pulled;
use shared::saga::{Saga, SagaState, SagaStatus};

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

    /// One `Query` of the sparse GSI `by_pull` (`pull_sub` = the
    /// subscription, `pull_key` after `after`; keys only), followed while
    /// DynamoDB stops early, one more than the page so the next is known.
    async fn page_for_pull(
        &self,
        subscription: &SubscriptionId,
        limit: usize,
        after: Option<&str>,
    ) -> StoreResult<Page<Pulled>> {
        let hash = ("pull_sub", subscription.as_str());
        let (found, more) = super::query_after(
            &self.client,
            &self.table,
            Some("by_pull"),
            hash,
            super::SortKeys { attr: "pull_key", after, within: None },
            limit,
        )
        .await?;
        let items = found
            .iter()
            .map(|a| {
                Ok(Pulled {
                    pull_key: a.s("pull_key")?.to_string(),
                    event_id: EventId::new(a.s("event_id")?),
                    saga_id: SagaId::new(a.s("id")?),
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        let next = more.then(|| items.last().map(|p| p.pull_key.clone())).flatten();
        Ok(Page { items, next })
    }
}

// ---------------------------------------------------------------- attempts

/// AttemptsTable: keyed `(saga_id, attempt)`, one conditional put each;
/// and a first attempt that completes its saga, kept on the saga's item of
/// SagasTable (`sagas`) in the write that completes it.
#[derive(Clone)]
pub struct DynamoAttempts {
    client: Client,
    table: String,
    sagas: String,
    retention: chrono::Duration,
}

impl DynamoAttempts {
    /// The adapter over `table`, with the sagas of `sagas`; items expire
    /// `retention` after the attempt.
    pub fn new(
        client: Client,
        table: impl Into<String>,
        sagas: impl Into<String>,
        retention: chrono::Duration,
    ) -> Self {
        DynamoAttempts { client, table: table.into(), sagas: sagas.into(), retention }
    }

    /// A first attempt and its saga's completion in one conditional
    /// `UpdateItem` of the saga's item: `Pending` with no attempt becomes
    /// `Completed` with 1, the attempt kept in [`item::FIRST_ATTEMPT`] (the
    /// item stays under 1 KB: one write unit, where the Attempts item and
    /// the saga step's update were one each). Its stream record is a
    /// MODIFY, which the saga step does not read: it has nothing left to
    /// decide. If the item holds a first attempt already, this one is a
    /// duplicate (`false`). If the saga is in another state (or missing),
    /// the attempt is put in AttemptsTable as any attempt and the saga step
    /// decides. A first attempt recorded in AttemptsTable afterwards is
    /// checked against the item (`record`), but this condition cannot see
    /// AttemptsTable: should a duplicate job's success come while the first
    /// receive's failure of the same attempt still waits for the saga step
    /// (two receives of one job within that moment), the saga completes, the
    /// saga step's retry for the failure finds it completed and does
    /// nothing, and both records are listed.
    async fn record_completing_one(&self, a: &Attempt) -> StoreResult<bool> {
        let res = self
            .client
            .update_item()
            .table_name(&self.sagas)
            .set_key(Some(saga_key(&a.event_id, &a.saga_id)))
            .update_expression(
                "SET #status = :completed, attempts = :one, updated_at = :at, #first = :attempt \
                 REMOVE next_attempt_at, last_error, due_shard, due_at",
            )
            .condition_expression(
                "attribute_exists(id) AND #status = :pending AND attempts = :zero AND attribute_not_exists(#first)",
            )
            .expression_attribute_names("#status", "status")
            .expression_attribute_names("#first", item::FIRST_ATTEMPT)
            .expression_attribute_values(":completed", s(SagaStatus::Completed.as_str()))
            .expression_attribute_values(":pending", s(SagaStatus::Pending.as_str()))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":at", s(item::rfc3339(a.at)))
            .expression_attribute_values(":attempt", s(item::first_attempt_attr(a)?))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match res {
            Ok(_) => Ok(true),
            Err(e) => {
                let Some(aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(c)) =
                    e.as_service_error()
                else {
                    return Err(backend("UpdateItem", &self.sagas, e));
                };
                if c.item().is_some_and(|old| old.contains_key(item::FIRST_ATTEMPT)) {
                    return Ok(false);
                }
                super::put_if_absent(&self.client, &self.table, "saga_id", item::attempt_to_attrs(a, self.retention)?)
                    .await
            }
        }
    }

    /// Whether saga `a`'s item holds a first attempt already (one kept with
    /// its completion): a consistent `GetItem`, asked only for first attempts
    /// recorded in AttemptsTable.
    async fn first_kept_with_saga(&self, a: &Attempt) -> StoreResult<bool> {
        let saga = get_item(&self.client, &self.sagas, saga_key(&a.event_id, &a.saga_id), true).await?;
        Ok(saga.is_some_and(|s| s.0.contains_key(item::FIRST_ATTEMPT)))
    }

    /// One attempt in AttemptsTable, unless it is a first attempt its saga's
    /// item already holds (a duplicate job's, after the first one's success
    /// was kept there).
    async fn record_one(&self, a: &Attempt) -> StoreResult<bool> {
        if a.attempt == 1 && self.first_kept_with_saga(a).await? {
            return Ok(false);
        }
        // With a composite key, attribute_not_exists on the partition key
        // checks the item with this exact (saga_id, attempt).
        super::put_if_absent(&self.client, &self.table, "saga_id", item::attempt_to_attrs(a, self.retention)?).await
    }
}

#[async_trait]
impl AttemptStore for DynamoAttempts {
    /// A conditional `PutItem` per attempt in AttemptsTable; a first attempt
    /// is checked against its saga's item first (a consistent `GetItem`):
    /// one kept there with the saga's completion makes this one a duplicate.
    async fn record(&self, attempts: &[Attempt]) -> StoreResult<Vec<bool>> {
        all(all_bounded(attempts.iter().map(|a| self.record_one(a)).collect(), MAX_STORE_IN_FLIGHT).await)
    }

    /// One conditional `UpdateItem` of each saga's item
    /// ([`DynamoAttempts::record_completing_one`]), concurrently up to the
    /// store cap.
    async fn record_completing(&self, attempts: &[Attempt]) -> StoreResult<Vec<bool>> {
        all(all_bounded(attempts.iter().map(|a| self.record_completing_one(a)).collect(), MAX_STORE_IN_FLIGHT).await)
    }

    /// One consistent `Query` of AttemptsTable and one consistent `GetItem`
    /// of the saga's item, for a first attempt kept there.
    async fn list(&self, event_id: &EventId, saga_id: &SagaId) -> StoreResult<Vec<Attempt>> {
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
        let mut attempts: Vec<Attempt> = items.iter().map(item::attempt_from_attrs).collect::<StoreResult<_>>()?;
        let saga = get_item(&self.client, &self.sagas, saga_key(event_id, saga_id), true).await?;
        if let Some(first) = saga.as_ref().map(item::first_attempt_from_attrs).transpose()?.flatten() {
            attempts.insert(0, first);
            attempts.sort_by_key(|a| a.attempt);
        }
        Ok(attempts)
    }
}
