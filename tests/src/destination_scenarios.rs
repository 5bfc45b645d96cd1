//! Queue and bus destinations end to end, on both backends, against the
//! emulator's SQS and EventBridge (`AWS_ENDPOINT_URL`, which `hookline
//! serve` and the AWS pipeline's transport read too): a subscription whose
//! `callback_url` is a queue ARN, or a bus ARN with a rule on the bus that
//! sends its events to a queue the test reads. Verification by token,
//! delivery once, retries, dead letters (a missing queue; a message too
//! large), requeue, replay, FIFO order, and the create-time checks.

use std::time::Duration;

use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use serde_json::{json, Value};
use shared::signing::Secret;

use crate::eventually;
use crate::pipeline::{unique_name, Pipeline};

/// The emulator's account (moto's default).
const ACCOUNT: &str = "123456789012";

/// A queue of the emulator, made for one test.
pub struct TestQueue {
    sqs: aws_sdk_sqs::Client,
    /// Its name.
    pub name: String,
    /// Its URL.
    pub url: String,
    /// Its ARN: the subscriptions' `callback_url`.
    pub arn: String,
}

/// One message read from a [`TestQueue`].
#[derive(Debug, Clone)]
pub struct Received {
    /// The body.
    pub body: String,
    /// String message attributes by name.
    pub attributes: std::collections::BTreeMap<String, String>,
    /// A FIFO queue's `MessageGroupId`.
    pub group: Option<String>,
}

impl Received {
    /// The attribute `name` ("" when absent).
    pub fn attribute(&self, name: &str) -> &str {
        self.attributes.get(name).map_or("", String::as_str)
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("a JSON body ({e}): {}", self.body))
    }
}

/// The ARN a queue named `name` has (made or not).
pub fn queue_arn(name: &str) -> String {
    format!("arn:aws:sqs:us-east-1:{ACCOUNT}:{name}")
}

impl TestQueue {
    /// Creates the queue `name` (`.fifo`: a FIFO queue) with `attributes`.
    pub async fn create(name: &str, attributes: &[(QueueAttributeName, &str)]) -> TestQueue {
        let sqs = aws_sdk_sqs::Client::new(&crate::emulator::aws_config().await);
        let mut req = sqs.create_queue().queue_name(name);
        if name.ends_with(".fifo") {
            req = req.attributes(QueueAttributeName::FifoQueue, "true");
        }
        for (k, v) in attributes {
            req = req.attributes(k.clone(), *v);
        }
        let url = req.send().await.expect("create the queue").queue_url.expect("a queue URL");
        TestQueue { sqs, name: name.to_string(), url, arn: queue_arn(name) }
    }

    /// Deletes it.
    pub async fn delete(&self) {
        self.sqs.delete_queue().queue_url(&self.url).send().await.expect("delete the queue");
    }

    /// Receives (and deletes) what is there now, up to 10 messages.
    pub async fn receive(&self) -> Vec<Received> {
        let out = self
            .sqs
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
            .wait_time_seconds(1)
            .send()
            .await
            .expect("receive");
        let mut got = Vec::new();
        for m in out.messages.unwrap_or_default() {
            if let Some(h) = &m.receipt_handle {
                self.sqs.delete_message().queue_url(&self.url).receipt_handle(h).send().await.expect("delete");
            }
            let attributes = m
                .message_attributes
                .unwrap_or_default()
                .into_iter()
                .filter_map(|(k, v)| Some((k, v.string_value?)))
                .collect();
            let group = m.attributes.and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId).cloned());
            got.push(Received { body: m.body.unwrap_or_default(), attributes, group });
        }
        got
    }

    /// Receives until `n` messages have arrived (at most `secs`); fails on
    /// more.
    pub async fn expect(&self, n: usize, secs: u64) -> Vec<Received> {
        let mut all = Vec::new();
        let until = tokio::time::Instant::now() + Duration::from_secs(secs);
        while all.len() < n && tokio::time::Instant::now() < until {
            all.extend(self.receive().await);
        }
        assert_eq!(all.len(), n, "messages on {}: {all:#?}", self.name);
        all
    }
}

/// One signed EventBridge call to the emulator (the tests' SDK set has no
/// EventBridge client; the signer is Hookline's own).
pub async fn events_call(target: &str, body: Value) -> Value {
    let endpoint = std::env::var("AWS_ENDPOINT_URL").expect("AWS_ENDPOINT_URL (the emulator)");
    let url = reqwest::Url::parse(&format!("{}/", endpoint.trim_end_matches('/'))).unwrap();
    let body = serde_json::to_vec(&body).unwrap();
    let target = format!("AWSEvents.{target}");
    let headers = [("content-type", "application/x-amz-json-1.1"), ("x-amz-target", target.as_str())];
    let keys = awsreq::credentials::resolve().expect("test credentials");
    let scope = awsreq::sigv4::Scope { region: "us-east-1", service: "events", time: std::time::SystemTime::now() };
    let signed = awsreq::sigv4::sign("POST", &url, &headers, &body, &keys, &scope).unwrap();
    let mut req = reqwest::Client::new().post(url).body(body);
    for (k, v) in headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).chain(signed) {
        req = req.header(k, v);
    }
    let res = req.send().await.expect("the emulator answers");
    let status = res.status();
    let v: Value = res.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "{target}: {status} {v}");
    v
}

/// A bus named `name` whose every Hookline event goes to `queue`: the bus
/// ARN a subscription delivers to.
pub async fn bus_to_queue(name: &str, queue: &TestQueue) -> String {
    let bus = events_call("CreateEventBus", json!({"Name": name})).await;
    let arn = bus["EventBusArn"].as_str().expect("a bus ARN").to_string();
    let rule = format!("{name}-all");
    events_call(
        "PutRule",
        json!({"Name": rule, "EventBusName": name, "EventPattern": json!({"source": ["hookline"]}).to_string()}),
    )
    .await;
    events_call("PutTargets", json!({"Rule": rule, "EventBusName": name, "Targets": [{"Id": "q", "Arn": queue.arn}]}))
        .await;
    arn
}

/// Creates a subscription to a queue or bus, reads the verification message
/// through `queue` (`token_of` finds the token in it), checks that a wrong
/// token is refused naming `token` and changes nothing, then confirms it.
/// Returns (id, secret).
async fn subscribe_and_confirm<P: Pipeline>(
    s: &P,
    body: Value,
    queue: &TestQueue,
    token_of: fn(&Received) -> String,
) -> (String, String) {
    let (st, created) = s.post("/v1/subscriptions", &body).await;
    assert_eq!(st, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_string();
    let secret = created["secret"].as_str().unwrap().to_string();
    assert_eq!(created["verified"], false, "a queue or bus waits for its owner: {created}");
    let message = queue.expect(1, 20).await.remove(0);
    let token = token_of(&message);
    assert!(token.starts_with("vtk_"), "{message:?}");
    let path = format!("/v1/subscriptions/{id}");
    let v = eventually(10, "awaiting confirmation", || async {
        let (_, v) = s.get(&path).await;
        v["verification_error"].as_str().is_some_and(|e| e.contains("awaiting confirmation")).then_some(v)
    })
    .await;
    assert!(!v.to_string().contains(&token), "the token is never shown: {v}");
    let (st, e) = s.post(&format!("{path}/verify"), &json!({"token": "vtk_wrong"})).await;
    assert_eq!((st, e["error"]["field"].as_str()), (422, Some("token")), "{e}");
    let (_, v) = s.get(&path).await;
    assert_eq!(v["verified"], false, "a wrong token changes nothing: {v}");
    let (st, v) = s.post(&format!("{path}/verify"), &json!({"token": token})).await;
    assert_eq!((st, &v["verified"]), (200, &json!(true)), "{v}");
    assert!(v["verification_error"].is_null(), "{v}");
    let (st, e) = s.post(&format!("{path}/verify"), &json!({"token": token})).await;
    assert_eq!((st, e["error"]["field"].as_str()), (422, Some("token")), "a token confirms once: {e}");
    (id, secret)
}

/// The token of an SQS verification message.
fn sqs_token(m: &Received) -> String {
    assert_eq!(m.attribute("hookline-event-type"), "hookline.verification", "{m:?}");
    m.json()["token"].as_str().unwrap_or_default().to_string()
}

/// The token of an EventBridge verification entry, as the rule's queue got it.
fn bus_token(m: &Received) -> String {
    let e = m.json();
    assert_eq!(e["detail-type"], "hookline.verification", "{e}");
    e["detail"]["payload"]["token"].as_str().unwrap_or_default().to_string()
}

/// The audit actions recorded for subscription `id`.
async fn audit_actions<P: Pipeline>(s: &P, id: &str) -> Vec<String> {
    let (_, v) = s.get(&format!("/v1/audit?subscription_id={id}")).await;
    v["items"].as_array().into_iter().flatten().filter_map(|r| r["action"].as_str().map(String::from)).collect()
}

pub async fn queue_destination_is_verified_delivered_retried_dead_lettered_requeued_and_replayed<P: Pipeline>(s: &P) {
    let queue = TestQueue::create(&unique_name("hl-dest"), &[]).await;
    let body = json!({"callback_url": queue.arn, "event_types": ["dq.*"], "headers": {"x-team": "crm"},
                      "retry_policy": {"max_attempts": 2, "base_delay_ms": 50, "max_delay_ms": 100}});
    let (id, secret) = subscribe_and_confirm(s, body, &queue, sqs_token).await;
    let (_, v) = s.get(&format!("/v1/subscriptions/{id}")).await;
    assert_eq!(v["destination"], "sqs", "{v}");
    let actions = audit_actions(s, &id).await;
    assert!(actions.iter().any(|a| a == "subscription.verification_failed"), "the wrong token is audited: {actions:?}");
    assert!(actions.iter().any(|a| a == "subscription.verified"), "{actions:?}");

    // Delivered once: the body an HTTPS delivery would POST, the headers as
    // attributes, the signature verifying over the body.
    let (_, ev) = s.post("/v1/events", &json!({"type": "dq.created", "data": {"n": 1}})).await;
    let event_id = ev["event_id"].as_str().unwrap().to_string();
    let d = s.settled_deliveries(&event_id, 1, 20).await;
    assert_eq!(d[0]["status"], "completed", "{d:?}");
    let m = queue.expect(1, 10).await.remove(0);
    assert_eq!(m.json()["data"], json!({"n": 1}), "{m:?}");
    assert_eq!(m.attribute("hookline-event-type"), "dq.created");
    assert_eq!(m.attribute("hookline-attempt"), "1");
    assert_eq!(m.attribute("x-team"), "crm", "custom headers travel too");
    assert!(!m.attributes.contains_key("content-type"));
    shared::signing::verify(
        &[Secret::parse(&secret).unwrap()],
        m.attribute("webhook-id"),
        m.attribute("webhook-timestamp"),
        m.attribute("webhook-signature"),
        m.body.as_bytes(),
        chrono::Utc::now().timestamp(),
        300,
    )
    .expect("the Standard Webhooks signature verifies over the message body");
    let webhook_id = m.attribute("webhook-id").to_string();

    // The queue is gone: each attempt fails (retried), then a dead letter
    // with SQS's reason.
    queue.delete().await;
    let (_, ev2) = s.post("/v1/events", &json!({"type": "dq.updated", "data": {"n": 2}})).await;
    let event2 = ev2["event_id"].as_str().unwrap().to_string();
    let d = s.settled_deliveries(&event2, 1, 30).await;
    assert_eq!(d[0]["status"], "dead_lettered", "{d:?}");
    let attempts = d[0]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "retried on the schedule: {attempts:?}");
    assert!(attempts[0]["error"].as_str().unwrap_or("").contains("SQS"), "{attempts:?}");
    let dead_saga = d[0]["saga_id"].as_str().unwrap().to_string();

    // The queue is back: requeue delivers; replay delivers again with the
    // same webhook-id.
    let queue = TestQueue::create(&queue.name, &[]).await;
    let dead = eventually(10, "the dead letter", || async {
        let (st, v) = s.get(&format!("/v1/dead-letters/{dead_saga}")).await;
        (st == 200).then_some(v)
    })
    .await;
    assert!(dead["reason"].as_str().unwrap_or("").contains("2 attempts"), "{dead}");
    let (st, rq) = s.post(&format!("/v1/dead-letters/{dead_saga}/requeue"), &json!({"reason": "queue back"})).await;
    assert_eq!(st, 202, "{rq}");
    let d = s.settled_deliveries(&event2, 2, 30).await;
    assert!(d.iter().any(|x| x["status"] == "completed"), "{d:?}");
    let requeued = queue.expect(1, 10).await.remove(0);
    assert_eq!(requeued.json()["data"], json!({"n": 2}));
    let (st, rp) = s.post(&format!("/v1/events/{event_id}/replay"), &json!({"reason": "consumer lost it"})).await;
    assert_eq!(st, 202, "{rp}");
    s.settled_deliveries(&event_id, 2, 30).await;
    let replayed = queue.expect(1, 10).await.remove(0);
    assert_eq!(replayed.attribute("webhook-id"), webhook_id, "a replay keeps the webhook-id");
    assert!(queue.receive().await.is_empty(), "each delivery once");
}

pub async fn fifo_queue_keeps_each_partitions_order_and_a_small_queue_dead_letters_at_once<P: Pipeline>(s: &P) {
    let queue = TestQueue::create(&format!("{}.fifo", unique_name("hl-fifo")), &[]).await;
    let body = json!({"callback_url": queue.arn, "event_types": ["fq.*"], "ordering": "partition"});
    let (_, _) = subscribe_and_confirm(s, body, &queue, sqs_token).await;
    let mut ids = Vec::new();
    for i in 0..6 {
        let key = format!("p{}", i % 2);
        let (st, ev) =
            s.post("/v1/events", &json!({"type": "fq.changed", "partition_key": key, "data": {"i": i}})).await;
        assert_eq!(st, 202, "{ev}");
        ids.push(ev["event_id"].as_str().unwrap().to_string());
    }
    for id in &ids {
        s.settled_deliveries(id, 1, 30).await;
    }
    let got = queue.expect(6, 20).await;
    for key in ["p0", "p1"] {
        let seq: Vec<i64> = got
            .iter()
            .filter(|m| m.group.as_deref() == Some(key))
            .map(|m| m.json()["data"]["i"].as_i64().unwrap())
            .collect();
        let want: Vec<i64> = (0..6).filter(|i| format!("p{}", i % 2) == key).collect();
        assert_eq!(seq, want, "partition {key} in order, grouped by its key: {got:?}");
    }

    // A queue whose own size limit is lower than the message: refused by
    // SQS for the message itself, dead-lettered without a retry.
    let small = TestQueue::create(&unique_name("hl-small"), &[(QueueAttributeName::MaximumMessageSize, "1024")]).await;
    let body = json!({"callback_url": small.arn, "event_types": ["sq.*"],
                      "retry_policy": {"max_attempts": 5, "base_delay_ms": 50, "max_delay_ms": 100}});
    let (_, _) = subscribe_and_confirm(s, body, &small, sqs_token).await;
    let (_, ev) = s.post("/v1/events", &json!({"type": "sq.big", "data": {"blob": "x".repeat(4000)}})).await;
    let d = s.settled_deliveries(ev["event_id"].as_str().unwrap(), 1, 30).await;
    assert_eq!(d[0]["status"], "dead_lettered", "{d:?}");
    let attempts = d[0]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "never retried: {attempts:?}");
    assert!(attempts[0]["error"].as_str().unwrap_or("").contains("refused"), "{attempts:?}");
}

pub async fn bus_destination_is_verified_delivered_and_a_too_large_entry_dead_letters<P: Pipeline>(s: &P) {
    let queue = TestQueue::create(&unique_name("hl-busq"), &[]).await;
    let bus = bus_to_queue(&unique_name("hl-bus"), &queue).await;
    let body = json!({"callback_url": bus, "event_types": ["bq.*"],
                      "retry_policy": {"max_attempts": 3, "base_delay_ms": 50, "max_delay_ms": 100}});
    let (id, _) = subscribe_and_confirm(s, body, &queue, bus_token).await;
    let (_, v) = s.get(&format!("/v1/subscriptions/{id}")).await;
    assert_eq!(v["destination"], "eventbridge", "{v}");

    let (_, ev) = s.post("/v1/events", &json!({"type": "bq.created", "data": {"n": 1}})).await;
    let event_id = ev["event_id"].as_str().unwrap().to_string();
    let d = s.settled_deliveries(&event_id, 1, 20).await;
    assert_eq!(d[0]["status"], "completed", "{d:?}");
    let e = queue.expect(1, 15).await.remove(0).json();
    assert_eq!((e["source"].as_str(), e["detail-type"].as_str()), (Some("hookline"), Some("bq.created")), "{e}");
    assert_eq!(e["detail"]["payload"]["data"], json!({"n": 1}), "{e}");
    let webhook_id = e["detail"]["webhook"]["webhook-id"].as_str().unwrap_or_default().to_string();
    assert!(webhook_id.starts_with("msg_"), "{e}");

    // Replayed: the same webhook-id, so a consumer dedupes.
    let (st, _) = s.post(&format!("/v1/events/{event_id}/replay"), &json!({"reason": "again"})).await;
    assert_eq!(st, 202);
    s.settled_deliveries(&event_id, 2, 20).await;
    let again = queue.expect(1, 15).await.remove(0).json();
    assert_eq!(again["detail"]["webhook"]["webhook-id"], webhook_id.as_str());

    // An entry over EventBridge's 256 KB: a dead letter with the reason,
    // one attempt, nothing on the bus.
    let (st, ev) = s.post("/v1/events", &json!({"type": "bq.big", "data": {"blob": "x".repeat(261_900)}})).await;
    assert_eq!(st, 202, "{ev}");
    let d = s.settled_deliveries(ev["event_id"].as_str().unwrap(), 1, 20).await;
    assert_eq!(d[0]["status"], "dead_lettered", "{d:?}");
    let attempts = d[0]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "never retried: {attempts:?}");
    assert!(attempts[0]["error"].as_str().unwrap_or("").contains("larger than EventBridge's limit"), "{attempts:?}");
    let dead_saga = d[0]["saga_id"].as_str().unwrap();
    let dead = eventually(10, "the dead letter", || async {
        let (st, v) = s.get(&format!("/v1/dead-letters/{dead_saga}")).await;
        (st == 200).then_some(v)
    })
    .await;
    assert!(dead["reason"].as_str().unwrap_or("").contains("larger than EventBridge's limit"), "{dead}");
    assert!(queue.receive().await.is_empty());
}

pub async fn destinations_are_checked_when_saved<P: Pipeline>(s: &P) {
    let allowed = queue_arn("hl-allowed");
    let cases = [
        (json!({"callback_url": "arn:aws:sns:us-east-1:123456789012:topic", "event_types": ["*"]}), "callback_url"),
        (json!({"callback_url": "arn:aws:sqs:us-east-1:12:q", "event_types": ["*"]}), "callback_url"),
        (json!({"callback_url": "arn:aws:events:us-east-1:123456789012:rule/r", "event_types": ["*"]}), "callback_url"),
        // Not in the deployment's DESTINATION_ARNS.
        (json!({"callback_url": queue_arn("hl-other"), "event_types": ["*"]}), "callback_url"),
        // Two custom headers do not fit beside Hookline's own attributes.
        (json!({"callback_url": allowed, "event_types": ["*"], "headers": {"x-a": "1", "x-b": "2"}}), "headers"),
        (json!({"callback_url": allowed, "event_types": ["*"], "headers": {"AWS.x": "1"}}), "headers"),
    ];
    for (body, field) in cases {
        let (st, e) = s.post("/v1/subscriptions", &body).await;
        assert_eq!(st, 422, "{body}: {e}");
        assert!(e.to_string().contains(&format!("\"{field}\"")), "{body} names {field}: {e}");
    }
    let (_, list) = s.get("/v1/subscriptions").await;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(0), "nothing written: {list}");
    // A queue in the list is accepted (unverified: the queue does not exist,
    // so its verification message could not be sent, which it says).
    let (st, v) = s.post("/v1/subscriptions", &json!({"callback_url": allowed, "event_types": ["*"]})).await;
    assert_eq!(st, 201, "{v}");
    let id = v["id"].as_str().unwrap();
    let v = eventually(10, "the send failure recorded", || async {
        let (_, v) = s.get(&format!("/v1/subscriptions/{id}")).await;
        v["verification_error"].as_str().is_some_and(|e| e.contains("could not be sent")).then_some(v)
    })
    .await;
    assert_eq!(v["verified"], false);
    // A patch to a bad ARN, or one adding a second header, changes nothing.
    let (st, e) =
        s.call("PATCH", &format!("/v1/subscriptions/{id}"), Some(br#"{"headers": {"x-a": "1", "x-b": "2"}}"#)).await;
    assert_eq!((st, e["error"]["field"].as_str()), (422, Some("headers")), "{e}");
    let (st, _) =
        s.call("PATCH", &format!("/v1/subscriptions/{id}"), Some(br#"{"callback_url": "arn:aws:sqs:x"}"#)).await;
    assert_eq!(st, 422);
    let (_, after) = s.get(&format!("/v1/subscriptions/{id}")).await;
    assert_eq!(after["callback_url"], allowed.as_str());
}

/// Every destination scenario, listed once: each backend's test binary
/// runs them all (`hookline_tests::destination_scenario_tests!(aws)`,
/// `(serve)`), against the emulator `make test` starts.
#[macro_export]
macro_rules! destination_scenario_tests {
    ($backend:ident) => {
        $crate::scenario_tests!($backend, destination_scenarios;
            queue_destination_is_verified_delivered_retried_dead_lettered_requeued_and_replayed,
            fifo_queue_keeps_each_partitions_order_and_a_small_queue_dead_letters_at_once,
            bus_destination_is_verified_delivered_and_a_too_large_entry_dead_letters,
            destinations_are_checked_when_saved;
                $crate::pipeline::Settings::default().destination_arns("arn:aws:sqs:us-east-1:123456789012:hl-allowed"),
        );
    };
}
