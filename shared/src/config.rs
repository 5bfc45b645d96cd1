//! Settings, read one way on both backends: [`Config::from_lookup`] takes a
//! lookup function (the environment of a Lambda function; `hookline serve`'s
//! flags, which fall back to the same variables), holds every default once,
//! validates each value and the retry policy they make together, and reports
//! every bad value at once, each with its name. A function with a bad
//! setting fails its init with that message; `hookline serve` exits with it.

use std::time::Duration;

use crate::context::Config;
use crate::retry::RetryPolicy;
use crate::stage::reconcile::ReconcileLimits;

/// One setting: its variable name, what it is, and its default as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The environment variable (and the lookup key).
    pub key: &'static str,
    /// What it sets, for help texts.
    pub help: &'static str,
    /// The default, as it would be written.
    pub default: &'static str,
}

/// Every setting [`Config::from_lookup`] reads.
pub const SETTINGS: &[Setting] = &[
    Setting {
        key: "RETENTION",
        help: "how long events, sagas and attempts are kept (a duration: 30d, 12h, 5m)",
        default: "30d",
    },
    Setting { key: "RETENTION_DAYS", help: "the retention in whole days (older spelling of RETENTION)", default: "" },
    Setting {
        key: "DEAD_LETTER_RETENTION",
        help: "how long resolved dead letters are kept (at least RETENTION)",
        default: "twice RETENTION",
    },
    Setting { key: "MAX_ATTEMPTS", help: "attempts of the default retry policy", default: "6" },
    Setting { key: "RETRY_BASE_MS", help: "first wait of the default retry policy, ms", default: "30000" },
    Setting { key: "RETRY_CAP_MS", help: "longest wait of the default retry policy, ms", default: "3600000" },
    Setting { key: "CONNECT_TIMEOUT_MS", help: "connect timeout of a delivery, ms", default: "5000" },
    Setting { key: "DELIVERY_TIMEOUT_MS", help: "total timeout of a delivery attempt, ms", default: "15000" },
    Setting {
        key: "RECONCILE_MAX_BATCHES",
        help: "given-up stream batches the reconciler takes at a time",
        default: "10",
    },
    Setting {
        key: "RECONCILE_BUDGET_SECS",
        help: "seconds a reconciler run may spend draining given-up stream batches",
        default: "60",
    },
    Setting { key: "RECONCILE_MAX_SAGAS", help: "stalled sagas the reconciler re-drives per run", default: "100" },
    Setting {
        key: "RECONCILE_STALL_MARGIN",
        help: "how long past its due time a saga counts as stalled",
        default: "1h",
    },
    Setting {
        key: "BREAKER_FAILURES",
        help: "consecutive failures (timeouts, connection errors, 5xx, 408, 429) that open a subscription's breaker",
        default: "5",
    },
    Setting {
        key: "BREAKER_COOL_DOWN_MS",
        help: "how long an open breaker waits before its probe, ms (doubles after a failed probe)",
        default: "30000",
    },
    Setting {
        key: "BREAKER_MAX_COOL_DOWN_MS",
        help: "the longest cool-down of an open breaker, ms",
        default: "1800000",
    },
    Setting { key: "AUDIT_RETENTION", help: "how long audit records are kept (a duration: 365d)", default: "365d" },
    Setting {
        key: "DISABLE_AFTER",
        help: "a subscription whose deliveries have all failed for this long is disabled (a duration: 5d)",
        default: "5d",
    },
    Setting { key: "BULK_PAGE_SIZE", help: "the most items one page of a bulk job acts on", default: "100" },
];

/// Every bad setting found, each with its name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid settings: {}", .problems.iter().map(|(k, m)| format!("{k}: {m}")).collect::<Vec<_>>().join("; "))]
pub struct ConfigError {
    /// `(setting name, what is wrong)`, in the order of [`SETTINGS`].
    pub problems: Vec<(String, String)>,
}

/// Collects problems while parsing.
struct Reader<'a> {
    get: &'a dyn Fn(&str) -> Option<String>,
    problems: Vec<(String, String)>,
}

impl Reader<'_> {
    /// The trimmed value of `key`, if set and not blank.
    fn raw(&self, key: &str) -> Option<String> {
        (self.get)(key).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
    }

    fn bad(&mut self, key: &str, message: impl Into<String>) {
        self.problems.push((key.to_string(), message.into()));
    }

    /// A whole number in `min..=max`, or `default` when unset.
    fn number(&mut self, key: &str, default: u64, min: u64, max: u64) -> u64 {
        let Some(v) = self.raw(key) else { return default };
        match v.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => n,
            _ => {
                self.bad(key, format!("must be a whole number from {min} to {max}, got {v:?}"));
                default
            }
        }
    }

    /// A duration with a unit (`crate::duration::parse_retention`).
    fn duration(&mut self, key: &str) -> Option<chrono::Duration> {
        let v = self.raw(key)?;
        match crate::duration::parse_retention(&v) {
            Ok(d) => Some(d),
            Err(e) => {
                self.bad(key, e.to_string());
                None
            }
        }
    }
}

impl Config {
    /// The settings `get` returns (by [`SETTINGS`] key), on top of the
    /// defaults; every bad value is reported at once.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let mut r = Reader { get: &get, problems: Vec::new() };
        let d = Config::default();
        let retention = match (r.duration("RETENTION"), r.raw("RETENTION_DAYS")) {
            (Some(t), _) => t,
            (None, Some(_)) => chrono::Duration::days(r.number("RETENTION_DAYS", 30, 1, 36_500) as i64),
            (None, None) => d.retention,
        };
        let dead_letter_retention = r.duration("DEAD_LETTER_RETENTION").unwrap_or(retention * 2);
        if dead_letter_retention < retention {
            r.bad("DEAD_LETTER_RETENTION", "must be at least RETENTION (a dead letter outlives its event)");
        }
        let p = &d.default_retry_policy;
        let policy = RetryPolicy {
            max_attempts: r.number("MAX_ATTEMPTS", p.max_attempts.into(), 1, 100) as u32,
            base_delay_ms: r.number("RETRY_BASE_MS", p.base_delay_ms, 1, 86_400_000),
            max_delay_ms: r.number("RETRY_CAP_MS", p.max_delay_ms, 1, 86_400_000),
            schedule_ms: None,
        };
        // A policy set here must fit the retention (as one set through the
        // API must); the built-in default is kept even with a short test
        // retention, as it was.
        let set_here = ["MAX_ATTEMPTS", "RETRY_BASE_MS", "RETRY_CAP_MS"].iter().any(|k| r.raw(k).is_some());
        if let Err(e) = policy.validate() {
            r.bad("MAX_ATTEMPTS/RETRY_BASE_MS/RETRY_CAP_MS", e.to_string());
        } else if set_here {
            if let Err(e) = policy.check_fits_retention(retention) {
                r.bad("MAX_ATTEMPTS/RETRY_CAP_MS", format!("{e} (RETENTION)"));
            }
        }
        let connect = r.number("CONNECT_TIMEOUT_MS", d.http.connect_timeout.as_millis() as u64, 1, 600_000);
        let total = r.number("DELIVERY_TIMEOUT_MS", d.http.total_timeout.as_millis() as u64, 1, 900_000);
        let rd = d.reconcile;
        let reconcile = ReconcileLimits {
            max_batches: r.number("RECONCILE_MAX_BATCHES", rd.max_batches as u64, 1, 1000) as usize,
            budget: Duration::from_secs(r.number("RECONCILE_BUDGET_SECS", rd.budget.as_secs(), 1, 840)),
            max_sagas: r.number("RECONCILE_MAX_SAGAS", rd.max_sagas as u64, 1, 10_000) as usize,
            stall_margin: r.duration("RECONCILE_STALL_MARGIN").unwrap_or(rd.stall_margin),
        };
        let bd = d.breaker;
        let cool_ms = r.number("BREAKER_COOL_DOWN_MS", bd.cool_down.as_millis() as u64, 1, 86_400_000);
        let breaker = crate::health::BreakerPolicy {
            failure_threshold: r.number("BREAKER_FAILURES", bd.failure_threshold.into(), 1, 1000) as u32,
            cool_down: Duration::from_millis(cool_ms),
            max_cool_down: Duration::from_millis(r.number(
                "BREAKER_MAX_COOL_DOWN_MS",
                bd.max_cool_down.as_millis() as u64,
                1,
                86_400_000,
            )),
            probe_timeout: Duration::from_millis(total) * 2 + Duration::from_secs(5),
        };
        if breaker.max_cool_down < breaker.cool_down {
            r.bad("BREAKER_MAX_COOL_DOWN_MS", "must be at least BREAKER_COOL_DOWN_MS");
        }
        let audit_retention = r.duration("AUDIT_RETENTION").unwrap_or(d.audit_retention);
        let disable_after = r.duration("DISABLE_AFTER").unwrap_or(d.disable_after);
        let bulk_page_size = r.number("BULK_PAGE_SIZE", d.bulk_page_size as u64, 1, 1000) as usize;
        if !r.problems.is_empty() {
            return Err(ConfigError { problems: r.problems });
        }
        let http = crate::http_client::ClientConfig {
            connect_timeout: Duration::from_millis(connect),
            total_timeout: Duration::from_millis(total),
            ..d.http
        };
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
            bulk_page_size,
            ..d
        })
    }

    /// [`Config::from_lookup`] on the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|k| std::env::var(k).ok())
    }
}

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
        assert_eq!(config(&[]).unwrap().bulk_page_size, crate::bulk::JOB_PAGE);
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
    fn the_retry_policy_is_validated_as_a_whole() {
        let e = config(&[("RETRY_BASE_MS", "5000"), ("RETRY_CAP_MS", "1000")]).unwrap_err();
        assert!(e.problems[0].0.contains("RETRY_CAP_MS"), "{e}");
        let e = config(&[("RETENTION", "1h"), ("MAX_ATTEMPTS", "10"), ("RETRY_CAP_MS", "3600000")]).unwrap_err();
        assert!(e.to_string().contains("RETENTION"), "a schedule longer than the retention: {e}");
        let e = config(&[("RETENTION", "10d"), ("DEAD_LETTER_RETENTION", "5d")]).unwrap_err();
        assert_eq!(e.problems[0].0, "DEAD_LETTER_RETENTION");
    }
}
