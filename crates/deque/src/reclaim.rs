//! Reclamation of rings replaced by growth.
//!
//! Normally rings are retired to [`crossbeam_epoch`]: a thief pins the epoch
//! before it loads the ring pointer and stays pinned while it reads slots,
//! so a retired ring is freed only after every thief that could have loaded
//! it has unpinned.
//!
//! Under `--cfg stepsched_loom` crossbeam-epoch's own atomics are invisible
//! to loom, so retired rings are instead kept in the deque and freed when it
//! is dropped. Loom then still checks every access to every slot of every
//! ring; only the timing of the free differs.

use crate::Buffer;
use crate::Inner;

#[cfg(not(stepsched_loom))]
pub(crate) use crossbeam_epoch::Guard;

/// A pin of the current thread; rings loaded while it lives stay allocated.
#[cfg(not(stepsched_loom))]
#[inline]
pub(crate) fn pin() -> Guard {
    crossbeam_epoch::pin()
}

/// Frees `old` once no pinned thread can still read it.
///
/// # Safety
///
/// `old` came from `Buffer::alloc`, is no longer reachable through
/// `inner.buffer`, and is retired once.
#[cfg(not(stepsched_loom))]
pub(crate) unsafe fn retire<T>(_inner: &Inner<T>, old: *mut Buffer<T>) {
    let guard = crossbeam_epoch::pin();
    // Cast to an address so the closure is `Send` whatever `T` is: a ring
    // never drops items, so freeing it on another thread only frees memory.
    let addr = old as usize;
    // SAFETY: `old` is unlinked, so only threads pinned now can hold it;
    // the epoch defers the free until they have all unpinned. The closure
    // frees the box exactly once.
    unsafe {
        guard.defer_unchecked(move || drop(Box::from_raw(addr as *mut Buffer<T>)));
    }
    // Big rings are worth reclaiming soon rather than when the local bag
    // fills up.
    guard.flush();
}

/// Under loom there is nothing to pin: retired rings live until the deque
/// is dropped.
#[cfg(stepsched_loom)]
#[derive(Debug)]
pub(crate) struct Guard;

#[cfg(stepsched_loom)]
pub(crate) fn pin() -> Guard {
    Guard
}

/// Keeps `old` until the deque is dropped.
///
/// # Safety
///
/// As the std version; only the owner calls it.
#[cfg(stepsched_loom)]
pub(crate) unsafe fn retire<T>(inner: &Inner<T>, old: *mut Buffer<T>) {
    inner.retired.with_mut(|list| {
        // SAFETY: only the owner thread retires, and `Drop` has `&mut`.
        unsafe { (*list).push(old) }
    });
}
