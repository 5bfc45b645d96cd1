//! The Lambda side of every stage: a Lambda event (in the shapes AWS sends,
//! `aws_lambda_events` types) in, the stage function of [`shared::stage`]
//! called, the Lambda response (with partial batch failures) out. The
//! function binaries only wire these to `lambda_runtime`; the emulator tests
//! call the same functions.

use aws_lambda_events::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use aws_lambda_events::dynamodb::{Event as StreamEvent, EventRecord as StreamRecord};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use base64::Engine;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::item;
use crate::sqs::SqsQueue;
use hookline_api::{self as api, Api};
use shared::bounds::{all_bounded, MAX_STORE_IN_FLIGHT};
use shared::context::{Config, Hookline};
use shared::queue::{self, Delivered};
use shared::stage::{deliver, ingest, reconcile, requeue_queue, route, saga};

/// The Lambda event types, for the function binaries.
pub use aws_lambda_events as events;
/// What a handler may fail with (a failed invocation; Lambda retries it).
pub use lambda_runtime::Error;

/// One incoming Lambda event of a function with several sources.
pub enum Incoming {
    /// API Gateway HTTP API (payload v2).
    Http(Box<ApiGatewayV2httpRequest>),
    /// An SQS batch.
    Sqs(SqsEvent),
    /// A DynamoDB stream batch.
    Stream(StreamEvent),
}

impl Incoming {
    /// Tells the event's source by its shape, as AWS sends it.
    pub fn parse(v: serde_json::Value) -> Result<Incoming, serde_json::Error> {
        let source = v["Records"][0]["eventSource"].as_str().unwrap_or("");
        Ok(match source {
            "aws:sqs" => Incoming::Sqs(serde_json::from_value(v)?),
            "aws:dynamodb" => Incoming::Stream(serde_json::from_value(v)?),
            _ if v.get("Records").is_some() => Incoming::Sqs(serde_json::from_value(v)?),
            _ => Incoming::Http(Box::new(serde_json::from_value(v)?)),
        })
    }
}

/// API Gateway → the HTTP API (same contract as `hookline serve`): the
/// event through a router of `api` ([`http_via`] with
/// [`hookline_api::http::router`]). A function keeps one router and calls
/// [`http_via`]; this builds one per call (tests, drivers).
pub async fn http(api: &Api, req: ApiGatewayV2httpRequest) -> ApiGatewayV2httpResponse {
    http_via(&api::http::router(api.clone()), req).await
}

/// API Gateway → `router` (the API's, [`hookline_api::http::router`]) →
/// API Gateway: the event as an HTTP request (method, `rawPath` and
/// `rawQueryString`, headers as API Gateway passed them, repeated ones
/// already joined with `,`; a base64 body decoded; the IAM principal it
/// authorized as [`api::http::Principal`]), the answer back with its
/// status, headers (`Allow`, `Retry-After`, …) and body (text, or base64
/// when not UTF-8).
pub async fn http_via(router: &axum::Router, req: ApiGatewayV2httpRequest) -> ApiGatewayV2httpResponse {
    let res = match request(req) {
        Ok(req) => api::http::call(router, req).await,
        Err(refused) => axum::response::IntoResponse::into_response(refused),
    };
    let (parts, body) = res.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
    let mut headers = parts.headers;
    // API Gateway sets the length of what it sends.
    headers.remove(aws_lambda_events::http::header::CONTENT_LENGTH);
    let (body, is_base64_encoded) = match String::from_utf8(body.to_vec()) {
        Ok(text) => (Body::Text(text), false),
        Err(e) => (Body::Binary(e.into_bytes()), true),
    };
    ApiGatewayV2httpResponse {
        status_code: i64::from(parts.status.as_u16()),
        headers,
        body: Some(body),
        is_base64_encoded,
        ..Default::default()
    }
}

/// The HTTP request an API Gateway (HTTP API, payload 2.0) event stands for.
fn request(req: ApiGatewayV2httpRequest) -> Result<aws_lambda_events::http::Request<axum::body::Body>, api::Response> {
    let body = match (req.body, req.is_base64_encoded) {
        // API Gateway's own encoding: never invalid.
        (Some(b), true) => base64::engine::general_purpose::STANDARD.decode(b).unwrap_or_default(),
        (Some(b), false) => b.into_bytes(),
        (None, _) => vec![],
    };
    let path = req.raw_path.filter(|p| !p.is_empty()).unwrap_or_else(|| "/".into());
    let uri = match req.raw_query_string.filter(|q| !q.is_empty()) {
        Some(q) => format!("{}?{}", uri_safe(&path, false), uri_safe(&q, true)),
        None => uri_safe(&path, false),
    };
    let mut http = aws_lambda_events::http::Request::builder()
        .method(req.request_context.http.method)
        .uri(uri)
        .body(axum::body::Body::from(body))
        .map_err(|_| {
            api::Response::error(api::ErrorCode::InvalidPath, "the path is not valid percent-encoded UTF-8", None)
        })?;
    *http.headers_mut() = req.headers;
    let principal = req.request_context.authorizer.and_then(|a| a.iam).and_then(|i| i.user_arn);
    if let Some(arn) = principal {
        http.extensions_mut().insert(api::http::Principal(arn));
    }
    Ok(http)
}

/// `s` with every byte that may not stand in a URI's path (or query)
/// percent-encoded (spaces, non-ASCII, controls, `"<>\^`{|}`, and `?`/`#`
/// in a path); `%` and everything else as it is (the path arrives
/// percent-encoded; its escapes are the router's to decode).
fn uri_safe(s: &str, query: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        let keep = b.is_ascii_graphic() && !b"\"<>\\^`{|}#".contains(&b) && (query || b != b'?');
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn failures(ids: impl IntoIterator<Item = String>) -> SqsBatchResponse {
    SqsBatchResponse {
        batch_item_failures: ids.into_iter().map(|item_identifier| BatchItemFailure { item_identifier }).collect(),
    }
}

fn message_id(m: &SqsMessage) -> String {
    m.message_id.clone().unwrap_or_default()
}

/// An EventBridge event as its rule delivers it to SQS; `detail` is kept as
/// the exact bytes the producer put.
#[derive(Deserialize)]
struct BusEvent<'a> {
    #[serde(rename = "detail-type")]
    detail_type: Option<String>,
    source: Option<String>,
    #[serde(borrow)]
    detail: &'a RawValue,
}

/// EventBridge (through the ingest queue) → events. An envelope that fails
/// validation goes to the ingest DLQ with the reason in the `hookline-error`
/// attribute and does not hold up its batch; a storage failure is retried.
pub async fn ingest_from_bus(h: &Hookline, rejects: &SqsQueue, event: SqsEvent) -> SqsBatchResponse {
    let results = all_bounded(
        event
            .records
            .iter()
            .map(|m| async move {
                let body = m.body.as_deref().unwrap_or("");
                let outcome = match serde_json::from_str::<BusEvent>(body) {
                    Err(e) => Err(format!("not an EventBridge event with a detail: {e}")),
                    Ok(ev) => match ingest::ingest_with_defaults(
                        h,
                        ev.detail.get().as_bytes(),
                        None,
                        ev.detail_type.as_deref(),
                        ev.source.as_deref(),
                    )
                    .await
                    {
                        Ok(_) => Ok(()),
                        Err(ingest::IngestError::Store(e)) => {
                            tracing::error!(error = %e, "ingest: storing failed; the message will be retried");
                            return Some(message_id(m));
                        }
                        Err(e) => Err(e.to_string()),
                    },
                };
                match outcome {
                    Ok(()) => None,
                    Err(reason) => {
                        tracing::warn!(reason, "ingest: envelope rejected to the ingest DLQ");
                        rejects
                            .send_with_attributes(body, &[("hookline-error", &reason)])
                            .await
                            .err()
                            .map(|_| message_id(m))
                    }
                }
            })
            .collect(),
        MAX_STORE_IN_FLIGHT,
    )
    .await;
    failures(results.into_iter().flatten())
}

fn stream_ok() -> DynamoDbEventResponse {
    DynamoDbEventResponse { batch_item_failures: vec![] }
}

fn stream_failure(r: &StreamRecord) -> DynamoDbEventResponse {
    DynamoDbEventResponse {
        batch_item_failures: vec![DynamoDbBatchItemFailure { item_identifier: r.change.sequence_number.clone() }],
    }
}

/// The records of a stream batch, decoded in order up to the first one that
/// cannot be read: `(decoded, the unreadable record if any)`. Records other
/// than inserts are skipped (the mappings filter them out; a TTL delete
/// must never be read as work).
fn decode_prefix<T>(
    records: &[StreamRecord],
    decode: impl Fn(&StreamRecord) -> Result<T, shared::error::StoreError>,
) -> (Vec<T>, Option<&StreamRecord>) {
    let mut out = Vec::new();
    for r in records.iter().filter(|r| r.event_name == "INSERT") {
        match decode(r) {
            Ok(x) => out.push(x),
            Err(e) => {
                tracing::error!(error = %e, sequence_number = ?r.change.sequence_number, "unreadable stream record");
                return (out, Some(r));
            }
        }
    }
    (out, None)
}

/// The response for a batch whose records before `bad` were handled with
/// `result`: Lambda checkpoints past every record before the one named, so
/// a failure of the handled prefix names the batch's first record, and an
/// unreadable record is named itself (Lambda retries from it, bisects, and
/// finally sends it to the on-failure destination) only once everything
/// before it is done.
fn stream_response<E: std::fmt::Display>(
    event: &StreamEvent,
    result: Result<(), E>,
    bad: Option<&StreamRecord>,
    stage: &str,
) -> DynamoDbEventResponse {
    match (result, bad) {
        (Err(e), _) => {
            tracing::error!(error = %e, stage, "stream batch failed; retried");
            event.records.first().map(stream_failure).unwrap_or_else(stream_ok)
        }
        (Ok(()), Some(r)) => stream_failure(r),
        (Ok(()), None) => stream_ok(),
    }
}

/// Events stream → sagas. The events before an unreadable record are routed
/// first; see [`stream_response`].
pub async fn route_stream(h: &Hookline, event: StreamEvent) -> DynamoDbEventResponse {
    let (events, bad) = decode_prefix(&event.records, |r| item::event_from_image(&r.change.new_image));
    let res = route::route(h, &events).await.map(|_| ());
    stream_response(&event, res, bad, "router")
}

/// Sagas stream (inserts) and Attempts stream → jobs, transitions, dead
/// letters. The records before an unreadable one are handled first; see
/// [`stream_response`].
pub async fn saga_stream(h: &Hookline, event: StreamEvent) -> DynamoDbEventResponse {
    enum Input {
        Saga(shared::saga::Saga),
        Attempt(shared::attempt::Attempt),
    }
    let (inputs, bad) = decode_prefix(&event.records, |r| {
        let img = &r.change.new_image;
        if img.contains_key("attempt") {
            item::attempt_from_image(img).map(Input::Attempt)
        } else {
            item::saga_from_image(img).map(Input::Saga)
        }
    });
    let (mut sagas, mut attempts) = (Vec::new(), Vec::new());
    for i in inputs {
        match i {
            Input::Saga(s) => sagas.push(s),
            Input::Attempt(a) => attempts.push(a),
        }
    }
    let res = async {
        saga::start(h, &sagas).await?;
        saga::on_attempts(h, &attempts).await
    }
    .await;
    stream_response(&event, res, bad, "saga")
}

/// An SQS batch as the consumer layer sees it: each body with its
/// `ApproximateReceiveCount`.
fn delivered(event: &SqsEvent) -> Vec<Delivered<'_>> {
    event
        .records
        .iter()
        .map(|m| Delivered {
            body: m.body.as_deref().unwrap_or(""),
            receive_count: m.attributes.get("ApproximateReceiveCount").and_then(|c| c.parse().ok()).unwrap_or(1),
        })
        .collect()
}

/// The partial-batch response: every message not done is a batch item
/// failure (SQS makes it visible again, then moves it to the DLQ).
fn not_done(event: &SqsEvent, done: &[bool]) -> SqsBatchResponse {
    failures(event.records.iter().zip(done).filter(|(_, d)| !**d).map(|(m, _)| message_id(m)))
}

/// Retry timers → next attempts ([`saga::handle_timer`]).
pub async fn saga_timers(h: &Hookline, event: SqsEvent) -> SqsBatchResponse {
    let done = queue::consume_each("retries", &delivered(&event), |timer, _| saga::handle_timer(h, timer)).await;
    not_done(&event, &done)
}

/// Delivery queue → attempts: the batch's jobs are delivered concurrently
/// and recorded together ([`deliver::deliver_received`]).
pub async fn deliver_batch(h: &Hookline, event: SqsEvent) -> SqsBatchResponse {
    let received = delivered(&event);
    let done = queue::consume("deliveries", &received, |jobs| deliver::deliver_messages(h, jobs)).await;
    // The health windows of subscriptions not flushed for a while (a frozen
    // container keeps the rest until its next invocation).
    shared::stage::breaker::flush_windows(h, false).await;
    // The delivery statistics of minutes that closed since the last flush
    // (one add per series per minute; a frozen container keeps the open
    // minute until its next invocation).
    shared::stage::stats::flush(h, false).await;
    queue::count_abandoned(&h.metrics, "deliveries", &received, &done);
    not_done(&event, &done)
}

/// Requeue queue → new sagas (API requeues and replays, console redrives).
pub async fn requeue_batch(h: &Hookline, event: SqsEvent) -> SqsBatchResponse {
    let done =
        queue::consume_each("requeue", &delivered(&event), |msg, receives| requeue_queue::handle(h, msg, receives))
            .await;
    not_done(&event, &done)
}

/// One scheduled run of the reconciler; prints its report as an EMF line
/// (the open-dead-letters alarm reads `OpenDeadLetters` from it), also when
/// a step failed; then a failed step fails the invocation, so the
/// function's Errors alarm sees it (the schedule runs it again).
pub async fn reconcile_scheduled(
    h: &Hookline,
    limits: &reconcile::ReconcileLimits,
) -> Result<reconcile::ReconcileReport, Error> {
    let report = reconcile::reconcile(h, limits).await;
    // Printed first, whatever failed: what was measured is reported.
    println!("{}", reconcile::emf_line(&report, "reconciler", chrono::Utc::now().timestamp_millis()));
    if !report.failed.is_empty() {
        // A failed invocation, so the function's Errors alarm sees it.
        return Err(Error::from(format!("reconciler: {}", report.failed.join("; "))));
    }
    Ok(report)
}

/// The reconciler's step of sealing subscriptions stored in clear
/// ([`crate::keys::reseal_step`]); a failure is logged and retried at the
/// next run (it never fails the invocation: nothing is lost meanwhile).
pub async fn reseal_scheduled(backend: &crate::AwsBackend) {
    match crate::keys::reseal_step(&backend.dynamodb, &backend.names.keys_table, backend.stores.subscriptions.as_ref())
        .await
    {
        Ok(0) => {}
        Ok(n) => tracing::info!(sealed = n, "sealed the secrets of subscriptions stored in clear"),
        Err(e) => tracing::error!(error = %e, "sealing stored secrets failed; retried at the next run"),
    }
}

/// Prints this invocation's metrics as one CloudWatch Embedded Metric Format
/// line (namespace `Hookline`) and resets them.
pub fn flush_metrics(h: &Hookline, function: &str) {
    if let Some(line) = h.metrics.take_emf(function, chrono::Utc::now().timestamp_millis()) {
        println!("{line}");
    }
}

/// JSON log lines (CloudWatch Logs Insights reads the fields) at the level
/// Lambda's log-level setting gives (`AWS_LAMBDA_LOG_LEVEL`), else
/// `RUST_LOG`, else info. One level, not per-module directives: a directive
/// parser would put a regex engine in every bootstrap.
pub fn init_logging() {
    init_logging_with(std::io::stdout);
}

/// [`init_logging`] writing to `writer` (tests read what a function logs).
pub fn init_logging_with<W>(writer: W)
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let _ = tracing_subscriber::fmt()
        .with_writer(writer)
        .json()
        .with_max_level(log_level(
            std::env::var("AWS_LAMBDA_LOG_LEVEL").ok().or_else(|| std::env::var("RUST_LOG").ok()),
        ))
        .with_current_span(true)
        .without_time()
        .with_target(false)
        .try_init();
}

/// The level a log setting names (`error`, `warn`, `info`, `debug`, `trace`,
/// any case; Lambda's `FATAL` is `error`); info when unset or unknown.
fn log_level(setting: Option<String>) -> tracing::Level {
    match setting.as_deref().map(str::to_ascii_lowercase).as_deref() {
        Some("error" | "fatal") => tracing::Level::ERROR,
        Some("warn") => tracing::Level::WARN,
        Some("debug") => tracing::Level::DEBUG,
        Some("trace") => tracing::Level::TRACE,
        _ => tracing::Level::INFO,
    }
}

/// Builds the context once per container from the environment: SDK clients,
/// table and queue names, settings, and the data key (one `GetItem` of
/// KeysTable and one KMS `Decrypt`, the only network calls of init).
pub async fn hookline_from_env() -> Result<std::sync::Arc<Hookline>, String> {
    Ok(backend_from_env().await?.0)
}

/// [`hookline_from_env`], plus the backend for the queues the ports do not
/// cover (the ingest DLQ).
pub async fn backend_from_env() -> Result<(std::sync::Arc<Hookline>, crate::AwsBackend), String> {
    let sdk = crate::sdk_config_loader().load().await;
    // A bad setting fails the function's init, naming every bad value.
    let config = Config::from_env().map_err(|e| e.to_string())?;
    // The data key: one GetItem and one KMS Decrypt per container, kept for
    // its life.
    let backend = crate::AwsBackend::from_env(&sdk, &config).await?;
    let mut h = Hookline::new(backend.stores.clone(), config, backend.keyring.clone());
    // Queue and bus destinations: SigV4 with the function role's keys.
    awsreq::transport::install(&mut h);
    Ok((std::sync::Arc::new(h), backend))
}

/// The Lambda runtime loop of one function: each invocation's payload goes
/// to `handler` with the context built once at init, and the invocation's
/// metrics are flushed as EMF after it.
pub async fn run<E, R, F, Fut>(function: &'static str, h: std::sync::Arc<Hookline>, handler: F) -> Result<(), Error>
where
    E: serde::de::DeserializeOwned + Send + 'static,
    R: serde::Serialize + Send + 'static,
    F: Fn(std::sync::Arc<Hookline>, E) -> Fut + Send + Sync,
    Fut: std::future::Future<Output = Result<R, Error>> + Send,
{
    let handler = &handler;
    lambda_runtime::run(lambda_runtime::service_fn(move |e: lambda_runtime::LambdaEvent<E>| {
        let h = h.clone();
        async move {
            let res = handler(h.clone(), e.payload).await;
            flush_metrics(&h, function);
            res
        }
    }))
    .await
}

#[cfg(test)]
mod tests {
    use super::log_level;
    use tracing::Level;

    #[test]
    fn log_level_reads_lambda_and_rust_log_names() {
        assert_eq!(log_level(None), Level::INFO);
        assert_eq!(log_level(Some("DEBUG".into())), Level::DEBUG);
        assert_eq!(log_level(Some("fatal".into())), Level::ERROR);
        assert_eq!(log_level(Some("warn".into())), Level::WARN);
        assert_eq!(log_level(Some("trace".into())), Level::TRACE);
        assert_eq!(log_level(Some("shared=debug".into())), Level::INFO, "directives are not parsed");
    }
}

/// The API Gateway event ⇄ HTTP request conversion of [`http_via`], against
/// a router that shows what reached it.
#[cfg(test)]
mod http_tests {
    use super::*;
    use axum::http::{HeaderMap, Uri};
    use axum::routing::any;

    async fn echo(
        method: axum::http::Method,
        uri: Uri,
        headers: HeaderMap,
        req: axum::extract::Request,
    ) -> axum::response::Response {
        let principal = req.extensions().get::<api::http::Principal>().map(|p| p.0.clone());
        let body = axum::body::to_bytes(req.into_body(), usize::MAX).await.unwrap();
        let v = serde_json::json!({
            "method": method.as_str(), "path": uri.path(), "query": uri.query(), "principal": principal,
            "idempotency_key": headers.get("idempotency-key").map(|v| v.to_str().unwrap()),
            "body": String::from_utf8_lossy(&body),
        });
        let mut res = axum::response::IntoResponse::into_response(axum::Json(v));
        res.headers_mut().insert("allow", "GET, HEAD".parse().unwrap());
        res.headers_mut().insert("retry-after", "30".parse().unwrap());
        res
    }

    fn event(path: &str, query: &str, body: &str, base64: bool) -> ApiGatewayV2httpRequest {
        serde_json::from_value(serde_json::json!({
            "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": query,
            "headers": {"idempotency-key": "a,b", "content-type": "application/json"},
            "requestContext": {"http": {"method": "PUT", "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "t"},
                               "accountId": "1", "apiId": "a", "stage": "$default", "requestId": "r", "domainName": "d", "time": "", "timeEpoch": 0,
                               "authorizer": {"iam": {"accessKey": "AK", "accountId": "1", "callerId": "C", "principalOrgId": null,
                                                      "userArn": "arn:aws:iam::1:user/u", "userId": "U"}}},
            "body": body, "isBase64Encoded": base64,
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn the_event_is_the_request_and_the_headers_come_back() {
        let router = axum::Router::new().route("/v1/x/{id}", any(echo));
        let body = base64::engine::general_purpose::STANDARD.encode(b"{\"a\":1}");
        let res = http_via(&router, event("/v1/x/a%2Fb c", "q=1%202", &body, true)).await;
        assert_eq!(res.status_code, 200);
        assert_eq!(
            (res.headers["allow"].to_str().unwrap(), res.headers["retry-after"].to_str().unwrap()),
            ("GET, HEAD", "30")
        );
        assert!(res.headers.get("content-length").is_none());
        let Some(Body::Text(text)) = res.body else { panic!("a text body") };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["method"], "PUT");
        assert_eq!(v["path"], "/v1/x/a%2Fb%20c", "percent-encoded as it came, a raw space escaped");
        assert_eq!(v["query"], "q=1%202");
        assert_eq!(v["principal"], "arn:aws:iam::1:user/u");
        assert_eq!(v["idempotency_key"], "a,b");
        assert_eq!(v["body"], "{\"a\":1}", "the base64 body decoded");
    }

    #[tokio::test]
    async fn a_body_that_is_not_utf8_goes_back_as_base64() {
        let router = axum::Router::new().route("/bin", any(|| async { vec![0xffu8, 0, 1] }));
        let res = http_via(&router, event("/bin", "", "", false)).await;
        assert!(res.is_base64_encoded);
        assert!(matches!(res.body, Some(Body::Binary(b)) if b == [0xff, 0, 1]));
    }

    #[test]
    fn only_what_may_not_stand_in_a_uri_is_escaped() {
        assert_eq!(uri_safe("/v1/a%2Fb c/é?#", false), "/v1/a%2Fb%20c/%C3%A9%3F%23");
        assert_eq!(uri_safe("a=b c&d=?", true), "a=b%20c&d=?");
    }
}
