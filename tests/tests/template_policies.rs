//! `template.yaml` checked against the design: one IAM role per function
//! granting exactly its row of the stage table in
//! `docs/architecture.md#stage-table` (the
//! table below mirrors it, action by action and resource by resource), the
//! "must never" column as separate rules, and the reliability wiring that is
//! easy to lose in an edit: every work queue redrives to a DLQ that allows
//! it back, every DLQ has an alarm, every stream event source bisects,
//! retries a bounded number of times, reports partial failures and has an
//! on-failure destination, every function is a Rust arm64 binary built by
//! cargo-lambda.
//!
//! Each check returns the list of what it found wrong, so the tests at the
//! bottom can also prove that the checks fail on a template that breaks
//! them (a check that cannot fail checks nothing).

use std::collections::{BTreeMap, BTreeSet};

use hookline_tests::iam::{
    fn_prop, get_att, ids_of_type, load_template as load, ref_of, resource, resource_key, role_grants, strings, sub_of,
    type_of, Grants,
};
use serde_yaml::Value;

// ------------------------------------------------------------------ the design

/// Function logical id → (role logical id, cargo binary).
const FUNCTIONS: &[(&str, &str, &str)] = &[
    ("IngestFunction", "IngestRole", "ingest"),
    ("RouterFunction", "RouterRole", "router"),
    ("SagaFunction", "SagaRole", "saga"),
    ("DeliveryFunction", "DeliveryRole", "delivery"),
    ("RequeueFunction", "RequeueRole", "requeue"),
    ("ApiFunction", "ApiRole", "api"),
    ("ReconcilerFunction", "ReconcilerRole", "reconciler"),
];

const TABLES: &[&str] = &["EventsTable", "SubscriptionsTable", "SagasTable", "AttemptsTable", "DeadLettersTable"];

const QUEUES: &[&str] = &[
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
const REDRIVE: &[(&str, &str)] = &[
    ("DeliveriesQueue", "DeliveriesDLQ"),
    ("RetriesQueue", "RetriesDLQ"),
    ("IngestQueue", "IngestDLQ"),
    ("RequeueQueue", "RequeueDLQ"),
];

/// What an SQS event source mapping needs on its queue.
const CONSUME: &[&str] =
    &["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility"];
/// What a DynamoDB stream event source mapping needs on the stream ARN
/// (`<Table>/stream`); `dynamodb:ListStreams` goes on `<Table>/stream/*`.
const STREAM_READ: &[&str] = &["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"];

fn grant(set: &mut Grants, actions: &[&str], resources: &[&str]) {
    for a in actions {
        for r in resources {
            set.insert((a.to_string(), r.to_string()));
        }
    }
}

/// The stage table (docs/architecture.md#stage-table) as IAM: exactly what
/// each function's policy grants.
fn expected_grants() -> BTreeMap<&'static str, Grants> {
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
    m.insert("SagaFunction", g);

    // delivery: reads the deliveries queue, Events, Subscriptions, Sagas;
    // writes Attempts (conditional put); never changes a saga or decides a
    // dead letter.
    let mut g = Grants::new();
    grant(&mut g, CONSUME, &["DeliveriesQueue"]);
    grant(&mut g, &["dynamodb:GetItem"], &["EventsTable", "SagasTable"]);
    grant(&mut g, &["dynamodb:GetItem"], &["SubscriptionsTable"]);
    grant(&mut g, &["dynamodb:PutItem"], &["AttemptsTable"]);
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
    m.insert("ApiFunction", g);

    m
}

/// The stage table's "must never" column (and the invariants behind it,
/// docs/architecture.md#invariants), as rules on (function, action,
/// resource). Redundant with the exact table above on purpose: these say why,
/// and catch a wrong table edit.
/// `None` function: no function at all.
const NEVER: &[(Option<&str>, &str, &str, &str)] = &[
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
const NEVER_EXCEPT: &[(&str, &str, &str, &str)] = &[(
    "ApiFunction",
    "dynamodb:Scan",
    "SubscriptionsTable",
    "POST /v1/subscriptions/reindex: the operator's repair after an upgrade pages through the table (≤ 100 items \
         a call) for subscriptions stored before index by_key existed; never on a pipeline path",
)];

/// HTTP API routes: (method, path) → function.
const ROUTES: &[(&str, &str, &str)] = &[
    ("POST", "/v1/events", "IngestFunction"),
    ("POST", "/v1/events/batch", "IngestFunction"),
    ("ANY", "/v1/subscriptions", "ApiFunction"),
    ("ANY", "/v1/subscriptions/{proxy+}", "ApiFunction"),
    ("GET", "/v1/events", "ApiFunction"),
    ("GET", "/v1/events/{id}", "ApiFunction"),
    ("GET", "/v1/events/{id}/deliveries", "ApiFunction"),
    ("POST", "/v1/events/{id}/replay", "ApiFunction"),
    ("ANY", "/v1/dead-letters", "ApiFunction"),
    ("ANY", "/v1/dead-letters/{proxy+}", "ApiFunction"),
    ("POST", "/v1/replays", "ApiFunction"),
    ("GET", "/v1/jobs/{id}", "ApiFunction"),
    ("GET", "/v1/audit", "ApiFunction"),
    ("GET", "/healthz", "ApiFunction"),
    ("GET", "/metrics", "ApiFunction"),
];

/// infra/README.md's function environment: variable → the resource it names.
const ENVIRONMENT: &[(&str, &str)] = &[
    ("EVENTS_TABLE", "EventsTable"),
    ("EVENT_OUTCOMES_TABLE", "EventOutcomesTable"),
    ("SUBSCRIPTIONS_TABLE", "SubscriptionsTable"),
    ("SAGAS_TABLE", "SagasTable"),
    ("ATTEMPTS_TABLE", "AttemptsTable"),
    ("DEAD_LETTERS_TABLE", "DeadLettersTable"),
    ("JOBS_TABLE", "JobsTable"),
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

// ------------------------------------------------------------------ reading the template

fn basic_execution_arn(v: &Value) -> bool {
    const SUFFIX: &str = ":iam::aws:policy/service-role/AWSLambdaBasicExecutionRole";
    let s = sub_of(v).or_else(|| v.as_str().map(str::to_string)).unwrap_or_default();
    s == format!("arn:${{AWS::Partition}}{SUFFIX}") || s == format!("arn:aws{SUFFIX}")
}

// ------------------------------------------------------------------ checks

/// One explicit role per function, one inline policy each, the basic
/// execution managed policy and nothing else, and exactly the stage
/// table's grants.
fn check_policies(t: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let expected = expected_grants();
    let mut roles_used = BTreeSet::new();
    for (function, role, _) in FUNCTIONS {
        let props = &t["Resources"][*function]["Properties"];
        match get_att(&props["Role"]) {
            Some((r, attr)) if r == *role && attr == "Arn" => {}
            other => errors.push(format!("{function}: Role must be !GetAtt {role}.Arn, found {other:?}")),
        }
        for sam_managed in ["Policies", "PermissionsBoundary"] {
            if !props[sam_managed].is_null() {
                errors.push(format!("{function}: {sam_managed} is set; permissions belong in {role}"));
            }
        }
        if !roles_used.insert(role.to_string()) {
            errors.push(format!("{role} is shared by several functions"));
        }
        if type_of(t, role) != Some("AWS::IAM::Role") {
            errors.push(format!("{role}: not an AWS::IAM::Role"));
            continue;
        }
        let rp = &t["Resources"][*role]["Properties"];
        let assume = &rp["AssumeRolePolicyDocument"]["Statement"];
        let lambda_only = strings(assume).len() == 1
            && strings(&assume[0]["Principal"]["Service"]).iter().map(|s| s.as_str()).collect::<Vec<_>>()
                == vec![Some("lambda.amazonaws.com")];
        if !lambda_only {
            errors.push(format!("{role}: must be assumable by lambda.amazonaws.com only"));
        }
        let managed = strings(&rp["ManagedPolicyArns"]);
        if managed.len() != 1 || !basic_execution_arn(managed[0]) {
            errors.push(format!(
                "{role}: ManagedPolicyArns must be exactly AWSLambdaBasicExecutionRole, found {managed:?}"
            ));
        }
        if strings(&rp["Policies"]).len() != 1 {
            errors.push(format!("{role}: must have exactly one inline policy"));
        }
        let (actual, mut errs) = role_grants(t, role);
        errors.append(&mut errs);
        for (a, r) in &actual {
            if a == "*" || a.ends_with(":*") || a.contains('*') {
                errors.push(format!("{function}: wildcard action {a} on {r}"));
            }
            let allowed_wildcard = r.ends_with("/stream/*") || r.ends_with("/index/*");
            if r.contains('*') && !allowed_wildcard {
                errors.push(format!("{function}: wildcard resource {r} for {a}"));
            }
        }
        let want = &expected[function];
        for (a, r) in actual.difference(want) {
            errors.push(format!("{function}: grants {a} on {r}, which its stage does not need"));
        }
        for (a, r) in want.difference(&actual) {
            errors.push(format!("{function}: lacks {a} on {r}, which its stage needs"));
        }
    }
    for role in ids_of_type(t, "AWS::IAM::Role") {
        if !roles_used.contains(role) {
            errors.push(format!("{role}: an IAM role no function uses"));
        }
    }
    for (function, action, res, why) in NEVER {
        for (f, role, _) in FUNCTIONS {
            if function.is_some_and(|x| x != *f) {
                continue;
            }
            let (actual, _) = role_grants(t, role);
            for (a, r) in &actual {
                let exempt = NEVER_EXCEPT.iter().any(|(xf, xa, xr, _)| xf == f && xa == a && xr == r);
                if a == action && (*res == "*" || r == res) && !exempt {
                    errors.push(format!("{f}: {a} on {r} is forbidden: {why}"));
                }
            }
        }
    }
    errors
}

/// Every function: provided.al2023 on arm64, handler bootstrap, built by
/// cargo-lambda from the workspace with its own binary; no SAM-generated
/// role; Globals carry infra/README.md's environment.
fn check_functions(t: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let functions = ids_of_type(t, "AWS::Serverless::Function");
    let known: BTreeSet<&str> = FUNCTIONS.iter().map(|f| f.0).collect();
    for f in &functions {
        if !known.contains(f) {
            errors.push(format!("{f}: a function the stage table does not know"));
        }
    }
    for (function, _, binary) in FUNCTIONS {
        if type_of(t, function) != Some("AWS::Serverless::Function") {
            errors.push(format!("{function}: missing or not an AWS::Serverless::Function"));
            continue;
        }
        let get = |k: &str| fn_prop(t, function, k);
        if get("Runtime").and_then(Value::as_str) != Some("provided.al2023") {
            errors.push(format!("{function}: Runtime must be provided.al2023"));
        }
        let arch: Vec<_> =
            get("Architectures").map(|a| strings(a).iter().filter_map(|s| s.as_str()).collect()).unwrap_or_default();
        if arch != ["arm64"] {
            errors.push(format!("{function}: Architectures must be [arm64], found {arch:?}"));
        }
        if get("Handler").and_then(Value::as_str) != Some("bootstrap") {
            errors.push(format!("{function}: Handler must be bootstrap"));
        }
        if get("CodeUri").and_then(Value::as_str) != Some(".") {
            errors.push(format!("{function}: CodeUri must be the workspace root '.'"));
        }
        let meta = &t["Resources"][*function]["Metadata"];
        if meta["BuildMethod"].as_str() != Some("rust-cargolambda") {
            errors.push(format!("{function}: Metadata.BuildMethod must be rust-cargolambda"));
        }
        if meta["BuildProperties"]["Binary"].as_str() != Some(*binary) {
            errors.push(format!("{function}: Metadata.BuildProperties.Binary must be {binary}"));
        }
        if get("LoggingConfig").map(|l| l["LogFormat"].as_str()) != Some(Some("JSON")) {
            errors.push(format!("{function}: LoggingConfig.LogFormat must be JSON"));
        }
    }
    let env = &t["Globals"]["Function"]["Environment"]["Variables"];
    for (var, target) in ENVIRONMENT {
        if ref_of(&env[*var]).as_deref() != Some(*target) {
            errors.push(format!("Globals: {var} must be !Ref {target}"));
        }
    }
    errors
}

/// The event sources of one function: (event name, type, properties).
fn events<'a>(t: &'a Value, function: &str) -> Vec<(String, &'a str, &'a Value)> {
    t["Resources"][function]["Properties"]["Events"]
        .as_mapping()
        .map(|m| {
            m.iter()
                .map(|(k, e)| {
                    (k.as_str().unwrap_or("?").to_string(), e["Type"].as_str().unwrap_or("?"), &e["Properties"])
                })
                .collect()
        })
        .unwrap_or_default()
}

fn response_types_ok(p: &Value) -> bool {
    strings(&p["FunctionResponseTypes"]).iter().any(|v| v.as_str() == Some("ReportBatchItemFailures"))
}

fn timeout_of(t: &Value, function: &str) -> i64 {
    fn_prop(t, function, "Timeout").and_then(Value::as_i64).unwrap_or(3)
}

/// Which streams and queues feed which function, and how.
fn check_event_sources(t: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let mut streams = BTreeSet::new();
    let mut consumed = BTreeSet::new();
    for (function, role, _) in FUNCTIONS {
        let (grants, _) = role_grants(t, role);
        for (name, ty, p) in events(t, function) {
            let what = format!("{function}.{name}");
            match ty {
                "DynamoDB" => {
                    let Some((table, attr)) = get_att(&p["Stream"]) else {
                        errors.push(format!("{what}: Stream must be !GetAtt <Table>.StreamArn"));
                        continue;
                    };
                    if attr != "StreamArn" {
                        errors.push(format!("{what}: Stream must be a StreamArn"));
                    }
                    streams.insert((function.to_string(), table.clone()));
                    if p["BisectBatchOnFunctionError"].as_bool() != Some(true) {
                        errors.push(format!("{what}: BisectBatchOnFunctionError must be true"));
                    }
                    // The same figure as `hookline serve`'s outbox loops (defined once).
                    let retries = i64::from(shared::bounds::STREAM_MAX_RETRIES);
                    if p["MaximumRetryAttempts"].as_i64() != Some(retries) {
                        errors.push(format!(
                            "{what}: MaximumRetryAttempts must be shared::bounds::STREAM_MAX_RETRIES ({retries}), found {:?}",
                            p["MaximumRetryAttempts"]
                        ));
                    }
                    // Inserts only: a TTL delete (REMOVE) or a status update must
                    // not cost an invocation or come back as an input.
                    let patterns: Vec<serde_json::Value> = strings(&p["FilterCriteria"]["Filters"])
                        .iter()
                        .filter_map(|f| f["Pattern"].as_str())
                        .filter_map(|p| serde_json::from_str(p).ok())
                        .collect();
                    if patterns != vec![serde_json::json!({"eventName": ["INSERT"]})] {
                        errors.push(format!("{what}: FilterCriteria must pass INSERTs only, found {patterns:?}"));
                    }
                    if !response_types_ok(p) {
                        errors.push(format!("{what}: FunctionResponseTypes must include ReportBatchItemFailures"));
                    }
                    if p["StartingPosition"].as_str() != Some("TRIM_HORIZON") {
                        errors.push(format!("{what}: StartingPosition must be TRIM_HORIZON (nothing written before the mapping exists is skipped)"));
                    }
                    match get_att(&p["DestinationConfig"]["OnFailure"]["Destination"]) {
                        Some((q, a)) if a == "Arn" && type_of(t, &q) == Some("AWS::SQS::Queue") => {
                            if !grants.contains(&("sqs:SendMessage".to_string(), q.clone())) {
                                errors.push(format!("{what}: {role} cannot send to its on-failure destination {q}"));
                            }
                        }
                        other => errors.push(format!("{what}: needs DestinationConfig.OnFailure.Destination = !GetAtt <queue>.Arn, found {other:?}")),
                    }
                    for r in STREAM_READ {
                        if !grants.contains(&(r.to_string(), format!("{table}/stream"))) {
                            errors.push(format!("{what}: {role} lacks {r} on the {table} stream"));
                        }
                    }
                }
                "SQS" => {
                    let Some((queue, _)) = get_att(&p["Queue"]) else {
                        errors.push(format!("{what}: Queue must be !GetAtt <queue>.Arn"));
                        continue;
                    };
                    consumed.insert((function.to_string(), queue.clone()));
                    if !response_types_ok(p) {
                        errors.push(format!("{what}: FunctionResponseTypes must include ReportBatchItemFailures"));
                    }
                    let visibility =
                        t["Resources"][queue.as_str()]["Properties"]["VisibilityTimeout"].as_i64().unwrap_or(30);
                    if visibility < timeout_of(t, function) {
                        errors.push(format!(
                            "{what}: {queue} VisibilityTimeout {visibility} is shorter than the function's Timeout {}",
                            timeout_of(t, function)
                        ));
                    }
                    for a in CONSUME {
                        if !grants.contains(&(a.to_string(), queue.clone())) {
                            errors.push(format!("{what}: {role} lacks {a} on {queue}"));
                        }
                    }
                }
                "HttpApi" => {}
                "Schedule" if *function == "ReconcilerFunction" => {
                    if p["Schedule"].as_str().is_none_or(|s| !s.starts_with("rate(")) {
                        errors.push(format!("{what}: the reconciler runs on a rate() schedule"));
                    }
                }
                other => errors.push(format!("{what}: unexpected event source type {other}")),
            }
        }
    }
    let want_streams: BTreeSet<(String, String)> =
        [("RouterFunction", "EventsTable"), ("SagaFunction", "SagasTable"), ("SagaFunction", "AttemptsTable")]
            .iter()
            .map(|(f, s)| (f.to_string(), s.to_string()))
            .collect();
    if streams != want_streams {
        errors.push(format!("stream event sources are {streams:?}, the pipeline needs {want_streams:?}"));
    }
    let want_queues: BTreeSet<(String, String)> = [
        ("IngestFunction", "IngestQueue"),
        ("SagaFunction", "RetriesQueue"),
        ("DeliveryFunction", "DeliveriesQueue"),
        ("RequeueFunction", "RequeueQueue"),
    ]
    .iter()
    .map(|(f, q)| (f.to_string(), q.to_string()))
    .collect();
    if consumed != want_queues {
        errors.push(format!("SQS event sources are {consumed:?}, the pipeline needs {want_queues:?}"));
    }
    // The saga step starts a saga on its INSERT only: its own status
    // updates must not come back as inputs.
    let sagas = &t["Resources"]["SagaFunction"]["Properties"]["Events"]["SagasStream"]["Properties"]["FilterCriteria"]
        ["Filters"];
    let patterns: Vec<serde_json::Value> = strings(sagas)
        .iter()
        .filter_map(|f| f["Pattern"].as_str())
        .filter_map(|p| serde_json::from_str(p).ok())
        .collect();
    if patterns != vec![serde_json::json!({"eventName": ["INSERT"]})] {
        errors.push(format!("SagaFunction.SagasStream: FilterCriteria must pass INSERTs only, found {patterns:?}"));
    }
    errors
}

/// Every value a queue's ARN can be written as in this template.
fn arn_forms(t: &Value, queue: &str) -> Vec<String> {
    let mut forms = vec![format!("GetAtt {queue}.Arn")];
    if let Some(name) = sub_of(&t["Resources"][queue]["Properties"]["QueueName"]) {
        forms.push(format!("Sub arn:${{AWS::Partition}}:sqs:${{AWS::Region}}:${{AWS::AccountId}}:{name}"));
    }
    forms
}

fn arn_form(v: &Value) -> String {
    if let Some((id, attr)) = get_att(v) {
        return format!("GetAtt {id}.{attr}");
    }
    if let Some(s) = sub_of(v) {
        return format!("Sub {s}");
    }
    format!("{v:?}")
}

/// Every work queue redrives to its own DLQ, every DLQ allows only its
/// source back, every DLQ (and the stream failures queue) has an alarm.
fn check_queues_and_alarms(t: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let queues = ids_of_type(t, "AWS::SQS::Queue");
    let want: BTreeSet<&str> = QUEUES.iter().copied().collect();
    let have: BTreeSet<&str> = queues.iter().copied().collect();
    if have != want {
        errors.push(format!("queues are {have:?}, the resource model has {want:?}"));
    }
    let dlqs: BTreeSet<&str> = REDRIVE.iter().map(|(_, d)| *d).collect();
    // The README's console and CLI steps name queues `<stack>-<logical id>`.
    for q in &queues {
        let want = format!("${{AWS::StackName}}-{q}");
        if sub_of(&t["Resources"][*q]["Properties"]["QueueName"]).as_deref() != Some(want.as_str()) {
            errors.push(format!("{q}: QueueName must be !Sub {want} (the name the README gives ops)"));
        }
    }
    for q in &queues {
        let p = &t["Resources"][*q]["Properties"];
        let redrive = &p["RedrivePolicy"];
        let is_dlq = dlqs.contains(q) || *q == "StreamFailuresQueue";
        match (is_dlq, redrive.is_null()) {
            (true, false) => errors.push(format!("{q}: a dead-letter queue must not redrive further")),
            (false, true) => errors.push(format!("{q}: a work queue needs a RedrivePolicy to its DLQ")),
            _ => {}
        }
        if is_dlq && p["MessageRetentionPeriod"].as_i64() != Some(1_209_600) {
            errors.push(format!("{q}: a dead-letter queue keeps messages 14 days (MessageRetentionPeriod 1209600)"));
        }
    }
    for (source, dlq) in REDRIVE {
        let redrive = &t["Resources"][*source]["Properties"]["RedrivePolicy"];
        match get_att(&redrive["deadLetterTargetArn"]) {
            Some((d, a)) if d == *dlq && a == "Arn" => {}
            other => errors.push(format!(
                "{source}: RedrivePolicy.deadLetterTargetArn must be !GetAtt {dlq}.Arn, found {other:?}"
            )),
        }
        // The same receive limit as `hookline serve`'s queues (defined once).
        let max = i64::from(shared::bounds::QUEUE_MAX_RECEIVES);
        if redrive["maxReceiveCount"].as_i64() != Some(max) {
            errors.push(format!(
                "{source}: RedrivePolicy.maxReceiveCount must be shared::bounds::QUEUE_MAX_RECEIVES ({max}), found {:?}",
                redrive["maxReceiveCount"]
            ));
        }
        if type_of(t, dlq) != Some("AWS::SQS::Queue") {
            errors.push(format!("{source}: its DLQ {dlq} does not exist"));
            continue;
        }
        let allow = &t["Resources"][*dlq]["Properties"]["RedriveAllowPolicy"];
        if allow["redrivePermission"].as_str() != Some("byQueue") {
            errors.push(format!("{dlq}: RedriveAllowPolicy.redrivePermission must be byQueue"));
        }
        let named: Vec<String> = strings(&allow["sourceQueueArns"]).iter().map(|v| arn_form(v)).collect();
        let forms = arn_forms(t, source);
        if named.len() != 1 || !forms.contains(&named[0]) {
            errors.push(format!("{dlq}: RedriveAllowPolicy.sourceQueueArns must name {source} only, found {named:?}"));
        }
        // Naming the source by !GetAtt while the source names the DLQ by
        // !GetAtt is a dependency cycle CloudFormation rejects.
        if named.iter().any(|n| n.starts_with("GetAtt ")) {
            errors.push(format!("{dlq}: sourceQueueArns by !GetAtt makes a circular dependency with {source}"));
        }
    }

    // Alarms: (queue, metric) → threshold.
    let mut alarms: BTreeMap<(String, String), f64> = BTreeMap::new();
    for a in ids_of_type(t, "AWS::CloudWatch::Alarm") {
        let p = &t["Resources"][a]["Properties"];
        if p["Namespace"].as_str() != Some("AWS/SQS")
            || p["ComparisonOperator"].as_str() != Some("GreaterThanThreshold")
        {
            continue;
        }
        let dims = strings(&p["Dimensions"]);
        let Some(queue) = dims
            .iter()
            .find(|d| d["Name"].as_str() == Some("QueueName"))
            .and_then(|d| get_att(&d["Value"]))
            .filter(|(_, attr)| attr == "QueueName")
            .map(|(q, _)| q)
        else {
            continue;
        };
        let threshold =
            p["Threshold"].as_f64().or_else(|| p["Threshold"].as_i64().map(|n| n as f64)).unwrap_or(f64::NAN);
        alarms.insert((queue, p["MetricName"].as_str().unwrap_or("").to_string()), threshold);
    }
    // DeliveriesDLQ: every job in it is an open dead letter (with a record);
    // the alarm is on those, so it clears when ops requeue or skip them
    // through the API (which cannot take the job out of the queue).
    let open_dead_letters = ids_of_type(t, "AWS::CloudWatch::Alarm").into_iter().any(|a| {
        let p = &t["Resources"][a]["Properties"];
        p["Namespace"].as_str() == Some("Hookline")
            && p["MetricName"].as_str() == Some("OpenDeadLetters")
            && p["ComparisonOperator"].as_str() == Some("GreaterThanThreshold")
            && p["Threshold"].as_i64() == Some(0)
    });
    if !open_dead_letters {
        errors.push("needs an alarm on Hookline OpenDeadLetters > 0 (the reconciler's metric)".into());
    }
    for q in dlqs.iter().copied().filter(|q| *q != "DeliveriesDLQ").chain(["StreamFailuresQueue"]) {
        match alarms.get(&(q.to_string(), "ApproximateNumberOfMessagesVisible".to_string())) {
            Some(th) if *th == 0.0 => {}
            other => errors.push(format!(
                "{q}: needs an alarm on ApproximateNumberOfMessagesVisible > 0, found threshold {other:?}"
            )),
        }
    }
    match alarms.get(&("DeliveriesQueue".to_string(), "ApproximateAgeOfOldestMessage".to_string())) {
        Some(th) if *th == 300.0 => {}
        other => errors.push(format!(
            "DeliveriesQueue: needs an alarm on ApproximateAgeOfOldestMessage > 300, found threshold {other:?}"
        )),
    }
    errors
}

/// The HTTP API: IAM authorization by default, every route of the design
/// on the right function and nothing else; EventBridge feeds IngestQueue
/// through a queue policy scoped to the rule.
fn check_api_and_bus(t: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let auth = &t["Resources"]["HttpApi"]["Properties"]["Auth"];
    if type_of(t, "HttpApi") != Some("AWS::Serverless::HttpApi")
        || auth["DefaultAuthorizer"].as_str() != Some("AWS_IAM")
    {
        errors.push("HttpApi: must be an AWS::Serverless::HttpApi with Auth.DefaultAuthorizer AWS_IAM".into());
    }
    let mut routes = BTreeSet::new();
    for (function, _, _) in FUNCTIONS {
        for (name, ty, p) in events(t, function) {
            if ty != "HttpApi" {
                continue;
            }
            if ref_of(&p["ApiId"]).as_deref() != Some("HttpApi") {
                errors.push(format!("{function}.{name}: ApiId must be !Ref HttpApi"));
            }
            if !p["Auth"].is_null() {
                errors.push(format!("{function}.{name}: overrides the API's IAM authorization"));
            }
            routes.insert((
                p["Method"].as_str().unwrap_or("?").to_uppercase(),
                p["Path"].as_str().unwrap_or("?").to_string(),
                function.to_string(),
            ));
        }
    }
    let want: BTreeSet<(String, String, String)> =
        ROUTES.iter().map(|(m, p, f)| (m.to_string(), p.to_string(), f.to_string())).collect();
    for r in routes.difference(&want) {
        errors.push(format!("unexpected route {r:?}"));
    }
    for r in want.difference(&routes) {
        errors.push(format!("missing route {r:?}"));
    }

    let rules = ids_of_type(t, "AWS::Events::Rule");
    let feeding: Vec<&str> = rules
        .iter()
        .copied()
        .filter(|r| {
            strings(&t["Resources"][*r]["Properties"]["Targets"])
                .iter()
                .any(|tg| get_att(&tg["Arn"]).is_some_and(|(q, _)| q == "IngestQueue"))
        })
        .collect();
    if feeding.len() != 1 {
        errors.push(format!("exactly one EventBridge rule must target IngestQueue, found {feeding:?}"));
    } else {
        let rule = feeding[0];
        if ref_of(&t["Resources"][rule]["Properties"]["EventBusName"]).as_deref() != Some("EventBusName") {
            errors.push(format!("{rule}: EventBusName must be !Ref EventBusName"));
        }
        let scoped = ids_of_type(t, "AWS::SQS::QueuePolicy").iter().any(|p| {
            let pp = &t["Resources"][*p]["Properties"];
            strings(&pp["Queues"]).iter().any(|q| ref_of(q).as_deref() == Some("IngestQueue"))
                && strings(&pp["PolicyDocument"]["Statement"]).iter().any(|s| {
                    s["Principal"]["Service"].as_str() == Some("events.amazonaws.com")
                        && strings(&s["Action"]).iter().any(|a| a.as_str() == Some("sqs:SendMessage"))
                        && resource_key(&s["Resource"]) == "IngestQueue"
                        && get_att(&s["Condition"]["ArnEquals"]["aws:SourceArn"])
                            .is_some_and(|(r, a)| r == rule && a == "Arn")
                })
        });
        if !scoped {
            errors.push(format!("IngestQueue: needs a queue policy letting events.amazonaws.com SendMessage with aws:SourceArn = {rule}"));
        }
    }
    for table in TABLES {
        if type_of(t, table) != Some("AWS::DynamoDB::Table") {
            errors.push(format!("{table}: missing"));
        }
    }
    errors
}

fn all_checks(t: &Value) -> Vec<String> {
    let mut e = check_policies(t);
    e.extend(check_functions(t));
    e.extend(check_event_sources(t));
    e.extend(check_queues_and_alarms(t));
    e.extend(check_api_and_bus(t));
    e
}

fn assert_clean(errors: Vec<String>) {
    assert!(errors.is_empty(), "template.yaml breaks the design:\n  {}", errors.join("\n  "));
}

// ------------------------------------------------------------------ the template as it is

#[test]
fn every_function_role_grants_exactly_its_stage() {
    assert_clean(check_policies(&load()));
}

/// Events are written once, by ingest: no role but IngestFunction's may
/// update or delete an item of EventsTable, neither in the template nor in
/// the stage table, and no [`NEVER_EXCEPT`] entry exempts one (an event's
/// delivery outcome is an item of EventOutcomesTable). Other roles' PutItem
/// of operational events stays: each is a new event.
#[test]
fn only_ingest_may_update_or_delete_events() {
    let t = load();
    let rewrites = |a: &str, r: &str| {
        ["dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:*"].contains(&a) && ["EventsTable", "*"].contains(&r)
    };
    let expected = expected_grants();
    let mut errors = Vec::new();
    for (f, role, _) in FUNCTIONS.iter().filter(|(f, _, _)| *f != "IngestFunction") {
        let (actual, _) = role_grants(&t, role);
        for (a, r) in actual.iter().chain(&expected[f]) {
            if rewrites(a, r) {
                errors.push(format!("{f}: {a} on {r}: events are written once, by ingest"));
            }
        }
    }
    for (f, a, r, _) in NEVER_EXCEPT {
        if *f != "IngestFunction" && rewrites(a, r) {
            errors.push(format!("NEVER_EXCEPT exempts {f}'s {a} on {r}"));
        }
    }
    assert_clean(errors);
}

#[test]
fn functions_are_rust_arm64_built_by_cargo_lambda() {
    assert_clean(check_functions(&load()));
}

#[test]
fn event_sources_bisect_retry_report_failures_and_have_a_destination() {
    assert_clean(check_event_sources(&load()));
}

#[test]
fn queues_redrive_to_dlqs_that_allow_them_and_every_dlq_alarms() {
    assert_clean(check_queues_and_alarms(&load()));
}

#[test]
fn http_api_is_iam_authorized_and_eventbridge_feeds_ingest() {
    assert_clean(check_api_and_bus(&load()));
}

// ------------------------------------------------------------------ the checks can fail

fn yaml(s: &str) -> Value {
    serde_yaml::from_str(s).expect("test yaml")
}

fn statements_mut<'a>(t: &'a mut Value, role: &str) -> &'a mut Vec<Value> {
    t["Resources"][role]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        .as_sequence_mut()
        .expect("statements")
}

fn broken_by(mutate: impl FnOnce(&mut Value), expect: &str) {
    let mut t = load();
    assert_clean(all_checks(&t));
    mutate(&mut t);
    let errors = all_checks(&t);
    assert!(
        errors.iter().any(|e| e.contains(expect)),
        "expected an error containing {expect:?}, got:\n  {}",
        errors.join("\n  ")
    );
}

#[test]
fn router_updating_sagas_is_caught() {
    broken_by(
        |t| {
            statements_mut(t, "RouterRole")
                .push(yaml("{Effect: Allow, Action: dynamodb:UpdateItem, Resource: !GetAtt SagasTable.Arn}"))
        },
        "RouterFunction: dynamodb:UpdateItem on SagasTable is forbidden",
    );
}

#[test]
fn delivery_updating_sagas_is_caught() {
    broken_by(
        |t| {
            statements_mut(t, "DeliveryRole")
                .push(yaml("{Effect: Allow, Action: [dynamodb:UpdateItem], Resource: [!GetAtt SagasTable.Arn]}"))
        },
        "DeliveryFunction: grants dynamodb:UpdateItem on SagasTable",
    );
}

#[test]
fn ingest_reading_events_is_caught() {
    broken_by(
        |t| {
            statements_mut(t, "IngestRole")[0] =
                yaml("{Effect: Allow, Action: [dynamodb:PutItem, dynamodb:GetItem], Resource: !GetAtt EventsTable.Arn}")
        },
        "IngestFunction: grants dynamodb:GetItem on EventsTable",
    );
}

/// Scanning subscriptions stays forbidden for every function but the API
/// (its reindex route), and for the API on every other subscriptions
/// resource (the index).
#[test]
fn a_subscriptions_scan_outside_the_api_reindex_is_caught() {
    for role in ["RouterRole", "ReconcilerRole", "SagaRole", "DeliveryRole", "RequeueRole", "IngestRole"] {
        let function = FUNCTIONS.iter().find(|f| f.1 == role).expect("a function of the role").0;
        broken_by(
            |t| {
                statements_mut(t, role)
                    .push(yaml("{Effect: Allow, Action: dynamodb:Scan, Resource: !GetAtt SubscriptionsTable.Arn}"))
            },
            &format!("{function}: dynamodb:Scan on SubscriptionsTable is forbidden"),
        );
    }
    broken_by(
        |t| {
            statements_mut(t, "ApiRole").push(yaml(
                "{Effect: Allow, Action: dynamodb:Scan, Resource: !Sub '${SubscriptionsTable.Arn}/index/*'}",
            ))
        },
        "ApiFunction: grants dynamodb:Scan on SubscriptionsTable/index/*",
    );
    broken_by(
        |t| statements_mut(t, "ApiRole").retain(|s| s["Sid"].as_str() != Some("SubscriptionsReindexScan")),
        "ApiFunction: lacks dynamodb:Scan on SubscriptionsTable",
    );
}

#[test]
fn wildcards_are_caught() {
    broken_by(
        |t| statements_mut(t, "ApiRole").push(yaml("{Effect: Allow, Action: 'sqs:*', Resource: '*'}")),
        "wildcard action sqs:*",
    );
    broken_by(
        |t| statements_mut(t, "SagaRole").push(yaml("{Effect: Allow, Action: dynamodb:GetItem, Resource: '*'}")),
        "SagaFunction: wildcard resource *",
    );
}

#[test]
fn a_missing_grant_is_caught() {
    broken_by(
        |t| statements_mut(t, "RequeueRole").retain(|s| s["Sid"].as_str() != Some("RequeueConsume")),
        "RequeueFunction: lacks sqs:ReceiveMessage on RequeueQueue",
    );
}

#[test]
fn an_extra_managed_policy_is_caught() {
    broken_by(
        |t| {
            t["Resources"]["RouterRole"]["Properties"]["ManagedPolicyArns"]
                .as_sequence_mut()
                .expect("managed")
                .push(Value::String("arn:aws:iam::aws:policy/AmazonDynamoDBFullAccess".into()))
        },
        "RouterRole: ManagedPolicyArns must be exactly AWSLambdaBasicExecutionRole",
    );
}

#[test]
fn a_stream_source_without_bisect_or_destination_is_caught() {
    broken_by(
        |t| {
            let p = &mut t["Resources"]["RouterFunction"]["Properties"]["Events"]["EventsStream"]["Properties"];
            p.as_mapping_mut().expect("props").remove("BisectBatchOnFunctionError");
        },
        "RouterFunction.EventsStream: BisectBatchOnFunctionError must be true",
    );
    broken_by(
        |t| {
            let p = &mut t["Resources"]["SagaFunction"]["Properties"]["Events"]["AttemptsStream"]["Properties"];
            p.as_mapping_mut().expect("props").remove("DestinationConfig");
        },
        "SagaFunction.AttemptsStream: needs DestinationConfig.OnFailure.Destination",
    );
    broken_by(
        |t| {
            t["Resources"]["SagaFunction"]["Properties"]["Events"]["SagasStream"]["Properties"]
                ["MaximumRetryAttempts"] = Value::from(-1)
        },
        "SagaFunction.SagasStream: MaximumRetryAttempts must be shared::bounds::STREAM_MAX_RETRIES",
    );
    // TTL deletes (REMOVE records) must not invoke the router.
    broken_by(
        |t| {
            let p = &mut t["Resources"]["RouterFunction"]["Properties"]["Events"]["EventsStream"]["Properties"];
            p.as_mapping_mut().expect("props").remove("FilterCriteria");
        },
        "RouterFunction.EventsStream: FilterCriteria must pass INSERTs only",
    );
    broken_by(
        |t| {
            t["Resources"]["DeliveriesQueue"]["Properties"]["RedrivePolicy"]["maxReceiveCount"] = Value::from(10);
        },
        "DeliveriesQueue: RedrivePolicy.maxReceiveCount must be shared::bounds::QUEUE_MAX_RECEIVES",
    );
    broken_by(
        |t| {
            t["Resources"]["DeliveriesDLQ"]["Properties"].as_mapping_mut().expect("props").remove("QueueName");
        },
        "DeliveriesDLQ: QueueName must be !Sub ${AWS::StackName}-DeliveriesDLQ",
    );
}

#[test]
fn a_queue_without_redrive_or_alarm_is_caught() {
    broken_by(
        |t| {
            t["Resources"]["RetriesQueue"]["Properties"].as_mapping_mut().expect("props").remove("RedrivePolicy");
        },
        "RetriesQueue: a work queue needs a RedrivePolicy",
    );
    broken_by(
        |t| {
            t["Resources"]["IngestDLQ"]["Properties"].as_mapping_mut().expect("props").remove("RedriveAllowPolicy");
        },
        "IngestDLQ: RedriveAllowPolicy.redrivePermission must be byQueue",
    );
    broken_by(
        |t| {
            t["Resources"].as_mapping_mut().expect("resources").remove("RequeueDLQAlarm");
        },
        "RequeueDLQ: needs an alarm",
    );
}

#[test]
fn an_x86_or_non_cargo_lambda_function_is_caught() {
    broken_by(
        |t| t["Resources"]["DeliveryFunction"]["Properties"]["Architectures"] = yaml("[x86_64]"),
        "DeliveryFunction: Architectures must be [arm64]",
    );
    broken_by(
        |t| t["Resources"]["ApiFunction"]["Metadata"]["BuildMethod"] = Value::String("makefile".into()),
        "ApiFunction: Metadata.BuildMethod must be rust-cargolambda",
    );
}

#[test]
fn a_visibility_timeout_shorter_than_the_consumer_is_caught() {
    broken_by(
        |t| t["Resources"]["DeliveriesQueue"]["Properties"]["VisibilityTimeout"] = Value::from(30),
        "DeliveriesQueue VisibilityTimeout 30 is shorter than the function's Timeout 60",
    );
}

/// The template's defaults are the code's defaults (`Config::default`): a
/// stack deployed with its parameters untouched behaves as `hookline serve`
/// does without flags.
#[test]
fn template_parameter_defaults_are_the_code_defaults() {
    let t = load();
    let d = shared::context::Config::default();
    let default = |p: &str| t["Parameters"][p]["Default"].as_i64();
    assert_eq!(default("RetentionDays"), Some(d.retention.num_days()));
    assert_eq!(default("MaxAttempts"), Some(i64::from(d.default_retry_policy.max_attempts)));
    assert_eq!(default("RetryBaseMs"), Some(d.default_retry_policy.base_delay_ms as i64));
    assert_eq!(default("RetryCapMs"), Some(d.default_retry_policy.max_delay_ms as i64));
}

/// A stack deploys in a new account: Lambda refuses a reservation that
/// leaves the account under 100 unreserved executions, and new accounts
/// have a quota of 10. No function reserves concurrency unless a parameter
/// whose default is 0 asks for it.
#[test]
fn no_function_reserves_concurrency_by_default() {
    let t = load();
    for f in ids_of_type(&t, "AWS::Serverless::Function") {
        let reserved = &t["Resources"][f]["Properties"]["ReservedConcurrentExecutions"];
        if reserved.is_null() {
            continue;
        }
        let Some((name, arg)) = hookline_tests::iam::intrinsic(reserved) else {
            panic!("{f}: ReservedConcurrentExecutions is fixed at {reserved:?}; deploys fail in accounts with a quota of 10");
        };
        assert_eq!(name, "If", "{f}: ReservedConcurrentExecutions must be conditional on a parameter");
        let condition = arg[0].as_str().expect("a condition name");
        let cond = &t["Conditions"][condition];
        let (eq, args) = hookline_tests::iam::intrinsic(cond).expect("an !Equals condition");
        assert_eq!(eq, "Equals");
        let param = ref_of(&args[0]).expect("!Equals [!Ref Parameter, n]");
        let default = t["Parameters"][param.as_str()]["Default"].as_i64();
        assert_eq!(default, Some(0), "{f}: {param} must default to 0 (no reservation)");
        assert_ne!(args[1].as_i64(), Some(0), "{f}: the reservation must be off at the default");
    }
}

/// Every table survives a stack deletion or a replacement, and the tables
/// whose loss breaks receivers (the order table's sequence numbers, the
/// subscriptions' secrets) can be restored to a point in time.
#[test]
fn tables_are_retained_and_the_unrebuildable_ones_recoverable() {
    let t = load();
    for table in ids_of_type(&t, "AWS::DynamoDB::Table") {
        let r = resource(&t, table).unwrap();
        assert_eq!(r["DeletionPolicy"].as_str(), Some("Retain"), "{table}: DeletionPolicy must be Retain");
        assert_eq!(r["UpdateReplacePolicy"].as_str(), Some("Retain"), "{table}: UpdateReplacePolicy must be Retain");
    }
    for table in ["OrderTable", "SubscriptionsTable", "EventsTable", "DeadLettersTable", "AuditTable"] {
        let pitr =
            &t["Resources"][table]["Properties"]["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"];
        assert_eq!(pitr.as_bool(), Some(true), "{table}: point-in-time recovery must be on");
    }
}

/// A scheduled function's report cannot go quiet: every alarm on a metric
/// that only a scheduled function reports treats missing data as breaching
/// (a failed or timed-out run must not turn it green), and every scheduled
/// function has an alarm on its Lambda `Errors`.
#[test]
fn scheduled_functions_alarm_on_errors_and_missing_reports() {
    let t = load();
    let scheduled: Vec<&str> = ids_of_type(&t, "AWS::Serverless::Function")
        .into_iter()
        .filter(|f| {
            t["Resources"][*f]["Properties"]["Events"]
                .as_mapping()
                .is_some_and(|m| m.values().any(|e| e["Type"].as_str() == Some("Schedule")))
        })
        .collect();
    assert!(!scheduled.is_empty(), "the reconciler runs on a schedule");
    let alarms = ids_of_type(&t, "AWS::CloudWatch::Alarm");
    for f in &scheduled {
        let has_errors_alarm = alarms.iter().any(|a| {
            let p = &t["Resources"][*a]["Properties"];
            p["Namespace"].as_str() == Some("AWS/Lambda")
                && p["MetricName"].as_str() == Some("Errors")
                && strings(&p["Dimensions"]).iter().any(|d| ref_of(&d["Value"]).as_deref() == Some(*f))
        });
        assert!(has_errors_alarm, "{f}: no alarm on its Lambda Errors");
    }
    for a in alarms {
        let p = &t["Resources"][a]["Properties"];
        if p["Namespace"].as_str() == Some("Hookline") && p["MetricName"].as_str() == Some("OpenDeadLetters") {
            assert_eq!(p["TreatMissingData"].as_str(), Some("breaching"), "{a}: a missing report must not read as OK");
            assert!(p["Period"].as_i64().unwrap_or(0) >= 600, "{a}: a period must hold at least two 5-minute runs");
        }
    }
}

/// No hot keys, no large index entries. The tables whose items carry a
/// large attribute (an event's `data`/`data_z`, a dead letter's `data` and
/// event snapshot `event_z`) project none of it into an index (KEYS_ONLY,
/// or INCLUDE of small attributes): every index entry stays about one
/// write unit, and a write of the item is not billed again per index at
/// its size. Every index partition key whose value many items share is
/// sharded (`<value>#<shard>`, or the events' `<day>#<shard>`), so no one
/// key value takes every write of a burst (DynamoDB allows about 1,000
/// writes a second per partition key value).
#[test]
fn no_index_projects_large_attributes_and_hot_keys_are_sharded() {
    let t = load();
    const LARGE: &[&str] = &["data", "data_z", "event_z"];
    // Partition keys of sharded values; by_partition's `partition` is
    // bounded by its OrderTable counter item, written in the same
    // transaction as each numbered event (a transaction per event on one
    // item: fewer writes a second than one index partition takes).
    const SHARDED: &[(&str, &str)] = &[
        ("EventsTable", "time_bucket"),
        ("EventOutcomesTable", "outcome_shard"),
        ("EventOutcomesTable", "partition"),
        ("EventsTable", "tenant_shard"),
        ("EventsTable", "partition"),
        ("DeadLettersTable", "state_shard"),
        ("DeadLettersTable", "subscription_shard"),
        ("DeadLettersTable", "tenant_shard"),
        ("DeadLettersTable", "type_shard"),
        ("DeadLettersTable", "all_shard"),
    ];
    let mut errors = Vec::new();
    for table in ["EventsTable", "EventOutcomesTable", "DeadLettersTable"] {
        let indexes = t["Resources"][table]["Properties"]["GlobalSecondaryIndexes"].as_sequence().cloned();
        for ix in indexes.unwrap_or_default() {
            let name = ix["IndexName"].as_str().unwrap_or("?");
            let p = &ix["Projection"];
            match p["ProjectionType"].as_str() {
                Some("KEYS_ONLY") => {}
                Some("INCLUDE") => {
                    for a in strings(&p["NonKeyAttributes"]).into_iter().filter_map(Value::as_str) {
                        if LARGE.contains(&a) {
                            errors.push(format!("{table} index {name} projects {a}"));
                        }
                    }
                }
                other => errors.push(format!("{table} index {name} projects {other:?}: every attribute")),
            }
            let hash = ix["KeySchema"]
                .as_sequence()
                .into_iter()
                .flatten()
                .find(|k| k["KeyType"].as_str() == Some("HASH"))
                .and_then(|k| k["AttributeName"].as_str())
                .unwrap_or("?");
            if !SHARDED.contains(&(table, hash)) {
                errors.push(format!("{table} index {name}: partition key {hash} is not a sharded key"));
            }
        }
    }
    assert_clean(errors);
}

/// Delivery jobs the deliveries queue moves to its DLQ with nothing
/// recorded have no dead letter, so the open-dead-letters alarm cannot see
/// them: the delivery function's `JobsAbandoned` count has its own alarm.
#[test]
fn abandoned_delivery_jobs_alarm() {
    let t = load();
    let found = ids_of_type(&t, "AWS::CloudWatch::Alarm").into_iter().any(|a| {
        let p = &t["Resources"][a]["Properties"];
        p["Namespace"].as_str() == Some("Hookline")
            && p["MetricName"].as_str() == Some("JobsAbandoned")
            && p["ComparisonOperator"].as_str() == Some("GreaterThanThreshold")
            && p["Threshold"].as_i64() == Some(0)
            && strings(&p["Dimensions"]).iter().any(|d| d["Value"].as_str() == Some("delivery"))
    });
    assert!(found, "needs an alarm on Hookline JobsAbandoned > 0 (Function delivery)");
}
