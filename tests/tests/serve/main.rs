//! Every test of the SQLite backend, in one binary: a real `hookline serve`
//! process (built with `--features failpoints`; `make test` builds it) on
//! its own SQLite file, real HTTP, a real receiver; crashes are aborts at
//! failpoints, then a restart. The scenario suites are listed once in their
//! modules of `hookline_tests` and run here and in `tests/tests/aws` alike.

mod backup;
mod cli_ops;
mod e2e;
mod fairness;
mod listener;
mod ports;
mod retention;
mod runtime;
mod secrets;
mod stages;

hookline_tests::both_backend_suites!(serve);
