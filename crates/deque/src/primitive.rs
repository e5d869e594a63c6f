//! The synchronization primitives this crate uses, in one place.
//!
//! Every atomic, cell and thread-related item the deque touches is imported
//! from here. Under `--cfg stepsched_loom` the module re-exports loom's
//! model-checked versions instead of std's, so every protocol in the crate is
//! explored by loom without a line of the algorithm changing.

#[cfg(all(stepsched_loom, not(feature = "loom")))]
compile_error!("`--cfg stepsched_loom` needs the `loom` feature: `--features loom`");

#[cfg(not(stepsched_loom))]
pub(crate) mod sync {
    pub(crate) use std::sync::Arc;

    pub(crate) mod atomic {
        pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering, fence};
    }
}

#[cfg(stepsched_loom)]
pub(crate) mod sync {
    pub(crate) use loom::sync::Arc;

    pub(crate) mod atomic {
        pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering, fence};
    }
}

/// `UnsafeCell` with loom's closure-based access API, so the same code
/// compiles against std (where the closures are free) and loom (where every
/// access is checked for data races).
#[cfg(not(stepsched_loom))]
pub(crate) mod cell {
    #[derive(Debug)]
    #[repr(transparent)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }

        /// Runs `f` with a shared raw pointer to the contents.
        #[inline(always)]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        /// Runs `f` with a mutable raw pointer to the contents.
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
