//! Benchmarks of `stepsched-pool` against rayon's `ThreadPool` and tokio's
//! multi-thread runtime, measured in the same run, with 1 and 2 workers.
//!
//! * `independent_100k`: the benchmark thread submits 100 000 independent
//!   items from outside the pool (ours: `Pool::submit` to the global queue;
//!   rayon: `ThreadPool::spawn`; tokio: `Runtime::spawn` of an `async`
//!   block) and waits until all have run.
//! * `fork_join_d16`: one root submitted from outside; every item of depth
//!   `d < 16` queues two children from inside its worker (ours:
//!   `WorkerContext::push`; rayon: `rayon::spawn` on the current pool;
//!   tokio: `tokio::spawn`), 131 071 items in all.
//!
//! Every item does the same work in every peer: one `fetch_add` on a shared
//! counter; the item that brings it to the total releases a latch the
//! benchmark thread waits on. The pools are built once per benchmark and
//! reused across iterations, so thread start-up is not measured. Each
//! iteration asserts the final count.
//!
//! Run with `cargo bench -p stepsched-benches --bench pool`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use stepsched_pool::{Pool, WorkerContext};

/// Items in `independent_100k`.
const INDEPENDENT: usize = 100_000;
/// Depth of the fork-join tree: `2^(DEPTH + 1) - 1` items.
const DEPTH: u32 = 16;
/// Items in `fork_join_d16`.
const TREE: usize = (1 << (DEPTH + 1)) - 1;
/// Worker counts compared.
const WORKERS: [usize; 2] = [1, 2];

/// A countdown shared by every peer: items count themselves done, the last
/// one opens the latch.
struct Done {
    count: AtomicUsize,
    target: AtomicUsize,
    open: Mutex<bool>,
    opened: Condvar,
}

impl Done {
    /// A `'static` instance, so items capture a plain reference (no
    /// reference counting in any peer's items).
    fn leak() -> &'static Done {
        Box::leak(Box::new(Done {
            count: AtomicUsize::new(0),
            target: AtomicUsize::new(0),
            open: Mutex::new(false),
            opened: Condvar::new(),
        }))
    }

    fn reset(&self, target: usize) {
        self.count.store(0, Ordering::Relaxed);
        self.target.store(target, Ordering::Relaxed);
        *self.open.lock().unwrap() = false;
    }

    #[inline]
    fn item_done(&self) {
        // AcqRel: the last item's increment sees every other item's.
        let n = self.count.fetch_add(1, Ordering::AcqRel) + 1;
        if n == self.target.load(Ordering::Relaxed) {
            *self.open.lock().unwrap() = true;
            self.opened.notify_one();
        }
    }

    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
        drop(open);
        assert_eq!(
            self.count.load(Ordering::Acquire),
            self.target.load(Ordering::Relaxed)
        );
    }
}

fn rayon_pool(workers: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .unwrap()
}

fn tokio_runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .build()
        .unwrap()
}

fn independent(c: &mut Criterion) {
    let mut group = c.benchmark_group("pool/independent_100k");
    group.throughput(Throughput::Elements(INDEPENDENT as u64));
    for workers in WORKERS {
        let done = Done::leak();

        let pool = Pool::builder()
            .workers(workers)
            .build(move |(): (), _: &WorkerContext<()>| done.item_done())
            .unwrap();
        group.bench_function(BenchmarkId::new("stepsched", workers), |b| {
            b.iter(|| {
                done.reset(INDEPENDENT);
                for _ in 0..INDEPENDENT {
                    pool.submit(()).unwrap();
                }
                done.wait();
            })
        });
        drop(pool);

        let pool = rayon_pool(workers);
        group.bench_function(BenchmarkId::new("rayon", workers), |b| {
            b.iter(|| {
                done.reset(INDEPENDENT);
                for _ in 0..INDEPENDENT {
                    pool.spawn(move || done.item_done());
                }
                done.wait();
            })
        });
        drop(pool);

        let rt = tokio_runtime(workers);
        group.bench_function(BenchmarkId::new("tokio", workers), |b| {
            b.iter(|| {
                done.reset(INDEPENDENT);
                for _ in 0..INDEPENDENT {
                    drop(rt.spawn(async move { done.item_done() }));
                }
                done.wait();
            })
        });
        drop(rt);
    }
    group.finish();
}

fn rayon_node(depth: u32, done: &'static Done) {
    if depth < DEPTH {
        rayon::spawn(move || rayon_node(depth + 1, done));
        rayon::spawn(move || rayon_node(depth + 1, done));
    }
    done.item_done();
}

fn tokio_node(depth: u32, done: &'static Done) {
    if depth < DEPTH {
        drop(tokio::spawn(async move { tokio_node(depth + 1, done) }));
        drop(tokio::spawn(async move { tokio_node(depth + 1, done) }));
    }
    done.item_done();
}

fn fork_join(c: &mut Criterion) {
    let mut group = c.benchmark_group("pool/fork_join_d16");
    group.throughput(Throughput::Elements(TREE as u64));
    for workers in WORKERS {
        let done = Done::leak();

        let pool = Pool::builder()
            .workers(workers)
            .build(move |depth: u32, ctx: &WorkerContext<u32>| {
                if depth < DEPTH {
                    ctx.push(depth + 1);
                    ctx.push(depth + 1);
                }
                done.item_done();
            })
            .unwrap();
        group.bench_function(BenchmarkId::new("stepsched", workers), |b| {
            b.iter(|| {
                done.reset(TREE);
                pool.submit(0).unwrap();
                done.wait();
            })
        });
        drop(pool);

        let pool = rayon_pool(workers);
        group.bench_function(BenchmarkId::new("rayon", workers), |b| {
            b.iter(|| {
                done.reset(TREE);
                pool.spawn(move || rayon_node(0, done));
                done.wait();
            })
        });
        drop(pool);

        let rt = tokio_runtime(workers);
        group.bench_function(BenchmarkId::new("tokio", workers), |b| {
            b.iter(|| {
                done.reset(TREE);
                drop(rt.spawn(async move { tokio_node(0, done) }));
                done.wait();
            })
        });
        drop(rt);
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = independent, fork_join
}
criterion_main!(benches);
