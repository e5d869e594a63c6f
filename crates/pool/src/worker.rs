//! The worker: its context (what running code sees) and its loop.
//!
//! # Finding work
//!
//! Each call of [`Search::find`] looks, in order, at:
//!
//! 1. the worker's next item ([`WorkerContext::push_next`]), then its own
//!    deque (LIFO pop);
//! 2. its own affinity inbox;
//! 3. the global queue: one item to run plus up to [`GLOBAL_BATCH`] more
//!    moved into the deque;
//! 4. the other workers, from a random start (fastrand; a fixed start under
//!    loom): `steal_half_into` each deque, then one item from each inbox,
//!    then, in a search that follows a watch (see `SLEEP.md`), an item
//!    left in a worker's next-item slot since this worker's previous look
//!    at least [`STUCK`] ago while that worker stayed in the same run (it
//!    is stuck in a long one: see `crate::next`). At most half the workers
//!    search at once; the others back off without sweeping.
//!
//! Every [`FAIRNESS_INTERVAL`]th call checks the inbox, the global queue
//! and the oldest item of the worker's own deque (through its stealer's
//! end) before the next-item slot and the deque's newest, so work from
//! outside, or pushed early, cannot starve behind a deque that keeps
//! refilling itself (tokio's global-queue tick, same interval). And after
//! [`NEXT_STREAK`] items in a row from the next-item slot, the deque's
//! *oldest* item runs before the slot's: two items that keep handing the
//! slot to each other (two processes messaging each other) cannot starve
//! the deque either, and many chains of messages on one worker take turns
//! in the order their items were queued, not the newest chain first. Each
//! chain's processes then wait a little longer between runs, so each run
//! takes more messages at once (see [`NEXT_STREAK`]).
//!
//! A worker counts as *searching* (see [`crate::sleep`]) from the moment it
//! reaches step 4 until it finds work or parks. Failed searches back off
//! adaptively ([`backoff`]): spin, then yield the thread, then
//! park on the condition variable.
//!
//! # Work conservation
//!
//! Every push from running code onto the worker's deque, and every batch
//! moved into it from the global queue, is announced like a submission: if
//! nobody is searching and a worker sleeps, one is woken to steal. An item
//! in a deque therefore never waits behind an owner stuck in a long item
//! while another worker sleeps. (Announcing only from the second waiting
//! item on, as first planned, loses this: loom found a thief taking the
//! first of two pushed items, leaving the second alone and unannounced. A
//! global batch must be announced even for one item, because its producer
//! may have skipped its wake-up for a searcher that no longer sees it in
//! the global queue.) [`WorkerContext::push_next`] is the one exception,
//! by design: its item does not go to the deque and is not announced,
//! because the owner runs it as soon as its current item returns (the
//! continuation of a chain; see its docs); an item it displaces goes to the
//! deque and is announced. Steal batches are covered by the last-searcher rule. Inboxes are
//! MPMC queues that every searcher also pops, so an inbox is drained even
//! while its owner is stuck in a long item.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crossbeam_utils::CachePadded;
use stepsched_deque::{Steal, Worker as Deque};

use crate::SubmitError;
use crate::next::NextSlot;
use crate::primitive::hint::spin_loop;
use crate::primitive::sync::Arc;
use crate::primitive::sync::atomic::Ordering;
use crate::primitive::thread;
use crate::primitive::thread_local;
use crate::shared::Shared;
use crate::sleep::Parked;
use crate::stats::Counters;
use crate::trace;

/// Every this many items a worker polls its inbox and the global queue
/// before its own deque (tokio uses the same prime).
pub(crate) const FAIRNESS_INTERVAL: u32 = 61;

/// Items a worker takes in a row from its next-item slot before it runs
/// its deque's oldest item ahead of the slot's (tokio caps its LIFO slot
/// at 3 polls in a row too).
///
/// A longer streak saves a deque push and a steal per chain hop, but lets
/// one chain of messages run while the others wait, so each process takes
/// about one message per run. On Savina's big (120 actors, each pinging
/// random peers, one worker), 8 in a row with the deque's newest item next
/// ran 1.75 processes per ping; 3 with the oldest next, 1.49 (tokio: 1.28
/// polls), with 8 % fewer instructions per ping.
pub(crate) const NEXT_STREAK: u32 = 3;

/// Items moved from the global queue into the deque besides the one run.
pub(crate) const GLOBAL_BATCH: usize = 16;

/// How long an idle worker must see another worker stay in one run, with
/// an item waiting in its next-item slot, before it takes the item (see
/// `crate::next`). Far above a chain's hop (tens of nanoseconds) and below
/// the watcher's period, so a watcher takes a hostage at its second look.
pub(crate) const STUCK: std::time::Duration = std::time::Duration::from_micros(500);

/// Failed searches below this count spin; at or above it, yield.
#[cfg(not(stepsched_loom))]
pub(crate) const SPIN_LIMIT: u32 = 4;
/// Failed searches at or above this count park.
#[cfg(not(stepsched_loom))]
pub(crate) const PARK_LIMIT: u32 = 8;

// Under loom the backoff is one yield then park: the ladder's length does not
// change the protocol, only the state space.
#[cfg(stepsched_loom)]
pub(crate) const SPIN_LIMIT: u32 = 1;
#[cfg(stepsched_loom)]
pub(crate) const PARK_LIMIT: u32 = 2;

/// What a worker does after its `failed`th failed search in a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backoff {
    /// Busy-wait briefly (`spin_loop` hints) and search again.
    Spin,
    /// Give the core away (`thread::yield_now`) and search again.
    Yield,
    /// Park on the condition variable.
    Park,
}

/// Adaptive spinning: fewer than 4 failed searches spin, 4 to 7 yield, 8
/// or more park.
///
/// Not `crossbeam_utils::Backoff`: that one grows its spins exponentially
/// inside one call and only reports when it is done, while the worker must
/// re-search between steps and needs the exact failure count at which it
/// parks (the sleep protocol announces the park then re-checks every
/// queue). A pure function of the count also lets the loom build shorten
/// the ladder (one yield, then park) without changing the protocol.
#[inline]
pub(crate) fn backoff(failed: u32) -> Backoff {
    if failed < SPIN_LIMIT {
        Backoff::Spin
    } else if failed < PARK_LIMIT {
        Backoff::Yield
    } else {
        Backoff::Park
    }
}

#[cfg(not(stepsched_loom))]
thread_local! {
    /// On a worker thread: the address of its pool's shared state and of its
    /// context, while the worker loop runs. `(0, null)` elsewhere.
    static CURRENT: Cell<(usize, *const ())> = const { Cell::new((0, std::ptr::null())) };
}

// loom's `thread_local!` takes no `const` initializer.
#[cfg(stepsched_loom)]
thread_local! {
    static CURRENT: Cell<(usize, *const ())> = Cell::new((0, std::ptr::null()));
}

/// The running worker's view of the pool, handed to every run of an item.
///
/// Through it the running code can queue follow-up work on this worker's
/// own deque ([`push`](Self::push)), send work to a given worker's inbox
/// ([`submit_to`](Self::submit_to)) or to the global queue
/// ([`inject`](Self::inject)), and learn which worker it runs on. Work queued
/// through the context is accepted even while the pool shuts down
/// gracefully: it is part of what the pool drains.
///
/// The type is neither `Send` nor `Sync`: it only exists on its worker's
/// thread.
///
/// ```
/// use stepsched_pool::Pool;
/// use std::sync::mpsc;
///
/// // Each item `n > 0` queues `n - 1` on the same worker.
/// let (tx, rx) = mpsc::channel();
/// let pool = Pool::builder()
///     .workers(2)
///     .build(move |n: u32, ctx| {
///         assert!(ctx.index() < ctx.workers());
///         tx.send(n).unwrap();
///         if n > 0 {
///             ctx.push(n - 1);
///         }
///     })
///     .unwrap();
/// pool.submit(3).unwrap();
/// pool.shutdown();
/// let mut seen: Vec<u32> = rx.try_iter().collect();
/// seen.sort();
/// assert_eq!(seen, [0, 1, 2, 3]);
/// ```
pub struct WorkerContext<T: Send + 'static> {
    index: usize,
    deque: Deque<T>,
    /// `shared.nexts[index]` and `shared.counters[index]`, held directly.
    next: Arc<CachePadded<NextSlot<T>>>,
    counters: Arc<CachePadded<Counters>>,
    shared: Arc<Shared<T>>,
}

impl<T: Send + 'static> std::fmt::Debug for WorkerContext<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerContext")
            .field("index", &self.index)
            .field("queued", &self.deque.len())
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> WorkerContext<T> {
    /// The index of this worker, in `0..workers()`.
    ///
    /// ```
    /// use stepsched_pool::Pool;
    /// use std::sync::mpsc;
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let pool = Pool::builder()
    ///     .workers(1)
    ///     .build(move |(): (), ctx| tx.send(ctx.index()).unwrap())
    ///     .unwrap();
    /// pool.submit(()).unwrap();
    /// assert_eq!(rx.recv().unwrap(), 0);
    /// ```
    #[inline]
    pub fn index(&self) -> usize {
        self.index
    }

    /// The number of workers in the pool.
    ///
    /// ```
    /// use stepsched_pool::Pool;
    /// use std::sync::mpsc;
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let pool = Pool::builder()
    ///     .workers(3)
    ///     .build(move |(): (), ctx| tx.send(ctx.workers()).unwrap())
    ///     .unwrap();
    /// pool.submit(()).unwrap();
    /// assert_eq!(rx.recv().unwrap(), 3);
    /// ```
    #[inline]
    pub fn workers(&self) -> usize {
        self.shared.workers()
    }

    /// Queues `item` on this worker's own deque (LIFO: it is the next item
    /// this worker runs unless another worker steals it first).
    ///
    /// If a worker sleeps and none is searching, one is woken to steal, so
    /// the item runs even if this worker then blocks for a long time.
    ///
    /// ```
    /// use stepsched_pool::Pool;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// // A binary tree of depth 4: 31 nodes.
    /// let nodes = Arc::new(AtomicUsize::new(0));
    /// let counter = nodes.clone();
    /// let pool = Pool::new(move |depth: u32, ctx| {
    ///     counter.fetch_add(1, Ordering::Relaxed);
    ///     if depth < 4 {
    ///         ctx.push(depth + 1);
    ///         ctx.push(depth + 1);
    ///     }
    /// });
    /// pool.submit(0).unwrap();
    /// pool.shutdown();
    /// assert_eq!(nodes.load(Ordering::Relaxed), 31);
    /// ```
    #[inline]
    pub fn push(&self, item: T) {
        self.deque.push(item);
        // Every push announces itself (a SeqCst fence and one load of the
        // sleep word; a wake-up only if nobody searches and someone
        // sleeps). Announcing only once the deque holds two items is not
        // enough: loom found a thief taking the first of two pushed items,
        // after which the second lands in a one-item deque, unannounced,
        // behind an owner that then blocks.
        self.announce_local();
    }

    /// Queues `item` to run next on this worker, as soon as the item it is
    /// running returns, and announces it to nobody.
    ///
    /// This is the continuation of a chain (a message answered, a process
    /// put back at the end of its run), where waking a second worker only
    /// moves the chain between cores. The item waits in a slot of the
    /// worker's own, not in its deque: no deque push, no pop, and no
    /// thief takes it while this worker moves on from run to run. If this
    /// worker's current run goes on for long instead, an idle worker that
    /// sees the item waiting through two of its looks at least 500 µs
    /// apart, with this worker still in the same run, takes it (tokio's LIFO slot keeps it hostage
    /// there). So that an idle worker is awake to see it, one sleeper is
    /// woken if nobody searches and nobody watches the slots (a watcher:
    /// the one sleeper that sleeps with a time limit while other workers
    /// are awake). After a few items in a row from the slot, the worker runs its
    /// deque's oldest item before the slot's (see the module docs), so two
    /// items that keep handing the slot to each other cannot starve the
    /// deque. An item already in the slot is displaced into the deque, as
    /// with [`push`](Self::push): stealable and announced, since it now
    /// waits behind another.
    ///
    /// ```
    /// use stepsched_pool::Pool;
    /// use std::sync::mpsc;
    ///
    /// // Each item `n > 0` continues with `n - 1` on the same worker.
    /// let (tx, rx) = mpsc::channel();
    /// let pool = Pool::builder()
    ///     .workers(2)
    ///     .build(move |n: u32, ctx| {
    ///         tx.send(n).unwrap();
    ///         if n > 0 {
    ///             ctx.push_next(n - 1);
    ///         }
    ///     })
    ///     .unwrap();
    /// pool.submit(3).unwrap();
    /// pool.shutdown();
    /// let seen: Vec<u32> = rx.try_iter().collect();
    /// assert_eq!(seen, [3, 2, 1, 0]);
    /// ```
    #[inline]
    pub fn push_next(&self, item: T) {
        if let Some(displaced) = self.next().put(item) {
            self.push(displaced);
        }
        // No announcement: the owner runs the item next. But if nobody is
        // awake to see it should this run go on for long (no worker
        // searching, none watching the slots, some asleep), wake one to
        // keep an eye on it (see `crate::next`). A hint: a relaxed load of
        // the sleep word, and a wake-up at most once per such stretch.
        if self.shared.workers() > 1 {
            self.shared.sleep.nudge();
        }
    }

    /// This worker's next-item slot.
    #[inline]
    fn next(&self) -> &NextSlot<T> {
        &self.next
    }

    /// Whether an item is waiting that this worker would take next: in its
    /// next-item slot, its deque, its inbox or the global queue. A snapshot
    /// (items arrive at any time), for a runner deciding whether to wait a
    /// moment for more input to its current item or to move on.
    ///
    /// ```
    /// use stepsched_pool::Pool;
    /// use std::sync::mpsc;
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let pool = Pool::builder()
    ///     .workers(1)
    ///     .build(move |n: u32, ctx| {
    ///         if n == 1 {
    ///             ctx.push_next(2);
    ///             tx.send(ctx.has_work()).unwrap();
    ///         }
    ///     })
    ///     .unwrap();
    /// pool.submit(1).unwrap();
    /// assert!(rx.recv().unwrap(), "2 waits in the next-item slot");
    /// pool.shutdown();
    /// ```
    #[inline]
    pub fn has_work(&self) -> bool {
        self.next().is_full()
            || !self.deque.is_empty()
            || !self.shared.inboxes[self.index].is_empty()
            || !self.shared.global.is_empty()
    }

    /// Queues `item` on worker `worker`'s inbox (affinity). The owner takes
    /// it when its deque is empty or at its next fairness tick; an idle
    /// worker may take it first.
    ///
    /// # Errors
    ///
    /// [`SubmitError::NoSuchWorker`] (with the item) if `worker` is out of
    /// range.
    ///
    /// ```
    /// use stepsched_pool::Pool;
    /// use std::sync::mpsc;
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let pool = Pool::builder()
    ///     .workers(2)
    ///     .build(move |hops: u32, ctx| {
    ///         if hops == 0 {
    ///             tx.send("done").unwrap();
    ///         } else {
    ///             let next = (ctx.index() + 1) % ctx.workers();
    ///             ctx.submit_to(next, hops - 1).unwrap();
    ///         }
    ///     })
    ///     .unwrap();
    /// pool.submit(10).unwrap();
    /// assert_eq!(rx.recv().unwrap(), "done");
    /// ```
    #[inline]
    pub fn submit_to(&self, worker: usize, item: T) -> Result<(), SubmitError<T>> {
        if worker >= self.workers() {
            return Err(SubmitError::NoSuchWorker(item));
        }
        self.shared.push_inbox(worker, item);
        Ok(())
    }

    /// Queues `item` on the global queue, from which any worker takes it in
    /// FIFO order.
    ///
    /// ```
    /// use stepsched_pool::Pool;
    /// use std::sync::mpsc;
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let pool = Pool::new(move |n: u32, ctx| {
    ///     if n == 0 {
    ///         ctx.inject(1);
    ///     } else {
    ///         tx.send(n).unwrap();
    ///     }
    /// });
    /// pool.submit(0).unwrap();
    /// assert_eq!(rx.recv().unwrap(), 1);
    /// ```
    #[inline]
    pub fn inject(&self, item: T) {
        self.shared.push_global(item);
    }
}

/// Runs `f` with this thread's worker context if the thread is a worker of
/// the pool whose shared state is `shared`.
#[inline]
pub(crate) fn with_current<T: Send + 'static, R>(
    shared: &Arc<Shared<T>>,
    f: impl FnOnce(Option<&WorkerContext<T>>) -> R,
) -> R {
    let (pool, ctx) = CURRENT.with(|c| c.get());
    if pool == pool_id(shared) {
        // SAFETY: `CURRENT` holds this pool's id only on one of its worker
        // threads while `Worker::main_loop` runs, and then `ctx` points at
        // that loop's context, which stays in place and alive until the
        // loop clears `CURRENT` (also on unwind). We are on that thread, so
        // the loop is below us on the stack and outlives this call. The
        // matching id means the context has this pool's `T`. The context is
        // only ever used through shared references.
        let ctx = unsafe { &*ctx.cast::<WorkerContext<T>>() };
        f(Some(ctx))
    } else {
        f(None)
    }
}

/// The identity of a pool: the address of its shared state, unique while
/// the pool (and so any of its workers) is alive.
#[inline]
pub(crate) fn pool_id<T>(shared: &Arc<Shared<T>>) -> usize {
    let shared: &Shared<T> = shared;
    std::ptr::from_ref(shared) as usize
}

/// The result of one search.
pub(crate) enum Found<T> {
    Item(T),
    /// Nothing found, but a steal lost a race: search again at once.
    Retry,
    Empty,
}

/// The worker loop's private state (the context is kept apart and only
/// ever borrowed shared, because `CURRENT` points at it).
pub(crate) struct Search {
    rng: fastrand::Rng,
    /// Calls of `find` since the last fairness check.
    tick: u32,
    /// Items taken in a row from the next-item slot (see [`NEXT_STREAK`]).
    next_streak: u32,
    /// Whether this worker counts as searching in the sleep state.
    searching: bool,
    /// Failed searches in a row.
    failed: u32,
    /// Woken from a park and no item run since (for `empty_unparks`).
    woken: bool,
    /// Per worker: its run count when this worker first saw its next-item
    /// slot full in that run (`usize::MAX`: not seen full), and when. The
    /// item is taken when a search at least `stuck` later finds the same
    /// count (see `crate::next`).
    seen_runs: Vec<(usize, clock::Instant)>,
    /// [`STUCK`], or another time for tests.
    stuck: std::time::Duration,
    /// This search follows a watch (see `crate::sleep`): it looks at the
    /// other workers' next-item slots. Other searches do not, as their
    /// owners write those lines at every hop (tests: every search looks).
    watched: bool,
    /// Every search looks at the next-item slots (tests).
    always_look: bool,
}

/// The clock of the hostage rule; under loom a clock that has always run
/// past the limit, so that models stay deterministic.
#[cfg(not(stepsched_loom))]
mod clock {
    pub(crate) use std::time::Instant;
}

#[cfg(stepsched_loom)]
mod clock {
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Instant;

    impl Instant {
        pub(crate) fn now() -> Self {
            Instant
        }

        pub(crate) fn elapsed(&self) -> std::time::Duration {
            std::time::Duration::MAX
        }
    }
}

/// Clears `CURRENT` when the worker loop ends, also on unwind.
struct ClearCurrent;

impl Drop for ClearCurrent {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set((0, std::ptr::null())));
    }
}

impl<T: Send + 'static> WorkerContext<T> {
    pub(crate) fn new(index: usize, deque: Deque<T>, shared: Arc<Shared<T>>) -> Self {
        WorkerContext {
            index,
            deque,
            next: shared.nexts[index].clone(),
            counters: shared.counters[index].clone(),
            shared,
        }
    }

    /// Takes everything left to this worker, in the order it would run it:
    /// its next item, then its deque (for models and tests).
    #[cfg(test)]
    pub(crate) fn drain_local(&self) -> Vec<T> {
        let next = self.next().take();
        next.into_iter()
            .chain(std::iter::from_fn(|| self.deque.pop()))
            .collect()
    }

    /// Announces work this worker made visible in its own deque. In a
    /// one-worker pool there is nobody to wake: the pusher is the only
    /// worker and it is awake, so the fence is skipped.
    #[inline]
    fn announce_local(&self) {
        if self.shared.workers() > 1 {
            self.shared.sleep.notify_one(None);
        }
    }

    #[inline]
    fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Runs one item, catching a panic.
    #[inline]
    fn run(&self, item: T) {
        self.next().count_run();
        let result = catch_unwind(AssertUnwindSafe(|| self.shared.runner.run(item, self)));
        let counters = self.counters();
        counters.items_run.inc();
        if let Err(payload) = result {
            counters.panics.inc();
            // A payload whose own drop panics must not take the worker down.
            let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
        }
    }
}

/// The worker thread's body: finds and runs items until the pool ends.
pub(crate) fn main_loop<T: Send + 'static>(ctx: WorkerContext<T>) {
    let ctx = &ctx;
    let mut search = Search::new(ctx.index);
    CURRENT.with(|c| c.set((pool_id(&ctx.shared), std::ptr::from_ref(ctx).cast::<()>())));
    let _clear = ClearCurrent;
    let shared = &*ctx.shared;
    loop {
        // Relaxed: a forced stop only has to be noticed eventually; the
        // parker lock through which `terminate` wakes a parked worker
        // orders it for that worker.
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        match search.find(ctx) {
            Found::Item(item) => {
                if search.searching {
                    search.searching = false;
                    if shared.sleep.stop_searching() {
                        shared.notify_if_work();
                    }
                }
                search.failed = 0;
                search.woken = false;
                ctx.run(item);
            }
            Found::Retry => spin_loop(),
            Found::Empty => {
                search.failed += 1;
                match backoff(search.failed) {
                    Backoff::Spin => {
                        ctx.counters().spins.inc();
                        for _ in 0..1u32 << search.failed {
                            spin_loop();
                        }
                    }
                    Backoff::Yield => {
                        ctx.counters().spins.inc();
                        thread::yield_now();
                    }
                    Backoff::Park => {
                        search.failed = 0;
                        if !search.park(ctx) {
                            break;
                        }
                    }
                }
            }
        }
    }
}

impl Search {
    pub(crate) fn new(index: usize) -> Self {
        Search {
            rng: if cfg!(stepsched_loom) {
                fastrand::Rng::with_seed(index as u64)
            } else {
                fastrand::Rng::new()
            },
            tick: 0,
            next_streak: 0,
            searching: false,
            failed: 0,
            woken: false,
            seen_runs: Vec::new(),
            stuck: STUCK,
            watched: false,
            always_look: false,
        }
    }

    /// Sets how long another worker must stay in one run before this one
    /// takes its next item (tests).
    #[cfg(all(test, not(stepsched_loom)))]
    pub(crate) fn with_stuck(mut self, stuck: std::time::Duration) -> Self {
        self.stuck = stuck;
        self.always_look = true;
        self
    }

    /// Parks (see [`crate::sleep`]); `false` if the worker must exit.
    #[cold]
    fn park<T: Send + 'static>(&mut self, ctx: &WorkerContext<T>) -> bool {
        let shared = &*ctx.shared;
        let counters = ctx.counters();
        if std::mem::take(&mut self.woken) {
            counters.empty_unparks.inc();
        }
        trace::debug!(worker = ctx.index, "worker parking");
        let outcome = shared.sleep.park(
            ctx.index,
            self.searching,
            || shared.has_work(),
            || counters.parks.inc(),
        );
        trace::debug!(
            worker = ctx.index,
            outcome = match outcome {
                Parked::Work => "work found before blocking",
                Parked::Woken => "woken",
                Parked::Watched => "watched the next-item slots",
                Parked::Exit => "exit",
            },
            "worker unparked"
        );
        match outcome {
            Parked::Exit => {
                self.searching = false;
                false
            }
            Parked::Woken => {
                counters.unparks.inc();
                self.woken = true;
                self.searching = true;
                true
            }
            Parked::Work => {
                self.searching = true;
                true
            }
            Parked::Watched => {
                self.watched = true;
                self.searching = true;
                // One look, then back to sleep: no spinning or yielding
                // for a wait that nobody's work ended.
                self.failed = PARK_LIMIT - 1;
                true
            }
        }
    }

    /// One search, in the order of the module docs.
    #[inline]
    pub(crate) fn find<T: Send + 'static>(&mut self, ctx: &WorkerContext<T>) -> Found<T> {
        let shared = &*ctx.shared;
        let index = ctx.index;
        let counters = ctx.counters();

        self.tick += 1;
        if self.tick >= FAIRNESS_INTERVAL {
            self.tick = 0;
            self.next_streak = 0;
            if let Some(item) = shared.inboxes[index].pop() {
                counters.inbox_pops.inc();
                return Found::Item(item);
            }
            if let Some(item) = shared.global.pop() {
                counters.global_pops.inc();
                return Found::Item(item);
            }
            // The oldest item of the worker's own deque: the owner pops
            // the newest, so without this an item pushed early could wait
            // behind a stream of newer ones for as long as they keep coming.
            if let Steal::Success(item) = ctx.deque.pop_oldest() {
                return Found::Item(item);
            }
        }

        if let Some(item) = ctx.next().take() {
            if self.next_streak < NEXT_STREAK {
                self.next_streak += 1;
                return Found::Item(item);
            }
            // The slot has run `NEXT_STREAK` items in a row: two processes
            // handing the slot back and forth would otherwise keep the
            // deque waiting forever (a process displaced into the deque
            // by one of them included). Run the deque's oldest item first,
            // so that chains take turns in queue order; the slot's item
            // goes to the deque, to run right after it (LIFO), stealable
            // and announced meanwhile. A `Retry` (a thief is taking items
            // at that moment) runs the slot's item: the thief is taking
            // the oldest ones.
            self.next_streak = 0;
            return Found::Item(match ctx.deque.pop_oldest() {
                Steal::Success(other) => {
                    ctx.push(item);
                    other
                }
                Steal::Empty | Steal::Retry => item,
            });
        }
        self.next_streak = 0;
        if let Some(item) = ctx.deque.pop() {
            return Found::Item(item);
        }
        if let Some(item) = shared.inboxes[index].pop() {
            counters.inbox_pops.inc();
            return Found::Item(item);
        }
        if let Some(item) = shared.global.pop() {
            let mut moved = 0;
            while moved < GLOBAL_BATCH {
                match shared.global.pop() {
                    Some(more) => {
                        ctx.deque.push(more);
                        moved += 1;
                    }
                    None => break,
                }
            }
            counters.global_pops.add(1 + moved as u64);
            if moved > 0 {
                // The moved items' producers may have skipped their wake-up
                // because a worker was searching; that worker's re-check no
                // longer sees them in the global queue, so announce them
                // again from their new place (found by loom).
                ctx.announce_local();
            }
            return Found::Item(item);
        }

        if !self.searching {
            if !shared.sleep.try_start_searching() {
                // Enough workers search already: back off (and park in the
                // end) without sweeping the others' deques.
                return Found::Empty;
            }
            self.searching = true;
        }
        self.steal(ctx)
    }

    /// Step 4: the other workers' deques, then their inboxes.
    #[cold]
    fn steal<T: Send + 'static>(&mut self, ctx: &WorkerContext<T>) -> Found<T> {
        let shared = &*ctx.shared;
        let index = ctx.index;
        let counters = ctx.counters();
        let n = shared.workers();
        if n == 1 {
            return Found::Empty;
        }
        let start = if cfg!(stepsched_loom) {
            index + 1
        } else {
            self.rng.usize(..n)
        };
        let mut retry = false;
        for k in 0..n {
            let victim = (start + k) % n;
            if victim == index {
                continue;
            }
            counters.steal_attempts.inc();
            let before = ctx.deque.len();
            match shared.stealers[victim].steal_half_into(&ctx.deque) {
                Steal::Success(item) => {
                    let moved = ctx.deque.len().saturating_sub(before);
                    counters.items_stolen.add(1 + moved as u64);
                    trace::trace!(
                        worker = index,
                        victim,
                        items = 1 + moved,
                        "stole from a deque"
                    );
                    return Found::Item(item);
                }
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
        }
        // `try_pop`: most inboxes a sweep looks at are empty, and an empty
        // `pop` costs a SeqCst fence each (on 16 CPUs at 16 workers,
        // `SegQueue::pop` took 24 % of the samples of a fan-in run). The
        // worker's own inbox and the global queue above keep the plain
        // `pop`: the cheaper look there made a lone worker catch up with an
        // outside sender, so that every message woke its receiver instead
        // of queueing behind it (fan-in at one worker on two CPUs: 111
        // against 31 ns per message).
        for k in 0..n {
            let victim = (start + k) % n;
            if victim == index {
                continue;
            }
            if let Some(item) = shared.inboxes[victim].try_pop() {
                counters.items_stolen.inc();
                trace::trace!(worker = index, victim, "took from another worker's inbox");
                return Found::Item(item);
            }
        }
        // Last, after a watch, an item kept in another worker's next-item
        // slot since our previous look, while that worker has not started
        // another run for `stuck`: it is stuck in a long one (see
        // `crate::next`).
        if !std::mem::take(&mut self.watched) && !self.always_look {
            return if retry { Found::Retry } else { Found::Empty };
        }
        if self.seen_runs.len() != n {
            self.seen_runs = vec![(usize::MAX, clock::Instant::now()); n];
        }
        for k in 0..n {
            let victim = (start + k) % n;
            if victim == index {
                continue;
            }
            let slot = &shared.nexts[victim];
            if !slot.is_full() {
                self.seen_runs[victim].0 = usize::MAX;
                continue;
            }
            let runs = slot.runs();
            let (seen, since) = self.seen_runs[victim];
            if seen != runs {
                self.seen_runs[victim] = (runs, clock::Instant::now());
                continue;
            }
            if since.elapsed() >= self.stuck
                && let Some(item) = slot.steal()
            {
                self.seen_runs[victim].0 = usize::MAX;
                counters.items_stolen.inc();
                trace::trace!(worker = index, victim, "took a waiting next item");
                return Found::Item(item);
            }
        }
        if retry { Found::Retry } else { Found::Empty }
    }
}
