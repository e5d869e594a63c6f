//! Fairness on one worker: a process that never stops asking to run —
//! by returning `Continue`, by yielding to a handler that completes at
//! once, or by messaging itself — does not starve 100 others.
#![cfg(not(stepsched_loom))]

mod common;

use std::sync::{Arc, Barrier, OnceLock};

use common::*;
use stepsched::{Completer, Error, Handle, Status};

const OTHERS: u64 = 100;

/// Submits `looper` then 100 two-step processes on a one-worker
/// scheduler; all of them must finish while the looper still runs.
///
/// A gate process holds the worker while they are submitted, so the
/// worker then takes the looper from the global queue together with a
/// batch of the others, which land in its local deque beside the looper.
fn others_finish_beside(s: &Sched, looper: FnProc, looper_probe: &Arc<Probe>) {
    let gate_probe = Probe::new();
    let (entered, in_gate) = std::sync::mpsc::channel();
    let open = Arc::new(Barrier::new(2));
    let opened = open.clone();
    let gate = FnProc::new(&gate_probe, move |_, out, _| {
        entered.send(()).unwrap();
        opened.wait();
        out.set_status(Status::Done(0));
        Ok(())
    });
    let g = s.submit(pid(10_000), gate, "main", 0).unwrap();
    in_gate.recv().unwrap();
    let l = s.submit(pid(0), looper, "main", 0).unwrap();
    let handles: Vec<_> = (1..=OTHERS)
        .map(|i| {
            let probe = Probe::new();
            let mut first = true;
            let p = FnProc::new(&probe, move |_, out, _| {
                // Two steps: Continue once, then done.
                if std::mem::take(&mut first) {
                    out.set_status(Status::Continue);
                } else {
                    out.set_status(Status::Done(i as i64));
                }
                Ok(())
            });
            s.submit(pid(i), p, "main", 0).unwrap()
        })
        .collect();
    open.wait();
    assert_eq!(join(g).unwrap(), 0);
    for (i, h) in (1..=OTHERS).zip(handles) {
        assert_eq!(join(h).unwrap(), i as i64);
    }
    assert!(!l.is_finished(), "the looper still runs");
    let before = looper_probe.steps();
    looper_probe.wait_steps(before + 1);
    s.terminate(pid(0)).unwrap();
    assert!(matches!(join(l), Err(Error::Terminated)));
    looper_probe.wait_closed(1);
    assert_eq!(looper_probe.overlaps(), 0);
}

#[test]
fn a_process_that_always_continues_does_not_starve_others() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let looper = FnProc::new(&probe, |_, out, _| {
        out.set_status(Status::Continue);
        Ok(())
    });
    others_finish_beside(&s, looper, &probe);
}

#[test]
fn a_process_whose_yields_complete_at_once_does_not_starve_others() {
    let s = Builder::new()
        .workers(1)
        .handler("now", |c: Cmd, done: Completer<FnProc>| {
            done.complete(Ok(c.arg));
        })
        .build()
        .unwrap();
    let probe = Probe::new();
    let mut tag = 0;
    let looper = FnProc::new(&probe, move |_, out, _| {
        tag += 1;
        out.push_yield(tag, cmd("now", 0));
        out.set_status(Status::Yield);
        Ok(())
    });
    others_finish_beside(&s, looper, &probe);
}

#[test]
fn a_process_that_messages_itself_does_not_starve_others() {
    let s = Builder::new().workers(1).build().unwrap();
    let handle: Arc<OnceLock<Handle<FnProc>>> = Arc::default();
    handle.set(s.handle()).unwrap();
    let probe = Probe::new();
    let looper = FnProc::new(&probe, move |_, out, ctx| {
        let me = ctx.pid();
        handle.get().unwrap().send(me, 1).unwrap();
        out.set_status(Status::Idle);
        Ok(())
    });
    others_finish_beside(&s, looper, &probe);
}

/// On one worker, two processes that message each other forever do not
/// starve a third that the first woke just before the second: each message
/// from a step puts its receiver in the worker's next-item slot, so the
/// second displaces the third into the deque, and from then on the pair
/// hands the slot back and forth. The third must run while the pair still
/// does (before the fix, it ran only once they stopped at `LIMIT`).
#[test]
fn a_pair_messaging_each_other_does_not_starve_a_third() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    const LIMIT: u64 = 1_000_000;
    const A: u64 = 1;
    const B: u64 = 2;
    const VICTIM: u64 = 3;
    let s = Builder::new().workers(1).build().unwrap();
    let victim_ran = Arc::new(AtomicBool::new(false));
    let hops = Arc::new(AtomicU64::new(0));

    let probe = Probe::new();
    let (ran, seen) = (victim_ran.clone(), hops.clone());
    let victim = FnProc::new(&probe, move |events, out, _| {
        if events.is_empty() {
            out.set_status(Status::Idle);
        } else {
            ran.store(true, Ordering::SeqCst);
            out.set_status(Status::Done(seen.load(Ordering::SeqCst) as i64));
        }
        Ok(())
    });
    let v = s.submit(pid(VICTIM), victim, "main", 0).unwrap();
    probe.wait_steps(1);

    // One of the pair: waits for a message, then answers the other until
    // the victim has run (or `LIMIT` hops, the hang guard).
    let partner = |other: u64, first: bool| {
        let (ran, hops) = (victim_ran.clone(), hops.clone());
        let mut started = !first;
        move |events: Vec<stepsched::Event<i64>>,
              out: &mut stepsched::StepOutput<Cmd, i64>,
              ctx: &mut stepsched::Context<'_, FnProc>| {
            if !started {
                // The first step of A: wake the victim, then B.
                started = true;
                ctx.send(pid(VICTIM), 0).unwrap();
                ctx.send(pid(other), 0).unwrap();
                out.set_status(Status::Idle);
                return Ok(());
            }
            if events.is_empty() {
                out.set_status(Status::Idle);
                return Ok(());
            }
            let n = hops.fetch_add(1, Ordering::SeqCst);
            if ran.load(Ordering::SeqCst) || n >= LIMIT {
                out.set_status(Status::Done(n as i64));
                let _ = ctx.send(pid(other), 0);
            } else {
                ctx.send(pid(other), 0).unwrap();
                out.set_status(Status::Idle);
            }
            Ok(())
        }
    };
    let b_probe = Probe::new();
    let b = s
        .submit(pid(B), FnProc::new(&b_probe, partner(A, false)), "main", 0)
        .unwrap();
    b_probe.wait_steps(1);
    let a = s
        .submit(
            pid(A),
            FnProc::new(&Probe::new(), partner(B, true)),
            "main",
            0,
        )
        .unwrap();
    let at = join(v).unwrap();
    assert!(
        (at as u64) < LIMIT,
        "the victim ran only after the pair stopped ({at} hops)"
    );
    let _ = join(a);
    let _ = join(b);
}

/// A process woken by a step that then runs for a long time is not held
/// hostage by it: the woken process waits in its worker's next-item slot,
/// where an idle worker takes it, so it runs while the long step still
/// runs. (Before, it waited for the long step to return, here for ever:
/// the long step ends only once the woken process has run, or after the
/// hang guard, with 0.)
#[test]
fn a_process_woken_by_a_long_step_runs_on_another_worker() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;

    const WOKEN: u64 = 2;
    let s = Builder::new().workers(2).build().unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let woken_probe = Probe::new();
    let woken = FnProc::new(&woken_probe, move |events, out, _| {
        if events.is_empty() {
            out.set_status(Status::Idle);
        } else {
            flag.store(true, Ordering::SeqCst);
            out.set_status(Status::Done(0));
        }
        Ok(())
    });
    let w = s.submit(pid(WOKEN), woken, "main", 0).unwrap();
    woken_probe.wait_steps(1);
    let long = FnProc::new(&Probe::new(), move |_, out, ctx| {
        ctx.send(pid(WOKEN), 1).unwrap();
        // The long computation: it ends when the woken process has run
        // (the hang guard only bounds a failure).
        let until = Instant::now() + HANG / 2;
        while !ran.load(Ordering::SeqCst) && Instant::now() < until {
            std::hint::spin_loop();
        }
        out.set_status(Status::Done(i64::from(ran.load(Ordering::SeqCst))));
        Ok(())
    });
    let l = s.submit(pid(1), long, "main", 0).unwrap();
    assert_eq!(join(l), Ok(1), "the woken process waited for the long step");
    assert_eq!(join(w), Ok(0));
}
