//! A deterministic, single-threaded simulator for [`Process`]es: the same
//! process types the `stepsched` scheduler runs, stepped one at a time in
//! an order drawn from a seeded random number generator, with virtual time
//! and optional injected [`Faults`].
//!
//! A [`Sim`] is built like the scheduler ([`Sim::builder`], one handler per
//! command name, factories for upgrades), takes processes with
//! [`submit`](Sim::submit) (which hands back a [`JoinHandle`]), messages
//! with [`send`](Sim::send), and [`run`](Sim::run)s until nothing can
//! happen any more — or until one process's result is there
//! ([`JoinHandle::join`]), or through a [`shutdown`](Sim::shutdown). Every
//! step is recorded as one line of a [`trace`](Sim::trace); the same seed
//! gives the same trace, byte for byte, so a failure found under one seed
//! is replayed by running that seed again ([`seed_from_env`] reads it from
//! `STEPSCHED_SIM_SEED`).
//!
//! # What is simulated
//!
//! - **Order.** Each iteration picks one runnable process at random and
//!   steps it with the events queued for it, at most [`MAX_BATCH`] of
//!   them (the rest wait for its next step, as in the scheduler). Messages
//!   from one sender keep their order (as in the scheduler); events from
//!   different senders, and completions, arrive in the order they were
//!   queued unless [`Faults::reorder`] shuffles them.
//! - **Time.** Handlers complete now ([`Completer::complete`]) or at a
//!   virtual time ([`Completer::complete_after`]). When no process is
//!   runnable, the clock jumps to the next timer: nothing sleeps.
//! - **The step rules of the scheduler.** A step that sets no status ends
//!   its process with an error; a panicking `step` or `init` fails only its
//!   process; a panicking handler completes its yield with
//!   [`Error::Panicked`]; yields are dispatched whatever the status except
//!   `Done`; a `Done` process's queued events are dropped; `close` is
//!   called exactly once; a `Continue` process is runnable again at once;
//!   an `Idle` or `Yield` process waits for an event. [`Context::upgrade`]
//!   and [`Context::upgrade_from`] (with a factory registered by
//!   [`Builder::factory`]) replace the process under its PID.
//! - **The network** ([`Network`], turned on by [`Builder::network`]; off
//!   by default, when a send is delivered at once). Every send goes
//!   through it ([`Context::send`] from a step, [`Sim::send`] from the
//!   test): a delay per message drawn from a range (zero by default),
//!   loss, duplication, reordering on a link as independent delays make
//!   it ([`Network::fifo`] keeps each link in order; off by default), and
//!   partitions, random ([`Network::partitions`]) or scripted
//!   ([`Sim::partition`], [`Sim::isolate`], which also work without a
//!   network); one link can have a network of its own ([`Sim::link`]).
//!   With no delay and no faults it changes nothing, byte for
//!   byte. Each network event writes a trace line (`net delay
//!   <0.1>-><0.2> #3 +1500us`, `net drop ... #3`, `net drop ... #3
//!   (partition)`, `net dup ... #3`, `net partition <0.1> | <0.2> from
//!   t=2000us heal t=9000us`), just before the line of the step that sent
//!   the message (or at the time a message in flight is dropped).
//! - **Time for processes.** The `stepsched` scheduler's
//!   `ContextExt::now` reads a process's clock and `ContextExt::after`
//!   sets a timer that delivers a message to the process, from itself:
//!   real time under the scheduler, virtual time here, so the same
//!   process code runs under both. A timer goes on the simulator's timer
//!   queue (not through the network) and writes `timer #3 +5000us` when
//!   set, `timer #3 fired` when delivered. The simulator offers both
//!   through its reach ([`Reach::as_any`] answers a `stepsched::HostTime`,
//!   a protocol made of `std` types: this crate does not depend on the
//!   scheduler). With [`Faults::clock_skew`] (off by default) each
//!   process's clock runs ahead of virtual time by an offset of its own,
//!   from 0 to the bound (and with [`Faults::clock_drift`], fast or slow),
//!   drawn once from its own stream, one trace line per process
//!   (`fault clock-skew +1234us`).
//! - **Addresses.** The `stepsched` scheduler's `ContextExt::address` and
//!   `ContextExt::spawn_address` work in a simulated step: the address
//!   sends through the simulator's outbox ([`Reach::outbox`], a
//!   [`stepsched_process::Outbox`]), and the simulator delivers what was
//!   sent, in order, before the step's next `Context::send` and at the
//!   step's end, as it delivers a step's `Context::send` (through the
//!   network, in the trace), so a process written with addresses runs
//!   under both hosts and a step's sends keep their order. An address
//!   names a process, not a PID: once it ended for good the address is
//!   closed, whatever is submitted later under that PID; one of a crashed
//!   process awaiting its restart is not. The scheduler's `Handle` has
//!   no counterpart here ([`Sim::send`] is the test's send).
//! - **Crash and restart.** A process started by name
//!   ([`Sim::submit_named`], from the factory of that name) can crash
//!   between steps ([`Faults::crash`], [`Sim::crash`]): it is dropped
//!   without `close`, with its queued events, pending completions and
//!   timers, and after a virtual delay a new process from its factory
//!   starts under the same PID; messages sent to it while it is down are
//!   dropped. What survives is what it synced to its [`DurableStore`]
//!   ([`SimContextExt::with_store`]); a crash loses the unsynced writes,
//!   or, with [`Faults::keep_unsynced`], keeps each with a probability,
//!   out of order (a disk that reorders what it has not synced).
//!   Faults can be aimed at the processes of one name
//!   ([`Faults::only_process`]) or the commands of one name
//!   ([`Faults::only_handler`]).
//! - **Exploration.** Swarm testing ([`Faults::swarm`]: each seed keeps
//!   or turns off whole kinds of fault, and the trace's first line says
//!   which), and a liveness check ([`Sim::check_liveness`]: run with
//!   the faults, [heal](Sim::heal) them all at a virtual time, then
//!   require the given processes to finish by a deadline, or report
//!   them: [`Unfinished`]).
//! - **Shutdown.** [`Sim::shutdown`] does what the scheduler's does: new
//!   submits are refused with [`SubmitError::Stopping`], every live process
//!   gets its [`CancelToken`] cancelled and a cancel event, and those still
//!   live at the deadline (virtual time) are closed with
//!   [`Error::Cancelled`].
//!
//! # Replay
//!
//! Every random decision draws from a stream of its own ([`SimRng`]),
//! seeded from the run's seed and the decision's name by a fixed, portable
//! hash (never `std`'s `RandomState`): the schedule, each fault, the random
//! sources of processes ([`SimContextExt`]) and handlers
//! ([`Completer::rng`]), and the test's own ([`Sim::rng`]). The schedule and
//! the faults that concern one process (delay, reorder, short batch, the
//! handler faults, crash) have one stream per process, seeded also from
//! its PID (and, after a restart, from its incarnation);
//! the network's decisions (delay, loss, duplicate, partition) one stream
//! per link, seeded also from both ends' PIDs. So:
//!
//! - turning one fault off, or setting it so low that it never fires,
//!   changes no other decision: the trace of a seed stays the same, byte
//!   for byte; the same for each of the network's faults, and a network
//!   with no delay and no faults is the same as none;
//! - a process that does nothing (an idle one, whose PID is allocated
//!   after the others', so that theirs stay the same: streams follow
//!   PIDs) changes no other process's schedule: each ready process gets a
//!   key from its own stream (a race of exponential clocks: each is as
//!   likely to step next as in a uniform draw), and the smallest steps
//!   next. The terminate and shutdown faults are drawn once per step of
//!   the whole simulation, so with those on, any added step moves them.
//!
//! Every injected fault writes a line to the trace (see [`Faults`]).
//!
//! ## What breaks replay
//!
//! The simulator replays a seed only if the processes and handlers do the
//! same for the same events. They must not depend on:
//!
//! - the iteration order of a `HashMap` or `HashSet` with `std`'s
//!   `RandomState` (random per map): iterate a `BTreeMap`, sort the keys,
//!   or use a hasher with a fixed seed;
//! - thread-locals or statics that carry state from one run to the next
//!   (a counter, a cache, an id generator): keep such state in the process
//!   or reset it for each run;
//! - real time (`Instant::now`, `SystemTime::now`): use the virtual clock
//!   ([`Sim::now`], [`Completer::complete_after`], and in a process
//!   `stepsched`'s `ContextExt::now` and `ContextExt::after`);
//! - real randomness (`rand::thread_rng`, `fastrand` without a seed, OS
//!   entropy): draw from [`SimContextExt::with_rng`] in a process,
//!   [`Completer::rng`] in a handler, [`Sim::rng`] in the test;
//! - threads of their own, or anything else the simulator does not step
//!   (a handler that completes from another thread): everything runs on
//!   the simulator's thread, in its order.
//!
//! [`check_determinism`] runs one seed twice, in the same process, and
//! reports the first trace line that differs ([`Divergence`]): run it on a
//! new test once to catch such a dependency.
//!
//! # Differences from the scheduler
//!
//! - There is one order of events per seed, not the scheduler's races: a
//!   handler that completes during dispatch queues its completion like
//!   any other event, for a later step; the scheduler may step the process
//!   again at once with it.
//! - Steps take no virtual time. A process that returns `Continue`
//!   forever is stopped only by the step limit ([`Builder::max_steps`]),
//!   also during a shutdown, where the scheduler would force it at the
//!   deadline.
//! - No process limit. Dropping the [`Sim`] closes the processes still
//!   live, without stepping them again, and their results become
//!   [`Error::Cancelled`] (the scheduler's drop runs a short shutdown).
//! - Processes, their value types and handlers need not be `Send`.
//! - Messages between processes of one scheduler are not lost, delayed or
//!   reordered per sender; the [`Network`] simulates what lies between
//!   nodes (or a misbehaving transport), and is off unless asked for.
//!
//! # Commands
//!
//! A handler is found by the name a command gives through [`Command`], the
//! trait of `stepsched-process` that the `stepsched` scheduler re-exports
//! too: a command type implements it once for both.
//!
//! # One set of handlers
//!
//! A handler written once for both hosts is a [`PortableHandler`]: generic
//! over [`Complete`], what this crate's [`Completer`] and the scheduler's
//! can both do (complete now, tell the PID and the tag). Both builders take
//! the same value with `portable_handler` ([`Builder::portable_handler`]
//! here), so a test under the simulator runs the handler the program runs.
//! What only the simulator can do ([`Completer::complete_after`],
//! [`Completer::never`], [`Completer::rng`]) stays on its own completer.
//!
//! # Features
//!
//! - `proptest` (off by default): the `strategy` module, proptest
//!   strategies for seeds and fault settings.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use stepsched_process::{Context, Error, Event, Events, Process, Status, StepOutput};
//! use stepsched_sim::Sim;
//!
//! /// Yields one "sleep" and finishes with its answer.
//! struct Sleeper;
//! impl Process for Sleeper {
//!     type Input = ();
//!     type Message = ();
//!     type Response = u32;
//!     type Command = &'static str;
//!     type Output = u32;
//!     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
//!     fn step(&mut self, _: &mut Context<'_, Self>, events: Events<'_, (), u32>, out: &mut StepOutput<&'static str, u32>) -> Result<(), Error> {
//!         for event in events {
//!             if let Event::Completion { result, .. } = event {
//!                 out.set_status(Status::Done(result?));
//!                 return Ok(());
//!             }
//!         }
//!         out.push_yield(1, "sleep");
//!         out.set_status(Status::Yield);
//!         Ok(())
//!     }
//! }
//!
//! let sim = Sim::<Sleeper>::builder()
//!     .seed(7)
//!     .handler("sleep", |_, done| { done.complete_after(Duration::from_secs(60), Ok(5)); })
//!     .build();
//! let pid = sim.allocate_pid();
//! let join = sim.submit(pid, Sleeper, "main", ()).unwrap();
//! assert_eq!(join.join(), Ok(5));
//! assert_eq!(sim.now(), Duration::from_secs(60));
//! ```

mod builder;
mod check;
mod completer;
mod context;
mod crash;
mod faults;
mod join;
mod net;
mod outbox;
mod process;
mod rng;
mod run;
mod sim;
mod state;
mod store;
#[cfg(feature = "proptest")]
pub mod strategy;
mod time;
mod trace;

pub use builder::Builder;
pub use check::{Divergence, check_determinism};
pub use completer::Completer;
pub use context::SimContextExt;
pub use faults::Faults;
pub use join::JoinHandle;
pub use net::Network;
pub use rng::SimRng;
pub use run::{Report, ShutdownReport, Unfinished};
pub use sim::Sim;
pub use stepsched_process::Command;
#[cfg(doc)]
use stepsched_process::{CancelToken, Context, Error, Process, Reach, SubmitError};
pub use stepsched_process::{Complete, PortableHandler, portable};
pub use store::DurableStore;

/// The environment variable [`seed_from_env`] reads.
pub const SEED_ENV: &str = "STEPSCHED_SIM_SEED";

/// The most events one step is handed, as in the scheduler; the rest wait
/// for the process's next step (it stays runnable).
pub const MAX_BATCH: usize = 256;

/// The seed in the environment variable `STEPSCHED_SIM_SEED` (decimal), or
/// `default` when it is unset or not a number: a test runs its own seed,
/// and a failure it printed is replayed by setting the variable.
///
/// ```
/// assert_eq!(stepsched_sim::seed_from_env(3), std::env::var("STEPSCHED_SIM_SEED")
///     .ok().and_then(|s| s.trim().parse().ok()).unwrap_or(3));
/// ```
#[must_use]
pub fn seed_from_env(default: u64) -> u64 {
    std::env::var(SEED_ENV)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
