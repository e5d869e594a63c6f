//! Handler faults: a panicking handler (real or injected) completes its
//! yield with `Panicked`; a completion that never comes (the fault, or
//! `Completer::never`) leaves the process waiting; a completer kept past
//! its process does not reach a later process under the same PID.

mod common;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use common::*;
use stepsched_process::{Error, Status};
use stepsched_sim::{Completer, Faults, Sim};

/// Yields one `ask` and finishes with its answer (or its error).
fn asker(probe: &Rc<Probe>) -> FnProc {
    FnProc::new(probe, |_, events, out| {
        match events.into_iter().next() {
            None => {
                out.push_yield(1, "ask");
                out.set_status(Status::Yield);
            }
            Some(e) => out.set_status(Status::Done(e.into_result().unwrap()?)),
        }
        Ok(())
    })
}

/// A simulator whose `ask` handler answers 5, counting its calls.
fn sim(faults: Faults, calls: &Rc<Cell<u32>>) -> Sim<FnProc> {
    let calls = Rc::clone(calls);
    Sim::builder()
        .seed(6)
        .faults(faults)
        .handler("ask", move |_, done| {
            calls.set(calls.get() + 1);
            done.complete(Ok(5));
        })
        .build()
}

fn panicked() -> Error {
    Error::Panicked("the handler panicked before completing".into())
}

#[test]
fn a_panicking_handler_completes_its_yield_with_panicked() {
    let calls = Rc::default();
    let probe = Probe::new();
    let s = sim(
        Faults {
            handler_panic: 1.0,
            ..Faults::default()
        },
        &calls,
    );
    assert_eq!(submit(&s, asker(&probe)).join(), Err(panicked()));
    assert_eq!(calls.get(), 0, "the injected panic replaces the handler");
    assert!(s.trace_text().contains("c1!"), "{}", s.trace_text());

    // A real panic gives the same result.
    let s: Sim<FnProc> = Sim::builder()
        .handler("ask", |_, _done| panic!("the handler broke"))
        .build();
    assert_eq!(submit(&s, asker(&probe)).join(), Err(panicked()));
    assert_eq!(probe.counts(), (2, 4, 2));

    // Without the fault, the handler answers.
    let s = sim(Faults::default(), &calls);
    assert_eq!(submit(&s, asker(&probe)).join(), Ok(5));
    assert_eq!(calls.get(), 1);
}

#[test]
fn a_completion_that_never_comes_leaves_the_process_waiting() {
    let calls = Rc::default();
    let probe = Probe::new();
    let s = sim(
        Faults {
            never_complete: 1.0,
            ..Faults::default()
        },
        &calls,
    );
    let join = submit(&s, asker(&probe));
    let report = s.run();
    assert_eq!(report.live, 1, "the process waits");
    assert_eq!(calls.get(), 1, "the handler ran");
    assert_eq!(probe.counts(), (1, 1, 0));
    s.terminate(join.pid()).unwrap();
    assert_eq!(join.join(), Err(Error::Terminated));

    // `Completer::never` does the same from a handler.
    let s: Sim<FnProc> = Sim::builder()
        .handler("ask", |_, done| done.never())
        .build();
    let join = submit(&s, asker(&probe));
    assert_eq!(s.run().live, 1);
    assert!(!join.is_finished());
}

#[test]
fn a_kept_completer_does_not_reach_a_later_process_under_the_same_pid() {
    let kept: Rc<RefCell<Vec<Completer<FnProc>>>> = Rc::default();
    let keep = Rc::clone(&kept);
    let s: Sim<FnProc> = Sim::builder()
        .handler("ask", move |_, done| keep.borrow_mut().push(done))
        .build();
    let probe = Probe::new();
    let pid = s.allocate_pid();
    let first = s.submit(pid, asker(&probe), "main", 0).unwrap();
    s.run();
    s.terminate(pid).unwrap();
    assert_eq!(first.join(), Err(Error::Terminated));
    // A second process under the same PID, waiting for its own yield.
    let second = s.submit(pid, asker(&probe), "main", 0).unwrap();
    s.run();
    let mut kept = std::mem::take(&mut *kept.borrow_mut());
    assert_eq!(kept.len(), 2);
    let theirs = kept.pop().unwrap();
    let old = kept.pop().unwrap();
    assert_eq!((old.pid(), theirs.pid()), (pid, pid));
    assert!(
        !old.complete(Ok(1)),
        "the first process's completer reached the second"
    );
    assert_eq!(s.run().live, 1);
    assert!(!second.is_finished());
    assert!(theirs.complete(Ok(2)));
    assert_eq!(second.join(), Ok(2));
}
