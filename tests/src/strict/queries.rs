//! The strict checker's rules on `Query` requests (D4 on key-condition
//! values, D8, D9): see the rule list in [`super`].

use serde_json::Value;

use super::{attribute_names, Strict, MAX_PARTITION_KEY, MAX_SORT_KEY};
use crate::metering::{value_size, Projection};

impl Strict {
    /// D8 on a `Query` of index `index` of `table`.
    pub(super) fn index_query(&self, table: &str, index: &str, req: &Value, out: &mut Vec<String>) {
        let Some(schema) = self.schema(table) else { return };
        let Some(ix) = schema.indexes.iter().find(|i| i.name == index) else {
            out.push(format!("D8 Query of {table} names index {index}, which the template does not declare"));
            return;
        };
        let projected = |a: &str| {
            ix.key.iter().chain(&schema.key).any(|k| k == a)
                || match &ix.projection {
                    Projection::All => true,
                    Projection::KeysOnly => false,
                    Projection::Include(attrs) => attrs.iter().any(|k| k == a),
                }
        };
        let names = |field: &str| attribute_names(req[field].as_str().unwrap_or(""), &req["ExpressionAttributeNames"]);
        for a in names("KeyConditionExpression") {
            if !ix.key.contains(&a) {
                out.push(format!("D8 KeyConditionExpression on index {index} of {table} names {a}, not a key of it"));
            }
        }
        for a in names("FilterExpression") {
            if ix.key.contains(&a) {
                out.push(format!("D8 FilterExpression on index {index} of {table} names its key {a}"));
            } else if !projected(&a) {
                out.push(format!(
                    "D8 FilterExpression on index {index} of {table} names {a}, which it does not project"
                ));
            }
        }
        for a in names("ProjectionExpression") {
            if !projected(&a) {
                out.push(format!(
                    "D8 ProjectionExpression on index {index} of {table} names {a}, which it does not project"
                ));
            }
        }
    }

    /// D9 on a `Query`: the key condition on the queried key's
    /// attributes only (and `BETWEEN` bounds in order), the filter on none.
    pub(super) fn query_keys(&self, table: &str, req: &Value, out: &mut Vec<String>) {
        let Some(key) = self.queried_key(table, req) else { return };
        let attributes = |expr: &str| attribute_names(expr, &req["ExpressionAttributeNames"]);
        if let Some(kc) = req["KeyConditionExpression"].as_str() {
            for a in attributes(kc) {
                if !key.contains(&a) {
                    out.push(format!("D9 Query on {table}: the key condition names {a}, not a key of what is queried"));
                }
            }
            let words: Vec<&str> = kc.split_whitespace().collect();
            for w in
                words.windows(4).filter(|w| w[0].eq_ignore_ascii_case("BETWEEN") && w[2].eq_ignore_ascii_case("AND"))
            {
                let value = |p: &str| req["ExpressionAttributeValues"][p.trim_end_matches(')')].clone();
                let (lo, hi) = (value(w[1]), value(w[3]));
                let out_of_order = match (lo["S"].as_str(), hi["S"].as_str(), lo["N"].as_str(), hi["N"].as_str()) {
                    (Some(a), Some(b), _, _) => a > b,
                    (_, _, Some(a), Some(b)) => a.parse::<f64>().ok() > b.parse::<f64>().ok(),
                    _ => false,
                };
                if out_of_order {
                    out.push(format!("D9 Query on {table}: BETWEEN {lo} AND {hi} has its lower bound above its upper"));
                }
            }
        }
        if let Some(f) = req["FilterExpression"].as_str() {
            for a in attributes(f) {
                if key.contains(&a) {
                    out.push(format!("D9 Query on {table}: the filter names the key attribute {a}"));
                }
            }
        }
    }

    /// D4 on the values a `Query`'s key condition compares with a key
    /// attribute: each placeholder is taken as compared with the key
    /// attribute named last before it (`#s = :s AND #t BETWEEN :lo AND
    /// :hi`, `begins_with(#t, :p)`).
    pub(super) fn key_condition_sizes(&self, table: &str, req: &Value, out: &mut Vec<String>) {
        let Some(key) = self.queried_key(table, req) else { return };
        let Some(kc) = req["KeyConditionExpression"].as_str() else { return };
        let names = &req["ExpressionAttributeNames"];
        let mut attribute: Option<usize> = None;
        for token in kc.split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ',')).filter(|t| !t.is_empty()) {
            if let Some(p) = token.strip_prefix(':') {
                let Some(i) = attribute else { continue };
                let size = value_size(&req["ExpressionAttributeValues"][format!(":{p}")]);
                let (limit, what) = if i == 0 { (MAX_PARTITION_KEY, "partition") } else { (MAX_SORT_KEY, "sort") };
                if size == 0 || size > limit {
                    out.push(format!(
                        "D4 Query on {table}: the {what} key {} is compared with a value of {size} bytes (1 to {limit})",
                        key[i]
                    ));
                }
            } else {
                let name = if token.starts_with('#') { names[token].as_str().unwrap_or(token) } else { token };
                if let Some(i) = key.iter().position(|k| k == name) {
                    attribute = Some(i);
                }
            }
        }
    }

    /// The key a `Query` of `table` reads by: the table's, or its named
    /// index's (`None` for a table or index the template does not declare:
    /// D8 reports those).
    fn queried_key(&self, table: &str, req: &Value) -> Option<&[String]> {
        let schema = self.schema(table)?;
        match req["IndexName"].as_str() {
            None => Some(&schema.key),
            Some(ix) => schema.indexes.iter().find(|i| i.name == ix).map(|i| i.key.as_slice()),
        }
    }
}
