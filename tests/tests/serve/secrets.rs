//! Secrets at rest on `hookline serve` (SQLite only: the key file, the
//! database files and their modes exist on this backend only; the AWS
//! suite checks the same through KMS and DynamoDB in `tests/tests/aws/keys.rs`).
//! Everything is read from the real files: the database and its `-wal`
//! bytes, the modes of the database, `-wal`, `-shm` and key files, and the
//! deliveries a restarted process signs.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use hookline_tests::pipeline::Pipeline;
use hookline_tests::{Behaviour, Delivery, Receiver, Server};
use serde_json::json;

fn with_suffix(db: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", db.display()))
}

/// The bytes of the database file and its write-ahead log as they are on
/// disk now (the log holds the latest writes until a checkpoint copies them).
fn stored_bytes(db: &Path) -> Vec<u8> {
    let mut all = std::fs::read(db).expect("read the database file");
    all.extend(std::fs::read(with_suffix(db, "-wal")).unwrap_or_default());
    all
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Posts an event and waits for its one delivery to `path`.
async fn deliver(s: &Server, r: &Receiver, path: &str, n: usize) -> Delivery {
    let (st, ev) = s.post("/v1/events", &json!({"type": "sealed.test", "data": {"n": n}})).await;
    assert_eq!(st, 202, "{ev}");
    s.settled_deliveries(ev["event_id"].as_str().unwrap(), 1, 15).await;
    let all = r.deliveries(path);
    assert_eq!(all.len(), n, "deliveries so far to {path}");
    all.last().unwrap().clone()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode() & 0o777
}

/// A subscription with an `Authorization` header, its secret rotated: the
/// database file and its log hold none of the three secrets in clear, all
/// files are 0600, and a restarted process (a second process on the same
/// database and key file) signs with the secrets it stored. The master key
/// rotates without a restart: the new key put first in the file, SIGHUP
/// re-wraps the data key while the process keeps delivering, after which
/// the old master key can go (the next start needs only the new one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_sealed_in_the_file_and_open_after_restarts_and_a_master_key_rotation() {
    let mut s = Server::start("sealed-at-rest");
    let r = Receiver::start().await;
    let token = format!("Bearer tok-{}", shared::ids::random_token("x"));
    let (id, first) = s
        .subscribe(json!({
            "callback_url": r.url("/sealed", Behaviour::Ok),
            "event_types": ["*"],
            "headers": {"Authorization": token},
        }))
        .await;
    let (st, v) = s.post(&format!("/v1/subscriptions/{id}/rotate-secret"), &json!({})).await;
    assert_eq!(st, 200, "{v}");
    let second = v["secret"].as_str().unwrap().to_string();
    let d = deliver(&s, &r, "/sealed", 1).await;
    assert!(d.signed_by(&first) && d.signed_by(&second), "both secrets sign during the overlap");
    assert_eq!(d.header("authorization"), token);

    let key_file = with_suffix(&s.db, ".key");
    for p in [s.db.clone(), with_suffix(&s.db, "-wal"), with_suffix(&s.db, "-shm"), key_file.clone()] {
        assert_eq!(mode(&p), 0o600, "{}", p.display());
    }
    let bytes = stored_bytes(&s.db);
    assert!(contains(&bytes, &id), "the subscription is in these bytes (the check looks where it should)");
    for secret in [first.as_str(), second.as_str(), token.as_str()] {
        let body = secret.trim_start_matches("whsec_").trim_start_matches("Bearer ");
        assert!(!contains(&bytes, body), "a secret is stored in clear");
    }
    assert!(!contains(&bytes, "whsec_"), "no signing secret in clear at all");

    // A second process on the same database and key file.
    s.restart(None);
    let d = deliver(&s, &r, "/sealed", 2).await;
    assert!(d.signed_by(&second) && d.signed_by(&first), "the restarted process opens both secrets");
    assert_eq!(d.header("authorization"), token);

    // Master-key rotation: the new key first, the old one after it, then
    // SIGHUP; the same process goes on delivering.
    let old_key = std::fs::read_to_string(&key_file).unwrap();
    let new_line = shared::data_key::MasterKeys::generate_line();
    std::fs::write(&key_file, format!("{new_line}\n{old_key}")).unwrap();
    s.signal("HUP");
    hookline_tests::eventually(20, "the data key re-wrapped on SIGHUP", || async {
        s.log().contains("SIGHUP: re-wrapped the data key under the current master key").then_some(())
    })
    .await;
    let d = deliver(&s, &r, "/sealed", 3).await;
    assert!(d.signed_by(&second), "sealed secrets open after the rotation, in the same process");
    s.signal("HUP");
    hookline_tests::eventually(20, "a second SIGHUP finds it done", || async {
        s.log().contains("SIGHUP: the data key was already wrapped by the current master key").then_some(())
    })
    .await;
    // Re-wrapped under the new key: the old one can leave the file.
    std::fs::write(&key_file, format!("{new_line}\n")).unwrap();
    s.restart(None);
    let d = deliver(&s, &r, "/sealed", 4).await;
    assert!(d.signed_by(&second), "only the new master key is needed now");
    assert_eq!(d.header("authorization"), token);
    let (st, v) = s.get(&format!("/v1/subscriptions/{id}")).await;
    assert_eq!(st, 200, "{v}");
    assert!(!v.to_string().contains("whsec_"), "the API shows no secret: {v}");
}

/// Without the master key that wrapped the data key (the key file lost, or
/// another database's), `hookline serve` refuses to start and says why,
/// showing no key; a key file others can read is refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_or_exposed_key_file_stops_the_start_with_a_clear_error() {
    let mut s = Server::start("sealed-wrong-key");
    s.terminate();
    let key_file = with_suffix(&s.db, ".key");
    let run = |key_file: &Path| {
        std::process::Command::new(hookline_tests::server::binary())
            .args(["serve", "--dev", "--listen", "127.0.0.1:0", "--db"])
            .arg(&s.db)
            .arg("--key-file")
            .arg(key_file)
            .env_remove("HOOKLINE_MASTER_KEY")
            .output()
            .expect("run hookline serve")
    };
    let other = with_suffix(&s.db, ".other-key");
    let wrong = shared::data_key::MasterKeys::generate_line();
    std::fs::write(&other, format!("{wrong}\n")).unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = run(&other);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started without its master key");
    assert!(err.contains("not among this process's master keys"), "{err}");
    assert!(!err.contains(&wrong), "the key is not shown");

    // The key file lost: a key made on this start is not the database's, so
    // the start fails and leaves no new key file behind.
    let lost = with_suffix(&s.db, ".lost-key");
    let out = run(&lost);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("restore the key file"), "{err}");
    assert!(!lost.exists(), "the key made for nothing is removed");

    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = run(&key_file);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("chmod 600"), "{err}");
}

/// A database from before sealing: a subscription row holding its secret
/// and header in clear is read as it is, and the start's re-seal pass
/// (pages in id order, once per database) seals it without changing what
/// it holds; a later pass does nothing.
#[tokio::test]
async fn rows_from_before_sealing_are_read_and_sealed_once() {
    let dir = hookline_tests::server::TempDir::new("sealed-old-rows");
    let db = dir.0.join("hookline.db");
    let master = shared::data_key::MasterKeys::generate();
    let backend = hookline_sqlite::Backend::open(&db, &master).await.unwrap();
    let store = backend.stores.subscriptions.clone();
    let sealed = hookline_tests::conformance::subscription("sub_a_new", 1);
    store.create(&sealed).await.unwrap();
    let mut clear = hookline_tests::conformance::subscription("sub_b_old", 1);
    clear.headers.insert("Authorization".into(), "Bearer old-clear-token".into());
    let raw = |id: &'static str| {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.query_row("SELECT data FROM subscriptions WHERE id = ?1", [id], |r| r.get::<_, String>(0)).unwrap()
    };
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute(
            "INSERT INTO subscriptions (id, version, data, tenant_id) VALUES (?1, 1, ?2, NULL)",
            rusqlite::params![clear.id.as_str(), serde_json::to_string(&clear).unwrap()],
        )
        .unwrap();
    }
    assert!(raw("sub_b_old").contains("old-clear-token"));
    assert_eq!(store.get(&clear.id).await.unwrap().as_ref(), Some(&clear), "a clear row opens");
    let sealed_now = hookline_sqlite::reseal_secrets(&backend.settings, store.as_ref()).await.unwrap();
    assert_eq!(sealed_now, 1, "only the old row");
    let data = raw("sub_b_old");
    assert!(!data.contains("old-clear-token") && !data.contains("whsec_"), "{data}");
    assert_eq!(store.get(&clear.id).await.unwrap().as_ref(), Some(&clear), "the same subscription");
    assert_eq!(store.get(&sealed.id).await.unwrap().as_ref(), Some(&sealed));
    assert_eq!(hookline_sqlite::reseal_secrets(&backend.settings, store.as_ref()).await.unwrap(), 0, "done once");
}
