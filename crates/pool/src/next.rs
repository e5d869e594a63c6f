//! A worker's next-item slot ([`WorkerContext::push_next`]), which its
//! owner runs next and which an idle worker may take when the owner is
//! stuck in a long run.
//!
//! # Why it can be stolen
//!
//! The slot keeps the continuation of a chain (a process woken by the step
//! that runs) on the core that has it warm, and wakes nobody for it. But if
//! the step that filled the slot then runs for a long time — a process
//! wakes another and goes on computing for 50 ms — the woken process would
//! wait for it, while other workers sit idle. So the slot is shared: the
//! owner fills and empties it, and a *watching* worker (a sleeper that
//! woke from its 1 ms watch, see `SLEEP.md`) takes the item when it sees
//! it waiting across two of its looks at least `STUCK` (500 µs) apart,
//! while the owner's run count ([`NextSlot::runs`]) has not moved: the
//! owner is still in the run that filled the slot. A chain whose runs are
//! short is never taken from its core this way (the count moves between
//! two looks). Other searches do not look at the slots at all: their
//! owners write those lines at every hop.
//!
//! # Protocol
//!
//! The owner fills and empties the slot at every hop of a chain, so its
//! side must cost no more than a private slot: plain loads and stores, no
//! read-modify-write, no fence instruction. A thief is rare (an owner stuck
//! in one run for a millisecond or more), so it pays for both sides. This
//! is Dekker's mutual exclusion with an *asymmetric* fence pair:
//!
//! - `full`: an item is in the cell. Only the owner sets it (after writing
//!   the cell, Release); whoever takes the item clears it (after reading
//!   the cell, Release).
//! - Owner's take: `owner = true`; light fence; if `thief` is false, read
//!   the cell if `full`, clear `full`; `owner = false` (Release). If
//!   `thief` is true, step back (`owner = false`), wait for the thief to
//!   finish, and look at `full` again.
//! - Thief's steal: win `thief` (a CAS among thieves, one at a time);
//!   heavy fence; if `owner` is false and `full` is true, read the cell and
//!   clear `full`; `thief = false` (Release).
//!
//! The light fence is a compiler fence; the heavy one is Linux's
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, which makes every thread
//! of the process pass a full memory barrier, so the pair acts as two
//! SeqCst fences (the scheme of Linux's `sys_membarrier` and folly's
//! `asymmetric_thread_fence_heavy`). With two SeqCst fences between each
//! side's flag store and its load of the other's flag, at least one side
//! sees the other's flag: the owner and a thief never both read the cell.
//! Where the heavy fence is not available (another OS, a kernel without
//! `membarrier`, a seccomp filter that refuses it) thieves never take:
//! the slot is then private in effect, and a long run keeps its item as
//! tokio's LIFO slot does. Under loom both fences are `fence(SeqCst)`.
//!
//! This is the single-item case of a work-stealing deque's owner/thief
//! race (Chase and Lev 2005), where the owner's `take` fence (the one Lê
//! et al. 2013 prove necessary on weak memory models) moves to the thief.

use std::mem::MaybeUninit;

use crate::primitive::cell::UnsafeCell;
use crate::primitive::hint::spin_loop;
use crate::primitive::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// One worker's next-item slot (see the module docs).
pub(crate) struct NextSlot<T> {
    /// The cell holds an item.
    full: AtomicBool,
    /// The owner is inside its take (see the module docs).
    owner: AtomicBool,
    /// A thief is inside its steal (see the module docs).
    thief: AtomicBool,
    /// Runs the owner has started: a thief takes the item only while this
    /// stays put (see the module docs). Written by the owner alone.
    runs: AtomicUsize,
    value: UnsafeCell<MaybeUninit<T>>,
    /// Whether other threads may take from the slot while its owner runs:
    /// not in a pool of one worker, whose owner then skips the flags.
    shared: bool,
}

// SAFETY: the value moves between threads (owner to thief), so `T: Send`
// suffices; the cell is only read or written by the one thread that owns
// it by the protocol (see the module docs).
unsafe impl<T: Send> Sync for NextSlot<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for NextSlot<T> {}

impl<T> NextSlot<T> {
    /// A slot; `shared`: other workers may take from it (a pool of more
    /// than one worker).
    pub(crate) fn new(shared: bool) -> Self {
        NextSlot {
            full: AtomicBool::new(false),
            owner: AtomicBool::new(false),
            thief: AtomicBool::new(false),
            runs: AtomicUsize::new(0),
            value: UnsafeCell::new(MaybeUninit::uninit()),
            shared,
        }
    }

    /// Owner: puts `item` in the slot; returns the item it held, if any.
    #[inline]
    pub(crate) fn put(&self, item: T) -> Option<T> {
        let displaced = self.take();
        // SAFETY: the slot is empty (our take emptied it or saw it empty,
        // with Acquire, after any thief's read; only the owner fills it),
        // so no thread reads the cell until we set `full`.
        self.value.with_mut(|p| unsafe { (*p).write(item) });
        // Release: publishes the value to the thief whose Acquire load
        // reads `full`.
        self.full.store(true, Ordering::Release);
        displaced
    }

    /// Owner: takes the item, if the slot holds one.
    #[inline]
    pub(crate) fn take(&self) -> Option<T> {
        // Acquire: `false` read here may be a thief's Release store after
        // it moved the value out, and our next write of the cell (`put`)
        // must come after that read. Only the owner sets `full`, so a
        // `false` stays `false`.
        if !self.full.load(Ordering::Acquire) {
            return None;
        }
        if !self.shared {
            // SAFETY: full, and no other thread touches the slot while the
            // pool runs (only `Shared::drop_queued`, once every worker has
            // exited).
            let item = self.value.with(|p| unsafe { (*p).assume_init_read() });
            // Relaxed: no other thread reads the flag while the pool runs.
            self.full.store(false, Ordering::Relaxed);
            return Some(item);
        }
        loop {
            // Relaxed: ordered before the load of `thief` by the fence
            // pair (see the module docs), not by this store.
            self.owner.store(true, Ordering::Relaxed);
            fence::light();
            // Acquire: a `false` written by a thief that took the item
            // comes after its clearing of `full`, which we read next.
            if !self.thief.load(Ordering::Acquire) {
                // No thief can read the cell now (it would see `owner`).
                // Relaxed: nobody else writes `full` while we are here,
                // and a thief's earlier clearing is ours by the Acquire
                // above (or by the one at the top).
                let item = if self.full.load(Ordering::Relaxed) {
                    // SAFETY: full, and no thief reads the cell while
                    // `owner` is set and we saw no thief (the fence pair).
                    let item = self.value.with(|p| unsafe { (*p).assume_init_read() });
                    // Relaxed: published by the Release store of `owner`.
                    self.full.store(false, Ordering::Relaxed);
                    Some(item)
                } else {
                    None
                };
                // Release: a thief that reads this `false` (Acquire) sees
                // `full` cleared and our read of the cell done.
                self.owner.store(false, Ordering::Release);
                return item;
            }
            // A thief is deciding: step back and let it finish.
            // Relaxed: the thief decides on `owner` only through the fence
            // pair; a stale `true` makes it give up, which is allowed.
            self.owner.store(false, Ordering::Relaxed);
            // Acquire: its `false` comes after its clearing of `full`.
            while self.thief.load(Ordering::Acquire) {
                spin_loop();
            }
            // Acquire: as at the top.
            if !self.full.load(Ordering::Acquire) {
                return None;
            }
        }
    }

    /// Thief: takes the item if there is one. Never takes where the heavy
    /// fence is unavailable (see the module docs).
    pub(crate) fn steal(&self) -> Option<T> {
        // Relaxed: a hint; the decision comes after the fence.
        if !self.full.load(Ordering::Relaxed) {
            return None;
        }
        // Acquire: the previous thief's clearing of `full` is ours. One
        // thief at a time.
        if self
            .thief
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return None;
        }
        let mut item = None;
        if fence::heavy() {
            // Acquire (both): an owner's `false` is stored after its read of
            // the cell and its clearing of `full`; `full` set by the owner
            // publishes the cell's value.
            if !self.owner.load(Ordering::Acquire) && self.full.load(Ordering::Acquire) {
                // SAFETY: full, and the owner cannot read the cell now: it
                // set `owner` after our fence, so it will see `thief` and
                // step back (the fence pair).
                item = Some(self.value.with(|p| unsafe { (*p).assume_init_read() }));
                // Release: our read of the cell is done before the owner's
                // next write of it (its `take` reads `false` with Acquire).
                self.full.store(false, Ordering::Release);
            }
        }
        // Release: an owner waiting for this sees our clearing of `full`.
        self.thief.store(false, Ordering::Release);
        item
    }

    /// Whether an item waits in the slot (a snapshot).
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        // Relaxed: a snapshot; the owner reads its own writes, and others
        // decide nothing on it without the protocol.
        self.full.load(Ordering::Relaxed)
    }

    /// The runs the owner has started (a snapshot, for thieves).
    #[inline]
    pub(crate) fn runs(&self) -> usize {
        // Relaxed: compared with an earlier snapshot only; the item itself
        // is handed over by the protocol.
        self.runs.load(Ordering::Relaxed)
    }

    /// Owner: counts a run starting.
    #[inline]
    pub(crate) fn count_run(&self) {
        // Relaxed, and a load and a store: the owner is the only writer,
        // and the count orders nothing (see `runs`).
        let runs = self.runs.load(Ordering::Relaxed);
        self.runs.store(runs.wrapping_add(1), Ordering::Relaxed);
    }
}

/// The asymmetric fence pair (see the module docs).
#[cfg(not(stepsched_loom))]
mod fence {
    use std::sync::atomic::{Ordering, compiler_fence};

    /// The owner's side: keeps the compiler from moving its flag store
    /// after its load of the thief's flag; the heavy fence does the rest.
    #[inline(always)]
    pub(super) fn light() {
        compiler_fence(Ordering::SeqCst);
    }

    /// The thief's side: a full barrier on every running thread of the
    /// process. False where unavailable: the thief must not take.
    #[cfg(target_os = "linux")]
    pub(super) fn heavy() -> bool {
        use std::sync::OnceLock;

        // From linux/membarrier.h.
        const PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
        const REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;
        static REGISTERED: OnceLock<bool> = OnceLock::new();

        let registered = *REGISTERED.get_or_init(|| {
            // SAFETY: membarrier takes two integers and a CPU id and
            // touches no memory of ours; registering the process for the
            // expedited command has no other effect.
            unsafe { libc::syscall(libc::SYS_membarrier, REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 }
        });
        // SAFETY: as above; the command returns once every running thread
        // of the process has passed a full memory barrier.
        registered && unsafe { libc::syscall(libc::SYS_membarrier, PRIVATE_EXPEDITED, 0, 0) == 0 }
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn heavy() -> bool {
        false
    }
}

/// Under loom, both sides are SeqCst fences, which loom models.
#[cfg(stepsched_loom)]
mod fence {
    use crate::primitive::sync::atomic::{Ordering, fence};

    pub(super) fn light() {
        fence(Ordering::SeqCst);
    }

    pub(super) fn heavy() -> bool {
        fence(Ordering::SeqCst);
        true
    }
}

impl<T> Drop for NextSlot<T> {
    fn drop(&mut self) {
        // Relaxed: `&mut self`, no other thread can touch the slot.
        if self.full.load(Ordering::Relaxed) {
            // SAFETY: full: the cell holds an initialized value that no
            // one else owns.
            self.value.with_mut(|p| unsafe { (*p).assume_init_drop() });
        }
    }
}

impl<T> std::fmt::Debug for NextSlot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NextSlot")
            .field("full", &self.is_full())
            .finish_non_exhaustive()
    }
}
