//! The queue: a segmented fetch-and-add MPSC list with close and generations.
//!
//! # Algorithm
//!
//! The queue is an unbounded sequence of slots numbered by a 32-bit index
//! that wraps. Slots live in blocks of [`BLOCK_CAP`] (8) that form a linked
//! list in index order. The design is the segmented fetch-and-add list of
//! tokio's unbounded channel (`tokio::sync::mpsc::list`, Carl Lerche, 2019),
//! itself a descendant of the array-of-segments queues of Morrison and Afek
//! (LCRQ, 2013) and Yang and Mellor-Crummey (2016). It replaces Vyukov's
//! intrusive node queue, against which it is benchmarked
//! (`benches/benches/mpsc.rs`): both cost one shared read-modify-write per
//! push (Vyukov's `swap`, our `fetch_add`), but Vyukov's also needs a node
//! per push (an allocation, or a contended and ABA-prone free list) and the
//! consumer follows one pointer per value, while here a block serves 8
//! pushes and the consumer reads a block's values side by side. On top of it
//! come per-slot states, close, generations and tombstones, which are ours.
//!
//! * **The tail word** (`tail: AtomicU64`) packs the next index to claim
//!   (high 32 bits), the generation (31 bits) and a `CLOSED` bit. A push
//!   *claims* an index with one `fetch_add`, and the value that `fetch_add`
//!   returns says, atomically with the claim, whether the queue was open and
//!   of the sender's generation. That single RMW is the push's
//!   linearization point: close and reset are RMWs on the same word, so
//!   every claim is totally ordered against them.
//! * **Writing.** The producer finds the block of its index (below), writes
//!   the value into the slot and stores the slot's state, `VALUE`, with
//!   Release (a plain store: the claim is the push's only RMW). A claim that
//!   was refused (closed, or another generation) still owns its index, so it
//!   stores `TOMBSTONE` instead and hands the value back; so does, from a
//!   drop guard, an accepted claim whose value is made in its slot
//!   (`push_with`) by a closure that unwinds. Every claimed index thus
//!   becomes ready exactly once. A cheap pre-check (a load of a status
//!   word that copies the generation and `CLOSED` bit on a line of its own,
//!   so that it stays in every producer's cache) refuses most pushes on a
//!   closed or reset queue before they claim anything, so a closed queue
//!   does not grow; only pushes racing the close leave tombstones.
//! * **Draining.** The single consumer keeps its index and a pointer to the
//!   block holding it, and takes ready slots one after the other from
//!   there, block after block, skipping tombstones. It stops at the first
//!   slot that is claimed but not yet written: that push is still in progress (the
//!   equivalent of Vyukov's "tail swapped but not linked yet"); its value
//!   and every later one are found by a later drain once the producer
//!   finishes. Nothing is ever skipped for good.
//! * **Finding a block** (lock-free). Producers share a *hint*: the newest
//!   block a producer has found. Usually the claimed index is in it. If the
//!   index is further on, the producer walks `next` pointers (where `next`
//!   is null it allocates a block and links it with a CAS; on losing the race
//!   it appends its block further down rather than freeing it) and then moves
//!   the hint to its block with one CAS from the value it loaded. If the
//!   index is further back (other producers claimed after it and moved the
//!   hint on before it looked), it walks back along `prev` pointers, usually
//!   one block. Unlike tokio's list, whose tail pointer may only pass
//!   completed blocks and whose producers only walk forward, a producer
//!   stalled in the middle of a push does not hold the hint back, so the
//!   other producers' walks stay short whatever it does.
//!
//! # Reuse and ABA-safety
//!
//! Steady state does not allocate: the consumer recycles each block it has
//! finished by resetting it and appending it after the end of the list,
//! where producers find it already linked. Like a `Vec` keeping its
//! capacity, it keeps as many spare slots beyond the newest claim as the
//! largest backlog it has seen (at least 1024, at most 16 384; a backlog
//! drained in bounded chunks counts whole), and frees the surplus; a reset
//! brings that back to 1024.
//!
//! Reusing a block while a producer still holds a pointer to it would be
//! the ABA hazard of node reuse; it is ruled out by the *release protocol*:
//!
//! 1. The hint moves only forward, by a CAS from a block `H` to a block `F`
//!    that the mover reached by walking from `H`. The mover then reads
//!    `tail` with `fetch_add(0, Release)` (an RMW, so it reads the latest
//!    claim) and records that index `T` in every block from `H` up to `F`
//!    (excluded) as *released at T*.
//! 2. A producer with claim `i` dereferences only blocks from the hint it
//!    loaded after its claim onwards (forward walk), or from its own block
//!    up to that hint (backward walk). Take a block `B` of a forward walk,
//!    released at `T`: the producer loaded a hint at or before `B`, so
//!    before the CAS that moved the hint past `B`. Its claim
//!    `fetch_add(Acquire)` either comes after that mover's `fetch_add(0)`
//!    in `tail`'s modification order (then it synchronizes with it and must
//!    have loaded the moved hint, a contradiction), or before it, and then
//!    `i < T`.
//! 3. The consumer recycles `B` only once `B` is released at `T` and its own
//!    index has reached `T`, which means slot `i` has been taken, so that
//!    producer stored its slot's state (Release, read with Acquire), and
//!    that was its last access to any block.
//! 4. Blocks from the one a producer needs onwards (which covers a backward
//!    walk) cannot be recycled while it works, because the consumer cannot
//!    move past its unwritten slot and recycles blocks in list order behind
//!    itself.
//!
//! So a block is reset only when no producer can reach it; the hint's CAS
//! cannot suffer ABA either, since the block it was loaded as cannot be
//! recycled under the producer. Loom models check the protocol: weakening
//! the claim to Relaxed, replacing `fetch_add(0)` by a load, or recycling
//! without waiting for `T` each make them fail. Indices wrap at 2^32; comparisons are wrapping and
//! valid while fewer than 2^31 slots separate the consumer from the newest
//! claim. A producer that would grow the list beyond 2^30 undrained slots
//! aborts the process (like `Arc`'s reference-count overflow), which keeps
//! every comparison valid.
//!
//! # Generations and reset
//!
//! `reset` (consumer only) closes the queue if needed, remembering the index
//! `C` at which `CLOSED` was set: every claim below `C` was accepted, every
//! claim from `C` on was refused. It then drains until its index reaches
//! `C`, waiting for accepted pushes still writing (each is a few
//! instructions from done), and finally reopens the word with the next
//! generation in one CAS. A push bound to the old generation is therefore
//! either accepted before `C` and returned by reset's drain (the
//! `leftovers`), or refused and handed back: refused by the pre-check or
//! the claim while closed, or, if its claim lands after the reopen, by the
//! generation mismatch in the word its claim returned. It can never be
//! drained in the new generation.
//!
//! Waiting for accepted pushes is what `reset` cannot do when it is called
//! by the very push it waits for: from the `make` closure of an accepted
//! `push_with` into the same queue (the closure may hold the receiver).
//! Each accepted push links a `Making` record on its stack into a
//! thread-local list while `make` runs, and `reset` panics, before
//! changing anything, if the list holds one for its queue; the panic
//! unwinds through `make`, whose guard tombstones the slot. The list costs
//! a push a thread-local load and two stores around `make`, which the
//! compiler removes when `make` is inlined and calls nothing.

use core::fmt;
use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use crate::block::{BLOCK_CAP, Block, OFFSET_MASK, reached, start_of};
use crate::error::PushError;
use crate::primitive::cell::UnsafeCell;
use crate::primitive::local;
use crate::primitive::sync::Arc;
use crate::primitive::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use crate::primitive::wait::snooze;

/// `tail` bit 0: the queue is closed.
const CLOSED: u64 = 1;
/// Generations are 31-bit (bits 1..=31 of `tail`).
const GEN_MASK: u32 = u32::MAX >> 1;
/// One claim: the index lives in the high 32 bits of `tail`, so its carry
/// out of bit 63 is discarded (wrapping) and never reaches the flags.
const ONE_CLAIM: u64 = 1 << 32;
/// The flag and generation half of `tail`.
const LOW_HALF: u64 = u32::MAX as u64;
/// The first index of a new queue: a few blocks before the wrap of the
/// index space, so that every test crosses the wrap early.
const INITIAL_INDEX: u32 = 0u32.wrapping_sub(4 * BLOCK_CAP);
/// Most undrained slots a queue may hold before a producer aborts.
const MAX_SPAN: u32 = 1 << 30;
/// Spare slots (recycled blocks kept linked beyond the newest claim) a
/// queue keeps at least; it keeps more after a larger backlog, like a `Vec`
/// keeps its capacity, until the next reset.
#[cfg(not(stepsched_loom))]
const MIN_SPARE_SLOTS: u32 = 1024;
/// Under loom: one spare block, so that freeing surplus blocks is modelled.
#[cfg(stepsched_loom)]
const MIN_SPARE_SLOTS: u32 = BLOCK_CAP;
/// Spare slots a queue keeps at most, whatever backlog it has seen (16 384
/// slots, 2 048 blocks); blocks beyond are freed when recycled.
#[cfg(not(stepsched_loom))]
const MAX_SPARE_SLOTS: u32 = 1 << 14;
/// Under loom: as the minimum, so that surplus blocks keep being freed.
#[cfg(stepsched_loom)]
const MAX_SPARE_SLOTS: u32 = MIN_SPARE_SLOTS;

#[inline(always)]
const fn index_of(word: u64) -> u32 {
    (word >> 32) as u32
}

#[inline(always)]
const fn gen_of(word: u64) -> u32 {
    (word as u32) >> 1
}

/// Why a claim or pre-check refuses a push, from the `tail` word it read.
#[derive(Clone, Copy)]
enum Refusal {
    Closed,
    Stale,
}

impl Refusal {
    #[inline(always)]
    fn of(word: u64, generation: u32) -> Option<Refusal> {
        // Open and of our generation: the whole low half equals `gen << 1`.
        if word as u32 == generation << 1 {
            None
        } else if gen_of(word) != generation {
            Some(Refusal::Stale)
        } else {
            Some(Refusal::Closed)
        }
    }

    /// As [`Refusal::of`], from the status word (the low half of `tail`).
    #[inline(always)]
    fn of_status(status: u32, generation: u32) -> Option<Refusal> {
        Refusal::of(u64::from(status), generation)
    }

    #[inline(always)]
    fn with<T>(self, value: T) -> PushError<T> {
        match self {
            Refusal::Closed => PushError::Closed(value),
            Refusal::Stale => PushError::StaleGeneration(value),
        }
    }
}

/// The generation of a queue: bumped by every [`Receiver::reset`].
///
/// Generations are 31-bit and wrap after 2^31 resets of the same queue; a
/// [`Sender`] kept across exactly that many resets would be accepted again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Generation(u32);

impl Generation {
    /// The generation number (31 bits).
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Bytes from the start of one group of fields to the next group that must
/// not share a cache line with it: 64, the line size of x86-64 and of most
/// AArch64 parts. Spacing, not alignment: a field of at most 8 bytes at
/// an 8-aligned offset cannot straddle a line, so a field that starts
/// `LINE` bytes after it is on the next line whatever the allocation's
/// address, and the queue needs no over-aligned allocation (which the
/// system allocator serves through its slower `memalign` path, with
/// padding lost around it). Unlike crossbeam's 128-byte `CachePadded`,
/// this does not keep the groups off the *pair* of lines that x86's
/// adjacent-line prefetcher fetches together: one queue per process makes
/// the bytes count more here.
const LINE: usize = 64;
/// Padding after the claim group, `tail` then `hint`: the status starts a
/// line past the hint (saturating: loom's atomics are larger).
const CLAIM_PAD: usize = LINE.saturating_sub(size_of::<AtomicPtr<()>>());
/// Padding after the status.
const STATUS_PAD: usize = LINE.saturating_sub(size_of::<AtomicU32>());
/// Padding after the consumer's state, before the first block: the
/// block's header, which every push reads, starts a line past the start
/// of the state's last field (at most 8 bytes).
const CONSUMER_PAD: usize = LINE - 8;

/// The state shared by the senders and the receiver, in four groups
/// `LINE` bytes apart (see [`LINE`]), then the queue's first block: a queue
/// that receives at most `BLOCK_CAP` values in its life (the queue of a
/// short-lived process in a scheduler) costs one allocation, not two, and
/// so one free: what such a process pays most for when it is created on
/// one thread and ends on another, where the system allocator takes a
/// lock to free. A queue that keeps receiving still needs a second block
/// (the next one must be linked before the first can be recycled).
#[repr(C)]
struct Shared<T> {
    /// Next index to claim (high half), generation and `CLOSED` (low half).
    /// It may share its line with the `Arc`'s counts, which change only
    /// when a sender is made or dropped.
    tail: AtomicU64,
    /// A block at or before every block a producer may still need; moved
    /// on once per block. Every push reads it right after its claim on
    /// `tail`, so it sits beside `tail`, in the same 16 bytes (the `Arc`'s
    /// two counts before them keep those 16-aligned wherever an allocator
    /// that aligns to 16, as malloc does, puts the queue): on the line the
    /// claim has just taken, even when producers contend for it.
    hint: AtomicPtr<Block<T>>,
    _claim_line: [u8; CLAIM_PAD],
    /// A copy of the low half of `tail` (generation and `CLOSED`), updated
    /// after each close and reopen: the pre-check of `push` reads it, on a
    /// line of its own that only a close or a reopen writes, so that it
    /// stays in every producer's cache while their claims pass `tail`'s
    /// line from one to the other. ([`Sender::push_with_claim_only`]
    /// skips it.)
    status: AtomicU32,
    _status_line: [u8; STATUS_PAD],
    /// The consumer's index, published after each drain; read only by
    /// producers growing the list, for the span limit. It shares a line
    /// only with `orphan`, which is written once, at the end.
    consumer_index: AtomicU32,
    /// Where the consumer stopped (oldest block it still owns, its index),
    /// written once by the dropping `Receiver`, read by `Shared::drop`.
    orphan: UnsafeCell<Option<(NonNull<Block<T>>, u32)>>,
    /// Whether the receiver was made: at once by [`Receiver::new`], or
    /// later, once, by [`Sender::take_receiver`].
    receiver_made: AtomicBool,
    /// The consumer's state: only the unique receiver touches it (through
    /// `&mut self`, or `&self` for the read-only methods). Here rather than
    /// in the receiver, so that the receiver is one pointer and an owner
    /// can keep it, like a sender, in one word.
    consumer: UnsafeCell<Consumer<T>>,
    _consumer_line: [u8; CONSUMER_PAD],
    /// The first block, owned by this allocation: linked, released and
    /// recycled like any other, never freed on its own (see
    /// [`Shared::free_block`]). A line past the consumer's state and
    /// `consumer_index`, which the consumer writes at each drain, since
    /// every push reads the block's header.
    first: Block<T>,
    /// Owns `T`s; `*mut` so that Send/Sync come only from the impls below.
    _owns: PhantomData<*mut T>,
}

// SAFETY: values of `T` are moved in by producers and out by the single
// consumer, each value crossing threads once, so `T: Send` suffices; no `&T`
// is ever shared. Every other field is an atomic or is accessed only by the
// unique receiver or by `drop`.
unsafe impl<T: Send> Send for Shared<T> {}
// SAFETY: as above; the shared operations (`push`, the walk) go through
// atomics, and the unsynchronized fields are owned by the unique receiver.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// A new, open, empty queue of generation 0; `receiver_made`: whether
    /// its receiver is made with it.
    fn new(receiver_made: bool) -> Arc<Self> {
        let shared = Arc::new(Shared {
            tail: AtomicU64::new(u64::from(INITIAL_INDEX) << 32),
            hint: AtomicPtr::new(ptr::null_mut()),
            _claim_line: [0; CLAIM_PAD],
            status: AtomicU32::new(0),
            _status_line: [0; STATUS_PAD],
            consumer_index: AtomicU32::new(INITIAL_INDEX),
            orphan: UnsafeCell::new(None),
            receiver_made: AtomicBool::new(receiver_made),
            consumer: UnsafeCell::new(Consumer {
                // Both pointers are set below, once the queue has its place.
                shared: SharedRef(NonNull::dangling()),
                head: NonNull::dangling(),
                free_head: NonNull::dangling(),
                head_start: INITIAL_INDEX,
                head_lap: 1,
                spare_tail: None,
                spare_slots: MIN_SPARE_SLOTS,
                burst: 0,
                index: INITIAL_INDEX,
                generation: 0,
                closed_at: None,
            }),
            _consumer_line: [0; CONSUMER_PAD],
            first: Block::new(INITIAL_INDEX),
            _owns: PhantomData,
        });
        let first = NonNull::from(&shared.first);
        debug_assert_eq!(shared.first.lap(), 1);
        // SAFETY: no handle exists yet: the state is ours alone.
        let consumer = unsafe { &mut *shared.consumer_ptr() };
        consumer.shared = SharedRef(NonNull::from(&*shared));
        consumer.head = first;
        consumer.free_head = first;
        // Relaxed: no handle exists yet; each is made from this `Arc` after
        // this store, and reaches another thread only through a hand-off
        // that synchronizes.
        shared.hint.store(first.as_ptr(), Ordering::Relaxed);
        shared
    }

    /// The consumer's state (see `consumer`): for the receiver only.
    #[inline(always)]
    fn consumer_ptr(&self) -> *mut Consumer<T> {
        self.consumer.with_mut(|p| p)
    }

    /// The generation and `CLOSED` bit, as of a recent close or reopen.
    #[inline(always)]
    fn status(&self) -> u32 {
        // Relaxed: a refusal based on any value the status held since the
        // sender was made is correct (the queue was closed or reset at that
        // point), and the value is never older than the sender: senders are
        // made by the receiver after it stores the status. The claim itself
        // decides every push the pre-check lets through.
        self.status.load(Ordering::Relaxed)
    }

    /// Frees a block that left the list for good, unless it is the first
    /// block, which lives in this allocation and goes with it.
    ///
    /// # Safety
    /// As for [`Block::free`], but `block` may also be `first`.
    unsafe fn free_block(&self, block: NonNull<Block<T>>) {
        if !ptr::eq(block.as_ptr(), &self.first) {
            // SAFETY: not `first`, so it came from `Block::alloc` (every
            // other block does); the rest is the caller's contract.
            unsafe { Block::free(block) };
        }
    }

    /// Publishes a new status (receiver only, after the RMW on `tail`).
    fn set_status(&self, status: u32) {
        // Relaxed: see `status`; the receiver's later `sender()` calls are
        // ordered after this store by program order.
        self.status.store(status, Ordering::Relaxed);
    }

    /// Returns the block holding `index`, growing the list if needed.
    ///
    /// The caller has claimed `index` and not yet marked it ready, which
    /// keeps every block this walk touches alive (module docs, release
    /// protocol).
    #[inline]
    fn find_block(&self, index: u32) -> NonNull<Block<T>> {
        let start = start_of(index);
        // Acquire: pairs with the Release CAS that moved the hint (and,
        // transitively, the Release CAS that linked the block), so the
        // block's fields are visible.
        let hint = self.hint.load(Ordering::Acquire);
        // SAFETY: the hint is never null, and the block is live for us: the
        // release protocol keeps it from being recycled before our slot is
        // taken by the consumer.
        let mut block = unsafe { &*hint };
        let behind = start.wrapping_sub(block.start()) as i32;
        if behind == 0 {
            // SAFETY: non-null (just dereferenced).
            return unsafe { NonNull::new_unchecked(hint) };
        }
        if behind < 0 {
            // Our block is older than the hint (others claimed after us and
            // moved it on): walk back, usually one block.
            loop {
                // SAFETY: the hint is after our block, so `prev` exists, and
                // every block from ours to the hint is live (the consumer
                // cannot pass our unwritten slot, and it recycles blocks only
                // behind itself).
                block = unsafe { block.prev() };
                if block.start() == start {
                    return NonNull::from(block);
                }
            }
        }
        // Our block is newer: walk forward, linking blocks where needed.
        let found = loop {
            // Acquire: pairs with the Release CAS in `Block::try_push` that
            // linked the next block, so its fields are visible.
            let next = match block.next(Ordering::Acquire) {
                Some(next) => next,
                None => {
                    self.check_span(block.start().wrapping_add(BLOCK_CAP));
                    block.grow()
                }
            };
            // SAFETY: live for us (release protocol): it lies between the
            // hint we loaded and our block.
            block = unsafe { next.as_ref() };
            if block.start() == start {
                break next;
            }
        };
        // Move the hint to our block, releasing the blocks it passes. Only
        // from the value we loaded: if another producer moved it first, it
        // is at least as far on, or will be corrected by a later push.
        // Release: publishes the blocks we walked to producers that load the
        // hint with Acquire. Relaxed on failure: we just leave it.
        if self
            .hint
            .compare_exchange(hint, found.as_ptr(), Ordering::Release, Ordering::Relaxed)
            .is_ok()
        {
            // Release RMW: reads the latest claim (an RMW always reads the
            // last value in modification order), and a claim after it
            // synchronizes with it and so sees the moved hint. Steps 1 and 2
            // of the release protocol.
            let observed = index_of(self.tail.fetch_add(0, Ordering::Release));
            let mut passed = hint;
            while passed != found.as_ptr() {
                // SAFETY: a block of our walk, live for us as argued above.
                let b = unsafe { &*passed };
                b.mark_released(observed);
                // Relaxed: we loaded this `next` with Acquire in the walk,
                // and it does not change while the block is linked.
                passed = b
                    .next(Ordering::Relaxed)
                    .expect("walked through it")
                    .as_ptr();
            }
        }
        found
    }

    /// Aborts if growing the list to a block starting at `new_start` would
    /// break the wrapping-index invariant (2^30 undrained slots).
    #[cold]
    fn check_span(&self, new_start: u32) {
        // Relaxed: a stale consumer index only makes the check stricter. The
        // null `next` that brought us here may be stale too (the block may
        // already be linked and even consumed), so a block *behind* the
        // consumer (negative distance) is fine: only growth far ahead aborts.
        let consumer = self.consumer_index.load(Ordering::Relaxed);
        if new_start.wrapping_sub(consumer) as i32 > MAX_SPAN as i32 {
            eprintln!("stepsched-mpsc: more than 2^30 undrained events in one queue; aborting");
            std::process::abort();
        }
    }
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        // SAFETY: `drop` has exclusive access; the receiver wrote `orphan`
        // before releasing its `Arc`, whose drop orders that write before
        // this one.
        let orphan = self.orphan.with_mut(|p| unsafe { (*p).take() });
        let first = NonNull::from(&self.first);
        // No handover: the receiver was never made (a queue made by
        // `Sender::without_receiver`), so every value from the first block
        // on is still here.
        let (mut block, index) = orphan.unwrap_or((first, INITIAL_INDEX));
        loop {
            let b = if block == first {
                // Borrowed afresh from `self` rather than through the
                // pointer the list kept, which `&mut self` outlived.
                &self.first
            } else {
                // SAFETY: every block from the consumer's oldest one on is
                // live and no other thread exists any more.
                unsafe { block.as_ref() }
            };
            let start = b.start();
            for offset in 0..BLOCK_CAP {
                let (ready, tomb) = b.slot_state(offset);
                if ready && !tomb && reached(start.wrapping_add(offset), index) {
                    // SAFETY: written, not a tombstone, not taken by the
                    // consumer (at or after its index).
                    unsafe { b.drop_value(offset) };
                }
            }
            // Relaxed: no other thread exists.
            let next = b.next(Ordering::Relaxed);
            // SAFETY: unreachable now; its values were dropped above.
            unsafe { self.free_block(block) };
            match next {
                Some(n) => block = n,
                None => break,
            }
        }
    }
}

/// Creates an open queue of generation 0, returning a sender bound to that
/// generation and the receiver.
///
/// ```
/// let (tx, mut rx) = stepsched_mpsc::channel();
/// tx.push("hello").unwrap();
/// let mut out = Vec::new();
/// rx.drain_into(&mut out);
/// assert_eq!(out, ["hello"]);
/// ```
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let rx = Receiver::new();
    (rx.sender(), rx)
}

/// A producer handle: pushes into the queue from any thread, lock-free.
///
/// A sender is bound to the generation that was current when it was made
/// (by [`Receiver::sender`] or [`channel`]); once the queue is reset its
/// pushes are refused with [`PushError::StaleGeneration`]. It is small (an
/// `Arc` and a `u32`) and cheap to clone.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
    generation: u32,
}

impl<T> Sender<T> {
    /// Creates an open, empty queue of generation 0 whose receiver is not
    /// made yet, and returns a sender bound to that generation. The
    /// receiver is made later, once, by [`take_receiver`](Self::take_receiver)
    /// on any sender of the queue.
    ///
    /// For an owner that makes the queue wherever the first value is
    /// pushed, on whatever thread, and drains it elsewhere (a scheduler's
    /// per-process queue): the receiver needs no place of its own until the
    /// first drain, and the queue stays one allocation. Values in a queue
    /// whose receiver is never made are dropped with the queue.
    ///
    /// ```
    /// let tx = stepsched_mpsc::Sender::without_receiver();
    /// tx.push(1).unwrap();
    /// let mut rx = tx.take_receiver().expect("the first time");
    /// assert!(tx.take_receiver().is_none());
    /// let mut out = Vec::new();
    /// rx.drain_into(&mut out);
    /// assert_eq!(out, [1]);
    /// ```
    pub fn without_receiver() -> Self {
        Sender {
            shared: Shared::new(false),
            generation: 0,
        }
    }

    /// The queue's receiver, the first time it is asked for on a queue made
    /// by [`without_receiver`](Self::without_receiver); `None` after that,
    /// and always for a queue made with its receiver ([`Receiver::new`],
    /// [`channel`]). The receiver starts where the queue started: every
    /// value pushed so far is drained by it.
    pub fn take_receiver(&self) -> Option<Receiver<T>> {
        // Relaxed: the swap's atomicity alone makes one caller the maker.
        // The receiver reads only what the queue's construction wrote
        // (ordered before us by however this sender reached us) and what
        // producers publish through the slots' states, as for any drain.
        if self.shared.receiver_made.swap(true, Ordering::Relaxed) {
            return None;
        }
        Some(Receiver::attach(Arc::clone(&self.shared)))
    }

    /// The sender as a raw pointer to its queue, for an owner that keeps
    /// the queue in an atomic word: aligned to at least 8, so the low
    /// three bits are free for the owner's tags. The sender's reference to
    /// the queue goes with the pointer; [`from_raw`](Self::from_raw) takes
    /// it back.
    ///
    /// # Panics
    ///
    /// If the sender is bound to a generation other than the first (the
    /// raw form does not keep it: `from_raw` binds to generation 0).
    pub fn into_raw(self) -> NonNull<()> {
        assert_eq!(
            self.generation, 0,
            "Sender::into_raw: only a sender of generation 0 has a raw form"
        );
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so its reference to the queue
        // moves into the pointer.
        let shared = unsafe { ptr::read(&this.shared) };
        NonNull::new(Arc::into_raw(shared).cast_mut().cast()).expect("an Arc is not null")
    }

    /// A sender bound to generation 0, from [`into_raw`](Self::into_raw).
    ///
    /// # Safety
    ///
    /// `raw` came from `Sender::<T>::into_raw` (the same `T`), and each such
    /// pointer is taken back at most once. (To borrow a sender without
    /// taking the reference back, wrap the result in
    /// `core::mem::ManuallyDrop` and never drop it.)
    pub unsafe fn from_raw(raw: NonNull<()>) -> Self {
        Sender {
            // SAFETY: the caller's contract: a pointer from `Arc::into_raw`
            // of a `Shared<T>`, whose reference we take back.
            shared: unsafe { Arc::from_raw(raw.as_ptr().cast::<Shared<T>>().cast_const()) },
            generation: 0,
        }
    }

    /// Pushes `value`, or hands it back if the queue is closed or has been
    /// reset since this sender was made.
    ///
    /// Lock-free: one load and one `fetch_add` on the tail word, a walk of
    /// usually zero blocks, a write and a store; once every 8 pushes a
    /// block is linked (recycled, or allocated when none is spare).
    ///
    /// ```
    /// use stepsched_mpsc::{channel, PushError};
    ///
    /// let (tx, mut rx) = channel();
    /// assert!(tx.push(1).is_ok());
    /// rx.reset(&mut Vec::new());
    /// assert_eq!(tx.push(2), Err(PushError::StaleGeneration(2)));
    /// assert!(rx.sender().push(3).is_ok());
    /// ```
    #[inline]
    pub fn push(&self, value: T) -> Result<(), PushError<T>> {
        self.push_with(|| value)
    }

    /// Pushes the value `make` returns, as [`push`](Self::push) pushes
    /// `value`. `make` is called exactly once (also when the push is
    /// refused: the value is then handed back); an inlined `make` lets the
    /// compiler build the value in its slot instead of building it
    /// elsewhere and copying it.
    ///
    /// # Panics
    ///
    /// If `make` panics, the panic goes on to the caller and nothing is
    /// pushed: the slot the push had claimed is marked empty, and drains,
    /// later pushes and [`Receiver::reset`] go on past it as if the push
    /// had been refused.
    ///
    /// `make` must not call [`Receiver::reset`] on this same queue once the
    /// push is accepted: the reset would wait for this very push to finish,
    /// so it panics instead, before changing anything, and that panic
    /// unwinds through `make` as above. (When the push is refused, `make`
    /// runs with no slot claimed and may reset the queue.)
    ///
    /// ```
    /// let (tx, mut rx) = stepsched_mpsc::channel();
    /// tx.push_with(|| [7u64; 4]).unwrap();
    /// let mut out = Vec::new();
    /// rx.drain_into(&mut out);
    /// assert_eq!(out, [[7; 4]]);
    /// ```
    #[inline]
    pub fn push_with(&self, make: impl FnOnce() -> T) -> Result<(), PushError<T>> {
        if let Some(refusal) = Refusal::of_status(self.shared.status(), self.generation) {
            return Err(refusal.with(make()));
        }
        self.claim_and_write(make)
    }

    /// As [`push_with`](Self::push_with), without the pre-check: the claim
    /// alone decides. A push refused by the claim (the queue closed, or
    /// reset since this sender was made) hands the value back as usual,
    /// but it has claimed an index and leaves a tombstone there, which
    /// the consumer skips; a sender that kept pushing into a closed queue
    /// this way would grow it without bound.
    ///
    /// For an owner that stops its senders itself before it closes the
    /// queue, so that only a push racing the close gets this far (a
    /// scheduler that seals a process's queue before the process ends):
    /// it saves the pre-check's load, a cache line apart from `tail`.
    ///
    /// ```
    /// use stepsched_mpsc::{channel, PushError};
    ///
    /// let (tx, mut rx) = channel();
    /// assert!(tx.push_with_claim_only(|| 1).is_ok());
    /// rx.close();
    /// assert_eq!(tx.push_with_claim_only(|| 2), Err(PushError::Closed(2)));
    /// // The refused push claimed an index (a tombstone the drain skips).
    /// assert_eq!(tx.queued(), 2);
    /// let mut out = Vec::new();
    /// rx.drain_into(&mut out);
    /// assert_eq!(out, [1]);
    /// ```
    #[inline]
    pub fn push_with_claim_only(&self, make: impl FnOnce() -> T) -> Result<(), PushError<T>> {
        self.claim_and_write(make)
    }

    /// The part of `push` after the pre-check: claims an index and writes
    /// the value, or a tombstone if the claim says the push is refused.
    #[inline(always)]
    fn claim_and_write(&self, value: impl FnOnce() -> T) -> Result<(), PushError<T>> {
        let shared = &*self.shared;
        // Acquire: pairs with the Release `fetch_add(0)` of the release
        // protocol (`Shared::find_block`).
        let claim = shared.tail.fetch_add(ONE_CLAIM, Ordering::Acquire);
        let index = index_of(claim);
        let block = shared.find_block(index);
        let offset = index & OFFSET_MASK;
        // SAFETY: `find_block` returns the live block holding our claimed,
        // still unwritten index.
        let block = unsafe { block.as_ref() };
        match Refusal::of(claim, self.generation) {
            None => {
                let queue = Arc::as_ptr(&self.shared).cast();
                // SAFETY: we claimed this slot; it is ours alone to write.
                // While `value` runs, a `reset` of this queue on this thread
                // would wait for the slot forever: `Making` makes it panic.
                unsafe { block.write(offset, || Making::run(queue, value)) };
                Ok(())
            }
            Some(refusal) => {
                block.tombstone(offset);
                Err(refusal.with(value()))
            }
        }
    }

    /// The generation this sender is bound to.
    pub fn generation(&self) -> Generation {
        Generation(self.generation)
    }

    /// How many values wait in the queue: pushes claimed and not yet taken
    /// by the consumer. A snapshot, for flow control and monitoring: pushes
    /// in progress count (a refused one until the consumer skips it), and
    /// the consumer's position is published at the end of each drain, so
    /// values taken by a drain still running count too. Two loads, no
    /// write.
    ///
    /// ```
    /// let rx = stepsched_mpsc::Receiver::new();
    /// let tx = rx.sender();
    /// tx.push(1).unwrap();
    /// tx.push(2).unwrap();
    /// assert_eq!(tx.queued(), 2);
    /// # let mut rx = rx;
    /// let mut out = Vec::new();
    /// rx.drain_into(&mut out);
    /// assert_eq!(tx.queued(), 0);
    /// ```
    pub fn queued(&self) -> usize {
        // Relaxed (both): a snapshot that orders nothing; a stale consumer
        // index only overstates the backlog, and one newer than the tail we
        // read is clamped to zero.
        let claimed = index_of(self.shared.tail.load(Ordering::Relaxed));
        let taken = self.shared.consumer_index.load(Ordering::Relaxed);
        let queued = claimed.wrapping_sub(taken) as i32;
        usize::try_from(queued).unwrap_or(0)
    }

    /// Whether a push would be refused now (closed, or another generation).
    pub fn is_closed(&self) -> bool {
        Refusal::of_status(self.shared.status(), self.generation).is_some()
    }
}

/// An accepted push whose `make` is running on this thread: its slot of
/// `queue` is claimed and waits for the value, so a [`Receiver::reset`] of
/// `queue` on this thread would wait forever. While `make` runs, the record
/// is on the stack of [`Making::run`], linked from the thread-local
/// `primitive::local` pointer, innermost first.
struct Making {
    /// The queue's `Shared`, as an address (only compared).
    queue: *const (),
    /// The enclosing record of this thread (an outer push's `make` running
    /// this push), or null.
    outer: *const Making,
}

impl Making {
    /// Runs `make` with a record for `queue` linked as this thread's
    /// innermost one, unlinked when `make` returns or unwinds.
    #[inline(always)]
    fn run<T>(queue: *const (), make: impl FnOnce() -> T) -> T {
        /// Restores the thread's list, also on unwind.
        struct Unlink(*const Making);

        impl Drop for Unlink {
            #[inline(always)]
            fn drop(&mut self) {
                local::set_making(self.0.cast());
            }
        }

        let this = Making {
            queue,
            outer: local::making().cast(),
        };
        local::set_making(ptr::from_ref(&this).cast());
        // Declared after `this`, so dropped (unlinking it) before it.
        let _unlink = Unlink(this.outer);
        make()
    }

    /// Whether this thread is running the `make` of an accepted push into
    /// `queue`.
    #[cold]
    fn is_running_for(queue: *const ()) -> bool {
        let mut record = local::making().cast::<Making>();
        while !record.is_null() {
            // SAFETY: every record in this thread's list is on the stack of a
            // `Making::run` still running on this thread: each unlinks itself
            // before its frame ends, on return or unwind.
            let r = unsafe { &*record };
            if r.queue == queue {
                return true;
            }
            record = r.outer;
        }
        false
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Sender {
            shared: Arc::clone(&self.shared),
            generation: self.generation,
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender")
            .field("generation", &self.generation)
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// Where drained values go.
trait Sink<T> {
    /// Takes the value out of slot `offset` of `block`.
    ///
    /// # Safety
    /// As for [`Block::drop_value`].
    unsafe fn take(&mut self, block: &Block<T>, offset: u32);
}

impl<T> Sink<T> for Vec<T> {
    #[inline(always)]
    unsafe fn take(&mut self, block: &Block<T>, offset: u32) {
        if self.len() == self.capacity() {
            self.reserve(1);
        }
        let len = self.len();
        // SAFETY: the slot's contract is the caller's; the spare capacity
        // at `len` is writable and uninitialised, and once written it is
        // an initialised element, so the length may cover it.
        unsafe {
            block.read_into(offset, self.as_mut_ptr().add(len));
            self.set_len(len + 1);
        }
    }
}

/// Drops what it is given.
struct Discard;

impl<T> Sink<T> for Discard {
    #[inline]
    unsafe fn take(&mut self, block: &Block<T>, offset: u32) {
        // SAFETY: the caller's contract.
        unsafe { block.drop_value(offset) };
    }
}

/// The consumer handle: the only place values come out of the queue.
///
/// There is exactly one receiver per queue; it is `Send` but not `Sync`, and
/// every method that takes values out needs `&mut self`, so two concurrent
/// consumers cannot exist.
///
/// ```compile_fail
/// fn shared_between_threads<T: Sync>() {}
/// shared_between_threads::<stepsched_mpsc::Receiver<u32>>();
/// ```
pub struct Receiver<T> {
    /// The queue; the consumer's state lives in it ([`Shared::consumer`]),
    /// so the receiver is one pointer and the queue one allocation.
    shared: Arc<Shared<T>>,
    /// Not `Sync`: the consumer state is reached through a shared `Arc`.
    _not_sync: PhantomData<*mut ()>,
}

/// What only the consumer reads and writes: where it is in the list and
/// what it has decided. Kept in the queue's shared state, on the
/// consumer's lines (see [`Shared`]), and reached through the unique
/// [`Receiver`].
struct Consumer<T> {
    /// The queue this state belongs to (it lives inside it).
    shared: SharedRef<T>,
    /// The index at which this receiver closed the queue, while closed.
    closed_at: Option<u32>,
    generation: u32,
    /// Spare slots to keep: the largest burst taken since the last reset,
    /// at least [`MIN_SPARE_SLOTS`] and at most [`MAX_SPARE_SLOTS`].
    spare_slots: u32,
    /// Slots taken since a drain last stopped at a slot not ready: the
    /// backlog being worked through, when a caller drains it in bounded
    /// chunks (`drain_up_to`).
    burst: u32,
    /// The block holding `index`, or the one before it (when `index` has
    /// just moved past the end of `head` and the next block is not linked).
    head: NonNull<Block<T>>,
    /// The oldest block not recycled yet (at or before `head`).
    free_head: NonNull<Block<T>>,
    /// The block this receiver appended last when recycling, while it has
    /// not been recycled again: where the end of the list is searched from.
    spare_tail: Option<NonNull<Block<T>>>,
    /// `head`'s start index (cached: the consumer is its only reader).
    head_start: u32,
    /// The next index to take.
    index: u32,
    /// `head`'s lap (cached like `head_start`: only this receiver changes
    /// it, when it recycles the block), so `has_events` is one atomic load.
    head_lap: u8,
}

/// A pointer from the consumer's state to the queue that holds it.
struct SharedRef<T>(NonNull<Shared<T>>);

impl<T> core::ops::Deref for SharedRef<T> {
    type Target = Shared<T>;

    #[inline(always)]
    fn deref(&self) -> &Shared<T> {
        // SAFETY: the state lives inside the queue it points to, so the
        // queue outlives every use of the pointer.
        unsafe { self.0.as_ref() }
    }
}

// SAFETY: the receiver owns the consumer side outright (the consumer state
// and the blocks only the consumer recycles); moving it to another thread
// moves that ownership. Values it takes out cross threads, hence `T: Send`.
unsafe impl<T: Send> Send for Receiver<T> {}

impl<T> Default for Receiver<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Receiver<T> {
    /// Creates an open, empty queue of generation 0 and returns its
    /// receiver; senders come from [`Receiver::sender`].
    pub fn new() -> Self {
        Self::attach(Shared::new(true))
    }

    /// The receiver of a queue whose receiver is made now (the consumer's
    /// state was set up with the queue).
    fn attach(shared: Arc<Shared<T>>) -> Self {
        Receiver {
            shared,
            _not_sync: PhantomData,
        }
    }

    /// The receiver as a raw pointer to its queue, like
    /// [`Sender::into_raw`] (the same address as any sender's raw form):
    /// for an owner that keeps the queue, both ends, in one atomic word.
    /// [`from_raw`](Self::from_raw) takes the receiver back.
    pub fn into_raw(self) -> NonNull<()> {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so its reference to the queue
        // moves into the pointer.
        let shared = unsafe { ptr::read(&this.shared) };
        NonNull::new(Arc::into_raw(shared).cast_mut().cast()).expect("an Arc is not null")
    }

    /// The receiver, from [`into_raw`](Self::into_raw).
    ///
    /// # Safety
    ///
    /// `raw` came from `Receiver::<T>::into_raw` (the same `T`), and each
    /// such pointer is taken back at most once. To borrow the receiver
    /// without taking it back, wrap the result in `core::mem::ManuallyDrop`
    /// and never drop it; a borrowed receiver must then be the only one in
    /// use (there is one receiver per queue).
    pub unsafe fn from_raw(raw: NonNull<()>) -> Self {
        // SAFETY: the caller's contract: a pointer from `Arc::into_raw` of a
        // `Shared<T>`, whose reference we take back.
        Self::attach(unsafe { Arc::from_raw(raw.as_ptr().cast::<Shared<T>>().cast_const()) })
    }

    /// A sender bound to the current generation.
    pub fn sender(&self) -> Sender<T> {
        Sender {
            shared: Arc::clone(&self.shared),
            generation: self.consumer().generation,
        }
    }

    /// The current generation.
    pub fn generation(&self) -> Generation {
        Generation(self.consumer().generation)
    }

    /// Whether this receiver has closed the queue (until the next reset).
    pub fn is_closed(&self) -> bool {
        self.consumer().closed_at.is_some()
    }

    /// Whether [`drain_into`](Self::drain_into) would return at least one
    /// value now. One atomic load in the common case, so it can be called
    /// after every step.
    ///
    /// A value whose push completed but that sits behind a push still in
    /// progress is not reported (nor drained) until that push completes.
    #[inline]
    pub fn has_events(&self) -> bool {
        self.consumer().has_events()
    }

    /// `!has_events()`.
    #[inline]
    pub fn is_empty(&self) -> bool {
        !self.has_events()
    }

    /// Moves every value pushed so far into `out` (appending, so the
    /// caller's buffer and its capacity are reused), in claim order, which
    /// keeps each producer's push order. Returns how many were moved.
    ///
    /// It stops at the first push that has claimed its place but not yet
    /// finished writing; that value and the ones after it are returned by a
    /// later call once the push completes.
    ///
    /// ```
    /// let (tx, mut rx) = stepsched_mpsc::channel();
    /// let mut buf = Vec::with_capacity(64);
    /// for i in 0..3 {
    ///     tx.push(i).unwrap();
    /// }
    /// assert_eq!(rx.drain_into(&mut buf), 3);
    /// assert_eq!(buf, [0, 1, 2]);
    /// buf.clear(); // capacity kept for the next drain
    /// assert_eq!(rx.drain_into(&mut buf), 0);
    /// ```
    pub fn drain_into(&mut self, out: &mut Vec<T>) -> usize {
        self.consumer_mut().drain_to(out, u32::MAX)
    }

    /// Like [`drain_into`](Self::drain_into), but moves at most `max`
    /// values; the rest stay queued for a later call. Returns how many were
    /// moved: fewer than `max` means the queue held no more ready values
    /// when the drain stopped.
    ///
    /// A consumer that handles events in bounded batches uses it to bound
    /// both the buffer and the time until it looks elsewhere.
    ///
    /// ```
    /// let (tx, mut rx) = stepsched_mpsc::channel();
    /// for i in 0..5 {
    ///     tx.push(i).unwrap();
    /// }
    /// let mut buf = Vec::new();
    /// assert_eq!(rx.drain_up_to(&mut buf, 3), 3);
    /// assert_eq!(buf, [0, 1, 2]);
    /// assert_eq!(rx.drain_up_to(&mut buf, 3), 2);
    /// assert_eq!(buf, [0, 1, 2, 3, 4]);
    /// ```
    pub fn drain_up_to(&mut self, out: &mut Vec<T>, max: usize) -> usize {
        self.consumer_mut()
            .drain_to(out, u32::try_from(max).unwrap_or(u32::MAX))
    }

    /// Closes the queue: every later push of this generation is refused with
    /// [`PushError::Closed`] (its value handed back). Values pushed before
    /// the close stay in the queue and can still be drained. Idempotent.
    ///
    /// A push racing `close` is either accepted (and drained later) or
    /// refused with its value handed back; it is never lost.
    pub fn close(&mut self) {
        self.consumer_mut().close()
    }

    /// Ends the current generation and reopens the queue for the next one.
    ///
    /// Closes the queue if it is open, waits for the pushes accepted before
    /// the close that are still writing (each is a few of its own
    /// instructions from done), moves every value of the ending generation
    /// into `leftovers`, then bumps the generation and reopens. Returns the
    /// new generation; get senders for it from [`Receiver::sender`].
    ///
    /// A push with an older generation that races the reset is either
    /// accepted before the close and then returned in `leftovers`, or
    /// refused with its value handed back; it is never drained in the new
    /// generation.
    ///
    /// ```
    /// use stepsched_mpsc::{channel, PushError};
    ///
    /// let (old, mut rx) = channel();
    /// old.push('a').unwrap();
    /// let mut leftovers = Vec::new();
    /// let g = rx.reset(&mut leftovers);
    /// assert_eq!(leftovers, ['a']);
    /// assert_eq!(g.get(), 1);
    /// assert_eq!(old.push('b'), Err(PushError::StaleGeneration('b')));
    /// ```
    ///
    /// # Panics
    ///
    /// If called from the `make` closure of an accepted
    /// [`Sender::push_with`] into this same queue (directly or from a
    /// nested push's `make`): that push would never finish while the reset
    /// waits for it, so the reset panics instead, before closing or taking
    /// anything. The panic unwinds through `make`, which leaves that push's
    /// slot empty (see [`Sender::push_with`]).
    pub fn reset(&mut self, leftovers: &mut Vec<T>) -> Generation {
        self.consumer_mut().reset(leftovers)
    }

    /// The consumer's state, read.
    #[inline(always)]
    fn consumer(&self) -> &Consumer<T> {
        // SAFETY: only the unique receiver reaches the state (it is not
        // `Sync`, and a `&mut self` method never runs beside this borrow).
        unsafe { &*self.shared.consumer_ptr() }
    }

    /// The consumer's state, for a method that takes values out.
    #[inline(always)]
    fn consumer_mut(&mut self) -> &mut Consumer<T> {
        // SAFETY: as in `consumer`, and `&mut self` excludes every other
        // borrow of it.
        unsafe { &mut *self.shared.consumer_ptr() }
    }
}

impl<T> Consumer<T> {
    #[inline]
    fn has_events(&self) -> bool {
        let offset = self.index & OFFSET_MASK;
        let (ready, tomb) = if self.head_start == start_of(self.index) {
            // The common case: one load, the slot's state.
            // SAFETY: `head` is live (only this receiver recycles, and only
            // blocks before `head`).
            unsafe { self.head.as_ref() }.slot_state_in_lap(offset, self.head_lap)
        } else {
            // SAFETY: as above.
            // Acquire: pairs with the Release CAS that linked the block.
            match unsafe { self.head.as_ref() }.next(Ordering::Acquire) {
                // SAFETY: the block right after `head`: live, as above.
                Some(next) => unsafe { next.as_ref() }.slot_state(offset),
                None => return false,
            }
        };
        if !ready {
            false
        } else if !tomb {
            true
        } else {
            self.has_events_past_tombstones()
        }
    }

    /// The rare path of `has_events`: looks past tombstones (pushes refused
    /// while racing a close or a reset) without taking anything.
    #[cold]
    fn has_events_past_tombstones(&self) -> bool {
        let mut block = self.head;
        let mut index = self.index;
        loop {
            // SAFETY: blocks from `head` on are live (only this receiver
            // recycles, behind `head`).
            let b = unsafe { block.as_ref() };
            if b.start() != start_of(index) {
                // Acquire: pairs with the Release CAS that linked it.
                match b.next(Ordering::Acquire) {
                    Some(next) => {
                        block = next;
                        continue;
                    }
                    None => return false,
                }
            }
            match b.slot_state(index & OFFSET_MASK) {
                (false, _) => return false,
                (true, false) => return true,
                (true, true) => index = index.wrapping_add(1),
            }
        }
    }

    /// Moves ready values into `sink`, at most `max` of them (tombstones
    /// are skipped and do not count).
    #[inline]
    fn drain_to(&mut self, sink: &mut impl Sink<T>, max: u32) -> usize {
        let mut taken = 0;
        let first = self.index;
        let mut left = max;
        // One slot at a time, in index order: a value is taken as soon as
        // its state says ready, and the first slot not ready (claimed and
        // still being written, or not claimed yet) ends the drain.
        while left > 0 && self.advance_head() {
            // SAFETY: `head` is live (see `has_events`).
            let block = unsafe { self.head.as_ref() };
            let offset = self.index & OFFSET_MASK;
            let (ready, tomb) = block.slot_state_in_lap(offset, self.head_lap);
            if !ready {
                break;
            }
            // Advance first, so a panicking sink cannot make us take the
            // same slot twice.
            self.index = self.index.wrapping_add(1);
            if !tomb {
                // SAFETY: ready (Acquire load in `slot_state_in_lap`), not a
                // tombstone, and not taken before (`index` only grows).
                unsafe { sink.take(block, offset) };
                taken += 1;
                left -= 1;
            }
        }
        // Only when `head` has moved on is there a block behind it.
        if self.free_head != self.head {
            self.reclaim();
        }
        // Keep a burst's worth of slots as spares: producers fill that much
        // while the consumer is away. A burst drained in bounded chunks
        // counts whole: sized by one chunk, the spares would fall short of
        // every burst, and each burst would allocate blocks on the
        // producers' side that the consumer frees again when it recycles
        // them (a malloc and a free on two threads, per block, per burst).
        let drained = self.index.wrapping_sub(first);
        let burst = self.burst.saturating_add(drained);
        if burst > self.spare_slots {
            // Never below the current value: it is at most the cap.
            self.spare_slots = burst.min(MAX_SPARE_SLOTS);
        }
        // Stopped by `max`: the burst may go on in the next drain.
        self.burst = if left == 0 { burst } else { 0 };
        // Relaxed: read only by the span check, where staleness is harmless.
        self.shared
            .consumer_index
            .store(self.index, Ordering::Relaxed);
        taken
    }

    /// Moves `head` to the block holding `index`; false if it is not linked
    /// yet (then nothing is ready there either).
    #[inline]
    fn advance_head(&mut self) -> bool {
        let target = start_of(self.index);
        while self.head_start != target {
            // SAFETY: `head` is live (see `has_events`).
            // Acquire: pairs with the Release CAS that linked the block.
            match unsafe { self.head.as_ref() }.next(Ordering::Acquire) {
                Some(next) => {
                    self.head = next;
                    // SAFETY: linked after `head`, so live.
                    self.head_start = unsafe { next.as_ref() }.start();
                    // SAFETY: as above.
                    self.head_lap = unsafe { next.as_ref() }.lap();
                }
                None => return false,
            }
        }
        true
    }

    /// Recycles the blocks behind `head` that no producer can reach any more
    /// (step 3 of the release protocol).
    #[inline(never)]
    fn reclaim(&mut self) {
        while self.free_head != self.head {
            let block = self.free_head;
            // SAFETY: not recycled yet, so live.
            let b = unsafe { block.as_ref() };
            match b.observed_tail() {
                Some(observed) if reached(self.index, observed) => {}
                _ => return,
            }
            // Relaxed: `head` moved past this block, so we already loaded
            // this `next` with Acquire, and it cannot change while linked.
            let next = b
                .next(Ordering::Relaxed)
                .expect("a block before head has a next block");
            self.free_head = next;
            // SAFETY: released at `observed` and our index reached it: no
            // producer can reach the block, and all its values are taken.
            unsafe { self.recycle(block) };
        }
    }

    /// Resets a finished block and appends it after the end of the list,
    /// where producers find it already linked; frees it instead when the
    /// list already holds `spare_slots` slots beyond the newest claim.
    ///
    /// # Safety
    /// No producer can reach `block` (release protocol) and all its values
    /// have been taken.
    unsafe fn recycle(&mut self, block: NonNull<Block<T>>) {
        if self.spare_tail == Some(block) {
            self.spare_tail = None;
        }
        // SAFETY: unreachable by anyone else (caller).
        unsafe { block.as_ref().reset() };
        // Acquire: as in `find_block`.
        let hint = NonNull::new(self.shared.hint.load(Ordering::Acquire)).expect("hint is set");
        // The hint is (about) the newest block producers have reached: it
        // sizes the spares from one load of the claims' line, once per
        // block recycled.
        // SAFETY: the hint block is live for us: only this receiver recycles.
        let frontier = unsafe { hint.as_ref() }.start();
        // The end of the list is usually right after the block we appended
        // last; otherwise search from the hint.
        let mut curr = self.spare_tail.unwrap_or(hint);
        loop {
            // SAFETY: `curr` is the hint or a block after it, or a block we
            // appended and have not recycled since (or one after it). Only
            // this receiver recycles, and only blocks behind `head` that the
            // hint has moved past, in list order; so `curr` is live.
            let c = unsafe { curr.as_ref() };
            if c.start().wrapping_sub(frontier) as i32 >= self.spare_slots as i32 {
                // SAFETY: never linked again, so still private; values taken.
                unsafe { self.shared.free_block(block) };
                return;
            }
            match c.try_push(block) {
                Ok(()) => {
                    self.spare_tail = Some(block);
                    return;
                }
                Err(next) => curr = next,
            }
        }
    }

    fn close(&mut self) {
        self.close_index();
    }

    /// Closes the queue if needed and returns the index at which it closed.
    fn close_index(&mut self) -> u32 {
        if let Some(at) = self.closed_at {
            return at;
        }
        // Relaxed: only this RMW's place in `tail`'s modification order
        // matters (claims before it are accepted, claims after it refused).
        let word = self.shared.tail.fetch_or(CLOSED, Ordering::Relaxed);
        debug_assert_eq!(word & CLOSED, 0, "only the receiver closes");
        self.shared.set_status(word as u32 | CLOSED as u32);
        let at = index_of(word);
        self.closed_at = Some(at);
        at
    }

    fn reset(&mut self, leftovers: &mut Vec<T>) -> Generation {
        if Making::is_running_for(self.shared.0.as_ptr().cast_const().cast()) {
            reset_inside_make();
        }
        let closed_at = self.close_index();
        let mut step = 0;
        loop {
            self.drain_to(leftovers, u32::MAX);
            if reached(self.index, closed_at) {
                break;
            }
            snooze(&mut step);
        }
        let generation = (self.generation + 1) & GEN_MASK;
        // Relaxed: the CAS below validates it.
        let mut seen = self.shared.tail.load(Ordering::Relaxed);
        loop {
            let reopened = (seen & !LOW_HALF) | u64::from(generation << 1);
            // Release: a push accepted in the new generation reads this value
            // (or a later one of its release sequence), so the drain of the
            // old generation happens before it. Relaxed on failure: we retry.
            match self.shared.tail.compare_exchange_weak(
                seen,
                reopened,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => seen = actual,
            }
        }
        self.shared.set_status(generation << 1);
        self.generation = generation;
        self.closed_at = None;
        // The next generation starts with the minimum of spares again; the
        // surplus is freed as it comes round.
        self.spare_slots = MIN_SPARE_SLOTS;
        self.burst = 0;
        Generation(generation)
    }
}

/// The panic of a `reset` that would wait for the push running it.
#[cold]
#[inline(never)]
fn reset_inside_make() -> ! {
    panic!(
        "Receiver::reset called inside the `make` of an accepted Sender::push_with \
         into the same queue: it would wait for that push forever"
    );
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        /// Hands the consumer's position to `Shared::drop` even if a value's
        /// destructor panics below.
        struct Handover<'a, T>(&'a mut Receiver<T>);

        impl<T> Drop for Handover<'_, T> {
            fn drop(&mut self) {
                let consumer = self.0.consumer_mut();
                let state = (consumer.free_head, consumer.index);
                // SAFETY: only the unique receiver writes `orphan`, once,
                // here; `Shared::drop` reads it after the last `Arc` is gone.
                self.0
                    .shared
                    .orphan
                    .with_mut(|p| unsafe { *p = Some(state) });
            }
        }

        self.close();
        let handover = Handover(self);
        // Values already pushed are dropped now rather than when the last
        // sender goes; pushes still in progress are dropped by `Shared`.
        handover.0.consumer_mut().drain_to(&mut Discard, u32::MAX);
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("generation", &self.consumer().generation)
            .field("closed", &self.is_closed())
            .field("has_events", &self.has_events())
            .finish()
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;

    /// The layout `LINE` argues for: the four groups of shared fields at
    /// least a line apart, and nothing over-aligned (so no allocation of
    /// the queue goes through `memalign`).
    #[test]
    fn shared_groups_are_a_line_apart_and_nothing_is_over_aligned() {
        use core::mem::{align_of, offset_of};
        type S = Shared<u64>;
        // `tail` first (16-aligned after the `Arc`'s two counts), the hint in
        // the same 16 bytes: one line, whatever the allocation's address.
        assert_eq!(offset_of!(S, tail), 0);
        assert_eq!(offset_of!(S, hint), 8);
        assert!(offset_of!(S, status) - offset_of!(S, hint) >= LINE);
        assert!(offset_of!(S, consumer_index) - offset_of!(S, status) >= LINE);
        let consumer_end = offset_of!(S, consumer) + size_of::<UnsafeCell<Consumer<u64>>>();
        assert!(offset_of!(S, first) + 8 - consumer_end >= LINE);
        assert!(align_of::<S>() <= 16, "Shared is over-aligned");
        assert!(align_of::<Block<u64>>() <= 16, "Block is over-aligned");
        assert!(
            offset_of!(S, first) <= 5 * LINE,
            "Shared's fields before the first block grew: {}",
            offset_of!(S, first)
        );
        assert_eq!(
            size_of::<Receiver<u64>>(),
            size_of::<usize>(),
            "a receiver is one pointer"
        );
    }

    /// Refused claims (a push that passed the pre-check but lost the race
    /// with close or reset) leave tombstones; made deterministic here by
    /// skipping the pre-check.
    #[test]
    fn tombstones_are_skipped_by_drain_and_has_events() {
        let (tx, mut rx) = channel::<u32>();
        tx.push(1).unwrap();
        rx.close();
        // Racing pushes refused by the claim itself: tombstones after `1`.
        for v in 0..3 {
            assert_eq!(tx.claim_and_write(|| v), Err(PushError::Closed(v)));
        }
        assert!(rx.has_events());
        let mut out = Vec::new();
        assert_eq!(rx.drain_into(&mut out), 1);
        assert_eq!(out, [1]);
        // Only tombstones ahead: nothing to report or drain.
        assert!(!rx.has_events());
        assert_eq!(rx.drain_into(&mut out), 0);

        let mut leftovers = Vec::new();
        rx.reset(&mut leftovers);
        assert!(leftovers.is_empty());
        let new = rx.sender();
        // A stale claim landing after the reopen: a tombstone in the new
        // generation, in front of a real value.
        assert_eq!(tx.claim_and_write(|| 9), Err(PushError::StaleGeneration(9)));
        assert!(!rx.has_events());
        new.push(2).unwrap();
        // `has_events` looks past the tombstone at the head.
        assert!(rx.has_events());
        out.clear();
        assert_eq!(rx.drain_into(&mut out), 1);
        assert_eq!(out, [2]);
        assert!(!rx.has_events());
    }

    /// Many tombstones spanning blocks, behind which a value waits.
    #[test]
    fn has_events_looks_past_tombstones_across_blocks() {
        let (tx, mut rx) = channel::<u32>();
        rx.close();
        for v in 0..(3 * BLOCK_CAP + 5) {
            assert!(tx.claim_and_write(|| v).is_err());
        }
        let mut leftovers = Vec::new();
        rx.reset(&mut leftovers);
        assert!(!rx.has_events());
        rx.sender().push(7).unwrap();
        assert!(rx.has_events());
        let mut out = Vec::new();
        rx.drain_into(&mut out);
        assert_eq!(out, [7]);
    }

    #[test]
    fn tail_word_layout() {
        let word = (u64::from(5u32) << 32) | (u64::from(3u32) << 1) | CLOSED;
        assert_eq!(index_of(word), 5);
        assert_eq!(gen_of(word), 3);
        assert!(matches!(Refusal::of(word, 3), Some(Refusal::Closed)));
        assert!(matches!(Refusal::of(word, 2), Some(Refusal::Stale)));
        assert!(Refusal::of(word & !CLOSED, 3).is_none());
        // A claim at the top of the index space wraps without touching the
        // flags.
        let top = (u64::from(u32::MAX) << 32) | (u64::from(GEN_MASK) << 1);
        let next = top.wrapping_add(ONE_CLAIM);
        assert_eq!(index_of(next), 0);
        assert_eq!(gen_of(next), GEN_MASK);
        assert_eq!(next & CLOSED, 0);
    }
}
