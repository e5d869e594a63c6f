//! Benchmarks of `stepsched-deque` against its peers, measured in the same run.
//!
//! Peers: `crossbeam_deque` (LIFO worker), `st3::lifo` (bounded) and, for the
//! single-threaded group only, `std::collections::VecDeque` as the floor.
//!
//! * `push_pop`: one thread, `batch` pushes followed by `batch` pops per
//!   iteration (batch 1 and batch 64). Throughput in elements.
//! * `steal_one_thread`: one thread, `batch` pushes then steal-halves into
//!   a second deque (each drained by pops) until the victim is empty (batch
//!   1 and 64): a steal's own cost, with nobody racing it. Throughput in
//!   elements.
//! * `steal_half`: two threads. The owner (the benchmark thread) pushes
//!   [`ITEMS`] ids per round while one thief repeatedly steals half of the
//!   owner's deque into its own deque (one item returned, the rest moved) and
//!   drains it. Two owner behaviours:
//!   - `push_only`: the owner only pushes, so every item goes through a steal;
//!   - `push2_pop1`: the owner pops one item after every two pushes and
//!     drains what is left at the end, racing the thief for the same items.
//!
//!   The thief thread is spawned once per `iter_custom` call and is not
//!   part of the measured time; each round is timed from the moment the
//!   thief is released until it has reported its count. Every round asserts
//!   that the owner and the thieves together consumed exactly [`ITEMS`]
//!   items whose ids sum to the expected total. After each `steal_half`
//!   benchmark one line reports the thieves' share of the items, the items
//!   per successful steal, the retries and the empty steals (before the
//!   owner finished) per successful one, so the ratios can be read against
//!   what the thieves did.
//! * `steal_half_thieves`: `push2_pop1` with 3, 7 and 15 thieves stealing
//!   from the one owner at once.
//!
//! Run with `cargo bench -p stepsched-benches --bench deque`.

use std::collections::VecDeque;
use std::hint::{black_box, spin_loop};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// Items pushed by the owner in one `steal_half` round.
const ITEMS: u64 = 100_000;

/// Upper bound on the items one steal moves, the same for every peer
/// (`stepsched_deque::DEFAULT_STEAL_LIMIT`, crossbeam-deque's `MAX_BATCH`).
const STEAL_LIMIT: usize = 32;

// ---------------------------------------------------------------------------
// push_pop
// ---------------------------------------------------------------------------

/// The owner-side operations of a LIFO deque, as used on one thread.
trait Lifo {
    fn push(&mut self, item: u64);
    fn pop(&mut self) -> Option<u64>;
}

impl Lifo for stepsched_deque::Worker<u64> {
    #[inline]
    fn push(&mut self, item: u64) {
        stepsched_deque::Worker::push(self, item);
    }
    #[inline]
    fn pop(&mut self) -> Option<u64> {
        stepsched_deque::Worker::pop(self)
    }
}

impl Lifo for crossbeam_deque::Worker<u64> {
    #[inline]
    fn push(&mut self, item: u64) {
        crossbeam_deque::Worker::push(self, item);
    }
    #[inline]
    fn pop(&mut self) -> Option<u64> {
        crossbeam_deque::Worker::pop(self)
    }
}

impl Lifo for st3::lifo::Worker<u64> {
    #[inline]
    fn push(&mut self, item: u64) {
        if st3::lifo::Worker::push(self, item).is_err() {
            panic!("st3 worker full: capacity too small for the batch");
        }
    }
    #[inline]
    fn pop(&mut self) -> Option<u64> {
        st3::lifo::Worker::pop(self)
    }
}

impl Lifo for VecDeque<u64> {
    #[inline]
    fn push(&mut self, item: u64) {
        self.push_back(item);
    }
    #[inline]
    fn pop(&mut self) -> Option<u64> {
        self.pop_back()
    }
}

/// `batch` pushes then `batch` pops on the same deque.
#[inline]
fn push_pop_batch<D: Lifo>(deque: &mut D, batch: u64) {
    for i in 0..batch {
        deque.push(black_box(i));
    }
    for _ in 0..batch {
        black_box(deque.pop());
    }
}

fn push_pop(c: &mut Criterion) {
    let mut group = c.benchmark_group("deque/push_pop");
    for batch in [1u64, 64] {
        group.throughput(Throughput::Elements(2 * batch));
        let id = |peer: &str| BenchmarkId::new(peer, format!("batch{batch}"));

        let mut ours = stepsched_deque::Worker::<u64>::new();
        group.bench_function(id("ours"), |b| b.iter(|| push_pop_batch(&mut ours, batch)));

        let mut crossbeam = crossbeam_deque::Worker::<u64>::new_lifo();
        group.bench_function(id("crossbeam"), |b| {
            b.iter(|| push_pop_batch(&mut crossbeam, batch))
        });

        let mut st3 = st3::lifo::Worker::<u64>::new(256);
        group.bench_function(id("st3"), |b| b.iter(|| push_pop_batch(&mut st3, batch)));

        let mut vecdeque = VecDeque::<u64>::with_capacity(256);
        group.bench_function(id("vecdeque"), |b| {
            b.iter(|| push_pop_batch(&mut vecdeque, batch))
        });
    }
    group.finish();
}

// ---------------------------------------------------------------------------
// steal_half
// ---------------------------------------------------------------------------

/// Outcome of one steal-half attempt, common to every peer.
enum Stolen {
    /// One item returned; up to `STEAL_LIMIT - 1` more moved into the thief's deque.
    One(u64),
    /// The victim was seen empty.
    Empty,
    /// Lost a race or another steal was in progress; try again.
    Retry,
}

/// A work-stealing deque as used by the `steal_half` group.
trait Stealing {
    /// The owner's handle (used on the benchmark thread only).
    type Owner;
    /// The thief's handle on the owner's deque.
    type Stealer: Send + Sync;
    /// The thief's own deque.
    type Local;

    fn owner() -> Self::Owner;
    fn stealer(owner: &Self::Owner) -> Self::Stealer;
    fn local() -> Self::Local;
    /// Pushes `item`, or hands it back when the deque is full.
    fn push(owner: &Self::Owner, item: u64) -> Result<(), u64>;
    fn pop(owner: &Self::Owner) -> Option<u64>;
    /// Steals up to half of the owner's items (at most `STEAL_LIMIT`): one
    /// returned, the rest moved into `local`.
    fn steal_half(stealer: &Self::Stealer, local: &Self::Local) -> Stolen;
    fn pop_local(local: &Self::Local) -> Option<u64>;
}

struct Ours;

impl Stealing for Ours {
    type Owner = stepsched_deque::Worker<u64>;
    type Stealer = stepsched_deque::Stealer<u64>;
    type Local = stepsched_deque::Worker<u64>;

    fn owner() -> Self::Owner {
        stepsched_deque::Worker::new()
    }
    fn stealer(owner: &Self::Owner) -> Self::Stealer {
        owner.stealer()
    }
    fn local() -> Self::Local {
        stepsched_deque::Worker::new()
    }
    #[inline]
    fn push(owner: &Self::Owner, item: u64) -> Result<(), u64> {
        owner.push(item);
        Ok(())
    }
    #[inline]
    fn pop(owner: &Self::Owner) -> Option<u64> {
        owner.pop()
    }
    #[inline]
    fn steal_half(stealer: &Self::Stealer, local: &Self::Local) -> Stolen {
        match stealer.steal_half_into_with_limit(local, STEAL_LIMIT) {
            stepsched_deque::Steal::Success(item) => Stolen::One(item),
            stepsched_deque::Steal::Empty => Stolen::Empty,
            stepsched_deque::Steal::Retry => Stolen::Retry,
        }
    }
    #[inline]
    fn pop_local(local: &Self::Local) -> Option<u64> {
        local.pop()
    }
}

struct Crossbeam;

impl Stealing for Crossbeam {
    type Owner = crossbeam_deque::Worker<u64>;
    type Stealer = crossbeam_deque::Stealer<u64>;
    type Local = crossbeam_deque::Worker<u64>;

    fn owner() -> Self::Owner {
        crossbeam_deque::Worker::new_lifo()
    }
    fn stealer(owner: &Self::Owner) -> Self::Stealer {
        owner.stealer()
    }
    fn local() -> Self::Local {
        crossbeam_deque::Worker::new_lifo()
    }
    #[inline]
    fn push(owner: &Self::Owner, item: u64) -> Result<(), u64> {
        owner.push(item);
        Ok(())
    }
    #[inline]
    fn pop(owner: &Self::Owner) -> Option<u64> {
        owner.pop()
    }
    #[inline]
    fn steal_half(stealer: &Self::Stealer, local: &Self::Local) -> Stolen {
        // Moves min(ceil(n/2), limit) items, one of them returned.
        match stealer.steal_batch_with_limit_and_pop(local, STEAL_LIMIT) {
            crossbeam_deque::Steal::Success(item) => Stolen::One(item),
            crossbeam_deque::Steal::Empty => Stolen::Empty,
            crossbeam_deque::Steal::Retry => Stolen::Retry,
        }
    }
    #[inline]
    fn pop_local(local: &Self::Local) -> Option<u64> {
        local.pop()
    }
}

struct St3;

impl Stealing for St3 {
    type Owner = st3::lifo::Worker<u64>;
    type Stealer = st3::lifo::Stealer<u64>;
    type Local = st3::lifo::Worker<u64>;

    fn owner() -> Self::Owner {
        // st3 is bounded: room for a whole round, so a push never fails.
        st3::lifo::Worker::new(ITEMS as usize)
    }
    fn stealer(owner: &Self::Owner) -> Self::Stealer {
        owner.stealer()
    }
    fn local() -> Self::Local {
        st3::lifo::Worker::new(4 * STEAL_LIMIT)
    }
    #[inline]
    fn push(owner: &Self::Owner, item: u64) -> Result<(), u64> {
        owner.push(item)
    }
    #[inline]
    fn pop(owner: &Self::Owner) -> Option<u64> {
        owner.pop()
    }
    #[inline]
    fn steal_half(stealer: &Self::Stealer, local: &Self::Local) -> Stolen {
        match stealer.steal_and_pop(local, |n| n.div_ceil(2).min(STEAL_LIMIT)) {
            Ok((item, _moved)) => Stolen::One(item),
            Err(st3::StealError::Empty) => Stolen::Empty,
            Err(st3::StealError::Busy) => Stolen::Retry,
        }
    }
    #[inline]
    fn pop_local(local: &Self::Local) -> Option<u64> {
        local.pop()
    }
}

/// What the owner does in a round.
#[derive(Clone, Copy)]
enum Mode {
    /// Push every item; the thief consumes them all.
    PushOnly,
    /// Pop one item after every two pushes, then pop until empty.
    Push2Pop1,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::PushOnly => "push_only",
            Mode::Push2Pop1 => "push2_pop1",
        }
    }
}

/// Round counters shared by the owner and the thief. Each holds the number
/// of the last round that reached that point (0 before the first round).
#[derive(Default)]
struct Shared {
    /// The owner released the thief for this round.
    go: AtomicU64,
    /// The owner has pushed (and, in `Push2Pop1`, popped) everything it will.
    owner_done: AtomicU64,
    /// Thieves that have seen the owner's deque empty after `owner_done`,
    /// over all rounds so far.
    thieves_done: AtomicU64,
    /// Items the thieves consumed in the current round.
    thief_count: AtomicU64,
    /// Sum of the ids the thieves consumed in the current round.
    thief_sum: AtomicU64,
}

/// Thief counters accumulated over every round of one benchmark.
#[derive(Default, Clone, Copy)]
struct ThiefStats {
    items: u64,
    steals: u64,
    retries: u64,
    /// Steals that found the owner's deque empty before the owner was done.
    empties: u64,
}

impl ThiefStats {
    fn add(&mut self, other: ThiefStats) {
        self.items += other.items;
        self.steals += other.steals;
        self.retries += other.retries;
        self.empties += other.empties;
    }
}

/// Waits (spinning, then yielding the core) until `done` holds.
fn wait_until(done: impl Fn() -> bool) {
    let mut spins = 0u32;
    while !done() {
        if spins < 64 {
            spin_loop();
            spins += 1;
        } else {
            thread::yield_now();
        }
    }
}

fn thief_loop<D: Stealing>(stealer: &D::Stealer, shared: &Shared, rounds: u64) -> ThiefStats {
    let local = D::local();
    let mut stats = ThiefStats::default();
    for round in 1..=rounds {
        // Acquire: pairs with the owner's Release store of `go`.
        wait_until(|| shared.go.load(Ordering::Acquire) >= round);
        let (mut count, mut sum) = (0u64, 0u64);
        loop {
            // Read before the steal: if the owner had finished before this
            // attempt (Acquire pairs with its Release store), an empty steal
            // means no item of this round is left.
            let owner_done = shared.owner_done.load(Ordering::Acquire) == round;
            match D::steal_half(stealer, &local) {
                Stolen::One(item) => {
                    stats.steals += 1;
                    count += 1;
                    sum = sum.wrapping_add(item);
                    while let Some(item) = D::pop_local(&local) {
                        count += 1;
                        sum = sum.wrapping_add(item);
                    }
                }
                Stolen::Retry => {
                    stats.retries += 1;
                    spin_loop();
                }
                Stolen::Empty if owner_done => break,
                Stolen::Empty => {
                    stats.empties += 1;
                    spin_loop();
                }
            }
        }
        stats.items += count;
        // Relaxed: published by the Release increment of `thieves_done`.
        shared.thief_count.fetch_add(count, Ordering::Relaxed);
        shared.thief_sum.fetch_add(sum, Ordering::Relaxed);
        shared.thieves_done.fetch_add(1, Ordering::Release);
    }
    stats
}

/// Runs `rounds` rounds of [`ITEMS`] items against `thieves` thieves and
/// returns the measured time.
fn steal_half_rounds<D: Stealing>(
    mode: Mode,
    thieves: u64,
    rounds: u64,
    stats: &mut ThiefStats,
) -> Duration {
    let owner = D::owner();
    let stealer = D::stealer(&owner);
    let shared = Shared::default();
    let expected_sum = ITEMS * (ITEMS - 1) / 2;
    thread::scope(|s| {
        let handles: Vec<_> = (0..thieves)
            .map(|_| s.spawn(|| thief_loop::<D>(&stealer, &shared, rounds)))
            .collect();
        let mut elapsed = Duration::ZERO;
        for round in 1..=rounds {
            let (mut count, mut sum) = (0u64, 0u64);
            let start = Instant::now();
            // Release: the thief starts the round after this store.
            shared.go.store(round, Ordering::Release);
            for id in 0..ITEMS {
                if let Err(item) = D::push(&owner, id) {
                    // A bounded deque is full: run the item here.
                    count += 1;
                    sum = sum.wrapping_add(item);
                }
                if matches!(mode, Mode::Push2Pop1)
                    && id % 2 == 1
                    && let Some(item) = D::pop(&owner)
                {
                    count += 1;
                    sum = sum.wrapping_add(item);
                }
            }
            if matches!(mode, Mode::Push2Pop1) {
                while let Some(item) = D::pop(&owner) {
                    count += 1;
                    sum = sum.wrapping_add(item);
                }
            }
            // Release: every push of this round happens before the thief's
            // final (empty) steal.
            shared.owner_done.store(round, Ordering::Release);
            // Acquire: pairs with each thief's Release increment.
            wait_until(|| shared.thieves_done.load(Ordering::Acquire) == round * thieves);
            elapsed += start.elapsed();

            // Taken for the next round: no thief adds before the next `go`.
            let thief_count = shared.thief_count.swap(0, Ordering::Relaxed);
            let thief_sum = shared.thief_sum.swap(0, Ordering::Relaxed);
            assert_eq!(
                count + thief_count,
                ITEMS,
                "items lost or duplicated (owner {count}, thief {thief_count})"
            );
            assert_eq!(
                sum.wrapping_add(thief_sum),
                expected_sum,
                "wrong ids consumed"
            );
        }
        for handle in handles {
            stats.add(handle.join().expect("thief thread panicked"));
        }
        elapsed
    })
}

fn steal_half_peer<D: Stealing>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    peer: &str,
    mode: Mode,
    thieves: u64,
) {
    let mut stats = ThiefStats::default();
    let mut rounds_total = 0u64;
    let parameter = if thieves == 1 {
        mode.name().to_string()
    } else {
        format!("{}_{thieves}thieves", mode.name())
    };
    group.bench_function(BenchmarkId::new(peer, &parameter), |b| {
        b.iter_custom(|rounds| {
            rounds_total += rounds;
            steal_half_rounds::<D>(mode, thieves, rounds, &mut stats)
        })
    });
    if rounds_total > 0 {
        let items = rounds_total * ITEMS;
        println!(
            "steal_half/{peer}/{parameter}: thieves took {:.1}% of {items} items, {:.1} items per successful steal, {} retries over {} steals, {:.1} empty steals per successful one",
            100.0 * stats.items as f64 / items as f64,
            stats.items as f64 / stats.steals.max(1) as f64,
            stats.retries,
            stats.steals,
            stats.empties as f64 / stats.steals.max(1) as f64,
        );
    }
}

/// `batch` pushes, then steal-halves on the same thread until the victim
/// is empty, each followed by pops of what it moved into the thief's own
/// deque: what a steal costs with nobody racing it.
fn steal_one_thread_batch<D: Stealing>(
    owner: &D::Owner,
    stealer: &D::Stealer,
    local: &D::Local,
    batch: u64,
) {
    for i in 0..batch {
        if D::push(owner, black_box(i)).is_err() {
            panic!("the victim is full: capacity too small for the batch");
        }
    }
    loop {
        match D::steal_half(stealer, local) {
            Stolen::One(item) => {
                black_box(item);
                while let Some(item) = D::pop_local(local) {
                    black_box(item);
                }
            }
            Stolen::Empty => break,
            Stolen::Retry => unreachable!("nobody races a single thread"),
        }
    }
}

fn steal_one_thread_peer<D: Stealing>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    peer: &str,
    batch: u64,
) {
    let owner = D::owner();
    let stealer = D::stealer(&owner);
    let local = D::local();
    group.bench_function(BenchmarkId::new(peer, format!("batch{batch}")), |b| {
        b.iter(|| steal_one_thread_batch::<D>(&owner, &stealer, &local, batch))
    });
}

/// `batch` pushes then steal-halves until empty, all on one thread (no
/// contention): batch 1 is the fixed cost of one steal, batch 64 the cost
/// per item of moving batches (32, 16, 8, … items).
fn steal_one_thread(c: &mut Criterion) {
    let mut group = c.benchmark_group("deque/steal_one_thread");
    for batch in [1u64, 64] {
        group.throughput(Throughput::Elements(batch));
        steal_one_thread_peer::<Ours>(&mut group, "ours", batch);
        steal_one_thread_peer::<Crossbeam>(&mut group, "crossbeam", batch);
        steal_one_thread_peer::<St3>(&mut group, "st3", batch);
    }
    group.finish();
}

fn steal_half(c: &mut Criterion) {
    let mut group = c.benchmark_group("deque/steal_half");
    group.throughput(Throughput::Elements(ITEMS));
    for mode in [Mode::PushOnly, Mode::Push2Pop1] {
        steal_half_peer::<Ours>(&mut group, "ours", mode, 1);
        steal_half_peer::<Crossbeam>(&mut group, "crossbeam", mode, 1);
        steal_half_peer::<St3>(&mut group, "st3", mode, 1);
    }
    group.finish();
}

/// `push2_pop1` against 3, 7 and 15 thieves at once (one owner and up to
/// 15 thieves: a 16-core machine's worth; on fewer cores the thieves share
/// them, and the figures say more about contention under preemption).
fn steal_half_thieves(c: &mut Criterion) {
    let mut group = c.benchmark_group("deque/steal_half_thieves");
    group.throughput(Throughput::Elements(ITEMS));
    for thieves in [3, 7, 15] {
        steal_half_peer::<Ours>(&mut group, "ours", Mode::Push2Pop1, thieves);
        steal_half_peer::<Crossbeam>(&mut group, "crossbeam", Mode::Push2Pop1, thieves);
        steal_half_peer::<St3>(&mut group, "st3", Mode::Push2Pop1, thieves);
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .without_plots()
}

criterion_group! {
    name = benches;
    config = config();
    targets = push_pop, steal_one_thread, steal_half, steal_half_thieves
}
criterion_main!(benches);
