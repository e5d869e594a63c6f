//! The sleep protocol: how idle workers park, how producers wake them, and
//! how a draining pool decides it is finished.
//!
//! `crates/pool/SLEEP.md` is the full write-up with the proof sketch; this is
//! the summary the code follows. The protocol is the "searching worker" rule
//! of Go's scheduler and tokio's `idle.rs`, with the sleep/recheck handshake
//! rayon's `sleep/README.md` describes.
//!
//! # State
//!
//! One atomic word holds two counts: `searching` (workers looking for work
//! in other workers' queues, including the ones spinning between searches)
//! and `sleeping` (workers registered in the sleeper list). The sleeper
//! list and the `draining` flag sit behind one mutex, held only for a few
//! loads and stores; every change of `sleeping` happens under it, and so
//! does the one write of `terminated` (an atomic, so a woken worker reads
//! it without the mutex). Each worker blocks on a parker of its own (a token behind its
//! own mutex, with a condition variable), so a wake-up touches the list's
//! lock briefly and then only the woken worker's.
//!
//! # Worker side
//!
//! * Starting to steal: `searching += 1` ([`Sleep::start_searching`]).
//! * Finding work while searching: `searching -= 1`; the *last* searcher to
//!   stop (count 1 → 0) issues a SeqCst fence, re-checks every queue and, if
//!   any holds work, notifies one sleeper ([`Sleep::stop_searching`], then
//!   the caller's `notify_if_work`). Producers skip wake-ups while someone
//!   searches, so this is what keeps the work they left from waiting.
//! * Parking ([`Sleep::park`]): under the mutex, register in the list and
//!   `sleeping += 1` (and `searching -= 1` if searching) in one RMW; then,
//!   outside it, a SeqCst fence and a re-check of **every** source (own
//!   deque, own inbox, global queue, every other deque and inbox). Work
//!   found: take itself off the list under the mutex and go back to
//!   searching; if a waker took it off first, consume that waker's token
//!   instead (it already counted the worker as searching). Otherwise wait
//!   on its own parker until its token is set. While the pool drains, the
//!   re-check stays under the mutex (see *Draining*).
//!
//! # Producer side
//!
//! Push the item, SeqCst fence, load the word ([`Sleep::notify_one`]). If
//! someone is searching, or nobody sleeps, do nothing. Otherwise take the
//! mutex, re-check `searching`, pop one sleeper (the preferred one if it is
//! asleep), move it from `sleeping` to `searching`, release the mutex and
//! set the sleeper's token in its parker. The
//! woken worker counts as a searcher from that moment, so the next producer
//! does not wake a second worker for work the first is about to find: no
//! thundering herd.
//!
//! # Why no wake-up is lost
//!
//! A producer and a parking worker form a Dekker pair: the producer writes
//! the queue then reads the word; the worker writes the word then reads the
//! queue; a SeqCst fence sits between the write and the read on both sides.
//! The fences are totally ordered. If the producer's comes first, the
//! worker's re-check sees the item (C++ `[atomics.order]`, fence–fence rule)
//! and the worker does not park. If the worker's comes first, the producer
//! sees `sleeping ≥ 1` and wakes someone — unless it sees `searching > 0`,
//! in which case that searcher is responsible: it either parks (and re-checks
//! as above) or finds work, and if it is the last searcher it re-checks with
//! the same fence pairing and wakes a sleeper for what is left. By induction
//! on the searchers, some worker always ends up looking at the item.
//!
//! The worker registers under the mutex before its fence, so a producer
//! that saw `sleeping ≥ 1` and takes the mutex finds it in the list, or
//! finds it gone because another waker took it (it is awake), or because
//! it took itself off (its re-check found work, or its watch ran out: it
//! counts as searching, and the producer's re-check of `searching` under
//! the mutex sees that). A waker may pick the worker before its re-check:
//! the worker then blocks on a token that is already set, or, if its
//! re-check found work, finds itself off the list and consumes the token.
//!
//! # Draining
//!
//! [`Sleep::begin_draining`] marks the pool as finishing. From then on the
//! worker that registers as the last sleeper (all `workers` registered) and
//! whose re-check under the mutex finds every source empty sets
//! `terminated` and wakes everyone to exit. The check is exact: while a
//! worker is registered it holds no item and pushes nothing, so with all of
//! them registered (and outside submissions already refused) nothing can
//! appear, and the mutex orders every earlier push before the check. A
//! worker registered before draining began may still be re-checking outside
//! the mutex; it takes no item before it takes itself off the list under
//! the mutex, so the decision sees whatever it sees.

use crossbeam_utils::CachePadded;

use crate::primitive::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
use crate::primitive::sync::{Condvar, Mutex, MutexGuard};

/// Bit position of the `sleeping` count in the state word.
const SLEEPING_SHIFT: u32 = usize::BITS / 2;
/// One searching worker.
const SEARCHING_ONE: usize = 1;
/// One sleeping worker.
const SLEEPING_ONE: usize = 1 << SLEEPING_SHIFT;
/// The `searching` field.
const SEARCHING_MASK: usize = SLEEPING_ONE - 1;
/// Moves one worker from `sleeping` to `searching` (wrapping add).
const SLEEPING_TO_SEARCHING: usize = SEARCHING_ONE.wrapping_sub(SLEEPING_ONE);
/// Moves one worker from `searching` to `sleeping` (wrapping add).
const SEARCHING_TO_SLEEPING: usize = SLEEPING_ONE.wrapping_sub(SEARCHING_ONE);

/// A snapshot of the state word.
#[derive(Clone, Copy, PartialEq, Eq)]
struct State(usize);

impl State {
    fn searching(self) -> usize {
        self.0 & SEARCHING_MASK
    }

    fn sleeping(self) -> usize {
        self.0 >> SLEEPING_SHIFT
    }
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("searching", &self.searching())
            .field("sleeping", &self.sleeping())
            .finish()
    }
}

/// Everything behind the sleep mutex: the sleeper list and the pool's
/// ending. The lock is held for a few loads and stores, never across a
/// re-check of the queues or a wait (except while draining, see
/// [`Sleep::park`]).
#[derive(Debug)]
struct Sleepers {
    /// Registered sleepers, most recent last (woken LIFO: the most recently
    /// parked worker has the warmest cache).
    idle: Vec<usize>,
    /// Shutdown has begun: the last worker to find nothing ends the pool.
    draining: bool,
}

/// One worker's own park state: its wake-up token, behind a mutex of its
/// own with a condition variable, so that a wake-up touches only the
/// woken worker's lock.
#[derive(Debug)]
struct Parker {
    token: Mutex<Token>,
    wake: Condvar,
}

/// What a worker's parker holds.
#[derive(Debug, Default)]
struct Token {
    /// A waker took the worker off the sleeper list (or ended the pool)
    /// and has not yet been seen by it.
    set: bool,
    /// The worker is blocked on its condition variable (tests read it).
    #[cfg(test)]
    blocked: bool,
}

impl Parker {
    fn new() -> Self {
        Parker {
            token: Mutex::new(Token::default()),
            wake: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Token> {
        // Poisoned only by a panic inside this module's critical sections,
        // which run no user code; keep going.
        self.token.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the token and wakes the worker. Called once per removal from
    /// the sleeper list, after the list's lock is released.
    fn unpark(&self) {
        let mut token = self.lock();
        token.set = true;
        drop(token);
        self.wake.notify_one();
    }

    /// Blocks until the token is set (or, with a limit, until it runs
    /// out); returns whether the token was set, and consumes it if so.
    fn wait(&self, limit: Option<std::time::Duration>) -> bool {
        let mut token = self.lock();
        #[cfg(test)]
        {
            token.blocked = true;
        }
        while !token.set {
            match limit {
                None => token = self.wake.wait(token).unwrap_or_else(|e| e.into_inner()),
                Some(limit) => {
                    let (guard, waited) = self
                        .wake
                        .wait_timeout(token, limit)
                        .unwrap_or_else(|e| e.into_inner());
                    token = guard;
                    if waited.timed_out() {
                        break;
                    }
                }
            }
        }
        #[cfg(test)]
        {
            token.blocked = false;
        }
        std::mem::take(&mut token.set)
    }
}

/// How long a watcher sleeps before it looks at the next-item slots again
/// (see [`Sleep::park`]).
const WATCH: std::time::Duration = std::time::Duration::from_millis(1);

/// How a call to [`Sleep::park`] ended.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parked {
    /// The re-check found work; the worker never blocked. It is searching.
    Work,
    /// The worker blocked and was woken. It is searching.
    Woken,
    /// The worker watched (see [`Sleep::park`]) and its time ran out: it
    /// unregistered itself and is searching.
    Watched,
    /// The pool terminated: the worker must exit.
    Exit,
}

/// The sleep state of a pool of `workers` workers.
#[derive(Debug)]
pub(crate) struct Sleep {
    state: CachePadded<AtomicUsize>,
    sleepers: Mutex<Sleepers>,
    /// One parker per worker, each on its own cache line, so a wake-up
    /// targets one thread and contends with nobody else's.
    parkers: Box<[CachePadded<Parker>]>,
    /// The pool is over: every worker exits. Written once, under the
    /// list's lock; read under it, or by a worker its token woke.
    terminated: AtomicBool,
    workers: usize,
    /// Whether a worker sleeps as the watcher: with a time limit, to look
    /// at the other workers' next-item slots again (see [`Sleep::park`]).
    /// Set and cleared under the mutex; read without it by `nudge`.
    /// On a line of its own: `nudge` reads it at every `push_next`, and
    /// the mutex beside it changes at every park.
    watching: CachePadded<AtomicBool>,
}

impl Sleep {
    pub(crate) fn new(workers: usize) -> Self {
        assert!(
            workers > 0 && workers < SEARCHING_MASK,
            "worker count out of range"
        );
        Sleep {
            state: CachePadded::new(AtomicUsize::new(0)),
            sleepers: Mutex::new(Sleepers {
                idle: Vec::with_capacity(workers),
                draining: false,
            }),
            parkers: (0..workers)
                .map(|_| CachePadded::new(Parker::new()))
                .collect(),
            terminated: AtomicBool::new(false),
            workers,
            watching: CachePadded::new(AtomicBool::new(false)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Sleepers> {
        // A poisoned lock can only come from a panic inside this module's
        // own critical sections, which contain no user code; keep going.
        self.sleepers.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn load(&self) -> State {
        // SeqCst: read after the caller's SeqCst fence; the fence carries
        // the argument, SeqCst keeps the load itself in the total order too.
        State(self.state.load(Ordering::SeqCst))
    }

    /// Counts the calling worker as searching.
    #[inline]
    pub(crate) fn start_searching(&self) {
        // SeqCst: producers read this count after their fence to decide to
        // skip a wake-up; see the module docs.
        self.state.fetch_add(SEARCHING_ONE, Ordering::SeqCst);
    }

    /// Counts the calling worker as searching unless half the workers (at
    /// least one) already search: `false` then, and the caller looks no
    /// further than its own queues and the global queue this time (tokio
    /// caps its searching workers the same way). More searchers find no
    /// more work, since every producer wakes at most one worker and each
    /// searcher that stops re-checks for what is left; they only sweep
    /// the other workers' deques, each sweep a remote cache line per
    /// victim.
    #[inline]
    pub(crate) fn try_start_searching(&self) -> bool {
        // SeqCst: as `start_searching`. The check and the increment are
        // not one step, so two workers may both pass it: the cap is a
        // bound on the common case, not an invariant (nothing relies on
        // it).
        let searching = State(self.state.load(Ordering::SeqCst)).searching();
        if 2 * searching >= self.workers.max(2) {
            return false;
        }
        self.start_searching();
        true
    }

    /// Stops counting the calling worker as searching (it found work).
    /// Returns `true` if it was the last searcher: the caller must then
    /// re-check the queues and notify if any holds work.
    #[inline]
    pub(crate) fn stop_searching(&self) -> bool {
        // SeqCst: this write is the searcher's half of the last-searcher
        // handshake; the caller's fence follows it.
        let prev = State(self.state.fetch_sub(SEARCHING_ONE, Ordering::SeqCst));
        debug_assert!(prev.searching() > 0, "searching count underflow: {prev:?}");
        prev.searching() == 1
    }

    /// The producer side: call after making work visible. Wakes one sleeper
    /// unless a worker is searching or nobody sleeps. `prefer` names a
    /// worker to wake if it is asleep (the owner of an inbox).
    #[inline]
    pub(crate) fn notify_one(&self, prefer: Option<usize>) {
        // SeqCst fence: orders the caller's push before the load below,
        // pairing with the fence in `park` (and in the last searcher's
        // re-check). See the module docs.
        fence(Ordering::SeqCst);
        let state = self.load();
        if state.searching() > 0 || state.sleeping() == 0 {
            return;
        }
        self.wake_one_cold(prefer);
    }

    /// A worker kept an item in its next-item slot, announced to nobody:
    /// if no worker searches, none watches and some sleep, wake one, so
    /// that an idle worker is awake to take the item should the owner's
    /// run go on for long (see `crate::next`). A hint, not part of the
    /// no-lost-wake-up argument: the owner runs the item anyway once its
    /// run returns, so the loads need no fence.
    #[inline]
    pub(crate) fn nudge(&self) {
        // Relaxed (both): a stale value costs a wake-up or delays one; no
        // item is lost either way.
        if self.watching.load(Ordering::Relaxed) {
            return;
        }
        let state = State(self.state.load(Ordering::Relaxed));
        if state.searching() > 0 || state.sleeping() == 0 {
            return;
        }
        self.wake_one_cold(None);
    }

    #[cold]
    #[inline(never)]
    fn wake_one_cold(&self, prefer: Option<usize>) {
        let mut sleepers = self.lock();
        // Re-checked under the lock: a worker woken by a concurrent
        // producer already counts as searching, and will find our item too.
        if self.load().searching() > 0 {
            return;
        }
        let position = prefer
            .and_then(|p| sleepers.idle.iter().position(|&i| i == p))
            .or_else(|| sleepers.idle.len().checked_sub(1));
        let Some(position) = position else {
            return;
        };
        let index = sleepers.idle.swap_remove(position);
        // SeqCst: keeps the count in the total order the producers' and
        // searchers' fences argue over.
        self.state
            .fetch_add(SLEEPING_TO_SEARCHING, Ordering::SeqCst);
        drop(sleepers);
        // Off the list, so no other waker picks it; the token follows
        // outside the list's lock.
        self.parkers[index].unpark();
    }

    /// Parks worker `index` unless `has_work` finds something after it has
    /// announced itself (see the module docs). `searching` says whether the
    /// worker currently counts as searching. `on_block` runs just before the
    /// worker blocks (for statistics).
    ///
    /// Whatever the outcome other than [`Parked::Exit`], the worker counts
    /// as searching afterwards.
    ///
    /// The list's lock covers only the registration; the re-check and the
    /// wait happen outside it, the wait on the worker's own parker. While
    /// the pool drains, the re-check stays under the lock, so that the last
    /// worker to register decides on the end from a view no registration
    /// or removal can interleave with.
    pub(crate) fn park(
        &self,
        index: usize,
        searching: bool,
        has_work: impl Fn() -> bool,
        on_block: impl FnOnce(),
    ) -> Parked {
        let mut sleepers = self.lock();
        // Relaxed: written under the lock we hold.
        if self.terminated.load(Ordering::Relaxed) {
            if searching {
                // SeqCst: as everywhere on this word (the pool is over; this
                // only keeps the count exact).
                self.state.fetch_sub(SEARCHING_ONE, Ordering::SeqCst);
            }
            return Parked::Exit;
        }
        sleepers.idle.push(index);
        let delta = if searching {
            SEARCHING_TO_SLEEPING
        } else {
            SLEEPING_ONE
        };
        // SeqCst: the sleeper's write of the Dekker pair; see the module docs.
        let prev = State(self.state.fetch_add(delta, Ordering::SeqCst));
        // A searcher that leaves others searching skips the re-check (and
        // its O(workers) sweep): a producer that saw it searching skipped
        // its wake-up for the searchers, and the last of them re-checks
        // here, or in `stop_searching`'s caller, after it. Everyone else
        // re-checks: a worker that was not searching, and the last searcher.
        let recheck = !searching || prev.searching() == 1;
        if sleepers.draining {
            // SeqCst fence: as below.
            fence(Ordering::SeqCst);
            if has_work() {
                let removed = self.remove_locked(&mut sleepers, index);
                debug_assert!(removed, "the sleeper list changed under its lock");
                return Parked::Work;
            }
            if prev.sleeping() + 1 == self.workers {
                // Every worker is registered and nothing is queued: done.
                self.terminate_locked(&mut sleepers);
                return Parked::Exit;
            }
            drop(sleepers);
            on_block();
            return self.block(index, false);
        }
        // While another worker is awake (running, or searching), one
        // sleeper watches: it sleeps at most `WATCH`, then searches again,
        // and so takes an item left in a next-item slot behind a long run
        // (see `crate::next`). Relaxed: `watching` changes under the list's
        // lock, which we hold; `nudge` reads it as a hint.
        let watch = prev.sleeping() + 1 < self.workers && !self.watching.load(Ordering::Relaxed);
        if watch {
            self.watching.store(true, Ordering::Relaxed);
        }
        drop(sleepers);
        // SeqCst fence: orders the announcement above before the re-check
        // below, pairing with the producer's fence in `notify_one`.
        fence(Ordering::SeqCst);
        if recheck && has_work() {
            if self.unregister(index, watch) {
                return Parked::Work;
            }
            // A waker took us off the list first; its token is on its way
            // (it set ours to searching). Nothing blocked, nothing to count.
            let outcome = self.block(index, false);
            if watch {
                self.stop_watching();
            }
            return if outcome == Parked::Woken {
                Parked::Work
            } else {
                outcome
            };
        }
        on_block();
        self.block(index, watch)
    }

    /// Takes worker `index` off the sleeper list and counts it as searching,
    /// unless a waker already did (`false`: its token is set or about to
    /// be). `watched`: the worker set `watching`, which it clears.
    fn unregister(&self, index: usize, watched: bool) -> bool {
        let mut sleepers = self.lock();
        if !self.remove_locked(&mut sleepers, index) {
            return false;
        }
        if watched {
            // Relaxed: under the list's lock, as every write of the flag.
            self.watching.store(false, Ordering::Relaxed);
        }
        true
    }

    /// Under the list's lock: takes worker `index` off the list and moves
    /// it from sleeping to searching; `false` if it is not on the list.
    fn remove_locked(&self, sleepers: &mut Sleepers, index: usize) -> bool {
        let Some(at) = sleepers.idle.iter().position(|&i| i == index) else {
            return false;
        };
        sleepers.idle.swap_remove(at);
        // SeqCst: as every change of the word (see the module docs).
        self.state
            .fetch_add(SLEEPING_TO_SEARCHING, Ordering::SeqCst);
        true
    }

    /// The watcher stops watching (woken by a token).
    fn stop_watching(&self) {
        let _sleepers = self.lock();
        // Relaxed: under the list's lock, as every write of the flag.
        self.watching.store(false, Ordering::Relaxed);
    }

    /// Waits on worker `index`'s parker until a waker's token (or, for the
    /// watcher, until `WATCH` runs out and it takes itself off the list).
    fn block(&self, index: usize, watch: bool) -> Parked {
        let parker = &self.parkers[index];
        if !watch {
            let woken = parker.wait(None);
            debug_assert!(woken, "an untimed wait ends only with the token");
        } else if !parker.wait(Some(WATCH)) {
            // The time ran out and nobody woke us: take ourselves off the
            // list and search, unless a waker did meanwhile.
            if self.unregister(index, true) {
                return Parked::Watched;
            }
            let woken = parker.wait(None);
            debug_assert!(woken, "an untimed wait ends only with the token");
        }
        if watch {
            self.stop_watching();
        }
        // Relaxed: the token came through our parker's mutex after the
        // terminator's store (it sets the flag, then the tokens), so that
        // store happens before this load.
        if self.terminated.load(Ordering::Relaxed) {
            Parked::Exit
        } else {
            Parked::Woken
        }
    }

    /// Starts draining: from now on the last worker to find nothing ends
    /// the pool. If every worker is already asleep and `has_work` finds
    /// nothing, ends it at once.
    pub(crate) fn begin_draining(&self, has_work: impl Fn() -> bool) {
        let mut sleepers = self.lock();
        sleepers.draining = true;
        // A registered worker may still be re-checking outside the lock;
        // it holds no item and takes none before it takes itself off the
        // list under this lock, so `has_work` sees what it sees.
        if sleepers.idle.len() == self.workers && !has_work() {
            self.terminate_locked(&mut sleepers);
        }
    }

    /// Ends the pool now: every sleeper is woken to exit and no worker
    /// parks again.
    pub(crate) fn terminate(&self) {
        let mut sleepers = self.lock();
        self.terminate_locked(&mut sleepers);
    }

    fn terminate_locked(&self, sleepers: &mut Sleepers) {
        // Relaxed: read under the lock we hold, or by a worker after its
        // token, which follows (see `block`).
        self.terminated.store(true, Ordering::Relaxed);
        while let Some(index) = sleepers.idle.pop() {
            // SeqCst: as everywhere on this word (kept exact for `parked`).
            self.state.fetch_sub(SLEEPING_ONE, Ordering::SeqCst);
            // Under the list's lock: the lock order is list, then parker
            // (no one takes the list's lock holding a parker's).
            self.parkers[index].unpark();
        }
    }

    /// Whether the pool has terminated.
    #[cfg(all(test, not(stepsched_loom)))]
    pub(crate) fn is_terminated(&self) -> bool {
        // Relaxed: written once, under the lock we take.
        let _sleepers = self.lock();
        self.terminated.load(Ordering::Relaxed)
    }

    /// Workers currently registered as sleepers: each is blocked on its
    /// parker or about to be (its re-check, outside the lock, found nothing
    /// yet or is still running).
    pub(crate) fn sleeping(&self) -> usize {
        self.lock().idle.len()
    }

    /// Whether every worker is registered, blocked, and none watches: each
    /// then waits without a time limit, and nothing changes until a
    /// wake-up. Read under the list's lock, so the facts hold at one moment.
    #[cfg(all(test, not(stepsched_loom)))]
    pub(crate) fn settled(&self) -> bool {
        let sleepers = self.lock();
        sleepers.idle.len() == self.workers
            && !self.watching.load(Ordering::Relaxed)
            && self.parkers.iter().all(|p| p.lock().blocked)
    }

    /// Whether worker `index`'s token is set (a wake-up not yet seen).
    #[cfg(test)]
    pub(crate) fn token_set(&self, index: usize) -> bool {
        self.parkers[index].lock().set
    }

    /// Pretends a watcher sleeps (or none), for tests that need a sleeper
    /// not to watch.
    #[cfg(all(test, not(stepsched_loom)))]
    pub(crate) fn set_watching(&self, on: bool) {
        let _sleepers = self.lock();
        self.watching.store(on, Ordering::Relaxed);
    }

    /// Workers currently counted as searching.
    #[cfg(test)]
    pub(crate) fn searching(&self) -> usize {
        self.load().searching()
    }
}
