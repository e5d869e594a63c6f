//! Unit tests of the crate-private pieces: the backoff ladder and the sleep
//! state machine driven by hand on one thread.

use crate::sleep::{Parked, Sleep};
use crate::worker::{Backoff, Found, Search, backoff};

#[test]
fn backoff_spins_then_yields_then_parks() {
    for failed in 1..4 {
        assert_eq!(backoff(failed), Backoff::Spin, "failed = {failed}");
    }
    for failed in 4..8 {
        assert_eq!(backoff(failed), Backoff::Yield, "failed = {failed}");
    }
    for failed in [8, 9, 1000] {
        assert_eq!(backoff(failed), Backoff::Park, "failed = {failed}");
    }
}

#[test]
fn park_with_work_pending_does_not_block() {
    let sleep = Sleep::new(2);
    sleep.start_searching();
    let mut blocked = false;
    let outcome = sleep.park(0, true, || true, || blocked = true);
    assert_eq!(outcome, Parked::Work);
    assert!(!blocked);
    // Back to searching, nobody registered asleep.
    assert_eq!(sleep.searching(), 1);
    assert_eq!(sleep.sleeping(), 0);
    assert!(sleep.stop_searching(), "the only searcher is the last one");
}

/// A waker may pick a worker between its registration and its re-check
/// (the re-check runs outside the list's lock). If the re-check then finds
/// work, the worker is already off the list and counted as searching; it
/// must consume the waker's token, or its next park would end at once
/// while it is still registered.
#[test]
fn a_recheck_that_finds_work_after_a_wake_consumes_the_token() {
    let sleep = Sleep::new(2);
    sleep.set_watching(true); // worker 0 sleeps without a time limit
    let mut blocked = false;
    let outcome = sleep.park(
        0,
        false,
        || {
            // A producer's wake-up lands between registration and re-check.
            sleep.notify_one(None);
            true
        },
        || blocked = true,
    );
    assert_eq!(outcome, Parked::Work);
    assert!(!blocked, "a worker that found work counts no park");
    assert!(
        !sleep.token_set(0),
        "the waker's token was left for the next park"
    );
    assert_eq!(sleep.sleeping(), 0);
    assert_eq!(
        sleep.searching(),
        1,
        "searching once, as the waker counted it"
    );
}

#[test]
fn last_sleeper_terminates_a_draining_pool() {
    let sleep = Sleep::new(1);
    sleep.begin_draining(|| true); // work queued: not over yet
    assert!(!sleep.is_terminated());
    let outcome = sleep.park(0, false, || false, || panic!("must not block"));
    assert_eq!(outcome, Parked::Exit);
    assert!(sleep.is_terminated());
}

#[test]
fn begin_draining_ends_an_idle_pool_at_once() {
    let sleep = std::sync::Arc::new(Sleep::new(1));
    let (tx, rx) = std::sync::mpsc::channel();
    let s = sleep.clone();
    let t = std::thread::spawn(move || s.park(0, false, || false, || tx.send(()).unwrap()));
    rx.recv().unwrap(); // about to block (it holds the lock until it waits)
    sleep.begin_draining(|| false);
    assert_eq!(t.join().unwrap(), Parked::Exit);
}

#[test]
fn notify_skips_when_someone_searches() {
    let sleep = std::sync::Arc::new(Sleep::new(2));
    // Another sleeper watches the next-item slots: this one sleeps without
    // a time limit.
    sleep.set_watching(true);
    let (tx, rx) = std::sync::mpsc::channel();
    let s = sleep.clone();
    let t = std::thread::spawn(move || s.park(1, false, || false, || tx.send(()).unwrap()));
    rx.recv().unwrap();
    assert_eq!(sleep.sleeping(), 1);
    sleep.start_searching();
    sleep.notify_one(None); // worker 0 searches: no wake-up
    assert_eq!(sleep.sleeping(), 1);
    assert!(sleep.stop_searching());
    sleep.notify_one(None); // nobody searches: worker 1 is woken
    assert_eq!(t.join().unwrap(), Parked::Woken);
    assert_eq!(sleep.sleeping(), 0);
    assert_eq!(sleep.searching(), 1, "the woken worker counts as searching");
}

#[test]
fn notify_prefers_the_named_sleeper() {
    let sleep = std::sync::Arc::new(Sleep::new(3));
    // Another sleeper watches: these sleep without a time limit.
    sleep.set_watching(true);
    let mut threads = Vec::new();
    for i in [1, 2] {
        let (tx, rx) = std::sync::mpsc::channel();
        let s = sleep.clone();
        threads.push(std::thread::spawn(move || {
            s.park(i, false, || false, || tx.send(()).unwrap())
        }));
        rx.recv().unwrap();
    }
    sleep.notify_one(Some(1));
    // Worker 1 woke (worker 2, parked last, would be the LIFO default).
    assert_eq!(threads.remove(0).join().unwrap(), Parked::Woken);
    assert_eq!(sleep.sleeping(), 1);
    sleep.terminate();
    assert_eq!(threads.remove(0).join().unwrap(), Parked::Exit);
}

#[test]
fn push_next_wakes_nobody_but_announces_what_it_displaces() {
    use std::sync::Arc;

    use stepsched_deque::Worker as Deque;

    use crate::shared::Shared;
    use crate::worker::WorkerContext;

    let deques = [Deque::new(), Deque::new()];
    let shared = Arc::new(Shared::new(
        deques.iter().map(Deque::stealer).collect(),
        Box::new(|_: u32, _: &WorkerContext<u32>| {}),
    ));
    let [mine, _theirs] = deques;
    // Worker 1 sleeps; nobody searches; some worker watches the next-item
    // slots (so that worker 1 sleeps without a time limit).
    shared.sleep.set_watching(true);
    let (tx, rx) = std::sync::mpsc::channel();
    let s = shared.clone();
    let t = std::thread::spawn(move || s.sleep.park(1, false, || false, || tx.send(()).unwrap()));
    rx.recv().unwrap();
    let ctx = WorkerContext::new(0, mine, shared.clone());
    ctx.push_next(1);
    assert_eq!(
        shared.sleep.sleeping(),
        1,
        "the item to run next woke a worker while one watches"
    );
    ctx.push_next(2);
    assert_eq!(
        shared.sleep.sleeping(),
        0,
        "the item displaced into the deque was not announced"
    );
    assert_eq!(t.join().unwrap(), Parked::Woken);
    assert_eq!(ctx.drain_local(), [2, 1], "both items are still queued");
}

/// A worker's context and search over a one-worker pool whose runner does
/// nothing: `find` is driven by hand.
fn lone_worker() -> (crate::worker::WorkerContext<u32>, crate::worker::Search) {
    use std::sync::Arc;

    use stepsched_deque::Worker as Deque;

    use crate::shared::Shared;
    use crate::worker::{Search, WorkerContext};

    let deque = Deque::new();
    let shared = Arc::new(Shared::new(
        vec![deque.stealer()],
        Box::new(|_: u32, _: &WorkerContext<u32>| {}),
    ));
    (WorkerContext::new(0, deque, shared), Search::new(0))
}

/// Takes the next item `find` returns (one exists).
fn found(search: &mut crate::worker::Search, ctx: &crate::worker::WorkerContext<u32>) -> u32 {
    match search.find(ctx) {
        crate::worker::Found::Item(item) => item,
        _ => panic!("an item is queued"),
    }
}

/// Two items that hand the next-item slot to each other forever (two
/// processes messaging each other) do not starve the item the first of
/// them displaced into the deque: it runs after at most `NEXT_STREAK`
/// of theirs. (Before the streak cap it never ran.)
#[test]
fn a_pair_handing_the_next_slot_back_and_forth_lets_the_deque_run() {
    use crate::worker::NEXT_STREAK;

    const VICTIM: u32 = 0;
    const A: u32 = 1;
    const B: u32 = 2;
    let (ctx, mut search) = lone_worker();
    // A's step wakes the victim, then B: B displaces the victim.
    ctx.push_next(VICTIM);
    ctx.push_next(B);
    for run in 1..=1000 {
        match found(&mut search, &ctx) {
            VICTIM => {
                assert!(
                    run <= NEXT_STREAK as usize + 1,
                    "the victim waited {run} runs"
                );
                return;
            }
            A => ctx.push_next(B),
            B => ctx.push_next(A),
            other => panic!("unexpected item {other}"),
        }
    }
    panic!("the pair kept the victim in the deque for 1000 runs");
}

/// When a chain of slot items reaches the streak cap, the deque's *oldest*
/// item runs next, not its newest: chains queued on one worker take turns
/// in the order they were queued. (With the newest, the chain pushed at
/// the previous cap ran again and the older items waited for the fairness
/// tick.)
#[test]
fn at_the_streak_cap_the_deques_oldest_item_runs() {
    use crate::worker::{FAIRNESS_INTERVAL, NEXT_STREAK};

    const OLD: u32 = 0;
    const NEW: u32 = 1;
    const A: u32 = 2;
    const B: u32 = 3;
    let (ctx, mut search) = lone_worker();
    ctx.push(OLD);
    ctx.push(NEW);
    ctx.push_next(A);
    let mut order = Vec::new();
    // Well inside one fairness interval, whose tick takes the oldest too.
    const { assert!(NEXT_STREAK + 2 < FAIRNESS_INTERVAL) };
    for _ in 0..=NEXT_STREAK {
        let item = found(&mut search, &ctx);
        order.push(item);
        match item {
            A => ctx.push_next(B),
            B => ctx.push_next(A),
            _ => break,
        }
    }
    let streak: Vec<u32> = [A, B]
        .into_iter()
        .cycle()
        .take(NEXT_STREAK as usize)
        .collect();
    assert_eq!(
        order[..NEXT_STREAK as usize],
        streak[..],
        "the slot's streak"
    );
    assert_eq!(
        order.last(),
        Some(&OLD),
        "after {NEXT_STREAK} slot items the oldest item runs: {order:?}"
    );
    // The slot's item went to the deque, and runs before the newer one.
    assert_eq!(
        found(&mut search, &ctx),
        if NEXT_STREAK.is_multiple_of(2) { A } else { B }
    );
    assert_eq!(found(&mut search, &ctx), NEW);
}

/// An item pushed first onto the deque runs within a fairness interval even
/// though every run pushes a newer one (which the owner's LIFO pop prefers).
#[test]
fn the_oldest_item_of_the_deque_runs_within_a_fairness_interval() {
    use crate::worker::FAIRNESS_INTERVAL;

    let (ctx, mut search) = lone_worker();
    ctx.push(0);
    ctx.push(1);
    let mut newest = 1;
    for run in 1..=1000 {
        match found(&mut search, &ctx) {
            0 => {
                assert!(
                    run <= FAIRNESS_INTERVAL as usize,
                    "the oldest waited {run} runs"
                );
                return;
            }
            _ => {
                newest += 1;
                ctx.push(newest);
            }
        }
    }
    panic!("the oldest item waited 1000 runs behind newer ones");
}

/// A submission to a pool whose workers all sleep wakes one of them: one
/// unpark, counted by the worker woken, and one park before it (each
/// worker parked once before the submission).
#[test]
fn a_wake_up_is_counted_by_the_worker_it_woke() {
    use std::time::{Duration, Instant};

    let (tx, rx) = std::sync::mpsc::channel();
    let pool = crate::Pool::builder()
        .workers(2)
        .build(move |n: u32, _| tx.send(n).unwrap())
        .unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    // Both workers asleep and blocked, neither watching (a registered
    // worker may still be re-checking, its park not yet counted; the hang
    // guard only bounds a failure).
    while !pool.shared.sleep.settled() {
        assert!(Instant::now() < until, "the workers never parked");
        std::thread::yield_now();
    }
    let before = pool
        .stats()
        .iter()
        .fold(Default::default(), |t: crate::WorkerStats, w| t.merged(w));
    assert_eq!(before.unparks, 0, "nothing woke a worker yet");
    assert!(before.parks >= 2);
    pool.submit(7).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(7));
    let after = pool
        .stats()
        .iter()
        .fold(Default::default(), |t: crate::WorkerStats, w| t.merged(w));
    assert!(
        after.unparks >= 1,
        "the submission woke a worker: {after:?}"
    );
    assert!(after.empty_unparks <= after.unparks);
}

/// At most half the workers (at least one) search at a time: a worker
/// refused stays out of the others' deques.
#[test]
fn searchers_are_capped_at_half_the_pool() {
    let sleep = Sleep::new(4);
    assert!(sleep.try_start_searching());
    assert!(sleep.try_start_searching());
    assert!(!sleep.try_start_searching(), "a third searcher of four");
    assert_eq!(sleep.searching(), 2);
    assert!(!sleep.stop_searching(), "one searcher is left");
    assert!(sleep.try_start_searching(), "below the cap again");
    // A pool of one or two lets one worker search.
    for workers in [1, 2] {
        let sleep = Sleep::new(workers);
        assert!(sleep.try_start_searching());
        assert!(!sleep.try_start_searching());
    }
}

/// With nobody searching and nobody watching the next-item slots, an item
/// kept to run next wakes one sleeper, to watch it should the owner's run
/// go on for long (it is not announced as work: the owner runs it).
#[test]
fn push_next_wakes_a_watcher_when_nobody_watches() {
    use std::sync::Arc;

    use stepsched_deque::Worker as Deque;

    use crate::shared::Shared;
    use crate::worker::WorkerContext;

    let deques = [Deque::new(), Deque::new()];
    let shared = Arc::new(Shared::new(
        deques.iter().map(Deque::stealer).collect(),
        Box::new(|_: u32, _: &WorkerContext<u32>| {}),
    ));
    let [mine, _theirs] = deques;
    // Worker 1 sleeps without a time limit (a watcher was pretended while
    // it parked), then the pretence ends: nobody watches.
    shared.sleep.set_watching(true);
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let s = shared.clone();
    std::thread::spawn(move || {
        let parked = s.sleep.park(1, false, || false, || tx.send(()).unwrap());
        done_tx.send(parked).unwrap();
    });
    rx.recv().unwrap();
    shared.sleep.set_watching(false);
    let ctx = WorkerContext::new(0, mine, shared.clone());
    ctx.push_next(1);
    // The time limit only bounds a failure (a sleeper never woken).
    let parked = done_rx.recv_timeout(std::time::Duration::from_secs(20));
    if parked.is_err() {
        shared.sleep.terminate();
    }
    assert_eq!(parked, Ok(Parked::Woken), "the sleeper was woken to watch");
    assert_eq!(shared.sleep.sleeping(), 0);
    assert_eq!(ctx.drain_local(), [1], "the item stays the owner's");
}

/// A thief takes an item from another worker's next-item slot only when
/// it finds it there twice with the owner's run count unchanged: the owner
/// is stuck in the run that filled it.
#[test]
fn a_next_item_is_taken_only_from_an_owner_stuck_in_its_run() {
    let (owner, thief, shared) = owner_and_thief();
    let mut search = Search::new(1).with_stuck(std::time::Duration::ZERO);
    let mut find = || match search.find(&thief) {
        Found::Item(item) => Some(item),
        _ => None,
    };
    owner.push_next(7);
    assert_eq!(
        find(),
        None,
        "first sight: the owner may take it any moment"
    );
    // The owner starts another run: its count moves.
    shared.nexts[0].count_run();
    assert_eq!(find(), None, "the owner moved on since: not stuck");
    assert_eq!(find(), Some(7), "the same run twice: taken");
    assert_eq!(owner.drain_local(), Vec::<u32>::new(), "taken once");
}

/// ... and only once the owner has stayed in that run for the time limit:
/// searches in quick succession see a chain's owner in one run too.
#[test]
fn a_next_item_is_not_taken_before_its_owner_was_stuck_for_the_limit() {
    let (owner, thief, _shared) = owner_and_thief();
    let mut search = Search::new(1).with_stuck(std::time::Duration::from_secs(3600));
    owner.push_next(7);
    for _ in 0..100 {
        assert!(
            !matches!(search.find(&thief), Found::Item(_)),
            "taken before the owner was stuck for the limit"
        );
    }
    assert_eq!(owner.drain_local(), vec![7], "still the owner's");
}

/// A searching worker takes an item waiting in another worker's inbox
/// (its look is `Queue::try_pop`: two loads, then the pop), and an empty
/// inbox answers nothing.
#[test]
fn a_thief_takes_an_item_from_another_workers_inbox() {
    let (owner, thief, shared) = owner_and_thief();
    assert_eq!(shared.inboxes[0].try_pop(), None, "empty");
    let mut search = Search::new(1);
    assert!(
        !matches!(search.find(&thief), Found::Item(_)),
        "nothing anywhere yet"
    );
    shared.inboxes[0].push(9);
    assert!(
        matches!(search.find(&thief), Found::Item(9)),
        "the owner's inbox item, taken by the thief"
    );
    assert!(shared.inboxes[0].is_empty(), "taken once");
    assert_eq!(owner.drain_local(), Vec::<u32>::new());
}

/// An owner (worker 0) and a thief (worker 1) of one pool, nobody parked,
/// and a watcher pretended (so `push_next` wakes nobody).
fn owner_and_thief() -> (
    crate::worker::WorkerContext<u32>,
    crate::worker::WorkerContext<u32>,
    std::sync::Arc<crate::shared::Shared<u32>>,
) {
    use std::sync::Arc;

    use stepsched_deque::Worker as Deque;

    use crate::shared::Shared;
    use crate::worker::WorkerContext;

    let deques = [Deque::new(), Deque::new()];
    let shared = Arc::new(Shared::new(
        deques.iter().map(Deque::stealer).collect(),
        Box::new(|_: u32, _: &WorkerContext<u32>| {}),
    ));
    shared.sleep.set_watching(true);
    let [owner_deque, thief_deque] = deques;
    let owner = WorkerContext::new(0, owner_deque, shared.clone());
    let thief = WorkerContext::new(1, thief_deque, shared.clone());
    (owner, thief, shared)
}

/// While another worker is awake, one sleeper watches: it sleeps with a
/// time limit and comes back searching when it runs out (a wait it ends
/// itself, not a wake-up by a producer).
#[test]
fn one_sleeper_watches_while_another_worker_is_awake() {
    let sleep = std::sync::Arc::new(Sleep::new(2));
    // Worker 0 is awake (not registered); worker 1 parks and watches.
    let s = sleep.clone();
    let outcome = std::thread::spawn(move || s.park(1, false, || false, || {}))
        .join()
        .unwrap();
    assert_eq!(outcome, Parked::Watched);
    assert_eq!(sleep.sleeping(), 0, "the watcher took itself off the list");
    assert_eq!(sleep.searching(), 1, "and searches");
}

/// A submission to an idle pool wakes exactly one worker. "Idle" means
/// settled: every worker registered and none watching. A watcher (the
/// first worker to park while others still spun) comes back searching when
/// its 1 ms runs out and parks again, so a pool whose workers are all
/// registered is not yet still; and a submission made while the watcher
/// searches wakes nobody, since the watcher takes it.
#[test]
fn idle_pool_parks_and_one_submission_wakes_one_worker() {
    use std::sync::Mutex;
    use std::sync::mpsc;

    use crate::worker::WorkerContext;

    /// Lets the blocked item end even if an assertion fails first, so that
    /// the pool's drop can join its workers (a failure, never a hang).
    struct Release(mpsc::Sender<()>);
    impl Drop for Release {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }

    const WORKERS: usize = 4;
    let (started_tx, started_rx) = mpsc::channel::<usize>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let pool = crate::Pool::builder()
        .workers(WORKERS)
        .build(move |(): (), ctx: &WorkerContext<()>| {
            started_tx.send(ctx.index()).unwrap();
            release_rx.lock().unwrap().recv().unwrap();
        })
        .unwrap();
    let release = Release(release_tx);
    let wait_until = |cond: &dyn Fn() -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !cond() {
            assert!(std::time::Instant::now() < deadline, "hang guard: 60 s");
            std::thread::yield_now();
        }
    };
    wait_until(&|| pool.shared.sleep.settled());
    let before = pool.stats();
    assert!(before.iter().all(|s| s.parks >= 1), "{before:?}");

    pool.submit(()).unwrap();
    let runner = started_rx.recv().unwrap();
    // Exactly one worker was woken: the woken one found the item, and
    // nothing else was queued, so it woke nobody else; the others sleep
    // without a time limit, so none of them parked again.
    assert_eq!(pool.parked_workers(), WORKERS - 1);
    let after = pool.stats();
    let unparks: u64 = after.iter().map(|s| s.unparks).sum::<u64>()
        - before.iter().map(|s| s.unparks).sum::<u64>();
    assert_eq!(unparks, 1, "{after:?}");
    for (w, s) in after.iter().enumerate() {
        assert_eq!(
            s.parks, before[w].parks,
            "worker {w} parked again: it had been woken"
        );
    }
    assert_eq!(after[runner].items_run, 0); // still running its first item
    drop(release);
    wait_until(&|| pool.parked_workers() == WORKERS);
    assert_eq!(pool.stats().iter().map(|s| s.items_run).sum::<u64>(), 1);
}
