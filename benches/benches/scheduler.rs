//! Benchmarks of the `stepsched` scheduler against tokio's multi-thread
//! runtime, measured in the same run, with 1 and 2 workers, and the memory
//! of an idle process against that of an idle tokio task.
//!
//! * `scheduler_spawn`: the benchmark thread submits 100 000 processes whose
//!   first step returns `Done` (tokio: spawns 100 000 `async` blocks that
//!   return at once) and waits until all have finished.
//! * `scheduler_yields`: 1 000 processes yield 100 times each; a handler
//!   completes every yield at once, on the worker (tokio: 1 000 tasks call
//!   `tokio::task::yield_now().await` 100 times each).
//! * `scheduler_yield_once`: 100 000 processes yield once each, the yield
//!   completed at once by the handler, then finish (tokio: 100 000 tasks
//!   call `yield_now().await` once): the cost of a short-lived process
//!   that waits for one completion.
//! * `scheduler_ping_pong`: two processes exchange 10 000 round trips; each
//!   step answers the message it got to its peer, then returns `Idle`.
//!   Each player resolves its peer's `Address` at its first send and sends
//!   through it (tokio: two tasks on a pair of unbounded
//!   `tokio::sync::mpsc` channels, each holding its peer's sender);
//!   `stepsched-by-pid` sends with `Context::send`, which looks the peer up
//!   in the routing table for every message.
//! * `scheduler_fan_in`: 1 000 idle processes, then the benchmark thread
//!   sends 100 messages to each, round-robin, through each one's `Address`
//!   (kept from its submit, as tokio's side keeps each channel's sender); each
//!   finishes after its 100th (tokio: 1 000 tasks, each receiving from its
//!   own unbounded channel). Creating the receivers is not timed: the timer
//!   starts once all of them have run their first step.
//! * `scheduler_counting`: one process receives 1 000 000 messages that
//!   the benchmark thread sends it through its `Address`, and finishes
//!   after the last (tokio: one task receiving from one unbounded channel);
//!   `stepsched-by-pid` sends the same with `Scheduler::send`, which looks
//!   the PID up in the routing table for every message.
//! * `scheduler_spawn_receive`: the benchmark thread submits 100 000
//!   processes, then sends each one message through its `Address`; each
//!   finishes on it (tokio:
//!   100 000 tasks, each with its own unbounded channel).
//!
//! Both peers see the same completion signal: every process (on our side
//! through the `on_complete` hook) or task counts a shared latch down, and
//! the benchmark thread waits on it; join handles are dropped. Our hook also
//! counts failed processes, and every iteration asserts there were none.
//! Work always arrives from the benchmark thread, outside the workers (ours:
//! the global queue; tokio: the inject queue). The scheduler or runtime is
//! built once per benchmark, outside the timed region, and only one of them
//! exists at a time.
//!
//! Memory: before the benchmarks, the binary creates 100 000 idle processes
//! (each stepped once, now waiting for a message) and 100 000 idle tokio
//! tasks (each parked on the `recv` of its own unbounded channel, the
//! sender kept), and prints the growth of live heap bytes divided by the
//! count, measured by a counting global allocator. Our figure includes the
//! routing-table entry, event queue and result cell of each process;
//! tokio's includes the task and its channel.
//!
//! Run with `cargo bench -p stepsched-benches --bench scheduler`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use stepsched::{
    Address, Completer, Context, Error, Event, Events, Handle, Pid, Process, Scheduler, Status,
    StepOutput,
};
use stepsched_benches::CountingAlloc;
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

/// Processes (tasks) in `scheduler_spawn`.
const SPAWN: usize = 100_000;
/// Processes in `scheduler_yields`.
const YIELDERS: usize = 1_000;
/// Yields per process in `scheduler_yields`.
const YIELDS: u32 = 100;
/// Processes in `scheduler_yield_once`, one yield each.
const YIELD_ONCE: usize = 100_000;
/// Round trips in `scheduler_ping_pong`.
const ROUND_TRIPS: u32 = 10_000;
/// Receivers in `scheduler_fan_in`.
const SINKS: usize = 1_000;
/// Messages per receiver in `scheduler_fan_in`.
const MESSAGES: u32 = 100;
/// Messages one sender sends one receiver in `scheduler_counting`.
const COUNTED: u32 = 1_000_000;
/// Processes (tasks) spawned in `scheduler_spawn_receive`, one message each.
const RECEIVERS: usize = 100_000;
/// Idle processes (tasks) in the memory measurement.
const IDLE: usize = 100_000;
/// Worker counts compared.
const WORKERS: [usize; 2] = [1, 2];

// ---------------------------------------------------------------------------
// Counting allocator (shared with the stress run: `stepsched_benches`)

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

// ---------------------------------------------------------------------------
// The latch both peers count down

/// A countdown: each finished unit counts itself down, the last one wakes
/// the waiter. Also counts failures reported by our completion hook.
struct Latch {
    left: AtomicUsize,
    failed: AtomicUsize,
    lock: Mutex<()>,
    zero: Condvar,
}

impl Latch {
    /// A `'static` latch, so tasks and processes capture a plain reference.
    fn leak() -> &'static Latch {
        Box::leak(Box::new(Latch {
            left: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
            lock: Mutex::new(()),
            zero: Condvar::new(),
        }))
    }

    /// Arms the latch for `n` units; call before submitting them.
    fn arm(&self, n: usize) {
        // Relaxed: published to the workers by the queue push of the first
        // unit submitted after it (a release), which they acquire.
        self.left.store(n, Ordering::Relaxed);
        self.failed.store(0, Ordering::Relaxed);
    }

    fn count_down(&self) {
        // AcqRel: the last unit's decrement acquires every earlier one, and
        // the waiter's Acquire load below acquires it.
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
            self.zero.notify_all();
        }
    }

    fn fail(&self) {
        // Relaxed: read after `wait`, which synchronizes with the decrement
        // that follows this increment on the same thread.
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// Waits until every unit has counted down; panics if one failed.
    fn wait(&self) {
        let mut guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        // Acquire: pairs with the AcqRel decrements. The check runs under
        // the lock the last decrement takes to notify, so no wake-up is lost.
        while self.left.load(Ordering::Acquire) != 0 {
            guard = self.zero.wait(guard).unwrap_or_else(|p| p.into_inner());
        }
        drop(guard);
        assert_eq!(self.failed.load(Ordering::Relaxed), 0, "a process failed");
    }
}

// ---------------------------------------------------------------------------
// Our side: one process type for every workload

/// The benchmark processes; every one has the entry method `run`.
enum Bench {
    /// Finishes at its first step.
    Once,
    /// Yields `left` more times, each completed at once by `now`.
    Yielder { left: u32 },
    /// One end of the ping-pong: answers each message to `peer` and
    /// finishes after `left` more. The `server` sends the first ball at
    /// its first step (then `served` is set) and does not answer the last.
    Player {
        peer: Peer,
        left: u32,
        server: bool,
        served: bool,
    },
    /// Counts `started` down at its first step, then finishes after `left`
    /// more messages.
    Sink {
        left: u32,
        started: Option<&'static Latch>,
    },
}

/// How a ping-pong player reaches its peer.
enum Peer {
    /// By PID, looked up in the routing table at every send
    /// (`Context::send`).
    ByPid(Pid),
    /// Through the peer's `Address`, resolved at the first send (the peer
    /// may be submitted after this player) and kept, as a tokio task keeps
    /// its peer's channel sender.
    Address(Pid, Handle<Bench>, Option<Address<Bench>>),
}

impl Peer {
    fn send(&mut self, ctx: &Context<'_, Bench>, n: u64) -> Result<(), Error> {
        match self {
            Peer::ByPid(pid) => Ok(ctx.send(*pid, n)?),
            Peer::Address(pid, handle, to) => {
                if to.is_none() {
                    *to = handle.address(*pid);
                }
                let to = to
                    .as_ref()
                    .ok_or_else(|| Error::failed("the peer is gone"))?;
                Ok(to.send_from(ctx.pid(), n)?)
            }
        }
    }
}

impl Process for Bench {
    type Input = ();
    type Message = u64;
    type Response = u64;
    type Command = &'static str;
    type Output = u64;

    fn init(&mut self, _: &Context<'_, Self>, method: &str, (): ()) -> Result<(), Error> {
        match method {
            "run" => Ok(()),
            other => Err(Error::UnknownMethod(other.to_owned())),
        }
    }

    fn step(
        &mut self,
        ctx: &mut Context<'_, Self>,
        events: Events<'_, u64>,
        out: &mut StepOutput<&'static str, u64>,
    ) -> Result<(), Error> {
        match self {
            Bench::Once => out.set_status(Status::Done(0)),
            Bench::Yielder { left } => {
                for event in events {
                    match event {
                        Event::Completion { result, .. } => {
                            result?;
                        }
                        Event::Cancel => return Err(Error::Cancelled),
                        Event::Message { .. } => {}
                    }
                }
                if *left == 0 {
                    out.set_status(Status::Done(0));
                } else {
                    *left -= 1;
                    out.push_yield(u64::from(*left), "now");
                    out.set_status(Status::Yield);
                }
            }
            Bench::Player {
                peer,
                left,
                server,
                served,
            } => {
                let mut send = |n: u64| peer.send(ctx, n);
                if *server && !std::mem::replace(served, true) {
                    send(0)?;
                }
                out.set_status(Status::Idle);
                for event in events {
                    match event {
                        Event::Message { data: n, .. } => {
                            *left -= 1;
                            // The server's last message answers its last
                            // ball: nothing more to send.
                            if !*server || *left > 0 {
                                send(n + 1)?;
                            }
                            if *left == 0 {
                                out.set_status(Status::Done(n));
                            }
                        }
                        Event::Cancel => return Err(Error::Cancelled),
                        Event::Completion { .. } => {}
                    }
                }
            }
            Bench::Sink { left, started } => {
                if let Some(latch) = started.take() {
                    latch.count_down();
                }
                out.set_status(Status::Idle);
                for event in events {
                    match event {
                        Event::Message { .. } => {
                            *left -= 1;
                            if *left == 0 {
                                out.set_status(Status::Done(0));
                            }
                        }
                        Event::Cancel => return Err(Error::Cancelled),
                        Event::Completion { .. } => {}
                    }
                }
            }
        }
        Ok(())
    }
}

/// A scheduler with `workers` workers whose completions count `done` down.
fn scheduler(workers: usize, done: &'static Latch) -> Scheduler<Bench> {
    Scheduler::builder()
        .workers(workers)
        .handler("now", |_: &'static str, completer: Completer<Bench>| {
            completer.complete(Ok(0));
        })
        .on_complete(move |_, result| {
            if result.is_err() {
                done.fail();
            }
            done.count_down();
        })
        .build()
        .expect("start the scheduler")
}

fn submit(s: &Scheduler<Bench>, pid: Pid, process: Bench) {
    drop(s.submit(pid, process, "run", ()).expect("submit"));
}

/// Submits and keeps the process's [`Address`], as a tokio sender keeps
/// its channel.
fn submit_addressed(s: &Scheduler<Bench>, pid: Pid, process: Bench) -> Address<Bench> {
    s.submit(pid, process, "run", ()).expect("submit").address()
}

fn runtime(workers: usize) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .build()
        .expect("start the runtime")
}

fn id(peer: &str, workers: usize) -> BenchmarkId {
    BenchmarkId::new(peer, format!("{workers}w"))
}

// ---------------------------------------------------------------------------
// Workloads

fn spawn(c: &mut Criterion) {
    let mut group = c.benchmark_group("scheduler_spawn");
    group.throughput(Throughput::Elements(SPAWN as u64));
    let done = Latch::leak();
    for workers in WORKERS {
        let s = scheduler(workers, done);
        group.bench_function(id("stepsched", workers), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    done.arm(SPAWN);
                    for _ in 0..SPAWN {
                        submit(&s, s.allocate_pid(), Bench::Once);
                    }
                    done.wait();
                }
                start.elapsed()
            });
        });
        drop(s);

        let rt = runtime(workers);
        group.bench_function(id("tokio", workers), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    done.arm(SPAWN);
                    for _ in 0..SPAWN {
                        drop(rt.spawn(async move { done.count_down() }));
                    }
                    done.wait();
                }
                start.elapsed()
            });
        });
        drop(rt);
    }
    group.finish();
}

fn yields(c: &mut Criterion) {
    yielding(c, "scheduler_yields", YIELDERS, YIELDS);
}

fn yield_once(c: &mut Criterion) {
    yielding(c, "scheduler_yield_once", YIELD_ONCE, 1);
}

/// `processes` processes yield `yields` times each, every yield completed
/// at once by the `now` handler (tokio: tasks calling `yield_now`).
fn yielding(c: &mut Criterion, name: &str, processes: usize, yields: u32) {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements((processes as u64) * u64::from(yields)));
    let done = Latch::leak();
    for workers in WORKERS {
        let s = scheduler(workers, done);
        group.bench_function(id("stepsched", workers), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    done.arm(processes);
                    for _ in 0..processes {
                        submit(&s, s.allocate_pid(), Bench::Yielder { left: yields });
                    }
                    done.wait();
                }
                start.elapsed()
            });
        });
        drop(s);

        let rt = runtime(workers);
        group.bench_function(id("tokio", workers), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    done.arm(processes);
                    for _ in 0..processes {
                        drop(rt.spawn(async move {
                            for _ in 0..yields {
                                tokio::task::yield_now().await;
                            }
                            done.count_down();
                        }));
                    }
                    done.wait();
                }
                start.elapsed()
            });
        });
        drop(rt);
    }
    group.finish();
}

fn ping_pong(c: &mut Criterion) {
    let mut group = c.benchmark_group("scheduler_ping_pong");
    group.throughput(Throughput::Elements(u64::from(ROUND_TRIPS)));
    let done = Latch::leak();
    for workers in WORKERS {
        let s = scheduler(workers, done);
        for (name, by_pid) in [("stepsched", false), ("stepsched-by-pid", true)] {
            group.bench_function(id(name, workers), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let (a, b) = (s.allocate_pid(), s.allocate_pid());
                        let player = |peer, server| Bench::Player {
                            peer: if by_pid {
                                Peer::ByPid(peer)
                            } else {
                                Peer::Address(peer, s.handle(), None)
                            },
                            left: ROUND_TRIPS,
                            server,
                            served: false,
                        };
                        done.arm(2);
                        let start = Instant::now();
                        // The receiver first, so the server's first send
                        // finds it.
                        submit(&s, b, player(a, false));
                        submit(&s, a, player(b, true));
                        done.wait();
                        total += start.elapsed();
                    }
                    total
                });
            });
        }
        drop(s);

        let rt = runtime(workers);
        group.bench_function(id("tokio", workers), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (to_a, mut a_rx) = mpsc::unbounded_channel::<u64>();
                    let (to_b, mut b_rx) = mpsc::unbounded_channel::<u64>();
                    done.arm(2);
                    let start = Instant::now();
                    drop(rt.spawn(async move {
                        for _ in 0..ROUND_TRIPS {
                            let n = b_rx.recv().await.expect("a ball");
                            to_a.send(n + 1).expect("the server is waiting");
                        }
                        done.count_down();
                    }));
                    drop(rt.spawn(async move {
                        to_b.send(0).expect("the receiver is waiting");
                        for left in (0..ROUND_TRIPS).rev() {
                            let n = a_rx.recv().await.expect("a ball");
                            if left > 0 {
                                to_b.send(n + 1).expect("the receiver is waiting");
                            }
                        }
                        done.count_down();
                    }));
                    done.wait();
                    total += start.elapsed();
                }
                total
            });
        });
        drop(rt);
    }
    group.finish();
}

fn fan_in(c: &mut Criterion) {
    let mut group = c.benchmark_group("scheduler_fan_in");
    group.throughput(Throughput::Elements((SINKS as u64) * u64::from(MESSAGES)));
    let (done, started) = (Latch::leak(), Latch::leak());
    for workers in WORKERS {
        let s = scheduler(workers, done);
        group.bench_function(id("stepsched", workers), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut pids = Vec::with_capacity(SINKS);
                for _ in 0..iters {
                    pids.clear();
                    done.arm(SINKS);
                    started.arm(SINKS);
                    for _ in 0..SINKS {
                        let pid = s.allocate_pid();
                        let sink = Bench::Sink {
                            left: MESSAGES,
                            started: Some(started),
                        };
                        pids.push(submit_addressed(&s, pid, sink));
                    }
                    started.wait();
                    let start = Instant::now();
                    for m in 0..MESSAGES {
                        for to in &pids {
                            to.send(u64::from(m)).expect("the sink is live");
                        }
                    }
                    done.wait();
                    total += start.elapsed();
                }
                total
            });
        });
        drop(s);

        let rt = runtime(workers);
        group.bench_function(id("tokio", workers), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut senders = Vec::with_capacity(SINKS);
                for _ in 0..iters {
                    senders.clear();
                    done.arm(SINKS);
                    started.arm(SINKS);
                    for _ in 0..SINKS {
                        let (tx, mut rx) = mpsc::unbounded_channel::<u64>();
                        drop(rt.spawn(async move {
                            started.count_down();
                            for _ in 0..MESSAGES {
                                rx.recv().await.expect("a message");
                            }
                            done.count_down();
                        }));
                        senders.push(tx);
                    }
                    started.wait();
                    let start = Instant::now();
                    for m in 0..MESSAGES {
                        for tx in &senders {
                            tx.send(u64::from(m)).expect("the task is live");
                        }
                    }
                    done.wait();
                    total += start.elapsed();
                }
                total
            });
        });
        drop(rt);
    }
    group.finish();
}

fn counting(c: &mut Criterion) {
    let mut group = c.benchmark_group("scheduler_counting");
    group.throughput(Throughput::Elements(u64::from(COUNTED)));
    let done = Latch::leak();
    for workers in WORKERS {
        let s = scheduler(workers, done);
        group.bench_function(id("stepsched", workers), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    done.arm(1);
                    let pid = s.allocate_pid();
                    let sink = Bench::Sink {
                        left: COUNTED,
                        started: None,
                    };
                    let to = submit_addressed(&s, pid, sink);
                    for m in 0..COUNTED {
                        to.send(u64::from(m)).expect("the counter is live");
                    }
                    done.wait();
                }
                start.elapsed()
            });
        });
        group.bench_function(id("stepsched-by-pid", workers), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    done.arm(1);
                    let pid = s.allocate_pid();
                    let sink = Bench::Sink {
                        left: COUNTED,
                        started: None,
                    };
                    submit(&s, pid, sink);
                    for m in 0..COUNTED {
                        s.send(pid, u64::from(m)).expect("the counter is live");
                    }
                    done.wait();
                }
                start.elapsed()
            });
        });
        drop(s);

        let rt = runtime(workers);
        group.bench_function(id("tokio", workers), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    done.arm(1);
                    let (tx, mut rx) = mpsc::unbounded_channel::<u64>();
                    drop(rt.spawn(async move {
                        for _ in 0..COUNTED {
                            rx.recv().await.expect("a message");
                        }
                        done.count_down();
                    }));
                    for m in 0..COUNTED {
                        tx.send(u64::from(m)).expect("the task is live");
                    }
                    done.wait();
                }
                start.elapsed()
            });
        });
        drop(rt);
    }
    group.finish();
}

fn spawn_receive(c: &mut Criterion) {
    let mut group = c.benchmark_group("scheduler_spawn_receive");
    group.throughput(Throughput::Elements(RECEIVERS as u64));
    let done = Latch::leak();
    for workers in WORKERS {
        let s = scheduler(workers, done);
        group.bench_function(id("stepsched", workers), |b| {
            let mut pids = Vec::with_capacity(RECEIVERS);
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    pids.clear();
                    done.arm(RECEIVERS);
                    for _ in 0..RECEIVERS {
                        let pid = s.allocate_pid();
                        let sink = Bench::Sink {
                            left: 1,
                            started: None,
                        };
                        pids.push(submit_addressed(&s, pid, sink));
                    }
                    for to in &pids {
                        to.send(1).expect("the receiver is live");
                    }
                    done.wait();
                }
                start.elapsed()
            });
        });
        drop(s);

        let rt = runtime(workers);
        group.bench_function(id("tokio", workers), |b| {
            let mut senders = Vec::with_capacity(RECEIVERS);
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    senders.clear();
                    done.arm(RECEIVERS);
                    for _ in 0..RECEIVERS {
                        let (tx, mut rx) = mpsc::unbounded_channel::<u64>();
                        drop(rt.spawn(async move {
                            rx.recv().await.expect("a message");
                            done.count_down();
                        }));
                        senders.push(tx);
                    }
                    for tx in &senders {
                        tx.send(1).expect("the task is live");
                    }
                    done.wait();
                }
                start.elapsed()
            });
        });
        drop(rt);
    }
    group.finish();
}

// ---------------------------------------------------------------------------
// Memory

/// An idle process holding nothing but its signals: `started` at its first
/// step, `received` at the first message it gets.
struct IdleProcess {
    started: Option<&'static Latch>,
    received: Option<&'static Latch>,
}

impl Process for IdleProcess {
    type Input = ();
    type Message = u64;
    type Response = u64;
    type Command = &'static str;
    type Output = ();

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        _cx: &mut Context<'_, Self>,
        events: Events<'_, u64>,
        out: &mut StepOutput<&'static str, ()>,
    ) -> Result<(), Error> {
        if let Some(latch) = self.started.take() {
            latch.count_down();
        }
        for event in events {
            match event {
                Event::Cancel => return Err(Error::Cancelled),
                Event::Message { .. } => {
                    if let Some(latch) = self.received.take() {
                        latch.count_down();
                    }
                }
                Event::Completion { .. } => {}
            }
        }
        out.set_status(Status::Idle);
        Ok(())
    }
}

/// Runs `create` (which must return once everything it made is idle) with
/// the allocator counting; returns the live bytes it added per unit.
fn bytes_per<T>(units: usize, create: impl FnOnce() -> T) -> (f64, T) {
    let before = CountingAlloc::start();
    let kept = create();
    let after = CountingAlloc::live();
    CountingAlloc::stop();
    let grown = after.wrapping_sub(before) as isize;
    (grown as f64 / units as f64, kept)
}

/// The bytes per idle process and per idle tokio task (with its unbounded
/// channel's sender kept); with `message`, each was sent one message and
/// has received it before it went idle again.
fn bytes_per_idle(message: bool) -> (f64, f64) {
    const WORKERS: usize = 2;
    let (started, received) = (Latch::leak(), Latch::leak());

    let s = Scheduler::<IdleProcess>::builder()
        .workers(WORKERS)
        .build()
        .expect("start the scheduler");
    let (ours, ()) = bytes_per(IDLE, || {
        started.arm(IDLE);
        received.arm(IDLE);
        for _ in 0..IDLE {
            let process = IdleProcess {
                started: Some(started),
                received: Some(received),
            };
            let join = s
                .submit(s.allocate_pid(), process, "run", ())
                .expect("submit");
            if message {
                join.address().send(1).expect("the process is live");
            }
        }
        started.wait();
        if message {
            received.wait();
        }
    });
    assert_eq!(s.stats().live, IDLE);
    let report = s.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(
        report.forced, 0,
        "every idle process ends on its cancel event"
    );
    drop(s);

    let rt = runtime(WORKERS);
    let (theirs, senders) = bytes_per(IDLE, move || {
        started.arm(IDLE);
        received.arm(IDLE);
        let mut senders = Vec::with_capacity(IDLE);
        for _ in 0..IDLE {
            let (tx, mut rx) = mpsc::unbounded_channel::<u64>();
            drop(rt.spawn(async move {
                started.count_down();
                while rx.recv().await.is_some() {
                    received.count_down();
                }
            }));
            if message {
                tx.send(1).expect("the task is live");
            }
            senders.push(tx);
        }
        started.wait();
        if message {
            received.wait();
        }
        (rt, senders)
    });
    let (rt, senders) = senders;
    drop(senders);
    drop(rt);
    (ours, theirs)
}

/// Measures and prints the bytes per idle process and per idle tokio task,
/// never messaged and after one message.
fn memory() {
    for (message, what) in [(false, "idle"), (true, "idle after one message")] {
        let (ours, theirs) = bytes_per_idle(message);
        println!(
            "memory: {what}: stepsched process = {ours:.0} bytes, tokio task with unbounded channel \
             = {theirs:.0} bytes, ratio M/N = {:.2} ({IDLE} units each, 2 workers; live-heap growth / count)",
            theirs / ours
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = spawn, yields, yield_once, ping_pong, fan_in, counting, spawn_receive
}

fn main() {
    memory();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
