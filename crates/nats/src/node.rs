//! [`Node`] and [`Link`]: a scheduler joined to a cluster through NATS.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use async_nats::{Client, ConnectOptions, Event, Subject, Subscriber};
use futures_util::StreamExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use stepsched::{
    Builder, Handle, Package, Pid, Process, Receiver, SchedProcess, Scheduler, SendError,
    ShutdownError, ShutdownReport,
};
use tokio::sync::{Notify, mpsc};

use crate::config::{ClusterKey, NodeConfig};
use crate::error::{ConfirmError, RemoteError, StartError};
use crate::frame::{
    self, Beat, Envelope, Header, KIND_ASK, KIND_CONFIRMED, KIND_CREDIT, KIND_MESSAGE, KIND_NOTICE,
    KIND_PROBE, KIND_REPLY, Notice, Status,
};
use crate::members::{Members, Membership};

/// A process whose messages can cross nodes: its `Message` type is
/// `Serialize + DeserializeOwned`. Every such [`SchedProcess`] implements
/// it; a message type without serde support is a compile error at
/// [`Node::start`]:
///
/// ```compile_fail
/// use stepsched::{Context, Error, Events, Process, Scheduler, Status, StepOutput};
/// use stepsched_nats::{Node, NodeConfig};
///
/// struct NotWire; // no Serialize, no Deserialize
/// struct Quiet;
/// impl Process for Quiet {
///     type Input = (); type Message = NotWire; type Response = (); type Command = String; type Output = ();
///     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
///     fn step(&mut self, _: &mut Context<'_, Self>, _: Events<'_, NotWire, ()>, out: &mut StepOutput<String, ()>) -> Result<(), Error> {
///         out.set_status(Status::Done(()));
///         Ok(())
///     }
/// }
/// // error: the trait bound `NotWire: Serialize` is not satisfied
/// let _ = Node::start(Scheduler::<Quiet>::builder(), NodeConfig::new(1, "nats://127.0.0.1:4222"));
/// ```
pub trait NodeProcess:
    SchedProcess + Process<Message: Serialize + DeserializeOwned + Send + 'static>
{
}

impl<P> NodeProcess for P where
    P: SchedProcess + Process<Message: Serialize + DeserializeOwned + Send + 'static>
{
}

/// Why a message did not reach its process, as reported back to the
/// sending node (see [`NodeConfig::on_dead_letter`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeadReason {
    /// The receiving node has no process with this PID.
    UnknownPid,
    /// The process had finished.
    Closed,
}

/// A message the receiving node could not deliver, reported back to the
/// node it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadLetter {
    /// The sending process, if the message had one.
    pub from: Option<Pid>,
    /// The PID it was sent to.
    pub to: Pid,
    /// Why it was not delivered.
    pub reason: DeadReason,
}

/// What a node has counted since it started. Every field only grows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeStats {
    /// Remote sends accepted into the outbound queue.
    pub sent: u64,
    /// Frames the writer handed to the NATS client.
    pub published: u64,
    /// Frames the NATS client refused (the connection closed for good).
    pub publish_failed: u64,
    /// Remote messages delivered to a local process.
    pub received: u64,
    /// Remote messages for a local PID that was unknown or closed (each
    /// answered with a notice or a reply to its sender's node).
    pub undeliverable: u64,
    /// Notices from other nodes: messages of ours they could not deliver.
    pub dead_letters: u64,
    /// Frames that did not decode: counted and dropped.
    pub bad_frames: u64,
    /// Frames addressed to a PID of another node: counted and dropped.
    pub misrouted: u64,
    /// Sequenced frames seen before from the same sender: dropped.
    pub duplicates: u64,
    /// Sequence numbers that never arrived (messages lost in transit, as
    /// far as this receiver can tell from the numbers that did arrive):
    /// those missing after the first frame this run of the node got from a
    /// sender's run. Frames lost before it (for example while this node
    /// restarted) are not counted.
    pub gaps: u64,
    /// Heartbeats from another node claiming this node's number.
    pub conflicts: u64,
    /// Heartbeats ignored as played back: no newer than the last one of
    /// the same run, from a run that said goodbye, or from another run of a
    /// node whose current run is still heard (see
    /// [`Membership`](crate::Membership)). A node restarted without a
    /// goodbye has its first heartbeats counted here too, until its old
    /// run's member timeout runs out (it counts as up meanwhile).
    pub stale_beats: u64,
    /// Frames (messages, notices, replies, heartbeats) without a valid
    /// cluster-key tag: dropped before they are decoded, never delivered
    /// and never counted as duplicates or gaps.
    pub unauthenticated: u64,
    /// Times the NATS client dropped received frames because the reader
    /// was behind by [`NodeConfig::inbox_capacity`] (each such drop shows
    /// as gaps, or as lost heartbeats).
    pub slow_consumer: u64,
    /// Remote sends that found the window to their node full
    /// ([`NodeConfig::window`]): each waited for credit, and those still
    /// waiting at the send timeout failed with [`RemoteError::Busy`].
    pub window_full: u64,
    /// Remote messages delivered to a local process whose queue then held
    /// more than [`NodeConfig::receive_limit`] events: their release to
    /// the sender was withheld until the process caught up.
    pub withheld: u64,
    /// Credit frames received (releases of our messages by other nodes).
    pub credits: u64,
}

#[derive(Debug, Default)]
struct Counters {
    sent: AtomicU64,
    published: AtomicU64,
    publish_failed: AtomicU64,
    received: AtomicU64,
    undeliverable: AtomicU64,
    dead_letters: AtomicU64,
    bad_frames: AtomicU64,
    misrouted: AtomicU64,
    duplicates: AtomicU64,
    gaps: AtomicU64,
    conflicts: AtomicU64,
    stale_beats: AtomicU64,
    unauthenticated: AtomicU64,
    slow_consumer: AtomicU64,
    window_full: AtomicU64,
    withheld: AtomicU64,
    credits: AtomicU64,
}

/// Adds `n` to a statistics counter. Relaxed: counters publish nothing.
fn bump(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// The flow-control state of messages to one destination node.
#[derive(Debug, Default)]
struct Window {
    /// Sequenced frames (messages and credit requests) queued for the
    /// writer, which numbers them 1, 2, … in queue order: the sequence
    /// number of the newest one.
    queued: AtomicU64,
    /// The highest sequence number the destination released.
    released: AtomicU64,
    /// When (ms since the node started, plus one; 0: never) a credit
    /// request was last queued.
    asked: AtomicU64,
}

impl Window {
    /// Messages sent and not yet released.
    fn in_flight(&self) -> u64 {
        // Relaxed (both): a snapshot; the releases come through the
        // reader's credit handling, which wakes waiters under a lock.
        let queued = self.queued.load(Ordering::Relaxed);
        queued.saturating_sub(self.released.load(Ordering::Relaxed))
    }
}

/// How long a sender waits for credit before it asks for it again.
const ASK_EVERY: Duration = Duration::from_millis(50);

/// How often the reader looks at the messages whose release it withholds.
const RELEASE_TICK: Duration = Duration::from_millis(5);

/// An encoded frame waiting for the writer.
struct Outbound {
    dest: u32,
    subject: Subject,
    frame: Vec<u8>,
}

/// What the node's handles share.
struct Shared {
    node: u32,
    incarnation: u64,
    /// The cluster key (`None`: frames are not tagged).
    key: Option<frame::TagKey>,
    /// The node has announced itself (`Node::announce`).
    announced: AtomicBool,
    /// The number of the last heartbeat sent (see `Beat::Hello`).
    beats: AtomicU64,
    config: NodeConfig,
    members: Members,
    /// The client is connected (set by the client's event callback).
    connected: Arc<AtomicBool>,
    /// Sends are accepted (cleared by `leave`).
    open: AtomicBool,
    out: mpsc::Sender<Outbound>,
    /// Frames accepted and not yet handed to the client.
    pending: AtomicUsize,
    /// Woken by the writer when `pending` reaches zero.
    idle: Notify,
    /// Senders waiting for room in the outbound queue.
    space: Mutex<()>,
    space_cv: Condvar,
    space_waiters: AtomicUsize,
    /// Flow control: one window per destination node (see
    /// [`NodeConfig::window`]).
    windows: RwLock<HashMap<u32, Arc<Window>>>,
    /// Senders waiting for credit, woken by the reader on each credit.
    credit: Mutex<()>,
    credit_cv: Condvar,
    credit_waiters: AtomicUsize,
    /// When the node started: the clock of `Window::asked`.
    started: Instant,
    /// Asks the heartbeat task for a heartbeat now.
    beat_now: Arc<Notify>,
    stats: Counters,
    /// Slow-consumer events (counted by the event callback).
    slow: Arc<AtomicU64>,
    client: Client,
    rt: tokio::runtime::Handle,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("node", &self.node)
            .field("connected", &self.connected.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// A [`Scheduler`] joined to a cluster of nodes through a NATS server.
///
/// The node owns its scheduler (built with [`Builder::node`] set to the
/// config's node number, so every PID it hands out names this node) and a
/// small tokio runtime of its own (one thread) that runs the NATS client:
/// a writer that publishes outbound frames in order, a reader of the
/// node's subject that delivers into the scheduler, the membership
/// listener and the heartbeat.
///
/// It dereferences to its [`Link`], whose [`send`](Link::send) routes a
/// message by the PID's node: to the local scheduler, or encoded onto the
/// NATS subject of the node it names. Processes that send to other nodes
/// hold a clone of the link ([`Node::link`]).
///
/// Dropping the node leaves the cluster (a goodbye, bounded by 1 s), stops
/// the runtime and shuts the scheduler down.
pub struct Node<P: NodeProcess> {
    link: Link<P>,
    runtime: Option<tokio::runtime::Runtime>,
    scheduler: Option<Scheduler<P>>,
}

/// A cloneable, thread-safe handle to a [`Node`]: sends by PID wherever
/// the process lives, and answers what the node knows of the cluster.
///
/// A step's own [`Context::send`](stepsched::Context::send) reaches other
/// nodes too (the node sets its link as the scheduler's remote route,
/// [`Handle::route_remote`](stepsched::Handle::route_remote)), with the
/// relay's two refusals; a link gives the detailed [`RemoteError`] and
/// [`send_confirmed`](Self::send_confirmed).
pub struct Link<P: NodeProcess> {
    shared: Arc<Shared>,
    handle: Handle<P>,
}

impl<P: NodeProcess> Clone for Link<P> {
    fn clone(&self) -> Self {
        Link {
            shared: self.shared.clone(),
            handle: self.handle.clone(),
        }
    }
}

impl<P: NodeProcess> fmt::Debug for Link<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.fmt(f)
    }
}

impl<P: NodeProcess> fmt::Debug for Node<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.link.fmt(f)
    }
}

impl<P: NodeProcess> std::ops::Deref for Node<P> {
    type Target = Link<P>;
    fn deref(&self) -> &Link<P> {
        &self.link
    }
}

/// A run number that differs between two starts of the same node.
fn incarnation() -> u64 {
    let mut h = std::hash::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// Whether a live node has number `node`: asked on its subject before we
/// subscribe there, so only another node (or a bystander) can hear it.
///
/// * The server answers "no responders" when nothing listens: free.
/// * A live node answers with a reply frame of its number (with a cluster
///   key, tagged: an answer anyone could forge does not count): taken.
/// * Something listens without answering within `ask_for`: a bystander
///   (a monitor subscribed to `prefix.>`), a node too busy to answer, or
///   one whose connection died without closing (the server keeps its
///   subscription until its ping timeout). Only a live node heartbeats,
///   so a heartbeat of that number within one member timeout (heard
///   since before the question) says taken, and silence says free.
#[allow(clippy::too_many_arguments)]
async fn probe_number(
    client: &async_nats::Client,
    key: Option<&frame::TagKey>,
    node: u32,
    data: String,
    members: String,
    probe: Vec<u8>,
    ask_for: Duration,
    member_timeout: Duration,
) -> Result<(), Taken> {
    let error = |e: &dyn std::fmt::Display| Taken::Error(e.to_string());
    let inbox = client.new_inbox();
    let mut answers = client
        .subscribe(inbox.clone())
        .await
        .map_err(|e| error(&e))?;
    let mut beats = client.subscribe(members).await.map_err(|e| error(&e))?;
    client
        .publish_with_reply(data, inbox, probe.into())
        .await
        .map_err(|e| error(&e))?;
    client.flush().await.map_err(|e| error(&e))?;
    // A genuine answer: a reply frame from a node of our number.
    let answered = |payload: &[u8]| {
        frame::open(key, payload)
            .and_then(Header::read)
            .is_some_and(|(h, _)| h.kind == KIND_REPLY && h.origin == node)
    };
    // A genuine heartbeat of a node of our number.
    let heard = |payload: &[u8]| {
        frame::open(key, payload)
            .and_then(frame::decode_body::<Beat>)
            .is_some_and(|b| matches!(b, Beat::Hello { node: n, .. } if n == node))
    };
    let asked = tokio::time::sleep(ask_for);
    tokio::pin!(asked);
    loop {
        tokio::select! {
            answer = answers.next() => match answer {
                Some(m) if m.status == Some(async_nats::StatusCode::NO_RESPONDERS) => return Ok(()),
                Some(m) if answered(&m.payload) => return Err(Taken::Yes),
                // Not an answer of a node: ignored.
                Some(_) => {}
                None => return Err(Taken::Error("the probe's inbox closed".into())),
            },
            beat = beats.next() => match beat {
                Some(m) if heard(&m.payload) => return Err(Taken::Yes),
                Some(_) => {}
                None => return Err(Taken::Error("the members subscription closed".into())),
            },
            () = &mut asked => break,
        }
    }
    // Something heard the question and kept quiet: listen for a heartbeat.
    let quiet = tokio::time::sleep(member_timeout);
    tokio::pin!(quiet);
    loop {
        tokio::select! {
            beat = beats.next() => match beat {
                Some(m) if heard(&m.payload) => return Err(Taken::Yes),
                Some(_) => {}
                None => return Err(Taken::Error("the members subscription closed".into())),
            },
            () = &mut quiet => return Ok(()),
        }
    }
}

impl<P: NodeProcess> Node<P> {
    /// Builds the scheduler from `builder` (with its node number set to
    /// `config`'s), connects to the NATS server (with the config's
    /// credentials and TLS), makes sure no live node has this number, and
    /// subscribes to the node's subject and the members subject.
    ///
    /// The node is **not announced** yet: other nodes do not know it, so
    /// nothing is sent to it. Submit the processes other nodes will send
    /// to, then call [`Node::announce`]; from then on peers learn of it
    /// (and [`Link::wait_for`] on them returns). A node that never
    /// announces can still send to the nodes it hears of.
    ///
    /// # Errors
    ///
    /// [`StartError::Config`] if no cluster key was chosen (see
    /// [`NodeConfig::cluster_key`] and
    /// [`NodeConfig::insecure_no_cluster_key`]), the key is shorter than
    /// 16 bytes, or the credentials file cannot be read;
    /// [`StartError::Connect`] if the server does not accept a connection
    /// within the connect timeout, or refuses the credentials ("authorization
    /// violation") or the TLS handshake; [`StartError::NodeTaken`] if a
    /// live node already has this node's number (see there);
    /// [`StartError::Subscribe`] if the subscriptions do not go through in
    /// time; [`StartError::Io`] if a thread cannot be spawned. Never hangs
    /// past about twice the connect timeout and one member timeout.
    ///
    /// Must not be called from inside a tokio runtime (it blocks).
    pub fn start(builder: Builder<P>, config: NodeConfig) -> Result<Node<P>, StartError> {
        let node = config.node;
        let key = match &config.key {
            ClusterKey::Unset => {
                return Err(StartError::Config(
                    "no cluster key: set NodeConfig::cluster_key (the same on every node), \
                     or NodeConfig::insecure_no_cluster_key on a trusted server"
                        .into(),
                ));
            }
            ClusterKey::Key(_, len) if *len < 16 => {
                return Err(StartError::Config(format!(
                    "the cluster key has {len} bytes; at least 16 are needed"
                )));
            }
            ClusterKey::Key(key, _) => Some(*key),
            ClusterKey::Insecure => None,
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(format!("stepsched-nats-{node}"))
            .enable_all()
            .build()?;
        let connected = Arc::new(AtomicBool::new(false));
        let beat_now = Arc::new(Notify::new());
        let slow = Arc::new(AtomicU64::new(0));
        let max_delay = config.reconnect_delay;
        let options = {
            let connected = connected.clone();
            let beat_now = beat_now.clone();
            let slow = slow.clone();
            ConnectOptions::new()
                .name(format!("stepsched-node-{node}"))
                .no_echo()
                .connection_timeout(config.connect_timeout)
                .max_reconnects(None)
                .reconnect_delay_callback(move |attempts| {
                    let attempts = u32::try_from(attempts).unwrap_or(u32::MAX).max(1);
                    Duration::from_millis(100)
                        .saturating_mul(attempts)
                        .min(max_delay)
                })
                .subscription_capacity(config.inbox_capacity)
                .event_callback(move |event| {
                    let connected = connected.clone();
                    let beat_now = beat_now.clone();
                    let slow = slow.clone();
                    async move {
                        match event {
                            Event::Connected => {
                                // Release: pairs with the Acquire load in
                                // `send_remote`; nothing else rides on it.
                                connected.store(true, Ordering::Release);
                                // Tell the others at once that we are back.
                                beat_now.notify_one();
                            }
                            Event::Disconnected | Event::Closed => {
                                connected.store(false, Ordering::Release);
                            }
                            Event::SlowConsumer(_) => bump(&slow, 1),
                            _ => {}
                        }
                    }
                })
        };
        let options = runtime.block_on(with_auth(options, &config))?;
        let url = config.url.clone();
        let connect_timeout = config.connect_timeout;
        let client = runtime
            .block_on(async {
                tokio::time::timeout(
                    connect_timeout + Duration::from_millis(500),
                    options.connect(url),
                )
                .await
            })
            .map_err(|_| StartError::Connect(format!("timed out after {connect_timeout:?}")))?
            .map_err(|e| StartError::Connect(connect_error(&e, &config)))?;
        // The Connected event may come before or after this; we are
        // connected now.
        connected.store(true, Ordering::Release);

        let incarnation = incarnation();
        let subscribe = {
            let client = client.clone();
            let data = config.node_subject(node);
            let members = config.members_subject();
            let mut probe = Vec::with_capacity(frame::HEADER + frame::TAG);
            Header {
                kind: KIND_PROBE,
                origin: node,
                incarnation,
                seq: 0,
            }
            .write(&mut probe);
            frame::seal(key.as_ref(), &mut probe);
            let member_timeout = config.member_timeout;
            async move {
                probe_number(
                    &client,
                    key.as_ref(),
                    node,
                    data.clone(),
                    members.clone(),
                    probe,
                    connect_timeout / 2,
                    member_timeout,
                )
                .await?;
                // One queue group: should two nodes with one number still
                // slip in together (both probing at once), each message
                // goes to one of them, never to both.
                let data = client
                    .queue_subscribe(data, "stepsched".into())
                    .await
                    .map_err(|e| Taken::Error(e.to_string()))?;
                let members = client
                    .subscribe(members)
                    .await
                    .map_err(|e| Taken::Error(e.to_string()))?;
                client
                    .flush()
                    .await
                    .map_err(|e| Taken::Error(e.to_string()))?;
                Ok((data, members))
            }
        };
        let (data_sub, members_sub) = runtime
            .block_on(async {
                tokio::time::timeout(connect_timeout + config.member_timeout, subscribe).await
            })
            .map_err(|_| StartError::Subscribe("timed out".into()))?
            .map_err(|e| match e {
                Taken::Yes => StartError::NodeTaken(node),
                Taken::Error(e) => StartError::Subscribe(e),
            })?;

        let scheduler = builder.node(node).build()?;
        let (out, out_rx) = mpsc::channel(config.queue_capacity);
        let shared = Arc::new(Shared {
            node,
            incarnation,
            key,
            announced: AtomicBool::new(false),
            beats: AtomicU64::new(0),
            members: Members::new(config.member_timeout),
            config,
            connected,
            open: AtomicBool::new(true),
            out,
            pending: AtomicUsize::new(0),
            idle: Notify::new(),
            space: Mutex::new(()),
            space_cv: Condvar::new(),
            space_waiters: AtomicUsize::new(0),
            windows: RwLock::new(HashMap::new()),
            credit: Mutex::new(()),
            credit_cv: Condvar::new(),
            credit_waiters: AtomicUsize::new(0),
            started: Instant::now(),
            beat_now,
            stats: Counters::default(),
            slow,
            client,
            rt: runtime.handle().clone(),
        });
        let handle = scheduler.handle();
        runtime.spawn(write_frames(shared.clone(), out_rx));
        runtime.spawn(read_frames(shared.clone(), handle.clone(), data_sub));
        runtime.spawn(read_beats(shared.clone(), members_sub));
        let link = Link { shared, handle };
        // A step's `Context::send` (and `Scheduler::send`) to a PID of
        // another node goes through the link too; the scheduler drops the
        // route at its shutdown.
        scheduler.handle().route_remote(Arc::new(link.clone()));
        Ok(Node {
            link,
            runtime: Some(runtime),
            scheduler: Some(scheduler),
        })
    }

    /// Announces the node to the cluster: publishes its first heartbeat
    /// (and waits, at most the connect timeout, for the server to have
    /// it), then keeps sending one every heartbeat interval. Call it once
    /// the processes peers will send to are submitted; a second call does
    /// nothing.
    ///
    /// # Errors
    ///
    /// [`StartError::Subscribe`] if the announcement did not reach the
    /// server in time (heartbeats go on, so peers learn of the node once
    /// the server is back).
    pub fn announce(&self) -> Result<(), StartError> {
        let shared = &self.link.shared;
        if shared.announced.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let runtime = self.runtime.as_ref().expect("present until drop");
        runtime.spawn(heartbeat(shared.clone()));
        // The first heartbeat goes out at once; make sure it reached the
        // server before we say we are announced.
        let hello = hello(shared);
        let s = shared.clone();
        let timeout = shared.config.connect_timeout;
        shared
            .run(timeout, async move {
                let subject = s.config.members_subject();
                s.client
                    .publish(subject, hello.into())
                    .await
                    .map_err(|e| e.to_string())?;
                s.client.flush().await.map_err(|e| e.to_string())
            })
            .ok_or_else(|| StartError::Subscribe("announcement timed out".into()))?
            .map_err(StartError::Subscribe)
    }
    /// A clone of the node's [`Link`], to hand to processes and threads.
    pub fn link(&self) -> Link<P> {
        self.link.clone()
    }

    /// The node's scheduler (submit processes here).
    pub fn scheduler(&self) -> &Scheduler<P> {
        self.scheduler.as_ref().expect("present until drop")
    }

    /// Leaves the cluster: refuses new remote sends, publishes what is
    /// queued, says goodbye (peers answer [`RemoteError::Left`] from then
    /// on), all bounded by `timeout`. Incoming messages are still
    /// delivered until the node is dropped or shut down.
    ///
    /// # Errors
    ///
    /// [`ConfirmError::Timeout`] if the queue or the goodbye did not reach
    /// the server in time (for example, the server is down); the node has
    /// left either way.
    pub fn leave(&self, timeout: Duration) -> Result<(), ConfirmError> {
        let shared = &self.link.shared;
        // Release: a sender that sees `open == false` is refused; ordering
        // with the queue is provided by the channel.
        if !shared.open.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let bye = beat(
            shared,
            Beat::Bye {
                node: shared.node,
                incarnation: shared.incarnation,
            },
        );
        let s = shared.clone();
        shared
            .run(timeout, async move {
                wait_idle(&s).await;
                let subject = s.config.members_subject();
                s.client
                    .publish(subject, bye.into())
                    .await
                    .map_err(|e| e.to_string())?;
                s.client.flush().await.map_err(|e| e.to_string())
            })
            .ok_or(ConfirmError::Timeout)?
            .map_err(ConfirmError::Request)
    }

    /// Leaves the cluster (at most 1 s), stops the NATS client, then shuts
    /// the scheduler down with `deadline` and waits for it (see
    /// [`Scheduler::shutdown`]).
    ///
    /// # Errors
    ///
    /// [`ShutdownError::OnWorker`] if called on one of the scheduler's own
    /// workers, where the blocking shutdown would wait for itself: the
    /// network is stopped, and the scheduler, dropped there, only starts
    /// its shutdown (see [`Handle::begin_shutdown`]).
    pub fn shutdown(mut self, deadline: Duration) -> Result<ShutdownReport, ShutdownError> {
        self.stop_network();
        let scheduler = self.scheduler.take().expect("present until drop");
        scheduler.shutdown(deadline)
    }

    fn stop_network(&mut self) {
        let _ = self.leave(Duration::from_secs(1));
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
        self.link.shared.connected.store(false, Ordering::Release);
    }
}

impl<P: NodeProcess> Drop for Node<P> {
    fn drop(&mut self) {
        self.stop_network();
        // The scheduler shuts down in its own drop.
    }
}

impl<P: NodeProcess> Link<P> {
    /// This node's number.
    pub fn node_id(&self) -> u32 {
        self.shared.node
    }

    /// The local scheduler's handle.
    pub fn handle(&self) -> &Handle<P> {
        &self.handle
    }

    /// A fresh PID on this node (see [`Handle::allocate_pid`]).
    pub fn allocate_pid(&self) -> Pid {
        self.handle.allocate_pid()
    }

    /// Sends `message` to `to`, with no sender: see [`deliver`](Self::deliver).
    ///
    /// # Errors
    ///
    /// As for [`deliver`](Self::deliver).
    pub fn send(&self, to: Pid, message: P::Message) -> Result<(), RemoteError<P::Message>> {
        self.deliver(Package::new(to, "", message))
    }

    /// Sends `message` to `to` with `from` as its sender (what the
    /// receiving step's [`Event::sender`](stepsched::Event::sender)
    /// returns, on whichever node): see [`deliver`](Self::deliver).
    ///
    /// # Errors
    ///
    /// As for [`deliver`](Self::deliver).
    pub fn send_from(
        &self,
        from: Pid,
        to: Pid,
        message: P::Message,
    ) -> Result<(), RemoteError<P::Message>> {
        self.deliver(Package::new(to, "", message).with_sender(from))
    }

    /// [`deliver`](Self::deliver) that waits up to `timeout` (instead of
    /// the configured send timeout) for the flow-control window to the
    /// receiving node and for room in the outbound queue: zero never
    /// waits, a long timeout waits for a lagging receiver to catch up. It
    /// blocks the calling thread; from a step, prefer a short timeout and
    /// retry later on [`RemoteError::Busy`].
    ///
    /// # Errors
    ///
    /// As for [`deliver`](Self::deliver).
    pub fn deliver_within(
        &self,
        package: Package<P::Message>,
        timeout: Duration,
    ) -> Result<(), RemoteError<P::Message>> {
        if package.to.node() == self.shared.node {
            return Receiver::send(&self.handle, package).map_err(RemoteError::Local);
        }
        self.shared.send_remote(package, Instant::now() + timeout)
    }

    /// Routes `package` by the node of `package.to`.
    ///
    /// On this node it goes to the scheduler, as
    /// [`Handle`]'s [`Receiver::send`] (the sender kept). On another node
    /// it is encoded (postcard) and queued for the node's subject; the
    /// sender, recipient and topic travel with it. Frames to one node
    /// leave in the order they were queued, and NATS keeps that order from
    /// one connection to another, so messages from one thread to one
    /// process arrive in order.
    ///
    /// Delivery is at most once: `Ok` for a remote PID means queued here.
    /// If the receiving node has no such process, it sends a notice back
    /// (counted in [`NodeStats::dead_letters`], passed to
    /// [`NodeConfig::on_dead_letter`]).
    ///
    /// Never blocks longer than the send timeout, and only when the
    /// flow-control window to the receiving node is full (see
    /// [`NodeConfig::window`]) or the outbound queue is. To wait another
    /// time, see [`deliver_within`](Self::deliver_within).
    ///
    /// # Errors
    ///
    /// [`RemoteError::Local`] for a local refusal; for a remote PID
    /// [`UnknownNode`](RemoteError::UnknownNode),
    /// [`Left`](RemoteError::Left),
    /// [`Unreachable`](RemoteError::Unreachable) (no heartbeat within the
    /// member timeout), [`Disconnected`](RemoteError::Disconnected) (this
    /// node has no server connection), [`Busy`](RemoteError::Busy),
    /// [`Encode`](RemoteError::Encode). The package is handed back.
    pub fn deliver(&self, package: Package<P::Message>) -> Result<(), RemoteError<P::Message>> {
        if package.to.node() == self.shared.node {
            return Receiver::send(&self.handle, package).map_err(RemoteError::Local);
        }
        self.shared
            .send_remote(package, Instant::now() + self.shared.config.send_timeout)
    }

    /// Sends `message` to `to` and waits (at most `timeout`) for the
    /// receiving node to say whether it was queued for the process: a NATS
    /// request on the node's subject, answered once the receiving node has
    /// handed it to its scheduler. A local PID is answered by the local
    /// scheduler at once.
    ///
    /// It is ordered after every send this node queued before it (it
    /// waits for the outbound queue to drain, then goes on the same
    /// connection): when it returns `Ok`, every earlier message from this
    /// node to that process that was not lost is in the process's queue
    /// ahead of it, as an end-of-stream marker needs.
    ///
    /// Unlike [`send`](Self::send) it does not consult the membership
    /// table: a node that is not subscribed is found out by NATS ("no
    /// responders"). It blocks the calling thread; do not call it from a
    /// step on a busy scheduler, nor from inside a tokio runtime.
    ///
    /// # Errors
    ///
    /// See [`ConfirmError`]; in every case but `Timeout` and `Request`,
    /// the message was not delivered.
    pub fn send_confirmed(
        &self,
        from: Option<Pid>,
        to: Pid,
        message: P::Message,
        timeout: Duration,
    ) -> Result<(), ConfirmError> {
        let mut package = Package::new(to, "", message);
        package.from = from;
        if to.node() == self.shared.node {
            return match Receiver::send(&self.handle, package) {
                Ok(()) => Ok(()),
                Err(SendError::UnknownPid(_)) => Err(ConfirmError::UnknownPid),
                Err(SendError::Closed(_)) => Err(ConfirmError::Closed),
            };
        }
        self.shared.send_confirmed(package, timeout)
    }

    /// Waits until everything queued so far has been handed to the NATS
    /// client and the server has acknowledged it (a PING/PONG), at most
    /// `timeout`.
    ///
    /// # Errors
    ///
    /// [`ConfirmError::Timeout`] if not done in time (the server may be
    /// down), [`ConfirmError::Request`] if the client failed.
    pub fn flush(&self, timeout: Duration) -> Result<(), ConfirmError> {
        let s = self.shared.clone();
        self.shared
            .run(timeout, async move {
                wait_idle(&s).await;
                s.client.flush().await.map_err(|e| e.to_string())
            })
            .ok_or(ConfirmError::Timeout)?
            .map_err(ConfirmError::Request)
    }

    /// What this node knows of node `node` right now.
    pub fn membership(&self, node: u32) -> Membership {
        if node == self.shared.node {
            return Membership::Up;
        }
        self.shared.members.state(node)
    }

    /// Every other node this node has heard of, with its state, in node
    /// order.
    pub fn members(&self) -> Vec<(u32, Membership)> {
        self.shared.members.snapshot()
    }

    /// Waits until node `node` is [`Up`](Membership::Up) here, at most
    /// `timeout`; returns whether it is.
    pub fn wait_for(&self, node: u32, timeout: Duration) -> bool {
        node == self.shared.node
            || self
                .shared
                .members
                .wait_until(node, timeout, |m| m == Membership::Up)
                == Membership::Up
    }

    /// Waits until node `node` is no longer up here (left, or unreachable
    /// after the member timeout), at most `timeout`; returns the state
    /// then.
    pub fn wait_until_down(&self, node: u32, timeout: Duration) -> Membership {
        self.shared
            .members
            .wait_until(node, timeout, |m| m != Membership::Up)
    }

    /// Whether this node's NATS connection is up.
    pub fn is_connected(&self) -> bool {
        self.shared.connected.load(Ordering::Acquire)
    }

    /// A snapshot of the node's counters.
    pub fn stats(&self) -> NodeStats {
        let c = &self.shared.stats;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        NodeStats {
            sent: get(&c.sent),
            published: get(&c.published),
            publish_failed: get(&c.publish_failed),
            received: get(&c.received),
            undeliverable: get(&c.undeliverable),
            dead_letters: get(&c.dead_letters),
            bad_frames: get(&c.bad_frames),
            misrouted: get(&c.misrouted),
            duplicates: get(&c.duplicates),
            gaps: get(&c.gaps),
            conflicts: get(&c.conflicts),
            stale_beats: get(&c.stale_beats),
            unauthenticated: get(&c.unauthenticated),
            slow_consumer: get(&c.slow_consumer) + get(&self.shared.slow),
            window_full: get(&c.window_full),
            withheld: get(&c.withheld),
            credits: get(&c.credits),
        }
    }

    /// The config the node was started with.
    pub fn config(&self) -> &NodeConfig {
        &self.shared.config
    }
}

impl<P: NodeProcess> Receiver<P::Message> for Link<P> {
    /// [`Link::deliver`], its refusal as a relay [`SendError`]
    /// ([`RemoteError::into_send_error`]).
    fn send(&self, package: Package<P::Message>) -> Result<(), SendError<P::Message>> {
        self.deliver(package).map_err(RemoteError::into_send_error)
    }
}

impl Shared {
    /// Sends a message frame, waiting until `deadline` at most for credit
    /// and room in the outbound queue.
    fn send_remote<M: Serialize>(
        &self,
        package: Package<M>,
        deadline: Instant,
    ) -> Result<(), RemoteError<M>> {
        // Acquire: pairs with the Release stores in `leave` and the event
        // callback; a refused send needs nothing more.
        if !self.open.load(Ordering::Acquire) || !self.connected.load(Ordering::Acquire) {
            return Err(RemoteError::Disconnected(package));
        }
        let dest = package.to.node();
        let subject = match self.members.route(dest, Instant::now()) {
            Ok(subject) => subject,
            Err(Membership::Left) => return Err(RemoteError::Left(package)),
            Err(Membership::Unreachable) => return Err(RemoteError::Unreachable(package)),
            Err(_) => return Err(RemoteError::UnknownNode(package)),
        };
        let frame = match frame::encode_message(
            KIND_MESSAGE,
            self.node,
            self.incarnation,
            package.from,
            package.to,
            &package.topic,
            &package.payload,
        ) {
            Ok(frame) => frame,
            Err(e) => return Err(RemoteError::Encode(package, e.to_string())),
        };
        let window = self.window(dest);
        if !self.wait_for_credit(&window, dest, &subject, deadline) {
            return Err(RemoteError::Busy(package));
        }
        match self.enqueue(
            Outbound {
                dest,
                subject,
                frame,
            },
            deadline,
        ) {
            Ok(()) => {
                // Relaxed: a count; see `Window::in_flight`.
                window.queued.fetch_add(1, Ordering::Relaxed);
                bump(&self.stats.sent, 1);
                Ok(())
            }
            Err(Enqueue::Full) => Err(RemoteError::Busy(package)),
            Err(Enqueue::Closed) => Err(RemoteError::Disconnected(package)),
        }
    }

    /// The window of messages to node `dest`.
    fn window(&self, dest: u32) -> Arc<Window> {
        if let Some(w) = self
            .windows
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&dest)
        {
            return w.clone();
        }
        self.windows
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(dest)
            .or_default()
            .clone()
    }

    /// Waits, at most until `deadline`, until the window to `dest` has
    /// room; false if it stayed full. While it waits, it asks `dest` for
    /// credit every [`ASK_EVERY`] (a lost credit, or lost messages, would
    /// otherwise keep the window shut).
    fn wait_for_credit(
        &self,
        window: &Window,
        dest: u32,
        subject: &Subject,
        deadline: Instant,
    ) -> bool {
        let limit = self.config.window;
        if window.in_flight() < limit {
            return true;
        }
        bump(&self.stats.window_full, 1);
        self.credit_waiters.fetch_add(1, Ordering::SeqCst);
        let open = loop {
            self.ask_for_credit(window, dest, subject);
            let guard = self.credit.lock().unwrap_or_else(|e| e.into_inner());
            if window.in_flight() < limit {
                break true;
            }
            let now = Instant::now();
            if now >= deadline {
                break false;
            }
            // The reader notifies under the lock after each credit; the
            // cap bounds a wake-up that raced past and paces the asks.
            let wait = (deadline - now).min(Duration::from_millis(5));
            drop(
                self.credit_cv
                    .wait_timeout(guard, wait)
                    .unwrap_or_else(|e| e.into_inner()),
            );
            if window.in_flight() < limit {
                break true;
            }
        };
        self.credit_waiters.fetch_sub(1, Ordering::SeqCst);
        open
    }

    /// Queues a credit request for `dest` if none was queued in the last
    /// [`ASK_EVERY`]; never waits for room.
    fn ask_for_credit(&self, window: &Window, dest: u32, subject: &Subject) {
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX) + 1;
        // Relaxed: a pacing hint; two askers at once send two requests.
        let asked = window.asked.load(Ordering::Relaxed);
        let every = u64::try_from(ASK_EVERY.as_millis()).unwrap_or(u64::MAX);
        if asked != 0 && now.saturating_sub(asked) < every {
            return;
        }
        window.asked.store(now, Ordering::Relaxed);
        self.pending.fetch_add(1, Ordering::Relaxed);
        let ask = Outbound {
            dest,
            subject: subject.clone(),
            frame: frame::encode_ask(self.node, self.incarnation),
        };
        if self.out.try_send(ask).is_ok() {
            // Relaxed: as for a message (see `send_remote`).
            window.queued.fetch_add(1, Ordering::Relaxed);
        } else {
            self.pending.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Takes a credit from node `from` for our run: releases our messages
    /// to it up to `released`, and wakes the senders waiting for credit.
    fn on_credit(&self, from: u32, released: u64) {
        let window = self.window(from);
        // Relaxed: read by `in_flight`; the waiters are woken under the
        // lock below, after this store.
        window.released.fetch_max(released, Ordering::Relaxed);
        bump(&self.stats.credits, 1);
        if self.credit_waiters.load(Ordering::SeqCst) > 0 {
            let _guard = self.credit.lock().unwrap_or_else(|e| e.into_inner());
            self.credit_cv.notify_all();
        }
    }

    /// Queues a frame for the writer, waiting until `deadline` at most for
    /// room.
    fn enqueue(&self, outbound: Outbound, deadline: Instant) -> Result<(), Enqueue> {
        // Relaxed: `pending` is read by the writer after it received the
        // frame through the channel, which orders it.
        self.pending.fetch_add(1, Ordering::Relaxed);
        let refused = |e| {
            self.pending.fetch_sub(1, Ordering::Relaxed);
            Err(e)
        };
        let mut outbound = match self.out.try_send(outbound) {
            Ok(()) => return Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => return refused(Enqueue::Closed),
            Err(mpsc::error::TrySendError::Full(o)) => o,
        };

        self.space_waiters.fetch_add(1, Ordering::SeqCst);
        let mut guard = self.space.lock().unwrap_or_else(|e| e.into_inner());
        let result = loop {
            outbound = match self.out.try_send(outbound) {
                Ok(()) => break Ok(()),
                Err(mpsc::error::TrySendError::Closed(_)) => break Err(Enqueue::Closed),
                Err(mpsc::error::TrySendError::Full(o)) => o,
            };
            let now = Instant::now();
            if now >= deadline {
                break Err(Enqueue::Full);
            }
            // The writer notifies under the lock after taking a batch; the
            // cap only bounds the cost of a wake-up that raced past.
            let wait = (deadline - now).min(Duration::from_millis(5));
            guard = self
                .space_cv
                .wait_timeout(guard, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        drop(guard);
        self.space_waiters.fetch_sub(1, Ordering::SeqCst);
        match result {
            Ok(()) => Ok(()),
            Err(e) => refused(e),
        }
    }

    fn send_confirmed<M: Serialize>(
        self: &Arc<Self>,
        package: Package<M>,
        timeout: Duration,
    ) -> Result<(), ConfirmError> {
        if !self.open.load(Ordering::Acquire) || !self.connected.load(Ordering::Acquire) {
            return Err(ConfirmError::Refused("this node is disconnected".into()));
        }
        let mut frame = frame::encode_message(
            KIND_CONFIRMED,
            self.node,
            self.incarnation,
            package.from,
            package.to,
            &package.topic,
            &package.payload,
        )
        .map_err(|e| ConfirmError::Refused(e.to_string()))?;
        frame::seal(self.key.as_ref(), &mut frame);
        let subject = self.config.node_subject(package.to.node());
        let s = self.clone();
        let answer = self
            .run(timeout, async move {
                // Everything queued before this send goes first: once the
                // writer has handed it all to the client, the request
                // follows it on the same connection, in order.
                wait_idle(&s).await;
                s.client.request(subject, frame.into()).await
            })
            .ok_or(ConfirmError::Timeout)?;
        match answer {
            Ok(reply) => {
                match frame::open(self.key.as_ref(), &reply.payload).and_then(Header::read) {
                    Some((h, [status])) if h.kind == KIND_REPLY => match Status::from_byte(*status)
                    {
                        Some(Status::Delivered) => Ok(()),
                        Some(Status::UnknownPid) => Err(ConfirmError::UnknownPid),
                        Some(Status::Closed) => Err(ConfirmError::Closed),
                        Some(Status::BadFrame) | None => Err(ConfirmError::BadFrame),
                    },
                    _ => {
                        bump(&self.stats.bad_frames, 1);
                        Err(ConfirmError::BadFrame)
                    }
                }
            }
            Err(e) => Err(match e.kind() {
                async_nats::RequestErrorKind::NoResponders => ConfirmError::NoResponders,
                async_nats::RequestErrorKind::TimedOut => ConfirmError::Timeout,
                async_nats::RequestErrorKind::Other => ConfirmError::Request(e.to_string()),
            }),
        }
    }

    /// Runs `future` on the node's runtime and waits for it from this
    /// (non-async) thread, at most `timeout`; `None` on timeout or if the
    /// runtime is gone.
    fn run<T: Send + 'static>(
        &self,
        timeout: Duration,
        future: impl Future<Output = T> + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.rt.spawn(async move {
            let _ = tx.send(tokio::time::timeout(timeout, future).await.ok());
        });
        // The task's own timeout ends it; this one covers a runtime that
        // is shutting down and never runs it.
        rx.recv_timeout(timeout + Duration::from_millis(500))
            .ok()
            .flatten()
    }

    /// Publishes a notice or reply frame, ignoring a failure (the peer
    /// counts what it does not get as lost or times out).
    async fn publish(&self, subject: Subject, frame: Vec<u8>) {
        if self.client.publish(subject, frame.into()).await.is_err() {
            bump(&self.stats.publish_failed, 1);
        }
    }
}

enum Enqueue {
    Full,
    Closed,
}

/// A connection error, said so a user knows what to fix.
fn connect_error(e: &async_nats::ConnectError, config: &NodeConfig) -> String {
    use async_nats::ConnectErrorKind as Kind;
    match e.kind() {
        Kind::AuthorizationViolation | Kind::Authentication => format!(
            "the server refused this node's credentials ({e}); see NodeConfig::user_password, \
             token, nkey, credentials_file"
        ),
        Kind::Tls | Kind::Io if e.to_string().to_lowercase().contains("certificate") => format!(
            "TLS failed ({e}); is the server's certificate signed by a CA in \
             NodeConfig::tls_root_certificates, and does it name the host in the URL? \
             Does the server want a client certificate (NodeConfig::tls_client_certificate)?"
        ),
        Kind::Tls => format!("TLS failed ({e})"),
        Kind::Io if config.auth.require_tls => format!(
            "TLS is required (NodeConfig::require_tls) but the handshake failed: \
             does the server have TLS enabled? ({e})"
        ),
        _ => e.to_string(),
    }
}

/// Why the start-up probe failed.
enum Taken {
    Yes,
    Error(String),
}

/// Adds the config's credentials and TLS settings to `options`; a
/// `nats://user:password@host` (or `nats://token@host`) URL's credentials
/// count when no explicit ones are set.
async fn with_auth(
    mut options: ConnectOptions,
    config: &NodeConfig,
) -> Result<ConnectOptions, StartError> {
    let auth = &config.auth;
    let explicit = auth.user_password.is_some()
        || auth.token.is_some()
        || auth.nkey_seed.is_some()
        || auth.credentials_file.is_some();
    if !explicit
        && let Ok(addr) = config.url.parse::<async_nats::ServerAddr>()
        && let Some(user) = addr.username()
    {
        options = match addr.password() {
            Some(password) => options.user_and_password(user.into(), password.into()),
            None => options.token(user.into()),
        };
    }
    if let Some((user, password)) = &auth.user_password {
        options = options.user_and_password(user.clone(), password.clone());
    }
    if let Some(token) = &auth.token {
        options = options.token(token.clone());
    }
    if let Some(seed) = &auth.nkey_seed {
        options = options.nkey(seed.clone());
    }
    if let Some(path) = &auth.credentials_file {
        options = options
            .credentials_file(path)
            .await
            .map_err(|e| StartError::Config(format!("credentials file {}: {e}", path.display())))?;
    }
    for pem in &auth.root_certificates {
        options = options.add_root_certificates(pem.clone());
    }
    if let Some((cert, key)) = &auth.client_certificate {
        options = options.add_client_certificate(cert.clone(), key.clone());
    }
    if auth.require_tls {
        options = options.require_tls(true);
    }
    Ok(options)
}

/// Encodes a membership frame.
fn beat(shared: &Shared, beat: Beat) -> Vec<u8> {
    let mut frame = postcard::to_stdvec(&beat).expect("a beat always encodes");
    frame::seal(shared.key.as_ref(), &mut frame);
    frame
}

/// Waits until the writer has handed every queued frame to the client.
async fn wait_idle(shared: &Shared) {
    loop {
        let idle = shared.idle.notified();
        tokio::pin!(idle);
        idle.as_mut().enable();
        // Relaxed: a late read only costs one more round of the loop; the
        // writer notifies after every decrement to zero.
        if shared.pending.load(Ordering::Relaxed) == 0 {
            return;
        }
        idle.await;
    }
}

/// The writer: numbers each frame per destination and publishes it, in
/// queue order.
async fn write_frames(shared: Arc<Shared>, mut rx: mpsc::Receiver<Outbound>) {
    let mut batch = Vec::with_capacity(256);
    let mut seqs: HashMap<u32, u64> = HashMap::new();
    loop {
        if rx.recv_many(&mut batch, 256).await == 0 {
            return;
        }
        if shared.space_waiters.load(Ordering::SeqCst) > 0 {
            let _guard = shared.space.lock().unwrap_or_else(|e| e.into_inner());
            shared.space_cv.notify_all();
        }
        let n = batch.len();
        for mut o in batch.drain(..) {
            let seq = seqs.entry(o.dest).or_insert(0);
            *seq += 1;
            frame::set_seq(&mut o.frame, *seq);
            frame::seal(shared.key.as_ref(), &mut o.frame);
            if shared
                .client
                .publish(o.subject, o.frame.into())
                .await
                .is_ok()
            {
                bump(&shared.stats.published, 1);
            } else {
                bump(&shared.stats.publish_failed, 1);
            }
        }
        if shared.pending.fetch_sub(n, Ordering::Relaxed) == n {
            shared.idle.notify_waiters();
        }
    }
}

/// Per sending node and run (origin, incarnation): the last sequence
/// number taken and the flow-control state. Kept for every run seen, not
/// only the latest: frames of an earlier run that arrive late (or are
/// replayed) are then still recognised as duplicates, and alternating two
/// runs' frames cannot reset a baseline.
type Seen = HashMap<(u32, u64), Run>;

/// What the reader keeps of one sender's run.
#[derive(Debug)]
struct Run {
    /// The last sequence number taken.
    last: u64,
    /// Messages queued for a process that was then over the receive
    /// limit, oldest first: their release waits (see
    /// [`NodeConfig::window`]).
    withheld: VecDeque<(u64, Pid)>,
    /// The highest release sent to the sender.
    credited: u64,
}

impl Run {
    /// Every sequence number up to this one is released: queued for a
    /// process under the limit, undeliverable, or never arrived.
    fn released(&self) -> u64 {
        self.withheld.front().map_or(self.last, |&(seq, _)| seq - 1)
    }

    /// Whether a credit is due at the next tick.
    fn owes(&self) -> bool {
        !self.withheld.is_empty() || self.released() > self.credited
    }
}

/// Sends `run` (of sender `origin`'s run `incarnation`) a credit: if
/// `force`, whatever it releases; else only if it releases a quarter of a
/// window more than the last one, or (`tick`) anything more.
async fn credit(shared: &Shared, origin: u32, incarnation: u64, run: &mut Run, how: Credit) {
    let released = run.released();
    let step = (shared.config.window / 4).max(1);
    let due = match how {
        Credit::Force => true,
        Credit::Tick => released > run.credited,
        Credit::Eager => released >= run.credited.saturating_add(step),
    };
    if !due {
        return;
    }
    run.credited = run.credited.max(released);
    let mut frame = frame::encode_credit(shared.node, shared.incarnation, incarnation, released);
    frame::seal(shared.key.as_ref(), &mut frame);
    let subject = Subject::from(shared.config.node_subject(origin));
    shared.publish(subject, frame).await;
}

/// When [`credit`] sends one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Credit {
    /// Always (the answer to a credit request).
    Force,
    /// When anything more is released (the reader's tick).
    Tick,
    /// When a quarter of a window more is released (after a message).
    Eager,
}

/// The reader's tick: releases withheld messages whose process has caught
/// up (or is gone), and credits what is released.
async fn release<P: NodeProcess>(shared: &Shared, handle: &Handle<P>, seen: &mut Seen) {
    let limit = shared.config.receive_limit;
    for (&(origin, incarnation), run) in seen.iter_mut() {
        while let Some(&(_, pid)) = run.withheld.front() {
            if handle.queued(pid).is_some_and(|queued| queued > limit) {
                break;
            }
            run.withheld.pop_front();
        }
        credit(shared, origin, incarnation, run, Credit::Tick).await;
    }
}

/// The reader of the node's subject: decodes, drops duplicates, delivers
/// into the scheduler, answers requests and notifies senders of dead
/// letters.
async fn read_frames<P: NodeProcess>(shared: Arc<Shared>, handle: Handle<P>, mut sub: Subscriber) {
    let mut seen = Seen::new();
    let mut tick = tokio::time::interval(RELEASE_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The tick runs only while a credit is owed: an idle node sleeps.
    let mut owed = false;
    loop {
        tokio::select! {
            message = sub.next() => {
                let Some(message) = message else { return };
                on_frame(&shared, &handle, &mut seen, &message.payload, message.reply).await;
            }
            _ = tick.tick(), if owed => release(&shared, &handle, &mut seen).await,
        }
        owed = seen.values().any(Run::owes);
    }
}

async fn on_frame<P: NodeProcess>(
    shared: &Shared,
    handle: &Handle<P>,
    seen: &mut Seen,
    bytes: &[u8],
    reply: Option<Subject>,
) {
    let stats = &shared.stats;
    let answer = |status: Status| {
        let mut frame = frame::encode_reply(shared.node, shared.incarnation, status);
        frame::seal(shared.key.as_ref(), &mut frame);
        frame
    };
    // Nothing of a frame is looked at before its tag is checked: a forged
    // one is neither answered, nor delivered, nor numbered.
    let Some(bytes) = frame::open(shared.key.as_ref(), bytes) else {
        bump(&stats.unauthenticated, 1);
        return;
    };
    let Some((header, body)) = Header::read(bytes) else {
        bump(&stats.bad_frames, 1);
        if let Some(reply) = reply {
            shared.publish(reply, answer(Status::BadFrame)).await;
        }
        return;
    };
    match header.kind {
        KIND_CREDIT => {
            let Some(to_incarnation) = frame::decode_credit(body) else {
                bump(&stats.bad_frames, 1);
                return;
            };
            // A credit for an earlier run of ours releases nothing now.
            if to_incarnation == shared.incarnation {
                shared.on_credit(header.origin, header.seq);
            }
        }
        KIND_ASK => {
            if header.seq == 0 || !body.is_empty() {
                bump(&stats.bad_frames, 1);
                return;
            }
            let Some(run) = take_seq(stats, seen, &header) else {
                return;
            };
            credit(
                shared,
                header.origin,
                header.incarnation,
                run,
                Credit::Force,
            )
            .await;
        }
        KIND_MESSAGE | KIND_CONFIRMED => {
            let Some(envelope) = frame::decode_body::<Envelope<P::Message>>(body) else {
                bump(&stats.bad_frames, 1);
                if let Some(reply) = reply {
                    shared.publish(reply, answer(Status::BadFrame)).await;
                }
                return;
            };
            let to = envelope.to.0;
            if to.node() != shared.node {
                bump(&stats.misrouted, 1);
                return;
            }
            let sequenced = header.kind == KIND_MESSAGE && header.seq != 0;
            if sequenced && take_seq(stats, seen, &header).is_none() {
                return;
            }
            let from = envelope.from.map(|w| w.0);
            let package = Package {
                from,
                to,
                topic: Cow::Owned(envelope.topic),
                payload: envelope.payload,
            };
            let status = match Receiver::send(handle, package) {
                Ok(()) => {
                    bump(&stats.received, 1);
                    if sequenced
                        && handle
                            .queued(to)
                            .is_some_and(|queued| queued > shared.config.receive_limit)
                        && let Some(run) = seen.get_mut(&(header.origin, header.incarnation))
                    {
                        run.withheld.push_back((header.seq, to));
                        bump(&stats.withheld, 1);
                    }
                    Status::Delivered
                }
                Err(e) => {
                    bump(&stats.undeliverable, 1);
                    if e.is_unknown_pid() {
                        Status::UnknownPid
                    } else {
                        Status::Closed
                    }
                }
            };
            if let Some(reply) = reply {
                shared.publish(reply, answer(status)).await;
            } else if status != Status::Delivered {
                let notice = Notice {
                    from: envelope.from,
                    to: envelope.to,
                    status,
                };
                let mut frame = frame::encode_notice(shared.node, shared.incarnation, &notice);
                frame::seal(shared.key.as_ref(), &mut frame);
                let subject = Subject::from(shared.config.node_subject(header.origin));
                shared.publish(subject, frame).await;
            }
            if sequenced && let Some(run) = seen.get_mut(&(header.origin, header.incarnation)) {
                credit(
                    shared,
                    header.origin,
                    header.incarnation,
                    run,
                    Credit::Eager,
                )
                .await;
            }
        }
        KIND_PROBE => {
            // Another node starting with our number asks whether it is
            // taken: it is.
            if let Some(reply) = reply {
                shared.publish(reply, answer(Status::Delivered)).await;
            }
        }
        KIND_NOTICE => {
            let Some(notice) = frame::decode_body::<Notice>(body) else {
                bump(&stats.bad_frames, 1);
                return;
            };
            let reason = match notice.status {
                Status::UnknownPid => DeadReason::UnknownPid,
                Status::Closed => DeadReason::Closed,
                Status::Delivered | Status::BadFrame => {
                    bump(&stats.bad_frames, 1);
                    return;
                }
            };
            bump(&stats.dead_letters, 1);
            if let Some(hook) = &shared.config.on_dead_letter {
                let letter = DeadLetter {
                    from: notice.from.map(|w| w.0),
                    to: notice.to.0,
                    reason,
                };
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(letter))).is_err()
                {
                    // A panicking hook loses its letter, not the reader.
                }
            }
        }
        _ => {
            bump(&stats.bad_frames, 1);
            if let Some(reply) = reply {
                shared.publish(reply, answer(Status::BadFrame)).await;
            }
        }
    }
}

/// Takes a sequenced frame's number into its sender run's record; `None`
/// if the frame is a duplicate (counted), else the run.
fn take_seq<'a>(stats: &Counters, seen: &'a mut Seen, header: &Header) -> Option<&'a mut Run> {
    // The first frame this run of the node gets from a sender's run sets
    // the baseline: frames numbered before it went to an earlier run of
    // this node, or were lost before this one was listening; neither is a
    // gap this run can vouch for.
    let run = seen
        .entry((header.origin, header.incarnation))
        .or_insert_with(|| Run {
            last: header.seq - 1, // seq != 0 here
            withheld: VecDeque::new(),
            credited: 0,
        });
    if header.seq <= run.last {
        bump(&stats.duplicates, 1);
        return None;
    }
    bump(&stats.gaps, header.seq - run.last - 1); // seq > last here
    run.last = header.seq;
    Some(run)
}

/// The membership listener.
async fn read_beats(shared: Arc<Shared>, mut sub: Subscriber) {
    while let Some(message) = sub.next().await {
        let Some(bytes) = frame::open(shared.key.as_ref(), &message.payload) else {
            bump(&shared.stats.unauthenticated, 1);
            continue;
        };
        match frame::decode_body::<Beat>(bytes) {
            Some(Beat::Hello {
                node, incarnation, ..
            }) if node == shared.node => {
                if incarnation != shared.incarnation {
                    bump(&shared.stats.conflicts, 1);
                }
            }
            Some(Beat::Hello {
                node,
                incarnation,
                beat,
            }) => {
                let config = &shared.config;
                match shared.members.hello(node, incarnation, beat, || {
                    Subject::from(config.node_subject(node))
                }) {
                    // A newcomer (or one back from silence) learns of us
                    // now rather than at our next heartbeat.
                    crate::members::Seen::Fresh => shared.beat_now.notify_one(),
                    crate::members::Seen::Again => {}
                    crate::members::Seen::Stale => bump(&shared.stats.stale_beats, 1),
                }
            }
            Some(Beat::Bye { node, incarnation }) => {
                if node != shared.node {
                    shared.members.bye(node, incarnation);
                }
            }
            None => bump(&shared.stats.bad_frames, 1),
        }
    }
}

/// Announces the node every heartbeat interval, and at once when asked.
async fn heartbeat(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(shared.config.heartbeat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let subject = Subject::from(shared.config.members_subject());
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shared.beat_now.notified() => {}
        }
        if !shared.open.load(Ordering::Acquire) {
            return;
        }
        shared.publish(subject.clone(), hello(&shared)).await;
    }
}

/// The node's next heartbeat, numbered one above the last.
fn hello(shared: &Shared) -> Vec<u8> {
    // Relaxed: the counter only has to hand out distinct, growing numbers;
    // the heartbeats publish nothing else.
    let beat_no = shared.beats.fetch_add(1, Ordering::Relaxed) + 1;
    beat(
        shared,
        Beat::Hello {
            node: shared.node,
            incarnation: shared.incarnation,
            beat: beat_no,
        },
    )
}
