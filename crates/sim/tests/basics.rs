//! Ping-pong, determinism of the trace, virtual time, terminate, the step
//! rules.

use std::time::Duration;

use stepsched_process::{
    Context, Error, Event, Events, Pid, Process, SendError, Status, StepOutput, TerminateError,
};
use stepsched_sim::{Faults, Sim};

/// The processes of these tests, one type.
enum Actor {
    /// Sends `rounds` pings to `peer`, one at a time, and finishes with
    /// the sum of the replies.
    Pinger { peer: Pid, left: u32, sum: u32 },
    /// Answers each ping `n` with `n + 1`; finishes on message 0.
    Ponger,
    /// Yields one `sleep` of its input and finishes with the answer.
    Sleeper { n: u32, asked: bool },
    /// Waits for messages forever.
    Idler,
    /// Sets no status.
    Forgetful,
    /// Panics in its first step.
    Panicker,
}

impl Process for Actor {
    type Input = u32;
    type Message = u32;
    type Response = u32;
    type Command = &'static str;
    type Output = u32;

    fn init(&mut self, _: &Context<'_, Self>, method: &str, input: u32) -> Result<(), Error> {
        if method == "sleep" {
            *self = Actor::Sleeper {
                n: input,
                asked: false,
            };
        }
        Ok(())
    }

    fn step(
        &mut self,
        ctx: &mut Context<'_, Self>,
        events: Events<'_, u32, u32>,
        out: &mut StepOutput<&'static str, u32>,
    ) -> Result<(), Error> {
        match self {
            Actor::Pinger { peer, left, sum } => {
                let mut first = true;
                for event in events {
                    first = false;
                    if let Event::Message { data, .. } = event {
                        *sum += data;
                    }
                }
                if !first || *left > 0 {
                    if *left == 0 {
                        let _ = ctx.send(*peer, 0);
                        out.set_status(Status::Done(*sum));
                        return Ok(());
                    }
                    ctx.send(*peer, *left)
                        .map_err(|e| Error::failed(e.to_string()))?;
                    *left -= 1;
                }
                out.set_status(Status::Idle);
            }
            Actor::Ponger => {
                for event in events {
                    if let Event::Message {
                        from: Some(from),
                        data,
                    } = event
                    {
                        if data == 0 {
                            out.set_status(Status::Done(0));
                            return Ok(());
                        }
                        ctx.send(from, data + 1)
                            .map_err(|e| Error::failed(e.to_string()))?;
                    }
                }
                out.set_status(Status::Idle);
            }
            Actor::Sleeper { n, asked } => {
                for event in events {
                    if let Event::Completion { result, .. } = event {
                        out.set_status(Status::Done(result?));
                        return Ok(());
                    }
                }
                if !*asked {
                    *asked = true;
                    out.push_yield(u64::from(*n), "sleep");
                }
                out.set_status(Status::Yield);
            }
            Actor::Idler => {
                for _ in events {}
                out.set_status(Status::Idle);
            }
            Actor::Forgetful => {}
            Actor::Panicker => panic!("step broke"),
        }
        Ok(())
    }
}

/// A simulator whose `sleep` handler answers `tag * 2` after 50 ms.
fn sim(seed: u64) -> Sim<Actor> {
    Sim::builder()
        .seed(seed)
        .handler("sleep", |_, done| {
            let answer = u32::try_from(done.tag()).unwrap() * 2;
            done.complete_after(Duration::from_millis(50), Ok(answer));
        })
        .build()
}

/// Pinger and ponger: `rounds` round trips; returns the pinger's sum.
fn ping_pong(sim: &Sim<Actor>, rounds: u32) -> (Pid, Pid) {
    let ponger = sim.allocate_pid();
    let pinger = sim.allocate_pid();
    sim.submit(ponger, Actor::Ponger, "main", 0).unwrap();
    sim.submit(
        pinger,
        Actor::Pinger {
            peer: ponger,
            left: rounds,
            sum: 0,
        },
        "main",
        0,
    )
    .unwrap();
    (pinger, ponger)
}

#[test]
fn ping_pong_gives_the_sum_of_the_replies() {
    let seed = stepsched_sim::seed_from_env(1);
    let sim = sim(seed);
    let (pinger, ponger) = ping_pong(&sim, 10);
    let report = sim.run();
    // Pings 10, 9, ..., 1, each answered + 1: 55 + 10.
    assert_eq!(sim.take_result(pinger), Some(Ok(65)), "seed {seed}");
    assert_eq!(sim.take_result(ponger), Some(Ok(0)), "seed {seed}");
    assert_eq!(report.live, 0, "seed {seed}");
    assert!(!report.step_limit_hit);
    assert_eq!(sim.now(), Duration::ZERO, "no timer ran");
}

/// A run with several processes whose order matters to the trace.
fn busy_trace(seed: u64) -> Vec<String> {
    let sim = sim(seed);
    for _ in 0..3 {
        ping_pong(&sim, 3);
    }
    for n in 1..=3 {
        let pid = sim.allocate_pid();
        sim.submit(pid, Actor::Idler, "sleep", n).unwrap();
    }
    sim.run();
    sim.trace()
}

#[test]
fn the_same_seed_gives_the_same_trace_and_seeds_differ() {
    let seed = stepsched_sim::seed_from_env(42);
    let first = busy_trace(seed);
    assert!(first.len() > 10, "{first:?}");
    assert_eq!(first, busy_trace(seed), "seed {seed}");
    let distinct: std::collections::BTreeSet<Vec<String>> = (0..8).map(busy_trace).collect();
    assert!(distinct.len() >= 2, "seeds 0..8 all gave one trace");
}

#[test]
fn a_thousand_sleeps_of_50ms_take_50ms_of_virtual_time() {
    let seed = stepsched_sim::seed_from_env(3);
    let sim = sim(seed);
    let pids: Vec<Pid> = (0..1000)
        .map(|n| {
            let pid = sim.allocate_pid();
            sim.submit(pid, Actor::Idler, "sleep", n).unwrap().pid()
        })
        .collect();
    let report = sim.run();
    assert_eq!(report.live, 0, "seed {seed}");
    assert_eq!(sim.now(), Duration::from_millis(50), "seed {seed}");
    assert_eq!(report.now, Duration::from_millis(50));
    for (n, pid) in (0..).zip(pids) {
        assert_eq!(sim.take_result(pid), Some(Ok(n * 2)), "seed {seed}, {pid}");
    }
}

#[test]
fn terminate_ends_a_process_and_later_sends_are_refused_closed() {
    let sim = sim(5);
    let pid = sim.allocate_pid();
    sim.submit(pid, Actor::Idler, "main", 0).unwrap();
    sim.send(pid, 1).unwrap();
    sim.run();
    assert!(sim.is_live(pid), "an idle process stays live");
    assert_eq!(sim.take_result(pid), None);
    sim.terminate(pid).unwrap();
    assert!(!sim.is_live(pid));
    assert_eq!(sim.take_result(pid), Some(Err(Error::Terminated)));
    assert!(matches!(sim.send(pid, 2), Err(SendError::Closed(p)) if p.payload == 2));
    assert_eq!(
        sim.terminate(pid),
        Err(TerminateError::AlreadyComplete(pid))
    );
    let never = Pid::new(7, 7);
    assert!(sim.send(never, 3).unwrap_err().is_unknown_pid());
    assert_eq!(sim.terminate(never), Err(TerminateError::UnknownPid(never)));
}

#[test]
fn a_terminated_sleeper_is_not_completed_later() {
    let sim = sim(9);
    let pid = sim.allocate_pid();
    sim.submit(pid, Actor::Idler, "sleep", 4).unwrap();
    let report = sim.run();
    assert_eq!(report.live, 0);
    assert_eq!(sim.take_result(pid), Some(Ok(8)));

    // One step: the yield is dispatched, its timer set; then terminated.
    let sim: Sim<Actor> = Sim::builder()
        .seed(9)
        .max_steps(1)
        .handler("sleep", |_, done| {
            done.complete_after(Duration::from_millis(50), Ok(1));
        })
        .build();
    let pid = sim.allocate_pid();
    sim.submit(pid, Actor::Idler, "sleep", 4).unwrap();
    let report = sim.run();
    assert!(report.step_limit_hit, "the timer is pending");
    sim.terminate(pid).unwrap();
    let report = sim.run();
    assert_eq!(report.steps, 0, "the late completion steps nothing");
    assert_eq!(sim.now(), Duration::from_millis(50));
    assert_eq!(sim.take_result(pid), Some(Err(Error::Terminated)));
}

#[test]
fn no_status_and_panics_fail_only_their_process() {
    let sim = sim(11);
    let forgetful = sim.allocate_pid();
    let panicker = sim.allocate_pid();
    let fine = sim.allocate_pid();
    sim.submit(forgetful, Actor::Forgetful, "main", 0).unwrap();
    sim.submit(panicker, Actor::Panicker, "main", 0).unwrap();
    sim.submit(fine, Actor::Idler, "sleep", 1).unwrap();
    sim.run();
    assert!(matches!(
        sim.take_result(forgetful),
        Some(Err(Error::Failed(m))) if m.contains("no status")
    ));
    assert!(matches!(
        sim.take_result(panicker),
        Some(Err(Error::Panicked(m))) if m == "step broke"
    ));
    assert_eq!(sim.take_result(fine), Some(Ok(2)));
}

#[test]
fn an_unknown_command_and_a_dropped_completer_complete_with_errors() {
    let sim: Sim<Actor> = Sim::builder().seed(2).handler("other", |_, _| {}).build();
    let pid = sim.allocate_pid();
    sim.submit(pid, Actor::Idler, "sleep", 1).unwrap();
    sim.run();
    assert!(matches!(
        sim.take_result(pid),
        Some(Err(Error::Failed(m))) if m == "unknown command `sleep`"
    ));

    let sim: Sim<Actor> = Sim::builder().seed(2).handler("sleep", |_, _| {}).build();
    let pid = sim.allocate_pid();
    sim.submit(pid, Actor::Idler, "sleep", 1).unwrap();
    sim.run();
    assert!(matches!(
        sim.take_result(pid),
        Some(Err(Error::Failed(m))) if m.contains("dropped its completer")
    ));
}

#[test]
fn faults_are_reproducible_and_injected() {
    let faults = Faults {
        delay: 1.0,
        max_delay: Duration::from_millis(20),
        handler_error: 0.5,
        ..Faults::default()
    };
    let run = |seed| {
        let sim: Sim<Actor> = Sim::builder()
            .seed(seed)
            .faults(faults)
            .handler("sleep", |_, done| {
                done.complete(Ok(1));
            })
            .build();
        let pids: Vec<Pid> = (0..50)
            .map(|n| {
                let pid = sim.allocate_pid();
                sim.submit(pid, Actor::Idler, "sleep", n).unwrap().pid()
            })
            .collect();
        sim.run();
        let failed = pids
            .iter()
            .filter(|pid| sim.take_result(**pid).unwrap().is_err())
            .count();
        (failed, sim.now(), sim.trace())
    };
    let (failed, now, trace) = run(4);
    assert_eq!(run(4), (failed, now, trace), "seed 4");
    assert!(
        failed > 0 && failed < 50,
        "handler errors injected: {failed}"
    );
    assert!(
        now > Duration::ZERO && now <= Duration::from_millis(20),
        "{now:?}"
    );

    let sim: Sim<Actor> = Sim::builder()
        .seed(8)
        .faults(Faults {
            terminate: 0.2,
            ..Faults::default()
        })
        .build();
    let pids: Vec<Pid> = (0..20)
        .map(|_| {
            let pid = sim.allocate_pid();
            sim.submit(pid, Actor::Idler, "main", 0).unwrap().pid()
        })
        .collect();
    for _ in 0..5 {
        for pid in &pids {
            let _ = sim.send(*pid, 1);
        }
        sim.run();
    }
    let terminated = pids
        .iter()
        .filter(|pid| sim.take_result(**pid) == Some(Err(Error::Terminated)))
        .count();
    assert!(terminated > 0, "the terminate fault fired");
}

#[test]
fn the_step_limit_stops_a_process_that_always_continues() {
    struct Spinner;
    impl Process for Spinner {
        type Input = ();
        type Message = ();
        type Response = ();
        type Command = &'static str;
        type Output = ();
        fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
            Ok(())
        }
        fn step(
            &mut self,
            _: &mut Context<'_, Self>,
            _: Events<'_, (), ()>,
            out: &mut StepOutput<&'static str, ()>,
        ) -> Result<(), Error> {
            out.set_status(Status::Continue);
            Ok(())
        }
    }
    let sim: Sim<Spinner> = Sim::builder().max_steps(100).build();
    let pid = sim.allocate_pid();
    sim.submit(pid, Spinner, "main", ()).unwrap();
    let report = sim.run();
    assert_eq!(report.steps, 100);
    assert!(report.step_limit_hit);
    assert_eq!(report.live, 1);
}
