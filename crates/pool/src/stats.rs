//! Per-worker statistics.
//!
//! Each worker owns one [`Counters`] block (cache-padded, so counting never
//! shares a line with another worker) and is its only writer. Increments
//! are a Relaxed load and a Relaxed store rather than a read-modify-write:
//! with a single writer no increment can be lost, and the counters order
//! nothing, so readers only need each value to be one the writer stored.
//! [`Pool::stats`](crate::Pool::stats) therefore returns a snapshot in which
//! each counter is exact as of some recent moment, but different counters
//! (and different workers) may be read at slightly different moments.

use crate::primitive::stat::{AtomicU64, Ordering};

/// A snapshot of one worker's counters, from [`Pool::stats`](crate::Pool::stats).
///
/// Every field only grows over the life of the pool.
///
/// ```
/// use stepsched_pool::Pool;
///
/// let pool = Pool::builder().workers(1).build(|_: u32, _| {}).unwrap();
/// pool.submit(1).unwrap();
/// pool.shutdown();
/// let stats = pool.stats();
/// assert_eq!(stats.len(), 1);
/// assert_eq!(stats[0].items_run, 1);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Items this worker ran (including ones whose run panicked).
    pub items_run: u64,
    /// Items this worker took from other workers: whole steal-half batches
    /// (the item run at once plus the ones moved into its deque) and items
    /// taken from other workers' inboxes.
    pub items_stolen: u64,
    /// Steal attempts on other workers' deques, successful or not.
    pub steal_attempts: u64,
    /// Items this worker popped from the global queue, including the batch
    /// it moved into its own deque.
    pub global_pops: u64,
    /// Items this worker popped from its own inbox.
    pub inbox_pops: u64,
    /// Times this worker blocked on its condition variable.
    pub parks: u64,
    /// Times this worker was woken from a park by a producer or a
    /// searcher (a thread wake-up: a futex wake and a context switch).
    pub unparks: u64,
    /// Wake-ups after which this worker found no item and parked again:
    /// wake-ups spent for nothing (another worker took the work first).
    pub empty_unparks: u64,
    /// Failed searches this worker answered by spinning or yielding its
    /// thread rather than parking.
    pub spins: u64,
    /// Runs of an item that panicked (caught; the worker went on).
    pub panics: u64,
}

impl WorkerStats {
    /// Adds `other` field by field: a pool-wide total from per-worker
    /// snapshots.
    ///
    /// ```
    /// use stepsched_pool::WorkerStats;
    ///
    /// let total = WorkerStats::default().merged(&WorkerStats::default());
    /// assert_eq!(total, WorkerStats::default());
    /// ```
    #[must_use]
    pub fn merged(mut self, other: &WorkerStats) -> WorkerStats {
        self.items_run += other.items_run;
        self.items_stolen += other.items_stolen;
        self.steal_attempts += other.steal_attempts;
        self.global_pops += other.global_pops;
        self.inbox_pops += other.inbox_pops;
        self.parks += other.parks;
        self.unparks += other.unparks;
        self.empty_unparks += other.empty_unparks;
        self.spins += other.spins;
        self.panics += other.panics;
        self
    }
}

/// One counter with a single writer.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Must only be called by the owning worker.
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        // Relaxed: single writer (see the module docs), and the value orders
        // nothing.
        let v = self.0.load(Ordering::Relaxed);
        // Relaxed: as above.
        self.0.store(v.wrapping_add(n), Ordering::Relaxed);
    }

    /// Adds one. Must only be called by the owning worker.
    #[inline]
    pub(crate) fn inc(&self) {
        self.add(1);
    }

    #[inline]
    fn get(&self) -> u64 {
        // Relaxed: a statistics snapshot; nothing is read through it.
        self.0.load(Ordering::Relaxed)
    }
}

/// The live counters of one worker.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) items_run: Counter,
    pub(crate) items_stolen: Counter,
    pub(crate) steal_attempts: Counter,
    pub(crate) global_pops: Counter,
    pub(crate) inbox_pops: Counter,
    pub(crate) parks: Counter,
    pub(crate) unparks: Counter,
    pub(crate) empty_unparks: Counter,
    pub(crate) spins: Counter,
    pub(crate) panics: Counter,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> WorkerStats {
        WorkerStats {
            items_run: self.items_run.get(),
            items_stolen: self.items_stolen.get(),
            steal_attempts: self.steal_attempts.get(),
            global_pops: self.global_pops.get(),
            inbox_pops: self.inbox_pops.get(),
            parks: self.parks.get(),
            unparks: self.unparks.get(),
            empty_unparks: self.empty_unparks.get(),
            spins: self.spins.get(),
            panics: self.panics.get(),
        }
    }
}
