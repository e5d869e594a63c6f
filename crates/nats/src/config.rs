//! [`NodeConfig`]: where a node connects and how it watches its peers.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::node::DeadLetter;

/// The dead-letter hook's type.
pub(crate) type DeadLetterHook = Arc<dyn Fn(DeadLetter) + Send + Sync>;

/// The configuration of a [`Node`](crate::Node).
///
/// ```
/// use std::time::Duration;
/// use stepsched_nats::NodeConfig;
///
/// let config = NodeConfig::new(1, "nats://127.0.0.1:4222")
///     .cluster_key(b"32 random bytes, the same on all!")
///     .prefix("shop")
///     .heartbeat(Duration::from_millis(100))
///     .member_timeout(Duration::from_millis(500));
/// assert_eq!(config.node_id(), 1);
/// assert_eq!(config.node_subject(7), "shop.node.7");
/// assert_eq!(config.members_subject(), "shop.members");
/// ```
#[derive(Clone)]
pub struct NodeConfig {
    pub(crate) node: u32,
    pub(crate) url: String,
    pub(crate) prefix: String,
    pub(crate) heartbeat: Duration,
    pub(crate) member_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) send_timeout: Duration,
    pub(crate) queue_capacity: usize,
    pub(crate) reconnect_delay: Duration,
    pub(crate) inbox_capacity: usize,
    pub(crate) window: u64,
    pub(crate) receive_limit: usize,
    pub(crate) on_dead_letter: Option<DeadLetterHook>,
    pub(crate) auth: Auth,
    pub(crate) key: ClusterKey,
}

/// How the node proves who it is to the NATS server, and how it checks
/// the server (TLS). Secrets are never printed by `Debug`.
#[derive(Clone, Default)]
pub(crate) struct Auth {
    pub(crate) user_password: Option<(String, String)>,
    pub(crate) token: Option<String>,
    pub(crate) nkey_seed: Option<String>,
    pub(crate) credentials_file: Option<PathBuf>,
    pub(crate) root_certificates: Vec<PathBuf>,
    pub(crate) client_certificate: Option<(PathBuf, PathBuf)>,
    pub(crate) require_tls: bool,
}

/// The cluster key: set, explicitly refused, or not chosen (which
/// `Node::start` refuses).
#[derive(Clone, Default)]
pub(crate) enum ClusterKey {
    /// Not chosen: `Node::start` fails with `StartError::Config`.
    #[default]
    Unset,
    /// Frames are tagged under this key (derived from the configured
    /// material, whose length is kept to check it at start).
    Key(crate::frame::TagKey, usize),
    /// Frames are not tagged ([`NodeConfig::insecure_no_cluster_key`]).
    Insecure,
}

impl fmt::Debug for NodeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeConfig")
            .field("node", &self.node)
            .field("url", &self.url)
            .field("prefix", &self.prefix)
            .field("heartbeat", &self.heartbeat)
            .field("member_timeout", &self.member_timeout)
            .field(
                "cluster_key",
                &match self.key {
                    ClusterKey::Unset => "unset",
                    ClusterKey::Key(..) => "set",
                    ClusterKey::Insecure => "insecure (none)",
                },
            )
            .field("require_tls", &self.auth.require_tls)
            .finish_non_exhaustive()
    }
}

impl NodeConfig {
    /// Node `node` (the node part of every PID its scheduler hands out),
    /// connecting to the NATS server at `url` (`nats://host:port`).
    ///
    /// Defaults: subject prefix `stepsched`, a heartbeat every 200 ms, a
    /// peer unreachable after 1 s without one, 2 s to connect, a send
    /// waits at most 1 s on a full outbound queue of 65 536 frames, and a
    /// lost connection is retried every 100 ms to 1 s, and the reader's
    /// buffer holds up to 2<sup>20</sup> frames. No credentials, no TLS
    /// unless the URL or the server asks for it, and no cluster key
    /// chosen: set [`cluster_key`](Self::cluster_key) (or, on a trusted
    /// server, [`insecure_no_cluster_key`](Self::insecure_no_cluster_key))
    /// or [`Node::start`](crate::Node::start) refuses to start.
    pub fn new(node: u32, url: impl Into<String>) -> Self {
        NodeConfig {
            node,
            url: url.into(),
            prefix: "stepsched".into(),
            heartbeat: Duration::from_millis(200),
            member_timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(2),
            send_timeout: Duration::from_secs(1),
            queue_capacity: 65_536,
            reconnect_delay: Duration::from_secs(1),
            inbox_capacity: 1 << 20,
            window: 8192,
            receive_limit: 8192,
            on_dead_letter: None,
            auth: Auth::default(),
            key: ClusterKey::Unset,
        }
    }

    /// The cluster key: every frame this node sends carries a keyed
    /// BLAKE3 tag under it (16 bytes), and every frame it receives
    /// without a valid one is dropped and counted
    /// ([`NodeStats::unauthenticated`](crate::NodeStats::unauthenticated)),
    /// never delivered and never taken into the duplicate and gap
    /// accounting. Every node of a cluster needs the same key; at least
    /// 16 bytes (32 random bytes recommended), else
    /// [`Node::start`](crate::Node::start) fails with
    /// [`StartError::Config`](crate::StartError::Config).
    ///
    /// A node needs either a key or
    /// [`insecure_no_cluster_key`](Self::insecure_no_cluster_key).
    pub fn cluster_key(mut self, key: impl AsRef<[u8]>) -> Self {
        let key = key.as_ref();
        self.key = ClusterKey::Key(crate::frame::tag_key(key), key.len());
        self
    }

    /// Runs without a cluster key: frames are not tagged, and any client
    /// that may publish on the cluster's subjects can forge messages,
    /// senders, sequence numbers and membership (see the README,
    /// "Security"). For a trusted server only, such as a test's loopback
    /// one.
    pub fn insecure_no_cluster_key(mut self) -> Self {
        self.key = ClusterKey::Insecure;
        self
    }

    /// Authenticates to the server with a user name and password. A
    /// `nats://user:password@host` URL does the same.
    pub fn user_password(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.auth.user_password = Some((user.into(), password.into()));
        self
    }

    /// Authenticates to the server with a token. A `nats://token@host`
    /// URL does the same.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.auth.token = Some(token.into());
        self
    }

    /// Authenticates to the server with an NKey seed (`SU...`): the node
    /// signs the server's nonce with it.
    pub fn nkey(mut self, seed: impl Into<String>) -> Self {
        self.auth.nkey_seed = Some(seed.into());
        self
    }

    /// Authenticates to the server with a credentials file (a user JWT and
    /// its NKey seed, as `nsc` writes them). Read at start; an unreadable
    /// file is a [`StartError::Config`](crate::StartError::Config).
    pub fn credentials_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.auth.credentials_file = Some(path.into());
        self
    }

    /// Trusts the CA certificates in this PEM file for the server's TLS
    /// certificate (in addition to the system's roots). Can be given more
    /// than once.
    pub fn tls_root_certificates(mut self, pem: impl Into<PathBuf>) -> Self {
        self.auth.root_certificates.push(pem.into());
        self
    }

    /// Presents this client certificate and key (PEM files) to a server
    /// that verifies clients (mutual TLS).
    pub fn tls_client_certificate(
        mut self,
        cert: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
    ) -> Self {
        self.auth.client_certificate = Some((cert.into(), key.into()));
        self
    }

    /// Refuses to connect without TLS, even to a server that does not ask
    /// for it. Also implied by a `tls://` URL.
    pub fn require_tls(mut self, required: bool) -> Self {
        self.auth.require_tls = required;
        self
    }

    /// The node number.
    pub fn node_id(&self) -> u32 {
        self.node
    }

    /// The member timeout (see [`member_timeout`](Self::member_timeout)).
    pub fn member_timeout_value(&self) -> Duration {
        self.member_timeout
    }

    /// The first part of every subject: clusters with different prefixes
    /// share a server without seeing each other.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How often the node announces itself.
    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every;
        self
    }

    /// How long after a peer's last heartbeat sends to it fail with
    /// [`RemoteError::Unreachable`](crate::RemoteError::Unreachable). Keep
    /// it several heartbeats long.
    pub fn member_timeout(mut self, timeout: Duration) -> Self {
        self.member_timeout = timeout;
        self
    }

    /// How long [`Node::start`](crate::Node::start) waits for the server.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a send waits for room in a full outbound queue before it
    /// fails with [`RemoteError::Busy`](crate::RemoteError::Busy).
    pub fn send_timeout(mut self, timeout: Duration) -> Self {
        self.send_timeout = timeout;
        self
    }

    /// How many encoded frames the outbound queue holds.
    pub fn queue_capacity(mut self, frames: usize) -> Self {
        self.queue_capacity = frames.max(1);
        self
    }

    /// How many received frames the NATS client buffers for the node's
    /// reader before it drops new ones (a slow consumer, counted in
    /// [`NodeStats::slow_consumer`](crate::NodeStats::slow_consumer)).
    /// Core NATS has no flow control: this buffer is what absorbs a sender
    /// faster than the receiving node. Default 2<sup>20</sup> frames
    /// (memory is used only while the reader is behind).
    pub fn inbox_capacity(mut self, frames: usize) -> Self {
        self.inbox_capacity = frames.max(1);
        self
    }

    /// Flow control: how many messages this node may have in flight to one
    /// other node, sent and not yet *released* by it. The receiving node
    /// releases a message once it has queued it for its process, unless
    /// that process's queue then holds more than the receiver's
    /// [`receive_limit`](Self::receive_limit): then it withholds the
    /// release until the process has caught up. A send that finds the
    /// window full waits for releases up to the send timeout, then fails
    /// with [`RemoteError::Busy`](crate::RemoteError::Busy). So a slow
    /// process costs its node at most about `receive_limit` queued events
    /// plus one window per sending node, and a sender at most one window
    /// per destination. Default 8 192 messages.
    pub fn window(mut self, messages: u64) -> Self {
        self.window = messages.max(1);
        self
    }

    /// Flow control on the receiving side: how many events a local process
    /// may have queued before this node withholds the release of further
    /// remote messages to it (see [`window`](Self::window)). Default 8 192.
    pub fn receive_limit(mut self, events: usize) -> Self {
        self.receive_limit = events;
        self
    }

    /// The longest wait between two reconnection attempts.
    pub fn reconnect_delay(mut self, max: Duration) -> Self {
        self.reconnect_delay = max;
        self
    }

    /// A hook called, on the node's runtime thread, for every message of
    /// this node that another node could not deliver (see
    /// [`DeadLetter`]). It must not block.
    pub fn on_dead_letter(mut self, hook: impl Fn(DeadLetter) + Send + Sync + 'static) -> Self {
        self.on_dead_letter = Some(Arc::new(hook));
        self
    }

    /// The subject node `node` receives its messages on:
    /// `<prefix>.node.<node>`.
    pub fn node_subject(&self, node: u32) -> String {
        format!("{}.node.{node}", self.prefix)
    }

    /// The subject of heartbeats and departures: `<prefix>.members`.
    pub fn members_subject(&self) -> String {
        format!("{}.members", self.prefix)
    }
}
