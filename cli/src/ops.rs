//! Ops commands: thin clients of a running Hookline's HTTP API (local
//! `hookline serve` or the API Gateway URL of a deployment).

use anyhow::{bail, Context};
use serde_json::{json, Value};

/// Where the API is and how to authenticate.
#[derive(clap::Args, Clone)]
pub struct Target {
    /// Base URL of the Hookline API.
    #[arg(long, env = "HOOKLINE_URL", default_value = "http://127.0.0.1:8080", global = true)]
    url: String,
    /// API key (`hookline serve`).
    #[arg(long, env = "HOOKLINE_API_KEY", global = true, hide_env_values = true)]
    api_key: Option<String>,
    /// Sign requests with SigV4 for this AWS region instead of using an API
    /// key: the deployed HTTP API uses IAM authorization. Credentials come
    /// from the environment, the profile's keys or `credential_process`, or
    /// else the AWS CLI (`aws configure export-credentials`: SSO, roles).
    #[arg(long, env = "HOOKLINE_AWS_REGION", global = true)]
    aws_region: Option<String>,
}

/// Inspect, requeue, skip, replay and reindex.
#[derive(clap::Subcommand)]
pub enum OpsCommand {
    /// Dead letters: list, show, requeue, skip.
    #[command(subcommand, name = "dead-letters")]
    DeadLetters(DeadLetterCommand),
    /// Subscriptions: reindex after an upgrade.
    #[command(subcommand, name = "subscriptions")]
    Subscriptions(SubscriptionCommand),
    /// Show an event and its deliveries.
    Inspect {
        /// Event id.
        event_id: String,
        #[command(flatten)]
        target: Target,
    },
    /// Deliver a stored event again (new sagas, same webhook-id).
    Replay {
        /// Event id.
        event_id: String,
        /// Only to this subscription (default: every matching one).
        #[arg(long)]
        subscription: Option<String>,
        /// Why (kept in the audit record).
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        target: Target,
    },
}

/// Dead-letter commands.
#[derive(clap::Subcommand)]
pub enum DeadLetterCommand {
    /// List dead letters.
    List {
        /// open, requeued or skipped.
        #[arg(long, default_value = "open")]
        state: shared::dead_letter::DeadLetterState,
        #[command(flatten)]
        target: Target,
    },
    /// Show one dead letter with its saga snapshot.
    Show {
        /// Dead letter id (the dead saga's id).
        id: String,
        #[command(flatten)]
        target: Target,
    },
    /// Requeue: a new saga for the same event and subscription.
    Requeue {
        /// Dead letter id.
        id: String,
        /// Why (kept in the audit record).
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        target: Target,
    },
    /// Skip: close it without delivering, with an audit record.
    Skip {
        /// Dead letter id.
        id: String,
        /// Why (kept in the audit record).
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        target: Target,
    },
}

/// Subscription commands.
#[derive(clap::Subcommand)]
pub enum SubscriptionCommand {
    /// Write the routing index of subscriptions stored before it existed
    /// (once, after upgrading a deployment): pages through every stored
    /// item (`POST /v1/subscriptions/reindex`, following `next_cursor`)
    /// and prints the totals. Safe to run again; a second run reindexes 0.
    Reindex {
        /// Items examined per request (1-100).
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u16).range(1..=100))]
        limit: u16,
        /// Resume from this `next_cursor` (printed when a run stops early).
        #[arg(long)]
        cursor: Option<String>,
        #[command(flatten)]
        target: Target,
    },
}

/// Runs one ops command and prints the API's answer.
pub async fn run(cmd: OpsCommand) -> anyhow::Result<()> {
    let (target, method, path, body) = match cmd {
        OpsCommand::DeadLetters(DeadLetterCommand::List { state, target }) => {
            (target, "GET", format!("/v1/dead-letters?state={state}"), None)
        }
        OpsCommand::DeadLetters(DeadLetterCommand::Show { id, target }) => {
            (target, "GET", format!("/v1/dead-letters/{id}"), None)
        }
        OpsCommand::DeadLetters(DeadLetterCommand::Requeue { id, reason, target }) => {
            (target, "POST", format!("/v1/dead-letters/{id}/requeue"), Some(json!({"reason": reason})))
        }
        OpsCommand::DeadLetters(DeadLetterCommand::Skip { id, reason, target }) => {
            (target, "POST", format!("/v1/dead-letters/{id}/skip"), Some(json!({"reason": reason})))
        }
        OpsCommand::Subscriptions(SubscriptionCommand::Reindex { limit, cursor, target }) => {
            return reindex(&target, limit, cursor).await;
        }
        OpsCommand::Inspect { event_id, target } => {
            let event = call(&target, "GET", &format!("/v1/events/{event_id}"), None).await?;
            let deliveries = call(&target, "GET", &format!("/v1/events/{event_id}/deliveries"), None).await?;
            println!(
                "{}",
                serde_json::to_string_pretty(&json!({"event": event, "deliveries": deliveries["deliveries"]}))?
            );
            return Ok(());
        }
        OpsCommand::Replay { event_id, subscription, reason, target } => (
            target,
            "POST",
            format!("/v1/events/{event_id}/replay"),
            Some(json!({"subscription_id": subscription, "reason": reason})),
        ),
    };
    let v = call(&target, method, &path, body).await?;
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
}

/// `hookline subscriptions reindex`: one request per page until
/// `next_cursor` is `null`, a progress line per page on stderr, the totals
/// on stdout. If a request fails, the error names the cursor to resume from.
async fn reindex(target: &Target, limit: u16, mut cursor: Option<String>) -> anyhow::Result<()> {
    let (mut reindexed, mut examined, mut requests) = (0u64, 0u64, 0u64);
    loop {
        let body = json!({"cursor": cursor, "limit": limit});
        let page = call(target, "POST", "/v1/subscriptions/reindex", Some(body)).await.with_context(|| {
            let resume = cursor.as_deref().map(|c| format!(" --cursor {c}")).unwrap_or_default();
            format!(
                "reindex stopped after {requests} pages ({reindexed} reindexed); \
                 resume with: hookline subscriptions reindex{resume}"
            )
        })?;
        requests += 1;
        reindexed += page["reindexed"].as_u64().context("the answer has no reindexed count")?;
        examined += page["examined"].as_u64().context("the answer has no examined count")?;
        eprintln!("page {requests}: {reindexed} reindexed, {examined} examined so far");
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({"reindexed": reindexed, "examined": examined, "requests": requests}))?
    );
    Ok(())
}

async fn call(t: &Target, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
    let client = reqwest::Client::new();
    let url = format!("{}{}", t.url.trim_end_matches('/'), path);
    let body = body.map(|b| serde_json::to_vec(&b)).transpose()?.unwrap_or_default();
    let mut req = client.request(method.parse()?, &url).header("content-type", "application/json");
    match (&t.aws_region, &t.api_key) {
        (Some(region), _) => {
            for (name, value) in sigv4_headers(region, method, &url, &body)? {
                req = req.header(name, value);
            }
        }
        (None, Some(key)) => req = req.bearer_auth(key),
        (None, None) => bail!("no credentials: pass --api-key (HOOKLINE_API_KEY) for hookline serve, or --aws-region (HOOKLINE_AWS_REGION) for a deployment"),
    }
    let res = req.body(body).send().await.with_context(|| format!("calling {url}"))?;
    let status = res.status();
    let v: Value = res.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        bail!("{status}: {}", v["error"]["message"].as_str().unwrap_or("request failed"));
    }
    Ok(v)
}

/// The SigV4 headers (service `execute-api`) for one request to the
/// deployed HTTP API.
fn sigv4_headers(region: &str, method: &str, url: &str, body: &[u8]) -> anyhow::Result<Vec<(String, String)>> {
    use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
    let keys = crate::credentials::resolve()?;
    let identity: aws_smithy_runtime_api::client::identity::Identity = aws_credential_types::Credentials::new(
        keys.access_key_id,
        keys.secret_access_key,
        keys.session_token,
        None,
        "hookline",
    )
    .into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("execute-api")
        .time(std::time::SystemTime::now())
        .settings(SigningSettings::default())
        .build()?
        .into();
    let headers = [("content-type", "application/json")];
    let signable = SignableRequest::new(method, url, headers.into_iter(), SignableBody::Bytes(body))?;
    let (instructions, _) = sign(signable, &params)?.into_parts();
    Ok(instructions.headers().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}
