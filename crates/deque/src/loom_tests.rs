//! Loom models of the deque's protocol.
//!
//! Each model runs the real `Worker`/`Stealer` code with loom's atomics and
//! cells (the ring starts at 4 slots under loom, or 2 where growth is the
//! point) and checks an exactly-once predicate over every item: each id is
//! returned by exactly one of pop / steal / steal_half_into, or left in the
//! deque and drained at the end. Loom additionally flags any unsynchronized
//! access to a slot (`UnsafeCell`) as a data race, and under loom a slot
//! records whether it holds an item, so reading one that does not (a ring
//! grown without an in-flight slot) panics, and a ring freed by a growth
//! is only marked freed, with every slot access reading the mark, so a
//! read of a freed ring fails too (as a race with the marking, or as a
//! failed assertion). Models with a concurrent `len`
//! or steal also check it against the lengths the deque really had.
//!
//! `xtask/mutants/deque.txt` names, for each critical ordering, CAS and
//! re-check, the model that fails when it is weakened. The pop count's
//! period (a claim must fail if the owner's pop count went all the way
//! round) is out of loom's reach and is checked by hook tests in
//! `src/tests.rs`.
//!
//! `reference_steal_half_duplicates` is the control: the classic protocol's
//! steal-half (read both ends, copy `n` slots, CAS `top`) against CAS-free
//! pops, which loom must catch handing one item out twice.
//!
//! Run with:
//! `RUSTFLAGS="--cfg stepsched_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p stepsched-deque --features loom --lib -- loom`
//! (about a second; 4 s with 3 preemptions).

use crate::{Steal, Stealer, Worker};
use loom::thread;

/// Collects everything one steal produced, plus the thief's own deque.
fn take_all(first: Steal<usize>, mine: &Worker<usize>, out: &mut Vec<usize>) {
    if let Steal::Success(x) = first {
        out.push(x);
    }
    while let Some(x) = mine.pop() {
        out.push(x);
    }
}

/// Asserts that `taken` holds each of `0..n` exactly once.
fn assert_exactly_once(mut taken: Vec<usize>, n: usize) {
    taken.sort_unstable();
    let expected: Vec<usize> = (0..n).collect();
    assert_eq!(taken, expected, "an item was lost or handed out twice");
}

/// A thief that retries until it gets a definite answer, bounded so loom's
/// state space stays finite.
fn steal_half_retrying(s: &Stealer<usize>, mine: &Worker<usize>, out: &mut Vec<usize>) {
    for _ in 0..2 {
        let r = s.steal_half_into(mine);
        let retry = r.is_retry();
        take_all(r, mine, out);
        if !retry {
            break;
        }
        thread::yield_now();
    }
}

#[test]
fn pop_races_steal_for_last_item() {
    loom::model(|| {
        let w = Worker::new();
        w.push(0usize);
        let s = w.stealer();
        let thief = thread::spawn(move || s.steal().success());
        let popped = w.pop();
        let stolen = thief.join().unwrap();
        let mut taken: Vec<usize> = popped.into_iter().chain(stolen).collect();
        taken.extend(w.pop());
        assert_exactly_once(taken, 1);
    });
}

/// Four items; a thief steals half of them while the owner runs `owner`
/// (which returns what it popped) and then pops the rest; `total` items
/// must each be taken exactly once.
fn steal_half_races_owner(total: usize, owner: impl Fn(&Worker<usize>) -> Vec<usize>) {
    const N: usize = 4;
    let w = Worker::new();
    for i in 0..N {
        w.push(i);
    }
    let s = w.stealer();
    let thief = thread::spawn(move || {
        let mine = Worker::new();
        let mut got = Vec::new();
        take_all(s.steal_half_into(&mine), &mine, &mut got);
        got
    });
    let mut taken = owner(&w);
    taken.extend(thief.join().unwrap());
    while let Some(x) = w.pop() {
        taken.push(x);
    }
    assert_exactly_once(taken, total);
}

#[test]
fn steal_half_races_owner_pops() {
    // The reference's bug: a batch claim computed from a stale `bottom`
    // while the owner pops into it.
    loom::model(|| steal_half_races_owner(4, |w| (0..3).filter_map(|_| w.pop()).collect()));
}

#[test]
fn steal_half_races_owner_pops_and_pushes() {
    // Pops that leave a pending claim alone must bound the `bottom` the
    // thief read by the highest one stored since the last pop that found no
    // reservation, pushes included: here a push between the pops raises it
    // again.
    loom::model(|| {
        steal_half_races_owner(5, |w| {
            let mut taken: Vec<usize> = w.pop().into_iter().collect();
            w.push(4);
            taken.extend((0..3).filter_map(|_| w.pop()));
            taken
        })
    });
}

#[test]
fn steal_half_races_steal() {
    loom::model(|| {
        const N: usize = 3;
        let w = Worker::new();
        for i in 0..N {
            w.push(i);
        }
        let s1 = w.stealer();
        let s2 = w.stealer();
        let half = thread::spawn(move || {
            let mine = Worker::new();
            let mut got = Vec::new();
            steal_half_retrying(&s1, &mine, &mut got);
            got
        });
        let one = thread::spawn(move || s2.steal().success());
        let mut taken = w.pop().into_iter().collect::<Vec<_>>();
        taken.extend(half.join().unwrap());
        taken.extend(one.join().unwrap());
        while let Some(x) = w.pop() {
            taken.push(x);
        }
        assert_exactly_once(taken, N);
    });
}

#[test]
fn push_grows_while_thief_holds_old_ring() {
    // The ring starts with 2 slots: the owner's third push grows it while a
    // thief may be copying out of the old ring.
    loom::model(|| {
        const N: usize = 4;
        let w = Worker::with_capacity(2);
        w.push(0usize);
        w.push(1);
        let s = w.stealer();
        let thief = thread::spawn(move || {
            let mine = Worker::with_capacity(2);
            let mut got = Vec::new();
            steal_half_retrying(&s, &mine, &mut got);
            got
        });
        for i in 2..N {
            w.push(i);
        }
        let mut taken = thief.join().unwrap();
        while let Some(x) = w.pop() {
            taken.push(x);
        }
        assert_exactly_once(taken, N);
    });
}

#[test]
fn pop_and_push_race_a_copying_thief() {
    // A thief copying a batch while the owner pops the rest and pushes back
    // into the freed slots: the owner must never write a slot still in
    // flight (loom flags the race on the cell if it does).
    loom::model(|| {
        steal_half_races_owner(6, |w| {
            let taken: Vec<usize> = (0..2).filter_map(|_| w.pop()).collect();
            w.push(4);
            w.push(5);
            taken
        })
    });
}

#[test]
fn len_during_a_claim() {
    // A thief claims two items computed from pushes the reader may not have
    // seen yet: the reader's length must still be one the deque could have
    // had (it never holds more than three items), not a wrapped count.
    loom::model(|| {
        let w = Worker::new();
        w.push(0usize);
        let s = w.stealer();
        let reader = w.stealer();
        let thief = thread::spawn(move || {
            let mine = Worker::new();
            let mut got = Vec::new();
            take_all(s.steal_half_into(&mine), &mine, &mut got);
            got
        });
        let len = thread::spawn(move || reader.len());
        w.push(1);
        w.push(2);
        let len = len.join().unwrap();
        assert!(
            len <= 3,
            "len {len}; the deque never held more than 3 items"
        );
        let mut taken = thief.join().unwrap();
        while let Some(x) = w.pop() {
            taken.push(x);
        }
        assert_exactly_once(taken, 3);
    });
}

#[test]
fn owner_wraps_onto_slots_a_thief_copied() {
    // A two-slot ring: the thief starts before anything is pushed, and the
    // owner's third push either wraps onto the slot the thief claimed (once
    // it is released) or grows the ring (while it is in flight). The fifth
    // push reaches the claimed index again in a four-slot ring: the owner
    // must still count the slot as in use if the thief copies it out of
    // the new ring. The owner must never write a slot before the thief's
    // read of it happened (loom flags the cell), nor copy a ring without
    // the in-flight slots.
    loom::model(|| {
        let w = Worker::with_capacity(2);
        let s = w.stealer();
        let thief = thread::spawn(move || s.steal().success());
        for i in 0..5 {
            w.push(i);
        }
        let mut taken: Vec<usize> = thief.join().unwrap().into_iter().collect();
        while let Some(x) = w.pop() {
            taken.push(x);
        }
        assert_exactly_once(taken, 5);
    });
}

/// What the owner's `pop_oldest` took, or nothing.
fn oldest(w: &Worker<usize>) -> Option<usize> {
    w.pop_oldest().success()
}

#[test]
fn pop_oldest_races_steal_half() {
    // The owner takes from the thieves' end by one CAS, with no
    // reservation: a thief's claim must never cover the item it took, and
    // it must never move `top` under a claim being copied (the thief's
    // release stores the word it claimed, `top` included).
    loom::model(|| {
        steal_half_races_owner(4, |w| {
            let mut taken: Vec<usize> = oldest(w).into_iter().collect();
            taken.extend(w.pop());
            taken.extend(oldest(w));
            taken
        })
    });
}

#[test]
fn pop_oldest_races_a_steal_then_wraps() {
    // A full two-slot ring: a thief steals while the owner takes the
    // oldest item and pushes two more, which wrap onto the freed slots or
    // grow the ring. The owner must not write a slot the thief is still
    // reading (loom flags the cell), nor lose or repeat an item.
    loom::model(|| {
        let w = Worker::with_capacity(2);
        w.push(0usize);
        w.push(1);
        let s = w.stealer();
        let thief = thread::spawn(move || s.steal().success());
        let mut taken: Vec<usize> = oldest(&w).into_iter().collect();
        w.push(2);
        w.push(3);
        taken.extend(thief.join().unwrap());
        while let Some(x) = w.pop() {
            taken.push(x);
        }
        assert_exactly_once(taken, 4);
    });
}

#[test]
fn owner_reuses_slots_two_thieves_copied() {
    // Two thieves each steal one item of a full two-slot ring, one claim
    // after the other; the owner then pushes two more, which wrap onto
    // both slots once it has read the later thief's release. That release
    // is a plain store: the earlier thief's reads of its slot reach the
    // owner only because the later thief's fence, after its reservation
    // read that store, acquired them (loom flags the owner's write of that
    // slot otherwise).
    loom::model(|| {
        let w = Worker::with_capacity(2);
        w.push(0usize);
        w.push(1);
        let thieves: Vec<_> = (0..2)
            .map(|_| {
                let s = w.stealer();
                thread::spawn(move || s.steal().success())
            })
            .collect();
        w.push(2);
        w.push(3);
        let mut taken = Vec::new();
        for thief in thieves {
            taken.extend(thief.join().unwrap());
        }
        while let Some(x) = w.pop() {
            taken.push(x);
        }
        assert_exactly_once(taken, 4);
    });
}

#[test]
fn push_then_pop_races_a_steal() {
    // An item stays in the deque while the owner pushes and pops another
    // above it: the steal may lose a race (Retry) but never reports the
    // deque empty.
    loom::model(|| {
        let w = Worker::new();
        w.push(0usize);
        let s = w.stealer();
        let thief = thread::spawn(move || {
            let r = s.steal();
            assert!(!r.is_empty(), "steal saw no item while one was at rest");
            r.success()
        });
        w.push(1);
        let mut taken: Vec<usize> = w.pop().into_iter().collect();
        taken.extend(thief.join().unwrap());
        while let Some(x) = w.pop() {
            taken.push(x);
        }
        assert_exactly_once(taken, 2);
    });
}

#[test]
fn len_while_push_then_pop() {
    // The same for `len`: the item at rest is counted, and nothing beyond
    // the two items the deque ever held (three pushes and a pop: a push
    // count read with a stale pop count would say three).
    loom::model(|| {
        let w = Worker::new();
        w.push(0usize);
        let reader = w.stealer();
        let reader = thread::spawn(move || reader.len());
        w.push(1);
        assert_eq!(w.pop(), Some(1));
        w.push(2);
        let len = reader.join().unwrap();
        assert!(
            (1..=2).contains(&len),
            "len {len}; the deque held 1 or 2 items"
        );
    });
}

/// The control: the reference implementation's protocol, in miniature.
/// Classic Chase-Lev ends in two words; the owner pops without a CAS unless
/// it takes the last item; steal-half reads both ends, copies `n` slots and
/// claims them with one CAS on `top`. Slots hold plain ids in atomics, so
/// the only failure loom can find is the protocol's own.
mod reference {
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicIsize, AtomicUsize, Ordering::SeqCst, fence};

    pub(super) struct Deque {
        top: AtomicIsize,
        bottom: AtomicIsize,
        slots: Vec<AtomicUsize>,
    }

    impl Deque {
        pub(super) fn new(items: usize) -> Arc<Self> {
            Arc::new(Deque {
                top: AtomicIsize::new(0),
                bottom: AtomicIsize::new(items as isize),
                slots: (0..items).map(AtomicUsize::new).collect(),
            })
        }

        pub(super) fn pop(&self) -> Option<usize> {
            let b = self.bottom.load(SeqCst) - 1;
            self.bottom.store(b, SeqCst);
            fence(SeqCst);
            let t = self.top.load(SeqCst);
            if t > b {
                self.bottom.store(b + 1, SeqCst);
                return None;
            }
            let item = self.slots[b as usize].load(SeqCst);
            if t == b {
                let won = self.top.compare_exchange(t, t + 1, SeqCst, SeqCst).is_ok();
                self.bottom.store(b + 1, SeqCst);
                return won.then_some(item);
            }
            // t < b: taken without a CAS.
            Some(item)
        }

        pub(super) fn steal_half(&self) -> Vec<usize> {
            let t = self.top.load(SeqCst);
            fence(SeqCst);
            let b = self.bottom.load(SeqCst);
            if b <= t {
                return Vec::new();
            }
            let n = (b - t + 1) / 2;
            let batch: Vec<usize> = (t..t + n)
                .map(|i| self.slots[i as usize].load(SeqCst))
                .collect();
            if self.top.compare_exchange(t, t + n, SeqCst, SeqCst).is_ok() {
                batch
            } else {
                Vec::new()
            }
        }
    }
}

#[test]
#[should_panic(expected = "handed out twice")]
fn reference_steal_half_duplicates() {
    loom::model(|| {
        const N: usize = 4;
        let d = reference::Deque::new(N);
        let thief = {
            let d = d.clone();
            thread::spawn(move || d.steal_half())
        };
        let mut taken = Vec::new();
        for _ in 0..3 {
            taken.extend(d.pop());
        }
        taken.extend(thief.join().unwrap());
        while let Some(x) = d.pop() {
            taken.push(x);
        }
        let mut seen = [0u8; N];
        for x in &taken {
            seen[*x] += 1;
            assert!(seen[*x] < 2, "item {x} handed out twice");
        }
    });
}
