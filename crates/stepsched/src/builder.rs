//! [`Builder`]: the configuration of a scheduler, and its start.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::sync::OnceLock;

use stepsched_pool::{Pool, WorkerContext};
use stepsched_process::{Error, Process};
use stepsched_relay::{Pid, PidAllocator, RoutingTable};

use crate::SchedProcess;
use crate::handle::{Handle, Shared};
use crate::handler::Handler;
use crate::primitive::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use crate::primitive::sync::{Arc, Condvar, Mutex};
use crate::scheduler::Scheduler;
use crate::slot::{CompleteHook, Core, Counters, StartHook, Task};
use crate::step::Handlers;
use crossbeam_utils::CachePadded;

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
    /// #     type Input = (); type Payload = (); type Command = String; type Output = ();
    /// #     fn init(&mut self, _: &Context, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
    /// #     fn step(&mut self, _: Events<'_, ()>, out: &mut StepOutput<String, ()>) -> Result<(), Error> {
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

    /// Registers the handler for commands named `name` (see [`Command`](crate::Command)).
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
        let handlers = Handlers::new(self.handlers);
        let core = Arc::new(Core {
            pool: OnceLock::new(),
            routes: RoutingTable::new(),
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
            .build(move |task: Task<P>, ctx: &WorkerContext<Task<P>>| {
                // Each slot carries its core, so the pool holds no cycle
                // back to the scheduler.
                let core = task.0.core.clone();
                core.run(&handlers, task, ctx);
            })?;
        if core.pool.set(pool).is_err() {
            unreachable!("the pool is set once");
        }
        Ok(Scheduler::new(Handle {
            core,
            shared: Arc::new(Shared::new()),
        }))
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
