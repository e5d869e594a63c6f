//! stepsched: a work-stealing scheduler for step-based processes.
//!
//! A [`Process`] is a state machine. The scheduler calls
//! [`init`](Process::init) once with an entry method and input, then
//! [`step`](Process::step) again and again with the [`Event`]s that arrived
//! since the last step — yield completions, messages, a cancel signal; at
//! most 256 from its queue per step, the rest at the next one. The
//! step writes its [`Status`] and any *yields* (commands with a correlation
//! tag) into a [`StepOutput`]; the scheduler dispatches each yield to the
//! [`Handler`] registered for its [`Command`], and the handler's
//! [`Completer`] — used at once or later, from any thread — turns the
//! result into an event for the next step.
//!
//! Workers keep local Chase-Lev deques ([`deque`]), take from a global FIFO
//! queue in batches, and steal half of a victim's deque when idle
//! ([`pool`]). Each process has a lock-free event queue ([`mpsc`]) and an
//! atomic state cell with a wakeup flag ([`process`]); PIDs route messages
//! ([`relay`]).
//!
//! ```
//! use stepsched::{Completer, Context, Error, Events, Process, Scheduler, Status, StepOutput};
//!
//! /// Doubles a number through a handler, then finishes with it.
//! struct Doubler {
//!     value: i64,
//!     asked: bool,
//! }
//!
//! impl Process for Doubler {
//!     type Input = i64;
//!     type Message = i64;
//!     type Response = i64;
//!     type Command = String;
//!     type Output = i64;
//!
//!     fn init(&mut self, _: &Context<'_, Self>, method: &str, input: i64) -> Result<(), Error> {
//!         match method {
//!             "double" => {
//!                 self.value = input;
//!                 Ok(())
//!             }
//!             other => Err(Error::UnknownMethod(other.to_string())),
//!         }
//!     }
//!
//!     fn step(&mut self, _cx: &mut Context<'_, Self>, events: Events<'_, i64>, out: &mut StepOutput<String, i64>) -> Result<(), Error> {
//!         for event in events {
//!             if let Some(v) = event.into_data() {
//!                 out.set_status(Status::Done(v));
//!                 return Ok(());
//!             }
//!         }
//!         if !self.asked {
//!             self.asked = true;
//!             out.push_yield(1, "double".to_string());
//!             out.set_status(Status::Yield);
//!         } else {
//!             out.set_status(Status::Yield);
//!         }
//!         Ok(())
//!     }
//! }
//!
//! let value = 21;
//! let scheduler = Scheduler::<Doubler>::builder()
//!     .workers(2)
//!     .handler("double", move |_cmd: String, done: Completer<Doubler>| {
//!         done.complete(Ok(2 * value));
//!     })
//!     .build()
//!     .unwrap();
//! let pid = scheduler.allocate_pid();
//! let join = scheduler
//!     .submit(pid, Doubler { value: 0, asked: false }, "double", 21)
//!     .unwrap();
//! assert_eq!(join.join().unwrap(), 42);
//!
//! // An unknown entry method is refused at submit.
//! let err = scheduler
//!     .submit(scheduler.allocate_pid(), Doubler { value: 0, asked: false }, "triple", 1)
//!     .unwrap_err();
//! assert!(matches!(err, stepsched::SubmitError::Init(Error::UnknownMethod(_))));
//! ```
//!
//! # Guarantees
//!
//! * Each process is stepped by at most one worker at a time, and completes
//!   exactly once: its result is published once, `close` is called once.
//! * The result is published after `close`: when [`JoinHandle::join`]
//!   returns, the process is closed, the completion hook has run, and its
//!   PID and its place under the process limit are free (except for a step
//!   that never returns at shutdown, whose result shutdown publishes
//!   without waiting for it).
//! * No completion or message pushed to a live process is lost: it is in
//!   the events of a later step. Messages from one sender arrive in order.
//!   Events still queued when a process completes (also by terminate or
//!   shutdown) are dropped, never stepped.
//! * A successful [`Handle::terminate`] means the result is
//!   [`Error::Terminated`].
//! * A panic in `init`, `step` or a handler fails only that process (or that
//!   yield, as an error completion); the worker goes on.
//! * A process that keeps running — returning `Continue`, or woken again
//!   and again while it runs — cannot starve others: it goes to the back
//!   of the global queue.
//! * [`Scheduler::shutdown`] never waits much past its deadline, and a
//!   submit racing it either fails with [`SubmitError::Stopping`] or its
//!   process completes. Called on one of the scheduler's own workers it
//!   refuses at once ([`ShutdownError::OnWorker`]) instead of blocking.
//! * [`Handle::begin_shutdown`] may be called from any thread — a handler
//!   or a step on one of the workers included — and returns at once; its
//!   [`Shutdown`] is a `Future` of the report.
//! * A failed [`Handle::send`] or [`Handle::terminate`] to a PID from
//!   [`Handle::allocate_pid`] whose process has finished always answers
//!   [`SendError::Closed`] / [`TerminateError::AlreadyComplete`].
//!
//! The design, with the life of a process through its states, is in
//! `docs/architecture.md`.
//!
//! # Cargo features
//!
//! * `tracing` (default): debug and trace events of each process's life
//!   and of the workers, through the `tracing` crate (the guide's
//!   "Tracing" lists them). Without it they compile to nothing and the
//!   crate does not depend on `tracing`.
#![cfg_attr(not(test), warn(missing_docs))]
// Without the `tracing` feature the events compile to nothing, leaving the
// values computed only for them unused; the default build checks them all.
#![cfg_attr(not(feature = "tracing"), allow(unused_variables, dead_code))]

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The guide's snippets (`docs/guide.md`), compiled and run as doctests.
#[doc = include_str!("../guide.md")]
#[cfg(doctest)]
pub struct GuideDoctests;

mod address;
mod builder;
mod context;
mod group;
mod handle;
mod handler;
mod inbox;
mod join;
mod lent;
mod primitive;
mod result;
mod scheduler;
mod shutdown;
mod slot;
mod stats;
mod step;
mod trace;

pub use stepsched_deque as deque;
pub use stepsched_mpsc as mpsc;
pub use stepsched_pool as pool;
pub use stepsched_process as process;
pub use stepsched_relay as relay;

/// Under loom only: whether processes submitted from this thread create
/// their event queue at once (see `tests/loom.rs`).
#[cfg(stepsched_loom)]
#[doc(hidden)]
pub use primitive::once::eager_event_queues;

pub use address::Address;
pub use builder::Builder;
pub use context::{ContextExt, HostTime};
pub use group::Members;
pub use handle::Handle;
pub use handler::{Completer, Handler, Variant};
pub use join::JoinHandle;
pub use scheduler::{Scheduler, Shutdown};
pub use shutdown::{ShutdownError, ShutdownReport};
pub use stats::Stats;
pub use stepsched_pool::WorkerStats;
pub use stepsched_process::Command;
pub use stepsched_process::{
    CancelToken, Context, Error, Event, EventKind, Events, NoCommand, Package, Pid, Process,
    SendError, Status, StepOutput, SubmitError, Tag, TerminateError, Yield,
};
pub use stepsched_process::{Complete, PortableHandler, portable};
pub use stepsched_relay::Receiver;

/// A [`Process`] the scheduler can run: sendable, with sendable payloads,
/// outputs and named commands. Every such process implements it.
pub trait SchedProcess:
    Process<
        Message: Send + 'static,
        Response: Send + 'static,
        Command: Command + Send + 'static,
        Output: Send + 'static,
    > + Send
    + 'static
{
}

impl<P> SchedProcess for P where
    P: Process<
            Message: Send + 'static,
            Response: Send + 'static,
            Command: Command + Send + 'static,
            Output: Send + 'static,
        > + Send
        + 'static
{
}
