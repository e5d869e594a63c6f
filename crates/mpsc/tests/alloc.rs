//! Steady state does not allocate: blocks are recycled by the consumer.
//!
//! A counting global allocator (this test binary only) counts every
//! allocation made by any thread.
#![cfg(not(stepsched_loom))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread;

use stepsched_mpsc::Receiver;

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The largest batch: the queue keeps up to 1024 spare slots linked, so
/// batches up to about 1000 are served without allocating.
const BATCH: u64 = 960;

fn allocations() -> usize {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// The allocation counter is global, and the test harness allocates when it
/// reports a finished test, so this binary has a single test that runs the
/// scenarios one after the other.
#[test]
fn steady_state_does_not_allocate() {
    single_thread();
    across_threads();
}

fn single_thread() {
    let mut rx = Receiver::<u64>::new();
    let tx = rx.sender();
    let mut out = Vec::with_capacity(1024);
    let mut round = |rx: &mut Receiver<u64>, n: u64| {
        for i in 0..n {
            tx.push(i).unwrap();
        }
        out.clear();
        assert_eq!(rx.drain_into(&mut out), n as usize);
    };
    // Warm up with the same pattern: the list grows to what it needs.
    let batch = |r: u64| 1 + (r * 31) % BATCH;
    for r in 0..500 {
        round(&mut rx, batch(r));
    }
    let before = allocations();
    for r in 0..5_000u64 {
        round(&mut rx, batch(r));
    }
    assert_eq!(allocations() - before, 0, "steady-state pushes allocated");
}

fn across_threads() {
    // A producer thread and the consumer in lockstep batches (a handshake on
    // two atomics, since blocking channels may allocate): after the warm-up
    // every block the producer needs is a recycled one.
    let mut rx = Receiver::<u64>::new();
    let tx = rx.sender();
    // `order` holds the size of the batch to push (0: none, u64::MAX: stop);
    // the producer zeroes it when the batch is pushed.
    let order = AtomicU64::new(0);
    thread::scope(|s| {
        s.spawn(|| {
            loop {
                let n = match order.load(Ordering::Acquire) {
                    0 => {
                        thread::yield_now();
                        continue;
                    }
                    u64::MAX => return,
                    n => n,
                };
                for i in 0..n {
                    tx.push(i).unwrap();
                }
                order.store(0, Ordering::Release);
            }
        });
        let mut out = Vec::with_capacity(1024);
        let mut round = |rx: &mut Receiver<u64>, n: u64| {
            order.store(n, Ordering::Release);
            while order.load(Ordering::Acquire) != 0 {
                thread::yield_now();
            }
            out.clear();
            assert_eq!(rx.drain_into(&mut out), n as usize);
        };
        let batch = |r: u64| 1 + (r * 17) % BATCH;
        for r in 0..200 {
            round(&mut rx, batch(r));
        }
        let before = allocations();
        for r in 0..2_000u64 {
            round(&mut rx, batch(r));
        }
        let allocated = allocations() - before;
        order.store(u64::MAX, Ordering::Release);
        assert_eq!(allocated, 0, "steady-state pushes allocated");
    });
}
