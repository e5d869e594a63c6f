//! [`Stats`]: a snapshot of a scheduler's counters.

use stepsched_pool::WorkerStats;

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
