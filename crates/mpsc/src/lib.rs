//! A lock-free multi-producer, single-consumer event queue with close and
//! generations.
//!
//! This is the per-process event queue of stepsched: many producers (handlers
//! completing yields, senders of messages) push from any thread, and one
//! consumer (the worker about to step the process) drains everything in one
//! call before each step. It knows nothing of processes and is generic over
//! any `T: Send`.
//!
//! # Guarantees
//!
//! * **Lock-free push** from any thread through a [`Sender`]: a claim with
//!   one `fetch_add`, a write and a store (the allocator aside, when a new
//!   block is needed). Steady state does not allocate: slots come in blocks
//!   of 8 that the consumer recycles. A new queue is one allocation (its
//!   first block lives in the state the handles share), so a queue that
//!   receives a handful of values in its life never allocates again.
//! * **One consumer**: the [`Receiver`] is unique, `Send` but not `Sync`,
//!   and takes values out through `&mut self`.
//! * **Batch drain**: [`Receiver::drain_into`] appends every value pushed so
//!   far to the caller's `Vec`, in claim order, so each producer's values
//!   come out in the order it pushed them. A push that has claimed its
//!   place but not finished writing holds back the values behind it until
//!   it finishes; they are never lost.
//! * **Cheap emptiness check**: [`Receiver::has_events`] is one atomic load
//!   in the common case.
//! * **Close**: after [`Receiver::close`], pushes fail with
//!   [`PushError::Closed`] and hand the value back. Close discards nothing:
//!   values pushed before it are still drained. A push racing close is either
//!   accepted (and drainable) or refused with its value; never lost.
//! * **Generations**: [`Receiver::reset`] ends the current generation (closing
//!   first, collecting every value of that generation into `leftovers`) and
//!   reopens with the next one. A [`Sender`] carries the generation it was
//!   made for; once that generation has ended its pushes fail with
//!   [`PushError::StaleGeneration`]. The check is atomic with the claim, so a
//!   stale push racing a reset is either returned by the reset in
//!   `leftovers` or refused — never delivered to the new generation.
//! * **Drops exactly once**: every value is either returned by a drain, handed
//!   back in an error, or dropped with the queue.
//!
//! # Example
//!
//! ```
//! use stepsched_mpsc::{channel, PushError};
//! use std::thread;
//!
//! let (tx, mut rx) = channel::<(usize, u32)>();
//! let producers: Vec<_> = (0..4)
//!     .map(|p| {
//!         let tx = tx.clone();
//!         thread::spawn(move || {
//!             for i in 0..100 {
//!                 tx.push((p, i)).unwrap();
//!             }
//!         })
//!     })
//!     .collect();
//! for h in producers {
//!     h.join().unwrap();
//! }
//!
//! let mut events = Vec::new();
//! rx.drain_into(&mut events);
//! assert_eq!(events.len(), 400);
//! // Each producer's events come out in the order it pushed them.
//! for p in 0..4 {
//!     let mine: Vec<u32> = events.iter().filter(|e| e.0 == p).map(|e| e.1).collect();
//!     assert_eq!(mine, (0..100).collect::<Vec<_>>());
//! }
//!
//! // The process ends: the queue is reset for the next one that uses it.
//! let mut leftovers = Vec::new();
//! rx.reset(&mut leftovers);
//! assert!(matches!(tx.push((0, 0)), Err(PushError::StaleGeneration(_))));
//! ```
//!
//! # Design
//!
//! A segmented fetch-and-add list (the design of tokio's unbounded channel)
//! with a packed tail word that carries the claim index, the generation and
//! the closed bit, and tombstones for refused claims. The module `queue`
//! documents the algorithm, the release protocol that makes block reuse
//! ABA-safe, and the exact semantics of close and reset. Loom models of the
//! protocol are in `tests/loom.rs`.
#![cfg_attr(not(test), warn(missing_docs))]

mod block;
mod error;
mod primitive;
mod queue;

pub use error::PushError;
pub use queue::{Generation, Receiver, Sender, channel};
