//! Bounded storage of `hookline serve`: rows past their retention are
//! purged in the background, checked in the real SQLite file (opened
//! read-only beside the running process), while new events are still
//! delivered. Events with an open dead letter are kept until it is resolved;
//! resolved dead letters go after their own, longer, retention.

use std::time::Duration;

use hookline_tests::pipeline::Pipeline;
use hookline_tests::{eventually, Behaviour, Receiver, Server};
use rusqlite::{Connection, OpenFlags};
use serde_json::json;

/// One count from the live database file, read-only.
fn count(s: &Server, sql: &str) -> i64 {
    let c = Connection::open_with_flags(&s.db, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open the database read-only");
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    c.query_row(sql, [], |r| r.get(0)).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn purged(metrics: &str, table: &str) -> u64 {
    let key = format!("hookline_purged_total{{table=\"{table}\"}} ");
    metrics.lines().find_map(|l| l.strip_prefix(&key)).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// Events, their sagas, attempts and outbox rows are deleted once past
/// `--retention`; a fresh event is accepted and delivered afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_past_retention_are_purged_with_their_sagas_and_attempts() {
    let s = Server::start_with(
        "retention-purge",
        &["--retention", "2s", "--purge-interval", "300ms", "--purge-batch", "7"],
    );
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/a", Behaviour::Ok), "event_types": ["*"]})).await;
    s.subscribe(json!({"callback_url": r.url("/b", Behaviour::Ok), "event_types": ["*"]})).await;
    for i in 0..40 {
        let (status, _) = s.post("/v1/events", &json!({"id": format!("old-{i}"), "type": "t", "data": {"i": i}})).await;
        assert_eq!(status, 202);
    }
    eventually(20, "80 deliveries", || async {
        (r.deliveries("/a").len() + r.deliveries("/b").len() >= 80).then_some(())
    })
    .await;
    assert!(count(&s, "SELECT COUNT(*) FROM events WHERE id LIKE 'old-%'") > 0, "purged before the retention");

    eventually(20, "old events, sagas and attempts purged", || async {
        let left = count(&s, "SELECT COUNT(*) FROM events WHERE id LIKE 'old-%'")
            + count(&s, "SELECT COUNT(*) FROM sagas WHERE event_id LIKE 'old-%'")
            + count(&s, "SELECT COUNT(*) FROM attempts")
            + count(&s, "SELECT (SELECT COUNT(*) FROM outbox_events) + (SELECT COUNT(*) FROM outbox_sagas) + (SELECT COUNT(*) FROM outbox_attempts)");
        (left == 0).then_some(())
    })
    .await;
    let m = s.metrics().await;
    assert_eq!(purged(&m, "events"), 40, "{m}");
    assert_eq!(purged(&m, "sagas"), 80, "{m}");
    assert_eq!(purged(&m, "attempts"), 80, "{m}");
    let (status, _) = s.get("/v1/events/old-1").await;
    assert_eq!(status, 404);

    // Business as usual afterwards.
    let (status, _) = s.post("/v1/events", &json!({"id": "fresh", "type": "t", "data": {}})).await;
    assert_eq!(status, 202);
    eventually(10, "fresh event delivered", || async {
        r.deliveries("/a").iter().any(|d| d.json()["id"] == "fresh").then_some(())
    })
    .await;
    assert_eq!(
        count(&s, "SELECT COUNT(*) FROM events WHERE id = 'fresh'"),
        1,
        "the fresh event is kept until its own retention"
    );
}

/// An expired event whose saga has an open dead letter is kept (a requeue
/// needs it) until the dead letter is resolved; resolved dead letters and
/// dead-letter-queue messages go after `--dead-letter-retention`; open dead
/// letters are never purged. Bad durations are refused naming the flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_dead_letters_keep_their_event_and_resolved_ones_go_after_their_own_retention() {
    let s = Server::start_with(
        "retention-dl",
        &["--retention", "2s", "--dead-letter-retention", "6s", "--purge-interval", "300ms"],
    );
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/ok", Behaviour::Ok), "event_types": ["*"]})).await;
    s.subscribe(json!({
        "callback_url": r.url("/fail", Behaviour::Always(500)),
        "event_types": ["*"],
        "retry_policy": {"max_attempts": 1, "base_delay_ms": 1000, "max_delay_ms": 1000},
    }))
    .await;
    for id in ["dl-skipped", "dl-open"] {
        assert_eq!(s.post("/v1/events", &json!({"id": id, "type": "t", "data": {}})).await.0, 202);
    }
    let dls = eventually(20, "two open dead letters", || async {
        let (_, v) = s.get("/v1/dead-letters?state=open").await;
        let d = v["items"].as_array().cloned().unwrap_or_default();
        (d.len() == 2).then_some(d)
    })
    .await;
    let id_of = |event: &str| dls.iter().find(|d| d["event_id"] == event).unwrap()["id"].as_str().unwrap().to_string();
    let (skipped, open) = (id_of("dl-skipped"), id_of("dl-open"));
    let (status, _) = s.post(&format!("/v1/dead-letters/{skipped}/skip"), &json!({"reason": "customer left"})).await;
    assert_eq!(status, 200);

    // Past the event retention: the skipped one's event goes, the open one's stays.
    eventually(15, "the event of the skipped dead letter purged", || async {
        (count(&s, "SELECT COUNT(*) FROM events WHERE id = 'dl-skipped'") == 0).then_some(())
    })
    .await;
    assert_eq!(count(&s, "SELECT COUNT(*) FROM sagas WHERE event_id = 'dl-skipped'"), 0);
    assert_eq!(count(&s, "SELECT COUNT(*) FROM events WHERE id = 'dl-open'"), 1, "an open dead letter keeps its event");
    assert_eq!(count(&s, "SELECT COUNT(*) FROM sagas WHERE event_id = 'dl-open'"), 2);
    assert_eq!(count(&s, "SELECT COUNT(*) FROM dead_letters"), 2, "dead letters outlive their events");

    // Past the dead-letter retention: the skipped dead letter and the dead
    // jobs go; the open dead letter stays, and so does its event.
    eventually(20, "the skipped dead letter and the dead jobs purged", || async {
        let left = count(&s, &format!("SELECT COUNT(*) FROM dead_letters WHERE id = '{skipped}'"))
            + count(&s, "SELECT COUNT(*) FROM queue_messages WHERE queue = 'deliveries-dlq'");
        (left == 0).then_some(())
    })
    .await;
    assert_eq!(count(&s, &format!("SELECT COUNT(*) FROM dead_letters WHERE id = '{open}' AND state = 'open'")), 1);
    assert_eq!(count(&s, "SELECT COUNT(*) FROM events WHERE id = 'dl-open'"), 1);
    let (status, _) = s.get(&format!("/v1/dead-letters/{open}")).await;
    assert_eq!(status, 200);

    // Once resolved, its event goes at the next pass.
    let (status, _) = s.post(&format!("/v1/dead-letters/{open}/skip"), &json!({"reason": "done"})).await;
    assert_eq!(status, 200);
    eventually(15, "the event of the now skipped dead letter purged", || async {
        (count(&s, "SELECT COUNT(*) FROM events WHERE id = 'dl-open'") == 0).then_some(())
    })
    .await;
    let m = s.metrics().await;
    assert!(purged(&m, "dead_letters") >= 1 && purged(&m, "other") >= 2, "{m}");
}

/// `--retention` takes a duration with a unit; a bad one is refused at
/// start-up with an error naming the flag. `--retention-days` still works.
#[test]
fn bad_retention_values_are_refused_naming_the_flag() {
    let dir = hookline_tests::server::TempDir::new("retention-flags");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(hookline_tests::server::binary())
            .args(["serve", "--listen", "127.0.0.1:0", "--db"])
            .arg(dir.0.join("x.db"))
            .args(args)
            .env("HOOKLINE_API_KEY", "k")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    for (args, flag, hint) in [
        (&["--retention", "30"][..], "--retention", "30d"),
        (&["--retention", "5w"][..], "--retention", "unknown unit"),
        (&["--retention", "0s"][..], "--retention", "more than zero"),
        (&["--dead-letter-retention", "x"][..], "--dead-letter-retention", "whole number"),
        (&["--retention", "10d", "--dead-letter-retention", "1d"][..], "--dead-letter-retention", "at least RETENTION"),
        (&["--header-timeout", "10"][..], "--header-timeout", "10d"),
        (&["--retention-days", "0"][..], "--retention-days", "from 1 to"),
        (&["--retention", "1d", "--retention-days", "1"][..], "--retention-days", "cannot be used with"),
    ] {
        let (ok, err) = run(args);
        assert!(!ok, "{args:?} accepted");
        assert!(err.contains(flag) && err.contains(hint), "{args:?}: {err}");
    }
    // Every bad setting at once, each by its flag and variable.
    let (ok, err) = run(&["--retention", "30", "--delivery-timeout-ms", "soon", "--stall-margin", "soon"]);
    assert!(!ok);
    for named in [
        "--retention (RETENTION)",
        "--delivery-timeout-ms (DELIVERY_TIMEOUT_MS)",
        "--stall-margin (RECONCILE_STALL_MARGIN)",
    ] {
        assert!(err.contains(named), "{named} missing from: {err}");
    }
}
