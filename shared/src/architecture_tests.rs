//! Checks that keep the code's shape and its description in step: no import
//! circles between the modules of a library crate (a module that imports
//! another may not be imported back, directly or around a ring), and
//! `docs/architecture.md`'s module map and ports table name exactly the
//! modules and port traits the code has. Read from the sources, so a new
//! module, a renamed one or a new port fails here until the docs say so.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The library crates whose modules the map describes: (directory, name in
/// the map's headings).
const CRATES: &[&str] = &["shared", "sqlite", "aws", "api", "wire", "awsreq"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

/// Every module file of a crate: module path (`stage::saga`) → source.
/// Modules declared only for tests (`#[cfg(test)]`, the testkit) are left
/// out: they are not part of the crate's shape.
fn modules(krate: &str) -> BTreeMap<String, String> {
    let src = workspace().join(krate).join("src");
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.expect("a directory entry").path();
            if p.is_dir() {
                dirs.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(&src).expect("under src").with_extension("");
            let mut parts: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
            if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
                parts.pop();
            }
            out.insert(parts.join("::"), std::fs::read_to_string(&p).expect("a source file"));
        }
    }
    // Drop test-only modules: declared right after a cfg(test) attribute.
    let declared_for_tests: Vec<String> = out
        .iter()
        .flat_map(|(parent, text)| {
            let lines: Vec<&str> = text.lines().collect();
            lines
                .windows(2)
                .filter(|w| w[0].trim_start().starts_with("#[cfg(") && w[0].contains("test"))
                .filter_map(|w| w[1].trim().strip_prefix("pub mod ").or_else(|| w[1].trim().strip_prefix("mod ")))
                .map(|m| {
                    let m = m.trim_end_matches(';').trim();
                    if parent.is_empty() {
                        m.to_string()
                    } else {
                        format!("{parent}::{m}")
                    }
                })
                .collect::<Vec<_>>()
        })
        .collect();
    for m in declared_for_tests {
        out.remove(&m);
    }
    out.remove("");
    out
}

/// The text of a source without comments and without its unit tests.
fn code(text: &str) -> String {
    let without_tests = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    without_tests
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Each module's imports of other modules of the same crate: every
/// `crate::a::b` path (also inside `use crate::{…}` groups) and `super::x`,
/// resolved to the deepest module it names.
fn imports(mods: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut graph = BTreeMap::new();
    for (m, text) in mods {
        let text = code(text);
        let mut paths: Vec<Vec<String>> = Vec::new();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + "crate::".len()..];
            if let Some(group) = after.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let p: Vec<String> = item.trim().split("::").map(|s| s.trim().to_string()).collect();
                    paths.push(p);
                }
            } else {
                let end = after.find(|c: char| !(ident(c) || c == ':')).unwrap_or(after.len());
                paths.push(after[..end].split("::").filter(|s| !s.is_empty()).map(str::to_string).collect());
            }
            rest = after;
        }
        let parent = m.rsplit_once("::").map_or("", |(p, _)| p);
        let mut rest = text.as_str();
        while let Some(i) = rest.find("super::") {
            let before_ok = i == 0 || !rest[..i].ends_with(|c: char| ident(c) || c == ':');
            let after = &rest[i + "super::".len()..];
            let end = after.find(|c: char| !ident(c)).unwrap_or(after.len());
            if before_ok && !after[..end].is_empty() {
                let mut p: Vec<String> = parent.split("::").filter(|s| !s.is_empty()).map(str::to_string).collect();
                p.push(after[..end].to_string());
                paths.push(p);
            }
            rest = after;
        }
        // A module depends on the submodules it declares (it re-exports or
        // calls them); a submodule's imports of its ancestors are not
        // counted, so a module and its submodules act as one.
        for l in text.lines() {
            let l = l.trim();
            if let Some(child) = l.strip_prefix("pub mod ").or_else(|| l.strip_prefix("mod ")) {
                let child = child.trim_end_matches(';').trim();
                let mut p: Vec<String> = m.split("::").filter(|s| !s.is_empty()).map(str::to_string).collect();
                p.push(child.to_string());
                paths.push(p);
            }
        }
        let mut to = BTreeSet::new();
        for p in paths {
            let target = (1..=p.len()).rev().map(|k| p[..k].join("::")).find(|c| mods.contains_key(c));
            if let Some(t) = target {
                if &t != m && !m.starts_with(&format!("{t}::")) {
                    to.insert(t);
                }
            }
        }
        graph.insert(m.clone(), to);
    }
    graph
}

/// The strongly connected components of more than one module (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
        let i = w.index.len();
        w.index.insert(v, i);
        w.low.insert(v, i);
        w.stack.push(v);
        w.on_stack.insert(v);
        for t in &w.graph[v] {
            let t = t.as_str();
            if !w.index.contains_key(t) {
                visit(w, t);
                let l = w.low[t].min(w.low[v]);
                w.low.insert(v, l);
            } else if w.on_stack.contains(t) {
                let l = w.index[t].min(w.low[v]);
                w.low.insert(v, l);
            }
        }
        if w.low[v] == w.index[v] {
            let mut comp = Vec::new();
            while let Some(x) = w.stack.pop() {
                w.on_stack.remove(x);
                comp.push(x.to_string());
                if x == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                w.found.push(comp);
            }
        }
    }
    let mut w = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !w.index.contains_key(v.as_str()) {
            visit(&mut w, v);
        }
    }
    w.found
}

fn architecture_md() -> String {
    let p = workspace().join("docs").join("architecture.md");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The section of `doc` under the `## {title}` heading.
fn section<'a>(doc: &'a str, title: &str) -> &'a str {
    let start =
        doc.find(&format!("\n## {title}\n")).unwrap_or_else(|| panic!("docs/architecture.md has no `## {title}`"));
    let body = &doc[start + title.len() + 5..];
    &body[..body.find("\n## ").unwrap_or(body.len())]
}

/// The backquoted names in the first column of a markdown table's rows.
fn first_column(table: &str) -> Vec<String> {
    table
        .lines()
        .filter(|l| l.starts_with("| `"))
        .flat_map(|l| {
            let cell = l.trim_start_matches('|').split('|').next().unwrap_or("");
            cell.split('`').skip(1).step_by(2).map(str::to_string).collect::<Vec<_>>()
        })
        .collect()
}

/// The one circle left, and why: a saga's transitions run through its lane
/// (a saga that ends releases the next one of its lane, which starts it:
/// `stage::saga` → `stage::ordering::ended` → `stage::saga::begin`), a real
/// recursion of the workflow, not an import that runs the wrong way.
/// Breaking it means the lane handing the sagas to start back to the saga
/// stage. Listed here so that any other circle, or this one growing, fails.
const KNOWN_CIRCLES: &[&str] = &["shared: stage::ordering ↔ stage::saga"];

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let mut found = Vec::new();
    for krate in CRATES {
        let mods = modules(krate);
        for c in circles(&imports(&mods)) {
            found.push(format!("{krate}: {}", c.join(" ↔ ")));
        }
    }
    assert_eq!(found, KNOWN_CIRCLES, "import circles between modules (other than the known one)");
}

#[test]
fn the_circle_check_finds_a_circle() {
    let mods: BTreeMap<String, String> = [
        ("a".to_string(), "use crate::b::X;".to_string()),
        ("b".to_string(), "use crate::{c::Y, d};".to_string()),
        ("c".to_string(), "fn f() { crate::a::g() }".to_string()),
        ("d".to_string(), "// crate::a::g in a comment is not an import".to_string()),
        ("e".to_string(), "use super::d;".to_string()),
        // f's submodule imports g, which imports f: f and g are a circle.
        ("f".to_string(), "mod x;\npub use x::Y;".to_string()),
        ("f::x".to_string(), "use crate::g::Z; use super::W;".to_string()),
        ("g".to_string(), "use crate::f::W;".to_string()),
    ]
    .into();
    let g = imports(&mods);
    assert_eq!(g["e"], ["d".to_string()].into());
    assert_eq!(g["f::x"], ["g".to_string()].into(), "a submodule's import of its parent is not counted");
    assert_eq!(
        circles(&g),
        vec![
            vec!["a".to_string(), "b".to_string(), "c".to_string()],
            vec!["f".to_string(), "f::x".to_string(), "g".to_string()]
        ]
    );
}

#[test]
fn the_module_map_names_every_module_and_only_those() {
    let doc = architecture_md();
    let map = section(&doc, "Module map");
    let mut problems = Vec::new();
    for krate in CRATES {
        // One table per crate, under `### \`<crate>/\``.
        let heading = format!("### `{krate}/`");
        let Some(at) = map.find(&heading) else {
            problems.push(format!("no `{heading}` table in the module map"));
            continue;
        };
        let table = &map[at + heading.len()..];
        let table = &table[..table.find("\n### ").unwrap_or(table.len())];
        // Listed as files (`saga.rs`, `stage/saga.rs`) or directories
        // (`envelope/`, which stands for the module and everything in it).
        // `x/mod.rs` is module `x`; `lib.rs` is the crate root, which every
        // crate has and the check leaves out.
        let listed: BTreeSet<String> = first_column(table)
            .into_iter()
            .filter(|f| f != "lib.rs")
            .map(|f| f.trim_end_matches(".rs").trim_end_matches("/mod").trim_end_matches('/').replace('/', "::"))
            .collect();
        let code: BTreeSet<String> = modules(krate).into_keys().collect();
        for m in &code {
            let covered = listed.contains(m) || listed.iter().any(|l| m.starts_with(&format!("{l}::")));
            if !covered {
                problems.push(format!("{krate}: module `{m}` is not in the map"));
            }
        }
        for l in &listed {
            if !code.contains(l) {
                problems.push(format!("{krate}: the map names `{l}`, which is not a module"));
            }
        }
    }
    assert!(problems.is_empty(), "docs/architecture.md#module-map is out of date:\n  {}", problems.join("\n  "));
}

#[test]
fn the_ports_table_names_every_port_and_only_those() {
    // A port is an async trait an adapter implements: every trait of
    // ports.rs, and any `#[async_trait] pub trait` elsewhere in the crate
    // (the destination transport, the master-key wrapper).
    let mut code = BTreeSet::new();
    for (module, text) in modules("shared") {
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let Some(rest) = l.strip_prefix("pub trait ") else { continue };
            let is_port = module == "ports" || (i > 0 && lines[i - 1].trim() == "#[async_trait]");
            if is_port {
                code.insert(rest.split(|c: char| !c.is_ascii_alphanumeric()).next().unwrap_or("").to_string());
            }
        }
    }
    let doc = architecture_md();
    let listed: BTreeSet<String> = first_column(section(&doc, "Ports and adapters")).into_iter().collect();
    assert!(code.len() >= 10, "the port traits were not found in ports.rs: {code:?}");
    assert_eq!(
        listed, code,
        "docs/architecture.md#ports-and-adapters must list exactly the port traits of shared (ports.rs, and async \
         traits elsewhere)"
    );
}

/// No source file of the workspace (tests included) is over 900 lines: a
/// file that grows past it is split by feature, so any part of the code
/// can be read whole.
#[test]
fn no_source_file_is_over_900_lines() {
    const MAX_LINES: usize = 900;
    let root = workspace();
    let mut dirs = vec![root.clone()];
    let mut too_long = Vec::new();
    let mut seen = 0;
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.expect("a directory entry").path();
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if p.is_dir() {
                // Build output, the venvs, git and node metadata are not sources.
                if !name.starts_with('.') && name != "target" && name != "node_modules" {
                    dirs.push(p);
                }
                continue;
            }
            if p.extension().is_some_and(|x| x == "rs") {
                seen += 1;
                let lines = std::fs::read_to_string(&p).map(|t| t.lines().count()).unwrap_or(0);
                if lines > MAX_LINES {
                    too_long.push(format!("{} ({lines} lines)", p.strip_prefix(&root).unwrap_or(&p).display()));
                }
            }
        }
    }
    assert!(seen > 100, "the sources were not found under {}", root.display());
    assert!(too_long.is_empty(), "split these by feature (at most {MAX_LINES} lines):\n  {}", too_long.join("\n  "));
}
