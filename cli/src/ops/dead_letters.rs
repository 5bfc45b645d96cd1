//! `hookline dead-letters …`: list and show dead letters; requeue or skip
//! one by id, or every open one a filter matches as a bulk job.

use hookline_wire::dead_letters::{BulkRequest, DeadLetter, DeadLetterFilter, ReasonBody, Requeued, Skipped};

use super::client::{json, read, OpsError};
use super::output::{field, time, View};
use super::{jobs, list_of, reindex, time, Common, PageArgs, ReindexArgs};
use crate::table::col;

/// Dead-letter commands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// List dead letters, newest first (open ones unless --state says otherwise).
    #[command(after_help = examples!(
        "hookline dead-letters list",
        "hookline dead-letters list --subscription sub_123 --since 1d --state any",
        "hookline dead-letters list --event-type 'order.*' --all --output json"
    ))]
    List {
        /// open, requeued, skipped, or any.
        #[arg(long, default_value = "open", value_parser = ["open", "requeued", "skipped", "any"])]
        state: String,
        #[command(flatten)]
        filter: Filter,
        #[command(flatten)]
        page: PageArgs,
        #[command(flatten)]
        common: Common,
    },
    /// Show one dead letter: why it died, its saga as it ended, its resolution.
    #[command(after_help = examples!("hookline dead-letters show sag_123", "hookline dead-letters show sag_123 --output json"))]
    Show {
        /// Dead letter id (the dead saga's id).
        id: String,
        #[command(flatten)]
        common: Common,
    },
    /// Requeue: a new saga for the same event and subscription (same
    /// webhook-id). One by id, or every open dead letter a filter matches,
    /// as a job whose progress is shown until it is done.
    #[command(after_help = examples!(
        "hookline dead-letters requeue sag_123 --reason 'endpoint fixed'",
        "hookline dead-letters requeue --subscription sub_123 --since 2d --reason 'endpoint was down'",
        "hookline dead-letters requeue --all-open --reason 'after the outage' --no-wait --output json"
    ))]
    Requeue(Resolve),
    /// Skip: close open dead letters without delivering them. One by id, or
    /// in bulk by filter, as a job.
    #[command(after_help = examples!(
        "hookline dead-letters skip sag_123 --reason 'customer deleted the order'",
        "hookline dead-letters skip --event-type test.ping --reason 'test traffic'"
    ))]
    Skip(Resolve),
    /// Write the listing keys of dead letters stored before they existed
    /// (once, after upgrading a deployment), so the filters and bulk
    /// requeue and skip find them: pages through every stored dead letter
    /// (`POST /v1/dead-letters/reindex`, following `next_cursor`) and
    /// prints the totals. Safe to run again; a second run reindexes 0.
    #[command(after_help = examples!(
        "hookline dead-letters reindex --url https://abc.execute-api.eu-west-1.amazonaws.com --aws-region eu-west-1"
    ))]
    Reindex(ReindexArgs),
}

/// Dead-letter filters (list, bulk requeue and skip).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Filter {
    /// Only this subscription's dead letters.
    #[arg(long)]
    subscription: Option<String>,
    /// Only this event type.
    #[arg(long)]
    event_type: Option<String>,
    /// Only this tenant's.
    #[arg(long)]
    tenant: Option<String>,
    /// Dead-lettered at or after: RFC 3339, a date, or a duration ago (30m, 6h, 2d).
    #[arg(long, value_parser = time::parse)]
    since: Option<String>,
    /// Dead-lettered before (same forms as --since).
    #[arg(long, value_parser = time::parse)]
    until: Option<String>,
}

impl Filter {
    fn pairs(self) -> Vec<(&'static str, Option<String>)> {
        vec![
            ("subscription_id", self.subscription),
            ("event_type", self.event_type),
            ("tenant_id", self.tenant),
            ("since", self.since),
            ("until", self.until),
        ]
    }

    fn is_empty(&self) -> bool {
        self.clone().pairs().iter().all(|(_, v)| v.is_none())
    }

    /// As the body of a bulk job takes it.
    fn body(self) -> anyhow::Result<DeadLetterFilter> {
        Ok(DeadLetterFilter {
            subscription_id: self.subscription,
            event_type: self.event_type,
            tenant_id: self.tenant,
            since: self.since.as_deref().map(time::instant).transpose()?,
            until: self.until.as_deref().map(time::instant).transpose()?,
        })
    }
}

/// `requeue` / `skip`: one id, or a filter.
#[derive(clap::Args, Debug)]
pub struct Resolve {
    /// Dead letter id; without it, every open dead letter the filter flags
    /// (or --all-open) select.
    #[arg(conflicts_with_all = ["subscription", "event_type", "tenant", "since", "until", "all_open", "no_wait"])]
    id: Option<String>,
    #[command(flatten)]
    filter: Filter,
    /// Every open dead letter (a bulk action without a filter).
    #[arg(long)]
    all_open: bool,
    /// Why (required; kept in the audit record).
    #[arg(long)]
    reason: String,
    /// Start the bulk job and print it without waiting for it to finish.
    #[arg(long)]
    no_wait: bool,
    #[command(flatten)]
    common: Common,
}

const VIEW: View = View {
    columns: &[
        col("id", 40),
        col("created", 19),
        col("state", 8),
        col("type", 28),
        col("event", 32),
        col("subscription", 32),
        col("attempts", 8),
        col("reason", 48),
    ],
    row: |d| {
        vec![
            field(d, "id"),
            time(d, "created_at"),
            field(d, "state"),
            field(d, "event_type"),
            field(d, "event_id"),
            field(d, "subscription_id"),
            field(d, "attempts"),
            field(d, "reason"),
        ]
    },
    states: &[2],
};

/// Runs a dead-letter command.
pub async fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::List { state, filter, page, common } => {
            let mut q = filter.pairs();
            q.push(("state", Some(state).filter(|s| s != "any")));
            list_of::<DeadLetter>(&common, &["v1", "dead-letters"], q, &page, &VIEW, "dead letters").await
        }
        Command::Show { id, common } => {
            let dl: DeadLetter = read(common.client()?.get(&["v1", "dead-letters", &id], &[]).await?)?;
            common.out().object(&json(&dl), &["event"])?;
            Ok(())
        }
        Command::Requeue(r) => resolve(r, "requeue").await,
        Command::Skip(r) => resolve(r, "skip").await,
        Command::Reindex(args) => reindex("dead-letters", args).await,
    }
}

/// One dead letter by id (`POST /v1/dead-letters/{id}/<action>`), or a bulk
/// job (`POST /v1/dead-letters/<action>` with the filter) followed to its end
/// unless `--no-wait`.
async fn resolve(r: Resolve, action: &str) -> anyhow::Result<()> {
    if let Some(id) = &r.id {
        let client = r.common.client()?;
        let body = json(&ReasonBody { reason: Some(r.reason), actor: None });
        let answer = client.send_json("POST", &["v1", "dead-letters", id, action], Some(body)).await?;
        let shown =
            if action == "requeue" { json(&read::<Requeued>(answer)?) } else { json(&read::<Skipped>(answer)?) };
        r.common.out().object(&shown, &[])?;
        return Ok(());
    }
    if r.filter.is_empty() && !r.all_open {
        return Err(OpsError::Usage(format!(
            "{action} what? give a dead letter id, filter flags (--subscription, --event-type, --tenant, \
             --since, --until), or --all-open for every open dead letter"
        ))
        .into());
    }
    let body = BulkRequest { filter: Some(r.filter.body()?), reason: Some(r.reason) };
    let client = r.common.client()?;
    let out = r.common.out();
    let started = jobs::started(client.send_json("POST", &["v1", "dead-letters", action], Some(json(&body))).await?)?;
    let id = &started.job_id;
    let job = if r.no_wait { jobs::get(&client, id).await? } else { jobs::wait(&client, id, &out).await? };
    jobs::print(&job, &out)
}
