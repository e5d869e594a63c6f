//! The determinism check: run one seed twice and compare the traces.

use std::fmt;

/// Runs `run` twice with `seed` (in this process, one run after the
/// other) and compares the traces it returns line by line: the first
/// trace if they are the same, else the first line where they differ.
///
/// `run` builds a [`Sim`](crate::Sim) with the seed it is given (and the
/// trace on, as by default), runs it, and returns
/// [`trace_text`](crate::Sim::trace_text). A difference means the run
/// depends on something besides the seed: the iteration order of a
/// `HashMap` or `HashSet` with `std`'s `RandomState`, a thread-local or a
/// static that carries state from one run to the next, real time, real
/// randomness, threads of its own (see the crate documentation, "What
/// breaks replay").
///
/// ```
/// # use stepsched_process::{Context, Error, Events, Process, Status, StepOutput};
/// # struct Once;
/// # impl Process for Once {
/// #     type Input = (); type Message = (); type Response = (); type Command = &'static str; type Output = ();
/// #     fn init(&mut self, _: &Context<'_, Self>, _: &str, _: ()) -> Result<(), Error> { Ok(()) }
/// #     fn step(&mut self, _: &mut Context<'_, Self>, _: Events<'_, ()>, out: &mut StepOutput<&'static str, ()>) -> Result<(), Error> {
/// #         out.set_status(Status::Done(()));
/// #         Ok(())
/// #     }
/// # }
/// use stepsched_sim::{Sim, check_determinism};
///
/// let trace = check_determinism(7, |seed| {
///     let sim = Sim::<Once>::builder().seed(seed).build();
///     sim.submit(sim.allocate_pid(), Once, "main", ()).unwrap();
///     sim.run();
///     sim.trace_text()
/// })
/// .unwrap();
/// assert!(trace.ends_with("<0.1> end ok\n"));
/// ```
///
/// # Errors
///
/// A [`Divergence`]: the seed, the number of the first line that differs
/// and that line in each run.
pub fn check_determinism(
    seed: u64,
    mut run: impl FnMut(u64) -> String,
) -> Result<String, Divergence> {
    let first = run(seed);
    let second = run(seed);
    if first == second {
        return Ok(first);
    }
    let (mut a, mut b) = (first.lines(), second.lines());
    let mut line = 1;
    loop {
        match (a.next(), b.next()) {
            (Some(x), Some(y)) if x == y => line += 1,
            (None, None) => {
                // The same lines, different text (a missing final newline).
                return Err(Divergence {
                    seed,
                    line,
                    first: None,
                    second: None,
                });
            }
            (x, y) => {
                return Err(Divergence {
                    seed,
                    line,
                    first: x.map(str::to_owned),
                    second: y.map(str::to_owned),
                });
            }
        }
    }
}

/// Two runs of one seed that differ, found by [`check_determinism`]: the
/// first trace line (numbered from 1) that is not the same in both.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Divergence {
    /// The seed of both runs.
    pub seed: u64,
    /// The number of the first line that differs, from 1 (the same in
    /// both traces: every line before it is the same).
    pub line: usize,
    /// That line in the first run; `None` if its trace ended before it.
    pub first: Option<String>,
    /// That line in the second run; `None` if its trace ended before it.
    pub second: Option<String>,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |line: &Option<String>| match line {
            Some(line) => format!("`{line}`"),
            None => "(the trace ended)".to_owned(),
        };
        write!(
            f,
            "seed {} is not deterministic: line {} of the trace differs between two runs\n  \
             first run,  line {}: {}\n  second run, line {}: {}",
            self.seed,
            self.line,
            self.line,
            show(&self.first),
            self.line,
            show(&self.second)
        )
    }
}

impl std::error::Error for Divergence {}
