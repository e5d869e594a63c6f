//! The synchronization primitives the facade uses, in one place.
//!
//! Under `--cfg stepsched_loom` the atomics, `Mutex` and `Condvar` are
//! loom's (`Arc` stays std's, see below), and so is the once-cell that
//! creates a process's event queue on its first event ([`once::OnceLock`]),
//! so the crate builds for `cargo xtask loom` and the models see the lazy
//! creation race. The process body cell stays a plain `UnsafeCell` in
//! both builds: its exclusivity comes from the process state cell, whose
//! protocol is model-checked in `stepsched-process`.

#[cfg(not(stepsched_loom))]
pub(crate) mod sync {
    pub(crate) use std::sync::{Arc, Condvar, Mutex};

    pub(crate) mod atomic {
        pub(crate) use std::sync::atomic::{
            AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence,
        };
    }
}

#[cfg(stepsched_loom)]
pub(crate) mod sync {
    // `Arc` stays std's: the routing table's compare-before-delete takes a
    // std `Arc`, and handlers and hooks are stored as `Arc<dyn ..>`, an
    // unsized coercion loom's `Arc` does not support.
    pub(crate) use loom::sync::{Condvar, Mutex};
    pub(crate) use std::sync::Arc;

    pub(crate) mod atomic {
        pub(crate) use loom::sync::atomic::{
            AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence,
        };
    }
}

/// The once-cell of a slot's lazily created event queue.
pub(crate) mod once {
    #[cfg(not(stepsched_loom))]
    pub(crate) use std::sync::OnceLock;

    #[cfg(stepsched_loom)]
    pub(crate) use self::model::OnceLock;

    #[cfg(stepsched_loom)]
    std::thread_local! {
        static EAGER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// Under loom: whether slots made on this thread create their event
    /// queue at once rather than on the first event. The whole-scheduler
    /// model turns it on to keep its state space to minutes; a smaller
    /// model leaves it off and checks the lazy creation race.
    #[cfg(stepsched_loom)]
    pub fn eager_event_queues(on: bool) {
        EAGER.with(|e| e.set(on));
    }

    #[cfg(stepsched_loom)]
    pub(crate) fn eager() -> bool {
        EAGER.with(|e| e.get())
    }

    /// Under loom, a once-cell built on a loom `AtomicPtr`, so that the
    /// models see the happens-before edge from the thread that creates the
    /// value to every thread that uses it (loom cannot see the one inside
    /// std's `OnceLock`). Unlike std's, two racing initializers may both
    /// build a value; the loser drops its own, unused. The callers' values
    /// (an empty event queue) allow that.
    #[cfg(stepsched_loom)]
    mod model {
        use loom::sync::atomic::{AtomicPtr, Ordering};
        use std::ptr;

        pub(crate) struct OnceLock<T> {
            ptr: AtomicPtr<T>,
        }

        impl<T> OnceLock<T> {
            pub(crate) fn new() -> Self {
                OnceLock {
                    ptr: AtomicPtr::new(ptr::null_mut()),
                }
            }

            pub(crate) fn get(&self) -> Option<&T> {
                // Acquire: pairs with the winner's AcqRel install, so the
                // value's construction happens before our use of it.
                let p = self.ptr.load(Ordering::Acquire);
                // SAFETY: a non-null pointer was installed once from a
                // `Box` and is freed only by `Drop`, which has `&mut self`.
                unsafe { p.as_ref() }
            }

            pub(crate) fn get_or_init(&self, init: impl FnOnce() -> T) -> &T {
                if let Some(value) = self.get() {
                    return value;
                }
                let new = Box::into_raw(Box::new(init()));
                // AcqRel: Release publishes our construction; Acquire, on
                // failure, makes the winner's visible to us.
                match self.ptr.compare_exchange(
                    ptr::null_mut(),
                    new,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    // SAFETY: installed; lives until `Drop` (see `get`).
                    Ok(_) => unsafe { &*new },
                    Err(winner) => {
                        // SAFETY: `new` is ours, never shared.
                        drop(unsafe { Box::from_raw(new) });
                        // SAFETY: as in `get`.
                        unsafe { &*winner }
                    }
                }
            }
        }

        impl<T> Drop for OnceLock<T> {
            fn drop(&mut self) {
                // A load rather than `with_mut`: the last owner may drop
                // the cell on another thread through a std `Arc`, whose
                // synchronization loom cannot see. Acquire: as in `get`.
                let p = self.ptr.load(Ordering::Acquire);
                if !p.is_null() {
                    // SAFETY: installed from a `Box`, freed only here.
                    drop(unsafe { Box::from_raw(p) });
                }
            }
        }
    }
}

pub(crate) mod cell {
    /// A cell whose contents one thread at a time may access, by a rule
    /// the code around it proves (see `Slot::body`).
    #[derive(Debug, Default)]
    #[repr(transparent)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }

        /// A raw pointer to the contents.
        #[inline(always)]
        pub(crate) fn get(&self) -> *mut T {
            self.0.get()
        }
    }
}

/// Thread-locals: loom's under loom, where model threads share OS threads.
#[cfg(stepsched_loom)]
pub(crate) use loom::thread_local;
#[cfg(not(stepsched_loom))]
pub(crate) use std::thread_local;
