//! The audit trail, failing endpoints and operational events (issue 11).

use super::*;

// ===================================================================
// Audit trail, failing endpoints, operational events (issue 11, helper C)
// ===================================================================

/// A query value with `:` and `/` escaped (actors are ARNs).
fn q(v: &str) -> String {
    v.replace('%', "%25").replace(':', "%3A").replace('/', "%2F").replace(' ', "%20").replace('+', "%2B")
}

/// Every record of `GET /v1/audit?<query>`, all pages followed in pages of
/// `limit`; fails if a record comes twice or the order is not newest first.
pub(super) async fn audit_all<P: Pipeline>(s: &P, query: &str, limit: usize) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..200 {
        let c = cursor.as_deref().map(|c| format!("&cursor={c}")).unwrap_or_default();
        let (st, v) = s.get(&format!("/v1/audit?{query}&limit={limit}{c}")).await;
        assert_eq!(st, 200, "GET /v1/audit?{query}: {v}");
        for r in v["items"].as_array().unwrap() {
            assert!(!out.iter().any(|o| o["id"] == r["id"]), "listed twice: {r}");
            out.push(r.clone());
        }
        match v["next_cursor"].as_str() {
            Some(n) => cursor = Some(n.to_string()),
            None => break,
        }
    }
    let times: Vec<chrono::DateTime<chrono::Utc>> =
        out.iter().map(|r| r["at"].as_str().unwrap().parse().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "newest first: {times:?}");
    out
}

/// The actions of `records`, sorted, to compare as a multiset.
fn actions(records: &[Value]) -> Vec<String> {
    let mut a: Vec<String> = records.iter().map(|r| r["action"].as_str().unwrap().to_string()).collect();
    a.sort();
    a
}

/// Every audited action leaves exactly one record, with the caller as the
/// actor (its API key's name; the IAM principal on AWS) and Hookline's own
/// (breaker flips) as `system`; the body's `actor` is ignored. `GET
/// /v1/audit` filters by action, actor, subscription and time, pages with a
/// cursor that lists every record once, and refuses bad input naming the
/// field. Run with a breaker that opens after 3 failures and cools down
/// for 1 s.
pub async fn audit_records_every_action_once_with_its_actor<P: Pipeline>(s: &P) {
    let me = s.actor();
    let started = chrono::Utc::now() - chrono::Duration::seconds(1);
    let r = Receiver::start().await;
    let (a, _) = s.subscribe(json!({"callback_url": r.url("/aud-a", Behaviour::Ok), "event_types": ["aud.a"]})).await;
    let (st, v) = s.call("PATCH", &format!("/v1/subscriptions/{a}"), Some(br#"{"description": "audited"}"#)).await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = s.post(&format!("/v1/subscriptions/{a}/rotate-secret"), &json!({})).await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = s.post(&format!("/v1/subscriptions/{a}/verify"), &json!({})).await;
    assert_eq!((st, &v["verified"]), (200, &json!(true)), "{v}");

    // A failing endpoint: two dead letters, and the breaker opens.
    let (b, _) = s
        .subscribe(json!({"callback_url": r.url("/aud-b", Behaviour::Ok), "event_types": ["aud.b"], "retry_policy": fast_retry(3)}))
        .await;
    r.set("/aud-b", Behaviour::Always(500));
    let batch = json!([{"id": "aud-e1", "type": "aud.b", "data": 1}, {"id": "aud-e2", "type": "aud.b", "data": 2}]);
    let (st, v) = s.post("/v1/events/batch", &batch).await;
    assert_eq!(st, 202, "{v}");
    // Generous waits: on the emulator, one slow stretch (another test's
    // large transactions) once held these past 60 s in CI.
    let d1 = s.settled_deliveries("aud-e1", 1, 120).await;
    let d2 = s.settled_deliveries("aud-e2", 1, 120).await;
    assert_eq!((d1[0]["status"].as_str(), d2[0]["status"].as_str()), (Some("dead_lettered"), Some("dead_lettered")));
    let (dl1, dl2) = (d1[0]["saga_id"].as_str().unwrap().to_string(), d2[0]["saga_id"].as_str().unwrap().to_string());
    for dl in [&dl1, &dl2] {
        eventually(20, "the dead letter", || async {
            (s.get(&format!("/v1/dead-letters/{dl}")).await.0 == 200).then_some(())
        })
        .await;
    }
    r.set("/aud-b", Behaviour::Ok);
    // Past the breaker's cool-down (at most 2 s here), so the requeued
    // delivery is its probe: a job that meets an open breaker waits at most
    // until its saga's last scheduled attempt, which for a requeue of this
    // fast schedule comes before the probe (it would be a `breaker_open`
    // dead letter; see wait_scenarios).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    // The body's actor is accepted and ignored; a reason is required.
    let (st, v) = s.post(&format!("/v1/dead-letters/{dl1}/requeue"), &json!({"actor": "mallory"})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("reason")), "{v}");
    let (st, v) = s
        .post(&format!("/v1/dead-letters/{dl1}/requeue"), &json!({"reason": "endpoint fixed", "actor": "mallory"}))
        .await;
    assert_eq!(st, 202, "{v}");
    let (st, v) = s.post(&format!("/v1/dead-letters/{dl2}/skip"), &json!({"reason": "not needed"})).await;
    assert_eq!(st, 200, "{v}");
    // The requeued delivery waits out the cool-down, probes, closes the breaker.
    s.settled_deliveries("aud-e1", 2, 60).await;
    let (st, v) = s.post("/v1/events/aud-e1/replay", &json!({"subscription_id": b})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("reason")), "{v}");
    let (st, v) =
        s.post("/v1/events/aud-e1/replay", &json!({"subscription_id": b, "reason": "customer lost data"})).await;
    assert_eq!(st, 202, "{v}");
    s.settled_deliveries("aud-e1", 3, 60).await;
    let (st, _) = s.call("DELETE", &format!("/v1/subscriptions/{a}"), None).await;
    assert_eq!(st, 204);

    // Subscription a: each of its actions once, all by the caller.
    let of_a = eventually(20, "a's records", || async {
        let recs = audit_all(s, &format!("subscription_id={a}"), 100).await;
        (recs.len() >= 6).then_some(recs)
    })
    .await;
    assert_eq!(
        actions(&of_a),
        [
            "subscription.created",
            "subscription.deleted",
            "subscription.secret_rotated",
            "subscription.updated",
            "subscription.verified",
            "subscription.verified"
        ],
        "{of_a:#?}"
    );
    assert!(of_a.iter().all(|r| r["actor"] == me.as_str()), "{of_a:#?}");
    assert!(of_a.iter().all(|r| r["subscription_id"] == a.as_str()));
    let updated = of_a.iter().find(|r| r["action"] == "subscription.updated").unwrap();
    assert_eq!(updated["details"]["changed"], json!(["description"]), "{updated}");
    let rotated = of_a.iter().find(|r| r["action"] == "subscription.secret_rotated").unwrap();
    assert!(!rotated.to_string().contains("whsec_"), "no secret in the trail: {rotated}");

    // Subscription b: the operator's actions by the caller, the breaker's by the system.
    let of_b = eventually(20, "b's records", || async {
        let recs = audit_all(s, &format!("subscription_id={b}"), 2).await;
        (recs.len() >= 7).then_some(recs)
    })
    .await;
    assert_eq!(
        actions(&of_b),
        [
            "breaker.closed",
            "breaker.opened",
            "dead_letter.requeued",
            "dead_letter.skipped",
            "event.replayed",
            "subscription.created",
            "subscription.verified"
        ],
        "{of_b:#?}"
    );
    for rec in &of_b {
        let expected = if rec["action"].as_str().unwrap().starts_with("breaker.") { "system" } else { me.as_str() };
        assert_eq!(rec["actor"], expected, "{rec}");
    }
    let requeued = of_b.iter().find(|r| r["action"] == "dead_letter.requeued").unwrap();
    assert_eq!(
        (requeued["reason"].as_str(), requeued["dead_letter_id"].as_str()),
        (Some("endpoint fixed"), Some(dl1.as_str()))
    );
    assert_eq!(requeued["event_id"], "aud-e1");
    let replayed = of_b.iter().find(|r| r["action"] == "event.replayed").unwrap();
    assert_eq!(
        (replayed["reason"].as_str(), replayed["event_id"].as_str()),
        (Some("customer lost data"), Some("aud-e1"))
    );
    // A count and the one saga, never a list that could outgrow an audit item.
    assert_eq!(replayed["details"]["sagas"], 1, "{replayed}");
    assert!(replayed["details"]["saga_id"].is_string(), "{replayed}");
    let created = of_b.iter().find(|r| r["action"] == "subscription.created").unwrap();
    assert_eq!(created["reason"], Value::Null);

    // Filters, alone and together.
    let by = |query: String| async move { audit_all(s, &query, 3).await };
    let skipped = by(format!("subscription_id={b}&action=dead_letter.skipped")).await;
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0]["dead_letter_id"], dl2.as_str());
    assert_eq!(actions(&by(format!("subscription_id={b}&actor=system")).await), ["breaker.closed", "breaker.opened"]);
    assert_eq!(by(format!("subscription_id={b}&actor={}", q(&me))).await.len(), 5);
    let mine = by(format!("actor={}&since={}", q(&me), q(&started.to_rfc3339()))).await;
    assert!(mine.len() >= 11 && mine.iter().all(|r| r["actor"] == me.as_str()), "{}", mine.len());
    let opened = by(format!("action=breaker.opened&since={}", q(&started.to_rfc3339()))).await;
    assert!(opened.iter().any(|r| r["subscription_id"] == b.as_str()));
    assert!(opened.iter().all(|r| r["action"] == "breaker.opened"));
    let before = by(format!("subscription_id={b}&until={}", q(&started.to_rfc3339()))).await;
    assert!(before.is_empty(), "nothing before the test: {before:?}");
    let (st, v) = s.get("/v1/audit?actor=key%3Anobody").await;
    assert_eq!((st, v["items"].as_array().map(Vec::len), &v["next_cursor"]), (200, Some(0), &Value::Null));

    // Pages of 2 walk a's records exactly once, in the same order as one page.
    let paged = audit_all(s, &format!("subscription_id={a}"), 2).await;
    assert_eq!(paged.iter().map(|r| &r["id"]).collect::<Vec<_>>(), of_a.iter().map(|r| &r["id"]).collect::<Vec<_>>());

    // Bad input names the field.
    for (query, status, field) in [
        ("action=subscription.create", 400, "action"),
        ("limit=0", 422, "limit"),
        ("limit=ten", 400, "limit"),
        ("cursor=not-a-cursor", 400, "cursor"),
        ("subscription=x", 400, "subscription"),
        ("since=yesterday", 400, "since"),
        ("since=2026-11-26T10:00:00Z&until=2026-11-25T10:00:00Z", 422, "until"),
        ("since=2000-01-01T00:00:00Z", 422, "since"),
    ] {
        let (st, v) = s.get(&format!("/v1/audit?{query}")).await;
        assert_eq!((st, v["error"]["field"].as_str()), (status, Some(field)), "{query}: {v}");
    }
    let (_, v) = s.get(&format!("/v1/audit?subscription_id={a}&limit=2")).await;
    let c = v["next_cursor"].as_str().expect("a second page");
    let (st, v) = s.get(&format!("/v1/audit?subscription_id={b}&limit=2&cursor={c}")).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("cursor")), "a cursor of other filters: {v}");
}

/// Operational events delivered to `path` of `r`, of `event_type`.
fn ops_events(r: &Receiver, path: &str, event_type: &str) -> Vec<Value> {
    r.deliveries(path).iter().map(|d| d.json()).filter(|v| v["type"] == event_type).collect()
}

/// A subscription whose deliveries have all failed for the configured time
/// (3 s here) is disabled (`disabled_reason`, `disabled_at`, an audit
/// record by `system`), and a subscriber of `hookline.*` receives
/// `hookline.dead_letter.created` and `hookline.subscription.disabled`;
/// re-enabling it (PATCH `active: true`) re-runs verification, publishes
/// `hookline.subscription.enabled` (a producer that took the ids it had
/// before they were keyed cannot suppress it), and starts a new failing run.
pub async fn failing_endpoint_is_disabled_and_operational_events_are_published<P: Pipeline>(s: &P) {
    let me = s.actor();
    let r = Receiver::start().await;
    let (ops, _) =
        s.subscribe(json!({"callback_url": r.url("/ops", Behaviour::Ok), "event_types": ["hookline.*"]})).await;
    // `*` means every producer event: Hookline's own go only to patterns naming them.
    s.subscribe(json!({"callback_url": r.url("/everything", Behaviour::Ok), "event_types": ["*"]})).await;
    // Producers cannot forge an operational event.
    let (st, v) = s.post("/v1/events", &json!({"type": "hookline.subscription.disabled", "data": {}})).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("type")), "{v}");
    let (sub, _) = s
        .subscribe(json!({"callback_url": r.url("/down", Behaviour::Ok), "event_types": ["fail.*"], "retry_policy": fast_retry(2)}))
        .await;
    r.set("/down", Behaviour::Always(503));
    let (st, _) = s.post("/v1/events", &json!({"id": "fx-1", "type": "fail.one", "data": 1})).await;
    assert_eq!(st, 202);
    let d = s.settled_deliveries("fx-1", 2, 30).await;
    let d: Vec<&Value> = d.iter().filter(|x| x["subscription_id"] == sub.as_str()).collect();
    assert_eq!(d[0]["status"], "dead_lettered");
    let dead = d[0]["saga_id"].as_str().unwrap().to_string();
    let created = eventually(30, "hookline.dead_letter.created delivered", || async {
        ops_events(&r, "/ops", "hookline.dead_letter.created").into_iter().find(|e| e["data"]["event_id"] == "fx-1")
    })
    .await;
    assert_eq!(created["data"]["subscription_id"], sub.as_str());
    assert_eq!(created["data"]["dead_letter_id"], dead.as_str());
    assert_eq!(created["data"]["event_type"], "fail.one");
    assert_eq!(created["data"]["attempts"], 2);
    assert!(created["data"]["last_error"].as_str().unwrap().contains("503"), "{created}");
    let (_, v) = s.get(&format!("/v1/subscriptions/{sub}")).await;
    assert_eq!((&v["active"], &v["disabled_reason"]), (&json!(true), &Value::Null), "failing for less than 3 s: {v}");

    // Past the failing period, the next failure disables it.
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let (st, _) = s.post("/v1/events", &json!({"id": "fx-2", "type": "fail.two", "data": 2})).await;
    assert_eq!(st, 202);
    let v = eventually(30, "the failing subscription disabled", || async {
        let (_, v) = s.get(&format!("/v1/subscriptions/{sub}")).await;
        (v["active"] == false).then_some(v)
    })
    .await;
    assert_eq!(v["disabled_reason"], "failing", "{v}");
    assert!(v["disabled_at"].is_string(), "{v}");
    let disabled = eventually(30, "hookline.subscription.disabled delivered", || async {
        ops_events(&r, "/ops", "hookline.subscription.disabled")
            .into_iter()
            .find(|e| e["data"]["subscription_id"] == sub.as_str())
    })
    .await;
    assert_eq!(disabled["data"]["reason"], "failing");
    assert!(disabled["data"]["failing_since"].is_string(), "{disabled}");
    assert!(disabled["data"]["last_error"].as_str().unwrap().contains("503"), "{disabled}");
    let recs = audit_all(s, &format!("subscription_id={sub}&action=subscription.disabled"), 10).await;
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0]["actor"], "system");

    // Re-enabled: verified again, announced, and not disabled again at once.
    // The ids the announcement had when they were computable, taken first.
    for n in 0..4 {
        let squat = format!("hookline-enabled-{sub}-{n}");
        let (st, v) = s.post("/v1/events", &json!({"id": squat, "type": "zz.squat", "data": {}})).await;
        assert_eq!((st, v["duplicate"].as_bool()), (202, Some(false)), "{v}");
    }
    r.set("/down", Behaviour::Ok);
    let verifications = r.requests("/down").iter().filter(|d| d.is_verification()).count();
    let enabling_at = chrono::Utc::now().to_rfc3339();
    let (st, v) = s.call("PATCH", &format!("/v1/subscriptions/{sub}"), Some(br#"{"active": true}"#)).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!((&v["active"], &v["disabled_reason"], &v["disabled_at"]), (&json!(true), &Value::Null, &Value::Null));
    eventually(20, "re-verified", || async {
        let (_, v) = s.get(&format!("/v1/subscriptions/{sub}")).await;
        (v["verified"] == true).then_some(())
    })
    .await;
    assert_eq!(
        r.requests("/down").iter().filter(|d| d.is_verification()).count(),
        verifications + 1,
        "a new handshake"
    );
    let announced = eventually(30, "hookline.subscription.enabled delivered", || async {
        ops_events(&r, "/ops", "hookline.subscription.enabled")
            .into_iter()
            .find(|e| e["data"]["subscription_id"] == sub.as_str())
    })
    .await;
    assert!(announced["id"].as_str().is_some_and(|id| id.starts_with("hop_")), "a keyed id: {announced}");
    let recs = eventually(20, "the enable and its verification audited", || async {
        let recs = audit_all(s, &format!("subscription_id={sub}&since={}", q(&enabling_at)), 10).await;
        (recs.iter().filter(|r| r["action"] == "subscription.verified").count() == 1).then_some(recs)
    })
    .await;
    let enabled: Vec<&Value> = recs.iter().filter(|r| r["action"] == "subscription.enabled").collect();
    assert_eq!(enabled.len(), 1, "{recs:?}");
    assert_eq!(enabled[0]["actor"], me.as_str());
    let (st, _) = s.post("/v1/events", &json!({"id": "fx-3", "type": "fail.three", "data": 3})).await;
    assert_eq!(st, 202);
    let d = s.settled_deliveries("fx-3", 2, 30).await;
    assert!(d.iter().all(|x| x["status"] == "completed"), "{d:?}");
    let (_, v) = s.get(&format!("/v1/subscriptions/{sub}")).await;
    assert_eq!(v["active"], true);
    assert_eq!(ops_events(&r, "/ops", "hookline.subscription.disabled").len(), 1, "disabled once");
    // The ops channel never hears of its own events' dead letters.
    assert!(ops_events(&r, "/ops", "hookline.dead_letter.created")
        .iter()
        .all(|e| !e["data"]["event_type"].as_str().unwrap_or("").starts_with("hookline.")));
    let (_, v) = s.get(&format!("/v1/subscriptions/{ops}")).await;
    assert_eq!(v["active"], true);
    let everything: Vec<Value> = r.deliveries("/everything").iter().map(|d| d.json()).collect();
    assert!(everything.iter().any(|e| e["id"] == "fx-3"), "the `*` subscriber gets producer events");
    assert!(everything.iter().all(|e| !e["type"].as_str().unwrap_or("").starts_with("hookline.")), "{everything:?}");
}
