//! Settings, declared once and read one way on both backends.
//!
//! [`SETTINGS`] is the one declaration of every setting: its name (the
//! environment variable a Lambda function reads), `hookline serve`'s flag
//! for it, what values it takes, its default and its help. Everything else
//! is read from it: [`Config::from_lookup`] parses every value (a given one,
//! or else the declared default) by its declaration, validates the retry
//! policy they make together, and reports every bad value at once, each
//! with its name; `hookline serve` generates its flags from the table
//! (falling back to the same variables); `docs/settings.md`'s table is
//! tested against it. A function with a bad setting fails its init with
//! that message; `hookline serve` exits with it.

use std::collections::HashMap;
use std::time::Duration;

use crate::context::Config;
use crate::retry::RetryPolicy;
use crate::ssrf::AddressPolicy;
use crate::stage::reconcile::ReconcileLimits;

/// What values a setting takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A whole number in `min..=max`.
    Number {
        /// The smallest accepted value.
        min: u64,
        /// The largest accepted value.
        max: u64,
    },
    /// A duration: a whole number and a unit (`30d`, `12h`, `5m`, `90s`,
    /// `500ms`), at most 36500d ([`crate::duration::parse_retention`]).
    Duration,
    /// On or off: `true`, `1`, `yes`, `on` or `false`, `0`, `no`, `off`.
    Switch,
    /// IAM principal ARNs separated by commas (AWS only).
    Principals,
    /// SQS queue and EventBridge bus ARNs separated by commas, or `none`
    /// ([`crate::destination`]).
    Destinations,
}

impl Kind {
    /// The values it takes, as the docs' table writes them.
    pub fn describe(&self) -> String {
        match self {
            Kind::Number { min, max } => format!("{min} to {max}"),
            Kind::Duration => "a duration".to_string(),
            Kind::Switch => "true or false".to_string(),
            Kind::Principals => "IAM ARNs, comma-separated".to_string(),
            Kind::Destinations => "queue and bus ARNs, comma-separated, or `none`".to_string(),
        }
    }
}

/// A setting's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultValue {
    /// This value, written as it would be given (parsed like a given one).
    Value(&'static str),
    /// Computed from other settings, as described (e.g. twice RETENTION).
    Derived(&'static str),
    /// None: the setting is only an alternative spelling of another.
    Unset,
}

impl DefaultValue {
    /// The default as the docs' table writes it.
    pub fn describe(&self) -> String {
        match self {
            DefaultValue::Value(v) => format!("`{v}`"),
            DefaultValue::Derived(d) => d.to_string(),
            DefaultValue::Unset => "—".to_string(),
        }
    }
}

/// One setting, as [`SETTINGS`] declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// Its name: the environment variable (and the lookup key of
    /// [`Config::from_lookup`]).
    pub key: &'static str,
    /// `hookline serve`'s flag for it (which falls back to the variable).
    pub flag: &'static str,
    /// What values it takes.
    pub kind: Kind,
    /// Its default.
    pub default: DefaultValue,
    /// What it sets, for help texts and the docs.
    pub help: &'static str,
    /// Set when this is an older spelling of another setting (by key): its
    /// flag is hidden and cannot be given together with the other's.
    pub older_spelling_of: Option<&'static str>,
}

/// Declares each setting once: a `pub const` named by its key, and
/// [`SETTINGS`] listing them all in order.
macro_rules! settings {
    ($($key:ident: $flag:literal, $kind:expr, $default:expr, $help:literal $(, older spelling of $of:ident)?;)*) => {
        $(
            #[doc = concat!("`", stringify!($key), "` (`", $flag, "`): ", $help, ".")]
            pub const $key: Setting = Setting {
                key: stringify!($key),
                flag: $flag,
                kind: $kind,
                default: $default,
                help: $help,
                older_spelling_of: settings!(@of $($of)?),
            };
        )*
        /// Every setting, in the order [`Config::from_lookup`] reports
        /// problems: the one declaration the parser, `hookline serve`'s
        /// flags and the docs read.
        pub const SETTINGS: &[Setting] = &[$($key),*];
    };
    (@of) => { None };
    (@of $of:ident) => { Some(stringify!($of)) };
}

use DefaultValue::{Derived, Unset, Value};
use Kind::{Number, Switch};

settings! {
    RETENTION: "--retention", Kind::Duration, Value("30d"),
        "how long events, sagas and attempts are kept for replay";
    RETENTION_DAYS: "--retention-days", Number { min: 1, max: 36_500 }, Unset,
        "the retention in whole days", older spelling of RETENTION;
    DEAD_LETTER_RETENTION: "--dead-letter-retention", Kind::Duration, Derived("twice RETENTION"),
        "how long resolved dead letters are kept (open ones always are); at least RETENTION";
    MAX_ATTEMPTS: "--max-attempts", Number { min: 1, max: 100 }, Value("6"),
        "attempts of the default retry policy";
    RETRY_BASE_MS: "--retry-base-ms", Number { min: 1, max: 86_400_000 }, Value("30000"),
        "first wait of the default retry policy, ms";
    RETRY_CAP_MS: "--retry-cap-ms", Number { min: 1, max: 86_400_000 }, Value("3600000"),
        "longest wait of the default retry policy, ms";
    CONNECT_TIMEOUT_MS: "--connect-timeout-ms", Number { min: 1, max: 600_000 }, Value("5000"),
        "connect timeout of a delivery, ms";
    DELIVERY_TIMEOUT_MS: "--delivery-timeout-ms", Number { min: 1, max: 900_000 }, Value("15000"),
        "total timeout of a delivery attempt, ms";
    RECONCILE_MAX_BATCHES: "--reconcile-max-batches", Number { min: 1, max: 1000 }, Value("10"),
        "given-up stream batches the reconciler takes at a time";
    RECONCILE_BUDGET_SECS: "--reconcile-budget-secs", Number { min: 1, max: 840 }, Value("60"),
        "seconds a reconciler run may spend draining given-up stream batches";
    RECONCILE_MAX_SAGAS: "--reconcile-max-sagas", Number { min: 1, max: 10_000 }, Value("100"),
        "stalled sagas the reconciler re-drives per run";
    RECONCILE_STALL_MARGIN: "--stall-margin", Kind::Duration, Value("1h"),
        "how long past its due time a retrying saga counts as stalled";
    BREAKER_FAILURES: "--breaker-failures", Number { min: 1, max: 1000 }, Value("5"),
        "consecutive failures (timeouts, connection errors, 5xx, 408, 429) that open a subscription's circuit breaker";
    BREAKER_COOL_DOWN_MS: "--breaker-cool-down-ms", Number { min: 1, max: 86_400_000 }, Value("30000"),
        "how long an open breaker waits before its one probe, ms; doubles after each failed probe";
    BREAKER_MAX_COOL_DOWN_MS: "--breaker-max-cool-down-ms", Number { min: 1, max: 86_400_000 }, Value("1800000"),
        "the longest cool-down of an open breaker, ms; at least BREAKER_COOL_DOWN_MS";
    AUDIT_RETENTION: "--audit-retention", Kind::Duration, Value("365d"),
        "how long audit records are kept";
    DISABLE_AFTER: "--disable-after", Kind::Duration, Value("5d"),
        "a subscription whose deliveries have all failed for this long is disabled";
    TRUST_ACTOR_HEADER: "--trust-actor-header", Switch, Value("false"),
        "record the X-Actor request header in the audit trail after the credential (only where every caller is a trusted system acting for people)";
    BULK_PAGE_SIZE: "--bulk-page-size", Number { min: 1, max: 1000 }, Value("100"),
        "dead letters or events a bulk job handles per step";
    JOBS_PER_TENANT: "--jobs-per-tenant", Number { min: 1, max: 1000 }, Value("4"),
        "bulk and replay jobs running at once per tenant (one more is 429 with Retry-After)";
    JOB_MAX_ITEMS: "--job-max-items", Number { min: 1, max: 10_000_000 }, Value("10000"),
        "most dead letters or events one bulk or replay job may take (counted before it starts; a larger one is 422)";
    ADMIN_PRINCIPALS: "--admin-principals", Kind::Principals, Value(""),
        "IAM principals (user or role ARNs) that are admins without a grant in the key store: the bootstrap of an AWS deployment (`hookline serve` refuses any)";
    STRICT_CATALOG: "--strict-catalog", Switch, Value("false"),
        "refuse (422 on the type) events whose type is not registered in the event catalog";
    EVENT_LISTING: "--event-listing", Switch, Value("true"),
        "list events by time and by tenant (`GET /v1/events` without `partition_key` or `outcome`, replays of a time range); off, those are refused (409 `listing_off`) and, on AWS, an event costs two index writes less";
    DESTINATION_ARNS: "--destination-arns", Kind::Destinations, Value(""),
        "the SQS queues and EventBridge buses subscriptions may deliver to (empty: any; `none`: no queue or bus); on AWS the template sets it to the queues and buses the delivery role is granted";
}

/// The declaration of the setting named `key`.
pub fn setting(key: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.key == key)
}

/// The flags of a problem's name ([`ConfigError::problems`]): one
/// setting's, or several joined by `/` for a problem of several settings
/// together (`--max-attempts/--retry-cap-ms`).
pub fn flags_of(problem_key: &str) -> String {
    problem_key.split('/').map(|k| setting(k).map_or(k, |s| s.flag)).collect::<Vec<_>>().join("/")
}

/// Every bad setting found, each with its name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid settings: {}", .problems.iter().map(|(k, m)| format!("{k}: {m}")).collect::<Vec<_>>().join("; "))]
pub struct ConfigError {
    /// `(setting name, what is wrong)`, in the order of [`SETTINGS`], then
    /// the problems of several settings together.
    pub problems: Vec<(String, String)>,
}

/// A value parsed by its declaration.
#[derive(Debug, Clone)]
enum Parsed {
    Number(u64),
    Duration(chrono::Duration),
    Switch(bool),
    Principals(Vec<String>),
    /// The allowed queue and bus ARNs; `None`: no list (any).
    Destinations(Option<Vec<String>>),
}

/// Parses `text` as `s` declares.
fn parse(s: &Setting, text: &str) -> Result<Parsed, String> {
    match s.kind {
        Kind::Number { min, max } => match text.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(Parsed::Number(n)),
            _ => Err(format!("must be a whole number from {min} to {max}, got {text:?}")),
        },
        Kind::Duration => crate::duration::parse_retention(text).map(Parsed::Duration).map_err(|e| e.to_string()),
        Kind::Switch => match text.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(Parsed::Switch(true)),
            "false" | "0" | "no" | "off" => Ok(Parsed::Switch(false)),
            _ => Err(format!("must be true or false, got {text:?}")),
        },
        Kind::Principals => text
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                crate::api_key::check_principal(p)
                    .map(|()| p.to_string())
                    .map_err(|e| format!("{}: {e}", crate::envelope::show(p)))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Parsed::Principals),
        Kind::Destinations if text.eq_ignore_ascii_case("none") => Ok(Parsed::Destinations(Some(Vec::new()))),
        Kind::Destinations => text
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(|a| match crate::destination::parse(a) {
                Ok(d) if d.arn().is_some() => Ok(a.to_string()),
                Ok(_) => Err(format!("{}: not a queue or bus ARN", crate::envelope::show(a))),
                Err(e) => Err(e.to_string()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|list| Parsed::Destinations(if list.is_empty() { None } else { Some(list) })),
    }
}

/// Every setting parsed by its declaration: the given values and the
/// declared defaults, and the problems found.
struct Values {
    given: HashMap<&'static str, Parsed>,
    defaults: HashMap<&'static str, Parsed>,
    problems: Vec<(String, String)>,
}

impl Values {
    /// Parses every setting of [`SETTINGS`]: the value `get` returns
    /// (trimmed; blank is unset) and the declared default.
    fn read(get: &dyn Fn(&str) -> Option<String>) -> Values {
        let mut v = Values { given: HashMap::new(), defaults: HashMap::new(), problems: Vec::new() };
        for s in SETTINGS {
            if let DefaultValue::Value(d) = s.default {
                match parse(s, d) {
                    Ok(p) => drop(v.defaults.insert(s.key, p)),
                    Err(m) => v.bad(s.key, format!("the declared default is invalid: {m}")),
                }
            }
            let Some(text) = get(s.key).map(|t| t.trim().to_string()).filter(|t| !t.is_empty()) else { continue };
            match parse(s, &text) {
                Ok(p) => drop(v.given.insert(s.key, p)),
                Err(m) => v.bad(s.key, m),
            }
        }
        v
    }

    fn bad(&mut self, key: &str, message: impl Into<String>) {
        self.problems.push((key.to_string(), message.into()));
    }

    /// Whether `s` was given (and valid).
    fn given(&self, s: &Setting) -> bool {
        self.given.contains_key(s.key)
    }

    /// The given value of `s`, or else its declared default.
    fn get(&self, s: &Setting) -> Option<Parsed> {
        self.given.get(s.key).or_else(|| self.defaults.get(s.key)).cloned()
    }

    /// A number setting (0 only when its declaration is broken, which is
    /// then reported).
    fn number(&self, s: &Setting) -> u64 {
        match self.get(s) {
            Some(Parsed::Number(n)) => n,
            _ => 0,
        }
    }

    /// A duration setting, if given or declared with a default.
    fn duration(&self, s: &Setting) -> Option<chrono::Duration> {
        match self.get(s) {
            Some(Parsed::Duration(d)) => Some(d),
            _ => None,
        }
    }

    /// A switch setting.
    fn switch(&self, s: &Setting) -> bool {
        matches!(self.get(s), Some(Parsed::Switch(true)))
    }
}

impl Config {
    /// The settings `get` returns (by [`SETTINGS`] key), on top of the
    /// declared defaults; every bad value is reported at once.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let mut r = Values::read(&get);
        let retention = match (r.given(&RETENTION), r.given(&RETENTION_DAYS)) {
            (false, true) => chrono::Duration::days(r.number(&RETENTION_DAYS) as i64),
            _ => r.duration(&RETENTION).unwrap_or_default(),
        };
        let dead_letter_retention = r.duration(&DEAD_LETTER_RETENTION).unwrap_or(retention * 2);
        if dead_letter_retention < retention {
            r.bad(DEAD_LETTER_RETENTION.key, "must be at least RETENTION (a dead letter outlives its event)");
        }
        let policy = RetryPolicy {
            max_attempts: r.number(&MAX_ATTEMPTS) as u32,
            base_delay_ms: r.number(&RETRY_BASE_MS),
            max_delay_ms: r.number(&RETRY_CAP_MS),
            schedule_ms: None,
        };
        // A policy set here must fit the retention (as one set through the
        // API must); the declared default is kept even with a short test
        // retention, as it was.
        let set_here = [&MAX_ATTEMPTS, &RETRY_BASE_MS, &RETRY_CAP_MS].iter().any(|s| r.given(s));
        if let Err(e) = policy.validate() {
            r.bad("MAX_ATTEMPTS/RETRY_BASE_MS/RETRY_CAP_MS", e.to_string());
        } else if set_here {
            if let Err(e) = policy.check_fits_retention(retention) {
                r.bad("MAX_ATTEMPTS/RETRY_CAP_MS", format!("{e} (RETENTION)"));
            }
        }
        let http = crate::http_client::ClientConfig {
            connect_timeout: Duration::from_millis(r.number(&CONNECT_TIMEOUT_MS)),
            total_timeout: Duration::from_millis(r.number(&DELIVERY_TIMEOUT_MS)),
            ..crate::http_client::ClientConfig::default()
        };
        let reconcile = ReconcileLimits {
            max_batches: r.number(&RECONCILE_MAX_BATCHES) as usize,
            budget: Duration::from_secs(r.number(&RECONCILE_BUDGET_SECS)),
            max_sagas: r.number(&RECONCILE_MAX_SAGAS) as usize,
            stall_margin: r.duration(&RECONCILE_STALL_MARGIN).unwrap_or_default(),
        };
        let breaker = crate::health::BreakerPolicy {
            failure_threshold: r.number(&BREAKER_FAILURES) as u32,
            cool_down: Duration::from_millis(r.number(&BREAKER_COOL_DOWN_MS)),
            max_cool_down: Duration::from_millis(r.number(&BREAKER_MAX_COOL_DOWN_MS)),
            // A probe may take two attempts' time before another worker
            // may probe.
            probe_timeout: http.total_timeout * 2 + Duration::from_secs(5),
        };
        if breaker.max_cool_down < breaker.cool_down {
            r.bad(BREAKER_MAX_COOL_DOWN_MS.key, "must be at least BREAKER_COOL_DOWN_MS");
        }
        let audit_retention = r.duration(&AUDIT_RETENTION).unwrap_or_default();
        let disable_after = r.duration(&DISABLE_AFTER).unwrap_or_default();
        if !r.problems.is_empty() {
            return Err(ConfigError { problems: r.problems });
        }
        Ok(Config {
            retention,
            dead_letter_retention,
            default_retry_policy: policy,
            // A job stays invisible well past one attempt's timeout, so a
            // live worker never loses it to another.
            delivery_visibility: http.total_timeout * 2 + Duration::from_secs(5),
            http,
            reconcile,
            breaker,
            audit_retention,
            disable_after,
            trust_actor_header: r.switch(&TRUST_ACTOR_HEADER),
            bulk_page_size: r.number(&BULK_PAGE_SIZE) as usize,
            jobs_per_tenant: r.number(&JOBS_PER_TENANT) as usize,
            job_max_items: r.number(&JOB_MAX_ITEMS),
            admin_principals: match r.get(&ADMIN_PRINCIPALS) {
                Some(Parsed::Principals(p)) => p,
                _ => Vec::new(),
            },
            strict_catalog: r.switch(&STRICT_CATALOG),
            event_listing: r.switch(&EVENT_LISTING),
            allowed_destinations: match r.get(&DESTINATION_ARNS) {
                Some(Parsed::Destinations(d)) => d,
                _ => None,
            },
            max_body_bytes: MAX_BODY_BYTES,
            max_batch: MAX_BATCH,
            address_policy: AddressPolicy::PublicOnly,
            rotation_overlap: crate::subscription::DEFAULT_ROTATION_OVERLAP,
            subscription_cache_ttl: SUBSCRIPTION_CACHE_TTL,
        })
    }

    /// [`Config::from_lookup`] on the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|k| std::env::var(k).ok())
    }

    /// Every setting at its declared default ([`Config`]'s `Default`).
    pub fn declared_defaults() -> Config {
        Config::from_lookup(|_| None).expect("the declared defaults are valid (tested)")
    }
}

/// Largest accepted request body (not a setting).
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// Largest batch of events in one request (not a setting).
pub const MAX_BATCH: usize = 100;
/// How long the subscription cache trusts what it read (not a setting).
pub const SUBSCRIPTION_CACHE_TTL: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults_hold_once() {
        let c = config(&[]).unwrap();
        let d = Config::default();
        assert!(config(&[("RETENTION", "2s")]).is_ok(), "the default policy is kept with a short retention");
        assert_eq!((c.retention, c.dead_letter_retention), (d.retention, d.retention * 2));
        assert_eq!(c.default_retry_policy, RetryPolicy::default());
        assert_eq!(c.reconcile, ReconcileLimits::default());
        assert_eq!(c.http.total_timeout, Duration::from_secs(15));
    }

    #[test]
    fn values_are_read() {
        let c = config(&[
            ("RETENTION", "12h"),
            ("MAX_ATTEMPTS", "3"),
            ("RETRY_BASE_MS", "100"),
            ("RETRY_CAP_MS", "1000"),
            ("RECONCILE_STALL_MARGIN", "5m"),
        ])
        .unwrap();
        assert_eq!(c.retention, chrono::Duration::hours(12));
        assert_eq!(c.dead_letter_retention, chrono::Duration::hours(24));
        assert_eq!(
            c.default_retry_policy,
            RetryPolicy { max_attempts: 3, base_delay_ms: 100, max_delay_ms: 1000, schedule_ms: None }
        );
        assert_eq!(c.reconcile.stall_margin, chrono::Duration::minutes(5));
        assert_eq!(config(&[("RETENTION_DAYS", "7")]).unwrap().retention, chrono::Duration::days(7));
        assert_eq!(config(&[]).unwrap().bulk_page_size, 100, "the declared default");
        assert_eq!(config(&[("BULK_PAGE_SIZE", "10")]).unwrap().bulk_page_size, 10);
    }

    #[test]
    fn every_bad_value_is_reported_at_once_with_its_name() {
        let e = config(&[
            ("MAX_ATTEMPTS", "abc"),
            ("RETENTION", "30"),
            ("RECONCILE_MAX_SAGAS", "0"),
            ("DELIVERY_TIMEOUT_MS", "-1"),
        ])
        .unwrap_err();
        let keys: Vec<&str> = e.problems.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["RETENTION", "MAX_ATTEMPTS", "DELIVERY_TIMEOUT_MS", "RECONCILE_MAX_SAGAS"], "{e}");
        assert!(e.to_string().contains("MAX_ATTEMPTS: must be a whole number from 1 to 100, got \"abc\""), "{e}");
    }

    #[test]
    fn destination_arns_are_a_list_none_or_unset() {
        assert_eq!(config(&[]).unwrap().allowed_destinations, None, "any queue or bus by default");
        assert_eq!(config(&[("DESTINATION_ARNS", "none")]).unwrap().allowed_destinations, Some(vec![]));
        let q = "arn:aws:sqs:us-east-1:123456789012:q";
        let b = "arn:aws:events:us-east-1:123456789012:event-bus/b";
        let c = config(&[("DESTINATION_ARNS", &format!(" {q} ,{b},"))]).unwrap();
        assert_eq!(c.allowed_destinations, Some(vec![q.to_string(), b.to_string()]));
        let e = config(&[("DESTINATION_ARNS", "https://a.example")]).unwrap_err();
        assert_eq!(e.problems[0].0, "DESTINATION_ARNS", "{e}");
        assert!(config(&[("DESTINATION_ARNS", "arn:aws:sns:us-east-1:123456789012:t")]).is_err());
    }

    #[test]
    fn the_retry_policy_is_validated_as_a_whole() {
        let e = config(&[("RETRY_BASE_MS", "5000"), ("RETRY_CAP_MS", "1000")]).unwrap_err();
        assert!(e.problems[0].0.contains("RETRY_CAP_MS"), "{e}");
        let e = config(&[("RETENTION", "1h"), ("MAX_ATTEMPTS", "10"), ("RETRY_CAP_MS", "3600000")]).unwrap_err();
        assert!(e.to_string().contains("RETENTION"), "a schedule longer than the retention: {e}");
        let e = config(&[("RETENTION", "10d"), ("DEAD_LETTER_RETENTION", "5d")]).unwrap_err();
        assert_eq!(e.problems[0].0, "DEAD_LETTER_RETENTION");
    }
}

/// The declaration against the struct defaults and the docs.
#[cfg(test)]
mod declaration {
    use super::*;

    #[test]
    fn every_setting_has_one_name_and_one_flag() {
        for (i, s) in SETTINGS.iter().enumerate() {
            assert!(s.flag.starts_with("--") && !s.help.is_empty(), "{s:?}");
            for t in &SETTINGS[i + 1..] {
                assert!(s.key != t.key && s.flag != t.flag, "{s:?} and {t:?}");
            }
            if let Some(of) = s.older_spelling_of {
                assert!(setting(of).is_some(), "{} is an older spelling of an undeclared {of}", s.key);
            }
        }
        assert_eq!(flags_of("MAX_ATTEMPTS/RETRY_CAP_MS"), "--max-attempts/--retry-cap-ms");
    }

    /// Every declared default parses, and matches what the stages' own
    /// structs take when built without settings.
    #[test]
    fn declared_defaults_are_valid_and_agree_with_the_structs() {
        let c = Config::from_lookup(|_| None).unwrap();
        assert_eq!(c.default_retry_policy, RetryPolicy::default());
        assert_eq!(c.reconcile, ReconcileLimits::default());
        let b = crate::health::BreakerPolicy::default();
        assert_eq!(
            (c.breaker.failure_threshold, c.breaker.cool_down, c.breaker.max_cool_down),
            (b.failure_threshold, b.cool_down, b.max_cool_down)
        );
        let h = crate::http_client::ClientConfig::default();
        assert_eq!((c.http.connect_timeout, c.http.total_timeout), (h.connect_timeout, h.total_timeout));
        assert_eq!((c.retention, c.dead_letter_retention), (chrono::Duration::days(30), chrono::Duration::days(60)));
        assert_eq!((c.audit_retention, c.disable_after), (chrono::Duration::days(365), chrono::Duration::days(5)));
        assert_eq!((c.trust_actor_header, c.bulk_page_size), (false, 100));
    }

    #[test]
    fn admin_principals_are_a_list_of_arns() {
        let c = |v: &str| {
            let v = v.to_string();
            Config::from_lookup(move |q| (q == "ADMIN_PRINCIPALS").then(|| v.clone()))
        };
        assert!(Config::default().admin_principals.is_empty(), "none by default");
        let arns = c(" arn:aws:iam::1:role/ops , arn:aws:iam::1:user/alice,").unwrap().admin_principals;
        assert_eq!(arns, ["arn:aws:iam::1:role/ops", "arn:aws:iam::1:user/alice"]);
        let e = c("arn:aws:iam::1:role/ops,alice").unwrap_err();
        assert_eq!(e.problems.len(), 1);
        assert_eq!(e.problems[0].0, "ADMIN_PRINCIPALS");
        assert!(e.problems[0].1.contains("`alice`"), "{:?}", e.problems);
        assert!(c("arn:aws:iam::1:user/a b").is_err(), "no spaces inside an ARN");
    }

    #[test]
    fn switches_and_the_bulk_page_size_are_read() {
        let c = |k: &str, v: &str| {
            let (k, v) = (k.to_string(), v.to_string());
            Config::from_lookup(move |q| (q == k).then(|| v.clone()))
        };
        for on in ["true", "1", "yes", " TRUE "] {
            assert!(c("TRUST_ACTOR_HEADER", on).unwrap().trust_actor_header, "{on}");
        }
        for off in ["false", "0", "no", ""] {
            assert!(!c("TRUST_ACTOR_HEADER", off).unwrap().trust_actor_header, "{off}");
        }
        let e = c("TRUST_ACTOR_HEADER", "maybe").unwrap_err();
        assert_eq!(e.problems, [("TRUST_ACTOR_HEADER".into(), "must be true or false, got \"maybe\"".into())]);
        assert_eq!(c("BULK_PAGE_SIZE", "250").unwrap().bulk_page_size, 250);
        assert!(c("BULK_PAGE_SIZE", "1001").unwrap_err().to_string().contains("from 1 to 1000"));
    }

    /// The row `docs/settings.md` must have for `s`: variable, flag,
    /// default, values; its last cell ("what") starts with the help.
    fn expected_row(s: &Setting) -> [String; 4] {
        [format!("`{}`", s.key), format!("`{}`", s.flag), s.default.describe(), s.kind.describe()]
    }

    /// `docs/settings.md`'s settings table lists every declared setting in
    /// order, with its flag, default, values and help, and nothing else.
    #[test]
    fn the_docs_table_matches_the_declaration() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/settings.md");
        let doc = std::fs::read_to_string(path).unwrap();
        // Rows whose first cell is a variable (`UPPER_CASE`).
        let rows: Vec<Vec<String>> = doc
            .lines()
            .filter(|l| l.starts_with("| `") && l[3..].starts_with(|c: char| c.is_ascii_uppercase()))
            .map(|l| l.trim().trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect())
            .collect();
        let mut problems = Vec::new();
        for (i, s) in SETTINGS.iter().enumerate() {
            let want = expected_row(s);
            match rows.get(i) {
                Some(row) if row.len() == 5 && row[..4] == want[..] && row[4].starts_with(s.help) => {}
                Some(row) => problems.push(format!("row {}: {row:?}\n   want: {want:?} then {:?}…", i + 1, s.help)),
                None => problems.push(format!("missing row for {}", s.key)),
            }
        }
        for row in rows.iter().skip(SETTINGS.len()) {
            problems.push(format!("row not declared in SETTINGS: {row:?}"));
        }
        let table: Vec<String> =
            SETTINGS.iter().map(|s| format!("| {} | {} |", expected_row(s).join(" | "), s.help)).collect();
        assert!(
            problems.is_empty(),
            "docs/settings.md does not match config::SETTINGS:\n{}\n\nthe declared table:\n{}",
            problems.join("\n"),
            table.join("\n")
        );
    }
}
