//! Upgrades through a factory (`Builder::factory`, `Context::upgrade_from`)
//! with the scheduler's rules: the new process is what the factory
//! returns; a missing, failing or panicking factory, or a failing new
//! `init`, ends the process with that error; every value initialized is
//! closed once; completions of the old value's yields reach the new one.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use common::*;
use stepsched_process::{Error, Status};
use stepsched_sim::{Builder, Sim};

/// Upgrades through the factory `"next"` on each step until its generation
/// reaches `last`, then finishes with it.
fn generation(probe: &Rc<Probe>, next: &Rc<Cell<u32>>, me: u32, last: u32) -> FnProc {
    let next = Rc::clone(next);
    FnProc::new(probe, move |ctx, _, out| {
        if me == last {
            out.set_status(Status::Done(me));
        } else {
            // A factory takes no argument: the step leaves the generation
            // it wants where the factory reads it.
            next.set(me + 1);
            ctx.upgrade_from("next", "main", 0);
        }
        Ok(())
    })
}

fn with_next_factory(probe: &Rc<Probe>, next: &Rc<Cell<u32>>, last: u32) -> Builder<FnProc> {
    let (probe, next) = (Rc::clone(probe), Rc::clone(next));
    Sim::builder().factory("next", move || {
        Ok(generation(&probe, &next, next.get(), last))
    })
}

#[test]
fn a_chain_of_factory_upgrades_completes() {
    let probe = Probe::new();
    let next = Rc::new(Cell::new(0));
    let sim = with_next_factory(&probe, &next, 50).seed(2).build();
    let join = submit(&sim, generation(&probe, &next, 0, 50));
    assert_eq!(join.join(), Ok(50));
    // One submit and 50 upgrades: 51 values, each initialized, stepped and
    // closed once.
    assert_eq!(probe.counts(), (51, 51, 51));
    assert_eq!(sim.trace_text().matches(" upgrade main").count(), 50);
}

/// Upgrades at its first step to the factory `name`.
fn upgrades_to(probe: &Rc<Probe>, name: &'static str) -> FnProc {
    FnProc::new(probe, move |ctx, _, _| {
        ctx.upgrade_from(name, "main", 0);
        Ok(())
    })
}

#[test]
fn a_missing_failing_or_panicking_factory_ends_the_process_with_its_error() {
    let probe = Probe::new();
    let sim: Sim<FnProc> = Sim::builder()
        .factory("failing", || Err(Error::failed("no v2 today")))
        .factory("panicking", || panic!("factory exploded"))
        .build();
    let cases = [
        ("nope", Error::UnknownFactory("nope".into())),
        ("failing", Error::failed("no v2 today")),
        ("panicking", Error::Panicked("factory exploded".into())),
    ];
    for (name, expected) in cases {
        let join = submit(&sim, upgrades_to(&probe, name));
        assert_eq!(join.join(), Err(expected), "{name}");
    }
    // Three old values, each closed once; no new value was made.
    assert_eq!(probe.counts(), (3, 3, 3));
}

#[test]
fn a_failing_new_init_ends_the_process_and_closes_both_values() {
    let probe = Probe::new();
    let fresh = Rc::clone(&probe);
    let sim: Sim<FnProc> = Sim::builder()
        .factory("v2", move || Ok(FnProc::new(&fresh, |_, _, _| Ok(()))))
        .build();
    let join = submit(
        &sim,
        FnProc::new(&probe, |ctx, _, _| {
            ctx.upgrade_from("v2", "fail", 0);
            Ok(())
        }),
    );
    assert_eq!(join.join(), Err(Error::failed("init refused")));
    assert_eq!(probe.counts(), (2, 1, 2));
}

#[test]
fn completions_of_the_old_value_reach_the_factorys_new_one() {
    let probe = Probe::new();
    let fresh = Rc::clone(&probe);
    let called = Rc::new(Cell::new(0));
    let calls = Rc::clone(&called);
    let sim: Sim<FnProc> = Sim::builder()
        .handler("slow", move |_, done| {
            calls.set(calls.get() + 1);
            done.complete_after(Duration::from_millis(5), Ok(7));
        })
        // v2 finishes with the answer of the first completion it sees.
        .factory("v2", move || {
            Ok(FnProc::new(&fresh, |_, events, out| {
                match events.into_iter().find_map(|e| e.into_result()) {
                    Some(answer) => out.set_status(Status::Done(answer?)),
                    None => out.set_status(Status::Yield),
                }
                Ok(())
            }))
        })
        .build();
    // v1 yields `slow`, then upgrades on a message; the upgrading step's
    // own yield is not dispatched.
    let join = submit(
        &sim,
        FnProc::new(&probe, |ctx, events, out| {
            out.push_yield(if events.is_empty() { 1 } else { 2 }, "slow");
            out.set_status(Status::Yield);
            if !events.is_empty() {
                ctx.upgrade_from("v2", "main", 0);
            }
            Ok(())
        }),
    );
    // Its first step, and no further: the completion is due at 5 ms.
    let join = join.join_timeout(Duration::from_millis(1)).unwrap_err();
    sim.send(join.pid(), 0).unwrap();
    assert_eq!(join.join(), Ok(7));
    assert_eq!(sim.now(), Duration::from_millis(5));
    assert_eq!(called.get(), 1, "the upgrading step's yield was dispatched");
    // v1: two steps; v2: its first (nothing yet), then the completion.
    assert_eq!(probe.counts(), (2, 4, 2));
}
