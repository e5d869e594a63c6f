//! The network's planted bug (the guide's "Lost replies and retries"): a
//! client retries an increment after a timeout, a partition drops the
//! server's reply, and a server that does not deduplicate applies the
//! increment twice. Found within 1 000 seeds, replayed byte for byte; the
//! fixed server (deduplicating by request id) is clean on 10 000 seeds.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use stepsched_process::{Context, Error, Event, Events, Pid, Process, Status, StepOutput};
use stepsched_sim::{Network, Sim};

#[derive(Clone)]
enum Msg {
    /// Add one; `id` numbers the client's requests from 1.
    Incr { id: u64 },
    /// Request `id` was applied.
    Ack { id: u64 },
}

enum Actor {
    /// Applies each increment to `count`; with `dedup`, once per client
    /// and request id (`applied`: the last id applied, per client).
    Server {
        count: Rc<Cell<u32>>,
        dedup: bool,
        applied: BTreeMap<Pid, u64>,
    },
    /// Sends `left` increments, one at a time, and sends one again when
    /// no ack came within the timeout.
    Client { server: Pid, id: u64, left: u32 },
}

const CLIENTS: u32 = 2;
const EACH: u32 = 3;
const TIMEOUT: Duration = Duration::from_millis(20);

impl Process for Actor {
    type Input = ();
    type Message = Msg;
    type Response = ();
    type Command = &'static str;
    type Output = ();

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        events: Events<'_, Msg, ()>,
        out: &mut StepOutput<&'static str, ()>,
    ) -> Result<(), Error> {
        match self {
            Actor::Server {
                count,
                dedup,
                applied,
            } => {
                for event in events {
                    if let Event::Message {
                        from: Some(from),
                        data: Msg::Incr { id },
                    } = event
                    {
                        let last = applied.entry(from).or_insert(0);
                        if !*dedup || id > *last {
                            count.set(count.get() + 1);
                            *last = id;
                        }
                        // The client may be gone; a lost ack is retried.
                        let _ = cx.send(from, Msg::Ack { id });
                    }
                }
                out.set_status(Status::Idle);
            }
            Actor::Client { server, id, left } => {
                let mut send = false;
                let mut first = true;
                for event in events {
                    first = false;
                    match event {
                        Event::Message {
                            data: Msg::Ack { id: acked },
                            ..
                        } if acked == *id => {
                            *left -= 1;
                            if *left == 0 {
                                out.set_status(Status::Done(()));
                                return Ok(());
                            }
                            *id += 1;
                            send = true;
                        }
                        // The timeout of the request still unanswered.
                        Event::Completion { tag, .. } if tag == *id => send = true,
                        _ => {}
                    }
                }
                if first || send {
                    cx.send(*server, Msg::Incr { id: *id })
                        .map_err(|e| Error::failed(e.to_string()))?;
                    out.push_yield(*id, "timeout");
                }
                out.set_status(Status::Idle);
            }
        }
        Ok(())
    }
}

/// Two clients of three increments each, over a network with a delay of
/// 1 to 5 ms and random partitions (2 % of messages start one, of 10 to
/// 60 ms): the server's final count and the trace.
fn final_count(seed: u64, dedup: bool) -> (u32, String) {
    let network = Network::new()
        .delay(Duration::from_millis(1), Duration::from_millis(5))
        .partitions(0.02, Duration::from_millis(10), Duration::from_millis(60));
    let sim = Sim::builder()
        .seed(seed)
        .network(network)
        .max_steps(100_000)
        .handler("timeout", |_, done| {
            done.complete_after(TIMEOUT, Ok(()));
        })
        .build();
    let count = Rc::new(Cell::new(0));
    let server = sim.allocate_pid();
    let state = Actor::Server {
        count: Rc::clone(&count),
        dedup,
        applied: BTreeMap::new(),
    };
    sim.submit(server, state, "main", ()).unwrap();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let client = Actor::Client {
                server,
                id: 1,
                left: EACH,
            };
            sim.submit(sim.allocate_pid(), client, "main", ()).unwrap()
        })
        .collect();
    let report = sim.run();
    assert!(!report.step_limit_hit, "seed {seed}");
    for client in clients {
        assert_eq!(client.join(), Ok(()), "seed {seed}: every client finishes");
    }
    (count.get(), sim.trace_text())
}

#[test]
fn the_double_increment_is_found_within_1000_seeds_and_replays() {
    let start = stepsched_sim::seed_from_env(0);
    let found = (start..start + 1000).find(|&seed| final_count(seed, false).0 != CLIENTS * EACH);
    let Some(seed) = found else {
        panic!("no double increment in seeds {start}..{}", start + 1000);
    };
    let (count, trace) = final_count(seed, false);
    println!("seed {seed} (STEPSCHED_SIM_SEED={seed}): count {count}\n{trace}");
    assert!(count > CLIENTS * EACH, "seed {seed}: {count}");
    assert!(
        trace.contains("net partition"),
        "a partition did it:\n{trace}"
    );
    // Byte for byte, twice.
    assert_eq!(final_count(seed, false), (count, trace));
}

#[test]
fn the_deduplicating_server_counts_each_request_once_on_10_000_seeds() {
    let mut retried = 0;
    for seed in 0..10_000 {
        let (count, trace) = final_count(seed, true);
        assert_eq!(count, CLIENTS * EACH, "seed {seed}:\n{trace}");
        retried += u32::from(trace.contains("net partition"));
    }
    // The check means something only if partitions fired.
    assert!(retried > 1000, "partitions on only {retried} seeds");
}
