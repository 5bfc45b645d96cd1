//! Backup and restore of `hookline serve`'s data (SQLite only: on AWS the
//! tables are DynamoDB's, backed up by point-in-time recovery). The real
//! binary on real files: `hookline backup` from a second process while
//! serve runs and accepts events, `kill -9` of serve, `hookline restore`
//! in its place, and a new serve process on the restored file with the
//! same key file delivering what was pending.

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use hookline_tests::cli_ops::{hookline, Run};
use hookline_tests::pipeline::{Pipeline, Settings};
use hookline_tests::{Behaviour, Receiver, Server};
use serde_json::json;

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temp path")
}

/// `hookline` run off the test's runtime (it blocks until the process exits).
async fn run(args: Vec<String>) -> Run {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        hookline(&args, &[])
    })
    .await
    .unwrap()
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// The names in a directory, sorted.
fn names(d: &Path) -> Vec<String> {
    let mut n: Vec<String> =
        std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    n.sort();
    n
}

/// Posts one event with this id; its status.
async fn post(s: &Server, id: &str) -> u16 {
    s.post("/v1/events", &json!({"id": id, "type": "bk.test", "data": {"id": id}})).await.0
}

/// Events accepted before a backup are delivered by a new process started
/// on the restored copy, each at least once (at most twice: what was in
/// flight when the copy was taken is redone) and signed with the
/// subscription's secret (so the sealed secret opened with the same key file); events
/// accepted after the backup are not in it; the copy holds no secret in
/// clear; and the commands refuse bad input, writing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_of_a_running_serve_restores_into_a_new_process_that_delivers_what_was_pending() {
    // A short breaker cool-down: after the failures below, the restored
    // process's first success closes it at once.
    let mut s = Server::start_with_settings("backup", &Settings::default().breaker(1000, 100, 200));
    let r = Receiver::start().await;
    let (sub, secret) = s
        .subscribe(json!({
            "callback_url": r.url("/bk", Behaviour::Ok),
            "event_types": ["bk.*"],
            "retry_policy": {"max_attempts": 50, "base_delay_ms": 200, "max_delay_ms": 1000},
        }))
        .await;
    // From now on the receiver fails every delivery: they stay pending.
    r.set("/bk", Behaviour::Always(503));
    let mut must_have: Vec<String> = Vec::new();
    for i in 0..20 {
        let id = format!("bk-before-{i}");
        assert_eq!(post(&s, &id).await, 202);
        must_have.push(id);
    }
    hookline_tests::eventually(30, "a failed attempt of every event", || async {
        let tried: HashSet<String> =
            r.deliveries("/bk").iter().filter_map(|d| d.json()["id"].as_str().map(String::from)).collect();
        must_have.iter().all(|id| tried.contains(id)).then_some(())
    })
    .await;

    // A producer goes on posting while the backup is taken.
    let stop = Arc::new(AtomicBool::new(false));
    let producer = tokio::spawn({
        let (base, key, stop) = (s.base.clone(), s.key.clone(), stop.clone());
        async move {
            let c = reqwest::Client::new();
            let mut answered = Vec::new();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let id = format!("bk-during-{n}");
                n += 1;
                let res = c
                    .post(format!("{base}/v1/events"))
                    .bearer_auth(&key)
                    .json(&json!({"id": id, "type": "bk.test", "data": {"id": id}}))
                    .send()
                    .await;
                answered.push((id, res.map(|r| r.status().as_u16()).unwrap_or(0), Instant::now()));
            }
            answered
        }
    });
    hookline_tests::eventually(10, "the producer posting", || async {
        (s.get("/v1/events/bk-during-2").await.0 == 200).then_some(())
    })
    .await;
    let dir = s.dir().to_path_buf();
    let db = s.db.clone();
    let out = dir.join("backup.db");
    let started = Instant::now();
    let made = run(args(&["backup", "--db", path(&db), "--out", path(&out)])).await;
    let ended = Instant::now();
    made.ok();
    stop.store(true, Ordering::Relaxed);
    let answered = producer.await.unwrap();
    assert!(answered.iter().all(|(_, st, _)| *st == 202), "serve accepted every event during the backup");
    must_have.extend(answered.iter().filter(|(_, _, at)| *at < started).map(|(id, _, _)| id.clone()));
    let mut not_in_copy: Vec<String> =
        answered.iter().filter(|(_, _, at)| *at > ended).map(|(id, _, _)| id.clone()).collect();

    let report = made.json();
    assert!(report["events"].as_u64().unwrap() >= must_have.len() as u64, "{report}");
    // The first 20 are mid-retry in the copy (later ones may not be routed yet).
    assert!(report["deliveries_pending"].as_u64().unwrap() >= 20, "{report}");
    assert_eq!((report["integrity"].as_str(), report["data_key"].as_str()), (Some("ok"), Some("wrapped")));
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(report["bytes"].as_u64(), Some(bytes.len() as u64));
    assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(contains(&bytes, &sub) && contains(&bytes, "bk-before-0"), "the copy holds the data");
    assert!(!contains(&bytes, secret.trim_start_matches("whsec_")), "the signing secret is in clear in the copy");
    assert!(!contains(&bytes, "whsec_"), "no signing secret in clear at all");

    // Bad input is refused with a clear error, and nothing is written.
    let files = names(&dir);
    let again = run(args(&["backup", "--db", path(&db), "--out", path(&out)])).await;
    assert_eq!(again.code, 4, "{}", again.err);
    assert!(again.err.contains("backup.db already exists"), "{}", again.err);
    assert_eq!(std::fs::read(&out).unwrap(), bytes, "the existing backup is untouched");
    let missing = dir.join("missing.db");
    let none = run(args(&["backup", "--db", path(&missing), "--out", path(&dir.join("other.db"))])).await;
    assert_eq!(none.code, 3, "{}", none.err);
    assert!(none.err.contains("missing.db does not exist"), "{}", none.err);
    let in_use = run(args(&["restore", "--from", path(&out), "--db", path(&db), "--replace"])).await;
    assert_eq!(in_use.code, 4, "{}", in_use.err);
    assert!(in_use.err.contains("is in use by process"), "{}", in_use.err);
    let unchanged: Vec<String> = names(&dir).into_iter().filter(|n| n != "serve.log").collect();
    let before: Vec<String> = files.into_iter().filter(|n| n != "serve.log").collect();
    assert_eq!(unchanged, before, "no file written, moved or removed");
    // The live process never noticed: it accepts events still. These are
    // after the backup, so not in it.
    for i in 0..3 {
        let id = format!("bk-after-{i}");
        assert_eq!(post(&s, &id).await, 202);
        not_in_copy.push(id);
    }

    // The machine dies; the backup is restored in its place.
    s.kill9();
    let restored = run(args(&["restore", "--from", path(&out), "--db", path(&db), "--replace"])).await;
    restored.ok();
    let v = restored.json();
    let aside = PathBuf::from(v["replaced"].as_str().expect("the old database was kept"));
    assert!(aside.exists(), "{v}");
    assert_eq!(v["events"], report["events"], "{v}");
    assert_eq!(std::fs::read(&out).unwrap(), bytes, "the backup is only read");

    // A new process on the restored file, with the same key file.
    s.restart(None);
    r.set("/bk", Behaviour::Ok);
    for id in &must_have {
        let d = s.settled_deliveries(id, 1, 60).await;
        assert_eq!(d[0]["status"], "completed", "{id}: {d:?}");
    }
    // The copy is the database as one commit left it, so the restored
    // process redoes what was in flight then, as after a `kill -9` at that
    // moment: a job queued while its retry timer's removal had not been
    // committed yet, or sent but not yet recorded, goes out once more
    // (under the same `webhook-id`, so the subscriber can tell), never more.
    let delivered = r.successes("/bk");
    for id in &must_have {
        let got: Vec<_> = delivered.iter().filter(|d| d.json()["id"] == id.as_str()).collect();
        assert!(!got.is_empty() && got.len() <= 2, "{id} delivered {} times", got.len());
        for d in &got {
            assert!(d.signed_by(&secret), "{id} signed with the subscription's secret");
            assert_eq!(d.header("webhook-id"), got[0].header("webhook-id"), "{id}: one webhook-id");
        }
    }
    for id in &not_in_copy {
        let (st, v) = s.get(&format!("/v1/events/{id}")).await;
        assert_eq!(st, 404, "{id} was accepted after the backup, so it is not in it: {v}");
    }
}
