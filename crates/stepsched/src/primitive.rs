//! The synchronization primitives the facade uses, in one place.
//!
//! Under `--cfg stepsched_loom` the atomics, `Mutex`, `Condvar` and the
//! `Arc` that holds a process's slot (`SlotArc`) are loom's (other `Arc`s
//! stay std's, see below), so the crate builds for
//! `cargo xtask loom` and the models see every race on them, among them
//! the lazy creation and the seal of a process's event queue (`inbox`).
//! The process body cell stays a plain `UnsafeCell` in
//! both builds: its exclusivity comes from the process state cell, whose
//! protocol is model-checked in `stepsched-process`.

#[cfg(all(stepsched_loom, not(feature = "loom")))]
compile_error!("`--cfg stepsched_loom` needs the `loom` feature: `--features loom`");

#[cfg(not(stepsched_loom))]
pub(crate) mod sync {
    /// What holds a process's slot: std's `Arc`.
    pub(crate) use std::sync::Arc as SlotArc;
    pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};

    pub(crate) mod atomic {
        pub(crate) use std::sync::atomic::{
            AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
        };
    }
}

#[cfg(stepsched_loom)]
pub(crate) mod sync {
    // `Arc` stays std's: the routing table's compare-before-delete takes a
    // std `Arc`, and handlers and hooks are stored as `Arc<dyn ..>`, an
    // unsized coercion loom's `Arc` does not support.
    /// What holds a process's slot: loom's `Arc`, so that the models see
    /// every reference count of a slot — the run's, a parked process's,
    /// the spares lent to completers — and report a reference released
    /// twice (a use after release) or never (a leak).
    pub(crate) use loom::sync::Arc as SlotArc;
    pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
    pub(crate) use std::sync::Arc;

    pub(crate) mod atomic {
        pub(crate) use loom::sync::atomic::{
            AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
        };
    }
}

/// Under loom, whether a slot's event queue (`inbox`) is made with the slot
/// rather than by its first event.
#[cfg(stepsched_loom)]
pub(crate) mod once {
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

/// A cell whose every access loom checks for data races under
/// `--cfg stepsched_loom` (loom's `UnsafeCell`, with its closure-based
/// API); std's `UnsafeCell` behind the same API otherwise, where the
/// closures cost nothing. For data handed between threads by an atomic
/// protocol that the models must see (the result cell).
#[cfg(not(stepsched_loom))]
pub(crate) mod tracked {
    #[derive(Debug, Default)]
    #[repr(transparent)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }

        /// Runs `f` with a mutable raw pointer to the contents.
        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

#[cfg(stepsched_loom)]
pub(crate) mod tracked {
    pub(crate) use loom::cell::UnsafeCell;
}

/// Thread-locals: loom's under loom, where model threads share OS threads.
#[cfg(stepsched_loom)]
pub(crate) use loom::thread_local;
#[cfg(not(stepsched_loom))]
pub(crate) use std::thread_local;
