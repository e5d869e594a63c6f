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
