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

/// Whether TRACE and DEBUG events can be enabled at all (tracing's static
/// and dynamic maximum levels), as `(trace, debug)`, from one read of the
/// dynamic level; `(false, false)` without the feature.
#[cfg(feature = "tracing")]
macro_rules! levels {
    () => {{
        let max = ::tracing::level_filters::LevelFilter::current();
        let static_max = ::tracing::level_filters::STATIC_MAX_LEVEL;
        let enabled = |level: ::tracing::Level| level <= static_max && level <= max;
        (
            enabled(::tracing::Level::TRACE),
            enabled(::tracing::Level::DEBUG),
        )
    }};
}
#[cfg(not(feature = "tracing"))]
macro_rules! levels {
    () => {
        (false, false)
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

pub(crate) use {debug_enabled, levels, trace_span};
