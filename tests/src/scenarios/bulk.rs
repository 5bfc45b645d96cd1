//! Dead letters at scale, bulk requeue and skip jobs, replays (issue 11).

use super::*;
use hookline_wire as wire;

// ---------------------------------------------------------------------------
// Issue 11, part B: dead letters at scale, bulk requeue/skip jobs, replays.

/// Every item of a dead-letter listing at `path` (with its query string),
/// following `next_cursor` page by page (`limit` per page).
pub async fn all_dead_letters<P: Pipeline>(s: &P, query: &str, limit: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10_000 {
        let c = cursor.as_deref().map(|c| format!("&cursor={c}")).unwrap_or_default();
        let (st, v) = s.get(&format!("/v1/dead-letters?limit={limit}&{query}{c}")).await;
        assert_eq!(st, 200, "{query}: {v}");
        out.extend(v["items"].as_array().unwrap().iter().cloned());
        match v["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return out,
        }
    }
    panic!("too many pages")
}

/// Posts `n` events of `event_type` (tenant `tenant` if any) in batches of
/// 100; returns their ids in order.
pub async fn post_many<P: Pipeline>(s: &P, n: usize, event_type: &str, tenant: Option<&str>) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let batch: Vec<Value> = chunk
            .iter()
            .map(|i| match tenant {
                Some(t) => json!({"type": event_type, "tenant_id": t, "data": {"i": i}}),
                None => json!({"type": event_type, "data": {"i": i}}),
            })
            .collect();
        let (st, v) = s.call("POST", "/v1/events/batch", Some(&serde_json::to_vec(&batch).unwrap())).await;
        assert_eq!(st, 202, "{v}");
        ids.extend(v["results"].as_array().unwrap().iter().map(|r| r["event_id"].as_str().unwrap().to_string()));
    }
    ids
}

/// Waits until `query` lists exactly `n` dead letters. Each look lists
/// them all (on AWS, pages of emulator queries over a growing table), so it
/// looks twice a second rather than every 25 ms, leaving the emulator to
/// the pipeline it waits for.
pub async fn wait_dead_letters<P: Pipeline>(s: &P, query: &str, n: usize, secs: u64) -> Vec<Value> {
    let what = format!("{n} dead letters for {query}");
    eventually_every(secs, Duration::from_millis(500), &what, || async {
        let all = all_dead_letters(s, query, 1000).await;
        (all.len() == n).then_some(all)
    })
    .await
}

/// Follows a job until it is no longer running (looking 4 times a second:
/// a bulk job runs for minutes on the emulator, which every look also
/// serves); returns it.
pub async fn finished_job<P: Pipeline>(s: &P, job_id: &str, secs: u64) -> Value {
    eventually_every(secs, Duration::from_millis(250), "the job finished", || async {
        let (st, v) = s.get(&format!("/v1/jobs/{job_id}")).await;
        assert_eq!(st, 200, "{v}");
        (v["state"] != "running").then_some(v)
    })
    .await
}

/// A subscription whose deliveries to `path` fail with 400 (not a breaker
/// failure) and dead-letter at the first attempt.
pub async fn failing_subscription<P: Pipeline>(s: &P, r: &Receiver, path: &str, types: &[&str]) -> String {
    let (id, _) = s
        .subscribe(json!({"callback_url": r.url(path, Behaviour::Ok), "event_types": types,
                          "retry_policy": {"max_attempts": 1, "base_delay_ms": 50, "max_delay_ms": 100}}))
        .await;
    r.set(path, Behaviour::Always(400));
    id
}

/// Lists by every filter (subscription, event type, tenant, state, time
/// range), empty results, a cursor walk that lists each dead letter once
/// while new ones arrive, and bad input (400 naming the field, 422 for an
/// inverted range).
pub async fn dead_letters_are_listed_by_every_filter_and_walked_once<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let a = failing_subscription(s, &r, "/dl-a", &["dlf.a"]).await;
    let b = failing_subscription(s, &r, "/dl-b", &["dlf.b"]).await;
    let before = chrono::Utc::now() - chrono::Duration::seconds(1);
    post_many(s, 12, "dlf.a", Some("acme")).await;
    post_many(s, 5, "dlf.b", None).await;
    let of_a = wait_dead_letters(s, &format!("subscription_id={a}"), 12, 60).await;
    wait_dead_letters(s, &format!("subscription_id={b}"), 5, 60).await;
    assert!(of_a.iter().all(|d| d["subscription_id"] == a.as_str() && d["tenant_id"] == "acme"));
    assert!(of_a.iter().all(|d| d.get("event").is_none()), "lists leave the event snapshot out");
    // Newest first (to the millisecond: the order's unit).
    let times: Vec<String> = of_a.iter().map(|d| d["created_at"].as_str().unwrap().to_string()).collect();
    let ms: Vec<i64> =
        times.iter().map(|t| t.parse::<chrono::DateTime<chrono::Utc>>().unwrap().timestamp_millis()).collect();
    assert!(ms.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    assert_eq!(all_dead_letters(s, "event_type=dlf.b", 3).await.len(), 5);
    assert_eq!(all_dead_letters(s, "tenant_id=acme&event_type=dlf.a", 5).await.len(), 12);
    assert_eq!(all_dead_letters(s, &format!("subscription_id={b}&state=open"), 2).await.len(), 5);
    let since = before.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    assert_eq!(all_dead_letters(s, &format!("subscription_id={a}&since={since}"), 100).await.len(), 12);
    let later = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    assert_eq!(all_dead_letters(s, &format!("subscription_id={a}&since={later}"), 100).await.len(), 0);
    assert_eq!(all_dead_letters(s, &format!("subscription_id={a}&until={since}"), 100).await.len(), 0);
    // Empty results are not errors.
    for q in ["tenant_id=nobody", "event_type=none.such", "subscription_id=sub_none", "state=skipped&event_type=dlf.a"]
    {
        let (st, v) = s.get(&format!("/v1/dead-letters?{q}")).await;
        assert_eq!(st, 200, "{q}: {v}");
        assert_eq!((v["items"].as_array().unwrap().len(), &v["next_cursor"]), (0, &Value::Null), "{q}");
    }
    // A walk by 5 while new dead letters arrive lists the first 12 exactly once.
    let mut seen = Vec::new();
    let (_, first) = s.get(&format!("/v1/dead-letters?subscription_id={a}&limit=5")).await;
    seen.extend(first["items"].as_array().unwrap().iter().map(|d| d["id"].as_str().unwrap().to_string()));
    post_many(s, 4, "dlf.a", Some("acme")).await;
    wait_dead_letters(s, &format!("subscription_id={a}"), 16, 60).await;
    let mut cursor = first["next_cursor"].as_str().map(str::to_string);
    while let Some(c) = cursor {
        let (st, v) = s.get(&format!("/v1/dead-letters?subscription_id={a}&limit=5&cursor={c}")).await;
        assert_eq!(st, 200, "{v}");
        seen.extend(v["items"].as_array().unwrap().iter().map(|d| d["id"].as_str().unwrap().to_string()));
        cursor = v["next_cursor"].as_str().map(str::to_string);
    }
    let mut want: Vec<String> = of_a.iter().map(|d| d["id"].as_str().unwrap().to_string()).collect();
    want.sort();
    seen.sort();
    assert_eq!(seen, want, "each of the first 12 once, none of the 4 that arrived during the walk");
    // Bad input: what cannot be read is a 400, a value breaking a rule a
    // 422, each naming the parameter; a parameter the route does not take
    // (`tenant`, a typo of `tenant_id`) is refused, never an unfiltered page.
    let c = first["next_cursor"].as_str().unwrap();
    for (q, status, code, field) in [
        (format!("subscription_id={b}&cursor={c}"), 400, "invalid_cursor", "cursor"),
        ("cursor=garbage".to_string(), 400, "invalid_cursor", "cursor"),
        ("state=lost".to_string(), 400, "invalid_type", "state"),
        ("state=Open".to_string(), 400, "invalid_type", "state"),
        ("limit=0".to_string(), 422, "invalid_field", "limit"),
        ("limit=ten".to_string(), 400, "invalid_type", "limit"),
        ("since=yesterday".to_string(), 400, "invalid_type", "since"),
        (format!("since={later}&until={since}"), 422, "invalid_range", "until"),
        ("tenant=acme".to_string(), 400, "unknown_parameter", "tenant"),
        ("tenant_id=acme&tenant_id=globex".to_string(), 400, "unknown_parameter", "tenant_id"),
    ] {
        let (st, v) = s.get(&format!("/v1/dead-letters?{q}")).await;
        assert_eq!(
            (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
            (status, Some(code), Some(field)),
            "{q}: {v}"
        );
    }
    // Several bad values: each is named.
    let (st, v) = s.get("/v1/dead-letters?event_type=&limit=0").await;
    let fields: Vec<&str> =
        v["error"]["errors"].as_array().unwrap().iter().map(|i| i["field"].as_str().unwrap()).collect();
    assert_eq!((st, fields), (422, vec!["event_type", "limit"]), "{v}");
}

/// Bulk skip by filter closes exactly the open dead letters it takes, with
/// the job's reason and actor; bad input is refused (no reason 400, bad
/// filter 400/422, unknown job 404) and starts nothing.
pub async fn bulk_skip_by_filter_and_bad_input<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let a = failing_subscription(s, &r, "/sk-a", &["skp.a", "skp.b"]).await;
    post_many(s, 7, "skp.a", None).await;
    post_many(s, 3, "skp.b", None).await;
    wait_dead_letters(s, &format!("subscription_id={a}"), 10, 60).await;
    let (since, until) =
        (chrono::Utc::now() - chrono::Duration::hours(1), chrono::Utc::now() - chrono::Duration::hours(2));
    for (body, status, code, field) in [
        (json!({"filter": {"subscription_id": a}}), 422, "reason_required", "reason"),
        (json!({"filter": {"subscription_id": a}, "reason": "  "}), 422, "reason_required", "reason"),
        (json!({"filter": {"state": "open"}, "reason": "x"}), 400, "unknown_field", "filter.state"),
        (json!({"filter": {"since": since, "until": until}, "reason": "x"}), 422, "invalid_range", "filter.until"),
        (json!({"filter": {"since": "not a time"}, "reason": "x"}), 400, "invalid_type", "filter.since"),
        (json!({"filter": {"event_type": 7}, "reason": "x"}), 400, "invalid_type", "filter.event_type"),
    ] {
        let (st, v) = s.post("/v1/dead-letters/skip", &body).await;
        assert_eq!(
            (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
            (status, Some(code), Some(field)),
            "{body}: {v}"
        );
    }
    // A bad filter field and a bad reason: both reported, nothing started.
    let (st, v) = s
        .post(
            "/v1/dead-letters/skip",
            &json!({"filter": {"subscription_id": a, "event_type": ""}, "reason": "a\u{1b}[31m"}),
        )
        .await;
    let issues: Vec<(&str, &str)> = v["error"]["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|i| (i["field"].as_str().unwrap(), i["code"].as_str().unwrap()))
        .collect();
    assert_eq!((st, issues), (422, vec![("filter.event_type", "invalid_field"), ("reason", "invalid_field")]), "{v}");
    let (st, v) = s.get("/v1/jobs/job_none").await;
    assert_eq!(st, 404, "{v}");
    assert_eq!(all_dead_letters(s, &format!("subscription_id={a}&state=open"), 100).await.len(), 10, "nothing ran");

    let (st, v) = s
        .post(
            "/v1/dead-letters/skip",
            &json!({"filter": {"subscription_id": a, "event_type": "skp.a"}, "reason": "obsolete orders"}),
        )
        .await;
    assert_eq!(st, 202, "{v}");
    let job = finished_job(s, v["job_id"].as_str().unwrap(), 60).await;
    assert_eq!(job["state"], "completed", "{job}");
    assert_eq!(
        (job["kind"].as_str(), job["matched"].as_u64(), job["done"].as_u64(), job["failed"].as_u64()),
        (Some("skip"), Some(7), Some(7), Some(0)),
        "{job}"
    );
    assert_eq!(job["reason"], "obsolete orders");
    assert_eq!(job["filter"]["event_type"], "skp.a");
    let skipped = all_dead_letters(s, &format!("subscription_id={a}&state=skipped"), 100).await;
    assert_eq!(skipped.len(), 7);
    assert!(skipped.iter().all(|d| d["event_type"] == "skp.a"
        && d["resolution"]["reason"] == "obsolete orders"
        && d["resolution"]["job_id"] == job["id"]
        && d["resolution"]["actor"] == job["actor"]));
    assert_eq!(all_dead_letters(s, &format!("subscription_id={a}&state=open"), 100).await.len(), 3);
    // Every state on the wire is snake_case, and reads as the wire types.
    let (st, one) = s.get(&format!("/v1/dead-letters/{}", skipped[0]["id"].as_str().unwrap())).await;
    assert_eq!(st, 200, "{one}");
    assert_eq!(
        (one["state"].as_str(), one["saga_snapshot"]["status"].as_str(), one["resolution"]["action"].as_str()),
        (Some("skipped"), Some("dead_lettered"), Some("skip")),
        "{one}"
    );
    // A route that takes no parameter refuses one, naming it.
    let (st, v) = s.get(&format!("/v1/dead-letters/{}?expand=event", skipped[0]["id"].as_str().unwrap())).await;
    assert_eq!(
        (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
        (400, Some("unknown_parameter"), Some("expand")),
        "{v}"
    );
    let typed: wire::dead_letters::DeadLetter = serde_json::from_value(one.clone()).expect("a dead letter");
    assert_eq!(typed.saga_snapshot.map(|s| s.status), Some(wire::dead_letters::SagaStatus::DeadLettered));
    assert!(typed.event.is_some(), "one dead letter shows its event snapshot: {one}");
    let typed: wire::jobs::Job = serde_json::from_value(job.clone()).expect("a job");
    assert_eq!((typed.kind, typed.state), (wire::jobs::JobKind::Skip, wire::jobs::JobState::Completed));
    let open = all_dead_letters(s, &format!("subscription_id={a}&state=open"), 100).await;
    assert!(open.iter().all(|d| d["state"] == "open" && d["resolution"].is_null()), "{open:?}");
    // One audit record of the job's start, with its actor and reason.
    let (_, audit) = s.get("/v1/audit?action=dead_letters.skip_started&limit=1000").await;
    let mine: Vec<&Value> = audit["items"].as_array().unwrap().iter().filter(|r| r["job_id"] == job["id"]).collect();
    assert_eq!(mine.len(), 1, "{audit}");
    assert_eq!(
        (mine[0]["actor"].as_str(), mine[0]["reason"].as_str()),
        (job["actor"].as_str(), Some("obsolete orders"))
    );
    // A filter that takes nothing completes with nothing done.
    let (_, v) = s.post("/v1/dead-letters/skip", &json!({"filter": {"tenant_id": "nobody"}, "reason": "none"})).await;
    let job = finished_job(s, v["job_id"].as_str().unwrap(), 30).await;
    assert_eq!((job["state"].as_str(), job["matched"].as_u64()), (Some("completed"), Some(0)), "{job}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(r.deliveries("/sk-a").len(), 10, "a skip delivers nothing");
}

/// Bulk requeue of `n` dead letters by filter, the worker killed half way
/// (at `failpoint`, e.g. `bulk.half_page.page5`) and resumed: each dead
/// letter becomes exactly one new saga, delivered once, and the job's
/// counts are exact. Another subscription's dead letters are left open.
pub async fn bulk_requeue_survives_a_crash_half_way<P: Pipeline>(s: &mut P, n: usize, failpoint: &str) {
    let r = Receiver::start().await;
    let a = failing_subscription(s, &r, "/bulk", &["bulk.x"]).await;
    let other = failing_subscription(s, &r, "/bulk-other", &["bulk.y"]).await;
    let ids = post_many(s, n, "bulk.x", None).await;
    post_many(s, 3, "bulk.y", None).await;
    wait_dead_letters(s, &format!("subscription_id={a}&state=open"), n, 600).await;
    wait_dead_letters(s, &format!("subscription_id={other}"), 3, 60).await;
    r.set("/bulk", Behaviour::Ok);
    s.crash_at(failpoint).await;
    let request = json!({"filter": {"subscription_id": a}, "reason": "endpoint fixed"});
    let answered = s.post_racing_a_crash("/v1/dead-letters/requeue", &request).await;
    s.recover().await;
    let job_id = match answered {
        Some((st, v)) => {
            assert_eq!(st, 202, "{v}");
            v["job_id"].as_str().unwrap().to_string()
        }
        // The process died before its answer was written (the job's pages
        // ran first): the dead letters its pages requeued name it.
        None => {
            eventually(60, "a dead letter the job requeued", || async {
                let (_, v) = s.get(&format!("/v1/dead-letters?subscription_id={a}&state=requeued")).await;
                v["items"].get(0)?.pointer("/resolution/job_id")?.as_str().map(String::from)
            })
            .await
        }
    };
    assert!(job_id.starts_with("job_"), "{job_id}");
    let job = finished_job(s, &job_id, 600).await;
    assert_eq!(job["state"], "completed", "{job}");
    assert_eq!(
        (job["matched"].as_u64(), job["done"].as_u64(), job["failed"].as_u64()),
        (Some(n as u64), Some(n as u64), Some(0)),
        "{job}"
    );
    assert_eq!(job["kind"], "requeue");
    eventually(600, "every requeued delivery", || async { (r.successes("/bulk").len() >= n).then_some(()) }).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ok = r.successes("/bulk");
    let mut hooks: Vec<String> = ok.iter().map(|d| d.header("webhook-id").to_string()).collect();
    hooks.sort();
    hooks.dedup();
    // Every requeued saga delivered, each under its event's webhook-id (a
    // delivery in flight when the process was killed may arrive twice:
    // at-least-once, the same webhook-id for the subscriber to dedupe).
    assert_eq!(hooks.len(), n, "each dead letter delivered, under its own webhook-id");
    // Each event: its dead saga and exactly one new one.
    for id in &ids {
        let (_, d) = s.get(&format!("/v1/events/{id}/deliveries")).await;
        let d = d["items"].as_array().unwrap();
        assert_eq!(d.len(), 2, "{id}: {d:?}");
        let new = d.iter().find(|x| x["status"] == "completed").expect("the requeued saga");
        assert_eq!(new["origin"]["kind"], "requeue");
        assert_eq!(new["origin"]["reason"], "endpoint fixed");
    }
    let requeued = all_dead_letters(s, &format!("subscription_id={a}&state=requeued"), 1000).await;
    assert_eq!(requeued.len(), n);
    assert!(requeued.iter().all(|d| d["resolution"]["job_id"] == job_id.as_str()));
    assert_eq!(all_dead_letters(s, &format!("subscription_id={other}&state=open"), 100).await.len(), 3);
    // Requeueing again: nothing is open, nothing happens.
    let (_, v) =
        s.post("/v1/dead-letters/requeue", &json!({"filter": {"subscription_id": a}, "reason": "again"})).await;
    let again = finished_job(s, v["job_id"].as_str().unwrap(), 60).await;
    assert_eq!((again["matched"].as_u64(), again["done"].as_u64()), (Some(0), Some(0)), "{again}");
}

/// `POST /v1/replays` by event id: a job of kind replay whose saga keeps
/// the event's `webhook-id`; bad input is refused (no reason 400, no way
/// to choose events 400, inverted range 422, unknown event 404), and
/// `POST /v1/events/{id}/replay` requires a reason too.
pub async fn replay_job_by_event_id_and_bad_input<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/rp", Behaviour::Ok), "event_types": ["rpl.*"]})).await;
    let (_, ev) = s.post("/v1/events", &json!({"type": "rpl.x", "data": {"k": 1}})).await;
    let id = ev["event_id"].as_str().unwrap().to_string();
    s.settled_deliveries(&id, 1, 30).await;
    let now = chrono::Utc::now();
    let t = |h: i64| (now + chrono::Duration::hours(h)).to_rfc3339();
    for (body, status, field) in [
        (json!({"event_id": id}), 422, Some("reason")),
        (json!({"reason": "x"}), 422, Some("event_id")),
        (json!({"event_id": id, "partition_key": "p", "reason": "x"}), 422, Some("event_id")),
        (json!({"since": t(-1), "reason": "x"}), 422, Some("until")),
        (json!({"since": "an hour ago", "until": t(-1), "reason": "x"}), 400, Some("since")),
        (json!({"since": t(-1), "until": t(-2), "reason": "x"}), 422, Some("until")),
        (json!({"since": t(-24 * 400), "until": t(-1), "reason": "x"}), 422, Some("since")),
        (json!({"event_id": "evt_none", "reason": "x"}), 404, None),
        (json!({"event_id": id, "subscription_id": "sub_none", "reason": "x"}), 404, Some("subscription_id")),
    ] {
        let (st, v) = s.post("/v1/replays", &body).await;
        assert_eq!((st, v["error"]["field"].as_str()), (status, field), "{body}: {v}");
    }
    // Every bad field of a replay body is named, and nothing starts.
    let (st, v) = s
        .post(
            "/v1/replays",
            &json!({"event_id": id, "tenant_id": "acme", "event_types": ["rpl.*", "bad pattern"], "reason": " "}),
        )
        .await;
    let fields: Vec<&str> =
        v["error"]["errors"].as_array().unwrap().iter().map(|i| i["field"].as_str().unwrap()).collect();
    assert_eq!((st, fields), (422, vec!["tenant_id", "event_types[1]", "reason"]), "{v}");
    let (st, v) = s.post(&format!("/v1/events/{id}/replay"), &json!({})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("reason")), "{v}");

    let (st, v) = s.post("/v1/replays", &json!({"event_id": id, "reason": "subscriber lost data"})).await;
    assert_eq!(st, 202, "{v}");
    let job = finished_job(s, v["job_id"].as_str().unwrap(), 60).await;
    assert_eq!(
        (job["kind"].as_str(), job["state"].as_str(), job["matched"].as_u64(), job["done"].as_u64()),
        (Some("replay"), Some("completed"), Some(1), Some(1)),
        "{job}"
    );
    let d = s.settled_deliveries(&id, 2, 30).await;
    assert!(d.iter().any(|x| x["origin"]["kind"] == "replay" && x["origin"]["reason"] == "subscriber lost data"));
    let got = r.successes("/rp");
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].header("webhook-id"), got[1].header("webhook-id"), "a replay keeps the webhook-id");
}

/// `POST /v1/replays` by partition key delivers exactly that partition's
/// events again, in acceptance order through the ordered subscription's
/// lane, each with its original `webhook-id`; by time range exactly the
/// events received in the range.
pub async fn replay_jobs_by_partition_key_and_by_time_range<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    s.subscribe(
        json!({"callback_url": r.url("/rpk", Behaviour::Ok), "event_types": ["rpk.*"], "ordering": "partition"}),
    )
    .await;
    let mut ids = Vec::new();
    for i in 0..12 {
        let key = if i % 3 == 0 { "other" } else { "mine" };
        let (st, v) = s.post("/v1/events", &json!({"type": "rpk.x", "partition_key": key, "data": {"i": i}})).await;
        assert_eq!(st, 202, "{v}");
        ids.push((key, v["event_id"].as_str().unwrap().to_string()));
    }
    for (_, id) in &ids {
        s.settled_deliveries(id, 1, 60).await;
    }
    let first: Vec<_> = r.successes("/rpk");
    // Each event once at least, under its own webhook-id (at-least-once: on
    // a loaded emulator a job can outlive its visibility and come again).
    let mut originals: Vec<&str> = first.iter().map(|d| d.header("webhook-id")).collect();
    originals.sort();
    originals.dedup();
    assert_eq!(originals.len(), 12);
    let originals_seen = first.len();
    let hook_of = |body: &[u8]| {
        first.iter().find(|d| d.body == body).map(|d| d.header("webhook-id").to_string()).expect("an original delivery")
    };
    let (st, v) =
        s.post("/v1/replays", &json!({"partition_key": "mine", "reason": "subscriber restored a backup"})).await;
    assert_eq!(st, 202, "{v}");
    let job = finished_job(s, v["job_id"].as_str().unwrap(), 120).await;
    assert_eq!(
        (job["state"].as_str(), job["matched"].as_u64(), job["done"].as_u64()),
        (Some("completed"), Some(8), Some(8)),
        "{job}"
    );
    // Delivery is at least once: on a loaded machine a replayed job can be
    // received twice (its visibility ran out), so the replay is complete
    // when the partition's 8 events each arrived again, counted by
    // `webhook-id`.
    let distinct_replayed = || {
        let mut seen = std::collections::HashSet::new();
        r.successes("/rpk")
            .into_iter()
            .skip(originals_seen)
            .filter(|d| seen.insert(d.header("webhook-id").to_string()))
            .count()
    };
    if tokio::time::timeout(Duration::from_secs(60), async {
        while distinct_replayed() < 8 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .is_err()
    {
        let mut states = Vec::new();
        for (k, id) in &ids {
            let (_, d) = s.get(&format!("/v1/events/{id}/deliveries")).await;
            states.push(format!("{k} {id}: {}", d["items"]));
        }
        panic!("the partition was not replayed ({} deliveries): {states:#?}", r.successes("/rpk").len());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let all_replayed: Vec<_> = r.successes("/rpk").into_iter().skip(originals_seen).collect();
    // A repeat comes right after its first arrival or later, never before
    // it: each event's first arrival is in acceptance order.
    let mut seen = std::collections::HashSet::new();
    let replayed: Vec<_> =
        all_replayed.iter().filter(|d| seen.insert(d.header("webhook-id").to_string())).cloned().collect();
    assert_eq!(replayed.len(), 8, "exactly the partition's events");
    let seqs: Vec<u64> = replayed.iter().map(|d| d.header("hookline-sequence").parse().unwrap()).collect();
    assert_eq!(seqs, (1..=8).collect::<Vec<u64>>(), "in acceptance order (first arrivals)");
    for d in &replayed {
        assert!(d.json()["data"]["i"].as_u64().unwrap() % 3 != 0, "only partition mine");
        assert_eq!(d.header("webhook-id"), hook_of(&d.body), "the original webhook-id");
    }

    // By time range: exactly the events received inside it.
    let before = chrono::Utc::now();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let inside: Vec<String> = post_many(s, 5, "rpk.t", None).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let after = chrono::Utc::now();
    let outside: Vec<String> = post_many(s, 3, "rpk.t", None).await;
    eventually(60, "the range's first deliveries", || async { (r.successes("/rpk").len() >= 28).then_some(()) }).await;
    let (st, v) = s
        .post("/v1/replays", &json!({"since": before.to_rfc3339(), "until": after.to_rfc3339(), "event_types": ["rpk.t"], "reason": "range"}))
        .await;
    assert_eq!(st, 202, "{v}");
    let job = finished_job(s, v["job_id"].as_str().unwrap(), 120).await;
    assert_eq!((job["matched"].as_u64(), job["done"].as_u64()), (Some(5), Some(5)), "{job}");
    for id in &inside {
        let d = s.settled_deliveries(id, 2, 60).await;
        assert!(d.iter().any(|x| x["origin"]["kind"] == "replay"), "{id}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(r.successes("/rpk").len() >= 33, "12 + 8 + 8 + 5 replayed (a repeat is at least once)");
    for id in &outside {
        let d = s.settled_deliveries(id, 1, 60).await;
        assert!(d.iter().all(|x| x["origin"]["kind"] != "replay"), "{id} is outside the range: {d:?}");
    }
}
