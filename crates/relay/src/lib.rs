//! Process ids, the [`Receiver`] trait and a concurrent PID routing table.
//!
//! This crate is the message-routing layer of stepsched, usable on its own:
//!
//! - [`Pid`]: a `Copy` process id, node (`u32`) plus number (`u64`), written
//!   `<node.number>`; [`PidAllocator`] hands out unique ones per node.
//! - [`Package`]: a message in an envelope (sender, recipient, topic).
//! - [`Receiver`]: anything that accepts packages; the seam where a
//!   scheduler, another runtime or a network transport plugs in.
//! - [`RoutingTable`]: a sharded concurrent map `Pid → T` with
//!   duplicate-refusing [`register`](RoutingTable::register) and
//!   compare-before-delete [`unregister_if`](RoutingTable::unregister_if) /
//!   [`unregister_if_same`](RoutingTable::unregister_if_same).
//!   [`Router<M>`] is the table of `Arc<dyn Receiver<M>>`, itself a receiver.
//! - [`SendError`] and [`RegisterError`] hand back what they refused and
//!   name the cause: unknown PID, closed target, PID taken.
//! - `serde_pid` (the `serde` feature, off by default): `Pid` as serde
//!   data, for transports that put PIDs on the wire.
//!
//! # Example
//!
//! ```
//! use std::sync::{Arc, mpsc};
//! use stepsched_relay::{Package, PidAllocator, Receiver, Router};
//!
//! let pids = PidAllocator::new(0);
//! let router: Router<&str> = Router::new();
//!
//! // A "process" whose inbox is a channel.
//! let (inbox, messages) = mpsc::channel();
//! let inbox: Arc<dyn Receiver<&str> + Send + Sync> = Arc::new(inbox);
//! let pid = pids.allocate();
//! router.register(pid, inbox.clone()).unwrap();
//!
//! router.send(Package::new(pid, "greet", "hello")).unwrap();
//! assert_eq!(messages.recv().unwrap().payload, "hello");
//!
//! // The process finishes: it removes its own route, and only its own.
//! assert!(router.unregister_if_same(pid, &inbox).is_some());
//! let err = router.send(Package::new(pid, "greet", "late")).unwrap_err();
//! assert!(err.is_unknown_pid());
//! assert_eq!(err.into_package().payload, "late");
//! ```
//!
//! # Guarantees
//!
//! - A package passed to [`Receiver::send`] is either accepted or handed
//!   back in the error, never both and never neither.
//! - A [`RoutingTable`] has at most one route per PID; a second
//!   registration is refused and the target handed back.
//! - Compare-before-delete is atomic: a process that finishes late never
//!   removes the route of a newer process with the same PID.
//! - No lock of the table is held while a target's `send` runs.
//!
//! # Concurrency
//!
//! The only atomic in the crate is the [`PidAllocator`] counter (imported
//! through the crate's `primitive` module, which swaps in loom under
//! `--cfg stepsched_loom`). The table locks one `std::sync::RwLock` per
//! shard.
#![cfg_attr(not(test), warn(missing_docs))]

mod error;
mod hash;
mod pid;
mod primitive;
mod receiver;
mod route_hash;
#[cfg(feature = "serde")]
pub mod serde_pid;
mod shard;
mod table;

pub use error::RegisterError;
pub use hash::{PidBuildHasher, PidHasher};
pub use pid::PidAllocator;
pub use receiver::Receiver;
pub use route_hash::{RouteBuildHasher, RouteHasher};
pub use stepsched_process::{Package, ParsePidError, Pid, SendError};
pub use table::{Router, RoutingTable};

/// The examples of `README.md`, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
