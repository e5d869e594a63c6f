//! Process upgrade: a step asks to be replaced under the same PID
//! (`Context::upgrade`, `Context::upgrade_from`); the new process gets every
//! event that arrived meanwhile; each failure is a clear result.

mod common;

use std::collections::HashSet;
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::thread;

use common::*;
use stepsched::{Completer, Error, Event, SendError, Status};

/// A process that upgrades itself to a fresh copy on each step until its
/// generation (its init input) reaches `last`, then finishes with it.
/// Every other upgrade goes through the factory `"next"`.
fn generation(probe: &Arc<Probe>, generation: i64, last: i64) -> FnProc {
    let probe2 = probe.clone();
    FnProc::new(probe, move |_, out, ctx| {
        if generation == last {
            out.set_status(Status::Done(generation));
        } else if generation % 2 == 0 {
            ctx.upgrade(self::generation(&probe2, generation + 1, last), "main", 0);
        } else {
            // A factory takes no argument: the step leaves the generation
            // it wants where the factory, called next on this thread,
            // reads it.
            NEXT.with(|n| n.set(generation + 1));
            ctx.upgrade_from("next", "main", 0);
        }
        Ok(())
    })
}

thread_local! {
    /// The generation the `"next"` factory builds (set by the step that
    /// asks, read by the factory on the same worker thread).
    static NEXT: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

fn with_next_factory(probe: &Arc<Probe>, last: i64) -> Builder {
    let probe = probe.clone();
    Builder::new().factory("next", move || {
        Ok(generation(&probe, NEXT.with(|n| n.get()), last))
    })
}

#[test]
fn three_hundred_upgrades_in_a_row_on_one_worker_all_complete() {
    let probe = Probe::new();
    let s = with_next_factory(&probe, 300).workers(1).build().unwrap();
    let pid = s.allocate_pid();
    let h = s
        .submit(pid, generation(&probe, 0, 300), "main", 0)
        .unwrap();
    assert_eq!(join(h), Ok(300));
    // One submit and 300 upgrades: 301 process values, each initialized,
    // stepped and closed exactly once, never two steps at once.
    let c = probe.counts();
    assert_eq!((c.inits, c.steps, c.closes), (301, 301, 301));
    assert_eq!(probe.overlaps(), 0);
    assert!(!s.contains(pid));
}

#[test]
fn many_processes_upgrading_at_once_all_complete() {
    let probe = Probe::new();
    let s = with_next_factory(&probe, 50).workers(2).build().unwrap();
    let handles: Vec<_> = (0..20)
        .map(|_| {
            s.submit(s.allocate_pid(), generation(&probe, 0, 50), "main", 0)
                .unwrap()
        })
        .collect();
    for h in handles {
        assert_eq!(join(h), Ok(50));
    }
    let c = probe.counts();
    assert_eq!((c.inits, c.closes), (20 * 51, 20 * 51));
}

/// Collects messages; upgrades after every step that got some, carrying
/// what it collected (in a shared cell) to the new process; finishes once
/// it has `total`.
fn collector(probe: &Arc<Probe>, got: Arc<Mutex<Vec<i64>>>, total: usize) -> FnProc {
    let probe2 = probe.clone();
    FnProc::new(probe, move |events, out, ctx| {
        let mut any = false;
        for e in events {
            if let Event::Message { data, .. } = e {
                got.lock().unwrap().push(data);
                any = true;
            }
        }
        if got.lock().unwrap().len() == total {
            out.set_status(Status::Done(total as i64));
        } else if any {
            ctx.upgrade(collector(&probe2, got.clone(), total), "main", 0);
        } else {
            out.set_status(Status::Idle);
        }
        Ok(())
    })
}

#[test]
fn an_upgrade_racing_incoming_messages_loses_none() {
    const SENDERS: i64 = 3;
    const EACH: i64 = 400;
    for round in 0..5 {
        let probe = Probe::new();
        let s = Builder::new().workers(2).build().unwrap();
        let got = Arc::new(Mutex::new(Vec::new()));
        let pid = s.allocate_pid();
        let total = (SENDERS * EACH) as usize;
        let h = s
            .submit(pid, collector(&probe, got.clone(), total), "main", 0)
            .unwrap();
        thread::scope(|scope| {
            for t in 0..SENDERS {
                let s = &s;
                scope.spawn(move || {
                    for i in 0..EACH {
                        s.send(pid, t * EACH + i).unwrap();
                    }
                });
            }
        });
        assert_eq!(join(h), Ok(total as i64), "round {round}");
        let got = got.lock().unwrap();
        let distinct: HashSet<i64> = got.iter().copied().collect();
        assert_eq!(got.len(), total, "round {round}: a message seen twice");
        assert_eq!(distinct, (0..SENDERS * EACH).collect(), "round {round}");
        // Messages from one sender arrive in order across upgrades.
        for t in 0..SENDERS {
            let mine: Vec<i64> = got.iter().copied().filter(|m| m / EACH == t).collect();
            assert!(mine.is_sorted(), "round {round}: sender {t} out of order");
        }
        let c = probe.counts();
        assert_eq!(c.inits, c.closes, "round {round}: every value closed once");
    }
}

/// Upgrades on every step, forever.
fn restless(probe: &Arc<Probe>) -> FnProc {
    let probe2 = probe.clone();
    FnProc::new(probe, move |_, _, ctx| {
        ctx.upgrade(restless(&probe2), "main", 0);
        Ok(())
    })
}

#[test]
fn an_upgrade_racing_terminate_ends_terminated_exactly_once() {
    for round in 0..50 {
        let probe = Probe::new();
        let (done_tx, done_rx) = channel();
        let s = Builder::new()
            .workers(2)
            .on_complete(move |pid, r| {
                done_tx
                    .send((pid, r.err().map(ToString::to_string)))
                    .unwrap()
            })
            .build()
            .unwrap();
        let pid = s.allocate_pid();
        let h = s.submit(pid, restless(&probe), "main", 0).unwrap();
        // Let it upgrade a few times first (or not: either way the answer
        // is the same).
        probe.wait_steps(round % 7);
        assert_eq!(s.terminate(pid), Ok(()), "round {round}");
        assert_eq!(join(h), Err(Error::Terminated), "round {round}");
        assert_eq!(
            done_rx.recv().unwrap(),
            (pid, Some(Error::Terminated.to_string()))
        );
        assert!(
            done_rx.try_recv().is_err(),
            "round {round}: completed twice"
        );
        let c = probe.counts();
        assert_eq!(c.inits, c.closes, "round {round}: {c:?}");
        assert_eq!(probe.overlaps(), 0);
    }
}

#[test]
fn a_process_upgrading_forever_does_not_starve_the_others() {
    let probe = Probe::new();
    let s = Builder::new().workers(1).build().unwrap();
    let pid = s.allocate_pid();
    let h = s.submit(pid, restless(&probe), "main", 0).unwrap();
    // Submitted after it, on the same single worker: runs only if the
    // upgrader leaves the worker now and then.
    let other = s
        .submit(s.allocate_pid(), done_at_once(&Probe::new(), 3), "main", 0)
        .unwrap();
    assert_eq!(join(other), Ok(3));
    s.terminate(pid).unwrap();
    assert_eq!(join(h), Err(Error::Terminated));
}

/// Upgrades at its first step as `how` says.
fn upgrades_once(
    probe: &Arc<Probe>,
    how: impl Fn(&mut stepsched::Context<'_, FnProc>) + Send + 'static,
) -> FnProc {
    FnProc::new(probe, move |_, _, ctx| {
        how(ctx);
        Ok(())
    })
}

/// Submits `p` on a scheduler built by `b`, joins it, and checks the PID is
/// gone afterwards (route removed, an allocated PID reads `Closed`).
fn run_to_end(b: Builder, p: FnProc) -> Result<i64, Error> {
    let s = b.workers(1).build().unwrap();
    let pid = s.allocate_pid();
    let r = join(s.submit(pid, p, "main", 0).unwrap());
    assert!(!s.contains(pid));
    assert!(matches!(s.send(pid, 1), Err(SendError::Closed(_))));
    r
}

#[test]
fn an_upgrade_to_no_such_factory_ends_the_process_with_that_error() {
    let probe = Probe::new();
    let r = run_to_end(
        Builder::new(),
        upgrades_once(&probe, |ctx| ctx.upgrade_from("nope", "main", 0)),
    );
    assert_eq!(r, Err(Error::UnknownFactory("nope".into())));
    assert_eq!(probe.counts().closes, 1);
}

/// A caller tells a missing factory from every other failure by its
/// variant, which names the factory asked for; the registered one, asked
/// by its name, upgrades.
#[test]
fn a_missing_factory_is_matched_by_its_variant_with_the_name_asked_for() {
    let probe = Probe::new();
    let with_v2 = || {
        let probe = probe.clone();
        Builder::new().factory("worker-v2", move || Ok(done_at_once(&probe, 2)))
    };
    let r = run_to_end(
        with_v2(),
        upgrades_once(&probe, |ctx| ctx.upgrade_from("worker-v3", "main", 0)),
    );
    match r {
        Err(Error::UnknownFactory(name)) => assert_eq!(name, "worker-v3"),
        other => panic!("a missing factory ended the process with {other:?}"),
    }
    let r = run_to_end(
        with_v2(),
        upgrades_once(&probe, |ctx| ctx.upgrade_from("worker-v2", "main", 0)),
    );
    assert_eq!(r, Ok(2));
}

#[test]
fn a_failing_or_panicking_factory_ends_the_process_with_its_error() {
    let probe = Probe::new();
    let failing = Builder::new().factory("v2", || Err(Error::failed("no v2 today")));
    let r = run_to_end(
        failing,
        upgrades_once(&probe, |ctx| ctx.upgrade_from("v2", "main", 0)),
    );
    assert_eq!(r, Err(Error::failed("no v2 today")));

    let panicking = Builder::new().factory("v2", || panic!("factory exploded"));
    let r = run_to_end(
        panicking,
        upgrades_once(&probe, |ctx| ctx.upgrade_from("v2", "main", 0)),
    );
    assert_eq!(r, Err(Error::Panicked("factory exploded".into())));
    assert_eq!(probe.counts().closes, 2);
}

#[test]
fn a_failing_new_init_ends_the_process_and_closes_both_values() {
    for (method, expected) in [
        ("fail", Error::failed("init refused")),
        ("panic", Error::Panicked("init exploded".into())),
        ("nope", Error::UnknownMethod("nope".into())),
    ] {
        let probe = Probe::new();
        let probe2 = probe.clone();
        let r = run_to_end(
            Builder::new(),
            upgrades_once(&probe, move |ctx| {
                ctx.upgrade(done_at_once(&probe2, 1), method, 0);
            }),
        );
        assert_eq!(r, Err(expected), "{method}");
        let c = probe.counts();
        // The old value and the new one: two inits, two closes, one step.
        assert_eq!((c.inits, c.steps, c.closes), (2, 1, 2), "{method}");
    }
}

#[test]
fn completions_of_the_old_process_reach_the_new_one() {
    let probe = Probe::new();
    let (stash_tx, stash_rx) = channel::<Completer<FnProc>>();
    let stash_tx = Mutex::new(stash_tx);
    let s = Builder::new()
        .workers(1)
        .handler("later", move |_, done| {
            stash_tx.lock().unwrap().send(done).unwrap()
        })
        .build()
        .unwrap();
    let probe2 = probe.clone();
    let mut asked = false;
    // v1: yields to a handler that completes later, then on a message
    // upgrades to v2, which finishes with the tag of the first completion
    // it sees.
    let v1 = FnProc::new(&probe, move |events, out, ctx| {
        if !asked {
            asked = true;
            out.push_yield(7, cmd("later", 0));
            out.set_status(Status::Yield);
            return Ok(());
        }
        if events.iter().any(|e| matches!(e, Event::Message { .. })) {
            let v2 = FnProc::new(&probe2, |events, out, _| {
                match events.iter().find_map(Event::tag) {
                    Some(tag) => out.set_status(Status::Done(tag as i64)),
                    None => out.set_status(Status::Yield),
                }
                Ok(())
            });
            ctx.upgrade(v2, "main", 0);
        } else {
            out.set_status(Status::Yield);
        }
        Ok(())
    });
    let pid = s.allocate_pid();
    let h = s.submit(pid, v1, "main", 0).unwrap();
    let done = stash_rx.recv().unwrap();
    s.send(pid, 1).unwrap();
    // v1's two steps, then v2's first (with no event): the upgrade is
    // done. (Events a step is handed are that step's: a completion drained
    // with the message would have been v1's to take.)
    probe.wait_steps(3);
    assert!(done.complete(Ok(5)));
    assert_eq!(join(h), Ok(7));
    assert_eq!(probe.counts().closes, 2);
}

#[test]
fn the_upgrading_steps_yields_are_not_dispatched() {
    let probe = Probe::new();
    let (called_tx, called_rx) = channel::<()>();
    let called_tx = Mutex::new(called_tx);
    let b = Builder::new().handler("never", move |_, done| {
        called_tx.lock().unwrap().send(()).unwrap();
        done.complete(Ok(0));
    });
    let probe2 = probe.clone();
    let r = run_to_end(
        b,
        FnProc::new(&probe, move |_, out, ctx| {
            out.push_yield(1, cmd("never", 0));
            out.set_status(Status::Yield);
            ctx.upgrade(done_at_once(&probe2, 9), "main", 0);
            Ok(())
        }),
    );
    assert_eq!(r, Ok(9));
    assert!(called_rx.try_recv().is_err(), "the handler was called");
}

/// Method and factory names built at run time are passed as `&str`, as
/// `spawn` and `submit` take them (an upgrade used to want a
/// `Cow<'static, str>`, so a borrowed `String` did not do).
#[test]
fn names_made_at_run_time_are_passed_as_str() {
    let probe = Probe::new();
    let factory = format!("worker-v{}", 2);
    let b = {
        let probe = probe.clone();
        Builder::new().factory(factory.as_str(), move || Ok(done_at_once(&probe, 2)))
    };
    let r = run_to_end(
        b,
        upgrades_once(&probe, move |ctx| {
            let method = String::from("main");
            ctx.upgrade_from(&factory, &method, 0);
        }),
    );
    assert_eq!(r, Ok(2));
    let r = run_to_end(
        Builder::new(),
        upgrades_once(&probe, |ctx| {
            let method = ["ma", "in"].concat();
            ctx.upgrade(done_at_once(&Probe::new(), 5), &method, 0);
        }),
    );
    assert_eq!(r, Ok(5));
}
