//! Integration tests of the pool's public API.
//!
//! Every concurrent test checks a per-item ledger (each id run exactly
//! once), never a total alone. No test sleeps or depends on timing: threads
//! are sequenced with channels and barriers, and the few waits for a state
//! (all workers parked, shutdown begun) are loops that yield until the state
//! holds, whose outcome does not depend on how long they take.
#![cfg(not(stepsched_loom))]

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Barrier, Mutex, Once, OnceLock, Weak};
use std::thread;

use stepsched_pool::{Pool, SubmitError, WorkerContext, WorkerStats};

/// One slot per item id, counting how often the id ran.
struct Ledger(Vec<AtomicU32>);

impl Ledger {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(Ledger((0..n).map(|_| AtomicU32::new(0)).collect()))
    }

    fn hit(&self, id: usize) {
        self.0[id].fetch_add(1, Ordering::Relaxed);
    }

    fn count(&self, id: usize) -> u32 {
        self.0[id].load(Ordering::Relaxed)
    }

    #[track_caller]
    fn assert_exactly_once(&self) {
        for (id, slot) in self.0.iter().enumerate() {
            let n = slot.load(Ordering::Relaxed);
            assert_eq!(n, 1, "item {id} ran {n} times");
        }
    }
}

fn total(stats: &[WorkerStats]) -> WorkerStats {
    stats
        .iter()
        .fold(WorkerStats::default(), |acc, s| acc.merged(s))
}

/// Waits (yielding) until `cond` holds. Used only for states the pool must
/// reach on its own; the wait's length never decides the outcome.
fn wait_until(mut cond: impl FnMut() -> bool) {
    while !cond() {
        thread::yield_now();
    }
}

/// Silences the panic messages of the deliberate panics below (the default
/// hook still reports every other panic).
fn quiet_deliberate_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let deliberate = info
                .payload()
                .downcast_ref::<&str>()
                .is_some_and(|s| s.starts_with("deliberate"));
            if !deliberate {
                default(info);
            }
        }));
    });
}

#[test]
fn smoke() {
    let ledger = Ledger::new(1000);
    let l = ledger.clone();
    let pool = Pool::builder()
        .workers(2)
        .build(move |id: usize, _| l.hit(id))
        .unwrap();
    for id in 0..1000 {
        pool.submit(id).unwrap();
    }
    pool.shutdown();
    ledger.assert_exactly_once();
    assert_eq!(total(&pool.stats()).items_run, 1000);
}

#[test]
fn many_submitters_and_recursive_spawns_run_each_item_once() {
    // 4 outside submitters each submit 500 roots; each root fans out into a
    // small tree through every path running code has: its own deque, a
    // given worker's inbox, the global queue, and `Pool::submit` from inside
    // a worker. Ids: root r owns ids [r * 16, r * 16 + 15).
    const ROOTS: usize = 2000;
    const PER_ROOT: usize = 16;
    let ledger = Ledger::new(ROOTS * PER_ROOT);
    let pool_slot: Arc<OnceLock<Weak<Pool<usize>>>> = Arc::new(OnceLock::new());
    let l = ledger.clone();
    let slot = pool_slot.clone();
    let pool = Arc::new(
        Pool::builder()
            .workers(3)
            .build(move |id: usize, ctx: &WorkerContext<usize>| {
                l.hit(id);
                let local = id % PER_ROOT;
                let base = id - local;
                // Heap order inside the root's 15-node tree (local ids 0..15).
                for child in [2 * local + 1, 2 * local + 2] {
                    if child < PER_ROOT - 1 {
                        let item = base + child;
                        match child % 4 {
                            0 => ctx.push(item),
                            1 => ctx.submit_to(item % ctx.workers(), item).unwrap(),
                            2 => ctx.inject(item),
                            _ => {
                                let pool = slot.get().and_then(Weak::upgrade).unwrap();
                                pool.submit(item).unwrap();
                            }
                        }
                    }
                }
                if local == 0 {
                    // The 16th id of each root is queued once, at the root.
                    ctx.push(base + PER_ROOT - 1);
                }
            })
            .unwrap(),
    );
    pool_slot.set(Arc::downgrade(&pool)).unwrap();
    let submitters: Vec<_> = (0..4)
        .map(|s| {
            let pool = pool.clone();
            thread::spawn(move || {
                for r in (s..ROOTS).step_by(4) {
                    pool.submit(r * PER_ROOT).unwrap();
                }
            })
        })
        .collect();
    for s in submitters {
        s.join().unwrap();
    }
    pool.shutdown();
    // The 16th id is a leaf: it has local id 15, whose children are >= 15.
    ledger.assert_exactly_once();
    assert_eq!(total(&pool.stats()).items_run, (ROOTS * PER_ROOT) as u64);
}

#[test]
fn fork_join_tree_of_100k_nodes() {
    // Node i has children 2i+1 and 2i+2 (heap order), all pushed on the
    // running worker's deque: the recursive fork-join pattern.
    const NODES: usize = 100_000;
    let ledger = Ledger::new(NODES);
    let l = ledger.clone();
    let pool = Pool::builder()
        .workers(2)
        .build(move |i: usize, ctx: &WorkerContext<usize>| {
            l.hit(i);
            for child in [2 * i + 1, 2 * i + 2] {
                if child < NODES {
                    ctx.push(child);
                }
            }
        })
        .unwrap();
    pool.submit(0).unwrap();
    pool.shutdown();
    ledger.assert_exactly_once();
}

#[test]
fn blocked_worker_deque_is_run_by_the_other_worker() {
    // Work conservation: the first item pushes 8 children on its own
    // worker's deque and then blocks until all 8 have run. Only the other
    // worker can run them, by stealing; if it were left asleep the test
    // would hang.
    const CHILDREN: usize = 8;
    let ledger = Ledger::new(CHILDREN + 1);
    let (done_tx, done_rx) = mpsc::channel::<usize>();
    let done_rx = Mutex::new(done_rx);
    let blocker_worker = Arc::new(AtomicUsize::new(usize::MAX));
    let l = ledger.clone();
    let bw = blocker_worker.clone();
    let pool = Pool::builder()
        .workers(2)
        .build(move |i: usize, ctx: &WorkerContext<usize>| {
            l.hit(i);
            if i == 0 {
                bw.store(ctx.index(), Ordering::Relaxed);
                for child in 1..=CHILDREN {
                    ctx.push(child);
                }
                let rx = done_rx.lock().unwrap();
                for _ in 0..CHILDREN {
                    let ran_on = rx.recv().unwrap();
                    assert_ne!(ran_on, ctx.index(), "a child ran on the blocked worker");
                }
            } else {
                done_tx.send(ctx.index()).unwrap();
            }
        })
        .unwrap();
    pool.submit(0).unwrap();
    pool.shutdown();
    ledger.assert_exactly_once();
    let stats = pool.stats();
    let thief = 1 - blocker_worker.load(Ordering::Relaxed);
    assert!(stats[thief].items_stolen >= CHILDREN as u64, "{stats:?}");
    assert!(stats[thief].steal_attempts > 0);
    assert_eq!(total(&stats).panics, 0);
}

#[test]
fn blocked_worker_inbox_is_drained_by_the_other_worker() {
    // Items sent to a worker's inbox while that worker is stuck in a long
    // item are taken by the idle worker.
    const ITEMS: usize = 10;
    let ledger = Ledger::new(ITEMS + 1);
    let (started_tx, started_rx) = mpsc::channel::<usize>();
    let (done_tx, done_rx) = mpsc::channel::<usize>();
    let done_rx = Mutex::new(done_rx);
    let l = ledger.clone();
    let pool = Pool::builder()
        .workers(2)
        .build(move |i: usize, ctx: &WorkerContext<usize>| {
            l.hit(i);
            if i == 0 {
                started_tx.send(ctx.index()).unwrap();
                let rx = done_rx.lock().unwrap();
                for _ in 0..ITEMS {
                    assert_ne!(rx.recv().unwrap(), ctx.index());
                }
            } else {
                done_tx.send(ctx.index()).unwrap();
            }
        })
        .unwrap();
    pool.submit(0).unwrap();
    let busy = started_rx.recv().unwrap();
    for i in 1..=ITEMS {
        pool.submit_to(busy, i).unwrap();
    }
    pool.shutdown();
    ledger.assert_exactly_once();
    let stats = pool.stats();
    assert!(stats[1 - busy].items_stolen >= ITEMS as u64, "{stats:?}");
}

#[test]
fn each_worker_runs_one_of_two_barrier_items_and_threads_are_named() {
    // Two items that wait for each other on a barrier can only finish if
    // the second one wakes the second worker.
    let barrier = Arc::new(Barrier::new(2));
    let names = Arc::new(Mutex::new(Vec::new()));
    let (b, n) = (barrier.clone(), names.clone());
    let pool = Pool::builder()
        .workers(2)
        .build(move |(): (), _| {
            b.wait();
            n.lock()
                .unwrap()
                .push(thread::current().name().unwrap().to_string());
        })
        .unwrap();
    pool.submit(()).unwrap();
    pool.submit(()).unwrap();
    pool.shutdown();
    let mut names = names.lock().unwrap().clone();
    names.sort();
    assert_eq!(names, ["stepsched-worker-0", "stepsched-worker-1"]);
}

#[test]
fn outside_work_is_not_starved_by_a_busy_deque() {
    // One worker runs an item that re-queues itself on its own deque
    // forever, until a flag item from outside runs. Without the fairness
    // tick the deque would always win and the test would never end.
    for via_inbox in [false, true] {
        let stop = Arc::new(AtomicBool::new(false));
        let (started_tx, started_rx) = mpsc::channel();
        let s = stop.clone();
        let pool = Pool::builder()
            .workers(1)
            .build(move |flag: bool, ctx: &WorkerContext<bool>| {
                if flag {
                    s.store(true, Ordering::Relaxed);
                } else if !s.load(Ordering::Relaxed) {
                    let _ = started_tx.send(());
                    ctx.push(false);
                }
            })
            .unwrap();
        pool.submit(false).unwrap();
        started_rx.recv().unwrap();
        if via_inbox {
            pool.submit_to(0, true).unwrap();
        } else {
            pool.submit(true).unwrap();
        }
        pool.shutdown();
        assert!(stop.load(Ordering::Relaxed));
    }
}

#[test]
fn fairness_tick_bounds_the_wait_of_queued_work() {
    // The same self-refilling item, which at its 5th run queues the flag
    // on the global queue or the inbox itself, so the wait is counted
    // exactly: at most one fairness interval (61 items).
    for via_inbox in [false, true] {
        let spins = Arc::new(AtomicUsize::new(0));
        let waited = Arc::new(AtomicUsize::new(usize::MAX));
        let (n, w) = (spins.clone(), waited.clone());
        let pool = Pool::builder()
            .workers(1)
            .build(
                move |flag: Option<usize>, ctx: &WorkerContext<Option<usize>>| match flag {
                    Some(queued_at) => {
                        w.store(n.load(Ordering::Relaxed) - queued_at, Ordering::Relaxed);
                    }
                    None if w.load(Ordering::Relaxed) == usize::MAX => {
                        let k = n.fetch_add(1, Ordering::Relaxed) + 1;
                        if k == 5 {
                            if via_inbox {
                                ctx.submit_to(0, Some(k)).unwrap();
                            } else {
                                ctx.inject(Some(k));
                            }
                        }
                        // Capped, so a missing fairness tick fails the
                        // assert below instead of spinning forever.
                        if k < 10_000 {
                            ctx.push(None);
                        }
                    }
                    None => {}
                },
            )
            .unwrap();
        pool.submit(None).unwrap();
        pool.shutdown();
        let waited = waited.load(Ordering::Relaxed);
        assert!(
            waited <= 61,
            "queued work waited {waited} items (inbox: {via_inbox})"
        );
    }
}

#[test]
fn shutdown_drains_queued_work_and_refuses_new_work() {
    // The only worker is blocked while 1000 items queue up behind it and a
    // second thread starts the shutdown. New submissions are refused from
    // then on; once the blocker is released every queued item runs, and so
    // does the child each of them queues during the drain.
    const ITEMS: usize = 1000;
    let ledger = Ledger::new(2 * ITEMS + 1);
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let l = ledger.clone();
    let pool = Arc::new(
        Pool::builder()
            .workers(1)
            .build(move |i: usize, ctx: &WorkerContext<usize>| {
                l.hit(i);
                if i == 0 {
                    started_tx.send(()).unwrap();
                    release_rx.lock().unwrap().recv().unwrap();
                } else if i <= ITEMS {
                    ctx.push(i + ITEMS);
                }
            })
            .unwrap(),
    );
    pool.submit(0).unwrap();
    started_rx.recv().unwrap();
    for i in 1..=ITEMS {
        pool.submit(i).unwrap();
    }
    let p = pool.clone();
    let shutter = thread::spawn(move || p.shutdown());
    wait_until(|| pool.is_shut_down());
    assert_eq!(pool.submit(7), Err(SubmitError::ShutDown(7)));
    assert_eq!(pool.submit_to(0, 8), Err(SubmitError::ShutDown(8)));
    assert_eq!(pool.inject(9), Err(SubmitError::ShutDown(9)));
    release_tx.send(()).unwrap();
    shutter.join().unwrap();
    ledger.assert_exactly_once();
    pool.shutdown(); // idempotent
}

/// An item that records its own drop.
struct Tracked {
    id: usize,
    dropped: Arc<Ledger>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.dropped.hit(self.id);
    }
}

#[test]
fn shutdown_now_drops_queued_items_without_running_them() {
    // Worker 0's item blocks after queueing items on its own deque; more
    // items wait in the global queue and in both inboxes. `shutdown_now`
    // starts while it is blocked; then it is released. Nothing else may
    // run, and every item must be dropped exactly once.
    const ITEMS: usize = 300;
    let ran = Ledger::new(ITEMS);
    let dropped = Ledger::new(ITEMS);
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = mpsc::channel::<usize>();
    let release_rx = Mutex::new(release_rx);
    let (r, d) = (ran.clone(), dropped.clone());
    let pool = Arc::new(
        Pool::builder()
            .workers(1)
            .build(move |item: Tracked, ctx: &WorkerContext<Tracked>| {
                r.hit(item.id);
                if item.id == 0 {
                    for id in 1..100 {
                        ctx.push(Tracked {
                            id,
                            dropped: d.clone(),
                        });
                    }
                    started_tx.send(ctx.index()).unwrap();
                    release_rx.lock().unwrap().recv().unwrap();
                }
            })
            .unwrap(),
    );
    let track = |id| Tracked {
        id,
        dropped: dropped.clone(),
    };
    pool.submit(track(0)).unwrap();
    started_rx.recv().unwrap();
    for id in 100..200 {
        pool.submit(track(id)).unwrap();
    }
    for id in 200..ITEMS {
        pool.submit_to(0, track(id)).unwrap();
    }
    let p = pool.clone();
    let stopper = thread::spawn(move || p.shutdown_now());
    wait_until(|| pool.is_shut_down());
    let refused = pool.submit(track(0)).unwrap_err().into_inner();
    std::mem::forget(refused); // id 0 is accounted for by the real item
    release_tx.send(()).unwrap();
    stopper.join().unwrap();
    assert_eq!(ran.count(0), 1);
    for id in 1..ITEMS {
        assert_eq!(ran.count(id), 0, "item {id} ran after shutdown_now");
    }
    dropped.assert_exactly_once();
}

#[test]
fn shutdown_now_with_two_workers_never_leaks_or_runs_twice() {
    // Racing version: items may run or be dropped, but each is dropped
    // exactly once and runs at most once.
    const ITEMS: usize = 2000;
    let ran = Ledger::new(ITEMS);
    let dropped = Ledger::new(ITEMS);
    let r = ran.clone();
    let pool = Pool::builder()
        .workers(2)
        .build(move |item: Tracked, _: &WorkerContext<Tracked>| r.hit(item.id))
        .unwrap();
    for id in 0..ITEMS {
        pool.submit(Tracked {
            id,
            dropped: dropped.clone(),
        })
        .unwrap();
    }
    pool.shutdown_now();
    for id in 0..ITEMS {
        assert!(ran.count(id) <= 1, "item {id} ran twice");
    }
    dropped.assert_exactly_once();
    pool.shutdown_now(); // idempotent
}

#[test]
fn dropping_the_pool_runs_everything_queued() {
    const ITEMS: usize = 500;
    let ledger = Ledger::new(ITEMS);
    let l = ledger.clone();
    let pool = Pool::builder()
        .workers(2)
        .build(move |i: usize, _| l.hit(i))
        .unwrap();
    for i in 0..ITEMS {
        pool.submit(i).unwrap();
    }
    drop(pool);
    ledger.assert_exactly_once();
}

#[test]
fn a_panicking_item_does_not_lose_its_worker() {
    quiet_deliberate_panics();
    const ITEMS: usize = 200;
    let ledger = Ledger::new(ITEMS);
    let l = ledger.clone();
    let pool = Pool::builder()
        .workers(1)
        .build(move |i: usize, _| {
            l.hit(i);
            if i.is_multiple_of(10) {
                panic!("deliberate panic in item {i}");
            }
        })
        .unwrap();
    for i in 0..ITEMS {
        pool.submit(i).unwrap();
    }
    pool.shutdown();
    ledger.assert_exactly_once();
    let stats = pool.stats();
    assert_eq!(stats[0].panics, (ITEMS / 10) as u64);
    assert_eq!(stats[0].items_run, ITEMS as u64);
}

#[test]
fn panics_on_every_worker_leave_the_pool_working() {
    quiet_deliberate_panics();
    // Each worker panics once (barrier items make sure both do), then the
    // pool still runs a full tree.
    let barrier = Arc::new(Barrier::new(2));
    let ledger = Ledger::new(1000);
    let (b, l) = (barrier.clone(), ledger.clone());
    let pool = Pool::builder()
        .workers(2)
        .build(
            move |i: Option<usize>, ctx: &WorkerContext<Option<usize>>| match i {
                None => {
                    b.wait();
                    panic!("deliberate panic");
                }
                Some(i) => {
                    l.hit(i);
                    for c in [2 * i + 1, 2 * i + 2] {
                        if c < 1000 {
                            ctx.push(Some(c));
                        }
                    }
                }
            },
        )
        .unwrap();
    pool.submit(None).unwrap();
    pool.submit(None).unwrap();
    pool.submit(Some(0)).unwrap();
    pool.shutdown();
    ledger.assert_exactly_once();
    let stats = pool.stats();
    assert_eq!(stats[0].panics, 1, "{stats:?}");
    assert_eq!(stats[1].panics, 1, "{stats:?}");
}

#[test]
fn stats_count_each_source() {
    // One worker, so every count is deterministic.
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let pool = Pool::builder()
        .workers(1)
        .build(move |i: u32, ctx: &WorkerContext<u32>| {
            if i == 0 {
                started_tx.send(()).unwrap();
                release_rx.lock().unwrap().recv().unwrap();
                ctx.push(100); // local: counted as neither global nor inbox
            }
        })
        .unwrap();
    wait_until(|| pool.parked_workers() == 1);
    pool.submit(0).unwrap();
    started_rx.recv().unwrap();
    for i in 1..=3 {
        pool.submit(i).unwrap(); // global
    }
    for i in 4..=5 {
        pool.submit_to(0, i).unwrap(); // inbox
    }
    release_tx.send(()).unwrap();
    pool.shutdown();
    let s = pool.stats()[0];
    assert_eq!(s.items_run, 7);
    assert_eq!(s.global_pops, 4);
    assert_eq!(s.inbox_pops, 2);
    assert_eq!(s.items_stolen, 0);
    assert_eq!(s.steal_attempts, 0); // one worker: no victims
    assert_eq!(s.panics, 0);
    assert!(s.parks >= 1);
    assert!(
        s.spins >= 7,
        "a parked worker first spun and yielded: {s:?}"
    );
}

#[test]
fn submit_from_a_worker_goes_to_its_own_deque() {
    let slot: Arc<OnceLock<Weak<Pool<u32>>>> = Arc::new(OnceLock::new());
    type Seen = Arc<Mutex<Vec<(u32, Option<usize>)>>>;
    let seen: Seen = Arc::default();
    let (s, v) = (slot.clone(), seen.clone());
    let pool = Arc::new(
        Pool::builder()
            .workers(1)
            .build(move |i: u32, _: &WorkerContext<u32>| {
                let pool = s.get().and_then(Weak::upgrade).unwrap();
                v.lock().unwrap().push((i, pool.current_worker()));
                if i < 3 {
                    pool.submit(i + 1).unwrap();
                }
            })
            .unwrap(),
    );
    slot.set(Arc::downgrade(&pool)).unwrap();
    assert_eq!(pool.current_worker(), None);
    pool.submit(0).unwrap();
    pool.shutdown();
    assert_eq!(
        *seen.lock().unwrap(),
        [(0, Some(0)), (1, Some(0)), (2, Some(0)), (3, Some(0))]
    );
    // Only the first item came through the global queue.
    assert_eq!(pool.stats()[0].global_pops, 1);
}

#[test]
fn submit_to_rejects_unknown_workers() {
    let pool = Pool::builder().workers(2).build(|_: u8, _| {}).unwrap();
    assert_eq!(pool.submit_to(2, 1), Err(SubmitError::NoSuchWorker(1)));
    let err = pool.submit_to(9, 2).unwrap_err();
    assert_eq!(err.to_string(), "no worker with that index");
    assert_eq!(format!("{err:?}"), "NoSuchWorker(..)");
}

#[test]
fn shutdown_from_inside_a_worker_does_not_deadlock() {
    // The last handle to the pool is dropped by one of its own workers:
    // the pool shuts itself down without joining that worker.
    type Slot = Arc<OnceLock<Mutex<Option<Arc<Pool<u8>>>>>>;
    let slot: Slot = Arc::new(OnceLock::new());
    let (done_tx, done_rx): (Sender<()>, Receiver<()>) = mpsc::channel();
    let done_tx = Mutex::new(done_tx);
    let s = slot.clone();
    let pool = Arc::new(
        Pool::builder()
            .workers(2)
            .build(move |_: u8, _: &WorkerContext<u8>| {
                let pool = s.get().unwrap().lock().unwrap().take().unwrap();
                pool.shutdown();
                assert!(pool.is_shut_down());
                drop(pool); // the last reference: Drop runs here, on a worker
                done_tx.lock().unwrap().send(()).unwrap();
            })
            .unwrap(),
    );
    slot.set(Mutex::new(Some(pool.clone()))).unwrap();
    pool.submit(1).unwrap();
    drop(pool);
    done_rx.recv().unwrap();
}

mod random_forests {
    //! Property: for random worker counts, forest shapes and submission
    //! paths, every item runs exactly once and the counters agree.

    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        #[test]
        fn every_item_runs_once(
            workers in 1usize..4,
            tree in 1usize..40,
            trees in 1usize..20,
            routes in prop::collection::vec(0u8..3, 64),
        ) {
            let items = tree * trees;
            let ledger = Ledger::new(items);
            let l = ledger.clone();
            let pool = Pool::builder()
                .workers(workers)
                .build(move |id: usize, ctx: &WorkerContext<usize>| {
                    l.hit(id);
                    let start = id - id % tree;
                    let local = id - start;
                    for child in [2 * local + 1, 2 * local + 2] {
                        if child < tree {
                            let item = start + child;
                            match routes[item % routes.len()] {
                                0 => ctx.push(item),
                                1 => ctx.submit_to(item % ctx.workers(), item).unwrap(),
                                _ => ctx.inject(item),
                            }
                        }
                    }
                })
                .unwrap();
            for root in (0..items).step_by(tree) {
                pool.submit(root).unwrap();
            }
            pool.shutdown();
            ledger.assert_exactly_once();
            prop_assert_eq!(total(&pool.stats()).items_run, items as u64);
        }
    }
}
