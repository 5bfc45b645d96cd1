//! The `hookline` ops commands (`hookline_tests::cli_ops`) against
//! `hookline serve` with its API key: the case list both backends run
//! (`hookline_tests::cli_ops_scenario_tests!`), and the commands' own
//! behaviour that needs one backend only, so is tested on serve (terminals
//! and colours, missing credentials, SigV4 signing and where its keys come
//! from, against stand-ins; the reindex commands' paging).

use hookline_tests::cli_ops::*;

hookline_tests::cli_ops_scenario_tests!(serve);
use hookline_tests::pipeline::Pipeline;
use hookline_tests::server::binary;
use hookline_tests::{scenarios, Behaviour, Receiver, Server};
use serde_json::{json, Value};

/// On a terminal the default is a table, coloured unless `NO_COLOR` is set;
/// `--output json` stays plain JSON there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_and_colours_on_a_terminal_only() {
    let s = Server::start("cli-tty");
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/a", Behaviour::Ok), "event_types": ["*"]})).await;
    let owned = env_of(&s);
    let env = borrow(&owned);
    let shown = on_a_terminal(&["subscriptions", "list"], &env);
    assert!(shown.starts_with("\x1b[1mID "), "a bold header: {shown:?}");
    assert!(shown.contains("\x1b[32mclosed\x1b[0m"), "a coloured state: {shown:?}");
    let mut no_colour = env.clone();
    no_colour.push(("NO_COLOR", "1"));
    let shown = on_a_terminal(&["subscriptions", "list"], &no_colour);
    assert!(shown.starts_with("ID ") && !shown.contains('\x1b'), "{shown:?}");
    // Rows are cut to the terminal's width.
    no_colour.push(("COLUMNS", "70"));
    let shown = on_a_terminal(&["subscriptions", "list"], &no_colour);
    assert!(shown.lines().all(|l| l.chars().count() <= 70) && shown.contains('…'), "{shown}");
    let shown = on_a_terminal(&["subscriptions", "list", "--output", "json"], &env);
    assert!(!shown.contains('\x1b'), "{shown:?}");
    assert_eq!(
        serde_json::from_str::<Value>(shown.trim()).unwrap()["callback_url"],
        r.url("/a", Behaviour::Ok).as_str()
    );
}

/// Without credentials the commands say so, before any request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_commands_without_credentials_say_so() {
    let s = Server::start("cli-no-key");
    let run = hookline(&["events", "show", "cli-1"], &[("HOOKLINE_URL", s.base.as_str())]);
    assert_eq!(run.code, 1);
    assert!(run.err.contains("no credentials"), "{}", run.err);
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
    // `delete` reads no answer: the stub receiver does not answer a subscription.
    hookline(&["subscriptions", "delete", "probe"], &env).ok();
    let req = r.requests("/v1/subscriptions/probe").pop().expect("the request arrived");
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
            .args(["subscriptions", "delete", "probe"])
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
    let req = r.requests("/v1/subscriptions/probe").pop().expect("the request arrived");
    assert!(req.header("authorization").starts_with("AWS4-HMAC-SHA256 Credential=AKIDPROCESS/"));
    assert_eq!(req.header("x-amz-security-token"), "tok");

    // No keys, no process, and no AWS CLI on the PATH.
    let empty = dir.join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let out = run("nobody", empty.to_str().unwrap());
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no AWS credentials for profile nobody"), "{err}");
    assert!(err.contains(config.to_str().unwrap()) && err.contains("aws configure export-credentials"), "{err}");
    assert_eq!(r.requests("/v1/subscriptions/probe").len(), 1, "nothing unsigned was sent");
}

/// A command of several requests (`events list --all`, three pages) runs
/// the profile's `credential_process` once and signs every request with its
/// keys, until they are within a minute of their `Expiration`: then each
/// request runs it again. The query goes out in SigV4's encoding (a space as
/// `%20`, a plus as `%2B`), the one the requests were signed over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_commands_run_the_credential_process_once_while_its_keys_last() {
    let dir = std::env::temp_dir().join(format!("hookline-cli-process-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let now = chrono::Utc::now();
    for (name, expiration, expected_runs) in
        [("lasting", now + chrono::Duration::hours(1), 1), ("expiring", now + chrono::Duration::seconds(30), 3)]
    {
        let (url, seen) = paging_api().await;
        let runs = dir.join(format!("{name}-runs"));
        let script = dir.join(format!("{name}.sh"));
        std::fs::write(
            &script,
            format!(
                "echo run >> '{}'\nprintf '%s' '{{\"Version\": 1, \"AccessKeyId\": \"AKIDPROCESS\", \"SecretAccessKey\": \"s\", \"SessionToken\": \"tok\", \"Expiration\": \"{}\"}}'\n",
                runs.display(),
                expiration.to_rfc3339()
            ),
        )
        .unwrap();
        let config = dir.join(format!("{name}-config"));
        std::fs::write(&config, format!("[default]\ncredential_process = sh '{}'\n", script.display())).unwrap();
        let out = std::process::Command::new(binary())
            .args(["events", "list", "--all", "--tenant", "acme corp+eu", "--event-type", "order.*"])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &dir)
            .env("HOOKLINE_URL", &url)
            .env("HOOKLINE_AWS_REGION", "eu-west-1")
            .env("AWS_CONFIG_FILE", &config)
            .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-credentials"))
            .output()
            .expect("run hookline");
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 3, "{name}: an event per page");
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 3, "{name}: {seen:?}");
        for (query, auth) in &seen {
            assert!(auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDPROCESS/"), "{name}: {auth}");
            assert!(query.contains("tenant_id=acme%20corp%2Beu") && !query.contains('+'), "{name}: {query}");
        }
        let ran = std::fs::read_to_string(&runs).unwrap_or_default().lines().count();
        assert_eq!(ran, expected_runs, "{name}: credential_process runs for three requests");
    }
}

/// `hookline subscriptions reindex` follows `next_cursor` to the end and
/// prints the totals. On `hookline serve` the schema migration indexed
/// every subscription, so it finds nothing to do; if index rows went
/// missing (deleted here with serve stopped), it writes them back and the
/// subscriptions are routed to again. A cursor it did not issue: the
/// API's `422`, and where to resume.
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
    let owned = env_of(&s);
    let env = borrow(&owned);
    let run = hookline(&["subscriptions", "reindex", "--limit", "1"], &env);
    assert_eq!(run.ok().json(), json!({"reindexed": 0, "examined": 3, "requests": 3}), "{}", run.err);
    assert_eq!(run.err.lines().filter(|l| l.starts_with("page ")).count(), 3, "a progress line per page: {}", run.err);

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

    let run = hookline(&["subscriptions", "reindex", "-o", "table"], &env);
    let out = &run.ok().out;
    assert!(out.lines().any(|l| l.starts_with("reindexed ") && l.ends_with(" 2")), "{out}");
    s.post("/v1/events", &json!({"id": "cli-ri-2", "type": "ri.x", "data": {}})).await;
    s.settled_deliveries("cli-ri-2", 3, 20).await;
    assert_eq!((r.deliveries("/lost-a").len(), r.deliveries("/lost-b").len()), (1, 1));

    let run = hookline(&["subscriptions", "reindex", "--cursor", "not-issued"], &env);
    assert_eq!(run.code, 2);
    assert!(
        run.err.contains("400") && run.err.contains("cursor") && run.err.contains("--cursor=not-issued"),
        "{}",
        run.err
    );
    let run = hookline(&["subscriptions", "reindex", "--limit", "101"], &env);
    assert!(run.code == 2 && run.err.contains("101"), "{}", run.err);
}

/// `hookline dead-letters reindex` follows `next_cursor` to the end and
/// prints the totals. On `hookline serve` the schema migration filled the
/// listing columns of every dead letter, so it finds nothing to do; if
/// they went missing (cleared here with serve stopped, as a row the
/// migration could not fill), the filters miss those dead letters until
/// it writes the columns back from each record. A cursor it did not issue:
/// the API's `422`, and where to resume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_reindex_follows_the_cursor_and_prints_totals() {
    let mut s = Server::start("cli-dl-reindex");
    let r = Receiver::start().await;
    let sub = scenarios::failing_subscription(&s, &r, "/dead", &["dri.*"]).await;
    scenarios::post_many(&s, 2, "dri.x", Some("acme")).await;
    scenarios::wait_dead_letters(&s, &format!("subscription_id={sub}"), 2, 60).await;
    let by_sub = format!("/v1/dead-letters?subscription_id={sub}");
    let owned = env_of(&s);
    let env = borrow(&owned);
    let run = hookline(&["dead-letters", "reindex", "--limit", "1"], &env);
    assert_eq!(run.ok().json(), json!({"reindexed": 0, "examined": 2, "requests": 2}), "{}", run.err);
    assert_eq!(run.err.lines().filter(|l| l.starts_with("page ")).count(), 2, "a progress line per page: {}", run.err);

    s.terminate();
    {
        let db = rusqlite::Connection::open(&s.db).unwrap();
        db.execute("UPDATE dead_letters SET subscription_id = NULL, event_type = NULL, tenant_id = NULL", []).unwrap();
    }
    s.restart(None);
    for query in [by_sub.clone(), "/v1/dead-letters?event_type=dri.x".into(), "/v1/dead-letters?tenant_id=acme".into()]
    {
        assert_eq!(api_count(&s, &query).await, 0, "{query}: missed without their columns");
    }
    let run = hookline(&["dead-letters", "reindex", "-o", "table"], &env);
    let out = &run.ok().out;
    assert!(out.lines().any(|l| l.starts_with("reindexed ") && l.ends_with(" 2")), "{out}");
    for query in [by_sub.clone(), "/v1/dead-letters?event_type=dri.x".into(), "/v1/dead-letters?tenant_id=acme".into()]
    {
        assert_eq!(api_count(&s, &query).await, 2, "{query}: found after the reindex");
    }
    let run = hookline(&["dead-letters", "reindex"], &env);
    assert_eq!(run.ok().json()["reindexed"], 0, "a second run reindexes 0");

    let run = hookline(&["dead-letters", "reindex", "--cursor", "not-issued"], &env);
    assert_eq!(run.code, 2);
    assert!(
        run.err.contains("400")
            && run.err.contains("cursor")
            && run.err.contains("hookline dead-letters reindex --cursor=not-issued"),
        "{}",
        run.err
    );
}
