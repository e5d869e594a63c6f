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
//! # Ending: close, then publish
//!
//! A process ends in one of two ways: its step finishes it (`Done`, an
//! error, a panic), or a *forcer* — [`Handle::terminate`], or shutdown at
//! its deadline — moves it to Complete. A forcer first claims the slot's
//! `forced` word (one forcer per process, so the error that is published
//! is the winner's), then calls `force_complete`. Exactly one of the
//! worker's `complete` and the forcer's `force_complete` wins the state
//! cell, and that decides the result: the step's if the worker won, the
//! forcer's error if the forcer won (even if the step was about to return
//! `Done`, so that a successful `terminate` always reads `Terminated`).
//!
//! `close` is called exactly once, by whoever owns the body at the end:
//! the forcer if no worker was running the process, otherwise the worker
//! when its step returns. The result is *published* after `close`, by the
//! same party, once (the slot's `finished` flag): the route is removed
//! (compare-before-delete, so a newer process with the same PID keeps its
//! route), the completion hook runs, the process's place under the limit
//! is released, and the result is stored for the [`JoinHandle`]. So when
//! `join` returns, `close` has run, the hook has run and the PID can be
//! reused. The one exception is a forced process whose step never returns
//! at shutdown: shutdown publishes `Cancelled` for it without waiting (the
//! worker still closes it if the step ever returns). A process whose step
//! ended it (`Done`, an error) always gets that result, even from a `close`
//! that outlives the shutdown deadline: only a forcer that *won* the state
//! cell (the slot's `FORCE_WON` mark) makes the result an error.
//!
//! `close`, the process's `Drop` and the `Drop` of its queued events run
//! inside `catch_unwind` (`Slot::close_body`): a panic there is logged and
//! the result is still published, the route removed, the place released.
//!
//! # Steps
//!
//! A step begins only after a last look at the state cell: once
//! `terminate` has returned `Ok` no new step starts, and the yields of a
//! step that was running are not dispatched. Yields are dispatched whatever
//! status the step set, except `Done`; a step that sets no status ends its
//! process with an error. A process waiting (`Idle`, `Yield`) is stepped
//! only with events: a run whose drain finds none — its wakeup flag was
//! set for an event an earlier step already took — parks it again.
//!
//! # Fairness
//!
//! A process that returns `Continue` goes to the back of the global queue.
//! A process woken while it ran (its own inline completions, a message to
//! itself) is requeued on the worker's local deque, where LIFO order runs
//! it next — at most [`LOCAL_REQUEUES`] times in a row; then it too goes
//! to the global queue, so the rest of the deque gets its turn.

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
    CancelToken, Context, Error, Event, Finish, ForceComplete, Park, Phase, Process, Start,
    StateCell, Status, StepOutput, Wake,
};
use stepsched_relay::{Package, Pid, PidAllocator, Receiver, RoutingTable};

use crate::SchedProcess;
use crate::error::{SendError, SubmitError, TerminateError};
use crate::handler::{Command, Completer, Handler};
use crate::join::{JoinHandle, ResultCell};
use crate::primitive::cell::UnsafeCell;
use crate::primitive::sync::atomic::{
    AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence,
};
use crate::primitive::sync::{Arc, Condvar, Mutex};
use crossbeam_utils::CachePadded;

/// `last_worker` before the first step.
const NO_WORKER: usize = usize::MAX;

/// How many times in a row a process woken while running is requeued on
/// its worker's local deque before it goes to the global queue.
const LOCAL_REQUEUES: u32 = 8;

/// How many times in a row a process whose handlers completed at once is
/// stepped again without going back to a run queue.
const INLINE_STEPS: u32 = 16;

/// The slot's `forced` word: not forced, or the error its forcer chose,
/// plus [`FORCE_WON`] once that forcer won the state cell.
const NOT_FORCED: u8 = 0;
const FORCED_TERMINATED: u8 = 1;
const FORCED_CANCELLED: u8 = 2;
/// The kind bits of the `forced` word.
const FORCE_KIND: u8 = 0b011;
/// Set in the `forced` word by a forcer whose `force_complete` won: the
/// process's result is the forcer's error, whoever publishes it.
const FORCE_WON: u8 = 0b100;

/// A process's lifecycle hook.
type StartHook = Arc<dyn Fn(Pid) + Send + Sync>;
/// A process's completion hook.
type CompleteHook<O> = Arc<dyn Fn(Pid, Result<&O, &Error>) + Send + Sync>;

/// Everything the scheduler's handles and workers share.
pub(crate) struct Core<P: Process + 'static> {
    pool: OnceLock<Pool<Task<P>>>,
    routes: RoutingTable<Arc<Slot<P>>>,
    handlers: Handlers<P>,
    pids: PidAllocator,
    max_processes: usize,
    /// Places taken under `max_processes`: processes registered and not
    /// yet published, and submits in progress (a reservation counts).
    live: AtomicUsize,
    /// Processes whose result is not yet stored, and submits in progress.
    /// Like `live`, but released after the result is stored, so that
    /// shutdown, which waits for it to reach zero, returns only once every
    /// finished process's `JoinHandle` has its result.
    unpublished: AtomicUsize,
    stopping: AtomicBool,
    /// Set by shutdown before its forcing sweep; a submit that registers
    /// after the sweep sees it and forces its own process.
    forcing: AtomicBool,
    /// Shutdown waits here for `unpublished` to reach zero.
    drained: Mutex<()>,
    drained_cv: Condvar,
    on_start: Option<StartHook>,
    on_complete: Option<CompleteHook<P::Output>>,
    submitted: AtomicU64,
    /// Steps, completions and failures, one cache line per worker (plus
    /// one for other threads), so workers never contend on a counter.
    counters: Box<[CachePadded<Counters>]>,
    /// Whether `live` is maintained (a process limit is set).
    limited: bool,
}

/// The handler registry, fixed at build. A few handlers are found by a
/// linear scan of their names (cheaper than hashing the command's name);
/// many, through a hash map.
struct Handlers<P: Process + 'static> {
    few: Vec<(Box<str>, Arc<dyn Handler<P>>)>,
    many: HashMap<String, Arc<dyn Handler<P>>>,
}

/// Up to this many handlers, lookup is a linear scan.
const LINEAR_HANDLERS: usize = 8;

impl<P: Process + 'static> Handlers<P> {
    fn new(all: HashMap<String, Arc<dyn Handler<P>>>) -> Self {
        if all.len() <= LINEAR_HANDLERS {
            let few = all
                .into_iter()
                .map(|(k, v)| (k.into_boxed_str(), v))
                .collect();
            Handlers {
                few,
                many: HashMap::new(),
            }
        } else {
            Handlers {
                few: Vec::new(),
                many: all,
            }
        }
    }

    #[inline]
    fn get(&self, name: &str) -> Option<&Arc<dyn Handler<P>>> {
        if self.many.is_empty() {
            self.few.iter().find(|(n, _)| **n == *name).map(|(_, h)| h)
        } else {
            self.many.get(name)
        }
    }
}

/// Statistics counters of one worker. Each worker's line has one writer,
/// which adds with a load and a store (no locked instruction); the last
/// line is shared by non-worker threads and uses `fetch_add`.
#[derive(Default)]
struct Counters {
    steps: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
}

/// Adds one to a counter. `owned`: this thread is the line's only writer.
#[inline]
fn bump(counter: &AtomicU64, owned: bool) {
    // Relaxed: statistics; readers only need some recent value.
    if owned {
        counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    } else {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// A slot in a run queue, with the number of times in a row it was
/// requeued locally after a wake while running (see [`LOCAL_REQUEUES`]).
pub(crate) struct Task<P: Process + 'static>(Arc<Slot<P>>, u32);

// SAFETY: a `Task` is only made by `Task::new`, which requires
// `P: SchedProcess`; then `Slot<P>` is `Send + Sync` (see below), so the
// `Arc` may move between threads. The impl is unconditional only so that
// the pool's `Send` bound does not send the compiler around the cycle
// process → handle → pool → slot → process.
unsafe impl<P: Process + 'static> Send for Task<P> {}

impl<P: SchedProcess> Task<P> {
    fn new(slot: Arc<Slot<P>>) -> Self {
        Task(slot, 0)
    }

    fn requeued(slot: Arc<Slot<P>>, streak: u32) -> Self {
        Task(slot, streak)
    }
}

/// One process: its state, its event queue, its body.
pub(crate) struct Slot<P: Process + 'static> {
    pub(crate) pid: Pid,
    core: Arc<Core<P>>,
    state: StateCell,
    /// The event queue, created by the first event (an idle process that
    /// was never sent anything costs no queue).
    queue: crate::primitive::once::OnceLock<EventQueue<P::Payload>>,
    /// The process and what only its owner touches; see the module docs
    /// for who the owner is.
    body: UnsafeCell<Body<P>>,
    /// The worker that last stepped the process (completions go back there).
    last_worker: AtomicUsize,
    cancel: CancelToken,
    cancel_sent: AtomicBool,
    /// `NOT_FORCED`, or the error the one forcer allowed to try chose
    /// (with `FORCE_WON` once it won the state cell).
    forced: AtomicU8,
    finished: AtomicBool,
    pub(crate) result: ResultCell<P::Output>,
    /// Completions made by handlers on the dispatching thread while the
    /// process is being dispatched. Only the worker that owns the process
    /// (see the module docs) touches it: a completer pushes here only when
    /// the thread-local dispatch marker names this slot, which is set on
    /// that worker's thread for the duration of its `dispatch`.
    pub(crate) inline: UnsafeCell<Vec<Event<P::Payload>>>,
}

/// A process's event queue: producers push through `sender`; only the
/// owner of the process (see the module docs) drains `receiver`.
struct EventQueue<T> {
    sender: mpsc::Sender<Event<T>>,
    receiver: UnsafeCell<mpsc::Receiver<Event<T>>>,
}

impl<T> EventQueue<T> {
    fn new() -> Self {
        let receiver = mpsc::Receiver::new();
        EventQueue {
            sender: receiver.sender(),
            receiver: UnsafeCell::new(receiver),
        }
    }
}

struct Body<P: Process + 'static> {
    /// `None` once closed.
    process: Option<P>,
    batch: Vec<Event<P::Payload>>,
    out: StepOutput<P::Command, P::Output>,
    /// How the last step left the process waiting, if it did (`Idle` or
    /// `Yield`): a run of a waiting process that finds no event parks it
    /// again instead of stepping it with an empty batch.
    waiting: Option<Waiting>,
}

/// How a process waits between steps.
#[derive(Clone, Copy)]
enum Waiting {
    /// `Status::Idle`: for a message (or any event).
    Idle,
    /// `Status::Yield`: for completions (or any event).
    Blocked,
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

impl<P: Process + 'static> Slot<P> {
    /// The producers' side of the event queue, created on first use.
    pub(crate) fn sender(&self) -> &mpsc::Sender<Event<P::Payload>> {
        &self.queue.get_or_init(EventQueue::new).sender
    }

    /// Whether the process is Complete.
    pub(crate) fn state_is_complete(&self) -> bool {
        self.state.load().is_complete()
    }
}

impl<P: SchedProcess> Slot<P> {
    /// Wakes the process after an event was pushed: the winner queues it.
    /// Returns `false` if the process is complete: the event will never be
    /// stepped.
    pub(crate) fn wake(self: &Arc<Self>) -> bool {
        match self.state.wake() {
            Wake::Queue => {
                self.core.schedule(self.clone());
                true
            }
            Wake::Notified | Wake::AlreadyReady => true,
            Wake::Complete => false,
        }
    }

    /// Sends the shutdown cancel event, once.
    fn send_cancel(self: &Arc<Self>) {
        // Relaxed: only the RMW's atomicity matters (one sender); the
        // event itself is ordered by the queue and the state cell.
        if self.cancel_sent.swap(true, Ordering::Relaxed) {
            return;
        }
        self.cancel.cancel();
        if self.sender().push(Event::cancel()).is_ok() {
            self.wake();
        }
    }

    /// Closes the process: `close`, then the event queue (later pushes are
    /// refused; queued events are dropped).
    ///
    /// Never unwinds: a panic in `close`, in the process's `Drop`, or in the
    /// `Drop` of an event payload or a command is caught here, so the
    /// caller always goes on to publish the result.
    ///
    /// # Safety
    ///
    /// The caller owns the body (module docs).
    unsafe fn close_body(&self) {
        // SAFETY: the caller owns the body.
        let body = unsafe { &mut *self.body.get() };
        let caught = |what: &str, f: &mut dyn FnMut()| {
            if catch_unwind(AssertUnwindSafe(f)).is_err() {
                tracing::debug!(pid = %self.pid, "{what} panicked");
            }
        };
        if let Some(mut process) = body.process.take() {
            caught("close", &mut || process.close());
            let mut process = Some(process);
            caught("the process's drop", &mut || drop(process.take()));
        }
        // `Vec::clear` empties the vector before dropping the elements, so
        // after a panicking payload the vector is still sound (and empty).
        caught("an event's drop", &mut || body.batch.clear());
        caught("a command's drop", &mut || body.out.reset());
        // SAFETY: the inline batch belongs to the owner of the body.
        let inline = unsafe { &mut *self.inline.get() };
        caught("an event's drop", &mut || inline.clear());
        if let Some(queue) = self.queue.get() {
            // SAFETY: the caller owns the process, hence the receiver.
            let receiver = unsafe { &mut *queue.receiver.get() };
            receiver.close();
            receiver.drain_into(&mut body.batch);
            caught("an event's drop", &mut || body.batch.clear());
        }
    }

    /// Publishes the result, once; later calls do nothing.
    ///
    /// `worker`: the index of the worker calling, if a worker is calling.
    fn finish(self: &Arc<Self>, result: Result<P::Output, Error>, worker: Option<usize>) {
        // AcqRel: the winner's writes (the closed body) are published to
        // any later caller that loses; only one caller proceeds.
        if self.finished.swap(true, Ordering::AcqRel) {
            return;
        }
        let core = &self.core;
        core.routes.unregister_if_same(self.pid, self);
        let (line, owned) = core.counter_line(worker);
        if result.is_ok() {
            bump(&line.completed, owned);
        } else {
            bump(&line.failed, owned);
        }
        tracing::debug!(pid = %self.pid, ok = result.is_ok(), "process complete");
        if let Some(hook) = &core.on_complete {
            let r = result.as_ref();
            if catch_unwind(AssertUnwindSafe(|| hook(self.pid, r))).is_err() {
                tracing::debug!(pid = %self.pid, "completion hook panicked");
            }
        }
        // The place under the limit is free before `join` returns, so a
        // caller that joined may submit again at once.
        if core.limited {
            core.live.fetch_sub(1, Ordering::SeqCst);
        }
        self.result.set(result);
        core.release_unpublished();
    }

    /// The error a forcer chose, for the party that publishes a forced
    /// process's result.
    fn forced_error(&self) -> Error {
        // Acquire: pairs with the forcer's claim, which precedes its
        // Release transition to Complete that the caller has seen.
        match self.forced.load(Ordering::Acquire) & FORCE_KIND {
            FORCED_CANCELLED => Error::Cancelled,
            _ => Error::Terminated,
        }
    }

    /// Whether a forcer won the state cell: the result is its error,
    /// whoever publishes it. (A forcer that claimed the slot but found it
    /// already Complete did not: the step's own result stands.)
    fn force_won(&self) -> bool {
        // Acquire: pairs with the winner's Release `fetch_or`.
        self.forced.load(Ordering::Acquire) & FORCE_WON != 0
    }

    /// Forces the process to Complete (terminate: `Terminated`; shutdown:
    /// `Cancelled`). Returns `false` if it had already completed, or
    /// another forcer got there first.
    ///
    /// If no worker was running it, it is closed and its result published
    /// here; otherwise the worker does both when its step returns.
    fn force(self: &Arc<Self>, kind: u8) -> bool {
        // One forcer per process: the winner's error is the one published.
        // AcqRel: the claim is ordered before our transition below (and
        // read with Acquire by whoever publishes), and a loser sees it.
        if self
            .forced
            .compare_exchange(NOT_FORCED, kind, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        match self.state.force_complete() {
            won @ ForceComplete::Won { .. } => {
                // Release: a publisher that reads the mark also reads the
                // claimed kind (same word, earlier in its modification order).
                self.forced.fetch_or(FORCE_WON, Ordering::Release);
                // The process learns it at once: a step polling its token
                // stops, and an idle process's token reads cancelled.
                self.cancel.cancel();
                if won.must_close() {
                    // SAFETY: the previous state was not Running and no
                    // worker can start a Complete process: the body is ours.
                    unsafe { self.close_body() };
                    self.finish(Err(self.forced_error()), None);
                }
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

    /// Puts a Ready slot in a run queue. Woken from a worker of this pool
    /// (a process messaging another, a handler completing on a worker), it
    /// goes to that worker's local deque, where it runs next and cache-warm
    /// without waking another thread; woken from any other thread, back to
    /// the worker that last ran it (affinity), else the global queue.
    fn schedule(&self, slot: Arc<Slot<P>>) {
        let pool = self.pool();
        // Relaxed: a hint; any worker may run the slot.
        let worker = slot.last_worker.load(Ordering::Relaxed);
        let task = Task::new(slot);
        let refused = if worker == NO_WORKER || pool.current_worker().is_some() {
            pool.submit(task).err()
        } else {
            pool.submit_to(worker, task).err()
        };
        // A refusal means the pool is shutting down; shutdown force-closes
        // every live process, so the slot is not stranded.
        drop(refused);
    }

    /// Gives back the reservation of a submit that failed.
    fn release_reservation(&self) {
        if self.limited {
            self.live.fetch_sub(1, Ordering::SeqCst);
        }
        self.release_unpublished();
    }

    /// The counter line of `worker` (owned by it), or the shared line.
    #[inline]
    fn counter_line(&self, worker: Option<usize>) -> (&Counters, bool) {
        match worker {
            Some(w) if w + 1 < self.counters.len() => (&self.counters[w], true),
            _ => (&self.counters[self.counters.len() - 1], false),
        }
    }

    fn release_unpublished(&self) {
        // Dekker with shutdown, which stores `stopping`, fences, then loads
        // `unpublished`: we decrement, fence, then load `stopping`. With a
        // SeqCst fence on each side, either we see `stopping` and notify, or
        // shutdown's load sees our decrement. (The fence is needed, not just
        // SeqCst accesses: loom models those as acquire/release, and found
        // the lost notification without it.)
        if self.unpublished.fetch_sub(1, Ordering::SeqCst) == 1 {
            fence(Ordering::SeqCst);
            if self.stopping.load(Ordering::SeqCst) {
                let _guard = self.drained.lock().unwrap_or_else(|p| p.into_inner());
                self.drained_cv.notify_all();
            }
        }
    }

    /// Steps one process: the worker loop body.
    ///
    /// While the process yields and its handlers complete at once (on this
    /// thread, during dispatch), it is stepped again right here, up to
    /// [`INLINE_STEPS`] times, without leaving Running: the completions go
    /// straight into its next batch, with no queue push, no wake and no
    /// trip through a run queue.
    fn run(&self, Task(slot, streak): Task<P>, ctx: &WorkerContext<Task<P>>) {
        match slot.state.try_start() {
            Start::Started => {}
            // Force-completed while queued: the forcer closed it.
            Start::Terminated => return,
            Start::Invalid(state) => {
                debug_assert!(false, "a queued process was {state:?}");
                return;
            }
        }
        let worker = ctx.index();
        // Relaxed: only a hint for where to send the next completion.
        slot.last_worker.store(worker, Ordering::Relaxed);
        let (line, owned) = self.counter_line(Some(worker));
        let mut inline_budget = INLINE_STEPS;
        let park = loop {
            // SAFETY: our `try_start` won: we own the body until our next
            // transition of `slot.state`, and we drop this borrow before it.
            let body = unsafe { &mut *slot.body.get() };
            if let Some(queue) = slot.queue.get() {
                // SAFETY: we own the process (see above), hence the receiver.
                unsafe { (*queue.receiver.get()).drain_into(&mut body.batch) };
            }
            // A waiting process is stepped only with events: woken for an
            // event that an earlier step already took (the wakeup flag was
            // set while that step ran), it waits again, unstepped.
            if body.batch.is_empty() {
                match body.waiting {
                    Some(Waiting::Idle) => break (slot.state.park_idle(), false),
                    Some(Waiting::Blocked) => break (slot.state.finish_dispatch(), false),
                    None => {}
                }
            }
            body.waiting = None;
            body.out.reset();
            let Some(process) = body.process.as_mut() else {
                debug_assert!(false, "a started process is not closed");
                return;
            };
            let _span =
                tracing::trace_span!("step", pid = %slot.pid, events = body.batch.len()).entered();
            // The last look before a step begins: once `terminate` returned
            // `Ok` (the cell is Complete), no new step starts. A forcer that
            // saw Running left `close` and the result to us.
            if slot.state.load().is_complete() {
                break (Park::Terminated, false);
            }
            bump(&line.steps, owned);
            let stepped = catch_unwind(AssertUnwindSafe(|| {
                process.step(body.batch.drain(..), &mut body.out)
            }));
            let status = match stepped {
                Ok(Ok(())) => body.out.take_status(),
                Ok(Err(e)) => return self.end(&slot, Err(e), worker),
                Err(panic) => {
                    return self.end(&slot, Err(Error::Panicked(panic_message(&*panic))), worker);
                }
            };
            let status = match status {
                // A finished process's yields are not dispatched.
                Some(Status::Done(output)) => return self.end(&slot, Ok(output), worker),
                Some(status) => status,
                None => {
                    tracing::debug!(pid = %slot.pid, "step set no status");
                    let e = Error::Failed(format!("process {}: step set no status", slot.pid));
                    return self.end(&slot, Err(e), worker);
                }
            };
            // Terminated while the step ran: its yields are not dispatched.
            if slot.state.load().is_complete() {
                break (Park::Terminated, false);
            }
            // Yields are dispatched whatever the status (see `Status`).
            if !body.out.yields().is_empty() {
                self.dispatch(&slot, &mut body.out);
            }
            // SAFETY: completions made inline during the dispatch are ours
            // (we own the process, see `Slot::inline`).
            let inline = unsafe { &mut *slot.inline.get() };
            let waiting = match status {
                // A process that asked to continue goes to the back of the
                // global queue, so it cannot starve the others here; its
                // inline completions wait in the batch for its next step.
                Status::Continue => {
                    body.batch.append(inline);
                    break (slot.state.reschedule(), true);
                }
                Status::Idle => Waiting::Idle,
                Status::Yield => Waiting::Blocked,
                Status::Done(_) => unreachable!("handled above"),
            };
            if inline.is_empty() {
                body.waiting = Some(waiting);
                break match waiting {
                    Waiting::Idle => (slot.state.park_idle(), false),
                    Waiting::Blocked => (slot.state.finish_dispatch(), false),
                };
            }
            body.batch.append(inline);
            if inline_budget > 0 {
                inline_budget -= 1;
                continue;
            }
            // Out of budget, with events in hand: back to a run queue (the
            // batch keeps them for the next run).
            break (slot.state.reschedule(), false);
        };
        // The body is no longer ours unless `park` says so.
        match park {
            (Park::Parked, _) => {}
            (Park::Requeue, true) => ctx.inject(Task::new(slot)),
            // Woken while running: stay on this worker (cache-warm), but
            // only a few times in a row, or the LIFO deque would run this
            // process forever ahead of the rest of the deque.
            (Park::Requeue, false) if streak < LOCAL_REQUEUES => {
                ctx.push(Task::requeued(slot, streak + 1));
            }
            (Park::Requeue, false) => ctx.inject(Task::new(slot)),
            (Park::Terminated, _) => {
                // Force-completed while we ran it: the forcer left `close`
                // and the result to us.
                // SAFETY: the forcer saw Running, so the body is still ours.
                unsafe { slot.close_body() };
                slot.finish(Err(slot.forced_error()), Some(worker));
            }
            (Park::Invalid(state), _) => {
                debug_assert!(false, "invalid transition from {state:?}");
            }
        }
    }

    /// Ends a process we own (Running) with `result`.
    fn end(&self, slot: &Arc<Slot<P>>, result: Result<P::Output, Error>, worker: usize) {
        // Whatever `complete` answers, the body is still ours: Completed
        // (we won) or Terminated (a forcer saw Running and left `close` and
        // the result to us).
        let finish = slot.state.complete();
        // SAFETY: we owned the body while Running and nobody else takes it
        // from a Complete state.
        unsafe { slot.close_body() };
        match finish {
            Finish::Completed => slot.finish(result, Some(worker)),
            // The forcer won: its error is the result, whatever the step
            // said (the caller of `terminate` was told it succeeded).
            Finish::Terminated => slot.finish(Err(slot.forced_error()), Some(worker)),
            Finish::Invalid(state) => debug_assert!(false, "ending a process in {state:?}"),
        }
    }

    /// Sends each yield to its handler. Completions made during the
    /// dispatch, on this thread, land in `slot.inline`.
    fn dispatch(&self, slot: &Arc<Slot<P>>, out: &mut StepOutput<P::Command, P::Output>) {
        let _dispatching = crate::handler::Dispatching::enter(Arc::as_ptr(slot) as *const ());
        for y in out.yields_mut().drain() {
            // Terminated during the dispatch (by a handler, or another
            // thread): the yields not yet dispatched never will be.
            if slot.state.load().is_complete() {
                break;
            }
            let completer = Completer::new(slot.clone(), y.tag);
            match self.handlers.get(y.command.name()) {
                Some(handler) => {
                    // A panic drops the completer, which completes the tag
                    // with an error.
                    let _ = catch_unwind(AssertUnwindSafe(|| handler.handle(y.command, completer)));
                }
                None => {
                    let message = format!("unknown command `{}`", y.command.name());
                    let _ = completer.complete(Err(Error::Failed(message)));
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
            handlers: Handlers::new(self.handlers),
            pids: PidAllocator::new(self.node),
            max_processes: self.max_processes,
            live: AtomicUsize::new(0),
            unpublished: AtomicUsize::new(0),
            stopping: AtomicBool::new(false),
            forcing: AtomicBool::new(false),
            drained: Mutex::new(()),
            drained_cv: Condvar::new(),
            on_start: self.on_start,
            on_complete: self.on_complete,
            submitted: AtomicU64::new(0),
            counters: (0..=workers)
                .map(|_| CachePadded::new(Counters::default()))
                .collect(),
            limited: self.max_processes != usize::MAX,
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
            shut_down: Mutex::new(None),
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
        // Relaxed: a snapshot for display.
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
        // SeqCst: `unpublished` pairs with shutdown's wait (see
        // `release_unpublished`); the limit only needs the RMW's atomicity.
        core.unpublished.fetch_add(1, Ordering::SeqCst);
        if core.limited && core.live.fetch_add(1, Ordering::SeqCst) >= core.max_processes {
            core.release_reservation();
            return Err(SubmitError::LimitReached(process));
        }
        if core.stopping.load(Ordering::SeqCst) {
            core.release_reservation();
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
            core.release_reservation();
            return Err(SubmitError::Init(e));
        }
        let slot = Arc::new(Slot {
            pid,
            core: core.clone(),
            state: StateCell::new(),
            queue: crate::primitive::once::OnceLock::new(),
            body: UnsafeCell::new(Body {
                process: Some(process),
                batch: Vec::new(),
                out: StepOutput::default(),
                waiting: None,
            }),
            last_worker: AtomicUsize::new(NO_WORKER),
            cancel,
            cancel_sent: AtomicBool::new(false),
            forced: AtomicU8::new(NOT_FORCED),
            finished: AtomicBool::new(false),
            result: ResultCell::new(),
            inline: UnsafeCell::new(Vec::new()),
        });
        if let Err(e) = core.routes.register(pid, slot.clone()) {
            drop(e);
            // SAFETY: the slot was never published: the body is ours.
            let body = unsafe { &mut *slot.body.get() };
            let mut process = body.process.take().expect("just initialized");
            let _ = catch_unwind(AssertUnwindSafe(|| process.close()));
            core.release_reservation();
            return Err(SubmitError::DuplicatePid(pid, process));
        }
        // Relaxed: a statistics counter.
        core.submitted.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(pid = %pid, method, "process submitted");
        if let Some(hook) = &core.on_start
            && catch_unwind(AssertUnwindSafe(|| hook(pid))).is_err()
        {
            tracing::debug!(pid = %pid, "start hook panicked");
        }
        let handle = JoinHandle::new(slot.clone());
        // Dekker with shutdown, twice. Shutdown stores `stopping` then
        // sweeps the routes to send cancel events, and later stores
        // `forcing` then sweeps them to force what is left; we registered
        // the route, then load each flag. With a SeqCst fence on each side,
        // at least one of us sees the other: the process gets its cancel
        // event (sent at most once), and is forced by the sweep or by us.
        fence(Ordering::SeqCst);
        if core.forcing.load(Ordering::SeqCst) {
            // The forcing sweep may have missed us, and the workers may be
            // stopping: end the process here.
            slot.force(FORCED_CANCELLED);
            return Ok(handle);
        }
        let stopping = core.stopping.load(Ordering::SeqCst);
        if core.pool().submit(Task::new(slot.clone())).is_err() {
            // The workers are gone: end the process here.
            slot.force(FORCED_CANCELLED);
        } else if stopping {
            slot.send_cancel();
        }
        Ok(handle)
    }

    /// Sends `message` to process `pid`: pushes a message event and wakes
    /// the process if it is Idle or Blocked.
    ///
    /// Messages from one sender arrive in the order sent, each once.
    /// Messages still queued when a process completes are dropped: `Ok`
    /// means the message was queued for a process that had not finished,
    /// not that a step saw it.
    ///
    /// # Errors
    ///
    /// [`SendError::UnknownPid`] if no live process has `pid`,
    /// [`SendError::Finished`] if it has finished (or was terminated and
    /// its last step is still running); both hand the message back.
    pub fn send(&self, pid: Pid, message: P::Payload) -> Result<(), SendError<P::Payload>> {
        let Some(slot) = self.core.routes.get(pid) else {
            return Err(SendError::UnknownPid(pid, message));
        };
        if slot.state.load().is_complete() {
            return Err(SendError::Finished(pid, message));
        }
        match slot.sender().push(Event::message(message)) {
            Ok(()) => {
                // If the process completed since, the message is dropped
                // with the rest of its queue, as documented.
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
    /// returns (whatever that step returns). Its result is published after
    /// the close, and its PID stays registered until then.
    ///
    /// `Ok` means this call ended the process: its result is
    /// `Err(Terminated)`.
    ///
    /// # Errors
    ///
    /// [`TerminateError::UnknownPid`] if no live process has `pid`,
    /// [`TerminateError::AlreadyComplete`] if it completed first (or
    /// another terminate or shutdown ended it).
    pub fn terminate(&self, pid: Pid) -> Result<(), TerminateError> {
        let slot = self
            .core
            .routes
            .get(pid)
            .ok_or(TerminateError::UnknownPid(pid))?;
        if slot.force(FORCED_TERMINATED) {
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
            // Relaxed: a snapshot of independent counters.
            live: if core.limited {
                core.live.load(Ordering::Relaxed)
            } else {
                // Without a limit `live` is not kept: derive it. The
                // counters are bumped before a result is stored, so a
                // process whose `join` returned is not counted.
                let submitted = core.submitted.load(Ordering::Relaxed);
                let ended: u64 = core
                    .counters
                    .iter()
                    .map(|c| c.completed.load(Ordering::Relaxed) + c.failed.load(Ordering::Relaxed))
                    .sum();
                submitted.saturating_sub(ended) as usize
            },
            submitted: core.submitted.load(Ordering::Relaxed),
            completed: core
                .counters
                .iter()
                .map(|c| c.completed.load(Ordering::Relaxed))
                .sum(),
            failed: core
                .counters
                .iter()
                .map(|c| c.failed.load(Ordering::Relaxed))
                .sum(),
            steps: core
                .counters
                .iter()
                .map(|c| c.steps.load(Ordering::Relaxed))
                .sum(),
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
        // As in `Handle::send`: a process already complete takes nothing.
        if slot.state.load().is_complete() {
            return Err(stepsched_relay::SendError::Closed(package));
        }
        let Package {
            from,
            to,
            topic,
            payload,
        } = package;
        match slot.sender().push(Event::message(payload)) {
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
    /// Live processes: submitted and not yet completed, plus submits in
    /// progress. This is what [`Builder::max_processes`] limits.
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
    /// Processes still live at the deadline, forced to complete with
    /// [`Error::Cancelled`] (closed at once, or by their worker when the
    /// step it is running returns).
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
    /// The first shutdown's report; held while it runs, so that a
    /// concurrent call waits for it.
    shut_down: Mutex<Option<ShutdownReport>>,
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
    /// workers.
    ///
    /// Never waits much past the deadline, even for a process that ignores
    /// cancel or a step that never returns. When it returns, every process
    /// submitted before it (or racing it and accepted) has its result; each
    /// was closed once, except one whose step was still running when the
    /// workers were abandoned (`workers_joined` is false): that one is
    /// closed if and when its step returns.
    ///
    /// Idempotent: a later call, or one racing the first, waits for the
    /// first to finish and reports nothing more.
    pub fn shutdown(&self, deadline: Duration) -> ShutdownReport {
        let mut first = self.shut_down.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(done) = *first {
            return ShutdownReport {
                workers_joined: done.workers_joined,
                ..ShutdownReport::default()
            };
        }
        let report = self.shut_down_once(deadline);
        *first = Some(report);
        report
    }

    fn shut_down_once(&self, deadline: Duration) -> ShutdownReport {
        let mut report = ShutdownReport::default();
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
            // SeqCst: see `release_unpublished`.
            while core.unpublished.load(Ordering::SeqCst) != 0 {
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
        core.forcing.store(true, Ordering::SeqCst);
        // Pairs with the fence in `submit` (see there).
        fence(Ordering::SeqCst);
        for (_, slot) in core.routes.snapshot() {
            if slot.force(FORCED_CANCELLED) {
                report.forced += 1;
            }
        }
        report.workers_joined = stop_pool(core, until);
        // What is still registered now: processes forced while running
        // whose worker has not returned (it is stuck in a step, or slow to
        // stop), and any a racing terminate or submit is still ending.
        // Publish their results; a worker that returns later closes its
        // process and finds the result already published.
        for (_, slot) in core.routes.snapshot() {
            if slot.force(FORCED_CANCELLED) {
                report.forced += 1;
            }
            // Only a forced process's result is known here. One that ended
            // on its own and is still in `close` publishes its own result
            // when `close` returns.
            if slot.force_won() {
                slot.finish(Err(slot.forced_error()), None);
            }
        }
        tracing::debug!(?report, "scheduler shut down");
        report
    }
}

/// Stops the pool, waiting for the workers until `until` (at least a short
/// grace period). Returns whether they all exited.
#[cfg(not(stepsched_loom))]
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

/// Under loom every thread must be a loom thread, and models never leave a
/// step running: stop the pool on this thread.
#[cfg(stepsched_loom)]
fn stop_pool<P: SchedProcess>(core: &Arc<Core<P>>, _until: Instant) -> bool {
    core.pool().shutdown_now();
    true
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
