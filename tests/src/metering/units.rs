//! Item sizes as DynamoDB bills them, `UpdateItem` expressions applied to
//! the tracked items, and the function a `Scan` came from.

use super::*;

// ------------------------------------------------------------------- sizes

/// One attribute as billing sees it: its size (name + value) and a hash of
/// its value (to tell whether an update changed it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct AttrSize {
    pub(super) size: usize,
    pub(super) hash: u64,
}

/// The billing view of one item.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Image(pub(super) HashMap<String, AttrSize>);

impl Image {
    pub(super) fn of(item: &Map<String, Value>) -> Image {
        Image(item.iter().map(|(k, v)| (k.clone(), attr(k, v))).collect())
    }

    pub(super) fn size(&self) -> usize {
        self.0.values().map(|a| a.size).sum()
    }

    pub(super) fn has_all(&self, names: &[String]) -> bool {
        names.iter().all(|n| self.0.contains_key(n))
    }

    /// The size of the entry this item has in `index` of `table`.
    pub(super) fn projected_size(&self, table: &TableSchema, index: &IndexSchema) -> usize {
        let keep = |n: &str| match &index.projection {
            Projection::All => true,
            Projection::KeysOnly => table.key.iter().chain(&index.key).any(|k| k == n),
            Projection::Include(extra) => table.key.iter().chain(&index.key).chain(extra).any(|k| k == n),
        };
        self.0.iter().filter(|(n, _)| keep(n)).map(|(_, a)| a.size).sum()
    }
}

pub(super) fn hash_of(v: &Value) -> u64 {
    let mut h = DefaultHasher::new();
    v.to_string().hash(&mut h);
    h.finish()
}

pub(super) fn attr(name: &str, v: &Value) -> AttrSize {
    AttrSize { size: name.len() + value_size(v), hash: hash_of(v) }
}

/// Bytes of a base64 string once decoded.
pub(super) fn base64_len(s: &str) -> usize {
    let s = s.trim_end_matches('=');
    s.len() * 3 / 4
}

/// A number's size: about one byte per two significant digits, plus one.
pub(super) fn number_size(n: &str) -> usize {
    let mantissa = n.trim_start_matches(['-', '+']).split(['e', 'E']).next().unwrap_or("");
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len().max(1);
    significant.div_ceil(2) + 1
}

/// The size of one DynamoDB JSON value (`{"S": "…"}`, `{"N": "…"}`, …).
pub(crate) fn value_size(v: &Value) -> usize {
    let Some((t, x)) = v.as_object().and_then(|o| o.iter().next()) else { return 0 };
    let strs = || x.as_array().into_iter().flatten().filter_map(Value::as_str);
    match t.as_str() {
        "S" => x.as_str().map_or(0, str::len),
        "N" => number_size(x.as_str().unwrap_or("0")),
        "B" => base64_len(x.as_str().unwrap_or("")),
        "BOOL" | "NULL" => 1,
        "SS" => strs().map(str::len).sum(),
        "NS" => strs().map(number_size).sum(),
        "BS" => strs().map(base64_len).sum(),
        "M" => 3 + x.as_object().into_iter().flatten().map(|(k, v)| k.len() + value_size(v) + 1).sum::<usize>(),
        "L" => 3 + x.as_array().into_iter().flatten().map(|v| value_size(v) + 1).sum::<usize>(),
        _ => 0,
    }
}

/// Write units of a write of `bytes` (at least 1).
pub(super) fn wru(bytes: usize) -> f64 {
    bytes.div_ceil(1024).max(1) as f64
}

/// Read units of reading `bytes` (at least 1 unit, halved when eventually consistent).
pub(super) fn rru(bytes: usize, consistent: bool) -> f64 {
    let units = bytes.div_ceil(4096).max(1) as f64;
    if consistent {
        units
    } else {
        units / 2.0
    }
}

// ------------------------------------------------------- update expressions

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Word(String),
    Sym(char),
}

pub(super) fn tokens(expr: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in expr.chars() {
        if c.is_whitespace() || "=,()+-".contains(c) {
            if !word.is_empty() {
                out.push(Tok::Word(std::mem::take(&mut word)));
            }
            if !c.is_whitespace() {
                out.push(Tok::Sym(c));
            }
        } else {
            word.push(c);
        }
    }
    if !word.is_empty() {
        out.push(Tok::Word(word));
    }
    out
}

/// Applies an `UpdateExpression` to the billing image of the item.
pub(super) fn apply_update(img: &mut Image, expr: &str, names: &Map<String, Value>, values: &Map<String, Value>) {
    let resolve = |w: &str| -> (String, bool) {
        // Top-level attribute of a path, and whether the path is nested.
        let nested = w.contains('.') || w.contains('[');
        let first = w.split(['.', '[']).next().unwrap_or(w);
        let name =
            if first.starts_with('#') { names.get(first).and_then(Value::as_str).unwrap_or(first) } else { first };
        (name.to_string(), nested)
    };
    let value = |w: &str| values.get(w);
    // Split into clauses, then into actions at parenthesis depth 0.
    let mut clause = String::new();
    let mut actions: Vec<(String, Vec<Tok>)> = Vec::new();
    let mut current: Vec<Tok> = Vec::new();
    let mut depth = 0i32;
    for t in tokens(expr) {
        match &t {
            Tok::Word(w)
                if depth == 0 && ["SET", "REMOVE", "ADD", "DELETE"].contains(&w.to_ascii_uppercase().as_str()) =>
            {
                if !current.is_empty() {
                    actions.push((clause.clone(), std::mem::take(&mut current)));
                }
                clause = w.to_ascii_uppercase();
            }
            Tok::Sym(',') if depth == 0 => {
                if !current.is_empty() {
                    actions.push((clause.clone(), std::mem::take(&mut current)));
                }
            }
            Tok::Sym('(') => {
                depth += 1;
                current.push(t);
            }
            Tok::Sym(')') => {
                depth -= 1;
                current.push(t);
            }
            _ => current.push(t),
        }
    }
    if !current.is_empty() {
        actions.push((clause, current));
    }
    for (clause, toks) in actions {
        let Some(Tok::Word(path)) = toks.first() else { continue };
        let (name, nested) = resolve(path);
        let refs: Vec<&Value> =
            toks.iter().filter_map(|t| if let Tok::Word(w) = t { value(w) } else { None }).collect();
        let old = img.0.get(&name).copied();
        let changed =
            |size: usize| AttrSize { size, hash: old.map_or(0, |o| o.hash).wrapping_add(0x9e37_79b9_7f4a_7c15) };
        match clause.as_str() {
            "SET" => {
                let rhs = &toks[2.min(toks.len())..];
                let new = match rhs {
                    _ if nested => {
                        changed(old.map_or(name.len(), |o| o.size) + refs.iter().map(|v| value_size(v)).sum::<usize>())
                    }
                    [Tok::Word(w)] if value(w).is_some() => attr(&name, value(w).unwrap()),
                    [Tok::Word(f), ..] if f == "if_not_exists" => match (old, refs.last()) {
                        (Some(o), _) => o,
                        (None, Some(v)) => attr(&name, v),
                        (None, None) => continue,
                    },
                    // list_append, arithmetic, copies: estimated.
                    _ => changed(
                        old.map_or(name.len(), |o| o.size)
                            .max(name.len() + refs.iter().map(|v| value_size(v)).sum::<usize>()),
                    ),
                };
                img.0.insert(name, new);
            }
            "REMOVE" if !nested => {
                img.0.remove(&name);
            }
            "REMOVE" => {}
            "ADD" => {
                let Some(v) = refs.first() else { continue };
                let new = match old {
                    None => attr(&name, v),
                    Some(o) if v.get("N").is_some() => changed(o.size.max(name.len() + value_size(v))),
                    Some(o) => changed(o.size + value_size(v)),
                };
                img.0.insert(name, new);
            }
            "DELETE" => {
                if let (Some(o), Some(v)) = (old, refs.first()) {
                    img.0.insert(name, changed(o.size.saturating_sub(value_size(v))));
                }
            }
            _ => {}
        }
    }
}

// ------------------------------------------------------------ scan origin

/// The handler entry points of `hookline_aws::lambda` by the function of the
/// template that runs them (`http` serves two: see [`INGEST_ROUTES`]).
pub(super) const ENTRY_POINTS: &[(&str, &str)] = &[
    ("http", "ApiFunction"),
    ("ingest_from_bus", "IngestFunction"),
    ("route_stream", "RouterFunction"),
    ("saga_stream", "SagaFunction"),
    ("saga_timers", "SagaFunction"),
    ("deliver_batch", "DeliveryFunction"),
    ("requeue_batch", "RequeueFunction"),
    ("reconcile_scheduled", "ReconcilerFunction"),
];

/// The API's handlers of the routes the IngestFunction serves.
pub(super) const INGEST_ROUTES: &[&str] = &["post_event", "post_batch"];

/// One frame of the call stack: its symbol and, with debug info, the
/// source file (relative to the workspace) and line.
pub(super) struct Frame {
    pub(super) symbol: String,
    pub(super) at: Option<(String, usize)>,
}

impl Frame {
    /// The function that holds this frame's code, named from its source
    /// (the nearest `fn` above its line): line-table debug info names async
    /// bodies `{async_fn#0}` only. Else from its symbol (`a::b::f::{{closure}}`).
    pub(super) fn function(&self) -> Option<String> {
        if let Some((file, line)) = &self.at {
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            let text = std::fs::read_to_string(root.join(file)).ok()?;
            return text.lines().take(*line).collect::<Vec<_>>().iter().rev().find_map(|l| {
                let rest = l.split_once("fn ")?.1;
                let before = l.split_once("fn ")?.0.trim();
                let ok = before
                    .split_whitespace()
                    .all(|w| ["pub", "async", "pub(crate)", "pub(super)", "const"].contains(&w));
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                (ok && !name.is_empty()).then_some(name)
            });
        }
        let s = self.symbol.trim_end_matches("::{{closure}}");
        s.contains("::").then(|| s.rsplit("::").next().unwrap_or(s).to_string())
    }

    /// Is this frame's code in `file` (workspace-relative), or its symbol under `module`?
    pub(super) fn is_in(&self, file: &str, module: &str) -> bool {
        self.at.as_ref().is_some_and(|(f, _)| f == file) || self.symbol.trim_start_matches('<').starts_with(module)
    }
}

/// The frames of the current call stack, innermost first.
pub(super) fn frames() -> Vec<Frame> {
    let trace = std::backtrace::Backtrace::force_capture().to_string();
    let mut out: Vec<Frame> = Vec::new();
    for l in trace.lines().map(str::trim_start) {
        if let Some(at) = l.strip_prefix("at ") {
            // `./aws/src/lambda.rs:69:10`
            let mut parts = at.rsplitn(3, ':');
            let (_col, line, file) = (parts.next(), parts.next(), parts.next());
            if let (Some(frame), Some(line), Some(file)) = (out.last_mut(), line.and_then(|l| l.parse().ok()), file) {
                frame.at.get_or_insert((file.trim_start_matches("./").to_string(), line));
            }
        } else if let Some((n, symbol)) = l.split_once(": ") {
            if n.chars().all(|c| c.is_ascii_digit()) {
                out.push(Frame { symbol: symbol.trim().to_string(), at: None });
            }
        }
    }
    out
}

/// Which function issued the request being sent, from the current call
/// stack (the SDK calls the interceptor inside the caller's future, so the
/// handler's frames are below it): its logical id and the innermost store
/// call, e.g. `ApiFunction (aws/src/dynamodb/events.rs:162, scan_all)`.
/// Without symbols (the release profile strips them), says so.
pub fn scan_origin() -> String {
    let frames = frames();
    // The outermost frame in hookline_aws::lambda is the handler's entry point.
    let entry =
        frames.iter().rev().find(|f| f.is_in("aws/src/lambda.rs", "hookline_aws::lambda::")).and_then(Frame::function);
    let function =
        entry.as_deref().and_then(|e| ENTRY_POINTS.iter().find(|(name, _)| *name == e)).map(|(e, function)| {
            let ingest = *e == "http"
                && frames.iter().any(|f| {
                    f.is_in("api/src/events.rs", "hookline_api::events::")
                        && f.function().is_some_and(|n| INGEST_ROUTES.contains(&n.as_str()))
                });
            if ingest {
                "IngestFunction"
            } else {
                *function
            }
        });
    // The crates a store call goes through: the core, the AWS adapters, the API.
    let in_shared = |f: &&Frame| match &f.at {
        Some((file, _)) => ["shared/", "aws/", "api/"].iter().any(|c| file.starts_with(c)),
        None => ["shared::", "hookline_aws::", "hookline_api::"]
            .iter()
            .any(|c| f.symbol.trim_start_matches('<').starts_with(c)),
    };
    let store_call = frames.iter().find(in_shared).map(|f| match (&f.at, f.function()) {
        (Some((file, line)), Some(name)) => format!("{file}:{line}, {name}"),
        (Some((file, line)), None) => format!("{file}:{line}"),
        (None, _) => f.symbol.clone(),
    });
    // Named frames of this workspace (the C library's may be named anyway).
    let named = frames.iter().any(|f| {
        f.symbol.contains("hookline_tests::")
            || f.at
                .as_ref()
                .is_some_and(|(file, _)| ["tests/", "shared/", "aws/", "api/"].iter().any(|c| file.starts_with(c)))
    });
    match (function, store_call) {
        (Some(function), Some(call)) => format!("{function} ({call})"),
        (Some(function), None) => function.to_string(),
        (None, Some(call)) => format!("no handler of the template ({call})"),
        (None, None) if named => "no handler of the template".to_string(),
        (None, None) => "an unnamed function: this build has no symbols (the release profile strips them); the debug \
                         build names it (`cargo run -p hookline-bench --bin cost`)"
            .to_string(),
    }
}
