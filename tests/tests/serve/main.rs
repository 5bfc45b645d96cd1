//! Every test of the SQLite backend, in one binary: a real `hookline serve`
//! process (built with `--features failpoints`; `make test` builds it) on
//! its own SQLite file, real HTTP, a real receiver; crashes are aborts at
//! failpoints, then a restart. The scenario suites are listed once in their
//! modules of `hookline_tests` and run here and in `tests/tests/aws` alike.

mod cli_ops;
mod e2e;
mod fairness;
mod listener;
mod ports;
mod retention;
mod stages;

/// The scenario suite (`hookline_tests::scenarios`).
mod scenarios {
    hookline_tests::scenario_suite_tests!(serve);
}

/// Input validation (`hookline_tests::input_scenarios`).
mod input_scenarios {
    hookline_tests::input_scenario_tests!(serve);
}

/// Ordered lanes cannot wedge (`hookline_tests::lane_scenarios`).
mod lanes {
    hookline_tests::lane_scenario_tests!(serve);
}

/// A replay never crosses tenants (`hookline_tests::tenancy_scenarios`).
mod tenancy {
    hookline_tests::tenancy_scenario_tests!(serve);
}

/// Waits (`hookline_tests::wait_scenarios`).
mod wait_scenarios {
    hookline_tests::wait_scenario_tests!(serve);
}
