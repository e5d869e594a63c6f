//! Steady state does not allocate: blocks are recycled by the consumer.
//!
//! A counting global allocator (this test binary only) counts every
//! allocation made by any thread.
#![cfg(not(stepsched_loom))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread;

use stepsched_mpsc::{Receiver, Sender};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
/// Bytes allocated and not yet freed.
static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
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
    a_queue_that_never_grows_is_one_allocation();
    single_thread();
    bursts_drained_in_chunks();
    refused_pushes_claim_nothing();
    across_threads();
    no_block_leaks();
}

/// Every block is freed with the queue, whatever path it took: spares,
/// surplus blocks freed on recycling, blocks grown by racing producers,
/// blocks left behind by a close or a reset, either drop order.
///
/// The producer threads live through the whole check (a thread frees some
/// of its own memory after `join` returns), driven by two counters.
fn no_block_leaks() {
    const PRODUCERS: u64 = 3;
    // The sender the producers use in the current round.
    let current: Mutex<Option<Sender<u64>>> = Mutex::new(None);
    // Rounds started (u64::MAX: stop) and producer-rounds finished.
    let started = AtomicU64::new(0);
    let finished = AtomicU64::new(0);
    thread::scope(|s| {
        for _ in 0..PRODUCERS {
            s.spawn(|| {
                let mut seen = 0;
                loop {
                    let round = started.load(Ordering::Acquire);
                    if round == u64::MAX {
                        return;
                    }
                    if round == seen {
                        thread::yield_now();
                        continue;
                    }
                    seen = round;
                    let tx = current
                        .lock()
                        .unwrap()
                        .clone()
                        .expect("set before the round");
                    for i in 0..(round * 997) % 5000 {
                        if tx.push(i).is_err() {
                            break;
                        }
                    }
                    drop(tx);
                    finished.fetch_add(1, Ordering::Release);
                }
            });
        }
        let mut round = 0u64;
        let mut run_round = |rx: &mut Receiver<u64>, out: &mut Vec<u64>, close: bool| {
            *current.lock().unwrap() = Some(rx.sender());
            round += 1;
            started.store(round, Ordering::Release);
            out.clear();
            rx.drain_into(out);
            if close {
                rx.close();
            }
            while finished.load(Ordering::Acquire) < round * PRODUCERS {
                thread::yield_now();
            }
            *current.lock().unwrap() = None;
        };
        // The first pass warms up what std allocates once (locks, buffers).
        for (pass, receiver_first) in [(0, true), (1, true), (2, false)] {
            let before = LIVE_BYTES.load(Ordering::Relaxed);
            let mut rx = Receiver::<u64>::new();
            let mut out = Vec::new();
            let mut leftovers = Vec::new();
            for r in 0..20 {
                run_round(&mut rx, &mut out, r % 4 == 1);
                if r % 3 == 0 {
                    leftovers.clear();
                    rx.reset(&mut leftovers);
                }
            }
            let tx = rx.sender();
            for i in 0..3000 {
                tx.push(i).unwrap();
            }
            drop(out);
            drop(leftovers);
            if receiver_first {
                drop(rx);
                drop(tx);
            } else {
                drop(tx);
                drop(rx);
            }
            if pass > 0 {
                assert_eq!(LIVE_BYTES.load(Ordering::Relaxed), before, "memory leaked");
            }
        }
        started.store(u64::MAX, Ordering::Release);
    });
}

/// The first block lives in the queue's shared state: a queue that
/// receives a few values in its life (the queue of a short-lived process
/// in a scheduler) is one allocation, made and freed once.
fn a_queue_that_never_grows_is_one_allocation() {
    let mut out = Vec::with_capacity(4);
    let before = allocations();
    let live = LIVE_BYTES.load(Ordering::Relaxed);
    let mut rx = Receiver::<u64>::new();
    let tx = rx.sender();
    for i in 0..4 {
        tx.push(i).unwrap();
    }
    assert_eq!(rx.drain_into(&mut out), 4);
    assert_eq!(
        allocations() - before,
        1,
        "a small queue allocated more than once"
    );
    drop(tx);
    drop(rx);
    assert_eq!(LIVE_BYTES.load(Ordering::Relaxed), live, "memory leaked");
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
    // Warm up with one full cycle of the same pattern (31 is prime to
    // `BATCH`, so every size from 1 to `BATCH` comes up once): the list
    // grows to what the largest batch needs.
    let batch = |r: u64| 1 + (r * 31) % BATCH;
    for r in 0..BATCH {
        round(&mut rx, batch(r));
    }
    let before = allocations();
    for r in 0..5_000u64 {
        round(&mut rx, batch(r));
    }
    assert_eq!(allocations() - before, 0, "steady-state pushes allocated");
}

/// A burst larger than the minimum of spares, drained in chunks of 256
/// (as the scheduler drains a process's queue between steps): once one
/// burst has been seen, the next ones are served by recycled blocks. Sized
/// by one chunk instead of the burst, the spares fell short by the rest of
/// the burst each time, allocated again by the producer and freed again by
/// the consumer.
fn bursts_drained_in_chunks() {
    const BURST: u64 = 4096;
    let mut rx = Receiver::<u64>::new();
    let tx = rx.sender();
    let mut out = Vec::with_capacity(256);
    let mut burst = |rx: &mut Receiver<u64>| {
        for i in 0..BURST {
            tx.push(i).unwrap();
        }
        let mut taken = 0;
        loop {
            out.clear();
            let n = rx.drain_up_to(&mut out, 256);
            if n == 0 {
                break;
            }
            taken += n as u64;
        }
        assert_eq!(taken, BURST);
    };
    // The first burst sizes the spares; the second leaves them linked.
    burst(&mut rx);
    burst(&mut rx);
    let before = allocations();
    for _ in 0..20 {
        burst(&mut rx);
    }
    assert_eq!(allocations() - before, 0, "repeated bursts allocated");
}

/// A push into a closed queue, or through a sender of an earlier
/// generation, is refused by the pre-check before it claims an index: a
/// sender that keeps pushing into such a queue neither writes tombstones
/// nor grows the list. (Only a push racing the close or the reset claims
/// and leaves a tombstone.)
fn refused_pushes_claim_nothing() {
    const PUSHES: u64 = 10_000;
    let mut rx = Receiver::<u64>::new();
    let old = rx.sender();
    let mut leftovers = Vec::new();
    rx.reset(&mut leftovers);
    let tx = rx.sender();
    rx.close();
    let before = allocations();
    for i in 0..PUSHES {
        assert!(tx.push(i).unwrap_err().is_closed());
        assert!(old.push(i).unwrap_err().is_stale());
    }
    assert_eq!(
        allocations() - before,
        0,
        "refused pushes claimed indices and grew the list"
    );
    assert_eq!(tx.queued(), 0, "refused pushes claimed indices");
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
        // One full cycle of sizes first, as in `single_thread`.
        let batch = |r: u64| 1 + (r * 17) % BATCH;
        for r in 0..BATCH {
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
