//! The [`Process`] trait and the [`Context`] handed to `init`.

use std::fmt;

use crate::primitive::sync::Arc;
use crate::primitive::sync::atomic::{AtomicBool, Ordering};
use crate::{Error, Events, StepOutput};

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
/// # Value types
///
/// The four associated types name what flows in and out: `Input` to
/// `init`, `Payload` in events (completion data and messages), `Command` in
/// yields, `Output` in [`Status::Done`]. They are associated types rather
/// than generic parameters so a scheduler is generic over the process type
/// alone, and each process type has exactly one set of them. They are
/// stored inline in [`Event`](crate::Event)s and [`StepOutput`]s, never
/// boxed per event: a Lua or WASM host sets all four to its own `Value`
/// type, an actor framework uses distinct message, command and result enums.
/// The trait is dyn-compatible, so one scheduler can also run different
/// process types behind `Box<dyn Process<Input = V, Payload = V, Command =
/// V, Output = V>>` (`Box<P>` implements `Process` when `P` does).
///
/// [`Status::Done`]: crate::Status::Done
///
/// # Example
///
/// A process with two entry points, `sum` and `echo`. `sum` yields one
/// command per number (a handler doubles it) and finishes with the total of
/// the completions; `echo` waits for one message and returns it.
///
/// ```
/// use stepsched_process::{Context, Error, Event, Events, Process, Status, StepOutput};
///
/// enum Calc {
///     New,
///     Sum { to_yield: Vec<i64>, waiting: usize, total: i64 },
///     Echo,
/// }
///
/// impl Process for Calc {
///     type Input = Vec<i64>;
///     type Payload = i64;
///     type Command = i64; // "double this number"
///     type Output = i64;
///
///     fn init(&mut self, _ctx: &Context, method: &str, input: Vec<i64>) -> Result<(), Error> {
///         *self = match method {
///             "sum" => Calc::Sum { waiting: input.len(), to_yield: input, total: 0 },
///             "echo" => Calc::Echo,
///             other => return Err(Error::UnknownMethod(other.to_owned())),
///         };
///         Ok(())
///     }
///
///     fn step(&mut self, events: Events<'_, i64>, out: &mut StepOutput<i64, i64>) -> Result<(), Error> {
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
///                         Event::Message(_) => {}
///                     }
///                 }
///                 out.set_status(if *waiting == 0 { Status::Done(*total) } else { Status::Yield });
///                 Ok(())
///             }
///             Calc::Echo => {
///                 for event in events {
///                     match event {
///                         Event::Message(m) => {
///                             out.set_status(Status::Done(m));
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
/// let ctx = Context::new(1);
/// let mut p = Calc::New;
/// p.init(&ctx, "sum", vec![1, 2, 3]).unwrap();
/// let (mut events, mut out) = (Vec::new(), StepOutput::new());
/// p.step(events.drain(..), &mut out).unwrap();
/// assert_eq!(out.status(), Some(&Status::Yield));
/// for y in out.yields_mut().drain() {
///     events.push(Event::completion(y.tag, Ok(y.command * 2)));
/// }
/// out.reset();
/// p.step(events.drain(..), &mut out).unwrap();
/// assert_eq!(out.take_status(), Some(Status::Done(12)));
/// p.close();
///
/// // The second entry point.
/// let mut p = Calc::New;
/// p.init(&ctx, "echo", vec![]).unwrap();
/// out.reset();
/// p.step(events.drain(..), &mut out).unwrap();
/// assert_eq!(out.status(), Some(&Status::Idle));
/// events.push(Event::message(7));
/// p.step(events.drain(..), &mut out).unwrap();
/// assert_eq!(out.take_status(), Some(Status::Done(7)));
///
/// // An unknown entry point is a clear error.
/// let err = Calc::New.init(&ctx, "product", vec![]).unwrap_err();
/// assert_eq!(err.to_string(), "unknown method `product`");
/// ```
pub trait Process {
    /// The argument of `init`.
    type Input;
    /// The data of events: completion results and messages.
    type Payload;
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
    fn init(&mut self, ctx: &Context, method: &str, input: Self::Input) -> Result<(), Error>;

    /// Advances the process with the events that arrived since the last
    /// step (possibly none), writing its status and yields into `out`.
    ///
    /// `out` starts each step [`reset`](StepOutput::reset): no status, no
    /// yields. The step must set a status; a step that sets none ends the
    /// process with an error. Yields are dispatched whatever the status,
    /// except [`Done`](crate::Status::Done) (see [`Status`](crate::Status)).
    ///
    /// # Errors
    ///
    /// Any error ends the process with that error as its result; it is then
    /// closed without being stepped again.
    fn step(
        &mut self,
        events: Events<'_, Self::Payload>,
        out: &mut StepOutput<Self::Command, Self::Output>,
    ) -> Result<(), Error>;

    /// Releases the process's resources. Called exactly once, last. The
    /// default does nothing (dropping the process releases the rest).
    fn close(&mut self) {}
}

impl<P: Process + ?Sized> Process for Box<P> {
    type Input = P::Input;
    type Payload = P::Payload;
    type Command = P::Command;
    type Output = P::Output;

    fn init(&mut self, ctx: &Context, method: &str, input: Self::Input) -> Result<(), Error> {
        (**self).init(ctx, method, input)
    }

    fn step(
        &mut self,
        events: Events<'_, Self::Payload>,
        out: &mut StepOutput<Self::Command, Self::Output>,
    ) -> Result<(), Error> {
        (**self).step(events, out)
    }

    fn close(&mut self) {
        (**self).close();
    }
}

/// What a process learns about itself at [`init`](Process::init): its pid
/// and a [`CancelToken`] it may keep to notice cancellation between events.
///
/// ```
/// use stepsched_process::Context;
///
/// let ctx = Context::new(42);
/// assert_eq!(ctx.pid(), 42);
/// assert!(!ctx.is_cancelled());
/// ctx.cancel_token().cancel();
/// assert!(ctx.is_cancelled());
/// ```
#[derive(Debug, Clone)]
pub struct Context {
    pid: u64,
    cancel: CancelToken,
}

impl Context {
    /// A context for process `pid` with a fresh, uncancelled token.
    ///
    /// ```
    /// use stepsched_process::Context;
    ///
    /// assert_eq!(Context::new(7).pid(), 7);
    /// ```
    pub fn new(pid: u64) -> Self {
        Self::with_cancel_token(pid, CancelToken::new())
    }

    /// A context for process `pid` sharing `cancel` with the scheduler (or
    /// with other processes, to cancel a group at once).
    ///
    /// ```
    /// use stepsched_process::{CancelToken, Context};
    ///
    /// let shutdown = CancelToken::new();
    /// let a = Context::with_cancel_token(1, shutdown.clone());
    /// let b = Context::with_cancel_token(2, shutdown.clone());
    /// shutdown.cancel();
    /// assert!(a.is_cancelled() && b.is_cancelled());
    /// ```
    pub fn with_cancel_token(pid: u64, cancel: CancelToken) -> Self {
        Self { pid, cancel }
    }

    /// The process id the scheduler gave this process.
    ///
    /// ```
    /// use stepsched_process::Context;
    ///
    /// assert_eq!(Context::new(3).pid(), 3);
    /// ```
    pub fn pid(&self) -> u64 {
        self.pid
    }

    /// The process's cancellation token; clone it to keep it.
    ///
    /// ```
    /// use stepsched_process::Context;
    ///
    /// let ctx = Context::new(1);
    /// let kept = ctx.cancel_token().clone();
    /// ctx.cancel_token().cancel();
    /// assert!(kept.is_cancelled());
    /// ```
    pub fn cancel_token(&self) -> &CancelToken {
        &self.cancel
    }

    /// Shorthand for `self.cancel_token().is_cancelled()`.
    ///
    /// ```
    /// use stepsched_process::Context;
    ///
    /// assert!(!Context::new(1).is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }
}

/// A shared, one-way cancellation flag: once [`cancel`](Self::cancel)led,
/// every clone reports [`is_cancelled`](Self::is_cancelled) forever.
///
/// The scheduler cancels it (at shutdown, or to stop one process); a process
/// polls it during long work. It complements, and does not replace, the
/// [`Event::cancel`](crate::Event::cancel) event, which wakes a waiting
/// process.
///
/// ```
/// use stepsched_process::CancelToken;
///
/// let token = CancelToken::new();
/// let seen_by_process = token.clone();
/// assert!(!seen_by_process.is_cancelled());
/// token.cancel();
/// assert!(seen_by_process.is_cancelled());
/// ```
#[derive(Clone, Default)]
pub struct CancelToken {
    flag: Arc<AtomicBool>,
}

impl CancelToken {
    /// A new, uncancelled token.
    ///
    /// ```
    /// use stepsched_process::CancelToken;
    ///
    /// assert!(!CancelToken::new().is_cancelled());
    /// ```
    pub fn new() -> Self {
        Self {
            flag: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Cancels the token and all its clones. Idempotent.
    ///
    /// ```
    /// use stepsched_process::CancelToken;
    ///
    /// let t = CancelToken::new();
    /// t.cancel();
    /// t.cancel();
    /// assert!(t.is_cancelled());
    /// ```
    pub fn cancel(&self) {
        // Release: pairs with the Acquire load in `is_cancelled`, so a
        // process that sees the flag also sees what the canceller wrote
        // before cancelling (a reason, a deadline).
        self.flag.store(true, Ordering::Release);
    }

    /// Whether [`cancel`](Self::cancel) was called on this token or a clone.
    ///
    /// ```
    /// use stepsched_process::CancelToken;
    ///
    /// assert!(!CancelToken::new().is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        // Acquire: pairs with the Release store in `cancel`.
        self.flag.load(Ordering::Acquire)
    }
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::*;
    use crate::{Event, Status};

    /// Counts calls, to check the `Box` forwarding.
    #[derive(Default)]
    struct Counter {
        inits: usize,
        steps: usize,
        closes: usize,
    }

    impl Process for Counter {
        type Input = ();
        type Payload = u8;
        type Command = ();
        type Output = usize;

        fn init(&mut self, _: &Context, method: &str, (): ()) -> Result<(), Error> {
            if method != "main" {
                return Err(Error::UnknownMethod(method.into()));
            }
            self.inits += 1;
            Ok(())
        }

        fn step(
            &mut self,
            events: Events<'_, u8>,
            out: &mut StepOutput<(), usize>,
        ) -> Result<(), Error> {
            self.steps += 1;
            out.set_status(Status::Done(events.len()));
            Ok(())
        }

        fn close(&mut self) {
            self.closes += 1;
        }
    }

    #[test]
    fn boxed_dyn_process_forwards_every_call() {
        let mut p: Box<dyn Process<Input = (), Payload = u8, Command = (), Output = usize>> =
            Box::new(Counter::default());
        let ctx = Context::new(5);
        assert!(matches!(
            p.init(&ctx, "other", ()),
            Err(Error::UnknownMethod(m)) if m == "other"
        ));
        p.init(&ctx, "main", ()).unwrap();
        let mut events = vec![Event::message(1), Event::message(2)];
        let mut out = StepOutput::new();
        p.step(events.drain(..), &mut out).unwrap();
        assert_eq!(out.take_status(), Some(Status::Done(2)));
        p.close();
    }

    #[test]
    fn box_of_concrete_process_counts_calls() {
        let mut p = Box::new(Counter::default());
        let ctx = Context::new(1);
        Process::init(&mut p, &ctx, "main", ()).unwrap();
        Process::step(&mut p, Vec::new().drain(..), &mut StepOutput::new()).unwrap();
        Process::close(&mut p);
        assert_eq!((p.inits, p.steps, p.closes), (1, 1, 1));
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
    }

    #[test]
    fn context_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Context>();
        assert_send_sync::<CancelToken>();
    }
}
