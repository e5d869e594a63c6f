//! The synchronization primitives this crate uses, in one place.
//!
//! The only shared mutable word in the crate is the counter of
//! [`PidAllocator`](crate::PidAllocator); the routing table's locking lives
//! inside `dashmap`. Under `--cfg stepsched_loom` this module re-exports
//! loom's model-checked atomics instead of std's, so `tests/loom.rs` explores
//! the allocator without a line of it changing.

#[cfg(all(stepsched_loom, not(feature = "loom")))]
compile_error!("`--cfg stepsched_loom` needs the `loom` feature: `--features loom`");

#[cfg(not(stepsched_loom))]
pub(crate) mod sync {
    pub(crate) mod atomic {
        pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
    }
}

#[cfg(stepsched_loom)]
pub(crate) mod sync {
    pub(crate) mod atomic {
        pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
    }
}
