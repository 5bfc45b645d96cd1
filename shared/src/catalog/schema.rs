//! A lean JSON Schema validator of a documented subset (docs/formats.md#event-catalog):
//! the keywords [`SUPPORTED`] and the annotations [`ANNOTATIONS`], nothing
//! else. A schema using any other keyword (`$ref`, `oneOf`, `pattern`, …)
//! is refused when it is registered ([`Schema::parse`] names it), so what
//! is registered is exactly what is checked: no keyword is ever silently
//! ignored. Pure and small on purpose: the `jsonschema` crate would more
//! than double a Lambda bootstrap.

use std::collections::BTreeMap;

use serde_json::Value;

/// The validating keywords understood.
pub const SUPPORTED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "format",
];

/// Keywords accepted and ignored: they describe, they do not constrain.
pub const ANNOTATIONS: &[&str] = &["$schema", "$id", "$comment", "title", "description", "examples", "default"];

/// The `format` values checked.
pub const FORMATS: &[&str] = &["date-time", "date", "uuid", "email", "uri"];

/// How deep a schema may nest (properties and items), so checking one is
/// bounded.
pub const MAX_DEPTH: usize = 32;

/// At most this many violations are reported for one event.
pub const MAX_VIOLATIONS: usize = 10;

/// A JSON type as `type` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum JsonType {
    /// `null`.
    Null,
    /// `boolean`.
    Boolean,
    /// `integer`: a number without a fractional part.
    Integer,
    /// `number`.
    Number,
    /// `string`.
    String,
    /// `array`.
    Array,
    /// `object`.
    Object,
}

impl JsonType {
    /// The keyword's spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            JsonType::Null => "null",
            JsonType::Boolean => "boolean",
            JsonType::Integer => "integer",
            JsonType::Number => "number",
            JsonType::String => "string",
            JsonType::Array => "array",
            JsonType::Object => "object",
        }
    }

    fn parse(s: &str) -> Option<JsonType> {
        [
            JsonType::Null,
            JsonType::Boolean,
            JsonType::Integer,
            JsonType::Number,
            JsonType::String,
            JsonType::Array,
            JsonType::Object,
        ]
        .into_iter()
        .find(|t| t.as_str() == s)
    }

    /// Whether `v` is of this type (an integer is also a number).
    fn holds(&self, v: &Value) -> bool {
        match self {
            JsonType::Null => v.is_null(),
            JsonType::Boolean => v.is_boolean(),
            JsonType::Integer => v.as_f64().is_some_and(|f| f.fract() == 0.0),
            JsonType::Number => v.is_number(),
            JsonType::String => v.is_string(),
            JsonType::Array => v.is_array(),
            JsonType::Object => v.is_object(),
        }
    }
}

/// The JSON type of a value, as a message names it.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// What an object allows besides its `properties`.
#[derive(Debug, Clone, PartialEq)]
pub enum Additional {
    /// Anything (absent or `true`).
    Any,
    /// Nothing (`false`).
    None,
    /// Values of this schema.
    Schema(Box<Schema>),
}

/// A parsed schema of the subset ([`SUPPORTED`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Schema {
    /// `type`: one type or several; empty = any.
    pub types: Vec<JsonType>,
    /// `properties`, by name.
    pub properties: BTreeMap<String, Schema>,
    /// `required`, sorted.
    pub required: Vec<String>,
    /// `additionalProperties`; `None` when absent (anything).
    pub additional: Option<Additional>,
    /// `items`: the schema of every element.
    pub items: Option<Box<Schema>>,
    /// `enum`.
    pub enumeration: Option<Vec<Value>>,
    /// `const`.
    pub constant: Option<Value>,
    /// `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`.
    pub bounds: [Option<f64>; 4],
    /// `minLength`, `maxLength` (in characters).
    pub lengths: [Option<u64>; 2],
    /// `minItems`, `maxItems`.
    pub item_counts: [Option<u64>; 2],
    /// `format` ([`FORMATS`]).
    pub format: Option<String>,
}

/// Why a schema was refused at registration: `path` is where in the schema
/// (`schema.properties.amount.type`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{path}`: {message}")]
pub struct SchemaError {
    /// Where in the schema, from `schema`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

fn bad(path: &str, message: impl Into<String>) -> SchemaError {
    SchemaError { path: path.to_string(), message: message.into() }
}

fn count(v: &Value, path: &str) -> Result<u64, SchemaError> {
    v.as_u64().ok_or_else(|| bad(path, "expected a non-negative integer"))
}

fn number(v: &Value, path: &str) -> Result<f64, SchemaError> {
    v.as_f64().ok_or_else(|| bad(path, "expected a number"))
}

impl Schema {
    /// Reads `v` as a schema of the subset; `path` names it in errors
    /// (`schema`). `true` or `{}` accepts anything.
    ///
    /// # Errors
    ///
    /// The first problem, naming its place: an unsupported keyword (by
    /// name, with the supported ones), a keyword of the wrong shape, an
    /// unknown type or format, or nesting past [`MAX_DEPTH`].
    pub fn parse(v: &Value, path: &str) -> Result<Schema, SchemaError> {
        Self::parse_at(v, path, 0)
    }

    fn parse_at(v: &Value, path: &str, depth: usize) -> Result<Schema, SchemaError> {
        if depth > MAX_DEPTH {
            return Err(bad(path, format!("nested deeper than {MAX_DEPTH} levels")));
        }
        let obj = match v {
            Value::Bool(true) => return Ok(Schema::default()),
            Value::Object(o) => o,
            _ => return Err(bad(path, "expected a schema object (or `true`)")),
        };
        let mut s = Schema::default();
        for (k, val) in obj {
            let at = format!("{path}.{k}");
            match k.as_str() {
                "type" => s.types = parse_types(val, &at)?,
                "properties" => {
                    let props = val.as_object().ok_or_else(|| bad(&at, "expected an object of schemas"))?;
                    for (name, p) in props {
                        s.properties.insert(name.clone(), Self::parse_at(p, &format!("{at}.{name}"), depth + 1)?);
                    }
                }
                "required" => {
                    let names = val.as_array().ok_or_else(|| bad(&at, "expected an array of property names"))?;
                    for n in names {
                        let n = n.as_str().ok_or_else(|| bad(&at, "expected an array of property names"))?;
                        s.required.push(n.to_string());
                    }
                    s.required.sort();
                    s.required.dedup();
                }
                "additionalProperties" => {
                    s.additional = Some(match val {
                        Value::Bool(true) => Additional::Any,
                        Value::Bool(false) => Additional::None,
                        other => Additional::Schema(Box::new(Self::parse_at(other, &at, depth + 1)?)),
                    })
                }
                "items" => s.items = Some(Box::new(Self::parse_at(val, &at, depth + 1)?)),
                "enum" => {
                    let vals = val.as_array().filter(|a| !a.is_empty());
                    s.enumeration = Some(vals.ok_or_else(|| bad(&at, "expected a non-empty array"))?.clone());
                }
                "const" => s.constant = Some(val.clone()),
                "minimum" => s.bounds[0] = Some(number(val, &at)?),
                "maximum" => s.bounds[1] = Some(number(val, &at)?),
                "exclusiveMinimum" => s.bounds[2] = Some(number(val, &at)?),
                "exclusiveMaximum" => s.bounds[3] = Some(number(val, &at)?),
                "minLength" => s.lengths[0] = Some(count(val, &at)?),
                "maxLength" => s.lengths[1] = Some(count(val, &at)?),
                "minItems" => s.item_counts[0] = Some(count(val, &at)?),
                "maxItems" => s.item_counts[1] = Some(count(val, &at)?),
                "format" => {
                    let f = val.as_str().filter(|f| FORMATS.contains(f));
                    let f = f.ok_or_else(|| bad(&at, format!("expected one of the formats {}", FORMATS.join(", "))))?;
                    s.format = Some(f.to_string());
                }
                a if ANNOTATIONS.contains(&a) => {}
                other => {
                    return Err(bad(
                        &at,
                        format!(
                            "keyword `{other}` is not supported; supported: {} (and the annotations {})",
                            SUPPORTED.join(", "),
                            ANNOTATIONS.join(", ")
                        ),
                    ))
                }
            }
        }
        Ok(s)
    }

    /// Checks `v` (found at `path`, e.g. `data`) against the schema: every
    /// violation up to [`MAX_VIOLATIONS`], each naming its JSON path
    /// (`data.amount`, `data.items[2].sku`) and what was expected.
    pub fn validate(&self, v: &Value, path: &str) -> Vec<Violation> {
        let mut out = Vec::new();
        self.check(v, path, &mut out);
        out
    }

    fn check(&self, v: &Value, path: &str, out: &mut Vec<Violation>) {
        if out.len() >= MAX_VIOLATIONS {
            return;
        }
        let mut fail = |m: String| out.push(Violation { path: path.to_string(), message: m });
        if !self.types.is_empty() && !self.types.iter().any(|t| t.holds(v)) {
            let want: Vec<&str> = self.types.iter().map(|t| t.as_str()).collect();
            return fail(format!("expected {}, got {}", want.join(" or "), kind(v)));
        }
        if let Some(c) = &self.constant {
            if c != v {
                fail(format!("expected the constant {c}"));
            }
        }
        if let Some(e) = &self.enumeration {
            if !e.contains(v) {
                let list: Vec<String> = e.iter().map(|x| x.to_string()).collect();
                fail(format!("expected one of {}", list.join(", ")));
            }
        }
        if let Some(n) = v.as_f64() {
            let [min, max, xmin, xmax] = self.bounds;
            if let Some(m) = min.filter(|m| n < *m) {
                fail(format!("expected at least {m}, got {n}"));
            }
            if let Some(m) = max.filter(|m| n > *m) {
                fail(format!("expected at most {m}, got {n}"));
            }
            if let Some(m) = xmin.filter(|m| n <= *m) {
                fail(format!("expected more than {m}, got {n}"));
            }
            if let Some(m) = xmax.filter(|m| n >= *m) {
                fail(format!("expected less than {m}, got {n}"));
            }
        }
        if let Some(s) = v.as_str() {
            let len = s.chars().count() as u64;
            if let Some(m) = self.lengths[0].filter(|m| len < *m) {
                fail(format!("expected at least {m} characters, got {len}"));
            }
            if let Some(m) = self.lengths[1].filter(|m| len > *m) {
                fail(format!("expected at most {m} characters, got {len}"));
            }
            if let Some(f) = self.format.as_deref().filter(|f| !format_holds(f, s)) {
                fail(format!("expected a {f} string"));
            }
        }
        if let Some(a) = v.as_array() {
            let len = a.len() as u64;
            if let Some(m) = self.item_counts[0].filter(|m| len < *m) {
                fail(format!("expected at least {m} items, got {len}"));
            }
            if let Some(m) = self.item_counts[1].filter(|m| len > *m) {
                fail(format!("expected at most {m} items, got {len}"));
            }
            if let Some(items) = &self.items {
                for (i, x) in a.iter().enumerate() {
                    items.check(x, &format!("{path}[{i}]"), out);
                }
            }
        }
        if let Some(o) = v.as_object() {
            for r in self.required.iter().filter(|r| !o.contains_key(*r)) {
                out.push(Violation { path: join(path, r), message: "required property missing".to_string() });
            }
            for (k, x) in o {
                let at = join(path, k);
                match (self.properties.get(k), &self.additional) {
                    (Some(p), _) => p.check(x, &at, out),
                    (None, Some(Additional::None)) => {
                        out.push(Violation { path: at, message: "property not allowed by the schema".to_string() })
                    }
                    (None, Some(Additional::Schema(s))) => s.check(x, &at, out),
                    (None, _) => {}
                }
            }
        }
        out.truncate(MAX_VIOLATIONS);
    }
}

/// A property's path: `parent.name`, or `parent["odd name"]` when the name
/// is not a plain identifier (as redaction paths write it).
pub fn join(parent: &str, name: &str) -> String {
    let plain = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        format!("{parent}.{name}")
    } else {
        format!("{parent}[{}]", Value::String(name.to_string()))
    }
}

fn parse_types(v: &Value, path: &str) -> Result<Vec<JsonType>, SchemaError> {
    let names: Vec<&Value> = match v {
        Value::Array(a) if !a.is_empty() => a.iter().collect(),
        Value::String(_) => vec![v],
        _ => return Err(bad(path, "expected a type name or a non-empty array of them")),
    };
    let mut out = names
        .into_iter()
        .map(|n| {
            n.as_str().and_then(JsonType::parse).ok_or_else(|| {
                bad(path, format!("unknown type {n}; types: null, boolean, integer, number, string, array, object"))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    out.sort();
    out.dedup();
    Ok(out)
}

/// Whether `s` has the format `f` (one of [`FORMATS`]), checked leniently
/// where the standards are large (`email`: something@something.tld-ish;
/// `uri`: a scheme and a colon).
fn format_holds(f: &str, s: &str) -> bool {
    match f {
        "date-time" => chrono::DateTime::parse_from_rfc3339(s).is_ok(),
        "date" => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok() && s.len() == 10,
        "uuid" => {
            let b = s.as_bytes();
            b.len() == 36
                && b.iter().enumerate().all(|(i, c)| match i {
                    8 | 13 | 18 | 23 => *c == b'-',
                    _ => c.is_ascii_hexdigit(),
                })
        }
        "email" => s
            .split_once('@')
            .is_some_and(|(l, d)| !l.is_empty() && d.contains('.') && !d.starts_with('.') && !d.ends_with('.')),
        "uri" => s.split_once(':').is_some_and(|(scheme, rest)| {
            !rest.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }),
        _ => false,
    }
}

/// One way an event breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The JSON path in the envelope: `data.amount`, `payload.items[0]`.
    pub path: String,
    /// What was expected: `expected number, got string`.
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> Schema {
        Schema::parse(&v, "schema").unwrap()
    }

    fn paths(s: &Schema, v: Value) -> Vec<String> {
        s.validate(&v, "data").into_iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn an_order_schema_names_every_violation_by_path() {
        let s = schema(json!({
            "type": "object",
            "required": ["amount", "currency"],
            "additionalProperties": false,
            "properties": {
                "amount": {"type": "number", "minimum": 0},
                "currency": {"enum": ["EUR", "USD"]},
                "lines": {"type": "array", "maxItems": 2, "items": {"type": "object", "required": ["sku"],
                    "properties": {"sku": {"type": "string", "minLength": 3}}}},
                "at": {"type": "string", "format": "date-time"}
            }
        }));
        assert!(paths(&s, json!({"amount": 3, "currency": "EUR", "lines": [{"sku": "abc"}]})).is_empty());
        assert_eq!(paths(&s, json!({"amount": "3", "currency": "EUR"})), ["data.amount: expected number, got string"]);
        assert_eq!(
            paths(&s, json!({"amount": -1, "lines": [{"sku": "ab"}, {}], "x": 1, "at": "yesterday"})),
            [
                "data.currency: required property missing",
                "data.amount: expected at least 0, got -1",
                "data.at: expected a date-time string",
                "data.lines[0].sku: expected at least 3 characters, got 2",
                "data.lines[1].sku: required property missing",
                "data.x: property not allowed by the schema",
            ]
        );
        assert_eq!(paths(&s, json!([1])), ["data: expected object, got array"]);
        assert_eq!(
            paths(&s, json!({"amount": 1, "currency": "GBP"})),
            [r#"data.currency: expected one of "EUR", "USD""#]
        );
    }

    #[test]
    fn keywords_check_what_they_say() {
        let s = schema(json!({"type": ["integer", "null"], "exclusiveMaximum": 10}));
        assert!(paths(&s, json!(null)).is_empty());
        assert!(paths(&s, json!(9)).is_empty());
        assert_eq!(paths(&s, json!(10)), ["data: expected less than 10, got 10"]);
        assert_eq!(paths(&s, json!(1.5)), ["data: expected null or integer, got number"]);
        let s = schema(json!({"const": "x", "maxLength": 0}));
        assert_eq!(paths(&s, json!("x")), ["data: expected at most 0 characters, got 1"]);
        assert_eq!(paths(&s, json!("y")).len(), 2);
        let s = schema(json!({"additionalProperties": {"type": "boolean"}, "properties": {"a": {}}}));
        assert!(paths(&s, json!({"a": 1, "b": true})).is_empty());
        assert_eq!(paths(&s, json!({"a": 1, "c d": 2})), [r#"data["c d"]: expected boolean, got integer"#]);
        for (f, good, bad) in [
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567"),
            ("email", "a@b.io", "a@b"),
            ("uri", "https://x", "nope"),
            ("date", "2026-11-29", "2026-13-01"),
        ] {
            let s = schema(json!({"format": f}));
            assert!(paths(&s, json!(good)).is_empty(), "{f}");
            assert_eq!(paths(&s, json!(bad)).len(), 1, "{f}");
        }
        assert!(paths(&schema(json!(true)), json!({"anything": [1]})).is_empty());
    }

    #[test]
    fn at_most_ten_violations_are_reported() {
        let s = schema(json!({"items": {"type": "string"}}));
        assert_eq!(s.validate(&json!(vec![1; 50]), "data").len(), MAX_VIOLATIONS);
    }

    #[test]
    fn an_unsupported_or_malformed_keyword_is_refused_by_name_and_place() {
        let e = Schema::parse(&json!({"properties": {"a": {"$ref": "#/x"}}}), "schema").unwrap_err();
        assert_eq!(e.path, "schema.properties.a.$ref");
        assert!(e.message.starts_with("keyword `$ref` is not supported"), "{e}");
        for (v, at) in [
            (json!({"oneOf": []}), "schema.oneOf"),
            (json!({"type": "decimal"}), "schema.type"),
            (json!({"required": "a"}), "schema.required"),
            (json!({"minLength": -1}), "schema.minLength"),
            (json!({"format": "hostname"}), "schema.format"),
            (json!({"enum": []}), "schema.enum"),
            (json!(false), "schema"),
            (json!({"items": 3}), "schema.items"),
        ] {
            assert_eq!(Schema::parse(&v, "schema").unwrap_err().path, at, "{v}");
        }
        let mut deep = json!({});
        for _ in 0..40 {
            deep = json!({"items": deep});
        }
        assert!(Schema::parse(&deep, "schema").unwrap_err().message.contains("nested deeper"));
        assert!(Schema::parse(&json!({"title": "t", "description": "d", "$schema": "x"}), "schema").is_ok());
    }
}
