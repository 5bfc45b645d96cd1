//! Every test of the AWS backend, in one binary: the Lambda handlers over
//! DynamoDB and SQS in the emulator (`make test` starts it and sets
//! `AWS_ENDPOINT_URL`), driven in-process as Lambda's event source mappings
//! would, under the strict checker; plus the static checks of
//! `template.yaml`. The scenario suites are listed once in their modules of
//! `hookline_tests` and run here and in `tests/tests/serve` alike.

mod cli_ops;
mod crash;
mod e2e;
mod input;
mod ports;
mod stages;
mod template_policies;
mod waits;

/// The scenario suite (`hookline_tests::scenarios`).
mod scenarios {
    hookline_tests::scenario_suite_tests!(aws);
}

/// Input validation (`hookline_tests::input_scenarios`).
mod input_scenarios {
    hookline_tests::input_scenario_tests!(aws);
}

/// Ordered lanes cannot wedge (`hookline_tests::lane_scenarios`).
mod lanes {
    hookline_tests::lane_scenario_tests!(aws);
}

/// A replay never crosses tenants (`hookline_tests::tenancy_scenarios`).
mod tenancy {
    hookline_tests::tenancy_scenario_tests!(aws);
}

/// Waits (`hookline_tests::wait_scenarios`).
mod wait_scenarios {
    hookline_tests::wait_scenario_tests!(aws);
}
