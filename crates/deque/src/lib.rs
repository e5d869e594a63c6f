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
//! ## A word that pops change only when a thief is claiming
//!
//! Here `top`, a third field `flight`, and a *pop count* live in a single
//! 64-bit atomic word (see [`Head`](self)); `bottom` lives in a second
//! atomic that only the owner writes.
//!
//! * `push` writes the slot, then stores `bottom + 1` (Release): a plain
//!   store, as in the classic deque (it reads the word only when the ring
//!   may be full; see *What the owner remembers*);
//! * a thief loads the word; if the deque holds items and no other thief
//!   is claiming (`flight == 0`), it takes the *claim reservation* with a
//!   CAS of the word that sets `flight` to `RESERVED`. Holding it, it issues
//!   a SeqCst fence, loads `bottom` (Acquire), and claims `n` items with a
//!   second CAS that expects the reserved word and moves `top` to `top + n`,
//!   `flight` to `n`. If that CAS fails, the thief clears `flight`
//!   (`fetch_and`) and returns [`Steal::Retry`];
//! * `pop` lowers `bottom` (a Release store), issues a SeqCst fence and
//!   loads the word, as the classic pop does. If `top` has reached the old
//!   `bottom`, a claim took the item: it puts `bottom` back and reports the
//!   deque empty. Otherwise the item is its own, with one exception: if
//!   the word shows a held reservation whose claim could reach the item,
//!   the pop first changes the word by a CAS that increments the pop count,
//!   which makes that reservation's claim fail (see *Pops a claim cannot
//!   reach* for the pops that let it be).
//!
//! Why a pop that finds no reservation may keep its item without a CAS:
//! the two fences form Dekker's pair. Take a thief whose claim succeeds,
//! and any pop. If the pop's fence comes first in the single order of
//! SeqCst operations, the thief's load of `bottom`, after its own fence,
//! sees the lowered `bottom` (or a later value), so its claim lies below
//! the popped index. If the thief's fence comes first, the pop's load of the
//! word, after its fence, reads the reservation or a later value (the
//! reservation is an atomic step before the thief's fence; a read after the
//! later fence cannot be coherence-ordered before it). The pop then either
//! sees the reservation still held, and its CAS fails the claim (unless the
//! claim cannot reach the item, below), or sees the claim itself in `top`
//! and gives way when it covers the item. (A later word may also show the
//! reservation given back: then nothing was claimed.) A claim is thus
//! never computed from a `bottom` older than a pop whose item it covers:
//! every successful claim lies inside `[top, bottom)` as it is when the
//! claim takes effect, and items a concurrent pop takes are never inside a
//! claimed batch.
//!
//! Only one thief holds the reservation at a time (the others see
//! `flight != 0` and back off), so while it does only the owner's
//! reservation-breaking pops change the word, and the claiming CAS succeeds
//! only if no pop broke the reservation (the section after next shows the
//! pop count cannot come round under it).
//!
//! ## Pops a claim cannot reach
//!
//! A pop that finds a reservation need not fail it when the claim cannot
//! cover its item. The claim under a reservation taken at `top` is at most
//! `⌈(b - top) / 2⌉` items (and at most 253), where `b` is the `bottom` the
//! thief loads after its fence. Which `b` can that be? Call an *anchor* a
//! pop that found no reservation in the word it decided on, or that failed
//! one with its CAS. A reservation held now was either failed by the last
//! anchor (its claim then takes nothing) or taken after that anchor's
//! decision in the word's order (else the anchor would have found it), so,
//! as in the Dekker argument above, the anchor's fence precedes the
//! thief's, and the thief's `b` is the
//! anchor's store of `bottom` or a later one. The owner keeps `high`, the
//! highest `bottom` stored since the last anchor; between two pops `bottom`
//! only grows, so a pop brings it up to date with its own starting
//! `bottom`, at no cost to `push`. A `b` stored before this pop's own store
//! is then at most `high`, and a claim from it ends at most
//! `⌈(high - top) / 2⌉` above `top`: if the popped index lies at or above
//! that, the pop keeps its item and leaves the reservation alone. A `b`
//! stored after this pop's store (by later pushes) may reach its index,
//! but the slot then holds a newer item, pushed after this pop took its
//! own. With the thief having seen four items, the owner's first pops
//! (its newest items) thus leave the claim alone, and only a pop of one of
//! the two oldest fails it.
//!
//! The owner's Release stores of `bottom` (by pushes, pops and a pop's
//! undo alike) publish every slot it wrote before; the thief's Acquire load
//! of `bottom` after its fence makes the slots it claims visible. The word
//! publishes no slot the owner wrote, so thieves and pops read and change
//! it with Relaxed orderings; the one thing it carries is the other way,
//! thieves' reads of slots they claimed, to the owner (see *Claim, then
//! copy*).
//!
//! The cost: `push` pays a slot write and a store, reading the word only
//! when the ring may be full; `pop` pays the classic deque's store, fence
//! and load (nothing on a deque it knows to be empty), plus a CAS only when
//! a thief holds the reservation at that instant and its claim could reach
//! the popped item; a steal is two CASes, a
//! fence and a store. `benches/` measures them against
//! crossbeam-deque and st3.
//!
//! ## The pop count's period
//!
//! `pops` is a 28-bit counter of the pops that failed a reservation, so on
//! its own the word repeats: had the owner made exactly 2<sup>28</sup> such
//! pops while a thief stalled between its reservation and its claiming CAS,
//! the word would be bit-identical again, the CAS would succeed, and the
//! batch, sized from a `bottom` read before those pops, would hand some
//! items out twice. Two rules rule this out, however long any thread
//! stalls:
//!
//! 1. The claim is computed only from what the thief read *under the
//!    reservation*: `bottom` is loaded after the reservation CAS and its
//!    fence, and `top` is the one the reservation CAS replaced. The
//!    reservation CAS itself may succeed on a word that came round again;
//!    that is harmless, since it claims nothing.
//! 2. A pop that brings the pop count to zero and finds `flight == RESERVED`
//!    stores `flight = STALE` instead. Only the reserving thief leaves
//!    `RESERVED` or `STALE` (by its claiming CAS, or by clearing `flight`):
//!    other thieves' CASes expect `flight == 0`, and pops copy `flight`
//!    unchanged except by this rule.
//!
//! Suppose the claiming CAS succeeds, and `k` pops changed the word since
//! the reservation, which it took with pop count `p`. Only those pops wrote
//! the word in between, so the CAS found pop count `p + k mod 2^28`, which
//! equals `p` only if `k` is 0 or at least 2<sup>28</sup>. But any
//! 2<sup>28</sup> consecutive increments include one that brings the count
//! to zero; that pop turned the reservation `STALE`, which nobody but the
//! stalled thief could undo, and the CAS, which expects `RESERVED`, would
//! have failed. So `k = 0`: no pop failed the reservation; the pops that
//! found it let it be because its claim could not reach their items, and
//! by the sections above every other pop since it left the claimed items
//! alone. The
//! owner pays a compare of its new pop count with zero, on the CAS path
//! only; `push` pays nothing. A thief whose reservation went stale just
//! returns `Retry`.
//!
//! ## Claim, then copy
//!
//! A thief never reads a slot it has not claimed: there is no speculative
//! read racing the owner's writes (crossbeam-deque reads the slot first and
//! discards the copy if its CAS fails, a data race that the Rust memory model
//! does not allow). The claiming CAS sets `flight = n`; the thief then
//! copies the `n` claimed slots out and releases them with a Release
//! *store* of the word with `flight` back at zero. A store suffices, and is
//! a locked instruction fewer than an RMW: while `flight` counts a claim,
//! nobody else writes the word (other thieves' CASes expect `flight == 0`,
//! and pops change it only when they find a reservation). The next thief's
//! SeqCst fence, after its reservation CAS read that store (or an RMW after
//! it), acquires it, so each release carries the reads of every earlier
//! claim to whoever acquires it. While `flight` is non-zero:
//!
//! * the owner counts the claimed slots `[top - n, top)` as occupied, so
//!   `push` never overwrites a slot a thief is still reading (it grows the
//!   buffer instead), and its Acquire load of the word, once it reads the
//!   release, orders the thief's reads before its writes (the owner makes
//!   that load only when the ring may be full; see the next section);
//! * other thieves get [`Steal::Retry`]: one batch is claimed and copied out
//!   of a given deque at a time, which keeps the claimed range a single
//!   interval that one counter describes. The copy is at most
//!   [`DEFAULT_STEAL_LIMIT`] moves (or the limit the caller chose), with no
//!   allocation unless the thief's own deque must grow.
//!
//! Because slots are read only after the claim, a thief always copies the
//! items that are there when its claim takes effect, never a stale read.
//!
//! ## The owner's oldest item
//!
//! [`Worker::pop_oldest`] takes the item at `top`, as a one-item steal
//! would, but from the owner's side, so it needs no reservation and no
//! fence: it loads the word and, if the deque holds items and `flight` is
//! 0, moves `top` up by one with a single CAS of that word. Every
//! competitor goes through the same word's order: a reservation before the
//! CAS changed the word (the CAS fails, and the owner gets `Retry`); a
//! reservation after it read the new `top`, so its claim starts above the
//! item. No pop races it (the owner makes both), and the slot was written
//! by the owner itself. The CAS expects `flight == 0` because of the
//! release: while a claim is in flight its thief will store the word it
//! claimed, `top` included, and a `top` moved meanwhile would go back and
//! hand the item out again. So the rules above still hold as stated: while
//! a reservation or a claim is held, only the owner's reservation-breaking
//! pops write the word. Being an RMW, the CAS continues the release
//! sequence of the last thief's release, so a later thief's fence still
//! acquires it. `seen_top` moves with it; `seen_lowest` does not (it is set
//! only by Acquire loads).
//!
//! ## What the owner remembers
//!
//! Thieves write the word; an owner that read it on every push and pop
//! would miss in its cache after each steal. It keeps two values it read
//! there instead, both of which only grow:
//!
//! * `seen_top`, a value `top` had. A `bottom` equal to it means the deque
//!   is empty, so a `pop` on an empty deque returns at once, touching no
//!   shared line. A `seen_top` that thieves have left behind costs one pop
//!   its store, fence and load, which find the deque empty and catch up.
//! * `seen_lowest`, the lowest slot in use (`top - in_flight`) as read by
//!   an Acquire load of the word. Every slot below it was released, and
//!   that load read the release, so the thieves' reads of those slots
//!   happen before any later write of the owner. `bottom - seen_lowest`
//!   bounds the slots in use from above: while it is below the ring's size,
//!   `push` writes without reading the word. When it is not, `push` reads
//!   the word again (Acquire), updates both values, and grows the ring only
//!   if it is really full.
//!
//! ## Lengths
//!
//! [`Stealer::len`] loads the word, then `bottom`. An item that stays in
//! the deque throughout the call, with no pop or claim already removing it
//! concurrently, lies in `[top, bottom)` for both values, so it is counted;
//! the count may include items stolen or popped while the call runs (the
//! two Relaxed loads give no real-time order). A `bottom` below `top` (a
//! pop that a claim overtook, read before the pop put `bottom` back)
//! counts as 0. [`Worker::len`] reads the word once with
//! the owner's own `bottom`: it is exact unless a thief is claiming, and
//! never below the current length.
//!
//! ## Growth and reclamation
//!
//! The ring doubles when full. The owner copies every occupied slot,
//! including the in-flight ones, into the new buffer and publishes it with a
//! Release store. A thief loads the buffer pointer *after* its claim: its
//! claim synchronizes with every push up to the `bottom` it saw, and each
//! such push happened after any growth that preceded it, so the thief sees a
//! buffer holding its items (the old buffer is never written again once
//! replaced, and the new one holds copies of all occupied and in-flight
//! slots). The buffer never shrinks.
//!
//! The old ring is freed by the claim protocol itself, with no epochs and
//! nothing for a thief to pin: a thief reads a ring only while it holds a
//! claim, and so while the word's `flight` is not zero. The growth issues a
//! SeqCst fence after publishing the new ring and loads the word (Acquire);
//! if no thief holds a reservation or a claim, it frees the old ring (and
//! any kept earlier) at once. The fence pairs with the thief's fence after
//! its reservation: either the owner sees the reservation, or the thief's
//! later load of the pointer sees the new ring; and the Acquire load
//! carries the release of every claim that came before. A ring replaced while a
//! claim was in flight is kept until a later growth finds none, or until
//! the deque is dropped; kept rings are each at most half the next, so
//! together they are smaller than the live ring. The argument in full is
//! in the `reclaim` module.
//!
//! ## Limits
//!
//! Indices and the pop count are 28-bit counters that wrap, so the capacity is at most
//! 2<sup>27</sup> items; `push` panics beyond it. A batch is at most 253
//! items (the two highest values of the 8-bit `flight` field are `STALE`
//! and `RESERVED`).
//!
//! ## Model checking
//!
//! Built with `RUSTFLAGS="--cfg stepsched_loom"`, the crate swaps its atomics
//! and cells for [loom](https://docs.rs/loom)'s, and `src/loom_tests.rs`
//! explores every interleaving of pop racing steal for the last item
//! (loom models SeqCst fences as a total order that also synchronizes, which
//! is stronger than C++20's: the fence argument above is written for the
//! weaker model, and the ledger shows each fence is needed even under the
//! stronger one),
//! steal-half racing several pops (with a push between them, too),
//! steal-half racing another steal, two thieves' claims one after the other
//! with the owner wrapping onto both slots (each release is a plain store),
//! a growing push racing a thief, the owner's pushes wrapping onto (or
//! growing past) a slot a thief is copying, push-then-pop racing a steal
//! and `len`, `len` racing a claim, and the owner's `pop_oldest` racing a
//! steal-half and a steal, checking that each item is taken
//! exactly once (and, under loom, that no slot is read that holds no item,
//! nor a slot of a freed ring: under loom a freed ring is only marked so,
//! and every slot access reads the mark).
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
use crate::primitive::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering, fence};

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

    /// Both ends, given `bottom`.
    #[inline]
    fn ends(self, bottom: u32) -> Ends {
        Ends {
            top: self.top(),
            bottom: bottom & IDX_MASK,
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

/// A snapshot of both ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ends {
    top: u32,
    bottom: u32,
    in_flight: u32,
}

impl Ends {
    /// Items between `top` and `bottom`: the items available to pop or steal.
    /// A `bottom` below `top` (an owner's pop that a claim overtook, seen
    /// before the owner put `bottom` back) counts as 0: real lengths stay
    /// below `MAX_CAPACITY`, so a difference above it is negative.
    #[inline]
    fn len(self) -> u32 {
        let len = self.bottom.wrapping_sub(self.top) & IDX_MASK;
        if len as usize > MAX_CAPACITY { 0 } else { len }
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
    /// Under loom, whether the ring was freed (see `reclaim`): every slot
    /// access reads it first.
    #[cfg(stepsched_loom)]
    freed: UnsafeCell<bool>,
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
            #[cfg(stepsched_loom)]
            freed: UnsafeCell::new(false),
        }))
    }

    /// Under loom, marks the ring freed: a later slot access fails the
    /// model (see `reclaim`).
    #[cfg(stepsched_loom)]
    fn mark_freed(&self) {
        // SAFETY: only the owner writes the mark; loom checks that no
        // slot access of another thread is unordered with this write.
        self.freed.with_mut(|f| unsafe { *f = true });
    }

    #[inline]
    fn cap(&self) -> usize {
        self.mask + 1
    }

    #[inline]
    fn slot(&self, index: u32) -> &UnsafeCell<Slot<T>> {
        #[cfg(stepsched_loom)]
        self.freed.with(|f| {
            // SAFETY: a read of the mark; loom flags it if it races the
            // owner's write in `mark_freed`.
            assert!(!unsafe { *f }, "a slot of a freed ring was accessed");
        });
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
    /// `pops`, `top` and `flight` (see [`Head`]).
    head: CachePadded<AtomicU64>,
    /// `bottom`: one past the newest item (a 28-bit wrapping index).
    /// Written only by the owner: up by a push, down by a pop, and back up
    /// by a pop that finds a claim took its item.
    bottom: CachePadded<AtomicU32>,
    /// The current ring. Written only by the owner (on growth).
    buffer: CachePadded<AtomicPtr<Buffer<T>>>,
    /// Rings replaced by growth while a claim was in flight, freed at the
    /// next growth that finds none, or with the deque (see `reclaim`).
    /// Only the owner touches the list.
    retired: UnsafeCell<Vec<*mut Buffer<T>>>,
    /// Under loom, rings marked freed, kept until the drop so that a read
    /// of one is caught rather than undefined.
    #[cfg(stepsched_loom)]
    freed: UnsafeCell<Vec<*mut Buffer<T>>>,
}

// SAFETY: `Inner` moves `T`s between threads (push on one, pop or steal on
// another), which needs `T: Send`; the raw buffer pointer is only an owning
// pointer to slots of `T`.
unsafe impl<T: Send> Send for Inner<T> {}
// SAFETY: shared access goes through atomics and the claim protocol
// documented at the top of this module, which gives each slot access to one
// thread at a time; values of `T` only ever move, never get shared, so
// `T: Send` is enough. The lists of kept rings (`retired`, and `freed`
// under loom) are touched only by the owner, or by `Drop` with `&mut`.
unsafe impl<T: Send> Sync for Inner<T> {}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        // Relaxed: `&mut self` means every handle is gone; the Arc's drop
        // already synchronized with their last uses.
        let ends =
            Head(self.head.load(Ordering::Relaxed)).ends(self.bottom.load(Ordering::Relaxed));
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
        // else can reach it any more; the retired rings are in the lists
        // `free_kept` frees, never the live one.
        drop(unsafe { Box::from_raw(buffer) });
        reclaim::free_kept(self);
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
    /// `top` as the owner last read it. `top` only grows, so this is a
    /// lower bound of it: a `bottom` equal to it means the deque is empty
    /// (see `pop`).
    seen_top: Cell<u32>,
    /// The lowest slot in use (`top - in_flight`) as the owner last read
    /// it with Acquire. It only grows too, so `bottom - seen_lowest` bounds
    /// the slots in use from above, and every slot below it has been
    /// released to us (see `push`).
    seen_lowest: Cell<u32>,
    /// The highest `bottom` stored since the last pop that found no
    /// reservation or failed one (see `pop`): a thief holding a
    /// reservation now read a `bottom` no higher than this, or one stored
    /// later.
    high: Cell<u32>,
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
            bottom: CachePadded::new(AtomicU32::new(start & IDX_MASK)),
            buffer: CachePadded::new(AtomicPtr::new(buffer)),
            retired: UnsafeCell::new(Vec::new()),
            #[cfg(stepsched_loom)]
            freed: UnsafeCell::new(Vec::new()),
        });
        Worker {
            inner,
            buffer: Cell::new(buffer),
            seen_top: Cell::new(start & IDX_MASK),
            seen_lowest: Cell::new(start & IDX_MASK),
            high: Cell::new(start & IDX_MASK),
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
        // Relaxed: `bottom` is ours and thieves only move `top`; the result
        // is exact for the owner up to concurrent steals.
        self.ends(Ordering::Relaxed).len() as usize
    }

    /// Both ends, as the owner sees them: `bottom` from our own copy.
    #[inline]
    fn ends(&self, order: Ordering) -> Ends {
        Head(self.inner.head.load(order)).ends(self.bottom())
    }

    /// `bottom`, as only the owner writes it.
    #[inline]
    fn bottom(&self) -> u32 {
        // Relaxed: we are the only writer, so this reads our own last store
        // (a copy in a `Cell` would cost a second store per push and pop,
        // which the pop's fence then waits for).
        self.inner.bottom.load(Ordering::Relaxed)
    }

    /// Sets `bottom`.
    #[inline]
    fn set_bottom(&self, bottom: u32) {
        // Release: publishes every slot this thread wrote before (by pushes
        // up to here) to a thief whose Acquire load of `bottom` reads this
        // value, whether a push, a pop or a pop's undo stored it.
        self.inner.bottom.store(bottom, Ordering::Release);
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
        let bottom = self.bottom();
        let mut buffer = self.buffer.get();
        // No load of the word: the slots in use lie in `[lowest, bottom)`,
        // and `seen_lowest` is a lower bound of `lowest`. Only when that
        // bound says the ring is full do we read the word again.
        // SAFETY: the cached pointer is the live ring, owned by `inner`,
        // which we keep alive; only the owner (us) replaces it.
        if self.used(bottom) >= unsafe { (*buffer).cap() } {
            buffer = self.grow(1);
        }
        // SAFETY: the slot for `bottom` is free: every slot in use lies in
        // `[seen_lowest, bottom)`, which is shorter than the ring, and
        // every slot below `seen_lowest` was released by an Acquire load
        // that read a thief's release of its claim (or a later value that
        // carries it, as the module docs show), so its reads happen
        // before our write. The range only moves up while we hold the owner
        // role. No thief reads a slot before claiming it, and claims end
        // below `bottom`.
        unsafe { (*buffer).write(bottom, item) };
        self.set_bottom(bottom.wrapping_add(1) & IDX_MASK);
    }

    /// Slots that may be in use, as far as the owner knows: from
    /// `seen_lowest` up to `bottom`. Never below the slots in use.
    #[inline]
    fn used(&self, bottom: u32) -> usize {
        (bottom.wrapping_sub(self.seen_lowest.get()) & IDX_MASK) as usize
    }

    /// Pops the most recently pushed item (LIFO).
    ///
    /// Wait-free and, unless a thief holds the claim reservation at that
    /// moment, without a read-modify-write: a store of `bottom`, a SeqCst
    /// fence and a load of the word, as in the classic deque. Against a
    /// held reservation, one CAS (retried only if a thief changed the word
    /// in between).
    ///
    /// ```
    /// let w = stepsched_deque::Worker::new();
    /// w.push(1);
    /// w.push(2);
    /// assert_eq!(w.pop(), Some(2));
    /// ```
    #[inline]
    pub fn pop(&self) -> Option<T> {
        let bottom = self.bottom();
        // An empty deque without touching the word: `top` only grows, so
        // once it reached `bottom` no item is left before our next push.
        // A `seen_top` behind `top` costs a fence below, and then catches
        // up.
        if bottom == self.seen_top.get() {
            return None;
        }
        let index = bottom.wrapping_sub(1) & IDX_MASK;
        self.set_bottom(index);
        // SeqCst: Dekker's exclusion with a thief's fence between its
        // reservation and its load of `bottom`: either it sees the lowered
        // `bottom`, or our load below sees its reservation (or what it did
        // with it). See the module docs.
        fence(Ordering::SeqCst);
        // Relaxed: the fence orders it; we read no slot a thief wrote.
        let mut current = self.inner.head.load(Ordering::Relaxed);
        loop {
            let head = Head(current);
            if head.ends(bottom).len() == 0 {
                // A claim took `index` (it moved `top` to `bottom`): put
                // `bottom` back; the deque is empty.
                self.set_bottom(bottom);
                self.seen_top.set(head.top());
                return None;
            }
            if head.flight() < STALE {
                // No reservation held: every thief either saw the lowered
                // `bottom` or has a claim we see in `top`. A later
                // reservation's thief reads our `bottom` or a later one.
                self.high.set(index);
                break;
            }
            // A thief holds the reservation; it may have read `bottom`
            // before we lowered it. If even the highest `bottom` it can
            // have read leaves our item out of its claim, let it be.
            if self.claim_spares(head.top(), bottom) {
                break;
            }
            // Change the word so its claim fails.
            let pops = head.pops().wrapping_add(1) & IDX_MASK;
            let mut new = Head::new(pops, head.top(), head.flight());
            if pops == 0 {
                new = pop_count_wraps(new);
            }
            // Relaxed: the CAS only has to make the pending claim fail. A
            // thief whose reservation comes later in the word's order than
            // the value this pop decides on (from its load, a failed CAS or
            // this CAS) has that value coherence-ordered before its
            // reservation, so our fence precedes its fence and its load of
            // `bottom` sees ours.
            // Relaxed on failure: we decide again from the value read.
            match self.inner.head.compare_exchange_weak(
                current,
                new.0,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    // As if no reservation were held: a later one's thief
                    // reads our `bottom` or a later one.
                    self.high.set(index);
                    break;
                }
                Err(actual) => current = actual,
            }
        }
        // SAFETY: `index` is ours: no claim pending at the word we decided
        // on can reach it (see the module docs), claims seen there end at
        // or below it, and the slot was written by this thread.
        Some(unsafe { (*self.buffer.get()).read(index) })
    }

    /// Pops the oldest item (FIFO), from the thieves' end: the item the
    /// next steal would take. For an owner that now and then wants its
    /// oldest item rather than its newest (a scheduler giving older work
    /// its turn).
    ///
    /// Returns [`Steal::Retry`] when a thief is taking items at that
    /// moment (it holds the claim reservation or is copying a claimed
    /// batch out, or its reservation won the race for the word): the
    /// oldest items are then already on their way out. Wait-free: a load
    /// and one CAS of the word thieves claim through, no fence.
    ///
    /// ```
    /// use stepsched_deque::{Steal, Worker};
    ///
    /// let w = Worker::new();
    /// w.push(1);
    /// w.push(2);
    /// w.push(3);
    /// assert_eq!(w.pop_oldest(), Steal::Success(1));
    /// assert_eq!(w.pop(), Some(3));
    /// assert_eq!(w.pop_oldest(), Steal::Success(2));
    /// assert_eq!(w.pop_oldest(), Steal::Empty);
    /// ```
    pub fn pop_oldest(&self) -> Steal<T> {
        let bottom = self.bottom();
        // Relaxed: the slot we take was written by this thread, and no slot
        // a thief read is written on the strength of this value (`push`
        // reuses slots only below `seen_lowest`, which Acquire loads set).
        let current = self.inner.head.load(Ordering::Relaxed);
        let head = Head(current);
        if head.ends(bottom).len() == 0 {
            self.seen_top.set(head.top());
            return Steal::Empty;
        }
        if head.flight() != 0 {
            // A thief holds the reservation (its claim is sized from
            // `top`) or copies a claimed batch (its release will store the
            // word it claimed, `top` included, over ours): leave it be.
            return Steal::Retry;
        }
        let top = head.top();
        let new = Head::new(head.pops(), top.wrapping_add(1), 0);
        hook::run(hook::Point::BeforeTakeOldest);
        // Relaxed, both: like a claim, this only has to be one atomic step
        // in the word's order. A reservation before it changed the word
        // (the CAS fails); one after it read `top + 1` (its claim starts
        // above our item). Being an RMW, it continues the release sequence
        // of the last thief's release, so a later thief's fence still
        // acquires that release through it. Nobody else writes the word
        // while `flight` is 0 except thieves' reservations and our own
        // pops, so no claim is in flight when it succeeds.
        if self
            .inner
            .head
            .compare_exchange(current, new.0, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return Steal::Retry;
        }
        self.seen_top.set(new.top());
        // SAFETY: `top` was below `bottom` in the word our CAS replaced, with
        // nothing in flight, so it holds an item no claim covers; moving
        // `top` past it makes it ours alone. This thread wrote the slot,
        // and only this thread changes the ring.
        Steal::Success(unsafe { (*self.buffer.get()).read(top) })
    }

    /// Whether a pending claim under a reservation taken at `top` cannot
    /// reach the item at `bottom - 1`, which a pop is taking; if so, raises
    /// `high` to `bottom` (when it is below).
    ///
    /// The reserving thief claims `⌈(b - top) / 2⌉` items at most, from
    /// the `b` it reads after its fence. That `b` was stored at or after
    /// the last pop that found no reservation or failed one (that pop's
    /// fence precedes the thief's), so it is at most `high` or `bottom`
    /// (between two pops `bottom` only grows), or else stored after our
    /// own store, when the item at our index is a newer one. See the
    /// module docs.
    #[cold]
    #[inline(never)]
    fn claim_spares(&self, top: u32, bottom: u32) -> bool {
        let above = |b: u32| {
            Ends {
                top,
                bottom: b,
                in_flight: 0,
            }
            .len()
        };
        let ours = above(bottom);
        let reach = above(self.high.get()).max(ours);
        let claim = reach.div_ceil(2).min(MAX_STEAL_LIMIT as u32);
        // Our index lies `ours - 1` above `top` (`ours >= 1`: the caller
        // saw the item still there): out of reach if `ours - 1 >= claim`.
        if ours > claim {
            self.high.set(top.wrapping_add(reach) & IDX_MASK);
            true
        } else {
            false
        }
    }

    /// Makes room for `extra` more items: reads the word again and, if
    /// the ring is really that full, doubles it (more than once if
    /// needed), copying every slot in use, in-flight ones included.
    #[cold]
    #[inline(never)]
    fn grow(&self, extra: usize) -> *mut Buffer<T> {
        // Acquire: synchronizes with the Release store by which a thief
        // released its claim (and, through it, every earlier one), so its
        // reads of those slots happen before our later writes may reuse one
        // of them (`push` relies on `seen_lowest` for that).
        let ends = self.ends(Ordering::Acquire);
        self.seen_top.set(ends.top);
        self.seen_lowest.set(ends.lowest());
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
        // SAFETY: we are the owner, `old` is unlinked (the store above),
        // was allocated by `Buffer::alloc`, and is retired once.
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
        let bottom = self.bottom();
        let mut buffer = self.buffer.get();
        // SAFETY: the cached pointer is the live ring.
        if self.used(bottom) + n > unsafe { (*buffer).cap() } {
            buffer = self.grow(n);
        }
        let mut index = bottom;
        for _ in 0..n {
            // SAFETY: as in `push`: the ring has room for `n` more items
            // after `bottom`, and those slots are neither in use nor claimed.
            unsafe { (*buffer).write(index, next()) };
            index = index.wrapping_add(1) & IDX_MASK;
        }
        self.set_bottom(index);
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
        let (top, _, claimed) = match self.claim(1) {
            Steal::Success(claim) => claim,
            Steal::Empty => return Steal::Empty,
            Steal::Retry => return Steal::Retry,
        };
        let buffer = self.load_buffer();
        // SAFETY: we claimed `top` (it is in flight, so the owner neither
        // writes its slot nor frees a ring while we hold the claim: see
        // `reclaim`); `buffer` holds its item (see the module docs on
        // growth).
        let item = unsafe { (*buffer).read(top) };
        self.release(claimed);
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
        let (top, n, claimed) = match self.claim(limit) {
            Steal::Success(claim) => claim,
            Steal::Empty => return Steal::Empty,
            Steal::Retry => return Steal::Retry,
        };
        // Releases the claim when dropped, also if `push_batch` panics (the
        // thief's own deque at its capacity limit): the victim must not keep
        // the claim in flight for ever. Items not yet copied out are then
        // leaked, never dropped twice. Dropped at the end of this call,
        // after every read, as the release in `steal`.
        let _release = ReleaseOnDrop {
            stealer: self,
            claimed,
        };
        let buffer = self.load_buffer();
        // SAFETY: as in `steal`: `top..top + n` are claimed by us and held
        // by `buffer`, which is not freed while we hold the claim.
        let first = unsafe { (*buffer).read(top) };
        let mut index = top;
        dst.push_batch(n as usize - 1, || {
            index = index.wrapping_add(1) & IDX_MASK;
            // SAFETY: as above, for each claimed index after the first.
            unsafe { (*buffer).read(index) }
        });
        Steal::Success(first)
    }

    /// The number of items in the deque, counting every item that stays in
    /// it throughout the call (unless a concurrent pop or claim is already
    /// removing it).
    ///
    /// The deque changes under a reader, so this is a snapshot, not an
    /// exact count: items a concurrent push adds may be missed, items
    /// popped or stolen during the call may still be counted, and items a
    /// thief is copying out are not counted. Wait-free: two loads.
    ///
    /// ```
    /// let w = stepsched_deque::Worker::new();
    /// w.push(1);
    /// assert_eq!(w.stealer().len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        // Relaxed, both: no slot is read; an item pushed before the call
        // (happens-before) is seen by coherence.
        let head = Head(self.inner.head.load(Ordering::Relaxed));
        hook::run(hook::Point::BetweenLoads);
        let bottom = self.inner.bottom.load(Ordering::Relaxed);
        // An item that stays in the deque throughout lies in `[top, bottom)`
        // for both values read; a `bottom` below `top` counts as 0.
        head.ends(bottom).len() as usize
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
    /// returns the first claimed index, the count and the word the claim
    /// wrote; the caller must copy the items out and then call `release`
    /// with that word.
    ///
    /// Two CASes and a SeqCst fence: the first CAS takes the claim
    /// reservation (`flight` 0 → [`RESERVED`]), the fence orders it before
    /// the load of `bottom`, and the second CAS moves `top` by `n` and sets
    /// `flight = n`. The second succeeds only if no pop found the
    /// reservation in between (see the module docs).
    #[inline]
    fn claim(&self, limit: usize) -> Steal<(u32, u64, Head)> {
        // Relaxed: a thief reads only slots it claimed, below a `bottom` it
        // loads with Acquire after its fence; nothing it reads was published
        // through this word.
        let head = Head(self.inner.head.load(Ordering::Relaxed));
        // Relaxed: here only to tell an empty deque cheaply. An item pushed
        // before this call (happens-before) is counted by coherence; no slot
        // is read on the strength of this value.
        let bottom = self.inner.bottom.load(Ordering::Relaxed);
        if head.ends(bottom).len() == 0 {
            return Steal::Empty;
        }
        if head.flight() != 0 {
            // Another thief is claiming or copying a batch out: one at a
            // time.
            return Steal::Retry;
        }
        hook::run(hook::Point::BeforeReserve);
        let reserved = Head(head.0 | RESERVED);
        // Relaxed: as the load above; the reservation only has to be one
        // atomic step in the word's order, which the fence below then
        // orders against the pops' fences. The fence also acquires the
        // word's last release, which this CAS read (or a read-modify-write
        // after it): a release is a plain store (see `release`), which no
        // later release continues, so the earlier thief's reads of its
        // slots reach the owner's Acquire loads through our own release.
        // Relaxed on failure: we give up without reading anything.
        if self
            .inner
            .head
            .compare_exchange(head.0, reserved.0, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return Steal::Retry;
        }
        // SeqCst: pairs with the fence of every pop (see `Worker::pop`):
        // either that pop's load of the word sees our reservation (and its
        // CAS then fails our claim), or our load below sees its `bottom`.
        fence(Ordering::SeqCst);
        // Acquire: synchronizes with the owner's Release store of `bottom`,
        // so the slots below it are written and visible.
        let bottom = self.inner.bottom.load(Ordering::Acquire);
        let ends = reserved.ends(bottom);
        let len = ends.len() as usize;
        if len == 0 {
            self.unreserve();
            return Steal::Empty;
        }
        let n = len.div_ceil(2).min(limit) as u64;
        hook::run(hook::Point::BeforeClaim);
        let new = Head::new(reserved.pops(), ends.top.wrapping_add(n as u32), n);
        // Relaxed: the Acquire load of `bottom` after the fence already
        // acquired everything we read. Success means the word is still `reserved`:
        // no pop failed the reservation since we took it (such a pop changes
        // `pops`, and `pops` cannot come round again without passing zero,
        // which turns the reservation STALE), so every pop since then either
        // lowered `bottom` before our load, or found the reservation and saw
        // that no claim from it could reach its item, or left our indices
        // alone.
        // Relaxed on failure: we give up.
        match self.inner.head.compare_exchange(
            reserved.0,
            new.0,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => Steal::Success((ends.top, n, new)),
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
        // nothing to publish. It must stay a read-modify-write, as must the
        // pops' and the claims' CASes: a release is a plain store, and only
        // read-modify-writes after it continue its release sequence, which
        // the owner's Acquire loads of the word rely on.
        self.inner.head.fetch_and(!FLIGHT_MASK, Ordering::Relaxed);
    }

    /// Loads the current ring; only under a claim (after the claiming
    /// CAS), which keeps it from being freed (see `reclaim`).
    #[inline]
    fn load_buffer(&self) -> *mut Buffer<T> {
        // Acquire: synchronizes with the Release store in `grow`, so the
        // slots it copied are visible.
        self.inner.buffer.load(Ordering::Acquire)
    }

    /// Ends a claim once its items are copied out: `claimed` is the word
    /// the claiming CAS wrote.
    ///
    /// A plain store, not a read-modify-write: while `flight` counts a
    /// claim, nobody else writes the word (other thieves' CASes expect
    /// `flight == 0`, and pops change it only when they find a
    /// reservation), so it still holds `claimed`, and the store only takes
    /// `flight` back to zero.
    #[inline]
    fn release(&self, claimed: Head) {
        debug_assert!(claimed.in_flight() != 0, "released a word without a claim");
        debug_assert_eq!(
            self.inner.head.load(Ordering::Relaxed),
            claimed.0,
            "the word changed under a claim"
        );
        // Release: our reads of the claimed slots happen before the owner's
        // next write of them, or its free of the ring (its Acquire load in
        // `grow` or `reclaim::retire` reads this value, a later
        // read-modify-write of it, or the release of a later thief, whose
        // fence after its reservation acquired this one).
        self.inner
            .head
            .store(claimed.0 & !FLIGHT_MASK, Ordering::Release);
    }
}

/// Ends a claim when dropped (see `steal_half_into_with_limit`).
struct ReleaseOnDrop<'a, T> {
    stealer: &'a Stealer<T>,
    /// The word the claiming CAS wrote.
    claimed: Head,
}

impl<T> Drop for ReleaseOnDrop<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.stealer.release(self.claimed);
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
        /// In `Worker::pop_oldest`, between the owner's load of the head
        /// word and its CAS.
        BeforeTakeOldest,
        /// Between a thief's reservation and its claiming CAS.
        BeforeClaim,
        /// In `Stealer::len`, between the loads of the head word and of
        /// `bottom`.
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
