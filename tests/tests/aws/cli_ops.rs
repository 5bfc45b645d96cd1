//! The `hookline` ops commands (`hookline_tests::cli_ops`) against the AWS
//! pipeline in the emulator behind a stand-in for API Gateway, signed with
//! SigV4 (`--aws-region`) as against a deployment. The same checks on
//! `hookline serve`: `tests/tests/serve/cli_ops.rs`.

use hookline_tests::cli_ops::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_commands_on_aws() {
    let (_p, owned) = on_aws("cli-subs", false, |_| {}).await;
    let env = borrow(&owned);
    subscriptions_commands(&env).await;
    let mut other_key = env.clone();
    other_key.push(("AWS_ACCESS_KEY_ID", "AKIDOTHER"));
    let run = hookline(&["subscriptions", "list"], &other_key);
    assert_eq!(run.code, 1, "403 is neither invalid input nor not found: {}", run.err);
    assert!(run.err.contains("403"), "{}", run.err);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_dead_letters_and_replay_commands_on_aws() {
    let (p, owned) = on_aws("cli-events", false, |_| {}).await;
    events_dead_letters_and_replay_commands(&p, &borrow(&owned)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_list_on_aws() {
    let (p, owned) = on_aws("cli-events-list", false, |_| {}).await;
    events_list(&p, &borrow(&owned)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_command_on_aws() {
    let (p, owned) = on_aws("cli-audit", true, |_| {}).await;
    audit_command(&p, &borrow(&owned), PRINCIPAL).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_bulk_jobs_and_replays_on_aws() {
    let (p, owned) = on_aws("cli-bulk", false, |c| c.breaker.failure_threshold = 100).await;
    lists_bulk_jobs_and_replays(&p, &borrow(&owned)).await;
}
