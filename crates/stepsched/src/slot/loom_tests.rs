//! Loom models of the reservation counts shutdown waits for (see
//! "Reservations" at [`CounterLines`]): the two-pass sum, and the two
//! Dekker handshakes with `stopping`, run on the real counting code
//! (`reserve`, `release`, `all_released`, fences included). The caller's
//! part (its load of `stopping`, shutdown's store and fence) is written out
//! here as the scheduler does it.

use crossbeam_utils::CachePadded;

use super::{CounterLines, Counters};
use crate::primitive::sync::Arc;
use crate::primitive::sync::atomic::{AtomicBool, Ordering, fence};

/// One worker's line, then the shared lines.
fn lines() -> Arc<CounterLines> {
    Arc::new(
        (0..2)
            .map(|_| CachePadded::new(Counters::default()))
            .collect(),
    )
}

/// Shutdown adds the lines up while a process is reserved on the worker
/// and handed to another thread, which releases it on its own line. A
/// reservation held from the start is never released, so no sum may say
/// that everything was released. Reading `reserved` before `released`
/// fails here (the new pair counts one release without its reservation
/// and hides the held one), and so does a Relaxed release (the release is
/// read without the reservation before it).
#[test]
fn loom_a_reservation_made_and_released_between_the_passes_hides_nothing() {
    loom::model(|| {
        let lines = lines();
        // Held throughout: reserved by the worker, never released.
        lines.reserve(Some(0), 1);
        let handed = Arc::new(AtomicBool::new(false));
        let spawner = {
            let (lines, handed) = (lines.clone(), handed.clone());
            loom::thread::spawn(move || {
                lines.reserve(Some(0), 1);
                // The hand-off of the process (a run queue, in the
                // scheduler).
                handed.store(true, Ordering::Release);
            })
        };
        let finisher = {
            let (lines, handed) = (lines.clone(), handed.clone());
            loom::thread::spawn(move || {
                if handed.load(Ordering::Acquire) {
                    // Not a worker: a shared line, counted with an RMW.
                    lines.release(None);
                }
            })
        };
        assert!(
            !lines.all_released(),
            "a held reservation was summed as released"
        );
        spawner.join().unwrap();
        finisher.join().unwrap();
        assert!(!lines.all_released(), "still held after the race");
    });
}

/// A submit reserves and then checks `stopping` while shutdown stores
/// `stopping`, fences and adds the lines up. If the submit did not see
/// `stopping` (it goes on to publish its process), shutdown's sum must
/// count its reservation. Fails without the fence in `reserve`.
#[test]
fn loom_a_submit_that_misses_stopping_is_counted_by_shutdown() {
    loom::model(|| {
        let lines = lines();
        let stopping = Arc::new(AtomicBool::new(false));
        let submit = {
            let (lines, stopping) = (lines.clone(), stopping.clone());
            loom::thread::spawn(move || {
                lines.reserve(Some(0), 1);
                // Publishes when it does not see `stopping` (and then holds
                // the place for the rest of the model).
                !stopping.load(Ordering::SeqCst)
            })
        };
        stopping.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let drained = lines.all_released();
        let published = submit.join().unwrap();
        assert!(
            !(published && drained),
            "shutdown summed zero while a submit published"
        );
    });
}

/// A process's result is stored and its place released while shutdown
/// stores `stopping`, fences and adds the lines up. Either the releasing
/// thread sees `stopping` (and wakes shutdown's wait), or shutdown's sum
/// counts the release (and it does not wait): otherwise shutdown would
/// sleep until its deadline. Fails without the fence in `release`.
#[test]
fn loom_a_release_that_misses_stopping_is_counted_by_shutdown() {
    loom::model(|| {
        let lines = lines();
        lines.reserve(Some(0), 1);
        let stopping = Arc::new(AtomicBool::new(false));
        let finisher = {
            let (lines, stopping) = (lines.clone(), stopping.clone());
            loom::thread::spawn(move || {
                lines.release(Some(0));
                stopping.load(Ordering::SeqCst)
            })
        };
        stopping.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let drained = lines.all_released();
        let woke = finisher.join().unwrap();
        assert!(woke || drained, "a lost wake-up: shutdown would wait on");
    });
}
