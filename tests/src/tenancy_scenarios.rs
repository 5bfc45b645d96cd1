//! "A replay never crosses tenants": scenarios with two tenants, run on both
//! backends (`tests/tests/serve`, `tests/tests/aws`). A replay
//! that names a subscription delivers to it only what its routing would
//! have delivered (its tenant, its patterns: `shared::routing::check_scope`).
//! One event named with a subscription that would not take it is a `422
//! subscription_not_matching` that writes nothing; a partition, a time range
//! or a bulk replay passes such events over and counts them in the job's
//! `skipped_not_routed` (docs/operations.md#replay).

use std::time::Duration;

use serde_json::{json, Value};

use crate::pipeline::Pipeline;
use crate::scenarios::{finished_job, post_many};
use crate::{eventually, Behaviour, Receiver};

/// Posts one native envelope; returns its stored event id.
async fn post_event(
    p: &impl Pipeline,
    event_type: &str,
    tenant: Option<&str>,
    partition: Option<&str>,
    n: u64,
) -> String {
    let mut body = json!({"type": event_type, "data": {"n": n}});
    if let Some(t) = tenant {
        body["tenant_id"] = json!(t);
    }
    if let Some(k) = partition {
        body["partition_key"] = json!(k);
    }
    let (st, v) = p.post("/v1/events", &body).await;
    assert_eq!(st, 202, "{body}: {v}");
    v["event_id"].as_str().unwrap().to_string()
}

/// A verified subscription delivering to `path`, of `tenant` (or global),
/// to `patterns`.
async fn subscription(p: &impl Pipeline, r: &Receiver, path: &str, tenant: Option<&str>, patterns: &[&str]) -> String {
    let mut body = json!({"callback_url": r.url(path, Behaviour::Ok), "event_types": patterns});
    if let Some(t) = tenant {
        body["tenant_id"] = json!(t);
    }
    p.subscribe(body).await.0
}

/// The subscriptions an event's sagas deliver to, sorted, once `n` are
/// terminal.
async fn delivered_to(p: &impl Pipeline, event_id: &str, n: usize) -> Vec<String> {
    let d = p.settled_deliveries(event_id, n, 60).await;
    let mut subs: Vec<String> = d.iter().map(|s| s["subscription_id"].as_str().unwrap().to_string()).collect();
    subs.sort();
    subs
}

/// Starts a replay job with `body` (plus a reason) and follows it to its end.
async fn replay_job(p: &impl Pipeline, mut body: Value) -> Value {
    body["reason"] = json!("customer restored a backup");
    let (st, v) = p.post("/v1/replays", &body).await;
    assert_eq!(st, 202, "{body}: {v}");
    let job = finished_job(p, v["job_id"].as_str().unwrap(), 180).await;
    if job["state"] != "completed" {
        let logs = p.logs().await;
        let lines: Vec<&str> = logs.lines().filter(|l| l.contains("ERROR") || l.contains("WARN")).collect();
        panic!("the replay job did not complete: {job}\n{}", lines.join("\n"));
    }
    job
}

/// `(matched, done, failed, skipped_not_routed)` of a job.
fn counts(job: &Value) -> (Option<u64>, Option<u64>, Option<u64>, Option<u64>) {
    (job["matched"].as_u64(), job["done"].as_u64(), job["failed"].as_u64(), job["skipped_not_routed"].as_u64())
}

/// Waits until `path` has received `n` deliveries, then a little longer to
/// see what else arrives; returns them. Delivery is at least once (a job
/// may arrive twice on the AWS pipeline under load), and a replay carries
/// its event's `webhook-id` again, so here a copy cannot be told from a
/// replay: more than `n` passes only if every one beyond `n` repeats an id
/// already received, never an event more than `n` could hold. The exact
/// counts are the sagas' (`delivered_to`) and the jobs' (`counts`).
async fn received(r: &Receiver, path: &str, n: usize) -> Vec<crate::Delivery> {
    let what = format!("{n} deliveries to {path}");
    eventually(120, &what, || async { (r.deliveries(path).len() >= n).then_some(()) }).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let got = r.deliveries(path);
    let ids = r.webhook_ids(path);
    assert!(
        got.len() >= n && ids.len() <= n,
        "{path}: {} deliveries of {} events, where {n} were due: {:?}",
        got.len(),
        ids.len(),
        got.iter().map(|d| d.json()).collect::<Vec<_>>()
    );
    got
}

/// A single-event replay naming another tenant's subscription, or one none
/// of whose patterns matches the event, is `422 subscription_not_matching`
/// naming `subscription_id`, on `POST /v1/events/{id}/replay` and on `POST
/// /v1/replays` by event id alike, and writes nothing: no saga, no
/// delivery, no audit record, no job. The same replay to the event's own
/// tenant's subscription goes through.
pub async fn single_event_replay_to_another_tenants_subscription_is_refused(p: &impl Pipeline) {
    let r = Receiver::start().await;
    let acme = subscription(p, &r, "/acme", Some("acme"), &["ord.*"]).await;
    let globex = subscription(p, &r, "/globex", Some("globex"), &["ord.*"]).await;
    let theirs = post_event(p, "ord.created", Some("globex"), None, 1).await;
    let off_type = post_event(p, "inv.paid", Some("acme"), None, 2).await;
    assert_eq!(delivered_to(p, &theirs, 1).await, sorted([&globex]));

    let refused = [
        (format!("/v1/events/{theirs}/replay"), json!({"subscription_id": acme, "reason": "lost data"}), "globex"),
        (format!("/v1/events/{off_type}/replay"), json!({"subscription_id": acme, "reason": "lost data"}), "inv.paid"),
        (
            "/v1/replays".to_string(),
            json!({"event_id": theirs, "subscription_id": acme, "reason": "lost data"}),
            "globex",
        ),
        ("/v1/replays".to_string(), json!({"event_id": off_type, "subscription_id": acme, "reason": "x"}), "inv.paid"),
    ];
    for (path, body, named) in &refused {
        let (st, v) = p.post(path, body).await;
        assert_eq!(
            (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
            (422, Some("subscription_not_matching"), Some("subscription_id")),
            "{path} {body}: {v}"
        );
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(named) && message.contains(&acme), "the message names the mismatch: {message}");
    }
    // Nothing was written: no saga, no delivery, no audit record, no job.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(delivered_to(p, &theirs, 1).await, sorted([&globex]), "no replay saga");
    let (_, d) = p.get(&format!("/v1/events/{off_type}/deliveries")).await;
    assert_eq!(d["items"], json!([]), "no replay saga: {d}");
    assert!(r.deliveries("/acme").is_empty(), "acme received another tenant's event");
    let (_, audit) = p.get("/v1/audit?action=event.replayed&limit=1000").await;
    assert_eq!(audit["items"], json!([]), "{audit}");
    let (_, audit) = p.get("/v1/audit?action=replay.started&limit=1000").await;
    assert_eq!(audit["items"], json!([]), "no job was started: {audit}");

    // To the event's own tenant's subscription, the same replay goes through.
    let (st, v) =
        p.post(&format!("/v1/events/{theirs}/replay"), &json!({"subscription_id": globex, "reason": "x"})).await;
    assert_eq!(st, 202, "{v}");
    assert_eq!(delivered_to(p, &theirs, 2).await, sorted([&globex, &globex]));
    received(&r, "/globex", 2).await;
    // A replay naming no subscription goes to those that match it now: its
    // own tenant's, never acme's.
    let (st, v) = p.post(&format!("/v1/events/{theirs}/replay"), &json!({"reason": "x"})).await;
    assert_eq!((st, v["sagas"].as_array().map(Vec::len)), (202, Some(1)), "{v}");
    assert_eq!(v["sagas"][0]["subscription_id"], globex.as_str(), "{v}");
    received(&r, "/globex", 3).await;
    assert!(r.deliveries("/acme").is_empty());
}

/// A time-range replay naming tenant acme's subscription delivers it only
/// acme's events of its types: globex's events, tenant-less ones and acme's
/// of other types in the range are passed over and counted as
/// `skipped_not_routed`, and no other subscription gets anything.
pub async fn time_range_replay_to_a_tenants_subscription_delivers_only_its_events(p: &impl Pipeline) {
    let r = Receiver::start().await;
    let acme = subscription(p, &r, "/acme", Some("acme"), &["ord.*"]).await;
    let globex = subscription(p, &r, "/globex", Some("globex"), &["ord.*"]).await;
    let all = subscription(p, &r, "/all", None, &["*"]).await;
    let before = chrono::Utc::now();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mine = [
        post_event(p, "ord.created", Some("acme"), None, 1).await,
        post_event(p, "ord.shipped", Some("acme"), None, 2).await,
    ];
    let acme_other_type = post_event(p, "inv.paid", Some("acme"), None, 3).await;
    let theirs = [
        post_event(p, "ord.created", Some("globex"), None, 4).await,
        post_event(p, "ord.created", Some("globex"), None, 5).await,
    ];
    let no_tenant = post_event(p, "ord.created", None, None, 6).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let after = chrono::Utc::now();
    for id in &mine {
        assert_eq!(delivered_to(p, id, 2).await, sorted([&acme, &all]));
    }
    assert_eq!(delivered_to(p, &acme_other_type, 1).await, sorted([&all]));
    for id in &theirs {
        assert_eq!(delivered_to(p, id, 2).await, sorted([&globex, &all]));
    }
    assert_eq!(delivered_to(p, &no_tenant, 1).await, sorted([&all]));
    received(&r, "/acme", 2).await;

    let job =
        replay_job(p, json!({"since": before.to_rfc3339(), "until": after.to_rfc3339(), "subscription_id": acme}))
            .await;
    assert_eq!(counts(&job), (Some(6), Some(2), Some(0), Some(4)), "{job}");
    for id in &mine {
        assert_eq!(delivered_to(p, id, 3).await, sorted([&acme, &acme, &all]), "{id} replayed to acme");
    }
    let got = received(&r, "/acme", 4).await;
    for d in &got {
        let body = d.json();
        assert_eq!(body["tenant_id"], "acme", "acme received another tenant's event: {body}");
        assert!(body["type"].as_str().unwrap().starts_with("ord."), "a type acme does not take: {body}");
    }
    // The events passed over got no saga; the other subscriptions nothing.
    assert_eq!(delivered_to(p, &acme_other_type, 1).await, sorted([&all]));
    for id in &theirs {
        assert_eq!(delivered_to(p, id, 2).await, sorted([&globex, &all]));
    }
    assert_eq!(delivered_to(p, &no_tenant, 1).await, sorted([&all]));
    received(&r, "/globex", 2).await;
    received(&r, "/all", 6).await;
}

/// A partition replay naming tenant acme's subscription: globex's partition
/// of the same key gives acme nothing (every event skipped and counted);
/// acme's own partition gives it only its types.
pub async fn partition_replay_to_a_tenants_subscription_delivers_only_its_events(p: &impl Pipeline) {
    let r = Receiver::start().await;
    let acme = subscription(p, &r, "/acme", Some("acme"), &["ord.*"]).await;
    let globex = subscription(p, &r, "/globex", Some("globex"), &["*"]).await;
    let mine = [
        post_event(p, "ord.created", Some("acme"), Some("p1"), 1).await,
        post_event(p, "inv.paid", Some("acme"), Some("p1"), 2).await,
        post_event(p, "ord.shipped", Some("acme"), Some("p1"), 3).await,
    ];
    let theirs = [
        post_event(p, "ord.created", Some("globex"), Some("p1"), 4).await,
        post_event(p, "ord.shipped", Some("globex"), Some("p1"), 5).await,
    ];
    delivered_to(p, &mine[0], 1).await;
    delivered_to(p, &mine[2], 1).await;
    for id in &theirs {
        assert_eq!(delivered_to(p, id, 1).await, sorted([&globex]));
    }
    received(&r, "/acme", 2).await;

    // Globex's partition p1, to acme's subscription: nothing crosses.
    let job = replay_job(p, json!({"partition_key": "p1", "tenant_id": "globex", "subscription_id": acme})).await;
    assert_eq!(counts(&job), (Some(2), Some(0), Some(0), Some(2)), "{job}");
    for id in &theirs {
        assert_eq!(delivered_to(p, id, 1).await, sorted([&globex]), "no replay saga for {id}");
    }
    received(&r, "/acme", 2).await;

    // Acme's own partition p1: its two `ord.*` events, not the invoice.
    let job = replay_job(p, json!({"partition_key": "p1", "tenant_id": "acme", "subscription_id": acme})).await;
    assert_eq!(counts(&job), (Some(3), Some(2), Some(0), Some(1)), "{job}");
    let got = received(&r, "/acme", 4).await;
    let ns: Vec<u64> = got.iter().map(|d| d.json()["data"]["n"].as_u64().unwrap()).collect();
    let times = |n: u64| ns.iter().filter(|x| **x == n).count();
    assert!(
        ns.iter().all(|n| [1, 3].contains(n)) && times(1) >= 2 && times(3) >= 2,
        "acme's ord.* events of p1, each once more: {ns:?}"
    );
    let (_, d) = p.get(&format!("/v1/events/{}/deliveries", mine[1])).await;
    assert_eq!(d["items"], json!([]), "the invoice was routed nowhere and replayed nowhere: {d}");
    received(&r, "/globex", 2).await;
}

/// A bulk replay job over more than one page (the suite runs it with `BULK_PAGE_SIZE` 10) of two
/// tenants' events, naming acme's subscription: every acme event is
/// replayed to it, every globex one passed over and counted, page after
/// page; and a replay job naming no subscription replays each event to
/// its own tenant's subscription only.
pub async fn bulk_replay_job_to_a_tenants_subscription_delivers_only_its_events(p: &impl Pipeline) {
    let r = Receiver::start().await;
    let acme = subscription(p, &r, "/acme", Some("acme"), &["blk.*"]).await;
    subscription(p, &r, "/globex", Some("globex"), &["blk.*"]).await;
    let before = chrono::Utc::now();
    tokio::time::sleep(Duration::from_millis(20)).await;
    post_many(p, 10, "blk.x", Some("acme")).await;
    post_many(p, 18, "blk.x", Some("globex")).await;
    post_many(p, 5, "blk.x", Some("acme")).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let after = chrono::Utc::now();
    received(&r, "/acme", 15).await;
    received(&r, "/globex", 18).await;

    let range = json!({"since": before.to_rfc3339(), "until": after.to_rfc3339()});
    let mut named = range.clone();
    named["subscription_id"] = json!(acme);
    let job = replay_job(p, named).await;
    assert_eq!(counts(&job), (Some(33), Some(15), Some(0), Some(18)), "{job}");
    let got = received(&r, "/acme", 30).await;
    assert!(got.iter().all(|d| d.json()["tenant_id"] == "acme"), "acme received another tenant's event");
    received(&r, "/globex", 18).await;

    // Naming no subscription: each event to the subscriptions its routing
    // takes now, so each tenant gets its own events once more.
    let job = replay_job(p, range).await;
    assert_eq!(counts(&job), (Some(33), Some(33), Some(0), Some(0)), "{job}");
    let got = received(&r, "/acme", 45).await;
    assert!(got.iter().all(|d| d.json()["tenant_id"] == "acme"));
    let got = received(&r, "/globex", 36).await;
    assert!(got.iter().all(|d| d.json()["tenant_id"] == "globex"));
}

/// The ids given, sorted (as [`delivered_to`] answers).
fn sorted<const N: usize>(ids: [&String; N]) -> Vec<String> {
    let mut v: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// Every tenancy scenario, listed once: each backend's test binary runs
/// them all (`hookline_tests::tenancy_scenario_tests!(aws)`, `(serve)`).
#[macro_export]
macro_rules! tenancy_scenario_tests {
    ($backend:ident) => {
        $crate::scenario_tests!($backend, tenancy_scenarios;
            single_event_replay_to_another_tenants_subscription_is_refused,
            time_range_replay_to_a_tenants_subscription_delivers_only_its_events,
            partition_replay_to_a_tenants_subscription_delivers_only_its_events,
            // 33 events in pages of 10: four pages, as 130 made two of 100.
            bulk_replay_job_to_a_tenants_subscription_delivers_only_its_events;
                $crate::pipeline::Settings::default().bulk_page_size(10),
        );
    };
}
