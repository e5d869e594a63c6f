//! The run loop: which process steps next, timers and virtual time, the
//! step limit, shutdowns; and what a run and a shutdown report.

use std::cell::Cell;
use std::cmp::Reverse;
use std::rc::Rc;
use std::time::Duration;

use stepsched_process::{Command, Error, Event, Pid, Process};

use crate::process::earliest;
use crate::state::{Origin, Shared, Stopping, quietly_drop};
#[cfg(doc)]
use crate::{Builder, Faults, Sim};

/// What [`Sim::run`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// Steps taken by this run.
    pub steps: u64,
    /// The virtual time at the end of the run.
    pub now: Duration,
    /// Processes still live at the end: waiting for a message or for a
    /// completion that never came (a stuck process), or cut off by the step
    /// limit.
    pub live: usize,
    /// Whether the run stopped at the step limit ([`Builder::max_steps`])
    /// with work left.
    pub step_limit_hit: bool,
    /// The report of a shutdown that finished during this run (begun by
    /// the [`Faults::shutdown`] fault, or by [`Sim::shutdown`]).
    pub shutdown: Option<ShutdownReport>,
}

/// What a [`shutdown`](Sim::shutdown) did, as the scheduler's
/// `ShutdownReport` says it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Processes that got a cancel event.
    pub cancelled: usize,
    /// Processes still live at the deadline, forced to complete with
    /// [`Error::Cancelled`] (and closed).
    pub forced: usize,
}

/// From how many ready processes on the one stepped stays in the ready
/// queue while it runs (measured on `examples/throughput`: a hundred
/// producers that continue gain about 15 %; a ping-pong, with one ready
/// process, would lose as much).
const LAZY_POP: usize = 4;

impl<P: Process + 'static> Shared<P>
where
    P::Command: Command,
{
    /// Begins a shutdown with `deadline` (from now), unless one has begun:
    /// refuses submits from now on, cancels every live process's token and
    /// queues its cancel event. Whether this call began it.
    pub(crate) fn begin_shutdown(&self, deadline: Duration, why: &str) -> bool {
        let mut inner = self.inner.borrow_mut();
        if inner.stopping() {
            return false;
        }
        let now = inner.now;
        if self.tracing {
            let line = format!(
                "t={}us shutdown ({why}) deadline=t={}us",
                now.as_micros(),
                (now + deadline).as_micros()
            );
            inner.push_line(&line);
        }
        let pids: Vec<Pid> = inner.live.keys().copied().collect();
        let mut cancelled = 0;
        for pid in pids {
            let entry = inner.live.get_mut(&pid).expect("listed above");
            entry.cancel.cancel();
            if inner
                .push_event(pid, Origin::Cancel, Event::cancel())
                .is_ok()
            {
                cancelled += 1;
            }
        }
        inner.shutdown = Some(Stopping {
            deadline: now + deadline,
            report: ShutdownReport {
                cancelled,
                forced: 0,
            },
            finished: false,
        });
        true
    }

    /// Forces every process still live to end with [`Error::Cancelled`]
    /// (the shutdown's deadline has passed).
    pub(crate) fn force_all(&self) {
        let pids: Vec<Pid> = {
            let mut inner = self.inner.borrow_mut();
            let pids: Vec<Pid> = inner.live.keys().copied().collect();
            if self.tracing && !pids.is_empty() {
                let line = format!(
                    "t={}us shutdown deadline: forcing {}",
                    inner.now.as_micros(),
                    pids.len()
                );
                inner.push_line(&line);
            }
            pids
        };
        for pid in pids {
            self.end(pid, None, Err(Error::Cancelled));
            let mut inner = self.inner.borrow_mut();
            if let Some(s) = inner.shutdown.as_mut() {
                s.report.forced += 1;
            }
        }
    }

    /// Marks the shutdown finished once no process is live: the timers
    /// left reach nothing and are dropped. Its report, if it finished now.
    pub(crate) fn finish_shutdown(&self) -> Option<ShutdownReport> {
        let mut inner = self.inner.borrow_mut();
        if !inner.live.is_empty() || inner.shutting_down().is_none() {
            return None;
        }
        inner.timers.clear();
        let timed = std::mem::take(&mut inner.timed);
        let alarms = std::mem::take(&mut inner.alarms);
        let flights = inner.net.take_flights();
        let s = inner.shutdown.as_mut().expect("shutting down");
        s.finished = true;
        let report = s.report;
        drop(inner);
        quietly_drop(timed);
        quietly_drop(alarms);
        quietly_drop(flights);
        Some(report)
    }

    /// Steps processes until `done` says so, nothing can happen any more,
    /// the step limit is reached, or (with `until`) the clock would pass
    /// `until`; a shutdown that has begun finishes within it.
    pub(crate) fn drive(
        self: &Rc<Self>,
        done: &dyn Fn() -> bool,
        until: Option<Duration>,
    ) -> Report {
        assert!(
            !self.driving.replace(true),
            "the simulator was run (run, join or shutdown) from inside a step or a handler"
        );
        struct Release<'a>(&'a Cell<bool>);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.set(false);
            }
        }
        let _release = Release(&self.driving);
        let start = self.inner.borrow().steps;
        let mut step_limit_hit = false;
        let mut shutdown = None;
        while !done() {
            let mut inner = self.inner.borrow_mut();
            if inner.steps - start >= self.max_steps {
                if inner.shutting_down().is_some() {
                    // The step limit stands in for the deadline of a
                    // process that never waits.
                    drop(inner);
                    self.force_all();
                    shutdown = self.finish_shutdown().or(shutdown);
                    break;
                }
                step_limit_hit =
                    !inner.ready.is_empty() || !inner.timers.is_empty() || inner.net.in_flight();
                break;
            }
            if !inner.stopping() && inner.shutdown_rng.chance(self.faults.shutdown) {
                drop(inner);
                self.begin_shutdown(self.faults.shutdown_deadline, "fault");
                continue;
            }
            if !inner.live.is_empty() && inner.terminate_rng.chance(self.faults.terminate) {
                let len = inner.live.len();
                let n = inner.terminate_rng.index(len);
                let victim = *inner.live.keys().nth(n).expect("n < len");
                drop(inner);
                let _ = self.terminate(victim, "fault");
                continue;
            }
            if let Some(&Reverse(ready)) = inner.ready.peek() {
                inner.clock = ready.0;
                // Among many, left at the top while it runs (see
                // `Inner::current`); among few, a pop is cheaper. Either
                // way the same process steps next: only the cost differs.
                let lazy = inner.ready.len() >= LAZY_POP;
                if lazy {
                    inner.current = Some(ready);
                } else {
                    inner.ready.pop();
                }
                drop(inner);
                self.step(ready.pid());
                if lazy {
                    self.inner.borrow_mut().settle();
                }
                continue;
            }
            // Nothing runnable: a finished shutdown, a timer, a deadline,
            // or the end.
            if inner.live.is_empty() && inner.shutting_down().is_some() {
                drop(inner);
                shutdown = self.finish_shutdown();
                continue;
            }
            let next = earliest(
                inner.timers.peek().map(|Reverse((at, _))| *at),
                inner.net.next_arrival(),
            );
            let deadline = inner.shutting_down().map(|s| s.deadline);
            let limit = match (deadline, until) {
                (Some(d), Some(u)) => Some(d.min(u)),
                (d, u) => d.or(u),
            };
            match (next, limit) {
                (Some(at), Some(limit)) if at > limit => {}
                (Some(_), _) => {
                    drop(inner);
                    self.fire_timers();
                    continue;
                }
                (None, None) => break,
                (None, Some(_)) => {}
            }
            // The next timer (if any) is past the limit: the clock moves to
            // the limit, a shutdown's deadline first.
            let limit = limit.expect("a limit");
            inner.now = inner.now.max(limit);
            if deadline == Some(limit) {
                drop(inner);
                self.force_all();
                shutdown = self.finish_shutdown();
                continue;
            }
            break;
        }
        let inner = self.inner.borrow();
        Report {
            steps: inner.steps - start,
            now: inner.now,
            live: inner.live.len(),
            step_limit_hit,
            shutdown,
        }
    }
}
