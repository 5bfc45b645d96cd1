//! Crash injection for tests: `HOOKLINE_FAILPOINT=<name>` makes the process
//! abort (as `kill -9` would) the first time it reaches that point, so tests
//! can crash a stage between any two of its writes. Unset, it costs one
//! cached comparison.

use std::sync::OnceLock;

fn armed() -> Option<&'static str> {
    static NAME: OnceLock<Option<String>> = OnceLock::new();
    NAME.get_or_init(|| std::env::var("HOOKLINE_FAILPOINT").ok().filter(|s| !s.is_empty())).as_deref()
}

/// Aborts the process if the failpoint `name` is armed.
pub fn hit(name: &str) {
    if armed() == Some(name) {
        eprintln!("hookline: failpoint {name} reached; aborting");
        std::process::abort();
    }
}
