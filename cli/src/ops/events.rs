//! `hookline events list|show`: find events by type, tenant, partition,
//! time and outcome; show one with every delivery of it.

use serde_json::{json, Value};

use super::output::{field, time, View};
use super::{list, time, Common, PageArgs};
use crate::table::col;

/// Event commands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Find events, newest first (by when Hookline received them).
    #[command(after_help = examples!(
        "hookline events list --event-type 'order.*' --tenant acme --since 6h",
        "hookline events list --partition-key cart-42 --tenant acme",
        "hookline events list --outcome dead_lettered --since 2026-11-25 --until 2026-11-26 --all --output json"
    ))]
    List(ListArgs),
    /// Show an event (with its body) and every delivery of it: each saga's
    /// status and attempts, and where requeued or replayed ones came from.
    #[command(after_help = examples!("hookline events show order-7781", "hookline events show order-7781 --output json"))]
    Show(ShowArgs),
}

/// `events list` filters.
#[derive(clap::Args)]
pub struct ListArgs {
    /// An event type (`order.created`) or a pattern with a trailing `*` (`order.*`).
    #[arg(long)]
    event_type: Option<String>,
    /// Only this tenant's events.
    #[arg(long)]
    tenant: Option<String>,
    /// Only this partition's events.
    #[arg(long)]
    partition_key: Option<String>,
    /// Received at or after: RFC 3339, a date, or a duration ago (30m, 6h, 2d).
    #[arg(long, value_parser = time::parse)]
    since: Option<String>,
    /// Received before (same forms as --since).
    #[arg(long, value_parser = time::parse)]
    until: Option<String>,
    /// Only events with a dead letter (`dead_lettered`) or with a failed
    /// attempt (`failed`).
    #[arg(long, value_parser = ["failed", "dead_lettered"])]
    outcome: Option<String>,
    #[command(flatten)]
    page: PageArgs,
    #[command(flatten)]
    common: Common,
}

/// `events show`.
#[derive(clap::Args)]
pub struct ShowArgs {
    /// Event id.
    event_id: String,
    #[command(flatten)]
    common: Common,
}

const VIEW: View = View {
    columns: &[
        col("id", 40),
        col("received", 19),
        col("type", 32),
        col("tenant", 20),
        col("partition", 24),
        col("seq", 8),
        col("outcome", 13),
    ],
    row: |e| {
        vec![
            field(e, "id"),
            time(e, "received_at"),
            field(e, "type"),
            field(e, "tenant_id"),
            field(e, "partition_key"),
            field(e, "sequence"),
            field(e, "outcome"),
        ]
    },
    states: &[6],
};

/// Runs an event command.
pub async fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::List(a) => {
            let q = vec![
                ("event_type", a.event_type),
                ("tenant_id", a.tenant),
                ("partition_key", a.partition_key),
                ("since", a.since),
                ("until", a.until),
                ("outcome", a.outcome),
            ];
            list(&a.common, &["v1", "events"], q, &a.page, &VIEW, "events").await
        }
        Command::Show(a) => show(a).await,
    }
}

/// `events show` (and the older `inspect`): `{"event", "deliveries"}` as
/// one JSON document, or the event's fields and a table of deliveries.
pub async fn show(a: ShowArgs) -> anyhow::Result<()> {
    let client = a.common.client()?;
    let out = a.common.out();
    let event = client.get(&["v1", "events", &a.event_id], &[]).await?;
    // Every page of its deliveries (the API pages them, 100 sagas a page).
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = client.get(&["v1", "events", &a.event_id, "deliveries"], &[("cursor", cursor.take())]).await?;
        all.extend(page["deliveries"].as_array().cloned().unwrap_or_default());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    let deliveries = Value::Array(all);
    if out.json() {
        out.object(&json!({"event": event, "deliveries": deliveries}), &[])?;
        return Ok(());
    }
    out.object(&event, &[])?;
    let rows: Vec<Vec<String>> =
        deliveries.as_array().map(Vec::as_slice).unwrap_or_default().iter().map(delivery_row).collect();
    if rows.is_empty() {
        out.line("\nno deliveries")?;
        return Ok(());
    }
    let mut t = out.table(&[
        col("saga", 40),
        col("subscription", 40),
        col("status", 12),
        col("attempts", 8),
        col("last status", 11),
        col("last error", 48),
        col("origin", 24),
    ]);
    out.line("")?;
    super::output::emit(
        &t.render(&rows, |i, v| if i == 2 { crate::table::style_of(v) } else { crate::table::Style::Plain }),
    )?;
    Ok(())
}

fn delivery_row(d: &Value) -> Vec<String> {
    let attempts = d["attempts"].as_array().map(Vec::as_slice).unwrap_or_default();
    let last = attempts.last().cloned().unwrap_or(Value::Null);
    let origin = match (d["origin"]["kind"].as_str(), d["origin"]["actor"].as_str()) {
        (Some(k), Some(a)) => format!("{k} by {a}"),
        (Some(k), None) => k.to_string(),
        _ => "-".into(),
    };
    vec![
        field(d, "saga_id"),
        field(d, "subscription_id"),
        field(d, "status"),
        attempts.len().to_string(),
        field(&last, "status_code"),
        field(d, "last_error"),
        origin,
    ]
}
