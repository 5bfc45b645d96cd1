//! A small table renderer for the ops commands' terminal output: columns
//! padded to their widest cell (capped per column, longer cells cut with
//! `…`), a header row, optional colours. Written here rather than pulled
//! in as a dependency: the CLI needs little, and a newcomer's first build
//! stays short.
//!
//! Lists are printed a page at a time ([`Table::render`] per page, the
//! header only on the first): widths come from the first page and only
//! grow, so memory stays one page whatever `--all` walks through.

use std::fmt::Write as _;

/// One column: its header and the widest it may be (cells beyond are cut).
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// The header, printed upper-case.
    pub header: &'static str,
    /// The most characters a cell shows.
    pub max: usize,
}

/// A column of at most `max` characters.
pub const fn col(header: &'static str, max: usize) -> Column {
    Column { header, max }
}

/// ANSI styles the renderer applies (only when colours are on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// No style.
    Plain,
    /// Good news: completed, active, closed breaker.
    Good,
    /// Needs attention: failed, dead-lettered, open breaker.
    Bad,
    /// In between: running, requeued, half-open.
    Warn,
    /// Secondary text.
    Dim,
}

impl Style {
    fn code(self) -> Option<&'static str> {
        match self {
            Style::Plain => None,
            Style::Good => Some("32"),
            Style::Bad => Some("31"),
            Style::Warn => Some("33"),
            Style::Dim => Some("2"),
        }
    }
}

/// The style a well-known state value gets: `completed`, `failed`, `open`
/// (a dead letter waiting, or an open breaker), … Anything else is plain.
pub fn style_of(value: &str) -> Style {
    match value {
        "completed" | "Completed" | "true" | "closed" | "ok" | "delivered" => Style::Good,
        "failed" | "Failed" | "dead_lettered" | "DeadLettered" | "open" | "false" => Style::Bad,
        "running" | "requeued" | "skipped" | "half_open" | "Pending" | "Retrying" | "InFlight" => Style::Warn,
        "" | "-" => Style::Dim,
        _ => Style::Plain,
    }
}

/// Wraps `text` in the style's escape codes (nothing when plain).
pub fn paint(text: &str, style: Style, colour: bool) -> String {
    match style.code().filter(|_| colour) {
        Some(code) => format!("\x1b[{code}m{text}\x1b[0m"),
        None => text.to_string(),
    }
}

/// A table printed page by page.
#[derive(Debug)]
pub struct Table {
    columns: Vec<Column>,
    widths: Vec<usize>,
    colour: bool,
    header_done: bool,
    /// The terminal's width: wider rows have their widest columns cut.
    budget: Option<usize>,
}

/// Narrowest a column is cut to when a row does not fit the terminal.
const MIN_WIDTH: usize = 8;

/// Spaces between columns.
const GAP: usize = 2;

/// `widths` narrowed to fit `budget` characters (gaps included): the widest
/// column loses one character at a time, none below [`MIN_WIDTH`] (or its
/// own width, if less). A row that cannot fit stays as narrow as that.
pub fn shrink(widths: &[usize], budget: usize) -> Vec<usize> {
    let mut w = widths.to_vec();
    let total = |w: &[usize]| w.iter().sum::<usize>() + GAP * w.len().saturating_sub(1);
    while total(&w) > budget {
        match w.iter_mut().filter(|x| **x > MIN_WIDTH).max_by_key(|x| **x) {
            Some(widest) => *widest -= 1,
            None => break,
        }
    }
    w
}

/// A cell's width in characters (not bytes, so `é` counts once).
fn width(s: &str) -> usize {
    s.chars().count()
}

/// `s` cut to `max` characters, the last one `…` when anything was cut;
/// control characters (a newline in an error message) become spaces so a
/// row stays one line.
pub fn fit(s: &str, max: usize) -> String {
    let clean: String = s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if width(&clean) <= max {
        return clean;
    }
    let mut out: String = clean.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

impl Table {
    /// A table of these columns, coloured or not.
    pub fn new(columns: &[Column], colour: bool) -> Self {
        Table {
            widths: columns.iter().map(|c| width(c.header)).collect(),
            columns: columns.to_vec(),
            colour,
            header_done: false,
            budget: None,
        }
    }

    /// Rows at most `width` characters wide (a terminal's), cutting the
    /// widest columns; `None`: no limit.
    pub fn fit_to(mut self, width: Option<usize>) -> Self {
        self.budget = width;
        self
    }

    /// The text of one page of rows (the header before the first page).
    /// Each row has one cell per column; a cell's style comes from
    /// `styled` (column index, value) so that state columns stand out.
    pub fn render(&mut self, rows: &[Vec<String>], styled: impl Fn(usize, &str) -> Style) -> String {
        let rows: Vec<Vec<String>> =
            rows.iter().map(|r| r.iter().zip(&self.columns).map(|(cell, c)| fit(cell, c.max)).collect()).collect();
        for r in &rows {
            for (w, cell) in self.widths.iter_mut().zip(r) {
                *w = (*w).max(width(cell));
            }
        }
        if let Some(budget) = self.budget {
            self.widths = shrink(&self.widths, budget);
        }
        let rows: Vec<Vec<String>> =
            rows.iter().map(|r| r.iter().zip(&self.widths).map(|(cell, w)| fit(cell, *w)).collect()).collect();
        let mut out = String::new();
        if !self.header_done {
            self.header_done = true;
            let header: Vec<String> =
                self.columns.iter().zip(&self.widths).map(|(c, w)| fit(&c.header.to_uppercase(), *w)).collect();
            let line = self.line(&header, |_, _| Style::Plain);
            let _ = writeln!(out, "{}", if self.colour { format!("\x1b[1m{line}\x1b[0m") } else { line });
        }
        for r in &rows {
            let _ = writeln!(out, "{}", self.line(r, &styled));
        }
        out
    }

    fn line(&self, cells: &[String], styled: impl Fn(usize, &str) -> Style) -> String {
        let last = cells.len().saturating_sub(1);
        let mut line = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let pad = if i == last { 0 } else { self.widths[i].saturating_sub(width(cell)) };
            line.push_str(&paint(cell, styled(i, cell), self.colour));
            line.extend(std::iter::repeat_n(' ', pad));
            if i != last {
                line.push_str("  ");
            }
        }
        line.trim_end().to_string()
    }
}

/// A key/value table of one object: nested objects as dotted keys
/// (`health.breaker`), arrays of plain values joined with `, `, anything
/// deeper as compact JSON; `null` as `-`.
pub fn flatten(v: &serde_json::Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    flatten_into(&mut out, "", v, 0);
    out
}

fn flatten_into(out: &mut Vec<(String, String)>, prefix: &str, v: &serde_json::Value, depth: usize) {
    use serde_json::Value;
    match v {
        Value::Object(m) if depth < 2 && !m.is_empty() => {
            for (k, v) in m {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten_into(out, &key, v, depth + 1);
            }
        }
        other => out.push((prefix.to_string(), cell(other))),
    }
}

/// An RFC 3339 time as a table shows it: UTC to the second
/// (`2026-11-26 13:40:56`); anything else unchanged.
pub fn time_cell(v: &serde_json::Value) -> String {
    match v.as_str().map(chrono::DateTime::parse_from_rfc3339) {
        Some(Ok(t)) => t.with_timezone(&chrono::Utc).format("%Y-%m-%d %H:%M:%S").to_string(),
        _ => cell(v),
    }
}

/// The width of the terminal on stdout: `COLUMNS` when set, else what the
/// terminal says; `None` when stdout is not a terminal.
pub fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    if let Some(n) = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse().ok()).filter(|n: &usize| *n > 0) {
        return Some(n);
    }
    #[cfg(unix)]
    {
        let mut size = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
        // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer,
        // which points at a live, writable one.
        let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
        if ok && size.ws_col > 0 {
            return Some(usize::from(size.ws_col));
        }
    }
    None
}

/// A JSON value as one table cell: strings bare, `null` as `-`, arrays of
/// plain values joined with `, `, objects as compact JSON.
pub fn cell(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Array(a) if a.iter().all(|x| !x.is_object() && !x.is_array()) => {
            if a.is_empty() {
                "-".into()
            } else {
                a.iter().map(cell).collect::<Vec<_>>().join(", ")
            }
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pads_columns_and_prints_the_header_once() {
        let mut t = Table::new(&[col("id", 10), col("state", 10)], false);
        let first =
            t.render(&[vec!["a".into(), "open".into()], vec!["abc".into(), "skipped".into()]], |_, _| Style::Plain);
        assert_eq!(first, "ID   STATE\na    open\nabc  skipped\n");
        let second = t.render(&[vec!["abcdef".into(), "x".into()]], |_, _| Style::Plain);
        assert_eq!(second, "abcdef  x\n", "no header again; widths only grow");
    }

    #[test]
    fn cuts_long_cells_and_flattens_control_characters() {
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abcd", 4), "abcd");
        assert_eq!(fit("é\nx", 5), "é x");
        let mut t = Table::new(&[col("reason", 5)], false);
        assert_eq!(t.render(&[vec!["0123456789".into()]], |_, _| Style::Plain), "REASON\n0123…\n");
    }

    #[test]
    fn colours_only_when_asked_and_pads_outside_the_codes() {
        let mut t = Table::new(&[col("state", 10), col("n", 3)], true);
        let out =
            t.render(&[vec!["failed".into(), "1".into()]], |i, v| if i == 0 { style_of(v) } else { Style::Plain });
        assert_eq!(out, "\x1b[1mSTATE   N\x1b[0m\n\x1b[31mfailed\x1b[0m  1\n");
        let mut t = Table::new(&[col("state", 10)], false);
        assert!(!t.render(&[vec!["failed".into()]], |_, v| style_of(v)).contains('\x1b'));
    }

    #[test]
    fn rows_fit_the_terminal_by_cutting_the_widest_columns() {
        assert_eq!(shrink(&[10, 30, 5], 50), [10, 30, 5], "fits already");
        assert_eq!(shrink(&[10, 30, 5], 40), [10, 21, 5]);
        assert_eq!(shrink(&[20, 20], 22), [10, 10]);
        assert_eq!(shrink(&[20, 20, 3], 10), [8, 8, 3], "no narrower than the minimum");
        let mut t = Table::new(&[col("id", 40), col("reason", 40)], false).fit_to(Some(20));
        let out = t.render(&[vec!["sub_0123456789".into(), "gave up after 6 attempts".into()]], |_, _| Style::Plain);
        assert_eq!(out, "ID         REASON\nsub_0123…  gave up …\n");
        assert!(out.lines().all(|l| l.chars().count() <= 20), "{out}");
    }

    #[test]
    fn times_show_to_the_second_in_utc() {
        assert_eq!(time_cell(&json!("2026-11-26T13:40:56.079358198Z")), "2026-11-26 13:40:56");
        assert_eq!(time_cell(&json!("2026-11-26T14:40:56+01:00")), "2026-11-26 13:40:56");
        assert_eq!(time_cell(&json!(null)), "-");
        assert_eq!(time_cell(&json!("soon")), "soon");
    }

    #[test]
    fn flattens_objects_to_dotted_keys() {
        let v = json!({"id": "s1", "health": {"breaker": "closed", "window": {"a": 1}}, "tags": ["a", "b"],
                       "none": null, "list": [{"x": 1}], "empty": []});
        let f = flatten(&v);
        let get = |k: &str| f.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(get("id"), Some("s1"));
        assert_eq!(get("health.breaker"), Some("closed"));
        assert_eq!(get("health.window"), Some("{\"a\":1}"));
        assert_eq!(get("tags"), Some("a, b"));
        assert_eq!(get("none"), Some("-"));
        assert_eq!(get("list"), Some("[{\"x\":1}]"));
        assert_eq!(get("empty"), Some("-"));
    }
}
