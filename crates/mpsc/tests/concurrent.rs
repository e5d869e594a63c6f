//! Concurrent tests: per-item ledgers (each item seen exactly once), never
//! totals alone, and per-producer order.
#![cfg(not(stepsched_loom))]

use std::sync::{Barrier, Mutex};
use std::thread;

use stepsched_mpsc::{PushError, Receiver};

/// An item: (producer, sequence number within the producer).
type Item = (usize, usize);

/// Checks that the drained items hold `0..per_producer` of every producer
/// exactly once and in push order.
fn check_exactly_once_in_order(drained: &[Item], producers: usize, per_producer: usize) {
    let mut next = vec![0usize; producers];
    for &(p, i) in drained {
        assert!(p < producers, "unknown producer {p}");
        assert_eq!(
            i, next[p],
            "producer {p}: expected item {} but got {i}",
            next[p]
        );
        next[p] += 1;
    }
    for (p, n) in next.iter().enumerate() {
        assert_eq!(*n, per_producer, "producer {p}: items lost");
    }
}

fn run_round(rx: &mut Receiver<Item>, producers: usize, per_producer: usize, out: &mut Vec<Item>) {
    out.clear();
    let start = Barrier::new(producers + 1);
    thread::scope(|s| {
        for p in 0..producers {
            let tx = rx.sender();
            let start = &start;
            s.spawn(move || {
                start.wait();
                for i in 0..per_producer {
                    tx.push((p, i)).unwrap();
                }
            });
        }
        start.wait();
        // Drain while the producers run, until every item has arrived (the
        // count is only the stopping rule; the ledger below is the check).
        let total = producers * per_producer;
        while out.len() < total {
            if rx.drain_into(out) == 0 {
                thread::yield_now();
            }
        }
    });
    assert!(!rx.has_events());
    check_exactly_once_in_order(out, producers, per_producer);
}

#[test]
fn producers_items_drained_exactly_once_in_order() {
    let mut rx = Receiver::new();
    let mut out = Vec::new();
    for producers in [1, 2, 4, 8] {
        run_round(&mut rx, producers, 50_000, &mut out);
    }
}

#[test]
fn many_rounds_reuse_blocks_and_generations() {
    // The same queue for every round: blocks are recycled again and again,
    // across resets and the wrap of the 32-bit index space.
    let mut rx = Receiver::new();
    let mut out = Vec::new();
    let mut leftovers = Vec::new();
    for round in 0..200 {
        run_round(&mut rx, 1 + round % 4, 1 + (round * 7919) % 3_000, &mut out);
        if round % 3 == 0 {
            leftovers.clear();
            rx.reset(&mut leftovers);
            assert!(leftovers.is_empty());
        }
    }
}

#[test]
fn close_racing_pushes_loses_nothing() {
    let mut rx = Receiver::<Item>::new();
    let producers = 4;
    let per_producer = 20_000;
    for round in 0..20 {
        let close_after = round * 3_000;
        let start = Barrier::new(producers + 1);
        let mut drained = Vec::new();
        let refused: Vec<Vec<Item>> = thread::scope(|s| {
            let handles: Vec<_> = (0..producers)
                .map(|p| {
                    let tx = rx.sender();
                    let start = &start;
                    s.spawn(move || {
                        start.wait();
                        let mut refused = Vec::new();
                        for i in 0..per_producer {
                            match tx.push((p, i)) {
                                Ok(()) => assert!(refused.is_empty(), "accepted after refusal"),
                                Err(PushError::Closed(v)) => refused.push(v),
                                Err(e) => panic!("unexpected {e}"),
                            }
                        }
                        refused
                    })
                })
                .collect();
            start.wait();
            while drained.len() < close_after {
                if rx.drain_into(&mut drained) == 0 {
                    thread::yield_now();
                }
            }
            rx.close();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        // After the producers are done, everything accepted is drainable.
        rx.drain_into(&mut drained);
        assert!(!rx.has_events());
        // Ledger: every item exactly once, either drained or handed back;
        // per producer, the drained ones are a prefix in order.
        let mut seen = vec![vec![0u8; per_producer]; producers];
        let mut next = vec![0usize; producers];
        for &(p, i) in &drained {
            assert_eq!(i, next[p], "producer {p} out of order");
            next[p] += 1;
            seen[p][i] += 1;
        }
        for (p, r) in refused.iter().enumerate() {
            for &(q, i) in r {
                assert_eq!(q, p);
                seen[q][i] += 1;
            }
        }
        for (p, counts) in seen.iter().enumerate() {
            for (i, c) in counts.iter().enumerate() {
                assert_eq!(*c, 1, "item ({p}, {i}) seen {c} times");
            }
        }
        let mut leftovers = Vec::new();
        rx.reset(&mut leftovers);
        assert!(leftovers.is_empty());
    }
}

#[test]
fn stale_pushes_racing_reset_never_reach_the_new_generation() {
    // Items are (generation of the sender, id). Producers keep pushing while
    // the consumer resets again and again; they pick up the newest sender
    // every few pushes, so many pushes race a reset with a sender that is
    // just becoming stale. After each reset only the new generation's items
    // may be drained, and every item is accounted for exactly once: drained
    // in its generation, returned in that generation's leftovers, or handed
    // back to its producer.
    let mut rx = Receiver::<(u32, usize)>::new();
    let producers = 3;
    let per_producer = 30_000;
    let current = Mutex::new(rx.sender());
    let start = Barrier::new(producers + 1);
    let mut accounted = vec![0u8; producers * per_producer];
    let mut count = |id: usize| accounted[id] += 1;
    thread::scope(|s| {
        let handles: Vec<_> = (0..producers)
            .map(|p| {
                let (start, current) = (&start, &current);
                s.spawn(move || {
                    start.wait();
                    let mut refused = Vec::new();
                    let mut tx = current.lock().unwrap().clone();
                    for i in 0..per_producer {
                        if i % 16 == 0 {
                            tx = current.lock().unwrap().clone();
                        }
                        let g = tx.generation().get();
                        if let Err(e) = tx.push((g, p * per_producer + i)) {
                            refused.push(e.into_inner());
                        }
                    }
                    refused
                })
            })
            .collect();
        start.wait();
        let mut out = Vec::new();
        let mut leftovers = Vec::new();
        loop {
            let generation = rx.generation().get();
            let done = handles.iter().all(|h| h.is_finished());
            out.clear();
            rx.drain_into(&mut out);
            for v in &out {
                assert_eq!(
                    v.0, generation,
                    "an item of generation {} drained in {generation}",
                    v.0
                );
                count(v.1);
            }
            if done {
                break;
            }
            leftovers.clear();
            let next = rx.reset(&mut leftovers).get();
            *current.lock().unwrap() = rx.sender();
            for v in &leftovers {
                assert_eq!(v.0, generation, "leftovers belong to the ending generation");
                count(v.1);
            }
            assert_eq!(next, generation + 1);
        }
        for h in handles {
            for v in h.join().unwrap() {
                count(v.1);
            }
        }
    });
    for (id, c) in accounted.iter().enumerate() {
        assert_eq!(*c, 1, "item {id} seen {c} times");
    }
}
