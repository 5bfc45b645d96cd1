//! The document against the code: the checked-in copy, the route table,
//! the error codes, the examples, the links.

use std::collections::BTreeSet;

use serde_json::Value;

use super::*;

/// The document as JSON, as a client reads it.
fn doc() -> Value {
    serde_json::to_value(document()).expect("serializes")
}

/// docs/openapi.json is what the code generates. With
/// `HOOKLINE_UPDATE_OPENAPI=1` the test writes it instead (`make openapi`).
#[test]
fn the_checked_in_openapi_is_the_generated_one() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json");
    let generated = pretty();
    if std::env::var_os("HOOKLINE_UPDATE_OPENAPI").is_some() {
        std::fs::write(path, &generated).expect("writes docs/openapi.json");
        return;
    }
    let checked_in = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "docs/openapi.json differs from what the code generates; regenerate it with \
         `make openapi` (HOOKLINE_UPDATE_OPENAPI=1 cargo test -p hookline-api --lib openapi) and commit it"
    );
}

/// docs/api.md holds the route table the document gives ([`route_table`]),
/// between its markers; `HOOKLINE_UPDATE_OPENAPI=1` rewrites it.
#[test]
fn the_api_doc_holds_the_route_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md");
    let text = std::fs::read_to_string(path).expect("docs/api.md");
    let (start, end) = ROUTE_TABLE_MARKERS;
    let (Some(a), Some(b)) = (text.find(start), text.find(end)) else {
        panic!("docs/api.md has no generated route table between {start:?} and {end:?}");
    };
    let table = route_table();
    let current = &text[a + start.len()..b];
    if std::env::var_os("HOOKLINE_UPDATE_OPENAPI").is_some() {
        let updated = format!("{}{start}{table}{}", &text[..a], &text[b..]);
        std::fs::write(path, updated).expect("writes docs/api.md");
        return;
    }
    assert!(current == table, "docs/api.md's route table is out of date: regenerate it with `make openapi`");
}

/// Every route is in the document with at least one response, an
/// operation id and its security (none for the open routes, bearer alone
/// for the bearer-only ones, the bearer key and SigV4 for every other), and
/// every operation of the document is a route.
#[test]
fn the_document_has_exactly_the_routes() {
    let doc = doc();
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            documented.insert((method.to_uppercase(), path.clone()));
            let at = format!("{} {path}", method.to_uppercase());
            assert!(op["responses"].as_object().is_some_and(|r| !r.is_empty()), "{at}: no response");
            assert!(op["operationId"].is_string(), "{at}: no operationId (OPERATION_IDS)");
            let security = op["security"].as_array().unwrap_or_else(|| panic!("{at}: no security"));
            if is_open(&method.to_uppercase(), path) {
                assert!(security.is_empty(), "{at} is open: no security");
            } else if crate::routes::bearer_only(&method.to_uppercase(), path) {
                let names: Vec<&String> = security.iter().flat_map(|r| r.as_object().unwrap().keys()).collect();
                assert_eq!(names, [BEARER], "{at} takes bearer keys only");
            } else {
                let names: Vec<&String> = security.iter().flat_map(|r| r.as_object().unwrap().keys()).collect();
                assert_eq!(names, [BEARER, SIGV4], "{at}");
            }
        }
    }
    let routes: BTreeSet<(String, String)> =
        ROUTES.iter().map(|r| (r.method.to_string(), r.path.to_string())).collect();
    let missing: Vec<_> = routes.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&routes).collect();
    assert!(missing.is_empty(), "routes without an operation in the document: {missing:?}");
    assert!(extra.is_empty(), "operations of the document that are no route: {extra:?}");
    let ids: BTreeSet<(String, String)> =
        OPERATION_IDS.iter().map(|(m, p, _)| (m.to_string(), p.to_string())).collect();
    assert_eq!(ids, routes, "OPERATION_IDS names every route, and only routes");
    let unique: BTreeSet<&str> = OPERATION_IDS.iter().map(|(_, _, id)| *id).collect();
    assert_eq!(unique.len(), OPERATION_IDS.len(), "operation ids are unique");
}

/// Every error code is answered by some operation, in a response of the
/// code's status whose description names it (`` `code` ``); the 405 of a
/// wrong method is the document's shared response `MethodNotAllowed`. And
/// the description's table lists every code with its status.
#[test]
fn every_error_code_is_in_the_document() {
    let doc = doc();
    let mut missing = Vec::new();
    for &c in ErrorCode::ALL {
        let tick = format!("`{}`", c.as_str());
        let on_operation = doc["paths"].as_object().unwrap().values().any(|item| {
            item.as_object().unwrap().values().any(|op| {
                op["responses"][c.status().to_string()]["description"].as_str().is_some_and(|d| d.contains(&tick))
            })
        });
        let shared = doc["components"]["responses"]
            .as_object()
            .is_some_and(|r| r.values().any(|r| r["description"].as_str().is_some_and(|d| d.contains(&tick))));
        if !(on_operation || c == ErrorCode::MethodNotAllowed && shared) {
            missing.push(c.as_str());
        }
        let row = format!("| {tick} | {} |", c.status());
        assert!(doc["info"]["description"].as_str().unwrap().contains(&row), "the code table lacks {row}");
    }
    assert!(missing.is_empty(), "error codes no operation of the document answers: {missing:?}");
}

/// The schema a `$ref` names.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(r) => &doc["components"]["schemas"][r.rsplit('/').next().unwrap()],
        None => schema,
    }
}

/// Whether a content object or its schema has an example.
fn has_example(doc: &Value, content: &Value) -> bool {
    let schema = resolve(doc, &content["schema"]);
    !content["example"].is_null()
        || content["examples"].as_object().is_some_and(|e| !e.is_empty())
        || !schema["example"].is_null()
        || schema["examples"].as_array().is_some_and(|e| !e.is_empty())
}

/// Every request body has an example (on the body, or on its schema).
#[test]
fn every_request_body_has_an_example() {
    let doc = doc();
    let mut without = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if let Some(content) = op["requestBody"]["content"].as_object() {
                if !content.values().any(|c| has_example(&doc, c)) {
                    without.push(format!("{} {path}", method.to_uppercase()));
                }
            }
        }
    }
    assert!(without.is_empty(), "request bodies without an example: {without:?}");
}

/// The value a JSON pointer names in a response schema exists: each
/// segment a property (or `0` of an array).
fn pointer_exists<'a>(doc: &'a Value, mut schema: &'a Value, pointer: &str) -> bool {
    for segment in pointer.trim_start_matches('/').split('/') {
        schema = resolve(doc, schema);
        if let Some(one) = schema["allOf"]
            .as_array()
            .and_then(|a| a.iter().find(|s| !resolve(doc, s)["properties"][segment].is_null()))
        {
            schema = resolve(doc, one);
        }
        schema = if segment.parse::<usize>().is_ok() { &schema["items"] } else { &schema["properties"][segment] };
        if schema.is_null() {
            return false;
        }
    }
    true
}

/// Every link the document holds leads to an operation that exists, names
/// one of its path parameters, and takes its value from a field the
/// response's schema has; and a link of [`LINKS`] whose two ends are in
/// the document is in it.
#[test]
fn links_lead_to_operations_and_read_real_fields() {
    let doc = doc();
    let ids: BTreeSet<&str> = OPERATION_IDS.iter().map(|(_, _, id)| *id).collect();
    for l in LINKS {
        assert!(ROUTES.iter().any(|r| (r.method, r.path) == l.from), "link from a route that is none: {:?}", l.from);
        assert!(ROUTES.iter().any(|r| (r.method, r.path) == l.to), "link to a route that is none: {:?}", l.to);
        assert!(l.to.1.contains(&format!("{{{}}}", l.param)), "{:?} has no parameter {}", l.to, l.param);
        let from = &doc["paths"][l.from.1][l.from.0.to_lowercase()];
        let to = &doc["paths"][l.to.1][l.to.0.to_lowercase()];
        if from.is_null() || to.is_null() {
            continue;
        }
        let response = &from["responses"][l.status];
        assert!(!response.is_null(), "{:?} has no {} response to link from", l.from, l.status);
        let id = to["operationId"].as_str().unwrap();
        assert!(ids.contains(id));
        let links = response["links"].as_object().map(|l| l.values().collect::<Vec<_>>()).unwrap_or_default();
        assert!(links.iter().any(|k| k["operationId"] == id), "{:?} → {:?} is not in the document", l.from, l.to);
        for k in &links {
            assert!(k.get("operation_id").is_none() && k["operationId"].is_string(), "a link without operationId: {k}");
        }
        let schema = &response["content"]["application/json"]["schema"];
        assert!(
            pointer_exists(&doc, schema, l.pointer),
            "{:?} {}: the response has no {} for the link to {:?}",
            l.from,
            l.status,
            l.pointer,
            l.to
        );
    }
}

/// The security schemes are what authentication accepts: a bearer key
/// (`hookline serve`) and an IAM SigV4 signature in `Authorization`
/// (API Gateway's convention for an `awsSigv4` authorizer).
#[test]
fn security_schemes_match_authentication() {
    let doc = doc();
    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes[BEARER]["type"], "http");
    assert_eq!(schemes[BEARER]["scheme"], "bearer");
    assert_eq!(schemes[SIGV4]["type"], "apiKey");
    assert_eq!(schemes[SIGV4]["in"], "header");
    assert_eq!(schemes[SIGV4]["name"], "Authorization");
    assert_eq!(schemes[SIGV4]["x-amazon-apigateway-authtype"], "awsSigv4");
    assert_eq!(doc["openapi"].as_str().map(|v| &v[..3]), Some("3.1"));
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
}
