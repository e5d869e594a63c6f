//! The state every worker and every handle of one pool shares, and the
//! submission gate that makes shutdown race-free.
//!
//! # The gate
//!
//! Submissions from outside the pool pass a gate: one atomic word holding a
//! `CLOSED` bit and the number of submitters currently inside. A submitter
//! enters with one `fetch_add`; if the word it replaced had `CLOSED` set, it
//! leaves at once and hands its item back. Otherwise it pushes, notifies and
//! leaves with a `fetch_sub`. Shutdown sets `CLOSED` with `fetch_or` and then
//! waits until the count is zero. All three are RMWs of one word, so they
//! are totally ordered: a submitter that entered before the close finishes
//! its push before shutdown goes on (its Release `fetch_sub` synchronizes
//! with shutdown's Acquire load that sees zero), and one that entered after
//! the close is refused. No accepted item can arrive after shutdown has
//! started draining, which is what lets the last sleeper decide the pool is
//! empty for good.

use crossbeam_utils::CachePadded;
use stepsched_deque::{Steal, Stealer};

use crate::Runner;
use crate::next::NextSlot;
use crate::primitive::sync::Arc;
use crate::primitive::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::primitive::thread;
use crate::queue::Queue;
use crate::sleep::Sleep;
use crate::stats::Counters;

/// The gate's closed bit.
const CLOSED: usize = 1 << (usize::BITS - 1);

/// The submission gate (see the module docs).
#[derive(Debug)]
pub(crate) struct Gate(CachePadded<AtomicUsize>);

impl Gate {
    fn new() -> Self {
        Gate(CachePadded::new(AtomicUsize::new(0)))
    }

    /// Enters the gate; `false` if the pool is closed.
    #[inline]
    pub(crate) fn enter(&self) -> bool {
        // Relaxed: the RMW's place in the word's modification order is all
        // that matters (see the module docs); the push that follows is
        // published by `leave`.
        let prev = self.0.fetch_add(1, Ordering::Relaxed);
        if prev & CLOSED != 0 {
            self.leave();
            return false;
        }
        true
    }

    /// Leaves the gate.
    #[inline]
    pub(crate) fn leave(&self) {
        // Release: the submitter's push happens before `close` returns
        // (pairs with the Acquire load there).
        self.0.fetch_sub(1, Ordering::Release);
    }

    /// Closes the gate and waits for the submitters inside to leave.
    pub(crate) fn close(&self) {
        // Release: whatever the closer did before (setting the stop flag)
        // is visible to a thread whose Acquire `is_closed` sees the gate
        // closed. Otherwise only the modification order matters.
        self.0.fetch_or(CLOSED, Ordering::Release);
        // Acquire: pairs with the Release in `leave`, so every accepted
        // push is visible once the count reads zero.
        while self.0.load(Ordering::Acquire) & !CLOSED != 0 {
            // Submitters inside only push and notify: a bounded wait.
            thread::yield_now();
        }
    }

    /// Whether the gate is closed.
    pub(crate) fn is_closed(&self) -> bool {
        // Acquire: pairs with the Release in `close` (see there).
        self.0.load(Ordering::Acquire) & CLOSED != 0
    }
}

/// What every worker and handle of one pool shares.
pub(crate) struct Shared<T> {
    /// Submissions from outside and explicit injections.
    pub(crate) global: Queue<T>,
    /// Per-worker affinity inboxes; any worker may pop from any of them.
    pub(crate) inboxes: Box<[CachePadded<Queue<T>>]>,
    /// Thief handles of every worker's deque.
    pub(crate) stealers: Box<[Stealer<T>]>,
    /// Every worker's next-item slot (`WorkerContext::push_next`). Each in
    /// an `Arc` of its own, so that its worker's context holds a direct
    /// reference: the worker reaches it several times per item, and an
    /// index into this slice costs a bounds check and an address
    /// computation each time (32 instructions per item in all, with the
    /// counters below, in a one-worker message benchmark).
    pub(crate) nexts: Box<[Arc<CachePadded<NextSlot<T>>>]>,
    /// Per-worker statistics (each in an `Arc`, as `nexts`).
    pub(crate) counters: Box<[Arc<CachePadded<Counters>>]>,
    pub(crate) sleep: Sleep,
    pub(crate) gate: Gate,
    /// Forced stop: workers exit after their current item.
    pub(crate) stop: AtomicBool,
    pub(crate) runner: Box<dyn Runner<T>>,
}

impl<T> std::fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("workers", &self.stealers.len())
            .field("sleep", &self.sleep)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Shared<T> {
    pub(crate) fn new(stealers: Vec<Stealer<T>>, runner: Box<dyn Runner<T>>) -> Self {
        let workers = stealers.len();
        Shared {
            global: Queue::new(),
            inboxes: (0..workers)
                .map(|_| CachePadded::new(Queue::new()))
                .collect(),
            stealers: stealers.into_boxed_slice(),
            nexts: (0..workers)
                .map(|_| Arc::new(CachePadded::new(NextSlot::new(workers > 1))))
                .collect(),
            counters: (0..workers)
                .map(|_| Arc::new(CachePadded::new(Counters::default())))
                .collect(),
            sleep: Sleep::new(workers),
            gate: Gate::new(),
            stop: AtomicBool::new(false),
            runner,
        }
    }

    #[inline]
    pub(crate) fn workers(&self) -> usize {
        self.stealers.len()
    }

    /// Whether any source holds work: the global queue, any inbox, any
    /// deque. Called after a SeqCst fence by the sleep protocol.
    pub(crate) fn has_work(&self) -> bool {
        !self.global.is_empty()
            || self.inboxes.iter().any(|q| !q.is_empty())
            || self.stealers.iter().any(|s| !s.is_empty())
    }

    /// The last searcher's duty: after it stopped searching, wake a sleeper
    /// if work is queued anywhere.
    #[cold]
    pub(crate) fn notify_if_work(&self) {
        // SeqCst fence: orders the searcher's `stop_searching` RMW before the
        // queue reads, pairing with the producers' fence in `notify_one`.
        crate::primitive::sync::atomic::fence(Ordering::SeqCst);
        if self.has_work() {
            self.sleep.notify_one(None);
        }
    }

    /// Pushes onto the global queue and wakes a worker if needed.
    #[inline]
    pub(crate) fn push_global(&self, item: T) {
        self.global.push(item);
        self.sleep.notify_one(None);
    }

    /// Pushes onto worker `index`'s inbox and wakes a worker (that one if it
    /// sleeps) if needed.
    #[inline]
    pub(crate) fn push_inbox(&self, index: usize, item: T) {
        self.inboxes[index].push(item);
        self.sleep.notify_one(Some(index));
    }

    /// Drops every queued item. Only called once no worker runs.
    pub(crate) fn drop_queued(&self) {
        for next in self.nexts.iter() {
            drop(next.steal());
        }
        while self.global.pop().is_some() {}
        for inbox in self.inboxes.iter() {
            while inbox.pop().is_some() {}
        }
        for stealer in self.stealers.iter() {
            loop {
                match stealer.steal() {
                    Steal::Success(item) => drop(item),
                    Steal::Empty => break,
                    Steal::Retry => thread::yield_now(),
                }
            }
        }
    }
}
