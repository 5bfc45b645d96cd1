//! One conformance suite for the ports of `shared::ports`, run on every
//! backend: `tests/tests/serve/ports.rs` (the embedded SQLite backend) and
//! `tests/tests/aws/ports.rs` (DynamoDB and SQS in the emulator). Each case takes a
//! fresh [`Stores`] and checks the guarantees the stages rely on:
//! conditional inserts, delivery statistics that add, conditional saga transitions that never leave a
//! terminal status, versioned subscription updates, dead letters resolved
//! once, and SQS queue semantics.
//!
//! A backend's test file lists no case by hand: it defines a `case!` macro
//! and calls [`for_each_conformance_case!`](crate::for_each_conformance_case),
//! which expands it once per case.

mod acks;
mod api_keys;
mod completing;
mod event_types;
mod idempotency;
mod queues;
mod records;
mod search;
mod stats;
mod stores;

pub use acks::*;
pub use api_keys::*;
pub use completing::*;
pub use event_types::*;
pub use idempotency::*;
pub use queues::*;
pub use records::*;
pub use search::*;
pub use stats::*;
pub use stores::*;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use serde_json::json;
use shared::attempt::Attempt;
use shared::bulk::{Job, JobSpec};
use shared::context::Stores;
use shared::dead_letter::{DeadLetter, DeadLetterQuery, DeadLetterState, Resolution, ResolutionAction};
use shared::envelope::Format;
use shared::event::EventRecord;
use shared::event_search::{EventQuery, EventSummary};
use shared::ids::{DeadLetterId, EventId, SagaId, SubscriptionId, TenantId};
use shared::ports::{JobQueue, Outgoing, Received, SubscriptionFilter, Transition, TransitionOutcome};
use shared::retry::RetryPolicy;
use shared::routing::{RouteKey, Scope};
use shared::saga::{AttemptResult, Origin, Saga, SagaState, SagaStatus};
use shared::signing::Secret;
use shared::subscription::{PayloadFormat, SigningKey, Subscription};

/// Expands `$m!(case)` for every conformance case, so each backend's test
/// file generates one `#[test]` per case and none can be forgotten. A test
/// file may match a case by name in its `case!` macro to mark it ignored,
/// with the reason.
#[macro_export]
macro_rules! for_each_conformance_case {
    ($m:ident) => {
        $m!(events_insert_is_conditional);
        $m!(sagas_create_is_idempotent);
        $m!(sagas_list_for_event);
        $m!(saga_transition_applies_and_stores_the_new_state);
        $m!(saga_transition_conflict_returns_current_state);
        $m!(saga_terminal_status_never_changes);
        $m!(saga_transition_missing);
        $m!(sagas_stalled_and_deferred);
        $m!(saga_transition_batch_keeps_order);
        $m!(attempts_unique_per_saga_and_attempt);
        $m!(attempts_record_completing_first_success);
        $m!(subscriptions_versioned_update_and_delete);
        $m!(subscriptions_are_found_by_route_key);
        $m!(subscriptions_page_walks_every_subscription_once);
        $m!(subscriptions_with_the_most_patterns);
        $m!(dead_letters_put_once);
        $m!(dead_letters_resolve_once);
        $m!(dead_letters_list_newest_first);
        $m!(dead_letters_page_by_every_filter);
        $m!(dead_letters_open_count_follows_every_change);
        $m!(dead_letters_page_merges_many_across_shards);
        $m!(jobs_are_created_once_and_updated_on_their_version);
        $m!(job_slots_are_written_on_their_version);
        $m!(keys_are_unique_by_name_per_tenant_and_by_credential);
        $m!(keys_update_on_their_version_adding_and_dropping_credentials);
        $m!(keys_page_by_tenant);
        $m!(idempotency_keys_are_claimed_once_answered_and_released);
        $m!(idempotency_keys_expire_and_abandoned_claims_are_taken_over);
        $m!(idempotency_claims_race_and_one_wins);
        $m!(idempotency_claims_one_after_another_one_wins);
        $m!(queue_send_receive_delete);
        $m!(queue_delete_detached_deletes_without_waiting);
        $m!(queue_receive_respects_max);
        $m!(queue_delay);
        $m!(queue_visibility_timeout_redelivers);
        $m!(queue_stale_receipt_cannot_delete);
        $m!(queue_change_visibility);
        $m!(queue_depth_counts);
        $m!(queue_dead_letters_after_max_receives);
        $m!(health_writes_are_conditional_on_the_version);
        $m!(limits_lease_slots_and_space_starts);
        $m!(partitions_are_numbered_marked_and_laned);
        $m!(events_are_found_by_every_filter);
        $m!(audit_pages_newest_first_with_every_filter);
        $m!(stats_minutes_and_hours_add_up);
        $m!(stats_two_writers_add_to_one_minute);
        $m!(stats_concurrent_adds_sum_up);
        $m!(event_types_are_recorded_once_and_listed_per_scope);
        $m!(event_types_racing_writers_insert_once);
        $m!(catalog_entries_are_written_conditionally_and_listed);
        $m!(a_test_events_target_round_trips);
        $m!(acknowledgements_keep_the_latest_per_delivery);
        $m!(the_pull_index_lists_one_subscriptions_keyed_sagas_in_order);
    };
}
