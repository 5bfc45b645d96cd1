//! `hookline keys`: API keys (`hookline serve`) and IAM principal grants
//! (AWS) through `/v1/keys`. A new or rotated secret is printed once.

use hookline_wire::keys::{CreateKey, Key, KeyWithSecret, Role, RotateKey};
use hookline_wire::portal::{CreatePortalLink, PortalLink};
use serde_json::Value;

use super::client::{json, read};
use super::output::{field, View};
use super::{list_of, Common, PageArgs};
use crate::table::col;

/// `hookline keys …`.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Create a key (prints its secret, shown only this once) or, on AWS, a
    /// grant for an IAM principal.
    #[command(after_help = examples!(
        "hookline keys create --name ci --role producer --tenant acme",
        "hookline keys create --name ops --role operator --expires-in-seconds 7776000",
        "hookline keys create --name alice --role admin --principal arn:aws:iam::123456789012:role/ops   # AWS",
        "hookline keys create --name acme-pull --role subscriber --subscription sub_0192e4a0"
    ))]
    Create {
        /// Unique within its tenant: letters, digits, `. _ - @`; the audit
        /// trail records its callers as `key:<name>`.
        #[arg(long)]
        name: String,
        /// producer, reader, operator, admin (at most your own) or
        /// subscriber (with --subscription).
        #[arg(long, value_parser = ["producer", "reader", "operator", "admin", "subscriber"])]
        role: String,
        /// Bind it to this tenant (a tenant-bound caller: its own, always).
        #[arg(long)]
        tenant: Option<String>,
        /// It stops working this many seconds from now.
        #[arg(long, value_name = "SECONDS")]
        expires_in_seconds: Option<i64>,
        /// AWS: the IAM user or role ARN this grant is for (no secret).
        #[arg(long, value_name = "ARN")]
        principal: Option<String>,
        /// A subscriber key's one subscription: it pulls that
        /// subscription's events and nothing else.
        #[arg(long, value_name = "SUBSCRIPTION")]
        subscription: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// List keys without their secrets: your tenant's, or (unbound) the
    /// keys of `--tenant`, or those bound to no tenant.
    #[command(after_help = examples!("hookline keys list", "hookline keys list --tenant acme --output json"))]
    List {
        /// The keys of this tenant.
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        page: PageArgs,
        #[command(flatten)]
        common: Common,
    },
    /// Show one key (never its secret).
    #[command(after_help = examples!("hookline keys show key_123"))]
    Show {
        /// Key id.
        id: String,
        #[command(flatten)]
        common: Common,
    },
    /// Revoke a key: refused everywhere within 10 seconds.
    #[command(after_help = examples!("hookline keys revoke key_123"))]
    Revoke {
        /// Key id.
        id: String,
        #[command(flatten)]
        common: Common,
    },
    /// A new secret for a key (printed once); the old one keeps working for
    /// the overlap (default 24 h; 0 ends it now).
    #[command(after_help = examples!("hookline keys rotate key_123 --overlap-seconds 3600"))]
    Rotate {
        /// Key id.
        id: String,
        /// How long the old secret keeps working, 0-604800.
        #[arg(long, value_name = "SECONDS")]
        overlap_seconds: Option<i64>,
        #[command(flatten)]
        common: Common,
    },
}

const VIEW: View = View {
    columns: &[col("id", 40), col("name", 24), col("role", 8), col("tenant", 20), col("prefix", 9), col("state", 8)],
    row: |k| {
        vec![
            field(k, "id"),
            field(k, "name"),
            field(k, "role"),
            field(k, "tenant_id"),
            field(k, "prefix"),
            field(k, "state"),
        ]
    },
    states: &[5],
};

/// Sends a request and prints the answer, read as `T`.
async fn send<T: serde::de::DeserializeOwned + serde::Serialize>(
    common: &Common,
    method: &str,
    path: &[&str],
    body: Option<Value>,
) -> anyhow::Result<T> {
    let client = common.client()?;
    let answer: T = if method == "GET" {
        read(client.get(path, &[]).await?)?
    } else {
        read(client.send_json(method, path, body).await?)?
    };
    common.out().object(&json(&answer), &[])?;
    Ok(answer)
}

/// Runs a keys command.
pub async fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::Create { name, role, tenant, expires_in_seconds, principal, subscription, common } => {
            let role: Role = read(Value::from(role))?;
            let body = CreateKey {
                name,
                role,
                tenant_id: tenant,
                expires_in_seconds,
                principal,
                subscription_id: subscription,
            };
            let made: KeyWithSecret = send(&common, "POST", &["v1", "keys"], Some(json(&body))).await?;
            secret_note(&common, &made);
            Ok(())
        }
        Command::List { tenant, page, common } => {
            list_of::<Key>(&common, &["v1", "keys"], vec![("tenant_id", tenant)], &page, &VIEW, "keys").await
        }
        Command::Show { id, common } => send::<Key>(&common, "GET", &["v1", "keys", &id], None).await.map(drop),
        Command::Revoke { id, common } => send::<Key>(&common, "DELETE", &["v1", "keys", &id], None).await.map(drop),
        Command::Rotate { id, overlap_seconds, common } => {
            let body = json(&RotateKey { overlap_seconds });
            let rotated: KeyWithSecret = send(&common, "POST", &["v1", "keys", &id, "rotate"], Some(body)).await?;
            secret_note(&common, &rotated);
            Ok(())
        }
    }
}

/// On a terminal: a reminder that the secret is not shown again.
fn secret_note(common: &Common, k: &KeyWithSecret) {
    if !common.out().json() && k.secret.is_some() {
        eprintln!("keep the secret now: it is not shown again (hookline keys rotate issues a new one)");
    }
}

/// `hookline portal-link`: a signed, expiring link to one tenant's portal
/// (`POST /v1/portal-links`), printed whole (the API's base joined to the
/// link's relative `url`), to pass on to the tenant's people.
#[derive(clap::Args)]
pub struct PortalLinkArgs {
    /// The tenant the portal shows.
    #[arg(long)]
    tenant: String,
    /// The link stops working this many seconds from now (default 3600,
    /// at most 604800: 7 days).
    #[arg(long, value_name = "SECONDS")]
    expires_in_seconds: Option<i64>,
    #[command(flatten)]
    common: Common,
}

/// Runs `hookline portal-link`.
pub async fn portal_link(args: PortalLinkArgs) -> anyhow::Result<()> {
    let PortalLinkArgs { tenant, expires_in_seconds, common } = args;
    let client = common.client()?;
    let body = json(&CreatePortalLink { tenant_id: tenant, expires_in_seconds });
    let mut link: PortalLink = read(client.send_json("POST", &["v1", "portal-links"], Some(body)).await?)?;
    link.url = client.url(&[], &[])?.join(&link.url)?.to_string();
    common.out().object(&json(&link), &[])?;
    if !common.out().json() {
        eprintln!("whoever holds this link acts as the tenant's portal until it expires: pass it on privately");
    }
    Ok(())
}
