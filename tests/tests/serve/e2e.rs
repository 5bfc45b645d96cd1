//! What only a `hookline serve` process has, so these run on it alone:
//! `kill -9` mid-stream, API-key auth (named keys, the trusted actor
//! header), restart, SIGTERM. The scenario suite both backends run is
//! `hookline_tests::scenario_suite_tests`.

use std::time::Duration;

use hookline_tests::pipeline::Pipeline;
use hookline_tests::{Behaviour, Receiver, Server};
use serde_json::json;

/// Events accepted while the process is killed mid-stream are all delivered
/// after restart; nothing 2xx'd is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_during_ingest_loses_no_accepted_event() {
    let mut s = Server::start("crash-ingest");
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/c", Behaviour::Ok), "event_types": ["*"]})).await;
    let base = s.base.clone();
    let key = s.key.clone();
    let producer = tokio::spawn(async move {
        let c = reqwest::Client::new();
        let mut accepted = Vec::new();
        for i in 0..2000 {
            let res = c
                .post(format!("{base}/v1/events"))
                .bearer_auth(&key)
                .body(format!(r#"{{"id":"ev-{i}","type":"t","data":{{"i":{i}}}}}"#))
                .send()
                .await;
            match res {
                Ok(r) if r.status().as_u16() == 202 => accepted.push(format!("ev-{i}")),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        accepted
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    s.kill9();
    let accepted = producer.await.unwrap();
    assert!(!accepted.is_empty(), "some events were accepted before the kill");
    s.restart(None);
    for id in &accepted {
        let d = s.settled_deliveries(id, 1, 30).await;
        assert_eq!(d[0]["status"], "Completed");
        assert_eq!(d[0]["attempts"].as_array().unwrap().len(), 1, "each attempt recorded once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_is_required_survives_restart_and_sigterm_stops_cleanly() {
    let mut s = Server::start("restart");
    let key = s.key.clone();
    s.restart(None);
    assert_eq!(s.key, key, "the generated key is stored");
    let (st, _) = s.get("/v1/subscriptions").await;
    assert_eq!(st, 200);
    let (st, v) = s.call_with_key("POST", "/v1/events", Some(b"{}"), None).await;
    assert_eq!(st, 401, "{v}");
    assert_eq!(v["error"]["code"], "unauthorized");
    let (st, _) = s.call_with_key("GET", "/v1/subscriptions", None, Some("wrong")).await;
    assert_eq!(st, 401);
    let status = s.terminate();
    assert!(status.success(), "SIGTERM exits cleanly: {status}");
}

/// Named API keys: the audit trail records the key's name, and the `X-Actor`
/// header after it only with `--trust-actor-header`; without it the header
/// is ignored.
#[tokio::test]
async fn named_keys_and_a_trusted_actor_header_are_the_audit_actor() {
    let r = Receiver::start().await;
    let trusted = Server::start_with("keys", &["--api-key", "ops=sekret-ops", "--trust-actor-header"]);
    assert_eq!(trusted.key, "sekret-ops");
    let body = json!({"callback_url": r.url("/k", Behaviour::Ok), "event_types": ["k"]}).to_string();
    let (st, sub) = trusted
        .call_with_headers("POST", "/v1/subscriptions", Some(body.as_bytes()), &[("X-Actor", "alice@example.com")])
        .await;
    assert_eq!(st, 201, "{sub}");
    let id = sub["id"].as_str().unwrap();
    let (st, _) = trusted.call("DELETE", &format!("/v1/subscriptions/{id}"), None).await;
    assert_eq!(st, 204);
    let (_, v) = trusted.get(&format!("/v1/audit?subscription_id={id}&action=subscription.created")).await;
    assert_eq!(v["items"][0]["actor"], "key:ops as `alice@example.com`", "shown quoted (Api::actor): {v}");
    let (_, v) = trusted.get(&format!("/v1/audit?subscription_id={id}&action=subscription.deleted")).await;
    assert_eq!(v["items"][0]["actor"], "key:ops", "{v}");
    let (st, _) = trusted.call_with_key("GET", "/v1/audit", None, Some("not-a-key")).await;
    assert_eq!(st, 401);

    let untrusted = Server::start("keys-untrusted");
    let (st, sub) = untrusted
        .call_with_headers("POST", "/v1/subscriptions", Some(body.as_bytes()), &[("X-Actor", "mallory")])
        .await;
    assert_eq!(st, 201, "{sub}");
    let id = sub["id"].as_str().unwrap();
    let (_, v) = untrusted.get(&format!("/v1/audit?subscription_id={id}&action=subscription.created")).await;
    assert_eq!(v["items"][0]["actor"], "key:default", "the header is ignored unless trusted: {v}");
}

/// Over real HTTP: `/metrics` needs a key (it spans every tenant: a reader
/// or more, of no tenant), `/healthz` stays open, and a known path with
/// another method is a 405 (issue 24; the route-by-route isolation suite
/// is `stages::no_tenant_reaches_another_on_any_route`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_a_key_and_healthz_stays_open() {
    let s = Server::start("metrics-key");
    let (st, v) = s.call_with_key("GET", "/metrics", None, None).await;
    assert_eq!((st, v["error"]["code"].as_str()), (401, Some("unauthorized")), "{v}");
    let (st, _) = s.call_with_key("GET", "/metrics", None, Some("wrong")).await;
    assert_eq!(st, 401);
    let (st, _) = s.call_with_key("GET", "/metrics", None, Some(&s.key)).await;
    assert_eq!(st, 200);
    let (st, v) = s.call_with_key("GET", "/healthz", None, None).await;
    assert_eq!((st, v["status"].as_str()), (200, Some("ok")));
    let (st, v) = s.call_with_key("PUT", "/v1/events", Some(b"{}"), Some(&s.key)).await;
    assert_eq!((st, v["error"]["code"].as_str()), (405, Some("method_not_allowed")), "{v}");
}
