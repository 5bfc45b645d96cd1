//! `hookline replay`: deliver stored events again (new sagas, the same
//! webhook-id per event and subscription): one event at once, or a
//! partition or a time range as a job followed to its end.

use hookline_wire::events::{ReplayAnswer, ReplayEventBody};
use hookline_wire::replays::ReplayRequest;
use serde_json::json;

use super::client::{json as json_of, OpsError};
use super::{jobs, time, Common};

/// `replay` arguments: exactly one of an event, a partition, a time range.
#[derive(clap::Args, Debug)]
#[command(
    group(clap::ArgGroup::new("what").required(true).args(["event_id", "event", "partition_key", "since"])),
    after_help = examples!(
        "hookline replay --event order-7781 --reason 'customer lost it'",
        "hookline replay --partition-key cart-42 --tenant acme --subscription sub_123 --reason 'resync'",
        "hookline replay --since 2026-11-25T08:00:00Z --until 2026-11-25T09:00:00Z --event-type 'order.*' --reason 'outage'"
    )
)]
pub struct Args {
    /// The event to replay (the same as --event).
    #[arg(value_name = "EVENT_ID", conflicts_with = "event_types")]
    event_id: Option<String>,
    /// The event to replay (at once: the answer lists the new sagas).
    #[arg(long, conflicts_with = "event_types")]
    event: Option<String>,
    /// Every stored event of this partition, in order.
    #[arg(long)]
    partition_key: Option<String>,
    /// The partition's tenant (with --partition-key).
    #[arg(long, requires = "partition_key")]
    tenant: Option<String>,
    /// Every event received from this time (RFC 3339, a date, or a duration ago); needs --until.
    #[arg(long, value_parser = time::parse, requires = "until")]
    since: Option<String>,
    /// … until this time (exclusive).
    #[arg(long, value_parser = time::parse, requires = "since")]
    until: Option<String>,
    /// Only to this subscription (default: every subscription that matches now).
    #[arg(long)]
    subscription: Option<String>,
    /// Only events of this type or pattern; repeatable.
    #[arg(long = "event-type", value_name = "PATTERN")]
    event_types: Vec<String>,
    /// Why (required; kept in the audit record).
    #[arg(long)]
    reason: String,
    /// Start the replay job and print it without waiting for it to finish.
    #[arg(long)]
    no_wait: bool,
    #[command(flatten)]
    common: Common,
}

/// One event: `POST /v1/events/{id}/replay` (answers with the new sagas).
/// A partition or range: `POST /v1/replays`, a job followed to its end.
pub async fn run(a: Args) -> anyhow::Result<()> {
    // clap's `requires` is not enforced beside a satisfied group: checked here.
    if a.tenant.is_some() && a.partition_key.is_none() {
        return Err(OpsError::Usage("--tenant goes with --partition-key (the partition's tenant)".into()).into());
    }
    if let Some(id) = a.event.as_ref().or(a.event_id.as_ref()) {
        let body = ReplayEventBody { reason: Some(a.reason), subscription_id: a.subscription, ..Default::default() };
        let answer = a.common.client()?.send_json("POST", &["v1", "events", id, "replay"], Some(json!(body))).await?;
        let answer: ReplayAnswer = serde_json::from_value(answer)?;
        a.common.out().object(&json!(answer), &[])?;
        return Ok(());
    }
    let body = ReplayRequest {
        partition_key: a.partition_key,
        tenant_id: a.tenant,
        since: a.since.as_deref().map(time::instant).transpose()?,
        until: a.until.as_deref().map(time::instant).transpose()?,
        subscription_id: a.subscription,
        event_types: (!a.event_types.is_empty()).then_some(a.event_types),
        reason: Some(a.reason),
        ..ReplayRequest::default()
    };
    let client = a.common.client()?;
    let out = a.common.out();
    let started = jobs::started(client.send_json("POST", &["v1", "replays"], Some(json_of(&body))).await?)?;
    let job = if a.no_wait {
        jobs::get(&client, &started.job_id).await?
    } else {
        jobs::wait(&client, &started.job_id, &out).await?
    };
    jobs::print(&job, &out)
}
