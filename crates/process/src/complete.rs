//! [`Complete`] and [`PortableHandler`]: a handler written once, for every
//! host that runs [`Process`]es.
//!
//! Each host hands a handler a completer of its own: the `stepsched`
//! scheduler's is `Send` and may complete from any thread; the
//! `stepsched-sim` simulator's is single-threaded and can also complete at
//! a virtual time. [`Complete`] is what both can do — complete the yield
//! now or after a delay by the host's clock, and say whose yield it is —
//! so a [`PortableHandler`], generic over
//! it, runs unchanged on either host, and a test of it under the simulator
//! tests the code that runs under the scheduler.

use std::rc::Rc;
use std::sync::Arc;

use crate::{Error, Pid, Process, Tag};

/// Completes one yield of one process, once: what every host's completer
/// can do.
///
/// The `stepsched` scheduler's `Completer` and the `stepsched-sim`
/// simulator's `Completer` implement it; a [`PortableHandler`] takes any
/// implementation. What only one host can do stays on that host's own
/// completer (the scheduler's is `Send`, to complete from another thread;
/// the simulator's completes at a virtual time, or never, and offers a
/// seeded random source).
///
/// A completer dropped without completing completes its yield with an
/// error, on every host: the process never waits for a completion that
/// cannot come.
///
/// A host of one's own, or a unit test of a handler, implements it too:
///
/// ```
/// use stepsched_process::{Complete, Error, Pid, Process, Tag};
/// # use stepsched_process::{Context, Events, StepOutput};
/// # struct Asker;
/// # impl Process for Asker {
/// #     type Input = (); type Message = (); type Response = u64; type Command = u64; type Output = ();
/// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
/// #     fn step(&mut self, _: &mut Context<'_, Self>, _: Events<'_, (), u64>, _: &mut StepOutput<u64, ()>) -> Result<(), Error> { Ok(()) }
/// # }
///
/// /// Records the result instead of delivering it.
/// struct Record<'a>(Tag, &'a mut Option<Result<u64, Error>>);
///
/// impl Complete<Asker> for Record<'_> {
///     fn pid(&self) -> Pid {
///         Pid::new(0, 1)
///     }
///     fn tag(&self) -> Tag {
///         self.0
///     }
///     fn complete(self, result: Result<u64, Error>) -> bool {
///         *self.1 = Some(result);
///         true
///     }
/// }
///
/// let mut got = None;
/// assert!(Record(7, &mut got).complete(Ok(42)));
/// assert_eq!(got, Some(Ok(42)));
/// ```
pub trait Complete<P: Process> {
    /// The PID of the process whose yield this completes.
    fn pid(&self) -> Pid;

    /// The correlation tag of the yield this completes.
    fn tag(&self) -> Tag;

    /// Completes the yield with `result`, which becomes an
    /// [`Event::completion`](crate::Event::completion) for a later step of
    /// the process. Whether the process was still live to receive it
    /// (`false`: the completion reaches nothing).
    fn complete(self, result: Result<P::Response, Error>) -> bool;

    /// Completes the yield with `result` once `delay` has passed, by the
    /// host's clock: real time under the `stepsched` scheduler (its timer
    /// thread), virtual time under the `stepsched-sim` simulator (its timer
    /// queue, under its delay faults). A handler that models work taking
    /// time (a disk, a remote call, a back-off) is then written once for
    /// both. Whether the process is live now (it may end before the time
    /// comes; the completion then reaches nothing).
    ///
    /// The default, for a host without a clock (a unit test's completer),
    /// completes at once.
    fn complete_after(self, delay: core::time::Duration, result: Result<P::Response, Error>) -> bool
    where
        Self: Sized,
    {
        let _ = delay;
        self.complete(result)
    }
}

/// A handler written once for every host: generic over the host's
/// completer ([`Complete`]), so the same value serves a command under the
/// `stepsched` scheduler and under the `stepsched-sim` simulator.
///
/// Register it with the scheduler's or the simulator's
/// `Builder::portable_handler(name, handler)`, or, with any host that takes
/// closures, as [`portable(handler)`](portable). Under both builders it
/// costs what a closure handler costs: the builder instantiates
/// [`handle`](Self::handle) for its own completer, with no allocation or
/// dynamic dispatch beyond a closure's.
///
/// What it can do with its completer is what every host can: complete
/// the yield now or after a delay by the host's clock
/// ([`Complete::complete_after`]: real time under the scheduler, virtual
/// time under the simulator), and read the PID and the tag. It completes
/// before it returns, in practice (the completer's type is the host's,
/// unknown to the handler, so it cannot be kept or sent anywhere). A
/// handler that completes from another thread is written for its host,
/// with that host's completer.
///
/// A shared reference, a `Box`, an `Rc` or an `Arc` of a handler is a
/// handler too: one value can serve several command names, or several
/// hosts.
///
/// ```
/// use stepsched_process::{Complete, Error, PortableHandler, Process};
/// # use stepsched_process::{Context, Events, Pid, StepOutput, Tag};
/// # struct Calc;
/// # impl Process for Calc {
/// #     type Input = (); type Message = (); type Response = i64; type Command = (i64, i64); type Output = ();
/// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
/// #     fn step(&mut self, _: &mut Context<'_, Self>, _: Events<'_, (), i64>, _: &mut StepOutput<(i64, i64), ()>) -> Result<(), Error> { Ok(()) }
/// # }
/// # struct Record<'a>(&'a mut Option<Result<i64, Error>>);
/// # impl Complete<Calc> for Record<'_> {
/// #     fn pid(&self) -> Pid { Pid::new(0, 1) }
/// #     fn tag(&self) -> Tag { 1 }
/// #     fn complete(self, result: Result<i64, Error>) -> bool { *self.0 = Some(result); true }
/// # }
///
/// /// Divides, or fails on a zero divisor.
/// struct Divide;
///
/// impl PortableHandler<Calc> for Divide {
///     fn handle<C: Complete<Calc>>(&self, (a, b): (i64, i64), done: C) {
///         done.complete(match a.checked_div(b) {
///             Some(q) => Ok(q),
///             None => Err(Error::failed("division by zero")),
///         });
///     }
/// }
///
/// // The scheduler: `Builder::portable_handler("divide", Divide)`; the
/// // simulator: the same. Here, a completer of one's own.
/// let mut got = None;
/// Divide.handle((84, 2), Record(&mut got));
/// assert_eq!(got, Some(Ok(42)));
/// ```
pub trait PortableHandler<P: Process> {
    /// Serves `command`; answers through `done`.
    fn handle<C: Complete<P>>(&self, command: P::Command, done: C);
}

impl<P: Process, H: PortableHandler<P> + ?Sized> PortableHandler<P> for &H {
    #[inline]
    fn handle<C: Complete<P>>(&self, command: P::Command, done: C) {
        (**self).handle(command, done);
    }
}

impl<P: Process, H: PortableHandler<P> + ?Sized> PortableHandler<P> for Box<H> {
    #[inline]
    fn handle<C: Complete<P>>(&self, command: P::Command, done: C) {
        (**self).handle(command, done);
    }
}

impl<P: Process, H: PortableHandler<P> + ?Sized> PortableHandler<P> for Rc<H> {
    #[inline]
    fn handle<C: Complete<P>>(&self, command: P::Command, done: C) {
        (**self).handle(command, done);
    }
}

impl<P: Process, H: PortableHandler<P> + ?Sized> PortableHandler<P> for Arc<H> {
    #[inline]
    fn handle<C: Complete<P>>(&self, command: P::Command, done: C) {
        (**self).handle(command, done);
    }
}

/// `handler` as a closure `Fn(P::Command, C)`, for a host whose builder
/// takes closures: the completer type `C` is inferred from what the
/// builder asks for. The closure is `Send` and `Sync` when the handler is.
///
/// With the `stepsched` scheduler and the `stepsched-sim` simulator,
/// `builder.handler(name, portable(handler))` is what their
/// `portable_handler(name, handler)` does.
///
/// ```
/// use stepsched_process::{Complete, Error, PortableHandler, Process, portable};
/// # use stepsched_process::{Context, Events, Pid, StepOutput, Tag};
/// # struct Echo;
/// # impl Process for Echo {
/// #     type Input = (); type Message = (); type Response = u64; type Command = u64; type Output = ();
/// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
/// #     fn step(&mut self, _: &mut Context<'_, Self>, _: Events<'_, (), u64>, _: &mut StepOutput<u64, ()>) -> Result<(), Error> { Ok(()) }
/// # }
/// # struct Record(std::sync::mpsc::Sender<Result<u64, Error>>);
/// # impl Complete<Echo> for Record {
/// #     fn pid(&self) -> Pid { Pid::new(0, 1) }
/// #     fn tag(&self) -> Tag { 3 }
/// #     fn complete(self, result: Result<u64, Error>) -> bool { self.0.send(result).is_ok() }
/// # }
///
/// /// Answers the command plus the yield's tag.
/// struct PlusTag;
/// impl PortableHandler<Echo> for PlusTag {
///     fn handle<C: Complete<Echo>>(&self, n: u64, done: C) {
///         let tag = done.tag();
///         done.complete(Ok(n + tag));
///     }
/// }
///
/// /// A host that registers closures taking its own completer type.
/// fn register<F: Fn(u64, Record) + Send + Sync + 'static>(handler: F) -> F {
///     handler
/// }
///
/// let handler = register(portable(PlusTag));
/// let (tx, rx) = std::sync::mpsc::channel();
/// handler(39, Record(tx));
/// assert_eq!(rx.recv(), Ok(Ok(42)));
/// ```
pub fn portable<P, C, H>(handler: H) -> impl Fn(P::Command, C)
where
    P: Process,
    C: Complete<P>,
    H: PortableHandler<P>,
{
    move |command, done| handler.handle(command, done)
}
