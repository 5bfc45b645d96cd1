//! The wait scenarios (`hookline_tests::wait_scenarios`) on `hookline
//! serve`: a real process on its own SQLite file, real HTTP, a real
//! receiver.

use hookline_tests::{wait_scenarios, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_open_dead_letters_at_the_last_scheduled_attempt() {
    let s = Server::start_with(
        "breaker-deadline",
        &["--breaker-failures", "3", "--breaker-cool-down-ms", "60000", "--breaker-max-cool-down-ms", "60000"],
    );
    wait_scenarios::breaker_open_dead_letters_at_the_last_scheduled_attempt(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_held_past_the_stall_margin_posts_once() {
    let s = Server::start_with(
        "held-once",
        &[
            "--breaker-failures",
            "3",
            "--breaker-cool-down-ms",
            "10000",
            "--breaker-max-cool-down-ms",
            "10000",
            "--stall-margin",
            "2s",
            "--reconcile-interval",
            "1s",
        ],
    );
    wait_scenarios::a_retry_held_past_the_stall_margin_posts_once(&s).await;
}
