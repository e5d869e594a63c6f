//! Loom model of the one atomic protocol in the crate: concurrent
//! `PidAllocator::try_allocate` never hands out a number twice, including at
//! exhaustion.
//!
//! Run with `RUSTFLAGS="--cfg stepsched_loom" cargo test --release -p
//! stepsched-relay --features loom --test loom`.
#![cfg(stepsched_loom)]

use std::num::NonZeroU64;

use loom::sync::Arc;
use loom::thread;
use stepsched_relay::{Pid, PidAllocator};

#[test]
fn concurrent_allocations_are_unique() {
    loom::model(|| {
        let pids = Arc::new(PidAllocator::new(0));
        let other = Arc::clone(&pids);
        let h = thread::spawn(move || [other.allocate(), other.allocate()]);
        let mine = pids.allocate();
        let theirs = h.join().unwrap();
        let mut all = vec![mine, theirs[0], theirs[1]];
        all.sort();
        assert_eq!(all, [Pid::new(0, 1), Pid::new(0, 2), Pid::new(0, 3)]);
    });
}

#[test]
fn exhaustion_hands_out_the_last_number_once() {
    loom::model(|| {
        let last = NonZeroU64::new(u64::MAX - 1).unwrap();
        let pids = Arc::new(PidAllocator::starting_at(0, last));
        let other = Arc::clone(&pids);
        let h = thread::spawn(move || other.try_allocate());
        let mine = pids.try_allocate();
        let theirs = h.join().unwrap();
        let got: Vec<Pid> = [mine, theirs].into_iter().flatten().collect();
        assert_eq!(got, [Pid::new(0, u64::MAX - 1)]);
    });
}
