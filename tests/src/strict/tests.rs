//! Unit tests of the strict checker's rules.

use super::*;
use serde_json::json;

fn ddb(op: &str, req: Value) -> Vec<String> {
    Strict::new().check_dynamodb(op, &req)
}

#[test]
fn empty_and_unused_expression_maps_are_refused() {
    let q = json!({"TableName": "p-SagasTable", "KeyConditionExpression": "event_id = :e",
                   "ExpressionAttributeNames": {}, "ExpressionAttributeValues": {":e": {"S": "x"}}});
    let v = ddb("Query", q);
    assert!(v.iter().any(|m| m.starts_with("D1 ExpressionAttributeNames")), "{v:?}");
    let q = json!({"TableName": "p-SagasTable", "KeyConditionExpression": "event_id = :e",
                   "ExpressionAttributeNames": {"#k": "id"}, "ExpressionAttributeValues": {":e": {"S": "x"}, ":z": {"S": "y"}}});
    let v = ddb("Query", q);
    assert!(v.iter().any(|m| m.contains("defines #k")) && v.iter().any(|m| m.contains("defines :z")), "{v:?}");
    let ok = json!({"TableName": "p-SagasTable", "KeyConditionExpression": "event_id = :e",
                    "ExpressionAttributeValues": {":e": {"S": "x"}}});
    assert!(ddb("Query", ok).is_empty());
}

#[test]
fn index_queries_read_only_keys_and_projected_attributes() {
    let q = |key: &str, filter: &str, names: Value| {
        ddb(
            "Query",
            json!({"TableName": "p-EventsTable", "IndexName": "tenant_shards",
            "KeyConditionExpression": key, "FilterExpression": filter, "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {":t": {"S": "acme"}, ":v": {"S": "x"}}}),
        )
    };
    let ok = q("#t = :t", "#et = :v AND begins_with(#et, :v)", json!({"#t": "tenant_shard", "#et": "event_type"}));
    assert!(ok.is_empty(), "{ok:?}");
    let v = q("#t = :t", "#d = :v", json!({"#t": "tenant_shard", "#d": "data"}));
    assert!(v.iter().any(|m| m.starts_with("D8") && m.contains("data")), "{v:?}");
    let v = q("#t = :t", "time_key = :v", json!({"#t": "tenant_shard"}));
    assert!(v.iter().any(|m| m.contains("names its key time_key")), "{v:?}");
    let v = q("#e = :t", "#et = :v", json!({"#e": "event_type", "#et": "event_type"}));
    assert!(v.iter().any(|m| m.contains("not a key")), "{v:?}");
}

#[test]
fn queries_key_on_keys_with_ordered_bounds_and_filter_on_others() {
    let q = |kc: &str, f: Option<&str>, lo: &str, hi: &str| {
        let mut q = json!({"TableName": "p-AuditTable", "IndexName": "by_actor", "KeyConditionExpression": kc,
                           "ExpressionAttributeNames": {"#k": "actor", "#p": "pos"},
                           "ExpressionAttributeValues": {":k": {"S": "key:a"}, ":lo": {"S": lo}, ":hi": {"S": hi}}});
        if let Some(f) = f {
            q["FilterExpression"] = json!(f);
        }
        ddb("Query", q)
    };
    let ok = q("#k = :k AND #p BETWEEN :lo AND :hi", None, "0", "9");
    assert!(ok.is_empty(), "{ok:?}");
    let v = q("#k = :k AND #p BETWEEN :lo AND :hi", None, "9", "0");
    assert!(v.iter().any(|m| m.starts_with("D9") && m.contains("lower bound")), "{v:?}");
    let v = q("#k = :k AND action BETWEEN :lo AND :hi", None, "0", "9");
    assert!(v.iter().any(|m| m.starts_with("D9") && m.contains("names action")), "{v:?}");
    let v = q("#k = :k AND #p BETWEEN :lo AND :hi", Some("#k = :k"), "0", "9");
    assert!(v.iter().any(|m| m.starts_with("D9")), "{v:?}");
}

#[test]
fn oversized_keys_and_items_are_refused() {
    let long = "k".repeat(2049);
    let v = ddb("PutItem", json!({"TableName": "p-EventsTable", "Item": {"id": {"S": long}}}));
    assert!(v.iter().any(|m| m.starts_with("D4 partition key id")), "{v:?}");
    let v = ddb(
        "GetItem",
        json!({"TableName": "p-SagasTable", "Key": {"event_id": {"S": "e"}, "id": {"S": "s".repeat(1025)}}}),
    );
    assert!(v.iter().any(|m| m.starts_with("D4 sort key id")), "{v:?}");
    let big = "x".repeat(400 * 1024);
    let v = ddb("PutItem", json!({"TableName": "p-EventsTable", "Item": {"id": {"S": "e"}, "data": {"S": big}}}));
    assert!(v.iter().any(|m| m.starts_with("D5")), "{v:?}");
}

#[test]
fn sqs_batches_delays_and_attributes_follow_the_quotas() {
    let entries: Vec<Value> = (0..11).map(|i| json!({"Id": i.to_string(), "MessageBody": "b"})).collect();
    let v = Strict::check_sqs("SendMessageBatch", &json!({"QueueUrl": "u", "Entries": entries}));
    assert!(v.iter().any(|m| m.starts_with("S1")), "{v:?}");
    let v = Strict::check_sqs("SendMessage", &json!({"QueueUrl": "u", "MessageBody": "b", "DelaySeconds": 901}));
    assert!(v.iter().any(|m| m.starts_with("S3")), "{v:?}");
    let v = Strict::check_sqs("SendMessage", &json!({"QueueUrl": "u", "MessageBody": "a\u{1}b"}));
    assert!(v.iter().any(|m| m.starts_with("S5")), "{v:?}");
    let v = Strict::check_sqs(
        "SendMessage",
        &json!({"QueueUrl": "u", "MessageBody": "b",
        "MessageAttributes": {"AWS.x": {"DataType": "String", "StringValue": "v"}}}),
    );
    assert!(v.iter().any(|m| m.starts_with("S4")), "{v:?}");
    let v = Strict::check_sqs("SendMessage", &json!({"QueueUrl": "u/q.fifo", "MessageBody": "b"}));
    assert!(v.iter().any(|m| m.starts_with("S6")), "{v:?}");
    assert!(
        Strict::check_sqs("SendMessage", &json!({"QueueUrl": "u", "MessageBody": "b", "DelaySeconds": 900})).is_empty()
    );
}

#[test]
fn requests_are_held_to_the_template_role_of_their_function() {
    let strict = Strict::new();
    let ddb = |f: &str, op: &str, req: Value| strict.check_iam(f, Service::DynamoDb, op, &req);
    // The router creates sagas and never changes them.
    assert!(ddb("RouterFunction", "PutItem", json!({"TableName": "p-1-SagasTable"})).is_empty());
    let v = ddb("RouterFunction", "UpdateItem", json!({"TableName": "p-1-SagasTable"}));
    assert!(v.iter().any(|m| m.contains("RouterFunction") && m.contains("dynamodb:UpdateItem")), "{v:?}");
    // Ingest writes events only through its conditional put: a
    // transaction is authorized per action, so its Update on the
    // order table and its Put on the events table are each checked.
    let tx =
        json!({"TransactItems": [{"Put": {"TableName": "p-EventsTable"}}, {"Update": {"TableName": "p-OrderTable"}}]});
    assert!(ddb("IngestFunction", "TransactWriteItems", tx).is_empty());
    let tx =
        json!({"TransactItems": [{"Put": {"TableName": "p-EventsTable"}}, {"Delete": {"TableName": "p-EventsTable"}}]});
    assert_eq!(ddb("IngestFunction", "TransactWriteItems", tx).len(), 1, "the delete is not granted");
    // An index is its own resource.
    assert!(ddb("RequeueFunction", "Query", json!({"TableName": "p-EventsTable", "IndexName": "by_time"})).is_empty());
    assert!(!ddb("DeliveryFunction", "Query", json!({"TableName": "p-EventsTable", "IndexName": "by_time"})).is_empty());
    // SQS: a batch is authorized as its single action, on its queue.
    let send = |f: &str, q: &str| {
        strict.check_iam(
            f,
            Service::Sqs,
            "SendMessageBatch",
            &json!({"QueueUrl": format!("http://h/123456789012/p-{q}")}),
        )
    };
    assert!(send("SagaFunction", "DeliveriesQueue").is_empty());
    assert!(!send("RouterFunction", "DeliveriesQueue").is_empty(), "the router queues no job");
    // Streams: an iterator is traced back to its stream.
    let arn = "arn:aws:dynamodb:us-east-1:123456789012:table/p-EventsTable/stream/2026";
    let it = json!({"StreamArn": arn});
    assert!(strict.check_iam("RouterFunction", Service::Streams, "GetShardIterator", &it).is_empty());
    strict.note_iterators("GetShardIterator", &it, &json!({"ShardIterator": "it-1"}));
    let read = json!({"ShardIterator": "it-1"});
    assert!(strict.check_iam("RouterFunction", Service::Streams, "GetRecords", &read).is_empty());
    assert!(!strict.check_iam("DeliveryFunction", Service::Streams, "GetRecords", &read).is_empty());
    assert!(!strict
        .check_iam("RouterFunction", Service::Streams, "GetRecords", &json!({"ShardIterator": "?"}))
        .is_empty());
    assert_eq!(strict.iam_checked(), 12);
}

#[test]
fn kms_sizes_and_unnamed_keys_are_refused() {
    let b64 = |n: usize| base64_of(n);
    let key = "arn:aws:kms:us-east-1:123456789012:key/k";
    assert!(Strict::check_kms("Encrypt", &json!({"KeyId": key, "Plaintext": b64(32)})).is_empty());
    let v = Strict::check_kms("Encrypt", &json!({"KeyId": key, "Plaintext": b64(4097)}));
    assert!(v.iter().any(|m| m.starts_with("K1 Encrypt of 4097")), "{v:?}");
    assert!(Strict::check_kms("Decrypt", &json!({"KeyId": key, "CiphertextBlob": b64(184)})).is_empty());
    let v = Strict::check_kms("Decrypt", &json!({"KeyId": key, "CiphertextBlob": b64(6145)}));
    assert!(v.iter().any(|m| m.starts_with("K1 Decrypt")), "{v:?}");
    let v = Strict::check_kms("Decrypt", &json!({"CiphertextBlob": b64(184)}));
    assert!(v.iter().any(|m| m.starts_with("K2 Decrypt without KeyId")), "{v:?}");
    let v = Strict::check_kms("GenerateDataKey", &json!({"KeyId": key, "NumberOfBytes": 2048}));
    assert!(v.iter().any(|m| m.starts_with("K1 GenerateDataKey")), "{v:?}");
    assert!(Strict::check_kms("GenerateDataKey", &json!({"KeyId": key, "KeySpec": "AES_256"})).is_empty());
}

#[test]
fn kms_requests_are_authorized_on_the_key_they_name() {
    crate::iam::register_kms_key("arn:aws:kms:us-east-1:123456789012:key/unit-test-key", "DataKmsKey");
    let roles = Roles::from_template();
    let strict = Strict::new();
    let named = json!({"KeyId": "arn:aws:kms:us-east-1:123456789012:key/unit-test-key"});
    for f in ["ApiFunction", "DeliveryFunction", "IngestFunction", "ReconcilerFunction"] {
        assert!(strict.check_iam(f, Service::Kms, "Decrypt", &named).is_empty(), "{f}");
        assert!(strict.check_iam(f, Service::Kms, "Encrypt", &named).is_empty(), "{f}");
        let v = strict.check_iam(f, Service::Kms, "ScheduleKeyDeletion", &named);
        assert!(!v.is_empty(), "{f} may not delete the key");
    }
    let other = json!({"KeyId": "arn:aws:kms:us-east-1:123456789012:key/another"});
    assert!(!strict.check_iam("ApiFunction", Service::Kms, "Decrypt", &other).is_empty(), "another key");
    assert!(roles.denies("ApiFunction", "kms:Decrypt", "DataKmsKey").is_none());
    assert_eq!(
        crate::iam::kms_needs("ReEncrypt", &json!({"SourceKeyId": "unit-test-key", "DestinationKeyId": "x"})),
        vec![
            ("kms:ReEncryptFrom".to_string(), "DataKmsKey".to_string()),
            ("kms:ReEncryptTo".to_string(), "(KMS key x)".to_string())
        ]
    );
}

/// Base64 of `n` zero bytes, as the JSON protocol sends a blob.
fn base64_of(n: usize) -> String {
    let tail = match n % 3 {
        1 => "AA==",
        2 => "AAA=",
        _ => "",
    };
    format!("{}{tail}", "AAAA".repeat(n / 3))
}

/// A page's key condition and start key are held to the key limits: moto
/// takes a sort key bound or an `ExclusiveStartKey` of any length.
#[test]
fn key_condition_values_and_start_keys_fit_the_key_limits() {
    let q = |after: String, start: Option<Value>| {
        let mut q = json!({"TableName": "p-EventTypesTable", "KeyConditionExpression": "#s = :s AND #t > :a",
                           "ExpressionAttributeNames": {"#s": "scope", "#t": "event_type"},
                           "ExpressionAttributeValues": {":s": {"S": "a"}, ":a": {"S": after}}, "Limit": 3});
        if let Some(k) = start {
            q["ExclusiveStartKey"] = k;
        }
        ddb("Query", q)
    };
    assert!(q("order.created".into(), None).is_empty());
    let v = q("x".repeat(1025), None);
    assert!(v.iter().any(|m| m.starts_with("D4") && m.contains("sort key event_type")), "{v:?}");
    let v = q("x".into(), Some(json!({"scope": {"S": "s".repeat(2049)}, "event_type": {"S": "t"}})));
    assert!(v.iter().any(|m| m.starts_with("D4 partition key scope")), "{v:?}");
    let v = ddb(
        "Query",
        json!({"TableName": "p-AuditTable", "IndexName": "by_actor", "KeyConditionExpression": "#k = :k AND begins_with(#p, :p)",
               "ExpressionAttributeNames": {"#k": "actor", "#p": "pos"},
               "ExpressionAttributeValues": {":k": {"S": "a"}, ":p": {"S": "p".repeat(1025)}}}),
    );
    assert!(v.iter().any(|m| m.contains("sort key pos")), "{v:?}");
}
