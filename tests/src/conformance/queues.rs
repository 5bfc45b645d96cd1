//! The job queues: SQS semantics (visibility, delays, receive counts, the
//! dead-letter queue).

use super::*;

// ------------------------------------------------------------------ queues

pub(super) const LONG: Duration = Duration::from_secs(60);
pub(super) const SHORT: Duration = Duration::from_secs(1);
/// A little more than [`SHORT`], for the visibility to run out.
pub(super) const PAST_SHORT: Duration = Duration::from_millis(1600);

pub(super) async fn send(q: &dyn JobQueue, bodies: &[&str]) {
    let msgs: Vec<Outgoing> = bodies.iter().map(|b| out(b, Duration::ZERO, None)).collect();
    q.send(&msgs).await.unwrap();
}

pub(super) fn out(body: &str, delay: Duration, group: Option<&str>) -> Outgoing {
    Outgoing { body: body.to_string(), delay, group: group.map(str::to_string) }
}

/// Receives until `want` messages came or `secs` passed (emulators and SQS
/// may return fewer than are visible on one short poll).
pub(super) async fn receive_n(q: &dyn JobQueue, want: usize, visibility: Duration, secs: u64) -> Vec<Received> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    let mut got = Vec::new();
    while got.len() < want && tokio::time::Instant::now() < deadline {
        let batch = q.receive(want - got.len(), visibility).await.unwrap();
        assert!(batch.len() <= want - got.len(), "receive returned more than asked for");
        if batch.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        got.extend(batch);
    }
    got
}

/// One message, received within 5 s; panics with `what` otherwise.
pub(super) async fn receive_one(q: &dyn JobQueue, visibility: Duration, what: &str) -> Received {
    receive_n(q, 1, visibility, 5).await.pop().unwrap_or_else(|| panic!("no message received within 5 s: {what}"))
}

pub(super) fn bodies(msgs: &[Received]) -> Vec<String> {
    let mut b: Vec<String> = msgs.iter().map(|m| m.body.clone()).collect();
    b.sort();
    b
}

/// Sent messages are received once each (count 1), stay invisible while
/// held, and are gone once deleted.
pub async fn queue_send_receive_delete(s: &Stores) {
    let q = &**s.deliveries.raw();
    let body = r#"{"saga_id":"sg_1","attempt":1,"note":"ünïcode & <xml>"}"#;
    send(q, &[body, "b", "c"]).await;
    let got = receive_n(q, 3, LONG, 5).await;
    assert_eq!(bodies(&got), vec!["b".to_string(), "c".into(), body.into()]);
    assert!(got.iter().all(|m| m.receive_count == 1), "{got:?}");
    assert!(q.receive(10, LONG).await.unwrap().is_empty(), "held messages must be invisible");
    assert_eq!(q.depth().await.unwrap(), shared::ports::QueueDepth { visible: 0, not_visible: 3, dead: 0 });
    q.delete(&got.iter().map(|m| m.receipt.clone()).collect::<Vec<_>>()).await.unwrap();
    q.delete(&[]).await.unwrap();
    assert_eq!(q.depth().await.unwrap(), shared::ports::QueueDepth::default());
}

/// A detached delete (the caller does not wait for it) deletes what it
/// names and nothing else: the queue is empty of those soon after, and a
/// message it did not name is still there.
pub async fn queue_delete_detached_deletes_without_waiting(s: &Stores) {
    let q = s.deliveries.raw().clone();
    send(&*q, &["gone-1", "gone-2", "kept"]).await;
    let got = receive_n(&*q, 3, SHORT, 5).await;
    assert_eq!(got.len(), 3, "{got:?}");
    let gone: Vec<String> = got.iter().filter(|m| m.body.starts_with("gone")).map(|m| m.receipt.clone()).collect();
    q.clone().delete_detached(gone);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let d = q.depth().await.unwrap();
        if d.visible + d.not_visible == 1 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the detached delete did not happen within 10 s: {d:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(PAST_SHORT).await;
    let left = receive_n(&*q, 1, LONG, 5).await;
    assert_eq!(bodies(&left), vec!["kept".to_string()], "only the named messages are deleted");
    q.delete(&left.iter().map(|m| m.receipt.clone()).collect::<Vec<_>>()).await.unwrap();
}

/// `receive` never returns more than `max`; sends and receives of more than
/// one SQS batch (10) work.
pub async fn queue_receive_respects_max(s: &Stores) {
    let q = &**s.deliveries.raw();
    let names: Vec<String> = (0..25).map(|i| format!("m{i:02}")).collect();
    send(q, &names.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let first = q.receive(12, LONG).await.unwrap();
    assert!(!first.is_empty() && first.len() <= 12, "got {}", first.len());
    let mut all = first;
    all.extend(receive_n(q, 25 - all.len(), LONG, 10).await);
    let mut want = names.clone();
    want.sort();
    assert_eq!(bodies(&all), want);
    q.delete(&all.iter().map(|m| m.receipt.clone()).collect::<Vec<_>>()).await.unwrap();
    assert_eq!(q.depth().await.unwrap(), shared::ports::QueueDepth::default());
}

/// A delayed message is invisible (and counted as not visible) until its
/// delay has passed.
pub async fn queue_delay(s: &Stores) {
    let q = &**s.retries.raw();
    q.send(&[out("later", Duration::from_secs(2), None), out("now", Duration::ZERO, None)]).await.unwrap();
    let got = receive_n(q, 1, LONG, 5).await;
    assert_eq!(bodies(&got), ["now"]);
    assert!(q.receive(10, LONG).await.unwrap().is_empty(), "delayed message received early");
    let d = q.depth().await.unwrap();
    assert_eq!((d.visible, d.not_visible), (0, 2), "{d:?}");
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let later = receive_one(q, LONG, "the delayed message after its delay").await;
    assert_eq!((later.body.as_str(), later.receive_count), ("later", 1));
}

/// A message not deleted before its visibility timeout ends is received
/// again, with its receive count one higher; deleting with the newest
/// receipt removes it.
pub async fn queue_visibility_timeout_redelivers(s: &Stores) {
    let q = &**s.deliveries.raw();
    send(q, &["job"]).await;
    let first = receive_one(q, SHORT, "the message sent").await;
    assert_eq!(first.receive_count, 1);
    assert!(q.receive(1, SHORT).await.unwrap().is_empty());
    tokio::time::sleep(PAST_SHORT).await;
    let second = receive_one(q, SHORT, "the message again after its visibility timeout").await;
    assert_eq!((second.body.as_str(), second.receive_count), ("job", 2));
    q.delete(std::slice::from_ref(&second.receipt)).await.unwrap();
    tokio::time::sleep(PAST_SHORT).await;
    assert!(q.receive(1, SHORT).await.unwrap().is_empty(), "deleted message came back");
    assert_eq!(q.depth().await.unwrap(), shared::ports::QueueDepth::default());
}

/// A worker whose lease ran out cannot delete (or hide) the message another
/// worker now holds: its receipt is stale and ignored.
pub async fn queue_stale_receipt_cannot_delete(s: &Stores) {
    let q = &**s.deliveries.raw();
    send(q, &["job"]).await;
    let first = receive_one(q, SHORT, "the message sent").await;
    tokio::time::sleep(PAST_SHORT).await;
    let second = receive_one(q, SHORT, "the message again after its visibility timeout").await;
    assert_eq!(second.receive_count, 2);
    q.delete(std::slice::from_ref(&first.receipt)).await.unwrap();
    q.change_visibility(&first.receipt, LONG).await.unwrap();
    tokio::time::sleep(PAST_SHORT).await;
    let third = receive_one(q, LONG, "the message, which a stale receipt deleted or hid").await;
    assert_eq!((third.body.as_str(), third.receive_count), ("job", 3));
    q.delete(std::slice::from_ref(&third.receipt)).await.unwrap();
}

/// `change_visibility` makes a held message visible again after the given
/// delay (0: at once); an unknown receipt is ignored.
pub async fn queue_change_visibility(s: &Stores) {
    let q = &**s.deliveries.raw();
    send(q, &["job"]).await;
    let first = receive_one(q, LONG, "the message sent").await;
    q.change_visibility(&first.receipt, Duration::ZERO).await.unwrap();
    let second = receive_one(q, LONG, "the message released with visibility 0").await;
    assert_eq!(second.receive_count, 2);
    q.change_visibility(&second.receipt, SHORT).await.unwrap();
    assert!(q.receive(1, LONG).await.unwrap().is_empty());
    tokio::time::sleep(PAST_SHORT).await;
    let third = receive_one(q, LONG, "the message after its changed visibility ran out").await;
    assert_eq!(third.receive_count, 3);
    q.delete(std::slice::from_ref(&third.receipt)).await.unwrap();
    q.change_visibility(&third.receipt, SHORT).await.unwrap();
}

/// Depth counts visible, held or delayed, and dead messages.
pub async fn queue_depth_counts(s: &Stores) {
    let q = &**s.deliveries.raw();
    assert_eq!(q.depth().await.unwrap(), shared::ports::QueueDepth::default());
    // Grouped, as delivery jobs are (a fair queue's MessageGroupId on SQS).
    q.send(&[out("a", Duration::ZERO, Some("sub_a")), out("b", Duration::ZERO, Some("sub_b")), out("c", LONG, None)])
        .await
        .unwrap();
    assert_eq!(q.depth().await.unwrap(), shared::ports::QueueDepth { visible: 2, not_visible: 1, dead: 0 });
    let got = receive_n(q, 1, LONG, 5).await;
    assert_eq!(got.len(), 1);
    assert_eq!(q.depth().await.unwrap(), shared::ports::QueueDepth { visible: 1, not_visible: 2, dead: 0 });
    // A delay longer than SQS's 900 s is capped (callers re-delay): still held.
    s.retries.raw().send(&[out("far", Duration::from_secs(3600), None)]).await.unwrap();
    assert_eq!(s.retries.depth().await.unwrap(), shared::ports::QueueDepth { visible: 0, not_visible: 1, dead: 0 });
}

/// A message received too many times without being deleted stops being
/// received and lands in the queue's dead-letter queue (`dead_jobs` for the
/// deliveries queue), body intact. The limit differs per backend (the
/// template's maxReceiveCount, SQLite's `DELIVERY_MAX_RECEIVES`); both are
/// at most 10.
pub async fn queue_dead_letters_after_max_receives(s: &Stores) {
    let q = &**s.deliveries.raw();
    send(q, &["poison"]).await;
    let mut counts = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "message neither received nor dead-lettered; counts {counts:?}"
        );
        let got = q.receive(1, Duration::ZERO).await.unwrap();
        if let Some(m) = got.first() {
            counts.push(m.receive_count);
            assert!(counts.len() <= 10, "received more than 10 times: {counts:?}");
            continue;
        }
        let d = q.depth().await.unwrap();
        if d.dead == 1 && d.visible == 0 && d.not_visible == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!counts.is_empty());
    assert_eq!(counts, (1..=counts.len() as u32).collect::<Vec<_>>(), "receive counts must go up by one");
    let dead = receive_one(&**s.dead_jobs.raw(), LONG, "the message in the dead-letter queue").await;
    assert_eq!(dead.body, "poison");
}
