//! Lifecycle: hooks run once per process and outside every lock (they may
//! send, terminate and submit); a panicking step fails only its process;
//! a PID reused while its old process is still finishing keeps the new
//! process's route.
#![cfg(not(stepsched_loom))]

mod common;

use std::sync::{Arc, Barrier, Mutex, OnceLock};

use common::*;
use stepsched::{Completer, Error, Handle, Pid, Status};

type Shared = Arc<OnceLock<Handle<FnProc>>>;

/// Each completed process's PID and result, in completion order.
type Results = Arc<Mutex<Vec<(Pid, Result<i64, String>)>>>;

#[test]
fn hooks_run_once_per_process_and_start_comes_before_the_first_step() {
    let started = Ledger::new();
    let completed = Ledger::new();
    let (st, co) = (started.clone(), completed.clone());
    let s = Builder::new()
        .workers(2)
        .on_start(move |pid| st.record(pid))
        .on_complete(move |pid, _| co.record(pid))
        .build()
        .unwrap();
    let mut handles = Vec::new();
    for i in 0..50 {
        let probe = Probe::new();
        let started = started.clone();
        let p = FnProc::new(&probe, move |_, out, ctx| {
            assert_eq!(started.count(&ctx.pid()), 1, "on_start before step");
            out.set_status(Status::Done(ctx.pid().number() as i64));
            Ok(())
        });
        handles.push(s.submit(pid(i), p, "main", 0).unwrap());
    }
    // Refused submits run no hook.
    let probe = Probe::new();
    assert!(
        s.submit(pid(0), done_at_once(&probe, 0), "nope", 0)
            .is_err()
    );
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(join(h).unwrap(), i as i64);
    }
    started.assert_exactly_once((0..50).map(pid));
    completed.assert_exactly_once((0..50).map(pid));
}

#[test]
fn hooks_may_send_terminate_and_submit() {
    let handle: Shared = Arc::default();
    let results: Results = Arc::default();
    let (h_start, h_done, res) = (handle.clone(), handle.clone(), results.clone());
    let probe = Probe::new();
    let chain_probe = probe.clone();
    let s = Builder::new()
        .workers(2)
        // Every process starts with a message from its start hook.
        .on_start(move |pid| {
            h_start
                .get()
                .unwrap()
                .send(pid, pid.number() as i64)
                .unwrap();
        })
        .on_complete(move |pid, r| {
            res.lock()
                .unwrap()
                .push((pid, r.copied().map_err(|e| e.to_string())));
            let h = h_done.get().unwrap();
            // The watcher (pid 1000) is terminated when pid 3 completes.
            if pid == Pid::new(7, 3) {
                h.terminate(Pid::new(7, 1000)).unwrap();
            }
            // Each of 1..=4 submits the next one.
            if (1..4).contains(&pid.number()) {
                let next = Pid::new(7, pid.number() + 1);
                h.submit(next, idle_until_message(&chain_probe), "main", 0)
                    .unwrap();
            }
            // Our own route is gone: terminating ourselves is refused.
            assert!(h.terminate(pid).is_err());
            let _ = h.stats();
        })
        .build()
        .unwrap();
    handle.set(s.handle()).unwrap();
    // The watcher ignores messages and cancel: only terminate ends it.
    let watcher = FnProc::new(&probe, |_, out, _| {
        out.set_status(Status::Idle);
        Ok(())
    });
    let w = s.submit(pid(1000), watcher, "main", 0).unwrap();
    let first = s
        .submit(pid(1), idle_until_message(&probe), "main", 0)
        .unwrap();
    assert_eq!(join(first).unwrap(), 1);
    assert!(matches!(join(w), Err(Error::Terminated)));
    // Wait for the end of the chain: 1..=4 and the watcher. A process is
    // closed before its completion hook runs, so the closes alone do not
    // say that the last hook has recorded its result.
    probe.wait_closed(5);
    let deadline = std::time::Instant::now() + HANG;
    while results.lock().unwrap().len() < 5 {
        assert!(std::time::Instant::now() < deadline, "hung");
        std::thread::yield_now();
    }
    let mut got = results.lock().unwrap().clone();
    got.sort_by_key(|(p, _)| *p);
    let expected: Vec<_> = (1..=4)
        .map(|n| (pid(n), Ok(n as i64)))
        .chain([(pid(1000), Err("process terminated".to_string()))])
        .collect();
    assert_eq!(got.len(), 5, "{got:?}");
    for ((p, r), (ep, er)) in got.iter().zip(&expected) {
        assert_eq!(p, ep);
        match (r, er) {
            (Err(a), Err(b)) => assert!(a.contains("terminated"), "{a} vs {b}"),
            _ => assert_eq!(r, er),
        }
    }
}

#[test]
fn a_panicking_step_fails_only_its_process() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let bomb = FnProc::new(&probe, |_, _, _| panic!("step exploded"));
    let h = s.submit(pid(1), bomb, "main", 0).unwrap();
    let r = join(h);
    assert!(
        matches!(&r, Err(Error::Panicked(m)) if m.contains("step exploded")),
        "{r:?}"
    );
    assert_eq!(
        probe.counts(),
        Counts {
            inits: 1,
            steps: 1,
            closes: 1
        }
    );
    // The single worker goes on.
    for i in 0..10 {
        let p = Probe::new();
        let h = s
            .submit(s.allocate_pid(), done_at_once(&p, i), "main", 0)
            .unwrap();
        assert_eq!(join(h).unwrap(), i);
    }
    assert_eq!(s.stats().failed, 1);
}

#[test]
fn a_reused_pid_is_never_touched_by_its_old_process() {
    let completed: Results = Arc::default();
    let held: Arc<Mutex<Vec<Completer<FnProc>>>> = Arc::default();
    let (log, stash) = (completed.clone(), held.clone());
    let s = Builder::new()
        .workers(2)
        .handler("hold", move |_: Cmd, done: Completer<FnProc>| {
            stash.lock().unwrap().push(done)
        })
        .on_complete(move |pid, r| {
            log.lock()
                .unwrap()
                .push((pid, r.copied().map_err(|e| e.to_string())))
        })
        .build()
        .unwrap();
    let x = pid(42);
    // P1 yields (its completer is kept), then is terminated inside its
    // second step, woken by a message.
    let old = Probe::new();
    let (entered, in_step) = std::sync::mpsc::channel();
    let go = Arc::new(Barrier::new(2));
    let release = go.clone();
    let mut first = true;
    let p1 = FnProc::new(&old, move |_, out, _| {
        if std::mem::take(&mut first) {
            out.push_yield(1, cmd("hold", 0));
            out.set_status(Status::Yield);
            return Ok(());
        }
        entered.send(()).unwrap();
        release.wait();
        out.set_status(Status::Done(-1));
        Ok(())
    });
    let h1 = s.submit(x, p1, "main", 0).unwrap();
    old.wait_steps(1);
    s.send(x, 1).unwrap();
    in_step.recv().unwrap();
    s.terminate(x).unwrap();
    // Until its step returns, P1 keeps its PID, and takes no messages.
    assert!(s.contains(x));
    let taken = Probe::new();
    let err = s
        .submit(x, idle_until_message(&taken), "main", 0)
        .unwrap_err();
    assert!(
        matches!(err, stepsched::SubmitError::DuplicatePid(..)),
        "{err:?}"
    );
    assert!(matches!(
        s.send(x, 2),
        Err(stepsched::SendError::Closed(p)) if p.payload == 2
    ));
    go.wait();
    assert!(matches!(join(h1), Err(Error::Terminated)));
    assert_eq!(
        old.counts(),
        Counts {
            inits: 1,
            steps: 2,
            closes: 1
        }
    );
    assert!(!s.contains(x));

    // P2 takes the PID. P1's completer and hooks never reach it.
    let new = Probe::new();
    let h2 = s.submit(x, idle_until_message(&new), "main", 0).unwrap();
    new.wait_steps(1);
    let stale = held.lock().unwrap().pop().unwrap();
    assert!(!stale.complete(Ok(5)));
    assert!(s.contains(x));
    s.send(x, 77).unwrap();
    assert_eq!(join(h2).unwrap(), 77);
    assert_eq!(
        new.counts(),
        Counts {
            inits: 1,
            steps: 2,
            closes: 1
        }
    );
    let got = completed.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(matches!(&got[0], (p, Err(e)) if *p == x && e.contains("terminated")));
    assert_eq!(got[1], (x, Ok(77)));
}

#[test]
fn a_panicking_start_hook_does_not_lose_the_process() {
    let s = Builder::new()
        .workers(1)
        .on_start(|pid| {
            if pid.number() == 1 {
                panic!("start hook exploded");
            }
        })
        .build()
        .unwrap();
    let probe = Probe::new();
    let h = s
        .submit(pid(1), done_at_once(&probe, 3), "main", 0)
        .unwrap();
    assert_eq!(join(h).unwrap(), 3);
    probe.wait_closed(1);
    assert_eq!(s.stats().live, 0);
}
