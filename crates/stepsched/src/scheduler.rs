//! The scheduler: processes in slots, a worker pool that steps them, command
//! dispatch, message routing, termination and shutdown.
//!
//! # The life of a process
//!
//! A [`Slot`] holds one process: its state cell, its event queue, and its
//! *body* (the process itself, the event batch, the step output). The body
//! is touched by one thread at a time, and the state cell says which:
//!
//! * the worker whose `try_start` moved the state Ready → Running owns the
//!   body until its next transition (park, reschedule, complete);
//! * a `force_complete` (terminate, shutdown) whose previous state was not
//!   Running owns the body from then on — no worker can start it any more;
//! * a worker whose transition out of Running reports `Terminated` still
//!   owns the body (the forcer saw Running and left `close` to it).
//!
//! Producers — completers and senders — never touch the body: they push an
//! event into the queue and call [`StateCell::wake`]; the single winner of a
//! Blocked/Idle → Ready transition puts the slot in a run queue. A wake
//! while Running sets the wakeup flag, and the worker's next transition
//! answers `Requeue`. So no event is lost and no two steps of a process
//! overlap (the argument is in `stepsched_process::state`).
//!
//! A process's *result* is published once: whoever first finishes it (the
//! worker on `Done` or an error, or a forcer) sets the slot's `finished`
//! flag, removes its route (compare-before-delete, so a newer process with
//! the same PID keeps its route), runs the completion hook, stores the
//! result for the [`JoinHandle`] and releases its place in the live count.
//! `close` is called exactly once, by whoever owns the body at the end.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use stepsched_mpsc as mpsc;
use stepsched_pool::{Pool, WorkerContext, WorkerStats};
use stepsched_process::{
    CancelToken, Context, Error, Event, ForceComplete, Park, Phase, Process, Start, StateCell, Status,
    StepOutput, Wake,
};
use stepsched_relay::{Package, Pid, PidAllocator, Receiver, RoutingTable};

use crate::SchedProcess;
use crate::error::{SendError, SubmitError, TerminateError};
use crate::handler::{Command, Completer, Handler};
use crate::join::{JoinHandle, ResultCell};
use crate::primitive::cell::UnsafeCell;
use crate::primitive::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
use crate::primitive::sync::{Arc, Condvar, Mutex};

/// `last_worker` before the first step.
const NO_WORKER: usize = usize::MAX;

/// A process's lifecycle hook.
type StartHook = Arc<dyn Fn(Pid) + Send + Sync>;
/// A process's completion hook.
type CompleteHook<O> = Arc<dyn Fn(Pid, Result<&O, &Error>) + Send + Sync>;

/// Everything the scheduler's handles and workers share.
pub(crate) struct Core<P: Process + 'static> {
    pool: OnceLock<Pool<Task<P>>>,
    routes: RoutingTable<Arc<Slot<P>>>,
    handlers: HashMap<String, Arc<dyn Handler<P>>>,
    pids: PidAllocator,
    max_processes: usize,
    /// Processes registered or being submitted (a reservation counts).
    live: AtomicUsize,
    stopping: AtomicBool,
    /// Shutdown waits here for `live` to reach zero.
    drained: Mutex<()>,
    drained_cv: Condvar,
    on_start: Option<StartHook>,
    on_complete: Option<CompleteHook<P::Output>>,
    submitted: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    steps: AtomicU64,
}

/// A slot in a run queue.
pub(crate) struct Task<P: Process + 'static>(Arc<Slot<P>>);

// SAFETY: a `Task` is only made by `Task::new`, which requires
// `P: SchedProcess`; then `Slot<P>` is `Send + Sync` (see below), so the
// `Arc` may move between threads. The impl is unconditional only so that
// the pool's `Send` bound does not send the compiler around the cycle
// process → handle → pool → slot → process.
unsafe impl<P: Process + 'static> Send for Task<P> {}

impl<P: SchedProcess> Task<P> {
    fn new(slot: Arc<Slot<P>>) -> Self {
        Task(slot)
    }
}

/// One process: its state, its event queue, its body.
pub(crate) struct Slot<P: Process + 'static> {
    pub(crate) pid: Pid,
    core: Arc<Core<P>>,
    state: StateCell,
    /// Producers' side of the event queue, bound to the current generation.
    pub(crate) sender: mpsc::Sender<Event<P::Payload>>,
    /// The process and what only its owner touches; see the module docs
    /// for who the owner is.
    body: UnsafeCell<Body<P>>,
    /// The worker that last stepped the process (completions go back there).
    last_worker: AtomicUsize,
    cancel: CancelToken,
    cancel_sent: AtomicBool,
    finished: AtomicBool,
    pub(crate) result: ResultCell<P::Output>,
}

struct Body<P: Process + 'static> {
    /// `None` once closed.
    process: Option<P>,
    events: mpsc::Receiver<Event<P::Payload>>,
    batch: Vec<Event<P::Payload>>,
    out: StepOutput<P::Command, P::Output>,
}

// SAFETY: `Slot` moves between worker threads and is shared with producers.
// Its fields are atomics, `Sync` channel ends and a mutex-protected result,
// except `body`, which one thread at a time accesses (the owner as defined
// in the module docs, established by a CAS on `state` that synchronizes
// with the previous owner's transition). Everything in the body is `Send`.
unsafe impl<P> Sync for Slot<P>
where
    P: Process + Send,
    P::Payload: Send,
    P::Command: Send,
    P::Output: Send,
{
}
// SAFETY: as above; every field is `Send` when the process and its
// associated types are (which `SchedProcess` requires).
unsafe impl<P> Send for Slot<P>
where
    P: Process + Send,
    P::Payload: Send,
    P::Command: Send,
    P::Output: Send,
{
}

impl<P: SchedProcess> Slot<P> {
    /// Wakes the process after an event was pushed: the winner queues it.
    pub(crate) fn wake(self: &Arc<Self>) {
        if let Wake::Queue = self.state.wake() {
            self.core.schedule(self.clone());
        }
    }

    /// Sends the shutdown cancel event, once.
    fn send_cancel(self: &Arc<Self>) {
        if self.cancel_sent.swap(true, Ordering::AcqRel) {
            return;
        }
        self.cancel.cancel();
        if self.sender.push(Event::cancel()).is_ok() {
            self.wake();
        }
    }

    /// Closes the process: `close`, then the event queue (later pushes are
    /// refused; queued events are dropped).
    ///
    /// # Safety
    ///
    /// The caller owns the body (module docs).
    unsafe fn close_body(&self) {
        // SAFETY: the caller owns the body.
        let body = unsafe { &mut *self.body.get() };
        if let Some(mut process) = body.process.take() {
            if catch_unwind(AssertUnwindSafe(|| process.close())).is_err() {
                tracing::debug!(pid = %self.pid, "close panicked");
            }
            drop(process);
        }
        body.events.close();
        body.batch.clear();
        body.events.drain_into(&mut body.batch);
        body.batch.clear();
    }

    /// Publishes the result, once; later calls do nothing.
    fn finish(self: &Arc<Self>, result: Result<P::Output, Error>) {
        if self.finished.swap(true, Ordering::AcqRel) {
            return;
        }
        let core = &self.core;
        core.routes.unregister_if_same(self.pid, self);
        match &result {
            Ok(_) => core.completed.fetch_add(1, Ordering::Relaxed),
            Err(_) => core.failed.fetch_add(1, Ordering::Relaxed),
        };
        tracing::debug!(pid = %self.pid, ok = result.is_ok(), "process complete");
        if let Some(hook) = &core.on_complete {
            let r = result.as_ref();
            if catch_unwind(AssertUnwindSafe(|| hook(self.pid, r))).is_err() {
                tracing::debug!(pid = %self.pid, "completion hook panicked");
            }
        }
        self.result.set(result);
        core.release_live();
    }

    /// Forces the process to Complete with `error` (terminate, shutdown).
    /// Returns `false` if it had already completed.
    fn force(self: &Arc<Self>, error: Error) -> bool {
        match self.state.force_complete() {
            won @ ForceComplete::Won { .. } => {
                if won.must_close() {
                    // SAFETY: the previous state was not Running and no
                    // worker can start a Complete process: the body is ours.
                    unsafe { self.close_body() };
                }
                self.finish(Err(error));
                true
            }
            ForceComplete::AlreadyComplete => false,
        }
    }
}

impl<P: SchedProcess> Core<P> {
    fn pool(&self) -> &Pool<Task<P>> {
        self.pool.get().expect("the pool is set at build")
    }

    /// Puts a Ready slot in a run queue: back to the worker that last ran
    /// it, else the global queue (or the local deque from a worker).
    fn schedule(&self, slot: Arc<Slot<P>>) {
        let pool = self.pool();
        let worker = slot.last_worker.load(Ordering::Relaxed);
        let task = Task::new(slot);
        let refused = if worker == NO_WORKER {
            pool.submit(task).err()
        } else {
            pool.submit_to(worker, task).err()
        };
        // A refusal means the pool is shutting down; shutdown force-closes
        // every live process, so the slot is not stranded.
        drop(refused);
    }

    fn release_live(&self) {
        if self.live.fetch_sub(1, Ordering::AcqRel) == 1 && self.stopping.load(Ordering::Acquire) {
            let _guard = self.drained.lock().unwrap_or_else(|p| p.into_inner());
            self.drained_cv.notify_all();
        }
    }

    /// Steps one process: the worker loop body.
    fn run(&self, Task(slot): Task<P>, ctx: &WorkerContext<Task<P>>) {
        match slot.state.try_start() {
            Start::Started => {}
            // Force-completed while queued: the forcer closed it.
            Start::Terminated => return,
            Start::Invalid(state) => {
                debug_assert!(false, "a queued process was {state:?}");
                return;
            }
        }
        // Relaxed: only a hint for where to send the next completion.
        slot.last_worker.store(ctx.index(), Ordering::Relaxed);
        self.steps.fetch_add(1, Ordering::Relaxed);
        // SAFETY: our `try_start` won: we own the body until our next
        // transition of `slot.state`, and we drop this borrow before it.
        let body = unsafe { &mut *slot.body.get() };
        body.events.drain_into(&mut body.batch);
        body.out.reset();
        let Some(process) = body.process.as_mut() else {
            debug_assert!(false, "a started process is not closed");
            return;
        };
        let _span =
            tracing::trace_span!("step", pid = %slot.pid, events = body.batch.len()).entered();
        let stepped = catch_unwind(AssertUnwindSafe(|| {
            process.step(body.batch.drain(..), &mut body.out)
        }));
        body.batch.clear();
        let status = match stepped {
            Ok(Ok(())) => body.out.take_status(),
            Ok(Err(e)) => return self.end(&slot, Err(e)),
            Err(panic) => return self.end(&slot, Err(Error::Panicked(panic_message(&*panic)))),
        };
        let continued = matches!(status, Status::Continue);
        let park = match status {
            Status::Done(output) => return self.end(&slot, Ok(output)),
            Status::Continue => slot.state.reschedule(),
            Status::Idle => slot.state.park_idle(),
            Status::Yield => {
                self.dispatch(&slot, &mut body.out);
                slot.state.finish_dispatch()
            }
        };
        // The body is no longer ours unless `park` says so.
        match park {
            Park::Parked => {}
            // A process that asked to continue goes to the back of the
            // global queue, so it cannot starve the others on this worker.
            Park::Requeue if continued => ctx.inject(Task::new(slot)),
            // Woken while running: stay on this worker (cache-warm).
            Park::Requeue => ctx.push(Task::new(slot)),
            Park::Terminated => {
                // Force-completed while we ran it: the forcer left `close`
                // to us and already published the result.
                // SAFETY: the forcer saw Running, so the body is still ours.
                unsafe { slot.close_body() };
                slot.finish(Err(Error::Terminated));
            }
            Park::Invalid(state) => debug_assert!(false, "invalid transition from {state:?}"),
        }
    }

    /// Ends a process we own (Running) with `result`.
    fn end(&self, slot: &Arc<Slot<P>>, result: Result<P::Output, Error>) {
        // Whatever `complete` answers, the body is still ours: Completed
        // (we won) or Terminated (a forcer saw Running and left `close` to
        // us; its result stands, ours is dropped by `finish`).
        let _ = slot.state.complete();
        // SAFETY: we owned the body while Running and nobody else takes it
        // from a Complete state.
        unsafe { slot.close_body() };
        slot.finish(result);
    }

    /// Sends each yield to its handler.
    fn dispatch(&self, slot: &Arc<Slot<P>>, out: &mut StepOutput<P::Command, P::Output>) {
        for y in out.yields_mut().drain() {
            let completer = Completer::new(slot.clone(), y.tag);
            match self.handlers.get(y.command.name()) {
                Some(handler) => {
                    // A panic drops the completer, which completes the tag
                    // with an error.
                    let _ = catch_unwind(AssertUnwindSafe(|| handler.handle(y.command, completer)));
                }
                None => {
                    let message = format!("unknown command `{}`", y.command.name());
                    completer.complete(Err(Error::Failed(message)));
                }
            }
        }
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a process panicked".to_string()
    }
}

/// Builds a [`Scheduler`].
///
/// ```
/// use stepsched::{Builder, Completer, Context, Error, Events, Process, Status, StepOutput};
///
/// struct Noop;
/// impl Process for Noop {
///     type Input = ();
///     type Payload = ();
///     type Command = String;
///     type Output = ();
///     fn init(&mut self, _: &Context, _: &str, _: ()) -> Result<(), Error> {
///         Ok(())
///     }
///     fn step(&mut self, _: Events<'_, ()>, out: &mut StepOutput<String, ()>) -> Result<(), Error> {
///         out.set_status(Status::Done(()));
///         Ok(())
///     }
/// }
///
/// let scheduler = Builder::<Noop>::new()
///     .workers(2)
///     .max_processes(10_000)
///     .handler("echo", |cmd: String, done: Completer<Noop>| {
///         let _ = (cmd, done.complete(Ok(())));
///     })
///     .build()
///     .unwrap();
/// assert_eq!(scheduler.workers(), 2);
/// ```
pub struct Builder<P: Process> {
    workers: Option<usize>,
    max_processes: usize,
    node: u32,
    handlers: HashMap<String, Arc<dyn Handler<P>>>,
    on_start: Option<StartHook>,
    on_complete: Option<CompleteHook<P::Output>>,
    thread_name: String,
}

impl<P: SchedProcess> Default for Builder<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: SchedProcess> Builder<P> {
    /// A builder with the defaults: one worker per available core, no
    /// process limit, node 0, no handlers, no hooks.
    pub fn new() -> Self {
        Builder {
            workers: None,
            max_processes: usize::MAX,
            node: 0,
            handlers: HashMap::new(),
            on_start: None,
            on_complete: None,
            thread_name: "stepsched-worker".into(),
        }
    }

    /// The number of worker threads (default: available parallelism).
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = Some(workers.max(1));
        self
    }

    /// The most processes alive at once; `submit` beyond it fails with
    /// [`SubmitError::LimitReached`]. The limit is exact under concurrent
    /// submits.
    pub fn max_processes(mut self, max: usize) -> Self {
        self.max_processes = max;
        self
    }

    /// The node number of the PIDs [`Handle::allocate_pid`] hands out.
    pub fn node(mut self, node: u32) -> Self {
        self.node = node;
        self
    }

    /// The prefix of the worker threads' names.
    pub fn thread_name(mut self, prefix: impl Into<String>) -> Self {
        self.thread_name = prefix.into();
        self
    }

    /// Registers the handler for commands named `name` (see [`Command`]).
    pub fn handler(mut self, name: impl Into<String>, handler: impl Handler<P>) -> Self {
        self.handlers.insert(name.into(), Arc::new(handler));
        self
    }

    /// A hook called with the PID of each process once it is registered,
    /// before its first step, on the submitting thread, outside every lock.
    pub fn on_start(mut self, hook: impl Fn(Pid) + Send + Sync + 'static) -> Self {
        self.on_start = Some(Arc::new(hook));
        self
    }

    /// A hook called once per process with its result, when it completes,
    /// outside every lock (it may call `send` or `terminate`).
    pub fn on_complete(
        mut self,
        hook: impl Fn(Pid, Result<&P::Output, &Error>) + Send + Sync + 'static,
    ) -> Self {
        self.on_complete = Some(Arc::new(hook));
        self
    }

    /// Starts the workers.
    ///
    /// # Errors
    ///
    /// If a worker thread cannot be spawned.
    pub fn build(self) -> io::Result<Scheduler<P>> {
        let workers = self
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let core = Arc::new(Core {
            pool: OnceLock::new(),
            routes: RoutingTable::new(),
            handlers: self.handlers,
            pids: PidAllocator::new(self.node),
            max_processes: self.max_processes,
            live: AtomicUsize::new(0),
            stopping: AtomicBool::new(false),
            drained: Mutex::new(()),
            drained_cv: Condvar::new(),
            on_start: self.on_start,
            on_complete: self.on_complete,
            submitted: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            steps: AtomicU64::new(0),
        });
        let pool = Pool::builder()
            .workers(workers)
            .thread_name(self.thread_name)
            .build(|task: Task<P>, ctx: &WorkerContext<Task<P>>| {
                // Each slot carries its core, so the pool holds no cycle
                // back to the scheduler.
                let core = task.0.core.clone();
                core.run(task, ctx);
            })?;
        if core.pool.set(pool).is_err() {
            unreachable!("the pool is set once");
        }
        Ok(Scheduler {
            handle: Handle { core },
            shut_down: AtomicBool::new(false),
        })
    }
}

impl<P: SchedProcess> fmt::Debug for Builder<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("workers", &self.workers)
            .field("max_processes", &self.max_processes)
            .field("handlers", &self.handlers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// A cloneable handle to a scheduler, for use anywhere — in handlers, in
/// processes' hooks, on other threads. It does not keep the workers
/// running: the [`Scheduler`] owns them.
pub struct Handle<P: Process + 'static> {
    core: Arc<Core<P>>,
}

impl<P: SchedProcess> Clone for Handle<P> {
    fn clone(&self) -> Self {
        Handle {
            core: self.core.clone(),
        }
    }
}

impl<P: SchedProcess> fmt::Debug for Handle<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("live", &self.core.live.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<P: SchedProcess> Handle<P> {
    /// A fresh PID on this scheduler's node.
    pub fn allocate_pid(&self) -> Pid {
        self.core.pids.allocate()
    }

    /// The number of worker threads.
    pub fn workers(&self) -> usize {
        self.core.pool().workers()
    }

    /// Submits a process: calls `init(ctx, method, input)` on this thread,
    /// registers `pid`, and queues the process on the global queue.
    ///
    /// # Errors
    ///
    /// [`SubmitError::Stopping`] once shutdown began,
    /// [`SubmitError::LimitReached`] at the process limit,
    /// [`SubmitError::Init`] if `init` fails (the process is closed, nothing
    /// is registered), [`SubmitError::DuplicatePid`] if a live process has
    /// `pid`.
    pub fn submit(
        &self,
        pid: Pid,
        mut process: P,
        method: &str,
        input: P::Input,
    ) -> Result<JoinHandle<P>, SubmitError<P>> {
        let core = &self.core;
        // Reserve first, then check: concurrent submits cannot overshoot.
        if core.live.fetch_add(1, Ordering::AcqRel) >= core.max_processes {
            core.release_live();
            return Err(SubmitError::LimitReached(process));
        }
        if core.stopping.load(Ordering::SeqCst) {
            core.release_live();
            return Err(SubmitError::Stopping(process));
        }
        let cancel = CancelToken::new();
        let ctx = Context::with_cancel_token(pid.number(), cancel.clone());
        let init = catch_unwind(AssertUnwindSafe(|| process.init(&ctx, method, input)));
        let init = match init {
            Ok(r) => r,
            Err(panic) => Err(Error::Panicked(panic_message(&*panic))),
        };
        if let Err(e) = init {
            let _ = catch_unwind(AssertUnwindSafe(|| process.close()));
            core.release_live();
            return Err(SubmitError::Init(e));
        }
        let events = mpsc::Receiver::new();
        let slot = Arc::new(Slot {
            pid,
            core: core.clone(),
            state: StateCell::new(),
            sender: events.sender(),
            body: UnsafeCell::new(Body {
                process: Some(process),
                events,
                batch: Vec::new(),
                out: StepOutput::default(),
            }),
            last_worker: AtomicUsize::new(NO_WORKER),
            cancel,
            cancel_sent: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            result: ResultCell::new(),
        });
        if let Err(e) = core.routes.register(pid, slot.clone()) {
            drop(e);
            // SAFETY: the slot was never published: the body is ours.
            let body = unsafe { &mut *slot.body.get() };
            let mut process = body.process.take().expect("just initialized");
            let _ = catch_unwind(AssertUnwindSafe(|| process.close()));
            core.release_live();
            return Err(SubmitError::DuplicatePid(pid, process));
        }
        core.submitted.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(pid = %pid, method, "process submitted");
        if let Some(hook) = &core.on_start {
            hook(pid);
        }
        let handle = JoinHandle::new(slot.clone());
        // Dekker with shutdown: it stores `stopping` then sweeps the
        // routes; we registered the route then load `stopping`. With a
        // SeqCst fence on each side, at least one of us sees the other, so
        // the process gets its cancel event (sent at most once).
        fence(Ordering::SeqCst);
        let stopping = core.stopping.load(Ordering::SeqCst);
        if core.pool().submit(Task::new(slot.clone())).is_err() {
            // The workers are gone: end the process here.
            slot.force(Error::Cancelled);
        } else if stopping {
            slot.send_cancel();
        }
        Ok(handle)
    }

    /// Sends `message` to process `pid`: pushes a message event and wakes
    /// the process if it is Idle or Blocked.
    ///
    /// Messages from one sender arrive in the order sent, each once.
    /// Messages still queued when a process completes are dropped.
    ///
    /// # Errors
    ///
    /// [`SendError::UnknownPid`] if no live process has `pid`,
    /// [`SendError::Finished`] if it has finished; both hand the message
    /// back.
    pub fn send(&self, pid: Pid, message: P::Payload) -> Result<(), SendError<P::Payload>> {
        let Some(slot) = self.core.routes.get(pid) else {
            return Err(SendError::UnknownPid(pid, message));
        };
        match slot.sender.push(Event::message(message)) {
            Ok(()) => {
                slot.wake();
                Ok(())
            }
            Err(e) => Err(SendError::Finished(
                pid,
                e.into_inner().into_data().expect("a message"),
            )),
        }
    }

    /// Terminates process `pid`: it ends with [`Error::Terminated`] and is
    /// closed — at once if no worker is stepping it (even if it is blocked
    /// on a yield that never completes), else when its current step
    /// returns.
    ///
    /// # Errors
    ///
    /// [`TerminateError::UnknownPid`] if no live process has `pid`,
    /// [`TerminateError::AlreadyComplete`] if it completed first.
    pub fn terminate(&self, pid: Pid) -> Result<(), TerminateError> {
        let slot = self
            .core
            .routes
            .get(pid)
            .ok_or(TerminateError::UnknownPid(pid))?;
        if slot.force(Error::Terminated) {
            Ok(())
        } else {
            Err(TerminateError::AlreadyComplete(pid))
        }
    }

    /// Whether a live process has `pid`.
    pub fn contains(&self, pid: Pid) -> bool {
        self.core.routes.contains(pid)
    }

    /// A snapshot of the scheduler's counters.
    pub fn stats(&self) -> Stats {
        let core = &self.core;
        let mut by_phase = [0usize; 5];
        for (_, slot) in core.routes.snapshot() {
            let i = match slot.state.load().phase() {
                Phase::Ready => 0,
                Phase::Running => 1,
                Phase::Blocked => 2,
                Phase::Idle => 3,
                Phase::Complete => 4,
            };
            by_phase[i] += 1;
        }
        Stats {
            workers: core.pool().stats(),
            ready: by_phase[0],
            running: by_phase[1],
            blocked: by_phase[2],
            idle: by_phase[3],
            live: core.live.load(Ordering::Relaxed),
            submitted: core.submitted.load(Ordering::Relaxed),
            completed: core.completed.load(Ordering::Relaxed),
            failed: core.failed.load(Ordering::Relaxed),
            steps: core.steps.load(Ordering::Relaxed),
        }
    }
}

impl<P: SchedProcess> Receiver<P::Payload> for Handle<P> {
    /// Routes a package to the process `package.to` (the topic and sender
    /// are not used by the scheduler).
    fn send(
        &self,
        package: Package<P::Payload>,
    ) -> Result<(), stepsched_relay::SendError<P::Payload>> {
        let to = package.to;
        let Some(slot) = self.core.routes.get(to) else {
            return Err(stepsched_relay::SendError::UnknownPid(package));
        };
        let Package {
            from,
            to,
            topic,
            payload,
        } = package;
        match slot.sender.push(Event::message(payload)) {
            Ok(()) => {
                slot.wake();
                Ok(())
            }
            Err(e) => {
                let payload = e.into_inner().into_data().expect("a message");
                Err(stepsched_relay::SendError::Closed(Package {
                    from,
                    to,
                    topic,
                    payload,
                }))
            }
        }
    }
}

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
    /// Live processes (including submits in progress).
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

/// What a [`shutdown`](Scheduler::shutdown) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Processes that got a cancel event.
    pub cancelled: usize,
    /// Processes still live at the deadline, force-closed with
    /// [`Error::Cancelled`].
    pub forced: usize,
    /// Whether every worker thread exited before the deadline (false if a
    /// step never returned: that worker is left behind, detached).
    pub workers_joined: bool,
}

/// The scheduler: owns the worker threads. Dereferences to [`Handle`] for
/// `submit`, `send`, `terminate` and `stats`; [`handle`](Scheduler::handle)
/// gives a cloneable one.
///
/// Dropping the scheduler shuts it down with a deadline of one second.
pub struct Scheduler<P: SchedProcess> {
    handle: Handle<P>,
    shut_down: AtomicBool,
}

impl<P: SchedProcess> std::ops::Deref for Scheduler<P> {
    type Target = Handle<P>;

    fn deref(&self) -> &Handle<P> {
        &self.handle
    }
}

impl<P: SchedProcess> Scheduler<P> {
    /// A builder.
    pub fn builder() -> Builder<P> {
        Builder::new()
    }

    /// A cloneable handle.
    pub fn handle(&self) -> Handle<P> {
        self.handle.clone()
    }

    /// Shuts down: refuses new submits, sends a cancel event to every live
    /// process, waits until all complete or `deadline` passes, then
    /// force-closes the rest (result [`Error::Cancelled`]) and stops the
    /// workers. Never waits much past the deadline, even for a process
    /// that ignores cancel or a step that never returns. Idempotent.
    pub fn shutdown(&self, deadline: Duration) -> ShutdownReport {
        let mut report = ShutdownReport::default();
        if self.shut_down.swap(true, Ordering::AcqRel) {
            report.workers_joined = true;
            return report;
        }
        let until = Instant::now() + deadline;
        let core = &self.handle.core;
        core.stopping.store(true, Ordering::SeqCst);
        // Pairs with the fence in `submit` (see there).
        fence(Ordering::SeqCst);
        for (_, slot) in core.routes.snapshot() {
            slot.send_cancel();
            report.cancelled += 1;
        }
        {
            let mut guard = core.drained.lock().unwrap_or_else(|p| p.into_inner());
            while core.live.load(Ordering::Acquire) != 0 {
                let now = Instant::now();
                if now >= until {
                    break;
                }
                guard = core
                    .drained_cv
                    .wait_timeout(guard, until - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        for (_, slot) in core.routes.snapshot() {
            if slot.force(Error::Cancelled) {
                report.forced += 1;
            }
        }
        report.workers_joined = stop_pool(core, until);
        tracing::debug!(?report, "scheduler shut down");
        report
    }
}

/// Stops the pool, waiting for the workers until `until` (at least a short
/// grace period). Returns whether they all exited.
fn stop_pool<P: SchedProcess>(core: &Arc<Core<P>>, until: Instant) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    let core2 = core.clone();
    let spawned = std::thread::Builder::new()
        .name("stepsched-shutdown".into())
        .spawn(move || {
            core2.pool().shutdown_now();
            let _ = tx.send(());
        });
    if spawned.is_err() {
        core.pool().shutdown_now();
        return true;
    }
    let wait = until
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(100));
    rx.recv_timeout(wait).is_ok()
}

impl<P: SchedProcess> Drop for Scheduler<P> {
    fn drop(&mut self) {
        self.shutdown(Duration::from_secs(1));
    }
}

impl<P: SchedProcess> fmt::Debug for Scheduler<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("handle", &self.handle)
            .finish()
    }
}

impl<P: SchedProcess> fmt::Debug for Slot<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slot")
            .field("pid", &self.pid)
            .field("state", &self.state.load())
            .finish_non_exhaustive()
    }
}
