//! The synchronization primitives the facade uses, in one place.
//!
//! Under `--cfg stepsched_loom` the atomics, `Mutex` and `Condvar` are
//! loom's (`Arc` stays std's, see below), so the crate builds for
//! `cargo xtask loom`. The process body cell stays a plain `UnsafeCell` in
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
