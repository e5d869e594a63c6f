//! Shutdown: cooperative processes finish on their cancel event; those
//! that ignore it, or wait on handlers that never complete, are forced at
//! the deadline; a step that never returns does not hold shutdown; every
//! join handle resolves and every process is closed once; submits racing
//! shutdown either fail with `Stopping` or complete. On a worker the
//! blocking `Scheduler::shutdown` refuses, while `begin_shutdown` and the
//! scheduler's drop start the shutdown on a thread of its own.
#![cfg(not(stepsched_loom))]

mod common;

use std::sync::mpsc::channel;
use std::sync::{Arc, Barrier, Mutex, OnceLock, Weak};
use std::thread;
use std::time::Duration;

use common::*;
use stepsched::{
    Completer, Error, Event, JoinHandle, Pid, Shutdown, ShutdownError, Status, SubmitError,
};

/// Idle until cancelled; finishes with `Cancelled` on the cancel event,
/// after checking the cancel token agrees.
fn cooperative(probe: &Arc<Probe>) -> FnProc {
    FnProc::new(probe, |events, out, ctx| {
        for e in events {
            if e.is_cancel() {
                assert!(
                    ctx.is_cancelled(),
                    "the token is cancelled before the event"
                );
                return Err(Error::Cancelled);
            }
        }
        out.set_status(Status::Idle);
        Ok(())
    })
}

/// Idle forever: ignores the cancel event.
fn deaf(probe: &Arc<Probe>) -> FnProc {
    FnProc::new(probe, |_, out, _| {
        out.set_status(Status::Idle);
        Ok(())
    })
}

/// Blocked forever on a yield whose handler never completes; ignores
/// cancel.
fn stuck_on_yield(probe: &Arc<Probe>) -> FnProc {
    let mut first = true;
    FnProc::new(probe, move |_, out, _| {
        if std::mem::take(&mut first) {
            out.push_yield(1, cmd("never", 0));
        }
        out.set_status(Status::Yield);
        Ok(())
    })
}

fn never_completing() -> impl Fn(Cmd, Completer<FnProc>) + Send + Sync + 'static {
    let held = Mutex::new(Vec::new());
    move |_, done| held.lock().unwrap().push(done)
}

fn scheduler(workers: usize, completed: &Arc<Ledger<Pid>>) -> Sched {
    let completed = completed.clone();
    Builder::new()
        .workers(workers)
        .handler("never", never_completing())
        .on_complete(move |pid, _| completed.record(pid))
        .build()
        .unwrap()
}

#[test]
fn cooperative_processes_finish_on_cancel() {
    let completed = Ledger::new();
    let s = scheduler(2, &completed);
    let probes: Vec<_> = (0..20).map(|_| Probe::new()).collect();
    let handles: Vec<_> = probes
        .iter()
        .enumerate()
        .map(|(i, p)| s.submit(pid(i as u64), cooperative(p), "main", 0).unwrap())
        .collect();
    for p in &probes {
        p.wait_steps(1);
    }
    let report = s.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(report.cancelled, 20);
    assert_eq!(report.forced, 0);
    assert!(report.workers_joined);
    for h in handles {
        assert!(h.is_finished(), "shutdown returned before a result");
        assert!(matches!(h.join(), Err(Error::Cancelled)));
    }
    for p in &probes {
        assert_eq!(
            p.counts(),
            Counts {
                inits: 1,
                steps: 2,
                closes: 1
            }
        );
        assert_eq!(p.overlaps(), 0);
    }
    completed.assert_exactly_once((0..20).map(pid));
    let stats = s.stats();
    assert_eq!((stats.submitted, stats.failed, stats.live), (20, 20, 0));
}

#[test]
fn processes_that_ignore_cancel_or_wait_forever_are_forced() {
    let completed = Ledger::new();
    let s = scheduler(2, &completed);
    let mut all = Vec::new();
    for i in 0..9u64 {
        let probe = Probe::new();
        let p = match i % 3 {
            0 => cooperative(&probe),
            1 => deaf(&probe),
            _ => stuck_on_yield(&probe),
        };
        let h = s.submit(pid(i), p, "main", 0).unwrap();
        all.push((i, probe, h));
    }
    for (_, p, _) in &all {
        p.wait_steps(1);
    }
    let report = s.shutdown(Duration::from_millis(50)).unwrap();
    assert_eq!(report.cancelled, 9);
    assert_eq!(report.forced, 6);
    assert!(report.workers_joined);
    for (i, probe, h) in all {
        assert!(h.is_finished());
        assert!(matches!(h.join(), Err(Error::Cancelled)));
        assert_eq!(probe.closes(), 1, "process {i}");
    }
    completed.assert_exactly_once((0..9).map(pid));
    assert_eq!(s.stats().live, 0);
}

#[test]
fn a_step_that_never_returns_does_not_hold_shutdown() {
    let completed = Ledger::new();
    let s = scheduler(1, &completed);
    let probe = Probe::new();
    let (entered, in_step) = channel();
    let release = Arc::new(Barrier::new(2));
    let held = release.clone();
    let p = FnProc::new(&probe, move |_, out, _| {
        entered.send(()).unwrap();
        held.wait();
        out.set_status(Status::Idle);
        Ok(())
    });
    let h = s.submit(pid(1), p, "main", 0).unwrap();
    in_step.recv().unwrap();
    let report = s.shutdown(Duration::from_millis(20)).unwrap();
    assert_eq!((report.cancelled, report.forced), (1, 1));
    assert!(!report.workers_joined, "the worker is stuck in the step");
    // The result is published even though the step has not returned.
    assert!(matches!(join(h), Err(Error::Cancelled)));
    completed.assert_exactly_once([pid(1)]);
    // When the step returns, the worker closes the process, once.
    release.wait();
    probe.wait_closed(1);
    assert_eq!(
        probe.counts(),
        Counts {
            inits: 1,
            steps: 1,
            closes: 1
        }
    );
}

#[test]
fn submit_after_shutdown_is_refused_and_shutdown_is_idempotent() {
    let completed = Ledger::new();
    let s = scheduler(2, &completed);
    let report = s.shutdown(Duration::from_secs(1)).unwrap();
    assert_eq!((report.cancelled, report.forced), (0, 0));
    assert!(report.workers_joined);
    let probe = Probe::new();
    let err = s
        .submit(pid(1), cooperative(&probe), "main", 0)
        .unwrap_err();
    assert!(matches!(err, SubmitError::Stopping(_)), "{err:?}");
    assert!(err.into_process().is_some());
    assert_eq!(
        probe.counts(),
        Counts::default(),
        "a refused process is not initialized"
    );
    let again = s.shutdown(Duration::from_secs(1)).unwrap();
    assert_eq!((again.cancelled, again.forced), (0, 0));
    assert!(matches!(
        s.send(pid(1), 1),
        Err(stepsched::SendError::UnknownPid(..))
    ));
}

#[test]
fn dropping_the_scheduler_shuts_it_down() {
    let completed = Ledger::new();
    let s = scheduler(2, &completed);
    let coop = Probe::new();
    let deaf_probe = Probe::new();
    let h1 = s.submit(pid(1), cooperative(&coop), "main", 0).unwrap();
    let h2 = s.submit(pid(2), deaf(&deaf_probe), "main", 0).unwrap();
    coop.wait_steps(1);
    deaf_probe.wait_steps(1);
    drop(s);
    assert!(matches!(h1.join(), Err(Error::Cancelled)));
    assert!(matches!(h2.join(), Err(Error::Cancelled)));
    assert_eq!(coop.closes(), 1);
    assert_eq!(deaf_probe.closes(), 1);
}

/// Submitters race a shutdown; every accepted process must complete (it
/// gets its cancel event, or is forced) and be closed once.
fn race_submits_with_shutdown(deadline: Duration, ignore_cancel: bool, rounds: usize) {
    const SUBMITTERS: usize = 2;
    for round in 0..rounds {
        let completed = Ledger::new();
        let s = Arc::new(scheduler(2, &completed));
        let barrier = Arc::new(Barrier::new(SUBMITTERS + 1));
        let threads: Vec<_> = (0..SUBMITTERS)
            .map(|t| {
                let (s, barrier) = (s.clone(), barrier.clone());
                thread::spawn(move || {
                    barrier.wait();
                    let mut accepted: Vec<(JoinHandle<FnProc>, Arc<Probe>)> = Vec::new();
                    for i in 0.. {
                        let probe = Probe::new();
                        let p = if ignore_cancel {
                            deaf(&probe)
                        } else {
                            cooperative(&probe)
                        };
                        let pid = Pid::new(t as u32, i);
                        match s.submit(pid, p, "main", 0) {
                            Ok(h) => accepted.push((h, probe)),
                            Err(SubmitError::Stopping(_)) => break,
                            Err(e) => panic!("unexpected {e:?}"),
                        }
                    }
                    accepted
                })
            })
            .collect();
        barrier.wait();
        let report = s.shutdown(deadline).unwrap();
        assert!(report.workers_joined);
        let mut n = 0;
        for t in threads {
            for (h, probe) in t.join().unwrap() {
                let pid = h.pid();
                let r = join(h);
                assert!(
                    matches!(r, Err(Error::Cancelled)),
                    "round {round} {pid}: {r:?}"
                );
                probe.wait_closed(1);
                assert_eq!(probe.closes(), 1);
                assert_eq!(completed.count(&pid), 1);
                n += 1;
            }
        }
        assert_eq!(completed.total(), n);
        assert_eq!(s.stats().live, 0);
    }
}

#[test]
fn submits_racing_shutdown_complete_or_fail_with_stopping() {
    race_submits_with_shutdown(Duration::from_secs(5), false, 20);
}

#[test]
fn submits_racing_a_zero_deadline_shutdown_never_hang() {
    race_submits_with_shutdown(Duration::ZERO, true, 40);
}

#[test]
fn a_racing_second_shutdown_waits_for_the_first() {
    let completed = Ledger::new();
    let s = Arc::new(scheduler(2, &completed));
    let probe = Probe::new();
    let h = s.submit(pid(1), deaf(&probe), "main", 0).unwrap();
    probe.wait_steps(1);
    let barrier = Arc::new(Barrier::new(2));
    let other = {
        let (s, barrier) = (s.clone(), barrier.clone());
        thread::spawn(move || {
            barrier.wait();
            s.shutdown(Duration::from_millis(50)).unwrap()
        })
    };
    barrier.wait();
    let mine = s.shutdown(Duration::from_millis(50)).unwrap();
    // Whichever call came second returned only after the first forced
    // the process.
    assert!(h.is_finished());
    let theirs = other.join().unwrap();
    assert!(h.is_finished());
    assert_eq!(mine.forced + theirs.forced, 1);
    assert!(mine.workers_joined && theirs.workers_joined);
    assert!(matches!(h.join(), Err(Error::Cancelled)));
    assert_eq!(probe.closes(), 1);
}

/// The shutdown hooks run once each, in order, after every process has
/// ended with its result published and been closed, whatever ends the
/// scheduler (a shutdown, a second one, the drop); a panicking hook does
/// not keep the next from running.
#[test]
fn shutdown_hooks_run_once_after_every_process_ended() {
    let probe = Probe::new();
    let deaf_probe = Probe::new();
    let (tx, rx) = channel::<(&str, bool, usize)>();
    let (p1, p2) = (probe.clone(), deaf_probe.clone());
    let seen: Arc<Mutex<Vec<JoinHandle<FnProc>>>> = Arc::new(Mutex::new(Vec::new()));
    let held = seen.clone();
    let tx2 = tx.clone();
    let s: Sched = Builder::new()
        .workers(2)
        .handler("never", never_completing())
        .on_shutdown(move || {
            // Every process has its result and was closed once.
            let all_done = held.lock().unwrap().iter().all(JoinHandle::is_finished);
            tx.send(("first", all_done, p1.closes() + p2.closes()))
                .unwrap();
        })
        .on_shutdown(|| panic!("a hook that panics"))
        .on_shutdown(move || tx2.send(("last", true, 0)).unwrap())
        .build()
        .unwrap();
    let h1 = s.submit(pid(1), cooperative(&probe), "main", 0).unwrap();
    let h2 = s.submit(pid(2), deaf(&deaf_probe), "main", 0).unwrap();
    probe.wait_steps(1);
    deaf_probe.wait_steps(1);
    seen.lock().unwrap().extend([h1, h2]);
    assert!(rx.try_recv().is_err(), "no hook before the shutdown");
    s.shutdown(Duration::from_millis(50)).unwrap();
    assert_eq!(rx.try_recv(), Ok(("first", true, 2)));
    assert_eq!(rx.try_recv(), Ok(("last", true, 0)));
    s.shutdown(Duration::from_millis(50)).unwrap();
    drop(s);
    assert!(rx.try_recv().is_err(), "a hook ran twice");
}

/// `Scheduler::shutdown` called on one of the scheduler's own workers (by
/// a step holding the scheduler) is refused at once: it starts nothing and
/// does not wait, and the scheduler goes on working; a later shutdown from
/// another thread runs and reports.
#[test]
fn blocking_shutdown_from_a_step_is_refused() {
    let completed = Ledger::new();
    let s = Arc::new(scheduler(1, &completed));
    let me: Arc<OnceLock<Weak<Sched>>> = Arc::new(OnceLock::new());
    me.set(Arc::downgrade(&s)).unwrap();
    let (tx, answered) = channel();
    let tx = Mutex::new(tx);
    let probe = Probe::new();
    let mut first = true;
    let asker = FnProc::new(&probe, move |events, out, _| {
        if events.iter().any(Event::is_cancel) {
            return Err(Error::Cancelled);
        }
        if std::mem::take(&mut first) {
            let s = me.get().unwrap().upgrade().expect("the test holds it");
            // A deadline past the hang guard: a call that waited for it
            // fails the test.
            tx.lock().unwrap().send(s.shutdown(HANG * 3)).unwrap();
        }
        out.set_status(Status::Idle);
        Ok(())
    });
    let h = s.submit(pid(1), asker, "main", 0).unwrap();
    let answer = answered
        .recv_timeout(HANG)
        .expect("the step's shutdown call returned");
    assert_eq!(answer, Err(ShutdownError::OnWorker));
    // Nothing was started: the only worker runs a new process, and the
    // asker was not cancelled.
    let other = Probe::new();
    let h2 = s
        .submit(pid(2), done_at_once(&other, 7), "main", 0)
        .unwrap();
    assert_eq!(join(h2), Ok(7));
    assert!(!h.is_finished());
    let report = s.shutdown(HANG).expect("the test thread is no worker");
    assert_eq!((report.cancelled, report.forced), (1, 0));
    assert!(report.workers_joined);
    assert_eq!(join(h), Err(Error::Cancelled));
}

/// `begin_shutdown` (here through the `Scheduler`, which derefs to its
/// `Handle`) called from a step on the only worker starts the shutdown and
/// returns; the shutdown cancels that very process and joins its worker.
#[test]
fn begin_shutdown_from_a_step_runs_the_shutdown() {
    let completed = Ledger::new();
    let s = Arc::new(scheduler(1, &completed));
    let me: Arc<OnceLock<Weak<Sched>>> = Arc::new(OnceLock::new());
    me.set(Arc::downgrade(&s)).unwrap();
    let (tx, started) = channel::<Shutdown>();
    let tx = Mutex::new(tx);
    let probe = Probe::new();
    let mut first = true;
    let stopper = FnProc::new(&probe, move |events, out, _| {
        if events.iter().any(Event::is_cancel) {
            return Err(Error::Cancelled);
        }
        if std::mem::take(&mut first) {
            let s = me.get().unwrap().upgrade().expect("the test holds it");
            tx.lock().unwrap().send(s.begin_shutdown(HANG)).unwrap();
        }
        out.set_status(Status::Idle);
        Ok(())
    });
    let h = s.submit(pid(1), stopper, "main", 0).unwrap();
    let shutdown = started.recv_timeout(HANG).expect("the step returned");
    let report = shutdown.wait();
    assert_eq!((report.cancelled, report.forced), (1, 0));
    assert!(report.workers_joined, "{report:?}");
    assert_eq!(join(h), Err(Error::Cancelled));
    completed.assert_exactly_once([pid(1)]);
    // The blocking shutdown, off the workers, finds it done.
    let later = s.shutdown(HANG).expect("the test thread is no worker");
    assert_eq!((later.cancelled, later.forced), (0, 0));
}

/// Dropping the last `Scheduler` in a step starts the shutdown without
/// waiting for it: the shutdown runs on a thread of its own, not on the
/// worker it has to join, and ends the process as any shutdown does.
#[test]
fn dropping_the_last_scheduler_in_a_step_does_not_run_the_shutdown_there() {
    let (hooked, hook_ran) = channel();
    let s: Sched = Builder::new()
        .workers(1)
        .on_shutdown(move || hooked.send(thread::current().id()).unwrap())
        .build()
        .unwrap();
    let owner = Arc::new(Mutex::new(Some(s)));
    let held = owner.clone();
    let (tx, dropped) = channel();
    let tx = Mutex::new(tx);
    let probe = Probe::new();
    let p = FnProc::new(&probe, move |events, out, _| {
        if events.iter().any(Event::is_cancel) {
            return Err(Error::Cancelled);
        }
        let last = held.lock().unwrap().take();
        if let Some(s) = last {
            drop(s);
            tx.lock().unwrap().send(thread::current().id()).unwrap();
        }
        out.set_status(Status::Idle);
        Ok(())
    });
    let h = {
        let guard = owner.lock().unwrap();
        let s = guard.as_ref().unwrap();
        s.submit(s.allocate_pid(), p, "main", 0).unwrap()
    };
    let worker = dropped.recv_timeout(HANG).expect("the drop returned");
    let shut_down_on = hook_ran.recv_timeout(HANG).expect("the shutdown ran");
    assert_ne!(
        worker, shut_down_on,
        "the shutdown ran on the worker that dropped the scheduler"
    );
    assert_eq!(join(h), Err(Error::Cancelled));
    probe.wait_closed(1);
}

/// The last `Scheduler`, held by a shutdown hook, is dropped on the thread
/// running the shutdown (when the hook is): its drop must not wait for the
/// shutdown it is part of. (It waited for itself forever: the shutdown
/// never finished and its workers never stopped.)
#[test]
fn the_last_scheduler_dropped_inside_its_own_shutdown_does_not_wait_for_it() {
    let holder: Arc<Mutex<Option<Arc<Sched>>>> = Arc::default();
    let held = holder.clone();
    let (ran, hook_ran) = channel();
    let s = Arc::new(
        Builder::new()
            .workers(1)
            .on_shutdown(move || {
                // Dropped here, at the end of the hook: the last reference.
                let last = held.lock().unwrap().take();
                ran.send(()).unwrap();
                drop(last);
            })
            .build()
            .unwrap(),
    );
    let handle = s.handle();
    *holder.lock().unwrap() = Some(s);
    let (tx, rx) = channel();
    thread::spawn(move || tx.send(handle.begin_shutdown(Duration::from_millis(50)).wait()));
    hook_ran.recv_timeout(HANG).expect("the shutdown hook ran");
    let report = rx
        .recv_timeout(HANG)
        .expect("the shutdown finished although its scheduler was dropped inside it");
    assert!(report.workers_joined);
}
