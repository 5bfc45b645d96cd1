//! Scenarios of hostile or malformed input, run on both backends
//! (`tests/input_serve.rs`, `tests/input_aws.rs`).
