//! The deployment's data key on AWS ([`shared::data_key`]): KMS envelope
//! encryption. The data key is made in the container that first needs it,
//! wrapped with the deployment's KMS key (`Encrypt`, with an encryption
//! context naming it), and stored in KeysTable, one item (`id` =
//! [`DATA_KEY_ITEM`]) written with a conditional `PutItem`. Every container
//! reads that item and calls `Decrypt` once at cold start, then keeps the
//! key for its life: one `GetItem` and one `Decrypt` per cold start.
//!
//! KMS rotates the key material of the KMS key by itself (automatic
//! rotation; old material keeps decrypting), which changes nothing here.
//! Moving to another KMS key: point `KMS_KEY_ID` at it; each container then
//! decrypts with the key the item names and re-wraps under the new one
//! (`Encrypt`), replacing the item conditional on the one read.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_kms::primitives::Blob;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use crate::item::Attrs;
use crate::request::{backend, s, written};
use shared::data_key::{wrap_context, DataKeyError, KeyWrapper, WrappedDataKey};
use shared::keyring::DATA_KEY_BYTES;
use shared::ports::{DataKeyStore, StoreResult};

/// The `id` of KeysTable's data key item.
pub const DATA_KEY_ITEM: &str = "data-key";

/// The encryption context key of a wrapped data key (its value:
/// [`wrap_context`]); KMS refuses to decrypt without the same context.
pub const ENCRYPTION_CONTEXT_KEY: &str = "hookline";

/// KeysTable: the wrapped data key item (`id`, `key_id`, `wrapped`,
/// `wrapped_by`).
#[derive(Clone)]
pub struct DynamoDataKeys {
    client: Client,
    table: String,
}

impl DynamoDataKeys {
    /// The store over `table`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoDataKeys { client, table: table.into() }
    }

    /// `PutItem` of `key` under `condition` (with `names` and `values`);
    /// `false` when the condition failed.
    async fn put(
        &self,
        key: &WrappedDataKey,
        condition: &str,
        names: HashMap<String, String>,
        values: HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
    ) -> StoreResult<bool> {
        let res = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(Self::attrs(key).into_sdk()))
            .condition_expression(condition)
            .set_expression_attribute_names((!names.is_empty()).then_some(names))
            .set_expression_attribute_values((!values.is_empty()).then_some(values))
            .send()
            .await;
        written("PutItem", &self.table, res)
    }

    fn attrs(key: &WrappedDataKey) -> Attrs {
        let mut a = Attrs::new();
        a.put_s("id", DATA_KEY_ITEM)
            .put_s("key_id", key.key_id.as_str())
            .put_s("wrapped", key.wrapped.as_str())
            .put_s("wrapped_by", key.wrapped_by.as_str());
        a
    }
}

#[async_trait]
impl DataKeyStore for DynamoDataKeys {
    /// Strongly consistent `GetItem`.
    async fn load(&self) -> StoreResult<Option<WrappedDataKey>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("id", s(DATA_KEY_ITEM))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| backend("GetItem", &self.table, e))?;
        let Some(a) = out.item().map(Attrs::from_sdk) else { return Ok(None) };
        Ok(Some(WrappedDataKey {
            key_id: a.s("key_id")?.to_string(),
            wrapped: a.s("wrapped")?.to_string(),
            wrapped_by: a.s("wrapped_by")?.to_string(),
        }))
    }

    /// `PutItem` with `attribute_not_exists(id)`.
    async fn create(&self, key: &WrappedDataKey) -> StoreResult<bool> {
        self.put(key, "attribute_not_exists(id)", HashMap::new(), HashMap::new()).await
    }

    /// `PutItem` conditional on the stored `wrapped` (a reserved word,
    /// hence `#w`) being the one read.
    async fn replace(&self, old: &WrappedDataKey, new: &WrappedDataKey) -> StoreResult<bool> {
        let names = HashMap::from([("#w".to_string(), "wrapped".to_string())]);
        self.put(new, "#w = :old", names, HashMap::from([(":old".to_string(), s(&old.wrapped))])).await
    }
}

/// The deployment's KMS key as the data key's [`KeyWrapper`]: `Encrypt`
/// and `Decrypt` of 32 bytes with the encryption context
/// `{"hookline": "data-key:<key id>"}`. The wrapped text is the
/// ciphertext blob in base64.
#[derive(Clone)]
pub struct KmsKey {
    client: aws_sdk_kms::Client,
    key_id: String,
}

impl KmsKey {
    /// `key_id`: the KMS key's ARN (or id, or alias ARN) that wraps new
    /// data keys (`KMS_KEY_ID`).
    pub fn new(client: aws_sdk_kms::Client, key_id: impl Into<String>) -> Self {
        KmsKey { client, key_id: key_id.into() }
    }
}

fn kms_error(op: &str, e: impl std::fmt::Display) -> DataKeyError {
    DataKeyError::Wrapper(format!("kms {op}: {e}"))
}

#[async_trait]
impl KeyWrapper for KmsKey {
    fn current(&self) -> &str {
        &self.key_id
    }

    async fn wrap(&self, key: &[u8; DATA_KEY_BYTES], key_id: &str) -> Result<String, DataKeyError> {
        let out = self
            .client
            .encrypt()
            .key_id(&self.key_id)
            .plaintext(Blob::new(key.to_vec()))
            .encryption_context(ENCRYPTION_CONTEXT_KEY, wrap_context(key_id))
            .send()
            .await
            .map_err(|e| kms_error("Encrypt", aws_sdk_kms::error::DisplayErrorContext(e)))?;
        let blob = out.ciphertext_blob().ok_or_else(|| kms_error("Encrypt", "no ciphertext in the answer"))?;
        Ok(STANDARD.encode(blob.as_ref()))
    }

    /// `Decrypt` naming the key that wrapped it (`wrapped_by`), so the
    /// call is authorized on that key only.
    async fn unwrap(&self, record: &WrappedDataKey) -> Result<[u8; DATA_KEY_BYTES], DataKeyError> {
        let blob = STANDARD
            .decode(&record.wrapped)
            .map_err(|_| DataKeyError::Corrupt("the wrapped data key is not base64".into()))?;
        let out = self
            .client
            .decrypt()
            .key_id(&record.wrapped_by)
            .ciphertext_blob(Blob::new(blob))
            .encryption_context(ENCRYPTION_CONTEXT_KEY, wrap_context(&record.key_id))
            .send()
            .await
            .map_err(|e| kms_error("Decrypt", aws_sdk_kms::error::DisplayErrorContext(e)))?;
        let plain = out.plaintext().ok_or_else(|| kms_error("Decrypt", "no plaintext in the answer"))?;
        plain.as_ref().try_into().map_err(|_| DataKeyError::Corrupt("the unwrapped data key is not 32 bytes".into()))
    }
}

/// The deployment's data key: loaded from KeysTable `table` through
/// `dynamodb`, unwrapped with KMS key `kms_key_id` through `kms`
/// ([`shared::data_key::open_data_key`]).
///
/// # Errors
///
/// [`DataKeyError`]: DynamoDB or KMS failed, or the item is corrupt.
pub async fn open_data_key(
    dynamodb: Client,
    kms: aws_sdk_kms::Client,
    table: &str,
    kms_key_id: &str,
) -> Result<shared::keyring::Keyring, DataKeyError> {
    shared::data_key::open_data_key(&DynamoDataKeys::new(dynamodb, table), &KmsKey::new(kms, kms_key_id)).await
}

/// The `id` of KeysTable's item that records how far the re-seal pass got
/// (`after`: the last subscription id examined) or that it finished
/// (`done`: when).
pub const RESEAL_ITEM: &str = "reseal";

/// Subscription pages one [`reseal_step`] seals at most (100 each).
pub const RESEAL_PAGES_PER_STEP: usize = 10;

/// One bounded step of sealing subscriptions stored in clear before
/// sealing existed ([`shared::sealed::reseal_pass`]), run by the scheduled
/// reconciler: at most [`RESEAL_PAGES_PER_STEP`] pages from where the last
/// step stopped, the position kept in KeysTable's [`RESEAL_ITEM`]. Once the
/// pass reaches the end it records so, and each later step is one
/// `GetItem`. The reconciler runs one at a time, so the item is written
/// without a condition. Answers how many were sealed.
///
/// # Errors
///
/// The stores'; the next step starts again from the last position written.
pub async fn reseal_step(
    dynamodb: &Client,
    keys_table: &str,
    subscriptions: &dyn shared::ports::SubscriptionStore,
) -> StoreResult<u64> {
    let out = dynamodb
        .get_item()
        .table_name(keys_table)
        .key("id", s(RESEAL_ITEM))
        .consistent_read(true)
        .send()
        .await
        .map_err(|e| backend("GetItem", keys_table, e))?;
    let state = out.item().map(Attrs::from_sdk);
    if let Some(a) = &state {
        if a.opt_s("done")?.is_some() {
            return Ok(0);
        }
    }
    let after = state.as_ref().map(|a| a.opt_s("after")).transpose()?.flatten().map(shared::ids::SubscriptionId::new);
    let (sealed, next) = shared::sealed::reseal_pass(subscriptions, after, RESEAL_PAGES_PER_STEP).await?;
    let mut a = Attrs::new();
    a.put_s("id", RESEAL_ITEM);
    match next {
        Some(next) => a.put_s("after", next.as_str()),
        None => a.put_s("done", chrono::Utc::now().to_rfc3339()),
    };
    dynamodb
        .put_item()
        .table_name(keys_table)
        .set_item(Some(a.into_sdk()))
        .send()
        .await
        .map_err(|e| backend("PutItem", keys_table, e))?;
    Ok(sealed)
}
