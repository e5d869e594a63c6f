//! [`Sim`], the simulator's public face, and the [`Reach`] its processes
//! get through their contexts.

use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use stepsched_process::{
    Command, Error, Package, Pid, Process, Reach, SendError, SubmitError, TerminateError,
};

use crate::join::JoinHandle;
use crate::net::Side;
use crate::state::{Outcome, Shared, close, quietly_drop};
use crate::{Builder, DurableStore, Report, ShutdownReport, SimRng, Unfinished};
#[cfg(doc)]
use crate::{Faults, Network, SimContextExt};
#[cfg(doc)]
use stepsched_process::CancelToken;

use crate::time::{self, HostTime};

/// The [`Reach`] handed to the contexts of steps and inits: the
/// simulator, and its [`HostTime`] (what `as_any` answers).
pub(crate) struct ReachOf<P: Process> {
    shared: Rc<Shared<P>>,
    pub(crate) host: HostTime,
}

impl<P: Process + 'static> ReachOf<P>
where
    P::Command: Command,
{
    pub(crate) fn new(shared: &Rc<Shared<P>>) -> Self {
        ReachOf {
            shared: Rc::clone(shared),
            host: time::host_time(shared),
        }
    }
}

impl<P: Process + 'static> Reach<P> for ReachOf<P>
where
    P::Command: Command,
{
    fn send(&self, package: Package<P::Message>) -> Result<(), SendError<P::Message>> {
        // What this step sent through addresses before goes first.
        self.shared.deliver_posted();
        self.shared.deliver(package)
    }

    fn spawn(&self, child: P, method: &str, input: P::Input) -> Result<Pid, SubmitError<P>> {
        self.shared.spawn(child, method, input)
    }

    fn terminate(&self, pid: Pid) -> Result<(), TerminateError> {
        self.shared.terminate(pid, "requested")
    }

    /// The simulator behind a context, as a [`HostTime`]: the clock and
    /// timers of `stepsched`'s `ContextExt::now` and `ContextExt::after`,
    /// and (its state) what [`SimContextExt`](crate::SimContextExt) reaches.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(&self.host)
    }

    /// The simulator's outbox: `stepsched`'s `ContextExt::address` and
    /// `spawn_address` send through it (see `outbox.rs`).
    fn outbox(&self) -> Option<std::sync::Arc<dyn stepsched_process::Outbox<P::Message>>>
    where
        P::Message: Send,
    {
        Some(self.shared.outbox())
    }
}

/// A deterministic simulator of processes of type `P`; see the crate
/// documentation.
///
/// A `Sim` is single-threaded (it is neither `Send` nor `Sync`), and so
/// are its handlers: they need not be `Send`.
pub struct Sim<P: Process> {
    pub(crate) shared: Rc<Shared<P>>,
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

    /// A random source for the test itself (its inputs, its choices),
    /// seeded from this simulator's seed and `name`: the same for the same
    /// seed and name, independent of every stream the simulator draws
    /// from, so drawing from it changes nothing in the run.
    ///
    /// ```
    /// # use stepsched_process::{Context, Error, Events, Process, StepOutput};
    /// # struct Nothing;
    /// # impl Process for Nothing {
    /// #     type Input = (); type Message = (); type Response = (); type Command = &'static str; type Output = ();
    /// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    /// #     fn step(&mut self, _: &mut Context<'_, Self>, _: Events<'_, ()>, _: &mut StepOutput<&'static str, ()>) -> Result<(), Error> { Ok(()) }
    /// # }
    /// use stepsched_sim::Sim;
    ///
    /// let sim = Sim::<Nothing>::builder().seed(9).build();
    /// let sizes: Vec<u64> = (0..3).map({
    ///     let mut rng = sim.rng("sizes");
    ///     move |_| rng.below(100)
    /// }).collect();
    /// assert_eq!(sim.rng("sizes").below(100), sizes[0]);
    /// ```
    #[must_use]
    pub fn rng(&self, name: &str) -> SimRng {
        SimRng::stream(self.shared.seed, &format!("user:{name}"))
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

    /// Starts the process named `name` under `pid`: made by the factory
    /// registered under `name` ([`Builder::factory`]), then initialized
    /// with `method` and `input`, as [`submit`](Self::submit) does. A
    /// named process can crash ([`Faults::crash`], [`crash`](Self::crash))
    /// and is then restarted, after a virtual delay, as a new process
    /// from the same factory, initialized with the same method and a
    /// clone of `input`. Its restart:
    ///
    /// - keeps its **PID**: other processes reach the restarted one at the
    ///   same address. While it is down, messages sent to it are accepted
    ///   and dropped (`dropped m<0.1> (down)` in the trace), as a crashed
    ///   node loses what reaches it; its queued events, pending
    ///   completions and timers are lost with it;
    /// - keeps its **join handle**: a crash publishes no result, and the
    ///   handle (this one) gets the result of the incarnation that ends;
    /// - keeps its **durable store** ([`DurableStore`], reached from a step
    ///   or `init` through [`SimContextExt::with_store`]): what it synced
    ///   survives, its unsynced writes do not.
    ///
    /// Its name is also what [`Faults::only_process`] aims at. A
    /// restart writes `restart <name>` to the trace.
    ///
    /// ```
    /// # use stepsched_process::{Context, Error, Event, Events, Process, Status, StepOutput};
    /// use std::time::Duration;
    /// use stepsched_sim::{Sim, SimContextExt};
    ///
    /// /// Counts its starts in its durable store; done at the third.
    /// struct Starts;
    /// impl Process for Starts {
    /// #   type Input = (); type Message = (); type Response = (); type Command = &'static str; type Output = u8;
    ///     fn init(&mut self, cx: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> {
    ///         cx.with_store(|store| {
    ///             let n = store.get("starts").map_or(0, |v| v[0]);
    ///             store.write("starts", vec![n + 1]);
    ///             store.sync();
    ///         });
    ///         Ok(())
    ///     }
    ///     fn step(&mut self, cx: &mut Context<'_, Self>, _: Events<'_, ()>, out: &mut StepOutput<&'static str, u8>) -> Result<(), Error> {
    ///         let n = cx.with_store(|store| store.get("starts").unwrap()[0]).unwrap();
    ///         out.set_status(if n == 3 { Status::Done(n) } else { Status::Idle });
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let sim = Sim::<Starts>::builder().factory("starts", || Ok(Starts)).build();
    /// let pid = sim.allocate_pid();
    /// let join = sim.submit_named(pid, "starts", "main", ()).unwrap();
    /// for _ in 0..2 {
    ///     sim.run();
    ///     assert!(sim.crash(pid, Duration::from_millis(5)));
    /// }
    /// assert_eq!(join.join(), Ok(3));
    /// assert_eq!(sim.now(), Duration::from_millis(10));
    /// assert!(sim.trace_text().contains("<0.1> restart starts\n"));
    /// ```
    ///
    /// # Errors
    ///
    /// As [`submit`](Self::submit)'s, and [`SubmitError::Init`] with
    /// [`Error::UnknownFactory`] if no factory has that name (or with
    /// the factory's error).
    pub fn submit_named(
        &self,
        pid: Pid,
        name: &str,
        method: &str,
        input: P::Input,
    ) -> Result<JoinHandle<P>, SubmitError<P>>
    where
        P::Input: Clone + 'static,
    {
        let input: Box<dyn Fn() -> P::Input> = Box::new(move || input.clone());
        let cell = self.shared.submit_named(pid, name, method, input)?;
        Ok(JoinHandle::new(Rc::downgrade(&self.shared), pid, cell))
    }

    /// Crashes named process `pid` now ([`submit_named`](Self::submit_named))
    /// and restarts it after `restart_after` of virtual time, as the
    /// [`Faults::crash`] fault does (`crash (requested) lost=1 restart
    /// t=5000us` in the trace). Whether it crashed: not if it is not
    /// live, not named, or being stepped.
    pub fn crash(&self, pid: Pid, restart_after: Duration) -> bool {
        self.shared.crash(pid, None, Some(restart_after))
    }

    /// A copy of the durable store of the processes named `name`, as it
    /// is now (with its unsynced writes; [`DurableStore::durable`] is what
    /// a crash would leave); `None` if no process was started under that
    /// name, or if a step has it out now.
    #[must_use]
    pub fn store(&self, name: &str) -> Option<DurableStore> {
        self.shared.inner.borrow().stores.get(name)?.clone()
    }

    /// Heals every fault from now on: the probabilities of [`Faults`] go
    /// to zero (clock skew and drift stay, as drawn), and so do the
    /// [`Network`]'s loss, duplication and random partitions (its delay
    /// stays); every partition, random or scripted, ends now; every
    /// crashed process restarts now. Writes `heal` to the trace. A
    /// liveness check ([`check_liveness`](Self::check_liveness)) heals at
    /// its time.
    pub fn heal(&self) {
        self.shared.heal();
    }

    /// A liveness check: runs until virtual time `heal_at` (with the
    /// faults), [heals](Self::heal) every fault, then runs until every
    /// process of `pids` has ended, or until `within` of virtual time
    /// after the heal. A system that only makes progress when nothing
    /// fails must finish then; one that cannot recover from what the
    /// faults did (a request lost for good, a process waiting for a reply
    /// that never comes) is reported, not left to hang: the run stops at
    /// the deadline, or earlier when nothing can happen any more (a
    /// process that always continues is stopped by the step limit,
    /// [`Builder::max_steps`]).
    ///
    /// `pids` are the processes that must finish: the clients, say (a
    /// server that waits for requests forever may stay live).
    ///
    /// ```
    /// # use stepsched_process::{Context, Error, Event, Events, Process, Status, StepOutput};
    /// use std::time::Duration;
    /// use stepsched_sim::Sim;
    ///
    /// /// Waits for one message.
    /// struct Waits;
    /// impl Process for Waits {
    /// #   type Input = (); type Message = (); type Response = (); type Command = &'static str; type Output = ();
    /// #   fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    ///     fn step(&mut self, _: &mut Context<'_, Self>, events: Events<'_, ()>, out: &mut StepOutput<&'static str, ()>) -> Result<(), Error> {
    ///         let got = events.into_iter().any(|e| e.into_message().is_some());
    ///         out.set_status(if got { Status::Done(()) } else { Status::Idle });
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let sim = Sim::<Waits>::builder().build();
    /// let pid = sim.allocate_pid();
    /// sim.submit(pid, Waits, "main", ()).unwrap();
    /// let ms = Duration::from_millis;
    /// let unfinished = sim.check_liveness(ms(10), ms(100), &[pid]).unwrap_err();
    /// assert_eq!(unfinished.pids, vec![(pid, None)]);
    /// assert!(unfinished.to_string().contains("did not finish by t=110000us"));
    /// ```
    ///
    /// # Errors
    ///
    /// [`Unfinished`]: the processes of `pids` still live at the end.
    ///
    /// # Panics
    ///
    /// If called from inside a step or a handler.
    pub fn check_liveness(
        &self,
        heal_at: Duration,
        within: Duration,
        pids: &[Pid],
    ) -> Result<Report, Unfinished> {
        self.shared.check_liveness(heal_at, within, pids)
    }

    /// Sends `message` to process `pid`, from outside any process (its
    /// step sees `from: None`). With a [`Network`] on, the message goes
    /// over the link from the host (`host-><pid>` in the trace): it may
    /// be delayed, lost or duplicated like any other.
    ///
    /// # Errors
    ///
    /// The message is handed back: [`SendError::Closed`] if `pid` was
    /// allocated here or ran here and is not live (it completed or was
    /// terminated), [`SendError::UnknownPid`] otherwise.
    pub fn send(&self, pid: Pid, message: P::Message) -> Result<(), SendError<P::Message>> {
        self.shared.deliver(Package::new(pid, "", message))
    }

    /// Cuts every link between the processes of `a` and those of `b`, both
    /// ways, from virtual time `from` until `until` (then it heals): a
    /// message sent across while the cut lasts is dropped, and so is one
    /// that arrives while it lasts (in flight when it began). Works with
    /// or without a [`Network`] ([`Builder::network`]); writes a trace
    /// line (`net partition <0.1>,<0.2> | <0.3> from t=5000us heal
    /// t=9000us`), and one per message it drops (`net drop <0.1>-><0.3>
    /// #2 (partition)`).
    ///
    /// ```
    /// # use stepsched_process::{Context, Error, Event, Events, Process, Status, StepOutput};
    /// use std::time::Duration;
    /// use stepsched_sim::Sim;
    ///
    /// /// Counts the messages it gets; done at the cancel of a shutdown.
    /// struct Sink(u32);
    /// impl Process for Sink {
    /// #   type Input = (); type Message = u8; type Response = (); type Command = &'static str; type Output = u32;
    /// #   fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    ///     fn step(&mut self, _: &mut Context<'_, Self>, events: Events<'_, u8, ()>, out: &mut StepOutput<&'static str, u32>) -> Result<(), Error> {
    ///         for event in events {
    ///             match event {
    ///                 Event::Cancel => { out.set_status(Status::Done(self.0)); return Ok(()); }
    ///                 _ => self.0 += 1,
    ///             }
    ///         }
    ///         out.set_status(Status::Idle);
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let sim = Sim::<Sink>::builder().build();
    /// let pid = sim.allocate_pid();
    /// let join = sim.submit(pid, Sink(0), "main", ()).unwrap();
    /// // The test (the host) is cut off from the sink for the first second.
    /// sim.isolate(&[pid], Duration::ZERO, Duration::from_secs(1));
    /// sim.send(pid, 1).unwrap(); // dropped
    /// sim.run();
    /// assert!(sim.trace_text().contains("net drop host-><0.1> #1 (partition)"));
    /// sim.shutdown(Duration::from_secs(1));
    /// assert_eq!(join.join(), Ok(0));
    /// ```
    pub fn partition(&self, a: &[Pid], b: &[Pid], from: Duration, until: Duration) {
        self.shared
            .add_cut(a.to_vec(), Side::Pids(b.to_vec()), from, until);
    }

    /// Cuts the processes of `group` off from every other end (every other
    /// process, and the host: the test's [`send`](Self::send)s), both
    /// ways, from `from` until `until`, as [`partition`](Self::partition)
    /// does (its trace line ends its first side with `| rest`). Messages
    /// within the group still flow.
    pub fn isolate(&self, group: &[Pid], from: Duration, until: Duration) {
        self.shared.add_cut(group.to_vec(), Side::Rest, from, until);
    }

    /// Gives the link from `from` to `to` (one direction: call it again
    /// the other way for both) a network of its own: its delay, loss,
    /// duplication, order and random partitions replace those of
    /// [`Builder::network`](crate::Builder::network) on that link, or,
    /// without a network, apply on that link alone. The link keeps its own
    /// random streams, so configuring one link moves no other link's
    /// draws. [`heal`](Self::heal) ends its faults (its delay stays).
    ///
    /// ```
    /// # use stepsched_process::{Context, Error, Events, Process, Status, StepOutput};
    /// use std::time::Duration;
    /// use stepsched_sim::{Network, Sim};
    ///
    /// /// Counts the messages it gets until told to stop (by a 0).
    /// struct Sink(u32);
    /// impl Process for Sink {
    /// #   type Input = (); type Message = u32; type Response = (); type Command = &'static str; type Output = u32;
    /// #   fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    ///     fn step(&mut self, _: &mut Context<'_, Self>, events: Events<'_, u32, ()>, out: &mut StepOutput<&'static str, u32>) -> Result<(), Error> {
    ///         for n in events.into_iter().filter_map(|e| e.into_message()) {
    ///             if n == 0 {
    ///                 out.set_status(Status::Done(self.0));
    ///                 return Ok(());
    ///             }
    ///             self.0 += 1;
    ///         }
    ///         out.set_status(Status::Idle);
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let sim = Sim::<Sink>::builder().trace(true).build();
    /// let (a, b) = (sim.allocate_pid(), sim.allocate_pid());
    /// let join = sim.submit(b, Sink(0), "main", ()).unwrap();
    /// sim.submit(a, Sink(0), "main", ()).unwrap();
    /// // One slow link; the rest of the simulator has no network.
    /// let ms = Duration::from_millis(1);
    /// sim.link(a, b, Network::new().delay(10 * ms, 10 * ms));
    /// sim.send(b, 1).unwrap(); // from the host: at once
    /// sim.run();
    /// assert!(!sim.trace_text().contains("net delay host"));
    /// # sim.send(b, 0).unwrap();
    /// # assert_eq!(join.join(), Ok(1));
    /// ```
    pub fn link(&self, from: Pid, to: Pid, network: crate::Network)
    where
        P::Message: Clone,
    {
        self.shared
            .clone_message
            .set(Some(<P::Message as Clone>::clone));
        self.shared
            .inner
            .borrow_mut()
            .net
            .configure(Some(from), to, network);
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
        let cell = Rc::clone(&self.shared.inner.borrow().results.get(&pid)?.0);
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

    /// The virtual time: zero at build, moved only by timers and message
    /// arrivals (and by
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
        if let Some(outbox) = self.shared.outbox.get() {
            outbox.close();
        }
        let (live, timed, alarms, flights, named) = {
            let mut inner = self.shared.inner.borrow_mut();
            inner.timers.clear();
            inner.restarts.clear();
            (
                std::mem::take(&mut inner.live),
                std::mem::take(&mut inner.timed),
                std::mem::take(&mut inner.alarms),
                inner.net.take_flights(),
                std::mem::take(&mut inner.named),
            )
        };
        for (_, named) in named {
            if named.down {
                *named.result.borrow_mut() = Outcome::Done(Err(Error::Cancelled));
            }
            quietly_drop(named);
        }
        for (_, mut entry) in live {
            entry.cancel.cancel();
            if let Some(process) = entry.process.take() {
                close(process);
            }
            *entry.result.borrow_mut() = Outcome::Done(Err(Error::Cancelled));
            quietly_drop(entry);
        }
        quietly_drop(timed);
        quietly_drop(alarms);
        quietly_drop(flights);
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
        self.shared.spawn(child, method, input)
    }

    fn terminate(&self, pid: Pid) -> Result<(), TerminateError> {
        self.shared.terminate(pid, "requested")
    }
}
