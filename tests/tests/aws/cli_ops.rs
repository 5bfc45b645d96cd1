//! The `hookline` ops commands (`hookline_tests::cli_ops`) against the AWS
//! pipeline in the emulator behind a stand-in for API Gateway, signed with
//! SigV4 (`--aws-region`) as against a deployment. The case list is
//! `hookline_tests::cli_ops_scenario_tests!`, which the serve binary expands
//! too.

hookline_tests::cli_ops_scenario_tests!(aws);
