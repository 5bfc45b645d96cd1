//! The checks of a subscription's create and patch bodies, reporting every
//! bad field ([`Issues`]), each with its code from the one table:
//! `invalid_field` (event types, tenant, data fields, the header count, a
//! field that cannot be removed), `invalid_header` (one custom header),
//! `invalid_limit` (`max_in_flight`, `rate_limit`), `invalid_retry_schedule`,
//! `retry_schedule_too_long`, `invalid_dead_letter_on`; the callback URL's
//! (`invalid_callback_url`) is the handler's, as it resolves the host. The
//! rules themselves are `shared`'s.

use std::collections::BTreeMap;

use hookline_wire::subscriptions::{CreateSubscription, PatchSubscription};
use hookline_wire::Patch;
use shared::bounds::MAX_SUBSCRIPTION_PATTERNS;
use shared::context::Config;
use shared::ids::TenantId;
use shared::lane::{OnDeadLetter, Ordering};
use shared::retry::RetryPolicy;
use shared::subscription::{self, check_custom_header, FieldError, PayloadFormat};

use super::view;
pub(crate) use crate::error::Issues;
use crate::error::{ApiError, ErrorCode};

/// A new subscription's fields, checked (the callback URL apart).
#[derive(Debug, Default)]
pub(crate) struct NewFields {
    pub event_types: Vec<String>,
    pub tenant_id: Option<TenantId>,
    pub headers: BTreeMap<String, String>,
    pub retry_policy: Option<RetryPolicy>,
    pub dead_letter_on: Vec<u16>,
    pub payload_format: PayloadFormat,
    pub data_fields: Option<Vec<String>>,
    pub ordering: Ordering,
    pub on_dead_letter: OnDeadLetter,
    pub max_in_flight: Option<u32>,
    pub rate_limit: Option<f64>,
    pub ack_timeout_secs: Option<u32>,
}

/// Checks a create body's fields but `callback_url` (and `description`,
/// `active`, which take anything), recording each problem in `v`.
pub(crate) fn create(b: &CreateSubscription, config: &Config, v: &mut Issues) -> NewFields {
    let payload_format = b.payload_format.map(view::stored_payload_format).unwrap_or_default();
    let data_fields = b.data_fields.as_ref().and_then(|f| v.all(ErrorCode::InvalidField, data_fields(f)));
    if b.data_fields.is_some() && payload_format != PayloadFormat::ContractWebhook {
        v.push(data_fields_need_contract());
    }
    NewFields {
        event_types: v
            .all(ErrorCode::InvalidField, subscription::validate_event_types(&b.event_types, MAX_SUBSCRIPTION_PATTERNS))
            .map(|()| b.event_types.clone())
            .unwrap_or_default(),
        tenant_id: v.take(super::tenant(b.tenant_id.clone())).flatten(),
        headers: v.take(headers(b.headers.clone().unwrap_or_default())).unwrap_or_default(),
        retry_policy: v.take(retry_policy(b.retry_policy.clone(), config)),
        dead_letter_on: v
            .all(ErrorCode::InvalidDeadLetterOn, dead_letter_on(b.dead_letter_on.as_deref().unwrap_or_default()))
            .unwrap_or_default(),
        payload_format,
        data_fields: data_fields.flatten(),
        ordering: b.ordering.map(view::stored_ordering).unwrap_or_default(),
        on_dead_letter: b.on_dead_letter.map(view::stored_on_dead_letter).unwrap_or_default(),
        max_in_flight: b.max_in_flight.and_then(|n| v.take(max_in_flight(n))),
        rate_limit: b.rate_limit.and_then(|r| v.take(rate_limit(r))),
        ack_timeout_secs: b.ack_timeout_secs.and_then(|t| v.take(ack_timeout(t))),
    }
}

/// A patch's changes, checked (the callback URL apart): `None` leaves a
/// field unchanged.
#[derive(Debug, Default)]
pub(crate) struct Changes {
    pub event_types: Option<Vec<String>>,
    pub tenant_id: Patch<TenantId>,
    pub headers: Patch<BTreeMap<String, String>>,
    pub retry_policy: Option<RetryPolicy>,
    pub dead_letter_on: Option<Vec<u16>>,
    pub payload_format: Patch<PayloadFormat>,
    pub data_fields: Patch<Vec<String>>,
    pub ordering: Patch<Ordering>,
    pub on_dead_letter: Patch<OnDeadLetter>,
    pub max_in_flight: Patch<u32>,
    pub rate_limit: Patch<f64>,
    pub ack_timeout_secs: Patch<u32>,
}

/// Checks a patch body's fields but `callback_url`'s value, recording each
/// problem in `v`. A `null` `callback_url` or `event_types` is one (they
/// cannot be removed).
pub(crate) fn patch(b: &PatchSubscription, config: &Config, v: &mut Issues) -> Changes {
    if matches!(b.callback_url, Patch::Null) {
        v.push(ApiError::invalid("callback_url", "cannot be removed"));
    }
    let event_types = match &b.event_types {
        Patch::Null => v.take(Err(ApiError::invalid("event_types", "cannot be removed"))),
        Patch::Absent => None,
        Patch::Value(t) => v
            .all(ErrorCode::InvalidField, subscription::validate_event_types(t, MAX_SUBSCRIPTION_PATTERNS))
            .map(|()| t.clone()),
    };
    Changes {
        event_types,
        tenant_id: check_patch(&b.tenant_id, |t| v.take(super::tenant(Some(t.clone()))).flatten()),
        headers: check_patch(&b.headers, |h| v.take(headers(h.clone()))),
        retry_policy: match &b.retry_policy {
            Patch::Absent => None,
            Patch::Null => v.take(retry_policy(None, config)),
            Patch::Value(p) => v.take(retry_policy(Some(p.clone()), config)),
        },
        dead_letter_on: match &b.dead_letter_on {
            Patch::Absent => None,
            Patch::Null => Some(Vec::new()),
            Patch::Value(d) => v.all(ErrorCode::InvalidDeadLetterOn, dead_letter_on(d)),
        },
        payload_format: b.payload_format.clone().map(view::stored_payload_format),
        data_fields: check_patch(&b.data_fields, |f| v.all(ErrorCode::InvalidField, data_fields(f)).flatten()),
        ordering: b.ordering.clone().map(view::stored_ordering),
        on_dead_letter: b.on_dead_letter.clone().map(view::stored_on_dead_letter),
        max_in_flight: check_patch(&b.max_in_flight, |n| v.take(max_in_flight(*n))),
        rate_limit: check_patch(&b.rate_limit, |r| v.take(rate_limit(*r))),
        ack_timeout_secs: check_patch(&b.ack_timeout_secs, |t| v.take(ack_timeout(*t))),
    }
}

/// A patch of a checked value: absent and `null` as given; a value through
/// `check`, absent when it fails (its issues are recorded).
fn check_patch<T, U>(p: &Patch<T>, check: impl FnOnce(&T) -> Option<U>) -> Patch<U> {
    match p {
        Patch::Absent => Patch::Absent,
        Patch::Null => Patch::Null,
        Patch::Value(t) => check(t).map_or(Patch::Absent, Patch::Value),
    }
}

/// `data_fields` ([`shared::payload::validate_data_fields`]), kept when good.
fn data_fields(f: &[String]) -> Result<Option<Vec<String>>, Vec<FieldError>> {
    shared::payload::validate_data_fields(f).map(|()| Some(f.to_vec()))
}

/// `data_fields` with another payload format than `contract_webhook`,
/// which would silently ignore it.
pub(crate) fn data_fields_need_contract() -> ApiError {
    ApiError::invalid(
        "data_fields",
        "applies only to payload_format \"contract_webhook\"; set that format too, or remove data_fields",
    )
}

/// A `callback_url` that names a queue or bus ([`shared::destination`]):
/// its ARN, once it parses and the deployment may send to it
/// (`DESTINATION_ARNS`); `None` for an HTTPS URL, which the handler checks.
/// `422 invalid_callback_url` naming `callback_url` otherwise.
pub(crate) fn destination_arn(url: &str, config: &Config) -> Result<Option<String>, ApiError> {
    let refused = |e: shared::destination::DestinationError| {
        ApiError::new(ErrorCode::InvalidCallbackUrl, e.to_string()).on("callback_url")
    };
    let dest = shared::destination::parse(url).map_err(refused)?;
    let Some(arn) = dest.arn() else { return Ok(None) };
    shared::destination::check_allowed(&dest, config.allowed_destinations.as_deref()).map_err(refused)?;
    Ok(Some(arn.to_string()))
}

/// A patched subscription as it would be stored: what having no callback
/// cannot combine with ([`shared::subscription::Subscription::destination_issues`]):
/// `pull` off with no `callback_url`, `ordering: partition` or
/// `ack_timeout_secs` on a pull-only one; every one reported (`422
/// invalid_field` naming each field).
pub(crate) fn pull_only(sub: &shared::subscription::Subscription) -> Result<(), ApiError> {
    let mut v = Issues::default();
    for e in sub.destination_issues() {
        v.push(e.into());
    }
    v.check()
}

/// The custom `headers` of a subscription delivering to `url`: an SQS
/// queue carries them as message attributes, whose names and number SQS
/// limits (`422 invalid_field` naming `headers`).
pub(crate) fn destination_headers(url: &str, headers: &BTreeMap<String, String>) -> Result<(), ApiError> {
    match shared::destination::parse(url) {
        Ok(shared::destination::Destination::Sqs(_)) => {
            shared::destination::sqs::check_headers(headers).map_err(|e| ApiError::invalid("headers", e))
        }
        _ => Ok(()),
    }
}

/// `dead_letter_on` ([`subscription::validate_dead_letter_on`]).
fn dead_letter_on(statuses: &[i64]) -> Result<Vec<u16>, Vec<FieldError>> {
    subscription::validate_dead_letter_on(statuses)
}

/// A subscription's `max_in_flight`, read as any integer so that zero and
/// negative values get the range error (`422 invalid_limit`), not a type
/// error.
pub(crate) fn max_in_flight(n: i64) -> Result<u32, ApiError> {
    subscription::validate_max_in_flight(u32::try_from(n).unwrap_or(0)).map_err(|_| {
        limit_error(FieldError::new(
            "max_in_flight",
            format!("must be between 1 and {}, got {n}", subscription::MAX_IN_FLIGHT_CEILING),
        ))
    })
}

/// A subscription's `ack_timeout_secs` ([`subscription::validate_ack_timeout`]):
/// `422 invalid_field` naming it.
fn ack_timeout(secs: i64) -> Result<u32, ApiError> {
    subscription::validate_ack_timeout(secs).map_err(ApiError::from)
}

/// A subscription's `rate_limit`, deliveries per second.
pub(crate) fn rate_limit(r: f64) -> Result<f64, ApiError> {
    subscription::validate_rate_limit(r).map_err(limit_error)
}

/// A delivery limit out of its range: `422 invalid_limit` naming the field.
fn limit_error(e: FieldError) -> ApiError {
    ApiError::new(ErrorCode::InvalidLimit, e.to_string()).on(e.field)
}

/// Custom headers: at most 20 (`422 invalid_field` naming `headers`), each
/// sendable ([`check_custom_header`]; `422 invalid_header` naming
/// `headers.<name>`, every one at fault).
fn headers(h: BTreeMap<String, String>) -> Result<BTreeMap<String, String>, ApiError> {
    if h.len() > 20 {
        return Err(ApiError::invalid("headers", "at most 20 custom headers"));
    }
    let mut v = Issues::default();
    for (k, value) in &h {
        if let Err(e) = check_custom_header(k, value) {
            v.add(ErrorCode::InvalidHeader, FieldError::new(format!("headers.{k}"), e.to_string()));
        }
    }
    v.check().map(|()| h)
}

/// A retry policy: well-formed ([`shared::retry::RetryPolicyInput::resolve`]:
/// `422 invalid_field` naming the member; with `schedule_ms`, `422
/// invalid_retry_schedule` naming it, e.g. `retry_policy.schedule_ms[2]`),
/// and no longer than the event retention (`422 retry_schedule_too_long`
/// naming `retry_policy`, or `retry_policy.schedule_ms`). Absent or `null`
/// is the configured default.
fn retry_policy(
    p: Option<hookline_wire::subscriptions::RetryPolicyInput>,
    config: &Config,
) -> Result<RetryPolicy, ApiError> {
    let Some(p) = p else { return Ok(config.default_retry_policy.clone()) };
    if let Some(schedule) = &p.schedule_ms {
        // Every bad wait, not only the first.
        let mut v = Issues::default();
        for e in shared::retry::schedule_errors(schedule) {
            v.add(ErrorCode::InvalidRetrySchedule, e);
        }
        v.check()?;
    }
    let code = if p.schedule_ms.is_some() { ErrorCode::InvalidRetrySchedule } else { ErrorCode::InvalidField };
    let p = view::retry_input(p).resolve().map_err(|e| ApiError::new(code, e.to_string()).on(e.field))?;
    p.check_fits_retention(config.retention)
        .map_err(|e| ApiError::new(ErrorCode::RetryScheduleTooLong, e.to_string()).on(e.field()))?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config::default()
    }

    /// Every bad field of a create body is reported, each with its code.
    #[test]
    fn a_create_body_reports_every_bad_field() {
        let b: CreateSubscription = serde_json::from_value(serde_json::json!({
            "callback_url": "https://example.com/h",
            "event_types": ["ok", "a b", ""],
            "headers": {"Host": "x", "X-Ok": "v", "Upgrade": "h2c"},
            "max_in_flight": 0,
            "rate_limit": 5000.0,
            "dead_letter_on": [200, 404, 99],
            "retry_policy": {"schedule_ms": [0, 1000, -5]},
            "data_fields": ["a"],
            "tenant_id": "",
        }))
        .unwrap();
        let mut v = Issues::default();
        create(&b, &config(), &mut v);
        let e = v.check().unwrap_err();
        let got: Vec<(&str, &str)> = e.issues.iter().map(|i| (i.field.as_str(), i.code.as_str())).collect();
        for want in [
            ("event_types[1]", "invalid_field"),
            ("event_types[2]", "invalid_field"),
            ("tenant_id", "invalid_field"),
            ("headers.Host", "invalid_header"),
            ("headers.Upgrade", "invalid_header"),
            ("retry_policy.schedule_ms[0]", "invalid_retry_schedule"),
            ("retry_policy.schedule_ms[2]", "invalid_retry_schedule"),
            ("dead_letter_on[0]", "invalid_dead_letter_on"),
            ("dead_letter_on[2]", "invalid_dead_letter_on"),
            ("data_fields", "invalid_field"),
            ("max_in_flight", "invalid_limit"),
            ("rate_limit", "invalid_limit"),
        ] {
            assert!(got.contains(&want), "{want:?} in {got:?}");
        }
        assert_eq!(got.len(), 12, "{got:?}");
        assert_eq!(e.status(), 422);
    }

    /// A patch reports every bad field too, `null` where a field cannot be
    /// removed among them.
    #[test]
    fn a_patch_body_reports_every_bad_field() {
        let b: PatchSubscription = serde_json::from_value(serde_json::json!({
            "callback_url": null, "event_types": null, "rate_limit": 0, "data_fields": ["a", "a"]
        }))
        .unwrap();
        let mut v = Issues::default();
        let c = patch(&b, &config(), &mut v);
        assert_eq!(c.rate_limit, Patch::Absent);
        let e = v.check().unwrap_err();
        let fields: Vec<&str> = e.issues.iter().map(|i| i.field.as_str()).collect();
        assert_eq!(fields, ["callback_url", "event_types", "data_fields[1]", "rate_limit"]);
        let mut v = Issues::default();
        let c = patch(&PatchSubscription { rate_limit: Patch::Null, ..Default::default() }, &config(), &mut v);
        assert!(v.check().is_ok());
        assert_eq!(c.rate_limit, Patch::Null);
    }
}
