//! [`Stats`]: a snapshot of a scheduler's counters.
//!
//! # What a snapshot costs
//!
//! [`Handle::stats`] reads a fixed set of counter lines — one per worker,
//! a few for the other threads — and the pool's per-worker counters: its
//! cost grows with the number of workers, never with the number of
//! processes. No phase is looked up per process.
//!
//! The per-phase counts (`ready`, `running`, `blocked`, `idle`) are kept
//! as counts of *transitions*: every thread that moves a process from one
//! phase to another (a worker starting, parking or requeueing it, a waker
//! queueing it, a forcer completing it) adds one to a counter of that
//! transition on its own line, and a phase count is what went in minus
//! what went out, summed over the lines at read time. A worker's line has
//! one writer and is written with a plain load and store; the other threads
//! (handler threads completing yields, senders, terminate) add with an
//! atomic `fetch_add` to one of eight lines, shared only when more than
//! eight such threads count.

use std::fmt;

use stepsched_pool::WorkerStats;

use crate::SchedProcess;
use crate::handle::Handle;
use crate::primitive::sync::atomic::Ordering;

/// Counters of a scheduler, as a snapshot.
///
/// Each counter is exact as of a recent moment, but the counters are read
/// one after another while workers keep going, so while processes move they
/// may be momentarily inconsistent with each other: a process that is
/// changing phase may be missing from the phase counts or counted in two,
/// and `ready + running + blocked + idle` may differ from `live`. At a
/// quiescent point — nothing running, nothing in flight — they agree and
/// are exact.
///
/// `{}` prints one line; `{:#}` adds one line per worker.
///
/// ```
/// # use stepsched::{Context, Error, Events, Process, Scheduler, Status, StepOutput};
/// # struct Nop;
/// # impl Process for Nop {
/// #     type Input = (); type Message = (); type Response = (); type Command = String; type Output = ();
/// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
/// #     fn step(&mut self, _cx: &mut Context<'_, Self>, _: Events<'_, ()>, out: &mut StepOutput<String, ()>) -> Result<(), Error> {
/// #         out.set_status(Status::Done(()));
/// #         Ok(())
/// #     }
/// # }
/// let scheduler = Scheduler::<Nop>::builder().workers(2).build().unwrap();
/// let join = scheduler.submit(scheduler.allocate_pid(), Nop, "run", ()).unwrap();
/// join.join().unwrap();
/// let stats = scheduler.stats();
/// assert_eq!((stats.submitted, stats.completed, stats.live), (1, 1, 0));
/// let line = stats.to_string();
/// assert!(line.starts_with("live 0 (ready 0, running 0, blocked 0, idle 0)"));
/// assert!(!line.contains('\n'));
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Per worker: items run (steps), steals, parks, global and inbox pops.
    pub workers: Vec<WorkerStats>,
    /// Live processes queued to run (Ready), including submitted processes
    /// not yet started.
    pub ready: usize,
    /// Live processes being stepped (Running).
    pub running: usize,
    /// Live processes waiting for yield completions (Blocked).
    pub blocked: usize,
    /// Live processes waiting for messages (Idle).
    pub idle: usize,
    /// Live processes: submitted and not yet completed, plus submits in
    /// progress. This is what [`Builder::max_processes`] limits.
    ///
    /// [`Builder::max_processes`]: crate::Builder::max_processes
    pub live: usize,
    /// Processes submitted.
    pub submitted: u64,
    /// Processes completed with a result.
    pub completed: u64,
    /// Processes ended by an error (including terminate and cancel).
    pub failed: u64,
    /// Steps run.
    pub steps: u64,
    /// Messages received: message events handed to steps (by PID, by
    /// address or from the host; each counted once, when a step is given
    /// it). Messages still queued, or dropped with a process that ended,
    /// are not counted.
    pub messages: u64,
}

impl<P: SchedProcess> Handle<P> {
    /// A snapshot of the scheduler's counters; see [`Stats`] for how
    /// consistent it is.
    ///
    /// Costs O(workers), whatever the number of live processes: it sums a
    /// fixed number of per-thread counter lines (see the `stats` module
    /// docs), so a monitoring loop may call it often.
    pub fn stats(&self) -> Stats {
        let core = &self.core;
        // Relaxed: a snapshot of independent counters.
        let totals = core.counters.totals(core.submitted.load(Ordering::Relaxed));
        let submitted = totals.submitted;
        Stats {
            workers: core.pool().stats(),
            ready: totals.phases.ready,
            running: totals.phases.running,
            blocked: totals.phases.blocked,
            idle: totals.phases.idle,
            // Relaxed: as above.
            live: if core.limited {
                core.live.load(Ordering::Relaxed)
            } else {
                // Without a limit `live` is not kept: derive it. The
                // counters are bumped before a result is stored, so a
                // process whose `join` returned is not counted.
                let ended = totals.completed.wrapping_add(totals.failed);
                submitted.saturating_sub(ended) as usize
            },
            submitted,
            completed: totals.completed,
            failed: totals.failed,
            steps: totals.steps,
            messages: totals.messages,
        }
    }
}

impl fmt::Display for Stats {
    /// One line:
    ///
    /// ```text
    /// live 3 (ready 0, running 1, blocked 2, idle 0); submitted 10, completed 6, failed 1, steps 40, messages 12; 2 workers: run 40, stolen 3 in 9 attempts, parks 5, unparks 4 (1 empty), global 10, inbox 2, panics 0
    /// ```
    ///
    /// The worker figures are totals over the workers. With `{:#}`, one
    /// more line per worker follows, with that worker's figures.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "live {} (ready {}, running {}, blocked {}, idle {}); \
             submitted {}, completed {}, failed {}, steps {}, messages {}; {} workers: ",
            self.live,
            self.ready,
            self.running,
            self.blocked,
            self.idle,
            self.submitted,
            self.completed,
            self.failed,
            self.steps,
            self.messages,
            self.workers.len(),
        )?;
        let total = self
            .workers
            .iter()
            .fold(WorkerStats::default(), |t, w| t.merged(w));
        write_worker(f, &total)?;
        if f.alternate() {
            for (i, w) in self.workers.iter().enumerate() {
                write!(f, "\n  worker {i}: ")?;
                write_worker(f, w)?;
            }
        }
        Ok(())
    }
}

/// A worker's figures, as `Stats`'s `Display` prints them.
fn write_worker(f: &mut fmt::Formatter<'_>, w: &WorkerStats) -> fmt::Result {
    write!(
        f,
        "run {}, stolen {} in {} attempts, parks {}, unparks {} ({} empty), global {}, inbox {}, panics {}",
        w.items_run,
        w.items_stolen,
        w.steal_attempts,
        w.parks,
        w.unparks,
        w.empty_unparks,
        w.global_pops,
        w.inbox_pops,
        w.panics
    )
}
