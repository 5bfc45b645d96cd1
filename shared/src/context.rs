//! The bundle every stage works with: the ports, the configuration, the one
//! HTTP client and the metrics. Built once per process (or Lambda container).

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::StoreError;
use crate::http_client::{ClientConfig, HttpClient};
use crate::ids::SubscriptionId;
use crate::message::{DeliveryJob, RequeueMessage, RetryTimer};
use crate::metrics::Metrics;
use crate::ports::{
    AttemptStore, DeadLetterStore, EventStore, HealthStore, LimitStore, SagaStore, StreamFailures, SubscriptionStore,
};
use crate::queue::Queue;
use crate::routing::RouteKey;
use crate::ssrf::AddressPolicy;
use crate::subscription::Subscription;

/// The stores and queues of one backend.
#[derive(Clone)]
pub struct Stores {
    /// Append-only events.
    pub events: Arc<dyn EventStore>,
    /// Subscription configuration.
    pub subscriptions: Arc<dyn SubscriptionStore>,
    /// Delivery sagas.
    pub sagas: Arc<dyn SagaStore>,
    /// Attempt records.
    pub attempts: Arc<dyn AttemptStore>,
    /// Dead letters.
    pub dead_letters: Arc<dyn DeadLetterStore>,
    /// Delivery jobs.
    pub deliveries: Queue<DeliveryJob>,
    /// The delivery queue's dead-letter queue: the job of every dead-lettered
    /// saga lands here too, so ops can redrive it (to the requeue queue).
    pub dead_jobs: Queue<DeliveryJob>,
    /// Retry timers (delayed wake-ups of PendingRetry sagas).
    pub retries: Queue<RetryTimer>,
    /// Requeue and replay requests, and jobs redriven from `dead_jobs`.
    pub requeues: Queue<RequeueMessage>,
    /// Stream batches the pipeline gave up on, for the reconciler.
    pub stream_failures: Arc<dyn StreamFailures>,
    /// Subscription health and circuit breakers.
    pub health: Arc<dyn HealthStore>,
    /// Explicit per-subscription limits, across workers.
    pub limits: Arc<dyn LimitStore>,
    /// Ordered delivery: partitions' routed-through marks and lanes.
    pub order: Arc<dyn crate::ports::OrderStore>,
    /// Bulk jobs (requeue, skip, replay).
    pub jobs: Arc<dyn crate::ports::JobStore>,
    /// The audit trail ([`crate::audit`]).
    pub audit: Arc<dyn crate::ports::AuditStore>,
    /// API keys and principal grants ([`crate::api_key`]).
    pub keys: Arc<dyn crate::ports::KeyStore>,
    /// Idempotency keys of creating requests ([`crate::idempotency`]).
    pub idempotency: Arc<dyn crate::ports::IdempotencyStore>,
    /// Delivery statistics per subscription, tenant and system ([`crate::stats`]).
    pub stats: Arc<dyn crate::ports::StatsStore>,
    /// Event types seen at ingest ([`crate::event_types`]).
    pub event_types: Arc<dyn crate::ports::EventTypeStore>,
    /// Subscribers' acknowledgements of deliveries ([`crate::ack`]).
    pub acks: Arc<dyn crate::ports::AckStore>,
}

/// Settings that are the same for every stage.
#[derive(Debug, Clone)]
pub struct Config {
    /// How long events are kept (at least 30 days by default) for replay.
    pub retention: chrono::Duration,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Largest batch of events in one request.
    pub max_batch: usize,
    /// Which callback addresses are allowed.
    pub address_policy: AddressPolicy,
    /// How long a received delivery job stays invisible; longer than the
    /// delivery timeout so a live worker never loses its job.
    pub delivery_visibility: Duration,
    /// How long rotated-out secrets keep signing.
    pub rotation_overlap: chrono::Duration,
    /// How long the subscription cache trusts what it read.
    pub subscription_cache_ttl: Duration,
    /// Timeouts and limits of outgoing HTTP.
    pub http: ClientConfig,
    /// The retry schedule of subscriptions that do not set one.
    pub default_retry_policy: crate::retry::RetryPolicy,
    /// How long resolved dead letters are kept (open ones always are).
    pub dead_letter_retention: chrono::Duration,
    /// The reconciler's bounds and stall margin.
    pub reconcile: ReconcileLimits,
    /// When a subscription's circuit breaker opens and for how long.
    pub breaker: crate::health::BreakerPolicy,
    /// How long audit records are kept ([`crate::audit`]).
    pub audit_retention: chrono::Duration,
    /// A subscription whose deliveries have all failed for this long is
    /// disabled ([`crate::health::should_disable`]).
    pub disable_after: chrono::Duration,
    /// Whether the `X-Actor` request header is recorded in the audit trail
    /// after the credential (`TRUST_ACTOR_HEADER`; the API reads it).
    pub trust_actor_header: bool,
    /// Dead letters or events a bulk job handles per step
    /// (`BULK_PAGE_SIZE`).
    pub bulk_page_size: usize,
    /// Most bulk and replay jobs running at once per tenant
    /// (`JOBS_PER_TENANT`; [`crate::stage::bulk::admit`]).
    pub jobs_per_tenant: usize,
    /// Most items one bulk or replay job may take (`JOB_MAX_ITEMS`); a
    /// larger one is refused, counted before it starts.
    pub job_max_items: u64,
    /// IAM principals that are admins without a grant (`ADMIN_PRINCIPALS`;
    /// AWS only: the API behind API Gateway).
    pub admin_principals: Vec<String>,
    /// Whether an event of a type not in the event catalog is refused
    /// (`STRICT_CATALOG`; [`crate::catalog`]).
    pub strict_catalog: bool,
    /// Whether events are listed by time and by tenant (`EVENT_LISTING`;
    /// [`crate::event_search::EventQuery::check_listable`]). Off, only the
    /// listings by partition key and by outcome answer, and the AWS store
    /// writes no `by_time` or `tenant_shards` index entry: a deployment
    /// that never lists its events that way pays for neither.
    pub event_listing: bool,
    /// The queues and buses subscriptions may deliver to
    /// (`DESTINATION_ARNS`; [`crate::destination::check_allowed`]); `None`:
    /// any.
    pub allowed_destinations: Option<Vec<String>>,
}

impl Default for Config {
    /// Every setting at its default as [`crate::config::SETTINGS`] declares
    /// it (the defaults are held there once).
    fn default() -> Self {
        Config::declared_defaults()
    }
}

/// Most route keys, and most subscriptions, one [`SubscriptionCache`]
/// holds: beyond it the entries filled longest ago are dropped, so a
/// process's memory does not grow with the number of subscriptions stored
/// (a million subscriptions are never all resident).
pub const SUBSCRIPTION_CACHE_ENTRIES: usize = 10_000;

/// A map of at most `cap` entries, each stamped with when it was filled;
/// inserting beyond `cap` drops the entries filled first.
struct Bounded<K, V> {
    cap: usize,
    map: HashMap<K, (Instant, u64, V)>,
    /// Fill order: (key, fill number); a key filled again leaves a stale
    /// pair here, skipped when it comes up.
    order: VecDeque<(K, u64)>,
    fills: u64,
}

impl<K: Eq + Hash + Clone, V> Bounded<K, V> {
    fn new(cap: usize) -> Self {
        Bounded { cap: cap.max(1), map: HashMap::new(), order: VecDeque::new(), fills: 0 }
    }

    /// The value of `k` if it was filled less than `ttl` ago.
    fn fresh(&self, k: &K, ttl: Duration) -> Option<&V> {
        self.map.get(k).filter(|(at, _, _)| at.elapsed() < ttl).map(|(_, _, v)| v)
    }

    fn insert(&mut self, k: K, v: V) {
        self.fills += 1;
        self.order.push_back((k.clone(), self.fills));
        self.map.insert(k, (Instant::now(), self.fills, v));
        while self.map.len() > self.cap {
            let Some((old, n)) = self.order.pop_front() else { break };
            if self.map.get(&old).is_some_and(|(_, m, _)| *m == n) {
                self.map.remove(&old);
            }
        }
        // Keys filled again and again leave stale pairs: keep the queue
        // within a small multiple of the map.
        if self.order.len() > 2 * self.cap + 64 {
            let map = &self.map;
            self.order.retain(|(k, n)| map.get(k).is_some_and(|(_, m, _)| m == n));
        }
    }

    /// Forgets `k` (its stale pair in `order` is skipped later).
    fn remove(&mut self, k: &K) {
        self.map.remove(k);
    }

    fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

/// How long a process trusts a key it read: a revocation, expiry or
/// rotation made elsewhere applies within this (in the process that made
/// it, at once).
pub const KEY_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(10);

/// Most credentials one [`KeyCache`] holds (the oldest filled are dropped).
pub const KEY_CACHE_ENTRIES: usize = 4096;

/// Keys found by credential, kept for [`KEY_CACHE_TTL`] per process so a
/// request costs no store read while its key is cached. Only keys found
/// are kept: a credential that finds nothing is looked up again each time
/// (a key created elsewhere works at once, and a guess is never
/// remembered).
pub struct KeyCache {
    ttl: std::time::Duration,
    found: std::sync::Mutex<Bounded<String, Arc<crate::api_key::ApiKeyRecord>>>,
}

impl KeyCache {
    /// An empty cache trusting what it read for `ttl`.
    pub fn new(ttl: std::time::Duration) -> Self {
        KeyCache { ttl, found: std::sync::Mutex::new(Bounded::new(KEY_CACHE_ENTRIES)) }
    }

    /// The key holding the credential `lookup`, from the cache or (one
    /// read) the store.
    ///
    /// # Errors
    ///
    /// The store's, when it had to be read and failed.
    pub async fn find(
        &self,
        store: &dyn crate::ports::KeyStore,
        lookup: &str,
    ) -> crate::ports::StoreResult<Option<Arc<crate::api_key::ApiKeyRecord>>> {
        if let Some(k) = self.found.lock().expect("key cache").fresh(&lookup.to_string(), self.ttl) {
            return Ok(Some(k.clone()));
        }
        let found = store.find(lookup).await?.map(Arc::new);
        if let Some(k) = &found {
            self.found.lock().expect("key cache").insert(lookup.to_string(), k.clone());
        }
        Ok(found)
    }

    /// Forgets every credential of `key` (this process changed it).
    pub fn forget(&self, key: &crate::api_key::ApiKeyRecord) {
        let mut found = self.found.lock().expect("key cache");
        for c in &key.credentials {
            found.remove(&c.lookup);
        }
    }
}

/// A cached subscription (or the knowledge that there is none).
struct Cached {
    sub: Option<Arc<Subscription>>,
    /// Read by [`SubscriptionCache::confirm`] (not by a plain fill).
    confirmed: bool,
}

struct CacheState {
    routes: Bounded<RouteKey, Arc<[SubscriptionId]>>,
    subs: Bounded<SubscriptionId, Cached>,
}

/// Subscriptions cached for a short time, per route key (the ids indexed
/// under it, for routing) and per id (for delivery, retry policies and
/// routing's final check): routing and delivery read them for every event,
/// and they change rarely (docs/architecture.md#subscription-lookups-and-caching).
/// Each entry is trusted for the TTL ([`Config::subscription_cache_ttl`],
/// 5 s), so a change made elsewhere reaches this process within the TTL
/// (plus, on DynamoDB, the routing index's own propagation, usually well
/// under a second); writers in the same process invalidate it at once. At
/// most [`SUBSCRIPTION_CACHE_ENTRIES`] keys and as many subscriptions are
/// held.
pub struct SubscriptionCache {
    ttl: Duration,
    state: Mutex<CacheState>,
}

impl SubscriptionCache {
    /// An empty cache.
    pub fn new(ttl: Duration) -> Self {
        Self::with_capacity(ttl, SUBSCRIPTION_CACHE_ENTRIES)
    }

    /// An empty cache of at most `entries` keys and as many subscriptions.
    pub fn with_capacity(ttl: Duration, entries: usize) -> Self {
        SubscriptionCache {
            ttl,
            state: Mutex::new(CacheState { routes: Bounded::new(entries), subs: Bounded::new(entries) }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, CacheState> {
        self.state.lock().expect("subscription cache lock")
    }

    /// For each key, the ids indexed under it (one list per key, in the
    /// order asked), from the cache when fresh; the others in one store call.
    pub async fn routes(
        &self,
        store: &dyn SubscriptionStore,
        keys: &[RouteKey],
    ) -> Result<Vec<Arc<[SubscriptionId]>>, StoreError> {
        let mut out: Vec<Option<Arc<[SubscriptionId]>>> = {
            let st = self.state();
            keys.iter().map(|k| st.routes.fresh(k, self.ttl).cloned()).collect()
        };
        let missing: Vec<RouteKey> =
            keys.iter().zip(&out).filter(|(_, v)| v.is_none()).map(|(k, _)| k.clone()).collect();
        if !missing.is_empty() {
            let found = store.routes(&missing).await?;
            let mut st = self.state();
            let mut found = missing.into_iter().zip(found).map(|(k, ids)| {
                let ids: Arc<[SubscriptionId]> = ids.into();
                st.routes.insert(k, ids.clone());
                ids
            });
            for slot in out.iter_mut().filter(|v| v.is_none()) {
                *slot = found.next();
            }
        }
        Ok(out.into_iter().map(|v| v.unwrap_or_else(|| Arc::from(Vec::new()))).collect())
    }

    /// Several subscriptions by id (in the order asked), from the cache
    /// when fresh; the others in one store call.
    pub async fn get_many(
        &self,
        store: &dyn SubscriptionStore,
        ids: &[SubscriptionId],
    ) -> Result<Vec<Option<Arc<Subscription>>>, StoreError> {
        let mut out: Vec<Option<Option<Arc<Subscription>>>> = {
            let st = self.state();
            ids.iter().map(|id| st.subs.fresh(id, self.ttl).map(|c| c.sub.clone())).collect()
        };
        let missing: Vec<SubscriptionId> =
            ids.iter().zip(&out).filter(|(_, v)| v.is_none()).map(|(id, _)| id.clone()).collect();
        if !missing.is_empty() {
            let found = store.get_many(&missing).await?;
            let mut st = self.state();
            let mut found = missing.into_iter().zip(found).map(|(id, sub)| {
                let sub = sub.map(Arc::new);
                st.subs.insert(id, Cached { sub: sub.clone(), confirmed: false });
                sub
            });
            for slot in out.iter_mut().filter(|v| v.is_none()) {
                *slot = Some(found.next().flatten());
            }
        }
        Ok(out.into_iter().map(Option::flatten).collect())
    }

    /// One subscription, from the cache when fresh.
    pub async fn get(
        &self,
        store: &dyn SubscriptionStore,
        id: &SubscriptionId,
    ) -> Result<Option<Subscription>, StoreError> {
        let got = self.get_many(store, std::slice::from_ref(id)).await?;
        Ok(got.into_iter().next().flatten().map(|s| (*s).clone()))
    }

    /// The store's copy of a subscription this cache would refuse (unknown
    /// here, inactive or unverified): another container may have created,
    /// verified or re-activated it since this cache read it, so nothing is
    /// rejected on this cache's word alone. Read from the store at most
    /// once per subscription per TTL; the copy read replaces the cached one.
    pub async fn confirm(
        &self,
        store: &dyn SubscriptionStore,
        id: &SubscriptionId,
    ) -> Result<Option<Subscription>, StoreError> {
        let known = {
            let st = self.state();
            st.subs.fresh(id, self.ttl).map(|c| (c.confirmed, c.sub.clone()))
        };
        if let Some((true, sub)) = known {
            return Ok(sub.map(|s| (*s).clone()));
        }
        let fresh = store.get(id).await?;
        let cached_version = known.and_then(|(_, s)| s).map(|s| s.version);
        if fresh.as_ref().map(|s| s.version) != cached_version {
            tracing::debug!(subscription_id = id.as_str(), "subscription changed since this cache read it");
        }
        self.state().subs.insert(id.clone(), Cached { sub: fresh.clone().map(Arc::new), confirmed: true });
        Ok(fresh)
    }

    /// Forgets what was read, after a write in this process.
    pub async fn invalidate(&self) {
        let mut st = self.state();
        st.routes.clear();
        st.subs.clear();
    }

    /// How many route keys and subscriptions are held (for tests and metrics).
    pub fn held(&self) -> (usize, usize) {
        let st = self.state();
        (st.routes.len(), st.subs.len())
    }
}

/// Everything a stage needs.
pub struct Hookline {
    /// The backend's ports.
    pub stores: Stores,
    /// Settings.
    pub config: Config,
    /// The one client for deliveries and verification (pooled connections).
    pub client: HttpClient,
    /// Counters and histograms for `/metrics` and EMF.
    pub metrics: Metrics,
    /// Short-lived subscription cache.
    pub subscription_cache: SubscriptionCache,
    /// Subscriptions' breakers as last read, and attempt counts not yet
    /// stored ([`crate::stage::breaker`]).
    pub health_cache: crate::health::HealthCache,
    /// The crash and failure injection points armed in this context (an
    /// empty type without the `failpoints` feature): none unless a test
    /// arms them, or `hookline serve` read them from `HOOKLINE_FAILPOINT`.
    pub failpoints: crate::failpoint::Failpoints,
    /// The data key that seals stored secrets, and the purpose keys derived
    /// from it ([`crate::keyring`]): the same in every process of one
    /// deployment.
    pub keyring: Arc<crate::keyring::Keyring>,
    /// Delivery statistics counted by this process and not yet stored
    /// ([`crate::stats`], written by [`crate::stage::stats::flush`]).
    pub stats: crate::stats::StatsAggregator,
    /// The event types this process has recorded ([`crate::event_types`]).
    pub seen_types: crate::event_types::SeenTypes,
    /// What this process knows of the event catalog ([`crate::catalog`]),
    /// for ingest.
    pub catalog: crate::catalog::CatalogCache,
    /// How deliveries and verification messages reach their destination
    /// ([`crate::transport`]): [`Hookline::client`] alone (HTTPS) unless the
    /// backend installs its queue and bus transport.
    pub transport: Arc<dyn crate::transport::Transport>,
}

impl Hookline {
    /// Appends `rec` to the audit trail. Called after the action took effect;
    /// a failure is logged (with the record, so it is not lost from view) and
    /// not returned, so it never undoes or fails the action
    /// ([`crate::audit`]).
    pub async fn audit(&self, rec: crate::audit::AuditRecord) {
        if let Err(e) = self.stores.audit.append(&rec).await {
            tracing::error!(
                error = %e,
                action = rec.action.as_str(),
                actor = %crate::envelope::LogSafe(&rec.actor),
                subscription_id = rec.subscription_id.as_ref().map_or("", |s| s.as_str()),
                event_id = %crate::envelope::LogSafe(rec.event_id.as_ref().map_or("", |e| e.as_str())),
                dead_letter_id = rec.dead_letter_id.as_ref().map_or("", |d| d.as_str()),
                "audit record not stored"
            );
        }
    }

    /// Builds the context; no network call happens here (cold start). The
    /// keyring was unwrapped by the backend (its master key is not here).
    pub fn new(stores: Stores, config: Config, keyring: Arc<crate::keyring::Keyring>) -> Self {
        let mut http = config.http.clone();
        http.policy = config.address_policy;
        let client = HttpClient::new(http);
        Hookline {
            transport: Arc::new(client.clone()),
            client,
            subscription_cache: SubscriptionCache::new(config.subscription_cache_ttl),
            health_cache: Default::default(),
            stores,
            config,
            metrics: Metrics::default(),
            failpoints: Default::default(),
            keyring,
            stats: Default::default(),
            seen_types: Default::default(),
            catalog: Default::default(),
        }
    }
}

/// How much one run may do, and when a saga counts as stalled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReconcileLimits {
    /// Given-up stream batches taken at a time; a run keeps taking them
    /// until none is left or its `budget` is spent.
    pub max_batches: usize,
    /// How long a run may spend on given-up batches: long enough to drain
    /// an hour-long outage's batches in a few runs, short enough to leave
    /// the rest of the function's time for stalled sagas and the report.
    pub budget: Duration,
    /// Stalled sagas re-driven per run.
    pub max_sagas: usize,
    /// How long past its due time a saga may wait before it counts as
    /// stalled: longer than a job can legitimately wait in the deliveries
    /// queue (its visibility timeout times its receives, and any backlog).
    pub stall_margin: chrono::Duration,
}

impl Default for ReconcileLimits {
    /// Batches 10 at a time for up to 60 s (of the function's 120 s), 100
    /// sagas a run; stalled after 1 hour (the deliveries queue's 6 receives
    /// × 6 minutes of visibility is 36 minutes).
    fn default() -> Self {
        ReconcileLimits {
            max_batches: 10,
            budget: Duration::from_secs(60),
            max_sagas: 100,
            stall_margin: chrono::Duration::hours(1),
        }
    }
}
