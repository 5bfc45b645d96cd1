//! The SQS implementation of [`JobQueue`]: delay, visibility timeout,
//! receive count and dead-lettering are SQS's own (the queue's
//! `RedrivePolicy` moves a message to its DLQ after `maxReceiveCount`
//! receives). Sends and deletes are batched ten at a time, the SQS maximum,
//! because requests are what SQS bills.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::error::{DisplayErrorContext, SdkError};
use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName,
    SendMessageBatchRequestEntry,
};
use aws_sdk_sqs::Client;

use shared::bounds::{all_bounded, MAX_STORE_IN_FLIGHT};
use shared::error::StoreError;
use shared::ports::{JobQueue, Outgoing, QueueDepth, Received, StoreResult};

/// Most entries SQS takes in one batch request, and most messages one
/// `ReceiveMessage` returns.
pub const SQS_BATCH: usize = 10;

/// Longest per-message delay SQS supports; longer waits are re-delayed by
/// the caller (the retry timer carries its due time).
pub const MAX_DELAY: Duration = Duration::from_secs(900);

/// Longest visibility timeout SQS supports (12 hours).
pub const MAX_VISIBILITY: Duration = Duration::from_secs(43_200);

fn backend<E>(op: &str, queue: &str, e: SdkError<E, aws_sdk_sqs::config::http::HttpResponse>) -> StoreError
where
    E: std::error::Error + aws_sdk_sqs::error::ProvideErrorMetadata + Send + Sync + 'static,
{
    crate::sdk::store_error(format!("sqs {op} on {queue}: {}", DisplayErrorContext(&e)), e)
}

/// Whole seconds for SQS, rounded up (a message must never become visible
/// before its delay) and capped at `max`.
fn seconds(d: Duration, max: Duration) -> i32 {
    let d = d.min(max);
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    i32::try_from(secs).unwrap_or(i32::MAX)
}

/// One SQS queue, optionally with the DLQ its redrive policy names (only
/// read, for [`QueueDepth::dead`]).
#[derive(Clone)]
pub struct SqsQueue {
    client: Client,
    queue_url: String,
    dlq_url: Option<String>,
}

impl SqsQueue {
    /// Polls of at most ten, each waiting up to `wait` (long polling,
    /// which asks every SQS server, where a short poll (`wait` 0) samples a
    /// few and can answer empty while messages wait), until `max` messages
    /// are taken or a poll comes back empty.
    pub async fn receive_waiting(
        &self,
        max: usize,
        visibility: Duration,
        wait: Duration,
    ) -> StoreResult<Vec<Received>> {
        let mut out = Vec::new();
        while out.len() < max {
            let want = (max - out.len()).min(SQS_BATCH);
            let page = self
                .client
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(want as i32)
                .visibility_timeout(seconds(visibility, MAX_VISIBILITY))
                .wait_time_seconds(wait.as_secs().min(20) as i32)
                .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
                .send()
                .await
                .map_err(|e| backend("ReceiveMessage", &self.queue_url, e))?;
            let messages = page.messages();
            if messages.is_empty() {
                break;
            }
            for m in messages {
                let Some(receipt) = m.receipt_handle() else { continue };
                let receive_count = m
                    .attributes()
                    .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(1);
                out.push(Received {
                    body: m.body().unwrap_or_default().to_string(),
                    receipt: receipt.to_string(),
                    receive_count,
                });
            }
        }
        Ok(out)
    }

    /// The queue at `queue_url`; `dlq_url` is its dead-letter queue, if the
    /// depth should report it. No network call happens here.
    pub fn new(client: Client, queue_url: impl Into<String>, dlq_url: Option<String>) -> Self {
        SqsQueue { client, queue_url: queue_url.into(), dlq_url }
    }

    /// The queue's URL.
    pub fn url(&self) -> &str {
        &self.queue_url
    }

    /// Sends one message with string message attributes (e.g. the ingest
    /// function puts the rejection reason in `hookline-error` on what it
    /// sends to the ingest DLQ).
    pub async fn send_with_attributes(&self, body: &str, attrs: &[(&str, &str)]) -> StoreResult<()> {
        let mut req = self.client.send_message().queue_url(&self.queue_url).message_body(body);
        for (name, value) in attrs {
            let v = MessageAttributeValue::builder()
                .data_type("String")
                .string_value(*value)
                .build()
                .map_err(|e| StoreError::other(format!("sqs message attribute {name}: {e}")))?;
            req = req.message_attributes(*name, v);
        }
        req.send().await.map_err(|e| backend("SendMessage", &self.queue_url, e))?;
        Ok(())
    }

    async fn send_chunk(&self, chunk: &[Outgoing]) -> StoreResult<()> {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, m)| {
                SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(&m.body)
                    .delay_seconds(seconds(m.delay, MAX_DELAY))
                    // On a standard queue this makes it a fair queue.
                    .set_message_group_id(m.group.clone())
                    .build()
                    .map_err(|e| StoreError::other(format!("sqs batch entry: {e}")))
            })
            .collect::<StoreResult<Vec<_>>>()?;
        let out = self
            .client
            .send_message_batch()
            .queue_url(&self.queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| backend("SendMessageBatch", &self.queue_url, e))?;
        if let Some(f) = out.failed().first() {
            // Resending the whole batch may duplicate the ones that went
            // through; every consumer is idempotent (at-least-once).
            return Err(StoreError::other(format!(
                "sqs SendMessageBatch on {}: {} of {} entries failed, e.g. {}: {}",
                self.queue_url,
                out.failed().len(),
                chunk.len(),
                f.code(),
                f.message().unwrap_or_default()
            )));
        }
        Ok(())
    }

    async fn delete_chunk(&self, chunk: &[String]) -> StoreResult<()> {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, r)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(r)
                    .build()
                    .map_err(|e| StoreError::other(format!("sqs batch entry: {e}")))
            })
            .collect::<StoreResult<Vec<_>>>()?;
        let out = self
            .client
            .delete_message_batch()
            .queue_url(&self.queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| backend("DeleteMessageBatch", &self.queue_url, e))?;
        // A receipt that is no longer valid names a message someone else
        // deleted or that expired: the port ignores stale receipts.
        if let Some(f) = out.failed().iter().find(|f| f.code() != "ReceiptHandleIsInvalid") {
            return Err(StoreError::other(format!(
                "sqs DeleteMessageBatch on {}: {}: {}",
                self.queue_url,
                f.code(),
                f.message().unwrap_or_default()
            )));
        }
        Ok(())
    }

    async fn approximate(&self, url: &str, names: &[QueueAttributeName]) -> StoreResult<Vec<u64>> {
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(url)
            .set_attribute_names(Some(names.to_vec()))
            .send()
            .await
            .map_err(|e| backend("GetQueueAttributes", url, e))?;
        let attrs = out.attributes();
        Ok(names.iter().map(|n| attrs.and_then(|a| a.get(n)).and_then(|v| v.parse().ok()).unwrap_or(0)).collect())
    }
}

#[async_trait]
impl JobQueue for SqsQueue {
    /// `SendMessageBatch` in chunks of ten (sent concurrently); each delay is
    /// rounded up to whole seconds and capped at 900 s.
    async fn send(&self, messages: &[Outgoing]) -> StoreResult<()> {
        let results =
            all_bounded(messages.chunks(SQS_BATCH).map(|c| self.send_chunk(c)).collect(), MAX_STORE_IN_FLIGHT).await;
        results.into_iter().collect()
    }

    /// Short polls (`WaitTimeSeconds` 0) of at most ten until `max` messages
    /// are taken or a poll comes back empty.
    async fn receive(&self, max: usize, visibility: Duration) -> StoreResult<Vec<Received>> {
        self.receive_waiting(max, visibility, Duration::ZERO).await
    }

    /// `DeleteMessageBatch` in chunks of ten; invalid receipts are ignored.
    async fn delete(&self, receipts: &[String]) -> StoreResult<()> {
        let results =
            all_bounded(receipts.chunks(SQS_BATCH).map(|c| self.delete_chunk(c)).collect(), MAX_STORE_IN_FLIGHT).await;
        results.into_iter().collect()
    }

    /// `ChangeMessageVisibility` (rounded up to seconds, at most 12 h); a
    /// stale receipt or a message no longer in flight is ignored.
    async fn change_visibility(&self, receipt: &str, delay: Duration) -> StoreResult<()> {
        let res = self
            .client
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(receipt)
            .visibility_timeout(seconds(delay, MAX_VISIBILITY))
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_receipt_handle_is_invalid() || s.is_message_not_inflight()) =>
            {
                Ok(())
            }
            Err(e) => Err(backend("ChangeMessageVisibility", &self.queue_url, e)),
        }
    }

    /// `GetQueueAttributes`: visible = ApproximateNumberOfMessages,
    /// not visible = …NotVisible + …Delayed, dead = the DLQ's
    /// ApproximateNumberOfMessages (0 without a DLQ).
    async fn pause_group(&self, _group: &str, _delay: Duration) -> StoreResult<u64> {
        // SQS has no such operation; its fair queues prefer quiet groups.
        Ok(0)
    }

    async fn depth(&self) -> StoreResult<QueueDepth> {
        let main = self.approximate(
            &self.queue_url,
            &[
                QueueAttributeName::ApproximateNumberOfMessages,
                QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
                QueueAttributeName::ApproximateNumberOfMessagesDelayed,
            ],
        );
        let dead = async {
            match &self.dlq_url {
                Some(url) => Ok(self
                    .approximate(url, &[QueueAttributeName::ApproximateNumberOfMessages])
                    .await?
                    .first()
                    .copied()
                    .unwrap_or(0)),
                None => Ok(0),
            }
        };
        let (main, dead) = futures_util::future::join(main, dead).await;
        let main = main?;
        let at = |i: usize| main.get(i).copied().unwrap_or(0);
        Ok(QueueDepth { visible: at(0), not_visible: at(1) + at(2), dead: dead? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_round_up_and_cap() {
        assert_eq!(seconds(Duration::ZERO, MAX_DELAY), 0);
        assert_eq!(seconds(Duration::from_millis(1), MAX_DELAY), 1);
        assert_eq!(seconds(Duration::from_secs(2), MAX_DELAY), 2);
        assert_eq!(seconds(Duration::from_millis(2001), MAX_DELAY), 3);
        assert_eq!(seconds(Duration::from_secs(3600), MAX_DELAY), 900);
        assert_eq!(seconds(Duration::MAX, MAX_VISIBILITY), 43_200);
    }
}
