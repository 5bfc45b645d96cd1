//! AWS credentials for signing ops requests to a deployment and queue and
//! bus deliveries ([`crate::transport`]), found the way
//! the AWS CLI and SDKs find them, without linking the SDK's configuration
//! loader (which brings the STS client and its own HTTPS stack into a
//! newcomer's first build of `hookline`).
//!
//! The chain, first match wins:
//! 1. `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (and
//!    `AWS_SESSION_TOKEN`) in the environment;
//! 2. the profile (`AWS_PROFILE`, else `default`) in the shared credentials
//!    file (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`), then
//!    in the config file (`AWS_CONFIG_FILE`, else `~/.aws/config`): static
//!    keys, or a `credential_process` whose output is read as the SDKs read
//!    it;
//! 3. the AWS CLI itself, `aws configure export-credentials --format process`,
//!    which resolves everything else the SDK chain does (IAM Identity Center
//!    sign-in, assumed roles, container and instance roles).
//!
//! Secrets never appear in errors: a failing process is reported by its exit
//! status and the first line of what it wrote to stderr.
//!
//! What the chain finds past the environment is kept for the life of the
//! process ([`CredentialsCache`]), until a minute before the `Expiration` a
//! process gave ([`REFRESH_BEFORE_EXPIRY`]): a command that makes many
//! requests (`--all`, `reindex`, `--wait`) runs the process once, not once
//! per request. Environment keys are read afresh each time; there is
//! nothing to save.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use serde::Deserialize;

/// Keys to sign one request with.
#[derive(Clone, PartialEq)]
pub struct Credentials {
    /// The access key id (not secret; it appears in the signature).
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
    /// The session token of temporary credentials.
    pub session_token: Option<String>,
    /// When temporary credentials expire (a process's `Expiration`), if
    /// they do: when [`CredentialsCache`] gets new ones.
    pub expiration: Option<SystemTime>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("expiration", &self.expiration)
            .finish_non_exhaustive()
    }
}

/// Why no credentials were found, naming what was tried.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// Nothing in the chain had credentials.
    #[error(
        "no AWS credentials for profile {profile}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, \
         give the profile keys or a credential_process in {credentials_file} or {config_file}, \
         or install the AWS CLI (v2) so that `aws configure export-credentials` can resolve it ({cli})"
    )]
    NotFound {
        /// The profile looked up.
        profile: String,
        /// The shared credentials file read.
        credentials_file: String,
        /// The config file read.
        config_file: String,
        /// What running the AWS CLI gave.
        cli: String,
    },
    /// A `credential_process` (or the AWS CLI) failed or answered something
    /// that is not credentials.
    #[error("{source_name}: {reason}")]
    Process {
        /// Which process.
        source_name: String,
        /// What went wrong (never its output).
        reason: String,
    },
    /// Only one of the two environment keys is set.
    #[error("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together")]
    HalfSetEnvironment,
}

/// How long before their expiration cached credentials are replaced: a
/// request signed just before they expire may still be checked just after.
pub const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(60);

/// The process's credentials cache, which [`resolve`] goes through.
static CACHE: CredentialsCache = CredentialsCache::new();

/// Resolves credentials from the process environment and the user's files,
/// running a `credential_process` (or the AWS CLI) only when the process has
/// no unexpired credentials from it yet.
pub fn resolve() -> Result<Credentials, CredentialsError> {
    CACHE.resolve_with(&|k| std::env::var(k).ok().filter(|v| !v.is_empty()), SystemTime::now())
}

/// Credentials found past the environment (profile keys, a
/// `credential_process`, the AWS CLI), kept so that the next request does not
/// run the process again: without an expiration for as long as the cache
/// lives, with one until [`REFRESH_BEFORE_EXPIRY`] before it.
#[derive(Debug, Default)]
pub struct CredentialsCache {
    kept: Mutex<Option<Credentials>>,
}

impl CredentialsCache {
    /// An empty cache.
    pub const fn new() -> Self {
        CredentialsCache { kept: Mutex::new(None) }
    }

    /// Environment keys if set (never kept: reading them costs nothing);
    /// else the kept credentials while still fresh at `now`; else the rest
    /// of the chain, whose answer is kept. Concurrent callers wait for one
    /// resolution rather than each running the process.
    pub fn resolve_with(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        now: SystemTime,
    ) -> Result<Credentials, CredentialsError> {
        if let Some(c) = from_environment(env)? {
            return Ok(c);
        }
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = kept.as_ref().filter(|c| fresh(c, now)) {
            return Ok(c.clone());
        }
        let found = from_profile(env)?;
        *kept = Some(found.clone());
        Ok(found)
    }
}

/// Whether `c` can still sign at `now`: no expiration, or one more than
/// [`REFRESH_BEFORE_EXPIRY`] away.
fn fresh(c: &Credentials, now: SystemTime) -> bool {
    match c.expiration {
        Some(at) => now + REFRESH_BEFORE_EXPIRY < at,
        None => true,
    }
}

/// The keys in the environment, if both are set.
fn from_environment(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<Credentials>, CredentialsError> {
    match (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
        (Some(access_key_id), Some(secret_access_key)) => Ok(Some(Credentials {
            access_key_id,
            secret_access_key,
            session_token: env("AWS_SESSION_TOKEN"),
            expiration: None,
        })),
        (Some(_), None) | (None, Some(_)) => Err(CredentialsError::HalfSetEnvironment),
        (None, None) => Ok(None),
    }
}

/// The chain past the environment: the profile's keys, its
/// `credential_process`, else the AWS CLI.
fn from_profile(env: &dyn Fn(&str) -> Option<String>) -> Result<Credentials, CredentialsError> {
    let profile = env("AWS_PROFILE").unwrap_or_else(|| "default".to_string());
    let home = env("HOME").map(PathBuf::from);
    let file = |var: &str, name: &str| {
        env(var).map(PathBuf::from).or_else(|| home.as_ref().map(|h| h.join(".aws").join(name)))
    };
    let credentials_file = file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    let config_file = file("AWS_CONFIG_FILE", "config");
    let read = |p: &Option<PathBuf>| p.as_ref().and_then(|p| std::fs::read_to_string(p).ok()).unwrap_or_default();

    let in_credentials = section(&read(&credentials_file), &profile);
    let config_section = if profile == "default" { "default".to_string() } else { format!("profile {profile}") };
    let in_config = section(&read(&config_file), &config_section);
    for keys in [&in_credentials, &in_config] {
        if let Some(c) = static_keys(keys) {
            return Ok(c);
        }
    }
    if let Some(command) = in_config.iter().find(|(k, _)| k == "credential_process").map(|(_, v)| v.clone()) {
        return run_process("credential_process", shell(&command));
    }
    let mut aws = Command::new("aws");
    aws.args(["configure", "export-credentials", "--format", "process", "--profile", &profile]);
    match aws.output() {
        Ok(out) if out.status.success() => parse_process_output("aws configure export-credentials", &out.stdout),
        Ok(out) => Err(CredentialsError::NotFound {
            profile,
            credentials_file: shown(&credentials_file),
            config_file: shown(&config_file),
            cli: format!("`aws configure export-credentials` {}: {}", out.status, first_line(&out.stderr)),
        }),
        Err(e) => Err(CredentialsError::NotFound {
            profile,
            credentials_file: shown(&credentials_file),
            config_file: shown(&config_file),
            cli: format!("the AWS CLI could not be run: {e}"),
        }),
    }
}

fn shown(p: &Option<PathBuf>) -> String {
    p.as_ref().map_or_else(|| "(no HOME)".to_string(), |p| p.display().to_string())
}

fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string()
}

/// The `key = value` pairs of one `[name]` section of an AWS INI file.
fn section(text: &str, name: &str) -> Vec<(String, String)> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = header.split_whitespace().collect::<Vec<_>>().join(" ") == name;
            continue;
        }
        if inside {
            if let Some((k, v)) = line.split_once('=') {
                out.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
    }
    out
}

fn static_keys(pairs: &[(String, String)]) -> Option<Credentials> {
    let get = |k: &str| pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone()).filter(|v| !v.is_empty());
    Some(Credentials {
        access_key_id: get("aws_access_key_id")?,
        secret_access_key: get("aws_secret_access_key")?,
        session_token: get("aws_session_token"),
        expiration: None,
    })
}

fn shell(command: &str) -> Command {
    if cfg!(windows) {
        let mut c = Command::new("cmd.exe");
        c.args(["/C", command]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", command]);
        c
    }
}

fn run_process(name: &str, mut command: Command) -> Result<Credentials, CredentialsError> {
    let out = command.output().map_err(|e| CredentialsError::Process {
        source_name: name.to_string(),
        reason: format!("could not run: {e}"),
    })?;
    if !out.status.success() {
        return Err(CredentialsError::Process {
            source_name: name.to_string(),
            reason: format!("{}: {}", out.status, first_line(&out.stderr)),
        });
    }
    parse_process_output(name, &out.stdout)
}

/// The `credential_process` output format (version 1).
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ProcessOutput {
    version: u32,
    access_key_id: String,
    secret_access_key: String,
    session_token: Option<String>,
    /// RFC 3339 (`2030-01-01T00:00:00Z`); absent for long-term keys.
    expiration: Option<String>,
}

fn parse_process_output(name: &str, stdout: &[u8]) -> Result<Credentials, CredentialsError> {
    let bad = |reason: String| CredentialsError::Process { source_name: name.to_string(), reason };
    // The error of a failed parse names the field, never the value.
    let p: ProcessOutput = serde_json::from_slice(stdout).map_err(|e| {
        bad(format!("output is not credential_process JSON (line {}, column {})", e.line(), e.column()))
    })?;
    if p.version != 1 {
        return Err(bad(format!("output has Version {}, expected 1", p.version)));
    }
    let expiration = match p.expiration.as_deref().map(str::trim).filter(|e| !e.is_empty()) {
        None => None,
        Some(e) => Some(
            chrono::DateTime::parse_from_rfc3339(e)
                .map_err(|_| bad("output has an Expiration that is not an RFC 3339 time".to_string()))?
                .into(),
        ),
    };
    Ok(Credentials {
        access_key_id: p.access_key_id,
        secret_access_key: p.secret_access_key,
        session_token: p.session_token.filter(|t| !t.is_empty()),
        expiration,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// The whole chain once, with nothing kept from an earlier call.
    fn resolve_with(env: &dyn Fn(&str) -> Option<String>) -> Result<Credentials, CredentialsError> {
        CredentialsCache::new().resolve_with(env, SystemTime::now())
    }

    fn env(pairs: &[(&str, String)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        move |k| map.get(k).cloned()
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hookline-creds-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn environment_keys_come_first() {
        let c = resolve_with(&env(&[
            ("AWS_ACCESS_KEY_ID", "AKIDENV".into()),
            ("AWS_SECRET_ACCESS_KEY", "s".into()),
            ("AWS_SESSION_TOKEN", "tok".into()),
        ]))
        .unwrap();
        assert_eq!(c.access_key_id, "AKIDENV");
        assert_eq!(c.session_token.as_deref(), Some("tok"));
        assert!(matches!(
            resolve_with(&env(&[("AWS_ACCESS_KEY_ID", "AKIDENV".into())])),
            Err(CredentialsError::HalfSetEnvironment)
        ));
    }

    #[test]
    fn profiles_are_read_from_the_credentials_then_the_config_file() {
        let d = dir("files");
        std::fs::write(
            d.join("credentials"),
            "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s1\n\n[ops]\n# comment\naws_access_key_id=AKIDOPS\naws_secret_access_key=s2\naws_session_token = t2\n",
        )
        .unwrap();
        std::fs::write(
            d.join("config"),
            "[profile  cfg]\nregion = eu-west-1\naws_access_key_id = AKIDCFG\naws_secret_access_key = s3\n[profile proc]\ncredential_process = printf '{\"Version\": 1, \"AccessKeyId\": \"AKIDPROC\", \"SecretAccessKey\": \"s4\", \"SessionToken\": \"t4\", \"Expiration\": \"2030-01-01T00:00:00Z\"}'\n[profile broken]\ncredential_process = printf 'not json'\n",
        )
        .unwrap();
        let base = vec![
            ("AWS_SHARED_CREDENTIALS_FILE", d.join("credentials").display().to_string()),
            ("AWS_CONFIG_FILE", d.join("config").display().to_string()),
        ];
        let with = |profile: Option<&str>| {
            let mut e = base.clone();
            if let Some(p) = profile {
                e.push(("AWS_PROFILE", p.to_string()));
            }
            resolve_with(&env(&e))
        };
        assert_eq!(with(None).unwrap().access_key_id, "AKIDDEFAULT");
        let ops = with(Some("ops")).unwrap();
        assert_eq!((ops.access_key_id.as_str(), ops.session_token.as_deref()), ("AKIDOPS", Some("t2")));
        assert_eq!(with(Some("cfg")).unwrap().access_key_id, "AKIDCFG");
        let proc = with(Some("proc")).unwrap();
        assert_eq!((proc.access_key_id.as_str(), proc.secret_access_key.as_str()), ("AKIDPROC", "s4"));
        let err = with(Some("broken")).unwrap_err().to_string();
        assert!(err.starts_with("credential_process: output is not credential_process JSON"), "{err}");
    }

    #[test]
    fn a_failing_process_is_named_without_its_output() {
        let d = dir("fail");
        std::fs::write(
            d.join("config"),
            "[default]\ncredential_process = sh -c 'echo SECRETVALUE; echo token expired >&2; exit 3'\n",
        )
        .unwrap();
        let err = resolve_with(&env(&[
            ("AWS_CONFIG_FILE", d.join("config").display().to_string()),
            ("AWS_SHARED_CREDENTIALS_FILE", d.join("none").display().to_string()),
        ]))
        .unwrap_err()
        .to_string();
        assert!(err.contains("token expired") && err.contains('3'), "{err}");
        assert!(!err.contains("SECRETVALUE"), "{err}");
    }

    /// A profile whose `credential_process` appends a line to a file each
    /// time it runs and answers with `expiration` (none: long-term keys);
    /// the environment that selects it, and the file.
    fn counting_process(name: &str, expiration: Option<&str>) -> (Vec<(&'static str, String)>, PathBuf) {
        let d = dir(name);
        let runs = d.join("runs");
        let field = expiration.map(|e| format!(", \"Expiration\": \"{e}\"")).unwrap_or_default();
        std::fs::write(
            d.join("process.sh"),
            format!(
                "echo run >> '{}'\nprintf '%s' '{{\"Version\": 1, \"AccessKeyId\": \"AKIDPROC\", \"SecretAccessKey\": \"s\", \"SessionToken\": \"t\"{field}}}'\n",
                runs.display()
            ),
        )
        .unwrap();
        std::fs::write(
            d.join("config"),
            format!("[default]\ncredential_process = sh '{}'\n", d.join("process.sh").display()),
        )
        .unwrap();
        let env = vec![
            ("AWS_CONFIG_FILE", d.join("config").display().to_string()),
            ("AWS_SHARED_CREDENTIALS_FILE", d.join("none").display().to_string()),
        ];
        (env, runs)
    }

    fn runs(file: &std::path::Path) -> usize {
        std::fs::read_to_string(file).map(|s| s.lines().count()).unwrap_or(0)
    }

    /// 2030-03-17T17:46:40Z: the tests' clock.
    const NOW: u64 = 1_900_000_000;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn rfc3339(secs: u64) -> String {
        chrono::DateTime::<chrono::Utc>::from(at(secs)).to_rfc3339()
    }

    #[test]
    fn a_credential_process_runs_once_while_its_credentials_last() {
        let (e, file) = counting_process("cache-lasting", Some(&rfc3339(NOW + 3600)));
        let cache = CredentialsCache::new();
        for _ in 0..5 {
            let c = cache.resolve_with(&env(&e), at(NOW)).unwrap();
            assert_eq!((c.access_key_id.as_str(), c.expiration), ("AKIDPROC", Some(at(NOW + 3600))));
        }
        assert_eq!(runs(&file), 1, "five requests, one run");
        // Still more than a minute before the expiration: kept.
        cache.resolve_with(&env(&e), at(NOW + 3600 - 61)).unwrap();
        assert_eq!(runs(&file), 1);
        // Within a minute of it: run again.
        cache.resolve_with(&env(&e), at(NOW + 3600 - 59)).unwrap();
        assert_eq!(runs(&file), 2);
    }

    #[test]
    fn credentials_without_expiration_are_kept_for_the_life_of_the_cache() {
        let (e, file) = counting_process("cache-forever", None);
        let cache = CredentialsCache::new();
        for later in [0, 3600, 86_400 * 365] {
            assert_eq!(cache.resolve_with(&env(&e), at(NOW + later)).unwrap().expiration, None);
        }
        assert_eq!(runs(&file), 1);
        // Another cache (another `hookline` process) runs it again.
        CredentialsCache::new().resolve_with(&env(&e), at(NOW)).unwrap();
        assert_eq!(runs(&file), 2);
    }

    #[test]
    fn expired_or_nearly_expired_credentials_are_fetched_again() {
        for (name, expiration) in [("cache-past", NOW - 10), ("cache-near", NOW + 30)] {
            let (e, file) = counting_process(name, Some(&rfc3339(expiration)));
            let cache = CredentialsCache::new();
            for _ in 0..3 {
                assert_eq!(cache.resolve_with(&env(&e), at(NOW)).unwrap().access_key_id, "AKIDPROC");
            }
            assert_eq!(runs(&file), 3, "{name}: every request runs the process");
        }
    }

    #[test]
    fn environment_keys_are_read_each_time_and_never_kept() {
        let (mut e, file) = counting_process("cache-env", None);
        let cache = CredentialsCache::new();
        e.push(("AWS_ACCESS_KEY_ID", "AKIDONE".into()));
        e.push(("AWS_SECRET_ACCESS_KEY", "s".into()));
        assert_eq!(cache.resolve_with(&env(&e), at(NOW)).unwrap().access_key_id, "AKIDONE");
        e.retain(|(k, _)| *k != "AWS_ACCESS_KEY_ID");
        e.push(("AWS_ACCESS_KEY_ID", "AKIDTWO".into()));
        assert_eq!(cache.resolve_with(&env(&e), at(NOW)).unwrap().access_key_id, "AKIDTWO");
        assert_eq!(runs(&file), 0, "the environment comes first; the process never ran");
        // Without them, the process; set again, the environment wins over what was kept.
        let profile_only: Vec<_> =
            e.iter().filter(|(k, _)| k.starts_with("AWS_") && k.ends_with("FILE")).cloned().collect();
        assert_eq!(cache.resolve_with(&env(&profile_only), at(NOW)).unwrap().access_key_id, "AKIDPROC");
        assert_eq!(cache.resolve_with(&env(&e), at(NOW)).unwrap().access_key_id, "AKIDTWO");
        assert_eq!(runs(&file), 1);
    }

    #[test]
    fn an_unreadable_expiration_is_an_error_without_the_keys() {
        let (e, _) = counting_process("cache-bad-expiration", Some("next tuesday"));
        let err = CredentialsCache::new().resolve_with(&env(&e), at(NOW)).unwrap_err().to_string();
        assert_eq!(err, "credential_process: output has an Expiration that is not an RFC 3339 time");
    }

    #[test]
    fn the_debug_form_hides_the_secret() {
        let c = Credentials {
            access_key_id: "AKID".into(),
            secret_access_key: "hush".into(),
            session_token: None,
            expiration: None,
        };
        assert!(!format!("{c:?}").contains("hush"));
    }
}
