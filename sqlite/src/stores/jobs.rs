//! The jobs table (bulk jobs) and the process settings (among them the
//! wrapped data key).

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension};

use super::dead_letters::open_count;
use crate::{encode, sql, stored, Db};
use shared::bulk::{Job, TenantSlots};
use shared::data_key::WrappedDataKey;
use shared::ports::{DataKeyStore, JobStore, StoreResult};

/// Jobs table: one row per bulk job, its JSON and version.
#[derive(Clone)]
pub struct SqliteJobs(pub Db);

#[async_trait]
impl JobStore for SqliteJobs {
    async fn create(&self, job: &Job) -> StoreResult<bool> {
        let job = job.clone();
        self.0
            .call(move |c, _| {
                let n = c
                    .prepare_cached(
                        "INSERT INTO jobs (id, version, data) VALUES (?1, ?2, ?3) ON CONFLICT (id) DO NOTHING",
                    )
                    .map_err(sql)?
                    .execute(params![job.id, job.version as i64, encode(&job)])
                    .map_err(sql)?;
                Ok(n == 1)
            })
            .await
    }

    async fn get(&self, id: &str) -> StoreResult<Option<Job>> {
        let id = id.to_string();
        self.0.call(move |c, _| stored(c, "SELECT data FROM jobs WHERE id = ?1", [&id])).await
    }

    async fn update(&self, job: &Job, expected_version: u64) -> StoreResult<bool> {
        let job = job.clone();
        self.0
            .call(move |c, _| {
                let n = c
                    .prepare_cached("UPDATE jobs SET version = ?1, data = ?2 WHERE id = ?3 AND version = ?4")
                    .map_err(sql)?
                    .execute(params![job.version as i64, encode(&job), job.id, expected_version as i64])
                    .map_err(sql)?;
                Ok(n == 1)
            })
            .await
    }

    /// A row of the jobs table keyed `slots#…` (never a job id).
    async fn slots(&self, key: &str) -> StoreResult<Option<TenantSlots>> {
        let key = key.to_string();
        self.0.call(move |c, _| stored(c, "SELECT data FROM jobs WHERE id = ?1", [&key])).await
    }

    async fn put_slots(&self, key: &str, slots: &TenantSlots, expected_version: u64) -> StoreResult<bool> {
        let (key, slots) = (key.to_string(), slots.clone());
        self.0
            .call(move |c, _| {
                let n = if expected_version == 0 {
                    c.prepare_cached(
                        "INSERT INTO jobs (id, version, data) VALUES (?1, ?2, ?3) ON CONFLICT (id) DO NOTHING",
                    )
                    .map_err(sql)?
                    .execute(params![key, slots.version as i64, encode(&slots)])
                    .map_err(sql)?
                } else {
                    c.prepare_cached("UPDATE jobs SET version = ?1, data = ?2 WHERE id = ?3 AND version = ?4")
                        .map_err(sql)?
                        .execute(params![slots.version as i64, encode(&slots), key, expected_version as i64])
                        .map_err(sql)?
                };
                Ok(n == 1)
            })
            .await
    }
}

/// Process settings (the generated API key) kept with the data.
#[derive(Clone)]
pub struct SqliteSettings(pub Db);

impl SqliteSettings {
    /// The stored value of `key`, or `init()` stored now and returned.
    pub async fn get_or_init(&self, key: &str, init: impl FnOnce() -> String + Send + 'static) -> StoreResult<String> {
        let key = key.to_string();
        // A call may run twice (`Db::call`): the value is made once.
        let init = std::sync::Mutex::new(Some(init));
        let made = std::sync::OnceLock::new();
        self.0
            .call(move |c, _| {
                let v: Option<String> = c
                    .query_row("SELECT value FROM settings WHERE key = ?1", [&key], |r| r.get(0))
                    .optional()
                    .map_err(sql)?;
                if let Some(v) = v {
                    return Ok(v);
                }
                let v = made.get_or_init(|| init.lock().expect("init").take().expect("made once")()).clone();
                c.execute("INSERT INTO settings (key, value) VALUES (?1, ?2)", params![key, v]).map_err(sql)?;
                Ok(v)
            })
            .await
    }

    /// The stored value of `key`, if any.
    pub async fn get(&self, key: &str) -> StoreResult<Option<String>> {
        let key = key.to_string();
        self.0
            .call(move |c, _| {
                c.query_row("SELECT value FROM settings WHERE key = ?1", [&key], |r| r.get(0)).optional().map_err(sql)
            })
            .await
    }

    /// Stores `value` under `key`, replacing any.
    pub async fn set(&self, key: &str, value: &str) -> StoreResult<()> {
        let (key, value) = (key.to_string(), value.to_string());
        self.0
            .call(move |c, _| {
                c.execute(
                    "INSERT INTO settings (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    params![key, value],
                )
                .map_err(sql)
                .map(drop)
            })
            .await
    }

    /// Counts for metrics: open dead letters.
    pub async fn open_dead_letters(&self) -> StoreResult<u64> {
        self.0.call(|c, _| open_count(c)).await
    }
}

/// The `settings` row holding the wrapped data key ([`shared::data_key`]).
pub const DATA_KEY_SETTING: &str = "data_key";

/// The wrapped data key is one `settings` row (JSON of the record), inserted
/// if absent and replaced only over the text read.
#[async_trait]
impl DataKeyStore for SqliteSettings {
    async fn load(&self) -> StoreResult<Option<WrappedDataKey>> {
        self.get(DATA_KEY_SETTING).await?.map(|v| crate::decode(&v)).transpose()
    }

    async fn create(&self, key: &WrappedDataKey) -> StoreResult<bool> {
        let value = encode(key);
        self.0
            .call(move |c, _| {
                let n = c
                    .execute(
                        "INSERT INTO settings (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
                        params![DATA_KEY_SETTING, value],
                    )
                    .map_err(sql)?;
                Ok(n == 1)
            })
            .await
    }

    async fn replace(&self, old: &WrappedDataKey, new: &WrappedDataKey) -> StoreResult<bool> {
        let (old, new) = (encode(old), encode(new));
        self.0
            .call(move |c, _| {
                let n = c
                    .execute(
                        "UPDATE settings SET value = ?1 WHERE key = ?2 AND value = ?3",
                        params![new, DATA_KEY_SETTING, old],
                    )
                    .map_err(sql)?;
                Ok(n == 1)
            })
            .await
    }
}
