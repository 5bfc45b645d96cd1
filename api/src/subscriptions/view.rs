//! Stored subscriptions, their health and blocked lanes as the wire types
//! show them ([`hookline_wire::subscriptions`]). Stored spellings stay as
//! they are (`contract-webhook`); the wire's (`contract_webhook`) are
//! mapped here, both ways.

use chrono::{DateTime, Utc};
use hookline_wire::subscriptions as wire;
use shared::health::{BreakerState, Health, WINDOW_MINUTES};
use shared::lane::{OnDeadLetter, Ordering};
use shared::retry::{RetryPolicy, RetryPolicyInput};
use shared::subscription::{shown_header_value, PayloadFormat, Subscription};

/// A stored subscription with its health, as the API shows it (no secret,
/// credential header values hidden).
pub(crate) fn subscription(s: &Subscription, health: wire::SubscriptionHealth) -> wire::Subscription {
    wire::Subscription {
        id: s.id.to_string(),
        callback_url: (!s.is_pull_only()).then(|| s.callback_url.clone()),
        event_types: s.event_types.clone(),
        tenant_id: s.tenant_id.as_ref().map(|t| t.as_str().to_string()),
        description: s.description.clone(),
        headers: s.headers.iter().map(|(k, v)| (k.clone(), shown_header_value(k, v))).collect(),
        retry_policy: retry_policy(&s.retry_policy),
        dead_letter_on: s.dead_letter_on.clone(),
        payload_format: payload_format(s.payload_format),
        data_fields: s.data_fields.clone(),
        ordering: ordering(s.ordering),
        on_dead_letter: on_dead_letter(s.on_dead_letter),
        max_in_flight: s.max_in_flight,
        rate_limit: s.rate_limit,
        active: s.active,
        disabled_reason: s.disabled_reason.clone(),
        disabled_at: s.disabled_at,
        verified: s.verified,
        verification_error: s.verification_error.clone(),
        created_at: s.created_at,
        updated_at: s.updated_at,
        health,
        blocked_lanes: None,
        auto_requeue: s.auto_requeue,
        ack_timeout_secs: s.ack_timeout_secs,
        pull: s.pull,
        destination: shared::destination::DestinationKind::of(&s.callback_url, s.pull).as_str().to_string(),
    }
}

/// A subscription's health at `now` (the default, healthy record when none
/// is stored).
pub(crate) fn health(h: &Health, now: DateTime<Utc>) -> wire::SubscriptionHealth {
    let window = h.window.summary(now);
    wire::SubscriptionHealth {
        breaker: match h.breaker {
            BreakerState::Closed => wire::BreakerState::Closed,
            BreakerState::Open => wire::BreakerState::Open,
            BreakerState::HalfOpen => wire::BreakerState::HalfOpen,
        },
        breaker_until: h.until,
        consecutive_failures: h.consecutive_failures,
        last_error: h.last_error.clone(),
        last_error_at: h.last_error_at,
        last_success_at: h.last_success_at,
        window_minutes: WINDOW_MINUTES,
        attempts: window.attempts,
        success_rate: window.success_rate,
        latency_p50_ms: window.latency_p50_ms,
        latency_p99_ms: window.latency_p99_ms,
    }
}

/// One blocked lane.
pub(crate) fn blocked_lane(b: &shared::ordering::BlockedLane) -> wire::BlockedLane {
    wire::BlockedLane {
        partition_key: b.partition.key.clone(),
        tenant_id: b.partition.tenant().map(str::to_string),
        since: b.since,
        reason: b.reason.clone(),
    }
}

/// A stored retry policy.
fn retry_policy(p: &RetryPolicy) -> wire::RetryPolicy {
    wire::RetryPolicy {
        max_attempts: p.max_attempts,
        base_delay_ms: p.base_delay_ms,
        max_delay_ms: p.max_delay_ms,
        schedule_ms: p.schedule_ms.clone(),
    }
}

/// A retry policy as given, for [`RetryPolicyInput::resolve`].
pub(crate) fn retry_input(p: wire::RetryPolicyInput) -> RetryPolicyInput {
    RetryPolicyInput {
        max_attempts: p.max_attempts,
        base_delay_ms: p.base_delay_ms,
        max_delay_ms: p.max_delay_ms,
        schedule_ms: p.schedule_ms,
    }
}

/// The wire's spelling of a stored payload format.
pub(crate) fn payload_format(f: PayloadFormat) -> wire::PayloadFormat {
    match f {
        PayloadFormat::Original => wire::PayloadFormat::Original,
        PayloadFormat::Hookline => wire::PayloadFormat::Hookline,
        PayloadFormat::ContractWebhook => wire::PayloadFormat::ContractWebhook,
    }
}

/// The stored payload format of a wire one.
pub(crate) fn stored_payload_format(f: wire::PayloadFormat) -> PayloadFormat {
    match f {
        wire::PayloadFormat::Original => PayloadFormat::Original,
        wire::PayloadFormat::Hookline => PayloadFormat::Hookline,
        wire::PayloadFormat::ContractWebhook => PayloadFormat::ContractWebhook,
    }
}

fn ordering(o: Ordering) -> wire::Ordering {
    match o {
        Ordering::None => wire::Ordering::None,
        Ordering::Partition => wire::Ordering::Partition,
    }
}

/// The stored ordering of a wire one.
pub(crate) fn stored_ordering(o: wire::Ordering) -> Ordering {
    match o {
        wire::Ordering::None => Ordering::None,
        wire::Ordering::Partition => Ordering::Partition,
    }
}

/// The wire spelling of what a dead letter does to its lane.
pub(crate) fn on_dead_letter(o: OnDeadLetter) -> wire::OnDeadLetter {
    match o {
        OnDeadLetter::Continue => wire::OnDeadLetter::Continue,
        OnDeadLetter::Block => wire::OnDeadLetter::Block,
    }
}

/// The stored dead-letter rule of a wire one.
pub(crate) fn stored_on_dead_letter(o: wire::OnDeadLetter) -> OnDeadLetter {
    match o {
        wire::OnDeadLetter::Continue => OnDeadLetter::Continue,
        wire::OnDeadLetter::Block => OnDeadLetter::Block,
    }
}
