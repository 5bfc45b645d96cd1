//! The tenancy scenarios (`hookline_tests::tenancy_scenarios`: a replay
//! never crosses tenants) on the AWS backend: the Lambda handlers over
//! DynamoDB and SQS in the emulator.

use hookline_tests::aws_pipeline::AwsPipeline;
use hookline_tests::tenancy_scenarios;

macro_rules! on_aws {
    ($($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            tenancy_scenarios::$name(&AwsPipeline::start(stringify!($name)).await).await;
        }
    )*};
}

on_aws!(
    single_event_replay_to_another_tenants_subscription_is_refused,
    time_range_replay_to_a_tenants_subscription_delivers_only_its_events,
    partition_replay_to_a_tenants_subscription_delivers_only_its_events,
    bulk_replay_job_to_a_tenants_subscription_delivers_only_its_events,
);
