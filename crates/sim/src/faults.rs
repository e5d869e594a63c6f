//! [`Faults`]: what the simulator injects, and how often.

use std::time::Duration;

#[cfg(doc)]
use stepsched_process::Error;

#[cfg(doc)]
use crate::{Completer, Sim};

/// Faults the simulator injects, each drawn from a seeded stream of its
/// own, so a run with faults is as reproducible as one without. All are
/// off by default. Each fault draws only from its own stream (and, for the
/// faults of one process, that process's), so turning one fault off, or
/// setting it so low that it never fires, leaves every other decision of
/// a seed, and so its trace, unchanged. Each injected fault writes a line
/// to the trace (`fault delay c3 +2ms`, `fault reorder 4 events`, `fault
/// short-batch 2 of 5`, `fault handler-error ask#1`, `fault handler-panic
/// ask#1`, `fault never-complete ask#1`, `terminated (fault)`, `shutdown
/// (fault)`, `fault clock-skew +1234us`).
///
/// ```
/// use stepsched_sim::Faults;
///
/// let faults = Faults { delay: 0.5, ..Faults::default() };
/// assert_eq!(faults.reorder, 0.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Faults {
    /// The probability that a completion is held back by a random delay of
    /// 1 to [`max_delay`](Self::max_delay) milliseconds of virtual time
    /// (added to the handler's own delay, if any).
    pub delay: f64,
    /// The longest injected delay.
    pub max_delay: Duration,
    /// The probability that a step's events are shuffled across senders.
    /// Messages from one sender keep their order; each completion counts
    /// as a sender of its own.
    pub reorder: f64,
    /// The probability that a step is handed only some of its queued
    /// events (a random number, at least one); the rest wait, in order,
    /// for its next step.
    pub short_batch: f64,
    /// The probability, before each step, that a random live process is
    /// terminated (it ends with [`Error::Terminated`]).
    pub terminate: f64,
    /// The probability that a yield is completed with an error instead of
    /// being handed to its handler.
    pub handler_error: f64,
    /// The probability that a yield's handler panics instead of running:
    /// the yield completes with [`Error::Panicked`], as when a real
    /// handler panics.
    pub handler_panic: f64,
    /// The probability that a yield's completion never comes: its handler
    /// runs, but what it completes (or the error of its dropped completer)
    /// reaches nothing, as if it kept its [`Completer`] forever. The
    /// process waits until it is terminated or shut down.
    pub never_complete: f64,
    /// The probability, before each step, that a shutdown begins (once),
    /// with [`shutdown_deadline`](Self::shutdown_deadline): see
    /// [`Sim::shutdown`].
    pub shutdown: f64,
    /// The deadline of a shutdown begun by the [`shutdown`](Self::shutdown)
    /// fault.
    pub shutdown_deadline: Duration,
    /// The largest clock skew (zero by default: off). Each process's clock
    /// — what `stepsched`'s `ContextExt::now` reads — runs ahead of
    /// virtual time by an offset drawn once, when it is submitted, from 0
    /// to `clock_skew` (whole microseconds), from a stream of its own
    /// (`fault:clock-skew`): any two processes' clocks differ by at most
    /// `clock_skew` (plus their drifts). Trace line, once per process:
    /// `fault clock-skew +1234us`. Timers ([`ContextExt::after`]) count
    /// virtual time, unskewed.
    ///
    /// [`ContextExt::after`]: https://docs.rs/stepsched
    pub clock_skew: Duration,
    /// The largest clock drift, as a rate (zero by default: off; `1e-3`
    /// is 1 ms per second). Each process's clock runs at `1 + r` times
    /// virtual time, `r` drawn once from `-clock_drift` to `clock_drift`
    /// (whole parts per billion, at most `0.5`), from the same stream as
    /// its skew, after it. The trace line of the skew then ends
    /// ` drift -1500ppb`.
    pub clock_drift: f64,
}

impl Faults {
    /// These faults with clock skew up to `max` (see
    /// [`clock_skew`](Self::clock_skew)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use stepsched_sim::Faults;
    ///
    /// let faults = Faults::default().clock_skew(Duration::from_millis(5));
    /// assert_eq!(faults.clock_skew, Duration::from_millis(5));
    /// assert_eq!(Faults::default().clock_skew, Duration::ZERO);
    /// ```
    #[must_use]
    pub fn clock_skew(mut self, max: Duration) -> Self {
        self.clock_skew = max;
        self
    }

    /// These faults with clock drift up to `max` as a rate (see
    /// [`clock_drift`](Self::clock_drift)).
    #[must_use]
    pub fn clock_drift(mut self, max: f64) -> Self {
        self.clock_drift = max;
        self
    }
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            delay: 0.0,
            max_delay: Duration::from_millis(10),
            reorder: 0.0,
            short_batch: 0.0,
            terminate: 0.0,
            handler_error: 0.0,
            handler_panic: 0.0,
            never_complete: 0.0,
            shutdown: 0.0,
            shutdown_deadline: Duration::from_millis(10),
            clock_skew: Duration::ZERO,
            clock_drift: 0.0,
        }
    }
}
