//! What a scenario needs from a running Hookline, whichever backend: call
//! its HTTP API, crash a stage between two writes, and recover. `Server`
//! (hookline serve on SQLite) and `AwsPipeline` (the Lambda handlers on the
//! AWS emulator) implement it, so one scenario suite runs on both.

use std::future::Future;

use serde_json::Value;

/// A credential made for a test ([`Pipeline::credential`]): an API key
/// behind `hookline serve`, an IAM principal with a grant on AWS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// The key's or grant's id (`key_…`), for `/v1/keys/{id}`.
    pub id: String,
    /// Who the audit trail records for its calls.
    pub actor: String,
    /// The secret (`Authorization: Bearer`), behind `hookline serve`.
    pub secret: Option<String>,
    /// The IAM principal ARN API Gateway passes on, on AWS.
    pub principal: Option<String>,
}

/// A name no other test uses (key names, principal ARNs).
pub fn unique_name(tag: &str) -> String {
    format!("{tag}-{}", shared::ids::random_token("").get(..12).unwrap_or_default())
}

/// A Hookline under test.
pub trait Pipeline: Sync {
    /// A new credential of `role`, bound to `tenant` when given, made by the
    /// pipeline's own (admin) credential through `POST /v1/keys`: a secret
    /// key behind `hookline serve`, a grant for a fresh IAM principal on AWS.
    fn credential(&self, role: shared::access::Role, tenant: Option<&str>) -> impl Future<Output = Credential> + Send;

    /// Calls the HTTP API as `cred` (as [`Pipeline::call_with_headers`] does
    /// with the pipeline's own credential).
    fn call_as(
        &self,
        cred: &Credential,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[(&str, &str)],
    ) -> impl Future<Output = (u16, Value)> + Send;

    /// Calls the console's copy of the API (`/ui/api{path}`) with
    /// `Authorization: Bearer <token>` (a portal token or a key) and no
    /// other credential: on AWS, API Gateway's console route has no IAM
    /// authorizer, so no principal is passed on.
    fn call_console(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> impl Future<Output = (u16, Value)> + Send;

    /// Calls a bearer-only route of the API (`/v1/…`,
    /// `hookline_api::routes::BEARER_ONLY`: pull) with `Authorization:
    /// Bearer <token>` and no other credential: on AWS, API Gateway's route
    /// for it has no IAM authorizer, so no principal is passed on.
    fn call_bearer(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> impl Future<Output = (u16, Value)> + Send;

    /// Calls the HTTP API (authenticated as the backend expects) with extra
    /// request headers `(name, value)`; returns status, JSON body (`Null`
    /// when not JSON) and the response headers (lower-case names).
    fn call_full(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[(&str, &str)],
    ) -> impl Future<Output = (u16, Value, std::collections::HashMap<String, String>)> + Send;

    /// [`Pipeline::call_full`] without the response headers.
    fn call_with_headers(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[(&str, &str)],
    ) -> impl Future<Output = (u16, Value)> + Send {
        async move {
            let (status, body, _) = self.call_full(method, path, body, headers).await;
            (status, body)
        }
    }

    /// Calls the HTTP API without extra headers.
    fn call(&self, method: &str, path: &str, body: Option<&[u8]>) -> impl Future<Output = (u16, Value)> + Send {
        self.call_with_headers(method, path, body, &[])
    }

    /// The `/metrics` text.
    fn metrics(&self) -> impl Future<Output = String> + Send;

    /// Who the audit trail records for this pipeline's API calls: its API
    /// key's name (`key:default`) behind `hookline serve`, the IAM
    /// principal API Gateway authorized on AWS.
    fn actor(&self) -> String;

    /// Everything the backend has logged so far (for one test's own ids;
    /// on the AWS backend the handlers of all tests in the process share it).
    fn logs(&self) -> impl Future<Output = String> + Send;

    /// Arms a failpoint: the stage that reaches it next crashes there.
    fn crash_at(&mut self, failpoint: &str) -> impl Future<Output = ()> + Send;

    /// After the crash: restart what crashed (a process, or nothing when the
    /// platform retries the invocation by itself).
    fn recover(&mut self) -> impl Future<Output = ()> + Send;

    /// Arms failure injection (`shared::failpoint::Failpoints::fails`): for each
    /// `(failpoint, times)`, the next `times` passes through it fail (a
    /// store error, a lost message). `hookline serve` is restarted for it.
    fn inject_failures(&mut self, failures: &[(&str, u32)]) -> impl Future<Output = ()> + Send;

    /// Gives the reconciler a chance to run: `hookline serve` runs it on its
    /// own interval (tests start it with a short one); on AWS this is one
    /// scheduled invocation (stall margin 2 s).
    fn reconcile(&self) -> impl Future<Output = ()> + Send;

    /// POST JSON.
    fn post(&self, path: &str, body: &Value) -> impl Future<Output = (u16, Value)> + Send {
        let bytes = serde_json::to_vec(body).unwrap();
        async move { self.call("POST", path, Some(&bytes)).await }
    }

    /// POST JSON to a pipeline armed to crash ([`Pipeline::crash_at`]):
    /// `None` when the connection was lost before the answer came (the
    /// process died while answering, as after a `kill -9`: the producer
    /// does not know whether it was accepted and posts it again).
    fn post_racing_a_crash(&self, path: &str, body: &Value) -> impl Future<Output = Option<(u16, Value)>> + Send {
        async move { Some(self.post(path, body).await) }
    }

    /// GET.
    fn get(&self, path: &str) -> impl Future<Output = (u16, Value)> + Send {
        self.call("GET", path, None)
    }

    /// Creates a subscription and waits until it is verified; returns (id, secret).
    fn subscribe(&self, body: Value) -> impl Future<Output = (String, String)> + Send {
        async move {
            let (status, sub) = self.post("/v1/subscriptions", &body).await;
            assert_eq!(status, 201, "create subscription: {sub}");
            let created: hookline_wire::subscriptions::SubscriptionWithSecret =
                serde_json::from_value(sub.clone()).unwrap_or_else(|e| panic!("not the created answer ({e}): {sub}"));
            let (id, secret) = (created.subscription.id, created.secret);
            let path = format!("/v1/subscriptions/{id}");
            crate::eventually(20, "subscription verified", || async {
                let (_, s) = self.get(&path).await;
                let s: hookline_wire::subscriptions::Subscription = serde_json::from_value(s).ok()?;
                s.verified.then_some(())
            })
            .await;
            (id, secret)
        }
    }

    /// Deliveries of an event, once `sagas` sagas exist and all are terminal.
    fn settled_deliveries(&self, event_id: &str, sagas: usize, secs: u64) -> impl Future<Output = Vec<Value>> + Send {
        let path = format!("/v1/events/{event_id}/deliveries");
        let what = format!("{sagas} terminal sagas for {event_id}");
        async move {
            crate::eventually(secs, &what, || async {
                let (_, v) = self.get(&path).await;
                let d = v["items"].as_array().cloned().unwrap_or_default();
                let done = d.iter().filter(|s| s["status"] == "completed" || s["status"] == "dead_lettered").count();
                (d.len() == sagas && done == sagas).then_some(d)
            })
            .await
        }
    }
}

/// Settings a scenario needs other than the test defaults, said once for
/// both backends: `hookline serve` gets them as flags (or the environment
/// variables its settings fall back to), the AWS pipeline as its
/// [`shared::context::Config`].
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `(failures, cool-down ms, longest cool-down ms)` of the breaker.
    pub breaker: Option<(u32, u64, u64)>,
    /// `DISABLE_AFTER`, in seconds.
    pub disable_after_secs: Option<u64>,
    /// `BULK_PAGE_SIZE`: items per page of a bulk job.
    pub bulk_page_size: Option<usize>,
    /// `JOBS_PER_TENANT` and `JOB_MAX_ITEMS`: the bounds of bulk jobs.
    pub job_bounds: Option<(usize, u64)>,
    /// A reconciler every second with a stall margin of 2 s. On `hookline
    /// serve` it runs on its own interval; the AWS pipeline has the 2 s
    /// margin always and runs the reconciler when the scenario calls
    /// [`Pipeline::reconcile`].
    pub fast_reconcile: bool,
    /// `TRUST_ACTOR_HEADER`: the `X-Actor` header is recorded after the credential.
    pub trust_actor_header: bool,
    /// `STRICT_CATALOG`: events of types not in the event catalog are refused.
    pub strict_catalog: bool,
    /// `DESTINATION_ARNS`: the queues and buses subscriptions may deliver to.
    pub destination_arns: Option<String>,
    /// `EVENT_LISTING=false`: no listing of events by time or by tenant.
    pub event_listing_off: bool,
    /// `RECONCILE_STALL_MARGIN`, where a run measures a deployment's
    /// (the tests' pipelines use 2 s, which makes a job queued longer read
    /// its saga).
    pub stall_margin: Option<&'static str>,
}

impl Settings {
    /// Subscriptions may deliver only to these queues and buses (`DESTINATION_ARNS`).
    pub fn destination_arns(mut self, arns: &str) -> Self {
        self.destination_arns = Some(arns.to_string());
        self
    }

    /// The breaker opens after `failures` and cools down `cool_ms`, doubling up to `max_ms`.
    pub fn breaker(mut self, failures: u32, cool_ms: u64, max_ms: u64) -> Self {
        self.breaker = Some((failures, cool_ms, max_ms));
        self
    }

    /// A subscription failing for `secs` is disabled.
    pub fn disable_after_secs(mut self, secs: u64) -> Self {
        self.disable_after_secs = Some(secs);
        self
    }

    /// Bulk jobs act on `n` items per page.
    pub fn bulk_page_size(mut self, n: usize) -> Self {
        self.bulk_page_size = Some(n);
        self
    }

    /// The `X-Actor` header is trusted ([`Settings::trust_actor_header`]).
    pub fn trust_actor_header(mut self) -> Self {
        self.trust_actor_header = true;
        self
    }

    /// Events are not listed by time or by tenant ([`Settings::event_listing_off`]).
    pub fn event_listing_off(mut self) -> Self {
        self.event_listing_off = true;
        self
    }

    /// Events of unregistered types are refused ([`Settings::strict_catalog`]).
    pub fn strict_catalog(mut self) -> Self {
        self.strict_catalog = true;
        self
    }

    /// At most `per_tenant` jobs running per tenant, of at most `max_items` each.
    pub fn job_bounds(mut self, per_tenant: usize, max_items: u64) -> Self {
        self.job_bounds = Some((per_tenant, max_items));
        self
    }

    /// See [`Settings::fast_reconcile`].
    pub fn fast_reconcile(mut self) -> Self {
        self.fast_reconcile = true;
        self
    }

    /// These settings as the declared settings' names and values
    /// (`shared::config::SETTINGS`), which both backends parse the way they
    /// parse their own: `hookline serve` as flags, the AWS pipeline through
    /// `Config::from_lookup`, so derived values (a job's visibility, a
    /// probe's timeout) follow as they do in production.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut p: Vec<(&'static str, String)> = Vec::new();
        if let Some((f, c, m)) = self.breaker {
            p.push(("BREAKER_FAILURES", f.to_string()));
            p.push(("BREAKER_COOL_DOWN_MS", c.to_string()));
            p.push(("BREAKER_MAX_COOL_DOWN_MS", m.to_string()));
        }
        if let Some(s) = self.disable_after_secs {
            p.push(("DISABLE_AFTER", format!("{s}s")));
        }
        if let Some(n) = self.bulk_page_size {
            p.push(("BULK_PAGE_SIZE", n.to_string()));
        }
        if let Some((per_tenant, max_items)) = self.job_bounds {
            p.push(("JOBS_PER_TENANT", per_tenant.to_string()));
            p.push(("JOB_MAX_ITEMS", max_items.to_string()));
        }
        if self.fast_reconcile {
            p.push(("RECONCILE_STALL_MARGIN", "2s".to_string()));
        }
        if self.trust_actor_header {
            p.push(("TRUST_ACTOR_HEADER", "true".to_string()));
        }
        if self.strict_catalog {
            p.push(("STRICT_CATALOG", "true".to_string()));
        }
        if let Some(a) = &self.destination_arns {
            p.push(("DESTINATION_ARNS", a.clone()));
        }
        if self.event_listing_off {
            p.push(("EVENT_LISTING", "false".to_string()));
        }
        if let Some(m) = self.stall_margin {
            p.push(("RECONCILE_STALL_MARGIN", m.to_string()));
        }
        p
    }

    /// `hookline serve`'s flags for these settings: each setting's declared
    /// flag, and the reconciler's interval (a flag of serve's own).
    pub fn serve_args(&self) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        for (key, value) in self.pairs() {
            let declared = shared::config::setting(key).unwrap_or_else(|| panic!("{key} is not a declared setting"));
            a.push(format!("{}={value}", declared.flag));
        }
        if self.fast_reconcile {
            a.extend(["--reconcile-interval", "1s"].map(String::from));
        }
        a
    }

    /// The configuration of an AWS pipeline with these settings, on top of
    /// the tests' own (`base`: short delivery timeouts, a 2 s stall margin
    /// as the test's reconciler runs), parsed as a function parses its
    /// environment; callbacks to loopback addresses allowed.
    pub fn aws_config(&self, base: &[(&'static str, &str)]) -> shared::context::Config {
        let mut given: std::collections::HashMap<&str, String> =
            base.iter().map(|(k, v)| (*k, v.to_string())).collect();
        given.extend(self.pairs());
        let c = shared::context::Config::from_lookup(|k| given.get(k).cloned())
            .unwrap_or_else(|e| panic!("test settings: {e}"));
        shared::context::Config { address_policy: shared::ssrf::AddressPolicy::AllowLoopback, ..c }
    }
}
