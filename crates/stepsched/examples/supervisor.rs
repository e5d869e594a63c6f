//! A supervisor process: it spawns three workers from its step
//! (`cx.spawn_address`, which returns each worker's address, stamped with
//! the supervisor's PID as the sender, so the workers reply to the sender
//! they see), gives each a job, then upgrades worker A in place (A
//! calls `cx.upgrade_from` with a factory registered by
//! `Builder::factory`, keeping its PID and handing its state over),
//! terminates worker B (`cx.terminate`), and asks worker C to upgrade to a
//! factory that does not exist (C ends with that error). The main thread
//! checks every process's result through the `on_complete` hook.
//!
//! ```sh
//! cargo run -p stepsched --example supervisor
//! ```

use std::sync::mpsc;

use stepsched::{
    Address, Context, ContextExt, Error, Event, Events, NoCommand, Pid, Process, Scheduler, Status,
    StepOutput,
};

#[derive(Debug)]
enum Msg {
    /// To a worker: compute on `n` and reply.
    Work(u64),
    /// To a worker: replace yourself by the factory's process.
    Upgrade(&'static str),
    /// To a worker: finish.
    Stop,
    /// From a worker: the result of a job, and the worker's version.
    Result { version: u32, value: u64 },
    /// From an upgraded worker: it runs as `version` now.
    Upgraded { version: u32 },
}

/// How a process starts: the supervisor, or a worker with its boss and
/// the number of jobs it has served (carried across an upgrade).
enum Start {
    Supervisor,
    Worker { boss: Pid, served: u64 },
}

/// The supervisor's phases.
#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Spawn,
    FirstJobs { replies: usize },
    Upgrading,
    SecondJob,
}

enum Node {
    New,
    Supervisor {
        phase: Phase,
        /// The workers' addresses, with the supervisor as the sender.
        workers: Vec<Address<Node>>,
        log: Vec<String>,
    },
    /// Version 1 adds one; version 2 doubles.
    Worker {
        version: u32,
        boss: Pid,
        served: u64,
        announce: bool,
    },
}

impl Process for Node {
    type Input = Start;
    type Message = Msg;
    /// No process here yields: no command, and (by convention) the
    /// message type as the response type.
    type Response = Self::Message;
    type Command = NoCommand;
    /// The supervisor's log, or a worker's number of jobs served.
    type Output = String;

    fn init(&mut self, _: &Context<'_, Self>, method: &str, input: Start) -> Result<(), Error> {
        *self = match (method, input) {
            ("supervise", Start::Supervisor) => Node::Supervisor {
                phase: Phase::Spawn,
                workers: Vec::new(),
                log: Vec::new(),
            },
            // `work` starts version 1; the factory builds version 2 and
            // `resume` starts it with the state handed over.
            ("work", Start::Worker { boss, served }) => Node::Worker {
                version: 1,
                boss,
                served,
                announce: false,
            },
            ("resume", Start::Worker { boss, served }) => match self {
                Node::Worker { version, .. } => Node::Worker {
                    version: *version,
                    boss,
                    served,
                    announce: true,
                },
                _ => return Err(Error::failed("resume: not a worker")),
            },
            (other, _) => return Err(Error::UnknownMethod(other.to_string())),
        };
        Ok(())
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        events: Events<'_, Msg>,
        out: &mut StepOutput<NoCommand, String>,
    ) -> Result<(), Error> {
        match self {
            Node::New => Err(Error::failed("stepped before init")),
            Node::Worker {
                version,
                boss,
                served,
                announce,
            } => {
                if std::mem::take(announce) {
                    cx.send(*boss, Msg::Upgraded { version: *version })?;
                }
                for event in events {
                    match event {
                        Event::Message {
                            from,
                            data: Msg::Work(n),
                        } => {
                            *served += 1;
                            let value = if *version == 1 { n + 1 } else { n * 2 };
                            // The boss's address stamped its PID: reply to it.
                            let to = from.ok_or_else(|| Error::failed("work from no process"))?;
                            cx.send(
                                to,
                                Msg::Result {
                                    version: *version,
                                    value,
                                },
                            )?;
                        }
                        Event::Message {
                            data: Msg::Upgrade(factory),
                            ..
                        } => {
                            // The rest of this step's events would be
                            // dropped: the boss sends nothing more until
                            // it hears `Upgraded`.
                            let state = Start::Worker {
                                boss: *boss,
                                served: *served,
                            };
                            cx.upgrade_from(factory, "resume", state);
                            out.set_status(Status::Idle); // not used
                            return Ok(());
                        }
                        Event::Message {
                            data: Msg::Stop, ..
                        } => {
                            out.set_status(Status::Done(format!(
                                "v{version} served {served} jobs"
                            )));
                            return Ok(());
                        }
                        Event::Cancel => return Err(Error::Cancelled),
                        _ => {}
                    }
                }
                out.set_status(Status::Idle);
                Ok(())
            }
            Node::Supervisor {
                phase,
                workers,
                log,
            } => {
                if *phase == Phase::Spawn {
                    for _ in 0..3 {
                        let start = Start::Worker {
                            boss: cx.pid(),
                            served: 0,
                        };
                        let to = cx.spawn_address(Node::New, "work", start)?;
                        to.send(Msg::Work(10))?; // from: the supervisor
                        workers.push(to);
                    }
                    let pids: Vec<Pid> = workers.iter().map(Address::pid).collect();
                    log.push(format!("spawned {pids:?}"));
                    *phase = Phase::FirstJobs { replies: 0 };
                }
                let [a, b, c] = &workers[..] else {
                    return Err(Error::failed("three workers"));
                };
                for event in events {
                    let Event::Message { from, data } = event else {
                        continue;
                    };
                    let from = from.expect("workers are processes");
                    match (*phase, data) {
                        (Phase::FirstJobs { replies }, Msg::Result { version, value }) => {
                            log.push(format!("{from}: v{version} gave {value}"));
                            *phase = Phase::FirstJobs {
                                replies: replies + 1,
                            };
                            if replies + 1 == 3 {
                                a.send(Msg::Upgrade("worker-v2"))?;
                                cx.terminate(b.pid())?;
                                log.push(format!("terminated {}", b.pid()));
                                // Gone: the message comes back.
                                assert!(b.send(Msg::Work(1)).unwrap_err().is_closed());
                                c.send(Msg::Upgrade("worker-v3"))?;
                                *phase = Phase::Upgrading;
                            }
                        }
                        (Phase::Upgrading, Msg::Upgraded { version }) => {
                            log.push(format!("{from}: upgraded to v{version}"));
                            // The same address: an upgrade keeps the process's PID
                            // and its queue.
                            a.send(Msg::Work(10))?;
                            *phase = Phase::SecondJob;
                        }
                        (Phase::SecondJob, Msg::Result { version, value }) => {
                            log.push(format!("{from}: v{version} gave {value}"));
                            a.send(Msg::Stop)?;
                            out.set_status(Status::Done(log.join("; ")));
                            return Ok(());
                        }
                        (_, other) => log.push(format!("{from}: unexpected {other:?}")),
                    }
                }
                out.set_status(Status::Idle);
                Ok(())
            }
        }
    }
}

fn main() {
    let (results, ended) = mpsc::channel();
    let scheduler = Scheduler::<Node>::builder()
        .workers(2)
        .factory("worker-v2", || {
            Ok(Node::Worker {
                version: 2,
                boss: Pid::new(0, 0),
                served: 0,
                announce: false,
            })
        })
        .on_complete(move |pid, result| {
            let _ = results.send((pid, result.cloned().map_err(|e| e.to_string())));
        })
        .build()
        .expect("workers");

    let boss = scheduler.allocate_pid();
    let join = scheduler
        .submit(boss, Node::New, "supervise", Start::Supervisor)
        .expect("submit");
    let log = join.join().expect("the supervisor finishes");
    println!("supervisor {boss}: {log}");

    // The supervisor and its three workers, in the order they ended.
    let mut outcomes: Vec<(Pid, Result<String, String>)> = ended.iter().take(4).collect();
    outcomes.sort_by_key(|(pid, _)| pid.number());
    for (pid, result) in &outcomes {
        println!("{pid}: {result:?}");
    }
    let results: Vec<_> = outcomes.into_iter().map(|(_, r)| r).collect();
    assert!(results[0].is_ok());
    assert!(
        log.contains("v1 gave 11") && log.contains("upgraded to v2") && log.contains("v2 gave 20")
    );
    assert_eq!(
        results[1],
        Ok("v2 served 2 jobs".to_string()),
        "A, upgraded"
    );
    assert_eq!(results[2], Err("process terminated".to_string()), "B");
    assert_eq!(
        results[3],
        Err("no process factory named `worker-v3`".to_string()),
        "C"
    );
    let report = scheduler
        .shutdown(std::time::Duration::from_secs(1))
        .expect("not on one of the scheduler's workers");
    assert_eq!(report.forced, 0);
}
