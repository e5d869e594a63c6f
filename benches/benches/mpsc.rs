//! Benchmarks of `stepsched-mpsc` against its peers, measured in the same run.
//!
//! P producers (1, 2 and 4) push [`ITEMS`] `u64`s per round between them
//! while the benchmark thread, the one consumer, drains in a loop into a
//! reused `Vec` until it has them all. One criterion group per producer
//! count, with every queue side by side; throughput in elements.
//!
//! Peers, each drained the way it is meant to be:
//! * `stepsched`: `Receiver::drain_into` (batch drain of the ready prefix);
//! * `segqueue`: `crossbeam_queue::SegQueue`, popping until empty;
//! * `std_mpsc`: `std::sync::mpsc::channel` (unbounded), `try_iter`;
//! * `mutex_vec`: `Mutex<Vec<u64>>`, producers `push` under the lock and the
//!   consumer swaps its empty buffer in (the reference design);
//! * `vyukov_box`: Vyukov's intrusive MPSC node queue with one `Box` per push
//!   (the classic design this crate was measured against).
//!
//! Producer threads are spawned once per `iter_custom` call and wait between
//! rounds; a round is timed from the moment they are released until the
//! consumer has drained every item. Each round checks the count and the sum
//! of the ids. When a drain finds nothing, the consumer yields (the same for
//! every peer), which matters when the threads outnumber the cores.
//!
//! Run with `cargo bench -p stepsched-benches --bench mpsc`.

use std::cell::UnsafeCell;
use std::hint::black_box;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use crossbeam_queue::SegQueue;
use crossbeam_utils::CachePadded;

/// Items pushed per round, split evenly between the producers.
const ITEMS: u64 = 1 << 16;

/// A queue as the benchmark uses it: cloneable producer handles and one
/// consumer that drains into a buffer.
trait Queue {
    const NAME: &'static str;
    type Tx: Clone + Send;
    type Rx;
    fn new() -> (Self::Tx, Self::Rx);
    fn push(tx: &Self::Tx, value: u64);
    /// Appends what is available to `buf` (empty on entry); returns how many.
    fn drain(rx: &mut Self::Rx, buf: &mut Vec<u64>) -> usize;
}

struct Ours;

impl Queue for Ours {
    const NAME: &'static str = "stepsched";
    type Tx = stepsched_mpsc::Sender<u64>;
    type Rx = stepsched_mpsc::Receiver<u64>;
    fn new() -> (Self::Tx, Self::Rx) {
        stepsched_mpsc::channel()
    }
    #[inline]
    fn push(tx: &Self::Tx, value: u64) {
        if tx.push(value).is_err() {
            panic!("queue closed during the benchmark");
        }
    }
    #[inline]
    fn drain(rx: &mut Self::Rx, buf: &mut Vec<u64>) -> usize {
        rx.drain_into(buf)
    }
}

struct Seg;

impl Queue for Seg {
    const NAME: &'static str = "segqueue";
    type Tx = Arc<SegQueue<u64>>;
    type Rx = Arc<SegQueue<u64>>;
    fn new() -> (Self::Tx, Self::Rx) {
        let q = Arc::new(SegQueue::new());
        (q.clone(), q)
    }
    #[inline]
    fn push(tx: &Self::Tx, value: u64) {
        tx.push(value);
    }
    #[inline]
    fn drain(rx: &mut Self::Rx, buf: &mut Vec<u64>) -> usize {
        let before = buf.len();
        while let Some(v) = rx.pop() {
            buf.push(v);
        }
        buf.len() - before
    }
}

struct StdMpsc;

impl Queue for StdMpsc {
    const NAME: &'static str = "std_mpsc";
    type Tx = std::sync::mpsc::Sender<u64>;
    type Rx = std::sync::mpsc::Receiver<u64>;
    fn new() -> (Self::Tx, Self::Rx) {
        std::sync::mpsc::channel()
    }
    #[inline]
    fn push(tx: &Self::Tx, value: u64) {
        tx.send(value).expect("receiver alive");
    }
    #[inline]
    fn drain(rx: &mut Self::Rx, buf: &mut Vec<u64>) -> usize {
        let before = buf.len();
        buf.extend(rx.try_iter());
        buf.len() - before
    }
}

struct MutexVec;

impl Queue for MutexVec {
    const NAME: &'static str = "mutex_vec";
    type Tx = Arc<Mutex<Vec<u64>>>;
    type Rx = Arc<Mutex<Vec<u64>>>;
    fn new() -> (Self::Tx, Self::Rx) {
        let q = Arc::new(Mutex::new(Vec::new()));
        (q.clone(), q)
    }
    #[inline]
    fn push(tx: &Self::Tx, value: u64) {
        tx.lock().expect("not poisoned").push(value);
    }
    #[inline]
    fn drain(rx: &mut Self::Rx, buf: &mut Vec<u64>) -> usize {
        let mut guard = rx.lock().expect("not poisoned");
        if guard.is_empty() {
            return 0;
        }
        // `buf` is empty: it goes in (keeping its capacity) and the pushed
        // items come out, all in O(1) under the lock.
        std::mem::swap(&mut *guard, buf);
        buf.len()
    }
}

/// Vyukov's intrusive MPSC node queue, one `Box` per push, freed by the
/// consumer: the baseline design of the task.
struct VyukovQueue {
    tail: CachePadded<AtomicPtr<Node>>,
    /// Consumer-only: the current stub node.
    head: CachePadded<UnsafeCell<*mut Node>>,
}

struct Node {
    next: AtomicPtr<Node>,
    value: u64,
}

// SAFETY: `tail` is atomic; `head` is touched only by the single consumer
// (`VyRx` is the only handle that pops, and it is not `Clone`).
unsafe impl Sync for VyukovQueue {}
// SAFETY: the raw pointers are owned by the queue.
unsafe impl Send for VyukovQueue {}

impl VyukovQueue {
    fn new() -> Self {
        let stub = Box::into_raw(Box::new(Node {
            next: AtomicPtr::new(ptr::null_mut()),
            value: 0,
        }));
        VyukovQueue {
            tail: CachePadded::new(AtomicPtr::new(stub)),
            head: CachePadded::new(UnsafeCell::new(stub)),
        }
    }

    #[inline]
    fn push(&self, value: u64) {
        let node = Box::into_raw(Box::new(Node {
            next: AtomicPtr::new(ptr::null_mut()),
            value,
        }));
        // AcqRel: Release publishes the node; Acquire to link after `prev`.
        let prev = self.tail.swap(node, Ordering::AcqRel);
        // SAFETY: `prev` stays alive until the consumer moves past it, which
        // needs this very link.
        unsafe { (*prev).next.store(node, Ordering::Release) };
    }

    /// # Safety
    /// Only one thread may pop.
    #[inline]
    unsafe fn pop(&self) -> Option<u64> {
        // SAFETY: single consumer (caller), `head` is a live stub.
        unsafe {
            let head = *self.head.get();
            let next = (*head).next.load(Ordering::Acquire);
            if next.is_null() {
                return None;
            }
            *self.head.get() = next;
            drop(Box::from_raw(head));
            Some((*next).value)
        }
    }
}

impl Drop for VyukovQueue {
    fn drop(&mut self) {
        // SAFETY: exclusive access; every node from the stub on is ours.
        unsafe {
            let mut node = *self.head.get();
            while !node.is_null() {
                let next = (*node).next.load(Ordering::Relaxed);
                drop(Box::from_raw(node));
                node = next;
            }
        }
    }
}

struct Vyukov;

/// The single consumer handle of [`VyukovQueue`] (not `Clone`).
struct VyRx(Arc<VyukovQueue>);

impl Queue for Vyukov {
    const NAME: &'static str = "vyukov_box";
    type Tx = Arc<VyukovQueue>;
    type Rx = VyRx;
    fn new() -> (Self::Tx, Self::Rx) {
        let q = Arc::new(VyukovQueue::new());
        (q.clone(), VyRx(q))
    }
    #[inline]
    fn push(tx: &Self::Tx, value: u64) {
        tx.push(value);
    }
    #[inline]
    fn drain(rx: &mut Self::Rx, buf: &mut Vec<u64>) -> usize {
        let before = buf.len();
        // SAFETY: `VyRx` is the only consumer.
        while let Some(v) = unsafe { rx.0.pop() } {
            buf.push(v);
        }
        buf.len() - before
    }
}

/// Runs `iters` rounds of `producers` threads pushing [`ITEMS`] between them
/// into a fresh `Q`, returning the summed round times.
fn run_rounds<Q: Queue>(producers: u64, iters: u64) -> Duration {
    let (tx, mut rx) = Q::new();
    let per_producer = ITEMS / producers;
    let total = per_producer * producers;
    let expected_sum = total * (total - 1) / 2;
    // Incremented by the consumer to start a round.
    let round = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let mut elapsed = Duration::ZERO;
    thread::scope(|s| {
        for p in 0..producers {
            let tx = tx.clone();
            let (round, stop) = (&round, &stop);
            s.spawn(move || {
                let mut seen = 0;
                loop {
                    // Acquire: pairs with the Release increment below.
                    while round.load(Ordering::Acquire) == seen {
                        if stop.load(Ordering::Acquire) {
                            return;
                        }
                        thread::yield_now();
                    }
                    seen += 1;
                    let first = p * per_producer;
                    for id in first..first + per_producer {
                        Q::push(&tx, id);
                    }
                }
            });
        }
        let mut buf = Vec::with_capacity(ITEMS as usize);
        for _ in 0..iters {
            let mut got = 0;
            let mut sum = 0u64;
            let start = Instant::now();
            round.fetch_add(1, Ordering::Release);
            while got < total {
                buf.clear();
                let n = Q::drain(&mut rx, &mut buf);
                if n == 0 {
                    thread::yield_now();
                    continue;
                }
                got += n as u64;
                sum = sum.wrapping_add(buf.iter().copied().fold(0u64, u64::wrapping_add));
            }
            elapsed += start.elapsed();
            assert_eq!(got, total, "{}: wrong item count", Q::NAME);
            assert_eq!(black_box(sum), expected_sum, "{}: wrong ids", Q::NAME);
        }
        stop.store(true, Ordering::Release);
    });
    elapsed
}

fn bench_producers(c: &mut Criterion, producers: u64) {
    let mut group = c.benchmark_group(format!("mpsc/{producers}p"));
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(ITEMS / producers * producers));
    fn one<Q: Queue>(
        group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
        producers: u64,
    ) {
        group.bench_function(Q::NAME, |b| {
            b.iter_custom(|iters| run_rounds::<Q>(producers, iters))
        });
    }
    one::<Ours>(&mut group, producers);
    one::<Seg>(&mut group, producers);
    one::<StdMpsc>(&mut group, producers);
    one::<MutexVec>(&mut group, producers);
    one::<Vyukov>(&mut group, producers);
    group.finish();
}

fn mpsc(c: &mut Criterion) {
    for producers in [1, 2, 4] {
        bench_producers(c, producers);
    }
}

criterion_group!(benches, mpsc);
criterion_main!(benches);
