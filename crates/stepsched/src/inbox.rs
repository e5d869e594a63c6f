//! A process's event queue: created by its first event, sealed before the
//! process completes.
//!
//! # Why a seal
//!
//! A send to a process that has completed must be refused (its payload
//! handed back), and a sender that has seen the process complete — through
//! [`Address::is_closed`](crate::Address::is_closed), a `terminate` that
//! returned `Ok`, a `join` — must never be told `Ok`. Reading the state word
//! before each push would say so, but that word is written by the worker at
//! every transition: for a sender on another core the read is a cache miss,
//! and the wake that follows the push must then take the line back for its
//! read-modify-write. So the refusal is decided here instead, on data every
//! push reads anyway: the cell's pointer and the queue's `sealed` flag,
//! which sit beside the producers' end of the queue and are written once.
//!
//! # Protocol
//!
//! The cell is one `AtomicPtr`: null (no event yet), [`SEALED`] (the process
//! completed before any event), or the queue. Whoever completes the process —
//! the worker whose step ended it, or the forcer (`terminate`, shutdown) —
//! calls [`Inbox::seal`] *before* its transition to Complete: a CAS from null
//! to `SEALED`, or, if the queue exists, a swap of its `sealed` flag. The
//! seal tells its caller whether it came first, and the first sealer
//! decides the outcome: a forcer that finds the queue sealed by the
//! worker whose step ended the process gives way (`terminate` answers
//! `AlreadyComplete` and the step's result stands), so a process that
//! refused a send is complete for everyone, with one result. A
//! sender loads the pointer: `SEALED` or a sealed queue refuses; null makes
//! a queue and installs it by a CAS from null, which fails with `SEALED` if
//! the seal came first (the sender frees its queue and refuses) and
//! otherwise races the seal's CAS on the same word, so the seal sees the
//! queue and flags it. A sender ordered after the transition to Complete is
//! ordered after the seal (the transition is a Release RMW, its observer
//! reads with Acquire), so by coherence it reads `SEALED` or the flag set.
//! A send racing the completion may still be accepted; its event is then
//! dropped with the queue at close, as the facade documents.

use std::ptr;

use stepsched_mpsc as mpsc;

use crate::primitive::cell::UnsafeCell;
use crate::primitive::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// The cell's value once the process completed without ever getting an
/// event: never the address of a queue (those are aligned to at least 8).
const SEALED: usize = 1;

/// A process's event queue: producers push through `sender`; only the
/// owner of the process (see the `slot` module) drains `receiver`.
///
/// `repr(C)`: what every send reads (`sender`, `sealed`) comes first, and
/// `_gap` keeps the receiver's fields that a drain writes (from
/// [`mpsc::RECEIVER_DRAIN_OFFSET`] into it) 64 bytes past them, so that on
/// no address of the allocation do they share a cache line: a drain does
/// not take from its senders the line they read at every send.
#[repr(C)]
pub(crate) struct EventQueue<E> {
    pub(crate) sender: mpsc::Sender<E>,
    /// Set by [`Inbox::seal`]; read by every send, beside `sender`.
    sealed: AtomicBool,
    _gap: [u8; GAP],
    pub(crate) receiver: UnsafeCell<mpsc::Receiver<E>>,
}

impl<E> EventQueue<E> {
    fn new() -> Self {
        let receiver = mpsc::Receiver::new();
        EventQueue {
            sender: receiver.sender(),
            sealed: AtomicBool::new(false),
            _gap: [0; GAP],
            receiver: UnsafeCell::new(receiver),
        }
    }
}

/// Where what a send reads ends: `sender`, then the one byte of `sealed`
/// (the sender's size does not depend on the value type).
const SEND_READS_END: usize = size_of::<mpsc::Sender<()>>() + 1;

/// Bytes of padding after `sealed` (see [`EventQueue`]): the first byte the
/// drain writes must be 64 bytes past the last byte a send reads, and the
/// receiver's first `RECEIVER_DRAIN_OFFSET` bytes count towards that.
const GAP: usize = (SEND_READS_END - 1 + 64)
    .saturating_sub(mpsc::RECEIVER_DRAIN_OFFSET)
    .saturating_sub(SEND_READS_END);

/// The cell holding a process's [`EventQueue`] (see the module docs).
pub(crate) struct Inbox<E> {
    ptr: AtomicPtr<EventQueue<E>>,
}

impl<E> Inbox<E> {
    pub(crate) fn new() -> Self {
        Inbox {
            ptr: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// The queue, if one was made: for the owner of the process (drain,
    /// close), whether or not it is sealed.
    #[inline]
    pub(crate) fn get(&self) -> Option<&EventQueue<E>> {
        // Acquire: pairs with the creator's AcqRel install, so the queue's
        // construction happens before our use of it.
        let p = self.ptr.load(Ordering::Acquire);
        if p as usize == SEALED {
            return None;
        }
        // SAFETY: a pointer other than null and `SEALED` was installed once
        // from a `Box` and is freed only by `Drop`, which has `&mut self`.
        unsafe { p.as_ref() }
    }

    /// The queue to push into, made if this is the first event; `None` once
    /// the process is sealed (see the module docs).
    #[inline]
    pub(crate) fn open(&self) -> Option<&EventQueue<E>> {
        // Acquire: as in `get`.
        let p = self.ptr.load(Ordering::Acquire);
        let queue = if p.is_null() {
            self.make()?
        } else if p as usize == SEALED {
            return None;
        } else {
            // SAFETY: as in `get`.
            unsafe { &*p }
        };
        // Relaxed: a sender ordered after the seal reads it by coherence
        // (the module docs give the happens-before chain); a racing one may
        // miss it, which is allowed.
        (!queue.sealed.load(Ordering::Relaxed)).then_some(queue)
    }

    /// Makes and installs the queue; `None` if the seal came first.
    #[cold]
    fn make(&self) -> Option<&EventQueue<E>> {
        let new = Box::into_raw(Box::new(EventQueue::new()));
        // AcqRel: Release publishes our construction; Acquire, on failure,
        // makes another creator's visible to us.
        match self
            .ptr
            .compare_exchange(ptr::null_mut(), new, Ordering::AcqRel, Ordering::Acquire)
        {
            // SAFETY: installed; lives until `Drop` (see `get`).
            Ok(_) => Some(unsafe { &*new }),
            Err(found) => {
                // SAFETY: `new` is ours, never shared.
                drop(unsafe { Box::from_raw(new) });
                if found as usize == SEALED {
                    None
                } else {
                    // SAFETY: as in `get`.
                    Some(unsafe { &*found })
                }
            }
        }
    }

    /// Refuses every later send; called by whoever completes the process,
    /// before its transition to Complete. Returns whether this call sealed
    /// it (`false`: an earlier call did).
    ///
    /// The first seal decides how the process ends (see `Slot::force`): a
    /// send refused by the seal must never be followed by a `terminate`
    /// that succeeds over the step's own result, so a forcer that finds the
    /// process already sealed by its worker gives way.
    pub(crate) fn seal(&self) -> bool {
        // Acquire on failure: makes the queue's construction visible before
        // we write its flag. Relaxed on success: `SEALED` publishes nothing
        // (the transition to Complete after us publishes the seal). The
        // pointer changes at most once (null to `SEALED` or to the queue),
        // so a CAS that fails reads that one value and every sealer takes
        // the same branch: all race on the pointer's CAS, or all swap the
        // flag. RMWs on one location are totally ordered: one winner.
        match self.ptr.compare_exchange(
            ptr::null_mut(),
            SEALED as *mut EventQueue<E>,
            Ordering::Relaxed,
            Ordering::Acquire,
        ) {
            Ok(_) => true,
            Err(found) if found as usize == SEALED => false,
            Err(found) => {
                // SAFETY: as in `get`.
                let queue = unsafe { &*found };
                // Relaxed: published by the transition to Complete that
                // follows (module docs); the swap's atomicity alone decides
                // the first sealer.
                !queue.sealed.swap(true, Ordering::Relaxed)
            }
        }
    }
}

impl<E> Drop for Inbox<E> {
    fn drop(&mut self) {
        // A load rather than `get_mut`: under loom the last owner may drop
        // the cell on another thread through a std `Arc`, whose
        // synchronization loom cannot see. Acquire: as in `get`.
        let p = self.ptr.load(Ordering::Acquire);
        if !p.is_null() && p as usize != SEALED {
            // SAFETY: installed from a `Box`, freed only here.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::Inbox;

    /// The layout [`EventQueue`] argues for, on this target.
    #[test]
    fn what_a_send_reads_is_a_line_before_what_a_drain_writes() {
        use std::mem::offset_of;
        type Q = super::EventQueue<u64>;
        let read_end = offset_of!(Q, sealed) + 1;
        assert_eq!(read_end, 17, "the sender and the flag moved");
        let drain_writes = offset_of!(Q, receiver) + stepsched_mpsc::RECEIVER_DRAIN_OFFSET;
        assert!(
            drain_writes > read_end - 1 + 63,
            "the drain's fields at {drain_writes} may share a line with a send's at {read_end}"
        );
    }

    #[test]
    fn a_seal_refuses_later_sends_whether_or_not_a_queue_was_made() {
        // Sealed before any event: no queue is ever made.
        let never = Inbox::<u8>::new();
        assert!(never.seal(), "the first seal");
        assert!(never.open().is_none());
        assert!(never.get().is_none());
        assert!(!never.seal(), "a second seal is not first");
        assert!(never.open().is_none());

        // Sealed after the first event: the owner still reaches the queue
        // (to close and drain it), senders do not.
        let used = Inbox::<u8>::new();
        assert!(used.open().expect("open").sender.push(1).is_ok());
        assert!(used.seal(), "the first seal");
        assert!(!used.seal(), "a second seal is not first");
        assert!(used.open().is_none());
        let queue = used.get().expect("the owner's queue");
        let mut left = Vec::new();
        // SAFETY: this test is the only user of the receiver.
        unsafe { (*queue.receiver.get()).drain_into(&mut left) };
        assert_eq!(left.len(), 1);
    }
}

#[cfg(all(test, stepsched_loom))]
mod loom_tests {
    use super::Inbox;
    use crate::primitive::sync::Arc;
    use crate::primitive::sync::atomic::{AtomicBool, Ordering};

    /// The completer seals, then publishes completion (`done` stands for
    /// the Release transition of the state word to Complete). A sender
    /// racing it may be accepted or refused; a sender that has seen
    /// `done` must be refused. `made_first`: whether the queue exists
    /// before the race (the seal sets its flag) or is made by the racing
    /// sender (the seal and the sender's install race on the pointer).
    fn seal_races_a_send(made_first: bool) {
        loom::model(move || {
            let inbox = Arc::new(Inbox::<u32>::new());
            if made_first {
                let _ = inbox.open();
            }
            let done = Arc::new(AtomicBool::new(false));
            let completer = {
                let (inbox, done) = (inbox.clone(), done.clone());
                loom::thread::spawn(move || {
                    inbox.seal();
                    done.store(true, Ordering::Release);
                })
            };
            let racer = {
                let inbox = inbox.clone();
                loom::thread::spawn(move || {
                    inbox
                        .open()
                        .is_some_and(|queue| queue.sender.push(1).is_ok())
                })
            };
            if done.load(Ordering::Acquire) {
                assert!(
                    inbox.open().is_none(),
                    "a send ordered after the completion was accepted"
                );
            }
            completer.join().unwrap();
            let _accepted = racer.join().unwrap();
            assert!(inbox.open().is_none(), "a sealed inbox accepted a send");
        });
    }

    #[test]
    fn loom_seal_races_the_first_send() {
        seal_races_a_send(false);
    }

    #[test]
    fn loom_seal_races_a_send_to_a_made_queue() {
        seal_races_a_send(true);
    }

    /// Two completers (the worker whose step ended the process, and a
    /// forcer) seal at once, with or without a queue, while a sender makes
    /// the queue: exactly one of them is told it sealed first.
    fn two_seals_race(made_first: bool) {
        loom::model(move || {
            let inbox = Arc::new(Inbox::<u32>::new());
            if made_first {
                let _ = inbox.open();
            }
            let sealers: Vec<_> = (0..2)
                .map(|_| {
                    let inbox = inbox.clone();
                    loom::thread::spawn(move || inbox.seal())
                })
                .collect();
            let _ = inbox.open().map(|queue| queue.sender.push(1));
            let first = sealers
                .into_iter()
                .map(|s| s.join().unwrap())
                .filter(|&first| first)
                .count();
            assert_eq!(first, 1, "exactly one seal comes first");
        });
    }

    #[test]
    fn loom_two_seals_one_first() {
        two_seals_race(false);
    }

    #[test]
    fn loom_two_seals_one_first_with_a_queue() {
        two_seals_race(true);
    }
}
