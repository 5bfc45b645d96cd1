//! Hookline on the AWS backend, in-process: the Lambda handlers of
//! `hookline_aws::lambda` over DynamoDB and SQS in the emulator, fed by
//! [`crate::lambda_driver`] as Lambda's event source mappings would, with
//! API calls made as API Gateway events. A crash is a panic at a failpoint:
//! the invocation fails and the platform retries it.

use std::sync::Arc;
use std::time::Duration;

use hookline_api::{Api, Verification};
use hookline_aws::lambda;
use hookline_aws::AwsBackend;
use serde_json::{json, Value};
use shared::context::Hookline;

use crate::emulator;
use crate::lambda_driver::{cpu_timed, Driver, DriverStats, Moto, Sources};
use crate::strict::Strict;

/// One Hookline deployment in the emulator, with its own tables and queues.
pub struct AwsPipeline {
    /// The context every handler shares (one "container" per function would
    /// each have their own; the stages never rely on sharing it).
    pub hookline: Arc<Hookline>,
    /// The backend (clients, typed queues, names).
    pub backend: AwsBackend,
    /// The emulator's raw API.
    pub moto: Moto,
    /// The EventBridge bus the ingest rule listens on.
    pub bus: String,
    api: Api,
    /// The HTTP functions' routers over `api`, built once.
    routers: FunctionRouters,
    _driver: Driver,
    stats: Arc<DriverStats>,
    /// The strict checker on the backend's clients (when started with
    /// [`AwsPipeline::start`]); checked when the pipeline is dropped.
    pub strict: Option<Strict>,
}

impl Drop for AwsPipeline {
    /// Fails the test if any request broke a rule of the strict checker.
    fn drop(&mut self) {
        if let Some(s) = &self.strict {
            if !std::thread::panicking() {
                s.assert_clean();
            } else if !s.violations().is_empty() {
                // Often the cause of the panic: say so.
                eprintln!("requests that AWS would reject:\n{}", s.violations().join("\n"));
            }
        }
    }
}

/// What the handlers of this test process log, in the functions' own
/// format (`hookline_aws::lambda::init_logging_with`), installed once.
fn log_capture() -> &'static Arc<std::sync::Mutex<Vec<u8>>> {
    static CAPTURE: std::sync::OnceLock<Arc<std::sync::Mutex<Vec<u8>>>> = std::sync::OnceLock::new();
    CAPTURE.get_or_init(|| {
        let buf = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = buf.clone();
        hookline_aws::lambda::init_logging_with(move || Capture(sink.clone()));
        buf
    })
}

/// One writer into the shared capture buffer.
struct Capture(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The IAM principal API Gateway passes on for every test request (the
/// audit trail's actor on AWS).
pub const TEST_PRINCIPAL: &str = "arn:aws:iam::123456789012:user/hookline-test-operator";

/// A unique resource prefix per test.
fn prefix(tag: &str) -> String {
    let n = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() % 1_000_000_000;
    format!(
        "hl{}-{}-{n}",
        std::process::id(),
        tag.chars().filter(char::is_ascii_alphanumeric).take(12).collect::<String>()
    )
}

/// The tests' settings of every AWS pipeline, as a function's environment
/// would give them: delivery timeouts short enough for a hung endpoint to
/// cost a test little, and the stall margin the test's reconciler runs with
/// (`Pipeline::reconcile`: a job older than this is checked against its saga).
/// [`TEST_PRINCIPAL`] is a bootstrap admin (`ADMIN_PRINCIPALS`), as a
/// deployment names its operators' role (a test checks the two agree).
const TEST_SETTINGS: &[(&str, &str)] = &[
    ("CONNECT_TIMEOUT_MS", "1000"),
    ("DELIVERY_TIMEOUT_MS", "1500"),
    ("RECONCILE_STALL_MARGIN", "2s"),
    // TEST_PRINCIPAL, and the principal the CLI's gateway stand-in names
    // (`crate::cli_ops::PRINCIPAL`).
    ("ADMIN_PRINCIPALS", "arn:aws:iam::123456789012:user/hookline-test-operator,arn:aws:iam::123456789012:user/ops"),
];

impl AwsPipeline {
    /// Creates the template's tables and queues under a fresh prefix and
    /// starts the event source mappings.
    /// The backend's clients carry the strict checker ([`crate::strict`]):
    /// a request AWS would reject fails, and fails the test.
    pub async fn start(tag: &str) -> AwsPipeline {
        Self::start_with_settings(tag, &crate::pipeline::Settings::default()).await
    }

    /// [`AwsPipeline::start`] with these [`crate::pipeline::Settings`].
    pub async fn start_with_settings(tag: &str, settings: &crate::pipeline::Settings) -> AwsPipeline {
        let sdk = emulator::aws_config().await;
        let strict = Strict::new();
        let clients = (
            strict.dynamodb_client(&sdk),
            strict.sqs_client(&sdk),
            Some(strict.streams_client(&sdk)),
            Some(strict.kms_client(&sdk)),
        );
        let mut p = Self::start_with(tag, clients, settings).await;
        p.strict = Some(strict);
        p
    }

    /// [`AwsPipeline::start_with_settings`] with the backend on these SDK
    /// clients (e.g. clients with an interceptor that meters requests); the
    /// resources are created and the event source mappings read through
    /// other clients.
    pub async fn start_with_clients(
        tag: &str,
        dynamodb: aws_sdk_dynamodb::Client,
        sqs: aws_sdk_sqs::Client,
        settings: &crate::pipeline::Settings,
    ) -> AwsPipeline {
        Self::start_with(tag, (dynamodb, sqs, None, None), settings).await
    }

    /// The pipeline on these DynamoDB, SQS and (or else plain ones)
    /// DynamoDB Streams and KMS clients.
    async fn start_with(
        tag: &str,
        (dynamodb, sqs, streams, kms): (
            aws_sdk_dynamodb::Client,
            aws_sdk_sqs::Client,
            Option<aws_sdk_dynamodbstreams::Client>,
            Option<aws_sdk_kms::Client>,
        ),
        settings: &crate::pipeline::Settings,
    ) -> AwsPipeline {
        log_capture();
        let prefix = prefix(tag);
        let names = emulator::create_resources(&prefix).await;
        let streams = match streams {
            Some(s) => s,
            None => aws_sdk_dynamodbstreams::Client::new(&emulator::aws_config().await),
        };
        let kms = match kms {
            Some(k) => k,
            None => aws_sdk_kms::Client::new(&emulator::aws_config().await),
        };
        // The deployment's data key, as the API function's container loads
        // it at cold start (KeysTable and KMS; checked against its role).
        let open = hookline_aws::keys::open_data_key(dynamodb.clone(), kms, &names.keys_table, &names.kms_key_id);
        let keyring = Arc::new(crate::iam::as_function("ApiFunction", open).await.expect("the data key"));
        // The stores are built from the same settings as the stages, as a
        // function builds both from its environment.
        let config = settings.aws_config(TEST_SETTINGS);
        let backend = AwsBackend::with_clients(dynamodb, sqs, streams, names.clone(), &config, keyring);
        let mut hookline = Hookline::new(backend.stores.clone(), config, backend.keyring.clone());
        awsreq::transport::install(&mut hookline);
        let hookline = Arc::new(hookline);
        let api = Api::behind_gateway(hookline.clone(), Verification::Inline)
            .trusting_actor_header(hookline.config.trust_actor_header);
        let moto = Moto::from_env();
        let q = |logical: &str| {
            let url =
                names.queue_urls.get(logical).unwrap_or_else(|| panic!("template has no queue {logical}")).clone();
            let arn = queue_arn(&url);
            (url, arn)
        };
        let sources = Sources {
            events_stream: names.stream_arns["EventsTable"].clone(),
            sagas_stream: names.stream_arns["SagasTable"].clone(),
            attempts_stream: names.stream_arns["AttemptsTable"].clone(),
            ingest_queue: q("IngestQueue"),
            retries_queue: q("RetriesQueue"),
            deliveries_queue: q("DeliveriesQueue"),
            requeue_queue: q("RequeueQueue"),
            stream_failures_url: q("StreamFailuresQueue").0,
        };
        let rejects = Arc::new(backend.ingest_dlq.clone().expect("the template has an IngestDLQ"));
        let stats = Arc::new(DriverStats::default());
        let driver = Driver::start_with_stats(moto.clone(), hookline.clone(), sources, rejects, stats.clone());
        AwsPipeline {
            hookline,
            backend,
            moto,
            bus: emulator::bus_name(&prefix),
            routers: FunctionRouters::of(&api),
            api,
            _driver: driver,
            stats,
            strict: None,
        }
    }

    /// Invocations per function (the event source mappings' and one per API
    /// call: `IngestFunction` for `POST /v1/events` and `/v1/events/batch`,
    /// `ApiFunction` for the rest), API Gateway requests, and the requests
    /// the mappings made on Lambda's behalf.
    pub fn stats(&self) -> Arc<DriverStats> {
        self.stats.clone()
    }

    /// The URL of a queue by the template's logical id.
    pub fn queue_url(&self, logical: &str) -> String {
        self.backend.names.queue_urls[logical].clone()
    }

    /// Puts an event on the test's EventBridge bus (`PutEvents`); the
    /// template's rule decides whether it reaches the ingest queue.
    pub async fn put_bus_event(&self, detail_type: &str, source: &str, detail: &str) {
        let entry = json!({"EventBusName": self.bus, "Source": source, "DetailType": detail_type, "Detail": detail});
        let out = self.moto.call("events", "AWSEvents.PutEvents", json!({"Entries": [entry]})).await;
        assert_eq!(out["FailedEntryCount"], 0, "PutEvents failed: {out}");
    }

    /// Receives (and deletes) every message currently in a queue.
    pub async fn drain(&self, logical: &str) -> Vec<Value> {
        let url = self.queue_url(logical);
        let mut out = Vec::new();
        loop {
            let got = self
                .moto
                .call("sqs", "AmazonSQS.ReceiveMessage", json!({"QueueUrl": url, "MaxNumberOfMessages": 10, "MessageAttributeNames": ["All"], "AttributeNames": ["All"]}))
                .await;
            let msgs = got["Messages"].as_array().cloned().unwrap_or_default();
            if msgs.is_empty() {
                return out;
            }
            for m in msgs {
                self.moto
                    .call(
                        "sqs",
                        "AmazonSQS.DeleteMessage",
                        json!({"QueueUrl": url, "ReceiptHandle": m["ReceiptHandle"]}),
                    )
                    .await;
                out.push(m);
            }
        }
    }

    /// The console's "Start DLQ redrive" (StartMessageMoveTask), which the
    /// emulator lacks, done as SQS does it: receive from `from`, send the same
    /// body and attributes to `to`, delete. Returns how many moved.
    pub async fn redrive(&self, from: &str, to: &str) -> usize {
        let to_url = self.queue_url(to);
        let moved = self.drain(from).await;
        for m in &moved {
            let mut msg = json!({"QueueUrl": to_url, "MessageBody": m["Body"]});
            if let Some(attrs) = m.get("MessageAttributes") {
                msg["MessageAttributes"] = attrs.clone();
            }
            self.moto.call("sqs", "AmazonSQS.SendMessage", msg).await;
        }
        moved.len()
    }
}

/// The routers of the two functions API Gateway invokes, over one API,
/// each built once as its function's `main` builds it (`functions/ingest`:
/// the ingest routes only; `functions/api`: the whole API and the console).
/// A request reaches the handlers as it does on Lambda, and costs what it
/// costs there: building a router is a container's start, not a request's.
struct FunctionRouters {
    ingest: axum::Router,
    api: axum::Router,
}

impl FunctionRouters {
    fn of(api: &Api) -> FunctionRouters {
        FunctionRouters {
            ingest: hookline_api::http::router_of(api.clone(), hookline_api::routes::INGEST_ROUTES),
            api: hookline_api::http::router(api.clone()),
        }
    }

    /// The router of `function` ([`http_function`]).
    fn of_function(&self, function: &str) -> &axum::Router {
        if function == "IngestFunction" {
            &self.ingest
        } else {
            &self.api
        }
    }
}

/// The function behind an HTTP API route in the template: ingest takes
/// `POST /v1/events` and `POST /v1/events/batch`, the API function the rest.
fn http_function(method: &str, path: &str) -> &'static str {
    match (method, path.trim_end_matches('/')) {
        ("POST", "/v1/events" | "/v1/events/batch") => "IngestFunction",
        _ => "ApiFunction",
    }
}

/// SQS queue ARN from its emulator URL (`…/123456789012/name`).
fn queue_arn(url: &str) -> String {
    let mut parts = url.rsplit('/');
    let name = parts.next().unwrap_or_default();
    let account = parts.next().unwrap_or("123456789012");
    format!("arn:aws:sqs:us-east-1:{account}:{name}")
}

impl AwsPipeline {
    /// Calls the HTTP API as API Gateway hands a request signed by
    /// `principal` (IAM authorization) to the API function.
    pub async fn call_as_principal(
        &self,
        principal: &str,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let (status, value, _) = self.call_through(&self.api, principal, method, path, body, headers).await;
        (status, value)
    }

    /// [`AwsPipeline::call_as_principal`] through `api`: another container's
    /// API over the same tables (its own caches).
    pub async fn call_through(
        &self,
        api: &Api,
        principal: &str,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[(&str, &str)],
    ) -> (u16, Value, std::collections::HashMap<String, String>) {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        // API Gateway hands header names over in lower case.
        let mut header_map = serde_json::Map::from_iter([("content-type".to_string(), json!("application/json"))]);
        header_map.extend(headers.iter().map(|(name, value)| (name.to_ascii_lowercase(), json!(value))));
        let req = json!({
            "version": "2.0",
            "routeKey": format!("{method} {path}"),
            "rawPath": path,
            "rawQueryString": query,
            "headers": header_map,
            "requestContext": {"http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "test"},
                               "accountId": "123456789012", "apiId": "api", "stage": "$default", "requestId": "r", "domainName": "localhost", "time": "", "timeEpoch": 0,
                               // IAM authorization, as API Gateway passes it on.
                               "authorizer": {"iam": {"accessKey": "AKIATEST", "accountId": "123456789012", "callerId": "AIDATEST",
                                                      "principalOrgId": null, "userArn": principal, "userId": "AIDATEST"}}},
            "body": body.map(|b| String::from_utf8_lossy(b).into_owned()),
            "isBase64Encoded": false,
        });
        let req = serde_json::from_value(req).expect("an API Gateway v2 request");
        // A crashed invocation is a 500 to the caller, as API Gateway answers.
        let function = http_function(method, path);
        // Another container's API has its own routers, as its functions do.
        let theirs;
        let routers = if std::ptr::eq(api, &self.api) {
            &self.routers
        } else {
            theirs = FunctionRouters::of(api);
            &theirs
        };
        let Some(res) = self.invoke_http(routers.of_function(function), function, req).await else {
            return (500, json!({"message": "Internal Server Error"}), Default::default());
        };
        let response_headers =
            res.headers.iter().map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string())).collect();
        let text = match res.body {
            Some(hookline_aws::lambda::events::encodings::Body::Text(t)) => t,
            _ => String::new(),
        };
        (res.status_code as u16, serde_json::from_str(&text).unwrap_or(Value::Null), response_headers)
    }
}

impl AwsPipeline {
    /// One API Gateway request to `function`'s handler through its `router`,
    /// run in its own task as Lambda runs an invocation and counted as
    /// Lambda bills it (its wall and CPU time); `None` if it crashed.
    async fn invoke_http(
        &self,
        router: &axum::Router,
        function: &'static str,
        req: lambda::events::apigw::ApiGatewayV2httpRequest,
    ) -> Option<lambda::events::apigw::ApiGatewayV2httpResponse> {
        let router = router.clone();
        self.stats.record_api_gateway();
        let started = std::time::Instant::now();
        let res =
            tokio::spawn(cpu_timed(crate::iam::as_function(
                function,
                async move { lambda::http_via(&router, req).await },
            )))
            .await;
        let cpu = res.as_ref().map_or(Duration::ZERO, |r| r.1);
        self.stats.record_invocation(function, 1, started.elapsed(), cpu, res.is_err());
        res.ok().map(|r| r.0)
    }
}

impl AwsPipeline {
    /// One request through API Gateway's console routes (`GET /ui`, `ANY
    /// /ui/{proxy+}`) or a bearer-only route of the API (pull), which have
    /// no authorizer (no IAM principal is passed on), to the api function's
    /// handler, as an API Gateway v2 event; `authorization`
    /// is the `Authorization` header, if any. Returns the status, the
    /// content type and the body as text.
    pub async fn gateway_console(
        &self,
        method: &str,
        path: &str,
        authorization: Option<&str>,
        body: Option<&[u8]>,
    ) -> (u16, String, String) {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        let mut headers = serde_json::Map::from_iter([("content-type".to_string(), json!("application/json"))]);
        if let Some(a) = authorization {
            headers.insert("authorization".to_string(), json!(a));
        }
        let route = match path {
            "/ui" => "GET /ui".to_string(),
            p if p.starts_with("/ui/") => "ANY /ui/{proxy+}".to_string(),
            // A bearer-only route of the API (pull).
            p => format!("{method} {p}"),
        };
        let req = json!({
            "version": "2.0",
            "routeKey": route,
            "rawPath": path,
            "rawQueryString": query,
            "headers": headers,
            "requestContext": {"http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "test"},
                               "accountId": "123456789012", "apiId": "api", "stage": "$default", "requestId": "r", "domainName": "localhost", "time": "", "timeEpoch": 0},
            "body": body.map(|b| String::from_utf8_lossy(b).into_owned()),
            "isBase64Encoded": false,
        });
        let req = serde_json::from_value(req).expect("an API Gateway v2 request");
        let Some(res) = self.invoke_http(&self.routers.api, "ApiFunction", req).await else {
            return (500, String::new(), String::new());
        };
        let content_type = res.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        let text = match res.body {
            Some(hookline_aws::lambda::events::encodings::Body::Text(t)) => t,
            Some(hookline_aws::lambda::events::encodings::Body::Binary(b)) => String::from_utf8_lossy(&b).into_owned(),
            _ => String::new(),
        };
        (res.status_code as u16, content_type, text)
    }
}

impl crate::pipeline::Pipeline for AwsPipeline {
    async fn call_bearer(&self, token: &str, method: &str, path: &str, body: Option<&[u8]>) -> (u16, Value) {
        let bearer = format!("Bearer {token}");
        let (status, _, text) = self.gateway_console(method, path, Some(&bearer), body).await;
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn call_console(&self, token: &str, method: &str, path: &str, body: Option<&[u8]>) -> (u16, Value) {
        let bearer = format!("Bearer {token}");
        let (status, _, text) = self.gateway_console(method, &format!("/ui/api{path}"), Some(&bearer), body).await;
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn credential(&self, role: shared::access::Role, tenant: Option<&str>) -> crate::pipeline::Credential {
        let name = crate::pipeline::unique_name(role.as_str());
        let principal = format!("arn:aws:iam::123456789012:user/{name}");
        let body = json!({"name": name, "role": role.as_str(), "tenant_id": tenant, "principal": principal});
        let (st, v) = self.call("POST", "/v1/keys", Some(body.to_string().as_bytes())).await;
        assert_eq!(st, 201, "POST /v1/keys {body}: {v}");
        assert!(v.get("secret").is_none(), "a grant has no secret: {v}");
        crate::pipeline::Credential {
            id: v["id"].as_str().expect("key id").to_string(),
            actor: principal.clone(),
            secret: None,
            principal: Some(principal),
        }
    }

    async fn call_as(
        &self,
        cred: &crate::pipeline::Credential,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let principal = cred.principal.as_deref().expect("an AWS credential is a principal");
        self.call_as_principal(principal, method, path, body, headers).await
    }

    async fn call_full(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[(&str, &str)],
    ) -> (u16, Value, std::collections::HashMap<String, String>) {
        self.call_through(&self.api, TEST_PRINCIPAL, method, path, body, headers).await
    }

    async fn logs(&self) -> String {
        String::from_utf8_lossy(&log_capture().lock().unwrap()).into_owned()
    }

    /// The IAM principal every test request is authorized as.
    fn actor(&self) -> String {
        TEST_PRINCIPAL.into()
    }

    async fn metrics(&self) -> String {
        let (path, method) = ("/metrics", "GET");
        let req = json!({
            "version": "2.0", "routeKey": "GET /metrics", "rawPath": path, "rawQueryString": "", "headers": {},
            "requestContext": {"http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "test"},
                               "accountId": "123456789012", "apiId": "api", "stage": "$default", "requestId": "r", "domainName": "localhost", "time": "", "timeEpoch": 0,
                               // `/metrics` needs a caller too (a bootstrap admin here).
                               "authorizer": {"iam": {"accessKey": "AKIATEST", "accountId": "123456789012", "callerId": "AIDATEST",
                                                      "principalOrgId": null, "userArn": TEST_PRINCIPAL, "userId": "AIDATEST"}}},
            "isBase64Encoded": false,
        });
        let req = serde_json::from_value(req).expect("an API Gateway v2 request");
        let function = http_function(method, path);
        let res =
            self.invoke_http(self.routers.of_function(function), function, req).await.expect("the metrics handler ran");
        match res.body {
            Some(hookline_aws::lambda::events::encodings::Body::Text(t)) => t,
            _ => String::new(),
        }
    }

    /// Arms a panic at the failpoint: the next invocation to reach it crashes.
    async fn crash_at(&mut self, failpoint: &str) {
        self.hookline.failpoints.arm_panic(failpoint);
    }

    /// Arms the failures in this process (the handlers run here).
    async fn inject_failures(&mut self, failures: &[(&str, u32)]) {
        for (f, n) in failures {
            self.hookline.failpoints.arm_failures(f, *n);
        }
    }

    /// One scheduled invocation of the reconciler, stall margin 2 s (the
    /// pipeline's configuration unless a test changed it).
    async fn reconcile(&self) {
        let limits = self.hookline.config.reconcile;
        let report =
            crate::iam::as_function("ReconcilerFunction", lambda::reconcile_scheduled(&self.hookline, &limits))
                .await
                .expect("the reconciler runs");
        if report.batches + report.stalled > 0 {
            eprintln!("reconciler run: {}", serde_json::to_string(&report).unwrap_or_default());
        }
    }

    /// Waits until the crash happened; the driver retries the failed
    /// invocation as Lambda would.
    async fn recover(&mut self) {
        // A bulk job on the emulator reaches a later page's failpoint only
        // after a minute or so.
        crate::eventually(120, "the armed failpoint was reached", || async {
            (!self.hookline.failpoints.panic_armed()).then_some(())
        })
        .await;
    }
}
