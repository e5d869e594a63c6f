//! Join handles: `join` runs the simulation until its process ends (and
//! no further), `join_timeout` stops at a virtual deadline, a process that
//! can never end makes `join` panic with the seed, the result is taken
//! once, and a dropped simulator leaves `Cancelled` results.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use common::*;
use stepsched_process::{Error, Status};
use stepsched_sim::Sim;

/// Yields one `sleep` of `ms` milliseconds and finishes with `ms`.
fn sleeper(probe: &std::rc::Rc<Probe>, ms: u32) -> FnProc {
    FnProc::new(probe, move |_, events, out| {
        if events.is_empty() {
            out.push_yield(1, "sleep");
            out.set_status(Status::Yield);
            return Ok(());
        }
        let slept = events[0].response().copied().unwrap_or(0);
        assert_eq!(slept, ms);
        out.set_status(Status::Done(ms));
        Ok(())
    })
}

fn sim(seed: u64) -> Sim<FnProc> {
    // Each sleeper's command carries no duration: the handler sleeps by
    // the process's PID (PID n sleeps 10^n ms).
    Sim::builder()
        .seed(seed)
        .handler("sleep", |_, done| {
            let ms = 10u32.pow(done.pid().number() as u32);
            done.complete_after(Duration::from_millis(ms.into()), Ok(ms));
        })
        .build()
}

/// Waits for messages forever.
fn idler(probe: &std::rc::Rc<Probe>) -> FnProc {
    FnProc::new(probe, |_, _, out| {
        out.set_status(Status::Idle);
        Ok(())
    })
}

#[test]
fn join_runs_until_its_process_ends_and_no_further() {
    let sim = sim(3);
    let probe = Probe::new();
    let short = submit(&sim, sleeper(&probe, 10));
    let long = submit(&sim, sleeper(&probe, 100));
    assert!(!short.is_finished());
    assert_eq!(short.join(), Ok(10));
    assert_eq!(sim.now(), Duration::from_millis(10));
    assert!(
        sim.is_live(long.pid()),
        "the other process was run to its end"
    );
    assert!(!long.is_finished());
    assert_eq!(long.join(), Ok(100));
    assert_eq!(sim.now(), Duration::from_millis(100));
    assert_eq!(probe.counts(), (2, 4, 2));
}

#[test]
fn join_timeout_stops_at_the_virtual_deadline_and_hands_the_handle_back() {
    let sim = sim(5);
    let probe = Probe::new();
    let long = submit(&sim, sleeper(&probe, 10));
    // PID 1 sleeps 10 ms: not done within 4 ms.
    let long = long.join_timeout(Duration::from_millis(4)).unwrap_err();
    assert_eq!(sim.now(), Duration::from_millis(4));
    assert!(!long.is_finished());
    let long = long.join_timeout(Duration::from_millis(4)).unwrap_err();
    assert_eq!(sim.now(), Duration::from_millis(8));
    assert_eq!(long.join_timeout(Duration::from_secs(1)).ok(), Some(Ok(10)));
    assert_eq!(
        sim.now(),
        Duration::from_millis(10),
        "no later than the end"
    );

    // A process that can never end: the clock moves to the deadline.
    let idle = submit(&sim, idler(&probe));
    let idle = idle.join_timeout(Duration::from_secs(2)).unwrap_err();
    assert_eq!(sim.now(), Duration::from_millis(2010));
    sim.send(idle.pid(), 1).unwrap();
    assert!(idle.join_timeout(Duration::ZERO).is_err());
}

#[test]
fn joining_a_process_that_can_never_end_panics_with_the_seed() {
    let sim = sim(42);
    let probe = Probe::new();
    let idle = submit(&sim, idler(&probe));
    let pid = idle.pid();
    let panic = catch_unwind(AssertUnwindSafe(|| idle.join())).unwrap_err();
    let message = panic.downcast_ref::<String>().unwrap();
    assert!(message.contains("can never end"), "{message}");
    assert!(message.contains("seed 42"), "{message}");
    assert!(message.contains(&pid.to_string()), "{message}");
    assert!(sim.is_live(pid));

    let spinning: Sim<FnProc> = Sim::builder().max_steps(50).build();
    let spin = submit(
        &spinning,
        FnProc::new(&probe, |_, _, out| {
            out.set_status(Status::Continue);
            Ok(())
        }),
    );
    let panic = catch_unwind(AssertUnwindSafe(|| spin.join())).unwrap_err();
    let message = panic.downcast_ref::<String>().unwrap();
    assert!(message.contains("step limit"), "{message}");
}

#[test]
fn the_result_is_taken_once_by_the_handle_or_by_take_result() {
    let sim = sim(1);
    let probe = Probe::new();
    let a = submit(&sim, sleeper(&probe, 10));
    let b = submit(&sim, sleeper(&probe, 100));
    sim.run();
    assert!(a.is_finished() && b.is_finished());
    assert_eq!(a.take_result(), Some(Ok(10)));
    assert_eq!(a.take_result(), None);
    assert_eq!(sim.take_result(a.pid()), None);
    assert_eq!(sim.take_result(b.pid()), Some(Ok(100)));
    let panic = catch_unwind(AssertUnwindSafe(|| b.join())).unwrap_err();
    let message = panic.downcast_ref::<String>().unwrap();
    assert!(message.contains("taken"), "{message}");
}

#[test]
fn a_dropped_simulator_leaves_cancelled_results_to_its_handles() {
    let sim = sim(1);
    let probe = Probe::new();
    let idle = submit(&sim, idler(&probe));
    sim.run();
    drop(sim);
    assert!(idle.is_finished());
    assert!(matches!(idle.join(), Err(Error::Cancelled)));
    assert_eq!(probe.counts(), (1, 1, 1));
}

#[test]
fn a_join_from_inside_a_handler_is_refused() {
    use std::cell::RefCell;
    use std::rc::Rc;

    let held: Rc<RefCell<Option<stepsched_sim::JoinHandle<FnProc>>>> = Rc::default();
    let inside = Rc::clone(&held);
    let sim: Sim<FnProc> = Sim::builder()
        .handler("join", move |_, done| {
            let other = inside.borrow_mut().take().unwrap();
            let _ = other.join();
            done.complete(Ok(0));
        })
        .build();
    let probe = Probe::new();
    let asker = FnProc::new(&probe, |_, events, out| {
        match events.first() {
            None => {
                out.push_yield(1, "join");
                out.set_status(Status::Yield);
            }
            Some(e) => match e.error() {
                Some(Error::Panicked(m)) => {
                    return Err(Error::Panicked(m.clone()));
                }
                _ => out.set_status(Status::Done(1)),
            },
        }
        Ok(())
    });
    let asker = submit(&sim, asker);
    *held.borrow_mut() = Some(submit(&sim, idler(&probe)));
    // The handler's join panics; the panic is the handler's, so the yield
    // completes with `Panicked`, as any panicking handler's does.
    assert!(matches!(asker.join(), Err(Error::Panicked(_))));
}
