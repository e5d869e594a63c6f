//! Benchmarks live in `benches/`; run them with `cargo xtask bench`.
//!
//! The library holds what the benchmarks and the stress run share: a
//! counting global allocator, for the bytes a process holds.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Whether the allocator counts (only during a memory measurement, so
/// timed code pays one uncontended load per allocation, no RMW).
static COUNTING: AtomicBool = AtomicBool::new(false);
/// Net bytes allocated while counting (wrapping: frees of older blocks may
/// take it below its start; only differences are read).
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting live bytes between [`CountingAlloc::start`]
/// and [`CountingAlloc::stop`]. Install it with
/// `#[global_allocator] static A: CountingAlloc = CountingAlloc;`.
#[derive(Debug)]
pub struct CountingAlloc;

impl CountingAlloc {
    /// Starts counting; returns the count now, to subtract from a later
    /// [`live`](Self::live).
    pub fn start() -> usize {
        // SeqCst: the measurement's edges, rare; the reader then waits for
        // the measured threads through the scheduler (a latch, `stats()`),
        // which orders their allocations before its read.
        COUNTING.store(true, Ordering::SeqCst);
        Self::live()
    }

    /// Stops counting.
    pub fn stop() {
        // SeqCst: as in `start`.
        COUNTING.store(false, Ordering::SeqCst);
    }

    /// Live bytes counted so far (a wrapping count: subtract the value
    /// `start` returned).
    pub fn live() -> usize {
        // Relaxed: see `grew`.
        LIVE.load(Ordering::Relaxed)
    }

    fn grew(size: usize) {
        // Relaxed: a statistic; its reader synchronizes with every
        // allocating thread before reading (see `start`), and nothing is
        // published through it.
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(size, Ordering::Relaxed);
        }
    }

    fn shrank(size: usize) {
        // Relaxed: as in `grew`.
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(size, Ordering::Relaxed);
        }
    }
}

// SAFETY: every method forwards to `System` with the arguments it was given,
// so the `GlobalAlloc` contract is `System`'s; the counting touches no
// memory the allocator hands out.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract for `layout`.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            Self::grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc_zeroed`'s contract for `layout`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            Self::grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller passes a block this allocator (that is,
        // `System`) returned for `layout`.
        unsafe { System.dealloc(ptr, layout) };
        Self::shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller passes a block `System` returned for `layout`
        // and a valid `new_size`.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            Self::shrank(layout.size());
            Self::grew(new_size);
        }
        new
    }
}
