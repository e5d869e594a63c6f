//! Loom models of the whole pool, through its public API.
//!
//! Each model starts a real two-worker pool (loom threads, loom atomics and
//! locks; the global queue and inboxes are a loom mutex-protected queue
//! under loom, and the backoff ladder is one yield then park), races a
//! submission against workers going to sleep, and then *waits for the item
//! to run* before shutting down. A lost wake-up leaves every thread
//! blocked — the waiting model thread and the parked workers — which loom
//! reports as a deadlock: that is the "parked with work pending" predicate.
//! After shutdown each model checks its ledger: every accepted item ran
//! exactly once.
//!
//! The models sit in a module named `loom_models` so that `cargo xtask
//! loom`'s name filter (`loom`) selects them. Run with:
//! `RUSTFLAGS="--cfg stepsched_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p stepsched-pool --features loom --lib --test loom`
#![cfg(stepsched_loom)]

/// The whole-pool models.
mod loom_models {
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use loom::sync::{Arc, Condvar, Mutex};
    use loom::thread;
    use stepsched_pool::{Pool, SubmitError, WorkerContext};

    /// A per-item ledger whose owner can wait for a number of runs.
    struct Ledger {
        runs: Mutex<Vec<usize>>,
        changed: Condvar,
    }

    impl Ledger {
        fn new(items: usize) -> Arc<Self> {
            Arc::new(Ledger {
                runs: Mutex::new(vec![0; items]),
                changed: Condvar::new(),
            })
        }

        fn hit(&self, id: usize) {
            self.runs.lock().unwrap()[id] += 1;
            self.changed.notify_all();
        }

        /// Blocks until the items in `ids` have each run at least once.
        fn wait_for(&self, ids: &[usize]) {
            let mut runs = self.runs.lock().unwrap();
            while ids.iter().any(|&id| runs[id] == 0) {
                runs = self.changed.wait(runs).unwrap();
            }
        }

        fn runs(&self) -> Vec<usize> {
            self.runs.lock().unwrap().clone()
        }
    }

    fn two_workers(ledger: &Arc<Ledger>) -> Pool<usize> {
        let l = ledger.clone();
        Pool::builder()
            .workers(2)
            .build(move |id: usize, _: &WorkerContext<usize>| l.hit(id))
            .unwrap()
    }

    #[test]
    fn global_submission_races_parking() {
        loom::model(|| {
            let ledger = Ledger::new(1);
            let pool = two_workers(&ledger);
            pool.submit(0).unwrap();
            ledger.wait_for(&[0]);
            pool.shutdown();
            assert_eq!(ledger.runs(), [1]);
        });
    }

    #[test]
    fn inbox_submission_races_parking() {
        loom::model(|| {
            let ledger = Ledger::new(1);
            let pool = two_workers(&ledger);
            pool.submit_to(1, 0).unwrap();
            ledger.wait_for(&[0]);
            pool.shutdown();
            assert_eq!(ledger.runs(), [1]);
        });
    }

    #[test]
    fn victim_deque_push_races_parking() {
        // Item 0 pushes items 1 and 2 on its own worker's deque and then blocks
        // until both have run: only the other worker can run them, so it must
        // be woken (or must not park) although it may be going to sleep while
        // the pushes happen.
        loom::model(|| {
            let ledger = Ledger::new(3);
            let l = ledger.clone();
            let pool = Pool::builder()
                .workers(2)
                .build(move |id: usize, ctx: &WorkerContext<usize>| {
                    l.hit(id);
                    if id == 0 {
                        ctx.push(1);
                        ctx.push(2);
                        l.wait_for(&[1, 2]);
                    }
                })
                .unwrap();
            pool.submit(0).unwrap();
            ledger.wait_for(&[0, 1, 2]);
            pool.shutdown();
            assert_eq!(ledger.runs(), [1, 1, 1]);
        });
    }

    #[test]
    fn searcher_finds_one_item_and_must_wake_for_the_next() {
        // Two submissions: the second producer may skip its wake-up because
        // the worker woken by the first still searches. That worker runs item
        // 0, which blocks until item 1 has run elsewhere: the last searcher
        // must re-check and wake the other worker for item 1.
        loom::model(|| {
            let ledger = Ledger::new(2);
            let l = ledger.clone();
            let pool = Pool::builder()
                .workers(2)
                .build(move |id: usize, _: &WorkerContext<usize>| {
                    l.hit(id);
                    if id == 0 {
                        l.wait_for(&[1]);
                    }
                })
                .unwrap();
            pool.submit(0).unwrap();
            pool.submit(1).unwrap();
            ledger.wait_for(&[0, 1]);
            pool.shutdown();
            assert_eq!(ledger.runs(), [1, 1]);
        });
    }

    #[test]
    fn shutdown_races_submission() {
        // A submitter races `shutdown`: the item is either refused (and handed
        // back) or accepted and then run exactly once before shutdown returns.
        loom::model(|| {
            let ledger = Ledger::new(1);
            let pool = Arc::new(two_workers(&ledger));
            let p = pool.clone();
            let submitter = thread::spawn(move || p.submit(0));
            pool.shutdown();
            let accepted = match submitter.join().unwrap() {
                Ok(()) => true,
                Err(SubmitError::ShutDown(0)) => false,
                Err(e) => panic!("unexpected {e:?}"),
            };
            assert_eq!(ledger.runs(), [usize::from(accepted)]);
        });
    }

    /// An item that counts its drops.
    struct Tracked(Arc<AtomicUsize>);

    impl Drop for Tracked {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn shutdown_now_races_submission() {
        // A submitter races `shutdown_now`: an accepted item runs at most once
        // and is dropped exactly once; a refused one comes back.
        loom::model(|| {
            let ran = Arc::new(AtomicUsize::new(0));
            let drops = Arc::new(AtomicUsize::new(0));
            let r = ran.clone();
            let pool = Arc::new(
                Pool::builder()
                    .workers(2)
                    .build(move |_: Tracked, _: &WorkerContext<Tracked>| {
                        r.fetch_add(1, Ordering::SeqCst);
                    })
                    .unwrap(),
            );
            let p = pool.clone();
            let d = drops.clone();
            let submitter = thread::spawn(move || p.submit(Tracked(d)).is_ok());
            pool.shutdown_now();
            let accepted = submitter.join().unwrap();
            assert!(ran.load(Ordering::SeqCst) <= usize::from(accepted));
            assert_eq!(
                drops.load(Ordering::SeqCst),
                1,
                "dropped once, accepted or not"
            );
        });
    }
}
