//! The errors of the node layer.

use core::fmt;

use stepsched::{Package, Pid, SendError};

/// Why [`Link::send`](crate::Link::send) did not take a message. The
/// message is handed back in every case, untouched.
///
/// A send that returns `Ok` was queued: for a local PID, in the process's
/// event queue; for a remote one, in this node's outbound queue. Core NATS
/// delivers at most once, so a remote `Ok` is not a delivery receipt (see
/// [`Link::send_confirmed`](crate::Link::send_confirmed) for one).
pub enum RemoteError<M> {
    /// The PID is on this node, and the local scheduler refused it
    /// (unknown PID, or a closed process).
    Local(SendError<M>),
    /// No node with this number has announced itself to this node.
    UnknownNode(Package<M>),
    /// The node announced itself, then left the cluster.
    Left(Package<M>),
    /// The node's heartbeats stopped for longer than the member timeout:
    /// it crashed, or it is cut off from the server.
    Unreachable(Package<M>),
    /// This node has lost its connection to the NATS server, or is
    /// shutting down.
    Disconnected(Package<M>),
    /// The receiving node lags: the flow-control window to it
    /// ([`NodeConfig::window`](crate::NodeConfig::window)) stayed full for
    /// the whole send timeout, or the outbound queue did.
    Busy(Package<M>),
    /// The payload failed to serialize; the string is the codec's error.
    Encode(Package<M>, String),
}

impl<M> RemoteError<M> {
    /// Borrows the refused package.
    pub fn package(&self) -> &Package<M> {
        match self {
            RemoteError::Local(e) => e.package(),
            RemoteError::UnknownNode(p)
            | RemoteError::Left(p)
            | RemoteError::Unreachable(p)
            | RemoteError::Disconnected(p)
            | RemoteError::Busy(p)
            | RemoteError::Encode(p, _) => p,
        }
    }

    /// Takes the refused package back.
    pub fn into_package(self) -> Package<M> {
        match self {
            RemoteError::Local(e) => e.into_package(),
            RemoteError::UnknownNode(p)
            | RemoteError::Left(p)
            | RemoteError::Unreachable(p)
            | RemoteError::Disconnected(p)
            | RemoteError::Busy(p)
            | RemoteError::Encode(p, _) => p,
        }
    }

    /// The PID the message was for.
    pub fn pid(&self) -> Pid {
        self.package().to
    }

    /// Whether the node of the PID is not (or no longer) reachable:
    /// [`UnknownNode`](Self::UnknownNode), [`Left`](Self::Left),
    /// [`Unreachable`](Self::Unreachable) or
    /// [`Disconnected`](Self::Disconnected).
    pub fn is_node_down(&self) -> bool {
        matches!(
            self,
            RemoteError::UnknownNode(_)
                | RemoteError::Left(_)
                | RemoteError::Unreachable(_)
                | RemoteError::Disconnected(_)
        )
    }

    /// The same refusal as a relay [`SendError`], for the
    /// [`Receiver`](stepsched::Receiver) contract: a local refusal as is,
    /// an unknown or departed node as `UnknownPid`, everything else as
    /// `Closed`.
    pub fn into_send_error(self) -> SendError<M> {
        match self {
            RemoteError::Local(e) => e,
            RemoteError::UnknownNode(p) | RemoteError::Left(p) => SendError::UnknownPid(p),
            RemoteError::Unreachable(p)
            | RemoteError::Disconnected(p)
            | RemoteError::Busy(p)
            | RemoteError::Encode(p, _) => SendError::Closed(p),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            RemoteError::Local(_) => "Local",
            RemoteError::UnknownNode(_) => "UnknownNode",
            RemoteError::Left(_) => "Left",
            RemoteError::Unreachable(_) => "Unreachable",
            RemoteError::Disconnected(_) => "Disconnected",
            RemoteError::Busy(_) => "Busy",
            RemoteError::Encode(..) => "Encode",
        }
    }
}

impl<M> fmt::Display for RemoteError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let to = self.pid();
        match self {
            RemoteError::Local(e) => write!(f, "{e}"),
            RemoteError::UnknownNode(_) => write!(f, "unknown node {} (for {to})", to.node()),
            RemoteError::Left(_) => write!(f, "node {} left the cluster (for {to})", to.node()),
            RemoteError::Unreachable(_) => {
                write!(f, "node {} is unreachable (for {to})", to.node())
            }
            RemoteError::Disconnected(_) => {
                write!(f, "this node is disconnected from the server (for {to})")
            }
            RemoteError::Busy(_) => {
                write!(f, "the receiving node lags: no room to send (for {to})")
            }
            RemoteError::Encode(_, e) => write!(f, "the message for {to} did not encode: {e}"),
        }
    }
}

impl<M> fmt::Debug for RemoteError<M> {
    /// Prints the cause and the envelope, never the payload.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.package();
        f.debug_struct(self.name())
            .field("from", &p.from)
            .field("to", &p.to)
            .finish_non_exhaustive()
    }
}

impl<M> std::error::Error for RemoteError<M> {}

/// Why [`Link::send_confirmed`](crate::Link::send_confirmed) could not
/// confirm a delivery. The message is not handed back: it may have
/// reached the other node.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfirmError {
    /// Refused before it left this node (the message was dropped).
    Refused(String),
    /// No subscriber on the node's subject: no node with this number is
    /// connected (NATS "no responders").
    NoResponders,
    /// The node answered: no process has this PID there.
    UnknownPid,
    /// The node answered: the process has finished.
    Closed,
    /// The node answered: the frame did not decode there (the two nodes
    /// disagree on the message type).
    BadFrame,
    /// No answer within the timeout: the message may or may not have been
    /// delivered.
    Timeout,
    /// The request failed in the client (for example, disconnected).
    Request(String),
}

impl fmt::Display for ConfirmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfirmError::Refused(e) => write!(f, "refused before sending: {e}"),
            ConfirmError::NoResponders => f.write_str("no node listens on that subject"),
            ConfirmError::UnknownPid => f.write_str("the node knows no such pid"),
            ConfirmError::Closed => f.write_str("the process has finished"),
            ConfirmError::BadFrame => f.write_str("the node could not decode the message"),
            ConfirmError::Timeout => f.write_str("no answer in time"),
            ConfirmError::Request(e) => write!(f, "request failed: {e}"),
        }
    }
}

impl std::error::Error for ConfirmError {}

/// Why [`Node::start`](crate::Node::start) failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum StartError {
    /// The node's tokio runtime or the scheduler's workers could not start.
    Io(std::io::Error),
    /// The NATS server did not accept a connection within the connect
    /// timeout (not running, wrong address, refused).
    Connect(String),
    /// Subscribing to the node's subjects, or the first announcement,
    /// failed or timed out.
    Subscribe(String),
    /// The configuration cannot be used: no cluster key chosen, a key
    /// shorter than 16 bytes, an unreadable credentials file.
    Config(String),
    /// Another node already has this node's number: a node of that
    /// number answered the start-up question on the node's subject (with a
    /// cluster key, with a valid tag), or, when something listened there
    /// without answering, was heard heartbeating within one member
    /// timeout. Two nodes with one number would split its messages.
    ///
    /// A listener that neither answers nor heartbeats (a monitor
    /// subscribed to `prefix.>`) does not hold the number. Nor does a node
    /// whose machine died without closing its connection: the new node
    /// starts, and until the server drops the dead connection (its ping
    /// timeout, about 2 minutes by default) the server hands part of the
    /// node's messages to the dead subscription, lost and counted as gaps
    /// at this node.
    NodeTaken(u32),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Io(e) => write!(f, "could not start: {e}"),
            StartError::Connect(e) => write!(f, "could not connect to the NATS server: {e}"),
            StartError::Subscribe(e) => write!(f, "could not join the cluster: {e}"),
            StartError::Config(e) => write!(f, "invalid node configuration: {e}"),
            StartError::NodeTaken(n) => write!(
                f,
                "node number {n} is already taken by a live node on this server and prefix"
            ),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for StartError {
    fn from(e: std::io::Error) -> Self {
        StartError::Io(e)
    }
}
