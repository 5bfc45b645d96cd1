//! Cold-start benchmark of the Lambda bootstraps (a benchmark command, not a
//! test). Each function binary is started against a minimal local Lambda
//! Runtime API; its init time is spawn → its first
//! `GET /2018-06-01/runtime/invocation/next` (the moment Lambda's INIT phase
//! ends). Targets: init p50 ≤ 6 ms, arm64 bootstrap ≤ 8 MB.
//!
//! `make bench-cold-start`, i.e. the functions built as `make lambda`
//! builds them, position-dependent (`-C relocation-model=static`, the
//! Makefile's `LAMBDA_RUSTFLAGS`), for this host:
//! `cargo build --release --target <host> --config 'target.<host>.rustflags = "-C relocation-model=static"' -p ingest -p router -p saga -p delivery -p requeue -p api -p reconciler && cargo run --release -p hookline-bench --bin cold_start -- --dir target/<host>/release`
//!
//! The functions, and each one's environment, come from `template.yaml`:
//! every `AWS::Serverless::Function`, its binary (`Metadata.BuildProperties.Binary`)
//! and its variables (`Globals` and its own), with stand-ins for what a
//! deployment fills in (a `!Ref` to a parameter: its default; to a table:
//! its logical id; to a queue: a local URL; a `!GetAtt …Arn`: a made-up ARN;
//! an `!If`: its else branch, the defaults' choice), so a function or a
//! variable added to the template is measured without touching this file.
//!
//! Init reads the deployment's data key (`hookline_aws::keys`): one
//! `GetItem` of KeysTable and one KMS `Decrypt`. The runtime API server
//! answers those two requests too (`AWS_ENDPOINT_URL` points the child's
//! SDK at it, plain HTTP on loopback): a fixed wrapped-key item and a fixed
//! 32-byte plaintext, any other AWS request refused and reported. So init
//! here is the function's own work, both requests included (clients,
//! connector, signing, parsing), but not the network: on Lambda, add the
//! round trips and TLS handshakes to DynamoDB and KMS in-region. The column
//! `init calls` lists the AWS operations each function made before `/next`.
//!
//! Options: `--dir DIR` where the binaries are (default: the directory of
//! this executable, i.e. `target/release`; a cargo-lambda output such as
//! `target/lambda`, laid out `<name>/bootstrap`, works too), `--arm64 DIR`
//! where the arm64 bootstraps of `make lambda` are, only weighed (default
//! `<dir>/../lambda`, else `<dir>/../../lambda`, when it exists), `--runs N` (default 20), `--only
//! ingest,api` (a subset), `--timeout-ms T` (default 5000), `--env K=V`
//! (repeatable: set or override a variable of the child, for experiments
//! such as `--env SSL_CERT_DIR=/nonexistent`). Exits non-zero if a binary
//! fails to start or never asks for `/next` within the timeout.
//!
//! The child gets a Lambda-like environment and nothing else (`env_clear`,
//! so no `~/.aws` profile or credentials of the caller leak in): the
//! `AWS_LAMBDA_*` variables `lambda_runtime::Config::from_env` requires,
//! dummy static credentials and region, the template's variables and
//! `AWS_ENDPOINT_URL`. `RUST_LOG` is passed through if set. Child output
//! goes to a temp file, shown when a run fails.
//!
//! Timing notes: the first run of each binary may pay for reading it from
//! disk (column `first`); the others run from the page cache. Built for the
//! host here (x86_64); deployment builds arm64 with cargo-lambda, whose
//! bootstraps cannot run here: they are weighed (column `arm64 MB`), and the
//! init figures are the host build's, indicative, not Lambda's own
//! `Init Duration`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use hookline_tests::iam;
use serde_yaml::Value;
use tokio::sync::oneshot;

const INIT_TARGET_MS: f64 = 6.0;
const SIZE_TARGET_MB: f64 = 8.0;

/// The data key the stub hands out: 32 fixed bytes (base64), and a
/// "wrapped" form that is only ever passed back to the stub.
const STUB_PLAINTEXT: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const STUB_WRAPPED: &str = "Y29sZC1zdGFydCB3cmFwcGVkIGRhdGEga2V5LCBub3QgYSByZWFsIGNpcGhlcnRleHQ=";

struct Args {
    dir: PathBuf,
    arm64: Option<PathBuf>,
    runs: usize,
    only: Option<Vec<String>>,
    timeout: Duration,
    extra_env: Vec<(String, String)>,
}

fn args() -> anyhow::Result<Args> {
    let exe_dir =
        std::env::current_exe()?.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("target/release"));
    let mut a =
        Args { dir: exe_dir, arm64: None, runs: 20, only: None, timeout: Duration::from_secs(5), extra_env: vec![] };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().ok_or_else(|| anyhow::anyhow!("{k} needs a value"));
        match k.as_str() {
            "--dir" => a.dir = PathBuf::from(v()?),
            "--arm64" => a.arm64 = Some(PathBuf::from(v()?)),
            "--runs" | "-n" => a.runs = v()?.parse()?,
            "--only" => a.only = Some(v()?.split(',').map(str::to_owned).collect()),
            "--timeout-ms" => a.timeout = Duration::from_millis(v()?.parse()?),
            "--env" => {
                let kv = v()?;
                let (k, v) = kv.split_once('=').ok_or_else(|| anyhow::anyhow!("--env K=V, got {kv}"))?;
                a.extra_env.push((k.to_owned(), v.to_owned()));
            }
            _ => anyhow::bail!(
                "unknown argument {k}; use --dir DIR --arm64 DIR --runs N --only a,b --timeout-ms T --env K=V"
            ),
        }
    }
    anyhow::ensure!(a.runs > 0, "--runs must be at least 1");
    if a.arm64.is_none() {
        // target/release → target/lambda; target/<host>/release (`make
        // bench-cold-start`) → target/lambda too.
        let target = a.dir.parent();
        a.arm64 = [target, target.and_then(Path::parent)]
            .into_iter()
            .flatten()
            .map(|p| p.join("lambda"))
            .find(|p| p.is_dir());
    }
    Ok(a)
}

// ------------------------------------------------------------------ the template's functions

/// A Lambda function of `template.yaml`.
struct Function {
    /// Its binary (cargo package and bin name, the bootstrap's directory).
    binary: String,
    /// Its variables, stand-ins for what a deployment fills in; the queue
    /// URLs still lack the stub's address (`{endpoint}`).
    vars: Vec<(String, String)>,
}

/// A made-up ARN for `!GetAtt <id>.Arn` (only the KMS key's is read at init:
/// it names the key that wrapped the data key).
fn stand_in_arn(t: &Value, id: &str) -> String {
    match iam::type_of(t, id) {
        Some("AWS::KMS::Key") => format!("arn:aws:kms:us-east-1:000000000000:key/{id}"),
        Some(ty) => {
            format!("arn:aws:{}:us-east-1:000000000000:{id}", ty.split("::").nth(1).unwrap_or("x").to_lowercase())
        }
        None => format!("arn:aws:unknown:us-east-1:000000000000:{id}"),
    }
}

/// The value a deployment would give a function variable written as `v`,
/// or a stand-in of the same shape; `None` for a form not understood.
fn stand_in(t: &Value, v: &Value) -> Option<String> {
    match v {
        Value::String(s) => return Some(s.clone()),
        Value::Number(n) => return Some(n.to_string()),
        Value::Bool(b) => return Some(b.to_string()),
        _ => {}
    }
    if let Some(id) = iam::ref_of(v) {
        let param = &t["Parameters"][id.as_str()];
        if !param.is_null() {
            return match &param["Default"] {
                Value::Null => Some(String::new()),
                d => stand_in(t, d),
            };
        }
        return Some(match iam::type_of(t, &id) {
            Some("AWS::SQS::Queue") => format!("{{endpoint}}/000000000000/{id}"),
            _ => id,
        });
    }
    if let Some((id, attr)) = iam::get_att(v) {
        return (attr == "Arn").then(|| stand_in_arn(t, &id));
    }
    match iam::intrinsic(v)? {
        (name, Value::Sequence(args)) if name == "If" && args.len() == 3 => stand_in(t, &args[2]),
        _ => None,
    }
}

/// Every function of the template, in the template's order.
fn template_functions() -> anyhow::Result<Vec<Function>> {
    let t = iam::load_template();
    let mut out = Vec::new();
    for id in iam::ids_of_type(&t, "AWS::Serverless::Function") {
        let r = iam::resource(&t, id).expect("listed");
        let binary = r["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("{id} has no Metadata.BuildProperties.Binary"))?;
        let mut vars: Vec<(String, String)> = Vec::new();
        let global = &t["Globals"]["Function"]["Environment"]["Variables"];
        let own = &r["Properties"]["Environment"]["Variables"];
        for m in [global, own].into_iter().filter_map(Value::as_mapping) {
            for (k, v) in m {
                let k = k.as_str().ok_or_else(|| anyhow::anyhow!("{id}: a variable name that is not a string"))?;
                let v = stand_in(&t, v).ok_or_else(|| anyhow::anyhow!("{id}: no stand-in for {k} = {v:?}"))?;
                vars.retain(|(e, _)| e != k);
                vars.push((k.to_owned(), v));
            }
        }
        out.push(Function { binary: binary.to_owned(), vars });
    }
    anyhow::ensure!(!out.is_empty(), "template.yaml has no AWS::Serverless::Function");
    Ok(out)
}

// ------------------------------------------------------------------ the local runtime API (and AWS stub)

/// What the runtime API saw from the child of the current run.
enum Seen {
    /// First `GET …/invocation/next`.
    Next(Instant),
    /// `POST …/init/error` (the runtime reported a failed init).
    InitError(String),
}

/// The current run: its waiter (taken by the first `/next` or init error),
/// the AWS operations the child called, and the KMS key the data key item
/// names as its wrapper (the child's `KMS_KEY_ID`, so it does not re-wrap).
#[derive(Default)]
struct Current {
    waiter: Option<oneshot::Sender<Seen>>,
    calls: Vec<String>,
    kms_key_id: String,
}

/// Shared between the server and the runs.
type Slot = Arc<Mutex<Current>>;

/// The stub's answer to one AWS request (JSON protocol, `X-Amz-Target`).
fn aws_answer(target: &str, kms_key_id: &str) -> (StatusCode, &'static str, String) {
    match target {
        "DynamoDB_20120810.GetItem" => (
            StatusCode::OK,
            "application/x-amz-json-1.0",
            serde_json::json!({"Item": {
                "id": {"S": "data-key"},
                "key_id": {"S": "cold-start"},
                "wrapped": {"S": STUB_WRAPPED},
                "wrapped_by": {"S": kms_key_id},
            }})
            .to_string(),
        ),
        "TrentService.Decrypt" => (
            StatusCode::OK,
            "application/x-amz-json-1.1",
            serde_json::json!({"KeyId": kms_key_id, "Plaintext": STUB_PLAINTEXT, "EncryptionAlgorithm": "SYMMETRIC_DEFAULT"})
                .to_string(),
        ),
        other => (
            StatusCode::BAD_REQUEST,
            "application/x-amz-json-1.0",
            serde_json::json!({"__type": "UnknownOperationException", "message": format!("cold_start stub: no {other} at init")})
                .to_string(),
        ),
    }
}

async fn runtime_api(slot: Slot) -> anyhow::Result<std::net::SocketAddr> {
    let app = axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
        let slot = slot.clone();
        async move {
            let now = Instant::now();
            let path = uri.path();
            if let Some(target) = headers.get("x-amz-target").and_then(|v| v.to_str().ok()) {
                let kms_key_id = {
                    let mut cur = slot.lock().unwrap();
                    cur.calls.push(target.rsplit('.').next().unwrap_or(target).to_owned());
                    cur.kms_key_id.clone()
                };
                let (status, content_type, body) = aws_answer(target, &kms_key_id);
                return (status, [(header::CONTENT_TYPE, content_type)], body);
            }
            let text = [(header::CONTENT_TYPE, "text/plain")];
            if method == Method::GET && path == "/2018-06-01/runtime/invocation/next" {
                if let Some(tx) = slot.lock().unwrap().waiter.take() {
                    let _ = tx.send(Seen::Next(now));
                }
                // Hold the long poll as Lambda does between invocations; the
                // child is killed long before this ends.
                tokio::time::sleep(Duration::from_secs(30)).await;
                (StatusCode::SERVICE_UNAVAILABLE, text, String::new())
            } else if method == Method::POST && path == "/2018-06-01/runtime/init/error" {
                if let Some(tx) = slot.lock().unwrap().waiter.take() {
                    let _ = tx.send(Seen::InitError(String::from_utf8_lossy(&body).into_owned()));
                }
                (StatusCode::ACCEPTED, text, r#"{"status":"OK"}"#.to_owned())
            } else {
                (StatusCode::NOT_FOUND, text, format!("cold_start: no route {method} {path}"))
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}

/// The environment of the child: what Lambda sets for a `provided.al2023`
/// function, the function's variables, the endpoint of the AWS stub, and
/// nothing else.
fn lambda_env(f: &Function, api: std::net::SocketAddr) -> Vec<(String, String)> {
    let endpoint = format!("http://{api}");
    let name = &f.binary;
    let mut env: Vec<(String, String)> = [
        ("AWS_LAMBDA_RUNTIME_API", api.to_string()),
        ("AWS_LAMBDA_FUNCTION_NAME", format!("hookline-{name}")),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256".into()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
        ("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/hookline-{name}")),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "2025/01/01/[$LATEST]0123456789abcdef".into()),
        ("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand".into()),
        ("AWS_EXECUTION_ENV", "AWS_Lambda_provided.al2023".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_DEFAULT_REGION", "us-east-1".into()),
        ("AWS_ACCESS_KEY_ID", "AKIDCOLDSTART".into()),
        ("AWS_SECRET_ACCESS_KEY", "cold-start-dummy-secret".into()),
        ("AWS_SESSION_TOKEN", "cold-start-dummy-token".into()),
        ("AWS_ENDPOINT_URL", endpoint.clone()),
        ("LAMBDA_TASK_ROOT", "/var/task".into()),
        ("LAMBDA_RUNTIME_DIR", "/var/runtime".into()),
        ("TZ", ":UTC".into()),
        ("LANG", "en_US.UTF-8".into()),
        ("PATH", "/usr/local/bin:/usr/bin:/bin".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    env.extend(f.vars.iter().map(|(k, v)| (k.clone(), v.replace("{endpoint}", &endpoint))));
    if let Ok(v) = std::env::var("RUST_LOG") {
        env.push(("RUST_LOG".into(), v));
    }
    env
}

// ------------------------------------------------------------------ runs

/// `<dir>/<name>` (cargo's layout) or `<dir>/<name>/bootstrap` (cargo-lambda's).
fn find_binary(dir: &Path, name: &str) -> Option<PathBuf> {
    [dir.join(name), dir.join(name).join("bootstrap")].into_iter().find(|p| p.is_file())
}

/// CPU time (ms) all threads of process `pid` have run so far, from
/// `/proc/<pid>/task/*/schedstat` (ns, Linux only; `None` elsewhere).
fn cpu_ms(pid: u32) -> Option<f64> {
    let mut ns = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        ns += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(ns as f64 / 1e6)
}

/// What one cold start took, in ms, and what it called.
struct Run {
    /// Spawn → first `GET /next` (wall clock).
    wall: f64,
    /// CPU time the child had used by then (all threads), if known.
    cpu: Option<f64>,
    /// The AWS operations it called before `/next`, in order.
    calls: Vec<String>,
}

/// One cold start: spawn → first `/next`.
async fn one_run(
    bin: &Path,
    env: &[(String, String)],
    slot: &Slot,
    timeout: Duration,
    log: &Path,
) -> Result<Run, String> {
    let (tx, mut rx) = oneshot::channel();
    {
        let kms_key_id = env.iter().find(|(k, _)| k == "KMS_KEY_ID").map(|(_, v)| v.clone()).unwrap_or_default();
        *slot.lock().unwrap() = Current { waiter: Some(tx), calls: Vec::new(), kms_key_id };
    }
    let out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(bin);
    cmd.env_clear().envs(env.iter().map(|(k, v)| (k, v))).stdin(Stdio::null()).stdout(out).stderr(err);
    if let Some(dir) = bin.parent() {
        cmd.current_dir(dir);
    }

    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("spawn {}: {e}", bin.display()))?;
    let mut poll = tokio::time::interval(Duration::from_millis(2));
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let calls = || std::mem::take(&mut slot.lock().unwrap().calls);
    let result = loop {
        tokio::select! {
            biased;
            seen = &mut rx => break match seen {
                // The child now waits on the held /next, so its CPU time is
                // (nearly) that of its init.
                Ok(Seen::Next(at)) => Ok(Run { wall: at.duration_since(start).as_secs_f64() * 1e3, cpu: cpu_ms(child.id()), calls: calls() }),
                Ok(Seen::InitError(body)) => Err(format!("reported an init error: {body} (AWS calls: {:?})", calls())),
                Err(_) => Err("runtime API went away".to_owned()),
            },
            _ = &mut deadline => break Err(format!("no GET /next within {} ms (AWS calls: {:?})", timeout.as_millis(), calls())),
            _ = poll.tick() => {
                if let Ok(Some(status)) = child.try_wait() {
                    // It may have asked for /next just before exiting.
                    if let Ok(Seen::Next(at)) = rx.try_recv() {
                        break Ok(Run { wall: at.duration_since(start).as_secs_f64() * 1e3, cpu: None, calls: calls() });
                    }
                    break Err(format!("exited ({status}) before GET /next (AWS calls: {:?})", calls()));
                }
            }
        }
    };
    *slot.lock().unwrap() = Current::default();
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// Nearest-rank percentile of sorted `v`.
fn pct(v: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name") || l.starts_with("Model") || l.starts_with("CPU part"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_else(|| "unknown CPU".into());
    let nproc = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{nproc} CPUs ({}), {model}, Linux {}", std::env::consts::ARCH, kernel.trim())
}

/// Whether the ELF file at `p` still has a symbol table (not stripped).
fn has_symtab(p: &Path) -> Option<bool> {
    let b = std::fs::read(p).ok()?;
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        return None; // only 64-bit little-endian ELF
    }
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize;
    let (shoff, shentsize, shnum) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c));
    Some((0..shnum).any(|i| {
        let o = shoff + i * shentsize;
        o + 8 <= b.len() && u32_at(o + 4) == 2 // SHT_SYMTAB
    }))
}

/// Size in MB (10^6 bytes) of the file at `p`, if there is one.
fn size_mb(p: &Path) -> Option<f64> {
    std::fs::metadata(p).ok().map(|m| m.len() as f64 / 1_000_000.0)
}

/// The last 20 lines of the child's output.
fn tail(log: &Path) -> String {
    let output = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = output.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = args()?;
    let all = template_functions()?;
    let functions: Vec<&Function> = match &a.only {
        Some(only) => {
            let known: Vec<&str> = all.iter().map(|f| f.binary.as_str()).collect();
            for n in only {
                anyhow::ensure!(known.contains(&n.as_str()), "unknown function {n}; one of {known:?}");
            }
            all.iter().filter(|f| only.contains(&f.binary)).collect()
        }
        None => all.iter().collect(),
    };

    println!("cold start: spawn → first GET /2018-06-01/runtime/invocation/next, {} runs each", a.runs);
    println!("machine:    {}", machine());
    println!(
        "binaries:   {} ({} build for this host; deployment builds arm64 with cargo-lambda)",
        a.dir.display(),
        std::env::consts::ARCH
    );
    match &a.arm64 {
        Some(d) => println!("arm64:      {} (weighed only)", d.display()),
        None => {
            println!("arm64:      none given or found (`make lambda`, then --arm64 DIR); size judged on the host build")
        }
    }
    if !a.extra_env.is_empty() {
        let kv: Vec<String> = a.extra_env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("extra env:  {}", kv.join(" "));
    }
    println!();

    let slot: Slot = Arc::new(Mutex::new(Current::default()));
    let api = runtime_api(slot.clone()).await?;
    let log_dir = std::env::temp_dir();

    println!(
        "{:<11} {:>8} {:>8} {:>8} {:>5} {:>9} {:>7} {:>7} {:>7} {:>8}  {:<16} verdict",
        "function",
        "host MB",
        "symbols",
        "arm64 MB",
        "runs",
        "first ms",
        "p50 ms",
        "p90 ms",
        "max ms",
        "cpu p50",
        "init calls"
    );
    let mut failures: Vec<(String, String)> = Vec::new();
    for f in &functions {
        let name = f.binary.as_str();
        let arm64_mb = a.arm64.as_deref().and_then(|d| find_binary(d, name)).and_then(|p| size_mb(&p));
        let arm64 = arm64_mb.map_or("-".to_owned(), |m| format!("{m:.2}"));
        let Some(bin) = find_binary(&a.dir, name) else {
            println!("{name:<11} {:>8} {:>8} {arm64:>8}", "missing", "");
            failures.push((name.into(), format!("no {0}/{name} nor {0}/{name}/bootstrap", a.dir.display())));
            continue;
        };
        let host_mb = size_mb(&bin).unwrap_or(f64::NAN);
        let symbols = match has_symtab(&bin) {
            Some(true) => "yes",
            Some(false) => "stripped",
            None => "?",
        };
        let mut env = lambda_env(f, api);
        for (k, v) in &a.extra_env {
            env.retain(|(e, _)| e != k);
            env.push((k.clone(), v.clone()));
        }
        let log = log_dir.join(format!("cold_start-{}-{name}.log", std::process::id()));
        let (mut times, mut cpus, mut calls) = (Vec::with_capacity(a.runs), Vec::with_capacity(a.runs), None);
        let mut failed = None;
        for _ in 0..a.runs {
            match one_run(&bin, &env, &slot, a.timeout, &log).await {
                Ok(run) => {
                    times.push(run.wall);
                    cpus.extend(run.cpu);
                    calls.get_or_insert(run.calls);
                }
                Err(e) => {
                    failed = Some(format!("{e}\n--- output ---\n{}", tail(&log)));
                    break;
                }
            }
        }
        let _ = std::fs::remove_file(&log);
        if let Some(e) = failed {
            println!("{name:<11} {host_mb:>8.1} {symbols:>8} {arm64:>8} {:>5} {:>9}", times.len(), "FAILED");
            failures.push((name.into(), e));
            continue;
        }
        let first = times[0];
        let mut sorted = times.clone();
        sorted.sort_by(f64::total_cmp);
        let (p50, p90, max) = (pct(&sorted, 50.0), pct(&sorted, 90.0), sorted[sorted.len() - 1]);
        cpus.sort_by(f64::total_cmp);
        let cpu = if cpus.is_empty() { "?".to_owned() } else { format!("{:.1}", pct(&cpus, 50.0)) };
        let calls = calls.unwrap_or_default().join("+");
        let size = arm64_mb.unwrap_or(host_mb);
        let verdict = match (p50 <= INIT_TARGET_MS, size <= SIZE_TARGET_MB) {
            (true, true) => "ok".to_owned(),
            (i, s) => [
                (!i).then(|| format!("init > {INIT_TARGET_MS} ms")),
                (!s).then(|| format!("size > {SIZE_TARGET_MB} MB")),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(", "),
        };
        println!(
            "{name:<11} {host_mb:>8.2} {symbols:>8} {arm64:>8} {:>5} {first:>9.1} {p50:>7.1} {p90:>7.1} {max:>7.1} {cpu:>8}  {calls:<16} {verdict}",
            times.len()
        );
    }
    println!();
    println!(
        "targets: init p50 ≤ {INIT_TARGET_MS} ms; bootstrap ≤ {SIZE_TARGET_MB} MB, arm64 (the host build's when no arm64 one); MB = 10^6 bytes"
    );
    println!("cpu p50: CPU time (all threads) the child had used at its first /next; Lambda gives a");
    println!("         256 MB function a share of one vCPU, so CPU-bound init stretches there");
    println!("init calls: the AWS requests made before /next, answered by the local stub (no network,");
    println!("         no TLS); on Lambda each is a round trip to DynamoDB or KMS in-region");

    if !failures.is_empty() {
        for (name, f) in &failures {
            eprintln!("\n{name}: {f}");
        }
        std::process::exit(1);
    }
    Ok(())
}
