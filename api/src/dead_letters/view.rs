//! Stored dead letters, their saga snapshots and jobs as the API shows
//! them: the wire types of [`hookline_wire::dead_letters`] and
//! [`hookline_wire::jobs`], stored spellings mapped here (a saga's
//! `DeadLettered` is `dead_lettered` on the wire; nothing stored changes).

use hookline_wire::dead_letters as wire;
use hookline_wire::jobs as wire_jobs;
use shared::bulk::{Job, JobKind, JobSpec, JobState};
use shared::dead_letter::{DeadLetter, DeadLetterState, Resolution, ResolutionAction};
use shared::saga::Saga;

/// The wire spelling of a dead letter's state.
pub(super) fn state_view(s: DeadLetterState) -> wire::DeadLetterState {
    match s {
        DeadLetterState::Open => wire::DeadLetterState::Open,
        DeadLetterState::Requeued => wire::DeadLetterState::Requeued,
        DeadLetterState::Skipped => wire::DeadLetterState::Skipped,
    }
}

/// The stored state a wire state names.
pub(super) fn state_of(s: wire::DeadLetterState) -> DeadLetterState {
    match s {
        wire::DeadLetterState::Open => DeadLetterState::Open,
        wire::DeadLetterState::Requeued => DeadLetterState::Requeued,
        wire::DeadLetterState::Skipped => DeadLetterState::Skipped,
    }
}

/// A stored saga snapshot as the API shows it; `None` when the stored JSON
/// is not a saga (it always is for dead letters Hookline wrote).
pub(super) fn saga_view(snapshot: serde_json::Value) -> Option<wire::SagaSnapshot> {
    let s: Saga = serde_json::from_value(snapshot).ok()?;
    Some(wire::SagaSnapshot {
        id: s.id.to_string(),
        event_id: s.event_id.to_string(),
        subscription_id: s.subscription_id.to_string(),
        webhook_id: s.webhook_id.to_string(),
        status: crate::events::wire_status(&s.state),
        attempts: s.state.attempts,
        next_attempt_at: s.state.next_attempt_at,
        last_error: s.state.last_error,
        origin: s.origin.map(crate::events::wire_origin),
        lane: s.lane.map(|l| wire::SagaLane {
            partition_key: l.partition.key,
            seq: l.seq,
            on_dead_letter: crate::subscriptions::on_dead_letter(l.on_dead_letter),
        }),
        created_at: s.created_at,
        updated_at: s.updated_at,
    })
}

/// A resolution as the API shows it.
pub(super) fn resolution_view(r: Resolution) -> wire::Resolution {
    wire::Resolution {
        action: match r.action {
            ResolutionAction::Requeue => wire::ResolutionAction::Requeue,
            ResolutionAction::Skip => wire::ResolutionAction::Skip,
        },
        actor: r.actor,
        reason: r.reason,
        at: r.at,
        new_saga_id: r.new_saga_id.map(|s| s.to_string()),
        job_id: r.job_id,
    }
}

/// A stored dead letter as the API shows it; its event snapshot only when
/// `with_event` (one dead letter, never a page: bodies may be large).
pub(super) fn dead_letter_view(d: DeadLetter, with_event: bool) -> wire::DeadLetter {
    wire::DeadLetter {
        id: d.id.to_string(),
        event_id: d.event_id.to_string(),
        subscription_id: d.subscription_id.to_string(),
        event_type: d.event_type,
        tenant_id: d.tenant_id.map(|t| t.to_string()),
        reason: d.reason,
        attempts: d.attempts,
        saga_snapshot: saga_view(d.saga_snapshot),
        created_at: d.created_at,
        state: state_view(d.state),
        resolution: d.resolution.map(resolution_view),
        event: d.event.filter(|_| with_event).map(|e| wire::DeadLetterEvent {
            id: e.id.to_string(),
            event_type: e.event_type,
            tenant_id: e.tenant_id.map(|t| t.to_string()),
            partition_key: e.partition_key,
            sequence: e.sequence,
            partition_seq: e.partition_seq,
            trace_id: e.trace_id,
            producer: e.producer,
            occurred_at: e.occurred_at,
            received_at: e.received_at,
            expires_at: e.expires_at,
            format: crate::events::wire_format(e.format),
            body: String::from_utf8_lossy(&e.body).into_owned(),
        }),
    }
}

/// A stored job as `GET /v1/jobs/{job}` shows it.
pub(super) fn job_view(j: &Job) -> wire_jobs::Job {
    let filter = match &j.spec {
        JobSpec::Requeue(q) | JobSpec::Skip(q) => wire_jobs::JobFilter {
            subscription_id: q.subscription_id.as_ref().map(ToString::to_string),
            event_type: q.event_type.clone(),
            tenant_id: q.tenant_id.as_ref().map(ToString::to_string),
            since: q.since,
            until: q.until,
            ..Default::default()
        },
        JobSpec::Replay(f) => wire_jobs::JobFilter {
            event_id: f.event_id.as_ref().map(ToString::to_string),
            partition_key: f.partition_key.clone(),
            subscription_id: f.subscription_id.as_ref().map(ToString::to_string),
            event_types: f.event_types.clone(),
            tenant_id: f.tenant_id.as_ref().map(ToString::to_string),
            since: f.since,
            until: f.until,
            confined_to: f.confined_to.as_ref().map(ToString::to_string),
            ..Default::default()
        },
    };
    wire_jobs::Job {
        id: j.id.clone(),
        kind: match j.kind() {
            JobKind::Requeue => wire_jobs::JobKind::Requeue,
            JobKind::Skip => wire_jobs::JobKind::Skip,
            JobKind::Replay => wire_jobs::JobKind::Replay,
        },
        state: match j.state {
            JobState::Running => wire_jobs::JobState::Running,
            JobState::Completed => wire_jobs::JobState::Completed,
            JobState::Failed => wire_jobs::JobState::Failed,
        },
        items: j.items,
        tenant_id: j.tenant_id.as_ref().map(ToString::to_string),
        matched: j.matched,
        done: j.done,
        failed: j.failed,
        skipped_not_routed: (j.kind() == JobKind::Replay).then_some(j.skipped_not_routed),
        reason: j.reason.clone(),
        actor: j.actor.clone(),
        filter,
        created_at: j.created_at,
        updated_at: j.updated_at,
        error: j.error.clone(),
    }
}
