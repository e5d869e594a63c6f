//! Per-sender order under the reorder fault.

use stepsched_process::{Context, Error, Event, Events, Pid, Process, Status, StepOutput};
use stepsched_sim::{Faults, Sim};

/// What a recorder saw: (sender, message) in delivery order.
enum Node {
    /// Sends `0..count` to `to` in one step, then finishes.
    Sender { to: Pid, count: u32 },
    /// Records every message; finishes after `left`.
    Recorder { seen: Vec<(Pid, u32)>, left: u32 },
}

impl Process for Node {
    type Input = ();
    type Message = u32;
    type Response = ();
    type Command = &'static str;
    type Output = Vec<(Pid, u32)>;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        ctx: &mut Context<'_, Self>,
        events: Events<'_, u32, ()>,
        out: &mut StepOutput<&'static str, Vec<(Pid, u32)>>,
    ) -> Result<(), Error> {
        match self {
            Node::Sender { to, count } => {
                for n in 0..*count {
                    ctx.send(*to, n).map_err(|e| Error::failed(e.to_string()))?;
                }
                out.set_status(Status::Done(Vec::new()));
            }
            Node::Recorder { seen, left } => {
                for event in events {
                    if let Event::Message {
                        from: Some(from),
                        data,
                    } = event
                    {
                        seen.push((from, data));
                        *left -= 1;
                    }
                }
                out.set_status(if *left == 0 {
                    Status::Done(std::mem::take(seen))
                } else {
                    Status::Idle
                });
            }
        }
        Ok(())
    }
}

/// Three senders of 10 messages each to one recorder; what it saw.
fn seen(seed: u64, reorder: f64) -> Vec<(Pid, u32)> {
    let sim: Sim<Node> = Sim::builder()
        .seed(seed)
        .faults(Faults {
            reorder,
            ..Faults::default()
        })
        .build();
    let recorder = sim.allocate_pid();
    let record = Node::Recorder {
        seen: Vec::new(),
        left: 30,
    };
    sim.submit(recorder, record, "main", ()).unwrap();
    for _ in 0..3 {
        let pid = sim.allocate_pid();
        sim.submit(
            pid,
            Node::Sender {
                to: recorder,
                count: 10,
            },
            "main",
            (),
        )
        .unwrap();
    }
    sim.run();
    sim.take_result(recorder).unwrap().unwrap()
}

#[test]
fn reordering_mixes_senders_but_keeps_each_senders_order() {
    let mut mixed = false;
    for seed in 0..50 {
        let seen = seen(seed, 1.0);
        assert_eq!(seen.len(), 30, "seed {seed}");
        for sender in 2..=4 {
            let from: Vec<u32> = seen
                .iter()
                .filter(|(p, _)| *p == Pid::new(0, sender))
                .map(|(_, n)| *n)
                .collect();
            assert_eq!(from, (0..10).collect::<Vec<_>>(), "seed {seed}: {seen:?}");
        }
        mixed |= seen != self::seen(seed, 0.0);
    }
    assert!(mixed, "the reorder fault never changed the delivery order");
}
