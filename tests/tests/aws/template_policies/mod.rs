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

mod checks;
mod design;

use checks::*;
use design::*;

use std::collections::{BTreeMap, BTreeSet};

use hookline_tests::iam::{
    fn_prop, get_att, ids_of_type, load_template as load, ref_of, resource, resource_key, role_grants,
    statement_condition, strings, sub_of, type_of, Grants,
};
use serde_yaml::Value;

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
fn destination_grants_are_exactly_the_configured_queues_and_buses() {
    assert_clean(check_destinations(&load()));
}

/// A destination grant made unconditional (an empty list would grant on
/// nothing, or CloudFormation would refuse it), or on anything but the
/// configured list, is caught.
#[test]
fn destination_grants_that_are_not_conditional_or_not_scoped_are_caught() {
    fn destination_statement(t: &mut Value, role: &str) -> usize {
        statements_mut(t, role).iter().position(|s| statement_condition(s).is_some()).expect("a conditional statement")
    }
    broken_by(
        |t| {
            let i = destination_statement(t, "DeliveryRole");
            let plain = statement_condition(&statements_mut(t, "DeliveryRole")[i]).unwrap().1.clone();
            statements_mut(t, "DeliveryRole")[i] = plain;
        },
        "DeliveryRole: the grant on DestinationQueueArns is not conditional on HasDestinationQueues",
    );
    broken_by(
        |t| {
            statements_mut(t, "ApiRole")
                .push(yaml("{Sid: AnyQueue, Effect: Allow, Action: sqs:SendMessage, Resource: 'arn:aws:sqs:*:*:*'}"))
        },
        "ApiFunction: grants sqs:SendMessage on arn:aws:sqs:*:*:*",
    );
    broken_by(
        |t| t["Conditions"]["HasDestinationBuses"] = yaml("true"),
        "condition HasDestinationBuses must hold only when DestinationBusArns is not empty",
    );
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

/// The HTTP API's routes are the OpenAPI document's: a route of the
/// document missing from the template, an open route behind IAM, or a
/// signed route opened to anyone is caught.
#[test]
fn api_routes_drifting_from_the_openapi_document_are_caught() {
    fn api_events(t: &mut Value) -> &mut serde_yaml::Mapping {
        t["Resources"]["ApiFunction"]["Properties"]["Events"].as_mapping_mut().expect("ApiFunction events")
    }
    broken_by(
        |t| {
            api_events(t).remove("GetV1JobsJob");
        },
        "missing route (\"GET\", \"/v1/jobs/{job}\", \"ApiFunction\", \"AWS_IAM\")",
    );
    broken_by(
        |t| {
            let e = &mut api_events(t)["GetOpenapiJson"]["Properties"];
            e.as_mapping_mut().unwrap().remove("Auth");
        },
        "missing route (\"GET\", \"/openapi.json\", \"ApiFunction\", \"NONE\")",
    );
    broken_by(
        |t| {
            api_events(t)["GetV1Audit"]["Properties"]["Auth"] = yaml("{Authorizer: NONE}");
        },
        "does not have (or with another function or authorizer): (\"GET\", \"/v1/audit\", \"ApiFunction\", \"NONE\")",
    );
}

/// The console's routes are exactly `GET /ui` and `ANY /ui/{proxy+}`
/// without the IAM authorizer (the API checks bearer credentials there):
/// one missing, one behind IAM, or another open route beside them is
/// caught.
#[test]
fn console_routes_are_exactly_the_two_open_ones() {
    fn api_events(t: &mut Value) -> &mut serde_yaml::Mapping {
        t["Resources"]["ApiFunction"]["Properties"]["Events"].as_mapping_mut().expect("ApiFunction events")
    }
    broken_by(
        |t| {
            api_events(t).remove("GetUi");
        },
        "missing route (\"GET\", \"/ui\", \"ApiFunction\", \"NONE\")",
    );
    broken_by(
        |t| {
            let e = &mut api_events(t)["AnyUiProxy"]["Properties"];
            e.as_mapping_mut().unwrap().remove("Auth");
        },
        "(\"ANY\", \"/ui/{proxy+}\", \"ApiFunction\", \"AWS_IAM\")",
    );
    broken_by(
        |t| {
            api_events(t).insert(
                "AnyUi2Proxy".into(),
                yaml("{Type: HttpApi, Properties: {ApiId: !Ref HttpApi, Path: \"/ui2/{proxy+}\", Method: ANY, Auth: {Authorizer: NONE}}}"),
            );
        },
        "(\"ANY\", \"/ui2/{proxy+}\", \"ApiFunction\", \"NONE\")",
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

/// Delivery may update a saga's item only to keep a first attempt with
/// the saga's completion (its one `NEVER_EXCEPT` exemption on SagasTable);
/// putting a saga stays forbidden, and so does updating anything else.
#[test]
fn delivery_putting_sagas_is_caught() {
    broken_by(
        |t| {
            statements_mut(t, "DeliveryRole")
                .push(yaml("{Effect: Allow, Action: [dynamodb:PutItem], Resource: [!GetAtt SagasTable.Arn]}"))
        },
        "DeliveryFunction: dynamodb:PutItem on SagasTable is forbidden",
    );
    broken_by(
        |t| {
            statements_mut(t, "DeliveryRole")
                .push(yaml("{Effect: Allow, Action: [dynamodb:UpdateItem], Resource: [!GetAtt AttemptsTable.Arn]}"))
        },
        "DeliveryFunction: dynamodb:UpdateItem on AttemptsTable is forbidden",
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
/// IDEMPOTENCY_TABLE is the API function's alone: missing there, or given
/// to another function or to every function (Globals), fails.
#[test]
fn the_idempotency_table_is_named_to_the_api_only() {
    broken_by(
        |t| t["Resources"]["ApiFunction"]["Properties"]["Environment"] = Value::Null,
        "ApiFunction: Environment.Variables.IDEMPOTENCY_TABLE must be !Ref IdempotencyTable",
    );
    broken_by(
        |t| {
            t["Resources"]["RequeueFunction"]["Properties"]["Environment"] =
                yaml("{Variables: {IDEMPOTENCY_TABLE: !Ref IdempotencyTable}}")
        },
        "RequeueFunction: IDEMPOTENCY_TABLE is only ApiFunction's",
    );
    broken_by(
        |t| t["Globals"]["Function"]["Environment"]["Variables"]["IDEMPOTENCY_TABLE"] = yaml("!Ref IdempotencyTable"),
        "Globals: IDEMPOTENCY_TABLE is only ApiFunction's",
    );
}

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
