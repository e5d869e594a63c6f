//! The contract between a step scheduler and the processes it runs, and the
//! atomic state cell that lets many workers run them safely.
//!
//! A *process* is a state machine ([`Process`]). The scheduler calls
//! [`init`](Process::init) once with the name of one of the process's entry
//! points, then [`step`](Process::step) again and again with the
//! [`Event`]s that arrived since the last step (yield completions, messages,
//! a cancel signal). Each step writes a [`StepOutput`]: a [`Status`]
//! (continue, idle, yield, done with a result) and the [`Yield`]s — commands
//! with correlation tags that the scheduler hands to handlers; a handler's
//! result comes back as a completion event with the same tag. Finally
//! [`close`](Process::close) releases the process. Errors that a scheduler
//! reports are an [`Error`].
//!
//! A scheduler keeps one [`StateCell`] per process: its lifecycle (Ready,
//! Running, Blocked, Idle, Complete) and a wakeup flag in one atomic word,
//! changed by CAS transitions that tell the caller what to do next. It is
//! what guarantees that a process is run by at most one worker at a time,
//! is in at most one run queue, and never misses an event. The
//! [`state`] module documents the protocol the scheduler follows.
//!
//! ```
//! use stepsched_process::{Park, Start, StateCell, Wake};
//!
//! let cell = StateCell::new();            // submitted: Ready, queued
//! assert_eq!(cell.try_start(), Start::Started);
//! assert_eq!(cell.park_idle(), Park::Parked);   // step returned Idle
//! assert_eq!(cell.wake(), Wake::Queue);         // a message: the sender queues it
//! ```
//!
//! # Value types
//!
//! [`Process`] names its value types as associated types: `Input` (to
//! `init`), `Message` (what others send it), `Response` (what a handler
//! answers to one of its yields), `Command` (in yields) and `Output` (the
//! result). [`Event<M, R>`](Event) and [`StepOutput<C, R>`] are generic
//! over them and store them inline, so a runtime passes its own types
//! through the scheduler without boxing each event — a Lua or WASM host
//! uses its `Value` for all five, an actor framework a message enum and a
//! response type apart, with no unreachable arms. Associated types (rather
//! than trait parameters) keep a scheduler generic over the process type
//! alone.
//!
//! # Reach
//!
//! Each `init` and `step` gets a [`Context`]: the process's [`Pid`] and
//! [`CancelToken`], and through the scheduler's [`Reach`] the calls a
//! process makes beyond itself — [`send`](Context::send) (the recipient
//! sees the sender), [`spawn`](Context::spawn),
//! [`terminate`](Context::terminate) — and, from a step,
//! [`upgrade`](Context::upgrade): be replaced by another process under the
//! same PID, keeping every queued event. [`Pid`], [`Package`] and the
//! errors of those calls ([`SendError`], [`SubmitError`],
//! [`TerminateError`]) are defined here so that every layer shares them.
//!
//! # Handlers for every host
//!
//! A host hands each yield's command to a handler with a completer of its
//! own. [`Complete`] is what every host's completer can do (complete the
//! yield now, tell its PID and tag), and a [`PortableHandler`], generic
//! over it, is a handler written once that every host takes: the
//! `stepsched` scheduler and the `stepsched-sim` simulator with their
//! `Builder::portable_handler`, any host that takes closures with
//! [`portable`].

//! # Allocation
//!
//! [`Yields`] stores the first [`INLINE_YIELDS`] (two) yields inline and
//! the rest in a `Vec` that [`StepOutput::reset`] keeps, and a step's
//! [`Events`] drain a buffer the scheduler reuses: stepping allocates
//! nothing in steady state.
//!
//! # Feature flags and cfgs
//!
//! None. Under `--cfg stepsched_loom` the atomics come from loom, for the
//! model-checking tests of the state cell.
#![cfg_attr(not(test), warn(missing_docs))]

mod cancel;
mod command;
mod complete;
mod error;
mod event;
mod output;
mod package;
mod pid;
mod primitive;
mod process;
mod reach;
pub mod state;

pub use cancel::CancelToken;
pub use command::{Command, NoCommand};
pub use complete::{Complete, PortableHandler, portable};
pub use error::{BoxError, Error};
pub use event::{Event, EventKind, Events, Tag};
pub use output::{INLINE_YIELDS, Status, StepOutput, Yield, Yields, YieldsDrain, YieldsIter};
pub use package::Package;
pub use pid::{ParsePidError, Pid};
pub use process::{Context, Process, Upgrade, UpgradeTo};
pub use reach::{NoReach, Outbox, Reach, SendError, SubmitError, TerminateError};
pub use state::{Finish, ForceComplete, Park, Phase, Start, State, StateCell, Wake};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
