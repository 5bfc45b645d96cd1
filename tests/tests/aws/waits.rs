//! The wait costs only the AWS backend can count: a rate-limited backlog
//! costs a constant number of SQS requests and DynamoDB writes per
//! delivered job (counted by the meter on the SDK clients; `hookline serve`
//! has no per-request bill). The wait scenarios both backends run are in
//! `hookline_tests::wait_scenario_tests`.

use hookline_tests::aws_pipeline::AwsPipeline;
use hookline_tests::metering::Meter;
use hookline_tests::wait_scenarios;

/// 40 jobs queued at once for a subscription with `rate_limit: 5`: each
/// books its own start (a batch's jobs in one write) and comes back once at
/// it, so per delivered job the whole pipeline makes at most 8 SQS requests
/// and 5 DynamoDB writes, at most 1 of them to the HealthTable. Without
/// waits a delivery costs 4 writes (the event, the saga, its attempt, its
/// completion) and about 3 SQS requests (the job's send, receive and
/// delete, each batched); the bookings add a write per batch of up to 10
/// jobs and a job's hop to its start one more send, receive and delete
/// share. Before, every waiting job came back with all the others each
/// interval and paid a failed conditional write every time: ~10 HealthTable
/// writes per delivered job at this size, growing with the backlog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limited_backlog_costs_a_constant_per_delivered_job() {
    let meter = Meter::new();
    let sdk = hookline_tests::emulator::aws_config().await;
    let p = AwsPipeline::start_with_clients(
        "rate-backlog",
        meter.dynamodb_client(&sdk),
        meter.sqs_client(&sdk),
        &hookline_tests::pipeline::Settings::default(),
    )
    .await;
    let c = wait_scenarios::rate_limited_backlog(&p, &meter, 40, 5.0).await;
    eprintln!("{c:#?}");
    assert!(c.sqs_per_job() <= 8.0, "{:.2} SQS requests per delivered job: {c:#?}", c.sqs_per_job());
    assert!(c.writes_per_job() <= 5.0, "{:.2} DynamoDB writes per delivered job: {c:#?}", c.writes_per_job());
    assert!(
        c.health_writes_per_job() <= 1.0,
        "{:.2} HealthTable writes per delivered job: {c:#?}",
        c.health_writes_per_job()
    );
}
