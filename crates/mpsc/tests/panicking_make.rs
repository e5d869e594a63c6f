//! A `make` closure of `Sender::push_with` that unwinds, or that resets
//! its own queue, after the push has claimed its slot.
//!
//! The slot is claimed before `make` runs (so that the value can be built
//! in it); a `make` that unwinds leaves the slot claimed and unwritten. It
//! must become a tombstone, or every later drain stops there for good and
//! `reset` waits for it forever. Each scenario runs on a thread of its own
//! under a hang guard: the generous timeout only turns a hang into a
//! failure, no assertion depends on timing.
#![cfg(not(stepsched_loom))]

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use stepsched_mpsc::{PushError, channel};

/// Runs `scenario` on a thread of its own and fails if it panics or has not
/// finished after a generous time (a hang: the defect under test wedges the
/// queue, so its symptom is a drain that misses values or a reset that never
/// returns).
fn hang_guard(scenario: impl FnOnce() + Send + 'static) {
    let (done_tx, done_rx) = mpsc::channel();
    let handle = thread::spawn(move || {
        scenario();
        done_tx.send(()).unwrap();
    });
    match done_rx.recv_timeout(Duration::from_secs(30)) {
        Ok(()) => handle.join().unwrap(),
        // The scenario panicked: report its own message.
        Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Err(payload) => resume_unwind(payload),
            Ok(()) => unreachable!("the scenario returned without reporting"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("hung: the scenario did not finish within 30 s (a wedged queue)")
        }
    }
}

/// Panics without running the panic hook, so that loops of failing makes
/// print nothing.
fn fail() -> u64 {
    resume_unwind(Box::new("make failed"))
}

#[test]
fn a_push_after_a_panicking_make_is_drained() {
    hang_guard(|| {
        let (tx, mut rx) = channel::<u64>();
        tx.push(1).unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| {
            tx.push_with(|| -> u64 { panic!("make failed") })
        }));
        assert!(r.is_err(), "the panic of make reaches the caller");
        tx.push(2).unwrap();
        assert!(rx.has_events());
        let mut out = Vec::new();
        assert_eq!(rx.drain_into(&mut out), 2);
        assert_eq!(out, [1, 2], "the push after the panicking make is lost");
        assert!(rx.is_empty());
    });
}

#[test]
fn reset_after_a_panicking_make_returns() {
    hang_guard(|| {
        let (tx, mut rx) = channel::<u64>();
        tx.push(1).unwrap();
        assert!(catch_unwind(AssertUnwindSafe(|| tx.push_with(fail))).is_err());
        tx.push(2).unwrap();
        let mut leftovers = Vec::new();
        let g = rx.reset(&mut leftovers);
        assert_eq!(g.get(), 1);
        assert_eq!(leftovers, [1, 2]);
        assert_eq!(tx.push(3), Err(PushError::StaleGeneration(3)));
        let new = rx.sender();
        new.push(4).unwrap();
        let mut out = Vec::new();
        rx.drain_into(&mut out);
        assert_eq!(out, [4]);
    });
}

/// Failing makes at every offset of several blocks, between values and at
/// the head of a drain: each accepted value is drained exactly once, in
/// push order, and no value is made up for a failed make.
#[test]
fn panicking_makes_across_blocks_keep_the_ledger() {
    hang_guard(|| {
        let (tx, mut rx) = channel::<u64>();
        let mut expected = Vec::new();
        let mut out = Vec::new();
        for i in 0..500u64 {
            if i % 3 == 0 || i % 7 == 0 {
                assert!(catch_unwind(AssertUnwindSafe(|| tx.push_with(fail))).is_err());
            } else {
                tx.push(i).unwrap();
                expected.push(i);
            }
            if i % 11 == 0 {
                rx.drain_into(&mut out);
            }
        }
        // A failed make as the last claim, with nothing behind it.
        assert!(catch_unwind(AssertUnwindSafe(|| tx.push_with(fail))).is_err());
        rx.drain_into(&mut out);
        assert_eq!(out, expected);
        assert!(rx.is_empty());
        let mut leftovers = Vec::new();
        rx.reset(&mut leftovers);
        assert!(leftovers.is_empty());
    });
}

/// Counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// The queue dropped with values behind a failed make drops each of them
/// once, and nothing for the failed slot.
#[test]
fn values_behind_a_panicking_make_are_dropped_once_with_the_queue() {
    hang_guard(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = channel::<Counted>();
        for _ in 0..3 {
            tx.push(Counted(drops.clone())).unwrap();
            let r = catch_unwind(AssertUnwindSafe(|| {
                tx.push_with(|| -> Counted { resume_unwind(Box::new("make failed")) })
            }));
            assert!(r.is_err());
        }
        drop(rx);
        drop(tx);
        assert_eq!(drops.load(Ordering::Relaxed), 3);
    });
}

/// A `make` that resets the queue it pushes into, after its push claimed a
/// slot: the reset would wait for that very push forever, so it panics
/// instead, before changing anything; the panic unwinds through `make`,
/// whose slot becomes a tombstone, and the queue goes on.
#[test]
fn a_make_that_resets_its_own_queue_panics_and_the_queue_goes_on() {
    hang_guard(|| {
        let (tx, mut rx) = channel::<u64>();
        tx.push(1).unwrap();
        let mut leftovers = Vec::new();
        let r = catch_unwind(AssertUnwindSafe(|| {
            tx.push_with(|| {
                rx.reset(&mut leftovers);
                2
            })
        }));
        let payload = r.expect_err("a reset inside make of its own queue panics");
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or(payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or_default();
        assert!(
            message.contains("inside the `make`"),
            "unexpected panic: {message:?}"
        );
        // Nothing was reset: same generation, open, the value still queued.
        assert!(leftovers.is_empty());
        assert_eq!(rx.generation().get(), 0);
        assert!(!rx.is_closed());
        tx.push(3).unwrap();
        let mut out = Vec::new();
        rx.drain_into(&mut out);
        assert_eq!(out, [1, 3]);
        tx.push(4).unwrap();
        assert_eq!(rx.reset(&mut leftovers).get(), 1);
        assert_eq!(leftovers, [4]);
    });
}

/// Also when the push into the reset queue is not the innermost one: a
/// `make` for queue A pushes into queue B, whose `make` resets A.
#[test]
fn a_nested_make_that_resets_an_outer_queue_panics() {
    hang_guard(|| {
        let (tx_a, mut rx_a) = channel::<u64>();
        let (tx_b, mut rx_b) = channel::<u64>();
        let r = catch_unwind(AssertUnwindSafe(|| {
            tx_a.push_with(|| {
                tx_b.push_with(|| {
                    rx_a.reset(&mut Vec::new());
                    1
                })
                .unwrap();
                2
            })
        }));
        assert!(r.is_err());
        // Both slots became tombstones; both queues go on.
        tx_a.push(3).unwrap();
        tx_b.push(4).unwrap();
        let mut out = Vec::new();
        rx_a.drain_into(&mut out);
        rx_b.drain_into(&mut out);
        assert_eq!(out, [3, 4]);
        assert_eq!(rx_a.reset(&mut Vec::new()).get(), 1);
        assert_eq!(rx_b.reset(&mut Vec::new()).get(), 1);
    });
}

/// What is not refused: a `make` that resets *another* queue, and a `make`
/// that resets its own queue when its push was refused (no slot claimed, so
/// nothing to wait for).
#[test]
fn a_make_may_reset_another_queue_or_its_own_after_a_refusal() {
    hang_guard(|| {
        let (tx_a, mut rx_a) = channel::<u64>();
        let (tx_b, mut rx_b) = channel::<u64>();
        tx_b.push(9).unwrap();
        let mut leftovers = Vec::new();
        tx_a.push_with(|| {
            rx_b.reset(&mut leftovers);
            1
        })
        .unwrap();
        assert_eq!(leftovers, [9]);
        assert_eq!(rx_b.generation().get(), 1);
        let mut out = Vec::new();
        rx_a.drain_into(&mut out);
        assert_eq!(out, [1]);

        // Refused by the pre-check (closed): `make` runs with no slot
        // claimed, and may reset.
        rx_a.close();
        let r = tx_a.push_with(|| {
            rx_a.reset(&mut leftovers);
            2
        });
        assert_eq!(r, Err(PushError::Closed(2)));
        assert_eq!(rx_a.generation().get(), 1);
        assert!(!rx_a.is_closed());
    });
}
