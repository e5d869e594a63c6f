//! [`ContextExt`]: what a step reaches of this scheduler through its
//! context beyond `send`, `spawn` and `terminate`; and time: a clock
//! ([`ContextExt::now`]) and timers ([`ContextExt::after`]) that are real
//! under this scheduler and virtual under a simulator ([`HostTime`]).

use std::any::Any;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::rc::Rc;
use std::sync::OnceLock;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use stepsched_process::{Context, Package, Pid, SendError, SubmitError};

use crate::SchedProcess;
use crate::address::Address;
use crate::handle::Handle;
use crate::scheduler::Shutdown;

/// What a step (or `init`) offers beyond [`Context`]'s own methods when the
/// process runs on this scheduler: the fast path of [`Address`]es, spawns
/// that return one, and the shutdown — what a [`Handle`] offers, without a
/// handle smuggled into the process.
///
/// Addresses obtained here carry the calling process's PID as their
/// [sender](Address::sender): a message sent through one reaches its
/// receiver with `from` set, so the receiver can reply.
///
/// On a context that is not this scheduler's (one made by
/// [`Context::detached`], or by another scheduler such as a simulator)
/// these methods find nothing: `None`, or the child handed back.
///
/// ```
/// use stepsched::{Address, Context, ContextExt, Error, Events, Process, Status, StepOutput};
///
/// /// Spawns a child, sends it a number through its address, and finishes
/// /// with the child's answer.
/// enum Node {
///     Parent { child: Option<Address<Node>> },
///     Child,
/// }
///
/// impl Process for Node {
///     type Input = ();
///     type Message = u32;
///     type Response = ();
///     type Command = &'static str;
///     type Output = u32;
///
///     fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
///         Ok(())
///     }
///
///     fn step(
///         &mut self,
///         cx: &mut Context<'_, Self>,
///         events: Events<'_, u32, ()>,
///         out: &mut StepOutput<&'static str, u32>,
///     ) -> Result<(), Error> {
///         match self {
///             Node::Parent { child } => match child {
///                 None => {
///                     let to = cx.spawn_address(Node::Child, "run", ())?;
///                     to.send(20)?; // stamped with the parent's PID
///                     *child = Some(to);
///                     out.set_status(Status::Idle);
///                 }
///                 Some(_) => {
///                     let answer = events.filter_map(|e| e.into_message()).sum();
///                     out.set_status(Status::Done(answer));
///                 }
///             },
///             Node::Child => {
///                 for event in events {
///                     if let (Some(from), Some(n)) = (event.sender(), event.message_data()) {
///                         let reply = *n + 1;
///                         cx.address(from).expect("the parent waits").send(reply)?;
///                         out.set_status(Status::Done(0));
///                         return Ok(());
///                     }
///                 }
///                 out.set_status(Status::Idle);
///             }
///         }
///         Ok(())
///     }
/// }
///
/// let scheduler = stepsched::Scheduler::<Node>::builder().workers(2).build().unwrap();
/// let parent = Node::Parent { child: None };
/// let join = scheduler.submit(scheduler.allocate_pid(), parent, "run", ()).unwrap();
/// assert_eq!(join.join(), Ok(21));
/// ```
pub trait ContextExt<P: SchedProcess> {
    /// The handle of the scheduler running this process, if it is this
    /// crate's scheduler.
    fn handle(&self) -> Option<Handle<P>>;

    /// The address of live process `pid`, stamped with this process's PID
    /// as its sender ([`Handle::address`], then
    /// [`with_sender`](Address::with_sender)). `None` if no live process
    /// has `pid`, or the context is neither this scheduler's nor a host's
    /// that offers an [`Outbox`](stepsched_process::Outbox).
    ///
    /// Under such a host (`stepsched-sim`'s simulator) the address sends
    /// through the host's outbox, and the host delivers what it holds on
    /// its own thread after the step, as it delivers `Context::send`s
    /// (through its simulated network, if it has one).
    fn address(&self, pid: Pid) -> Option<Address<P>>;

    /// Starts `child` under a fresh PID, as [`Context::spawn`] does, and
    /// returns its address, stamped with this process's PID as its sender:
    /// the parent can send to the child at once, with no lookup.
    ///
    /// # Errors
    ///
    /// As [`Context::spawn`]; on a context that is neither this
    /// scheduler's nor a host's with an outbox (see
    /// [`address`](ContextExt::address)), [`SubmitError::Stopping`] with
    /// the child.
    fn spawn_address(
        &self,
        child: P,
        method: &str,
        input: P::Input,
    ) -> Result<Address<P>, SubmitError<P>>;

    /// Starts this scheduler's shutdown, as [`Handle::begin_shutdown`]
    /// does, and returns at once: a step must not wait for it (that would
    /// hold its worker until the deadline). `None` on a context that is not
    /// this scheduler's.
    fn begin_shutdown(&self, deadline: Duration) -> Option<Shutdown>;

    /// The time now, by this process's clock, as a [`Duration`] since its
    /// host's epoch: readings of one process never go backwards, so they
    /// compare and subtract (`cx.now() - start` is the time elapsed, as
    /// this process's clock measures it). A `Duration` rather than an
    /// [`Instant`]: a simulator makes up its readings, and an `Instant`
    /// cannot be made up.
    ///
    /// - Under this scheduler (and on any context with no simulator
    ///   behind it, [`Context::detached`] included): real, monotonic time
    ///   ([`Instant`]) since an epoch shared by the whole program (its
    ///   first reading), so readings of different processes compare too.
    /// - Under a simulator that offers [`HostTime`] (`stepsched-sim`
    ///   does): virtual time — the simulator's clock, which only moves
    ///   when nothing can run — as this process's clock reads it, offset
    ///   (and drifting) by the clock-skew fault of the simulator if it is
    ///   on. Two processes' readings then differ by their skews: compare
    ///   readings of one clock, never across processes.
    ///
    /// Works in `init` and in `step`.
    ///
    /// ```
    /// use stepsched::{CancelToken, Context, ContextExt, Error, Events, Pid, Process, StepOutput};
    /// # struct Nop;
    /// # impl Process for Nop {
    /// #     type Input = (); type Message = (); type Response = (); type Command = String; type Output = ();
    /// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    /// #     fn step(&mut self, _: &mut Context<'_, Self>, _: Events<'_, ()>, _: &mut StepOutput<String, ()>) -> Result<(), Error> { Ok(()) }
    /// # }
    ///
    /// let cancel = CancelToken::new();
    /// let cx: Context<'_, Nop> = Context::detached(Pid::new(0, 1), &cancel);
    /// let a = cx.now();
    /// let b = cx.now();
    /// assert!(b >= a); // monotonic
    /// ```
    fn now(&self) -> Duration;

    /// Asks for `message` to be delivered to this process after `delay`
    /// (at least), as a message event from itself
    /// ([`Event::sender`](stepsched_process::Event::sender) is this
    /// process's PID): a timer a step waits on by going `Idle`.
    ///
    /// - Under this scheduler: real time, from one timer thread shared by
    ///   the whole program (started by the first call, idle while no timer
    ///   is pending). The message goes through the process's
    ///   [`Address`]; if the process has ended by then (or the scheduler
    ///   has shut down) it reaches nothing and is dropped. A pending timer
    ///   keeps the scheduler's shared state alive until it fires.
    /// - Under a simulator that offers [`HostTime`] (`stepsched-sim`):
    ///   virtual time, on the simulator's timer queue (not through its
    ///   simulated network: a timer is local), written to its trace.
    ///
    /// # Errors
    ///
    /// The message is handed back ([`SendError::UnknownPid`]) on a context
    /// with neither behind it ([`Context::detached`]), and
    /// ([`SendError::Closed`]) when the host refuses the timer.
    fn after(&self, delay: Duration, message: P::Message) -> Result<(), SendError<P::Message>>;
}

/// The protocol by which a host that is not this scheduler — a simulator,
/// such as `stepsched-sim`'s — gives [`ContextExt::now`] and
/// [`ContextExt::after`] their meaning under it: its
/// [`Reach::as_any`](stepsched_process::Reach::as_any) returns a
/// `&HostTime`. It is made of `std` types only (and [`Pid`]), because the
/// simulator does not depend on this crate (nor this crate on it):
///
/// - `.0`, the host's state, handed to the two functions;
/// - `.1(state, pid)`: the time now by process `pid`'s clock (what
///   [`now`](ContextExt::now) returns);
/// - `.2(state, pid, delay, message)`: delivers `message` (a boxed
///   `P::Message`) to `pid`, from itself, after `delay`; `Err` hands the
///   message back when the host refuses.
///
/// Processes never use it; a host implements it.
pub type HostTime = (
    Rc<dyn Any>,
    fn(&dyn Any, Pid) -> Duration,
    fn(&dyn Any, Pid, Duration, Box<dyn Any>) -> Result<(), Box<dyn Any>>,
);

/// The [`HostTime`] behind `cx`, if its host offers one.
fn host_time<'a, P: SchedProcess>(cx: &Context<'a, P>) -> Option<&'a HostTime> {
    cx.reach().as_any()?.downcast_ref::<HostTime>()
}

/// The real clock's epoch: the program's first reading.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// A job of the timer thread: when, its order among jobs due at once, what.
type Job = (Instant, Box<dyn FnOnce() + Send>);

/// Runs `job` on the program's timer thread at `when` (or soon after).
pub(crate) fn at(when: Instant, job: impl FnOnce() + Send + 'static) {
    // The thread lives as long as the program; a send cannot fail.
    let _ = timers().send((when, Box::new(job)));
}

/// The program's timer thread, started by the first timer: runs each job
/// at its time (in the order they were asked for, among those due at
/// once).
fn timers() -> &'static Sender<Job> {
    static TIMERS: OnceLock<Sender<Job>> = OnceLock::new();
    TIMERS.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("stepsched-timer".into())
            .spawn(move || {
                // Due time, then arrival order; the jobs by arrival.
                let mut due: BinaryHeap<Reverse<(Instant, u64)>> = BinaryHeap::new();
                let mut jobs = std::collections::HashMap::new();
                let mut seq = 0u64;
                loop {
                    let now = Instant::now();
                    while let Some(&Reverse((at, n))) = due.peek() {
                        if at > now {
                            break;
                        }
                        due.pop();
                        if let Some(job) = jobs.remove(&n) {
                            let job: Box<dyn FnOnce() + Send> = job;
                            // A panicking job (a message's drop) must not
                            // stop the thread.
                            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                        }
                    }
                    let next = match due.peek() {
                        Some(&Reverse((at, _))) => {
                            rx.recv_timeout(at.saturating_duration_since(Instant::now()))
                        }
                        None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                    };
                    match next {
                        Ok((at, job)) => {
                            seq += 1;
                            due.push(Reverse((at, seq)));
                            jobs.insert(seq, job);
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            });
        if let Err(e) = spawned {
            panic!("stepsched: cannot start the timer thread: {e}");
        }
        tx
    })
}

/// The scheduler behind `cx`, if it is this crate's.
fn handle_of<'a, P: SchedProcess>(cx: &Context<'a, P>) -> Option<&'a Handle<P>> {
    cx.reach().as_any()?.downcast_ref::<Handle<P>>()
}

impl<P: SchedProcess> ContextExt<P> for Context<'_, P> {
    fn handle(&self) -> Option<Handle<P>> {
        handle_of(self).cloned()
    }

    fn address(&self, pid: Pid) -> Option<Address<P>> {
        let to = match handle_of(self) {
            Some(handle) => handle.address(pid)?,
            None => {
                let outbox = self.reach().outbox()?;
                let token = outbox.token(pid)?;
                Address::hosted(pid, token, outbox)
            }
        };
        Some(to.with_sender(self.pid()))
    }

    fn spawn_address(
        &self,
        child: P,
        method: &str,
        input: P::Input,
    ) -> Result<Address<P>, SubmitError<P>> {
        let Some(handle) = handle_of(self) else {
            // Another host: its spawn, and an address through its outbox.
            let Some(outbox) = self.reach().outbox() else {
                return Err(SubmitError::Stopping(child));
            };
            let pid = self.reach().spawn(child, method, input)?;
            // Live: spawned on this thread just now. (A child that ended in
            // its `init` was refused by the spawn.)
            let token = outbox.token(pid).unwrap_or(u64::MAX);
            return Ok(Address::hosted(pid, token, outbox).with_sender(self.pid()));
        };
        let pid = handle.allocate_pid();
        let join = handle.submit(pid, child, method, input)?;
        Ok(join.address().with_sender(self.pid()))
    }

    fn begin_shutdown(&self, deadline: Duration) -> Option<Shutdown> {
        Some(handle_of(self)?.begin_shutdown(deadline))
    }

    fn now(&self) -> Duration {
        match host_time(self) {
            Some((state, now, _)) => now(&**state, self.pid()),
            None => epoch().elapsed(),
        }
    }

    fn after(&self, delay: Duration, message: P::Message) -> Result<(), SendError<P::Message>> {
        let pid = self.pid();
        let refused = |message| Package::new(pid, "", message).with_sender(pid);
        if let Some((state, _, after)) = host_time(self) {
            return after(&**state, pid, delay, Box::new(message)).map_err(|back| match back
                .downcast::<P::Message>(
            ) {
                Ok(message) => SendError::Closed(refused(*message)),
                Err(_) => unreachable!("the host hands back the message it was given"),
            });
        }
        let Some(to) = handle_of(self).and_then(|h| h.address(pid)) else {
            return Err(SendError::UnknownPid(refused(message)));
        };
        let to = to.with_sender(pid);
        let at = Instant::now() + delay;
        let job: Box<dyn FnOnce() + Send> = Box::new(move || {
            let _ = to.send(message);
        });
        // The thread never ends, so the channel never closes.
        let _ = timers().send((at, job));
        Ok(())
    }
}
