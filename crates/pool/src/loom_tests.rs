//! Loom models of the crate-private protocols, with the real code.
//!
//! * The sleep protocol's Dekker handshake against the real deque's atomics
//!   (the whole-pool models in `tests/loom.rs` use a mutex-protected queue
//!   for the global queue and inboxes under loom, whose lock would hide a
//!   missing fence; a deque push takes no lock).
//! * A wake-up that picks a parking worker between its registration and
//!   its re-check (which runs outside the sleeper list's lock): the worker
//!   ends searching, off the list, with no token left for its next park.
//! * Draining: the pool ends (every worker exits, none is left parked) and
//!   an item queued during the drain runs exactly once.
//! * Two workers stealing from a third through the real search path
//!   (`Search::find`: local pop, inbox, global, steal-half, inboxes).
//! * The last searcher's re-check: a producer skips its wake-up for a
//!   searcher, which then finds other work and must wake a sleeper for the
//!   item after its fence.
//! * `push_next`: a second item pushed beside an unannounced first one is
//!   announced, so a sleeping worker steals while the owner stays busy.
//! * The submission gate alone: an accepted push happens before `close`
//!   returns (a plain write that loom checks for a data race).
//! * The next-item slot: its owner puts and takes while a thief steals;
//!   every item is taken exactly once, and the value's cell (a loom cell)
//!   is never read and written at once.
//!
//! A lost wake-up shows as a loom deadlock (the producer joins a worker that
//! is blocked on its parker); every model also checks a
//! per-item ledger.
//!
//! Run with:
//! `RUSTFLAGS="--cfg stepsched_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p stepsched-pool --features loom --lib --test loom`

use loom::sync::Arc;
use loom::thread;
use stepsched_deque::{Steal, Worker as Deque};

use crate::shared::Shared;
use crate::sleep::{Parked, Sleep};
use crate::worker::{Found, Search, WorkerContext};

/// A miniature worker loop around the real `Sleep`: steal from `stealer`,
/// park when it is empty. Returns the item it got, or `None` on exit.
fn sleeper(
    sleep: &Sleep,
    index: usize,
    stealer: &stepsched_deque::Stealer<usize>,
    mut searching: bool,
) -> Option<usize> {
    for _ in 0..4 {
        match stealer.steal() {
            Steal::Success(item) => {
                if searching {
                    let _last = sleep.stop_searching();
                }
                return Some(item);
            }
            Steal::Retry => thread::yield_now(),
            Steal::Empty => match sleep.park(index, searching, || !stealer.is_empty(), || {}) {
                Parked::Exit => return None,
                Parked::Work | Parked::Woken | Parked::Watched => searching = true,
            },
        }
    }
    panic!("the model's loop bound was reached");
}

#[test]
fn deque_push_races_parking() {
    // Worker 1 looks at worker 0's deque, finds it empty and parks, while
    // worker 0 (the model thread) pushes and notifies. Worker 1 starts as
    // a plain idle worker, or as a searcher — in which case the producer
    // skips its wake-up and the searcher's own re-check must see the item.
    for initially_searching in [false, true] {
        loom::model(move || {
            let sleep = Arc::new(Sleep::new(2));
            let deque = Deque::new();
            let stealer = deque.stealer();
            if initially_searching {
                sleep.start_searching();
            }
            let s = sleep.clone();
            let worker = thread::spawn(move || sleeper(&s, 1, &stealer, initially_searching));
            deque.push(7usize);
            sleep.notify_one(None);
            let got = worker.join().unwrap();
            let left = deque.pop();
            // Exactly one of the two has the item; `None` from the worker
            // would mean it exited, which only termination allows.
            assert_eq!(got, Some(7), "the item was left behind (left: {left:?})");
            assert_eq!(left, None);
        });
    }
}

#[test]
fn a_wake_during_the_recheck_leaves_no_token() {
    // Worker 1 parks (its re-check runs outside the list's lock) while the
    // model thread pushes and wakes a sleeper: the waker may pick worker 1
    // between its registration and its re-check, and the re-check may
    // then find the item. Whichever way it goes, worker 1 ends searching,
    // off the list, with no wake-up token left over for its next park.
    loom::model(|| {
        let sleep = Arc::new(Sleep::new(2));
        let deque = Deque::new();
        let stealer = deque.stealer();
        let s = sleep.clone();
        let worker = thread::spawn(move || s.park(1, false, || !stealer.is_empty(), || {}));
        deque.push(7usize);
        sleep.notify_one(None);
        let outcome = worker.join().unwrap();
        assert!(
            matches!(outcome, Parked::Work | Parked::Woken),
            "{outcome:?}"
        );
        assert!(!sleep.token_set(1), "a token was left for the next park");
        assert_eq!(sleep.sleeping(), 0);
        assert_eq!(sleep.searching(), 1);
    });
}

#[test]
fn push_next_announces_an_item_pushed_beside_another() {
    // Worker 0 (the model thread) queues two items with `push_next` and
    // then stays busy (it joins worker 1) instead of returning to its loop.
    // The first push may go unannounced (the owner would run it next), the
    // second may not: worker 1, asleep or searching, must get one of them,
    // or the model deadlocks.
    for initially_searching in [false, true] {
        loom::model(move || {
            let owner = Deque::new();
            let other = Deque::new();
            let stealer = owner.stealer();
            let shared = Arc::new(Shared::new(
                vec![owner.stealer(), other.stealer()],
                Box::new(|_: usize, _: &WorkerContext<usize>| {}),
            ));
            if initially_searching {
                shared.sleep.start_searching();
            }
            let s = shared.clone();
            let worker = thread::spawn(move || sleeper(&s.sleep, 1, &stealer, initially_searching));
            let ctx = WorkerContext::new(0, owner, shared);
            ctx.push_next(1usize);
            ctx.push_next(2);
            let stolen = worker.join().unwrap();
            let mut all: Vec<usize> = stolen.into_iter().chain(ctx.drain_local()).collect();
            all.sort_unstable();
            assert_eq!(all, [1, 2], "an item was lost or taken twice");
        });
    }
}

#[test]
fn draining_ends_the_pool_and_runs_the_last_item() {
    // Shutdown has begun. Worker 0 pushes one last item on its deque and
    // then goes to sleep; worker 1 steals or sleeps. Whoever registers as
    // the last sleeper with nothing queued ends the pool and wakes the
    // other to exit; nobody may stay parked, and the item runs once.
    loom::model(|| {
        let sleep = Arc::new(Sleep::new(2));
        let deque = Deque::new();
        let stealer = deque.stealer();
        let has_work = {
            let stealer = stealer.clone();
            move || !stealer.is_empty()
        };
        sleep.begin_draining(&has_work);
        let s = sleep.clone();
        let thief = thread::spawn(move || {
            let mut got = Vec::new();
            let mut searching = false;
            for _ in 0..5 {
                match stealer.steal() {
                    Steal::Success(item) => {
                        got.push(item);
                        if searching {
                            searching = false;
                            let _last = s.stop_searching();
                        }
                    }
                    Steal::Retry => thread::yield_now(),
                    Steal::Empty => match s.park(1, searching, || !stealer.is_empty(), || {}) {
                        Parked::Exit => return got,
                        Parked::Work | Parked::Woken | Parked::Watched => searching = true,
                    },
                }
            }
            panic!("the thief's loop bound was reached");
        });
        deque.push(1usize);
        sleep.notify_one(None);
        let mut got = Vec::new();
        let mut searching = false;
        let mut exited = false;
        for _ in 0..5 {
            if let Some(item) = deque.pop() {
                got.push(item);
                continue;
            }
            match sleep.park(0, searching, &has_work, || {}) {
                Parked::Exit => {
                    exited = true;
                    break;
                }
                Parked::Work | Parked::Woken | Parked::Watched => searching = true,
            }
        }
        assert!(exited, "the owner's loop bound was reached");
        got.extend(thief.join().unwrap());
        assert_eq!(got, [1], "the last item ran {} times", got.len());
        assert!(deque.pop().is_none());
    });
}

#[test]
fn two_workers_steal_from_a_third() {
    // Worker 0 (the model thread) owns four items and pops one; workers 1
    // and 2 search through the real `Search::find` and steal the rest. Each
    // item is taken exactly once.
    loom::model(|| {
        const ITEMS: usize = 4;
        let victim = Deque::new();
        let thieves = [Deque::new(), Deque::new()];
        let stealers = std::iter::once(victim.stealer())
            .chain(thieves.iter().map(Deque::stealer))
            .collect();
        let shared = Arc::new(Shared::new(
            stealers,
            Box::new(|_: usize, _: &WorkerContext<usize>| {}),
        ));
        for i in 0..ITEMS {
            victim.push(i);
        }
        let handles: Vec<_> = thieves
            .into_iter()
            .enumerate()
            .map(|(k, deque)| {
                let ctx = WorkerContext::new(k + 1, deque, shared.clone());
                thread::spawn(move || {
                    let mut search = Search::new(k + 1);
                    let mut got = Vec::new();
                    for _ in 0..4 {
                        match search.find(&ctx) {
                            Found::Item(item) => got.push(item),
                            Found::Retry => thread::yield_now(),
                            Found::Empty => break,
                        }
                    }
                    got.extend(ctx.drain_local());
                    got
                })
            })
            .collect();
        let mut taken: Vec<usize> = victim.pop().into_iter().collect();
        for h in handles {
            taken.extend(h.join().unwrap());
        }
        taken.extend(std::iter::from_fn(|| victim.pop()));
        taken.sort_unstable();
        assert_eq!(
            taken,
            (0..ITEMS).collect::<Vec<_>>(),
            "an item was lost or taken twice"
        );
    });
}

#[test]
fn last_searcher_rechecks_a_deque_push() {
    // Worker 1 is searching; worker 2 parks watching worker 0's deque. The
    // model thread (worker 0) pushes an item on its deque and announces it;
    // seeing a searcher, it may skip the wake-up. Worker 1 then finds other
    // work (item 10 in worker 2's deque) and, as the last searcher to stop,
    // must re-check every deque after its fence and wake worker 2 for the
    // pushed item. The deques are the real lock-free ones, so no lock hides
    // a missing fence on either side.
    loom::model(|| {
        let deques = [Deque::new(), Deque::new(), Deque::new()];
        let shared = Arc::new(Shared::new(
            deques.iter().map(Deque::stealer).collect(),
            Box::new(|_: usize, _: &WorkerContext<usize>| {}),
        ));
        deques[2].push(10usize);
        shared.sleep.start_searching();
        let searcher = {
            let shared = shared.clone();
            let victim = deques[2].stealer();
            thread::spawn(move || {
                let item = loop {
                    match victim.steal() {
                        Steal::Success(item) => break item,
                        Steal::Retry => thread::yield_now(),
                        Steal::Empty => panic!("item 10 vanished"),
                    }
                };
                if shared.sleep.stop_searching() {
                    shared.notify_if_work();
                }
                item
            })
        };
        let parked = {
            let shared = shared.clone();
            let stealer = deques[0].stealer();
            thread::spawn(move || sleeper(&shared.sleep, 2, &stealer, false))
        };
        deques[0].push(7usize);
        shared.sleep.notify_one(None);
        assert_eq!(searcher.join().unwrap(), 10);
        // A lost wake-up leaves worker 2 parked: loom reports a deadlock.
        assert_eq!(parked.join().unwrap(), Some(7));
        assert_eq!(deques[0].pop(), None);
    });
}

/// A value written by an accepted submitter inside the gate and read by the
/// closer once `close` returns. Loom reports the two accesses as a data
/// race unless the gate orders the write before the read.
struct Pushed(loom::cell::UnsafeCell<usize>);

// SAFETY: the accesses are ordered by the gate; that is what the model
// checks (loom tracks every access to the cell).
unsafe impl Sync for Pushed {}

#[test]
fn gate_close_waits_for_an_accepted_push() {
    // A submitter races shutdown's `close`. If it got in, its push (here a
    // plain write) must happen before `close` returns; if it was refused it
    // writes nothing. The real pool pushes into a lock-free queue, whose
    // loom stand-in is a mutex that would hide a missing Release/Acquire on
    // the gate, hence this model of the gate alone.
    loom::model(|| {
        let deque = Deque::<usize>::new();
        let shared = Arc::new(Shared::new(
            vec![deque.stealer()],
            Box::new(|_: usize, _: &WorkerContext<usize>| {}),
        ));
        let pushed = Arc::new(Pushed(loom::cell::UnsafeCell::new(0)));
        let submitter = {
            let shared = shared.clone();
            let pushed = pushed.clone();
            thread::spawn(move || {
                if !shared.gate.enter() {
                    return false;
                }
                // SAFETY: only an accepted submitter writes, before it
                // leaves the gate.
                pushed.0.with_mut(|p| unsafe { *p = 7 });
                shared.gate.leave();
                true
            })
        };
        shared.gate.close();
        // SAFETY: the gate is closed and empty: a refused submitter writes
        // nothing, and an accepted one wrote before it left.
        let seen = pushed.0.with(|p| unsafe { *p });
        let accepted = submitter.join().unwrap();
        assert_eq!(seen, if accepted { 7 } else { 0 });
    });
}

/// The next-item slot's owner puts two items (the second displaces the
/// first, unless a thief took it) and takes what is left, while a thief
/// tries to steal twice: each item ends up with exactly one of them.
#[test]
fn next_slot_owner_and_thief_take_each_item_once() {
    use crate::next::NextSlot;

    loom::model(|| {
        let slot = Arc::new(NextSlot::new(true));
        let thief = {
            let slot = slot.clone();
            thread::spawn(move || {
                let mut got = Vec::new();
                for _ in 0..2 {
                    got.extend(slot.steal());
                }
                got
            })
        };
        let mut mine = Vec::new();
        mine.extend(slot.put(1usize));
        mine.extend(slot.put(2));
        mine.extend(slot.take());
        let mut all = thief.join().unwrap();
        all.extend(mine);
        all.sort_unstable();
        assert_eq!(all, [1, 2], "an item lost or taken twice");
        assert!(!slot.is_full());
    });
}
