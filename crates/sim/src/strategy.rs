//! [proptest](https://docs.rs/proptest) strategies for seeds and fault
//! settings (the `proptest` feature), so that a property of a user's
//! processes is checked over many schedules, and a failure shrinks to a
//! simple one: each fault probability shrinks towards 0 (first straight
//! to 0, kept there if the property still fails), so the minimal failing
//! [`Schedule`] injects only the faults the failure needs, and its trace
//! holds little else.
//!
//! ```
//! use proptest::prelude::*;
//! use stepsched_sim::Faults;
//! use stepsched_sim::strategy::{Schedule, schedules};
//!
//! proptest! {
//!     #![proptest_config(ProptestConfig::with_cases(16))]
//!     fn my_property(schedule in schedules(Faults { delay: 0.3, reorder: 0.5, ..Faults::default() })) {
//!         // let sim: Sim<MyProcess> = schedule.builder().handler(...).build();
//!         prop_assert!(schedule.faults.delay <= 0.3);
//!     }
//! }
//! # my_property();
//! ```

use std::time::Duration;

use proptest::prelude::*;
use stepsched_process::{Command, Process};

use crate::{Builder, Faults, Sim};

/// One schedule of a simulation: the seed and the faults. Print it (its
/// `Debug`, as proptest does for a failing case) to replay the failure:
/// build a [`Sim`] with [`builder`](Self::builder), or with `.seed(...)`
/// and `.faults(...)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    /// The seed of the simulator's generator.
    pub seed: u64,
    /// The faults to inject.
    pub faults: Faults,
}

impl Schedule {
    /// A [`Builder`] with this schedule's seed and faults.
    #[must_use]
    pub fn builder<P: Process + 'static>(&self) -> Builder<P>
    where
        P::Command: Command,
    {
        Sim::builder().seed(self.seed).faults(self.faults)
    }
}

/// Any seed; shrinks towards 0.
pub fn seeds() -> impl Strategy<Value = u64> {
    any::<u64>()
}

/// A probability in `0..=max` (exactly 0 when `max` is 0, or not a
/// positive number), shrinking towards 0.
fn probability(max: f64) -> BoxedStrategy<f64> {
    if max > 0.0 {
        (0.0..=max.min(1.0)).boxed()
    } else {
        Just(0.0).boxed()
    }
}

/// A duration of 1 ms to `max` (at least 1 ms), shrinking towards 1 ms.
fn duration(max: Duration) -> BoxedStrategy<Duration> {
    let max = u64::try_from(max.as_millis()).unwrap_or(u64::MAX).max(1);
    (1..=max).prop_map(Duration::from_millis).boxed()
}

/// Fault settings up to `max` (its clock skew and drift are taken as they
/// are, not drawn): each probability of `max` bounds the
/// drawn one (0 keeps that fault off), and `max_delay` and
/// `shutdown_deadline` bound the drawn ones (from 1 ms).
pub fn faults(max: Faults) -> impl Strategy<Value = Faults> {
    (
        (
            probability(max.delay),
            duration(max.max_delay),
            probability(max.reorder),
            probability(max.short_batch),
            probability(max.terminate),
        ),
        (
            probability(max.handler_error),
            probability(max.handler_panic),
            probability(max.never_complete),
            probability(max.shutdown),
            duration(max.shutdown_deadline),
        ),
    )
        .prop_map(
            move |(
                (delay, max_delay, reorder, short_batch, terminate),
                (handler_error, handler_panic, never_complete, shutdown, shutdown_deadline),
            )| Faults {
                delay,
                max_delay,
                reorder,
                short_batch,
                terminate,
                handler_error,
                handler_panic,
                never_complete,
                shutdown,
                shutdown_deadline,
                ..max
            },
        )
}

/// A seed and fault settings up to `max` (see [`faults`]).
pub fn schedules(max: Faults) -> impl Strategy<Value = Schedule> {
    (seeds(), faults(max)).prop_map(|(seed, faults)| Schedule { seed, faults })
}
