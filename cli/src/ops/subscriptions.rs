//! `hookline subscriptions …`: list, show, create, update, delete,
//! rotate-secret, verify, reindex. Bodies are built as the API's wire types
//! (`hookline_wire::subscriptions`: a field the API does not take, or a
//! value of the wrong type, is refused before anything is sent) and answers
//! read as them.

use anyhow::Context;
use hookline_wire::subscriptions::{
    CreateSubscription, PatchSubscription, RotateSecret, Subscription, SubscriptionWithSecret, VerifySubscription,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::client::OpsError;
use super::output::View;
use super::{list, reindex, Common, PageArgs, ReindexArgs};
use crate::table::{cell, col};

/// Subscription commands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// List subscriptions (in id order): all, a tenant's, or those an event
    /// type (and tenant) is routed to.
    #[command(after_help = examples!(
        "hookline subscriptions list",
        "hookline subscriptions list --tenant acme --event-type order.created --output json",
        "hookline subscriptions list --all"
    ))]
    List {
        /// Only this tenant's subscriptions.
        #[arg(long)]
        tenant: Option<String>,
        /// Only the subscriptions an event of this type is in scope of
        /// (with --tenant: global ones and the tenant's).
        #[arg(long)]
        event_type: Option<String>,
        #[command(flatten)]
        page: PageArgs,
        #[command(flatten)]
        common: Common,
    },
    /// Show one subscription with its health (breaker, recent failures).
    #[command(after_help = examples!("hookline subscriptions show sub_123"))]
    Show {
        /// Subscription id.
        id: String,
        #[command(flatten)]
        common: Common,
    },
    /// Create a subscription; prints it with its signing secret (shown only
    /// this once).
    #[command(after_help = examples!(
        "hookline subscriptions create --callback-url https://example.com/hook --event-type 'order.*'",
        "hookline subscriptions create --callback-url https://example.com/hook --event-type a --event-type b \\\n      --tenant acme --header X-Team=payments --json '{\"retry_policy\": {\"max_attempts\": 3}}'",
        "hookline subscriptions create --pull true --event-type 'order.*'   # pull-only: no callback, never pushed"
    ))]
    Create {
        #[command(flatten)]
        fields: Fields,
        #[command(flatten)]
        common: Common,
    },
    /// Change a subscription: only the fields given change (`--clear` resets
    /// one to its default). Re-enabling (`--enable`) re-runs verification.
    #[command(after_help = examples!(
        "hookline subscriptions update sub_123 --event-type 'order.*' --event-type 'refund.*'",
        "hookline subscriptions update sub_123 --disable",
        "hookline subscriptions update sub_123 --clear headers --clear rate_limit"
    ))]
    Update {
        /// Subscription id.
        id: String,
        #[command(flatten)]
        fields: Fields,
        /// Reset a field to its default (sends `null`); repeatable.
        #[arg(long, value_name = "FIELD")]
        clear: Vec<String>,
        /// Activate the subscription (`active: true`).
        #[arg(long, conflicts_with = "disable")]
        enable: bool,
        /// Deactivate it (`active: false`): nothing is delivered to it.
        #[arg(long)]
        disable: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Delete a subscription.
    #[command(after_help = examples!("hookline subscriptions delete sub_123"))]
    Delete {
        /// Subscription id.
        id: String,
        #[command(flatten)]
        common: Common,
    },
    /// Replace the signing secret; the old one keeps signing alongside for
    /// the overlap. Prints the new secret (shown only this once).
    #[command(name = "rotate-secret", after_help = examples!(
        "hookline subscriptions rotate-secret sub_123",
        "hookline subscriptions rotate-secret sub_123 --overlap-seconds 3600"
    ))]
    RotateSecret {
        /// Subscription id.
        id: String,
        /// How long the old secret stays valid, 0-604800 s (default: the
        /// server's, 24 h).
        #[arg(long)]
        overlap_seconds: Option<i64>,
        #[command(flatten)]
        common: Common,
    },
    /// Run the verification handshake with the callback URL now; for a
    /// queue or bus destination, send a new verification message, or
    /// confirm the one it received with `--token`.
    #[command(after_help = examples!(
        "hookline subscriptions verify sub_123",
        "hookline subscriptions verify sub_123 --token vtk_5f1d0c3e9a7b4e2f8c6d1a0b3e5f7a9c2d4b6e8f0a1c3e5d"
    ))]
    Verify {
        /// Subscription id.
        id: String,
        /// The token of the verification message a queue or bus received.
        #[arg(long)]
        token: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Write the routing index of subscriptions stored before it existed
    /// (once, after upgrading a deployment): pages through every stored
    /// item (`POST /v1/subscriptions/reindex`, following `next_cursor`)
    /// and prints the totals. Safe to run again; a second run reindexes 0.
    #[command(after_help = examples!(
        "hookline subscriptions reindex --url https://abc.execute-api.eu-west-1.amazonaws.com --aws-region eu-west-1"
    ))]
    Reindex(ReindexArgs),
}

/// The fields `create` and `update` set (anything else through `--json`).
#[derive(clap::Args, Clone, Debug)]
pub struct Fields {
    /// Where deliveries go (`callback_url`); leave it out with `--pull
    /// true` for a pull-only subscription (docs/delivery.md#pull).
    #[arg(long)]
    callback_url: Option<String>,
    /// true: its subscriber may pull what is routed to it (`pull`); with
    /// no `--callback-url`, nothing is pushed (pull-only).
    #[arg(long, value_name = "BOOL")]
    pull: Option<bool>,
    /// An event type or pattern (`order.created`, `order.*`, `*`);
    /// repeatable (`event_types`).
    #[arg(long = "event-type", value_name = "PATTERN")]
    event_types: Vec<String>,
    /// Only this tenant's events (`tenant_id`).
    #[arg(long)]
    tenant: Option<String>,
    /// Free text (`description`).
    #[arg(long)]
    description: Option<String>,
    /// A header sent with every delivery, NAME=VALUE; repeatable
    /// (`headers`; on update the given set replaces the stored one).
    #[arg(long = "header", value_name = "NAME=VALUE", value_parser = header)]
    headers: Vec<(String, String)>,
    /// original, hookline or contract_webhook (`payload_format`).
    #[arg(long)]
    payload_format: Option<String>,
    /// none or partition (`ordering`).
    #[arg(long)]
    ordering: Option<String>,
    /// Deliveries in flight at once, 1 or more (`max_in_flight`).
    #[arg(long)]
    max_in_flight: Option<i64>,
    /// Deliveries per second (`rate_limit`).
    #[arg(long)]
    rate_limit: Option<f64>,
    /// Any other fields, as a JSON object (`retry_policy`, `dead_letter_on`,
    /// `on_dead_letter`, `data_fields`, …); the flags above win over it.
    #[arg(long, value_name = "OBJECT", value_parser = json_object)]
    json: Option<Map<String, Value>>,
    /// true: requeue the dead letters of an outage when it ends
    /// (`auto_requeue`; docs/operations.md#automatic-requeue).
    #[arg(long, value_name = "BOOL")]
    auto_requeue: Option<bool>,
}

fn header(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("`{s}` is not NAME=VALUE"))
}

fn json_object(s: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str(s) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err("expected a JSON object".into()),
        Err(e) => Err(format!("not JSON: {e}")),
    }
}

impl Fields {
    /// The request body: `--json`, then each flag given.
    fn body(self) -> Map<String, Value> {
        let mut b = self.json.unwrap_or_default();
        let mut set = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                b.insert(k.to_string(), v);
            }
        };
        set("callback_url", self.callback_url.map(Value::from));
        set("event_types", (!self.event_types.is_empty()).then(|| json!(self.event_types)));
        set("tenant_id", self.tenant.map(Value::from));
        set("description", self.description.map(Value::from));
        set(
            "headers",
            (!self.headers.is_empty())
                .then(|| Value::Object(self.headers.into_iter().map(|(k, v)| (k, v.into())).collect())),
        );
        set("payload_format", self.payload_format.map(Value::from));
        set("ordering", self.ordering.map(Value::from));
        set("max_in_flight", self.max_in_flight.map(Value::from));
        set("rate_limit", self.rate_limit.map(Value::from));
        set("auto_requeue", self.auto_requeue.map(Value::from));
        set("pull", self.pull.map(Value::from));
        b
    }
}

const VIEW: View = View {
    columns: &[
        col("id", 40),
        col("callback url", 48),
        col("event types", 32),
        col("tenant", 20),
        col("active", 6),
        col("verified", 8),
        col("breaker", 9),
    ],
    row: |v| match serde_json::from_value::<Subscription>(v.clone()) {
        Ok(s) => {
            let breaker = serde_json::to_value(s.health.breaker).expect("a breaker state serializes");
            vec![
                s.id,
                s.callback_url.unwrap_or_else(|| "(pull only)".into()),
                cell(&json!(s.event_types)),
                cell(&json!(s.tenant_id)),
                s.active.to_string(),
                s.verified.to_string(),
                cell(&breaker),
            ]
        }
        Err(e) => vec![cell(&v["id"]), format!("(not a subscription: {e})")],
    },
    states: &[4, 5, 6],
};

/// The body of a create or patch as its wire type `T`: a field it does not
/// have, or a value of the wrong type, is a usage error (exit 2) naming
/// it, and nothing is sent.
fn body_as<T: DeserializeOwned + Serialize>(body: Map<String, Value>) -> anyhow::Result<Value> {
    let typed: T = serde_json::from_value(Value::Object(body))
        .map_err(|e| OpsError::Usage(format!("the subscription's fields are not what the API takes: {e}")))?;
    Ok(serde_json::to_value(&typed).expect("a wire body serializes"))
}

/// Sends a request and prints the answer, read as the wire type `A`.
async fn send<A: DeserializeOwned + Serialize>(
    common: &Common,
    method: &str,
    path: &[&str],
    body: Option<Value>,
) -> anyhow::Result<A> {
    let v = common.client()?.send_json(method, path, body).await?;
    let answer: A = serde_json::from_value(v).context("the API's answer is not the documented type")?;
    common.out().object(&serde_json::to_value(&answer).expect("a wire answer serializes"), &[])?;
    Ok(answer)
}

/// Runs a subscription command.
pub async fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::List { tenant, event_type, page, common } => {
            let q = vec![("tenant_id", tenant), ("event_type", event_type)];
            list(&common, &["v1", "subscriptions"], q, &page, &VIEW, "subscriptions").await
        }
        Command::Show { id, common } => {
            let v = common.client()?.get(&["v1", "subscriptions", &id], &[]).await?;
            let s: Subscription = serde_json::from_value(v).context("the API's answer is not a subscription")?;
            common.out().object(&serde_json::to_value(&s).expect("a subscription serializes"), &[])?;
            Ok(())
        }
        Command::Create { fields, common } => {
            let body = body_as::<CreateSubscription>(fields.body())?;
            let created: SubscriptionWithSecret = send(&common, "POST", &["v1", "subscriptions"], Some(body)).await?;
            secret_note(&common, &created);
            Ok(())
        }
        Command::Update { id, fields, clear, enable, disable, common } => {
            let mut body = fields.body();
            for f in clear {
                body.insert(f, Value::Null);
            }
            if enable || disable {
                body.insert("active".into(), Value::Bool(enable));
            }
            let body = body_as::<PatchSubscription>(body)?;
            send::<Subscription>(&common, "PATCH", &["v1", "subscriptions", &id], Some(body)).await.map(drop)
        }
        Command::Delete { id, common } => {
            common.client()?.send_json("DELETE", &["v1", "subscriptions", &id], None).await?;
            let out = common.out();
            if out.json() {
                out.object(&json!({"id": id, "deleted": true}), &[])?;
            } else {
                out.line(&format!("deleted subscription {id}"))?;
            }
            Ok(())
        }
        Command::RotateSecret { id, overlap_seconds, common } => {
            let body = serde_json::to_value(RotateSecret { overlap_seconds }).expect("a rotate body serializes");
            let path = ["v1", "subscriptions", &id, "rotate-secret"];
            let rotated: SubscriptionWithSecret = send(&common, "POST", &path, Some(body)).await?;
            secret_note(&common, &rotated);
            Ok(())
        }
        Command::Verify { id, token, common } => {
            let body = serde_json::to_value(VerifySubscription { token })?;
            send::<Subscription>(&common, "POST", &["v1", "subscriptions", &id, "verify"], Some(body)).await.map(drop)
        }
        Command::Reindex(args) => reindex("subscriptions", args).await,
    }
}

/// On a terminal: a reminder that the secret is not shown again.
fn secret_note(common: &Common, v: &SubscriptionWithSecret) {
    if !common.out().json() && !v.secret.is_empty() {
        eprintln!("keep the secret now: it is not shown again (rotate-secret issues a new one)");
    }
}
