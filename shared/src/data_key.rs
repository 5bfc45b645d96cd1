//! The deployment's data key: one per deployment, stored only wrapped by a
//! master key that is not stored beside the data, and unwrapped once per
//! process into the [`Keyring`] every context carries.
//!
//! The backends differ only in where the wrapped key lives (the
//! [`DataKeyStore`] port: a `settings` row on SQLite, an item of KeysTable
//! on DynamoDB) and in what wraps it (a [`KeyWrapper`]: the key file's
//! [`MasterKeys`] on `hookline serve`, KMS on AWS). [`open_data_key`] is the
//! one sequence both run at start:
//!
//! 1. load the wrapped key; if there is none, make one
//!    ([`crate::keyring::random_data_key`]), wrap it with the current master
//!    key and store it with a conditional write (a process that lost the
//!    race reads the winner's);
//! 2. unwrap it with whichever master key wrapped it;
//! 3. if that was not the current master key (the operator rotated it),
//!    wrap it again with the current one and replace the stored record,
//!    conditional on it being the one read.
//!
//! The data key itself never changes, so nothing it sealed needs sealing
//! again after a master-key rotation.

use async_trait::async_trait;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::error::StoreError;
use crate::keyring::{random_data_key, Keyring, DATA_KEY_BYTES};
use crate::ports::DataKeyStore;
pub use crate::ports::WrappedDataKey;

/// Why the data key could not be had.
#[derive(Debug, thiserror::Error)]
pub enum DataKeyError {
    /// Reading or writing the wrapped key failed.
    #[error("the wrapped data key could not be read or stored: {0}")]
    Store(#[from] StoreError),
    /// No master key this process holds unwraps the stored data key (the
    /// key file or `HOOKLINE_MASTER_KEY` lost its old key, or is another
    /// deployment's).
    #[error("the data key was wrapped by master key {wrapped_by:?}, which is not among this process's master keys ({held}); restore the key file from its backup, or list the old key after the new one")]
    NoMasterKey {
        /// The master key id the record names.
        wrapped_by: String,
        /// The ids this process holds, comma-separated.
        held: String,
    },
    /// The master key (KMS, or the key file's key) refused or failed.
    #[error("the master key failed: {0}")]
    Wrapper(String),
    /// The stored record is not a wrapped data key (edited or corrupt).
    #[error("the stored data key record is corrupt: {0}")]
    Corrupt(String),
}

/// What wraps and unwraps the data key: the master key (the key file's on
/// `hookline serve`, KMS on AWS). A port, so the sequence of
/// [`open_data_key`] is written once.
#[async_trait]
pub trait KeyWrapper: Send + Sync {
    /// The id of the master key new wraps use.
    fn current(&self) -> &str;
    /// `key` (the data key called `key_id`) wrapped by the current master key.
    async fn wrap(&self, key: &[u8; DATA_KEY_BYTES], key_id: &str) -> Result<String, DataKeyError>;
    /// The data key of `record`, unwrapped by the master key that wrapped it.
    async fn unwrap(&self, record: &WrappedDataKey) -> Result<[u8; DATA_KEY_BYTES], DataKeyError>;
}

/// The context a data key is wrapped for (binds the wrap to the key id).
pub fn wrap_context(key_id: &str) -> String {
    format!("data-key:{key_id}")
}

/// A fresh data key id: `dk` and 12 random hex digits.
fn new_key_id() -> String {
    let mut b = [0u8; 6];
    rand::thread_rng().fill_bytes(&mut b);
    format!("dk{}", b.iter().map(|x| format!("{x:02x}")).collect::<String>())
}

/// The data key of this deployment as a [`Keyring`]: loaded from `store`
/// and unwrapped by `wrapper`, created on first use, re-wrapped when the
/// current master key did not wrap it (the module docs give the sequence).
///
/// # Errors
///
/// [`DataKeyError`]: the store failed, no master key opens the stored key,
/// or the master key failed.
pub async fn open_data_key(store: &dyn DataKeyStore, wrapper: &dyn KeyWrapper) -> Result<Keyring, DataKeyError> {
    // Two rounds at most: a lost race to create is followed by a read of
    // the winner's record; a third would mean the record vanished again.
    for _ in 0..3 {
        let Some(record) = store.load().await? else {
            let key = random_data_key();
            let key_id = new_key_id();
            let record = WrappedDataKey {
                wrapped: wrapper.wrap(&key, &key_id).await?,
                key_id,
                wrapped_by: wrapper.current().into(),
            };
            if store.create(&record).await? {
                tracing::info!(data_key = %record.key_id, master_key = %record.wrapped_by, "created the deployment's data key");
                return Ok(Keyring::new(record.key_id, key));
            }
            continue;
        };
        if record.key_id.is_empty() || record.key_id.contains('.') {
            return Err(DataKeyError::Corrupt(format!("data key id {:?}", record.key_id)));
        }
        let key = wrapper.unwrap(&record).await?;
        if record.wrapped_by != wrapper.current() {
            let rewrapped = WrappedDataKey {
                key_id: record.key_id.clone(),
                wrapped: wrapper.wrap(&key, &record.key_id).await?,
                wrapped_by: wrapper.current().into(),
            };
            // `false`: another process re-wrapped it first; either copy opens.
            let replaced = store.replace(&record, &rewrapped).await?;
            tracing::info!(data_key = %record.key_id, from = %record.wrapped_by, to = %rewrapped.wrapped_by, replaced, "re-wrapped the data key under the current master key");
        }
        return Ok(Keyring::new(record.key_id, key));
    }
    Err(DataKeyError::Store(StoreError::other("the data key record kept disappearing while being created".into())))
}

/// Master keys held locally (a key file or `HOOKLINE_MASTER_KEY`): the
/// current one wraps, every listed one unwraps, so an operator rotates by
/// putting a new key first and keeping the old one after it until every
/// process has started once (see docs/operations.md).
pub struct MasterKeys {
    /// (id, wrapping keyring), current first.
    keys: Vec<(String, Keyring)>,
}

impl std::fmt::Debug for MasterKeys {
    /// Names the keys, never shows them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterKeys").field("ids", &self.ids()).finish()
    }
}

/// Why a master key text was refused (never shows the text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MasterKeyError {
    /// No key in the text (only blank lines and comments).
    #[error("no master key: expected one key per line (base64 of 32 bytes), the current one first")]
    Empty,
    /// A line is not base64 of 32 bytes.
    #[error("master key line {line} is not base64 of 32 bytes")]
    BadLine {
        /// 1-based line number.
        line: usize,
    },
    /// The same key listed twice.
    #[error("master key line {line} repeats an earlier key")]
    Repeated {
        /// 1-based line number.
        line: usize,
    },
}

impl MasterKeys {
    /// Parses one key per line (base64, standard or URL-safe, padded or
    /// not, of 32 bytes), the current one first; blank lines and lines
    /// starting with `#` are skipped.
    ///
    /// # Errors
    ///
    /// [`MasterKeyError`]: no key, a bad line, a repeated key.
    pub fn parse(text: &str) -> Result<MasterKeys, MasterKeyError> {
        let mut keys: Vec<(String, Keyring)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let normalized: String = line
                .trim_end_matches('=')
                .chars()
                .map(|c| {
                    if c == '+' {
                        '-'
                    } else if c == '/' {
                        '_'
                    } else {
                        c
                    }
                })
                .collect();
            let bytes = URL_SAFE_NO_PAD.decode(normalized).map_err(|_| MasterKeyError::BadLine { line: i + 1 })?;
            let key: [u8; DATA_KEY_BYTES] = bytes.try_into().map_err(|_| MasterKeyError::BadLine { line: i + 1 })?;
            let id = master_key_id(&key);
            if keys.iter().any(|(k, _)| *k == id) {
                return Err(MasterKeyError::Repeated { line: i + 1 });
            }
            keys.push((id.clone(), Keyring::new(id, key)));
        }
        if keys.is_empty() {
            return Err(MasterKeyError::Empty);
        }
        Ok(MasterKeys { keys })
    }

    /// One new random master key (tests and tools that keep nothing past
    /// the process: what it wraps cannot be unwrapped by another process).
    pub fn generate() -> MasterKeys {
        MasterKeys::parse(&Self::generate_line()).expect("a generated key parses")
    }

    /// A new random master key as one line of a key file (URL-safe base64).
    pub fn generate_line() -> String {
        URL_SAFE_NO_PAD.encode(random_data_key())
    }

    /// The ids of the keys held, current first.
    pub fn ids(&self) -> Vec<&str> {
        self.keys.iter().map(|(id, _)| id.as_str()).collect()
    }
}

/// A master key's id: `mk` and the first 12 hex digits of a hash of it, so
/// the key file holds keys only and a wrapped record names its key without
/// revealing it.
pub fn master_key_id(key: &[u8; DATA_KEY_BYTES]) -> String {
    let mut h = Sha256::new();
    h.update(b"hookline master key id\0");
    h.update(key);
    format!("mk{}", h.finalize().iter().take(6).map(|x| format!("{x:02x}")).collect::<String>())
}

#[async_trait]
impl KeyWrapper for MasterKeys {
    fn current(&self) -> &str {
        &self.keys[0].0
    }

    /// Sealed by the current master key ([`Keyring::seal`]) for
    /// [`wrap_context`].
    async fn wrap(&self, key: &[u8; DATA_KEY_BYTES], key_id: &str) -> Result<String, DataKeyError> {
        Ok(self.keys[0].1.seal(key, &wrap_context(key_id)))
    }

    async fn unwrap(&self, record: &WrappedDataKey) -> Result<[u8; DATA_KEY_BYTES], DataKeyError> {
        let Some((_, keyring)) = self.keys.iter().find(|(id, _)| *id == record.wrapped_by) else {
            return Err(DataKeyError::NoMasterKey {
                wrapped_by: record.wrapped_by.clone(),
                held: self.ids().join(", "),
            });
        };
        let key = keyring
            .open(&record.wrapped, &wrap_context(&record.key_id))
            .map_err(|e| DataKeyError::Corrupt(format!("the wrapped data key does not open: {e}")))?;
        key.try_into().map_err(|_| DataKeyError::Corrupt("the unwrapped data key is not 32 bytes".into()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::ports::StoreResult;

    /// The port's contract in memory (the conformance suite checks the
    /// backends' adapters against the same contract).
    #[derive(Default)]
    struct Memory(Mutex<Option<WrappedDataKey>>);

    #[async_trait]
    impl DataKeyStore for Memory {
        async fn load(&self) -> StoreResult<Option<WrappedDataKey>> {
            Ok(self.0.lock().unwrap().clone())
        }
        async fn create(&self, key: &WrappedDataKey) -> StoreResult<bool> {
            let mut g = self.0.lock().unwrap();
            Ok(g.is_none() && {
                *g = Some(key.clone());
                true
            })
        }
        async fn replace(&self, old: &WrappedDataKey, new: &WrappedDataKey) -> StoreResult<bool> {
            let mut g = self.0.lock().unwrap();
            Ok(g.as_ref() == Some(old) && {
                *g = Some(new.clone());
                true
            })
        }
    }

    fn keys(lines: &[&str]) -> MasterKeys {
        MasterKeys::parse(&lines.join("\n")).unwrap()
    }

    #[tokio::test]
    async fn the_data_key_is_made_once_and_opened_by_every_process() {
        let store = Memory::default();
        let master = MasterKeys::generate_line();
        let a = open_data_key(&store, &keys(&[&master])).await.unwrap();
        let stored = store.0.lock().unwrap().clone().unwrap();
        assert!(!stored.wrapped.contains(&URL_SAFE_NO_PAD.encode(a.derive("x"))));
        let b = open_data_key(&store, &keys(&[&master])).await.unwrap();
        assert_eq!(a.current_id(), b.current_id());
        assert_eq!(a.derive("cursor"), b.derive("cursor"), "the same data key");
        let sealed = a.seal(b"whsec_x", "c");
        assert_eq!(b.open(&sealed, "c").unwrap(), b"whsec_x");
        let other = MasterKeys::generate_line();
        let err = open_data_key(&store, &keys(&[&other])).await.unwrap_err();
        assert!(matches!(err, DataKeyError::NoMasterKey { .. }), "{err}");
        assert!(!err.to_string().contains(&other) && !err.to_string().contains(&master));
    }

    #[tokio::test]
    async fn rotating_the_master_key_rewraps_the_same_data_key() {
        let store = Memory::default();
        let (old, new) = (MasterKeys::generate_line(), MasterKeys::generate_line());
        let before = open_data_key(&store, &keys(&[&old])).await.unwrap();
        let sealed = before.seal(b"whsec_y", "signing-secret:sub_1");
        let rotated = keys(&[&new, &old]);
        let after = open_data_key(&store, &rotated).await.unwrap();
        let record = store.0.lock().unwrap().clone().unwrap();
        assert_eq!(record.wrapped_by, rotated.current(), "re-wrapped under the new key");
        assert_eq!(after.open(&sealed, "signing-secret:sub_1").unwrap(), b"whsec_y");
        // Once re-wrapped, the old key can leave the file.
        let only_new = open_data_key(&store, &keys(&[&new])).await.unwrap();
        assert_eq!(only_new.derive("cursor"), before.derive("cursor"));
        assert!(open_data_key(&store, &keys(&[&old])).await.is_err(), "the old key alone no longer opens it");
    }

    #[tokio::test]
    async fn a_process_that_loses_the_race_to_create_uses_the_winners_key() {
        struct Racing(Memory, WrappedDataKey);
        #[async_trait]
        impl DataKeyStore for Racing {
            async fn load(&self) -> StoreResult<Option<WrappedDataKey>> {
                self.0.load().await
            }
            async fn create(&self, key: &WrappedDataKey) -> StoreResult<bool> {
                // Another process creates its key between our load and create.
                self.0.create(&self.1).await?;
                self.0.create(key).await
            }
            async fn replace(&self, old: &WrappedDataKey, new: &WrappedDataKey) -> StoreResult<bool> {
                self.0.replace(old, new).await
            }
        }
        let master = keys(&[&MasterKeys::generate_line()]);
        let winner_key = random_data_key();
        let winner = WrappedDataKey {
            key_id: "dkwinner".into(),
            wrapped: master.wrap(&winner_key, "dkwinner").await.unwrap(),
            wrapped_by: master.current().into(),
        };
        let ring = open_data_key(&Racing(Memory::default(), winner), &master).await.unwrap();
        assert_eq!(ring.current_id(), "dkwinner");
        assert_eq!(ring.derive("p"), Keyring::new("dkwinner", winner_key).derive("p"));
    }

    #[test]
    fn key_files_are_parsed_strictly_and_never_echoed() {
        let k = MasterKeys::generate_line();
        let std_b64 = base64::engine::general_purpose::STANDARD.encode(random_data_key());
        let parsed = MasterKeys::parse(&format!("# current\n{k}\n\n{std_b64}\n")).unwrap();
        assert_eq!(parsed.ids().len(), 2);
        assert!(parsed.ids()[0].starts_with("mk"));
        assert_eq!(MasterKeys::parse("# nothing\n\n").unwrap_err(), MasterKeyError::Empty);
        assert_eq!(MasterKeys::parse(&format!("{k}\nnot-a-key")).unwrap_err(), MasterKeyError::BadLine { line: 2 });
        assert_eq!(MasterKeys::parse("QUJD").unwrap_err(), MasterKeyError::BadLine { line: 1 }, "too short");
        assert_eq!(MasterKeys::parse(&format!("{k}\n{k}")).unwrap_err(), MasterKeyError::Repeated { line: 2 });
        assert!(!format!("{parsed:?}").contains(&k));
    }
}
