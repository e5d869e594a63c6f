//! Loom models of the queue's public protocol.
//!
//! Run with:
//! `RUSTFLAGS="--cfg stepsched_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p stepsched-mpsc --features loom --test loom`
//!
//! Under loom a block holds 2 slots and a queue starts 8 slots before the
//! 32-bit index wraps, so these few pushes cross the wrap, grow the list,
//! move the producers' hint, release blocks and recycle them.
//! Every model checks an exactly-once predicate per item.
#![cfg(stepsched_loom)]

use loom::thread;
use stepsched_mpsc::{PushError, Receiver, channel};

/// Checks that `seen` holds each producer's items `0..per_producer` exactly
/// once and in push order.
fn assert_exactly_once_in_order(seen: &[(u8, u8)], producers: u8, per_producer: u8) {
    for p in 0..producers {
        let mine: Vec<u8> = seen.iter().filter(|e| e.0 == p).map(|e| e.1).collect();
        let expected: Vec<u8> = (0..per_producer).collect();
        assert_eq!(
            mine, expected,
            "producer {p}: items lost, duplicated or reordered"
        );
    }
    assert_eq!(
        seen.len(),
        usize::from(producers) * usize::from(per_producer)
    );
}

/// Two producers push while the consumer drains. A push that has claimed
/// its slot but not yet written it holds back the items behind it; they
/// must all be found once the producers have finished.
fn producers_and_draining_consumer(per_producer: u8, drains_during: usize) {
    loom::model(move || {
        let (tx, mut rx) = channel::<(u8, u8)>();
        let handles: Vec<_> = (0..2u8)
            .map(|p| {
                let tx = tx.clone();
                thread::spawn(move || {
                    for i in 0..per_producer {
                        tx.push((p, i)).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let mut seen = Vec::new();
        for _ in 0..drains_during {
            rx.drain_into(&mut seen);
        }
        for h in handles {
            h.join().unwrap();
        }
        rx.drain_into(&mut seen);
        assert!(!rx.has_events());
        assert_exactly_once_in_order(&seen, 2, per_producer);
    });
}

#[test]
fn two_producers_one_draining_consumer() {
    producers_and_draining_consumer(2, 1);
}

#[test]
fn two_producers_grow_release_and_recycle() {
    // 6 pushes = 3 blocks of 2: growth races, hint moves and recycling of
    // blocks while a producer may still be walking.
    producers_and_draining_consumer(3, 2);
}

#[test]
fn has_events_sees_a_finished_push() {
    loom::model(|| {
        let (tx, mut rx) = channel::<u8>();
        let h = thread::spawn(move || tx.push(1).unwrap());
        let early = rx.has_events();
        let mut out = Vec::new();
        rx.drain_into(&mut out);
        h.join().unwrap();
        // After the push returned, it is visible, unless already drained.
        assert_eq!(rx.has_events(), out.is_empty());
        if early {
            assert_eq!(out, [1]);
        }
        rx.drain_into(&mut out);
        assert_eq!(out, [1]);
    });
}

#[test]
fn push_racing_close_is_drained_or_handed_back() {
    loom::model(|| {
        let (tx, mut rx) = channel::<(u8, u8)>();
        let tx2 = tx.clone();
        let pusher = |tx: stepsched_mpsc::Sender<(u8, u8)>, p: u8| {
            thread::spawn(move || {
                let mut refused = Vec::new();
                for i in 0..2u8 {
                    match tx.push((p, i)) {
                        Ok(()) => assert!(refused.is_empty(), "accepted after a refusal"),
                        Err(PushError::Closed(v)) => refused.push(v),
                        Err(e @ PushError::StaleGeneration(_)) => panic!("unexpected {e}"),
                    }
                }
                refused
            })
        };
        let a = pusher(tx, 0);
        let b = pusher(tx2, 1);
        let mut drained = Vec::new();
        rx.close();
        rx.drain_into(&mut drained);
        let mut refused = a.join().unwrap();
        refused.extend(b.join().unwrap());
        rx.drain_into(&mut drained);
        assert!(!rx.has_events());
        // Every item exactly once: drained or handed back, never both,
        // never neither; and per producer the accepted ones come first.
        let mut all = drained.clone();
        all.extend(&refused);
        all.sort();
        assert_eq!(all, [(0, 0), (0, 1), (1, 0), (1, 1)]);
        for p in 0..2u8 {
            let mine: Vec<u8> = drained.iter().filter(|e| e.0 == p).map(|e| e.1).collect();
            assert_eq!(mine, (0..mine.len() as u8).collect::<Vec<_>>());
        }
    });
}

#[test]
fn stale_push_racing_reset_lands_in_leftovers_or_is_refused() {
    loom::model(|| {
        let mut rx = Receiver::<u8>::new();
        let old = rx.sender();
        old.push(0).unwrap();
        let h = thread::spawn(move || old.push(1));
        let mut leftovers = Vec::new();
        let generation = rx.reset(&mut leftovers);
        assert_eq!(generation.get(), 1);
        rx.sender().push(2).unwrap();
        let result = h.join().unwrap();
        let mut drained = Vec::new();
        rx.drain_into(&mut drained);
        // The new generation sees only its own item.
        assert_eq!(drained, [2]);
        match result {
            // Accepted: it landed before the reset's drain.
            Ok(()) => assert_eq!(leftovers, [0, 1]),
            // Refused (closed during the reset, or stale after it): handed
            // back, and not in the leftovers.
            Err(e) => {
                assert_eq!(leftovers, [0]);
                assert_eq!(e.into_inner(), 1);
            }
        }
    });
}

#[test]
fn drop_with_a_push_in_progress_drops_each_item_once() {
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicUsize, Ordering};

    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = channel::<Counted>();
        tx.push(Counted(drops.clone()))
            .unwrap_or_else(|_| panic!("open"));
        let d = drops.clone();
        let h = thread::spawn(move || {
            // Accepted (dropped with the queue) or refused (dropped here).
            drop(tx.push(Counted(d)));
        });
        drop(rx);
        h.join().unwrap();
        assert_eq!(drops.load(Ordering::Relaxed), 2);
    });
}

/// A push whose `make` unwinds after claiming its slot (an abandoned
/// claim, which a drop guard tombstones), racing a drain and a reset: the
/// producer's next push is drained, returned by the reset or refused,
/// exactly once, and the reset gets past the abandoned slot (a wedged
/// queue would make it spin until loom's branch limit).
#[test]
fn abandoned_claim_is_skipped_by_drain_and_reset() {
    use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

    loom::model(|| {
        let (tx, mut rx) = channel::<u8>();
        tx.push(0).unwrap();
        let h = thread::spawn(move || {
            // `resume_unwind`: no panic hook, so nothing is printed per run.
            let made = catch_unwind(AssertUnwindSafe(|| {
                tx.push_with(|| -> u8 { resume_unwind(Box::new("make failed")) })
            }));
            assert!(made.is_err(), "the unwind of make reaches the caller");
            tx.push(1)
        });
        let mut drained = Vec::new();
        rx.drain_into(&mut drained);
        let mut leftovers = Vec::new();
        assert_eq!(rx.reset(&mut leftovers).get(), 1);
        let result = h.join().unwrap();
        let mut got = drained;
        got.extend(&leftovers);
        match result {
            Ok(()) => assert_eq!(got, [0, 1]),
            Err(e) => {
                assert_eq!(got, [0]);
                assert_eq!(e.into_inner(), 1);
            }
        }
        // The new generation sees only its own item.
        rx.sender().push(2).unwrap();
        let mut out = Vec::new();
        rx.drain_into(&mut out);
        assert_eq!(out, [2]);
    });
}

/// A queue made without its receiver: a producer pushes (across a block,
/// so the list grows before any receiver exists) while two threads race to
/// take the receiver, the winner draining. Exactly one receiver is made,
/// and it sees every item once, in order, whenever it started.
#[test]
fn a_receiver_taken_while_a_producer_pushes_sees_everything_once() {
    use stepsched_mpsc::Sender;
    loom::model(|| {
        let tx = Sender::<(u8, u8)>::without_receiver();
        let producer = {
            let tx = tx.clone();
            thread::spawn(move || {
                for i in 0..3 {
                    tx.push((0, i)).unwrap();
                }
            })
        };
        let rival = {
            let tx = tx.clone();
            thread::spawn(move || {
                tx.take_receiver().map(|mut rx| {
                    let mut seen = Vec::new();
                    rx.drain_into(&mut seen);
                    (rx, seen)
                })
            })
        };
        let mine = tx.take_receiver().map(|rx| (rx, Vec::new()));
        let theirs = rival.join().unwrap();
        producer.join().unwrap();
        let (mut rx, mut seen) = match (mine, theirs) {
            (Some(won), None) | (None, Some(won)) => won,
            _ => panic!("not exactly one receiver"),
        };
        rx.drain_into(&mut seen);
        assert_exactly_once_in_order(&seen, 1, 3);
    });
}
