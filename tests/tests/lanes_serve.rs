//! Ordered lanes cannot wedge (`hookline_tests::lane_scenarios`) on
//! `hookline serve`: a real process on its own SQLite file, with a
//! reconciler every second and a stall margin of 2 s.

use hookline_tests::lane_scenarios;
use hookline_tests::Server;

fn server(tag: &str) -> Server {
    Server::start_with(tag, &["--reconcile-interval", "1s", "--stall-margin", "2s"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_head_is_taken_out() {
    lane_scenarios::missing_head_is_taken_out(&server("lanes_missing_head")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_routing_is_looked_at_with_backoff_then_skipped() {
    lane_scenarios::lost_routing_is_looked_at_with_backoff_then_skipped(&mut server("lanes_gap")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_behind_a_blocking_dead_letter_is_not_stalled_and_ends_with_the_subscription() {
    lane_scenarios::waiting_behind_a_blocking_dead_letter_is_not_stalled_and_ends_with_the_subscription(&server(
        "lanes_blocked",
    ))
    .await;
}
