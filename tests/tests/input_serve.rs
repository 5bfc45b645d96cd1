//! The input scenarios (`hookline_tests::input_scenarios`) on `hookline
//! serve`: a real process on its own SQLite file, real HTTP (so ids in paths
//! go through a real URL parser and axum), a real receiver.

use hookline_tests::{input_scenarios, Server};

macro_rules! on_serve {
    ($($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            input_scenarios::$name(&Server::start(stringify!($name))).await;
        }
    )*};
}

on_serve!(
    producer_ids_over_the_limit_are_refused_naming_the_field,
    ids_with_path_characters_are_found_percent_encoded,
    header_bound_values_must_be_valid_header_values,
    partition_keys_that_cannot_be_stored_or_sent_are_refused,
    custom_headers_that_cannot_be_sent_are_refused,
    control_characters_cannot_forge_log_lines,
    retry_schedules_longer_than_the_retention_are_refused,
    deduplication_is_per_tenant,
    delivery_limits_that_make_no_sense_are_refused,
    retry_schedules_and_dead_letter_statuses_that_make_no_sense_are_refused,
    idempotency_keys_that_break_the_rule_are_refused,
);
