//! How the ops commands print: a table for people (the default when stdout
//! is a terminal), JSON for scripts (the default otherwise): one JSON
//! document for a single object, JSON lines (one item per line) for lists.
//! Colours only in a table on a terminal, never with `NO_COLOR`. Notes for
//! people (the next page, progress) go to stderr, so stdout stays data.

use std::io::{IsTerminal, Write};

use serde_json::Value;

use super::client::OpsError;
use crate::table::{self, Column, Style, Table};

/// `--output`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// JSON: one document for a single object, JSON lines for lists.
    Json,
    /// Aligned columns for people.
    Table,
}

/// The output flag every ops command takes.
#[derive(clap::Args, Clone, Debug)]
pub struct OutputArgs {
    /// Output format [default: table when stdout is a terminal, else json].
    #[arg(long, short = 'o', value_enum, env = "HOOKLINE_OUTPUT", global = true)]
    pub output: Option<Format>,
}

/// Where and how a command prints.
#[derive(Debug, Clone, Copy)]
pub struct Out {
    /// Table or JSON.
    pub format: Format,
    /// ANSI colours in tables.
    pub colour: bool,
    /// Whether stderr is a terminal (progress bars).
    pub stderr_tty: bool,
    /// The terminal's width, when stdout is one: tables are cut to fit.
    pub width: Option<usize>,
}

/// Whether colours are on: only in a table, only on a terminal, and not
/// when `NO_COLOR` is set to anything non-empty (<https://no-color.org>).
pub fn colour_on(format: Format, stdout_tty: bool, no_color: Option<&str>) -> bool {
    format == Format::Table && stdout_tty && no_color.is_none_or(str::is_empty)
}

impl Out {
    /// The output the flag and the terminal ask for.
    pub fn new(args: &OutputArgs) -> Self {
        let tty = std::io::stdout().is_terminal();
        let format = args.output.unwrap_or(if tty { Format::Table } else { Format::Json });
        let no_color = std::env::var("NO_COLOR").ok();
        Out {
            format,
            colour: colour_on(format, tty, no_color.as_deref()),
            stderr_tty: std::io::stderr().is_terminal(),
            width: table::terminal_width(),
        }
    }

    /// Whether this is JSON output.
    pub fn json(&self) -> bool {
        self.format == Format::Json
    }

    /// Prints one object: pretty JSON, or a key/value table (keys in
    /// `skip` left out, e.g. a body too long to read in a table).
    pub fn object(&self, v: &Value, skip: &[&str]) -> Result<(), OpsError> {
        if self.json() {
            return emit(&format!("{}\n", serde_json::to_string_pretty(v).expect("json serializes")));
        }
        let mut t = self.table(&[table::col("field", 40), table::col("value", 120)]);
        let rows: Vec<Vec<String>> = table::flatten(v)
            .into_iter()
            .filter(|(k, _)| !skip.iter().any(|s| k == s || k.starts_with(&format!("{s}."))))
            .map(|(k, v)| vec![k, v])
            .collect();
        emit(&t.render(&rows, |i, v| if i == 1 { state_style(v) } else { Style::Plain }))
    }

    /// A table for this output (colours, the terminal's width).
    pub fn table(&self, columns: &[Column]) -> Table {
        Table::new(columns, self.colour).fit_to(self.width)
    }

    /// Prints a line of text for people (table mode) on stdout.
    pub fn line(&self, text: &str) -> Result<(), OpsError> {
        emit(&format!("{text}\n"))
    }
}

/// Colours only the values that are states; ids and free text stay plain.
fn state_style(v: &str) -> Style {
    match table::style_of(v) {
        Style::Dim => Style::Dim,
        s if v.chars().all(|c| c.is_ascii_alphabetic() || c == '_') => s,
        _ => Style::Plain,
    }
}

/// How a list's items become table rows.
pub struct View {
    /// The columns.
    pub columns: &'static [Column],
    /// One row per item.
    pub row: fn(&Value) -> Vec<String>,
    /// Columns holding states, coloured by value.
    pub states: &'static [usize],
}

/// A list being printed page by page.
pub struct ListPrinter<'a> {
    out: Out,
    view: &'a View,
    table: Table,
    /// Items printed so far.
    pub count: u64,
}

impl<'a> ListPrinter<'a> {
    /// A printer for items shown with `view`.
    pub fn new(out: Out, view: &'a View) -> Self {
        ListPrinter { out, view, table: out.table(view.columns), count: 0 }
    }

    /// Prints one page of items (JSON lines, or table rows) and flushes,
    /// so a long `--all` shows progress as it goes.
    pub fn page(&mut self, items: &[Value]) -> Result<(), OpsError> {
        self.count += items.len() as u64;
        if items.is_empty() {
            return Ok(());
        }
        if self.out.json() {
            let mut text = String::new();
            for item in items {
                text.push_str(&serde_json::to_string(item).expect("json serializes"));
                text.push('\n');
            }
            return emit(&text);
        }
        let rows: Vec<Vec<String>> = items.iter().map(self.view.row).collect();
        let states = self.view.states;
        emit(&self.table.render(&rows, |i, v| if states.contains(&i) { table::style_of(v) } else { Style::Plain }))
    }
}

/// Writes to stdout and flushes; a closed pipe is [`OpsError::BrokenPipe`].
pub fn emit(text: &str) -> Result<(), OpsError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(OpsError::BrokenPipe),
        Err(e) => {
            eprintln!("error: writing to stdout: {e}");
            Err(OpsError::BrokenPipe)
        }
    }
}

/// `v[key]` as a table cell.
pub fn field(v: &Value, key: &str) -> String {
    table::cell(&v[key])
}

/// `v[key]`, a time, as a table cell (UTC to the second).
pub fn time(v: &Value, key: &str) -> String {
    table::time_cell(&v[key])
}

/// The command line as typed, with `--cursor` set to `cursor` (replacing
/// any given) and the flags in `fixed` set to the values that were sent
/// (`--since 2h` becomes the time it meant, so that the next page has the
/// filters of this one), quoted for a POSIX shell: the command that prints
/// the next page.
pub fn next_page_command(args: &[String], cursor: &str, fixed: &[(&str, &str)]) -> String {
    let mut out = vec!["hookline".to_string()];
    let mut args = args.iter();
    while let Some(a) = args.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v)),
            _ => (a.as_str(), None),
        };
        if flag == "--cursor" {
            if inline.is_none() {
                args.next();
            }
            continue;
        }
        if let Some((_, value)) = fixed.iter().find(|(f, _)| *f == flag) {
            if inline.is_none() {
                args.next();
            }
            out.push(flag.to_string());
            out.push(quote(value));
            continue;
        }
        out.push(quote(a));
    }
    // One word, `--cursor=…`: a cursor may begin with `-`, which would
    // read as a flag after a separate `--cursor`.
    out.push(quote(&format!("--cursor={cursor}")));
    out.join(" ")
}

/// `s` as one word for a POSIX shell.
fn quote(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./:=@,+%".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_only_for_tables_on_a_terminal_without_no_color() {
        assert!(colour_on(Format::Table, true, None));
        assert!(colour_on(Format::Table, true, Some("")), "an empty NO_COLOR does not count");
        assert!(!colour_on(Format::Table, true, Some("1")));
        assert!(!colour_on(Format::Table, false, None));
        assert!(!colour_on(Format::Json, true, None));
    }

    #[test]
    fn the_next_page_command_replaces_the_cursor_and_quotes() {
        let args: Vec<String> =
            ["events", "list", "--cursor", "old", "--event-type", "order.*", "--tenant", "a b", "--cursor=x"]
                .map(String::from)
                .to_vec();
        assert_eq!(
            next_page_command(&args, "c1", &[]),
            "hookline events list --event-type 'order.*' --tenant 'a b' --cursor=c1"
        );
        let args: Vec<String> =
            ["events", "list", "--since", "2h", "--until=1h", "--limit", "5"].map(String::from).to_vec();
        assert_eq!(
            next_page_command(&args, "c2", &[("--since", "2026-11-26T10:00:00Z"), ("--until", "2026-11-26T11:00:00Z")]),
            "hookline events list --since 2026-11-26T10:00:00Z --until 2026-11-26T11:00:00Z --limit 5 --cursor=c2",
            "relative times become the times the first page was asked for"
        );
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(next_page_command(&[], "-9x", &[]), "hookline --cursor=-9x", "a cursor beginning with '-'");
    }
}
