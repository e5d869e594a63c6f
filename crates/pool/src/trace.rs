//! Tracing, or nothing. With the `tracing` feature (on by default) these
//! macros are `tracing`'s; without it they expand to nothing, and the crate
//! neither depends on `tracing` nor evaluates the events' fields.
//!
//! Only the macros the crate uses are here; each is used as
//! `trace::debug!(...)` after `use crate::trace;`.

#[cfg(feature = "tracing")]
macro_rules! debug {
    ($($t:tt)*) => { ::tracing::debug!($($t)*) };
}
#[cfg(not(feature = "tracing"))]
macro_rules! debug {
    ($($t:tt)*) => {
        ()
    };
}

#[cfg(feature = "tracing")]
macro_rules! trace {
    ($($t:tt)*) => { ::tracing::trace!($($t)*) };
}
#[cfg(not(feature = "tracing"))]
macro_rules! trace {
    ($($t:tt)*) => {
        ()
    };
}

pub(crate) use {debug, trace};
