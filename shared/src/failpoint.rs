//! Crash injection for tests. The armed points are a [`Failpoints`] object
//! owned by the stage context ([`crate::context::Hookline::failpoints`]), so
//! pipelines running side by side in one process (the in-process AWS tests)
//! each have their own and never trip over each other's.
//!
//! `hookline serve` fills its context's object once at start-up from
//! `HOOKLINE_FAILPOINT=<name>` ([`Failpoints::from_env`]): the process
//! aborts (as `kill -9` would) the first time it reaches that point, so
//! tests can crash a stage between any two of its writes. In-process tests
//! of the Lambda handlers use [`Failpoints::arm_panic`] on their pipeline's
//! context instead: the next handler to reach the point panics, as a
//! crashed invocation would. Unarmed, a hit costs one uncontended lock.
//!
//! Failure injection: `HOOKLINE_FAILPOINT=<name>[@<key>]*<n>`
//! (comma-separated with others), or [`Failpoints::arm_failures`]
//! in-process, makes the next `n` calls of [`Failpoints::fails`] for that
//! name (and key: an event id) answer `true`, so the stage there fails (or
//! loses a message) as a flaky store or queue would, without crashing.
//!
//! All of it exists only with the `failpoints` feature (the test suite and
//! `make test`'s `hookline` build turn it on); otherwise [`Failpoints`] is
//! an empty type whose every point is an empty inline function.

/// The failpoints armed in one stage context. Without the `failpoints`
/// feature: an empty type that never fires.
#[cfg(not(feature = "failpoints"))]
#[derive(Debug, Default)]
pub struct Failpoints;

#[cfg(not(feature = "failpoints"))]
impl Failpoints {
    /// Without the `failpoints` feature: nothing armed.
    #[inline(always)]
    pub fn from_env() -> Self {
        Failpoints
    }

    /// Without the `failpoints` feature: does nothing.
    #[inline(always)]
    pub fn hit(&self, _name: &str) {}

    /// Without the `failpoints` feature: never fails.
    #[inline(always)]
    pub fn fails(&self, _name: &str, _key: &str) -> bool {
        false
    }
}

#[cfg(feature = "failpoints")]
pub use armed::Failpoints;

#[cfg(feature = "failpoints")]
mod armed {
    use std::sync::{Mutex, MutexGuard};

    /// The failpoints armed in one stage context: an abort point (from
    /// `HOOKLINE_FAILPOINT`), a panic point armed in-process, and counted
    /// failures.
    #[derive(Debug, Default)]
    pub struct Failpoints {
        /// Abort the process on reaching this point (`hookline serve`).
        abort_at: Option<String>,
        /// Panic once on reaching this point (in-process tests).
        panic_at: Mutex<Option<String>>,
        /// Failures left per `name` or `name@key`.
        failures: Mutex<Vec<(String, u32)>>,
    }

    fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    impl Failpoints {
        /// The points `HOOKLINE_FAILPOINT` arms: `<name>` aborts the
        /// process there; `<name>[@<key>]*<n>` (comma-separated) fails `n`
        /// times. Read once, when the process starts.
        pub fn from_env() -> Self {
            let spec = std::env::var("HOOKLINE_FAILPOINT").unwrap_or_default();
            let mut fp = Failpoints::default();
            if !spec.is_empty() && !spec.contains('*') {
                fp.abort_at = Some(spec);
                return fp;
            }
            for part in spec.split(',') {
                if let Some((name, n)) = part.split_once('*') {
                    if let Ok(n) = n.trim().parse() {
                        fp.arm_failures(name.trim(), n);
                    }
                }
            }
            fp
        }

        /// Makes the next [`Failpoints::hit`] of `name` panic, once.
        pub fn arm_panic(&self, name: &str) {
            *lock(&self.panic_at) = Some(name.to_string());
        }

        /// Is a panic still armed (not yet reached)?
        pub fn panic_armed(&self) -> bool {
            lock(&self.panic_at).is_some()
        }

        /// Makes the next `times` calls of [`Failpoints::fails`] for `name`
        /// (`name@key`: only with that key) answer `true`.
        pub fn arm_failures(&self, name: &str, times: u32) {
            lock(&self.failures).push((name.to_string(), times));
        }

        /// Should the operation at failpoint `name`, about `key` (an event
        /// id), fail this time? Counts down an armed failure; `false` when
        /// none is armed (the normal case).
        pub fn fails(&self, name: &str, key: &str) -> bool {
            let mut f = lock(&self.failures);
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

        /// Aborts the process if the failpoint `name` is armed from the
        /// environment; panics if it is armed in-process.
        pub fn hit(&self, name: &str) {
            if self.abort_at.as_deref() == Some(name) {
                eprintln!("hookline: failpoint {name} reached; aborting");
                std::process::abort();
            }
            let mut armed = lock(&self.panic_at);
            if armed.as_deref() == Some(name) {
                *armed = None;
                drop(armed);
                panic!("hookline: failpoint {name} reached; crashing this invocation");
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::Failpoints;

        #[test]
        fn two_contexts_keep_their_own_failpoints() {
            let (a, b) = (Failpoints::default(), Failpoints::default());
            a.arm_failures("x@e1", 1);
            assert!(!b.fails("x", "e1"), "armed in the other context");
            assert!(!a.fails("x", "e2"), "another key");
            assert!(a.fails("x", "e1"));
            assert!(!a.fails("x", "e1"), "counted down");
            b.arm_panic("p");
            assert!(b.panic_armed() && !a.panic_armed());
            a.hit("p");
            assert!(std::panic::catch_unwind(|| b.hit("p")).is_err());
            assert!(!b.panic_armed());
        }
    }
}
