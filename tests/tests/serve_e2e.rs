//! The scenario suite (`hookline_tests::scenarios`) on `hookline serve`: a
//! real process on its own SQLite file, real HTTP, a real receiver; crashes
//! are `kill -9`-equivalent aborts at failpoints, then a restart. Plus what
//! only a process has: `kill -9` mid-stream, API-key auth, restart, SIGTERM.

use std::time::Duration;

use hookline_tests::pipeline::Pipeline;
use hookline_tests::{scenarios, Behaviour, Receiver, Server};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciler_recovers_a_given_up_routing_and_a_lost_job() {
    let mut s = Server::start_with("reconciler_recovers", &["--reconcile-interval", "1s", "--stall-margin", "2s"]);
    scenarios::reconciler_recovers_a_given_up_routing_and_a_lost_job(&mut s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_subscription_holds_a_healthy_one_at_most_one_timeout() {
    scenarios::a_hung_subscription_holds_a_healthy_one_at_most_one_timeout(&Server::start("hung-bound")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_are_paged_with_a_cursor() {
    scenarios::deliveries_are_paged_with_a_cursor(&Server::start("deliveries-paged")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_failures_are_each_counted_once() {
    scenarios::concurrent_failures_are_each_counted_once(&Server::start("concurrent-failures")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_opens_defers_without_attempts_and_closes_after_a_probe() {
    let s = Server::start_with(
        "breaker",
        &["--breaker-failures", "3", "--breaker-cool-down-ms", "1000", "--breaker-max-cool-down-ms", "2000"],
    );
    scenarios::breaker_opens_defers_without_attempts_and_closes_after_a_probe(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_keeps_absent_fields_and_resets_null_ones() {
    scenarios::patch_keeps_absent_fields_and_resets_null_ones(&Server::start("patch_keeps_absent")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_partitions_deliver_in_sequence_under_random_failures() {
    scenarios::ordered_partitions_deliver_in_sequence_under_random_failures(&Server::start("ordered"), 1000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_delivery_survives_kill9_in_the_middle() {
    let failpoints = ["route.after_sagas", "saga.after_transition", "deliver.before_record", "order.after_leave"];
    scenarios::ordered_delivery_survives_crashes_in_the_middle(&mut Server::start("ordered_crash"), &failpoints).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_partition_blocks_or_continues_behind_a_dead_letter() {
    scenarios::ordered_partition_blocks_or_continues_behind_a_dead_letter(&Server::start("ordered_block")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contract_webhook_payload_keeps_internal_fields_in() {
    scenarios::contract_webhook_payload_keeps_internal_fields_in(&Server::start("contract_webhook")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_list_is_paginated_and_filtered() {
    scenarios::subscriptions_list_is_paginated_and_filtered(&Server::start("subscriptions_list")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_handshake_passes_and_fails() {
    scenarios::verification_handshake_passes_and_fails(&Server::start("verification_handsha")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivers_every_producer_format_signed_and_unchanged() {
    scenarios::delivers_every_producer_format_signed_and_unchanged(&Server::start("delivers_every_produ")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_on_500_and_timeout_then_succeeds() {
    scenarios::retries_on_500_and_timeout_then_succeeds(&Server::start("retries_on_500_and_t")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_after_max_attempts_then_requeue_and_replay() {
    scenarios::dead_letter_after_max_attempts_then_requeue_and_replay(&Server::start("dead_letter_after_ma")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_closes_a_dead_letter_with_audit_and_gone_deactivates() {
    scenarios::skip_closes_a_dead_letter_with_audit_and_gone_deactivates(&Server::start("skip_closes_a_dead_l")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_schedule_is_followed_then_dead_letters() {
    scenarios::retry_schedule_is_followed_then_dead_letters(&Server::start("retry_schedule_is_fo")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_on_statuses_end_a_delivery_at_once() {
    scenarios::dead_letter_on_statuses_end_a_delivery_at_once(&Server::start("dead_letter_on_statu")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_events_are_one_event_and_one_delivery() {
    scenarios::duplicate_events_are_one_event_and_one_delivery(&Server::start("duplicate_events_are")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_keys_make_a_retry_a_duplicate() {
    scenarios::idempotency_keys_make_a_retry_a_duplicate(&Server::start("idempotency_keys")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unverified_inactive_and_other_tenants_get_nothing() {
    scenarios::unverified_inactive_and_other_tenants_get_nothing(&Server::start("unverified_inactive_")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_error_and_writes_nothing() {
    scenarios::bad_input_gets_a_clear_error_and_writes_nothing(&Server::start("bad_input_gets_a_cle")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reindex_pages_with_a_cursor_and_refuses_bad_input() {
    scenarios::reindex_pages_with_a_cursor_and_refuses_bad_input(&Server::start("reindex_pages")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_secret_keeps_signing_with_the_old_one_during_the_overlap() {
    scenarios::rotated_secret_keeps_signing_with_the_old_one_during_the_overlap(&Server::start("rotated_secret_keeps"))
        .await;
}

/// Events accepted while the process is killed mid-stream are all delivered
/// after restart; nothing 2xx'd is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_during_ingest_loses_no_accepted_event() {
    let mut s = Server::start("crash-ingest");
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/c", Behaviour::Ok), "event_types": ["*"]})).await;
    let base = s.base.clone();
    let key = s.key.clone();
    let producer = tokio::spawn(async move {
        let c = reqwest::Client::new();
        let mut accepted = Vec::new();
        for i in 0..2000 {
            let res = c
                .post(format!("{base}/v1/events"))
                .bearer_auth(&key)
                .body(format!(r#"{{"id":"ev-{i}","type":"t","data":{{"i":{i}}}}}"#))
                .send()
                .await;
            match res {
                Ok(r) if r.status().as_u16() == 202 => accepted.push(format!("ev-{i}")),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        accepted
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    s.kill9();
    let accepted = producer.await.unwrap();
    assert!(!accepted.is_empty(), "some events were accepted before the kill");
    s.restart(None);
    for id in &accepted {
        let d = s.settled_deliveries(id, 1, 30).await;
        assert_eq!(d[0]["status"], "Completed");
        assert_eq!(d[0]["attempts"].as_array().unwrap().len(), 1, "each attempt recorded once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_after_routing_before_ack() {
    scenarios::crash_between_steps(&mut Server::start("crash-route"), "route.after_sagas", 1..=1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_after_saga_transition_before_job() {
    scenarios::crash_between_steps(&mut Server::start("crash-saga"), "saga.after_transition", 1..=1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_during_delivery_before_attempt_is_recorded() {
    // The subscriber got the POST, then the process died: the job reappears
    // after its visibility timeout and is delivered again with the same
    // webhook-id; the attempt is recorded once.
    scenarios::crash_between_steps(&mut Server::start("crash-deliver"), "deliver.before_record", 2..=2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_is_required_survives_restart_and_sigterm_stops_cleanly() {
    let mut s = Server::start("restart");
    let key = s.key.clone();
    s.restart(None);
    assert_eq!(s.key, key, "the generated key is stored");
    let (st, _) = s.get("/v1/subscriptions").await;
    assert_eq!(st, 200);
    let (st, v) = s.call_with_key("POST", "/v1/events", Some(b"{}"), None).await;
    assert_eq!(st, 401, "{v}");
    assert_eq!(v["error"]["code"], "unauthorized");
    let (st, _) = s.call_with_key("GET", "/v1/subscriptions", None, Some("wrong")).await;
    assert_eq!(st, 401);
    let status = s.terminate();
    assert!(status.success(), "SIGTERM exits cleanly: {status}");
}

// ------------------------------------------------- Part A: finding events
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_found_by_every_filter_and_cursor_walks_see_each_once() {
    scenarios::events_are_found_by_every_filter_and_cursor_walks_see_each_once(&Server::start("events_find")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_found_by_delivery_outcome() {
    scenarios::events_are_found_by_delivery_outcome(&Server::start("events_outcome")).await;
}

// ----- Audit trail, failing endpoints, operational events (issue 11, helper C)

#[tokio::test]
async fn audit_records_every_action_once_with_its_actor() {
    let s = Server::start_with(
        "audit",
        &["--breaker-failures", "3", "--breaker-cool-down-ms", "1000", "--breaker-max-cool-down-ms", "2000"],
    );
    scenarios::audit_records_every_action_once_with_its_actor(&s).await;
}

#[tokio::test]
async fn failing_endpoint_is_disabled_and_operational_events_are_published() {
    let s = Server::start_with("failing", &["--disable-after", "3s"]);
    scenarios::failing_endpoint_is_disabled_and_operational_events_are_published(&s).await;
}

/// Named API keys: the audit trail records the key's name, and the `X-Actor`
/// header after it only with `--trust-actor-header`; without it the header
/// is ignored.
#[tokio::test]
async fn named_keys_and_a_trusted_actor_header_are_the_audit_actor() {
    let r = Receiver::start().await;
    let trusted = Server::start_with("keys", &["--api-key", "ops=sekret-ops", "--trust-actor-header"]);
    assert_eq!(trusted.key, "sekret-ops");
    let body = json!({"callback_url": r.url("/k", Behaviour::Ok), "event_types": ["k"]}).to_string();
    let (st, sub) = trusted
        .call_with_headers("POST", "/v1/subscriptions", Some(body.as_bytes()), &[("X-Actor", "alice@example.com")])
        .await;
    assert_eq!(st, 201, "{sub}");
    let id = sub["id"].as_str().unwrap();
    let (st, _) = trusted.call("DELETE", &format!("/v1/subscriptions/{id}"), None).await;
    assert_eq!(st, 204);
    let (_, v) = trusted.get(&format!("/v1/audit?subscription_id={id}&action=subscription.created")).await;
    assert_eq!(v["items"][0]["actor"], "key:ops as `alice@example.com`", "shown quoted (Api::actor): {v}");
    let (_, v) = trusted.get(&format!("/v1/audit?subscription_id={id}&action=subscription.deleted")).await;
    assert_eq!(v["items"][0]["actor"], "key:ops", "{v}");
    let (st, _) = trusted.call_with_key("GET", "/v1/audit", None, Some("not-a-key")).await;
    assert_eq!(st, 401);

    let untrusted = Server::start("keys-untrusted");
    let (st, sub) = untrusted
        .call_with_headers("POST", "/v1/subscriptions", Some(body.as_bytes()), &[("X-Actor", "mallory")])
        .await;
    assert_eq!(st, 201, "{sub}");
    let id = sub["id"].as_str().unwrap();
    let (_, v) = untrusted.get(&format!("/v1/audit?subscription_id={id}&action=subscription.created")).await;
    assert_eq!(v["items"][0]["actor"], "key:default", "the header is ignored unless trusted: {v}");
}

// ---------------------------------------------------------------------------
// Issue 11, part B: dead letters at scale, bulk jobs, replays.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_listed_by_every_filter_and_walked_once() {
    scenarios::dead_letters_are_listed_by_every_filter_and_walked_once(&Server::start("dl-filters")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_skip_by_filter_and_bad_input() {
    scenarios::bulk_skip_by_filter_and_bad_input(&Server::start("bulk-skip")).await;
}

/// kill -9 of `hookline serve` half way through the fifth of ten pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_requeue_of_1000_survives_kill9_half_way() {
    scenarios::bulk_requeue_survives_a_crash_half_way(&mut Server::start("bulk-requeue"), 1000, "bulk.half_page.page5")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_job_by_event_id_and_bad_input() {
    scenarios::replay_job_by_event_id_and_bad_input(&Server::start("replay-job")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_jobs_by_partition_key_and_by_time_range() {
    scenarios::replay_jobs_by_partition_key_and_by_time_range(&Server::start("replay-range")).await;
}
