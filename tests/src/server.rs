//! A real `hookline serve` process on its own SQLite file and port.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// The `hookline` binary: `HOOKLINE_BIN`, or beside the test executable's
/// target directory (`make test` builds it first).
pub fn binary() -> PathBuf {
    if let Ok(p) = std::env::var("HOOKLINE_BIN") {
        return p.into();
    }
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let bin = dir.join(format!("hookline{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p hookline --features failpoints` (make test does)",
        bin.display()
    );
    bin
}

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh directory under the system temp dir.
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("hookline-test-{tag}-{}-{}", std::process::id(), rand_suffix()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

/// One running `hookline serve`.
pub struct Server {
    child: Option<Child>,
    /// Base URL of its API.
    pub base: String,
    /// Its API key.
    pub key: String,
    /// Its database file.
    pub db: PathBuf,
    port: u16,
    extra_args: Vec<String>,
    /// Environment variables set on every start (settings without a flag).
    extra_env: Vec<(String, String)>,
    client: reqwest::Client,
    /// Keeps the directory alive.
    _dir: std::sync::Arc<TempDir>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Server {
    /// Starts `hookline serve --dev` on a new database with short timeouts,
    /// its admin key given in `HOOKLINE_API_KEY` (a fresh random one, kept
    /// across restarts).
    pub fn start(tag: &str) -> Server {
        Self::start_with(tag, &[])
    }

    /// Starts without a key given, so serve generates its admin key on the
    /// first run (the test's key is read from `<db>.admin-key`).
    pub fn start_generating_its_key(tag: &str) -> Server {
        let dir = std::sync::Arc::new(TempDir::new(tag));
        let db = dir.0.join("hookline.db");
        Self::spawn(db, free_port(), Vec::new(), vec![("HOOKLINE_API_KEY".into(), String::new())], dir, None)
    }

    /// Starts with extra arguments.
    pub fn start_with(tag: &str, extra: &[&str]) -> Server {
        let dir = std::sync::Arc::new(TempDir::new(tag));
        let db = dir.0.join("hookline.db");
        let extra_args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        Self::spawn(db, free_port(), extra_args, Vec::new(), dir, None)
    }

    /// Starts with extra arguments and environment variables (kept across
    /// restarts), e.g. `HOOKLINE_API_KEY`; the key is that variable's when
    /// given.
    pub fn start_with_env(tag: &str, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let dir = std::sync::Arc::new(TempDir::new(tag));
        let db = dir.0.join("hookline.db");
        let extra_args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Self::spawn(db, free_port(), extra_args, env, dir, None)
    }

    /// The directory of its database (for files a test writes beside it).
    pub fn dir(&self) -> &Path {
        &self._dir.0
    }

    /// Starts with these settings (as flags and environment variables,
    /// kept across restarts).
    pub fn start_with_settings(tag: &str, settings: &crate::pipeline::Settings) -> Server {
        let dir = std::sync::Arc::new(TempDir::new(tag));
        let db = dir.0.join("hookline.db");
        Self::spawn(db, free_port(), settings.serve_args(), Vec::new(), dir, None)
    }

    fn spawn(
        db: PathBuf,
        port: u16,
        extra_args: Vec<String>,
        extra_env: Vec<(String, String)>,
        dir: std::sync::Arc<TempDir>,
        failpoint: Option<&str>,
    ) -> Server {
        let mut extra_env = extra_env;
        if !extra_env.iter().any(|(k, _)| k == "HOOKLINE_API_KEY") {
            extra_env.push(("HOOKLINE_API_KEY".into(), shared::api_key::generate_secret()));
        }
        let mut cmd = Command::new(binary());
        cmd.arg("serve")
            .arg("--dev")
            .arg("--db")
            .arg(&db)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .args(["--delivery-timeout-ms", "1500", "--connect-timeout-ms", "1000"])
            .args(&extra_args)
            .env_remove("HOOKLINE_API_KEY")
            .env("HOOKLINE_FAILPOINT", failpoint.unwrap_or(""))
            .envs(extra_env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .stderr(Stdio::from(
                std::fs::OpenOptions::new().create(true).append(true).open(log_path(&dir)).expect("serve log file"),
            ));
        let mut child = cmd.spawn().expect("spawn hookline serve");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let mut banner = false;
        for line in lines.by_ref() {
            let line = line.expect("read serve output");
            if line.trim().starts_with("API key") {
                banner = true;
                break;
            }
        }
        assert!(banner, "hookline serve did not print its API key line");
        // The environment's admin key when one is given; else the one
        // generated on the first run, which serve wrote beside the database.
        let key = match extra_env.iter().find(|(k, _)| k == "HOOKLINE_API_KEY").filter(|(_, v)| !v.is_empty()) {
            Some((_, v)) => v.trim().to_string(),
            None => {
                std::fs::read_to_string(Self::admin_key_path(&db)).map(|k| k.trim().to_string()).unwrap_or_default()
            }
        };
        // Keep draining stdout so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let server = Server {
            child: Some(child),
            base: format!("http://127.0.0.1:{port}"),
            key,
            db,
            port,
            extra_args,
            extra_env,
            client: reqwest::Client::new(),
            _dir: dir,
        };
        server.wait_healthy();
        server
    }

    /// Where serve writes the admin key it generates: `<db>.admin-key`.
    pub fn admin_key_path(db: &Path) -> PathBuf {
        let mut p = db.as_os_str().to_owned();
        p.push(".admin-key");
        PathBuf::from(p)
    }

    fn wait_healthy(&self) {
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("hookline serve did not start listening");
    }

    /// `kill -9` the process.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Waits for the process to exit by itself (a failpoint aborted it).
    pub fn wait_exit(&mut self, secs: u64) -> bool {
        let Some(c) = self.child.as_mut() else { return true };
        for _ in 0..secs * 40 {
            if let Ok(Some(_)) = c.try_wait() {
                self.child = None;
                return true;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        false
    }

    /// Sends `signal` (`HUP`, `USR1`, …) to the running process.
    pub fn signal(&self, signal: &str) {
        let c = self.child.as_ref().expect("running");
        let sent = Command::new("kill").arg(format!("-{signal}")).arg(c.id().to_string()).status().expect("kill");
        assert!(sent.success(), "kill -{signal}");
    }

    /// The process's log so far (its stderr, every start appended).
    pub fn log(&self) -> String {
        std::fs::read_to_string(log_path(&self._dir)).unwrap_or_default()
    }

    /// Sends SIGTERM and waits for a clean exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
        c.wait().expect("wait")
    }

    /// Starts the process again on the same database and port.
    pub fn restart(&mut self, failpoint: Option<&str>) {
        self.kill9();
        let next = Self::spawn(
            self.db.clone(),
            self.port,
            self.extra_args.clone(),
            self.extra_env.clone(),
            self._dir.clone(),
            failpoint,
        );
        *self = next;
    }

    /// Starts a new process with `failpoint` armed (it will abort there).
    pub fn restart_with_failpoint(&mut self, failpoint: &str) {
        self.restart(Some(failpoint));
    }

    /// Calls the API with a given key (or none).
    pub async fn call_with_key(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        key: Option<&str>,
    ) -> (u16, Value) {
        self.request(method, path, body, key, &[]).await
    }

    /// Calls the API with a given key (or none) and extra headers, each
    /// value sent as its bytes.
    async fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        key: Option<&str>,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let (status, body, _) = self.request_full(method, path, body, key, headers).await;
        (status, body)
    }

    /// [`Server::request`] with the response headers (lower-case names).
    async fn request_full(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        key: Option<&str>,
        headers: &[(&str, &str)],
    ) -> (u16, Value, std::collections::HashMap<String, String>) {
        let mut req = self.client.request(method.parse().unwrap(), format!("{}{}", self.base, path));
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        for (name, value) in headers {
            req =
                req.header(*name, reqwest::header::HeaderValue::from_bytes(value.as_bytes()).expect("a header value"));
        }
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b.to_vec());
        }
        let res = req.send().await.expect("request");
        let status = res.status().as_u16();
        let response_headers =
            res.headers().iter().map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string())).collect();
        let bytes = res.bytes().await.unwrap_or_default();
        (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null), response_headers)
    }
}

impl crate::pipeline::Pipeline for Server {
    async fn credential(&self, role: shared::access::Role, tenant: Option<&str>) -> crate::pipeline::Credential {
        let name = crate::pipeline::unique_name(role.as_str());
        let body = serde_json::json!({"name": name, "role": role.as_str(), "tenant_id": tenant});
        let (st, v) = self.call("POST", "/v1/keys", Some(body.to_string().as_bytes())).await;
        assert_eq!(st, 201, "POST /v1/keys {body}: {v}");
        crate::pipeline::Credential {
            id: v["id"].as_str().expect("key id").to_string(),
            actor: format!("key:{name}"),
            secret: Some(v["secret"].as_str().expect("a new key's secret").to_string()),
            principal: None,
        }
    }

    async fn call_as(
        &self,
        cred: &crate::pipeline::Credential,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        self.request(method, path, body, cred.secret.as_deref(), headers).await
    }

    async fn call_full(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[(&str, &str)],
    ) -> (u16, Value, std::collections::HashMap<String, String>) {
        self.request_full(method, path, body, Some(&self.key), headers).await
    }

    async fn call_console(&self, token: &str, method: &str, path: &str, body: Option<&[u8]>) -> (u16, Value) {
        self.request(method, &format!("/ui/api{path}"), body, Some(token), &[]).await
    }

    async fn call_bearer(&self, token: &str, method: &str, path: &str, body: Option<&[u8]>) -> (u16, Value) {
        self.request(method, path, body, Some(token), &[]).await
    }

    async fn logs(&self) -> String {
        std::fs::read_to_string(log_path(&self._dir)).unwrap_or_default()
    }

    /// The key the server generated (or `HOOKLINE_API_KEY`) is named `default`.
    fn actor(&self) -> String {
        "key:default".into()
    }

    async fn metrics(&self) -> String {
        // `/metrics` needs a key (a reader's or more, of no tenant).
        self.client
            .get(format!("{}/metrics", self.base))
            .bearer_auth(&self.key)
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .unwrap_or_default()
    }

    /// The POST, or `None` when the process aborted before its answer was
    /// written (the stage that aborts may run before it is).
    async fn post_racing_a_crash(&self, path: &str, body: &Value) -> Option<(u16, Value)> {
        let res =
            self.client.post(format!("{}{}", self.base, path)).bearer_auth(&self.key).json(body).send().await.ok()?;
        let status = res.status().as_u16();
        let bytes = res.bytes().await.ok()?;
        Some((status, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
    }

    /// Restarts the process with the failpoint armed; it aborts there, as
    /// `kill -9` would.
    async fn crash_at(&mut self, failpoint: &str) {
        self.restart_with_failpoint(failpoint);
    }

    /// Waits for the abort, then restarts on the same database.
    async fn recover(&mut self) {
        assert!(self.wait_exit(10), "the armed failpoint aborted the process");
        self.restart(None);
    }

    /// Restarts the process with `HOOKLINE_FAILPOINT=<failpoint>*<times>,…`.
    async fn inject_failures(&mut self, failures: &[(&str, u32)]) {
        let spec: Vec<String> = failures.iter().map(|(f, n)| format!("{f}*{n}")).collect();
        self.restart(Some(&spec.join(",")));
    }

    /// The reconciler runs on its own interval in the process (start the
    /// server with `--reconcile-interval`); this only lets time pass.
    async fn reconcile(&self) {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// Where a server's log (its stderr, across restarts) is written.
fn log_path(dir: &TempDir) -> PathBuf {
    dir.0.join("serve.log")
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
        // A failing test shows what the server logged.
        if std::thread::panicking() {
            let log = std::fs::read_to_string(log_path(&self._dir)).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(200).collect();
            eprintln!("--- hookline serve log (last {} lines) ---", tail.len());
            for l in tail.into_iter().rev() {
                eprintln!("{l}");
            }
        }
    }
}
