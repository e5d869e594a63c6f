//! A step is handed at most `MAX_BATCH` events, as in the scheduler; the
//! rest wait, in order, and the process stays runnable even if it said
//! `Idle`. The short-batch fault hands it fewer, losing and reordering
//! nothing within a sender.

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use common::*;
use stepsched_process::{Event, Status};
use stepsched_sim::{Faults, MAX_BATCH, Sim};

/// Idle forever; records each step's batch (the message values).
fn recorder(probe: &Rc<Probe>, seen: &Rc<RefCell<Vec<Vec<u32>>>>) -> FnProc {
    let seen = Rc::clone(seen);
    FnProc::new(probe, move |_, events, out| {
        let batch = events.into_iter().filter_map(Event::into_message).collect();
        seen.borrow_mut().push(batch);
        out.set_status(Status::Idle);
        Ok(())
    })
}

#[test]
fn a_step_takes_at_most_max_batch_events_and_the_rest_wait_in_order() {
    assert_eq!(MAX_BATCH, 256);
    let sim: Sim<FnProc> = Sim::builder().seed(9).build();
    let seen = Rc::default();
    let probe = Probe::new();
    let join = submit(&sim, recorder(&probe, &seen));
    for n in 0..600 {
        sim.send(join.pid(), n).unwrap();
    }
    sim.run();
    let seen = seen.borrow();
    let sizes: Vec<usize> = seen.iter().map(Vec::len).collect();
    assert_eq!(sizes, [256, 256, 88]);
    let all: Vec<u32> = seen.concat();
    assert_eq!(all, (0..600).collect::<Vec<_>>());
}

#[test]
fn short_batches_lose_nothing_and_keep_the_order() {
    let sizes = |short_batch: f64| {
        let sim: Sim<FnProc> = Sim::builder()
            .seed(11)
            .faults(Faults {
                short_batch,
                ..Faults::default()
            })
            .build();
        let seen = Rc::default();
        let probe = Probe::new();
        let join = submit(&sim, recorder(&probe, &seen));
        for n in 0..100 {
            sim.send(join.pid(), n).unwrap();
        }
        sim.run();
        let seen = seen.borrow();
        let all: Vec<u32> = seen.concat();
        assert_eq!(all, (0..100).collect::<Vec<_>>(), "short {short_batch}");
        seen.iter().map(Vec::len).collect::<Vec<_>>()
    };
    assert_eq!(sizes(0.0), [100]);
    let short = sizes(1.0);
    // Each step takes 1 to all of the events waiting, at random: the
    // hundred come in several steps.
    assert!(short.len() > 1, "{short:?}");
    assert!(short.iter().all(|n| *n >= 1), "{short:?}");
}
