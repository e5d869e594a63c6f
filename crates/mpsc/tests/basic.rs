//! Single-threaded behaviour of the public API.
#![cfg(not(stepsched_loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use stepsched_mpsc::{PushError, Receiver, Sender, channel};

#[test]
fn drains_in_push_order_across_many_blocks() {
    let (tx, mut rx) = channel();
    let mut out = Vec::new();
    let mut next_expected = 0u64;
    let mut next = 0u64;
    // Uneven batch sizes so drains stop at every offset of a block, and
    // enough rounds to go round the recycled blocks many times.
    for round in 0..2_000u64 {
        for _ in 0..(round % 77) {
            tx.push(next).unwrap();
            next += 1;
        }
        assert_eq!(rx.has_events(), round % 77 != 0);
        out.clear();
        let n = rx.drain_into(&mut out);
        assert_eq!(n, out.len());
        for v in &out {
            assert_eq!(*v, next_expected);
            next_expected += 1;
        }
        assert!(rx.is_empty());
    }
    assert_eq!(next, next_expected);
}

#[test]
fn drain_appends_and_keeps_capacity() {
    let (tx, mut rx) = channel();
    let mut out = vec![100];
    tx.push(1).unwrap();
    tx.push(2).unwrap();
    assert_eq!(rx.drain_into(&mut out), 2);
    assert_eq!(out, [100, 1, 2]);
    let cap = out.capacity();
    out.clear();
    assert_eq!(rx.drain_into(&mut out), 0);
    assert_eq!(out.capacity(), cap);
}

#[test]
fn close_refuses_later_pushes_but_keeps_earlier_ones() {
    let (tx, mut rx) = channel();
    tx.push("a").unwrap();
    tx.push("b").unwrap();
    assert!(!rx.is_closed());
    rx.close();
    rx.close(); // idempotent
    assert!(rx.is_closed());
    assert!(tx.is_closed());
    assert_eq!(tx.push("c"), Err(PushError::Closed("c")));
    assert_eq!(rx.sender().push("d"), Err(PushError::Closed("d")));
    let mut out = Vec::new();
    rx.drain_into(&mut out);
    assert_eq!(out, ["a", "b"]);
    assert!(!rx.has_events());
}

#[test]
fn reset_bumps_generation_and_refuses_stale_senders() {
    let (old, mut rx) = channel();
    assert_eq!(old.generation().get(), 0);
    assert_eq!(rx.generation().get(), 0);
    old.push(1).unwrap();
    old.push(2).unwrap();
    let mut leftovers = Vec::new();
    let g = rx.reset(&mut leftovers);
    assert_eq!(leftovers, [1, 2]);
    assert_eq!(g.get(), 1);
    assert_eq!(rx.generation(), g);
    assert!(!rx.is_closed());
    assert!(old.is_closed());
    assert_eq!(old.push(3), Err(PushError::StaleGeneration(3)));
    let new = rx.sender();
    assert_eq!(new.generation(), g);
    new.push(4).unwrap();
    let mut out = Vec::new();
    rx.drain_into(&mut out);
    assert_eq!(out, [4]);

    // A reset of a queue closed earlier also works, and the stale check wins
    // over the closed check.
    rx.close();
    assert_eq!(new.push(5), Err(PushError::Closed(5)));
    leftovers.clear();
    let g2 = rx.reset(&mut leftovers);
    assert!(leftovers.is_empty());
    assert_eq!(g2.get(), 2);
    assert_eq!(new.push(6), Err(PushError::StaleGeneration(6)));
    assert_eq!(old.push(7), Err(PushError::StaleGeneration(7)));
    rx.sender().push(8).unwrap();
    out.clear();
    rx.drain_into(&mut out);
    assert_eq!(out, [8]);
}

#[test]
fn many_resets_keep_working() {
    let mut rx = Receiver::new();
    let mut leftovers = Vec::new();
    for round in 0..500u32 {
        let tx = rx.sender();
        for i in 0..(round % 40) {
            tx.push(i).unwrap();
        }
        leftovers.clear();
        let g = rx.reset(&mut leftovers);
        assert_eq!(g.get(), round + 1);
        assert_eq!(leftovers, (0..round % 40).collect::<Vec<_>>());
        assert!(tx.push(0).unwrap_err().is_stale());
    }
}

#[test]
fn errors_give_the_value_back_and_describe_the_cause() {
    let closed: PushError<String> = PushError::Closed("x".to_owned());
    let stale: PushError<String> = PushError::StaleGeneration("y".to_owned());
    assert!(closed.is_closed() && !closed.is_stale());
    assert!(stale.is_stale() && !stale.is_closed());
    assert_eq!(closed.to_string(), "push on a closed event queue");
    assert!(stale.to_string().contains("stale generation"));
    assert_eq!(format!("{closed:?}"), "Closed(..)");
    assert_eq!(format!("{stale:?}"), "StaleGeneration(..)");
    let as_error: &dyn std::error::Error = &closed;
    assert!(as_error.source().is_none());
    assert_eq!(closed.into_inner(), "x");
    assert_eq!(stale.into_inner(), "y");
}

#[test]
fn handles_are_send_and_sender_is_sync() {
    fn send<T: Send>() {}
    fn sync<T: Sync>() {}
    send::<Sender<Vec<u8>>>();
    sync::<Sender<Vec<u8>>>();
    send::<Receiver<Vec<u8>>>();
    // `Receiver: !Sync` is checked by a compile_fail doctest on `Receiver`.
}

#[test]
fn debug_output_names_the_state() {
    let (tx, mut rx) = channel::<u8>();
    tx.push(1).unwrap();
    assert_eq!(format!("{tx:?}"), "Sender { generation: 0, closed: false }");
    assert_eq!(
        format!("{rx:?}"),
        "Receiver { generation: 0, closed: false, has_events: true }"
    );
    rx.close();
    assert_eq!(format!("{tx:?}"), "Sender { generation: 0, closed: true }");
}

/// A value that records its drops in a per-item ledger.
struct Tracked {
    id: usize,
    ledger: Arc<Vec<AtomicUsize>>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.ledger[self.id].fetch_add(1, Ordering::SeqCst);
    }
}

fn ledger(n: usize) -> Arc<Vec<AtomicUsize>> {
    Arc::new((0..n).map(|_| AtomicUsize::new(0)).collect())
}

fn assert_each_dropped_once(ledger: &[AtomicUsize]) {
    for (id, count) in ledger.iter().enumerate() {
        assert_eq!(
            count.load(Ordering::SeqCst),
            1,
            "item {id} dropped the wrong number of times"
        );
    }
}

#[test]
fn every_item_is_dropped_exactly_once() {
    // Drained, refused, left in the queue at drop, left behind by reset:
    // each path drops each item once. Both drop orders of the handles.
    for receiver_first in [false, true] {
        const N: usize = 1_000;
        let drops = ledger(N);
        let item = |id| Tracked {
            id,
            ledger: Arc::clone(&drops),
        };
        let (tx, mut rx) = channel();
        let mut out = Vec::new();
        for id in 0..300 {
            tx.push(item(id)).unwrap_or_else(|_| panic!("open"));
        }
        rx.drain_into(&mut out);
        drop(out); // 0..300 dropped by the caller
        for id in 300..500 {
            tx.push(item(id)).unwrap_or_else(|_| panic!("open"));
        }
        let mut leftovers = Vec::new();
        rx.reset(&mut leftovers);
        assert_eq!(leftovers.len(), 200);
        drop(leftovers); // 300..500
        let err = tx.push(item(500)).unwrap_err(); // stale: handed back
        drop(err.into_inner());
        let tx2 = rx.sender();
        for id in 501..900 {
            tx2.push(item(id)).unwrap_or_else(|_| panic!("open"));
        }
        // 501..900 stay in the queue; 900.. are pushed after the receiver
        // is gone (refused) or before, depending on the order.
        if receiver_first {
            drop(rx);
            for id in 900..N {
                let err = tx2.push(item(id)).unwrap_err();
                assert!(err.is_closed());
            }
            drop(tx);
            drop(tx2);
        } else {
            for id in 900..N {
                tx2.push(item(id)).unwrap_or_else(|_| panic!("open"));
            }
            drop(tx);
            drop(tx2);
            drop(rx);
        }
        assert_each_dropped_once(&drops);
    }
}

#[test]
fn zero_sized_values_are_counted() {
    let (tx, mut rx) = channel::<()>();
    for _ in 0..1_000 {
        tx.push(()).unwrap();
    }
    let mut out = Vec::new();
    assert_eq!(rx.drain_into(&mut out), 1_000);
    assert_eq!(out.len(), 1_000);
}

#[test]
fn a_queue_made_without_its_receiver_hands_it_out_once() {
    let tx = Sender::without_receiver();
    let other = tx.clone();
    for i in 0..20u32 {
        tx.push(i).unwrap();
    }
    let mut rx = other.take_receiver().expect("the first take");
    assert!(tx.take_receiver().is_none(), "a second receiver");
    assert!(other.take_receiver().is_none(), "a second receiver");
    let mut out = Vec::new();
    rx.drain_into(&mut out);
    assert_eq!(
        out,
        (0..20).collect::<Vec<_>>(),
        "the receiver starts at the start"
    );
    rx.close();
    assert!(tx.push(20).unwrap_err().is_closed());
    // A queue made with its receiver has none to give.
    let (tx, _rx) = channel::<u8>();
    assert!(tx.take_receiver().is_none());
}

#[test]
fn values_in_a_queue_whose_receiver_was_never_made_are_dropped_once() {
    const N: usize = 100;
    let drops = ledger(N);
    let tx = Sender::without_receiver();
    for id in 0..N {
        tx.push(Tracked {
            id,
            ledger: Arc::clone(&drops),
        })
        .unwrap_or_else(|_| panic!("open"));
    }
    let copy = tx.clone();
    drop(tx);
    assert_eq!(
        drops[0].load(Ordering::SeqCst),
        0,
        "dropped while a sender lives"
    );
    drop(copy);
    assert_each_dropped_once(&drops);
}

#[test]
fn a_sender_round_trips_through_its_raw_form() {
    let (tx, mut rx) = channel::<u32>();
    let raw = tx.clone().into_raw();
    assert_eq!(raw.as_ptr() as usize % 8, 0, "the low three bits are free");
    {
        // SAFETY: from `into_raw` above; never dropped, so not taken back.
        let borrowed = std::mem::ManuallyDrop::new(unsafe { Sender::<u32>::from_raw(raw) });
        borrowed.push(1).unwrap();
    }
    // SAFETY: from `into_raw` above, taken back once.
    let back = unsafe { Sender::<u32>::from_raw(raw) };
    back.push(2).unwrap();
    drop(back);
    tx.push(3).unwrap();
    let mut out = Vec::new();
    rx.drain_into(&mut out);
    assert_eq!(out, [1, 2, 3]);
    // A later generation has no raw form.
    rx.reset(&mut Vec::new());
    let later = rx.sender();
    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| later.into_raw()));
    assert!(refused.is_err(), "a generation-1 sender was turned raw");
}

#[test]
fn a_receiver_round_trips_through_its_raw_form() {
    let (tx, rx) = channel::<u32>();
    let raw = rx.into_raw();
    assert_eq!(raw, tx.clone().into_raw(), "one address for both ends");
    // SAFETY: the sender's raw form just made; taken back once.
    drop(unsafe { Sender::<u32>::from_raw(raw) });
    tx.push(1).unwrap();
    let mut out = Vec::new();
    {
        // SAFETY: from `into_raw` above; never dropped, so not taken back,
        // and the only receiver in use.
        let mut borrowed = std::mem::ManuallyDrop::new(unsafe { Receiver::<u32>::from_raw(raw) });
        borrowed.drain_into(&mut out);
    }
    tx.push(2).unwrap();
    // SAFETY: from `into_raw` above, taken back once.
    let mut rx = unsafe { Receiver::<u32>::from_raw(raw) };
    rx.drain_into(&mut out);
    assert_eq!(out, [1, 2], "the state is the queue's, not the handle's");
    drop(rx);
    assert!(
        tx.push(3).unwrap_err().is_closed(),
        "dropping the receiver closes"
    );
}
