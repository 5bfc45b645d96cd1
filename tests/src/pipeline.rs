//! What a scenario needs from a running Hookline, whichever backend: call
//! its HTTP API, crash a stage between two writes, and recover. `Server`
//! (hookline serve on SQLite) and `AwsPipeline` (the Lambda handlers on the
//! AWS emulator) implement it, so one scenario suite runs on both.

use std::future::Future;

use serde_json::Value;

/// A Hookline under test.
pub trait Pipeline: Sync {
    /// Calls the HTTP API (authenticated as the backend expects) with extra
    /// request headers `(name, value)`; returns status and JSON body (`Null`
    /// when not JSON).
    fn call_with_headers(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[(&str, &str)],
    ) -> impl Future<Output = (u16, Value)> + Send;

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

    /// Arms failure injection (`shared::failpoint::fails`): for each
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

    /// GET.
    fn get(&self, path: &str) -> impl Future<Output = (u16, Value)> + Send {
        self.call("GET", path, None)
    }

    /// Creates a subscription and waits until it is verified; returns (id, secret).
    fn subscribe(&self, body: Value) -> impl Future<Output = (String, String)> + Send {
        async move {
            let (status, sub) = self.post("/v1/subscriptions", &body).await;
            assert_eq!(status, 201, "create subscription: {sub}");
            let id = sub["id"].as_str().unwrap().to_string();
            let secret = sub["secret"].as_str().unwrap().to_string();
            let path = format!("/v1/subscriptions/{id}");
            crate::eventually(20, "subscription verified", || async {
                let (_, s) = self.get(&path).await;
                (s["verified"] == true).then_some(())
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
                let d = v["deliveries"].as_array().cloned().unwrap_or_default();
                let done = d.iter().filter(|s| s["status"] == "Completed" || s["status"] == "DeadLettered").count();
                (d.len() == sagas && done == sagas).then_some(d)
            })
            .await
        }
    }
}
