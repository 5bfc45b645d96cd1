//! IAM as `template.yaml` writes it, for the tests: which function's role
//! allows which action on which resource, read from the roles' inline
//! policies (never from a hand-kept list), and the function a request is
//! made under.
//!
//! The emulator enforces no IAM, so the strict checker
//! ([`crate::strict`]) asks [`Roles::denies`] for every request made while
//! a handler runs ([`as_function`]): a request its function's role does not
//! grant is refused as AWS would refuse it (AccessDeniedException) and fails
//! the test. Requests made outside any function (a test's own set-up and
//! reads) are not checked.
//!
//! Resources are named as the checks name them: a table or queue logical id
//! (its ARN), `<Table>/stream` (its stream ARN), `<Table>/stream/*`,
//! `<Table>/index/*`, `<Table>/index/<name>`. How requests map to IAM
//! actions (AWS Service Authorization Reference, "Actions defined by Amazon
//! DynamoDB" and "… Amazon SQS"):
//! - DynamoDB: the operation's name (`dynamodb:Query` on
//!   `<Table>/index/<name>` when it names an index), except
//!   `TransactWriteItems`, which is authorized per action on each item
//!   (`PutItem`, `UpdateItem`, `DeleteItem`, `ConditionCheckItem`), and
//!   `TransactGetItems`, authorized as `GetItem` per item. `BatchWriteItem`
//!   and `BatchGetItem` are actions of their own, on each table named.
//! - DynamoDB Streams: `DescribeStream`, `GetShardIterator`, `GetRecords`
//!   on the stream ARN (a `GetRecords` iterator is traced back to the
//!   stream it was taken from); `ListStreams` on `<Table>/stream/*`.
//! - SQS: the operation's name, a batch operation as its single form
//!   (`SendMessageBatch` is `sqs:SendMessage`), on the queue of `QueueUrl`.
//! - KMS ("Actions defined by AWS Key Management Service"): the
//!   operation's name (`kms:Encrypt`, `kms:Decrypt`, `kms:GenerateDataKey`,
//!   `kms:ReEncrypt` as `kms:ReEncryptFrom` on the source key and
//!   `kms:ReEncryptTo` on the destination) on the key the request names by
//!   `KeyId` (ARN, id, or an alias of it), as the template's logical id
//!   ([`register_kms_key`]). A `Decrypt` without `KeyId` is authorized on
//!   the key inside its ciphertext, which this map cannot see: it is
//!   reported as needing `kms:Decrypt` on an unnamed key (so Hookline
//!   always names it).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

use serde_yaml::{Mapping, Value};

/// (action, resource) pairs a role's policies allow.
pub type Grants = BTreeSet<(String, String)>;

tokio::task_local! {
    static FUNCTION: &'static str;
}

/// Runs `fut` as an invocation of `function` (a logical id of the template,
/// e.g. `RouterFunction`): every AWS request it makes is checked against
/// that function's role.
pub async fn as_function<F: Future>(function: &'static str, fut: F) -> F::Output {
    FUNCTION.scope(function, fut).await
}

/// The function the current task runs as, if any.
pub fn current_function() -> Option<&'static str> {
    FUNCTION.try_with(|f| *f).ok()
}

/// Each function's grants, as the template's roles write them.
#[derive(Debug, Clone, Default)]
pub struct Roles {
    grants: BTreeMap<String, Grants>,
}

impl Roles {
    /// The grants of every `AWS::Serverless::Function` of `template.yaml`
    /// (through its `Role: !GetAtt <Role>.Arn`).
    pub fn from_template() -> Roles {
        Roles::of(&load_template())
    }

    /// The grants of every function of template `t`.
    pub fn of(t: &Value) -> Roles {
        let mut grants = BTreeMap::new();
        for f in ids_of_type(t, "AWS::Serverless::Function") {
            let role = get_att(&t["Resources"][f]["Properties"]["Role"]).map(|(r, _)| r).unwrap_or_default();
            grants.insert(f.to_string(), role_grants(t, &role).0);
        }
        Roles { grants }
    }

    /// Why `function` may not do `action` on `resource`, or `None` if its
    /// role allows it.
    pub fn denies(&self, function: &str, action: &str, resource: &str) -> Option<String> {
        let Some(g) = self.grants.get(function) else {
            return Some(format!("{function} is not a function of template.yaml"));
        };
        let ok = g.iter().any(|(a, r)| action_matches(a, action) && resource_matches(r, resource));
        (!ok).then(|| format!("IAM: {function}'s role does not allow {action} on {resource} (template.yaml)"))
    }
}

fn action_matches(granted: &str, action: &str) -> bool {
    granted == "*" || granted == action || granted.strip_suffix('*').is_some_and(|p| action.starts_with(p))
}

/// A granted resource covers a requested one: the same, or a `/*` suffix
/// that covers every name below it.
fn resource_matches(granted: &str, resource: &str) -> bool {
    if granted == "*" || granted == resource {
        return true;
    }
    match granted.strip_suffix("/*") {
        Some(base) => resource.strip_prefix(base).is_some_and(|rest| rest.starts_with('/') && rest.len() > 1),
        None => false,
    }
}

/// The logical id in a resource name of the emulator (`{prefix}-{LogicalId}`).
pub fn logical_id(name: &str) -> &str {
    name.rsplit('-').next().unwrap_or(name).trim_end_matches(".fifo")
}

/// The IAM (action, resource) pairs one DynamoDB request needs.
pub fn dynamodb_needs(op: &str, req: &serde_json::Value) -> Vec<(String, String)> {
    let table_of = |v: &serde_json::Value| logical_id(v.as_str().unwrap_or("")).to_string();
    let mut out = Vec::new();
    match op {
        "TransactWriteItems" => {
            for item in req["TransactItems"].as_array().into_iter().flatten() {
                for (kind, action) in [
                    ("Put", "PutItem"),
                    ("Update", "UpdateItem"),
                    ("Delete", "DeleteItem"),
                    ("ConditionCheck", "ConditionCheckItem"),
                ] {
                    if item[kind].is_object() {
                        out.push((format!("dynamodb:{action}"), table_of(&item[kind]["TableName"])));
                    }
                }
            }
        }
        "TransactGetItems" => {
            for item in req["TransactItems"].as_array().into_iter().flatten() {
                out.push(("dynamodb:GetItem".into(), table_of(&item["Get"]["TableName"])));
            }
        }
        "BatchWriteItem" | "BatchGetItem" => {
            for table in req["RequestItems"].as_object().into_iter().flat_map(|m| m.keys()) {
                out.push((format!("dynamodb:{op}"), logical_id(table).to_string()));
            }
        }
        _ => {
            let mut res = table_of(&req["TableName"]);
            if let Some(index) = req["IndexName"].as_str() {
                res = format!("{res}/index/{index}");
            }
            out.push((format!("dynamodb:{op}"), res));
        }
    }
    out
}

/// KMS keys the emulator made for the template, by ARN and by key id.
fn kms_keys() -> &'static std::sync::Mutex<BTreeMap<String, String>> {
    static KEYS: std::sync::OnceLock<std::sync::Mutex<BTreeMap<String, String>>> = std::sync::OnceLock::new();
    KEYS.get_or_init(Default::default)
}

/// Remembers that the KMS key `arn` is the template's `logical_id`, so a
/// request naming it (by ARN or key id) maps to that resource.
pub fn register_kms_key(arn: &str, logical_id: &str) {
    let mut keys = kms_keys().lock().unwrap();
    keys.insert(arn.to_string(), logical_id.to_string());
    if let Some(id) = arn.rsplit('/').next() {
        keys.insert(id.to_string(), logical_id.to_string());
    }
}

/// The IAM (action, resource) pairs one KMS request needs.
pub fn kms_needs(op: &str, req: &serde_json::Value) -> Vec<(String, String)> {
    let key = |field: &str| match req[field].as_str() {
        Some(k) => kms_keys().lock().unwrap().get(k).cloned().unwrap_or_else(|| format!("(KMS key {k})")),
        None => "(a KMS key not named in the request)".to_string(),
    };
    match op {
        "ReEncrypt" => {
            vec![("kms:ReEncryptFrom".into(), key("SourceKeyId")), ("kms:ReEncryptTo".into(), key("DestinationKeyId"))]
        }
        _ => vec![(format!("kms:{op}"), key("KeyId"))],
    }
}

/// The resource of a stream ARN (`…:table/<name>/stream/<label>`):
/// `<Table>/stream`.
pub fn stream_resource(arn: &str) -> String {
    let table = arn.split("table/").nth(1).and_then(|r| r.split('/').next()).unwrap_or("");
    format!("{}/stream", logical_id(table))
}

/// The IAM action and queue of one SQS request.
pub fn sqs_needs(op: &str, req: &serde_json::Value) -> (String, String) {
    let action = op.strip_suffix("Batch").unwrap_or(op);
    let queue = req["QueueUrl"].as_str().and_then(|u| u.rsplit('/').next()).unwrap_or("");
    (format!("sqs:{action}"), logical_id(queue).to_string())
}

// ------------------------------------------------------------------ reading the template

/// `template.yaml` of the workspace.
pub fn load_template() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("parse {path}: {e}"))
}

/// The template's resources.
pub fn resources(t: &Value) -> &Mapping {
    t["Resources"].as_mapping().expect("template has Resources")
}

/// The resource `id`, if the template has it.
pub fn resource<'a>(t: &'a Value, id: &str) -> Option<&'a Value> {
    resources(t).get(id)
}

/// The `Type` of resource `id`.
pub fn type_of<'a>(t: &'a Value, id: &str) -> Option<&'a str> {
    resource(t, id).and_then(|r| r["Type"].as_str())
}

/// The logical ids of every resource of type `ty`.
pub fn ids_of_type<'a>(t: &'a Value, ty: &str) -> Vec<&'a str> {
    resources(t).iter().filter(|(_, r)| r["Type"].as_str() == Some(ty)).filter_map(|(k, _)| k.as_str()).collect()
}

/// A function property, falling back to `Globals.Function`.
pub fn fn_prop<'a>(t: &'a Value, function: &str, key: &str) -> Option<&'a Value> {
    let own = &t["Resources"][function]["Properties"][key];
    if !own.is_null() {
        return Some(own);
    }
    let global = &t["Globals"]["Function"][key];
    (!global.is_null()).then_some(global)
}

/// An intrinsic function, short (`!GetAtt x`) or long (`{Fn::GetAtt: x}`)
/// form: its name without prefix (`GetAtt`, `Sub`, `Ref`) and argument.
pub fn intrinsic(v: &Value) -> Option<(String, &Value)> {
    match v {
        Value::Tagged(t) => Some((t.tag.to_string().trim_start_matches('!').to_string(), &t.value)),
        Value::Mapping(m) if m.len() == 1 => {
            let (k, arg) = m.iter().next()?;
            let k = k.as_str()?;
            if k == "Ref" {
                Some(("Ref".into(), arg))
            } else {
                k.strip_prefix("Fn::").map(|name| (name.to_string(), arg))
            }
        }
        _ => None,
    }
}

/// `!GetAtt Id.Attr` (or `[Id, Attr]`) → (Id, Attr).
pub fn get_att(v: &Value) -> Option<(String, String)> {
    let (name, arg) = intrinsic(v)?;
    if name != "GetAtt" {
        return None;
    }
    match arg {
        Value::String(s) => s.split_once('.').map(|(a, b)| (a.to_string(), b.to_string())),
        Value::Sequence(s) if s.len() == 2 => Some((s[0].as_str()?.to_string(), s[1].as_str()?.to_string())),
        _ => None,
    }
}

/// `!Ref Id` → Id.
pub fn ref_of(v: &Value) -> Option<String> {
    match intrinsic(v)? {
        (n, Value::String(s)) if n == "Ref" => Some(s.clone()),
        _ => None,
    }
}

/// `!Sub "..."` → its template string (the single-string form only).
pub fn sub_of(v: &Value) -> Option<String> {
    match intrinsic(v)? {
        (n, Value::String(s)) if n == "Sub" => Some(s.clone()),
        _ => None,
    }
}

/// An IAM policy resource, named as the checks name resources (see the
/// module doc); anything else comes back as written, so that it matches
/// nothing a request needs (a literal ARN, …) but a plain `*`.
pub fn resource_key(v: &Value) -> String {
    if let Some((id, attr)) = get_att(v) {
        return match attr.as_str() {
            "Arn" => id,
            "StreamArn" => format!("{id}/stream"),
            other => format!("!GetAtt {id}.{other}"),
        };
    }
    if let Some(s) = sub_of(v) {
        if let Some(rest) = s.strip_prefix("${") {
            if let Some((inner, suffix)) = rest.split_once('}') {
                if let Some(id) = inner.strip_suffix(".Arn") {
                    if suffix.is_empty() || suffix == "/stream/*" || suffix == "/index/*" {
                        return format!("{id}{suffix}");
                    }
                }
            }
        }
        return format!("!Sub {s}");
    }
    if let Some(name) = ref_of(v) {
        return name;
    }
    match v {
        Value::String(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

/// A policy statement, or the one an `!If [condition, statement,
/// !Ref AWS::NoValue]` grants when its condition holds (the grants are
/// read as the widest the template can give; which conditions guard which
/// statements is checked separately, [`statement_condition`]).
pub fn conditional_statement(st: &Value) -> Option<&Value> {
    match statement_condition(st) {
        Some((_, then)) => Some(then),
        None => Some(st),
    }
}

/// The condition and statement of an `!If [condition, statement,
/// !Ref AWS::NoValue]` statement; `None` for a plain one.
pub fn statement_condition(st: &Value) -> Option<(&str, &Value)> {
    let Value::Tagged(t) = st else { return None };
    if t.tag.to_string().trim_start_matches('!') != "If" {
        return None;
    }
    match t.value.as_sequence().map(Vec::as_slice) {
        Some([cond, then, otherwise]) if ref_of(otherwise).as_deref() == Some("AWS::NoValue") => {
            Some((cond.as_str()?, then))
        }
        _ => None,
    }
}

/// A value or list of values as a list (nothing for null).
pub fn strings(v: &Value) -> Vec<&Value> {
    match v {
        Value::Sequence(s) => s.iter().collect(),
        Value::Null => vec![],
        other => vec![other],
    }
}

/// The (action, resource) pairs one role's inline policies allow, and what
/// in its policy documents the checks do not accept (a Deny, `NotAction`,
/// `NotResource`, a `Principal`, a statement without actions or resources,
/// a `Condition`, which these grants would not model).
pub fn role_grants(t: &Value, role: &str) -> (Grants, Vec<String>) {
    let mut grants = Grants::new();
    let mut errors = Vec::new();
    let props = &t["Resources"][role]["Properties"];
    for policy in strings(&props["Policies"]) {
        let doc = &policy["PolicyDocument"];
        for st in strings(&doc["Statement"]).into_iter().filter_map(conditional_statement) {
            let sid = st["Sid"].as_str().unwrap_or("(no Sid)");
            if st["Effect"].as_str() != Some("Allow") {
                errors.push(format!("{role}: statement {sid} is not a plain Allow"));
                continue;
            }
            for forbidden in ["NotAction", "NotResource", "Principal", "Condition"] {
                if !st[forbidden].is_null() {
                    errors.push(format!("{role}: statement {sid} uses {forbidden}"));
                }
            }
            let actions: Vec<String> = strings(&st["Action"])
                .iter()
                .map(|a| a.as_str().map(str::to_string).unwrap_or_else(|| format!("{a:?}")))
                .collect();
            let res: Vec<String> = strings(&st["Resource"]).iter().map(|r| resource_key(r)).collect();
            if actions.is_empty() || res.is_empty() {
                errors.push(format!("{role}: statement {sid} has no Action or no Resource"));
            }
            for a in &actions {
                for r in &res {
                    grants.insert((a.clone(), r.clone()));
                }
            }
        }
    }
    (grants, errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn roles(yaml: &str) -> Roles {
        Roles::of(&serde_yaml::from_str(yaml).unwrap())
    }

    const T: &str = r#"
Resources:
  F:
    Type: AWS::Serverless::Function
    Properties:
      Role: !GetAtt R.Arn
  R:
    Type: AWS::IAM::Role
    Properties:
      Policies:
        - PolicyDocument:
            Statement:
              - Effect: Allow
                Action: [dynamodb:GetItem, dynamodb:Query]
                Resource: !GetAtt EventsTable.Arn
              - Effect: Allow
                Action: dynamodb:Query
                Resource: !Sub "${DeadLettersTable.Arn}/index/*"
              - Effect: Allow
                Action: sqs:SendMessage
                Resource: !GetAtt DeliveriesQueue.Arn
              - Effect: Allow
                Action: dynamodb:GetRecords
                Resource: !GetAtt EventsTable.StreamArn
"#;

    #[test]
    fn a_role_allows_what_its_statements_name_and_nothing_else() {
        let r = roles(T);
        assert_eq!(r.denies("F", "dynamodb:GetItem", "EventsTable"), None);
        assert!(r.denies("F", "dynamodb:PutItem", "EventsTable").is_some(), "another action");
        assert!(r.denies("F", "dynamodb:GetItem", "SagasTable").is_some(), "another table");
        // The table's ARN does not cover its indexes.
        assert!(r.denies("F", "dynamodb:Query", "EventsTable/index/by_tenant").is_some());
        assert_eq!(r.denies("F", "dynamodb:Query", "DeadLettersTable/index/by_status"), None);
        assert!(r.denies("F", "dynamodb:Query", "DeadLettersTable").is_some(), "index/* is not the table");
        assert_eq!(r.denies("F", "sqs:SendMessage", "DeliveriesQueue"), None);
        assert!(r.denies("F", "sqs:SendMessage", "DeliveriesDLQ").is_some());
        assert_eq!(r.denies("F", "dynamodb:GetRecords", "EventsTable/stream"), None);
        assert!(r.denies("F", "dynamodb:GetRecords", "SagasTable/stream").is_some());
        assert!(r.denies("Other", "dynamodb:GetItem", "EventsTable").is_some(), "an unknown function");
    }

    #[test]
    fn requests_map_to_the_actions_aws_authorizes() {
        let q = dynamodb_needs("Query", &json!({"TableName": "p-1-a-EventsTable", "IndexName": "by_tenant"}));
        assert_eq!(q, vec![("dynamodb:Query".to_string(), "EventsTable/index/by_tenant".to_string())]);
        let t = dynamodb_needs(
            "TransactWriteItems",
            &json!({"TransactItems": [{"Put": {"TableName": "p-EventsTable"}}, {"Update": {"TableName": "p-OrderTable"}},
                                      {"ConditionCheck": {"TableName": "p-SagasTable"}}]}),
        );
        assert_eq!(
            t,
            vec![
                ("dynamodb:PutItem".to_string(), "EventsTable".to_string()),
                ("dynamodb:UpdateItem".to_string(), "OrderTable".to_string()),
                ("dynamodb:ConditionCheckItem".to_string(), "SagasTable".to_string()),
            ]
        );
        let b = dynamodb_needs("BatchGetItem", &json!({"RequestItems": {"p-SubscriptionsTable": {}}}));
        assert_eq!(b, vec![("dynamodb:BatchGetItem".to_string(), "SubscriptionsTable".to_string())]);
        assert_eq!(
            sqs_needs("SendMessageBatch", &json!({"QueueUrl": "http://x/123456789012/p-1-DeliveriesQueue"})),
            ("sqs:SendMessage".to_string(), "DeliveriesQueue".to_string())
        );
        assert_eq!(
            stream_resource("arn:aws:dynamodb:us-east-1:123456789012:table/p-9-EventsTable/stream/2026-11-28T00:00:00"),
            "EventsTable/stream"
        );
    }

    #[test]
    fn the_template_gives_every_function_a_role_with_grants() {
        let r = Roles::from_template();
        for f in [
            "IngestFunction",
            "RouterFunction",
            "SagaFunction",
            "DeliveryFunction",
            "RequeueFunction",
            "ApiFunction",
            "ReconcilerFunction",
        ] {
            assert!(r.grants.get(f).is_some_and(|g| !g.is_empty()), "{f} has no grants");
        }
    }
}
