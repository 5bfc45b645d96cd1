//! Every test of the AWS backend, in one binary: the Lambda handlers over
//! DynamoDB and SQS in the emulator (`make test` starts it and sets
//! `AWS_ENDPOINT_URL`), driven in-process as Lambda's event source mappings
//! would, under the strict checker; plus the static checks of
//! `template.yaml`. The scenario suites are listed once in their modules of
//! `hookline_tests` and run here and in `tests/tests/serve` alike.

mod cli_ops;
mod console;
mod crash;
mod e2e;
mod input;
mod keys;
mod ports;
mod secrets;
mod stages;
mod template_policies;
mod waits;

hookline_tests::both_backend_suites!(aws);
