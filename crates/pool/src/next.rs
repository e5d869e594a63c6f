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
//! owner fills and empties it, and a *searching* worker takes the item when
//! it sees the same item waiting across two of its searches while the
//! owner's run count ([`NextSlot::runs`]) has not moved: the owner is still
//! in the run that filled the slot. A chain whose runs are short is never
//! taken from its core this way (the count moves between two searches).
//!
//! # Protocol
//!
//! One state byte: `EMPTY`, `FULL` (a value is in the cell), `MOVING` (a
//! thread that won `FULL → MOVING` is moving the value out). Only the owner
//! moves `EMPTY → FULL` (after writing the value, with Release); whoever
//! wins the CAS `FULL → MOVING` (Acquire: it sees the value) reads the
//! value and stores `EMPTY` (Release: the read is done before the owner may
//! write again). The owner's take is the same CAS as a thief's, so exactly
//! one of them gets the item; an owner that finds `MOVING` waits for
//! `EMPTY` (a thief is between two instructions) and gets nothing. This is
//! the single-slot case of a work-stealing deque's owner/thief race (Chase
//! and Lev 2005), with a CAS on both sides instead of the owner's fence.

use std::mem::MaybeUninit;

use crate::primitive::cell::UnsafeCell;
use crate::primitive::hint::spin_loop;
use crate::primitive::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

const EMPTY: u8 = 0;
const FULL: u8 = 1;
const MOVING: u8 = 2;

/// One worker's next-item slot (see the module docs).
pub(crate) struct NextSlot<T> {
    state: AtomicU8,
    /// Runs the owner has started: a thief takes the item only while this
    /// stays put (see the module docs). Written by the owner alone.
    runs: AtomicUsize,
    value: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: the value moves between threads (owner to thief), so `T: Send`
// suffices; the cell is only read or written by the one thread that owns
// it by the state protocol (see the module docs).
unsafe impl<T: Send> Sync for NextSlot<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for NextSlot<T> {}

impl<T> NextSlot<T> {
    pub(crate) fn new() -> Self {
        NextSlot {
            state: AtomicU8::new(EMPTY),
            runs: AtomicUsize::new(0),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// Owner: puts `item` in the slot; returns the item it held, if any.
    #[inline]
    pub(crate) fn put(&self, item: T) -> Option<T> {
        let displaced = self.take();
        // SAFETY: the slot is EMPTY (our take emptied it or saw it empty,
        // and only the owner fills it), so no thread reads the cell.
        self.value.with_mut(|p| unsafe { (*p).write(item) });
        // Release: publishes the value to the thread whose Acquire CAS
        // moves the slot out of FULL.
        self.state.store(FULL, Ordering::Release);
        displaced
    }

    /// Owner: takes the item, if the slot holds one.
    #[inline]
    pub(crate) fn take(&self) -> Option<T> {
        // Acquire: EMPTY read here may be a thief's Release store after it
        // moved the value out, and our next write of the cell (`put`) must
        // come after that read (loom found the Relaxed load's race). Only
        // the owner moves the slot out of EMPTY, so EMPTY stays EMPTY; any
        // other value is re-read by the CAS below.
        if self.state.load(Ordering::Acquire) == EMPTY {
            return None;
        }
        loop {
            match self.claim() {
                Claim::Item(item) => return Some(item),
                Claim::Empty => return None,
                // A thief is moving the item out: it stores EMPTY next.
                Claim::Moving => spin_loop(),
            }
        }
    }

    /// Thief: takes the item if there is one.
    #[inline]
    pub(crate) fn steal(&self) -> Option<T> {
        // Relaxed: a hint; the CAS decides.
        if self.state.load(Ordering::Relaxed) != FULL {
            return None;
        }
        match self.claim() {
            Claim::Item(item) => Some(item),
            Claim::Empty | Claim::Moving => None,
        }
    }

    /// Whether an item waits in the slot (a snapshot).
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        // Relaxed: a snapshot; the owner reads its own writes, and others
        // decide nothing on it without the CAS.
        self.state.load(Ordering::Relaxed) == FULL
    }

    /// The runs the owner has started (a snapshot, for thieves).
    #[inline]
    pub(crate) fn runs(&self) -> usize {
        // Relaxed: compared with an earlier snapshot only; the item itself
        // is handed over by the state CAS.
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

    fn claim(&self) -> Claim<T> {
        // Acquire on success: the owner's value write (before its Release
        // store of FULL) happens before our read. Acquire on failure too:
        // an owner that reads EMPTY here (a thief moved the item out) may
        // write the cell next, after the thief's read (loom found the
        // Relaxed failure's race).
        match self
            .state
            .compare_exchange(FULL, MOVING, Ordering::Acquire, Ordering::Acquire)
        {
            Ok(_) => {
                // SAFETY: we won FULL → MOVING: the cell holds an initialized
                // value that nobody else reads or writes until we store
                // EMPTY; reading moves it out (the slot no longer owns it).
                let item = self.value.with(|p| unsafe { (*p).assume_init_read() });
                // Release: our read is done before the owner's next write
                // (its take or put reads EMPTY first).
                self.state.store(EMPTY, Ordering::Release);
                Claim::Item(item)
            }
            Err(MOVING) => Claim::Moving,
            Err(_) => Claim::Empty,
        }
    }
}

enum Claim<T> {
    Item(T),
    Empty,
    Moving,
}

impl<T> Drop for NextSlot<T> {
    fn drop(&mut self) {
        // Relaxed: `&mut self`, no other thread can touch the slot.
        if self.state.load(Ordering::Relaxed) == FULL {
            // SAFETY: FULL: the cell holds an initialized value that no
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
