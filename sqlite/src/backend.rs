//! One database file opened as every port `hookline serve` needs: the
//! adapters built on it, its data key unwrapped, and the one-time pass that
//! seals secrets stored before sealing existed.

use std::path::Path;
use std::sync::Arc;

use shared::error::StoreError;
use shared::queue::Queue;

use crate::stores::{
    self, SqliteAttempts, SqliteDeadLetters, SqliteEvents, SqliteSagas, SqliteSettings, SqliteSubscriptions,
};
use crate::{audit, health, limits, ordering, Db, Outbox, SqliteQueue, SqliteStreamFailures, Stream};

/// Everything `hookline serve` needs from one database file.
pub struct Backend {
    /// The ports, for the stages.
    pub stores: shared::context::Stores,
    /// The outbox streams, for the router and saga loops.
    pub outbox: Outbox,
    /// The delivery queue (also in `stores`, typed for `next_visible_at`).
    pub deliveries: SqliteQueue,
    /// The delivery queue's dead-letter queue.
    pub deliveries_dlq: SqliteQueue,
    /// The retry-timer queue.
    pub retries: SqliteQueue,
    /// The requeue queue (API requeues and DLQ redrives).
    pub requeues: SqliteQueue,
    /// Settings (the generated API key, the wrapped data key).
    pub settings: SqliteSettings,
    /// The database handle, for change notifications.
    pub db: Db,
    /// The deployment's data key, unwrapped by the master key the database
    /// was opened with; the stores seal secrets with it.
    pub keyring: Arc<shared::keyring::Keyring>,
}

/// Why a database could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The file or its schema.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Its data key (see [`shared::data_key`]).
    #[error(transparent)]
    DataKey(#[from] shared::data_key::DataKeyError),
}

/// Receives before a message goes to its queue's dead-letter table (a job is
/// only received again when its worker died without recording an attempt):
/// the same figure as the template's redrive policies.
pub const DELIVERY_MAX_RECEIVES: u32 = shared::bounds::QUEUE_MAX_RECEIVES;

impl Backend {
    /// Opens the database at `path` (created 0600 if missing), loads its
    /// data key through `master` (made and stored wrapped on first open,
    /// re-wrapped when `master`'s current key did not wrap it:
    /// [`shared::data_key::open_data_key`]) and builds every adapter on it.
    ///
    /// # Errors
    ///
    /// [`OpenError`]: the file, its schema, or its data key.
    pub async fn open(path: &Path, master: &dyn shared::data_key::KeyWrapper) -> Result<Backend, OpenError> {
        let db = Db::open(path)?;
        let settings = SqliteSettings(db.clone());
        let keyring = Arc::new(shared::data_key::open_data_key(&settings, master).await?);
        let deliveries = SqliteQueue::new(
            db.clone(),
            "deliveries",
            Some(("deliveries-dlq", DELIVERY_MAX_RECEIVES)),
            Stream::Deliveries,
        );
        let deliveries_dlq = SqliteQueue::new(db.clone(), "deliveries-dlq", None, Stream::Control);
        let retries =
            SqliteQueue::new(db.clone(), "retries", Some(("retries-dlq", DELIVERY_MAX_RECEIVES)), Stream::Control);
        let requeues =
            SqliteQueue::new(db.clone(), "requeue", Some(("requeue-dlq", DELIVERY_MAX_RECEIVES)), Stream::Control);
        let stores = shared::context::Stores {
            events: Arc::new(SqliteEvents(db.clone())),
            subscriptions: Arc::new(SqliteSubscriptions::new(db.clone(), keyring.clone())),
            sagas: Arc::new(SqliteSagas(db.clone())),
            attempts: Arc::new(SqliteAttempts(db.clone())),
            dead_letters: Arc::new(SqliteDeadLetters(db.clone())),
            deliveries: Queue::new(Arc::new(deliveries.clone())),
            dead_jobs: Queue::new(Arc::new(deliveries_dlq.clone())),
            retries: Queue::new(Arc::new(retries.clone())),
            requeues: Queue::new(Arc::new(requeues.clone())),
            stream_failures: Arc::new(SqliteStreamFailures(db.clone())),
            health: Arc::new(health::SqliteHealth(db.clone())),
            limits: Arc::new(limits::SqliteLimits(db.clone())),
            order: Arc::new(ordering::SqliteOrder(db.clone())),
            jobs: Arc::new(stores::SqliteJobs(db.clone())),
            keys: Arc::new(stores::SqliteApiKeys(db.clone())),
            audit: Arc::new(audit::SqliteAudit(db.clone())),
            idempotency: Arc::new(stores::SqliteIdempotency(db.clone())),
            stats: Arc::new(stores::SqliteStats(db.clone())),
            event_types: Arc::new(stores::SqliteEventTypes(db.clone())),
            acks: Arc::new(stores::SqliteAcks(db.clone())),
        };
        Ok(Backend {
            stores,
            outbox: Outbox(db.clone()),
            deliveries,
            deliveries_dlq,
            retries,
            requeues,
            settings,
            db,
            keyring,
        })
    }
}

/// The `settings` row that records that every subscription stored before
/// sealing existed was sealed ([`reseal_secrets`]).
const SECRETS_SEALED_SETTING: &str = "secrets_sealed";

/// Seals the secrets of subscriptions stored in clear (a database from
/// before sealing at rest), page by page in id order
/// ([`shared::sealed::reseal_pass`]), once per database: when the pass
/// reaches the end it records so in `settings`, and later starts skip it.
/// Every write seals anyway; this reaches the records nobody writes.
/// Answers how many were sealed. `hookline serve` runs it in the
/// background at start.
///
/// # Errors
///
/// The store's; the pass starts over on the next start.
pub async fn reseal_secrets(
    settings: &SqliteSettings,
    subscriptions: &dyn shared::ports::SubscriptionStore,
) -> Result<u64, StoreError> {
    if settings.get(SECRETS_SEALED_SETTING).await?.is_some() {
        return Ok(0);
    }
    let (mut total, mut after) = (0, None);
    loop {
        let (n, next) = shared::sealed::reseal_pass(subscriptions, after, 10).await?;
        total += n;
        match next {
            Some(next) => after = Some(next),
            None => break,
        }
        tokio::task::yield_now().await;
    }
    settings.set(SECRETS_SEALED_SETTING, &chrono::Utc::now().to_rfc3339()).await?;
    Ok(total)
}

/// Re-wraps the data key in `settings` under `master`'s current key while
/// the process runs (`hookline serve` on SIGHUP): nothing else is
/// rewritten, and every sealed value and the running keyring `held` stay as
/// they are, so rotating the master key needs no restart. Answers whether
/// the stored record changed (`false`: that key had wrapped it already).
///
/// # Errors
///
/// [`OpenError`]: none of `master`'s keys opens the stored data key, the
/// store failed, or the stored key is not `held` (the database was
/// replaced under the process).
pub async fn rewrap_data_key(
    settings: &SqliteSettings,
    held: &shared::keyring::Keyring,
    master: &dyn shared::data_key::KeyWrapper,
) -> Result<bool, OpenError> {
    use shared::data_key::{open_data_key, DataKeyError};
    use shared::ports::DataKeyStore;
    let before = settings.load().await?;
    let opened = open_data_key(settings, master).await?;
    if opened.current_id() != held.current_id() {
        return Err(OpenError::DataKey(DataKeyError::Corrupt(format!(
            "the database holds data key {}, this process {}",
            opened.current_id(),
            held.current_id()
        ))));
    }
    Ok(before.is_some_and(|b| b.wrapped_by != master.current()))
}
