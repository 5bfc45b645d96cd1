//! The stage scenarios (`hookline_tests::stages`) on SQLite: the stage
//! functions over a real database file, each case on its own file.

use hookline_tests::stages::Rig;

macro_rules! case {
    ($name:ident) => {
        case!(stages::$name);
    };
    ($module:ident :: $name:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            hookline_tests::$module::$name(&Rig::sqlite(stringify!($name)).await).await;
        }
    };
}

hookline_tests::for_each_stage_scenario!(case);

hookline_tests::for_each_destination_stage_scenario!(case);

hookline_tests::isolation_tests!(sqlite);

hookline_tests::idempotency_rig_tests!(sqlite);
