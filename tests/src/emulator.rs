//! The AWS side of the tests: an SDK configuration for the local emulator
//! (moto server, started by `infra/emulator.sh`, which `make test` runs) and
//! the tables and queues of `template.yaml`, created from the template
//! itself so the tests always run against the deployed resource model: one
//! source of truth, no hand-written list. Each test gets its own prefix, so
//! tests share one emulator without seeing each other's data.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection, ProjectionType,
    ScalarAttributeType, StreamSpecification, StreamViewType, TimeToLiveSpecification,
};
use aws_sdk_sqs::types::QueueAttributeName;
use hookline_aws::AwsNames;
use serde_json::json;
use serde_yaml::Value as Yaml;

/// The SDK configuration for the emulator, from the environment that
/// `make test` sets (`AWS_ENDPOINT_URL`, `AWS_REGION`, test credentials).
/// Panics when `AWS_ENDPOINT_URL` is missing, so a test can never reach a
/// real AWS account by accident.
pub async fn aws_config() -> SdkConfig {
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_default();
    if endpoint.trim().is_empty() {
        panic!("AWS_ENDPOINT_URL is not set: run `make test`, which starts the emulator");
    }
    let mut loader = hookline_aws::sdk_config_loader().endpoint_url(endpoint);
    if std::env::var("AWS_REGION").map_or(true, |r| r.is_empty()) {
        loader = loader.region(aws_config::Region::new("us-east-1"));
    }
    if std::env::var("AWS_ACCESS_KEY_ID").map_or(true, |k| k.is_empty()) {
        loader = loader.test_credentials();
    }
    loader.load().await
}

/// `template.yaml` at the repository root.
pub fn template_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("template.yaml")
}

/// The parsed template (read once per test process). CloudFormation short
/// forms (`!GetAtt`, `!Ref`, …) parse as YAML tagged values.
pub fn template() -> Yaml {
    static PARSED: std::sync::OnceLock<Yaml> = std::sync::OnceLock::new();
    PARSED
        .get_or_init(|| {
            let path = template_path();
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()))
        })
        .clone()
}

/// The template's KMS keys (logical id → ARN), created once per test
/// process and emulator and shared by every test's resources: a key holds
/// no test's data (each test's data key is its own item, wrapped by it), so
/// sharing it is safe, unlike the tables and queues, whose streams a test's
/// pipeline consumes and whose items the conformance cases name with fixed
/// ids.
async fn shared_kms_keys(moto: &crate::lambda_driver::Moto, ids: Vec<String>) -> HashMap<String, String> {
    static KEYS: tokio::sync::OnceCell<(String, HashMap<String, String>)> = tokio::sync::OnceCell::const_new();
    let (endpoint, keys) = KEYS
        .get_or_init(|| async {
            let mut keys = HashMap::new();
            for id in ids {
                let created = moto
                    .call("kms", "TrentService.CreateKey", json!({"Description": format!("hookline tests {id}")}))
                    .await;
                let arn = created["KeyMetadata"]["Arn"].as_str().unwrap_or_else(|| panic!("CreateKey {id}: {created}"));
                crate::iam::register_kms_key(arn, &id);
                keys.insert(id, arn.to_string());
            }
            (moto.endpoint().to_string(), keys)
        })
        .await;
    assert_eq!(endpoint, moto.endpoint(), "one emulator per test process");
    keys.clone()
}

/// Whether the template's event source mapping on `table`'s stream
/// (logical id, e.g. `EventsTable`) lets only inserts through: its
/// `FilterCriteria` has exactly the pattern `{"eventName": ["INSERT"]}`.
pub fn stream_filter_inserts_only(table: &str) -> bool {
    let t = template();
    let wanted = format!("{table}.StreamArn");
    let resources = t.get("Resources").and_then(Yaml::as_mapping).cloned().unwrap_or_default();
    for (_, r) in resources {
        let events =
            r.get("Properties").and_then(|p| p.get("Events")).and_then(Yaml::as_mapping).cloned().unwrap_or_default();
        for (_, e) in events {
            let props = e.get("Properties");
            let stream = props.and_then(|p| p.get("Stream"));
            let names_table = match stream {
                Some(Yaml::Tagged(t)) => t.value.as_str() == Some(wanted.as_str()),
                _ => false,
            };
            if names_table {
                let patterns: Vec<String> = props
                    .and_then(|p| p.get("FilterCriteria"))
                    .and_then(|f| f.get("Filters"))
                    .and_then(Yaml::as_sequence)
                    .map(|s| {
                        s.iter().filter_map(|f| f.get("Pattern").and_then(Yaml::as_str).map(str::to_string)).collect()
                    })
                    .unwrap_or_default();
                return patterns.len() == 1
                    && serde_json::from_str::<serde_json::Value>(&patterns[0]).ok()
                        == Some(json!({"eventName": ["INSERT"]}));
            }
        }
    }
    panic!("no event source mapping reads {table}'s stream in template.yaml")
}

/// A prefix no other test (in this or another test process) uses, short
/// enough for SQS queue names (80 characters with the logical id).
pub fn fresh_prefix(tag: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let tag: String = tag.chars().filter(|c| c.is_ascii_alphanumeric()).take(24).collect();
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{tag}-{:x}-{}-{:x}", std::process::id(), N.fetch_add(1, Ordering::Relaxed), nanos)
}

/// The name a resource of the template gets under `prefix`.
pub fn resource_name(prefix: &str, logical_id: &str) -> String {
    format!("{prefix}-{logical_id}")
}

/// The stream ARN of the table `logical_id` (e.g. `EventsTable`); panics if
/// the template gives that table no stream.
pub fn stream_arn<'a>(names: &'a AwsNames, logical_id: &str) -> &'a str {
    names.stream_arns.get(logical_id).unwrap_or_else(|| panic!("template.yaml gives {logical_id} no stream"))
}

/// The URL of the queue `logical_id` (e.g. `IngestQueue`).
pub fn queue_url<'a>(names: &'a AwsNames, logical_id: &str) -> &'a str {
    names.queue_urls.get(logical_id).unwrap_or_else(|| panic!("template.yaml has no queue {logical_id}"))
}

/// Creates every `AWS::DynamoDB::Table` and `AWS::SQS::Queue` of the
/// template as `{prefix}-{LogicalId}` in the emulator, and returns their
/// names as the adapters take them.
pub async fn create_resources(prefix: &str) -> AwsNames {
    create_resources_with(&aws_config().await, prefix).await
}

/// [`create_resources`] with a given SDK configuration.
pub async fn create_resources_with(sdk: &SdkConfig, prefix: &str) -> AwsNames {
    let template = template();
    let resources = template
        .get("Resources")
        .and_then(Yaml::as_mapping)
        .unwrap_or_else(|| panic!("{} has no Resources", template_path().display()));
    let ddb = aws_sdk_dynamodb::Client::new(sdk);
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let mut created = Created {
        stack_name: prefix.to_string(),
        parameters: parameter_defaults(&template, prefix),
        conditions: template.get("Conditions").cloned().unwrap_or(Yaml::Null),
        ..Created::default()
    };

    let of_type = |ty: &'static str| {
        resources.iter().filter_map(move |(id, r)| {
            let id = id.as_str().expect("logical ids are strings");
            (r.get("Type").and_then(Yaml::as_str) == Some(ty))
                .then(|| (id, r.get("Properties").cloned().unwrap_or(Yaml::Null)))
        })
    };

    for (id, props) in of_type("AWS::DynamoDB::Table") {
        let name = resource_name(prefix, id);
        let stream = create_table(&ddb, &name, &props).await;
        created.tables.insert(id.to_string(), name);
        if let Some(arn) = stream {
            created.stream_arns.insert(id.to_string(), arn);
        }
    }

    // Queues refer to each other (RedrivePolicy → DLQ, RedriveAllowPolicy →
    // source), so create them all first and set the policies after.
    let queues: Vec<(&str, Yaml)> = of_type("AWS::SQS::Queue").collect();
    for (id, props) in &queues {
        // `QueueName: !Sub ${AWS::StackName}-<id>` resolves to the same name.
        let name = match props.get("QueueName") {
            Some(n) => created.resolve(n).as_str().expect("QueueName is a string").to_string(),
            None => resource_name(prefix, id),
        };
        let mut req = sqs.create_queue().queue_name(&name);
        for (key, value) in props.as_mapping().into_iter().flatten() {
            let key = key.as_str().expect("property names are strings");
            if matches!(key, "QueueName" | "Tags" | "RedrivePolicy" | "RedriveAllowPolicy") {
                continue;
            }
            req = req.attributes(QueueAttributeName::from(key), scalar(value, id, key));
        }
        let url =
            req.send().await.unwrap_or_else(|e| panic!("CreateQueue {name}: {}", err(e))).queue_url.expect("queue url");
        let arn = sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .unwrap_or_else(|e| panic!("GetQueueAttributes {name}: {}", err(e)))
            .attributes
            .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
            .expect("queue arn");
        created.queue_urls.insert(id.to_string(), url);
        created.queue_arns.insert(id.to_string(), arn);
    }
    for (id, props) in &queues {
        let mut req = sqs.set_queue_attributes().queue_url(&created.queue_urls[*id]);
        let mut any = false;
        for key in ["RedrivePolicy", "RedriveAllowPolicy"] {
            if let Some(policy) = props.get(key) {
                let json = created.resolve(policy);
                req = req.attributes(QueueAttributeName::from(key), json.to_string());
                any = true;
            }
        }
        if any {
            req.send().await.unwrap_or_else(|e| panic!("SetQueueAttributes {id}: {}", err(e)));
        }
    }

    // KMS keys (the emulator's KMS: keys work, key policies are not
    // enforced; the strict checker holds the IAM grants) and their aliases.
    let moto = crate::lambda_driver::Moto::from_env();
    let key_ids: Vec<String> = of_type("AWS::KMS::Key").map(|(id, _)| id.to_string()).collect();
    created.kms_arns.extend(shared_kms_keys(&moto, key_ids).await);
    for (id, props) in of_type("AWS::KMS::Alias") {
        let target = props["TargetKeyId"].clone();
        let key = created.reference(&match ref_of_yaml(&target) {
            Some(r) => Yaml::String(r),
            None => panic!("{id}: TargetKeyId must be !Ref a key of the template"),
        });
        let alias = format!("alias/{prefix}-{id}");
        moto.call("kms", "TrentService.CreateAlias", json!({"AliasName": alias, "TargetKeyId": key})).await;
    }

    // EventBridge rules, on the test's own bus, with their targets (the
    // emulator puts matching events on the target queues as EventBridge does).
    for (id, props) in of_type("AWS::Events::Rule") {
        let props = created.resolve(&props);
        let bus = props["EventBusName"].as_str().unwrap_or("default").to_string();
        if bus != "default" {
            moto.call("events", "AWSEvents.CreateEventBus", json!({"Name": bus})).await;
        }
        let rule = resource_name(prefix, id);
        moto.call(
            "events",
            "AWSEvents.PutRule",
            json!({"Name": rule, "EventBusName": bus, "EventPattern": props["EventPattern"].to_string(), "State": props["State"]}),
        )
        .await;
        let targets: Vec<serde_json::Value> = props["Targets"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| json!({"Id": t["Id"], "Arn": t["Arn"]}))
            .collect();
        moto.call("events", "AWSEvents.PutTargets", json!({"Rule": rule, "EventBusName": bus, "Targets": targets}))
            .await;
    }
    created.names()
}

/// The EventBridge bus the resources made under `prefix` listen on: the
/// template's `EventBusName` parameter, one bus per test.
pub fn bus_name(prefix: &str) -> String {
    format!("{prefix}-bus")
}

/// The template's parameters at their defaults, but `EventBusName`, which
/// names the test's own bus.
fn parameter_defaults(template: &Yaml, prefix: &str) -> HashMap<String, String> {
    let mut out: HashMap<String, String> = template
        .get("Parameters")
        .and_then(Yaml::as_mapping)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let value = match v.get("Default")? {
                Yaml::String(s) => s.clone(),
                Yaml::Number(n) => n.to_string(),
                Yaml::Bool(b) => b.to_string(),
                _ => return None,
            };
            Some((k.as_str()?.to_string(), value))
        })
        .collect();
    out.insert("EventBusName".into(), bus_name(prefix));
    out
}

/// What has been created so far, by logical id, to resolve `!Ref`,
/// `!GetAtt` and `!Sub` against; the prefix plays the stack name.
#[derive(Default)]
struct Created {
    stack_name: String,
    parameters: HashMap<String, String>,
    conditions: Yaml,
    tables: HashMap<String, String>,
    stream_arns: HashMap<String, String>,
    queue_urls: HashMap<String, String>,
    queue_arns: HashMap<String, String>,
    kms_arns: HashMap<String, String>,
}

impl Created {
    /// The template value as JSON, with `!Ref`/`!GetAtt` (short or long
    /// form) replaced by what they name.
    fn resolve(&self, v: &Yaml) -> serde_json::Value {
        use serde_json::Value as J;
        match v {
            Yaml::Null => J::Null,
            Yaml::Bool(b) => J::Bool(*b),
            Yaml::Number(n) => serde_json::to_value(n).expect("numbers convert"),
            Yaml::String(s) => J::String(s.clone()),
            Yaml::Sequence(items) => J::Array(items.iter().map(|i| self.resolve(i)).collect()),
            Yaml::Mapping(m) => {
                if m.len() == 1 {
                    let (k, arg) = m.iter().next().expect("one entry");
                    match k.as_str() {
                        Some("Ref") => return J::String(self.reference(arg)),
                        Some("Fn::GetAtt") => return J::String(self.get_att(arg)),
                        Some("Fn::Sub") => return J::String(self.sub(arg)),
                        Some("Fn::If") => return self.resolve(self.choose(arg)),
                        _ => {}
                    }
                }
                J::Object(
                    m.iter()
                        .map(|(k, v)| (k.as_str().expect("keys are strings").to_string(), self.resolve(v)))
                        .collect(),
                )
            }
            Yaml::Tagged(t) => match t.tag.to_string().trim_start_matches('!') {
                "Ref" => J::String(self.reference(&t.value)),
                "GetAtt" => J::String(self.get_att(&t.value)),
                "Sub" => J::String(self.sub(&t.value)),
                "If" => self.resolve(self.choose(&t.value)),
                other => panic!("template intrinsic !{other} is not supported by the test harness"),
            },
        }
    }

    /// The branch `!If [Condition, then, else]` takes.
    fn choose<'a>(&self, arg: &'a Yaml) -> &'a Yaml {
        let [cond, then, otherwise] = arg.as_sequence().map(Vec::as_slice).unwrap_or_default() else {
            panic!("!If {arg:?}: expected [condition, then, else]")
        };
        let name = cond.as_str().expect("!If names a condition");
        let expr = self.conditions.get(name).unwrap_or_else(|| panic!("!If {name}: no such condition"));
        if self.holds(expr) {
            then
        } else {
            otherwise
        }
    }

    /// Evaluates a condition (`!Not`, `!Equals` over `!Ref`s and literals).
    fn holds(&self, expr: &Yaml) -> bool {
        let (f, args) = match expr {
            Yaml::Tagged(t) => (t.tag.to_string().trim_start_matches('!').to_string(), &t.value),
            Yaml::Mapping(m) if m.len() == 1 => {
                let (k, v) = m.iter().next().expect("one entry");
                (k.as_str().unwrap_or_default().trim_start_matches("Fn::").to_string(), v)
            }
            other => panic!("condition {other:?} is not supported by the test harness"),
        };
        let args = args.as_sequence().map(Vec::as_slice).unwrap_or_default();
        match (f.as_str(), args) {
            ("Not", [x]) => !self.holds(x),
            ("Equals", [a, b]) => self.resolve(a) == self.resolve(b),
            _ => panic!("condition !{f} {args:?} is not supported by the test harness"),
        }
    }

    /// `!Sub "text ${Name} ${Res.Att}"` (the one-string form): pseudo
    /// parameters, logical ids and attributes.
    fn sub(&self, arg: &Yaml) -> String {
        let text = arg.as_str().unwrap_or_else(|| panic!("!Sub {arg:?}: only the one-string form is supported"));
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let end = rest[start..].find('}').unwrap_or_else(|| panic!("!Sub {text}: unclosed ${{")) + start;
            let name = &rest[start + 2..end];
            let value = match name {
                "AWS::StackName" => self.stack_name.clone(),
                "AWS::Partition" => self.arn_part(1),
                "AWS::Region" => self.arn_part(3),
                "AWS::AccountId" => self.arn_part(4),
                _ if name.starts_with('!') => format!("${{{}}}", &name[1..]),
                _ if name.contains('.') => self.get_att(&Yaml::String(name.to_string())),
                _ => self.reference(&Yaml::String(name.to_string())),
            };
            out.push_str(&value);
            rest = &rest[end + 1..];
        }
        out.push_str(rest);
        out
    }

    /// Field `i` of the ARN of a queue created already (partition, region and
    /// account are the emulator's).
    fn arn_part(&self, i: usize) -> String {
        let arn = self.queue_arns.values().next().expect("a pseudo parameter is needed before any queue exists");
        arn.split(':').nth(i).unwrap_or_else(|| panic!("unexpected ARN {arn}")).to_string()
    }

    fn reference(&self, arg: &Yaml) -> String {
        let id = arg.as_str().expect("!Ref takes a logical id");
        if id == "AWS::StackName" {
            return self.stack_name.clone();
        }
        if let Some(p) = self.parameters.get(id) {
            return p.clone();
        }
        self.tables
            .get(id)
            .or_else(|| self.queue_urls.get(id))
            .or_else(|| self.kms_arns.get(id))
            .unwrap_or_else(|| panic!("!Ref {id}: not a table or queue created (yet)"))
            .clone()
    }

    fn get_att(&self, arg: &Yaml) -> String {
        let (id, att) = match arg {
            Yaml::String(s) => s.split_once('.').unwrap_or_else(|| panic!("!GetAtt {s}: expected Resource.Attribute")),
            Yaml::Sequence(s) if s.len() == 2 => (
                s[0].as_str().expect("!GetAtt resource is a string"),
                s[1].as_str().expect("!GetAtt attribute is a string"),
            ),
            other => panic!("!GetAtt {other:?}: expected Resource.Attribute"),
        };
        let found = match att {
            "Arn" => self.queue_arns.get(id).or_else(|| self.kms_arns.get(id)),
            "StreamArn" => self.stream_arns.get(id),
            "QueueUrl" => self.queue_urls.get(id),
            _ => None,
        };
        found.unwrap_or_else(|| panic!("!GetAtt {id}.{att}: not created (yet) or not supported")).clone()
    }

    fn names(self) -> AwsNames {
        let table = |id: &str| self.tables.get(id).unwrap_or_else(|| panic!("template.yaml has no table {id}")).clone();
        let queue =
            |id: &str| self.queue_urls.get(id).unwrap_or_else(|| panic!("template.yaml has no queue {id}")).clone();
        AwsNames {
            events_table: table("EventsTable"),
            event_outcomes_table: table("EventOutcomesTable"),
            subscriptions_table: table("SubscriptionsTable"),
            keys_table: table("KeysTable"),
            kms_key_id: self.kms_arns.get("DataKmsKey").expect("template.yaml has no DataKmsKey").clone(),
            sagas_table: table("SagasTable"),
            attempts_table: table("AttemptsTable"),
            dead_letters_table: table("DeadLettersTable"),
            health_table: table("HealthTable"),
            order_table: table("OrderTable"),
            jobs_table: table("JobsTable"),
            audit_table: table("AuditTable"),
            api_keys_table: table("ApiKeysTable"),
            idempotency_table: Some(table("IdempotencyTable")),
            stats_table: table("StatsTable"),
            event_types_table: table("EventTypesTable"),
            acks_table: table("AcknowledgementsTable"),
            deliveries_queue_url: queue("DeliveriesQueue"),
            deliveries_dlq_url: queue("DeliveriesDLQ"),
            retries_queue_url: queue("RetriesQueue"),
            retries_dlq_url: Some(queue("RetriesDLQ")),
            requeue_queue_url: queue("RequeueQueue"),
            requeue_dlq_url: Some(queue("RequeueDLQ")),
            ingest_dlq_url: Some(queue("IngestDLQ")),
            stream_failures_queue_url: Some(queue("StreamFailuresQueue")),
            stream_arns: self.stream_arns,
            queue_urls: self.queue_urls,
        }
    }
}

/// `!Ref X` (short or long form) → `X`.
fn ref_of_yaml(v: &Yaml) -> Option<String> {
    match v {
        Yaml::Tagged(t) if t.tag.to_string().trim_start_matches('!') == "Ref" => t.value.as_str().map(str::to_string),
        Yaml::Mapping(m) if m.len() == 1 => m.get("Ref").and_then(Yaml::as_str).map(str::to_string),
        _ => None,
    }
}

/// A scalar queue property as the attribute string SQS takes.
fn scalar(v: &Yaml, id: &str, key: &str) -> String {
    match v {
        Yaml::Bool(b) => b.to_string(),
        Yaml::Number(n) => n.to_string(),
        Yaml::String(s) => s.clone(),
        other => panic!("{id}.{key}: unsupported queue property value {other:?}"),
    }
}

fn err<E: std::error::Error + 'static>(e: E) -> String {
    aws_sdk_dynamodb::error::DisplayErrorContext(&e).to_string()
}

fn list<'a>(props: &'a Yaml, key: &str) -> impl Iterator<Item = &'a Yaml> {
    props.get(key).and_then(Yaml::as_sequence).into_iter().flatten()
}

fn text<'a>(v: &'a Yaml, key: &str) -> &'a str {
    v.get(key).and_then(Yaml::as_str).unwrap_or_else(|| panic!("template: missing `{key}` in {v:?}"))
}

fn key_schema(v: &Yaml) -> Vec<KeySchemaElement> {
    list(v, "KeySchema")
        .map(|k| {
            KeySchemaElement::builder()
                .attribute_name(text(k, "AttributeName"))
                .key_type(KeyType::from(text(k, "KeyType")))
                .build()
                .expect("key schema element")
        })
        .collect()
}

/// Creates one table from its template properties; returns its stream ARN.
async fn create_table(ddb: &aws_sdk_dynamodb::Client, name: &str, props: &Yaml) -> Option<String> {
    let attributes = list(props, "AttributeDefinitions")
        .map(|a| {
            AttributeDefinition::builder()
                .attribute_name(text(a, "AttributeName"))
                .attribute_type(ScalarAttributeType::from(text(a, "AttributeType")))
                .build()
                .expect("attribute definition")
        })
        .collect();
    let indexes: Vec<GlobalSecondaryIndex> = list(props, "GlobalSecondaryIndexes")
        .map(|g| {
            let p = g.get("Projection").unwrap_or(&Yaml::Null);
            let projection = Projection::builder()
                .set_projection_type(p.get("ProjectionType").and_then(Yaml::as_str).map(ProjectionType::from))
                .set_non_key_attributes(
                    p.get("NonKeyAttributes")
                        .and_then(Yaml::as_sequence)
                        .map(|s| s.iter().filter_map(Yaml::as_str).map(str::to_string).collect()),
                )
                .build();
            GlobalSecondaryIndex::builder()
                .index_name(text(g, "IndexName"))
                .set_key_schema(Some(key_schema(g)))
                .projection(projection)
                .build()
                .expect("global secondary index")
        })
        .collect();
    let stream = props.get("StreamSpecification").map(|s| {
        StreamSpecification::builder()
            .stream_enabled(true)
            .stream_view_type(StreamViewType::from(text(s, "StreamViewType")))
            .build()
            .expect("stream specification")
    });
    let billing = props.get("BillingMode").and_then(Yaml::as_str).unwrap_or("PAY_PER_REQUEST");
    let out = ddb
        .create_table()
        .table_name(name)
        .set_attribute_definitions(Some(attributes))
        .set_key_schema(Some(key_schema(props)))
        .set_global_secondary_indexes((!indexes.is_empty()).then_some(indexes))
        .set_stream_specification(stream)
        .billing_mode(BillingMode::from(billing))
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateTable {name}: {}", err(e)));
    if let Some(ttl) = props.get("TimeToLiveSpecification") {
        if ttl.get("Enabled").and_then(Yaml::as_bool).unwrap_or(false) {
            let spec = TimeToLiveSpecification::builder()
                .attribute_name(text(ttl, "AttributeName"))
                .enabled(true)
                .build()
                .expect("ttl specification");
            ddb.update_time_to_live()
                .table_name(name)
                .time_to_live_specification(spec)
                .send()
                .await
                .unwrap_or_else(|e| panic!("UpdateTimeToLive {name}: {}", err(e)));
        }
    }
    out.table_description.and_then(|d| d.latest_stream_arn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created() -> Created {
        let mut c = Created { stack_name: "pfx".into(), ..Created::default() };
        c.queue_urls.insert("Q".into(), "http://h/123/pfx-Q".into());
        c.queue_arns.insert("Q".into(), "arn:aws:sqs:us-east-1:123456789012:pfx-Q".into());
        c.tables.insert("T".into(), "pfx-T".into());
        c.stream_arns.insert("T".into(), "arn:stream".into());
        c
    }

    #[test]
    fn intrinsics_resolve_in_short_and_long_form() {
        let c = created();
        let yaml: Yaml = serde_yaml::from_str(
            r#"
            a: !Sub arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:${AWS::StackName}-Q
            b: !GetAtt Q.Arn
            c: { "Fn::GetAtt": [T, StreamArn] }
            d: !Ref T
            e: [!Sub "${Q}/${T.StreamArn}", 5]
            "#,
        )
        .unwrap();
        assert_eq!(
            c.resolve(&yaml),
            serde_json::json!({
                "a": "arn:aws:sqs:us-east-1:123456789012:pfx-Q",
                "b": "arn:aws:sqs:us-east-1:123456789012:pfx-Q",
                "c": "arn:stream",
                "d": "pfx-T",
                "e": ["http://h/123/pfx-Q/arn:stream", 5],
            })
        );
    }

    #[test]
    fn the_template_has_every_resource_the_adapters_need() {
        let t = template();
        let resources = t["Resources"].as_mapping().unwrap();
        for id in ["EventsTable", "SubscriptionsTable", "SagasTable", "AttemptsTable", "DeadLettersTable"] {
            assert_eq!(resources[id]["Type"].as_str(), Some("AWS::DynamoDB::Table"), "{id}");
        }
        for id in ["DeliveriesQueue", "DeliveriesDLQ", "RetriesQueue", "RequeueQueue", "IngestDLQ"] {
            assert_eq!(resources[id]["Type"].as_str(), Some("AWS::SQS::Queue"), "{id}");
        }
    }
}
