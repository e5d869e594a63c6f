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

/// Whether TRACE events can be enabled at all (tracing's static and
/// dynamic maximum levels); `false` without the feature.
#[cfg(feature = "tracing")]
macro_rules! trace_level {
    () => {
        ::tracing::level_enabled!(::tracing::Level::TRACE)
    };
}
#[cfg(not(feature = "tracing"))]
macro_rules! trace_level {
    () => {
        false
    };
}

/// Whether DEBUG events can be enabled at all; `false` without the feature.
#[cfg(feature = "tracing")]
macro_rules! debug_level {
    () => {
        ::tracing::level_enabled!(::tracing::Level::DEBUG)
    };
}
#[cfg(not(feature = "tracing"))]
macro_rules! debug_level {
    () => {
        false
    };
}

/// Whether a DEBUG event here would be recorded; `false` without the
/// feature.
#[cfg(feature = "tracing")]
macro_rules! debug_enabled {
    () => {
        ::tracing::enabled!(::tracing::Level::DEBUG)
    };
}
#[cfg(not(feature = "tracing"))]
macro_rules! debug_enabled {
    () => {
        false
    };
}

/// An entered TRACE span, as an `Option` (always `None` without the
/// feature).
#[cfg(feature = "tracing")]
macro_rules! trace_span {
    ($($t:tt)*) => {
        Some(::tracing::trace_span!($($t)*).entered())
    };
}
#[cfg(not(feature = "tracing"))]
macro_rules! trace_span {
    ($($t:tt)*) => {
        None::<()>
    };
}

pub(crate) use {debug_enabled, debug_level, trace_level, trace_span};
