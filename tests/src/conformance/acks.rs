//! Conformance of [`shared::ports::AckStore`] and of the pull index
//! ([`shared::ports::SagaStore::page_for_pull`]): the latest
//! acknowledgement of a (subscription, webhook id) replaces the one before
//! and an expired one is absent; the pull index lists only the sagas routing
//! gave a pull key, one subscription's, in key order, paged.

use chrono::{Duration, SubsecRound, Utc};
use shared::ack::{AckStatus, Acknowledgement};
use shared::context::Stores;
use shared::ids::{random_token, SubscriptionId, WebhookId};

use super::saga;

fn ack(sub: &SubscriptionId, webhook: &str, status: AckStatus, ttl: Duration) -> Acknowledgement {
    let now = Utc::now().round_subsecs(3);
    Acknowledgement {
        subscription_id: sub.clone(),
        webhook_id: WebhookId::new(webhook),
        attempt: Some(1),
        status,
        reason: (status == AckStatus::Failed).then(|| "ledger closed".to_string()),
        reference: Some("ref-1".into()),
        received_at: now,
        expires_at: now + ttl,
    }
}

/// Stored and read back equal; a later one replaces it; another
/// subscription's or webhook id's is another record; expired: absent.
pub async fn acknowledgements_keep_the_latest_per_delivery(s: &Stores) {
    let (a, b) = (SubscriptionId::new(random_token("sub_")), SubscriptionId::new(random_token("sub_")));
    let w = "msg_0123456789abcdef0123456789";
    let first = ack(&a, w, AckStatus::Processed, Duration::days(1));
    s.acks.put(&first).await.unwrap();
    assert_eq!(s.acks.get(&a, &WebhookId::new(w)).await.unwrap(), Some(first));
    let later = ack(&a, w, AckStatus::Failed, Duration::days(1));
    s.acks.put(&later).await.unwrap();
    assert_eq!(s.acks.get(&a, &WebhookId::new(w)).await.unwrap(), Some(later), "the latest replaces it");
    assert_eq!(s.acks.get(&b, &WebhookId::new(w)).await.unwrap(), None, "another subscription's is not it");
    let other = "msg_ffffffffffffffffffffffffff";
    assert_eq!(s.acks.get(&a, &WebhookId::new(other)).await.unwrap(), None);
    s.acks.put(&ack(&b, other, AckStatus::Processed, Duration::seconds(-1))).await.unwrap();
    assert_eq!(s.acks.get(&b, &WebhookId::new(other)).await.unwrap(), None, "expired: absent");
}

/// Only sagas with a pull key are listed, one subscription's, in key
/// order, over pages, each once.
pub async fn the_pull_index_lists_one_subscriptions_keyed_sagas_in_order(s: &Stores) {
    let tag = random_token("");
    let (sub, other) = (format!("sub_pull_{tag}"), format!("sub_other_{tag}"));
    let keyed = |i: u32, key: &str, subscription: &str| shared::saga::Saga {
        pull_key: Some(key.to_string()),
        ..saga(&format!("sag_{tag}_{i}"), &format!("evt-{tag}-{i}"), subscription)
    };
    let sagas = vec![
        keyed(1, "0000000000002.0000000000001.b", &sub),
        keyed(2, "0000000000001.0000000000001.a", &sub),
        keyed(3, "0000000000003.0000000000001.c", &sub),
        keyed(4, "0000000000001.0000000000001.z", &other),
        saga(&format!("sag_{tag}_5"), &format!("evt-{tag}-5"), &sub),
    ];
    assert!(s.sagas.create(&sagas).await.unwrap().iter().all(|c| *c));
    let id = SubscriptionId::new(sub.as_str());
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..10 {
        let page = s.sagas.page_for_pull(&id, 2, after.as_deref()).await.unwrap();
        assert!(page.items.len() <= 2);
        seen.extend(page.items.iter().map(|p| (p.pull_key.clone(), p.event_id.to_string(), p.saga_id.to_string())));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    let events: Vec<&str> = seen.iter().map(|(_, e, _)| e.as_str()).collect();
    assert_eq!(
        events,
        [format!("evt-{tag}-2"), format!("evt-{tag}-1"), format!("evt-{tag}-3")],
        "key order, only the keyed sagas of this subscription: {seen:?}"
    );
    assert_eq!(seen[0].2, format!("sag_{tag}_2"));
    let last = seen.last().unwrap().0.clone();
    assert!(s.sagas.page_for_pull(&id, 2, Some(&last)).await.unwrap().items.is_empty(), "nothing after the last");
    let stored = s.sagas.get(&sagas[0].event_id, &sagas[0].id).await.unwrap().unwrap();
    assert_eq!(stored.pull_key, sagas[0].pull_key, "the key round-trips");
}
