//! Ops commands: clients of a running Hookline's HTTP API (local `hookline
//! serve` or the API Gateway URL of a deployment), for people (tables on a
//! terminal, colours, progress bars) and scripts (JSON, JSON lines, exit
//! codes that tell success, not found and invalid input apart).
//!
//! One module per resource ([`subscriptions`], [`events`],
//! [`dead_letters`], [`replay`], [`audit`], [`keys`]); the HTTP client and the exit
//! codes in [`client`], SigV4 signing and the URL encoding it needs in
//! [`sigv4`], printing in [`output`], bulk jobs in [`jobs`].

/// `after_help` text: the examples given, then the exit statuses (the same
/// on every ops command).
macro_rules! examples {
    ($($line:literal),+ $(,)?) => {
        concat!(
            "Examples:\n",
            $("  ", $line, "\n",)+
            "\nExit status: 0 ok, 1 other failure, 2 invalid input (usage, HTTP 400/422), \
             3 not found (404), 4 conflict (409)."
        )
    };
}

mod audit;
pub mod client;
mod dead_letters;
mod events;
mod jobs;
mod keys;
mod output;
mod replay;
pub use awsreq::sigv4;
mod subscriptions;
mod time;

use anyhow::Context;
use serde_json::{json, Value};

use client::{Client, OpsError};
use hookline_wire::reindex::{ReindexAnswer, ReindexRequest};
use output::{ListPrinter, Out, OutputArgs, View};

/// Where the API is and how to authenticate.
#[derive(clap::Args, Clone, Debug)]
pub struct Target {
    /// Base URL of the Hookline API.
    #[arg(long, env = "HOOKLINE_URL", default_value = "http://127.0.0.1:8080", global = true)]
    pub url: String,
    /// API key (`hookline serve`).
    #[arg(long, env = "HOOKLINE_API_KEY", global = true, hide_env_values = true)]
    pub api_key: Option<String>,
    /// Sign requests with SigV4 for this AWS region instead of using an API
    /// key: the deployed HTTP API uses IAM authorization. Credentials come
    /// from the environment, the profile's keys or `credential_process`, or
    /// else the AWS CLI (`aws configure export-credentials`: SSO, roles).
    #[arg(long, env = "HOOKLINE_AWS_REGION", global = true)]
    pub aws_region: Option<String>,
    /// Who is acting (a person behind a shared credential), sent as the
    /// `X-Actor` header. The audit trail
    /// records it (``key:<name> as `<actor>` ``) only where the API is set to
    /// trust that header; otherwise the actor is the credential's.
    #[arg(long, env = "HOOKLINE_ACTOR", global = true, value_name = "ACTOR")]
    pub acting_as: Option<String>,
}

/// What every ops command takes: the target and the output format.
#[derive(clap::Args, Clone, Debug)]
pub struct Common {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    output: OutputArgs,
}

impl Common {
    fn client(&self) -> anyhow::Result<Client> {
        Client::new(&self.target)
    }

    fn out(&self) -> Out {
        Out::new(&self.output)
    }
}

/// Paging flags of every list command.
#[derive(clap::Args, Clone, Debug)]
pub struct PageArgs {
    /// Items per request, 1-1000 (the API's default: 100).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1000))]
    limit: Option<u16>,
    /// Start at this page: the cursor printed after an earlier page.
    #[arg(long)]
    cursor: Option<String>,
    /// Every page: follow the cursor to the end, printing items as they
    /// come (memory stays one page).
    #[arg(long)]
    all: bool,
}

/// The ops commands.
#[derive(clap::Subcommand)]
pub enum OpsCommand {
    /// Subscriptions: list, show, create, update, delete, rotate-secret, verify, reindex.
    #[command(subcommand, after_help = examples!("hookline subscriptions list --tenant acme"))]
    Subscriptions(subscriptions::Command),
    /// Events: find them (filters, pages) and show one with its deliveries.
    #[command(subcommand, after_help = examples!("hookline events list --event-type 'order.*' --since 2h"))]
    Events(events::Command),
    /// Dead letters: list, show, requeue, skip (one by id, or in bulk by filter), reindex.
    #[command(subcommand, name = "dead-letters", after_help = examples!("hookline dead-letters list --subscription sub_123"))]
    DeadLetters(dead_letters::Command),
    /// Deliver stored events again: one event, a partition, or a time range.
    Replay(replay::Args),
    /// The audit trail: who changed what, when and why.
    Audit(audit::Args),
    /// Bulk jobs (requeue, skip, replay): their progress.
    #[command(subcommand, after_help = examples!("hookline jobs show job_123 --wait"))]
    Jobs(audit::JobsCommand),
    /// API keys and (AWS) IAM principal grants: create, list, show, revoke, rotate.
    #[command(subcommand, after_help = examples!("hookline keys create --name ci --role producer --tenant acme"))]
    Keys(keys::Command),
    /// A signed, expiring link to one tenant's portal in the console (its
    /// subscriptions, deliveries and dead letters only).
    #[command(name = "portal-link", after_help = examples!("hookline portal-link --tenant acme --expires-in-seconds 86400"))]
    PortalLink(keys::PortalLinkArgs),
    /// Show an event and its deliveries (the same as `events show`).
    #[command(hide = true)]
    Inspect(events::ShowArgs),
}

/// Runs one ops command.
pub async fn run(cmd: OpsCommand) -> anyhow::Result<()> {
    match cmd {
        OpsCommand::Subscriptions(c) => subscriptions::run(c).await,
        OpsCommand::Events(c) => events::run(c).await,
        OpsCommand::DeadLetters(c) => dead_letters::run(c).await,
        OpsCommand::Replay(a) => replay::run(a).await,
        OpsCommand::Audit(a) => audit::run(a).await,
        OpsCommand::Jobs(c) => audit::run_jobs(c).await,
        OpsCommand::Keys(c) => keys::run(c).await,
        OpsCommand::PortalLink(a) => keys::portal_link(a).await,
        OpsCommand::Inspect(a) => events::show(a).await,
    }
}

/// Prints a list endpoint's items page by page: one page (and, when more
/// remain, the command for the next one on stderr), or with `--all` every
/// page, following `next_cursor`. `what` names the items in messages.
async fn list(
    common: &Common,
    path: &[&str],
    query: Vec<(&'static str, Option<String>)>,
    page: &PageArgs,
    view: &View,
    what: &str,
) -> anyhow::Result<()> {
    list_with(common, path, query, page, view, what, Ok).await
}

/// [`list`] with each page read as the wire type `Page<T>` first: a field
/// the API renamed or retyped is an error, not a blank column.
async fn list_of<T: serde::de::DeserializeOwned + serde::Serialize>(
    common: &Common,
    path: &[&str],
    query: Vec<(&'static str, Option<String>)>,
    page: &PageArgs,
    view: &View,
    what: &str,
) -> anyhow::Result<()> {
    let typed = |v: Value| client::read::<hookline_wire::Page<T>>(v).map(|p| client::json(&p));
    list_with(common, path, query, page, view, what, typed).await
}

/// [`list`], each page's answer put through `check` before it is printed.
async fn list_with(
    common: &Common,
    path: &[&str],
    mut query: Vec<(&'static str, Option<String>)>,
    page: &PageArgs,
    view: &View,
    what: &str,
    check: impl Fn(Value) -> anyhow::Result<Value>,
) -> anyhow::Result<()> {
    let client = common.client()?;
    let out = common.out();
    query.push(("limit", page.limit.map(|l| l.to_string())));
    let mut cursor = page.cursor.clone();
    let mut printer = ListPrinter::new(out, view);
    let args: Vec<String> = std::env::args().skip(1).collect();
    loop {
        let mut q = query.clone();
        q.push(("cursor", cursor.clone()));
        let answer = client.get(path, &q).await.map_err(|e| match (e.downcast::<OpsError>(), &cursor) {
            (Ok(api), Some(c)) if printer.count > 0 => {
                api.with_hint(format!("stopped after {} {what}; resume with --cursor={c}", printer.count)).into()
            }
            (Ok(api), _) => api.into(),
            (Err(e), _) => e,
        })?;
        let answer = check(answer)?;
        let items = answer["items"].as_array().context("the answer has no items")?;
        printer.page(items)?;
        match answer["next_cursor"].as_str() {
            Some(next) if page.all => cursor = Some(next.to_string()),
            Some(next) => {
                // A page may be empty and still not the last (on AWS a
                // request reads a bounded part of a sparse index).
                let lead = if printer.count == 0 {
                    format!("no {what} on this page; next page")
                } else {
                    format!("more {what}")
                };
                let sent = |k: &str| query.iter().find(|(q, _)| *q == k).and_then(|(_, v)| v.as_deref());
                let fixed: Vec<(&str, &str)> = [("--since", "since"), ("--until", "until")]
                    .into_iter()
                    .filter_map(|(flag, k)| sent(k).map(|v| (flag, v)))
                    .collect();
                let command = output::next_page_command(&args, next, &fixed);
                eprintln!("{lead}: {command}  (or --all for every page)");
                return Ok(());
            }
            None => break,
        }
    }
    if printer.count == 0 && !out.json() {
        eprintln!("no {what} found");
    }
    Ok(())
}

/// Flags of the `reindex` commands.
#[derive(clap::Args, Clone, Debug)]
pub struct ReindexArgs {
    /// Items examined per request (1-100).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u16).range(1..=100))]
    limit: u16,
    /// Resume from this `next_cursor` (printed when a run stops early).
    #[arg(long)]
    cursor: Option<String>,
    #[command(flatten)]
    common: Common,
}

/// `hookline <what> reindex` (`subscriptions`, `dead-letters`: the API's
/// path too): one request per page until `next_cursor` is `null`, a
/// progress line per page on stderr, the totals on stdout. If a request
/// fails, the error names the cursor to resume from.
async fn reindex(what: &str, args: ReindexArgs) -> anyhow::Result<()> {
    let ReindexArgs { limit, mut cursor, common } = args;
    let client = common.client()?;
    let (mut reindexed, mut examined, mut requests) = (0u64, 0u64, 0u64);
    loop {
        let body = ReindexRequest { cursor: cursor.clone(), limit: Some(i64::from(limit)) };
        let body = serde_json::to_value(&body).expect("a reindex request serializes");
        let page = client.send_json("POST", &["v1", what, "reindex"], Some(body)).await.map_err(|e| {
            let resume = cursor.as_deref().map(|c| format!(" --cursor={c}")).unwrap_or_default();
            let hint = format!(
                "reindex stopped after {requests} pages ({reindexed} reindexed); \
                 resume with: hookline {what} reindex{resume}"
            );
            match e.downcast::<OpsError>() {
                Ok(api) => api.with_hint(hint).into(),
                Err(e) => e.context(hint),
            }
        })?;
        requests += 1;
        let page: ReindexAnswer = serde_json::from_value(page).context("the answer is not a reindex page")?;
        reindexed += page.reindexed;
        examined += page.examined;
        eprintln!("page {requests}: {reindexed} reindexed, {examined} examined so far");
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    common.out().object(&json!({"reindexed": reindexed, "examined": examined, "requests": requests}), &[])?;
    Ok(())
}
