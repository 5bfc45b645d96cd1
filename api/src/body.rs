//! Request bodies: JSON into typed structs (`deny_unknown_fields`), with an
//! error that names the field by its path, and [`Patch`] for fields a PATCH
//! may leave alone, clear, or set.

use super::error::ErrorCode;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use shared::envelope::show;

/// A field of a PATCH body: absent, `null` or a value; the wire crate's,
/// so clients serialize what the API reads.
pub use hookline_wire::Patch;

/// Parses a JSON body into `T`. An empty body is `{}` when `empty_ok`.
/// Errors: malformed JSON → 400 `malformed_json` (line and column); not an
/// object → 400 `not_an_object`; an unknown field → 400 `unknown_field`; a
/// missing one → 400 `missing_field`; a wrong type → 400 `invalid_type`,
/// each naming the field by its path.
pub fn parse<T: DeserializeOwned>(body: &[u8], empty_ok: bool) -> Result<T, ApiError> {
    let body: &[u8] = if empty_ok && body.iter().all(u8::is_ascii_whitespace) { b"{}" } else { body };
    let malformed = |e: serde_json::Error| {
        ApiError::new(
            ErrorCode::MalformedJson,
            format!("malformed JSON at line {}, column {}: {e}", e.line(), e.column()),
        )
    };
    // A struct also deserializes from a JSON array: only objects are bodies.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        serde_json::from_slice::<serde::de::IgnoredAny>(body).map_err(malformed)?;
        return Err(ApiError::new(ErrorCode::NotAnObject, "the request body must be a JSON object"));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed: Result<T, _> = serde_path_to_error::deserialize(&mut de);
    if parsed.is_ok() {
        de.end().map_err(malformed)?;
    }
    parsed.map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let text = inner.to_string();
        let in_field =
            |name: &str| if path == "." || path.is_empty() { name.to_string() } else { format!("{path}.{name}") };
        if inner.is_syntax() || inner.is_eof() {
            return malformed(inner);
        }
        if let Some(name) = quoted(&text, "missing field `") {
            let field = in_field(&name);
            return ApiError::new(ErrorCode::MissingField, format!("missing required field `{field}`")).on(field);
        }
        if let Some(name) = quoted(&text, "unknown field `") {
            // The path already ends at the unknown field.
            let field =
                if path == name || path.ends_with(&format!(".{name}")) { path.clone() } else { in_field(&name) };
            let known = text.split_once(", expected ").map(|(_, k)| format!("; expected {k}")).unwrap_or_default();
            let known = known.split(" at line ").next().unwrap_or_default().to_string();
            return ApiError::new(ErrorCode::UnknownField, format!("unknown field {}{known}", show(&field))).on(field);
        }
        if path == "." || path.is_empty() {
            return ApiError::new(ErrorCode::NotAnObject, "the request body must be a JSON object");
        }
        // Read, but not as the field's type (a string for a number, a name
        // that is none of an enum's): could not be parsed.
        let message = text.split(" at line ").next().unwrap_or(&text).to_string();
        ApiError::unreadable(path, message)
    })
}

/// The text between `prefix` and the next backtick.
fn quoted(text: &str, prefix: &str) -> Option<String> {
    let rest = text.strip_prefix(prefix)?;
    rest.split_once('`').map(|(name, _)| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        n: u32,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Body {
        name: String,
        #[serde(default)]
        note: Patch<String>,
        #[serde(default)]
        inner: Option<Inner>,
        #[serde(default)]
        tags: Vec<String>,
    }

    fn err(body: &str) -> ApiError {
        parse::<Body>(body.as_bytes(), false).unwrap_err()
    }

    #[test]
    fn patch_tells_absent_null_and_value_apart() {
        let b: Body = parse(br#"{"name": "a"}"#, false).unwrap();
        assert_eq!(b.note, Patch::Absent);
        let b: Body = parse(br#"{"name": "a", "note": null}"#, false).unwrap();
        assert_eq!(b.note, Patch::Null);
        let b: Body = parse(br#"{"name": "a", "note": "x"}"#, false).unwrap();
        assert_eq!(b.note, Patch::Value("x".into()));
        assert_eq!(Patch::Absent.apply(1, || 0), 1);
        assert_eq!(Patch::Null.apply(1, || 0), 0);
        assert_eq!(Patch::Value(2).apply(1, || 0), 2);
    }

    #[test]
    fn errors_name_the_field_by_its_path() {
        let e = err(r#"{"name": "a", "inner": {"n": "x"}}"#);
        assert_eq!((e.status(), e.code.as_str(), e.field.as_deref()), (400, "invalid_type", Some("inner.n")), "{e:?}");
        let e = err(r#"{"name": "a", "tags": ["ok", 3]}"#);
        assert_eq!((e.code.as_str(), e.field.as_deref()), ("invalid_type", Some("tags[1]")), "{e:?}");
        let e = err(r#"{"name": "a", "inner": {"n": 1, "m": 2}}"#);
        assert_eq!((e.code.as_str(), e.field.as_deref()), ("unknown_field", Some("inner.m")), "{e:?}");
        let e = err(r#"{"nam": "a"}"#);
        assert_eq!((e.code.as_str(), e.field.as_deref()), ("unknown_field", Some("nam")), "{e:?}");
        let e = err(r#"{"note": "a"}"#);
        assert_eq!(
            (e.code.as_str(), e.field.as_deref(), e.message.as_str()),
            ("missing_field", Some("name"), "missing required field `name`")
        );
        let e = err(r#"{"name": "a""#);
        assert_eq!(e.code, ErrorCode::MalformedJson);
        assert!(e.message.contains("line 1"), "{e:?}");
        let e = err(r#"[1]"#);
        assert_eq!(e.code, ErrorCode::NotAnObject);
        let e = err(r#"{"name": "a"} x"#);
        assert_eq!(e.code, ErrorCode::MalformedJson, "trailing characters: {e:?}");
    }

    #[test]
    fn an_empty_body_is_an_empty_object_where_allowed() {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Optional {
            #[serde(default)]
            reason: Option<String>,
        }
        assert_eq!(parse::<Optional>(b"  ", true).unwrap().reason, None);
        assert_eq!(parse::<Optional>(b"  ", false).unwrap_err().code, ErrorCode::MalformedJson);
        assert_eq!(parse::<Body>(b"", true).unwrap_err().code, ErrorCode::MissingField);
    }
}
