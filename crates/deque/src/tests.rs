//! Unit, model and concurrent tests of the deque (std build).
//!
//! Concurrent tests check a per-item ledger — every id taken exactly once
//! and dropped exactly once — never totals alone, so a duplicate and a loss
//! cannot cancel out.
#![cfg(not(stepsched_loom))]

use super::*;
use std::collections::VecDeque;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::thread;

use proptest::prelude::*;

/// Takes everything a steal result and the thief's own deque hold.
fn drain_into_vec<T>(first: Steal<T>, mine: &Worker<T>, out: &mut Vec<T>) {
    if let Steal::Success(x) = first {
        out.push(x);
    }
    while let Some(x) = mine.pop() {
        out.push(x);
    }
}

/// A ledger of ids: each slot counts how often the id was taken.
struct Ledger(Vec<AtomicU8>);

impl Ledger {
    fn new(n: usize) -> Self {
        Ledger((0..n).map(|_| AtomicU8::new(0)).collect())
    }
    fn take(&self, id: usize) {
        let before = self.0[id].fetch_add(1, SeqCst);
        assert_eq!(before, 0, "item {id} handed out twice");
    }
    fn assert_all_once(&self) {
        for (id, c) in self.0.iter().enumerate() {
            assert_eq!(
                c.load(SeqCst),
                1,
                "item {id} taken {} times",
                c.load(SeqCst)
            );
        }
    }
}

/// An item that records its drop in a ledger of drops.
struct Tracked<'a> {
    id: usize,
    drops: &'a Ledger,
}

impl Drop for Tracked<'_> {
    fn drop(&mut self) {
        self.drops.take(self.id);
    }
}

#[test]
fn smoke() {
    let w = Worker::new();
    let s = w.stealer();
    assert_eq!(w.pop(), None);
    assert_eq!(s.steal(), Steal::Empty);
    w.push(1);
    w.push(2);
    w.push(3);
    assert_eq!(w.len(), 3);
    assert_eq!(s.len(), 3);
    assert_eq!(s.steal(), Steal::Success(1));
    assert_eq!(w.pop(), Some(3));
    assert_eq!(w.pop(), Some(2));
    assert_eq!(w.pop(), None);
    assert!(w.is_empty() && s.is_empty());
    w.push(4);
    assert_eq!(s.steal(), Steal::Success(4));
    assert_eq!(s.steal(), Steal::Empty);
}

#[test]
fn steal_from_empty() {
    let w = Worker::<u32>::new();
    let s = w.stealer();
    let mine = Worker::new();
    assert!(s.steal().is_empty());
    assert!(s.steal_half_into(&mine).is_empty());
    assert!(mine.is_empty());
    w.push(1);
    assert_eq!(w.pop(), Some(1));
    assert!(s.steal().is_empty());
    assert!(s.steal_half_into(&mine).is_empty());
}

#[test]
fn growth_keeps_order_and_items() {
    let w = Worker::with_capacity(2);
    let s = w.stealer();
    for i in 0..1000 {
        w.push(i);
    }
    assert_eq!(w.len(), 1000);
    for i in 0..10 {
        assert_eq!(s.steal(), Steal::Success(i));
    }
    for i in (10..1000).rev() {
        assert_eq!(w.pop(), Some(i));
    }
    assert_eq!(w.pop(), None);
}

/// The owner reads the word only when its own bounds say the ring is full
/// or the deque empty. After thieves took items it never saw go, a push
/// that finds the ring full by its bounds reads the word again, reuses the
/// freed slots without growing, and every item left is still popped.
#[test]
fn owner_catches_up_with_thieves_it_did_not_see() {
    let w = Worker::with_capacity(4);
    let s = w.stealer();
    for i in 0..4 {
        w.push(i);
    }
    let mine = Worker::new();
    assert_eq!(s.steal_half_into(&mine), Steal::Success(0));
    assert_eq!(mine.pop(), Some(1));
    // The owner's bounds still count four slots in use: this push reads
    // the word, finds two free, and writes slot 0 again.
    w.push(4);
    // SAFETY: the owner's ring pointer is live; a read of its length only.
    let cap = unsafe { (*w.buffer.get()).cap() };
    assert_eq!(cap, 4, "grew instead of reusing");
    assert_eq!(w.pop(), Some(4));
    assert_eq!(w.pop(), Some(3));
    assert_eq!(w.pop(), Some(2));
    assert_eq!(w.pop(), None);
    // A thief empties the deque: the owner's first pop finds out with its
    // fence, and its next pops without touching the word.
    w.push(5);
    assert_eq!(s.steal(), Steal::Success(5));
    assert_eq!(w.pop(), None);
    assert_eq!(w.seen_top.get(), w.bottom(), "the pop did not catch up");
    assert_eq!(w.pop(), None);
    w.push(6);
    assert_eq!(w.pop(), Some(6));
}

#[test]
fn steal_half_count_sweep() {
    // For every size 0..capacity, steal_half_into takes ceil(n/2), capped
    // by the limit, in FIFO order; the rest stays with the victim.
    for limit in [1usize, 4, DEFAULT_STEAL_LIMIT] {
        for n in 0..128usize {
            let w = Worker::with_capacity(128);
            for i in 0..n {
                w.push(i);
            }
            let mine = Worker::new();
            let got = w.stealer().steal_half_into_with_limit(&mine, limit);
            let expected = n.div_ceil(2).min(limit);
            match got {
                Steal::Success(first) => {
                    assert_eq!(first, 0);
                    assert_eq!(mine.len() + 1, expected, "n={n} limit={limit}");
                    // The thief's deque holds 1..expected; popping is LIFO.
                    for i in (1..expected).rev() {
                        assert_eq!(mine.pop(), Some(i));
                    }
                }
                Steal::Empty => assert_eq!(n, 0),
                Steal::Retry => panic!("no race, no retry"),
            }
            assert_eq!(w.len(), n - expected);
            for i in (expected..n).rev() {
                assert_eq!(w.pop(), Some(i));
            }
        }
    }
}

#[test]
fn default_limit_is_32() {
    let w = Worker::new();
    for i in 0..1000 {
        w.push(i);
    }
    let mine = Worker::new();
    assert_eq!(w.stealer().steal_half_into(&mine), Steal::Success(0));
    assert_eq!(mine.len(), DEFAULT_STEAL_LIMIT - 1);
    assert_eq!(w.len(), 1000 - DEFAULT_STEAL_LIMIT);
}

#[test]
fn steal_half_into_grows_destination() {
    let w = Worker::new();
    for i in 0..64 {
        w.push(i);
    }
    let mine = Worker::with_capacity(2);
    mine.push(-1);
    assert_eq!(w.stealer().steal_half_into(&mine), Steal::Success(0));
    assert_eq!(mine.len(), 32);
    for i in (1..32).rev() {
        assert_eq!(mine.pop(), Some(i));
    }
    assert_eq!(mine.pop(), Some(-1));
}

#[test]
fn steal_half_into_self() {
    let w = Worker::with_capacity(4);
    for i in 0..4 {
        w.push(i);
    }
    assert_eq!(w.stealer().steal_half_into(&w), Steal::Success(0));
    let mut rest = Vec::new();
    while let Some(x) = w.pop() {
        rest.push(x);
    }
    rest.sort();
    assert_eq!(rest, vec![1, 2, 3]);
}

#[test]
fn index_wrap_around() {
    // Start the 28-bit counters just below their wrap and run a mixed
    // sequence through it, checking every result against a model.
    let w = Worker::with_capacity_at(4, IDX_MASK - 20);
    let s = w.stealer();
    let mine = Worker::new();
    let mut model = VecDeque::new();
    let mut next = 0u32;
    for round in 0..60u32 {
        for _ in 0..(round % 5 + 1) {
            w.push(next);
            model.push_back(next);
            next += 1;
        }
        assert_eq!(w.len(), model.len());
        let n = model.len().div_ceil(2).min(DEFAULT_STEAL_LIMIT);
        let first = s.steal_half_into(&mine).success();
        assert_eq!(first, model.pop_front());
        let mut batch: Vec<u32> = (1..n).map(|_| model.pop_front().unwrap()).collect();
        while let Some(x) = mine.pop() {
            assert_eq!(Some(x), batch.pop());
        }
        assert!(batch.is_empty());
        if round % 3 == 0 {
            assert_eq!(w.pop(), model.pop_back());
        }
        assert_eq!(s.len(), model.len());
    }
    while let Some(x) = model.pop_back() {
        assert_eq!(w.pop(), Some(x));
    }
    assert_eq!(w.pop(), None);
}

/// What `steal_half_with_window` leaves: the deque, its stealer, the
/// steal's result, the thief's deque, and the ids the owner's window took.
struct Windowed {
    w: std::rc::Rc<Worker<usize>>,
    s: Stealer<usize>,
    r: Steal<usize>,
    mine: Worker<usize>,
    taken: Vec<usize>,
}

/// A steal-half from a deque holding ids `0..n` (a ring of `cap` slots)
/// whose hook point `at` runs the owner's `window` once, on the thief's
/// thread.
fn steal_half_with_window(
    cap: usize,
    n: usize,
    at: hook::Point,
    window: impl FnOnce(&Worker<usize>) -> Vec<usize> + 'static,
) -> Windowed {
    use std::cell::RefCell;
    use std::rc::Rc;
    let w = Rc::new(Worker::with_capacity(cap));
    for id in 0..n {
        w.push(id);
    }
    let s = w.stealer();
    let taken = Rc::new(RefCell::new(Vec::new()));
    {
        let (w, taken) = (w.clone(), taken.clone());
        let mut window = Some(window);
        hook::set(Some(Box::new(move |point| {
            if point == at
                && let Some(window) = window.take()
            {
                taken.borrow_mut().extend(window(&w));
            }
        })));
    }
    let mine = Worker::new();
    let r = s.steal_half_into(&mine);
    hook::set(None);
    let taken = Rc::try_unwrap(taken).unwrap().into_inner();
    Windowed {
        w,
        s,
        r,
        mine,
        taken,
    }
}

/// Runs a steal-half whose claim window (hook point `at`) contains an owner
/// that pops three of the four items the thief saw, then pops the last one
/// and pushes it back until its pop count has wrapped to the value the
/// thief read: the deque then holds one item where the thief saw four.
/// Returns every id handed out, by the thief and by the owner.
///
/// Under a reservation, the first two pops leave it alone (a claim of half
/// of at most four items cannot reach them); the third and every pop of the
/// last item can be reached, so each fails the claim and counts.
fn steal_across_pop_wrap(at: hook::Point) -> Vec<usize> {
    let Windowed {
        w,
        s,
        r,
        mine,
        mut taken,
    } = steal_half_with_window(4, 4, at, |w| {
        let taken: Vec<usize> = (0..3).filter_map(|_| w.pop()).collect();
        // Under a reservation the third pop counted once; with these,
        // 2^IDX_BITS counted pops in all, the pop count's period.
        for _ in 0..(1u32 << IDX_BITS) - 1 {
            let last = w.pop();
            assert_eq!(last, Some(0));
            w.push(0);
        }
        taken
    });
    drain_into_vec(r, &mine, &mut taken);
    // Bounded: a deque corrupted by a stale claim may never report empty.
    for _ in 0..4 {
        taken.extend(w.pop());
    }
    let intact = {
        let mut sorted = taken.clone();
        sorted.sort_unstable();
        sorted == [0, 1, 2, 3]
    };
    if !intact {
        // A corrupted deque must not be dropped: its drop walks from `top`
        // to `bottom`, which a stale claim put in the wrong order.
        std::mem::forget(s);
        std::mem::forget(w);
    }
    taken
}

#[test]
fn pop_count_wrap_during_claim() {
    // The thief's claim must not succeed with the batch size it computed
    // before the owner's pop count went all the way round.
    let mut taken = steal_across_pop_wrap(hook::Point::BeforeClaim);
    taken.sort_unstable();
    assert_eq!(taken, [0, 1, 2, 3], "an item was handed out twice or lost");
}

#[test]
fn pop_count_wrap_before_reservation() {
    // The same wrap before the reservation: the reservation's CAS succeeds
    // on the word that came round, and the claim, computed after it, takes
    // only what is there.
    let mut taken = steal_across_pop_wrap(hook::Point::BeforeReserve);
    taken.sort_unstable();
    assert_eq!(taken, [0, 1, 2, 3], "an item was handed out twice or lost");
}

/// Runs a steal-half of six items whose claim window (after the thief
/// read `bottom` = 6, so it claims ids 0, 1 and 2) contains the owner's
/// `window`. Returns the steal's result, what it moved into the thief's
/// deque, and the ids the owner took.
fn steal_half_around(
    window: impl FnOnce(&Worker<usize>) -> Vec<usize> + 'static,
) -> (Steal<usize>, Vec<usize>, Vec<usize>) {
    let Windowed {
        w,
        r,
        mine,
        mut taken,
        ..
    } = steal_half_with_window(8, 6, hook::Point::BeforeClaim, window);
    let mut moved = Vec::new();
    while let Some(x) = mine.pop() {
        moved.push(x);
    }
    while let Some(x) = w.pop() {
        taken.push(x);
    }
    (r, moved, taken)
}

#[test]
fn a_pop_out_of_reach_of_a_pending_claim_leaves_it_alone() {
    // The thief claims at most 3 of the 6 items it saw: the owner's pops of
    // ids 5, 4 and 3, and a push and pop above them, cannot be reached, so
    // the claim goes through.
    let (r, moved, taken) = steal_half_around(|w| {
        let mut got: Vec<usize> = (0..3).filter_map(|_| w.pop()).collect();
        w.push(6);
        got.extend(w.pop());
        got
    });
    assert_eq!(
        r,
        Steal::Success(0),
        "a pop out of the claim's reach failed it"
    );
    assert_eq!(moved, [2, 1]);
    assert_eq!(taken, [5, 4, 3, 6]);
}

#[test]
fn a_pop_a_pending_claim_can_reach_fails_it() {
    // The fourth pop takes id 2, which the thief's claim of 3 would cover:
    // that pop must fail the claim, though the deque held at most 4 items
    // at any pop after a push of two more that were popped again.
    let (r, moved, taken) = steal_half_around(|w| {
        let mut got: Vec<usize> = (0..3).filter_map(|_| w.pop()).collect();
        w.push(6);
        w.push(7);
        got.extend(w.pop());
        got.extend(w.pop());
        got.extend(w.pop());
        got
    });
    assert_eq!(r, Steal::Retry, "a pop the claim could reach let it be");
    assert!(moved.is_empty());
    assert_eq!(taken, [5, 4, 3, 7, 6, 2, 1, 0]);
}

/// How many replaced rings the deque keeps (see `reclaim`).
fn kept_rings<T>(w: &Worker<T>) -> usize {
    // SAFETY: the owner's thread, between its calls: nothing else touches
    // the list.
    w.inner.retired.with(|list| unsafe { (*list).len() })
}

#[test]
fn rings_replaced_under_a_reservation_are_kept_until_a_growth_sees_none() {
    // The owner grows a two-slot ring twice (2 → 4 → 8) while the thief
    // holds the claim reservation (it has read `bottom` 2 already): the
    // thief may still load either old ring, so both are kept. Its claim, of
    // one item, is then read from the new ring. The
    // next growth, with no claim in flight, frees both and the ring it
    // replaces at once.
    let Windowed {
        w, r, mine, taken, ..
    } = steal_half_with_window(2, 2, hook::Point::BeforeClaim, |w| {
        for id in 2..6 {
            w.push(id);
        }
        Vec::new()
    });
    assert_eq!(r, Steal::Success(0));
    assert_eq!(
        kept_rings(&w),
        2,
        "a ring a reserving thief may load was freed"
    );
    assert!(taken.is_empty());
    let mut all = vec![0];
    while let Some(id) = mine.pop() {
        all.push(id);
    }
    assert_eq!(all.len(), 1, "the claim covers half of the two items seen");
    for id in 6..12 {
        w.push(id);
    }
    assert_eq!(
        kept_rings(&w),
        0,
        "a growth with no claim in flight kept rings"
    );
    while let Some(id) = w.pop() {
        all.push(id);
    }
    all.sort_unstable();
    assert_eq!(all, (0..12).collect::<Vec<_>>());
}

#[test]
fn stealer_len_is_a_real_length() {
    // Between the stealer's reads, the owner pushes and pops in bursts of
    // four above an item at rest: the deque never holds more than five
    // items, and always the one at rest.
    use std::rc::Rc;
    let w = Rc::new(Worker::with_capacity(8));
    w.push(usize::MAX);
    let s = w.stealer();
    {
        let w = w.clone();
        let mut fired = false;
        hook::set(Some(Box::new(move |point| {
            if point != hook::Point::BetweenLoads || fired {
                return;
            }
            fired = true;
            for round in 0..100 {
                for i in 0..4 {
                    w.push(round * 4 + i);
                }
                for _ in 0..4 {
                    assert!(w.pop().is_some());
                }
            }
        })));
    }
    let len = s.len();
    let empty = s.is_empty();
    hook::set(None);
    assert!(
        (1..=5).contains(&len),
        "len {len}, the deque held 1 to 5 items"
    );
    assert!(!empty);
}

#[test]
fn destructors() {
    // Items left in the deque are dropped exactly once when the last handle
    // goes, including after growth and steals, whichever handle goes last.
    for stealer_last in [false, true] {
        let drops = Ledger::new(1000);
        {
            let w = Worker::with_capacity(4);
            let s = w.stealer();
            for id in 0..1000 {
                w.push(Tracked { id, drops: &drops });
            }
            let mine = Worker::new();
            let mut taken = Vec::new();
            drain_into_vec(s.steal_half_into(&mine), &mine, &mut taken);
            taken.extend(s.steal().success());
            taken.extend(w.pop());
            assert_eq!(taken.len(), DEFAULT_STEAL_LIMIT + 2);
            drop(taken);
            if stealer_last {
                drop(w);
                drop(s);
            } else {
                drop(s);
                drop(w);
            }
        }
        drops.assert_all_once();
    }
}

#[test]
fn len_never_empty_at_rest() {
    // The owner pushes and pops one item at a time while an item stays at
    // rest at the top; observers must never see the deque empty.
    let w = Worker::new();
    w.push(usize::MAX);
    let s = w.stealer();
    let stop = AtomicBool::new(false);
    thread::scope(|scope| {
        let observers: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                let stop = &stop;
                scope.spawn(move || {
                    let mut checks = 0u64;
                    while !stop.load(SeqCst) {
                        assert!(!s.is_empty(), "empty while an item is at rest");
                        assert_ne!(s.len(), 0);
                        checks += 1;
                    }
                    checks
                })
            })
            .collect();
        for i in 0..200_000 {
            w.push(i);
            assert!(!w.is_empty());
            assert_eq!(w.pop(), Some(i));
            assert_eq!(w.len(), 1);
        }
        stop.store(true, SeqCst);
        for o in observers {
            o.join().unwrap();
        }
    });
    assert_eq!(w.pop(), Some(usize::MAX));
}

#[test]
fn spsc() {
    // One thief sees the items in push order.
    const N: usize = 100_000;
    let w = Worker::new();
    let s = w.stealer();
    thread::scope(|scope| {
        scope.spawn(move || {
            let mut expected = 0;
            while expected < N {
                match s.steal() {
                    Steal::Success(x) => {
                        assert_eq!(x, expected);
                        expected += 1;
                    }
                    Steal::Empty | Steal::Retry => std::hint::spin_loop(),
                }
            }
        });
        for i in 0..N {
            w.push(i);
        }
    });
}

/// The core concurrent test: one owner pushing and popping while thieves
/// steal and steal half. Each item is a `Box` with a unique id; every id is
/// received exactly once and dropped exactly once.
fn owner_vs_thieves(thieves: usize, n: usize, pop_every: usize, limit: usize) {
    let taken = Ledger::new(n);
    let drops = Ledger::new(n);
    let w = Worker::with_capacity(4);
    let done = AtomicBool::new(false);
    let start = Barrier::new(thieves + 1);
    let per_thief = thread::scope(|scope| {
        let handles: Vec<_> = (0..thieves)
            .map(|t| {
                let s = w.stealer();
                let (taken, done, start) = (&taken, &done, &start);
                scope.spawn(move || {
                    let mine = Worker::with_capacity(2);
                    let mut count = 0usize;
                    start.wait();
                    loop {
                        let finished = done.load(SeqCst);
                        let r = if (count + t).is_multiple_of(3) {
                            s.steal()
                        } else {
                            s.steal_half_into_with_limit(&mine, limit)
                        };
                        let mut got = Vec::new();
                        let empty = r.is_empty();
                        drain_into_vec(r, &mine, &mut got);
                        for item in got {
                            let item: Box<Tracked<'_>> = item;
                            taken.take(item.id);
                            count += 1;
                            drop(item);
                        }
                        if finished && empty {
                            break count;
                        }
                    }
                })
            })
            .collect();
        start.wait();
        let mut own = 0usize;
        for id in 0..n {
            w.push(Box::new(Tracked { id, drops: &drops }));
            if id % pop_every == 0
                && let Some(item) = w.pop()
            {
                taken.take(item.id);
                own += 1;
            }
        }
        // Pop the rest while thieves keep stealing.
        while let Some(item) = w.pop() {
            taken.take(item.id);
            own += 1;
        }
        done.store(true, SeqCst);
        let counts: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        (own, counts)
    });
    taken.assert_all_once();
    drops.assert_all_once();
    let (own, counts) = per_thief;
    assert_eq!(own + counts.iter().sum::<usize>(), n);
}

#[test]
fn stress() {
    owner_vs_thieves(3, 200_000, 3, DEFAULT_STEAL_LIMIT);
}

#[test]
fn stampede() {
    // The owner pops as often as it pushes against many thieves.
    owner_vs_thieves(6, 100_000, 1, 8);
}

#[test]
fn no_starvation() {
    // With a steady supply, every thief gets items.
    const N: usize = 200_000;
    const THIEVES: usize = 3;
    let w = Worker::new();
    let got: Vec<AtomicUsize> = (0..THIEVES).map(|_| AtomicUsize::new(0)).collect();
    let done = AtomicBool::new(false);
    thread::scope(|scope| {
        for (t, counter) in got.iter().enumerate() {
            let s = w.stealer();
            let done = &done;
            scope.spawn(move || {
                let mine = Worker::new();
                while !done.load(SeqCst) {
                    let r = if t % 2 == 0 {
                        s.steal()
                    } else {
                        s.steal_half_into(&mine)
                    };
                    if r.is_success() {
                        counter.fetch_add(1, SeqCst);
                    }
                    while mine.pop().is_some() {
                        counter.fetch_add(1, SeqCst);
                    }
                }
            });
        }
        // Keep feeding until every thief has had something; the loop is
        // bounded by N pushes of real work and then waits on the counters.
        let mut pushed = 0;
        while got.iter().any(|c| c.load(SeqCst) == 0) {
            if w.len() < 64 && pushed < N {
                w.push(pushed);
                pushed += 1;
            } else if pushed >= N {
                // Re-feed: the thieves must still make progress eventually.
                w.push(pushed);
                pushed += 1;
            } else {
                thread::yield_now();
            }
        }
        done.store(true, SeqCst);
    });
    for (t, c) in got.iter().enumerate() {
        assert!(c.load(SeqCst) > 0, "thief {t} starved");
    }
}

#[test]
fn chained_steal() {
    // A steals from B while C steals from A; every item is seen once.
    const N: usize = 100_000;
    let ledger = Ledger::new(N);
    let b = Worker::new();
    let b_done = AtomicBool::new(false);
    let a_done = AtomicBool::new(false);
    thread::scope(|scope| {
        let sb = b.stealer();
        let (ledger_ref, b_done_ref, a_done_ref) = (&ledger, &b_done, &a_done);
        let (tx, rx) = std::sync::mpsc::channel();
        // A: steals half from B into its own deque, pops some of it itself.
        scope.spawn(move || {
            let a = Worker::with_capacity(2);
            tx.send(a.stealer()).unwrap();
            let mut turn = 0u32;
            loop {
                let finished = b_done_ref.load(SeqCst);
                let r = sb.steal_half_into(&a);
                let empty = r.is_empty();
                if let Steal::Success(x) = r {
                    ledger_ref.take(x);
                }
                turn += 1;
                if turn.is_multiple_of(2)
                    && let Some(x) = a.pop()
                {
                    ledger_ref.take(x);
                }
                if finished && empty {
                    while let Some(x) = a.pop() {
                        ledger_ref.take(x);
                    }
                    a_done_ref.store(true, SeqCst);
                    break;
                }
            }
        });
        let sa = rx.recv().unwrap();
        // C: steals from A.
        scope.spawn(move || {
            let c = Worker::new();
            loop {
                let finished = a_done_ref.load(SeqCst);
                let r = sa.steal_half_into(&c);
                let empty = r.is_empty();
                if let Steal::Success(x) = r {
                    ledger_ref.take(x);
                }
                while let Some(x) = c.pop() {
                    ledger_ref.take(x);
                }
                if finished && empty {
                    break;
                }
            }
        });
        for i in 0..N {
            b.push(i);
        }
        while let Some(x) = b.pop() {
            ledger_ref.take(x);
        }
        b_done.store(true, SeqCst);
    });
    ledger.assert_all_once();
}

#[test]
fn worker_is_send_stealer_is_send_sync() {
    fn send<T: Send>() {}
    fn sync<T: Sync>() {}
    send::<Worker<Box<u8>>>();
    send::<Stealer<Box<u8>>>();
    sync::<Stealer<Box<u8>>>();
}

#[derive(Debug, Clone)]
enum Op {
    Push,
    Pop,
    PopOldest,
    Steal,
    StealHalf(usize),
    DrainMine,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Push),
        2 => Just(Op::Pop),
        1 => Just(Op::PopOldest),
        1 => Just(Op::Steal),
        1 => (1usize..40).prop_map(Op::StealHalf),
        1 => Just(Op::DrainMine),
    ]
}

proptest! {
    /// Random sequences of push / pop / pop_oldest / steal / steal_half_into on one
    /// thread give the same results as a `VecDeque` model.
    #[test]
    fn matches_vecdeque_model(
        ops in proptest::collection::vec(op(), 0..400),
        cap in 0usize..9,
        start in prop_oneof![Just(0u32), Just(IDX_MASK - 100)],
    ) {
        let w = Worker::with_capacity_at(cap, start);
        let s = w.stealer();
        let mine = Worker::with_capacity(2);
        let mut model: VecDeque<u32> = VecDeque::new();
        let mut model_mine: VecDeque<u32> = VecDeque::new();
        let mut next = 0u32;
        for op in ops {
            match op {
                Op::Push => {
                    w.push(next);
                    model.push_back(next);
                    next += 1;
                }
                Op::Pop => prop_assert_eq!(w.pop(), model.pop_back()),
                Op::PopOldest => {
                    let expected = match model.pop_front() {
                        Some(x) => Steal::Success(x),
                        None => Steal::Empty,
                    };
                    prop_assert_eq!(w.pop_oldest(), expected);
                }
                Op::Steal => {
                    let expected = match model.pop_front() {
                        Some(x) => Steal::Success(x),
                        None => Steal::Empty,
                    };
                    prop_assert_eq!(s.steal(), expected);
                }
                Op::StealHalf(limit) => {
                    let n = model.len().div_ceil(2).min(limit);
                    let expected = match model.pop_front() {
                        Some(x) => Steal::Success(x),
                        None => Steal::Empty,
                    };
                    for _ in 1..n {
                        let x = model.pop_front().unwrap();
                        model_mine.push_back(x);
                    }
                    prop_assert_eq!(s.steal_half_into_with_limit(&mine, limit), expected);
                }
                Op::DrainMine => {
                    while let Some(x) = model_mine.pop_back() {
                        prop_assert_eq!(mine.pop(), Some(x));
                    }
                    prop_assert_eq!(mine.pop(), None);
                }
            }
            prop_assert_eq!(w.len(), model.len());
            prop_assert_eq!(s.len(), model.len());
            prop_assert_eq!(mine.len(), model_mine.len());
        }
    }
}

#[test]
fn a_thief_whose_own_deque_overflows_gives_its_claim_back() {
    // The thief's own deque is at the capacity limit, so moving a stolen
    // batch into it panics (in `grow`) while the thief holds the claim.
    // The victim must not be left with that claim in flight for ever:
    // later steals succeed, and the deque drops cleanly.
    let mine = Worker::<u8>::with_capacity(MAX_CAPACITY);
    for _ in 0..MAX_CAPACITY {
        mine.push(0);
    }
    let victim = Worker::new();
    for i in 0..4u8 {
        victim.push(i);
    }
    let s = victim.stealer();
    let outcome =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.steal_half_into(&mine)));
    assert!(outcome.is_err(), "the full deque did not panic");
    let mut retries = 0;
    loop {
        match s.steal() {
            Steal::Success(_) => break,
            Steal::Retry if retries < 1000 => retries += 1,
            other => panic!("after the panic, steal gave {other:?} ({retries} retries)"),
        }
    }
    assert_eq!(
        Head(victim.inner.head.load(SeqCst)).flight(),
        0,
        "a claim is still in flight"
    );
}

/// The owner's `pop_oldest` gives way to a thief: a reservation taken
/// between its load and its CAS makes it `Retry` (the thief's claim, sized
/// from the old `top`, goes through), and while a claimed batch is being
/// copied out it does not touch the word, which the thief's release then
/// stores whole. Every item is handed out once.
#[test]
fn pop_oldest_gives_way_to_a_thief() {
    use std::cell::RefCell;
    use std::rc::Rc;

    // A thief steals half inside the owner's window.
    let w = Worker::new();
    for id in 0..4 {
        w.push(id);
    }
    let s = w.stealer();
    let mine = Rc::new(Worker::new());
    let stolen = Rc::new(RefCell::new(Vec::new()));
    {
        let (mine, stolen) = (mine.clone(), stolen.clone());
        let mut fired = false;
        hook::set(Some(Box::new(move |point| {
            if point == hook::Point::BeforeTakeOldest && !fired {
                fired = true;
                if let Steal::Success(x) = s.steal_half_into(&mine) {
                    stolen.borrow_mut().push(x);
                }
            }
        })));
    }
    let r = w.pop_oldest();
    hook::set(None);
    assert_eq!(r, Steal::Retry, "the thief's steal changed the word");
    assert_eq!(*stolen.borrow(), [0]);
    assert_eq!(mine.pop(), Some(1));
    assert_eq!(w.pop_oldest(), Steal::Success(2));
    assert_eq!(w.pop(), Some(3));
    assert_eq!(w.pop(), None);
    assert_eq!(w.pop_oldest(), Steal::Empty);

    // The owner tries inside a thief's claim window (reserved, then
    // claimed and copying): it leaves the word alone both times.
    let w = Rc::new(Worker::new());
    for id in 0..4 {
        w.push(id);
    }
    let s = w.stealer();
    let seen = Rc::new(RefCell::new(Vec::new()));
    {
        let (w, seen) = (w.clone(), seen.clone());
        hook::set(Some(Box::new(move |point| {
            if point == hook::Point::BeforeClaim {
                seen.borrow_mut().push(w.pop_oldest());
            }
        })));
    }
    let mine = Worker::new();
    let r = s.steal_half_into(&mine);
    hook::set(None);
    assert_eq!(*seen.borrow(), [Steal::Retry], "under the reservation");
    assert_eq!(r, Steal::Success(0));
    assert_eq!(mine.pop(), Some(1));
    assert_eq!(w.pop_oldest(), Steal::Success(2));
    assert_eq!(w.pop_oldest(), Steal::Success(3));
    assert_eq!(w.pop_oldest(), Steal::Empty);
    assert_eq!(Head(w.inner.head.load(SeqCst)).flight(), 0);
}

/// After `pop_oldest` takes the last item, `pop` sees an empty deque
/// (its remembered `top` moved too), and pushes after it are taken in
/// order from both ends.
#[test]
fn pop_oldest_then_pop_and_push() {
    let w = Worker::with_capacity(2);
    w.push(0);
    assert_eq!(w.pop_oldest(), Steal::Success(0));
    assert_eq!(w.pop(), None);
    for id in 1..6 {
        w.push(id);
    }
    assert_eq!(w.pop_oldest(), Steal::Success(1));
    assert_eq!(w.pop(), Some(5));
    assert_eq!(w.stealer().steal(), Steal::Success(2));
    assert_eq!(w.pop_oldest(), Steal::Success(3));
    assert_eq!(w.len(), 1);
    assert_eq!(w.pop(), Some(4));
    assert_eq!(w.pop_oldest(), Steal::Empty);
}
