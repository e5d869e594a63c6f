//! The proptest strategies (the `proptest` feature): a property of the
//! planted-bug counter (see `examples/lost_increment/counter.rs`) checked
//! over many schedules — the fixed counter holds on all of them, and the
//! buggy one's failure shrinks to a schedule that replays it with few
//! faults and a short trace.

#[path = "../examples/lost_increment/counter.rs"]
#[allow(dead_code)]
mod counter;

use std::time::Duration;

use counter::count_with;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestError, TestRng, TestRunner};
use stepsched_sim::Faults;
use stepsched_sim::strategy::{Schedule, schedules};

/// Every fault the counter can meet without losing a client: delays,
/// reordering, short batches, handler faults on the store are excluded
/// (they fail the counter with an error, not a wrong count).
fn max() -> Faults {
    Faults {
        delay: 0.5,
        max_delay: Duration::from_millis(3),
        reorder: 0.5,
        short_batch: 0.5,
        ..Faults::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_fixed_counter_counts_both_increments_on_every_schedule(schedule in schedules(max())) {
        prop_assert!(schedule.faults.delay <= 0.5 && schedule.faults.terminate == 0.0);
        let (count, trace) = count_with(schedule.builder(), true);
        prop_assert_eq!(count, 2, "{:?}\n{}", schedule, trace);
    }
}

#[test]
fn the_buggy_counters_failure_shrinks_to_a_short_schedule() {
    let config = Config {
        cases: 512,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::deterministic_rng(config.rng_algorithm);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let outcome = runner.run(&schedules(max()), |schedule| {
        let (count, _) = count_with(schedule.builder(), false);
        prop_assert_eq!(count, 2);
        Ok(())
    });
    let minimal: Schedule = match outcome {
        Err(TestError::Fail(_, minimal)) => minimal,
        other => panic!("the lost increment was not found: {other:?}"),
    };
    // The minimal schedule replays the failure, byte for byte.
    let (count, trace) = count_with(minimal.builder(), false);
    assert_eq!(count, 1, "{minimal:?}");
    assert_eq!(count_with(minimal.builder(), false), (count, trace.clone()));
    // The bug needs a delayed acknowledgment; the other faults shrank
    // away, and the trace is a handful of lines.
    assert!(minimal.faults.delay > 0.0, "{minimal:?}");
    assert_eq!(minimal.faults.short_batch, 0.0, "{minimal:?}");
    assert_eq!(minimal.faults.reorder, 0.0, "{minimal:?}");
    println!("{minimal:?}\n{trace}");
    assert!(trace.lines().count() <= 20, "{minimal:?}\n{trace}");
}
