//! The synchronization primitives this crate uses, in one place.
//!
//! Every atomic, `Arc`, lock and thread the crate (and its internal tests)
//! touches is imported from here. Under `--cfg stepsched_loom` the module
//! re-exports loom's model-checked versions instead of std's, so the state
//! cell's protocol is explored by loom without a line of it changing.

#[cfg(all(stepsched_loom, not(feature = "loom")))]
compile_error!("`--cfg stepsched_loom` needs the `loom` feature: `--features loom`");

#[cfg(not(stepsched_loom))]
pub(crate) mod sync {
    pub(crate) use std::sync::Arc;
    #[cfg(test)]
    pub(crate) use std::sync::{Barrier, Mutex};

    pub(crate) mod atomic {
        pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
    }
}

#[cfg(stepsched_loom)]
pub(crate) mod sync {
    pub(crate) use loom::sync::Arc;

    pub(crate) mod atomic {
        pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
    }
}

/// Threads, for the crate's concurrent tests.
#[cfg(all(test, not(stepsched_loom)))]
pub(crate) use std::thread;

#[cfg(all(test, stepsched_loom))]
pub(crate) use loom::thread;

/// Channels, for the crate's concurrent tests.
#[cfg(all(test, not(stepsched_loom)))]
pub(crate) use std::sync::mpsc as channel;
