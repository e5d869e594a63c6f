//! The run loop: which process steps next, timers and virtual time, the
//! step limit, shutdowns; and what a run and a shutdown report.

use std::cell::Cell;
use std::cmp::Reverse;
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use stepsched_process::{Command, Error, Event, Pid, Process};

use crate::process::earliest;
use crate::state::{Origin, Outcome, ResultCell, Shared, Stopping, quietly_drop};
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
        drop(inner);
        // A crashed process is not restarted any more.
        for pid in self.down_pids() {
            self.end_down(pid, "shutdown", Err(Error::Cancelled));
        }
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
        inner.restarts.clear();
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
            // What was sent through addresses (in the last step, or from
            // outside) goes out before anything else happens.
            self.deliver_posted();
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
            let faults = self.faults.get();
            if !inner.stopping() && inner.shutdown_rng.chance(faults.shutdown) {
                drop(inner);
                self.begin_shutdown(faults.shutdown_deadline, "fault");
                continue;
            }
            if !inner.live.is_empty() && inner.terminate_rng.chance(faults.terminate) {
                let victim = if faults.only_process.is_none() {
                    let len = inner.live.len();
                    let n = inner.terminate_rng.index(len);
                    Some(*inner.live.keys().nth(n).expect("n < len"))
                } else {
                    // Among the processes the faults are aimed at.
                    let aimed: Vec<Pid> = inner
                        .live
                        .iter()
                        .filter(|(_, e)| e.aimed)
                        .map(|(pid, _)| *pid)
                        .collect();
                    let n = inner.terminate_rng.index(aimed.len());
                    aimed.get(n).copied()
                };
                drop(inner);
                if let Some(victim) = victim {
                    let _ = self.terminate(victim, "fault");
                }
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

/// The processes a liveness check ([`Sim::check_liveness`]) required to
/// finish that did not: after every fault was healed, they had not ended
/// by the deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Unfinished {
    /// When the faults were healed (virtual time).
    pub healed_at: Duration,
    /// The deadline they had to finish by (virtual time).
    pub deadline: Duration,
    /// The processes that had not ended, each with its name if it was
    /// started by name ([`Sim::submit_named`]).
    pub pids: Vec<(Pid, Option<String>)>,
    /// What the run did, both phases together.
    pub report: Report,
}

impl fmt::Display for Unfinished {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} process(es) did not finish by t={}us, with every fault healed at t={}us:",
            self.pids.len(),
            self.deadline.as_micros(),
            self.healed_at.as_micros()
        )?;
        for (pid, name) in &self.pids {
            match name {
                Some(name) => write!(f, " {pid} ({name})")?,
                None => write!(f, " {pid}")?,
            }
        }
        if self.report.step_limit_hit {
            write!(f, " (the step limit was hit)")?;
        }
        Ok(())
    }
}

impl std::error::Error for Unfinished {}

impl<P: Process + 'static> Shared<P>
where
    P::Command: Command,
{
    /// Runs until `heal_at`, heals every fault, then runs until every
    /// process of `pids` has ended or the clock would pass `heal_at +
    /// within`.
    pub(crate) fn check_liveness(
        self: &Rc<Self>,
        heal_at: Duration,
        within: Duration,
        pids: &[Pid],
    ) -> Result<Report, Unfinished> {
        let first = self.drive(&|| false, Some(heal_at));
        self.heal();
        let healed_at = self.inner.borrow().now;
        let deadline = healed_at + within;
        let cells: Vec<(Pid, Option<ResultCell<P>>)> = {
            let inner = self.inner.borrow();
            pids.iter()
                .map(|pid| (*pid, inner.results.get(pid).map(|(c, _)| Rc::clone(c))))
                .collect()
        };
        let ended = |cell: &Option<ResultCell<P>>| {
            cell.as_ref()
                .is_some_and(|c| !matches!(*c.borrow(), Outcome::Pending))
        };
        let second = self.drive(&|| cells.iter().all(|(_, c)| ended(c)), Some(deadline));
        let report = Report {
            steps: first.steps + second.steps,
            shutdown: second.shutdown.or(first.shutdown),
            step_limit_hit: first.step_limit_hit || second.step_limit_hit,
            ..second
        };
        let inner = self.inner.borrow();
        let unfinished: Vec<(Pid, Option<String>)> = cells
            .iter()
            .filter(|(_, c)| !ended(c))
            .map(|(pid, _)| {
                let name = inner.named.get(pid).map(|n| n.name.to_string());
                (*pid, name)
            })
            .collect();
        if unfinished.is_empty() {
            Ok(report)
        } else {
            Err(Unfinished {
                healed_at,
                deadline,
                pids: unfinished,
                report,
            })
        }
    }
}
