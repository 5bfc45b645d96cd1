//! The queue and bus transport: [`shared::transport::Transport`] for every
//! destination kind, installed by `hookline serve` and the Lambda
//! functions alike. HTTPS goes to the shared [`HttpClient`] (its address
//! policy and resolver unchanged); an SQS queue gets one `SendMessage` and
//! an EventBridge bus one `PutEvents` call, JSON protocol, SigV4-signed with
//! credentials found as the AWS CLI finds them ([`crate::credentials`]; on
//! Lambda, the function role's keys in its environment).
//!
//! The host is never the subscriber's: it is the service's regional
//! endpoint for the ARN's region (`https://sqs.<region>.amazonaws.com/`,
//! `https://events.<region>.amazonaws.com/`, `.amazonaws.com.cn` in China),
//! or the deployment's own override, `AWS_ENDPOINT_URL_SQS` /
//! `AWS_ENDPOINT_URL_EVENTS`, else `AWS_ENDPOINT_URL` (how the tests reach
//! the emulator), read once when the transport is built.

use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use reqwest::Url;
use shared::destination::{eventbridge, sqs, Destination};
use shared::http_client::{HttpClient, PostError, PostResult};
use shared::transport::{aws_answer, Outbound, Transport};

use crate::sigv4::{sign, Scope};

/// The most of an AWS answer kept (errors are short JSON documents).
const MAX_ANSWER_BYTES: usize = 16 * 1024;

/// Delivers to HTTPS callbacks, SQS queues and EventBridge buses.
#[derive(Debug, Clone)]
pub struct AwsTransport {
    https: HttpClient,
    aws: reqwest::Client,
    sqs_endpoint: Option<String>,
    events_endpoint: Option<String>,
}

/// One AWS JSON-protocol service the transport calls.
#[derive(Clone, Copy)]
struct Service {
    /// The name in errors.
    shown: &'static str,
    /// The signing name and endpoint prefix.
    name: &'static str,
    /// `X-Amz-Target`.
    target: &'static str,
    /// The JSON protocol's content type.
    content_type: &'static str,
}

const SQS: Service =
    Service { shown: "SQS", name: "sqs", target: "AmazonSQS.SendMessage", content_type: "application/x-amz-json-1.0" };

const EVENTS: Service = Service {
    shown: "EventBridge",
    name: "events",
    target: "AWSEvents.PutEvents",
    content_type: "application/x-amz-json-1.1",
};

impl AwsTransport {
    /// The transport over `https` (the context's client), with endpoint
    /// overrides read from the process environment. Its own AWS client
    /// takes the timeouts of `https`; no network call happens here.
    pub fn from_env(https: HttpClient) -> Self {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Self::new(
            https,
            env("AWS_ENDPOINT_URL_SQS").or(env("AWS_ENDPOINT_URL")),
            env("AWS_ENDPOINT_URL_EVENTS").or(env("AWS_ENDPOINT_URL")),
        )
    }

    /// The transport with explicit endpoint overrides (`None`: AWS's
    /// regional endpoints).
    pub fn new(https: HttpClient, sqs_endpoint: Option<String>, events_endpoint: Option<String>) -> Self {
        let cfg = https.config();
        let aws = reqwest::Client::builder()
            .use_rustls_tls()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(cfg.connect_timeout)
            .timeout(cfg.total_timeout)
            .user_agent(cfg.user_agent.clone())
            .build()
            .expect("building the AWS client failed");
        let trim = |s: String| s.trim().trim_end_matches('/').to_string();
        AwsTransport { https, aws, sqs_endpoint: sqs_endpoint.map(trim), events_endpoint: events_endpoint.map(trim) }
    }

    /// The endpoint of `service` for `region` (no trailing slash).
    fn endpoint(&self, service: Service, partition: &str, region: &str) -> String {
        let custom = if service.name == "sqs" { &self.sqs_endpoint } else { &self.events_endpoint };
        match custom {
            Some(e) => e.clone(),
            None if partition == "aws-cn" => format!("https://{}.{region}.amazonaws.com.cn", service.name),
            None => format!("https://{}.{region}.amazonaws.com", service.name),
        }
    }

    /// Signs and sends one JSON-protocol call to `endpoint`.
    async fn call(&self, service: Service, endpoint: &str, region: &str, body: &serde_json::Value) -> PostResult {
        let started = Instant::now();
        let url = match Url::parse(&format!("{endpoint}/")) {
            Ok(u) => u,
            Err(e) => {
                return PostResult::failed(
                    PostError::Local(format!("{} endpoint: {e}", service.shown)),
                    started.elapsed(),
                )
            }
        };
        let body = serde_json::to_vec(body).expect("json serializes");
        let keys = match tokio::task::spawn_blocking(crate::credentials::resolve).await {
            Ok(Ok(k)) => k,
            Ok(Err(e)) => {
                return PostResult::failed(PostError::Other(format!("AWS credentials: {e}")), started.elapsed())
            }
            Err(e) => return PostResult::failed(PostError::Local(format!("AWS credentials: {e}")), started.elapsed()),
        };
        let headers = [("content-type", service.content_type), ("x-amz-target", service.target)];
        let scope = Scope { region, service: service.name, time: SystemTime::now() };
        let signed = match sign("POST", &url, &headers, &body, &keys, &scope) {
            Ok(s) => s,
            Err(e) => return PostResult::failed(PostError::Local(e.to_string()), started.elapsed()),
        };
        let mut req = self.aws.post(url);
        for (k, v) in headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).chain(signed) {
            req = req.header(k, v);
        }
        match req.body(body).send().await {
            Ok(res) => {
                let status = res.status().as_u16();
                let text = match res.bytes().await {
                    Ok(b) => String::from_utf8_lossy(&b[..b.len().min(MAX_ANSWER_BYTES)]).into_owned(),
                    Err(e) => return PostResult::failed(failure(service, e), started.elapsed()),
                };
                aws_answer(service.shown, status, &text, started.elapsed())
            }
            Err(e) => PostResult::failed(failure(service, e), started.elapsed()),
        }
    }
}

/// A request that got no answer, named by service (never the URL's
/// secrets: there are none in it, and headers are not shown).
fn failure(service: Service, e: reqwest::Error) -> PostError {
    if e.is_timeout() {
        PostError::Timeout
    } else if e.is_connect() {
        PostError::Connect(format!("{}: {}", service.shown, e.without_url()))
    } else {
        PostError::Other(format!("{}: {}", service.shown, e.without_url()))
    }
}

/// Makes `h` deliver to queues and buses too: its transport becomes an
/// [`AwsTransport`] over its HTTPS client, endpoints from the environment.
/// Called once where a backend builds its context.
pub fn install(h: &mut shared::context::Hookline) {
    h.transport = std::sync::Arc::new(AwsTransport::from_env(h.client.clone()));
}

/// Seconds since the epoch, for an entry's `Time`.
fn now_secs() -> i64 {
    chrono::Utc::now().timestamp()
}

#[async_trait]
impl Transport for AwsTransport {
    async fn send(&self, to: &Destination, msg: Outbound<'_>) -> PostResult {
        match to {
            Destination::Https(_) => self.https.send(to, msg).await,
            Destination::Sqs(q) => {
                let endpoint = self.endpoint(SQS, &q.partition, &q.region);
                let queue_url = format!("{endpoint}/{}/{}", q.account, q.name);
                match sqs::send_message(q, &queue_url, msg.headers, msg.body, msg.group, msg.dedup) {
                    Ok(body) => self.call(SQS, &endpoint, &q.region, &body).await,
                    Err(refusal) => PostResult::failed(PostError::Refused(refusal.to_string()), Duration::ZERO),
                }
            }
            Destination::EventBridge(b) => {
                let endpoint = self.endpoint(EVENTS, &b.partition, &b.region);
                match eventbridge::put_events(b, msg.headers, msg.body, now_secs()) {
                    Ok(body) => self.call(EVENTS, &endpoint, &b.region, &body).await,
                    Err(refusal) => PostResult::failed(PostError::Refused(refusal.to_string()), Duration::ZERO),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_come_from_the_region_or_the_deployment_never_the_subscriber() {
        let https = HttpClient::new(Default::default());
        let t = AwsTransport::new(https.clone(), None, None);
        assert_eq!(t.endpoint(SQS, "aws", "eu-west-1"), "https://sqs.eu-west-1.amazonaws.com");
        assert_eq!(t.endpoint(EVENTS, "aws-cn", "cn-north-1"), "https://events.cn-north-1.amazonaws.com.cn");
        let t = AwsTransport::new(https, Some("http://127.0.0.1:5000/".into()), None);
        assert_eq!(t.endpoint(SQS, "aws", "eu-west-1"), "http://127.0.0.1:5000");
        assert_eq!(t.endpoint(EVENTS, "aws", "eu-west-1"), "https://events.eu-west-1.amazonaws.com");
    }
}
