//! Pure mappings between Hookline's records and DynamoDB items, laid out
//! exactly as `infra/README.md` specifies (the contract between
//! `template.yaml`, the adapters and the stream handlers).
//!
//! The mappings work on a neutral representation, [`Attrs`], so the same code
//! decodes the SDK's `HashMap<String, aws_sdk_dynamodb::types::AttributeValue>`
//! (what `GetItem`/`Query` return) and the stream images Lambda delivers
//! (`serde_dynamo::Item` in `aws_lambda_events::dynamodb::StreamRecord`), or
//! DynamoDB JSON.
//! Nothing here does I/O.

use std::collections::HashMap;
use std::str::FromStr;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use shared::attempt::Attempt;
use shared::error::StoreError;
use shared::ids::{EventId, SagaId, SubscriptionId, WebhookId};
use shared::keyring::Keyring;
use shared::saga::{Origin, Saga, SagaState, SagaStatus};
use shared::subscription::Subscription;

mod dead_letters;
mod events;

pub use dead_letters::*;
pub use events::*;

/// One attribute value, reduced to the types Hookline's items use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attr {
    /// A string (`S`).
    S(String),
    /// A number (`N`), kept as DynamoDB sends it: decimal text.
    N(String),
    /// A binary (`B`): the compressed `data_z` of large events.
    B(Vec<u8>),
    /// An explicit `NULL`; read like an absent attribute.
    Null,
    /// Any other type (binary, bool, sets, lists, maps), named by its
    /// DynamoDB type tag; Hookline never writes these, so reading one as a
    /// field is a corruption error.
    Other(String),
}

/// One item as attribute name → value: the neutral form every mapping here
/// reads and writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attrs(pub HashMap<String, Attr>);

impl Attrs {
    /// An empty item.
    pub fn new() -> Self {
        Attrs(HashMap::new())
    }

    /// Sets a string attribute.
    pub fn put_s(&mut self, name: &str, value: impl Into<String>) -> &mut Self {
        self.0.insert(name.to_string(), Attr::S(value.into()));
        self
    }

    /// Sets a number attribute.
    pub fn put_n(&mut self, name: &str, value: impl ToString) -> &mut Self {
        self.0.insert(name.to_string(), Attr::N(value.to_string()));
        self
    }

    /// Sets a string attribute if `value` is `Some`; leaves it absent otherwise.
    pub fn put_opt_s(&mut self, name: &str, value: Option<impl Into<String>>) -> &mut Self {
        if let Some(v) = value {
            self.put_s(name, v);
        }
        self
    }

    /// A required string attribute.
    pub fn s(&self, name: &str) -> Result<&str, StoreError> {
        self.opt_s(name)?.ok_or_else(|| missing(name))
    }

    /// An optional string attribute (absent or `NULL` read as `None`).
    pub fn opt_s(&self, name: &str) -> Result<Option<&str>, StoreError> {
        match self.0.get(name) {
            None | Some(Attr::Null) => Ok(None),
            Some(Attr::S(s)) => Ok(Some(s)),
            Some(other) => Err(wrong_type(name, "S", other)),
        }
    }

    /// A required number attribute, parsed as `T`.
    pub fn n<T: FromStr>(&self, name: &str) -> Result<T, StoreError> {
        match self.0.get(name) {
            Some(Attr::N(n)) => {
                n.parse().map_err(|_| StoreError::Corrupt(format!("attribute `{name}` is not a valid number: {n}")))
            }
            None | Some(Attr::Null) => Err(missing(name)),
            Some(other) => Err(wrong_type(name, "N", other)),
        }
    }

    /// An optional number attribute (absent or `NULL` read as `None`).
    pub fn opt_n<T: FromStr>(&self, name: &str) -> Result<Option<T>, StoreError> {
        match self.0.get(name) {
            None | Some(Attr::Null) => Ok(None),
            Some(_) => self.n(name).map(Some),
        }
    }

    /// A required string attribute holding RFC 3339 time.
    pub fn time(&self, name: &str) -> Result<DateTime<Utc>, StoreError> {
        parse_time(name, self.s(name)?)
    }

    /// An optional string attribute holding RFC 3339 time.
    pub fn opt_time(&self, name: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.opt_s(name)?.map(|s| parse_time(name, s)).transpose()
    }

    /// Decodes the JSON string attribute `data` (the record as `serde_json`
    /// writes it).
    pub fn data<T: serde::de::DeserializeOwned>(&self) -> Result<T, StoreError> {
        decode_json("data", self.s("data")?)
    }

    /// The item as the SDK takes it.
    pub fn into_sdk(self) -> HashMap<String, AttributeValue> {
        self.0
            .into_iter()
            .filter_map(|(k, v)| {
                let v = match v {
                    Attr::S(s) => AttributeValue::S(s),
                    Attr::N(n) => AttributeValue::N(n),
                    Attr::B(b) => AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(b)),
                    Attr::Null => AttributeValue::Null(true),
                    // Never produced by the mappings below; not writable back.
                    Attr::Other(_) => return None,
                };
                Some((k, v))
            })
            .collect()
    }

    /// Reads an item the SDK returned.
    pub fn from_sdk(item: &HashMap<String, AttributeValue>) -> Attrs {
        Attrs(
            item.iter()
                .map(|(k, v)| {
                    let a = match v {
                        AttributeValue::S(s) => Attr::S(s.clone()),
                        AttributeValue::N(n) => Attr::N(n.clone()),
                        AttributeValue::Null(_) => Attr::Null,
                        AttributeValue::B(b) => Attr::B(b.clone().into_inner()),
                        AttributeValue::Bool(_) => Attr::Other("BOOL".into()),
                        AttributeValue::L(_) => Attr::Other("L".into()),
                        AttributeValue::M(_) => Attr::Other("M".into()),
                        AttributeValue::Ss(_) => Attr::Other("SS".into()),
                        AttributeValue::Ns(_) => Attr::Other("NS".into()),
                        AttributeValue::Bs(_) => Attr::Other("BS".into()),
                        _ => Attr::Other("unknown".into()),
                    };
                    (k.clone(), a)
                })
                .collect(),
        )
    }

    /// Reads a stream image (`NewImage` of an `aws_lambda_events`
    /// DynamoDB stream record).
    pub fn from_stream(image: &serde_dynamo::Item) -> Attrs {
        Attrs(
            image
                .iter()
                .map(|(k, v)| {
                    use serde_dynamo::AttributeValue as V;
                    let a = match v {
                        V::S(s) => Attr::S(s.clone()),
                        V::N(n) => Attr::N(n.clone()),
                        V::Null(_) => Attr::Null,
                        V::Bool(_) => Attr::Other("BOOL".into()),
                        V::B(b) => Attr::B(b.clone()),
                        V::M(_) => Attr::Other("M".into()),
                        V::L(_) => Attr::Other("L".into()),
                        V::Ss(_) => Attr::Other("SS".into()),
                        V::Ns(_) => Attr::Other("NS".into()),
                        V::Bs(_) => Attr::Other("BS".into()),
                    };
                    (k.clone(), a)
                })
                .collect(),
        )
    }

    /// Reads an item in DynamoDB's JSON form (`{"name": {"S": "..."}, ...}`)
    /// from anything that serializes to it, e.g. a `serde_json::Value` of a
    /// stream record's `NewImage` as AWS sends it.
    pub fn from_json(image: &impl Serialize) -> Result<Attrs, StoreError> {
        let value = serde_json::to_value(image).map_err(|e| StoreError::Corrupt(format!("item image: {e}")))?;
        let serde_json::Value::Object(map) = value else {
            return Err(StoreError::Corrupt("item image is not a map of attributes".into()));
        };
        let mut out = HashMap::with_capacity(map.len());
        for (name, typed) in map {
            let serde_json::Value::Object(typed) = typed else {
                return Err(StoreError::Corrupt(format!("item image attribute `{name}` is not a typed value")));
            };
            let mut entries = typed.into_iter();
            let (Some((tag, v)), None) = (entries.next(), entries.next()) else {
                return Err(StoreError::Corrupt(format!("item image attribute `{name}` must have exactly one type")));
            };
            let attr = match (tag.as_str(), v) {
                ("S", serde_json::Value::String(s)) => Attr::S(s),
                ("N", serde_json::Value::String(n)) => Attr::N(n),
                ("NULL", _) => Attr::Null,
                ("B", serde_json::Value::String(b)) => {
                    use base64::Engine;
                    Attr::B(base64::engine::general_purpose::STANDARD.decode(b).map_err(|e| {
                        StoreError::Corrupt(format!("item image attribute `{name}` is not base64: {e}"))
                    })?)
                }
                (other, _) => Attr::Other(other.to_string()),
            };
            out.insert(name, attr);
        }
        Ok(Attrs(out))
    }
}

fn missing(name: &str) -> StoreError {
    StoreError::Corrupt(format!("item has no attribute `{name}`"))
}

fn wrong_type(name: &str, want: &str, got: &Attr) -> StoreError {
    let got = match got {
        Attr::S(_) => "S",
        Attr::N(_) => "N",
        Attr::B(_) => "B",
        Attr::Null => "NULL",
        Attr::Other(t) => t.as_str(),
    };
    StoreError::Corrupt(format!("attribute `{name}` has type {got}, expected {want}"))
}

fn parse_time(name: &str, s: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt(format!("attribute `{name}` is not RFC 3339 time ({e}): {s}")))
}

fn decode_json<T: serde::de::DeserializeOwned>(name: &str, s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Corrupt(format!("attribute `{name}`: {e}")))
}

fn encode_json<T: Serialize>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Corrupt(format!("record does not serialize: {e}")))
}

/// RFC 3339 in UTC with as many fractional digits as needed, so times read
/// back exactly as written (the same text `serde` writes for `DateTime<Utc>`).
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// The DynamoDB TTL value (epoch seconds) of a record made at `at` and kept
/// for `retention`.
pub fn ttl(at: DateTime<Utc>, retention: chrono::Duration) -> i64 {
    at.checked_add_signed(retention).unwrap_or(DateTime::<Utc>::MAX_UTC).timestamp()
}

// ----------------------------------------------------------- subscriptions

/// The GSI of SubscriptionsTable that lists subscriptions and finds them by
/// route key or tenant: partition key `gk`, sort key `gs` (a subscription
/// id), projection ALL.
pub const SUBSCRIPTION_INDEX: &str = "by_key";

/// The `gk` of every Subscriptions item proper: the API lists them all,
/// in id order, from this one index partition.
pub const SUBSCRIPTION_LIST_KEY: &str = "sub";

/// The Subscriptions item: `id`, `version`, `data`, and its listing entry
/// in GSI [`SUBSCRIPTION_INDEX`]: `gk` = [`SUBSCRIPTION_LIST_KEY`], `gs` = `id`.
/// Its secrets are sealed with `keyring` ([`shared::sealed`]).
pub fn subscription_to_attrs(s: &Subscription, keyring: &Keyring) -> Result<Attrs, StoreError> {
    let mut a = Attrs::new();
    a.put_s("id", s.id.as_str())
        .put_n("version", s.version)
        .put_s("data", shared::sealed::seal_subscription(s, keyring))
        .put_s("gk", SUBSCRIPTION_LIST_KEY)
        .put_s("gs", s.id.as_str());
    Ok(a)
}

/// Decodes a Subscriptions item, opening its secrets with `keyring` (an
/// item stored before sealing holds them in clear: read as they are).
pub fn subscription_from_attrs(a: &Attrs, keyring: &Keyring) -> Result<Subscription, StoreError> {
    Ok(opened_subscription(a, keyring)?.subscription)
}

/// [`subscription_from_attrs`], also saying whether a secret was in clear.
pub fn opened_subscription(a: &Attrs, keyring: &Keyring) -> Result<shared::sealed::Opened, StoreError> {
    shared::sealed::open_subscription(a.s("data")?, keyring)
}

/// One index entry of a subscription: a small item of SubscriptionsTable
/// (`id`, `gk`, `gs` = the subscription's id) that GSI
/// [`SUBSCRIPTION_INDEX`] files under `gk`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// The item's id: `<subscription id>#tenant`, or `<subscription
    /// id>#route#<n>` for the n-th of its sorted route keys (subscription ids
    /// never hold `#`, so entries never collide with them).
    pub id: String,
    /// `tenant#<tenant>`, or `route#<key>` ([`shared::routing::RouteKey::encoded`]).
    pub gk: String,
}

/// The `gk` under which the subscriptions indexed under `key` are found.
pub fn route_index_key(key: &shared::routing::RouteKey) -> String {
    format!("route#{}", key.encoded())
}

/// The `gk` under which the subscriptions of tenant `t` are listed.
pub fn tenant_index_key(t: &str) -> String {
    format!("tenant#{t}")
}

/// A subscription's index entries: its tenant entry (when tenant-scoped),
/// then one per route key ([`shared::routing::index_keys`]) in slot order.
/// An update writes only the entries whose `gk` changed, so it takes at
/// most one action per entry slot.
pub fn index_entries(s: &Subscription) -> Vec<IndexEntry> {
    let mut out: Vec<IndexEntry> = s
        .tenant_id
        .iter()
        .map(|t| IndexEntry { id: format!("{}#tenant", s.id), gk: tenant_index_key(t.as_str()) })
        .collect();
    out.extend(
        shared::routing::index_keys(s)
            .iter()
            .enumerate()
            .map(|(i, k)| IndexEntry { id: format!("{}#route#{i}", s.id), gk: route_index_key(k) }),
    );
    out
}

/// The item of one index entry of subscription `sub`.
pub fn index_entry_to_attrs(e: &IndexEntry, sub: &SubscriptionId) -> Attrs {
    let mut a = Attrs::new();
    a.put_s("id", e.id.as_str()).put_s("gk", e.gk.as_str()).put_s("gs", sub.as_str());
    a
}

/// Every item a stored subscription consists of: itself, then its index
/// entries (what one create writes, in one transaction).
pub fn subscription_items(s: &Subscription, keyring: &Keyring) -> Result<Vec<Attrs>, StoreError> {
    let mut items = vec![subscription_to_attrs(s, keyring)?];
    items.extend(index_entries(s).iter().map(|e| index_entry_to_attrs(e, &s.id)));
    Ok(items)
}

// ------------------------------------------------------------------- sagas

/// The Sagas item: every field is its own attribute (no `data`), so a
/// transition is one conditional `UpdateItem` of the mutable ones. Optional
/// fields are absent when `None`; `origin` is JSON text; times are RFC 3339;
/// `expires_at` is `created_at + retention` in epoch seconds.
pub fn saga_to_attrs(s: &Saga, retention: chrono::Duration) -> Result<Attrs, StoreError> {
    let mut a = Attrs::new();
    a.put_s("id", s.id.as_str())
        .put_s("event_id", s.event_id.as_str())
        .put_s("subscription_id", s.subscription_id.as_str())
        .put_s("webhook_id", s.webhook_id.as_str())
        .put_s("status", s.state.status.as_str())
        .put_n("attempts", s.state.attempts)
        .put_opt_s("next_attempt_at", s.state.next_attempt_at.map(rfc3339))
        .put_opt_s("last_error", s.state.last_error.clone())
        .put_opt_s("origin", s.origin.as_ref().map(encode_json).transpose()?)
        .put_opt_s("lane", s.lane.as_ref().map(encode_json).transpose()?)
        .put_s("created_at", rfc3339(s.created_at))
        .put_s("updated_at", rfc3339(s.updated_at))
        .put_n("expires_at", ttl(s.created_at, retention));
    if s.redrives > 0 {
        a.put_n("redrives", s.redrives);
    }
    // The sparse pull index `by_pull` (shared::pull): only sagas routed to
    // a pull subscription carry its keys.
    if let Some(k) = &s.pull_key {
        a.put_s("pull_sub", s.subscription_id.as_str()).put_s("pull_key", k);
    }
    if let Some(due) = shared::saga::due_at(&s.state, s.created_at) {
        a.put_s("due_shard", due_shard(&s.id)).put_n("due_at", due.timestamp_millis());
    }
    Ok(a)
}

/// Partitions of the Sagas index `by_due`: waiting sagas spread over this
/// many index keys, so the index takes thousands of writes a second.
pub const DUE_SHARDS: u32 = 16;

/// The `by_due` partition of a saga: a stable hash of its id.
pub fn due_shard(saga_id: &SagaId) -> String {
    let h = saga_id.as_str().bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    (h % DUE_SHARDS).to_string()
}

/// Decodes the mutable part of a Sagas item (what a transition compares).
pub fn saga_state_from_attrs(a: &Attrs) -> Result<SagaState, StoreError> {
    let status = a.s("status")?;
    Ok(SagaState {
        status: SagaStatus::parse(status)
            .ok_or_else(|| StoreError::Corrupt(format!("attribute `status` is not a saga status: {status}")))?,
        attempts: a.n("attempts")?,
        next_attempt_at: a.opt_time("next_attempt_at")?,
        last_error: a.opt_s("last_error")?.map(str::to_string),
    })
}

/// Decodes a Sagas item.
pub fn saga_from_attrs(a: &Attrs) -> Result<Saga, StoreError> {
    Ok(Saga {
        id: SagaId::new(a.s("id")?),
        event_id: EventId::new(a.s("event_id")?),
        subscription_id: SubscriptionId::new(a.s("subscription_id")?),
        webhook_id: WebhookId::new(a.s("webhook_id")?),
        state: saga_state_from_attrs(a)?,
        origin: a.opt_s("origin")?.map(|o| decode_json::<Origin>("origin", o)).transpose()?,
        lane: a.opt_s("lane")?.map(|l| decode_json::<shared::ordering::LaneRef>("lane", l)).transpose()?,
        created_at: a.time("created_at")?,
        updated_at: a.time("updated_at")?,
        redrives: a.opt_n("redrives")?.unwrap_or(0),
        pull_key: a.opt_s("pull_key")?.map(str::to_string),
    })
}

/// Decodes the `NewImage` of a Sagas stream record (the saga step's input).
pub fn saga_from_image(image: &serde_dynamo::Item) -> Result<Saga, StoreError> {
    saga_from_attrs(&Attrs::from_stream(image))
}

// ---------------------------------------------------------------- attempts

/// The Attempts item: `saga_id`, `attempt`, `event_id`, `subscription_id`,
/// `expires_at` (`at + retention`, epoch s), `data`.
pub fn attempt_to_attrs(x: &Attempt, retention: chrono::Duration) -> Result<Attrs, StoreError> {
    let mut a = Attrs::new();
    a.put_s("saga_id", x.saga_id.as_str())
        .put_n("attempt", x.attempt)
        .put_s("event_id", x.event_id.as_str())
        .put_s("subscription_id", x.subscription_id.as_str())
        .put_n("expires_at", ttl(x.at, retention))
        .put_s("data", encode_json(x)?);
    Ok(a)
}

/// Decodes an Attempts item.
pub fn attempt_from_attrs(a: &Attrs) -> Result<Attempt, StoreError> {
    a.data()
}

/// The attribute of a Sagas item that holds the saga's first attempt (as
/// JSON) when the delivery recorded it in the write that completed the
/// saga (`DynamoAttempts::record_completing`), instead of an Attempts item.
pub const FIRST_ATTEMPT: &str = "attempt1";

/// The value of [`FIRST_ATTEMPT`]: the attempt as JSON.
pub fn first_attempt_attr(x: &Attempt) -> Result<String, StoreError> {
    encode_json(x)
}

/// The first attempt a Sagas item holds in [`FIRST_ATTEMPT`], if any.
pub fn first_attempt_from_attrs(a: &Attrs) -> Result<Option<Attempt>, StoreError> {
    a.opt_s(FIRST_ATTEMPT)?.map(|json| decode_json(FIRST_ATTEMPT, json)).transpose()
}

/// Decodes the `NewImage` of an Attempts stream record (the saga step's input).
pub fn attempt_from_image(image: &serde_dynamo::Item) -> Result<Attempt, StoreError> {
    attempt_from_attrs(&Attrs::from_stream(image))
}

// -------------------------------------------------------------------- jobs

/// A Jobs item: `id`, `version`, the job as JSON in `data`, `expires_at`.
pub fn job_to_attrs(j: &shared::bulk::Job, expires_at: i64) -> Result<Attrs, StoreError> {
    let mut a = Attrs::new();
    a.put_s("id", j.id.as_str())
        .put_n("version", j.version)
        .put_s("data", encode_json(j)?)
        .put_n("expires_at", expires_at);
    Ok(a)
}

/// Encodes a tenant's running-job slots ([`shared::bulk::TenantSlots`]) as
/// a Jobs item keyed `key` (`slots#…`, never a job id).
pub fn slots_to_attrs(key: &str, slots: &shared::bulk::TenantSlots, expires_at: i64) -> Result<Attrs, StoreError> {
    let mut a = Attrs::new();
    a.put_s("id", key)
        .put_n("version", slots.version)
        .put_s("data", encode_json(slots)?)
        .put_n("expires_at", expires_at);
    Ok(a)
}

/// Decodes a Jobs item.
pub fn job_from_attrs(a: &Attrs) -> Result<shared::bulk::Job, StoreError> {
    a.data()
}

// -------------------------------------------------------------------- keys

/// GSI of the Keys table listing each tenant's keys in id order: partition
/// `scope` ([`key_scope`]), sort `kid`; only key items carry them.
pub const KEY_INDEX: &str = "by_scope";

/// A key's `scope`: `t#<tenant>`, or `-` for the keys bound to no tenant.
pub fn key_scope(tenant: Option<&shared::ids::TenantId>) -> String {
    tenant.map_or_else(|| "-".to_string(), |t| format!("t#{t}"))
}

/// The item of a key: `id` (the key id), `version`, `scope` and `kid` (its
/// place in [`KEY_INDEX`]), the record as JSON in `data`.
pub fn api_key_to_attrs(k: &shared::api_key::ApiKeyRecord) -> Result<Attrs, StoreError> {
    let mut a = Attrs::new();
    a.put_s("id", k.id.as_str())
        .put_n("version", k.version)
        .put_s("scope", key_scope(k.tenant.as_ref()))
        .put_s("kid", k.id.as_str())
        .put_s("data", encode_json(k)?);
    Ok(a)
}

/// The item a credential is found under: `id` = `lookup#<lookup>`, the key's
/// id in `key_id` and a copy of its record in `data` (so a request reads
/// one item).
pub fn api_key_lookup_to_attrs(lookup: &str, k: &shared::api_key::ApiKeyRecord) -> Result<Attrs, StoreError> {
    let mut a = Attrs::new();
    a.put_s("id", format!("lookup#{lookup}")).put_s("key_id", k.id.as_str()).put_s("data", encode_json(k)?);
    Ok(a)
}

/// The item that holds a name for its key within its tenant: `id` =
/// `name#<scope>#<name>`, `key_id`.
pub fn api_key_name_to_attrs(k: &shared::api_key::ApiKeyRecord) -> Attrs {
    let mut a = Attrs::new();
    a.put_s("id", format!("name#{}#{}", key_scope(k.tenant.as_ref()), k.name)).put_s("key_id", k.id.as_str());
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::event::EventRecord;

    fn saga() -> Saga {
        let now = Utc::now();
        let mut s = Saga::new(SagaId::new("sg_1"), &EventId::new("evt_1"), &SubscriptionId::new("sub_1"), None, now);
        s.state.next_attempt_at = Some(now + chrono::Duration::milliseconds(1234));
        s.state.last_error = Some("HTTP 500".into());
        s.origin = Some(Origin {
            kind: shared::saga::OriginKind::Requeue,
            previous_saga_id: Some(SagaId::new("sg_0")),
            actor: "ops".into(),
            reason: "fixed".into(),
            at: now,
        });
        s
    }

    #[test]
    fn a_subscription_is_its_item_and_one_entry_per_tenant_and_pattern() {
        let mut s = shared::testkit::subscription();
        s.tenant_id = Some(shared::ids::TenantId::new("acme"));
        s.event_types = vec!["task.*".into(), "*".into(), "task.*".into()];
        let k = Keyring::ephemeral();
        let items = subscription_items(&s, &k).unwrap();
        assert_eq!(subscription_from_attrs(&items[0], &k).unwrap(), s);
        assert_eq!(items[0].s("gk").unwrap(), SUBSCRIPTION_LIST_KEY);
        let entries: Vec<(&str, &str, &str)> =
            items[1..].iter().map(|a| (a.s("id").unwrap(), a.s("gk").unwrap(), a.s("gs").unwrap())).collect();
        let id = s.id.as_str();
        assert_eq!(
            entries,
            vec![
                (format!("{id}#tenant").as_str(), "tenant#acme", id),
                (format!("{id}#route#0").as_str(), "route#t4:acme#*", id),
                (format!("{id}#route#1").as_str(), "route#t4:acme#task.*", id),
            ]
        );
        assert!(items.len() <= shared::bounds::MAX_SUBSCRIPTION_PATTERNS + 2);
    }

    #[test]
    fn saga_round_trips_through_sdk_items() {
        let s = saga();
        let sdk = saga_to_attrs(&s, chrono::Duration::days(30)).unwrap().into_sdk();
        assert!(!sdk.contains_key("data"));
        assert_eq!(sdk["status"], AttributeValue::S("Pending".into()));
        assert_eq!(saga_from_attrs(&Attrs::from_sdk(&sdk)).unwrap(), s);
    }

    #[test]
    fn optional_saga_fields_are_absent_when_none() {
        let s = Saga::new(SagaId::new("sg_1"), &EventId::new("evt_1"), &SubscriptionId::new("sub_1"), None, Utc::now());
        let a = saga_to_attrs(&s, chrono::Duration::days(1)).unwrap();
        for k in ["next_attempt_at", "last_error", "origin"] {
            assert!(!a.0.contains_key(k), "{k}");
        }
        assert_eq!(saga_from_attrs(&a).unwrap(), s);
    }

    #[test]
    fn stream_images_decode_like_sdk_items() {
        let s = saga();
        let a = saga_to_attrs(&s, chrono::Duration::days(30)).unwrap();
        // DynamoDB JSON as a stream record carries it (what serde_dynamo::Item serializes to).
        let image: serde_json::Map<String, serde_json::Value> =
            a.0.iter()
                .map(|(k, v)| {
                    let v = match v {
                        Attr::S(s) => serde_json::json!({ "S": s }),
                        Attr::N(n) => serde_json::json!({ "N": n }),
                        other => panic!("sagas use S and N only, got {other:?}"),
                    };
                    (k.clone(), v)
                })
                .collect();
        assert_eq!(saga_from_attrs(&Attrs::from_json(&image).unwrap()).unwrap(), s);
        let item: serde_dynamo::Item = serde_json::from_value(serde_json::Value::Object(image)).unwrap();
        assert_eq!(saga_from_image(&item).unwrap(), s);
        let bad = serde_json::json!({ "id": { "S": "x", "N": "1" } });
        assert!(matches!(Attrs::from_json(&bad), Err(StoreError::Corrupt(_))));
    }

    #[test]
    fn wrong_types_are_corrupt_not_panics() {
        let mut a = Attrs::new();
        a.put_s("attempts", "three");
        assert!(matches!(a.n::<u32>("attempts"), Err(StoreError::Corrupt(_))));
        a.put_n("data", 1);
        assert!(matches!(a.data::<serde_json::Value>(), Err(StoreError::Corrupt(_))));
    }

    #[test]
    fn ttl_saturates() {
        assert!(ttl(Utc::now(), chrono::Duration::MAX) > 0);
    }

    #[test]
    fn large_events_are_stored_deflated_and_read_back_from_every_form() {
        let body = serde_json::to_vec(&serde_json::json!({
            "type": "order.created",
            "data": {"items": (0..20).map(|i| serde_json::json!({"sku": format!("SKU-{i:04}"), "qty": i, "name": "Blue widget, large"})).collect::<Vec<_>>()}
        }))
        .unwrap();
        let n = shared::envelope::normalize(&body, None).unwrap();
        let e = EventRecord::from_normalized(n, Utc::now(), chrono::Duration::days(30));
        let a = event_to_attrs(&e, chrono::Duration::days(30)).unwrap();
        let Some(Attr::B(z)) = a.0.get("data_z") else { panic!("a {} byte record is deflated", body.len()) };
        assert!(z.len() < body.len() / 2, "{} → {}", body.len(), z.len());
        assert!(!a.0.contains_key("data"));
        assert_eq!(event_from_attrs(&a).unwrap(), e);
        assert_eq!(event_from_attrs(&Attrs::from_sdk(&a.clone().into_sdk())).unwrap(), e);
        use base64::Engine;
        let image = serde_json::json!({
            "id": {"S": e.id}, "event_type": {"S": e.event_type}, "expires_at": {"N": "1"},
            "data_z": {"B": base64::engine::general_purpose::STANDARD.encode(z)},
        });
        let item: serde_dynamo::Item = serde_json::from_value(image.clone()).unwrap();
        assert_eq!(event_from_image(&item).unwrap(), e);
        assert_eq!(event_from_attrs(&Attrs::from_json(&image).unwrap()).unwrap(), e);
        // Small events stay readable JSON.
        let small = EventRecord { body: b"{}".to_vec(), ..e };
        let a = event_to_attrs(&small, chrono::Duration::days(30)).unwrap();
        assert!(matches!(a.0.get("data"), Some(Attr::S(_))));
    }

    /// The stored record without `id` and absent fields, a JSON body as its
    /// own text: read back exactly, every body kind, and the form stored
    /// before (every field, the body as a string) still reads.
    #[test]
    fn stored_records_drop_the_id_keep_json_bodies_as_json_and_read_both_forms() {
        let stored = |a: &Attrs| -> String {
            match a.0.get("data_z") {
                Some(Attr::B(z)) => String::from_utf8(miniz_oxide::inflate::decompress_to_vec(z).unwrap()).unwrap(),
                _ => a.s("data").unwrap().to_string(),
            }
        };
        let n = shared::envelope::normalize(br#"{"type":"order.created","data":{}}"#, None).unwrap();
        let e = EventRecord::from_normalized(n, Utc::now(), chrono::Duration::days(30));
        let padding = "x".repeat(900);
        let bodies: Vec<Vec<u8>> = vec![
            br#"{"type":"t","data":{"quote":"a\"b","n":[1, 2 ,3]}}"#.to_vec(),
            format!(r#"{{"type":"t","data":{{"notes":"{padding}"}}}}"#).into_bytes(),
            br#"  {"type":"t"}"#.to_vec(),
            b"not json at all".to_vec(),
        ];
        for (i, body) in bodies.into_iter().enumerate() {
            let e = EventRecord { body, ..e.clone() };
            let a = event_to_attrs(&e, chrono::Duration::days(30)).unwrap();
            let json = stored(&a);
            assert!(!json.contains("\"id\"") && !json.contains("null"), "{json}");
            assert_eq!(json.contains("\"body_json\":"), i < 2, "{json}");
            assert_eq!(event_from_attrs(&a).unwrap(), e, "body {i}");
            // As stored before: the whole record, the body a string.
            let mut old = a.clone();
            old.0.remove("data_z");
            old.0.insert("data".into(), Attr::S(encode_json(&e).unwrap()));
            assert_eq!(event_from_attrs(&old).unwrap(), e, "old form, body {i}");
        }
    }
}
