//! What survives a fatal end: a hang (the watchdog aborts), a stack
//! overflow (Rust's handler aborts), an allocation past the hard cap (the
//! allocation error aborts). Each ends in `SIGABRT`, whose handler here
//! writes the input in flight to the file named by [`arm`] before the
//! process dies, so that the input is kept as a regression like a panic's.
//!
//! The handler only calls async-signal-safe functions (`open`, `write`,
//! `close`, `signal`, `raise`) on memory prepared beforehand.

use std::ffi::CString;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::SeqCst};
use std::sync::Once;

/// The input in flight: its bytes and length (null when none).
static INPUT: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static INPUT_LEN: AtomicUsize = AtomicUsize::new(0);
/// Where to write it: a NUL-terminated path (null: nowhere).
static PATH: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());

static INSTALL: Once = Once::new();

/// Names the file the input in flight goes to if the process aborts
/// (installs the handler the first time).
pub fn arm(path: &std::path::Path) {
    INSTALL.call_once(|| {
        // SAFETY: installs a handler that only uses async-signal-safe calls.
        unsafe {
            libc::signal(libc::SIGABRT, on_abort as *const () as libc::sighandler_t);
        }
    });
    let c = CString::new(path.as_os_str().as_encoded_bytes()).expect("a path without NUL");
    let old = PATH.swap(c.into_raw(), SeqCst);
    if !old.is_null() {
        // SAFETY: made by `CString::into_raw` above.
        drop(unsafe { CString::from_raw(old) });
    }
}

/// Points at the input about to run (`input` must stay alive and unmoved
/// until the next call or [`clear`]).
pub fn in_flight(input: &[u8]) {
    INPUT_LEN.store(input.len(), SeqCst);
    INPUT.store(input.as_ptr() as *mut u8, SeqCst);
}

/// No input in flight.
pub fn clear() {
    INPUT.store(std::ptr::null_mut(), SeqCst);
}

extern "C" fn on_abort(_: libc::c_int) {
    let input = INPUT.load(SeqCst);
    let path = PATH.load(SeqCst);
    if !input.is_null() && !path.is_null() {
        // SAFETY: async-signal-safe calls on memory set by `arm` and
        // `in_flight`, which the aborting thread no longer changes.
        unsafe {
            let fd = libc::open(path, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o644);
            if fd >= 0 {
                let mut at = 0;
                let len = INPUT_LEN.load(SeqCst);
                while at < len {
                    let n = libc::write(fd, input.add(at) as *const libc::c_void, len - at);
                    if n <= 0 {
                        break;
                    }
                    at += n as usize;
                }
                libc::close(fd);
                let msg = b"hookline-fuzz: fatal end; the input in flight was saved as a regression\n";
                libc::write(2, msg.as_ptr() as *const libc::c_void, msg.len());
            }
        }
    }
    // SAFETY: back to the default action, then die of it.
    unsafe {
        libc::signal(libc::SIGABRT, libc::SIG_DFL);
        libc::raise(libc::SIGABRT);
    }
}
