//! What the Lua test binaries share: the hang guard, script and table
//! builders. Not every binary uses every item.
#![allow(dead_code)]

pub(crate) mod stops;

use std::sync::Arc;
use std::time::Duration;

use stepsched::{Error, JoinHandle, SchedProcess};
use stepsched_lua::{Script, Value};

/// A guard, not a timing assumption: a process that has not ended by then
/// is a hang, reported as a failure instead of a stuck test run.
pub(crate) const HANG: Duration = Duration::from_secs(120);

/// Joins `h`, failing the test if the process has not ended within [`HANG`].
pub(crate) fn done<P: SchedProcess>(h: JoinHandle<P>) -> Result<P::Output, Error> {
    h.join_timeout(HANG)
        .unwrap_or_else(|_| panic!("the process did not end within {HANG:?}"))
}

/// A script compiled under `name`.
pub(crate) fn script(name: &str, src: &str) -> Arc<Script> {
    Script::new(name, src).unwrap()
}

/// A Lua table with string keys.
pub(crate) fn table(pairs: Vec<(&str, Value)>) -> Value {
    Value::Table(
        pairs
            .into_iter()
            .map(|(k, v)| (Value::from(k), v))
            .collect(),
    )
}
