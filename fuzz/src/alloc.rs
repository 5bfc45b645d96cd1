//! A counting global allocator: the bytes live now and the most live since
//! [`start`], so the runner can say what one input cost at its peak and
//! refuse one that went past the bound. Past [`HARD_CAP`] above the
//! baseline an allocation fails, which aborts the process (and the fatal
//! handler saves the input) before the machine runs out of memory.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

/// Bytes live now.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The most bytes live since [`start`].
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Live bytes when the current input started.
static BASE: AtomicUsize = AtomicUsize::new(0);
/// Whether an input is running (the hard cap applies only then).
static ARMED: AtomicBool = AtomicBool::new(false);

/// An allocation that takes one input this far above its baseline fails.
pub const HARD_CAP: usize = 1 << 30;

/// The allocator: [`System`], counted.
pub struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !reserve(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = System.alloc(layout);
        if p.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !reserve(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = System.alloc_zeroed(layout);
        if p.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() && !reserve(new_size - layout.size()) {
            return std::ptr::null_mut();
        }
        let p = System.realloc(ptr, layout, new_size);
        if p.is_null() {
            if new_size > layout.size() {
                LIVE.fetch_sub(new_size - layout.size(), Relaxed);
            }
        } else if new_size < layout.size() {
            LIVE.fetch_sub(layout.size() - new_size, Relaxed);
        }
        p
    }
}

/// Counts `n` more live bytes; false (nothing counted) when an input
/// would go past [`HARD_CAP`].
fn reserve(n: usize) -> bool {
    let live = LIVE.fetch_add(n, Relaxed) + n;
    if ARMED.load(Relaxed) && live.saturating_sub(BASE.load(Relaxed)) > HARD_CAP {
        LIVE.fetch_sub(n, Relaxed);
        return false;
    }
    PEAK.fetch_max(live, Relaxed);
    true
}

/// Starts measuring one input: its baseline is what is live now.
pub fn start() {
    let live = LIVE.load(Relaxed);
    BASE.store(live, Relaxed);
    PEAK.store(live, Relaxed);
    ARMED.store(true, Relaxed);
}

/// Stops measuring: the most bytes the input had live at once above its
/// baseline.
pub fn stop() -> usize {
    ARMED.store(false, Relaxed);
    PEAK.load(Relaxed).saturating_sub(BASE.load(Relaxed))
}

/// Bytes live now.
pub fn live() -> usize {
    LIVE.load(Relaxed)
}
