//! The [`Process`] trait and the [`Context`] a scheduler hands to `init`
//! and `step`.

use std::borrow::Cow;
use std::fmt;

use crate::{
    CancelToken, Error, Events, NoReach, Package, Pid, Reach, SendError, StepOutput, SubmitError,
    TerminateError,
};

/// A step-based state machine run by a scheduler.
///
/// The scheduler calls [`init`](Self::init) once, then
/// [`step`](Self::step) until the process reports [`Status::Done`] or
/// fails, then [`close`](Self::close) exactly once — also after a failed
/// `init`, a failed or panicking `step`, or a forced termination. No two of
/// these calls ever run at the same time, but successive calls may run on
/// different worker threads: a work-stealing scheduler requires the process
/// (and its value types) to be `Send`. The trait itself does not, so a
/// single-threaded host can run `!Send` processes.
///
/// Both `init` and `step` get a [`Context`]: the process's own [`Pid`], its
/// [`CancelToken`], and its reach into the scheduler — send a message,
/// spawn a child, terminate a process, and (from a step) ask to be
/// replaced by another process under the same PID ([`Context::upgrade`]).
///
/// [`Status::Done`]: crate::Status::Done
///
/// # Value types
///
/// The five associated types name what flows in and out: `Input` to
/// `init`, `Message` in message events (what others send), `Response` in
/// completion events (what a handler answers to a yield), `Command` in
/// yields, `Output` in [`Status::Done`]. Messages and responses are
/// separate types so that an actor matches each against its own enum, with
/// no arm for the other kind; a Lua or WASM host sets all five to its own
/// `Value` type. They are stored inline in [`Event`](crate::Event)s and
/// [`StepOutput`]s, never boxed per event. To run several kinds of process
/// on one scheduler, make one process type an enum of them (or a box of a
/// trait of your own): a scheduler runs one process type, and a context
/// spawns and upgrades to values of that type.
///
/// # Example
///
/// A process with two entry points, `sum` and `echo`. `sum` yields one
/// command per number (a handler doubles it) and finishes with the total of
/// the completions; `echo` waits for one message and returns it to its
/// sender (and returns it).
///
/// ```
/// use stepsched_process::{CancelToken, Context, Error, Event, Events, Pid, Process, Status, StepOutput};
///
/// enum Calc {
///     New,
///     Sum { to_yield: Vec<i64>, waiting: usize, total: i64 },
///     Echo,
/// }
///
/// impl Process for Calc {
///     type Input = Vec<i64>;
///     type Message = String;
///     type Response = i64;
///     type Command = i64; // "double this number"
///     type Output = String;
///
///     fn init(&mut self, _: &Context<'_, Self>, method: &str, input: Vec<i64>) -> Result<(), Error> {
///         *self = match method {
///             "sum" => Calc::Sum { waiting: input.len(), to_yield: input, total: 0 },
///             "echo" => Calc::Echo,
///             other => return Err(Error::UnknownMethod(other.to_owned())),
///         };
///         Ok(())
///     }
///
///     fn step(
///         &mut self,
///         ctx: &mut Context<'_, Self>,
///         events: Events<'_, String, i64>,
///         out: &mut StepOutput<i64, String>,
///     ) -> Result<(), Error> {
///         match self {
///             Calc::New => Err(Error::failed("stepped before init")),
///             Calc::Sum { to_yield, waiting, total } => {
///                 for (tag, n) in to_yield.drain(..).enumerate() {
///                     out.push_yield(tag as u64, n);
///                 }
///                 for event in events {
///                     match event {
///                         Event::Completion { result, .. } => {
///                             *total += result?;
///                             *waiting -= 1;
///                         }
///                         Event::Cancel => return Err(Error::Cancelled),
///                         Event::Message { .. } => {}
///                     }
///                 }
///                 out.set_status(if *waiting == 0 { Status::Done(total.to_string()) } else { Status::Yield });
///                 Ok(())
///             }
///             Calc::Echo => {
///                 for event in events {
///                     match event {
///                         Event::Message { from, data } => {
///                             if let Some(from) = from {
///                                 // Replies go through the scheduler; run by
///                                 // hand (below), there is none to take them.
///                                 let _ = ctx.send(from, data.clone());
///                             }
///                             out.set_status(Status::Done(data));
///                             return Ok(());
///                         }
///                         Event::Cancel => return Err(Error::Cancelled),
///                         Event::Completion { .. } => {}
///                     }
///                 }
///                 out.set_status(Status::Idle);
///                 Ok(())
///             }
///         }
///     }
/// }
///
/// // A scheduler in miniature: step, run the handler, feed completions back.
/// let cancel = CancelToken::new();
/// let mut ctx = Context::detached(Pid::new(0, 1), &cancel);
/// let mut p = Calc::New;
/// p.init(&ctx, "sum", vec![1, 2, 3]).unwrap();
/// let (mut events, mut out) = (Vec::new(), StepOutput::new());
/// p.step(&mut ctx, events.drain(..), &mut out).unwrap();
/// assert_eq!(out.status(), Some(&Status::Yield));
/// for y in out.yields_mut().drain() {
///     events.push(Event::completion(y.tag, Ok(y.command * 2)));
/// }
/// out.reset();
/// p.step(&mut ctx, events.drain(..), &mut out).unwrap();
/// assert_eq!(out.take_status(), Some(Status::Done("12".to_string())));
/// p.close();
///
/// // The second entry point.
/// let mut p = Calc::New;
/// p.init(&ctx, "echo", vec![]).unwrap();
/// out.reset();
/// p.step(&mut ctx, events.drain(..), &mut out).unwrap();
/// assert_eq!(out.status(), Some(&Status::Idle));
/// events.push(Event::message_from(Pid::new(0, 2), "hi".to_string()));
/// p.step(&mut ctx, events.drain(..), &mut out).unwrap();
/// assert_eq!(out.take_status(), Some(Status::Done("hi".to_string())));
///
/// // An unknown entry point is a clear error.
/// let err = Calc::New.init(&ctx, "product", vec![]).unwrap_err();
/// assert_eq!(err.to_string(), "unknown method `product`");
/// ```
pub trait Process: Sized {
    /// The argument of `init`.
    type Input;
    /// The data of message events: what other processes and hosts send.
    type Message;
    /// The data of completion events: what a handler answers to a yield.
    type Response;
    /// The commands a step yields to handlers.
    type Command;
    /// The result of a finished process.
    type Output;

    /// Prepares the process to run the entry point `method` with `input`.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownMethod`] if the process does not expose `method`;
    /// any other error if it cannot start. The process is then closed
    /// without being stepped.
    fn init(
        &mut self,
        ctx: &Context<'_, Self>,
        method: &str,
        input: Self::Input,
    ) -> Result<(), Error>;

    /// Advances the process with the events that arrived since the last
    /// step (possibly none), writing its status and yields into `out`.
    ///
    /// `out` starts each step [`reset`](StepOutput::reset): no status, no
    /// yields. The step must set a status; a step that sets none ends the
    /// process with an error. Yields are dispatched whatever the status,
    /// except [`Done`](crate::Status::Done) (see [`Status`](crate::Status)).
    /// A step that asks for an [`upgrade`](Context::upgrade) is the last
    /// step of this process value: it need not set a status, and its
    /// status and yields are not used. Events it was handed and did not
    /// consume are dropped with it, as after any step; events queued after
    /// it go to the new process.
    ///
    /// # Errors
    ///
    /// Any error ends the process with that error as its result; it is then
    /// closed without being stepped again.
    fn step(
        &mut self,
        ctx: &mut Context<'_, Self>,
        events: Events<'_, Self::Message, Self::Response>,
        out: &mut StepOutput<Self::Command, Self::Output>,
    ) -> Result<(), Error>;

    /// Releases the process's resources. Called exactly once, last. The
    /// default does nothing (dropping the process releases the rest).
    fn close(&mut self) {}
}

/// What a process learns about itself and can do beyond itself, in `init`
/// and in each `step`: its [`Pid`], its [`CancelToken`], and its reach into
/// the scheduler that runs it ([`send`](Self::send),
/// [`spawn`](Self::spawn), [`terminate`](Self::terminate), and from a step
/// [`upgrade`](Self::upgrade)).
///
/// A scheduler builds one for each call, around its [`Reach`];
/// [`Context::detached`] builds one with no scheduler behind it, to run a
/// process by hand.
///
/// ```
/// use stepsched_process::{CancelToken, Context, Error, Events, Pid, Process, StepOutput};
///
/// struct Quiet;
/// impl Process for Quiet {
///     type Input = ();
///     type Message = u8;
///     type Response = ();
///     type Command = ();
///     type Output = ();
///     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
///     fn step(&mut self, _: &mut Context<'_, Self>, _: Events<'_, u8, ()>, _: &mut StepOutput<(), ()>) -> Result<(), Error> { Ok(()) }
/// }
///
/// let cancel = CancelToken::new();
/// let ctx: Context<'_, Quiet> = Context::detached(Pid::new(0, 42), &cancel);
/// assert_eq!(ctx.pid(), Pid::new(0, 42));
/// assert!(!ctx.is_cancelled());
/// cancel.cancel();
/// assert!(ctx.is_cancelled());
/// // Nobody to send to: the message comes back.
/// assert!(ctx.send(Pid::new(0, 7), 1).unwrap_err().is_unknown_pid());
/// ```
pub struct Context<'a, P: Process> {
    pid: Pid,
    cancel: &'a CancelToken,
    reach: &'a dyn Reach<P>,
    upgrade: Option<Upgrade<P>>,
}

impl<'a, P: Process> Context<'a, P> {
    /// A context for process `pid`, whose cancellation is `cancel` and
    /// whose sends, spawns and terminates go to `reach`. Schedulers call
    /// this.
    pub fn new(pid: Pid, cancel: &'a CancelToken, reach: &'a dyn Reach<P>) -> Self {
        Context {
            pid,
            cancel,
            reach,
            upgrade: None,
        }
    }

    /// A context with no scheduler behind it ([`NoReach`]): every send,
    /// spawn and terminate is refused. For running a process by hand.
    pub fn detached(pid: Pid, cancel: &'a CancelToken) -> Self {
        Self::new(pid, cancel, &NoReach)
    }

    /// This process's PID.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The scheduler side of this context: what a scheduler's extension
    /// of the context (the `stepsched` scheduler's `ContextExt`) builds on.
    pub fn reach(&self) -> &'a dyn Reach<P> {
        self.reach
    }

    /// The process's cancellation token; clone it to keep it. The
    /// scheduler cancels it when the process is terminated or forced at
    /// shutdown.
    pub fn cancel_token(&self) -> &'a CancelToken {
        self.cancel
    }

    /// Shorthand for `self.cancel_token().is_cancelled()`.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Sends `message` to process `to`, with this process as its sender:
    /// the recipient's step sees `Event::Message { from: Some(self.pid()), .. }`.
    ///
    /// # Errors
    ///
    /// The message is handed back, by the scheduler's rule for refused
    /// sends, when no live process has `to`.
    pub fn send(&self, to: Pid, message: P::Message) -> Result<(), SendError<P::Message>> {
        self.reach
            .send(Package::new(to, "", message).with_sender(self.pid))
    }

    /// Starts `child` under a fresh PID, running entry point `method` with
    /// `input`, and returns its PID. The child's `init` runs now, on this
    /// thread; its steps run later, on any worker. On the `stepsched`
    /// scheduler, a child spawned on a worker (from a step, or from an
    /// `init` or handler running there) is queued on that worker's own
    /// deque, to run after the current run (newest first) unless an idle
    /// worker steals it first; one spawned from an `init` running on a host
    /// thread goes to the global queue. (`stepsched`'s `ContextExt` offers
    /// a spawn that returns the child's address.)
    ///
    /// # Errors
    ///
    /// [`SubmitError::Init`] if the child's `init` fails; the scheduler's
    /// refusals (stopping, at its process limit) hand the child back.
    pub fn spawn(&self, child: P, method: &str, input: P::Input) -> Result<Pid, SubmitError<P>> {
        self.reach.spawn(child, method, input)
    }

    /// Ends process `pid` (this one included) with [`Error::Terminated`].
    ///
    /// # Errors
    ///
    /// When no process that has not completed has `pid`.
    pub fn terminate(&self, pid: Pid) -> Result<(), TerminateError> {
        self.reach.terminate(pid)
    }

    /// Asks to replace this process, after this step, by `process`,
    /// initialized with entry point `method` and `input`, under the same
    /// PID: hot code reload. The scheduler closes the current process, runs
    /// the new one's `init`, and steps it with every event that arrived
    /// meanwhile — completions of the old process's yields included. If
    /// the new `init` fails, the process ends with that error.
    ///
    /// The step that asks is the last of the current process: it need not
    /// set a status, and its status and yields are not used; the events it
    /// was handed are its own (what it did not consume is dropped). A
    /// second call in one step replaces the first.
    pub fn upgrade(&mut self, process: P, method: &str, input: P::Input) {
        self.upgrade = Some(Upgrade {
            to: UpgradeTo::Process(process),
            method: Cow::Owned(method.to_owned()),
            input,
        });
    }

    /// Like [`upgrade`](Self::upgrade), but the new process comes from the
    /// factory the scheduler registered under `factory`. If there is no
    /// such factory, the process ends with [`Error::UnknownFactory`]
    /// naming it; if the factory fails, with its error.
    pub fn upgrade_from(&mut self, factory: &str, method: &str, input: P::Input) {
        self.upgrade = Some(Upgrade {
            to: UpgradeTo::Factory(Cow::Owned(factory.to_owned())),
            method: Cow::Owned(method.to_owned()),
            input,
        });
    }

    /// Takes the upgrade this step asked for, if any. Schedulers call this
    /// after each step.
    pub fn take_upgrade(&mut self) -> Option<Upgrade<P>> {
        self.upgrade.take()
    }

    /// Runs `f` with a context for `Q`, a process that this one wraps: an
    /// enum of process kinds hands each `init` and `step` to the kind it
    /// holds, whose own [`Process`] impl wants a `Context` of its own type.
    ///
    /// The inner context has this process's PID and cancellation token,
    /// and its reach is this one's: `send` and `terminate` are the same
    /// calls; `spawn` and [`upgrade`](Self::upgrade) take a `Q`, which
    /// becomes a `P` (`P: From<Q>`). A spawn that the scheduler refuses
    /// cannot hand the child back as a `Q`: the inner context's `spawn`
    /// then answers [`SubmitError::Init`] with the refusal's message, and
    /// the child is dropped. A scheduler's own extensions of the context
    /// (which look for the scheduler through [`reach`](Self::reach)) find
    /// nothing in the inner one.
    ///
    /// ```
    /// use stepsched_process::{CancelToken, Context, Error, Events, Pid, Process, StepOutput, Status};
    ///
    /// struct Echo;
    /// impl Process for Echo {
    ///     type Input = ();
    ///     type Message = u8;
    ///     type Response = ();
    ///     type Command = ();
    ///     type Output = u8;
    ///     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    ///     fn step(&mut self, cx: &mut Context<'_, Self>, _: Events<'_, u8, ()>, out: &mut StepOutput<(), u8>) -> Result<(), Error> {
    ///         out.set_status(Status::Done(cx.pid().number() as u8));
    ///         Ok(())
    ///     }
    /// }
    ///
    /// /// Every kind of process this program runs.
    /// enum Kind {
    ///     Echo(Echo),
    /// }
    /// impl From<Echo> for Kind {
    ///     fn from(e: Echo) -> Self { Kind::Echo(e) }
    /// }
    /// impl Process for Kind {
    ///     type Input = ();
    ///     type Message = u8;
    ///     type Response = ();
    ///     type Command = ();
    ///     type Output = u8;
    ///     fn init(&mut self, cx: &Context<'_, Self>, method: &str, input: ()) -> Result<(), Error> {
    ///         match self {
    ///             Kind::Echo(e) => cx.inner(|cx| e.init(cx, method, input)),
    ///         }
    ///     }
    ///     fn step(&mut self, cx: &mut Context<'_, Self>, events: Events<'_, u8, ()>, out: &mut StepOutput<(), u8>) -> Result<(), Error> {
    ///         match self {
    ///             Kind::Echo(e) => cx.inner_mut(|cx| e.step(cx, events, out)),
    ///         }
    ///     }
    /// }
    ///
    /// let cancel = CancelToken::new();
    /// let mut cx: Context<'_, Kind> = Context::detached(Pid::new(0, 7), &cancel);
    /// let mut kind = Kind::Echo(Echo);
    /// let mut out = StepOutput::default();
    /// let mut no_events = Vec::new();
    /// kind.step(&mut cx, no_events.drain(..), &mut out).unwrap();
    /// assert_eq!(out.take_status(), Some(Status::Done(7)));
    /// ```
    pub fn inner<Q, R>(&self, f: impl FnOnce(&Context<'_, Q>) -> R) -> R
    where
        Q: Process<Message = P::Message, Input = P::Input>,
        P: From<Q>,
    {
        let lift = Lift(self.reach);
        let cx = Context::new(self.pid, self.cancel, &lift);
        f(&cx)
    }

    /// Like [`inner`](Self::inner), for a step: an
    /// [`upgrade`](Self::upgrade) the inner step asks for becomes this
    /// process's (its `Q` a `P`).
    pub fn inner_mut<Q, R>(&mut self, f: impl FnOnce(&mut Context<'_, Q>) -> R) -> R
    where
        Q: Process<Message = P::Message, Input = P::Input>,
        P: From<Q>,
    {
        let lift = Lift(self.reach);
        let mut cx = Context::new(self.pid, self.cancel, &lift);
        let r = f(&mut cx);
        if let Some(Upgrade { to, method, input }) = cx.take_upgrade() {
            self.upgrade = Some(Upgrade {
                to: match to {
                    UpgradeTo::Process(q) => UpgradeTo::Process(P::from(q)),
                    UpgradeTo::Factory(name) => UpgradeTo::Factory(name),
                },
                method,
                input,
            });
        }
        r
    }
}

/// The reach of an inner process's context ([`Context::inner`]): the outer
/// process's, with the inner process type turned into the outer one.
struct Lift<'a, P: Process>(&'a dyn Reach<P>);

impl<P, Q> Reach<Q> for Lift<'_, P>
where
    P: Process + From<Q>,
    Q: Process<Message = P::Message, Input = P::Input>,
{
    fn send(&self, package: Package<Q::Message>) -> Result<(), SendError<Q::Message>> {
        self.0.send(package)
    }

    fn spawn(&self, child: Q, method: &str, input: Q::Input) -> Result<Pid, SubmitError<Q>> {
        self.0
            .spawn(P::from(child), method, input)
            .map_err(|refused| match refused {
                SubmitError::Init(e) => SubmitError::Init(e),
                // The child is a `P` now: it cannot be handed back.
                other => SubmitError::Init(Error::failed(other.to_string())),
            })
    }

    fn terminate(&self, pid: Pid) -> Result<(), TerminateError> {
        self.0.terminate(pid)
    }
}

impl<P: Process> fmt::Debug for Context<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("pid", &self.pid)
            .field("cancelled", &self.is_cancelled())
            .field("upgrade", &self.upgrade.is_some())
            .finish_non_exhaustive()
    }
}

/// A step's request to be replaced under the same PID; see
/// [`Context::upgrade`].
#[non_exhaustive]
pub struct Upgrade<P: Process> {
    /// The new process, or where to get it.
    pub to: UpgradeTo<P>,
    /// The entry point to `init` it with.
    pub method: Cow<'static, str>,
    /// The input to `init` it with.
    pub input: P::Input,
}

/// Where the new process of an [`Upgrade`] comes from.
pub enum UpgradeTo<P> {
    /// This process value.
    Process(P),
    /// The scheduler's factory registered under this name.
    Factory(Cow<'static, str>),
}

impl<P: Process> fmt::Debug for Upgrade<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upgrade")
            .field("to", &self.to)
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

impl<P> fmt::Debug for UpgradeTo<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpgradeTo::Process(_) => f.write_str("Process(..)"),
            UpgradeTo::Factory(name) => f.debug_tuple("Factory").field(name).finish(),
        }
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;
    use crate::{Event, Status};

    /// Counts calls, and tries its context's reach.
    #[derive(Default)]
    struct Counter {
        inits: usize,
        steps: usize,
        closes: usize,
    }

    impl Process for Counter {
        type Input = ();
        type Message = u8;
        type Response = ();
        type Command = ();
        type Output = usize;

        fn init(&mut self, ctx: &Context<'_, Self>, method: &str, (): ()) -> Result<(), Error> {
            if method != "main" {
                return Err(Error::UnknownMethod(method.into()));
            }
            assert_eq!(ctx.pid(), Pid::new(0, 5));
            self.inits += 1;
            Ok(())
        }

        fn step(
            &mut self,
            ctx: &mut Context<'_, Self>,
            events: Events<'_, u8, ()>,
            out: &mut StepOutput<(), usize>,
        ) -> Result<(), Error> {
            self.steps += 1;
            let senders: Vec<_> = events.as_slice().iter().map(Event::sender).collect();
            assert_eq!(senders, [None, Some(Pid::new(0, 9))]);
            out.set_status(Status::Done(events.len()));
            ctx.upgrade(Counter::default(), "main", ());
            Ok(())
        }

        fn close(&mut self) {
            self.closes += 1;
        }
    }

    #[test]
    fn a_detached_context_refuses_every_reach_and_keeps_the_upgrade() {
        let cancel = CancelToken::new();
        let mut ctx = Context::detached(Pid::new(0, 5), &cancel);
        let mut p = Counter::default();
        assert!(matches!(
            p.init(&ctx, "other", ()),
            Err(Error::UnknownMethod(m)) if m == "other"
        ));
        p.init(&ctx, "main", ()).unwrap();
        let mut events = vec![Event::message(1), Event::message_from(Pid::new(0, 9), 2)];
        let mut out = StepOutput::new();
        p.step(&mut ctx, events.drain(..), &mut out).unwrap();
        assert_eq!(out.take_status(), Some(Status::Done(2)));
        p.close();
        assert_eq!((p.inits, p.steps, p.closes), (1, 1, 1));

        let up = ctx.take_upgrade().expect("the step asked for an upgrade");
        assert!(matches!(up.to, UpgradeTo::Process(_)));
        assert_eq!(up.method, "main");
        assert!(ctx.take_upgrade().is_none(), "taken once");
        assert_eq!(
            format!("{up:?}"),
            r#"Upgrade { to: Process(..), method: "main", .. }"#
        );

        let sent = ctx.send(Pid::new(0, 7), 3).unwrap_err();
        assert_eq!(sent.package().from, Some(Pid::new(0, 5)));
        assert_eq!(sent.into_payload(), 3);
        assert!(matches!(
            ctx.spawn(Counter::default(), "main", ()),
            Err(SubmitError::Stopping(_))
        ));
        assert_eq!(
            ctx.terminate(Pid::new(0, 7)),
            Err(TerminateError::UnknownPid(Pid::new(0, 7)))
        );
        ctx.upgrade_from("v2", "main", ());
        assert!(matches!(
            ctx.take_upgrade().map(|u| u.to),
            Some(UpgradeTo::Factory(name)) if name == "v2"
        ));
    }

    #[test]
    fn cancel_token_is_shared_by_clones_only() {
        let a = CancelToken::new();
        let b = a.clone();
        let other = CancelToken::default();
        b.cancel();
        assert!(a.is_cancelled());
        assert!(!other.is_cancelled());
        assert_eq!(format!("{a:?}"), "CancelToken { cancelled: true }");
        let ctx: Context<'_, Counter> = Context::detached(Pid::new(0, 1), &a);
        assert!(ctx.is_cancelled() && ctx.cancel_token().is_cancelled());
    }

    #[test]
    fn cancel_token_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<CancelToken>();
    }
}
