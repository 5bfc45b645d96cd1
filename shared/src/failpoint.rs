//! Crash injection for tests: `HOOKLINE_FAILPOINT=<name>` makes the process
//! abort (as `kill -9` would) the first time it reaches that point, so tests
//! can crash a stage between any two of its writes. In-process tests of the
//! Lambda handlers use [`arm_panic`] instead: the next handler to reach the
//! point panics, as a crashed invocation would. Unarmed, a hit costs one
//! cached comparison and one uncontended lock.
//!
//! Failure injection: `HOOKLINE_FAILPOINT=<name>[@<key>]*<n>`
//! (comma-separated with others), or [`arm_failures`] in-process, makes the
//! next `n` calls of [`fails`] for that name (and key: an event id, so tests
//! running side by side do not trip over each other) answer `true`, so the
//! stage there fails (or loses a message) as a flaky store or queue would,
//! without crashing.
//!
//! All of it exists only with the `failpoints` feature (the test suite and
//! `make test`'s `hookline` build turn it on); otherwise every point is an
//! empty inline function and nothing of this module is in the binary.

#[cfg(feature = "failpoints")]
pub use armed::{arm_failures, arm_panic, fails, hit, panic_armed};

/// Without the `failpoints` feature: does nothing.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hit(_name: &str) {}

/// Without the `failpoints` feature: never fails.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn fails(_name: &str, _key: &str) -> bool {
    false
}

#[cfg(feature = "failpoints")]
mod armed {
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
        NAME.get_or_init(|| std::env::var("HOOKLINE_FAILPOINT").ok().filter(|s| !s.is_empty() && !s.contains('*')))
            .as_deref()
    }

    static FAILURES: Mutex<Vec<(String, u32)>> = Mutex::new(Vec::new());

    fn failures() -> std::sync::MutexGuard<'static, Vec<(String, u32)>> {
        // Entries are `name` or `name@key`.
        static FROM_ENV: OnceLock<()> = OnceLock::new();
        let mut f = FAILURES.lock().unwrap_or_else(|e| e.into_inner());
        FROM_ENV.get_or_init(|| {
            let spec = std::env::var("HOOKLINE_FAILPOINT").unwrap_or_default();
            for part in spec.split(',') {
                if let Some((name, n)) = part.split_once('*') {
                    if let Ok(n) = n.trim().parse() {
                        f.push((name.trim().to_string(), n));
                    }
                }
            }
        });
        f
    }

    /// Makes the next `times` calls of [`fails`] for `name` (`name@key`: only
    /// with that key) in this process answer `true`.
    pub fn arm_failures(name: &str, times: u32) {
        failures().push((name.to_string(), times));
    }

    /// Should the operation at failpoint `name`, about `key` (an event id),
    /// fail this time? Counts down an armed failure; `false` when none is armed
    /// (the normal case).
    pub fn fails(name: &str, key: &str) -> bool {
        let mut f = failures();
        if f.is_empty() {
            return false;
        }
        let keyed = format!("{name}@{key}");
        match f.iter_mut().find(|(n, left)| (n == name || *n == keyed) && *left > 0) {
            Some((_, left)) => {
                *left -= 1;
                true
            }
            None => false,
        }
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
}
