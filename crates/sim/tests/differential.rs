//! The simulator against the real scheduler, on a workload whose results do
//! not depend on the order of steps: every seed (with reordering and delay
//! faults on) must give the scheduler's results; and a shutdown gives the
//! scheduler's results and report.

use std::time::Duration;

use proptest::prelude::*;
use stepsched_process::{Context, Error, Event, Events, Pid, Process, Status, StepOutput};
use stepsched_sim::{Faults, Sim};

/// "Double this number", served by a handler of the name `double`.
struct Double(u64);

// One impl serves both hosts: the scheduler and the simulator re-export
// the same trait.
impl stepsched_sim::Command for Double {
    fn name(&self) -> &str {
        "double"
    }
}

enum Work {
    New,
    /// Yields `1..=k` to be doubled, sends the sum to the collector,
    /// finishes with it.
    Worker {
        collector: Pid,
        k: u64,
        sum: u64,
        waiting: u64,
    },
    /// Sums `left` messages (each worker sends two: its sum, then
    /// 1_000_000); finishes with the total.
    Collector {
        left: u64,
        total: u64,
    },
    /// Counts messages until its cancel event, then stops with
    /// `Cancelled`.
    Listener,
}

impl Process for Work {
    type Input = (Option<Pid>, u64);
    type Message = u64;
    type Response = u64;
    type Command = Double;
    type Output = u64;

    fn init(
        &mut self,
        _: &Context<'_, Self>,
        method: &str,
        (collector, n): (Option<Pid>, u64),
    ) -> Result<(), Error> {
        *self = match (method, collector) {
            ("worker", Some(collector)) => Work::Worker {
                collector,
                k: n,
                sum: 0,
                waiting: n,
            },
            ("collector", None) => Work::Collector { left: n, total: 0 },
            ("listener", None) => Work::Listener,
            _ => return Err(Error::UnknownMethod(method.into())),
        };
        Ok(())
    }

    fn step(
        &mut self,
        ctx: &mut Context<'_, Self>,
        events: Events<'_, u64, u64>,
        out: &mut StepOutput<Double, u64>,
    ) -> Result<(), Error> {
        match self {
            Work::New => return Err(Error::failed("stepped before init")),
            Work::Listener => {
                for event in events {
                    if event.is_cancel() {
                        assert!(ctx.is_cancelled(), "the token is cancelled first");
                        return Err(Error::Cancelled);
                    }
                }
                out.set_status(Status::Idle);
            }
            Work::Worker {
                collector,
                k,
                sum,
                waiting,
            } => {
                for n in 1..=*k {
                    out.push_yield(n, Double(n));
                }
                *k = 0;
                for event in events {
                    if let Event::Completion { result, .. } = event {
                        *sum += result?;
                        *waiting -= 1;
                    }
                }
                if *waiting == 0 {
                    let send = |m| {
                        ctx.send(*collector, m)
                            .map_err(|e| Error::failed(e.to_string()))
                    };
                    send(*sum)?;
                    send(1_000_000)?;
                    out.set_status(Status::Done(*sum));
                } else {
                    out.set_status(Status::Yield);
                }
            }
            Work::Collector { left, total } => {
                for event in events {
                    if let Event::Message { data, .. } = event {
                        *total += data;
                        *left -= 1;
                    }
                }
                out.set_status(if *left == 0 {
                    Status::Done(*total)
                } else {
                    Status::Idle
                });
            }
        }
        Ok(())
    }
}

const WORKERS: u64 = 6;

/// How many seeds the simulator is checked on against the scheduler.
const SEEDS: u64 = 10_000;

/// The results in the simulator (the collector's, then each worker's),
/// and the trace.
fn simulated_with_trace(seed: u64) -> (Result<Vec<u64>, String>, String) {
    let sim: Sim<Work> = Sim::builder()
        .seed(seed)
        .faults(Faults {
            reorder: 0.5,
            short_batch: 0.3,
            delay: 0.5,
            max_delay: Duration::from_millis(5),
            ..Faults::default()
        })
        .handler("double", |Double(n), done| {
            done.complete(Ok(n * 2));
        })
        .build();
    // The same calls as `scheduled` below: submit, then join each.
    let collector = sim.allocate_pid();
    let collector_join = sim
        .submit(collector, Work::New, "collector", (None, 2 * WORKERS))
        .unwrap();
    let joins: Vec<_> = (1..=WORKERS)
        .map(|k| {
            let pid = sim.allocate_pid();
            sim.submit(pid, Work::New, "worker", (Some(collector), k))
                .unwrap()
        })
        .collect();
    let results = std::iter::once(collector_join)
        .chain(joins)
        .map(|join| {
            let pid = join.pid();
            // An hour of virtual time is "never" here: a stuck process
            // comes back as an error with the trace, not a panic.
            match join.join_timeout(Duration::from_secs(3600)) {
                Ok(Ok(v)) => Ok(v),
                other => Err(format!(
                    "seed {seed}: {pid} gave {:?}\n{}",
                    other.map_err(|_| "no result"),
                    sim.trace_text()
                )),
            }
        })
        .collect();
    (results, sim.trace_text())
}

/// The results in the simulator: the collector's, then each worker's.
fn simulated(seed: u64) -> Result<Vec<u64>, String> {
    simulated_with_trace(seed).0
}

/// The same results from the real scheduler, on two workers.
fn scheduled() -> Vec<u64> {
    let scheduler = stepsched::Scheduler::<Work>::builder()
        .workers(2)
        .handler("double", |Double(n), done: stepsched::Completer<Work>| {
            done.complete(Ok(n * 2));
        })
        .build()
        .unwrap();
    let collector = scheduler.allocate_pid();
    let collector_join = scheduler
        .submit(collector, Work::New, "collector", (None, 2 * WORKERS))
        .unwrap();
    let joins: Vec<_> = (1..=WORKERS)
        .map(|k| {
            let pid = scheduler.allocate_pid();
            scheduler
                .submit(pid, Work::New, "worker", (Some(collector), k))
                .unwrap()
        })
        .collect();
    std::iter::once(collector_join)
        .chain(joins)
        .map(|join| join.join().unwrap())
        .collect()
}

#[test]
fn every_seed_gives_the_real_schedulers_results() {
    let expected = scheduled();
    // Worker k sums 2 * (1 + ... + k) = k (k + 1).
    let workers: Vec<u64> = (1..=WORKERS).map(|k| k * (k + 1)).collect();
    assert_eq!(expected[1..], workers[..]);
    assert_eq!(
        expected[0],
        workers.iter().sum::<u64>() + WORKERS * 1_000_000
    );
    let start = stepsched_sim::seed_from_env(0);
    for seed in start..start + SEEDS {
        assert_eq!(simulated(seed), Ok(expected.clone()), "seed {seed}");
    }
}

const LISTENERS: u64 = 6;

/// Listeners that got messages, shut down: their results and the report,
/// in the simulator.
fn simulated_shutdown(seed: u64) -> (Vec<Result<u64, Error>>, (usize, usize)) {
    let sim: Sim<Work> = Sim::builder()
        .seed(seed)
        .faults(Faults {
            reorder: 0.5,
            short_batch: 0.3,
            ..Faults::default()
        })
        .build();
    let joins: Vec<_> = (0..LISTENERS)
        .map(|n| {
            let join = sim
                .submit(sim.allocate_pid(), Work::New, "listener", (None, 0))
                .unwrap();
            sim.send(join.pid(), n).unwrap();
            join
        })
        .collect();
    let report = sim.shutdown(Duration::from_secs(60));
    let results = joins.into_iter().map(|j| j.join()).collect();
    (results, (report.cancelled, report.forced))
}

/// The same in the scheduler.
fn scheduled_shutdown() -> (Vec<Result<u64, Error>>, (usize, usize)) {
    let scheduler = stepsched::Scheduler::<Work>::builder()
        .workers(2)
        .build()
        .unwrap();
    let joins: Vec<_> = (0..LISTENERS)
        .map(|n| {
            let join = scheduler
                .submit(scheduler.allocate_pid(), Work::New, "listener", (None, 0))
                .unwrap();
            scheduler.send(join.pid(), n).unwrap();
            join
        })
        .collect();
    // Every listener stops on its cancel event: the shutdown returns as
    // soon as they have, long before the deadline.
    let report = scheduler.shutdown(Duration::from_secs(60)).unwrap();
    let results = joins.into_iter().map(|j| j.join()).collect();
    (results, (report.cancelled, report.forced))
}

#[test]
fn a_shutdown_gives_the_real_schedulers_results_and_report() {
    let expected = scheduled_shutdown();
    assert_eq!(
        expected,
        (
            (0..LISTENERS).map(|_| Err(Error::Cancelled)).collect(),
            (6, 0)
        )
    );
    for seed in 0..200 {
        assert_eq!(simulated_shutdown(seed), expected, "seed {seed}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_seed_gives_the_order_independent_results(seed in any::<u64>()) {
        let workers: Vec<u64> = (1..=WORKERS).map(|k| k * (k + 1)).collect();
        let collector = workers.iter().sum::<u64>() + WORKERS * 1_000_000;
        let results = simulated(seed).map_err(TestCaseError::fail)?;
        prop_assert_eq!(results[0], collector, "seed {}", seed);
        prop_assert_eq!(&results[1..], &workers[..], "seed {}", seed);
    }

    #[test]
    fn any_seed_replays_its_trace_byte_for_byte(seed in any::<u64>()) {
        let (_, first) = simulated_with_trace(seed);
        let (_, second) = simulated_with_trace(seed);
        prop_assert_eq!(first, second, "seed {}", seed);
    }
}
