//! Records the cases build (events, sagas, attempts, subscriptions, dead
//! letters), public for other tests (e.g. the AWS ports' metered reads).

use super::*;

// ----------------------------------------------------------------- records

/// Now, rounded to microseconds (short, readable times in failure output).
pub(super) fn now() -> DateTime<Utc> {
    Utc::now().round_subsecs(6)
}

/// An event with every optional field set, so a round trip checks them all.
pub fn event(id: &str, event_type: &str) -> EventRecord {
    let at = now();
    EventRecord {
        id: ev(id),
        event_type: event_type.to_string(),
        tenant_id: Some(TenantId::new("tenant-1")),
        partition_key: Some("Opportunity:tenant-1:rec-1".into()),
        sequence: Some("42".into()),
        trace_id: Some("trace-1".into()),
        producer: Some("crm".into()),
        occurred_at: at - chrono::Duration::seconds(5),
        received_at: at,
        expires_at: at + chrono::Duration::days(30),
        format: Format::Native,
        body: format!(r#"{{"id":"{id}","type":"{event_type}","data":{{"n":1,"s":"é\"q"}}}}"#).into_bytes(),
        partition_seq: None,
        // A test event's target changes where it is routed: the
        // conformance of event types checks its round trip on its own.
        target: None,
    }
}

/// A new Pending saga of `event_id` → `subscription_id`.
pub fn saga(id: &str, event_id: &str, subscription_id: &str) -> Saga {
    Saga::new(sg(id), &ev(event_id), &sub(subscription_id), None, now())
}

/// A state with no due time or error.
pub fn state(status: SagaStatus, attempts: u32) -> SagaState {
    SagaState { status, attempts, next_attempt_at: None, last_error: None }
}

/// Attempt `n` of `saga_id`.
pub fn attempt(saga_id: &str, n: u32, result: AttemptResult) -> Attempt {
    Attempt {
        saga_id: sg(saga_id),
        attempt: n,
        event_id: ev("evt_a"),
        subscription_id: sub("sub_a"),
        status_code: Some(500),
        error: Some("HTTP 500".into()),
        latency_ms: 12,
        at: now(),
        result,
        lane: None,
        response_excerpt: None,
    }
}

/// A subscription at `version`.
pub fn subscription(id: &str, version: u64) -> Subscription {
    let at = now();
    Subscription {
        id: sub(id),
        callback_url: format!("https://example.com/hooks/{id}"),
        event_types: vec!["task.*".into(), "quota.committed".into()],
        tenant_id: Some(TenantId::new("tenant-1")),
        description: Some("conformance".into()),
        headers: BTreeMap::from([("x-team".to_string(), "payments".to_string())]),
        retry_policy: RetryPolicy { max_attempts: 4, base_delay_ms: 100, max_delay_ms: 1000, schedule_ms: None },
        dead_letter_on: vec![],
        payload_format: PayloadFormat::Hookline,
        ordering: Default::default(),
        on_dead_letter: Default::default(),
        data_fields: None,
        max_in_flight: None,
        rate_limit: None,
        active: true,
        verified: true,
        verification_error: None,
        disabled_reason: None,
        disabled_at: None,
        signing_keys: vec![SigningKey { secret: Secret::generate(), expires_at: None }],
        created_at: at,
        updated_at: at,
        version,
        // Not the default: the stores keep it (stored in the subscription's data).
        auto_requeue: true,
        ack_timeout_secs: Some(30),
        pull: true,
        verification_token: None,
    }
}

/// An audit record of `action` by `actor`.
pub fn resolution(action: ResolutionAction, actor: &str, new_saga_id: Option<&str>) -> Resolution {
    Resolution {
        action,
        actor: actor.into(),
        reason: "receiver fixed".into(),
        at: now(),
        new_saga_id: new_saga_id.map(sg),
        job_id: None,
    }
}

/// An open dead letter created at `created_at`.
pub fn dead_letter(id: &str, created_at: DateTime<Utc>) -> DeadLetter {
    DeadLetter {
        id: dl(id),
        event_id: ev("evt_a"),
        subscription_id: sub("sub_a"),
        event_type: "task.failed".into(),
        tenant_id: Some(TenantId::new("tenant-a")),
        reason: "gave up after 3 attempts; last error: HTTP 500".into(),
        attempts: 3,
        saga_snapshot: json!({ "id": id, "status": "DeadLettered" }),
        created_at,
        state: DeadLetterState::Open,
        resolution: None,
        // Round-trips through every backend (DynamoDB keeps it deflated apart).
        event: Some(event(&format!("evt_of_{id}"), "task.failed")),
    }
}

/// Ids from text: the cases name their records by literal ids.
pub(super) fn ev(id: &str) -> EventId {
    EventId::new(id)
}

pub(super) fn sg(id: &str) -> SagaId {
    SagaId::new(id)
}

pub(super) fn sub(id: &str) -> SubscriptionId {
    SubscriptionId::new(id)
}

pub(super) fn dl(id: &str) -> DeadLetterId {
    DeadLetterId::new(id)
}

pub(super) fn sorted_by_id(mut sagas: Vec<Saga>) -> Vec<Saga> {
    sagas.sort_by(|a, b| a.id.cmp(&b.id));
    sagas
}
