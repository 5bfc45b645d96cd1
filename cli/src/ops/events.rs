//! `hookline events list|show`: find events by type, tenant, partition,
//! time and outcome; show one with every delivery of it.

use hookline_wire::events::{DeliveryView, EventListItem, EventView};
use hookline_wire::Page;
use serde::Serialize;
use serde_json::{json, Value};

use super::output::View;
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
    row: |v| match serde_json::from_value::<EventListItem>(v.clone()) {
        Ok(e) => vec![
            e.id,
            when(&e.received_at),
            e.event_type,
            cell(&e.tenant_id),
            cell(&e.partition_key),
            cell(&e.sequence),
            cell(&e.outcome),
        ],
        Err(e) => unreadable(7, &e),
    },
    states: &[6],
};

/// A wire value as a table cell (`-` for none; enums by their wire name).
pub(super) fn cell(v: &impl Serialize) -> String {
    crate::table::cell(&serde_json::to_value(v).unwrap_or(Value::Null))
}

/// A time as a table cell (UTC to the second).
pub(super) fn when(t: &chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// The row of an item the CLI could not read as its wire type (a server
/// of another version): what failed in the first of `columns` cells.
pub(super) fn unreadable(columns: usize, e: &serde_json::Error) -> Vec<String> {
    let mut row = vec![format!("unreadable item: {e}")];
    row.resize(columns, "-".into());
    row
}

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
    let event: EventView = serde_json::from_value(client.get(&["v1", "events", &a.event_id], &[]).await?)?;
    // Every page of its deliveries (the API pages them, 100 sagas a page).
    let mut deliveries: Vec<DeliveryView> = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = client.get(&["v1", "events", &a.event_id, "deliveries"], &[("cursor", cursor.take())]).await?;
        let page: Page<DeliveryView> = serde_json::from_value(page)?;
        deliveries.extend(page.items);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    if out.json() {
        out.object(&json!({"event": event, "deliveries": deliveries}), &[])?;
        return Ok(());
    }
    out.object(&serde_json::to_value(&event)?, &[])?;
    let rows: Vec<Vec<String>> = deliveries.iter().map(delivery_row).collect();
    if rows.is_empty() {
        out.line("\nno deliveries")?;
        return Ok(());
    }
    let mut t = out.table(&[
        col("saga", 40),
        col("subscription", 40),
        col("status", 13),
        col("attempts", 8),
        col("last status", 11),
        col("last error", 48),
        col("origin", 24),
        col("acknowledged", 32),
    ]);
    out.line("")?;
    super::output::emit(
        &t.render(&rows, |i, v| if i == 2 { crate::table::style_of(v) } else { crate::table::Style::Plain }),
    )?;
    Ok(())
}

fn delivery_row(d: &DeliveryView) -> Vec<String> {
    let origin = match &d.origin {
        Some(o) => format!("{} by {}", cell(&o.kind), o.actor),
        None => "-".into(),
    };
    vec![
        d.saga_id.clone(),
        d.subscription_id.clone(),
        cell(&d.status),
        d.attempts.len().to_string(),
        cell(&d.attempts.last().and_then(|a| a.status_code)),
        cell(&d.last_error),
        origin,
        acknowledged(d),
    ]
}

/// The subscriber's acknowledgement of a delivery: `processed`, or
/// `failed: <reason>`, with its reference; `-` when none.
fn acknowledged(d: &DeliveryView) -> String {
    let Some(a) = &d.acknowledgement else { return "-".into() };
    let mut s = cell(&a.status);
    if let Some(r) = &a.reason {
        s.push_str(&format!(": {r}"));
    }
    if let Some(r) = &a.reference {
        s.push_str(&format!(" (ref {r})"));
    }
    s
}
