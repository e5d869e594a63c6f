//! A deterministic, single-threaded simulator for [`Process`]es: the same
//! process types the `stepsched` scheduler runs, stepped one at a time in
//! an order drawn from a seeded random number generator, with virtual time
//! and optional injected [`Faults`].
//!
//! A [`Sim`] is built like the scheduler ([`Sim::builder`], one handler per
//! command name), takes processes with [`submit`](Sim::submit), messages
//! with [`send`](Sim::send), and [`run`](Sim::run)s until nothing can
//! happen any more. Every step is recorded as one line of a
//! [`trace`](Sim::trace); the same seed gives the same trace, byte for
//! byte, so a failure found under one seed is replayed by running that seed
//! again ([`seed_from_env`] reads it from `STEPSCHED_SIM_SEED`).
//!
//! # What is simulated
//!
//! - **Order.** Each iteration picks one runnable process at random and
//!   steps it with every event queued for it, in one batch. Messages from
//!   one sender keep their order (as in the scheduler); events from
//!   different senders, and completions, arrive in the order they were
//!   queued unless [`Faults::reorder`] shuffles them.
//! - **Time.** Handlers complete now ([`Completer::complete`]) or at a
//!   virtual time ([`Completer::complete_after`]). When no process is
//!   runnable, the clock jumps to the next timer: nothing sleeps.
//! - **The step rules of the scheduler.** A step that sets no status ends
//!   its process with an error; a panicking `step` or `init` fails only its
//!   process; yields are dispatched whatever the status except `Done`; a
//!   `Done` process's queued events are dropped; `close` is called exactly
//!   once; a `Continue` process is runnable again at once; an `Idle` or
//!   `Yield` process waits for an event. [`Context::upgrade`] to a process
//!   value is honoured; upgrades to a named factory fail (the simulator has
//!   no factories).
//!
//! # Differences from the scheduler
//!
//! - A step gets every queued event at once (the scheduler takes at most
//!   256 per step).
//! - There is one order of events per seed, not the scheduler's races: a
//!   handler that completes during dispatch queues its completion like
//!   any other event, for a later step; the scheduler may step the process
//!   again at once with it.
//! - No process limit and no shutdown; no cancel events are delivered (a
//!   terminated process is not stepped again, and its [`CancelToken`] is
//!   cancelled). Dropping the [`Sim`] closes the processes still live.
//! - Processes, their value types and handlers need not be `Send`.
//!
//! # Commands
//!
//! A handler is found by the name a command gives through [`Command`], the
//! trait of `stepsched-process` that the `stepsched` scheduler re-exports
//! too: a command type implements it once for both.
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
//! sim.submit(pid, Sleeper, "main", ()).unwrap();
//! let report = sim.run();
//! assert_eq!(report.live, 0);
//! assert_eq!(sim.now(), Duration::from_secs(60));
//! assert_eq!(sim.take_result(pid), Some(Ok(5)));
//! ```

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::fmt::{self, Write as _};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::{Rc, Weak};
use std::time::Duration;

use fastrand::Rng;
pub use stepsched_process::Command;
use stepsched_process::{
    CancelToken, Context, Error, Event, Package, Pid, Process, Reach, SendError, Status,
    StepOutput, SubmitError, Tag, TerminateError, UpgradeTo,
};

/// The environment variable [`seed_from_env`] reads.
pub const SEED_ENV: &str = "STEPSCHED_SIM_SEED";

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
    /// The probability that a step's batch of events is shuffled across
    /// senders. Messages from one sender keep their order; each completion
    /// counts as a sender of its own.
    pub reorder: f64,
    /// The probability, before each step, that a random live process is
    /// terminated (it ends with [`Error::Terminated`]).
    pub terminate: f64,
    /// The probability that a yield is completed with an error instead of
    /// being handed to its handler.
    pub handler_error: f64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            delay: 0.0,
            max_delay: Duration::from_millis(10),
            reorder: 0.0,
            terminate: 0.0,
            handler_error: 0.0,
        }
    }
}

/// A boxed handler.
type HandlerFn<P> = Box<dyn Fn(<P as Process>::Command, Completer<P>)>;

/// Builds a [`Sim`]: its seed, its handlers, its faults.
pub struct Builder<P: Process> {
    seed: u64,
    faults: Faults,
    max_steps: u64,
    handlers: HashMap<String, HandlerFn<P>>,
}

impl<P: Process> fmt::Debug for Builder<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<_> = self.handlers.keys().collect();
        names.sort();
        f.debug_struct("Builder")
            .field("seed", &self.seed)
            .field("faults", &self.faults)
            .field("max_steps", &self.max_steps)
            .field("handlers", &names)
            .finish()
    }
}

impl<P: Process> Default for Builder<P> {
    fn default() -> Self {
        Builder {
            seed: 0,
            faults: Faults::default(),
            max_steps: u64::MAX,
            handlers: HashMap::new(),
        }
    }
}

impl<P: Process + 'static> Builder<P>
where
    P::Command: Command,
{
    /// A builder with seed 0, no faults, no handlers, no step limit.
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

    /// Builds the simulator, at virtual time zero.
    #[must_use]
    pub fn build(self) -> Sim<P> {
        Sim {
            shared: Rc::new(Shared {
                seed: self.seed,
                faults: self.faults,
                max_steps: self.max_steps,
                handlers: self.handlers,
                inner: RefCell::new(Inner {
                    rng: Rng::with_seed(self.seed),
                    now: Duration::ZERO,
                    timer_seq: 0,
                    completion_seq: 0,
                    next_number: 1,
                    live: BTreeMap::new(),
                    ready: Vec::new(),
                    timers: BinaryHeap::new(),
                    timed: HashMap::new(),
                    results: BTreeMap::new(),
                    ended: BTreeSet::new(),
                    trace: Vec::new(),
                    steps: 0,
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
}

/// A completion waiting for its virtual time: to whom, which yield, what.
type Timed<P> = (Pid, Tag, Result<<P as Process>::Response, Error>);

/// The event type of `P`.
type Ev<P> = Event<<P as Process>::Message, <P as Process>::Response>;

/// One live process.
struct Entry<P: Process> {
    /// `None` while it is being stepped (or initialized by an upgrade).
    process: Option<P>,
    cancel: CancelToken,
    pending: Vec<(Origin, Ev<P>)>,
    /// In the ready list.
    queued: bool,
    /// Being stepped now.
    running: bool,
    /// Terminated while being stepped: the step's end closes it.
    terminated: bool,
}

/// The simulator's mutable state, borrowed only between calls into
/// process or handler code, never across them.
struct Inner<P: Process> {
    rng: Rng,
    now: Duration,
    timer_seq: u64,
    completion_seq: u64,
    next_number: u64,
    live: BTreeMap<Pid, Entry<P>>,
    ready: Vec<Pid>,
    timers: BinaryHeap<Reverse<(Duration, u64)>>,
    timed: HashMap<u64, Timed<P>>,
    results: BTreeMap<Pid, Result<P::Output, Error>>,
    ended: BTreeSet<Pid>,
    trace: Vec<String>,
    steps: u64,
}

impl<P: Process> Inner<P> {
    /// Whether `pid` was handed out or ran here: refusals for it are
    /// `Closed`, not `UnknownPid`.
    fn known(&self, pid: Pid) -> bool {
        self.ended.contains(&pid) || (pid.node() == 0 && pid.number() < self.next_number)
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
                self.make_ready(pid);
                Ok(())
            }
            _ => Err(event),
        }
    }
}

/// What the simulator and its completers share.
struct Shared<P: Process> {
    seed: u64,
    faults: Faults,
    max_steps: u64,
    handlers: HashMap<String, HandlerFn<P>>,
    inner: RefCell<Inner<P>>,
}

/// Runs `f`, turning a panic into an error.
fn caught<T>(f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(panic) => Err(Error::from_panic(&*panic)),
    }
}

/// Closes `process`, ignoring a panic in `close`.
fn close<P: Process>(mut process: P) {
    let _ = catch_unwind(AssertUnwindSafe(move || process.close()));
}

impl<P: Process> Shared<P> {
    /// Queues the completion of `pid`'s yield `tag`, after `after` plus any
    /// injected delay. Whether `pid` is live.
    fn complete(
        &self,
        pid: Pid,
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
        if inner.live.get(&pid).is_none_or(|e| e.terminated) {
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
            inner.timed.insert(seq, (pid, tag, result));
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
    ) -> Result<Pid, SubmitError<P>> {
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
        inner.live.insert(
            pid,
            Entry {
                process: Some(process),
                cancel,
                pending: Vec::new(),
                queued: false,
                running: false,
                terminated: false,
            },
        );
        inner.make_ready(pid);
        let line = format!("{} {pid} submit {method}", stamp(inner.now));
        inner.trace.push(line);
        Ok(pid)
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
        let line = format!("{} {pid} terminated ({why})", stamp(inner.now));
        inner.trace.push(line);
        let entry = inner.live.get_mut(&pid).expect("looked up above");
        if entry.running {
            // The step's end closes it and publishes the result.
            entry.terminated = true;
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
            inner.ended.insert(pid);
            entry
        };
        // Dropped and closed outside the borrow: user code runs here.
        let mut stored = None;
        if let Some(mut entry) = entry {
            entry.cancel.cancel();
            let pending = std::mem::take(&mut entry.pending);
            let _ = catch_unwind(AssertUnwindSafe(move || drop(pending)));
            stored = entry.process.take();
        }
        if let Some(p) = process.or(stored) {
            close(p);
        }
        let mut inner = self.inner.borrow_mut();
        let line = format!(
            "{} {pid} end {}",
            stamp(inner.now),
            match &result {
                Ok(_) => "ok".to_owned(),
                Err(e) => format!("err: {e}"),
            }
        );
        inner.trace.push(line);
        inner.results.insert(pid, result);
    }

    /// Moves the clock to the next timer and fires every timer due then.
    /// Whether there was one.
    fn fire_timers(&self) -> bool {
        let mut inner = self.inner.borrow_mut();
        let Some(&Reverse((at, _))) = inner.timers.peek() else {
            return false;
        };
        inner.now = inner.now.max(at);
        let mut dropped = Vec::new();
        while let Some(&Reverse((t, seq))) = inner.timers.peek() {
            if t > at {
                break;
            }
            inner.timers.pop();
            let (pid, tag, result) = inner.timed.remove(&seq).expect("every timer has a payload");
            inner.completion_seq += 1;
            let origin = Origin::Completion(inner.completion_seq);
            if let Err(event) = inner.push_event(pid, origin, Event::completion(tag, result)) {
                dropped.push(event);
            }
        }
        drop(inner);
        let _ = catch_unwind(AssertUnwindSafe(move || drop(dropped)));
        true
    }

    /// Takes `pid`'s queued events for a step, shuffled across origins if
    /// the reorder fault fires.
    fn take_batch(inner: &mut Inner<P>, pid: Pid, reorder: f64) -> Vec<Ev<P>> {
        let pending = std::mem::take(&mut inner.live.get_mut(&pid).expect("live").pending);
        if pending.len() < 2 || !inner.draw(reorder) {
            return pending.into_iter().map(|(_, e)| e).collect();
        }
        let mut queues: Vec<(Origin, VecDeque<Ev<P>>)> = Vec::new();
        for (origin, event) in pending {
            match queues.iter_mut().find(|(o, _)| *o == origin) {
                Some((_, q)) => q.push_back(event),
                None => queues.push((origin, VecDeque::from([event]))),
            }
        }
        let mut batch = Vec::new();
        while !queues.is_empty() {
            let i = inner.rng.usize(..queues.len());
            batch.push(queues[i].1.pop_front().expect("queues are non-empty"));
            if queues[i].1.is_empty() {
                queues.remove(i);
            }
        }
        batch
    }

    /// Steps process `pid` once, with every event queued for it.
    fn step(self: &Rc<Self>, pid: Pid) {
        let (mut process, cancel, mut batch) = {
            let mut inner = self.inner.borrow_mut();
            let Some(entry) = inner.live.get_mut(&pid) else {
                return;
            };
            entry.queued = false;
            let Some(process) = entry.process.take() else {
                return;
            };
            entry.running = true;
            let cancel = entry.cancel.clone();
            let batch = Self::take_batch(&mut inner, pid, self.faults.reorder);
            inner.steps += 1;
            (process, cancel, batch)
        };
        let mut line = String::new();
        {
            let inner = self.inner.borrow();
            let _ = write!(line, "{} {pid} events=[", stamp(inner.now));
        }
        for (i, event) in batch.iter().enumerate() {
            if i > 0 {
                line.push(',');
            }
            describe(&mut line, event);
        }
        line.push(']');
        let reach = ReachOf(Rc::clone(self));
        let mut out = StepOutput::new();
        let mut cx = Context::new(pid, &cancel, &reach);
        let stepped = caught(|| process.step(&mut cx, batch.drain(..), &mut out));
        let upgrade = cx.take_upgrade();
        drop(cx);
        let _ = catch_unwind(AssertUnwindSafe(move || drop(batch)));
        let terminated = self
            .inner
            .borrow()
            .live
            .get(&pid)
            .is_none_or(|e| e.terminated);
        if terminated {
            self.push_line(line + " terminated-during-step");
            return self.end(pid, Some(process), Err(Error::Terminated));
        }
        if let (Some(upgrade), Ok(())) = (upgrade, &stepped) {
            close_ref(&mut process);
            drop(process);
            let mut new = match upgrade.to {
                UpgradeTo::Process(new) => new,
                UpgradeTo::Factory(name) => {
                    self.push_line(line + " upgrade-failed");
                    let e = Error::Failed(format!("upgrade: no factory named `{name}`"));
                    return self.end(pid, None, Err(e));
                }
            };
            let cx = Context::new(pid, &cancel, &reach);
            if let Err(e) = caught(|| new.init(&cx, &upgrade.method, upgrade.input)) {
                self.push_line(line + " upgrade-failed");
                return self.end(pid, Some(new), Err(e));
            }
            self.push_line(line + &format!(" upgrade {}", upgrade.method));
            return self.park(pid, new, true);
        }
        let status = match stepped {
            Ok(()) => out.take_status(),
            Err(e) => {
                self.push_line(line + &format!(" error: {e}"));
                return self.end(pid, Some(process), Err(e));
            }
        };
        let status = match status {
            None => {
                self.push_line(line + " status=none");
                let e = Error::Failed(format!("process {pid}: step set no status"));
                return self.end(pid, Some(process), Err(e));
            }
            Some(Status::Done(output)) => {
                self.push_line(line + " status=done");
                return self.end(pid, Some(process), Ok(output));
            }
            Some(status) => status,
        };
        let _ = write!(
            line,
            " status={} yields=[",
            match status {
                Status::Continue => "continue",
                Status::Idle => "idle",
                _ => "yield",
            }
        );
        for (i, y) in out.yields().iter().enumerate() {
            if i > 0 {
                line.push(',');
            }
            let _ = write!(line, "{}#{}", y.command.name(), y.tag);
        }
        line.push(']');
        self.push_line(line);
        for y in out.yields_mut().drain() {
            if self
                .inner
                .borrow()
                .live
                .get(&pid)
                .is_none_or(|e| e.terminated)
            {
                break;
            }
            let completer = Completer {
                shared: Rc::downgrade(self),
                pid,
                tag: y.tag,
                done: false,
            };
            if self.inner.borrow_mut().draw(self.faults.handler_error) {
                completer.complete(Err(Error::failed("injected handler error")));
                continue;
            }
            match self.handlers.get(y.command.name()) {
                Some(handler) => {
                    let _ = catch_unwind(AssertUnwindSafe(|| handler(y.command, completer)));
                }
                None => {
                    let message = format!("unknown command `{}`", y.command.name());
                    completer.complete(Err(Error::Failed(message)));
                }
            }
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

    fn push_line(&self, line: String) {
        self.inner.borrow_mut().trace.push(line);
    }

    fn run(self: &Rc<Self>) -> Report {
        let start = self.inner.borrow().steps;
        loop {
            let next = {
                let mut inner = self.inner.borrow_mut();
                if inner.steps - start >= self.max_steps {
                    let live = inner.live.len();
                    let more = !inner.ready.is_empty() || !inner.timers.is_empty();
                    return Report {
                        steps: inner.steps - start,
                        now: inner.now,
                        live,
                        step_limit_hit: more,
                    };
                }
                let victim = if !inner.live.is_empty() && inner.draw(self.faults.terminate) {
                    let len = inner.live.len();
                    let n = inner.rng.usize(..len);
                    inner.live.keys().nth(n).copied()
                } else {
                    None
                };
                if let Some(victim) = victim {
                    drop(inner);
                    let _ = self.terminate(victim, "fault");
                    continue;
                }
                if inner.ready.is_empty() {
                    None
                } else {
                    let len = inner.ready.len();
                    let i = inner.rng.usize(..len);
                    Some(inner.ready.swap_remove(i))
                }
            };
            match next {
                Some(pid) => self.step(pid),
                None if self.fire_timers() => {}
                None => break,
            }
        }
        let inner = self.inner.borrow();
        Report {
            steps: inner.steps - start,
            now: inner.now,
            live: inner.live.len(),
            step_limit_hit: false,
        }
    }
}

/// Closes a process that is kept (its value is handed back afterwards).
fn close_ref<P: Process>(process: &mut P) {
    let _ = catch_unwind(AssertUnwindSafe(|| process.close()));
}

/// `t=<microseconds>us`, the time stamp of a trace line.
fn stamp(now: Duration) -> String {
    format!("t={}us", now.as_micros())
}

/// Appends a short form of `event` to a trace line: `m<0.1>` (a message
/// from process `<0.1>`), `m` (from outside), `c3` / `c3!` (completion of
/// tag 3, ok / failed), `x` (cancel).
fn describe<M, R>(line: &mut String, event: &Event<M, R>) {
    match event {
        Event::Message {
            from: Some(from), ..
        } => {
            let _ = write!(line, "m{from}");
        }
        Event::Message { from: None, .. } => line.push('m'),
        Event::Completion { tag, result } => {
            let _ = write!(line, "c{tag}{}", if result.is_ok() { "" } else { "!" });
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
        self.0.submit(pid, child, method, input)
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
    /// `input` now, then makes it runnable. Returns `pid`.
    ///
    /// # Errors
    ///
    /// [`SubmitError::Init`] if `init` fails or panics (the process is
    /// closed); [`SubmitError::DuplicatePid`] if a live process has `pid`
    /// (the new one was initialized and closed, and is handed back).
    pub fn submit(
        &self,
        pid: Pid,
        process: P,
        method: &str,
        input: P::Input,
    ) -> Result<Pid, SubmitError<P>> {
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
    pub fn run(&self) -> Report {
        self.shared.run()
    }

    /// Takes the result of process `pid`, if it has ended and the result
    /// was not taken yet.
    #[must_use]
    pub fn take_result(&self, pid: Pid) -> Option<Result<P::Output, Error>> {
        self.shared.inner.borrow_mut().results.remove(&pid)
    }

    /// Whether process `pid` is live (submitted and not ended).
    #[must_use]
    pub fn is_live(&self, pid: Pid) -> bool {
        self.shared.inner.borrow().live.contains_key(&pid)
    }

    /// The virtual time: zero at build, moved only by timers.
    #[must_use]
    pub fn now(&self) -> Duration {
        self.shared.inner.borrow().now
    }

    /// The trace so far: one line per step (virtual time, PID, the events
    /// delivered, the status, the yields), per submit and per end. The same
    /// seed and the same inputs give the same lines.
    #[must_use]
    pub fn trace(&self) -> Vec<String> {
        self.shared.inner.borrow().trace.clone()
    }

    /// The trace as one text, a line each.
    #[must_use]
    pub fn trace_text(&self) -> String {
        let inner = self.shared.inner.borrow();
        let mut text = String::new();
        for line in &inner.trace {
            text.push_str(line);
            text.push('\n');
        }
        text
    }
}

impl<P: Process> Drop for Sim<P> {
    /// Closes every process still live (once each, as the scheduler does
    /// at shutdown); their queued events and pending timers are dropped.
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
            let _ = catch_unwind(AssertUnwindSafe(move || drop(entry)));
        }
        let _ = catch_unwind(AssertUnwindSafe(move || drop(timed)));
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
        self.shared.submit(pid, child, method, input)
    }

    fn terminate(&self, pid: Pid) -> Result<(), TerminateError> {
        self.shared.terminate(pid, "requested")
    }
}

/// Completes one yield of one process, once: now
/// ([`complete`](Self::complete)) or at a virtual time
/// ([`complete_after`](Self::complete_after)). Dropped without completing
/// (the handler forgot it, or panicked), it completes the yield with an
/// error, as the scheduler's does. It may be kept and completed later,
/// from another handler's call; if the process has ended by then, the
/// completion reaches nothing.
pub struct Completer<P: Process> {
    shared: Weak<Shared<P>>,
    pid: Pid,
    tag: Tag,
    done: bool,
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
        match self.shared.upgrade() {
            Some(shared) => shared.complete(self.pid, self.tag, result, after),
            None => false,
        }
    }
}

impl<P: Process> Drop for Completer<P> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let error = if std::thread::panicking() {
            Error::Panicked("the handler panicked before completing".into())
        } else {
            Error::failed("the handler dropped its completer without completing")
        };
        if let Some(shared) = self.shared.upgrade() {
            shared.complete(self.pid, self.tag, Err(error), Duration::ZERO);
        }
    }
}

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
