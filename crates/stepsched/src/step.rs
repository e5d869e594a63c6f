//! What happens in one step: the worker's loop body, command dispatch and
//! the end of a process.
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
//! A step takes at most [`MAX_BATCH`] events from the queue. A run that
//! took a full batch does not park the process (the wakes of the events
//! left behind may all have been spent while it was Ready or Running): it
//! steps it again on the inline budget, or requeues it.
//!
//! # Lingering
//!
//! A process that goes idle with its queue drained after a step that took
//! more than one event from it (a stream, not a lone message), on a worker
//! with nothing else to run, is not parked at once: the worker waits a moment
//! ([`LINGER_SPINS`] spin-loop hints, about a microsecond, watching for
//! other work) and drains again, at most [`LINGERS`] times per run. A
//! stream of messages from another thread then reaches the process in
//! batches, instead of one park, one wake through a run queue and one
//! start per few messages, with the consumer reading each slot right
//! behind the producer writing it (both pay a cache-line transfer per
//! message). The process stays Running meanwhile, so nothing in the state
//! protocol changes: its senders set the wakeup flag as for any running
//! process. A worker with other work waiting parks the process at once.
//!
//! # Fairness
//!
//! A process that returns `Continue` goes to the back of the global queue.
//! A process woken while it ran (its own inline completions, a message to
//! itself) is requeued in the worker's next-item slot, which the worker
//! runs next — at most [`LOCAL_REQUEUES`] times in a row; then it too goes
//! to the global queue, so the rest of the deque gets its turn. (The pool
//! bounds the slot's streaks as well: see `stepsched-pool`'s work finding.)

use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};

use stepsched_pool::WorkerContext;
use stepsched_process::{
    Command, Context, Error, EventKind, Finish, Park, Process, Start, Status, StepOutput, Upgrade,
    UpgradeTo, Yield,
};

use crate::SchedProcess;
use crate::handle::Handle;
use crate::handler::{Completer, Dispatching, Handler, SpareRefs};
use crate::primitive::sync::atomic::Ordering;
use crate::primitive::sync::{Arc, SlotArc};
use crate::slot::{Buffers, Core, Counters, Ev, Slot, Task, Waiting, bump, bump_by, init_caught};
use crate::trace;

/// Spin-loop hints a worker waits before it drains an idle process's
/// queue again rather than park it (see "Lingering" above): on the order of
/// a microsecond on current x86 and AArch64 parts.
const LINGER_SPINS: u32 = 64;

/// How many times one run lingers before it parks an idle process.
#[cfg(not(stepsched_loom))]
const LINGERS: u32 = 8;
/// Under loom, never: the models explore the protocol, not the wait (a
/// linger is a drain like any other, on a process that stays Running).
#[cfg(stepsched_loom)]
const LINGERS: u32 = 0;

/// How many times in a row a process woken while running is requeued on
/// its worker's local deque before it goes to the global queue.
const LOCAL_REQUEUES: u32 = 8;

/// How many times in a row a process whose handlers completed at once (or
/// whose queue held more than one batch) is stepped again without going
/// back to a run queue.
const INLINE_STEPS: u32 = 16;

/// The most events one step takes from the process's queue; the rest wait
/// for its next step. It bounds the batch's memory and the time one step
/// takes, so a process flooded with messages still yields its worker.
#[cfg(not(stepsched_loom))]
const MAX_BATCH: usize = 256;
/// Under loom, one: every model with two queued events then takes the
/// path where a run leaves events behind and must not park.
#[cfg(stepsched_loom)]
const MAX_BATCH: usize = 1;

/// A registered process factory, for upgrades.
pub(crate) type Factory<P> = Box<dyn Fn() -> Result<P, Error> + Send + Sync>;

/// The handler registry (and the upgrade factories), fixed at build. A few
/// handlers are found by a linear scan of their names (cheaper than
/// hashing the command's name); many, through a hash map.
pub(crate) struct Handlers<P: Process + 'static> {
    few: Vec<(Box<str>, Arc<dyn Handler<P>>)>,
    many: HashMap<String, Arc<dyn Handler<P>>>,
    factories: HashMap<String, Factory<P>>,
}

/// Whether two handler names are equal: a byte loop the compiler keeps
/// inline, where `==` on strings calls `memcmp` (a call that costs more than
/// the few bytes of a command's name it compares).
#[inline]
fn same_name(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| x == y)
}

/// Up to this many handlers, lookup is a linear scan.
const LINEAR_HANDLERS: usize = 8;

impl<P: Process + 'static> Handlers<P> {
    pub(crate) fn new(
        all: HashMap<String, Arc<dyn Handler<P>>>,
        factories: HashMap<String, Factory<P>>,
    ) -> Self {
        if all.len() <= LINEAR_HANDLERS {
            let few = all
                .into_iter()
                .map(|(k, v)| (k.into_boxed_str(), v))
                .collect();
            Handlers {
                few,
                many: HashMap::new(),
                factories,
            }
        } else {
            Handlers {
                few: Vec::new(),
                many: all,
                factories,
            }
        }
    }

    #[inline]
    fn get(&self, name: &str) -> Option<&Arc<dyn Handler<P>>> {
        if self.many.is_empty() {
            self.few
                .iter()
                .find(|(n, _)| same_name(n, name))
                .map(|(_, h)| h)
        } else {
            self.many.get(name)
        }
    }
}

impl<P: SchedProcess> Core<P> {
    /// Steps one process: the worker loop body.
    ///
    /// While the process yields and its handlers complete at once (on this
    /// thread, during dispatch), it is stepped again right here, up to
    /// [`INLINE_STEPS`] times, without leaving Running: the completions go
    /// straight into its next batch, with no queue push, no wake and no
    /// trip through a run queue.
    pub(crate) fn run(
        &self,
        handlers: &Handlers<P>,
        reach: &Handle<P>,
        Task(slot, streak): Task<P>,
        ctx: &WorkerContext<Task<P>>,
    ) {
        match slot.state.try_start() {
            Start::Started => {}
            // Force-completed while queued: the forcer closed it.
            Start::Terminated => return,
            Start::Invalid(state) => {
                debug_assert!(false, "a queued process was {state:?}");
                return;
            }
        }
        // Spare references to the slot for the completers of its yields
        // (see `Completer::dispatched`), released when this run ends.
        let mut spare = SpareRefs::new(&slot);
        let worker = ctx.index();
        // Relaxed: only a hint for where a wake from outside the pool
        // queues the process. On the state word's line, which the CAS of
        // `try_start` just brought in (see `Slot::last_worker`). A worker
        // index fits in 32 bits: each worker is a thread.
        slot.last_worker.store(worker as u32, Ordering::Relaxed);
        let (line, owned) = self.counter_line(Some(worker));
        bump(&line.started, owned);
        let mut inline_budget = INLINE_STEPS;
        let mut lingers = LINGERS;
        let mut cx = Context::new(slot.pid(), &slot.cancel, reach);
        // Whether per-step, per-yield, park and requeue events can be
        // enabled at all, read once per run (one load of the dynamic level):
        // with no subscriber (or a quieter one) the run pays branches on
        // locals, not a level check per event.
        let (traced, debugged) = trace::levels!();
        // SAFETY: we are worker `worker`, inside its one call of `run` (the
        // buffer's rule, see `Batches`); the borrow ends with this call.
        let Buffers { batch, out } = unsafe { &mut *self.batches.of(worker) };
        // Empty unless an earlier run on this worker unwound between its
        // drain and its step (a panicking `Drop` of a command or an event,
        // which the pool catches): those events belong to that process and
        // must not reach this one.
        if !batch.is_empty() {
            caught(&slot, "an event's drop", || batch.clear());
        }
        // Likewise for the output: every run empties it before it ends (see
        // `end`) unless it unwound on the way.
        if holds_anything(out) {
            caught(&slot, "a command's drop", || out.reset());
        }
        // First the completions made inline for an earlier run's step that
        // did not take them (`Continue`, an exhausted budget). Completions
        // made inline during this run go straight into the batch (see
        // `deliver`), and back to `inline` if the run lets the process go
        // with them (`carry`).
        // SAFETY: the inline completions are ours while we own the process
        // (see `Slot::inline`); the borrow ends here.
        let inline = unsafe { &mut *slot.inline.get() };
        if !inline.is_empty() {
            batch.append(inline);
        }
        let park = loop {
            // SAFETY: our `try_start` won: we own the body until our next
            // transition of `slot.state`, and we drop this borrow before it.
            let body = unsafe { &mut *slot.body.get() };
            // After the inline completions already in the batch, at most
            // `MAX_BATCH` events from the queue; if it held more, the
            // process must not park below (their wakes may all have been
            // spent), so it is stepped again or requeued.
            // SAFETY: we own the process, hence the receiver.
            let queued = match unsafe { slot.queue.receiver() } {
                Some(mut receiver) => receiver.drain_up_to(batch, MAX_BATCH),
                None => 0,
            };
            let more = queued == MAX_BATCH;
            // A waiting process is stepped only with events: woken for an
            // event that an earlier step already took (the wakeup flag was
            // set while that step ran), it waits again, unstepped.
            if batch.is_empty()
                && let Some(waiting) = body.waiting
            {
                break (wait(&slot, waiting, line, owned, debugged), false);
            }
            body.waiting = None;
            // Empty: the run began with it empty (above), and every step of
            // it left it so (its status taken, its yields dispatched; an
            // upgrade empties it too).
            debug_assert!(!holds_anything(out), "a step's output was left over");
            let Some(process) = body.process.as_mut() else {
                debug_assert!(false, "a started process is not closed");
                return;
            };
            let _span = Entered(ManuallyDrop::new(if traced {
                trace::trace_span!("step", pid = %slot.pid(), events = batch.len())
            } else {
                None
            }));
            if debugged && trace::debug_enabled!() {
                trace_events(&slot, batch);
            }
            // The last look before a step begins: once `terminate` returned
            // `Ok` (the cell is Complete), no new step starts. A forcer that
            // saw Running left `close` and the result to us; the events
            // taken for this step are dropped here, as `close` drops the
            // rest of the queue.
            if slot.state.load().is_complete() {
                caught(&slot, "an event's drop", || batch.clear());
                break (Park::Terminated, false);
            }
            bump(&line.steps, owned);
            // Only the events drained from the queue (the batch's tail) can
            // be messages: inline completions never are.
            // One event, the common case of a process that keeps up with
            // its senders, is looked at without the iterator's setup.
            if queued != 0 {
                let messages = match batch.as_slice() {
                    [.., last] if queued == 1 => usize::from(last.kind() == EventKind::Message),
                    events => events[events.len() - queued..]
                        .iter()
                        .filter(|e| e.kind() == EventKind::Message)
                        .count(),
                };
                if messages != 0 {
                    bump_by(&line.messages, messages as u64, owned);
                }
            }
            // `drain` empties the batch whatever the step does: the events
            // it did not take are dropped when the step returns (or
            // unwinds), so the buffer is empty for the worker's next step.
            let stepped = catch_unwind(AssertUnwindSafe(|| {
                process.step(&mut cx, batch.drain(..), out)
            }));
            if let Some(upgrade) = cx.take_upgrade()
                && matches!(stepped, Ok(Ok(())))
            {
                if let Err(e) = self.upgrade(handlers, reach, &slot, out, upgrade) {
                    return self.end(&slot, out, Err(e), worker);
                }
                // The new process's first step, with whatever arrived
                // meanwhile (possibly nothing), on the same inline budget
                // as the re-steps below.
                if inline_budget > 0 {
                    inline_budget -= 1;
                    continue;
                }
                carry(&slot, batch);
                break (slot.state.reschedule(), false);
            }
            let status = match stepped {
                Ok(Ok(())) => out.take_status(),
                Ok(Err(e)) => return self.end(&slot, out, Err(e), worker),
                Err(panic) => {
                    return self.end(&slot, out, Err(Error::from_panic(&*panic)), worker);
                }
            };
            if traced {
                trace::trace!(
                    pid = %slot.pid(),
                    status = status.as_ref().map_or("none", status_name),
                    yields = out.yields().len(),
                    "step returned"
                );
            }
            let status = match status {
                // A finished process's yields are not dispatched.
                Some(Status::Done(output)) => return self.end(&slot, out, Ok(output), worker),
                Some(status) => status,
                None => {
                    trace::debug!(pid = %slot.pid(), "step set no status");
                    let e = Error::Failed(format!("process {}: step set no status", slot.pid()));
                    return self.end(&slot, out, Err(e), worker);
                }
            };
            // Yields are dispatched whatever the status (see `Status`);
            // `dispatch` looks at the state cell before each one, so none
            // is dispatched once a terminate has landed.
            if !out.yields().is_empty() {
                let lent = std::mem::take(&mut spare.count);
                spare.count = self.dispatch(handlers, &slot, out, batch, lent, debugged);
            }
            let waiting = match status {
                // A process that asked to continue goes to the back of the
                // global queue, so it cannot starve the others here; its
                // inline completions wait in `inline` for its next step.
                Status::Continue => {
                    carry(&slot, batch);
                    break (slot.state.reschedule(), true);
                }
                Status::Idle => Waiting::Idle,
                Status::Yield => Waiting::Blocked,
                Status::Done(_) => unreachable!("handled above"),
            };
            // The dispatch is over: the batch holds its inline completions.
            if batch.is_empty() && !more {
                body.waiting = Some(waiting);
                // An idle process that took more than one event from its
                // queue: wait a moment for more before parking it (see
                // "Lingering"). The next drain steps it if anything came,
                // and parks it (without lingering again) if not.
                if lingers > 0
                    && queued > 1
                    && matches!(waiting, Waiting::Idle)
                    && !ctx.has_work()
                    && slot.queue.get().is_some()
                    && linger(ctx)
                {
                    lingers -= 1;
                    continue;
                }
                break (wait(&slot, waiting, line, owned, debugged), false);
            }
            if inline_budget > 0 {
                inline_budget -= 1;
                continue;
            }
            // Out of budget, with events in hand: back to a run queue
            // (`inline` keeps them for the next run).
            carry(&slot, batch);
            break (slot.state.reschedule(), false);
        };
        // The body is no longer ours unless `park` says so.
        if let (Park::Requeue, global) = park {
            bump(&line.requeued, owned);
            if debugged {
                trace::debug!(
                    pid = %slot.pid(),
                    to = if global || streak >= LOCAL_REQUEUES { "global" } else { "local" },
                    "process requeued"
                );
            }
        }
        match park {
            (Park::Parked, _) => {
                // The task's reference now belongs to the parked process:
                // the waker that wins its `Queue` takes it over for the
                // task it queues, and a forcer that completes it parked
                // releases it (see `Slot::wake`, `Slot::force`). The spares
                // go first: they keep the slot alive while released (our
                // reference may be gone already, its process woken, run and
                // completed elsewhere), and nothing here touches the slot
                // after them.
                drop(spare);
                let _parked = SlotArc::into_raw(slot);
            }
            (Park::Requeue, true) => ctx.inject(Task::new(slot)),
            // Woken while running: stay on this worker (cache-warm; this
            // run ends here, so `push_next` keeps it to run next and wakes
            // nobody for it), but only a few times in a row, or it would
            // run forever ahead of the rest of the worker's queue.
            (Park::Requeue, false) if streak < LOCAL_REQUEUES => {
                ctx.push_next(Task::requeued(slot, streak + 1));
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

    /// Replaces the process we own (Running) as `upgrade` asks: closes
    /// the old one, gets the new one, runs its `init`. Events queued
    /// meanwhile stay in the queue (and in `inline`) for the new one's first
    /// step. On an error the body holds no process.
    fn upgrade(
        &self,
        handlers: &Handlers<P>,
        reach: &Handle<P>,
        slot: &SlotArc<Slot<P>>,
        out: &mut StepOutput<P::Command, P::Output>,
        Upgrade {
            to, method, input, ..
        }: Upgrade<P>,
    ) -> Result<(), Error> {
        // SAFETY: we own the body (Running); no other borrow of it is live.
        let body = unsafe { &mut *slot.body.get() };
        // The old step's status and yields are not used.
        caught(slot, "a command's drop", || out.reset());
        if let Some(old) = body.process.take() {
            slot.close_process(old);
        }
        let mut new = match to {
            UpgradeTo::Process(new) => new,
            UpgradeTo::Factory(name) => {
                let Some(factory) = handlers.factories.get(&*name) else {
                    trace::debug!(pid = %slot.pid(), factory = %name, "upgrade: no such factory");
                    return Err(Error::UnknownFactory(name.into_owned()));
                };
                match catch_unwind(AssertUnwindSafe(factory)) {
                    Ok(made) => made?,
                    Err(panic) => return Err(Error::from_panic(&*panic)),
                }
            }
        };
        let cx = Context::new(slot.pid(), &slot.cancel, reach);
        if let Err(e) = init_caught(&mut new, &cx, &method, input) {
            trace::debug!(pid = %slot.pid(), method = %method, error = %e, "upgrade: init failed");
            slot.close_process(new);
            return Err(e);
        }
        trace::debug!(pid = %slot.pid(), method = %method, "process upgraded");
        body.process = Some(new);
        Ok(())
    }

    /// Ends a process we own (Running) with `result`.
    fn end(
        &self,
        slot: &SlotArc<Slot<P>>,
        out: &mut StepOutput<P::Command, P::Output>,
        result: Result<P::Output, Error>,
        worker: usize,
    ) {
        // Whatever `complete` answers, the body is still ours: Completed
        // (we won) or Terminated (a forcer saw Running and left `close` and
        // the result to us).
        // Sends are refused from before the transition on (see `inbox`).
        // Sealing first makes the step's result final unless a forcer
        // sealed before us (then the state cell decides, below): a forcer
        // that comes later sees the seal and gives way.
        let _first = slot.queue.seal();
        let finish = slot.state.complete();
        if finish == Finish::Completed {
            let (line, owned) = self.counter_line(Some(worker));
            bump(&line.ended, owned);
        }
        // SAFETY: we owned the body while Running and nobody else takes it
        // from a Complete state.
        unsafe { slot.close_body() };
        // What the last step left in the worker's output: the yields of a
        // step that finished or failed are not dispatched. Dropped here, as
        // the process ends, not by whichever process this worker steps next.
        // Most steps that end a process leave nothing (the status was
        // taken): no call, no unwind guard.
        if holds_anything(out) {
            caught(slot, "a command's drop", || out.reset());
        }
        match finish {
            Finish::Completed => slot.finish(result, Some(worker)),
            // The forcer won: its error is the result, whatever the step
            // said (the caller of `terminate` was told it succeeded).
            Finish::Terminated => slot.finish(Err(slot.forced_error()), Some(worker)),
            Finish::Invalid(state) => debug_assert!(false, "ending a process in {state:?}"),
        }
    }

    /// Sends each yield to its handler. Completions made during the
    /// dispatch, on this thread, land in `batch` (the worker's, empty when
    /// the dispatch begins). Takes the run's `spare` references to the
    /// slot and returns those it owns after the dispatch.
    fn dispatch(
        &self,
        handlers: &Handlers<P>,
        slot: &SlotArc<Slot<P>>,
        out: &mut StepOutput<P::Command, P::Output>,
        batch: &mut Vec<Ev<P>>,
        spare: usize,
        debugged: bool,
    ) -> usize {
        let dispatching = Dispatching::enter(slot, batch, spare);
        let mut yields = out.yields_mut().drain();
        for Yield { tag, command } in yields.by_ref() {
            // Terminated during the dispatch (by a handler, or another
            // thread): the yields not yet dispatched never will be.
            if slot.state.load().is_complete() {
                caught_drop(slot, command);
                break;
            }
            let completer = Completer::dispatched(slot, tag);
            // The command's `name` and `Drop` are the process's code, as
            // the handler is: a panic in any of them is caught here, and
            // drops the completer, which completes the tag with an error
            // (unless the completion was made first). Uncaught, it would
            // unwind out of the run and leave the process Running.
            let dispatched = catch_unwind(AssertUnwindSafe(|| {
                let name = command.name();
                if debugged {
                    trace::debug!(pid = %slot.pid(), tag, command = name, "yield dispatched");
                }
                match handlers.get(name) {
                    Some(handler) => handler.handle(command, completer),
                    None => {
                        trace::debug!(
                            pid = %slot.pid(),
                            tag,
                            command = name,
                            "no handler for the command: completing the yield with an error"
                        );
                        let message = format!("unknown command `{name}`");
                        let _ = completer.complete(Err(Error::Failed(message)));
                    }
                }
            }));
            if dispatched.is_err() {
                trace::debug!(pid = %slot.pid(), tag, "a handler or the command panicked");
            }
        }
        // The yields a terminate left undispatched.
        caught_drop(slot, yields);
        dispatching.finish()
    }
}

/// Moves the completions made inline during this run, still in the
/// worker's batch, to the process's `inline` completions: called before a
/// transition that lets the process go (its next run, maybe on another
/// worker, takes them first).
#[inline]
fn carry<P: SchedProcess>(slot: &Slot<P>, batch: &mut Vec<Ev<P>>) {
    if !batch.is_empty() {
        // SAFETY: we still own the process (Running, before the transition
        // our caller makes next), hence its inline completions.
        unsafe { (*slot.inline.get()).append(batch) };
    }
}

/// Waits [`LINGER_SPINS`] spin-loop hints unless other work turns up for
/// this worker; `true` if the wait ran out (look at the queue again),
/// `false` if there is other work (park now).
#[cold]
#[inline(never)]
fn linger<T: Send + 'static>(ctx: &WorkerContext<T>) -> bool {
    for spin in 1..=LINGER_SPINS {
        std::hint::spin_loop();
        if spin % 4 == 0 && ctx.has_work() {
            return false;
        }
    }
    true
}

/// Leaves Running to wait as `waiting`: Idle (`park_idle`) or Blocked
/// (`finish_dispatch`); either answers `Requeue` if the wakeup flag is set.
/// Notes the kind for the waker (`Slot::parked_as`) and counts the park on
/// the worker's `line`.
#[inline(always)]
fn wait<P: SchedProcess>(
    slot: &Slot<P>,
    waiting: Waiting,
    line: &Counters,
    owned: bool,
    debugged: bool,
) -> Park {
    // Relaxed: published to the waker by the Release transition below (see
    // `Slot::parked_as`).
    slot.parked_as.store(waiting as u8, Ordering::Relaxed);
    // Read now: once parked, the process and the reference this run held
    // belong to whoever wakes or terminates it, and the slot may be freed
    // before we log.
    let pid = slot.pid();
    let park = match waiting {
        Waiting::Idle => slot.state.park_idle(),
        Waiting::Blocked => slot.state.finish_dispatch(),
    };
    if park == Park::Parked {
        let (counter, phase) = match waiting {
            Waiting::Idle => (&line.parked_idle, "idle"),
            Waiting::Blocked => (&line.parked_blocked, "blocked"),
        };
        bump(counter, owned);
        if debugged {
            trace::debug!(pid = %pid, phase, "process parked");
        }
    }
    park
}

/// A step's span while it is entered: untraced (`None`), dropping it costs
/// one inline test, not a call.
/// (`ManuallyDrop`: the field's own drop glue would be that call.)
struct Entered<S>(ManuallyDrop<Option<S>>);

impl<S> Drop for Entered<S> {
    #[inline]
    fn drop(&mut self) {
        if self.0.is_some() {
            exit(&mut self.0);
        }
    }
}

/// Exits and drops a step's span.
#[cold]
#[inline(never)]
fn exit<S>(span: &mut Option<S>) {
    drop(span.take());
}

/// The name of a status, for tracing.
fn status_name<O>(status: &Status<O>) -> &'static str {
    match status {
        Status::Continue => "continue",
        Status::Idle => "idle",
        Status::Yield => "yield",
        Status::Done(_) => "done",
    }
}

/// One debug event per event in a batch about to be stepped (called only
/// when debug events are enabled).
#[cold]
fn trace_events<P: SchedProcess>(slot: &Slot<P>, batch: &[Ev<P>]) {
    for event in batch {
        match event.kind() {
            EventKind::Completion => trace::debug!(
                pid = %slot.pid(),
                tag = event.tag(),
                ok = event.error().is_none(),
                "completion delivered"
            ),
            EventKind::Message => trace::debug!(pid = %slot.pid(), "message delivered"),
            EventKind::Cancel => trace::debug!(pid = %slot.pid(), "cancel delivered"),
        }
    }
}

/// Runs `drop_them`, which drops values of the process's own types (its
/// events, commands, a step's status), catching a panic of their `Drop`:
/// unwinding out of the run would leave the process Running for ever.
/// `what` names the values in the debug event.
fn caught<P: SchedProcess>(slot: &Slot<P>, what: &'static str, drop_them: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(drop_them)).is_err() {
        trace::debug!(pid = %slot.pid(), "{what} panicked");
    }
}

/// Drops `value` (commands of the process), catching a panic (see
/// [`caught`]).
fn caught_drop<P: SchedProcess, T>(slot: &Slot<P>, value: T) {
    caught(slot, "a command's drop", || drop(value));
}

/// Whether a step's output still holds a status or a yield.
#[inline]
fn holds_anything<C, R>(out: &StepOutput<C, R>) -> bool {
    out.status().is_some() || !out.yields().is_empty()
}
