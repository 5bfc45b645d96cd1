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
        assert_eq!(d[0]["status"], "completed");
        assert_eq!(d[0]["attempts"].as_array().unwrap().len(), 1, "each attempt recorded once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
/// The generated key is stored hashed under the data key, so it survives a
/// restart only where the data key does (the persistent keyring of issue
/// 24's sealing part; with `Keyring::ephemeral()` it cannot).
async fn api_key_is_required_survives_restart_and_sigterm_stops_cleanly() {
    let mut s = Server::start_generating_its_key("restart");
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
    let dir = hookline_tests::server::TempDir::new("keys-file");
    let file = dir.0.join("keys.json");
    std::fs::write(&file, r#"[{"name": "ops", "role": "admin", "secret": "sekret-ops"}]"#).unwrap();
    set_mode(&file, 0o600);
    let mut trusted = Server::start_with("keys", &["--api-keys-file", file.to_str().unwrap(), "--trust-actor-header"]);
    trusted.key = "sekret-ops".into();
    let body = json!({"callback_url": r.url("/k", Behaviour::Ok), "event_types": ["k"]}).to_string();
    let (st, sub) = trusted
        .call_with_headers("POST", "/v1/subscriptions", Some(body.as_bytes()), &[("X-Actor", "alice@example.com")])
        .await;
    assert_eq!(st, 201, "{sub}");
    let id = sub["id"].as_str().unwrap();
    let (st, _) = trusted.call("DELETE", &format!("/v1/subscriptions/{id}"), None).await;
    assert_eq!(st, 204);
    let (_, v) = trusted.get(&format!("/v1/audit?subscription_id={id}&action=subscription.created")).await;
    assert_eq!(v["items"][0]["actor"], "key:ops as `alice@example.com`", "shown quoted (Caller::actor): {v}");
    let (_, v) = trusted.get(&format!("/v1/audit?subscription_id={id}&action=subscription.deleted")).await;
    assert_eq!(v["items"][0]["actor"], "key:ops", "{v}");
    let (st, _) = trusted.call_with_key("GET", "/v1/audit", None, Some("not-a-key")).await;
    assert_eq!(st, 401);

    let untrusted = Server::start_generating_its_key("keys-untrusted");
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

fn set_mode(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// What `hookline serve` prints to stderr and its exit status, run with
/// `args` and `env` (a start that must fail before listening).
fn refused_start(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let dir = hookline_tests::server::TempDir::new("refused");
    let out = std::process::Command::new(hookline_tests::server::binary())
        .arg("serve")
        .arg("--db")
        .arg(dir.0.join("hookline.db"))
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env_remove("HOOKLINE_API_KEY")
        .envs(env.iter().copied())
        .output()
        .expect("run hookline serve");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Keys never on the command line (the process list shows it to every
/// user), nor as `name=secret` pairs; a keys file others may read, a secret
/// under two names, a secret with a control character: each refused at
/// start with why.
#[test]
fn keys_on_the_command_line_or_ambiguous_are_refused_at_start() {
    let (ok, err) = refused_start(&["--api-key", "s3cret"], &[]);
    assert!(!ok && err.contains("process list") && err.contains("HOOKLINE_API_KEY"), "{err}");
    assert!(!err.contains("s3cret"), "the secret is not repeated: {err}");
    let (ok, err) = refused_start(&[], &[("HOOKLINE_API_KEYS", "a=b")]);
    assert!(!ok && err.contains("--api-keys-file"), "{err}");
    let dir = hookline_tests::server::TempDir::new("keys-files");
    let file = |name: &str, text: &str, mode: u32| {
        let p = dir.0.join(name);
        std::fs::write(&p, text).unwrap();
        set_mode(&p, mode);
        p.to_str().unwrap().to_string()
    };
    let open = file("open.json", r#"[{"name": "a", "role": "admin", "secret": "s1"}]"#, 0o644);
    let (ok, err) = refused_start(&["--api-keys-file", &open], &[]);
    assert!(!ok && err.contains("chmod 600"), "{err}");
    let twice = file("twice.json", r#"[{"name": "a", "role": "admin", "secret": "s1"}]"#, 0o600);
    let (ok, err) = refused_start(&["--api-keys-file", &twice], &[("HOOKLINE_API_KEY", "s1")]);
    assert!(!ok && err.contains("same secret"), "{err}");
    let (ok, err) = refused_start(&[], &[("HOOKLINE_API_KEY", "tabbed\tsecret")]);
    assert!(!ok && err.contains("HOOKLINE_API_KEY") && !err.contains("tabbed"), "{err}");
    let (ok, err) = refused_start(&["--admin-principals", "arn:aws:iam::1:user/a"], &[]);
    assert!(!ok && err.contains("AWS"), "{err}");
}

/// A base64 secret ending in `==` is one key, taken whole: `Bearer =` (what
/// splitting at the first `=` made of it) is refused, the key itself works;
/// a key file's secrets too (spaces inside included), with their role and
/// tenant.
#[tokio::test]
async fn a_secret_with_equals_signs_is_taken_whole() {
    let dir = hookline_tests::server::TempDir::new("keys-eq");
    let file = dir.0.join("keys.json");
    std::fs::write(
        &file,
        r#"[{"name": "acme-reader", "role": "reader", "tenant_id": "acme", "secret": "a,b=c=="},
            {"name": "spaced", "role": "reader", "secret": "correct horse battery staple"}]"#,
    )
    .unwrap();
    set_mode(&file, 0o600);
    let s = Server::start_with_env(
        "keys-eq",
        &["--api-keys-file", file.to_str().unwrap()],
        &[("HOOKLINE_API_KEY", "c2VjcmV0LWtleQ==")],
    );
    assert_eq!(s.key, "c2VjcmV0LWtleQ==");
    assert!(!hookline_tests::server::Server::admin_key_path(&s.db).exists(), "no key generated beside given ones");
    let (st, _) = s.call_with_key("GET", "/v1/subscriptions", None, Some("=")).await;
    assert_eq!(st, 401);
    let (st, _) = s.call_with_key("GET", "/v1/subscriptions", None, Some("c2VjcmV0LWtleQ")).await;
    assert_eq!(st, 401);
    let (st, v) = s.get("/v1/subscriptions").await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = s.call_with_key("GET", "/v1/keys", None, Some("a,b=c==")).await;
    assert_eq!(st, 403, "a reader from the file manages no keys: {v}");
    let (st, v) = s.call_with_key("GET", "/v1/subscriptions", None, Some("correct horse battery staple")).await;
    assert_eq!(st, 200, "a secret with spaces inside is one key: {v}");
    let (st, _) = s.call_with_key("GET", "/v1/subscriptions", None, Some("correct")).await;
    assert_eq!(st, 401, "not its first word");
}

/// The generated admin key: written once to `<db>.admin-key` (0600, not
/// the master key file `<db>.key`), shown on the first start only, stored
/// hashed (its secret is nowhere in the database files), and it manages
/// keys.
#[tokio::test]
async fn the_generated_admin_key_is_stored_hashed_and_written_to_a_private_file() {
    use std::os::unix::fs::PermissionsExt;
    let s = Server::start_generating_its_key("admin-key");
    let path = hookline_tests::server::Server::admin_key_path(&s.db);
    assert!(s.key.starts_with("hlk_") && s.key.len() == 47, "{}", s.key);
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let made = json!({"name": "ci", "role": "producer", "tenant_id": "acme"}).to_string();
    let (st, v) = s.call("POST", "/v1/keys", Some(made.as_bytes())).await;
    assert_eq!(st, 201, "{v}");
    let secret = v["secret"].as_str().unwrap().to_string();
    let log = std::fs::read_to_string(s.dir().join("serve.log")).unwrap_or_default();
    assert!(!log.contains(&s.key) && !log.contains(&secret), "no secret in the log");
    let mut db = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        let mut f = s.db.as_os_str().to_owned();
        f.push(suffix);
        db.extend(std::fs::read(&f).unwrap_or_default());
    }
    let has = |needle: &str| db.windows(needle.len()).any(|w| w == needle.as_bytes());
    assert!(!has(&s.key) && !has(&secret), "no secret in the database files");
    assert!(has("\"name\":\"ci\""), "the key itself is there");
}

/// Rotation (a secret key's; AWS grants have none): the new secret is shown
/// once; the old one keeps working for the overlap, and an overlap of 0
/// ends it at once; a revoked key cannot be rotated back to life.
#[tokio::test]
async fn a_rotated_key_keeps_its_old_secret_for_the_overlap() {
    let s = Server::start("rotate-key");
    let cred = s.credential(shared::access::Role::Reader, None).await;
    let old = cred.secret.clone().unwrap();
    let (st, v) = s.call("POST", &format!("/v1/keys/{}/rotate", cred.id), Some(br#"{"overlap_seconds": 60}"#)).await;
    assert_eq!(st, 200, "{v}");
    let new = v["secret"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    assert!(v["previous_secret_until"].is_string(), "{v}");
    for key in [&old, &new] {
        let (st, _) = s.call_with_key("GET", "/v1/subscriptions", None, Some(key)).await;
        assert_eq!(st, 200, "both work during the overlap");
    }
    let (st, v) = s.call("POST", &format!("/v1/keys/{}/rotate", cred.id), Some(br#"{"overlap_seconds": 0}"#)).await;
    assert_eq!(st, 200, "{v}");
    let newest = v["secret"].as_str().unwrap().to_string();
    for (key, want) in [(&old, 401), (&new, 401), (&newest, 200)] {
        let (st, _) = s.call_with_key("GET", "/v1/subscriptions", None, Some(key)).await;
        assert_eq!(st, want);
    }
    let (st, v) = s.call("POST", &format!("/v1/keys/{}/rotate", cred.id), Some(br#"{"overlap_seconds": -1}"#)).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("overlap_seconds")), "{v}");
    let (st, v) = s.call("POST", &format!("/v1/keys/{}/rotate", cred.id), Some(br#"{"overlap": 0}"#)).await;
    assert_eq!((st, v["error"]["code"].as_str()), (400, Some("unknown_field")), "{v}");
    let (st, _) = s.call("DELETE", &format!("/v1/keys/{}", cred.id), None).await;
    assert_eq!(st, 200);
    let (st, v) = s.call("POST", &format!("/v1/keys/{}/rotate", cred.id), None).await;
    assert_eq!(st, 409, "{v}");
    let (st, _) = s.call_with_key("GET", "/v1/subscriptions", None, Some(&newest)).await;
    assert_eq!(st, 401);
}
