//! The HTTP side of the ops commands: one request to the API (an API key,
//! or SigV4 for a deployment), its answer as JSON, and every failure as an
//! [`OpsError`] whose exit code tells scripts what happened.

use reqwest::Url;
use serde_json::Value;

use super::Target;

/// Why an ops command failed; [`OpsError::exit_code`] is the process's
/// exit status.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// The API refused the request.
    #[error("{status}: {message}{}{}", field.as_deref().map(|f| format!(" (field: {f})")).unwrap_or_default(), hint.as_deref().map(|h| format!("; {h}")).unwrap_or_default())]
    Api {
        /// The HTTP status with its reason phrase (`404 Not Found`).
        status: reqwest::StatusCode,
        /// The API's error code (`not_found`, `invalid_field`, …).
        code: String,
        /// The API's message.
        message: String,
        /// The field the API blamed, if any.
        field: Option<String>,
        /// What the command adds (e.g. where to resume).
        hint: Option<String>,
    },
    /// The command line asks for something impossible (a combination clap
    /// cannot express, a value the CLI checks itself).
    #[error("{0}")]
    Usage(String),
    /// A bulk job ended in the `failed` state.
    #[error("job {id} failed ({error}): {done} done, {failed} failed of {matched} matched")]
    JobFailed {
        /// The job id.
        id: String,
        /// Why, as the job says.
        error: String,
        /// Items acted on.
        done: u64,
        /// Items that failed.
        failed: u64,
        /// Items the filter matched.
        matched: u64,
    },
    /// Stdout was closed (`hookline events list --all | head`): stop quietly.
    #[error("stdout closed")]
    BrokenPipe,
}

/// Exit statuses, as `--help` and docs/operations.md list them.
pub mod exit {
    /// Success.
    pub const OK: u8 = 0;
    /// Anything else: network, authentication, server errors, a failed job.
    pub const OTHER: u8 = 1;
    /// Invalid input: a usage error, or the API's 400 / 422.
    pub const INVALID: u8 = 2;
    /// Not found: the API's 404.
    pub const NOT_FOUND: u8 = 3;
    /// Conflict: the API's 409 (e.g. a dead letter that is not open).
    pub const CONFLICT: u8 = 4;
}

impl OpsError {
    /// The exit status for this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            OpsError::Api { status, .. } => match status.as_u16() {
                400 | 422 => exit::INVALID,
                404 => exit::NOT_FOUND,
                409 => exit::CONFLICT,
                _ => exit::OTHER,
            },
            OpsError::Usage(_) => exit::INVALID,
            OpsError::JobFailed { .. } => exit::OTHER,
            OpsError::BrokenPipe => exit::OK,
        }
    }

    /// The same API error with a hint for the user appended.
    pub fn with_hint(self, h: String) -> Self {
        match self {
            OpsError::Api { status, code, message, field, .. } => {
                OpsError::Api { status, code, message, field, hint: Some(h) }
            }
            other => other,
        }
    }
}

/// The exit status for any error a command returns.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    e.chain().find_map(|c| c.downcast_ref::<OpsError>()).map_or(exit::OTHER, OpsError::exit_code)
}

/// A client of one Hookline API.
pub struct Client {
    http: reqwest::Client,
    target: Target,
}

impl Client {
    /// A client for the target; refuses one without credentials before any
    /// request is made.
    pub fn new(target: &Target) -> anyhow::Result<Self> {
        if target.aws_region.is_none() && target.api_key.is_none() {
            anyhow::bail!(
                "no credentials: pass --api-key (HOOKLINE_API_KEY) for hookline serve, \
                 or --aws-region (HOOKLINE_AWS_REGION) for a deployment"
            );
        }
        Url::parse(&target.url).map_err(|e| OpsError::Usage(format!("--url {}: {e}", target.url)))?;
        Ok(Client { http: reqwest::Client::new(), target: target.clone() })
    }

    /// The URL of `path` (segments, each percent-encoded: an id holding `/`
    /// stays one segment) with the query parameters that have a value, in
    /// SigV4's encoding (`%20` for a space, never `+`; sorted), so that the
    /// URL sent is the one signed ([`super::sigv4::request_url`]).
    pub fn url(&self, path: &[&str], query: &[(&str, Option<String>)]) -> Result<Url, OpsError> {
        let base = Url::parse(&self.target.url).expect("checked in Client::new");
        let given: Vec<(&str, &str)> = query.iter().filter_map(|(k, v)| v.as_deref().map(|v| (*k, v))).collect();
        super::sigv4::request_url(&base, path, &given).map_err(|e| OpsError::Usage(e.to_string()))
    }

    /// `GET` a path with query parameters.
    pub async fn get(&self, path: &[&str], query: &[(&str, Option<String>)]) -> anyhow::Result<Value> {
        self.send("GET", self.url(path, query)?, None).await
    }

    /// A request with a JSON body (`POST`, `PATCH`, `DELETE`).
    pub async fn send_json(&self, method: &str, path: &[&str], body: Option<Value>) -> anyhow::Result<Value> {
        self.send(method, self.url(path, &[])?, body).await
    }

    /// One request; the answer's JSON (`null` for an empty body), or the
    /// API's error as [`OpsError::Api`].
    pub async fn send(&self, method: &str, url: Url, body: Option<Value>) -> anyhow::Result<Value> {
        use anyhow::Context as _;
        let body = body.map(|b| serde_json::to_vec(&b)).transpose()?.unwrap_or_default();
        let mut req = self.http.request(method.parse()?, url.clone()).header("content-type", "application/json");
        match (&self.target.aws_region, &self.target.api_key) {
            (Some(region), _) => {
                use super::sigv4::{sign, Scope, SERVICE};
                // Cached until shortly before they expire: a credential_process
                // runs once per command, not once per request.
                let keys = crate::credentials::resolve()?;
                let scope = Scope { region, service: SERVICE, time: std::time::SystemTime::now() };
                // Signed over `url` itself, which the request sends unchanged.
                let signed = sign(method, &url, &[("content-type", "application/json")], &body, &keys, &scope)?;
                for (name, value) in signed {
                    req = req.header(name, value);
                }
            }
            (None, Some(key)) => req = req.bearer_auth(key),
            (None, None) => unreachable!("checked in Client::new"),
        }
        if let Some(actor) = self.target.acting_as.as_deref().filter(|a| !a.trim().is_empty()) {
            req = req.header("x-actor", actor);
        }
        let res = req.body(body).send().await.with_context(|| format!("calling {url}"))?;
        let status = res.status();
        let bytes = res.bytes().await.with_context(|| format!("reading the answer of {url}"))?;
        let v: Value =
            if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap_or(Value::Null) };
        if !status.is_success() {
            // The API's error body; anything else (API Gateway's own
            // refusal, a proxy's page) is shown by its status alone.
            let e = serde_json::from_slice::<hookline_wire::ErrorBody>(&bytes).ok().map(|b| b.error);
            // Every bad field the API named, not only the first.
            let field = e.as_ref().and_then(|e| match e.errors.len() {
                0 | 1 => e.field.clone(),
                _ => Some(e.errors.iter().map(|i| i.field.as_str()).collect::<Vec<_>>().join(", ")),
            });
            return Err(OpsError::Api {
                status,
                code: e.as_ref().map_or("", |e| e.code.as_str()).to_string(),
                message: e.map_or_else(|| "request failed".to_string(), |e| e.message),
                field,
                hint: None,
            }
            .into());
        }
        Ok(v)
    }
}

/// An answer read as its wire type (`hookline_wire`), so that a field
/// renamed or retyped on either side is an error naming it, not a blank
/// column.
pub fn read<T: serde::de::DeserializeOwned>(v: Value) -> anyhow::Result<T> {
    use anyhow::Context as _;
    let text = v.to_string();
    serde_json::from_value(v).with_context(|| format!("the API's answer is not what this hookline reads: {text}"))
}

/// A wire type as the JSON the printers take.
pub fn json(v: &impl serde::Serialize) -> Value {
    serde_json::to_value(v).expect("wire types serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16) -> OpsError {
        OpsError::Api {
            status: reqwest::StatusCode::from_u16(status).unwrap(),
            code: "x".into(),
            message: "m".into(),
            field: Some("reason".into()),
            hint: None,
        }
    }

    #[test]
    fn exit_codes_tell_invalid_not_found_and_conflict_apart() {
        assert_eq!(api(400).exit_code(), 2);
        assert_eq!(api(422).exit_code(), 2);
        assert_eq!(api(404).exit_code(), 3);
        assert_eq!(api(409).exit_code(), 4);
        assert_eq!(api(401).exit_code(), 1);
        assert_eq!(api(503).exit_code(), 1);
        assert_eq!(OpsError::Usage("u".into()).exit_code(), 2);
        assert_eq!(exit_code(&anyhow::anyhow!("network")), 1);
        assert_eq!(exit_code(&anyhow::Error::from(api(404)).context("while x")), 3);
    }

    #[test]
    fn api_errors_name_status_field_and_hint() {
        assert_eq!(api(400).to_string(), "400 Bad Request: m (field: reason)");
        assert_eq!(api(400).with_hint("resume".into()).to_string(), "400 Bad Request: m (field: reason); resume");
    }

    #[test]
    fn urls_encode_each_segment_and_skip_absent_parameters() {
        let t = Target { url: "http://h:1/prod/".into(), api_key: Some("k".into()), aws_region: None, acting_as: None };
        let c = Client::new(&t).unwrap();
        let u = c.url(&["v1", "events", "a/b c"], &[("tenant_id", Some("t 1&x".into())), ("since", None)]).unwrap();
        assert_eq!(u.as_str(), "http://h:1/prod/v1/events/a%2Fb%20c?tenant_id=t%201%26x");
        assert!(matches!(c.url(&["v1", "events", "."], &[]), Err(OpsError::Usage(_))));
    }
}
