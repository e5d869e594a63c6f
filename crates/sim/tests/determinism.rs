//! The determinism check (`check_determinism`): a process whose sends
//! follow a `HashMap`'s iteration order fails it, with the first line that
//! differs; the same process over a `BTreeMap` passes. The random source a
//! process gets from its context replays with its seed and moves nothing
//! else.

use std::collections::{BTreeMap, HashMap};

use stepsched_process::{
    CancelToken, Context, Error, Event, Events, Pid, Process, Status, StepOutput,
};
use stepsched_sim::{Divergence, Sim, SimContextExt, check_determinism};

/// Jobs, by id, and their sizes: a `HashMap` with a fresh `RandomState`
/// (its iteration order differs from one map to the next), or a
/// `BTreeMap` (in key order).
enum Jobs {
    Hashed(HashMap<u64, u64>),
    Sorted(BTreeMap<u64, u64>),
}

impl Jobs {
    fn ids(&self) -> Vec<u64> {
        match self {
            Jobs::Hashed(map) => map.keys().copied().collect(),
            Jobs::Sorted(map) => map.keys().copied().collect(),
        }
    }
}

enum Actor {
    /// Sends each job id to `worker`, in its map's iteration order.
    Boss { worker: Pid, jobs: Jobs },
    /// Does each job it is sent (a `work` yield tagged with its id).
    Worker,
    /// Draws `draws` random numbers in each step (from its context), and
    /// yields one `roll` tagged with the last, if `show`.
    Roller { draws: u32, show: bool, rolls: u32 },
}

impl Process for Actor {
    type Input = ();
    type Message = u64;
    type Response = u64;
    type Command = &'static str;
    type Output = u64;

    fn init(&mut self, cx: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        if let Actor::Roller { .. } = self {
            // The source is there from `init` on.
            cx.random_u64().expect("a random source in init");
        }
        Ok(())
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        events: Events<'_, u64, u64>,
        out: &mut StepOutput<&'static str, u64>,
    ) -> Result<(), Error> {
        match self {
            Actor::Boss { worker, jobs } => {
                drop(events);
                for id in jobs.ids() {
                    cx.send(*worker, id)
                        .map_err(|e| Error::failed(e.to_string()))?;
                }
                out.set_status(Status::Done(0));
            }
            Actor::Worker => {
                for event in events {
                    if let Event::Message { data, .. } = event {
                        out.push_yield(data, "work");
                    }
                }
                out.set_status(if out.yields().is_empty() {
                    Status::Idle
                } else {
                    Status::Yield
                });
            }
            Actor::Roller { draws, show, rolls } => {
                drop(events);
                let mut last = 0;
                for _ in 0..*draws {
                    last = cx.with_rng(|rng| rng.below(1000)).expect("a random source");
                }
                *rolls += 1;
                if *rolls > 3 {
                    out.set_status(Status::Done(last));
                } else {
                    if *show {
                        out.push_yield(last, "roll");
                    }
                    out.set_status(Status::Continue);
                }
            }
        }
        Ok(())
    }
}

/// A boss sending sixteen jobs to a worker; the trace.
fn jobs_run(seed: u64, hashed: bool) -> String {
    let sim: Sim<Actor> = Sim::builder()
        .seed(seed)
        .handler("work", |_, done| {
            done.complete(Ok(0));
        })
        .build();
    let (boss, worker) = (sim.allocate_pid(), sim.allocate_pid());
    let sizes = (1..=16).map(|id| (id, id * 10));
    let jobs = if hashed {
        Jobs::Hashed(sizes.collect())
    } else {
        Jobs::Sorted(sizes.collect())
    };
    sim.submit(boss, Actor::Boss { worker, jobs }, "main", ())
        .unwrap();
    sim.submit(worker, Actor::Worker, "main", ()).unwrap();
    sim.run();
    sim.trace_text()
}

#[test]
fn iterating_a_hash_map_is_caught_with_the_first_differing_line() {
    let divergence = check_determinism(5, |seed| jobs_run(seed, true))
        .expect_err("a HashMap's order should differ between two runs");
    let Divergence {
        seed,
        line,
        first,
        second,
        ..
    } = divergence.clone();
    assert_eq!(seed, 5);
    let (first, second) = (first.unwrap(), second.unwrap());
    assert_ne!(first, second);
    // The worker's step: the same events, its work in another order.
    assert!(first.contains("<0.2> events=[m<0.1>"), "{first}");
    assert!(first.contains("yields=[work#"), "{first}");
    assert!(second.contains("yields=[work#"), "{second}");
    // Every line before it is the same in both runs: replaying the first
    // run's lines shows where.
    let a = jobs_run(5, false);
    assert!(line > 1 && line <= a.lines().count(), "line {line}");
    let message = divergence.to_string();
    assert!(message.contains("seed 5"), "{message}");
    assert!(message.contains(&format!("line {line}")), "{message}");
    assert!(
        message.contains(&first) && message.contains(&second),
        "{message}"
    );
}

#[test]
fn the_same_process_over_a_btree_map_passes() {
    let trace = check_determinism(5, |seed| jobs_run(seed, false)).unwrap();
    let ids: Vec<String> = (1..=16).map(|id| format!("work#{id}")).collect();
    assert!(
        trace.contains(&format!("yields=[{}]", ids.join(","))),
        "{trace}"
    );
}

#[test]
fn the_divergence_names_the_first_differing_line_and_a_trace_that_ended() {
    let mut runs = ["a\nb\nc\n", "a\nb\n"].into_iter();
    let d = check_determinism(3, |_| runs.next().unwrap().to_owned()).unwrap_err();
    assert_eq!((d.seed, d.line), (3, 3));
    assert_eq!((d.first.as_deref(), d.second.as_deref()), (Some("c"), None));
    assert!(d.to_string().contains("(the trace ended)"), "{d}");

    let mut runs = ["a\nb\nc\n", "a\nx\nc\n"].into_iter();
    let d = check_determinism(3, |_| runs.next().unwrap().to_owned()).unwrap_err();
    assert_eq!(d.line, 2);
    assert_eq!(
        (d.first.as_deref(), d.second.as_deref()),
        (Some("b"), Some("x"))
    );
}

/// Three rollers, each drawing `draws` numbers a step; the trace.
fn rolls(seed: u64, draws: u32, show: bool) -> String {
    let sim: Sim<Actor> = Sim::builder()
        .seed(seed)
        .handler("roll", |_, done| {
            done.complete(Ok(0));
        })
        .build();
    for _ in 0..3 {
        let roller = Actor::Roller {
            draws,
            show,
            rolls: 0,
        };
        sim.submit(sim.allocate_pid(), roller, "main", ()).unwrap();
    }
    sim.run();
    sim.trace_text()
}

#[test]
fn a_process_random_source_replays_with_its_seed_and_moves_nothing_else() {
    // The rolls replay with the seed, and differ between seeds.
    let traces: Vec<String> = (0..4)
        .map(|seed| check_determinism(seed, |seed| rolls(seed, 1, true)).unwrap())
        .collect();
    assert!(traces.iter().all(|t| t.contains("yields=[roll#")));
    assert!(traces.windows(2).any(|w| w[0] != w[1]));
    // Drawing from it (none, one or ten numbers a step) changes neither
    // the schedule nor anything else in the trace.
    for seed in 0..4 {
        assert_eq!(rolls(seed, 0, false), rolls(seed, 10, false), "seed {seed}");
    }
}

#[test]
fn there_is_no_random_source_outside_the_simulator() {
    let cancel = CancelToken::new();
    let cx: Context<'_, Actor> = Context::detached(Pid::new(0, 1), &cancel);
    assert_eq!(cx.random_u64(), None);
}
