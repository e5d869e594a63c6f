//! [`Stats`]: a snapshot of a scheduler's counters.

use stepsched_pool::WorkerStats;
use stepsched_process::Phase;

use crate::SchedProcess;
use crate::handle::Handle;
use crate::primitive::sync::atomic::Ordering;

/// Counters of a scheduler, as a snapshot.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Per worker: items run (steps), steals, parks, global and inbox pops.
    pub workers: Vec<WorkerStats>,
    /// Live processes queued to run.
    pub ready: usize,
    /// Live processes being stepped.
    pub running: usize,
    /// Live processes waiting for yield completions.
    pub blocked: usize,
    /// Live processes waiting for messages.
    pub idle: usize,
    /// Live processes: submitted and not yet completed, plus submits in
    /// progress. This is what [`Builder::max_processes`] limits.
    pub live: usize,
    /// Processes submitted.
    pub submitted: u64,
    /// Processes completed with a result.
    pub completed: u64,
    /// Processes ended by an error (including terminate and cancel).
    pub failed: u64,
    /// Steps run.
    pub steps: u64,
}

impl<P: SchedProcess> Handle<P> {
    /// A snapshot of the scheduler's counters.
    pub fn stats(&self) -> Stats {
        let core = &self.core;
        let mut by_phase = [0usize; 5];
        for (_, slot) in core.routes.snapshot() {
            let i = match slot.state.load().phase() {
                Phase::Ready => 0,
                Phase::Running => 1,
                Phase::Blocked => 2,
                Phase::Idle => 3,
                Phase::Complete => 4,
            };
            by_phase[i] += 1;
        }
        Stats {
            workers: core.pool().stats(),
            ready: by_phase[0],
            running: by_phase[1],
            blocked: by_phase[2],
            idle: by_phase[3],
            // Relaxed: a snapshot of independent counters.
            live: if core.limited {
                core.live.load(Ordering::Relaxed)
            } else {
                // Without a limit `live` is not kept: derive it. The
                // counters are bumped before a result is stored, so a
                // process whose `join` returned is not counted.
                let submitted = core.submitted.load(Ordering::Relaxed);
                let ended: u64 = core
                    .counters
                    .iter()
                    .map(|c| c.completed.load(Ordering::Relaxed) + c.failed.load(Ordering::Relaxed))
                    .sum();
                submitted.saturating_sub(ended) as usize
            },
            submitted: core.submitted.load(Ordering::Relaxed),
            completed: core
                .counters
                .iter()
                .map(|c| c.completed.load(Ordering::Relaxed))
                .sum(),
            failed: core
                .counters
                .iter()
                .map(|c| c.failed.load(Ordering::Relaxed))
                .sum(),
            steps: core
                .counters
                .iter()
                .map(|c| c.steps.load(Ordering::Relaxed))
                .sum(),
        }
    }
}
