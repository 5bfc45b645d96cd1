//! Ordered lanes cannot wedge (`hookline_tests::lane_scenarios`) on the AWS
//! backend: the Lambda handlers over DynamoDB and SQS in the emulator, under
//! the strict checker (each function's IAM role included).

use hookline_tests::aws_pipeline::AwsPipeline;
use hookline_tests::lane_scenarios;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_head_is_taken_out() {
    lane_scenarios::missing_head_is_taken_out(&AwsPipeline::start("lanes_missing_head").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_routing_is_looked_at_with_backoff_then_skipped() {
    lane_scenarios::lost_routing_is_looked_at_with_backoff_then_skipped(&mut AwsPipeline::start("lanes_gap").await)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_behind_a_blocking_dead_letter_is_not_stalled_and_ends_with_the_subscription() {
    lane_scenarios::waiting_behind_a_blocking_dead_letter_is_not_stalled_and_ends_with_the_subscription(
        &AwsPipeline::start("lanes_blocked").await,
    )
    .await;
}
