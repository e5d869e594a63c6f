//! The join handle: blocking `join`, `is_finished`, and the handle as a
//! `Future` (polled by a tiny executor, and by hand with a counting
//! waker).
#![cfg(not(stepsched_loom))]

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;

use common::*;
use stepsched::{Completer, Error};

#[test]
fn blocking_join_and_is_finished() {
    let s = Builder::new().workers(2).build().unwrap();
    let probe = Probe::new();
    let h = s
        .submit(pid(1), idle_until_message(&probe), "main", 0)
        .unwrap();
    assert_eq!(h.pid(), pid(1));
    probe.wait_steps(1);
    assert!(!h.is_finished());
    assert!(format!("{h:?}").contains("JoinHandle"));
    s.send(pid(1), 5).unwrap();
    let waiter = thread::spawn(move || h.join());
    assert_eq!(waiter.join().unwrap().unwrap(), 5);
}

#[test]
fn join_handle_as_a_future() {
    let s = Builder::new()
        .workers(2)
        .handler("x", |c: Cmd, done: Completer<FnProc>| {
            thread::spawn(move || done.complete(Ok(c.arg + 1)));
        })
        .build()
        .unwrap();
    let (tx, _rx) = std::sync::mpsc::channel();
    let probe = Probe::new();
    let h = s
        .submit(
            pid(2),
            yielder(&probe, vec![(1, cmd("x", 41))], tx),
            "main",
            0,
        )
        .unwrap();
    assert_eq!(block_on(h).unwrap(), 42);
    // Several at once, awaited in one future.
    let handles: Vec<_> = (0..10)
        .map(|i| {
            let p = Probe::new();
            s.submit(s.allocate_pid(), done_at_once(&p, i), "main", 0)
                .unwrap()
        })
        .collect();
    let sum = block_on(async move {
        let mut sum = 0;
        for h in handles {
            sum += h.await.unwrap();
        }
        sum
    });
    assert_eq!(sum, 45);
}

struct CountWakes(AtomicUsize);

impl Wake for CountWakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn polling_registers_the_waker_and_completion_wakes_it() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let mut h = s
        .submit(pid(3), idle_until_message(&probe), "main", 0)
        .unwrap();
    let wakes = Arc::new(CountWakes(AtomicUsize::new(0)));
    let waker = Waker::from(wakes.clone());
    let mut cx = Context::from_waker(&waker);
    assert!(Pin::new(&mut h).poll(&mut cx).is_pending());
    // Polling again with the same waker keeps one registration.
    assert!(Pin::new(&mut h).poll(&mut cx).is_pending());
    assert_eq!(wakes.0.load(Ordering::SeqCst), 0);
    s.terminate(pid(3)).unwrap();
    assert_eq!(
        wakes.0.load(Ordering::SeqCst),
        1,
        "terminate of an idle process is at once"
    );
    match Pin::new(&mut h).poll(&mut cx) {
        Poll::Ready(Err(Error::Terminated)) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn dropping_the_handle_leaves_the_process_running() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    drop(
        s.submit(pid(4), idle_until_message(&probe), "main", 0)
            .unwrap(),
    );
    probe.wait_steps(1);
    assert!(s.contains(pid(4)));
    s.send(pid(4), 1).unwrap();
    probe.wait_closed(1);
    assert_eq!(probe.steps(), 2);
}

/// A handle's process and a spawned child both finish before shutdown
/// returns: the handle then reads its result at once, with no wait (the
/// result cell was marked done when it was stored, not only when a
/// child's was).
#[test]
fn a_handle_sees_the_result_once_the_workers_stopped() {
    let s = Builder::new().workers(2).build().unwrap();
    let probe = Probe::new();
    let child = Probe::new();
    let parent = FnProc::new(&probe, {
        let child = child.clone();
        move |_, out, ctx| {
            ctx.spawn(done_at_once(&child, 1), "main", 0)
                .map_err(|_| Error::failed("the child was refused"))?;
            out.set_status(stepsched::Status::Done(7));
            Ok(())
        }
    });
    let h = s.submit(pid(1), parent, "main", 0).unwrap();
    // Both have stepped (and spawned) before shutdown begins.
    probe.wait_steps(1);
    child.wait_steps(1);
    let report = s.shutdown(std::time::Duration::from_secs(60)).unwrap();
    assert_eq!(report.forced, 0, "both processes ended by themselves");
    assert!(
        h.is_finished(),
        "the result was stored without marking it done"
    );
    assert_eq!(
        h.join_timeout(std::time::Duration::ZERO).ok(),
        Some(Ok(7)),
        "the result is there at once"
    );
}

/// A waker that panics when woken.
struct PanicsOnWake;

impl Wake for PanicsOnWake {
    fn wake(self: Arc<Self>) {
        panic!("this waker panics");
    }
}

/// A join handle's waker that panics when the process completes: the
/// panic is the waker's, not the scheduler's, so it does not reach the
/// thread that completed the process (here the caller of `terminate`,
/// which forces an idle process on its own thread), and the completion is
/// still published.
#[test]
fn a_panicking_join_waker_does_not_reach_the_completer() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let mut h = s
        .submit(pid(5), idle_until_message(&probe), "main", 0)
        .unwrap();
    let waker = Waker::from(Arc::new(PanicsOnWake));
    assert!(
        Pin::new(&mut h)
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
    // Parked (Idle), so that `terminate` completes it on this thread: a
    // step that has returned may still be finishing its run.
    let until = std::time::Instant::now() + HANG;
    while s.stats().idle != 1 {
        assert!(
            std::time::Instant::now() < until,
            "hung waiting for the park"
        );
        thread::yield_now();
    }
    let terminated = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.terminate(pid(5))));
    assert!(
        matches!(terminated, Ok(Ok(()))),
        "the waker's panic reached the caller of terminate"
    );
    assert!(h.is_finished(), "the result was published");
    assert_eq!(
        h.join_timeout(std::time::Duration::ZERO).ok(),
        Some(Err(Error::Terminated))
    );
    assert_eq!(s.stats().failed, 1, "the completion was counted");
}

/// A handle dropped after a pending poll lets go of its waker at once,
/// though its process lives on (a future dropped by a `select!` or a
/// timeout must not keep its task's waker alive).
#[test]
fn dropping_a_polled_handle_releases_its_waker() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let mut h = s
        .submit(pid(6), idle_until_message(&probe), "main", 0)
        .unwrap();
    let wakes = Arc::new(CountWakes(AtomicUsize::new(0)));
    let waker = Waker::from(wakes.clone());
    assert!(
        Pin::new(&mut h)
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
    drop(waker);
    assert_eq!(Arc::strong_count(&wakes), 2, "the cell holds the waker");
    drop(h);
    assert_eq!(
        Arc::strong_count(&wakes),
        1,
        "the dropped handle kept its waker"
    );
    assert!(s.contains(pid(6)), "the process lives on");
    s.send(pid(6), 1).unwrap();
    probe.wait_closed(1);
    assert_eq!(
        wakes.0.load(Ordering::SeqCst),
        0,
        "nobody woke a dropped handle"
    );
}
