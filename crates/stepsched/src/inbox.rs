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
//! read-modify-write. So the refusal is decided here instead, on the one
//! word every push reads anyway to find the queue, which is written at
//! most three times (the queue installed, the receiver taken, the seal).
//!
//! # Protocol
//!
//! The cell is one word: null (no event yet), or the queue (the raw form of
//! an [`mpsc::Sender`], which keeps the queue alive), with two tag bits:
//! [`SEALED`], set once the process is sealed (alone if no event ever
//! came), and [`TAKEN`] (below). Whoever completes the process — the
//! worker whose step ended it, or the forcer (`terminate`, shutdown) —
//! calls [`Inbox::seal`] *before* its transition to Complete: it sets the
//! bit, and the caller that found it clear sealed first. The first sealer
//! decides the outcome: a forcer that finds the process sealed by the
//! worker whose step ended it gives way (`terminate` answers
//! `AlreadyComplete` and the step's result stands), so a process that
//! refused a send is complete for everyone, with one result. A sender
//! loads the word: `SEALED` refuses; null makes a queue and installs it by
//! a CAS from null, which fails if the seal or another sender came first
//! (the sender frees its queue, and refuses or uses the one it found);
//! otherwise it pushes into the queue. Every write of the word is a
//! read-modify-write, so the install, the seals and the owner's `TAKEN`
//! are totally ordered on it. A sender ordered after the transition to
//! Complete is ordered after the seal (the transition is a Release RMW,
//! its observer reads with Acquire), so by coherence it reads the bit set.
//! A send racing the completion may still be accepted; its event is then
//! dropped with the queue at close, as the facade documents.
//!
//! # One allocation, one pointer
//!
//! Both ends of the queue are one pointer each, to the same address (the
//! mpsc queue keeps its consumer's state and its first block inside its
//! one allocation), so the word holds them both: the sender's reference
//! from the install on, and the receiver's once the owner of the process
//! has taken it from the queue ([`mpsc::Sender::take_receiver`]) at its
//! first drain, which [`TAKEN`] records. A send reaches the queue through
//! the one pointer it reads from the slot; the slot holds nothing else for
//! the queue, so a process that never receives pays one word for it. Per
//! process that receives, that is one allocation and one free where a box
//! holding both ends, the queue's shared state and its first block made
//! three: for a short-lived process made on one thread and ended on
//! another, the allocator's cross-thread free is much of its cost.

use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ops::{Deref, DerefMut};
use core::ptr::{self, NonNull};

use stepsched_mpsc as mpsc;

use crate::primitive::sync::atomic::{AtomicPtr, Ordering};

/// The bit of the word that seals it (queues are aligned to at least 8).
const SEALED: usize = 1;
/// The bit the owner sets once it has taken the receiver from the queue:
/// the word then holds the receiver's reference too.
const TAKEN: usize = 2;
/// The word's tag bits.
const TAGS: usize = SEALED | TAKEN;

/// The cell holding a process's event queue (see the module docs).
pub(crate) struct Inbox<E> {
    word: AtomicPtr<()>,
    /// The word owns a sender's reference to the queue.
    _queue: PhantomData<mpsc::Sender<E>>,
}

/// A process's event queue, borrowed from its [`Inbox`]: the producers'
/// handle, without a reference count of its own.
pub(crate) struct Queue<'a, E> {
    sender: ManuallyDrop<mpsc::Sender<E>>,
    _inbox: PhantomData<&'a Inbox<E>>,
}

impl<E> Deref for Queue<'_, E> {
    type Target = mpsc::Sender<E>;

    #[inline(always)]
    fn deref(&self) -> &mpsc::Sender<E> {
        &self.sender
    }
}

impl<E> Inbox<E> {
    pub(crate) fn new() -> Self {
        Inbox {
            word: AtomicPtr::new(ptr::null_mut()),
            _queue: PhantomData,
        }
    }

    /// The queue's address in `word` (tags cleared); `None` if none.
    #[inline(always)]
    fn address(word: *mut ()) -> Option<NonNull<()>> {
        NonNull::new(word.map_addr(|a| a & !TAGS))
    }

    /// The queue behind `word`, borrowed for `self`'s life.
    #[inline(always)]
    fn borrow(&self, word: *mut ()) -> Option<Queue<'_, E>> {
        let queue = Self::address(word)?;
        Some(Queue {
            // SAFETY: a queue in the word came from `Sender::into_raw` and
            // is taken back only by `Drop`, which has `&mut self`; the
            // `ManuallyDrop` never gives the reference back.
            sender: ManuallyDrop::new(unsafe { mpsc::Sender::from_raw(queue) }),
            _inbox: PhantomData,
        })
    }

    /// The queue, if one was made: for the owner of the process (drain,
    /// close), whether or not it is sealed.
    #[inline]
    pub(crate) fn get(&self) -> Option<Queue<'_, E>> {
        // Acquire: pairs with the creator's AcqRel install, so the queue's
        // construction happens before our use of it.
        self.borrow(self.word.load(Ordering::Acquire))
    }

    /// The queue to push into, made if this is the first event; `None` once
    /// the process is sealed (see the module docs).
    #[inline]
    pub(crate) fn open(&self) -> Option<Queue<'_, E>> {
        // Acquire: as in `get`.
        let word = self.word.load(Ordering::Acquire);
        if word.is_null() {
            self.make()
        } else if word.addr() & SEALED != 0 {
            None
        } else {
            self.borrow(word)
        }
    }

    /// Makes and installs the queue; `None` if the seal came first.
    #[cold]
    fn make(&self) -> Option<Queue<'_, E>> {
        let new = mpsc::Sender::<E>::without_receiver().into_raw().as_ptr();
        debug_assert_eq!(new.addr() & TAGS, 0, "a queue is aligned to 8");
        // AcqRel: Release publishes our construction; Acquire, on failure,
        // makes another creator's visible to us.
        match self
            .word
            .compare_exchange(ptr::null_mut(), new, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => self.borrow(new),
            Err(found) => {
                // SAFETY: `new` is ours, never shared; taken back once.
                drop(unsafe { mpsc::Sender::<E>::from_raw(NonNull::new_unchecked(new)) });
                if found.addr() & SEALED != 0 {
                    None
                } else {
                    self.borrow(found)
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
        // The seal publishes nothing of its own (the transition to Complete
        // after it publishes the seal), and RMWs on one location are
        // totally ordered: of all the sealers, exactly one finds the bit
        // clear.
        self.set(SEALED)
    }

    /// Sets `bit` in the word, keeping the rest; whether it was clear.
    fn set(&self, bit: usize) -> bool {
        // Relaxed (all three): the callers need only the RMW's atomicity
        // (see `seal` and `receiver`).
        let mut word = self.word.load(Ordering::Relaxed);
        loop {
            if word.addr() & bit != 0 {
                return false;
            }
            match self.word.compare_exchange_weak(
                word,
                word.map_addr(|a| a | bit),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(found) => word = found,
            }
        }
    }

    /// The receiver, for the owner of the process (see the module docs):
    /// taken from the queue the first time the owner asks after the queue
    /// was made (its reference then joins the sender's in the word, and
    /// [`TAKEN`] says so), borrowed from the word after that. `None` while
    /// no queue was made.
    ///
    /// # Safety
    ///
    /// The caller owns the process (see the `slot` module): no other
    /// receiver of this queue is in use while the one returned is.
    #[inline]
    pub(crate) unsafe fn receiver(&self) -> Option<Drain<'_, E>> {
        // Acquire: as in `get`. `TAKEN` was set by this owner or an earlier
        // one, ordered before us by the state word's transitions.
        let word = self.word.load(Ordering::Acquire);
        let queue = Self::address(word)?;
        if word.addr() & TAKEN == 0 {
            // Only the owner takes the receiver, and it keeps it in the
            // word: the take succeeds once, here.
            let taken = self
                .borrow(word)?
                .take_receiver()
                .expect("only the owner takes it");
            // The receiver's reference now lives in the word, beside the
            // sender's (the same address); `Drop` gives both back.
            let raw = taken.into_raw();
            debug_assert_eq!(raw, queue);
            self.set(TAKEN);
        }
        Some(Drain {
            // SAFETY: `TAKEN`: the word holds the receiver's reference,
            // given back only by `Drop`; the caller's ownership makes this
            // the only receiver in use.
            receiver: ManuallyDrop::new(unsafe { mpsc::Receiver::from_raw(queue) }),
            _inbox: PhantomData,
        })
    }
}

/// A process's receiver, borrowed by its owner from the [`Inbox`].
pub(crate) struct Drain<'a, E> {
    receiver: ManuallyDrop<mpsc::Receiver<E>>,
    _inbox: PhantomData<&'a Inbox<E>>,
}

impl<E> Deref for Drain<'_, E> {
    type Target = mpsc::Receiver<E>;

    #[inline(always)]
    fn deref(&self) -> &mpsc::Receiver<E> {
        &self.receiver
    }
}

impl<E> DerefMut for Drain<'_, E> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut mpsc::Receiver<E> {
        &mut self.receiver
    }
}

impl<E> Drop for Inbox<E> {
    fn drop(&mut self) {
        // A load rather than `get_mut`: under loom the last owner may drop
        // the cell on another thread through a std `Arc`, whose
        // synchronization loom cannot see. Acquire: as in `get`.
        let word = self.word.load(Ordering::Acquire);
        if let Some(queue) = Self::address(word) {
            if word.addr() & TAKEN != 0 {
                // SAFETY: `TAKEN`: the receiver's reference, from
                // `Receiver::into_raw`, taken back only here. Its drop
                // closes the queue and drops the events left in it.
                drop(unsafe { mpsc::Receiver::<E>::from_raw(queue) });
            }
            // SAFETY: installed from `Sender::into_raw`, taken back only
            // here. Events still in a queue whose receiver was never taken
            // are dropped with it.
            drop(unsafe { mpsc::Sender::<E>::from_raw(queue) });
        }
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use super::Inbox;

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
        assert!(used.open().expect("open").push(1).is_ok());
        assert!(used.seal(), "the first seal");
        assert!(!used.seal(), "a second seal is not first");
        assert!(used.open().is_none());
        assert!(used.get().is_some(), "the owner's queue");
        let mut left = Vec::new();
        // SAFETY: this test owns the process.
        unsafe { used.receiver() }
            .expect("the owner's receiver")
            .drain_into(&mut left);
        assert_eq!(left.len(), 1);
        // SAFETY: as above.
        let mut again = unsafe { used.receiver() }.expect("kept in the word");
        assert!(!again.is_closed());
        again.close();
        // SAFETY: as above.
        let none = unsafe { never.receiver() };
        assert!(none.is_none(), "no queue, no receiver");
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
                loom::thread::spawn(move || inbox.open().is_some_and(|queue| queue.push(1).is_ok()))
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
            let _ = inbox.open().map(|queue| queue.push(1));
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
