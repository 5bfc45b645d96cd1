//! `hookline serve`'s delivery dispatcher: a slow or hung subscription holds
//! only its own slots, and no subscription has more than its
//! `max_in_flight` requests open.

use std::time::Duration;

use hookline_tests::pipeline::Pipeline;
use hookline_tests::{Behaviour, Receiver, Server};
use serde_json::json;

/// Posts `n` events in batches of 100 and returns their ids.
async fn post_events(s: &Server, prefix: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let batch: Vec<_> =
            chunk.iter().map(|i| json!({"id": format!("{prefix}-{i}"), "type": "t", "data": {}})).collect();
        let (status, _) = s.call("POST", "/v1/events/batch", Some(&serde_json::to_vec(&batch).unwrap())).await;
        assert_eq!(status, 202, "batch accepted");
        ids.extend(chunk.iter().map(|i| format!("{prefix}-{i}")));
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_subscription_does_not_hold_a_healthy_one() {
    const TIMEOUT: Duration = Duration::from_secs(5);
    let s = Server::start_with("fair-hung", &["--delivery-timeout-ms", "5000"]);
    let r = Receiver::start().await;
    // The hung endpoint answers after a minute: every attempt times out.
    s.subscribe(json!({"callback_url": r.url("/hung", Behaviour::SlowFirst(usize::MAX, Duration::from_secs(60))),
                       "event_types": ["*"]}))
        .await;
    s.subscribe(json!({"callback_url": r.url("/ok", Behaviour::Ok), "event_types": ["*"]})).await;

    let n = 300;
    post_events(&s, "hung", n).await;
    hookline_tests::eventually(20, "every healthy delivery", || async {
        (r.deliveries("/ok").len() >= n).then_some(())
    })
    .await;
    let first_hung = r.deliveries("/hung").iter().map(|d| d.at).min().expect("the hung endpoint was tried");
    let last_ok = r.deliveries("/ok").iter().map(|d| d.at).max().unwrap();
    assert!(
        last_ok < first_hung + TIMEOUT,
        "the last healthy delivery came {:?} after the hung subscription's first attempt (its timeout is {TIMEOUT:?})",
        last_ok - first_hung
    );
    // The hung subscription has at most its default max_in_flight (64) open.
    let hung_open = r.max_concurrent("/hung");
    assert!((1..=64).contains(&hung_open), "{hung_open} requests open to the hung endpoint");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_subscription_has_more_than_max_in_flight_requests_open_and_waiting_costs_no_attempt() {
    let s = Server::start("fair-limit");
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/slow", Behaviour::SlowFirst(usize::MAX, Duration::from_millis(150))),
                       "event_types": ["*"], "max_in_flight": 2}))
        .await;
    s.subscribe(json!({"callback_url": r.url("/fast", Behaviour::Ok), "event_types": ["*"]})).await;

    let n = 30;
    let ids = post_events(&s, "limit", n).await;
    hookline_tests::eventually(30, "every delivery to the slow endpoint", || async {
        (r.deliveries("/slow").len() >= n).then_some(())
    })
    .await;
    assert_eq!(r.max_concurrent("/slow"), 2, "two requests at a time, never more");
    assert_eq!(r.deliveries("/fast").len(), n);
    // Waiting for a slot is not an attempt: each delivery succeeded on its first.
    for id in &ids {
        for d in s.settled_deliveries(id, 2, 10).await {
            assert_eq!(d["status"], "completed", "{d}");
            assert_eq!(d["attempts"].as_array().map(Vec::len), Some(1), "{d}");
        }
    }
    let attempts: Vec<String> =
        r.deliveries("/slow").iter().map(|d| d.header("hookline-attempt").to_string()).collect();
    assert!(attempts.iter().all(|a| a == "1"), "{attempts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_max_in_flight_is_a_serve_flag() {
    let s = Server::start_with("fair-default", &["--max-in-flight", "3"]);
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/d", Behaviour::SlowFirst(usize::MAX, Duration::from_millis(150))),
                       "event_types": ["*"]}))
        .await;
    post_events(&s, "default", 24).await;
    hookline_tests::eventually(30, "every delivery", || async { (r.deliveries("/d").len() >= 24).then_some(()) }).await;
    assert_eq!(r.max_concurrent("/d"), 3);
}

/// `rate_limit` 4 a second: no one-second window sees more than 4
/// deliveries, give or take one for the clock's edges, and none costs an
/// extra attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_subscription_gets_no_more_than_its_rate() {
    const RATE: usize = 4;
    let s = Server::start("fair-rate");
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/rate", Behaviour::Ok), "event_types": ["*"], "rate_limit": RATE})).await;
    s.subscribe(json!({"callback_url": r.url("/free", Behaviour::Ok), "event_types": ["*"]})).await;
    let n = 16;
    post_events(&s, "rate", n).await;
    hookline_tests::eventually(10, "the unlimited subscription's deliveries", || async {
        (r.deliveries("/free").len() >= n).then_some(())
    })
    .await;
    hookline_tests::eventually(30, "the rate-limited subscription's deliveries", || async {
        (r.deliveries("/rate").len() >= n).then_some(())
    })
    .await;
    let mut at: Vec<_> = r.deliveries("/rate").iter().map(|d| d.at).collect();
    at.sort();
    for (i, t) in at.iter().enumerate() {
        let in_window = at[i..].iter().take_while(|u| **u < *t + Duration::from_secs(1)).count();
        assert!(in_window <= RATE + 1, "{in_window} deliveries within a second of delivery {i}");
    }
    let span = *at.last().unwrap() - at[0];
    assert!(span >= Duration::from_millis(((n - RATE - 1) * 1000 / RATE) as u64), "{n} deliveries in {span:?}");
    assert!(r.deliveries("/rate").iter().all(|d| d.header("hookline-attempt") == "1"));
}
