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
/// (fault)`).
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
        }
    }
}
