//! The design `template.yaml` is checked against: each function's grants
//! (the stage table of `docs/architecture.md#stage-table`), the "must
//! never" rules, the HTTP routes and the functions' environment.

use super::*;

// ------------------------------------------------------------------ the design

/// Function logical id → (role logical id, cargo binary).
pub(super) const FUNCTIONS: &[(&str, &str, &str)] = &[
    ("IngestFunction", "IngestRole", "ingest"),
    ("RouterFunction", "RouterRole", "router"),
    ("SagaFunction", "SagaRole", "saga"),
    ("DeliveryFunction", "DeliveryRole", "delivery"),
    ("RequeueFunction", "RequeueRole", "requeue"),
    ("ApiFunction", "ApiRole", "api"),
    ("ReconcilerFunction", "ReconcilerRole", "reconciler"),
];

pub(super) const TABLES: &[&str] =
    &["EventsTable", "SubscriptionsTable", "SagasTable", "AttemptsTable", "DeadLettersTable"];

pub(super) const QUEUES: &[&str] = &[
    "DeliveriesQueue",
    "DeliveriesDLQ",
    "RetriesQueue",
    "RetriesDLQ",
    "IngestQueue",
    "IngestDLQ",
    "RequeueQueue",
    "RequeueDLQ",
    "StreamFailuresQueue",
];

/// Work queue → its dead-letter queue.
pub(super) const REDRIVE: &[(&str, &str)] = &[
    ("DeliveriesQueue", "DeliveriesDLQ"),
    ("RetriesQueue", "RetriesDLQ"),
    ("IngestQueue", "IngestDLQ"),
    ("RequeueQueue", "RequeueDLQ"),
];

/// What an SQS event source mapping needs on its queue.
pub(super) const CONSUME: &[&str] =
    &["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility"];
/// What a DynamoDB stream event source mapping needs on the stream ARN
/// (`<Table>/stream`); `dynamodb:ListStreams` goes on `<Table>/stream/*`.
pub(super) const STREAM_READ: &[&str] =
    &["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"];

pub(super) fn grant(set: &mut Grants, actions: &[&str], resources: &[&str]) {
    for a in actions {
        for r in resources {
            set.insert((a.to_string(), r.to_string()));
        }
    }
}

/// The stage table (docs/architecture.md#stage-table) as IAM: exactly what
/// each function's policy grants.
pub(super) fn expected_grants() -> BTreeMap<&'static str, Grants> {
    let mut m = BTreeMap::new();

    // ingest: reads the request; writes Events (conditional put); never
    // updates or deletes events. Consumes the EventBridge queue and sends
    // envelopes that fail validation to its DLQ.
    let mut g = Grants::new();
    grant(&mut g, &["dynamodb:PutItem"], &["EventsTable"]);
    grant(&mut g, CONSUME, &["IngestQueue"]);
    grant(&mut g, &["sqs:SendMessage"], &["IngestDLQ"]);
    // A partitioned event's number, in the transaction of its put.
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:UpdateItem"], &["OrderTable"]);
    // POST /v1/events authenticates its caller: the grant of its principal.
    grant(&mut g, &["dynamodb:GetItem"], &["ApiKeysTable"]);
    // The event types seen: one conditional put per new (scope, type);
    // the event catalog: one GetItem per type per container per 30 s.
    grant(&mut g, &["dynamodb:PutItem", "dynamodb:GetItem"], &["EventTypesTable"]);
    m.insert("IngestFunction", g);

    // router: reads the Events stream and Subscriptions; writes Sagas
    // (conditional put, Pending); never changes saga status, creates jobs or
    // reads the payload. StreamFailuresQueue: its on-failure destination.
    let mut g = Grants::new();
    grant(&mut g, STREAM_READ, &["EventsTable/stream"]);
    grant(&mut g, &["dynamodb:ListStreams"], &["EventsTable/stream/*"]);
    // Subscriptions: an event's route keys in index by_key, then each by
    // id (never a scan).
    grant(&mut g, &["dynamodb:GetItem"], &["SubscriptionsTable"]);
    grant(&mut g, &["dynamodb:Query"], &["SubscriptionsTable/index/*"]);
    grant(&mut g, &["dynamodb:PutItem"], &["SagasTable"]);
    grant(&mut g, &["sqs:SendMessage"], &["StreamFailuresQueue"]);
    // Lane entries of ordered subscriptions; each partition's routed-through mark.
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"], &["OrderTable"]);
    m.insert("RouterFunction", g);

    // saga step: reads the Sagas and Attempts streams and retry timers;
    // writes saga status, job messages, dead letters; never delivers.
    // EventsTable GetItem: the event for the dead-letter snapshot and for
    // its outcome item (EventOutcomesTable: one conditional UpdateItem per
    // rise; the event is never written again).
    // SubscriptionsTable PutItem: a 410 Gone deactivates the subscription
    // (the adapter's versioned update is a conditional PutItem).
    let mut g = Grants::new();
    grant(&mut g, STREAM_READ, &["SagasTable/stream", "AttemptsTable/stream"]);
    grant(&mut g, &["dynamodb:ListStreams"], &["SagasTable/stream/*", "AttemptsTable/stream/*"]);
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:UpdateItem"], &["SagasTable"]);
    grant(&mut g, &["dynamodb:GetItem"], &["EventsTable"]);
    grant(&mut g, &["dynamodb:UpdateItem"], &["EventOutcomesTable"]);
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:PutItem"], &["SubscriptionsTable"]);
    // Operational events (hookline.dead_letter.created, …disabled) are
    // published like any event (no partition key: one conditional put); a
    // 410's disable leaves an audit record.
    grant(&mut g, &["dynamodb:PutItem"], &["EventsTable", "AuditTable"]);
    // DeadLettersTable GetItem: a requeued saga's event snapshot; a dead
    // letter is put with +1 on its shard of the open count (UpdateItem ADD
    // in the same transaction).
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"], &["DeadLettersTable"]);
    grant(&mut g, &["sqs:SendMessage"], &["DeliveriesQueue", "RetriesQueue", "DeliveriesDLQ", "StreamFailuresQueue"]);
    grant(&mut g, CONSUME, &["RetriesQueue"]);
    // Ordered sagas: the partition's mark, the lane's head, a missing entry
    // put back, leaving the lane.
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:DeleteItem"], &["OrderTable"]);
    // Subscriptions requiring acknowledgements: the latest one read at
    // each check of an AwaitingAck saga.
    grant(&mut g, &["dynamodb:GetItem"], &["AcknowledgementsTable"]);
    m.insert("SagaFunction", g);

    // delivery: reads the deliveries queue, Events, Subscriptions, Sagas;
    // writes Attempts (conditional put); decides no saga transition or dead
    // letter. A first attempt that was delivered and leaves nothing to
    // decide is kept on its saga's item in the write that completes it (the
    // saga step's decision, conditional on Pending with no attempt).
    let mut g = Grants::new();
    grant(&mut g, CONSUME, &["DeliveriesQueue"]);
    grant(&mut g, &["dynamodb:GetItem"], &["EventsTable", "SagasTable"]);
    grant(&mut g, &["dynamodb:GetItem"], &["SubscriptionsTable"]);
    grant(&mut g, &["dynamodb:PutItem"], &["AttemptsTable"]);
    grant(&mut g, &["dynamodb:UpdateItem"], &["SagasTable"]);
    // A requeued saga whose event expired delivers its dead letter's
    // snapshot; a job hit by a fault on Hookline's side is sent again.
    grant(&mut g, &["dynamodb:GetItem"], &["DeadLettersTable"]);
    grant(&mut g, &["sqs:SendMessage"], &["DeliveriesQueue"]);
    // Each subscription's breaker and health window; the slots and next
    // start of subscriptions with explicit limits.
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem"], &["HealthTable"]);
    // A subscription failing for DISABLE_AFTER is disabled (conditional
    // put), with its audit record and hookline.subscription.disabled;
    // breaker flips are audited.
    grant(&mut g, &["dynamodb:PutItem"], &["SubscriptionsTable", "EventsTable", "AuditTable"]);
    // Delivery statistics: a closed minute added to its minute and hour
    // items (UpdateItem ADD), once per series per minute per container.
    grant(&mut g, &["dynamodb:UpdateItem"], &["StatsTable"]);
    // The breaker of an auto_requeue subscription closed: a request to the
    // requeue stage, which makes the bulk job.
    grant(&mut g, &["sqs:SendMessage"], &["RequeueQueue"]);
    // Queue and bus destinations: exactly the configured ones (conditional
    // statements: none when their list is empty).
    grant(&mut g, &["sqs:SendMessage"], &["DestinationQueueArns"]);
    grant(&mut g, &["events:PutEvents"], &["DestinationBusArns"]);
    m.insert("DeliveryFunction", g);

    // reconciler: re-drives what the router and saga step gave up on
    // (StreamFailuresQueue pointers, read back from the streams) and sagas
    // that stopped progressing (SagasTable index by_due), through their
    // normal conditional paths; reports open dead letters. Never delivers.
    let mut g = Grants::new();
    grant(&mut g, CONSUME, &["StreamFailuresQueue"]);
    grant(&mut g, STREAM_READ, &["EventsTable/stream", "SagasTable/stream", "AttemptsTable/stream"]);
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:PutItem"], &["SubscriptionsTable"]);
    grant(&mut g, &["dynamodb:Query"], &["SubscriptionsTable/index/*"]);
    grant(
        &mut g,
        &["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"],
        &["SagasTable", "SagasTable/index/*"],
    );
    grant(&mut g, &["dynamodb:Query"], &["AttemptsTable"]);
    // Re-driven sagas raise their event's outcome (its item of
    // EventOutcomesTable; the event is never written again).
    grant(&mut g, &["dynamodb:GetItem"], &["EventsTable"]);
    grant(&mut g, &["dynamodb:UpdateItem"], &["EventOutcomesTable"]);
    // Re-driven saga steps publish operational events and audit disables.
    grant(&mut g, &["dynamodb:PutItem"], &["EventsTable", "AuditTable"]);
    // Dead letters of re-driven sagas, each with +1 on the open count
    // (UpdateItem ADD); the count is a GetItem of the counter's shards.
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"], &["DeadLettersTable"]);
    grant(&mut g, &["sqs:SendMessage"], &["DeliveriesQueue", "RetriesQueue", "DeliveriesDLQ"]);
    grant(
        &mut g,
        &["dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
        &["OrderTable"],
    );
    // An ordered lane's old gap: the event at its number (index
    // by_partition); the search shows each page's outcomes (BatchGetItem).
    grant(&mut g, &["dynamodb:Query"], &["EventsTable/index/*"]);
    grant(&mut g, &["dynamodb:BatchGetItem"], &["EventOutcomesTable"]);
    m.insert("ReconcilerFunction", g);

    // requeue: reads the requeue queue; writes a new saga linked to the old
    // one (conditional put); never touches the old saga. DeadLettersTable
    // UpdateItem marks the dead letter requeued; EventsTable and
    // SubscriptionsTable are read for replays.
    let mut g = Grants::new();
    grant(&mut g, CONSUME, &["RequeueQueue"]);
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:UpdateItem"], &["DeadLettersTable"]);
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:PutItem"], &["SagasTable"]);
    grant(&mut g, &["dynamodb:GetItem"], &["EventsTable"]);
    grant(&mut g, &["dynamodb:GetItem"], &["SubscriptionsTable"]);
    grant(&mut g, &["dynamodb:Query"], &["SubscriptionsTable/index/*"]);
    // A redriven job whose saga never died goes back to the deliveries queue.
    grant(&mut g, &["sqs:SendMessage"], &["DeliveriesQueue"]);
    // Bulk jobs: the open dead letters of a filter through the listing
    // indexes, the job record (conditional on its version), the next page as
    // a message to itself; a bulk skip releases a blocked lane as the API's.
    grant(&mut g, &["dynamodb:Query"], &["DeadLettersTable/index/*"]);
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:PutItem"], &["JobsTable"]);
    grant(&mut g, &["sqs:SendMessage"], &["RequeueQueue"]);
    grant(&mut g, &["dynamodb:Query", "dynamodb:DeleteItem"], &["OrderTable"]);
    grant(&mut g, &["sqs:SendMessage"], &["RetriesQueue"]);
    // Bulk replays by time range, tenant or partition read the events
    // table's listing indexes; a replay to an ordered subscription puts the
    // new saga's lane entry; a console redrive leaves an audit record.
    grant(&mut g, &["dynamodb:Query"], &["EventsTable/index/*"]);
    grant(&mut g, &["dynamodb:BatchGetItem"], &["EventOutcomesTable"]);
    grant(&mut g, &["dynamodb:PutItem"], &["OrderTable"]);
    grant(&mut g, &["dynamodb:PutItem"], &["AuditTable"]);
    // Operational events of requeues, skips and replays (one conditional put).
    grant(&mut g, &["dynamodb:PutItem"], &["EventsTable"]);
    m.insert("RequeueFunction", g);

    // api: subscriptions CRUD, event and delivery status, dead letters
    // (list, skip), requeue/replay requests onto the requeue queue, queue
    // depths for /metrics, the audit trail. It never writes sagas or
    // attempts, and writes events only to publish Hookline's own
    // operational events.
    let mut g = Grants::new();
    // A subscription and its index entries are one TransactWriteItems,
    // authorized as its PutItem and DeleteItem actions; lists query the index.
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem"], &["SubscriptionsTable"]);
    grant(&mut g, &["dynamodb:Query"], &["SubscriptionsTable/index/*"]);
    // The one exception to "never scan subscriptions" (NEVER_EXCEPT).
    grant(&mut g, &["dynamodb:Scan"], &["SubscriptionsTable"]);
    grant(&mut g, &["dynamodb:GetItem"], &["EventsTable"]);
    // GET /v1/events: the event indexes (by_time, tenant_shards,
    // by_partition); each page's outcomes (BatchGetItem), and with
    // outcome= the outcome indexes (by_outcome, by_partition).
    grant(&mut g, &["dynamodb:Query"], &["EventsTable/index/*", "EventOutcomesTable/index/*"]);
    grant(&mut g, &["dynamodb:BatchGetItem"], &["EventOutcomesTable"]);
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:Query"], &["SagasTable"]);
    // Pull: one subscription's entries of the sparse index by_pull.
    grant(&mut g, &["dynamodb:Query"], &["SagasTable/index/*"]);
    grant(&mut g, &["dynamodb:Query"], &["AttemptsTable", "DeadLettersTable/index/*"]);
    // Dead letters are listed through their indexes; the one Scan is the
    // operator's reindex after an upgrade (POST /v1/dead-letters/reindex).
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:Scan"], &["DeadLettersTable"]);
    grant(&mut g, &["sqs:SendMessage"], &["RequeueQueue"]);
    // Bulk jobs: created (conditional put), shown by GET /v1/jobs/{id}.
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:PutItem"], &["JobsTable"]);
    grant(&mut g, &["sqs:GetQueueAttributes"], QUEUES);
    // A subscription's `health`; re-enabling forgets its failing run.
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:PutItem"], &["HealthTable"]);
    // The audit trail: appended by every change, listed through its indexes;
    // re-enabling publishes hookline.subscription.enabled (conditional put).
    grant(&mut g, &["dynamodb:PutItem"], &["AuditTable", "EventsTable"]);
    grant(&mut g, &["dynamodb:Query"], &["AuditTable/index/*"]);
    // Skipping a dead letter that blocks its lane releases the next saga;
    // an ops skip of a lane's gap moves the partition's mark.
    grant(
        &mut g,
        &["dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
        &["OrderTable"],
    );
    grant(&mut g, &["sqs:SendMessage"], &["RetriesQueue"]);
    // Callers' grants: read per request (cached), managed by /v1/keys in
    // conditional transactions (PutItem, DeleteItem), listed by tenant.
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem"], &["ApiKeysTable"]);
    grant(&mut g, &["dynamodb:Query"], &["ApiKeysTable/index/*"]);
    // Idempotency-Key on creating requests: a key's record read, claimed
    // and answered (conditional puts), released when the answer is not kept.
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem"], &["IdempotencyTable"]);
    // The stats routes: one series' range of points (Query of one partition).
    grant(&mut g, &["dynamodb:Query"], &["StatsTable"]);
    // GET /v1/event-types (Query on one scope); the console's
    // /ui/api/v1/events ingests here too (conditional puts). The event
    // catalog: registered (GetItem, conditional PutItem), listed (Query),
    // read by that ingest (GetItem).
    grant(&mut g, &["dynamodb:PutItem", "dynamodb:Query", "dynamodb:GetItem"], &["EventTypesTable"]);
    // Subscribers' acknowledgements: stored (the latest replaces it), read
    // with the deliveries.
    grant(&mut g, &["dynamodb:GetItem", "dynamodb:PutItem"], &["AcknowledgementsTable"]);
    // A queue or bus destination's verification message (as delivery).
    grant(&mut g, &["sqs:SendMessage"], &["DestinationQueueArns"]);
    grant(&mut g, &["events:PutEvents"], &["DestinationBusArns"]);
    m.insert("ApiFunction", g);

    // Every function: the deployment's data key at cold start (one GetItem
    // of KeysTable, one kms:Decrypt); the first container of a deployment
    // creates it (kms:Encrypt, conditional PutItem) and one that starts
    // after a move to another KMS key re-wraps it (aws/src/keys.rs). Any
    // function may be the first to start, so each may create it.
    for g in m.values_mut() {
        grant(g, &["dynamodb:GetItem", "dynamodb:PutItem"], &["KeysTable"]);
        grant(g, &["kms:Decrypt", "kms:Encrypt"], &["DataKmsKey"]);
    }
    m
}

/// The stage table's "must never" column (and the invariants behind it,
/// docs/architecture.md#invariants), as rules on (function, action,
/// resource). Redundant with the exact table above on purpose: these say why,
/// and catch a wrong table edit.
/// `None` function: no function at all.
pub(super) const NEVER: &[(Option<&str>, &str, &str, &str)] = &[
    (None, "dynamodb:UpdateItem", "EventsTable", "events are append-only"),
    (None, "dynamodb:DeleteItem", "EventsTable", "events are append-only (TTL removes them)"),
    (None, "dynamodb:UpdateItem", "AttemptsTable", "attempts are append-only"),
    (None, "dynamodb:DeleteItem", "AttemptsTable", "attempts are append-only"),
    (None, "dynamodb:DeleteItem", "SagasTable", "terminal sagas never change"),
    (
        None,
        "dynamodb:Scan",
        "SubscriptionsTable",
        "subscriptions are found through index by_key, never by reading them all",
    ),
    (Some("RouterFunction"), "dynamodb:UpdateItem", "SagasTable", "router never changes saga status"),
    (Some("RouterFunction"), "dynamodb:UpdateItem", "EventsTable", "router never changes an event"),
    (Some("RouterFunction"), "dynamodb:UpdateItem", "SubscriptionsTable", "router never changes a subscription"),
    (Some("RouterFunction"), "sqs:SendMessage", "DeliveriesQueue", "router never creates jobs"),
    (Some("RouterFunction"), "dynamodb:GetItem", "EventsTable", "router never reads the payload"),
    (Some("DeliveryFunction"), "dynamodb:UpdateItem", "*", "delivery never changes a saga (nor anything else)"),
    (Some("DeliveryFunction"), "dynamodb:PutItem", "SagasTable", "delivery never changes a saga"),
    (Some("DeliveryFunction"), "dynamodb:PutItem", "DeadLettersTable", "delivery never decides a dead letter"),
    (
        Some("DeliveryFunction"),
        "sqs:SendMessage",
        "RetriesQueue",
        "delivery never schedules retries (the saga step decides)",
    ),
    (Some("DeliveryFunction"), "sqs:SendMessage", "DeliveriesDLQ", "delivery never decides a dead letter"),
    (Some("ReconcilerFunction"), "dynamodb:PutItem", "AttemptsTable", "the reconciler never delivers"),
    (Some("IngestFunction"), "dynamodb:UpdateItem", "SagasTable", "ingest never updates a saga"),
    (Some("IngestFunction"), "dynamodb:UpdateItem", "SubscriptionsTable", "ingest never updates a subscription"),
    (Some("IngestFunction"), "dynamodb:DeleteItem", "*", "ingest never deletes"),
    (Some("RequeueFunction"), "dynamodb:UpdateItem", "SagasTable", "requeue never touches the old saga"),
    (Some("ApiFunction"), "dynamodb:UpdateItem", "SagasTable", "only the saga step changes saga status"),
    (
        Some("ApiFunction"),
        "dynamodb:PutItem",
        "SagasTable",
        "the API queues requeues; the requeue function creates sagas",
    ),
];

/// Grants a rule of [`NEVER`] allows for one function, each with why:
/// (function, action, resource, why). Nothing else is exempt.
pub(super) const NEVER_EXCEPT: &[(&str, &str, &str, &str)] = &[
    (
        "ApiFunction",
        "dynamodb:Scan",
        "SubscriptionsTable",
        "POST /v1/subscriptions/reindex: the operator's repair after an upgrade pages through the table (≤ 100 \
         items a call) for subscriptions stored before index by_key existed; never on a pipeline path",
    ),
    (
        "DeliveryFunction",
        "dynamodb:UpdateItem",
        "SagasTable",
        "a first attempt that was delivered and leaves the saga step nothing to decide \
         (shared::attempt::Attempt::completes_its_saga) is kept on its saga's item in the one write that completes \
         it, conditional on the saga being Pending with no attempt: one write unit instead of the attempt's put \
         and the saga step's update; every other transition stays the saga step's",
    ),
    (
        "DeliveryFunction",
        "dynamodb:UpdateItem",
        "StatsTable",
        "delivery statistics are counters: a closed minute is added (UpdateItem ADD) to its minute and hour items, \
         so several containers' flushes sum up; no saga, attempt or dead letter is touched",
    ),
];

/// The HTTP API's routes, from the API's OpenAPI document (the contract
/// `GET /openapi.json` serves): one route per operation, on IngestFunction
/// for the event posts and on ApiFunction for every other, plus one `ANY`
/// route per path on ApiFunction (so a wrong method reaches the router and
/// is its `405` with `Allow`, not API Gateway's `404`). Each as (method,
/// path, function, authorizer): `NONE` for the document's open operations
/// (empty `security`) and the bearer-only ones
/// (`hookline_api::routes::BEARER_ONLY`: bearer alone), `AWS_IAM` (the
/// API's default, not overridden) for the others, whose security is the
/// document's SigV4 scheme.
pub(super) fn routes() -> BTreeSet<(String, String, String, &'static str)> {
    let doc = serde_json::to_value(hookline_api::openapi::document()).expect("the document serializes");
    // The document's operations, and the route table's rows (the same set:
    // hookline-api's `the_document_has_exactly_the_routes` fails when they
    // differ; a row not yet documented is open when it has no action).
    let mut operations: BTreeMap<(String, String), &'static str> = BTreeMap::new();
    for r in hookline_api::routes::ROUTES {
        let auth = if r.action.is_none() { "NONE" } else { "AWS_IAM" };
        operations.insert((r.method.to_string(), r.path.to_string()), auth);
    }
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            let open = op["security"].as_array().is_some_and(Vec::is_empty);
            let sigv4 = op["security"].as_array().is_some_and(|s| s.iter().any(|r| r.get(SIGV4).is_some()))
                && doc["components"]["securitySchemes"][SIGV4]["x-amazon-apigateway-authtype"] == "awsSigv4";
            // A bearer-only route (pull): no IAM authorizer, the API checks
            // the key itself; exactly the routes the API lists so.
            let bearer = op["security"].as_array().is_some_and(|s| s.len() == 1 && s[0].get("bearer").is_some())
                && hookline_api::routes::bearer_only(&method.to_uppercase(), path);
            let auth = match (open || bearer, sigv4) {
                (true, _) => "NONE",
                (false, true) => "AWS_IAM",
                (false, false) => "not the document's awsSigv4 scheme",
            };
            operations.insert((method.to_uppercase(), path.clone()), auth);
        }
    }
    let mut out = BTreeSet::new();
    for (method, path) in CONSOLE_ROUTES {
        out.insert((method.to_string(), path.to_string(), "ApiFunction".to_string(), "NONE"));
    }
    for ((method, path), auth) in operations {
        let function =
            if method == "POST" && INGEST_PATHS.contains(&path.as_str()) { "IngestFunction" } else { "ApiFunction" };
        out.insert(("ANY".to_string(), path.clone(), "ApiFunction".to_string(), auth));
        out.insert((method, path, function.to_string(), auth));
    }
    out
}

use hookline_api::openapi::SIGV4;

/// The console's routes (api/src/console.rs), besides the document's: its
/// files and the API again under `/ui/api`, where the API checks bearer
/// credentials itself (a browser cannot sign requests), so API Gateway
/// authorizes nothing there.
pub(super) const CONSOLE_ROUTES: &[(&str, &str)] = &[("GET", "/ui"), ("ANY", "/ui/{proxy+}")];

/// The paths whose `POST` the ingest function answers.
pub(super) const INGEST_PATHS: &[&str] = &["/v1/events", "/v1/events/batch"];

/// Variables only some functions have (not in Globals): (function,
/// variable, the resource it names). No other function may have them.
pub(super) const FUNCTION_ENVIRONMENT: &[(&str, &str, &str)] =
    &[("ApiFunction", "IDEMPOTENCY_TABLE", "IdempotencyTable")];

/// infra/README.md's function environment: variable → the resource it names.
pub(super) const ENVIRONMENT: &[(&str, &str)] = &[
    ("EVENTS_TABLE", "EventsTable"),
    ("EVENT_OUTCOMES_TABLE", "EventOutcomesTable"),
    ("SUBSCRIPTIONS_TABLE", "SubscriptionsTable"),
    ("KEYS_TABLE", "KeysTable"),
    ("SAGAS_TABLE", "SagasTable"),
    ("ATTEMPTS_TABLE", "AttemptsTable"),
    ("DEAD_LETTERS_TABLE", "DeadLettersTable"),
    ("JOBS_TABLE", "JobsTable"),
    ("STATS_TABLE", "StatsTable"),
    ("EVENT_TYPES_TABLE", "EventTypesTable"),
    ("ACKS_TABLE", "AcknowledgementsTable"),
    ("DELIVERIES_QUEUE_URL", "DeliveriesQueue"),
    ("DELIVERIES_DLQ_URL", "DeliveriesDLQ"),
    ("RETRIES_QUEUE_URL", "RetriesQueue"),
    ("REQUEUE_QUEUE_URL", "RequeueQueue"),
    ("INGEST_DLQ_URL", "IngestDLQ"),
    ("RETENTION_DAYS", "RetentionDays"),
    ("MAX_ATTEMPTS", "MaxAttempts"),
    ("RETRY_BASE_MS", "RetryBaseMs"),
    ("RETRY_CAP_MS", "RetryCapMs"),
];
