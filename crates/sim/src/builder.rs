//! [`Builder`]: the seed, handlers, factories and faults of a [`Sim`].

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

#[cfg(doc)]
use stepsched_process::Context;
use stepsched_process::{Command, Error, PortableHandler, Process};

#[cfg(doc)]
use crate::Report;
use crate::net::NetState;
use crate::rng::{self, SimRng};
use crate::state::{CloneFn, Inner, Shared};
use crate::{Completer, Faults, Network, Sim};

/// A boxed handler.
pub(crate) type HandlerFn<P> = Box<dyn Fn(<P as Process>::Command, Completer<P>)>;

/// A boxed factory.
pub(crate) type FactoryFn<P> = Box<dyn Fn() -> Result<P, Error>>;

/// Builds a [`Sim`]: its seed, its handlers and factories, its faults.
pub struct Builder<P: Process> {
    seed: u64,
    faults: Faults,
    network: Option<Network>,
    clone_message: Option<CloneFn<P>>,
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
            .field("network", &self.network)
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
            network: None,
            clone_message: None,
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

    /// The seed of the run: every random decision (the order of steps,
    /// each fault, the random sources of processes and handlers) draws
    /// from a stream of its own, seeded from this seed and the decision's
    /// name (see the crate documentation, "Replay").
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

    /// Sends every message through a simulated [`Network`]: a delay per
    /// message, loss, duplication, reordering, random partitions (off by
    /// default: a message is delivered at once). Messages must be
    /// `Clone`, for the duplicates. Scripted partitions
    /// ([`Sim::partition`], [`Sim::isolate`]) need no network: without
    /// one, they drop what is sent across them and deliver the rest at
    /// once.
    #[must_use]
    pub fn network(mut self, network: Network) -> Self
    where
        P::Message: Clone,
    {
        self.network = Some(network);
        self.clone_message = Some(<P::Message as Clone>::clone);
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
    ///
    /// A handler written once for this simulator and the `stepsched`
    /// scheduler is a [`PortableHandler`]: see
    /// [`portable_handler`](Self::portable_handler).
    #[must_use]
    pub fn handler<F>(mut self, name: impl Into<String>, handler: F) -> Self
    where
        F: Fn(P::Command, Completer<P>) + 'static,
    {
        self.handlers.insert(name.into(), Box::new(handler));
        self
    }

    /// Registers a [`PortableHandler`] for commands named `name`: a handler
    /// written once, generic over the completer
    /// ([`Complete`](crate::Complete)), that the `stepsched` scheduler's
    /// `Builder::portable_handler` takes too, so what is tested here is
    /// the handler that runs there. It is called with this simulator's
    /// [`Completer`], with the faults of a dispatch as any handler is. A
    /// later registration under the same name replaces an earlier one.
    ///
    /// It is [`handler`](Self::handler)`(name, `[`portable`](crate::portable)`(handler))`.
    ///
    /// ```
    /// use std::rc::Rc;
    /// use stepsched_process::{Context, Error, Events, Process, Status, StepOutput};
    /// use stepsched_sim::{Complete, PortableHandler, Sim};
    ///
    /// /// Yields "square" and "cube", finishes with the sum of the answers.
    /// #[derive(Default)]
    /// struct Asker {
    ///     asked: bool,
    ///     answers: usize,
    ///     sum: u64,
    /// }
    /// impl Process for Asker {
    ///     type Input = ();
    ///     type Message = ();
    ///     type Response = u64;
    ///     type Command = &'static str;
    ///     type Output = u64;
    ///     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> {
    ///         Ok(())
    ///     }
    ///     fn step(
    ///         &mut self,
    ///         _: &mut Context<'_, Self>,
    ///         events: Events<'_, (), u64>,
    ///         out: &mut StepOutput<&'static str, u64>,
    ///     ) -> Result<(), Error> {
    ///         for result in events.filter_map(|e| e.into_result()) {
    ///             self.sum += result?;
    ///             self.answers += 1;
    ///         }
    ///         if !self.asked {
    ///             self.asked = true;
    ///             out.push_yield(2, "square");
    ///             out.push_yield(3, "cube");
    ///         }
    ///         out.set_status(if self.answers == 2 { Status::Done(self.sum) } else { Status::Yield });
    ///         Ok(())
    ///     }
    /// }
    ///
    /// /// Raises 3 to the power the yield's tag says: one value for both
    /// /// names (and for the scheduler too).
    /// struct Power;
    /// impl PortableHandler<Asker> for Power {
    ///     fn handle<C: Complete<Asker>>(&self, _: &'static str, done: C) {
    ///         let exponent = u32::try_from(done.tag()).unwrap();
    ///         done.complete(Ok(3u64.pow(exponent)));
    ///     }
    /// }
    ///
    /// let power = Rc::new(Power);
    /// let sim = Sim::<Asker>::builder()
    ///     .portable_handler("square", Rc::clone(&power))
    ///     .portable_handler("cube", power)
    ///     .build();
    /// let join = sim.submit(sim.allocate_pid(), Asker::default(), "main", ()).unwrap();
    /// assert_eq!(join.join(), Ok(9 + 27));
    /// ```
    #[must_use]
    pub fn portable_handler<H>(self, name: impl Into<String>, handler: H) -> Self
    where
        H: PortableHandler<P> + 'static,
    {
        self.handler(name, move |command, done: Completer<P>| {
            handler.handle(command, done);
        })
    }

    /// Registers a factory of processes under `name`, for a step's
    /// [`Context::upgrade_from`]: the upgraded process is what it returns
    /// (or the process ends with its error, or with [`Error::Panicked`] if
    /// it panics), as with the scheduler's `Builder::factory`. The same
    /// factory starts the process named `name` ([`Sim::submit_named`]),
    /// and restarts it after each crash.
    #[must_use]
    pub fn factory<F>(mut self, name: impl Into<String>, factory: F) -> Self
    where
        F: Fn() -> Result<P, Error> + 'static,
    {
        self.factories.insert(name.into(), Box::new(factory));
        self
    }

    /// Builds the simulator, at virtual time zero. With swarm testing
    /// ([`Faults::swarm`]), the faults kept for this seed are drawn now,
    /// and the trace's first line says which.
    #[must_use]
    pub fn build(self) -> Sim<P> {
        let mut network = self.network;
        let (faults, swarm) = self.faults.swarm_with(self.seed, network.as_mut());
        let mut trace = String::new();
        if self.trace && !swarm.is_empty() {
            trace.push_str(&swarm);
            trace.push('\n');
        }
        Sim {
            shared: Rc::new(Shared {
                seed: self.seed,
                faults: Cell::new(faults),
                network: Cell::new(network),
                clone_message: Cell::new(self.clone_message),
                max_steps: self.max_steps,
                tracing: self.trace,
                handlers: self.handlers,
                factories: self.factories,
                driving: Cell::new(false),
                outbox: std::cell::OnceCell::new(),
                inner: RefCell::new(Inner {
                    terminate_rng: SimRng::stream(self.seed, rng::TERMINATE),
                    shutdown_rng: SimRng::stream(self.seed, rng::SHUTDOWN),
                    clock: 0,
                    now: Duration::ZERO,
                    timer_seq: 0,
                    completion_seq: 0,
                    next_number: 1,
                    next_serial: 0,
                    live: BTreeMap::new(),
                    ready: BinaryHeap::new(),
                    current: None,
                    timers: BinaryHeap::new(),
                    timed: HashMap::new(),
                    alarms: HashMap::new(),
                    alarm_count: 0,
                    results: BTreeMap::new(),
                    initializing: Vec::new(),
                    trace,
                    line: String::new(),
                    steps: 0,
                    batch: Vec::new(),
                    shutdown: None,
                    net: NetState::default(),
                    named: BTreeMap::new(),
                    stores: BTreeMap::new(),
                    restarts: HashMap::new(),
                }),
            }),
        }
    }
}
