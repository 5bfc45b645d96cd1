//! The bundle every stage works with: the ports, the configuration, the one
//! HTTP client and the metrics. Built once per process (or Lambda container).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::RwLock;

use crate::error::StoreError;
use crate::http_client::{ClientConfig, HttpClient};
use crate::ids::SubscriptionId;
use crate::job::{DeliveryJob, RequeueMessage, RetryTimer};
use crate::metrics::Metrics;
use crate::ports::{AttemptStore, DeadLetterStore, EventStore, SagaStore, StreamFailures, SubscriptionStore};
use crate::queue::Queue;
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
    pub reconcile: crate::stage::reconcile::ReconcileLimits,
}

impl Default for Config {
    /// The defaults, each held here once ([`Config::from_lookup`] reads
    /// settings on top of them).
    fn default() -> Self {
        Config {
            retention: chrono::Duration::days(30),
            max_body_bytes: 256 * 1024,
            max_batch: 100,
            address_policy: AddressPolicy::PublicOnly,
            delivery_visibility: Duration::from_secs(60),
            rotation_overlap: crate::subscription::DEFAULT_ROTATION_OVERLAP,
            subscription_cache_ttl: Duration::from_secs(5),
            http: ClientConfig::default(),
            default_retry_policy: crate::retry::RetryPolicy::default(),
            dead_letter_retention: chrono::Duration::days(60),
            reconcile: crate::stage::reconcile::ReconcileLimits::default(),
        }
    }
}

/// Subscriptions cached for a short time: routing and delivery read them for
/// every event, and they change rarely
/// (docs/architecture.md#subscription-lookups-and-caching). Writers in the same
/// process invalidate it; other processes see changes within the TTL.
pub struct SubscriptionCache {
    ttl: Duration,
    inner: RwLock<Option<(Instant, Arc<Vec<Subscription>>)>>,
    /// Ids [`SubscriptionCache::confirm`] read from the store since the last fill.
    confirmed: std::sync::Mutex<std::collections::HashSet<SubscriptionId>>,
}

impl SubscriptionCache {
    /// An empty cache.
    pub fn new(ttl: Duration) -> Self {
        SubscriptionCache { ttl, inner: RwLock::new(None), confirmed: Default::default() }
    }

    /// All subscriptions, from the cache when fresh.
    pub async fn all(&self, store: &dyn SubscriptionStore) -> Result<Arc<Vec<Subscription>>, StoreError> {
        if let Some((at, subs)) = &*self.inner.read().await {
            if at.elapsed() < self.ttl {
                return Ok(subs.clone());
            }
        }
        let mut guard = self.inner.write().await;
        if let Some((at, subs)) = &*guard {
            if at.elapsed() < self.ttl {
                return Ok(subs.clone());
            }
        }
        let subs = Arc::new(store.list().await?);
        *guard = Some((Instant::now(), subs.clone()));
        self.confirmed.lock().expect("cache lock").clear();
        Ok(subs)
    }

    /// One subscription, from the cache when fresh.
    pub async fn get(
        &self,
        store: &dyn SubscriptionStore,
        id: &SubscriptionId,
    ) -> Result<Option<Subscription>, StoreError> {
        Ok(self.all(store).await?.iter().find(|s| &s.id == id).cloned())
    }

    /// The store's copy of a subscription this cache would refuse (unknown
    /// here, inactive or unverified): another container may have created,
    /// verified or re-activated it since this cache was filled, so nothing
    /// is rejected on this cache's word alone. Read from the store at most
    /// once per subscription per cache fill; when the store's copy differs,
    /// the cache is dropped so the next read refills it.
    pub async fn confirm(
        &self,
        store: &dyn SubscriptionStore,
        id: &SubscriptionId,
    ) -> Result<Option<Subscription>, StoreError> {
        let cached = self.get(store, id).await?;
        if !self.confirmed.lock().expect("cache lock").insert(id.clone()) {
            return Ok(cached);
        }
        let fresh = store.get(id).await?;
        if fresh.as_ref().map(|s| s.version) != cached.as_ref().map(|s| s.version) {
            tracing::debug!(
                subscription_id = id.as_str(),
                "subscription changed since this cache was filled; refreshing"
            );
            self.invalidate().await;
        }
        Ok(fresh)
    }

    /// Forgets what was read, after a write in this process.
    pub async fn invalidate(&self) {
        *self.inner.write().await = None;
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
}

impl Hookline {
    /// Builds the context; no network call happens here (cold start).
    pub fn new(stores: Stores, config: Config) -> Self {
        let mut http = config.http.clone();
        http.policy = config.address_policy;
        Hookline {
            client: HttpClient::new(http),
            subscription_cache: SubscriptionCache::new(config.subscription_cache_ttl),
            stores,
            config,
            metrics: Metrics::default(),
        }
    }
}
