//! The state every handle of one scheduler shares besides the core — the
//! PIDs handed out and the shutdown's progress — and the shutdown's report
//! and error. It names no process type, so a
//! [`Shutdown`](crate::Shutdown) future need not either.

use std::fmt;
use std::task::Waker;

use crate::primitive::sync::{Condvar, Mutex};

/// What a [`shutdown`](crate::Scheduler::shutdown) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Processes that got a cancel event.
    pub cancelled: usize,
    /// Processes still live at the deadline, forced to complete with
    /// [`Error::Cancelled`](crate::Error::Cancelled) (closed at once, or by their worker when the
    /// step it is running returns).
    pub forced: usize,
    /// Whether every worker thread exited before the deadline (false if a
    /// step never returned: that worker is left behind, detached).
    pub workers_joined: bool,
}

/// Why [`Scheduler::shutdown`](crate::Scheduler::shutdown) refused to
/// shut down.
///
/// ```
/// use stepsched::ShutdownError;
///
/// let e = ShutdownError::OnWorker;
/// assert!(e.to_string().contains("begin_shutdown"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShutdownError {
    /// Called on one of the scheduler's own worker threads (from a step or
    /// a handler running there). The blocking shutdown would wait for that
    /// worker, which cannot return until the call does: nothing was
    /// started. Use [`Handle::begin_shutdown`](crate::Handle::begin_shutdown)
    /// there.
    OnWorker,
    /// Called on the thread that is running this scheduler's shutdown (from
    /// a process's `close`, a completion hook or a shutdown hook): waiting
    /// for the shutdown there would wait for itself. It is under way, and
    /// ends when that code returns.
    InShutdown,
}

impl fmt::Display for ShutdownError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OnWorker => f.write_str(
                "a blocking shutdown cannot run on one of the scheduler's own workers \
                 (use `Handle::begin_shutdown`)",
            ),
            Self::InShutdown => f.write_str(
                "a blocking shutdown cannot wait for itself: it was called from inside \
                 the scheduler's shutdown (a close or a hook)",
            ),
        }
    }
}

impl std::error::Error for ShutdownError {}

/// What every handle of one scheduler shares besides the core.
pub(crate) struct Shared {
    pub(crate) shutdown: ShutdownState,
}

impl Shared {
    pub(crate) fn new() -> Self {
        Shared {
            shutdown: ShutdownState::new(),
        }
    }
}

/// Where the first shutdown of a scheduler leaves its report, and where
/// every other shutdown call, blocking or async, waits for it.
pub(crate) struct ShutdownState {
    pub(crate) phase: Mutex<Phase>,
    pub(crate) done: Condvar,
}

pub(crate) enum Phase {
    /// No shutdown has begun.
    Open,
    /// The first shutdown runs; async waiters to wake when it is done.
    Running(Vec<Waker>),
    Done(ShutdownReport),
}

impl ShutdownState {
    pub(crate) fn new() -> Self {
        ShutdownState {
            phase: Mutex::new(Phase::Open),
            done: Condvar::new(),
        }
    }

    /// Runs `f` on the phase, under the lock.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Phase) -> R) -> R {
        f(&mut self.phase.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Whether the caller is the first to shut down: it must run the
    /// shutdown and then call `finish`.
    pub(crate) fn claim(&self) -> bool {
        self.with(|phase| {
            if matches!(phase, Phase::Open) {
                *phase = Phase::Running(Vec::new());
                true
            } else {
                false
            }
        })
    }

    /// Stores the first shutdown's report and wakes every waiter.
    pub(crate) fn finish(&self, report: ShutdownReport) {
        let wakers = match self.with(|phase| std::mem::replace(phase, Phase::Done(report))) {
            Phase::Running(wakers) => wakers,
            Phase::Open | Phase::Done(_) => Vec::new(),
        };
        self.done.notify_all();
        for waker in wakers {
            waker.wake();
        }
    }
}

/// The first shutdown's report, as told to a call that was not the first.
pub(crate) fn nothing_more(first: ShutdownReport) -> ShutdownReport {
    ShutdownReport {
        workers_joined: first.workers_joined,
        ..ShutdownReport::default()
    }
}
