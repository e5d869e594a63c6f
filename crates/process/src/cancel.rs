//! [`CancelToken`]: a one-way cancellation flag that allocates only when
//! it is shared.
//!
//! # Algorithm
//!
//! Most processes never clone their token, so the token does not start
//! with the `Arc<AtomicBool>` that clones share: its one word is a tagged
//! pointer in one of three states, and every transition is a single
//! compare-and-swap on it.
//!
//! * `UNSHARED` (null): no clone exists, not cancelled.
//! * `CANCELLED` (a sentinel no allocation can have): no clone exists,
//!   cancelled.
//! * anything else: `Arc::into_raw` of the flag every clone shares; the
//!   token owns one strong count of it.
//!
//! `cancel` moves `UNSHARED` to `CANCELLED`, or stores `true` into the
//! shared flag. `clone` first *shares*: it allocates a flag holding whether
//! the token was cancelled and installs it with a CAS from the state it
//! read (`UNSHARED` or `CANCELLED`); then it takes one more count. A
//! `cancel` racing a `clone` is ordered by the CAS: if `cancel` wins, the
//! sharer's CAS fails, it frees its flag and retries from `CANCELLED`
//! (making a flag that reads `true`); if the sharer wins, `cancel`'s CAS
//! fails and it finds the shared flag, where it stores `true`. Either way
//! every clone sees the cancellation. The word only ever moves from a
//! non-pointer state to a pointer, never back, and the pointed-to flag
//! lives as long as any token holding it, so no reader can see a freed
//! flag (no ABA, no reclamation scheme needed).
//!
//! The saving is one allocation and one free per process that is never
//! asked for a shared token; the schedulers' spawn path makes one token per
//! process.

use core::fmt;
use core::ptr::{self, NonNull};

use crate::primitive::sync::Arc;
use crate::primitive::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// No clone exists and the token is not cancelled.
const UNSHARED: *mut AtomicBool = ptr::null_mut();

/// No clone exists and the token is cancelled: address 1, where no
/// `Arc`'s value can be (it follows the two counts in its allocation).
fn cancelled_tag() -> *mut AtomicBool {
    NonNull::<AtomicBool>::dangling().as_ptr()
}

/// A shared, one-way cancellation flag: once [`cancel`](Self::cancel)led,
/// every clone reports [`is_cancelled`](Self::is_cancelled) forever.
///
/// The scheduler cancels it (at shutdown, or to stop one process); a process
/// polls it during long work. It complements, and does not replace, the
/// [`Event::cancel`](crate::Event::cancel) event, which wakes a waiting
/// process.
///
/// A token allocates nothing until it is first cloned: a process that only
/// polls its own token costs no allocation for it.
///
/// ```
/// use stepsched_process::CancelToken;
///
/// let token = CancelToken::new();
/// let seen_by_process = token.clone();
/// assert!(!seen_by_process.is_cancelled());
/// token.cancel();
/// assert!(seen_by_process.is_cancelled());
/// ```
pub struct CancelToken {
    /// `UNSHARED`, the cancelled tag, or a shared flag (see the module
    /// docs); only ever moves from one of the first two to the third.
    state: AtomicPtr<AtomicBool>,
}

impl CancelToken {
    /// A new, uncancelled token. It allocates nothing.
    ///
    /// ```
    /// use stepsched_process::CancelToken;
    ///
    /// assert!(!CancelToken::new().is_cancelled());
    /// ```
    pub fn new() -> Self {
        Self {
            state: AtomicPtr::new(UNSHARED),
        }
    }

    /// Cancels the token and all its clones. Idempotent.
    ///
    /// ```
    /// use stepsched_process::CancelToken;
    ///
    /// let t = CancelToken::new();
    /// t.cancel();
    /// t.cancel();
    /// assert!(t.is_cancelled());
    /// ```
    pub fn cancel(&self) {
        // Acquire: if this reads a shared flag, it synchronizes with the
        // Release CAS that installed it, so the flag's initialization is
        // visible before we store into it.
        let mut current = self.state.load(Ordering::Acquire);
        loop {
            if current == cancelled_tag() {
                return;
            }
            if current != UNSHARED {
                // SAFETY: a pointer state is `Arc::into_raw` of a flag of
                // which this token owns a count until it drops, which cannot
                // happen while `&self` is borrowed.
                let flag = unsafe { &*current };
                // Release: pairs with the Acquire load in `is_cancelled`,
                // so a process that sees the flag also sees what the
                // canceller wrote before cancelling (a reason, a deadline).
                flag.store(true, Ordering::Release);
                return;
            }
            // Release on success: as the store above, for a reader of this
            // token (and for a later sharer, whose CAS reads this value
            // with Acquire). Acquire on failure: as the first load.
            match self.state.compare_exchange_weak(
                UNSHARED,
                cancelled_tag(),
                Ordering::Release,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(now) => current = now,
            }
        }
    }

    /// Whether [`cancel`](Self::cancel) was called on this token or a clone.
    ///
    /// ```
    /// use stepsched_process::CancelToken;
    ///
    /// assert!(!CancelToken::new().is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        // Acquire: pairs with the Release CAS in `cancel` (the cancelled
        // tag) and in `share` (a flag, before we read it).
        let current = self.state.load(Ordering::Acquire);
        if current == UNSHARED {
            false
        } else if current == cancelled_tag() {
            true
        } else {
            // SAFETY: as in `cancel`: this token owns a count of the flag.
            let flag = unsafe { &*current };
            // Acquire: pairs with the Release store in `cancel`.
            flag.load(Ordering::Acquire)
        }
    }

    /// The flag clones share, installed on first use: `Arc::into_raw` of
    /// it, of which this token owns one count.
    fn share(&self) -> *mut AtomicBool {
        // Acquire: as in `cancel`.
        let mut current = self.state.load(Ordering::Acquire);
        loop {
            if current != UNSHARED && current != cancelled_tag() {
                return current;
            }
            let flag =
                Arc::into_raw(Arc::new(AtomicBool::new(current == cancelled_tag()))).cast_mut();
            // Release on success: publishes the flag's initialization to
            // every thread that reads the pointer with Acquire. Acquire on
            // failure: as the first load.
            match self
                .state
                .compare_exchange(current, flag, Ordering::Release, Ordering::Acquire)
            {
                Ok(_) => return flag,
                Err(now) => {
                    // SAFETY: the CAS failed, so `flag` was never published:
                    // ours is its only count.
                    drop(unsafe { Arc::from_raw(flag.cast_const()) });
                    current = now;
                }
            }
        }
    }
}

impl Clone for CancelToken {
    /// Shares the token: the first clone allocates the shared flag.
    fn clone(&self) -> Self {
        let flag = self.share();
        // SAFETY: `flag` came from `Arc::into_raw` and this token keeps a
        // count of it alive for the duration of the call; the new count is
        // owned by the clone, which gives it back in `drop`.
        unsafe { Arc::increment_strong_count(flag.cast_const()) };
        Self {
            state: AtomicPtr::new(flag),
        }
    }
}

impl Drop for CancelToken {
    fn drop(&mut self) {
        // Acquire: a pointer installed by another thread's `clone` (through
        // `&self`) must be read with its publication; `&mut self` orders
        // everything else.
        let current = self.state.load(Ordering::Acquire);
        if current != UNSHARED && current != cancelled_tag() {
            // SAFETY: a pointer state owns one count of an `Arc` made by
            // `share`; this is the one place that count is given back.
            drop(unsafe { Arc::from_raw(current.cast_const()) });
        }
    }
}

impl Default for CancelToken {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_token_allocates_only_when_cloned() {
        let t = CancelToken::new();
        assert!(t.state.load(Ordering::Relaxed).is_null());
        t.cancel();
        assert_eq!(t.state.load(Ordering::Relaxed), cancelled_tag());
        let c = t.clone();
        assert!(c.is_cancelled(), "a clone made after the cancel reads it");
        assert_eq!(
            t.state.load(Ordering::Relaxed),
            c.state.load(Ordering::Relaxed)
        );
    }

    #[test]
    fn clones_share_one_flag_in_every_order() {
        // Clone before and after a cancel, from the original and a clone.
        let a = CancelToken::new();
        let b = a.clone();
        let c = b.clone();
        assert!(!a.is_cancelled() && !b.is_cancelled() && !c.is_cancelled());
        c.cancel();
        let d = a.clone();
        for t in [&a, &b, &c, &d] {
            assert!(t.is_cancelled());
        }
        let fresh = CancelToken::default();
        let e = fresh.clone();
        drop(fresh);
        assert!(!e.is_cancelled(), "the clone outlives its original");
        e.cancel();
        assert!(e.is_cancelled());
    }

    #[test]
    fn cancels_race_clones_across_threads() {
        for _ in 0..200 {
            let t = CancelToken::new();
            let clones = std::thread::scope(|s| {
                let h = s.spawn(|| (t.clone(), t.clone()));
                t.cancel();
                h.join().unwrap()
            });
            assert!(clones.0.is_cancelled() && clones.1.is_cancelled());
        }
    }
}

#[cfg(all(test, stepsched_loom))]
mod loom_tests {
    //! Run with:
    //! `RUSTFLAGS="--cfg stepsched_loom" cargo test --release -p stepsched-process --features loom --lib cancel`

    use loom::cell::UnsafeCell;
    use loom::thread;

    use super::*;

    #[test]
    fn cancel_races_clone_and_publishes_what_came_before() {
        // The canceller writes a reason (a plain cell) and cancels while a
        // thread clones the token. Whoever won the CAS, the clone reads
        // cancelled once the canceller is joined, and a reader that sees
        // the cancellation may read the reason: loom reports a data race if
        // the Release/Acquire chain through the word or the flag is broken.
        loom::model(|| {
            let token = Arc::new(CancelToken::new());
            let reason = Arc::new(UnsafeCell::new(0u32));
            let (t, r) = (token.clone(), reason.clone());
            let canceller = thread::spawn(move || {
                // SAFETY: only read after the cancellation is seen.
                r.with_mut(|p| unsafe { *p = 7 });
                t.cancel();
            });
            let clone = token.clone_token_for_model();
            if clone.is_cancelled() {
                // SAFETY: the cancel published the write (Release/Acquire).
                assert_eq!(reason.with(|p| unsafe { *p }), 7);
            }
            canceller.join().unwrap();
            assert!(clone.is_cancelled(), "a clone missed the cancellation");
            assert!(token.is_cancelled());
        });
    }

    #[test]
    fn two_sharers_install_one_flag() {
        // Two threads clone an unshared token at once: one CAS installs its
        // flag, the other frees its own (loom reports a leak otherwise) and
        // uses the installed one, so a cancel through either clone reaches
        // both.
        loom::model(|| {
            let token = Arc::new(CancelToken::new());
            let t = token.clone();
            let other = thread::spawn(move || t.clone_token_for_model());
            let mine = token.clone_token_for_model();
            let theirs = other.join().unwrap();
            mine.cancel();
            assert!(theirs.is_cancelled(), "the sharers installed two flags");
        });
    }

    impl CancelToken {
        /// `Clone::clone`, named apart from `Arc::clone` in the models.
        fn clone_token_for_model(&self) -> CancelToken {
            Clone::clone(self)
        }
    }
}
