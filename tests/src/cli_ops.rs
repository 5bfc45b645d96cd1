//! Helpers and checks of the `hookline` ops commands against a running
//! Hookline, on both backends (the tests: `tests/tests/serve/cli_ops.rs`,
//! `tests/tests/aws/cli_ops.rs`): `hookline serve` with its API key, and the AWS pipeline in the
//! emulator behind a stand-in for API Gateway, signed with SigV4
//! (`--aws-region`) as against a deployment. Each command's JSON (one
//! document, or JSON lines for lists) and table output, the paging flags,
//! the exit codes (2 invalid input, 3 not found, 4 conflict), colours only
//! on a terminal; and where the signing keys come from.

mod keys;

use std::sync::Arc;

use crate::aws_pipeline::AwsPipeline;
use crate::pipeline::Pipeline;
use crate::server::binary;
use crate::{Behaviour, Receiver, Server};
use hookline_api::{Api, Verification};
pub use keys::{ops_keys, ops_portal_link};
use serde_json::{json, Value};
use shared::context::Hookline;

/// One run of the binary.
pub struct Run {
    /// The exit code.
    pub code: i32,
    /// Stdout.
    pub out: String,
    /// Stderr.
    pub err: String,
}

impl Run {
    /// Stdout as one JSON document.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.out).unwrap_or_else(|e| panic!("not one JSON document ({e}): {}", self.out))
    }

    /// Stdout as JSON lines.
    pub fn lines(&self) -> Vec<Value> {
        self.out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
            .collect()
    }

    /// The cursor of the next-page command printed on stderr.
    pub fn next_cursor(&self) -> Option<String> {
        let line = self.err.lines().find(|l| l.ends_with("(or --all for every page)"))?;
        let rest = line.split(" --cursor=").nth(1)?;
        Some(rest.split_whitespace().next()?.trim_matches('\'').to_string())
    }

    /// The next-page command printed on stderr, as arguments (without
    /// `hookline`); its words hold no spaces here, so quotes are just removed.
    pub fn next_command(&self) -> Option<Vec<String>> {
        let line = self.err.lines().find(|l| l.ends_with("(or --all for every page)"))?;
        let command = line.split_once(": hookline ")?.1.split("  (or --all").next()?;
        Some(command.split(' ').map(|w| w.trim_matches('\'').to_string()).collect())
    }

    /// Asserts the run exited 0.
    pub fn ok(&self) -> &Self {
        assert_eq!(self.code, 0, "stderr: {}\nstdout: {}", self.err, self.out);
        self
    }
}

/// Runs `hookline` with `env` only (none of the caller's HOOKLINE_*
/// settings), stdout and stderr piped: not a terminal.
pub fn hookline(args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = std::process::Command::new(binary())
        .args(args)
        .env_remove("HOOKLINE_API_KEY")
        .env_remove("HOOKLINE_AWS_REGION")
        .env_remove("HOOKLINE_OUTPUT")
        .env_remove("HOOKLINE_ACTOR")
        .env_remove("NO_COLOR")
        .envs(env.iter().copied())
        .output()
        .expect("run hookline");
    Run {
        code: out.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&out.stdout).to_string(),
        err: String::from_utf8_lossy(&out.stderr).to_string(),
    }
}

/// Runs `hookline` with stdout on a terminal (a pseudo-terminal from
/// util-linux `script`), returning what the terminal showed.
pub fn on_a_terminal(args: &[&str], env: &[(&str, &str)]) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let line: Vec<String> = std::iter::once(binary().display().to_string())
        .chain(args.iter().map(|a| a.to_string()))
        .map(|a| quote(&a))
        .collect();
    let out = std::process::Command::new("script")
        .args(["-qec", &line.join(" "), "/dev/null"])
        .env_remove("HOOKLINE_OUTPUT")
        .env_remove("NO_COLOR")
        .env("COLUMNS", "200")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("util-linux `script` runs the command on a pseudo-terminal");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n")
}

/// The environment that points the CLI at `s` (its URL and API key).
pub fn env_of(s: &Server) -> Vec<(&'static str, String)> {
    vec![("HOOKLINE_URL", s.base.clone()), ("HOOKLINE_API_KEY", s.key.clone())]
}

/// The access key the CLI signs with against the AWS pipeline, and the IAM
/// principal the gateway stand-in says it belongs to.
pub const ACCESS_KEY: &str = "AKIDOPS";

pub const PRINCIPAL: &str = "arn:aws:iam::123456789012:user/ops";

/// A stand-in for API Gateway in front of the AWS pipeline's API function:
/// it refuses requests that are not SigV4-signed (`403`, as IAM
/// authorization does), turns the others into the API Gateway events the
/// function receives, with the caller's IAM principal, and answers with the
/// function's response. Returns its base URL.
pub async fn gateway(hookline: Arc<Hookline>, trust_actor_header: bool) -> String {
    use axum::body::Bytes;
    use axum::http::{HeaderMap, Method, StatusCode, Uri};
    use axum::response::IntoResponse;
    let api = Api::behind_gateway(hookline, Verification::Inline).trusting_actor_header(trust_actor_header);
    let app = axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
        let api = api.clone();
        async move {
            let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("");
            let signed_by = auth.strip_prefix("AWS4-HMAC-SHA256 Credential=").and_then(|c| c.split('/').next());
            if signed_by != Some(ACCESS_KEY) {
                return (StatusCode::FORBIDDEN, axum::Json(json!({"message": "Forbidden"}))).into_response();
            }
            let header_map: serde_json::Map<String, Value> =
                headers.iter().map(|(k, v)| (k.as_str().to_string(), json!(v.to_str().unwrap_or("")))).collect();
            let req = json!({
                "version": "2.0",
                "routeKey": "$default",
                "rawPath": uri.path(),
                "rawQueryString": uri.query().unwrap_or(""),
                "headers": header_map,
                "requestContext": {
                    "http": {"method": method.as_str(), "path": uri.path(), "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "hookline"},
                    "authorizer": {"iam": {"accessKey": ACCESS_KEY, "accountId": "123456789012", "userArn": PRINCIPAL}},
                    "accountId": "123456789012", "apiId": "api", "stage": "$default", "requestId": "r",
                    "domainName": "localhost", "time": "", "timeEpoch": 0
                },
                "body": (!body.is_empty()).then(|| String::from_utf8_lossy(&body).into_owned()),
                "isBase64Encoded": false,
            });
            let res = hookline_aws::lambda::http(&api, serde_json::from_value(req).expect("an API Gateway v2 request")).await;
            let text = match res.body {
                Some(hookline_aws::lambda::events::encodings::Body::Text(t)) => t,
                _ => String::new(),
            };
            let status = StatusCode::from_u16(res.status_code as u16).expect("a status");
            (status, [("content-type", "application/json")], text).into_response()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the gateway");
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

pub fn borrow<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// Waits until `hookline <args>` (JSON lines) lists `n` items, and returns them.
pub async fn listed(args: &[&str], env: &[(&str, &str)], n: usize) -> Vec<Value> {
    crate::eventually(20, &format!("{n} items from {args:?}"), || async {
        let run = hookline(args, env);
        (run.code == 0 && run.lines().len() == n).then(|| run.lines())
    })
    .await
}

/// Every subscription command, in JSON and as a table; paging; exit codes.
pub async fn subscriptions_commands(env: &[(&str, &str)]) {
    let r = Receiver::start().await;
    let env = env.to_vec();

    // create: one JSON document with the secret, shown this once.
    let mut ids = Vec::new();
    for path in ["/a", "/b", "/c"] {
        let url = r.url(path, Behaviour::Ok);
        let run = hookline(
            &[
                "subscriptions",
                "create",
                "--callback-url",
                &url,
                "--event-type",
                "cli.*",
                "--event-type",
                "other",
                "--tenant",
                "acme",
                "--header",
                "X-Team=ops",
                "--json",
                r#"{"retry_policy": {"max_attempts": 2}}"#,
            ],
            &env,
        );
        let v = run.ok().json();
        assert_eq!(v["callback_url"], url.as_str());
        assert_eq!(v["event_types"], json!(["cli.*", "other"]));
        assert_eq!((v["tenant_id"].as_str(), v["headers"]["X-Team"].as_str()), (Some("acme"), Some("ops")));
        assert_eq!(v["retry_policy"]["max_attempts"], 2);
        assert!(v["secret"].as_str().is_some_and(|s| !s.is_empty()), "{v}");
        ids.push(v["id"].as_str().unwrap().to_string());
    }
    ids.sort();
    let table = hookline(
        &["subscriptions", "create", "--callback-url", &r.url("/t", Behaviour::Ok), "--event-type", "t", "-o", "table"],
        &env,
    );
    table.ok();
    assert!(table.out.starts_with("FIELD "), "{}", table.out);
    assert!(table.out.lines().any(|l| l.starts_with("secret ")), "{}", table.out);
    assert!(!table.out.contains('\x1b'), "no colours off a terminal: {}", table.out);
    let t_id = table.out.lines().find_map(|l| l.strip_prefix("id ")).unwrap().trim().to_string();

    // list: JSON lines, one subscription per line; filters; empty is not an error.
    let run = hookline(&["subscriptions", "list", "--tenant", "acme"], &env);
    let listed: Vec<String> = run.ok().lines().iter().map(|v| v["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(listed, ids);
    assert!(run.err.is_empty(), "nothing more to say: {}", run.err);
    let run = hookline(&["subscriptions", "list", "--tenant", "nobody"], &env);
    assert_eq!((run.ok().out.as_str(), run.lines().len()), ("", 0));
    let run = hookline(&["subscriptions", "list", "--tenant", "nobody", "-o", "table"], &env);
    assert!(run.ok().err.contains("no subscriptions found"), "{}", run.err);

    // --limit: one page and, on stderr, the command for the next.
    let first = hookline(&["subscriptions", "list", "--tenant", "acme", "--limit", "2"], &env);
    assert_eq!(first.ok().lines().len(), 2);
    let cursor = first.next_cursor().unwrap_or_else(|| panic!("a next-page hint: {}", first.err));
    assert!(first.err.contains("hookline subscriptions list --tenant acme --limit 2 --cursor="), "{}", first.err);
    let second =
        hookline(&["subscriptions", "list", "--tenant", "acme", "--limit", "2", &format!("--cursor={cursor}")], &env);
    let mut walked: Vec<String> =
        first.lines().iter().chain(second.ok().lines().iter()).map(|v| v["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(second.lines().len(), 1);
    assert_eq!(second.next_cursor(), None, "the last page: {}", second.err);
    walked.sort();
    assert_eq!(walked, ids, "each exactly once");
    // --all: every page, one request after another, no hint.
    let all = hookline(&["subscriptions", "list", "--tenant", "acme", "--limit", "1", "--all"], &env);
    let all_ids: Vec<String> = all.ok().lines().iter().map(|v| v["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(all_ids, ids);
    assert!(all.err.is_empty(), "{}", all.err);

    // A table: a header, one row per subscription, states in their columns.
    let run = hookline(&["subscriptions", "list", "--tenant", "acme", "-o", "table"], &env);
    let rows: Vec<&str> = run.ok().out.lines().collect();
    assert!(
        rows[0].starts_with("ID ") && rows[0].contains("CALLBACK URL") && rows[0].contains("BREAKER"),
        "{}",
        run.out
    );
    assert_eq!(rows.len(), 4, "{}", run.out);
    for (row, id) in rows[1..].iter().zip(&ids) {
        assert!(row.starts_with(id.as_str()) && row.contains("acme") && row.contains("closed"), "{row}");
    }

    // show, update, verify, rotate-secret, delete.
    let shown = hookline(&["subscriptions", "show", &ids[0]], &env).ok().json();
    assert_eq!((shown["id"].as_str(), shown["health"]["breaker"].as_str()), (Some(ids[0].as_str()), Some("closed")));
    assert!(shown.get("secret").is_none(), "the secret is not shown again");
    let run = hookline(&["subscriptions", "show", &ids[0], "-o", "table"], &env);
    assert!(run.ok().out.lines().any(|l| l.starts_with("health.breaker") && l.ends_with("closed")), "{}", run.out);
    let v = hookline(
        &["subscriptions", "update", &ids[0], "--description", "ops channel", "--disable", "--clear", "headers"],
        &env,
    )
    .ok()
    .json();
    assert_eq!(
        (v["description"].as_str(), v["active"].as_bool(), v["headers"].clone()),
        (Some("ops channel"), Some(false), json!({}))
    );
    let v = hookline(&["subscriptions", "update", &ids[0], "--enable"], &env).ok().json();
    assert_eq!(v["active"], true);
    let v = hookline(&["subscriptions", "verify", &ids[0]], &env).ok().json();
    assert_eq!((v["id"].as_str(), v["verified"].as_bool()), (Some(ids[0].as_str()), Some(true)));
    // A token confirms only a queue or bus waiting for one: 422 naming it.
    let run = hookline(&["subscriptions", "verify", &ids[0], "--token", "vtk_none"], &env);
    assert_eq!(run.code, 2, "{}", run.err);
    assert!(run.err.contains("422") && run.err.contains("(field: token)"), "{}", run.err);
    let v = hookline(&["subscriptions", "rotate-secret", &ids[0], "--overlap-seconds", "60"], &env).ok().json();
    assert!(v["secret"].as_str().is_some_and(|s| !s.is_empty()), "{v}");
    let run = hookline(&["subscriptions", "delete", &t_id], &env);
    assert_eq!(run.ok().json(), json!({"id": t_id, "deleted": true}));
    let run = hookline(&["subscriptions", "delete", &ids[2], "-o", "table"], &env);
    assert_eq!(run.ok().out, format!("deleted subscription {}\n", ids[2]));

    // Exit codes: 3 not found, 2 invalid input (the API's 400 naming the
    // field, a cursor it did not issue, or a usage error).
    for args in [vec!["subscriptions", "show", t_id.as_str()], vec!["subscriptions", "update", "sub_nope", "--disable"]]
    {
        let run = hookline(&args, &env);
        assert_eq!(run.code, 3, "{args:?}: {}", run.err);
        assert!(run.err.contains("404") && run.out.is_empty(), "{}", run.err);
    }
    let run = hookline(&["subscriptions", "create", "--callback-url", "not a url", "--event-type", "x"], &env);
    assert_eq!(run.code, 2, "{}", run.err);
    assert!(run.err.contains("422") && run.err.contains("(field: callback_url)"), "{}", run.err);
    // No callback: only with --pull true (pull-only, verified at once).
    let run = hookline(&["subscriptions", "create", "--event-type", "x"], &env);
    assert!(run.code == 2 && run.err.contains("(field: callback_url)"), "{}", run.err);
    let pulled = hookline(&["subscriptions", "create", "--pull", "true", "--event-type", "x"], &env).ok().json();
    assert_eq!((pulled["destination"].as_str(), pulled["verified"].as_bool()), (Some("pull"), Some(true)), "{pulled}");
    assert!(pulled["callback_url"].is_null(), "{pulled}");
    let run = hookline(&["subscriptions", "list", "--event-type", "x", "-o", "table"], &env);
    let row = run.ok().out.lines().find(|l| l.starts_with(pulled["id"].as_str().unwrap())).map(str::to_string);
    assert!(row.is_some_and(|r| r.contains("(pull only)")), "the list's callback column: {}", run.out);
    let run = hookline(
        &[
            "subscriptions",
            "create",
            "--callback-url",
            &r.url("/x", Behaviour::Ok),
            "--event-type",
            "x",
            "--json",
            "[1]",
        ],
        &env,
    );
    assert_eq!(run.code, 2, "{}", run.err);
    // Bodies are the wire types: a field the API does not take, or a value
    // of the wrong type, is refused before anything is sent.
    for json in [r#"{"colour": "red"}"#, r#"{"payload_format": "xml"}"#, r#"{"max_in_flight": "ten"}"#] {
        let url = r.url("/typed", Behaviour::Ok);
        let run = hookline(
            &[
                "subscriptions",
                "create",
                "--callback-url",
                &url,
                "--event-type",
                "x",
                "--tenant",
                "acme",
                "--json",
                json,
            ],
            &env,
        );
        assert_eq!(run.code, 2, "{json}: {}", run.err);
        assert!(run.err.contains("not what the API takes"), "{json}: {}", run.err);
    }
    let run = hookline(&["subscriptions", "list", "--tenant", "acme"], &env);
    assert_eq!(run.ok().lines().len(), 2, "nothing was created: {}", run.out);
    let run = hookline(&["subscriptions", "list", "--cursor", "not-issued"], &env);
    assert_eq!(run.code, 2, "{}", run.err);
    assert!(run.err.contains("cursor"), "{}", run.err);
    for bad in [
        vec!["subscriptions", "list", "--limit", "0"],
        vec!["subscriptions", "list", "--limit", "1001"],
        vec!["subscriptions", "frobnicate"],
    ] {
        assert_eq!(hookline(&bad, &env).code, 2, "{bad:?}");
    }
}

/// `events show`, `dead-letters show|requeue|skip` by id and `replay` of one
/// event, in JSON and as tables, with their exit codes.
pub async fn events_dead_letters_and_replay_commands(s: &impl Pipeline, env: &[(&str, &str)]) {
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/c", Behaviour::Always(500)), "event_types": ["*"],
                       "retry_policy": {"max_attempts": 1, "base_delay_ms": 50, "max_delay_ms": 100}}))
        .await;
    s.post("/v1/events", &json!({"id": "cli-1", "type": "t", "data": {}})).await;
    let d = s.settled_deliveries("cli-1", 1, 20).await;
    let dead = d[0]["saga_id"].as_str().unwrap().to_string();
    let env = env.to_vec();

    // events show (and the older inspect): one document, or the event's
    // fields and a table of its deliveries.
    for cmd in [vec!["events", "show", "cli-1"], vec!["inspect", "cli-1"]] {
        let v = hookline(&cmd, &env).ok().json();
        assert_eq!(v["event"]["id"], "cli-1");
        assert_eq!(v["deliveries"][0]["status"], "dead_lettered");
    }
    let run = hookline(&["events", "show", "cli-1", "-o", "table"], &env);
    let out = &run.ok().out;
    assert!(out.starts_with("FIELD ") && out.lines().any(|l| l.starts_with("type ") && l.ends_with(" t")), "{out}");
    let header = out.lines().find(|l| l.starts_with("SAGA ")).unwrap_or_else(|| panic!("a deliveries table: {out}"));
    assert!(header.contains("STATUS") && header.contains("LAST ERROR"), "{header}");
    assert!(out.lines().any(|l| l.starts_with(dead.as_str()) && l.contains("dead_lettered")), "{out}");
    let run = hookline(&["events", "show", "nope"], &env);
    assert_eq!(run.code, 3, "{}", run.err);

    // dead-letters show.
    let v = hookline(&["dead-letters", "show", &dead], &env).ok().json();
    assert_eq!((v["id"].as_str(), v["state"].as_str()), (Some(dead.as_str()), Some("open")));
    let run = hookline(&["dead-letters", "show", &dead, "-o", "table"], &env);
    assert!(run.ok().out.lines().any(|l| l.starts_with("state ") && l.ends_with("open")), "{}", run.out);
    assert!(!run.out.lines().any(|l| l.starts_with("event.")), "the event snapshot stays out of the table");
    assert_eq!(hookline(&["dead-letters", "show", "sag_nope"], &env).code, 3);

    // A reason is required; a requeue with neither id nor filter is a usage error.
    assert_eq!(hookline(&["dead-letters", "requeue", &dead], &env).code, 2);
    let run = hookline(&["dead-letters", "requeue", "--reason", "x"], &env);
    assert_eq!(run.code, 2);
    assert!(run.err.contains("--all-open"), "{}", run.err);
    assert_eq!(hookline(&["replay", "cli-1"], &env).code, 2);

    r.set("/c", Behaviour::Ok);
    let v = hookline(&["dead-letters", "requeue", &dead, "--reason", "fixed"], &env).ok().json();
    let d = s.settled_deliveries("cli-1", 2, 20).await;
    let new = d.iter().find(|x| x["saga_id"] == v["saga_id"]).expect("the requeued saga");
    assert_eq!(new["status"], "completed");
    assert_eq!(new["origin"]["reason"], "fixed");
    assert_eq!(hookline(&["dead-letters", "requeue", "sag_nope", "--reason", "x"], &env).code, 3);
    // The caller's credential (API key, IAM principal), not what a client claims.
    let actor = new["origin"]["actor"].as_str().unwrap();
    assert!(actor == "key:default" || actor == PRINCIPAL, "{new}");

    // replay of one event: at once, the answer lists the new sagas.
    let v = hookline(&["replay", "cli-1", "--reason", "lost"], &env).ok().json();
    assert_eq!(v["sagas"].as_array().map(Vec::len), Some(1), "{v}");
    s.settled_deliveries("cli-1", 3, 20).await;
    let run = hookline(&["replay", "--event", "cli-1", "--reason", "lost again", "-o", "table"], &env);
    assert!(run.ok().out.lines().any(|l| l.starts_with("event_id ") && l.ends_with("cli-1")), "{}", run.out);
    s.settled_deliveries("cli-1", 4, 20).await;
    assert_eq!(hookline(&["replay", "--event", "nope", "--reason", "x"], &env).code, 3);
    for bad in [
        vec!["replay", "--event", "cli-1", "--event-type", "t", "--reason", "x"],
        vec!["replay", "cli-1", "--event-type", "t", "--reason", "x"],
        vec!["replay", "cli-1", "--event", "cli-1", "--reason", "x"],
        vec!["replay", "--event", "cli-1", "--partition-key", "p", "--reason", "x"],
        vec!["replay", "--tenant", "acme", "--since", "1h", "--until", "0s", "--reason", "x"],
    ] {
        assert_eq!(hookline(&bad, &env).code, 2, "{bad:?}");
    }

    // 409: a requeued dead letter cannot be skipped.
    let run = hookline(&["dead-letters", "skip", &dead, "--reason", "late"], &env);
    assert_eq!(run.code, 4, "{}", run.err);
    assert!(run.err.contains("409"), "{}", run.err);
}

/// A stand-in for the deployed API's event listing, three pages long (the
/// cursor says which page): every request's raw query and `authorization`
/// header recorded. Returns its base URL and the record.
pub async fn paging_api() -> (String, Arc<std::sync::Mutex<Vec<(String, String)>>>) {
    use axum::http::{HeaderMap, Uri};
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
        let log = log.clone();
        async move {
            let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
            let query = uri.query().unwrap_or("").to_string();
            log.lock().unwrap().push((query.clone(), auth));
            let page: u32 =
                query.split('&').find_map(|p| p.strip_prefix("cursor=p")).and_then(|n| n.parse().ok()).unwrap_or(1);
            let next = (page < 3).then(|| format!("p{}", page + 1));
            axum::Json(json!({"items": [{"id": format!("evt-{page}"), "type": "t.x"}], "next_cursor": next}))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the paging API");
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), seen)
}

/// How many items `GET path` lists.
pub async fn api_count(s: &Server, path: &str) -> usize {
    let (_, v) = s.get(path).await;
    v["items"].as_array().map_or(0, |a| a.len())
}

/// The ids of `hookline events list <filters> --all` (every page).
pub fn event_ids(filters: &[&str], env: &[(&str, &str)]) -> Vec<String> {
    let args: Vec<&str> = ["events", "list"].iter().chain(filters).chain(&["--all"]).copied().collect();
    let run = hookline(&args, env);
    run.ok().lines().iter().map(|e| e["id"].as_str().unwrap().to_string()).collect()
}

/// `hookline events list`: every filter, newest first, pages walked with
/// the printed cursor and with `--all`, a table, empty results, bad input.
pub async fn events_list(s: &impl Pipeline, env: &[(&str, &str)]) {
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/ok", Behaviour::Ok), "event_types": ["evl.a"]})).await;
    s.subscribe(json!({"callback_url": r.url("/down", Behaviour::Always(500)), "event_types": ["evl.b"],
                       "retry_policy": {"max_attempts": 1, "base_delay_ms": 50, "max_delay_ms": 100}}))
        .await;
    let events = [
        ("e-0", "evl.a", Some("acme")),
        ("e-1", "evl.b", None),
        ("e-2", "evl.a", Some("acme")),
        ("e-3", "evl.a", None),
        ("e-4", "evl.b", None),
    ];
    for (id, t, tenant) in events {
        s.post("/v1/events", &json!({"id": id, "type": t, "tenant_id": tenant, "partition_key": "k1", "data": {}}))
            .await;
        if tenant.is_none() {
            s.settled_deliveries(id, 1, 20).await;
        }
        // Distinct receive times (equal ones are ordered by id).
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let env = env.to_vec();

    // Events with a tenant are stored under an id of their own (the
    // producer's id within the tenant): found by the tenant filter.
    let run = hookline(&["events", "list", "--tenant", "acme", "--all"], &env);
    let acme = run.ok().lines();
    assert!(acme.iter().all(|e| e["tenant_id"] == "acme" && e["type"] == "evl.a"), "{acme:?}");
    let (e2, e0) = (acme[0]["id"].as_str().unwrap(), acme[1]["id"].as_str().unwrap());
    assert_eq!(event_ids(&["--event-type", "evl.*"], &env), ["e-4", "e-3", e2, "e-1", e0], "newest first");
    assert_eq!(event_ids(&["--event-type", "evl.b"], &env), ["e-4", "e-1"]);
    assert_eq!(event_ids(&["--tenant", "acme", "--event-type", "evl.a"], &env), [e2, e0]);
    assert_eq!(event_ids(&["--partition-key", "k1"], &env), ["e-4", "e-3", "e-1"], "the partition without a tenant");
    assert_eq!(event_ids(&["--partition-key", "k1", "--tenant", "acme"], &env), [e2, e0]);
    assert_eq!(event_ids(&["--event-type", "evl.*", "--outcome", "dead_lettered"], &env), ["e-4", "e-1"]);
    assert_eq!(event_ids(&["--event-type", "evl.*", "--since", "1h", "--until", "0s"], &env).len(), 5);
    assert_eq!(
        event_ids(&["--event-type", "evl.*", "--until", "1h"], &env),
        Vec::<String>::new(),
        "empty, not an error"
    );
    assert_eq!(event_ids(&["--event-type", "nothing.*", "--since", "1h"], &env), Vec::<String>::new());

    // A cursor walk, one page at a time, each with the command the CLI
    // printed after the page before (`--since 1h` fixed to the time it meant).
    let mut walked = Vec::new();
    let mut args: Vec<String> =
        ["events", "list", "--event-type", "evl.*", "--since", "1h", "--limit", "2"].map(String::from).to_vec();
    for _ in 0..50 {
        let page = hookline(&args.iter().map(String::as_str).collect::<Vec<_>>(), &env);
        let items = page.ok().lines();
        assert!(items.len() <= 2);
        walked.extend(items.iter().map(|e| e["id"].as_str().unwrap().to_string()));
        match page.next_command() {
            Some(next) => {
                assert!(!next.contains(&"1h".to_string()), "{next:?}");
                args = next;
            }
            None => break,
        }
    }
    assert_eq!(walked, ["e-4", "e-3", e2, "e-1", e0], "each exactly once, in order");

    // The items: no body, the outcome; a table of them.
    let run = hookline(&["events", "list", "--event-type", "evl.b", "--all"], &env);
    let items = run.ok().lines();
    assert_eq!((items[0]["type"].as_str(), items[0]["outcome"].as_str()), (Some("evl.b"), Some("dead_lettered")));
    assert!(items[0].get("body").is_none() && items[0]["received_at"].is_string(), "{}", items[0]);
    let run = hookline(&["events", "list", "--event-type", "evl.*", "--all", "-o", "table"], &env);
    let rows: Vec<&str> = run.ok().out.lines().collect();
    assert!(rows[0].starts_with("ID ") && rows[0].contains("RECEIVED") && rows[0].contains("OUTCOME"), "{}", run.out);
    assert_eq!(rows.len(), 6, "{}", run.out);
    assert!(
        rows[1].starts_with("e-4") && rows[1].contains("evl.b") && rows[1].contains("dead_lettered"),
        "{}",
        run.out
    );
    assert!(rows[3].starts_with(e2) && rows[3].contains("acme") && rows[3].contains("k1"), "{}", run.out);
    let run = hookline(&["events", "list", "--event-type", "nothing.*", "--since", "1h", "--all", "-o", "table"], &env);
    assert_eq!((run.ok().out.as_str(), run.err.trim()), ("", "no events found"));

    // Bad input: exit 2 (usage, 400, 422 naming the field).
    for (args, field) in [
        (vec!["events", "list", "--since", "1h", "--until", "2h"], "until"),
        (vec!["events", "list", "--since", "2000-01-01"], "since"),
        (vec!["events", "list", "--cursor", "not-issued"], "cursor"),
    ] {
        let run = hookline(&args, &env);
        assert_eq!(run.code, 2, "{args:?}: {}", run.err);
        assert!(run.err.contains(&format!("(field: {field})")), "{args:?}: {}", run.err);
    }
    assert_eq!(hookline(&["events", "list", "--outcome", "lost"], &env).code, 2);
    assert_eq!(hookline(&["events", "list", "--since", "yesterday"], &env).code, 2);
}

/// `hookline audit`: filters, pages, a table; the actor is the credential
/// (`actor`: the API key's name, the IAM principal), with `--acting-as`
/// where the API trusts `X-Actor`.
pub async fn audit_command(s: &impl Pipeline, env: &[(&str, &str)], actor: &str) {
    let r = Receiver::start().await;
    let (sub, _) = s.subscribe(json!({"callback_url": r.url("/a", Behaviour::Ok), "event_types": ["*"]})).await;
    let env = env.to_vec();
    let mut as_alice = env.clone();
    as_alice.push(("HOOKLINE_ACTOR", "alice"));
    hookline(&["subscriptions", "update", &sub, "--description", "audited"], &as_alice).ok();
    hookline(&["subscriptions", "rotate-secret", &sub], &env).ok();

    let records = listed(&["audit", "--subscription", &sub, "--action", "subscription.updated"], &env, 1).await;
    assert_eq!(records[0]["actor"], format!("{actor} as `alice`").as_str(), "{}", records[0]);
    assert_eq!(records[0]["subscription_id"], sub.as_str());
    let records = listed(&["audit", "--action", "subscription.secret_rotated", "--since", "1h"], &env, 1).await;
    assert_eq!(records[0]["actor"], actor, "{}", records[0]);
    let all = hookline(&["audit", "--subscription", &sub], &env).ok().lines();
    assert!(all.len() >= 3, "created, updated, rotated: {all:?}");
    let run =
        hookline(&["audit", "--subscription", &sub, "--actor", &format!("{actor} as `alice`"), "-o", "table"], &env);
    let rows: Vec<&str> = run.ok().out.lines().collect();
    assert!(rows[0].starts_with("AT ") && rows[0].contains("ACTOR") && rows[0].contains("ACTION"), "{}", run.out);
    assert_eq!(rows.len(), 2, "{}", run.out);
    assert!(
        rows[1].contains("subscription.updated") && rows[1].contains(&format!("subscription:{sub}")),
        "{}",
        run.out
    );
    let run = hookline(&["audit", "--subscription", &sub, "--limit", "1"], &env);
    assert_eq!(run.ok().lines().len(), 1);
    let c = run.next_cursor().unwrap_or_else(|| panic!("a next-page hint: {}", run.err));
    let rest = hookline(&["audit", "--subscription", &sub, &format!("--cursor={c}"), "--all"], &env).ok().lines();
    assert_eq!(rest.len(), all.len() - 1, "the rest after the first page");
    let run = hookline(&["audit", "--subscription", "sub_nope"], &env);
    assert_eq!((run.ok().out.as_str(), run.err.as_str()), ("", ""), "an empty result is not an error");
    let run = hookline(&["audit", "--since", "1h", "--until", "2h"], &env);
    assert_eq!(run.code, 2, "{}", run.err);
}

/// The `id`s of `items`, sorted.
pub fn ids_of(items: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = items.iter().map(|v| v["id"].as_str().unwrap().to_string()).collect();
    ids.sort();
    ids
}

/// Events and dead letters found by filter, page by page; bulk requeue and
/// skip by filter as jobs (waited for, or not, then `jobs show --wait`);
/// replay by partition and by time range.
pub async fn lists_bulk_jobs_and_replays(s: &impl Pipeline, env: &[(&str, &str)]) {
    let r = Receiver::start().await;
    let (sub, _) = s
        .subscribe(json!({"callback_url": r.url("/c", Behaviour::Always(500)), "event_types": ["bulk.*"],
                          "retry_policy": {"max_attempts": 1, "base_delay_ms": 50, "max_delay_ms": 100}}))
        .await;
    for (i, t) in ["bulk.a", "bulk.a", "bulk.a", "bulk.b", "bulk.b"].iter().enumerate() {
        s.post("/v1/events", &json!({"id": format!("b-{i}"), "type": t, "partition_key": "p1", "data": {"i": i}}))
            .await;
    }
    let env = env.to_vec();

    // dead-letters list: every filter, pages, --all, a table, an empty result.
    let all = listed(&["dead-letters", "list"], &env, 5).await;
    assert!(all.iter().all(|d| d["state"] == "open" && d["subscription_id"] == sub.as_str()));
    let first = hookline(&["dead-letters", "list", "--limit", "2"], &env);
    assert_eq!(first.ok().lines().len(), 2);
    let mut walked = first.lines();
    let mut cursor = first.next_cursor();
    while let Some(c) = cursor {
        let page = hookline(&["dead-letters", "list", "--limit", "2", &format!("--cursor={c}")], &env);
        walked.extend(page.ok().lines());
        cursor = page.next_cursor();
    }
    assert_eq!(ids_of(&walked), ids_of(&all), "a cursor walk returns each exactly once");
    let run = hookline(&["dead-letters", "list", "--limit", "2", "--all"], &env);
    assert_eq!(ids_of(&run.ok().lines()), ids_of(&all));
    assert!(run.err.is_empty(), "{}", run.err);
    for (flag, value, n) in
        [("--event-type", "bulk.b", 2), ("--subscription", sub.as_str(), 5), ("--since", "1h", 5), ("--until", "1h", 0)]
    {
        let run = hookline(&["dead-letters", "list", flag, value], &env);
        assert_eq!(run.ok().lines().len(), n, "{flag} {value}");
    }
    let run = hookline(&["dead-letters", "list", "--event-type", "bulk.b", "-o", "table"], &env);
    let rows: Vec<&str> = run.ok().out.lines().collect();
    assert!(rows[0].starts_with("ID ") && rows[0].contains("STATE") && rows[0].contains("SUBSCRIPTION"), "{}", run.out);
    assert_eq!(rows.len(), 3, "{}", run.out);
    assert!(rows[1..].iter().all(|r| r.contains(" open ") && r.contains("bulk.b")), "{}", run.out);
    let run = hookline(&["dead-letters", "list", "--since", "1h", "--until", "2h"], &env);
    assert_eq!(run.code, 2, "until before since: 422: {}", run.err);
    assert!(run.err.contains("422"), "{}", run.err);

    // Bulk requeue by filter: JSON mode waits and prints the finished job.
    r.set("/c", Behaviour::Ok);
    let job = hookline(&["dead-letters", "requeue", "--event-type", "bulk.a", "--reason", "endpoint fixed"], &env)
        .ok()
        .json();
    assert_eq!((job["state"].as_str(), job["kind"].as_str()), (Some("completed"), Some("requeue")), "{job}");
    assert_eq!((job["matched"].as_u64(), job["done"].as_u64(), job["failed"].as_u64()), (Some(3), Some(3), Some(0)));
    for i in 0..3 {
        let d = s.settled_deliveries(&format!("b-{i}"), 2, 20).await;
        assert_eq!(d.iter().filter(|x| x["status"] == "completed").count(), 1);
    }
    // Bulk skip without waiting, then followed with jobs show --wait.
    let started =
        hookline(&["dead-letters", "skip", "--event-type", "bulk.b", "--reason", "test traffic", "--no-wait"], &env)
            .ok()
            .json();
    let job_id = started["id"].as_str().expect("the job").to_string();
    let job = hookline(&["jobs", "show", &job_id, "--wait"], &env).ok().json();
    assert_eq!((job["state"].as_str(), job["done"].as_u64()), (Some("completed"), Some(2)), "{job}");
    let run = hookline(&["jobs", "show", &job_id, "-o", "table"], &env);
    assert!(run.ok().out.lines().any(|l| l.starts_with("state ") && l.ends_with("completed")), "{}", run.out);
    assert!(run.err.contains(&format!("job {job_id} completed: 2 matched, 2 done, 0 failed")), "{}", run.err);
    assert_eq!(hookline(&["dead-letters", "list"], &env).ok().out, "", "none open");
    assert_eq!(hookline(&["dead-letters", "list", "--state", "skipped"], &env).ok().lines().len(), 2);
    assert_eq!(hookline(&["jobs", "show", "job_nope"], &env).code, 3);
    // On a terminal: a progress bar, then the count.
    let shown = on_a_terminal(&["dead-letters", "requeue", "--all-open", "--reason", "nothing left"], &env);
    assert!(shown.contains("[") && shown.contains("0 matched, 0 done, 0 failed"), "{shown:?}");

    // Replay by partition (in order) and by time range, as jobs.
    let job = hookline(&["replay", "--partition-key", "p1", "--event-type", "bulk.a", "--reason", "resync"], &env)
        .ok()
        .json();
    assert_eq!(
        (job["state"].as_str(), job["kind"].as_str(), job["done"].as_u64()),
        (Some("completed"), Some("replay"), Some(3)),
        "{job}"
    );
    let job = hookline(
        &[
            "replay",
            "--since",
            "1h",
            "--until",
            "0s",
            "--subscription",
            &sub,
            "--event-type",
            "bulk.*",
            "--reason",
            "outage",
        ],
        &env,
    )
    .ok()
    .json();
    assert_eq!((job["state"].as_str(), job["matched"].as_u64()), (Some("completed"), Some(5)), "{job}");
    for bad in [
        vec!["replay", "--partition-key", "p1"],
        vec!["replay", "--since", "1h", "--reason", "x"],
        vec!["replay", "--partition-key", "p1", "--since", "1h", "--until", "0s", "--reason", "x"],
    ] {
        assert_eq!(hookline(&bad, &env).code, 2, "{bad:?}");
    }
    let run = hookline(&["replay", "--since", "1h", "--until", "2h", "--reason", "x"], &env);
    assert_eq!(run.code, 2, "{}", run.err);
    assert!(run.err.contains("422"), "{}", run.err);

    // One audit record per job, with its reason.
    let started = listed(&["audit", "--action", "dead_letters.requeue_started"], &env, 2).await;
    assert_eq!(started.iter().filter(|a| a["reason"] == "endpoint fixed").count(), 1, "{started:?}");
    listed(&["audit", "--action", "dead_letters.skip_started"], &env, 1).await;
    let replays = listed(&["audit", "--action", "replay.started"], &env, 2).await;
    assert!(replays.iter().all(|a| a["job_id"].is_string()), "{replays:?}");
}

/// A backend the ops commands are run against: how the `hookline` CLI
/// reaches it, which credential it refuses, and whom its audit trail names.
pub trait OpsTarget: Pipeline {
    /// The environment the CLI reaches this pipeline with.
    fn ops_env(&self) -> impl std::future::Future<Output = Vec<(&'static str, String)>> + Send;
    /// `env` with a credential this backend refuses, and the status it answers.
    fn refused(env: &[(&'static str, String)]) -> (Vec<(&'static str, String)>, &'static str);
    /// The actor the audit trail records for the CLI's credential.
    const OPS_ACTOR: &'static str;
}

impl OpsTarget for AwsPipeline {
    /// Behind a stand-in for API Gateway, signed with SigV4 as against a
    /// deployment; the actor header trusted as the function's setting says.
    async fn ops_env(&self) -> Vec<(&'static str, String)> {
        let url = gateway(self.hookline.clone(), self.hookline.config.trust_actor_header).await;
        vec![
            ("HOOKLINE_URL", url),
            ("HOOKLINE_AWS_REGION", "us-east-1".to_string()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_string()),
            ("AWS_SECRET_ACCESS_KEY", "secret".to_string()),
            ("AWS_EC2_METADATA_DISABLED", "true".to_string()),
        ]
    }

    /// Another access key: IAM authorization refuses it.
    fn refused(env: &[(&'static str, String)]) -> (Vec<(&'static str, String)>, &'static str) {
        let mut other = env.to_vec();
        other.push(("AWS_ACCESS_KEY_ID", "AKIDOTHER".to_string()));
        (other, "403")
    }

    const OPS_ACTOR: &'static str = PRINCIPAL;
}

impl OpsTarget for Server {
    /// Its URL and API key.
    async fn ops_env(&self) -> Vec<(&'static str, String)> {
        env_of(self)
    }

    /// A wrong API key.
    fn refused(env: &[(&'static str, String)]) -> (Vec<(&'static str, String)>, &'static str) {
        let mut other = env.to_vec();
        other.push(("HOOKLINE_API_KEY", "wrong".to_string()));
        (other, "401")
    }

    const OPS_ACTOR: &'static str = "key:default";
}

/// Every subscription command; a credential the backend refuses is exit
/// code 1 (neither invalid input nor not found) naming the status.
pub async fn ops_subscriptions<P: OpsTarget>(p: &mut P) {
    let owned = p.ops_env().await;
    subscriptions_commands(&borrow(&owned)).await;
    let (refused, status) = P::refused(&owned);
    let run = hookline(&["subscriptions", "list"], &borrow(&refused));
    assert_eq!(run.code, 1, "{status} is neither invalid input nor not found: {}", run.err);
    assert!(run.err.contains(status), "{}", run.err);
}

/// [`events_dead_letters_and_replay_commands`] on this backend.
pub async fn ops_events_dead_letters_and_replay<P: OpsTarget>(p: &mut P) {
    let owned = p.ops_env().await;
    events_dead_letters_and_replay_commands(p, &borrow(&owned)).await;
}

/// [`events_list`] on this backend.
pub async fn ops_events_list<P: OpsTarget>(p: &mut P) {
    let owned = p.ops_env().await;
    events_list(p, &borrow(&owned)).await;
}

/// [`audit_command`] on this backend (the actor header trusted).
pub async fn ops_audit<P: OpsTarget>(p: &mut P) {
    let owned = p.ops_env().await;
    audit_command(p, &borrow(&owned), P::OPS_ACTOR).await;
}

/// [`lists_bulk_jobs_and_replays`] on this backend.
pub async fn ops_bulk_jobs_and_replays<P: OpsTarget>(p: &mut P) {
    let owned = p.ops_env().await;
    lists_bulk_jobs_and_replays(p, &borrow(&owned)).await;
}

/// The ops commands' cases, listed once; each backend's test binary
/// expands them (`hookline_tests::cli_ops_scenario_tests!(aws)`, `(serve)`).
#[macro_export]
macro_rules! cli_ops_scenario_tests {
    ($backend:ident) => {
        $crate::scenario_tests!($backend, cli_ops;
            ops_subscriptions,
            ops_events_dead_letters_and_replay,
            ops_events_list,
            ops_keys,
            ops_portal_link,
            ops_audit; $crate::pipeline::Settings::default().trust_actor_header(),
            // Five failures would open the breaker; its cool-down must not
            // hold the requeued deliveries back.
            ops_bulk_jobs_and_replays; $crate::pipeline::Settings::default().breaker(100, 30_000, 1_800_000),
        );
    };
}
