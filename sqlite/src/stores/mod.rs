//! SQLite implementations of the store ports. Records are stored as JSON
//! beside the columns that conditions and lookups need.

mod acks;
mod api_keys;
mod dead_letters;
mod event_types;
mod events;
mod idempotency;
mod jobs;
mod sagas;
mod stats;
mod subscriptions;

pub use acks::SqliteAcks;
pub use api_keys::SqliteApiKeys;
pub use dead_letters::SqliteDeadLetters;
pub use event_types::SqliteEventTypes;
pub use events::SqliteEvents;
pub use idempotency::SqliteIdempotency;
pub use jobs::{SqliteJobs, SqliteSettings, DATA_KEY_SETTING};
pub use sagas::{SqliteAttempts, SqliteSagas};
pub use stats::SqliteStats;
pub use subscriptions::SqliteSubscriptions;

use rusqlite::types::Value;
use rusqlite::{params_from_iter, Connection};

use super::{encode, sql, Marks, Stream};
use shared::event::EventRecord;
use shared::ports::StoreResult;

/// Inserts each row unless its key exists and, for each row inserted, its
/// outbox row in the same transaction: SQLite's stream of new records,
/// which the next stage reads (DynamoDB Streams on AWS). Each item is its
/// insert and outbox parameters, made before the call (encoding records
/// is work the writer thread, which every stage waits on, need not do).
/// `true` where inserted.
fn insert_announced(
    c: &Connection,
    marks: &mut Marks,
    stream: Stream,
    insert: &str,
    announce: &str,
    rows: &[(Vec<Value>, Vec<Value>)],
) -> StoreResult<Vec<bool>> {
    let mut ins = c.prepare_cached(insert).map_err(sql)?;
    let mut out = c.prepare_cached(announce).map_err(sql)?;
    let mut res = Vec::with_capacity(rows.len());
    for (row, outbox) in rows {
        let inserted = ins.execute(params_from_iter(row)).map_err(sql)? == 1;
        if inserted {
            out.execute(params_from_iter(outbox)).map_err(sql)?;
            marks.mark(stream);
        }
        res.push(inserted);
    }
    Ok(res)
}

/// An event as [`shared::ports::EventStore::insert`] (here [`SqliteEvents`]) takes it: encoded already, or, in a
/// partition, to be numbered and encoded in the transaction.
enum ToInsert {
    Encoded((Vec<Value>, Vec<Value>)),
    Numbered(Box<EventRecord>, shared::ordering::Partition),
}

/// An event's row in `events` and its outbox row.
fn event_rows(e: &EventRecord) -> (Vec<Value>, Vec<Value>) {
    let row = vec![
        Value::from(e.id.to_string()),
        Value::from(e.event_type.clone()),
        Value::from(e.received_at.timestamp_millis()),
        Value::from(e.expires_at.timestamp_millis()),
        Value::from(encode(e)),
        Value::from(e.tenant_id.as_ref().map(|t| t.as_str().to_string())),
        Value::from(e.partition_seq.and(e.partition()).map(|p| p.scope)),
        Value::from(e.partition_seq.and(e.partition_key.clone())),
        Value::from(e.partition_seq.map(|n| n as i64)),
    ];
    (row, vec![Value::from(e.id.to_string())])
}
