//! Blocks of slots: the unit of allocation and reuse.
//!
//! A block holds `BLOCK_CAP` consecutive slots of the queue's index space,
//! starting at `start` (a multiple of `BLOCK_CAP`, wrapping modulo 2^32).
//! Blocks form a singly linked list in index order; see the crate-level
//! module `queue` for the protocol that walks, grows, releases and recycles
//! them.
//!
//! Each slot has a state byte next to its value, stored (with Release) by
//! the producer that claimed the slot once it is done with it: the block's
//! current *lap* tag and a tombstone bit (set when the claim was refused,
//! or abandoned because making its value unwound, and the slot holds
//! nothing). A slot is ready when its tag equals the block's lap. Every
//! claimed slot therefore becomes ready exactly once, which is what lets
//! the consumer move past it. A plain store per slot (rather than
//! a `fetch_or` on a shared ready word) keeps the push at one
//! read-modify-write, the claim; and since a block is recycled only after
//! every one of its slots was written in its current lap, recycling just
//! bumps the lap instead of clearing every state.

use core::mem::MaybeUninit;
use core::ptr::{self, NonNull};

use crate::primitive::cell::UnsafeCell;
use crate::primitive::sync::atomic::{AtomicPtr, AtomicU8, AtomicU32, AtomicU64, Ordering};

/// Slots per block. Eight keeps the first block of a queue that has seen
/// one value small (a scheduler creates one queue per process that receives)
/// while linking a block only once per eight pushes; in the `mpsc` and
/// `scheduler_*` benchmarks 8 and 32 measured within the noise of each other.
#[cfg(not(stepsched_loom))]
pub(crate) const BLOCK_CAP: u32 = 8;
/// Slots per block. Small under loom so growth, release and recycling are
/// reached in a handful of operations.
#[cfg(stepsched_loom)]
pub(crate) const BLOCK_CAP: u32 = 2;

/// The low bits of an index: the offset inside its block.
pub(crate) const OFFSET_MASK: u32 = BLOCK_CAP - 1;

/// The state bit of a refused claim (no value); the lap is in bits 1..8.
const TOMBSTONE: u8 = 1;
/// Laps cycle through `1..=MAX_LAP`; a fresh slot's state 0 matches none.
const MAX_LAP: u8 = u8::MAX >> 1;

/// Set in `release` once the block is released by the producers; the low 32
/// bits then hold the observed tail index.
const RELEASED: u64 = 1 << 32;

const _: () = assert!(BLOCK_CAP.is_power_of_two() && BLOCK_CAP <= 32);

/// The index of the first slot of the block holding `index`.
#[inline(always)]
pub(crate) const fn start_of(index: u32) -> u32 {
    index & !OFFSET_MASK
}

/// Whether `index` is at or after `mark` in the wrapping index space
/// (valid while the two are less than 2^31 apart, which the span limit of
/// the queue guarantees).
#[inline(always)]
pub(crate) const fn reached(index: u32, mark: u32) -> bool {
    (index.wrapping_sub(mark) as i32) >= 0
}

pub(crate) struct Block<T> {
    /// Fields read by every producer on every push (`start`, `lap`).
    head: Header<T>,
    /// The slots, each with its state next to its value, so that a push
    /// writes one place (one or two cache lines) and the consumer reads it
    /// there.
    slots: [Slot<T>; BLOCK_CAP as usize],
}

/// The fields of a block other than its slots (32 bytes). Not aligned to
/// a cache line: an over-aligned block would be allocated through the
/// system allocator's slower `memalign` path, with padding lost around
/// it, once per block. The header may then share a line with the first
/// slot or two: with several producers, a write to one of those slots
/// costs the others reading `start` and `lap` one miss.
struct Header<T> {
    /// Index of slot 0. Written only while the block is unreachable by other
    /// threads (allocation, or recycling by the consumer) and published by
    /// the Release CAS that links the block.
    start: AtomicU32,
    /// The tag of ready slots in this lifetime of the block (`1..=MAX_LAP`),
    /// bumped on recycling. Written, like `start`, only while private.
    lap: AtomicU8,
    /// The next block in index order, null until linked.
    next: AtomicPtr<Block<T>>,
    /// The block this one was linked after (null for a queue's first
    /// block). Written, like `start`, only while the block is private.
    prev: AtomicPtr<Block<T>>,
    /// `RELEASED | observed tail`, or 0 while producers may still walk here.
    release: AtomicU64,
}

/// One slot: a value and its state (`lap << 1 | tombstone`, 0 when fresh).
struct Slot<T> {
    value: UnsafeCell<MaybeUninit<T>>,
    state: AtomicU8,
}

impl<T> Block<T> {
    /// The slot of logical `offset`.
    #[inline(always)]
    fn slot(&self, offset: u32) -> &Slot<T> {
        &self.slots[offset as usize]
    }

    /// An empty, unlinked block starting at `start`, by value: a queue's
    /// first block lives inside the queue's shared state, so that a queue
    /// that never grows is one allocation.
    pub(crate) fn new(start: u32) -> Self {
        Block {
            head: Header {
                start: AtomicU32::new(start),
                lap: AtomicU8::new(1),
                next: AtomicPtr::new(ptr::null_mut()),
                prev: AtomicPtr::new(ptr::null_mut()),
                release: AtomicU64::new(0),
            },
            slots: core::array::from_fn(|_| Slot {
                value: UnsafeCell::new(MaybeUninit::uninit()),
                state: AtomicU8::new(0),
            }),
        }
    }

    /// Allocates an empty, unlinked block starting at `start`.
    pub(crate) fn alloc(start: u32) -> NonNull<Self> {
        NonNull::from(Box::leak(Box::new(Self::new(start))))
    }

    /// Frees a block without dropping any value in it.
    ///
    /// # Safety
    /// `block` came from [`Block::alloc`] (it is not a queue's first block,
    /// which its shared state owns), no other thread can reach it, and
    /// every value it held has been moved out or dropped.
    pub(crate) unsafe fn free(block: NonNull<Self>) {
        // SAFETY: allocated by `Box` in `alloc` and exclusively ours (caller).
        drop(unsafe { Box::from_raw(block.as_ptr()) });
    }

    #[inline(always)]
    pub(crate) fn start(&self) -> u32 {
        // Relaxed: `start` is written before the block is published by a
        // Release CAS, and every reader reached the block through an Acquire
        // load of the pointer to it.
        self.head.start.load(Ordering::Relaxed)
    }

    /// The ready tag of this lifetime of the block.
    #[inline(always)]
    pub(crate) fn lap(&self) -> u8 {
        // Relaxed: as for `start`.
        self.head.lap.load(Ordering::Relaxed)
    }

    #[inline(always)]
    pub(crate) fn next(&self, order: Ordering) -> Option<NonNull<Self>> {
        NonNull::new(self.head.next.load(order))
    }

    /// The block this one was linked after.
    ///
    /// # Safety
    /// `self` is not the first block of its queue, and the caller keeps the
    /// previous block live (it is at or after a block the caller protects).
    #[inline]
    pub(crate) unsafe fn prev(&self) -> &Self {
        // Relaxed: `prev` is written before the block is published by a
        // Release CAS, and we reached the block through an Acquire load.
        let prev = self.head.prev.load(Ordering::Relaxed);
        debug_assert!(!prev.is_null(), "walked back past the first block");
        // SAFETY: non-null and live (caller).
        unsafe { &*prev }
    }

    /// Writes the value `value` makes into slot `offset` and marks it
    /// ready. If `value` unwinds, the slot is marked ready as a tombstone
    /// instead (an abandoned claim: no value), so that the consumer moves
    /// past it, and the unwind goes on.
    ///
    /// # Safety
    /// The caller claimed the slot (it is the only writer) and the block is
    /// live for it (see the reclamation argument in `queue`).
    #[inline(always)]
    pub(crate) unsafe fn write(&self, offset: u32, value: impl FnOnce() -> T) {
        /// Tombstones the claimed slot if making its value unwinds; forgotten
        /// once the value is written, so the push's path is unchanged.
        struct Abandon<'a, T> {
            block: &'a Block<T>,
            offset: u32,
        }

        impl<T> Drop for Abandon<'_, T> {
            #[cold]
            fn drop(&mut self) {
                self.block.tombstone(self.offset);
            }
        }

        let abandon = Abandon {
            block: self,
            offset,
        };
        let slot = &self.slot(offset).value;
        // SAFETY: the slot was claimed by this thread only, and the consumer
        // reads it only after seeing the state stored below. The value is
        // made right here, so that it can be built in the slot rather than
        // built elsewhere and copied. If making it unwinds, nothing was
        // written: the guard's tombstone says the slot holds no value.
        slot.with_mut(|p| unsafe { (*p).write(value()) });
        core::mem::forget(abandon);
        // Release: publishes the value to the consumer's Acquire load of the
        // state.
        self.slot(offset)
            .state
            .store(self.lap() << 1, Ordering::Release);
    }

    /// Marks a claimed slot ready with no value (a refused claim, or an
    /// accepted one whose value could not be made).
    #[inline]
    pub(crate) fn tombstone(&self, offset: u32) {
        // Release: orders this producer's earlier accesses to the block
        // before the consumer's (Acquire) decision to recycle it.
        self.slot(offset)
            .state
            .store(self.lap() << 1 | TOMBSTONE, Ordering::Release);
    }

    /// Whether slot `offset` is ready, and whether it is a tombstone.
    #[inline(always)]
    pub(crate) fn slot_state(&self, offset: u32) -> (bool, bool) {
        self.slot_state_in_lap(offset, self.lap())
    }

    /// As [`Block::slot_state`], with the block's current lap supplied by
    /// a caller that knows it (the consumer caches its head block's lap).
    #[inline(always)]
    pub(crate) fn slot_state_in_lap(&self, offset: u32, lap: u8) -> (bool, bool) {
        // Acquire: pairs with the Release store in `write`, so the value is
        // visible to the read that follows.
        let state = self.slot(offset).state.load(Ordering::Acquire);
        (state >> 1 == lap, state & TOMBSTONE != 0)
    }

    /// Moves the value out of slot `offset` into `dst`: one copy, from the
    /// slot straight to its destination (no temporary on the stack).
    ///
    /// # Safety
    /// The slot is ready (seen with Acquire), is not a tombstone, and its
    /// value has not been moved out or dropped yet; `dst` is valid for a
    /// write of one `T` and holds nothing that needs dropping.
    #[inline(always)]
    pub(crate) unsafe fn read_into(&self, offset: u32, dst: *mut T) {
        // SAFETY: initialised and published (caller); the producer no longer
        // touches it, so this is the only access; `dst` is writable (caller).
        self.slot(offset)
            .value
            .with(|p| unsafe { ptr::copy_nonoverlapping((*p).as_ptr(), dst, 1) });
    }

    /// Drops the value in slot `offset` in place.
    ///
    /// # Safety
    /// As for [`Block::read_into`] (without `dst`).
    pub(crate) unsafe fn drop_value(&self, offset: u32) {
        // SAFETY: as for `read_into` (caller).
        self.slot(offset)
            .value
            .with_mut(|p| unsafe { (*p).assume_init_drop() });
    }

    /// Records that the producers' hint has moved past this block, with the
    /// claim index observed right after (step 1 of the release protocol).
    #[inline]
    pub(crate) fn mark_released(&self, observed_tail: u32) {
        // Release: pairs with the consumer's Acquire in `observed_tail`, so
        // this producer's reads of the block happen before its recycling.
        self.head
            .release
            .store(RELEASED | u64::from(observed_tail), Ordering::Release);
    }

    /// The observed tail recorded by [`Block::mark_released`], if released.
    #[inline]
    pub(crate) fn observed_tail(&self) -> Option<u32> {
        // Acquire: pairs with the Release store in `mark_released`.
        let r = self.head.release.load(Ordering::Acquire);
        (r & RELEASED != 0).then_some(r as u32)
    }

    /// Links `block` right after `self`, giving it the following start
    /// index; on failure returns the block already linked there.
    ///
    /// `block` must be unreachable by other threads (fresh or recycled).
    #[inline]
    pub(crate) fn try_push(&self, block: NonNull<Self>) -> Result<(), NonNull<Self>> {
        // SAFETY: `block` is exclusively ours until the CAS below succeeds.
        let b = unsafe { block.as_ref() };
        // Relaxed (both): published by the Release CAS below.
        b.head
            .start
            .store(self.start().wrapping_add(BLOCK_CAP), Ordering::Relaxed);
        b.head
            .prev
            .store(ptr::from_ref(self).cast_mut(), Ordering::Relaxed);
        // Release on success: publishes the block's fields to every thread
        // that reaches it through `next` (Acquire). Acquire on failure: we
        // dereference the block another thread linked.
        match self.head.next.compare_exchange(
            ptr::null_mut(),
            block.as_ptr(),
            Ordering::Release,
            Ordering::Acquire,
        ) {
            Ok(_) => Ok(()),
            // SAFETY: a non-null `next` is always a valid block pointer.
            Err(actual) => Err(unsafe { NonNull::new_unchecked(actual) }),
        }
    }

    /// Allocates a block and links it somewhere after `self`; returns the
    /// block that ends up right after `self` (ours or a concurrent one).
    ///
    /// Losing the race does not waste the allocation: the block is appended
    /// further down the list, where a later claim will use it. Each failed
    /// CAS means another thread linked a block, so this is lock-free.
    pub(crate) fn grow(&self) -> NonNull<Self> {
        let fresh = Self::alloc(self.start().wrapping_add(BLOCK_CAP));
        let winner = match self.try_push(fresh) {
            Ok(()) => return fresh,
            Err(winner) => winner,
        };
        let mut curr = winner;
        loop {
            // SAFETY: every block from the hint this producer loaded on is
            // live for it: see the release protocol in `queue`.
            match unsafe { curr.as_ref() }.try_push(fresh) {
                Ok(()) => return winner,
                Err(next) => curr = next,
            }
        }
    }

    /// Makes a block that left the list empty again, for reuse: a new lap
    /// makes every slot not ready (each was written in the lap that ends).
    ///
    /// # Safety
    /// Only the consumer calls this, on a block no other thread can reach
    /// any more, every slot of which was taken in its current lap.
    pub(crate) unsafe fn reset(&self) {
        let lap = self.lap();
        let next_lap = if lap == MAX_LAP { 1 } else { lap + 1 };
        // Relaxed (all three): the block is private to the consumer until the
        // Release CAS in `try_push` publishes it again.
        self.head.lap.store(next_lap, Ordering::Relaxed);
        self.head.next.store(ptr::null_mut(), Ordering::Relaxed);
        self.head.release.store(0, Ordering::Relaxed);
    }
}
