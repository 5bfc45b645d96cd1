//! The compatibility rule of a major version: a registered schema may
//! change only by adding optional properties (at any depth). Everything
//! else (a property removed, one made required or no longer required, a
//! type, bound, enum, format, `items` or `additionalProperties` changed) is
//! a breaking change, which needs a new major version (`<name>.v<N+1>`):
//! consumers of the version rely on what it promised, and producers on what
//! it accepted.

use super::schema::{Additional, Schema};

/// At most this many changes are reported.
pub const MAX_CHANGES: usize = 10;

/// The breaking changes from `old` to `new`, each naming where
/// (`property \`amount\` removed`, `\`lines[].sku\` became required`,
/// `type of \`amount\` changed`); empty when `new` only adds optional
/// properties (or is the same).
pub fn breaking_changes(old: &Schema, new: &Schema) -> Vec<String> {
    let mut out = Vec::new();
    diff(old, new, "", &mut out);
    out.truncate(MAX_CHANGES);
    out
}

/// How a place is named: its path, or `the root` for the schema itself.
fn place(path: &str) -> String {
    if path.is_empty() {
        "the root".to_string()
    } else {
        format!("`{path}`")
    }
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn diff(old: &Schema, new: &Schema, path: &str, out: &mut Vec<String>) {
    if out.len() >= MAX_CHANGES {
        return;
    }
    let at = place(path);
    if old.types != new.types {
        let show = |s: &Schema| match s.types.is_empty() {
            true => "any".to_string(),
            false => s.types.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(" or "),
        };
        out.push(format!("type of {at} changed from {} to {}", show(old), show(new)));
    }
    for (name, o) in &old.properties {
        match new.properties.get(name) {
            Some(n) => diff(o, n, &child(path, name), out),
            None => out.push(format!("property `{}` removed", child(path, name))),
        }
    }
    for r in new.required.iter().filter(|r| !old.required.contains(r)) {
        out.push(format!("`{}` became required", child(path, r)));
    }
    for r in old.required.iter().filter(|r| !new.required.contains(r)) {
        out.push(format!("`{}` is no longer required", child(path, r)));
    }
    match (&old.additional, &new.additional) {
        (Some(Additional::Schema(o)), Some(Additional::Schema(n))) => diff(o, n, &child(path, "*"), out),
        (o, n) if additional(o) != additional(n) => out.push(format!("additionalProperties of {at} changed")),
        _ => {}
    }
    match (&old.items, &new.items) {
        (Some(o), Some(n)) => diff(o, n, &format!("{path}[]"), out),
        (None, None) => {}
        _ => out.push(format!("items of {at} changed")),
    }
    let mut keyword = |changed: bool, k: &str| {
        if changed {
            out.push(format!("`{k}` of {at} changed"));
        }
    };
    keyword(old.enumeration != new.enumeration, "enum");
    keyword(old.constant != new.constant, "const");
    for (i, k) in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"].iter().enumerate() {
        keyword(old.bounds[i] != new.bounds[i], k);
    }
    keyword(old.lengths[0] != new.lengths[0], "minLength");
    keyword(old.lengths[1] != new.lengths[1], "maxLength");
    keyword(old.item_counts[0] != new.item_counts[0], "minItems");
    keyword(old.item_counts[1] != new.item_counts[1], "maxItems");
    keyword(old.format != new.format, "format");
}

/// `additionalProperties` without its schema: absent and `true` are the same.
fn additional(a: &Option<Additional>) -> u8 {
    match a {
        None | Some(Additional::Any) => 0,
        Some(Additional::None) => 1,
        Some(Additional::Schema(_)) => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn changes(old: Value, new: Value) -> Vec<String> {
        breaking_changes(&Schema::parse(&old, "schema").unwrap(), &Schema::parse(&new, "schema").unwrap())
    }

    fn base() -> Value {
        json!({"type": "object", "required": ["id"], "additionalProperties": false,
            "properties": {"id": {"type": "string"}, "x": {"type": "integer"},
                "lines": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}}}})
    }

    #[test]
    fn adding_optional_properties_at_any_depth_is_compatible() {
        assert!(changes(base(), base()).is_empty());
        let mut v = base();
        v["properties"]["note"] = json!({"type": "string"});
        v["properties"]["lines"]["items"]["properties"]["qty"] = json!({"type": "integer", "minimum": 1});
        v["description"] = json!("annotations may change");
        assert!(changes(base(), v).is_empty());
    }

    #[test]
    fn every_other_change_is_named() {
        let mut v = base();
        v["properties"].as_object_mut().unwrap().remove("x");
        assert_eq!(changes(base(), v), ["property `x` removed"]);
        let mut v = base();
        v["required"] = json!(["id", "x"]);
        assert_eq!(changes(base(), v), ["`x` became required"]);
        let mut v = base();
        v["properties"]["x"]["type"] = json!("string");
        assert_eq!(changes(base(), v), ["type of `x` changed from integer to string"]);
        let mut v = base();
        v["properties"]["lines"]["items"]["required"] = json!(["sku"]);
        v["required"] = json!([]);
        assert_eq!(changes(base(), v), ["`lines[].sku` became required", "`id` is no longer required"]);
        let mut v = base();
        v["additionalProperties"] = json!(true);
        v["properties"]["id"]["maxLength"] = json!(5);
        assert_eq!(changes(base(), v), ["`maxLength` of `id` changed", "additionalProperties of the root changed"]);
        let mut v = base();
        v["properties"]["x"]["enum"] = json!([1, 2]);
        v["properties"]["lines"].as_object_mut().unwrap().remove("items");
        assert_eq!(changes(base(), v), ["items of `lines` changed", "`enum` of `x` changed"]);
    }
}
