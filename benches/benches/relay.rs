//! Relay benchmarks: look up a PID and send a package to its target.
//!
//! Ours is `stepsched_relay::RoutingTable` (64 shards, one lock each).
//! The peer is the simple design, one `std::sync::RwLock<HashMap<Pid, T>>`.
//! Each uses the hasher made for it (the table its default
//! `RouteBuildHasher`, laid out for its shards; the map `PidBuildHasher`)
//! and the same send path (look up, clone the `Arc` target, release the
//! lock, forward), so the ratio measures the table.
//!
//! Group `relay_send`, 1024 registered PIDs, parameters:
//! - `spread_{1,2}_threads`: each thread walks all PIDs from its own offset,
//!   so threads mostly hit different shards;
//! - `hot_2_threads`: every thread sends to one PID (one shard, one target
//!   reference count).
//!
//! An iteration is one send per thread, all threads running at once;
//! throughput counts sends.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::{Arc, Barrier, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use stepsched_relay::{Package, Pid, PidBuildHasher, Receiver, RoutingTable, SendError};

const PIDS: u64 = 1024;

/// A target that accepts every package and does nothing else.
struct Sink;

impl Receiver<u64> for Sink {
    #[inline]
    fn send(&self, package: Package<u64>) -> Result<(), SendError<u64>> {
        black_box(package);
        Ok(())
    }
}

/// The peer: one reader-writer lock around one map.
struct RwLockTable {
    map: RwLock<HashMap<Pid, Arc<Sink>, PidBuildHasher>>,
}

impl Receiver<u64> for RwLockTable {
    #[inline]
    fn send(&self, package: Package<u64>) -> Result<(), SendError<u64>> {
        let target = self.map.read().unwrap().get(&package.to).cloned();
        match target {
            Some(target) => target.send(package),
            None => Err(SendError::UnknownPid(package)),
        }
    }
}

fn ours() -> RoutingTable<Arc<Sink>> {
    let table = RoutingTable::with_capacity(PIDS as usize);
    for n in 0..PIDS {
        table.register(Pid::new(0, n), Arc::new(Sink)).unwrap();
    }
    table
}

fn peer() -> RwLockTable {
    let map = (0..PIDS)
        .map(|n| (Pid::new(0, n), Arc::new(Sink)))
        .collect();
    RwLockTable {
        map: RwLock::new(map),
    }
}

/// Which PID thread `t` sends its `i`-th package to.
#[derive(Clone, Copy)]
enum Pattern {
    Spread,
    Hot,
}

impl Pattern {
    #[inline]
    fn pid(self, t: u64, i: u64) -> Pid {
        match self {
            Self::Spread => Pid::new(0, (i + t * (PIDS / 2)) % PIDS),
            Self::Hot => Pid::new(0, 7),
        }
    }
}

/// Runs `iters` sends on each of `threads` threads at once; returns the wall
/// time from the common start to the last finish.
fn run<R: Receiver<u64> + Sync>(table: &R, threads: u64, pattern: Pattern, iters: u64) -> Duration {
    let work = |t: u64| {
        for i in 0..iters {
            let package = Package::new(pattern.pid(t, i), "bench", i);
            if table.send(black_box(package)).is_err() {
                unreachable!("every benchmarked PID is registered");
            }
        }
    };
    if threads == 1 {
        let start = Instant::now();
        work(0);
        return start.elapsed();
    }
    let barrier = Barrier::new(threads as usize);
    thread::scope(|s| {
        let (work, barrier) = (&work, &barrier);
        let helpers: Vec<_> = (1..threads)
            .map(|t| {
                s.spawn(move || {
                    barrier.wait();
                    work(t);
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        work(0);
        for h in helpers {
            h.join().unwrap();
        }
        start.elapsed()
    })
}

fn bench_send(c: &mut Criterion) {
    let ours = ours();
    let peer = peer();
    let mut group = c.benchmark_group("relay_send");
    for (name, pattern, threads) in [
        ("spread", Pattern::Spread, 1),
        ("spread", Pattern::Spread, 2),
        ("hot", Pattern::Hot, 2),
    ] {
        group.throughput(Throughput::Elements(threads));
        let id = |who: &str| BenchmarkId::new(who, format!("{name}_{threads}_threads"));
        group.bench_function(id("ours"), |b| {
            b.iter_custom(|iters| run(&ours, threads, pattern, iters));
        });
        group.bench_function(id("rwlock_hashmap"), |b| {
            b.iter_custom(|iters| run(&peer, threads, pattern, iters));
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench_send
}
criterion_main!(benches);
