//! The synchronization primitives this crate uses, in one place.
//!
//! Every atomic, lock, condition variable, thread and thread-local the pool
//! touches is imported from here. Under `--cfg stepsched_loom` the module
//! re-exports [loom](https://docs.rs/loom)'s model-checked versions instead
//! of std's, so the sleep protocol and the worker loop are explored by loom
//! without a line of them changing.
//!
//! The one exception is [`stat`]: the per-worker statistics counters are
//! std atomics in every build. They synchronize nothing (each is written by
//! its own worker and only read as a snapshot), so modelling them would only
//! enlarge loom's state space.

#[cfg(all(stepsched_loom, not(feature = "loom")))]
compile_error!("`--cfg stepsched_loom` needs the `loom` feature: `--features loom`");

#[cfg(not(stepsched_loom))]
pub(crate) mod sync {
    pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};

    pub(crate) mod atomic {
        pub(crate) use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
    }
}

#[cfg(stepsched_loom)]
pub(crate) mod sync {
    pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};

    pub(crate) mod atomic {
        pub(crate) use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
    }
}

/// A cell with loom's closure API: std's `UnsafeCell` normally, loom's
/// (which checks every access against the model's happens-before) under
/// loom.
#[cfg(not(stepsched_loom))]
pub(crate) mod cell {
    #[derive(Debug, Default)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(value))
        }

        #[inline(always)]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

#[cfg(stepsched_loom)]
pub(crate) mod cell {
    pub(crate) use loom::cell::UnsafeCell;
}

#[cfg(not(stepsched_loom))]
pub(crate) mod thread {
    pub(crate) use std::thread::{Builder, JoinHandle, yield_now};
}

#[cfg(stepsched_loom)]
pub(crate) mod thread {
    pub(crate) use loom::thread::{Builder, JoinHandle, yield_now};
}

#[cfg(not(stepsched_loom))]
pub(crate) mod hint {
    pub(crate) use std::hint::spin_loop;
}

#[cfg(stepsched_loom)]
pub(crate) mod hint {
    pub(crate) use loom::hint::spin_loop;
}

#[cfg(not(stepsched_loom))]
pub(crate) use std::thread_local;

#[cfg(stepsched_loom)]
pub(crate) use loom::thread_local;

/// Statistics counters: std atomics in every build (see the module docs).
pub(crate) mod stat {
    pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
}
