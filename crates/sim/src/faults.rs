//! [`Faults`]: what the simulator injects, and how often.

use std::time::Duration;

#[cfg(doc)]
use stepsched_process::Error;

use crate::Network;
use crate::rng::{self, SimRng};
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
/// (fault)`, `fault clock-skew +1234us`, `fault crash lost=2 restart
/// t=9000us`).
///
/// # Aimed faults
///
/// [`only_process`](Self::only_process) aims the faults at the processes
/// of one name (given by [`Sim::submit_named`]): the faults of a process
/// (delay, reorder, short batch, the handler faults, crash, clock skew
/// and drift) hit only those, the terminate fault picks its victims among
/// them, and a [`Network`]'s loss, duplication and random partitions hit
/// only the links with one of them at an end. [`only_handler`](Self::only_handler)
/// aims the faults of a yield (delay, handler error, handler panic, never
/// complete) at the commands of one name. Both may be set; the shutdown
/// fault is never aimed. A process or yield that is not aimed at draws
/// nothing for those faults, as if they were off.
///
/// ```
/// use stepsched_sim::Faults;
///
/// // Crash the process named "storage" now and then, and fail or delay
/// // only its "disk" yields.
/// let faults = Faults { handler_error: 0.1, delay: 0.2, ..Faults::default() }
///     .crash(0.05)
///     .only_process("storage")
///     .only_handler("disk");
/// assert_eq!(faults.only_process, Some("storage"));
/// ```
///
/// # Swarm testing
///
/// With [`swarm`](Self::swarm), each seed keeps or turns off whole kinds
/// of fault (see [`swarm`](Self::swarm)), so that over many seeds some
/// runs see few kinds at once, which finds bugs that a mix of every kind
/// hides.
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
    /// The probability, after each step of a named process (one started by
    /// [`Sim::submit_named`]; others never crash), that it crashes: it is
    /// dropped without `close` (its result is not published), its queued
    /// events and pending completions and timers are lost, and so are its
    /// store's unsynced writes ([`DurableStore`]); after a delay of 1 ms to
    /// [`restart_delay`](Self::restart_delay) (whole milliseconds) it is
    /// restarted, under the same PID, from its factory. Drawn from a
    /// stream of its own per process (`fault:crash`). Trace line: `fault
    /// crash lost=2 restart t=9000us` (`lost`: the unsynced writes lost),
    /// then `restart <name>` at its restart.
    ///
    /// [`DurableStore`]: crate::DurableStore
    pub crash: f64,
    /// The longest delay from a crash to its restart (10 ms by default).
    pub restart_delay: Duration,
    /// The probability that a crash keeps an unsynced write of the
    /// crashed process's store, each write on its own (0 by default: a
    /// crash loses every unsynced write). A disk that reorders what it has
    /// not synced: a later write may survive where an earlier one is lost,
    /// a removal may survive where the write before it is lost. Drawn from
    /// a stream of its own per process (`fault:keep-unsynced`); the crash's
    /// trace line then says how many were kept: `fault crash lost=1 kept=2
    /// restart t=9000us`.
    pub keep_unsynced: f64,
    /// Aims the faults at the processes of this name (see "Aimed faults"
    /// above); `None` (the default): at every process.
    pub only_process: Option<&'static str>,
    /// Aims the faults of a yield at the commands of this name (see
    /// "Aimed faults" above); `None` (the default): at every command.
    pub only_handler: Option<&'static str>,
    /// Swarm testing (off by default): each run keeps each kind of fault
    /// set here (and each of its [`Network`]'s loss, duplication and
    /// random partitions) or turns it off, a coin toss per kind from a
    /// stream of the seed's own (`swarm`); the trace's first line says
    /// which kinds are on: `swarm on=[delay,crash] off=[reorder]` (the
    /// kinds set to zero here are in neither list). A kind's toss is the
    /// same whatever the other kinds are set to.
    ///
    /// The kinds, in this order: `delay`, `reorder`, `short-batch`,
    /// `terminate`, `handler-error`, `handler-panic`, `never-complete`,
    /// `shutdown`, `clock-skew` (with the drift), `crash`, `net-loss`,
    /// `net-duplicate`, `net-partition`, `keep-unsynced`.
    ///
    /// ```
    /// use stepsched_sim::Faults;
    ///
    /// let faults = Faults { delay: 0.1, reorder: 0.1, ..Faults::default() }.swarm(true);
    /// // Per seed: which kinds this one keeps.
    /// let kept = faults.swarmed(7);
    /// assert!(kept.delay == 0.0 || kept.delay == 0.1);
    /// assert!(!kept.swarm);
    /// ```
    pub swarm: bool,
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

    /// These faults with crashes of named processes, with probability `p`
    /// after each of their steps (see [`crash`](Self::crash)).
    ///
    /// ```
    /// use stepsched_sim::Faults;
    ///
    /// assert_eq!(Faults::default().crash(0.01).crash, 0.01);
    /// ```
    #[must_use]
    pub fn crash(mut self, p: f64) -> Self {
        self.crash = p;
        self
    }

    /// These faults with each unsynced write kept by a crash with
    /// probability `p` (see [`keep_unsynced`](Self::keep_unsynced)).
    ///
    /// ```
    /// use stepsched_sim::Faults;
    ///
    /// assert_eq!(Faults::default().keep_unsynced(0.5).keep_unsynced, 0.5);
    /// ```
    #[must_use]
    pub fn keep_unsynced(mut self, p: f64) -> Self {
        self.keep_unsynced = p;
        self
    }

    /// These faults with restarts from 1 ms to `max` after a crash (see
    /// [`restart_delay`](Self::restart_delay)).
    #[must_use]
    pub fn restart_delay(mut self, max: Duration) -> Self {
        self.restart_delay = max;
        self
    }

    /// These faults aimed at the processes named `name` (see "Aimed
    /// faults" above).
    #[must_use]
    pub fn only_process(mut self, name: &'static str) -> Self {
        self.only_process = Some(name);
        self
    }

    /// These faults' yield faults aimed at the commands named `name` (see
    /// "Aimed faults" above).
    #[must_use]
    pub fn only_handler(mut self, name: &'static str) -> Self {
        self.only_handler = Some(name);
        self
    }

    /// These faults with swarm testing on or off (see
    /// [`swarm`](Self::swarm)).
    #[must_use]
    pub fn swarm(mut self, on: bool) -> Self {
        self.swarm = on;
        self
    }

    /// The faults a run seeded with `seed` injects under swarm testing:
    /// these, with each kind kept or turned off by its coin toss (see
    /// [`swarm`](Self::swarm)), and `swarm` off. These faults as they
    /// are when `swarm` is off.
    #[must_use]
    pub fn swarmed(&self, seed: u64) -> Faults {
        self.swarm_with(seed, None).0
    }

    /// [`swarmed`](Self::swarmed), for a run with `network` too: both as
    /// swarm testing leaves them, and the trace line that says so (empty
    /// when `swarm` is off).
    pub(crate) fn swarm_with(&self, seed: u64, network: Option<&mut Network>) -> (Faults, String) {
        let mut faults = *self;
        if !self.swarm {
            return (faults, String::new());
        }
        faults.swarm = false;
        let mut rng = SimRng::stream(seed, rng::SWARM);
        // One toss per kind, always, in a fixed order: a kind's toss does
        // not depend on what the others are set to.
        let tosses: [bool; 14] = std::array::from_fn(|_| rng.next_u64() & 1 == 1);
        let mut on = Vec::new();
        let mut off = Vec::new();
        let mut toss = |i: usize, name: &'static str, set: bool| -> bool {
            if set {
                if tosses[i] {
                    on.push(name);
                } else {
                    off.push(name);
                }
            }
            tosses[i]
        };
        let mut keep = |i: usize, name: &'static str, p: &mut f64| {
            if !toss(i, name, *p > 0.0) {
                *p = 0.0;
            }
        };
        keep(0, "delay", &mut faults.delay);
        keep(1, "reorder", &mut faults.reorder);
        keep(2, "short-batch", &mut faults.short_batch);
        keep(3, "terminate", &mut faults.terminate);
        keep(4, "handler-error", &mut faults.handler_error);
        keep(5, "handler-panic", &mut faults.handler_panic);
        keep(6, "never-complete", &mut faults.never_complete);
        keep(7, "shutdown", &mut faults.shutdown);
        let clock = !faults.clock_skew.is_zero() || faults.clock_drift > 0.0;
        let mut drift = if clock { 1.0 } else { 0.0 };
        keep(8, "clock-skew", &mut drift);
        if drift == 0.0 {
            faults.clock_skew = Duration::ZERO;
            faults.clock_drift = 0.0;
        }
        keep(9, "crash", &mut faults.crash);
        let mut none = Network::default();
        let net = network.unwrap_or(&mut none);
        keep(10, "net-loss", &mut net.loss);
        keep(11, "net-duplicate", &mut net.duplicate);
        keep(12, "net-partition", &mut net.partition);
        keep(13, "keep-unsynced", &mut faults.keep_unsynced);
        let line = format!("swarm on=[{}] off=[{}]", on.join(","), off.join(","));
        (faults, line)
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
            crash: 0.0,
            restart_delay: Duration::from_millis(10),
            keep_unsynced: 0.0,
            only_process: None,
            only_handler: None,
            swarm: false,
        }
    }
}
