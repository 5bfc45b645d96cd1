//! `hookline replay`: deliver stored events again (new sagas, the same
//! webhook-id per event and subscription): one event at once, or a
//! partition or a time range as a job followed to its end.

use hookline_wire::events::{ReplayAnswer, ReplayEventBody};
use serde_json::{json, Map, Value};

use super::client::OpsError;
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
    let mut body = Map::new();
    let mut set = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            body.insert(k.to_string(), v);
        }
    };
    set("partition_key", a.partition_key.map(Value::from));
    set("tenant_id", a.tenant.map(Value::from));
    set("since", a.since.map(Value::from));
    set("until", a.until.map(Value::from));
    set("subscription_id", a.subscription.map(Value::from));
    set("event_types", (!a.event_types.is_empty()).then(|| json!(a.event_types)));
    set("reason", Some(Value::from(a.reason)));
    let client = a.common.client()?;
    let out = a.common.out();
    let started = client.send_json("POST", &["v1", "replays"], Some(Value::Object(body))).await?;
    let id = started["job_id"].as_str().ok_or_else(|| anyhow::anyhow!("the answer has no job_id: {started}"))?;
    let job = if a.no_wait { jobs::get(&client, id).await? } else { jobs::wait(&client, id, &out).await? };
    jobs::print(&job, &out)
}
