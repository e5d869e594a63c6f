//! The synchronization primitives this crate uses, in one place.
//!
//! Every atomic, cell, `Arc` and thread-related item the queue touches is
//! imported from here. Under `--cfg stepsched_loom` the module re-exports
//! loom's model-checked versions instead of std's, so every protocol in the
//! crate is explored by loom without a line of the algorithm changing.

#[cfg(all(stepsched_loom, not(feature = "loom")))]
compile_error!("`--cfg stepsched_loom` needs the `loom` feature: `--features loom`");

#[cfg(not(stepsched_loom))]
pub(crate) mod sync {
    pub(crate) use std::sync::Arc;

    pub(crate) mod atomic {
        pub(crate) use std::sync::atomic::{
            AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, Ordering,
        };
    }
}

#[cfg(stepsched_loom)]
pub(crate) mod sync {
    pub(crate) use loom::sync::Arc;

    pub(crate) mod atomic {
        pub(crate) use loom::sync::atomic::{
            AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, Ordering,
        };
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

/// One pointer per thread: the innermost `make` of an accepted push this
/// thread is running (see `Making` in `queue`). Under loom, one per
/// modelled thread (loom's modelled threads share one OS thread).
pub(crate) mod local {
    use core::cell::Cell;
    use core::ptr;

    #[cfg(not(stepsched_loom))]
    std::thread_local! {
        static MAKING: Cell<*const ()> = const { Cell::new(ptr::null()) };
    }

    #[cfg(stepsched_loom)]
    loom::thread_local! {
        static MAKING: Cell<*const ()> = Cell::new(ptr::null());
    }

    /// The current thread's pointer (null when none was set).
    #[inline(always)]
    pub(crate) fn making() -> *const () {
        MAKING.with(Cell::get)
    }

    /// Sets the current thread's pointer.
    #[inline(always)]
    pub(crate) fn set_making(p: *const ()) {
        MAKING.with(|c| c.set(p));
    }
}

/// Waiting politely for another thread to finish a few instructions.
pub(crate) mod wait {
    /// One step of a bounded-spin-then-yield wait; `step` counts the calls
    /// made so far in this wait.
    #[cfg(not(stepsched_loom))]
    #[inline]
    pub(crate) fn snooze(step: &mut u32) {
        if *step < 6 {
            for _ in 0..(1u32 << *step) {
                std::hint::spin_loop();
            }
            *step += 1;
        } else {
            std::thread::yield_now();
        }
    }

    /// Under loom a spin must hand control to the other modelled threads.
    #[cfg(stepsched_loom)]
    #[inline]
    pub(crate) fn snooze(step: &mut u32) {
        *step = step.saturating_add(1);
        loom::thread::yield_now();
    }
}
