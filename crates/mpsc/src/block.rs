//! Blocks of slots: the unit of allocation and reuse.
//!
//! A block holds `BLOCK_CAP` consecutive slots of the queue's index space,
//! starting at `start` (a multiple of `BLOCK_CAP`, wrapping modulo 2^32).
//! Blocks form a singly linked list in index order; see the crate-level
//! module `queue` for the protocol that walks, grows, releases and recycles
//! them.
//!
//! The `ready` word has one bit per slot in its low half (set, with Release,
//! by the producer that claimed the slot once the slot is final) and one
//! "tombstone" bit per slot in its high half (set together with the ready bit
//! when the claim was refused, so the slot holds no value). Every claimed
//! slot therefore becomes ready exactly once, value or tombstone, which is
//! what lets the consumer move past it and the block become *final*.

use core::mem::MaybeUninit;
use core::ptr::{self, NonNull};

use crate::primitive::cell::UnsafeCell;
use crate::primitive::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// Slots per block. Small under loom so growth, release and recycling are
/// reached in a handful of operations.
#[cfg(not(stepsched_loom))]
pub(crate) const BLOCK_CAP: u32 = 32;
/// Slots per block. Small under loom so growth, release and recycling are
/// reached in a handful of operations.
#[cfg(stepsched_loom)]
pub(crate) const BLOCK_CAP: u32 = 2;

/// The low bits of an index: the offset inside its block.
pub(crate) const OFFSET_MASK: u32 = BLOCK_CAP - 1;

/// Ready bits of every slot of a block.
const ALL_READY: u64 = (1u64 << BLOCK_CAP) - 1;

/// Shift of the tombstone half of `ready`.
const TOMB_SHIFT: u32 = 32;

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

/// A run of ready slots found by the consumer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Run {
    /// Number of consecutive ready slots from the asked offset.
    pub(crate) len: u32,
    /// Tombstone bits of that run, bit 0 being the asked offset.
    pub(crate) tombs: u64,
}

pub(crate) struct Block<T> {
    /// Index of slot 0. Written only while the block is unreachable by other
    /// threads (allocation, or recycling by the consumer) and published by
    /// the Release CAS that links the block.
    start: AtomicU32,
    /// The next block in index order, null until linked.
    next: AtomicPtr<Block<T>>,
    /// Ready bits (low half) and tombstone bits (high half).
    ready: AtomicU64,
    /// `RELEASED | observed tail`, or 0 while producers may still walk here.
    release: AtomicU64,
    slots: [UnsafeCell<MaybeUninit<T>>; BLOCK_CAP as usize],
}

impl<T> Block<T> {
    /// Allocates an empty, unlinked block starting at `start`.
    pub(crate) fn alloc(start: u32) -> NonNull<Self> {
        let block = Box::new(Block {
            start: AtomicU32::new(start),
            next: AtomicPtr::new(ptr::null_mut()),
            ready: AtomicU64::new(0),
            release: AtomicU64::new(0),
            slots: core::array::from_fn(|_| UnsafeCell::new(MaybeUninit::uninit())),
        });
        NonNull::from(Box::leak(block))
    }

    /// Frees a block without dropping any value in it.
    ///
    /// # Safety
    /// `block` came from [`Block::alloc`], no other thread can reach it, and
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
        self.start.load(Ordering::Relaxed)
    }

    #[inline(always)]
    pub(crate) fn next(&self, order: Ordering) -> Option<NonNull<Self>> {
        NonNull::new(self.next.load(order))
    }

    /// Whether every slot of the block has been written or tombstoned.
    #[inline]
    pub(crate) fn is_final(&self) -> bool {
        // Acquire: pairs with the Release `fetch_or` of every producer of
        // this block, so the hint advance and the release record that follow
        // are ordered after all their writes.
        self.ready.load(Ordering::Acquire) & ALL_READY == ALL_READY
    }

    /// Writes `value` into slot `offset` and marks it ready.
    ///
    /// # Safety
    /// The caller claimed the slot (it is the only writer) and the block is
    /// live for it (see the reclamation argument in `queue`).
    #[inline]
    pub(crate) unsafe fn write(&self, offset: u32, value: T) {
        let slot = &self.slots[offset as usize];
        // SAFETY: the slot was claimed by this thread only, and the consumer
        // reads it only after seeing the ready bit set below.
        slot.with_mut(|p| unsafe { (*p).write(value) });
        // Release: publishes the value to the consumer's Acquire load of
        // `ready`.
        self.ready.fetch_or(1 << offset, Ordering::Release);
    }

    /// Marks a claimed slot ready with no value (a refused claim).
    #[inline]
    pub(crate) fn tombstone(&self, offset: u32) {
        let bits = (1u64 << offset) | (1u64 << (offset + TOMB_SHIFT));
        // Release: orders this producer's earlier accesses to the block
        // before the consumer's (Acquire) decision to recycle it.
        self.ready.fetch_or(bits, Ordering::Release);
    }

    /// The run of consecutive ready slots starting at `offset`.
    #[inline]
    pub(crate) fn ready_run(&self, offset: u32) -> Run {
        // Acquire: pairs with the Release `fetch_or` in `write`, so the
        // values of the run are visible to the reads that follow.
        let ready = self.ready.load(Ordering::Acquire);
        let len = ((!ready & ALL_READY) >> offset).trailing_zeros().min(BLOCK_CAP - offset);
        Run { len, tombs: (ready >> TOMB_SHIFT) >> offset }
    }

    /// Whether slot `offset` is ready, and whether it is a tombstone.
    #[inline(always)]
    pub(crate) fn slot_state(&self, offset: u32) -> (bool, bool) {
        // Acquire: as in `ready_run` (a caller may go on to read the value).
        let ready = self.ready.load(Ordering::Acquire);
        ((ready >> offset) & 1 == 1, (ready >> (offset + TOMB_SHIFT)) & 1 == 1)
    }

    /// Moves the value out of slot `offset`.
    ///
    /// # Safety
    /// The slot is ready (seen with Acquire), is not a tombstone, and its
    /// value has not been moved out or dropped yet.
    #[inline(always)]
    pub(crate) unsafe fn read(&self, offset: u32) -> T {
        // SAFETY: initialised and published (caller); the producer no longer
        // touches it, so this is the only access.
        self.slots[offset as usize].with(|p| unsafe { (*p).assume_init_read() })
    }

    /// Drops the value in slot `offset` in place.
    ///
    /// # Safety
    /// As for [`Block::read`].
    pub(crate) unsafe fn drop_value(&self, offset: u32) {
        // SAFETY: as for `read` (caller).
        self.slots[offset as usize].with_mut(|p| unsafe { (*p).assume_init_drop() });
    }

    /// Records that the producers' hint has moved past this block, with the
    /// claim index observed right after.
    #[inline]
    pub(crate) fn mark_released(&self, observed_tail: u32) {
        // Release: pairs with the consumer's Acquire in `observed_tail`, so
        // this producer's reads of the block happen before its recycling.
        self.release.store(RELEASED | u64::from(observed_tail), Ordering::Release);
    }

    /// The observed tail recorded by [`Block::mark_released`], if released.
    #[inline]
    pub(crate) fn observed_tail(&self) -> Option<u32> {
        // Acquire: pairs with the Release store in `mark_released`.
        let r = self.release.load(Ordering::Acquire);
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
        // Relaxed: published by the Release CAS below.
        b.start.store(self.start().wrapping_add(BLOCK_CAP), Ordering::Relaxed);
        // Release on success: publishes the block's fields to every thread
        // that reaches it through `next` (Acquire). Acquire on failure: we
        // dereference the block another thread linked.
        match self.next.compare_exchange(
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
            // SAFETY: blocks after the one this producer is looking for are
            // live (the consumer cannot pass the producer's unwritten slot,
            // and blocks are recycled only behind the consumer); blocks
            // before it are protected by the release protocol (`queue`).
            match unsafe { curr.as_ref() }.try_push(fresh) {
                Ok(()) => return winner,
                Err(next) => curr = next,
            }
        }
    }

    /// Makes a block that left the list empty again, for reuse.
    ///
    /// # Safety
    /// Only the consumer calls this, on a block no other thread can reach
    /// any more, whose values have all been moved out.
    pub(crate) unsafe fn reset(&self) {
        // Relaxed (all three): the block is private to the consumer until the
        // Release CAS in `try_push` publishes it again.
        self.next.store(ptr::null_mut(), Ordering::Relaxed);
        self.ready.store(0, Ordering::Relaxed);
        self.release.store(0, Ordering::Relaxed);
    }
}
