//! The scheduler's two hottest loops, each beside its tokio counterpart,
//! as a plain program to run under a profiler or an instruction counter
//! (the criterion benchmarks time them; this counts them).
//!
//! * `yields`: 1 000 processes × 100 yields completed at once by the
//!   handler (tokio: 1 000 tasks × 100 `yield_now`).
//! * `ping-pong`: two processes exchange 10 000 round trips through each
//!   other's `Address` (tokio: two tasks on unbounded channels).
//! * `counting`: the main thread sends 1 000 000 messages to one process
//!   through its `Address` (tokio: one task on one unbounded channel); the
//!   sender is profiled too (`--toggle-collect='*hot_loops*'` adds it).
//! * `spawn`: the main thread submits 100 000 processes that finish at
//!   their first step (tokio: 100 000 tasks that return at once).
//!
//! ```sh
//! cargo build --release -p stepsched-benches --example hot_loops
//! target/release/examples/hot_loops ping-pong stepsched 1 50
//! valgrind --tool=callgrind --toggle-collect='*worker*main_loop*' \
//!     target/release/examples/hot_loops ping-pong stepsched 1 5
//! valgrind --tool=callgrind --toggle-collect='*multi_thread*worker*run*' \
//!     target/release/examples/hot_loops ping-pong tokio 1 5
//! ```
//!
//! Arguments: workload (`yields`, `ping-pong`, `counting` or `spawn`), peer (`stepsched` or
//! `tokio`), workers, rounds. Prints the time per yield or round trip; the
//! submitting thread waits by spinning on an atomic, so it adds nothing to
//! the workers' profile.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use stepsched::{
    Address, Completer, Context, Error, Event, Events, Handle, Pid, Process, Scheduler, Status,
    StepOutput,
};

const YIELDERS: usize = 1_000;
const YIELDS: u32 = 100;
const ROUND_TRIPS: u32 = 10_000;
const COUNTED: u32 = 1_000_000;
const SPAWN: usize = 100_000;

/// A yielder, or one end of the ping-pong.
enum Hot {
    Yielder {
        left: u32,
    },
    Player {
        peer: Pid,
        handle: Handle<Hot>,
        to: Option<Address<Hot>>,
        left: u32,
        server: bool,
    },
    Sink {
        left: u32,
    },
}

impl Process for Hot {
    type Input = ();
    type Message = u64;
    type Response = u64;
    type Command = &'static str;
    type Output = u64;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        ctx: &mut Context<'_, Self>,
        events: Events<'_, u64>,
        out: &mut StepOutput<&'static str, u64>,
    ) -> Result<(), Error> {
        match self {
            Hot::Yielder { left } => {
                for event in events {
                    if let Event::Completion { result, .. } = event {
                        result?;
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
            Hot::Player {
                peer,
                handle,
                to,
                left,
                server,
            } => {
                if to.is_none() {
                    *to = handle.address(*peer);
                    if *server {
                        send(to, ctx.pid(), 0)?;
                    }
                }
                out.set_status(Status::Idle);
                for event in events {
                    if let Event::Message { data, .. } = event {
                        *left -= 1;
                        if !*server || *left > 0 {
                            send(to, ctx.pid(), data + 1)?;
                        }
                        if *left == 0 {
                            out.set_status(Status::Done(data));
                        }
                    }
                }
            }
            Hot::Sink { left } => {
                out.set_status(Status::Idle);
                for event in events {
                    if let Event::Message { .. } = event {
                        *left -= 1;
                        if *left == 0 {
                            out.set_status(Status::Done(0));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

fn send(to: &Option<Address<Hot>>, from: Pid, n: u64) -> Result<(), Error> {
    let to = to
        .as_ref()
        .ok_or_else(|| Error::failed("the peer is gone"))?;
    Ok(to.send_from(from, n)?)
}

/// Processes and yields per process of the `yields` and `spawn` workloads.
fn shape(workload: &str) -> (usize, u32) {
    if workload == "spawn" {
        (SPAWN, 0)
    } else {
        (YIELDERS, YIELDS)
    }
}

/// Spins until `left` is 0 (the submitting thread stays off the workers'
/// profile: no futex, no condition variable).
fn wait(left: &AtomicUsize) {
    while left.load(Ordering::Acquire) != 0 {
        std::thread::yield_now();
    }
}

fn ours(workload: &str, workers: usize, rounds: u32) -> Duration {
    let left = Arc::new(AtomicUsize::new(0));
    let done = left.clone();
    let s = Scheduler::<Hot>::builder()
        .workers(workers)
        .handler("now", |_: &'static str, done: Completer<Hot>| {
            done.complete(Ok(0));
        })
        .on_complete(move |_, result| {
            assert!(result.is_ok(), "a process failed");
            done.fetch_sub(1, Ordering::AcqRel);
        })
        .build()
        .expect("start the scheduler");
    let start = Instant::now();
    for _ in 0..rounds {
        if workload == "yields" || workload == "spawn" {
            let (count, yields) = shape(workload);
            left.store(count, Ordering::Release);
            for _ in 0..count {
                let process = Hot::Yielder { left: yields };
                drop(
                    s.submit(s.allocate_pid(), process, "run", ())
                        .expect("submit"),
                );
            }
        } else if workload == "counting" {
            left.store(1, Ordering::Release);
            let process = Hot::Sink { left: COUNTED };
            let to = s
                .submit(s.allocate_pid(), process, "run", ())
                .expect("submit")
                .address();
            for m in 0..COUNTED {
                to.send(u64::from(m)).expect("the counter is live");
            }
        } else {
            left.store(2, Ordering::Release);
            let (a, b) = (s.allocate_pid(), s.allocate_pid());
            for (pid, peer, server) in [(b, a, false), (a, b, true)] {
                let process = Hot::Player {
                    peer,
                    handle: s.handle(),
                    to: None,
                    left: ROUND_TRIPS,
                    server,
                };
                drop(s.submit(pid, process, "run", ()).expect("submit"));
            }
        }
        wait(&left);
    }
    let elapsed = start.elapsed();
    let stats = s.stats();
    eprintln!(
        "steps {} messages {} submitted {}",
        stats.steps, stats.messages, stats.submitted
    );
    for (i, w) in stats.workers.iter().enumerate() {
        eprintln!(
            "  worker {i}: run {} stolen {} inbox {} global {} parks {} spins {}",
            w.items_run, w.items_stolen, w.inbox_pops, w.global_pops, w.parks, w.spins
        );
    }
    elapsed
}

fn tokio(workload: &str, workers: usize, rounds: u32) -> Duration {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .build()
        .expect("start the runtime");
    let left = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    for _ in 0..rounds {
        if workload == "yields" || workload == "spawn" {
            let (count, yields) = shape(workload);
            left.store(count, Ordering::Release);
            for _ in 0..count {
                let done = left.clone();
                drop(rt.spawn(async move {
                    for _ in 0..yields {
                        tokio::task::yield_now().await;
                    }
                    done.fetch_sub(1, Ordering::AcqRel);
                }));
            }
        } else if workload == "counting" {
            left.store(1, Ordering::Release);
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
            let done = left.clone();
            drop(rt.spawn(async move {
                for _ in 0..COUNTED {
                    rx.recv().await.expect("a message");
                }
                done.fetch_sub(1, Ordering::AcqRel);
            }));
            for m in 0..COUNTED {
                tx.send(u64::from(m)).expect("the task is live");
            }
        } else {
            left.store(2, Ordering::Release);
            let (to_a, mut a_rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
            let (to_b, mut b_rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
            let done = left.clone();
            drop(rt.spawn(async move {
                for _ in 0..ROUND_TRIPS {
                    let n = b_rx.recv().await.expect("a ball");
                    to_a.send(n + 1).expect("the server is waiting");
                }
                done.fetch_sub(1, Ordering::AcqRel);
            }));
            let done = left.clone();
            drop(rt.spawn(async move {
                to_b.send(0).expect("the receiver is waiting");
                for left in (0..ROUND_TRIPS).rev() {
                    let n = a_rx.recv().await.expect("a ball");
                    if left > 0 {
                        to_b.send(n + 1).expect("the receiver is waiting");
                    }
                }
                done.fetch_sub(1, Ordering::AcqRel);
            }));
        }
        wait(&left);
    }
    start.elapsed()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [workload, peer, workers, rounds] = args.as_slice() else {
        eprintln!(
            "usage: hot_loops <yields|ping-pong|counting|spawn> <stepsched|tokio> <workers> <rounds>"
        );
        std::process::exit(2);
    };
    let (Ok(workers), Ok(rounds)) = (workers.parse::<usize>(), rounds.parse::<u32>()) else {
        eprintln!("workers and rounds are numbers");
        std::process::exit(2);
    };
    let (units, unit) = match workload.as_str() {
        "yields" => ((YIELDERS as u32) * YIELDS, "yield"),
        "ping-pong" => (ROUND_TRIPS, "round trip"),
        "counting" => (COUNTED, "message"),
        "spawn" => (SPAWN as u32, "process"),
        other => {
            eprintln!("unknown workload `{other}`: yields, ping-pong, counting or spawn");
            std::process::exit(2);
        }
    };
    let elapsed = match peer.as_str() {
        "stepsched" => ours(workload, workers, rounds),
        "tokio" => tokio(workload, workers, rounds),
        other => {
            eprintln!("unknown peer `{other}`: stepsched or tokio");
            std::process::exit(2);
        }
    };
    println!(
        "{workload} {peer} {workers}w: {:?} per {unit}",
        elapsed / (units * rounds)
    );
}
