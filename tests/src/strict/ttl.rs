//! D10: a write of a table's TTL attribute (the template's
//! `TimeToLiveSpecification`) whose value TTL would ignore. DynamoDB
//! accepts the write but "TTL compares the current time in epoch time
//! format to the time stored in the TTL attribute": a value that is not a
//! Number, or one in milliseconds (read as seconds, it lies thousands of
//! years ahead), never expires, so the item is kept for ever. The emulator
//! runs no TTL at all, so no other test would notice. DynamoDB Developer
//! Guide, "Time to Live (TTL)" › "Formatting an item's TTL attribute"; API
//! reference, UpdateTimeToLive.
//!
//! Checked: `PutItem`'s `Item` (and a `TransactWriteItems` `Put`), and an
//! `UpdateItem`'s (or `Update`'s) `SET <ttl> = :value`.

use serde_json::Value;

use crate::metering::TableSchema;

/// The largest value read as epoch seconds (the year 5138); today's time in
/// milliseconds is about 1.7 × 10^12.
const MAX_EPOCH_SECONDS: f64 = 1e11;

/// What is wrong with `v` as a TTL value, if anything.
fn bad_value(v: &Value) -> Option<String> {
    let Some(n) = v["N"].as_str() else {
        return Some(format!("{v} is not a Number"));
    };
    match n.parse::<f64>() {
        Ok(x) if (0.0..MAX_EPOCH_SECONDS).contains(&x) => None,
        Ok(x) => Some(format!("{x} is not epoch seconds (milliseconds, or negative)")),
        Err(_) => Some(format!("{n} is not a number")),
    }
}

/// The values an `UpdateExpression`'s `SET` clause assigns to `attr` (a
/// name, or a `#placeholder` for it): each `:value` placeholder's value.
fn set_values<'a>(req: &'a Value, attr: &str) -> Vec<&'a Value> {
    let expr = req["UpdateExpression"].as_str().unwrap_or("");
    let names = &req["ExpressionAttributeNames"];
    let values = &req["ExpressionAttributeValues"];
    // The SET clause: from `SET` to the next clause keyword.
    let upper = expr.to_uppercase();
    let Some(start) = upper.find("SET ") else { return Vec::new() };
    let rest = &expr[start + 4..];
    let end =
        ["REMOVE ", "ADD ", "DELETE "].iter().filter_map(|k| rest.to_uppercase().find(k)).min().unwrap_or(rest.len());
    rest[..end]
        .split(',')
        .filter_map(|action| action.split_once('='))
        .filter(|(path, _)| {
            let path = path.trim();
            path == attr || names[path].as_str() == Some(attr)
        })
        .filter_map(|(_, value)| {
            let value = value.trim();
            value.starts_with(':').then(|| &values[value])
        })
        .collect()
}

/// D10 for one write (`PutItem`/`UpdateItem` or a transaction's action) on
/// `table`.
pub(super) fn check(schema: Option<&TableSchema>, table: &str, req: &Value, out: &mut Vec<String>) {
    let Some(attr) = schema.and_then(|s| s.ttl.as_deref()) else { return };
    let mut values: Vec<&Value> = set_values(req, attr);
    if let Some(v) = req["Item"].get(attr) {
        values.push(v);
    }
    for v in values {
        if let Some(why) = bad_value(v) {
            out.push(format!("D10 {table}'s TTL attribute {attr} written as {why}: TTL would never delete the item"));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::strict::Strict;
    use serde_json::json;

    #[test]
    fn ttl_attributes_must_be_numbers_of_epoch_seconds() {
        let s = Strict::new();
        let put = |exp: serde_json::Value| {
            s.check_dynamodb(
                "PutItem",
                &json!({"TableName": "p-IdempotencyTable", "Item": {"id": {"S": "i"}, "expires_at": exp}}),
            )
        };
        assert!(put(json!({"N": "1790000000"})).is_empty());
        let v = put(json!({"S": "1790000000"}));
        assert!(v.iter().any(|m| m.starts_with("D10") && m.contains("not a Number")), "{v:?}");
        let v = put(json!({"N": "1790000000000"}));
        assert!(v.iter().any(|m| m.starts_with("D10") && m.contains("not epoch seconds")), "{v:?}");
        let update = |exp: serde_json::Value| {
            s.check_dynamodb(
                "UpdateItem",
                &json!({"TableName": "p-StatsTable", "Key": {"series": {"S": "m#system"}, "at": {"N": "60"}},
                        "UpdateExpression": "SET #exp = :exp ADD #s :s",
                        "ExpressionAttributeNames": {"#exp": "expires_at", "#s": "s"},
                        "ExpressionAttributeValues": {":exp": exp, ":s": {"N": "1"}}}),
            )
        };
        assert!(update(json!({"N": "1790000000"})).is_empty(), "{:?}", update(json!({"N": "1790000000"})));
        let v = update(json!({"N": "1790000000000"}));
        assert!(v.iter().any(|m| m.starts_with("D10") && m.contains("StatsTable")), "{v:?}");
        let no_ttl = s.check_dynamodb(
            "PutItem",
            &json!({"TableName": "p-SubscriptionsTable",
            "Item": {"id": {"S": "s"}, "expires_at": {"S": "whatever"}}}),
        );
        assert!(no_ttl.iter().all(|m| !m.starts_with("D10")), "no TTL on that table: {no_ttl:?}");
    }
}
