//! Ingest: validate a producer's envelope and append it to the event log.
//! It only inserts events; it never updates one, and writes nothing else.

use std::sync::atomic::Ordering::Relaxed;

use chrono::Utc;
use serde_json::value::RawValue;

use crate::context::Hookline;
use crate::envelope::{self, EnvelopeError, Format, LogSafe};
use crate::error::StoreError;
use crate::event::EventRecord;
use crate::ids::{EventId, TenantId};

/// An accepted event.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    /// The id it is stored under: the producer's id without a tenant, a hash
    /// of (tenant, producer id) with one (see [`crate::ids::stored_event_id`]);
    /// a hash of (tenant, idempotency key) when the event has a key (see
    /// [`crate::ids::idempotent_event_id`]).
    pub event_id: EventId,
    /// It was accepted before; nothing new was stored.
    pub duplicate: bool,
}

/// Why a request was refused. Nothing is written when this is returned.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The envelope is invalid.
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
    /// The body is larger than allowed.
    #[error("request body is {size} bytes; the limit is {limit}")]
    TooLarge {
        /// Bytes received.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A batch that is not a non-empty JSON array of at most the limit.
    #[error("{0}")]
    BadBatch(String),
    /// The store failed; the event may not be stored, so the producer must retry.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One batch item's outcome.
pub type ItemResult = Result<Accepted, EnvelopeError>;

fn check_size(h: &Hookline, raw: &[u8]) -> Result<(), IngestError> {
    if raw.len() > h.config.max_body_bytes {
        return Err(IngestError::TooLarge { size: raw.len(), limit: h.config.max_body_bytes });
    }
    Ok(())
}

/// Accepts one envelope. On `Ok` the event is durably stored (or already was).
///
/// `idempotency_key` is the `Idempotency-Key` header of `POST /v1/events`,
/// already checked: an envelope without an id is deduplicated on it (see
/// [`envelope::Normalized::with_idempotency_key`]). `tenant` is the tenant
/// the producer's key is bound to, if any
/// ([`envelope::Normalized::bind_tenant`]).
pub async fn ingest(
    h: &Hookline,
    raw: &[u8],
    format: Option<Format>,
    idempotency_key: Option<&str>,
    tenant: Option<&TenantId>,
) -> Result<Accepted, IngestError> {
    ingest_one(h, raw, format, None, None, idempotency_key, tenant, false).await
}

/// Accepts one of Hookline's own operational events (a native envelope
/// typed `hookline.…`, [`crate::stage::failing`]): the same path as a
/// producer's event, the reserved prefix allowed.
pub(crate) async fn ingest_operational(h: &Hookline, raw: &[u8]) -> Result<Accepted, IngestError> {
    ingest_one(h, raw, Some(Format::Native), None, None, None, None, true).await
}

/// Producers may not use the operational events' type prefix: a
/// subscriber of `hookline.*` must be able to trust what it receives.
fn check_not_operational(n: &envelope::Normalized) -> Result<(), EnvelopeError> {
    if crate::routing::is_operational(&n.event_type) {
        return Err(EnvelopeError::InvalidField {
            field: "type".into(),
            reason: format!(
                "event types starting with `{}` are reserved for Hookline's operational events",
                crate::routing::OPERATIONAL_PREFIX
            ),
        });
    }
    Ok(())
}

/// Accepts one envelope whose carrier supplies a type and producer where the
/// envelope has none (EventBridge `detail-type` and `source`).
pub async fn ingest_with_defaults(
    h: &Hookline,
    raw: &[u8],
    format: Option<Format>,
    default_type: Option<&str>,
    default_producer: Option<&str>,
) -> Result<Accepted, IngestError> {
    ingest_one(h, raw, format, default_type, default_producer, None, None, false).await
}

// Private: each public way in fixes most of these.
#[allow(clippy::too_many_arguments)]
async fn ingest_one(
    h: &Hookline,
    raw: &[u8],
    format: Option<Format>,
    default_type: Option<&str>,
    default_producer: Option<&str>,
    idempotency_key: Option<&str>,
    tenant: Option<&TenantId>,
    operational: bool,
) -> Result<Accepted, IngestError> {
    check_size(h, raw)?;
    let normalized = envelope::normalize_with_defaults(raw, format, default_type, default_producer)
        .and_then(|n| if operational { Ok(n) } else { check_not_operational(&n).map(|()| n) })
        .and_then(|n| n.bind_tenant(tenant))
        .inspect_err(|_| {
            h.metrics.events_rejected.fetch_add(1, Relaxed);
        })?
        .with_idempotency_key(idempotency_key);
    if !operational {
        check_catalog(h, &normalized, raw).await?.inspect_err(|_| {
            h.metrics.events_rejected.fetch_add(1, Relaxed);
        })?;
    }
    // An operational event keeps the id it was published with (a `hop_`
    // id, [`crate::stage::failing::operational_id`]); every other id goes
    // through the stored-id rule, which never yields a `hop_` id.
    let operational_id = if operational { normalized.id.clone().map(crate::ids::EventId::new) } else { None };
    let mut record = EventRecord::from_normalized(normalized, Utc::now(), h.config.retention);
    if let Some(id) = operational_id {
        record.id = id;
    }
    let inserted = h.stores.events.insert(std::slice::from_ref(&record)).await?;
    h.failpoints.hit("ingest.after_insert");
    if !operational {
        record_types(h, std::slice::from_ref(&record)).await;
    }
    Ok(count(h, &record, inserted[0]))
}

/// The type of a test event when its sender names none.
pub const TEST_EVENT_TYPE: &str = "hookline.test";

/// Accepts a test event for `sub` (`POST /v1/subscriptions/{id}/test`): a
/// native envelope of `event_type` (a producer's type, or
/// [`TEST_EVENT_TYPE`]) with `data`, in the subscription's tenant, from
/// producer `hookline.test`, stored like any event but with `sub` as its
/// one target ([`EventRecord::target`]): routing sends it to that
/// subscription only, through the usual sagas, signing and retries. Its
/// type is not recorded as seen, and its data is not checked against the
/// event catalog (a test says what a receiver does with what it is sent).
///
/// # Errors
///
/// [`IngestError`]: a bad type, an envelope past the size limit, or the
/// store.
pub async fn ingest_test(
    h: &Hookline,
    sub: &crate::subscription::Subscription,
    event_type: &str,
    data: serde_json::Value,
) -> Result<Accepted, IngestError> {
    let mut envelope = serde_json::json!({"type": event_type, "producer": "hookline.test", "data": data});
    if let Some(t) = &sub.tenant_id {
        envelope["tenant_id"] = serde_json::Value::String(t.as_str().to_string());
    }
    let raw = serde_json::to_vec(&envelope).expect("json serializes");
    check_size(h, &raw)?;
    let normalized = envelope::normalize(&raw, Some(Format::Native)).and_then(|n| {
        if n.event_type == TEST_EVENT_TYPE {
            Ok(n)
        } else {
            check_not_operational(&n).map(|()| n)
        }
    })?;
    let mut record = EventRecord::from_normalized(normalized, Utc::now(), h.config.retention);
    record.target = Some(sub.id.clone());
    let inserted = h.stores.events.insert(std::slice::from_ref(&record)).await?;
    Ok(count(h, &record, inserted[0]))
}

fn count(h: &Hookline, record: &EventRecord, inserted: bool) -> Accepted {
    let counter = if inserted { &h.metrics.events_accepted } else { &h.metrics.events_duplicate };
    counter.fetch_add(1, Relaxed);
    // `&str` fields are written escaped (Debug); the id is printable by the
    // id rule, and LogSafe keeps it so for events stored before the rule.
    let trace_id = record.trace_id.as_deref().unwrap_or("");
    let tenant_id = record.tenant_id.as_ref().map(|t| t.as_str()).unwrap_or("");
    tracing::debug!(event_id = %LogSafe(record.id.as_str()), tenant_id, trace_id, duplicate = !inserted, "event accepted");
    Accepted { event_id: record.id.clone(), duplicate: !inserted }
}

/// Accepts a JSON array of envelopes. Each valid item is stored; invalid
/// items get their own error and do not stop the others. All valid items are
/// stored in one write.
pub async fn ingest_batch(
    h: &Hookline,
    raw: &[u8],
    format: Option<Format>,
    tenant: Option<&TenantId>,
) -> Result<Vec<ItemResult>, IngestError> {
    check_size(h, raw)?;
    let items: Vec<&RawValue> = match serde_json::from_slice(raw) {
        Ok(items) => items,
        Err(e) if e.is_syntax() || e.is_eof() => {
            return Err(IngestError::Envelope(EnvelopeError::MalformedJson {
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            }))
        }
        Err(_) => return Err(IngestError::BadBatch("a batch must be a JSON array of event envelopes".into())),
    };
    if items.is_empty() || items.len() > h.config.max_batch {
        return Err(IngestError::BadBatch(format!(
            "a batch holds 1 to {} events; this one has {}",
            h.config.max_batch,
            items.len()
        )));
    }
    let now = Utc::now();
    let mut records = Vec::new();
    let mut results: Vec<Option<ItemResult>> = Vec::with_capacity(items.len());
    for item in &items {
        match envelope::normalize(item.get().as_bytes(), format)
            .and_then(|n| check_not_operational(&n).map(|()| n))
            .and_then(|n| n.bind_tenant(tenant))
        {
            Ok(n) => match check_catalog(h, &n, item.get().as_bytes()).await? {
                Ok(()) => {
                    records.push(EventRecord::from_normalized(n, now, h.config.retention));
                    results.push(None);
                }
                Err(e) => {
                    h.metrics.events_rejected.fetch_add(1, Relaxed);
                    results.push(Some(Err(e)));
                }
            },
            Err(e) => {
                h.metrics.events_rejected.fetch_add(1, Relaxed);
                results.push(Some(Err(e)));
            }
        }
    }
    let inserted = if records.is_empty() { vec![] } else { h.stores.events.insert(&records).await? };
    record_types(h, &records).await;
    let mut stored = records.into_iter().zip(inserted);
    Ok(results
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|| {
                let (rec, ins) = stored.next().expect("one insert result per valid item");
                Ok(count(h, &rec, ins))
            })
        })
        .collect())
}

/// Checks a producer's event against the event catalog
/// ([`crate::catalog::check_event`]): its data against its type's schema
/// when the type is registered, else whether the catalog is strict. The
/// type's entry is read through the process's cache ([`Hookline::catalog`]):
/// one keyed store read per type per [`crate::catalog::CACHE_TTL`], none
/// per event. The outer error is the store's (the producer retries); the
/// inner one the event's.
async fn check_catalog(
    h: &Hookline,
    n: &envelope::Normalized,
    raw: &[u8],
) -> Result<Result<(), EnvelopeError>, IngestError> {
    let entry = compiled(h, &n.event_type).await?;
    Ok(crate::catalog::check_event(entry.as_deref(), h.config.strict_catalog, &n.event_type, n.format, raw))
}

/// The registered schema of `event_type`, if any, from the cache or else
/// the store (then cached, its absence too). A stored schema that no longer
/// parses is a corrupt item: the store's error.
pub async fn compiled(
    h: &Hookline,
    event_type: &str,
) -> Result<Option<std::sync::Arc<crate::catalog::Compiled>>, StoreError> {
    let now = std::time::Instant::now();
    if let Some(known) = h.catalog.get(event_type, now) {
        return Ok(known);
    }
    let entry = h.stores.event_types.catalog_get(event_type).await?;
    let compiled = entry
        .map(|e| {
            e.parsed()
                .map(|schema| std::sync::Arc::new(crate::catalog::Compiled { schema }))
                .map_err(|x| StoreError::Corrupt(format!("catalog schema of {}: {x}", envelope::show(event_type))))
        })
        .transpose()?;
    h.catalog.put(event_type, compiled.clone(), now);
    Ok(compiled)
}

/// Records the types of `events` (just accepted) that this process has not
/// recorded yet ([`crate::event_types`]): one conditional insert per new
/// (scope, type), nothing otherwise. A store failure is logged and
/// forgotten (the pair is tried again when seen again): the events are
/// stored whatever happens here.
async fn record_types(h: &Hookline, events: &[EventRecord]) {
    let now = Utc::now();
    let rows = h.seen_types.unseen(events.iter().flat_map(|e| crate::event_types::rows_of(e, now)).collect());
    if rows.is_empty() {
        return;
    }
    match h.stores.event_types.record(&rows).await {
        Ok(_) => h.seen_types.remember(&rows),
        Err(e) => tracing::warn!(error = %e, types = rows.len(), "event types not recorded; retried when seen again"),
    }
}
