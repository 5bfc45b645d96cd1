//! The port conformance suite (`hookline_tests::conformance`) on the AWS
//! backend: DynamoDB and SQS in the local emulator (moto server; `make test`
//! starts it and sets `AWS_ENDPOINT_URL`), every case on its own tables and
//! queues created from `template.yaml` under a fresh prefix.

use hookline_aws::AwsBackend;
use hookline_tests::strict::Strict;

/// A fresh backend on new tables and queues, its clients under the strict
/// checker (a request AWS would reject fails the case).
async fn fresh(tag: &str) -> (AwsBackend, Strict) {
    let strict = Strict::new();
    (strict.backend(tag).await, strict)
}

macro_rules! case {
    // Not a case on SQS: it documents that a delete with an old receipt
    // handle "will succeed, but the message might not be deleted" (moto does
    // delete it), so the guarantee is SQLite's alone and the port promises
    // nothing about it. On AWS a lease never runs out under a live worker
    // (the queue's visibility timeout is 6x the function timeout).
    (queue_stale_receipt_cannot_delete) => {};
    // The emulator does not serialize conditional writes to one item (moto
    // checks and writes without a lock: two of eight racing claims won),
    // while DynamoDB's single-item writes are atomic: here the condition is
    // checked by `idempotency_claims_one_after_another_one_wins` alone.
    (idempotency_claims_race_and_one_wins) => {};
    // The same for `UpdateItem ADD`: moto reads, adds and writes the item
    // without a lock, so concurrent adds can lose one; DynamoDB applies
    // each update to an item atomically. The sum of two writers' adds is
    // checked by `stats_two_writers_add_to_one_minute`, one after another.
    (stats_concurrent_adds_sum_up) => {};
    ($name:ident) => {
        #[tokio::test]
        async fn $name() {
            let (backend, strict) = fresh(stringify!($name)).await;
            hookline_tests::conformance::$name(&backend.stores).await;
            strict.assert_clean();
        }
    };
}

hookline_tests::for_each_conformance_case!(case);

/// Route-cache fills (`SubscriptionStore::get_many`, every container every
/// cache TTL) read subscriptions eventually consistent: half a read unit
/// each instead of one. Only `get`, the confirmation routing asks for
/// before it leaves a candidate out, is strongly consistent.
#[tokio::test]
async fn subscription_fills_read_eventually_consistent() {
    use shared::ports::SubscriptionStore;
    let sdk = hookline_tests::emulator::aws_config().await;
    let prefix = hookline_tests::emulator::fresh_prefix("sub_fills");
    let names = hookline_tests::emulator::create_resources_with(&sdk, &prefix).await;
    let meter = hookline_tests::metering::Meter::new();
    let store = hookline_aws::DynamoSubscriptions::new(
        meter.dynamodb_client(&sdk),
        names.subscriptions_table.clone(),
        std::sync::Arc::new(shared::keyring::Keyring::ephemeral()),
    );
    let subs: Vec<_> = (0..4).map(|i| hookline_tests::conformance::subscription(&format!("sub_f{i}"), 1)).collect();
    for s in &subs {
        store.create(s).await.unwrap();
    }
    let ids: Vec<_> = subs.iter().map(|s| s.id.clone()).collect();
    let units = |before: &hookline_tests::metering::MeterCounts| {
        let used = meter.snapshot().since(before);
        let u = &used.dynamodb[&("SubscriptionsTable".to_string(), "GetItem".to_string())];
        (u.requests, u.rru)
    };
    let before = meter.snapshot();
    assert_eq!(store.get_many(&ids).await.unwrap().into_iter().flatten().collect::<Vec<_>>(), subs);
    assert_eq!(units(&before), (4, 2.0), "4 eventually consistent reads of under 4 KB: half a unit each");
    let before = meter.snapshot();
    assert_eq!(store.get(&ids[0]).await.unwrap().as_ref(), Some(&subs[0]));
    assert_eq!(units(&before), (1, 1.0), "the confirmation is strongly consistent");
}

/// A page of `GET /v1/events` reads what the listing shows, not the
/// events' bodies: the indexes project each event's `summary`, so a page of
/// 10 events with 100 KB bodies reads no event (it was a `GetItem` each:
/// about 17 read units apiece) and its outcomes are one `BatchGetItem` of
/// the small outcome items (half a unit per event). Marking an outcome
/// writes one small item of EventOutcomesTable and never the event; an
/// outcome listing reads EventOutcomesTable's index alone.
#[tokio::test]
async fn event_pages_read_summaries_not_bodies() {
    use shared::event_search::{EventQuery, EventSummary, Outcome};
    use shared::ports::EventStore;
    let sdk = hookline_tests::emulator::aws_config().await;
    let prefix = hookline_tests::emulator::fresh_prefix("ev_pages");
    let names = hookline_tests::emulator::create_resources_with(&sdk, &prefix).await;
    let meter = hookline_tests::metering::Meter::new();
    let client = meter.dynamodb_client(&sdk);
    let order = hookline_aws::ordering::DynamoOrder::new(client.clone(), &names.order_table);
    let store = hookline_aws::DynamoEvents::new(
        client,
        names.events_table.clone(),
        names.event_outcomes_table.clone(),
        chrono::Duration::days(30),
        order,
    );
    // Bodies that do not deflate: 100 KB of pseudo-random bytes each.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let events: Vec<_> = (0..10)
        .map(|i| {
            let mut e = hookline_tests::conformance::event(&format!("evt_big{i}"), "order.created");
            e.partition_key = None;
            e.received_at += chrono::Duration::milliseconds(i);
            e.body = (0..100_000)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            e
        })
        .collect();
    assert!(store.insert(&events).await.unwrap().into_iter().all(|ok| ok));
    let used = |before: &hookline_tests::metering::MeterCounts| meter.snapshot().since(before).dynamodb;
    let units = |u: &std::collections::BTreeMap<(String, String), hookline_tests::metering::Units>,
                 t: &str,
                 op: &str| { u.get(&(t.to_string(), op.to_string())).cloned().unwrap_or_default() };

    let before = meter.snapshot();
    assert!(store.mark_outcome(&events[3].id, Outcome::Failed).await.unwrap());
    let u = used(&before);
    assert_eq!(units(&u, "EventsTable", "UpdateItem").requests, 0, "the event is never written: {u:?}");
    let mark = units(&u, "EventOutcomesTable", "UpdateItem");
    assert_eq!((mark.requests, mark.wru), (1, 1.0), "one small conditional write: {u:?}");
    assert_eq!(units(&u, "EventOutcomesTable[by_outcome]", "UpdateItem").wru, 1.0, "and its outcome index entry");
    assert!(!store.mark_outcome(&events[3].id, Outcome::Failed).await.unwrap(), "already failed");

    let before = meter.snapshot();
    let page = store.search(&EventQuery::default(), 10, None).await.unwrap();
    let u = used(&before);
    let want: Vec<EventSummary> =
        events.iter().rev().map(|e| EventSummary::of(e, (e.id == events[3].id).then_some(Outcome::Failed))).collect();
    assert_eq!(page.items, want);
    assert_eq!(units(&u, "EventsTable", "GetItem").requests, 0, "no event read: {u:?}");
    let read: f64 = u.values().map(|x| x.rru).sum();
    assert!(read <= 10.0, "a page of 10 reads about its summaries, {read} read units: {u:?}");
    let outcomes = units(&u, "EventOutcomesTable", "BatchGetItem");
    assert_eq!((outcomes.requests, outcomes.rru), (1, 5.0), "the page's outcomes in one BatchGetItem: {u:?}");

    let before = meter.snapshot();
    let failed = EventQuery { outcome: Some(Outcome::Failed), ..Default::default() };
    let page = store.search(&failed, 10, None).await.unwrap();
    let u = used(&before);
    assert_eq!(page.items, vec![EventSummary::of(&events[3], Some(Outcome::Failed))]);
    assert!(u.keys().all(|(t, _)| t.starts_with("EventOutcomesTable[")), "the outcome index alone: {u:?}");
}

/// `EVENT_LISTING` off: an event item carries no `time_bucket` or
/// `tenant_shard`, so it has no `by_time` or `tenant_shards` entry (its
/// write is the item's own unit, where the listing costs two more, as the
/// same event with the listing on shows), while a numbered event is still
/// listed by partition key, an outcome by outcome, and the listing by time
/// holds only the event written with it; and what a numbered event's
/// transaction costs.
#[tokio::test]
async fn without_the_listing_an_event_has_no_time_or_tenant_entries() {
    use shared::event_search::{EventQuery, Outcome};
    use shared::ports::EventStore;
    let sdk = hookline_tests::emulator::aws_config().await;
    let names =
        hookline_tests::emulator::create_resources_with(&sdk, &hookline_tests::emulator::fresh_prefix("no_listing"))
            .await;
    let meter = hookline_tests::metering::Meter::new();
    let client = meter.dynamodb_client(&sdk);
    let order = hookline_aws::ordering::DynamoOrder::new(client.clone(), &names.order_table);
    let store = |listing: bool| {
        hookline_aws::DynamoEvents::new(
            client.clone(),
            names.events_table.clone(),
            names.event_outcomes_table.clone(),
            chrono::Duration::days(30),
            order.clone(),
        )
        .with_listing(listing)
    };
    let (listed, unlisted) = (store(true), store(false));
    let entries = |s: &hookline_aws::DynamoEvents, e: shared::event::EventRecord| {
        let s = s.clone();
        let meter = &meter;
        async move {
            let before = meter.snapshot();
            assert_eq!(s.insert(std::slice::from_ref(&e)).await.unwrap(), vec![true]);
            let u = meter.snapshot().since(&before).dynamodb;
            let mut tables: Vec<(String, f64)> = u
                .iter()
                .filter(|((t, _), x)| t.starts_with("EventsTable") && x.wru > 0.0)
                .map(|((t, _), x)| (t.clone(), x.wru))
                .collect();
            tables.sort_by(|a, b| a.0.cmp(&b.0));
            tables
        }
    };
    let plain = |id: &str| {
        let mut e = hookline_tests::conformance::event(id, "order.created");
        e.partition_key = None;
        e
    };
    let one = |t: &str| (t.to_string(), 1.0);
    assert_eq!(
        entries(&listed, plain("evt_listed")).await,
        vec![one("EventsTable"), one("EventsTable[by_time]"), one("EventsTable[tenant_shards]")],
        "with the listing: the item and its two entries"
    );
    assert_eq!(entries(&unlisted, plain("evt_unlisted")).await, vec![one("EventsTable")], "without: the item alone");
    // Numbered: one transaction with its partition's counter, each action
    // at twice the standard units, its partition entry (found below) at the
    // standard unit; a duplicate is a cancelled transaction, billed as its
    // two actions failing their conditions, and writes nothing.
    let numbered = hookline_tests::conformance::event("evt_unlisted_numbered", "order.created");
    let transaction = |before: &hookline_tests::metering::MeterCounts| {
        let u = meter.snapshot().since(before).dynamodb;
        let units = |t: &str| u.get(&(t.to_string(), "TransactWriteItems".to_string())).cloned().unwrap_or_default();
        let (event, entry, order) = (units("EventsTable"), units("EventsTable[by_partition]"), units("OrderTable"));
        ((event.wru, event.condition_failed), entry.wru, (order.wru, order.condition_failed))
    };
    let before = meter.snapshot();
    assert_eq!(unlisted.insert(std::slice::from_ref(&numbered)).await.unwrap(), vec![true]);
    assert_eq!(transaction(&before), ((2.0, 0), 1.0, (2.0, 0)), "the event, its partition entry, the counter");
    let before = meter.snapshot();
    assert_eq!(unlisted.insert(std::slice::from_ref(&numbered)).await.unwrap(), vec![false]);
    assert_eq!(transaction(&before), ((2.0, 1), 0.0, (2.0, 1)), "a duplicate: cancelled, billed, no entry");

    let by_partition = EventQuery {
        tenant_id: numbered.tenant_id.clone(),
        partition_key: numbered.partition_key.clone(),
        ..Default::default()
    };
    let page = unlisted.search(&by_partition, 10, None).await.unwrap();
    assert_eq!(page.items.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["evt_unlisted_numbered"]);
    assert!(unlisted.mark_outcome(&shared::ids::EventId::new("evt_unlisted"), Outcome::Failed).await.unwrap());
    let failed = EventQuery { outcome: Some(Outcome::Failed), ..Default::default() };
    let page = unlisted.search(&failed, 10, None).await.unwrap();
    assert_eq!(page.items.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["evt_unlisted"], "by outcome");
    let page = unlisted.search(&EventQuery::default(), 10, None).await.unwrap();
    assert_eq!(
        page.items.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        ["evt_listed"],
        "the listing by time holds only the event written with it"
    );
}

/// The data key's store: KeysTable of fresh tables (no container has
/// started on them), under the strict checker.
#[tokio::test]
async fn data_key_store_creates_once_and_replaces_only_what_it_read() {
    let strict = Strict::new();
    let sdk = hookline_tests::emulator::aws_config().await;
    let names = hookline_tests::emulator::create_resources_with(
        &sdk,
        &hookline_tests::emulator::fresh_prefix("data_key_store"),
    )
    .await;
    let store = hookline_aws::keys::DynamoDataKeys::new(strict.dynamodb_client(&sdk), names.keys_table);
    hookline_tests::conformance::data_key_store_creates_once_and_replaces_only_what_it_read(&store).await;
    strict.assert_clean();
}

/// A first attempt that completes its saga (delivered, no acknowledgement
/// awaited, no lane) is one conditional `UpdateItem` of the saga's item, 1
/// write unit with the attempt on it (the item stays under 1 KB), where the
/// Attempts item and the saga step's update were 1 each: no Attempts item
/// is written, the saga reads `Completed` with 1 attempt, its attempts list
/// finds it, and a duplicate job's record writes nothing more (the
/// conformance case `attempts_record_completing_first_success` runs the
/// same requests under the strict checker).
#[tokio::test]
async fn first_success_is_recorded_in_the_write_that_completes_its_saga() {
    use shared::ports::{AttemptStore, SagaStore};
    use shared::saga::{AttemptResult, SagaStatus};
    let sdk = hookline_tests::emulator::aws_config().await;
    let prefix = hookline_tests::emulator::fresh_prefix("first_success");
    let names = hookline_tests::emulator::create_resources_with(&sdk, &prefix).await;
    let meter = hookline_tests::metering::Meter::new();
    let client = meter.dynamodb_client(&sdk);
    let retention = chrono::Duration::days(30);
    let sagas = hookline_aws::DynamoSagas::new(client.clone(), names.sagas_table.clone(), retention);
    let attempts =
        hookline_aws::DynamoAttempts::new(client, names.attempts_table.clone(), names.sagas_table.clone(), retention);
    // Ids as the pipeline makes them (their length is billed).
    let (event, sub) = (shared::ids::new_event_id(), shared::ids::new_subscription_id());
    let now = chrono::Utc::now();
    let saga = shared::saga::Saga::new(shared::ids::saga_id(&event, &sub), &event, &sub, None, now);
    assert_eq!(sagas.create(std::slice::from_ref(&saga)).await.unwrap(), vec![true]);
    let first = shared::attempt::Attempt {
        saga_id: saga.id.clone(),
        attempt: 1,
        event_id: event.clone(),
        subscription_id: sub.clone(),
        status_code: Some(200),
        error: None,
        latency_ms: 87,
        at: now,
        result: AttemptResult::Delivered,
        lane: None,
        response_excerpt: None,
    };

    let before = meter.snapshot();
    assert_eq!(attempts.record_completing(std::slice::from_ref(&first)).await.unwrap(), vec![true]);
    let used = meter.snapshot().since(&before).dynamodb;
    let writes: Vec<_> = used.iter().filter(|(_, u)| u.wru > 0.0).collect();
    assert_eq!(writes.len(), 1, "one write, of the saga's item: {used:?}");
    let ((table, op), u) = writes[0];
    assert_eq!((table.as_str(), op.as_str(), u.requests, u.wru), ("SagasTable", "UpdateItem", 1, 1.0), "{used:?}");

    let stored = sagas.get(&event, &saga.id).await.unwrap().expect("the saga");
    assert_eq!((stored.state.status, stored.state.attempts), (SagaStatus::Completed, 1));
    assert_eq!(attempts.list(&event, &saga.id).await.unwrap(), vec![first.clone()]);

    let before = meter.snapshot();
    assert_eq!(attempts.record_completing(&[first]).await.unwrap(), vec![false], "a duplicate job's");
    let used = meter.snapshot().since(&before).dynamodb;
    assert!(used.keys().all(|(t, _)| t == "SagasTable"), "no Attempts item for a duplicate: {used:?}");
}
