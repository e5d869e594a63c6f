//! A Chase-Lev work-stealing deque whose steal-half claims a whole batch
//! at once, soundly.
//!
//! The owner of the deque holds a [`Worker`] and pushes and pops at the
//! *bottom* (LIFO, no lock). Any number of thieves hold [`Stealer`]s and take
//! from the *top* (FIFO): one item with [`Stealer::steal`], or up to half of
//! the items with [`Stealer::steal_half_into`], which moves the batch into the
//! thief's own deque and hands back one item to run at once.
//!
//! ```
//! use stepsched_deque::{Steal, Worker};
//!
//! let victim = Worker::new();
//! for i in 0..10 {
//!     victim.push(i);
//! }
//! let stealer = victim.stealer();
//!
//! // The owner pops the newest item.
//! assert_eq!(victim.pop(), Some(9));
//!
//! // A thief moves half of the remaining nine (rounded up) into its own
//! // deque, running the oldest one at once.
//! let mine = Worker::new();
//! assert_eq!(stealer.steal_half_into(&mine), Steal::Success(0));
//! assert_eq!(mine.len(), 4);
//! assert_eq!(victim.len(), 4);
//! ```
//!
//! # The algorithm
//!
//! The structure is the deque of Chase and Lev ("Dynamic Circular
//! Work-Stealing Deque", SPAA 2005): a growable ring buffer indexed by two
//! ever-increasing counters, `top` (where thieves take) and `bottom` (where
//! the owner pushes and pops), with memory orderings chosen after Lê, Pop,
//! Cohen and Zappa Nardelli ("Correct and Efficient Work-Stealing for Weak
//! Memory Models", PPoPP 2013). It departs from the classic protocol in one
//! place, to make a *steal-half* that claims its batch at once sound.
//!
//! ## Why the classic protocol cannot steal half
//!
//! In classic Chase-Lev the owner pops without any read-modify-write unless it
//! takes the last item: it decrements `bottom`, issues a SeqCst fence, reads
//! `top`, and keeps the item if `top < bottom`. A thief reads `top`, then
//! `bottom`, and claims the item at `top` by CAS on `top`. This is sound for
//! *one* item because the owner and a thief can only meet on the last one.
//! A thief claiming a *batch* `[top, top + n)` computes `n` from a `bottom`
//! it read earlier; meanwhile the owner may pop, CAS-free, items inside that
//! range, and the thief's CAS on `top` still succeeds because `top` did not
//! move. One item is then handed to two workers — in Rust a double drop.
//!
//! ## One word that every pop changes
//!
//! Here the owner's *pop count*, `top` and a third field, `flight`, live in
//! a single 64-bit atomic word (see [`Head`](self)); the owner's *push
//! count* lives in a second atomic that only the owner writes, and
//! `bottom = pushes - pops`.
//!
//! * `push` writes the slot, then stores `pushes + 1` (Release): a plain
//!   store, as in the classic deque;
//! * `pop` increments `pops` in the word with a CAS (Release);
//! * a thief loads the word (Acquire) and `pushes`; if the deque holds
//!   items and no other thief is claiming (`flight == 0`), it takes the
//!   *claim reservation* with a CAS of the word that sets `flight` to
//!   `RESERVED` (Acquire). Holding it, it loads `pushes` again (Acquire),
//!   computes `bottom`, and claims `n` items with a second CAS that expects
//!   the reserved word and moves `top` to `top + n`, `flight` to `n`. If
//!   that CAS fails, the thief clears `flight` (`fetch_and`) and returns
//!   [`Steal::Retry`].
//!
//! While a thief holds the reservation, every other thief sees
//! `flight != 0` and backs off, so only the owner's pops change the word.
//! The claiming CAS therefore succeeds only if the owner did not pop since
//! the reservation (the next section shows the pop count cannot come round
//! under it); pushes since then only mean the thief saw a smaller `bottom`
//! than the real one. So every successful claim lies inside `[top, bottom)`
//! as it was when the claim took effect, and the items a concurrent pop
//! takes are never inside a claimed batch.
//!
//! The Release CAS of `pop` paired with the thief's Acquire of the word
//! makes its later `pushes` loads see every push before that pop; a thief's
//! Release when it ends a claim passes on the pushes it saw to the next
//! thief's Acquire (the owner's pop CASes in between continue that release
//! sequence). So the `bottom` a thief computes is never below `top`, and an
//! item pushed before a steal that stays in the deque is always seen:
//! `steal` reports [`Steal::Empty`] only when no such item exists.
//!
//! The cost is that `pop` is one CAS where the classic pop pays a SeqCst
//! fence (and a CAS only for the last item), and a steal is two CASes and a
//! `fetch_sub`; `benches/` measures them against crossbeam-deque and st3.
//!
//! ## The pop count's period
//!
//! `pops` is a 28-bit counter, so on its own the word repeats: had the
//! owner popped exactly 2<sup>28</sup> times (pushing in between) while a
//! thief stalled between its snapshot and its claiming CAS, the word would
//! be bit-identical again, the CAS would succeed, and the batch, sized for
//! items since popped, would hand some out twice. Two rules rule this out,
//! however long any thread stalls:
//!
//! 1. The claim is computed only from what the thief read *under the
//!    reservation*: the reservation CAS replaced exactly the word it
//!    compares, and `pushes` is loaded after it. The reservation CAS itself
//!    may succeed on a word that came round again; that is harmless, since
//!    it claims nothing.
//! 2. A pop that brings the pop count to zero and finds `flight == RESERVED`
//!    stores `flight = STALE` instead. Only the reserving thief leaves
//!    `RESERVED` or `STALE` (by its claiming CAS, or by clearing `flight`):
//!    other thieves' CASes expect `flight == 0`, and pops copy `flight`
//!    unchanged except by this rule.
//!
//! Suppose the claiming CAS succeeds, and the owner popped `k` times since
//! the reservation, which it took with pop count `p`. Only those pops wrote
//! the word in between, so the CAS found pop count `p + k mod 2^28`, which
//! equals `p` only if `k` is 0 or at least 2<sup>28</sup>. But any
//! 2<sup>28</sup> consecutive pops include one that brings the count to
//! zero; that pop turned the reservation `STALE`, which nobody but the
//! stalled thief could undo, and the CAS, which expects `RESERVED`, would
//! have failed. So `k = 0`: no pop between the reservation and the claim,
//! and the claim fits under the real `bottom`. The owner pays a compare of
//! its new pop count with zero (a branch taken once every 2<sup>28</sup>
//! pops); `push` pays nothing. A thief whose reservation went stale just
//! returns `Retry`.
//!
//! ## Claim, then copy
//!
//! A thief never reads a slot it has not claimed: there is no speculative
//! read racing the owner's writes (crossbeam-deque reads the slot first and
//! discards the copy if its CAS fails, a data race that the Rust memory model
//! does not allow). The claiming CAS sets `flight = n`; the thief then
//! copies the `n` claimed slots out and releases them with `fetch_sub(n)`
//! (Release). While `flight` is non-zero:
//!
//! * the owner counts the claimed slots `[top - n, top)` as occupied, so
//!   `push` never overwrites a slot a thief is still reading (it grows the
//!   buffer instead), and its Acquire load of the word, once it reads the
//!   release, orders the thief's reads before its writes;
//! * other thieves get [`Steal::Retry`]: one batch is claimed and copied out
//!   of a given deque at a time, which keeps the claimed range a single
//!   interval that one counter describes. The copy is at most
//!   [`DEFAULT_STEAL_LIMIT`] moves (or the limit the caller chose), with no
//!   allocation unless the thief's own deque must grow.
//!
//! Because slots are read only after the claim, a thief always copies the
//! items that are there when its claim takes effect, never a stale read.
//!
//! ## Lengths
//!
//! [`Stealer::len`] loads the word, then `pushes` (Acquire), then the word
//! again, and retries if the pop count changed. A pop before the push that
//! stored the value read would be seen by the second load, so `pushes` was
//! stored while the pop count was the one read: `pushes - pops` is a
//! `bottom` the deque really had, and no later than the second load. With
//! `top` from the second load, the length is at most the real length at
//! that load and counts every item that stays in the deque throughout the
//! call. A claim may have moved `top` past that `bottom` (its thief saw
//! later pushes): that counts as 0. These bounds hold while fewer than
//! 2<sup>28</sup> pops and 2<sup>27</sup> pushes happen during the call.
//! [`Worker::len`] reads the word once with the owner's exact counts: it is
//! exact unless a thief is claiming, and never below the current length.
//!
//! ## Growth and reclamation
//!
//! The ring doubles when full. The owner copies every occupied slot,
//! including the in-flight ones, into the new buffer, publishes it with a
//! Release store and retires the old one to [`crossbeam_epoch`]; thieves pin
//! the epoch before loading the buffer pointer, so a retired buffer is freed
//! only when no thief can still be reading it. A thief loads the buffer
//! pointer *after* its claim: its claim synchronizes with every push up to
//! the `bottom` it saw, and each such push happened after any growth that
//! preceded it, so the thief sees a buffer holding its items (the old buffer
//! is never written again once replaced, and the new one holds copies of all
//! occupied and in-flight slots). The buffer never shrinks.
//!
//! ## Limits
//!
//! Indices and counts are 28-bit counters that wrap, so the capacity is at most
//! 2<sup>27</sup> items; `push` panics beyond it. A batch is at most 253
//! items (the two highest values of the 8-bit `flight` field are `STALE`
//! and `RESERVED`).
//!
//! ## Model checking
//!
//! Built with `RUSTFLAGS="--cfg stepsched_loom"`, the crate swaps its atomics
//! and cells for [loom](https://docs.rs/loom)'s, and `src/loom_tests.rs`
//! explores every interleaving of pop racing steal for the last item,
//! steal-half racing several pops, steal-half racing another steal, a
//! growing push racing a thief, the owner's pushes wrapping onto (or
//! growing past) a slot a thief is copying, push-then-pop racing a steal
//! and `len`, and `len` racing a claim, checking that each item is taken
//! exactly once (and, under loom, that no slot is read that holds no item).
//! A control model runs the classic protocol's steal-half against CAS-free
//! pops and shows loom finds the double hand-out. The pop count's period
//! is checked by unit tests that run the owner between a thief's steps
//! through a test-only hook, with the index fields narrowed to 20 bits so
//! that the owner's pop count goes all the way round in a fraction of a
//! second. `xtask/mutants/deque.txt` lists the orderings, CASes and
//! re-checks these catch when weakened.
#![cfg_attr(not(test), warn(missing_docs))]

mod primitive;
mod reclaim;

#[cfg(all(test, stepsched_loom))]
mod loom_tests;

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

use crossbeam_utils::CachePadded;

use crate::primitive::cell::UnsafeCell;
use crate::primitive::sync::Arc;
use crate::primitive::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// The most items one [`Stealer::steal_half_into`] moves.
pub const DEFAULT_STEAL_LIMIT: usize = 32;

/// The largest batch a thief may claim: the `flight` field is 8 bits, and
/// its two highest values mark a pending claim.
const MAX_STEAL_LIMIT: usize = STALE as usize - 1;

/// Initial ring capacity of [`Worker::new`]. Small under loom, so that
/// wrap-around and growth are reached in a few operations.
#[cfg(not(stepsched_loom))]
const DEFAULT_CAPACITY: usize = 32;
#[cfg(stepsched_loom)]
const DEFAULT_CAPACITY: usize = 4;

/// The smallest ring.
const MIN_CAPACITY: usize = 2;

/// The largest ring: indices are `IDX_BITS`-bit, and a length must stay
/// below half the index space to be unambiguous.
const MAX_CAPACITY: usize = 1 << (IDX_BITS - 1);

const FLIGHT_BITS: u32 = 8;
const FLIGHT_MASK: u64 = (1 << FLIGHT_BITS) - 1;
/// `flight` value: a thief holds the claim reservation.
const RESERVED: u64 = FLIGHT_MASK;
/// `flight` value: the reservation is still held, but the owner's pop count
/// went through zero since it was taken, so its claim must fail.
const STALE: u64 = FLIGHT_MASK - 1;
#[cfg(not(test))]
const IDX_BITS: u32 = 28;
/// Narrower under unit tests, so that a test can run the owner's pop count
/// all the way round (2^20 pops) in a fraction of a second.
#[cfg(test)]
const IDX_BITS: u32 = 20;
const IDX_MASK: u32 = (1 << IDX_BITS) - 1;
const TOP_SHIFT: u32 = FLIGHT_BITS;
const POPS_SHIFT: u32 = FLIGHT_BITS + IDX_BITS;

/// The word thieves CAS: `pops` (bits 36..64, the owner's pop count),
/// `top` (bits 8..36) and `flight` (bits 0..8); under unit tests the index
/// fields are 20 bits and the top 16 bits are zero. `pops` and `top` are
/// 28-bit counters that wrap. `flight` is 0 when no thief is claiming,
/// `1..=253` while a thief copies out that many claimed slots just below
/// `top`, and [`RESERVED`] or [`STALE`] while a thief holds the claim
/// reservation (no slot is in flight then).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Head(u64);

impl Head {
    #[inline]
    fn new(pops: u32, top: u32, flight: u64) -> Self {
        debug_assert!(flight <= FLIGHT_MASK);
        Head(
            (u64::from(pops & IDX_MASK) << POPS_SHIFT)
                | (u64::from(top & IDX_MASK) << TOP_SHIFT)
                | flight,
        )
    }

    #[inline]
    fn pops(self) -> u32 {
        // The field is the top of the word (under unit tests, the bits
        // above it are always zero): no mask needed.
        (self.0 >> POPS_SHIFT) as u32
    }

    #[inline]
    fn top(self) -> u32 {
        (self.0 >> TOP_SHIFT) as u32 & IDX_MASK
    }

    /// The raw `flight` field.
    #[inline]
    fn flight(self) -> u64 {
        self.0 & FLIGHT_MASK
    }

    /// The number of claimed slots a thief is still copying out (none while
    /// the reservation is held).
    #[inline]
    fn in_flight(self) -> u32 {
        let flight = self.flight();
        if flight >= STALE { 0 } else { flight as u32 }
    }

    /// Both ends, given the owner's push count.
    #[inline]
    fn ends(self, pushes: u32) -> Ends {
        Ends {
            top: self.top(),
            bottom: pushes.wrapping_sub(self.pops()) & IDX_MASK,
            in_flight: self.in_flight(),
        }
    }
}

/// The word a pop that brings the pop count round to zero stores: a held
/// reservation becomes [`STALE`], so that its claim fails (see the module
/// docs on the pop count's period).
#[cold]
#[inline(never)]
fn pop_count_wraps(new: Head) -> Head {
    if new.flight() == RESERVED {
        Head(new.0 - RESERVED + STALE)
    } else {
        new
    }
}

impl fmt::Debug for Head {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Head")
            .field("pops", &self.pops())
            .field("top", &self.top())
            .field("flight", &self.flight())
            .finish()
    }
}

/// A snapshot of both ends: `bottom = pushes - pops`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ends {
    top: u32,
    bottom: u32,
    in_flight: u32,
}

impl Ends {
    /// Items between `top` and `bottom`: the items available to pop or steal.
    #[inline]
    fn len(self) -> u32 {
        self.bottom.wrapping_sub(self.top) & IDX_MASK
    }

    /// Slots in use: the available items plus the in-flight ones.
    #[inline]
    fn occupied(self) -> usize {
        self.len() as usize + self.in_flight as usize
    }

    /// The index of the oldest slot in use (the first in-flight one, if any).
    #[inline]
    fn lowest(self) -> u32 {
        self.top.wrapping_sub(self.in_flight) & IDX_MASK
    }
}

/// A ring of slots. Slots are `MaybeUninit`: a buffer never drops items, it
/// only frees its memory; the deque drops the items it still owns.
struct Buffer<T> {
    slots: Box<[UnsafeCell<Slot<T>>]>,
    mask: usize,
}

/// A slot's contents.
#[cfg(not(stepsched_loom))]
type Slot<T> = MaybeUninit<T>;

/// Under loom a slot also records whether it was ever written (or copied
/// from a written slot), so that a model that reads a slot holding no item
/// fails at once instead of reading whatever the memory holds.
#[cfg(stepsched_loom)]
type Slot<T> = (bool, MaybeUninit<T>);

#[cfg(not(stepsched_loom))]
#[inline(always)]
fn empty_slot<T>() -> Slot<T> {
    MaybeUninit::uninit()
}

#[cfg(stepsched_loom)]
fn empty_slot<T>() -> Slot<T> {
    (false, MaybeUninit::uninit())
}

#[cfg(not(stepsched_loom))]
#[inline(always)]
fn full_slot<T>(item: T) -> Slot<T> {
    MaybeUninit::new(item)
}

#[cfg(stepsched_loom)]
fn full_slot<T>(item: T) -> Slot<T> {
    (true, MaybeUninit::new(item))
}

/// The item in a slot.
///
/// # Safety
///
/// The slot holds an item the caller owns.
#[cfg(not(stepsched_loom))]
#[inline(always)]
unsafe fn take_slot<T>(slot: Slot<T>) -> T {
    // SAFETY: the caller's contract.
    unsafe { slot.assume_init() }
}

#[cfg(stepsched_loom)]
unsafe fn take_slot<T>(slot: Slot<T>) -> T {
    assert!(slot.0, "read a slot that holds no item");
    // SAFETY: the caller's contract, checked above as far as loom can.
    unsafe { slot.1.assume_init() }
}

impl<T> Buffer<T> {
    /// Allocates a ring of `cap` slots (`cap` a power of two) on the heap.
    fn alloc(cap: usize) -> *mut Buffer<T> {
        debug_assert!(cap.is_power_of_two());
        let slots = (0..cap).map(|_| UnsafeCell::new(empty_slot())).collect();
        Box::into_raw(Box::new(Buffer {
            slots,
            mask: cap - 1,
        }))
    }

    #[inline]
    fn cap(&self) -> usize {
        self.mask + 1
    }

    #[inline]
    fn slot(&self, index: u32) -> &UnsafeCell<Slot<T>> {
        let i = index as usize & self.mask;
        debug_assert!(i < self.slots.len());
        // SAFETY: `slots.len() == mask + 1` (set in `alloc`, never changed),
        // so `i <= mask` is in bounds.
        unsafe { self.slots.get_unchecked(i) }
    }

    /// Writes `item` into the slot for `index`.
    ///
    /// # Safety
    ///
    /// The caller has exclusive access to the slot: no other thread reads or
    /// writes it concurrently.
    #[inline]
    unsafe fn write(&self, index: u32, item: T) {
        self.slot(index).with_mut(|p| {
            // SAFETY: exclusive access is the caller's contract; writing a
            // `MaybeUninit` never drops the old contents.
            unsafe { p.write(full_slot(item)) }
        });
    }

    /// Moves the item out of the slot for `index`.
    ///
    /// # Safety
    ///
    /// The slot holds an initialized item that the caller owns (it claimed
    /// the index), and no thread writes the slot concurrently.
    #[inline]
    unsafe fn read(&self, index: u32) -> T {
        self.slot(index).with(|p| {
            // SAFETY: the slot is initialized and owned by the caller, and
            // is not written concurrently (the caller's contract).
            unsafe { take_slot(p.read()) }
        })
    }

    /// Copies the raw bytes of the slot for `index` into `dst`'s slot for the
    /// same index, without taking ownership of the item.
    ///
    /// # Safety
    ///
    /// No thread writes either slot concurrently.
    #[inline]
    unsafe fn copy_to(&self, dst: &Buffer<T>, index: u32) {
        let value = self.slot(index).with(|p| {
            // SAFETY: reading a `MaybeUninit` bitwise is always valid, and
            // the slot is not written concurrently (the caller's contract).
            unsafe { p.read() }
        });
        dst.slot(index).with_mut(|p| {
            // SAFETY: `dst` is not yet shared, or the slot is not accessed
            // concurrently (the caller's contract).
            unsafe { p.write(value) }
        });
    }
}

/// The state shared by a deque's [`Worker`] and its [`Stealer`]s.
struct Inner<T> {
    /// `pops`, `top` and `in_flight` (see [`Head`]).
    head: CachePadded<AtomicU64>,
    /// How many items the owner has pushed (a 28-bit wrapping counter).
    /// `bottom` is `pushes - pops`. Written only by the owner.
    pushes: CachePadded<AtomicU32>,
    /// The current ring. Written only by the owner (on growth).
    buffer: CachePadded<AtomicPtr<Buffer<T>>>,
    /// Rings replaced by growth, kept until the deque is dropped (loom does
    /// not model crossbeam-epoch, so under loom reclamation is deferred to
    /// the end).
    #[cfg(stepsched_loom)]
    retired: UnsafeCell<Vec<*mut Buffer<T>>>,
}

// SAFETY: `Inner` moves `T`s between threads (push on one, pop or steal on
// another), which needs `T: Send`; the raw buffer pointer is only an owning
// pointer to slots of `T`.
unsafe impl<T: Send> Send for Inner<T> {}
// SAFETY: shared access goes through atomics and the claim protocol
// documented at the top of this module, which gives each slot access to one
// thread at a time; values of `T` only ever move, never get shared, so
// `T: Send` is enough.
unsafe impl<T: Send> Sync for Inner<T> {}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        // Relaxed: `&mut self` means every handle is gone; the Arc's drop
        // already synchronized with their last uses.
        let ends =
            Head(self.head.load(Ordering::Relaxed)).ends(self.pushes.load(Ordering::Relaxed));
        debug_assert_eq!(
            Head(self.head.load(Ordering::Relaxed)).flight(),
            0,
            "a claim outlived every stealer"
        );
        let buffer = self.buffer.load(Ordering::Relaxed);
        let mut index = ends.top;
        while index != ends.bottom {
            // SAFETY: `buffer` is the live ring, slots in `[top, bottom)`
            // hold items the deque still owns, and no other handle exists.
            drop(unsafe { (*buffer).read(index) });
            index = index.wrapping_add(1) & IDX_MASK;
        }
        // SAFETY: the live ring was allocated by `Buffer::alloc` and nobody
        // else can reach it any more; retired rings are owned by the
        // reclamation scheme, not by this pointer.
        drop(unsafe { Box::from_raw(buffer) });
        #[cfg(stepsched_loom)]
        self.retired.with_mut(|list| {
            // SAFETY: `&mut self`: no other access to the list.
            for old in unsafe { (*list).drain(..) } {
                // SAFETY: retired rings came from `Buffer::alloc` and no
                // handle remains that could read them.
                drop(unsafe { Box::from_raw(old) });
            }
        });
    }
}

/// The owner's handle of a work-stealing deque: pushes and pops at the
/// bottom, LIFO.
///
/// A `Worker` can be sent to another thread but not shared (it is `Send`
/// and `!Sync`): only one thread acts as the owner at a time. Hand out
/// [`Stealer`]s to other threads.
///
/// ```
/// use stepsched_deque::Worker;
///
/// let w = Worker::new();
/// w.push('a');
/// w.push('b');
/// assert_eq!(w.pop(), Some('b'));
/// assert_eq!(w.pop(), Some('a'));
/// assert_eq!(w.pop(), None);
/// ```
pub struct Worker<T> {
    inner: Arc<Inner<T>>,
    /// The owner's copy of `inner.buffer` (only the owner changes it).
    buffer: Cell<*mut Buffer<T>>,
    /// The owner's copy of `inner.pushes` (only the owner changes it).
    pushes: Cell<u32>,
    /// `Worker` is `!Sync`: its `&self` methods assume a single caller.
    _not_sync: PhantomData<*mut ()>,
}

// SAFETY: the owner role may move to another thread; everything shared with
// thieves lives behind `Inner`, which is `Send + Sync` for `T: Send`. The
// cached pointer refers to the ring `inner` owns.
unsafe impl<T: Send> Send for Worker<T> {}

impl<T> Worker<T> {
    /// Creates an empty deque with the default initial capacity (32).
    ///
    /// ```
    /// let w = stepsched_deque::Worker::<u32>::new();
    /// assert!(w.is_empty());
    /// ```
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }

    /// Creates an empty deque whose ring starts with room for `cap` items
    /// (rounded up to a power of two, at least 2). The ring grows when full.
    ///
    /// ```
    /// let w = stepsched_deque::Worker::with_capacity(1000);
    /// for i in 0..5000 {
    ///     w.push(i);
    /// }
    /// assert_eq!(w.len(), 5000);
    /// ```
    pub fn with_capacity(cap: usize) -> Self {
        Self::with_capacity_at(cap, 0)
    }

    /// Like `with_capacity`, with `top` and `bottom` starting at `start`
    /// (tests use it to reach index wrap-around quickly).
    fn with_capacity_at(cap: usize, start: u32) -> Self {
        let cap = cap.clamp(MIN_CAPACITY, MAX_CAPACITY).next_power_of_two();
        let buffer = Buffer::alloc(cap);
        let inner = Arc::new(Inner {
            head: CachePadded::new(AtomicU64::new(Head::new(0, start, 0).0)),
            pushes: CachePadded::new(AtomicU32::new(start & IDX_MASK)),
            buffer: CachePadded::new(AtomicPtr::new(buffer)),
            #[cfg(stepsched_loom)]
            retired: UnsafeCell::new(Vec::new()),
        });
        Worker {
            inner,
            buffer: Cell::new(buffer),
            pushes: Cell::new(start & IDX_MASK),
            _not_sync: PhantomData,
        }
    }

    /// Creates a [`Stealer`] for this deque.
    ///
    /// ```
    /// use stepsched_deque::{Steal, Worker};
    ///
    /// let w = Worker::new();
    /// w.push(1);
    /// let s = w.stealer();
    /// assert_eq!(s.steal(), Steal::Success(1));
    /// ```
    pub fn stealer(&self) -> Stealer<T> {
        Stealer {
            inner: self.inner.clone(),
        }
    }

    /// The number of items in the deque: exact unless a thief is claiming,
    /// and never below the current length (a claim not yet seen is still
    /// counted).
    ///
    /// ```
    /// let w = stepsched_deque::Worker::new();
    /// w.push(());
    /// assert_eq!(w.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        // Relaxed: `pops` is ours and thieves only move `top`; the result is
        // exact for the owner up to concurrent steals.
        self.ends(Ordering::Relaxed).len() as usize
    }

    /// Both ends, as the owner sees them: `pushes` from our own copy.
    #[inline]
    fn ends(&self, order: Ordering) -> Ends {
        Head(self.inner.head.load(order)).ends(self.pushes.get())
    }

    /// Publishes `pushes` advanced by `n`.
    #[inline]
    fn publish_pushes(&self, n: u32) {
        let pushes = self.pushes.get().wrapping_add(n) & IDX_MASK;
        self.pushes.set(pushes);
        // Release: publishes the slot writes to a thief whose Acquire load
        // of `pushes` reads this value or a later one.
        self.inner.pushes.store(pushes, Ordering::Release);
    }

    /// Whether the deque holds no item.
    ///
    /// ```
    /// let w = stepsched_deque::Worker::<u8>::new();
    /// assert!(w.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Pushes an item at the bottom.
    ///
    /// Wait-free except when the ring is full, where it allocates a ring of
    /// twice the size.
    ///
    /// # Panics
    ///
    /// If the deque would hold more than 2<sup>27</sup> items.
    ///
    /// ```
    /// let w = stepsched_deque::Worker::new();
    /// w.push(7);
    /// assert_eq!(w.pop(), Some(7));
    /// ```
    #[inline]
    pub fn push(&self, item: T) {
        // Acquire: synchronizes with the Release `fetch_sub` by which a thief
        // released its claim, so its reads of those slots happen before our
        // write below may reuse one of them.
        let ends = self.ends(Ordering::Acquire);
        let mut buffer = self.buffer.get();
        // SAFETY: the cached pointer is the live ring, owned by `inner`,
        // which we keep alive; only the owner (us) replaces it.
        if ends.occupied() >= unsafe { (*buffer).cap() } {
            buffer = self.grow(1);
        }
        // SAFETY: the slot for `bottom` is free: every slot in use lies in
        // `[top - in_flight, bottom)`, which is shorter than the ring. That
        // range only moves up while we hold the owner role, so the check
        // above stays true. No thief reads a slot before claiming it, and
        // claims end below `bottom`.
        unsafe { (*buffer).write(ends.bottom, item) };
        self.publish_pushes(1);
    }

    /// Pops the most recently pushed item (LIFO).
    ///
    /// Lock-free: one CAS, retried only if a thief changed the word between
    /// the load and the CAS.
    ///
    /// ```
    /// let w = stepsched_deque::Worker::new();
    /// w.push(1);
    /// w.push(2);
    /// assert_eq!(w.pop(), Some(2));
    /// ```
    #[inline]
    pub fn pop(&self) -> Option<T> {
        // Relaxed: the slot we take was written by this thread (push, growth
        // copy or steal_half_into), so reading it needs no ordering with
        // other threads; exclusivity comes from the CAS's atomicity.
        let mut current = self.inner.head.load(Ordering::Relaxed);
        loop {
            let head = Head(current);
            let ends = head.ends(self.pushes.get());
            if ends.len() == 0 {
                return None;
            }
            let pops = head.pops().wrapping_add(1) & IDX_MASK;
            let mut new = Head::new(pops, head.top(), head.flight());
            if pops == 0 {
                new = pop_count_wraps(new);
            }
            // Release: a thief that Acquire-loads this word and then loads
            // `pushes` sees every push before this pop, so the `bottom` it
            // computes is never below `top`. Relaxed on failure: we retry
            // from the value read. Any thief's claim either replaced an
            // older word (our CAS fails and we retry) or is computed from
            // `new`, and then ends below the index we take.
            match self.inner.head.compare_exchange_weak(
                current,
                new.0,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    let index = ends.bottom.wrapping_sub(1) & IDX_MASK;
                    // SAFETY: our CAS took `index` out of `[top, bottom)`
                    // atomically, so no thief can claim it; the slot was
                    // written by this thread and holds an item.
                    return Some(unsafe { (*self.buffer.get()).read(index) });
                }
                Err(actual) => current = actual,
            }
        }
    }

    /// Makes room for `extra` more items: doubles the ring (more than once
    /// if needed), copying every slot in use, in-flight ones included.
    #[cold]
    #[inline(never)]
    fn grow(&self, extra: usize) -> *mut Buffer<T> {
        // Acquire: as in `push`, orders our later writes after the reads of
        // any thief that released its claim.
        let ends = self.ends(Ordering::Acquire);
        let old = self.buffer.get();
        // SAFETY: `old` is the live ring, kept alive by `inner`.
        let old_cap = unsafe { (*old).cap() };
        let needed = ends.occupied() + extra;
        let mut new_cap = old_cap;
        while new_cap < needed {
            new_cap *= 2;
        }
        assert!(
            new_cap <= MAX_CAPACITY,
            "stepsched-deque: capacity overflow (more than {MAX_CAPACITY} items)"
        );
        if new_cap == old_cap {
            return old;
        }
        let new = Buffer::alloc(new_cap);
        let mut index = ends.lowest();
        while index != ends.bottom {
            // SAFETY: only the owner writes slots and it is busy here; a
            // thief may be reading an in-flight slot of `old`, and
            // concurrent reads are fine. `new` is not shared yet.
            unsafe { (*old).copy_to(&*new, index) };
            index = index.wrapping_add(1) & IDX_MASK;
        }
        self.buffer.set(new);
        // Release: a thief that loads the pointer with Acquire sees the
        // copied slots.
        self.inner.buffer.store(new, Ordering::Release);
        // SAFETY: `old` is unlinked (the store above), was allocated by
        // `Buffer::alloc`, and is retired once.
        unsafe { reclaim::retire(&self.inner, old) };
        new
    }

    /// Pushes `n` items produced by `next` (in order) with a single release
    /// of `bottom`. The caller must not push or pop in between (it cannot:
    /// it holds `&self` of a `!Sync` type on the owner thread).
    fn push_batch(&self, n: usize, mut next: impl FnMut() -> T) {
        if n == 0 {
            return;
        }
        // Acquire: as in `push`.
        let ends = self.ends(Ordering::Acquire);
        let mut buffer = self.buffer.get();
        // SAFETY: the cached pointer is the live ring.
        if ends.occupied() + n > unsafe { (*buffer).cap() } {
            buffer = self.grow(n);
        }
        let mut index = ends.bottom;
        for _ in 0..n {
            // SAFETY: as in `push`: the ring has room for `n` more items
            // after `bottom`, and those slots are neither in use nor claimed.
            unsafe { (*buffer).write(index, next()) };
            index = index.wrapping_add(1) & IDX_MASK;
        }
        self.publish_pushes(n as u32);
    }
}

impl<T> Default for Worker<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for Worker<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Worker { .. }")
    }
}

/// A thief's handle of a work-stealing deque: steals from the top, FIFO.
///
/// `Stealer`s are cheap to clone and can be shared between threads.
///
/// ```
/// use stepsched_deque::{Steal, Worker};
/// use std::thread;
///
/// let w = Worker::new();
/// for i in 0..100 {
///     w.push(i);
/// }
/// let s = w.stealer();
/// let stolen = thread::spawn(move || {
///     let mine = Worker::new();
///     let mut got = Vec::new();
///     loop {
///         match s.steal_half_into(&mine) {
///             Steal::Success(first) => {
///                 got.push(first);
///                 while let Some(item) = mine.pop() {
///                     got.push(item);
///                 }
///             }
///             Steal::Retry => continue,
///             Steal::Empty => break got,
///         }
///     }
/// })
/// .join()
/// .unwrap();
/// assert_eq!(stolen.len(), 100);
/// ```
pub struct Stealer<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Stealer<T> {
    /// Steals the oldest item.
    ///
    /// Returns [`Steal::Retry`] if another thief won the race or is claiming
    /// or copying a batch out of this deque, or if the owner popped during
    /// the claim. Returns [`Steal::Empty`] only if no item pushed before the
    /// call stayed in the deque.
    ///
    /// ```
    /// use stepsched_deque::{Steal, Worker};
    ///
    /// let w = Worker::new();
    /// w.push(1);
    /// w.push(2);
    /// assert_eq!(w.stealer().steal(), Steal::Success(1));
    /// ```
    pub fn steal(&self) -> Steal<T> {
        let (top, _) = match self.claim(1) {
            Steal::Success(claim) => claim,
            Steal::Empty => return Steal::Empty,
            Steal::Retry => return Steal::Retry,
        };
        // Unpinned when dropped, after the release below.
        let guard = reclaim::pin();
        let buffer = self.load_buffer(&guard);
        // SAFETY: we claimed `top` (it is in flight, so the owner neither
        // writes its slot nor lets the ring holding it be freed while we are
        // pinned); `buffer` holds its item (see the module docs on growth).
        let item = unsafe { (*buffer).read(top) };
        self.release(1);
        Steal::Success(item)
    }

    /// Steals up to half of the items (⌈len/2⌉, at most
    /// [`DEFAULT_STEAL_LIMIT`]) with one claim, moves all but the oldest into
    /// `dst` and returns the oldest.
    ///
    /// `dst` is the thief's own deque; it must be used on the thread that
    /// owns it (it is `!Sync`, so the compiler sees to that).
    ///
    /// ```
    /// use stepsched_deque::{Steal, Worker};
    ///
    /// let victim = Worker::new();
    /// for i in 0..7 {
    ///     victim.push(i);
    /// }
    /// let mine = Worker::new();
    /// assert_eq!(victim.stealer().steal_half_into(&mine), Steal::Success(0));
    /// assert_eq!(mine.len(), 3); // items 1, 2, 3
    /// assert_eq!(victim.len(), 3); // items 4, 5, 6
    /// ```
    pub fn steal_half_into(&self, dst: &Worker<T>) -> Steal<T> {
        self.steal_half_into_with_limit(dst, DEFAULT_STEAL_LIMIT)
    }

    /// Like [`steal_half_into`](Self::steal_half_into), taking at most
    /// `limit` items (clamped to `1..=253`).
    ///
    /// ```
    /// use stepsched_deque::{Steal, Worker};
    ///
    /// let victim = Worker::new();
    /// for i in 0..100 {
    ///     victim.push(i);
    /// }
    /// let mine = Worker::new();
    /// let s = victim.stealer();
    /// assert_eq!(s.steal_half_into_with_limit(&mine, 4), Steal::Success(0));
    /// assert_eq!(mine.len(), 3);
    /// assert_eq!(victim.len(), 96);
    /// ```
    pub fn steal_half_into_with_limit(&self, dst: &Worker<T>, limit: usize) -> Steal<T> {
        let limit = limit.clamp(1, MAX_STEAL_LIMIT);
        let (top, n) = match self.claim(limit) {
            Steal::Success(claim) => claim,
            Steal::Empty => return Steal::Empty,
            Steal::Retry => return Steal::Retry,
        };
        let guard = reclaim::pin();
        let buffer = self.load_buffer(&guard);
        // SAFETY: as in `steal`: `top..top + n` are claimed by us and held
        // by `buffer`, which stays alive while we are pinned.
        let first = unsafe { (*buffer).read(top) };
        let mut index = top;
        dst.push_batch(n as usize - 1, || {
            index = index.wrapping_add(1) & IDX_MASK;
            // SAFETY: as above, for each claimed index after the first.
            unsafe { (*buffer).read(index) }
        });
        self.release(n);
        Steal::Success(first)
    }

    /// The number of items in the deque: never more than it held when this
    /// call last read its state, and counting every item that stays in it
    /// throughout the call.
    ///
    /// The deque changes under a reader, so this is a bound, not an exact
    /// count: items a concurrent push adds may be missed, and items a thief
    /// is copying out are not counted. The bounds hold as long as the owner
    /// pops fewer than 2<sup>28</sup> times and pushes fewer than
    /// 2<sup>27</sup> times during the call (the counters' range); beyond
    /// that the result is only known to be at most 2<sup>27</sup>.
    /// Lock-free: the reads are retried if the owner pops in between.
    ///
    /// ```
    /// let w = stepsched_deque::Worker::new();
    /// w.push(1);
    /// assert_eq!(w.stealer().len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        loop {
            // Acquire: synchronizes with the Release CAS of the last pop
            // (and the Release of the last claim), so the `pushes` load
            // below sees every push before it.
            let first = Head(self.inner.head.load(Ordering::Acquire));
            hook::run(hook::Point::BetweenLoads);
            // Acquire: orders the second load of the word after this one,
            // and synchronizes with the push that stored the value, so a
            // pop before that push is visible to the second load.
            let pushed = self.inner.pushes.load(Ordering::Acquire);
            // Relaxed: its position after the Acquire load above is all it
            // needs (a pop that preceded the push we read is seen).
            let second = Head(self.inner.head.load(Ordering::Relaxed));
            if first.pops() != second.pops() {
                // The owner popped in between: `pushes` may be from after
                // that pop, and this pair of counts never coexisted.
                continue;
            }
            // No pop between the two loads, so `pushes` was stored while
            // the pop count was `pops`: `bottom` is a bottom the deque had,
            // at most its bottom at the second load. `top` is from the
            // second load; a claim may have moved it past our `bottom`
            // (the claiming thief saw later pushes): then nothing is
            // counted.
            let len = second.ends(pushed).len() as usize;
            return if len > MAX_CAPACITY { 0 } else { len };
        }
    }

    /// Whether the deque holds no item: `len() == 0`, with the same bounds
    /// (an item that stays in the deque throughout the call is seen).
    ///
    /// ```
    /// let w = stepsched_deque::Worker::<()>::new();
    /// assert!(w.stealer().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Claims the `⌈len/2⌉` oldest items, at most `limit`. On success
    /// returns the first claimed index and the count; the caller must copy
    /// the items out and then call `release`.
    ///
    /// Two CASes: the first takes the claim reservation (`flight` 0 →
    /// [`RESERVED`]), the second moves `top` by `n` and sets `flight = n`.
    /// The second succeeds only if the owner did not pop in between (see
    /// the module docs).
    #[inline]
    fn claim(&self, limit: usize) -> Steal<(u32, u64)> {
        // Acquire: synchronizes with the Release CAS of the last pop and the
        // Release of the last claim, so `pushes` below is never behind
        // them and `bottom` is never below `top`.
        let head = Head(self.inner.head.load(Ordering::Acquire));
        // Relaxed: here only to tell an empty deque cheaply. The Acquire
        // load of the word above makes this value no older than the pushes
        // before the last pop, so an item that stays in the deque is seen;
        // no slot is read on the strength of this value.
        let pushes = self.inner.pushes.load(Ordering::Relaxed);
        if head.ends(pushes).len() == 0 {
            return Steal::Empty;
        }
        if head.flight() != 0 {
            // Another thief is claiming or copying a batch out: one at a
            // time. (Its claim may have moved `top` past the `bottom` we
            // computed from older pushes; that lands here too.)
            return Steal::Retry;
        }
        hook::run(hook::Point::BeforeReserve);
        let reserved = Head(head.0 | RESERVED);
        // Acquire: as the load above, for the value we replace (which may be
        // newer than the one we loaded, if it came round again). Relaxed on
        // failure: we give up without reading anything.
        if self
            .inner
            .head
            .compare_exchange(head.0, reserved.0, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Steal::Retry;
        }
        // Acquire: synchronizes with the Release store of `push`, so the
        // slots below the `bottom` we compute are written and visible. Read
        // after the reservation, so it is no older than the pop count in
        // `reserved`.
        let pushes = self.inner.pushes.load(Ordering::Acquire);
        let ends = reserved.ends(pushes);
        let len = ends.len() as usize;
        if len == 0 {
            self.unreserve();
            return Steal::Empty;
        }
        let n = len.div_ceil(2).min(limit) as u64;
        hook::run(hook::Point::BeforeClaim);
        let new = Head::new(reserved.pops(), ends.top.wrapping_add(n as u32), n);
        // Relaxed: the reservation and the `pushes` load already acquired
        // everything we read. Success means the word is still `reserved`:
        // no pop since the reservation (a pop changes `pops`, and `pops`
        // cannot come round again without passing zero, which turns the
        // reservation STALE), so every index we claim is below the
        // `bottom` computed from `pushes`. Relaxed on failure: we give up.
        match self.inner.head.compare_exchange(
            reserved.0,
            new.0,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => Steal::Success((ends.top, n)),
            Err(_) => {
                self.unreserve();
                Steal::Retry
            }
        }
    }

    /// Gives the claim reservation back without claiming anything.
    #[cold]
    fn unreserve(&self) {
        // Relaxed: we read no slot under the reservation, so there is
        // nothing to publish; an RMW, it continues the release sequence of
        // the last pop for the next thief's Acquire.
        self.inner.head.fetch_and(!FLIGHT_MASK, Ordering::Relaxed);
    }

    /// Loads the current ring while pinned.
    #[inline]
    fn load_buffer(&self, _guard: &reclaim::Guard) -> *mut Buffer<T> {
        // Acquire: synchronizes with the Release store in `grow`, so the
        // slots it copied are visible.
        self.inner.buffer.load(Ordering::Acquire)
    }

    /// Ends a claim of `n` items once they are copied out.
    #[inline]
    fn release(&self, n: u64) {
        // Release: our reads of the claimed slots happen before the owner's
        // next write of them (its Acquire load in `push` reads this value or
        // a later one).
        self.inner.head.fetch_sub(n, Ordering::Release);
    }
}

impl<T> Clone for Stealer<T> {
    fn clone(&self) -> Self {
        Stealer {
            inner: self.inner.clone(),
        }
    }
}

impl<T> fmt::Debug for Stealer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Stealer { .. }")
    }
}

/// The outcome of a steal.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Steal<T> {
    /// The deque was empty.
    Empty,
    /// An item was stolen.
    Success(T),
    /// The steal lost a race (a pop changed the deque during the claim, or
    /// another thief is claiming or copying a batch out): try again.
    Retry,
}

impl<T> Steal<T> {
    /// Whether the deque was empty.
    ///
    /// ```
    /// assert!(stepsched_deque::Steal::<()>::Empty.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        matches!(self, Steal::Empty)
    }

    /// Whether an item was stolen.
    ///
    /// ```
    /// assert!(stepsched_deque::Steal::Success(1).is_success());
    /// ```
    pub fn is_success(&self) -> bool {
        matches!(self, Steal::Success(_))
    }

    /// Whether the steal should be retried.
    ///
    /// ```
    /// assert!(stepsched_deque::Steal::<()>::Retry.is_retry());
    /// ```
    pub fn is_retry(&self) -> bool {
        matches!(self, Steal::Retry)
    }

    /// The stolen item, if any.
    ///
    /// ```
    /// assert_eq!(stepsched_deque::Steal::Success(3).success(), Some(3));
    /// ```
    pub fn success(self) -> Option<T> {
        match self {
            Steal::Success(item) => Some(item),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;

/// A test-only hook the thief runs inside its claim window, so a test can
/// run the owner at exactly that point on the same thread.
mod hook {
    /// Where in the claim the hook runs.
    #[cfg_attr(not(test), allow(dead_code))]
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum Point {
        /// Between a thief's first load of the head word and its
        /// reservation CAS.
        BeforeReserve,
        /// Between a thief's reservation and its claiming CAS.
        BeforeClaim,
        /// In `Stealer::len`, between the loads of the head word and of the
        /// push count.
        BetweenLoads,
    }

    /// A hook: called with the point it is reached at.
    #[cfg(test)]
    pub(crate) type Hook = Box<dyn FnMut(Point)>;

    #[cfg(test)]
    std::thread_local! {
        static HOOK: std::cell::RefCell<Option<Hook>> =
            const { std::cell::RefCell::new(None) };
    }

    /// Installs `f` as this thread's hook (tests only).
    #[cfg(test)]
    #[cfg_attr(stepsched_loom, allow(dead_code))]
    pub(crate) fn set(f: Option<Hook>) {
        HOOK.with(|h| *h.borrow_mut() = f);
    }

    #[cfg(test)]
    #[inline]
    pub(crate) fn run(point: Point) {
        // Taken out while it runs, so the hook may itself steal.
        if let Some(mut f) = HOOK.with(|h| h.borrow_mut().take()) {
            f(point);
            HOOK.with(|h| {
                let mut h = h.borrow_mut();
                if h.is_none() {
                    *h = Some(f);
                }
            });
        }
    }

    #[cfg(not(test))]
    #[inline(always)]
    pub(crate) fn run(_point: Point) {}
}

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
