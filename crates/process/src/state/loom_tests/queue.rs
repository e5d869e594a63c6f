//! A loom model of the per-process event queue that synchronizes exactly as
//! `stepsched-mpsc` does, so that the state cell's models borrow no
//! synchronization from their queue.
//!
//! What the real queue does, and this model with it:
//!
//! * **push**: claim an index with one `fetch_add` on the tail (Acquire, as
//!   the real claim; it orders nothing towards the consumer), write the
//!   value into the slot (a plain write), then store the slot's state with
//!   Release (`Block::write`). The claim is the push's only read-modify-write.
//! * **drain** and **has_events**: the consumer reads slot states from its
//!   own index on with Acquire *loads* (`Block::ready_run`,
//!   `Block::slot_state`) and stops at the first slot not yet ready; it
//!   never performs a read-modify-write on anything a producer writes, so a
//!   drain that is not ordered after a push by something else may read the
//!   slot's older state and miss the event.
//!
//! Values and the consumer's index are loom cells: reading an event without
//! the Release/Acquire pair is a reported data race, and so is a second
//! consumer (the next owner of the process) touching the index while the
//! first still does. The model leaves out blocks, close and generations,
//! which play no part in the races with the state cell (a model holds at
//! most [`CAPACITY`] events, in one block).

use loom::cell::UnsafeCell;

use crate::primitive::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Slots of the model queue: the most events a model pushes.
pub(super) const CAPACITY: usize = 3;

struct Slot {
    /// The event (its id), written once by the producer that claimed it.
    value: UnsafeCell<usize>,
    /// The slot's state: set with Release once `value` is written.
    ready: AtomicBool,
}

/// A multi-producer, single-consumer queue of event ids.
pub(super) struct EventQueue {
    /// The next index to claim.
    tail: AtomicUsize,
    slots: [Slot; CAPACITY],
    /// The consumer's next index; only the owner of the process touches it.
    head: UnsafeCell<usize>,
}

impl EventQueue {
    pub(super) fn new() -> Self {
        Self {
            tail: AtomicUsize::new(0),
            slots: [(); CAPACITY].map(|()| Slot {
                value: UnsafeCell::new(usize::MAX),
                ready: AtomicBool::new(false),
            }),
            head: UnsafeCell::new(0),
        }
    }

    /// Pushes event `id` (any thread).
    pub(super) fn push(&self, id: usize) {
        // Acquire: as the real claim (`Sender::claim_and_write`); it gives the
        // consumer nothing, and the model must not either.
        let index = self.tail.fetch_add(1, Ordering::Acquire);
        assert!(index < CAPACITY, "model pushes more than {CAPACITY} events");
        let slot = &self.slots[index];
        // SAFETY: the claim makes this thread the slot's only writer, and the
        // consumer reads it only after seeing `ready`, stored below.
        slot.value.with_mut(|p| unsafe { *p = id });
        // Release: publishes the value to the consumer's Acquire load, as
        // `Block::write` does; a plain store, as there.
        slot.ready.store(true, Ordering::Release);
    }

    /// Whether the next slot is ready (consumer only: the owner of the
    /// process, or a thread ordered after every party).
    pub(super) fn has_events(&self) -> bool {
        // SAFETY: consumer only (caller); loom reports any other access.
        let head = self.head.with(|p| unsafe { *p });
        // Acquire: as `Block::slot_state`.
        head < CAPACITY && self.slots[head].ready.load(Ordering::Acquire)
    }

    /// Appends to `out` every event ready from the consumer's index on, up
    /// to the first slot not ready (consumer only).
    pub(super) fn drain(&self, out: &mut Vec<usize>) {
        // SAFETY: consumer only (caller); loom reports any other access.
        self.head.with_mut(|head| {
            // SAFETY: as above; the only reference to the index.
            let head = unsafe { &mut *head };
            // Acquire: as `Block::ready_run`; pairs with the Release store in
            // `push`, so the value read below is the one written.
            while *head < CAPACITY && self.slots[*head].ready.load(Ordering::Acquire) {
                // SAFETY: ready, seen with Acquire: the producer is done with
                // the slot; loom reports the read if that is not ordered.
                out.push(self.slots[*head].value.with(|p| unsafe { *p }));
                *head += 1;
            }
        });
    }
}
