//! Finding events: `GET /v1/events` (issue 11): every filter, empty
//! results, a cursor walk while events arrive, bad input, and the outcome
//! filter after a failing and a dead-lettered delivery.

use super::*;

// ------------------------------------------------- Part A: finding events
// GET /v1/events (issue 11): every filter, empty results, a cursor walk
// while events arrive, bad input, and the outcome filter after a failing
// and a dead-lettered delivery.

/// Every item of `GET /v1/events?<filters>`, following `next_cursor`
/// `limit` at a time; before each page after the first, `between` runs
/// (posting new events while the walk goes on).
async fn walk_events<P: Pipeline, F, Fut>(s: &P, filters: &str, limit: usize, mut between: F) -> Vec<Value>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let path = match &cursor {
            None => format!("/v1/events?{filters}&limit={limit}"),
            Some(c) => format!("/v1/events?{filters}&limit={limit}&cursor={c}"),
        };
        let (st, v) = s.get(&path).await;
        assert_eq!(st, 200, "{path}: {v}");
        let items = v["items"].as_array().unwrap_or_else(|| panic!("{path}: {v}"));
        assert!(items.len() <= limit, "{path}: {} items", items.len());
        out.extend(items.iter().cloned());
        match v["next_cursor"].as_str() {
            Some(c) => {
                cursor = Some(c.to_string());
                between().await;
            }
            None => {
                assert!(v["next_cursor"].is_null(), "{v}");
                return out;
            }
        }
    }
    panic!("{filters}: no last page after 1000 pages");
}

/// The ids of a list of items.
fn ids_of(items: &[Value]) -> Vec<String> {
    items.iter().map(|i| i["id"].as_str().unwrap().to_string()).collect()
}

/// `GET /v1/events?<filters>` in one page (at most 1000), as ids.
async fn find_ids<P: Pipeline>(s: &P, filters: &str) -> Vec<String> {
    ids_of(&walk_events(s, filters, 1000, || async {}).await)
}

fn enc(t: &str) -> String {
    t.replace(':', "%3A").replace('+', "%2B")
}

pub async fn events_are_found_by_every_filter_and_cursor_walks_see_each_once<P: Pipeline>(s: &P) {
    let tag = shared::ids::random_token("").chars().filter(char::is_ascii_alphanumeric).take(10).collect::<String>();
    let tenant = format!("acme-{tag}");
    let since = enc(&(chrono::Utc::now() - chrono::Duration::seconds(2)).to_rfc3339());
    let post = |body: Value| async move {
        let (st, v) = s.post("/v1/events", &body).await;
        assert_eq!(st, 202, "{v}");
        // Apart by at least a millisecond: the listing's order is by time.
        tokio::time::sleep(Duration::from_millis(3)).await;
        v["event_id"].as_str().unwrap().to_string()
    };
    let ty = |t: &str| format!("find{tag}.{t}");
    let a = post(json!({"type": ty("created"), "tenant_id": tenant, "partition_key": "k1", "data": {}})).await;
    let b = post(json!({"type": ty("paid"), "tenant_id": tenant, "partition_key": "k1", "data": {}})).await;
    let c = post(json!({"type": ty("created"), "partition_key": "k1", "data": {}})).await;
    let d = post(json!({"type": ty("created"), "tenant_id": format!("globex-{tag}"), "data": {}})).await;
    let e = post(json!({"type": format!("find{tag}x.created"), "tenant_id": tenant, "data": {}})).await;

    // Each filter, newest first.
    let exact = format!("event_type={}&since={since}", ty("created"));
    assert_eq!(find_ids(s, &exact).await, [d.as_str(), c.as_str(), a.as_str()]);
    let pattern = format!("event_type=find{tag}.*&since={since}");
    assert_eq!(
        find_ids(s, &pattern).await,
        [d.as_str(), c.as_str(), b.as_str(), a.as_str()],
        "find{tag}x.created is not under find{tag}.*"
    );
    assert_eq!(find_ids(s, &format!("tenant_id={tenant}")).await, [e.as_str(), b.as_str(), a.as_str()]);
    assert_eq!(find_ids(s, &format!("tenant_id={tenant}&event_type=find{tag}.*")).await, [b.as_str(), a.as_str()]);
    assert_eq!(
        find_ids(s, &format!("tenant_id={tenant}&partition_key=k1")).await,
        [b.as_str(), a.as_str()],
        "the tenant's partition"
    );
    assert_eq!(
        find_ids(s, &format!("partition_key=k1&event_type={}&since={since}", ty("created"))).await,
        [c.as_str()],
        "without tenant_id: the partition of events without a tenant"
    );
    // An item: the event without its body.
    let (st, v) = s.get(&format!("/v1/events?tenant_id={tenant}&event_type={}", ty("created"))).await;
    assert_eq!(st, 200);
    let item = &v["items"][0];
    assert_eq!(item["id"], a.as_str());
    assert_eq!(item["type"], ty("created").as_str());
    assert_eq!(item["tenant_id"], tenant.as_str());
    assert_eq!(item["partition_key"], "k1");
    assert!(item["sequence"].is_null(), "a native envelope has no producer sequence: {item}");
    assert_eq!(item["format"], "native");
    assert!(item["outcome"].is_null() && item.get("body").is_none() && item.get("data").is_none(), "{item}");
    assert!(item["received_at"].is_string() && item["occurred_at"].is_string(), "{item}");
    assert!(v["next_cursor"].is_null());
    // A time range (since inclusive, until exclusive) around b alone.
    let at = |i: &Value| chrono::DateTime::parse_from_rfc3339(i["received_at"].as_str().unwrap()).unwrap();
    let all = walk_events(s, &format!("tenant_id={tenant}"), 100, || async {}).await;
    let b_at = at(&all[1]);
    let range = format!(
        "tenant_id={tenant}&since={}&until={}",
        enc(&b_at.to_rfc3339()),
        enc(&(b_at + chrono::Duration::milliseconds(1)).to_rfc3339())
    );
    assert_eq!(find_ids(s, &range).await, [b.as_str()]);

    // Nothing matches: an empty page, not an error.
    for filters in [
        format!("tenant_id=nobody-{tag}"),
        format!("event_type=nothing{tag}.*&since={since}"),
        format!("tenant_id={tenant}&partition_key=k2"),
        format!("tenant_id={tenant}&outcome=dead_lettered"),
    ] {
        let (st, v) = s.get(&format!("/v1/events?{filters}")).await;
        assert_eq!((st, &v["items"], &v["next_cursor"]), (200, &json!([]), &Value::Null), "{filters}: {v}");
    }

    // Bad input, each naming its field.
    let cursor = {
        let (_, v) = s.get(&format!("/v1/events?tenant_id={tenant}&limit=1")).await;
        v["next_cursor"].as_str().unwrap().to_string()
    };
    let old = enc(&(chrono::Utc::now() - chrono::Duration::days(400)).to_rfc3339());
    for (query, status, field) in [
        (format!("since={since}&until={}", enc("2000-01-01T00:00:00Z")), 422, "until"),
        (format!("since={old}"), 422, "since"),
        ("since=yesterday".to_string(), 400, "since"),
        ("outcome=lost".to_string(), 400, "outcome"),
        ("limit=0".to_string(), 422, "limit"),
        ("limit=1001".to_string(), 422, "limit"),
        ("limit=ten".to_string(), 400, "limit"),
        ("cursor=not-a-cursor".to_string(), 400, "cursor"),
        (format!("tenant_id=globex-{tag}&cursor={cursor}"), 400, "cursor"),
        ("event_type=a%20b".to_string(), 422, "event_type"),
        ("event_type=order*".to_string(), 422, "event_type"),
        (format!("tenant={tenant}"), 400, "tenant"),
    ] {
        let (st, v) = s.get(&format!("/v1/events?{query}")).await;
        assert_eq!((st, v["error"]["field"].as_str()), (status, Some(field)), "{query}: {v}");
    }

    // A cursor walk while new events arrive returns every event that was
    // there when it started exactly once (newer ones are ahead of it).
    let walk_type = format!("walk{tag}");
    let mut before = Vec::new();
    for i in 0..12 {
        let t = if i % 2 == 0 { format!("{walk_type}.even") } else { format!("{walk_type}.odd") };
        let body = if i % 3 == 0 {
            json!({"type": t, "data": {}})
        } else {
            json!({"type": t, "tenant_id": tenant, "data": {}})
        };
        before.push(post(body).await);
    }
    let posted_during = std::sync::Mutex::new(Vec::new());
    for (filters, limit) in [
        (format!("event_type={walk_type}.*&since={since}"), 5),
        (format!("tenant_id={tenant}&event_type={walk_type}.*"), 2),
        (format!("since={since}"), 3),
    ] {
        let got = ids_of(
            &walk_events(s, &filters, limit, || async {
                let t = format!("{walk_type}.during");
                let body = json!({"type": t, "tenant_id": tenant, "data": {}});
                let (st, v) = s.post("/v1/events", &body).await;
                assert_eq!(st, 202);
                posted_during.lock().unwrap().push(v["event_id"].as_str().unwrap().to_string());
            })
            .await,
        );
        let mut unique = got.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), got.len(), "{filters}: an event listed twice: {got:?}");
        let want: Vec<&String> = if filters.starts_with("tenant_id") {
            before.iter().enumerate().filter(|(i, _)| i % 3 != 0).map(|(_, id)| id).collect()
        } else {
            before.iter().collect()
        };
        for id in want {
            assert_eq!(got.iter().filter(|g| *g == id).count(), 1, "{filters}: {id} not listed once in {got:?}");
        }
        if filters.starts_with("since") {
            for id in [&a, &b, &c, &d, &e] {
                assert!(got.contains(id), "{filters}: {id} missing");
            }
        }
    }
}

pub async fn events_are_found_by_delivery_outcome<P: Pipeline>(s: &P) {
    let tag = shared::ids::random_token("").chars().filter(char::is_ascii_alphanumeric).take(10).collect::<String>();
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/flaky", Behaviour::Ok), "event_types": [format!("flaky{tag}.*")],
        "retry_policy": fast_retry(3)}))
        .await;
    s.subscribe(json!({"callback_url": r.url("/down", Behaviour::Ok), "event_types": [format!("down{tag}.*")],
        "retry_policy": fast_retry(2)}))
        .await;
    s.subscribe(json!({"callback_url": r.url("/fine", Behaviour::Ok), "event_types": [format!("fine{tag}.*")]})).await;
    r.set("/flaky", Behaviour::FailFirst(1, 500));
    r.set("/down", Behaviour::Always(500));
    let tenant = format!("t-{tag}");
    let mut ids = Vec::new();
    for t in ["flaky", "down", "fine"] {
        let (st, v) =
            s.post("/v1/events", &json!({"type": format!("{t}{tag}.x"), "tenant_id": tenant, "data": {}})).await;
        assert_eq!(st, 202, "{v}");
        ids.push(v["event_id"].as_str().unwrap().to_string());
    }
    let (flaky, down, fine) = (&ids[0], &ids[1], &ids[2]);
    assert_eq!(s.settled_deliveries(flaky, 1, 30).await[0]["status"], "completed");
    assert_eq!(s.settled_deliveries(down, 1, 30).await[0]["status"], "dead_lettered");
    assert_eq!(s.settled_deliveries(fine, 1, 30).await[0]["status"], "completed");
    let found = |q: String| async move {
        // The dead letter is put after the saga's transition: wait for it.
        eventually(20, &q.clone(), || {
            let q = q.clone();
            async move {
                let (st, v) = s.get(&format!("/v1/events?{q}")).await;
                assert_eq!(st, 200, "{v}");
                Some(v["items"].as_array().unwrap().clone())
            }
        })
        .await
    };
    let want = |items: &[Value], expect: &[(&String, &str)]| {
        let got: Vec<(String, String)> = items
            .iter()
            .map(|i| (i["id"].as_str().unwrap().to_string(), i["outcome"].as_str().unwrap_or("null").to_string()))
            .collect();
        let expect: Vec<(String, String)> = expect.iter().map(|(i, o)| (i.to_string(), o.to_string())).collect();
        got == expect
    };
    let all = found(format!("tenant_id={tenant}")).await;
    assert!(
        want(&all, &[(fine, "null"), (down, "dead_lettered"), (flaky, "failed")]),
        "every event with its outcome: {all:?}"
    );
    let failed = found(format!("tenant_id={tenant}&outcome=failed")).await;
    assert!(want(&failed, &[(down, "dead_lettered"), (flaky, "failed")]), "failed finds dead-lettered too: {failed:?}");
    let dead = found(format!("tenant_id={tenant}&outcome=dead_lettered")).await;
    assert!(want(&dead, &[(down, "dead_lettered")]), "{dead:?}");
    let since = enc(&(chrono::Utc::now() - chrono::Duration::minutes(5)).to_rfc3339());
    let dead = found(format!("outcome=dead_lettered&event_type=down{tag}.*&since={since}")).await;
    assert!(want(&dead, &[(down, "dead_lettered")]), "without a tenant: {dead:?}");
    let failed = found(format!("outcome=failed&since={since}&event_type=flaky{tag}.x")).await;
    assert!(want(&failed, &[(flaky, "failed")]), "{failed:?}");
}

/// `EVENT_LISTING` off: events are delivered as ever and found by id, by
/// partition key and by outcome, while a listing by time or by tenant, and
/// a replay of a time range, are refused with `409 listing_off` naming the
/// setting (never an empty page: the events were stored without entries in
/// that listing), and the refused replay starts no job.
pub async fn without_the_time_listing_events_are_found_by_id_partition_and_outcome<P: Pipeline>(s: &P) {
    let tag = shared::ids::random_token("").chars().filter(char::is_ascii_alphanumeric).take(10).collect::<String>();
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/ok", Behaviour::Ok), "event_types": [format!("ok{tag}.*")]})).await;
    s.subscribe(json!({"callback_url": r.url("/down", Behaviour::Ok), "event_types": [format!("down{tag}.*")],
        "retry_policy": fast_retry(2)}))
        .await;
    r.set("/down", Behaviour::Always(500));
    let tenant = format!("t-{tag}");
    let post = |t: &str, key: Option<&str>| {
        let mut body = json!({"type": format!("{t}{tag}.x"), "tenant_id": tenant, "data": {}});
        if let Some(k) = key {
            body["partition_key"] = json!(k);
        }
        async move {
            let (st, v) = s.post("/v1/events", &body).await;
            assert_eq!(st, 202, "{v}");
            v["event_id"].as_str().unwrap().to_string()
        }
    };
    let ok = post("ok", Some("k1")).await;
    let down = post("down", None).await;
    assert_eq!(s.settled_deliveries(&ok, 1, 30).await[0]["status"], "completed");
    assert_eq!(s.settled_deliveries(&down, 1, 30).await[0]["status"], "dead_lettered");

    let since = enc(&(chrono::Utc::now() - chrono::Duration::minutes(5)).to_rfc3339());
    for q in ["".to_string(), format!("?tenant_id={tenant}"), format!("?since={since}&event_type=ok{tag}.x")] {
        let (st, v) = s.get(&format!("/v1/events{q}")).await;
        assert_eq!((st, v["error"]["code"].as_str()), (409, Some("listing_off")), "{q}: {v}");
        assert!(v["error"]["message"].as_str().unwrap().contains("EVENT_LISTING"), "names the setting: {v}");
    }
    let (st, v) = s.get(&format!("/v1/events/{ok}")).await;
    assert_eq!((st, v["id"].as_str()), (200, Some(ok.as_str())), "by id: {v}");
    let (st, v) = s.get(&format!("/v1/events?tenant_id={tenant}&partition_key=k1")).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(ids_of(v["items"].as_array().unwrap()), [ok.as_str()], "by partition key");
    let failed = eventually(20, "the dead-lettered event by outcome", || async {
        let (st, v) = s.get(&format!("/v1/events?tenant_id={tenant}&outcome=dead_lettered")).await;
        assert_eq!(st, 200, "{v}");
        let ids = ids_of(v["items"].as_array().unwrap());
        (!ids.is_empty()).then_some(ids)
    })
    .await;
    assert_eq!(failed, [down.as_str()], "by outcome");

    let (range_reason, id_reason) = (format!("range {tag}"), format!("by id {tag}"));
    let range = json!({"since": (chrono::Utc::now() - chrono::Duration::minutes(5)).to_rfc3339(),
        "until": chrono::Utc::now().to_rfc3339(), "tenant_id": tenant, "reason": range_reason});
    let (st, v) = s.post("/v1/replays", &range).await;
    assert_eq!((st, v["error"]["code"].as_str()), (409, Some("listing_off")), "a replay of a range: {v}");
    let (st, v) = s.post("/v1/replays", &json!({"event_id": ok, "reason": id_reason})).await;
    assert_eq!(st, 202, "a replay by id: {v}");
    s.settled_deliveries(&ok, 2, 30).await;
    let (st, audit) = s.get("/v1/audit?action=replay.started&limit=1000").await;
    assert_eq!(st, 200, "{audit}");
    let reasons: Vec<&str> = audit["items"].as_array().unwrap().iter().filter_map(|a| a["reason"].as_str()).collect();
    assert!(reasons.contains(&id_reason.as_str()), "the replay by id started: {audit}");
    assert!(!reasons.contains(&range_reason.as_str()), "the refused replay started no job: {audit}");
}

/// The wire contract of the event and audit routes (issue 25), on both
/// backends: an unknown query parameter on each listing (a typo of a
/// filter) is a `400 unknown_parameter` naming it, never a page filtered
/// without it; a replay body with two bad fields reports both and replays
/// nothing; the formats, delivery statuses, outcomes, origins and audit
/// actions are spelled in snake_case (`?format=` still takes the old
/// kebab-case names).
pub async fn event_routes_refuse_unknown_parameters_and_speak_snake_case<P: Pipeline>(s: &P) {
    let tag = shared::ids::random_token("").chars().filter(char::is_ascii_alphanumeric).take(10).collect::<String>();
    let r = Receiver::start().await;
    let (sub, _) = s
        .subscribe(json!({"callback_url": r.url("/down", Behaviour::Ok), "event_types": [format!("wire{tag}.*")],
            "retry_policy": fast_retry(1)}))
        .await;
    r.set("/down", Behaviour::Always(500));
    let change = json!({"id": format!("cf-{tag}"), "entity_type": format!("Wire{tag}"), "entity_id": "e1",
        "change_type": "updated", "published_at": "2026-01-10T12:34:56Z",
        "payload": {"actor": "ops", "before": null, "after": {}, "diff": {}, "recorded_at": "2026-01-10T12:34:56Z"}});
    let (st, v) = s.post("/v1/events?format=change-feed", &change).await;
    assert_eq!(st, 202, "the old kebab-case name is still read: {v}");
    let (st, v) = s.post("/v1/events?format=change_feed", &change).await;
    assert_eq!((st, &v["duplicate"]), (202, &json!(true)), "and the snake_case one: {v}");
    let cf = v["event_id"].as_str().unwrap().to_string();
    let (st, v) = s.post("/v1/events?formt=native", &json!({"type": format!("wire{tag}.x"), "data": {}})).await;
    assert_eq!(
        (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
        (400, Some("unknown_parameter"), Some("formt"))
    );
    let (st, v) =
        s.post("/v1/events", &json!({"id": format!("w-{tag}"), "type": format!("wire{tag}.x"), "data": {}})).await;
    assert_eq!(st, 202, "{v}");
    let id = v["event_id"].as_str().unwrap().to_string();
    let d = s.settled_deliveries(&id, 1, 30).await;
    assert_eq!(d[0]["status"], "dead_lettered", "{d:?}");

    // Snake case on the wire: the event's format, its outcome, the delivery's status.
    let (st, v) = s.get(&format!("/v1/events/{}", enc(&cf))).await;
    assert_eq!((st, &v["format"]), (200, &json!("change_feed")), "{v}");
    let items = eventually(20, "the outcome", || async {
        let (_, v) = s.get(&format!("/v1/events?event_type=wire{tag}.*&outcome=dead_lettered")).await;
        v["items"].as_array().filter(|i| !i.is_empty()).cloned()
    })
    .await;
    assert_eq!(
        (&items[0]["id"], &items[0]["outcome"], &items[0]["format"]),
        (&json!(id), &json!("dead_lettered"), &json!("native"))
    );

    // An unknown parameter on each listing is refused naming it, and so is
    // a parameter given to a route that takes none.
    let sub_q = format!("subscription_id={sub}");
    for (path, typo) in [
        (format!("/v1/events?event_type=wire{tag}.*&tenant=acme"), "tenant"),
        (format!("/v1/events/{id}/deliveries?limit=5&cursr=x"), "cursr"),
        (format!("/v1/audit?{sub_q}&subscription=x"), "subscription"),
        ("/v1/audit?action=event.replayed&acter=key:ops".to_string(), "acter"),
        (format!("/v1/events/{id}?expand=deliveries"), "expand"),
    ] {
        let (st, v) = s.get(&path).await;
        assert_eq!(
            (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
            (400, Some("unknown_parameter"), Some(typo)),
            "{path}: {v}"
        );
        assert!(v.get("items").is_none(), "{path}: no page at all: {v}");
    }
    let (st, v) = s.get("/v1/audit?action=EventReplayed").await;
    assert_eq!(
        (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
        (400, Some("invalid_type"), Some("action"))
    );

    // A replay with two bad fields: both reported, nothing replayed, nothing audited.
    let (st, v) = s.post(&format!("/v1/events/{id}/replay"), &json!({"reason": " ", "replay_key": ""})).await;
    assert_eq!(st, 422, "{v}");
    let fields: Vec<(&str, &str)> = v["error"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["field"].as_str().unwrap(), e["code"].as_str().unwrap()))
        .collect();
    assert_eq!(fields, [("reason", "reason_required"), ("replay_key", "invalid_field")], "{v}");
    let (st, v) = s.post(&format!("/v1/events/{id}/replay"), &json!({"reason": "x", "replay_key": 5})).await;
    assert_eq!(
        (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
        (400, Some("invalid_type"), Some("replay_key"))
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, v) = s.get(&format!("/v1/events/{id}/deliveries")).await;
    assert_eq!(v["items"].as_array().map(Vec::len), Some(1), "nothing replayed: {v}");

    // A good replay: its answer, the new delivery's origin and the audit
    // record, all in snake_case.
    let (st, v) =
        s.post(&format!("/v1/events/{id}/replay"), &json!({"reason": "wire check", "subscription_id": sub})).await;
    assert_eq!(st, 202, "{v}");
    let d = s.settled_deliveries(&id, 2, 30).await;
    let replayed = d.iter().find(|x| !x["origin"].is_null()).expect("the replayed delivery");
    assert_eq!(replayed["origin"]["kind"], "replay", "{replayed}");
    let (st, v) = s.get(&format!("/v1/audit?{sub_q}&action=event.replayed")).await;
    assert_eq!(st, 200, "{v}");
    let rec = &v["items"][0];
    assert_eq!(
        (&rec["action"], &rec["event_id"], &rec["reason"]),
        (&json!("event.replayed"), &json!(id), &json!("wire check")),
        "{v}"
    );
}
