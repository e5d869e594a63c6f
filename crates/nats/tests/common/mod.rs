//! What the node tests share: a process type that can collect, echo and
//! finish, and a two-node cluster on a throwaway server.
#![allow(dead_code, unreachable_pub)]

use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use stepsched::{Context, Error, Events, Pid, Process, Scheduler, Status, StepOutput};
use stepsched_nats::{Link, NatsServer, Node, NodeConfig};

/// The hang guard of every wait in these tests.
pub const GUARD: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Msg {
    Ping(u64),
    Pong(u64),
    Data(u64),
    Stop,
}

/// What a collector saw: (sender, its own pid, message).
pub type Seen = (Option<Pid>, Pid, Msg);

pub enum Proc {
    /// Forwards every message to a channel; ends on `Stop`.
    Collector(Sender<Seen>),
    /// Answers `Ping(n)` with `Pong(n)` to the sender, through the link.
    Echo(Link<Proc>),
    /// Answers `Ping(n)` with `Pong(n)` to the sender with the step's own
    /// `Context::send`, which reaches other nodes through the route the
    /// node set on its scheduler.
    StepEcho,
    /// Ends at its first step.
    Once,
    /// Holds its worker in its first step until the gate opens; then takes
    /// its messages and stays idle (a process that lags).
    Gate(std::sync::Arc<Gate>),
    /// Forwards every message to a channel, as a collector, but takes a
    /// permit from its meter for each first (a process that keeps up only
    /// as fast as the test lets it); fails if none comes within [`GUARD`].
    Metered(std::sync::Arc<Meter>, Sender<Seen>),
}

/// What a [`Proc::Gate`] waits on.
#[derive(Default)]
pub struct Gate {
    entered: std::sync::Mutex<bool>,
    open: std::sync::Mutex<bool>,
    cv: std::sync::Condvar,
}

impl Gate {
    /// Waits (at most [`GUARD`]) until the gate's process is held in its
    /// first step.
    pub fn wait_entered(&self) {
        let guard = self.entered.lock().unwrap();
        let (guard, _) = self.cv.wait_timeout_while(guard, GUARD, |e| !*e).unwrap();
        assert!(*guard, "the gate's process never started a step");
    }

    /// Lets the process go on.
    pub fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }

    /// Whether [`open`](Self::open) was called.
    pub fn is_open(&self) -> bool {
        *self.open.lock().unwrap()
    }

    fn hold(&self) {
        *self.entered.lock().unwrap() = true;
        self.cv.notify_all();
        let guard = self.open.lock().unwrap();
        // The time limit only bounds a test that fails before it opens.
        drop(self.cv.wait_timeout_while(guard, GUARD, |o| !*o).unwrap());
    }
}

/// What a [`Proc::Metered`] takes its permits from: a counting semaphore
/// that the test fills.
#[derive(Default)]
pub struct Meter {
    permits: std::sync::Mutex<u64>,
    cv: std::sync::Condvar,
}

impl Meter {
    /// Lets the process take `n` more messages.
    pub fn grant(&self, n: u64) {
        *self.permits.lock().unwrap() += n;
        self.cv.notify_all();
    }

    /// Takes a permit, waiting (at most [`GUARD`]) for one; false if none
    /// came.
    fn take(&self) -> bool {
        let guard = self.permits.lock().unwrap();
        let (mut permits, _) = self
            .cv
            .wait_timeout_while(guard, GUARD, |p| *p == 0)
            .unwrap();
        let some = *permits > 0;
        if some {
            *permits -= 1;
        }
        some
    }
}

impl Process for Proc {
    type Input = ();
    type Message = Msg;
    type Response = ();
    type Command = String;
    type Output = ();

    fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        events: Events<'_, Msg, ()>,
        out: &mut StepOutput<String, ()>,
    ) -> Result<(), Error> {
        let me = cx.pid();
        if let Proc::Gate(gate) = self {
            gate.hold();
            out.set_status(Status::Idle);
            return Ok(());
        }
        for event in events {
            if event.is_cancel() {
                return Err(Error::Cancelled);
            }
            let from = event.sender();
            let Some(msg) = event.into_message() else {
                continue;
            };
            match self {
                Proc::Collector(tx) => {
                    let stop = msg == Msg::Stop;
                    let _ = tx.send((from, me, msg));
                    if stop {
                        out.set_status(Status::Done(()));
                        return Ok(());
                    }
                }
                Proc::Echo(link) => {
                    if let (Msg::Ping(n), Some(from)) = (msg, from) {
                        link.send_from(me, from, Msg::Pong(n))
                            .map_err(|e| Error::failed(e.to_string()))?;
                    }
                }
                Proc::StepEcho => {
                    if let (Msg::Ping(n), Some(from)) = (msg, from) {
                        cx.send(from, Msg::Pong(n))?;
                    }
                }
                Proc::Metered(meter, tx) => {
                    if !meter.take() {
                        return Err(Error::failed("no permit came for a message"));
                    }
                    let _ = tx.send((from, me, msg));
                }
                Proc::Once | Proc::Gate(_) => {}
            }
        }
        out.set_status(match self {
            Proc::Once => Status::Done(()),
            _ => Status::Idle,
        });
        Ok(())
    }
}

pub fn server() -> NatsServer {
    NatsServer::start().unwrap_or_else(|e| panic!("{e}"))
}

/// The tests' cluster key.
pub const KEY: &[u8] = b"stepsched-nats test cluster key!";

/// Node `node` on `server`, prefix `t`, with the tests' cluster key.
pub fn config(node: u32, server: &NatsServer) -> NodeConfig {
    NodeConfig::new(node, server.url())
        .prefix("t")
        .cluster_key(KEY)
}

/// A started and announced node.
pub fn node(config: NodeConfig) -> Node<Proc> {
    let node = Node::start(Scheduler::<Proc>::builder().workers(1), config).expect("node starts");
    node.announce().expect("node announced");
    node
}

/// Appends the tag of `frame` under `key`, as a node with that cluster
/// key does.
/// (The README's "Security" section and `src/frame.rs` give the scheme:
/// keyed BLAKE3 under a key derived from the material with
/// `blake3::derive_key`.)
pub fn seal(key: &[u8], mut frame: Vec<u8>) -> Vec<u8> {
    let key = blake3::derive_key("stepsched-nats 2026-11 frame tag", key);
    // The first 16 bytes of the keyed output.
    let tag = blake3::keyed_hash(&key, &frame);
    frame.extend_from_slice(&tag.as_bytes()[..16]);
    frame
}

/// A collector on `node`: its pid and what it sees.
pub fn collector(node: &Node<Proc>) -> (Pid, Receiver<Seen>) {
    let (tx, rx) = channel();
    let pid = node.allocate_pid();
    node.scheduler()
        .submit(pid, Proc::Collector(tx), "run", ())
        .expect("submit");
    (pid, rx)
}

/// Two nodes, 1 and 2, that know each other.
pub fn pair(server: &NatsServer) -> (Node<Proc>, Node<Proc>) {
    let a = node(config(1, server));
    let b = node(config(2, server));
    assert!(a.wait_for(2, GUARD), "node 1 never saw node 2");
    assert!(b.wait_for(1, GUARD), "node 2 never saw node 1");
    (a, b)
}
