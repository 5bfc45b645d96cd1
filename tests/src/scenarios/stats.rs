//! Delivery statistics and response excerpts through real HTTP (issue 26):
//! a subscription whose receiver succeeds and one whose receiver fails
//! with a body, both of one tenant; the excerpt of the failing answers in
//! the deliveries; once the minute closed, both stats routes count every
//! attempt (per subscription, per tenant, the system; minute and hour
//! points) with percentiles; scoping and range checks.

use chrono::{DateTime, Duration as Span, Utc};
use shared::access::Role;
use shared::stats::Width;

use super::*;

fn enc(t: DateTime<Utc>) -> String {
    t.to_rfc3339().replace(':', "%3A").replace('+', "%2B")
}

/// `total` of a stats answer as (succeeded, failed, dead_lettered).
fn counts(v: &Value) -> (u64, u64, u64) {
    let t = &v["total"];
    (t["succeeded"].as_u64().unwrap(), t["failed"].as_u64().unwrap(), t["dead_lettered"].as_u64().unwrap())
}

pub async fn stats_count_every_attempt_and_failures_keep_an_excerpt<P: Pipeline>(s: &P) {
    let tag = shared::ids::random_token("").chars().filter(char::is_ascii_alphanumeric).take(10).collect::<String>();
    let tenant = format!("stats-{tag}");
    let r = Receiver::start().await;
    // 300 bytes: an error line with a line break and a bell, then padding.
    let mut answer = b"{\"error\": \"database\ndown\"}\x07".to_vec();
    answer.resize(300, b'x');
    let types = json!([format!("st{tag}.*")]);
    let (ok, _) = s
        .subscribe(json!({"callback_url": r.url("/ok", Behaviour::Ok), "event_types": [format!("st{tag}.*"), format!("trigger{tag}.*")],
                          "tenant_id": tenant}))
        .await;
    let (bad, _) = s
        .subscribe(json!({"callback_url": r.url("/bad", Behaviour::AlwaysWithBody(500, answer.clone())),
                          "event_types": types, "tenant_id": tenant, "retry_policy": fast_retry(2)}))
        .await;

    let mut last = Utc::now();
    let mut first = None;
    for i in 0..3 {
        let (st, ev) = s
            .post("/v1/events", &json!({"type": format!("st{tag}.created"), "tenant_id": tenant, "data": {"i": i}}))
            .await;
        assert_eq!(st, 202, "{ev}");
        let d = s.settled_deliveries(ev["event_id"].as_str().unwrap(), 2, 30).await;
        for delivery in &d {
            for a in delivery["attempts"].as_array().unwrap() {
                let at: DateTime<Utc> = a["at"].as_str().unwrap().parse().unwrap();
                first = Some(first.map_or(at, |f: DateTime<Utc>| f.min(at)));
                last = last.max(at);
                if delivery["subscription_id"] == json!(bad) {
                    assert_eq!(a["status_code"], 500, "{a}");
                    let excerpt = a["response_excerpt"].as_str().unwrap_or_else(|| panic!("an excerpt: {a}"));
                    let head = "{\"error\": \"database down\"}\u{FFFD}";
                    let want = format!("{head}{}", "x".repeat(256 - head.len()));
                    assert_eq!(excerpt, want, "256 bytes, line break as a space, the bell replaced");
                } else {
                    assert_eq!(a["status_code"], 200, "{a}");
                    assert!(a["response_excerpt"].is_null(), "a success keeps no excerpt: {a}");
                }
            }
        }
        let bad_one = d.iter().find(|x| x["subscription_id"] == json!(bad)).unwrap();
        assert_eq!(bad_one["status"], "dead_lettered", "{bad_one}");
    }
    let first = first.unwrap();

    // Minutes are stored once they closed: wait for the next minute, then
    // deliver once more (on AWS the delivery function flushes at the end
    // of an invocation; `hookline serve` on its tick).
    let since = Width::Minute.start_of(first);
    let until = Width::Minute.start_of(last) + Span::minutes(1);
    let wait = (until - Utc::now()).to_std().unwrap_or_default() + Duration::from_secs(1);
    tokio::time::sleep(wait).await;
    let (st, v) =
        s.post("/v1/events", &json!({"type": format!("trigger{tag}.tick"), "tenant_id": tenant, "data": {}})).await;
    assert_eq!(st, 202, "{v}");
    s.settled_deliveries(v["event_id"].as_str().unwrap(), 1, 30).await;

    let range = format!("since={}&until={}", enc(since), enc(until));
    // A container flushes its closed minutes at the end of an invocation,
    // which may be just after the delivery it made is seen settled (on AWS
    // a first-try success completes its saga in the delivery's own write):
    // wait for the counts a series must reach, then check the rest.
    let read = |path: String, reached: fn((u64, u64, u64)) -> bool| async move {
        eventually(30, &format!("{path} counts every attempt"), || async {
            let (st, v) = s.get(&path).await;
            assert_eq!(st, 200, "{path}: {v}");
            reached(counts(&v)).then_some(v)
        })
        .await
    };
    let mine = read(format!("/v1/subscriptions/{ok}/stats?{range}"), |c| c == (3, 0, 0)).await;
    assert_eq!(counts(&mine), (3, 0, 0), "{mine}");
    assert_eq!(mine["subscription_id"], json!(ok));
    assert_eq!(mine["bucket"], "minute");
    for p in ["p50_ms", "p90_ms", "p99_ms"] {
        assert!(mine["total"][p].as_f64().is_some(), "{p}: {mine}");
    }
    let points = mine["points"].as_array().unwrap();
    assert!(!points.is_empty() && points.len() <= 2, "{mine}");
    let point_sum: u64 = points.iter().map(|p| p["succeeded"].as_u64().unwrap()).sum();
    assert_eq!(point_sum, 3, "the points add up to the total: {mine}");

    let failing = read(format!("/v1/subscriptions/{bad}/stats?{range}"), |c| c == (0, 6, 3)).await;
    assert_eq!(counts(&failing), (0, 6, 3), "two attempts each, the second dead-letters: {failing}");
    assert!(failing["total"]["p50_ms"].as_f64().is_some(), "failed requests have latencies: {failing}");

    let theirs = read(format!("/v1/stats?tenant_id={tenant}&{range}"), |c| c == (3, 6, 3)).await;
    assert_eq!(counts(&theirs), (3, 6, 3), "the tenant's series: {theirs}");
    assert_eq!(theirs["tenant_id"], json!(tenant));
    let all = read(format!("/v1/stats?{range}"), |(a, b, c)| a >= 3 && b >= 6 && c >= 3).await;
    let (a, b, c) = counts(&all);
    assert!(a >= 3 && b >= 6 && c >= 3, "the system counts every subscription: {all}");

    let hour_range = format!("bucket=hour&since={}&until={}", enc(Width::Hour.start_of(since)), enc(Utc::now()));
    let hours = read(format!("/v1/subscriptions/{bad}/stats?{hour_range}"), |c| c == (0, 6, 3)).await;
    assert_eq!(counts(&hours), (0, 6, 3), "the hours roll the minutes up: {hours}");
    assert_eq!(hours["bucket"], "hour");

    // Scoping: another tenant's key sees neither the subscription nor the tenant.
    let other = s.credential(Role::Reader, Some(&format!("other-{tag}"))).await;
    let (st, v) = s.call_as(&other, "GET", &format!("/v1/subscriptions/{ok}/stats"), None, &[]).await;
    assert_eq!(st, 404, "{v}");
    let (st, v) = s.call_as(&other, "GET", &format!("/v1/stats?tenant_id={tenant}"), None, &[]).await;
    assert_eq!(st, 403, "{v}");
    let (st, v) = s.call_as(&other, "GET", "/v1/stats", None, &[]).await;
    assert_eq!((st, counts(&v)), (200, (0, 0, 0)), "a bound key reads its own tenant's series: {v}");
    assert_eq!(v["tenant_id"], json!(format!("other-{tag}")));

    // Bad ranges name their field; the subscription route takes no tenant.
    let now = Utc::now();
    for (path, status, field) in [
        (format!("/v1/stats?since={}&until={}", enc(now), enc(now)), 422, "until"),
        (format!("/v1/stats?since={}", enc(now - Span::hours(25))), 422, "since"),
        (format!("/v1/subscriptions/{ok}/stats?bucket=hour&since={}", enc(now - Span::days(400))), 422, "since"),
        (format!("/v1/subscriptions/{ok}/stats?tenant_id={tenant}"), 400, "tenant_id"),
        ("/v1/stats?bucket=day".to_string(), 400, "bucket"),
    ] {
        let (st, v) = s.get(&path).await;
        assert_eq!((st, v["error"]["field"].as_str()), (status, Some(field)), "{path}: {v}");
    }
}
