//! Stage scenarios, run on both backends (`tests/tests/serve/stages.rs`,
//! `tests/tests/aws/stages.rs`): the stage functions called directly, the way the
//! Lambda handlers and `hookline serve` call them, over a real SQLite file or
//! the AWS emulator, with several contexts where several Lambda containers
//! (each with its own subscription cache) would disagree. Nothing consumes
//! the streams here: each test plays the stream and queue consumers itself,
//! so it can hold a step back, lose it, or hand it a job received too often.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use hookline_aws::AwsBackend;
use shared::context::{Config, Hookline, Stores};
use shared::event::EventRecord;
use shared::http_client::ClientConfig;
use shared::ids::{self, DeadLetterId, EventId, SagaId};
use shared::message::RetryTimer;
use shared::retry::RetryPolicy;
use shared::saga::{AttemptResult, Saga, SagaStatus};
use shared::signing::Secret;
use shared::ssrf::AddressPolicy;
use shared::stage::deliver::{self, ReceivedJob};
use shared::stage::reconcile::{self, ReconcileLimits};
use shared::stage::requeue::{self, Audit};
use shared::stage::{requeue_queue, route, saga};
use shared::subscription::{PayloadFormat, SigningKey, Subscription};

pub use crate::recovery_stages::an_automatic_requeue_starts_one_job_per_outage;
use crate::server::TempDir;
use crate::strict::Strict;
use crate::{Behaviour, Receiver};

/// One backend's stores, and what a test needs to reach behind them.
pub struct Rig {
    /// The ports.
    pub stores: Stores,
    /// The deployment's data key: every container of one rig shares it.
    pub keyring: Arc<shared::keyring::Keyring>,
    kind: Kind,
}

enum Kind {
    Sqlite { db: std::path::PathBuf, _dir: TempDir },
    Aws { backend: Box<AwsBackend>, strict: Strict },
}

impl Drop for Rig {
    /// On AWS, fails the test if any request broke a rule of the strict checker.
    fn drop(&mut self) {
        if let Kind::Aws { strict, .. } = &self.kind {
            if !std::thread::panicking() {
                strict.assert_clean();
            }
        }
    }
}

impl Rig {
    /// A fresh SQLite file, with its data key (wrapped by a master key of
    /// this rig) stored in it.
    pub async fn sqlite(tag: &str) -> Rig {
        let dir = TempDir::new(tag);
        let db = dir.0.join("hookline.db");
        let master = shared::data_key::MasterKeys::generate();
        let backend = hookline_sqlite::Backend::open(&db, &master).await.expect("open the database");
        Rig { stores: backend.stores, keyring: backend.keyring, kind: Kind::Sqlite { db, _dir: dir } }
    }

    /// Fresh tables and queues in the emulator, under the strict checker.
    pub async fn aws(tag: &str) -> Rig {
        let strict = Strict::new();
        let backend = strict.backend(tag).await;
        Rig {
            stores: backend.stores.clone(),
            keyring: backend.keyring.clone(),
            kind: Kind::Aws { backend: Box::new(backend), strict },
        }
    }

    /// One process or Lambda container: its own context and subscription
    /// cache (trusted for `cache_ttl`), on the shared stores.
    pub fn container(&self, cache_ttl: Duration) -> Arc<Hookline> {
        self.container_with(cache_ttl, |_| {})
    }

    /// [`Rig::container`] with its settings changed by `configure`.
    pub fn container_with(&self, cache_ttl: Duration, configure: impl FnOnce(&mut Config)) -> Arc<Hookline> {
        let mut config = Config {
            address_policy: AddressPolicy::AllowLoopback,
            subscription_cache_ttl: cache_ttl,
            http: ClientConfig {
                connect_timeout: Duration::from_millis(1000),
                total_timeout: Duration::from_millis(1500),
                ..ClientConfig::default()
            },
            ..Config::default()
        };
        configure(&mut config);
        let mut h = Hookline::new(self.stores.clone(), config, self.keyring.clone());
        awsreq::transport::install(&mut h);
        Arc::new(h)
    }

    /// The strict checker, on AWS.
    pub fn strict(&self) -> Option<&Strict> {
        match &self.kind {
            Kind::Aws { strict, .. } => Some(strict),
            Kind::Sqlite { .. } => None,
        }
    }

    /// Removes an event as its retention (TTL on AWS, the purge locally) would.
    pub async fn expire_event(&self, id: &EventId) {
        match &self.kind {
            Kind::Sqlite { db, .. } => {
                let c = rusqlite::Connection::open(db).unwrap();
                c.busy_timeout(Duration::from_secs(5)).unwrap();
                assert_eq!(c.execute("DELETE FROM events WHERE id = ?1", [id.as_str()]).unwrap(), 1);
            }
            Kind::Aws { backend, .. } => {
                backend
                    .dynamodb
                    .delete_item()
                    .table_name(&backend.names.events_table)
                    .key("id", aws_sdk_dynamodb::types::AttributeValue::S(id.to_string()))
                    .send()
                    .await
                    .unwrap();
            }
        }
        assert!(self.stores.events.get(id).await.unwrap().is_none(), "event {id} expired");
    }

    /// Stores many subscriptions fast, as many API calls would have: on
    /// SQLite through the port, concurrently; on AWS as the items the
    /// adapter writes for each ([`hookline_aws::item::subscription_items`]),
    /// 25 to a `BatchWriteItem` (the emulator copies a whole table for
    /// every transaction, so thousands of them would take minutes there).
    pub async fn create_subscriptions(&self, subs: &[Subscription]) {
        match &self.kind {
            Kind::Sqlite { .. } => {
                let calls = subs.iter().map(|s| self.stores.subscriptions.create(s)).collect();
                for r in shared::bounds::all_bounded(calls, 256).await {
                    r.unwrap();
                }
            }
            Kind::Aws { backend, .. } => {
                use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
                let mut writes = Vec::new();
                for s in subs {
                    for item in hookline_aws::item::subscription_items(s, &self.keyring).unwrap() {
                        let put = PutRequest::builder().set_item(Some(item.into_sdk())).build().unwrap();
                        writes.push(WriteRequest::builder().put_request(put).build());
                    }
                }
                let table = &backend.names.subscriptions_table;
                let calls = writes
                    .chunks(25)
                    .map(|chunk| async move {
                        let mut pending = chunk.to_vec();
                        while !pending.is_empty() {
                            let out =
                                backend.dynamodb.batch_write_item().request_items(table, pending).send().await.unwrap();
                            pending = out.unprocessed_items().and_then(|m| m.get(table)).cloned().unwrap_or_default();
                        }
                    })
                    .collect();
                shared::bounds::all_bounded(calls, 8).await;
            }
        }
    }

    /// Takes delivery jobs off the queue (received, then deleted: each test
    /// checks the job was done) until some are in hand, at most `want`.
    pub async fn take_jobs(&self, want: usize) -> Vec<ReceivedJob> {
        crate::eventually(15, &format!("{want} delivery jobs"), || async {
            let got = self.stores.deliveries.raw().receive(want, Duration::from_secs(60)).await.unwrap();
            let receipts: Vec<String> = got.iter().map(|m| m.receipt.clone()).collect();
            self.stores.deliveries.raw().delete(&receipts).await.unwrap();
            let jobs: Vec<ReceivedJob> = got
                .iter()
                .map(|m| ReceivedJob { job: serde_json::from_str(&m.body).unwrap(), receive_count: m.receive_count })
                .collect();
            (!jobs.is_empty()).then_some(jobs)
        })
        .await
    }
}

/// A verified (or not), active subscription to every event type, stored
/// directly, as another container's API would have stored it.
pub fn subscription(url: &str, verified: bool) -> Subscription {
    let at = Utc::now();
    Subscription {
        id: shared::ids::new_subscription_id(),
        callback_url: url.to_string(),
        event_types: vec!["*".into()],
        tenant_id: None,
        description: None,
        headers: BTreeMap::new(),
        retry_policy: RetryPolicy { max_attempts: 3, base_delay_ms: 50, max_delay_ms: 100, schedule_ms: None },
        dead_letter_on: vec![],
        payload_format: PayloadFormat::Original,
        ordering: Default::default(),
        on_dead_letter: Default::default(),
        data_fields: None,
        max_in_flight: None,
        rate_limit: None,
        active: true,
        verified,
        verification_error: None,
        disabled_reason: None,
        disabled_at: None,
        signing_keys: vec![SigningKey { secret: Secret::generate(), expires_at: None }],
        created_at: at,
        updated_at: at,
        version: 1,
        auto_requeue: false,
        ack_timeout_secs: None,
        pull: false,
        verification_token: None,
    }
}

/// A stored event (`crate::conformance::event`).
pub async fn stored_event(rig: &Rig, id: &str) -> EventRecord {
    let e = crate::conformance::event(id, "task.created");
    rig.stores.events.insert(std::slice::from_ref(&e)).await.unwrap();
    e
}

/// Routes and starts an event on `h` (the router and the saga stream);
/// returns its sagas.
pub async fn route_and_start(h: &Hookline, e: &EventRecord) -> Vec<Saga> {
    route::route(h, std::slice::from_ref(e)).await.unwrap();
    let sagas = h.stores.sagas.list_for_event(&e.id).await.unwrap();
    saga::start(h, &sagas).await.unwrap();
    sagas
}

/// Feeds a saga's recorded attempts to the saga stage (the attempts stream).
pub async fn feed_attempts(h: &Hookline, s: &Saga) {
    let attempts = h.stores.attempts.list(&s.event_id, &s.id).await.unwrap();
    saga::on_attempts(h, &attempts).await.unwrap();
}

async fn saga_now(h: &Hookline, s: &Saga) -> Saga {
    h.stores.sagas.get(&s.event_id, &s.id).await.unwrap().expect("the saga exists")
}

/// Router and delivery run in different containers with their own caches.
/// The delivery container filled its cache before the subscription existed
/// (unknown there); the router's filled it while it was unverified; another
/// container then verified it. Neither refuses it on its cache's word: the
/// event is routed and delivered, not dead-lettered.
pub async fn stale_caches_never_reject_a_subscription(rig: &Rig) {
    let r = Receiver::start().await;
    let hour = Duration::from_secs(3600);
    let store = rig.stores.subscriptions.as_ref();
    let delivery = rig.container(hour);
    let sub = subscription(&r.url("/stale", Behaviour::Ok), false);
    assert!(delivery.subscription_cache.get(store, &sub.id).await.unwrap().is_none(), "unknown there");
    rig.stores.subscriptions.create(&sub).await.unwrap();
    let e = stored_event(rig, "stale-cache-1").await;
    let router = rig.container(hour);
    let keys = shared::routing::route_keys(&e);
    let indexed: Vec<_> = router.subscription_cache.routes(store, &keys).await.unwrap().concat();
    assert_eq!(indexed, vec![sub.id.clone()]);
    let cached = router.subscription_cache.get(store, &sub.id).await.unwrap();
    assert_eq!(cached.map(|s| s.verified), Some(false), "unverified there");
    let verified = Subscription { verified: true, version: sub.version + 1, ..sub.clone() };
    assert!(rig.stores.subscriptions.update(&verified, sub.version).await.unwrap());

    let sagas = route_and_start(&router, &e).await;
    assert_eq!(sagas.len(), 1, "the router asked the store before leaving the subscription out");
    let jobs = rig.take_jobs(1).await;
    assert_eq!(deliver::deliver_received(&delivery, &jobs).await, vec![true]);
    let attempts = rig.stores.attempts.list(&sagas[0].event_id, &sagas[0].id).await.unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].result, AttemptResult::Delivered, "{attempts:?}");
    assert_eq!(r.deliveries("/stale").len(), 1);
    feed_attempts(&delivery, &sagas[0]).await;
    assert_eq!(saga_now(&delivery, &sagas[0]).await.state.status, SagaStatus::Completed);
}

/// A fault on Hookline's side (here a stored header value it cannot encode,
/// as a subscription saved before header validation could hold) defers the
/// job: no attempt is recorded, nothing is dead-lettered, the job is queued
/// again for later, and the subscriber is not called.
pub async fn a_local_fault_costs_no_attempt(rig: &Rig) {
    let r = Receiver::start().await;
    let h = rig.container(Duration::from_secs(5));
    let mut sub = subscription(&r.url("/local", Behaviour::Ok), true);
    sub.headers.insert("x-team".into(), "pay\u{1}ments".into());
    rig.stores.subscriptions.create(&sub).await.unwrap();
    let e = stored_event(rig, "local-fault-1").await;
    let sagas = route_and_start(&h, &e).await;
    let jobs = rig.take_jobs(1).await;
    assert_eq!(deliver::deliver_received(&h, &jobs).await, vec![true], "the job was re-sent, so its message is done");
    assert!(
        rig.stores.attempts.list(&sagas[0].event_id, &sagas[0].id).await.unwrap().is_empty(),
        "no attempt was counted"
    );
    assert_eq!(saga_now(&h, &sagas[0]).await.state.status, SagaStatus::Pending);
    assert!(rig.stores.dead_letters.get(&ids::dead_letter_id(&sagas[0].id)).await.unwrap().is_none());
    assert_eq!(h.metrics.deliveries_deferred.load(std::sync::atomic::Ordering::Relaxed), 1);
    let depth = rig.stores.deliveries.depth().await.unwrap();
    assert_eq!(depth.not_visible, 1, "the job waits to be tried again: {depth:?}");
    assert!(r.deliveries("/local").is_empty());
}

/// A job received `JOB_RECEIVE_LIMIT` times (its worker crashed or timed
/// out each time) is not tried again: it ends as a dead letter with a
/// record and the event's snapshot, which ops can requeue.
pub async fn a_job_received_too_often_dead_letters_with_a_record(rig: &Rig) {
    let r = Receiver::start().await;
    let h = rig.container(Duration::from_secs(5));
    rig.stores.subscriptions.create(&subscription(&r.url("/crashy", Behaviour::Ok), true)).await.unwrap();
    let e = stored_event(rig, "too-often-1").await;
    let sagas = route_and_start(&h, &e).await;
    let mut jobs = rig.take_jobs(1).await;
    jobs[0].receive_count = shared::bounds::JOB_RECEIVE_LIMIT;
    assert_eq!(deliver::deliver_received(&h, &jobs).await, vec![true]);
    assert!(r.deliveries("/crashy").is_empty(), "not tried again");
    feed_attempts(&h, &sagas[0]).await;
    assert_eq!(saga_now(&h, &sagas[0]).await.state.status, SagaStatus::DeadLettered);
    let dl =
        rig.stores.dead_letters.get(&ids::dead_letter_id(&sagas[0].id)).await.unwrap().expect("a dead-letter record");
    assert!(dl.reason.contains("received 5 times"), "{}", dl.reason);
    assert_eq!(dl.event.as_ref().map(|e| e.body.clone()), Some(e.body.clone()), "the snapshot is kept");
    // Ops requeue it; the new saga is delivered.
    let audit = Audit { actor: "ops".into(), reason: "worker fixed".into() };
    let new = requeue::requeue(&h, &dl.id, &audit).await.unwrap();
    saga::start(&h, std::slice::from_ref(&new)).await.unwrap();
    let jobs = rig.take_jobs(1).await;
    assert_eq!(deliver::deliver_received(&h, &jobs).await, vec![true]);
    assert_eq!(r.deliveries("/crashy").len(), 1);
}

/// A retry timer whose saga is gone (its retention ended while it waited)
/// is not dropped silently: it leaves a dead letter saying why.
pub async fn a_timer_whose_saga_is_gone_dead_letters(rig: &Rig) {
    let h = rig.container(Duration::from_secs(5));
    let timer = RetryTimer {
        event_id: EventId::new("gone-event"),
        saga_id: SagaId::new("sag_gone"),
        attempt: 3,
        due_at: Utc::now() - chrono::Duration::seconds(1),
        ack_since: None,
    };
    assert_eq!(saga::on_timer(&h, &timer).await.unwrap(), saga::TimerOutcome::Done);
    let dl = rig
        .stores
        .dead_letters
        .get(&DeadLetterId::new("sag_gone"))
        .await
        .unwrap()
        .expect("a dead letter for the lost saga");
    assert!(dl.reason.contains("no longer stored"), "{}", dl.reason);
    assert_eq!(dl.event_id, "gone-event");
}

/// A dead letter outlives its event: requeued after the event expired, the
/// new saga delivers the snapshot, byte for byte. The reconciler reports
/// the open dead letter (the alarm's metric) until ops resolve it.
pub async fn requeue_after_the_event_expired_delivers_the_snapshot(rig: &Rig) {
    let r = Receiver::start().await;
    let h = rig.container(Duration::from_secs(5));
    let mut sub = subscription(&r.url("/later", Behaviour::Always(500)), true);
    sub.retry_policy.max_attempts = 1;
    rig.stores.subscriptions.create(&sub).await.unwrap();
    let e = stored_event(rig, "expires-1").await;
    let sagas = route_and_start(&h, &e).await;
    let jobs = rig.take_jobs(1).await;
    assert_eq!(deliver::deliver_received(&h, &jobs).await, vec![true]);
    feed_attempts(&h, &sagas[0]).await;
    assert_eq!(saga_now(&h, &sagas[0]).await.state.status, SagaStatus::DeadLettered);
    let limits = ReconcileLimits::default();
    let report = reconcile::reconcile(&h, &limits).await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(report.open_dead_letters, Some(1));
    let line: serde_json::Value = serde_json::from_str(&reconcile::emf_line(&report, "reconciler", 1)).unwrap();
    assert_eq!(line["OpenDeadLetters"], 1, "{line}");

    rig.expire_event(&e.id).await;
    r.set("/later", Behaviour::Ok);
    let audit = Audit { actor: "ops".into(), reason: "subscriber fixed".into() };
    let new = requeue::requeue(&h, &ids::dead_letter_id(&sagas[0].id), &audit).await.unwrap();
    saga::start(&h, std::slice::from_ref(&new)).await.unwrap();
    let jobs = rig.take_jobs(1).await;
    assert_eq!(deliver::deliver_received(&h, &jobs).await, vec![true]);
    let attempts = rig.stores.attempts.list(&new.event_id, &new.id).await.unwrap();
    assert_eq!(attempts[0].result, AttemptResult::Delivered, "{attempts:?}");
    let got = r.deliveries("/later");
    assert_eq!(got.last().map(|d| d.body.clone()), Some(e.body.clone()), "the snapshot, byte for byte");
    let report = reconcile::reconcile(&h, &limits).await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(report.open_dead_letters, Some(0), "the alarm's metric returns to 0");
}

/// A job the queue moved to its DLQ without any record (its workers failed
/// it on every receive, say while the store was down) is not a dead saga:
/// redriven from the DLQ (console → requeue queue), it goes back to
/// delivery and the saga completes; nothing is dead-lettered.
pub async fn a_redriven_job_of_a_saga_that_never_died_is_delivered(rig: &Rig) {
    let r = Receiver::start().await;
    let h = rig.container(Duration::from_secs(5));
    rig.stores.subscriptions.create(&subscription(&r.url("/resume", Behaviour::Ok), true)).await.unwrap();
    let e = stored_event(rig, "never-died-1").await;
    let sagas = route_and_start(&h, &e).await;
    let jobs = rig.take_jobs(1).await;
    requeue_queue::handle(&h, shared::message::RequeueMessage::DeadJob(jobs[0].job.clone()), 1)
        .await
        .expect("the redrive is handled");
    let jobs = rig.take_jobs(1).await;
    assert_eq!(deliver::deliver_received(&h, &jobs).await, vec![true]);
    feed_attempts(&h, &sagas[0]).await;
    assert_eq!(saga_now(&h, &sagas[0]).await.state.status, SagaStatus::Completed);
    assert!(rig.stores.dead_letters.get(&ids::dead_letter_id(&sagas[0].id)).await.unwrap().is_none());
    assert_eq!(r.deliveries("/resume").len(), 1);
}

/// A subscription of `tenant` (or global) to `patterns`, stored as
/// [`subscription`] would be.
fn scoped(tenant: Option<&str>, patterns: &[&str], active: bool) -> Subscription {
    Subscription {
        tenant_id: tenant.map(shared::ids::TenantId::new),
        event_types: patterns.iter().map(|p| p.to_string()).collect(),
        active,
        ..subscription("http://127.0.0.1:9/unused", true)
    }
}

/// An event of `tenant` (or none) and `event_type` under a fresh id.
fn event_of(tenant: Option<&str>, event_type: &str) -> EventRecord {
    let id = format!("evt-{}", uuid_like());
    EventRecord { tenant_id: tenant.map(shared::ids::TenantId::new), ..crate::conformance::event(&id, event_type) }
}

fn uuid_like() -> String {
    shared::ids::new_subscription_id().as_str().trim_start_matches("sub_").to_string()
}

/// The subscriptions `h` routes an event of `tenant` and `event_type` to
/// (sorted ids of the sagas it creates).
async fn routed_to(h: &Hookline, tenant: Option<&str>, event_type: &str) -> Vec<shared::ids::SubscriptionId> {
    let e = event_of(tenant, event_type);
    route::route(h, std::slice::from_ref(&e)).await.unwrap();
    let mut ids: Vec<_> =
        h.stores.sagas.list_for_event(&e.id).await.unwrap().into_iter().map(|s| s.subscription_id).collect();
    ids.sort();
    ids
}

/// Among 2,000 subscriptions that do not match (1,000 of other tenants
/// with the same patterns, 1,000 global ones to near-miss types), routing
/// creates sagas for exactly the matching ones: tenant scoping holds, `*`
/// and `prefix.*` match at any depth, an inactive one gets nothing; a
/// versioned type (`task.created.v2`) goes only to `task.*.v2` and the
/// exact type, never to `*` or `task.*`. Its
/// cache holds only the candidates of the events' keys: the non-matching
/// subscriptions were never read.
pub async fn routing_among_thousands_of_subscriptions(rig: &Rig) {
    let mut noise = Vec::new();
    for i in 0..1000 {
        noise.push(scoped(Some(&format!("tenant-{i}")), &["task.*", "*"], true));
        noise.push(scoped(None, &[&format!("task.created.v{i}"), &format!("task{i}.*")], true));
    }
    let all = scoped(None, &["*"], true);
    let task = scoped(None, &["task.*"], true);
    let acme_exact = scoped(Some("acme"), &["task.created"], true);
    let acme_prefix = scoped(Some("acme"), &["quota.*", "task.*"], true);
    let inactive = scoped(None, &["task.created"], false);
    let globex = scoped(Some("globex"), &["*"], true);
    let task_v2 = scoped(None, &["task.*.v2"], true);
    let acme_v2 = scoped(Some("acme"), &["task.created.v2"], true);
    // The noise of i = 2 names `task.created.v2` exactly: it matches.
    let noise_v2 = noise[5].clone();
    let mut subs = noise;
    subs.extend([&all, &task, &acme_exact, &acme_prefix, &inactive, &globex, &task_v2, &acme_v2].map(Clone::clone));
    rig.create_subscriptions(&subs).await;

    let h = rig.container(Duration::from_secs(60));
    let events = [
        event_of(Some("acme"), "task.created"),
        event_of(None, "task.step.updated"),
        event_of(Some("globex"), "quota.committed"),
        event_of(Some("acme"), "other.thing"),
        event_of(Some("initech"), "task"),
        event_of(Some("acme"), "task.created.v2"),
    ];
    let created = route::route(&h, &events).await.unwrap();
    let want: [Vec<&Subscription>; 6] = [
        vec![&all, &task, &acme_exact, &acme_prefix],
        vec![&all, &task],
        vec![&all, &globex],
        vec![&all],
        vec![&all],
        vec![&task_v2, &acme_v2, &noise_v2],
    ];
    assert_eq!(created, want.iter().map(Vec::len).sum::<usize>());
    for (e, want) in events.iter().zip(want) {
        let mut got: Vec<_> =
            rig.stores.sagas.list_for_event(&e.id).await.unwrap().into_iter().map(|s| s.subscription_id).collect();
        got.sort();
        let mut want: Vec<_> = want.iter().map(|s| s.id.clone()).collect();
        want.sort();
        assert_eq!(got, want, "{} {:?}", e.event_type, e.tenant_id);
    }
    let (keys, cached) = h.subscription_cache.held();
    assert!(keys <= 6 * 2 * 4, "{keys} route keys");
    assert!(cached <= 10, "only candidates were read, not the 2,000 others: {cached}");
}

/// Another container (cache TTL 300 ms here, 5 s by default) routes by a
/// subscription's current state within its TTL after each change: created,
/// pattern changed, deactivated, re-activated, deleted. The container that
/// made the change (its cache invalidated by the write, as the API does)
/// routes by it at once.
pub async fn routing_follows_subscription_changes_within_the_cache_ttl(rig: &Rig) {
    let ttl = Duration::from_millis(300);
    let router = rig.container(ttl);
    let writer = rig.container(Duration::from_secs(60));
    let store = rig.stores.subscriptions.as_ref();
    rig.create_subscriptions(&(0..200).map(|i| scoped(Some(&format!("t{i}")), &["order.*"], true)).collect::<Vec<_>>())
        .await;
    assert!(routed_to(&router, None, "order.created").await.is_empty());
    assert!(routed_to(&writer, None, "order.created").await.is_empty());

    // Waits until `router` routes (tenant, type) to `want`, and checks it
    // took no longer than the TTL plus scheduling slack.
    let settles = |tenant: Option<&'static str>,
                   event_type: &'static str,
                   want: Vec<shared::ids::SubscriptionId>,
                   what: &'static str| {
        let router = router.clone();
        async move {
            let start = std::time::Instant::now();
            crate::eventually(10, what, || {
                let (router, want) = (router.clone(), want.clone());
                async move { (routed_to(&router, tenant, event_type).await == want).then_some(()) }
            })
            .await;
            let took = start.elapsed();
            assert!(took < ttl + Duration::from_millis(1500), "{what}: {took:?} after the change (TTL {ttl:?})");
        }
    };

    let sub = scoped(None, &["order.*"], true);
    store.create(&sub).await.unwrap();
    writer.subscription_cache.invalidate().await;
    assert_eq!(routed_to(&writer, None, "order.created").await, vec![sub.id.clone()], "the writer's own cache");
    settles(None, "order.created", vec![sub.id.clone()], "a new subscription is routed to").await;
    settles(Some("acme"), "order.shipped.late", vec![sub.id.clone()], "a global prefix matches any tenant, any depth")
        .await;

    let changed = Subscription { event_types: vec!["invoice.*".into()], version: 2, ..sub.clone() };
    assert!(store.update(&changed, 1).await.unwrap());
    settles(None, "order.created", vec![], "a pattern removed stops matching").await;
    settles(None, "invoice.paid", vec![sub.id.clone()], "a pattern added matches").await;

    let off = Subscription { active: false, version: 3, ..changed.clone() };
    assert!(store.update(&off, 2).await.unwrap());
    settles(None, "invoice.paid", vec![], "a deactivated subscription gets nothing").await;
    let on = Subscription { active: true, version: 4, ..off.clone() };
    assert!(store.update(&on, 3).await.unwrap());
    settles(None, "invoice.paid", vec![sub.id.clone()], "re-activated, it gets events again").await;

    assert!(store.delete(&sub.id).await.unwrap());
    settles(None, "invoice.paid", vec![], "a deleted subscription gets nothing").await;
}

/// A subscription's explicit `max_in_flight` and `rate_limit` hold across
/// containers: two delivery contexts (two Lambda containers) deliver its
/// jobs at once, the receiver never sees two requests together, and the
/// jobs that found the slot taken are deferred without an attempt.
pub async fn explicit_limits_hold_across_containers(rig: &Rig) {
    let r = Receiver::start().await;
    let router = rig.container(Duration::from_secs(5));
    let mut sub = subscription(&r.url("/lim", Behaviour::SlowFirst(usize::MAX, Duration::from_millis(300))), true);
    sub.max_in_flight = Some(1);
    rig.stores.subscriptions.create(&sub).await.unwrap();
    let mut sagas = Vec::new();
    for i in 0..4 {
        sagas.extend(route_and_start(&router, &stored_event(rig, &format!("limit-{i}")).await).await);
    }
    let jobs = rig.take_jobs(4).await;
    let (a, b) = (rig.container(Duration::from_secs(5)), rig.container(Duration::from_secs(5)));
    let (da, db) = tokio::join!(deliver::deliver_received(&a, &jobs[..2]), deliver::deliver_received(&b, &jobs[2..]));
    assert!(da.iter().chain(&db).all(|d| *d), "every message is done: attempted or deferred");
    assert_eq!(r.max_concurrent("/lim"), 1, "one request at a time over both containers");
    let mut attempts = 0;
    for s in &sagas {
        attempts += rig.stores.attempts.list(&s.event_id, &s.id).await.unwrap().len();
    }
    let deferred =
        [&a, &b].iter().map(|h| h.metrics.deliveries_deferred.load(std::sync::atomic::Ordering::Relaxed)).sum::<u64>();
    assert_eq!(attempts as u64 + deferred, 4, "{attempts} attempts and {deferred} deferred");
    assert!(deferred >= 1, "the slot was taken for some");
    assert_eq!(r.deliveries("/lim").len(), attempts, "a request only with an attempt");

    // One start a second over both containers.
    let mut rated = subscription(&r.url("/rate", Behaviour::Ok), true);
    rated.rate_limit = Some(1.0);
    rig.stores.subscriptions.create(&rated).await.unwrap();
    let router = rig.container(Duration::from_secs(5)); // a fresh route cache
    route_and_start(&router, &stored_event(rig, "rate-1").await).await;
    route_and_start(&router, &stored_event(rig, "rate-2").await).await;
    let mut jobs = Vec::new();
    while jobs.len() < 2 {
        jobs.extend(rig.take_jobs(2).await.into_iter().filter(|j| j.job.subscription_id == rated.id));
    }
    let (da, db) = tokio::join!(deliver::deliver_received(&a, &jobs[..1]), deliver::deliver_received(&b, &jobs[1..]));
    assert_eq!((da, db), (vec![true], vec![true]));
    assert_eq!(r.deliveries("/rate").len(), 1, "the second start waits for the next second");
}

/// Every stage scenario, for the backend test files.
#[macro_export]
macro_rules! for_each_stage_scenario {
    ($m:ident) => {
        $m!(stale_caches_never_reject_a_subscription);
        $m!(a_local_fault_costs_no_attempt);
        $m!(a_job_received_too_often_dead_letters_with_a_record);
        $m!(a_timer_whose_saga_is_gone_dead_letters);
        $m!(requeue_after_the_event_expired_delivers_the_snapshot);
        $m!(a_redriven_job_of_a_saga_that_never_died_is_delivered);
        $m!(routing_among_thousands_of_subscriptions);
        $m!(routing_follows_subscription_changes_within_the_cache_ttl);
        $m!(explicit_limits_hold_across_containers);
        $m!(a_bulk_page_redone_or_run_twice_counts_each_dead_letter_once);
        $m!(a_bulk_job_whose_page_keeps_failing_stops_as_failed);
        $m!(an_automatic_requeue_starts_one_job_per_outage);
    };
}

/// Issue 11, part B. A bulk requeue's page done again after a worker died
/// between acting and committing, the same page's message handled by two
/// containers at once, a stale redelivery after the job ended, and a dead
/// letter resolved by someone else between plan and act: each dead letter
/// is requeued once (one new saga), and `matched`, `done`, `failed` are
/// exact.
pub async fn a_bulk_page_redone_or_run_twice_counts_each_dead_letter_once(rig: &Rig) {
    use shared::bulk::{Job, JobSpec, JobState, JobStep};
    use shared::dead_letter::{DeadLetter, DeadLetterQuery, DeadLetterState};
    use shared::stage::bulk;

    // Pages of 10 (`BULK_PAGE_SIZE`): 25 dead letters are three pages.
    let page_size = |c: &mut Config| c.bulk_page_size = 10;
    let (a, b) =
        (rig.container_with(Duration::from_secs(5), page_size), rig.container_with(Duration::from_secs(5), page_size));
    let sub = ids::new_subscription_id();
    let t0 = Utc::now() - chrono::Duration::minutes(5);
    let n = 25;
    let dls: Vec<DeadLetter> = (0..n)
        .map(|i| DeadLetter {
            subscription_id: sub.clone(),
            event_id: EventId::new(format!("evt-bulk-{i}")),
            ..crate::conformance::dead_letter(&format!("sag_bulk_{i:03}"), t0 + chrono::Duration::milliseconds(i))
        })
        .collect();
    shared::bounds::all_bounded(dls.iter().map(|d| rig.stores.dead_letters.put(d)).collect(), 8).await;
    let filter = DeadLetterQuery { subscription_id: Some(sub.clone()), ..DeadLetterQuery::default() };
    let job = Job::new(JobSpec::Requeue(filter.clone()), "fixed", "key:ops", Utc::now());
    rig.stores.jobs.create(&job).await.unwrap();

    // A worker planned page 0 and requeued half of it, then died.
    let open = DeadLetterQuery { state: Some(DeadLetterState::Open), ..filter.clone() };
    let page = rig.stores.dead_letters.page(&open, a.config.bulk_page_size, None).await.unwrap();
    let ids: Vec<String> = page.items.iter().map(|d| d.id.to_string()).collect();
    let planned = job.planned(ids.clone(), page.next.clone(), Utc::now());
    assert!(rig.stores.jobs.update(&planned, job.version).await.unwrap());
    let audit = Audit { actor: "key:ops".into(), reason: "fixed".into() };
    for id in &ids[..5] {
        requeue::requeue_as(&a, &DeadLetterId::new(id.as_str()), &audit, Some(&job.id)).await.unwrap();
    }
    // Meanwhile someone skipped one of the planned dead letters by hand.
    requeue::skip(&a, &DeadLetterId::new(ids[7].as_str()), &Audit { actor: "key:other".into(), reason: "no".into() })
        .await
        .unwrap();

    // The message is received again, by two containers at once.
    let step = JobStep { job_id: job.id.clone(), page: 0 };
    let (ra, rb) = tokio::join!(bulk::run(&a, &step), bulk::run(&b, &step));
    ra.unwrap();
    rb.unwrap();
    // Whatever pages are left, through their messages (duplicates included).
    for _ in 0..100 {
        let got = rig.stores.requeues.raw().receive(10, Duration::from_secs(60)).await.unwrap();
        for m in &got {
            if let Ok(shared::message::RequeueMessage::Job { job: step }) = serde_json::from_str(&m.body) {
                bulk::run(&b, &step).await.unwrap();
            }
        }
        let receipts: Vec<String> = got.iter().map(|m| m.receipt.clone()).collect();
        rig.stores.requeues.raw().delete(&receipts).await.unwrap();
        if rig.stores.jobs.get(&job.id).await.unwrap().unwrap().state != JobState::Running && got.is_empty() {
            break;
        }
    }
    let done = rig.stores.jobs.get(&job.id).await.unwrap().unwrap();
    assert_eq!(
        (done.state, done.matched, done.done, done.failed),
        (JobState::Completed, n as u64, n as u64 - 1, 1),
        "{done:?}"
    );
    // A stale redelivery of page 0 after the end changes nothing.
    bulk::run(&a, &step).await.unwrap();
    assert_eq!(rig.stores.jobs.get(&job.id).await.unwrap().unwrap(), done);
    for d in &dls {
        let now = rig.stores.dead_letters.get(&d.id).await.unwrap().unwrap();
        let new = rig.stores.sagas.get(&d.event_id, &ids::requeue_saga_id(&d.id)).await.unwrap();
        if d.id.as_str() == ids[7] {
            assert_eq!(now.state, DeadLetterState::Skipped);
            assert!(new.is_none());
        } else {
            assert_eq!(now.state, DeadLetterState::Requeued, "{}", d.id);
            assert_eq!(now.resolution.as_ref().and_then(|r| r.job_id.as_deref()), Some(job.id.as_str()));
            assert!(new.is_some(), "{}: its one new saga", d.id);
        }
    }
}

/// A bulk job's page message whose worker failed, crashed or timed out on
/// every receive: on its [`shared::bounds::JOB_RECEIVE_LIMIT`]th receive
/// the job is marked failed with a reason naming the page, and the message
/// is done, instead of it going on to the dead-letter queue and the job
/// showing `running` for ever. A message received fewer times is run as
/// usual. Receives go through the real requeue queue (its receive counts).
pub async fn a_bulk_job_whose_page_keeps_failing_stops_as_failed(rig: &Rig) {
    use shared::bounds::JOB_RECEIVE_LIMIT;
    use shared::bulk::{Job, JobSpec, JobState};
    use shared::dead_letter::{DeadLetter, DeadLetterQuery, DeadLetterState};
    use shared::message::RequeueMessage;
    use shared::stage::bulk;

    let h = rig.container(Duration::from_secs(5));
    let t0 = Utc::now() - chrono::Duration::minutes(5);
    let mut jobs = Vec::new();
    for which in ["stuck", "fine"] {
        let sub = ids::new_subscription_id();
        let dls: Vec<DeadLetter> = (0..20)
            .map(|i| DeadLetter {
                subscription_id: sub.clone(),
                event_id: EventId::new(format!("evt-{which}-{i}")),
                ..crate::conformance::dead_letter(
                    &format!("sag_{which}_{i:02}"),
                    t0 + chrono::Duration::milliseconds(i),
                )
            })
            .collect();
        shared::bounds::all_bounded(dls.iter().map(|d| rig.stores.dead_letters.put(d)).collect(), 8).await;
        let filter = DeadLetterQuery { subscription_id: Some(sub.clone()), ..DeadLetterQuery::default() };
        let job = Job::new(JobSpec::Requeue(filter.clone()), "fixed", "key:ops", Utc::now());
        jobs.push((bulk::start(&h, job).await.unwrap(), dls));
    }
    let (stuck, fine) = (jobs[0].0.id.clone(), jobs[1].0.id.clone());
    // The stuck job's message crashes its worker on every receive before
    // the limit; the fine one's on every receive before the limit's last.
    let mut handled = std::collections::HashSet::new();
    for _ in 0..200 {
        let got = rig.stores.requeues.raw().receive(10, Duration::from_secs(60)).await.unwrap();
        for m in &got {
            let msg: RequeueMessage = serde_json::from_str(&m.body).unwrap();
            let RequeueMessage::Job { job: step } = &msg else { panic!("only job steps were sent: {}", m.body) };
            let last = if step.job_id == stuck { JOB_RECEIVE_LIMIT } else { JOB_RECEIVE_LIMIT - 1 };
            if m.receive_count < last {
                // Its worker died: the message comes back.
                rig.stores.requeues.raw().change_visibility(&m.receipt, Duration::ZERO).await.unwrap();
                continue;
            }
            requeue_queue::handle(&h, msg.clone(), m.receive_count).await.unwrap();
            rig.stores.requeues.raw().delete(std::slice::from_ref(&m.receipt)).await.unwrap();
            handled.insert((step.job_id.clone(), m.receive_count));
        }
        let running = rig.stores.jobs.get(&stuck).await.unwrap().unwrap().state == JobState::Running
            || rig.stores.jobs.get(&fine).await.unwrap().unwrap().state == JobState::Running;
        if !running && got.is_empty() {
            break;
        }
    }
    let stuck_now = rig.stores.jobs.get(&stuck).await.unwrap().unwrap();
    assert_eq!((stuck_now.state, stuck_now.done, stuck_now.failed), (JobState::Failed, 0, 0), "{stuck_now:?}");
    let why = stuck_now.error.clone().unwrap_or_default();
    assert!(why.contains("page 0") && why.contains(&format!("{JOB_RECEIVE_LIMIT} times")), "{why}");
    assert!(handled.contains(&(stuck.clone(), JOB_RECEIVE_LIMIT)), "{handled:?}");
    for d in &jobs[0].1 {
        let now = rig.stores.dead_letters.get(&d.id).await.unwrap().unwrap();
        assert_eq!(now.state, DeadLetterState::Open, "{}: the stuck job acted on nothing", d.id);
    }
    let fine_now = rig.stores.jobs.get(&fine).await.unwrap().unwrap();
    assert_eq!((fine_now.state, fine_now.done), (JobState::Completed, 20), "{fine_now:?}");
    // Nothing is left in the queue for either.
    assert!(rig.stores.requeues.raw().receive(10, Duration::from_secs(60)).await.unwrap().is_empty());

    // At the limit, a message of a page the job has already moved past
    // (its worker died after the commit) stops nothing: it asks for the
    // job's current page, as any late message does.
    let filter = DeadLetterQuery { subscription_id: Some(ids::new_subscription_id()), ..DeadLetterQuery::default() };
    let moving = Job::new(JobSpec::Requeue(filter.clone()), "fixed", "key:ops", Utc::now());
    rig.stores.jobs.create(&moving).await.unwrap();
    let planned = moving.planned(Vec::new(), Some("more".into()), Utc::now());
    assert!(rig.stores.jobs.update(&planned, moving.version).await.unwrap());
    let at_page_1 = planned.committed(0, 0, Utc::now());
    assert!(rig.stores.jobs.update(&at_page_1, planned.version).await.unwrap());
    let late = RequeueMessage::Job { job: shared::bulk::JobStep { job_id: moving.id.clone(), page: 0 } };
    requeue_queue::handle(&h, late, JOB_RECEIVE_LIMIT).await.unwrap();
    let still = rig.stores.jobs.get(&moving.id).await.unwrap().unwrap();
    assert_eq!((still.state, still.page), (JobState::Running, 1), "{still:?}");
    let asked = rig.stores.requeues.raw().receive(10, Duration::from_secs(60)).await.unwrap();
    let bodies: Vec<&str> = asked.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    let RequeueMessage::Job { job: step } = serde_json::from_str(bodies[0]).unwrap() else { panic!("{bodies:?}") };
    assert_eq!((step.job_id.as_str(), step.page), (moving.id.as_str(), 1));
}
