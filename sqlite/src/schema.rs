//! The database schema: the migrations that create and change the tables,
//! applied in order by `migrate`.

/// Schema migrations, applied in order; `PRAGMA user_version` records how many ran.
pub(crate) const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE events (
    id TEXT PRIMARY KEY,
    event_type TEXT NOT NULL,
    received_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE subscriptions (id TEXT PRIMARY KEY, version INTEGER NOT NULL, data TEXT NOT NULL);
CREATE TABLE sagas (
    id TEXT PRIMARY KEY,
    event_id TEXT NOT NULL,
    subscription_id TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX sagas_by_event ON sagas (event_id);
CREATE TABLE attempts (saga_id TEXT NOT NULL, attempt INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (saga_id, attempt));
CREATE TABLE dead_letters (id TEXT PRIMARY KEY, state TEXT NOT NULL, created_at INTEGER NOT NULL, data TEXT NOT NULL);
CREATE INDEX dead_letters_by_state ON dead_letters (state, created_at);
CREATE TABLE outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, stream TEXT NOT NULL, key TEXT NOT NULL, attempt INTEGER);
CREATE INDEX outbox_by_stream ON outbox (stream, seq);
CREATE TABLE queue_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    body TEXT NOT NULL,
    visible_at INTEGER NOT NULL,
    receive_count INTEGER NOT NULL DEFAULT 0,
    sent_at INTEGER NOT NULL
);
CREATE INDEX queue_messages_visible ON queue_messages (queue, visible_at);
"#,
    // 2: the reconciler finds retrying sagas that stopped progressing by
    // `due_at` (ms; NULL unless InProgress or PendingRetry: see
    // `shared::saga::due_at`), and the purge finds expired events by
    // `expires_at` (both through an index, never a scan). Sagas already
    // retrying are due now, so the first reconciler run checks them once.
    r#"
ALTER TABLE sagas ADD COLUMN due_at INTEGER;
UPDATE sagas SET due_at = 0 WHERE status IN ('InProgress', 'PendingRetry');
CREATE INDEX sagas_due ON sagas (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX events_by_expiry ON events (expires_at);
"#,
    // 3: delivery jobs carry their subscription as a group, so the
    // dispatcher can set aside the backlog of a subscription at its
    // in-flight limit in one statement (`SqliteQueue::pause_group`).
    r#"
ALTER TABLE queue_messages ADD COLUMN group_key TEXT;
CREATE INDEX queue_messages_group ON queue_messages (queue, group_key, visible_at) WHERE group_key IS NOT NULL;
"#,
    // 4: routing looks subscriptions up by (scope, pattern) instead of
    // reading them all: one `subscription_routes` row per pattern of each
    // subscription (`shared::routing::index_keys`; scope as
    // `shared::routing::Scope::as_text`: `g`, or `t<bytes>:<tenant>`), kept
    // in the transaction of every subscription write. `tenant_id` lets the
    // API list one tenant's subscriptions by index. Existing subscriptions
    // are indexed here from their stored JSON.
    r#"
CREATE TABLE subscription_routes (
    scope TEXT NOT NULL,
    pattern TEXT NOT NULL,
    subscription_id TEXT NOT NULL,
    PRIMARY KEY (scope, pattern, subscription_id)
) WITHOUT ROWID;
CREATE INDEX subscription_routes_by_subscription ON subscription_routes (subscription_id);
ALTER TABLE subscriptions ADD COLUMN tenant_id TEXT;
UPDATE subscriptions SET tenant_id = json_extract(data, '$.tenant_id');
CREATE INDEX subscriptions_by_tenant ON subscriptions (tenant_id, id) WHERE tenant_id IS NOT NULL;
INSERT OR IGNORE INTO subscription_routes (scope, pattern, subscription_id)
    SELECT CASE WHEN s.tenant_id IS NULL THEN 'g'
                ELSE 't' || length(CAST(s.tenant_id AS BLOB)) || ':' || s.tenant_id END,
           p.value, s.id
    FROM subscriptions s, json_each(s.data, '$.event_types') p;
"#,
    // 5: each subscription's delivery health (`shared::health`), apart from
    // its configuration, written only when something changed.
    r#"
CREATE TABLE subscription_health (
    subscription_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    data TEXT NOT NULL
) WITHOUT ROWID;
"#,
    // 6: leases of the slots of subscriptions with an explicit
    // `max_in_flight`, and the next start of those with a `rate_limit`
    // (`shared::ports::LimitStore`).
    r#"
CREATE TABLE subscription_limits (
    key TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    until INTEGER NOT NULL
) WITHOUT ROWID;
"#,
    // 7: ordered delivery (`shared::ordering`): each partition's last number
    // (taken in the transaction of the event's insert) and routed-through
    // mark, and the lanes of ordered subscriptions. Events stored before
    // have no number and are delivered unordered.
    r#"
CREATE TABLE partitions (
    scope TEXT NOT NULL,
    partition_key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    routed INTEGER NOT NULL DEFAULT 0,
    ahead TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (scope, partition_key)
) WITHOUT ROWID;
CREATE TABLE lanes (
    subscription_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    partition_key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    saga_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    PRIMARY KEY (subscription_id, scope, partition_key, seq, saga_id)
) WITHOUT ROWID;
"#,
    // 8: finding events (`shared::event_search`, `GET /v1/events`): the
    // columns the filters read, an index per way in (the search picks one
    // by its filters, `stores::events::search_plan`), each ordered for keyset
    // pagination on (received_at, id), or on the partition's numbers; and
    // each event's delivery outcome (0 none, 1 failed, 2 dead-lettered),
    // raised by the saga stage. Existing events are filled in from their
    // JSON, their sagas and their dead letters.
    r#"
ALTER TABLE events ADD COLUMN tenant_id TEXT;
ALTER TABLE events ADD COLUMN part_scope TEXT;
ALTER TABLE events ADD COLUMN part_key TEXT;
ALTER TABLE events ADD COLUMN part_seq INTEGER;
ALTER TABLE events ADD COLUMN outcome INTEGER NOT NULL DEFAULT 0;
UPDATE events SET tenant_id = json_extract(data, '$.tenant_id'),
    part_key = json_extract(data, '$.partition_key'),
    part_seq = json_extract(data, '$.partition_seq');
UPDATE events SET part_scope = CASE WHEN tenant_id IS NULL THEN 'g'
        ELSE 't' || length(CAST(tenant_id AS BLOB)) || ':' || tenant_id END
    WHERE part_seq IS NOT NULL;
UPDATE events SET outcome = 1
    WHERE id IN (SELECT event_id FROM sagas WHERE status IN ('PendingRetry', 'DeadLettered') OR attempts > 1);
UPDATE events SET outcome = 2
    WHERE id IN (SELECT json_extract(data, '$.event_id') FROM dead_letters);
CREATE INDEX events_by_received ON events (received_at, id);
CREATE INDEX events_by_tenant ON events (tenant_id, received_at, id) WHERE tenant_id IS NOT NULL;
CREATE INDEX events_by_type ON events (event_type, received_at, id);
CREATE INDEX events_by_outcome ON events (received_at, id) WHERE outcome >= 1;
CREATE INDEX events_by_partition ON events (part_scope, part_key, part_seq) WHERE part_seq IS NOT NULL;
"#,
    // 9: dead letters listed by filter, newest first, through an index per
    // filter (subscription, event type, tenant, state; the creation time
    // alone); keyset pages on (created_at, id). Bulk jobs (`shared::bulk`).
    r#"
ALTER TABLE dead_letters ADD COLUMN subscription_id TEXT;
ALTER TABLE dead_letters ADD COLUMN event_type TEXT;
ALTER TABLE dead_letters ADD COLUMN tenant_id TEXT;
UPDATE dead_letters SET subscription_id = json_extract(data, '$.subscription_id'),
    event_type = json_extract(data, '$.event_type'),
    tenant_id = coalesce(json_extract(data, '$.tenant_id'), json_extract(data, '$.event.tenant_id'));
DROP INDEX dead_letters_by_state;
CREATE INDEX dead_letters_by_state ON dead_letters (state, created_at, id);
CREATE INDEX dead_letters_by_created ON dead_letters (created_at, id);
CREATE INDEX dead_letters_by_subscription ON dead_letters (subscription_id, created_at, id);
CREATE INDEX dead_letters_by_type ON dead_letters (event_type, created_at, id);
CREATE INDEX dead_letters_by_tenant ON dead_letters (tenant_id, created_at, id) WHERE tenant_id IS NOT NULL;
CREATE TABLE jobs (id TEXT PRIMARY KEY, version INTEGER NOT NULL, data TEXT NOT NULL) WITHOUT ROWID;
"#,
    // 10: the audit trail (`shared::audit`): one row per record, `pos` its
    // place in newest-first order (`AuditRecord::position`), an index per
    // filter so every listing is a range of one index, and `at` for the
    // purge of records past the audit retention.
    r#"
CREATE TABLE audit (
    id TEXT PRIMARY KEY,
    pos TEXT NOT NULL,
    at INTEGER NOT NULL,
    action TEXT NOT NULL,
    actor TEXT NOT NULL,
    subscription_id TEXT,
    data TEXT NOT NULL
);
CREATE INDEX audit_by_pos ON audit (pos);
CREATE INDEX audit_by_action ON audit (action, pos);
CREATE INDEX audit_by_actor ON audit (actor, pos);
CREATE INDEX audit_by_subscription ON audit (subscription_id, pos) WHERE subscription_id IS NOT NULL;
"#,
    // 11: fewer index pages written per event (each commit rewrites every
    // index page it touched, and the pipeline commits often). The outbox
    // becomes one table per stream, read in `seq` order with no second
    // index; rows a stream gave up on move to `outbox_failed` (their
    // stream named `<stream>-failed`, as before). A group set aside is
    // parked (`SqliteQueue::pause_group`): `queue_pauses` says until when,
    // its messages are flagged (`parked`) and indexed apart, in order, to
    // be handed back a few at a time once the pause is over, so setting it
    // aside again costs what arrived since, not its whole backlog. The
    // group index holds only unparked messages and no `visible_at`, so
    // receiving a job (which moves `visible_at`) leaves it alone.
    r#"
CREATE TABLE outbox_events (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL);
CREATE TABLE outbox_sagas (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL);
CREATE TABLE outbox_attempts (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, attempt INTEGER NOT NULL);
INSERT INTO outbox_events (seq, key) SELECT seq, key FROM outbox WHERE stream = 'events';
INSERT INTO outbox_sagas (seq, key) SELECT seq, key FROM outbox WHERE stream = 'sagas';
INSERT INTO outbox_attempts (seq, key, attempt) SELECT seq, key, COALESCE(attempt, 0) FROM outbox WHERE stream = 'attempts';
DELETE FROM outbox WHERE stream NOT LIKE '%-failed';
DROP INDEX outbox_by_stream;
ALTER TABLE outbox RENAME TO outbox_failed;
ALTER TABLE queue_messages ADD COLUMN parked INTEGER;
DROP INDEX queue_messages_group;
CREATE INDEX queue_messages_group ON queue_messages (queue, group_key) WHERE group_key IS NOT NULL AND parked IS NULL;
CREATE INDEX queue_messages_parked ON queue_messages (queue, group_key, id) WHERE parked IS NOT NULL;
CREATE TABLE queue_pauses (
    queue TEXT NOT NULL,
    group_key TEXT NOT NULL,
    until INTEGER NOT NULL,
    PRIMARY KEY (queue, group_key)
) WITHOUT ROWID;
CREATE INDEX queue_pauses_due ON queue_pauses (queue, until);
"#,
    // 12: blocked lanes of ordered subscriptions (`shared::ordering::BlockedLane`),
    // one row per lane, listed per subscription oldest first for
    // `GET /v1/subscriptions/{id}` through the index (never a scan of `lanes`).
    r#"
CREATE TABLE lane_blocks (
    subscription_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    partition_key TEXT NOT NULL,
    since INTEGER NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (subscription_id, scope, partition_key)
) WITHOUT ROWID;
CREATE INDEX lane_blocks_by_since ON lane_blocks (subscription_id, since);
"#,
    // 13: audit records carry the tenant of the resource they concern
    // (`AuditRecord::tenant_id`); a tenant-bound key's listing is a range
    // of this index (records written before have none: global).
    r#"
ALTER TABLE audit ADD COLUMN tenant_id TEXT;
CREATE INDEX audit_by_tenant ON audit (tenant_id, pos) WHERE tenant_id IS NOT NULL;
"#,
    // 14: API keys and principal grants (`shared::api_key`): one row per
    // key, unique by (scope = tenant or '', name) and listed per scope in
    // id order; one row per credential (a secret's keyed hash, a principal
    // ARN) naming its key, so a request finds its key in one read. The
    // generated API key was kept in clear in `settings`: it is deleted
    // (`hookline serve` generates an admin key, stored hashed, instead).
    r#"
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    data TEXT NOT NULL
) WITHOUT ROWID;
CREATE UNIQUE INDEX api_keys_by_name ON api_keys (scope, name);
CREATE INDEX api_keys_by_scope ON api_keys (scope, id);
CREATE TABLE api_key_lookups (lookup TEXT PRIMARY KEY, key_id TEXT NOT NULL) WITHOUT ROWID;
CREATE INDEX api_key_lookups_by_key ON api_key_lookups (key_id);
DELETE FROM settings WHERE key = 'api_key';
"#,
    // 15: idempotency keys of creating requests (`shared::idempotency`):
    // one row per key in its caller's namespace (`id`, a hash: the key is
    // not stored), the request's fingerprint, the claim's holder and lease,
    // the answer sealed with the data key, and `expires_at` (seconds) for
    // the purge, through its index.
    r#"
CREATE TABLE idempotency_keys (
    id TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    token TEXT NOT NULL,
    lease_until INTEGER NOT NULL,
    response TEXT,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);
"#,
    // 16: delivery statistics (`shared::stats`): one row per series
    // (`sub:<id>`, `tenant:<id>`, `system`), width (`m` minute, `h` hour)
    // and bucket start (`at`, epoch seconds): attempts by outcome and the
    // latency histogram's bucket counts (comma-separated). Added to by the
    // flush of closed minutes; deleted by the purge past the event
    // retention, through the `at` index.
    r#"
CREATE TABLE delivery_stats (
    series TEXT NOT NULL,
    width TEXT NOT NULL,
    at INTEGER NOT NULL,
    succeeded INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    dead_lettered INTEGER NOT NULL,
    latency TEXT NOT NULL,
    PRIMARY KEY (series, width, at)
) WITHOUT ROWID;
CREATE INDEX delivery_stats_by_at ON delivery_stats (at);
"#,
    // 17: the event types seen at ingest (`shared::event_types`): one row
    // per (scope, type), inserted once (`INSERT OR IGNORE`), listed by
    // scope in type order through the primary key; `first_seen_at` in
    // milliseconds.
    r#"
CREATE TABLE event_types (
    scope TEXT NOT NULL,
    event_type TEXT NOT NULL,
    first_seen_at INTEGER NOT NULL,
    PRIMARY KEY (scope, event_type)
) WITHOUT ROWID;
"#,
    // 18:
    // subscribers' acknowledgements (`shared::ack`): the latest one per
    // (subscription, webhook id), replaced by each newer one (`INSERT OR
    // REPLACE`), read by its primary key; `data` is the record as JSON;
    // `expires_at` (epoch seconds) for the purge, through its index.
    r#"
CREATE TABLE acknowledgements (
    subscription_id TEXT NOT NULL,
    webhook_id TEXT NOT NULL,
    data TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (subscription_id, webhook_id)
) WITHOUT ROWID;
CREATE INDEX acknowledgements_by_expiry ON acknowledgements (expires_at);
"#,
    // 19: the pull
    // listing (`shared::pull`): routing writes `pull_key` only for sagas
    // of pull subscriptions, so the partial index holds only those and
    // every other saga's insert costs what it did.
    r#"
ALTER TABLE sagas ADD COLUMN pull_key TEXT;
CREATE INDEX sagas_by_pull ON sagas (subscription_id, pull_key) WHERE pull_key IS NOT NULL;
"#,
    // 20: the event catalog (`shared::catalog`): one
    // row per registered major version, keyed by its event type (`name`
    // or `name.v<N>`), the entry as JSON in `data`; `updated_at` (ms) is
    // what a conditional update compares; versions of a name through the
    // (name, version) index.
    r#"
CREATE TABLE event_catalog (
    event_type TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    data TEXT NOT NULL
) WITHOUT ROWID;
CREATE UNIQUE INDEX event_catalog_by_name ON event_catalog (name, version);
"#,
];
