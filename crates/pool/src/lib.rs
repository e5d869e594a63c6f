//! A work-stealing pool of worker threads for units of work of any type.
//!
//! A [`Pool<T>`] runs items of type `T` on `N` worker threads (by default
//! [`std::thread::available_parallelism`]) through a function or a
//! [`Runner`] the caller provides. The running code receives a
//! [`WorkerContext`] through which it can queue follow-up work on its own
//! worker, send work to a given worker, and learn its worker's index.
//!
//! ```
//! use stepsched_pool::Pool;
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use std::sync::Arc;
//!
//! // Sum 1..=1000 by splitting ranges until they are small.
//! let sum = Arc::new(AtomicU64::new(0));
//! let total = sum.clone();
//! let pool = Pool::new(move |(lo, hi): (u64, u64), ctx| {
//!     if hi - lo <= 10 {
//!         total.fetch_add((lo..hi).sum(), Ordering::Relaxed);
//!     } else {
//!         let mid = (lo + hi) / 2;
//!         ctx.push((lo, mid));
//!         ctx.push((mid, hi));
//!     }
//! });
//! pool.submit((1, 1001)).unwrap();
//! pool.shutdown(); // drains everything queued, then joins the workers
//! assert_eq!(sum.load(Ordering::Relaxed), 500_500);
//! ```
//!
//! # Structure
//!
//! Every worker owns a Chase-Lev deque ([`stepsched_deque`]) and an
//! *inbox*; the pool has one global FIFO queue. Items submitted from outside
//! go to the global queue; items queued by running code through the context
//! go to that worker's deque; [`Pool::submit_to`] sends an item to a given
//! worker's inbox (affinity). A worker looks for work in this order: its
//! deque (LIFO), its inbox, the global queue (one item plus a batch of up to
//! 16 moved into its deque), then the other workers — steal half of a
//! deque, visiting victims from a random start, and their inboxes. Every
//! 61st item it checks its inbox and the global queue first, so outside work
//! cannot starve behind a busy deque.
//!
//! # Idle workers
//!
//! A worker that finds nothing spins (fewer than 4 failed searches), then
//! yields its thread (4 to 7), then parks on a condition variable (8 or
//! more); an idle pool uses no CPU. Wake-ups are never lost and never come
//! in herds: a submission wakes one parked worker unless one is already
//! searching, and the last searcher to find work wakes another if work is
//! left. `SLEEP.md` in the crate's repository has the protocol and the
//! argument for it.
//!
//! # Guarantees
//!
//! * Every accepted item is run exactly once, unless the pool is stopped
//!   with [`Pool::shutdown_now`], after which items not yet started are
//!   dropped (never leaked, never run).
//! * [`Pool::shutdown`] (and dropping the pool) runs everything queued,
//!   including work queued by running items, then joins the workers.
//!   Submissions from outside the pool are refused once it has begun, with
//!   the item handed back in the error.
//! * A panic in the run function is caught (`catch_unwind`): the worker
//!   counts it in [`WorkerStats::panics`] and goes on with the next item;
//!   the panicking item is consumed (dropped by the unwinding), work it
//!   queued before panicking still runs. The pool never loses a worker and
//!   never deadlocks because of a panic.
//! * Work conservation: an item queued on a busy worker is taken by an idle
//!   one. Every push onto a deque wakes a sleeper if nobody is searching,
//!   and inboxes can be drained by any worker.
//!
//! # Statistics
//!
//! [`Pool::stats`] returns per-worker counters (items run, stolen, steal
//! attempts, global and inbox pops, parks, spins, panics), readable at any
//! time.
//!
//! # Cargo features
//!
//! * `tracing` (default): debug and trace events of the workers (parking,
//!   waking, stealing) through the `tracing` crate. Without it they
//!   compile to nothing and the crate does not depend on `tracing`.
#![cfg_attr(not(test), warn(missing_docs))]
// Without the `tracing` feature the events compile to nothing, leaving the
// values computed only for them unused; the default build checks them all.
#![cfg_attr(not(feature = "tracing"), allow(unused_variables, dead_code))]

mod next;
mod primitive;
mod queue;
mod shared;
mod sleep;
mod stats;
mod trace;
mod worker;

#[cfg(all(test, stepsched_loom))]
mod loom_tests;
#[cfg(all(test, not(stepsched_loom)))]
mod tests;

use std::fmt;
use std::io;

use stepsched_deque::Worker as Deque;

use crate::primitive::sync::atomic::Ordering;
use crate::primitive::sync::{Arc, Mutex};
use crate::primitive::thread::{self, JoinHandle};
use crate::shared::Shared;
use crate::worker::with_current;

pub use crate::stats::WorkerStats;
pub use crate::worker::WorkerContext;

/// The code a pool runs for each item.
///
/// Closures `Fn(T, &WorkerContext<T>)` implement it; implement it by hand to
/// give a type its own runner.
///
/// ```
/// use stepsched_pool::{Pool, Runner, WorkerContext};
/// use std::sync::mpsc;
///
/// struct Echo(mpsc::Sender<String>);
///
/// impl Runner<String> for Echo {
///     fn run(&self, item: String, ctx: &WorkerContext<String>) {
///         self.0.send(format!("{item} on {}", ctx.index())).unwrap();
///     }
/// }
///
/// # // A `Sender` is `Sync` since Rust 1.72.
/// let (tx, rx) = mpsc::channel();
/// let pool = Pool::builder().workers(1).build_with(Echo(tx)).unwrap();
/// pool.submit("hello".to_string()).unwrap();
/// assert_eq!(rx.recv().unwrap(), "hello on 0");
/// ```
pub trait Runner<T: Send + 'static>: Send + Sync + 'static {
    /// Runs one item on the worker `ctx` describes.
    fn run(&self, item: T, ctx: &WorkerContext<T>);
}

impl<T, F> Runner<T> for F
where
    T: Send + 'static,
    F: Fn(T, &WorkerContext<T>) + Send + Sync + 'static,
{
    #[inline]
    fn run(&self, item: T, ctx: &WorkerContext<T>) {
        self(item, ctx)
    }
}

/// Why a submission was refused. Each variant hands the item back.
///
/// ```
/// use stepsched_pool::{Pool, SubmitError};
///
/// let pool = Pool::builder().workers(1).build(|_: u8, _| {}).unwrap();
/// assert_eq!(pool.submit_to(5, 1), Err(SubmitError::NoSuchWorker(1)));
/// pool.shutdown();
/// let err = pool.submit(2).unwrap_err();
/// assert_eq!(err, SubmitError::ShutDown(2));
/// assert_eq!(err.into_inner(), 2);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubmitError<T> {
    /// The pool is shutting down or has shut down.
    ShutDown(T),
    /// The worker index given to `submit_to` is out of range.
    NoSuchWorker(T),
}

impl<T> SubmitError<T> {
    /// The refused item.
    ///
    /// ```
    /// use stepsched_pool::SubmitError;
    ///
    /// assert_eq!(SubmitError::ShutDown("x").into_inner(), "x");
    /// ```
    pub fn into_inner(self) -> T {
        match self {
            SubmitError::ShutDown(item) | SubmitError::NoSuchWorker(item) => item,
        }
    }
}

impl<T> fmt::Debug for SubmitError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::ShutDown(_) => f.write_str("ShutDown(..)"),
            SubmitError::NoSuchWorker(_) => f.write_str("NoSuchWorker(..)"),
        }
    }
}

impl<T> fmt::Display for SubmitError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::ShutDown(_) => f.write_str("the pool is shut down"),
            SubmitError::NoSuchWorker(_) => f.write_str("no worker with that index"),
        }
    }
}

impl<T> std::error::Error for SubmitError<T> {}

/// Configures and starts a [`Pool`].
///
/// ```
/// use stepsched_pool::Builder;
///
/// let pool = Builder::new()
///     .workers(2)
///     .thread_name("my-worker")
///     .build(|n: u64, _| assert!(n < 10))
///     .unwrap();
/// assert_eq!(pool.workers(), 2);
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    workers: Option<usize>,
    name: String,
    stack_size: Option<usize>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// A builder with the defaults: one worker per available core, threads
    /// named `stepsched-worker-{i}`, the platform's stack size.
    ///
    /// ```
    /// let pool = stepsched_pool::Builder::new().build(|_: (), _| {}).unwrap();
    /// assert!(pool.workers() >= 1);
    /// ```
    pub fn new() -> Self {
        Builder {
            workers: None,
            name: "stepsched-worker".to_string(),
            stack_size: None,
        }
    }

    /// Sets the number of workers. 0, like not calling this, means the
    /// default: one per available core
    /// ([`available_parallelism`](std::thread::available_parallelism), or
    /// 1 if unknown). The `stepsched` scheduler's builder follows the same
    /// rule.
    ///
    /// ```
    /// let pool = stepsched_pool::Builder::new().workers(3).build(|_: (), _| {}).unwrap();
    /// assert_eq!(pool.workers(), 3);
    ///
    /// let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    /// let pool = stepsched_pool::Builder::new().workers(0).build(|_: (), _| {}).unwrap();
    /// assert_eq!(pool.workers(), cores);
    /// ```
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = (workers != 0).then_some(workers);
        self
    }

    /// Sets the thread name prefix: worker `i` is named `{prefix}-{i}`.
    ///
    /// ```
    /// use std::sync::mpsc;
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let pool = stepsched_pool::Builder::new()
    ///     .workers(1)
    ///     .thread_name("io")
    ///     .build(move |(): (), _| {
    ///         tx.send(std::thread::current().name().map(String::from)).unwrap()
    ///     })
    ///     .unwrap();
    /// pool.submit(()).unwrap();
    /// assert_eq!(rx.recv().unwrap().as_deref(), Some("io-0"));
    /// ```
    pub fn thread_name(mut self, prefix: impl Into<String>) -> Self {
        self.name = prefix.into();
        self
    }

    /// Sets the stack size of each worker thread, in bytes.
    ///
    /// ```
    /// let pool = stepsched_pool::Builder::new()
    ///     .stack_size(4 << 20)
    ///     .build(|_: (), _| {})
    ///     .unwrap();
    /// # drop(pool);
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Starts a pool running `f` for each item.
    ///
    /// # Errors
    ///
    /// If a worker thread cannot be spawned; the workers already started
    /// are stopped and joined first.
    ///
    /// ```
    /// let pool = stepsched_pool::Builder::new()
    ///     .workers(2)
    ///     .build(|s: String, _| assert!(!s.is_empty()))
    ///     .unwrap();
    /// pool.submit("x".into()).unwrap();
    /// ```
    pub fn build<T, F>(self, f: F) -> io::Result<Pool<T>>
    where
        T: Send + 'static,
        F: Fn(T, &WorkerContext<T>) + Send + Sync + 'static,
    {
        self.build_with(f)
    }

    /// Starts a pool running `runner` for each item.
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build).
    ///
    /// ```
    /// use stepsched_pool::{Builder, Runner, WorkerContext};
    ///
    /// struct Nop;
    /// impl Runner<u8> for Nop {
    ///     fn run(&self, _: u8, _: &WorkerContext<u8>) {}
    /// }
    /// let pool = Builder::new().workers(1).build_with(Nop).unwrap();
    /// pool.submit(7).unwrap();
    /// ```
    pub fn build_with<T, R>(self, runner: R) -> io::Result<Pool<T>>
    where
        T: Send + 'static,
        R: Runner<T>,
    {
        let workers = match self.workers {
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let deques: Vec<Deque<T>> = (0..workers).map(|_| Deque::new()).collect();
        let stealers = deques.iter().map(Deque::stealer).collect();
        let shared = Arc::new(Shared::new(stealers, Box::new(runner)));
        let pool = Pool {
            shared: shared.clone(),
            threads: Mutex::new(Vec::with_capacity(workers)),
        };
        for (index, deque) in deques.into_iter().enumerate() {
            let ctx = WorkerContext::new(index, deque, shared.clone());
            let mut builder = thread::Builder::new().name(format!("{}-{index}", self.name));
            if let Some(bytes) = self.stack_size {
                builder = builder.stack_size(bytes);
            }
            match builder.spawn(move || worker::main_loop(ctx)) {
                Ok(handle) => pool.lock_threads().push(handle),
                Err(e) => {
                    pool.shutdown_now();
                    return Err(e);
                }
            }
        }
        Ok(pool)
    }
}

/// A pool of worker threads running items of type `T`.
///
/// See the [crate docs](crate) for the structure and the guarantees.
///
/// ```
/// use stepsched_pool::Pool;
/// use std::sync::mpsc;
///
/// let (tx, rx) = mpsc::channel();
/// let pool = Pool::new(move |n: u32, _| tx.send(n * 2).unwrap());
/// for n in 0..10 {
///     pool.submit(n).unwrap();
/// }
/// pool.shutdown();
/// let mut doubled: Vec<u32> = rx.try_iter().collect();
/// doubled.sort();
/// assert_eq!(doubled, (0..10).map(|n| n * 2).collect::<Vec<_>>());
/// ```
pub struct Pool<T: Send + 'static> {
    shared: Arc<Shared<T>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl<T: Send + 'static> fmt::Debug for Pool<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("workers", &self.workers())
            .field("shut_down", &self.shared.gate.is_closed())
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Pool<T> {
    /// Starts a pool with the default configuration (one worker per
    /// available core) running `f` for each item.
    ///
    /// # Panics
    ///
    /// If a worker thread cannot be spawned; use [`Builder::build`] to get
    /// the error instead.
    ///
    /// ```
    /// let pool = stepsched_pool::Pool::new(|n: u32, _| assert!(n > 0));
    /// pool.submit(1).unwrap();
    /// ```
    pub fn new<F>(f: F) -> Pool<T>
    where
        F: Fn(T, &WorkerContext<T>) + Send + Sync + 'static,
    {
        Builder::new()
            .build(f)
            .expect("failed to spawn a worker thread")
    }

    /// The number of workers.
    ///
    /// ```
    /// let pool = stepsched_pool::Pool::builder().workers(2).build(|_: (), _| {}).unwrap();
    /// assert_eq!(pool.workers(), 2);
    /// ```
    pub fn workers(&self) -> usize {
        self.shared.workers()
    }

    /// Submits an item.
    ///
    /// Called from outside the pool, the item goes to the global queue and
    /// one parked worker is woken unless one is already searching. Called
    /// from one of this pool's workers (inside a run), it goes to that
    /// worker's own deque, like [`WorkerContext::push`].
    ///
    /// # Errors
    ///
    /// [`SubmitError::ShutDown`] with the item if the pool has begun to
    /// shut down (and the call is not from one of its workers).
    ///
    /// ```
    /// use stepsched_pool::Pool;
    /// use std::sync::mpsc;
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let pool = Pool::new(move |s: &'static str, _| tx.send(s).unwrap());
    /// pool.submit("hi").unwrap();
    /// assert_eq!(rx.recv().unwrap(), "hi");
    /// ```
    pub fn submit(&self, item: T) -> Result<(), SubmitError<T>> {
        with_current(&self.shared, |ctx| match ctx {
            Some(ctx) => {
                ctx.push(item);
                Ok(())
            }
            None => self.gated(item, |shared, item| shared.push_global(item)),
        })
    }

    /// Submits an item that continues the work of the calling worker: from
    /// one of the pool's workers, [`WorkerContext::push_next`] (the item
    /// runs next on this worker, and no sleeping worker is woken for it);
    /// from any other thread, as
    /// [`submit`](Self::submit).
    ///
    /// # Errors
    ///
    /// As [`submit`](Self::submit).
    ///
    /// ```
    /// let pool = stepsched_pool::Pool::new(|_: u8, _| {});
    /// pool.submit_next(1).unwrap();
    /// pool.shutdown();
    /// assert_eq!(pool.stats().iter().map(|s| s.items_run).sum::<u64>(), 1);
    /// ```
    pub fn submit_next(&self, item: T) -> Result<(), SubmitError<T>> {
        with_current(&self.shared, |ctx| match ctx {
            Some(ctx) => {
                ctx.push_next(item);
                Ok(())
            }
            None => self.gated(item, |shared, item| shared.push_global(item)),
        })
    }

    /// Submits an item to the global queue, even when called from a worker.
    ///
    /// # Errors
    ///
    /// As [`submit`](Self::submit).
    ///
    /// ```
    /// let pool = stepsched_pool::Pool::new(|_: u8, _| {});
    /// pool.inject(1).unwrap();
    /// ```
    pub fn inject(&self, item: T) -> Result<(), SubmitError<T>> {
        if with_current(&self.shared, |ctx| ctx.is_some()) {
            self.shared.push_global(item);
            return Ok(());
        }
        self.gated(item, |shared, item| shared.push_global(item))
    }

    /// Submits an item to worker `worker`'s inbox (affinity: the scheduler
    /// sends a process back to the worker that last ran it). The owner
    /// takes it when its deque runs empty or at its next fairness tick; if
    /// the owner sleeps it is the one woken; an idle worker may steal it
    /// from the inbox while the owner is busy.
    ///
    /// # Errors
    ///
    /// [`SubmitError::NoSuchWorker`] if `worker >= self.workers()`;
    /// [`SubmitError::ShutDown`] as for [`submit`](Self::submit).
    ///
    /// ```
    /// use stepsched_pool::Pool;
    /// use std::sync::mpsc;
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let pool = Pool::builder()
    ///     .workers(2)
    ///     .build(move |(): (), ctx| tx.send(ctx.index()).unwrap())
    ///     .unwrap();
    /// pool.submit_to(1, ()).unwrap();
    /// assert!(rx.recv().unwrap() < 2); // usually 1; an idle worker may steal it
    /// ```
    pub fn submit_to(&self, worker: usize, item: T) -> Result<(), SubmitError<T>> {
        if worker >= self.workers() {
            return Err(SubmitError::NoSuchWorker(item));
        }
        if with_current(&self.shared, |ctx| ctx.is_some()) {
            self.shared.push_inbox(worker, item);
            return Ok(());
        }
        self.gated(item, |shared, item| shared.push_inbox(worker, item))
    }

    /// Pushes `item` through the submission gate (see `shared.rs`).
    #[inline]
    fn gated(&self, item: T, push: impl FnOnce(&Shared<T>, T)) -> Result<(), SubmitError<T>> {
        let shared = &*self.shared;
        if !shared.gate.enter() {
            return Err(SubmitError::ShutDown(item));
        }
        push(shared, item);
        shared.gate.leave();
        Ok(())
    }

    /// Per-worker counters, indexed by worker. Readable at any time; each
    /// counter is exact as of a recent moment (see [`WorkerStats`]).
    ///
    /// ```
    /// let pool = stepsched_pool::Pool::builder().workers(2).build(|_: (), _| {}).unwrap();
    /// for _ in 0..5 {
    ///     pool.submit(()).unwrap();
    /// }
    /// pool.shutdown();
    /// let total: u64 = pool.stats().iter().map(|s| s.items_run).sum();
    /// assert_eq!(total, 5);
    /// ```
    pub fn stats(&self) -> Vec<WorkerStats> {
        self.shared.counters.iter().map(|c| c.snapshot()).collect()
    }

    /// The number of workers currently registered as parked: blocked, or
    /// about to block (a registered worker's last look at the queues may
    /// still find work and take it back off the list).
    /// Once its work is done and spinning has ended, an idle pool has all
    /// its workers parked and uses no CPU.
    ///
    /// ```
    /// let pool = stepsched_pool::Pool::builder().workers(2).build(|_: (), _| {}).unwrap();
    /// assert!(pool.parked_workers() <= 2);
    /// ```
    pub fn parked_workers(&self) -> usize {
        self.shared.sleep.sleeping()
    }

    /// The index of the worker the calling thread is, if it is one of this
    /// pool's workers.
    ///
    /// ```
    /// let pool = stepsched_pool::Pool::new(|_: (), _| {});
    /// assert_eq!(pool.current_worker(), None);
    /// ```
    pub fn current_worker(&self) -> Option<usize> {
        with_current(&self.shared, |ctx| ctx.map(WorkerContext::index))
    }

    /// Whether [`shutdown`](Self::shutdown) or
    /// [`shutdown_now`](Self::shutdown_now) has begun.
    ///
    /// ```
    /// let pool = stepsched_pool::Pool::new(|_: (), _| {});
    /// assert!(!pool.is_shut_down());
    /// pool.shutdown();
    /// assert!(pool.is_shut_down());
    /// ```
    pub fn is_shut_down(&self) -> bool {
        self.shared.gate.is_closed()
    }

    /// Shuts the pool down gracefully: refuses new submissions from
    /// outside, lets the workers run everything queued (including what
    /// running items queue meanwhile), then joins them. Idempotent; a
    /// second call waits for the first to finish.
    ///
    /// Called from one of the pool's own workers, it starts the shutdown
    /// and returns without joining (the worker cannot wait for itself).
    ///
    /// ```
    /// use stepsched_pool::Pool;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let ran = Arc::new(AtomicUsize::new(0));
    /// let r = ran.clone();
    /// let pool = Pool::new(move |_: u32, _| {
    ///     r.fetch_add(1, Ordering::Relaxed);
    /// });
    /// for i in 0..100 {
    ///     pool.submit(i).unwrap();
    /// }
    /// pool.shutdown();
    /// assert_eq!(ran.load(Ordering::Relaxed), 100);
    /// pool.shutdown(); // no-op
    /// ```
    pub fn shutdown(&self) {
        self.shared.gate.close();
        let shared = &*self.shared;
        shared.sleep.begin_draining(|| shared.has_work());
        self.join();
    }

    /// Stops the pool now: refuses new submissions, lets each worker finish
    /// the item it is running, joins them, and drops every item still
    /// queued without running it. Idempotent.
    ///
    /// Called from one of the pool's own workers, it stops the pool and
    /// returns without joining; the queued items are then dropped when the
    /// pool's last reference goes.
    ///
    /// ```
    /// use stepsched_pool::Pool;
    ///
    /// let pool = Pool::builder().workers(1).build(|_: Vec<u8>, _| {}).unwrap();
    /// pool.submit(vec![1, 2, 3]).unwrap();
    /// pool.shutdown_now(); // the vector ran or was dropped; either way it is freed
    /// assert!(pool.submit(vec![]).is_err());
    /// ```
    pub fn shutdown_now(&self) {
        // Relaxed: published by the Release in `gate.close` to anyone who
        // sees the pool shut down, and to parked workers by the lock of the
        // parker through which `terminate` wakes each of them.
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.gate.close();
        self.shared.sleep.terminate();
        if self.join() {
            self.shared.drop_queued();
        }
    }

    /// Joins the workers unless called from one of them. Returns whether
    /// every worker has exited.
    fn join(&self) -> bool {
        if self.current_worker().is_some() {
            return false;
        }
        // Held while joining, so a concurrent second call waits for the
        // workers too.
        let mut threads = self.lock_threads();
        for handle in threads.drain(..) {
            // A worker thread only ends by panicking if the pool itself has
            // a bug (runs are caught); it has exited either way.
            let _ = handle.join();
        }
        true
    }

    fn lock_threads(&self) -> primitive::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.threads.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Pool<()> {
    /// A [`Builder`] to configure a pool (of any item type: the builder's
    /// `build` decides it).
    ///
    /// ```
    /// let pool = stepsched_pool::Pool::builder().workers(1).build(|_: u32, _| {}).unwrap();
    /// assert_eq!(pool.workers(), 1);
    /// ```
    pub fn builder() -> Builder {
        Builder::new()
    }
}

impl<T: Send + 'static> Drop for Pool<T> {
    /// Shuts the pool down gracefully, as [`Pool::shutdown`].
    fn drop(&mut self) {
        self.shutdown();
    }
}
