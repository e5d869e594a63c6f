//! Reclamation of rings replaced by growth, through the claim protocol
//! itself: no epochs, nothing for a thief to pin.
//!
//! # Why the word is enough
//!
//! A thief reads a ring only while it holds a claim: it loads the ring
//! pointer after its claiming CAS and reads the claimed slots before its
//! Release store gives them back, so from its reservation to that release the
//! word's `flight` is non-zero (only the reserving thief takes `flight` back
//! to zero; pops copy it, and other thieves' CASes expect zero). At most one
//! thief holds it at a time, so "no thief is reading a ring" is a fact the
//! word states.
//!
//! When `grow` replaces ring `R` by `R'`, the owner stores `R'` (Release),
//! issues a SeqCst fence and loads the word (Acquire). If that load reads
//! `flight == 0`, `R` and every ring retired earlier are freed at once;
//! otherwise they are kept and tried again at the next growth (or freed
//! with the deque). Take any thief and the value `v` that load read:
//!
//! * `v` comes after the thief's release in the word's order. Every write
//!   of the word but a release is a read-modify-write, so `v` is either in
//!   the release sequence of the thief's release, or at or after a later
//!   thief's release, whose fence acquired the earlier one (its
//!   reservation CAS read a value of that sequence). Either way the Acquire
//!   load carries the thief's reads of any ring before the free.
//! * `v` comes before the thief's reservation. Then the owner's fence
//!   precedes the thief's in the single order of SeqCst fences (were it
//!   the other way, the load after the owner's fence would read the
//!   reservation, written before the thief's fence, or a later value). The
//!   thief loads the ring pointer after its own fence, so it reads the
//!   store of `R'` (written before the owner's fence) or a later one, never
//!   `R` or an older ring; and the Acquire load of that pointer makes the
//!   copied slots visible.
//! * `v` comes between the two: then `flight` in `v` is not zero, and
//!   nothing is freed.
//!
//! So a freed ring is never read again. (A thief may also load the pointer
//! of a ring it will never read: between a reservation and its claim
//! nothing is read, and a reservation that fails reads nothing at all.)
//!
//! The cost: a steal pays nothing for reclamation (an epoch pin cost about a
//! fifth of an uncontended `steal_half_into` before); a growth pays a fence
//! and a load. A ring replaced while a claim was in flight outlives its
//! growth until the next growth that finds none, or until the deque is
//! dropped: the rings kept so are each at most half of the one after them,
//! so together they take less memory than the live ring.
//!
//! # Under loom
//!
//! The same code runs, but a freed ring is only marked freed and kept until
//! the deque is dropped: every slot access first reads the mark through a
//! loom cell, so a read of a freed ring fails the model, either as a data
//! race with the marking (when the two are not ordered) or as a failed
//! assertion (when the read comes after it).

use crate::Buffer;
use crate::Head;
use crate::Inner;
use crate::primitive::sync::atomic::{Ordering, fence};

/// Called by the owner once `old` is unlinked from `inner.buffer` (by a
/// Release store of the new ring): frees `old` and the rings retired
/// before it if no thief is claiming, or keeps them for a later call.
///
/// # Safety
///
/// Only the owner calls this, after storing a new ring in `inner.buffer`;
/// `old` came from `Buffer::alloc`, is no longer stored there, and is
/// retired once.
pub(crate) unsafe fn retire<T>(inner: &Inner<T>, old: *mut Buffer<T>) {
    // SeqCst: pairs with the fence every thief issues after taking the
    // claim reservation (see the module docs): either our load below sees
    // its reservation, or its load of the ring pointer sees our new ring.
    fence(Ordering::SeqCst);
    // Acquire: synchronizes with the release heading the release sequence
    // the value belongs to (which carries every earlier release through the
    // thieves' fences), so their reads of any ring happen before a free.
    let head = Head(inner.head.load(Ordering::Acquire));
    inner.retired.with_mut(|list| {
        // SAFETY: only the owner touches the list (the caller's contract),
        // and `Inner::drop` has `&mut`.
        let list = unsafe { &mut *list };
        list.push(old);
        if head.flight() == 0 {
            for ring in list.drain(..) {
                // SAFETY: no thief can read `ring` any more (module docs),
                // it came from `Buffer::alloc`, and the list holds it once.
                unsafe { free(inner, ring) };
            }
        }
    });
}

/// Frees a ring no thread can read any more.
///
/// # Safety
///
/// `ring` came from `Buffer::alloc`, is freed once, and no thread reads it
/// from now on.
#[cfg(not(stepsched_loom))]
unsafe fn free<T>(_inner: &Inner<T>, ring: *mut Buffer<T>) {
    // SAFETY: the caller's contract.
    drop(unsafe { Box::from_raw(ring) });
}

/// Under loom: marks `ring` freed and keeps its memory until the deque is
/// dropped, so that a later read is caught rather than undefined.
///
/// # Safety
///
/// As the std version; only the owner calls it.
#[cfg(stepsched_loom)]
unsafe fn free<T>(inner: &Inner<T>, ring: *mut Buffer<T>) {
    // SAFETY: `ring` is still allocated (kept below until the drop).
    unsafe { (*ring).mark_freed() };
    inner.freed.with_mut(|list| {
        // SAFETY: only the owner touches the list.
        unsafe { (*list).push(ring) }
    });
}

/// Frees every ring the deque still keeps besides the live one: the
/// retired ones (and, under loom, the ones marked freed).
pub(crate) fn free_kept<T>(inner: &mut Inner<T>) {
    inner.retired.with_mut(|list| {
        // SAFETY: `&mut Inner`: no other access to the list.
        for ring in unsafe { (*list).drain(..) } {
            // SAFETY: retired rings came from `Buffer::alloc`, and with
            // `&mut Inner` no handle remains that could read them.
            drop(unsafe { Box::from_raw(ring) });
        }
    });
    #[cfg(stepsched_loom)]
    inner.freed.with_mut(|list| {
        // SAFETY: as above.
        for ring in unsafe { (*list).drain(..) } {
            // SAFETY: as above; each was marked freed once and kept here.
            drop(unsafe { Box::from_raw(ring) });
        }
    });
}
