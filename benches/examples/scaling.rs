//! The scaling benchmark: each workload at several worker counts, against
//! tokio's multi-thread runtime at the same count, in the same run, with
//! the scheduler's wake-up, park and steal counters at each count.
//!
//! ```sh
//! cargo xtask bench scaling --workers 1,2,4,8,16 [--quick] [--write-doc]
//! cargo run --release -p stepsched-benches --example scaling -- --workers 1,2,4,8,16 --quick
//! target/release/examples/scaling --workers 1,2,4,8,16   # the binary alone, on another machine
//! ```
//!
//! Not criterion (13 workloads × 5 worker counts × 2 runtimes would take an
//! hour): per (workload, worker count, runtime) the scheduler or runtime is
//! built once, fresh, runs one warm-up trial and then 7 timed trials (3
//! with `--quick`), and the median trial gives the time per operation.
//! Only one scheduler or runtime exists at a time.
//!
//! The workloads (sizes are the full ones; `--quick` divides each by 10;
//! `--size key=N` sets one):
//!
//! * `spawn-step`: one process spawns 100 000 children with
//!   `Context::spawn`, 100 per step (then `Status::Continue`); each child
//!   finishes at its first step. Per child. tokio: one task calls
//!   `tokio::spawn` 100 times, then `yield_now`, until 100 000.
//! * `spawn-outside`: the bench thread submits 100 000 processes that
//!   finish at their first step (tokio: `Runtime::spawn`). Per process.
//! * `yields`: 1 000 processes × 100 yields, each completed at once by the
//!   handler (tokio: `yield_now`). Per yield.
//! * `yield-once`: 100 000 processes, one handler-completed yield each.
//!   Per process.
//! * `ping-pong`: two processes exchange 10 000 round trips through each
//!   other's `Address`. Per round trip.
//! * `fan-in`: 1 000 idle receivers, the bench thread sends 100 messages to
//!   each, round-robin, through their `Address`es (setup untimed). Per
//!   message.
//! * `counting`: the bench thread sends 1 000 000 messages to one
//!   receiver. Per message.
//! * `fj-throughput` (Savina fork-join throughput): 60 actors, the bench
//!   thread sends 10 000 messages to each round-robin; each message
//!   computes `sin(37.2)²` (black-boxed). Per message.
//! * `fj-create` (Savina fork-join create): 100 000 times, create an actor
//!   and send it one message, on which it finishes. Per actor.
//! * `thread-ring` (Savina): a token passed 1 000 000 hops around a ring of
//!   100 processes, each holding its successor's `Address`. Per hop.
//! * `chameneos` (Savina): 100 creatures, 200 000 meetings. A mall process
//!   pairs meeting requests; simplified from Savina in one way: the mall
//!   tells *both* creatures of a pair their new colour (in Savina it tells
//!   the first, which tells the second); four messages per meeting either
//!   way. Per meeting.
//! * `big` (Savina): 120 actors each send 2 000 pings to random peers
//!   (`fastrand`, one seeded generator per actor), one at a time, each
//!   answered by a pong; the bench thread is the sink that ends them once
//!   all have finished pinging. On both sides the actors share one vector
//!   of the actors' addresses (tokio's: of their channel senders). Per
//!   ping.
//! * `fj-heavy`: 60 actors × 2 000 messages, each message ~5 µs of pure
//!   computation: a loop of `x = sin x + cos x + 1` whose length is
//!   calibrated once at start on this machine (printed; `--heavy-iters N`
//!   fixes it, to compare machines). Per message.
//!
//! tokio's side of each: tasks for processes, `tokio::sync::mpsc` unbounded
//! channels for mailboxes (each sender kept, as ours keeps `Address`es),
//! `yield_now` for the handler-completed yields; the same shapes as the
//! criterion benches in `benches/benches/scheduler.rs` where those have
//! them. Messages are `u64` on both sides.
//!
//! Counters: at each worker count the scheduler's `Stats` are read before
//! and after the timed trials (each read after a 50 ms pause, so the
//! workers have parked), and the difference is printed per operation:
//! thread wake-ups (`unparks`), wake-ups that found no work
//! (`empty_unparks`), parks, spins, and steal attempts per item stolen;
//! also the process runs per operation (how much a run batches) and the
//! busiest worker's share of the runs (how far the work spread).
//! They are counts, not times, so they mean something on a machine with
//! fewer cores than workers, where the times do not (though how often a
//! worker finds itself out of work still depends on how the OS schedules
//! the threads).
//!
//! Results go to standard output as Markdown (what `cargo xtask bench
//! scaling --write-doc` copies into `docs/benchmarks.md`); progress goes
//! to standard error. `--ours-only` skips tokio's side, for A/B runs of
//! two builds of the scheduler where the machine's time is short (the
//! ratios against tokio then come from a full run).

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use stepsched::{
    Address, Completer, Context, ContextExt, Error, Event, Events, Pid, Process, Scheduler, Status,
    StepOutput, WorkerStats,
};
use tokio::runtime::Runtime;
use tokio::sync::mpsc::{self, UnboundedSender};

/// Children a spawner spawns per step (tokio: per `yield_now`).
const SPAWN_BATCH: u64 = 100;
/// Yields per process in `yields`.
const YIELDS: u32 = 100;
/// Receivers in `fan-in`.
const SINKS: usize = 1_000;
/// Actors in the fork-join workloads.
const FJ_ACTORS: usize = 60;
/// Processes in the thread ring.
const RING: usize = 100;
/// Creatures in chameneos.
const CREATURES: usize = 100;
/// Actors in big.
const BIG_ACTORS: usize = 120;
/// Target time of one `fj-heavy` message.
const HEAVY_NS: f64 = 5_000.0;
/// How long a trial may take before the run is declared stuck.
const STUCK: Duration = Duration::from_secs(600);

// ---------------------------------------------------------------------------
// Messages: one u64 on both sides, kind in the top byte

const KIND_SHIFT: u32 = 56;
const PAYLOAD: u64 = (1 << KIND_SHIFT) - 1;
// Kind 0: a plain number (counting, fan-in, thread-ring tokens).
/// Finish (thread ring: with the count of processes left to tell).
const EXIT: u64 = 1;
/// Chameneos: a creature's request to the mall (index << 8 | colour).
const MEET: u64 = 2;
/// Chameneos: the mall's answer, with the new colour.
const MET: u64 = 3;
/// Big: start pinging.
const GO: u64 = 4;
/// Big: a ping, with the sender's index.
const PING: u64 = 5;
/// Big: the answer to a ping.
const PONG: u64 = 6;

fn msg(kind: u64, payload: u64) -> u64 {
    (kind << KIND_SHIFT) | (payload & PAYLOAD)
}

fn kind(m: u64) -> u64 {
    m >> KIND_SHIFT
}

fn payload(m: u64) -> u64 {
    m & PAYLOAD
}

/// The colour two chameneos take when they meet.
fn complement(a: u64, b: u64) -> u64 {
    if a == b { a } else { 3 - a - b }
}

/// A random peer of `me` among `n`, never `me`.
fn random_peer(rng: &mut fastrand::Rng, me: usize, n: usize) -> usize {
    let j = rng.usize(..n - 1);
    if j >= me { j + 1 } else { j }
}

// ---------------------------------------------------------------------------
// Computation

/// `fj-throughput`'s message: `sin(37.2)²`, black-boxed.
fn sin_squared() -> f64 {
    let x = black_box(37.2f64).sin();
    black_box(x * x)
}

/// `fj-heavy`'s message: `iters` dependent sin/cos iterations.
fn heavy(iters: u32) -> f64 {
    let mut x = black_box(37.2f64);
    for _ in 0..iters {
        x = x.sin() + x.cos() + 1.0;
    }
    black_box(x)
}

/// What a sink computes per message.
#[derive(Clone, Copy)]
enum Work {
    Nothing,
    SinSquared,
    Heavy(u32),
}

impl Work {
    fn run(self) {
        match self {
            Work::Nothing => {}
            Work::SinSquared => {
                sin_squared();
            }
            Work::Heavy(iters) => {
                heavy(iters);
            }
        }
    }
}

/// The number of `heavy` iterations that take about 5 µs here, and the
/// nanoseconds one takes (best of 5 runs of 100 000).
fn calibrate() -> (u32, f64) {
    heavy(10_000);
    let per = (0..5)
        .map(|_| {
            let start = Instant::now();
            heavy(100_000);
            start.elapsed().as_nanos() as f64 / 100_000.0
        })
        .fold(f64::INFINITY, f64::min);
    (((HEAVY_NS / per).round() as u32).max(1), per)
}

// ---------------------------------------------------------------------------
// The latch both peers count down

/// A countdown the bench thread waits on: each finished unit counts itself
/// down, the last one wakes the waiter. Also counts failures reported by
/// our completion hook.
struct Latch {
    left: AtomicUsize,
    failed: AtomicUsize,
    lock: Mutex<()>,
    zero: Condvar,
}

impl Latch {
    const fn new() -> Latch {
        Latch {
            left: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
            lock: Mutex::new(()),
            zero: Condvar::new(),
        }
    }

    /// Arms the latch for `n` units; call before starting them.
    fn arm(&self, n: usize) {
        // Relaxed: published to the workers by the queue push of the first
        // unit started after it (a release), which they acquire.
        self.left.store(n, Ordering::Relaxed);
        self.failed.store(0, Ordering::Relaxed);
    }

    fn count_down(&self) {
        // AcqRel: the last unit's decrement acquires every earlier one, and
        // the waiter's Acquire load acquires it.
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

    /// Waits until every unit has counted down; panics if one failed or
    /// if it takes longer than `STUCK`.
    fn wait(&self) {
        let deadline = Instant::now() + STUCK;
        let mut guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        // Acquire: pairs with the AcqRel decrements. The check runs under
        // the lock the last decrement takes to notify, so no wake-up is lost.
        while self.left.load(Ordering::Acquire) != 0 {
            let now = Instant::now();
            assert!(now < deadline, "a trial is stuck");
            guard = self
                .zero
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        drop(guard);
        assert_eq!(self.failed.load(Ordering::Relaxed), 0, "a process failed");
    }
}

/// Every unit that finishes (our completion hook, tokio's tasks).
static DONE: Latch = Latch::new();
/// Every receiver that has started (the untimed setup of some workloads).
static STARTED: Latch = Latch::new();
/// `big`: every actor that has had all its pings answered.
static PINGED: Latch = Latch::new();

// ---------------------------------------------------------------------------
// Our side: one process type for every workload

/// A peer's address, resolved at the first send (the peer may be submitted
/// after this process) and kept, as a tokio task keeps a channel sender.
struct Lazy {
    pid: Pid,
    to: Option<Address<Bench>>,
}

impl Lazy {
    fn new(pid: Pid) -> Lazy {
        Lazy { pid, to: None }
    }

    fn send(&mut self, ctx: &Context<'_, Bench>, m: u64) -> Result<(), Error> {
        if self.to.is_none() {
            self.to = ctx.address(self.pid);
        }
        let to = self
            .to
            .as_ref()
            .ok_or_else(|| Error::failed("the peer is gone"))?;
        Ok(to.send(m)?)
    }
}

/// A benchmark process: counts `started` down at its first step, then
/// behaves as its `kind`.
struct Bench {
    started: Option<&'static Latch>,
    kind: Kind,
}

enum Kind {
    /// Finishes at its first step.
    Once,
    /// Spawns `left` children (`Once`), `SPAWN_BATCH` per step.
    Spawner { left: u64 },
    /// Yields `left` more times, each completed at once by `now`.
    Yielder { left: u32 },
    /// One end of the ping-pong; the `server` sends the first ball at its
    /// first step and does not answer the last.
    Player {
        peer: Lazy,
        left: u32,
        server: bool,
        served: bool,
    },
    /// Finishes after `left` messages, running `work` on each.
    Sink { left: u64, work: Work },
    /// A thread-ring member.
    Ring { next: Lazy },
    /// The chameneos mall.
    Mall {
        creatures: Vec<Lazy>,
        left: u64,
        waiting: Option<(usize, u64)>,
        exited: usize,
    },
    /// A chameneos creature.
    Creature {
        index: u64,
        colour: u64,
        mall: Lazy,
        first: bool,
        meetings: u64,
    },
    /// A big actor. Every actor shares one vector of the actors'
    /// addresses, set once all are submitted (before the first `GO`), as
    /// tokio's side shares one vector of senders.
    Big {
        index: usize,
        peers: Arc<OnceLock<Vec<Address<Bench>>>>,
        rng: fastrand::Rng,
        left: u64,
    },
}

impl Bench {
    fn new(kind: Kind) -> Bench {
        Bench {
            started: None,
            kind,
        }
    }

    fn started(kind: Kind) -> Bench {
        Bench {
            started: Some(&STARTED),
            kind,
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
        if let Some(latch) = self.started.take() {
            latch.count_down();
        }
        out.set_status(Status::Idle);
        match &mut self.kind {
            Kind::Once => out.set_status(Status::Done(0)),
            Kind::Spawner { left } => {
                let batch = (*left).min(SPAWN_BATCH);
                for _ in 0..batch {
                    ctx.spawn(Bench::new(Kind::Once), "run", ())?;
                }
                *left -= batch;
                out.set_status(if *left == 0 {
                    Status::Done(0)
                } else {
                    Status::Continue
                });
            }
            Kind::Yielder { left } => {
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
            Kind::Player {
                peer,
                left,
                server,
                served,
            } => {
                if *server && !std::mem::replace(served, true) {
                    peer.send(ctx, 0)?;
                }
                for event in events {
                    match event {
                        Event::Message { data: n, .. } => {
                            *left -= 1;
                            if !*server || *left > 0 {
                                peer.send(ctx, n + 1)?;
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
            Kind::Sink { left, work } => {
                for event in events {
                    match event {
                        Event::Message { .. } => {
                            work.run();
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
            Kind::Ring { next } => {
                for event in events {
                    match event {
                        Event::Message { data: m, .. } => {
                            if kind(m) == EXIT {
                                if payload(m) > 0 {
                                    next.send(ctx, msg(EXIT, payload(m) - 1))?;
                                }
                                out.set_status(Status::Done(0));
                            } else if m == 0 {
                                // The last hop: tell the other members.
                                next.send(ctx, msg(EXIT, (RING - 2) as u64))?;
                                out.set_status(Status::Done(0));
                            } else {
                                next.send(ctx, m - 1)?;
                            }
                        }
                        Event::Cancel => return Err(Error::Cancelled),
                        Event::Completion { .. } => {}
                    }
                }
            }
            Kind::Mall {
                creatures,
                left,
                waiting,
                exited,
            } => {
                for event in events {
                    match event {
                        Event::Message { data: m, .. } => {
                            let (i, colour) = ((payload(m) >> 8) as usize, payload(m) & 0xff);
                            if *left == 0 {
                                creatures[i].send(ctx, msg(EXIT, 0))?;
                                *exited += 1;
                                if *exited == creatures.len() {
                                    out.set_status(Status::Done(0));
                                }
                            } else if let Some((j, other)) = waiting.take() {
                                *left -= 1;
                                let new = msg(MET, complement(colour, other));
                                creatures[i].send(ctx, new)?;
                                creatures[j].send(ctx, new)?;
                            } else {
                                *waiting = Some((i, colour));
                            }
                        }
                        Event::Cancel => return Err(Error::Cancelled),
                        Event::Completion { .. } => {}
                    }
                }
            }
            Kind::Creature {
                index,
                colour,
                mall,
                first,
                meetings,
            } => {
                if std::mem::take(first) {
                    mall.send(ctx, msg(MEET, (*index << 8) | *colour))?;
                }
                for event in events {
                    match event {
                        Event::Message { data: m, .. } => {
                            if kind(m) == EXIT {
                                out.set_status(Status::Done(*meetings));
                            } else {
                                *colour = payload(m);
                                *meetings += 1;
                                mall.send(ctx, msg(MEET, (*index << 8) | *colour))?;
                            }
                        }
                        Event::Cancel => return Err(Error::Cancelled),
                        Event::Completion { .. } => {}
                    }
                }
            }
            Kind::Big {
                index,
                peers,
                rng,
                left,
            } => {
                // Unset only at the first step, which comes at submission
                // with no events; set before the first message.
                let peers = peers.get().map_or(&[][..], Vec::as_slice);
                for event in events {
                    match event {
                        Event::Message { data: m, .. } => match kind(m) {
                            GO => {
                                let j = random_peer(rng, *index, peers.len());
                                peers[j].send(msg(PING, *index as u64))?;
                            }
                            PING => {
                                peers[payload(m) as usize].send(msg(PONG, 0))?;
                            }
                            PONG => {
                                *left -= 1;
                                if *left == 0 {
                                    PINGED.count_down();
                                } else {
                                    let j = random_peer(rng, *index, peers.len());
                                    peers[j].send(msg(PING, *index as u64))?;
                                }
                            }
                            _ => out.set_status(Status::Done(0)),
                        },
                        Event::Cancel => return Err(Error::Cancelled),
                        Event::Completion { .. } => {}
                    }
                }
            }
        }
        Ok(())
    }
}

/// A fresh scheduler with `workers` workers whose completions count
/// `DONE` down.
fn scheduler(workers: usize) -> Scheduler<Bench> {
    Scheduler::builder()
        .workers(workers)
        .handler("now", |_: &'static str, completer: Completer<Bench>| {
            completer.complete(Ok(0));
        })
        .on_complete(|_, result| {
            if result.is_err() {
                DONE.fail();
            }
            DONE.count_down();
        })
        .build()
        .expect("start the scheduler")
}

fn submit(s: &Scheduler<Bench>, pid: Pid, process: Bench) -> Address<Bench> {
    s.submit(pid, process, "run", ()).expect("submit").address()
}

fn runtime(workers: usize) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .build()
        .expect("start the runtime")
}

// ---------------------------------------------------------------------------
// Workloads

#[derive(Clone, Copy, PartialEq, Eq)]
enum Id {
    SpawnStep,
    SpawnOutside,
    Yields,
    YieldOnce,
    PingPong,
    FanIn,
    Counting,
    FjThroughput,
    FjCreate,
    ThreadRing,
    Chameneos,
    Big,
    FjHeavy,
}

/// One workload: its key (`--only`, `--size`), its title, its full size
/// (the number `--quick` divides and `--size` sets) and what that size
/// counts.
struct Workload {
    id: Id,
    key: &'static str,
    title: &'static str,
    size: u64,
}

impl Workload {
    /// Operations per trial (what the time is divided by).
    fn ops(&self) -> u64 {
        match self.id {
            Id::Yields => self.size * u64::from(YIELDS),
            Id::FanIn => self.size * SINKS as u64,
            Id::FjThroughput | Id::FjHeavy => self.size * FJ_ACTORS as u64,
            Id::Big => self.size * BIG_ACTORS as u64,
            _ => self.size,
        }
    }

    /// The title with the size of this run.
    fn label(&self) -> String {
        let n = self.size;
        match self.id {
            Id::SpawnStep => format!("spawn from a step: {n} one-step children, per process"),
            Id::SpawnOutside => format!("spawn from outside: {n} one-step processes, per process"),
            Id::Yields => format!("{n} processes × {YIELDS} handler-completed yields, per yield"),
            Id::YieldOnce => format!("{n} processes × 1 handler-completed yield, per process"),
            Id::PingPong => format!("ping-pong: {n} round trips, per round trip"),
            Id::FanIn => format!("fan-in: {SINKS} idle receivers × {n} messages, per message"),
            Id::Counting => format!("counting: {n} messages to one receiver, per message"),
            Id::FjThroughput => {
                format!(
                    "fork-join throughput: {FJ_ACTORS} actors × {n} messages (sin²), per message"
                )
            }
            Id::FjCreate => format!("fork-join create: {n} actors, one message each, per actor"),
            Id::ThreadRing => format!("thread ring: {RING} actors, {n} hops, per hop"),
            Id::Chameneos => {
                format!("chameneos: {CREATURES} creatures, {n} meetings, per meeting")
            }
            Id::Big => format!("big: {BIG_ACTORS} actors × {n} pings, per ping"),
            Id::FjHeavy => {
                format!(
                    "compute-heavy fork-join: {FJ_ACTORS} actors × {n} messages of ~5 µs, per message"
                )
            }
        }
    }
}

fn workloads() -> Vec<Workload> {
    let w = |id, key, title, size| Workload {
        id,
        key,
        title,
        size,
    };
    vec![
        w(Id::SpawnStep, "spawn-step", "spawn from a step", 100_000),
        w(
            Id::SpawnOutside,
            "spawn-outside",
            "spawn from outside",
            100_000,
        ),
        w(Id::Yields, "yields", "100 yields, per yield", 1_000),
        w(
            Id::YieldOnce,
            "yield-once",
            "one yield, per process",
            100_000,
        ),
        w(Id::PingPong, "ping-pong", "ping-pong round trip", 10_000),
        w(Id::FanIn, "fan-in", "fan-in, per message", 100),
        w(Id::Counting, "counting", "counting, per message", 1_000_000),
        w(
            Id::FjThroughput,
            "fj-throughput",
            "fork-join throughput",
            10_000,
        ),
        w(Id::FjCreate, "fj-create", "fork-join create", 100_000),
        w(
            Id::ThreadRing,
            "thread-ring",
            "thread ring, per hop",
            1_000_000,
        ),
        w(
            Id::Chameneos,
            "chameneos",
            "chameneos, per meeting",
            200_000,
        ),
        w(Id::Big, "big", "big, per ping", 2_000),
        w(Id::FjHeavy, "fj-heavy", "compute-heavy fork-join", 2_000),
    ]
}

/// Sends `m` to each address in turn, `rounds` times (round-robin).
fn round_robin(to: &[Address<Bench>], rounds: u64) {
    for m in 0..rounds {
        for a in to {
            a.send(m).expect("the receiver is live");
        }
    }
}

/// Submits `n` sinks that count `STARTED` down at their first step, waits
/// until all have, and returns their addresses.
fn started_sinks(s: &Scheduler<Bench>, n: usize, left: u64, work: Work) -> Vec<Address<Bench>> {
    STARTED.arm(n);
    let to = (0..n)
        .map(|_| {
            submit(
                s,
                s.allocate_pid(),
                Bench::started(Kind::Sink { left, work }),
            )
        })
        .collect();
    STARTED.wait();
    to
}

/// One timed trial of `w` on our scheduler.
fn ours(w: &Workload, s: &Scheduler<Bench>, heavy_iters: u32) -> Duration {
    let n = w.size;
    match w.id {
        Id::SpawnStep => {
            DONE.arm(n as usize + 1);
            let start = Instant::now();
            submit(s, s.allocate_pid(), Bench::new(Kind::Spawner { left: n }));
            DONE.wait();
            start.elapsed()
        }
        Id::SpawnOutside | Id::Yields | Id::YieldOnce => {
            let make = || match w.id {
                Id::SpawnOutside => Kind::Once,
                Id::Yields => Kind::Yielder { left: YIELDS },
                _ => Kind::Yielder { left: 1 },
            };
            DONE.arm(n as usize);
            let start = Instant::now();
            for _ in 0..n {
                drop(
                    s.submit(s.allocate_pid(), Bench::new(make()), "run", ())
                        .expect("submit"),
                );
            }
            DONE.wait();
            start.elapsed()
        }
        Id::PingPong => {
            let (a, b) = (s.allocate_pid(), s.allocate_pid());
            let player = |peer, server| {
                Bench::new(Kind::Player {
                    peer: Lazy::new(peer),
                    left: n as u32,
                    server,
                    served: false,
                })
            };
            DONE.arm(2);
            let start = Instant::now();
            // The receiver first, so the server's first send finds it.
            submit(s, b, player(a, false));
            submit(s, a, player(b, true));
            DONE.wait();
            start.elapsed()
        }
        Id::FanIn | Id::FjThroughput | Id::FjHeavy => {
            let (actors, work) = match w.id {
                Id::FanIn => (SINKS, Work::Nothing),
                Id::FjThroughput => (FJ_ACTORS, Work::SinSquared),
                _ => (FJ_ACTORS, Work::Heavy(heavy_iters)),
            };
            DONE.arm(actors);
            let to = started_sinks(s, actors, n, work);
            let start = Instant::now();
            round_robin(&to, n);
            DONE.wait();
            start.elapsed()
        }
        Id::Counting => {
            DONE.arm(1);
            let start = Instant::now();
            let sink = Kind::Sink {
                left: n,
                work: Work::Nothing,
            };
            let to = submit(s, s.allocate_pid(), Bench::new(sink));
            for m in 0..n {
                to.send(m).expect("the counter is live");
            }
            DONE.wait();
            start.elapsed()
        }
        Id::FjCreate => {
            DONE.arm(n as usize);
            let start = Instant::now();
            for m in 0..n {
                let sink = Kind::Sink {
                    left: 1,
                    work: Work::SinSquared,
                };
                let to = submit(s, s.allocate_pid(), Bench::new(sink));
                to.send(m).expect("the actor is live");
            }
            DONE.wait();
            start.elapsed()
        }
        Id::ThreadRing => {
            let pids: Vec<Pid> = (0..RING).map(|_| s.allocate_pid()).collect();
            DONE.arm(RING);
            STARTED.arm(RING);
            let mut first = None;
            for (i, &pid) in pids.iter().enumerate() {
                let next = Lazy::new(pids[(i + 1) % RING]);
                let to = submit(s, pid, Bench::started(Kind::Ring { next }));
                first.get_or_insert(to);
            }
            STARTED.wait();
            let start = Instant::now();
            first.expect("a ring").send(n).expect("the ring is live");
            DONE.wait();
            start.elapsed()
        }
        Id::Chameneos => {
            let mall = s.allocate_pid();
            let pids: Vec<Pid> = (0..CREATURES).map(|_| s.allocate_pid()).collect();
            DONE.arm(CREATURES + 1);
            let start = Instant::now();
            let creatures = pids.iter().map(|&p| Lazy::new(p)).collect();
            let m = Kind::Mall {
                creatures,
                left: n,
                waiting: None,
                exited: 0,
            };
            submit(s, mall, Bench::new(m));
            for (i, &pid) in pids.iter().enumerate() {
                let c = Kind::Creature {
                    index: i as u64,
                    colour: (i % 3) as u64,
                    mall: Lazy::new(mall),
                    first: true,
                    meetings: 0,
                };
                submit(s, pid, Bench::new(c));
            }
            DONE.wait();
            start.elapsed()
        }
        Id::Big => {
            DONE.arm(BIG_ACTORS);
            PINGED.arm(BIG_ACTORS);
            STARTED.arm(BIG_ACTORS);
            let peers = Arc::new(OnceLock::new());
            let to: Vec<Address<Bench>> = (0..BIG_ACTORS)
                .map(|i| {
                    let b = Kind::Big {
                        index: i,
                        peers: peers.clone(),
                        rng: fastrand::Rng::with_seed(i as u64),
                        left: n,
                    };
                    submit(s, s.allocate_pid(), Bench::started(b))
                })
                .collect();
            assert!(peers.set(to.clone()).is_ok(), "the peers are set once");
            STARTED.wait();
            let start = Instant::now();
            for a in &to {
                a.send(msg(GO, 0)).expect("the actor is live");
            }
            PINGED.wait();
            for a in &to {
                a.send(msg(EXIT, 0)).expect("the actor is live");
            }
            DONE.wait();
            start.elapsed()
        }
    }
}

/// One timed trial of `w` on tokio's runtime.
fn tokio(w: &Workload, rt: &Runtime, heavy_iters: u32) -> Duration {
    let n = w.size;
    match w.id {
        Id::SpawnStep => {
            DONE.arm(n as usize + 1);
            let start = Instant::now();
            drop(rt.spawn(async move {
                let mut left = n;
                while left > 0 {
                    let batch = left.min(SPAWN_BATCH);
                    for _ in 0..batch {
                        drop(tokio::spawn(async { DONE.count_down() }));
                    }
                    left -= batch;
                    if left > 0 {
                        tokio::task::yield_now().await;
                    }
                }
                DONE.count_down();
            }));
            DONE.wait();
            start.elapsed()
        }
        Id::SpawnOutside | Id::Yields | Id::YieldOnce => {
            let yields = match w.id {
                Id::SpawnOutside => 0,
                Id::Yields => YIELDS,
                _ => 1,
            };
            DONE.arm(n as usize);
            let start = Instant::now();
            for _ in 0..n {
                drop(rt.spawn(async move {
                    for _ in 0..yields {
                        tokio::task::yield_now().await;
                    }
                    DONE.count_down();
                }));
            }
            DONE.wait();
            start.elapsed()
        }
        Id::PingPong => {
            let (to_a, mut a_rx) = mpsc::unbounded_channel::<u64>();
            let (to_b, mut b_rx) = mpsc::unbounded_channel::<u64>();
            DONE.arm(2);
            let start = Instant::now();
            drop(rt.spawn(async move {
                for _ in 0..n {
                    let m = b_rx.recv().await.expect("a ball");
                    to_a.send(m + 1).expect("the server is waiting");
                }
                DONE.count_down();
            }));
            drop(rt.spawn(async move {
                to_b.send(0).expect("the receiver is waiting");
                for left in (0..n).rev() {
                    let m = a_rx.recv().await.expect("a ball");
                    if left > 0 {
                        to_b.send(m + 1).expect("the receiver is waiting");
                    }
                }
                DONE.count_down();
            }));
            DONE.wait();
            start.elapsed()
        }
        Id::FanIn | Id::FjThroughput | Id::FjHeavy => {
            let (actors, work) = match w.id {
                Id::FanIn => (SINKS, Work::Nothing),
                Id::FjThroughput => (FJ_ACTORS, Work::SinSquared),
                _ => (FJ_ACTORS, Work::Heavy(heavy_iters)),
            };
            DONE.arm(actors);
            STARTED.arm(actors);
            let senders: Vec<UnboundedSender<u64>> = (0..actors)
                .map(|_| {
                    let (tx, mut rx) = mpsc::unbounded_channel::<u64>();
                    drop(rt.spawn(async move {
                        STARTED.count_down();
                        for _ in 0..n {
                            rx.recv().await.expect("a message");
                            work.run();
                        }
                        DONE.count_down();
                    }));
                    tx
                })
                .collect();
            STARTED.wait();
            let start = Instant::now();
            for m in 0..n {
                for tx in &senders {
                    tx.send(m).expect("the task is live");
                }
            }
            DONE.wait();
            start.elapsed()
        }
        Id::Counting => {
            DONE.arm(1);
            let start = Instant::now();
            let (tx, mut rx) = mpsc::unbounded_channel::<u64>();
            drop(rt.spawn(async move {
                for _ in 0..n {
                    rx.recv().await.expect("a message");
                }
                DONE.count_down();
            }));
            for m in 0..n {
                tx.send(m).expect("the task is live");
            }
            DONE.wait();
            start.elapsed()
        }
        Id::FjCreate => {
            DONE.arm(n as usize);
            let start = Instant::now();
            for m in 0..n {
                let (tx, mut rx) = mpsc::unbounded_channel::<u64>();
                drop(rt.spawn(async move {
                    rx.recv().await.expect("a message");
                    sin_squared();
                    DONE.count_down();
                }));
                tx.send(m).expect("the task is live");
            }
            DONE.wait();
            start.elapsed()
        }
        Id::ThreadRing => {
            let (txs, rxs): (Vec<_>, Vec<_>) =
                (0..RING).map(|_| mpsc::unbounded_channel::<u64>()).unzip();
            DONE.arm(RING);
            STARTED.arm(RING);
            for (i, mut rx) in rxs.into_iter().enumerate() {
                let next = txs[(i + 1) % RING].clone();
                drop(rt.spawn(async move {
                    STARTED.count_down();
                    loop {
                        let m = rx.recv().await.expect("a token");
                        if kind(m) == EXIT {
                            if payload(m) > 0 {
                                next.send(msg(EXIT, payload(m) - 1)).expect("live");
                            }
                            break;
                        } else if m == 0 {
                            next.send(msg(EXIT, (RING - 2) as u64)).expect("live");
                            break;
                        }
                        next.send(m - 1).expect("the ring is live");
                    }
                    DONE.count_down();
                }));
            }
            STARTED.wait();
            let start = Instant::now();
            txs[0].send(n).expect("the ring is live");
            DONE.wait();
            start.elapsed()
        }
        Id::Chameneos => {
            let (to_mall, mut mall_rx) = mpsc::unbounded_channel::<u64>();
            let (txs, rxs): (Vec<_>, Vec<_>) = (0..CREATURES)
                .map(|_| mpsc::unbounded_channel::<u64>())
                .unzip();
            DONE.arm(CREATURES + 1);
            let start = Instant::now();
            drop(rt.spawn(async move {
                let (mut left, mut exited) = (n, 0);
                let mut waiting: Option<(usize, u64)> = None;
                while exited < txs.len() {
                    let m = mall_rx.recv().await.expect("a request");
                    let (i, colour) = ((payload(m) >> 8) as usize, payload(m) & 0xff);
                    if left == 0 {
                        txs[i].send(msg(EXIT, 0)).expect("live");
                        exited += 1;
                    } else if let Some((j, other)) = waiting.take() {
                        left -= 1;
                        let new = msg(MET, complement(colour, other));
                        txs[i].send(new).expect("live");
                        txs[j].send(new).expect("live");
                    } else {
                        waiting = Some((i, colour));
                    }
                }
                DONE.count_down();
            }));
            for (i, mut rx) in rxs.into_iter().enumerate() {
                let mall = to_mall.clone();
                drop(rt.spawn(async move {
                    let (index, mut colour) = (i as u64, (i % 3) as u64);
                    let mut meetings = 0u64;
                    mall.send(msg(MEET, (index << 8) | colour)).expect("live");
                    loop {
                        let m = rx.recv().await.expect("an answer");
                        if kind(m) == EXIT {
                            break;
                        }
                        colour = payload(m);
                        meetings += 1;
                        mall.send(msg(MEET, (index << 8) | colour)).expect("live");
                    }
                    black_box(meetings);
                    DONE.count_down();
                }));
            }
            DONE.wait();
            start.elapsed()
        }
        Id::Big => {
            let (txs, rxs): (Vec<_>, Vec<_>) = (0..BIG_ACTORS)
                .map(|_| mpsc::unbounded_channel::<u64>())
                .unzip();
            let peers = Arc::new(txs);
            DONE.arm(BIG_ACTORS);
            PINGED.arm(BIG_ACTORS);
            STARTED.arm(BIG_ACTORS);
            for (index, mut rx) in rxs.into_iter().enumerate() {
                let peers = peers.clone();
                drop(rt.spawn(async move {
                    STARTED.count_down();
                    let mut rng = fastrand::Rng::with_seed(index as u64);
                    let mut left = n;
                    loop {
                        let m = rx.recv().await.expect("a message");
                        match kind(m) {
                            GO => {
                                let j = random_peer(&mut rng, index, peers.len());
                                peers[j].send(msg(PING, index as u64)).expect("live");
                            }
                            PING => {
                                peers[payload(m) as usize].send(msg(PONG, 0)).expect("live");
                            }
                            PONG => {
                                left -= 1;
                                if left == 0 {
                                    PINGED.count_down();
                                } else {
                                    let j = random_peer(&mut rng, index, peers.len());
                                    peers[j].send(msg(PING, index as u64)).expect("live");
                                }
                            }
                            _ => break,
                        }
                    }
                    DONE.count_down();
                }));
            }
            STARTED.wait();
            let start = Instant::now();
            for tx in peers.iter() {
                tx.send(msg(GO, 0)).expect("the task is live");
            }
            PINGED.wait();
            for tx in peers.iter() {
                tx.send(msg(EXIT, 0)).expect("the task is live");
            }
            DONE.wait();
            start.elapsed()
        }
    }
}

// ---------------------------------------------------------------------------
// Counters

/// The counters this benchmark reports, summed over the workers.
#[derive(Clone, Default)]
struct Counts {
    /// Items (process runs) each worker ran.
    items_run: Vec<u64>,
    unparks: u64,
    empty_unparks: u64,
    steal_attempts: u64,
    items_stolen: u64,
    parks: u64,
    spins: u64,
}

impl Counts {
    /// The scheduler's counters now, after a pause that lets the workers
    /// finish parking.
    fn read(s: &Scheduler<Bench>) -> Counts {
        std::thread::sleep(Duration::from_millis(50));
        let workers = s.stats().workers;
        let total = workers
            .iter()
            .fold(WorkerStats::default(), |sum, w| sum.merged(w));
        Counts {
            items_run: workers.iter().map(|w| w.items_run).collect(),
            unparks: total.unparks,
            empty_unparks: total.empty_unparks,
            steal_attempts: total.steal_attempts,
            items_stolen: total.items_stolen,
            parks: total.parks,
            spins: total.spins,
        }
    }

    fn since(self, before: &Counts) -> Counts {
        Counts {
            items_run: (self.items_run.iter().zip(&before.items_run))
                .map(|(a, b)| a - b)
                .collect(),
            unparks: self.unparks - before.unparks,
            empty_unparks: self.empty_unparks - before.empty_unparks,
            steal_attempts: self.steal_attempts - before.steal_attempts,
            items_stolen: self.items_stolen - before.items_stolen,
            parks: self.parks - before.parks,
            spins: self.spins - before.spins,
        }
    }
}

// ---------------------------------------------------------------------------
// The harness

/// The command line.
struct Args {
    workers: Vec<usize>,
    quick: bool,
    trials: usize,
    only: Option<Vec<String>>,
    sizes: Vec<(String, u64)>,
    heavy_iters: Option<u32>,
    /// Skip tokio's side (A/B runs of two builds of ours).
    ours_only: bool,
}

const USAGE: &str = "usage: scaling [--workers 1,2,4,8,16] [--quick] [--trials N] \
     [--only key,key..] [--size key=N].. [--heavy-iters N] [--ours-only]\n\
     keys: spawn-step spawn-outside yields yield-once ping-pong fan-in counting \
     fj-throughput fj-create thread-ring chameneos big fj-heavy";

fn parse(args: &[String]) -> Result<Args, String> {
    let mut out = Args {
        workers: vec![1, 2, 4, 8, 16],
        quick: false,
        trials: 0,
        only: None,
        sizes: Vec::new(),
        heavy_iters: None,
        ours_only: false,
    };
    let number = |s: &str| s.parse::<u64>().map_err(|_| format!("not a number: `{s}`"));
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--workers" => {
                out.workers = value()?
                    .split(',')
                    .map(|w| number(w).map(|n| n as usize))
                    .collect::<Result<_, _>>()?;
                if out.workers.is_empty() || out.workers.contains(&0) {
                    return Err("--workers: counts of at least 1".into());
                }
            }
            "--quick" => out.quick = true,
            "--trials" => out.trials = number(value()?)?.max(1) as usize,
            "--only" => out.only = Some(value()?.split(',').map(str::to_owned).collect()),
            "--size" => {
                let v = value()?;
                let (key, n) = v.split_once('=').ok_or("--size key=N")?;
                out.sizes.push((key.to_owned(), number(n)?.max(1)));
            }
            "--heavy-iters" => out.heavy_iters = Some(number(value()?)?.max(1) as u32),
            "--ours-only" => out.ours_only = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if out.trials == 0 {
        out.trials = if out.quick { 3 } else { 7 };
    }
    let keys: Vec<&str> = workloads().iter().map(|w| w.key).collect();
    for key in out
        .only
        .iter()
        .flatten()
        .chain(out.sizes.iter().map(|(k, _)| k))
    {
        if !keys.contains(&key.as_str()) {
            return Err(format!("unknown workload `{key}`"));
        }
    }
    Ok(out)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The median nanoseconds per operation over `trials` trials, after one
/// warm-up.
fn measure(w: &Workload, trials: usize, mut trial: impl FnMut() -> Duration) -> f64 {
    trial();
    let times: Vec<Duration> = (0..trials).map(|_| trial()).collect();
    median(times).as_nanos() as f64 / w.ops() as f64
}

/// One row's measurements at one worker count.
struct Cell {
    ours: f64,
    tokio: f64,
    counts: Counts,
    /// Operations over the timed trials (the counters' denominator).
    ops: u64,
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cpus} CPUs (`available_parallelism`), {model}")
}

/// The 1-minute load average (`/proc/loadavg`), if the system has one:
/// on a shared machine, how many threads besides ours wanted a CPU.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}

/// A ratio with two decimals, or "–" where tokio's side was not run.
fn ratio(v: f64) -> String {
    if v.is_nan() {
        "–".to_string()
    } else {
        format!("{v:.2}")
    }
}

fn ns(v: f64) -> String {
    if v.is_nan() {
        "–".to_string()
    } else if v < 10.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// A ratio of counts: three decimals, or three significant digits below
/// 0.01 (a wake-up per trial is a few per million operations).
fn per(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    }
}

fn main() {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse(&raw) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("scaling: {e}");
            }
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    };
    let mut list = workloads();
    for w in &mut list {
        if args.quick {
            w.size = (w.size / 10).max(1);
        }
        if let Some((_, n)) = args.sizes.iter().rev().find(|(k, _)| k == w.key) {
            w.size = *n;
        }
    }
    if let Some(only) = &args.only {
        list.retain(|w| only.iter().any(|k| k == w.key));
    }
    let load_start = load();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (heavy_iters, per_iter) = match args.heavy_iters {
        Some(n) => (n, f64::NAN),
        None => calibrate(),
    };
    let heavy_ns = {
        let start = Instant::now();
        for _ in 0..200 {
            heavy(heavy_iters);
        }
        start.elapsed().as_nanos() as f64 / 200.0
    };

    println!(
        "Command: `{}`",
        ["scaling".to_string()]
            .iter()
            .chain(&raw)
            .cloned()
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!();
    println!("Machine: {}.", machine());
    println!();
    let calibration = if per_iter.is_nan() {
        "set by --heavy-iters".to_string()
    } else {
        format!("calibrated: {per_iter:.1} ns each, best of 5 runs of 100 000")
    };
    println!(
        "Calibration: one `fj-heavy` message = {heavy_iters} iterations of `x = sin x + cos x + 1` \
         ({calibration}); measured {:.2} µs per message on one thread.",
        heavy_ns / 1e3
    );
    println!();
    println!(
        "{} trials per cell after one warm-up, median; {}.",
        args.trials,
        if args.quick {
            "`--quick`: sizes divided by 10"
        } else {
            "full sizes"
        }
    );
    if args.ours_only {
        println!();
        println!("`--ours-only`: tokio's side not run (its columns are empty).");
    }
    let max = args.workers.iter().copied().max().unwrap_or(1);
    if max > cpus {
        println!();
        println!(
            "**Oversubscribed**: up to {max} workers on {cpus} CPUs. Times at worker counts \
             above {cpus} measure the OS scheduler's time-slicing more than ours and mean little; \
             the counters (wake-ups, parks, steals per operation) are counts and are what matter."
        );
    }

    // rows[w][n]
    let mut rows: Vec<Vec<Cell>> = Vec::new();
    for w in &list {
        let mut cells = Vec::new();
        for &workers in &args.workers {
            let s = scheduler(workers);
            ours(w, &s, heavy_iters);
            let before = Counts::read(&s);
            let times: Vec<Duration> = (0..args.trials).map(|_| ours(w, &s, heavy_iters)).collect();
            let counts = Counts::read(&s).since(&before);
            drop(s);
            let our_ns = median(times).as_nanos() as f64 / w.ops() as f64;

            let their_ns = if args.ours_only {
                eprintln!("{:<14} {workers:>3}w  ours {:>9} ns", w.key, ns(our_ns));
                f64::NAN
            } else {
                let rt = runtime(workers);
                let their_ns = measure(w, args.trials, || tokio(w, &rt, heavy_iters));
                drop(rt);
                eprintln!(
                    "{:<14} {workers:>3}w  ours {:>9} ns  tokio {:>9} ns  ratio {:.2}",
                    w.key,
                    ns(our_ns),
                    ns(their_ns),
                    their_ns / our_ns
                );
                their_ns
            };
            cells.push(Cell {
                ours: our_ns,
                tokio: their_ns,
                counts,
                ops: w.ops() * args.trials as u64,
            });
        }
        rows.push(cells);
    }

    println!();
    println!(
        "Load average (1 min, `/proc/loadavg`): {load_start} at the start, {} at the end.",
        load()
    );

    let header = |cols: &[String]| {
        println!("| workload | {} |", cols.join(" | "));
        println!("|---|{}", "---|".repeat(cols.len()));
    };

    println!();
    println!(
        "### Time per operation (ns), tokio and ours at each worker count\n\n\
         Ratio = tokio / ours: above 1 we are faster."
    );
    println!();
    let cols: Vec<String> = args
        .workers
        .iter()
        .flat_map(|n| {
            [
                format!("tokio {n}w"),
                format!("ours {n}w"),
                format!("ratio {n}w"),
            ]
        })
        .collect();
    header(&cols);
    for (w, cells) in list.iter().zip(&rows) {
        let vals: Vec<String> = cells
            .iter()
            .flat_map(|c| {
                [
                    ns(c.tokio),
                    ns(c.ours),
                    format!("**{}**", ratio(c.tokio / c.ours)),
                ]
            })
            .collect();
        println!("| {} | {} |", w.label(), vals.join(" | "));
    }

    let base = args.workers[0];
    println!();
    println!(
        "### Time at N workers / time at {base}\n\n\
         Below 1: faster with more workers; above 1: slower."
    );
    println!();
    let cols: Vec<String> = args
        .workers
        .iter()
        .flat_map(|n| [format!("ours {n}w"), format!("tokio {n}w")])
        .collect();
    header(&cols);
    for (w, cells) in list.iter().zip(&rows) {
        let vals: Vec<String> = cells
            .iter()
            .flat_map(|c| {
                [
                    format!("{:.2}", c.ours / cells[0].ours),
                    ratio(c.tokio / cells[0].tokio),
                ]
            })
            .collect();
        println!("| {} | {} |", w.title, vals.join(" | "));
    }

    let counter = |title: &str, what: &str, f: &dyn Fn(&Cell) -> String| {
        println!();
        println!("### {title}\n\n{what}");
        println!();
        let cols: Vec<String> = args.workers.iter().map(|n| format!("{n}w")).collect();
        header(&cols);
        for (w, cells) in list.iter().zip(&rows) {
            let vals: Vec<String> = cells.iter().map(f).collect();
            println!("| {} | {} |", w.title, vals.join(" | "));
        }
    };
    let per_op = |v: u64, c: &Cell| per(v as f64 / c.ops as f64);
    counter(
        "Wake-ups per operation (ours)",
        "`unparks` / operations: thread wake-ups (a futex wake and a context switch each).",
        &|c| per_op(c.counts.unparks, c),
    );
    counter(
        "Empty wake-ups per operation (ours)",
        "`empty_unparks` / operations: wake-ups after which the worker found no work and parked again.",
        &|c| per_op(c.counts.empty_unparks, c),
    );
    counter(
        "Parks per operation (ours)",
        "`parks` / operations.",
        &|c| per_op(c.counts.parks, c),
    );
    counter(
        "Steal attempts per item stolen (ours)",
        "`steal_attempts` / `items_stolen` (attempts and items stolen in brackets; – when nothing was stolen).",
        &|c| {
            let (a, s) = (c.counts.steal_attempts, c.counts.items_stolen);
            if s == 0 {
                format!("– ({a} / 0)")
            } else {
                format!("{:.2} ({a} / {s})", a as f64 / s as f64)
            }
        },
    );
    counter(
        "Steal attempts per operation (ours)",
        "`steal_attempts` / operations: how much searching each operation costs, \
         whether or not it finds anything.",
        &|c| per_op(c.counts.steal_attempts, c),
    );
    counter(
        "Runs per operation (ours)",
        "`items_run` of all workers / operations: process runs (each drains the process's \
         queue, steps it, parks or requeues it) per message or process. Below 1 where a run \
         takes several messages at once; a run per message where workers keep up with the \
         senders, each paying the wake, the run and the park.",
        &|c| per_op(c.counts.items_run.iter().sum(), c),
    );
    counter(
        "Busiest worker's share of the runs (ours)",
        "`items_run` of the worker that ran the most / `items_run` of all (a run steps one \
         process), over the timed trials: 1 when one worker did everything, 1/N when N \
         shared it evenly.",
        &|c| {
            let total: u64 = c.counts.items_run.iter().sum();
            let max = c.counts.items_run.iter().copied().max().unwrap_or(0);
            if total == 0 {
                "–".into()
            } else {
                format!("{:.2}", max as f64 / total as f64)
            }
        },
    );
    counter(
        "Spins per operation (ours)",
        "`spins` / operations: failed searches answered by spinning or yielding rather than parking.",
        &|c| per_op(c.counts.spins, c),
    );
}
