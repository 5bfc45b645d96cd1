//! Typed queues and the one consumer layer. A [`Queue<M>`] sends and receives
//! `M` (a [`crate::message`] message) over a [`JobQueue`] port, so messages are
//! serialized in one place; [`consume`] and [`consume_each`] turn "handle
//! these messages" into "which messages are done", which the Lambda handlers
//! map to partial-batch failures and `hookline serve` to the receipts it
//! deletes. A message that cannot be read is never done: it is received
//! again until its queue moves it to the dead-letter queue.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::bounds::{all_bounded, MAX_STORE_IN_FLIGHT};
use crate::ports::{JobQueue, Outgoing, QueueDepth, Received, StoreResult};

/// What a queue message says about itself beyond its body.
pub trait Message: Serialize + DeserializeOwned {
    /// The group it belongs to ([`Outgoing::group`]); none by default.
    fn group(&self) -> Option<&str> {
        None
    }
}

/// A queue of `M` messages (JSON) on a [`JobQueue`].
pub struct Queue<M> {
    raw: Arc<dyn JobQueue>,
    _message: PhantomData<fn() -> M>,
}

impl<M> Clone for Queue<M> {
    fn clone(&self) -> Self {
        Queue { raw: self.raw.clone(), _message: PhantomData }
    }
}

impl<M: Message> Queue<M> {
    /// The typed view of `raw`.
    pub fn new(raw: Arc<dyn JobQueue>) -> Self {
        Queue { raw, _message: PhantomData }
    }

    /// The untyped port (its conformance tests, depth and receipts).
    pub fn raw(&self) -> &Arc<dyn JobQueue> {
        &self.raw
    }

    /// Sends each message after its delay.
    pub async fn send(&self, messages: &[(M, Duration)]) -> StoreResult<()> {
        if messages.is_empty() {
            return Ok(());
        }
        let out: Vec<Outgoing> = messages.iter().map(|(m, d)| outgoing(m, *d)).collect();
        self.raw.send(&out).await
    }

    /// Sends messages to be received at once.
    pub async fn send_now(&self, messages: &[M]) -> StoreResult<()> {
        if messages.is_empty() {
            return Ok(());
        }
        let out: Vec<Outgoing> = messages.iter().map(|m| outgoing(m, Duration::ZERO)).collect();
        self.raw.send(&out).await
    }

    /// Message counts (for metrics).
    pub async fn depth(&self) -> StoreResult<QueueDepth> {
        self.raw.depth().await
    }
}

/// A message as JSON with its group. Hookline's messages are plain data
/// that always serialize; a failure here is a bug, not an input error.
fn outgoing<M: Message>(m: &M, delay: Duration) -> Outgoing {
    Outgoing {
        body: serde_json::to_string(m).expect("queue messages serialize"),
        delay,
        group: m.group().map(str::to_string),
    }
}

/// One received message: its body, and how often the queue has handed it out.
#[derive(Debug, Clone, Copy)]
pub struct Delivered<'a> {
    /// The raw body.
    pub body: &'a str,
    /// Receives so far, this one included.
    pub receive_count: u32,
}

impl<'a> From<&'a Received> for Delivered<'a> {
    fn from(r: &'a Received) -> Self {
        Delivered { body: &r.body, receive_count: r.receive_count }
    }
}

/// Decodes a batch and hands the readable messages, with their receive
/// counts, to `handle` in one call; returns, per input message, whether it
/// is done (its handler said so). Unreadable messages are logged and not
/// done, so they end in the dead-letter queue.
pub async fn consume<M, F, Fut>(queue: &str, batch: &[Delivered<'_>], handle: F) -> Vec<bool>
where
    M: DeserializeOwned,
    F: FnOnce(Vec<(M, u32)>) -> Fut,
    Fut: Future<Output = Vec<bool>>,
{
    let mut readable = Vec::with_capacity(batch.len());
    let mut positions = Vec::with_capacity(batch.len());
    for (i, d) in batch.iter().enumerate() {
        match serde_json::from_str::<M>(d.body) {
            Ok(m) => {
                readable.push((m, d.receive_count));
                positions.push(i);
            }
            Err(e) => tracing::error!(queue, error = %e, "unreadable message; left for the dead-letter queue"),
        }
    }
    let mut done = vec![false; batch.len()];
    if !readable.is_empty() {
        for (i, d) in positions.into_iter().zip(handle(readable).await) {
            done[i] = d;
        }
    }
    done
}

/// Counts and logs the messages of `batch` not `done` at their queue's last
/// receive ([`crate::bounds::QUEUE_MAX_RECEIVES`]): the queue now moves
/// them to its dead-letter queue with nothing recorded for them (their
/// attempt, or its refusal, could not be stored on any receive). A dead
/// saga's job is sent to that queue explicitly and is not counted here, so
/// the count (metric `JobsAbandoned`, alarmed) is exactly the jobs that
/// need a redrive.
pub fn count_abandoned(metrics: &crate::metrics::Metrics, queue: &str, batch: &[Delivered<'_>], done: &[bool]) {
    for (d, ok) in batch.iter().zip(done) {
        if !*ok && d.receive_count >= crate::bounds::QUEUE_MAX_RECEIVES {
            metrics.jobs_abandoned.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::error!(
                queue,
                receive_count = d.receive_count,
                "a job failed its last receive with nothing recorded; it goes to the dead-letter queue: redrive it once the cause is fixed"
            );
        }
    }
}

/// [`consume`] with a handler per message and its receive count, run
/// concurrently (at most [`MAX_STORE_IN_FLIGHT`] at once): done when it
/// returns `Ok`; an error is logged and the message is received again
/// later.
pub async fn consume_each<M, E, F, Fut>(queue: &str, batch: &[Delivered<'_>], handle: F) -> Vec<bool>
where
    M: DeserializeOwned,
    E: std::fmt::Display,
    F: Fn(M, u32) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let handle = &handle;
    consume(queue, batch, |messages: Vec<(M, u32)>| async move {
        let runs = messages
            .into_iter()
            .map(|(m, receives)| async move {
                match handle(m, receives).await {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::error!(queue, error = %e, "handling a message failed; it will be received again");
                        false
                    }
                }
            })
            .collect();
        all_bounded(runs, MAX_STORE_IN_FLIGHT).await
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(bodies: &[&'static str]) -> Vec<Delivered<'static>> {
        bodies.iter().map(|b| Delivered { body: b, receive_count: 2 }).collect()
    }

    #[tokio::test]
    async fn unreadable_messages_are_never_done_and_the_rest_keep_their_places() {
        let b = batch(&["1", "nope", "3"]);
        let done = consume::<u32, _, _>("q", &b, |m| async move {
            assert_eq!(m, vec![(1, 2), (3, 2)]);
            vec![false, true]
        })
        .await;
        assert_eq!(done, vec![false, false, true]);
    }

    #[tokio::test]
    async fn each_message_is_done_when_its_handler_succeeds() {
        let b = batch(&["1", "2", "x", "4"]);
        let done = consume_each::<u32, String, _, _>("q", &b, |n, receives| async move {
            assert_eq!(receives, 2);
            if n % 2 == 0 {
                Ok(())
            } else {
                Err(format!("odd {n}"))
            }
        })
        .await;
        assert_eq!(done, vec![false, true, false, true]);
    }
}
