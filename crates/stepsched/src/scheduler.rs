//! [`Scheduler`]: owns the workers; shutdown.

use std::fmt;
use std::time::{Duration, Instant};

use crate::SchedProcess;
use crate::handle::Handle;
use crate::primitive::sync::atomic::{Ordering, fence};
use crate::primitive::sync::{Arc, Mutex};
use crate::slot::{Core, FORCED_CANCELLED};

/// What a [`shutdown`](Scheduler::shutdown) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Processes that got a cancel event.
    pub cancelled: usize,
    /// Processes still live at the deadline, forced to complete with
    /// [`Error::Cancelled`] (closed at once, or by their worker when the
    /// step it is running returns).
    pub forced: usize,
    /// Whether every worker thread exited before the deadline (false if a
    /// step never returned: that worker is left behind, detached).
    pub workers_joined: bool,
}

/// The scheduler: owns the worker threads. Dereferences to [`Handle`] for
/// `submit`, `send`, `terminate` and `stats`; [`handle`](Scheduler::handle)
/// gives a cloneable one.
///
/// Dropping the scheduler shuts it down with a deadline of one second.
pub struct Scheduler<P: SchedProcess> {
    handle: Handle<P>,
    /// The first shutdown's report; held while it runs, so that a
    /// concurrent call waits for it.
    shut_down: Mutex<Option<ShutdownReport>>,
}

impl<P: SchedProcess> std::ops::Deref for Scheduler<P> {
    type Target = Handle<P>;

    fn deref(&self) -> &Handle<P> {
        &self.handle
    }
}

impl<P: SchedProcess> Scheduler<P> {
    /// The scheduler that owns the workers of `handle`'s core.
    pub(crate) fn new(handle: Handle<P>) -> Self {
        Scheduler {
            handle,
            shut_down: Mutex::new(None),
        }
    }

    /// A cloneable handle.
    pub fn handle(&self) -> Handle<P> {
        self.handle.clone()
    }

    /// Shuts down: refuses new submits, sends a cancel event to every live
    /// process, waits until all complete or `deadline` passes, then
    /// force-closes the rest (result [`Error::Cancelled`]) and stops the
    /// workers.
    ///
    /// Never waits much past the deadline, even for a process that ignores
    /// cancel or a step that never returns. When it returns, every process
    /// submitted before it (or racing it and accepted) has its result; each
    /// was closed once, except one whose step was still running when the
    /// workers were abandoned (`workers_joined` is false): that one is
    /// closed if and when its step returns.
    ///
    /// Idempotent: a later call, or one racing the first, waits for the
    /// first to finish and reports nothing more.
    pub fn shutdown(&self, deadline: Duration) -> ShutdownReport {
        let mut first = self.shut_down.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(done) = *first {
            return ShutdownReport {
                workers_joined: done.workers_joined,
                ..ShutdownReport::default()
            };
        }
        let report = self.shut_down_once(deadline);
        *first = Some(report);
        report
    }

    fn shut_down_once(&self, deadline: Duration) -> ShutdownReport {
        let mut report = ShutdownReport::default();
        let until = Instant::now() + deadline;
        let core = &self.handle.core;
        core.stopping.store(true, Ordering::SeqCst);
        // Pairs with the fence in `submit` (see there).
        fence(Ordering::SeqCst);
        for (_, slot) in core.routes.snapshot() {
            slot.send_cancel();
            report.cancelled += 1;
        }
        {
            let mut guard = core.drained.lock().unwrap_or_else(|p| p.into_inner());
            // SeqCst: see `release_unpublished`.
            while core.unpublished.load(Ordering::SeqCst) != 0 {
                let now = Instant::now();
                if now >= until {
                    break;
                }
                guard = core
                    .drained_cv
                    .wait_timeout(guard, until - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        core.forcing.store(true, Ordering::SeqCst);
        // Pairs with the fence in `submit` (see there).
        fence(Ordering::SeqCst);
        for (_, slot) in core.routes.snapshot() {
            if slot.force(FORCED_CANCELLED) {
                report.forced += 1;
            }
        }
        report.workers_joined = stop_pool(core, until);
        // What is still registered now: processes forced while running
        // whose worker has not returned (it is stuck in a step, or slow to
        // stop), and any a racing terminate or submit is still ending.
        // Publish their results; a worker that returns later closes its
        // process and finds the result already published.
        for (_, slot) in core.routes.snapshot() {
            if slot.force(FORCED_CANCELLED) {
                report.forced += 1;
            }
            // Only a forced process's result is known here. One that ended
            // on its own and is still in `close` publishes its own result
            // when `close` returns.
            if slot.force_won() {
                slot.finish(Err(slot.forced_error()), None);
            }
        }
        tracing::debug!(?report, "scheduler shut down");
        report
    }
}

/// Stops the pool, waiting for the workers until `until` (at least a short
/// grace period). Returns whether they all exited.
#[cfg(not(stepsched_loom))]
fn stop_pool<P: SchedProcess>(core: &Arc<Core<P>>, until: Instant) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    let core2 = core.clone();
    let spawned = std::thread::Builder::new()
        .name("stepsched-shutdown".into())
        .spawn(move || {
            core2.pool().shutdown_now();
            let _ = tx.send(());
        });
    if spawned.is_err() {
        core.pool().shutdown_now();
        return true;
    }
    let wait = until
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(100));
    rx.recv_timeout(wait).is_ok()
}

/// Under loom every thread must be a loom thread, and models never leave a
/// step running: stop the pool on this thread.
#[cfg(stepsched_loom)]
fn stop_pool<P: SchedProcess>(core: &Arc<Core<P>>, _until: Instant) -> bool {
    core.pool().shutdown_now();
    true
}

impl<P: SchedProcess> Drop for Scheduler<P> {
    fn drop(&mut self) {
        self.shutdown(Duration::from_secs(1));
    }
}

impl<P: SchedProcess> fmt::Debug for Scheduler<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("handle", &self.handle)
            .finish()
    }
}
