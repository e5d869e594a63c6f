//! The memory scenario: idle processes, counted by a counting global
//! allocator (not RSS, which earlier scenarios' heap growth would hide),
//! each within a per-process bound, checked in every run.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use stepsched::{Builder, Context, Error, Events, Process, Scheduler, Status, StepOutput};

use crate::Opts;
use crate::report::{Outcome, progress};

/// The most an idle process may cost, in bytes: its slot, state cell and
/// run-queue entry, with room for allocator rounding (a tokio task with an
/// unbounded channel costs 1 056).
pub(crate) const MAX_IDLE_BYTES: usize = 1024;

/// Whether the allocator counts (only while this scenario measures).
static COUNTING: AtomicBool = AtomicBool::new(false);
/// Net bytes allocated while counting (wrapping: frees of older blocks may
/// take it below its start; only differences are read).
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting live bytes while [`COUNTING`] is set.
pub(crate) struct CountingAlloc;

fn grew(size: usize) {
    // Relaxed: a statistic, read after the counted threads have passed a
    // point the reader synchronizes with (every process parked idle, read
    // through the scheduler's stats); nothing is published through it.
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

// SAFETY: every method forwards to `System` with the arguments it was
// given, so the `GlobalAlloc` contract is `System`'s; the counting touches
// no memory the allocator hands out.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract for `layout`.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc_zeroed`'s contract for `layout`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller passes a block `System` returned for `layout`.
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller passes a block `System` returned for `layout`
        // and a valid `new_size`.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            shrank(layout.size());
            grew(new_size);
        }
        new
    }
}

/// A process that idles until cancelled.
struct Idle;

impl Process for Idle {
    type Input = ();
    type Message = ();
    type Response = ();
    type Command = String;
    type Output = ();

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        _cx: &mut Context<'_, Self>,
        events: Events<'_, ()>,
        out: &mut StepOutput<String, ()>,
    ) -> Result<(), Error> {
        for e in events {
            if e.is_cancel() {
                return Err(Error::Cancelled);
            }
        }
        out.set_status(Status::Idle);
        Ok(())
    }
}

/// `--processes` idle processes (at least 20 000): the bytes they hold,
/// each under [`MAX_IDLE_BYTES`]; then every one ends Cancelled at
/// shutdown.
pub(crate) fn run(opts: &Opts) -> Result<Outcome, String> {
    let n = opts.processes.max(20_000);
    let scheduler: Scheduler<Idle> = Builder::new()
        .workers(opts.workers)
        .build()
        .map_err(|e| format!("build: {e}"))?;
    let mut joins = Vec::with_capacity(n);
    // Relaxed: see `grew`.
    COUNTING.store(true, Ordering::Relaxed);
    let before = LIVE.load(Ordering::Relaxed);
    for i in 0..n {
        let pid = scheduler.allocate_pid();
        joins.push(
            scheduler
                .submit(pid, Idle, "idle", ())
                .map_err(|e| format!("submit idle: {e}"))?,
        );
        if i % 1024 == 0 {
            progress(i as u64);
        }
    }
    // Every process parked idle: its first step ran and nothing of it is
    // in flight.
    while scheduler.stats().idle < n {
        std::thread::yield_now();
    }
    let bytes = LIVE.load(Ordering::Relaxed).wrapping_sub(before);
    COUNTING.store(false, Ordering::Relaxed);
    // The process handles are the caller's, not the processes'.
    let handles = joins.capacity() * size_of::<stepsched::JoinHandle<Idle>>();
    let per = bytes.saturating_sub(handles) / n;
    progress(n as u64);
    println!(
        "memory: {} idle processes hold {} bytes, {per} bytes per process (bound {MAX_IDLE_BYTES})",
        crate::report::count(n as u64),
        crate::report::count(bytes.saturating_sub(handles) as u64)
    );
    let report = scheduler.shutdown(Duration::from_secs(30));
    for j in joins {
        if !matches!(j.join(), Err(Error::Cancelled)) {
            return Err("an idle process did not end Cancelled".into());
        }
    }
    if report.forced != 0 {
        return Err(format!("{} idle processes ignored cancel", report.forced));
    }
    if per > MAX_IDLE_BYTES {
        return Err(format!(
            "an idle process costs {per} bytes, over the {MAX_IDLE_BYTES}-byte bound"
        ));
    }
    Ok(Outcome {
        checked: "idle bytes per process within bound; every one cancelled at shutdown",
        count: n as u64,
        unit: "processes",
    })
}
