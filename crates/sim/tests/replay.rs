//! Replay you can trust: each kind of decision draws from its own stream,
//! so turning one fault off (or setting it so low it never fires) changes
//! nothing else, and adding a process that does nothing leaves the others'
//! schedule alone; every injected fault has a line in the trace.

use std::time::Duration;

use stepsched_process::{Context, Error, Event, Events, Pid, Process, Status, StepOutput};
use stepsched_sim::{Builder, Faults, Network, Sim};

/// The processes of these tests, one type.
enum Node {
    /// Answers each message `n` from a process with `n + 1`, and logs it
    /// (a `log` yield); never finishes.
    Server,
    /// Asks `server` for `left` answers, one at a time, doing some `work`
    /// (a yield) with each answer.
    Client { server: Pid, left: u32 },
    /// Waits for messages forever and does nothing with them.
    Idle,
}

impl Process for Node {
    type Input = ();
    type Message = u32;
    type Response = u32;
    type Command = &'static str;
    type Output = u32;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        ctx: &mut Context<'_, Self>,
        events: Events<'_, u32, u32>,
        out: &mut StepOutput<&'static str, u32>,
    ) -> Result<(), Error> {
        let send = |to, n| ctx.send(to, n).map_err(|e| Error::failed(e.to_string()));
        match self {
            Node::Server => {
                for event in events {
                    match event {
                        Event::Message {
                            from: Some(from),
                            data,
                        } => {
                            // The client may have been terminated.
                            let _ = send(from, data + 1);
                            out.push_yield(u64::from(data), "log");
                        }
                        Event::Cancel => return Err(Error::Cancelled),
                        _ => {}
                    }
                }
                out.set_status(if out.yields().is_empty() {
                    Status::Idle
                } else {
                    Status::Yield
                });
            }
            Node::Client { server, left } => {
                let mut first = true;
                for event in events {
                    first = false;
                    match event {
                        Event::Message { data, .. } => out.push_yield(u64::from(data), "work"),
                        Event::Completion { .. } => {
                            *left -= 1;
                            if *left == 0 {
                                out.set_status(Status::Done(0));
                                return Ok(());
                            }
                            send(*server, *left * 10)?;
                        }
                        Event::Cancel => return Err(Error::Cancelled),
                    }
                }
                if first {
                    send(*server, *left * 10)?;
                }
                out.set_status(if out.yields().is_empty() {
                    Status::Idle
                } else {
                    Status::Yield
                });
            }
            Node::Idle => {
                drop(events);
                out.set_status(Status::Idle);
            }
        }
        Ok(())
    }
}

/// A server and three clients on a simulator built from `builder`, plus
/// an idle process submitted last if `idle`: the trace of a run.
fn workload(builder: Builder<Node>, idle: bool) -> Vec<String> {
    let sim = builder
        .handler("work", |_, done| {
            let ms = 1 + done.tag() % 3;
            done.complete_after(Duration::from_millis(ms), Ok(0));
        })
        .handler("log", |_, done| {
            done.complete(Ok(0));
        })
        .build();
    let server = sim.allocate_pid();
    sim.submit(server, Node::Server, "main", ()).unwrap();
    for left in [3, 4, 5] {
        let client = Node::Client { server, left };
        sim.submit(sim.allocate_pid(), client, "main", ()).unwrap();
    }
    if idle {
        sim.submit(sim.allocate_pid(), Node::Idle, "main", ())
            .unwrap();
    }
    sim.run();
    sim.trace()
}

/// Every fault at a moderate probability.
fn every_fault() -> Faults {
    Faults {
        delay: 0.2,
        max_delay: Duration::from_millis(3),
        reorder: 0.3,
        short_batch: 0.3,
        terminate: 0.01,
        handler_error: 0.05,
        handler_panic: 0.05,
        never_complete: 0.02,
        shutdown: 0.002,
        shutdown_deadline: Duration::from_millis(5),
        ..Faults::default()
    }
}

#[test]
fn clock_skew_changes_nothing_but_its_own_lines() {
    // The skew (and drift) of each process's clock draws from a stream of
    // its own: with every other fault on, turning it on adds one line per
    // process and moves no other decision (these processes never read
    // their clocks). Drawn from the schedule's stream, it would.
    for seed in 0..25 {
        let off = run_with(seed, every_fault());
        let skewed = every_fault()
            .clock_skew(Duration::from_millis(5))
            .clock_drift(1e-3);
        let on = run_with(seed, skewed);
        let lines = on
            .iter()
            .filter(|l| l.contains(" fault clock-skew +"))
            .count();
        assert_eq!(lines, 4, "one line per process, seed {seed}");
        let rest: Vec<String> = on
            .into_iter()
            .filter(|l| !l.contains(" fault clock-skew +"))
            .collect();
        assert_eq!(off, rest, "seed {seed}");
        // Off is off: no line, the trace of the default.
        assert!(!off.iter().any(|l| l.contains("clock-skew")));
    }
}

/// Where one fault's probability is, in a `Faults`.
type Knob = fn(&mut Faults) -> &mut f64;

/// Each fault's probability, by name, to set one at a time.
fn knobs() -> Vec<(&'static str, Knob)> {
    vec![
        ("delay", |f| &mut f.delay),
        ("reorder", |f| &mut f.reorder),
        ("short_batch", |f| &mut f.short_batch),
        ("terminate", |f| &mut f.terminate),
        ("handler_error", |f| &mut f.handler_error),
        ("handler_panic", |f| &mut f.handler_panic),
        ("never_complete", |f| &mut f.never_complete),
        ("shutdown", |f| &mut f.shutdown),
    ]
}

fn run_with(seed: u64, faults: Faults) -> Vec<String> {
    workload(Sim::builder().seed(seed).faults(faults), false)
}

#[test]
fn a_fault_that_never_fires_changes_nothing_else() {
    // 25 seeds for each of the 8 faults: 200 pairs of traces.
    let mut changed = Vec::new();
    for (name, knob) in knobs() {
        for seed in 0..25 {
            let mut off = every_fault();
            *knob(&mut off) = 0.0;
            let mut tiny = off;
            *knob(&mut tiny) = 1e-12;
            let (a, b) = (run_with(seed, off), run_with(seed, tiny));
            if a != b {
                changed.push(format!("{name} seed {seed}"));
            }
        }
    }
    assert!(
        changed.is_empty(),
        "{} of 200 traces changed when a fault went from 0 to 1e-12: {changed:?}",
        changed.len()
    );
}

#[test]
fn every_fault_fires_on_some_seed_of_the_comparison() {
    // The comparison above means something only if the other faults do
    // fire in this workload: each kind leaves its line in some trace.
    let mut seen = vec![false; 8];
    let marks = [
        "fault delay",
        "fault reorder",
        "fault short-batch",
        "terminated (fault)",
        "fault handler-error",
        "fault handler-panic",
        "fault never-complete",
        "shutdown (fault)",
    ];
    let faults = Faults {
        terminate: 0.05,
        shutdown: 0.02,
        ..every_fault()
    };
    for seed in 0..25 {
        let trace = run_with(seed, faults).join("\n");
        for (i, mark) in marks.iter().enumerate() {
            seen[i] |= trace.contains(mark);
        }
    }
    let missing: Vec<_> = marks.iter().zip(&seen).filter(|(_, s)| !**s).collect();
    assert!(missing.is_empty(), "never fired: {missing:?}");
}

#[test]
fn every_injected_fault_has_a_line_in_the_trace() {
    for (name, knob) in knobs() {
        let mark = match name {
            "terminate" => "terminated (fault)".to_owned(),
            "shutdown" => "shutdown (fault)".to_owned(),
            _ => format!("fault {}", name.replace('_', "-")),
        };
        let mut faults = Faults::default();
        *knob(&mut faults) = if name == "terminate" || name == "shutdown" {
            0.1
        } else {
            1.0
        };
        let trace = run_with(3, faults);
        assert!(
            trace.iter().any(|line| line.contains(&mark)),
            "no `{mark}` line with {name} on:\n{}",
            trace.join("\n")
        );
        let without = run_with(3, Faults::default());
        assert!(
            !without.iter().any(|line| line.contains("fault")),
            "a fault line with no faults:\n{}",
            without.join("\n")
        );
    }
}

#[test]
fn the_delay_fault_line_names_the_completion_and_the_delay() {
    let faults = Faults {
        delay: 1.0,
        max_delay: Duration::from_millis(1),
        ..Faults::default()
    };
    let trace = run_with(1, faults);
    // The server's first log (tag 30, from the client asking for 3) is
    // held back exactly 1 ms: the only delay the fault can draw here.
    assert!(
        trace
            .iter()
            .any(|line| line.ends_with("<0.1> fault delay c30 +1ms")),
        "{}",
        trace.join("\n")
    );
}

/// The lines of `trace` that do not mention `pid`.
fn without(trace: Vec<String>, pid: &str) -> Vec<String> {
    trace.into_iter().filter(|l| !l.contains(pid)).collect()
}

#[test]
fn an_idle_process_does_not_change_the_others_schedule() {
    // The faults drawn per process too; terminate and shutdown, drawn per
    // step of the whole simulation, are left out (see the crate docs).
    let faults = Faults {
        terminate: 0.0,
        shutdown: 0.0,
        ..every_fault()
    };
    let mut changed = Vec::new();
    for seed in 0..40 {
        let alone = workload(Sim::builder().seed(seed).faults(faults), false);
        let with = workload(Sim::builder().seed(seed).faults(faults), true);
        assert!(with.iter().any(|l| l.contains("<0.5> events=[]")));
        if alone != without(with, "<0.5>") {
            changed.push(seed);
        }
    }
    assert!(
        changed.is_empty(),
        "an idle process changed the others' schedule on {} of 40 seeds: {changed:?}",
        changed.len()
    );
}

/// A network with a delay and every network fault at a moderate
/// probability.
fn every_net_fault() -> Network {
    Network::new()
        .delay(Duration::ZERO, Duration::from_millis(2))
        .loss(0.05)
        .duplicate(0.05)
        .partitions(0.03, Duration::from_millis(1), Duration::from_millis(4))
}

/// Where one network fault's probability is, in a `Network`.
type NetKnob = fn(&mut Network) -> &mut f64;

/// Each network fault's probability, by name.
fn net_knobs() -> Vec<(&'static str, NetKnob)> {
    vec![
        ("loss", |n| &mut n.loss),
        ("duplicate", |n| &mut n.duplicate),
        ("partition", |n| &mut n.partition),
    ]
}

fn run_on(seed: u64, faults: Faults, network: Network) -> Vec<String> {
    workload(
        Sim::builder().seed(seed).faults(faults).network(network),
        false,
    )
}

#[test]
fn a_network_fault_that_never_fires_changes_nothing_else() {
    // With every other fault on: 25 seeds for each of the 3 network
    // faults, and for each of the 8 other faults with the network on.
    let mut changed = Vec::new();
    for (name, knob) in net_knobs() {
        for seed in 0..25 {
            let mut off = every_net_fault();
            *knob(&mut off) = 0.0;
            let mut tiny = off;
            *knob(&mut tiny) = 1e-12;
            if run_on(seed, every_fault(), off) != run_on(seed, every_fault(), tiny) {
                changed.push(format!("net {name} seed {seed}"));
            }
        }
    }
    for (name, knob) in knobs() {
        for seed in 0..25 {
            let mut off = every_fault();
            *knob(&mut off) = 0.0;
            let mut tiny = off;
            *knob(&mut tiny) = 1e-12;
            if run_on(seed, off, every_net_fault()) != run_on(seed, tiny, every_net_fault()) {
                changed.push(format!("{name} (network on) seed {seed}"));
            }
        }
    }
    assert!(
        changed.is_empty(),
        "{} of 275 traces changed when a fault went from 0 to 1e-12: {changed:?}",
        changed.len()
    );
}

#[test]
fn every_network_fault_fires_on_some_seed_of_the_comparison() {
    let marks = [
        "net delay",
        "net drop",
        "(partition)",
        "net dup",
        "net partition",
    ];
    let mut seen = [false; 5];
    for seed in 0..25 {
        let trace = run_on(seed, every_fault(), every_net_fault()).join("\n");
        for (i, mark) in marks.iter().enumerate() {
            seen[i] |= trace.contains(mark);
        }
    }
    let missing: Vec<_> = marks.iter().zip(&seen).filter(|(_, s)| !**s).collect();
    assert!(missing.is_empty(), "never fired: {missing:?}");
}

#[test]
fn a_network_with_no_delay_and_no_faults_changes_nothing() {
    // Every other fault on: the network's own streams move none of them.
    for seed in 0..25 {
        assert_eq!(
            run_with(seed, every_fault()),
            run_on(seed, every_fault(), Network::new()),
            "seed {seed}"
        );
    }
    let without = run_on(3, Faults::default(), Network::new());
    assert!(!without.iter().any(|line| line.contains(" net ")));
}

#[test]
fn an_idle_process_does_not_change_the_others_schedule_over_the_network() {
    let faults = Faults {
        terminate: 0.0,
        shutdown: 0.0,
        ..every_fault()
    };
    let mut changed = Vec::new();
    for seed in 0..40 {
        let on = || {
            Sim::builder()
                .seed(seed)
                .faults(faults)
                .network(every_net_fault())
        };
        let alone = workload(on(), false);
        let with = workload(on(), true);
        if alone != without(with, "<0.5>") {
            changed.push(seed);
        }
    }
    assert!(changed.is_empty(), "changed on seeds {changed:?}");
}
