//! Crash injection for tests: `HOOKLINE_FAILPOINT=<name>` makes the process
//! abort (as `kill -9` would) the first time it reaches that point, so tests
//! can crash a stage between any two of its writes. In-process tests of the
//! Lambda handlers use [`arm_panic`] instead: the next handler to reach the
//! point panics, as a crashed invocation would. Unarmed, a hit costs one
//! cached comparison and one uncontended lock.

use std::sync::{Mutex, OnceLock};

static PANIC_AT: Mutex<Option<String>> = Mutex::new(None);

/// Makes the next [`hit`] of `name` (in this process) panic, once.
pub fn arm_panic(name: &str) {
    *PANIC_AT.lock().unwrap_or_else(|e| e.into_inner()) = Some(name.to_string());
}

/// Is a panic still armed (not yet reached)?
pub fn panic_armed() -> bool {
    PANIC_AT.lock().unwrap_or_else(|e| e.into_inner()).is_some()
}

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
    let mut armed = PANIC_AT.lock().unwrap_or_else(|e| e.into_inner());
    if armed.as_deref() == Some(name) {
        *armed = None;
        drop(armed);
        panic!("hookline: failpoint {name} reached; crashing this invocation");
    }
}
