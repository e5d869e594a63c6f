//! The counter with a planted ordering bug, and its fix, shared by the
//! `lost_increment` example and the `planted_bug` test.
//!
//! A counter persists its value through a `store` command after each
//! increment; the store's completion is its acknowledgment. The buggy
//! counter drops an increment that arrives while a store is in flight (it
//! means to "include it in the next store" and forgets to). Two clients
//! each send one increment, the second after thinking for 1 ms of virtual
//! time; stores are acknowledged at once, unless the delay fault (rare,
//! here) holds an acknowledgment back past the second increment. Only
//! some seeds lose the increment: the search must find one. The fixed
//! counter owes such increments and stores them after the acknowledgment.

use std::time::Duration;

use stepsched_process::{Context, Error, Event, Events, Pid, Process, Status, StepOutput};
use stepsched_sim::{Builder, Faults, Sim};

pub(crate) enum Actor {
    Counter {
        fixed: bool,
        value: u32,
        saving: bool,
        owed: u32,
        got: u32,
        expected: u32,
        next_tag: u64,
    },
    /// Sends one increment to `counter`, after a `think` if `think`.
    Client { counter: Pid, think: bool },
}

impl Process for Actor {
    type Input = ();
    type Message = ();
    type Response = ();
    type Command = &'static str;
    type Output = u32;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        ctx: &mut Context<'_, Self>,
        events: Events<'_, (), ()>,
        out: &mut StepOutput<&'static str, u32>,
    ) -> Result<(), Error> {
        match self {
            Actor::Counter {
                fixed,
                value,
                saving,
                owed,
                got,
                expected,
                next_tag,
            } => {
                let mut store = |saving: &mut bool, out: &mut StepOutput<&'static str, u32>| {
                    *next_tag += 1;
                    out.push_yield(*next_tag, "store");
                    *saving = true;
                };
                for event in events {
                    match event {
                        Event::Message { .. } => {
                            *got += 1;
                            if !*saving {
                                *value += 1;
                                store(saving, out);
                            } else if *fixed {
                                *owed += 1;
                            }
                            // The bug: otherwise the increment is dropped.
                        }
                        Event::Completion { result, .. } => {
                            result?;
                            *saving = false;
                            if *owed > 0 {
                                *value += std::mem::take(owed);
                                store(saving, out);
                            }
                        }
                        Event::Cancel => return Err(Error::Cancelled),
                    }
                }
                out.set_status(if *got == *expected && !*saving {
                    Status::Done(*value)
                } else if *saving {
                    Status::Yield
                } else {
                    Status::Idle
                });
            }
            Actor::Client { counter, think } => {
                let thought = events.count() > 0;
                if *think && !thought {
                    out.push_yield(1, "think");
                    out.set_status(Status::Yield);
                } else {
                    ctx.send(*counter, ())
                        .map_err(|e| Error::failed(e.to_string()))?;
                    out.set_status(Status::Done(0));
                }
            }
        }
        Ok(())
    }
}

/// The faults of the search: a rare delay of the acknowledgment.
pub(crate) fn faults() -> Faults {
    Faults {
        delay: 0.05,
        max_delay: Duration::from_millis(3),
        ..Faults::default()
    }
}

/// The counter's final value under `seed` (2 unless an increment was
/// lost), and the trace.
pub(crate) fn final_count(seed: u64, fixed: bool) -> (u32, String) {
    count_with(Sim::builder().seed(seed).faults(faults()), fixed)
}

/// The counter's final value on a simulator built by `builder` (its seed
/// and faults), and the trace.
pub(crate) fn count_with(builder: Builder<Actor>, fixed: bool) -> (u32, String) {
    let sim = builder
        .handler("store", |_, done| {
            done.complete(Ok(()));
        })
        .handler("think", |_, done| {
            done.complete_after(Duration::from_millis(1), Ok(()));
        })
        .build();
    let counter = sim.allocate_pid();
    let state = Actor::Counter {
        fixed,
        value: 0,
        saving: false,
        owed: 0,
        got: 0,
        expected: 2,
        next_tag: 0,
    };
    let join = sim.submit(counter, state, "main", ()).unwrap();
    for think in [false, true] {
        let client = sim.allocate_pid();
        sim.submit(client, Actor::Client { counter, think }, "main", ())
            .unwrap();
    }
    let report = sim.run();
    assert_eq!(report.live, 0, "seed {}:\n{}", sim.seed(), sim.trace_text());
    let count = join.join().unwrap();
    (count, sim.trace_text())
}
