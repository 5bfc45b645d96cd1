//! `hookline audit` (who changed what, when and why) and `hookline jobs
//! show` (a bulk job's progress).

use hookline_wire::audit::AuditRecord;

use super::events::{cell, unreadable, when};
use super::output::View;
use super::{jobs, list, time, Common, PageArgs};
use crate::table::col;

/// `audit` filters.
#[derive(clap::Args)]
#[command(after_help = examples!(
    "hookline audit --subscription sub_123",
    "hookline audit --action subscription.secret_rotated --since 7d",
    "hookline audit --actor key:ops --all --output json"
))]
pub struct Args {
    /// Only this action (subscription.created, dead_letter.requeued, replay.started, …).
    #[arg(long)]
    action: Option<String>,
    /// Only this actor (`key:NAME`, an IAM principal ARN, …).
    #[arg(long)]
    actor: Option<String>,
    /// Only records about this subscription.
    #[arg(long)]
    subscription: Option<String>,
    /// At or after: RFC 3339, a date, or a duration ago (30m, 6h, 2d).
    #[arg(long, value_parser = time::parse)]
    since: Option<String>,
    /// Before (same forms as --since).
    #[arg(long, value_parser = time::parse)]
    until: Option<String>,
    #[command(flatten)]
    page: PageArgs,
    #[command(flatten)]
    common: Common,
}

/// Job commands.
#[derive(clap::Subcommand)]
pub enum JobsCommand {
    /// Show a bulk job (requeue, skip, replay): state and counts; with
    /// --wait, follow it until it is done.
    #[command(after_help = examples!("hookline jobs show job_123", "hookline jobs show job_123 --wait --output json"))]
    Show {
        /// Job id (printed when the job started).
        id: String,
        /// Wait until the job is no longer running (a progress bar on a terminal).
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        common: Common,
    },
}

const VIEW: View = View {
    columns: &[col("at", 19), col("actor", 64), col("action", 36), col("about", 56), col("reason", 48)],
    row: |v| match serde_json::from_value::<AuditRecord>(v.clone()) {
        Ok(r) => {
            let about = [
                ("subscription", &r.subscription_id),
                ("dead_letter", &r.dead_letter_id),
                ("event", &r.event_id),
                ("job", &r.job_id),
            ]
            .into_iter()
            .find_map(|(k, id)| id.as_ref().map(|id| format!("{k}:{id}")))
            .unwrap_or_else(|| "-".into());
            vec![when(&r.at), r.actor, cell(&r.action), about, cell(&r.reason)]
        }
        Err(e) => unreadable(5, &e),
    },
    states: &[],
};

/// `hookline audit`.
pub async fn run(a: Args) -> anyhow::Result<()> {
    let q = vec![
        ("action", a.action),
        ("actor", a.actor),
        ("subscription_id", a.subscription),
        ("since", a.since),
        ("until", a.until),
    ];
    list(&a.common, &["v1", "audit"], q, &a.page, &VIEW, "audit records").await
}

/// `hookline jobs …`.
pub async fn run_jobs(cmd: JobsCommand) -> anyhow::Result<()> {
    let JobsCommand::Show { id, wait, common } = cmd;
    let client = common.client()?;
    let out = common.out();
    let job = if wait { jobs::wait(&client, &id, &out).await? } else { jobs::get(&client, &id).await? };
    jobs::print(&job, &out)
}
