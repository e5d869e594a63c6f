//! Stress scenarios for every stepsched layer.
//!
//! Run through `cargo xtask stress [scenario] [flags]`, which builds this
//! binary in release mode. Each scenario checks its invariants (exactly-once
//! delivery with per-item ledgers, never totals alone) and returns an error
//! on the first breach, so the process exits non-zero.

mod deque;
mod lua;
mod mpsc;
mod pool;
mod scheduler;

use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Options shared by every scenario.
#[derive(Debug, Clone)]
pub(crate) struct Opts {
    /// Worker (or thief) threads; defaults to the available parallelism.
    pub(crate) workers: usize,
    /// Number of processes (scheduler scenario) or items scale factor.
    pub(crate) processes: usize,
    /// Wall-clock budget; a scenario stops starting new rounds after it.
    pub(crate) seconds: f64,
    /// Seed of every random choice; printed so a failing run can be replayed.
    pub(crate) seed: u64,
    /// Small, fast settings for CI.
    pub(crate) quick: bool,
    /// Soak mode: repeat rounds until `seconds` have passed.
    pub(crate) soak: bool,
}

impl Opts {
    /// The instant after which no new round starts.
    pub(crate) fn deadline(&self, start: Instant) -> Instant {
        start + Duration::from_secs_f64(self.seconds)
    }
}

/// A scenario: its name and its entry point.
type Scenario = (&'static str, fn(&Opts) -> Result<(), String>);

const SCENARIOS: &[Scenario] = &[
    ("deque", deque::run),
    ("mpsc", mpsc::run),
    ("pool", pool::run),
    ("scheduler", scheduler::run),
    ("lua", lua::run),
];

fn usage() -> String {
    let names: Vec<&str> = SCENARIOS.iter().map(|(n, _)| *n).collect();
    format!(
        "usage: stepsched-stress [all|soak|{}] [--workers N] [--processes N] [--seconds S] [--seed N] [--quick]",
        names.join("|")
    )
}

fn parse(args: &[String]) -> Result<(Vec<&'static str>, Opts), String> {
    let default_workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut opts = Opts {
        workers: default_workers,
        processes: 10_000,
        seconds: 10.0,
        seed: fastrand::u64(..),
        quick: false,
        soak: false,
    };
    let mut chosen: Vec<&'static str> = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| -> Result<String, String> {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value\n{}", usage()))
        };
        match arg.as_str() {
            "--workers" => {
                opts.workers = value("--workers")?
                    .parse()
                    .map_err(|e| format!("--workers: {e}"))?
            }
            "--processes" => {
                opts.processes = value("--processes")?
                    .parse()
                    .map_err(|e| format!("--processes: {e}"))?
            }
            "--seconds" => {
                opts.seconds = value("--seconds")?
                    .parse()
                    .map_err(|e| format!("--seconds: {e}"))?
            }
            "--seed" => {
                opts.seed = value("--seed")?
                    .parse()
                    .map_err(|e| format!("--seed: {e}"))?
            }
            "--quick" => opts.quick = true,
            "-h" | "--help" => return Err(usage()),
            "all" => chosen.extend(SCENARIOS.iter().map(|(n, _)| *n)),
            "soak" => opts.soak = true,
            name => match SCENARIOS.iter().find(|(n, _)| *n == name) {
                Some((n, _)) => chosen.push(n),
                None => return Err(format!("unknown scenario `{name}`\n{}", usage())),
            },
        }
    }
    if chosen.is_empty() {
        chosen.extend(SCENARIOS.iter().map(|(n, _)| *n));
    }
    if opts.quick {
        opts.seconds = opts.seconds.min(3.0);
        opts.processes = opts.processes.min(2_000);
    }
    opts.workers = opts.workers.max(1);
    Ok((chosen, opts))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (chosen, opts) = match parse(&args) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "stepsched stress: scenarios {:?}, workers {}, seed {}{}",
        chosen,
        opts.workers,
        opts.seed,
        if opts.quick { ", quick" } else { "" }
    );
    let mut failed = false;
    for name in chosen {
        let (_, run) = SCENARIOS
            .iter()
            .find(|(n, _)| *n == name)
            .expect("known scenario");
        println!("== {name} ==");
        fastrand::seed(opts.seed);
        match run(&opts) {
            Ok(()) => println!("{name}: ok"),
            Err(e) => {
                println!("{name}: FAILED: {e}");
                failed = true;
            }
        }
    }
    if failed {
        println!("stress: FAILED (seed {})", opts.seed);
        ExitCode::FAILURE
    } else {
        println!("stress: all invariants held (seed {})", opts.seed);
        ExitCode::SUCCESS
    }
}
