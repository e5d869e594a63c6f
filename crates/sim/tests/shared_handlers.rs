//! One set of handlers for both hosts: a `PortableHandler` value registered
//! with the real scheduler and with the simulator (through each builder's
//! `portable_handler`, and through `handler(name, portable(..))`) answers
//! every yield of every process the same way on both — the right result
//! for the right tag of the right process, an error where it fails or
//! drops its completer.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use stepsched_process::{Context, Error, Events, Pid, Process, Status, StepOutput, Tag};
use stepsched_sim::{Command, Complete, Faults, PortableHandler, Sim, portable};

/// What a client asks.
enum Op {
    /// Add this to the service's base (served as "add", and as "plus").
    Add(u64),
    /// Refused: completed with an error.
    Fail,
    /// The service drops its completer without completing.
    Forget,
    /// The asking process's PID number, as the completer reports it.
    Whoami,
}

impl Command for Op {
    fn name(&self) -> &str {
        match self {
            Op::Add(n) if n % 2 == 0 => "plus",
            Op::Add(_) => "add",
            Op::Fail => "fail",
            Op::Forget => "forget",
            Op::Whoami => "whoami",
        }
    }
}

/// What a client ends with: each yield's tag and its result (an error as
/// its text), in tag order.
type Answers = Vec<(Tag, Result<u64, String>)>;

/// Yields one of each command (two adds per name), under tags that depend
/// on its PID, and finishes with every completion it got, once each has
/// come.
#[derive(Default)]
struct Client {
    expected: usize,
    answers: BTreeMap<Tag, Result<u64, String>>,
}

/// The yields of the client `pid`: tags are distinct per process, so an
/// answer routed to the wrong process or the wrong yield shows.
fn asks(pid: Pid) -> Vec<(Tag, Op)> {
    let base = pid.number() * 100;
    vec![
        (base + 1, Op::Add(1)),
        (base + 2, Op::Add(2)),
        (base + 3, Op::Fail),
        (base + 4, Op::Forget),
        (base + 5, Op::Whoami),
        (base + 6, Op::Add(3)),
        (base + 7, Op::Add(4)),
    ]
}

impl Process for Client {
    type Input = ();
    type Message = ();
    type Response = u64;
    type Command = Op;
    type Output = Answers;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        events: Events<'_, (), u64>,
        out: &mut StepOutput<Op, Answers>,
    ) -> Result<(), Error> {
        for event in events {
            if let Some(tag) = event.tag() {
                let result = event.into_result().expect("a completion");
                let previous = self.answers.insert(tag, result.map_err(|e| e.to_string()));
                assert!(previous.is_none(), "yield {tag} completed twice");
            }
        }
        if self.expected == 0 {
            for (tag, op) in asks(cx.pid()) {
                out.push_yield(tag, op);
                self.expected += 1;
            }
        }
        if self.answers.len() == self.expected {
            let answers = std::mem::take(&mut self.answers).into_iter().collect();
            out.set_status(Status::Done(answers));
        } else {
            out.set_status(Status::Yield);
        }
        Ok(())
    }
}

/// The one handler, for every command name, on both hosts.
struct Service {
    base: u64,
}

impl PortableHandler<Client> for Service {
    fn handle<C: Complete<Client>>(&self, op: Op, done: C) {
        match op {
            // The tag in the answer: a completer that reported another
            // yield's tag, or completed another yield, gives another
            // answer.
            Op::Add(n) => {
                let answer = self.base + n * 1000 + done.tag();
                done.complete(Ok(answer));
            }
            Op::Fail => {
                done.complete(Err(Error::failed("refused")));
            }
            Op::Forget => drop(done),
            Op::Whoami => {
                let number = done.pid().number();
                done.complete(Ok(number));
            }
        }
    }
}

/// What the client `pid` must end with.
fn expected(pid: Pid) -> Answers {
    let forgot = Error::failed("the handler dropped its completer without completing");
    asks(pid)
        .into_iter()
        .map(|(tag, op)| {
            let result = match op {
                Op::Add(n) => Ok(BASE + n * 1000 + tag),
                Op::Fail => Err(Error::failed("refused").to_string()),
                Op::Forget => Err(forgot.to_string()),
                Op::Whoami => Ok(pid.number()),
            };
            (tag, result)
        })
        .collect()
}

const BASE: u64 = 1_000_000;
const CLIENTS: usize = 4;

/// Each client's PID and its answers, under the scheduler.
fn under_scheduler(service: &Arc<Service>) -> Vec<(Pid, Answers)> {
    let scheduler = stepsched::Scheduler::<Client>::builder()
        .workers(2)
        .portable_handler("add", Arc::clone(service))
        .handler("plus", portable(Arc::clone(service)))
        .portable_handler("fail", Arc::clone(service))
        .portable_handler("forget", Arc::clone(service))
        .portable_handler("whoami", Arc::clone(service))
        .build()
        .unwrap();
    let joins: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let pid = scheduler.allocate_pid();
            let join = scheduler
                .submit(pid, Client::default(), "main", ())
                .unwrap();
            (pid, join)
        })
        .collect();
    joins
        .into_iter()
        .map(|(pid, join)| (pid, join.join().unwrap()))
        .collect()
}

/// Each client's PID and its answers, under the simulator with `seed`.
fn under_sim(service: &Arc<Service>, seed: u64, faults: Faults) -> Vec<(Pid, Answers)> {
    let sim = Sim::<Client>::builder()
        .seed(seed)
        .faults(faults)
        .portable_handler("add", Arc::clone(service))
        .handler("plus", portable(Arc::clone(service)))
        .portable_handler("fail", Arc::clone(service))
        .portable_handler("forget", Arc::clone(service))
        .portable_handler("whoami", Arc::clone(service))
        .build();
    let joins: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let pid = sim.allocate_pid();
            let join = sim.submit(pid, Client::default(), "main", ()).unwrap();
            (pid, join)
        })
        .collect();
    joins
        .into_iter()
        .map(|(pid, join)| (pid, join.join().unwrap()))
        .collect()
}

#[test]
fn one_handler_value_answers_alike_under_the_scheduler_and_the_simulator() {
    let service = Arc::new(Service { base: BASE });
    let scheduled = under_scheduler(&service);
    for (pid, answers) in &scheduled {
        assert_eq!(answers, &expected(*pid), "scheduler, {pid}");
    }
    for seed in 0..20 {
        let simulated = under_sim(&service, seed, Faults::default());
        assert_eq!(simulated, scheduled, "seed {seed}");
    }
}

/// With completions delayed and events reordered, each still reaches its
/// yield: the answers do not depend on the order.
#[test]
fn the_same_answers_with_delays_and_reordering() {
    let service = Arc::new(Service { base: BASE });
    let faults = Faults {
        delay: 0.5,
        max_delay: Duration::from_millis(20),
        reorder: 0.5,
        ..Faults::default()
    };
    for seed in 0..20 {
        for (pid, answers) in under_sim(&service, seed, faults) {
            assert_eq!(answers, expected(pid), "seed {seed}, {pid}");
        }
    }
}

/// A command that takes this many milliseconds (a disk, a remote call).
struct Nap(u64);

impl Command for Nap {
    fn name(&self) -> &str {
        "nap"
    }
}

/// Asks for one nap of `ms` and ends with the answer.
struct Napper {
    ms: u64,
    asked: bool,
}

impl Process for Napper {
    type Input = ();
    type Message = ();
    type Response = u64;
    type Command = Nap;
    type Output = u64;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        _: &mut Context<'_, Self>,
        events: Events<'_, (), u64>,
        out: &mut StepOutput<Nap, u64>,
    ) -> Result<(), Error> {
        for event in events {
            if let Some(result) = event.into_result() {
                out.set_status(Status::Done(result?));
                return Ok(());
            }
        }
        if !self.asked {
            self.asked = true;
            out.push_yield(1, Nap(self.ms));
        }
        out.set_status(Status::Yield);
        Ok(())
    }
}

/// Answers a nap of `n` ms with `n`, after `n` ms by the host's clock.
struct Sleeps;

impl PortableHandler<Napper> for Sleeps {
    fn handle<C: Complete<Napper>>(&self, Nap(ms): Nap, done: C) {
        done.complete_after(Duration::from_millis(ms), Ok(ms));
    }
}

#[test]
fn a_portable_handler_completes_after_a_delay_by_each_hosts_clock() {
    // The simulator: virtual time, in the trace.
    let sim = Sim::<Napper>::builder()
        .portable_handler("nap", Sleeps)
        .build();
    let join = sim
        .submit(
            sim.allocate_pid(),
            Napper {
                ms: 30,
                asked: false,
            },
            "main",
            (),
        )
        .unwrap();
    assert_eq!(join.join(), Ok(30));
    assert_eq!(sim.now(), Duration::from_millis(30));
    let trace = sim.trace_text();
    assert!(trace.contains("t=30000us <0.1> events=[c1]"), "{trace}");

    // The scheduler: real time, from its timer thread; never early.
    let scheduler = stepsched::Scheduler::<Napper>::builder()
        .workers(1)
        .portable_handler("nap", Sleeps)
        .build()
        .unwrap();
    let start = std::time::Instant::now();
    let join = scheduler
        .submit(
            scheduler.allocate_pid(),
            Napper {
                ms: 30,
                asked: false,
            },
            "main",
            (),
        )
        .unwrap();
    assert_eq!(join.join(), Ok(30));
    assert!(start.elapsed() >= Duration::from_millis(30));
}
