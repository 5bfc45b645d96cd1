//! The `hookline` ops commands against a running Hookline: inspect, dead
//! letters, requeue and replay over the API with the key, and SigV4 signing
//! (the deployed HTTP API's IAM authorization) with `--aws-region`.

use hookline_tests::pipeline::Pipeline;
use hookline_tests::server::binary;
use hookline_tests::{Behaviour, Receiver, Server};
use serde_json::{json, Value};

fn hookline(args: &[&str], env: &[(&str, &str)]) -> (bool, Value, String) {
    let out = std::process::Command::new(binary())
        .args(args)
        .env_remove("HOOKLINE_API_KEY")
        .env_remove("HOOKLINE_AWS_REGION")
        .envs(env.iter().copied())
        .output()
        .expect("run hookline");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    (
        out.status.success(),
        serde_json::from_str(&stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_commands_inspect_requeue_skip_and_replay() {
    let s = Server::start("cli");
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/c", Behaviour::Always(500)), "event_types": ["*"],
                       "retry_policy": {"max_attempts": 1, "base_delay_ms": 50, "max_delay_ms": 100}}))
        .await;
    s.post("/v1/events", &json!({"id": "cli-1", "type": "t", "data": {}})).await;
    let d = s.settled_deliveries("cli-1", 1, 20).await;
    let dead = d[0]["saga_id"].as_str().unwrap().to_string();
    let env = [("HOOKLINE_URL", s.base.as_str()), ("HOOKLINE_API_KEY", s.key.as_str())];

    let (ok, v, err) = hookline(&["inspect", "cli-1"], &env);
    assert!(ok, "{err}");
    assert_eq!(v["event"]["id"], "cli-1");
    assert_eq!(v["deliveries"][0]["status"], "DeadLettered");

    let listed = hookline_tests::eventually(10, "the dead letter listed", || async {
        let (ok, v, _) = hookline(&["dead-letters", "list"], &env);
        (ok && v["items"].as_array().is_some_and(|a| !a.is_empty())).then_some(v)
    })
    .await;
    assert_eq!(listed["items"][0]["id"], dead.as_str());

    r.set("/c", Behaviour::Ok);
    let (ok, v, err) = hookline(&["dead-letters", "requeue", &dead, "--reason", "fixed"], &env);
    assert!(ok, "{err}");
    let d = s.settled_deliveries("cli-1", 2, 20).await;
    let new = d.iter().find(|x| x["saga_id"] == v["saga_id"]).expect("the requeued saga");
    assert_eq!(new["status"], "Completed");
    // The caller's API key, not what the CLI claims in the body.
    assert!(new["origin"]["actor"].as_str().unwrap().starts_with("key:"), "{new}");

    let (ok, _, err) = hookline(&["replay", "cli-1", "--reason", "lost"], &env);
    assert!(ok, "{err}");
    s.settled_deliveries("cli-1", 3, 20).await;

    let (ok, _, err) = hookline(&["dead-letters", "skip", &dead, "--reason", "late"], &env);
    assert!(!ok, "a requeued dead letter cannot be skipped");
    assert!(err.contains("409"), "{err}");

    let (ok, _, err) = hookline(&["dead-letters", "list"], &[("HOOKLINE_URL", s.base.as_str())]);
    assert!(!ok);
    assert!(err.contains("no credentials"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_commands_sign_with_sigv4_for_a_deployment() {
    let r = Receiver::start().await;
    let url = r.url("", Behaviour::Ok);
    let env = [
        ("HOOKLINE_URL", url.as_str()),
        ("HOOKLINE_AWS_REGION", "eu-west-1"),
        ("AWS_ACCESS_KEY_ID", "AKIDTEST"),
        ("AWS_SECRET_ACCESS_KEY", "secret"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ];
    let (ok, _, err) = hookline(&["dead-letters", "list"], &env);
    assert!(ok, "{err}");
    let req = r.requests("/v1/dead-letters").pop().expect("the request arrived");
    let auth = req.header("authorization");
    assert!(auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDTEST/"), "{auth}");
    assert!(auth.contains("/eu-west-1/execute-api/aws4_request"), "{auth}");
    assert!(!req.header("x-amz-date").is_empty());
}

/// Without keys in the environment, the signing keys come from the profile's
/// `credential_process` (the way SSO and role tooling hands them over), and
/// with nothing anywhere the error names every place that was looked at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_commands_find_credentials_in_the_profile_and_say_where_they_looked() {
    let r = Receiver::start().await;
    let url = r.url("", Behaviour::Ok);
    let dir = std::env::temp_dir().join(format!("hookline-cli-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config");
    std::fs::write(
        &config,
        "[profile ops]\ncredential_process = printf '{\"Version\": 1, \"AccessKeyId\": \"AKIDPROCESS\", \"SecretAccessKey\": \"s\", \"SessionToken\": \"tok\"}'\n",
    )
    .unwrap();
    let run = |profile: &str, path: &str| {
        std::process::Command::new(binary())
            .args(["dead-letters", "list"])
            .env_clear()
            .env("PATH", path)
            .env("HOME", &dir)
            .env("HOOKLINE_URL", &url)
            .env("HOOKLINE_AWS_REGION", "eu-west-1")
            .env("AWS_CONFIG_FILE", &config)
            .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("credentials"))
            .env("AWS_PROFILE", profile)
            .output()
            .expect("run hookline")
    };
    let system_path = std::env::var("PATH").unwrap_or_default();
    let out = run("ops", &system_path);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let req = r.requests("/v1/dead-letters").pop().expect("the request arrived");
    assert!(req.header("authorization").starts_with("AWS4-HMAC-SHA256 Credential=AKIDPROCESS/"));
    assert_eq!(req.header("x-amz-security-token"), "tok");

    // No keys, no process, and no AWS CLI on the PATH.
    let empty = dir.join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let out = run("nobody", empty.to_str().unwrap());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no AWS credentials for profile nobody"), "{err}");
    assert!(err.contains(config.to_str().unwrap()) && err.contains("aws configure export-credentials"), "{err}");
    assert_eq!(r.requests("/v1/dead-letters").len(), 1, "nothing unsigned was sent");
}

/// `hookline subscriptions reindex` follows `next_cursor` to the end and
/// prints the totals. On `hookline serve` the schema migration indexed
/// every subscription, so it finds nothing to do; if index rows went
/// missing (deleted here with serve stopped), it writes them back and the
/// subscriptions are routed to again. A cursor it did not issue: the
/// API's `400`, and where to resume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_reindex_follows_the_cursor_and_prints_totals() {
    let mut s = Server::start("cli-reindex");
    let r = Receiver::start().await;
    let (control, _) =
        s.subscribe(json!({"callback_url": r.url("/now", Behaviour::Ok), "event_types": ["ri.*"]})).await;
    let mut lost = Vec::new();
    for path in ["/lost-a", "/lost-b"] {
        lost.push(s.subscribe(json!({"callback_url": r.url(path, Behaviour::Ok), "event_types": ["ri.*"]})).await.0);
    }
    let env = [("HOOKLINE_URL", s.base.clone()), ("HOOKLINE_API_KEY", s.key.clone())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (ok, v, err) = hookline(&["subscriptions", "reindex", "--limit", "1"], &env);
    assert!(ok, "{err}");
    assert_eq!(v, json!({"reindexed": 0, "examined": 3, "requests": 3}), "{err}");
    assert_eq!(err.lines().filter(|l| l.starts_with("page ")).count(), 3, "a progress line per page: {err}");

    s.terminate();
    {
        let db = rusqlite::Connection::open(&s.db).unwrap();
        for id in &lost {
            db.execute("DELETE FROM subscription_routes WHERE subscription_id = ?1", [id]).unwrap();
        }
    }
    s.restart(None);
    s.post("/v1/events", &json!({"id": "cli-ri-1", "type": "ri.x", "data": {}})).await;
    let d = s.settled_deliveries("cli-ri-1", 1, 20).await;
    assert_eq!(d[0]["subscription_id"], control.as_str(), "without index rows the others are not routed to");

    let (ok, v, err) = hookline(&["subscriptions", "reindex"], &env);
    assert!(ok, "{err}");
    assert_eq!(v, json!({"reindexed": 2, "examined": 3, "requests": 1}), "{err}");
    s.post("/v1/events", &json!({"id": "cli-ri-2", "type": "ri.x", "data": {}})).await;
    s.settled_deliveries("cli-ri-2", 3, 20).await;
    assert_eq!((r.deliveries("/lost-a").len(), r.deliveries("/lost-b").len()), (1, 1));

    let (ok, _, err) = hookline(&["subscriptions", "reindex", "--cursor", "not-issued"], &env);
    assert!(!ok);
    assert!(err.contains("400") && err.contains("cursor") && err.contains("--cursor not-issued"), "{err}");
    let (ok, _, err) = hookline(&["subscriptions", "reindex", "--limit", "101"], &env);
    assert!(!ok && err.contains("101"), "{err}");
}
