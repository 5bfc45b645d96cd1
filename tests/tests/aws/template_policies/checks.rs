//! The checks: each returns the list of what it found wrong in a template.

use super::*;

// ------------------------------------------------------------------ reading the template

pub(super) fn basic_execution_arn(v: &Value) -> bool {
    const SUFFIX: &str = ":iam::aws:policy/service-role/AWSLambdaBasicExecutionRole";
    let s = sub_of(v).or_else(|| v.as_str().map(str::to_string)).unwrap_or_default();
    s == format!("arn:${{AWS::Partition}}{SUFFIX}") || s == format!("arn:aws{SUFFIX}")
}

// ------------------------------------------------------------------ checks

/// One explicit role per function, one inline policy each, the basic
/// execution managed policy and nothing else, and exactly the stage
/// table's grants.
pub(super) fn check_policies(t: &Value) -> Vec<String> {
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
pub(super) fn check_functions(t: &Value) -> Vec<String> {
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
    for (function, var, target) in FUNCTION_ENVIRONMENT {
        if !env[*var].is_null() {
            errors.push(format!("Globals: {var} is only {function}'s"));
        }
        for (f, _, _) in FUNCTIONS {
            let own = &t["Resources"][*f]["Properties"]["Environment"]["Variables"][*var];
            match (f == function, ref_of(own)) {
                (true, r) if r.as_deref() != Some(*target) => {
                    errors.push(format!("{f}: Environment.Variables.{var} must be !Ref {target}"))
                }
                (false, Some(_)) => errors.push(format!("{f}: {var} is only {function}'s")),
                _ => {}
            }
        }
    }
    errors
}

/// The event sources of one function: (event name, type, properties).
pub(super) fn events<'a>(t: &'a Value, function: &str) -> Vec<(String, &'a str, &'a Value)> {
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

pub(super) fn response_types_ok(p: &Value) -> bool {
    strings(&p["FunctionResponseTypes"]).iter().any(|v| v.as_str() == Some("ReportBatchItemFailures"))
}

pub(super) fn timeout_of(t: &Value, function: &str) -> i64 {
    fn_prop(t, function, "Timeout").and_then(Value::as_i64).unwrap_or(3)
}

/// Which streams and queues feed which function, and how.
pub(super) fn check_event_sources(t: &Value) -> Vec<String> {
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
pub(super) fn arn_forms(t: &Value, queue: &str) -> Vec<String> {
    let mut forms = vec![format!("GetAtt {queue}.Arn")];
    if let Some(name) = sub_of(&t["Resources"][queue]["Properties"]["QueueName"]) {
        forms.push(format!("Sub arn:${{AWS::Partition}}:sqs:${{AWS::Region}}:${{AWS::AccountId}}:{name}"));
    }
    forms
}

pub(super) fn arn_form(v: &Value) -> String {
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
pub(super) fn check_queues_and_alarms(t: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let queues = ids_of_type(t, "AWS::SQS::Queue");
    let want: BTreeSet<&str> = QUEUES.iter().copied().collect();
    let have: BTreeSet<&str> = queues.iter().copied().collect();
    if have != want {
        errors.push(format!("queues are {have:?}, the resource model has {want:?}"));
    }
    let dlqs: BTreeSet<&str> = REDRIVE.iter().map(|(_, d)| *d).collect();
    // docs/aws.md's console and CLI steps name queues `<stack>-<logical id>`.
    for q in &queues {
        let want = format!("${{AWS::StackName}}-{q}");
        if sub_of(&t["Resources"][*q]["Properties"]["QueueName"]).as_deref() != Some(want.as_str()) {
            errors.push(format!("{q}: QueueName must be !Sub {want} (the name docs/aws.md gives ops)"));
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

/// The HTTP API: IAM authorization by default, exactly the routes of the
/// API's OpenAPI document ([`routes`]) on the right function with the
/// right authorizer (`NONE` only where the document's operation is open); EventBridge feeds IngestQueue
/// through a queue policy scoped to the rule.
pub(super) fn check_api_and_bus(t: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let auth = &t["Resources"]["HttpApi"]["Properties"]["Auth"];
    if type_of(t, "HttpApi") != Some("AWS::Serverless::HttpApi")
        || auth["DefaultAuthorizer"].as_str() != Some("AWS_IAM")
    {
        errors.push("HttpApi: must be an AWS::Serverless::HttpApi with Auth.DefaultAuthorizer AWS_IAM".into());
    }
    let mut found = BTreeSet::new();
    for (function, _, _) in FUNCTIONS {
        for (name, ty, p) in events(t, function) {
            if ty != "HttpApi" {
                continue;
            }
            if ref_of(&p["ApiId"]).as_deref() != Some("HttpApi") {
                errors.push(format!("{function}.{name}: ApiId must be !Ref HttpApi"));
            }
            let auth = match (p["Auth"].is_null(), p["Auth"]["Authorizer"].as_str()) {
                (true, _) => "AWS_IAM",
                (false, Some("NONE")) if p["Auth"].as_mapping().is_some_and(|m| m.len() == 1) => "NONE",
                _ => {
                    errors.push(format!("{function}.{name}: Auth is the API's IAM default, or {{Authorizer: NONE}}"));
                    "?"
                }
            };
            found.insert((
                p["Method"].as_str().unwrap_or("?").to_uppercase(),
                p["Path"].as_str().unwrap_or("?").to_string(),
                function.to_string(),
                auth,
            ));
        }
    }
    let want = routes();
    for r in found.difference(&want) {
        errors.push(format!(
            "a route the API's OpenAPI document does not have (or with another function or authorizer): {r:?}"
        ));
    }
    for r in want.difference(&found) {
        errors.push(format!("missing route {r:?} of the API's OpenAPI document"));
    }
    if found != want {
        errors.push(format!("ApiFunction's HttpApi events, generated from the document:\n{}", api_events_yaml(&want)));
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

/// ApiFunction's `Events:` entries for `routes` (what template.yaml holds;
/// printed when it differs).
pub(super) fn api_events_yaml(routes: &BTreeSet<(String, String, String, &'static str)>) -> String {
    let mut out = String::new();
    for (method, path, function, auth) in routes {
        if function != "ApiFunction" {
            continue;
        }
        let name: String = std::iter::once(method.as_str())
            .chain(path.split(['/', '{', '}', '-', '.', '_', '+']))
            .filter(|w| !w.is_empty())
            .map(|w| {
                let w = w.to_lowercase();
                let mut c = w.chars();
                c.next().map(|f| f.to_uppercase().chain(c).collect::<String>()).unwrap_or_default()
            })
            .collect();
        let auth = if *auth == "NONE" { ", Auth: { Authorizer: NONE }" } else { "" };
        let quoted = if path.contains('{') { format!("\"{path}\"") } else { path.clone() };
        out.push_str(&format!(
            "        {name}:\n          Type: HttpApi\n          Properties: {{ ApiId: !Ref HttpApi, Path: {quoted}, Method: {method}{auth} }}\n"
        ));
    }
    out
}

/// Queue and bus destinations: each list is a `CommaDelimitedList`
/// parameter, empty by default; the statements that grant on it are
/// conditional on its condition (so an empty list grants nothing), which
/// tests the list for emptiness; the functions get the allow-list.
pub(super) fn check_destinations(t: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let lists = [
        ("DestinationQueueArns", "HasDestinationQueues", "sqs:SendMessage"),
        ("DestinationBusArns", "HasDestinationBuses", "events:PutEvents"),
    ];
    for (param, cond, action) in lists {
        let p = &t["Parameters"][param];
        if p["Type"].as_str() != Some("CommaDelimitedList") || p["Default"].as_str() != Some("") {
            errors.push(format!("parameter {param} must be a CommaDelimitedList defaulting to empty"));
        }
        let c = serde_yaml::to_string(&t["Conditions"][cond]).unwrap_or_default();
        if !(c.contains("!Not") && c.contains("!Equals") && c.contains(param)) {
            errors.push(format!("condition {cond} must hold only when {param} is not empty, got {c}"));
        }
        for role in ["DeliveryRole", "ApiRole"] {
            let props = &t["Resources"][role]["Properties"];
            let mut guarded = 0;
            for policy in strings(&props["Policies"]) {
                for st in strings(&policy["PolicyDocument"]["Statement"]) {
                    let (condition, plain) = match statement_condition(st) {
                        Some((c, s)) => (Some(c), s),
                        None => (None, st),
                    };
                    let on_list = strings(&plain["Resource"]).iter().any(|r| resource_key(r) == param);
                    if !on_list {
                        continue;
                    }
                    if condition != Some(cond) {
                        errors.push(format!("{role}: the grant on {param} is not conditional on {cond}"));
                    }
                    if strings(&plain["Action"]).iter().any(|a| a.as_str() != Some(action)) {
                        errors.push(format!("{role}: only {action} on {param}"));
                    }
                    guarded += 1;
                }
            }
            if guarded != 1 {
                errors.push(format!("{role}: one statement must grant {action} on {param}, found {guarded}"));
            }
        }
    }
    let env = serde_yaml::to_string(&t["Globals"]["Function"]["Environment"]["Variables"]["DESTINATION_ARNS"])
        .unwrap_or_default();
    if !(env.contains("DestinationQueueArns") && env.contains("DestinationBusArns") && env.contains("none")) {
        errors.push(format!("DESTINATION_ARNS must be both lists, or none when both are empty; got {env}"));
    }
    errors
}

pub(super) fn all_checks(t: &Value) -> Vec<String> {
    let mut e = check_policies(t);
    e.extend(check_destinations(t));
    e.extend(check_functions(t));
    e.extend(check_event_sources(t));
    e.extend(check_queues_and_alarms(t));
    e.extend(check_api_and_bus(t));
    e
}

pub(super) fn assert_clean(errors: Vec<String>) {
    assert!(errors.is_empty(), "template.yaml breaks the design:\n  {}", errors.join("\n  "));
}
