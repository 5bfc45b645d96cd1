//! The end-to-end scenario suite, written once over [`Pipeline`] and run on
//! both backends (`tests/tests/serve`, `tests/tests/aws`, from the one
//! list of [`scenario_suite_tests`](crate::scenario_suite_tests)) with a real HTTP
//! receiver: verification, signed delivery, retries, dead letters, requeue,
//! replay, idempotency, scoping, bad input, and crashes between steps.

mod audit;
mod auto_requeue;
mod bulk;
mod delivery;
mod finding;
mod ordering;
mod recovery;
mod stats;

pub use audit::*;
pub use auto_requeue::*;
pub use bulk::*;
pub use delivery::*;
pub use finding::*;
pub use ordering::*;
pub use recovery::*;
pub use stats::*;

use std::time::Duration;

use crate::pipeline::Pipeline;
use crate::{eventually, eventually_every, fixture, Behaviour, Receiver};
use serde_json::{json, Value};
use shared::signing::{self, Secret};

/// A retry schedule scaled down from the default 30 s base
/// (docs/delivery.md#retry-schedule).
fn fast_retry(max_attempts: u32) -> Value {
    json!({"max_attempts": max_attempts, "base_delay_ms": 50, "max_delay_ms": 200})
}

async fn post_raw<P: Pipeline>(s: &P, path: &str, body: &[u8]) -> (u16, Value) {
    s.call("POST", path, Some(body)).await
}

/// Every scenario of this suite, listed once: each backend's test binary
/// runs them all (`hookline_tests::scenario_suite_tests!(aws)`, `(serve)`).
/// A crash is a panic of the invocation on AWS (retried as Lambda would),
/// an abort of the process on `hookline serve` (then a restart).
#[macro_export]
macro_rules! scenario_suite_tests {
    ($backend:ident) => {
        $crate::scenario_tests!($backend, scenarios;
            verification_handshake_passes_and_fails,
            delivers_every_producer_format_signed_and_unchanged,
            retries_on_500_and_timeout_then_succeeds,
            dead_letter_after_max_attempts_then_requeue_and_replay,
            skip_closes_a_dead_letter_with_audit_and_gone_deactivates,
            duplicate_events_are_one_event_and_one_delivery,
            deliveries_are_paged_with_a_cursor,
            idempotency_keys_make_a_retry_a_duplicate,
            unverified_inactive_and_other_tenants_get_nothing,
            bad_input_gets_a_clear_error_and_writes_nothing,
            reindex_pages_with_a_cursor_and_refuses_bad_input,
            rotated_secret_keeps_signing_with_the_old_one_during_the_overlap,
            patch_keeps_absent_fields_and_resets_null_ones,
            subscriptions_list_is_paginated_and_filtered,
            contract_webhook_payload_keeps_internal_fields_in,
            a_hung_subscription_holds_a_healthy_one_at_most_one_timeout,
            concurrent_failures_are_each_counted_once,
            retry_schedule_is_followed_then_dead_letters,
            dead_letter_on_statuses_end_a_delivery_at_once,
            ordered_partition_blocks_or_continues_behind_a_dead_letter,
            // 100 events over 10 partitions (10 each) against 20% failures
            // prove the order; volume is the benchmarks' business.
            ordered_partitions_deliver_in_sequence_under_random_failures =
                ordered_partitions_deliver_in_sequence_under_random_failures(100),
            breaker_opens_defers_without_attempts_and_closes_after_a_probe;
                $crate::pipeline::Settings::default().breaker(3, 1000, 2000),
            reconciler_recovers_a_given_up_routing_and_a_lost_job; $crate::pipeline::Settings::default().fast_reconcile(),
            events_are_found_by_every_filter_and_cursor_walks_see_each_once,
            events_are_found_by_delivery_outcome,
            without_the_time_listing_events_are_found_by_id_partition_and_outcome;
                $crate::pipeline::Settings::default().event_listing_off(),
            // The breaker would refuse the failing receiver's later
            // attempts (counted too, but without a request): kept closed.
            stats_count_every_attempt_and_failures_keep_an_excerpt;
                $crate::pipeline::Settings::default().breaker(100, 1000, 2000),
            event_routes_refuse_unknown_parameters_and_speak_snake_case,
            audit_records_every_action_once_with_its_actor; $crate::pipeline::Settings::default().breaker(3, 1000, 2000),
            failing_endpoint_is_disabled_and_operational_events_are_published;
                $crate::pipeline::Settings::default().disable_after_secs(3),
            dead_letters_are_listed_by_every_filter_and_walked_once,
            bulk_skip_by_filter_and_bad_input,
            replay_job_by_event_id_and_bad_input,
            replay_jobs_by_partition_key_and_by_time_range,
            // Crashes between two writes of a stage.
            crash_after_routing_before_the_ack = crash_between_steps("route.after_sagas", 1..=1),
            crash_after_the_saga_transition_before_the_job = crash_between_steps("saga.after_transition", 1..=1),
            // The subscriber got the POST, then the stage died: the job
            // reappears after its visibility timeout and is delivered again
            // with the same webhook-id; the attempt is recorded once.
            crash_after_the_post_before_recording = crash_between_steps("deliver.before_record", 2..=2),
            ordered_delivery_survives_a_crash_of_each_handler = ordered_delivery_survives_crashes_in_the_middle(
                &["route.after_sagas", "saga.after_transition", "deliver.before_record", "order.after_leave"]
            ),
            // 40 dead letters in pages of 5 (BULK_PAGE_SIZE): the crash is
            // half way through page 5 (counted from 0), the sixth of eight,
            // as 1,000 in pages of 100 crashed in the sixth of ten.
            bulk_requeue_survives_a_crash_half_way = bulk_requeue_survives_a_crash_half_way(40, "bulk.half_page.page5");
                $crate::pipeline::Settings::default().bulk_page_size(5),
            // Issue 27, part D: recovery without an operator.
            auto_requeue_after_the_breaker_closes; $crate::pipeline::Settings::default().breaker(3, 1000, 2000),
            auto_requeue_after_re_enabling;
                $crate::pipeline::Settings::default().disable_after_secs(3).breaker(100, 1000, 2000),
            requeues_skips_and_replays_publish_operational_events,
            metrics_and_logs_name_the_producer,
        );
    };
}
