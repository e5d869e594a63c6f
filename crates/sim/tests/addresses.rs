//! Addresses under the simulator: `stepsched`'s `ContextExt::address` and
//! `ContextExt::spawn_address` work in a simulated step, and what is sent
//! through them takes the way of every `Context::send` (the simulated
//! network, the trace), so a process written with addresses runs under the
//! scheduler and the simulator alike.

use std::time::Duration;

use stepsched::{Address, ContextExt, Scheduler, SendError};
use stepsched_process::{Context, Error, Events, Process, Status, StepOutput};
use stepsched_sim::{Network, Sim};

const MS: Duration = Duration::from_millis(1);

/// A parent that spawns a child with `spawn_address` and sends it `rounds`
/// numbers through that address, one at a time; the child answers each
/// through `cx.address(sender)`. The parent ends with the sum of the
/// answers; the child ends when it is sent 0.
enum Node {
    Parent {
        child: Option<Address<Node>>,
        rounds: u32,
        sum: u32,
    },
    Child,
}

impl Process for Node {
    type Input = ();
    type Message = u32;
    type Response = ();
    type Command = &'static str;
    type Output = u32;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        events: Events<'_, u32, ()>,
        out: &mut StepOutput<&'static str, u32>,
    ) -> Result<(), Error> {
        match self {
            Node::Parent { child, rounds, sum } => {
                let child = match child {
                    Some(child) => child,
                    None => child.insert(cx.spawn_address(Node::Child, "main", ())?),
                };
                let answers: Vec<u32> = events.filter_map(|e| e.into_message()).collect();
                for n in &answers {
                    *sum += n;
                    *rounds -= 1;
                }
                if *rounds == 0 {
                    child.send(0).map_err(|e| Error::failed(e.to_string()))?;
                    out.set_status(Status::Done(*sum));
                    return Ok(());
                }
                if answers.len() == 1 || *sum == 0 {
                    child
                        .send(*rounds)
                        .map_err(|e| Error::failed(e.to_string()))?;
                }
                out.set_status(Status::Idle);
            }
            Node::Child => {
                for event in events {
                    let (Some(from), Some(&n)) = (event.sender(), event.message_data()) else {
                        continue;
                    };
                    if n == 0 {
                        out.set_status(Status::Done(0));
                        return Ok(());
                    }
                    let back = cx.address(from).ok_or_else(|| Error::failed("no parent"))?;
                    back.send(n * 10)
                        .map_err(|e| Error::failed(e.to_string()))?;
                }
                out.set_status(Status::Idle);
            }
        }
        Ok(())
    }
}

fn parent(rounds: u32) -> Node {
    Node::Parent {
        child: None,
        rounds,
        sum: 0,
    }
}

/// 10 × (5 + 4 + 3 + 2 + 1).
const SUM: u32 = 150;

fn simulated(seed: u64, network: bool) -> (Result<u32, Error>, Vec<String>) {
    let mut builder = Sim::<Node>::builder().seed(seed).trace(true);
    if network {
        builder = builder.network(Network::new().delay(MS, 5 * MS));
    }
    let sim = builder.build();
    let join = sim
        .submit(sim.allocate_pid(), parent(5), "main", ())
        .unwrap();
    let sum = join.join();
    // The child takes the parent's last 0 after the parent ended.
    sim.run();
    (sum, sim.trace())
}

#[test]
fn a_process_written_with_addresses_runs_under_the_simulator() {
    let (sum, trace) = simulated(1, false);
    assert_eq!(sum, Ok(SUM), "{trace:#?}");
    // The child was spawned, and it ended on the parent's 0.
    assert!(
        trace.iter().any(|l| l.contains("<0.2> submit main")),
        "{trace:#?}"
    );
    assert!(
        trace.iter().any(|l| l.contains("<0.2> end ok")),
        "{trace:#?}"
    );
}

#[test]
fn the_same_process_gives_the_same_sum_under_the_scheduler() {
    let scheduler = Scheduler::<Node>::builder().workers(2).build().unwrap();
    let join = scheduler
        .submit(scheduler.allocate_pid(), parent(5), "main", ())
        .unwrap();
    assert_eq!(join.join(), Ok(SUM));
}

#[test]
fn sends_through_addresses_cross_the_simulated_network_and_replay() {
    for seed in 0..20 {
        let (sum, trace) = simulated(seed, true);
        assert_eq!(sum, Ok(SUM), "seed {seed}: {trace:#?}");
        // Every message took the network: five numbers, five answers, the 0.
        let delays = trace.iter().filter(|l| l.contains(" net delay ")).count();
        assert_eq!(delays, 11, "seed {seed}: {trace:#?}");
        assert!(
            trace
                .iter()
                .any(|l| l.contains("net delay <0.1>-><0.2> #1 +")),
            "seed {seed}: {trace:#?}"
        );
        assert_eq!(simulated(seed, true).1, trace, "seed {seed}: replayed");
    }
}

/// Keeps the address of a process it was told of, and reports what sends
/// through it answer after that process ended.
enum Keeper {
    Keeper(Option<Address<Keeper>>),
    Quick,
}

impl Process for Keeper {
    type Input = ();
    type Message = u32;
    type Response = ();
    type Command = &'static str;
    type Output = (bool, bool, bool);

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        _: Events<'_, u32, ()>,
        out: &mut StepOutput<&'static str, (bool, bool, bool)>,
    ) -> Result<(), Error> {
        match self {
            Keeper::Quick => out.set_status(Status::Done((false, false, false))),
            Keeper::Keeper(kept) => match kept {
                None => {
                    *kept = Some(cx.spawn_address(Keeper::Quick, "main", ())?);
                    // Back once the quick one has had its step.
                    cx.after(MS, 1).map_err(|e| Error::failed(e.to_string()))?;
                    out.set_status(Status::Idle);
                }
                Some(address) => {
                    let closed = address.is_closed();
                    let refused = matches!(address.send(1), Err(SendError::Closed(_)));
                    let unknown = cx.address(stepsched::Pid::new(0, 99)).is_none();
                    out.set_status(Status::Done((closed, refused, unknown)));
                }
            },
        }
        Ok(())
    }
}

#[test]
fn an_address_of_an_ended_process_is_closed_and_an_unknown_pid_has_none() {
    let sim = Sim::<Keeper>::builder().seed(2).build();
    let join = sim
        .submit(sim.allocate_pid(), Keeper::Keeper(None), "main", ())
        .unwrap();
    assert_eq!(join.join(), Ok((true, true, true)));
}

/// Sends 1 through an address, then 2 with `Context::send`, to a process
/// that records what it gets: the order the scheduler gives them.
enum Mixed {
    Sender(stepsched::Pid),
    Sink(Vec<u32>),
}

impl Process for Mixed {
    type Input = ();
    type Message = u32;
    type Response = ();
    type Command = &'static str;
    type Output = Vec<u32>;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        events: Events<'_, u32, ()>,
        out: &mut StepOutput<&'static str, Vec<u32>>,
    ) -> Result<(), Error> {
        match self {
            Mixed::Sender(to) => {
                let to = *to;
                let address = cx.address(to).ok_or_else(|| Error::failed("no sink"))?;
                address.send(1).map_err(|e| Error::failed(e.to_string()))?;
                cx.send(to, 2).map_err(|e| Error::failed(e.to_string()))?;
                address.send(3).map_err(|e| Error::failed(e.to_string()))?;
                out.set_status(Status::Done(Vec::new()));
            }
            Mixed::Sink(got) => {
                got.extend(events.filter_map(|e| e.into_message()));
                if got.len() == 3 {
                    out.set_status(Status::Done(std::mem::take(got)));
                } else {
                    out.set_status(Status::Idle);
                }
            }
        }
        Ok(())
    }
}

#[test]
fn a_steps_sends_keep_their_order_whether_through_an_address_or_not() {
    for seed in 0..20 {
        let sim = Sim::<Mixed>::builder()
            .seed(seed)
            .network(Network::new().fifo(true).delay(MS, 5 * MS))
            .build();
        let sink = sim.allocate_pid();
        let join = sim
            .submit(sink, Mixed::Sink(Vec::new()), "main", ())
            .unwrap();
        sim.submit(sim.allocate_pid(), Mixed::Sender(sink), "main", ())
            .unwrap();
        assert_eq!(join.join(), Ok(vec![1, 2, 3]), "seed {seed}");
    }
    let scheduler = Scheduler::<Mixed>::builder().workers(2).build().unwrap();
    let sink = scheduler.allocate_pid();
    let join = scheduler
        .submit(sink, Mixed::Sink(Vec::new()), "main", ())
        .unwrap();
    scheduler
        .submit(scheduler.allocate_pid(), Mixed::Sender(sink), "main", ())
        .unwrap();
    assert_eq!(join.join(), Ok(vec![1, 2, 3]));
}

/// Takes the address of a process that has ended, then asks again after
/// a new process was submitted under the same PID.
enum Reuse {
    Keeper(Option<Address<Reuse>>, stepsched::Pid),
    Quick,
    Sink,
}

impl Process for Reuse {
    type Input = ();
    type Message = u32;
    type Response = ();
    type Command = &'static str;
    type Output = (bool, bool, bool);

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        events: Events<'_, u32, ()>,
        out: &mut StepOutput<&'static str, (bool, bool, bool)>,
    ) -> Result<(), Error> {
        match self {
            Reuse::Quick => {
                // Waits for one message, then ends.
                if events.count() > 0 {
                    out.set_status(Status::Done((false, false, false)));
                } else {
                    out.set_status(Status::Idle);
                }
            }
            Reuse::Sink => out.set_status(Status::Idle),
            Reuse::Keeper(kept, target) => {
                let target = *target;
                match kept {
                    None => {
                        *kept = cx.address(target);
                        let first = kept.as_ref().ok_or_else(|| Error::failed("no target"))?;
                        first.send(1).map_err(|e| Error::failed(e.to_string()))?;
                        cx.after(MS, 0).map_err(|e| Error::failed(e.to_string()))?;
                        out.set_status(Status::Idle);
                    }
                    Some(old) => {
                        let fresh = cx.address(target);
                        out.set_status(Status::Done((
                            old.is_closed(),
                            matches!(old.send(2), Err(SendError::Closed(_))),
                            fresh.is_some_and(|f| !f.is_closed() && f != *old),
                        )));
                    }
                }
            }
        }
        Ok(())
    }
}

#[test]
fn an_address_names_a_process_not_a_pid() {
    let sim = Sim::<Reuse>::builder().seed(3).build();
    let target = sim.allocate_pid();
    let quick = sim.submit(target, Reuse::Quick, "main", ()).unwrap();
    let keeper = sim
        .submit(sim.allocate_pid(), Reuse::Keeper(None, target), "main", ())
        .unwrap();
    assert_eq!(quick.join(), Ok((false, false, false)));
    // The PID again, for another process, before the keeper looks.
    sim.submit(target, Reuse::Sink, "main", ()).unwrap();
    assert_eq!(keeper.join(), Ok((true, true, true)));
}
