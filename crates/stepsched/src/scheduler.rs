//! [`Scheduler`]: owns the workers; shutdown, blocking ([`Scheduler::shutdown`])
//! or started from any thread ([`Handle::begin_shutdown`], a [`Shutdown`]).

use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use crate::SchedProcess;
use crate::handle::Handle;
use crate::primitive::sync::Arc;
use crate::primitive::sync::atomic::{Ordering, fence};
use crate::shutdown::{Phase, Shared, ShutdownError, ShutdownReport, nothing_more};
use crate::slot::{Core, FORCED_CANCELLED, Slot};
use crate::trace;

/// The scheduler: owns the worker threads. Dereferences to [`Handle`] for
/// `submit`, `send`, `terminate` and `stats`; [`handle`](Scheduler::handle)
/// gives a cloneable one.
///
/// Dropping the scheduler shuts it down with a deadline of one second, or,
/// if a shutdown already began (say [`Handle::begin_shutdown`] from a
/// handler), waits for that one to finish. Dropped on one of its own
/// workers (the last `Arc<Scheduler>` released by a step), it neither runs
/// nor waits for a shutdown there: it starts one as
/// [`Handle::begin_shutdown`] does (or leaves the one under way) and
/// returns, since the worker cannot wait for a shutdown that has to join
/// it.
pub struct Scheduler<P: SchedProcess> {
    handle: Handle<P>,
}

impl<P: SchedProcess> std::ops::Deref for Scheduler<P> {
    type Target = Handle<P>;

    fn deref(&self) -> &Handle<P> {
        &self.handle
    }
}

impl<P: SchedProcess> Scheduler<P> {
    /// The scheduler that owns the workers of `handle`'s core.
    pub(crate) fn new(handle: Handle<P>) -> Self {
        Scheduler { handle }
    }

    /// A cloneable handle.
    pub fn handle(&self) -> Handle<P> {
        self.handle.clone()
    }

    /// Shuts down and waits for it, on this thread: refuses new submits,
    /// sends a cancel event to every live process, waits until all complete
    /// or `deadline` passes, then force-closes the rest (result
    /// [`Error::Cancelled`]) and stops the workers.
    ///
    /// Never waits much past the deadline, even for a process that ignores
    /// cancel or a step that never returns. When it returns, every process
    /// submitted before it (or racing it and accepted) has its result; each
    /// was closed once, except one whose step was still running when the
    /// workers were abandoned (`workers_joined` is false): that one is
    /// closed if and when its step returns; and one that ended on its own
    /// but whose `close` is still running publishes its result when `close`
    /// returns.
    ///
    /// Idempotent: a later call, or one racing the first (from here or
    /// from [`Handle::begin_shutdown`]), waits for the first to finish and
    /// reports nothing more. To shut down without blocking — from a
    /// handler, a step, or async code — use [`Handle::begin_shutdown`],
    /// which starts the same shutdown on a thread of its own and returns a
    /// [`Shutdown`] future at once.
    ///
    /// # Errors
    ///
    /// [`ShutdownError::OnWorker`] if called on one of this scheduler's own
    /// worker threads (a step or a handler holding the scheduler): that
    /// worker would wait for a shutdown that has to join it. The call
    /// returns at once and starts nothing; the scheduler runs on.
    /// [`ShutdownError::InShutdown`] if called on the thread running this
    /// scheduler's shutdown (a process's `close` or a hook): it would wait
    /// for itself. (Dropping the last `Scheduler` in either place is
    /// fine: its drop starts the shutdown, or finds it under way, and does
    /// not wait.)
    ///
    /// ```
    /// # use stepsched::{Context, Error, Events, Process, Status, StepOutput};
    /// # struct Waits;
    /// # impl Process for Waits {
    /// #     type Input = (); type Message = (); type Response = (); type Command = String; type Output = ();
    /// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    /// #     fn step(&mut self, _cx: &mut Context<'_, Self>, events: Events<'_, ()>, out: &mut StepOutput<String, ()>) -> Result<(), Error> {
    /// #         if events.into_iter().any(|e| e.is_cancel()) { return Err(Error::Cancelled); }
    /// #         out.set_status(Status::Idle);
    /// #         Ok(())
    /// #     }
    /// # }
    /// use std::time::Duration;
    /// use stepsched::Scheduler;
    ///
    /// let scheduler = Scheduler::<Waits>::builder().workers(1).build().unwrap();
    /// let join = scheduler.submit(scheduler.allocate_pid(), Waits, "run", ()).unwrap();
    /// let report = scheduler.shutdown(Duration::from_secs(5)).expect("not on a worker");
    /// assert_eq!((report.cancelled, report.forced), (1, 0));
    /// assert_eq!(join.join(), Err(Error::Cancelled));
    /// ```
    ///
    /// [`Error::Cancelled`]: crate::Error::Cancelled
    pub fn shutdown(&self, deadline: Duration) -> Result<ShutdownReport, ShutdownError> {
        let core = &self.handle.core;
        if core.pool().current_worker().is_some() {
            trace::debug!("blocking shutdown refused on a worker");
            return Err(ShutdownError::OnWorker);
        }
        if running_shutdown_of(core) {
            trace::debug!("blocking shutdown refused inside the shutdown");
            return Err(ShutdownError::InShutdown);
        }
        let shared = &core.shared;
        if !shared.shutdown.claim() {
            return Ok(Shutdown::later(shared.clone()).wait());
        }
        let report = shut_down_once(core, deadline);
        shared.shutdown.finish(report);
        Ok(report)
    }
}

/// A shutdown in progress, from [`Handle::begin_shutdown`]: a `Future` of its
/// [`ShutdownReport`], or [`wait`](Shutdown::wait) for it. Dropping it
/// does not stop the shutdown.
///
/// The report is the full one for the call that started the shutdown; a
/// call made while another shutdown was already running gets that one's
/// `workers_joined` and zero counts.
///
/// ```
/// # use stepsched::{Context, Error, Events, Process, Status, StepOutput};
/// # struct Noop;
/// # impl Process for Noop {
/// #     type Input = (); type Message = (); type Response = (); type Command = String; type Output = ();
/// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
/// #     fn step(&mut self, _cx: &mut Context<'_, Self>, _: Events<'_, ()>, out: &mut StepOutput<String, ()>) -> Result<(), Error> {
/// #         out.set_status(Status::Idle);
/// #         Ok(())
/// #     }
/// # }
/// use std::time::Duration;
/// use stepsched::Scheduler;
///
/// let scheduler = Scheduler::<Noop>::builder().workers(1).build().unwrap();
/// let shutdown = scheduler.begin_shutdown(Duration::from_millis(10));
/// // In async code: `let report = shutdown.await;`
/// let report = shutdown.wait();
/// assert!(report.workers_joined);
/// ```
pub struct Shutdown {
    shared: Arc<Shared>,
    /// This call started the shutdown: it gets the full report.
    first: bool,
}

impl Shutdown {
    fn later(shared: Arc<Shared>) -> Self {
        Shutdown {
            shared,
            first: false,
        }
    }

    fn report(&self, report: ShutdownReport) -> ShutdownReport {
        if self.first {
            report
        } else {
            nothing_more(report)
        }
    }

    /// Whether the shutdown has finished.
    pub fn is_done(&self) -> bool {
        self.shared
            .shutdown
            .with(|phase| matches!(phase, Phase::Done(_)))
    }

    /// Blocks until the shutdown has finished and returns its report.
    pub fn wait(self) -> ShutdownReport {
        let state = &self.shared.shutdown;
        let mut phase = state.phase.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Phase::Done(report) = *phase {
                return self.report(report);
            }
            phase = state.done.wait(phase).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Future for Shutdown {
    type Output = ShutdownReport;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<ShutdownReport> {
        let done = self.shared.shutdown.with(|phase| match phase {
            Phase::Done(report) => Some(*report),
            Phase::Running(wakers) => {
                if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    wakers.push(cx.waker().clone());
                }
                None
            }
            Phase::Open => unreachable!("a Shutdown exists once a shutdown began"),
        });
        match done {
            Some(report) => Poll::Ready(self.report(report)),
            None => Poll::Pending,
        }
    }
}

impl fmt::Debug for Shutdown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shutdown")
            .field("done", &self.is_done())
            .finish_non_exhaustive()
    }
}

/// [`Handle::begin_shutdown`]: the first call runs the shutdown on a thread
/// of its own (it may have been asked for on a worker, which it must join).
pub(crate) fn start_shutdown<P: SchedProcess>(
    core: &Arc<Core<P>>,
    shared: &Arc<Shared>,
    deadline: Duration,
) -> Shutdown {
    if !shared.shutdown.claim() {
        return Shutdown::later(shared.clone());
    }
    run_detached(core.clone(), shared.clone(), deadline);
    Shutdown {
        shared: shared.clone(),
        first: true,
    }
}

/// Spawns one of the shutdown's threads. In this crate's unit tests a
/// thread can make its own spawns fail (`fail_spawns`), to exercise the
/// paths that shut down on the calling thread instead.
#[cfg(not(stepsched_loom))]
fn spawn_shutdown_thread(f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    #[cfg(test)]
    if tests::FAIL_SPAWNS.with(|fail| fail.get()) {
        return Err(std::io::Error::other("spawn refused by the test"));
    }
    std::thread::Builder::new()
        .name("stepsched-shutdown".into())
        .spawn(f)
        .map(drop)
}

#[cfg(not(stepsched_loom))]
fn run_detached<P: SchedProcess>(core: Arc<Core<P>>, shared: Arc<Shared>, deadline: Duration) {
    let (core2, shared2) = (core.clone(), shared.clone());
    let spawned = spawn_shutdown_thread(move || {
        let report = shut_down_once(&core2, deadline);
        shared2.shutdown.finish(report);
    });
    if spawned.is_err() {
        // No thread: shut down here (on a worker, this waits out the
        // deadline for itself, but still finishes).
        let report = shut_down_once(&core, deadline);
        shared.shutdown.finish(report);
    }
}

/// Under loom every thread must be a loom thread: shut down on this one.
#[cfg(stepsched_loom)]
fn run_detached<P: SchedProcess>(core: Arc<Core<P>>, shared: Arc<Shared>, deadline: Duration) {
    let report = shut_down_once(&core, deadline);
    shared.shutdown.finish(report);
}

#[cfg(not(stepsched_loom))]
crate::primitive::thread_local! {
    /// The core whose shutdown this thread is running (its address; 0:
    /// none): a `Scheduler` dropped or shut down from inside it (a
    /// process's `close`, a completion or shutdown hook holding the last
    /// `Scheduler`) must not wait for the shutdown it is part of.
    static SHUTTING_DOWN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

// loom's `thread_local!` takes no `const` initializer.
#[cfg(stepsched_loom)]
crate::primitive::thread_local! {
    static SHUTTING_DOWN: std::cell::Cell<usize> = std::cell::Cell::new(0);
}

/// Whether this thread is running the shutdown of `core`.
fn running_shutdown_of<P: SchedProcess>(core: &Arc<Core<P>>) -> bool {
    SHUTTING_DOWN.with(|c| c.get()) == Arc::as_ptr(core) as usize
}

/// Marks this thread as running `core`'s shutdown until dropped (also on
/// an unwind), restoring whatever it ran before.
struct RunningShutdown(usize);

impl RunningShutdown {
    fn enter<P: SchedProcess>(core: &Arc<Core<P>>) -> Self {
        RunningShutdown(SHUTTING_DOWN.with(|c| c.replace(Arc::as_ptr(core) as usize)))
    }
}

impl Drop for RunningShutdown {
    fn drop(&mut self) {
        let previous = self.0;
        SHUTTING_DOWN.with(|c| c.set(previous));
    }
}

/// The shutdown itself; run once per scheduler (the caller claimed it).
fn shut_down_once<P: SchedProcess>(core: &Arc<Core<P>>, deadline: Duration) -> ShutdownReport {
    let _running = RunningShutdown::enter(core);
    let mut report = ShutdownReport::default();
    let until = Instant::now() + deadline;
    core.stopping.store(true, Ordering::SeqCst);
    // Pairs with the fence in `submit` (see there).
    fence(Ordering::SeqCst);
    for (_, slot) in core.routes.snapshot() {
        Slot::send_cancel(&slot);
        report.cancelled += 1;
    }
    {
        let mut guard = core.drained.lock().unwrap_or_else(|p| p.into_inner());
        // After the fence that follows our store of `stopping`: see
        // `Core::release_unpublished` and `CounterLines::all_released`.
        while !core.counters.all_released() {
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
        if Slot::force(&slot, FORCED_CANCELLED) {
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
        if Slot::force(&slot, FORCED_CANCELLED) {
            report.forced += 1;
        }
        // Only a forced process's result is known here. One that ended
        // on its own and is still in `close` publishes its own result
        // when `close` returns.
        if slot.force_won() {
            slot.finish(Err(slot.forced_error()), None);
        }
    }
    trace::debug!(?report, "scheduler shut down");
    let remote = core
        .remote
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    drop(remote);
    let hooks = std::mem::take(&mut *core.on_shutdown.lock().unwrap_or_else(|p| p.into_inner()));
    for hook in hooks {
        if catch_unwind(AssertUnwindSafe(hook)).is_err() {
            trace::debug!("a shutdown hook panicked");
        }
    }
    report
}

/// Stops the pool, waiting for the workers until `until` (at least a short
/// grace period). Returns whether they all exited.
#[cfg(not(stepsched_loom))]
fn stop_pool<P: SchedProcess>(core: &Arc<Core<P>>, until: Instant) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    let core2 = core.clone();
    let spawned = spawn_shutdown_thread(move || {
        core2.pool().shutdown_now();
        let _ = tx.send(());
    });
    if spawned.is_err() {
        // No thread: stop the pool here. On one of its own workers (a
        // shutdown asked for from a step, whose own thread could not be
        // spawned either) `shutdown_now` cannot join the workers: they
        // stop when their current run returns, and until then they use
        // the core through the uncounted borrow of every run (see
        // `Builder::build`), which relies on the core outliving them.
        // Nothing can tell when they are gone, so that reference is never
        // released: the core, a few hundred bytes plus the pool, stays
        // allocated for the life of the program, in this one failure case.
        core.pool().shutdown_now();
        let joined = core.pool().current_worker().is_none();
        if !joined {
            std::mem::forget(Arc::clone(core));
        }
        return joined;
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
        const DEADLINE: Duration = Duration::from_secs(1);
        if self.shutdown(DEADLINE).is_err() {
            // On one of our workers: start the shutdown (or find the one
            // under way) on its own thread, which joins this worker once
            // the current run returns; waiting here would hold that run.
            // Inside the shutdown itself (a process's `close` or a hook
            // dropped the last `Scheduler`): it is under way on this very
            // thread, and finishes when the caller returns.
            drop(self.handle.begin_shutdown(DEADLINE));
        }
    }
}

impl<P: SchedProcess> fmt::Debug for Scheduler<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("handle", &self.handle)
            .finish()
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use std::cell::Cell;
    use std::sync::{Arc, Weak};
    use std::time::Duration;

    use stepsched_process::{Context, Error, Events, Process, Status, StepOutput};

    use crate::{Handle, Scheduler};

    std::thread_local! {
        /// Whether the shutdown's spawns fail on this thread.
        pub(super) static FAIL_SPAWNS: Cell<bool> = const { Cell::new(false) };
    }

    /// Starts the shutdown from its step, on a worker where no thread can
    /// be spawned, then finishes.
    struct Stopper(Handle<Stopper>, std::sync::mpsc::Sender<()>);

    impl Process for Stopper {
        type Input = ();
        type Message = ();
        type Response = ();
        type Command = &'static str;
        type Output = ();

        fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
            Ok(())
        }

        fn step(
            &mut self,
            _: &mut Context<'_, Self>,
            _: Events<'_, ()>,
            out: &mut StepOutput<&'static str, ()>,
        ) -> Result<(), Error> {
            FAIL_SPAWNS.with(|fail| fail.set(true));
            drop(self.0.begin_shutdown(Duration::from_millis(20)));
            FAIL_SPAWNS.with(|fail| fail.set(false));
            self.1.send(()).unwrap();
            out.set_status(Status::Done(()));
            Ok(())
        }
    }

    /// A shutdown started from a step, where neither the shutdown's thread
    /// nor the thread that stops the pool can be spawned, runs on the
    /// worker itself, which cannot join the workers: the report says so,
    /// and the core the workers borrow stays allocated after every handle
    /// is gone. (It used to report the workers joined and free the core
    /// under them.)
    #[test]
    fn a_shutdown_that_cannot_spawn_on_a_worker_reports_the_workers_not_joined() {
        let scheduler = Scheduler::<Stopper>::builder().workers(2).build().unwrap();
        let core: Weak<_> = Arc::downgrade(&scheduler.handle.core);
        let (started, shut_down) = std::sync::mpsc::channel();
        let stopper = Stopper(scheduler.handle(), started);
        let join = scheduler
            .submit(scheduler.allocate_pid(), stopper, "run", ())
            .unwrap();
        // The step's shutdown is the first, and has run (on the worker).
        shut_down.recv().unwrap();
        let report = scheduler.begin_shutdown(Duration::from_secs(5)).wait();
        assert!(
            !report.workers_joined,
            "the shutdown ran on a worker, which cannot join the workers"
        );
        // The stopper's step outlived the deadline: its result is the
        // shutdown's.
        assert_eq!(join.join(), Err(Error::Cancelled));
        drop(scheduler);
        // Wait for the workers to end and drop their references: then only
        // the reference kept for the workers not joined may remain (the
        // wait is a hang guard, not a timing assumption).
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while core.strong_count() > 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            core.upgrade().is_some(),
            "the core was freed while a worker that was not joined may still use it"
        );
    }
}
