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
//! - **Shutdown.** [`Sim::shutdown`] does what the scheduler's does: new
//!   submits are refused with [`SubmitError::Stopping`], every live process
//!   gets its [`CancelToken`] cancelled and a cancel event, and those still
//!   live at the deadline (virtual time) are closed with
//!   [`Error::Cancelled`].
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
//!
//! # Commands
//!
//! A handler is found by the name a command gives through [`Command`], the
//! trait of `stepsched-process` that the `stepsched` scheduler re-exports
//! too: a command type implements it once for both.
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

mod join;
#[cfg(feature = "proptest")]
pub mod strategy;

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::fmt::{self, Write as _};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::rc::{Rc, Weak};
use std::time::Duration;

use fastrand::Rng;
pub use join::JoinHandle;
pub use stepsched_process::Command;
use stepsched_process::{
    CancelToken, Context, Error, Event, Package, Pid, Process, Reach, SendError, Status,
    StepOutput, SubmitError, Tag, TerminateError, UpgradeTo,
};

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

/// Faults the simulator injects, each drawn from the seeded generator, so
/// a run with faults is as reproducible as one without. All are off by
/// default; a probability of 0 draws nothing, so turning faults off leaves
/// the trace of a seed unchanged.
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
        }
    }
}

/// A boxed handler.
type HandlerFn<P> = Box<dyn Fn(<P as Process>::Command, Completer<P>)>;

/// A boxed factory.
type FactoryFn<P> = Box<dyn Fn() -> Result<P, Error>>;

/// Builds a [`Sim`]: its seed, its handlers and factories, its faults.
pub struct Builder<P: Process> {
    seed: u64,
    faults: Faults,
    max_steps: u64,
    trace: bool,
    handlers: HashMap<String, HandlerFn<P>>,
    factories: HashMap<String, FactoryFn<P>>,
}

impl<P: Process> fmt::Debug for Builder<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<_> = self.handlers.keys().collect();
        names.sort();
        let mut factories: Vec<_> = self.factories.keys().collect();
        factories.sort();
        f.debug_struct("Builder")
            .field("seed", &self.seed)
            .field("faults", &self.faults)
            .field("max_steps", &self.max_steps)
            .field("trace", &self.trace)
            .field("handlers", &names)
            .field("factories", &factories)
            .finish()
    }
}

impl<P: Process> Default for Builder<P> {
    fn default() -> Self {
        Builder {
            seed: 0,
            faults: Faults::default(),
            max_steps: u64::MAX,
            trace: true,
            handlers: HashMap::new(),
            factories: HashMap::new(),
        }
    }
}

impl<P: Process + 'static> Builder<P>
where
    P::Command: Command,
{
    /// A builder with seed 0, no faults, no handlers, no step limit, the
    /// trace on.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The seed of the generator that picks the order of steps and draws
    /// the faults.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The faults to inject (none by default).
    #[must_use]
    pub fn faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    /// Stops [`Sim::run`] after this many steps (a process that always
    /// continues would otherwise run forever); the [`Report`] says so.
    #[must_use]
    pub fn max_steps(mut self, max_steps: u64) -> Self {
        self.max_steps = max_steps;
        self
    }

    /// Whether to record the [trace](Sim::trace) (on by default). Off, a
    /// step costs less (no line is formatted) and the trace stays empty;
    /// the order of steps and the faults are the same.
    #[must_use]
    pub fn trace(mut self, on: bool) -> Self {
        self.trace = on;
        self
    }

    /// Registers `handler` for commands named `name`
    /// ([`Command::name`]). A command with no handler completes with an
    /// error. A later registration under the same name replaces the
    /// earlier one.
    #[must_use]
    pub fn handler<F>(mut self, name: impl Into<String>, handler: F) -> Self
    where
        F: Fn(P::Command, Completer<P>) + 'static,
    {
        self.handlers.insert(name.into(), Box::new(handler));
        self
    }

    /// Registers a factory of processes under `name`, for a step's
    /// [`Context::upgrade_from`]: the upgraded process is what it returns
    /// (or the process ends with its error, or with [`Error::Panicked`] if
    /// it panics), as with the scheduler's `Builder::factory`.
    #[must_use]
    pub fn factory<F>(mut self, name: impl Into<String>, factory: F) -> Self
    where
        F: Fn() -> Result<P, Error> + 'static,
    {
        self.factories.insert(name.into(), Box::new(factory));
        self
    }

    /// Builds the simulator, at virtual time zero.
    #[must_use]
    pub fn build(self) -> Sim<P> {
        Sim {
            shared: Rc::new(Shared {
                seed: self.seed,
                faults: self.faults,
                max_steps: self.max_steps,
                tracing: self.trace,
                handlers: self.handlers,
                factories: self.factories,
                driving: Cell::new(false),
                inner: RefCell::new(Inner {
                    rng: Rng::with_seed(self.seed),
                    now: Duration::ZERO,
                    timer_seq: 0,
                    completion_seq: 0,
                    next_number: 1,
                    next_serial: 0,
                    live: BTreeMap::new(),
                    ready: Vec::new(),
                    timers: BinaryHeap::new(),
                    timed: HashMap::new(),
                    results: BTreeMap::new(),
                    trace: String::new(),
                    line: String::new(),
                    steps: 0,
                    batch: Vec::new(),
                    shutdown: None,
                }),
            }),
        }
    }
}

/// What [`Sim::run`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// Steps taken by this run.
    pub steps: u64,
    /// The virtual time at the end of the run.
    pub now: Duration,
    /// Processes still live at the end: waiting for a message or for a
    /// completion that never came (a stuck process), or cut off by the step
    /// limit.
    pub live: usize,
    /// Whether the run stopped at the step limit ([`Builder::max_steps`])
    /// with work left.
    pub step_limit_hit: bool,
    /// The report of a shutdown that finished during this run (begun by
    /// the [`Faults::shutdown`] fault, or by [`Sim::shutdown`]).
    pub shutdown: Option<ShutdownReport>,
}

/// What a [`shutdown`](Sim::shutdown) did, as the scheduler's
/// `ShutdownReport` says it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Processes that got a cancel event.
    pub cancelled: usize,
    /// Processes still live at the deadline, forced to complete with
    /// [`Error::Cancelled`] (and closed).
    pub forced: usize,
}

/// Where a queued event came from, for the per-sender order.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// A message from outside any process.
    Host,
    /// A message from this process.
    Process(Pid),
    /// A completion (each its own origin).
    Completion(u64),
    /// The cancel event of a shutdown.
    Cancel,
}

/// A completion waiting for its virtual time: to which process (PID and
/// serial), which yield, what.
type Timed<P> = (Pid, u64, Tag, Result<<P as Process>::Response, Error>);

/// The event type of `P`.
type Ev<P> = Event<<P as Process>::Message, <P as Process>::Response>;

/// Where the result of one process waits for its [`JoinHandle`] or for
/// [`Sim::take_result`].
enum Outcome<O> {
    Pending,
    Done(Result<O, Error>),
    Taken,
}

/// The result cell of one process, shared by its entry, the results map
/// and its join handle.
type ResultCell<P> = Rc<RefCell<Outcome<<P as Process>::Output>>>;

/// One live process.
struct Entry<P: Process> {
    /// `None` while it is being stepped (or initialized by an upgrade).
    process: Option<P>,
    /// Which process this is among all that had its PID: a completer of an
    /// earlier one must not reach it.
    serial: u64,
    cancel: CancelToken,
    pending: Vec<(Origin, Ev<P>)>,
    result: ResultCell<P>,
    /// In the ready list.
    queued: bool,
    /// Being stepped now.
    running: bool,
    /// Terminated while being stepped: the step's end closes it.
    terminated: bool,
}

/// A shutdown that has begun.
struct Stopping {
    /// The virtual time at which the processes still live are forced.
    deadline: Duration,
    report: ShutdownReport,
    /// Every process has ended.
    finished: bool,
}

/// The simulator's mutable state, borrowed only between calls into
/// process or handler code, never across them.
struct Inner<P: Process> {
    rng: Rng,
    now: Duration,
    timer_seq: u64,
    completion_seq: u64,
    next_number: u64,
    next_serial: u64,
    live: BTreeMap<Pid, Entry<P>>,
    ready: Vec<Pid>,
    timers: BinaryHeap<Reverse<(Duration, u64)>>,
    timed: HashMap<u64, Timed<P>>,
    /// The result cell of the latest process of each PID submitted here.
    results: BTreeMap<Pid, ResultCell<P>>,
    /// The trace, a line each, each ending in a newline.
    trace: String,
    /// The line of the step being taken (a buffer reused by every step).
    line: String,
    steps: u64,
    /// The events of the step being taken (a buffer reused by every step).
    batch: Vec<Ev<P>>,
    shutdown: Option<Stopping>,
}

impl<P: Process> Inner<P> {
    /// Whether `pid` was handed out or ran here: refusals for it are
    /// `Closed`, not `UnknownPid`.
    fn known(&self, pid: Pid) -> bool {
        self.results.contains_key(&pid) || (pid.node() == 0 && pid.number() < self.next_number)
    }

    fn draw(&mut self, probability: f64) -> bool {
        probability > 0.0 && self.rng.f64() < probability
    }

    fn make_ready(&mut self, pid: Pid) {
        if let Some(e) = self.live.get_mut(&pid)
            && !e.queued
            && !e.running
        {
            e.queued = true;
            self.ready.push(pid);
        }
    }

    fn push_event(&mut self, pid: Pid, origin: Origin, event: Ev<P>) -> Result<(), Ev<P>> {
        match self.live.get_mut(&pid) {
            Some(e) if !e.terminated => {
                e.pending.push((origin, event));
                if !e.queued && !e.running {
                    e.queued = true;
                    self.ready.push(pid);
                }
                Ok(())
            }
            _ => Err(event),
        }
    }

    /// Whether `pid` is live as the process numbered `serial`, not
    /// terminated.
    fn reachable(&self, pid: Pid, serial: u64) -> bool {
        self.live
            .get(&pid)
            .is_some_and(|e| e.serial == serial && !e.terminated)
    }

    /// Whether a shutdown has begun.
    fn stopping(&self) -> bool {
        self.shutdown.is_some()
    }

    /// A shutdown that has begun and not finished.
    fn shutting_down(&self) -> Option<&Stopping> {
        self.shutdown.as_ref().filter(|s| !s.finished)
    }

    /// Appends `line` to the trace.
    fn push_line(&mut self, line: &str) {
        self.trace.push_str(line);
        self.trace.push('\n');
    }
}

/// What the simulator, its join handles and its completers share.
struct Shared<P: Process> {
    seed: u64,
    faults: Faults,
    max_steps: u64,
    tracing: bool,
    handlers: HashMap<String, HandlerFn<P>>,
    factories: HashMap<String, FactoryFn<P>>,
    /// A run (or join, or shutdown) is in progress: another must not start
    /// from inside it.
    driving: Cell<bool>,
    inner: RefCell<Inner<P>>,
}

/// Runs `f`, turning a panic into an error.
fn caught<T>(f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(panic) => Err(Error::from_panic(&*panic)),
    }
}

/// Closes `process` and drops it, ignoring a panic in either.
fn close<P: Process>(mut process: P) {
    let _ = catch_unwind(AssertUnwindSafe(|| process.close()));
    quietly_drop(process);
}

/// Closes a process that is kept (its value is handed back afterwards).
fn close_ref<P: Process>(process: &mut P) {
    let _ = catch_unwind(AssertUnwindSafe(|| process.close()));
}

/// Drops `value`, ignoring a panic in its `Drop`.
fn quietly_drop<T>(value: T) {
    let _ = catch_unwind(AssertUnwindSafe(move || drop(value)));
}

/// Writes `t=<microseconds>us <pid>`, the start of a trace line.
fn stamp(line: &mut String, now: Duration, pid: Pid) {
    line.push_str("t=");
    push_number(line, u64::try_from(now.as_micros()).unwrap_or(u64::MAX));
    line.push_str("us ");
    push_pid(line, pid);
}

/// Writes `n` in decimal (what `write!` does, without its formatter: the
/// trace writes several numbers per step).
fn push_number(line: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[at..] {
        line.push(char::from(d));
    }
}

/// Writes `pid` as its `Display` does: `<node.number>`.
fn push_pid(line: &mut String, pid: Pid) {
    line.push('<');
    push_number(line, pid.node().into());
    line.push('.');
    push_number(line, pid.number());
    line.push('>');
}

impl<P: Process> Shared<P> {
    /// Queues the completion of yield `tag` of process `serial` (under
    /// `pid`), after `after` plus any injected delay. Whether that process
    /// is live.
    fn complete(
        &self,
        pid: Pid,
        serial: u64,
        tag: Tag,
        result: Result<P::Response, Error>,
        after: Duration,
    ) -> bool {
        // Not borrowed only if a completer is dropped inside the simulator's
        // own bookkeeping (inside an event being dropped, say): the process
        // is ending then, and the completion would reach nothing.
        let Ok(mut inner) = self.inner.try_borrow_mut() else {
            return false;
        };
        if !inner.reachable(pid, serial) {
            return false;
        }
        let mut after = after;
        if inner.draw(self.faults.delay) {
            let max = u64::try_from(self.faults.max_delay.as_millis())
                .unwrap_or(u64::MAX)
                .max(1);
            after += Duration::from_millis(inner.rng.u64(1..=max));
        }
        if after.is_zero() {
            inner.completion_seq += 1;
            let origin = Origin::Completion(inner.completion_seq);
            inner
                .push_event(pid, origin, Event::completion(tag, result))
                .is_ok()
        } else {
            inner.timer_seq += 1;
            let seq = inner.timer_seq;
            let at = inner.now + after;
            inner.timers.push(Reverse((at, seq)));
            inner.timed.insert(seq, (pid, serial, tag, result));
            true
        }
    }
}

impl<P: Process + 'static> Shared<P>
where
    P::Command: Command,
{
    fn submit(
        self: &Rc<Self>,
        pid: Pid,
        mut process: P,
        method: &str,
        input: P::Input,
    ) -> Result<JoinHandle<P>, SubmitError<P>> {
        if self.inner.borrow().stopping() {
            return Err(SubmitError::Stopping(process));
        }
        let cancel = CancelToken::new();
        let reach = ReachOf(Rc::clone(self));
        let ctx = Context::new(pid, &cancel, &reach);
        if let Err(e) = caught(|| process.init(&ctx, method, input)) {
            close(process);
            return Err(SubmitError::Init(e));
        }
        let mut inner = self.inner.borrow_mut();
        if inner.live.contains_key(&pid) {
            drop(inner);
            close_ref(&mut process);
            return Err(SubmitError::DuplicatePid(pid, process));
        }
        if inner.stopping() {
            // A shutdown began during `init` (from a handler of a process
            // it spawned, say): the process gets its cancel event now.
            cancel.cancel();
        }
        let serial = inner.next_serial;
        inner.next_serial += 1;
        let result: ResultCell<P> = Rc::new(RefCell::new(Outcome::Pending));
        inner.results.insert(pid, Rc::clone(&result));
        let mut pending = Vec::new();
        if inner.stopping() {
            pending.push((Origin::Cancel, Event::cancel()));
        }
        inner.live.insert(
            pid,
            Entry {
                process: Some(process),
                serial,
                cancel,
                pending,
                result: Rc::clone(&result),
                queued: false,
                running: false,
                terminated: false,
            },
        );
        inner.make_ready(pid);
        if self.tracing {
            let mut line = String::new();
            stamp(&mut line, inner.now, pid);
            let _ = write!(line, " submit {method}");
            inner.push_line(&line);
        }
        Ok(JoinHandle::new(Rc::downgrade(self), pid, result))
    }

    fn allocate_pid(&self) -> Pid {
        let mut inner = self.inner.borrow_mut();
        let pid = Pid::new(0, inner.next_number);
        inner.next_number += 1;
        pid
    }

    fn deliver(&self, package: Package<P::Message>) -> Result<(), SendError<P::Message>> {
        let mut inner = self.inner.borrow_mut();
        let Package {
            from,
            to,
            topic,
            payload,
        } = package;
        let (origin, event) = match from {
            Some(from) => (Origin::Process(from), Event::message_from(from, payload)),
            None => (Origin::Host, Event::message(payload)),
        };
        inner.push_event(to, origin, event).map_err(|event| {
            let payload = event.into_message().expect("a message event");
            let mut package = Package::new(to, topic, payload);
            package.from = from;
            if inner.known(to) {
                SendError::Closed(package)
            } else {
                SendError::UnknownPid(package)
            }
        })
    }

    fn terminate(&self, pid: Pid, why: &str) -> Result<(), TerminateError> {
        let mut inner = self.inner.borrow_mut();
        let Some(entry) = inner.live.get_mut(&pid) else {
            return Err(if inner.known(pid) {
                TerminateError::AlreadyComplete(pid)
            } else {
                TerminateError::UnknownPid(pid)
            });
        };
        if entry.terminated {
            return Err(TerminateError::AlreadyComplete(pid));
        }
        entry.cancel.cancel();
        let running = entry.running;
        if running {
            // The step's end closes it and publishes the result.
            entry.terminated = true;
        }
        if self.tracing {
            let mut line = String::new();
            stamp(&mut line, inner.now, pid);
            let _ = write!(line, " terminated ({why})");
            inner.push_line(&line);
        }
        if running {
            return Ok(());
        }
        drop(inner);
        self.end(pid, None, Err(Error::Terminated));
        Ok(())
    }

    /// Ends live process `pid`: drops its queued events, closes it (the
    /// value passed in, or the one in its entry), publishes `result`.
    fn end(&self, pid: Pid, process: Option<P>, result: Result<P::Output, Error>) {
        let entry = {
            let mut inner = self.inner.borrow_mut();
            let entry = inner.live.remove(&pid);
            if entry.as_ref().is_some_and(|e| e.queued) {
                inner.ready.retain(|p| *p != pid);
            }
            entry
        };
        // Dropped and closed outside the borrow: user code runs here.
        let mut stored = None;
        let mut cell = None;
        if let Some(mut entry) = entry {
            entry.cancel.cancel();
            quietly_drop(std::mem::take(&mut entry.pending));
            stored = entry.process.take();
            cell = Some(Rc::clone(&entry.result));
            quietly_drop(entry);
        }
        if let Some(p) = process.or(stored) {
            close(p);
        }
        let mut inner = self.inner.borrow_mut();
        if self.tracing {
            let mut line = String::new();
            stamp(&mut line, inner.now, pid);
            match &result {
                Ok(_) => line.push_str(" end ok"),
                Err(e) => {
                    let _ = write!(line, " end err: {e}");
                }
            }
            inner.push_line(&line);
        }
        drop(inner);
        if let Some(cell) = cell {
            let old = std::mem::replace(&mut *cell.borrow_mut(), Outcome::Done(result));
            debug_assert!(matches!(old, Outcome::Pending), "a result published twice");
        } else {
            quietly_drop(result);
        }
    }

    /// Moves the clock to the next timer and fires every timer due then.
    fn fire_timers(&self) {
        let mut inner = self.inner.borrow_mut();
        let Some(&Reverse((at, _))) = inner.timers.peek() else {
            return;
        };
        inner.now = inner.now.max(at);
        let mut dropped = Vec::new();
        while let Some(&Reverse((t, seq))) = inner.timers.peek() {
            if t > at {
                break;
            }
            inner.timers.pop();
            let (pid, serial, tag, result) =
                inner.timed.remove(&seq).expect("every timer has a payload");
            if !inner.reachable(pid, serial) {
                dropped.push(Event::completion(tag, result));
                continue;
            }
            inner.completion_seq += 1;
            let origin = Origin::Completion(inner.completion_seq);
            if let Err(event) = inner.push_event(pid, origin, Event::completion(tag, result)) {
                dropped.push(event);
            }
        }
        drop(inner);
        quietly_drop(dropped);
    }

    /// Moves into `batch` the events `pid`'s next step takes: at most
    /// [`MAX_BATCH`] (fewer under the short-batch fault), shuffled across
    /// origins if the reorder fault fires. The rest stay queued, first.
    fn take_batch(&self, inner: &mut Inner<P>, pid: Pid, batch: &mut Vec<Ev<P>>) {
        let Inner { live, rng, .. } = inner;
        let pending = &mut live.get_mut(&pid).expect("live").pending;
        let len = pending.len();
        let mut n = len.min(MAX_BATCH);
        let draw = |rng: &mut Rng, probability: f64| probability > 0.0 && rng.f64() < probability;
        if n > 1 && draw(rng, self.faults.short_batch) {
            n = rng.usize(1..=n);
        }
        if len > 1 && draw(rng, self.faults.reorder) {
            // An interleaving of the origins' queues, each kept in order.
            let mut queues: Vec<(Origin, VecDeque<Ev<P>>)> = Vec::new();
            for (origin, event) in pending.drain(..) {
                match queues.iter_mut().find(|(o, _)| *o == origin) {
                    Some((_, q)) => q.push_back(event),
                    None => queues.push((origin, VecDeque::from([event]))),
                }
            }
            while !queues.is_empty() {
                let i = rng.usize(..queues.len());
                let event = queues[i].1.pop_front().expect("queues are non-empty");
                pending.push((queues[i].0, event));
                if queues[i].1.is_empty() {
                    queues.remove(i);
                }
            }
        }
        if n == len {
            batch.extend(pending.drain(..).map(|(_, e)| e));
        } else {
            batch.extend(pending.drain(..n).map(|(_, e)| e));
        }
    }

    /// Steps process `pid` once, with the events queued for it.
    fn step(self: &Rc<Self>, pid: Pid) {
        let (mut process, cancel, serial, mut batch) = {
            let mut guard = self.inner.borrow_mut();
            let inner = &mut *guard;
            let Some(entry) = inner.live.get_mut(&pid) else {
                return;
            };
            entry.queued = false;
            let Some(process) = entry.process.take() else {
                return;
            };
            entry.running = true;
            let cancel = entry.cancel.clone();
            let serial = entry.serial;
            let mut batch = std::mem::take(&mut inner.batch);
            self.take_batch(inner, pid, &mut batch);
            inner.steps += 1;
            (process, cancel, serial, batch)
        };
        let mut line = String::new();
        if self.tracing {
            let mut inner = self.inner.borrow_mut();
            line = std::mem::take(&mut inner.line);
            stamp(&mut line, inner.now, pid);
            drop(inner);
            line.push_str(" events=[");
            for (i, event) in batch.iter().enumerate() {
                if i > 0 {
                    line.push(',');
                }
                describe(&mut line, event);
            }
            line.push(']');
        }
        let reach = ReachOf(Rc::clone(self));
        let mut out = StepOutput::new();
        let mut cx = Context::new(pid, &cancel, &reach);
        let stepped = caught(|| process.step(&mut cx, batch.drain(..), &mut out));
        let upgrade = cx.take_upgrade();
        drop(cx);
        // Empty (the drain took every event); kept for the next step.
        if let Ok(mut inner) = self.inner.try_borrow_mut()
            && inner.batch.capacity() < batch.capacity()
        {
            inner.batch = batch;
        }
        let terminated = self
            .inner
            .borrow()
            .live
            .get(&pid)
            .is_none_or(|e| e.terminated);
        if terminated {
            self.trace_line(line, " terminated-during-step");
            quietly_drop(upgrade);
            quietly_drop(out);
            return self.end(pid, Some(process), Err(Error::Terminated));
        }
        if let (Some(upgrade), Ok(())) = (upgrade, &stepped) {
            quietly_drop(out);
            close(process);
            let made = match upgrade.to {
                UpgradeTo::Process(new) => Ok(new),
                UpgradeTo::Factory(name) => match self.factories.get(&*name) {
                    Some(factory) => caught(factory),
                    None => Err(Error::UnknownFactory(name.into_owned())),
                },
            };
            let mut new = match made {
                Ok(new) => new,
                Err(e) => {
                    self.trace_line(line, " upgrade-failed");
                    quietly_drop(upgrade.input);
                    return self.end(pid, None, Err(e));
                }
            };
            let cx = Context::new(pid, &cancel, &reach);
            if let Err(e) = caught(|| new.init(&cx, &upgrade.method, upgrade.input)) {
                self.trace_line(line, " upgrade-failed");
                return self.end(pid, Some(new), Err(e));
            }
            if self.tracing {
                let _ = write!(line, " upgrade {}", upgrade.method);
                self.trace_line(line, "");
            }
            return self.park(pid, new, true);
        }
        let status = match stepped {
            Ok(()) => out.take_status(),
            Err(e) => {
                if self.tracing {
                    let _ = write!(line, " error: {e}");
                    self.trace_line(line, "");
                }
                quietly_drop(out);
                return self.end(pid, Some(process), Err(e));
            }
        };
        let status = match status {
            None => {
                self.trace_line(line, " status=none");
                quietly_drop(out);
                let e = Error::Failed(format!("process {pid}: step set no status"));
                return self.end(pid, Some(process), Err(e));
            }
            Some(Status::Done(output)) => {
                self.trace_line(line, " status=done");
                // A finished process's yields are not dispatched.
                quietly_drop(out);
                return self.end(pid, Some(process), Ok(output));
            }
            Some(status) => status,
        };
        if self.tracing {
            line.push_str(match status {
                Status::Continue => " status=continue yields=[",
                Status::Idle => " status=idle yields=[",
                _ => " status=yield yields=[",
            });
            for (i, y) in out.yields().iter().enumerate() {
                if i > 0 {
                    line.push(',');
                }
                line.push_str(y.command.name());
                line.push('#');
                push_number(&mut line, y.tag);
            }
            self.trace_line(line, "]");
        }
        if !out.yields().is_empty() {
            self.dispatch(pid, serial, &mut out);
        }
        if self
            .inner
            .borrow()
            .live
            .get(&pid)
            .is_none_or(|e| e.terminated)
        {
            return self.end(pid, Some(process), Err(Error::Terminated));
        }
        self.park(pid, process, matches!(status, Status::Continue));
    }

    /// Hands each yield of `out` to its handler, with the faults of a
    /// dispatch.
    fn dispatch(
        self: &Rc<Self>,
        pid: Pid,
        serial: u64,
        out: &mut StepOutput<P::Command, P::Output>,
    ) {
        let mut yields = out.yields_mut().drain();
        for y in yields.by_ref() {
            let (error, panic, never) = {
                let mut inner = self.inner.borrow_mut();
                // Terminated during the dispatch (by a handler): the yields
                // not yet dispatched never will be.
                if inner.live.get(&pid).is_none_or(|e| e.terminated) {
                    drop(inner);
                    quietly_drop(y);
                    break;
                }
                (
                    inner.draw(self.faults.handler_error),
                    inner.draw(self.faults.handler_panic),
                    inner.draw(self.faults.never_complete),
                )
            };
            let completer = Completer {
                shared: Rc::downgrade(self),
                pid,
                serial,
                tag: y.tag,
                done: false,
                lost: never,
            };
            if error {
                quietly_drop(y.command);
                completer.complete(Err(Error::failed("injected handler error")));
                continue;
            }
            if panic {
                quietly_drop(y.command);
                // Unwinds without the panic hook (nothing is printed); the
                // completer, dropped while unwinding, completes the yield
                // with `Error::Panicked`, as a real panic would.
                let _ = catch_unwind(AssertUnwindSafe(move || {
                    let _completer = completer;
                    resume_unwind(Box::new("injected handler panic"));
                }));
                continue;
            }
            match self.handlers.get(y.command.name()) {
                Some(handler) => {
                    let _ = catch_unwind(AssertUnwindSafe(|| handler(y.command, completer)));
                }
                None => {
                    let message = format!("unknown command `{}`", y.command.name());
                    quietly_drop(y.command);
                    completer.complete(Err(Error::Failed(message)));
                }
            }
        }
        // The yields not dispatched (the process was terminated).
        let _ = catch_unwind(AssertUnwindSafe(move || yields.for_each(drop)));
    }

    /// Puts `process` back after its step; it is runnable again if it
    /// asked to continue or events wait for it.
    fn park(&self, pid: Pid, process: P, again: bool) {
        let mut inner = self.inner.borrow_mut();
        let entry = inner.live.get_mut(&pid).expect("a stepped process is live");
        if entry.terminated {
            // Terminated by an upgrade's `init`: no new step starts.
            drop(inner);
            return self.end(pid, Some(process), Err(Error::Terminated));
        }
        entry.process = Some(process);
        entry.running = false;
        if again || !entry.pending.is_empty() {
            inner.make_ready(pid);
        }
    }

    /// Ends a trace line with `tail` and records it (if tracing).
    fn trace_line(&self, mut line: String, tail: &str) {
        if self.tracing {
            line.push_str(tail);
            let mut inner = self.inner.borrow_mut();
            inner.push_line(&line);
            // Kept for the next step's line.
            line.clear();
            inner.line = line;
        }
    }

    /// Begins a shutdown with `deadline` (from now), unless one has begun:
    /// refuses submits from now on, cancels every live process's token and
    /// queues its cancel event. Whether this call began it.
    fn begin_shutdown(&self, deadline: Duration, why: &str) -> bool {
        let mut inner = self.inner.borrow_mut();
        if inner.stopping() {
            return false;
        }
        let now = inner.now;
        if self.tracing {
            let line = format!(
                "t={}us shutdown ({why}) deadline=t={}us",
                now.as_micros(),
                (now + deadline).as_micros()
            );
            inner.push_line(&line);
        }
        let pids: Vec<Pid> = inner.live.keys().copied().collect();
        let mut cancelled = 0;
        for pid in pids {
            let entry = inner.live.get_mut(&pid).expect("listed above");
            entry.cancel.cancel();
            if inner
                .push_event(pid, Origin::Cancel, Event::cancel())
                .is_ok()
            {
                cancelled += 1;
            }
        }
        inner.shutdown = Some(Stopping {
            deadline: now + deadline,
            report: ShutdownReport {
                cancelled,
                forced: 0,
            },
            finished: false,
        });
        true
    }

    /// Forces every process still live to end with [`Error::Cancelled`]
    /// (the shutdown's deadline has passed).
    fn force_all(&self) {
        let pids: Vec<Pid> = {
            let mut inner = self.inner.borrow_mut();
            let pids: Vec<Pid> = inner.live.keys().copied().collect();
            if self.tracing && !pids.is_empty() {
                let line = format!(
                    "t={}us shutdown deadline: forcing {}",
                    inner.now.as_micros(),
                    pids.len()
                );
                inner.push_line(&line);
            }
            pids
        };
        for pid in pids {
            self.end(pid, None, Err(Error::Cancelled));
            let mut inner = self.inner.borrow_mut();
            if let Some(s) = inner.shutdown.as_mut() {
                s.report.forced += 1;
            }
        }
    }

    /// Marks the shutdown finished once no process is live: the timers
    /// left reach nothing and are dropped. Its report, if it finished now.
    fn finish_shutdown(&self) -> Option<ShutdownReport> {
        let mut inner = self.inner.borrow_mut();
        if !inner.live.is_empty() || inner.shutting_down().is_none() {
            return None;
        }
        inner.timers.clear();
        let timed = std::mem::take(&mut inner.timed);
        let s = inner.shutdown.as_mut().expect("shutting down");
        s.finished = true;
        let report = s.report;
        drop(inner);
        quietly_drop(timed);
        Some(report)
    }

    /// Steps processes until `done` says so, nothing can happen any more,
    /// the step limit is reached, or (with `until`) the clock would pass
    /// `until`; a shutdown that has begun finishes within it.
    fn drive(self: &Rc<Self>, done: &dyn Fn() -> bool, until: Option<Duration>) -> Report {
        assert!(
            !self.driving.replace(true),
            "the simulator was run (run, join or shutdown) from inside a step or a handler"
        );
        struct Release<'a>(&'a Cell<bool>);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.set(false);
            }
        }
        let _release = Release(&self.driving);
        let start = self.inner.borrow().steps;
        let mut step_limit_hit = false;
        let mut shutdown = None;
        while !done() {
            let mut inner = self.inner.borrow_mut();
            if inner.steps - start >= self.max_steps {
                if inner.shutting_down().is_some() {
                    // The step limit stands in for the deadline of a
                    // process that never waits.
                    drop(inner);
                    self.force_all();
                    shutdown = self.finish_shutdown().or(shutdown);
                    break;
                }
                step_limit_hit = !inner.ready.is_empty() || !inner.timers.is_empty();
                break;
            }
            if !inner.stopping() && inner.draw(self.faults.shutdown) {
                drop(inner);
                self.begin_shutdown(self.faults.shutdown_deadline, "fault");
                continue;
            }
            if !inner.live.is_empty() && inner.draw(self.faults.terminate) {
                let len = inner.live.len();
                let n = inner.rng.usize(..len);
                let victim = *inner.live.keys().nth(n).expect("n < len");
                drop(inner);
                let _ = self.terminate(victim, "fault");
                continue;
            }
            if !inner.ready.is_empty() {
                let len = inner.ready.len();
                let i = inner.rng.usize(..len);
                let pid = inner.ready.swap_remove(i);
                drop(inner);
                self.step(pid);
                continue;
            }
            // Nothing runnable: a finished shutdown, a timer, a deadline,
            // or the end.
            if inner.live.is_empty() && inner.shutting_down().is_some() {
                drop(inner);
                shutdown = self.finish_shutdown();
                continue;
            }
            let next = inner.timers.peek().map(|Reverse((at, _))| *at);
            let deadline = inner.shutting_down().map(|s| s.deadline);
            let limit = match (deadline, until) {
                (Some(d), Some(u)) => Some(d.min(u)),
                (d, u) => d.or(u),
            };
            match (next, limit) {
                (Some(at), Some(limit)) if at > limit => {}
                (Some(_), _) => {
                    drop(inner);
                    self.fire_timers();
                    continue;
                }
                (None, None) => break,
                (None, Some(_)) => {}
            }
            // The next timer (if any) is past the limit: the clock moves to
            // the limit, a shutdown's deadline first.
            let limit = limit.expect("a limit");
            inner.now = inner.now.max(limit);
            if deadline == Some(limit) {
                drop(inner);
                self.force_all();
                shutdown = self.finish_shutdown();
                continue;
            }
            break;
        }
        let inner = self.inner.borrow();
        Report {
            steps: inner.steps - start,
            now: inner.now,
            live: inner.live.len(),
            step_limit_hit,
            shutdown,
        }
    }
}

/// Appends a short form of `event` to a trace line: `m<0.1>` (a message
/// from process `<0.1>`), `m` (from outside), `c3` / `c3!` (completion of
/// tag 3, ok / failed), `x` (cancel).
fn describe<M, R>(line: &mut String, event: &Event<M, R>) {
    match event {
        Event::Message {
            from: Some(from), ..
        } => {
            line.push('m');
            push_pid(line, *from);
        }
        Event::Message { from: None, .. } => line.push('m'),
        Event::Completion { tag, result } => {
            line.push('c');
            push_number(line, *tag);
            if result.is_err() {
                line.push('!');
            }
        }
        _ => line.push('x'),
    }
}

/// The [`Reach`] handed to the contexts of steps and inits.
struct ReachOf<P: Process>(Rc<Shared<P>>);

impl<P: Process + 'static> Reach<P> for ReachOf<P>
where
    P::Command: Command,
{
    fn send(&self, package: Package<P::Message>) -> Result<(), SendError<P::Message>> {
        self.0.deliver(package)
    }

    fn spawn(&self, child: P, method: &str, input: P::Input) -> Result<Pid, SubmitError<P>> {
        let pid = self.0.allocate_pid();
        self.0.submit(pid, child, method, input).map(|h| h.pid())
    }

    fn terminate(&self, pid: Pid) -> Result<(), TerminateError> {
        self.0.terminate(pid, "requested")
    }
}

/// A deterministic simulator of processes of type `P`; see the crate
/// documentation.
///
/// A `Sim` is single-threaded (it is neither `Send` nor `Sync`), and so
/// are its handlers: they need not be `Send`.
pub struct Sim<P: Process> {
    shared: Rc<Shared<P>>,
}

impl<P: Process> fmt::Debug for Sim<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.shared.inner.borrow();
        f.debug_struct("Sim")
            .field("seed", &self.shared.seed)
            .field("now", &inner.now)
            .field("live", &inner.live.len())
            .field("steps", &inner.steps)
            .finish_non_exhaustive()
    }
}

impl<P: Process + 'static> Sim<P>
where
    P::Command: Command,
{
    /// A [`Builder`].
    #[must_use]
    pub fn builder() -> Builder<P> {
        Builder::new()
    }

    /// The seed this simulator was built with: print it when a check fails.
    #[must_use]
    pub fn seed(&self) -> u64 {
        self.shared.seed
    }

    /// A fresh PID (node 0, numbers from 1 up), for [`submit`](Self::submit).
    #[must_use]
    pub fn allocate_pid(&self) -> Pid {
        self.shared.allocate_pid()
    }

    /// Starts `process` under `pid`: runs its `init` with `method` and
    /// `input` now, then makes it runnable. Returns its [`JoinHandle`], as
    /// the scheduler's `submit` does.
    ///
    /// # Errors
    ///
    /// [`SubmitError::Stopping`] once a shutdown has begun (the process is
    /// handed back, not initialized); [`SubmitError::Init`] if `init` fails
    /// or panics (the process is closed); [`SubmitError::DuplicatePid`] if
    /// a live process has `pid` (the new one was initialized and closed,
    /// and is handed back).
    pub fn submit(
        &self,
        pid: Pid,
        process: P,
        method: &str,
        input: P::Input,
    ) -> Result<JoinHandle<P>, SubmitError<P>> {
        self.shared.submit(pid, process, method, input)
    }

    /// Sends `message` to process `pid`, from outside any process (its
    /// step sees `from: None`).
    ///
    /// # Errors
    ///
    /// The message is handed back: [`SendError::Closed`] if `pid` was
    /// allocated here or ran here and is not live (it completed or was
    /// terminated), [`SendError::UnknownPid`] otherwise.
    pub fn send(&self, pid: Pid, message: P::Message) -> Result<(), SendError<P::Message>> {
        self.shared.deliver(Package::new(pid, "", message))
    }

    /// Ends process `pid` with [`Error::Terminated`]: at once, or, if it
    /// is being stepped (a process terminating itself), when its step
    /// returns. Its queued events are dropped and it is closed.
    ///
    /// # Errors
    ///
    /// [`TerminateError::AlreadyComplete`] if `pid` was allocated or ran
    /// here and is not live, [`TerminateError::UnknownPid`] otherwise.
    pub fn terminate(&self, pid: Pid) -> Result<(), TerminateError> {
        self.shared.terminate(pid, "requested")
    }

    /// Steps processes, one at a time in seeded random order, firing
    /// timers when none is runnable, until no process is runnable and no
    /// timer is pending (or the step limit is reached). It can be called
    /// again after more submits or sends.
    ///
    /// # Panics
    ///
    /// If called from inside a step or a handler.
    pub fn run(&self) -> Report {
        self.shared.drive(&|| false, None)
    }

    /// Shuts down as the scheduler does, in virtual time: refuses new
    /// submits ([`SubmitError::Stopping`]), cancels every live process's
    /// [`CancelToken`] and sends it a cancel event, runs until every
    /// process has ended or the clock reaches `deadline` from now, then
    /// forces the rest to end with [`Error::Cancelled`] (closed once,
    /// result published). Timers due after that reach nothing.
    ///
    /// Only the first shutdown reports: a later call (or one after the
    /// [`Faults::shutdown`] fault began one) finishes that shutdown if it
    /// has not finished and reports nothing more.
    ///
    /// ```
    /// # use stepsched_process::{Context, Error, Events, Process, Status, StepOutput};
    /// # use stepsched_sim::Sim;
    /// # use std::time::Duration;
    /// /// Waits for messages; stops on its cancel event.
    /// struct Listener;
    /// impl Process for Listener {
    /// #   type Input = (); type Message = u8; type Response = u8; type Command = String; type Output = ();
    /// #   fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    ///     fn step(&mut self, _: &mut Context<'_, Self>, events: Events<'_, u8>, out: &mut StepOutput<String, ()>) -> Result<(), Error> {
    ///         if events.into_iter().any(|e| e.is_cancel()) {
    ///             return Err(Error::Cancelled);
    ///         }
    ///         out.set_status(Status::Idle);
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let sim = Sim::<Listener>::builder().build();
    /// let join = sim.submit(sim.allocate_pid(), Listener, "main", ()).unwrap();
    /// sim.run();
    /// let report = sim.shutdown(Duration::from_secs(1));
    /// assert_eq!((report.cancelled, report.forced), (1, 0));
    /// assert!(matches!(join.join(), Err(Error::Cancelled)));
    /// assert_eq!(sim.now(), Duration::ZERO, "no one waited for the deadline");
    /// ```
    ///
    /// # Panics
    ///
    /// If called from inside a step or a handler.
    pub fn shutdown(&self, deadline: Duration) -> ShutdownReport {
        let first = self.shared.begin_shutdown(deadline, "requested");
        let report = self.shared.drive(&|| false, None);
        match (first, report.shutdown) {
            (true, Some(report)) => report,
            _ => ShutdownReport::default(),
        }
    }

    /// Whether a shutdown has begun.
    #[must_use]
    pub fn is_stopping(&self) -> bool {
        self.shared.inner.borrow().stopping()
    }

    /// Takes the result of the latest process submitted under `pid`, if it
    /// has ended and its result was not taken yet (by this or by its
    /// [`JoinHandle`]).
    #[must_use]
    pub fn take_result(&self, pid: Pid) -> Option<Result<P::Output, Error>> {
        let cell = Rc::clone(self.shared.inner.borrow().results.get(&pid)?);
        let mut cell = cell.borrow_mut();
        match std::mem::replace(&mut *cell, Outcome::Taken) {
            Outcome::Done(result) => Some(result),
            other => {
                *cell = other;
                None
            }
        }
    }

    /// Whether process `pid` is live (submitted and not ended).
    #[must_use]
    pub fn is_live(&self, pid: Pid) -> bool {
        self.shared.inner.borrow().live.contains_key(&pid)
    }

    /// The virtual time: zero at build, moved only by timers (and by
    /// deadlines: a shutdown's, a [`JoinHandle::join_timeout`]'s).
    #[must_use]
    pub fn now(&self) -> Duration {
        self.shared.inner.borrow().now
    }

    /// The trace so far: one line per step (virtual time, PID, the events
    /// delivered, the status, the yields), per submit and per end. The same
    /// seed and the same inputs give the same lines. Empty if the builder
    /// turned it off ([`Builder::trace`]).
    #[must_use]
    pub fn trace(&self) -> Vec<String> {
        self.shared
            .inner
            .borrow()
            .trace
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The trace as one text, a line each.
    #[must_use]
    pub fn trace_text(&self) -> String {
        self.shared.inner.borrow().trace.clone()
    }
}

impl<P: Process> Drop for Sim<P> {
    /// Closes every process still live (once each); their results become
    /// [`Error::Cancelled`]; their queued events and pending timers are
    /// dropped.
    fn drop(&mut self) {
        let (live, timed) = {
            let mut inner = self.shared.inner.borrow_mut();
            inner.timers.clear();
            (
                std::mem::take(&mut inner.live),
                std::mem::take(&mut inner.timed),
            )
        };
        for (_, mut entry) in live {
            entry.cancel.cancel();
            if let Some(process) = entry.process.take() {
                close(process);
            }
            *entry.result.borrow_mut() = Outcome::Done(Err(Error::Cancelled));
            quietly_drop(entry);
        }
        quietly_drop(timed);
    }
}

impl<P: Process + 'static> Reach<P> for Sim<P>
where
    P::Command: Command,
{
    fn send(&self, package: Package<P::Message>) -> Result<(), SendError<P::Message>> {
        self.shared.deliver(package)
    }

    fn spawn(&self, child: P, method: &str, input: P::Input) -> Result<Pid, SubmitError<P>> {
        let pid = self.shared.allocate_pid();
        self.shared
            .submit(pid, child, method, input)
            .map(|h| h.pid())
    }

    fn terminate(&self, pid: Pid) -> Result<(), TerminateError> {
        self.shared.terminate(pid, "requested")
    }
}

/// Completes one yield of one process, once: now
/// ([`complete`](Self::complete)) or at a virtual time
/// ([`complete_after`](Self::complete_after)). Dropped without completing
/// (the handler forgot it, or panicked), it completes the yield with an
/// error, as the scheduler's does; [`never`](Self::never) drops it without
/// that. It may be kept and completed later, from another handler's call;
/// if the process has ended by then, the completion reaches nothing (nor
/// does it reach a later process submitted under the same PID).
pub struct Completer<P: Process> {
    shared: Weak<Shared<P>>,
    pid: Pid,
    serial: u64,
    tag: Tag,
    done: bool,
    /// The never-complete fault: whatever this completes reaches nothing.
    lost: bool,
}

impl<P: Process> fmt::Debug for Completer<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completer")
            .field("pid", &self.pid)
            .field("tag", &self.tag)
            .finish_non_exhaustive()
    }
}

impl<P: Process + 'static> Completer<P>
where
    P::Command: Command,
{
    /// The process whose yield this completes.
    #[must_use]
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The tag of the yield this completes.
    #[must_use]
    pub fn tag(&self) -> Tag {
        self.tag
    }

    /// Completes the yield now (unless a delay fault holds it back).
    /// Whether the process was still live to receive it.
    pub fn complete(self, result: Result<P::Response, Error>) -> bool {
        self.complete_after(Duration::ZERO, result)
    }

    /// Completes the yield `after` this much virtual time from now.
    /// Whether the process is live now (it may end before the time comes;
    /// the completion then reaches nothing).
    pub fn complete_after(mut self, after: Duration, result: Result<P::Response, Error>) -> bool {
        self.done = true;
        let Some(shared) = self.shared.upgrade() else {
            return false;
        };
        if self.lost {
            quietly_drop(result);
            return shared
                .inner
                .try_borrow()
                .is_ok_and(|inner| inner.reachable(self.pid, self.serial));
        }
        shared.complete(self.pid, self.serial, self.tag, result, after)
    }

    /// Drops the completer without completing and without the error a
    /// dropped completer sends: the yield never completes, as with a
    /// handler that holds its completer forever (a request lost on the
    /// way). The process waits until it is terminated or shut down.
    pub fn never(mut self) {
        self.done = true;
    }
}

impl<P: Process> Drop for Completer<P> {
    fn drop(&mut self) {
        if self.done || self.lost {
            return;
        }
        let error = if std::thread::panicking() {
            Error::Panicked("the handler panicked before completing".into())
        } else {
            Error::failed("the handler dropped its completer without completing")
        };
        if let Some(shared) = self.shared.upgrade() {
            shared.complete(self.pid, self.serial, self.tag, Err(error), Duration::ZERO);
        }
    }
}

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
