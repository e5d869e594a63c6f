//! Property test: the queue against a `VecDeque` model, single-threaded,
//! over random sequences of push / drain / bounded drain / close / reset /
//! new sender.
#![cfg(not(stepsched_loom))]

use std::collections::VecDeque;

use proptest::prelude::*;
use stepsched_mpsc::{PushError, Receiver, Sender};

#[derive(Debug, Clone)]
enum Op {
    /// Push `count` values through sender number `sender` (modulo the
    /// senders made so far; old ones may be stale).
    Push {
        sender: usize,
        count: usize,
    },
    Drain,
    /// Drain at most this many.
    DrainUpTo(usize),
    Close,
    Reset,
    NewSender,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<usize>(), 1usize..80).prop_map(|(sender, count)| Op::Push { sender, count }),
        3 => Just(Op::Drain),
        3 => (0usize..100).prop_map(Op::DrainUpTo),
        1 => Just(Op::Close),
        1 => Just(Op::Reset),
        2 => Just(Op::NewSender),
    ]
}

/// The reference: a FIFO, a closed flag and a generation.
struct Model {
    items: VecDeque<u64>,
    closed: bool,
    generation: u32,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn matches_a_vecdeque_model(ops in prop::collection::vec(op(), 1..120)) {
        let mut rx = Receiver::<u64>::new();
        let mut senders: Vec<Sender<u64>> = vec![rx.sender()];
        let mut model = Model { items: VecDeque::new(), closed: false, generation: 0 };
        let mut next_value = 0u64;
        let mut out = Vec::new();
        for op in ops {
            match op {
                Op::Push { sender, count } => {
                    let tx = &senders[sender % senders.len()];
                    for _ in 0..count {
                        let v = next_value;
                        next_value += 1;
                        let got = tx.push(v);
                        let expected = if tx.generation().get() != model.generation {
                            Err(PushError::StaleGeneration(v))
                        } else if model.closed {
                            Err(PushError::Closed(v))
                        } else {
                            model.items.push_back(v);
                            Ok(())
                        };
                        prop_assert_eq!(got, expected);
                    }
                }
                Op::Drain => {
                    out.clear();
                    let n = rx.drain_into(&mut out);
                    prop_assert_eq!(n, out.len());
                    let expected: Vec<u64> = model.items.drain(..).collect();
                    prop_assert_eq!(&out, &expected);
                }
                Op::DrainUpTo(max) => {
                    out.clear();
                    let n = rx.drain_up_to(&mut out, max);
                    prop_assert_eq!(n, out.len());
                    let take = max.min(model.items.len());
                    let expected: Vec<u64> = model.items.drain(..take).collect();
                    prop_assert_eq!(&out, &expected);
                }
                Op::Close => {
                    rx.close();
                    model.closed = true;
                }
                Op::Reset => {
                    out.clear();
                    let g = rx.reset(&mut out);
                    let expected: Vec<u64> = model.items.drain(..).collect();
                    prop_assert_eq!(&out, &expected);
                    model.generation += 1;
                    model.closed = false;
                    prop_assert_eq!(g.get(), model.generation);
                }
                Op::NewSender => senders.push(rx.sender()),
            }
            prop_assert_eq!(rx.has_events(), !model.items.is_empty());
            prop_assert_eq!(rx.is_empty(), model.items.is_empty());
            prop_assert_eq!(rx.is_closed(), model.closed);
            prop_assert_eq!(rx.generation().get(), model.generation);
            for tx in &senders {
                let refused = tx.generation().get() != model.generation || model.closed;
                prop_assert_eq!(tx.is_closed(), refused);
            }
        }
        out.clear();
        rx.drain_into(&mut out);
        let expected: Vec<u64> = model.items.drain(..).collect();
        prop_assert_eq!(out, expected);
    }
}
