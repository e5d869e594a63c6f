//! Benchmarks of the deterministic simulator (`stepsched-sim`): simulated
//! steps per second, on one thread, with the real scheduler's ping-pong
//! (one worker) measured in the same run for comparison.
//!
//! * `sim_ping_pong`: two processes exchange 10 000 round trips; each step
//!   answers the message it got to its peer with `Context::send` and
//!   returns `Idle` (20 002 steps per iteration). `sim` runs it in the
//!   simulator with its trace off, `sim-traced` with the trace recorded
//!   (one formatted line per step), `stepsched-1w` on the real scheduler
//!   with one worker (the same process type and the same sends by PID;
//!   20 002 or 20 003 steps, as the ponger's first step does or does not
//!   already hold the first ping).
//! * `sim_fan_in`: 100 producers each send 100 messages to one collector,
//!   one message per step (`Continue` in between); the collector counts
//!   them and finishes after the last. The steps per iteration are the
//!   producers' 10 100 and the collector's, which depend on how the seeded
//!   order batches its messages (fixed for the seed: measured once before
//!   timing and used as the throughput).
//!
//! Throughput is in steps: criterion's "elements" are steps, so its
//! `thrpt` line reads as steps per second. Every iteration checks the
//! results and the step count.
//!
//! Run with `cargo bench -p stepsched-benches --bench sim`.

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group};
use stepsched::{Context, Error, Event, Events, Pid, Process, Status, StepOutput};
use stepsched_sim::Sim;

const ROUND_TRIPS: u32 = 10_000;
const PRODUCERS: u32 = 100;
const EACH: u32 = 100;

/// The processes of both workloads, one type; each finishes with the
/// number of steps it took.
enum Bench {
    /// Sends `left` pings to its peer, one per reply; then a 0, which
    /// stops the peer.
    Pinger { peer: Pid, left: u32, steps: u32 },
    /// Answers each ping with the same number; stops on 0.
    Ponger { steps: u32 },
    /// Sends `left` messages to the collector, one per step.
    Producer { to: Pid, left: u32, steps: u32 },
    /// Counts `left` messages.
    Collector { left: u32, steps: u32 },
}

impl Process for Bench {
    type Input = ();
    type Message = u32;
    type Response = ();
    type Command = String;
    type Output = u32;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        ctx: &mut Context<'_, Self>,
        events: Events<'_, u32, ()>,
        out: &mut StepOutput<String, u32>,
    ) -> Result<(), Error> {
        let send = |to, n| ctx.send(to, n).map_err(|e| Error::failed(e.to_string()));
        match self {
            Bench::Pinger { peer, left, steps } => {
                *steps += 1;
                // The first step (no event) sends the first ping; each
                // later one has the reply.
                drop(events);
                if *left == 0 {
                    send(*peer, 0)?;
                    out.set_status(Status::Done(*steps));
                } else {
                    send(*peer, *left)?;
                    *left -= 1;
                    out.set_status(Status::Idle);
                }
            }
            Bench::Ponger { steps } => {
                *steps += 1;
                out.set_status(Status::Idle);
                for event in events {
                    if let Event::Message {
                        from: Some(from),
                        data,
                    } = event
                    {
                        if data == 0 {
                            out.set_status(Status::Done(*steps));
                        } else {
                            send(from, data)?;
                        }
                    }
                }
            }
            Bench::Producer { to, left, steps } => {
                *steps += 1;
                if *left == 0 {
                    out.set_status(Status::Done(*steps));
                } else {
                    send(*to, *left)?;
                    *left -= 1;
                    out.set_status(Status::Continue);
                }
            }
            Bench::Collector { left, steps } => {
                *steps += 1;
                *left -= events.count() as u32;
                out.set_status(if *left == 0 {
                    Status::Done(*steps)
                } else {
                    Status::Idle
                });
            }
        }
        Ok(())
    }
}

/// The ping-pong in the simulator: the steps taken.
fn sim_ping_pong(trace: bool) -> u64 {
    let sim: Sim<Bench> = Sim::builder().seed(1).trace(trace).build();
    let (ping, pong) = (sim.allocate_pid(), sim.allocate_pid());
    let pong = sim
        .submit(pong, Bench::Ponger { steps: 0 }, "main", ())
        .unwrap();
    let pinger = Bench::Pinger {
        peer: pong.pid(),
        left: ROUND_TRIPS,
        steps: 0,
    };
    let ping = sim.submit(ping, pinger, "main", ()).unwrap();
    let report = sim.run();
    let steps = ping.join().unwrap() + pong.join().unwrap();
    assert_eq!(u64::from(steps), report.steps);
    report.steps
}

/// The same ping-pong on the real scheduler: the steps taken.
fn scheduler_ping_pong(scheduler: &stepsched::Scheduler<Bench>) -> u64 {
    let (ping, pong) = (scheduler.allocate_pid(), scheduler.allocate_pid());
    let pong = scheduler
        .submit(pong, Bench::Ponger { steps: 0 }, "main", ())
        .unwrap();
    let pinger = Bench::Pinger {
        peer: pong.pid(),
        left: ROUND_TRIPS,
        steps: 0,
    };
    let ping = scheduler.submit(ping, pinger, "main", ()).unwrap();
    u64::from(ping.join().unwrap() + pong.join().unwrap())
}

/// The fan-in in the simulator: the steps taken.
fn sim_fan_in() -> u64 {
    let sim: Sim<Bench> = Sim::builder().seed(1).trace(false).build();
    let to = sim.allocate_pid();
    let collector = Bench::Collector {
        left: PRODUCERS * EACH,
        steps: 0,
    };
    let collector = sim.submit(to, collector, "main", ()).unwrap();
    for _ in 0..PRODUCERS {
        let producer = Bench::Producer {
            to,
            left: EACH,
            steps: 0,
        };
        sim.submit(sim.allocate_pid(), producer, "main", ())
            .unwrap();
    }
    let report = sim.run();
    assert_eq!(report.live, 0);
    let collected = collector.join().unwrap();
    assert!(collected >= 1);
    report.steps
}

fn ping_pong(c: &mut Criterion) {
    let steps = sim_ping_pong(false);
    // The ponger's empty first step may come before or after the first
    // ping, as the seed's schedule has it.
    assert!(steps.abs_diff(2 * u64::from(ROUND_TRIPS) + 2) <= 1);
    let mut group = c.benchmark_group("sim_ping_pong");
    group.throughput(Throughput::Elements(steps));
    group.bench_function("sim", |b| {
        b.iter(|| assert_eq!(sim_ping_pong(false), steps));
    });
    group.bench_function("sim-traced", |b| {
        b.iter(|| assert_eq!(sim_ping_pong(true), steps));
    });
    let scheduler = stepsched::Scheduler::<Bench>::builder()
        .workers(1)
        .build()
        .unwrap();
    group.bench_function("stepsched-1w", |b| {
        // The ponger's first step may or may not already hold the first
        // ping: one step more or less than in the simulator's order.
        b.iter(|| assert!(scheduler_ping_pong(&scheduler).abs_diff(steps) <= 1));
    });
    group.finish();
}

fn fan_in(c: &mut Criterion) {
    let steps = sim_fan_in();
    let mut group = c.benchmark_group("sim_fan_in");
    group.throughput(Throughput::Elements(steps));
    group.bench_function("sim", |b| {
        b.iter(|| assert_eq!(sim_fan_in(), steps));
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = ping_pong, fan_in
}

fn main() {
    println!(
        "sim_fan_in: {} steps per iteration ({} producer steps)",
        sim_fan_in(),
        PRODUCERS * (EACH + 1)
    );
    benches();
    Criterion::default().configure_from_args().final_summary();
}
