//! Exploration: swarm testing (each seed keeps or turns off whole kinds of
//! fault, and its trace says which), and the liveness check (heal every
//! fault at a virtual time, then require the named processes to finish).

use std::time::Duration;

use stepsched_process::{Context, Error, Event, Events, Pid, Process, Status, StepOutput};
use stepsched_sim::{Faults, Network, Sim, check_determinism};

#[derive(Clone, Debug)]
enum Msg {
    Req,
    Ack,
}

enum Node {
    /// Answers each request with an ack.
    Server,
    /// Sends a request, and again after each timeout with no ack if
    /// `retry`; done at the first ack.
    Client {
        server: Pid,
        retry: bool,
        tries: u64,
    },
}

const TIMEOUT: Duration = Duration::from_millis(10);

fn failed(e: impl std::fmt::Display) -> Error {
    Error::failed(e.to_string())
}

impl Process for Node {
    type Input = ();
    type Message = Msg;
    type Response = ();
    type Command = &'static str;
    type Output = u64;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        events: Events<'_, Msg, ()>,
        out: &mut StepOutput<&'static str, u64>,
    ) -> Result<(), Error> {
        match self {
            Node::Server => {
                for event in events {
                    if let Event::Message {
                        from: Some(from),
                        data: Msg::Req,
                    } = event
                    {
                        cx.send(from, Msg::Ack).map_err(failed)?;
                        out.push_yield(0, "work");
                    }
                }
                out.set_status(Status::Idle);
            }
            Node::Client {
                server,
                retry,
                tries,
            } => {
                let mut send = *tries == 0;
                for event in events {
                    match event {
                        Event::Message { data: Msg::Ack, .. } => {
                            out.set_status(Status::Done(*tries));
                            return Ok(());
                        }
                        Event::Completion { tag, .. } if tag == *tries && *retry => send = true,
                        _ => {}
                    }
                }
                if send {
                    *tries += 1;
                    cx.send(*server, Msg::Req).map_err(failed)?;
                    out.push_yield(*tries, "timeout");
                }
                out.set_status(Status::Idle);
            }
        }
        Ok(())
    }
}

fn sim(seed: u64, faults: Faults, network: Network) -> Sim<Node> {
    Sim::builder()
        .seed(seed)
        .faults(faults)
        .network(network)
        .max_steps(100_000)
        .factory("server", || Ok(Node::Server))
        .handler("timeout", |_, done| {
            done.complete_after(TIMEOUT, Ok(()));
        })
        .handler("work", |_, done| {
            done.complete_after(Duration::from_millis(1), Ok(()));
        })
        .build()
}

/// The named server (`<0.1>`) and `clients` clients (`<0.2>`, ...),
/// submitted.
fn start(sim: &Sim<Node>, clients: usize, retry: bool) -> Vec<Pid> {
    let server = sim.allocate_pid();
    sim.submit_named(server, "server", "main", ()).unwrap();
    (0..clients)
        .map(|_| {
            let client = Node::Client {
                server,
                retry,
                tries: 0,
            };
            sim.submit(sim.allocate_pid(), client, "main", ())
                .unwrap()
                .pid()
        })
        .collect()
}

// Swarm testing.

/// Every kind of fault the clients and server can see.
fn every_kind() -> (Faults, Network) {
    let faults = Faults {
        delay: 0.2,
        reorder: 0.2,
        short_batch: 0.2,
        handler_error: 0.1,
        ..Faults::default()
    }
    .crash(0.05)
    .swarm(true);
    let network = Network::new().loss(0.1).duplicate(0.1);
    (faults, network)
}

/// A trace of four retrying clients under `seed`.
fn swarm_trace(seed: u64) -> String {
    let (faults, network) = every_kind();
    let sim = sim(seed, faults, network);
    start(&sim, 4, true);
    sim.run();
    sim.trace_text()
}

/// The kinds a swarm line turns on and off.
fn swarm_kinds(trace: &str) -> (Vec<String>, Vec<String>) {
    let first = trace.lines().next().unwrap();
    let rest = first.strip_prefix("swarm on=[").expect(first);
    let (on, off) = rest.split_once("] off=[").unwrap();
    let list = |s: &str| -> Vec<String> {
        s.trim_end_matches(']')
            .split(',')
            .filter(|k| !k.is_empty())
            .map(str::to_owned)
            .collect()
    };
    (list(on), list(off))
}

/// Whether `trace` has a line of fault kind `kind`.
fn has_lines_of(trace: &str, kind: &str) -> bool {
    let needle = match kind {
        "net-loss" => " net drop ".to_owned(),
        "net-duplicate" => " net dup ".to_owned(),
        kind => format!(" fault {kind} "),
    };
    trace.lines().any(|l| l.contains(&needle))
}

#[test]
fn swarm_testing_turns_whole_kinds_off_per_seed_and_says_which() {
    let kinds = [
        "delay",
        "reorder",
        "short-batch",
        "handler-error",
        "crash",
        "net-loss",
        "net-duplicate",
    ];
    let mut seen_on = std::collections::BTreeSet::new();
    let mut seen_off = std::collections::BTreeSet::new();
    for seed in 0..64 {
        let trace = swarm_trace(seed);
        let (on, off) = swarm_kinds(&trace);
        let mut all: Vec<&str> = on.iter().chain(&off).map(String::as_str).collect();
        all.sort_unstable();
        let mut expected = kinds.to_vec();
        expected.sort_unstable();
        assert_eq!(all, expected, "seed {seed}: every configured kind, once");
        for kind in &off {
            assert!(
                !has_lines_of(&trace, kind),
                "seed {seed}: {kind} is off\n{trace}"
            );
            seen_off.insert(kind.clone());
        }
        for kind in &on {
            if has_lines_of(&trace, kind) {
                seen_on.insert(kind.clone());
            }
        }
        // What `Faults::swarmed` says for the seed.
        let kept = every_kind().0.swarmed(seed);
        assert_eq!(
            kept.delay > 0.0,
            on.contains(&"delay".to_owned()),
            "seed {seed}"
        );
        assert_eq!(
            kept.crash > 0.0,
            on.contains(&"crash".to_owned()),
            "seed {seed}"
        );
    }
    assert_eq!(
        seen_off.len(),
        kinds.len(),
        "each kind is off for some seed"
    );
    assert_eq!(
        seen_on.len(),
        kinds.len(),
        "each kind fires for some seed: {seen_on:?}"
    );
}

#[test]
fn swarm_seed_1_turns_delay_off_and_seed_0_keeps_it() {
    let trace = swarm_trace(1);
    assert!(
        trace.starts_with("swarm on=[reorder,short-batch,net-loss] off=[delay,handler-error,crash,net-duplicate]\n"),
        "{}",
        trace.lines().take(3).collect::<Vec<_>>().join("\n")
    );
    assert!(!has_lines_of(&trace, "delay"), "{trace}");
    let trace = swarm_trace(0);
    assert!(has_lines_of(&trace, "delay"), "{trace}");
}

#[test]
fn without_swarm_there_is_no_swarm_line_and_every_kind_stays() {
    let (faults, network) = every_kind();
    let faults = faults.swarm(false);
    assert_eq!(faults.swarmed(1), faults);
    let sim = sim(1, faults, network);
    start(&sim, 3, true);
    sim.run();
    assert!(!sim.trace_text().starts_with("swarm"));
}

#[test]
fn a_swarm_run_is_deterministic() {
    check_determinism(5, swarm_trace).unwrap();
}

// Liveness.

/// A network that loses every message, until healed.
fn losing() -> Network {
    Network::new()
        .delay(Duration::from_millis(1), Duration::from_millis(2))
        .loss(1.0)
}

#[test]
fn a_client_that_retries_finishes_once_the_faults_heal() {
    let ms = Duration::from_millis;
    for seed in 0..20 {
        let sim = sim(seed, Faults::default().crash(0.5), losing());
        let clients = start(&sim, 2, true);
        let report = sim
            .check_liveness(ms(100), ms(100), &clients)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{}", sim.trace_text()));
        assert!(!report.step_limit_hit);
        assert!(sim.now() >= ms(100) && sim.now() <= ms(200), "seed {seed}");
        let trace = sim.trace_text();
        assert!(trace.contains("t=100000us heal\n"), "{trace}");
        // Nothing got through before the heal.
        for client in clients {
            let tries = sim.take_result(client).unwrap().unwrap();
            assert!(tries > 5, "seed {seed}: {tries} tries");
        }
    }
}

#[test]
fn a_crashed_server_is_restarted_at_the_heal() {
    let ms = Duration::from_millis;
    // Every step of the server crashes it, restarted after a second:
    // down at the heal, restarted then.
    let faults = Faults::default()
        .crash(1.0)
        .restart_delay(Duration::from_secs(1));
    let sim = sim(3, faults, Network::new());
    let clients = start(&sim, 1, true);
    sim.check_liveness(ms(50), ms(50), &clients).unwrap();
    let trace = sim.trace_text();
    assert!(trace.contains(" <0.1> fault crash "), "{trace}");
    assert!(
        trace.contains("t=50000us heal\nt=50000us <0.1> restart server\n"),
        "{trace}"
    );
}

#[test]
fn a_client_that_never_retries_is_reported_not_finished() {
    let ms = Duration::from_millis;
    let sim = sim(1, Faults::default(), losing());
    let clients = start(&sim, 2, false);
    let unfinished = sim.check_liveness(ms(100), ms(100), &clients).unwrap_err();
    assert_eq!(
        unfinished.pids,
        clients.iter().map(|&pid| (pid, None)).collect::<Vec<_>>()
    );
    assert_eq!(
        (unfinished.healed_at, unfinished.deadline),
        (ms(100), ms(200))
    );
    let text = unfinished.to_string();
    assert_eq!(
        text,
        "2 process(es) did not finish by t=200000us, with every fault healed at t=100000us: <0.2> <0.3>"
    );
    // The clock stands at the deadline.
    assert_eq!(sim.now(), ms(200));
    // The server, named, is reported by name.
    let server = Pid::new(0, 1);
    let unfinished = sim.check_liveness(ms(300), ms(10), &[server]).unwrap_err();
    assert_eq!(unfinished.pids, vec![(server, Some("server".to_owned()))]);
}
