//! A planted ordering bug — a lost update — found by searching seeds, and
//! its fix found clean on the same seeds.
//!
//! Two clients add one each to a counter. The buggy client reads the value
//! (`Get`, answered by `Value`) and writes back the value plus one
//! (`Set`): if the other client's read is answered before this client's
//! write is applied, one increment is lost. The fixed client sends `Inc`.

use stepsched_process::{Context, Error, Event, Events, Pid, Process, Status, StepOutput};
use stepsched_sim::Sim;

enum Msg {
    Get,
    Value(u32),
    Set(u32),
    Inc,
}

enum Actor {
    /// Holds the value; finishes with it after `writes` writes.
    Counter { value: u32, writes: u32 },
    /// Adds one to `counter`, by a read and a write unless `fixed`.
    Client { counter: Pid, fixed: bool },
}

impl Process for Actor {
    type Input = ();
    type Message = Msg;
    type Response = ();
    type Command = &'static str;
    type Output = u32;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        ctx: &mut Context<'_, Self>,
        events: Events<'_, Msg, ()>,
        out: &mut StepOutput<&'static str, u32>,
    ) -> Result<(), Error> {
        let refused = |e: stepsched_process::SendError<Msg>| Error::failed(e.to_string());
        match self {
            Actor::Counter { value, writes } => {
                for event in events {
                    if let Event::Message { from, data } = event {
                        match data {
                            Msg::Get => {
                                let to = from.ok_or_else(|| Error::failed("anonymous get"))?;
                                ctx.send(to, Msg::Value(*value)).map_err(refused)?;
                            }
                            Msg::Set(v) => {
                                *value = v;
                                *writes -= 1;
                            }
                            Msg::Inc => {
                                *value += 1;
                                *writes -= 1;
                            }
                            Msg::Value(_) => return Err(Error::failed("a counter got a value")),
                        }
                    }
                }
                out.set_status(if *writes == 0 {
                    Status::Done(*value)
                } else {
                    Status::Idle
                });
            }
            Actor::Client { counter, fixed } => {
                let mut got = None;
                let mut first = true;
                for event in events {
                    first = false;
                    if let Event::Message {
                        data: Msg::Value(v),
                        ..
                    } = event
                    {
                        got = Some(v);
                    }
                }
                if first && *fixed {
                    ctx.send(*counter, Msg::Inc).map_err(refused)?;
                    out.set_status(Status::Done(0));
                } else if first {
                    ctx.send(*counter, Msg::Get).map_err(refused)?;
                    out.set_status(Status::Idle);
                } else if let Some(v) = got {
                    ctx.send(*counter, Msg::Set(v + 1)).map_err(refused)?;
                    out.set_status(Status::Done(v));
                } else {
                    out.set_status(Status::Idle);
                }
            }
        }
        Ok(())
    }
}

/// The counter's final value under `seed`, and the trace.
fn final_count(seed: u64, fixed: bool) -> (u32, String) {
    let sim: Sim<Actor> = Sim::builder().seed(seed).build();
    let counter = sim.allocate_pid();
    sim.submit(
        counter,
        Actor::Counter {
            value: 0,
            writes: 2,
        },
        "main",
        (),
    )
    .unwrap();
    for _ in 0..2 {
        let client = sim.allocate_pid();
        sim.submit(client, Actor::Client { counter, fixed }, "main", ())
            .unwrap();
    }
    let report = sim.run();
    assert_eq!(report.live, 0, "seed {seed}:\n{}", sim.trace_text());
    let count = sim.take_result(counter).unwrap().unwrap();
    (count, sim.trace_text())
}

#[test]
fn the_lost_update_is_found_within_1000_seeds() {
    let start = stepsched_sim::seed_from_env(0);
    let found = (start..start + 1000).find(|&seed| final_count(seed, false).0 != 2);
    let Some(seed) = found else {
        panic!("no lost update in seeds {start}..{}", start + 1000);
    };
    let (count, trace) = final_count(seed, false);
    println!("lost update at seed {seed} (STEPSCHED_SIM_SEED={seed}):\n{trace}");
    assert_eq!(count, 1, "seed {seed}");
    // Replaying the seed replays the bug.
    assert_eq!(final_count(seed, false), (count, trace));
}

#[test]
fn not_every_order_loses_the_update() {
    let clean = (0..1000)
        .filter(|&seed| final_count(seed, false).0 == 2)
        .count();
    assert!(
        clean > 0,
        "every seed lost the update: the orders do not vary"
    );
}

#[test]
fn the_fixed_counter_loses_nothing_on_any_seed() {
    for seed in 0..1000 {
        let (count, trace) = final_count(seed, true);
        assert_eq!(count, 2, "seed {seed}:\n{trace}");
    }
}
