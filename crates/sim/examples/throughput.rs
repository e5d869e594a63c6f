//! Simulated steps per second, without criterion: the workloads of
//! `benches/benches/sim.rs`, timed over many runs (the median and the best
//! run). `sim_ping_pong`: two processes exchanging 10 000 round trips,
//! each step answering with `Context::send`, with the trace off and on;
//! `sim_fan_in`: 100 producers sending 100 messages each to one collector,
//! one message per step, trace off. The ping-pong again with the
//! simulated network on and no faults: with no delay, and with a delay of
//! 1 to 10 ms per message (every message then waits in flight and moves
//! the clock), trace off and on.
//!
//! ```sh
//! cargo run --release -p stepsched-sim --example throughput
//! cargo run --release -p stepsched-sim --example throughput -- 500   # runs
//! ```

use std::time::{Duration, Instant};

use stepsched_process::{Context, Error, Event, Events, Pid, Process, Status, StepOutput};
use stepsched_sim::{Network, Sim};

const ROUND_TRIPS: u32 = 10_000;
const PRODUCERS: u32 = 100;
const EACH: u32 = 100;

/// The processes: the same steps as the bench's.
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

/// One ping-pong, over `network` if given: the steps taken.
fn ping_pong(trace: bool, network: Option<Network>) -> u64 {
    let mut builder = Sim::builder().seed(1).trace(trace);
    if let Some(network) = network {
        builder = builder.network(network);
    }
    let sim: Sim<Bench> = builder.build();
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

/// The fan-in: the steps taken.
fn fan_in() -> u64 {
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
    assert!(collector.join().unwrap() >= 1);
    report.steps
}

/// Times `workload` over `runs` runs and prints the median and the best.
fn measure(name: &str, workload: impl Fn() -> u64, runs: usize) {
    // Warm up.
    for _ in 0..runs / 10 + 1 {
        workload();
    }
    let mut times: Vec<(Duration, u64)> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let steps = workload();
            (start.elapsed(), steps)
        })
        .collect();
    times.sort();
    let rate = |(t, steps): (Duration, u64)| steps as f64 / t.as_secs_f64() / 1e6;
    let (median, best) = (times[runs / 2], times[0]);
    println!(
        "{name}: {} steps a run; median {:.3} ms ({:.2} M steps/s), best {:.3} ms ({:.2} M steps/s), {runs} runs",
        median.1,
        median.0.as_secs_f64() * 1e3,
        rate(median),
        best.0.as_secs_f64() * 1e3,
        rate(best),
    );
}

fn main() {
    let runs = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    measure("ping-pong, trace off", || ping_pong(false, None), runs);
    measure("ping-pong, trace on ", || ping_pong(true, None), runs);
    let delayed = Network::new().delay(Duration::from_millis(1), Duration::from_millis(10));
    let plain = Some(Network::new());
    measure(
        "ping-pong, network (no delay), trace off",
        || ping_pong(false, plain),
        runs,
    );
    measure(
        "ping-pong, network (1-10 ms), trace off",
        || ping_pong(false, Some(delayed)),
        runs,
    );
    measure(
        "ping-pong, network (1-10 ms), trace on ",
        || ping_pong(true, Some(delayed)),
        runs,
    );
    measure("fan-in,    trace off", fan_in, runs);
}
