//! [`LimitStore`] on DynamoDB, in the HealthTable: an item per held slot
//! (`slot#<n>#<subscription>`, taken with a `PutItem` conditional on the
//! slot being free or its lease over) and one per rate-limited subscription
//! (`rate#<subscription>`, its next free start replaced with a conditional
//! `PutItem`; the delivery function never updates an item in place). A
//! subscription without limits never reaches here.
//!
//! Starts are booked ([`LimitStore::book_starts`]): a batch's jobs of one
//! subscription book their consecutive starts in one write, conditional on
//! the next free start it read (a lost race returns the current one, and
//! the write is tried again from it), so each waiting job gets its own start
//! and none retries for it. Scale: the rate item is one item, and one
//! DynamoDB item takes at most 1,000 writes a second, so a `rate_limit` is
//! held at most [`shared::bounds::AWS_MAX_RATE_LIMIT`] starts a second on AWS
//! (a booking per job at worst); slots are an item each, so `max_in_flight`
//! (at most 1,000) spreads over as many items.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;
use rand::Rng;

use shared::error::StoreError;
use shared::ids::SubscriptionId;
use shared::ports::{Admission, Lease, LimitStore, StoreResult};
use shared::subscription::rate_tolerance;

/// Slots tried per admission: a full subscription costs at most this many
/// failed conditional writes, not `max_in_flight` of them.
const SLOT_TRIES: u32 = 3;

/// Conditional writes one booking of starts tries before it gives up (other
/// workers kept booking first; a batch books all its jobs' starts at once,
/// so contention is between concurrent batches, not jobs).
const BOOK_TRIES: u32 = 5;

/// The `until` of the item a failed condition returned (when the service
/// returns it: `ReturnValuesOnConditionCheckFailure`).
fn until_of(item: Option<&std::collections::HashMap<String, AttributeValue>>) -> Option<i64> {
    item?.get("until")?.as_n().ok()?.parse().ok()
}

/// The limit items of the HealthTable.
pub struct DynamoLimits {
    client: Client,
    table: String,
}

impl DynamoLimits {
    /// The store on `table` (the HealthTable).
    pub fn new(client: Client, table: &str) -> Self {
        DynamoLimits { client, table: table.to_string() }
    }

    fn error<E>(
        &self,
        op: &str,
        e: aws_sdk_dynamodb::error::SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>,
    ) -> StoreError
    where
        E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + Send + Sync + 'static,
    {
        crate::sdk::store_error(format!("dynamodb {op} on {}: {}", self.table, DisplayErrorContext(&e)), e)
    }

    /// Takes slot `k` if free; `Err(Some(until))` when held until then.
    async fn take_slot(
        &self,
        sub: &SubscriptionId,
        k: u32,
        token: &str,
        now: i64,
        lease: Duration,
    ) -> StoreResult<Result<(), Option<i64>>> {
        let res = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("id", AttributeValue::S(format!("slot#{k}#{sub}")))
            .item("token", AttributeValue::S(token.to_string()))
            .item("until", AttributeValue::N((now + lease.as_millis() as i64).to_string()))
            .condition_expression("attribute_not_exists(id) OR #u < :now")
            .expression_attribute_names("#u", "until")
            .expression_attribute_values(":now", AttributeValue::N(now.to_string()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match res {
            Ok(_) => Ok(Ok(())),
            Err(e) if e.as_service_error().and_then(|s| s.code()) == Some("ConditionalCheckFailedException") => {
                let held = match e.as_service_error() {
                    Some(PutItemError::ConditionalCheckFailedException(c)) => until_of(c.item()),
                    _ => None,
                };
                Ok(Err(held))
            }
            Err(e) => Err(self.error("PutItem", e)),
        }
    }
}

#[async_trait]
impl LimitStore for DynamoLimits {
    async fn admit(
        &self,
        sub: &SubscriptionId,
        max_in_flight: Option<u32>,
        interval: Option<Duration>,
        lease: Duration,
    ) -> StoreResult<Admission> {
        let now = chrono::Utc::now().timestamp_millis();
        let token = uuid::Uuid::new_v4().simple().to_string();
        let mut slot = None;
        if let Some(max) = max_in_flight.filter(|m| *m > 0) {
            let start = rand::thread_rng().gen_range(0..max);
            let mut soonest = i64::MAX;
            for i in 0..max.min(SLOT_TRIES) {
                let k = (start + i) % max;
                match self.take_slot(sub, k, &token, now, lease).await? {
                    Ok(()) => {
                        slot = Some(k);
                        break;
                    }
                    Err(until) => soonest = soonest.min(until.unwrap_or(now + 100)),
                }
            }
            if slot.is_none() {
                // Until the soonest lease could end, at most SLOT_RETRY (a
                // request usually ends long before its lease).
                let wait = Duration::from_millis((soonest - now).max(50) as u64).min(shared::ports::SLOT_RETRY);
                return Ok(Admission::Wait(wait));
            }
        }
        let granted = Lease { subscription_id: sub.clone(), slot, token };
        if let Some(i) = interval {
            let res = self
                .client
                .put_item()
                .table_name(&self.table)
                .item("id", AttributeValue::S(format!("rate#{sub}")))
                .item("until", AttributeValue::N((now + i.as_millis() as i64).to_string()))
                .condition_expression("attribute_not_exists(id) OR #u <= :now")
                .expression_attribute_names("#u", "until")
                .expression_attribute_values(":now", AttributeValue::N((now + rate_tolerance(i)).to_string()))
                .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
                .send()
                .await;
            match res {
                Ok(_) => {}
                Err(e) if e.as_service_error().and_then(|s| s.code()) == Some("ConditionalCheckFailedException") => {
                    let next = match e.as_service_error() {
                        Some(PutItemError::ConditionalCheckFailedException(c)) => until_of(c.item()),
                        _ => None,
                    };
                    // Not yet: the slot goes back at once.
                    self.release(&granted).await?;
                    let wait = next.map_or(i.as_millis() as i64, |n| n - now).max(1);
                    return Ok(Admission::Wait(Duration::from_millis(wait as u64)));
                }
                Err(e) => {
                    self.release(&granted).await?;
                    return Err(self.error("PutItem", e));
                }
            }
        }
        Ok(Admission::Granted(granted))
    }

    async fn book_starts(&self, sub: &SubscriptionId, interval: Duration, count: u32) -> StoreResult<Duration> {
        let interval = shared::bounds::start_interval_on(interval, shared::bounds::AWS_MAX_RATE_LIMIT);
        let span = interval.as_millis() as i64 * i64::from(count.max(1));
        // The next free start as last seen: unknown at first (then the item
        // is assumed free or past), then what a failed condition returned.
        let mut seen: Option<i64> = None;
        for _ in 0..BOOK_TRIES {
            let now = chrono::Utc::now().timestamp_millis();
            let first = shared::bounds::first_start(now, seen, interval);
            let req = self
                .client
                .put_item()
                .table_name(&self.table)
                .item("id", AttributeValue::S(format!("rate#{sub}")))
                .item("until", AttributeValue::N((first + span).to_string()))
                .expression_attribute_names("#u", "until")
                .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
            let req = match seen {
                // Replaces exactly the next start it was computed from.
                Some(n) => req
                    .condition_expression("#u = :seen")
                    .expression_attribute_values(":seen", AttributeValue::N(n.to_string())),
                None => req.condition_expression("attribute_not_exists(id) OR #u <= :now").expression_attribute_values(
                    ":now",
                    AttributeValue::N((now + rate_tolerance(interval)).to_string()),
                ),
            };
            match req.send().await {
                Ok(_) => return Ok(Duration::from_millis((first - now).max(0) as u64)),
                Err(e) if e.as_service_error().and_then(|s| s.code()) == Some("ConditionalCheckFailedException") => {
                    seen = match e.as_service_error() {
                        Some(PutItemError::ConditionalCheckFailedException(c)) => until_of(c.item()),
                        _ => None,
                    };
                }
                Err(e) => return Err(self.error("PutItem", e)),
            }
        }
        Err(StoreError::other(format!(
            "the rate item of {sub} changed under {BOOK_TRIES} bookings in a row; the jobs are tried again"
        )))
    }

    async fn release(&self, lease: &Lease) -> StoreResult<()> {
        let Some(k) = lease.slot else { return Ok(()) };
        let res = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("id", AttributeValue::S(format!("slot#{k}#{}", lease.subscription_id)))
            .condition_expression("#t = :t")
            .expression_attribute_names("#t", "token")
            .expression_attribute_values(":t", AttributeValue::S(lease.token.clone()))
            .send()
            .await;
        match res {
            // Taken over after its lease ran out: nothing of ours to give back.
            Err(e) if e.as_service_error().and_then(|s| s.code()) == Some("ConditionalCheckFailedException") => Ok(()),
            Err(e) => Err(self.error("DeleteItem", e)),
            Ok(_) => Ok(()),
        }
    }
}
