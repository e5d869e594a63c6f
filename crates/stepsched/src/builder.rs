//! [`Builder`]: the configuration of a scheduler, and its start.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::mem::ManuallyDrop;
use std::sync::OnceLock;

use stepsched_pool::{Pool, WorkerContext};
use stepsched_process::{Error, Pid, Process};
use stepsched_relay::{PidAllocator, RouteBuildHasher, RoutingTable};

use crate::SchedProcess;
use crate::handle::Handle;
use crate::handler::{Completer, Handler, Variant};
use crate::primitive::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use crate::primitive::sync::{Arc, Condvar, Mutex};
use crate::scheduler::Scheduler;
use crate::shutdown::Shared;
use crate::slot::{Batches, CompleteHook, Core, Counters, ShutdownHook, StartHook, Task};
use crate::step::{Factory, Handlers};
use crossbeam_utils::CachePadded;
use stepsched_process::PortableHandler;

/// Builds a [`Scheduler`].
///
/// ```
/// use stepsched::{Builder, Completer, Context, Error, Events, Process, Status, StepOutput};
///
/// struct Noop;
/// impl Process for Noop {
///     type Input = ();
///     type Message = ();
///     type Response = ();
///     type Command = String;
///     type Output = ();
///     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> {
///         Ok(())
///     }
///     fn step(&mut self, _cx: &mut Context<'_, Self>, _: Events<'_, ()>, out: &mut StepOutput<String, ()>) -> Result<(), Error> {
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
    factories: HashMap<String, Factory<P>>,
    on_start: Option<StartHook>,
    on_complete: Option<CompleteHook<P::Output>>,
    on_shutdown: Vec<ShutdownHook>,
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
            factories: HashMap::new(),
            on_start: None,
            on_complete: None,
            on_shutdown: Vec::new(),
            thread_name: "stepsched-worker".into(),
        }
    }

    /// The number of worker threads. 0, like not calling this, means the
    /// default: one per available core
    /// ([`available_parallelism`](std::thread::available_parallelism), or
    /// 1 if unknown). The pool's [`Builder`](stepsched_pool::Builder)
    /// follows the same rule.
    ///
    /// ```
    /// # use stepsched::{Builder, Context, Error, Events, Process, Status, StepOutput};
    /// # struct Noop;
    /// # impl Process for Noop {
    /// #     type Input = (); type Message = (); type Response = (); type Command = String; type Output = ();
    /// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    /// #     fn step(&mut self, _cx: &mut Context<'_, Self>, _: Events<'_, ()>, out: &mut StepOutput<String, ()>) -> Result<(), Error> {
    /// #         out.set_status(Status::Done(()));
    /// #         Ok(())
    /// #     }
    /// # }
    /// let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    /// let scheduler = Builder::<Noop>::new().workers(0).build().unwrap();
    /// assert_eq!(scheduler.workers(), cores);
    /// ```
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = (workers != 0).then_some(workers);
        self
    }

    /// The most processes alive at once; `submit` beyond it fails with
    /// [`SubmitError::LimitReached`](crate::SubmitError::LimitReached).
    /// The limit is exact under concurrent submits.
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

    /// Registers the handler for commands named `name` (see
    /// [`Command`](crate::Command)): a closure that gets the command and the
    /// [`Completer`] of its yield. Its argument types are inferred. A later
    /// registration under the same name replaces an earlier one.
    ///
    /// A command no handler is registered for completes its yield with
    /// [`Error::Failed`] (`unknown command `name``).
    ///
    /// A handler written once for this scheduler and the `stepsched-sim`
    /// simulator is a [`PortableHandler`]: see
    /// [`portable_handler`](Self::portable_handler).
    pub fn handler<F>(mut self, name: impl Into<String>, handler: F) -> Self
    where
        F: Fn(P::Command, Completer<P>) + Send + Sync + 'static,
    {
        self.handlers.insert(name.into(), Arc::new(handler));
        self
    }

    /// Registers a [`PortableHandler`] for commands named `name`: a handler
    /// written once, generic over the completer
    /// ([`Complete`](crate::Complete)), that the `stepsched-sim` simulator's
    /// `Builder::portable_handler` takes too, so a test under the
    /// simulator tests the handler that runs here. A later registration
    /// under the same name replaces an earlier one.
    ///
    /// It costs what a closure registered with [`handler`](Self::handler)
    /// costs: the handler is called with this scheduler's [`Completer`],
    /// statically, with no allocation or dynamic dispatch of its own. It
    /// is [`handler`](Self::handler)`(name, `[`portable`](crate::portable)`(handler))`.
    ///
    /// ```
    /// use stepsched::{
    ///     Builder, Command, Complete, Context, Error, Events, PortableHandler, Process, Status,
    ///     StepOutput,
    /// };
    ///
    /// /// Asks for the square of a number.
    /// struct Square(u64);
    /// impl Command for Square {
    ///     fn name(&self) -> &str {
    ///         "square"
    ///     }
    /// }
    ///
    /// /// Yields a square of 6, finishes with the answer.
    /// struct Asker;
    /// impl Process for Asker {
    ///     type Input = ();
    ///     type Message = ();
    ///     type Response = u64;
    ///     type Command = Square;
    ///     type Output = u64;
    ///     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> {
    ///         Ok(())
    ///     }
    ///     fn step(
    ///         &mut self,
    ///         _: &mut Context<'_, Self>,
    ///         events: Events<'_, (), u64>,
    ///         out: &mut StepOutput<Square, u64>,
    ///     ) -> Result<(), Error> {
    ///         match events.filter_map(|e| e.into_result()).next() {
    ///             Some(result) => out.set_status(Status::Done(result?)),
    ///             None => {
    ///                 out.push_yield(1, Square(6));
    ///                 out.set_status(Status::Yield);
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// /// Written once: the same value serves the simulator.
    /// struct Squarer;
    /// impl PortableHandler<Asker> for Squarer {
    ///     fn handle<C: Complete<Asker>>(&self, Square(n): Square, done: C) {
    ///         done.complete(Ok(n * n));
    ///     }
    /// }
    ///
    /// let scheduler = Builder::<Asker>::new()
    ///     .workers(1)
    ///     .portable_handler("square", Squarer)
    ///     .build()
    ///     .unwrap();
    /// let join = scheduler.submit(scheduler.allocate_pid(), Asker, "run", ()).unwrap();
    /// assert_eq!(join.join(), Ok(36));
    /// ```
    pub fn portable_handler<H>(self, name: impl Into<String>, handler: H) -> Self
    where
        H: PortableHandler<P> + Send + Sync + 'static,
    {
        self.handler(name, move |command, done: Completer<P>| {
            handler.handle(command, done);
        })
    }

    /// Registers the handler for one variant of the command type, named
    /// [`V::NAME`](Variant::NAME): it gets the variant's data, not the
    /// whole command, so it needs no second `match`. Name the variant's
    /// type on the closure's first argument. See
    /// [`commands!`](crate::commands) for declaring such a command type.
    ///
    /// ```
    /// use stepsched::{Builder, Context, Error, Events, Process, Status, StepOutput};
    ///
    /// pub struct Add(i64, i64);
    /// pub struct Neg(i64);
    /// stepsched::commands! {
    ///     pub enum Math { Add(Add) = "add", Neg(Neg) = "neg" }
    /// }
    ///
    /// #[derive(Default)]
    /// struct Calc {
    ///     asked: bool,
    ///     answers: Vec<i64>,
    /// }
    ///
    /// impl Process for Calc {
    ///     type Input = ();
    ///     type Message = ();
    ///     type Response = i64;
    ///     type Command = Math;
    ///     type Output = i64;
    ///
    ///     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> {
    ///         Ok(())
    ///     }
    ///
    ///     fn step(
    ///         &mut self,
    ///         _: &mut Context<'_, Self>,
    ///         events: Events<'_, (), i64>,
    ///         out: &mut StepOutput<Math, i64>,
    ///     ) -> Result<(), Error> {
    ///         for result in events.filter_map(|e| e.into_result()) {
    ///             self.answers.push(result?);
    ///         }
    ///         if !self.asked {
    ///             self.asked = true;
    ///             out.push_yield(1, Add(20, 1).into());
    ///             out.push_yield(2, Neg(-21).into());
    ///         }
    ///         out.set_status(if self.answers.len() == 2 {
    ///             Status::Done(self.answers.iter().sum())
    ///         } else {
    ///             Status::Yield
    ///         });
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Builder::<Calc>::new()
    ///     .workers(1)
    ///     .on(|add: Add, done| {
    ///         done.complete(Ok(add.0 + add.1));
    ///     })
    ///     .on(|neg: Neg, done| {
    ///         done.complete(Ok(-neg.0));
    ///     })
    ///     .build()
    ///     .unwrap();
    /// let join = scheduler.submit(scheduler.allocate_pid(), Calc::default(), "run", ()).unwrap();
    /// assert_eq!(join.join(), Ok(42));
    /// ```
    pub fn on<V, F>(mut self, handler: F) -> Self
    where
        V: Variant<P::Command> + 'static,
        F: Fn(V, Completer<P>) + Send + Sync + 'static,
    {
        let serve = move |command: P::Command, done: Completer<P>| match V::from_command(command) {
            Ok(variant) => handler(variant, done),
            // Only a command whose name is `V::NAME` reaches this handler;
            // a `Command` impl that disagrees with the `Variant` impl ends
            // here.
            Err(_) => {
                let message = format!(
                    "a command named `{}` is not the variant its handler takes",
                    V::NAME
                );
                done.complete(Err(Error::Failed(message)));
            }
        };
        self.handlers.insert(V::NAME.to_owned(), Arc::new(serve));
        self
    }

    /// Registers a factory of processes under `name`, for a step's
    /// [`Context::upgrade_from`](crate::Context::upgrade_from): the
    /// upgraded process is what it returns (or the process ends with its
    /// error, or with [`Error::Panicked`] if it panics).
    pub fn factory<F>(mut self, name: impl Into<String>, factory: F) -> Self
    where
        F: Fn() -> Result<P, Error> + Send + Sync + 'static,
    {
        self.factories.insert(name.into(), Box::new(factory));
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

    /// A hook run once, when the scheduler has shut down: every process
    /// has ended and its result is published, and the workers have been
    /// asked to stop (and joined, unless one is stuck in a step). It runs
    /// on the thread that ran the shutdown ([`Scheduler::shutdown`]'s
    /// caller, the thread of
    /// [`Handle::begin_shutdown`](crate::Handle::begin_shutdown), or the
    /// scheduler's drop), outside every lock. Hooks run in the order they
    /// were added.
    ///
    /// What handlers hold beyond the processes — a timer thread, a
    /// connection pool — is released here rather than when the last
    /// handle drops.
    ///
    /// ```
    /// # use stepsched::{Context, Error, Events, Process, Status, StepOutput};
    /// # struct Nop;
    /// # impl Process for Nop {
    /// #     type Input = (); type Message = (); type Response = (); type Command = String; type Output = ();
    /// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    /// #     fn step(&mut self, _cx: &mut Context<'_, Self>, _: Events<'_, ()>, out: &mut StepOutput<String, ()>) -> Result<(), Error> {
    /// #         out.set_status(Status::Done(()));
    /// #         Ok(())
    /// #     }
    /// # }
    /// use std::sync::mpsc::channel;
    /// use std::time::Duration;
    /// use stepsched::Builder;
    ///
    /// let (stopped, rx) = channel();
    /// let s = Builder::<Nop>::new()
    ///     .on_shutdown(move || stopped.send("released").unwrap())
    ///     .build()
    ///     .unwrap();
    /// s.shutdown(Duration::from_secs(1)).unwrap();
    /// assert_eq!(rx.try_recv(), Ok("released"));
    /// ```
    pub fn on_shutdown(mut self, hook: impl FnOnce() + Send + 'static) -> Self {
        self.on_shutdown.push(Box::new(hook));
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
        let handlers = Handlers::new(self.handlers, self.factories);
        let core = Arc::new(Core {
            shared: Arc::new(Shared::new()),
            pool: OnceLock::new(),
            routes: RoutingTable::with_hasher(route_layout(workers)),
            pids: CachePadded::new(PidAllocator::new(self.node)),
            max_processes: self.max_processes,
            live: CachePadded::new(AtomicUsize::new(0)),
            stopping: AtomicBool::new(false),
            forcing: AtomicBool::new(false),
            drained: Mutex::new(()),
            drained_cv: Condvar::new(),
            on_start: self.on_start,
            on_complete: self.on_complete,
            on_shutdown: std::sync::Mutex::new(self.on_shutdown),
            remote: std::sync::RwLock::new(None),
            submitted: CachePadded::new(AtomicU64::new(0)),
            counters: (0..=workers)
                .map(|_| CachePadded::new(Counters::default()))
                .collect(),
            batches: Batches::new(workers),
            limited: self.max_processes != usize::MAX,
        });
        let pool = Pool::builder()
            .workers(workers)
            .thread_name(self.thread_name)
            .build(move |task: Task<P>, ctx: &WorkerContext<Task<P>>| {
                // Each slot carries its core, so the pool holds no cycle
                // back to the scheduler. The handle is what the process's
                // context reaches: the core's `Arc`, borrowed for the run
                // without a reference count (two locked instructions per
                // run on a line every worker shares), never dropped.
                // SAFETY: the core outlives every run. A worker runs items
                // only until its pool's `shutdown_now` returns, and that
                // is called only by a thread holding a reference to the
                // core (`Scheduler::shutdown`, holding the scheduler's, or
                // the stop thread it starts, holding a clone), which it
                // releases only after the call returned; before any
                // shutdown the scheduler holds one (its drop shuts down
                // first). The one `shutdown_now` that cannot join — on a
                // worker, when the stop thread could not be spawned —
                // leaks a reference to the core instead (`stop_pool`), and
                // reports the workers not joined. So the pointer stays valid for the whole run,
                // even once the slot it came from is freed mid-run (its
                // process parked and completed elsewhere).
                let core = unsafe { Arc::from_raw(Arc::as_ptr(&task.0.core)) };
                // This thread's stash of references for the slots it makes
                // and frees (see `lent`).
                crate::lent::enter(&core);
                let handle = ManuallyDrop::new(Handle { core });
                handle.core.run(&handlers, &handle, task, ctx);
            })?;
        if core.pool.set(pool).is_err() {
            unreachable!("the pool is set once");
        }
        Ok(Scheduler::new(Handle { core }))
    }
}

impl<P: SchedProcess> Scheduler<P> {
    /// A builder.
    pub fn builder() -> Builder<P> {
        Builder::new()
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

/// The routing table's layout for `workers` workers (see
/// `stepsched_relay::RouteHasher`): runs of 64 consecutive PIDs per shard
/// while one worker and a submitter share the table, so each keeps a
/// shard's lock in its own cache for 64 operations; runs of 1 beyond, so
/// that the workers removing recent PIDs and the submitter do not all
/// queue on one shard's write lock. Measured on 16 CPUs and on 2 (see
/// `docs/benchmarks.md`, "Sixteen cores, second visit").
fn route_layout(workers: usize) -> RouteBuildHasher {
    if workers <= 2 {
        RouteBuildHasher::default()
    } else {
        RouteBuildHasher::runs_of(1)
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod route_layout_tests {
    use super::route_layout;

    #[test]
    fn runs_of_64_up_to_two_workers_then_runs_of_1() {
        assert_eq!(route_layout(1).run(), 64);
        assert_eq!(route_layout(2).run(), 64);
        assert_eq!(route_layout(3).run(), 1);
        assert_eq!(route_layout(16).run(), 1);
    }
}
