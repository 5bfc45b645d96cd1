//! The tenancy scenarios (`hookline_tests::tenancy_scenarios`: a replay
//! never crosses tenants) on `hookline serve`: a real process on its own
//! SQLite file, real HTTP, a real receiver.

use hookline_tests::tenancy_scenarios;
use hookline_tests::Server;

macro_rules! on_serve {
    ($($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            tenancy_scenarios::$name(&Server::start(stringify!($name))).await;
        }
    )*};
}

on_serve!(
    single_event_replay_to_another_tenants_subscription_is_refused,
    time_range_replay_to_a_tenants_subscription_delivers_only_its_events,
    partition_replay_to_a_tenants_subscription_delivers_only_its_events,
    bulk_replay_job_to_a_tenants_subscription_delivers_only_its_events,
);
