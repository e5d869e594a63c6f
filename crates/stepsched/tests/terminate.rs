//! Terminate: a running, a blocked and an idle process each end with
//! `Terminated` and are closed once; races with natural completion and
//! with another terminate leave exactly one result and one close.
#![cfg(not(stepsched_loom))]

mod common;

use std::sync::mpsc::channel;
use std::sync::{Arc, Barrier};
use std::thread;

use common::*;
use stepsched::{Completer, Error, Event, Pid, Status, TerminateError};

/// A scheduler whose `hold` handler never completes (it keeps the
/// completers), and which records each process's completion.
fn holding(workers: usize, completed: &Arc<Ledger<Pid>>) -> Sched {
    let held = std::sync::Mutex::new(Vec::<Completer<FnProc>>::new());
    let completed = completed.clone();
    Builder::new()
        .workers(workers)
        .handler("hold", move |_: Cmd, done: Completer<FnProc>| {
            held.lock().unwrap().push(done)
        })
        .on_complete(move |pid, _| completed.record(pid))
        .build()
        .unwrap()
}

#[test]
fn terminate_a_running_process() {
    let completed = Ledger::new();
    let s = holding(2, &completed);
    let probe = Probe::new();
    let (entered, in_step) = channel();
    let go = Arc::new(Barrier::new(2));
    let release = go.clone();
    let p = FnProc::new(&probe, move |_, out, _| {
        entered.send(()).unwrap();
        release.wait();
        out.set_status(Status::Continue);
        Ok(())
    });
    let h = s.submit(pid(1), p, "main", 0).unwrap();
    in_step.recv().unwrap();
    assert_eq!(s.terminate(pid(1)), Ok(()));
    assert!(!h.is_finished(), "the result waits for the step to return");
    go.wait();
    assert!(matches!(join(h), Err(Error::Terminated)));
    // The result is published after close.
    assert_eq!(
        probe.counts(),
        Counts {
            inits: 1,
            steps: 1,
            closes: 1
        }
    );
    assert_eq!(completed.count(&pid(1)), 1);
    assert!(!s.contains(pid(1)));
}

#[test]
fn terminate_wins_over_the_done_of_the_step_it_interrupted() {
    let completed = Ledger::new();
    let s = holding(1, &completed);
    let probe = Probe::new();
    let (entered, in_step) = channel();
    let go = Arc::new(Barrier::new(2));
    let release = go.clone();
    let p = FnProc::new(&probe, move |_, out, _| {
        entered.send(()).unwrap();
        release.wait();
        out.set_status(Status::Done(1));
        Ok(())
    });
    let h = s.submit(pid(1), p, "main", 0).unwrap();
    in_step.recv().unwrap();
    assert_eq!(s.terminate(pid(1)), Ok(()));
    assert_eq!(
        s.terminate(pid(1)),
        Err(TerminateError::AlreadyComplete(pid(1)))
    );
    go.wait();
    assert!(matches!(join(h), Err(Error::Terminated)));
    assert_eq!(probe.closes(), 1);
    let stats = s.stats();
    assert_eq!((stats.completed, stats.failed), (0, 1));
}

#[test]
fn terminate_a_blocked_and_an_idle_process() {
    let completed = Ledger::new();
    let s = holding(2, &completed);
    let blocked = Probe::new();
    let mut first = true;
    let p = FnProc::new(&blocked, move |_, out, _| {
        if std::mem::take(&mut first) {
            out.push_yield(1, cmd("hold", 0));
        }
        out.set_status(Status::Yield);
        Ok(())
    });
    let hb = s.submit(pid(2), p, "main", 0).unwrap();
    let idle = Probe::new();
    let hi = s
        .submit(pid(3), idle_until_message(&idle), "main", 0)
        .unwrap();
    blocked.wait_steps(1);
    idle.wait_steps(1);
    assert_eq!(s.terminate(pid(2)), Ok(()));
    assert_eq!(s.terminate(pid(3)), Ok(()));
    assert!(matches!(join(hb), Err(Error::Terminated)));
    assert!(matches!(join(hi), Err(Error::Terminated)));
    assert_eq!(
        blocked.counts(),
        Counts {
            inits: 1,
            steps: 1,
            closes: 1
        }
    );
    assert_eq!(
        idle.counts(),
        Counts {
            inits: 1,
            steps: 1,
            closes: 1
        }
    );
    completed.assert_exactly_once([pid(2), pid(3)]);
    // Again, after completion, and an unknown PID.
    assert_eq!(s.terminate(pid(2)), Err(TerminateError::UnknownPid(pid(2))));
    assert_eq!(
        s.terminate(pid(99)),
        Err(TerminateError::UnknownPid(pid(99)))
    );
    let stats = s.stats();
    assert_eq!((stats.failed, stats.live), (2, 0));
}

#[test]
fn terminate_racing_natural_completion() {
    const ROUNDS: u64 = 200;
    let completed = Ledger::new();
    let s = Arc::new(holding(2, &completed));
    let mut terminated = 0;
    for round in 0..ROUNDS {
        let probe = Probe::new();
        let pid = pid(1000 + round);
        let h = s
            .submit(pid, idle_until_message(&probe), "main", 0)
            .unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let sender = {
            let (s, barrier) = (s.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                let _ = s.send(pid, round as i64);
            })
        };
        barrier.wait();
        let t = s.terminate(pid);
        sender.join().unwrap();
        let result = join(h);
        match t {
            Ok(()) => {
                terminated += 1;
                assert!(matches!(result, Err(Error::Terminated)), "{result:?}");
            }
            Err(TerminateError::AlreadyComplete(_) | TerminateError::UnknownPid(_)) => {
                assert_eq!(result.unwrap(), round as i64);
            }
        }
        assert_eq!(probe.closes(), 1, "round {round}");
        assert_eq!(probe.overlaps(), 0);
        assert_eq!(completed.count(&pid), 1);
    }
    completed.assert_exactly_once((0..ROUNDS).map(|r| pid(1000 + r)));
    let stats = s.stats();
    assert_eq!(stats.failed, terminated);
    assert_eq!(stats.completed, ROUNDS - terminated);
}

#[test]
fn double_terminate_has_one_winner() {
    const ROUNDS: u64 = 100;
    let completed = Ledger::new();
    let s = Arc::new(holding(2, &completed));
    for round in 0..ROUNDS {
        let probe = Probe::new();
        let pid = pid(5000 + round);
        let h = s
            .submit(pid, idle_until_message(&probe), "main", 0)
            .unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let other = {
            let (s, barrier) = (s.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                s.terminate(pid)
            })
        };
        barrier.wait();
        let mine = s.terminate(pid);
        let theirs = other.join().unwrap();
        assert_eq!(
            [mine, theirs].iter().filter(|r| r.is_ok()).count(),
            1,
            "{mine:?} {theirs:?}"
        );
        for r in [mine, theirs] {
            assert!(matches!(
                r,
                Ok(()) | Err(TerminateError::AlreadyComplete(_) | TerminateError::UnknownPid(_))
            ));
        }
        assert!(matches!(join(h), Err(Error::Terminated)));
        assert_eq!(probe.closes(), 1);
        assert_eq!(completed.count(&pid), 1);
    }
}

#[test]
fn a_process_can_terminate_itself_from_its_handler() {
    let completed = Ledger::new();
    let handle_slot = Arc::new(std::sync::OnceLock::<stepsched::Handle<FnProc>>::new());
    let h2 = handle_slot.clone();
    let c2 = completed.clone();
    let s = Builder::new()
        .workers(1)
        .handler("kill-me", move |c: Cmd, done: Completer<FnProc>| {
            let handle = h2.get().unwrap();
            handle.terminate(Pid::new(7, c.arg as u64)).unwrap();
            // The process ended: the completion goes nowhere.
            assert!(!done.complete(Ok(0)));
        })
        .on_complete(move |pid, _| c2.record(pid))
        .build()
        .unwrap();
    handle_slot.set(s.handle()).unwrap();
    let probe = Probe::new();
    let p = FnProc::new(&probe, |events, out, ctx| {
        assert!(
            events
                .iter()
                .all(|e| !matches!(e, Event::Completion { .. }))
        );
        out.push_yield(1, cmd("kill-me", ctx.pid().number() as i64));
        out.set_status(Status::Yield);
        Ok(())
    });
    let h = s.submit(pid(77), p, "main", 0).unwrap();
    assert!(matches!(join(h), Err(Error::Terminated)));
    assert_eq!(
        probe.counts(),
        Counts {
            inits: 1,
            steps: 1,
            closes: 1
        }
    );
    completed.assert_exactly_once([pid(77)]);
}

#[test]
fn every_slot_is_freed_whichever_way_a_parked_process_ends() {
    // A parked process owns the reference its last run's task held: the
    // waker that queues it takes that reference over, and a terminate that
    // lands while it is parked releases it. Every slot holds the core, and
    // the core holds the handler below with its token: a slot whose
    // reference is never released keeps the token alive after the
    // scheduler is gone; one released twice is freed under a live task
    // (a use after free that the allocator or the counts show).
    let token = Arc::new(());
    let kept = token.clone();
    let s = Builder::new()
        .workers(2)
        .handler("noop", move |_: Cmd, done: Completer<FnProc>| {
            let _ = &kept;
            done.complete(Ok(0));
        })
        .build()
        .unwrap();
    let probe = Probe::new();
    const PROCESSES: u64 = 60;
    for n in 1..=PROCESSES {
        let idle = FnProc::new(&probe, |events, out, _| {
            if events.iter().any(|e| matches!(e, Event::Cancel)) {
                return Err(Error::Cancelled);
            }
            out.set_status(Status::Idle);
            Ok(())
        });
        drop(s.submit(pid(n), idle, "main", 0).unwrap());
    }
    // Each parks Idle after its first step, is woken by a message and
    // parks again: two steps each.
    probe.wait_steps(PROCESSES as usize);
    for n in 1..=PROCESSES {
        s.send(pid(n), 1).unwrap();
    }
    probe.wait_steps(2 * PROCESSES as usize);
    // A third terminated while parked, the rest cancelled by the shutdown
    // (woken by the cancel event, stepped, completed).
    for n in (1..=PROCESSES).step_by(3) {
        assert_eq!(s.terminate(pid(n)), Ok(()));
    }
    drop(s);
    // The last references may be released a moment after the drop returns
    // (a worker's run ends after the result it published): wait for them,
    // up to `HANG`; a slot never freed keeps the count at 2 for good.
    let deadline = std::time::Instant::now() + HANG;
    while Arc::strong_count(&token) != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "every slot, and with them the core and its handlers, is freed"
        );
        thread::yield_now();
    }
}
