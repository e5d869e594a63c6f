//! [`Handle`]: submit, send, terminate, shut down and observe, from any
//! thread.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use stepsched_process::{
    CancelToken, Context, Package, Pid, Reach, SendError, SubmitError, TerminateError,
};
use stepsched_relay::Receiver;

use crate::SchedProcess;
use crate::address::Address;
use crate::join::JoinHandle;
use crate::primitive::sync::atomic::{Ordering, fence};
use crate::primitive::sync::{Arc, SlotArc};
use crate::scheduler::Shutdown;
use crate::slot::{Core, FORCED_CANCELLED, FORCED_TERMINATED, Slot, Task, bump, init_caught};
use crate::trace;

/// A cloneable handle to a scheduler, for use anywhere — in handlers, in
/// processes' hooks, on other threads, in async code. It does not keep the
/// workers running: the [`Scheduler`](crate::Scheduler) owns them. It can
/// shut them down ([`begin_shutdown`](Handle::begin_shutdown)).
pub struct Handle<P: stepsched_process::Process + 'static> {
    pub(crate) core: Arc<Core<P>>,
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
    ///
    /// The scheduler remembers which PIDs it handed out (one counter), so
    /// that [`send`](Handle::send) and [`terminate`](Handle::terminate) to
    /// such a PID answer the same way for as long as its process has
    /// finished.
    pub fn allocate_pid(&self) -> Pid {
        self.core.pids.allocate()
    }

    /// Whether `pid` is one `allocate_pid` handed out: whoever sends to it
    /// got it from the allocating thread through some happens-before
    /// chain, so the allocator's counter is seen past it.
    fn was_allocated(&self, pid: Pid) -> bool {
        self.core.pids.handed_out(pid)
    }

    /// Whether a refusal for `pid` says the process existed: `pid` was
    /// allocated here, or is still registered (to a completed process).
    fn known_finished(&self, pid: Pid, registered: bool) -> bool {
        registered || self.was_allocated(pid)
    }

    /// The number of worker threads.
    pub fn workers(&self) -> usize {
        self.core.pool().workers()
    }

    /// Submits a process: calls `init(ctx, method, input)` on this thread,
    /// registers `pid`, and queues the process. Where depends on the
    /// calling thread: called on one of this scheduler's workers (from a
    /// step, [`Context::spawn`] included, or a handler running there), on
    /// that worker's own deque, which it runs newest first once its current
    /// run returns and from which an idle worker may steal (the push wakes
    /// a sleeping worker if none is searching); called on any other thread,
    /// on the global queue, which the workers take from in FIFO order.
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
        process: P,
        method: &str,
        input: P::Input,
    ) -> Result<JoinHandle<P>, SubmitError<P>> {
        let worker = self.core.pool().current_worker();
        let slot = self.publish(worker, pid, process, method, input, true)?;
        Ok(self.start(slot, worker))
    }

    /// `submit` up to its first run queue: reserves, initializes and
    /// registers the process, and returns its slot (the reference `start`
    /// or `start_detached` takes). `worker`: the calling thread's index
    /// if it is one of this scheduler's workers (`Pool::current_worker`);
    /// `joinable`: whether a join handle will read the result.
    fn publish(
        &self,
        worker: Option<usize>,
        pid: Pid,
        mut process: P,
        method: &str,
        input: P::Input,
        joinable: bool,
    ) -> Result<SlotArc<Slot<P>>, SubmitError<P>> {
        let core = &self.core;
        // Reserve first, then check: concurrent submits cannot overshoot.
        // SeqCst: the limit only needs the RMW's atomicity; `stopping` is
        // ordered by the fence in `reserve` (Dekker with shutdown's wait).
        core.reserve(worker, 1);
        if core.limited && core.live.fetch_add(1, Ordering::SeqCst) >= core.max_processes {
            core.release_reservation(worker);
            return Err(SubmitError::LimitReached(process));
        }
        if core.stopping.load(Ordering::SeqCst) {
            core.release_reservation(worker);
            return Err(SubmitError::Stopping(process));
        }
        let cancel = CancelToken::new();
        let ctx = Context::new(pid, &cancel, self);
        if let Err(e) = init_caught(&mut process, &ctx, method, input) {
            let _ = catch_unwind(AssertUnwindSafe(|| process.close()));
            core.release_reservation(worker);
            return Err(SubmitError::Init(e));
        }
        let slot = Slot::new(
            pid,
            crate::lent::lend(core, worker),
            process,
            cancel,
            joinable,
        );
        if let Err(e) = core.routes.register(pid, slot.clone()) {
            drop(e);
            // SAFETY: the slot was never published: the body is ours.
            let body = unsafe { &mut *slot.body.get() };
            let mut process = body.process.take().expect("just initialized");
            let _ = catch_unwind(AssertUnwindSafe(|| process.close()));
            core.release_reservation(worker);
            return Err(SubmitError::DuplicatePid(pid, process));
        }
        trace::debug!(pid = %pid, method, "process submitted");
        Ok(slot)
    }

    /// Starts a registered, initialized process that holds a reservation
    /// (see `submit`): the start hook, then its first run queue; returns a
    /// handle to join it.
    pub(crate) fn start(&self, slot: SlotArc<Slot<P>>, worker: Option<usize>) -> JoinHandle<P> {
        let handle = JoinHandle::new(slot.clone());
        self.start_detached(slot, worker);
        handle
    }

    /// As [`start`](Self::start), without a join handle (a spawn from a
    /// step returns only the PID): the reference passed in goes to the
    /// run queue with the task, so starting costs no reference-count
    /// change.
    fn start_detached(&self, slot: SlotArc<Slot<P>>, worker: Option<usize>) {
        let core = &self.core;
        let pid = slot.pid;
        // On a worker, its own counter line (a plain add, no locked
        // instruction); from other threads, a shared line.
        let (line, owned) = core.counter_line(worker);
        bump(&line.submitted, owned);
        if let Some(hook) = &core.on_start
            && catch_unwind(AssertUnwindSafe(|| hook(pid))).is_err()
        {
            trace::debug!(pid = %pid, "start hook panicked");
        }
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
            Slot::force(&slot, FORCED_CANCELLED);
            return;
        }
        let stopping = core.stopping.load(Ordering::SeqCst);
        // Once queued, the task may run and release its reference at once:
        // keep one for the cancel below (only while stopping).
        let cancel = stopping.then(|| slot.clone());
        match core.pool().submit(Task::new(slot)) {
            // The workers are gone: end the process here.
            Err(refused) => {
                Slot::force(&refused.into_inner().0, FORCED_CANCELLED);
            }
            Ok(()) => {
                if let Some(slot) = cancel {
                    Slot::send_cancel(&slot);
                }
            }
        }
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
    /// When no process that has not completed has `pid`, the message is
    /// handed back in a [`SendError`] (its package has no sender and an
    /// empty topic) by one rule:
    ///
    /// * [`SendError::Closed`] if `pid` was handed out by this scheduler's
    ///   [`allocate_pid`](Handle::allocate_pid) — its process has finished
    ///   (or was never submitted) — or is still registered to a completed
    ///   process (terminated while its last step is still running, or
    ///   publishing its result);
    /// * [`SendError::UnknownPid`] otherwise.
    ///
    /// So for a PID from `allocate_pid` the answer is `Closed` from the
    /// moment its process completes, and stays so. For a PID the caller
    /// made itself, the scheduler keeps no record once the result is
    /// published (before [`JoinHandle::join`] returns): from then on the
    /// answer is `UnknownPid`.
    ///
    /// ```
    /// # use stepsched::{Context, Error, Events, Process, Status, StepOutput};
    /// # struct Once;
    /// # impl Process for Once {
    /// #     type Input = (); type Message = u8; type Response = u8; type Command = String; type Output = ();
    /// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    /// #     fn step(&mut self, _cx: &mut Context<'_, Self>, _: Events<'_, u8>, out: &mut StepOutput<String, ()>) -> Result<(), Error> {
    /// #         out.set_status(Status::Done(()));
    /// #         Ok(())
    /// #     }
    /// # }
    /// use stepsched::{Package, Pid, Scheduler, SendError};
    ///
    /// let scheduler = Scheduler::<Once>::builder().workers(1).build().unwrap();
    /// let pid = scheduler.allocate_pid();
    /// scheduler.submit(pid, Once, "run", ()).unwrap().join().unwrap();
    /// assert_eq!(scheduler.send(pid, 7), Err(SendError::Closed(Package::new(pid, "", 7))));
    ///
    /// let never = Pid::new(9, 9);
    /// assert!(scheduler.send(never, 7).unwrap_err().is_unknown_pid());
    /// ```
    pub fn send(&self, pid: Pid, message: P::Message) -> Result<(), SendError<P::Message>> {
        self.deliver(Package::new(pid, "", message))
    }

    /// Pushes `package`'s payload as a message event to process
    /// `package.to`; the rule of [`send`](Handle::send) for refusals.
    fn deliver(&self, package: Package<P::Message>) -> Result<(), SendError<P::Message>> {
        let Some(slot) = self.core.routes.get(package.to) else {
            if package.to.node() != self.core.pids.node() {
                return self.deliver_remote(package);
            }
            return Err(self.refuse(package, false));
        };
        let Package {
            from,
            to,
            topic,
            payload,
        } = package;
        Slot::deliver(&slot, from, payload).map_err(|payload| {
            let package = Package {
                from,
                to,
                topic,
                payload,
            };
            self.refuse(package, true)
        })
    }

    /// Hands a package for a PID of another node to the remote route, if
    /// one is set; else the PID is unknown here.
    #[cold]
    fn deliver_remote(&self, package: Package<P::Message>) -> Result<(), SendError<P::Message>> {
        let route = self
            .core
            .remote
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match route {
            Some(route) => route.send(package),
            None => Err(SendError::UnknownPid(package)),
        }
    }

    /// Routes sends to PIDs of other nodes through `route`: every send of
    /// this scheduler ([`send`](Handle::send), a step's
    /// [`Context::send`](stepsched_process::Context::send), the
    /// [`Receiver`] impl) whose PID names another node than this
    /// scheduler's ([`Builder::node`](crate::Builder::node)) goes to
    /// `route` with its sender, and its answer is the send's. Without a
    /// route such a send fails with [`SendError::UnknownPid`]. A node layer
    /// (such as `stepsched-nats`) sets it; a later call replaces it.
    ///
    /// The route is dropped at the end of the shutdown, so a route that
    /// holds a [`Handle`] of this scheduler does not keep it alive.
    ///
    /// ```
    /// # use stepsched::{Context, Error, Events, Process, Status, StepOutput};
    /// # struct Idle;
    /// # impl Process for Idle {
    /// #     type Input = (); type Message = u8; type Response = u8; type Command = String; type Output = ();
    /// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    /// #     fn step(&mut self, _cx: &mut Context<'_, Self>, _: Events<'_, u8>, out: &mut StepOutput<String, ()>) -> Result<(), Error> {
    /// #         out.set_status(Status::Idle);
    /// #         Ok(())
    /// #     }
    /// # }
    /// use std::sync::{Arc, Mutex};
    /// use stepsched::{Package, Pid, Receiver, Scheduler, SendError};
    ///
    /// /// Keeps what it is given, as a node layer would publish it.
    /// struct Outbox(Mutex<Vec<Package<u8>>>);
    /// impl Receiver<u8> for Outbox {
    ///     fn send(&self, package: Package<u8>) -> Result<(), SendError<u8>> {
    ///         self.0.lock().unwrap().push(package);
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::<Idle>::builder().node(1).workers(1).build().unwrap();
    /// let elsewhere = Pid::new(2, 7);
    /// assert!(scheduler.send(elsewhere, 5).unwrap_err().is_unknown_pid());
    ///
    /// let outbox = Arc::new(Outbox(Mutex::new(Vec::new())));
    /// scheduler.handle().route_remote(outbox.clone());
    /// scheduler.send(elsewhere, 5).unwrap();
    /// assert_eq!(outbox.0.lock().unwrap()[0].to, elsewhere);
    /// // A PID of this node never leaves it.
    /// assert!(scheduler.send(Pid::new(1, 99), 5).unwrap_err().is_unknown_pid());
    /// ```
    pub fn route_remote(&self, route: Arc<dyn Receiver<P::Message> + Send + Sync>) {
        *self.core.remote.write().unwrap_or_else(|p| p.into_inner()) = Some(route);
    }

    /// The [`Address`] of the live process `pid`, to send to it many times
    /// without looking it up each time; `None` if no process that has not
    /// completed has `pid`.
    ///
    /// ```
    /// # use stepsched::{Context, Error, Events, Process, Status, StepOutput};
    /// # struct Count(u32);
    /// # impl Process for Count {
    /// #     type Input = (); type Message = u8; type Response = u8; type Command = String; type Output = u32;
    /// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    /// #     fn step(&mut self, _cx: &mut Context<'_, Self>, events: Events<'_, u8>, out: &mut StepOutput<String, u32>) -> Result<(), Error> {
    /// #         self.0 -= events.count() as u32;
    /// #         out.set_status(if self.0 == 0 { Status::Done(0) } else { Status::Idle });
    /// #         Ok(())
    /// #     }
    /// # }
    /// use stepsched::Scheduler;
    ///
    /// let scheduler = Scheduler::<Count>::builder().workers(1).build().unwrap();
    /// let pid = scheduler.allocate_pid();
    /// let join = scheduler.submit(pid, Count(1000), "run", ()).unwrap();
    /// let to = scheduler.address(pid).expect("the process is live");
    /// for _ in 0..1000 {
    ///     to.send(1).unwrap();
    /// }
    /// assert_eq!(join.join(), Ok(0));
    /// assert!(scheduler.address(pid).is_none());
    /// ```
    pub fn address(&self, pid: Pid) -> Option<Address<P>> {
        self.core
            .routes
            .get(pid)
            .filter(|slot| !slot.state_is_complete())
            .map(Address::new)
    }

    /// The refusal for `package` (see `send`'s rule).
    fn refuse(&self, package: Package<P::Message>, registered: bool) -> SendError<P::Message> {
        if self.known_finished(package.to, registered) {
            SendError::Closed(package)
        } else {
            SendError::UnknownPid(package)
        }
    }

    /// Terminates process `pid`: it ends with [`Error::Terminated`](stepsched_process::Error::Terminated) and is
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
    /// When no process that has not completed has `pid`, by the rule of
    /// [`send`](Handle::send): [`TerminateError::AlreadyComplete`] if `pid`
    /// was handed out by [`allocate_pid`](Handle::allocate_pid) or is still
    /// registered to a completed process (it completed on its own, or
    /// another terminate or shutdown ended it),
    /// [`TerminateError::UnknownPid`] otherwise. A process whose last step
    /// is ending it counts as completed from the moment it refuses sends
    /// (a moment before [`Address::is_closed`](crate::Address::is_closed)
    /// says so): its step's result stands.
    pub fn terminate(&self, pid: Pid) -> Result<(), TerminateError> {
        let registered = match self.core.routes.get(pid) {
            Some(slot) if Slot::force(&slot, FORCED_TERMINATED) => return Ok(()),
            Some(_) => true,
            None => false,
        };
        if self.known_finished(pid, registered) {
            Err(TerminateError::AlreadyComplete(pid))
        } else {
            Err(TerminateError::UnknownPid(pid))
        }
    }

    /// Whether `pid` is registered: a process with this PID was submitted
    /// and its result is not yet published (it may have completed: a
    /// terminated process whose last step is still running keeps its PID).
    /// While it is, a submit with `pid` fails with
    /// [`SubmitError::DuplicatePid`].
    pub fn contains(&self, pid: Pid) -> bool {
        self.core.routes.contains(pid)
    }

    /// How many events wait in the queue of process `pid` (messages,
    /// completions, cancellation): `None` if no process has `pid` (the rule
    /// of [`contains`](Self::contains)). A snapshot that costs two loads and writes nothing, for
    /// flow control (a relay or a node that stops taking input while a
    /// process lags) and monitoring. Events a step is taking right now may
    /// still count until its drain ends.
    ///
    /// ```
    /// # use stepsched::{Context, Error, Events, Process, Status, StepOutput};
    /// # struct Idle;
    /// # impl Process for Idle {
    /// #     type Input = (); type Message = u8; type Response = u8; type Command = String; type Output = ();
    /// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    /// #     fn step(&mut self, _cx: &mut Context<'_, Self>, _: Events<'_, u8>, out: &mut StepOutput<String, ()>) -> Result<(), Error> {
    /// #         out.set_status(Status::Idle);
    /// #         Ok(())
    /// #     }
    /// # }
    /// let scheduler = stepsched::Scheduler::<Idle>::builder().workers(1).build().unwrap();
    /// let h = scheduler.handle();
    /// let pid = h.allocate_pid();
    /// assert_eq!(h.queued(pid), None, "no such process yet");
    /// h.submit(pid, Idle, "main", ()).unwrap();
    /// // Some count: how many of its messages it has taken yet is a race.
    /// h.send(pid, 1).unwrap();
    /// assert!(h.queued(pid).unwrap() <= 1);
    /// ```
    pub fn queued(&self, pid: Pid) -> Option<usize> {
        let slot = self.core.routes.get(pid)?;
        Some(slot.queued())
    }

    /// Starts shutting the scheduler down, from any thread — a handler or
    /// a step running on one of its workers included — and returns at
    /// once. The shutdown is the one the blocking [`Scheduler::shutdown`]
    /// does (refuse submits, cancel every live process, force the rest at
    /// `deadline`, stop the workers), run on a thread of its own so that it
    /// can join the worker that asked for it. [`Scheduler::shutdown`]
    /// refuses to run on a worker ([`ShutdownError::OnWorker`]); this is
    /// the one to call there.
    ///
    /// The returned [`Shutdown`] is a `Future` of the [`ShutdownReport`]
    /// (for async code: awaiting it blocks no executor thread) and can
    /// [`wait`](Shutdown::wait) for it; dropping it does not stop the
    /// shutdown. Only the first shutdown of a scheduler (by either method)
    /// runs, with its deadline; a later one waits for it and reports
    /// nothing more.
    ///
    /// Waiting (blocking) for the shutdown on one of the scheduler's own
    /// workers holds that worker until the deadline: ask for it there and
    /// drop the `Shutdown`.
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
    /// let handle = scheduler.handle();
    /// let report = std::thread::spawn(move || handle.begin_shutdown(Duration::from_secs(5)).wait())
    ///     .join()
    ///     .unwrap();
    /// assert_eq!(report.cancelled, 1);
    /// assert_eq!(join.join(), Err(Error::Cancelled));
    /// drop(scheduler); // already shut down: returns at once
    /// ```
    ///
    /// [`Scheduler::shutdown`]: crate::Scheduler::shutdown
    /// [`ShutdownReport`]: crate::ShutdownReport
    /// [`ShutdownError::OnWorker`]: crate::ShutdownError::OnWorker
    pub fn begin_shutdown(&self, deadline: Duration) -> Shutdown {
        crate::scheduler::start_shutdown(&self.core, &self.core.shared, deadline)
    }
}

impl<P: SchedProcess> Receiver<P::Message> for Handle<P> {
    /// Routes a package to the process `package.to`, whose step sees
    /// `package.from` as the message's sender (the topic is not used).
    /// Refusals follow the rule of [`Handle::send`].
    fn send(&self, package: Package<P::Message>) -> Result<(), SendError<P::Message>> {
        self.deliver(package)
    }
}

/// What a process's [`Context`] reaches: this scheduler.
impl<P: SchedProcess> Reach<P> for Handle<P> {
    fn send(&self, package: Package<P::Message>) -> Result<(), SendError<P::Message>> {
        self.deliver(package)
    }

    fn spawn(&self, child: P, method: &str, input: P::Input) -> Result<Pid, SubmitError<P>> {
        let pid = self.allocate_pid();
        let worker = self.core.pool().current_worker();
        let slot = self.publish(worker, pid, child, method, input, false)?;
        self.start_detached(slot, worker);
        Ok(pid)
    }

    fn terminate(&self, pid: Pid) -> Result<(), TerminateError> {
        Handle::terminate(self, pid)
    }

    /// This handle: [`ContextExt`](crate::ContextExt) reaches it through
    /// the context.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
