//! The step rules the simulator shares with the scheduler: close exactly
//! once on every path, spawn and upgrade through the context, a process
//! terminating itself, a `Done` step's yields not dispatched, init errors.
//! The process here is not `Send` (it logs into an `Rc`): the simulator
//! does not need it to be.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use stepsched_process::{
    Context, Error, Event, Events, Pid, Process, Status, StepOutput, SubmitError,
};
use stepsched_sim::Sim;

type Log = Rc<RefCell<Vec<String>>>;

/// What a probe does in its first step.
#[derive(Clone, Copy)]
enum Plan {
    /// Finishes with 1, yielding a command in the same step.
    DoneWithYield,
    /// Returns an error.
    Fail,
    /// Panics.
    Panic,
    /// Terminates itself, then finishes with 2 (which is ignored).
    TerminateSelf,
    /// Spawns a child that finishes with 7, waits for its message, and
    /// finishes with the message.
    Spawn,
    /// Upgrades to a probe that finishes with 9.
    Upgrade,
    /// Upgrades to a probe whose `init` terminates it.
    UpgradeToQuitter,
    /// Finishes with 7 after sending 7 to its parent.
    Child(Pid),
    /// Finishes with 9.
    Nine,
}

struct Probe {
    name: &'static str,
    plan: Plan,
    log: Log,
}

impl Probe {
    fn new(name: &'static str, plan: Plan, log: &Log) -> Self {
        Probe {
            name,
            plan,
            log: Rc::clone(log),
        }
    }
}

impl Process for Probe {
    type Input = ();
    type Message = u32;
    type Response = ();
    type Command = &'static str;
    type Output = u32;

    fn init(&mut self, ctx: &Context<'_, Self>, method: &str, (): ()) -> Result<(), Error> {
        self.log.borrow_mut().push(format!("init {}", self.name));
        match method {
            "main" => Ok(()),
            "panic" => panic!("init broke"),
            "quit" => ctx
                .terminate(ctx.pid())
                .map_err(|e| Error::failed(e.to_string())),
            other => Err(Error::UnknownMethod(other.into())),
        }
    }

    fn step(
        &mut self,
        ctx: &mut Context<'_, Self>,
        events: Events<'_, u32, ()>,
        out: &mut StepOutput<&'static str, u32>,
    ) -> Result<(), Error> {
        let messages: Vec<u32> = events.filter_map(Event::into_message).collect();
        match self.plan {
            Plan::DoneWithYield => {
                out.push_yield(1, "count");
                out.set_status(Status::Done(1));
            }
            Plan::Fail => return Err(Error::failed("step failed")),
            Plan::Panic => panic!("step broke"),
            Plan::TerminateSelf => {
                ctx.terminate(ctx.pid()).unwrap();
                out.set_status(Status::Done(2));
            }
            Plan::Spawn => match messages.first() {
                Some(&m) => out.set_status(Status::Done(m)),
                None => {
                    let child = Probe::new("child", Plan::Child(ctx.pid()), &self.log);
                    ctx.spawn(child, "main", ()).unwrap();
                    out.set_status(Status::Idle);
                }
            },
            Plan::Child(parent) => {
                ctx.send(parent, 7).unwrap();
                out.set_status(Status::Done(7));
            }
            Plan::Upgrade => {
                let next = Probe::new("upgraded", Plan::Nine, &self.log);
                ctx.upgrade(next, "main", ());
            }
            Plan::UpgradeToQuitter => {
                let next = Probe::new("quitter", Plan::Nine, &self.log);
                ctx.upgrade(next, "quit", ());
            }
            Plan::Nine => {
                self.log.borrow_mut().push(format!("step {}", self.name));
                out.set_status(Status::Done(9));
            }
        }
        Ok(())
    }

    fn close(&mut self) {
        self.log.borrow_mut().push(format!("close {}", self.name));
    }
}

#[test]
fn every_path_closes_once_and_publishes_its_result() {
    let log: Log = Rc::default();
    let calls = Rc::new(Cell::new(0));
    let counted = Rc::clone(&calls);
    let sim: Sim<Probe> = Sim::builder()
        .seed(stepsched_sim::seed_from_env(1))
        .handler("count", move |_, done| {
            counted.set(counted.get() + 1);
            done.complete(Ok(()));
        })
        .build();
    let plans = [
        ("done", Plan::DoneWithYield),
        ("fail", Plan::Fail),
        ("panic", Plan::Panic),
        ("self", Plan::TerminateSelf),
        ("spawn", Plan::Spawn),
        ("upgrade", Plan::Upgrade),
        ("quit", Plan::UpgradeToQuitter),
    ];
    let pids: Vec<Pid> = plans
        .iter()
        .map(|&(name, plan)| {
            let pid = sim.allocate_pid();
            sim.submit(pid, Probe::new(name, plan, &log), "main", ())
                .unwrap()
                .pid()
        })
        .collect();
    let report = sim.run();
    let seed = sim.seed();
    assert_eq!(report.live, 0, "seed {seed}:\n{}", sim.trace_text());
    let results: Vec<_> = pids.iter().map(|p| sim.take_result(*p).unwrap()).collect();
    assert_eq!(results[0], Ok(1));
    assert_eq!(results[1], Err(Error::failed("step failed")));
    assert_eq!(results[2], Err(Error::Panicked("step broke".into())));
    assert_eq!(
        results[3],
        Err(Error::Terminated),
        "a terminate wins over Done"
    );
    assert_eq!(results[4], Ok(7), "the spawned child's message");
    assert_eq!(results[5], Ok(9), "the upgraded process's result");
    assert_eq!(results[6], Err(Error::Terminated), "terminated in its init");
    assert_eq!(calls.get(), 0, "a Done step's yields are not dispatched");
    let log = log.borrow();
    assert!(
        !log.iter().any(|l| l == "step quitter"),
        "no step after a terminate: {log:?}"
    );
    assert!(log.iter().any(|l| l == "step upgraded"));
    let names = [
        "done", "fail", "panic", "self", "spawn", "child", "upgrade", "upgraded", "quit", "quitter",
    ];
    for name in names {
        let closes = log
            .iter()
            .filter(|l| **l == format!("close {name}"))
            .count();
        assert_eq!(closes, 1, "{name} closed once, seed {seed}: {log:?}");
        let inits = log.iter().filter(|l| **l == format!("init {name}")).count();
        assert_eq!(inits, 1, "{name} initialized once: {log:?}");
    }
    let upgrade_closed = log.iter().position(|l| l == "close upgrade").unwrap();
    let upgraded_init = log.iter().position(|l| l == "init upgraded").unwrap();
    assert!(
        upgrade_closed < upgraded_init,
        "the old process closes first: {log:?}"
    );
}

#[test]
fn init_errors_and_duplicate_pids_are_refused_and_closed() {
    let log: Log = Rc::default();
    let sim: Sim<Probe> = Sim::builder().build();
    let pid = sim.allocate_pid();
    let unknown = sim.submit(pid, Probe::new("a", Plan::Nine, &log), "nope", ());
    assert!(matches!(unknown, Err(SubmitError::Init(Error::UnknownMethod(m))) if m == "nope"));
    let panicked = sim.submit(pid, Probe::new("b", Plan::Nine, &log), "panic", ());
    assert!(matches!(panicked, Err(SubmitError::Init(Error::Panicked(m))) if m == "init broke"));
    assert!(!sim.is_live(pid));
    sim.submit(pid, Probe::new("c", Plan::Nine, &log), "main", ())
        .unwrap();
    let duplicate = sim.submit(pid, Probe::new("d", Plan::Nine, &log), "main", ());
    assert!(matches!(duplicate, Err(SubmitError::DuplicatePid(p, _)) if p == pid));
    sim.run();
    assert_eq!(sim.take_result(pid), Some(Ok(9)));
    assert_eq!(
        *log.borrow(),
        [
            "init a", "close a", "init b", "close b", "init c", "init d", "close d", "step c",
            "close c"
        ]
    );
}

#[test]
fn dropping_the_simulator_closes_the_live_processes_once() {
    /// Waits for messages forever.
    struct Waiter(Log);
    impl Process for Waiter {
        type Input = ();
        type Message = u32;
        type Response = ();
        type Command = &'static str;
        type Output = ();
        fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
            Ok(())
        }
        fn step(
            &mut self,
            _: &mut Context<'_, Self>,
            _: Events<'_, u32, ()>,
            out: &mut StepOutput<&'static str, ()>,
        ) -> Result<(), Error> {
            out.set_status(Status::Idle);
            Ok(())
        }
        fn close(&mut self) {
            self.0.borrow_mut().push("close".into());
        }
    }
    let log: Log = Rc::default();
    let sim: Sim<Waiter> = Sim::builder().build();
    for _ in 0..3 {
        let pid = sim.allocate_pid();
        sim.submit(pid, Waiter(Rc::clone(&log)), "main", ())
            .unwrap();
    }
    let report = sim.run();
    assert_eq!(report.live, 3);
    assert!(log.borrow().is_empty(), "nothing closed while live");
    drop(sim);
    assert_eq!(*log.borrow(), ["close", "close", "close"]);
}
