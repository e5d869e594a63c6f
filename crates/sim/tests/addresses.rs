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
