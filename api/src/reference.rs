//! The API reference page (`GET /docs`): the OpenAPI document
//! ([`super::openapi::document`]) rendered as one self-contained HTML page
//! by this code, so it works offline and behind any firewall: no script,
//! no CDN, no external style or font; its one stylesheet is in the page.
//! Every operation (method, path, summary, security, parameters, request
//! body with its example, responses with their error codes and examples,
//! links), the error-code table and every schema (properties, types,
//! enums, examples) are on it. It renders the document, so it holds
//! nothing the document does not (and nothing secret).

use std::fmt::Write as _;
use std::sync::OnceLock;

use serde_json::Value;

/// The page's stylesheet, embedded (no external asset).
const STYLE: &str = "body{font:15px/1.5 system-ui,-apple-system,'Segoe UI',sans-serif;max-width:70rem;margin:0 auto;\
padding:1rem 2rem;color:#1d2330}h1,h2,h3{line-height:1.2}h2{border-bottom:1px solid #d5d9e0;padding-bottom:.3rem;\
margin-top:2.5rem}code,pre{font:13px/1.45 ui-monospace,'SFMono-Regular',Menlo,Consolas,monospace}\
pre{background:#f4f6f9;padding:.6rem .8rem;overflow:auto;border-radius:4px}table{border-collapse:collapse;\
margin:.5rem 0 1rem;width:100%}th,td{border:1px solid #d5d9e0;padding:.25rem .5rem;text-align:left;\
vertical-align:top}th{background:#f4f6f9}.op{border:1px solid #d5d9e0;border-radius:6px;padding:.2rem 1rem 1rem;\
margin:1.2rem 0}.m{display:inline-block;min-width:4.2rem;font-weight:700;font-family:ui-monospace,monospace}\
.GET{color:#1565c0}.POST{color:#2e7d32}.PATCH{color:#8d6e00}.DELETE{color:#c62828}.open{color:#2e7d32}\
nav ul{columns:2;list-style:none;padding-left:0}a{color:#1a4fa0}";

/// The page, rendered once per process (the document depends only on the
/// code).
pub fn html() -> &'static str {
    static PAGE: OnceLock<String> = OnceLock::new();
    PAGE.get_or_init(|| render(super::openapi::value()))
}

impl crate::Api {
    /// The answer of `GET /docs` (a method, as every handler is).
    pub(crate) fn reference_page(&self) -> crate::Response {
        crate::Response {
            content_type: "text/html; charset=utf-8",
            body: html().as_bytes().to_vec(),
            ..crate::Response::json(200, &())
        }
    }
}

/// HTML-escapes text.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// One line of the document's Markdown, inline: `code`, **bold**,
/// `[text](target)` links (the text only: targets are other pages of the docs).
fn inline(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('`') {
            if let Some(end) = r.find('`') {
                let _ = write!(out, "<code>{}</code>", esc(&r[..end]));
                rest = &r[end + 1..];
                continue;
            }
        }
        if let Some(r) = rest.strip_prefix("**") {
            if let Some(end) = r.find("**") {
                let _ = write!(out, "<strong>{}</strong>", inline(&r[..end]));
                rest = &r[end + 2..];
                continue;
            }
        }
        if let Some(r) = rest.strip_prefix('[') {
            if let Some((text, after)) = r.split_once("](") {
                if let Some(end) = after.find(')') {
                    if !text.contains('[') {
                        out.push_str(&inline(text));
                        rest = &after[end + 1..];
                        continue;
                    }
                }
            }
        }
        let next = rest[1..].find(['`', '*', '[']).map_or(rest.len(), |i| i + 1);
        out.push_str(&esc(&rest[..next]));
        rest = &rest[next..];
    }
    out
}

/// The document's Markdown as HTML: paragraphs, `##` headings, `-` lists
/// and `|` tables, with [`inline`] markup.
fn markdown(s: &str) -> String {
    let mut out = String::new();
    for block in s.split("\n\n") {
        let lines: Vec<&str> = block.lines().filter(|l| !l.trim().is_empty()).collect();
        let Some(first) = lines.first() else { continue };
        if let Some(h) = first.strip_prefix("## ") {
            let _ = write!(out, "<h3>{}</h3>", inline(h));
            if lines.len() > 1 {
                out.push_str(&markdown(&lines[1..].join("\n")));
            }
        } else if first.starts_with('|') {
            out.push_str("<table>");
            for (i, l) in lines.iter().enumerate() {
                if i == 1 && l.starts_with("| ---") {
                    continue;
                }
                let cell = if i == 0 { "th" } else { "td" };
                out.push_str("<tr>");
                for c in split_row(l) {
                    let _ = write!(out, "<{cell}>{}</{cell}>", inline(&c));
                }
                out.push_str("</tr>");
            }
            out.push_str("</table>");
        } else if first.starts_with("- ") {
            out.push_str("<ul>");
            let mut item = String::new();
            for l in &lines {
                if let Some(start) = l.strip_prefix("- ") {
                    if !item.is_empty() {
                        let _ = write!(out, "<li>{}</li>", inline(&item));
                    }
                    item = start.to_string();
                } else {
                    item.push(' ');
                    item.push_str(l.trim());
                }
            }
            let _ = write!(out, "<li>{}</li></ul>", inline(&item));
        } else {
            let _ = write!(out, "<p>{}</p>", inline(&lines.join(" ")));
        }
    }
    out
}

/// A Markdown table row's cells (`\|` is a literal bar).
fn split_row(l: &str) -> Vec<String> {
    let inner = l.trim().trim_start_matches('|').trim_end_matches('|');
    let mut cells = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                chars.next();
                cells.last_mut().expect("one").push('|');
            }
            '|' => cells.push(String::new()),
            c => cells.last_mut().expect("one").push(c),
        }
    }
    cells.into_iter().map(|c| c.trim().to_string()).collect()
}

/// A schema's name from its `$ref`.
fn ref_name(r: &str) -> &str {
    r.rsplit('/').next().unwrap_or(r)
}

/// A schema's type, as a short HTML phrase (named schemas link to their
/// section).
fn type_of(s: &Value) -> String {
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let n = ref_name(r);
        return format!("<a href=\"#schema-{0}\">{0}</a>", esc(n));
    }
    for k in ["oneOf", "anyOf", "allOf"] {
        if let Some(list) = s.get(k).and_then(Value::as_array) {
            let sep = if k == "allOf" { " &amp; " } else { " | " };
            return list.iter().map(type_of).collect::<Vec<_>>().join(sep);
        }
    }
    if let Some(values) = s.get("enum").and_then(Value::as_array) {
        return values.iter().map(|v| format!("<code>{}</code>", esc(&v.to_string()))).collect::<Vec<_>>().join(" | ");
    }
    let types: Vec<String> = match s.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts.iter().filter_map(|t| t.as_str().map(str::to_string)).collect(),
        _ => vec![],
    };
    let mut parts = Vec::new();
    for t in types {
        match t.as_str() {
            "array" => parts.push(format!("array of {}", s.get("items").map_or("any".into(), type_of))),
            "object" => match s.get("additionalProperties") {
                Some(v) if v.is_object() => parts.push(format!("map of {}", type_of(v))),
                _ => parts.push("object".into()),
            },
            t => {
                let mut p = esc(t);
                if let Some(f) = s.get("format").and_then(Value::as_str) {
                    let _ = write!(p, " ({})", esc(f));
                }
                parts.push(p);
            }
        }
    }
    if parts.is_empty() {
        "any".into()
    } else {
        parts.join(" | ")
    }
}

/// Constraints a schema states (range, length, pattern, default).
fn constraints(s: &Value) -> String {
    let mut out = Vec::new();
    for k in [
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "pattern",
        "default",
    ] {
        if let Some(v) = s.get(k) {
            out.push(format!("{k}: <code>{}</code>", esc(&v.to_string())));
        }
    }
    if out.is_empty() {
        String::new()
    } else {
        format!(" <small>({})</small>", out.join(", "))
    }
}

/// An example value, pretty-printed in a `<pre>`.
fn example(v: &Value) -> String {
    format!("<pre>{}</pre>", esc(&serde_json::to_string_pretty(v).unwrap_or_default()))
}

/// A content map's examples (`example`, or each of `examples`).
fn examples(content: &Value) -> String {
    let mut out = String::new();
    if let Some(e) = content.get("example") {
        out.push_str(&example(e));
    }
    if let Some(map) = content.get("examples").and_then(Value::as_object) {
        for (name, e) in map {
            let value = e.get("value").unwrap_or(e);
            let summary = e.get("summary").and_then(Value::as_str).unwrap_or(name);
            let _ = write!(out, "<p>Example <em>{}</em>:</p>{}", esc(summary), example(value));
        }
    }
    out
}

/// A request body's or response's `content`: each media type, its schema
/// and examples.
fn content(c: &Value) -> String {
    let mut out = String::new();
    if let Some(map) = c.as_object() {
        for (media, m) in map {
            let _ = write!(out, "<p><code>{}</code>", esc(media));
            if let Some(s) = m.get("schema") {
                let _ = write!(out, ": {}", type_of(s));
            }
            out.push_str("</p>");
            out.push_str(&examples(m));
        }
    }
    out
}

/// One operation's section.
fn operation(out: &mut String, method: &str, path: &str, op: &Value) {
    let id = op.get("operationId").and_then(Value::as_str).unwrap_or("");
    let _ = write!(
        out,
        "<section class=\"op\" id=\"op-{}\"><h3><span class=\"m {method}\">{method}</span> <code>{}</code></h3>",
        esc(id),
        esc(path)
    );
    if let Some(s) = op.get("summary").and_then(Value::as_str) {
        let _ = write!(out, "<p><strong>{}</strong> <small>(<code>{}</code>)</small></p>", inline(s), esc(id));
    }
    if let Some(d) = op.get("description").and_then(Value::as_str) {
        out.push_str(&markdown(d));
    }
    match op.get("security").and_then(Value::as_array) {
        Some(list) if list.is_empty() => out.push_str("<p class=\"open\">Open: no credential.</p>"),
        Some(list) => {
            let names: Vec<String> = list
                .iter()
                .filter_map(|r| r.as_object())
                .flat_map(|r| r.keys().map(|k| format!("<a href=\"#auth\">{}</a>", esc(k))))
                .collect();
            let _ = write!(out, "<p>Credential: {}.</p>", names.join(" or "));
        }
        None => {}
    }
    if let Some(params) = op.get("parameters").and_then(Value::as_array).filter(|p| !p.is_empty()) {
        out.push_str("<h4>Parameters</h4><table><tr><th>name</th><th>in</th><th>type</th><th>description</th></tr>");
        for p in params {
            let name = p.get("name").and_then(Value::as_str).unwrap_or("");
            let required = p.get("required").and_then(Value::as_bool).unwrap_or(false);
            let schema = p.get("schema").cloned().unwrap_or(Value::Null);
            let _ = write!(
                out,
                "<tr><td><code>{}</code>{}</td><td>{}</td><td>{}{}</td><td>{}</td></tr>",
                esc(name),
                if required { " <small>required</small>" } else { "" },
                esc(p.get("in").and_then(Value::as_str).unwrap_or("")),
                type_of(&schema),
                constraints(&schema),
                markdown(p.get("description").and_then(Value::as_str).unwrap_or(""))
            );
        }
        out.push_str("</table>");
    }
    if let Some(body) = op.get("requestBody") {
        out.push_str("<h4>Request body</h4>");
        if let Some(d) = body.get("description").and_then(Value::as_str) {
            out.push_str(&markdown(d));
        }
        out.push_str(&content(body.get("content").unwrap_or(&Value::Null)));
    }
    if let Some(responses) = op.get("responses").and_then(Value::as_object) {
        out.push_str("<h4>Responses</h4><table><tr><th>status</th><th>description</th></tr>");
        for (status, r) in responses {
            let _ = write!(out, "<tr><td><strong>{}</strong></td><td>", esc(status));
            if let Some(r) = r.get("$ref").and_then(Value::as_str) {
                let _ = write!(out, "see {}", esc(ref_name(r)));
            }
            out.push_str(&markdown(r.get("description").and_then(Value::as_str).unwrap_or("")));
            out.push_str(&content(r.get("content").unwrap_or(&Value::Null)));
            if let Some(links) = r.get("links").and_then(Value::as_object) {
                out.push_str("<p>Links:</p><ul>");
                for (name, l) in links {
                    let params = l
                        .get("parameters")
                        .and_then(Value::as_object)
                        .map(|p| {
                            p.iter()
                                .map(|(k, v)| {
                                    format!("<code>{}</code> = <code>{}</code>", esc(k), esc(v.as_str().unwrap_or("")))
                                })
                                .collect::<Vec<_>>()
                                .join(", ")
                        })
                        .unwrap_or_default();
                    let _ = write!(out, "<li><a href=\"#op-{0}\">{0}</a>: {params}</li>", esc(name));
                }
                out.push_str("</ul>");
            }
            out.push_str("</td></tr>");
        }
        out.push_str("</table>");
    }
    out.push_str("</section>");
}

/// One schema's section.
fn schema(out: &mut String, name: &str, s: &Value) {
    let _ = write!(out, "<section id=\"schema-{0}\"><h3>{0}</h3>", esc(name));
    if let Some(d) = s.get("description").and_then(Value::as_str) {
        out.push_str(&markdown(d));
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        let required: Vec<&str> = s
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        out.push_str("<table><tr><th>field</th><th>type</th><th>description</th></tr>");
        for (field, p) in props {
            let _ = write!(
                out,
                "<tr><td><code>{}</code>{}</td><td>{}{}</td><td>{}</td></tr>",
                esc(field),
                if required.contains(&field.as_str()) { " <small>required</small>" } else { "" },
                type_of(p),
                constraints(p),
                markdown(p.get("description").and_then(Value::as_str).unwrap_or(""))
            );
        }
        out.push_str("</table>");
    } else {
        let _ = write!(out, "<p>{}{}</p>", type_of(s), constraints(s));
    }
    for k in ["oneOf", "anyOf"] {
        if let Some(list) = s.get(k).and_then(Value::as_array) {
            out.push_str("<p>One of:</p><ul>");
            for v in list {
                let d = v.get("description").and_then(Value::as_str).unwrap_or("");
                let _ = write!(out, "<li>{} {}</li>", type_of(v), inline(d));
            }
            out.push_str("</ul>");
        }
    }
    if let Some(e) = s.get("example") {
        out.push_str(&example(e));
    }
    if let Some(list) = s.get("examples").and_then(Value::as_array) {
        for e in list {
            out.push_str(&example(e));
        }
    }
    out.push_str("</section>");
}

/// Renders the document.
pub fn render(doc: &Value) -> String {
    let info = &doc["info"];
    let title = info["title"].as_str().unwrap_or("API");
    let version = info["version"].as_str().unwrap_or("");
    let mut out = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" \
         content=\"width=device-width,initial-scale=1\"><title>{0} API {1}</title><style>{STYLE}</style></head><body>\
         <h1>{0} API <small>{1}</small></h1><p>OpenAPI {2}: <a href=\"/openapi.json\">/openapi.json</a></p>",
        esc(title),
        esc(version),
        esc(doc["openapi"].as_str().unwrap_or(""))
    );
    out.push_str(&markdown(info["description"].as_str().unwrap_or("")));

    out.push_str("<h2 id=\"auth\">Authentication</h2><table><tr><th>scheme</th><th>what</th></tr>");
    if let Some(schemes) = doc["components"]["securitySchemes"].as_object() {
        for (name, s) in schemes {
            let _ = write!(
                out,
                "<tr><td><code>{}</code></td><td>{}</td></tr>",
                esc(name),
                markdown(s["description"].as_str().unwrap_or(""))
            );
        }
    }
    out.push_str("</table>");
    if let Some(servers) = doc["servers"].as_array() {
        out.push_str("<h2>Servers</h2><ul>");
        for s in servers {
            let _ = write!(
                out,
                "<li><code>{}</code>: {}</li>",
                esc(s["url"].as_str().unwrap_or("")),
                inline(s["description"].as_str().unwrap_or(""))
            );
        }
        out.push_str("</ul>");
    }

    // Operations, grouped by their first tag in the document's tag order.
    let mut ops: Vec<(String, &str, &str, &Value)> = Vec::new();
    if let Some(paths) = doc["paths"].as_object() {
        for (path, item) in paths {
            for method in ["get", "post", "patch", "put", "delete"] {
                if let Some(op) = item.get(method) {
                    let tag = op["tags"][0].as_str().unwrap_or("other").to_string();
                    ops.push((tag, method, path, op));
                }
            }
        }
    }
    let mut tags: Vec<(String, String)> = doc["tags"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| {
                    (t["name"].as_str().unwrap_or("").to_string(), t["description"].as_str().unwrap_or("").to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    for (tag, ..) in &ops {
        if !tags.iter().any(|(t, _)| t == tag) {
            tags.push((tag.clone(), String::new()));
        }
    }
    out.push_str("<nav><h2>Routes</h2><ul>");
    for (tag, ..) in &tags {
        for (_, method, path, op) in ops.iter().filter(|o| &o.0 == tag) {
            let m = method.to_uppercase();
            let _ = write!(
                out,
                "<li><a href=\"#op-{}\"><span class=\"m {m}\">{m}</span> <code>{}</code></a></li>",
                esc(op["operationId"].as_str().unwrap_or("")),
                esc(path)
            );
        }
    }
    out.push_str("</ul></nav>");
    for (tag, description) in &tags {
        let mut section = String::new();
        for (_, method, path, op) in ops.iter().filter(|o| &o.0 == tag) {
            operation(&mut section, &method.to_uppercase(), path, op);
        }
        if !section.is_empty() {
            let _ = write!(out, "<h2 id=\"tag-{0}\">{0}</h2>{1}{section}", esc(tag), markdown(description));
        }
    }
    if let Some(responses) = doc["components"]["responses"].as_object() {
        out.push_str("<h2>Responses on any route</h2>");
        for (name, r) in responses {
            let _ = write!(out, "<h3>{}</h3>{}", esc(name), markdown(r["description"].as_str().unwrap_or("")));
            out.push_str(&content(&r["content"]));
        }
    }
    out.push_str("<h2>Schemas</h2>");
    if let Some(schemas) = doc["components"]["schemas"].as_object() {
        for (name, s) in schemas {
            schema(&mut out, name, s);
        }
    }
    out.push_str("</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Markup in the document is escaped, never passed through: a
    /// description holding HTML shows as text.
    #[test]
    fn text_is_escaped_and_markdown_rendered() {
        assert_eq!(inline("a <b> & `c<d>` **e**"), "a &lt;b&gt; &amp; <code>c&lt;d&gt;</code> <strong>e</strong>");
        assert_eq!(inline("see [the doc](x.md#y)"), "see the doc");
        let table = markdown("| a | b |\n| --- | --- |\n| `x` | y \\| z |");
        assert_eq!(table, "<table><tr><th>a</th><th>b</th></tr><tr><td><code>x</code></td><td>y | z</td></tr></table>");
        assert_eq!(markdown("- one\n  two\n- three"), "<ul><li>one two</li><li>three</li></ul>");
    }

    /// The page shows every operation, every error code and every schema
    /// of the document, and loads nothing from elsewhere.
    #[test]
    fn the_page_covers_the_document_and_loads_nothing() {
        let doc = serde_json::to_value(super::super::openapi::document()).unwrap();
        let page = html();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let id = op["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path}: no operationId"));
                assert!(page.contains(&format!("id=\"op-{id}\"")), "{method} {path} is not on the page");
            }
        }
        for c in hookline_wire::ErrorCode::ALL {
            assert!(page.contains(&format!("<code>{}</code>", c.as_str())), "{c} is not on the page");
        }
        for name in doc["components"]["schemas"].as_object().unwrap().keys() {
            assert!(page.contains(&format!("id=\"schema-{name}\"")), "schema {name} is not on the page");
        }
        let lower = page.to_lowercase();
        for external in ["<script", "<link", " src=", "@import", "url("] {
            assert!(!lower.contains(external), "the page loads something: {external}");
        }
        for href in page.split("href=\"").skip(1) {
            let target = &href[..href.find('"').unwrap()];
            assert!(target.starts_with('#') || target == "/openapi.json", "the page links outside: {target}");
        }
    }
}
