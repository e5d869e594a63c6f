//! Shutdown, with the scheduler's observable rules: cooperative processes
//! finish on their cancel event (their token cancelled first); those that
//! ignore it, or wait on handlers that never complete, are forced with
//! `Cancelled` at the (virtual) deadline; every process is closed once;
//! submits and spawns are refused with `Stopping`; only the first
//! shutdown reports; the shutdown fault begins one at a random step.

mod common;

use std::rc::Rc;
use std::time::Duration;

use common::*;
use stepsched_process::{Error, Status, SubmitError};
use stepsched_sim::{Faults, Sim};

/// Idle until cancelled; finishes with `Cancelled` on the cancel event,
/// after checking the cancel token agrees.
fn cooperative(probe: &Rc<Probe>) -> FnProc {
    FnProc::new(probe, |ctx, events, out| {
        if events.iter().any(|e| e.is_cancel()) {
            assert!(
                ctx.is_cancelled(),
                "the token is cancelled before the event"
            );
            return Err(Error::Cancelled);
        }
        out.set_status(Status::Idle);
        Ok(())
    })
}

/// Idle forever: ignores the cancel event.
fn deaf(probe: &Rc<Probe>) -> FnProc {
    FnProc::new(probe, |_, _, out| {
        out.set_status(Status::Idle);
        Ok(())
    })
}

/// Blocked forever on a yield whose handler never completes.
fn stuck_on_yield(probe: &Rc<Probe>) -> FnProc {
    let mut first = true;
    FnProc::new(probe, move |_, _, out| {
        if std::mem::take(&mut first) {
            out.push_yield(1, "never");
        }
        out.set_status(Status::Yield);
        Ok(())
    })
}

/// On its cancel event, cleans up for 5 ms (a `cleanup` yield) and then
/// finishes with 7.
fn slow_cleanup(probe: &Rc<Probe>) -> FnProc {
    FnProc::new(probe, |_, events, out| {
        if events.iter().any(|e| e.is_cancel()) {
            out.push_yield(1, "cleanup");
            out.set_status(Status::Yield);
        } else if events.iter().any(|e| e.tag() == Some(1)) {
            out.set_status(Status::Done(7));
        } else {
            out.set_status(Status::Idle);
        }
        Ok(())
    })
}

fn sim(seed: u64) -> Sim<FnProc> {
    Sim::builder()
        .seed(seed)
        .handler("never", |_, done| done.never())
        .handler("cleanup", |_, done| {
            done.complete_after(Duration::from_millis(5), Ok(0));
        })
        .build()
}

#[test]
fn cooperative_processes_finish_on_their_cancel_event() {
    let sim = sim(1);
    let probes: Vec<_> = (0..20).map(|_| Probe::new()).collect();
    let joins: Vec<_> = probes
        .iter()
        .map(|p| submit(&sim, cooperative(p)))
        .collect();
    sim.run();
    assert!(!sim.is_stopping());
    let report = sim.shutdown(Duration::from_secs(10));
    assert!(sim.is_stopping());
    assert_eq!((report.cancelled, report.forced), (20, 0));
    assert_eq!(sim.now(), Duration::ZERO, "nothing waited for the deadline");
    for (join, probe) in joins.into_iter().zip(&probes) {
        assert!(join.is_finished(), "shutdown returned before a result");
        assert!(matches!(join.join(), Err(Error::Cancelled)));
        assert_eq!(probe.counts(), (1, 2, 1));
    }
}

#[test]
fn processes_that_ignore_cancel_or_wait_forever_are_forced_at_the_deadline() {
    let sim = sim(2);
    let mut all = Vec::new();
    for i in 0..9 {
        let probe = Probe::new();
        let p = match i % 3 {
            0 => cooperative(&probe),
            1 => deaf(&probe),
            _ => stuck_on_yield(&probe),
        };
        all.push((i, submit(&sim, p), probe));
    }
    sim.run();
    let report = sim.shutdown(Duration::from_millis(50));
    assert_eq!((report.cancelled, report.forced), (9, 6));
    assert_eq!(sim.now(), Duration::from_millis(50));
    for (i, join, probe) in all {
        assert!(matches!(join.join(), Err(Error::Cancelled)), "process {i}");
        // Each saw its cancel event in a second step, and was closed once.
        assert_eq!(probe.counts(), (1, 2, 1), "process {i}");
    }
    assert!(sim.trace_text().contains("shutdown deadline: forcing 6"));
}

#[test]
fn a_cleanup_within_the_deadline_finishes_one_past_it_is_forced() {
    for (deadline, expected, now, forced) in [(10, Ok(7), 5, 0), (2, Err(Error::Cancelled), 2, 1)] {
        let sim = sim(3);
        let probe = Probe::new();
        let join = submit(&sim, slow_cleanup(&probe));
        sim.run();
        let report = sim.shutdown(Duration::from_millis(deadline));
        assert_eq!((report.cancelled, report.forced), (1, forced));
        assert_eq!(join.join(), expected, "deadline {deadline} ms");
        assert_eq!(sim.now(), Duration::from_millis(now));
        assert_eq!(probe.counts().2, 1);
    }
}

#[test]
fn submits_and_spawns_are_refused_once_stopping_and_only_the_first_shutdown_reports() {
    let sim = sim(4);
    let probe = Probe::new();
    // On its cancel event it tries to spawn; the spawn must be refused.
    let spawner = FnProc::new(&probe, |ctx, events, out| {
        if events.iter().any(|e| e.is_cancel()) {
            let child = FnProc::new(&Probe::new(), |_, _, _| Ok(()));
            let refused = matches!(ctx.spawn(child, "main", 0), Err(SubmitError::Stopping(_)));
            out.set_status(Status::Done(u32::from(refused)));
        } else {
            out.set_status(Status::Idle);
        }
        Ok(())
    });
    let join = submit(&sim, spawner);
    sim.run();
    let report = sim.shutdown(Duration::from_secs(1));
    assert_eq!((report.cancelled, report.forced), (1, 0));
    assert_eq!(join.join(), Ok(1), "the spawn was not refused");

    let late = Probe::new();
    let err = sim
        .submit(sim.allocate_pid(), cooperative(&late), "main", 0)
        .unwrap_err();
    assert!(matches!(err, SubmitError::Stopping(_)), "{err:?}");
    assert!(err.into_process().is_some());
    assert_eq!(
        late.counts(),
        (0, 0, 0),
        "a refused process is not initialized"
    );
    let again = sim.shutdown(Duration::from_secs(1));
    assert_eq!((again.cancelled, again.forced), (0, 0));
}

/// Asks for `left` ticks of 1 ms, one at a time, and finishes with the
/// number it got; stops with `Cancelled` on its cancel event.
fn ticker(probe: &Rc<Probe>, mut left: u32) -> FnProc {
    let mut got = 0;
    FnProc::new(probe, move |_, events, out| {
        for e in &events {
            if e.is_cancel() {
                return Err(Error::Cancelled);
            }
            got += 1;
            left -= 1;
        }
        if left == 0 {
            out.set_status(Status::Done(got));
        } else {
            out.push_yield(u64::from(left), "tick");
            out.set_status(Status::Yield);
        }
        Ok(())
    })
}

/// Runs ten tickers of 20 ticks under the shutdown fault; each one's
/// result, the run's shutdown report, the trace.
fn with_the_shutdown_fault(
    seed: u64,
) -> (
    Vec<Result<u32, Error>>,
    Option<stepsched_sim::ShutdownReport>,
    String,
) {
    let sim: Sim<FnProc> = Sim::builder()
        .seed(seed)
        .faults(Faults {
            shutdown: 0.01,
            shutdown_deadline: Duration::from_millis(3),
            ..Faults::default()
        })
        .handler("tick", |_, done| {
            done.complete_after(Duration::from_millis(1), Ok(1));
        })
        .build();
    let probes: Vec<_> = (0..10).map(|_| Probe::new()).collect();
    let joins: Vec<_> = probes.iter().map(|p| submit(&sim, ticker(p, 20))).collect();
    let report = sim.run();
    assert_eq!(report.live, 0, "seed {seed}");
    for p in &probes {
        assert_eq!(p.counts().2, 1, "seed {seed}: closed once");
    }
    let results = joins.into_iter().map(|j| j.join()).collect();
    (results, report.shutdown, sim.trace_text())
}

#[test]
fn the_shutdown_fault_cancels_every_live_process_at_a_random_step() {
    let mut fired = 0;
    for seed in 0..40 {
        let (results, shutdown, trace) = with_the_shutdown_fault(seed);
        match shutdown {
            None => {
                assert!(results.iter().all(|r| *r == Ok(20)), "seed {seed}");
                assert!(!trace.contains("shutdown"), "seed {seed}");
            }
            Some(report) => {
                fired += 1;
                assert!(trace.contains("shutdown (fault)"), "seed {seed}");
                let cancelled = results.iter().filter(|r| r.is_err()).count();
                assert!(
                    results
                        .iter()
                        .all(|r| *r == Ok(20) || *r == Err(Error::Cancelled)),
                    "seed {seed}: {results:?}"
                );
                // Every process live at the shutdown got its cancel event and
                // stopped on it: none was forced (a tick is 1 ms, the
                // deadline 3 ms).
                assert_eq!(report.cancelled, cancelled, "seed {seed}");
                assert_eq!(report.forced, 0, "seed {seed}");
            }
        }
        assert_eq!(
            with_the_shutdown_fault(seed).2,
            trace,
            "seed {seed} replays"
        );
    }
    assert!(
        fired > 5 && fired < 40,
        "the fault fired on {fired} of 40 seeds"
    );
}
