//! `hookline listen`: a receiver for trying Hookline locally. It answers the
//! verification handshake, checks each delivery's Standard Webhooks
//! signature when given the secret, and prints what arrived.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use shared::signing::{self, Secret};

/// Options of `hookline listen`.
#[derive(clap::Args)]
pub struct ListenArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// The subscription's secret (`whsec_…`), to check signatures.
    #[arg(long, env = "HOOKLINE_LISTEN_SECRET")]
    secret: Option<String>,
    /// Status to answer deliveries with (e.g. 500 to watch retries).
    #[arg(long, default_value_t = 200)]
    status: u16,
}

/// Runs the receiver until interrupted.
pub async fn run(args: ListenArgs) -> anyhow::Result<()> {
    let secret = args.secret.as_deref().map(Secret::parse).transpose().context("--secret")?;
    let status = StatusCode::from_u16(args.status).context("--status")?;
    let state = Arc::new((secret, status));
    let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
        let state = state.clone();
        async move { receive(&state.0, state.1, &headers, &body) }
    });
    let listener =
        tokio::net::TcpListener::bind(args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    println!("hookline listen: receiving on http://{}/", listener.local_addr()?);
    if args.secret.is_none() {
        println!("  (no --secret: signatures are not checked)");
    }
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> &'a str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

fn receive(secret: &Option<Secret>, status: StatusCode, headers: &HeaderMap, body: &[u8]) -> axum::response::Response {
    let json: serde_json::Value = serde_json::from_slice(body).unwrap_or(serde_json::Value::Null);
    let id = header(headers, "webhook-id");
    let check = match secret {
        None => "unchecked",
        Some(s) => match signing::verify(
            std::slice::from_ref(s),
            id,
            header(headers, "webhook-timestamp"),
            header(headers, "webhook-signature"),
            body,
            chrono::Utc::now().timestamp(),
            signing::DEFAULT_TOLERANCE_SECS,
        ) {
            Ok(()) => "valid",
            Err(_) => "INVALID",
        },
    };
    if json["type"] == "hookline.verification" {
        println!("verification challenge answered (signature {check})");
        return (StatusCode::OK, axum::Json(serde_json::json!({"challenge": json["challenge"]}))).into_response();
    }
    let kind = match header(headers, "hookline-event-type") {
        "" => "?",
        t => t,
    };
    println!(
        "delivery id={id} type={kind} attempt={} signature={check}\n  {}",
        header(headers, "hookline-attempt"),
        String::from_utf8_lossy(body)
    );
    status.into_response()
}
